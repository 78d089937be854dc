"""Tests of specbound.theory.blocks: exact expected tokens per speculative block and the MPFR
multiplicity law, from next-distribution callables."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specbound.sim import MarkovLM
from specbound.sim import expected_block_tokens as sim_block_tokens
from specbound.testing.strategies import prob_pairs
from specbound.theory import exact_acceptance, pml_bound, tv_distance
from specbound.theory.blocks import (
    BLOCK_SCHEMES,
    _race_joint,
    expected_block_tokens,
    mpfr_multiplicity_law,
)


def _fns(target, draft):
    return target.next_distribution, draft.next_distribution


@st.composite
def markov_pairs(draw, max_n=4):
    n = draw(st.integers(2, max_n))
    seed = draw(st.integers(0, 2**31))
    conc = draw(st.sampled_from([0.3, 1.0, 3.0]))
    return (MarkovLM.random(n, seed=seed, concentration=conc),
            MarkovLM.random(n, seed=seed + 1, concentration=conc))


def test_callables_form_equals_the_model_form_bit_for_bit():
    t, d = MarkovLM.random(3, seed=41), MarkovLM.random(3, seed=42)
    for dec, scheme, B in (("vsps", "sd", 1), ("pfr", "exp_race", 1), ("mws", "exp_race", 1),
                           ("mpfr", "mpfr", 2)):
        for L in (1, 2, 3):
            a = sim_block_tokens(t, d, [1], dec, L=L, B=B)
            b = expected_block_tokens(*_fns(t, d), [1], scheme, L=L, B=B, context_length=1)
            c = expected_block_tokens(*_fns(t, d), [1], scheme, L=L, B=B)  # no memo window
            assert a == b == c


@settings(max_examples=25, deadline=None)
@given(markov_pairs(), st.integers(1, 3))
def test_properties_of_the_block_expectation(pair, L):
    t, d = pair
    p_fn, q_fn = _fns(t, d)
    e = {s: expected_block_tokens(p_fn, q_fn, [0], s, L=L, context_length=1)
         for s in ("sd", "exp_race")}
    for v in e.values():
        assert 1.0 <= v <= L + 1 + 1e-12
    # P(X = Y = x) <= min(p_x, q_x) pointwise, and the recursion is monotone: sd >= race
    assert e["sd"] >= e["exp_race"] - 1e-12
    # one more draft position never lowers the expectation
    longer = expected_block_tokens(p_fn, q_fn, [0], "exp_race", L=L + 1, context_length=1)
    assert longer >= e["exp_race"] - 1e-12
    # L = 1: one decision, then the bonus: 1 + the exact per-context acceptance
    p, q = t.next_distribution([0]), d.next_distribution([0])
    assert expected_block_tokens(p_fn, q_fn, [0], "sd", L=1) == pytest.approx(
        2.0 - tv_distance(p, q), abs=1e-12)
    assert expected_block_tokens(p_fn, q_fn, [0], "exp_race", L=1) == pytest.approx(
        1.0 + exact_acceptance(p, q, "exp_race"), abs=1e-12)
    # the draft equal to the target accepts everything
    assert expected_block_tokens(p_fn, p_fn, [0], "exp_race", L=L) == pytest.approx(L + 1)


@settings(max_examples=10, deadline=None)
@given(markov_pairs(max_n=3), st.integers(1, 3))
def test_mpfr_block_expectation_properties(pair, B):
    t, d = pair
    p_fn, q_fn = _fns(t, d)
    p, q = t.next_distribution([1]), d.next_distribution([1])
    one = expected_block_tokens(p_fn, q_fn, [1], "mpfr", L=1, B=B)
    assert one == pytest.approx(1.0 + exact_acceptance(p, q, "mpfr", B), abs=1e-7)
    if B == 1:  # MPFR with one draft is the exponential race
        for L in (1, 2):
            assert expected_block_tokens(p_fn, q_fn, [1], "mpfr", L=L) == pytest.approx(
                expected_block_tokens(p_fn, q_fn, [1], "exp_race", L=L), rel=1e-12)


@given(prob_pairs(max_size=12))
def test_race_joint_sums_to_the_exact_race_acceptance(pq):
    p, q = pq
    J = _race_joint(p, q)
    assert np.all(J <= np.minimum(p, q) + 1e-15) and np.all(J >= 0)
    assert J.sum() == pytest.approx(exact_acceptance(p, q, "exp_race"), abs=1e-12)


def test_multiplicity_law_rows_and_acceptance():
    rng = np.random.default_rng(4)
    p, q = rng.dirichlet(np.ones(4)), rng.dirichlet(np.ones(4))
    for nu in (1, 2, 3):
        J = mpfr_multiplicity_law(p, q, nu)
        assert J.shape == (4, nu + 1)
        np.testing.assert_allclose(J.sum(axis=1), p, atol=1e-7)
        assert 1 - J[:, 0].sum() == pytest.approx(exact_acceptance(p, q, "mpfr", nu), abs=1e-9)
    # zeros: q_i = 0 is never drafted; p_i = 0 gives an empty row
    p0 = np.array([0.5, 0.5, 0.0])
    q0 = np.array([0.0, 0.5, 0.5])
    J = mpfr_multiplicity_law(p0, q0, 2)
    assert J[0, 0] == 0.5 and np.all(J[0, 1:] == 0) and np.all(J[2] == 0)
    J2 = mpfr_multiplicity_law(2 * p0, 2 * q0, 2, normalize=True)
    np.testing.assert_array_equal(J, J2)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda f: expected_block_tokens(f, f, [0], "gls"), "scheme"),
        (lambda f: expected_block_tokens(f, f, [0], "sd", B=2), "B"),
        (lambda f: expected_block_tokens(f, f, [0], "mpfr", B=65), "B"),
        (lambda f: expected_block_tokens(f, f, [0], "sd", L=0), "L"),
        (lambda f: expected_block_tokens(f, f, [0], "sd", L=257), "L"),
        (lambda f: expected_block_tokens("p", f, [0], "sd"), "p_fn"),
        (lambda f: expected_block_tokens(f, None, [0], "sd"), "q_fn"),
        (lambda f: expected_block_tokens(lambda c: [0.5, 0.6], f, [0], "sd"), "p_fn"),
        (lambda f: expected_block_tokens(f, lambda c: [0.5, 0.5], [0], "sd"), "q_fn"),
        (lambda f: expected_block_tokens(f, f, [-1], "sd"), "prompt"),
        (lambda f: expected_block_tokens(f, f, [[0]], "sd"), "prompt"),
        (lambda f: expected_block_tokens(f, f, [0], "sd", context_length=-1), "context_length"),
        (lambda f: mpfr_multiplicity_law([0.5, 0.5], [0.5, 0.5], 0), "nu"),
        (lambda f: mpfr_multiplicity_law([0.5, 0.5], [0.5, 0.5], 65), "nu"),
        (lambda f: mpfr_multiplicity_law([[0.5, 0.5]], [0.5, 0.5], 1), "p"),
        (lambda f: mpfr_multiplicity_law([0.5, 0.5], [1.0], 1), "q"),
    ],
)
def test_validation(call, match):
    f = MarkovLM.random(3, seed=1).next_distribution
    with pytest.raises(ValueError, match=match):
        call(f)


def test_enumeration_size_is_refused_up_front():
    big = np.full(1000, 1e-3)

    def f(ctx):
        return big

    with pytest.raises(ValueError, match="L: "):
        expected_block_tokens(f, f, [0], "sd", L=3)
    with pytest.raises(ValueError, match="L: "):
        expected_block_tokens(f, f, [0], "sd", L=200, context_length=3)
    # a window makes it polynomial: 10 + 199 * 10 states
    small = np.full(10, 0.1)
    assert expected_block_tokens(lambda c: small, lambda c: small, [0], "sd", L=200,
                                 context_length=1) == pytest.approx(201)
    sizes = iter([3, 4, 4, 4, 4, 4])
    last = [0]

    def p_fn(ctx):
        last[0] = next(sizes)
        return np.full(last[0], 1.0 / last[0])

    def q_fn(ctx):
        return np.full(last[0], 1.0 / last[0])

    with pytest.raises(ValueError, match="p_fn: vocabulary size changed"):
        expected_block_tokens(p_fn, q_fn, [0], "sd", L=2)
    assert set(BLOCK_SCHEMES) == {"sd", "exp_race", "mpfr"}


#: entries that break ratio arithmetic: subnormal (q_j / q_i overflows), the smallest normal,
#: tiny normal, and near-degenerate
_AWKWARD = (5e-324, 1e-320, 1e-310, 2.2250738585072014e-308, 1e-300, 1e-200, 1e-16)


@st.composite
def awkward_pairs(draw, max_size=4):
    """(p, q) pairs (heavy-tailed, sparse, one-hot, ...) where one entry of p or q may be set
    to a subnormal or tiny value (the rest rescaled so the vector still sums to 1)."""
    p, q = draw(prob_pairs(min_size=2, max_size=max_size))
    p, q = p.copy(), q.copy()
    for v in draw(st.sampled_from([(), (q,), (p,), (p, q)])):
        i = draw(st.integers(0, v.size - 1))
        rest = np.arange(v.size) != i
        if v[rest].sum() < 1e-3:  # nearly one-hot at i: rescaling the rest would overflow
            continue
        tiny = draw(st.sampled_from(_AWKWARD))
        v[rest] *= (1.0 - tiny) / v[rest].sum()
        v[i] = tiny
    return p, q


@settings(max_examples=25, deadline=None)
@given(awkward_pairs(), st.integers(1, 3))
def test_multiplicity_law_is_a_law_on_awkward_inputs(pq, nu):
    """A subnormal entry of q made q_j / q_i overflow: NaN rows (and entries of -2.2e-16
    from the quadrature elsewhere).  The law must be a probability table whose rows sum to
    p and whose acceptance is the exact one (exact_acceptance and pml_bound, Liu, Wan, Gao &
    Gündüz 2026, arXiv:2609.21858, Thm. B.1)."""
    p, q = pq
    J = mpfr_multiplicity_law(p, q, nu)
    assert J.shape == (p.size, nu + 1)
    assert np.all(np.isfinite(J)) and np.all(J >= 0) and np.all(J <= 1)
    np.testing.assert_allclose(J.sum(axis=1), p, atol=1e-7)
    acc = 1 - J[:, 0].sum()
    assert acc == pytest.approx(exact_acceptance(p, q, "mpfr", nu), abs=1e-9)
    assert acc == pytest.approx(pml_bound(p, q, nu), abs=1e-9)


def test_multiplicity_law_with_a_subnormal_draft_probability():
    # q_1 = 5e-324: token 1 is (in floating point) never drafted twice; once with
    # probability ~ nu q_1 / p_1, which rounds to the smallest subnormals
    for nu in (1, 2, 3):
        J = mpfr_multiplicity_law([0.5, 0.5], [1.0, 5e-324], nu)
        assert np.all(np.isfinite(J)) and np.all(J >= 0)
        assert J[1, 0] == 0.5 and np.all(J[1, 1:] <= 1e-320)
        np.testing.assert_allclose(J[0], [0.0] * nu + [0.5], atol=1e-9)
        assert 1 - J[:, 0].sum() == exact_acceptance([0.5, 0.5], [1.0, 5e-324], "mpfr", nu)


def test_multiplicity_law_is_continuous_into_the_subnormal_range():
    """The law of N_i given Y = i (row i over p_i) tends to a limit as p_i -> 0: the integral
    in the winner's score g lived on [0, ~p_i] and adaptive quadrature missed it from
    p_i ~ 1e-6 on (0.357 instead of 0.657 for P(N_0 >= 2)); subnormal p_i overflowed."""
    q = np.array([0.3, 0.7])
    rows = {tiny: mpfr_multiplicity_law([tiny, 1 - tiny], q, 3)[0] / tiny
            for tiny in (1e-3, 1e-6, 1e-12, 1e-300, 1e-310)}
    for tiny in (1e-6, 1e-12, 1e-300, 1e-310):
        np.testing.assert_allclose(rows[tiny], rows[1e-12], atol=1e-5)
    np.testing.assert_allclose(rows[1e-3], rows[1e-12], atol=1e-3)


@pytest.mark.parametrize(("p", "q", "nu"), [
    ([1.0, 6.22982842855447e-17, 1e-200], [0.5134137301699453, 1e-320, 0.48658626983005465], 3),
    ([0.3020228399699312, 0.48083103556558204, 0.21714611446448667, 1e-08],
     [0.33333302026537254, 0.3333336836650006, 2.2250738585072014e-308, 0.3333332960696268], 2),
    ([0.029787210813995036, 1.1865317921188178e-200, 5e-324, 0.5075444874895522,
      0.35396661107493915, 0.10870169062151366],
     [4.8003572649678076e-08, 1.6476766227167646e-08, 2.1947237979742814e-10,
      0.9996651359181449, 0.00033479938204398834, 1e-320], 3),
])
def test_multiplicity_law_on_near_degenerate_pairs(p, q, nu):
    """Found by random search: kinks of Lambda at ~1e-300 and an integrand in s that drops
    on the scale 1e-7 made quad raise IntegrationWarning (an error under the test settings).
    """
    p, q = np.asarray(p) / np.sum(p), np.asarray(q) / np.sum(q)
    J = mpfr_multiplicity_law(p, q, nu)
    assert np.all(np.isfinite(J)) and np.all(J >= 0)
    np.testing.assert_allclose(J.sum(axis=1), p, atol=1e-12)
    assert 1 - J[:, 0].sum() == pytest.approx(exact_acceptance(p, q, "mpfr", nu), abs=1e-12)
