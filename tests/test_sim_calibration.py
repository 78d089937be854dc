"""Entropy-calibrated synthetic language models (specbound.sim.calibration).

Deterministic checks are exact; the statistical ones (fresh contexts, LPPL of samples) use a
fixed seed and 5 standard errors (false-failure rate ``FIVE_SIGMA_RATE`` = 5.7e-7 each under
normality).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specbound import sim
from specbound.sim.calibration import CalibratedLM, calibrated_lm, entropy_bounds
from specbound.sim.models import as_language_model
from tests._stats import FIVE_SIGMA_RATE, assert_within_se

assert FIVE_SIGMA_RATE < 1e-6

V = 300


@pytest.fixture(scope="module")
def lm047():
    return calibrated_lm(0.47, V, seed=3)


def test_achieves_target_on_calibration_contexts(lm047):
    assert lm047.target_entropy == 0.47
    assert abs(lm047.entropy - 0.47) < 1e-6
    # recomputing on the same contexts gives the same value (deterministic model)
    assert abs(lm047.mean_entropy(2048, seed=3) - lm047.entropy) < 1e-12


def test_fresh_contexts_within_sampling_error(lm047):
    """The calibration generalises: fresh contexts agree within 5 standard errors."""
    fresh = lm047.entropies(4096, seed=99)
    se = np.hypot(lm047.entropy_se, fresh.std(ddof=1) / np.sqrt(fresh.size))
    assert_within_se(float(fresh.mean()), 0.47, float(se), label="fresh-context entropy")


def test_lppl_of_own_samples_matches_mean_entropy(lm047):
    """E[LPPL of the model's samples] = mean entropy along generated contexts (5 s.e.)."""
    est = lm047.lppl(48, 48, seed=7)
    pop = lm047.entropies(4096, seed=11)
    se = np.hypot(est.stderr, pop.std(ddof=1) / np.sqrt(pop.size))
    assert_within_se(est.mean, float(pop.mean()), float(se), label="LPPL vs entropy")


@pytest.mark.parametrize("kind", ["zipf", "gaussian"])
def test_sharpness_is_monotone_in_target(kind):
    targets = [0.3, 0.8, 1.6, 3.0]
    models = [calibrated_lm(h, V, kind=kind, n_contexts=256, seed=1) for h in targets]
    sharp = [m.sharpness for m in models]
    assert all(a > b for a, b in zip(sharp, sharp[1:], strict=False)), sharp
    for h, m in zip(targets, models, strict=True):
        assert abs(m.entropy - h) < 1e-6


@settings(max_examples=15, deadline=None)
@given(h=st.floats(0.05, 5.0), seed=st.integers(0, 2**31))
def test_any_reachable_target_is_hit(h, seed):
    m = calibrated_lm(h, V, n_contexts=64, seed=seed)
    assert abs(m.entropy - h) < 1e-5
    assert 0 < m.sharpness


@pytest.mark.parametrize("bad", [0.0, -0.1, float(np.log(V)), 10.0, float("nan"), "1",
                                 True, None])
def test_bad_target_raises(bad):
    with pytest.raises(ValueError, match="target_entropy"):
        calibrated_lm(bad, V, n_contexts=16)


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match="kind"):
        calibrated_lm(1.0, V, kind="uniform", n_contexts=16)
    with pytest.raises(ValueError, match="vocab_size"):
        calibrated_lm(0.5, 1)
    with pytest.raises(ValueError, match="spread"):
        calibrated_lm(0.5, V, spread=-1.0, n_contexts=16)
    with pytest.raises(ValueError, match="base"):
        CalibratedLM(object(), 1.0)
    with pytest.raises(ValueError, match="sharpness"):
        CalibratedLM(sim.SyntheticLM(10), 0.0)
    # top-k caps the reachable entropy at log(top_k)
    assert entropy_bounds(V, top_k=50) == (0.0, float(np.log(50)))
    with pytest.raises(ValueError, match="target_entropy"):
        calibrated_lm(4.0, V, top_k=50, n_contexts=16)


def test_model_protocol_and_determinism(lm047):
    rng = np.random.default_rng(0)
    ctxs = [rng.integers(0, V, size=k) for k in (0, 1, 2, 5)]
    batch = lm047.next_distributions(ctxs)
    for row, c in zip(batch, ctxs, strict=True):
        assert np.array_equal(row, lm047.next_distribution(c))
        assert abs(row.sum() - 1.0) < 1e-12 and np.all(row >= 0)
    # only the last context_length tokens matter
    c = rng.integers(0, V, size=6)
    assert np.array_equal(lm047.next_distribution(c), lm047.next_distribution(c[-2:]))
    assert as_language_model(lm047) is lm047
    with pytest.raises(ValueError, match="context"):
        lm047.next_distribution([V])


def test_heavy_tail_and_spread_change_what_they_claim():
    """At equal mean entropy, the Zipf base has a heavier tail than the Gaussian one, and
    ``spread`` spreads the per-context entropies (spread 0: the same entropy everywhere)."""
    z = calibrated_lm(0.47, V, kind="zipf", n_contexts=512, seed=2)
    g = calibrated_lm(0.47, V, kind="gaussian", n_contexts=512, seed=2)
    assert z.tail_mass(10, 512) > 1.5 * g.tail_mass(10, 512)
    flat = calibrated_lm(0.47, V, kind="zipf", spread=0.0, n_contexts=64, seed=2)
    assert flat.entropies(64).std() < 1e-9
    assert z.entropies(512).std() > 0.2


def test_drafts_share_the_sharpness_field(lm047):
    assert lm047.draft(0.0) is lm047
    d = lm047.draft(0.3, seed=5)
    c = [1, 2, 3]
    assert d.sharpness_at(c) == lm047.sharpness_at(c)
    p, q = lm047.next_distribution(c), d.next_distribution(c)
    assert 0 < 0.5 * np.abs(p - q).sum() < 1
    # draft temperature: 0.5 sharpens, 1.5 diffuses
    h = lm047.mean_entropy(256)
    assert lm047.draft(0.0, temperature=0.5).mean_entropy(256) < h
    assert lm047.draft(0.0, temperature=1.5).mean_entropy(256) > h


def test_decoders_run_on_calibrated_models(lm047):
    """A calibrated pair drives the lossless decoders (the model protocol)."""
    d = lm047.draft(0.2, seed=1)
    for dec, B in (("vsps", 1), ("pfr", 1), ("invariant", 2), ("mpfr", 2)):
        res = sim.speculative_decode(lm047, d, [1, 2], dec, L=3, B=B, key="k",
                                     max_new_tokens=12, seed=0)
        assert res.tokens.size == 14


def test_memo_is_bit_for_bit_and_follows_parameters():
    """Remembered rows equal a fresh model's rows bit for bit, whatever the batch they were
    computed in; changing the sharpness drops the memo (a stale row would differ)."""
    lm = calibrated_lm(1.0, 200, seed=4)
    d = lm.draft(0.3, seed=1, temperature=1.5)
    rng = np.random.default_rng(2)
    ctxs = [rng.integers(0, 200, size=int(k)) for k in rng.integers(0, 6, size=60)]
    ctxs += [np.concatenate([rng.integers(0, 200, size=3), c[-2:]]) for c in ctxs[:20]]
    for model, fresh in ((lm, lambda: calibrated_lm(1.0, 200, seed=4)),
                         (d, lambda: calibrated_lm(1.0, 200, seed=4).draft(
                             0.3, seed=1, temperature=1.5))):
        first = model.next_distributions(ctxs)
        again = model.next_distributions(ctxs[::-1])[::-1]
        one = np.array([fresh().next_distribution(c) for c in ctxs])
        assert first.tobytes() == again.tobytes() == one.tobytes()
    before = lm.next_distribution(ctxs[5])
    lm.sharpness *= 2.0
    after = lm.next_distribution(ctxs[5])
    lm.sharpness /= 2.0
    assert not np.array_equal(before, after)
    assert lm.next_distribution(ctxs[5]).tobytes() == before.tobytes()
