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
compiled block (:func:`blockver_block`, dispatched from ``_compiled.decode_one``) make the same
decisions bit for bit.  The kernels are compiled without fastmath: ``r / r`` is exactly 1
(an approximate reciprocal could make it fall below a uniform), so a correction never equals
the next draft token when ``p_{tau+1} = 1``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from specbound.sim import _kernels as _K
from specbound.sim._config import JIT
from specbound.sim._model_kernels import (
    add_field,
    finalize_probs,
    synthetic_probs_rows,
    window_label,
)
from specbound.sim._pcg import pcg_doubles

JIT_IEEE = dict(JIT, fastmath=False)

#: the model kind of a compiled ``SyntheticLM`` (``_compiled.MODEL_SYNTHETIC``; a
#: ``MarkovLM`` is the other kind)
MODEL_SYNTHETIC = 0


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
    (:func:`specbound.sim._kernels.residual_sample`) bit for bit."""
    if pt == 1.0:
        return _K.residual_sample(pv, qv, u)
    w = np.empty(pv.shape[0])
    for v in range(pv.shape[0]):
        w[v] = pt * pv[v]
    return _K.residual_sample(w, qv, u)


@njit(**JIT)
def _probs(m, ctx, out):
    """Next-token law of the compiled model ``m`` after ``ctx`` (``_compiled.model_probs``,
    the same kernels: bit for bit the model's ``next_distribution``)."""
    if m[0] == MODEL_SYNTHETIC:
        synthetic_probs_rows(m[1], m[2], m[3], m[4], m[5][0], m[7], ctx, out)
    elif ctx.shape[0] == 0:
        out[:] = m[6]
    else:
        out[:] = m[5][ctx[ctx.shape[0] - 1]]


@njit(**JIT)
def _partial(m, ctx, S):
    """The back-off sum of a Gaussian ``SyntheticLM`` after ``ctx`` into ``S``
    (``_compiled.model_partial``: the same operations in the same order)."""
    w = m[3][0] / np.sqrt(m[1][1] + 1.0)
    k0 = 1
    if m[7].shape[0] == S.shape[0] and m[1][1] >= 1 and ctx.shape[0] > 0:
        S[:] = m[7][ctx[ctx.shape[0] - 1]]
        k0 = 2
    else:
        S[:] = m[4]
    for k in range(k0, m[1][1] + 1):
        add_field(m[1][0], window_label(m[2][0], k, ctx), w, m[5][0], S)


@njit(**JIT)
def _finish(m, ctx, S, logits, out):
    """A model's law from the shared back-off sum ``S`` (``_compiled.model_finish``)."""
    logits[:] = S
    if m[3][2] > 0.0:
        add_field(m[1][0], window_label(m[2][1], m[1][2], ctx), m[3][2], m[5][0], logits)
    finalize_probs(logits, m[3][3], m[1][3], out)


@njit(**JIT)
def blockver_block(tm, dm, tokens, hlen, ell, room, st, counts, store_drafts, drafts,
                   pivots, nu, dec_ok, dec_pos, gen, ndec, share):
    """One block of block verification in the compiled loop; returns ``(k, gen, ndec)``.

    ``tm`` / ``dm``: the compiled target and draft (``_compiled.model_spec``); the committed
    sequence is ``tokens[:hlen]``; ``ell`` drafts; ``room``: the tokens still allowed
    (``max_new_tokens - gen``), so that the bonus is emitted only when ``room > ell``;
    ``st``: the PCG64 state.  Writes the emitted tokens into ``tokens[hlen:]``, the drafts
    into ``drafts[0, :ell]`` when ``store_drafts``, NaN pivots from ``gen`` and one decision
    per verified position from ``ndec`` (``nu = 1``: accepted for the kept drafts, rejected
    for the position of the correction); ``counts``: (target evaluations, draft evaluations,
    target contexts, draft contexts), incremented as the single-draft block does.  ``share``:
    target and draft have the same back-off fields (``_compiled.shares_fields``), so a
    drafted context's sum is computed once for both (bit for bit the same laws).  ``k`` is
    the number of tokens emitted.
    """
    n = tm[4].shape[0] if tm[0] == MODEL_SYNTHETIC else tm[5].shape[1]
    us = np.empty(3 * (ell + 1))
    pcg_doubles(st, us)
    Q = np.empty((ell, n))
    P = np.empty((ell + 1, n))
    xs = np.empty(ell, np.int64)
    ps = np.empty(ell + 1)
    S = np.empty((ell if share else 0, n))
    LG = np.empty(n if share else 0)
    for s in range(ell):
        counts[1] += 1
        counts[3] += 1
        if share:
            _partial(dm, tokens[:hlen + s], S[s])
            _finish(dm, tokens[:hlen + s], S[s], LG, Q[s])
        else:
            _probs(dm, tokens[:hlen + s], Q[s])
        x = _K.categorical(Q[s], us[3 * s])
        tokens[hlen + s] = x
        xs[s] = x
    if store_drafts:
        for s in range(ell):
            drafts[0, s] = xs[s]
    counts[0] += 1
    counts[2] += ell + 1
    for s in range(ell):
        if share:
            _finish(tm, tokens[:hlen + s], S[s], LG, P[s])
        else:
            _probs(tm, tokens[:hlen + s], P[s])
    tau = blockver_tau(P, Q, xs, ell, us, ps)
    k = 0
    for _ in range(tau):
        pivots[gen] = np.nan
        gen += 1
        k += 1
        nu[ndec] = 1
        dec_ok[ndec] = True
        dec_pos[ndec] = gen - 1
        ndec += 1
    if tau < ell:
        y = blockver_correction(ps[tau], P[tau], Q[tau], us[3 * tau + 2])
        tokens[hlen + tau] = y
        pivots[gen] = np.nan
        gen += 1
        k += 1
        nu[ndec] = 1
        dec_ok[ndec] = False
        dec_pos[ndec] = gen - 1
        ndec += 1
    elif room > ell:
        _probs(tm, tokens[:hlen + ell], P[ell])
        tokens[hlen + ell] = _K.categorical(P[ell], us[3 * ell + 2])
        pivots[gen] = np.nan
        gen += 1
        k += 1
    return k, gen, ndec
