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
        Token budgets (>= 1, each once), each at most the length of the longest sequence of
        ``U_wm``: a budget longer than every sequence is refused (``ValueError`` naming ``T_eval``)
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
        integers, repeated, or longer than every sequence; ``fpr`` outside (0, 1); ``null`` unknown
        or ``"empirical"`` without ``U_null``; invalid score parameters.
    """
    wm = _as_sequences(U_wm, "U_wm")
    raw = (np.atleast_1d(asarray_named(T_eval, "T_eval"))
           if not isinstance(T_eval, str | bytes) else None)
    if raw is None or raw.ndim != 1 or raw.size == 0 or raw.dtype.kind not in "iu":
        raise ValueError(f"T_eval: must be positive integers, got {T_eval!r}")
    Ts = as_int_array(raw, "T_eval", min_value=1)
    uniq, counts = np.unique(Ts, return_counts=True)
    if counts.max() > 1:  # one row per budget: a repeated one would repeat its row
        raise ValueError(f"T_eval: {int(uniq[counts.argmax()])} is given twice (each budget "
                         "once)")
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


# ----------------------------------------------------------------------------------------
# likelihood-ratio scores (they need the model's next-token law at every scored position)
# ----------------------------------------------------------------------------------------

#: the scores that need the model's next-token distribution at every scored position
#: (``score=`` of :func:`llr_token_scores` and of the detectors with a model)
LLR_SCORES = ("llr", "robust_llr")
#: the unbiased reweightings ``R_E`` whose likelihood ratio the LLR scores use:
#: ``"delta"`` (DeltaGumbel: the exponential race) and ``"gamma"`` (the gamma-reweighting)
LLR_REWEIGHTS = ("delta", "gamma")
#: null methods of :func:`llr_log_pvalue`: ``"exact"`` (plain LLR, delta reweighting),
#: ``"ville"`` (plain LLR, any reweighting: the bound ``e^{-S}``), ``"chernoff"`` (robust
#: LLR, delta reweighting: the Chernoff bound with the exact per-token null laws)
LLR_NULL_METHODS = ("exact", "ville", "chernoff")

__all__ += ["LLR_NULL_METHODS", "LLR_REWEIGHTS", "LLR_SCORES", "llr_log_pvalue",
            "llr_null_laws", "llr_token_scores", "reweighted_distribution",
            "robust_llr_levels"]


def _as_llr_inputs(P, tokens, U, *, need_u: bool = True, normalize: bool = False):
    """Validate ``P`` (M, V), ``tokens`` (M,) and ``U`` (M, V) of the LLR functions."""
    Pa = as_prob(P, "P", ndim=(1, 2), normalize=normalize)
    P2 = np.atleast_2d(Pa)
    M, V = P2.shape
    tok = as_int_array(tokens, "tokens", min_value=0, max_value=V - 1).reshape(-1)
    if tok.size != M:
        raise ValueError(f"tokens: {tok.size} tokens for {M} rows of P")
    U2 = None
    if need_u:
        Ua, _ = as_real_array(U, "U")
        U2 = np.atleast_2d(Ua)
        if U2.shape != P2.shape:
            raise ValueError(f"U: shape {Ua.shape} differs from the shape {Pa.shape} of P")
        if not np.all(np.isfinite(U2)) or np.any((U2 <= 0.0) | (U2 >= 1.0)):
            raise ValueError("U: keyed uniforms must lie strictly inside (0, 1)")
    return P2, tok.astype(np.int64), U2


def _as_radii(radius):
    """``radius`` of the robust LLR: one float or a sequence, each in [0, 1)."""
    arr = np.atleast_1d(as_real_array(radius, "radius")[0]).astype(np.float64)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError("radius: must be a number or a non-empty 1-D sequence of numbers")
    if not np.all(np.isfinite(arr)) or np.any((arr < 0.0) | (arr >= 1.0)):
        raise ValueError(f"radius: every radius must lie in [0, 1), got {arr.tolist()}")
    return arr


def _one_radius(radius) -> float:
    """One radius in [0, 1) (a number or a one-element sequence)."""
    arr = _as_radii(radius)
    if arr.size != 1:
        raise ValueError(f"radius: must be one number here, got {arr.size}")
    return float(arr[0])


def _reweight_rows(P2, U2, reweight):
    """``R_E(P)`` row by row (validated input)."""
    M, V = P2.shape
    if reweight == "delta":
        with np.errstate(divide="ignore"):
            s = np.where(P2 > 0, -np.log(U2) / np.where(P2 > 0, P2, 1.0), np.inf)
        out = np.zeros_like(P2)
        out[np.arange(M), np.argmin(s, axis=1)] = 1.0
        return out
    order = np.argsort(U2, axis=1, kind="stable")
    b = np.cumsum(np.take_along_axis(P2, order, axis=1), axis=1)
    b /= b[:, -1:]
    a = np.concatenate([np.zeros((M, 1)), b[:, :-1]], axis=1)
    val = np.maximum(np.maximum(2.0 * b - 1.0, 0.0) - np.maximum(2.0 * a - 1.0, 0.0), 0.0)
    out = np.empty_like(P2)
    np.put_along_axis(out, order, val, axis=1)
    return out


def reweighted_distribution(P, U, reweight: str = "delta", *,
                            normalize: bool = False) -> np.ndarray:
    """The watermarked next-token law ``R_E(P)`` under the keyed uniforms ``U``.

    The two unbiased reweightings of Hu, Chen, Wu, Wu, Zhang & Huang 2023 (arXiv:2310.10669,
    §4.1.2) on this package's keyed source (``U[v] = prf_uniform(label, v, 0)``, one row per
    context), used for speculative sampling by Hu & Huang 2024 (arXiv:2410.20418):

    - ``"delta"`` (DeltaGumbel): the point mass at ``argmin_{v: P(v) > 0} -log U[v] / P(v)``
      (the exponential race of Liu, Wan, Gao & Gündüz 2026, arXiv:2609.21858, Alg. 2; first
      index on ties, as the decoders);
    - ``"gamma"``: order the tokens by ``U`` ascending; token ``v`` covers ``[a_v, b_v)`` of
      the cumulative law along that order and receives ``max(2 b_v - 1, 0) - max(2 a_v - 1,
      0)`` (the first half of [0, 1) dropped, the second doubled).

    Both are unbiased: over uniformly random ``U``, ``E[R_E(P)(v)] = P(v)`` for every ``v``.

    Parameters
    ----------
    P : array_like of float
        Probability vector (1-D) or rows of them (2-D, one per context).
    U : array_like of float
        Keyed uniforms of every token, same shape as ``P``, strictly inside (0, 1).
    reweight : {"delta", "gamma"}
    normalize : bool, default False
        Rescale the rows of ``P`` to sum to 1.

    Returns
    -------
    numpy.ndarray
        Same shape as ``P``; every row is a probability vector that vanishes where ``P``
        does.

    Raises
    ------
    ValueError
        ``P`` not probability vectors; ``U`` of another shape or outside (0, 1);
        ``reweight`` unknown.
    """
    reweight = as_choice(reweight, "reweight", LLR_REWEIGHTS)
    Pa = as_prob(P, "P", ndim=(1, 2), normalize=normalize)
    P2, _, U2 = _as_llr_inputs(Pa, np.zeros(np.atleast_2d(Pa).shape[0], dtype=np.int64), U)
    out = _reweight_rows(P2, U2, reweight)
    return out if Pa.ndim == 2 else out[0]


def _level(P2, Q2, pos, r, a, upper):
    """One clipping level per row (validated input; see :func:`robust_llr_levels`).

    ``upper``: ``hi`` solving ``g(u) = Σ (Q - u P)_+ = a`` (g decreasing, breakpoints at the
    ratios in descending order); otherwise ``lo`` solving ``h(l) = Σ (l P - Q)_+ = a`` (h
    increasing, breakpoints ascending).  With ``s = +1`` for ``hi`` and ``-1`` for ``lo``
    the function at the k-th breakpoint is ``s (Q_<k - r_k P_<k)``, and the level on the
    last piece where it stays ``<= a`` is ``(Q_<=k - s a) / P_<=k``."""
    s = 1.0 if upper else -1.0
    key = np.where(pos, r, -np.inf if upper else np.inf)
    order = np.argsort(-key if upper else key, axis=1, kind="stable")
    rs = np.take_along_axis(key, order, axis=1)
    Ps = np.take_along_axis(np.where(pos, P2, 0.0), order, axis=1)
    Qs = np.take_along_axis(np.where(pos, Q2, 0.0), order, axis=1)
    cP, cQ = np.cumsum(Ps, axis=1), np.cumsum(Qs, axis=1)
    prevP = np.concatenate([np.zeros((P2.shape[0], 1)), cP[:, :-1]], axis=1)
    prevQ = np.concatenate([np.zeros((P2.shape[0], 1)), cQ[:, :-1]], axis=1)
    with np.errstate(invalid="ignore"):
        G = np.where(np.isfinite(rs), s * (prevQ - rs * prevP), np.inf)
    k = np.sum(G <= a, axis=1) - 1  # last breakpoint with G <= a (G is non-decreasing)
    rows = np.arange(P2.shape[0])
    return (cQ[rows, k] - s * a) / cP[rows, k]


def _levels(P2, Q2, a):
    """``(lo, hi, trivial)`` per row for one radius ``a`` (validated input; see
    :func:`robust_llr_levels`)."""
    pos = P2 > 0
    r = np.where(pos, Q2 / np.where(pos, P2, 1.0), 0.0)
    hi = _level(P2, Q2, pos, r, a, True)
    lo = _level(P2, Q2, pos, r, a, False)
    return lo, hi, lo >= hi


def robust_llr_levels(P, Q, radius, *, normalize: bool = False):
    """Clipping levels ``(lo, hi)`` of the maximin (robust) likelihood ratio.

    Hu, Chen, Wu, Wu, Zhang & Huang 2023 (arXiv:2310.10669, §5.3, App. B.5): the detector
    guards against a watermarked law that differs from the computed one ``Q = R_E(P)`` by
    up to ``radius = a`` in total variation.  The least-favourable law in that ball is
    ``Q*(v) = P(v) clip(Q(v)/P(v), lo, hi)`` (Huber's clipped likelihood ratio), with ``hi``
    solving ``Σ_v (Q(v) - hi P(v))_+ = a`` (mass ``a`` taken from the tokens of highest
    ratio) and ``lo`` solving ``Σ_v (lo P(v) - Q(v))_+ = a`` (mass ``a`` given to the
    lowest); the robust score of token ``x`` is ``log(Q*(x)/P(x))``.  When ``lo >= hi``
    (equivalently ``TV(P, Q) <= a``) the ball contains ``P`` itself, nothing can be told
    apart, and the score is 0.  ``a = 0`` gives ``lo = min ratio``, ``hi = max ratio`` (the
    plain LLR).  Only tokens with ``P(v) > 0`` enter (``Q`` vanishes where ``P`` does for
    both reweightings).

    Parameters
    ----------
    P, Q : array_like of float
        Probability vectors (1-D) or rows of them (2-D), same shape; ``Q`` must vanish where
        ``P`` does.
    radius : float
        ``a`` in [0, 1).
    normalize : bool, default False
        Rescale ``P`` and ``Q`` to sum to 1.

    Returns
    -------
    (lo, hi, trivial) : tuple of float or numpy.ndarray
        The clipping levels of the likelihood ratio ``Q/P`` (not its log) and whether the
        row is trivial (``lo >= hi``: score 0).

    Raises
    ------
    ValueError
        ``P``/``Q`` not probability vectors or of different shapes, ``Q > 0`` where
        ``P = 0``, ``radius`` outside [0, 1).
    """
    Pa = as_prob(P, "P", normalize=normalize)
    Qa = as_prob(Q, "Q", normalize=normalize)
    if Pa.shape != Qa.shape:
        raise ValueError(f"Q: shape {Qa.shape} differs from the shape {Pa.shape} of P")
    if np.any((Pa == 0) & (Qa > 0)):
        raise ValueError("Q: must vanish where P does (a reweighting of P)")
    a = _one_radius(radius)
    lo, hi, triv = _levels(np.atleast_2d(Pa), np.atleast_2d(Qa), a)
    if Pa.ndim == 1:
        return float(lo[0]), float(hi[0]), bool(triv[0])
    return lo, hi, triv


def _scores_from_q(P2, tok, Q2, a, reweight="delta"):
    """Per-token (robust) LLR of the observed tokens given ``R_E(P)`` rows (validated).

    For the gamma reweighting the ratio is capped at its exact bound 2: ``R_G(P)(x)`` is
    a difference of cumulative sums, which can exceed ``2 P(x)`` by rounding when ``P(x)``
    is tiny."""
    rows = np.arange(P2.shape[0])
    px, qx = P2[rows, tok], Q2[rows, tok]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(px > 0, qx / np.where(px > 0, px, 1.0), 1.0)
        if reweight == "gamma":
            ratio = np.minimum(ratio, 2.0)
        if a > 0.0:
            lo, hi, triv = _levels(P2, Q2, a)
            ratio = np.where(triv, 1.0, np.clip(ratio, lo, hi))
        out = np.log(ratio)
    return np.where(px > 0, out, 0.0)


def _parse_llr(score, reweight, radius):
    score = as_choice(score, "score", LLR_SCORES)
    reweight = as_choice(reweight, "reweight", LLR_REWEIGHTS)
    if score == "llr":
        if radius is not None:
            raise ValueError("radius: only for score='robust_llr'")
        radii = np.zeros(1)
    else:
        if radius is None:
            raise ValueError("radius: required for score='robust_llr' (the total-variation "
                             "radius a in [0, 1), or a sequence of them)")
        radii = _as_radii(radius)
    return score, reweight, radii


def llr_token_scores(P, tokens, U, *, score: str = "llr", reweight: str = "delta",
                     radius=None, normalize: bool = False) -> np.ndarray:
    """Per-token likelihood-ratio scores ``log(R_E(P)(x_t) / P(x_t))`` and their robust form.

    Hu, Chen, Wu, Wu, Zhang & Huang 2023 (arXiv:2310.10669, §5.2-5.3); the scores of Hu &
    Huang 2024 (arXiv:2410.20418) for the DeltaGumbel and gamma reweightings.  Unlike the
    pivot scores of :data:`SCORES` they need the model's next-token law ``P_t`` at every
    scored position and the keyed uniforms of *every* token there (``R_E(P_t)`` is a
    function of all of them).

    - ``"llr"``: ``s_t = log R_E(P_t)(x_t) - log P_t(x_t)``.  With the delta reweighting it
      is ``-log P_t(x_t)`` when ``x_t`` is the race winner and ``-inf`` otherwise; with the
      gamma reweighting it lies in ``[-inf, log 2]``.
    - ``"robust_llr"``: the maximin variant, ``log clip(R_E(P_t)(x_t)/P_t(x_t), lo, hi)``
      with the levels of :func:`robust_llr_levels` for the total-variation radius
      ``radius`` (0 on a trivial row); finite for every ``radius > 0``.

    A position whose token has ``P_t(x_t) = 0`` scores 0: ``R_E(P_t)`` vanishes there for
    every key, so the token says nothing about the key.

    Parameters
    ----------
    P : array_like of float, shape (M, V)
        The model's next-token law at each scored position (1-D for one position).
    tokens : array_like of int, shape (M,)
        The observed tokens ``x_t`` (ids below ``V``).
    U : array_like of float, shape (M, V)
        The keyed uniforms of every token at each position, strictly inside (0, 1).
    score : {"llr", "robust_llr"}
    reweight : {"delta", "gamma"}
    radius : float or sequence of float, optional
        ``robust_llr`` only (required there): radii in [0, 1).
    normalize : bool, default False
        Rescale the rows of ``P`` to sum to 1.

    Returns
    -------
    numpy.ndarray
        Shape (M,) for one radius (and for ``"llr"``), (R, M) for R radii.

    Raises
    ------
    ValueError
        Shapes that disagree, ``P`` not probability rows, ``U`` outside (0, 1), a token id
        out of range, an unknown ``score``/``reweight``, ``radius`` missing, given to
        ``"llr"`` or outside [0, 1).
    """
    score, reweight, radii = _parse_llr(score, reweight, radius)
    P2, tok, U2 = _as_llr_inputs(P, tokens, U, normalize=normalize)
    Q2 = _reweight_rows(P2, U2, reweight)
    out = np.stack([_scores_from_q(P2, tok, Q2, float(a), reweight) for a in radii])
    return out[0] if (score == "llr" or np.ndim(radius) == 0) else out


def llr_null_laws(P, tokens, *, radius=0.0, normalize: bool = False):
    """Exact per-token H0 laws of the delta-reweighting (robust) LLR: ``(values, probs)``.

    Under H0 the keyed uniforms are fresh and independent of the text, so the race winner
    ``w`` at position ``t`` has law ``P_t`` whatever the observed token ``x = x_t``.  With
    ``Q = δ_w`` the levels of :func:`robust_llr_levels` are ``hi = (1 - a)/P(w)`` and
    ``lo = a/(1 - P(w))``, trivial iff ``P(w) >= 1 - a``, so the score takes the value

    - ``log((1 - a)/P(x))`` if ``w = x`` (``-log P(x)`` for ``a = 0``),
    - ``log(a/(1 - P(w)))`` if ``w ≠ x`` (``-inf`` for ``a = 0``),
    - ``0`` if ``P(w) >= 1 - a`` (and at every ``w`` when ``P(x) = 0``),

    with probability ``P(w)``: row ``t`` of the result is the law over the ``V`` possible
    winners (entries with ``P(w) = 0`` have probability 0).

    Note ``E_H0[e^{s_t}] = (1 - a) + a Σ_{w ≠ x} P(w)/(1 - P(w))`` (non-trivial rows), which
    exceeds 1 for some ``(P, x)`` when ``a > 0``: ``e^{-S}`` is *not* a valid p-value of the
    robust score against text written without the key (it is valid when ``x ~ P``, the
    average of that expression over ``x`` being 1); :func:`llr_log_pvalue` uses these exact
    laws instead.

    Parameters
    ----------
    P : array_like of float, shape (M, V)
    tokens : array_like of int, shape (M,)
    radius : float
        ``a`` in [0, 1) (0: the plain LLR).
    normalize : bool, default False
        Rescale the rows of ``P`` to sum to 1.

    Returns
    -------
    (values, probs) : tuple of numpy.ndarray, each (M, V)
        ``values[t, w]`` is the score when ``w`` wins (``-inf`` possible for ``a = 0``),
        ``probs[t, w] = P_t(w)``.
    """
    P2, tok, _ = _as_llr_inputs(P, tokens, None, need_u=False, normalize=normalize)
    a = _one_radius(radius)
    return _delta_laws(P2, tok, a)


def _delta_laws(P2, tok, a):
    rows = np.arange(P2.shape[0])
    px = P2[rows, tok][:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        other = np.log(a / (1.0 - P2)) if a > 0 else np.full(P2.shape, -np.inf)
        match = np.log((1.0 - a) / np.where(px > 0, px, 1.0))
    vals = np.where(np.arange(P2.shape[1])[None, :] == tok[:, None], match, other)
    if a > 0:
        vals = np.where(P2 >= 1.0 - a, 0.0, vals)
    vals = np.where(px > 0, vals, 0.0)
    vals = np.where(P2 > 0, vals, 0.0)
    return vals, P2.copy()


def _chernoff_log_sf(vals, probs, S):
    """``min_{λ >= 0} Σ_t K_t(λ) - λ S`` with ``K_t(λ) = log Σ_w probs e^{λ vals}`` (finite
    values only; -inf atoms contribute nothing to the MGF for λ > 0)."""
    from scipy import optimize

    logp = np.log(np.where(probs > 0, probs, 1.0))
    live = (probs > 0) & np.isfinite(vals)
    top = float(np.sum(np.max(np.where(live, vals, -np.inf), axis=1)))
    if not np.isfinite(top) or S > top + 1e-12 * max(1.0, abs(top)):
        return -math.inf  # above the largest possible sum
    lw = np.where(live, logp, -np.inf)
    v0 = np.where(live, vals, 0.0)

    def K(lam):
        return float(np.sum(special.logsumexp(lw + lam * v0, axis=1)))

    def dK(lam):
        z = lw + lam * v0
        w = np.exp(z - special.logsumexp(z, axis=1, keepdims=True))
        return float(np.sum(w * v0))

    # at λ = 0+ the -inf atoms are dropped: K(0+) = Σ log P(finite); mean of the rest
    if dK(0.0) >= S:
        return min(0.0, K(0.0))
    if S >= top:
        # the sum reaches the top only when every token takes its largest value
        return float(np.sum(special.logsumexp(
            np.where(live & (v0 >= np.max(np.where(live, v0, -np.inf), axis=1,
                                            keepdims=True)), lw, -np.inf), axis=1)))
    hi = 1.0
    while dK(hi) < S:
        hi *= 2.0
        if hi > 1e8:
            break
    lam = optimize.brentq(lambda x: dK(x) - S, 0.0, hi, xtol=1e-12, rtol=1e-12)
    return min(0.0, K(lam) - lam * S)


def llr_log_pvalue(P, tokens, U, *, score: str = "llr", reweight: str = "delta",
                   radius=None, method: str | None = None, normalize: bool = False):
    """Log p-value of a likelihood-ratio score under H0 (keys independent of the text).

    Returns ``(S, log_p)`` where ``S`` is the score summed over the M positions (the
    largest over the radii for several radii).  H0 is this package's: the keyed uniforms
    of distinct context windows are fresh uniforms independent of the text (Liu, Wan, Gao
    & Gündüz 2026, arXiv:2609.21858, App. E), so given the text the per-token scores are
    independent with laws fixed by ``(P_t, x_t)``.  Methods (``method=None`` picks the
    first that applies):

    - ``"exact"`` (``llr``, delta): ``S`` is finite only when every token is its race winner,
      which has H0 probability ``Π_t P_t(x_t) = e^{-S}`` (positions with ``P_t(x_t) = 0``
      excluded); so ``log p = -S`` exactly, and ``log p = 0`` when ``S = -inf``.
    - ``"ville"`` (``llr``, both reweightings): unbiasedness gives ``E_H0[e^{s_t}] =
      E_E[R_E(P_t)(x_t)]/P_t(x_t) = 1``, so ``P(S' >= S) <= e^{-S}`` (Markov's inequality on
      the product; Hu et al. 2023, §5.1): a valid, conservative p-value.  The only method for
      the gamma reweighting, whose per-token law has no closed form.
    - ``"chernoff"`` (``robust_llr``, delta): ``min_{λ >= 0} Σ_t K_t(λ) - λ S`` with the
      exact per-token cumulant generating functions ``K_t`` of :func:`llr_null_laws`: a valid
      upper bound on the exact p-value (within a factor of order ``√M`` of it in the
      moderate tail, the usual Chernoff gap).  Several radii: the smallest bound plus
      ``log R`` (Bonferroni over the R radii, as the authors' code does).

    The robust score with the gamma reweighting has no method here: its per-token null law
    has no closed form; :func:`specbound.sim.detect` calibrates it by Monte Carlo over fresh
    keys (``null="montecarlo"``).

    Parameters
    ----------
    P, tokens, U, score, reweight, radius
        As in :func:`llr_token_scores`.
    method : {"exact", "ville", "chernoff"}, optional
    normalize : bool, default False
        Rescale the rows of ``P`` to sum to 1.

    Returns
    -------
    (float, float)
        ``(S, log_p)``, ``log_p`` in ``[-inf, 0]``.

    Raises
    ------
    ValueError
        As in :func:`llr_token_scores`; a ``method`` that does not apply to the score and
        reweighting.
    """
    score, reweight, radii = _parse_llr(score, reweight, radius)
    allowed = {("llr", "delta"): ("exact", "ville"), ("llr", "gamma"): ("ville",),
               ("robust_llr", "delta"): ("chernoff",), ("robust_llr", "gamma"): ()}[
        (score, reweight)]
    if not allowed:
        raise ValueError("score: 'robust_llr' with reweight='gamma' has no closed-form null "
                         "here; use specbound.sim.detect(..., null='montecarlo')")
    if method is None:
        method = allowed[0]
    method = as_choice(method, "method", allowed)
    P2, tok, U2 = _as_llr_inputs(P, tokens, U, normalize=normalize)
    Q2 = _reweight_rows(P2, U2, reweight)
    if score == "llr":
        S = float(_scores_from_q(P2, tok, Q2, 0.0, reweight).sum())
        return S, (0.0 if S == -math.inf else min(0.0, -S))
    best_S, best_lp = -math.inf, 0.0
    for a in radii:
        S = float(_scores_from_q(P2, tok, Q2, float(a)).sum())
        vals, probs = _delta_laws(P2, tok, float(a))
        lp = _chernoff_log_sf(vals, probs, S)
        best_S = max(best_S, S)
        best_lp = min(best_lp, lp)
    return best_S, min(0.0, best_lp + math.log(radii.size))
