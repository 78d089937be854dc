"""The closed-form MPFR multiplicity law (theory.blocks._cone_law_ge): exact rational
arithmetic on small inputs, the former nested quadrature on random inputs, and the exact
first-block AATPS of MPFR at V = 17, B = 4, L = 4 against Monte Carlo of the decoder."""

from __future__ import annotations

from fractions import Fraction
from math import comb

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specbound import sim
from specbound.testing.strategies import prob_pairs
from specbound.theory import blocks as TB


def _exact_ge(p, q, i, nu, k):
    """``P(Y = i, N_i >= k)`` by the cone formula in exact rational arithmetic: the cones
    between the kink rays, the polynomial ``y^{k-2} (α + β y)^r`` integrated term by term
    (no quadrature, no rounding)."""
    P = [Fraction(float(x)) for x in p]
    Q = [Fraction(float(x)) for x in q]
    others = [j for j in range(len(P)) if j != i and Q[j] > 0]
    c = {j: Q[j] / Q[i] for j in others}
    kap = {j: P[j] / c[j] - P[i] for j in others}
    brk = sorted({max(Fraction(0), v) for v in kap.values()} | {Fraction(0)})
    total = Fraction(0)
    for a_idx, lo in enumerate(brk):
        hi = brk[a_idx + 1] if a_idx + 1 < len(brk) else None
        probe = lo + 1 if hi is None else (lo + hi) / 2
        act = [j for j in others if kap[j] < probe]
        A = sum((c[j] * P[i] - P[j] for j in act), Fraction(0))
        b = sum((c[j] for j in act), Fraction(0))
        c0, c1 = 1 + A, 1 + b
        ylo = lo / (c0 + c1 * lo)
        yhi = Fraction(1) / c1 if hi is None else hi / (c0 + c1 * hi)
        alpha, beta = A / c0, b - A * c1 / c0
        for r in range(nu - k + 1):
            integral = sum(
                comb(r, m) * alpha ** (r - m) * beta ** m
                * (yhi ** (k - 1 + m) - ylo ** (k - 1 + m)) / (k - 1 + m)
                for m in range(r + 1))
            total += comb(k - 1 + r, r) * integral / c0
    return P[i] * (k - 1) * total


@pytest.mark.parametrize(("p", "q", "nu"), [
    ([0.5, 0.3, 0.2], [0.2, 0.3, 0.5], 3),
    ([0.1, 0.2, 0.3, 0.4], [0.4, 0.1, 0.4, 0.1], 4),
    ([0.7, 0.0, 0.3, 1e-6], [0.25, 0.25, 0.0, 0.5], 3),
])
def test_cone_law_equals_exact_rational_arithmetic(p, q, nu):
    """The float implementation against the same formula in exact rationals: 1e-13
    relative (exact up to rounding: Gauss-Legendre with nu + 1 nodes is exact on the
    polynomials of degree <= nu - 2).  A 20-digit mpmath 2-D quadrature of the original
    integral agreed with the first case to 4e-11 (its own accuracy; 6 minutes, not run
    here)."""
    p, q = np.array(p), np.array(q)
    ge = TB._cone_law_ge(p, q, nu)
    for i in range(p.size):
        if p[i] == 0 or q[i] == 0:
            assert np.all(np.isnan(ge[i]))
            continue
        for k in range(2, nu + 1):
            exact = float(_exact_ge(p, q, i, nu, k))
            assert ge[i, k] == pytest.approx(exact, rel=1e-13, abs=1e-300)


@pytest.mark.slow
@settings(max_examples=25, deadline=None, derandomize=True)
@given(prob_pairs(min_size=2, max_size=5, kinds=("dirichlet", "zipf", "near_uniform",
                                                 "skewed")), st.integers(2, 4))
def test_cone_law_equals_the_nested_quadrature(pq, nu):
    """Against the former nested adaptive quadrature (an independent evaluation of the
    integral of ``mpfr_multiplicity_law``'s Notes, accurate to about 1e-8): within 1e-8.
    Slow (the quadrature takes about 40 s for these 25 pairs)."""
    p, q = pq
    ge = TB._cone_law_ge(p, q, nu)
    for i in np.flatnonzero((p > 0) & (q > 0)):
        o = np.arange(p.size) != i
        for k in range(2, nu + 1):
            ref = TB._scaled_ge(float(p[i]), float(q[i]), p[o], q[o], nu, k)
            assert abs(ge[i, k] - ref) <= 1e-8, (i, k, ge[i, k], ref)


@pytest.mark.slow
def test_exact_mpfr_block_at_v17_b4_l4_matches_monte_carlo():
    """The size the former quadrature refused: V = 17, B = 4, L = 4 (models of window 2),
    exact first-block AATPS in about 10 s, against 4,000 simulated first blocks (one key
    each): |mean - exact| <= 5 standard errors (two-sided false-failure probability
    5.7e-7; a 1% error of the exact value, about 0.03 tokens, is 3-4 standard errors)."""
    target = sim.SyntheticLM(17, 2, seed=1)
    draft = target.draft(0.5, seed=2)
    exact = sim.expected_block_tokens(target, draft, [1, 2], "mpfr", L=4, B=4)
    acc = np.array([
        sim.speculative_decode(target, draft, [1, 2], "mpfr", L=4, B=4, key=50_000 + i,
                               max_new_tokens=5, window=None,
                               seed=np.random.SeedSequence([11, i])).emitted_per_block[0]
        for i in range(4000)])
    se = acc.std(ddof=1) / np.sqrt(acc.size)
    assert abs(acc.mean() - exact) <= 5 * se, (acc.mean(), exact, se)
