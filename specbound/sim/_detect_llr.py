"""Likelihood-ratio detection with the model: the scores of Hu et al. 2023 (arXiv:2310.10669,
§5.2-5.3) and Hu & Huang 2024 (arXiv:2410.20418) on this package's keyed source.

The pivot scores of :func:`specbound.sim.detect` need the key and the tokens alone.  The
likelihood-ratio scores also need the **model**: at every scored position ``t`` the detector
recomputes the target's next-token law ``P_t`` (from the synthetic model here; from the
target's forward in :func:`specbound.llm.detect`) and the keyed uniforms of *every* token of
the context, ``U_t[v] = prf_uniform(context_label(key, tokens[:t], window), v, 0)``, forms the
watermarked law ``R_E(P_t)`` of the decoder's reweighting and scores
``s_t = log(R_E(P_t)(x_t)/P_t(x_t))`` (``"llr"``) or its clipped maximin form
(``"robust_llr"``; :func:`specbound.theory.llr_token_scores`).

Positions: every context window is scored once, at its first occurrence (the score of a
position is a function of all the keyed uniforms of its window, so two positions sharing a
window would be dependent under H0 even with different tokens).  With ``window=None`` every
position is scored.

Null (``null=``):

- ``"auto"`` (default): :func:`specbound.theory.llr_log_pvalue`'s closed-form method -- exact
  for ``llr`` with the delta reweighting, the bound ``e^{-S}`` for ``llr`` with the gamma
  reweighting, the Chernoff bound with the exact per-token laws for ``robust_llr`` with the
  delta reweighting; ``robust_llr`` with the gamma reweighting falls back to Monte Carlo.
- ``"montecarlo"``: ``n_null`` replicate keys (fresh i.i.d. uniforms for every token of every
  scored position, from ``seed``); ``p = (1 + #{S' >= S})/(n_null + 1)``.  Under H0 the
  observed score and the replicates are exchangeable, so this p-value is exactly valid
  (``P(p <= α) <= α`` for every α); it cannot go below ``1/(n_null + 1)``, and its standard
  error as an estimate of the exact conditional p-value is ``√(p(1 - p)/n_null)``.  With
  several radii the replicates use the maximum over the radii directly (no Bonferroni).
"""

from __future__ import annotations

import math

import numpy as np

from specbound._validation import as_choice, as_int, as_rng, check_alloc
from specbound.sim.models import as_language_model, next_distributions
from specbound.sim.prf import prf_uniform_numpy
from specbound.theory import watermark as _wm

#: null methods of the likelihood-ratio detection (``null=``)
NULLS = ("auto", "montecarlo")
#: default number of replicate keys of the Monte Carlo null
DEFAULT_N_NULL = 999


def parse_llr_params(score, params: dict) -> dict:
    """Validate the options of a likelihood-ratio detection; returns them normalized."""
    params = dict(params)
    out = {"score": score}
    if "model" not in params or params["model"] is None:
        raise ValueError(f"model: required for score={score!r} (the likelihood ratio needs "
                         f"the target's next-token law at every scored position)")
    out["model"] = as_language_model(params.pop("model"), "model")
    out["reweight"] = as_choice(params.pop("reweight", "delta"), "reweight",
                                _wm.LLR_REWEIGHTS)
    radius = params.pop("radius", None)
    _wm._parse_llr(score, out["reweight"], radius)  # validates radius against score
    out["radius"] = radius
    out["null"] = as_choice(params.pop("null", "auto"), "null", NULLS)
    out["n_null"] = as_int(params.pop("n_null", DEFAULT_N_NULL), "n_null", min_value=1,
                           max_value=10**7)
    out["seed"] = params.pop("seed", 0)
    as_rng(out["seed"], "seed")
    if params:
        bad = sorted(params)[0]
        raise ValueError(f"{bad}: unexpected parameter for score={score!r}")
    return out


def _mc_scores(P, tok, reweight, radii, n_null, rng):
    """Replicate sums ``S'`` (max over radii) under fresh keys: shape (n_null,)."""
    M, V = P.shape
    chunk = max(1, int(4_000_000 // max(1, M * V)))
    out = np.empty(n_null)
    for start in range(0, n_null, chunk):
        n = min(chunk, n_null - start)
        U = rng.random((n * M, V))
        U = np.where(U > 0.0, U, 0.5)  # a zero draw (probability 2**-53) is not a uniform in (0,1)
        Pn = np.tile(P, (n, 1))
        tn = np.tile(tok, n)
        Q = _wm._reweight_rows(Pn, U, reweight)
        best = np.full(n, -np.inf)
        for a in radii:
            s = _wm._scores_from_q(Pn, tn, Q, float(a), reweight).reshape(n, M).sum(axis=1)
            best = np.maximum(best, s)
        out[start:start + n] = best
    return out


def detect_llr(tok, positions, labels, score, params):
    """Likelihood-ratio detection of one sequence (validated tokens, scored positions and
    their context labels); returns ``(score, log_pvalue, anlppt, n_scored, pivots)``, the
    fields of a :class:`~specbound.sim.detect.DetectionResult` (built by the caller)."""
    opts = parse_llr_params(score, params)
    model = opts["model"]
    V = int(model.vocab_size)
    if tok.size and int(tok.max()) >= V:
        raise ValueError(f"tokens: token id {int(tok.max())} is outside the model's "
                         f"vocabulary of {V}")
    M = int(positions.size)
    if M == 0:
        return 0.0, 0.0, float("nan"), 0, np.zeros(0)
    check_alloc("tokens", M * V * 4, what="the model's laws and the keyed uniforms of every "
                                          "scored position")
    P = next_distributions(model, [np.ascontiguousarray(tok[:t]) for t in positions])
    P = np.asarray(P, dtype=np.float64)
    P /= P.sum(axis=1, keepdims=True)
    x = tok[positions]
    U = prf_uniform_numpy(labels[:, None], np.arange(V)[None, :], 0)
    pivots = U[np.arange(M), x].copy()
    reweight, radius = opts["reweight"], opts["radius"]
    radii = np.zeros(1) if score == "llr" else _wm._as_radii(radius)
    Q = _wm._reweight_rows(P, U, reweight)
    S = max(float(_wm._scores_from_q(P, x, Q, float(a), reweight).sum()) for a in radii)
    method = opts["null"]
    if method == "auto" and not (score == "robust_llr" and reweight == "gamma"):
        _, lp = _wm.llr_log_pvalue(P, x, U, score=score, reweight=reweight, radius=radius)
    else:
        reps = _mc_scores(P, x, reweight, radii, opts["n_null"], as_rng(opts["seed"]))
        lp = math.log((1 + int(np.sum(reps >= S))) / (opts["n_null"] + 1))
    lp = float(min(0.0, lp))
    return S, lp, -lp / M + 0.0, M, pivots
