"""Drafter invariance: token-for-token (Prop. C.3) and the checkers of Defs. C.4-C.6."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specbound.sim.decode import speculative_decode
from specbound.sim.invariance import check_drafter_invariance
from specbound.sim.models import MarkovLM, SyntheticLM


def _synthetic_drafters(target):
    """Drafters in the spirit of the paper's D0-D3 (mismatch, another m, T = 0.5, 1.5)."""
    return [
        target.draft(0.5, seed=1),
        target.draft(1.0, seed=2, context_length=1),
        target.draft(0.5, seed=3, temperature=0.5),
        target.draft(0.5, seed=4, temperature=1.5),
        SyntheticLM(target.vocab_size, context_length=2, seed=777),  # unrelated model
    ]


@pytest.mark.parametrize("m", [None, 2])
def test_pfr_mpfr_mws_emit_the_basic_uwm_sequence_for_every_drafter(m):
    target = SyntheticLM(40, context_length=2, seed=3)
    drafters = _synthetic_drafters(target)
    rng = np.random.default_rng(0)
    for trial in range(12):
        key = int(rng.integers(0, 2**62))
        prompt = rng.integers(0, 40, size=3)
        ref = speculative_decode(target, None, prompt, "basic_uwm", key=key,
                                 max_new_tokens=25, window=m)
        for draft in drafters:
            for decoder, B, L in (("pfr", 1, 3), ("mws", 1, 2), ("mpfr", 2, 4), ("mpfr", 4, 3)):
                res = speculative_decode(target, draft, prompt, decoder, L=L, B=B, key=key,
                                         max_new_tokens=25, window=m, seed=trial)
                np.testing.assert_array_equal(res.tokens, ref.tokens)
                np.testing.assert_array_equal(res.pivots, ref.pivots)


def test_masked_repeats_keep_pfr_equal_to_basic_uwm():
    target = SyntheticLM(6, context_length=1, seed=5)  # tiny vocabulary: windows repeat
    for key in range(10):
        ref = speculative_decode(target, None, [0], "basic_uwm", key=key, max_new_tokens=30,
                                 window=1, repeats="mask", seed=key)
        for draft in _synthetic_drafters(target):
            for decoder, B in (("pfr", 1), ("mpfr", 3)):
                res = speculative_decode(target, draft, [0], decoder, B=B, key=key,
                                         max_new_tokens=30, window=1,
                                         repeats="mask", seed=key)
                np.testing.assert_array_equal(res.tokens, ref.tokens)


def test_pfr_nowm_is_drafter_invariant_given_the_seed():
    target = SyntheticLM(30, seed=2)
    drafters = _synthetic_drafters(target)
    for seed in range(5):
        outs = {tuple(speculative_decode(target, d, [1], "pfr_nowm", max_new_tokens=20,
                                         seed=seed).tokens) for d in drafters}
        assert len(outs) == 1


def _markov_setup(n=3):
    target = MarkovLM.random(n, seed=51)
    drafters = [MarkovLM.random(n, seed=s) for s in (52, 53, 54)] + [target]
    return target, drafters


def _reproduce(cex, decoder, target, drafters, L, B):
    outs = []
    for k in cex.drafters:
        res = speculative_decode(target, drafters[k], np.array(cex.prompt), decoder, L=L, B=B,
                                 key=cex.key, max_new_tokens=L + 1, seed=cex.seed,
                                 max_blocks=1)
        outs.append(tuple(int(t) for t in res.generated))
    return tuple(outs)


@pytest.mark.parametrize(("decoder", "B", "L"), [("vsps", 1, 3), ("invariant", 2, 2),
                                                 ("invariant", 3, 3), ("specinfer", 2, 2),
                                                 ("mse", 1, 2), ("mse_pseudo", 1, 2)])
def test_checker_finds_stopping_time_violations(decoder, B, L):
    target, drafters = _markov_setup()
    res = check_drafter_invariance(decoder, target, drafters, n_trials=400, seed=1, L=L, B=B)
    assert not res.stopping_time.holds and not res.strong.holds
    cex = res.stopping_time.counterexample
    assert cex.definition == "stopping_time"
    y1, y2 = cex.outputs
    assert len(y1) == len(y2) and y1 != y2
    assert _reproduce(cex, decoder, target, drafters, L, B) == cex.outputs
    assert res.stopping_time.n_violations <= res.stopping_time.n_comparisons <= 400


def test_checker_conditional_invariance_of_invariant_but_not_vsps():
    target, drafters = _markov_setup(n=3)
    gls = check_drafter_invariance("invariant", target, drafters, n_trials=800, seed=2, L=2,
                                   B=2)
    assert gls.conditional.holds and gls.conditional.n_comparisons >= 30
    for decoder in ("vsps", "mse"):
        res = check_drafter_invariance(decoder, target, drafters, n_trials=400, seed=2, L=2)
        assert not res.conditional.holds
        x1, x2 = res.conditional.counterexample.drafts
        assert x1 == x2
        y1, y2 = res.conditional.counterexample.outputs
        k = min(len(y1), len(y2))
        assert y1[:k] != y2[:k]


@pytest.mark.parametrize(("decoder", "B"), [("pfr", 1), ("mws", 1), ("pfr_nowm", 1),
                                            ("mpfr", 2), ("mpfr", 3), ("basic_uwm", 1)])
def test_checker_finds_no_violation_for_pfr_and_mpfr(decoder, B):
    target, drafters = _markov_setup()
    res = check_drafter_invariance(decoder, target, drafters, n_trials=500, seed=3, L=3, B=B)
    assert res.holds == {"strong": True, "conditional": True, "stopping_time": True}
    assert res.stopping_time.n_comparisons > 50
    assert res.strong.counterexample is None


@pytest.mark.slow
@pytest.mark.parametrize(("decoder", "B"), [("pfr", 1), ("mpfr", 2), ("mpfr", 4)])
def test_no_violation_in_ten_thousand_trials(decoder, B):
    target = SyntheticLM(8, context_length=2, seed=9)
    drafters = _synthetic_drafters(target) + [MarkovLM.random(8, seed=1)]
    res = check_drafter_invariance(decoder, target, drafters, n_trials=10_000, seed=4, L=4,
                                   B=B, window=2)
    assert res.holds == {"strong": True, "conditional": True, "stopping_time": True}
    assert res.n_trials == 10_000


@pytest.mark.slow
@pytest.mark.parametrize(("decoder", "B"), [("vsps", 1), ("invariant", 4)])
def test_violations_found_on_synthetic_models(decoder, B):
    target = SyntheticLM(8, context_length=2, seed=9)
    res = check_drafter_invariance(decoder, target, _synthetic_drafters(target),
                                   n_trials=2000, seed=5, L=4, B=B)
    assert not res.stopping_time.holds


def test_checker_window_keyword():
    target, drafters = _markov_setup()
    with pytest.raises(TypeError, match="context_length"):  # the removed pre-release alias
        check_drafter_invariance("pfr", target, drafters, n_trials=20, seed=1,
                                 context_length=1)
    with pytest.raises(ValueError, match="window"):
        check_drafter_invariance("pfr", target, drafters, window=-1)


def test_checker_validation():
    target, drafters = _markov_setup()
    with pytest.raises(ValueError, match="decoder"):
        check_drafter_invariance("nope", target, drafters)
    with pytest.raises(ValueError, match="drafters"):
        check_drafter_invariance("pfr", target, drafters[:1])
    with pytest.raises(ValueError, match="drafters"):
        check_drafter_invariance("pfr", target, [drafters[0], MarkovLM.random(4)])
    with pytest.raises(ValueError, match="drafters"):
        check_drafter_invariance("pfr", target, drafters[0])
    with pytest.raises(ValueError, match="n_trials"):
        check_drafter_invariance("pfr", target, drafters, n_trials=0)
    with pytest.raises(ValueError, match="B"):
        check_drafter_invariance("vsps", target, drafters, B=2)
    with pytest.raises(ValueError, match="prompt_length"):
        check_drafter_invariance("pfr", target, drafters, prompt_length=-1)
    with pytest.raises(ValueError, match="target"):
        check_drafter_invariance("pfr", None, drafters)


@settings(max_examples=40)
@given(key=st.integers(0, 2**62), prompt=st.lists(st.integers(0, 19), max_size=4),
       eps=st.floats(0.0, 3.0), temp=st.floats(0.3, 2.0), B=st.integers(1, 5),
       L=st.integers(1, 5), m=st.sampled_from([None, 1, 2]))
def test_property_keyed_tree_decoders_equal_basic_uwm(key, prompt, eps, temp, B, L, m):
    # Prop. C.3 / Alg. 10: for any drafter, pfr and mpfr emit the target-side keyed chain
    target = SyntheticLM(20, context_length=2, seed=1)
    draft = target.draft(eps, seed=key % 7, temperature=temp)
    ref = speculative_decode(target, None, prompt, "basic_uwm", key=key, max_new_tokens=12,
                             window=m)
    for decoder, b in (("pfr", 1), ("mpfr", B)):
        res = speculative_decode(target, draft, prompt, decoder, L=L, B=b, key=key,
                                 max_new_tokens=12, window=m)
        np.testing.assert_array_equal(res.tokens, ref.tokens)
