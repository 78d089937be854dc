"""What a study run says about its stored results, ``--fresh``, and ``timings.csv`` keeping
the compute time of stored results (``paper_figs._common.study_run``,
``paper_figs._cli.cli``, ``paper_figs.run_all``).  A tiny study with one sweep (no kernels,
no model): deterministic, well under a second per test."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pandas as pd
import pytest

from paper_figs import _common, run_all
from paper_figs._cli import cli
from paper_figs._common import Param
from specbound.sweep import ResumableCSV, run_sweep

CALLS: list[int] = []


def _worker(x):
    CALLS.append(x)
    return [{"x": x, "x2": x * x}]


PARAMS = [Param("n", "int", 11, 4, "number of configurations", low=1)]


def _main(out_dir, quick=False, **params):
    v = _common.resolve_params(PARAMS, quick, params)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    run_sweep([(f"x={x}", x) for x in range(v.n)], _worker,
              ResumableCSV(out / "toy.csv", "v1"), progress=False, desc="toy")
    return [out / "toy.csv"]


def _run(argv):
    return cli(_main, "A toy study.\n", PARAMS, "toy", argv)


def _seconds(out):
    t = pd.read_csv(out / "timings.csv", keep_default_na=False)
    return dict(zip(t["study"], t["seconds"], strict=True))


def test_a_run_says_what_it_found_stored_and_keeps_the_compute_time(tmp_path, capsys,
                                                                    monkeypatch):
    out = tmp_path / "out"
    CALLS.clear()
    _run(["--out", str(out)])
    err = capsys.readouterr().err
    assert "[toy] 0 of 11 configurations stored, 11 to compute\n" in err
    assert len(CALLS) == 11
    first = (out / "toy.csv").read_bytes()
    # pretend the first run took 100 s: the measurement a resume must keep
    _common.record_timing(out, "toy", 100.0, False)
    CALLS.clear()
    _run(["--out", str(out)])
    err = capsys.readouterr().err
    assert "[toy] 11 of 11 configurations stored, 0 to compute; --fresh recomputes" in err
    assert "timings.csv keeps the stored results' compute time (100.0 s" in err
    assert CALLS == [] and _seconds(out) == {"toy": 100.0}
    # a resumed run (4 configurations lost) adds its own seconds to the recorded ones
    store = out / ".toy.csv.sweep" / "records"
    for rec in sorted(store.glob("*.json"))[-4:]:
        rec.unlink()
    CALLS.clear()
    _run(["--out", str(out)])
    err = capsys.readouterr().err
    assert "[toy] 7 of 11 configurations stored, 4 to compute; --fresh recomputes" in err
    assert len(CALLS) == 4
    assert 100.0 <= _seconds(out)["toy"] < 110.0 and "added to the stored results'" in err
    assert (out / "toy.csv").read_bytes() == first
    # --fresh: everything recomputed, the old records set aside, the time replaced
    CALLS.clear()
    _run(["--out", str(out), "--fresh"])
    err = capsys.readouterr().err
    assert "0 of 11 configurations stored, 11 to compute (--fresh: 11 stored" in err
    assert len(CALLS) == 11 and _seconds(out)["toy"] < 10.0
    assert (out / "toy.csv").read_bytes() == first
    assert list((out / ".toy.csv.sweep" / "aside").glob("fresh-*/*.json"))


def test_an_interrupted_run_records_its_time_for_the_resume(tmp_path, capsys, monkeypatch):
    out = tmp_path / "out"
    CALLS.clear()

    plain = _worker

    def stop_at_5(x):
        if x == 5:
            raise KeyboardInterrupt
        return plain(x)

    monkeypatch.setattr(sys.modules[__name__], "_worker", stop_at_5)
    with pytest.raises(KeyboardInterrupt):
        _run(["--out", str(out)])
    assert "interrupted" in capsys.readouterr().err
    before = _seconds(out)["toy"]
    monkeypatch.undo()
    _run(["--out", str(out)])
    assert "5 of 11 configurations stored, 6 to compute" in capsys.readouterr().err
    assert _seconds(out)["toy"] >= before


def test_a_custom_parameters_folder_gets_its_index(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(_common, "OUT_CUSTOM_DIR", tmp_path / "out-custom")
    out = _run(["--quick", "--n", "3"])
    assert out.parent == tmp_path / "out-custom" and (out / "INDEX.md").is_file()
    assert "INDEX.md written" in capsys.readouterr().err


def test_run_all_fresh_and_make_reproduce_fresh(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(run_all, "print_index", lambda out: {})
    fake = types.SimpleNamespace(__name__="paper_figs.toy", main=_main)
    out = tmp_path / "o"
    CALLS.clear()
    assert run_all.main(["--quick", "--out", str(out)], modules=[fake]) == 0
    assert run_all.main(["--quick", "--out", str(out)], modules=[fake]) == 0
    assert len(CALLS) == 4
    assert "4 of 4 configurations stored, 0 to compute; --fresh recomputes" in (
        capsys.readouterr().err)
    assert run_all.main(["--quick", "--out", str(out), "--fresh"], modules=[fake]) == 0
    assert len(CALLS) == 8
    make = (Path(run_all.__file__).parents[1] / "Makefile").read_text()
    assert "$(if $(FRESH),--fresh)" in make


def test_a_study_without_a_store_says_so(tmp_path, capsys):
    def plain(out_dir, quick=False):
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        return []

    cli(plain, "Plain.\n", (), "plain", ["--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert "[plain] no stored results" in err and "timing recorded" in err


def test_study_help_descriptions_are_whole_sentences():
    from paper_figs._common import build_parser, summary_of
    from paper_figs.run_all import figure_modules

    for mod in figure_modules():
        text = summary_of(mod.__doc__)
        assert text.endswith((".", "?", ")")), (mod.__name__, text[-40:])
        assert "\n" not in text and text.split()[0][0].isupper()
        helptext = " ".join(build_parser(text, mod.PARAMS).format_help().split())
        assert " ".join(text.split()) in helptext
