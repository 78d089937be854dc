"""Block verification (Sun et al. 2024, arXiv:2403.10444, Alg. 2) in Numba (private).

Block verification decides a whole draft block ``x_1..x_ell ~ q`` at once instead of token
by token (Sun, Mendlovic, Leviathan, Aharoni, Beirami, Ro & Suresh 2024, "Block verification
accelerates speculative decoding", arXiv:2403.10444, Alg. 2).  With ``p_0 = 1`` and

    p_i = min(p_{i-1} P_{i-1}(x_i) / Q_{i-1}(x_i), 1)          (the residual weights)
    r_i = sum_v (p_i P_i(v) - Q_i(v))_+
    h_i = r_i / (r_i + 1 - p_i)   for i < ell,     h_ell = p_ell,

(``P_i`` / ``Q_i`` the target's / draft's laws after ``x_1..x_i``) the block keeps the
prefix ``x_1..x_tau`` with ``tau = max{i : eta_i <= h_i}`` (0 when there is none, ``eta_i``
independent uniforms) and then emits one token: a draw from the normalised residual
``(p_tau P_tau - Q_tau)_+`` when ``tau < ell``, from ``P_ell`` (the bonus) when ``tau = ell``.
The mathematics (why ``P(tau >= i | x_1..x_i) = p_i``, the expected block length and the
comparison with token-wise speculative sampling) is in ``docs/mathematics.md`` §5.7.

Randomness: ``rng.random((ell + 1, 3))`` per block, the layout of the single-draft block
(:mod:`specbound.sim.decode`): ``us[s, 0]`` draws draft ``s``, ``us[s, 1]`` is ``eta_{s+1}``,
``us[tau, 2]`` draws the correction and ``us[ell, 2]`` the bonus.  The drafts of a seed are
therefore those of ``vsps``.

Both block loops call the same two IEEE kernels (:func:`blockver_tau`,
:func:`blockver_correction`), so that the Python loop (``BlockRun.block_blockver``) and the
compiled block (``_compiled.block_blockver``, one dispatch line of ``_compiled.decode_one``)
make the same decisions bit for bit.  The kernels are compiled without fastmath: ``r / r``
is exactly 1 (an approximate reciprocal could make it fall below a uniform), so a correction
never equals the next draft token when ``p_{tau+1} = 1``.
"""

from __future__ import annotations

import numpy as np

from specbound.sim import _kernels as _K
from specbound.sim._config import JIT, njit

JIT_IEEE = dict(JIT, fastmath=False)


@njit(**JIT_IEEE)
def blockver_tau(P, Q, xs, ell, us, ps):
    """The kept prefix length ``tau`` of one block (Alg. 2 of Sun et al. 2024).

    ``P[i]`` / ``Q[i]`` (``i < ell``): the target's / draft's laws after the first ``i``
    drafts ``xs[:i]``; ``us``: the block's uniforms flattened (``eta_i = us[3 (i - 1) + 1]``).
    Writes the residual weights ``p_0..p_ell`` into ``ps``.  ``h_i`` is evaluated from
    ``i = ell`` down to the first success (the largest ``i`` with ``eta_i <= h_i``); a zero
    denominator ``r_i + 1 - p_i`` (``p_i = 1`` and no residual mass) gives ``h_i = 1``, a
    choice that does not change the law (then ``P(tau >= i + 1 | x_1..x_i) = 1``).
    """
    ps[0] = 1.0
    p = 1.0
    for i in range(1, ell + 1):
        x = xs[i - 1]
        v = p * P[i - 1, x]
        qx = Q[i - 1, x]
        p = 1.0 if v >= qx else v / qx
        ps[i] = p
    if ell >= 1 and us[3 * (ell - 1) + 1] <= ps[ell]:
        return ell
    n = P.shape[1]
    for i in range(ell - 1, 0, -1):
        pi = ps[i]
        r = 0.0
        for v_ in range(n):
            d = pi * P[i, v_] - Q[i, v_]
            if d > 0.0:
                r += d
        den = r + (1.0 - pi)
        h = r / den if den > 0.0 else 1.0
        if us[3 * (i - 1) + 1] <= h:
            return i
    return 0


@njit(**JIT_IEEE)
def blockver_correction(pt, pv, qv, u):
    """The correction token after keeping ``tau < ell`` drafts: a draw with ``u`` from
    ``(pt pv - qv)_+`` (``pt = p_tau``), from ``pv`` if that has no mass.  With ``pt = 1``
    (``tau = 0``) it is speculative sampling's residual draw
    (:func:`specbound.sim._kernels.residual_sample`) bit for bit.

    Also the correction of lossless HSD (decoder ``hsd``, ``pt = c_tau``, the capped joint
    ratio of :func:`specbound.sim._compiled_hsd.hsd_caps`): both decoders draw from the
    normalised ``(pt P - Q)_+``, and the scaled copy ``w = pt pv`` that HSD's own kernel made
    at ``pt = 1`` is ``pv`` exactly (``1.0 * x == x`` in IEEE arithmetic), so one kernel
    serves both with the same tokens for every seed (the decoder fingerprint's ``hsd``
    cases are unchanged)."""
    if pt == 1.0:
        return _K.residual_sample(pv, qv, u)
    w = np.empty(pv.shape[0])
    for v in range(pv.shape[0]):
        w[v] = pt * pv[v]
    return _K.residual_sample(w, qv, u)
