"""Numba step kernels of the token-level samplers and the sequence decoders (private).

This module is the one set of step kernels of the package: the estimators
(:mod:`specbound.sim.montecarlo`), the one-step samplers (:mod:`specbound.sim.samplers`), the
lossy sampler (:mod:`specbound.sim.lossy`) and the sequence decoders
(:mod:`specbound.sim.decode`) all call the kernels below.  Every kernel has a NumPy
reference in :mod:`specbound.sim._reference` that the tests marked ``kernel`` compare it
with (also with ``NUMBA_DISABLE_JIT=1``, ``make test-nojit``).  Algorithm numbers ("Alg. 6") are
those of Liu, Wan, Gao & Gündüz 2026, "watermarkable multi-draft speculative sampling",
arXiv:2609.21858.

Uniform source
--------------
Every kernel is a pure function of its inputs: the randomness comes either from a table of
uniforms ``table`` drawn outside (``use_table=True``, QuantEcon style) or from the keyed
counter-based PRF :func:`specbound.sim.prf.prf_uniform` evaluated at ``(label, row, col)``
(``use_table=False``).  In both cases the kernel reads "uniform ``(row, col)``", so the same
kernel runs on a seeded stream, on keyed clocks, or on per-trial PRF labels derived from a
``SeedSequence`` (the batched estimators).  The clock layout ``(row, col)`` of each scheme is
documented in :mod:`specbound.sim.samplers` (``clock_shape``).  For the token-clock kernels
(races, MPFR, GLS) row = token id and col = arrival index: the ``j``-th inter-arrival clock of
token ``v`` in a context with label ``lab`` is ``-log(prf_uniform(lab, v, j))``, the
convention shared with the detector (:mod:`specbound.sim.detect`).  The decoder-facing
kernels (:func:`race_argmin`, :func:`gls_argmin`, :func:`mpfr_topk`) take a label only.

Inverse CDF (the package's one rule)
------------------------------------
:func:`inv_cdf` draws token ``i`` from non-negative weights ``w`` with the uniform ``u`` in
``[0, 1)`` by inversion of the *unnormalised* running sum ``cdf = cumsum(w)`` (sequential
summation, as ``np.cumsum``): ``i`` is the smallest index with ``cdf[i] > u * cdf[-1]``.  A
zero-mass token has ``cdf[i] = cdf[i-1]`` and is never returned; when rounding makes
``u * cdf[-1]`` reach the total, the last token with positive mass is returned.  Mass is
that of the running sum: a weight so small that adding it does not change the running sum
(below its rounding) has an empty interval and is treated as zero.
:func:`inv_cdf_many` applies it to many uniforms and :func:`categorical` to weights;
:func:`specbound.sim._reference.inv_cdf` is the NumPy reference.

Scores and ties
---------------
Race scores are ``e / w_u`` with ``e = -log U`` computed once per uniform (so a two-sided
race compares ``e / p_u`` and ``e / q_u`` of the same ``e``); comparisons are strict, so the
first index in the kernel's scan order wins a tie.  A token with ``w_u = 0`` has score
``+inf`` and is never selected; no uniform is read for a token with ``p_u = q_u = 0``.
Kernels assume valid input (probability vectors, ``B >= 1``); the public wrappers validate.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import prange

from specbound.sim._config import JIT, JIT_SEQUENTIAL, njit
from specbound.sim.prf import _GOLDEN, _mix, prf_uniform

JIT_PAR = dict(JIT, parallel=True)
_LB_SHRINK = 1.0 - 1e-12

# scheme codes shared with the wrappers
SD, EXP_RACE, MPFR, MPFR_DIRECT, MPFR_SCAN, GLS, SPECINFER, SPECTR = range(8)


@njit(**JIT)
def _unif(label, table, use_table, row, col):
    """Uniform ``(row, col)`` of the source: a table entry or the keyed PRF."""
    if use_table:
        return table[row, col]
    return prf_uniform(label, row, col)


@njit(**JIT)
def trial_label(base, t):
    """Label of item ``t`` of a stream labelled ``base``: ``mix(base + G (t + 1))``.

    SplitMix64 counter: trial ``t`` of an estimator chunk (:mod:`specbound.sim.montecarlo`)
    and the unkeyed clocks of absolute position ``t`` of a decoding run
    (:mod:`specbound.sim.decode`, ``pfr_nowm`` and masked repeats) use it.
    """
    return _mix(np.uint64(base) + _GOLDEN * (np.uint64(t) + np.uint64(1)))


# --------------------------------------------------------------------------- inverse CDF


@njit(**JIT)
def inv_cdf(cdf, u):
    """Smallest ``i`` with ``cdf[i] > u * cdf[-1]`` (``cdf`` = unnormalised ``cumsum(w)``).

    The package's one inverse CDF (module docstring): zero-mass tokens have an empty
    interval and are never returned; if rounding puts ``u * cdf[-1]`` at the total, the last
    token with positive mass is returned.  ``O(log n)`` (binary search).
    """
    n = cdf.shape[0]
    x = u * cdf[n - 1]
    lo = 0
    hi = n
    while lo < hi:
        mid = (lo + hi) >> 1
        if cdf[mid] > x:
            hi = mid
        else:
            lo = mid + 1
    if lo >= n:
        lo = n - 1
        while lo > 0 and cdf[lo] == cdf[lo - 1]:
            lo -= 1
    return lo


@njit(**JIT)
def inv_cdf_many(cdf, us, out):
    """``out[k] = inv_cdf(cdf, us[k])`` for every uniform (the vectorised samplers)."""
    for k in range(us.shape[0]):
        out[k] = inv_cdf(cdf, us[k])


@njit(**JIT)
def _mass(p, q, use_q):
    """``sum(w)`` in any order (vectorisable), ``w = (p - q)_+`` if ``use_q`` else ``p``."""
    t = 0.0
    for i in range(p.shape[0]):
        t += max(p[i] - q[i], 0.0) if use_q else p[i]
    return t


@njit(**JIT_SEQUENTIAL)
def _draw_stream(p, q, use_q, u):
    """``inv_cdf(cumsum(w), u)`` without building the running sum, ``w = (p - q)_+`` if
    ``use_q`` else ``p``; ``-1`` when ``w`` has no mass.  ``O(n)``, no allocation.

    The running sum ``acc`` is accumulated in index order (compiled without ``reassoc``), so
    it is ``cumsum(w)`` bit for bit, and the answer is the first ``i`` with
    ``acc_i > x = u * acc_{n-1}``.  A fast total ``T'`` (any order) brackets ``x`` in
    ``[u T' (1 - r), u T' (1 + r)]`` with ``r = (4 n + 16) 2^-53`` (twice the worst-case
    relative error of two summation orders, plus the roundings of the bracket), so the first
    crossing of the bracket decides whenever it lands above it; otherwise (probability about
    ``n 2^-51``, or a total in the subnormal range) the exact total is summed first.  The
    fallback is :func:`inv_cdf`'s: the last index where the running sum increased.
    """
    n = p.shape[0]
    fast = _mass(p, q, use_q)
    if not fast > 0.0:
        return -1
    if fast > 1e-290:
        r = (4.0 * n + 16.0) * 2.0**-53
        x_lo = u * fast * (1.0 - r)
        x_hi = u * fast * (1.0 + r)
        acc = 0.0
        for i in range(n):
            acc = acc + (max(p[i] - q[i], 0.0) if use_q else p[i])
            if acc > x_lo:
                if acc > x_hi:
                    return i
                break
    total = 0.0
    for i in range(n):
        total = total + (max(p[i] - q[i], 0.0) if use_q else p[i])
    x = u * total
    acc = 0.0
    last = 0
    for i in range(n):
        nxt = acc + (max(p[i] - q[i], 0.0) if use_q else p[i])
        if nxt > x:
            return i
        if nxt != acc:
            last = i
        acc = nxt
    return last


@njit(**JIT)
def categorical(w, u):
    """Draw from the non-negative weights ``w`` with ``u``: ``inv_cdf(cumsum(w), u)``.

    Streamed (:func:`_draw_stream`): the same token as the binary search on the running
    sum, without allocating it.
    """
    y = _draw_stream(w, w, False, u)
    return y if y >= 0 else 0


@njit(**JIT)
def residual(r, q):
    """The residual of one rejection, ``(r - q)_+ / sum (r - q)_+``; ``r`` itself if empty.

    Speculative sampling's correction distribution (Leviathan et al. 2023, arXiv:2211.17192,
    Alg. 1; Chen et al. 2023, arXiv:2302.01318) and one step of SpecInfer's recursive rejection
    (Miao et al. 2024, arXiv:2305.09781).  Returns a new array.
    """
    w = np.maximum(r - q, 0.0)
    s = w.sum()
    if s > 0.0:
        return w / s
    return r.copy()


@njit(**JIT)
def residual_sample(p, q, u):
    """Draw from the SD residual ``(p - q)_+`` (Alg. 1) with ``u``; from ``p`` if it is empty.

    ``inv_cdf(cumsum((p - q)_+), u)``, streamed (the rule of :func:`inv_cdf` is scale-free,
    so no normalisation is needed).
    """
    y = _draw_stream(p, q, True, u)
    if y < 0:
        y = _draw_stream(p, p, False, u)
    return y


# --------------------------------------------------------------------- sequential rules


@njit(**JIT)
def seq_step(q, qcdf, targ, scale, fincdf, B, label, table, use_table, drafts):
    """Sequential verification of ``B`` i.i.d. drafts (SD, SpecInfer, SpecTr).

    Draft ``j`` is ``inv_cdf(qcdf, U[j, 0])``; it is tried with ``U[j, 1]`` and accepted iff
    ``U[j, 1] * scale * q[x] <= targ[min(j, R-1), x]``; the first accepted draft is emitted.
    If all are rejected the emitted token is ``inv_cdf(fincdf, U[B, 0])``.

    - SD (Leviathan et al. 2023; Liu, Wan, Gao & Gündüz 2026, arXiv:2609.21858, Alg. 1):
      ``B = 1``, ``targ = [p]``, ``scale = 1``, ``fincdf`` = cdf of ``(p-q)+``;
    - SpecInfer (recursive rejection sampling, Miao et al. 2024): ``targ[j]`` = residual after
      ``j`` rejections (:func:`residual` applied ``j`` times), ``scale = 1``, ``fincdf`` =
      cdf of the residual after ``B`` rejections;
    - SpecTr k-sequential (Sun et al. 2023, arXiv:2310.15141): ``targ = [p]``,
      ``scale = rho``, ``fincdf`` = its residual.

    The sequence decoder verifies candidates it has already drawn along its draft paths, with
    the residuals computed only as far as the rejections go: :func:`specinfer_verify`.
    Returns ``(y, accepted)``; ``drafts`` (length ``B``) is filled.
    """
    R = targ.shape[0]
    y = -1
    acc = False
    for j in range(B):
        x = inv_cdf(qcdf, _unif(label, table, use_table, j, 0))
        drafts[j] = x
        if not acc:
            r = j if j < R else R - 1
            if _unif(label, table, use_table, j, 1) * scale * q[x] <= targ[r, x]:
                acc = True
                y = x
    if not acc:
        y = inv_cdf(fincdf, _unif(label, table, use_table, B, 0))
    return y, acc


@njit(**JIT)
def specinfer_verify(p, q, cands, u_acc, u_res):
    """SpecInfer's recursive rejection over given candidates (Miao et al. 2024).

    The rule of :func:`seq_step` (SpecInfer mode) on candidates drawn outside: candidate
    ``i`` is accepted iff ``u_acc[i] * q(x_i) <= r(x_i)`` for the current residual ``r``
    (initially ``p``; after a rejection ``r <- residual(r, q)``, computed only when needed).
    Returns ``(token, accepted)``; when all are rejected the token is
    ``categorical(r, u_res)`` from the final residual.
    """
    r = p
    for i in range(cands.shape[0]):
        x = cands[i]
        if q[x] > 0.0 and u_acc[i] * q[x] <= r[x]:
            return x, True
        r = residual(r, q)
    return categorical(r, u_res), False


# --------------------------------------------------------------------------- races


@njit(**JIT)
def _skip(v, pu, by, qu, bx):
    """True if ``e = -log v`` can beat neither ``by`` (score ``e/pu``) nor ``bx`` (``e/qu``).

    Uses ``-log v >= 1 - v`` (shrunk by ``1e-12`` to absorb rounding), so skipping never
    changes a result: a skipped token has ``e/pu >= by`` and ``e/qu >= bx`` and would not
    have replaced the current best under the strict ``<`` comparisons.  (Where ``by * pu``
    is subnormal the token could not win anyway: ``e >= 1 - v >= 2**-53``.)  Skipping only
    saves the logarithm, the uniform is still read.
    """
    lb = (1.0 - v) * _LB_SHRINK
    return (pu == 0.0 or lb >= by * pu) and (qu == 0.0 or lb >= bx * qu)


@njit(**JIT)
def _race_column(p, q, two_sided, label, table, use_table, col, by, y):
    """One exponential race on clock column ``col``: ``E_u = -log U[u, col]``.

    Continues the target race from its current best ``(by, y)`` (score ``E_u / p_u``) and,
    when ``two_sided``, runs a fresh draft race on the same clocks (score ``E_u / q_u``; ``q``
    is not read otherwise); returns ``(by, y, x)`` (``x = -1`` when one-sided).  Strict ``<``
    keeps the first index on ties.  The logarithm is skipped for a token that provably
    cannot win either race (:func:`_skip`).
    """
    n = p.shape[0]
    bx = np.inf
    x = -1
    for u in range(n):
        pu = p[u]
        qu = q[u] if two_sided else 0.0
        if pu > 0.0 or qu > 0.0:
            v = _unif(label, table, use_table, u, col)
            if _skip(v, pu, by, qu, bx):
                continue
            e = -np.log(v)
            if pu > 0.0:
                s = e / pu
                if s < by:
                    by = s
                    y = u
            if qu > 0.0:
                s = e / qu
                if s < bx:
                    bx = s
                    x = u
    return by, y, x


@njit(**JIT)
def exp_race_step(p, q, label, table, use_table):
    """Exponential race (Liu, Wan, Gao & Gündüz 2026, arXiv:2609.21858, Alg. 2).

    ``E_u = -log U[u, 0]``; ``X = argmin_u E_u / q_u`` and ``Y = argmin_u E_u / p_u`` (first
    index on ties).  Returns ``(Y, X)``.
    """
    _, y, x = _race_column(p, q, True, label, table, use_table, 0, np.inf, -1)
    return y, x


@njit(**JIT)
def race_argmin(label, w, col):
    """Keyed exponential race on one side: ``argmin_{v: w_v > 0} -log U(label, v, col) / w_v``.

    The decoders' Gumbel-max step (Alg. 2/3 of Liu, Wan, Gao & Gündüz 2026,
    arXiv:2609.21858): the target winner with ``w = p``, a draft with ``w = q``.
    """
    _, y, _ = _race_column(w, w, False, label, np.empty((1, 1)), False, col, np.inf, -1)
    return y


@njit(**JIT)
def gls_argmin(label, w, cols):
    """Target side of list coupling: token of ``argmin_{b in cols, v} E_{b,v} / w_v``.

    ``E_{b,v} = -log U(label, v, b)``: column ``b`` is draft ``b``'s race (Rowan et al. 2025);
    the races run column after column in the order of ``cols``, ties to the first
    ``(column, token)``.  :func:`gls_step` is the token-level sampler over columns
    ``0..B-1`` with the draft races on the same pass.
    """
    table = np.empty((1, 1))
    by = np.inf
    y = -1
    for i in range(cols.shape[0]):
        by, y, _ = _race_column(w, w, False, label, table, False, cols[i], by, y)
    return y


@njit(**JIT)
def _contains(drafts, y):
    for b in range(drafts.shape[0]):
        if drafts[b] == y:
            return True
    return False


@njit(**JIT)
def gls_step(p, q, B, label, table, use_table, drafts):
    """Gumbel list sampling / list coupling (Rowan et al. 2025).

    Block ``b`` uses arrival index ``b``: ``E_{b,u} = -log U[u, b]``;
    ``X_b = argmin_u E_{b,u}/q_u``; ``Y`` = label of ``argmin_{(b,u)} E_{b,u}/p_u`` (first in
    ``(b, u)`` order on ties).  Returns ``(y, accepted)`` with accepted iff ``Y`` in drafts.
    """
    by = np.inf
    y = -1
    for b in range(B):
        # the target race runs over all (b, u); each block's draft race is its own
        by, y, drafts[b] = _race_column(p, q, True, label, table, use_table, b, by, y)
    return y, _contains(drafts, y)


# --------------------------------------------------------------------------- MPFR


@njit(**JIT)
def _lt(s1, u1, j1, s2, u2, j2):
    """Lexicographic ``(s, u, j)`` order (the stable sort of Alg. 6's candidate list)."""
    if s1 != s2:
        return s1 < s2
    if u1 != u2:
        return u1 < u2
    return j1 < j2


@njit(**JIT)
def _swap(hs, hu, hg, hj, a, b):
    hs[a], hs[b] = hs[b], hs[a]
    hu[a], hu[b] = hu[b], hu[a]
    hg[a], hg[b] = hg[b], hg[a]
    hj[a], hj[b] = hj[b], hj[a]


@njit(**JIT)
def _sift_down(hs, hu, hg, hj, i, size, is_max):
    while True:
        left = 2 * i + 1
        if left >= size:
            return
        c = left
        right = left + 1
        if is_max:
            if right < size and _lt(hs[left], hu[left], hj[left], hs[right], hu[right], hj[right]):
                c = right
            if _lt(hs[i], hu[i], hj[i], hs[c], hu[c], hj[c]):
                _swap(hs, hu, hg, hj, i, c)
                i = c
            else:
                return
        else:
            if right < size and _lt(hs[right], hu[right], hj[right], hs[left], hu[left], hj[left]):
                c = right
            if _lt(hs[c], hu[c], hj[c], hs[i], hu[i], hj[i]):
                _swap(hs, hu, hg, hj, i, c)
                i = c
            else:
                return


@njit(**JIT)
def _sift_up_max(hs, hu, hg, hj, i):
    while i > 0:
        parent = (i - 1) >> 1
        if _lt(hs[parent], hu[parent], hj[parent], hs[i], hu[i], hj[i]):
            _swap(hs, hu, hg, hj, i, parent)
            i = parent
        else:
            return


@njit(inline="always", **JIT)
def _heap_push(hs, hu, hg, hj, cnt, s, u, g, j):
    """Add candidate ``(s, u, j)`` (clock ``g``) to the max-heap of size ``cnt``."""
    hs[cnt] = s
    hu[cnt] = u
    hg[cnt] = g
    hj[cnt] = j
    _sift_up_max(hs, hu, hg, hj, cnt)


@njit(inline="always", **JIT)
def _heap_replace_top(hs, hu, hg, hj, cnt, s, u, g, j):
    """Replace the largest candidate of the max-heap by ``(s, u, j)`` (clock ``g``)."""
    hs[0] = s
    hu[0] = u
    hg[0] = g
    hj[0] = j
    _sift_down(hs, hu, hg, hj, 0, cnt, True)


@njit(inline="always", **JIT)
def _mpfr_select(p, q, use_p, B, label, table, use_table, drafts, heap):
    """MPFR (Alg. 6) in ``O(n + B log B)``; returns the target winner (``-1`` if not ``use_p``).

    Pass 1 draws the first arrival ``G_{u,1}`` of every token (the target winner needs only
    these) and keeps the ``B`` smallest draft scores ``G_{u,1}/q_u`` in a max-heap: a token
    outside this set has ``B`` first arrivals ahead of it, so none of its arrivals can be among
    the ``B`` smallest.  Pass 2 is a ``B``-step merge: pop the smallest score, emit its label,
    push that token's next arrival ``G_{u,j+1} = G_{u,j} - log U[u, j]``.  Ties follow the
    ``(score, u, j)`` order of the direct kernel.  ``heap = (hs, hu, hg, hj)`` are
    length-``B`` work buffers (score, token, cumulative clock, next arrival index,
    :func:`mpfr_heap`); ``drafts[:B]`` is filled.

    Pass 1 is the scan of :func:`_race_column` with a heap of ``B`` draft scores where the
    race keeps one; it stays a loop of its own: one loop for both, with the draft side's
    keeper chosen at compile time, gave the same results bit for bit but cost 0.1 to 0.6
    microseconds more per call at 50 tokens (12% at ``B = 4``) and 4% at 1,000.
    """
    hs, hu, hg, hj = heap
    n = q.shape[0]
    by = np.inf
    y = -1
    cnt = 0
    for u in range(n):
        pu = p[u] if use_p else 0.0
        qu = q[u]
        if pu > 0.0 or qu > 0.0:
            v = _unif(label, table, use_table, u, 0)
            if cnt == B and _skip(v, pu, by, qu, hs[0]):
                continue
            e = -np.log(v)
            if pu > 0.0:
                s = e / pu
                if s < by:
                    by = s
                    y = u
            if qu > 0.0:
                s = e / qu
                if cnt < B:
                    _heap_push(hs, hu, hg, hj, cnt, s, u, e, 1)
                    cnt += 1
                elif _lt(s, u, 1, hs[0], hu[0], hj[0]):
                    _heap_replace_top(hs, hu, hg, hj, cnt, s, u, e, 1)
    # turn the max-heap into a min-heap
    for i in range((cnt >> 1) - 1, -1, -1):
        _sift_down(hs, hu, hg, hj, i, cnt, False)
    for b in range(B):
        u = hu[0]
        drafts[b] = u
        if b + 1 < B:
            j = hj[0]
            g = hg[0] + (-np.log(_unif(label, table, use_table, u, j)))
            hs[0] = g / q[u]
            hg[0] = g
            hj[0] = j + 1
            _sift_down(hs, hu, hg, hj, 0, cnt, False)
    return y


@njit(**JIT)
def mpfr_heap(B):
    """The work buffers ``(hs, hu, hg, hj)`` of the MPFR kernels for ``B`` drafts: score,
    token, cumulative clock and next arrival index of each kept candidate."""
    return np.empty(B), np.empty(B, np.int64), np.empty(B), np.empty(B, np.int64)


@njit(**JIT)
def mpfr_fast_step(p, q, B, label, table, use_table, drafts, heap):
    """MPFR (Liu, Wan, Gao & Gündüz 2026, arXiv:2609.21858, Alg. 6) in ``O(n + B log B)``.

    Exactly the output of :func:`mpfr_direct_step` (see :func:`_mpfr_select`); ``Y`` is the
    target winner ``argmin_u G_{u,1}/p_u``; ``heap`` the work buffers of :func:`mpfr_heap`.
    Returns ``(y, accepted)``.
    """
    y = _mpfr_select(p, q, True, B, label, table, use_table, drafts, heap)
    return y, _contains(drafts, y)


@njit(**JIT)
def mpfr_topk(label, q, k, out):
    """Draft side of MPFR on keyed clocks: labels of the ``k`` smallest ``G_{v,j} / q_v``.

    ``G_{v,j} = sum_{i<j} -log U(label, v, i)``; ``out[:k]`` receives the labels in
    increasing ``(score, v, j)`` order -- the drafts of :func:`mpfr_fast_step` (the
    ``O(n + k log k)`` kernel), used by the sequence decoder at a context of multiplicity ``k``
    (Alg. 4/10).
    """
    _mpfr_select(q, q, False, k, label, np.empty((1, 1)), False, out, mpfr_heap(k))


@njit(**JIT)
def mpfr_direct_step(p, q, B, label, table, use_table, drafts, heap):
    """Direct finite-support MPFR (Alg. 6) with token clocks: every one of the ``n B`` clocks.

    ``G_{u,j} = sum_{m<j} -log U[u, m]`` (``j = 1..B``) for every token; ``Y = argmin_u
    G_{u,1}/p_u``; the drafts are the labels of the ``B`` smallest ``G_{u,j}/q_u`` in
    increasing order, ties by ``(u, j)`` (a stable sort of the candidates listed token by
    token).  The literal algorithm, kept as the check of :func:`mpfr_fast_step`; the ``B``
    smallest are kept in a max-heap (``heap = (hs, hu, hg, hj)``, length ``B``,
    :func:`mpfr_heap`) and sorted at the end, so the cost is ``O(n B)`` draws plus
    ``O(log B)`` per heap replacement (``O(n B log B)`` at worst).  Returns
    ``(y, accepted)``.
    """
    hs, hu, hg, hj = heap
    n = p.shape[0]
    by = np.inf
    y = -1
    cnt = 0
    for u in range(n):
        pu = p[u]
        qu = q[u]
        if pu > 0.0 or qu > 0.0:
            g = 0.0
            jmax = B if qu > 0.0 else 1
            for j in range(jmax):
                e = -np.log(_unif(label, table, use_table, u, j))
                g = g + e
                if j == 0 and pu > 0.0:
                    s = g / pu
                    if s < by:
                        by = s
                        y = u
                if qu > 0.0:
                    s = g / qu
                    if cnt < B:
                        _heap_push(hs, hu, hg, hj, cnt, s, u, g, j)
                        cnt += 1
                    elif _lt(s, u, j, hs[0], hu[0], hj[0]):
                        _heap_replace_top(hs, hu, hg, hj, cnt, s, u, g, j)
    # heap sort: the max-heap of the B smallest into increasing (s, u, j) order
    for end in range(cnt - 1, 0, -1):
        _swap(hs, hu, hg, hj, 0, end)
        _sift_down(hs, hu, hg, hj, 0, end, True)
    for b in range(B):
        drafts[b] = hu[b]
    return y, _contains(drafts, y)


@njit(**JIT)
def mpfr_scan_step(p, ratio, qcdf, B, w, label, table, use_table, max_scan, drafts):
    """Proposal-scanning MPFR (Alg. 5 of arXiv:2609.21858) for ``P << Q`` with ratio bound ``w``.

    Candidate ``i = 0, 1, ...`` has arrival time ``T_i = sum_{k<=i} -log U[k, 0]`` and mark
    ``Z_i = inv_cdf(qcdf, U[i, 1])`` (``Z_i ~ Q``).  Draft side (``r = dQ/dQ = 1``): the drafts
    are ``Z_0..Z_{B-1}``.  Target side: ``Y`` = mark of ``argmin_i T_i / r(Z_i)``,
    ``r = ratio = p/q`` (``+inf`` score where ``r = 0``), scanned until ``best <= T_i * w``
    (Theorem A.4: no later candidate can beat ``best`` because ``1/r >= w``).

    Returns ``(y, accepted, status)``; ``status = -1`` when more than ``max_scan`` candidates
    (or the table's rows) would be needed.
    """
    t = 0.0
    best = np.inf
    y = -1
    limit = table.shape[0] if use_table else max_scan
    i = 0
    while True:
        if i >= limit:
            return -1, False, -1
        e = -np.log(_unif(label, table, use_table, i, 0))
        t = t + e
        z = inv_cdf(qcdf, _unif(label, table, use_table, i, 1))
        if i < B:
            drafts[i] = z
        rz = ratio[z]
        if rz > 0.0:
            s = t / rz
            if s < best:
                best = s
                y = z
        i += 1
        if i >= B and best <= t * w:
            break
    return y, _contains(drafts, y), 0


@njit(**JIT)
def mpfr_public_select(mult, q0cdf, B, w, label, table, use_table, max_scan, out, heap):
    """Alg. 5 of arXiv:2609.21858 with a public proposal ``Q0``: the ``B`` smallest scores.

    Point ``i = 0, 1, ...`` of the process has arrival time ``T_i = sum_{k<=i} -log U[i, 0]``
    and mark ``Z_i = inv_cdf(q0cdf, U[i, 1])`` (``Z_i ~ Q0``, a law that does not depend on
    the model); its score is ``S_i = T_i mult[Z_i]`` with ``mult = q0 / P`` (``= 1 / r``,
    ``r = dP/dQ0``; ``+inf`` where ``P = 0``).  The ``B`` smallest scores are kept in a
    max-heap (``heap = (hs, hu, hg, hj)`` of :func:`mpfr_heap`: score, mark, arrival time,
    point index; ties by ``(score, mark, index)``) and the scan stops once ``B`` are kept and
    the largest is at most ``T_i w`` (``w <= min mult``: no later point can enter, Theorem
    A.4).  On return ``out[:B]`` holds the marks and ``hs[:B]`` the scores in increasing
    order (``out[0]`` is the PFR sample of ``P``, ``hs[0] / mult[out[0]]`` its point's
    arrival time).

    Returns ``(n_points, status)``: the number of points read (the cost) and ``-1`` when
    more than ``max_scan`` points (or the table's rows) would be needed, else ``0``.
    """
    hs, hu, hg, hj = heap
    limit = table.shape[0] if use_table else max_scan
    t = 0.0
    cnt = 0
    i = 0
    while True:
        if i >= limit:
            return i, -1
        t = t + (-np.log(_unif(label, table, use_table, i, 0)))
        z = inv_cdf(q0cdf, _unif(label, table, use_table, i, 1))
        m = mult[z]
        if m < np.inf:
            s = t * m
            if cnt < B:
                _heap_push(hs, hu, hg, hj, cnt, s, z, t, i)
                cnt += 1
            elif _lt(s, z, i, hs[0], hu[0], hj[0]):
                _heap_replace_top(hs, hu, hg, hj, cnt, s, z, t, i)
        i += 1
        if cnt == B and hs[0] <= t * w:
            break
    # heap sort: the max-heap of the B smallest into increasing (score, mark, index) order
    for end in range(cnt - 1, 0, -1):
        _swap(hs, hu, hg, hj, 0, end)
        _sift_down(hs, hu, hg, hj, 0, end, True)
    for b in range(B):
        out[b] = hu[b]
    return i, 0


# --------------------------------------------------------------------------- batches


class Pairs(NamedTuple):
    """The prepared pairs of the batched estimators (``arrays`` of
    :class:`specbound.sim.samplers.PreparedPairs`, which describes them): target and draft,
    the draft's CDF, the sequential schemes' target weights, scales and CDFs, MPFR-scan's
    ratio and bound."""

    p: np.ndarray
    q: np.ndarray
    qcdf: np.ndarray
    targ: np.ndarray
    scale: np.ndarray
    fincdf: np.ndarray
    ratio: np.ndarray
    w: np.ndarray


class Chunks(NamedTuple):
    """The chunks of trials of :func:`batch_kernel`: chunk ``c`` runs ``length[c]`` trials of
    pair ``pair[c]`` from trial ``start[c]`` on, at PRF label ``label[c]``."""

    pair: np.ndarray
    start: np.ndarray
    length: np.ndarray
    label: np.ndarray


class Trials(NamedTuple):
    """The outputs of :func:`batch_kernel`: emitted tokens ``y`` (pair, trial), drafts ``x``
    (pair, trial, draft), and per chunk its successes ``succ`` and its ``status``."""

    y: np.ndarray
    x: np.ndarray
    succ: np.ndarray
    status: np.ndarray


@njit(**JIT_PAR)
def batch_kernel(code, B, pairs, max_scan, chunks, store_y, store_x, out):
    """Run ``chunks.length[c]`` trials of scheme ``code`` on pair ``chunks.pair[c]`` of
    ``pairs`` (:class:`Pairs`) for every chunk (:class:`Chunks`).

    Trial ``t`` of chunk ``c`` reads the keyed PRF at label
    ``trial_label(chunks.label[c], t)``, so the result is a pure function of the inputs and
    does not depend on how ``prange`` distributes chunks over threads.  Each chunk writes
    only its own slice ``[start, start + length)`` of row ``pair[c]`` of ``out.y`` (emitted
    tokens, when ``store_y``) and ``out.x`` (drafts, when ``store_x``), and its success
    count to ``out.succ[c]`` (:class:`Trials`).
    """
    # the records' arrays by attribute, before the parallel loop: Numba's parfors lose the
    # writes of a prange body to arrays unpacked from a tuple (``a, b = rec``)
    p = pairs.p
    q = pairs.q
    qcdf = pairs.qcdf
    targ = pairs.targ
    scale = pairs.scale
    fincdf = pairs.fincdf
    ratio = pairs.ratio
    w = pairs.w
    chunk_pair = chunks.pair
    chunk_start = chunks.start
    chunk_len = chunks.length
    chunk_label = chunks.label
    out_y = out.y
    out_x = out.x
    chunk_succ = out.succ
    chunk_status = out.status
    table = np.empty((1, 1))
    for c in prange(chunk_pair.shape[0]):
        i = chunk_pair[c]
        start = chunk_start[c]
        drafts = np.empty(B, np.int64)
        heap = mpfr_heap(B)
        succ = 0
        status = 0
        for t in range(chunk_len[c]):
            lab = trial_label(chunk_label[c], t)
            if code == SD or code == SPECINFER or code == SPECTR:
                y, acc = seq_step(q[i], qcdf[i], targ[i], scale[i], fincdf[i], B, lab, table,
                                  False, drafts)
            elif code == EXP_RACE:
                y, x = exp_race_step(p[i], q[i], lab, table, False)
                drafts[0] = x
                acc = y == x
            elif code == MPFR:
                y, acc = mpfr_fast_step(p[i], q[i], B, lab, table, False, drafts, heap)
            elif code == MPFR_DIRECT:
                y, acc = mpfr_direct_step(p[i], q[i], B, lab, table, False, drafts, heap)
            elif code == GLS:
                y, acc = gls_step(p[i], q[i], B, lab, table, False, drafts)
            else:  # MPFR_SCAN
                y, acc, st = mpfr_scan_step(p[i], ratio[i], qcdf[i], B, w[i], lab, table, False,
                                            max_scan, drafts)
                if st != 0:
                    status = st
            if acc:
                succ += 1
            if store_y:
                out_y[i, start + t] = y
            if store_x:
                for b in range(B):
                    out_x[i, start + t, b] = drafts[b]
        chunk_succ[c] = succ
        chunk_status[c] = status
