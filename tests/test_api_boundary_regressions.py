"""Regression tests for the exits the hostile-input table (tests/test_api_hostile_inputs.py)
found at the public boundary of :mod:`specbound.sim` (and two of :mod:`specbound.theory`).

Each test names what the call did before its fix: an exception other than ``ValueError``
(``OverflowError``, ``MemoryError``, ``TypeError``, a NumPy warning turned into an error), a
``ValueError`` that did not name the argument, a silently wrong or meaningless result, or a
run of tens of seconds to hours where the work is now refused up front.  Each refused call
must return at once: every test here runs in well under a second.
"""

from __future__ import annotations

import numpy as np
import pytest

import specbound.sim as sim
from specbound import theory
from specbound.sim import calibration, invariance

T = sim.SyntheticLM(5, 2, seed=0)
D = T.draft(0.3)


def _raises(arg, fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` raises a ValueError whose message starts with ``arg:``."""
    with pytest.raises(ValueError, match=rf"^{arg}: "):
        fn(*args, **kwargs)


# ------------------------------------------------------------------ Monte Carlo, keyed PRF
@pytest.mark.parametrize("fn", [sim.estimate_acceptance, sim.sample_emitted])
def test_monte_carlo_n_beyond_a_float_is_refused_naming_n(fn):
    # before: OverflowError ("integer division result too large for a float") in the message
    _raises("n", fn, [0.5, 0.5], [0.2, 0.8], "mpfr", 2, 10**400)


def test_keyed_uniforms_bounds_the_allocation_and_names_its_arguments():
    # before: MemoryError (21.8 TiB), NumPy's "Maximum allowed dimension exceeded" and
    # "truth value of an array is ambiguous" (backend=array), unnamed ragged-array errors
    _raises("arrivals", sim.keyed_uniforms, 7, [1, 2], [0, 1, 2], 10**12)
    _raises("arrivals", sim.keyed_uniforms, 7, [1, 2], [0, 1, 2], 2**63)
    _raises("backend", sim.keyed_uniforms, 7, [1, 2], [0, 1], backend=np.array([1.0, 2.0]))
    _raises("context", sim.keyed_uniforms, 7, [0.5, [0.5]], [0, 1])
    _raises("tokens", sim.keyed_uniforms, 7, [1], [0.5, [0.5]])


# ------------------------------------------------------------------ results and metrics
def test_estimate_from_successes_validates_counts():
    # before: ZeroDivisionError (n=0), TypeError ("0.5"), OverflowError (inf, 10**400), and
    # successes > n gave a "proportion" above 1 with a NaN standard error
    _raises("n", sim.Estimate.from_successes, 1, 0)
    _raises("successes", sim.Estimate.from_successes, "0.5", 10)
    _raises("successes", sim.Estimate.from_successes, float("inf"), 10)
    _raises("n", sim.Estimate.from_successes, 1, 10**400)
    _raises("successes", sim.Estimate.from_successes, 11, 10)
    assert sim.Estimate.from_successes(np.int64(5), 10) == sim.Estimate(0.5, 0.5 / 10**0.5, 10,
                                                                       5)


def test_estimate_from_samples_validates_values():
    # before: TypeError (complex), RuntimeWarning "Mean of empty slice" (empty), ComplexWarning
    _raises("x", sim.Estimate.from_samples, [1 + 1j, 2])
    _raises("x", sim.Estimate.from_samples, [])
    _raises("x", sim.Estimate.from_samples, np.array([1.0, 2.0], dtype=complex))
    _raises("x", sim.Estimate.from_samples, [float("inf"), 0.0])
    _raises("x", sim.Estimate.from_samples, [1e308, 1e308])


def test_mean_se_and_cluster_ratio_refuse_complex_non_finite_and_overflow():
    # before: ComplexWarning (imaginary part dropped), OverflowError (10**400), RuntimeWarning
    # from NumPy's std (inf, overflowing sums)
    _raises("x", sim.mean_se, np.array([1 + 0j, 2]))
    _raises("x", sim.mean_se, [10**400, 1])
    _raises("x", sim.mean_se, [float("inf"), 0.0, 0.0])
    _raises("x", sim.mean_se, [1e308, 1e308])
    _raises("num", sim.cluster_ratio_se, [1 + 1j, 2], [1, 1])
    _raises("den", sim.cluster_ratio_se, [1.0, 2.0], [float("inf"), 1.0])
    _raises("num", sim.cluster_ratio_se, [1e308, 1e308], [1.0, 1.0])
    # valid input: the same numbers as before
    assert sim.mean_se([1.0, 2.0, 4.0]).mean == 7 / 3
    assert sim.cluster_ratio_se([2.0, 4.0, 6.0], [1.0, 1.0, 1.0]).mean == 4.0


def test_rouge_l_and_lcs_take_integer_token_sequences_only():
    # before: rouge_l(None, None) returned 1.0 and rouge_l("abc", "abd") 0.0 (each string one
    # "token"), ragged lists gave NumPy's unnamed ValueError, and no size was refused
    _raises("a", sim.rouge_l, None, None)
    _raises("a", sim.rouge_l, "abc", "abd")
    _raises("a", sim.rouge_l, [0.5, 1.5], [1])
    _raises("b", sim.lcs_length, [1], [0.5, [0.5]])
    big = np.zeros(40_000, dtype=np.int64)
    _raises("b", sim.lcs_length, big, big)  # 1.6e9 cells: minutes of work, now refused
    assert sim.rouge_l([1, 2, 3], [1, 3]) == 2 * 2 / 5


# ------------------------------------------------------------------ models
def test_synthetic_lm_top_k_beyond_int64_is_refused():
    # before: OverflowError "Python int too large to convert to C long" from the int64 array
    _raises("top_k", sim.SyntheticLM, 5, top_k=1e308)
    _raises("top_k", sim.SyntheticLM, 5, top_k=2**64)
    _raises("top_k", T.draft, 0.3, top_k=2**64)
    _raises("top_k", sim.calibrated_lm, 1.0, 20, top_k=2**64, n_contexts=8)


def test_synthetic_lm_draft_validates_temperature_and_window_first():
    # before: without noise (mismatch 0) the arguments were compared with the target's
    # first: NumPy's unnamed "The truth value of an array ... is ambiguous"
    _raises("temperature", T.draft, 0.0, temperature=np.array([1.0, 2.0]))
    _raises("context_length", T.draft, 0.0, context_length=np.array([1, 2]))
    assert T.draft(0.3).next_distribution([1, 2]).tolist() == D.next_distribution([1, 2]).tolist()


@pytest.mark.parametrize("model", [T, sim.MarkovLM.random(4, seed=0), sim.CachedLM(T),
                                   sim.CalibratedLM(T, 1.5)])
def test_ragged_context_is_named(model):
    # before: NumPy's "setting an array element with a sequence" without the argument's name
    _raises("context", model.next_distribution, [0.5, [0.5]])


def test_markov_random_refuses_a_huge_vocabulary_up_front():
    # before: MemoryError (7.28 TiB) or NumPy's "array is too big"; float16(65504) asked for
    # a 32 GiB matrix
    _raises("vocab_size", sim.MarkovLM.random, 10**12)
    _raises("vocab_size", sim.MarkovLM.random, np.float16(65504))


def test_markov_sequence_law_with_a_huge_length_names_length():
    # before: OverflowError "int too large to convert to float"
    _raises("length", sim.MarkovLM.random(4, seed=0).sequence_law, [0], 10**400)


def test_random_prompts_vocabulary_beyond_int64_is_named():
    # before: NumPy's unnamed "high is out of bounds for int64"
    _raises("vocab_size", sim.random_prompts, 2, 3, 1e308)
    _raises("vocab_size", sim.random_prompts, 2, 3, 2**63)


def test_calibrated_lppl_refuses_long_work_up_front():
    # before: 65504 sequences (float16 max) ran for minutes silently
    cal = sim.CalibratedLM(T, 1.5)
    _raises("n_sequences", cal.lppl, np.float16(65504), 64)
    _raises("n_sequences", cal.lppl, 1000, 1000)
    assert calibration.MAX_LPPL_TOKENS >= 32 * 64  # the default is allowed


# ------------------------------------------------------------------ decoding
def test_windows_and_block_limits_beyond_int64_are_named():
    # before: OverflowError "int too big to convert" from the compiled decoder
    for bad in (2**63, 10**400, np.uint64(2**64 - 1)):
        _raises("window", sim.speculative_decode, T, D, [0], "mpfr", B=2, key=7, window=bad)
        _raises("max_blocks", sim.speculative_decode, T, D, [0], "mpfr", B=2, key=7,
                max_blocks=bad)
        _raises("window", sim.speculative_decode_batch, T, D, [[0], [1]], "mpfr", B=2, key=7,
                window=bad)
        _raises("window", sim.check_drafter_invariance, "mpfr", T, [D, T.draft(0.6)],
                n_trials=2, B=2, window=bad)


def test_ragged_prompt_is_named():
    # before: NumPy's unnamed "setting an array element with a sequence"
    _raises("prompt", sim.speculative_decode, T, D, [0.5, [0.5]], "mpfr", B=2, key=7)


def test_batch_seeds_are_validated():
    # before: TypeError "iteration over a 0-d array" and SeedSequence's TypeError
    _raises("seed", sim.speculative_decode_batch, T, D, [[0], [1]], "vsps",
            seed=np.array(0.5 + 1j))
    _raises(r"seed\[0\]", sim.speculative_decode_batch, T, D, [[0], [1]], "vsps",
            seed=[0.5 + 1j, 1])
    _raises(r"seed\[1\]", sim.speculative_decode_batch, T, D, [[0], [1]], "vsps",
            seed=[1, "a"])


def test_batch_names_the_bad_prompt_and_bounds_its_results():
    # before: a bad row was reported as "prompt", and 100,000 prompts of 100,000 new tokens
    # ran out of memory in the decoder (MemoryError after 16 s)
    _raises(r"prompts\[1\]", sim.speculative_decode_batch, T, D, [[0], [0, 9]], "vsps")
    _raises(r"prompts\[0\]", sim.speculative_decode_batch, T, D, [[0.5]], "vsps")
    huge = np.zeros((100_000, 1), dtype=np.int64)
    _raises("prompts and max_new_tokens", sim.speculative_decode_batch, T, D, huge, "vsps",
            max_new_tokens=100_000)
    _raises("prompts and max_new_tokens", sim.lossy_decode_batch, T, D, huge, "lenience",
            max_new_tokens=100_000, ell=0.5)


def test_batch_refuses_one_generator_for_two_rows():
    # before: accepted; the rows shared one stream, so neither ran as a single run with it
    g = np.random.default_rng(0)
    _raises(r"seed\[1\]", sim.speculative_decode_batch, T, D, [[0], [1]], "vsps",
            seed=[g, g])
    _raises(r"seed\[2\]", sim.lossy_decode_batch, T, D, [[0], [1], [2]], "lenience",
            seed=[g, np.random.default_rng(1), g], ell=0.5)
    a, b = np.random.default_rng(0).spawn(2)
    assert len(sim.speculative_decode_batch(T, D, [[0], [1]], "vsps", seed=[a, b],
                                            max_new_tokens=3).tokens) == 2


def test_drafter_invariance_refuses_long_searches_and_huge_prompts():
    # before: L = 65504 ran for minutes (max_new_tokens = L + 1 per decode), n_trials = 65504
    # with B = 2 for more than 15 s; prompt_length = 10**12 raised MemoryError
    drafters = [D, T.draft(0.6, seed=2)]
    _raises("n_trials", invariance.check_drafter_invariance, "mpfr", T, drafters,
            n_trials=65504, L=3, B=2)
    _raises("n_trials", invariance.check_drafter_invariance, "mpfr", T, drafters,
            n_trials=2, L=65504, B=2)
    _raises("prompt_length", invariance.check_drafter_invariance, "mpfr", T, drafters,
            n_trials=2, prompt_length=10**12)
    # the slow tier's 10,000-trial search (L = 4, B = 4) stays allowed
    assert 10_000 * 5 * 4 <= invariance.MAX_INVARIANCE_WORK


def test_acceptance_compensator_validates_blocks():
    # before: TypeError "argument of type 'float' is not iterable" and NumPy broadcasting
    # errors for blocks=nan / an array
    res = sim.speculative_decode(T, D, [0], "mpfr", L=3, B=2, key=7, max_new_tokens=6)
    for bad in (float("nan"), np.array([0.5, 0.5]), "ab", [(0, 0.5)], [(0,)]):
        _raises("blocks", sim.acceptance_compensator, [res], T, D, blocks=bad)
    every = sim.acceptance_compensator([res], T, D)
    some = sim.acceptance_compensator([res], T, D, blocks=[[0, 0]])  # lists of pairs too
    assert some["predicted"].tolist() == every["predicted"].tolist()[:1]


def test_synthetic_backend_validates_models_and_token_ids():
    # before: the constructor accepted anything; reset/commit/draft_step/verify raised
    # TypeError for None or numbers, and truncated 1.5 to token 1 silently
    _raises("target", sim.SyntheticBackend, "abc")
    be = sim.SyntheticBackend(T, D)
    _raises("prompt", be.reset, None)
    _raises("prompt", be.reset, [1.5])
    be.reset([0])
    _raises("tokens", be.commit, [5])  # outside the vocabulary
    _raises("paths", be.draft_step, float("nan"))
    _raises("paths", be.draft_step, [[0.5]])
    _raises("paths", be.verify, np.array(0.5 + 1j))
    assert np.array_equal(be.draft_step([[1]])[0], D.next_distribution([0, 1]))


# ------------------------------------------------------------------ detection
@pytest.mark.parametrize("fn", [sim.detect, sim.keyed_pivots, sim.acceptance_coins])
def test_detection_tokens_beyond_int64_are_named(fn):
    # before: RuntimeWarning "invalid value encountered in cast" (an error under pytest)
    _raises("tokens", fn, np.array([1e308, 1e308]), 0, 7)
    _raises("tokens", fn, np.array([2**64 - 1, 1], dtype=np.uint64), 0, 7)
    _raises("tokens", fn, [0.5, [0.5]], 0, 7)


def test_detect_many_ragged_prompt_length_is_named():
    _raises("prompt_length", sim.detect_many, [[0, 1, 2], [1, 2]], [0.5, [0.5]], 7)


# ------------------------------------------------------------------ theory: MPFR block laws
def test_exact_mpfr_laws_refuse_minutes_of_integration():
    # before the closed-form cone law: expected_block_tokens(vocabulary 5, L = 3, B = 2) took
    # 30-40 s on this machine (nested quadratures); now the limit is about a minute of the
    # O(n^3 nu) closed form: a whole depth-5 tree over 17 tokens with B = 4 (4e8 units) and a
    # law over 400 tokens for 2 drafts (6.4e7 units) are refused up front
    big = sim.SyntheticLM(17, 4, seed=0)
    _raises("B", sim.expected_block_tokens, big, big.draft(0.3), [0], "mpfr", L=5, B=4)
    _raises("nu", theory.mpfr_multiplicity_law, np.full(400, 0.0025), np.full(400, 0.0025), 2)
    # the sizes the project uses stay allowed, and the former limit's example is now quick
    assert theory.mpfr_multiplicity_law(np.full(4, 0.25), np.full(4, 0.25), 3).shape == (4, 4)
    assert 1.0 <= sim.expected_block_tokens(T, D, [0], "mpfr", L=3, B=2) <= 4.0

