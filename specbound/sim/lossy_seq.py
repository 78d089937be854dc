"""Sequence-level speculative decoding with a lossy verification rule.

:func:`lossy_decode` generates a sequence block by block: the block of Alg. 1 of Leviathan
et al. 2023 (arXiv:2211.17192) -- ``L`` drafts ``x_s ~ q``, verification position by
position, a bonus token from the target when every draft passes -- with the verification
step of a rule of :data:`specbound.theory.RULES` (Zhou et al. 2026, arXiv:2607.26627,
§3.1-3.2, App. A, F, G): at each position the rule's acceptance test ``U < h(x_s)`` and, at
the first rejection, the rule's correction (a residual, the truncated target, or -- for the
``"renormalize"`` readings -- fresh drafts from ``q`` tested again until one passes).  The
per-context mechanism is :func:`specbound.sim.lossy._mechanism`, the code of
:func:`specbound.sim.sample_induced`, so the first token of a block follows
:func:`specbound.theory.induced_distribution` of the context's ``(p, q)``.

Randomness (that of ``speculative_decode(..., "vsps")``, whose block this is): one 64-bit
run label first (drawn by the decoders' block loop, unused by the rules), then
``rng.random((ell + 1, 3))`` per block (draft draw, acceptance coin, correction or bonus draw
at each block position), then the redraw loop's uniforms in order (``categorical(q, U)``,
then the test ``U' < h``), from ``np.random.default_rng(seed)``.  The ``lossless`` rule
verifies with speculative sampling's own step (``U q(x) <= p(x)``), so
``lossy_decode(..., "lossless")`` is ``speculative_decode(..., "vsps")`` token for token.

There is no lossy block loop of its own: both loops of the decoders run it, with the rule as
the verification step of their single-draft block (the block of ``vsps``), the same numbers:

- the Python block loop (:func:`lossy_loop`: ``BlockRun.block_single`` of
  :mod:`specbound.sim.decode` with ``BlockRun.verify_rule``) over any
  :class:`~specbound.sim.decode.DecodeBackend` (``llm.generate_lossy`` drives it with a real
  model pair's KV-cached backend);
- the compiled loop (:func:`specbound.sim._compiled.decode_one` with the rule's step of
  :mod:`specbound.sim._compiled_lossy`: Numba, the models evaluated inside the loop, NumPy's
  PCG64 stream replayed, prompts under ``prange`` in :func:`lossy_decode_batch`).

:func:`lossy_decode` and :func:`lossy_decode_batch` take the compiled loop whenever it
covers the run: no ``backend``, ``SyntheticLM`` / ``MarkovLM`` models (a ``CachedLM`` of one
in the batch only), a ``PCG64`` generator, constant rule parameters (scalars, one value per
vocabulary entry, string options) and work arrays within ``_compiled.MAX_WORK``.  Callable
parameters ``f(p, q)``, custom backends and models, other bit generators and larger runs go
to the Python loop.  The two agree token for token, block for block and decision for
decision (``tests/test_sim_lossy_decode.py``); for the contrastive rule and the KL / JS
gates of Fuzzy SD they agree up to an event of probability of order ``V 2^-52`` per
decision (NumPy's SIMD ``log``/``exp``/``pow`` against the C library's; module docstring of
:mod:`specbound.sim._compiled_lossy`).
"""

from __future__ import annotations

import numpy as np

from specbound._validation import as_bool, as_rng
from specbound.sim import _compiled as _C
from specbound.sim import _compiled_lossy as _CL
from specbound.sim.batch import (
    DecodeBatch,
    batch_from_results,
    check_batch_size,
    prompt_rows,
    prompt_seeds,
)
from specbound.sim.decode import (
    BlockRun,
    DecodeBackend,
    DecodeResult,
    SyntheticBackend,
    WatermarkConfig,
    check_decode_cost,
    validate_decode_args,
)
from specbound.sim.decoders import DECODER_SPECS
from specbound.sim.lossy import context_params, rule_spec
from specbound.theory.lossy import DIVERGENCES, check_rule_params, parse_rule_params

__all__ = ["lossy_decode", "lossy_decode_batch"]

#: the decoder whose single-draft block runs the rules
_VSPS = DECODER_SPECS["vsps"]

_NO_MASS = ("allowed: the allowed set carries no target mass (context 0); the truncated "
            "target p_Theta is undefined")


# ------------------------------------------------------------------ the Python block loop


#: a rule's parameters in one context (callables ``f(p, q)`` evaluated on it)
_rule_params = context_params


def lossy_loop(backend, prompt, rule, L, N, rng, params) -> DecodeResult:
    """The Python block loop on ``backend`` (validated ``rule``, ``L``, ``N``, ``rng``).

    The reference implementation: the single-draft block of
    :func:`specbound.sim.speculative_decode` (``vsps``'s block, the same code) with the
    rule's verification step (``BlockRun.verify_rule``); any
    :class:`~specbound.sim.decode.DecodeBackend`, rule parameters constant or callable
    ``f(p, q)`` (evaluated and validated in every context by
    :func:`specbound.theory.lossy.parse_rule_params`).  A backend that sets ``finished``
    ends the run after the current block.
    """
    check_rule_params(rule, params)
    return BlockRun(backend, prompt, _C.RunArgs(_VSPS, L=L, B=1, N=N), rng, rule=rule,
                    rule_params=params).run()


# ------------------------------------------------------------------ the compiled path


def _constants(rule, params, n):
    """The rule's constant parameters in the compiled form ``(vstep, fpar, ipar, jud, alw)``
    (``vstep``: the rule's code, -1 for a rule that is speculative sampling's own step),
    validated by :func:`specbound.theory.lossy.parse_rule_params` (``ValueError`` naming the
    argument); None when a parameter is a callable (the Python loop then evaluates and
    validates it in every context)."""
    if any(callable(v) for v in params.values()):
        return None
    dummy = np.full((1, n), 1.0 / n)
    rule, prm = parse_rule_params(rule, dummy, dummy, params)
    fpar = np.zeros(5)
    for name, pos in (("lam", _CL.F_LAM), ("threshold", _CL.F_THRESHOLD), ("ell", _CL.F_ELL),
                      ("beta", _CL.F_BETA), ("alpha", _CL.F_ALPHA)):
        if name in prm:
            fpar[pos] = prm[name][0]
    ipar = np.zeros(2, np.int64)
    if "divergence" in prm:
        ipar[_CL.I_DIVERGENCE] = DIVERGENCES.index(prm["divergence"])
    ipar[_CL.I_REDRAW] = (prm.get("on_reject") == "renormalize"
                          or prm.get("completion") == "renormalize")
    jud = (prm["judge"][0].astype(np.float64) if "judge" in prm else np.zeros(1))
    alw = (np.ascontiguousarray(prm["allowed"][0]) if "allowed" in prm
           else np.zeros(1, np.bool_))
    spec = rule_spec(rule)
    return (-1 if spec.sd_step else spec.code), fpar, ipar, jud, alw


def _plan(target, draft, L, N, store_drafts, unwrap_cached):
    """``(tm, dm, share)`` of a compiled run, or None when it is not covered (models without
    a compiled evaluation, work arrays above ``_compiled.MAX_WORK``)."""
    tm = _C.model_spec(target, unwrap_cached)
    dm = _C.model_spec(draft, unwrap_cached)
    if tm is None or dm is None:
        return None
    n = int(target.vocab_size)
    work = n * (L + 5)
    if store_drafts:
        work = max(work, N * L)
    if work > _C.MAX_WORK:
        return None
    share = _C.shares_fields(tm, dm) and n * (2 * L + 5) <= _C.MAX_WORK
    return tm, dm, share


def _run_compiled(rule, consts, plan, prompts, N, L, states, store, parallel):
    """Run the compiled loop on validated prompts -- the single-draft block of the decoders
    (``vsps``'s, :func:`specbound.sim._compiled.decode_one`) with the rule's verification
    step -- and return their results (:func:`specbound.sim._compiled.build_results`)."""
    tm, dm, share = plan
    dspec = _C.compiled_spec(_VSPS)  # the block whose step the rule is
    R = _C.run_record(dspec, _C.option_flags(), N=N, L=L, B=1, store_drafts=store,
                      share=share, rule=consts)
    tokens, n0s, out, sizes = _C.run_kernel(R, tm, dm, prompts, states, parallel)
    if np.any(sizes[:, 3] == _CL.ERR_NO_MASS):
        raise ValueError(_NO_MASS)
    meta = _C.ResultMeta(f"lossy:{rule}", "single", L, 1, WatermarkConfig(None, None, False),
                         with_drafts=store)
    return _C.build_results(meta, tokens, n0s, out, sizes)


def _compiled_single(target, draft, prompt, rule, consts, L, N, rng):
    """The compiled run of one validated prompt, or None (nothing drawn from ``rng``)."""
    if consts is None:
        return None
    st = _C.pcg_state(rng)
    if st is None:
        return None
    plan = _plan(target, draft, L, N, True, False)
    if plan is None:
        return None
    states = st[None, :].copy()
    res = _run_compiled(rule, consts, plan, [prompt], N, L, states, True, False)
    _C.set_pcg_state(rng, states[0])
    return res[0]


def _validated(target, draft, prompt, rule, L, max_new_tokens):
    rule = rule_spec(rule).name
    target, draft, prompt, _, L, _, N, _, _ = validate_decode_args(
        target, draft, prompt, "vsps", L, 1, None, max_new_tokens, None)
    return target, draft, prompt, rule, L, N


# ------------------------------------------------------------------ public API


def lossy_decode(target, draft, prompt, rule, *, L=4, max_new_tokens=64, seed=0, backend=None,
                 **params) -> DecodeResult:
    """Generate ``max_new_tokens`` tokens by speculative sampling with a lossy rule.

    Blockwise speculative sampling (Leviathan et al. 2023, arXiv:2211.17192, Alg. 1) whose
    verification step is the rule's mechanism (Zhou et al. 2026, arXiv:2607.26627,
    §3.1-3.2, App. A, F, G; module docstring): the first token of every block follows
    :func:`specbound.theory.induced_distribution` of its context's ``(p, q)``.

    Parameters
    ----------
    target, draft : models
        Protocol models with equal vocabularies (:func:`specbound.sim.speculative_decode`).
    prompt : sequence of int
        Prompt token ids (may be empty).
    rule : str
        One of :data:`specbound.theory.RULES`.
    L : int >= 1
        Drafts per block.
    max_new_tokens : int, 0 <= max_new_tokens <= 100,000
    seed : int, SeedSequence or Generator
        Source of the uniforms (module docstring, "Randomness"); a Generator is advanced.
    backend : DecodeBackend or None
        The model evaluation; None: the compiled loop where it covers the run (module
        docstring), else a :class:`~specbound.sim.decode.SyntheticBackend` on the models.
    **params
        The rule's parameters (``lam``, ``threshold``, ``divergence``, ``ell``, ``judge``,
        ``allowed``, ``on_reject``, ``completion``, ``beta``, ``alpha``; the parameters of
        :func:`specbound.sim.sample_induced`), each a constant (one value, or one value per
        vocabulary entry for ``judge`` / ``allowed``) or a callable ``f(p, q)`` evaluated in
        every context (e.g. a min-p set ``allowed=lambda p, q: p >= 0.1 * p.max()``; such
        runs take the Python loop).

    Returns
    -------
    DecodeResult
        ``decoder = "lossy:<rule>"``, ``B = 1``, ``nu`` all 1, ``pivots`` NaN, no watermark.

    Raises
    ------
    ValueError
        An argument out of range, named in the message (unknown ``rule``, a missing or bad
        rule parameter -- checked before any decoding when the parameters are constants --,
        ``L``, ``max_new_tokens``, ``prompt``, vocabulary mismatch), and ``allowed`` when a
        truncation context needs the truncated target ``p_Theta`` and ``A`` carries no target
        mass there.
    """
    target, draft, prompt, rule, L, N = _validated(target, draft, prompt, rule, L,
                                                   max_new_tokens)
    if backend is None:  # the call's work and memory bounded up front (as the decoders')
        check_decode_cost(target, _C.RunArgs(_VSPS, L, 1, N), [prompt])
    rng = as_rng(seed)
    consts = _constants(rule, params, int(target.vocab_size))
    if backend is None:
        res = _compiled_single(target, draft, prompt, rule, consts, L, N, rng)
        if res is not None:
            return res
        backend = SyntheticBackend(target, draft)
    elif not isinstance(backend, DecodeBackend):
        raise ValueError(f"backend: must implement reset, draft_step, verify and commit "
                         f"(DecodeBackend), got {type(backend).__name__}")
    return lossy_loop(backend, prompt, rule, L, N, rng, params)


def lossy_decode_batch(target, draft, prompts, rule, *, L=4, max_new_tokens=64, seed=None,
                       store_drafts=False, parallel=True, **params) -> DecodeBatch:
    """:func:`lossy_decode` on many prompts in one compiled call (prompts under ``prange``).

    Parameters
    ----------
    target, draft, rule, L, max_new_tokens, **params
        As in :func:`lossy_decode`.  ``SyntheticLM`` / ``MarkovLM`` (or a ``CachedLM`` of
        one, evaluated through its model) with constant parameters run compiled; anything
        else runs prompt by prompt through :func:`lossy_decode`.
    prompts : 2-D array of int, sequence of token sequences, or PromptSet
        One prompt per row (lengths may differ).
    seed : None, int, SeedSequence, Generator or sequence of seeds
        One seed per prompt, or one seed split into the prompts' seeds
        (:func:`specbound._validation.split_seeds`); None: a ``PromptSet``'s seeds, otherwise 0
        (:func:`specbound.sim.speculative_decode_batch`'s convention).
    store_drafts : bool
        Keep the drafts of every block.
    parallel : bool
        Prompts on Numba's threads (False: the calling thread, the pool is not started;
        :func:`specbound.sim.speculative_decode_batch`).  The results are the same.

    Returns
    -------
    DecodeBatch
        ``batch[i]`` equals ``lossy_decode(target, draft, prompts[i], rule, L=L,
        max_new_tokens=max_new_tokens, seed=seeds[i], **params)`` field by field (the drafts
        when ``store_drafts``), for any number of threads.

    Raises
    ------
    ValueError
        As :func:`lossy_decode`, and ``prompts`` empty or not integer sequences, ``seed`` of
        the wrong length.
    """
    rows = prompt_rows(prompts)
    n = len(rows)
    seeds = prompt_seeds(seed, prompts, n)
    store = as_bool(store_drafts, "store_drafts")
    parallel = as_bool(parallel, "parallel")
    target, draft, _, rule, L, N = _validated(target, draft, rows[0], rule, L, max_new_tokens)
    arrs = [_validated(target, draft, r, rule, L, N)[2] for r in rows]
    check_batch_size(arrs, N, L if store else 0)
    check_decode_cost(target, _C.RunArgs(_VSPS, L, 1, N), arrs, batch=True, store_drafts=store)
    consts = _constants(rule, params, int(target.vocab_size))
    rngs = [as_rng(s, f"seed[{i}]") for i, s in enumerate(seeds)]
    states = [_C.pcg_state(g) for g in rngs]
    plan = _plan(target, draft, L, N, store, True) if consts is not None else None
    if plan is None or any(s is None for s in states):
        return batch_from_results([lossy_decode(target, draft, a, rule, L=L, max_new_tokens=N,
                                           seed=g, **params)
                              for a, g in zip(arrs, rngs, strict=True)], store)
    return batch_from_results(_run_compiled(rule, consts, plan, arrs, N, L, np.stack(states),
                                            store, parallel), store)
