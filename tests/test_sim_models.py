"""Tests of the synthetic language models (specbound.sim.models, _model_kernels).

Tests marked ``kernel`` compare a model kernel with its NumPy reference in
``specbound.sim._reference`` (also run with ``NUMBA_DISABLE_JIT=1``, ``make test-nojit``)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from numba import njit

from specbound.sim import _model_kernels as mk
from specbound.sim import _reference as R
from specbound.sim.models import MarkovLM, SyntheticLM


def _tv(p, q):
    return 0.5 * np.abs(p - q).sum()


# ------------------------------------------------------------------- kernels vs NumPy


@pytest.mark.kernel
@pytest.mark.parametrize("kind", ["gaussian", "zipf"])
@pytest.mark.parametrize("top_k", [None, 1, 7])
@pytest.mark.parametrize("n", [1, 2, 37, 1000])
def test_synthetic_kernel_matches_numpy_reference(kind, top_k, n):
    target = SyntheticLM(n, context_length=2, seed=5, temperature=0.8, top_k=top_k, kind=kind)
    for model in (target, target.draft(0.7, seed=3, context_length=1)):
        for ctx in ([], [0], [n - 1, 0, n // 2]):
            got = model.next_distribution(ctx)
            ref = R.synthetic_probs(model._ints, model._uints, model._floats,
                                    np.array(ctx, dtype=np.int64), n)
            np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-15)


@pytest.mark.kernel
@given(st.integers(0, 2**64 - 1), st.integers(0, 5),
       st.lists(st.integers(0, 49_999), max_size=8))
def test_window_label_matches_numpy(base, order, ctx):
    arr = np.array(ctx, dtype=np.int64)
    assert mk.window_label(np.uint64(base), order, arr) == R.window_label(base, order, arr)


@pytest.mark.kernel
@pytest.mark.parametrize("n", [1, 2, 3, 1000])
def test_unigram_field_matches_numpy(n):
    base = mk.unigram_field(np.uint64(123), 1.5, 2, n)
    ref = 1.5 / np.sqrt(3.0) * R.gaussian_field(R.window_label(123, 0, []), n)
    np.testing.assert_allclose(base, ref, rtol=1e-12, atol=1e-15)


# ------------------------------------------------------------------- SyntheticLM


@given(st.integers(1, 300), st.integers(0, 3), st.integers(0, 10**6),
       st.sampled_from(["gaussian", "zipf"]), st.floats(0.05, 5.0),
       st.one_of(st.none(), st.integers(1, 50)), st.data())
def test_next_distribution_is_a_probability_vector(n, m, seed, kind, temp, top_k, data):
    model = SyntheticLM(n, context_length=m, seed=seed, temperature=temp, top_k=top_k,
                        kind=kind)
    ctx = data.draw(st.lists(st.integers(0, n - 1), max_size=6))
    p = model.next_distribution(ctx)
    assert p.shape == (n,) and p.dtype == np.float64
    assert np.all(np.isfinite(p)) and np.all(p >= 0)
    assert abs(p.sum() - 1.0) < 1e-12
    if top_k is not None:
        assert 1 <= np.count_nonzero(p) <= min(top_k, n)


def test_top_k_keeps_exactly_k_tokens():
    model = SyntheticLM(5000, seed=2, top_k=50)
    for ctx in ([1, 2], [3, 4], [4999, 0]):
        assert np.count_nonzero(model.next_distribution(ctx)) == 50


def test_deterministic_function_of_seed_and_last_m_tokens():
    model = SyntheticLM(500, context_length=2, seed=11)
    p1 = model.next_distribution([7, 8, 9])
    p2 = model.next_distribution([1, 2, 3, 4, 8, 9])  # same last 2 tokens
    p3 = SyntheticLM(500, context_length=2, seed=11).next_distribution([8, 9])
    np.testing.assert_array_equal(p1, p2)
    np.testing.assert_array_equal(p1, p3)
    assert _tv(p1, model.next_distribution([8, 10])) > 0.1  # another window
    assert _tv(p1, SyntheticLM(500, 2, seed=12).next_distribution([8, 9])) > 0.1  # another seed


def test_zipf_magnitudes_are_exact_and_permuted_by_context():
    n, s = 997, 1.3
    model = SyntheticLM(n, context_length=1, seed=4, kind="zipf", zipf_exponent=s)
    w = (1.0 + np.arange(n)) ** -s
    expect = np.sort(w / w.sum())
    p_a, p_b = model.next_distribution([3]), model.next_distribution([4])
    np.testing.assert_allclose(np.sort(p_a), expect, rtol=1e-10)
    np.testing.assert_allclose(np.sort(p_b), expect, rtol=1e-10)
    assert not np.array_equal(p_a, p_b)


def test_temperature_lowers_entropy():
    base = SyntheticLM(2000, seed=3)
    h = [SyntheticLM(2000, seed=3, temperature=t).mean_entropy(30) for t in (0.5, 1.0, 1.5)]
    assert h[0] < h[1] < h[2]
    assert abs(h[1] - base.mean_entropy(30)) < 1e-12


def test_default_scale_gives_realistic_entropy():
    # documented: about 2.5 nats at n = 1,000 (LLM range 1.5-3.5 nats)
    h = SyntheticLM(1000, seed=0).mean_entropy(100)
    assert 1.8 < h < 3.2


def test_draft_mismatch_zero_is_the_target():
    target = SyntheticLM(100, seed=1)
    assert target.draft(0.0, seed=9) is target
    changed = target.draft(0.0, seed=9, temperature=0.5)
    assert changed is not target and changed.temperature == 0.5


def test_draft_acceptance_decreases_with_mismatch():
    target = SyntheticLM(3000, seed=7)
    rng = np.random.default_rng(0)
    ctxs = rng.integers(0, 3000, size=(40, 2))
    means = []
    for eps in (0.0, 0.25, 0.5, 1.0, 2.0):
        draft = target.draft(eps, seed=2)
        means.append(np.mean([1 - _tv(target.next_distribution(c), draft.next_distribution(c))
                              for c in ctxs]))
    assert means[0] == 1.0
    assert all(a > b + 0.02 for a, b in zip(means, means[1:], strict=False))


def test_draft_with_smaller_window_ignores_older_tokens_and_correlates():
    target = SyntheticLM(2000, context_length=2, seed=8)
    draft = target.draft(0.0, seed=1, context_length=1)
    np.testing.assert_array_equal(draft.next_distribution([5, 9]),
                                  draft.next_distribution([6, 9]))
    rng = np.random.default_rng(1)
    ctxs = rng.integers(0, 2000, size=(30, 2))
    unrelated = SyntheticLM(2000, context_length=2, seed=99)
    acc_backoff = np.mean([1 - _tv(target.next_distribution(c), draft.next_distribution(c))
                           for c in ctxs])
    acc_unrelated = np.mean([1 - _tv(target.next_distribution(c),
                                     unrelated.next_distribution(c)) for c in ctxs])
    assert acc_backoff > acc_unrelated + 0.1


def test_vocab_50000_evaluates():
    p = SyntheticLM(50_000, seed=0).next_distribution([1, 2])
    assert p.shape == (50_000,) and abs(p.sum() - 1) < 1e-12


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"vocab_size": 0}, "vocab_size"),
        ({"vocab_size": 50_001}, "vocab_size"),
        ({"vocab_size": 10, "context_length": -1}, "context_length"),
        ({"vocab_size": 10, "temperature": 0.0}, "temperature"),
        ({"vocab_size": 10, "top_k": 0}, "top_k"),
        ({"vocab_size": 10, "kind": "uniform"}, "kind"),
        ({"vocab_size": 10, "scale": -1.0}, "scale"),
        ({"vocab_size": 10, "zipf_exponent": -0.5}, "zipf_exponent"),
        ({"vocab_size": 10, "seed": np.random.default_rng(0)}, "seed"),
        ({"vocab_size": 10, "seed": -3}, "seed"),
    ],
)
def test_synthetic_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        SyntheticLM(**kwargs)


def test_synthetic_context_and_draft_validation():
    model = SyntheticLM(10)
    with pytest.raises(ValueError, match="context"):
        model.next_distribution([10])
    with pytest.raises(ValueError, match="context"):
        model.next_distribution([-1])
    with pytest.raises(ValueError, match="context"):
        model.next_distribution([[1, 2]])
    with pytest.raises(ValueError, match="context"):
        model.next_distribution([0.5])
    with pytest.raises(ValueError, match="mismatch"):
        model.draft(-0.1)
    with pytest.raises(ValueError, match="temperature"):
        model.draft(0.1, temperature=0.0)
    with pytest.raises(ValueError, match="top_k"):
        model.draft(0.1, top_k="other")
    with pytest.raises(ValueError, match="n_contexts"):
        model.mean_entropy(0)


# ------------------------------------------------------------------- MarkovLM


def test_markov_next_distribution_and_initial():
    mat = np.array([[0.5, 0.5, 0.0], [0.1, 0.2, 0.7], [1.0, 0.0, 0.0]])
    model = MarkovLM(mat, initial=[0.2, 0.3, 0.5])
    np.testing.assert_array_equal(model.next_distribution([2, 1]), mat[1])
    np.testing.assert_array_equal(model.next_distribution([]), [0.2, 0.3, 0.5])
    np.testing.assert_allclose(MarkovLM(mat).next_distribution([]), np.full(3, 1 / 3))
    out = np.empty(3)
    _markov_probs(model.transition_matrix, model.initial, np.array([0], dtype=np.int64), out)
    np.testing.assert_array_equal(out, mat[0])
    _markov_probs(model.transition_matrix, model.initial, np.array([], dtype=np.int64), out)
    np.testing.assert_array_equal(out, model.initial)


@njit
def _markov_probs(matrix, initial, ctx, out):
    """A Numba-callable Markov evaluation: the row of the last token (``initial`` if empty)."""
    if ctx.shape[0] == 0:
        out[:] = initial
    else:
        out[:] = matrix[ctx[ctx.shape[0] - 1]]


def test_markov_sequence_law_is_the_chain_product():
    model = MarkovLM.random(4, seed=3)
    law = model.sequence_law([2], 3)
    assert law.shape == (4, 4, 4)
    assert abs(law.sum() - 1.0) < 1e-12
    T = model.transition_matrix
    for a, b, c in [(0, 1, 2), (3, 3, 0), (1, 0, 1)]:
        assert law[a, b, c] == pytest.approx(T[2, a] * T[a, b] * T[b, c], rel=1e-12)
    law0 = model.sequence_law([], 2)
    assert law0[1, 2] == pytest.approx(model.initial[1] * T[1, 2])


def test_markov_validation():
    with pytest.raises(ValueError, match="transition_matrix"):
        MarkovLM(np.ones((2, 3)) / 3)
    with pytest.raises(ValueError, match="transition_matrix"):
        MarkovLM([[0.5, 0.6], [0.5, 0.5]])
    with pytest.raises(ValueError, match="transition_matrix"):
        MarkovLM([0.5, 0.5])
    with pytest.raises(ValueError, match="initial"):
        MarkovLM(np.eye(2), initial=[0.2, 0.3, 0.5])
    with pytest.raises(ValueError, match="prompt"):
        MarkovLM(np.eye(2)).sequence_law([2], 2)
    with pytest.raises(ValueError, match="length"):
        MarkovLM(np.eye(2)).sequence_law([0], 0)
    with pytest.raises(ValueError, match="concentration"):
        MarkovLM.random(3, concentration=0.0)


# ------------------------------------------------- first-order rows (performance device)


@pytest.mark.parametrize("kind", ["gaussian", "gaussian16", "zipf"])
@pytest.mark.parametrize("m", [0, 1, 2, 3])
@pytest.mark.parametrize("n", [1, 2, 37, 400])
def test_first_order_rows_are_bit_for_bit(kind, m, n):
    """Evaluations from the precomputed rows equal the full evaluation (targets, drafts with
    noise, temperature and top-k, contexts shorter and longer than the window) to a relative
    1e-12 (7 units in the last place seen), and the model's ``next_distribution`` is the rows
    path bit for bit.  The two paths agree bit for bit where LLVM compiles the two call
    sites alike, which it does not everywhere under the package's fastmath flags
    (``contract``/``afn``: on an AMD EPYC host the m = 2 Gaussian rows differ from the full
    evaluation in the last bits of some entries); a copy of a wrong row (or a row of another
    model) would differ in every entry by far more."""
    from numba import config

    rng = np.random.default_rng(11)
    has_rows = kind != "zipf" and m >= 1 and not config.DISABLE_JIT
    t = SyntheticLM(n, m, seed=5, kind=kind, top_k=None if n < 7 else 5)
    models = (t, t.draft(0.3, seed=1), t.draft(0.2, seed=2, temperature=0.5))
    for d in models:
        rows = d._rows()
        assert rows.shape == ((n, n) if has_rows else (1, 1))
        for length in (0, 1, 2, 6):
            for _ in range(4):
                ctx = rng.integers(0, n, size=length)
                a, b = np.empty(n), np.empty(n)
                mk.synthetic_probs(d._ints, d._uints, d._floats, d._base, d._table, ctx, a)
                mk.synthetic_probs_rows(d._ints, d._uints, d._floats, d._base, d._table, rows,
                                        ctx, b)
                np.testing.assert_allclose(b, a, rtol=1e-12, atol=0.0)
                assert d.next_distribution(ctx).tobytes() == b.tobytes()
    if has_rows:
        assert models[1]._rows() is models[0]._rows()  # a target and its drafts share them


@pytest.mark.parametrize("kind", ["gaussian", "zipf"])
def test_log_perplexity_fast_path_matches_protocol_path(kind):
    """The compiled token loop of ``log_perplexity`` gives the float of the generic
    protocol path (a wrapper that is not a SyntheticLM) exactly."""
    from specbound.sim.models import log_perplexity

    class Plain:
        def __init__(self, model):
            self.vocab_size = model.vocab_size
            self._m = model

        def next_distribution(self, ctx):
            return self._m.next_distribution(ctx)

    rng = np.random.default_rng(4)
    t = SyntheticLM(300, 2, seed=3, kind=kind)
    for model in (t, t.draft(0.4, seed=2)):
        for _ in range(10):
            toks = rng.integers(0, 300, size=int(rng.integers(1, 40)))
            n0 = int(rng.integers(0, toks.size))
            assert log_perplexity(model, toks, n0) == log_perplexity(Plain(model), toks, n0)
    assert np.isnan(log_perplexity(t, [1, 2], 2))
