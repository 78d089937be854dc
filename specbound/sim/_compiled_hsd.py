"""Lossless hierarchical speculative decoding (decoder ``hsd``) in Numba (private).

Hierarchical speculative decoding (Zhou, Huang, Li, Wu, Wang, Zhang, Lin & Cheng, ICLR 2026,
"Overcoming joint intractability with lossless hierarchical speculative decoding",
arXiv:2601.05724; the lossless HSD cited by Zhou et al. 2026, arXiv:2607.26627) verifies a
draft block ``x_1..x_ell ~ Q`` through the *joint* probabilities of its prefixes.  With the
joint ratio ``R_k = P(x_1..x_k) / Q(x_1..x_k)`` (``R_0 = 1``) and its capped form

    c_k = R_k / max(1, R_1, ..., R_k)                      (the capping of HSD)

the branch after ``x_1..x_k`` holds, in units of ``Q(x_1..x_k)``, the excess
``A_k = sum_v (c_k P_k(v) - Q_k(v))_+`` and the deficit ``D_k = sum_v (Q_k(v) - c_k
P_k(v))_+`` (``P_k`` / ``Q_k`` the target's / draft's laws after ``x_1..x_k``).  The block is
accepted whole with probability ``c_ell``; otherwise the verification *steps back* from level
``ell - 1`` towards the root, leaving level ``k`` with probability ``1 - A_k / max(A_k,
D_k)`` (the deficit that its excess cannot absorb), and stops at the first level ``k`` it does
not leave; it keeps ``x_1..x_k`` and draws the next token from the normalised
``(c_k P_k - Q_k)_+``.  Level 0 is never left (``c_0 = 1`` gives ``D_0 = A_0``).

The capping is applied at every level, the full block included.  The authors' released code
(``FastHSD`` / ``_speculative_sampling``) tests the full block against the uncapped
``min(1, R_ell)``; that test is not lossless (``docs/hsd.md`` gives a two-token
counter-example), and the lossless form implemented here keeps ``x_1..x_i`` with the same
probability as block verification (Sun et al. 2024, arXiv:2403.10444, Alg. 2): ``c_k`` is
block verification's residual weight and ``1 - A_k / D_k`` its ``1 - h_k``.  The two decoders
draw the same drafts and differ in how a step-back coin is read (``hsd`` stays at level ``k``
iff ``eta_k >= 1 - A_k / D_k``, block verification iff ``eta_k <= h_k``), so their tokens
differ for one seed while their laws are equal.

Randomness: ``rng.random((ell + 1, 3))`` per block, the layout of the single-draft block:
``us[s, 0]`` draws draft ``s``, ``us[ell - 1, 1]`` is the coin of the full block,
``us[k - 1, 1]`` the step-back coin of level ``k`` (``1 <= k < ell``), ``us[tau, 2]`` draws
the correction and ``us[ell, 2]`` the bonus.

Both block loops call the same two IEEE kernels (:func:`hsd_tau` and the correction
:func:`specbound.sim._compiled_blockver.blockver_correction`, the draw from the normalised
``(c_tau P_tau - Q_tau)_+`` that block verification makes from ``(p_tau P_tau - Q_tau)_+``),
so that the Python loop (``BlockRun.block_hsd``) and the compiled block
(``_compiled.block_hsd``, one dispatch line of ``_compiled.decode_one``) make the same
decisions bit for bit.
"""

from __future__ import annotations

import numpy as np

from specbound.sim._config import JIT, njit

JIT_IEEE = dict(JIT, fastmath=False)


@njit(**JIT_IEEE)
def hsd_caps(P, Q, xs, ell, cs):
    """The capped joint ratios ``c_0..c_ell`` of the draft path ``xs`` into ``cs``:
    ``c_k = R_k / max(1, R_1..R_k)``, computed from the joint log-ratio ``log R_k`` and its
    running maximum (``log 0 = -inf`` gives ``c = 0`` after a draft the target excludes; a
    draft of draft probability 0, which the samplers never draw, makes ``R_k`` the new
    maximum: ``c_k = 1``, and the later caps are taken relative to it)."""
    cs[0] = 1.0
    lr = 0.0
    lm = 0.0
    for k in range(1, ell + 1):
        x = xs[k - 1]
        px = P[k - 1, x]
        qx = Q[k - 1, x]
        if px <= 0.0:
            lr = -np.inf
        elif qx <= 0.0 and lr != -np.inf:
            lr = 0.0
            lm = 0.0
        elif lr != -np.inf:
            lr += np.log(px) - np.log(qx)
        if lr > lm:
            lm = lr
        cs[k] = np.exp(lr - lm) if lr != -np.inf else 0.0


@njit(**JIT_IEEE)
def hsd_step_back(c, pv, qv):
    """The probability of leaving a level with capped ratio ``c``: ``1 - A / max(A, D)``
    with ``A = sum (c pv - qv)_+`` and ``D = sum (qv - c pv)_+``; 0 when both vanish (the
    branch is balanced: its drafts are the target's)."""
    a = 0.0
    d = 0.0
    for v in range(pv.shape[0]):
        t = c * pv[v] - qv[v]
        if t > 0.0:
            a += t
        else:
            d -= t
    den = a if a >= d else d
    if den <= 0.0:
        return 0.0
    return 1.0 - a / den


@njit(**JIT_IEEE)
def hsd_tau(P, Q, xs, ell, us, cs):
    """The kept prefix length ``tau`` of one block of lossless HSD.

    ``P[k]`` / ``Q[k]`` (``k < ell``): the target's / draft's laws after ``xs[:k]``; ``us``:
    the block's uniforms flattened (``us[3 (k - 1) + 1]`` the coin of level ``k``, that of
    the full block at ``k = ell``).  Writes the capped ratios ``c_0..c_ell`` into ``cs``.
    The full block is kept iff its coin is at most ``c_ell``; otherwise ``tau`` is the
    largest level ``k < ell`` whose coin is at least its step-back probability
    (:func:`hsd_step_back`), 0 when every level ``k >= 1`` is left.
    """
    hsd_caps(P, Q, xs, ell, cs)
    if ell == 0:
        return 0
    if us[3 * (ell - 1) + 1] <= cs[ell]:
        return ell
    for k in range(ell - 1, 0, -1):
        if us[3 * (k - 1) + 1] >= hsd_step_back(cs[k], P[k], Q[k]):
            return k
    return 0

