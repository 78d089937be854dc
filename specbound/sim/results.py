"""Result types of the simulators: the estimates (re-exported from :mod:`specbound.results`)
and the result of a sequence decoder (:class:`DecodeResult`, :class:`WatermarkConfig`).

The decoding result types live here, below both block loops (the Python loop of
:mod:`specbound.sim.decode` and the compiled loop of :mod:`specbound.sim._compiled`), so that
neither loop imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from specbound.results import (
    ConfidenceInterval,
    Estimate,
    EstimateBatch,
    ResultBatch,
    proportion_ci,
)

__all__ = ["ConfidenceInterval", "DecodeResult", "Estimate", "EstimateBatch", "ResultBatch",
           "WatermarkConfig", "proportion_ci"]


@dataclass(frozen=True)
class WatermarkConfig:
    """The keyed-randomness configuration a sequence was decoded with.

    Attributes
    ----------
    key_id : str or None
        Non-secret fingerprint of the key (:func:`specbound.sim.prf.key_id`); None for the
        unkeyed decoders (``ar``, ``vsps``, ``pfr_nowm``, ``invariant``, ``specinfer``).
    window : int or None
        The watermark's context window (None: the whole prefix).  Detection must use the
        same window; :func:`specbound.sim.detect.detect` takes it from the result.
    mask_repeats : bool
        Whether repeated context windows used unkeyed clocks (``repeats == "mask"``).
    repeats : {"reuse", "mask", "skip"}
        How repeated context windows were decoded
        (:data:`specbound.sim.decode.REPEATS`); derived from ``mask_repeats`` when not given.
        :func:`specbound.sim.detect.detect` skips the repeated windows of a ``"skip"``
        result.
    reweight : {"delta", "gamma"}
        The reweighting of ``basic_uwm`` / ``mws`` / ``mse`` / ``mse_pseudo``
        (:data:`specbound.sim.decode.REWEIGHTS`).
    residual : {"plain", "keyed"}
        ``mse_pseudo``'s correction after a rejection (:data:`specbound.sim.decode.RESIDUALS`).
    """

    key_id: str | None
    window: int | None
    mask_repeats: bool
    repeats: str | None = None
    reweight: str = "delta"
    residual: str = "plain"

    def __post_init__(self):
        if self.repeats is None:
            object.__setattr__(self, "repeats", "mask" if self.mask_repeats else "reuse")
        object.__setattr__(self, "mask_repeats", self.repeats == "mask")


@dataclass(frozen=True, eq=False)
class DecodeResult:
    """Output of :func:`specbound.sim.speculative_decode`.

    Attributes
    ----------
    tokens : ndarray of int64
        Prompt followed by the generated tokens (as transformers' ``generate`` returns them).
    prompt_length : int
        Number of prompt tokens at the start of ``tokens``.
    emitted_per_block : ndarray of int64
        Tokens emitted by every block (accepted drafts plus the correction or bonus token), so
        ``emitted_per_block.mean()`` is the AATPS; ``ar`` and ``basic_uwm`` give all 1s.
    accepted_per_block : ndarray of int64
        Accepted drafts of every block (``emitted_per_block`` minus the correction or bonus
        token; 0 for ``ar``/``basic_uwm``).
    nu : ndarray of int64
        One entry per verification decision, in order (module docstring): the number of
        drafts consistent with the emitted prefix when the decoder decided (MPFR
        multiplicity, GLS / SpecInfer active-set size, 1 for single-draft decoders).
    decision_accepted : ndarray of bool
        Whether each decision accepted a draft.
    decision_position : ndarray of int64
        Index among the generated tokens of the token each decision emitted.
    n_target_evals, n_draft_evals : int
        Target and draft forward passes: one target pass per block (per token for
        ``ar``/``basic_uwm``), one draft pass per draft depth (tree levels are batched).
    n_target_contexts, n_draft_contexts : int
        Next-token distributions the passes compute (a batched tree pass counts every
        context of the tree, depth 0..ell for the target).
    pivots : ndarray of float64
        Per generated position, the keyed pivot ``prf_uniform(context_label(key, c_t,
        window), w_t, 0)`` for keyed decoders (the detector's ``U_t``); NaN for unkeyed
        decoders.
    drafts : tuple of ndarray
        Per block, the realised draft sequences, shape ``(B, ell)`` (tree decoders: the B
        root-to-leaf paths with multiplicity, sorted); empty for ``ar``/``basic_uwm``.
    decoder : str
        Decoder name.
    L, B : int
        Lookahead and number of drafts.
    watermark : WatermarkConfig
        Key fingerprint, window, repeated-context handling and reweighting of the run.
    skipped : ndarray of bool
        Per generated position, whether its context window was a repeat decoded without the
        watermark (``repeats="skip"``; all False otherwise).
    decision_skipped : ndarray of bool
        Per decision (aligned with :attr:`nu`), whether it was a skipped repeat (vanilla
        speculative sampling with an unkeyed coin, acceptance ``1 - TV``).
    unkeyed : {"position", "fresh"}
        The unkeyed clocks of ``pfr_nowm`` (:data:`specbound.sim.decode.UNKEYED`).
    """

    tokens: np.ndarray
    prompt_length: int
    emitted_per_block: np.ndarray
    accepted_per_block: np.ndarray
    nu: np.ndarray
    decision_accepted: np.ndarray
    decision_position: np.ndarray
    n_target_evals: int
    n_draft_evals: int
    n_target_contexts: int
    n_draft_contexts: int
    pivots: np.ndarray
    drafts: tuple = field(repr=False)
    decoder: str = ""
    L: int = 1
    B: int = 1
    watermark: WatermarkConfig = WatermarkConfig(None, None, False)
    skipped: np.ndarray | None = field(default=None, repr=False)
    decision_skipped: np.ndarray | None = field(default=None, repr=False)
    unkeyed: str = "position"

    def __post_init__(self):
        n_gen = int(np.asarray(self.tokens).size) - int(self.prompt_length)
        if self.skipped is None:
            object.__setattr__(self, "skipped", np.zeros(max(n_gen, 0), dtype=bool))
        if self.decision_skipped is None:
            object.__setattr__(self, "decision_skipped",
                               np.zeros(np.asarray(self.nu).size, dtype=bool))

    @property
    def generated(self) -> np.ndarray:
        """The generated tokens (``tokens[prompt_length:]``)."""
        return self.tokens[self.prompt_length:]

    @property
    def aatps(self) -> float:
        """Average accepted tokens per step: mean of ``emitted_per_block`` (NaN if none)."""
        if self.emitted_per_block.size == 0:
            return float("nan")
        return float(self.emitted_per_block.mean())

    def block_of_decision(self) -> np.ndarray:
        """Index of the block of every decision (int64, aligned with :attr:`nu`)."""
        ends = np.cumsum(self.emitted_per_block)
        return np.searchsorted(ends, self.decision_position, side="right").astype(np.int64)
