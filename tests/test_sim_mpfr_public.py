"""MPFR on a public proposal process (Liu, Wan, Gao & Gündüz 2026, arXiv:2609.21858, App. A.3,
Alg. 5 and Thm. A.1, A.4): the sampler :func:`specbound.sim.mpfr_public`, its Numba kernel
against the NumPy reference, the exactness of each side, the joint law of the coupling
against the race-based MPFR's exact law, and the ``mpfr`` decoder with
``proposal="uniform"`` (Python block loop only)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from specbound.sim import (
    MarkovLM,
    SyntheticLM,
    expected_block_tokens,
    mpfr_public,
    speculative_decode,
    speculative_decode_batch,
)
from specbound.sim import _compiled as C
from specbound.sim import _kernels as K
from specbound.sim import _reference as R
from specbound.sim.decoders import DECODER_SPECS, PYTHON_LOOP_OPTIONS
from specbound.sim.prf import context_label
from specbound.sim.samplers import MAX_SCAN, public_plan
from specbound.theory import exact_acceptance
from specbound.theory.blocks import mpfr_multiplicity_law
from tests._stats import assert_gof, bonferroni

_W = 1.0 - 2.0**-40  # the default ratio bound's safety factor


def _default_w(p, q0):
    q0n = q0 / q0.sum()
    return float(np.min(q0n[p > 0] / p[p > 0])) * _W


class _Plan:
    """``public_plan`` of one law, computed once."""

    def __init__(self, p, q0):
        self.p, self.q0 = p, q0
        self.plan = public_plan(np.asarray(p, float), np.asarray(q0, float))


def _scan(p, q0, B, label):
    """The kernel on keyed points: ``(marks, n_points, sorted scores)``; ``p`` a law or a
    :class:`_Plan` (then ``q0`` is ignored)."""
    mult, q0cdf, w = (p if isinstance(p, _Plan) else _Plan(p, q0)).plan
    out = np.empty(B, np.int64)
    heap = K.mpfr_heap(B)
    n, status = K.mpfr_public_select(mult, q0cdf, B, w, np.uint64(label), np.empty((1, 1)),
                                     False, MAX_SCAN, out, heap)
    assert status == 0
    return out, int(n), heap[0].copy()


def _labels(seed, n):
    return np.random.default_rng(seed).integers(0, 2**64, size=n, dtype=np.uint64)


# ------------------------------------------------------------------ kernel = reference


@pytest.mark.kernel
def test_kernel_equals_reference_on_tables_and_keyed_points():
    """Marks and number of points of the Numba kernel equal the NumPy reference on random
    laws (zeros included), proposals and B, on seeded tables and on the keyed source."""
    rng = np.random.default_rng(1)
    for case in range(150):
        n = int(rng.integers(1, 25))
        p = rng.dirichlet(np.full(n, 0.6))
        p[rng.random(n) < 0.25] = 0.0
        if p.sum() == 0:
            p[0] = 1.0
        p /= p.sum()
        q0 = rng.random(n) + 0.02 if case % 2 else np.ones(n)
        B = int(rng.integers(1, 7))
        U = rng.random((4000, 2))
        got = mpfr_public(p, B, proposal=q0, uniforms=U)
        want, n_ref = R.mpfr_public(p, q0, U, B, _default_w(p, q0))
        np.testing.assert_array_equal(got.tokens, want)
        assert got.n_points == n_ref
        lab = context_label(case, (1, 2), None)
        keyed = mpfr_public(p, B, proposal=q0, key=case, context=(1, 2))
        want, n_ref = R.mpfr_public(p, q0, R.clock_table(lab, got.n_points + 4000, 2), B,
                                    _default_w(p, q0))
        np.testing.assert_array_equal(keyed.tokens, want)
        assert keyed.n_points == n_ref


def test_seeded_draws_are_reproducible_and_grow_their_table():
    """``seed``: the same draws for the same seed; a law with ``V max p`` far above the first
    4,096 rows still stops (the table doubles)."""
    p = np.full(20, 0.001)
    p[0] = 1.0 - p[1:].sum()
    a = mpfr_public(p, 3, proposal=np.r_[1e-3, np.ones(19)], seed=5)
    b = mpfr_public(p, 3, proposal=np.r_[1e-3, np.ones(19)], seed=5)
    np.testing.assert_array_equal(a.tokens, b.tokens)
    assert a.n_points == b.n_points and a.n_points > 4096


# ------------------------------------------------------------------ exactness


def test_target_and_draft_samples_follow_their_laws():
    """Thm. A.4: each returned mark follows its law.  Target side: 100,000 single samples of
    ``p`` (B = 1, uniform proposal); draft side: 100,000 draws of B = 3 samples of ``q``, each
    position alone and the pairs of the first two (independence: ``q x q``).  Five goodness-
    of-fit tests at Bonferroni level 1e-4 / 5 each: false-failure probability 1e-4 in all.
    Power: a 1% absolute bias on one symbol (mass moved to another) gives each marginal test
    a noncentrality of at least 53, i.e. rejection with probability > 0.99 (asserted)."""
    p = np.array([0.5, 0.3, 0.15, 0.05, 0.0])
    q = np.array([0.1, 0.2, 0.3, 0.25, 0.15])
    q0 = np.ones(5)
    alpha = bonferroni(5)
    n_p, n_q = 100_000, 100_000
    pp, qq = _Plan(p, q0), _Plan(q, q0)
    ys = np.array([_scan(pp, None, 1, lab)[0][0] for lab in _labels(2, n_p)])
    assert not np.any(ys == 4)  # zero probability: never emitted
    assert_gof(ys, p, samples=True, alpha=alpha, label="target")
    xs = np.array([_scan(qq, None, 3, lab)[0] for lab in _labels(3, n_q)])
    for b in range(3):
        assert_gof(xs[:, b], q, samples=True, alpha=alpha, label=f"draft {b}")
    assert_gof(xs[:, 0] * 5 + xs[:, 1], np.outer(q, q).ravel(), samples=True, alpha=alpha,
               label="draft pairs")
    # power against a 1% bias: noncentrality n sum(delta^2 / p) with delta = +-0.01 on the
    # two cells where it is smallest
    for law, n in ((p[:4], n_p), (q, n_q)):
        lam = n * 1e-4 * np.sort(1.0 / law)[:2].sum()
        df = law.size - 1
        power = stats.ncx2.sf(stats.chi2.isf(alpha, df), df, lam)
        assert power > 0.99, (lam, power)


@pytest.mark.parametrize("B", [1, 2, 3])
def test_joint_law_equals_the_race_mpfr(B):
    """Thm. A.1: on one public process, the coupling of the drafts ``MPFR(q, B)`` and the
    target winner ``MPFR(p, 1)`` has the joint law of the per-symbol race (Alg. 6): the law
    of (winner, its multiplicity among the drafts) is the exact
    :func:`~specbound.theory.blocks.mpfr_multiplicity_law`, and the acceptance rate is
    :func:`~specbound.theory.exact_acceptance` (scheme ``"mpfr"``).  60,000 couplings on
    keyed points with a non-uniform public proposal for B = 3 (uniform otherwise).  Tests: the
    goodness of fit of the joint law (level 5e-5) and |z| of the acceptance rate <= 4.06
    (level 5e-5): false-failure probability 1e-4 per case.  A 1% acceptance bias is
    ``0.01 / sqrt(a(1-a)/n) > 4.9`` standard errors."""
    rng = np.random.default_rng(10 + B)
    p, q = rng.dirichlet(np.ones(4)), rng.dirichlet(np.ones(4))
    q0 = np.array([0.4, 0.3, 0.2, 0.1]) if B == 3 else np.ones(4)
    J = mpfr_multiplicity_law(p, q, B)
    a = exact_acceptance(p, q, "mpfr", B)
    n = 60_000
    counts = np.zeros_like(J)
    pp, qq = _Plan(p, q0), _Plan(q, q0)
    for lab in _labels(20 + B, n):
        drafts = _scan(qq, None, B, lab)[0]
        y = _scan(pp, None, 1, lab)[0][0]
        counts[y, int(np.sum(drafts == y))] += 1
    assert_gof(counts.ravel(), J.ravel(), alpha=5e-5, label=f"B={B} joint law")
    acc = 1.0 - counts[:, 0].sum() / n
    se = np.sqrt(a * (1 - a) / n)
    assert abs(acc - a) <= 4.06 * se, (acc, a, se)
    assert 0.01 / se > 4.9


# ------------------------------------------------------------------ properties


_laws = st.integers(1, 12).flatmap(lambda n: st.tuples(
    st.lists(st.floats(0.0, 1.0), min_size=n, max_size=n).filter(lambda v: sum(v) > 1e-3),
    st.lists(st.floats(0.05, 1.0), min_size=n, max_size=n)))


@settings(max_examples=60, deadline=None)
@given(_laws, st.integers(1, 6), st.integers(0, 2**32))
def test_properties_of_the_scan(law, B, seed):
    """For any law, full-support proposal and B: at least B points are read; the B marks are
    those of the B smallest scores of the whole table (the stopping rule is safe, Thm. A.4);
    the first mark is the PFR sample (B = 1) and the first B' < B marks are the B'-sample
    draw; no mark has probability 0."""
    raw, q0 = law
    p = np.array(raw) / np.sum(raw)
    q0 = np.array(q0)
    U = np.random.default_rng(seed).random((20_000, 2))
    U = np.maximum(U, np.finfo(float).tiny)
    got = mpfr_public(p, B, proposal=q0, uniforms=U)
    assert got.n_points >= B
    assert np.all(p[got.tokens] > 0)
    t = np.cumsum(-np.log(U[:, 0]))
    z = R.inv_cdf_many(q0, U[:, 1])
    mult = np.full(p.size, np.inf)  # the kernel's multiplier q0 / p (+inf where p = 0)
    with np.errstate(over="ignore"):  # a subnormal p: a score beyond the float range
        np.divide(q0 / q0.sum(), p, out=mult, where=p > 0)
        s = t * mult[z]
    order = np.argsort(s, kind="stable")[:B]
    np.testing.assert_array_equal(got.tokens, z[order])
    pfr = mpfr_public(p, 1, proposal=q0, uniforms=U)
    assert pfr.tokens[0] == got.tokens[0] == z[np.argmin(s)]
    for b in range(1, B):
        np.testing.assert_array_equal(mpfr_public(p, b, proposal=q0, uniforms=U).tokens,
                                      got.tokens[:b])


def test_cost_grows_as_B_V_max_p():
    """The mean number of points is at least B and about ``B / w = B V max p`` (uniform
    proposal): between B/w / 2 and 2 B/w + B over 2,000 keyed draws (deterministic labels)."""
    for n, B in ((10, 1), (10, 4), (100, 2)):
        p = np.random.default_rng(n + B).dirichlet(np.ones(n))
        scale = B * n * p.max()
        pp = _Plan(p, np.ones(n))
        pts = np.array([_scan(pp, None, B, lab)[1] for lab in _labels(n + B, 2000)])
        assert pts.min() >= B
        assert scale / 2 <= pts.mean() <= 2 * scale + B, (n, B, pts.mean(), scale)


# ------------------------------------------------------------------ the decoder


def test_registry_marks_the_option_python_loop_only():
    assert "proposal" in DECODER_SPECS["mpfr"].options
    assert "proposal" in PYTHON_LOOP_OPTIONS
    assert [n for n, s in DECODER_SPECS.items() if "proposal" in s.options] == ["mpfr"]


def test_decoder_runs_in_the_python_loop_and_the_batch_equals_single_runs():
    """The compiled loop declines ``proposal="uniform"``; the batch decodes prompt by prompt
    in the Python loop and equals single runs; the default stays the race."""
    t = SyntheticLM(30, 2, seed=7)
    d = t.draft(0.4, seed=3)
    args = C.run_args("mpfr", L=2, B=2, N=6, key=b"k", proposal="uniform")
    assert C.decode_single(t, d, np.array([1]), np.random.default_rng(0), args) is None
    kw = dict(L=3, B=3, key="pub", max_new_tokens=15, proposal="uniform")
    batch = speculative_decode_batch(t, d, [[1, 2], [3]], "mpfr", seed=[4, 5], **kw)
    for i, prompt in enumerate(([1, 2], [3])):
        one = speculative_decode(t, d, prompt, "mpfr", seed=4 + i, **kw)
        np.testing.assert_array_equal(batch[i].tokens, one.tokens)
        np.testing.assert_array_equal(batch[i].pivots, one.pivots)
    race = speculative_decode(t, d, [1, 2], "mpfr", L=3, B=3, key="pub", max_new_tokens=15)
    assert race.tokens.size == batch[0].tokens.size
    assert np.all((batch[0].pivots > 0) & (batch[0].pivots < 1))


def test_emitted_sequence_does_not_depend_on_the_drafter():
    """The target winner is a function of the key, the context and the target only, so two
    drafters give the same tokens (drafter invariance of the public-process MPFR)."""
    t = SyntheticLM(40, 2, seed=9)
    kw = dict(L=3, B=2, key=7, max_new_tokens=20, proposal="uniform")
    a = speculative_decode(t, t.draft(0.2, seed=1), [5], "mpfr", **kw)
    b = speculative_decode(t, t.draft(1.5, seed=2), [5], "mpfr", **kw)
    np.testing.assert_array_equal(a.tokens, b.tokens)


@pytest.mark.parametrize("B", [1, 2])
def test_tokens_per_block_match_theory(B):
    """4,000 independent single blocks (fresh key each) of ``mpfr`` with
    ``proposal="uniform"``: |mean - expected_block_tokens| <= 5 SE (false-failure probability
    ~6e-7 per case); the theory is the race MPFR's, equal by Thm. A.1."""
    target = MarkovLM.random(3, seed=41)
    draft = MarkovLM.random(3, seed=42)
    L = 3
    theory = expected_block_tokens(target, draft, [1], "mpfr", L=L, B=B)
    acc = np.array([
        speculative_decode(target, draft, [1], "mpfr", L=L, B=B, key=20_000 + i,
                           max_new_tokens=L + 1, proposal="uniform",
                           seed=np.random.SeedSequence([9, i])).emitted_per_block[0]
        for i in range(4000)
    ])
    se = acc.std(ddof=1) / np.sqrt(acc.size)
    assert abs(acc.mean() - theory) <= 5 * se, (acc.mean(), theory, se)


@pytest.mark.parametrize("kw", [dict(B=3), dict(B=2, window=1, repeats="mask")])
def test_first_three_tokens_follow_the_target_law(kw):
    """Exactness at the sequence level: the law of the first three emitted tokens of ``mpfr``
    with ``proposal="uniform"`` (fresh key and seed per trial, L = 2) is the target's
    three-token law; 6,000 trials per case, goodness of fit at level 5e-5 per case
    (false-failure probability 1e-4 for the test function)."""
    target = MarkovLM(np.array([[0.5, 0.3, 0.2], [0.2, 0.5, 0.3], [0.3, 0.3, 0.4]]))
    draft = MarkovLM(np.array([[0.2, 0.5, 0.3], [0.4, 0.2, 0.4], [0.3, 0.5, 0.2]]))
    counts = np.zeros(27, dtype=np.int64)
    for i in range(6000):
        r = speculative_decode(target, draft, [0], "mpfr", L=2, key=500 + i, max_new_tokens=3,
                               seed=np.random.SeedSequence([500, i]), proposal="uniform", **kw)
        a, b, c = r.generated
        counts[(a * 3 + b) * 3 + c] += 1
    assert_gof(counts, target.sequence_law([0], 3).ravel(), alpha=5e-5, label=str(kw))


# ------------------------------------------------------------------ hostile inputs


@pytest.mark.parametrize(("kwargs", "name"), [
    (dict(p=[0.5, 0.5], proposal=[1.0, 0.0]), "proposal"),
    (dict(p=[0.5, 0.5], proposal=[1.0, 1.0, 1.0]), "proposal"),
    (dict(p=[0.5, 0.5], proposal="gaussian"), "proposal"),
    (dict(p=[0.5, 0.5], proposal=[1.0, np.nan]), "proposal"),
    (dict(p=[0.5, 0.5], proposal=[1.0, -1.0]), "proposal"),
    (dict(p=[0.5, 0.5], w=0.0), "w"),
    (dict(p=[0.5, 0.5], w=-1.0), "w"),
    (dict(p=[0.5, 0.5], w=1.5), "w"),
    (dict(p=[0.5, 0.5], w=float("nan")), "w"),
    (dict(p=[0.5, 0.5], w="big"), "w"),
    (dict(p=[0.5, 0.5], B=0), "B"),
    (dict(p=[0.5, 0.5], B=2.5), "B"),
    (dict(p=[0.5, 0.6]), "p"),
    (dict(p=[[0.5, 0.5]]), "p"),
    (dict(p=[0.5, 0.5], key=1, seed=2), "key"),
    (dict(p=[0.5, 0.5], uniforms=[[0.5]]), "uniforms"),
    (dict(p=[0.5, 0.5], uniforms=[[0.5, 1.0]]), "uniforms"),
    (dict(p=[0.5, 0.5], uniforms=[[0.5, 0.5]], B=3), "uniforms"),
    (dict(p=np.r_[1.0 - 1e-7, np.full(10, 1e-8)], proposal=np.r_[1e-9, np.ones(10)]),
     "proposal"),
])
def test_hostile_inputs_name_the_argument(kwargs, name):
    with pytest.raises(ValueError, match=f"^{name}:"):
        mpfr_public(**kwargs)


def test_decoder_option_is_checked():
    t = SyntheticLM(10, 2, seed=1)
    d = t.draft(0.5, seed=2)
    with pytest.raises(ValueError, match="^proposal:"):
        speculative_decode(t, d, [1], "mpfr", key=1, proposal="gaussian")
    with pytest.raises(ValueError, match="^proposal:"):
        speculative_decode(t, d, [1], "pfr", key=1, proposal="uniform")
    with pytest.raises(ValueError, match="^proposal:"):
        speculative_decode_batch(t, d, [[1]], "vsps", proposal="uniform")
