"""The Numba BLAKE2b of the compiled decoders is ``hashlib.blake2b`` bit for bit.

The context labels (:func:`specbound.sim.prf.digest_label`) are BLAKE2b-64 with the
package's personalisation over ``key digest || window tokens``; the compiled decoders and
detector compute them with :mod:`specbound.sim._blake2b`.  Deterministic checks (no
false-failure probability).
"""

from __future__ import annotations

import hashlib
import os

import numpy as np
import pytest

from specbound.sim import _blake2b as B
from specbound.sim.prf import PrefixLabels, context_label, digest_label, key_digest

NOJIT = os.environ.get("NUMBA_DISABLE_JIT", "0") not in ("", "0")
# >= 10,000 random (key, window) cases when compiled; fewer in the pure-Python coverage run
N_CASES = 1_000 if NOJIT else 12_000

# golden labels: (key, number of tokens 0..n-1 in the window, label)
GOLDEN = [
    (0, 0, 0xA1AAC2225EA26CA6),
    (0, 3, 0x92AED95F6F25C89B),
    (0, 12, 0x4B5005D5A4C4BB52),  # 4 + 12 words: exactly one block
    (0, 40, 0xA642476FD22DFEF0),
    ("golden", 0, 0x1D93C2A412B6D589),
    ("golden", 3, 0xFE8750F1F592035E),
    ("golden", 12, 0x5C3DA04E6058EF05),
    ("golden", 40, 0x602F20595A9D8684),
    (b"\x00\x01", 0, 0x005B070E19F04CED),
    (b"\x00\x01", 3, 0x1422233941B03559),
    (b"\x00\x01", 12, 0xB62E4648C9491020),
    (b"\x00\x01", 40, 0x14DAD84F4707DB68),
]


def _windows(digest, toks, starts, stops):
    out = np.empty(starts.size, np.uint64)
    B.labels_of_windows(B.digest_words(digest), B.PERSON_WORDS, toks, starts, stops, out)
    return out


@pytest.mark.kernel
@pytest.mark.parametrize(("key", "n", "label"), GOLDEN)
def test_golden_labels(key, n, label):
    toks = np.arange(n, dtype=np.int64)
    assert int(context_label(key, toks)) == label  # the reference itself is pinned
    got = _windows(key_digest(key), toks, np.array([0]), np.array([n]))
    assert int(got[0]) == label


@pytest.mark.kernel
def test_random_keys_and_windows_match_hashlib():
    """12,000 random (key, window) cases: lengths 0..70 words, vocabularies up to 2**40."""
    rng = np.random.default_rng(20261201)
    n_keys = 60
    per_key = N_CASES // n_keys
    checked = 0
    for k in range(n_keys):
        kind = k % 3
        if kind == 0:
            key = int(rng.integers(0, 2**62))
        elif kind == 1:
            key = "k" + str(rng.integers(0, 10**9))
        else:
            key = rng.bytes(int(rng.integers(0, 40)))
        digest = key_digest(key)
        toks = rng.integers(0, 2**40, size=400).astype(np.int64)
        starts = rng.integers(0, 300, size=per_key)
        lengths = rng.integers(0, 71, size=per_key)
        stops = np.minimum(starts + lengths, toks.size)
        got = _windows(digest, toks, starts, stops)
        want = [int.from_bytes(hashlib.blake2b(digest + toks[a:b].astype("<i8").tobytes(),
                                               digest_size=8, person=b"specbound-prf")
                               .digest(), "little") for a, b in zip(starts, stops, strict=True)]
        np.testing.assert_array_equal(got, np.array(want, dtype=np.uint64))
        checked += per_key
    assert checked >= N_CASES - n_keys


@pytest.mark.kernel
@pytest.mark.parametrize("first", [0, 1, 11, 12, 13, 27])
def test_whole_prefix_labels_keep_the_state(first):
    """Running-state labels of every prefix = hashlib of the whole prefix (block edges too)."""
    rng = np.random.default_rng(first)
    digest = key_digest(first)
    toks = rng.integers(0, 50_000, size=70).astype(np.int64)
    out = np.empty(toks.size - first + 1, np.uint64)
    B.prefix_labels(B.digest_words(digest), B.PERSON_WORDS, toks, first, out)
    want = [digest_label(digest, toks[:first + i]) for i in range(out.size)]
    np.testing.assert_array_equal(out, np.array(want, dtype=np.uint64))
    pl = PrefixLabels(digest, toks[:first])
    assert out[0] == pl.label()


@pytest.mark.kernel
def test_suffix_labels_leave_the_state_unchanged():
    """``label_with_suffix`` = hashlib of prefix + suffix, and the prefix state is reusable."""
    digest = key_digest("suffix")
    toks = np.arange(100, 160, dtype=np.int64)
    h = np.empty(8, np.uint64)
    buf = np.zeros(16, np.uint64)
    sh, sbuf, wh, wm, v = (np.empty(8, np.uint64), np.empty(16, np.uint64),
                           np.empty(8, np.uint64), np.empty(16, np.uint64),
                           np.empty(16, np.uint64))
    nbuf, t = B.b2_start(h, buf, B.digest_words(digest), B.PERSON_WORDS)
    for i in range(12):
        nbuf, t = B.b2_update_word(h, buf, nbuf, t, np.uint64(toks[i]), v)
    for stop in (12, 13, 20, 29, 45, 60):
        got = B.label_with_suffix(h, buf, nbuf, t, toks, 12, stop, sh, sbuf, wh, wm, v)
        assert got == digest_label(digest, toks[:stop])
    assert B.b2_final(h, buf, nbuf, t, wh, wm, v) == digest_label(digest, toks[:12])


@pytest.mark.kernel
@pytest.mark.parametrize("digest_size", [1, 8, 32, 64])
def test_other_digest_sizes_and_persons(digest_size):
    """The compression and parameter block are general: word messages, any digest size."""
    rng = np.random.default_rng(digest_size)
    person = b"another-person!!"
    pw = B._person_words(person)
    for n in (0, 1, 15, 16, 17, 32, 33):
        words = rng.integers(0, 2**63, size=n).astype(np.uint64)
        h = np.empty(8, np.uint64)
        buf = np.zeros(16, np.uint64)
        v = np.empty(16, np.uint64)
        B.b2_init(h, digest_size, pw)
        nbuf, t = 0, 0
        for w in words:
            nbuf, t = B.b2_update_word(h, buf, nbuf, t, w, v)
        wh = np.empty(8, np.uint64)
        wm = np.empty(16, np.uint64)
        B.b2_final(h, buf, nbuf, t, wh, wm, v)
        got = wh.astype("<u8").tobytes()[:digest_size]
        want = hashlib.blake2b(words.astype("<u8").tobytes(), digest_size=digest_size,
                               person=person).digest()
        assert got == want


def test_digest_words_rejects_partial_words():
    with pytest.raises(ValueError, match="digest"):
        B.digest_words(b"abc")
