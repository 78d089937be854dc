"""Null laws of the watermark scores: the numerical engine behind :mod:`specbound.theory.watermark`.

Private module.  :mod:`specbound.theory.watermark` validates the user's input and calls
:func:`null_log_sf` (and :func:`law`, :func:`to_engine_units`, :func:`from_engine_units` for
thresholds); everything here assumes valid input.  Each method, its accuracy and the test
that measures it:

* **Aaronson** (Gamma(M, 1) upper tail): ``log Q(M, S)`` with ``Q = gammaincc``; where
  ``Q < 1e-280`` the Legendre continued fraction for ``Γ(M, S)`` by the modified Lentz
  method in log space.  ~1e-13 relative in ``log p`` against mpmath
  (``tests/test_theory_watermark.py``).
* **U-score, exact** (Irwin--Hall upper tail), for ``M <= U_EXACT_MAX_M`` (1000): the
  B-spline recursion ``F_n(x) = [x F_{n-1}(x) + (n - x) F_{n-1}(x - 1)] / n`` in log space,
  every step a positive combination (no cancellation); ``O(M^2)`` per value.
* **U-score, saddle point** for ``M > U_EXACT_MAX_M``: the Lugannani--Rice approximation
  (Lugannani & Rice 1980) with its next-order correction (Daniels 1987, "Tail probability
  approximations", International Statistical Review) of the Irwin--Hall tail,
  with the cumulant generating function ``K(λ) = log((e^λ - 1)/λ)`` and its derivatives in
  closed form (series near 0); within ``|z| < 0.1`` standard deviations of the centre, where
  the saddle-point terms cancel, the Edgeworth expansion
  ``Φ̄(z) + φ(z)(3z - z^3)/(20M)``.  ``O(1)`` per value.  Against the exact recursion for
  ``1000 < M <= 3000`` over the whole range of ``S``: ``|Δ log p| <= 1e-6 max(1, |log p|)``
  (measured worst 1.1e-10 for M in {1001, 1500, 2000, 3000}, S from M/2 - 40 sd to M - 0.3;
  ``tests/test_theory_watermark.py::test_u_saddlepoint_*`` asserts the documented bound).
* **U-score, Chernoff**: ``inf_{λ>=0} exp(M log((e^λ - 1)/λ) - λ S)``, an upper bound on
  ``p``, λ by bisection.
* **Li and Lattimore**: exponentially tilted lattice convolution (:func:`lattice_log_sf`):
  the per-token null law of ``X = h(U)`` is known exactly through its CDF; for a target
  ``s`` the law is tilted by ``e^{λx}`` with λ solving ``K'(λ) = s/M`` (the saddle point,
  found by quadrature on a logit grid, which only steers the method), put on a lattice of
  step δ with the mass of every cell split between its two end points so that the cell's
  mean is kept, convolved M times by FFT on a window of ``±σ_λ(12√M + 50)`` around the
  tilted mean (widened, with a finer grid, when single tokens are heavy-tailed), and untilted
  exactly: ``P(S >= s) = exp(M K(λ) - λ s) E_λ[e^{-λ(S - s)}; S >= s]``.

  Two devices keep the lattice resolving the relevant scale for **every** parameter value:

  - *Capping.*  If the other ``M - 1`` tokens always sum to at least ``L_{M-1}``, a token
    above ``c = s - L_{M-1}`` alone makes ``S >= s``, so ``P(S >= s)`` is unchanged when each
    token is replaced by ``min(X, c)`` (a law with an atom ``P(X >= c)`` at ``c``).  For
    Lattimore's score ``L_m = m (1 - (2 - √ε))`` exactly; for Li's (unbounded below)
    ``L_m`` is the ``1 - 10^-40`` quantile bound from ``X >= -Y``, ``Y ~ Exp(1)`` in the
    units below, which changes ``p`` by a relative ``<= M 10^-40``.  Without the cap the
    span of Lattimore's law, ``ε^{-1/2}`` (``10^25`` at ``ε = 10^-50``), swamped the lattice
    and the p-value came out as ``log p = 0``; scores are grouped into caps a factor 2 apart
    so a batch needs a few lattices.
  - *Scaling.*  Li's score is run in the units ``X̃ = (h(U) - log k)/a``, ``a = Δ/(1-Δ)``,
    where the body of the law is ``-Exp(1)`` whatever Δ; in the original units the body has
    scale ``a`` (``10^-6`` at ``Δ = 10^-6``) while the rare spike near ``U = 1`` (mass ~Δ,
    height ``log 2``) set the lattice step, and ``log p`` came out as ``-0.48`` instead of
    ``-1.93``.  With ``q = 0`` (``1/(1-Δ)`` an integer) the law is exactly ``-Exp(1)`` and
    the tail is the Gamma(M) lower tail, computed exactly.

  One token (``M = 1``) needs no lattice: its tail is read off the exact CDF (relative
  error ~1e-10 for every parameter).  Otherwise the error is second order in δ: with the
  default ``n_grid = 2**17`` the engine run on the U-score's law reproduces the exact
  Irwin--Hall tail to ``|Δ log p| <= 1e-5 max(1, |log p|)`` for M <= 1000 down to
  ``log p = -3600``, Li's two-token tail (by quadrature) to 1e-4 relative, and Monte Carlo
  tails within 5 standard errors over a log grid of Δ and ε down to the smallest positive
  float (``tests/test_theory_watermark.py``).

Laws are cached with a bounded :func:`functools.lru_cache` (:data:`LAW_CACHE_SIZE` entries).
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy import special
from scipy.signal import lfilter

#: default FFT window size for the Li / Lattimore null tails
DEFAULT_N_GRID = 2**17
#: largest M for which the U-score tail uses the exact O(M^2) Irwin--Hall recursion
U_EXACT_MAX_M = 1000
#: bound of the law cache (distinct (score, parameter, cap) triples kept)
LAW_CACHE_SIZE = 64
#: tail probability neglected by the lower bound on the sum of the other tokens (Li's cap)
_CAP_TAIL = 1e-40
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


# ----------------------------------------------------------------------------------------
# Li et al.'s score: constants and the per-token transform
# ----------------------------------------------------------------------------------------


def li_constants(delta: float) -> tuple[int, float, float, float]:
    """``(k, q, a, b)`` of Li et al.'s score ``h(r) = log(k r^a + 1[q > 0] r^b)``.

    ``k = floor(1/(1-Δ))``, ``q = 1 - k(1-Δ)``, ``a = Δ/(1-Δ)``, ``b = (1-q)/q``.  For
    ``Δ < 1/2`` (``k = 1``) ``q = Δ`` exactly (``1 - (1 - Δ)`` would round away its digits,
    and all of them for ``Δ < 1e-16``); for ``k >= 2`` a ``q < 1e-12`` left by rounding when
    ``1/(1-Δ)`` is an integer is snapped to 0.  ``b`` is ``inf`` when ``1/q`` overflows.
    """
    k = math.floor(1.0 / (1.0 - delta))
    if k <= 1:
        k, q = 1, delta
    else:
        q = 1.0 - k * (1.0 - delta)
        if q < 1e-12:
            q = 0.0
    a = delta / (1.0 - delta)
    with np.errstate(over="ignore", divide="ignore"):
        b = float(np.float64(1.0 - q) / np.float64(q)) if q > 0 else math.inf
    return k, q, a, b


def li_h_from_logu(logu, delta: float):
    """Li's ``h`` at ``r = e^{logu}`` (original units), as ``logaddexp(log k + a y, b y)``."""
    k, q, a, b = li_constants(delta)
    if q == 0.0:
        return math.log(k) + a * logu
    with np.errstate(invalid="ignore"):
        return np.logaddexp(math.log(k) + a * logu, b * logu)


def li_scaled_from_logu(logu, delta: float):
    """Li's ``h`` in engine units ``(h - log k)/a = y + log1p(e^{(b-a) y}/k)/a``, ``y = log r``.

    Accurate for every Δ in (0, 1): the body ``y`` is kept exactly and the spike term is
    evaluated without cancellation (``= y`` where ``e^{(b-a)y}`` underflows).
    """
    k, q, a, b = li_constants(delta)
    y = np.asarray(logu, dtype=np.float64)
    if q == 0.0:
        return y.copy()
    d = b - a
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        t = np.where(y < 0.0, np.exp(d * y), 1.0) / k
        return y + np.log1p(t) / a


def to_engine_units(score: str, params: dict, S, M):
    """Score sums in the units the null engine works in (Li: ``(S - M log k)/a``)."""
    if score != "li":
        return S
    k, _, a, _ = li_constants(params["delta"])
    return (S - M * math.log(k)) / a


def from_engine_units(score: str, params: dict, s, M):
    """Inverse of :func:`to_engine_units`."""
    if score != "li":
        return s
    k, _, a, _ = li_constants(params["delta"])
    return M * math.log(k) + a * s


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


def gamma_log_sf(S, M) -> np.ndarray:
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


def irwin_hall_log_sf_exact(S, M: int) -> np.ndarray:
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


def u_chernoff_log_bound(S, M) -> np.ndarray:
    """``log inf_{λ>=0} exp(M log((e^λ-1)/λ) - λ S)`` (Liu, Wan, Gao & Gündüz 2026,
    arXiv:2609.21858, App. E.1), by bisection."""
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


def gamma_log_cdf(x, M: int) -> np.ndarray:
    """``log P(Gamma(M, 1) <= x)`` for x >= 0, stable in the far lower tail.

    ``gammainc`` where it is >= 1e-280; below, the series
    ``P = e^{-x} x^M / Γ(M + 1) Σ_n x^n / ((M+1)...(M+n))`` summed in log space (it converges
    for every x; the far lower tail only occurs for ``x < M``, where it converges fast).
    """
    x = np.asarray(x, dtype=np.float64)
    out = np.full(x.shape, -np.inf)
    pos = x > 0
    if not pos.any():
        return out
    xp = x[pos]
    val = special.gammainc(M, xp)
    res = np.empty(xp.shape)
    ok = val >= 1e-280
    with np.errstate(divide="ignore"):
        res[ok] = np.log(val[ok])
    if (~ok).any():
        xs = xp[~ok]
        term = np.zeros(xs.shape)  # log of the n-th series term relative to the first
        acc = np.zeros(xs.shape)  # log of the partial sum
        for n in range(1, 100_000):
            term = term + np.log(xs) - math.log(M + n)
            acc = np.logaddexp(acc, term)
            if np.all(term - acc < -40.0):
                break
        res[~ok] = -xs + M * np.log(xs) - special.gammaln(M + 1.0) + acc
    out[pos] = res
    return out


# ----------------------------------------------------------------------------------------
# Irwin--Hall tail for large M: second-order Lugannani--Rice saddle point
# ----------------------------------------------------------------------------------------


def _uniform_cgf(lam: np.ndarray):
    """The cumulant generating function of one U(0,1) token and its first four derivatives.

    ``K(λ) = log((e^λ - 1)/λ)`` for λ > 0, in closed forms in ``e = e^{-λ}`` (no overflow
    for large λ) and Taylor series near 0, where the closed forms cancel
    (``K = λ/2 + λ²/24 - λ⁴/2880 + λ⁶/181440 - ...``).  Returns ``(K, K1, K2, K3, K4)``.
    """
    lam = np.asarray(lam, dtype=np.float64)
    e = np.exp(-lam)
    om = -np.expm1(-lam)  # 1 - e^{-λ}, accurate for small λ
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        K = lam + np.log(om / lam)
        K1 = 1.0 / om - 1.0 / lam
        K2 = 1.0 / lam**2 - e / om**2
        K3 = -2.0 / lam**3 + e * (1.0 + e) / om**3
        K4 = 6.0 / lam**4 - (e * (1.0 + e) ** 2 + 2.0 * e**2) / om**4
    l2 = lam * lam
    s1 = lam < 1e-3
    K1 = np.where(s1, 0.5 + lam / 12.0 - lam * l2 / 720.0 + lam * l2 * l2 / 30240.0, K1)
    K = np.where(s1, lam / 2.0 + l2 / 24.0 - l2 * l2 / 2880.0, K)
    s2 = lam < 1e-2
    K2 = np.where(s2, 1.0 / 12.0 - l2 / 240.0 + l2 * l2 / 6048.0 - l2**3 / 172800.0, K2)
    s3 = lam < 0.1
    K3 = np.where(s3, -lam / 120.0 + lam * l2 / 1512.0 - lam * l2 * l2 / 28800.0, K3)
    K4 = np.where(s3, -1.0 / 120.0 + l2 / 504.0 - l2 * l2 / 5760.0, K4)
    return K, K1, K2, K3, K4


def _uniform_tilt(t: np.ndarray) -> np.ndarray:
    """λ > 0 with ``K'(λ) = t`` for ``1/2 < t < 1`` (bisection on log λ)."""
    lo = np.full(t.shape, -60.0)
    hi = np.full(t.shape, 60.0)
    for _ in range(120):
        c = 0.5 * (lo + hi)
        big = _uniform_cgf(np.exp(c))[1] > t
        hi = np.where(big, c, hi)
        lo = np.where(big, lo, c)
    return np.exp(0.5 * (lo + hi))


def _irwin_hall_upper_saddle(s: np.ndarray, M: int) -> np.ndarray:
    """``log P(IH_M >= s)`` for ``M/2 < s < M`` (second-order Lugannani--Rice)."""
    t = s / M
    sd = math.sqrt(M / 12.0)
    z = (s - 0.5 * M) / sd
    out = np.empty(s.shape)
    near = np.abs(z) < 0.1
    if near.any():  # Edgeworth: the saddle-point terms cancel near the centre
        zz = z[near]
        dens = np.exp(-0.5 * zz * zz - _LOG_SQRT_2PI)
        val = 0.5 * special.erfc(zz / math.sqrt(2.0)) + dens * (3.0 * zz - zz**3) / (20.0 * M)
        out[near] = np.log(val)
    far = ~near
    if far.any():
        tf = t[far]
        lam = _uniform_tilt(tf)
        K, _, K2, K3, K4 = _uniform_cgf(lam)
        w = np.sqrt(np.maximum(2.0 * M * (lam * tf - K), 0.0))
        u = lam * np.sqrt(M * K2)
        r3 = K3 / K2**1.5
        r4 = K4 / K2**2
        mills = math.sqrt(math.pi / 2.0) * special.erfcx(w / math.sqrt(2.0))  # Φ̄(w)/φ(w)
        corr = ((r4 / 8.0 - 5.0 * r3**2 / 24.0) / (M * u) - r3 / (2.0 * math.sqrt(M) * u**2)
                - 1.0 / u**3 + 1.0 / w**3)
        out[far] = -0.5 * w * w - _LOG_SQRT_2PI + np.log(mills + 1.0 / u - 1.0 / w + corr)
    return out


def irwin_hall_log_sf_saddle(S, M: int) -> np.ndarray:
    """``log P(IH_M >= S)`` by the saddle-point method (module docstring), any M >= 1.

    Meant for ``M > U_EXACT_MAX_M``; the lower half uses the symmetry
    ``P(IH >= S) = 1 - P(IH >= M - S)``.
    """
    S = np.asarray(S, dtype=np.float64).reshape(-1)
    out = np.zeros(S.shape)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        out[S >= M] = -np.inf
        up = (S > 0.5 * M) & (S < M)
        if up.any():
            out[up] = _irwin_hall_upper(S[up], M)
        low = (S > 0.0) & (S <= 0.5 * M)
        if low.any():
            mirror = M - S[low]
            lp = np.empty(mirror.shape)
            at_centre = mirror <= 0.5 * M
            lp[at_centre] = math.log(0.5)
            if (~at_centre).any():
                lp[~at_centre] = _irwin_hall_upper(mirror[~at_centre], M)
            out[low] = np.log1p(-np.exp(lp)) + 0.0  # no negative zero
    return out


def _irwin_hall_upper(s: np.ndarray, M: int) -> np.ndarray:
    """``log P(IH_M >= s)`` for ``M/2 < s``: exact ``(M - s)^M / M!`` within 1 of the top
    (the corner of the cube is a simplex), the saddle point below."""
    out = np.full(s.shape, -np.inf)
    gap = M - s
    corner = (gap <= 1.0) & (gap > 0.0)
    out[corner] = M * np.log(gap[corner]) - special.gammaln(M + 1.0)
    mid = gap > 1.0
    if mid.any():
        out[mid] = _irwin_hall_upper_saddle(s[mid], M)
    return out


def irwin_hall_log_sf(S, M: int) -> np.ndarray:
    """``log P(IH_M >= S)``: exact for ``M <= U_EXACT_MAX_M``, saddle point above."""
    if M <= U_EXACT_MAX_M:
        return irwin_hall_log_sf_exact(S, M)
    return irwin_hall_log_sf_saddle(S, M)


# ----------------------------------------------------------------------------------------
# tilted lattice convolution (Li, Lattimore; also runs on the U-score for validation)
# ----------------------------------------------------------------------------------------


class _Law:
    """Null law of X = h(U), U ~ U(0,1), h increasing: what the lattice engine needs.

    ``x_top`` is the supremum of the support and ``log_atom`` = log P(X = x_top).
    ``log_cdf(x)`` is ``log P(X <= x)`` and ``log_sfc(x)`` is ``log P(x < X < x_top)`` for
    ``x < x_top``.  ``h_logit(z)`` is h at ``U = expit(z)`` (used for moments by quadrature
    only).  ``scale`` is the per-token scale of the body of the law and
    ``sum_lower_bound(m)`` a lower bound on the sum of ``m`` tokens (both steer the caps of
    :func:`lattice_log_sf`).
    """

    x_top: float
    log_atom: float = -math.inf
    scale: float = 1.0

    def sum_lower_bound(self, m: int) -> float:  # pragma: no cover - every law overrides it
        raise NotImplementedError

    def log_cdf_and_sfc(self, x):
        """``(log_cdf(x), log_sfc(x))`` (laws that invert h numerically share the work)."""
        return self.log_cdf(x), self.log_sfc(x)

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
    scale = 0.5

    def sum_lower_bound(self, m: int) -> float:
        return 0.0

    def h_logit(self, z):
        return special.expit(z)

    def log_cdf(self, x):
        with np.errstate(divide="ignore"):
            return np.log(np.clip(x, 0.0, 1.0))

    def log_sfc(self, x):
        with np.errstate(divide="ignore"):
            return np.log(np.clip(1.0 - x, 0.0, 1.0))


class _LiLaw(_Law):
    """Null law of Li et al.'s score in engine units ``X = (h(U) - log k)/a`` (module docstring).

    With ``Y = -log U ~ Exp(1)`` and ``d = b - a``: ``X = -Y + log1p(e^{-dY}/k)/a`` (``= -Y``
    when ``q = 0``), decreasing in ``Y`` from ``x_top = log1p(1/k)/a`` (possibly ``inf``).
    ``P(X <= x) = e^{-Y*(x)}`` where ``Y*`` solves ``X(Y*) = x`` (Newton's method).
    """

    def __init__(self, delta: float):
        self.delta = delta
        self.k, self.q, self.a, self.b = li_constants(delta)
        self.logk = math.log(self.k)
        if self.q > 0.0:
            self.d = self.b - self.a
            with np.errstate(over="ignore", divide="ignore"):
                self.x_top = float(np.float64(math.log1p(1.0 / self.k)) / np.float64(self.a))
        else:
            self.d = math.inf
            self.x_top = 0.0
        super().__init__()

    def sum_lower_bound(self, m: int) -> float:
        # X >= -Y, so the sum of m tokens is >= -Gamma(m): below its 1 - 1e-40 quantile
        # with probability <= 1e-40 (the cap then changes p by a relative <= M 1e-40)
        return -float(special.gammainccinv(m, _CAP_TAIL)) if m > 0 else 0.0

    def h_logit(self, z):
        return li_scaled_from_logu(-np.logaddexp(0.0, -z), self.delta)

    def _log_t(self, Y):
        """``log t`` with ``t = e^{-dY}/k`` (no underflow)."""
        return -self.d * Y - self.logk

    def _phi(self, Y):
        """``φ(Y) = log1p(e^{-dY}/k)/a`` (the spike term; ``X = -Y + φ(Y)``)."""
        with np.errstate(over="ignore", under="ignore"):
            return np.log1p(np.exp(self._log_t(Y))) / self.a

    def _log_phi(self, Y):
        """``log φ(Y)``, stable where ``t`` underflows (``log1p(t) = t (1 - t/2 + ...)``)."""
        lt = self._log_t(Y)
        with np.errstate(over="ignore", under="ignore", divide="ignore", invalid="ignore"):
            t = np.exp(lt)
            ratio = np.where(t > 1e-8, np.log(np.log1p(t) / np.where(t > 0, t, 1.0)), -0.5 * t)
        return ratio + lt - math.log(self.a)

    def _dlog_phi(self, Y):
        """``φ'(Y)/φ(Y) = -d t / ((1 + t) log1p(t))`` (``-d`` where ``t`` underflows)."""
        with np.errstate(over="ignore", under="ignore", divide="ignore", invalid="ignore"):
            t = np.exp(self._log_t(Y))
            r = np.where(t > 1e-8, t / ((1.0 + t) * np.log1p(t)), 1.0 - 0.5 * t)
        return -self.d * r

    def _Y_of(self, x):
        """``Y* >= 0`` with ``X(Y*) = x`` for ``x < x_top`` (0 for ``x >= x_top``).

        The root of ``φ(Y) = x + Y`` on ``Y > max(-x, 0)``, found by Newton's method on
        ``H(Y) = log φ(Y) - log(x + Y)`` (nearly linear both where the body ``-Y`` and where
        the spike ``e^{-dY}`` dominates), safeguarded by bisection inside the bracket
        ``[max(-x, 0), max(-x, 0) + φ(max(-x, 0))]``.
        """
        x = np.asarray(x, dtype=np.float64)
        lo = np.maximum(-x, 0.0)
        if not math.isfinite(self.d):
            return lo
        active = x < self.x_top
        phi_lo = self._phi(lo)
        # body: φ is below the rounding of Y (the spike is invisible), so Y* = -x
        todo = active & ~(phi_lo <= 4e-16 * lo)
        Y = np.where(active, lo, 0.0)
        if not todo.any():
            return Y
        xs, lo = x[todo], lo[todo]
        hi = lo + phi_lo[todo]
        with np.errstate(invalid="ignore", divide="ignore", over="ignore", under="ignore"):
            em = np.expm1(self.a * np.maximum(xs, 0.0)) * self.k
            Ys = np.where((xs > 0) & (em > 0) & (em < 1.0), -np.log(em) / self.d, np.inf)
        hi = np.minimum(hi, Ys)  # the spike-only root lies right of Y*

        def H_dH(y):
            with np.errstate(divide="ignore", invalid="ignore"):
                b = np.log(xs + y)
                H = self._log_phi(y) - b
                dH = self._dlog_phi(y) - 1.0 / (xs + y)
                # H within the rounding of the terms it is made of (log φ = log t - log a +
                # ..., with log t = -dy - log k): y is the root to working precision
                noise = 4e-16 * (np.abs(self._log_t(y)) + abs(math.log(self.a)) + np.abs(b) + 1.0)
                H = np.where(np.abs(H) <= noise, 0.0, H)
            return H, dH

        # Newton from whichever end of the bracket lands inside it (from the right end where
        # H is concave -- the spike -- and from the left end where it is convex), bisection
        # (geometric when the bracket spans orders of magnitude) when neither does
        H_lo, dH_lo = H_dH(lo)
        H_hi, dH_hi = H_dH(hi)
        y = hi.copy()
        fin = H_hi == 0
        for _ in range(200):
            with np.errstate(divide="ignore", invalid="ignore"):
                cand_r = hi - H_hi / dH_hi
                cand_l = lo - H_lo / dH_lo
            ok_r = (cand_r > lo) & (cand_r < hi)
            ok_l = (cand_l > lo) & (cand_l < hi)
            geo = (lo > 0) & (hi > 4.0 * lo)
            mid = np.where(geo, np.sqrt(lo * hi), 0.5 * (lo + hi))
            new = np.where(ok_r, cand_r, np.where(ok_l, cand_l, mid))
            base = np.where(ok_r, hi, np.where(ok_l, lo, new))
            new = np.where(fin, y, new)
            H, dH = H_dH(new)
            right = (H <= 0) & ~fin
            left = (H > 0) & ~fin
            hi, H_hi, dH_hi = (np.where(right, new, hi), np.where(right, H, H_hi),
                               np.where(right, dH, dH_hi))
            lo, H_lo, dH_lo = (np.where(left, new, lo), np.where(left, H, H_lo),
                               np.where(left, dH, dH_lo))
            y = new
            fin |= ((np.abs(new - base) <= 4e-16 * new) & (ok_r | ok_l)) | (
                hi - lo <= 4e-16 * hi) | (H == 0)
            if np.all(fin):
                break
        Y[todo] = y
        return Y

    def log_cdf_and_sfc(self, x):
        x = np.asarray(x, dtype=np.float64)
        Y = self._Y_of(x)
        top = x >= self.x_top
        with np.errstate(divide="ignore"):
            return np.where(top, 0.0, -Y), np.where(top, -np.inf, np.log(-np.expm1(-Y)))

    def log_cdf(self, x):
        return self.log_cdf_and_sfc(x)[0]

    def log_sfc(self, x):
        return self.log_cdf_and_sfc(x)[1]


class _CappedLaw(_Law):
    """``min(X, cap)`` for a base law: the base law below ``cap`` and an atom
    ``P(X >= cap)`` at ``cap`` (the capping device of the module docstring)."""

    def __init__(self, base: _Law, cap: float):
        self.base = base
        self.x_top = float(cap)
        self.scale = base.scale
        self._ls_cap = float(base.log_sfc(np.array([cap]))[0])
        self.log_atom = float(np.logaddexp(base.log_atom, self._ls_cap))
        super().__init__()

    def sum_lower_bound(self, m: int) -> float:
        return self.base.sum_lower_bound(m)

    def h_logit(self, z):
        return np.minimum(self.base.h_logit(z), self.x_top)

    def log_cdf_and_sfc(self, x):
        x = np.asarray(x, dtype=np.float64)
        lc, ls = self.base.log_cdf_and_sfc(np.minimum(x, self.x_top))
        with np.errstate(divide="ignore", invalid="ignore"):
            val = ls + np.log1p(-np.exp(np.minimum(self._ls_cap - ls, 0.0)))
        top = x >= self.x_top
        return (np.where(top, 0.0, lc),
                np.where(top, -np.inf, np.where(np.isnan(val), -np.inf, val)))

    def log_cdf(self, x):
        return self.log_cdf_and_sfc(x)[0]

    def log_sfc(self, x):
        return self.log_cdf_and_sfc(x)[1]


class _LattimoreLaw(_Law):
    def __init__(self, epsilon: float):
        self.eps = epsilon
        self.c = 2.0 - math.sqrt(epsilon)
        self.x_top = epsilon**-0.5 - self.c
        self.log_atom = math.log(epsilon)
        super().__init__()

    def sum_lower_bound(self, m: int) -> float:
        return m * (1.0 - self.c)  # every token is >= h(0) = 1 - c

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
    lf_hi, ls_hi = law.log_cdf_and_sfc(x_hi)
    lf_lo, ls_lo = law.log_cdf_and_sfc(x_lo)
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
            np.logaddexp(law.log_sfc(x_eta)[0], law.log_atom)
        )
        x_lo = max(x_lo, law.x_top - eta - (81.0 - log_top) / lam)
    span = law.x_top - x_lo
    # a tilted law that is almost all atom has sd ~ 0; its continuous part still spreads
    # over ~1/λ below x_top, which the lattice must resolve
    sd = max(sd, 0.1 / lam if lam > 0 else 0.0, 1e-9 * max(1.0, abs(law.x_top)), 1e-9 * span)
    # the sum lies in [M x_lo, M x_top] (up to e^-80 of the tilted mass): a window wider than
    # that only coarsens the lattice (for small M the 50 sd margin exceeds the support)
    half = min(sd * (12.0 * math.sqrt(M) + 50.0), M * span)
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
    offs, logs = [np.array([0])], [np.array([law.log_atom])]
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
    pi_atom = (math.exp(M * (law.log_atom + lam * law.x_top - logK))
               if law.log_atom > -math.inf else 0.0)

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


def _lattice_log_sf_single(law: _Law, M: int, s, n_grid: int) -> np.ndarray:
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


def lattice_log_sf(law: _Law, M: int, s, n_grid: int = DEFAULT_N_GRID, *, key=None):
    """``log P(Σ_{t<=M} X_t >= s)`` by tilted lattice convolution with capping.

    For ``M = 1`` the tail of the law is returned directly (exact).  Otherwise the scores
    ``s`` are grouped by the cap they need (``c = s - L_{M-1}``, rounded up to
    ``mean + scale 2^j``); each group runs on the capped law (or on ``law`` itself where the
    cap is not below its top).  ``key`` identifies ``law`` in the bounded law cache.
    """
    s = np.asarray(s, dtype=np.float64).reshape(-1)
    if M == 1:  # one token: the tail of the law itself, exactly
        _, ls = law.log_cdf_and_sfc(np.minimum(s, law.x_top))
        with np.errstate(divide="ignore"):
            out = np.where(s < law.x_top, np.logaddexp(ls, law.log_atom),
                           np.where(s == law.x_top, law.log_atom, -np.inf))
        return np.minimum(out, 0.0)
    out = np.empty(s.shape)
    need = s - law.sum_lower_bound(M - 1)
    mu0 = law.mean()
    with np.errstate(divide="ignore", invalid="ignore"):
        j = np.ceil(np.log2(np.maximum((need - mu0) / law.scale, 1.0)))
    caps = mu0 + law.scale * np.exp2(j)
    uncapped = ~(caps < law.x_top)
    if uncapped.any():
        out[uncapped] = _lattice_log_sf_single(law, M, s[uncapped], n_grid)
    for jj in np.unique(j[~uncapped]):
        sel = (~uncapped) & (j == jj)
        capped = _capped_law(key, int(jj)) if key is not None else _CappedLaw(
            law, mu0 + law.scale * 2.0 ** int(jj))
        out[sel] = _lattice_log_sf_single(capped, M, s[sel], n_grid)
    return out


@functools.lru_cache(maxsize=LAW_CACHE_SIZE)
def law(score: str, param: float | None = None) -> _Law:
    """The null law of one token of ``score`` (engine units), cached (bounded)."""
    if score == "li":
        return _LiLaw(param)
    if score == "lattimore":
        return _LattimoreLaw(param)
    return _UniformLaw()


@functools.lru_cache(maxsize=LAW_CACHE_SIZE)
def _capped_law(key: tuple, j: int) -> _Law:
    base = law(*key)
    return _CappedLaw(base, base.mean() + base.scale * 2.0**j)


def _law_key(score: str, params: dict) -> tuple:
    if score == "li":
        return ("li", float(params["delta"]))
    if score == "lattimore":
        return ("lattimore", float(params["epsilon"]))
    return ("u", None)


def law_for(score: str, params: dict) -> _Law:
    """:func:`law` for a validated ``(score, params)`` pair."""
    return law(*_law_key(score, params))


# ----------------------------------------------------------------------------------------
# dispatch
# ----------------------------------------------------------------------------------------


def null_log_sf(S, M, score: str, params: dict, *, engine_units: bool = False) -> np.ndarray:
    """Validated core: ``log P_H0(score >= S)`` for ``M`` scored tokens (arrays, equal shape).

    ``S`` is in the score's own units unless ``engine_units`` (Li: see :func:`to_engine_units`).
    """
    S = np.asarray(S, dtype=np.float64).reshape(-1)
    M = np.asarray(M, dtype=np.int64).reshape(-1)
    out = np.empty(S.shape)
    for m in np.unique(M):
        sel = M == m
        m = int(m)
        if score == "aaronson":
            out[sel] = gamma_log_sf(S[sel], m)
        elif score == "u":
            if params.get("method", "exact") == "chernoff":
                out[sel] = u_chernoff_log_bound(S[sel], m)
            else:
                out[sel] = irwin_hall_log_sf(S[sel], m)
        else:
            s = S[sel] if engine_units else to_engine_units(score, params, S[sel], m)
            key = _law_key(score, params)
            lw = law(*key)
            if score == "li" and lw.q == 0.0:
                # X = -Y exactly: P(Σ X >= s) = P(Gamma(m) <= -s)
                out[sel] = gamma_log_cdf(-s, m)
            else:
                out[sel] = lattice_log_sf(lw, m, s, params["n_grid"], key=key)
    return out
