"""The ``"gaussian16"`` logit family of SyntheticLM (quantile-table Gaussian fields).

Kernels against the NumPy reference (``kernel``), the table, the law of the field values
(goodness of fit, stated false-failure rates), determinism, drafts, calibration and the
compiled decoders against the Python loop.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import special, stats

from specbound.sim import (
    DECODERS,
    SyntheticBackend,
    SyntheticLM,
    calibrated_lm,
    random_prompts,
    speculative_decode,
    speculative_decode_batch,
)
from specbound.sim import _model_kernels as mk
from specbound.sim import _reference as R
from specbound.sim.decode import MULTI_DRAFT_DECODERS


def _tv(p, q):
    return 0.5 * np.abs(p - q).sum()


@pytest.mark.kernel
@pytest.mark.parametrize("top_k", [None, 1, 7])
@pytest.mark.parametrize("n", [1, 2, 3, 5, 37, 1000])
def test_gaussian16_kernel_matches_numpy_reference(top_k, n):
    target = SyntheticLM(n, context_length=2, seed=5, temperature=0.8, top_k=top_k,
                         kind="gaussian16")
    for model in (target, target.draft(0.7, seed=3, context_length=1)):
        for ctx in ([], [0], [n - 1, 0, n // 2]):
            got = model.next_distribution(ctx)
            ref = R.synthetic_probs(model._ints, model._uints, model._floats,
                                    np.array(ctx, dtype=np.int64), n, table=model._table)
            np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-15)


@pytest.mark.kernel
@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 7, 1000])
def test_table_field_matches_numpy(n):
    q = mk.normal_table()
    out = np.zeros(n)
    mk._add_table_field(np.uint64(2**63 + 12345), 1.0, q, out)
    np.testing.assert_array_equal(out, R.table_field(2**63 + 12345, n, q))


def test_normal_table_is_the_rescaled_midpoint_quantiles():
    q = mk.normal_table()
    assert q.shape == (mk.TABLE_SIZE,) and np.all(np.diff(q) > 0)
    np.testing.assert_array_equal(q, -q[::-1])
    assert abs(np.mean(q)) < 1e-15 and abs(np.mean(q * q) - 1.0) < 1e-12
    raw = special.ndtri((np.arange(mk.TABLE_SIZE) + 0.5) / mk.TABLE_SIZE)
    c = q[-1] / raw[-1]
    assert 1.0 < c < 1.001
    np.testing.assert_allclose(q, c * raw, rtol=1e-12, atol=1e-15)


def _field_samples(n_labels=40, n=50_000):
    q = mk.normal_table()
    vals = np.empty((n_labels, n))
    for i in range(n_labels):
        vals[i] = 0.0
        lab = np.uint64(mk.window_label(np.uint64(77), 1, np.array([i], np.int64)))
        mk._add_table_field(lab, 1.0, q, vals[i])
    return q, vals


def test_field_indices_are_uniform_and_independent():
    """The 16-bit indices behind 40 fields of 50,000 tokens: uniform (4,096 bins of the top
    12 bits) and pairwise independent within a mixer output (tokens 4i, 4i+1: 16 x 16 bins
    of their top 4 bits) and across windows (the same token in two fields).  Each
    chi-square test fails with probability 1e-4 under the stated law (3e-4 in all)."""
    q, vals = _field_samples()
    j = np.searchsorted(q, vals)
    np.testing.assert_array_equal(q[j], vals)  # every value is a table entry
    top = (j >> 4).reshape(-1)
    assert stats.chisquare(np.bincount(top, minlength=4096)).pvalue > 1e-4
    a, b = j[:, 0::4] >> 12, j[:, 1::4] >> 12
    joint = np.bincount((a * 16 + b).reshape(-1), minlength=256)
    assert stats.chisquare(joint).pvalue > 1e-4
    c, d = j[0::2] >> 12, j[1::2] >> 12
    joint = np.bincount((c * 16 + d).reshape(-1), minlength=256)
    assert stats.chisquare(joint).pvalue > 1e-4


def test_field_values_follow_the_standard_normal():
    """KS distance of 2,000,000 field values to N(0, 1): under the stated law (the table's
    discrete law, itself within 4e-5 of N(0, 1) in KS distance) it exceeds 0.0014 with
    probability about 1e-3; a 1% error of the scale gives about 0.0024."""
    _, vals = _field_samples()
    d = stats.kstest(vals.reshape(-1), "norm").statistic
    assert d < 0.0014
    assert stats.kstest(1.01 * vals.reshape(-1), "norm").statistic > 0.0014  # the power


def test_logits_are_the_backoff_sum_of_unit_fields():
    """The raw logits of one context over n = 50,000 tokens have the law of
    ``scale * N(0, 1)`` (three independent unit fields, weight 1/sqrt(3) each): KS distance
    below 0.0087 (false failure about 1e-3)."""
    model = SyntheticLM(50_000, context_length=2, seed=3, kind="gaussian16")
    logits = np.empty(50_000)
    mk.synthetic_logits(mk.KIND_GAUSSIAN16, 2, model._field_seed, model.scale, 1.1,
                        np.uint64(0), 2, 0.0, model._base, model._table,
                        np.array([11, 12], np.int64), logits)
    assert stats.kstest(logits / model.scale, "norm").statistic < 0.0087


def test_gaussian16_is_a_deterministic_function_of_seed_and_window():
    model = SyntheticLM(500, context_length=2, seed=11, kind="gaussian16")
    p1 = model.next_distribution([7, 8, 9])
    np.testing.assert_array_equal(p1, model.next_distribution([1, 2, 8, 9]))
    np.testing.assert_array_equal(
        p1, SyntheticLM(500, 2, seed=11, kind="gaussian16").next_distribution([8, 9]))
    assert _tv(p1, model.next_distribution([8, 10])) > 0.1
    assert _tv(p1, SyntheticLM(500, 2, seed=12, kind="gaussian16").next_distribution(
        [8, 9])) > 0.1
    # unrelated to the Box-Muller family of the same seed
    assert _tv(p1, SyntheticLM(500, 2, seed=11).next_distribution([8, 9])) > 0.1
    assert abs(p1.sum() - 1.0) < 1e-12 and np.all(p1 > 0)


def test_gaussian16_entropy_matches_the_gaussian_family():
    """Same default scale, same law up to the discretisation: at n = 1,000 the mean entropy
    over 8 model seeds (30 contexts each) is within 0.25 nats of the Box-Muller family's
    (measured 2.56 vs 2.62; the standard error of the difference is about 0.05, so a false
    failure has probability below 1e-4)."""
    h16 = np.mean([SyntheticLM(1000, seed=s, kind="gaussian16").mean_entropy(30)
                   for s in range(8)])
    h = np.mean([SyntheticLM(1000, seed=s).mean_entropy(30) for s in range(8)])
    assert abs(h16 - h) < 0.25, (h16, h)
    assert 1.8 < h16 < 3.2


def test_gaussian16_drafts():
    target = SyntheticLM(3000, seed=7, kind="gaussian16")
    assert target.draft(0.0) is target
    rng = np.random.default_rng(0)
    ctxs = rng.integers(0, 3000, size=(40, 2))
    means = []
    for eps in (0.0, 0.25, 0.5, 1.0):
        draft = target.draft(eps, seed=2)
        assert draft.kind == "gaussian16"
        means.append(np.mean([1 - _tv(target.next_distribution(c), draft.next_distribution(c))
                              for c in ctxs]))
    assert means[0] == 1.0
    assert all(a > b + 0.02 for a, b in zip(means, means[1:], strict=False))
    backoff = target.draft(0.0, seed=1, context_length=1)
    np.testing.assert_array_equal(backoff.next_distribution([5, 9]),
                                  backoff.next_distribution([6, 9]))


def test_calibrated_gaussian16_reaches_the_entropy():
    model = calibrated_lm(1.5, 500, kind="gaussian16", n_contexts=256)
    assert model.base.kind == "gaussian16"
    assert abs(model.entropy - 1.5) < 1e-4


@pytest.mark.parametrize("decoder", DECODERS)
def test_compiled_gaussian16_equals_the_python_loop(decoder):
    """Every decoder on a gaussian16 pair: the compiled batch = the Python loop per prompt."""
    n = 50
    target = SyntheticLM(n, 2, seed=7, kind="gaussian16")
    draft = target.draft(0.4, seed=3)
    B = 3 if decoder in MULTI_DRAFT_DECODERS else 1
    ps = random_prompts(3, 3, n, seed=5)
    kw = dict(L=3, B=B, key="g16", max_new_tokens=12)
    batch = speculative_decode_batch(target, draft, ps, decoder, **kw)
    for i in range(3):
        ref = speculative_decode(target, draft, ps.tokens[i], decoder, seed=ps.seeds[i],
                                 backend=SyntheticBackend(target, draft), **kw)
        got = batch[i]
        np.testing.assert_array_equal(ref.tokens, got.tokens)
        np.testing.assert_array_equal(ref.emitted_per_block, got.emitted_per_block)
        np.testing.assert_array_equal(ref.nu, got.nu)
