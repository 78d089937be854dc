"""docs/mathematics.md §6 is enough to re-implement the keyed PRF and the detector.

The constants (§6.1) and the worked example (§6.3) are read from the page itself, so the
page and the code cannot drift apart: an independent implementation written from §6 with
``hashlib`` and Python integers only (no specbound code) must reproduce the worked
example's numbers and specbound's labels, uniforms, pivots, scores and log p-values
exactly (differences 0.0).  Deterministic (fixed keys and seeds); cost well under a second.
"""

from __future__ import annotations

import hashlib
import math
import re
from pathlib import Path

import numpy as np
import pytest
from scipy import special

from specbound import sim
from specbound.sim import prf

ROOT = Path(__file__).resolve().parents[1]
MATH = (ROOT / "docs" / "mathematics.md").read_text()
SECTION = MATH[MATH.index("## §6 "):MATH.index("## §7 ")]
MASK = (1 << 64) - 1


def _table_value(name: str) -> str:
    """The second cell of the §6 table row whose first cell is ``name``."""
    m = re.search(r"^\| " + re.escape(name) + r" \| (.+?) \|", SECTION, flags=re.M)
    assert m, f"row {name!r} missing from docs/mathematics.md §6"
    return m.group(1)


def _hex(name: str) -> int:
    return int(re.search(r"0x[0-9A-Fa-f]+", _table_value(name)).group(0), 16)


def _bytes_literal(name: str) -> bytes:
    return re.search(r'b"([^"]*)"', _table_value(name)).group(1).encode("ascii")


# ---------------------------------------------------------------- from the docs alone

G = _hex("`G`")
M1, M2 = (int(x, 16) for x in re.findall(r"0x[0-9A-Fa-f]+", _table_value("`M1`, `M2`")))
PERSON = _bytes_literal("`PERSON`")
PERSON_ID = _bytes_literal("`PERSON_ID`")
SHIFTS = tuple(int(x) for x in re.findall(r"\d+", _table_value("shifts of `mix`")))


def doc_encode(key) -> bytes:
    if isinstance(key, int):
        return b"i:" + str(key).encode("ascii")
    if isinstance(key, str):
        return b"s:" + key.encode("utf-8")
    return b"b:" + bytes(key)


def doc_digest(key) -> bytes:
    return hashlib.blake2b(doc_encode(key), digest_size=32, person=PERSON).digest()


def doc_label(digest: bytes, window_tokens) -> int:
    msg = digest + b"".join(int(t).to_bytes(8, "little", signed=True) for t in window_tokens)
    return int.from_bytes(hashlib.blake2b(msg, digest_size=8, person=PERSON).digest(),
                          "little")


def doc_mix(z: int) -> int:
    a, b, c = SHIFTS
    z = ((z ^ (z >> a)) * M1) & MASK
    z = ((z ^ (z >> b)) * M2) & MASK
    return z ^ (z >> c)


def doc_uniform(label: int, token: int, arrival: int) -> float:
    s = doc_mix((doc_mix((label + G * (token + 1)) & MASK) + G * (arrival + 1)) & MASK)
    return (float(s >> 12) + 0.5) * 2.0 ** -52


def doc_detect(tokens, prompt_length, key, window):
    """§6.4: positions, dedup, pivots, Aaronson's score and its Gamma(M, 1) log p-value."""
    digest = doc_digest(key)
    seen, pivots, positions = set(), [], []
    for t in range(prompt_length, len(tokens)):
        ctx = tokens[:t] if window is None else tokens[max(0, t - window):t]
        if window is not None:
            pair = (tuple(ctx), tokens[t])
            if pair in seen:
                continue
            seen.add(pair)
        pivots.append(doc_uniform(doc_label(digest, ctx), tokens[t], 0))
        positions.append(t)
    S = float(np.array([-math.log1p(-u) for u in pivots]).sum())
    return positions, pivots, S, math.log(special.gammaincc(len(pivots), S))


# ---------------------------------------------------------------- the checks


def test_constants_in_the_docs_are_the_codes():
    assert (G, M1, M2) == (int(prf._GOLDEN), int(prf._M1), int(prf._M2))
    assert PERSON == prf._PERSON and PERSON_ID == prf._PERSON_ID
    assert SHIFTS == (int(prf._S30), int(prf._S27), int(prf._S31))


def test_documented_worked_example_and_detector_from_the_docs():
    key, ctx, window, token = 42, [3, 1, 4, 1, 5], 4, 2
    # the worked example's numbers, as the page prints them
    D = bytes.fromhex(re.search(r"[0-9a-f]{64}", _table_value("`D` (hex)")).group(0))
    label_digest = re.search(r"`([0-9a-f]{16})`", _table_value("label digest (8 bytes, hex)"))
    label = int(re.search(r"= (\d+)", _table_value("label (little-endian)")).group(1))
    s = _hex("`s = mix(·)`")
    u = float(re.search(r"`([0-9.]+)`", _table_value("`u`")).group(1))
    u1 = float(re.search(r"`([0-9.]+)`", _table_value("`u` at arrival 1")).group(1))
    kid = re.search(r"`([0-9a-f]{8})`", _table_value("`key_id(42)`")).group(1)
    assert _table_value("`enc(42)`") == '`b"i:42"`'
    # the independent implementation gives them ...
    assert doc_digest(key) == D
    msg = D + b"".join(t.to_bytes(8, "little") for t in ctx[-window:])
    assert hashlib.blake2b(msg, digest_size=8, person=PERSON).hexdigest() == \
        label_digest.group(1)
    assert doc_label(D, ctx[-window:]) == label
    assert doc_mix((doc_mix((label + G * (token + 1)) & MASK) + G) & MASK) == s
    assert doc_uniform(label, token, 0) == u and doc_uniform(label, token, 1) == u1
    assert hashlib.blake2b(D, digest_size=4, person=PERSON_ID).hexdigest() == kid
    # ... and so does specbound
    assert bytes(prf.key_digest(key)) == D and prf.key_id(key) == kid
    assert int(prf.context_label(key, ctx, window)) == label
    got = sim.keyed_uniforms(key, ctx, [token], 2, window=window)[0]
    assert got[0] - u == 0.0 and got[1] - u1 == 0.0


@pytest.mark.parametrize("key", [7, -3, "clé", b"\x00raw"])
def test_independent_prf_matches_on_random_contexts(key):
    rng = np.random.default_rng(5)
    D = doc_digest(key)
    assert bytes(prf.key_digest(key)) == D
    for window in (0, 1, 3, None):
        ctx = rng.integers(0, 50_000, size=int(rng.integers(0, 9))).tolist()
        toks = rng.integers(0, 50_000, size=5).tolist()
        win = ctx if window is None else ctx[max(0, len(ctx) - window):]
        label = doc_label(D, win)
        assert int(prf.context_label(key, ctx, window)) == label
        ours = np.array([[doc_uniform(label, t, j) for j in range(3)] for t in toks])
        diff = sim.keyed_uniforms(key, ctx, toks, 3, window=window) - ours
        assert np.all(diff == 0.0)


@pytest.mark.parametrize("window", [3, None])
def test_independent_detector_matches_sim_detect(window):
    """A watermarked run (pfr, repeated windows in a 24-token vocabulary, so dedup acts)
    and an unwatermarked one: positions, pivots, score and log p-value equal to 0.0."""
    target = sim.SyntheticLM(24, context_length=2, seed=3)
    draft = sim.SyntheticLM(24, context_length=1, seed=4, temperature=1.4)
    prompt = [5, 6, 7]
    res = sim.speculative_decode(target, draft, prompt, "pfr", L=3, key="k", window=window,
                                 max_new_tokens=60, seed=1)
    unmarked = sim.speculative_decode(target, draft, prompt, "vsps", L=3, max_new_tokens=60,
                                      seed=1)
    for tokens in (res.tokens, unmarked.tokens):
        seq = [int(t) for t in tokens]
        positions, pivots, S, log_p = doc_detect(seq, len(prompt), "k", window)
        det = sim.detect(np.asarray(seq), len(prompt), "k", window=window)
        assert det.positions.tolist() == positions
        assert np.all(det.pivots - np.array(pivots) == 0.0)
        assert det.score - S == 0.0 and det.log_pvalue - log_p == 0.0
    if window is not None:
        assert len(positions) < len(seq) - len(prompt)  # dedup skipped repeated pairs
    assert sim.detect(res, "k").log_pvalue < -10  # the watermark is there
