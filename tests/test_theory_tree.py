"""Tests for specbound.theory.tree: truncation sets, tree verification, and Lemma 1,
Theorem 1 and Proposition 1 of Zhou et al. (2026), arXiv:2607.26627."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from specbound.testing.strategies import prob_pairs, prob_vectors
from specbound.theory import lossy as L
from specbound.theory import tree as T

ATOL = 1e-9
P3 = np.array([0.5, 0.3, 0.2])
Q3 = np.array([0.2, 0.3, 0.5])
A3 = np.array([True, False, True])


def _mask(n, seed, p):
    """A random allowed set that always contains the argmax of p (so Z_Θ(p) > 0)."""
    rng = np.random.default_rng(seed)
    A = rng.random(n) < rng.uniform(0.1, 0.9)
    A[np.argmax(p)] = True
    return A


def _assert_prob(d):
    assert np.all(d >= -1e-15)
    assert abs(d.sum() - 1.0) < ATOL


# ---------------------------------------------------------------------------------------------
# truncation sets, Lemma 1, Theorem 1, Proposition 1
# ---------------------------------------------------------------------------------------------
@given(prob_vectors(max_size=100), st.floats(0.0, 1.0), st.floats(1e-6, 0.999))
def test_truncation_sets(p, p_base, eps):
    A = T.min_p_allowed(p, p_base)
    assert A[np.argmax(p)]
    np.testing.assert_array_equal(A, p >= p_base * p.max())
    if p_base > 0:
        assert np.all(p[A] > 0)
    E = T.eta_allowed(p, eps)
    s = p > 0
    H = -np.sum(p[s] * np.log(p[s]))
    eta = min(eps, np.sqrt(eps) * np.exp(-H))
    assert E.any()
    np.testing.assert_array_equal(E, p > eta)
    pt = T.truncated_target(p, E)
    _assert_prob(pt)
    np.testing.assert_allclose(pt, np.where(E, p, 0) / p[E].sum())
    # 2-D input: one set per row
    both = T.min_p_allowed(np.stack([p, p]), p_base)
    np.testing.assert_array_equal(both, np.stack([A, A]))
    np.testing.assert_array_equal(T.eta_allowed(np.stack([p, p]), eps), np.stack([E, E]))


@given(prob_pairs(), st.integers(0, 2**32 - 1), st.floats(0.0, 1.0))
def test_lemma1_identity_exact(pq, seed, p_base):
    p, q = pq
    for A in (_mask(p.size, seed, p), T.min_p_allowed(p, p_base)):
        gain, loss = T.truncation_efficiency_delta(p, q, A)
        assert gain >= 0 and loss >= 0
        pt = T.truncated_target(p, A)
        net = np.minimum(pt, q).sum() - np.minimum(p, q).sum()
        assert gain - loss == pytest.approx(net, abs=1e-12)


@given(prob_pairs(), st.floats(0.01, 0.9))
def test_kl_sd_zero_when_q_matches_p_on_A_and_equals_distortion(pq, p_base):
    p, q = pq
    A = T.min_p_allowed(p, p_base)
    # q = p on A (anything off A, kept normalized): q_Θ = p_Θ
    off = np.where(A, 0.0, q)
    qq = np.where(A, p * (1 - off.sum()) / p[A].sum(), off)
    qq = qq / qq.sum()
    assert T.kl_truncation_sd(p, qq, A) == pytest.approx(0.0, abs=1e-12)
    assert T.kl_truncation_sd(p, p, A) == pytest.approx(0.0, abs=1e-12)
    # KL_SD is the KL of the Eq. 13 law against p_Θ
    kl = T.kl_truncation_sd(p, q, A)
    d = L.distortion(L.induced_distribution(p, q, "truncation", allowed=A), p, allowed=A)
    assert kl == pytest.approx(d.kl_truncated, rel=1e-12, abs=1e-15)
    assert kl >= 0


@given(prob_pairs(min_size=2, max_size=80), st.floats(0.01, 1.0), st.integers(1, 5))
def test_kl_tree_positive_unless_point_mass(pq, p_base, D):
    p, q = pq
    A = T.min_p_allowed(p, p_base)
    cand = np.argsort(-q, kind="stable")[: min(D, p.size)]  # greedy drafting: top-D of q
    kl = T.kl_truncation_tree(p, cand, A)
    pt = T.truncated_target(p, A)
    point_mass = np.isclose(pt.max(), 1.0, rtol=0, atol=1e-15)
    if not A[cand].any():
        assert kl == 0.0  # bonus token from p_Θ: the position emits p_Θ
    elif point_mass:
        assert kl == pytest.approx(0.0, abs=1e-15)
    else:
        assert kl > 0
        x = cand[A[cand]][0]
        assert kl == pytest.approx(-np.log(pt[x]))
        # the emitted law is δ_x and KL(δ_x || p_Θ) = kl
        em = T.tree_emitted_distribution(p, cand, "speccascade", allowed=A)
        assert em[x] == 1.0
        assert L.distortion(em, p, allowed=A).kl_truncated == pytest.approx(kl)
    # Theorem 1: as q -> p, KL_SD -> 0 while KL_tree stays put (it does not depend on q given
    # the candidates)
    assert T.kl_truncation_sd(p, p, A) == pytest.approx(0.0, abs=1e-12)


@given(
    st.integers(1, 4).flatmap(
        lambda L_: st.tuples(
            st.lists(prob_vectors(n=12), min_size=L_, max_size=L_),
            st.lists(st.floats(0.01, 1.0), min_size=L_, max_size=L_),
            st.integers(0, 2**32 - 1),
        )
    ),
    st.integers(1, 4),
)
def test_prop1_tree_block_efficiency_ordering(data, D):
    ps, bases, seed = data
    rng = np.random.default_rng(seed)
    p = np.stack(ps)
    A = np.stack([T.min_p_allowed(pi, b) for pi, b in zip(ps, bases, strict=True)])
    C = np.stack([rng.permutation(12)[:D] for _ in ps])
    lossless = T.tree_block_efficiency(p, C, "lossless", allowed=A)
    for rule in ("truncation", "speccascade", "typical"):
        assert T.tree_block_efficiency(p, C, rule, allowed=A) >= lossless - 1e-15
    a_ll = T.tree_acceptance(p, C, "lossless", allowed=A)
    a_tr = T.tree_acceptance(p, C, "speccascade", allowed=A)
    pt = T.truncated_target(p, A)
    np.testing.assert_allclose(a_ll, np.take_along_axis(pt, C, axis=1).sum(axis=1), atol=1e-15)
    assert np.all(a_tr >= a_ll - 1e-15)
    # Corollary 1: equality iff p_Θ(C) ∈ {0, 1}
    extreme = np.isclose(a_ll, 0.0, atol=1e-15) | np.isclose(a_ll, 1.0, atol=1e-12)
    np.testing.assert_array_equal(np.isclose(a_tr, a_ll, atol=1e-12), extreme)
    # Eq. 73: Σ_k Π_{i<=k} a_i
    assert lossless == pytest.approx(np.cumprod(a_ll).sum())
    # lossless tree verification emits p_Θ
    np.testing.assert_allclose(T.tree_emitted_distribution(p, C, "lossless", allowed=A), pt)


def test_tree_block_efficiency_iid_and_bonus():
    p = np.array([0.4, 0.3, 0.2, 0.1])
    A = np.array([True, True, True, False])
    C = np.array([1, 3])  # p_Θ(C) = 0.3 / 0.9
    a = 1 / 3
    for Ld in (1, 4, 8):
        be = T.tree_block_efficiency(p, C, "lossless", allowed=A, L=Ld)
        assert be == pytest.approx(sum(a**k for k in range(1, Ld + 1)))
        with_bonus = T.tree_block_efficiency(p, C, "lossless", allowed=A, L=Ld, bonus=True)
        assert with_bonus == pytest.approx((1 - a ** (Ld + 1)) / (1 - a))  # Leviathan et al.
        assert T.tree_block_efficiency(p, C, "speccascade", allowed=A, L=Ld) == Ld
    # no candidate in A: nothing accepted under either rule
    assert T.tree_block_efficiency(p, [3], "speccascade", allowed=A, L=3) == 0.0
    assert T.tree_acceptance(p, [3], "lossless", allowed=A) == 0.0
    np.testing.assert_allclose(
        T.tree_emitted_distribution(p, [3], "truncation", allowed=A), T.truncated_target(p, A)
    )
    assert T.kl_truncation_tree(p, [3], A) == 0.0
    # candidates given as integral floats are accepted
    assert T.tree_acceptance(p, np.array([1.0, 3.0]), "lossless", allowed=A) == pytest.approx(a)


def test_tree_validation_errors():
    with pytest.raises(ValueError, match="p_base"):
        T.min_p_allowed(P3, 1.5)
    for eps in (0.0, 1.0, -1):
        with pytest.raises(ValueError, match="epsilon"):
            T.eta_allowed(P3, eps)
    with pytest.raises(ValueError, match="allowed: the allowed set carries no target mass"):
        T.truncated_target([0.5, 0.0, 0.5], [False, True, False])
    with pytest.raises(ValueError, match="allowed"):
        T.truncation_efficiency_delta([0.5, 0.0, 0.5], Q3, [False, True, False])
    with pytest.raises(ValueError, match="allowed: shape"):
        T.kl_truncation_sd(P3, Q3, [True, False])
    for bad, match in (
        ([3], "candidates: token ids must lie"),
        ([-1], "candidates: token ids must lie"),
        ([0, 0], "candidates: token ids must be distinct"),
        ([0.5], "candidates: must be integer"),
        ([], "candidates: must be a non-empty"),
        ([[0], [1]], "candidates: shape mismatch"),
    ):
        with pytest.raises(ValueError, match=match):
            T.kl_truncation_tree(P3, bad, A3)
    with pytest.raises(ValueError, match="rule"):
        T.tree_acceptance(P3, [0], "eagle", allowed=A3)
    with pytest.raises(ValueError, match="rule"):
        T.tree_emitted_distribution(P3, [0], "eagle", allowed=A3)
    with pytest.raises(ValueError, match="L: required"):
        T.tree_block_efficiency(P3, [0], "lossless", allowed=A3)
    with pytest.raises(ValueError, match="L: must equal"):
        T.tree_block_efficiency(np.stack([P3, P3]), [0], "lossless", allowed=A3, L=3)
    with pytest.raises(ValueError, match="L"):
        T.tree_block_efficiency(P3, [0], "lossless", allowed=A3, L=0)
    with pytest.raises(ValueError, match="bonus"):
        T.tree_block_efficiency(P3, [0], "lossless", allowed=A3, L=2, bonus=1)



def test_argument_order_matches_the_simulator():
    # (p, candidates, rule, *, allowed) like simulate_tree_verification(p, q, rule, *, ...)
    p = np.array([0.4, 0.3, 0.2, 0.1])
    A = np.array([True, True, True, False])
    C = np.array([1, 3])
    for fn in (T.tree_acceptance, T.tree_emitted_distribution):
        # the pre-release order (p, candidates, allowed, rule) is refused
        with pytest.raises(TypeError, match="positional"):
            fn(p, C, A, "lossless")
        with pytest.raises(TypeError, match="multiple values"):
            fn(p, C, A, rule="lossless")
    with pytest.raises(TypeError, match="positional"):
        T.tree_block_efficiency(p, C, A, "lossless", 4, True)
    # without allowed: no truncation (p_Θ = p), which only the lossless rule accepts
    np.testing.assert_allclose(T.tree_emitted_distribution(p, C, "lossless"), p, rtol=1e-15)
    with pytest.raises(ValueError, match="allowed: required by rule 'typical'"):
        T.tree_acceptance(p, C, "typical")


def test_names_moved_from_theory_lossy_live_in_theory_tree_only():
    for name in ("min_p_allowed", "eta_allowed", "truncated_target", "tree_acceptance",
                 "kl_truncation_sd", "truncation_efficiency_delta"):
        assert callable(getattr(T, name))
        assert not hasattr(L, name)


def test_hostile_inputs_name_the_argument():
    p = np.array([0.4, 0.3, 0.2, 0.1])
    with pytest.raises(ValueError, match="^candidates: "):
        T.tree_acceptance(p, np.array([2**64 - 1], dtype=np.uint64), "lossless")
    with pytest.raises(ValueError, match="^candidates: "):
        T.tree_acceptance(p, "01", "lossless")
    with pytest.raises(ValueError, match="^L: too large"):
        T.tree_block_efficiency(p, [0], "lossless", L=10**12)
    with pytest.raises(ValueError, match="^bonus: must be True or False"):
        T.tree_block_efficiency(p, [0], "lossless", L=2, bonus="no")
