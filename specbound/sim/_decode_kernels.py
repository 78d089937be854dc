"""Numba step kernels of the sequence-level decoders (private).

Each kernel does the vocabulary-sized work of one decoding step in one context and is a
pure function of its inputs: keyed (or seeded) clocks come from the counter-based PRF of
:mod:`specbound.sim.prf` given a 64-bit label, and plain uniforms are passed in.  A NumPy
reference (``*_numpy``) of every kernel is compared with it in ``tests/test_decode.py``.

Clock convention (shared with :mod:`specbound.sim.detect`): in a context with label ``lab``
the ``j``-th inter-arrival clock of token ``v`` (``j = 0, 1, ...``) is
``-log(prf_uniform(lab, v, j))``; the first arrival is ``E_{v,1} = -log prf_uniform(lab, v, 0)``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from specbound.sim._config import JIT
from specbound.sim.prf import _GOLDEN, _ONE, _mix, _mix_np, prf_uniform, prf_uniform_numpy


@njit(**JIT)
def position_label(run_label, t):
    """Unkeyed label of absolute position ``t``: ``mix(run_label + G (t + 1))``."""
    return _mix(np.uint64(run_label) + _GOLDEN * (np.uint64(t) + _ONE))


def position_label_numpy(run_label, t) -> np.uint64:
    with np.errstate(over="ignore"):
        return np.uint64(_mix_np(np.uint64(run_label) + _GOLDEN * (np.uint64(t) + _ONE)))


@njit(**JIT)
def race_argmin(label, p, arrival):
    """Exponential race (Alg. 2) / PFR: ``argmin_{v: p_v > 0} -log(U(label, v, arrival)) / p_v``."""
    best = np.inf
    arg = -1
    for v in range(p.shape[0]):
        if p[v] > 0.0:
            s = -np.log(prf_uniform(label, v, arrival)) / p[v]
            if s < best:
                best = s
                arg = v
    return arg


@njit(**JIT)
def gls_argmin(label, p, cols):
    """List coupling (GLS): token of ``argmin_{b in cols, v: p_v > 0} E_{b,v} / p_v``.

    ``E_{b,v} = -log(prf_uniform(label, v, b))``: column ``b`` is draft ``b``'s race.
    """
    best = np.inf
    arg = -1
    for v in range(p.shape[0]):
        if p[v] > 0.0:
            for i in range(cols.shape[0]):
                s = -np.log(prf_uniform(label, v, cols[i])) / p[v]
                if s < best:
                    best = s
                    arg = v
    return arg


@njit(**JIT)
def mpfr_topk(label, q, k, out):
    """Direct finite-support MPFR (seed 000 Alg. 6): labels of the ``k`` smallest scores.

    Scores are ``G_{v,j} / q_v`` for ``q_v > 0`` and ``j = 1..k`` with
    ``G_{v,j} = sum_{i<j} -log(prf_uniform(label, v, i))``; ``out[:k]`` receives the labels
    in increasing score order.  A token's later arrivals are skipped once its score exceeds
    the current k-th best (they can only be larger).
    """
    best_s = np.full(k, np.inf)
    best_v = np.full(k, -1, dtype=np.int64)
    for v in range(q.shape[0]):
        if q[v] <= 0.0:
            continue
        g = 0.0
        for j in range(k):
            g += -np.log(prf_uniform(label, v, j))
            s = g / q[v]
            if s >= best_s[k - 1]:
                break
            i = k - 1
            while i > 0 and best_s[i - 1] > s:
                best_s[i] = best_s[i - 1]
                best_v[i] = best_v[i - 1]
                i -= 1
            best_s[i] = s
            best_v[i] = v
    for i in range(k):
        out[i] = best_v[i]


@njit(**JIT)
def inverse_cdf(w, u):
    """Inverse-CDF draw from the (unnormalised, non-negative) weights ``w`` with ``u`` in [0,1).

    Returns the first index whose cumulative weight exceeds ``u * sum(w)``; never an index
    with zero weight.
    """
    total = 0.0
    for v in range(w.shape[0]):
        total += w[v]
    target = u * total
    acc = 0.0
    last = -1
    for v in range(w.shape[0]):
        if w[v] > 0.0:
            acc += w[v]
            last = v
            if acc > target:
                return v
    return last


@njit(**JIT)
def residual_sample(p, q, u):
    """Draw from the SD residual ``(p - q)_+ / sum (p - q)_+`` (Alg. 1); ``p`` if it is empty."""
    w = np.maximum(p - q, 0.0)
    if w.sum() <= 0.0:
        return inverse_cdf(p, u)
    return inverse_cdf(w, u)


@njit(**JIT)
def specinfer_verify(p, q, cands, u_acc, u_res):
    """Recursive rejection sampling over candidates drawn i.i.d. from ``q`` (SpecInfer).

    Candidate ``i`` is accepted iff ``u_acc[i] * q(x_i) <= r(x_i)`` (i.e. ``u <= r/q``) for
    the current residual ``r`` (initially ``p``); after a rejection ``r <- (r - q)_+ /
    norm``.  Returns ``(token, accepted)``; when all are rejected the token is an
    inverse-CDF draw from the final residual with ``u_res``.
    """
    r = p.copy()
    for i in range(cands.shape[0]):
        x = cands[i]
        if q[x] > 0.0 and u_acc[i] * q[x] <= r[x]:
            return x, True
        w = np.maximum(r - q, 0.0)
        s = w.sum()
        if s > 0.0:
            r = w / s
    return inverse_cdf(r, u_res), False


# --------------------------------------------------------------------- NumPy references


def race_argmin_numpy(label, p, arrival) -> int:
    p = np.asarray(p, dtype=np.float64)
    v = np.flatnonzero(p > 0)
    e = -np.log(prf_uniform_numpy(label, v, arrival))
    return int(v[np.argmin(e / p[v])])


def gls_argmin_numpy(label, p, cols) -> int:
    p = np.asarray(p, dtype=np.float64)
    v = np.flatnonzero(p > 0)
    e = -np.log(prf_uniform_numpy(label, v[:, None], np.asarray(cols)[None, :]))
    s = (e / p[v][:, None]).min(axis=1)
    return int(v[np.argmin(s)])


def mpfr_topk_numpy(label, q, k) -> np.ndarray:
    q = np.asarray(q, dtype=np.float64)
    v = np.flatnonzero(q > 0)
    e = -np.log(prf_uniform_numpy(label, v[:, None], np.arange(k)[None, :]))
    s = np.cumsum(e, axis=1) / q[v][:, None]
    flat = np.argsort(s.reshape(-1), kind="stable")[:k]
    return v[flat // k].astype(np.int64)


def inverse_cdf_numpy(w, u) -> int:
    w = np.asarray(w, dtype=np.float64)
    c = np.cumsum(w)
    idx = int(np.searchsorted(c, u * c[-1], side="right"))
    pos = np.flatnonzero(w > 0)
    if idx >= w.shape[0] or w[idx] == 0:
        # the cumulative sum is flat on zero-weight cells: move to the next positive cell
        later = pos[pos >= min(idx, w.shape[0])]
        return int(later[0]) if later.size else int(pos[-1])
    return idx


def specinfer_verify_numpy(p, q, cands, u_acc, u_res):
    r = np.asarray(p, dtype=np.float64).copy()
    q = np.asarray(q, dtype=np.float64)
    for i, x in enumerate(cands):
        if q[x] > 0 and u_acc[i] * q[x] <= r[x]:
            return int(x), True
        w = np.maximum(r - q, 0.0)
        if w.sum() > 0:
            r = w / w.sum()
    return inverse_cdf_numpy(r, u_res), False
