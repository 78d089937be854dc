"""BLAKE2b in Numba: the context labels of :mod:`specbound.sim.prf` inside compiled loops.

The keyed context label of the package is BLAKE2b (Aumasson, Neves, Wilcox-O'Hearn &
Winnerlein 2013; RFC 7693) with an 8-byte digest and the personalisation
``b"specbound-prf"`` of the message ``key digest (32 bytes) || window tokens as
little-endian int64``.  Every message is a whole number of 64-bit words (four for the key
digest, one per token), so the state here works on words:

- ``h`` (8 words): the chained state, initialised from the parameter block
  (:func:`b2_init`: digest length, fanout = depth = 1, personalisation);
- ``buf`` (16 words) and ``nbuf``: the words not yet compressed (a full block stays in the
  buffer until more data arrives, because the last block is compressed with the final flag);
- ``t``: the number of bytes compressed so far.

:func:`b2_update_word` appends one word, :func:`b2_final` returns the 64-bit label (the digest
read as a little-endian integer, as :func:`specbound.sim.prf.digest_label` does) without
changing the state, so a whole-prefix label keeps the state of the committed prefix and
costs one compression per label (O(1) per token instead of O(t)).  All functions are bit for
bit ``hashlib.blake2b`` (tested on random keys and windows in ``tests/test_sim_blake2b.py``).
"""

from __future__ import annotations

import numpy as np

from specbound.sim._config import JIT, njit
from specbound.sim.prf import _PERSON

_IV = np.array([
    0x6A09E667F3BCC908, 0xBB67AE8584CAA73B, 0x3C6EF372FE94F82B, 0xA54FF53A5F1D36F1,
    0x510E527FADE682D1, 0x9B05688C2B3E6C1F, 0x1F83D9ABFB41BD6B, 0x5BE0CD19137E2179,
], dtype=np.uint64)

_SIGMA = np.array([
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15],
    [14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3],
    [11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4],
    [7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8],
    [9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13],
    [2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9],
    [12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11],
    [13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10],
    [6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5],
    [10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0],
], dtype=np.int64)

_R32 = np.uint64(32)
_R24 = np.uint64(24)
_R16 = np.uint64(16)
_R63 = np.uint64(63)
_L32 = np.uint64(32)
_L40 = np.uint64(40)
_L48 = np.uint64(48)
_L1 = np.uint64(1)
_ALL = np.uint64(0xFFFFFFFFFFFFFFFF)
_ZERO = np.uint64(0)
_BLOCK = 128  # bytes per block
_WORDS = 16  # words per block
#: the label's digest length (bytes)
DIGEST_SIZE = 8


def _person_words(person: bytes) -> np.ndarray:
    raw = person.ljust(16, b"\0")
    return np.frombuffer(raw, dtype="<u8").astype(np.uint64)


#: the personalisation of the context labels, as two little-endian words
PERSON_WORDS = _person_words(_PERSON)


def digest_words(digest: bytes) -> np.ndarray:
    """The 32-byte key digest as four little-endian 64-bit words (the first message words)."""
    if len(digest) % 8:
        raise ValueError(f"digest: length must be a multiple of 8 bytes, got {len(digest)}")
    return np.frombuffer(bytes(digest), dtype="<u8").astype(np.uint64)


@njit(inline="always", **JIT)
def _g(v, a, b, c, d, x, y):
    va = v[a] + v[b] + x
    vd = v[d] ^ va
    vd = (vd >> _R32) | (vd << _L32)
    vc = v[c] + vd
    vb = v[b] ^ vc
    vb = (vb >> _R24) | (vb << _L40)
    va = va + vb + y
    vd = vd ^ va
    vd = (vd >> _R16) | (vd << _L48)
    vc = vc + vd
    vb = vb ^ vc
    vb = (vb >> _R63) | (vb << _L1)
    v[a] = va
    v[b] = vb
    v[c] = vc
    v[d] = vd


@njit(**JIT)
def b2_compress(h, m, t, final, v):
    """BLAKE2b compression F of the block ``m`` (16 words) into ``h`` (RFC 7693, §3.2).

    ``t``: bytes hashed including this block; ``final``: last block; ``v`` a 16-word work
    buffer.
    """
    for i in range(8):
        v[i] = h[i]
        v[i + 8] = _IV[i]
    v[12] ^= np.uint64(t)  # the counter's high word is 0 (messages below 2**64 bytes)
    if final:
        v[14] ^= _ALL
    for r in range(12):
        s = _SIGMA[r % 10]
        _g(v, 0, 4, 8, 12, m[s[0]], m[s[1]])
        _g(v, 1, 5, 9, 13, m[s[2]], m[s[3]])
        _g(v, 2, 6, 10, 14, m[s[4]], m[s[5]])
        _g(v, 3, 7, 11, 15, m[s[6]], m[s[7]])
        _g(v, 0, 5, 10, 15, m[s[8]], m[s[9]])
        _g(v, 1, 6, 11, 12, m[s[10]], m[s[11]])
        _g(v, 2, 7, 8, 13, m[s[12]], m[s[13]])
        _g(v, 3, 4, 9, 14, m[s[14]], m[s[15]])
    for i in range(8):
        h[i] ^= v[i] ^ v[i + 8]


@njit(**JIT)
def b2_init(h, digest_size, person):
    """Initial chained state: IV xor the parameter block (no key, fanout = depth = 1)."""
    for i in range(8):
        h[i] = _IV[i]
    h[0] ^= np.uint64(0x01010000) | np.uint64(digest_size)
    h[6] ^= person[0]
    h[7] ^= person[1]


@njit(**JIT)
def b2_update_word(h, buf, nbuf, t, word, v):
    """Append one 64-bit word; returns the new ``(nbuf, t)``.

    A full buffer is compressed only when a further word arrives (the final block must be
    compressed with the final flag by :func:`b2_final`).
    """
    if nbuf == _WORDS:
        t += _BLOCK
        b2_compress(h, buf, t, False, v)
        nbuf = 0
    buf[nbuf] = word
    return nbuf + 1, t


@njit(**JIT)
def b2_final(h, buf, nbuf, t, work_h, work_m, v):
    """64-bit label of the state (the first 8 digest bytes, little endian); ``h`` unchanged.

    ``work_h`` (8 words) and ``work_m`` (16 words) are scratch buffers.
    """
    for i in range(8):
        work_h[i] = h[i]
    for i in range(_WORDS):
        work_m[i] = buf[i] if i < nbuf else _ZERO
    b2_compress(work_h, work_m, t + 8 * nbuf, True, v)
    return work_h[0]


@njit(**JIT)
def b2_start(h, buf, dwords, person):
    """Start a label hash: init with 8-byte digest and ``person``, absorb the digest words.

    Returns ``(nbuf, t)``.
    """
    b2_init(h, DIGEST_SIZE, person)
    nbuf = 0
    t = 0
    v = np.empty(16, np.uint64)
    for i in range(dwords.shape[0]):
        nbuf, t = b2_update_word(h, buf, nbuf, t, dwords[i], v)
    return nbuf, t


@njit(**JIT)
def label_of(dwords, person, tokens, start, stop, h, buf, work_h, work_m, v):
    """Label of ``dwords || tokens[start:stop]`` (int64 tokens as little-endian words)."""
    b2_init(h, DIGEST_SIZE, person)
    nbuf = 0
    t = 0
    for i in range(dwords.shape[0]):
        nbuf, t = b2_update_word(h, buf, nbuf, t, dwords[i], v)
    for i in range(start, stop):
        nbuf, t = b2_update_word(h, buf, nbuf, t, np.uint64(tokens[i]), v)
    return b2_final(h, buf, nbuf, t, work_h, work_m, v)


@njit(**JIT)
def label_with_suffix(h, buf, nbuf, t, tokens, start, stop, sh, sbuf, work_h, work_m, v):
    """Label of the state ``(h, buf, nbuf, t)`` followed by ``tokens[start:stop]``.

    The state is not changed (it is copied into ``sh``, ``sbuf``); O(stop - start) words.
    """
    for i in range(8):
        sh[i] = h[i]
    for i in range(_WORDS):
        sbuf[i] = buf[i]
    for i in range(start, stop):
        nbuf, t = b2_update_word(sh, sbuf, nbuf, t, np.uint64(tokens[i]), v)
    return b2_final(sh, sbuf, nbuf, t, work_h, work_m, v)


@njit(**JIT)
def labels_of_windows(dwords, person, tokens, starts, stops, out):
    """``out[i]`` = label of ``dwords || tokens[starts[i]:stops[i]]`` (a vectorised test aid
    and the windowed labels of the compiled detector)."""
    h = np.empty(8, np.uint64)
    buf = np.empty(16, np.uint64)
    wh = np.empty(8, np.uint64)
    wm = np.empty(16, np.uint64)
    v = np.empty(16, np.uint64)
    for i in range(starts.shape[0]):
        out[i] = label_of(dwords, person, tokens, starts[i], stops[i], h, buf, wh, wm, v)


@njit(**JIT)
def prefix_labels(dwords, person, tokens, first, out):
    """Whole-prefix labels along a sequence: ``out[i]`` = label of ``dwords ||
    tokens[:first + i]`` for ``i = 0 .. len(out) - 1``, with one running state."""
    h = np.empty(8, np.uint64)
    buf = np.zeros(16, np.uint64)
    wh = np.empty(8, np.uint64)
    wm = np.empty(16, np.uint64)
    v = np.empty(16, np.uint64)
    nbuf, t = b2_start(h, buf, dwords, person)
    for i in range(first):
        nbuf, t = b2_update_word(h, buf, nbuf, t, np.uint64(tokens[i]), v)
    for i in range(out.shape[0]):
        out[i] = b2_final(h, buf, nbuf, t, wh, wm, v)
        if first + i < tokens.shape[0]:
            nbuf, t = b2_update_word(h, buf, nbuf, t, np.uint64(tokens[first + i]), v)
