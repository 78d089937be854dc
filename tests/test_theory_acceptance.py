"""Tests for the acceptance theory of Liu, Wan, Gao & Gündüz (2026), arXiv:2609.21858, §5 and
App. B (``specbound.theory``: divergences,
bounds, exact acceptance).

References used here are written independently of the package:

* ``naive_alpha``: the O(n^2) definition of alpha;
* ``mpfr_by_poisson_count``: MPFR acceptance by conditioning on the target winner and counting
  the other tokens' draft arrivals (a Poisson count), integrated with ``scipy.integrate.quad``;
* ``gls_by_conditioning``: GLS acceptance by conditioning each non-winning block on its own
  exponential ``E_i`` (not on the shift ``t``), nested ``quad``;
* ``gls_mpmath``: GLS acceptance in 30-digit arithmetic, the piecewise-exponential inner
  integral summed segment by segment and the outer one by tanh-sinh (``mpmath.quad``);
* Monte Carlo simulations of the two couplings themselves.
"""

from __future__ import annotations

import math
import time

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, stats

from specbound.testing.strategies import prob_pairs
from specbound.theory import (
    active_set_bound,
    exact_acceptance,
    kl_divergence,
    lml_bound,
    lml_nonidentical_bound,
    lml_relaxed_bound,
    no_communication_limit,
    pml_alpha,
    pml_bound,
    pml_weak_bound,
    tv_distance,
)
from specbound.theory._gls import RatioStructure
from tests._stats import assert_within_se

EXACT = 1e-12  # tolerance for identities that hold exactly up to rounding
GLS_TOL = 1e-10  # the GLS quadrature targets ~1e-13; the contract is 1e-8

# ------------------------------------------------------------------------------ references


def naive_alpha(p, q):
    """alpha_i = p_i sum_j (q_j/q_i - p_j/p_i)_+, straight from the definition (Liu et al.
    2026, Thm B.1)."""
    n = len(p)
    out = np.zeros(n)
    for i in range(n):
        if p[i] == 0:
            continue
        if q[i] == 0:
            out[i] = np.inf
            continue
        out[i] = math.fsum(max(0.0, p[i] * q[j] / q[i] - p[j]) for j in range(n))
    return out


def mpfr_by_poisson_count(p, q, B):
    """Alg. 6 with token clocks.  Given Y = i with first arrival G_{i,1} = g (joint density
    e^{-g/p_i} in g, summed over nothing else), the draft arrivals of token j scoring below
    g/q_i, given G_{j,1} > g p_j/p_i, are Poisson(g (q_j/q_i - p_j/p_i)_+); i is drafted iff
    fewer than B of them exist."""
    total = 0.0
    for i in range(len(p)):
        if p[i] == 0 or q[i] == 0:
            continue
        rate = sum(max(0.0, q[j] / q[i] - p[j] / p[i]) for j in range(len(p)) if j != i)

        def f(g, rate=rate, pi=p[i]):
            return math.exp(-g / pi) * stats.poisson.cdf(B - 1, g * rate)

        val, _ = integrate.quad(f, 0, np.inf, epsabs=1e-14, epsrel=1e-13, limit=400)
        total += val
    return total


def _joint_draft_and_above(p, q, i, s):
    """P(X_b = i, min_u E_{b,u}/p_u > s) for one block, by conditioning on E_{b,i} = e."""
    n = len(p)
    if q[i] == 0:
        return 0.0
    lo = s * p[i]
    kinks = sorted({s * p[j] * q[i] / q[j] for j in range(n) if j != i and q[j] > 0} | {lo})
    kinks = [k for k in kinks if k >= lo]

    def f(e):
        expo = e
        for j in range(n):
            if j != i:
                expo += max(s * p[j], e * q[j] / q[i])
        return math.exp(-expo)

    edges = [*kinks, np.inf]
    return sum(
        integrate.quad(f, a, b, epsabs=1e-15, epsrel=1e-13, limit=200)[0]
        for a, b in zip(edges[:-1], edges[1:], strict=True)
    )


def gls_by_conditioning(p, q, B):
    """GLS acceptance: winning score s ~ B e^{-Bs}, winner token i w.p. p_i; the winning block
    drafts i w.p. prod_j exp(-s (p_i q_j/q_i - p_j)_+); every other block, conditioned on its
    own target score exceeding s, drafts i w.p. P(X = i, W > s) / e^{-s}."""
    n = len(p)
    total = 0.0
    for i in range(n):
        if p[i] == 0:
            continue

        def win_block(s, i=i):
            if q[i] == 0:
                return 0.0
            return math.exp(-s * sum(max(0.0, p[i] * q[j] / q[i] - p[j]) for j in range(n)))

        def f(s, i=i):
            a = win_block(s)
            r = math.exp(s) * _joint_draft_and_above(p, q, i, s) if B > 1 else 0.0
            return B * math.exp(-B * s) * (1.0 - (1.0 - a) * (1.0 - r) ** (B - 1))

        val, _ = integrate.quad(f, 0, 40.0 / B, epsabs=1e-13, epsrel=1e-12, limit=200)
        total += p[i] * val
    return total


def gls_mpmath(p, q, B, dps=30):
    """30-digit GLS acceptance (Rowan et al. 2025; the 1-D integral of ``theory._gls``), inner
    integral summed segment by segment."""
    with mp.workdps(dps):
        n = len(p)
        P = [mp.mpf(float(x)) for x in p]
        Q = [mp.mpf(float(x)) for x in q]

        def r_all(s):
            c = [s * P[j] / Q[j] if Q[j] > 0 else None for j in range(n)]
            out = []
            for i in range(n):
                if c[i] is None:
                    out.append(mp.mpf(0))
                    continue
                pts = sorted({c[j] for j in range(n) if c[j] is not None and c[j] > c[i]})
                edges = [c[i], *pts, mp.inf]
                tot = mp.mpf(0)
                for a, b in zip(edges[:-1], edges[1:], strict=True):
                    act = [j for j in range(n) if c[j] is not None and c[j] <= a]
                    S = mp.fsum(Q[j] for j in act)
                    K = mp.fsum(Q[j] * c[j] for j in act)
                    hi = mp.mpf(0) if b == mp.inf else mp.exp(-(S * b - K))
                    tot += (mp.exp(-(S * a - K)) - hi) / S
                out.append(Q[i] * tot)
            return out

        alpha = []
        for i in range(n):
            if P[i] == 0:
                alpha.append(mp.mpf(0))
            elif Q[i] == 0:
                alpha.append(mp.inf)
            else:
                alpha.append(mp.fsum(max(0, P[i] * Q[j] / Q[i] - P[j]) for j in range(n)))

        def integrand(s):
            if s == 0:
                return mp.mpf(0)
            r = r_all(s)
            tot = mp.mpf(0)
            for i in range(n):
                if P[i] == 0:
                    continue
                fa = mp.mpf(1) if alpha[i] == mp.inf else -mp.expm1(-s * alpha[i])
                tot += P[i] * fa * (1 - r[i]) ** (B - 1)
            return B * mp.exp(-B * s) * tot

        cut = mp.mpf(40) / B
        fin = [1 / a for a in alpha if a not in (0, mp.inf) and 1 / a < cut]
        bps = [*sorted({mp.mpf(0), mp.mpf(1) / B, cut, *fin}), mp.inf]
        return float(1 - mp.quad(integrand, bps))


def simulate_gls(p, q, B, n_samples, rng, chunk=100_000):
    """Monte Carlo of list coupling: E_{b,u} ~ Exp(1); X_b = argmin_u E/q; Y = label of
    argmin_{(b,u)} E/p; accept iff Y in {X_b}."""
    n = len(p)
    hits = 0
    for start in range(0, n_samples, chunk):
        m = min(chunk, n_samples - start)
        E = rng.exponential(size=(m, B, n))
        sp = np.divide(E, p, out=np.full_like(E, np.inf), where=p > 0)
        sq = np.divide(E, q, out=np.full_like(E, np.inf), where=q > 0)
        Y = np.argmin(sp.reshape(m, B * n), axis=1) % n
        X = np.argmin(sq, axis=2)
        hits += int(np.sum(np.any(X == Y[:, None], axis=1)))
    return hits / n_samples


def simulate_mpfr(p, q, B, n_samples, rng, chunk=100_000):
    """Monte Carlo of Alg. 6: per token a unit Poisson process (B arrivals suffice); Y =
    argmin_u G_{u,1}/p_u; drafts = labels of the B smallest G_{u,j}/q_u."""
    n = len(p)
    hits = 0
    for start in range(0, n_samples, chunk):
        m = min(chunk, n_samples - start)
        G = np.cumsum(rng.exponential(size=(m, n, B)), axis=2)
        sp = np.divide(G[:, :, 0], p, out=np.full((m, n), np.inf), where=p > 0)
        Y = np.argmin(sp, axis=1)
        sq = np.divide(G, q[:, None], out=np.full_like(G, np.inf), where=(q > 0)[:, None])
        idx = np.argpartition(sq.reshape(m, n * B), B - 1, axis=1)[:, :B]
        labels = idx // B
        finite = np.take_along_axis(sq.reshape(m, n * B), idx, axis=1) < np.inf
        hits += int(np.sum(np.any((labels == Y[:, None]) & finite, axis=1)))
    return hits / n_samples


# ------------------------------------------------------------------------------ small cases

TINY_CASES = [
    # (p, q): full support, zeros in q (alpha = inf), zeros in p, ties, one-hot, disjoint
    ([0.5, 0.5], [0.9, 0.1]),
    ([0.2, 0.3, 0.5], [0.5, 0.3, 0.2]),
    ([0.6, 0.3, 0.1], [0.1, 0.3, 0.6]),
    ([0.5, 0.5, 0.0], [0.25, 0.25, 0.5]),
    ([0.4, 0.4, 0.2], [0.5, 0.0, 0.5]),
    ([0.25, 0.25, 0.25, 0.25], [0.1, 0.2, 0.3, 0.4]),
    ([0.7, 0.1, 0.1, 0.1], [0.1, 0.3, 0.3, 0.3]),
    ([0.58433105, 0.13343786, 0.01118117, 0.27104992], [0.01905333, 0.0, 0.74642514, 0.23452153]),
    ([1.0, 0.0, 0.0], [0.2, 0.3, 0.5]),
    ([0.3, 0.7], [1.0, 0.0]),
    ([0.0, 1.0], [1.0, 0.0]),
]


def _norm(v):
    v = np.asarray(v, dtype=float)
    return v / v.sum()


@pytest.mark.parametrize(("p", "q"), TINY_CASES)
@pytest.mark.parametrize("B", [1, 2, 3, 5])
def test_mpfr_matches_poisson_count_integration(p, q, B):
    p, q = _norm(p), _norm(q)
    ref = mpfr_by_poisson_count(p, q, B)
    assert exact_acceptance(p, q, "mpfr", B) == pytest.approx(ref, abs=1e-10)
    assert pml_bound(p, q, B) == pytest.approx(ref, abs=1e-10)


@pytest.mark.parametrize(("p", "q"), TINY_CASES)
@pytest.mark.parametrize("B", [1, 2, 3])
def test_gls_matches_conditioning_integration(p, q, B):
    p, q = _norm(p), _norm(q)
    ref = gls_by_conditioning(p, q, B)
    assert exact_acceptance(p, q, "gls", B) == pytest.approx(ref, abs=1e-8)


@pytest.mark.parametrize(("p", "q"), TINY_CASES[::2])
@pytest.mark.parametrize("B", [2, pytest.param(4, marks=pytest.mark.slow), 7])
def test_gls_matches_30_digit_reference(p, q, B):
    p, q = _norm(p), _norm(q)
    ref = gls_mpmath(p, q, B)
    assert exact_acceptance(p, q, "gls", B) == pytest.approx(ref, abs=GLS_TOL)


@pytest.mark.slow
def test_gls_30_digit_reference_zipf_vocab_12():
    n = 12
    p = _norm(1.0 / np.arange(1, n + 1) ** 1.3)
    q = _norm(np.roll(1.0 / np.arange(1, n + 1) ** 0.8, 3))
    for B in (3, 16):
        assert exact_acceptance(p, q, "gls", B) == pytest.approx(gls_mpmath(p, q, B), abs=GLS_TOL)


@pytest.mark.parametrize(
    ("p", "q", "B"),
    [
        ([0.5, 0.5], [0.9, 0.1], 2),
        ([0.6, 0.3, 0.1], [0.1, 0.3, 0.6], 3),
        ([0.4, 0.4, 0.2], [0.5, 0.0, 0.5], 2),
        ([0.7, 0.1, 0.1, 0.1], [0.1, 0.3, 0.3, 0.3], 4),
    ],
)
def test_monte_carlo_of_the_couplings(p, q, B):
    # 600k samples each; tolerance 5 standard errors of the exact value: per comparison the
    # false-failure probability is P(|Z| > 5) = 5.7e-7, so 8 comparisons < 5e-6 in total.
    # The band is <= 5 * 0.5 / sqrt(6e5) = 3.2e-3, below a 1% bias on any value >= 0.32
    # (all exact values here are in [0.39, 0.94]).
    p, q = _norm(p), _norm(q)
    n_samples = 600_000
    rng = np.random.default_rng(20260611 + B)
    for scheme, sim in (("mpfr", simulate_mpfr), ("gls", simulate_gls)):
        exact = exact_acceptance(p, q, scheme, B)
        assert exact >= 0.32
        est = sim(p, q, B, n_samples, rng)
        assert_within_se(est, exact, math.sqrt(exact * (1.0 - exact) / n_samples), z=5.0,
                         label=scheme)


def test_known_values():
    p, q = np.array([0.5, 0.5]), np.array([0.9, 0.1])
    assert tv_distance(p, q) == pytest.approx(0.4)
    assert exact_acceptance(p, q, "sd") == pytest.approx(0.6)
    assert no_communication_limit(p, q) == pytest.approx(0.6 / 1.4)
    assert kl_divergence(p, q) == pytest.approx(0.5 * math.log(0.5 / 0.9) + 0.5 * math.log(5))
    # alpha by hand: alpha_0 = 0.5 * (0.1/0.9 - 1)_+ = 0, alpha_1 = 0.5 * (0.9/0.1 - 1) = 4
    np.testing.assert_allclose(pml_alpha(p, q), [0.0, 4.0], atol=1e-15)
    assert exact_acceptance(p, q, "exp_race") == pytest.approx(0.5 + 0.5 / 5)
    assert pml_bound(p, q, 3) == pytest.approx(1 - 0.5 * 0.8**3)
    assert pml_weak_bound(p, q, 3) == pytest.approx(1 - 0.5 * (0.5 / 1.4) ** 3 - 0.5 * (5 / 6) ** 3)
    assert lml_bound(p, q, 3) == pytest.approx(0.5 + 0.5 * 3 / 7)
    assert lml_relaxed_bound(p, q, 3) == pytest.approx(0.5 * 2.7 / 3.2 + 0.5 * 0.3 / 0.8)
    assert active_set_bound(p, q, 3) == pytest.approx(pml_weak_bound(p, q, 3))


def test_zero_conventions():
    # p_1 > 0 = q_1: alpha = inf, never accepted; p_2 = 0: alpha reported 0, contributes nothing
    p = np.array([0.5, 0.3, 0.0, 0.2])
    q = np.array([0.4, 0.0, 0.3, 0.3])
    a = pml_alpha(p, q)
    assert a[1] == np.inf and a[2] == 0.0
    np.testing.assert_allclose(a, naive_alpha(p, q), rtol=1e-14)
    assert kl_divergence(p, q) == np.inf
    assert kl_divergence(q[[0, 3]] / 0.7, p[[0, 3]] / 0.7) < np.inf
    assert kl_divergence([1.0, 0.0], [0.5, 0.5]) == pytest.approx(math.log(2))
    # the q = 0 token fails: every scheme loses its mass 0.3
    for B in (1, 2, 8, 64):
        assert pml_bound(p, q, B) <= 0.7 + EXACT
        assert exact_acceptance(p, q, "gls", B) <= 0.7 + EXACT
        assert lml_bound(p, q, B) <= 0.7 + EXACT
    # large B: every token with p_i, q_i > 0 is eventually drafted
    assert pml_bound(p, q, 2000) == pytest.approx(0.7, abs=1e-6)
    assert exact_acceptance(p, q, "gls", 2000) == pytest.approx(0.7, abs=1e-6)
    # disjoint supports: nothing is ever accepted
    for scheme in ("sd", "exp_race", "mpfr", "gls"):
        assert exact_acceptance([1.0, 0.0], [0.0, 1.0], scheme) == 0.0
    assert no_communication_limit([1.0, 0.0], [0.0, 1.0]) == 0.0


def test_q_denormal_ratio_overflow_is_treated_as_zero():
    p = np.array([0.5, 0.5])
    q = np.array([1.0 - 1e-300, 1e-310])  # p/q overflows for token 1
    a = pml_alpha(p, q)
    assert a[1] == np.inf and np.isfinite(a[0])
    assert 0.0 <= exact_acceptance(p, q, "gls", 4) <= 0.5 + EXACT


# ------------------------------------------------------------------------------ alpha


@given(prob_pairs())
def test_fast_alpha_matches_quadratic_reference(pair):
    p, q = pair
    fast = pml_alpha(p, q)
    ref = naive_alpha(p, q)
    assert np.array_equal(np.isinf(fast), np.isinf(ref))
    fin = np.isfinite(ref)
    # rounding of rho_i Q_< - P_< is relative to (1 + alpha)
    np.testing.assert_array_less(np.abs(fast[fin] - ref[fin]), 1e-12 * (1.0 + ref[fin]))
    assert np.all(fast >= 0)


def test_fast_alpha_large_with_ties_and_batches():
    rng = np.random.default_rng(7)
    n = 700
    # many exact ties in the ratio p/q, plus zeros in both
    q = rng.integers(0, 4, size=(3, n)).astype(float)
    p = q * rng.integers(0, 3, size=(3, n))
    p[:, :5] = 1.0
    q[:, 5:10] = 0.0
    p /= p.sum(axis=1, keepdims=True)
    q /= q.sum(axis=1, keepdims=True)
    fast = pml_alpha(p, q)
    assert fast.shape == (3, n)
    for r in range(3):
        ref = naive_alpha(p[r], q[r])
        assert np.array_equal(np.isinf(fast[r]), np.isinf(ref))
        fin = np.isfinite(ref)
        np.testing.assert_array_less(np.abs(fast[r][fin] - ref[fin]), 1e-12 * (1 + ref[fin]))


def test_alpha_zero_iff_equal_and_identity():
    rng = np.random.default_rng(3)
    p = rng.dirichlet(np.ones(30))
    assert np.all(pml_alpha(p, p) == 0.0)
    q = rng.dirichlet(np.ones(30))
    a = pml_alpha(p, q)
    # sum_j max(p_j/p_i, q_j/q_i) = (1 + alpha_i)/p_i (Liu et al. 2026, proof of Thm B.2)
    lhs = np.array([np.sum(np.maximum(p / p[i], q / q[i])) for i in range(30)])
    np.testing.assert_allclose(lhs, (1 + a) / p, rtol=1e-13)


def test_alpha_n_50000_is_fast():
    rng = np.random.default_rng(0)
    p, q = rng.dirichlet(np.full(50_000, 0.3), size=2)
    t0 = time.perf_counter()
    a = pml_alpha(p, q)
    elapsed = time.perf_counter() - t0
    print(f"pml_alpha n=50,000: {elapsed * 1e3:.1f} ms")
    idx = rng.choice(50_000, size=20, replace=False)
    for i in idx:  # spot-check single entries against the definition
        ref = np.sum(np.maximum(p[i] * q / q[i] - p, 0.0))
        assert a[i] == pytest.approx(ref, rel=1e-10, abs=1e-12)


# ------------------------------------------------------------------------------ properties

Bs = st.integers(1, 12)


def _strict_gap_pml_lml(p, alpha, B):
    """Sum over tokens with p_i > 0 and 0 < alpha_i < inf of
    p_i [1 - (alpha/(1+alpha))^B - B/(B+alpha)], computed stably (>= 0, > 0 iff B > 1)."""
    m = (p > 0) & (alpha > 0) & np.isfinite(alpha)
    a = alpha[m]
    with np.errstate(divide="ignore"):
        one_minus = -np.expm1(-B * np.log1p(1.0 / a))
    return float(np.sum(p[m] * (one_minus - B / (B + a))))


@given(prob_pairs(), Bs)
def test_bounds_properties(pair, B):
    p, q = pair
    alpha = naive_alpha(p, q)
    pml = pml_bound(p, q, B)
    weak = pml_weak_bound(p, q, B)
    lml = lml_bound(p, q, B)
    rel = lml_relaxed_bound(p, q, B)
    mpfr = exact_acceptance(p, q, "mpfr", B)
    for v in (pml, weak, lml, rel, mpfr):
        assert 0.0 <= v <= 1.0
    # exact MPFR = PML
    assert mpfr == pytest.approx(pml, rel=EXACT, abs=EXACT)
    assert pml >= weak - EXACT
    # PML >= LML; strict iff B > 1 and some token has p_i > 0, 0 < alpha_i < inf (then the
    # gap is at least that token's term, computed here independently). It is NOT strict for
    # p != q in general: p = (.5, .5), q = (1, 0) has alpha = (0, inf) and PML = LML = 0.5.
    gap = _strict_gap_pml_lml(p, alpha, B)
    assert pml - lml >= gap * (1 - 1e-9) - EXACT
    if B > 1 and gap > 1e-11:
        assert pml > lml
    # PML-weak >= LML-relaxed; strict iff B > 1 and some token has p_i q_i > 0
    # (Bernoulli: (1 + x)^B > 1 + B x for x = q_i/p_i > 0, B > 1)
    m = (p > 0) & (q > 0)
    x = q[m] / p[m]
    gap_w = float(np.sum(p[m] * (-np.expm1(-B * np.log1p(x)) - B * x / (1 + B * x))))
    assert weak - rel >= gap_w * (1 - 1e-9) - EXACT
    if B > 1 and gap_w > 1e-11:
        assert weak > rel
    # non-decreasing in B
    assert pml_bound(p, q, B + 1) >= pml - EXACT
    assert pml_weak_bound(p, q, B + 1) >= weak - EXACT
    assert lml_bound(p, q, B + 1) >= lml - EXACT
    assert lml_relaxed_bound(p, q, B + 1) >= rel - EXACT
    assert active_set_bound(p, q, B) == weak


@given(prob_pairs())
def test_single_draft_properties(pair):
    p, q = pair
    er = exact_acceptance(p, q, "exp_race")
    sd = exact_acceptance(p, q, "sd")
    tv = tv_distance(p, q)
    assert 0 <= er <= 1 and 0 <= sd <= 1 and 0 <= tv <= 1
    assert sd == pytest.approx(1 - tv, abs=EXACT)
    # B = 1: PML = LML = exact exp-race = exact GLS = exact MPFR
    for v in (
        pml_bound(p, q, 1),
        lml_bound(p, q, 1),
        exact_acceptance(p, q, "mpfr", 1),
        exact_acceptance(p, q, "gls", 1),
        lml_nonidentical_bound(p, q[None, :]),
    ):
        assert v == pytest.approx(er, rel=EXACT, abs=EXACT)
    # exp-race >= (1 - TV)/(1 + TV) (holds for every pair; Bavarian et al. 2016) and <= 1 - TV
    assert er >= no_communication_limit(p, q) - EXACT
    assert sd >= er - EXACT
    # exp-race = sum_i 1 / sum_j max(p_j/p_i, q_j/q_i) (Liu et al. 2026, Alg. 2)
    direct = 0.0
    for i in np.nonzero((p > 0) & (q > 0))[0]:
        direct += 1.0 / np.sum(np.maximum(p / p[i], q / q[i]))
    assert er == pytest.approx(direct, rel=1e-12, abs=EXACT)
    assert kl_divergence(p, q) >= 0


@settings(max_examples=60)
@given(prob_pairs(max_size=120))
def test_gls_properties(pair):
    p, q = pair
    prev = {"gls": 0.0, "mpfr": 0.0}
    for B in (1, 2, 3, 5, 8):
        gls = exact_acceptance(p, q, "gls", B)
        mpfr = exact_acceptance(p, q, "mpfr", B)
        lml = lml_bound(p, q, B)
        assert 0.0 <= gls <= 1.0
        assert gls >= lml - GLS_TOL  # LML is the winning block alone
        # both draft B i.i.d. tokens from q, so P(accept) <= sum_i min(p_i, 1 - (1 - q_i)^B)
        cap = float(np.sum(np.minimum(p, -np.expm1(B * np.log1p(-np.minimum(q, 1 - 1e-16))))))
        assert gls <= cap + GLS_TOL and mpfr <= cap + EXACT
        assert gls >= prev["gls"] - GLS_TOL and mpfr >= prev["mpfr"] - EXACT
        prev = {"gls": gls, "mpfr": mpfr}
    # tokens with p_i > 0 = q_i are never accepted, whatever B
    lost = float(np.sum(p[q == 0]))
    assert prev["gls"] <= 1 - lost + GLS_TOL and prev["mpfr"] <= 1 - lost + EXACT


@given(prob_pairs(), st.integers(1, 16))
def test_equal_pair_accepts_with_probability_one(pair, B):
    p, _ = pair
    assert np.all(pml_alpha(p, p) == 0)
    for scheme in ("mpfr", "gls"):
        assert exact_acceptance(p, p, scheme, B) == pytest.approx(1.0, abs=EXACT)
    for scheme in ("sd", "exp_race"):
        assert exact_acceptance(p, p, scheme) == pytest.approx(1.0, abs=EXACT)
    assert pml_bound(p, p, B) == pytest.approx(1.0, abs=EXACT)
    assert lml_bound(p, p, B) == pytest.approx(1.0, abs=EXACT)
    assert tv_distance(p, p) == 0.0 and kl_divergence(p, p) == 0.0
    assert no_communication_limit(p, p) == pytest.approx(1.0, abs=EXACT)


@given(prob_pairs(), st.integers(1, 6))
def test_nonidentical_reduces_to_lml(pair, B):
    p, q = pair
    qs = np.tile(q, (B, 1))
    assert lml_nonidentical_bound(p, qs) == pytest.approx(lml_bound(p, q, B), rel=EXACT, abs=EXACT)


def test_nonidentical_mixed_drafts_by_hand():
    p = np.array([0.5, 0.5])
    qs = np.array([[0.9, 0.1], [0.5, 0.5], [0.0, 1.0]])
    # alpha^(1) = (0, 4), alpha^(2) = (0, 0), alpha^(3) = (inf, 0)
    expected = 0.5 * (1 / 3 + 1 / 3 + 0) + 0.5 * (1 / 7 + 1 / 3 + 1 / 3)
    assert lml_nonidentical_bound(p, qs) == pytest.approx(expected, rel=1e-14)


# ------------------------------------------------------------------------------ batches


def _batch(rng, rows, n):
    p = rng.dirichlet(np.full(n, 0.5), size=rows)
    q = rng.dirichlet(np.full(n, 0.5), size=rows)
    p[0, :2] = 0
    q[1, :3] = 0
    q[2] = p[2]
    return p / p.sum(1, keepdims=True), q / q.sum(1, keepdims=True)


def test_batches_equal_row_by_row():
    rng = np.random.default_rng(11)
    p, q = _batch(rng, 5, 9)
    funcs = [
        lambda a, b: tv_distance(a, b),
        lambda a, b: kl_divergence(a, b),
        lambda a, b: no_communication_limit(a, b),
        lambda a, b: pml_bound(a, b, 3),
        lambda a, b: pml_weak_bound(a, b, 3),
        lambda a, b: lml_bound(a, b, 3),
        lambda a, b: lml_relaxed_bound(a, b, 3),
        lambda a, b: active_set_bound(a, b, 2),
        lambda a, b: exact_acceptance(a, b, "sd"),
        lambda a, b: exact_acceptance(a, b, "exp_race"),
        lambda a, b: exact_acceptance(a, b, "mpfr", 4),
        lambda a, b: exact_acceptance(a, b, "gls", 4),
    ]
    for f in funcs:
        out = f(p, q)
        assert isinstance(out, np.ndarray) and out.shape == (5,)
        rows = [f(p[r], q[r]) for r in range(5)]
        assert all(type(v) is float for v in rows)
        np.testing.assert_allclose(out, rows, rtol=1e-13, atol=1e-13)
    # broadcasting a single p against a batch of q
    out = exact_acceptance(p[0], q, "gls", 3)
    np.testing.assert_allclose(out, [exact_acceptance(p[0], q[r], "gls", 3) for r in range(5)])
    a = pml_alpha(p, q)
    assert a.shape == (5, 9) and pml_alpha(p[0], q[0]).shape == (9,)
    np.testing.assert_array_equal(a[3], pml_alpha(p[3], q[3]))


def test_active_set_per_row_J():
    rng = np.random.default_rng(12)
    p, q = _batch(rng, 4, 6)
    J = np.array([1, 2, 5, 3])
    out = active_set_bound(p, q, J)
    np.testing.assert_allclose(out, [pml_weak_bound(p[r], q[r], J[r]) for r in range(4)])


def test_nonidentical_batch_shapes():
    rng = np.random.default_rng(13)
    p, _ = _batch(rng, 3, 5)
    qs = rng.dirichlet(np.ones(5), size=(3, 4))
    out = lml_nonidentical_bound(p, qs)
    assert out.shape == (3,)
    np.testing.assert_allclose(out, [lml_nonidentical_bound(p[r], qs[r]) for r in range(3)])
    # (B, n) drafts shared by every row of p; a single p shared by a batch of drafts
    np.testing.assert_allclose(
        lml_nonidentical_bound(p, qs[0]), [lml_nonidentical_bound(p[r], qs[0]) for r in range(3)]
    )
    np.testing.assert_allclose(
        lml_nonidentical_bound(p[0], qs), [lml_nonidentical_bound(p[0], qs[r]) for r in range(3)]
    )
    assert type(lml_nonidentical_bound(p[0], qs[0])) is float


def test_normalize_keyword():
    p = np.array([1.0, 3.0, 0.0])
    q = np.array([2.0, 1.0, 1.0])
    pn, qn = p / 4, q / 4
    assert pml_bound(p, q, 3, normalize=True) == pml_bound(pn, qn, 3)
    assert exact_acceptance(p, q, "gls", 3, normalize=True) == pytest.approx(
        exact_acceptance(pn, qn, "gls", 3), abs=1e-15
    )
    assert tv_distance(p, q, normalize=True) == tv_distance(pn, qn)
    np.testing.assert_array_equal(pml_alpha(p, q, normalize=True), pml_alpha(pn, qn))
    assert lml_nonidentical_bound(p, [q, 2 * q], normalize=True) == pytest.approx(
        lml_bound(pn, qn, 2)
    )


# ------------------------------------------------------------------------------ GLS internals


@given(prob_pairs(), st.floats(1e-6, 30.0))
def test_gls_draft_probabilities_sum_to_one(pair, s):
    # r_i(s) is the law of one non-winning block's draft: it sums to 1 over tokens
    p, q = pair
    st_ = RatioStructure(p[None], q[None])
    r = st_.unsort(st_.draft_probs(s))[0]
    assert np.all(r >= 0)
    assert r.sum() == pytest.approx(1.0, abs=1e-12)
    assert np.all(r[q == 0] == 0)


def test_gls_draft_probabilities_match_direct_integral():
    p = _norm([0.3, 0.1, 0.0, 0.6])
    q = _norm([0.2, 0.5, 0.3, 0.0])
    st_ = RatioStructure(p[None], q[None])
    for s in (0.01, 0.7, 4.0):
        r = st_.unsort(st_.draft_probs(s))[0]
        for i in range(4):
            ref = math.exp(s) * _joint_draft_and_above(p, q, i, s)
            assert r[i] == pytest.approx(ref, abs=1e-12)


def test_gls_timing_n_50000():
    # a sanity check of the O(n) per node design, not a timing assertion: report the time
    rng = np.random.default_rng(2026)
    p, q = rng.dirichlet(np.full(50_000, 0.3), size=2)
    t0, c0 = time.perf_counter(), time.process_time()
    val = exact_acceptance(p, q, "gls", 8)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(f"exact_acceptance(gls) n=50,000 B=8: {wall:.2f} s wall, {cpu:.2f} s CPU, {val:.6f}")
    assert lml_bound(p, q, 8) - GLS_TOL <= val <= 1.0


def test_strictness_conditions_are_sharp():
    # PML = LML although p != q and B > 1: alpha = (0, inf), no token with 0 < alpha < inf
    p, q = np.array([0.5, 0.5]), np.array([1.0, 0.0])
    np.testing.assert_array_equal(pml_alpha(p, q), [0.0, np.inf])
    for B in (2, 5, 40):
        assert pml_bound(p, q, B) == lml_bound(p, q, B) == 0.5
    # PML-weak = LML-relaxed for disjoint supports (no token with p_i q_i > 0)
    assert pml_weak_bound([1.0, 0.0], [0.0, 1.0], 3) == lml_relaxed_bound([1.0, 0.0], [0.0, 1.0], 3)
    # ...but PML-weak > LML-relaxed even for p = q when B > 1 (1 - 2^-B > B/(B+1))
    p = np.array([0.2, 0.8])
    assert pml_weak_bound(p, p, 2) == pytest.approx(0.75)
    assert lml_relaxed_bound(p, p, 2) == pytest.approx(2 / 3)
