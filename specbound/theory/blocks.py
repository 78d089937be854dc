r"""Tokens per speculative block: exact expectations by enumeration of the draft paths.

A speculative block (Leviathan et al. 2023, arXiv:2211.17192; Chen et al. 2023,
arXiv:2302.01318; Liu, Wan, Gao & Gündüz 2026, arXiv:2609.21858, Alg. 3/9 and 4/10) drafts
``L`` tokens, verifies them left to right and emits the accepted prefix plus one correction
or bonus token.  Given a next-token law of the target and of the draft in every context
(``p_fn(context)``, ``q_fn(context)``), the expected number of emitted tokens of one block
satisfies the recursion

.. math:: E_d(c) = 1 + \sum_x \sum_k P(\text{accept } x,\ \nu' = k \mid c, \nu)\,
          E_{d-1}(c x; k), \qquad E_0 = 1,

where ``nu`` is the number of drafts still consistent with the emitted prefix in context
``c`` and the acceptance law depends on the coupling:

``"sd"`` (standard speculative sampling, Alg. 1 of Liu et al. 2026; Leviathan et al. 2023)
    ``P(accept x) = min(p_x, q_x)`` (total ``1 - TV(p, q)``), ``B = 1``;
``"exp_race"`` (the exponential race / single-draft PFR, Alg. 2-3 of Liu et al. 2026)
    ``P(X = Y = x) = 1 / sum_j max(p_j/p_x, q_j/q_x)`` (:func:`_race_joint`), ``B = 1``;
``"mpfr"`` (direct multi-draft MPFR with token clocks, Alg. 6 and Alg. 4/10)
    the joint law of the target winner and its multiplicity among the ``nu`` drafts
    (:func:`mpfr_multiplicity_law`); the accepted child inherits that multiplicity.

The formulas assume fresh (independent) clocks in every context of the block, which is what
a random key and distinct context labels give (whole-prefix labels, for instance).

This module is deterministic and knows nothing about models: the distributions come from
the two callables, so a synthetic model, a logged model or a real network can be plugged in
(:func:`specbound.sim.expected_block_tokens` wraps the simulator's model objects).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import numpy as np
from scipy import special

from specbound._validation import as_block_inputs, as_choice, as_int, as_pair

__all__ = ["BLOCK_SCHEMES", "expected_block_tokens", "mpfr_multiplicity_law"]

#: couplings for which :func:`expected_block_tokens` has an exact per-context law
BLOCK_SCHEMES = ("sd", "exp_race", "mpfr")

#: largest multiplicity ``nu`` of :func:`mpfr_multiplicity_law`
MAX_MULTIPLICITY = 64
#: largest lookahead of :func:`expected_block_tokens` (the recursion is ``L`` deep)
MAX_LOOKAHEAD = 256
#: most distinct (context state, depth) pairs :func:`expected_block_tokens` enumerates
MAX_STATES = 1e6
#: most work of the exact MPFR laws of :func:`expected_block_tokens` with ``B > 1`` and of
#: :func:`mpfr_multiplicity_law`, in units of ``n^3`` per multiplicity step: a law for ``nu``
#: drafts evaluates, for each of the ``n`` winners, ``n`` cones of ``nu + 1`` Gauss nodes
#: over ``n`` tokens (the closed form of :func:`_cone_law_ge`); one unit is 0.3-1.3 us with
#: the enumeration's own bookkeeping (measured on a loaded 2-core machine: ``n = 17``,
#: ``B = L = 4``, window 2: 9e6 units in 9 s; ``n = 50``, ``B = L = 4``, window 1: 3.8e7
#: units in 11 s; ``n = 17``, ``B = L = 4``, no memo (window 3): 1.5e8 units in 201 s), so
#: the limit is about 15-60 s of work
MAX_MPFR_WORK = 5e7


def _mpfr_work(n: int, L: int, window: int | None, B: int) -> float:
    """Work units of the MPFR laws an enumeration may need (see :data:`MAX_MPFR_WORK`).

    Laws are memoised by (window state, multiplicity): at most ``sum_{d < L} n^d`` distinct
    states (contexts of depth ``d`` below the prompt), and at most ``sum_{k <= w} n^k`` with a
    window ``w``; each state may need the laws of every multiplicity ``nu <= B``, which cost
    ``n^3 (nu - 1)`` units, ``n^3 B (B - 1) / 2`` together.
    """
    states = sum(float(n) ** d for d in range(min(L, 64)))
    if window is not None:
        states = min(states, sum(float(n) ** k for k in range(min(window, 64) + 1)))
    return states * float(n) ** 3 * B * (B - 1) / 2.0


def _race_joint(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``P(X = Y = i)`` of the exponential race: ``1 / sum_j max(p_j/p_i, q_j/q_i)``.

    Liu, Wan, Gao & Gündüz (2026), arXiv:2609.21858, Alg. 2 (the single-draft PFR coupling);
    the sum over ``i`` is the exact acceptance ``sum_i p_i / (1 + alpha_i)``.  Tokens with
    ``p_i = 0`` or ``q_i = 0`` contribute 0.  Valid 1-D input assumed.
    """
    out = np.zeros_like(p)
    for i in np.flatnonzero((p > 0) & (q > 0)):
        out[i] = 1.0 / np.sum(np.maximum(p / p[i], q / q[i]))
    return out


#: beyond this score (in units of p_i) the integrand e^{-t} of :func:`_scaled_ge` underflows
_T_MAX = 745.0


def _scaled_ge(p_i: float, q_i: float, pj: np.ndarray, qj: np.ndarray, nu: int,
               k: int) -> float:
    """``P(Y = i, N_i >= k)`` (``k >= 2``) of :func:`mpfr_multiplicity_law`, valid input.

    The integral of the Notes there with the winner's score ``g = p_i t`` as variable:
    ``p_i int_0^inf e^{-t} E[F_Pois(nu - k; Lambda)] dt`` with ``Lambda = sum_{j != i}
    (c_j (p_i t + s) - t p_j)_+``, ``c_j = q_j / q_i`` and ``s ~ Gamma(k - 1)``.  In ``t``
    the integrand lives on a scale of 1 whatever ``p_i`` (in ``g`` it lives on ``[0, ~p_i]``,
    which adaptive quadrature on ``[0, inf)`` misses for ``p_i`` below about ``1e-5``), and no
    ratio ``p_j / p_i`` appears (it overflows when ``p_i`` is subnormal).  A ratio ``c_j``
    that overflows (``q_i`` subnormal) makes ``Lambda`` infinite for every ``(t, s) != 0``:
    token ``i`` is drafted twice with probability 0 in floating point, and the value is 0.
    """
    from scipy import integrate, special, stats

    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        c = qj / q_i
    if np.any(np.isinf(c)):
        return 0.0
    slope = c * p_i - pj  # d Lambda_j / dt; finite (c <= 1 / q_i, p_i <= 1)

    def inner(s):
        icpt = c * s

        def f(t):
            lam = np.sum(np.maximum(icpt + slope * t, 0.0))
            return np.exp(-t) * special.pdtr(nu - k, lam)

        neg = slope < 0
        kinks = np.sort(icpt[neg] / -slope[neg])
        # split at the kinks of Lambda, but not into pieces narrower than 1e-12 relative
        # (a near-degenerate p_j or q_j puts a kink at ~1e-300, where quad fails): the
        # integrand is continuous and at most e^{-t} <= 1, so a kink left inside a piece
        # only slows quad down
        kinks = kinks[(kinks > 1e-12) & (kinks < _T_MAX)]
        if kinks.size > 1:
            kinks = kinks[np.concatenate(
                [[True], np.diff(kinks) > 1e-12 * np.maximum(kinks[1:], 1.0)])]
        edges = np.concatenate([[0.0], kinks])
        val = 0.0
        for lo, hi in zip(edges[:-1], edges[1:], strict=True):
            val += integrate.quad(f, lo, hi, epsabs=1e-11, epsrel=1e-8)[0]
        val += integrate.quad(f, edges[-1], np.inf, epsabs=1e-11, epsrel=1e-8)[0]
        return val * stats.gamma.pdf(s, k - 1)

    # Lambda grows like c_j s: with a large ratio C = max_j c_j (q_i small against another
    # q_j) the integrand in s drops on the scale 1/C, which quad on [0, inf) does not
    # resolve; pieces at the decades from 1/C (at least 1e-13: below, a piece holds less
    # than its width, the integrand being <= 1) up to 1 give it the scale
    C = float(np.max(c, initial=0.0))
    edges = [0.0]
    if C > 1e3:
        edges += [10.0 ** e for e in range(max(-13, math.floor(-math.log10(C))), 1)]
    val = 0.0
    # c s -> inf for huge c: Lambda = inf, F_Pois = 0
    with np.errstate(over="ignore"), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", integrate.IntegrationWarning)
        for lo, hi in zip(edges[:-1], edges[1:], strict=True):
            val += integrate.quad(inner, lo, hi, epsabs=1e-10, epsrel=1e-7, limit=200)[0]
        val += integrate.quad(inner, edges[-1], np.inf, epsabs=1e-10, epsrel=1e-7,
                              limit=200)[0]
    # quad warns when it cannot meet the relative tolerance; an integral below the absolute
    # one (1e-10, the accuracy the law promises is 1e-8) is as accurate as asked for
    others = [w for w in caught if not issubclass(w.category, integrate.IntegrationWarning)]
    if len(others) < len(caught) and abs(val) > 1e-9:
        others.insert(0, next(w for w in caught
                              if issubclass(w.category, integrate.IntegrationWarning)))
    for w in others:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return p_i * val


def _cone_law_ge(p, q, nu):
    r"""``ge[i, k] = P(Y = i, N_i >= k)`` for ``k = 2..nu`` in closed form (NaN where a
    ratio ``q_j/q_i`` overflows or the result is not finite: those entries fall back to
    :func:`_scaled_ge`).

    In the integral of :func:`mpfr_multiplicity_law` (Notes) with the winner's score
    ``g = p_i t``, ``Lambda = sum_{j != i} (c_j (p_i t + s) - p_j t)_+`` (``c_j = q_j/q_i``)
    has its kinks on the rays ``s = kappa_j t``, ``kappa_j = p_j/c_j - p_i``: in each cone
    between consecutive rays it is linear, ``A t + b s`` (``A = sum_active (c_j p_i - p_j)``,
    ``b = sum_active c_j``).  With ``s = u t`` the ``t``-integral of ``p_i e^{-t}
    Gamma_{k-1}(s) e^{-Lambda} Lambda^r / r!`` is a Gamma integral, and the substitution
    ``y = u/(c0 + c1 u)`` (``c0 = 1 + A``, ``c1 = 1 + b``) turns the remaining ``u``-integral
    into that of the polynomial ``y^{k-2} z^r``, ``z = (A + b u)/(c0 + c1 u)`` linear in
    ``y``:

    ``P(Y = i, N_i >= k) = p_i (k - 1) sum_cones (1/c0) sum_{r <= nu - k} C(k - 1 + r, r)
    int_{y_lo}^{y_hi} y^{k-2} z^r dy``,

    which Gauss--Legendre with ``nu + 1`` nodes integrates exactly (degree ``<= nu - 2``).
    ``z`` is evaluated at the nodes as the sum of the non-negative active terms (no
    cancellation between tokens).  Cost ``O(n^3 nu)`` per law, vectorized: about 4 ms for
    ``n = 17`` and 50 ms for ``n = 50`` (``nu = 4``), against 10-40 s for the nested
    quadrature.
    """
    n = p.shape[0]
    ge = np.full((n, nu + 1), np.nan)
    rows = np.flatnonzero((p > 0) & (q > 0))
    if nu < 2 or rows.size == 0:
        return ge
    # rows in chunks: the work arrays hold (rows, cones, nodes, n) floats
    step = max(1, int(4_000_000 // (n * (n + 1) * (nu + 1))))
    for start in range(0, rows.size, step):
        chunk = rows[start:start + step]
        ge[chunk] = _cone_rows(p, q, nu, chunk)
    return ge


def _cone_rows(p, q, nu, rows):
    """:func:`_cone_law_ge` for the rows ``rows`` (``p_i > 0``, ``q_i > 0``)."""
    n = p.shape[0]
    m = rows.size
    me = np.arange(n)[None, :] == rows[:, None]
    with np.errstate(all="ignore"):
        cq = q[None, :] / q[rows, None]  # (m, n): c_j = q_j / q_i
        ok = np.all(np.isfinite(cq), axis=1)
        cq = np.where(np.isfinite(cq) & ~me, cq, 0.0)
        pj = np.where(me, 0.0, p[None, :])
        pi = p[rows, None]
        kap = np.where(cq > 0, pj / cq - pi, np.inf)  # never active when q_j = 0
        kap = np.where(np.isnan(kap), np.inf, kap)
        brk = np.sort(np.clip(kap, 0.0, None), axis=1)  # (m, n), inf at the end
        lo = np.concatenate([np.zeros((m, 1)), brk], axis=1)  # (m, n + 1) cones
        hi = np.concatenate([brk, np.full((m, 1), np.inf)], axis=1)
        valid = np.isfinite(lo) & (hi > lo)
        lo_s = np.where(valid, lo, 0.0)
        fin = np.isfinite(hi)
        hi_s = np.where(fin, hi, 0.0)
        mid = np.where(fin, 0.5 * (lo_s + hi_s), 2.0 * lo_s + 1.0)
        act = kap[:, None, :] < mid[:, :, None]  # (m, cones, n)
        A = np.sum(np.where(act, cq[:, None, :] * pi[:, :, None] - pj[:, None, :], 0.0), axis=2)
        b = np.sum(np.where(act, cq[:, None, :], 0.0), axis=2)
        c0 = 1.0 + A
        c1 = 1.0 + b
        ylo = lo_s / (c0 + c1 * lo_s)
        yhi = np.where(fin, hi_s / (c0 + c1 * hi_s), 1.0 / c1)
        half = np.where(valid, 0.5 * (yhi - ylo), 0.0)
        x, w = np.polynomial.legendre.leggauss(nu + 1)
        y = half[..., None] * (x + 1.0) + ylo[..., None]  # (m, cones, nodes)
        wy = half[..., None] * w
        # z = sum_active (c_j (p_i + u) - p_j)/(c0 + c1 u) written in y (u = c0 y/(1 - c1 y)):
        # each term ((c_j p_i - p_j)(1 - c1 y) + c_j c0 y)/c0, with no division by 1 - c1 y
        # (which vanishes at the end of the last cone)
        one_m = 1.0 - c1[..., None] * y
        t = ((cq[:, None, None, :] * pi[:, :, None, None] - pj[:, None, None, :])
             * one_m[..., None] + cq[:, None, None, :] * (c0[..., None] * y)[..., None])
        z = np.sum(np.where(act[:, :, None, :], np.maximum(t, 0.0), 0.0), axis=3)
        z = z / c0[..., None]
        base = np.where(valid[..., None], wy / c0[..., None], 0.0)
        out = np.full((m, nu + 1), np.nan)
        for k in range(2, nu + 1):
            r = np.arange(nu - k + 1)
            poly = np.polynomial.polynomial.polyval(z, special.comb(k - 1 + r, r))
            val = np.sum(np.where(valid[..., None], base * y ** (k - 2) * poly, 0.0),
                         axis=(1, 2))
            out[:, k] = p[rows] * (k - 1) * val
    out[~ok] = np.nan
    out[~np.isfinite(out)] = np.nan
    return out


def _multiplicity_law(p: np.ndarray, q: np.ndarray, nu: int) -> np.ndarray:
    """:func:`mpfr_multiplicity_law` on valid 1-D input (no checks)."""
    n = p.shape[0]
    ge = np.zeros((n, nu + 2))  # ge[i, k] = P(Y = i, N_i >= k)
    cone = _cone_law_ge(p, q, nu)  # k >= 2 in closed form (NaN rows: quadrature)
    for i in np.flatnonzero(p > 0):
        ge[i, 0] = p[i]
        if q[i] <= 0:
            continue
        others = np.arange(n) != i
        qj, pj = q[others], p[others]
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            finite = bool(np.all(np.isfinite(qj / q[i])) and np.all(np.isfinite(pj / p[i])))
        if finite:
            a = np.sum(np.maximum(qj / q[i] - pj / p[i], 0.0))  # alpha_i / p_i
            alpha = a * p[i]
            ge[i, 1] = p[i] * (1.0 - (alpha / (1.0 + alpha)) ** nu)
        else:
            # a subnormal p_i or q_i: q_j / q_i or p_j / p_i overflows.  1 / (1 + alpha_i)
            # = q_i / (q_i + sum_j (q_j p_i - p_j q_i)_+) has only products of numbers <= 1
            r = q[i] / (q[i] + np.sum(np.maximum(qj * p[i] - pj * q[i], 0.0)))
            ge[i, 1] = p[i] * -math.expm1(nu * math.log1p(-r)) if r < 1 else p[i]
        for k in range(2, nu + 1):
            ge[i, k] = (cone[i, k] if np.isfinite(cone[i, k])
                        else _scaled_ge(float(p[i]), float(q[i]), pj, qj, nu, k))
    # P(N_i >= k) is non-increasing in k and in [0, p_i]: quadrature errors (about 1e-16
    # near the ends) must not make a probability of the law negative
    np.clip(ge, 0.0, None, out=ge)
    np.minimum.accumulate(ge, axis=1, out=ge)
    return ge[:, :-1] - ge[:, 1:]


def mpfr_multiplicity_law(p, q, nu, *, normalize: bool = False) -> np.ndarray:
    r"""Joint law of the MPFR target winner and its multiplicity among ``nu`` drafts.

    Returns ``J`` with ``J[i, k] = P(Y = i, N_i = k)``, ``k = 0..nu``, where
    ``Y = argmin_v G_{v,1}/p_v`` and ``N_i`` is the number of the ``nu`` direct MPFR drafts
    (Liu, Wan, Gao & Gündüz 2026, arXiv:2609.21858, Alg. 6, on ``q``) equal to ``i``.

    Parameters
    ----------
    p, q : array_like, shape (n,)
        Target and draft distributions.
    nu : int, 1 <= nu <= 64
        Number of drafts (the multiplicity of the context in the MPFR context tree).
    normalize : bool
        Rescale ``p`` and ``q`` to sum to 1.

    Returns
    -------
    ndarray, shape (n, nu + 1)
        Rows sum to ``p`` (up to the quadrature error, about 1e-8); ``1 - J[:, 0].sum()`` is
        the exact MPFR acceptance ``1 - sum_i p_i (alpha_i/(1+alpha_i))^nu``
        (:func:`specbound.theory.exact_acceptance` with ``scheme="mpfr"``).

    Notes
    -----
    Derivation (extends the proof that the PML expression of Liu et al. 2026, Thm. B.1, is the
    exact acceptance of Alg. 6): given ``Y = i`` and ``G_{i,1} = g`` (density
    ``e^{-g/p_i}``), token ``j``'s draft arrivals form a Poisson process of rate ``q_j`` on
    score times ``t > g p_j / (p_i q_j)``, and ``i``'s ``k``-th draft arrival is at
    ``(g + Gamma_{k-1}) / q_i``.  Hence ``N_i >= k`` iff at most ``nu - k`` other arrivals
    precede it:
    ``P(Y=i, N_i>=k) = int_0^inf e^{-g/p_i} E[F_Pois(nu-k; Lambda(g, Gamma_{k-1}))] dg`` with
    ``Lambda(g, s) = sum_{j != i} (q_j (g + s)/q_i - g p_j/p_i)_+``.  ``k = 1`` has the closed
    form ``p_i (1 - (alpha_i/(1+alpha_i))^nu)``; ``k >= 2`` has a closed form too: in the
    cones between the rays where ``Lambda`` has its kinks the double integral reduces to
    that of a polynomial of degree ``<= nu - 2``, integrated exactly by Gauss--Legendre
    (:func:`_cone_law_ge`; ``O(n^3 nu)`` per law, equal to the former nested quadrature to
    its tolerance, 1e-8, and to a 30-digit mpmath evaluation to 1e-13 in
    ``tests/test_theory_mpfr_exact.py``).  Where a ratio ``q_j/q_i`` overflows (subnormal
    ``q_i``) the nested adaptive quadrature is kept (scipy ``quad`` in ``t = g / p_i``,
    split at the kinks of ``Lambda``).  Checked against Monte Carlo of the kernels in
    ``tests/test_sim_decode.py``.  Zeros: a token with ``p_i = 0`` has an all-zero row; one
    with ``q_i = 0`` is never drafted (``J[i, 0] = p_i``).  Subnormal entries (where
    ``q_j / q_i`` or ``p_j / p_i`` overflow) use the overflow-free forms
    ``1 / (1 + alpha_i) = q_i / (q_i + sum_j (q_j p_i - p_j q_i)_+)`` and the integral in
    ``t``; every entry of ``J`` is in ``[0, p_i]`` and non-negative (``P(N_i >= k)`` is made
    non-increasing in ``k`` against quadrature rounding).  When ``q_i`` is small against
    another ``q_j`` (``C = max_j q_j / q_i > 1e3``) the integrand in ``s`` drops on the scale
    ``1/C`` and the ``s``-integral is taken in pieces at the decades from ``1/C`` to 1.

    Raises
    ------
    ValueError
        ``p``/``q`` not distributions of equal length (named), ``nu`` not an integer in
        ``[1, 64]``, or ``n^3 (nu - 1)`` above :data:`MAX_MPFR_WORK` (``5e7``: e.g.
        ``n = 368`` for two drafts), refused up front instead of computing for minutes.
    """
    p2, q2, batched = as_pair(p, q, normalize=normalize)
    if batched:
        raise ValueError(f"p: must be 1-D (one context), got shape {np.shape(p)}")
    nu = as_int(nu, "nu", min_value=1, max_value=MAX_MULTIPLICITY)
    n = p2.shape[1]
    work = float(n) ** 3 * (nu - 1)
    if work > MAX_MPFR_WORK:
        raise ValueError(
            f"nu: the law for nu = {nu} drafts over {n} tokens needs about {work:.3g} work "
            f"units (n^3 (nu - 1)), above the limit MAX_MPFR_WORK = "
            f"{MAX_MPFR_WORK:.0e} (about a minute); use a smaller nu or vocabulary, or simulate"
        )
    return _multiplicity_law(p2[0], q2[0], nu)


def _n_states(n: int, L: int, window: int | None) -> float:
    """Upper bound on the (context state, depth) pairs visited by the enumeration."""
    if n <= 1:
        return float(L)
    if window is None:
        return math.inf if L * math.log(n) > math.log(MAX_STATES) + 1e-12 else float(n) ** L
    if window * math.log(n) > math.log(MAX_STATES) + 1e-12:
        return math.inf
    short = sum(float(n) ** d for d in range(1, min(L, window) + 1))
    return short + max(L - window, 0) * float(n) ** window


def expected_block_tokens(p_fn: Callable, q_fn: Callable, prompt, scheme: str, *, L: int = 4,
                          B: int = 1, context_length: int | None = None) -> float:
    """Exact expected number of tokens emitted by one speculative block (theory of the AATPS).

    Propagates the exact per-context acceptance along the block by recursion over the draft
    paths (module docstring): ``E_d(c) = 1 + sum_x P(accept x | c) E_{d-1}(c x)`` with
    ``E_0 = 1`` (the bonus token).

    Parameters
    ----------
    p_fn, q_fn : callable
        ``p_fn(context) -> p`` and ``q_fn(context) -> q``: the target's and the draft's
        next-token distributions (1-D, equal length) after ``context``, a 1-D int64 array of
        token ids (the prompt followed by the path).  Called once per distinct context
        state; each output is validated.
    prompt : sequence of int
        The context the block starts from.
    scheme : {"sd", "exp_race", "mpfr"}
        The per-context coupling (module docstring): ``"sd"`` for standard speculative
        sampling (vsps, mse, mse_pseudo), ``"exp_race"`` for single-draft PFR (pfr,
        pfr_nowm, mws), ``"mpfr"`` for multi-draft MPFR.
    L : int, 1 <= L <= 256
        Lookahead (drafts per block).  The block is a full one (``L`` drafts and a bonus).
    B : int >= 1
        Number of drafts; ``B > 1`` only for ``"mpfr"``.
    context_length : int >= 0 or None
        Window of the models: ``p_fn`` and ``q_fn`` depend on the last ``context_length``
        tokens only (None: on the whole context).  The enumeration is memoised by that
        window, so a first-order chain (``context_length=1``) costs ``O(L n^2)`` instead of
        ``O(n^L)``.

    Returns
    -------
    float
        ``E_L(prompt)``, between 1 and ``L + 1``.

    Raises
    ------
    ValueError
        Unknown ``scheme``; ``B > 1`` for a single-draft scheme; ``L`` out of range or so
        large that more than 1e6 context states would be enumerated; for ``scheme="mpfr"``
        with ``B > 1``, an enumeration whose exact laws would need more than
        :data:`MAX_MPFR_WORK` work units (named ``B``; refused up front
        instead of running for minutes); a callable returning something that is not a
        distribution, or distributions of different lengths.

    Notes
    -----
    Assumes independent clocks in distinct contexts (a random key and distinct context
    labels).  Checked against the simulated AATPS of :func:`specbound.sim.speculative_decode`
    (``tests/test_sim_decode.py``) and against the martingale compensator of
    :func:`specbound.sim.acceptance_compensator` (``tests/test_figs_wm_studies.py``).
    """
    h, w = as_block_inputs(p_fn, q_fn, prompt, context_length)
    scheme = as_choice(scheme, "scheme", BLOCK_SCHEMES)
    L = as_int(L, "L", min_value=1, max_value=MAX_LOOKAHEAD)
    B = as_int(B, "B", min_value=1, max_value=MAX_MULTIPLICITY)
    if B > 1 and scheme != "mpfr":
        raise ValueError(f"B: scheme {scheme!r} is single-draft (B must be 1)")

    def check_size(n):
        if _n_states(n, L, w) > MAX_STATES:
            raise ValueError(
                f"L: enumerating the draft paths of depth {L} over {n} tokens "
                f"visits more than {MAX_STATES:.0e} context states (pass the models' "
                f"context_length, or use a smaller L or vocabulary)"
            )
        work = _mpfr_work(n, L, w, B) if scheme == "mpfr" else 0.0
        if work > MAX_MPFR_WORK:
            raise ValueError(
                f"B: the exact MPFR law with B = {B} drafts over {n} tokens "
                f"at depth L = {L} needs about {work:.3g} work units "
                f"(n^3 B (B - 1) / 2 per context state), above the limit "
                f"MAX_MPFR_WORK = {MAX_MPFR_WORK:.0e} (about a minute); use a smaller B, "
                "L or vocabulary (or pass the models' context_length), or simulate"
            )

    state_of, pair = block_laws(p_fn, q_fn, w, check_size)
    laws: dict = {}
    memo: dict = {}

    def law(ctx, nu):
        key = (state_of(ctx), nu)
        if key not in laws:
            p, q = pair(ctx)
            if scheme == "sd":
                laws[key] = np.minimum(p, q)[:, None]
            elif scheme == "exp_race":
                laws[key] = _race_joint(p, q)[:, None]
            else:
                laws[key] = _multiplicity_law(p, q, nu)[:, 1:]
        return laws[key]

    def E(ctx, d, nu):
        if d == 0:
            return 1.0
        key = (state_of(ctx), d, nu)
        if key not in memo:
            J = law(ctx, nu)
            tot = 1.0
            for x in range(J.shape[0]):
                for k in range(J.shape[1]):
                    if J[x, k] > 0:
                        tot += J[x, k] * E(ctx + [x], d - 1, k + 1)
            memo[key] = tot
        return memo[key]

    return E(h, L, B)


def block_laws(p_fn: Callable, q_fn: Callable, w: int | None,
               check_size: Callable[[int], None]):
    """Internal API: the validated, memoised model laws of an exact enumeration over draft
    paths (:func:`expected_block_tokens`, :func:`specbound.theory.blockver_block_tokens`,
    :func:`specbound.theory.hsd_block_tokens`).

    ``w``: the models' window from :func:`specbound._validation.as_block_inputs` (None: the
    whole context).  Returns ``(state_of, law)``: ``state_of(ctx)`` the window of a context
    (a tuple, the memo key) and ``law(ctx) -> (p, q)`` the 1-D target and draft laws after
    ``ctx`` (a list of token ids), computed once per window.  ``check_size(n)`` is called
    with the vocabulary size at the first law (it raises ``ValueError`` for an enumeration
    too large); a callable returning a batch, or a vocabulary size that changes, raises
    ``ValueError`` naming ``p_fn``.
    """

    def state_of(ctx):
        if w is None:
            return tuple(ctx)
        return tuple(ctx[max(len(ctx) - w, 0):]) if w > 0 else ()

    laws: dict = {}
    n_vocab: list[int] = []

    def law(ctx):
        key = state_of(ctx)
        if key not in laws:
            c = np.array(ctx, dtype=np.int64)
            p2, q2, batched = as_pair(p_fn(c), q_fn(c), names=("p_fn(context)",
                                                                "q_fn(context)"))
            if batched:
                raise ValueError("p_fn: must return one 1-D distribution per context")
            n = p2.shape[1]
            if not n_vocab:
                n_vocab.append(n)
                check_size(n)
            elif n != n_vocab[0]:
                raise ValueError(f"p_fn: vocabulary size changed from {n_vocab[0]} to {n}")
            laws[key] = (p2[0], q2[0])
        return laws[key]

    return state_of, law
