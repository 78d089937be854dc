"""Every study flag is checked as the command line is parsed (``paper_figs._common``).

:data:`INVALID` lists, for every flag of every figure script, values that must be refused
before the study starts: exit status 2 and one line ``python -m paper_figs.NAME: error:
--FLAG: ...`` on standard error (no traceback, no output files).  The same table drives the
coverage meta-test: a flag added to a study without rows here fails
:func:`test_every_study_flag_has_invalid_values`.

Values: not a number, not finite (``nan``, ``inf``), outside the documented range
(probabilities and TVs in [0, 1]), a duplicated grid value, a list that does not fit another
flag (lengths, subsets, a budget above the tokens it scores, more new tokens than the
target's context window), and sizes whose arrays exceed the available memory (the memory is
set to 2 GiB here and the target's config to the embedded model's, :data:`META`, so the rows
depend neither on the machine nor on whether the model was converted).
"""

from __future__ import annotations

import re

import pytest

from paper_figs import _common
from paper_figs._cli import cli
from paper_figs.run_all import figure_modules

MODULES = {m.__name__.rsplit(".", 1)[-1]: m for m in figure_modules()}
MEMORY = 2 * 2**30
#: what ``specbound.cli.target_metadata`` reads from the embedded model's config
#: (SmolLM2-135M-Instruct) once it is converted
META = {"source": "embedded", "layers": 30, "kv_heads": 3, "head_dim": 64, "vocab_size": 49152,
        "context_window": 8192, "parameters": 134_515_008, "dtype": "float32"}
#: the real-model studies that decode (their memory is the model's: weights, KV caches)
DECODING = ("real_crosscheck", "real_ngram", "real_watermarks", "real_wm_rouge")

_INT = ["x", "2.5", ""]
_POS = [*_INT, "0"]
_REAL = ["nan", "-inf", "1e999", "x"]
_INTS = ["1,x", "1,1", "0", ","]
_REALS = ["nan", "0.1,inf", "x", "0.5,0.5"]
_WM = {"--vocab": [*_INT, "1", "50001"], "--prompts": _POS, "--tokens": [*_POS, "100001"],
       "--seeds": _POS}
#: (new tokens + L + 1 reach the context window of 8192; a prompt limit beyond it)
_REAL_RUNS = {"--target": ["", "/does/not/exist", "not a model id!"],
              "--draft": ["bogus:1", "temperature:0", "early_exit:0", ""],
              "--prompts": [*_POS, "65"], "--tokens": [*_POS, "8190"],
              "--prompt-tokens": [*_POS, "9000"],
              # (a quick run reads ShareGPT alone: a summarisation limit has no effect)
              "--summary-prompt-tokens": [*_POS, "300"]}

#: study -> flag -> values (a string: that flag's value; a list: further argv after it)
INVALID = {
    # (--L 20 over the default 6 tokens and --vocab 1000 at the quick L = 4 enumerate more
    # than 1e6 draft paths for the exact value)
    "blockver_gain": {"--log": ["/does/not/exist", "", "/"], "--L": [*_INTS, "65", "20"],
                      "--vocab": [*_INT, "1", "1001", "1000"],
                      "--mismatch": [*_REALS, "-1", "101"], "--blocks": [*_INT, "1"],
                      "--real-L": [*_INTS, "6"], "--contexts": [*_INT, "-1"],
                      "--mc-contexts": [*_INT, "-1"]},
    "bounds_vs_drafts": {"--vocab": [*_INT, "1", "1000000000"], "--B": [*_INTS, "1025"],
                         # a TV the noisy drafts of the target cannot reach (at most
                         # 0.997 at the quick --vocab, 0.68 at --vocab 2; none for a steep Zipf law)
                         "--tv": [*_REALS, "5", "0", "1.5", "1", ["0.9", "--vocab", "2"]],
                         "--zipf": [*_REAL, "-1", "1e12", "1e300", "100"]},
    "efficiency_frontier": {"--vocab": [*_INT, "1"], "--targets": _POS,
                            "--ell": [*_REALS, "0", "2", "-0.1"]},
    "fidelity_entropy": {"--vocab": [*_INT, "1", "50001"], "--prompts": _POS,
                         "--tokens": _POS,
                         # entropies the calibrated LMs do not reach (0; below ~1.6e-11)
                         "--entropy": [*_REALS, "-1", "100", "0,0.47,2", "1e-300,0.47,2"],
                         "--B": [*_INTS, "1025"],
                         "--L": [*_INTS, "1025"], "--contexts": _POS,
                         "--drift-entropy": [*_REALS, "0.123"],
                         "--drift-prompts": [*_INT, "1"], "--drift-T": [*_INTS, "10000"]},
    "fidelity_lossy": {"--vocab": [*_INT, "1"], "--contexts": _POS},
    "lemma1_study": {"--vocab": [*_INT, "1"], "--targets": _POS,
                     "--p-base": [*_REALS, "2", "-0.1"],
                     # (an η-sampling ε is in the open interval (0, 1))
                     "--eps": [*_REALS, "1.5", "-1", "0", "1", "-0", "0.1,1"]},
    "lenience_study": {"--draws": _POS, "--directions": _POS,
                       "--ell": [*_REALS, "0", "1.01"]},
    "lossy_gallery": {"--draws": _POS, "--vocab": [*_INT, "1"],
                      "--tv": [*_REAL, "-0.1", "1.5", "1"], "--seed": [*_INT, "-1"]},
    "prop1_study": {"--depth": [*_POS, "1000000"], "--vocab": [*_INT, "1"],
                    "--D": [*_INTS, "1000000000"],
                    "--tv": [*_REAL, "2", "-1", "1"]},
    "real_bounds": {"--log": ["/does/not/exist", "", "/"], "--B": [*_INTS, "257"],
                    # more contexts than the shipped log's 569, Monte Carlo contexts
                    # beyond --contexts (12 in quick mode) or beyond the log
                    "--contexts": [*_INT, "-1", "570"],
                    "--mc-contexts": [*_INT, "-1", "13", ["6", "--contexts", "5"],
                                      ["570", "--contexts", "0"]],
                    "--trials": [*_POS, str(2**34 + 1)]},
    "real_crosscheck": _REAL_RUNS,
    "real_ngram": _REAL_RUNS,
    "real_lossy": {"--log": ["/does/not/exist", "", "/"], "--contexts": [*_INT, "-1", "570"]},
    "real_watermarks": {**_REAL_RUNS, "--L": [*_INTS, "1025"], "--B": [*_INTS, "257"],
                        "--T": [*_INTS, "7", ["64", "--tokens", "32"]],
                        "--T-subst": [*_INTS, "7"]},
    # (the quick run reads the summarisation set alone: its limit is the one that counts)
    # (its quick run reads the summarisation set alone: a --prompt-tokens has no effect)
    "real_wm_rouge": {**_REAL_RUNS, "--prompt-tokens": [*_POS, "100"],
                      "--summary-prompt-tokens": [*_POS, "9000"],
                      # (31 ShareGPT prompts ask for a summary)
                      "--summaries": [*_POS, "65", "32"], "--floor": [*_INT, "1", "1001"],
                      "--tau": [*_REALS, "0", "1e-4", "1", "0.5,2.5"]},
    "theorem1_study": {"--draws": _POS, "--vocab": [*_INT, "1"],
                       # (a TV the pair's noisy draft does not reach: none for a steep
                       # Zipf target, below 0.993 for the first default pair)
                       "--zipf": [*_REALS[:3], "-1", "1.1,1.2", "1e12,1.1,1.5"],
                       "--tv": [*_REALS[:3], "2", "0.1,0.2", ["0.3,0.3", "--zipf", "1,1"],
                                "1,0.5,0.7", "0.999999,0.5,0.7"]},
    "wm_detection": {"--T": [*_INTS, "13"], **_WM, "--null-texts": _POS, "--null-keys": _POS,
                     "--acc-tokens": [*_POS, "11", "1e999", "-3", "100001"],
                     "--acc-noise": [*_REALS, "-1"], "--acc-T": [*_INTS, "13"]},
    "wm_drafter_substitution": {"--T": [*_INTS, "13"], **_WM},
    "wm_multidraft_scaling": {"--B": [*_INTS, "1025"], "--L": [*_POS, "1025"], **_WM,
                              "--theory-prompts": [*_POS, "5", "nan", "-1"]},
    "wm_single_draft_frontier": {"--L": [*_INTS, "1025"], **_WM,
                                 "--theory-prompts": [*_POS, "5", "inf", "-1"],
                                 "--hh-prompts": [*_POS, "5", "nan", "-1"]},
}

ROWS = [(study, flag, value) for study, flags in INVALID.items()
        for flag, values in flags.items() for value in values]


def test_every_study_flag_has_invalid_values():
    """The meta-test: the table covers every flag of every figure script, and nothing else."""
    have = {(s, f) for s, flags in INVALID.items() for f in flags}
    want = {(name, p.flag) for name, mod in MODULES.items() for p in mod.PARAMS}
    assert want - have == set(), "flags without rows in INVALID"
    assert have - want == set(), "rows for flags that do not exist"


def _metadata(source):
    if source == "embedded":
        return dict(META)
    return {"source": source, "layers": None, "vocab_size": None, "context_window": None}


@pytest.fixture
def small_memory(monkeypatch):
    monkeypatch.setattr("specbound.cli.available_memory", lambda device=None: MEMORY)
    monkeypatch.setattr("specbound.cli.target_metadata", _metadata)


def _never(*a, **k):
    raise AssertionError("the study started with an invalid flag")


@pytest.mark.parametrize(("study", "flag", "value"), ROWS,
                         ids=[f"{s} {f} {v!r}"[:70] for s, f, v in ROWS])
def test_invalid_study_flag_is_one_line_exit_2_before_the_study(study, flag, value, capsys,
                                                                 small_memory):
    mod = MODULES[study]
    argv = ["--quick", flag, *(value if isinstance(value, list) else [value])]
    with pytest.raises(SystemExit) as exc:
        cli(_never, mod.__doc__, mod.PARAMS, study, argv)
    out, err = capsys.readouterr()
    assert exc.value.code == 2
    assert out == ""
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"python -m paper_figs.{study}: error: --"), err


def test_the_defaults_pass_every_check(small_memory, monkeypatch):
    """Every study's full and quick defaults pass the checks on a 2 GiB machine, except the
    full runs of the real-model decoding studies (the default pool's two processes, each
    with the model, its batched KV caches and prompt prefills at their measured peak:
    about 15.4 GiB estimated for the studies that decode ``mpfr`` B = 2 -- one process of a
    full ``make reproduce`` was measured at 8.2 GB -- and 9.1 GiB for ``real_wm_rouge``),
    which are refused there and pass on 16 GiB."""
    for name, mod in MODULES.items():
        for quick in (False, True):
            if name in DECODING and not quick:
                est = r"9\.1" if name == "real_wm_rouge" else r"15\.[34]"
                with pytest.raises(ValueError, match=r"^prompts: the study's arrays would "
                                                     rf"need about {est} GiB"):
                    _common.resolve_params(mod.PARAMS, quick, {})
                continue
            _common.resolve_params(mod.PARAMS, quick, {})
    monkeypatch.setattr("specbound.cli.available_memory", lambda device=None: 16 * 2**30)
    for name in DECODING:
        _common.resolve_params(MODULES[name].PARAMS, False, {})


def test_memory_refusal_names_the_flag_and_the_estimate(capsys, small_memory):
    mod = MODULES["prop1_study"]
    with pytest.raises(SystemExit):
        cli(_never, mod.__doc__, mod.PARAMS, "prop1_study", ["--depth", "1000000"])
    err = capsys.readouterr().err
    assert err == ("python -m paper_figs.prop1_study: error: --depth: the study's arrays "
                   "would need about 8.9 GiB of memory, more than the 2.0 GiB available\n")


#: (study, flag, huge value): one run per study whose estimated arrays exceed the 2 GiB set
#: here, refused as the command line is parsed (the flag named is the one made large)
HUGE = [("bounds_vs_drafts", "--vocab", "1000000000"),
        ("blockver_gain", "--blocks", "1000000000"),
        ("lenience_study", "--draws", "10000000000"),
        ("lenience_study", "--directions", "1000000000"),
        ("theorem1_study", "--draws", "1000000000"),
        ("lossy_gallery", "--draws", "1000000000"),
        ("lossy_gallery", "--vocab", "1000000"),
        ("lemma1_study", "--vocab", "100000000"),
        ("lemma1_study", "--targets", "100000000"),
        ("efficiency_frontier", "--targets", "100000000"),
        ("fidelity_lossy", "--vocab", "1000000"),
        ("fidelity_lossy", "--contexts", "10000000"),
        ("fidelity_entropy", "--contexts", "10000000"),
        ("fidelity_entropy", "--tokens", "100000000"),
        ("wm_detection", "--prompts", "100000000"),
        ("wm_detection", "--null-keys", "100000000"),
        ("wm_drafter_substitution", "--seeds", "100000000"),
        ("wm_multidraft_scaling", "--seeds", "100000000"),
        ("wm_single_draft_frontier", "--prompts", "100000000"),
        # the model's memory: a batch of 256 drafts, a lookahead of 1000 (their logits)
        ("real_watermarks", "--B", "256"),
        ("real_watermarks", "--L", "1000")]


@pytest.mark.parametrize(("study", "flag", "value"), HUGE)
def test_every_study_refuses_arrays_larger_than_the_memory(study, flag, value, capsys,
                                                           small_memory):
    mod = MODULES[study]
    with pytest.raises(SystemExit) as exc:
        cli(_never, mod.__doc__, mod.PARAMS, study, ["--quick", flag, value])
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert re.fullmatch(rf"python -m paper_figs\.{study}: error: {flag}: the study's arrays "
                        r"would need about \d+\.\d GiB of memory, more than the 2\.0 GiB "
                        r"available\n", err), err


def test_study_memory_estimates_add_up_and_name_the_largest(small_memory):
    """Two sizes made large together: the sum is checked, the larger one is named."""
    from paper_figs import lossy_gallery

    # 1.4 GiB of draws and 0.7 GiB of table rows: each fits 2 GiB, together they do not
    for one in ({"draws": 24_000_000}, {"vocab": 100_000}):
        _common.resolve_params(lossy_gallery.PARAMS, True, one)
    with pytest.raises(ValueError, match=r"^draws: the study's arrays would need about 2\.1"):
        _common.resolve_params(lossy_gallery.PARAMS, True,
                               {"draws": 24_000_000, "vocab": 100_000})


def test_duplicated_grid_values_are_refused_and_pairs_may_repeat_a_value():
    from paper_figs import theorem1_study

    with pytest.raises(ValueError, match=r"^B: 2 is given twice"):
        _common.resolve_params(MODULES["bounds_vs_drafts"].PARAMS, True, {"B": "2,2,4"})
    v = _common.resolve_params(theorem1_study.PARAMS, True,
                               {"zipf": "1.1,1.1", "tv": "0.2,0.4"})
    assert v.zipf == (1.1, 1.1) and v.tv == (0.2, 0.4)


@pytest.mark.parametrize("spec", ["bogus", "process:0", "process:x", "dask://nohost",
                                  "dask://127.0.0.1:0", "dask://127.0.0.1:9"])
def test_bad_executor_is_one_line(spec, capsys, monkeypatch):
    """A malformed spec, and a Dask scheduler that does not answer (a closed local port:
    refused at once), are one line at parse time."""
    pytest.importorskip("distributed")
    mod = MODULES["bounds_vs_drafts"]
    with pytest.raises(SystemExit) as exc:
        cli(_never, mod.__doc__, mod.PARAMS, "bounds_vs_drafts",
                    ["--quick", "--executor", spec])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1, err
    assert err.startswith("python -m paper_figs.bounds_vs_drafts: error: --executor: "), err


def test_real_decoding_memory_counts_what_a_draft_keeps(small_memory):
    """The estimate of a real-model run (``_real_runs.decoding_memory``) from the target's
    config alone: an ``early_exit:K`` draft keeps K layers of KV cache of its own, a
    temperature draft none (it shares the target's forwards), on the same batch; a quantized
    draft a second copy of the weights; each process of the pool holds its own model.  The
    batch's caches and logits count at their measured peak (``TREE_PEAK_FACTOR`` times, for
    B = 2)."""
    from dataclasses import replace

    from paper_figs import _real_runs as rr
    from specbound.cli import generate_memory

    s = replace(rr.QUICK, per_set=1)
    one = {d: rr.decoding_memory([(s, [rr.RunSpec("vsps", L=4, B=2, draft=d)])], META, 1)
           for d in ("temperature:1.5", "early_exit:10", "quantized:4")}
    per_position = 2 * META["kv_heads"] * META["head_dim"] * 4
    # the non-shared drafts get half the positions' budget: the same one prompt here
    rows, positions = 2, s.max_prompt_tokens + s.max_new_tokens + 4 + 1
    factor = rr.TREE_PEAK_FACTOR
    assert (one["early_exit:10"]["models"] - one["temperature:1.5"]["models"]
            == pytest.approx(factor * rows * positions * per_position * 10, abs=1))
    weights = generate_memory(META, 1, 1, 1, 1)["weights"]
    assert (one["quantized:4"]["models"] - one["temperature:1.5"]["models"]
            == pytest.approx(factor * rows * positions * per_position * META["layers"]
                             + weights, abs=1))
    two = rr.decoding_memory([(s, [rr.RunSpec("vsps", L=4, B=2)])], META, 2)
    assert two["models"] == 2 * one["temperature:1.5"]["models"]
    assert rr.decoding_memory([(s, [rr.RunSpec("vsps")])], {"layers": None}, 2) is None


def _fake_log(path, positions: int, max_stored: int = 256):
    """A log folder whose manifest and contexts say ``positions`` contexts (no arrays: the
    estimate reads nothing else)."""
    import json

    path.mkdir()
    (path / "manifest.json").write_text(json.dumps(
        {"meta": {"vocab_size": 49152, "drafts": ["temperature:0.5", "temperature:1.5"],
                  "max_stored": max_stored, "processing": {"top_k": None}}, "subdirs": []}))
    (path / "contexts.jsonl").write_text(
        "".join(json.dumps({"prompt_id": i, "positions": positions // 4}) + "\n"
                for i in range(4)))
    return path


def test_real_log_studies_refuse_a_log_too_large_and_contexts_choose(tmp_path, capsys,
                                                                      small_memory):
    """``real_lossy`` and ``real_bounds`` on a log of 10 million contexts: all of them
    (``--contexts 0``) would not fit 2 GiB (pairs of 513 columns, rows of every B), refused
    naming ``--contexts``; 1,000 evenly spaced ones fit."""
    log = str(_fake_log(tmp_path / "log", 10_000_000))
    for study, all_ in (("real_lossy", []), ("real_bounds", ["--contexts", "0"])):
        mod = MODULES[study]
        with pytest.raises(SystemExit) as exc:
            cli(_never, mod.__doc__, mod.PARAMS, study, ["--log", log, *all_])
        err = capsys.readouterr().err
        assert exc.value.code == 2
        assert re.fullmatch(rf"python -m paper_figs\.{study}: error: --contexts: the study's "
                            r"arrays would need about \d+\.\d GiB of memory, more than the "
                            r"2\.0 GiB available\n", err), err
        _common.resolve_params(mod.PARAMS, False, {"log": log, "contexts": 1000})


def test_an_executor_that_fails_to_open_is_one_line(capsys, monkeypatch):
    """A client that fails while the executor opens (e.g. an address that answers but is no
    Dask scheduler: the client reads garbage and raises) is one line naming --executor, and
    the study does not start."""
    import contextlib

    @contextlib.contextmanager
    def broken(spec):
        raise MemoryError("Unable to allocate 3.07 EiB")
        yield

    monkeypatch.setattr("specbound.sweep.open_executor", broken)
    mod = MODULES["bounds_vs_drafts"]
    with pytest.raises(SystemExit) as exc:
        cli(_never, mod.__doc__, mod.PARAMS, "bounds_vs_drafts",
                    ["--quick", "--executor", "process:1"])
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert err == ("python -m paper_figs.bounds_vs_drafts: error: --executor: cannot open "
                   "'process:1': MemoryError (Unable to allocate 3.07 EiB)\n")


def test_acceptance_sweep_tokens_count_in_the_memory(small_memory):
    """``wm_detection --acc-tokens`` (its acceptance sweep's own new tokens) is in the
    study's estimate: 100,000 of them for 1,000 prompts and 2 seeds are about 95 GiB."""
    params = MODULES["wm_detection"].PARAMS
    _common.resolve_params(params, True, {"acc_tokens": 100_000})
    with pytest.raises(ValueError, match=r"^acc_tokens: the study's arrays would need about "
                                         r"95\.\d GiB"):
        _common.resolve_params(params, True, {"acc_tokens": 100_000, "prompts": 1000})


def test_theory_prompts_default_is_cut_to_the_prompts_a_given_one_is_checked():
    """``--theory-prompts`` / ``--hh-prompts`` given above ``--prompts`` are refused (INVALID);
    their defaults (50 and 500 in full mode) are cut to a smaller ``--prompts``."""
    for name in ("wm_single_draft_frontier", "wm_multidraft_scaling"):
        params = MODULES[name].PARAMS
        _common.resolve_params(params, False, {"prompts": 24})
        with pytest.raises(ValueError, match=r"^theory_prompts: 30 exceeds --prompts 24$"):
            _common.resolve_params(params, False, {"prompts": 24, "theory_prompts": 30})


def test_a_prompt_set_that_gives_fewer_prompts_than_asked_is_said(capsys):
    """The real-model runs take the first ``--prompts`` (``--summaries``) prompts of each set
    that fit its prompt limit; a set with fewer is said on stderr, once per study, and
    ``real_wm_rouge`` records the numbers (``n_prompts`` against ``prompts_asked``) and says
    it under its table."""
    import pandas as pd

    from paper_figs import _real_runs as rr
    from paper_figs import real_wm_rouge as rw

    s = rr.settings(False, prompts=30)
    sets = ["humaneval"] * 30 + [rr.SUMMARIZE_SET] * 16 + ["sharegpt"] * 30
    df = pd.DataFrame({"prompt_set": sets, "prompt": range(76)})
    df = pd.concat([df, df])  # two configurations decode the same prompts
    assert rr.prompts_used(df, s) == {"humaneval": 30, "sharegpt": 30, rr.SUMMARIZE_SET: 16}
    for _ in range(2):
        rr.report_prompts("real_test (plain samples)", df, s)
    err = capsys.readouterr().err
    assert err == (f"[real_test] prompt set {rr.SUMMARIZE_SET}: 16 prompts used, not the 30 "
                   f"asked: only 16 of the prompts drawn fit its 640-token limit "
                   f"(--summary-prompt-tokens)\n")
    cells = pd.DataFrame({"row_type": "cell", "prompt_set": [rr.SUMMARIZE_SET, "humaneval"],
                          "n_prompts": [16, 30], "prompts_asked": [30, 30]})
    assert rw._shortfall_lines(cells) == [
        "", f"Prompt set {rr.SUMMARIZE_SET}: 16 prompts used, not the 30 asked (only 16 of "
            "the prompts drawn fit its prompt limit)."]
    assert rw._shortfall_lines(cells.assign(n_prompts=30)) == []


def test_real_decoding_memory_covers_the_measured_peaks():
    """The estimate of one worker (``per_process``) against the peaks measured on the
    embedded model (resident memory of the process): ``vsps`` and ``mpfr`` B = 2 on 64
    prompts (32 HumanEval + 32 ShareGPT at 160 tokens; benchmarks/README.md) held 4.54 and
    7.22 GB, ``vsps`` on the studies' 64 prompts 4.66 GB, and the largest process of a full
    ``make reproduce`` (the studies' ``mpfr`` B = 2 runs) 8.2 GB: each estimate is at least
    the peak and within 10 % above it."""
    from dataclasses import replace

    from paper_figs import _real_runs as rr

    bench = replace(rr.FULL, per_set=32, sets=("humaneval", "sharegpt"))
    for s, spec, peak in ((bench, rr.RunSpec("vsps"), 4.54e9),
                          (bench, rr.RunSpec("mpfr", B=2), 7.22e9),
                          (rr.FULL, rr.RunSpec("vsps"), 4.66e9),
                          (rr.FULL, rr.RunSpec("mpfr", B=2), 8.2e9)):
        est = rr.decoding_memory([(s, [spec])], META, 1)["per_process"]
        assert peak <= est <= 1.1 * peak, (spec, est, peak)
