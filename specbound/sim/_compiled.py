"""The compiled sequence decoders: the block loop of every decoder in Numba (private).

:func:`decode_one` is the block loop of :func:`specbound.sim.decode.speculative_decode` for
every decoder of :data:`specbound.sim.decoders.DECODER_SPECS` (the block chosen by the
decoder's block kind, the behaviour inside it by the spec's flags: :func:`compiled_spec`)
with the model evaluation inside the
loop (:class:`~specbound.sim.models.SyntheticLM` through
:func:`specbound.sim._model_kernels.synthetic_probs`, :class:`~specbound.sim.models.MarkovLM`
by its rows), the keyed context labels in Numba (:mod:`specbound.sim._blake2b`), the same
step kernels (:mod:`specbound.sim._kernels`) and the same unkeyed random stream: NumPy's
``PCG64`` replayed in Numba (:func:`pcg_next`), so that ``rng.random()`` and
``rng.integers(0, 2**64, dtype=np.uint64)`` are the same numbers in the same order.  The
result is token for token, block for block and decision for decision the reference loop's
(``tests/test_sim_compiled.py``).  The algorithms and their randomness layout are documented
in :mod:`specbound.sim.decode` (Liu, Wan, Gao & Gündüz 2026, arXiv:2609.21858, Alg. 1, 3, 4,
6, 9, 10; the baselines named there).

:func:`decode_batch` runs many prompts under ``prange``: every prompt has its own random
stream and writes only its own rows, so the result does not depend on the number of threads.

Decoder options (``opts``, :func:`option_flags`): ``repeats="mask"`` (:func:`_is_repeat`
scans the earlier generated windows), ``reweight="gamma"`` (:func:`gamma_reweight`),
``unkeyed="fresh"``, ``residual="keyed"`` and ``repeats="skip"`` (vanilla speculative
sampling with the block's unkeyed uniforms in a repeated window; SpecInfer's recursive
rejection for an MPFR context of multiplicity > 1), each bit for bit the reference loop.

Not covered (the reference loop runs them): custom backends, models other than
``SyntheticLM`` / ``MarkovLM`` (a ``CachedLM`` of one only in the batched path),
seeds whose generator is not ``PCG64``, and runs whose work arrays exceed :data:`MAX_WORK`
(:func:`plan`).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from specbound.sim import _blake2b as _b2
from specbound.sim import _compiled_blockver as _BV
from specbound.sim import _compiled_lossy as _CL
from specbound.sim import _kernels as _K
from specbound.sim import _model_kernels as _mk
from specbound.sim._config import JIT
from specbound.sim._model_kernels import (
    add_field,
    finalize_probs,
    synthetic_probs_rows,
    window_label,
)
from specbound.sim._pcg import pcg_double, pcg_doubles, pcg_next, pcg_state, set_pcg_state
from specbound.sim.decoders import (
    ACC_KEYED_COIN,
    ACC_REWEIGHTED,
    ACCEPTANCES,
    BLOCK_BLOCKVER,
    BLOCK_GLS,
    BLOCK_KINDS,
    BLOCK_SINGLE,
    BLOCK_SPECINFER,
    BLOCK_TOKEN,
    BLOCK_TREE,
    DECODER_SPECS,
    DecoderSpec,
    decoder_spec,
)
from specbound.sim.lossy import RULE_CONTRASTIVE, RULE_FUZZY, RULE_TRUNCATION
from specbound.sim.prf import prf_uniform
from specbound.sim.results import DecodeResult, WatermarkConfig

JIT_PAR = dict(JIT, parallel=True)

#: decoder names by compiled code (``DecoderSpec.code``), derived from the registry
CODE_NAMES = tuple(sorted(DECODER_SPECS, key=lambda name: DECODER_SPECS[name].code))
#: codes of the keyed decoders
_KEYED = tuple(s.code for s in DECODER_SPECS.values() if s.keyed)
#: positions in the decoder's compiled spec ``dspec`` (:func:`compiled_spec`)
DS_CODE, DS_KIND, DS_KEYED, DS_ACCEPTANCE = range(4)

MODEL_SYNTHETIC = 0
MODEL_MARKOV = 1

# ------------------------------------------------------------------ models


def model_spec(model, unwrap_cached=False):
    """The compiled form of a model: ``(kind, ints, uints, floats, base, matrix, initial,
    rows)``.

    For a ``SyntheticLM``, ``matrix`` holds the quantile table of the ``"gaussian16"`` kind
    as its one row (a placeholder for the other kinds); for a ``MarkovLM`` it is the
    transition matrix.  ``rows`` are the first-order rows of a ``SyntheticLM``
    (``SyntheticLM._rows``; a ``(1, 1)`` placeholder otherwise).

    None when the model has no compiled evaluation (the reference loop then runs).  A
    :class:`~specbound.sim.models.CachedLM` is evaluated through its model only with
    ``unwrap_cached`` (its cache then sees no calls).
    """
    from specbound.sim.models import CachedLM, MarkovLM, SyntheticLM

    while unwrap_cached and type(model) is CachedLM:
        model = model.model
    e_i = np.zeros(4, np.int64)
    e_u = np.zeros(2, np.uint64)
    e_f = np.zeros(4, np.float64)
    if type(model) is SyntheticLM:
        return (MODEL_SYNTHETIC, np.ascontiguousarray(model._ints),
                np.ascontiguousarray(model._uints), np.ascontiguousarray(model._floats),
                np.ascontiguousarray(model._base, dtype=np.float64),
                np.ascontiguousarray(model._table, dtype=np.float64).reshape(1, -1),
                np.zeros(1), model._rows())
    if type(model) is MarkovLM:
        return (MODEL_MARKOV, e_i, e_u, e_f, np.zeros(1),
                np.ascontiguousarray(model.transition_matrix, dtype=np.float64),
                np.ascontiguousarray(model.initial, dtype=np.float64), np.zeros((1, 1)))
    return None


@njit(**JIT)
def model_probs(m, ctx, out):
    """Next-token distribution of the compiled model ``m`` after ``ctx`` into ``out``
    (bit for bit the model's ``next_distribution``)."""
    if m[0] == MODEL_SYNTHETIC:
        synthetic_probs_rows(m[1], m[2], m[3], m[4], m[5][0], m[7], ctx, out)
    elif ctx.shape[0] == 0:
        out[:] = m[6]
    else:
        out[:] = m[5][ctx[ctx.shape[0] - 1]]


@njit(**JIT)
def model_partial(m, ctx, S):
    """The context-dependent back-off sum of a Gaussian (or ``"gaussian16"``) ``SyntheticLM``
    before its own noise field: ``S = base + w sum_{k=1}^{m} g^(k)`` (the first steps of
    :func:`specbound.sim._model_kernels.synthetic_logits`, the same operations in the same
    order).  A target and a draft with the same fields share it (:func:`shares_fields`)."""
    w = m[3][0] / np.sqrt(m[1][1] + 1.0)
    k0 = 1
    if m[7].shape[0] == S.shape[0] and m[1][1] >= 1 and ctx.shape[0] > 0:
        # the first-order rows (SyntheticLM._rows): base + w g^(1), the same numbers
        S[:] = m[7][ctx[ctx.shape[0] - 1]]
        k0 = 2
    else:
        S[:] = m[4]
    for k in range(k0, m[1][1] + 1):
        add_field(m[1][0], window_label(m[2][0], k, ctx), w, m[5][0], S)


@njit(**JIT)
def model_finish(m, ctx, S, logits, out):
    """The distribution of a Gaussian ``SyntheticLM`` from its shared sum ``S``: its own
    noise field, temperature, top-k and softmax; bit for bit :func:`model_probs`."""
    logits[:] = S
    if m[3][2] > 0.0:
        add_field(m[1][0], window_label(m[2][1], m[1][2], ctx), m[3][2], m[5][0], logits)
    finalize_probs(logits, m[3][3], m[1][3], out)


@njit(**JIT)
def _draft_eval(m, ctx, S, logits, out, share):
    """Draft distribution after ``ctx``; with ``share`` its shared sum is kept in ``S``."""
    if share:
        model_partial(m, ctx, S)
        model_finish(m, ctx, S, logits, out)
    else:
        model_probs(m, ctx, out)


@njit(**JIT)
def _target_eval(m, ctx, S, logits, out, use_s):
    """Target distribution after ``ctx``, from the draft's shared sum ``S`` when ``use_s``."""
    if use_s:
        model_finish(m, ctx, S, logits, out)
    else:
        model_probs(m, ctx, out)


def shares_fields(tm, dm) -> bool:
    """Whether target and draft (compiled specs) have the same Gaussian back-off fields
    (same model seed, scale and window: a ``target.draft(...)`` with the target's window),
    so that a context's back-off sum is computed once for both."""
    return bool(tm[0] == MODEL_SYNTHETIC and dm[0] == MODEL_SYNTHETIC
                and tm[1][0] in (_mk.KIND_GAUSSIAN, _mk.KIND_GAUSSIAN16)
                and dm[1][0] == tm[1][0]
                and tm[2][0] == dm[2][0] and tm[3][0] == dm[3][0] and tm[1][1] == dm[1][1]
                and np.array_equal(tm[4], dm[4]))


# ------------------------------------------------------------------ labels


@njit(**JIT)
def _label(window, dwords, person, pre, pst, tokens, hlen, cur, scr):
    """Keyed label of ``tokens[:cur]``: the running prefix state (``window < 0``, the whole
    prefix; ``pre``/``pst`` hold the state after ``tokens[:hlen]``) or the last ``window``
    tokens."""
    if window < 0:
        return _b2.label_with_suffix(pre[0:8], pre[8:24], pst[0], pst[1], tokens, hlen, cur,
                                     scr[0:8], scr[8:24], scr[24:32], scr[32:48], scr[48:64])
    start = cur - window if cur > window else 0
    return _b2.label_of(dwords, person, tokens, start, cur, scr[0:8], scr[8:24], scr[24:32],
                        scr[32:48], scr[48:64])


@njit(**JIT)
def _prefix_start(dwords, person, pre, pst, tokens, n):
    nbuf, t = _b2.b2_start(pre[0:8], pre[8:24], dwords, person)
    pst[0] = nbuf
    pst[1] = t
    _prefix_extend(pre, pst, tokens, 0, n)


@njit(**JIT)
def _prefix_extend(pre, pst, tokens, start, stop):
    v = np.empty(16, np.uint64)
    nbuf = pst[0]
    t = pst[1]
    for i in range(start, stop):
        nbuf, t = _b2.b2_update_word(pre[0:8], pre[8:24], nbuf, t, np.uint64(tokens[i]), v)
    pst[0] = nbuf
    pst[1] = t


# ------------------------------------------------------------------ the trie of a block


@njit(**JIT)
def _write_path(parent, ntok, depth, node, tokens, hlen):
    """Write the path of ``node`` into ``tokens[hlen:hlen + depth[node]]``."""
    u = node
    while u > 0:
        tokens[hlen + depth[u] - 1] = ntok[u]
        u = parent[u]


@njit(**JIT)
def _child(parent, ntok, first, nn, node, tok):
    """Index of the child of ``node`` with token ``tok`` among nodes ``first..nn-1``; -1."""
    for c in range(first, nn):
        if parent[c] == node and ntok[c] == tok:
            return c
    return -1


@njit(**JIT)
def _less_row(a, b, n):
    for i in range(n):
        if a[i] != b[i]:
            return a[i] < b[i]
    return False


# ------------------------------------------------------------------ decoder options

#: positions of the option flags in ``opts`` (:func:`decode_one`)
OPT_MASK, OPT_GAMMA, OPT_FRESH, OPT_KEYED_RESIDUAL, OPT_SKIP = range(5)

JIT_IEEE = dict(JIT, fastmath=False)


@njit(**JIT_IEEE)
def gamma_reweight(label, w, u, out):
    """Gamma reweighting of ``w`` under the keyed permutation of ``label`` into ``out``
    (``u``: scratch of the vocabulary's size); bit for bit the reference loop's
    ``_gamma_reweight`` (Hu et al. 2023, arXiv:2310.10669, §4.2): the tokens ordered by
    ``prf_uniform(label, v, 0)`` (stable sort), ``b`` the running sum of ``w`` along that
    order divided by its total, ``a`` the previous ``b``, and token weight
    ``max(max(2b - 1, 0) - max(2a - 1, 0), 0)``.  Compiled without fastmath: the NumPy
    reference's roundings (running sum in order, true division, no fused multiply-add)."""
    n = w.shape[0]
    for v in range(n):
        u[v] = prf_uniform(label, v, 0)
    order = np.argsort(u, kind="mergesort")
    run = 0.0
    for i in range(n):
        run += w[order[i]]
        u[i] = run  # u now holds the running sums along the order
    total = u[n - 1]
    prev = 0.0
    for i in range(n):
        b = u[i] / total
        hi = 2.0 * b - 1.0
        lo = 2.0 * prev - 1.0
        x = (hi if hi > 0.0 else 0.0) - (lo if lo > 0.0 else 0.0)
        out[order[i]] = x if x > 0.0 else 0.0
        prev = b


@njit(**JIT)
def _is_repeat(tokens, n0, cur, w):
    """Whether the window (last ``w`` tokens) of ``tokens[:cur]`` is the window of
    ``tokens[:t]`` for a generated position ``n0 <= t < cur`` (the reference loop's repeat
    rule: earlier generated positions and, within a block, the earlier contexts of the same
    draft path, which the caller has written into ``tokens``)."""
    lw = w if w < cur else cur
    for t in range(n0, cur):
        lt = w if w < t else t
        if lt != lw:
            continue
        same = True
        for i in range(lw):
            if tokens[t - lw + i] != tokens[cur - lw + i]:
                same = False
                break
        if same:
            return True
    return False


@njit(**JIT)
def _clock(window, kdw, person, pre, pst, tokens, n0, hlen, cur, scr, mask, run_label):
    """The clock label of ``tokens[:cur]`` for a keyed decoder: the unkeyed position label
    of a masked repeat (``repeats="mask"``), else the keyed label."""
    if mask and _is_repeat(tokens, n0, cur, window):
        return _K.trial_label(run_label, cur)
    return _label(window, kdw, person, pre, pst, tokens, hlen, cur, scr)


# ------------------------------------------------------------------ one prompt


@njit(**JIT)
def decode_one(dspec, tm, dm, tokens, n0, N, L, B, max_blocks, st, window, kdw, adw, person,
               emitted, accepted, nu, dec_ok, dec_pos, pivots, drafts, block_ell, counts,
               store_drafts, share, opts, skp, dskp, vstep, fpar, ipar, jud, alw):
    """Decode one prompt (``tokens[:n0]``) with the decoder of ``dspec`` (its compiled spec,
    :func:`compiled_spec`: code, block kind, keyed, acceptance test); returns
    ``(generated, n_blocks, n_decisions)``.

    The block of every step is chosen by the block kind alone (``BLOCK_*`` of
    :mod:`specbound.sim.decoders`), and within a block the behaviour by the spec's flags, never
    by the decoder's code: an unknown kind raises ``ValueError`` (no fall-through).

    ``st``: the PCG64 state (advanced in place); ``window < 0``: whole-prefix labels;
    ``kdw`` / ``adw``: the key digest / the mse_pseudo acceptance digest as words.  Output
    rows: ``emitted``, ``accepted``, ``block_ell`` per block; ``nu``, ``dec_ok``,
    ``dec_pos`` per decision; ``pivots`` per generated token; ``drafts[block, :, :ell]``
    when ``store_drafts``; ``counts = (target evals, draft evals, target contexts, draft
    contexts)``.  ``share``: target and draft share their back-off fields
    (:func:`shares_fields`): a target evaluation in a drafted context reuses the draft's sum.
    ``opts``: the decoder options as flags (``OPT_*``): ``repeats="mask"``,
    ``reweight="gamma"``, ``unkeyed="fresh"``, ``residual="keyed"``, ``repeats="skip"``;
    ``skp`` / ``dskp``: the skipped flags per generated token / per decision.
    ``vstep``: the verification step of the single-draft block, -1 for speculative
    sampling's own step (the decoders, the ``lossless`` rule), else the code of a lossy rule
    (:data:`specbound.sim.lossy.RULE_SPECS`) with its constant parameters ``fpar``, ``ipar``,
    ``jud``, ``alw`` (:mod:`specbound.sim._compiled_lossy`).  Returns ``(generated,
    n_blocks, n_decisions, error)``, ``error`` :data:`_compiled_lossy.ERR_NO_MASS` when a
    truncation context needed ``p_Theta`` and ``A`` carried no target mass (the run stops).
    """
    kind = dspec[DS_KIND]
    if kind < BLOCK_TOKEN or kind > BLOCK_BLOCKVER:
        raise ValueError("decoder: unknown block kind in the compiled loop")
    if vstep != -1:
        known = False
        for c in _CL.CODES:
            if vstep == c:
                known = True
        if not known:
            raise ValueError("rule: unknown rule code in the compiled loop")
        if kind != BLOCK_SINGLE or dspec[DS_KEYED] != 0:
            raise ValueError("rule: a lossy rule is the verification step of the unkeyed "
                             "single-draft block")
    n = tm[4].shape[0] if tm[0] == MODEL_SYNTHETIC else tm[5].shape[1]
    keyed = dspec[DS_KEYED] != 0
    kcoin = dspec[DS_ACCEPTANCE] == ACC_KEYED_COIN  # mse_pseudo's second key
    reweighted = dspec[DS_ACCEPTANCE] == ACC_REWEIGHTED
    gamma = opts[OPT_GAMMA] != 0
    mask = opts[OPT_MASK] != 0 and keyed and window >= 0
    fresh = opts[OPT_FRESH] != 0 and kind == BLOCK_TREE and not keyed
    kres = opts[OPT_KEYED_RESIDUAL] != 0 and kcoin
    # repeats="skip": the unkeyed uniforms are drawn whenever the mode is on (as in the
    # reference loop), repeats are looked for only with a finite window
    skipmode = opts[OPT_SKIP] != 0 and keyed
    track_skip = skipmode and window >= 0
    tree = kind == BLOCK_TREE
    single = kind == BLOCK_SINGLE
    GU = np.empty(n if gamma else 1)
    GP = np.empty(n if gamma else 1)
    GQ = np.empty(n if gamma else 1)
    maxn = 1 + B * L
    QS = np.empty((maxn if skipmode and tree else 1, n))
    ncands = np.empty((maxn if skipmode and tree else 1, B), np.int64)
    nslot = np.zeros(maxn, np.int64)
    nskip = np.zeros(maxn, np.bool_)
    nskset = np.zeros(maxn, np.bool_)
    sks = np.zeros(L, np.bool_)
    P = np.empty(n)
    LG = np.empty(n)
    W = np.empty(n if vstep >= 0 else 1)
    T = np.empty(n if vstep >= 0 else 1)
    NU = np.empty(n if vstep == RULE_CONTRASTIVE else 1)
    SN = np.empty((maxn if share else 1, n))
    has_s = np.zeros(maxn, np.bool_)
    Q = np.empty((L if single else 1, n))
    QN = np.empty((maxn if kind == BLOCK_SPECINFER else 1, n))
    parent = np.empty(maxn, np.int64)
    ntok = np.empty(maxn, np.int64)
    depth = np.empty(maxn, np.int64)
    mult = np.empty(maxn, np.int64)
    nfirst = np.empty(maxn, np.int64)
    nlab = np.empty(maxn, np.uint64)
    labset = np.zeros(maxn, np.bool_)
    buf = np.empty(B, np.int64)
    dnode = np.empty((B, L + 1), np.int64)
    paths = np.empty((B, L), np.int64)
    active = np.empty(B, np.int64)
    seen = np.empty(B, np.int64)
    us = np.empty(3 * B * (L + 1))
    ulabels = np.empty(L + 1, np.uint64)
    labs = np.empty(L, np.uint64)
    leaf_rows = np.empty((B, L), np.int64)
    order = np.empty(B, np.int64)
    u_acc = np.empty(B)
    cands = np.empty(B, np.int64)
    scr = np.empty(64, np.uint64)
    pre = np.zeros(24, np.uint64)
    pst = np.zeros(2, np.int64)
    apre = np.zeros(24, np.uint64)
    apst = np.zeros(2, np.int64)
    if keyed and window < 0:
        _prefix_start(kdw, person, pre, pst, tokens, n0)
    if kcoin and window < 0:
        _prefix_start(adw, person, apre, apst, tokens, n0)
    run_label = pcg_next(st)
    gen = 0
    nblk = 0
    ndec = 0
    for i in range(4):
        counts[i] = 0
    while gen < N and (max_blocks < 0 or nblk < max_blocks):
        ell = L if L < N - gen else N - gen
        hlen = n0 + gen
        dec0 = ndec
        k = 0
        if kind == BLOCK_TOKEN:  # ar, basic_uwm: one target token per step
            counts[0] += 1
            counts[2] += 1
            model_probs(tm, tokens[:hlen], P)
            if not keyed:
                y = _K.categorical(P, pcg_double(st))
                pivots[gen] = np.nan
            else:
                klab = _label(window, kdw, person, pre, pst, tokens, hlen, hlen, scr)
                lab = klab
                if mask and _is_repeat(tokens, n0, hlen, window):
                    lab = _K.trial_label(run_label, hlen)
                ug = 0.0
                if gamma or skipmode:  # one unkeyed uniform per token
                    ug = pcg_double(st)
                sk = track_skip and _is_repeat(tokens, n0, hlen, window)
                if sk:
                    y = _K.categorical(P, ug)
                elif gamma:
                    gamma_reweight(lab, P, GU, GP)
                    y = _K.categorical(GP, ug)
                else:
                    y = _K.race_argmin(lab, P, 0)
                skp[gen] = sk
                pivots[gen] = prf_uniform(klab, y, 0)
            tokens[hlen] = y
            gen += 1
            k = 1
        elif tree:
            nn = 1
            parent[0] = -1
            ntok[0] = -1
            depth[0] = 0
            mult[0] = B
            labset[0] = False
            has_s[0] = False
            lev0 = 0
            lev1 = 1
            if skipmode:
                pcg_doubles(st, us[:3 * B * (ell + 1)])
            if fresh:
                for i in range(ell + 1):
                    ulabels[i] = pcg_next(st)
            nskset[0] = False
            for d in range(ell):
                counts[1] += 1
                counts[3] += lev1 - lev0
                slot = 0
                for node in range(lev0, lev1):
                    _write_path(parent, ntok, depth, node, tokens, hlen)
                    _draft_eval(dm, tokens[:hlen + d], SN[node if share else 0], LG, Q[0],
                                share)
                    has_s[node] = share
                    kk = mult[node]
                    sk = track_skip and _is_repeat(tokens, n0, hlen + d, window)
                    nskip[node] = sk
                    nskset[node] = True
                    if sk:  # kk i.i.d. drafts from q with the slots' uniforms
                        QS[node] = Q[0]
                        nslot[node] = slot
                        for j in range(kk):
                            buf[j] = _K.categorical(Q[0], us[(d * B + slot + j) * 3])
                            ncands[node, j] = buf[j]
                    else:
                        if fresh:
                            lab = ulabels[d]
                        elif not keyed:  # pfr_nowm: the unkeyed position clocks
                            lab = _K.trial_label(run_label, hlen + d)
                        else:
                            lab = _clock(window, kdw, person, pre, pst, tokens, n0, hlen,
                                         hlen + d, scr, mask, run_label)
                        nlab[node] = lab
                        labset[node] = True
                        _K.mpfr_topk(lab, Q[0], kk, buf)
                    slot += kk
                    nfirst[node] = nn
                    for i in range(kk):
                        c = _child(parent, ntok, nfirst[node], nn, node, buf[i])
                        if c >= 0:
                            mult[c] += 1
                        else:
                            parent[nn] = node
                            ntok[nn] = buf[i]
                            depth[nn] = d + 1
                            mult[nn] = 1
                            labset[nn] = False
                            nskset[nn] = False
                            has_s[nn] = False
                            nfirst[nn] = nn
                            nn += 1
                lev0 = lev1
                lev1 = nn
            counts[0] += 1
            counts[2] += nn
            if store_drafts:
                # leaves with multiplicity, sorted lexicographically
                nl = lev1 - lev0
                for i in range(nl):
                    node = lev0 + i
                    u = node
                    while u > 0:
                        leaf_rows[i, depth[u] - 1] = ntok[u]
                        u = parent[u]
                    order[i] = i
                for i in range(1, nl):
                    j = i
                    while j > 0 and _less_row(leaf_rows[order[j]], leaf_rows[order[j - 1]],
                                              ell):
                        order[j], order[j - 1] = order[j - 1], order[j]
                        j -= 1
                r = 0
                for i in range(nl):
                    for _ in range(mult[lev0 + order[i]]):
                        for s in range(ell):
                            drafts[nblk, r, s] = leaf_rows[order[i], s]
                        r += 1
            node = 0
            done = False
            for s in range(ell):
                cur = hlen + s
                _target_eval(tm, tokens[:cur], SN[node if has_s[node] else 0], LG, P,
                             has_s[node])
                sk = nskip[node]
                if sk:  # vanilla speculative sampling / recursive rejection, unkeyed coins
                    j = nslot[node]
                    if mult[node] == 1:
                        x = ntok[nfirst[node]]
                        ok = us[(s * B + j) * 3 + 1] * QS[node, x] <= P[x]
                        y = x if ok else _K.residual_sample(P, QS[node],
                                                            us[(s * B + j) * 3 + 2])
                    else:
                        kk = mult[node]
                        for i in range(kk):
                            u_acc[i] = us[(s * B + j + i) * 3 + 1]
                        y, ok = _K.specinfer_verify(P, QS[node], ncands[node, :kk],
                                                    u_acc[:kk], us[(s * B + j) * 3 + 2])
                    lab = _label(window, kdw, person, pre, pst, tokens, hlen, cur, scr)
                else:
                    lab = nlab[node]
                    y = _K.race_argmin(lab, P, 0)
                    if mask:  # the pivot is the keyed one (what the detector recomputes)
                        lab = _label(window, kdw, person, pre, pst, tokens, hlen, cur, scr)
                pivots[gen] = prf_uniform(lab, y, 0) if keyed else np.nan
                skp[gen] = sk
                tokens[cur] = y
                gen += 1
                k += 1
                c = _child(parent, ntok, nfirst[node], nn, node, y)
                if not sk:
                    ok = c >= 0
                nu[ndec] = mult[node]
                dec_ok[ndec] = ok
                dskp[ndec] = sk
                dec_pos[ndec] = gen - 1
                ndec += 1
                if not ok:
                    done = True
                    break
                node = c
            if not done and gen < N:
                cur = hlen + ell
                model_probs(tm, tokens[:cur], P)
                if not nskset[node]:
                    nskip[node] = track_skip and _is_repeat(tokens, n0, cur, window)
                    nskset[node] = True
                sk = nskip[node]
                if sk:
                    y = _K.categorical(P, us[(ell * B) * 3 + 2])
                    lab = _label(window, kdw, person, pre, pst, tokens, hlen, cur, scr)
                else:
                    if not labset[node]:
                        if fresh:
                            nlab[node] = ulabels[ell]
                        elif not keyed:
                            nlab[node] = _K.trial_label(run_label, cur)
                        else:
                            nlab[node] = _clock(window, kdw, person, pre, pst, tokens, n0,
                                                hlen, cur, scr, mask, run_label)
                        labset[node] = True
                    lab = nlab[node]
                    y = _K.race_argmin(lab, P, 0)
                    if mask:
                        lab = _label(window, kdw, person, pre, pst, tokens, hlen, cur, scr)
                skp[gen] = sk
                pivots[gen] = prf_uniform(lab, y, 0) if keyed else np.nan
                tokens[cur] = y
                gen += 1
                k += 1
        elif single:
            pcg_doubles(st, us[:3 * (ell + 1)])
            for s in range(ell):
                cur = hlen + s
                counts[1] += 1
                counts[3] += 1
                _draft_eval(dm, tokens[:cur], SN[s if share else 0], LG, Q[s], share)
                sks[s] = track_skip and _is_repeat(tokens, n0, cur, window)
                if not keyed or sks[s]:
                    x = _K.categorical(Q[s], us[3 * s])
                else:
                    labs[s] = _clock(window, kdw, person, pre, pst, tokens, n0, hlen, cur, scr,
                                     mask, run_label)
                    if gamma:
                        gamma_reweight(labs[s], Q[s], GU, GQ)
                        x = _K.categorical(GQ, us[3 * s])
                    else:
                        x = _K.race_argmin(labs[s], Q[s], 0)
                tokens[cur] = x
                paths[0, s] = x
            if store_drafts:
                for s in range(ell):
                    drafts[nblk, 0, s] = paths[0, s]
            counts[0] += 1
            counts[2] += ell + 1
            done = False
            for s in range(ell):
                cur = hlen + s
                _target_eval(tm, tokens[:cur], SN[s if share else 0], LG, P, share)
                x = paths[0, s]
                pv = P
                qv = Q[s]
                sk = sks[s]
                if reweighted and not sk:  # mws, gamma: between the reweighted laws
                    gamma_reweight(labs[s], P, GU, GP)
                    gamma_reweight(labs[s], Q[s], GU, GQ)
                    pv = GP
                    qv = GQ
                if vstep >= 0:  # a lossy rule's verification step (_compiled_lossy)
                    if vstep == RULE_TRUNCATION and _CL._no_target_mass(
                            P, qv, alw, ipar[_CL.I_REDRAW] != 0):
                        return gen, nblk, ndec, _CL.ERR_NO_MASS
                    gate = 0.0
                    if vstep == RULE_FUZZY:
                        dv = _CL.fuzzy_divergence(P, qv, ipar[_CL.I_DIVERGENCE], W, T)
                        gate = 1.0 if dv <= fpar[_CL.F_THRESHOLD] else 0.0
                    elif vstep == RULE_CONTRASTIVE:
                        _CL.contrastive_law(P, qv, fpar[_CL.F_BETA], fpar[_CL.F_ALPHA], NU)
                    k += 1
                    if us[3 * s + 1] < _CL.accept_prob(vstep, P, qv, NU, x, fpar, jud, alw,
                                                       gate):
                        y = x
                        ok = True
                    else:
                        y = _CL.correction(vstep, P, qv, NU, fpar, ipar, jud, alw,
                                           us[3 * s + 2], st, W)
                        ok = False
                else:  # speculative sampling's step (the lossless rule), the decoders' flags
                    alab = np.uint64(0)
                    if kcoin and not sk:
                        alab = _label(window, adw, person, apre, apst, tokens, hlen, cur, scr)
                        coin = prf_uniform(alab, 0, 0)
                    else:
                        coin = us[3 * s + 1]
                    k += 1
                    if coin * qv[x] <= pv[x]:
                        y = x
                        ok = True
                    elif kres and not sk:  # the second key's race on (p - q)_+ (p if empty)
                        pos = False
                        for v in range(n):
                            d_ = P[v] - Q[s, v]
                            LG[v] = d_ if d_ > 0.0 else 0.0
                            if LG[v] > 0.0:
                                pos = True
                        y = _K.race_argmin(alab, LG if pos else P, 1)
                        ok = False
                    else:
                        y = _K.residual_sample(pv, qv, us[3 * s + 2])
                        ok = False
                if keyed:
                    klab = labs[s]
                    if mask or sk:
                        klab = _label(window, kdw, person, pre, pst, tokens, hlen, cur, scr)
                    pivots[gen] = prf_uniform(klab, y, 0)
                else:
                    pivots[gen] = np.nan
                skp[gen] = sk
                dskp[ndec] = sk
                tokens[cur] = y
                gen += 1
                nu[ndec] = 1
                dec_ok[ndec] = ok
                dec_pos[ndec] = gen - 1
                ndec += 1
                if not ok:
                    done = True
                    break
            if not done and gen < N:
                cur = hlen + ell
                model_probs(tm, tokens[:cur], P)
                sk = track_skip and _is_repeat(tokens, n0, cur, window)
                if not keyed:
                    y = _K.categorical(P, us[3 * ell + 2])
                    pivots[gen] = np.nan
                elif sk:
                    y = _K.categorical(P, us[3 * ell + 2])
                    pivots[gen] = prf_uniform(_label(window, kdw, person, pre, pst, tokens,
                                                     hlen, cur, scr), y, 0)
                else:
                    lab = _clock(window, kdw, person, pre, pst, tokens, n0, hlen, cur, scr,
                                 mask, run_label)
                    if gamma:
                        gamma_reweight(lab, P, GU, GP)
                        y = _K.categorical(GP, us[3 * ell + 2])
                    else:
                        y = _K.race_argmin(lab, P, 0)
                    if mask:
                        lab = _label(window, kdw, person, pre, pst, tokens, hlen, cur, scr)
                    pivots[gen] = prf_uniform(lab, y, 0)
                skp[gen] = sk
                tokens[cur] = y
                gen += 1
                k += 1
        elif kind == BLOCK_GLS or kind == BLOCK_SPECINFER:  # B draft paths in a trie
            gls = kind == BLOCK_GLS
            if gls:
                for s in range(ell + 1):
                    ulabels[s] = pcg_next(st)
            else:
                pcg_doubles(st, us[:3 * B * (ell + 1)])
            nn = 1
            parent[0] = -1
            ntok[0] = -1
            depth[0] = 0
            nfirst[0] = 0
            for b in range(B):
                dnode[b, 0] = 0
            for s in range(ell):
                # distinct nodes of depth s in first-seen order: one batched draft pass
                nseen = 0
                for b in range(B):
                    u = dnode[b, s]
                    new = True
                    for i in range(nseen):
                        if seen[i] == u:
                            new = False
                            break
                    if new:
                        seen[nseen] = u
                        nseen += 1
                counts[1] += 1
                counts[3] += nseen
                for i in range(nseen):
                    u = seen[i]
                    _write_path(parent, ntok, depth, u, tokens, hlen)
                    row = QN[u] if not gls else Q[0]
                    _draft_eval(dm, tokens[:hlen + s], SN[u if share else 0], LG, row, share)
                    for b in range(B):
                        if dnode[b, s] == u:
                            if gls:
                                paths[b, s] = _K.race_argmin(ulabels[s], row, b)
                            else:
                                paths[b, s] = _K.categorical(row, us[(s * B + b) * 3])
                lev0 = nn
                for b in range(B):
                    u = dnode[b, s]
                    c = _child(parent, ntok, lev0, nn, u, paths[b, s])
                    if c < 0:
                        c = nn
                        parent[nn] = u
                        ntok[nn] = paths[b, s]
                        depth[nn] = s + 1
                        nn += 1
                    dnode[b, s + 1] = c
            if store_drafts:
                for b in range(B):
                    for s in range(ell):
                        drafts[nblk, b, s] = paths[b, s]
            counts[0] += 1
            counts[2] += nn
            na = B
            for b in range(B):
                active[b] = b
            done = False
            for s in range(ell):
                cur = hlen + s
                u = dnode[active[0], s]
                _target_eval(tm, tokens[:cur], SN[u if share else 0], LG, P, share)
                if gls:
                    y = _K.gls_argmin(ulabels[s], P, active[:na])
                    ok = False
                else:
                    for i in range(na):
                        cands[i] = paths[active[i], s]
                        u_acc[i] = us[(s * B + active[i]) * 3 + 1]
                    y, ok = _K.specinfer_verify(P, QN[dnode[active[0], s]], cands[:na],
                                                u_acc[:na], us[(s * B) * 3 + 2])
                pivots[gen] = np.nan
                tokens[cur] = y
                gen += 1
                k += 1
                nu_s = na
                m = 0
                for i in range(na):
                    if paths[active[i], s] == y:
                        active[m] = active[i]
                        m += 1
                if gls:
                    ok = m > 0
                nu[ndec] = nu_s
                dec_ok[ndec] = ok
                dec_pos[ndec] = gen - 1
                ndec += 1
                if not ok:
                    done = True
                    break
                na = m
            if not done and gen < N:
                cur = hlen + ell
                model_probs(tm, tokens[:cur], P)
                if gls:
                    y = _K.gls_argmin(ulabels[ell], P, active[:na])
                else:
                    y = _K.categorical(P, us[(ell * B) * 3 + 2])
                pivots[gen] = np.nan
                tokens[cur] = y
                gen += 1
                k += 1
        elif kind == BLOCK_BLOCKVER:  # block verification (_compiled_blockver)
            k, gen, ndec = _BV.blockver_block(
                tm, dm, tokens, hlen, ell, N - gen, st, counts, store_drafts,
                drafts[nblk if store_drafts else 0], pivots, nu, dec_ok, dec_pos, gen, ndec,
                share)
        else:  # no fall-through to another decoder's block
            raise ValueError("decoder: unknown block kind in the compiled loop")
        emitted[nblk] = k
        a = 0
        for i in range(dec0, ndec):
            if dec_ok[i]:
                a += 1
        accepted[nblk] = a
        block_ell[nblk] = ell
        if keyed and window < 0:
            _prefix_extend(pre, pst, tokens, hlen, n0 + gen)
        if kcoin and window < 0:
            _prefix_extend(apre, apst, tokens, hlen, n0 + gen)
        nblk += 1
    return gen, nblk, ndec, 0


@njit(**JIT_PAR)
def decode_batch(dspec, tm, dm, tokens, n0s, N, L, B, max_blocks, states, window, kdw, adw,
                 person, emitted, accepted, nu, dec_ok, dec_pos, pivots, drafts, block_ell,
                 counts, store_drafts, share, sizes, opts, skp, dskp, vstep, fpar, ipar, jud,
                 alw):
    """:func:`decode_one` for every row of ``tokens`` (prompt ``i`` in ``tokens[i, :n0s[i]]``)
    under ``prange``; ``sizes[i] = (generated, blocks, decisions)``.  Each prompt has its own
    PCG64 state ``states[i]`` and writes only row ``i`` of the outputs."""
    for i in prange(tokens.shape[0]):
        g, nb, nd, err = decode_one(dspec, tm, dm, tokens[i], n0s[i], N, L, B, max_blocks,
                                    states[i], window, kdw, adw, person, emitted[i],
                                    accepted[i], nu[i], dec_ok[i], dec_pos[i], pivots[i],
                                    drafts[i], block_ell[i], counts[i], store_drafts, share,
                                    opts, skp[i], dskp[i], vstep, fpar, ipar, jud, alw)
        sizes[i, 0] = g
        sizes[i, 1] = nb
        sizes[i, 2] = nd
        sizes[i, 3] = err


@njit(**JIT)
def decode_serial(dspec, tm, dm, tokens, n0s, N, L, B, max_blocks, states, window, kdw, adw,
                 person, emitted, accepted, nu, dec_ok, dec_pos, pivots, drafts, block_ell,
                 counts, store_drafts, share, sizes, opts, skp, dskp, vstep, fpar, ipar, jud,
                 alw):
    """:func:`decode_batch` on one thread, without starting Numba's thread pool (the
    one-prompt path of ``speculative_decode``: a process that forks later stays fork-safe
    under the OpenMP threading layer)."""
    for i in range(tokens.shape[0]):
        g, nb, nd, err = decode_one(dspec, tm, dm, tokens[i], n0s[i], N, L, B, max_blocks,
                                    states[i], window, kdw, adw, person, emitted[i],
                                    accepted[i], nu[i], dec_ok[i], dec_pos[i], pivots[i],
                                    drafts[i], block_ell[i], counts[i], store_drafts, share,
                                    opts, skp[i], dskp[i], vstep, fpar, ipar, jud, alw)
        sizes[i, 0] = g
        sizes[i, 1] = nb
        sizes[i, 2] = nd
        sizes[i, 3] = err


# ------------------------------------------------------------------ Python side

#: largest number of float64 entries of the per-prompt work arrays of the compiled path
#: (beyond it the reference loop runs)
MAX_WORK = 20_000_000


#: the ``(vstep, fpar, ipar, jud, alw)`` arguments of :func:`decode_one` for the decoders
#: (speculative sampling's own verification step; no lossy rule)
NO_RULE = (-1, np.zeros(5), np.zeros(2, np.int64), np.zeros(1), np.zeros(1, np.bool_))


def compiled_spec(spec: DecoderSpec, reweight="delta") -> np.ndarray:
    """The decoder's spec as the kernel reads it: ``dspec = (code, block kind, keyed,
    acceptance)`` (``DS_*`` positions), the block kind the one of a run with ``reweight``.

    Raises ``ValueError`` naming the decoder when its block kind has no compiled block (the
    kernel's own check is the second line of defence)."""
    kind = spec.block_for(reweight)
    if kind not in BLOCK_KINDS:
        raise ValueError(f"decoder: {spec.name!r} has block kind {kind!r}, which has no "
                         f"compiled block; known kinds: {sorted(BLOCK_KINDS)}")
    return np.array([spec.code, BLOCK_KINDS.index(kind), spec.keyed,
                     ACCEPTANCES.index(spec.acceptance)], np.int64)


def plan(target, draft, decoder, key, L, B, N, store_drafts=True, unwrap_cached=False,
         opts=None, reweight="delta"):
    """The compiled arguments of a run, or None when the compiled path does not cover it
    (``opts``: the :func:`option_flags` of the run, for the size of its work arrays; ``key``:
    the key or, hashed once by the caller, its :func:`~specbound.sim.prf.key_digest`).

    Returns ``(spec, dspec, tm, dm, kdw, adw, share)``.  Raises ``ValueError`` for a decoder
    without a spec or whose block kind has no compiled block.
    """
    from specbound.sim.prf import key_digest

    spec = decoder_spec(decoder)
    dspec = compiled_spec(spec, reweight)
    tm = model_spec(target, unwrap_cached)
    dm = model_spec(draft, unwrap_cached) if draft is not None else tm
    if tm is None or dm is None:
        return None
    n = int(target.vocab_size)
    work = n * (L if spec.block == "single" else 1)
    if spec.block == "blockver":  # the block's draft and target rows
        work = n * (2 * L + 1)
    if spec.block == "specinfer":
        work += n * (1 + B * L)
    if opts is not None:
        if opts[OPT_SKIP] and spec.keyed and spec.block == "tree":
            work += n * (1 + B * L)  # the draft distributions of skipped contexts
        if opts[OPT_GAMMA]:
            work += n * (L + 3)
    if store_drafts:
        work = max(work, N * B * L)
    if work > MAX_WORK:
        return None
    # the shared back-off sums of one block's contexts (skipped when too large)
    share = (spec.drafts and shares_fields(tm, dm) and n * (1 + B * L) <= MAX_WORK)
    kdw = np.zeros(4, np.uint64)
    adw = np.zeros(4, np.uint64)
    if key is not None and spec.keyed:
        digest = key_digest(key)  # the caller's digest is returned as is (no re-hash)
        kdw = _b2.digest_words(digest)
        if spec.acceptance == "keyed_coin":
            adw = _b2.digest_words(key_digest(b"mse_pseudo-acceptance:" + digest))
    return spec, dspec, tm, dm, kdw, adw, share


def outputs(n_prompts, N, L, B, store_drafts):
    """Zeroed output arrays of :func:`decode_batch` for ``n_prompts`` prompts."""
    cap = max(N, 1)
    return dict(
        emitted=np.zeros((n_prompts, cap), np.int64),
        accepted=np.zeros((n_prompts, cap), np.int64),
        nu=np.zeros((n_prompts, cap), np.int64),
        dec_ok=np.zeros((n_prompts, cap), np.bool_),
        dec_pos=np.zeros((n_prompts, cap), np.int64),
        pivots=np.full((n_prompts, cap), np.nan),
        drafts=np.zeros((n_prompts, cap if store_drafts else 1, B, L), np.int64),
        block_ell=np.zeros((n_prompts, cap), np.int64),
        counts=np.zeros((n_prompts, 4), np.int64),
        skipped=np.zeros((n_prompts, cap), np.bool_),
        decision_skipped=np.zeros((n_prompts, cap), np.bool_),
    )


def option_flags(repeats="reuse", reweight="delta", unkeyed="position", residual="plain"):
    """The ``opts`` array of :func:`decode_one` (every option of the reference loop)."""
    opts = np.zeros(5, np.int64)
    opts[OPT_MASK] = repeats == "mask"
    opts[OPT_SKIP] = repeats == "skip"
    opts[OPT_GAMMA] = reweight == "gamma"
    opts[OPT_FRESH] = unkeyed == "fresh"
    opts[OPT_KEYED_RESIDUAL] = residual == "keyed"
    return opts


def decode_single(target, draft, prompt, decoder, L, B, key, N, rng, window, max_blocks,
                  repeats="reuse", reweight="delta", unkeyed="position", residual="plain"):
    """The compiled :func:`specbound.sim.decode.speculative_decode` of one validated run.

    Returns the :class:`~specbound.sim.decode.DecodeResult` of the reference loop bit for
    bit, or None when the compiled path does not cover the run (then nothing was drawn
    from ``rng``).  ``rng`` is advanced exactly as the reference loop advances it.
    """
    from specbound.sim.prf import key_id

    opts = option_flags(repeats, reweight, unkeyed, residual)
    st = pcg_state(rng)
    if st is None:
        return None
    p = plan(target, draft, decoder, key, L, B, N, opts=opts, reweight=reweight)
    if p is None:
        return None
    spec, dspec, tm, dm, kdw, adw, share = p
    prompt = np.asarray(prompt, dtype=np.int64)
    n0 = prompt.size
    tokens = np.zeros((1, n0 + N), np.int64)
    tokens[0, :n0] = prompt
    out = outputs(1, N, L, B, True)
    sizes = np.zeros((1, 4), np.int64)
    states = st[None, :].copy()
    decode_serial(dspec, tm, dm, tokens, np.array([n0], np.int64), N, L, B,
                 -1 if max_blocks is None else int(max_blocks), states,
                 -1 if window is None else int(window), kdw, adw, _b2.PERSON_WORDS,
                 out["emitted"], out["accepted"], out["nu"], out["dec_ok"], out["dec_pos"],
                 out["pivots"], out["drafts"], out["block_ell"], out["counts"], True, share,
                 sizes, opts, out["skipped"], out["decision_skipped"], *NO_RULE)
    set_pcg_state(rng, states[0])
    return build_result(spec, key_id(key) if spec.keyed else None, window, tokens[0], n0, out,
                        sizes[0], 0, L, B, True, (repeats, reweight, unkeyed, residual))


def build_result(spec, kid, window, tokens, n0, out, size, i, L, B, with_drafts,
                 options=("reuse", "delta", "position", "plain")):
    """The :class:`~specbound.sim.results.DecodeResult` of prompt ``i`` of a compiled batch
    of the decoder of ``spec`` (``options``: ``(repeats, reweight, unkeyed, residual)`` of
    the run)."""
    repeats, reweight, unkeyed, residual = options
    g, nb, nd = (int(x) for x in size[:3])
    ells = out["block_ell"][i, :nb]
    kind = spec.block_for(reweight)
    rows = 1 if kind == "single" else B
    if kind == "token" or not with_drafts:
        drafts = ()
    else:
        drafts = tuple(out["drafts"][i, b, :rows, :int(ells[b])].copy() for b in range(nb))
    c = out["counts"][i]
    return DecodeResult(
        tokens=tokens[:n0 + g].copy(),
        prompt_length=n0,
        emitted_per_block=out["emitted"][i, :nb].copy(),
        accepted_per_block=out["accepted"][i, :nb].copy(),
        nu=out["nu"][i, :nd].copy(),
        decision_accepted=out["dec_ok"][i, :nd].copy(),
        decision_position=out["dec_pos"][i, :nd].copy(),
        n_target_evals=int(c[0]),
        n_draft_evals=int(c[1]),
        n_target_contexts=int(c[2]),
        n_draft_contexts=int(c[3]),
        pivots=out["pivots"][i, :g].copy(),
        drafts=drafts,
        decoder=spec.name,
        L=L,
        B=B,
        watermark=WatermarkConfig(kid, window, repeats == "mask", repeats, reweight, residual),
        skipped=out["skipped"][i, :g].copy(),
        decision_skipped=out["decision_skipped"][i, :nd].copy(),
        unkeyed=unkeyed,
    )
