"""The exact tokens per block of block verification (specbound.theory.blockver_block_tokens).

Deterministic checks: the closed form (the residual-weight recursion) equals the law of the
kept prefix computed from Alg. 2 of Sun et al. (2024, arXiv:2403.10444) path by path; it is
at least token-wise speculative sampling's value (``scheme="sd"``) and equal at ``L = 1``
(hypothesis, with zeros and near-degenerate laws).  The refusals of bad input and of too
large enumerations are checked for it and for :func:`specbound.theory.hsd_block_tokens`,
which shares its enumeration.  The Monte Carlo check against the simulator is in
``tests/test_sim_blockver.py``.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specbound.testing.strategies import prob_vectors
from specbound.theory import blockver_block_tokens, expected_block_tokens, hsd_block_tokens

#: the exact values whose input handling and enumeration are shared
BLOCK_TOKENS = pytest.mark.parametrize("tokens", [blockver_block_tokens, hsd_block_tokens])


def _markov(P, Q):
    """``p_fn``, ``q_fn`` of first-order chains with rows ``P[v]`` / ``Q[v]`` after ``v``."""
    return (lambda c: P[c[-1]]), (lambda c: Q[c[-1]])


def _alg2_tokens(p_fn, q_fn, prompt, L):
    """Expected tokens of one block straight from Alg. 2: for every full draft path of
    positive draft probability, ``h_1..h_L`` and ``P(tau = i | x) = h_i prod_{j > i} (1 -
    h_j)`` (``tau = max{i : eta_i <= h_i}``), averaged over ``x ~ Q``; plus one token."""
    n = len(p_fn(np.array(prompt)))
    total = 1.0
    for x in itertools.product(range(n), repeat=L):
        ctxs = [np.array(list(prompt) + list(x[:i])) for i in range(L + 1)]
        P = [np.asarray(p_fn(c), float) for c in ctxs[:L]]
        Q = [np.asarray(q_fn(c), float) for c in ctxs[:L]]
        qx = np.prod([Q[i][x[i]] for i in range(L)])
        if qx == 0.0:
            continue
        p = [1.0]
        for i in range(L):
            p.append(min(p[-1] * P[i][x[i]] / Q[i][x[i]], 1.0))
        h = np.empty(L + 1)
        for i in range(1, L):
            r = np.maximum(p[i] * P[i] - Q[i], 0.0).sum()
            den = r + 1.0 - p[i]
            h[i] = r / den if den > 0 else 1.0
        h[L] = p[L]
        e_tau = sum(i * h[i] * np.prod(1.0 - h[i + 1:L + 1]) for i in range(1, L + 1))
        total += qx * e_tau
    return total


def _random_chains(rng):
    """``(n, L, p_fn, q_fn)``: random first-order pairs over ``n`` tokens, lookahead ``L``,
    the target with a zero (the pairs the enumerations are checked on path by path)."""
    for n, L in ((2, 1), (3, 2), (3, 3), (4, 3)):
        P = rng.dirichlet(np.ones(n) * 0.7, size=n)
        Q = rng.dirichlet(np.ones(n) * 0.7, size=n)
        P[0, 0] = 0.0  # a zero of the target
        P[0] /= P[0].sum()
        yield (n, L, *_markov(P, Q))


def test_closed_form_equals_the_algorithm_path_by_path():
    rng = np.random.default_rng(3)
    for n, L, p_fn, q_fn in _random_chains(rng):
        got = blockver_block_tokens(p_fn, q_fn, [1], L=L, context_length=1)
        assert got == pytest.approx(_alg2_tokens(p_fn, q_fn, [1], L), abs=1e-12), (n, L)
    # a context-dependent pair (whole-context laws, no window)
    table = {}

    def law(c, which):
        key = (tuple(c.tolist()), which)
        if key not in table:
            table[key] = rng.dirichlet(np.ones(3))
        return table[key]

    p_fn, q_fn = (lambda c: law(c, 0)), (lambda c: law(c, 1))
    assert blockver_block_tokens(p_fn, q_fn, [0, 2], L=3) == pytest.approx(
        _alg2_tokens(p_fn, q_fn, [0, 2], 3), abs=1e-12)


def test_limits_and_a_known_value():
    P = np.array([[0.5, 0.5], [0.2, 0.8]])
    p_fn, _ = _markov(P, P)
    assert blockver_block_tokens(p_fn, p_fn, [0], L=4, context_length=1) == pytest.approx(5.0)
    # disjoint supports: nothing is kept
    A, B = np.array([[1.0, 0.0], [1.0, 0.0]]), np.array([[0.0, 1.0], [0.0, 1.0]])
    assert blockver_block_tokens(*_markov(A, B), [0], L=3, context_length=1) == 1.0
    # L = 2, i.i.d. p = (1/2, 1/2), q = (3/4, 1/4): sum_x min(p, q) = 3/4 at depth 1; at depth
    # 2, w_2(x1 x2) = min(w_1(x1) p(x2), q(x1) q(x2)) = 0.25, 0.1875, 0.125, 0.0625
    p_fn, q_fn = (lambda c: np.array([0.5, 0.5])), (lambda c: np.array([0.75, 0.25]))
    assert blockver_block_tokens(p_fn, q_fn, [], L=2, context_length=0) == pytest.approx(
        1.0 + 0.75 + 0.625, abs=1e-15)
    # token-wise SD keeps both drafts with probability 0.75^2 only: a strict gain of 1/16
    assert expected_block_tokens(p_fn, q_fn, [], "sd", L=2, context_length=0) == pytest.approx(
        1.0 + 0.75 + 0.5625, abs=1e-15)


@st.composite
def _chains(draw):
    n = draw(st.integers(1, 4))
    P = np.array([draw(prob_vectors(n=n)) for _ in range(n)])
    Q = np.array([draw(prob_vectors(n=n)) for _ in range(n)])
    return P, Q


@settings(max_examples=60, derandomize=True, deadline=None)
@given(_chains(), st.integers(1, 4))
def test_at_least_token_wise_speculative_sampling_and_equal_at_one(chain, L):
    """Block verification keeps at least as many drafts as token-wise speculative sampling
    (Sun et al. 2024: its optimality among lossless verifiers of one draft block), the same
    at ``L = 1``, and
    1 <= tokens <= L + 1 (zeros, one-hot and near-uniform laws from the package's
    strategies)."""
    P, Q = chain
    p_fn, q_fn = _markov(P, Q)
    bv = blockver_block_tokens(p_fn, q_fn, [0], L=L, context_length=1)
    sd = expected_block_tokens(p_fn, q_fn, [0], "sd", L=L, context_length=1)
    assert 1.0 - 1e-12 <= sd <= bv + 1e-12 and bv <= L + 1 + 1e-12
    one = blockver_block_tokens(p_fn, q_fn, [0], L=1, context_length=1)
    assert one == pytest.approx(expected_block_tokens(p_fn, q_fn, [0], "sd", L=1,
                                                      context_length=1), abs=1e-12)
    if np.array_equal(P, Q):
        assert bv == pytest.approx(L + 1)


@pytest.mark.parametrize(("tokens", "kwargs", "match"), [
    *[(fn, kwargs, match) for fn in (blockver_block_tokens, hsd_block_tokens)
      for kwargs, match in [
          ({"p_fn": 3}, "p_fn"),
          ({"q_fn": None}, "q_fn"),
          ({"L": 0}, "L"),
          ({"L": 65}, "L"),
          ({"L": 1.5}, "L"),
          ({"prompt": [[1]]}, "prompt"),
          ({"prompt": [-1]}, "prompt"),
          ({"context_length": -1}, "context_length"),
      ]],
    (hsd_block_tokens, {"acceptance": "uncapped"}, "acceptance"),
    (hsd_block_tokens, {"acceptance": None}, "acceptance"),
])
def test_bad_input_names_the_argument(tokens, kwargs, match):
    P = np.array([[0.5, 0.5], [0.2, 0.8]])
    p_fn, q_fn = _markov(P, P)
    kw = dict(p_fn=p_fn, q_fn=q_fn, prompt=[0], L=2)
    kw.update(kwargs)
    with pytest.raises(ValueError, match=f"^{match}"):
        tokens(kw.pop("p_fn"), kw.pop("q_fn"), kw.pop("prompt"), **kw)


@BLOCK_TOKENS
def test_too_large_enumerations_and_bad_laws_are_refused(tokens):
    big = np.full(200, 1 / 200)
    with pytest.raises(ValueError, match="^L"):
        tokens(lambda c: big, lambda c: big, [0], L=4)
    with pytest.raises(ValueError, match="p_fn"):
        tokens(lambda c: np.array([0.5, 0.6]), lambda c: np.array([0.5, 0.5]), [0], L=2)

    def ragged(c):  # 2 tokens at the prompt, 3 after it
        k = 2 if len(c) == 0 else 3
        return np.full(k, 1.0 / k)

    with pytest.raises(ValueError, match="^p_fn: vocabulary size changed"):
        tokens(ragged, ragged, [], L=2)
