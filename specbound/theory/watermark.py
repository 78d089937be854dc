"""Watermark detection: scores, exact null p-values, ANLPPT, TPR at a fixed FPR (MATH.md §4).

The detector sees, at every scored position ``t``, the keyed **pivot**
``U_t = r_t(w_t) = exp(-E_{w_t,1})`` (seed 000 §4.1, App. E): the keyed uniform of the
observed token in its context.  Under H0 (text written without the key) the pivots are
i.i.d. U(0, 1); under the Gumbel / exponential-race watermark with next-token law ``P`` the
pivot has CDF ``sum_v P(v) r**(1/P(v))`` (seed 000 App. E.3), which piles mass near 1.

Every score is a sum ``S = sum_t h(U_t)`` of a per-token transform ``h``:

========== ============================================== ==========================
score      ``h(r)``                                        null law of ``S`` (M terms)
========== ============================================== ==========================
aaronson   ``-log(1 - r)``                                 Gamma(M, 1), exact
u          ``r``                                           Irwin--Hall(M), exact
li         ``log(k r^{Δ/(1-Δ)} + 1[q>0] r^{(1-q)/q})``      tilted lattice convolution
lattimore  ``min(ε^{-1/2}, (1-r)^{-1/2}) - (2 - √ε)``      tilted lattice convolution
========== ============================================== ==========================

p-values are upper tails ``P_H0(S' >= S)`` returned as natural logs (they reach far below
``1e-308`` for long watermarked texts), and ANLPPT ``= -log(p) / M``.

Numerical methods (accuracy measured in ``tests/test_theory_watermark.py``):

* **Aaronson**: ``log Q(M, S)`` with ``Q = gammaincc``; where ``Q < 1e-280`` (far tail,
  where ``gammaincc`` and ``scipy.stats.gamma.logsf`` underflow to 0 / ``-inf``) the
  Legendre continued fraction for ``Γ(M, S)`` is evaluated by the modified Lentz method in
  log space.  Agrees with mpmath to ~1e-13 relative in ``log p``.
* **U, exact**: the Irwin--Hall CDF by the B-spline recursion
  ``F_n(x) = [x F_{n-1}(x) + (n - x) F_{n-1}(x - 1)] / n`` carried out in log space.  Every
  step is a positive combination, so there is no cancellation (unlike the alternating sum
  ``Σ (-1)^k C(M,k) (x-k)^M / M!``, which loses all digits for large M); relative error
  ~ M x 1e-16.  Cost O(M^2) per sequence.  The upper tail uses the symmetry
  ``P(S >= s) = F_M(M - s)`` and ``1 - F_M(s)`` on the side where it is accurate.
* **U, Chernoff** (seed 000 App. E.1): ``inf_{λ>=0} exp(M log((e^λ - 1)/λ) - λ S)``, an
  upper bound on ``p`` (so a lower bound on ANLPPT), λ found by bisection.
* **Li and Lattimore**: exponentially tilted lattice convolution (:func:`_lattice_log_sf`).
  The per-token null law of ``X = h(U)`` is known exactly through its CDF
  (``F_X = h^{-1}``, ``h`` increasing; Newton's method inverts Li's ``h``, Lattimore's is
  explicit).  For a target ``s`` the law is tilted by ``e^{λx}`` with λ solving
  ``K'(λ) = s/M`` (the saddle point; ``K`` is the cumulant generating function, found by
  quadrature on a logit grid, which only steers the method), put on a lattice of step δ
  with the mass of every cell split between its two end points so that the cell's mean is
  kept, convolved M times by FFT on a window of ``±σ_λ(12√M + 50)`` around the tilted mean
  (widened, with a finer grid, when single tokens are heavy-tailed), and untilted exactly:
  ``P(S >= s) = exp(M K(λ) - λ s) E_λ[e^{-λ(S - s)}; S >= s]``.  One rung resolves every
  ``s`` within a few standard deviations of its centre, so a batch of scores needs a handful
  of FFTs.  The Lattimore law's atom of mass ε at its top value sits exactly on a lattice
  point (``P(S = M x_top) = ε^M`` is reproduced to 1e-12).  The error is second order in δ:
  with the default ``n_grid = 2**17`` the engine run on the U-score's law reproduces the
  exact Irwin--Hall tail to ``|Δ log p| <= 1e-5 max(1, |log p|)`` for M <= 1000 down to
  ``log p = -3600`` (e.g. 1.6e-3 at ``log p = -257``, M = 1000), Li's and Lattimore's
  single-token tails (known exactly) to 1e-5, Li's two-token tail (by quadrature) to 1e-4
  relative, and Monte Carlo tails within 5 standard errors (tests/test_theory_watermark.py).
  For very small ε (1e-8) Lattimore's per-token law is heavy-tailed up to ``ε^{-1/2}`` and
  the accuracy drops to ~1e-3 in ``log p``.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import special
from scipy.signal import lfilter

from specbound._validation import as_choice, as_int, as_prob, as_real

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

#: default FFT window size for the Li / Lattimore null tails
DEFAULT_N_GRID = 2**17

_EULER_GAMMA = float(np.euler_gamma)


# ----------------------------------------------------------------------------------------
# validation
# ----------------------------------------------------------------------------------------


def _as_pivots(U, name: str = "U", *, allow_nd: bool = False) -> tuple[np.ndarray, bool]:
    """Validate pivots: 1-D (one sequence) or 2-D (rows are sequences), entries in (0, 1).

    Returns ``(U2, batched)`` with ``U2`` 2-D float64 (one row for 1-D input).
    """
    try:
        arr = np.array(U, dtype=np.float64, copy=True)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name}: must be an array of real numbers ({exc})") from None
    if np.asarray(U).dtype == np.bool_:
        raise ValueError(f"{name}: must be an array of real numbers, got booleans")
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
        out["n_grid"] = n_grid
    if params:
        bad = sorted(params)[0]
        raise ValueError(f"{bad}: unexpected parameter for score={score!r}")
    return score, out


# ----------------------------------------------------------------------------------------
# per-token transforms h(r)
# ----------------------------------------------------------------------------------------


def _li_constants(delta: float) -> tuple[int, float, float, float]:
    """``(k, q, a, b)`` of Li et al.'s score; q < 1e-12 is snapped to 0 (see li_score)."""
    k = math.floor(1.0 / (1.0 - delta))
    q = 1.0 - k * (1.0 - delta)
    if q < 1e-12:
        q = 0.0
    a = delta / (1.0 - delta)
    b = (1.0 - q) / q if q > 0 else math.inf
    return k, q, a, b


def _h_li_from_logu(logu, delta: float):
    k, q, a, b = _li_constants(delta)
    if q == 0.0:
        return math.log(k) + a * logu
    return np.logaddexp(math.log(k) + a * logu, b * logu)


def _h_lattimore(U, epsilon: float):
    c = 2.0 - math.sqrt(epsilon)
    return np.minimum(epsilon**-0.5, (1.0 - U) ** -0.5) - c


def _h(U, score: str, params: dict):
    if score == "aaronson":
        return -np.log1p(-U)
    if score == "u":
        return np.array(U, dtype=np.float64, copy=True)
    if score == "li":
        return _h_li_from_logu(np.log(U), params["delta"])
    return _h_lattimore(U, params["epsilon"])


def token_scores(U, score: str = "aaronson", **params) -> np.ndarray:
    """Per-token scores ``h(U_t)`` of a watermark score (MATH.md §4).

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


def _out(x, batched):
    x = np.asarray(x, dtype=np.float64)
    return x if batched else float(x.reshape(-1)[0])


def aaronson_score(U):
    """Aaronson's score ``S_A = Σ_t -log(1 - U_t)`` (seed 000 §4.1, App. E.1).

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
    """U-score ``S_U = Σ_t U_t`` (Hu & Huang 2024; seed 000 App. E.1).

    Same input conventions as :func:`aaronson_score`; under H0 ``S_U`` is Irwin--Hall(M).
    """
    S, _, batched, _, _ = _score_sum(U, "u", {"method": "exact"})
    return _out(S, batched)


def li_score(U, delta):
    """Li et al. (2025) optimal Gumbel score ``S = Σ_t h*_{gum,Δ}(U_t)`` (seed 000 App. E.3).

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
    """Lattimore (2026) truncated power-law score (seed 000 App. E.4).

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
# exact null tails: Gamma and Irwin--Hall
# ----------------------------------------------------------------------------------------


def _log_gamma_cf(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``log Γ(a, x)/Γ(a)`` by the Legendre continued fraction (modified Lentz), x > a + 1."""
    tiny = 1e-300
    b = x + 1.0 - a
    c = np.full_like(x, 1.0 / tiny)
    d = 1.0 / b
    logh = np.log(d)
    active = np.ones(x.shape, dtype=bool)
    for i in range(1, 100_000):
        an = -i * (i - a)
        b = b + 2.0
        d = an * d + b
        d = np.where(np.abs(d) < tiny, tiny, d)
        c = b + an / c
        c = np.where(np.abs(c) < tiny, tiny, c)
        d = 1.0 / d
        delta = c * d
        logh = np.where(active, logh + np.log(delta), logh)
        active &= np.abs(delta - 1.0) > 1e-16
        if not active.any():
            break
    return -x + a * np.log(x) - special.gammaln(a) + logh


def _gamma_log_sf(S, M) -> np.ndarray:
    """``log P(Gamma(M, 1) >= S)``, stable in the far tail."""
    S = np.asarray(S, dtype=np.float64)
    a = np.broadcast_to(np.asarray(M, dtype=np.float64), S.shape).astype(np.float64)
    out = np.zeros(S.shape)
    pos = S > 0
    q = special.gammaincc(a[pos], S[pos])
    ok = q >= 1e-280
    res = np.empty(q.shape)
    with np.errstate(divide="ignore"):
        res[ok] = np.log(q[ok])
    if (~ok).any():
        res[~ok] = _log_gamma_cf(a[pos][~ok], S[pos][~ok])
    out[pos] = res
    return out


def _irwin_hall_log_cdf(M: int, x: np.ndarray) -> np.ndarray:
    """``log P(IH_M <= x)`` for 0 <= x <= M/2 + 1 by the log-space B-spline recursion."""
    x = np.asarray(x, dtype=np.float64)
    J = int(min(M, math.floor(float(x.max(initial=0.0)))))  # columns j with x - j >= 0
    y = x[:, None] - np.arange(J + 2)[None, :]  # y_j = x - j, one spare column (< 0)
    L = np.where(y >= 0.0, 0.0, -np.inf)  # n = 0: F_0(y) = 1[y >= 0]
    logy = np.log(np.where(y > 0.0, y, 1.0))
    for n in range(1, M + 1):
        nm = n - y[:, :-1]
        log_nm = np.log(np.where(nm > 0.0, nm, 1.0))
        new = np.logaddexp(logy[:, :-1] + L[:, :-1], log_nm + L[:, 1:]) - math.log(n)
        yy = y[:, :-1]
        new = np.where(yy <= 0.0, -np.inf, np.where(yy >= n, 0.0, new))
        L = np.concatenate([new, np.full((new.shape[0], 1), -np.inf)], axis=1)
    return L[:, 0]


def _irwin_hall_log_sf(S, M: int) -> np.ndarray:
    """``log P(IH_M >= S)`` (exact, stable); S array for a single M."""
    S = np.asarray(S, dtype=np.float64).reshape(-1)
    out = np.empty(S.shape)
    x = M - S  # P(S' >= S) = P(IH <= M - S) by symmetry
    lo = x <= M / 2.0
    out[x <= 0.0] = -np.inf
    sel = lo & (x > 0.0)
    for chunk in _chunks(np.flatnonzero(sel), max(1, 2_000_000 // (M + 2))):
        out[chunk] = _irwin_hall_log_cdf(M, x[chunk])
    hi = ~lo
    # S < M/2: P(IH >= S) = 1 - P(IH <= S), and P(IH <= S) <= 1/2 is computed accurately
    Sh = np.clip(S[hi], 0.0, None)
    res = np.zeros(Sh.shape)
    pos = Sh > 0
    idx = np.flatnonzero(pos)
    for chunk in _chunks(idx, max(1, 2_000_000 // (M + 2))):
        res[chunk] = np.log1p(-np.exp(_irwin_hall_log_cdf(M, Sh[chunk])))
    out[hi] = res
    return out


def _chunks(idx: np.ndarray, size: int):
    for start in range(0, idx.size, size):
        yield idx[start : start + size]


def _log_expm1_over(lam):
    """``log((e^λ - 1)/λ)`` for λ > 0, stable for small and large λ."""
    return lam + np.log(-np.expm1(-lam)) - np.log(lam)


def _u_chernoff_log_bound(S, M) -> np.ndarray:
    """``log inf_{λ>=0} exp(M log((e^λ-1)/λ) - λ S)`` (seed 000 App. E.1), by bisection."""
    S = np.asarray(S, dtype=np.float64)
    M = np.broadcast_to(np.asarray(M, dtype=np.float64), S.shape)
    t = S / M
    out = np.zeros(S.shape)
    out[t >= 1.0] = -np.inf
    mid = (t > 0.5) & (t < 1.0)
    if mid.any():
        tm, Mm, Sm = t[mid], M[mid], S[mid]
        lo = np.full(tm.shape, -40.0)  # log λ
        hi = np.full(tm.shape, 60.0)
        for _ in range(200):
            c = 0.5 * (lo + hi)
            lam = np.exp(c)
            # K'(λ) = 1/(1 - e^{-λ}) - 1/λ, increasing from 1/2 to 1
            kp = -1.0 / np.expm1(-lam) - 1.0 / lam
            big = kp > tm
            hi = np.where(big, c, hi)
            lo = np.where(big, lo, c)
        lam = np.exp(0.5 * (lo + hi))
        out[mid] = np.minimum(0.0, Mm * _log_expm1_over(lam) - lam * Sm)
    return out


# ----------------------------------------------------------------------------------------
# tilted lattice convolution (Li, Lattimore; also runs on the U-score for validation)
# ----------------------------------------------------------------------------------------


class _Law:
    """Null law of X = h(U), U ~ U(0,1), h increasing: what the lattice engine needs.

    ``x_top`` is the supremum of the support and ``atom`` = P(X = x_top).  ``log_cdf(x)`` is
    ``log P(X <= x)`` and ``log_sfc(x)`` is ``log P(x < X < x_top)`` for ``x < x_top``.
    ``h_logit(z)`` is h at ``U = expit(z)`` (used for moments by quadrature only).
    """

    x_top: float
    atom: float

    def __init__(self):
        z = np.linspace(-80.0, 80.0, 4001)
        dz = z[1] - z[0]
        logw = -np.logaddexp(0.0, -z) - np.logaddexp(0.0, z) + math.log(dz)
        logw[[0, -1]] -= math.log(2.0)
        self._z = z
        self._logw = logw
        self._logu = -np.logaddexp(0.0, -z)
        self._log1mu = -np.logaddexp(0.0, z)
        self._x = self.h_logit(z)

    # --- quadrature helpers (approximate; they only steer the exact lattice) ---
    def tilted(self, lam: float) -> tuple[float, float, float]:
        """(K(λ), mean, sd) of the tilted law by quadrature on the logit grid."""
        lw = self._logw + lam * self._x
        mx = float(lw.max())
        w = np.exp(lw - mx)
        tot = float(w.sum())
        K = mx + math.log(tot)
        w /= tot
        mu = float(np.dot(w, self._x))
        var = float(np.dot(w, (self._x - mu) ** 2))
        return float(K), mu, math.sqrt(max(var, 0.0))

    def tilted_outside(self, lam: float, mu: float, half: float) -> float:
        """Tilted per-token probability of ``|X - mu| > half`` (quadrature)."""
        lw = self._logw + lam * self._x
        w = np.exp(lw - lw.max())
        return float(w[np.abs(self._x - mu) > half].sum() / w.sum())

    def mean(self) -> float:
        return self.tilted(0.0)[1]

    def solve_tilt(self, t: float) -> float:
        """λ >= 0 with tilted mean t (0 if t <= mean; capped at 1e8)."""
        if t <= self.tilted(0.0)[1]:
            return 0.0
        lo, hi = 0.0, 1.0
        while self.tilted(hi)[1] < t and hi < 1e8:
            lo, hi = hi, hi * 4.0
        if hi >= 1e8 and self.tilted(hi)[1] < t:
            return 1e8
        for _ in range(80):
            mid = 0.5 * (lo + hi)
            if self.tilted(mid)[1] < t:
                lo = mid
            else:
                hi = mid
            if hi - lo <= 1e-7 * hi:
                break
        return 0.5 * (lo + hi)

    def x_low(self, lam: float) -> float:
        """A point below which the λ-tilted mass is < e^-80 of the total (grid based)."""
        t = self._log1mu + lam * self._x
        mass_above = float(t.max() + np.log(np.exp(t - t.max()).sum()))
        below = self._logu + lam * self._x < mass_above - 80.0
        idx = np.flatnonzero(below)
        return float(self._x[idx[-1]]) if idx.size else float(self._x[0])


class _UniformLaw(_Law):
    x_top = 1.0
    atom = 0.0

    def h_logit(self, z):
        return special.expit(z)

    def log_cdf(self, x):
        with np.errstate(divide="ignore"):
            return np.log(np.clip(x, 0.0, 1.0))

    def log_sfc(self, x):
        with np.errstate(divide="ignore"):
            return np.log(np.clip(1.0 - x, 0.0, 1.0))


class _LiLaw(_Law):
    def __init__(self, delta: float):
        self.delta = delta
        self.k, self.q, self.a, self.b = _li_constants(delta)
        self.x_top = math.log(self.k + (1 if self.q > 0 else 0))
        self.atom = 0.0
        super().__init__()

    def h_logit(self, z):
        return _h_li_from_logu(-np.logaddexp(0.0, -z), self.delta)

    def _logu_of(self, x):
        """Solve h(e^y) = x for y = log u <= 0 (Newton from the right; h convex in y)."""
        x = np.minimum(np.asarray(x, dtype=np.float64), self.x_top)
        logk = math.log(self.k)
        if self.q == 0.0:
            return (x - logk) / self.a
        y = np.minimum(np.minimum((x - logk) / self.a, x / self.b), 0.0)
        for _ in range(100):
            l1 = logk + self.a * y
            l2 = self.b * y
            h = np.logaddexp(l1, l2)
            w1 = np.exp(l1 - h)
            hp = self.a * w1 + self.b * (1.0 - w1)
            step = (h - x) / hp
            y = np.minimum(y - step, 0.0)
            if np.all(np.abs(step) <= 1e-15 * np.maximum(1.0, np.abs(y))):
                break
        return y

    def log_cdf(self, x):
        return self._logu_of(x)

    def log_sfc(self, x):
        y = self._logu_of(x)
        with np.errstate(divide="ignore"):
            return np.log(-np.expm1(y))


class _LattimoreLaw(_Law):
    def __init__(self, epsilon: float):
        self.eps = epsilon
        self.c = 2.0 - math.sqrt(epsilon)
        self.x_top = epsilon**-0.5 - self.c
        self.atom = epsilon
        super().__init__()

    def h_logit(self, z):
        log1mu = -np.logaddexp(0.0, z)
        return np.minimum(self.eps**-0.5, np.exp(-0.5 * log1mu)) - self.c

    def log_cdf(self, x):
        w = np.asarray(x, dtype=np.float64) + self.c
        w = np.clip(w, 1.0, self.eps**-0.5)
        with np.errstate(divide="ignore"):
            return np.log1p(-(w**-2.0))

    def log_sfc(self, x):
        w = np.asarray(x, dtype=np.float64) + self.c
        w = np.clip(w, 1.0, self.eps**-0.5)
        with np.errstate(divide="ignore"):
            return -2.0 * np.log(w) + np.log(
                np.clip(-np.expm1(math.log(self.eps) + 2 * np.log(w)), 0.0, None)
            )


def _cell_log_masses(law: _Law, x_hi: np.ndarray, x_lo: np.ndarray) -> np.ndarray:
    """``log P(x_lo < X <= x_hi)`` (continuous part) for arrays of cells below x_top."""
    lf_hi = law.log_cdf(x_hi)
    lf_lo = law.log_cdf(x_lo)
    ls_hi = law.log_sfc(x_hi)
    ls_lo = law.log_sfc(x_lo)
    use_cdf = lf_hi <= math.log(0.5)
    with np.errstate(divide="ignore", invalid="ignore"):
        a = lf_hi + np.log(-np.expm1(np.minimum(lf_lo - lf_hi, 0.0)))
        b = ls_lo + np.log(-np.expm1(np.minimum(ls_hi - ls_lo, 0.0)))
    out = np.where(use_cdf, a, b)
    return np.where(np.isnan(out), -np.inf, out)


def _lattice_rung(law: _Law, M: int, lam: float, n_grid: int):
    """One tilted lattice convolution at tilt ``lam``; returns ``s -> (log p, trusted)``.

    Per-token lattice ``x_j = x_top - j δ``.  The mass of each cell ``(x_{j+1}, x_j]`` is
    split between its two end points so that the conditional mean is preserved (the split
    uses the two half-cell masses: ``up = (c_lo + 5 c_hi)/6``, ``down = (5 c_lo + c_hi)/6``,
    Simpson's rule for the partial first moment); the atom of the law sits on ``x_top``.
    The lattice sum is then ``S + noise`` with mean-zero noise of variance ``<= M δ²/4``,
    and an atom at ``S_i`` stands for the centred cell ``[S_i - δ/2, S_i + δ/2]``, so the
    tail at a point between atoms is interpolated linearly within that cell.
    """
    _, mu, sd = law.tilted(lam)
    x_lo = law.x_low(lam)
    if lam > 0.0:
        # rigorous cut: m(λ) >= P(X >= x_top - 1/λ) e^{λ(x_top - 1/λ)}, so the tilted mass
        # below x_top - t is at most e^{-λ t + 1} / P(X >= x_top - 1/λ) <= e^-80 for this t
        eta = 1.0 / lam
        x_eta = np.array([law.x_top - eta])
        log_top = float(
            np.logaddexp(law.log_sfc(x_eta)[0], math.log(law.atom) if law.atom > 0 else -np.inf)
        )
        x_lo = max(x_lo, law.x_top - eta - (81.0 - log_top) / lam)
    span = law.x_top - x_lo
    # a tilted law that is almost all atom has sd ~ 0; its continuous part still spreads
    # over ~1/λ below x_top, which the lattice must resolve
    sd = max(sd, 0.1 / lam if lam > 0 else 0.0, 1e-9 * max(1.0, abs(law.x_top)), 1e-9 * span)
    half = sd * (12.0 * math.sqrt(M) + 50.0)
    # heavy per-token tails (Lattimore with small ε): if a single token can leave the window
    # with probability > 1e-14 / M, widen it to cover up to three such jumps, and refine the
    # grid (up to 2**22 points) so that δ stays below sd/64
    if M * law.tilted_outside(lam, mu, half) > 1e-14:
        half = max(half, min(M, 3) * max(law.x_top - mu, mu - x_lo))
        while 2.0 * half / n_grid > sd / 64.0 and n_grid < 2**22:
            n_grid *= 2
    delta = 2.0 * half / n_grid
    if span / delta > 2**24:  # safety net: coarser lattice, wider window
        delta = span / 2**24
    J = int(math.ceil(span / delta)) + 1
    # per-token lattice masses, computed chunk-wise (offsets are folded mod n_grid later)
    offs, logs = [np.array([0])], [np.array([math.log(law.atom) if law.atom > 0 else -np.inf])]
    chunk = 1 << 20
    for start in range(0, J, chunk):
        j = np.arange(start, min(J, start + chunk), dtype=np.float64)
        top = law.x_top - j * delta
        midp = top - 0.5 * delta
        bot = top - delta
        c_hi = np.exp(_cell_log_masses(law, top, midp))  # upper half-cell (mass <= 1)
        c_lo = np.exp(_cell_log_masses(law, midp, bot))
        up = (c_lo + 5.0 * c_hi) / 6.0
        down = (5.0 * c_lo + c_hi) / 6.0
        ji = j.astype(np.int64)
        offs += [ji, ji + 1]
        with np.errstate(divide="ignore"):
            logs += [np.log(up), np.log(down)]
    # mass below the last lattice point: put on it (it is < e^-80 of the tilted mass)
    offs.append(np.array([J]))
    logs.append(np.array([law.log_cdf(np.array([law.x_top - J * delta]))[0]]))
    off = np.concatenate(offs)
    logm = np.concatenate(logs)
    lt = logm + lam * (law.x_top - off * delta)
    logK = float(special.logsumexp(lt))  # log E[e^{λ X'}] of the lattice law
    w = np.exp(lt - logK)
    acc = np.bincount(off % n_grid, weights=w, minlength=n_grid)
    pi = np.fft.irfft(np.fft.rfft(acc) ** M, n=n_grid)
    # representative offsets: window [i_lo, i_lo + n_grid) around the tilted mean
    i_c = M * (law.x_top - mu) / delta
    i_lo = max(0, int(math.floor(i_c - n_grid / 2)))
    pi = np.maximum(np.roll(pi, -(i_lo % n_grid)), 0.0)
    # A_k = sum_{k' <= k} pi_k' e^{-λ (k - k') δ}  (S descending in k)
    A = lfilter([1.0], [1.0, -math.exp(-lam * delta)], pi)
    Amax = float(A.max())
    base = M * logK - lam * M * law.x_top
    # tilted probability that every token sits on the atom (S = M x_top exactly)
    pi_atom = math.exp(M * (math.log(law.atom) + lam * law.x_top - logK)) if law.atom else 0.0

    def evaluate(s: np.ndarray):
        pos = (M * law.x_top - s) / delta  # offset coordinate of s
        i_star = np.floor(pos + 0.5).astype(np.int64)  # atom whose centred cell holds s
        frac = np.clip(pos + 0.5 - i_star, 0.0, 1.0)  # = (S_i* + δ/2 - s)/δ
        k = i_star - i_lo
        inside = (k >= 0) & (k < n_grid)
        kk = np.clip(k, 0, n_grid - 1)
        tail = A[kk] - (1.0 - frac) * pi[kk]
        # within half a cell of the maximum M x_top: the atom of S (if any) plus the
        # continuous mass of the one-sided half cell [M x_top - δ/2, M x_top]
        top = (pos < 0.5) & (i_lo == 0)
        if top.any():
            p0 = pi[0] if i_lo == 0 else 0.0
            tail = np.where(top, pi_atom + (p0 - pi_atom) * np.clip(2.0 * pos, 0.0, 1.0), tail)
        with np.errstate(divide="ignore"):
            val = base + lam * i_star * delta + np.log(np.maximum(tail, 0.0))
        # trusted: well inside the window, and not within 64 cells of the maximum unless
        # this rung is already tilted hard (the law's top edge is resolved by tilting)
        ok = inside & (A[kk] >= 1e-8 * Amax) & ((pos >= 64.0) | (lam > 0.0))
        val = np.where(inside, val, -np.inf)
        if lam == 0.0:
            below = k >= n_grid  # far below the window: p = 1 up to e^-80
            val = np.where(below, 0.0, val)
            ok |= below
        above = pos < -1e-9  # s beyond M x_top: impossible
        val = np.where(above, -np.inf, val)
        ok |= above
        return np.minimum(val, 0.0), ok

    return evaluate


def _lattice_log_sf(law: _Law, M: int, s, n_grid: int = DEFAULT_N_GRID) -> np.ndarray:
    """``log P(Σ_{t<=M} X_t >= s)`` by tilted lattice convolution (X ~ ``law``).

    Rungs: the untilted lattice resolves every ``s`` up to a few standard deviations above
    the mean; each remaining ``s`` (smallest first) gets a rung tilted to it
    (``K'(λ) = s/M``), which also resolves its neighbours.
    """
    s = np.asarray(s, dtype=np.float64).reshape(-1)
    out = np.full(s.shape, np.nan)
    pending = np.ones(s.shape, dtype=bool)
    lam = 0.0
    while pending.any():
        ev = _lattice_rung(law, M, lam, n_grid)
        idx = np.flatnonzero(pending)
        val, ok = ev(s[idx])
        s_next = float(s[idx[~ok]].min()) if (~ok).any() else None
        new_lam = law.solve_tilt(min(s_next / M, law.x_top)) if s_next is not None else lam
        if s_next is not None and new_lam <= lam * (1 + 1e-12):
            ok[:] = True  # no further tilt possible: keep this rung's values
        out[idx[ok]] = val[ok]
        pending[idx[ok]] = False
        lam = new_lam
    return out


_LAW_CACHE: dict = {}


def _law(score: str, params: dict) -> _Law:
    key = (score, params.get("delta"), params.get("epsilon"))
    if key not in _LAW_CACHE:
        if score == "li":
            _LAW_CACHE[key] = _LiLaw(params["delta"])
        elif score == "lattimore":
            _LAW_CACHE[key] = _LattimoreLaw(params["epsilon"])
        else:
            _LAW_CACHE[key] = _UniformLaw()
    return _LAW_CACHE[key]


# ----------------------------------------------------------------------------------------
# p-values
# ----------------------------------------------------------------------------------------


def _null_log_sf(S: np.ndarray, M: np.ndarray, score: str, params: dict) -> np.ndarray:
    """Validated core: log P_H0(score >= S) for M scored tokens (arrays of equal shape)."""
    S = np.asarray(S, dtype=np.float64).reshape(-1)
    M = np.asarray(M, dtype=np.int64).reshape(-1)
    out = np.empty(S.shape)
    for m in np.unique(M):
        sel = M == m
        m = int(m)
        if score == "aaronson":
            out[sel] = _gamma_log_sf(S[sel], m)
        elif score == "u":
            if params.get("method", "exact") == "chernoff":
                out[sel] = _u_chernoff_log_bound(S[sel], m)
            else:
                out[sel] = _irwin_hall_log_sf(S[sel], m)
        else:
            out[sel] = _lattice_log_sf(_law(score, params), m, S[sel], params["n_grid"])
    return out


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
        ``S`` non-finite; ``M`` not an integer >= 1 or shapes that do not broadcast;
        invalid ``score`` / parameters.
    """
    score, p = parse_score_params(score, params)
    try:
        Sa = np.asarray(S, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"S: must be real numbers ({exc})") from None
    if not np.all(np.isfinite(Sa)):
        raise ValueError("S: contains NaN or infinite entries")
    Ma = np.asarray(M)
    if Ma.dtype.kind not in "iu" or np.any(Ma < 1):
        if Ma.dtype.kind == "f" and np.all(np.isfinite(Ma)) and np.all(Ma == np.round(Ma)):
            Ma = Ma.astype(np.int64)
        else:
            raise ValueError(f"M: must be integers >= 1, got {M!r}")
    if np.any(Ma < 1):
        raise ValueError(f"M: must be integers >= 1, got {M!r}")
    try:
        Sb, Mb = np.broadcast_arrays(Sa, Ma)
    except ValueError:
        raise ValueError(f"M: shape {Ma.shape} does not broadcast with S {Sa.shape}") from None
    res = _null_log_sf(Sb, Mb, score, p).reshape(Sb.shape)
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
    S, M, batched, score, p = _score_sum(U, score, params)
    return _out(_null_log_sf(S, np.full(S.shape, M), score, p), batched)


def aaronson_log_pvalue(U):
    """Exact log p-value of Aaronson's score: ``log Γ(M, S_A)/Γ(M)`` (seed 000 App. E.1, Alg. 8).

    Under H0, ``S_A ~ Gamma(M, 1)``.  Computed in log space (continued fraction where
    ``gammaincc`` underflows), so it stays finite for arbitrarily strong evidence.
    Input conventions as in :func:`aaronson_score`.
    """
    return score_log_pvalue(U, "aaronson")


def u_score_log_pvalue(U, method: str = "exact"):
    """Log p-value of the U-score ``S_U = Σ U_t`` (Hu & Huang 2024; seed 000 App. E.1).

    Parameters
    ----------
    U : array_like of float
        Pivots in (0, 1), 1-D or 2-D (rows are sequences).
    method : {"exact", "chernoff"}
        ``"exact"``: the Irwin--Hall upper tail (log-space B-spline recursion, exact to
        ~1e-13 relative); ``"chernoff"``: the bound
        ``inf_{λ>=0} M log((e^λ - 1)/λ) - λ S_U`` (>= the exact value).
    """
    return score_log_pvalue(U, "u", method=method)


def li_log_pvalue(U, delta, *, n_grid: int = DEFAULT_N_GRID):
    """Log p-value of Li et al.'s score (tilted lattice convolution; see module docstring)."""
    return score_log_pvalue(U, "li", delta=delta, n_grid=n_grid)


def lattimore_log_pvalue(U, epsilon, *, n_grid: int = DEFAULT_N_GRID):
    """Log p-value of Lattimore's score (tilted lattice convolution; see module docstring)."""
    return score_log_pvalue(U, "lattimore", epsilon=epsilon, n_grid=n_grid)


def anlppt(U, score: str = "aaronson", **params):
    """Average negative log p-value per token, ``-log(p) / M`` (seed 000 §6, App. E).

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
    S, M, batched, score, p = _score_sum(U, score, params)
    lp = _null_log_sf(S, np.full(S.shape, M), score, p)
    return _out(-lp / M + 0.0, batched)  # + 0.0: no negative zero


# ----------------------------------------------------------------------------------------
# expected Aaronson score and its entropy bound
# ----------------------------------------------------------------------------------------


def expected_aaronson_score(P):
    """Expected per-token Aaronson score under the Gumbel watermark with next-token law P.

    ``E[-log(1 - U_Y)] = Σ_v P(v) (ψ(1 + 1/P(v)) + γ)`` (MATH.md §4; Fernandez et al.
    2023), where ``Y = argmax_v U_v^{1/P(v)}`` is the watermarked token.

    Parameters
    ----------
    P : array_like of float
        Probability vector (1-D, returns a float) or batch (2-D, rows are contexts).
        Entries with ``P(v) = 0`` contribute nothing (the limit ``P ψ(1 + 1/P) -> 0``).

    Returns
    -------
    float or numpy.ndarray
        At least 1 (equal to 1 for a point mass: ``ψ(2) + γ = 1``) and at least
        :func:`aaronson_entropy_bound`.

    Raises
    ------
    ValueError
        ``P`` not a probability vector (see ``specbound._validation.as_prob``).
    """
    Pa = as_prob(P, "P")
    batched = Pa.ndim == 2
    P2 = np.atleast_2d(Pa)
    out = np.zeros(P2.shape)
    pos = P2 > 0
    pv = P2[pos]
    inv = 1.0 / np.maximum(pv, 1e-300)
    val = np.where(pv > 1e-300, pv * (special.digamma(1.0 + inv) + _EULER_GAMMA), 0.0)
    out[pos] = val
    return _out(out.sum(axis=1), batched)


def aaronson_entropy_bound(P):
    """Lower bound ``1 + (π²/6 - 1) H(P)`` on :func:`expected_aaronson_score` (H in nats).

    Zeros of ``P`` contribute 0 to the entropy.  Same conventions as
    :func:`expected_aaronson_score`.
    """
    Pa = as_prob(P, "P")
    batched = Pa.ndim == 2
    P2 = np.atleast_2d(Pa)
    with np.errstate(divide="ignore", invalid="ignore"):
        H = -np.where(P2 > 0, P2 * np.log(np.where(P2 > 0, P2, 1.0)), 0.0).sum(axis=1)
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

    Returns the ``k``-th largest null score with ``k = floor(fpr n)`` (the largest when
    ``k = 0``); detection is ``S > threshold``, so the empirical false-positive rate on the
    ``n`` null scores is at most ``fpr`` (exactly ``k/n`` without ties).  The one empirical
    threshold of the package (:func:`tpr_at_fpr` uses it).
    """
    S0 = np.asarray(null_scores, dtype=np.float64).reshape(-1)
    if S0.size == 0:
        raise ValueError("null_scores: must contain at least one score")
    if not np.all(np.isfinite(S0)):
        raise ValueError("null_scores: contains NaN or infinite entries")
    fpr = as_real(fpr, "fpr", low=0.0, high=1.0, low_open=True, high_open=True)
    S0 = np.sort(S0)[::-1]
    k = int(math.floor(fpr * S0.size))
    return float(S0[k - 1]) if k >= 1 else float(S0[0])


def score_threshold(M: int, fpr: float = 0.01, score: str = "aaronson", **params) -> float:
    """Score threshold ``s*`` with ``P_H0(S >= s*) = fpr`` for M tokens (exact null).

    Detection at false-positive rate ``fpr`` is ``S >= s*`` (equivalently ``p <= fpr``).
    Found by Brent's method on :func:`null_log_sf` (``scipy.stats.gamma.isf`` for Aaronson).
    Returns ``inf`` (never reject) when even the largest possible score has H0 probability
    above ``fpr`` (Lattimore's atom: ``ε^M >= fpr``).  Raises ``ValueError`` naming ``M``,
    ``fpr`` or a score parameter when invalid.
    """
    from scipy import optimize, stats

    M = as_int(M, "M", min_value=1)
    fpr = as_real(fpr, "fpr", low=0.0, high=1.0, low_open=True, high_open=True)
    score, p = parse_score_params(score, params)
    if score == "aaronson" and fpr > 1e-250:
        return float(stats.gamma.isf(fpr, M))
    target = math.log(fpr)
    f = lambda s: float(_null_log_sf(np.array([s]), np.array([M]), score, p)[0]) - target
    if score == "aaronson":
        lo, hi = float(M), float(M) + 10.0
        while f(hi) > 0:
            hi = lo + 2 * (hi - lo)
    elif score == "u":
        lo, hi = M / 2.0, float(M)
        if f(lo) < 0:
            return lo
    else:
        law = _law(score, p)
        lo = M * law.mean()
        hi = M * law.x_top
        if f(lo) < 0:
            return lo
        if f(hi) >= 0:
            # the atom at the top (Lattimore: P(S = M x_top) = ε^M >= fpr): no score
            # threshold reaches level fpr, so the level-fpr test never rejects
            return math.inf
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
    (seed 000 §6 and App. D.5: TPR@1%FPR vs T_eval).

    Parameters
    ----------
    U_wm : 2-D array_like or sequence of 1-D arrays
        Pivots of the watermarked sequences (rows are sequences; ragged allowed), in (0, 1).
    T_eval : int or sequence of int
        Token budgets (>= 1).
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
        integers; ``fpr`` outside (0, 1); ``null`` unknown or ``"empirical"`` without
        ``U_null``; invalid score parameters.
    """
    wm = _as_sequences(U_wm, "U_wm")
    Ts = np.atleast_1d(np.asarray(T_eval))
    if Ts.ndim != 1 or Ts.size == 0 or Ts.dtype.kind not in "iu" or np.any(Ts < 1):
        raise ValueError(f"T_eval: must be positive integers, got {T_eval!r}")
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
            thr = score_threshold(T, fpr, score, **p)
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
        tpr = float(det.mean()) if n else float("nan")
        se = math.sqrt(tpr * (1 - tpr) / n) if n else float("nan")
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
