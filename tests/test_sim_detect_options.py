"""Tests of the detector options of specbound.sim.detect: skipped repeated contexts
(``repeats="skip"``, Hu & Huang 2024's setting) and He et al. 2026's use of mse_pseudo's
keyed acceptance coin (``coin_threshold``): what they score, their power, exact nulls."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from specbound.sim.decode import speculative_decode
from specbound.sim.detect import acceptance_coins, detect, detect_many, keyed_pivots
from specbound.sim.models import SyntheticLM
from tests._stats import FAILURE_RATE, assert_within_se

TARGET = SyntheticLM(200, context_length=2, seed=1)
DRAFT = TARGET.draft(1.0, seed=2)


def _pseudo(i, **kw):
    return speculative_decode(TARGET, DRAFT, [i % 200, 3], "mse_pseudo", L=4, key=1000 + i,
                              max_new_tokens=64, seed=i, **kw)


def test_acceptance_coins_are_the_decoders_coins():
    # every accepted draft had r <= p(x)/q(x), every rejection r > p(x)/q(x)
    checked = 0
    for i in range(5):
        for w in (None, 2):
            r = speculative_decode(TARGET, DRAFT, [i, 3], "mse_pseudo", L=3, key=i, window=w,
                                   max_new_tokens=40, seed=i)
            coins = acceptance_coins(r, i)
            assert coins.shape == (40,)
            drafts = np.concatenate([d[0] for d in r.drafts])
            starts = np.concatenate([[0], np.cumsum(r.emitted_per_block)[:-1]])
            for j, pos in enumerate(r.decision_position):
                blk = r.block_of_decision()[j]
                x = drafts[sum(d.shape[1] for d in r.drafts[:blk]) + pos - starts[blk]]
                ctx = r.tokens[:r.prompt_length + pos]
                ratio = TARGET.next_distribution(ctx)[x] / DRAFT.next_distribution(ctx)[x]
                assert (coins[pos] <= ratio) == r.decision_accepted[j]
                checked += 1
    assert checked > 200


def test_coin_detector_is_more_powerful_on_keyed_residual_mse_pseudo():
    # at the fixed budget of 64 tokens (draft far from the target, acceptance ~0.25), the
    # mean -log p-value over 150 sequences is larger with the coin than with the tokens only:
    # paired difference > 5 SE (false-failure rate < 3e-7 under a normal approximation)
    res = [_pseudo(i, residual="keyed") for i in range(150)]
    keys = [1000 + i for i in range(150)]
    plain = np.array([-detect(r, k).log_pvalue for r, k in zip(res, keys, strict=True)])
    coin = np.array([-detect(r, k, coin_threshold=0.3).log_pvalue
                     for r, k in zip(res, keys, strict=True)])
    d = coin - plain
    assert d.mean() > 5 * d.std(ddof=1) / np.sqrt(d.size), (coin.mean(), plain.mean())
    # and at 1% FPR it detects more sequences (exact Gamma null)
    assert np.mean(coin > np.log(100)) > np.mean(plain > np.log(100))


@pytest.mark.parametrize("tau", [0.3, 0.7])
def test_coin_detector_null_pvalues_are_uniform(tau):
    # H0: mse_pseudo text under another key, and unwatermarked vsps text.  KS test of 300
    # p-values each against U(0, 1); alpha = FAILURE_RATE / 4 per comparison.
    for kind in ("other_key", "vsps"):
        p = []
        for i in range(300):
            if kind == "vsps":
                r = speculative_decode(TARGET, DRAFT, [i % 200, 3], "vsps", L=4,
                                       max_new_tokens=64, seed=i)
            else:
                r = _pseudo(i, residual="keyed")
            p.append(np.exp(detect(r, 7 + i if kind == "vsps" else 50_000 + i,
                                   coin_threshold=tau).log_pvalue))
        assert stats.kstest(p, "uniform").pvalue > FAILURE_RATE / 4, (kind, tau)


def test_coin_threshold_changes_only_the_high_coin_positions():
    r = _pseudo(3, residual="keyed")
    base = keyed_pivots(r, 1003)
    mixed = keyed_pivots(r, 1003, coin_threshold=0.5)
    coins = acceptance_coins(r, 1003)
    np.testing.assert_array_equal(base.positions, mixed.positions)
    low = coins[base.positions - r.prompt_length] <= 0.5
    np.testing.assert_array_equal(base.pivots[low], mixed.pivots[low])
    assert np.all(base.pivots[~low] != mixed.pivots[~low]) and (~low).any()
    batch = detect_many([r, _pseudo(4, residual="keyed")], 1003, coin_threshold=0.5)
    assert batch.score[0] == detect(r, 1003, coin_threshold=0.5).score


# ------------------------------------------------------------------- repeats="skip"


def test_skip_results_are_scored_only_where_watermarked():
    lm = SyntheticLM(6, context_length=1, seed=3)
    for decoder in ("basic_uwm", "pfr", "mse"):
        r = speculative_decode(lm, lm.draft(0.5, seed=4), [1], decoder, key=5, window=1,
                               repeats="skip", max_new_tokens=40, seed=1)
        piv = keyed_pivots(r, 5)
        np.testing.assert_array_equal(piv.positions,
                                      np.flatnonzero(~r.skipped) + r.prompt_length)
        np.testing.assert_array_equal(piv.pivots, r.pivots[~r.skipped])
        # the same from the tokens with repeats="skip"; dedup-only scoring keeps more
        same = keyed_pivots(r.tokens, 1, 5, window=1, repeats="skip")
        np.testing.assert_array_equal(same.positions, piv.positions)
        assert keyed_pivots(r.tokens, 1, 5, window=1).n_scored > piv.n_scored
        with pytest.raises(ValueError, match="repeats"):
            detect(r, 5, repeats="reuse")


def test_skip_null_is_exact_and_watermark_is_detected():
    # Hu & Huang's window 3.  H0 (another key): mean Aaronson score per scored token is 1
    # (Exp(1) scores), within 5 SE; H1: every sequence detected at 1e-3
    lm = SyntheticLM(8, context_length=1, seed=5)
    s0 = []
    for i in range(60):
        r = speculative_decode(lm, lm.draft(0.5, seed=6), [i % 8], "pfr", L=3, key=i,
                               window=3, repeats="skip", max_new_tokens=200, seed=i)
        assert r.skipped.sum() > 20
        s0.append(-np.log1p(-keyed_pivots(r, 10_000 + i).pivots))
        assert detect(r, i).log_pvalue < np.log(1e-3)
    s0 = np.concatenate(s0)
    assert_within_se(s0.mean(), 1.0, s0.std(ddof=1) / np.sqrt(s0.size))


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"coin_threshold": 0.0}, "coin_threshold"),
    ({"coin_threshold": 1.5}, "coin_threshold"),
    ({"coin_threshold": "x"}, "coin_threshold"),
    ({"repeats": "drop"}, "repeats"),
])
def test_detector_option_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        detect([1, 2, 3, 4], 1, 5, window=1, **kwargs)
    with pytest.raises(ValueError, match=match):
        detect_many([[1, 2, 3, 4]], 1, 5, window=1, **kwargs)
