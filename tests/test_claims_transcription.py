"""The appendix tables of Zhou et al. (2026), arXiv:2607.26627, as transcribed in
``paper_figs/claims/paper_numbers.csv`` (Tables 7–10): complete, with the column order and
the runs the printed numbers themselves imply, and consistent with the main text's Table 3
(Table 9 averaged over each rule's sweep).  Deterministic (the shipped file)."""

from __future__ import annotations

import math

import pytest

from paper_figs.claims.paper_numbers import load
from paper_figs.claims.zhou import BENCHMARKS, EAGLE_SWEEPS, PROBLEMS

#: per table: the methods and their sweeps (the EAGLE-3 tables have no CoS or AutoJudge)
SWEEPS = {**EAGLE_SWEEPS, "lenience": ("l0.2", "l0.4", "l0.6", "l0.8"),
          "cos": ("lam0.2", "lam0.4", "lam0.6", "lam0.8"),
          "autojudge": ("d0.2", "d0.4", "d0.6", "d0.8")}
METHODS = {7: ("minp", "speccascade", "eta", "typical", "lenience", "cos", "autojudge"),
           8: ("minp", "speccascade", "eta", "typical", "lenience", "cos", "autojudge"),
           9: ("minp", "speccascade", "eta", "typical", "lenience"),
           10: ("minp", "speccascade", "eta", "typical", "lenience")}


def _settings(table):
    base = "lossless" if table in (7, 8) else "eagle3"
    return [base] + [f"{m}.{p}" for m in METHODS[table] for p in SWEEPS[m]]


@pytest.mark.parametrize("table", [7, 8, 9, 10])
def test_every_cell_of_the_appendix_tables_is_transcribed_once(table):
    n = load()
    want = {f"zhou.t{table}.{s}.{b}.{m}" for s in _settings(table) for b, _ in BENCHMARKS
            for m in ("be", "ds", "acc")}
    assert set(n.keys(f"zhou.t{table}.")) == want


@pytest.mark.parametrize("table,runs", [(7, 3), (8, 1), (9, 1), (10, 1)])
def test_the_accuracies_fix_the_columns_and_the_runs(table, runs):
    """Each accuracy is a whole number of problems of its benchmark (App. C: 500 MATH, 378
    MBPP+, 220 INCLUDE, 200 BFCL) per run, averaged over ``runs`` runs: the column order and
    Table 7's three runs follow from the numbers; Table 7 needs all three (some of its
    cells are no whole number of problems of one run)."""
    n = load()
    whole_one_run = []
    for s in _settings(table):
        for b, _ in BENCHMARKS:
            a = n[f"zhou.t{table}.{s}.{b}.acc"].value
            k = a * PROBLEMS[b] * runs / 100
            assert abs(k - round(k)) <= 0.005 * PROBLEMS[b] * runs / 100 + 1e-9, (s, b, a)
            k1 = a * PROBLEMS[b] / 100
            whole_one_run.append(abs(k1 - round(k1)) <= 0.005 * PROBLEMS[b] / 100 + 1e-9)
    assert all(whole_one_run) == (runs == 1)


def test_table_3_is_table_9_averaged_over_each_sweep():
    """The main text's EAGLE-3 table (Table 3) against the appendix's first EAGLE-3 table:
    each truncation rule's BE and accuracy, averaged over its sweep, agree to the printed
    rounding (half a unit of two decimals, plus the mean of five rounded cells)."""
    n = load()
    for m, params in EAGLE_SWEEPS.items():
        for b, _ in BENCHMARKS:
            for metric in ("be", "acc"):
                mean = sum(n[f"zhou.t9.{m}.{p}.{b}.{metric}"].value for p in params) / 5
                assert math.isclose(mean, n[f"zhou.t3.{m}.{b}.{metric}"].value,
                                    abs_tol=0.0051), (m, b, metric, mean)


def test_table_7_carries_its_spreads_over_three_runs():
    n = load()
    c = n["zhou.t7.lossless.math.acc"]
    assert c.value == 76.47 and c.df == 2 and c.se == pytest.approx(1.53 / math.sqrt(3))
    c = n["zhou.t8.lossless.math.acc"]  # one run: the binomial spread over 500 problems
    assert c.df is None and c.se == pytest.approx(100 * math.sqrt(0.74 * 0.26 / 500), rel=1e-3)
