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
