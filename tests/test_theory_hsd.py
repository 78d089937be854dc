"""The exact tokens per block of hierarchical speculative decoding
(specbound.theory.hsd_block_tokens; Zhou et al., ICLR 2026, arXiv:2601.05724).

Deterministic checks: the enumeration equals the law of the kept prefix computed from the
algorithm path by path; the emitted law of lossless HSD is the target's exactly (two tokens,
enumerated), while the released code's uncapped full-block test (``acceptance="joint"``) is
not lossless (the toy pair ``p = (1/3, 2/3)``, ``q = (2/3, 1/3)``); hypothesis properties:
lossless HSD equals block verification (Sun et al. 2024, arXiv:2403.10444), is at least
token-wise speculative sampling and equal to it at ``L = 1``, the joint test is at least the
capped one.  The refusals of bad input and of too large enumerations, shared with block
verification, are checked for both in ``tests/test_theory_blockver.py``; the Monte Carlo
checks against the simulator are in ``tests/test_sim_blockver.py`` (run on both decoders)
and ``tests/test_sim_hsd.py``.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specbound.theory import blockver_block_tokens, expected_block_tokens, hsd_block_tokens
from tests.test_theory_blockver import _chains, _markov, _random_chains

TOY_P = np.array([1 / 3, 2 / 3])
TOY_Q = np.array([2 / 3, 1 / 3])


def _iid(p, q):
    return (lambda c: p), (lambda c: q)


def _block_law(p_fn, q_fn, prompt, L, acceptance="capped"):
    """The law of the tokens one block emits, straight from the algorithm: for every full
    draft path of positive draft probability, the joint ratios ``R_k``, the caps ``c_k``, the
    step-back probabilities ``b_k = 1 - A_k / max(A_k, D_k)``, the probability of keeping the
    block (``c_L``, or ``min(1, R_L)`` for ``"joint"``) and of stopping at each level; then
    the correction from ``(c_k P_k - Q_k)_+`` or the bonus from ``P_L``."""
    n = len(p_fn(np.array(prompt, dtype=np.int64)))
    out: dict = {}
    for x in itertools.product(range(n), repeat=L):
        ctxs = [np.array(list(prompt) + list(x[:i]), dtype=np.int64) for i in range(L + 1)]
        P = [np.asarray(p_fn(c), float) for c in ctxs]
        Q = [np.asarray(q_fn(c), float) for c in ctxs[:L]]
        qx = float(np.prod([Q[i][x[i]] for i in range(L)]))
        if qx == 0.0:
            continue
        R = [1.0]
        for i in range(L):
            R.append(R[-1] * P[i][x[i]] / Q[i][x[i]])
        c = [R[k] / max([1.0, *R[1:k + 1]]) for k in range(L + 1)]
        b = [0.0] * L
        for k in range(1, L):
            d = c[k] * P[k] - Q[k]
            a_k, d_k = np.maximum(d, 0).sum(), np.maximum(-d, 0).sum()
            b[k] = 0.0 if max(a_k, d_k) == 0 else 1.0 - a_k / max(a_k, d_k)
        keep = c[L] if acceptance == "capped" else min(1.0, R[L])
        stops = {L: keep}
        for k in range(L - 1, -1, -1):
            stops[k] = (1 - keep) * (1 - b[k]) * float(np.prod(b[k + 1:L]))
        for tau, w in stops.items():
            if w == 0.0:
                continue
            if tau == L:
                law = P[L]
            else:
                law = np.maximum(c[tau] * P[tau] - Q[tau], 0.0)
                law = law / law.sum() if law.sum() > 0 else P[tau]
            for y in np.flatnonzero(law):
                key = tuple(x[:tau]) + (int(y),)
                out[key] = out.get(key, 0.0) + qx * w * float(law[y])
    return out


def _two_token_law(p_fn, q_fn, prompt, L, acceptance="capped"):
    """The law of the first two emitted tokens (a one-token block is followed by the next
    block's first token, from the same algorithm)."""
    two: dict = {}
    for seq, w in _block_law(p_fn, q_fn, prompt, L, acceptance).items():
        if len(seq) >= 2:
            two[seq[:2]] = two.get(seq[:2], 0.0) + w
            continue
        nxt = _block_law(p_fn, q_fn, list(prompt) + [seq[0]], L, acceptance)
        for s2, w2 in nxt.items():
            key = (seq[0], s2[0])
            two[key] = two.get(key, 0.0) + w * w2
    return two


def _tokens(law):
    return sum(w * len(s) for s, w in law.items())


def test_enumeration_equals_the_algorithm_path_by_path():
    for n, L, p_fn, q_fn in _random_chains(np.random.default_rng(3)):
        for acc in ("capped", "joint"):
            got = hsd_block_tokens(p_fn, q_fn, [1], L=L, context_length=1, acceptance=acc)
            assert got == pytest.approx(_tokens(_block_law(p_fn, q_fn, [1], L, acc)),
                                        abs=1e-12), (n, L, acc)


def test_lossless_hsd_emits_the_target_and_the_released_test_does_not():
    """Exact two-token laws (no sampling).  Lossless HSD: the target's law on the toy pair
    and on a random first-order pair, L = 2, 3.  The released code's full-block test
    ``min(1, R_L)``: on the toy pair at ``L = 2`` the block ``(1, 0)`` (``R_1 = 2``,
    ``R_2 = 1``) is always kept, so ``(1, 0)`` is emitted with probability 1/3 instead of
    ``p(1) p(0) = 2/9``; it keeps 7/3 tokens per block against block verification's 20/9,
    more than any lossless verifier of one draft block can (Sun et al. 2024,
    arXiv:2403.10444; Thomas & Pal 2026, arXiv:2602.16961): the value 1 + 12/9 of Sun et
    al.'s motivating example, which needs the joint block law."""
    p_fn, q_fn = _iid(TOY_P, TOY_Q)
    target = {(a, b): TOY_P[a] * TOY_P[b] for a in range(2) for b in range(2)}
    for L in (2, 3):
        law = _two_token_law(p_fn, q_fn, [], L)
        for k, v in target.items():
            assert law.get(k, 0.0) == pytest.approx(v, abs=1e-12), (L, k)
    bad = _two_token_law(p_fn, q_fn, [], 2, "joint")
    assert bad[(1, 0)] == pytest.approx(1 / 3, abs=1e-12)
    assert bad[(1, 1)] == pytest.approx(1 / 3, abs=1e-12)
    assert hsd_block_tokens(p_fn, q_fn, [], L=2, context_length=0) == pytest.approx(20 / 9)
    assert hsd_block_tokens(p_fn, q_fn, [], L=2, context_length=0,
                            acceptance="joint") == pytest.approx(7 / 3)
    assert hsd_block_tokens(p_fn, q_fn, [], L=3, context_length=0,
                            acceptance="joint") == pytest.approx(25 / 9)
    assert blockver_block_tokens(p_fn, q_fn, [], L=2, context_length=0) == pytest.approx(20 / 9)
    rng = np.random.default_rng(11)
    P = rng.dirichlet(np.ones(3), size=3)
    Q = rng.dirichlet(np.ones(3) * 0.5, size=3)
    P[2, 1] = 0.0
    P[2] /= P[2].sum()
    p_fn, q_fn = _markov(P, Q)
    for L in (2, 3):
        law = _two_token_law(p_fn, q_fn, [2], L)
        for a, b in itertools.product(range(3), repeat=2):
            assert law.get((a, b), 0.0) == pytest.approx(P[2, a] * P[a, b], abs=1e-12)


def test_limits_and_known_values():
    P = np.array([[0.5, 0.5], [0.2, 0.8]])
    p_fn, _ = _markov(P, P)
    assert hsd_block_tokens(p_fn, p_fn, [0], L=4, context_length=1) == pytest.approx(5.0)
    A, B = np.array([[1.0, 0.0], [1.0, 0.0]]), np.array([[0.0, 1.0], [0.0, 1.0]])
    for acc in ("capped", "joint"):  # disjoint supports: nothing is kept
        assert hsd_block_tokens(*_markov(A, B), [0], L=3, context_length=1,
                                acceptance=acc) == 1.0
    # i.i.d. p = (1/2, 1/2), q = (3/4, 1/4), L = 2: block verification's 1 + 3/4 + 5/8
    p_fn, q_fn = _iid(np.array([0.5, 0.5]), np.array([0.75, 0.25]))
    assert hsd_block_tokens(p_fn, q_fn, [], L=2, context_length=0) == pytest.approx(
        1.0 + 0.75 + 0.625, abs=1e-15)


@settings(max_examples=60, derandomize=True, deadline=None)
@given(_chains(), st.integers(1, 4))
def test_equals_block_verification_and_bounds(chain, L):
    """Lossless HSD keeps exactly as many tokens as block verification (its caps are block
    verification's residual weights, its stay probabilities block verification's ``h``), so
    at least token-wise speculative sampling and the same at ``L = 1``; the released test
    ``min(1, R_L)`` keeps at least as many, the same at ``L = 1``; ``1 <= tokens <= L + 1``;
    ``L + 1`` when draft and target agree (zeros, one-hot and near-uniform laws from the
    package's strategies)."""
    P, Q = chain
    p_fn, q_fn = _markov(P, Q)
    hsd = hsd_block_tokens(p_fn, q_fn, [0], L=L, context_length=1)
    joint = hsd_block_tokens(p_fn, q_fn, [0], L=L, context_length=1, acceptance="joint")
    bv = blockver_block_tokens(p_fn, q_fn, [0], L=L, context_length=1)
    sd = expected_block_tokens(p_fn, q_fn, [0], "sd", L=L, context_length=1)
    assert hsd == pytest.approx(bv, abs=1e-10)
    assert 1.0 - 1e-12 <= sd <= hsd + 1e-12 <= joint + 2e-12 and joint <= L + 1 + 1e-12
    one = hsd_block_tokens(p_fn, q_fn, [0], L=1, context_length=1)
    sd1 = expected_block_tokens(p_fn, q_fn, [0], "sd", L=1, context_length=1)
    assert one == pytest.approx(sd1, abs=1e-12)
    assert hsd_block_tokens(p_fn, q_fn, [0], L=1, context_length=1,
                            acceptance="joint") == pytest.approx(sd1, abs=1e-12)
    if np.array_equal(P, Q):
        assert hsd == pytest.approx(L + 1)
