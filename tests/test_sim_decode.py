"""Tests of the sequence-level decoders (specbound.sim.decode); their step kernels are
tested against NumPy references in tests/test_sim_kernels.py."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from specbound.sim import _kernels as K
from specbound.sim.decode import (
    DECODER_SCHEME,
    DECODERS,
    KEYED_DECODERS,
    MULTI_DRAFT_DECODERS,
    DecodeBackend,
    DecodeResult,
    SyntheticBackend,
    WatermarkConfig,
    acceptance_compensator,
    expected_block_tokens,
    speculative_decode,
)
from specbound.sim.decoders import DECODER_SPECS
from specbound.sim.gof import chisquare_gof
from specbound.sim.models import MarkovLM, SyntheticLM
from specbound.sim.prf import key_id, keyed_uniforms
from specbound.theory.blocks import mpfr_multiplicity_law

LOSSLESS = DECODERS  # every decoder of the package is lossless
#: the decoders that draft (every block kind but the one-token step), in registry order
DRAFTING = [d for d in DECODERS if DECODER_SPECS[d].drafts]

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
    emitted = res.emitted_per_block
    assert emitted.sum() == 23 and np.all(emitted >= 1)
    assert np.all(emitted <= 4)
    assert res.aatps == pytest.approx(23 / emitted.size)
    assert res.pivots.shape == (23,)
    assert (res.decoder, res.L, res.B) == (decoder, 3, B)
    if decoder == "ar" or decoder == "basic_uwm":
        assert np.all(emitted == 1) and res.n_target_evals == 23
        assert res.n_draft_evals == 0 and res.drafts == ()
        assert res.nu.size == 0 and np.all(res.accepted_per_block == 0)
    else:
        assert res.n_target_evals == emitted.size
        assert len(res.drafts) == emitted.size
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
    np.testing.assert_array_equal(emitted, again.emitted_per_block)
    for f in ("nu", "decision_accepted", "decision_position", "accepted_per_block"):
        np.testing.assert_array_equal(getattr(res, f), getattr(again, f))


@pytest.mark.parametrize("decoder", sorted(KEYED_DECODERS))
@pytest.mark.parametrize("m", [None, 2])
def test_pivots_are_the_detector_pivots(decoder, m):
    target, draft = _pair()
    res = speculative_decode(target, draft, [1, 2], decoder, L=2, key=99, max_new_tokens=15,
                             window=m, seed=0)
    for t in range(2, res.tokens.shape[0]):
        u = keyed_uniforms(99, res.tokens[:t], [res.tokens[t]], window=m)[0, 0]
        assert res.pivots[t - 2] == u


def test_identical_draft_accepts_every_block():
    target, _ = _pair()
    for decoder in DRAFTING:
        B = 2 if decoder in MULTI_DRAFT_DECODERS else 1
        res = speculative_decode(target, target, [0], decoder, L=4, B=B, key=1,
                                 max_new_tokens=25, seed=3)
        np.testing.assert_array_equal(res.emitted_per_block, [5, 5, 5, 5, 5])
        np.testing.assert_array_equal(res.accepted_per_block, [4, 4, 4, 4, 4])
        # every decision accepts; the first of a block has all B drafts consistent
        assert res.decision_accepted.all() and res.nu.size == 20
        np.testing.assert_array_equal(res.nu[::4], np.full(5, B))
        assert np.all((res.nu >= 1) & (res.nu <= B))


def test_last_block_is_truncated_without_bonus():
    target, _ = _pair()
    res = speculative_decode(target, target, [0], "pfr", L=4, key=1, max_new_tokens=7)
    np.testing.assert_array_equal(res.emitted_per_block, [5, 2])
    np.testing.assert_array_equal(res.accepted_per_block, [4, 2])
    np.testing.assert_array_equal(res.decision_position, [0, 1, 2, 3, 5, 6])
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
            np.testing.assert_array_equal(other.emitted_per_block, pfr.emitted_per_block)


def test_different_seeds_give_different_unkeyed_outputs():
    target, draft = _pair()
    outs = {tuple(speculative_decode(target, draft, [0], "vsps", max_new_tokens=20,
                                     seed=s).tokens) for s in range(5)}
    assert len(outs) == 5


def test_zero_new_tokens_and_empty_prompt():
    target, draft = _pair()
    res = speculative_decode(target, draft, [], "pfr", key=0, max_new_tokens=0)
    assert res.tokens.size == 0 and res.emitted_per_block.size == 0 and np.isnan(res.aatps)
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
                                 window=m, repeats="mask" if mask else "reuse")
        a, b, c = res.generated
        counts[(a * n + b) * n + c] += 1
    return counts


@pytest.mark.parametrize("decoder", LOSSLESS)
def test_law_of_first_three_tokens_is_exact(decoder):
    # Keyed decoders: a fresh key per trial (the law is over keys).  Chi-square GOF with
    # pooling of expected counts < 5; alpha = 1e-4 per decoder, so the 13 cases fail by chance
    # with probability <= 1.3e-3.  (Power: the slow variant below catches a 1% bias.)
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
    # alpha = 1e-4 per decoder (overall false-failure rate <= 1.3e-3).
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
    # window = 1 on a Markov chain: without masking, a repeated window reuses the
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
                           max_new_tokens=L + 1,
                           seed=np.random.SeedSequence([7, i])).emitted_per_block[0]
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
        ({"window": -2}, "window"),
        ({"window": 1.5}, "window"),
        ({"B": 10**9, "decoder": "mpfr"}, "B"),
        ({"max_new_tokens": 10**12}, "max_new_tokens"),
        ({"max_blocks": 0}, "max_blocks"),
        ({"backend": object()}, "backend"),
        ({"repeats": "yes"}, "repeats"),
        ({"repeats": True}, "repeats"),
        ({"reweight": "beta"}, "reweight"),
        ({"reweight": "gamma", "decoder": "pfr"}, "reweight"),
        ({"reweight": "gamma", "decoder": "mpfr"}, "reweight"),
        ({"unkeyed": "none"}, "unkeyed"),
        ({"residual": "keyed", "decoder": "mse"}, "residual"),
        ({"residual": "maybe", "decoder": "mse_pseudo"}, "residual"),
        ({"unkeyed": "fresh", "decoder": "pfr"}, "unkeyed"),
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
    # an unkeyed decoder runs without a key, ignores one if given (same tokens, counts and
    # decisions), reports NaN pivots and no key fingerprint
    target, draft = _pair()
    for decoder in sorted(set(DECODERS) - KEYED_DECODERS):
        B = 2 if decoder in MULTI_DRAFT_DECODERS else 1
        res = speculative_decode(target, draft, [0], decoder, B=B, max_new_tokens=9, seed=4)
        keyed = speculative_decode(target, draft, [0], decoder, B=B, key="ignored",
                                   max_new_tokens=9, seed=4)
        assert res.generated.shape == (9,) and res.tokens[0] == 0
        assert res.emitted_per_block.sum() == 9
        assert np.all(np.isnan(res.pivots))
        assert res.watermark == WatermarkConfig(None, None, False)
        assert keyed.watermark.key_id is None
        np.testing.assert_array_equal(res.tokens, keyed.tokens)
        np.testing.assert_array_equal(res.emitted_per_block, keyed.emitted_per_block)
        np.testing.assert_array_equal(res.nu, keyed.nu)
        assert (res.n_target_contexts, res.n_draft_contexts) == (
            keyed.n_target_contexts, keyed.n_draft_contexts)


# ------------------------------------------------------------------- decisions and nu


def _reconstruct_decisions(result):
    """Reconstruct every block's decisions from tokens and drafts only (the cross-check of
    the nu the decoder records; the reconstruction the watermark studies used to run).

    Returns one ``(start, emitted, accepted, nus)`` per block.  A draft at block position
    ``s`` is accepted iff the emitted token equals the token of a draft consistent with the
    emitted prefix (a rejection always emits another token: the residual of Alg. 1 puts no
    mass on the rejected draft, and the PFR / MPFR / GLS / recursive-rejection correction is
    by construction not among the consistent drafts).  Raises ``RuntimeError`` when the
    result is inconsistent.
    """
    L = result.L
    gen = np.asarray(result.generated)
    N = gen.size
    out = []
    g0 = 0
    for b, k in enumerate(np.asarray(result.emitted_per_block)):
        k = int(k)
        ell = min(L, N - g0)
        drafts = np.asarray(result.drafts[b])
        if drafts.shape[1] != ell:
            raise RuntimeError(f"block {b}: drafts of length {drafts.shape[1]}, expected {ell}")
        emitted = gen[g0:g0 + k]
        n_dec = min(k, ell)
        nus = []
        acc = 0
        for s_ in range(n_dec):
            consistent = np.all(drafts[:, :s_] == emitted[:s_], axis=1)
            nus.append(int(consistent.sum()))
            if emitted[s_] in drafts[consistent, s_]:
                acc += 1
            else:
                break
        rejected = acc < n_dec
        ok = (acc == n_dec - 1 and k == n_dec) if rejected else (
            acc == ell and (k == ell + 1 or (k == ell and g0 + k == N)))
        if not ok or len(nus) != n_dec:
            raise RuntimeError(f"block {b}: inconsistent (emitted {k}, accepted {acc}, ell {ell})")
        out.append((g0, k, acc, nus))
        g0 += k
    return out


#: every drafting decoder (multi-draft ones with 3 drafts), and mpfr with one draft
SPECULATIVE = [(d, 3 if d in MULTI_DRAFT_DECODERS else 1) for d in DRAFTING] + [("mpfr", 1)]


@pytest.mark.parametrize(("decoder", "B"), SPECULATIVE)
def test_recorded_nu_matches_the_reconstruction(decoder, B):
    target, draft = _pair(n=12, eps=0.8)
    for seed in range(6):
        for m in (None, 1):
            r = speculative_decode(target, draft, [seed, 7], decoder, L=3, B=B, key=seed,
                                   max_new_tokens=30, seed=seed, window=m,
                                   repeats="mask" if m is not None else "reuse")
            dec = _reconstruct_decisions(r)
            assert len(dec) == r.emitted_per_block.size
            assert sum(k for _, k, _, _ in dec) == 30
            nus = [nu for *_, block_nus in dec for nu in block_nus]
            np.testing.assert_array_equal(r.nu, nus)
            np.testing.assert_array_equal(r.accepted_per_block, [a for _, _, a, _ in dec])
            pos = [g0 + i for g0, _, _, block_nus in dec for i in range(len(block_nus))]
            np.testing.assert_array_equal(r.decision_position, pos)
            ok = [i < a for _, _, a, block_nus in dec for i in range(len(block_nus))]
            np.testing.assert_array_equal(r.decision_accepted, ok)
            assert r.nu.dtype == np.int64 and r.decision_accepted.dtype == bool
            for _g0, _k, acc, block_nus in dec:
                assert 0 <= acc <= len(block_nus) <= 3
                assert block_nus[0] == B and all(1 <= nu <= B for nu in block_nus)
                assert all(x >= y for x, y in zip(block_nus, block_nus[1:], strict=False))
            # the block of every decision, and accepted = decisions accepted per block
            blk = r.block_of_decision()
            np.testing.assert_array_equal(
                np.bincount(blk, weights=r.decision_accepted, minlength=len(dec)),
                r.accepted_per_block)
            extra = r.emitted_per_block - r.accepted_per_block
            assert set(extra.tolist()) <= {0, 1} and np.all(extra[:-1] == 1)


def test_reconstruction_detects_inconsistency():
    target, draft = _pair()
    r = speculative_decode(target, draft, [1], "vsps", L=3, max_new_tokens=12, seed=0)
    fake = dataclasses.replace(r, emitted_per_block=r.emitted_per_block + 1)
    with pytest.raises(RuntimeError, match="block"):
        _reconstruct_decisions(fake)


def test_decoder_scheme_map():
    assert dict(DECODER_SCHEME) == {
        "vsps": "sd", "mse": "sd", "mse_pseudo": "sd", "pfr": "exp_race",
        "pfr_nowm": "exp_race", "mws": "exp_race", "mpfr": "mpfr", "invariant": "gls"}
    assert set(DECODER_SCHEME) <= set(DECODERS)
    with pytest.raises(TypeError):
        DECODER_SCHEME["ar"] = "sd"  # read-only


def test_removed_aliases_are_refused():
    """The pre-release aliases are gone: ``context_length=`` (now ``window``) and
    ``mask_repeats=`` (now ``repeats``) are unknown keywords, ``DecodeResult.accepted`` (now
    ``emitted_per_block``) and ``sim.decode.mpfr_multiplicity_law`` (now in
    ``theory.blocks``) are no attributes."""
    import specbound.sim.decode as decode_module

    target, draft = _pair()
    new = speculative_decode(target, draft, [1, 2], "pfr", key=3, max_new_tokens=10, window=1)
    with pytest.raises(TypeError, match="context_length"):
        speculative_decode(target, draft, [1, 2], "pfr", key=3, max_new_tokens=10,
                           context_length=1)
    with pytest.raises(TypeError, match="mask_repeats"):
        speculative_decode(target, draft, [1, 2], "pfr", key=3, max_new_tokens=10,
                           mask_repeats=True)
    with pytest.raises(AttributeError, match="accepted"):
        new.accepted  # noqa: B018
    assert new.emitted_per_block.sum() == 10
    with pytest.raises(AttributeError, match="mpfr_multiplicity_law"):
        decode_module.mpfr_multiplicity_law  # noqa: B018
    assert callable(mpfr_multiplicity_law)


def test_watermark_config_recorded():
    target, draft = _pair()
    r = speculative_decode(target, draft, [1], "mpfr", B=2, key="alice", max_new_tokens=5,
                           window=3, repeats="mask")
    assert r.watermark == WatermarkConfig(key_id("alice"), 3, True)
    assert r.watermark.key_id != key_id("bob") and len(r.watermark.key_id) == 8
    r = speculative_decode(target, None, [1], "basic_uwm", key="alice", max_new_tokens=5)
    assert r.watermark == WatermarkConfig(key_id("alice"), None, False)


def test_absurd_lookahead_is_bounded_work():
    # L = 10**9 allocates nothing of size L: a block is min(L, tokens left) long
    target, draft = _pair()
    for decoder, B in (("vsps", 1), ("mpfr", 2), ("specinfer", 2), ("invariant", 2)):
        r = speculative_decode(target, draft, [1], decoder, L=10**9, B=B, key=1,
                               max_new_tokens=6)
        assert r.generated.size == 6 and r.drafts[0].shape == (B, 6)


def test_masked_windows_of_short_contexts_are_whole():
    # Regression: with mask_repeats and a context shorter than the window, the window used
    # to be cut to its last (window - len) tokens, so a context such as [0, 0] (window 3)
    # was taken for a repeat of [0] and decoded with unkeyed clocks.  Now a position is
    # unkeyed iff its window (the detector's tokens[max(0, t - w):t]) occurred at an earlier
    # generated position: every other basic_uwm token is the keyed race winner.
    from specbound.sim import _kernels as kern
    from specbound.sim.prf import context_label

    target = MarkovLM(np.array([[0.5, 0.5], [0.3, 0.7]]))
    checked = 0
    for seed in range(40):
        for w in (3, 4):
            r = speculative_decode(target, None, [0], "basic_uwm", key=seed, max_new_tokens=8,
                                   seed=seed, window=w, repeats="mask")
            toks = r.tokens
            seen = set()
            for t in range(1, toks.size):
                win = tuple(toks[max(0, t - w):t].tolist())
                if win not in seen:
                    lab = context_label(seed, toks[:t], window=w)
                    p = target.next_distribution(toks[:t])
                    assert toks[t] == kern.race_argmin(lab, p, 0), (seed, w, t)
                    checked += 1
                seen.add(win)
    assert checked > 300


# ------------------------------------------------------------------- the backend seam


class _RecordingBackend(SyntheticBackend):
    """The synthetic backend, recording every call of the protocol."""

    def __init__(self, target, draft):
        super().__init__(target, draft)
        self.calls = []

    def reset(self, prompt):
        self.calls.append(("reset", tuple(int(t) for t in prompt)))
        super().reset(prompt)

    def draft_step(self, paths):
        self.calls.append(("draft", list(paths)))
        return super().draft_step(paths)

    def verify(self, paths):
        self.calls.append(("verify", list(paths)))
        return super().verify(paths)

    def commit(self, tokens):
        self.calls.append(("commit", [int(t) for t in tokens]))
        super().commit(tokens)


@pytest.mark.parametrize(("decoder", "B"),
                         [(d, 1) for d in DECODERS if d not in DRAFTING] + SPECULATIVE)
def test_backend_protocol_calls(decoder, B):
    target, draft = _pair(n=12, eps=0.8)
    ref = speculative_decode(target, draft, [3, 4], decoder, L=3, B=B, key="k",
                             max_new_tokens=17, seed=5)
    be = _RecordingBackend(target, draft)
    assert isinstance(be, DecodeBackend)
    r = speculative_decode(target, draft, [3, 4], decoder, L=3, B=B, key="k",
                           max_new_tokens=17, seed=5, backend=be)
    for f in ("tokens", "emitted_per_block", "accepted_per_block", "nu", "pivots"):
        np.testing.assert_array_equal(getattr(r, f), getattr(ref, f))
    assert be.calls[0] == ("reset", (3, 4))
    kinds = [c[0] for c in be.calls]
    # counts are the protocol calls: one target pass per block, one draft pass per depth
    assert kinds.count("verify") == r.n_target_evals == r.emitted_per_block.size
    assert kinds.count("draft") == r.n_draft_evals
    assert sum(len(c[1]) for c in be.calls if c[0] == "verify") == r.n_target_contexts
    assert sum(len(c[1]) for c in be.calls if c[0] == "draft") == r.n_draft_contexts
    # per block: drafts by depth, then ONE verify over every path prefix, then the commit
    committed = [3, 4]
    block = []
    for call in be.calls[1:]:
        block.append(call)
        if call[0] != "commit":
            continue
        drafts = [c[1] for c in block if c[0] == "draft"]
        verify = [c[1] for c in block if c[0] == "verify"]
        assert [c[0] for c in block] == ["draft"] * len(drafts) + ["verify", "commit"]
        for depth, paths in enumerate(drafts):
            assert all(len(p) == depth for p in paths) and len(set(paths)) == len(paths)
        (paths,) = verify
        assert len(set(paths)) == len(paths) and () in paths
        assert all(p[:i] in paths for p in paths for i in range(len(p)))  # prefix-closed
        if drafts:  # every draft path and all its prefixes are verified
            ell = len(drafts)
            rows = r.drafts[_block_index(r, committed)]
            leaves = {tuple(int(t) for t in row) for row in rows}
            assert all(len(x) == ell for x in leaves)
            assert {x[:i] for x in leaves for i in range(ell + 1)} == set(paths)
        committed += call[1]
        block = []
    np.testing.assert_array_equal(committed, r.tokens)


def _block_index(result, committed):
    """Index of the block that starts after ``committed`` tokens."""
    starts = result.prompt_length + np.concatenate([[0], np.cumsum(result.emitted_per_block)])
    return int(np.flatnonzero(starts == len(committed))[0])


def test_backend_rows_are_evaluated_lazily_along_the_realised_path():
    # the synthetic backend computes only the target rows the decision logic reads: one per
    # emitted token, although a verify pass covers the whole tree
    class Counting:
        def __init__(self, model):
            self.model, self.vocab_size, self.n = model, model.vocab_size, 0

        def next_distribution(self, ctx):
            self.n += 1
            return self.model.next_distribution(ctx)

    target, draft = _pair(n=12, eps=0.8)
    ct = Counting(target)
    r = speculative_decode(ct, draft, [1], "mpfr", L=4, B=4, key=2, max_new_tokens=40)
    assert ct.n == 40 < r.n_target_contexts


# ------------------------------------------------------------------- the compensator


def _compensator_by_reconstruction(results, target, draft):
    """The compensator computed from the reconstructed decisions (the former study code)."""
    from specbound.theory import exact_acceptance

    scheme = DECODER_SCHEME[results[0].decoder]
    rows, ctx_rows = [], []
    for i, res in enumerate(results):
        toks, n0 = np.asarray(res.tokens), res.prompt_length
        for b, (g0, k, acc, nus) in enumerate(_reconstruct_decisions(res)):
            r = len(rows)
            rows.append((i, b, k, acc, len(nus)))
            for s_, nu in enumerate(nus):
                ctx_rows.append((r, toks[:n0 + g0 + s_], nu))
    pred = np.zeros(len(rows))
    P = np.array([target.next_distribution(c) for _, c, _ in ctx_rows])
    Q = np.array([draft.next_distribution(c) for _, c, _ in ctx_rows])
    nus = np.array([nu for _, _, nu in ctx_rows])
    a = np.empty(len(ctx_rows))
    for nu in np.unique(nus):
        sel = nus == nu
        sch = scheme if nu > 1 or scheme in ("sd", "exp_race") else "exp_race"
        a[sel] = np.atleast_1d(exact_acceptance(P[sel], Q[sel], sch, int(nu)))
    for (r, _, _), val in zip(ctx_rows, a, strict=True):
        pred[r] += val
    return rows, pred


@pytest.mark.parametrize(("decoder", "B"), [("vsps", 1), ("pfr", 1), ("mse_pseudo", 1),
                                            ("mpfr", 3), ("invariant", 2)])
def test_compensator_from_recorded_nu_equals_the_reconstruction(decoder, B):
    target = MarkovLM.random(4, seed=1)
    draft = MarkovLM.random(4, seed=2)
    n = 3 if decoder == "invariant" else 8
    res = [speculative_decode(target, draft, [i % 4], decoder, L=3, B=B, key=i,
                              max_new_tokens=11, seed=i) for i in range(n)]
    df = acceptance_compensator(res, target, draft)
    rows, pred = _compensator_by_reconstruction(res, target, draft)
    assert list(df.columns) == ["prompt", "block", "emitted", "accepted", "n_decisions",
                                "predicted", "a_first"]
    assert [tuple(x) for x in df[["prompt", "block", "emitted", "accepted",
                                  "n_decisions"]].to_numpy()] == rows
    np.testing.assert_array_equal(df["predicted"].to_numpy(), pred)
    assert (df["predicted"] <= df["n_decisions"] + 1e-12).all() and (df["predicted"] >= 0).all()


def test_compensator_validation():
    target, draft = _pair()
    r = speculative_decode(target, draft, [1], "pfr", key=1, max_new_tokens=5)
    s = speculative_decode(target, draft, [1], "specinfer", B=2, max_new_tokens=5)
    v = speculative_decode(target, draft, [1], "vsps", max_new_tokens=5)
    with pytest.raises(ValueError, match="results"):
        acceptance_compensator([], target, draft)
    with pytest.raises(ValueError, match="results"):
        acceptance_compensator([r, v], target, draft)
    with pytest.raises(ValueError, match="results"):
        acceptance_compensator(s, target, draft)
    with pytest.raises(ValueError, match="results"):
        acceptance_compensator([r.tokens], target, draft)
    with pytest.raises(ValueError, match="draft"):
        acceptance_compensator(r, target, "q")
    assert len(acceptance_compensator(r, target, draft)) == r.emitted_per_block.size
    assert isinstance(r, DecodeResult)


class _PerDraftBackend(SyntheticBackend):
    """Drafts with laws of their own (backend protocol: ``per_draft_laws``): draft ``b``
    follows ``drafts[b]`` on its own path."""

    per_draft_laws = True

    def __init__(self, target, drafts):
        super().__init__(target, drafts[0])
        self.each = drafts
        self.each_calls = 0

    def draft_step_each(self, paths):
        self.each_calls += 1
        return np.array([self.each[b].next_distribution(
            np.array(self._committed + list(p), dtype=np.int64)) for b, p in enumerate(paths)])


@pytest.mark.slow
def test_drafts_of_different_laws_keep_the_target_law():
    """mpfr, invariant and specinfer B = 2 with draft b drawn from its own model (per-draft
    laws, not i.i.d.): the joint law of the first two emitted tokens is the target's (3,000
    runs each, L = 2 so that a decision, a correction and a bonus are all reached; three
    goodness-of-fit tests at false-failure probability 1e-4 together, Bonferroni), and the
    per-draft step is what the blocks called."""
    V = 6
    target = SyntheticLM(V, context_length=2, seed=3)
    drafts = [target.draft(0.5, seed=4), SyntheticLM(V, context_length=1, seed=5)]
    prompt = np.array([1, 2], dtype=np.int64)
    p1 = target.next_distribution(prompt)
    joint = np.concatenate([p1[a] * target.next_distribution(np.append(prompt, a))
                            for a in range(V)])
    n = 3000
    for decoder in ("mpfr", "invariant", "specinfer"):
        out = np.empty(n, dtype=np.int64)
        calls = 0
        for i in range(n):
            be = _PerDraftBackend(target, drafts)
            r = speculative_decode(target, drafts[0], prompt, decoder, L=2, B=2, key=i,
                                   seed=i, max_new_tokens=2, backend=be)
            out[i] = r.generated[0] * V + r.generated[1]
            calls += be.each_calls
        assert calls >= n  # every block drafted through draft_step_each
        res = chisquare_gof(np.bincount(out, minlength=V * V), joint)
        assert res.pvalue >= 1e-4 / 3, (decoder, res.pvalue)
