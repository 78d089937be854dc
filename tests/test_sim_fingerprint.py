"""The decoder fingerprint: every compiled decoding path's outputs, hashed, equal recorded ones.

Every decoder of :data:`specbound.sim.decoders.DECODER_SPECS` with each of its options
(``reweight="gamma"``, ``unkeyed="fresh"``, ``residual="keyed"``, ``repeats="mask"`` /
``"skip"`` for the keyed ones), ``B`` in 1, 2, 4 (multi-draft decoders), ``L`` in 1, 3, runs
through ``speculative_decode`` (the one-prompt path, with the generator it advances) and
``speculative_decode_batch`` (serial and parallel, drafts stored or not); the keyed outputs
go through ``detect`` / ``detect_many``; every lossy rule runs through ``lossy_decode`` and
``lossy_decode_batch``.  Every output array (tokens, blocks, decisions, pivots, drafts,
counts, skip flags, detection pivots and scores, the generator's state after the run) is
hashed with SHA-256 per case and compared with ``tests/data/decoder_fingerprint.json``:
any change of a default output fails here, naming the case.  Integers, booleans and tokens
are hashed bit for bit; floating-point outputs (pivots, scores, p-values) at float32
precision, because NumPy's vectorised ``log`` / ``exp`` differ in the last bit of a float64
between CPU instruction sets (the AVX-512 and AVX2 loops of NumPy 2.x: a detection score
of a 9-token sequence moved by one unit in the last place on an AVX-512 machine), while a
change of the code moves them far more than float32's resolution (2^-24 relative).

The recorded hashes are rewritten (only when an output is meant to change) with
``python -m tests.test_sim_fingerprint --write``.  The comparison is deterministic.
"""

from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import fields
from pathlib import Path

import numpy as np

from specbound.sim import (
    MarkovLM,
    SyntheticLM,
    detect,
    detect_many,
    lossy_decode,
    lossy_decode_batch,
    speculative_decode,
    speculative_decode_batch,
)
from specbound.sim.decoders import DECODER_SPECS
from specbound.sim.results import DecodeResult

DATA = Path(__file__).parent / "data" / "decoder_fingerprint.json"
KEY = "fingerprint"
N_NEW = 11
PROMPTS = [np.array([1, 2, 0], np.int64), np.array([2], np.int64), np.array([], np.int64)]
SEEDS = [5, 6, 7]


def _models(kind):
    if kind == "markov":
        return MarkovLM.random(3, seed=21), MarkovLM.random(3, seed=22, concentration=0.7)
    t = SyntheticLM(40, 2, seed=7)
    return t, t.draft(0.4, seed=3)


class _Hash:
    def __init__(self):
        self.h = hashlib.sha256()

    def add(self, name, x):
        self.h.update(name.encode())
        if isinstance(x, np.ndarray):
            self.h.update(f"{x.dtype}{x.shape}".encode())
            if x.dtype.kind == "f":  # float32 resolution: the module docstring says why
                x = x.astype(np.float32)
            self.h.update(np.ascontiguousarray(x).tobytes())
        elif isinstance(x, float | np.floating):
            self.h.update(repr(float(np.float32(x))).encode())
        elif isinstance(x, tuple | list):
            self.h.update(f"[{len(x)}]".encode())
            for i, y in enumerate(x):
                self.add(f"{name}.{i}", y)
        else:
            self.h.update(repr(x).encode())

    def result(self, tag, r):
        for f in fields(DecodeResult):
            self.add(f"{tag}.{f.name}", getattr(r, f.name))

    def detection(self, tag, d):
        for name in ("score", "log_pvalue", "anlppt", "n_scored", "pivots", "positions"):
            self.add(f"{tag}.{name}", getattr(d, name))

    def hexdigest(self):
        return self.h.hexdigest()


def _decoder_cases():
    """(case id, decoder, model kind, keyword arguments), about 170 cases."""
    out = []
    for name, spec in DECODER_SPECS.items():
        opt_sets = [{}]
        if spec.keyed:
            opt_sets += [dict(repeats="mask"), dict(repeats="skip")]
        if "reweight" in spec.options:
            opt_sets += [dict(reweight="gamma")]
            if spec.keyed:
                opt_sets += [dict(reweight="gamma", repeats="skip")]
        if "unkeyed" in spec.options:
            opt_sets += [dict(unkeyed="fresh")]
        if "residual" in spec.options:
            opt_sets += [dict(residual="keyed"), dict(residual="keyed", repeats="skip")]
        Bs = (1, 2, 4) if spec.multi_draft else (1,)
        for opts in opt_sets:
            for B in Bs:
                for L in (1, 3):
                    for kind in ("synthetic", "markov"):
                        if kind == "markov" and B == 2:
                            continue
                        window = 2 if ("repeats" in opts or kind == "markov") else None
                        kw = dict(L=L, B=B, window=window, **opts)
                        tag = "-".join([name, kind, f"B{B}", f"L{L}", f"w{window}",
                                        *(f"{k}={v}" for k, v in opts.items())])
                        out.append((tag, name, kind, kw))
    return out


def _lossy_cases():
    rng = np.random.default_rng(3)
    allowed = rng.random(40) < 0.7
    allowed[0] = True
    half = rng.random(40) < 0.5
    return [
        ("lossless", {}),
        ("interpolation", {"lam": 0.3}),
        ("fuzzy", {"threshold": 0.3}),
        ("fuzzy", {"threshold": 0.15, "divergence": "js"}),
        ("lenience", {"ell": 0.5}),
        ("judge", {"judge": rng.random(40) < 0.5}),
        ("truncation", {"allowed": allowed}),
        ("truncation", {"allowed": allowed, "on_reject": "target"}),
        ("ceiling", {"ell": 0.4, "completion": "renormalize"}),
        ("truncation_ceiling", {"ell": 0.4, "allowed": half}),
        ("contrastive", {"beta": 0.5, "alpha": 0.2}),
    ]


def decoder_hash(name, kind, kw) -> str:
    """The hash of every output of one decoder case (module docstring)."""
    target, draft = _models(kind)
    keyed = DECODER_SPECS[name].keyed
    key = KEY if keyed else None
    h = _Hash()
    rng = np.random.default_rng(SEEDS[0])
    r = speculative_decode(target, draft, PROMPTS[0], name, key=key, max_new_tokens=N_NEW,
                           seed=rng, **kw)
    h.result("single", r)
    h.add("single.rng", repr(rng.bit_generator.state))
    for store in (False, True):
        for parallel in (False, True):
            if parallel and not store:
                continue
            b = speculative_decode_batch(target, draft, PROMPTS, name, key=key,
                                         max_new_tokens=N_NEW, seed=SEEDS, store_drafts=store,
                                         parallel=parallel, **kw)
            for i in range(len(b)):
                h.result(f"batch{store}{parallel}.{i}", b[i])
    if keyed:
        h.detection("detect", detect(r, KEY))
        batch = [b[i] for i in range(len(b))]
        h.detection("detect_many", detect_many(batch, KEY))
        if DECODER_SPECS[name].acceptance == "keyed_coin":
            h.detection("detect_coin", detect(r, KEY, coin_threshold=0.5))
    return h.hexdigest()


def lossy_hash(rule, params) -> str:
    target, draft = _models("synthetic")
    h = _Hash()
    for L in (1, 3):
        rng = np.random.default_rng(SEEDS[1])
        r = lossy_decode(target, draft, PROMPTS[0], rule, L=L, max_new_tokens=N_NEW,
                         seed=rng, **params)
        h.result(f"single{L}", r)
        h.add(f"single{L}.rng", repr(rng.bit_generator.state))
        for store, parallel in ((False, False), (True, True)):
            b = lossy_decode_batch(target, draft, PROMPTS, rule, L=L, max_new_tokens=N_NEW,
                                   seed=SEEDS, store_drafts=store, parallel=parallel, **params)
            for i in range(len(b)):
                h.result(f"batch{L}{store}{parallel}.{i}", b[i])
    return h.hexdigest()


def all_cases():
    """Case id -> a function of no arguments that returns its hash."""
    cases = {f"decoder:{tag}": (lambda n=n, k=k, kw=kw: decoder_hash(n, k, kw))
             for tag, n, k, kw in _decoder_cases()}
    for i, (rule, params) in enumerate(_lossy_cases()):
        cases[f"lossy:{i}:{rule}"] = lambda r=rule, p=params: lossy_hash(r, p)
    return cases


def _recorded() -> dict:
    return json.loads(DATA.read_text())["cases"]


def test_fingerprint_covers_every_decoder_and_rule():
    """The recorded cases are the cases this file runs (a new decoder or option needs
    ``--write``), and every registered decoder is among them."""
    recorded = _recorded()
    assert sorted(recorded) == sorted(all_cases())
    for name in DECODER_SPECS:
        assert any(c.startswith(f"decoder:{name}-") for c in recorded), name
    assert len(recorded) >= 150


def test_every_output_is_bit_for_bit_the_recorded_one():
    """Every case's outputs hash to the recorded SHA-256 (deterministic)."""
    recorded = _recorded()
    bad = [cid for cid, fn in all_cases().items() if fn() != recorded.get(cid)]
    assert not bad, f"{len(bad)} cases changed: {bad[:10]}"


if __name__ == "__main__":  # pragma: no cover - rewrites the recorded hashes
    if sys.argv[1:] != ["--write"]:
        raise SystemExit("usage: python -m tests.test_sim_fingerprint --write")
    DATA.parent.mkdir(exist_ok=True)
    hashes = {cid: fn() for cid, fn in sorted(all_cases().items())}
    DATA.write_text(json.dumps({"cases": hashes}, indent=1, sort_keys=True) + "\n")
    print(f"{len(hashes)} cases written to {DATA}")
