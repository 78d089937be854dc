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

from collections import namedtuple
from typing import NamedTuple

import numpy as np
from numba import prange

from specbound.sim import _blake2b as _b2
from specbound.sim import _compiled_blockver as _BV
from specbound.sim import _compiled_hsd as _HS
from specbound.sim import _compiled_lossy as _CL
from specbound.sim import _kernels as _K
from specbound.sim import _model_kernels as _mk
from specbound.sim import _records as _R
from specbound.sim._config import JIT, njit
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
    BLOCK_HSD,
    BLOCK_KINDS,
    BLOCK_SINGLE,
    BLOCK_SPECINFER,
    BLOCK_TOKEN,
    BLOCK_TREE,
    DECODER_SPECS,
    DecoderSpec,
    decoder_spec,
)
from specbound.sim.detect import acceptance_digest
from specbound.sim.lossy import RULE_CONTRASTIVE, RULE_FUZZY, RULE_TRUNCATION
from specbound.sim.prf import key_digest, key_id, prf_uniform
from specbound.sim.results import DecodeResult, WatermarkConfig

JIT_PAR = dict(JIT, parallel=True)

#: decoder names by compiled code (``DecoderSpec.code``), derived from the registry
CODE_NAMES = tuple(sorted(DECODER_SPECS, key=lambda name: DECODER_SPECS[name].code))
#: codes of the keyed decoders
_KEYED = tuple(s.code for s in DECODER_SPECS.values() if s.keyed)
#: positions in the decoder's compiled spec ``dspec`` (:func:`compiled_spec`)
DS_CODE, DS_KIND, DS_KEYED, DS_ACCEPTANCE = range(4)

#: the number of block kinds (``BLOCK_*`` are ``0 .. N_BLOCK_KINDS - 1``)
N_BLOCK_KINDS = len(BLOCK_KINDS)

MODEL_SYNTHETIC = 0
MODEL_MARKOV = 1

#: the compiled form of a model (:func:`model_spec`): its kind (``MODEL_*``), the integer,
#: unsigned and float parameters and base logits of a ``SyntheticLM``, the quantile table
#: (``SyntheticLM``) or transition matrix (``MarkovLM``), the initial law, the first-order rows
Model = namedtuple("Model", _R.MODEL_FIELDS)

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
        return Model(MODEL_SYNTHETIC, np.ascontiguousarray(model._ints),
                np.ascontiguousarray(model._uints), np.ascontiguousarray(model._floats),
                np.ascontiguousarray(model._base, dtype=np.float64),
                np.ascontiguousarray(model._table, dtype=np.float64).reshape(1, -1),
                np.zeros(1), model._rows())
    if type(model) is MarkovLM:
        return Model(MODEL_MARKOV, e_i, e_u, e_f, np.zeros(1),
                np.ascontiguousarray(model.transition_matrix, dtype=np.float64),
                np.ascontiguousarray(model.initial, dtype=np.float64), np.zeros((1, 1)))
    return None


@njit(**JIT)
def model_probs(m, ctx, out):
    """Next-token distribution of the compiled model ``m`` after ``ctx`` into ``out``
    (bit for bit the model's ``next_distribution``)."""
    if m.kind == MODEL_SYNTHETIC:
        synthetic_probs_rows(m.ints, m.uints, m.floats, m.base, m.matrix[0], m.rows, ctx, out)
    elif ctx.shape[0] == 0:
        out[:] = m.initial
    else:
        out[:] = m.matrix[ctx[ctx.shape[0] - 1]]


@njit(**JIT)
def model_partial(m, ctx, S):
    """The context-dependent back-off sum of a Gaussian (or ``"gaussian16"``) ``SyntheticLM``
    before its own noise field: ``S = base + w sum_{k=1}^{m} g^(k)`` (the first steps of
    :func:`specbound.sim._model_kernels.synthetic_logits`, the same operations in the same
    order).  A target and a draft with the same fields share it (:func:`shares_fields`)."""
    w = m.floats[0] / np.sqrt(m.ints[1] + 1.0)
    k0 = 1
    if m.rows.shape[0] == S.shape[0] and m.ints[1] >= 1 and ctx.shape[0] > 0:
        # the first-order rows (SyntheticLM._rows): base + w g^(1), the same numbers
        S[:] = m.rows[ctx[ctx.shape[0] - 1]]
        k0 = 2
    else:
        S[:] = m.base
    for k in range(k0, m.ints[1] + 1):
        add_field(m.ints[0], window_label(m.uints[0], k, ctx), w, m.matrix[0], S)


@njit(**JIT)
def model_finish(m, ctx, S, logits, out):
    """The distribution of a Gaussian ``SyntheticLM`` from its shared sum ``S``: its own
    noise field, temperature, top-k and softmax; bit for bit :func:`model_probs`."""
    logits[:] = S
    if m.floats[2] > 0.0:
        add_field(m.ints[0], window_label(m.uints[1], m.ints[2], ctx), m.floats[2], m.matrix[0],
                  logits)
    finalize_probs(logits, m.floats[3], m.ints[3], out)


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


# ------------------------------------------------------------------ records

#: the constants of one kernel call, shared by every prompt (:func:`run_record`): the
#: block kind (``BLOCK_*``), the decoder's flags and options resolved once (``keyed``;
#: ``kcoin`` mse_pseudo's second-key coin; ``reweighted`` the test between reweighted laws;
#: ``gamma``, ``mask``, ``fresh``, ``kres``, ``skipmode`` the options; ``track_skip`` repeats
#: looked for), the sizes, the keys as words, and the verification step of the single-draft
#: block (``vstep`` -1: speculative sampling's own step; else a lossy rule's code with its
#: constants ``fpar, ipar, jud, alw``, :mod:`specbound.sim._compiled_lossy`)
Run = namedtuple("Run", _R.RUN_FIELDS)

#: the output arrays (:func:`outputs`: one row per prompt; :func:`decode_row`: a prompt's
#: row): per block ``emitted``, ``accepted``, ``block_ell``, ``drafts[block, :, :ell]``; per
#: decision ``nu``, ``dec_ok``, ``dec_pos``, ``decision_skipped``; per generated token
#: ``pivots``, ``skipped``; ``counts = (target evals, draft evals, target contexts, draft
#: contexts)``
Out = namedtuple("Out", _R.OUT_FIELDS)


#: the work arrays of one prompt (:func:`_work`): distributions (``P`` target, ``Q`` drafts,
#: ``QN`` per trie node, ``QS`` of skipped contexts, ``SN`` shared back-off sums, ``LG``
#: logits, ``GU/GP/GQ`` gamma reweighting, ``W/T/NU`` lossy rules), the trie of a block
#: (``parent, ntok, depth, mult, nfirst, nlab, labset, nskip, nskset, nslot, ncands,
#: has_s``), the drafts (``paths, dnode, buf, seen, active, cands, u_acc, leaf_rows,
#: order, sks, labs``), the block's uniforms (``us, ulabels``) and the label state
#: (``scr``; ``pre/pst`` the key's prefix hash, ``apre/apst`` the second key's), as a
#: :class:`~specbound.sim._records.WorkRef` (fields ``_records.WORK_FIELDS``)
@njit(**JIT)
def _work(R, n):
    """The zeroed / empty work arrays of one prompt (sizes from the run ``R``)."""
    B = R.B
    L = R.L
    maxn = 1 + B * L
    # sizes first (no control flow inside the record's construction)
    nq = L if R.kind == BLOCK_SINGLE else 1
    nqn = maxn if R.kind == BLOCK_SPECINFER else 1
    ns = maxn if R.skipmode and R.kind == BLOCK_TREE else 1
    nsn = maxn if R.share else 1
    g = n if R.gamma else 1
    lossy = n if R.vstep >= 0 else 1
    nnu = n if R.vstep == RULE_CONTRASTIVE else 1
    return _R.WorkRef(
        np.empty(n), np.empty(n), np.empty((nq, n)), np.empty((nqn, n)), np.empty((ns, n)),
        np.empty((nsn, n)), np.empty(g), np.empty(g), np.empty(g),
        np.empty(lossy), np.empty(lossy), np.empty(nnu),
        np.empty(maxn, np.int64), np.empty(maxn, np.int64), np.empty(maxn, np.int64),
        np.empty(maxn, np.int64), np.empty(maxn, np.int64), np.empty(maxn, np.uint64),
        np.zeros(maxn, np.bool_), np.zeros(maxn, np.bool_), np.zeros(maxn, np.bool_),
        np.zeros(maxn, np.int64), np.empty((ns, B), np.int64), np.zeros(maxn, np.bool_),
        np.empty((B, L), np.int64), np.empty((B, L + 1), np.int64), np.empty(B, np.int64),
        np.empty(B, np.int64), np.empty(B, np.int64), np.empty(B, np.int64), np.empty(B),
        np.empty((B, L), np.int64), np.empty(B, np.int64), np.zeros(L, np.bool_),
        np.empty(L, np.uint64), np.empty(3 * B * (L + 1)), np.empty(L + 1, np.uint64),
        np.empty(64, np.uint64), np.zeros(24, np.uint64), np.zeros(2, np.int64),
        np.zeros(24, np.uint64), np.zeros(2, np.int64))


@njit(**JIT)
def _key_label(R, w, pr, hlen, cur):
    """The keyed label of ``tokens[:cur]`` (block start ``hlen``)."""
    return _label(R.window, R.kdw, R.person, w.pre, w.pst, pr.tokens, hlen, cur, w.scr)


@njit(**JIT)
def _clock_label(R, w, pr, hlen, cur):
    """The clock label of ``tokens[:cur]`` for a keyed decoder: the unkeyed position label
    of a masked repeat (``repeats="mask"``), else the keyed label (:func:`_key_label`)."""
    if R.mask and _is_repeat(pr.tokens, pr.n0, cur, R.window):
        return _K.trial_label(pr.run_label, cur)
    return _key_label(R, w, pr, hlen, cur)


@njit(**JIT)
def _skipped(R, pr, cur):
    """Whether ``tokens[:cur]`` is a skipped repeat (``repeats="skip"`` with a window)."""
    return R.track_skip and _is_repeat(pr.tokens, pr.n0, cur, R.window)


@njit(**JIT)
def _emit(O, pr, gen, y, pivot, sk):
    """Emit token ``y`` as generated token ``gen`` with its pivot and skip flag; ``gen + 1``."""
    pr.tokens[pr.n0 + gen] = y
    O.pivots[gen] = pivot
    O.skipped[gen] = sk
    return gen + 1


@njit(**JIT)
def _decide(O, ndec, nu, ok, gen, sk):
    """Record decision ``ndec`` (``nu`` consistent drafts, accepted ``ok``) at the last
    emitted token (``gen`` tokens emitted); ``ndec + 1``."""
    O.nu[ndec] = nu
    O.dec_ok[ndec] = ok
    O.dec_pos[ndec] = gen - 1
    O.decision_skipped[ndec] = sk
    return ndec + 1


@njit(**JIT)
def _keyed_token(R, w, pr, probs, lab, sk, u, hlen, cur):
    """The keyed token at ``tokens[:cur]`` from ``probs`` and its pivot: the shared decision
    of a keyed decoder without a draft to verify (the token step, the bonus token, a tree
    context).  A skipped repeat draws ``categorical(probs, u)``; ``reweight="gamma"`` draws
    from the gamma-reweighted law with ``u``; otherwise the exponential race on the clocks
    of ``lab``.  The pivot is ``prf_uniform(label, y, 0)`` with the keyed label (what the
    detector recomputes)."""
    if sk:
        y = _K.categorical(probs, u)
    elif R.gamma:
        gamma_reweight(lab, probs, w.GU, w.GP)
        y = _K.categorical(w.GP, u)
    else:
        y = _K.race_argmin(lab, probs, 0)
    if R.mask or sk:
        lab = _key_label(R, w, pr, hlen, cur)
    return y, prf_uniform(lab, y, 0)


# ------------------------------------------------------------------ the token block


@njit(**JIT)
def block_token(R, tm, dm, w, O, pr, gen, ndec, nblk):
    """One target token (``ar``, ``basic_uwm``); returns ``(gen, ndec, emitted, error)``."""
    hlen = pr.n0 + gen
    O.counts[0] += 1
    O.counts[2] += 1
    model_probs(tm, pr.tokens[:hlen], w.P)
    if not R.keyed:
        y = _K.categorical(w.P, pcg_double(pr.state))
        gen = _emit(O, pr, gen, y, np.nan, False)
        return gen, ndec, 1, 0
    lab = _clock_label(R, w, pr, hlen, hlen)
    ug = 0.0
    if R.gamma or R.skipmode:  # one unkeyed uniform per token
        ug = pcg_double(pr.state)
    sk = _skipped(R, pr, hlen)
    y, piv = _keyed_token(R, w, pr, w.P, lab, sk, ug, hlen, hlen)
    gen = _emit(O, pr, gen, y, piv, sk)
    return gen, ndec, 1, 0


# ------------------------------------------------------------------ the tree block


@njit(**JIT)
def _tree_node(w, nn, node, tok, d):
    """Add a child of ``node`` with token ``tok`` at depth ``d`` (or count it once more);
    returns the number of nodes."""
    c = _child(w.parent, w.ntok, w.nfirst[node], nn, node, tok)
    if c >= 0:
        w.mult[c] += 1
        return nn
    w.parent[nn] = node
    w.ntok[nn] = tok
    w.depth[nn] = d
    w.mult[nn] = 1
    w.labset[nn] = False
    w.nskset[nn] = False
    w.has_s[nn] = False
    w.nfirst[nn] = nn
    return nn + 1


@njit(**JIT)
def _tree_draft(R, dm, w, O, pr, hlen, ell):
    """Grow the draft tree of one block level by level (Alg. 10): every node of depth ``d``
    with multiplicity ``k`` gets its ``k`` keyed MPFR drafts (or ``k`` i.i.d. drafts from
    ``q`` at a skipped repeat).  Returns ``(nodes, first leaf)``."""
    share = R.share
    nn = 1
    w.parent[0] = -1
    w.ntok[0] = -1
    w.depth[0] = 0
    w.mult[0] = R.B
    w.labset[0] = False
    w.has_s[0] = False
    w.nskset[0] = False
    lev0 = 0
    lev1 = 1
    if R.skipmode:
        pcg_doubles(pr.state, w.us[:3 * R.B * (ell + 1)])
    if R.fresh:
        for i in range(ell + 1):
            w.ulabels[i] = pcg_next(pr.state)
    for d in range(ell):
        O.counts[1] += 1
        O.counts[3] += lev1 - lev0
        slot = 0
        for node in range(lev0, lev1):
            _write_path(w.parent, w.ntok, w.depth, node, pr.tokens, hlen)
            _draft_eval(dm, pr.tokens[:hlen + d], w.SN[node if share else 0], w.LG, w.Q[0],
                        share)
            w.has_s[node] = share
            kk = w.mult[node]
            sk = _skipped(R, pr, hlen + d)
            w.nskip[node] = sk
            w.nskset[node] = True
            if sk:  # kk i.i.d. drafts from q with the slots' uniforms
                w.QS[node] = w.Q[0]
                w.nslot[node] = slot
                for j in range(kk):
                    w.buf[j] = _K.categorical(w.Q[0], w.us[(d * R.B + slot + j) * 3])
                    w.ncands[node, j] = w.buf[j]
            else:
                w.nlab[node] = _tree_label(R, w, pr, hlen, hlen + d, d)
                w.labset[node] = True
                _K.mpfr_topk(w.nlab[node], w.Q[0], kk, w.buf)
            slot += kk
            w.nfirst[node] = nn
            for i in range(kk):
                nn = _tree_node(w, nn, node, w.buf[i], d + 1)
        lev0 = lev1
        lev1 = nn
    return nn, lev0


@njit(**JIT)
def _tree_label(R, w, pr, hlen, cur, d):
    """The clock label of a tree context at depth ``d``: ``pfr_nowm``'s fresh or position
    labels, else the keyed clock label."""
    if R.fresh:
        return w.ulabels[d]
    if not R.keyed:  # pfr_nowm: the unkeyed position clocks
        return _K.trial_label(pr.run_label, cur)
    return _clock_label(R, w, pr, hlen, cur)


@njit(**JIT)
def _tree_store(w, O, nblk, lev0, nn, ell):
    """The block's drafts: the leaves with multiplicity, sorted lexicographically."""
    nl = nn - lev0
    for i in range(nl):
        u = lev0 + i
        while u > 0:
            w.leaf_rows[i, w.depth[u] - 1] = w.ntok[u]
            u = w.parent[u]
        w.order[i] = i
    order = w.order
    for i in range(1, nl):
        j = i
        while j > 0 and _less_row(w.leaf_rows[order[j]], w.leaf_rows[order[j - 1]], ell):
            order[j], order[j - 1] = order[j - 1], order[j]
            j -= 1
    r = 0
    for i in range(nl):
        for _ in range(w.mult[lev0 + order[i]]):
            for s in range(ell):
                O.drafts[nblk, r, s] = w.leaf_rows[order[i], s]
            r += 1


@njit(**JIT)
def _tree_skipped_step(R, w, node, s):
    """A skipped repeat's decision in the tree: vanilla speculative sampling (multiplicity
    1) or SpecInfer's recursive rejection over the node's i.i.d. drafts, unkeyed coins."""
    j = w.nslot[node]
    us = w.us
    if w.mult[node] == 1:
        x = w.ntok[w.nfirst[node]]
        ok = us[(s * R.B + j) * 3 + 1] * w.QS[node, x] <= w.P[x]
        y = x if ok else _K.residual_sample(w.P, w.QS[node], us[(s * R.B + j) * 3 + 2])
        return y, ok
    kk = w.mult[node]
    for i in range(kk):
        w.u_acc[i] = us[(s * R.B + j + i) * 3 + 1]
    return _K.specinfer_verify(w.P, w.QS[node], w.ncands[node, :kk], w.u_acc[:kk],
                               us[(s * R.B + j) * 3 + 2])


@njit(**JIT)
def block_tree(R, tm, dm, w, O, pr, gen, ndec, nblk):
    """The PFR / MPFR draft tree (Alg. 3, 4, 9, 10): draft, verify along the emitted path,
    the bonus token when every position passed; returns ``(gen, ndec, emitted, error)``."""
    hlen = pr.n0 + gen
    ell = R.L if R.L < R.N - gen else R.N - gen
    nn, lev0 = _tree_draft(R, dm, w, O, pr, hlen, ell)
    O.counts[0] += 1
    O.counts[2] += nn
    if R.store_drafts:
        _tree_store(w, O, nblk, lev0, nn, ell)
    node = 0
    k = 0
    for s in range(ell):
        cur = hlen + s
        _target_eval(tm, pr.tokens[:cur], w.SN[node if w.has_s[node] else 0], w.LG, w.P,
                     w.has_s[node])
        sk = w.nskip[node]
        if sk:
            y, ok = _tree_skipped_step(R, w, node, s)
            piv = prf_uniform(_key_label(R, w, pr, hlen, cur), y, 0) if R.keyed else np.nan
        elif R.keyed:
            y, piv = _keyed_token(R, w, pr, w.P, w.nlab[node], False, 0.0, hlen, cur)
        else:
            y = _K.race_argmin(w.nlab[node], w.P, 0)
            piv = np.nan
        gen = _emit(O, pr, gen, y, piv, sk)
        k += 1
        c = _child(w.parent, w.ntok, w.nfirst[node], nn, node, y)
        if not sk:
            ok = c >= 0
        ndec = _decide(O, ndec, w.mult[node], ok, gen, sk)
        if not ok:
            return gen, ndec, k, 0
        node = c
    if gen < R.N:  # the bonus token
        cur = hlen + ell
        model_probs(tm, pr.tokens[:cur], w.P)
        if not w.nskset[node]:
            w.nskip[node] = _skipped(R, pr, cur)
            w.nskset[node] = True
        sk = w.nskip[node]
        if not sk and not w.labset[node]:
            w.nlab[node] = _tree_label(R, w, pr, hlen, cur, ell)
            w.labset[node] = True
        if R.keyed:
            y, piv = _keyed_token(R, w, pr, w.P, w.nlab[node], sk, w.us[(ell * R.B) * 3 + 2],
                                  hlen, cur)
        elif sk:
            y = _K.categorical(w.P, w.us[(ell * R.B) * 3 + 2])
            piv = np.nan
        else:
            y = _K.race_argmin(w.nlab[node], w.P, 0)
            piv = np.nan
        gen = _emit(O, pr, gen, y, piv, sk)
        k += 1
    return gen, ndec, k, 0


# ------------------------------------------------------------------ the single-draft block


@njit(**JIT)
def _keyed_draw(R, w, probs, lab, sk, u):
    """The decision of a keyed token from ``probs``: ``categorical(probs, u)`` at a skipped
    repeat, from the gamma-reweighted law with ``u`` under ``reweight="gamma"``, else the
    exponential race on the clocks of ``lab``."""
    if sk:
        return _K.categorical(probs, u)
    if R.gamma:
        gamma_reweight(lab, probs, w.GU, w.GP)
        return _K.categorical(w.GP, u)
    return _K.race_argmin(lab, probs, 0)


@njit(**JIT)
def _single_draft(R, dm, w, O, pr, hlen, ell, nblk):
    """The ``ell`` drafts of a single-draft block (Alg. 1): from ``q`` with the block's
    uniforms (unkeyed decoders, skipped repeats), else the keyed decision on ``q``."""
    for s in range(ell):
        cur = hlen + s
        O.counts[1] += 1
        O.counts[3] += 1
        _draft_eval(dm, pr.tokens[:cur], w.SN[s if R.share else 0], w.LG, w.Q[s], R.share)
        w.sks[s] = _skipped(R, pr, cur)
        if not R.keyed or w.sks[s]:
            x = _K.categorical(w.Q[s], w.us[3 * s])
        else:
            w.labs[s] = _clock_label(R, w, pr, hlen, cur)
            x = _keyed_draw(R, w, w.Q[s], w.labs[s], False, w.us[3 * s])
        pr.tokens[cur] = x
        w.paths[0, s] = x
    if R.store_drafts:
        for s in range(ell):
            O.drafts[nblk, 0, s] = w.paths[0, s]
    O.counts[0] += 1
    O.counts[2] += ell + 1


@njit(**JIT)
def _verify_sd(R, w, pr, pv, qv, x, s, sk, hlen):
    """Speculative sampling's verification step at draft position ``s`` (the decoders and
    the ``lossless`` rule): accept ``x`` when ``coin q(x) <= p(x)`` (the block's unkeyed
    coin, or mse_pseudo's second-key coin), else the residual ``(p - q)_+`` (with
    ``residual="keyed"`` the second key's race on it).  Returns ``(y, accepted)``."""
    cur = hlen + s
    alab = np.uint64(0)
    if R.kcoin and not sk:
        alab = _label(R.window, R.adw, R.person, w.apre, w.apst, pr.tokens, hlen, cur, w.scr)
        coin = prf_uniform(alab, 0, 0)
    else:
        coin = w.us[3 * s + 1]
    if coin * qv[x] <= pv[x]:
        return x, True
    if R.kres and not sk:  # the second key's race on (p - q)_+ (p if empty)
        pos = False
        for v in range(w.P.shape[0]):
            d_ = w.P[v] - w.Q[s, v]
            w.LG[v] = d_ if d_ > 0.0 else 0.0
            if w.LG[v] > 0.0:
                pos = True
        return _K.race_argmin(alab, w.LG if pos else w.P, 1), False
    return _K.residual_sample(pv, qv, w.us[3 * s + 2]), False


@njit(**JIT)
def _verify_rule(R, w, pr, qv, x, s):
    """A lossy rule's verification step (:mod:`specbound.sim._compiled_lossy`) at draft
    position ``s``; returns ``(y, accepted, error)``."""
    P = w.P
    vstep = R.vstep
    if vstep == RULE_TRUNCATION and _CL._no_target_mass(P, qv, R.alw,
                                                        R.ipar[_CL.I_REDRAW] != 0):
        return x, False, _CL.ERR_NO_MASS
    gate = 0.0
    if vstep == RULE_FUZZY:
        dv = _CL.fuzzy_divergence(P, qv, R.ipar[_CL.I_DIVERGENCE], w.W, w.T)
        gate = 1.0 if dv <= R.fpar[_CL.F_THRESHOLD] else 0.0
    elif vstep == RULE_CONTRASTIVE:
        _CL.contrastive_law(P, qv, R.fpar[_CL.F_BETA], R.fpar[_CL.F_ALPHA], w.NU)
    if w.us[3 * s + 1] < _CL.accept_prob(vstep, P, qv, w.NU, x, R.fpar, R.jud, R.alw, gate):
        return x, True, 0
    y = _CL.correction(vstep, P, qv, w.NU, R.fpar, R.ipar, R.jud, R.alw, w.us[3 * s + 2],
                       pr.state, w.W)
    return y, False, 0


@njit(**JIT)
def block_single(R, tm, dm, w, O, pr, gen, ndec, nblk):
    """One draft sequence verified position by position (Alg. 1; ``vsps``, ``mse``,
    ``mse_pseudo``, ``mws`` under gamma, the lossy rules); returns ``(gen, ndec, emitted,
    error)``."""
    hlen = pr.n0 + gen
    ell = R.L if R.L < R.N - gen else R.N - gen
    pcg_doubles(pr.state, w.us[:3 * (ell + 1)])
    _single_draft(R, dm, w, O, pr, hlen, ell, nblk)
    k = 0
    for s in range(ell):
        cur = hlen + s
        _target_eval(tm, pr.tokens[:cur], w.SN[s if R.share else 0], w.LG, w.P, R.share)
        x = w.paths[0, s]
        pv = w.P
        qv = w.Q[s]
        sk = w.sks[s]
        if R.reweighted and not sk:  # mws, gamma: between the reweighted laws
            gamma_reweight(w.labs[s], w.P, w.GU, w.GP)
            gamma_reweight(w.labs[s], w.Q[s], w.GU, w.GQ)
            pv = w.GP
            qv = w.GQ
        if R.vstep >= 0:
            y, ok, err = _verify_rule(R, w, pr, qv, x, s)
            if err != 0:
                return gen, ndec, k, err
        else:
            y, ok = _verify_sd(R, w, pr, pv, qv, x, s, sk, hlen)
        k += 1
        piv = np.nan
        if R.keyed:
            klab = w.labs[s]
            if R.mask or sk:
                klab = _key_label(R, w, pr, hlen, cur)
            piv = prf_uniform(klab, y, 0)
        gen = _emit(O, pr, gen, y, piv, sk)
        ndec = _decide(O, ndec, 1, ok, gen, sk)
        if not ok:
            return gen, ndec, k, 0
    if gen < R.N:  # the bonus token
        cur = hlen + ell
        model_probs(tm, pr.tokens[:cur], w.P)
        sk = _skipped(R, pr, cur)
        u = w.us[3 * ell + 2]
        if not R.keyed:
            y = _K.categorical(w.P, u)
            piv = np.nan
        else:
            lab = _clock_label(R, w, pr, hlen, cur) if not sk else np.uint64(0)
            y, piv = _keyed_token(R, w, pr, w.P, lab, sk, u, hlen, cur)
        gen = _emit(O, pr, gen, y, piv, sk)
        k += 1
    return gen, ndec, k, 0


# ------------------------------------------------------------------ B draft paths


@njit(**JIT)
def _paths_draft(R, dm, w, O, pr, hlen, ell, nblk, gls):
    """B draft paths in a trie, one batched draft pass per depth over the distinct nodes:
    the list coupling's races (``gls``) or i.i.d. draws (SpecInfer).  Returns the number
    of trie nodes."""
    B = R.B
    share = R.share
    nn = 1
    w.parent[0] = -1
    w.ntok[0] = -1
    w.depth[0] = 0
    w.nfirst[0] = 0
    for b in range(B):
        w.dnode[b, 0] = 0
    for s in range(ell):
        nseen = 0  # distinct nodes of depth s in first-seen order
        for b in range(B):
            u = w.dnode[b, s]
            new = True
            for i in range(nseen):
                if w.seen[i] == u:
                    new = False
                    break
            if new:
                w.seen[nseen] = u
                nseen += 1
        O.counts[1] += 1
        O.counts[3] += nseen
        for i in range(nseen):
            u = w.seen[i]
            _write_path(w.parent, w.ntok, w.depth, u, pr.tokens, hlen)
            row = w.QN[u] if not gls else w.Q[0]
            _draft_eval(dm, pr.tokens[:hlen + s], w.SN[u if share else 0], w.LG, row, share)
            for b in range(B):
                if w.dnode[b, s] == u:
                    if gls:
                        w.paths[b, s] = _K.race_argmin(w.ulabels[s], row, b)
                    else:
                        w.paths[b, s] = _K.categorical(row, w.us[(s * B + b) * 3])
        lev0 = nn
        for b in range(B):
            u = w.dnode[b, s]
            c = _child(w.parent, w.ntok, lev0, nn, u, w.paths[b, s])
            if c < 0:
                c = nn
                w.parent[nn] = u
                w.ntok[nn] = w.paths[b, s]
                w.depth[nn] = s + 1
                nn += 1
            w.dnode[b, s + 1] = c
    if R.store_drafts:
        for b in range(B):
            for s in range(ell):
                O.drafts[nblk, b, s] = w.paths[b, s]
    return nn


@njit(**JIT)
def _paths_block(R, tm, dm, w, O, pr, gen, ndec, nblk, gls):
    """B draft paths verified together: the list coupling (``gls``, Rowan et al. 2025) or
    SpecInfer's recursive rejection (Miao et al. 2024); returns ``(gen, ndec, emitted,
    error)``."""
    B = R.B
    hlen = pr.n0 + gen
    ell = R.L if R.L < R.N - gen else R.N - gen
    if gls:
        for s in range(ell + 1):
            w.ulabels[s] = pcg_next(pr.state)
    else:
        pcg_doubles(pr.state, w.us[:3 * B * (ell + 1)])
    nn = _paths_draft(R, dm, w, O, pr, hlen, ell, nblk, gls)
    O.counts[0] += 1
    O.counts[2] += nn
    active = w.active
    na = B
    for b in range(B):
        active[b] = b
    k = 0
    for s in range(ell):
        cur = hlen + s
        u = w.dnode[active[0], s]
        _target_eval(tm, pr.tokens[:cur], w.SN[u if R.share else 0], w.LG, w.P, R.share)
        if gls:
            y = _K.gls_argmin(w.ulabels[s], w.P, active[:na])
            ok = False
        else:
            for i in range(na):
                w.cands[i] = w.paths[active[i], s]
                w.u_acc[i] = w.us[(s * B + active[i]) * 3 + 1]
            y, ok = _K.specinfer_verify(w.P, w.QN[u], w.cands[:na], w.u_acc[:na],
                                        w.us[(s * B) * 3 + 2])
        gen = _emit(O, pr, gen, y, np.nan, False)
        k += 1
        m = 0
        for i in range(na):
            if w.paths[active[i], s] == y:
                active[m] = active[i]
                m += 1
        if gls:
            ok = m > 0
        ndec = _decide(O, ndec, na, ok, gen, False)
        if not ok:
            return gen, ndec, k, 0
        na = m
    if gen < R.N:  # the bonus token
        model_probs(tm, pr.tokens[:hlen + ell], w.P)
        if gls:
            y = _K.gls_argmin(w.ulabels[ell], w.P, active[:na])
        else:
            y = _K.categorical(w.P, w.us[(ell * B) * 3 + 2])
        gen = _emit(O, pr, gen, y, np.nan, False)
        k += 1
    return gen, ndec, k, 0


@njit(**JIT)
def block_gls(R, tm, dm, w, O, pr, gen, ndec, nblk):
    """B draft paths with the list coupling (``invariant``)."""
    return _paths_block(R, tm, dm, w, O, pr, gen, ndec, nblk, True)


@njit(**JIT)
def block_specinfer(R, tm, dm, w, O, pr, gen, ndec, nblk):
    """B i.i.d. draft paths with recursive rejection (``specinfer``)."""
    return _paths_block(R, tm, dm, w, O, pr, gen, ndec, nblk, False)


# ------------------------------------------------------------------ block verification


@njit(**JIT)
def _whole_block(R, tm, dm, w, O, pr, gen, ndec, nblk, hsd):
    """One draft sequence verified as a whole: draw ``ell`` drafts, evaluate the target
    after each, keep the prefix ``tau`` of block verification
    (:func:`~specbound.sim._compiled_blockver.blockver_tau`) or of lossless hierarchical SD
    (``hsd``: :func:`~specbound.sim._compiled_hsd.hsd_tau`), then emit the correction
    (``tau < ell``; :func:`~specbound.sim._compiled_blockver.blockver_correction` for
    both) or the bonus.  The randomness is the single-draft block's (``3 (ell +
    1)`` uniforms), so a seed's drafts are ``vsps``'s.  Decisions: accepted at each kept
    position, rejected at the correction's (``nu = 1``).  Returns ``(gen, ndec, emitted,
    error)``."""
    hlen = pr.n0 + gen
    room = R.N - gen
    ell = R.L if R.L < room else room
    n = w.P.shape[0]
    us = np.empty(3 * (ell + 1))
    pcg_doubles(pr.state, us)
    Q = np.empty((ell, n))
    P = np.empty((ell + 1, n))
    xs = np.empty(ell, np.int64)
    ws = np.empty(ell + 1)  # the residual weights (blockver's p_i, hsd's c_i)
    for s in range(ell):
        O.counts[1] += 1
        O.counts[3] += 1
        _draft_eval(dm, pr.tokens[:hlen + s], w.SN[s if R.share else 0], w.LG, Q[s], R.share)
        x = _K.categorical(Q[s], us[3 * s])
        pr.tokens[hlen + s] = x
        xs[s] = x
    if R.store_drafts:
        for s in range(ell):
            O.drafts[nblk, 0, s] = xs[s]
    O.counts[0] += 1
    O.counts[2] += ell + 1
    for s in range(ell):
        _target_eval(tm, pr.tokens[:hlen + s], w.SN[s if R.share else 0], w.LG, P[s], R.share)
    if hsd:
        tau = _HS.hsd_tau(P, Q, xs, ell, us, ws)
    else:
        tau = _BV.blockver_tau(P, Q, xs, ell, us, ws)
    for k in range(tau):
        gen = _emit(O, pr, gen, xs[k], np.nan, False)
        ndec = _decide(O, ndec, 1, True, gen, False)
    if tau < ell:
        y = _BV.blockver_correction(ws[tau], P[tau], Q[tau], us[3 * tau + 2])
        gen = _emit(O, pr, gen, y, np.nan, False)
        ndec = _decide(O, ndec, 1, False, gen, False)
        return gen, ndec, tau + 1, 0
    if room > ell:
        model_probs(tm, pr.tokens[:hlen + ell], P[ell])
        gen = _emit(O, pr, gen, _K.categorical(P[ell], us[3 * ell + 2]), np.nan, False)
        return gen, ndec, tau + 1, 0
    return gen, ndec, tau, 0


@njit(**JIT)
def block_blockver(R, tm, dm, w, O, pr, gen, ndec, nblk):
    """Block verification (``blockver``; Sun et al. 2024, arXiv:2403.10444, Alg. 2)."""
    return _whole_block(R, tm, dm, w, O, pr, gen, ndec, nblk, False)


@njit(**JIT)
def block_hsd(R, tm, dm, w, O, pr, gen, ndec, nblk):
    """Lossless hierarchical speculative decoding (``hsd``; Zhou et al., ICLR 2026,
    arXiv:2601.05724)."""
    return _whole_block(R, tm, dm, w, O, pr, gen, ndec, nblk, True)


# ------------------------------------------------------------------ one prompt


@njit(**JIT)
def _check_run(R):
    """The kernel's own refusals (the Python side checks first): an unknown block kind, an
    unknown rule code, a rule outside the unkeyed single-draft block."""
    if R.kind < 0 or R.kind >= N_BLOCK_KINDS:
        raise ValueError("decoder: unknown block kind in the compiled loop")
    if R.vstep != -1:
        known = False
        for c in _CL.CODES:
            if R.vstep == c:
                known = True
        if not known:
            raise ValueError("rule: unknown rule code in the compiled loop")
        if R.kind != BLOCK_SINGLE or R.keyed:
            raise ValueError("rule: a lossy rule is the verification step of the unkeyed "
                             "single-draft block")


@njit(**JIT)
def _close_block(R, w, O, pr, nblk, k, g0, dec0, ndec):
    """The block's row (emitted, accepted decisions, length) and the prefix hash states
    advanced over its tokens (whole-prefix labels)."""
    O.emitted[nblk] = k
    a = 0
    for i in range(dec0, ndec):
        if O.dec_ok[i]:
            a += 1
    O.accepted[nblk] = a
    O.block_ell[nblk] = R.L if R.L < R.N - g0 else R.N - g0
    hlen = pr.n0 + g0
    if R.keyed and R.window < 0:
        _prefix_extend(w.pre, w.pst, pr.tokens, hlen, hlen + k)
    if R.kcoin and R.window < 0:
        _prefix_extend(w.apre, w.apst, pr.tokens, hlen, hlen + k)


@njit(**JIT)
def decode_one(R, tm, dm, tokens, n0, st, O):
    """Decode one prompt (``tokens[:n0]``) with the run ``R`` (:data:`Run`) on the compiled
    models ``tm`` / ``dm`` (:data:`Model`) into its output rows ``O`` (:data:`Out`); ``st``:
    the PCG64 state (advanced in place).  Returns ``(generated, n_blocks, n_decisions,
    error)``, ``error`` :data:`_compiled_lossy.ERR_NO_MASS` when a truncation context needed
    ``p_Theta`` and ``A`` carried no target mass (the run stops).

    Every block is run by the block function of the run's block kind (``BLOCK_*`` of
    :mod:`specbound.sim.decoders`, one ``block_<kind>(R, tm, dm, w, O, pr, gen, ndec,
    nblk)`` each, returning ``(gen, ndec, emitted, error)``); within a block the behaviour
    is read from the run's flags, never from the decoder's code.  An unknown kind raises
    ``ValueError`` (no fall-through).
    """
    _check_run(R)
    # the records by reference from here on (one pointer per argument: _records)
    R = _R.RunRef(*R)
    tm = _R.ModelRef(*tm)
    dm = _R.ModelRef(*dm)
    O = _R.OutRef(*O)
    kind = R.kind
    n = tm.base.shape[0] if tm.kind == MODEL_SYNTHETIC else tm.matrix.shape[1]
    w = _work(R, n)
    if R.keyed and R.window < 0:
        _prefix_start(R.kdw, R.person, w.pre, w.pst, tokens, n0)
    if R.kcoin and R.window < 0:
        _prefix_start(R.adw, R.person, w.apre, w.apst, tokens, n0)
    pr = _R.PromptRef(tokens, st, n0, pcg_next(st))
    gen = 0
    nblk = 0
    ndec = 0
    for i in range(4):
        O.counts[i] = 0
    while gen < R.N and (R.max_blocks < 0 or nblk < R.max_blocks):
        g0 = gen
        dec0 = ndec
        if kind == BLOCK_TOKEN:
            gen, ndec, k, err = block_token(R, tm, dm, w, O, pr, gen, ndec, nblk)
        elif kind == BLOCK_TREE:
            gen, ndec, k, err = block_tree(R, tm, dm, w, O, pr, gen, ndec, nblk)
        elif kind == BLOCK_SINGLE:
            gen, ndec, k, err = block_single(R, tm, dm, w, O, pr, gen, ndec, nblk)
        elif kind == BLOCK_GLS:
            gen, ndec, k, err = block_gls(R, tm, dm, w, O, pr, gen, ndec, nblk)
        elif kind == BLOCK_SPECINFER:
            gen, ndec, k, err = block_specinfer(R, tm, dm, w, O, pr, gen, ndec, nblk)
        elif kind == BLOCK_BLOCKVER:
            gen, ndec, k, err = block_blockver(R, tm, dm, w, O, pr, gen, ndec, nblk)
        elif kind == BLOCK_HSD:
            gen, ndec, k, err = block_hsd(R, tm, dm, w, O, pr, gen, ndec, nblk)
        else:  # no fall-through to another decoder's block
            raise ValueError("decoder: unknown block kind in the compiled loop")
        if err != 0:
            return gen, nblk, ndec, err
        _close_block(R, w, O, pr, nblk, k, g0, dec0, ndec)
        nblk += 1
    return gen, nblk, ndec, 0


@njit(**JIT)
def decode_row(R, tm, dm, tokens, n0s, states, O, sizes, i):
    """:func:`decode_one` for prompt ``i`` of a batch (its rows of every array);
    ``sizes[i] = (generated, blocks, decisions, error)``."""
    row = Out(O.emitted[i], O.accepted[i], O.nu[i], O.dec_ok[i], O.dec_pos[i], O.pivots[i],
              O.drafts[i], O.block_ell[i], O.counts[i], O.skipped[i], O.decision_skipped[i])
    g, nb, nd, err = decode_one(R, tm, dm, tokens[i], n0s[i], states[i], row)
    sizes[i, 0] = g
    sizes[i, 1] = nb
    sizes[i, 2] = nd
    sizes[i, 3] = err


@njit(**JIT_PAR)
def decode_batch(R, tm, dm, tokens, n0s, states, O, sizes):
    """:func:`decode_row` for every row of ``tokens`` (prompt ``i`` in ``tokens[i,
    :n0s[i]]``) under ``prange``.  Each prompt has its own PCG64 state ``states[i]`` and
    writes only row ``i`` of the outputs."""
    for i in prange(tokens.shape[0]):
        decode_row(R, tm, dm, tokens, n0s, states, O, sizes, i)


@njit(**JIT)
def decode_serial(R, tm, dm, tokens, n0s, states, O, sizes):
    """:func:`decode_batch` on one thread, without starting Numba's thread pool (the
    one-prompt path of ``speculative_decode``: a process that forks later stays fork-safe
    under the OpenMP threading layer)."""
    for i in range(tokens.shape[0]):
        decode_row(R, tm, dm, tokens, n0s, states, O, sizes, i)


# ------------------------------------------------------------------ Python side

#: largest number of float64 entries of the per-prompt work arrays of the compiled path
#: (beyond it the reference loop runs)
MAX_WORK = 20_000_000

#: the ``(vstep, fpar, ipar, jud, alw)`` of :data:`Run` for the decoders (speculative
#: sampling's own verification step; no lossy rule)
NO_RULE = (-1, np.zeros(5), np.zeros(2, np.int64), np.zeros(1), np.zeros(1, np.bool_))

#: the words of no key
NO_KEY = np.zeros(4, np.uint64)


class RunArgs(NamedTuple):
    """The validated arguments of one decoding call, derived once and passed down: the
    decoder's spec (looked up once), the sizes, the key's digest (hashed once), the window
    and the decoder options."""

    spec: DecoderSpec
    L: int
    B: int
    N: int
    key: bytes | None = None
    window: int | None = None
    max_blocks: int | None = None
    repeats: str = "reuse"
    reweight: str = "delta"
    unkeyed: str = "position"
    residual: str = "plain"
    #: ``mpfr``'s Poisson process (``"race"``; ``"uniform"`` runs in the Python loop only)
    proposal: str = "race"

    @property
    def options(self):
        """``(repeats, reweight, unkeyed, residual)``."""
        return self.repeats, self.reweight, self.unkeyed, self.residual


def run_args(decoder, **kw) -> RunArgs:
    """:class:`RunArgs` of ``decoder`` (its spec looked up here: ``ValueError`` naming
    ``decoder`` when none is registered)."""
    return RunArgs(decoder_spec(decoder), **kw)


class Plan(NamedTuple):
    """The compiled form of a run (:func:`plan`): the compiled spec, the compiled models,
    the key words (``kdw`` the key's, ``adw`` the second key's) and whether target and draft
    share their back-off sums."""

    dspec: np.ndarray
    tm: tuple
    dm: tuple
    kdw: np.ndarray
    adw: np.ndarray
    share: bool


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


def plan(target, draft, args: RunArgs, store_drafts=True, unwrap_cached=False):
    """The :class:`Plan` of a run, or None when the compiled path does not cover it (a
    model without a compiled form, work arrays over ``MAX_WORK``, ``mpfr`` with
    ``proposal="uniform"``, which has no compiled block: its Alg. 5 scans would add kernels
    to the loop's one compile for a variant whose law equals the race's).

    Raises ``ValueError`` for a decoder whose block kind has no compiled block.
    """
    spec = args.spec
    L, B, N = args.L, args.B, args.N
    dspec = compiled_spec(spec, args.reweight)
    if args.proposal != "race":  # MPFR on a public process: the Python block loop only
        return None
    tm = model_spec(target, unwrap_cached)
    dm = model_spec(draft, unwrap_cached) if draft is not None else tm
    if tm is None or dm is None:
        return None
    n = int(target.vocab_size)
    work = n * (L if spec.block == "single" else 1)
    if spec.block in ("blockver", "hsd"):  # the block's draft and target rows
        work = n * (2 * L + 1)
    if spec.block == "specinfer":
        work += n * (1 + B * L)
    if args.repeats == "skip" and spec.keyed and spec.block == "tree":
        work += n * (1 + B * L)  # the draft distributions of skipped contexts
    if args.reweight == "gamma":
        work += n * (L + 3)
    if store_drafts:
        work = max(work, N * B * L)
    if work > MAX_WORK:
        return None
    # the shared back-off sums of one block's contexts (skipped when too large)
    share = bool(spec.drafts and shares_fields(tm, dm) and n * (1 + B * L) <= MAX_WORK)
    kdw = NO_KEY
    adw = NO_KEY
    if args.key is not None and spec.keyed:
        digest = key_digest(args.key)  # the caller's digest is returned as is (no re-hash)
        kdw = _b2.digest_words(digest)
        if spec.acceptance == "keyed_coin":
            adw = _b2.digest_words(acceptance_digest(digest))
    return Plan(dspec, tm, dm, kdw, adw, share)


def option_flags(repeats="reuse", reweight="delta", unkeyed="position", residual="plain"):
    """The decoder options as flags (``OPT_*`` positions)."""
    opts = np.zeros(5, np.int64)
    opts[OPT_MASK] = repeats == "mask"
    opts[OPT_SKIP] = repeats == "skip"
    opts[OPT_GAMMA] = reweight == "gamma"
    opts[OPT_FRESH] = unkeyed == "fresh"
    opts[OPT_KEYED_RESIDUAL] = residual == "keyed"
    return opts


def run_record(dspec, opts, *, N, L, B, window=None, max_blocks=None, kdw=NO_KEY,
               adw=NO_KEY, store_drafts=True, share=False, rule=NO_RULE) -> Run:
    """The :data:`Run` of a kernel call: the decoder's compiled spec ``dspec`` and option
    flags ``opts`` (:func:`option_flags`) resolved once into the flags the blocks read;
    ``rule`` the ``(vstep, fpar, ipar, jud, alw)`` of a lossy rule (:data:`NO_RULE`)."""
    kind = int(dspec[DS_KIND])
    keyed = bool(dspec[DS_KEYED])
    kcoin = bool(dspec[DS_ACCEPTANCE] == ACC_KEYED_COIN)  # mse_pseudo's second key
    w = -1 if window is None else int(window)
    skipmode = bool(opts[OPT_SKIP]) and keyed
    vstep, fpar, ipar, jud, alw = rule
    return Run(
        kind=kind, keyed=keyed, kcoin=kcoin,
        reweighted=bool(dspec[DS_ACCEPTANCE] == ACC_REWEIGHTED),
        gamma=bool(opts[OPT_GAMMA]),
        mask=bool(opts[OPT_MASK]) and keyed and w >= 0,
        fresh=bool(opts[OPT_FRESH]) and kind == BLOCK_TREE and not keyed,
        kres=bool(opts[OPT_KEYED_RESIDUAL]) and kcoin,
        # repeats="skip": the unkeyed uniforms are drawn whenever the mode is on (as in the
        # reference loop), repeats are looked for only with a finite window
        skipmode=skipmode, track_skip=skipmode and w >= 0,
        N=int(N), L=int(L), B=int(B), max_blocks=-1 if max_blocks is None else int(max_blocks),
        window=w, kdw=kdw, adw=adw, person=_b2.PERSON_WORDS, store_drafts=bool(store_drafts),
        share=bool(share), vstep=int(vstep), fpar=fpar, ipar=ipar, jud=jud, alw=alw)


def outputs(n_prompts, N, L, B, store_drafts) -> Out:
    """Zeroed output arrays (:data:`Out`) of :func:`decode_batch` for ``n_prompts``
    prompts."""
    cap = max(N, 1)
    return Out(
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


def run_kernel(R: Run, tm, dm, prompts, states, parallel=False):
    """The one call of the compiled loop: decode the validated ``prompts`` (int64 arrays)
    with the run ``R``, prompt ``i`` on the PCG64 state ``states[i]`` (advanced in place),
    under ``prange`` when ``parallel`` and there is more than one prompt.  Returns
    ``(tokens, n0s, out, sizes)``: the padded token rows, the prompt lengths, the
    :data:`Out` arrays and ``sizes[i] = (generated, blocks, decisions, error)``."""
    n = len(prompts)
    n0s = np.array([a.size for a in prompts], dtype=np.int64)
    tokens = np.zeros((n, int(n0s.max()) + R.N), np.int64)
    for i, a in enumerate(prompts):
        tokens[i, :a.size] = a
    out = outputs(n, R.N, R.L, R.B, R.store_drafts)
    sizes = np.zeros((n, 4), np.int64)
    kernel = decode_batch if parallel and n > 1 else decode_serial
    kernel(R, tm, dm, tokens, n0s, states, out, sizes)
    return tokens, n0s, out, sizes


class ResultMeta(NamedTuple):
    """What every result of one compiled call shares (:func:`build_results`)."""

    decoder: str
    kind: str
    L: int
    B: int
    watermark: WatermarkConfig
    unkeyed: str = "position"
    with_drafts: bool = True


def result_meta(args: RunArgs, with_drafts=True) -> ResultMeta:
    """The :class:`ResultMeta` of a decoder run."""
    spec = args.spec
    repeats, reweight, unkeyed, residual = args.options
    kid = key_id(args.key) if spec.keyed else None
    return ResultMeta(spec.name, spec.block_for(reweight), args.L, args.B,
                      WatermarkConfig(kid, args.window, repeats == "mask", repeats, reweight,
                                      residual), unkeyed, with_drafts)


def build_results(meta: ResultMeta, tokens, n0s, out: Out, sizes) -> list:
    """The :class:`~specbound.sim.results.DecodeResult` of every prompt of a compiled call
    (:func:`run_kernel`'s outputs): the one result builder of the compiled path."""
    rows = 1 if meta.kind == "single" else meta.B
    results = []
    for i in range(tokens.shape[0]):
        n0 = int(n0s[i])
        g, nb, nd = (int(x) for x in sizes[i, :3])
        if meta.kind == "token" or not meta.with_drafts:
            drafts = ()
        else:
            ells = out.block_ell[i, :nb]
            drafts = tuple(out.drafts[i, b, :rows, :int(ells[b])].copy() for b in range(nb))
        c = out.counts[i]
        results.append(DecodeResult(
            tokens=tokens[i, :n0 + g].copy(),
            prompt_length=n0,
            emitted_per_block=out.emitted[i, :nb].copy(),
            accepted_per_block=out.accepted[i, :nb].copy(),
            nu=out.nu[i, :nd].copy(),
            decision_accepted=out.dec_ok[i, :nd].copy(),
            decision_position=out.dec_pos[i, :nd].copy(),
            n_target_evals=int(c[0]),
            n_draft_evals=int(c[1]),
            n_target_contexts=int(c[2]),
            n_draft_contexts=int(c[3]),
            pivots=out.pivots[i, :g].copy(),
            drafts=drafts,
            decoder=meta.decoder,
            L=meta.L,
            B=meta.B,
            watermark=meta.watermark,
            skipped=out.skipped[i, :g].copy(),
            decision_skipped=out.decision_skipped[i, :nd].copy(),
            unkeyed=meta.unkeyed,
        ))
    return results


def decode_prompts(target, draft, prompts, args: RunArgs, states, *, store_drafts=True,
                   unwrap_cached=False, parallel=False):
    """The compiled run of validated ``prompts`` (int64 arrays), prompt ``i`` on the PCG64
    state ``states[i]`` (advanced in place): their results, or None when the compiled path
    does not cover the run (nothing was drawn; ``states`` None: a generator is not
    ``PCG64``).  Raises ``ValueError`` for a decoder whose block kind has no compiled
    block."""
    p = plan(target, draft, args, store_drafts, unwrap_cached)
    if p is None or states is None:
        return None
    R = run_record(p.dspec, option_flags(*args.options), N=args.N, L=args.L, B=args.B,
                   window=args.window, max_blocks=args.max_blocks, kdw=p.kdw, adw=p.adw,
                   store_drafts=store_drafts, share=p.share)
    tokens, n0s, out, sizes = run_kernel(R, p.tm, p.dm, prompts, states, parallel)
    return build_results(result_meta(args, store_drafts), tokens, n0s, out, sizes)


def decode_single(target, draft, prompt, rng, args: RunArgs):
    """The compiled :func:`specbound.sim.decode.speculative_decode` of one validated run.

    Returns the :class:`~specbound.sim.decode.DecodeResult` of the reference loop bit for
    bit, or None when the compiled path does not cover the run (then nothing was drawn
    from ``rng``).  ``rng`` is advanced exactly as the reference loop advances it.
    """
    st = pcg_state(rng)
    if st is None:
        return None
    states = st[None, :].copy()
    res = decode_prompts(target, draft, [np.asarray(prompt, dtype=np.int64)], args, states)
    if res is None:
        return None
    set_pcg_state(rng, states[0])
    return res[0]
