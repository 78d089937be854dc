"""Many prompts in one compiled decoding call: :func:`speculative_decode_batch`.

The block loop of every decoder of :func:`specbound.sim.decode.speculative_decode` (Liu,
Wan, Gao & Gündüz 2026, arXiv:2609.21858, Alg. 1, 3, 4, 9, 10 and the baselines named in
:mod:`specbound.sim.decode`) runs in Numba with the model evaluation inside the loop
(:mod:`specbound.sim._compiled`); the prompts are distributed over threads with ``prange``.
Prompt ``i`` is decoded with its own unkeyed random stream ``default_rng(seeds[i])``, so the
result of every prompt is bit for bit ``speculative_decode(target, draft, prompts[i],
decoder, ..., seed=seeds[i])`` whatever the number of threads (``numba.set_num_threads``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from specbound._validation import as_bool, as_rng, check_alloc, split_seeds
from specbound.results import ConfidenceInterval, Estimate, ResultBatch
from specbound.sim import _compiled as _C
from specbound.sim.decode import (
    check_decode_cost,
    decode_run_args,
    speculative_decode,
    validate_prompt,
)
from specbound.sim.models import PromptSet
from specbound.sim.results import DecodeResult, WatermarkConfig

__all__ = ["DecodeBatch", "speculative_decode_batch"]

#: largest number of prompts of one :func:`speculative_decode_batch` call
MAX_PROMPTS = 10**6

_RAGGED = ("tokens", "emitted_per_block", "accepted_per_block", "nu", "decision_accepted",
           "decision_position", "pivots", "drafts")
_SCALAR = ("prompt_length", "n_target_evals", "n_draft_evals", "n_target_contexts",
           "n_draft_contexts")


@dataclass(frozen=True, eq=False)
class DecodeBatch(ResultBatch):
    """Result of :func:`speculative_decode_batch`: one entry per prompt.

    ``len(batch)`` prompts; ``batch[i]`` is the :class:`~specbound.sim.decode.DecodeResult`
    of prompt ``i`` (equal field by field to ``speculative_decode`` on that prompt and seed);
    :meth:`to_frame` gives one row per prompt; :meth:`aatps_estimate` and :meth:`ci` the
    pooled AATPS with its standard error.

    Attributes
    ----------
    tokens, emitted_per_block, accepted_per_block, nu, decision_accepted,
    decision_position, pivots : tuple of ndarray
        Per prompt, the arrays of :class:`~specbound.sim.decode.DecodeResult`.
    drafts : tuple of tuple of ndarray
        Per prompt, the realised drafts of every block (empty tuples unless the batch was
        decoded with ``store_drafts=True``).
    prompt_length, n_target_evals, n_draft_evals, n_target_contexts, n_draft_contexts :
    ndarray of int64
        Per prompt.
    decoder : str
    L, B : int
    watermark : WatermarkConfig
        Shared by every prompt.
    skipped, decision_skipped : tuple of ndarray of bool
        Per prompt, as in :class:`~specbound.sim.decode.DecodeResult` (empty: all False).
    unkeyed : str
        The unkeyed clocks of ``pfr_nowm`` (``DecodeResult.unkeyed``).
    """

    tokens: tuple
    emitted_per_block: tuple
    accepted_per_block: tuple
    nu: tuple
    decision_accepted: tuple
    decision_position: tuple
    pivots: tuple
    drafts: tuple
    prompt_length: np.ndarray
    n_target_evals: np.ndarray
    n_draft_evals: np.ndarray
    n_target_contexts: np.ndarray
    n_draft_contexts: np.ndarray
    decoder: str = ""
    L: int = 1
    B: int = 1
    watermark: WatermarkConfig = WatermarkConfig(None, None, False)
    skipped: tuple = ()
    decision_skipped: tuple = ()
    unkeyed: str = "position"

    _item_fields = _RAGGED + _SCALAR
    _item_type = DecodeResult

    @property
    def n_blocks(self) -> np.ndarray:
        """Blocks per prompt (int64)."""
        return np.array([e.size for e in self.emitted_per_block], dtype=np.int64)

    @property
    def generated(self) -> np.ndarray:
        """Generated tokens per prompt (int64)."""
        return np.array([t.size for t in self.tokens], dtype=np.int64) - self.prompt_length

    @property
    def aatps(self) -> np.ndarray:
        """Per-prompt AATPS: mean tokens emitted per block (NaN for a prompt with no block)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return self.generated / self.n_blocks

    def aatps_estimate(self) -> Estimate:
        """Pooled AATPS ``sum emitted / sum blocks`` over the prompts with its standard error.

        The prompts are independent, the blocks of one prompt are not: the standard error is
        the delta-method (ratio-estimator) one over prompts,
        ``sqrt(n / (n - 1) * sum_i (E_i - r K_i)^2) / sum_i K_i`` with ``E_i`` tokens and
        ``K_i`` blocks of prompt ``i`` (0 for a single prompt).
        """
        E = self.generated.astype(np.float64)
        K = self.n_blocks.astype(np.float64)
        n = E.size
        if K.sum() == 0:
            return Estimate(float("nan"), float("nan"), 0)
        r = E.sum() / K.sum()
        se = (float(np.sqrt(n / (n - 1) * np.sum((E - r * K) ** 2)) / K.sum()) if n > 1
              else 0.0)
        return Estimate(mean=float(r), stderr=se, n=int(K.sum()))

    def ci(self, confidence_level: float = 0.95) -> ConfidenceInterval:
        """Normal interval of the pooled AATPS (:meth:`aatps_estimate`)."""
        return self.aatps_estimate().ci(confidence_level)

    def _item_kwargs(self, i: int) -> dict:
        out = {f: getattr(self, f)[i] for f in _RAGGED}
        out.update({f: int(getattr(self, f)[i]) for f in _SCALAR})
        out.update(decoder=self.decoder, L=self.L, B=self.B, watermark=self.watermark,
                   unkeyed=self.unkeyed)
        if self.skipped:
            out.update(skipped=self.skipped[i], decision_skipped=self.decision_skipped[i])
        return out

    def to_frame(self) -> pd.DataFrame:
        """One row per prompt: ``prompt, prompt_length, generated, n_blocks, accepted,
        aatps, n_decisions, n_target_evals, n_draft_evals, n_target_contexts,
        n_draft_contexts``."""
        return pd.DataFrame({
            "prompt": np.arange(len(self)),
            "prompt_length": self.prompt_length,
            "generated": self.generated,
            "n_blocks": self.n_blocks,
            "accepted": np.array([a.sum() for a in self.accepted_per_block], dtype=np.int64),
            "aatps": self.aatps,
            "n_decisions": np.array([x.size for x in self.nu], dtype=np.int64),
            "n_target_evals": self.n_target_evals,
            "n_draft_evals": self.n_draft_evals,
            "n_target_contexts": self.n_target_contexts,
            "n_draft_contexts": self.n_draft_contexts,
        })


def prompt_rows(prompts):
    if isinstance(prompts, PromptSet):
        prompts = prompts.tokens
    if isinstance(prompts, np.ndarray):
        if prompts.ndim != 2:
            raise ValueError(f"prompts: must be 2-D (one prompt per row) or a list of "
                             f"sequences, got shape {prompts.shape}")
        rows = list(prompts)
    else:
        try:
            rows = list(prompts)
        except TypeError:
            raise ValueError("prompts: must be a 2-D array, a PromptSet or a list of token "
                             "sequences") from None
    if not rows:
        raise ValueError("prompts: must contain at least one prompt")
    if len(rows) > MAX_PROMPTS:
        raise ValueError(f"prompts: at most {MAX_PROMPTS} prompts, got {len(rows)}")
    return rows


#: int64 entries a batch keeps per position of a row (its tokens, and per block the emitted
#: counts and decisions, at most one block a position), besides ``B * L`` stored drafts
BATCH_ITEMS_PER_POSITION = 4


def check_batch_size(arrs, max_new_tokens: int, drafts_per_position: int = 0) -> None:
    """Refuse up front (``specbound._validation.check_alloc``) a batch whose results would
    not fit: every row's prompt and new tokens (:data:`BATCH_ITEMS_PER_POSITION` entries a
    position, ``drafts_per_position`` more with stored drafts), naming ``prompts`` and
    ``max_new_tokens`` (100,000 prompts of 100,000 new tokens ran out of memory in the
    decoder instead)."""
    longest = max(a.size for a in arrs) + int(max_new_tokens)
    check_alloc("prompts and max_new_tokens",
                len(arrs) * longest * (BATCH_ITEMS_PER_POSITION + drafts_per_position),
                what=f"{len(arrs)} prompts of up to {longest} tokens")


def prompt_seeds(seed, prompts, n):
    """One seed per prompt: a PromptSet's own seeds for None, else :func:`split_seeds`."""
    if seed is None and isinstance(prompts, PromptSet):
        return list(prompts.seeds)
    return split_seeds(seed, n)


def speculative_decode_batch(target, draft, prompts, decoder, *, L=4, B=1, key=None,
                             window=None, max_new_tokens=64, seed=None,
                             store_drafts=False, parallel=True, repeats="reuse",
                             reweight="delta", unkeyed="position",
                             residual="plain", proposal="race") -> DecodeBatch:
    """Decode many prompts in one compiled call (prompts in parallel with ``prange``).

    Parameters
    ----------
    target, draft, decoder, L, B, key, window, max_new_tokens
        As in :func:`specbound.sim.speculative_decode`.
        :class:`~specbound.sim.models.SyntheticLM` and
        :class:`~specbound.sim.models.MarkovLM` (or a
        :class:`~specbound.sim.models.CachedLM` of one, evaluated through its model) run
        compiled; other models run prompt by prompt through ``speculative_decode``.
    prompts : 2-D array of int, sequence of token sequences, or PromptSet
        One prompt per row (lengths may differ).
    seed : None, int, SeedSequence, Generator or sequence of seeds
        The unkeyed randomness: one seed per prompt (e.g. ``PromptSet.seeds``), or one
        seed split into the prompts' seeds by :func:`specbound._validation.split_seeds`
        (the children ``SeedSequence(seed).spawn(n)``, without advancing a SeedSequence).
        None: the seeds of a ``PromptSet``, otherwise 0.
    store_drafts : bool
        Keep the realised drafts of every block (memory ``max_new_tokens * B * L`` per
        prompt).
    repeats, reweight, unkeyed, residual, proposal
        The decoder options of :func:`specbound.sim.speculative_decode` (all run compiled
        but ``proposal="uniform"``, whose prompts run one by one in the Python block loop).
    parallel : bool
        Prompts under ``prange`` on Numba's threads (``numba.set_num_threads``); False runs
        them on the calling thread without starting the thread pool.  Under Numba's OpenMP
        threading layer a process that has started the pool must not ``fork`` and use it
        again: code that decodes before forking worker processes (process-pool sweeps)
        should pass False.  The results are the same either way.

    Returns
    -------
    DecodeBatch
        ``batch[i]`` equals ``speculative_decode(target, draft, prompts[i], decoder, L=L,
        B=B, key=key, window=window, max_new_tokens=max_new_tokens, seed=seeds[i])`` (with
        the same options) field by field (the drafts when ``store_drafts``), for any number
        of threads.

    Raises
    ------
    ValueError
        As :func:`~specbound.sim.speculative_decode`, and ``prompts`` empty or not integer
        sequences, ``seed`` of the wrong length.
    """
    rows = prompt_rows(prompts)
    n = len(rows)
    seeds = prompt_seeds(seed, prompts, n)
    store = as_bool(store_drafts, "store_drafts")
    parallel = as_bool(parallel, "parallel")
    # validated once (the spec looked up and the key hashed once), the prompts one by one
    target, draft, args = decode_run_args(
        target, draft, decoder, L=L, B=B, key=key, max_new_tokens=max_new_tokens,
        window=window, repeats=repeats, reweight=reweight, unkeyed=unkeyed, residual=residual,
        proposal=proposal)
    arrs = [validate_prompt(r, target.vocab_size, f"prompts[{i}]") for i, r in enumerate(rows)]
    check_batch_size(arrs, args.N, args.B * args.L if store else 0)
    check_decode_cost(target, args, arrs, batch=True, store_drafts=store)
    rngs = [as_rng(s, f"seed[{i}]") for i, s in enumerate(seeds)]
    states = [_C.pcg_state(g) for g in rngs]
    results = _C.decode_prompts(
        target, draft, arrs, args,
        None if any(s is None for s in states) else np.stack(states), store_drafts=store,
        unwrap_cached=True, parallel=parallel)
    if results is None:
        results = [speculative_decode(target, draft, a, args.spec.name, L=args.L, B=args.B,
                                      key=args.key, window=args.window,
                                      max_new_tokens=args.N, seed=g, repeats=args.repeats,
                                      reweight=args.reweight, unkeyed=args.unkeyed,
                                      residual=args.residual, proposal=args.proposal)
                   for a, g in zip(arrs, rngs, strict=True)]
    return batch_from_results(results, store)


def batch_from_results(results, store) -> DecodeBatch:
    r0 = results[0]
    fields = {f: tuple(getattr(r, f) for r in results) for f in _RAGGED}
    if not store:
        fields["drafts"] = tuple(() for _ in results)
    fields.update({f: np.array([getattr(r, f) for r in results], dtype=np.int64)
                   for f in _SCALAR})
    return DecodeBatch(**fields, decoder=r0.decoder, L=r0.L, B=r0.B, watermark=r0.watermark,
                       skipped=tuple(r.skipped for r in results),
                       decision_skipped=tuple(r.decision_skipped for r in results),
                       unkeyed=r0.unkeyed)

