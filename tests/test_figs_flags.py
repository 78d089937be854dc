"""Every study flag is checked as the command line is parsed (``paper_figs._common``).

:data:`INVALID` lists, for every flag of every figure script, values that must be refused
before the study starts: exit status 2 and one line ``python -m paper_figs.NAME: error:
--FLAG: ...`` on standard error (no traceback, no output files).  The same table drives the
coverage meta-test: a flag added to a study without rows here fails
:func:`test_every_study_flag_has_invalid_values`.

Values: not a number, not finite (``nan``, ``inf``), outside the documented range
(probabilities and TVs in [0, 1]), a duplicated grid value, a list that does not fit another
flag (lengths, subsets), and sizes whose arrays exceed the available memory (the memory is
set to 2 GiB here, so the rows do not depend on the machine).
"""

from __future__ import annotations

import re

import pytest

from paper_figs import _common
from paper_figs.run_all import figure_modules

MODULES = {m.__name__.rsplit(".", 1)[-1]: m for m in figure_modules()}
MEMORY = 2 * 2**30

_INT = ["x", "2.5", ""]
_POS = [*_INT, "0"]
_REAL = ["nan", "-inf", "1e999", "x"]
_INTS = ["1,x", "1,1", "0", ","]
_REALS = ["nan", "0.1,inf", "x", "0.5,0.5"]
_WM = {"--vocab": [*_INT, "1"], "--prompts": _POS, "--tokens": _POS, "--seeds": _POS}
_REAL_RUNS = {"--target": ["", "/does/not/exist", "not a model id!"],
              "--draft": ["bogus:1", "temperature:0", "early_exit:0", ""],
              "--prompts": _POS, "--tokens": _POS, "--prompt-tokens": _POS,
              "--summary-prompt-tokens": _POS}

#: study -> flag -> values (a string: that flag's value; a list: further argv after it)
INVALID = {
    "bounds_vs_drafts": {"--vocab": [*_INT, "1", "1000000000"], "--B": _INTS,
                         "--tv": [*_REALS, "5", "0", "1.5"], "--zipf": [*_REAL, "-1"]},
    "efficiency_frontier": {"--vocab": [*_INT, "1"], "--targets": _POS,
                            "--ell": [*_REALS, "0", "2", "-0.1"]},
    "fidelity_entropy": {"--vocab": [*_INT, "1"], "--prompts": _POS, "--tokens": _POS,
                         "--entropy": [*_REALS, "-1", "100"], "--B": _INTS, "--L": _INTS,
                         "--contexts": _POS, "--drift-entropy": [*_REALS, "0.123"],
                         "--drift-prompts": [*_INT, "1"], "--drift-T": [*_INTS, "10000"]},
    "fidelity_lossy": {"--vocab": [*_INT, "1"], "--contexts": _POS},
    "lemma1_study": {"--vocab": [*_INT, "1"], "--targets": _POS,
                     "--p-base": [*_REALS, "2", "-0.1"], "--eps": [*_REALS, "1.5", "-1"]},
    "lenience_study": {"--draws": _POS, "--directions": _POS,
                       "--ell": [*_REALS, "0", "1.01"]},
    "lossy_gallery": {"--draws": _POS, "--vocab": [*_INT, "1"],
                      "--tv": [*_REAL, "-0.1", "1.5"], "--seed": [*_INT, "-1"]},
    "prop1_study": {"--depth": [*_POS, "1000000"], "--vocab": [*_INT, "1"], "--D": _INTS,
                    "--tv": [*_REAL, "2", "-1"]},
    "real_bounds": {"--log": ["/does/not/exist"], "--B": _INTS, "--contexts": [*_INT, "-1"],
                    "--mc-contexts": [*_INT, "-1"], "--trials": _POS},
    "real_crosscheck": _REAL_RUNS,
    "real_ngram": _REAL_RUNS,
    "real_lossy": {"--log": ["/does/not/exist"], "--contexts": [*_INT, "-1"]},
    "real_watermarks": {**_REAL_RUNS, "--L": _INTS, "--B": _INTS, "--T": _INTS,
                        "--T-subst": _INTS},
    "real_wm_rouge": {**_REAL_RUNS, "--summaries": _POS, "--floor": [*_INT, "1"],
                      "--tau": [*_REALS, "0", "1e-4"]},
    "theorem1_study": {"--draws": _POS, "--vocab": [*_INT, "1"],
                       "--zipf": [*_REALS[:3], "-1", "1.1,1.2"],
                       "--tv": [*_REALS[:3], "2", "0.1,0.2", ["0.3,0.3", "--zipf", "1,1"]]},
    "wm_detection": {"--T": _INTS, **_WM, "--null-texts": _POS, "--null-keys": _POS,
                     "--acc-tokens": _POS, "--acc-noise": [*_REALS, "-1"], "--acc-T": _INTS},
    "wm_drafter_substitution": {"--T": _INTS, **_WM},
    "wm_multidraft_scaling": {"--B": _INTS, "--L": _POS, **_WM, "--theory-prompts": _POS},
    "wm_single_draft_frontier": {"--L": _INTS, **_WM, "--theory-prompts": _POS,
                                 "--hh-prompts": _POS},
}

ROWS = [(study, flag, value) for study, flags in INVALID.items()
        for flag, values in flags.items() for value in values]


def test_every_study_flag_has_invalid_values():
    """The meta-test: the table covers every flag of every figure script, and nothing else."""
    have = {(s, f) for s, flags in INVALID.items() for f in flags}
    want = {(name, p.flag) for name, mod in MODULES.items() for p in mod.PARAMS}
    assert want - have == set(), "flags without rows in INVALID"
    assert have - want == set(), "rows for flags that do not exist"


@pytest.fixture
def small_memory(monkeypatch):
    monkeypatch.setattr("specbound.cli.available_memory", lambda device=None: MEMORY)


def _never(*a, **k):
    raise AssertionError("the study started with an invalid flag")


@pytest.mark.parametrize(("study", "flag", "value"), ROWS,
                         ids=[f"{s} {f} {v!r}"[:70] for s, f, v in ROWS])
def test_invalid_study_flag_is_one_line_exit_2_before_the_study(study, flag, value, capsys,
                                                                 small_memory):
    mod = MODULES[study]
    argv = ["--quick", flag, *(value if isinstance(value, list) else [value])]
    with pytest.raises(SystemExit) as exc:
        _common.cli(_never, mod.__doc__, mod.PARAMS, study, argv)
    out, err = capsys.readouterr()
    assert exc.value.code == 2
    assert out == ""
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"python -m paper_figs.{study}: error: --"), err


def test_the_defaults_pass_every_check(small_memory):
    """Every study's full and quick defaults pass the checks (a 2 GiB machine included)."""
    for mod in MODULES.values():
        for quick in (False, True):
            _common.resolve_params(mod.PARAMS, quick, {})


def test_memory_refusal_names_the_flag_and_the_estimate(capsys, small_memory):
    mod = MODULES["prop1_study"]
    with pytest.raises(SystemExit):
        _common.cli(_never, mod.__doc__, mod.PARAMS, "prop1_study", ["--depth", "1000000"])
    err = capsys.readouterr().err
    assert err == ("python -m paper_figs.prop1_study: error: --depth: the study's arrays "
                   "would need about 8.9 GiB of memory, more than the 2.0 GiB available\n")


#: (study, flag, huge value): one run per study whose estimated arrays exceed the 2 GiB set
#: here, refused as the command line is parsed (the flag named is the one made large)
HUGE = [("bounds_vs_drafts", "--vocab", "1000000000"),
        ("lenience_study", "--draws", "10000000000"),
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
        ("wm_drafter_substitution", "--tokens", "100000000"),
        ("wm_multidraft_scaling", "--seeds", "100000000"),
        ("wm_single_draft_frontier", "--prompts", "100000000")]


@pytest.mark.parametrize(("study", "flag", "value"), HUGE)
def test_every_study_refuses_arrays_larger_than_the_memory(study, flag, value, capsys,
                                                           small_memory):
    mod = MODULES[study]
    with pytest.raises(SystemExit) as exc:
        _common.cli(_never, mod.__doc__, mod.PARAMS, study, ["--quick", flag, value])
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
        _common.cli(_never, mod.__doc__, mod.PARAMS, "bounds_vs_drafts",
                    ["--quick", "--executor", spec])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1, err
    assert err.startswith("python -m paper_figs.bounds_vs_drafts: error: --executor: "), err
