"""Private kernels of :mod:`specbound.theory.acceptance` (inputs are assumed valid).

Two computations live here:

* the Poisson-matching exponents ``alpha_i = p_i sum_j (q_j/q_i - p_j/p_i)_+`` in
  ``O(n log n)`` per row (Liu, Wan, Gao & Gündüz 2026, arXiv:2609.21858, Thm B.1), and
* the exact acceptance probability of GLS / list coupling (Rowan et al. 2025) by a
  one-dimensional quadrature whose every node costs ``O(n)`` after one sort per row.

Both work on 2-D arrays ``(rows, n)`` of valid probability vectors.

Why the sort is enough
----------------------
Write ``rho_j = p_j / q_j`` (``+inf`` when ``q_j = 0``).  For a token ``i`` with
``0 < q_i``, the summand ``(p_i q_j / q_i - p_j)_+ = q_j (rho_i - rho_j)_+`` is positive
exactly for the tokens with a strictly smaller ratio, so

    alpha_i = rho_i * Q_<(rho_i) - P_<(rho_i),

where ``Q_<`` and ``P_<`` are the sums of ``q`` and ``p`` over tokens with ratio strictly
below ``rho_i``: cumulative sums along the tokens sorted by ``rho``.

For GLS the shifts ``c_j = s rho_j`` have the *same order for every s > 0*, and the
piecewise-linear exponent ``Phi(t) = sum_j q_j (t - c_j)_+`` satisfies
``Phi(c_i) = s * phi_i`` with ``phi_i = rho_i Q_< - P_<`` (the same expression as alpha).
Hence, with tokens sorted by ratio, ``S_l`` the cumulative sum of ``q`` up to and including
position ``l`` and ``d_l = rho_(l+1) - rho_(l)`` (``+inf`` for the last token with
``q > 0``),

    T(c_(k)) = sum_{l >= k} exp(-s phi_(l)) * (1 - exp(-s S_l d_l)) / S_l,
    r_(k)(s) = q_(k) * T(c_(k)),

one reversed cumulative sum per quadrature node and no sort per node.
"""

from __future__ import annotations

import math

import numpy as np

# Quadrature of the GLS extra term (see ``gls_acceptance``).
_GLS_TAIL = 1e-13  # bound on each of the two truncated tails of the s-integral
_GLS_H0 = 0.5  # initial step in u = log(s)
_GLS_TOL = 1e-11  # convergence: |I_h - I_{h/2}| <= _GLS_TOL for every row
_GLS_MIN_LEVEL = 2  # always refine at least to step _GLS_H0 / 4
_GLS_MAX_LEVEL = 9  # give up (RuntimeError) beyond step _GLS_H0 / 512


class RatioStructure:
    """Per-row quantities of a batch of pairs, with tokens sorted by ``rho = p/q``.

    Attributes (all ``(rows, n)`` arrays in sorted order unless stated):
    ``order`` (argsort indices), ``p``, ``q`` (``q`` set to 0 where the ratio is not finite),
    ``finite`` (``q > 0`` and ``p/q`` representable), ``phi`` (``rho Q_< - P_<``, ``+inf``
    where not finite), ``alpha`` (the Poisson-matching exponent with the zero conventions: 0 where
    ``p = 0``, ``+inf`` where ``p > 0`` and the ratio is infinite), ``S`` (inclusive
    cumulative sum of ``q``), ``Sd`` (``S * d``; ``+inf`` for the last finite token and 0
    after it).
    """

    __slots__ = ("order", "p", "q", "finite", "phi", "alpha", "S", "Sd", "d", "last", "inv_S")

    def __init__(self, p: np.ndarray, q: np.ndarray):
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            rho = np.where(q > 0, p / np.where(q > 0, q, 1.0), np.inf)
        key = np.where(np.isfinite(rho), rho, np.inf)
        order = np.argsort(key, axis=1, kind="stable")
        rs = np.take_along_axis(key, order, axis=1)
        ps = np.take_along_axis(p, order, axis=1)
        fin = np.isfinite(rs)
        qs = np.where(fin, np.take_along_axis(q, order, axis=1), 0.0)
        rows, n = rs.shape
        # cumulative sums over tokens with a strictly smaller ratio: exclusive sums taken at the
        # first position of each group of tied ratios (ties contribute exactly zero)
        P_ex = np.cumsum(ps, axis=1) - ps
        S = np.cumsum(qs, axis=1)
        Q_ex = S - qs
        idx = np.broadcast_to(np.arange(n), (rows, n))
        is_start = np.ones((rows, n), dtype=bool)
        is_start[:, 1:] = rs[:, 1:] != rs[:, :-1]
        start = np.maximum.accumulate(np.where(is_start, idx, 0), axis=1)
        Q_lt = np.take_along_axis(Q_ex, start, axis=1)
        P_lt = np.take_along_axis(P_ex, start, axis=1)
        with np.errstate(invalid="ignore", over="ignore"):
            phi = np.where(fin, np.maximum(rs * Q_lt - P_lt, 0.0), np.inf)
        alpha = np.where(ps > 0, phi, 0.0)
        # gaps between consecutive finite ratios; the last finite token's segment is infinite
        d = np.zeros((rows, n))
        with np.errstate(invalid="ignore"):
            d[:, :-1] = rs[:, 1:] - rs[:, :-1]
        n_fin = fin.sum(axis=1)
        last = np.zeros((rows, n), dtype=bool)
        has = n_fin > 0
        last[np.nonzero(has)[0], n_fin[has] - 1] = True
        with np.errstate(invalid="ignore", over="ignore"):
            Sd = np.where(last, np.inf, np.where(fin, S * np.where(fin, d, 0.0), 0.0))
        self.order = order
        self.p = ps
        self.q = qs
        self.finite = fin
        self.phi = phi
        self.alpha = alpha
        self.S = S
        self.Sd = Sd
        # segment lengths of the finite, non-last tokens (0 elsewhere); the last segment uses
        # 1/S, where S is the whole finite draft mass (>= 1/n, so 1/S never overflows)
        self.d = np.where(fin & ~last, d, 0.0)
        self.last = last
        self.inv_S = np.where(last, 1.0 / np.where(last, S, 1.0), 0.0)

    def unsort(self, x: np.ndarray) -> np.ndarray:
        """Put a sorted ``(rows, n)`` array back in the original token order."""
        out = np.empty_like(x)
        np.put_along_axis(out, self.order, x, axis=1)
        return out

    def draft_probs(self, s: float, m: np.ndarray | None = None) -> np.ndarray:
        """``r(s)`` (sorted order): P(a block other than the winner drafts token i | score s).

        ``r = 0`` for tokens with ``q = 0``; rows sum to 1.  ``m`` may pass in
        ``expm1(-s * phi)`` when the caller has it.
        """
        with np.errstate(invalid="ignore", over="ignore"):
            if m is None:
                m = np.expm1(-s * self.phi)  # phi = +inf -> -1
            # D = (1 - exp(-s S d)) / S, written as s d g(s S d) with g(x) = (1 - e^{-x})/x so
            # that a subnormal cumulative draft mass S never produces 1/S = inf
            x = s * self.Sd
            g = np.where(x > 0, -np.expm1(-x) / np.where(x > 0, x, 1.0), 1.0)
            D = np.where(self.last, self.inv_S, g * (s * self.d))
        term = (1.0 + m) * D  # exp(-s phi) * (1 - exp(-s S d)) / S
        T = np.cumsum(term[:, ::-1], axis=1)[:, ::-1]
        return np.clip(self.q * T, 0.0, 1.0)


def alpha_fast(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """The Poisson-matching exponents for valid ``(rows, n)`` arrays, ``O(n log n)`` per row."""
    st = RatioStructure(p, q)
    return st.unsort(st.alpha)


def _gls_extra_integrand(st: RatioStructure, s: float, B: int) -> np.ndarray:
    """Integrand (in s) of ``P_GLS - LML`` for every row, at one node ``s > 0``.

    ``B e^{-Bs} sum_i p_i (1 - e^{-s alpha_i}) [1 - (1 - r_i(s))^{B-1}]``.
    """
    # for tokens with p > 0 and a finite ratio alpha = phi; elsewhere the summand is 0 either
    # way (p = 0, or q = 0 so r = 0), so one expm1(-s phi) serves both factors
    with np.errstate(invalid="ignore"):
        m = np.expm1(-s * st.phi)
    r = st.draft_probs(s, m)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        others = -np.expm1((B - 1) * np.log1p(-r))  # 1 - (1 - r)^(B-1); r = 1 -> 1
    return B * math.exp(-B * s) * np.sum(st.p * (-m) * others, axis=1)


def gls_acceptance(p: np.ndarray, q: np.ndarray, B: int) -> np.ndarray:
    """Exact GLS acceptance (the 1-D integral of the module docstring) for valid ``(rows, n)``
    arrays.

    Splitting ``1 - (1 - e^{-s a})(1 - r)^{B-1} = e^{-s a} + (1 - e^{-s a})[1 - (1 - r)^{B-1}]``
    gives ``P_GLS = LML + extra`` where ``LML = sum_i p_i B/(B + alpha_i)`` is closed-form (the
    winning block accepts) and ``extra`` is a 1-D integral over ``s in (0, inf)``.  The extra
    integrand is at most ``B (B-1) sum_i p_i r_i(s) <= B (B-1)`` (``r`` sums to 1) and at most
    ``B e^{-Bs}``, so truncating to
    ``[s_lo, s_hi]`` with ``s_lo = 1e-13 / (B (B-1))`` and ``s_hi = -log(1e-13)/B`` costs at most
    ``2e-13``.  On ``u = log s`` the integrand is analytic and decays at both ends, so the
    trapezoidal rule converges geometrically; the step is halved until two successive values
    differ by at most ``1e-11`` in every row (the finer one is then far more accurate).
    """
    st = RatioStructure(p, q)
    with np.errstate(divide="ignore", invalid="ignore"):
        lml = np.sum(np.where(st.p > 0, st.p * (B / (B + st.alpha)), 0.0), axis=1)
    if B == 1:
        return lml
    u_lo = math.log(_GLS_TAIL / (B * (B - 1)))
    u_hi = math.log(-math.log(_GLS_TAIL) / B)
    n0 = max(8, math.ceil((u_hi - u_lo) / _GLS_H0))
    h = (u_hi - u_lo) / n0

    def f(u: float) -> np.ndarray:
        s = math.exp(u)
        return _gls_extra_integrand(st, s, B) * s

    # trapezoidal rule with endpoint halving, then successive midpoint refinements
    total = 0.5 * (f(u_lo) + f(u_hi))
    for k in range(1, n0):
        total = total + f(u_lo + k * h)
    estimate = total * h
    n_cur = n0
    for level in range(1, _GLS_MAX_LEVEL + 1):
        h_new = h / 2.0
        mids = np.zeros_like(total)
        for k in range(n_cur):
            mids = mids + f(u_lo + (2 * k + 1) * h_new)
        total = total + mids
        new = total * h_new
        delta = np.max(np.abs(new - estimate))
        estimate, h, n_cur = new, h_new, 2 * n_cur
        if level >= _GLS_MIN_LEVEL and delta <= _GLS_TOL:
            return lml + estimate
    raise RuntimeError(  # pragma: no cover - not reached on any tested input
        f"GLS quadrature did not converge (last change {delta:.3g} at step {h:.3g})"
    )
