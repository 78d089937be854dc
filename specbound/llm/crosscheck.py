"""Realised against predicted acceptance on a real model: the theory's side of a real run.

At every verification decision of a speculative decoder the simulator records the number
``nu`` of drafts consistent with the emitted prefix (:attr:`specbound.sim.DecodeResult.nu`);
given everything decided before, the decision accepts with probability
``exact_acceptance(p(c), q(c), DECODER_SCHEME[decoder], nu)`` at its context ``c`` (the
martingale argument of :func:`specbound.sim.acceptance_compensator`: 1 - TV for Alg. 1, the
exponential race for PFR (Liu, Wan, Gao & Gündüz 2026, arXiv:2609.21858, Alg. 2-3), Thm B.1's
PML expression for MPFR (Alg. 6), GLS / list coupling for INVARIANT (Rowan et al. 2025)).
Clocks must be fresh at every new context: use whole-prefix keyed labels (``window=None``),
under which no context repeats.

On a real model the target's and the draft's processed distributions at a decision context
are exactly the rows the decoder read.  :class:`ContextRecorder` keeps them in memory (pass it
as ``log=`` to :func:`specbound.llm.generate`, it has the ``record`` method of
:class:`~specbound.llm.DistributionLog`), and :func:`decision_acceptance` evaluates the
prediction of every decision on the union of the two supports (exact: a token of probability
0 under both models changes no formula), so the prediction costs no model forward.
:func:`block_crosscheck` turns the decisions into per-block realised and predicted accepted
drafts, whose differences are martingale differences (z-score of the AATPS).
"""

from __future__ import annotations

import numpy as np

from specbound._validation import as_int, as_int_array, as_real_array

__all__ = ["ContextRecorder", "block_crosscheck", "decision_acceptance"]


def _compact(v, name: str = "p") -> tuple[np.ndarray, np.ndarray]:
    v, _ = as_real_array(v, name, what="probabilities")
    if v.ndim != 1 or v.size == 0:
        raise ValueError(f"{name}: must be a non-empty 1-D distribution, got shape {v.shape}")
    if not np.all(np.isfinite(v)) or np.any(v < 0):
        raise ValueError(f"{name}: must hold finite non-negative probabilities")
    idx = np.flatnonzero(v > 0)
    return idx.astype(np.int64), v[idx].copy()


def _context_key(prompt_id, context, name: str) -> tuple:
    prompt_id = as_int(prompt_id, "prompt_id")
    ids = as_int_array(context, name, min_value=0)
    if ids.ndim != 1:
        raise ValueError(f"{name}: must be a 1-D sequence of token ids, got shape {ids.shape}")
    return prompt_id, tuple(int(t) for t in ids)


class ContextRecorder:
    """In-memory record of the target's and the draft's distributions at verified contexts.

    A ``log=`` target for :func:`specbound.llm.generate` / :class:`specbound.llm.PairBackend`:
    ``record(prompt_id, context_tokens, p, qs)`` keeps, per (prompt id, context), the nonzero
    entries of ``p`` and of the draft's ``q`` when the draft evaluated that context (the first
    record of a context is kept; a real model gives the same rows again).  Under top-k
    processing a row holds at most ``top_k`` entries.
    """

    def __init__(self):
        self._p: dict = {}
        self._q: dict = {}

    def record(self, prompt_id, context_tokens, p, qs) -> None:
        """Keep ``p`` and ``qs[0]`` (when given) at (``prompt_id``, ``context_tokens``)."""
        key = _context_key(prompt_id, context_tokens, "context_tokens")
        if isinstance(qs, str | bytes | dict) or not hasattr(qs, "__len__") or (
                isinstance(qs, np.ndarray) and qs.ndim == 0) or len(qs) > 1:
            raise ValueError("qs: must be a list of zero or one draft distribution")
        p_c = _compact(p, "p")
        q_c = _compact(qs[0], "qs[0]") if len(qs) else None
        if key not in self._p:
            self._p[key] = p_c
        if q_c is not None and key not in self._q:
            self._q[key] = q_c

    def __len__(self) -> int:
        return len(self._p)

    def clear(self) -> None:
        """Forget every recorded context."""
        self._p.clear()
        self._q.clear()

    def pair(self, prompt_id, context) -> tuple[np.ndarray, np.ndarray]:
        """``(p, q)`` of a recorded context on the union of their supports (each sums to 1
        up to rounding).  Raises ``ValueError`` (``context``) if the context, or the draft's
        distribution there, was not recorded."""
        key = _context_key(prompt_id, context, "context")
        if key not in self._p:
            raise ValueError(f"context: not recorded (prompt {key[0]}, length {len(key[1])})")
        if key not in self._q:
            raise ValueError(f"context: the draft's distribution was not recorded there "
                             f"(prompt {key[0]}, length {len(key[1])})")
        (pi, pv), (qi, qv) = self._p[key], self._q[key]
        tok = np.union1d(pi, qi)
        p = np.zeros(tok.size)
        q = np.zeros(tok.size)
        p[np.searchsorted(tok, pi)] = pv
        q[np.searchsorted(tok, qi)] = qv
        return p, q


def decision_acceptance(result, recorder: ContextRecorder, prompt_id=0):
    """The theory's acceptance probability of every verification decision of a real run.

    Parameters
    ----------
    result : DecodeResult or GenerationResult
        A run of a decoder of :data:`specbound.sim.DECODER_SCHEME` whose verified contexts
        ``recorder`` saw (``generate(..., log=recorder, prompt_id=prompt_id)``).
    recorder : ContextRecorder
    prompt_id : int, default 0
        The ``prompt_id`` the run was generated with.

    Returns
    -------
    pandas.DataFrame
        One row per decision (the order of ``result.nu``): ``block``, ``nu``, ``accepted``
        (bool), ``predicted`` (the exact conditional acceptance probability), ``skipped``.
        ``mpfr`` and ``invariant`` decisions with ``nu = 1`` use the exponential race;
        skipped repeats (``repeats="skip"``) use ``1 - TV``.  A run whose drafts had laws of
        their own (``result.per_draft``: an ``ngram`` draft with ``B > 1``, draft ``b`` the
        point mass on the ``b``-th distinct continuation) accepts exactly when the target's
        token is one the drafts at the context propose, so its decisions' probability is
        ``p`` of those tokens (the support of the recorded law there).

    Raises
    ------
    ValueError
        ``result`` is not a decoding result or its decoder has no per-context scheme
        (``ar``, ``basic_uwm``, ``specinfer``; ``mws`` with the gamma reweight:
        :meth:`specbound.sim.decoders.DecoderSpec.scheme_for`); a decision
        context was not recorded (named ``context``); a skipped ``mpfr`` decision with
        ``nu > 1``.
    """
    import pandas as pd

    from specbound.sim.decode import DECODER_SCHEME, DecodeResult
    from specbound.sim.decoders import DECODER_SPECS
    from specbound.theory import exact_acceptance

    if not isinstance(result, DecodeResult):
        raise ValueError(f"result: must be a DecodeResult, got {type(result).__name__}")
    if not isinstance(recorder, ContextRecorder):
        raise ValueError(f"recorder: must be a ContextRecorder, got {type(recorder).__name__}")
    prompt_id = as_int(prompt_id, "prompt_id")
    dec = result.decoder
    spec = DECODER_SPECS.get(dec)
    scheme = None if spec is None else spec.scheme_for(result.watermark.reweight)
    if scheme is None:
        delta_only = [n for n in DECODER_SCHEME
                      if DECODER_SPECS[n].scheme_for("gamma") is None]
        raise ValueError(f"result: decoder {dec!r} has no per-context acceptance scheme; "
                         f"supported: {sorted(DECODER_SCHEME)} ({', '.join(delta_only)} "
                         f"with the delta reweight)")
    toks = np.asarray(result.tokens)
    n0 = int(result.prompt_length)
    nus = np.asarray(result.nu, dtype=np.int64)
    skp = np.asarray(result.decision_skipped, dtype=bool)
    pairs = [recorder.pair(prompt_id, toks[:n0 + int(j)]) for j in result.decision_position]
    pred = np.empty(nus.size)
    if getattr(result, "per_draft", False):  # point masses of their own: p(proposed tokens)
        for i in np.flatnonzero(~skp):
            p, q = pairs[i]
            pred[i] = float(p[q > 0].sum() / p.sum())
        skp_only = [(1, skp)]
    else:
        skp_only = None
    groups = skp_only or [(nu, (nus == nu) & ~skp) for nu in np.unique(nus)] + [(1, skp)]
    for nu, sel in groups:
        if not sel.any():
            continue
        if sel is skp:
            if np.any(nus[skp] > 1):
                raise ValueError("result: skipped mpfr decisions with nu > 1 (recursive "
                                 "rejection) have no per-context closed form here")
            sch = "sd"
        else:
            sch = scheme if nu > 1 or scheme in ("sd", "exp_race") else "exp_race"
        rows = np.flatnonzero(sel)
        width = max(pairs[i][0].size for i in rows)
        P = np.zeros((rows.size, width))
        Q = np.zeros((rows.size, width))
        for k, i in enumerate(rows):
            p, q = pairs[i]
            P[k, :p.size] = p
            Q[k, :q.size] = q
        pred[rows] = np.atleast_1d(exact_acceptance(P, Q, sch, int(nu), normalize=True))
    return pd.DataFrame({"block": result.block_of_decision(), "nu": nus,
                         "accepted": np.asarray(result.decision_accepted, dtype=bool),
                         "predicted": pred, "skipped": skp})


def block_crosscheck(result, decisions):
    """Per-block realised and predicted accepted drafts of one run.

    ``decisions`` is :func:`decision_acceptance` of ``result``.  Returns a DataFrame with one
    row per block: ``block, emitted, accepted, predicted, n_decisions, diff`` where
    ``predicted`` is the sum of the block's decision probabilities and ``diff = accepted -
    predicted`` (a martingale difference: mean 0 under the theory, uncorrelated across
    blocks), so the predicted AATPS is ``mean(emitted - diff)`` and its z-score is
    ``mean(diff) / (std(diff) / sqrt(blocks))``.
    """
    import pandas as pd

    from specbound.sim.decode import DecodeResult

    if not isinstance(result, DecodeResult):
        raise ValueError(f"result: must be a DecodeResult, got {type(result).__name__}")
    if not isinstance(decisions, pd.DataFrame) or not {"block", "accepted", "predicted"} <= set(
            decisions.columns):
        raise ValueError("decisions: must be the DataFrame of decision_acceptance(result, ...) "
                         "(columns block, accepted, predicted)")
    emitted = np.asarray(result.emitted_per_block, dtype=np.int64)
    nb = emitted.size
    blk = as_int_array(decisions["block"].to_numpy(), "decisions", min_value=0,
                       max_value=max(nb - 1, 0))
    acc_w, _ = as_real_array(decisions["accepted"].to_numpy(dtype=float), "decisions")
    pr_w, _ = as_real_array(decisions["predicted"].to_numpy(dtype=float), "decisions")
    if not (np.all(np.isfinite(pr_w)) and np.all((pr_w >= 0) & (pr_w <= 1))):
        raise ValueError("decisions: predicted probabilities must lie in [0, 1]")
    acc = np.bincount(blk, weights=acc_w, minlength=nb)
    pr = np.bincount(blk, weights=pr_w, minlength=nb)
    nd = np.bincount(blk, minlength=nb)
    return pd.DataFrame({"block": np.arange(nb), "emitted": emitted,
                         "accepted": acc[:nb].astype(np.int64), "predicted": pr[:nb],
                         "n_decisions": nd[:nb], "diff": acc[:nb] - pr[:nb]})
