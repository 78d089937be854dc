"""Tests for :func:`specbound.theory.block_efficiency` (Leviathan et al. 2023, Eq. 1)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from specbound.testing.strategies import prob_pairs
from specbound.theory import block_efficiency

unit = st.floats(0.0, 1.0, allow_nan=False)
lookahead = st.integers(0, 64)


def direct_sum(a: float, L: int) -> float:
    """Σ_{k=0}^{L} a^k, the definition, summed term by term."""
    return math.fsum(a**k for k in range(L + 1))


# --- exact values ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "L", "expected"),
    [
        (0.0, 0, 1.0),
        (0.0, 7, 1.0),
        (1.0, 0, 1.0),
        (1.0, 4, 5.0),
        (0.5, 1, 1.5),
        (0.5, 3, 1.875),
        (0.8, 4, (1 - 0.8**5) / 0.2),
    ],
)
def test_known_values(a, L, expected):
    assert block_efficiency(a, L) == pytest.approx(expected, rel=1e-14)


def test_scalar_returns_python_float_and_array_keeps_shape():
    assert type(block_efficiency(0.3, 2)) is float
    assert type(block_efficiency(np.float64(0.3), 2)) is float
    a = np.array([[0.0, 0.25], [0.5, 1.0]])
    out = block_efficiency(a, 3)
    assert isinstance(out, np.ndarray) and out.shape == (2, 2)
    expected = [[direct_sum(x, 3) for x in row] for row in a.tolist()]
    np.testing.assert_allclose(out, expected, rtol=1e-14)
    assert block_efficiency([0.5], 2).shape == (1,)


def test_accurate_near_one():
    # the naive quotient (1 - a^(L+1)) / (1 - a) loses ~all digits at a = 1 - 1e-13
    for eps in (1e-4, 1e-9, 1e-13):
        a = 1.0 - eps
        L = 10
        exact = direct_sum(a, L)
        assert block_efficiency(a, L) == pytest.approx(exact, rel=1e-12)
    # large L stays O(1) and matches the closed form
    assert block_efficiency(0.999, 10**6) == pytest.approx(1 / 0.001, rel=1e-9)


# --- properties (hypothesis) ---------------------------------------------------------------


@given(unit, lookahead)
def test_equals_geometric_sum_and_in_range(a, L):
    v = block_efficiency(a, L)
    assert 1.0 <= v <= L + 1
    assert v == pytest.approx(direct_sum(a, L), rel=1e-12, abs=1e-12)


@given(lookahead)
def test_endpoints(L):
    assert block_efficiency(0.0, L) == 1.0
    assert block_efficiency(1.0, L) == L + 1
    # continuity at the removable singularity a = 1
    assert block_efficiency(1.0 - 1e-12, L) == pytest.approx(L + 1, rel=1e-9)


@given(unit, unit, lookahead)
def test_monotone_in_a(a1, a2, L):
    lo, hi = sorted((a1, a2))
    v_lo, v_hi = block_efficiency(lo, L), block_efficiency(hi, L)
    assert v_hi >= v_lo * (1 - 1e-14)
    if L >= 1 and hi - lo > 1e-6:
        assert v_hi > v_lo  # strictly increasing when there is at least one draft


@given(unit, lookahead)
def test_monotone_in_L(a, L):
    v0, v1 = block_efficiency(a, L), block_efficiency(a, L + 1)
    assert v1 >= v0
    assert v1 - v0 == pytest.approx(a ** (L + 1), rel=1e-9, abs=1e-12)


@given(st.lists(unit, min_size=1, max_size=20), lookahead)
def test_vectorised_matches_scalar(values, L):
    out = block_efficiency(np.array(values), L)
    assert out.shape == (len(values),)
    assert out.tolist() == [block_efficiency(v, L) for v in values]


@given(prob_pairs(), st.integers(0, 16))
def test_acceptance_from_real_pairs(pair, L):
    # per-token acceptance of standard SD is Σ min(p, q) = 1 − TV: any such value is valid
    p, q = pair
    a = min(1.0, float(np.minimum(p, q).sum()))
    v = block_efficiency(a, L)
    assert 1.0 <= v <= L + 1
    assert v == pytest.approx(direct_sum(a, L), rel=1e-12, abs=1e-12)


# --- Monte Carlo: simulate blocks with i.i.d. Bernoulli(a) acceptances -------------------

MC_CASES = [(a, L) for a in (0.3, 0.7, 0.95) for L in (1, 4, 8)]


def test_monte_carlo_geometric_acceptance():
    # One step: draft L tokens, accept each independently w.p. a until the first rejection;
    # the step emits (accepted prefix length) + 1 tokens.  n = 400,000 steps per case.
    # Each case: |z| < 4.5 has two-sided false-failure probability 6.8e-6 under the CLT, so
    # the 9 cases together fail by chance with probability < 7e-5 (Bonferroni).  A 1% bias
    # of the mean is > 8 standard errors in every case (checked below; the smallest, 8.6,
    # is a = 0.7, L = 8), so it would be caught with probability > 0.9999.
    rng = np.random.default_rng(20261130)
    n = 400_000
    for a, L in MC_CASES:
        accepted = rng.random((n, L)) < a
        prefix = np.cumprod(accepted, axis=1).sum(axis=1)
        tokens = prefix + 1.0
        mean, sd = tokens.mean(), tokens.std(ddof=1)
        z = (mean - block_efficiency(a, L)) / (sd / math.sqrt(n))
        assert abs(z) < 4.5, (a, L, mean, block_efficiency(a, L), z)
        assert 0.01 * block_efficiency(a, L) > 8 * sd / math.sqrt(n)


# --- validation ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "L", "match"),
    [
        (1.5, 2, r"^a: .*\[0, 1\]"),
        (-0.1, 2, r"^a: .*\[0, 1\]"),
        ([0.2, 1.0001], 2, r"^a: .*\[0, 1\]"),
        (float("nan"), 2, r"^a: .*NaN"),
        (np.array([0.5, np.inf]), 2, r"^a: .*NaN or infinite"),
        ([], 2, r"^a: must not be empty"),
        ("half", 2, r"^a: must be a real"),
        (None, 2, r"^a: must be a real"),
        (True, 2, r"^a: must be a real"),
        (np.array([True, False]), 2, r"^a: must be a real"),
        (0.5, -1, r"^L: must be >= 0"),
        (0.5, 2.5, r"^L: must be an integer"),
        (0.5, "3", r"^L: must be an integer"),
        (0.5, True, r"^L: must be an integer"),
    ],
)
def test_validation(a, L, match):
    with pytest.raises(ValueError, match=match):
        block_efficiency(a, L)


def test_integral_float_L_accepted():
    assert block_efficiency(0.5, 3.0) == block_efficiency(0.5, 3)


def test_strings_complex_and_absurd_lookaheads():
    # regression: block_efficiency('0.5', 4) returned a 0-d array (the string was parsed),
    # and L = 10**400 raised OverflowError
    for bad in ("0.5", ["0.5", "0.2"], 0.5 + 0j, np.array([0.5 + 0.1j])):
        with pytest.raises(ValueError, match="^a: must be a real number or an array of reals"):
            block_efficiency(bad, 4)
    with pytest.raises(ValueError, match="^L: too large"):
        block_efficiency(0.9, 10**400)
    # huge but finite lookaheads are exact in O(1): a^(L+1) underflows to 0
    assert block_efficiency(0.9, 10**300) == pytest.approx(10.0, rel=1e-12)
    assert block_efficiency(1.0, 2**80) == float(2**80 + 1)
