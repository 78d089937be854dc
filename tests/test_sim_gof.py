"""Tests of the goodness-of-fit helpers (specbound.sim.gof)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from specbound.sim.gof import (
    EXACT_AUTO_OUTCOMES,
    EXACT_MAX_OUTCOMES,
    GofResult,
    bonferroni_alpha,
    chisquare_gof,
    counts_from_samples,
    gof_test,
    multinomial_exact_gof,
)
from specbound.testing.strategies import prob_vectors
from tests._stats import FAILURE_RATE


def _ks_crit(n: int, rate: float) -> float:
    """Two-sided KS critical distance at false-failure ``rate`` (DKW inequality: exact bound
    ``P(D > eps) <= 2 exp(-2 n eps^2)`` for any continuous law, conservative for discrete)."""
    return math.sqrt(math.log(2.0 / rate) / (2.0 * n))


def _brute_exact(counts, probs):
    """Exact multinomial p-value by enumerating every outcome with itertools."""
    n, k = int(sum(counts)), len(probs)
    obs = stats.multinomial.pmf(counts, n, probs)
    total = 0.0
    for x in itertools.product(range(n + 1), repeat=k - 1):
        if sum(x) > n:
            continue
        full = [*x, n - sum(x)]
        pr = stats.multinomial.pmf(full, n, probs)
        if pr <= obs * (1 + 1e-7):
            total += pr
    return total


# ---------------------------------------------------------------------- calibration under H0


def test_chisquare_pvalues_uniform_under_h0():
    # 2,000 p-values of draws from H0 must look Uniform(0, 1).  False-failure rate: the DKW
    # bound gives <= 1e-4 for an exactly uniform p-value; the chi-square approximation at
    # n = 5000 with 10 cells (all E >= 90) moves the CDF by < 0.005, far below the 0.049
    # critical distance.
    rng = np.random.default_rng(20261130)
    p = np.arange(1, 11, dtype=float)
    p /= p.sum()
    draws = rng.multinomial(5000, p, size=2000)
    pv = np.array([chisquare_gof(c, p).pvalue for c in draws])
    d = stats.kstest(pv, "uniform").statistic
    assert d < _ks_crit(2000, FAILURE_RATE), d


def test_chisquare_pooled_pvalues_uniform_under_h0():
    # Same with pooling at work: Zipf(1.2) on 200 cells, n = 5000 (about 100 cells pooled).
    # False-failure rate <= 1e-4 (DKW) for exact uniformity; the pooled chi-square
    # approximation (every pooled cell E >= 5) shifts the CDF by about 0.01 at most
    # (measured 0.017-0.025 KS distance over 4 seeds vs the 0.049 limit).
    rng = np.random.default_rng(7)
    p = rng.permutation(1.0 / np.arange(1, 201) ** 1.2)
    p /= p.sum()
    draws = rng.multinomial(5000, p, size=2000)
    res = [chisquare_gof(c, p) for c in draws]
    assert all(r.n_pooled > 0 for r in res)
    pv = np.array([r.pvalue for r in res])
    assert stats.kstest(pv, "uniform").statistic < _ks_crit(2000, FAILURE_RATE)


def _exact_null_cdf(n, p):
    """Atoms (values, masses) of the exact test's p-value under H0, by brute force."""
    outcomes = [x for x in itertools.product(range(n + 1), repeat=len(p) - 1) if sum(x) <= n]
    full = np.array([[*x, n - sum(x)] for x in outcomes])
    pmf = stats.multinomial.pmf(full, n, p)
    pv = np.array([pmf[pmf <= v * (1 + 1e-7)].sum() for v in pmf])
    vals, inv = np.unique(np.round(pv, 12), return_inverse=True)
    mass = np.bincount(inv, weights=pmf)
    return vals, mass


def test_exact_pvalues_uniform_under_h0():
    # The exact test's p-value is discrete: under H0, P(pvalue <= a) <= a with equality at
    # its atoms.  (1) deterministic: the brute-force null CDF never exceeds the identity;
    # (2) 2,000 simulated p-values: one-sided KS (too many small p-values) at false-failure
    # rate 1e-4 (DKW, conservative for a super-uniform law) and two-sided KS distance below
    # the 1e-4 DKW limit plus the largest distance of the discrete null CDF from uniform.
    n, p = 30, np.array([0.13, 0.21, 0.29, 0.37])
    vals, mass = _exact_null_cdf(n, p)
    cdf = np.cumsum(mass)
    assert np.all(cdf <= vals + 1e-9)
    gap = float(np.max(vals - np.concatenate([[0.0], cdf[:-1]])))  # sup |F(a) - a|
    rng = np.random.default_rng(11)
    draws = rng.multinomial(n, p, size=2000)
    pv = np.array([multinomial_exact_gof(c, p).pvalue for c in draws])
    crit = _ks_crit(2000, FAILURE_RATE)
    assert stats.kstest(pv, "uniform", alternative="greater").statistic < crit
    assert stats.kstest(pv, "uniform").statistic < crit + gap
    assert gap < 0.02  # the setting is fine-grained enough for the check to mean something


# ---------------------------------------------------------------------- power


def _shift(p, frac, src, dst):
    q = p.copy()
    q[src] -= frac
    q[dst] += frac
    return q


def test_chisquare_detects_one_percent_bias():
    # A sampler that moves 1% of the mass from one token to another must be caught at
    # n = 10^6 with pvalue < 1e-6.  Null control (false-failure rate 1e-4): the same test on
    # draws from p itself has pvalue > 1e-4.
    rng = np.random.default_rng(3)
    p = rng.dirichlet(np.ones(10))
    q = _shift(p, 0.01, int(np.argmax(p)), int(np.argmin(p)))
    assert 0.5 * np.abs(p - q).sum() == pytest.approx(0.01)
    assert chisquare_gof(rng.multinomial(10**6, q), p).pvalue < 1e-6
    assert gof_test(rng.multinomial(10**6, q), p).pvalue < 1e-6
    assert chisquare_gof(rng.multinomial(10**6, p), p).pvalue > FAILURE_RATE


def test_chisquare_detects_one_percent_bias_spread_over_large_vocab():
    # 1% of the top token's mass spread uniformly over 999 other tokens of a Zipf(1.1) target
    rng = np.random.default_rng(4)
    p = rng.permutation(1.0 / np.arange(1, 1001) ** 1.1)
    p /= p.sum()
    top = int(np.argmax(p))
    q = p.copy()
    q[top] -= 0.01
    q[np.arange(1000) != top] += 0.01 / 999
    assert chisquare_gof(rng.multinomial(10**6, q), p).pvalue < 1e-6
    assert chisquare_gof(rng.multinomial(10**6, p), p).pvalue > FAILURE_RATE  # rate 1e-4


# ---------------------------------------------------------------------- exact test


def test_exact_matches_brute_force_three_cells():
    p = np.array([0.2, 0.3, 0.5])
    for n in (1, 4, 9):
        for x in itertools.product(range(n + 1), repeat=2):
            if sum(x) > n:
                continue
            c = [*x, n - sum(x)]
            got = multinomial_exact_gof(c, p)
            assert got.method == "exact"
            assert got.pvalue == pytest.approx(_brute_exact(c, p), rel=1e-10, abs=1e-14)
            assert got.statistic == pytest.approx(stats.multinomial.pmf(c, n, p), rel=1e-10)


def test_exact_two_cells_equals_binomtest():
    # with two cells the exact multinomial test is the two-sided binomial test
    for k, n, pr in [(3, 20, 0.3), (0, 15, 0.1), (12, 40, 0.5), (40, 40, 0.7)]:
        got = multinomial_exact_gof([k, n - k], [pr, 1 - pr]).pvalue
        assert got == pytest.approx(stats.binomtest(k, n, pr).pvalue, rel=1e-9)


@given(p=prob_vectors(min_size=2, max_size=4), data=st.data())
def test_exact_property_pvalue_range_and_zero_cells(p, data):
    n = data.draw(st.integers(1, 8))
    c = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1))).multinomial(n, p)
    r = multinomial_exact_gof(c, p)
    assert 0.0 < r.pvalue <= 1.0
    assert r.statistic <= r.pvalue + 1e-12  # the observed outcome is included
    keep = p > 0
    r2 = multinomial_exact_gof(c[keep], p[keep] / p[keep].sum())
    assert r2.pvalue == pytest.approx(r.pvalue, rel=1e-12)


def test_exact_single_positive_cell_and_limit_message():
    r = multinomial_exact_gof([0, 5, 0], [0.0, 1.0, 0.0])
    assert r.pvalue == 1.0 and r.n_cells == 1
    with pytest.raises(ValueError, match=r"counts: .*limit 2000000"):
        multinomial_exact_gof(np.full(20, 100), np.full(20, 0.05))
    assert math.comb(2000 + 19, 19) > EXACT_MAX_OUTCOMES


# ---------------------------------------------------------------------- chi-square details


@given(p=prob_vectors(min_size=2, max_size=60), data=st.data())
def test_chisquare_property_matches_scipy_without_pooling(p, data):
    n = data.draw(st.integers(1, 5000))
    c = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1))).multinomial(n, p)
    r = chisquare_gof(c, p)
    assert 0.0 <= r.pvalue <= 1.0
    assert r.n == n and r.n_cells <= np.count_nonzero(p > 0)
    if r.n_cells >= 2:
        assert r.dof == r.n_cells - 1
    keep = p > 0
    if r.n_pooled == 0 and r.n_cells >= 2:
        ref = stats.chisquare(c[keep], n * p[keep] / p[keep].sum())
        assert r.statistic == pytest.approx(ref.statistic, rel=1e-9, abs=1e-9)
        assert r.pvalue == pytest.approx(ref.pvalue, rel=1e-7, abs=1e-12)
    if np.min(n * p[keep]) >= 5.0:
        assert r.n_pooled == 0


def test_chisquare_pooling_known_groups():
    # ten cells of 0.01 and two of 0.45, n = 200: E = 2 for small cells, 90 for large.
    # Walking up: {s,s,s}=6, {s,s,s}=6, {s,s,s}=6, {s, L}=92, {L}=90  -> 5 cells, 4 dof.
    p = np.array([0.01] * 10 + [0.45, 0.45])
    c = np.array([1, 3, 2, 0, 4, 1, 2, 2, 5, 1, 95, 84])
    r = chisquare_gof(c, p)
    obs = np.array([6, 5, 9, 1 + 95, 84], dtype=float)  # stable sort keeps index order
    exp = np.array([6, 6, 6, 92, 90], dtype=float)
    ref = stats.chisquare(obs, exp)
    assert (r.n_cells, r.dof, r.n_pooled) == (5, 4, 11)
    assert r.statistic == pytest.approx(ref.statistic)
    assert r.pvalue == pytest.approx(ref.pvalue)
    assert "pooled 11 cells into 4" in r.note


def test_chisquare_no_power_when_everything_pools():
    r = chisquare_gof([1, 1, 0], [0.3, 0.3, 0.4])  # n = 2 < min_expected
    assert (r.n_cells, r.dof, r.pvalue) == (1, 0, 1.0)
    assert "no power" in r.note


@pytest.mark.parametrize("fn", [chisquare_gof, multinomial_exact_gof, gof_test])
def test_impossible_outcome_gives_zero_pvalue(fn):
    r = fn([3, 3, 1], [0.5, 0.5, 0.0])
    assert r.pvalue == 0.0 and r.method == "impossible"
    assert r.statistic == math.inf and "[2]" in r.note
    # a zero-probability cell with zero count is simply ignored
    r0 = fn([3, 3, 0], [0.5, 0.5, 0.0])
    assert r0.pvalue > 0.0 and r0.n_cells <= 2


def test_gof_test_choice_rule_and_alpha():
    r = gof_test([40, 60], [0.5, 0.5], alpha=0.01)
    assert r.method == "exact" and r.alpha == 0.01 and r.rejected is False
    assert r.pvalue == pytest.approx(stats.binomtest(40, 100, 0.5).pvalue)
    big = np.random.default_rng(0).multinomial(1000, np.full(50, 0.02))
    assert math.comb(1000 + 49, 49) > EXACT_AUTO_OUTCOMES
    r2 = gof_test(big, np.full(50, 0.02))
    assert r2.method == "chisquare" and r2.rejected is None
    r3 = gof_test([0, 10], [0.5, 0.5], alpha=0.05)
    assert r3.rejected is True
    # normalize
    r4 = gof_test([40, 60], [1.0, 1.0], normalize=True)
    assert r4.pvalue == pytest.approx(r.pvalue)


def test_result_is_frozen():
    r = gof_test([1, 2], [0.5, 0.5])
    assert isinstance(r, GofResult)
    with pytest.raises(AttributeError):
        r.pvalue = 0.5


def test_bonferroni_and_counts_helpers():
    assert bonferroni_alpha(1e-4, 20) == pytest.approx(5e-6)
    assert bonferroni_alpha(0.05, 1) == 0.05
    np.testing.assert_array_equal(counts_from_samples([0, 2, 2, 1, 2], 4), [1, 1, 3, 0])
    assert counts_from_samples(np.array([], dtype=np.int64), 3).tolist() == [0, 0, 0]


# ---------------------------------------------------------------------- validation


@pytest.mark.parametrize("fn", [chisquare_gof, multinomial_exact_gof, gof_test])
@pytest.mark.parametrize(
    ("counts", "probs", "match"),
    [
        ([1, -1], [0.5, 0.5], "counts: contains negative"),
        ([1.5, 1], [0.5, 0.5], "counts: must contain integer"),
        ([[1, 1]], [0.5, 0.5], "counts: must be a non-empty 1-D"),
        ([], [], "counts: must be a non-empty 1-D"),
        ([True, False], [0.5, 0.5], "counts: must be a 1-D array"),
        (["a", "b"], [0.5, 0.5], "counts: must be a 1-D array"),
        ([0, 0], [0.5, 0.5], "counts: must contain at least one"),
        ([1, 2, 3], [0.5, 0.5], "counts: shape mismatch with probs"),
        ([1, 2], [0.5, 0.6], "probs: entries must sum to 1"),
        ([1, 2], [1.5, -0.5], "probs: contains negative"),
        ([1, 2], [[0.5, 0.5]], "probs: must be 1-D"),
        ([1, 2], [np.nan, 0.5], "probs: contains NaN"),
    ],
)
def test_validation_errors(fn, counts, probs, match):
    with pytest.raises(ValueError, match=match):
        fn(counts, probs)


def test_validation_errors_options():
    with pytest.raises(ValueError, match="min_expected"):
        chisquare_gof([1, 2], [0.5, 0.5], min_expected=0)
    with pytest.raises(ValueError, match="min_expected"):
        gof_test([1, 2], [0.5, 0.5], min_expected=-1.0)
    for bad in (0.0, 1.0, 2.0, "x"):
        with pytest.raises(ValueError, match="alpha"):
            gof_test([1, 2], [0.5, 0.5], alpha=bad)
    with pytest.raises(ValueError, match="alpha"):
        multinomial_exact_gof([1, 2], [0.5, 0.5], alpha=-0.1)
    with pytest.raises(ValueError, match="total_rate"):
        bonferroni_alpha(0.0, 3)
    with pytest.raises(ValueError, match="n_tests"):
        bonferroni_alpha(0.01, 0)
    with pytest.raises(ValueError, match="n_tests"):
        bonferroni_alpha(0.01, 2.5)
    with pytest.raises(ValueError, match="n_cells"):
        counts_from_samples([0, 1], 0)
    with pytest.raises(ValueError, match=r"samples: token ids must lie in \[0, 2\]"):
        counts_from_samples([0, 3], 3)
    with pytest.raises(ValueError, match="samples: must be an array of integer"):
        counts_from_samples([0.5], 3)


# ---------------------------------------------------------------------- hardening


def test_counts_that_would_wrap_are_refused():
    # regression: np.uint64 counts were cast to int64 (2**64 - 1 -> -1) and n came out as 4;
    # counts [2**62] * 3 summed to a negative n with p = 1
    with pytest.raises(ValueError, match="counts: values must be at most"):
        chisquare_gof(np.array([2**64 - 1, 5], dtype=np.uint64), [0.5, 0.5])
    for fn in (chisquare_gof, gof_test, multinomial_exact_gof):
        with pytest.raises(ValueError, match="counts: the total number of observations"):
            fn([2**62] * 3, [1 / 3] * 3)
        with pytest.raises(ValueError, match="counts"):
            fn(np.array([1e300, 1.0]), [0.5, 0.5])
    # large but representable counts are exact
    r = chisquare_gof(np.array([2**40, 2**40], dtype=np.uint64), [0.5, 0.5])
    assert r.n == 2**41 and r.statistic == 0.0 and r.pvalue == 1.0


def test_absurd_sizes_are_refused_up_front():
    # regression: counts_from_samples([0], 10**10) tried to allocate 80 GB
    with pytest.raises(ValueError, match=r"n_cells: too large: .* GiB"):
        counts_from_samples([0], 10**10)
    with pytest.raises(ValueError, match="samples: token ids must lie"):
        counts_from_samples(np.array([2**64 - 1], dtype=np.uint64), 3)
    # gof_test's choice rule and the exact test's limit decide without the exact binomial
    # of a huge n over many cells (millions of digits)
    big = np.full(50_000, 2**40)
    r = gof_test(big, np.full(50_000, 1 / 50_000))
    assert r.method == "chisquare" and r.n == 50_000 * 2**40
    with pytest.raises(ValueError, match="limit 2000000"):
        multinomial_exact_gof(big, np.full(50_000, 1 / 50_000))


@pytest.mark.parametrize("fn", [chisquare_gof, multinomial_exact_gof, gof_test])
def test_strings_complex_and_flags_are_refused(fn):
    with pytest.raises(ValueError, match="counts"):
        fn(np.array([1 + 1j, 2]), [0.5, 0.5])
    with pytest.raises(ValueError, match="probs: must be real numbers .*strings"):
        fn([1, 2], ["0.5", "0.5"])
    with pytest.raises(ValueError, match="probs: .*complex"):
        fn([1, 2], np.array([0.5 + 0j, 0.5]))
    with pytest.raises(ValueError, match="normalize: must be True or False"):
        fn([1, 2], [1.0, 1.0], normalize="yes")
    with pytest.raises(ValueError, match="alpha"):
        fn([1, 2], [0.5, 0.5], alpha="0.01")
