"""Smoke tests for the paper figure scripts (``paper_figs``), in quick mode.

The generic tests run every module that :func:`paper_figs.run_all.figure_modules` finds, so
a figure script added later is covered without touching this file.  The last tests check
the content of ``bounds_vs_drafts``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from paper_figs import bounds_vs_drafts
from paper_figs.run_all import figure_modules

REPO = Path(__file__).resolve().parents[1]
MODULES = figure_modules()
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["MPLBACKEND"] = "Agg"
    return env


def _check_outputs(written, out_dir: Path) -> None:
    paths = [Path(p) for p in written]
    assert paths, "main() must return the files it wrote"
    suffixes = {p.suffix.lower() for p in paths}
    assert ".png" in suffixes and ".csv" in suffixes, paths
    for path in paths:
        assert path.is_file() and path.stat().st_size > 0, path
        assert path.resolve().is_relative_to(out_dir.resolve()), path
        if path.suffix.lower() == ".png":
            assert path.read_bytes()[:8] == PNG_MAGIC, path
        if path.suffix.lower() == ".csv":
            df = pd.read_csv(path)
            assert len(df) > 0 and len(df.columns) > 0, path


def test_figure_modules_found():
    assert bounds_vs_drafts in MODULES


@pytest.mark.parametrize("mod", MODULES, ids=[m.__name__.rsplit(".", 1)[-1] for m in MODULES])
def test_figure_quick(mod, tmp_path):
    written = mod.main(tmp_path, quick=True)
    _check_outputs(written, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("mod", MODULES, ids=[m.__name__.rsplit(".", 1)[-1] for m in MODULES])
def test_figure_cli_quick(mod, tmp_path):
    # every figure script is also runnable as `python -m paper_figs.NAME --quick --out DIR`
    proc = subprocess.run(
        [sys.executable, "-m", mod.__name__, "--quick", "--out", str(tmp_path)],
        cwd=REPO,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    files = sorted(tmp_path.iterdir())
    _check_outputs([f for f in files if f.suffix.lower() in (".png", ".csv")], tmp_path)


# --- bounds_vs_drafts ----------------------------------------------------------------------


def test_bounds_vs_drafts_cli(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "paper_figs.bounds_vs_drafts", "--quick", "--out", str(tmp_path)],
        cwd=REPO,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    names = {f.name for f in tmp_path.iterdir()}
    assert {"bounds_vs_drafts.png", "bounds_vs_drafts.csv"} <= names


def test_bounds_vs_drafts_content(tmp_path):
    png, csv = bounds_vs_drafts.main(tmp_path, quick=True)
    assert png.name == "bounds_vs_drafts.png" and csv.name == "bounds_vs_drafts.csv"
    df = pd.read_csv(csv)
    required = [
        "pair",
        "tv",
        "B",
        "pml",
        "pml_weak",
        "lml",
        "lml_relaxed",
        "exact_mpfr",
        "exact_gls",
    ]
    assert set(required) <= set(df.columns)
    assert list(df["pair"].unique()) == ["near", "medium", "far"]
    assert len(df) == 3 * 16
    for label, nominal in bounds_vs_drafts.PAIRS:
        sub = df[df["pair"] == label].sort_values("B")
        assert sub["B"].tolist() == list(range(1, 17))
        assert sub["tv"].nunique() == 1
        assert sub["tv"].iloc[0] == pytest.approx(nominal, abs=1e-6)
        vals = sub[required[3:]].to_numpy()
        assert np.all((vals >= 0) & (vals <= 1))
        # orderings of docs/mathematics.md §2.1 and exactness of §2.2 (tolerance: float rounding)
        tol = 1e-12
        assert np.all(sub["pml"] >= sub["pml_weak"] - tol)
        assert np.all(sub["pml"] >= sub["lml"] - tol)
        assert np.all(sub["pml_weak"] >= sub["lml_relaxed"] - tol)
        assert np.all(sub["exact_gls"] >= sub["lml"] - 1e-8)  # GLS quadrature error <= 1e-8
        np.testing.assert_allclose(sub["exact_mpfr"], sub["pml"], rtol=0, atol=1e-12)
        first = sub.iloc[0]  # B = 1: PML = LML = exact GLS = exact MPFR
        assert first["pml"] == pytest.approx(first["lml"], abs=1e-12)
        assert first["exact_gls"] == pytest.approx(first["pml"], abs=1e-8)
        # strict for B > 1 because p != q
        assert np.all(sub["pml"].iloc[1:] > sub["lml"].iloc[1:])
        for col in required[3:]:
            assert np.all(np.diff(sub[col].to_numpy()) >= -1e-12), col  # non-decreasing in B
    # nearer pairs accept more at every B
    for col in ("pml", "exact_gls"):
        by_pair = df.pivot(index="B", columns="pair", values=col)
        assert np.all(by_pair["near"] > by_pair["medium"])
        assert np.all(by_pair["medium"] > by_pair["far"])


def test_bounds_vs_drafts_pair_construction():
    n = 50
    eps = np.random.default_rng(0).standard_normal(n)
    p, q, sigma = bounds_vs_drafts.make_pair(n, 0.3, eps)
    assert sigma > 0
    assert p[0] > p[1] > p[-1] > 0 and p.sum() == pytest.approx(1.0)
    assert q.sum() == pytest.approx(1.0) and np.all(q > 0)
    assert 0.5 * np.abs(p - q).sum() == pytest.approx(0.3, abs=1e-9)
    np.testing.assert_allclose(bounds_vs_drafts.logit_noise_draft(p, eps, 0.0), p, rtol=1e-12)


# --- the command line of every study (paper_figs._cli.cli) ---------------------------------

_HELP_SCRIPT = """
import contextlib, io, runpy, sys
for name in sys.argv[1:]:
    sys.argv = [name, "--help"]
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        try:
            runpy.run_module(name, run_name="__main__", alter_sys=True)
        except SystemExit:
            pass
    print("=====", name)
    print(buf.getvalue())
"""


@pytest.fixture(scope="module")
def help_texts(tmp_path_factory) -> dict:
    """``python -m paper_figs.NAME --help`` of every figure script (one interpreter)."""
    proc = subprocess.run(
        [sys.executable, "-c", _HELP_SCRIPT, *(m.__name__ for m in MODULES)],
        cwd=tmp_path_factory.mktemp("help"), env=_env(), capture_output=True, text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = {}
    for block in proc.stdout.split("===== ")[1:]:
        name, _, text = block.partition("\n")
        out[name] = text
    return out


@pytest.mark.parametrize("mod", MODULES, ids=[m.__name__.rsplit(".", 1)[-1] for m in MODULES])
def test_help_lists_every_parameter_with_its_defaults(mod, help_texts):
    import inspect

    from paper_figs._common import Param

    params = mod.PARAMS
    assert params and all(isinstance(p, Param) for p in params)
    sig = inspect.signature(mod.main).parameters
    assert "quick" in sig and any(p.kind is p.VAR_KEYWORD for p in sig.values())
    text = " ".join(help_texts[mod.__name__].split())  # argparse wraps long lines
    flat = "".join(text.split())
    assert f"python -m {mod.__name__}" in text
    for flag in ("--quick", "--out", "--executor"):
        assert flag in text
    for p in params:
        assert p.flag in text, p.flag
        shown = f"default: {p.show(p.full)}"
        if p.full != p.quick:
            shown += f"; with --quick: {p.show(p.quick)}"
        assert "".join(shown.split()) in flat, (p.flag, shown)


def test_params_are_converted_and_checked():
    from paper_figs._common import resolve_params

    v = resolve_params(bounds_vs_drafts.PARAMS, True, {"B": "1, 3,6", "vocab": "40"})
    assert v.B == (1, 3, 6) and v.vocab == 40 and v.zipf == bounds_vs_drafts.ZIPF_EXPONENT
    assert v.changed == {"B": [1, 3, 6], "vocab": 40}
    assert resolve_params(bounds_vs_drafts.PARAMS, True, {"vocab": 200}).changed == {}
    assert resolve_params(bounds_vs_drafts.PARAMS, False, {"vocab": 200}).changed == {
        "vocab": 200}
    for given, match in (({"B": "1,x"}, "^B: expected int"), ({"B": ""}, "^B: must be"),
                         ({"vocab": 1}, "^vocab: must be >= 2"), ({"vocab": 2.5}, "^vocab"),
                         ({"vocab": True}, "^vocab"), ({"bees": 3}, "^bees: not a parameter")):
        with pytest.raises(ValueError, match=match):
            resolve_params(bounds_vs_drafts.PARAMS, True, given)
    with pytest.raises(ValueError, match="^tv: the noisy drafts"):
        bounds_vs_drafts.compute(quick=True, tv=(0.999,), B=(1,))


def _dirs(monkeypatch, tmp_path):
    from paper_figs import _common

    dirs = {k: tmp_path / k for k in ("out", "out-quick", "out-custom")}
    monkeypatch.setattr(_common, "OUT_DIR", dirs["out"])
    monkeypatch.setattr(_common, "OUT_QUICK_DIR", dirs["out-quick"])
    monkeypatch.setattr(_common, "OUT_CUSTOM_DIR", dirs["out-custom"])
    return dirs


def test_cli_default_and_custom_runs_write_their_own_folders(monkeypatch, tmp_path, capsys):
    import json

    from paper_figs._cli import cli

    dirs = _dirs(monkeypatch, tmp_path)
    run = lambda argv: cli(bounds_vs_drafts.main, bounds_vs_drafts.__doc__,  # noqa: E731
                           bounds_vs_drafts.PARAMS, bounds_vs_drafts.NAME, argv)
    # quick with the defaults: out-quick/, params ""
    assert run(["--quick"]) == dirs["out-quick"]
    t = pd.read_csv(dirs["out-quick"] / "timings.csv", keep_default_na=False)
    assert t[["study", "quick", "params"]].values.tolist() == [["bounds_vs_drafts", True, ""]]
    ref = pd.read_csv(dirs["out-quick"] / "bounds_vs_drafts.csv")
    # other values: their own folder, named by a hash of the mode and the values
    out = run(["--quick", "--B", "2,5", "--tv", "0.2", "--vocab", "60"])
    assert out.parent == dirs["out-custom"] and out.name.startswith("bounds_vs_drafts-")
    assert run(["--quick", "--vocab", "60", "--tv", "0.2", "--B", "2,5"]) == out  # same values
    assert run(["--quick", "--B", "2,5", "--tv", "0.2", "--vocab", "61"]) != out
    df = pd.read_csv(out / "bounds_vs_drafts.csv")
    assert df["B"].tolist() == [2, 5] and set(df["n"]) == {60} and set(df["pair"]) == {"tv=0.2"}
    assert df["tv"].to_numpy() == pytest.approx(0.2, abs=1e-9)
    t = pd.read_csv(out / "timings.csv", keep_default_na=False)
    assert t["study"].tolist() == ["bounds_vs_drafts"] and bool(t["quick"].iloc[0])
    assert json.loads(t["params"].iloc[0]) == {"B": [2, 5], "tv": [0.2], "vocab": 60}
    # a custom run's numbers are those of the default run where they overlap
    dflt = bounds_vs_drafts.compute(quick=True)
    assert len(ref) == len(dflt)
    sub = dflt[(dflt["B"].isin([2, 5])) & (dflt["pair"] == "near")]
    again = bounds_vs_drafts.compute(quick=True, B=(2, 5), tv=(0.1,))
    np.testing.assert_array_equal(again["pml"].to_numpy(), sub["pml"].to_numpy())
    # --out wins; a bad value is a usage error naming the flag
    assert run(["--quick", "--B", "3", "--out", str(tmp_path / "mine")]) == tmp_path / "mine"
    with pytest.raises(SystemExit):
        run(["--quick", "--B", "0"])
    assert "B: must be >= 1" in capsys.readouterr().err
    assert not dirs["out"].exists()


def test_run_all_quick_writes_to_out_quick_with_the_mark(monkeypatch, tmp_path):
    import types

    from matplotlib.figure import Figure

    from paper_figs import run_all
    from paper_figs._common import SMOKE_TEXT, setup_matplotlib

    dirs = _dirs(monkeypatch, tmp_path)
    monkeypatch.setattr(run_all, "print_index", lambda out: {})
    seen = {}

    def main(out_dir, quick=False):
        plt = setup_matplotlib()
        fig, ax = plt.subplots()
        ax.plot([0, 1], [0, 1])
        png = Path(out_dir) / "fake.png"
        png.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(png)
        seen["texts"] = [t.get_text() for t in fig.texts]
        plt.close(fig)
        return [png]

    fake = types.SimpleNamespace(__name__="paper_figs.fake", main=main)
    assert run_all.main(["--quick"], modules=[fake]) == 0
    assert (dirs["out-quick"] / "fake.png").is_file() and seen["texts"] == [SMOKE_TEXT]
    t = pd.read_csv(dirs["out-quick"] / "timings.csv", keep_default_na=False)
    assert t[["study", "quick", "params"]].values.tolist() == [["fake", True, ""]]
    assert Figure.savefig.__name__ == "savefig" and Figure.savefig.__module__ == (
        "matplotlib.figure")  # the mark is removed after the run
    assert run_all.main([], modules=[fake]) == 0  # a full run: out/, no mark
    assert (dirs["out"] / "fake.png").is_file() and seen["texts"] == []


def test_record_timing_reads_a_file_without_the_params_column(tmp_path):
    from paper_figs._common import TIMING_COLUMNS, record_timing

    (tmp_path / "timings.csv").write_text(
        "study,seconds,quick,finished_utc\na,1.5,False,2026-12-01 00:00:00\n")
    record_timing(tmp_path, "b", 2.0, True, params='{"B": [1]}')
    t = pd.read_csv(tmp_path / "timings.csv", keep_default_na=False)
    assert list(t.columns) == TIMING_COLUMNS
    assert t[["study", "params"]].values.tolist() == [["a", ""], ["b", '{"B": [1]}']]


def test_paper_figs_imports_from_any_folder(tmp_path):
    """``paper_figs`` is installed with the package (``pip install -e .``): the package list
    of pyproject.toml holds it, and a process started outside the repository, without
    PYTHONPATH, imports it from the same tree as specbound (what a Dask scheduler or worker
    started anywhere needs).  The second part needs this tree to be the one installed in
    the environment (another checkout's install says nothing about this one)."""
    import tomllib

    from setuptools import find_packages

    cfg = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    include = cfg["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = find_packages(str(REPO), include=include)
    assert {"specbound", "paper_figs"} <= set(packages)
    assert not any(p.split(".")[0] in ("tests", "benchmarks", "scripts") for p in packages)

    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    where = "import pathlib, {0}; print(pathlib.Path({0}.__file__).resolve().parent.parent)"
    run = lambda mod: subprocess.run(  # noqa: E731
        [sys.executable, "-c", where.format(mod)], cwd=tmp_path, env=env, capture_output=True,
        text=True, timeout=120)
    pkg = run("specbound")
    if pkg.returncode != 0 or Path(pkg.stdout.strip()) != REPO.resolve():
        pytest.skip("specbound is not installed from this tree (pip install -e .)")
    figs = run("paper_figs")
    assert figs.returncode == 0, figs.stderr[-2000:]
    assert Path(figs.stdout.strip()) == REPO.resolve()


def test_readme_table_names_every_study_and_its_flags():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    rows = {line.split("|")[1].strip().strip("`"): line for line in text.splitlines()
            if line.startswith("| `")}
    for mod in MODULES:
        name = mod.__name__.rsplit(".", 1)[-1]
        assert name in rows, f"README's study table has no row for {name}"
        flags = rows[name].rstrip(" |").rsplit("|", 1)[-1].split()
        assert flags == [f"`{p.flag}`" for p in mod.PARAMS], name


def test_single_study_run_refreshes_an_existing_index(tmp_path):
    """A study run alone into a folder that holds an INDEX.md rewrites it, so the verdicts
    and the smoke-run banner follow the new outputs (a folder without one gets none)."""
    from paper_figs._cli import cli

    run = lambda out: cli(bounds_vs_drafts.main, bounds_vs_drafts.__doc__,  # noqa: E731
                          bounds_vs_drafts.PARAMS, bounds_vs_drafts.NAME,
                          ["--quick", "--B", "1,2", "--out", str(out)])
    bare = tmp_path / "bare"
    run(bare)
    assert not (bare / "INDEX.md").exists()
    out = tmp_path / "with-index"
    out.mkdir()
    (out / "INDEX.md").write_text("stale\n")
    run(out)
    text = (out / "INDEX.md").read_text()
    assert text != "stale\n" and "Smoke run" in text.splitlines()[0]
    assert "bounds_vs_drafts" in text
