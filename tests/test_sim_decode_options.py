"""Tests of the decoder options of specbound.sim.decode: repeated contexts
(``repeats="reuse"|"mask"|"skip"``), the gamma reweight of Hu & Huang 2024 for the keyed
decoders (``reweight="gamma"``) and the fresh unkeyed clocks of ``pfr_nowm``
(``unkeyed="fresh"``): exactness, the effect each option claims, and the recorded fields."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specbound.sim import _kernels as K
from specbound.sim.decode import (
    WatermarkConfig,
    _gamma_reweight,
    acceptance_compensator,
    speculative_decode,
)
from specbound.sim.decoders import DECODER_SPECS
from specbound.sim.models import MarkovLM, SyntheticLM
from specbound.sim.prf import context_label, key_id
from specbound.testing.strategies import prob_vectors
from tests._stats import assert_gof, assert_not_gof, assert_within_se, bonferroni

TARGET = MarkovLM(np.array([[0.5, 0.3, 0.2], [0.2, 0.5, 0.3], [0.3, 0.3, 0.4]]))
DRAFT = MarkovLM(np.array([[0.2, 0.5, 0.3], [0.4, 0.2, 0.4], [0.3, 0.5, 0.2]]))
LAW3 = TARGET.sequence_law([0], 3).ravel()


def _first3(decoder, n_trials, base, **kw):
    counts = np.zeros(27, dtype=np.int64)
    for i in range(n_trials):
        r = speculative_decode(TARGET, DRAFT, [0], decoder, L=2, key=base + i,
                               max_new_tokens=3, seed=np.random.SeedSequence([base, i]), **kw)
        a, b, c = r.generated
        counts[(a * 3 + b) * 3 + c] += 1
    return counts


# Exactness: the law of the first three tokens is the target's (keys and seeds fresh per
# trial).  15 cases, overall false-failure rate 1e-4 (Bonferroni).
EXACT_CASES = [
    ("basic_uwm", {"window": 1, "repeats": "skip"}),
    ("pfr", {"window": 1, "repeats": "skip"}),
    ("mws", {"window": 1, "repeats": "skip"}),
    ("mse", {"window": 1, "repeats": "skip"}),
    ("mse_pseudo", {"window": 1, "repeats": "skip"}),
    ("basic_uwm", {"reweight": "gamma"}),
    ("mws", {"reweight": "gamma"}),
    ("mse", {"reweight": "gamma"}),
    ("mse_pseudo", {"reweight": "gamma"}),
    ("mws", {"reweight": "gamma", "window": 1, "repeats": "skip"}),
    ("pfr_nowm", {"unkeyed": "fresh"}),
    ("basic_uwm", {"reweight": "gamma", "window": 1, "repeats": "mask"}),
    ("mse_pseudo", {"residual": "keyed"}),
    ("mse_pseudo", {"residual": "keyed", "window": 1, "repeats": "skip"}),
    ("mpfr", {"B": 3, "window": 1, "repeats": "skip"}),
]


@pytest.mark.parametrize(("decoder", "kw"), EXACT_CASES)
def test_options_keep_the_target_law(decoder, kw):
    counts = _first3(decoder, 6000, 300, **kw)
    assert_gof(counts, LAW3, alpha=bonferroni(len(EXACT_CASES)), label=f"{decoder} {kw}")


def test_the_exactness_check_has_power():
    # the same check rejects the draft's law (the GOF can fail)
    counts = np.zeros(27, dtype=np.int64)
    for i in range(2500):
        r = speculative_decode(DRAFT, None, [0], "basic_uwm", key=i, max_new_tokens=3,
                               reweight="gamma", seed=i)
        a, b, c = r.generated
        counts[(a * 3 + b) * 3 + c] += 1
    assert_not_gof(counts, LAW3)


# ------------------------------------------------------------------- repeats="skip"


def test_skip_marks_exactly_the_repeated_windows():
    # a position is skipped iff its window occurred at an earlier generated position; every
    # other basic_uwm token is the keyed race winner (the watermark is kept there)
    n_skipped = 0
    for seed in range(30):
        for w in (1, 2):
            r = speculative_decode(TARGET, None, [0], "basic_uwm", key=seed, max_new_tokens=12,
                                   seed=seed, window=w, repeats="skip")
            toks = r.tokens
            seen = set()
            for t in range(1, toks.size):
                win = tuple(toks[max(0, t - w):t].tolist())
                assert r.skipped[t - 1] == (win in seen)
                if win not in seen:
                    lab = context_label(seed, toks[:t], window=w)
                    assert toks[t] == K.race_argmin(lab, TARGET.next_distribution(toks[:t]), 0)
                seen.add(win)
            n_skipped += int(r.skipped.sum())
            assert r.watermark == WatermarkConfig(key_id(seed), w, False, "skip")
    assert n_skipped > 200


@pytest.mark.parametrize("decoder", [d for d, s in DECODER_SPECS.items()
                                     if s.keyed and s.drafts and not s.multi_draft])
def test_skipped_decisions_accept_with_one_minus_tv(decoder):
    # skipped decisions are vanilla speculative sampling: their accepted count minus the
    # compensator 1 - TV is a martingale; |sum| <= 5 SE (per block differences), and the
    # non-skipped pfr decisions keep the race (which differs from 1 - TV here).
    res = [speculative_decode(TARGET, DRAFT, [i % 3], decoder, L=3, key=i, window=1,
                              repeats="skip", max_new_tokens=30, seed=i) for i in range(150)]
    assert all(r.decision_skipped.size == r.nu.size for r in res)
    assert sum(int(r.decision_skipped.sum()) for r in res) > 1500
    df = acceptance_compensator(res, TARGET, DRAFT)
    diff = (df["accepted"] - df["predicted"]).to_numpy()
    assert_within_se(diff.mean(), 0.0, diff.std(ddof=1) / np.sqrt(diff.size), label=decoder)


def test_skip_differs_from_mask_and_reuse():
    outs = {}
    for mode in ("reuse", "mask", "skip"):
        outs[mode] = [tuple(speculative_decode(TARGET, DRAFT, [0], "pfr", L=2, key=k, window=1,
                                               repeats=mode, max_new_tokens=15,
                                               seed=k).tokens) for k in range(20)]
    assert outs["skip"] != outs["mask"] and outs["skip"] != outs["reuse"]
    # with window=None nothing repeats: the three modes coincide and nothing is skipped
    for mode in ("mask", "skip"):
        a = speculative_decode(TARGET, DRAFT, [0], "mse", key=3, repeats=mode, seed=1,
                               max_new_tokens=20)
        b = speculative_decode(TARGET, DRAFT, [0], "mse", key=3, seed=1, max_new_tokens=20)
        np.testing.assert_array_equal(a.tokens, b.tokens)
        assert not a.skipped.any() and a.skipped.shape == (20,)


def test_repeats_mask_is_recorded_and_the_old_alias_is_refused():
    new = speculative_decode(TARGET, DRAFT, [0], "pfr", key=3, window=1, repeats="mask",
                             max_new_tokens=12)
    assert new.watermark == WatermarkConfig(key_id(3), 1, True)
    assert new.watermark.repeats == "mask" and new.watermark.mask_repeats
    with pytest.raises(TypeError, match="mask_repeats"):
        speculative_decode(TARGET, DRAFT, [0], "pfr", key=3, window=1, mask_repeats=True,
                           max_new_tokens=12)


# ------------------------------------------------------------------- reweight="gamma"


def test_gamma_reweight_is_unbiased_over_permutations():
    # averaging over all 3! orders (through labels realising each order) gives w back;
    # a single reweighting is a distribution that moves mass to the later tokens
    rng = np.random.default_rng(0)
    w = rng.dirichlet(np.ones(3))
    by_order = {}
    for lab in rng.integers(0, 2**64, size=400, dtype=np.uint64):
        from specbound.sim.prf import prf_uniform_numpy

        order = tuple(np.argsort(prf_uniform_numpy(lab, np.arange(3), 0)))
        by_order.setdefault(order, _gamma_reweight(lab, w))
    assert len(by_order) == 6
    for r in by_order.values():
        assert r.sum() == pytest.approx(1.0) and np.all(r >= 0)
    np.testing.assert_allclose(np.mean(list(by_order.values()), axis=0), w, atol=1e-12)


def test_gamma_mws_is_no_longer_pfr():
    # with the DeltaGumbel reweight mws is pfr token for token; with gamma it is not
    target = SyntheticLM(20, context_length=2, seed=1)
    draft = target.draft(0.8, seed=2)
    differ = 0
    for key in range(10):
        pfr = speculative_decode(target, draft, [1], "pfr", L=3, key=key, max_new_tokens=20)
        g = speculative_decode(target, draft, [1], "mws", L=3, key=key, max_new_tokens=20,
                               reweight="gamma")
        differ += not np.array_equal(g.tokens, pfr.tokens)
        assert g.watermark.reweight == "gamma" and pfr.watermark.reweight == "delta"
    assert differ >= 8
    with pytest.raises(ValueError, match="results"):
        acceptance_compensator(g, target, draft)


def test_gamma_pivots_are_stronger_than_null_but_weaker_than_delta():
    # the keyed pivots of gamma basic_uwm text are stochastically larger than U(0, 1) (the
    # detector applies unchanged) and smaller than the DeltaGumbel ones: mean pivot of 4,000
    # tokens, 5-SE comparisons (false-failure rate < 2e-6)
    target = SyntheticLM(50, context_length=2, seed=3)
    means = {}
    for rw in ("delta", "gamma"):
        piv = np.concatenate([speculative_decode(target, None, [i], "basic_uwm", key=100 + i,
                                                 max_new_tokens=100, reweight=rw,
                                                 seed=i).pivots for i in range(40)])
        means[rw] = (piv.mean(), piv.std(ddof=1) / np.sqrt(piv.size))
    assert means["gamma"][0] > 0.5 + 5 * means["gamma"][1]
    assert means["delta"][0] > means["gamma"][0] + 5 * np.hypot(means["delta"][1],
                                                                 means["gamma"][1])


# ------------------------------------------------------------------- unkeyed="fresh"


def test_fresh_pfr_nowm_is_not_drafter_invariant_given_the_seed():
    # position clocks: the same tokens for every drafter given the seed; fresh per-block
    # labels: the tokens depend on the drafter's block boundaries
    target = SyntheticLM(30, context_length=2, seed=4)
    drafts = [target.draft(0.5, seed=5), target.draft(1.0, seed=6)]
    changed = 0
    for seed in range(10):
        pos = [speculative_decode(target, d, [1], "pfr_nowm", L=3, max_new_tokens=30,
                                  seed=seed).tokens for d in drafts]
        np.testing.assert_array_equal(pos[0], pos[1])
        fresh = [speculative_decode(target, d, [1], "pfr_nowm", L=3, max_new_tokens=30,
                                    seed=seed, unkeyed="fresh") for d in drafts]
        changed += not np.array_equal(fresh[0].tokens, fresh[1].tokens)
        assert fresh[0].unkeyed == "fresh"
        again = speculative_decode(target, drafts[0], [1], "pfr_nowm", L=3, max_new_tokens=30,
                                   seed=seed, unkeyed="fresh")
        np.testing.assert_array_equal(again.tokens, fresh[0].tokens)  # reproducible
    assert changed >= 8


@settings(max_examples=60, deadline=None)
@given(w=prob_vectors(min_size=1, max_size=60), label=st.integers(0, 2**64 - 1))
def test_gamma_reweight_properties(w, label):
    # a distribution with at most twice the mass of every token; along the keyed order its
    # cumulative law is (2 b - 1)_+ (Hu et al. 2023's definition), so the first half is empty
    from specbound.sim.prf import prf_uniform_numpy

    r = _gamma_reweight(np.uint64(label), w)
    assert np.all(r >= 0) and r.sum() == pytest.approx(1.0, abs=1e-9)
    assert np.all(r <= 2 * w / w.sum() + 1e-12)
    order = np.argsort(prf_uniform_numpy(np.uint64(label), np.arange(w.size), 0), kind="stable")
    b = np.cumsum(w[order]) / w.sum()
    np.testing.assert_allclose(np.cumsum(r[order]), np.maximum(2 * b - 1, 0), atol=1e-9)


def test_skip_in_the_mpfr_tree():
    # skipped tree contexts carry their multiplicity (nu > 1 happens), are recorded, and the
    # compensator refuses them (recursive rejection has no closed form here)
    target = SyntheticLM(6, context_length=1, seed=7)
    draft = target.draft(0.6, seed=8)
    res = [speculative_decode(target, draft, [i % 6], "mpfr", L=3, B=3, key=i, window=1,
                              repeats="skip", max_new_tokens=30, seed=i) for i in range(10)]
    nus = np.concatenate([r.nu[r.decision_skipped] for r in res])
    assert nus.size > 50 and (nus > 1).any()
    assert all(r.skipped.sum() >= r.decision_skipped.sum() for r in res)
    with pytest.raises(ValueError, match="results"):
        acceptance_compensator(res, target, draft)


@pytest.mark.slow
@pytest.mark.parametrize(("decoder", "kw"), EXACT_CASES)
def test_options_keep_the_target_law_large(decoder, kw):
    # 60,000 sequences: a 1% total-variation bias on a few cells of probability ~3% gives a
    # chi-square noncentrality far above the 1e-4 / 15 critical value
    counts = _first3(decoder, 60_000, 9000, **kw)
    assert_gof(counts, LAW3, alpha=bonferroni(len(EXACT_CASES)), label=f"{decoder} {kw}")


@pytest.mark.parametrize(("decoder", "B", "kw"), [
    ("pfr", 1, {"repeats": "skip"}), ("mse", 1, {"repeats": "skip"}),
    ("mse_pseudo", 1, {"repeats": "skip", "residual": "keyed"}),
    ("mws", 1, {"reweight": "gamma"}), ("mpfr", 3, {"repeats": "skip"}),
    ("pfr_nowm", 1, {"unkeyed": "fresh"}),
])
def test_recorded_decisions_match_the_reconstruction_with_options(decoder, B, kw):
    from tests.test_sim_decode import _reconstruct_decisions

    target = SyntheticLM(8, context_length=1, seed=9)
    draft = target.draft(0.8, seed=10)
    for seed in range(4):
        r = speculative_decode(target, draft, [seed, 1], decoder, L=3, B=B, key=seed,
                               window=1, max_new_tokens=30, seed=seed, **kw)
        dec = _reconstruct_decisions(r)
        np.testing.assert_array_equal(r.nu, [nu for *_, nus in dec for nu in nus])
        np.testing.assert_array_equal(r.accepted_per_block, [a for _, _, a, _ in dec])
        assert r.decision_skipped.shape == r.nu.shape
        # a decision is skipped iff the token it emitted is
        np.testing.assert_array_equal(r.decision_skipped, r.skipped[r.decision_position])
