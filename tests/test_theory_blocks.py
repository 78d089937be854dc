"""Tests of specbound.theory.blocks: exact expected tokens per speculative block and the MPFR
multiplicity law, from next-distribution callables."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specbound.sim import MarkovLM
from specbound.sim import expected_block_tokens as sim_block_tokens
from specbound.theory import exact_acceptance, tv_distance
from specbound.theory.blocks import (
    BLOCK_SCHEMES,
    _race_joint,
    expected_block_tokens,
    mpfr_multiplicity_law,
)
from tests.strategies import prob_pairs


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
