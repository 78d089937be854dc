"""Keyed pivots of many sequences in one compiled call (private; :func:`detect_many`).

For every sequence (prompt length ``n0``) and position ``t >= n0`` the pivot is
``U_t = prf_uniform(label_t, tokens[t], 0)`` with ``label_t`` the BLAKE2b context label of
``tokens[:t]`` (``window=None``, one running hash state per sequence) or of
``tokens[t - window:t]`` (Liu, Wan, Gao & Gündüz 2026, arXiv:2609.21858, §4.1, Alg. 8).
With ``dedup`` each (context window, token) pair is scored once (its first occurrence):
the windows are compared token by token, so the selection is exactly that of
:func:`specbound.sim.detect.keyed_pivots`.  With ``parallel=True`` the sequences run under
``prange``; each writes only its own slice, so the result does not depend on the thread
count.
"""

from __future__ import annotations

import numpy as np
from numba import prange

from specbound.sim import _blake2b as _b2
from specbound.sim._config import JIT, njit
from specbound.sim.prf import prf_uniform

JIT_PAR = dict(JIT, parallel=True)


@njit(**JIT)
def _same_window(tok, a, b, window):
    """Whether the windows of positions ``a`` and ``b`` (``window`` tokens before each,
    fewer at the start) are equal."""
    la = a - window if a > window else 0
    lb = b - window if b > window else 0
    if a - la != b - lb:
        return False
    for i in range(a - la):
        if tok[la + i] != tok[lb + i]:
            return False
    return True


@njit(**JIT)
def _one(dwords, person, tok, n0, window, dedup, labels, U, keep):
    """Labels, pivots and the dedup mask of positions ``n0..len-1`` of one sequence."""
    m = tok.shape[0] - n0
    h = np.empty(8, np.uint64)
    buf = np.zeros(16, np.uint64)
    wh = np.empty(8, np.uint64)
    wm = np.empty(16, np.uint64)
    v = np.empty(16, np.uint64)
    if window < 0:
        nbuf, t = _b2.b2_start(h, buf, dwords, person)
        for i in range(n0):
            nbuf, t = _b2.b2_update_word(h, buf, nbuf, t, np.uint64(tok[i]), v)
        for i in range(m):
            labels[i] = _b2.b2_final(h, buf, nbuf, t, wh, wm, v)
            nbuf, t = _b2.b2_update_word(h, buf, nbuf, t, np.uint64(tok[n0 + i]), v)
    else:
        for i in range(m):
            pos = n0 + i
            start = pos - window if pos > window else 0
            labels[i] = _b2.label_of(dwords, person, tok, start, pos, h, buf, wh, wm, v)
    for i in range(m):
        U[i] = prf_uniform(labels[i], tok[n0 + i], 0)
        keep[i] = True
    if dedup and window >= 0 and m > 1:
        order = np.argsort(labels, kind="mergesort")  # stable: positions ascending in a group
        g = 0
        while g < m:
            e = g + 1
            while e < m and labels[order[e]] == labels[order[g]]:
                e += 1
            # group [g, e): same label; keep the first of every distinct (window, token)
            for a in range(g + 1, e):
                ia = order[a]
                for b in range(g, a):
                    ib = order[b]
                    if keep[ib] and tok[n0 + ia] == tok[n0 + ib] and _same_window(
                            tok, n0 + ia, n0 + ib, window):
                        keep[ia] = False
                        break
            g = e


@njit(**JIT)
def _starts(flat_offsets, n0s):
    """Where each sequence's generated positions start when laid end to end."""
    n = n0s.shape[0]
    starts = np.empty(n + 1, np.int64)
    starts[0] = 0
    for i in range(n):
        starts[i + 1] = starts[i] + (flat_offsets[i + 1] - flat_offsets[i] - n0s[i])
    return starts


@njit(**JIT)
def _sequence(key, flat, offsets, n0s, U, keep, starts, i):
    """:func:`_one` for sequence ``i`` into its slice of ``U`` and ``keep``; ``key`` is
    ``(dwords, person, window, dedup)``."""
    dwords, person, window, dedup = key
    tok = flat[offsets[i]:offsets[i + 1]]
    labels = np.empty(starts[i + 1] - starts[i], np.uint64)
    _one(dwords, person, tok, n0s[i], window, dedup, labels, U[starts[i]:starts[i + 1]],
         keep[starts[i]:starts[i + 1]])


@njit(**JIT_PAR)
def pivots_batch(dwords, person, flat, offsets, n0s, window, dedup, U, keep):
    """:func:`_one` for every sequence ``flat[offsets[i]:offsets[i+1]]`` under ``prange``;
    sequence ``i`` writes ``U`` and ``keep`` at ``offsets[i] - (n0s[:i]).sum()`` onward,
    i.e. the generated positions of the sequences laid end to end."""
    starts = _starts(offsets, n0s)
    key = (dwords, person, window, dedup)
    for i in prange(n0s.shape[0]):
        _sequence(key, flat, offsets, n0s, U, keep, starts, i)


@njit(**JIT)
def pivots_serial(dwords, person, flat, offsets, n0s, window, dedup, U, keep):
    """:func:`pivots_batch` on one thread (no thread pool is started)."""
    starts = _starts(offsets, n0s)
    key = (dwords, person, window, dedup)
    for i in range(n0s.shape[0]):
        _sequence(key, flat, offsets, n0s, U, keep, starts, i)


def pivots_many(tokens, prompt_lengths, digest, window, dedup, parallel=False):
    """Per sequence, ``(pivots, positions)`` of :func:`specbound.sim.detect.keyed_pivots`
    (validated input: int64 token arrays, prompt lengths in range, one window).

    ``parallel``: sequences under ``prange`` (:func:`pivots_batch`); the default runs on one
    thread (:func:`pivots_serial`) so that a caller that forks later stays fork-safe under
    Numba's OpenMP threading layer."""
    n = len(tokens)
    lens = np.array([t.size for t in tokens], dtype=np.int64)
    n0s = np.asarray(prompt_lengths, dtype=np.int64).reshape(n)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lens, out=offsets[1:])
    flat = np.concatenate(tokens).astype(np.int64) if n else np.zeros(0, np.int64)
    total = int((lens - n0s).sum())
    U = np.empty(total)
    keep = np.empty(total, np.bool_)
    kernel = pivots_batch if parallel else pivots_serial
    kernel(_b2.digest_words(digest), _b2.PERSON_WORDS, flat, offsets, n0s,
                 -1 if window is None else int(window), bool(dedup), U, keep)
    out_u, out_p = [], []
    s = 0
    for i in range(n):
        m = int(lens[i] - n0s[i])
        k = keep[s:s + m]
        out_u.append(U[s:s + m][k].copy())
        out_p.append((np.flatnonzero(k) + n0s[i]).astype(np.int64))
        s += m
    return out_u, out_p
