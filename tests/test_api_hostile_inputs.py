"""Hostile inputs: every public function answers with a ``ValueError`` (or a result), fast.

A table maps each public function to its arguments, each with a *kind* (a probability
vector, a count, a real parameter, a flag, ...).  The property test calls a function with
valid arguments except for one or more drawn from a pool of hostile values -- NaN, inf,
complex numbers, negative and huge sizes, integers that wrap in int64, strings, ``None``,
booleans where numbers are meant, wrong dtypes and shapes -- and asserts that the call either
returns or raises ``ValueError`` (the documented exception of every public function), and
that it returns within :data:`TIME_BOUND` seconds (large sizes must be refused up front, not
attempted).  Valid hostile-looking values (``B = 2**62`` for a closed form) may return.

Covered: every public function of :mod:`specbound.theory` (and ``theory.symbolic``), and the
public functions of ``sim.distributions``, ``sim.gof``, ``sim.logged``, ``sim.lossy`` and
``sim.tree``.  To extend it to the rest of :mod:`specbound.sim`, add rows to :data:`TABLE`
(function -> argument kinds, with ``KINDS`` holding one valid value and the hostile values of
each kind); :func:`test_table_covers_every_public_function` lists what is still missing.

The heavy property test is in the ``slow`` tier (run by ``make test-slow``); the fast tier
runs every row once with every hostile value of one argument kind per row
(:func:`test_each_row_with_its_own_hostile_values`), which is deterministic.
"""

from __future__ import annotations

import inspect
import math
import time
from dataclasses import dataclass, field

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import specbound.sim as sim
from specbound import theory
from specbound.sim import distributions, gof, logged, lossy, tree
from specbound.theory import symbolic

#: seconds a single call may take (generous: the CI machine is shared)
TIME_BOUND = 30.0

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
}


@dataclass
class Row:
    """One public function: positional argument kinds, keyword argument kinds, fixed kwargs."""

    fn: object
    args: list[str]
    kwargs: dict[str, str] = field(default_factory=dict)
    fixed: dict = field(default_factory=dict)


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
    "theory.mpfr_multiplicity_law": Row(theory.mpfr_multiplicity_law, ["p", "q", "nu"],
                                        {"normalize": "flag"}),
    "theory.expected_block_tokens": Row(theory.expected_block_tokens,
                                        ["p_fn", "q_fn", "prompt", "exact_scheme"],
                                        {"L": "L", "B": "int"}),
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

# logged: writer and reader, on a small log made once per session (see the fixture below)
LOG_ROWS = {
    "sim.LogWriter.append": ["prompt_id", "p_idx", "p_val", "q_idx", "q_val"],
    "sim.LogReader.dense": ["start", "stop", "tail"],
    "sim.LogReader.sparse": ["start", "stop"],
    "sim.LogReader.batches": ["batch_size", "dense", "tail"],
    "sim.LogReader": ["path", "validate"],
}
LOG_VALID = {"prompt_id": 0, "p_idx": [0, 1], "p_val": [0.6, 0.4], "q_idx": [1], "q_val": [1.0],
             "start": 0, "stop": 2, "tail": "other", "batch_size": 2, "dense": True,
             "validate": True}


def _call_with_bound(fn, *args, **kwargs):
    """Call ``fn``; return ``("ok", result)`` or ``("value_error", exc)``; any other exception
    propagates.  Fails when the call takes longer than :data:`TIME_BOUND` seconds."""
    t0 = time.perf_counter()
    try:
        out = ("ok", fn(*args, **kwargs))
    except ValueError as exc:
        out = ("value_error", exc)
    elapsed = time.perf_counter() - t0
    assert elapsed <= TIME_BOUND, f"{fn.__name__} took {elapsed:.1f} s"
    return out


def _check_result(name, status, value):
    """Promised ranges on results that did come back (no NaN where a number is promised)."""
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
    status, value = _call_with_bound(row.fn, *args, **kwargs)
    _check_result(name, status, value)
    if status == "value_error":  # the message names an argument first
        assert ":" in str(value), (name, str(value))


# ---------------------------------------------------------------------------------------------
# tests
# ---------------------------------------------------------------------------------------------
def _public_functions():
    names = {f"theory.{n}" for n in theory.__all__
             if inspect.isfunction(getattr(theory, n))}
    for mod, prefix in ((distributions, "sim."), (gof, "sim."), (lossy, "sim."),
                        (tree, "sim.")):
        names |= {f"{prefix}{n}" for n in mod.__all__ if inspect.isfunction(getattr(mod, n))}
    names |= {f"symbolic.{n}" for n in symbolic.__all__
              if inspect.isfunction(getattr(symbolic, n)) and n != "nonnegative_on_halfline"}
    return names


def test_table_covers_every_public_function():
    missing = _public_functions() - set(TABLE)
    assert not missing, f"add rows to TABLE for {sorted(missing)}"
    for name, row in TABLE.items():  # every row is callable with its valid values
        _run_row(name, row, {})


def _row_cases():
    for name, row in TABLE.items():
        slots = list(range(len(row.args))) + list(row.kwargs)
        for slot in slots:
            yield pytest.param(name, slot, id=f"{name}-{slot}")


@pytest.mark.parametrize(("name", "slot"), list(_row_cases()))
def test_each_row_with_its_own_hostile_values(name, slot):
    # deterministic fast-tier sweep: every argument of every row gets the whole fixed pool
    row = TABLE[name]
    if name.startswith("symbolic.") and slot not in (0,):
        pool = HOSTILE_SCALARS  # sympy rows: scalars only (arrays are not meaningful)
    else:
        pool = HOSTILE
    for bad in pool:
        _run_row(name, row, {slot: bad})


@pytest.mark.slow
@settings(max_examples=1500, deadline=None,
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
            return _call_with_bound(w.append, *(vals[k] for k in LOG_ROWS[name]))
    if name == "sim.LogReader":
        path = overrides.get("path", log_path)
        return _call_with_bound(sim.LogReader, path, validate=vals["validate"])
    reader = sim.LogReader(log_path)
    if name == "sim.LogReader.dense":
        return _call_with_bound(reader.dense, vals["start"], vals["stop"], vals["tail"])
    if name == "sim.LogReader.sparse":
        return _call_with_bound(reader.sparse, vals["start"], vals["stop"])
    return _call_with_bound(lambda: list(reader.batches(vals["batch_size"], vals["dense"],
                                                         vals["tail"])))


@pytest.mark.parametrize("name", list(LOG_ROWS))
def test_log_rows_with_hostile_values(name, log_path, tmp_path):
    for arg in LOG_ROWS[name]:
        pool = [v for v in HOSTILE if not (arg == "path" and isinstance(v, str | bytes))]
        for bad in pool:
            try:
                _log_call(name, log_path, tmp_path, {arg: bad})
            except (TypeError, OSError) as exc:  # a path argument: documented by pathlib
                assert arg == "path", (name, arg, bad, exc)
