"""Tests of the sequence-level decoders (specbound.sim.decode); their step kernels are
tested against NumPy references in tests/test_kernels.py."""

from __future__ import annotations

import numpy as np
import pytest

from specbound.sim import _kernels as K
from specbound.sim.decode import (
    DECODERS,
    KEYED_DECODERS,
    MULTI_DRAFT_DECODERS,
    expected_block_tokens,
    mpfr_multiplicity_law,
    speculative_decode,
)
from specbound.sim.gof import chisquare_gof
from specbound.sim.models import MarkovLM, SyntheticLM
from specbound.sim.prf import keyed_uniforms

LOSSLESS = DECODERS  # every decoder of the package is lossless

# ------------------------------------------------------------------- result structure


def _pair(n=50, seed=1, eps=0.6):
    target = SyntheticLM(n, context_length=2, seed=seed)
    return target, target.draft(eps, seed=seed + 100)


@pytest.mark.parametrize("decoder", DECODERS)
def test_result_structure(decoder):
    target, draft = _pair()
    B = 3 if decoder in MULTI_DRAFT_DECODERS else 1
    prompt = [4, 5, 6]
    res = speculative_decode(target, draft, prompt, decoder, L=3, B=B, key="k",
                             max_new_tokens=23, seed=2)
    assert res.tokens.dtype == np.int64 and res.tokens.shape == (26,)
    np.testing.assert_array_equal(res.tokens[:3], prompt)
    assert res.prompt_length == 3 and res.generated.shape == (23,)
    assert res.accepted.sum() == 23 and np.all(res.accepted >= 1)
    assert np.all(res.accepted <= 4)
    assert res.aatps == pytest.approx(23 / res.accepted.size)
    assert res.pivots.shape == (23,)
    if decoder == "ar" or decoder == "basic_uwm":
        assert np.all(res.accepted == 1) and res.n_target_evals == 23
        assert res.n_draft_evals == 0 and res.drafts == ()
    else:
        assert res.n_target_evals == res.accepted.size
        assert len(res.drafts) == res.accepted.size
        assert res.drafts[0].shape == (B, 3)
        assert res.n_draft_evals == sum(d.shape[1] for d in res.drafts)
        assert res.n_target_contexts >= res.n_target_evals
    if decoder in KEYED_DECODERS:
        assert np.all((res.pivots > 0) & (res.pivots < 1))
    else:
        assert np.all(np.isnan(res.pivots))
    again = speculative_decode(target, draft, prompt, decoder, L=3, B=B, key="k",
                               max_new_tokens=23, seed=2)
    np.testing.assert_array_equal(res.tokens, again.tokens)
    np.testing.assert_array_equal(res.accepted, again.accepted)


@pytest.mark.parametrize("decoder", sorted(KEYED_DECODERS))
@pytest.mark.parametrize("m", [None, 2])
def test_pivots_are_the_detector_pivots(decoder, m):
    target, draft = _pair()
    res = speculative_decode(target, draft, [1, 2], decoder, L=2, key=99, max_new_tokens=15,
                             context_length=m, seed=0)
    for t in range(2, res.tokens.shape[0]):
        u = keyed_uniforms(99, res.tokens[:t], [res.tokens[t]], m=m)[0, 0]
        assert res.pivots[t - 2] == u


def test_identical_draft_accepts_every_block():
    target, _ = _pair()
    for decoder in ("pfr", "mpfr", "vsps", "mws", "mse", "invariant", "specinfer"):
        B = 2 if decoder in MULTI_DRAFT_DECODERS else 1
        res = speculative_decode(target, target, [0], decoder, L=4, B=B, key=1,
                                 max_new_tokens=25, seed=3)
        np.testing.assert_array_equal(res.accepted, [5, 5, 5, 5, 5])


def test_last_block_is_truncated_without_bonus():
    target, _ = _pair()
    res = speculative_decode(target, target, [0], "pfr", L=4, key=1, max_new_tokens=7)
    np.testing.assert_array_equal(res.accepted, [5, 2])
    assert res.drafts[1].shape == (1, 2)


def test_mws_and_mpfr_b1_coincide_with_pfr():
    target, draft = _pair(eps=1.0)
    for key in range(20):
        pfr = speculative_decode(target, draft, [key % 50], "pfr", L=3, key=key,
                                 max_new_tokens=20)
        for decoder in ("mws", "mpfr"):
            other = speculative_decode(target, draft, [key % 50], decoder, L=3, key=key,
                                       max_new_tokens=20)
            np.testing.assert_array_equal(other.tokens, pfr.tokens)
            np.testing.assert_array_equal(other.accepted, pfr.accepted)


def test_different_seeds_give_different_unkeyed_outputs():
    target, draft = _pair()
    outs = {tuple(speculative_decode(target, draft, [0], "vsps", max_new_tokens=20,
                                     seed=s).tokens) for s in range(5)}
    assert len(outs) == 5


def test_zero_new_tokens_and_empty_prompt():
    target, draft = _pair()
    res = speculative_decode(target, draft, [], "pfr", key=0, max_new_tokens=0)
    assert res.tokens.size == 0 and res.accepted.size == 0 and np.isnan(res.aatps)
    res = speculative_decode(target, None, [], "basic_uwm", key=0, max_new_tokens=3)
    assert res.tokens.size == 3


# ------------------------------------------------------------------- exactness


def _first3_counts(decoder, target, draft, n_trials, *, L=2, B=2, base=0, m=None,
                   mask=False, prompt=(0,)):
    n = target.vocab_size
    B = B if decoder in MULTI_DRAFT_DECODERS else 1
    counts = np.zeros(n**3, dtype=np.int64)
    for i in range(n_trials):
        res = speculative_decode(target, draft, list(prompt), decoder, L=L, B=B,
                                 key=base + i, max_new_tokens=3,
                                 seed=np.random.SeedSequence([base, i]),
                                 context_length=m, mask_repeats=mask)
        a, b, c = res.generated
        counts[(a * n + b) * n + c] += 1
    return counts


@pytest.mark.parametrize("decoder", LOSSLESS)
def test_law_of_first_three_tokens_is_exact(decoder):
    # Keyed decoders: a fresh key per trial (the law is over keys).  Chi-square GOF with
    # pooling of expected counts < 5; alpha = 1e-4 per decoder, so the 11 cases fail by chance
    # with probability <= 1.1e-3.  (Power: the slow variant below catches a 1% bias.)
    target = MarkovLM.random(3, seed=21)
    draft = MarkovLM.random(3, seed=22, concentration=0.7)
    counts = _first3_counts(decoder, target, draft, 3000, base=1000)
    res = chisquare_gof(counts, target.sequence_law([0], 3).ravel(), min_expected=5.0)
    assert res.pvalue > 1e-4, res


@pytest.mark.slow
@pytest.mark.parametrize("decoder", LOSSLESS)
def test_law_of_first_three_tokens_is_exact_large(decoder):
    # vocabulary 6 (216 cells), B = 3, 60,000 sequences: a 1% total-variation bias on a few
    # cells of probability ~1% gives a chi-square noncentrality of several hundred.
    # alpha = 1e-4 per decoder (overall false-failure rate <= 1.1e-3).
    target = MarkovLM.random(6, seed=31)
    draft = MarkovLM.random(6, seed=32, concentration=0.7)
    counts = _first3_counts(decoder, target, draft, 60_000, B=3, base=5000)
    res = chisquare_gof(counts, target.sequence_law([0], 3).ravel(), min_expected=5.0)
    assert res.pvalue > 1e-4, res


def test_gof_detects_a_wrong_law():
    # the exactness test can fail: the draft's law is rejected
    target = MarkovLM.random(3, seed=21)
    draft = MarkovLM.random(3, seed=22, concentration=0.7)
    counts = _first3_counts("ar", draft, None, 3000, base=1000)
    assert chisquare_gof(counts, target.sequence_law([0], 3).ravel()).pvalue < 1e-6


def test_repeated_contexts_without_masking_are_biased_and_masking_fixes_it():
    # context_length = 1 on a Markov chain: without masking, a repeated window reuses the
    # keyed clocks and p, so "0 then 1" after prompt [0] is impossible; with masking the law is
    # exact (alpha = 1e-4).
    target = MarkovLM(np.array([[0.5, 0.5], [0.3, 0.7]]))
    unmasked = _first3_counts("basic_uwm", target, None, 400, m=1)
    law = target.sequence_law([0], 3).ravel()
    assert unmasked[[2, 3]].sum() == 0 and law[[2, 3]].sum() > 0.2
    masked = _first3_counts("basic_uwm", target, None, 3000, m=1, mask=True)
    assert chisquare_gof(masked, law).pvalue > 1e-4
    for decoder in ("pfr", "mpfr", "mse"):
        counts = _first3_counts(decoder, target, target, 2000, m=1, mask=True, base=7)
        assert chisquare_gof(counts, law).pvalue > 1e-4


# ------------------------------------------------------------------- AATPS vs theory


def test_mpfr_multiplicity_law_closed_forms():
    rng = np.random.default_rng(4)
    from specbound.theory.acceptance import exact_acceptance

    for _ in range(3):
        p, q = rng.dirichlet(np.ones(4)), rng.dirichlet(np.ones(4))
        J = mpfr_multiplicity_law(p, q, 2)
        np.testing.assert_allclose(J.sum(axis=1), p, atol=1e-7)
        assert 1 - J[:, 0].sum() == pytest.approx(exact_acceptance(p, q, "mpfr", 2), abs=1e-9)
    J = mpfr_multiplicity_law(p[:3] / p[:3].sum(), p[:3] / p[:3].sum(), 2)  # q = p: always a draft
    assert J[:, 0].sum() < 1e-7


def test_mpfr_multiplicity_law_matches_simulation():
    # 100,000 draws: every cell within 5 binomial standard errors (+1e-6 quadrature slack);
    # false-failure rate < 12 * 6e-7.
    rng = np.random.default_rng(8)
    p, q = rng.dirichlet(np.ones(4)), rng.dirichlet(np.ones(4))
    J = mpfr_multiplicity_law(p, q, 2)
    n = 100_000
    counts = np.zeros_like(J)
    out = np.empty(2, dtype=np.int64)
    for lab in rng.integers(0, 2**64, size=n, dtype=np.uint64):
        K.mpfr_topk(lab, q, 2, out)
        y = K.race_argmin(lab, p, 0)
        counts[y, int(np.sum(out == y))] += 1
    se = np.sqrt(J * (1 - J) / n)
    assert np.all(np.abs(counts / n - J) <= 5 * se + 1e-6)


@pytest.mark.parametrize(("decoder", "B"), [("vsps", 1), ("pfr", 1), ("mpfr", 2)])
def test_aatps_matches_theory(decoder, B):
    # 4,000 independent single blocks (fresh key and seed each); |mean - theory| <= 5 SE,
    # false-failure probability ~6e-7 per case.
    target = MarkovLM.random(3, seed=41)
    draft = MarkovLM.random(3, seed=42)
    L = 3
    theory = expected_block_tokens(target, draft, [1], decoder, L=L, B=B)
    acc = np.array([
        speculative_decode(target, draft, [1], decoder, L=L, B=B, key=10_000 + i,
                           max_new_tokens=L + 1, seed=np.random.SeedSequence([7, i])).accepted[0]
        for i in range(4000)
    ])
    se = acc.std(ddof=1) / np.sqrt(acc.size)
    assert abs(acc.mean() - theory) <= 5 * se, (acc.mean(), theory, se)


def test_expected_block_tokens_limits():
    target = MarkovLM.random(3, seed=41)
    for decoder, B in (("vsps", 1), ("pfr", 1), ("mpfr", 2)):
        assert expected_block_tokens(target, target, [0], decoder, L=3, B=B) == pytest.approx(4)
    # vsps >= pfr (maximal coupling) and mpfr(B=2) >= pfr
    draft = MarkovLM.random(3, seed=42)
    e = {d: expected_block_tokens(target, draft, [0], d, L=2, B=b)
         for d, b in (("vsps", 1), ("pfr", 1), ("mpfr", 2))}
    assert e["vsps"] >= e["pfr"] and e["mpfr"] >= e["pfr"]
    with pytest.raises(ValueError, match="decoder"):
        expected_block_tokens(target, draft, [0], "invariant", L=2, B=2)
    big = SyntheticLM(1000)
    with pytest.raises(ValueError, match="L"):
        expected_block_tokens(big, big, [0], "pfr", L=3)


# ------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"decoder": "greedy"}, "decoder"),
        ({"L": 0}, "L"),
        ({"L": 1.5}, "L"),
        ({"B": 0}, "B"),
        ({"B": 2, "decoder": "vsps"}, "B"),
        ({"B": 2, "decoder": "pfr"}, "B"),
        ({"prompt": [10]}, "prompt"),
        ({"prompt": [-1]}, "prompt"),
        ({"prompt": [[1, 2]]}, "prompt"),
        ({"prompt": [0.5]}, "prompt"),
        ({"key": None}, "key"),
        ({"key": 1.5}, "key"),
        ({"max_new_tokens": -1}, "max_new_tokens"),
        ({"context_length": -2}, "context_length"),
        ({"mask_repeats": "yes"}, "mask_repeats"),
        ({"seed": -1}, "seed"),
        ({"target": "gpt"}, "target"),
        ({"draft": None}, "draft"),
        ({"draft": SyntheticLM(11)}, "draft"),
    ],
)
def test_decode_validation(kwargs, match):
    args = {"target": SyntheticLM(10), "draft": SyntheticLM(10, seed=1), "prompt": [1],
            "decoder": "pfr", "key": 3}
    args.update(kwargs)
    target, draft, prompt, decoder = (args.pop(k) for k in ("target", "draft", "prompt",
                                                             "decoder"))
    with pytest.raises(ValueError, match=match):
        speculative_decode(target, draft, prompt, decoder, **args)


def test_unkeyed_decoders_need_no_key():
    target, draft = _pair()
    for decoder in set(DECODERS) - KEYED_DECODERS:
        speculative_decode(target, draft, [0], decoder, max_new_tokens=3)
