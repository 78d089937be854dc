"""Watermark detection: scores, exact null p-values, ANLPPT, TPR at a fixed FPR.

The detector sees, at every scored position ``t``, the keyed **pivot**
``U_t = r_t(w_t) = exp(-E_{w_t,1})`` (Liu, Wan, Gao & Gündüz 2026, arXiv:2609.21858, §4.1,
App. E): the keyed uniform of the observed token in its context.  Under H0 (text written
without the key) the pivots are i.i.d. U(0, 1); under the Gumbel / exponential-race watermark
with next-token law ``P`` the pivot has CDF ``sum_v P(v) r**(1/P(v))`` (ibid., App. E.3),
which piles mass near 1.

Every score is a sum ``S = sum_t h(U_t)`` of a per-token transform ``h`` (the names of
:data:`SCORES`):

========== ============================================== ==========================
score      ``h(r)``                                        null law of ``S`` (M terms)
========== ============================================== ==========================
aaronson   ``-log(1 - r)``                                 Gamma(M, 1), exact
u          ``r``                                           Irwin--Hall(M), exact
li         ``log(k r^{Δ/(1-Δ)} + 1[q>0] r^{(1-q)/q})``      tilted lattice convolution
lattimore  ``min(ε^{-1/2}, (1-r)^{-1/2}) - (2 - √ε)``      tilted lattice convolution
========== ============================================== ==========================

(Aaronson 2022; Hu & Huang 2024 for the U-score; Li et al. 2025 for the optimal Gumbel score;
Lattimore 2026 for the truncated power law.)  p-values are upper tails ``P_H0(S' >= S)``
returned as natural logs (they reach far below ``1e-308`` for long watermarked texts), and
ANLPPT ``= -log(p) / M``.

Numerical methods, their accuracy and run time are documented in the private engine
:mod:`specbound.theory._nulls` (measured in ``tests/test_theory_watermark.py``).  In short:
the Gamma tail is exact (continued fraction in the far tail); the Irwin--Hall tail is exact
(log-space B-spline recursion, ``O(M^2)``) up to ``M = 1000`` scored tokens and above that a
second-order saddle-point approximation (``O(1)``, ``|Δ log p| <= 1e-6 max(1, |log p|)``),
so ``u_score_log_pvalue`` on a million pivots takes milliseconds; Li's and Lattimore's tails
come from a tilted lattice convolution (FFT) that stays accurate over the whole range of Δ
and ε, down to the smallest positive float.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import special

from specbound._validation import (
    INT64_MAX,
    as_choice,
    as_int,
    as_int_array,
    as_prob,
    as_real,
    as_real_array,
    asarray_named,
    check_alloc,
)
from specbound.theory._nulls import (
    DEFAULT_N_GRID,
    U_EXACT_MAX_M,
    from_engine_units,
    law_for,
    li_h_from_logu,
    li_scaled_from_logu,
)
from specbound.theory._nulls import (
    null_log_sf as _engine_log_sf,
)
from specbound.theory.divergences import entropy_rows

__all__ = [
    "SCORES",
    "aaronson_entropy_bound",
    "aaronson_log_pvalue",
    "aaronson_score",
    "anlppt",
    "expected_aaronson_score",
    "lattimore_log_pvalue",
    "lattimore_score",
    "li_log_pvalue",
    "li_score",
    "null_log_sf",
    "score_log_pvalue",
    "score_threshold",
    "token_scores",
    "tpr_at_fpr",
    "u_score",
    "u_score_log_pvalue",
]

#: the score names accepted by ``score=`` arguments
SCORES = ("aaronson", "u", "li", "lattimore")

__all__ += ["DEFAULT_N_GRID", "U_EXACT_MAX_M"]

_EULER_GAMMA = float(np.euler_gamma)


# ----------------------------------------------------------------------------------------
# validation
# ----------------------------------------------------------------------------------------


def _as_pivots(U, name: str = "U", *, allow_nd: bool = False) -> tuple[np.ndarray, bool]:
    """Validate pivots: 1-D (one sequence) or 2-D (rows are sequences), entries in (0, 1).

    Returns ``(U2, batched)`` with ``U2`` 2-D float64 (one row for 1-D input).
    """
    arr, _ = as_real_array(U, name)
    if not allow_nd and arr.ndim not in (1, 2):
        raise ValueError(f"{name}: must be 1-D or 2-D (rows are sequences), got shape {arr.shape}")
    if arr.size == 0 or (arr.ndim >= 1 and arr.shape[-1] == 0):
        raise ValueError(f"{name}: must not be empty (shape {arr.shape}); M >= 1 is needed")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name}: contains NaN or infinite entries")
    if np.any((arr <= 0.0) | (arr >= 1.0)):
        raise ValueError(
            f"{name}: pivots must lie strictly inside (0, 1) (min {arr.min():.3g}, "
            f"max {arr.max():.3g})"
        )
    if allow_nd:
        return arr, arr.ndim > 1
    batched = arr.ndim == 2
    return np.ascontiguousarray(np.atleast_2d(arr)), batched


def parse_score_params(score, params: dict) -> tuple[str, dict]:
    """Validate ``score`` and its parameters; returns ``(score, normalized params)``.

    The one parser of score options, shared with the detectors of :mod:`specbound.sim`:
    ``delta`` (Li), ``epsilon`` (Lattimore), ``method`` (U-score), ``n_grid`` (lattice null).
    """
    score = as_choice(score, "score", SCORES)
    params = dict(params)
    out: dict = {}
    if score == "li":
        if "delta" not in params:
            raise ValueError("delta: required for score='li' (the class max P <= 1 - delta)")
        out["delta"] = as_real(
            params.pop("delta"), "delta", low=0.0, high=1.0, low_open=True, high_open=True
        )
    elif score == "lattimore":
        if "epsilon" not in params:
            raise ValueError("epsilon: required for score='lattimore' (the truncation level)")
        out["epsilon"] = as_real(
            params.pop("epsilon"), "epsilon", low=0.0, high=1.0, low_open=True, high_open=True
        )
    if score == "u":
        out["method"] = as_choice(params.pop("method", "exact"), "method", ("exact", "chernoff"))
    if score in ("li", "lattimore"):
        n_grid = as_int(params.pop("n_grid", DEFAULT_N_GRID), "n_grid", min_value=2**10)
        check_alloc("n_grid", n_grid, 8 * 8, what="the FFT work arrays of the lattice null")
        out["n_grid"] = n_grid
    if params:
        bad = sorted(params)[0]
        raise ValueError(f"{bad}: unexpected parameter for score={score!r}")
    return score, out


# ----------------------------------------------------------------------------------------
# per-token transforms h(r)
# ----------------------------------------------------------------------------------------


def _h_lattimore(U, epsilon: float):
    c = 2.0 - math.sqrt(epsilon)
    return np.minimum(epsilon**-0.5, (1.0 - U) ** -0.5) - c


def _h(U, score: str, params: dict):
    if score == "aaronson":
        return -np.log1p(-U)
    if score == "u":
        return np.array(U, dtype=np.float64, copy=True)
    if score == "li":
        return li_h_from_logu(np.log(U), params["delta"])
    return _h_lattimore(U, params["epsilon"])


def token_scores(U, score: str = "aaronson", **params) -> np.ndarray:
    """Per-token scores ``h(U_t)`` of a watermark score (module docstring's table).

    Parameters
    ----------
    U : array_like of float
        Pivots, any shape, every entry strictly inside (0, 1).
    score : {"aaronson", "u", "li", "lattimore"}
        ``"aaronson"``: ``-log(1 - r)``; ``"u"``: ``r``; ``"li"``: Li et al. (2025)
        ``h*_{gum,Δ}`` (needs ``delta``); ``"lattimore"``: Lattimore (2026) truncated power law
        (needs ``epsilon``).  See :func:`li_score` and :func:`lattimore_score`.
    **params
        ``delta`` (li) or ``epsilon`` (lattimore), both in (0, 1).

    Returns
    -------
    numpy.ndarray
        Same shape as ``U``.

    Raises
    ------
    ValueError
        ``U`` outside (0, 1), NaN/inf or empty; ``score`` unknown; ``delta``/``epsilon``
        missing or outside (0, 1); an unexpected parameter.
    """
    arr, _ = _as_pivots(U, allow_nd=True)
    score, p = parse_score_params(score, params)
    return _h(arr, score, p)


# ----------------------------------------------------------------------------------------
# scores
# ----------------------------------------------------------------------------------------


def _score_sum(U, score, params):
    U2, batched = _as_pivots(U)
    score, p = parse_score_params(score, params)
    S = _h(U2, score, p).sum(axis=1)
    return S, U2.shape[1], batched, score, p


def _pivots_log_sf(U, score, params):
    """``(log p, M, batched)`` of the pivots ``U``: the sums go to the null engine in its own
    units (for Li, ``Σ (h - log k)/a`` computed directly from ``U``, exact for every Δ)."""
    U2, batched = _as_pivots(U)
    score, p = parse_score_params(score, params)
    M = U2.shape[1]
    if score == "li":
        S = li_scaled_from_logu(np.log(U2), p["delta"]).sum(axis=1)
        lp = _engine_log_sf(S, np.full(S.shape, M), score, p, engine_units=True)
    else:
        S = _h(U2, score, p).sum(axis=1)
        lp = _engine_log_sf(S, np.full(S.shape, M), score, p)
    return lp, M, batched


def _out(x, batched):
    x = np.asarray(x, dtype=np.float64)
    return x if batched else float(x.reshape(-1)[0])


def aaronson_score(U):
    """Aaronson's score ``S_A = Σ_t -log(1 - U_t)``.

    Aaronson (2022); Liu, Wan, Gao & Gündüz 2026, arXiv:2609.21858, §4.1, App. E.1.

    Parameters
    ----------
    U : array_like of float
        Pivots in (0, 1): 1-D (one sequence, returns a float) or 2-D (rows are sequences,
        returns one score per row).

    Returns
    -------
    float or numpy.ndarray
        Under H0 ``S_A ~ Gamma(M, 1)`` with ``M`` the number of pivots.

    Raises
    ------
    ValueError
        ``U``: empty, not 1-D/2-D, NaN/inf, or an entry outside the open interval (0, 1)
        (``U = 1`` would give an infinite score).
    """
    S, _, batched, _, _ = _score_sum(U, "aaronson", {})
    return _out(S, batched)


def u_score(U):
    """U-score ``S_U = Σ_t U_t`` (Hu & Huang 2024; Liu, Wan, Gao & Gündüz 2026, arXiv:2609.21858,
    App. E.1).

    Same input conventions as :func:`aaronson_score`; under H0 ``S_U`` is Irwin--Hall(M).
    """
    S, _, batched, _, _ = _score_sum(U, "u", {"method": "exact"})
    return _out(S, batched)


def li_score(U, delta):
    """Li et al. (2025) optimal Gumbel score ``S = Σ_t h*_{gum,Δ}(U_t)``.

    Liu, Wan, Gao & Gündüz 2026, arXiv:2609.21858, App. E.3.

    ``h(r) = log(k r^{Δ/(1-Δ)} + 1[q > 0] r^{(1-q)/q})`` with ``k = ⌊1/(1-Δ)⌋`` and
    ``q = 1 - k(1-Δ)``: the log-density of the pivot under the least-favourable law
    ``(1-Δ, ..., 1-Δ, q, 0, ...)`` of the class ``max P <= 1 - Δ``.

    Parameters
    ----------
    U : array_like of float
        Pivots in (0, 1), 1-D or 2-D (rows are sequences).
    delta : float
        Δ in (0, 1).

    Returns
    -------
    float or numpy.ndarray
        The sum over tokens (per row for 2-D input).  Each term is at most
        ``log(k + 1[q > 0])``.

    Notes
    -----
    Evaluated as ``logaddexp(log k + a log r, b log r)`` (no underflow for tiny ``r``).
    When ``1/(1-Δ)`` is an integer up to rounding, ``q`` computed in floating point can be a
    tiny positive number instead of 0; ``q < 1e-12`` is snapped to 0.  The score is
    continuous in Δ across these points (e.g. Δ = 2/3 gives ``3 r^2`` either way), so the
    snap changes nothing but the rounding.

    Raises
    ------
    ValueError
        ``U`` invalid (see :func:`aaronson_score`); ``delta`` not in (0, 1).
    """
    S, _, batched, _, _ = _score_sum(U, "li", {"delta": delta})
    return _out(S, batched)


def lattimore_score(U, epsilon):
    """Lattimore (2026) truncated power-law score (Liu, Wan, Gao & Gündüz 2026, arXiv:2609.21858,
    App. E.4).

    ``h(r) = min(ε^{-1/2}, (1 - r)^{-1/2}) - (2 - √ε)``; the centring makes
    ``E_H0[h(U)] = 0`` (``E min(ε^{-1/2}, V^{-1/2}) = √ε + 2(1 - √ε)`` for V ~ U(0,1)).

    Parameters
    ----------
    U : array_like of float
        Pivots in (0, 1), 1-D or 2-D (rows are sequences).
    epsilon : float
        ε in (0, 1); the score saturates at ``ε^{-1/2} - 2 + √ε`` for ``U >= 1 - ε``.

    Returns
    -------
    float or numpy.ndarray
        The sum over tokens (per row for 2-D input).

    Raises
    ------
    ValueError
        ``U`` invalid; ``epsilon`` not in (0, 1).
    """
    S, _, batched, _, _ = _score_sum(U, "lattimore", {"epsilon": epsilon})
    return _out(S, batched)


# ----------------------------------------------------------------------------------------
# p-values
# ----------------------------------------------------------------------------------------


def null_log_sf(S, M, score: str = "aaronson", **params):
    """Log of the H0 upper tail ``P_H0(S' >= S)`` of a score summed over ``M`` tokens.

    Parameters
    ----------
    S : float or array_like of float
        Observed score values (the sums returned by :func:`aaronson_score` etc.).
    M : int or array_like of int
        Number of scored tokens (>= 1), broadcast against ``S``.
    score : {"aaronson", "u", "li", "lattimore"}
        Which score; the method per score is in the module docstring.
    **params
        ``delta`` (li), ``epsilon`` (lattimore), ``method`` (u: ``"exact"`` Irwin--Hall or
        ``"chernoff"`` bound), ``n_grid`` (li, lattimore: FFT window, default ``2**17``).

    Returns
    -------
    float or numpy.ndarray
        Natural log of the p-value, in ``[-inf, 0]`` (``-inf`` for a score above the
        largest possible value).  A float when both ``S`` and ``M`` are scalars.

    Raises
    ------
    ValueError
        ``S`` non-finite or not real numbers; ``M`` not integers in ``[1, 2**63 - 1]`` (an
        unsigned ``2**64 - 1`` is refused, not wrapped to ``-1``) or shapes that do not
        broadcast; invalid ``score`` / parameters.

    Notes
    -----
    For Li's score with a tiny Δ the sum ``S`` itself carries only the digits float64 keeps
    of ``Σ h`` (whose body is of order Δ); :func:`score_log_pvalue` and :func:`li_log_pvalue`
    compute the sum from the pivots in the engine's own units and keep every digit.
    """
    score, p = parse_score_params(score, params)
    Sa, _ = as_real_array(S, "S")
    if not np.all(np.isfinite(Sa)):
        raise ValueError("S: contains NaN or infinite entries")
    Ma = as_int_array(M, "M", min_value=1, max_value=INT64_MAX)
    try:
        Sb, Mb = np.broadcast_arrays(Sa, Ma)
    except ValueError:
        raise ValueError(f"M: shape {Ma.shape} does not broadcast with S {Sa.shape}") from None
    res = _engine_log_sf(Sb, Mb, score, p).reshape(Sb.shape)
    return float(res) if res.ndim == 0 else res


def score_log_pvalue(U, score: str = "aaronson", **params):
    """Log p-value of the pivots ``U`` under H0 (i.i.d. U(0,1) pivots) for a score.

    Parameters
    ----------
    U : array_like of float
        Pivots in (0, 1): 1-D (one sequence, returns a float) or 2-D (rows are sequences of
        equal length ``M``, returns an array).
    score, **params
        As in :func:`null_log_sf`.

    Returns
    -------
    float or numpy.ndarray
        ``log P_H0(S' >= S(U))`` (natural log).
    """
    lp, _, batched = _pivots_log_sf(U, score, params)
    return _out(lp, batched)


def aaronson_log_pvalue(U):
    """Exact log p-value of Aaronson's score: ``log Γ(M, S_A)/Γ(M)``.

    Liu, Wan, Gao & Gündüz 2026, arXiv:2609.21858, App. E.1, Algorithm 8.

    Under H0, ``S_A ~ Gamma(M, 1)``.  Computed in log space (continued fraction where
    ``gammaincc`` underflows), so it stays finite for arbitrarily strong evidence.
    Input conventions as in :func:`aaronson_score`.
    """
    return score_log_pvalue(U, "aaronson")


def u_score_log_pvalue(U, method: str = "exact"):
    """Log p-value of the U-score ``S_U = Σ U_t``.

    Hu & Huang (2024); Liu, Wan, Gao & Gündüz 2026, arXiv:2609.21858, App. E.1.

    Parameters
    ----------
    U : array_like of float
        Pivots in (0, 1), 1-D or 2-D (rows are sequences).
    method : {"exact", "chernoff"}
        ``"exact"``: the Irwin--Hall upper tail -- for ``M <= U_EXACT_MAX_M`` (1000) pivots
        per sequence the log-space B-spline recursion (exact to ~1e-13 relative, ``O(M^2)``),
        above it the second-order saddle-point approximation (``O(1)`` per sequence,
        ``|Δ log p| <= 1e-6 max(1, |log p|)``, validated against the recursion for
        ``1000 < M <= 3000``); ``"chernoff"``: the bound
        ``inf_{λ>=0} M log((e^λ - 1)/λ) - λ S_U`` (>= the exact value).
    """
    return score_log_pvalue(U, "u", method=method)


def li_log_pvalue(U, delta, *, n_grid: int = DEFAULT_N_GRID):
    """Log p-value of Li et al.'s score (tilted lattice convolution; see module docstring).

    Accurate over the whole range ``0 < Δ < 1`` (down to the smallest positive float): the
    sum is computed from the pivots in the engine's units ``(h - log k)/a``, where the body
    of the null law is ``-Exp(1)`` whatever Δ (:mod:`specbound.theory._nulls`).
    """
    return score_log_pvalue(U, "li", delta=delta, n_grid=n_grid)


def lattimore_log_pvalue(U, epsilon, *, n_grid: int = DEFAULT_N_GRID):
    """Log p-value of Lattimore's score (tilted lattice convolution; see module docstring).

    Accurate over the whole range ``0 < ε < 1`` (down to the smallest positive float): each
    token is capped where a larger value could not change the event ``S >= s``
    (:mod:`specbound.theory._nulls`), so the span ``ε^{-1/2}`` of the law never swamps the
    lattice.
    """
    return score_log_pvalue(U, "lattimore", epsilon=epsilon, n_grid=n_grid)


def anlppt(U, score: str = "aaronson", **params):
    """Average negative log p-value per token, ``-log(p) / M``.

    Liu, Wan, Gao & Gündüz 2026, arXiv:2609.21858, §6, App. E.

    Parameters
    ----------
    U : array_like of float
        Pivots in (0, 1): 1-D (returns a float) or 2-D (rows are sequences).
    score : {"aaronson", "u", "li", "lattimore"}
        The score whose p-value is used (ANLPPT-U of the paper is ``score="u"`` with
        ``method="chernoff"``, the bound the paper states; ``method="exact"`` is the exact
        Irwin--Hall value).
    **params
        As in :func:`null_log_sf`.

    Returns
    -------
    float or numpy.ndarray
        Non-negative; ``inf`` if the p-value is exactly 0.
    """
    lp, M, batched = _pivots_log_sf(U, score, params)
    return _out(-lp / M + 0.0, batched)  # + 0.0: no negative zero


# ----------------------------------------------------------------------------------------
# expected Aaronson score and its entropy bound
# ----------------------------------------------------------------------------------------


def expected_aaronson_score(P, *, normalize: bool = False):
    """Expected per-token Aaronson score under the Gumbel watermark with next-token law P.

    ``E[-log(1 - U_Y)] = Σ_v P(v) (ψ(1 + 1/P(v)) + γ)`` (Fernandez et al. 2023; Liu, Wan,
    Gao & Gündüz 2026, arXiv:2609.21858, App. E), where ``Y = argmax_v U_v^{1/P(v)}`` is the
    watermarked token.

    Parameters
    ----------
    P : array_like of float
        Probability vector (1-D, returns a float) or batch (2-D, rows are contexts).
        Entries with ``P(v) = 0`` contribute nothing (the limit ``P ψ(1 + 1/P) -> 0``).
    normalize : bool, default False
        Rescale the rows of ``P`` to sum to 1.

    Returns
    -------
    float or numpy.ndarray
        At least 1 (equal to 1 for a point mass: ``ψ(2) + γ = 1``; rows summing to 1 only
        within the input tolerance are clipped at 1) and at least
        :func:`aaronson_entropy_bound`.

    Raises
    ------
    ValueError
        ``P`` not a probability vector (see ``specbound._validation.as_prob``).
    """
    Pa = as_prob(P, "P", normalize=normalize)
    batched = Pa.ndim == 2
    P2 = np.atleast_2d(Pa)
    out = np.zeros(P2.shape)
    pos = P2 > 0
    pv = P2[pos]
    inv = 1.0 / np.maximum(pv, 1e-300)
    val = np.where(pv > 1e-300, pv * (special.digamma(1.0 + inv) + _EULER_GAMMA), 0.0)
    out[pos] = val
    return _out(np.maximum(out.sum(axis=1), 1.0), batched)


def aaronson_entropy_bound(P, *, normalize: bool = False):
    """Lower bound ``1 + (π²/6 - 1) H(P)`` on :func:`expected_aaronson_score` (H in nats).

    Zeros of ``P`` contribute 0 to the entropy.  Same conventions as
    :func:`expected_aaronson_score`.
    """
    Pa = as_prob(P, "P", normalize=normalize)
    batched = Pa.ndim == 2
    H = entropy_rows(np.atleast_2d(Pa))
    return _out(1.0 + (math.pi**2 / 6.0 - 1.0) * H, batched)


# ----------------------------------------------------------------------------------------
# thresholds and TPR at a fixed FPR
# ----------------------------------------------------------------------------------------


def _as_sequences(U, name: str) -> list[np.ndarray]:
    """A 2-D array (rows) or a sequence of 1-D arrays (ragged) -> list of validated rows."""
    if isinstance(U, np.ndarray) and U.ndim == 2:
        arr, _ = _as_pivots(U, name)
        return list(arr)
    if isinstance(U, np.ndarray) and U.ndim == 1 and U.dtype != object:
        raise ValueError(f"{name}: must be 2-D (rows are sequences) or a list of 1-D arrays")
    try:
        rows = list(U)
    except TypeError:
        msg = f"{name}: must be 2-D (rows are sequences) or a list of 1-D arrays"
        raise ValueError(msg) from None
    if not rows:
        raise ValueError(f"{name}: must contain at least one sequence")
    out = []
    for r in rows:
        a, batched = _as_pivots(r, name)
        if batched:
            raise ValueError(f"{name}: each sequence must be 1-D")
        out.append(a[0])
    return out


def empirical_threshold(null_scores, fpr: float = 0.01) -> float:
    """Empirical detection threshold from scores of unwatermarked sequences.

    Returns the ``(k+1)``-th largest null score with ``k = floor(fpr n)``; detection is
    ``S > threshold``, so exactly the ``k`` largest null scores are detected when there are no
    ties: the empirical false-positive rate on the ``n`` null scores is ``k/n <= fpr`` (at
    most that with ties).  The one empirical threshold of the package (:func:`tpr_at_fpr`
    uses it).
    """
    S0 = as_real_array(null_scores, "null_scores")[0].reshape(-1)
    if S0.size == 0:
        raise ValueError("null_scores: must contain at least one score")
    if not np.all(np.isfinite(S0)):
        raise ValueError("null_scores: contains NaN or infinite entries")
    fpr = as_real(fpr, "fpr", low=0.0, high=1.0, low_open=True, high_open=True)
    S0 = np.sort(S0)[::-1]
    k = int(math.floor(fpr * S0.size))
    return float(S0[min(k, S0.size - 1)])


def score_threshold(M: int, *, score: str = "aaronson", fpr: float = 0.01, **params) -> float:
    """Score threshold ``s*`` with ``P_H0(S >= s*) = fpr`` for M tokens (exact null).

    Detection at false-positive rate ``fpr`` is ``S >= s*`` (equivalently ``p <= fpr``).
    Found by Brent's method on :func:`null_log_sf` (``scipy.stats.gamma.isf`` for Aaronson).
    Returns ``inf`` (never reject) when even the largest possible score has H0 probability
    above ``fpr`` (Lattimore's atom: ``ε^M >= fpr``).  Raises ``ValueError`` naming ``M``,
    ``fpr`` or a score parameter when invalid.

    ``score`` and ``fpr`` are keyword-only, in the order of :func:`tpr_at_fpr`.
    """
    from scipy import optimize, stats

    M = as_int(M, "M", min_value=1, max_value=INT64_MAX)
    fpr = as_real(fpr, "fpr", low=0.0, high=1.0, low_open=True, high_open=True)
    score, p = parse_score_params(score, params)
    if score == "aaronson" and fpr > 1e-250:
        return float(stats.gamma.isf(fpr, M))
    target = math.log(fpr)
    lattice = score in ("li", "lattimore")

    def f(s):
        return float(_engine_log_sf(np.array([s]), np.array([M]), score, p,
                                    engine_units=lattice)[0]) - target

    if score == "aaronson":
        lo, hi = float(M), float(M) + 10.0
        while f(hi) > 0:
            hi = lo + 2 * (hi - lo)
    elif score == "u":
        lo, hi = M / 2.0, float(M)
        if f(lo) < 0:
            return lo
    else:  # Li (engine units) and Lattimore
        law = law_for(score, p)
        lo = M * law.mean()
        top = M * law.x_top
        if f(lo) < 0:
            return float(from_engine_units(score, p, lo, M))
        if law.log_atom > -math.inf and f(top) >= 0:
            # the atom at the top (Lattimore: P(S = M x_top) = ε^M >= fpr): no score
            # threshold reaches level fpr, so the level-fpr test never rejects
            return math.inf
        # bracket the root by doubling (the top M x_top can be astronomically far)
        step = M * law.scale
        hi = min(lo + step, top)
        while hi < top and f(hi) >= 0:
            step *= 2.0
            hi = min(lo + step, top)
        root = optimize.brentq(f, lo, hi, xtol=1e-10 * max(1.0, abs(hi)), rtol=1e-12)
        return float(from_engine_units(score, p, root, M))
    return float(optimize.brentq(f, lo, hi, xtol=1e-10 * max(1.0, abs(hi)), rtol=1e-12))


def tpr_at_fpr(
    U_wm,
    T_eval,
    *,
    score: str = "aaronson",
    fpr: float = 0.01,
    U_null=None,
    null: str | None = None,
    **params,
) -> pd.DataFrame:
    """True-positive rate at a fixed false-positive rate against the token budget T_eval.

    For every budget ``T`` in ``T_eval`` each sequence is scored on its first ``T`` pivots
    (sequences with fewer than ``T`` pivots are left out of that row) and declared
    watermarked when its score reaches the threshold of the level-``fpr`` test
    (Liu, Wan, Gao & Gündüz 2026, arXiv:2609.21858, §6 and App. D.5: TPR@1%FPR vs T_eval).

    Parameters
    ----------
    U_wm : 2-D array_like or sequence of 1-D arrays
        Pivots of the watermarked sequences (rows are sequences; ragged allowed), in (0, 1).
    T_eval : int or sequence of int
        Token budgets (>= 1), each at most the length of the longest sequence of ``U_wm``:
        a budget longer than every sequence is refused (``ValueError`` naming ``T_eval``)
        rather than reported as a row with ``n_sequences = 0`` and ``tpr = NaN``, which
        would silently propagate into averages and plots.
    score : {"aaronson", "u", "li", "lattimore"}
        The score (parameters in ``**params`` as in :func:`null_log_sf`).
    fpr : float
        Target false-positive rate in (0, 1) (default 1%).
    U_null : 2-D array_like or sequence of 1-D arrays, optional
        Pivots of unwatermarked sequences for an empirical threshold.  At least 10,000
        sequences with at least ``T`` pivots are required for every ``T``.
    null : {"exact", "empirical"}, optional
        ``"exact"`` (default when ``U_null`` is None): threshold from the exact H0 law of the
        score (:func:`score_threshold`; Gamma for Aaronson, Irwin--Hall for U, the lattice
        convolution for Li and Lattimore).  ``"empirical"`` (default when ``U_null`` is
        given): the threshold is the ``⌊fpr n⌋``-th largest null score, and detection is
        ``S >`` threshold, so the empirical FPR on the null set is at most ``fpr``.
        (For ``score="u"`` the threshold always uses the exact Irwin--Hall law, never the
        Chernoff bound.)

    Returns
    -------
    pandas.DataFrame
        One row per ``T`` with columns ``T_eval``, ``n_sequences``, ``tpr``, ``tpr_stderr``
        (binomial), ``threshold`` (in score units), ``method`` (``"exact"`` or
        ``"empirical"``), ``n_null`` (null sequences used; 0 for exact) and ``fpr``.

    Raises
    ------
    ValueError
        ``U_wm``/``U_null`` invalid or with too few sequences; ``T_eval`` not positive
        integers or longer than every sequence; ``fpr`` outside (0, 1); ``null`` unknown
        or ``"empirical"`` without ``U_null``; invalid score parameters.
    """
    wm = _as_sequences(U_wm, "U_wm")
    raw = (np.atleast_1d(asarray_named(T_eval, "T_eval"))
           if not isinstance(T_eval, str | bytes) else None)
    if raw is None or raw.ndim != 1 or raw.size == 0 or raw.dtype.kind not in "iu":
        raise ValueError(f"T_eval: must be positive integers, got {T_eval!r}")
    Ts = as_int_array(raw, "T_eval", min_value=1)
    longest = max(r.size for r in wm)
    if Ts.max() > longest:
        raise ValueError(
            f"T_eval: a budget of {int(Ts.max())} tokens is longer than every sequence of U_wm "
            f"(the longest has {longest} pivots): its TPR would be estimated from 0 sequences"
        )
    fpr = as_real(fpr, "fpr", low=0.0, high=1.0, low_open=True, high_open=True)
    if null is None:
        null = "exact" if U_null is None else "empirical"
    null = as_choice(null, "null", ("exact", "empirical"))
    if null == "empirical" and U_null is None:
        raise ValueError("U_null: required for null='empirical'")
    score, p = parse_score_params(score, params)
    if score == "u" and p.get("method") == "chernoff":
        p["method"] = "exact"  # thresholds always come from the exact law
    nulls = _as_sequences(U_null, "U_null") if (null == "empirical") else None
    rows = []
    for T in (int(t) for t in Ts):
        seqs = [r[:T] for r in wm if r.size >= T]
        S = np.array([_h(r, score, p).sum() for r in seqs]) if seqs else np.zeros(0)
        if null == "exact":
            thr = score_threshold(T, score=score, fpr=fpr, **p)
            det = S >= thr
            n_null = 0
        else:
            nrows = [r[:T] for r in nulls if r.size >= T]
            if len(nrows) < 10_000:
                raise ValueError(
                    f"U_null: needs at least 10,000 sequences with >= {T} pivots, got {len(nrows)}"
                )
            S0 = np.array([_h(r, score, p).sum() for r in nrows])
            thr = empirical_threshold(S0, fpr)
            det = S > thr
            n_null = S0.size
        n = S.size
        tpr = float(det.mean())
        se = math.sqrt(tpr * (1 - tpr) / n)
        rows.append(
            {
                "T_eval": T,
                "n_sequences": n,
                "tpr": tpr,
                "tpr_stderr": se,
                "threshold": float(thr),
                "method": null,
                "n_null": n_null,
                "fpr": fpr,
            }
        )
    return pd.DataFrame(rows)
