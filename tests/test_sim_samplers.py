"""Token-level samplers: Numba kernels vs NumPy references, keyed clocks, validation, size
limits.  Tests marked ``kernel`` compare a kernel with its NumPy reference (``make test-nojit``)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from specbound.sim import SAMPLERS, sample_step, spectr_rho
from specbound.sim import _kernels as K
from specbound.sim import _reference as R
from specbound.sim.prf import context_label
from specbound.sim.samplers import Step, clock_shape
from specbound.testing.strategies import prob_pairs, prob_vectors

ALL = SAMPLERS
sample_step_reference = R.sample_step


def _pairs(seed=0, count=30, abs_cont=False):
    """Fixed (p, q) pairs including zeros, one-hot, disjoint supports, p = q, skewed."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(count):
        n = int(rng.choice([1, 2, 3, 5, 8, 20, 60]))
        p = rng.dirichlet(np.full(n, rng.choice([0.2, 1.0, 5.0])))
        q = rng.dirichlet(np.full(n, rng.choice([0.2, 1.0, 5.0])))
        kind = k % 6
        if kind == 1 and n > 1:  # zeros in both
            p[rng.permutation(n)[: n // 2]] = 0.0
            q[rng.permutation(n)[: n // 3]] = 0.0
        elif kind == 2:  # one-hot target
            p = np.zeros(n)
            p[rng.integers(n)] = 1.0
        elif kind == 3 and n > 1:  # disjoint supports
            half = n // 2
            p[:half] = 0.0
            q[half:] = 0.0
        elif kind == 4:
            q = p.copy()
        elif kind == 5:  # skewed
            p = p ** 6 + 1e-300
        p = p / p.sum()
        if q.sum() == 0:
            q = np.ones(n)
        q = q / q.sum()
        if abs_cont:
            q = 0.8 * q + 0.2 * p
        out.append((p, q))
    return out


def _B(scheme, k):
    return 1 if scheme in ("sd", "exp_race") else 1 + k % 5


def _same(step: Step, ref):
    y, d, a = ref
    return step.token == y and np.array_equal(step.drafts, np.asarray(d)) and step.accepted == a


@pytest.mark.kernel
@pytest.mark.parametrize("scheme", ALL)
def test_kernel_matches_reference_on_tables(scheme):
    rng = np.random.default_rng(11)
    for k, (p, q) in enumerate(_pairs(1, abs_cont=scheme == "mpfr_scan")):
        B = _B(scheme, k)
        U = rng.random(clock_shape(scheme, p.size, B))
        for _ in range(5):
            U = rng.random(U.shape)
            ref = sample_step_reference(p, q, scheme, B, U)
            assert _same(sample_step(p, q, scheme, B, uniforms=U), ref), (scheme, p, q, B)


@pytest.mark.kernel
@pytest.mark.parametrize("scheme", ALL)
def test_kernel_matches_reference_on_keyed_clocks(scheme):
    for k, (p, q) in enumerate(_pairs(2, count=18, abs_cont=scheme == "mpfr_scan")):
        B = _B(scheme, k)
        ctx = [k, 7, 3]
        label = context_label("secret", ctx)
        rows, cols = clock_shape(scheme, p.size, B, scan_rows=20_000)
        ref = sample_step_reference(p, q, scheme, B, R.clock_table(label, rows, cols))
        assert _same(sample_step(p, q, scheme, B, key="secret", context=ctx), ref)


@pytest.mark.kernel
@given(prob_pairs(min_size=1, max_size=40), st.integers(1, 6), st.integers(0, 2**32 - 1))
def test_kernels_match_references_property(pair, B, seed):
    p, q = pair
    rng = np.random.default_rng(seed)
    for scheme in ("exp_race", "mpfr", "gls", "specinfer", "spectr", "sd"):
        b = 1 if scheme in ("sd", "exp_race") else B
        U = rng.random(clock_shape(scheme, p.size, b))
        step = sample_step(p, q, scheme, b, uniforms=U)
        assert _same(step, sample_step_reference(p, q, scheme, b, U))
        assert p[step.token] > 0
        assert np.all(q[step.drafts] > 0)
        assert step.accepted == (step.token in step.drafts)


@pytest.mark.kernel
def test_mpfr_fast_equals_direct_on_keyed_clocks():
    """Alg. 6 literal and the O(n + B log B) kernel agree exactly on the same clocks."""
    rng = np.random.default_rng(5)
    for k in range(60):
        n = int(rng.choice([1, 2, 7, 100, 1000]))
        p = rng.dirichlet(np.full(n, 0.3))
        q = rng.dirichlet(np.full(n, 0.3))
        if k % 3 == 0:
            q[rng.permutation(n)[: n // 2]] = 0.0
            q = q / q.sum() if q.sum() > 0 else np.full(n, 1.0 / n)
        B = int(rng.choice([1, 2, 3, 8, 16, 33]))
        for ctx in ([k], [k, 1], [k, 2]):
            a = sample_step(p, q, "mpfr", B, key=b"k", context=ctx)
            b = sample_step(p, q, "mpfr_direct", B, key=b"k", context=ctx)
            assert a.token == b.token and np.array_equal(a.drafts, b.drafts)
            assert a.accepted == b.accepted


@pytest.mark.kernel
def test_mpfr_fast_equals_direct_on_tied_tables():
    """Exact ties (repeated uniforms, equal probabilities) are broken the same way."""
    p = np.full(6, 1 / 6)
    q = np.full(6, 1 / 6)
    U = np.full((6, 4), 0.5)
    a = sample_step(p, q, "mpfr", 4, uniforms=U)
    b = sample_step(p, q, "mpfr_direct", 4, uniforms=U)
    assert np.array_equal(a.drafts, b.drafts) and a.token == b.token == 0
    assert np.array_equal(a.drafts, [0, 1, 2, 3])


def test_shared_clocks_identities():
    """exp_race = mpfr(B=1) = gls(B=1) on token clocks; sd = specinfer(1) = spectr(1)."""
    for k, (p, q) in enumerate(_pairs(3)):
        ctx = [k]
        e = sample_step(p, q, "exp_race", key=1, context=ctx)
        for s in ("mpfr", "mpfr_direct", "gls"):
            o = sample_step(p, q, s, 1, key=1, context=ctx)
            assert (o.token, o.drafts[0], o.accepted) == (e.token, e.drafts[0], e.accepted)
        # the target winner of mpfr is the PFR winner for every B
        assert sample_step(p, q, "mpfr", 4, key=1, context=ctx).token == e.token
        d = sample_step(p, q, "sd", key=1, context=ctx)
        for s in ("specinfer", "spectr"):
            o = sample_step(p, q, s, 1, key=1, context=ctx)
            assert (o.token, o.drafts[0], o.accepted) == (d.token, d.drafts[0], d.accepted)


def test_keyed_step_depends_on_key_and_context():
    p = np.full(50, 0.02)
    tokens = {sample_step(p, p, "mpfr", 2, key=key, context=[c]).token
              for key in (1, 2) for c in range(20)}
    assert len(tokens) > 10  # 40 steps over 50 tokens: P(<= 10 distinct) is astronomically small
    a = sample_step(p, p, "mpfr", 2, key="k", context=[1, 2, 3], window=2)
    b = sample_step(p, p, "mpfr", 2, key="k", context=[9, 2, 3], window=2)
    assert a == b and a != sample_step(p, p, "mpfr", 2, key="k", context=[1, 2, 4], window=2)
    assert a != 3


def test_seeded_stream_is_reproducible_and_drawn_outside():
    p = np.array([0.1, 0.2, 0.3, 0.4])
    q = np.array([0.4, 0.3, 0.2, 0.1])
    for scheme in ALL:
        B = 1 if scheme in ("sd", "exp_race") else 3
        a = sample_step(p, q, scheme, B, seed=123)
        b = sample_step(p, q, scheme, B, seed=np.random.default_rng(123))
        assert a.token == b.token and np.array_equal(a.drafts, b.drafts)
        if scheme != "mpfr_scan":
            U = np.random.default_rng(123).random(clock_shape(scheme, 4, B))
            c = sample_step(p, q, scheme, B, uniforms=U)
            assert c.token == a.token and np.array_equal(c.drafts, a.drafts)


def test_mpfr_scan_grows_its_table():
    """A small ratio bound w forces a long scan: the seeded stream appends rows until it stops."""
    p = np.array([0.5, 0.5])
    q = np.array([0.5, 0.5])
    w = 1e-4  # valid (<= min q/p = 1) but the scan must reach T_i >= best / w ~ 1e4
    s = sample_step(p, q, "mpfr_scan", 2, seed=0, w=w)
    t = sample_step(p, q, "mpfr_scan", 2, seed=0)  # default w: same target winner
    assert s.token == t.token and np.array_equal(s.drafts, t.drafts)
    U = np.random.default_rng(0).random((4096, 2))
    with pytest.raises(ValueError, match="uniforms"):
        sample_step(p, q, "mpfr_scan", 2, uniforms=U[:3], w=w)


def _spectr_cases(seed, count, max_n, max_B):
    """Random Dirichlet(0.5) pairs with a random B, SpecTr's rho and beta(rho)."""
    rng = np.random.default_rng(seed)
    for _ in range(count):
        n = int(rng.integers(2, max_n))
        p, q = rng.dirichlet(np.full(n, 0.5)), rng.dirichlet(np.full(n, 0.5))
        B = int(rng.integers(1, max_B))
        rho = spectr_rho(p, q, B)
        yield p, q, B, rho, np.minimum(q, p / rho).sum()


def test_spectr_rho_solves_its_equation():
    for p, q, B, rho, beta in _spectr_cases(8, count=40, max_n=30, max_B=9):
        assert 1.0 <= rho <= B
        lhs, rhs = rho * beta, 1 - (1 - beta) ** B
        assert lhs >= rhs - 1e-15  # residual p - min(q, p/rho) f >= 0
        if rho > 1.0:
            assert lhs - rhs < 1e-12
        f = sum((1 - beta) ** i for i in range(B))
        assert np.all(p - np.minimum(q, p / rho) * f >= -1e-12)
    assert spectr_rho(p, p, 4) == 1.0
    # tiny overlap beta ~ 1e-9: the equation is solved without cancellation (expm1/log1p)
    p = np.array([1e-9, 1 - 1e-9, 0.0])
    q = np.array([0.5, 0.0, 0.5])
    for B in (2, 5):
        rho = spectr_rho(p, q, B)
        beta = np.minimum(q, p / rho).sum()
        assert 1.0 <= rho <= B
        assert np.all(p - np.minimum(q, p / rho) * sum((1 - beta) ** i for i in range(B))
                      >= -1e-15)
    batch = spectr_rho(np.stack([p, q]), q, 3)
    assert batch.shape == (2,) and batch[1] == 1.0


@pytest.mark.kernel
def test_inv_cdf_never_returns_zero_mass_tokens():
    w = np.array([0.0, 0.3, 0.0, 0.7, 0.0])
    cdf = np.cumsum(w)
    for u in (1e-300, 0.1, 0.3, 0.2999999, 0.9999999999999999):
        assert w[K.inv_cdf(cdf, u)] > 0
        assert K.inv_cdf(cdf, u) == R.inv_cdf(w, u)
    assert K.inv_cdf(cdf, 1.0) == 3  # rounding guard: the last positive-mass token


def test_step_validation_errors():
    p = np.array([0.5, 0.5])
    q = np.array([1.0, 0.0])
    with pytest.raises(ValueError, match="scheme"):
        sample_step(p, q, "nope")
    with pytest.raises(ValueError, match="B"):
        sample_step(p, q, "sd", B=2)
    with pytest.raises(ValueError, match="B"):
        sample_step(p, q, "exp_race", B=3)
    with pytest.raises(ValueError, match="B"):
        sample_step(p, q, "mpfr", B=0)
    with pytest.raises(ValueError, match="^q"):
        sample_step(p, q, "mpfr_scan", B=2, seed=0)  # p not << q
    with pytest.raises(ValueError, match="^w"):
        sample_step(p, p, "mpfr", B=2, w=0.5)
    with pytest.raises(ValueError, match="^w"):
        sample_step(p, p, "mpfr_scan", B=2, w=2.0)  # exceeds min q/p = 1
    with pytest.raises(ValueError, match="^w"):
        sample_step(p, p, "mpfr_scan", B=2, w=0.0)
    with pytest.raises(ValueError, match="key"):
        sample_step(p, p, "sd", key=1, seed=0)
    with pytest.raises(ValueError, match="uniforms"):
        sample_step(p, p, "gls", B=2, uniforms=np.full((2, 1), 0.5))
    with pytest.raises(ValueError, match="uniforms"):
        sample_step(p, p, "gls", B=1, uniforms=np.array([[0.5], [1.0]]))
    with pytest.raises(ValueError, match="^p"):
        sample_step(np.stack([p, p]), p, "sd")
    with pytest.raises(ValueError, match="^p"):
        sample_step([0.5, 0.6], p, "sd")
    with pytest.raises(ValueError, match="^q"):
        sample_step(p, [0.2, 0.3, 0.5], "sd")
    with pytest.raises(ValueError, match="seed"):
        sample_step(p, p, "sd", seed="x")
    with pytest.raises(ValueError, match="key"):
        sample_step(p, p, "sd", key=1.5)
    with pytest.raises(ValueError, match="scheme"):
        clock_shape("bad", 3)


@pytest.mark.kernel
@given(prob_pairs(min_size=1, max_size=300), st.integers(1, 12), st.integers(0, 2**63 - 1))
def test_mpfr_fast_equals_direct_property(pair, B, label):
    """The O(n + B log B) MPFR kernel and literal Alg. 6 agree on any keyed clocks."""
    p, q = pair
    tab = np.empty((1, 1))
    d1, d2 = np.empty(B, np.int64), np.empty(B, np.int64)
    y1, a1 = K.mpfr_fast_step(p, q, B, np.uint64(label), tab, False, d1, K.mpfr_heap(B))
    y2, a2 = K.mpfr_direct_step(p, q, B, np.uint64(label), tab, False, d2, K.mpfr_heap(B))
    assert y1 == y2 and a1 == a2 and np.array_equal(d1, d2)
    y3, d3, a3 = R.mpfr(p, q, R.clock_table(label, p.size, B), B)
    assert y3 == y1 and np.array_equal(d3, d1) and a3 == a1


@given(prob_vectors(min_size=1, max_size=100), st.integers(1, 6), st.integers(0, 2**32 - 1))
def test_identical_distributions_always_accept(p, B, seed):
    """Every coupling accepts with probability 1 when q = p (alpha = 0; Liu, Wan, Gao &
    Gündüz 2026, arXiv:2609.21858, App. B)."""
    rng = np.random.default_rng(seed)
    for scheme in ALL:
        b = 1 if scheme in ("sd", "exp_race") else B
        U = rng.random(clock_shape(scheme, p.size, b, scan_rows=64))
        step = sample_step(p, p, scheme, b, uniforms=U)
        assert step.accepted
        if scheme != "gls":  # gls accepts in the block holding the overall minimum
            assert step.token == step.drafts[0], scheme


# ------------------------------------------------------------------- names and limits


def test_samplers_is_one_tuple_of_names():
    from specbound import sim, theory
    from specbound.sim import samplers

    assert isinstance(SAMPLERS, tuple) and len(set(SAMPLERS)) == len(SAMPLERS)
    assert set(theory.SCHEMES) < set(SAMPLERS)  # the samplers are a superset of the formulas
    # one name per role: theory.SCHEMES (exact formulas) is not shadowed in specbound.sim
    assert not hasattr(sim, "SCHEMES") and not hasattr(samplers, "SCHEMES")
    for derived in (samplers.SINGLE_DRAFT, samplers.SEQUENTIAL, samplers.TOKEN_CLOCK):
        assert set(derived) <= set(SAMPLERS)
        assert list(derived) == [s for s in SAMPLERS if s in derived]  # order of SAMPLERS


def test_window_keyword():
    p = np.full(50, 0.02)
    a = sample_step(p, p, "mpfr", 2, key="k", context=[1, 2, 3], window=2)
    assert a == sample_step(p, p, "mpfr", 2, key="k", context=[9, 2, 3], window=2)
    with pytest.raises(TypeError, match="'m'"):  # the removed pre-release alias
        sample_step(p, p, "mpfr", 2, key="k", context=[1, 2, 3], m=2)


@pytest.mark.parametrize("scheme", ["mpfr", "mpfr_direct", "gls", "mpfr_scan", "specinfer",
                                    "spectr"])
@pytest.mark.parametrize("B", [2**62, 10**20, 2**20 + 1])
def test_huge_B_is_refused_up_front(scheme, B):
    """Before: SystemError inside the kernel (2**62) or OverflowError (10**20)."""
    p = np.array([0.5, 0.5])
    q = np.array([0.2, 0.8])
    with pytest.raises(ValueError, match=r"^B: at most 1,048,576"):
        sample_step(p, q, scheme, B, key=1)


def test_specinfer_residual_table_is_bounded():
    p = np.full(4096, 1 / 4096)
    with pytest.raises(ValueError, match=r"^B: scheme 'specinfer' precomputes .* GiB"):
        sample_step(p, p, "specinfer", 2**17, key=1)


def test_mpfr_scan_refuses_a_scan_of_minutes():
    """Before: tiny w or tiny q scanned up to 1e9 candidates for minutes, then raised."""
    p = np.array([0.5, 0.5])
    with pytest.raises(ValueError, match=r"^w: mpfr_scan scans about 1/w"):
        sample_step(p, p, "mpfr_scan", 2, seed=0, w=1e-9)
    q = np.array([1 - 1e-12, 1e-12])
    with pytest.raises(ValueError, match=r"^q: mpfr_scan scans about 1/w .* min q/p"):
        sample_step(p, q, "mpfr_scan", 2, key=1)
    # at the limit it runs (expected scan about 1e5 candidates)
    s = sample_step(p, p, "mpfr_scan", 2, key=1, w=1e-5)
    assert s == sample_step(p, p, "mpfr_scan", 2, key=1)


@pytest.mark.kernel
def test_mpfr_direct_at_large_B_equals_fast():
    """The literal Alg. 6 keeps its B smallest in a heap (O(n B log B), was O(n B^2))."""
    rng = np.random.default_rng(3)
    p, q = rng.dirichlet(np.ones(5)), rng.dirichlet(np.ones(5))
    for B in (257, 4096):
        for ctx in ([1], [2]):
            a = sample_step(p, q, "mpfr", B, key=4, context=ctx)
            b = sample_step(p, q, "mpfr_direct", B, key=4, context=ctx)
            assert a == b


def test_spectr_residual_closed_form_equals_the_finite_sum():
    """f = sum_{k<B} (1-beta)^k in closed form (was a Python loop over B)."""
    from specbound.sim.samplers import _spectr_residual

    for p, q, B, rho, beta in _spectr_cases(4, count=30, max_n=20, max_B=40):
        f = sum((1.0 - beta) ** k for k in range(B))
        res = np.maximum(p - np.minimum(q, p / rho) * f, 0.0)
        np.testing.assert_allclose(_spectr_residual(p, q, rho, B), res if res.sum() > 0 else p,
                                   rtol=1e-12, atol=1e-15)
    # B = MAX_B is prepared in O(n), and the step still runs
    p = np.array([0.6, 0.4, 0.0])
    q = np.array([0.2, 0.3, 0.5])
    assert sample_step(p, q, "spectr", 2**20, key=3).token in (0, 1)
