"""Tree verification with greedy drafting (``specbound.sim.simulate_tree_verification``)
against the per-position laws of Zhou et al. (2026), arXiv:2607.26627, App. G
(``theory.tree_*``)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from specbound.sim import simulate_tree_verification
from specbound.sim.gof import bonferroni_alpha, chisquare_gof
from specbound.testing.strategies import prob_pairs
from specbound.theory import block_efficiency
from specbound.theory.tree import (
    eta_allowed,
    kl_truncation_tree,
    min_p_allowed,
    tree_acceptance,
    tree_block_efficiency,
    tree_emitted_distribution,
)

N = 200_000
L = 3


def _positions(seed: int, v: int, kind: str):
    """L per-position (p, q) pairs: a Zipf/Dirichlet target and a noisy draft."""
    rng = np.random.default_rng(seed)
    if kind == "zipf":
        p = 1.0 / np.arange(1, v + 1) ** rng.uniform(0.8, 1.6, size=(L, 1))
        p = np.stack([rng.permutation(r) for r in p])
    else:
        p = rng.dirichlet(np.full(v, 0.5), size=L)
    p /= p.sum(axis=1, keepdims=True)
    logit = np.log(p) + 1.0 * rng.standard_normal((L, v))
    q = np.exp(logit - logit.max(axis=1, keepdims=True))
    return p, q / q.sum(axis=1, keepdims=True)


def _allowed(p, how):
    kind, val = how
    if kind == "none":
        return None
    if kind == "minp":
        return min_p_allowed(p, val)
    return eta_allowed(p, val)


# (seed, vocabulary size, family, D, allowed-set rule)
CASES = [
    (1, 12, "dirichlet", 1, ("minp", 0.1)),
    (2, 12, "dirichlet", 2, ("minp", 0.3)),
    (3, 30, "zipf", 3, ("minp", 0.2)),
    (4, 30, "zipf", 4, ("eta", 0.02)),
    (5, 50, "zipf", 2, ("eta", 0.1)),
    (6, 8, "dirichlet", 3, ("minp", 0.5)),
    (7, 20, "dirichlet", 5, ("eta", 0.05)),
    (8, 20, "zipf", 1, ("none", None)),
]
RULES = ("lossless", "speccascade", "typical")
# test_per_position_law: len(CASES) * len(RULES) * L GOF comparisons; overall false-failure
# probability 1e-4 (Bonferroni).
ALPHA = bonferroni_alpha(1e-4, len(CASES) * len(RULES) * L)


def _run(case, rule, seed=0, n=N):
    s, v, kind, D, how = case
    p, q = _positions(s, v, kind)
    A = _allowed(p, how)
    if A is None and rule != "lossless":
        A = p > 0
    res = simulate_tree_verification(p, q, rule, D=D, allowed=A, n=n, seed=seed)
    if A is None:
        A = p > 0
    return p, q, A, res


@pytest.mark.parametrize("rule", RULES)
def test_per_position_law(rule):
    # Lemma 2(i): lossless emits p_Theta at every position; Lemma 2(ii) / Theorem 1: the
    # indicator rules emit the point mass at the first in-set candidate (p_Theta if none).
    # Chi-square GOF of the tokens emitted at each reached position (alpha above); a token
    # the law gives probability 0 fails at once.
    for case in CASES:
        p, q, A, res = _run(case, rule, seed=case[0])
        law = tree_emitted_distribution(p, res.candidates, rule, allowed=A)
        np.testing.assert_array_equal(res.emitted_counts.sum(axis=1), res.reached)
        for t in range(L):
            assert res.reached[t] > 1000, (case, t)
            g = chisquare_gof(res.emitted_counts[t], law[t])
            assert g.pvalue >= ALPHA, (case, rule, t, g)
        if rule != "lossless":
            inA = np.take_along_axis(A, res.candidates, axis=1)
            for t in range(L):
                if inA[t].any():  # the first in-set candidate, every time
                    first = res.candidates[t, np.argmax(inA[t])]
                    assert res.emitted_counts[t, first] == res.reached[t]


def test_no_in_set_candidate_emits_p_theta():
    # the draft's top-2 lie outside A at position 0: every rule rejects both, the position
    # emits p_Theta (GOF at alpha 1e-6 per rule) and the step ends there.
    p = np.array([0.45, 0.3, 0.1, 0.08, 0.07])
    q = np.array([0.05, 0.05, 0.1, 0.4, 0.4])
    A = min_p_allowed(p, 0.2)  # {0, 1, 2}
    for rule in RULES:
        res = simulate_tree_verification(p, q, rule, D=2, L=2, allowed=A, n=50_000, seed=6)
        np.testing.assert_array_equal(res.candidates[0], [3, 4])
        assert res.accepted_counts[0] == 0 and res.reached[1] == 0
        assert np.all(res.accepted_per_block == 0) and res.block_efficiency.mean == 1.0
        assert chisquare_gof(res.emitted_counts[0], res.p_theta[0]).pvalue >= 1e-6
        assert np.isnan(res.emitted_law[1]).all() and np.isnan(res.acceptance[1])


def test_gof_detects_a_wrong_tree_law():
    # power: the lossless walk's output at position 0 is rejected against SpecCascade's
    # point mass and against p (untruncated) when truncation removes >= 2% of p's mass.
    case = CASES[2]
    p, q, A, res = _run(case, "lossless", seed=3)
    wrong = tree_emitted_distribution(p, res.candidates, "speccascade", allowed=A)[0]
    assert chisquare_gof(res.emitted_counts[0], wrong).pvalue < ALPHA
    assert (p[0] * ~A[0]).sum() > 0.02
    assert chisquare_gof(res.emitted_counts[0], p[0]).pvalue < ALPHA


@pytest.mark.parametrize("rule", RULES)
def test_acceptance_and_block_efficiency(rule):
    # Per-position acceptance against Eqs. 70-71 (binomial two-sided test, alpha 1e-6 each)
    # and tokens per step against Eq. 73 + 1 (z-test |z| < 5.3, alpha 1e-7 each):
    # 8 cases x (3 + 1) comparisons, overall false-failure probability < 1e-4.
    for case in CASES:
        p, q, A, res = _run(case, rule, seed=100 + case[0])
        a = np.atleast_1d(tree_acceptance(p, res.candidates, rule, allowed=A))
        for t in range(L):
            k, m = int(res.accepted_counts[t]), int(res.reached[t])
            if a[t] in (0.0, 1.0):
                assert k == a[t] * m
            else:
                assert stats.binomtest(k, m, a[t]).pvalue >= 1e-6, (case, t)
        be = tree_block_efficiency(p, res.candidates, rule, allowed=A, bonus=True)
        est = res.block_efficiency
        if est.stderr > 0:
            assert abs(est.mean - be) / est.stderr < 5.3, (case, est, be)
        else:
            assert est.mean == pytest.approx(be, abs=1e-12)
        assert res.accepted_per_step.mean == pytest.approx(est.mean - 1.0)


def test_iid_positions_match_leviathan_formula():
    # the same pair at every position: E[tokens per step] = (1 - a^{L+1}) / (1 - a) with
    # a = p_Theta(C) (z-test, |z| < 5.3: false-failure probability 1e-7 per L).
    rng = np.random.default_rng(9)
    p = rng.dirichlet(np.ones(15))
    q = rng.dirichlet(np.ones(15))
    A = min_p_allowed(p, 0.2)
    for depth in (1, 4, 8):
        res = simulate_tree_verification(p, q, "lossless", D=3, L=depth, allowed=A,
                                         n=N, seed=depth)
        a = tree_acceptance(p, res.candidates[0], "lossless", allowed=A)
        est = res.block_efficiency
        assert abs(est.mean - block_efficiency(a, depth)) / est.stderr < 5.3


def test_proposition_1_lossy_block_efficiency_is_higher():
    # Prop. 1: block efficiency under SpecCascade / typical acceptance >= under lossless
    # (simulated, within Monte Carlo error: one-sided z > -4.5, false-failure probability
    # 3.4e-6 per comparison, 2 x 20 comparisons).  Where the theory gap is >= 0.05 tokens it
    # must also show up as a significant gain (z > 4.5 would fail by chance w.p. < 1e-4).
    rng = np.random.default_rng(11)
    strict = 0
    for i in range(20):
        v = int(rng.integers(5, 40))
        p, q = _positions(1000 + i, v, "zipf" if i % 2 else "dirichlet")
        A = min_p_allowed(p, rng.uniform(0.05, 0.6)) if i % 3 else eta_allowed(p, 0.05)
        D = int(rng.integers(1, 5))
        lossless = simulate_tree_verification(p, q, "lossless", D=D, allowed=A, n=50_000,
                                              seed=i).block_efficiency
        for rule in ("speccascade", "typical"):
            lossy = simulate_tree_verification(p, q, rule, D=D, allowed=A, n=50_000,
                                               seed=i).block_efficiency
            se = np.hypot(lossy.stderr, lossless.stderr)
            assert lossy.mean - lossless.mean > -4.5 * se - 1e-12
            gap = (tree_block_efficiency(p, lossless_cands(p, q, D), rule, allowed=A)
                   - tree_block_efficiency(p, lossless_cands(p, q, D), "lossless", allowed=A))
            assert gap >= -1e-12
            if gap >= 0.05:
                assert lossy.mean - lossless.mean > 4.5 * se
                strict += 1
    assert strict >= 5


def lossless_cands(p, q, D):
    return np.argsort(-q, axis=1, kind="stable")[:, :D]


def test_theorem_1_tree_divergence():
    # Theorem 1 statement 2: the indicator rules emit a point mass, so the per-position
    # divergence from p_Theta is -log p_Theta(x) (> 0 unless p_Theta is a point mass) and
    # does not vanish as q -> p; lossless emits p_Theta (plug-in KL ~ 0).
    rng = np.random.default_rng(12)
    p = rng.dirichlet(np.ones(10), size=L)
    A = min_p_allowed(p, 0.2)
    for q in (rng.dirichlet(np.ones(10), size=L), p.copy()):  # far draft, then q = p
        res = simulate_tree_verification(p, q, "speccascade", D=2, allowed=A, n=20_000,
                                         seed=1)
        emp = res.emitted_law
        pt = res.p_theta
        with np.errstate(divide="ignore", invalid="ignore"):
            kl = np.where(emp > 0, emp * np.log(emp / pt), 0.0).sum(axis=1)
        expect = kl_truncation_tree(p, res.candidates, A)
        has = np.take_along_axis(A, res.candidates, axis=1).any(axis=1)
        # a point mass is estimated exactly; a position with no in-set candidate emits
        # p_Theta (divergence 0, plug-in estimate small)
        np.testing.assert_allclose(kl[has], expect[has], rtol=1e-12)
        assert np.all(kl[~has] < 5e-3) and np.all(expect[~has] == 0)
        assert np.all(expect[has] > 0)
    assert has.all()  # q = p: the argmax of p is the first candidate and lies in A
    res = simulate_tree_verification(p, p, "lossless", D=2, allowed=A, n=N, seed=2)
    emp = res.emitted_law
    with np.errstate(divide="ignore", invalid="ignore"):
        kl = np.where(emp > 0, emp * np.log(emp / res.p_theta), 0.0).sum(axis=1)
    assert np.all(kl < 5e-3)


def test_greedy_candidates_and_explicit_candidates():
    p = np.array([0.1, 0.2, 0.3, 0.4])
    q = np.array([0.3, 0.3, 0.1, 0.3])  # ties broken by the lower token id
    res = simulate_tree_verification(p, q, "lossless", D=3, L=2, n=10, seed=0)
    np.testing.assert_array_equal(res.candidates, [[0, 1, 3], [0, 1, 3]])
    res2 = simulate_tree_verification(p, None, "lossless", D=3, L=2, n=10, seed=0,
                                      candidates=[0, 1, 3])
    np.testing.assert_array_equal(res.accepted_per_block, res2.accepted_per_block)
    np.testing.assert_array_equal(res.emitted_counts, res2.emitted_counts)
    # D = V: lossless accepts surely (p_Theta(C) = 1), SpecCascade too
    res = simulate_tree_verification(p, q, "lossless", D=4, L=3, n=1000, seed=0)
    assert np.all(res.accepted_per_block == 3)


def test_reproducible_by_seed():
    p, q = _positions(5, 20, "zipf")
    A = min_p_allowed(p, 0.2)
    a = simulate_tree_verification(p, q, "lossless", D=2, allowed=A, n=5000, seed=4)
    b = simulate_tree_verification(p, q, "lossless", D=2, allowed=A, n=5000,
                                   seed=np.random.default_rng(4))
    c = simulate_tree_verification(p, q, "lossless", D=2, allowed=A, n=5000, seed=5)
    np.testing.assert_array_equal(a.accepted_per_block, b.accepted_per_block)
    np.testing.assert_array_equal(a.emitted_counts, b.emitted_counts)
    assert not np.array_equal(a.accepted_per_block, c.accepted_per_block)


P1 = np.array([0.5, 0.3, 0.2])
Q1 = np.array([0.2, 0.3, 0.5])


@pytest.mark.parametrize("kwargs, match", [
    ({"rule": "nope"}, "rule"),
    ({"D": 0}, "D"),
    ({"D": 4}, "D"),
    ({"L": None}, "L"),
    ({"L": 0}, "L"),
    ({"n": 0}, "n"),
    ({"seed": -3}, "seed"),
    ({"q": None}, "q"),
    ({"q": np.array([0.5, 0.5])}, "q"),
    ({"q": np.ones((3, 3)) / 3}, "q"),
    ({"rule": "speccascade"}, "allowed"),
    ({"allowed": [False, False, False]}, "allowed"),
    ({"allowed": [True, False]}, "allowed"),
    ({"candidates": [0, 0]}, "candidates"),
    ({"candidates": [0, 5]}, "candidates"),
    ({"candidates": [0.0, 1.0]}, "candidates"),
    ({"candidates": [0, 1, 2]}, "candidates"),
])
def test_validation_errors(kwargs, match):
    args = {"p": P1, "q": Q1, "rule": "lossless", "D": 2, "L": 2, "n": 10, "seed": 0}
    args.update(kwargs)
    p, q, rule = args.pop("p"), args.pop("q"), args.pop("rule")
    with pytest.raises(ValueError, match=match):
        simulate_tree_verification(p, q, rule, **args)


def test_validation_of_p_and_L():
    with pytest.raises(ValueError, match="p"):
        simulate_tree_verification([0.5, 0.6], [0.5, 0.5], L=2)
    with pytest.raises(ValueError, match="L"):
        simulate_tree_verification(np.ones((2, 3)) / 3, np.ones((2, 3)) / 3, L=3)


@settings(max_examples=50)
@given(pair=prob_pairs(min_size=2, max_size=30), rule=st.sampled_from(RULES),
       D=st.integers(1, 4), depth=st.integers(1, 4), p_base=st.floats(0.0, 1.0),
       seed=st.integers(0, 2**32 - 1))
def test_tree_properties(pair, rule, D, depth, p_base, seed):
    # Properties for any pair: emitted tokens lie in the support of the App. G law, the
    # accepted count is in 0..L, per-position counts add up, and the indicator rules accept
    # exactly when some candidate lies in A (Eq. 71), deterministically.
    p, q = pair
    D = min(D, p.size)
    A = min_p_allowed(p, p_base)
    res = simulate_tree_verification(p, q, rule, D=D, L=depth, allowed=A, n=300, seed=seed)
    law = tree_emitted_distribution(np.tile(p, (depth, 1)), res.candidates, rule, allowed=A)
    assert np.all(res.emitted_counts[law == 0] == 0)
    assert res.accepted_per_block.min() >= 0 and res.accepted_per_block.max() <= depth
    np.testing.assert_array_equal(res.emitted_counts.sum(axis=1), res.reached)
    assert res.reached[0] == 300
    be = res.block_efficiency.mean
    assert 1.0 <= be <= depth + 1
    if rule != "lossless":
        has = np.take_along_axis(np.tile(A, (depth, 1)), res.candidates, axis=1).any(axis=1)
        expect = np.cumprod(has).sum()  # deterministic number of accepted positions
        assert np.all(res.accepted_per_block == expect)
