"""Tests of specbound.sim.metrics: token-level ROUGE-L (hand-computed values, a brute-force
reference, properties) and the standard errors of the sequence-level studies."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from specbound.results import Estimate
from specbound.sim.metrics import (
    PairedDifference,
    cluster_ratio_se,
    lcs_length,
    mean_se,
    paired_mean_diff,
    paired_ratio_diff,
    ratio_influence,
    rouge_l,
    z_score,
)

# ----------------------------------------------------------------------------- ROUGE-L


def _lcs_reference(a, b) -> int:
    """Textbook O(nm) dynamic programme with explicit loops."""
    n, m = len(a), len(b)
    T = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            if a[i - 1] == b[j - 1]:
                T[i][j] = T[i - 1][j - 1] + 1
            else:
                T[i][j] = max(T[i - 1][j], T[i][j - 1])
    return T[n][m]


def _lcs_brute(a, b) -> int:
    """Longest subsequence of ``a`` that is a subsequence of ``b`` (exhaustive, tiny inputs)."""

    def is_subseq(s, t):
        it = iter(t)
        return all(x in it for x in s)

    for k in range(len(a), 0, -1):
        for idx in itertools.combinations(range(len(a)), k):
            if is_subseq([a[i] for i in idx], b):
                return k
    return 0


@pytest.mark.parametrize(
    "a, b, lcs, f1",
    [
        # classic CLRS example (A=1, B=2, C=3, D=4): LCS "BCBA" of length 4; F1 = 8/13
        ([1, 2, 3, 2, 4, 1, 2], [2, 4, 3, 1, 2, 1], 4, 8 / 13),
        # LCS [1, 3, 4]: P = 3/4, R = 3/5, F1 = 2PR/(P+R) = 2/3
        ([1, 2, 3, 4], [1, 3, 4, 5, 6], 3, 2 / 3),
        ([5, 6, 7], [5, 6, 7], 3, 1.0),
        ([1, 2, 3], [4, 5, 6], 0, 0.0),
        ([1, 2, 3], [3, 2, 1], 1, 1 / 3),
        ([7, 7, 7, 7], [7, 7], 2, 2 / 3),
        ([], [], 0, 1.0),
        ([1, 2], [], 0, 0.0),
    ],
)
def test_rouge_l_hand_computed(a, b, lcs, f1):
    assert lcs_length(a, b) == lcs
    assert rouge_l(a, b) == pytest.approx(f1, abs=1e-15)
    # F1 is 2PR/(P+R) with P = LCS/len(a), R = LCS/len(b)
    if lcs > 0:
        P, R = lcs / len(a), lcs / len(b)
        assert rouge_l(a, b) == pytest.approx(2 * P * R / (P + R), abs=1e-15)


seqs = st.lists(st.integers(0, 4), min_size=0, max_size=12)


@given(seqs, seqs)
def test_lcs_matches_reference(a, b):
    assert lcs_length(a, b) == _lcs_reference(a, b)
    assert lcs_length(np.array(a, dtype=np.int64), np.array(b, dtype=np.int64)) == (
        _lcs_reference(a, b))


@given(st.lists(st.integers(0, 2), max_size=7), st.lists(st.integers(0, 2), max_size=7))
def test_lcs_matches_brute_force(a, b):
    assert lcs_length(a, b) == _lcs_brute(a, b)


@given(seqs, seqs, st.permutations(range(5)))
def test_rouge_l_properties(a, b, perm):
    r = rouge_l(a, b)
    assert 0.0 <= r <= 1.0
    assert r == rouge_l(b, a)  # symmetric
    assert (r == 1.0) == (a == b)  # 1 iff identical
    assert rouge_l(a, a) == 1.0
    # invariant under relabelling the token ids
    assert rouge_l([perm[x] for x in a], [perm[x] for x in b]) == r
    # LCS bounded by the shorter sequence and monotone under appending a token
    assert lcs_length(a, b) <= min(len(a), len(b))
    assert lcs_length(a + [3], b) in (lcs_length(a, b), lcs_length(a, b) + 1)


# ----------------------------------------------------------------------------- statistics


def test_mean_se():
    e = mean_se([1.0, 2.0, 3.0, 4.0])
    m, se = e.mean, e.stderr
    assert m == 2.5 and se == pytest.approx(np.std([1, 2, 3, 4], ddof=1) / 2)
    assert isinstance(e, Estimate) and e.n == 4 and e.successes is None
    one = mean_se([3.0])
    assert (one.mean, one.stderr) == (3.0, pytest.approx(float("nan"), nan_ok=True))
    none = mean_se([])
    assert all(math.isnan(x) for x in (none.mean, none.stderr)) and none.n == 0
    # the interval is the normal one, mean +- z stderr
    ci = e.ci(0.95)
    assert ci.low == pytest.approx(2.5 - 1.959963984540054 * se)
    with pytest.raises(ValueError, match="x"):
        mean_se(["a", "b"])


def test_cluster_ratio_se():
    num = np.array([3.0, 5.0, 4.0, 8.0])
    den = np.array([2.0, 2.0, 2.0, 4.0])
    est = cluster_ratio_se(num, den)
    r, se = est.mean, est.stderr
    assert isinstance(est, Estimate) and est.n == 4
    assert r == pytest.approx(20 / 10)
    resid = num - r * den
    assert se == pytest.approx(math.sqrt(4 / 3 * np.sum(resid**2) / 100))
    # equal cluster sizes: the ratio is the mean of the cluster means, se the usual one
    e2 = cluster_ratio_se([2.0, 4.0, 6.0], [1.0, 1.0, 1.0])
    r2, se2 = e2.mean, e2.stderr
    assert (r2, se2) == (pytest.approx(4.0), pytest.approx(np.std([2, 4, 6], ddof=1) / 3**0.5))
    assert math.isnan(cluster_ratio_se([1.0], [1.0]).stderr)
    with pytest.raises(ValueError, match="den"):
        cluster_ratio_se([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="den"):
        cluster_ratio_se([1.0], [0.0])


_positive = st.lists(st.floats(0.5, 50.0), min_size=2, max_size=30)


@given(num=_positive, den=_positive)
def test_ratio_influence_is_the_linearisation_of_the_cluster_ratio(num, den):
    """*property*: the influence values sum to 0 and their sd / sqrt(m) is the cluster SE
    ``sqrt(m/(m-1) sum (num_i - r den_i)^2) / sum den`` (docs/mathematics.md §5.5)."""
    m = min(len(num), len(den))
    num, den = np.array(num[:m]), np.array(den[:m])
    psi = ratio_influence(num, den)
    r = num.sum() / den.sum()
    np.testing.assert_allclose(psi, (num - r * den) / den.mean(), rtol=1e-12, atol=1e-12)
    assert abs(psi.sum()) <= 1e-9 * np.abs(psi).sum() + 1e-12
    est = cluster_ratio_se(num, den)
    direct = math.sqrt(m / (m - 1) * np.sum((num - r * den) ** 2)) / den.sum()
    assert est.mean == pytest.approx(r, rel=1e-12)
    assert est.stderr == pytest.approx(direct, rel=1e-9, abs=1e-15)
    assert est.stderr == pytest.approx(np.std(psi, ddof=1) / math.sqrt(m), rel=1e-9, abs=1e-12)


def test_paired_ratio_diff_hand_computed_and_properties():
    na, da = np.array([3.0, 5.0, 4.0, 8.0]), np.array([2.0, 2.0, 2.0, 4.0])
    nb, db = np.array([2.0, 6.0, 3.0, 5.0]), np.array([2.0, 3.0, 2.0, 3.0])
    est = paired_ratio_diff(na, da, nb, db)
    assert isinstance(est, PairedDifference) and est.n == 4
    assert (est.value_a, est.value_b) == (pytest.approx(2.0), pytest.approx(16 / 10))
    assert est.diff == pytest.approx(0.4)
    d = ratio_influence(na, da) - ratio_influence(nb, db)
    assert est.diff_se == pytest.approx(np.std(d, ddof=1) / 2)
    assert est.z == pytest.approx(0.4 / est.diff_se)
    # antisymmetric; a ratio against itself differs by exactly 0 with error 0
    rev = paired_ratio_diff(nb, db, na, da)
    assert (rev.diff, rev.diff_se) == (pytest.approx(-est.diff), pytest.approx(est.diff_se))
    same = paired_ratio_diff(na, da, na, da)
    assert (same.diff, same.diff_se, same.z) == (0.0, 0.0, 0.0)
    # unit denominators: a ratio of sums is a mean, and the paired ratio difference is the
    # paired mean difference
    ones = np.ones(4)
    r1, m1 = paired_ratio_diff(na, ones, nb, ones), paired_mean_diff(na, nb)
    assert (r1.diff, r1.diff_se) == (pytest.approx(m1.diff), pytest.approx(m1.diff_se))
    assert math.isnan(paired_ratio_diff([1.0], [1.0], [2.0], [1.0]).diff_se)
    with pytest.raises(ValueError, match="num_b"):
        paired_ratio_diff(na, da, nb[:3], db[:3])
    with pytest.raises(ValueError, match="den_b"):
        paired_ratio_diff(na, da, nb, [0.0] * 4)
    with pytest.raises(ValueError, match="den_a"):
        paired_ratio_diff(na, da[:3], nb, db)


def test_paired_mean_diff():
    a, b = np.array([1.0, 4.0, 2.0, 7.0]), np.array([0.5, 3.0, 2.5, 5.0])
    est = paired_mean_diff(a, b)
    assert (est.value_a, est.value_b, est.n) == (3.5, 2.75, 4)
    assert est.diff == pytest.approx(0.75)
    assert est.diff_se == pytest.approx(np.std(a - b, ddof=1) / 2)
    # pairing removes the shared prompt effect: the paired error is below the unpaired one
    unpaired = math.hypot(mean_se(a).stderr, mean_se(b).stderr)
    assert est.diff_se < unpaired
    none = paired_mean_diff([], [])
    assert none.n == 0 and math.isnan(none.diff) and math.isnan(none.value_a)
    with pytest.raises(ValueError, match="b"):
        paired_mean_diff([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="a"):
        paired_mean_diff([1.0, float("nan")], [1.0, 2.0])


def test_z_score():
    assert z_score(1.0, 0.5) == 2.0 and z_score(-3.0, 1.5) == -2.0
    assert z_score(0.0, 0.0) == 0.0
    assert z_score(2.0, 0.0) == math.inf and z_score(-2.0, 0.0) == -math.inf
    assert all(math.isnan(z_score(d, s)) for d, s in [(float("nan"), 1.0), (1.0, float("nan")),
                                                       (1.0, math.inf), (math.inf, 1.0)])
    with pytest.raises(ValueError, match="se"):
        z_score(1.0, -1.0)


def test_rouge_l_validation():
    with pytest.raises(ValueError, match="a"):
        rouge_l([[1, 2]], [1])
    with pytest.raises(ValueError, match="b"):
        lcs_length([1], [[1, 2]])
