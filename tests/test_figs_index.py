"""Tests of the INDEX (``paper_figs.index`` and the engine ``paper_figs.claims.engine``).

The rule kinds are tested on fixed numbers at their thresholds (the equivalence rule is a
TOST with a margin, the range rule a range, the t reference wider than 3σ with few prompts);
the combination rules on verdict lists; the INDEX on fabricated and real quick outputs
(mode banner, non-default parameters, one line per paper, packages checks apart); the CLI
on any output folder (rc 0, "not run" where data are missing); the papers' own numbers on
fabricated and shipped transcriptions; and one producer-perturbation test that no paper
claim on ``bounds_vs_drafts`` compares a producer with itself.  Every input is fixed: no
test here is statistical.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from paper_figs import index as ix
from paper_figs.claims import engine as E
from paper_figs.claims import paper_numbers as PN
from paper_figs.claims.registry import BY_ID, CLAIMS

REPO = Path(__file__).resolve().parents[1]


def _env():
    env = dict(os.environ, MPLBACKEND="Agg")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.pop("SPECBOUND_EXECUTOR", None)
    return env


# --------------------------------------------------------------------------- rule kinds


def test_crit_normal_and_t_reference():
    assert E.crit() == 3.0 and E.crit(math.inf) == 3.0
    assert E.crit(5) > 5.0  # 6 prompts: the t quantile of the same 0.135% tail
    assert E.crit(5) > E.crit(50) > 3.0
    assert E.crit(0) == math.inf and E.crit(math.nan) == math.inf
    assert E.few(6) == 5 and E.few(1000) is None


def test_ordering_rule():
    assert E.ordering("", 0.31, 0.1).verdict == E.REPRODUCED
    assert E.ordering("", 0.29, 0.1).verdict == E.NOT_DISTINGUISHABLE
    assert E.ordering("", -0.31, 0.1).verdict == E.NOT_REPRODUCED
    # an exact tie refutes a strict ordering; an exact gain supports it
    assert E.ordering("", 0.0, 0.0).verdict == E.NOT_REPRODUCED
    assert E.ordering("", 1e-6, 0.0).verdict == E.REPRODUCED
    # the t reference with 6 prompts: z = 4 is not enough
    assert E.ordering("", 0.4, 0.1, df=5).verdict == E.NOT_DISTINGUISHABLE


def test_equivalence_rule_is_a_tost_with_a_margin():
    # |Δ| + 3 se < margin: equivalent
    assert E.equivalence("", 0.01, 0.01, 0.05).verdict == E.REPRODUCED
    # small |z| but the interval reaches past the margin: not an equality (was |z| <= 3)
    assert E.equivalence("", 0.01, 0.02, 0.05).verdict == E.NOT_DISTINGUISHABLE
    # significant beyond the margin: not reproduced
    assert E.equivalence("", 0.2, 0.01, 0.05).verdict == E.NOT_REPRODUCED
    # significant but inside the margin: still equivalent (|z| = 4 would have failed before)
    assert E.equivalence("", 0.02, 0.005, 0.05).verdict == E.REPRODUCED
    assert E.equivalence("", 0.0, 0.0, 0.05).verdict == E.REPRODUCED
    with pytest.raises(ValueError, match="margin"):
        E.equivalence("", 0.0, 0.1, 0.0)


def test_range_rule():
    assert E.in_range("", 0.17, 0.01, 0.12, 0.22).verdict == E.REPRODUCED
    assert E.in_range("", 0.13, 0.01, 0.12, 0.22).verdict == E.NOT_DISTINGUISHABLE
    assert E.in_range("", 0.05, 0.01, 0.12, 0.22).verdict == E.NOT_REPRODUCED
    assert E.in_range("", 0.30, 0.01, 0.12, 0.22).verdict == E.NOT_REPRODUCED
    with pytest.raises(ValueError, match="lo"):
        E.in_range("", 0.1, 0.01, 0.3, 0.2)


def test_at_least_exact_universal_and_sweep():
    assert E.at_least("", -0.001, 0.001, 0.02).verdict == E.REPRODUCED
    assert E.at_least("", -0.05, 0.001, 0.02).verdict == E.NOT_REPRODUCED
    assert E.at_least("", 0.0, 0.01, 0.02).verdict == E.NOT_DISTINGUISHABLE
    assert E.exact("", [0.0, 1.0]).verdict == E.REPRODUCED
    assert E.exact("", [0.0, -1e-6]).verdict == E.REFUTED
    assert E.universal("", [1.0, 1.0]).verdict == E.REPRODUCED
    assert E.universal("", [1.0, 0.9]).verdict == E.REFUTED
    assert E.sweep("", [0.0, 3.5]).verdict == E.REPRODUCED
    assert E.sweep("", [3.5, -3.5]).verdict == E.NOT_REPRODUCED
    assert E.sweep("", [0.0, 2.0]).verdict == E.NOT_DISTINGUISHABLE


def test_combine_rules():
    R, NR, ND, RF, NRUN = (E.REPRODUCED, E.NOT_REPRODUCED, E.NOT_DISTINGUISHABLE, E.REFUTED,
                           E.NOT_RUN)
    assert E.combine([R, R]) == R
    assert E.combine([R, ND]) == ND
    assert E.combine([ND, NR]) == NR
    assert E.combine([NR, RF]) == RF
    assert E.combine([]) == NRUN and E.combine([NRUN, R]) == R
    # columns: evidence against wins, else one reproducing column suffices
    assert E.combine_columns([R, ND]) == R
    assert E.combine_columns([R, NR]) == NR
    assert E.combine_columns([ND, NRUN]) == ND
    assert E.combine_columns([NRUN, NRUN]) == NRUN
    # parts that are identities of the code are shown, never counted
    o = E.outcome([E.Part("a", R, ""), E.Part("b", NR, "", None, False)])
    assert o.verdict == R and len(o.parts) == 2
    with pytest.raises(E.MissingData):
        E.outcome([E.Part("b", NR, "", None, False)])


# ------------------------------------------------------------------------------- INDEX


def test_missing_outputs_are_not_run(tmp_path):
    rows = E.evaluate(tmp_path)
    assert len(rows) == len(CLAIMS)
    assert all(r.verdict == (E.NOT_TESTABLE if r.claim.untestable else E.NOT_RUN)
               for r in rows)
    counts = E.summary(rows)
    assert counts[E.NOT_RUN] == sum(c.kind == E.PAPER and not c.untestable for c in CLAIMS)
    assert counts[E.NOT_TESTABLE] == sum(c.kind == E.PAPER and bool(c.untestable)
                                         for c in CLAIMS)


def test_registry_is_well_formed_and_listed_as_json():
    ids = [c.id for c in CLAIMS]
    assert len(ids) == len(set(ids))
    for c in CLAIMS:
        assert c.kind in E.KINDS and c.paper in E.PAPERS
        assert c.statement and c.rule and c.location
        # a claim rests on studies, unless no experiment of ours can test it (then it says why)
        assert bool(c.studies) != bool(c.untestable), c.id
        assert any(f is not None for f in (c.synthetic, c.real, c.paper_data)), c.id
    proc = subprocess.run([sys.executable, "-m", "paper_figs.index", "--list", "--json"],
                          cwd=REPO, env=_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    reg = json.loads(proc.stdout)
    assert [r["id"] for r in reg] == ids
    for r in reg:
        assert {"id", "paper", "location", "kind", "statement", "rule", "flip_test"} <= set(r)
        assert r["kind"] in ("paper", "check")
        assert r["flip_test"].startswith("tests/")


def test_cli_on_a_partial_output_folder(tmp_path):
    """Any output folder gives an INDEX: rows a partial real output lacks are "not run"
    (this used to crash with an exception class the caller did not catch)."""
    pd.DataFrame({"row_type": ["summary"], "decoder": ["pfr"], "rouge_l_minpair": [1.0],
                  "rouge_l_minpair_se": [0.0], "tpr_drift_T4": [0.0]}).to_csv(
        tmp_path / "real_wm_substitution.csv", index=False)
    pd.DataFrame({"decoder": ["pfr"], "T_eval": [4], "tpr": [1.0], "n_sequences": [6],
                  "fpr": [0.01]}).to_csv(tmp_path / "real_wm_detection.csv", index=False)
    proc = subprocess.run([sys.executable, "-m", "paper_figs.index", "--out", str(tmp_path)],
                          cwd=REPO, env=_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    # the command says what it is doing before the wait (never a silent 15 s)
    assert f"[index] writing {tmp_path / ix.INDEX}" in proc.stderr
    text = (tmp_path / ix.INDEX).read_text()
    assert "not run" in text and "no rows for summary of vsps" in text


def _timings(path, quick, params=None):
    rows = [{"study": "bounds_vs_drafts", "seconds": 1.5, "quick": quick,
             "finished_utc": "2026-12-02 08:00:00"}]
    df = pd.DataFrame(rows)
    if params is not None:
        df["params"] = [params]
    df.to_csv(path / ix.TIMINGS, index=False)


def test_index_opens_with_the_banner_and_one_line_per_paper(tmp_path):
    from paper_figs import bounds_vs_drafts

    bounds_vs_drafts.main(tmp_path, quick=True)
    _timings(tmp_path, True)  # no params column: treated as default parameters
    path, counts = ix.write_index(tmp_path)
    lines = path.read_text().splitlines()
    assert lines[0].startswith("> **Smoke run, not a reproduction**")
    head = "\n".join(lines[:12])
    assert "**Liu et al. 2026**: " in head and "**Zhou et al. 2026**: " in head
    assert "**package checks** (not counted as paper claims)" in head
    assert "**real-model sample**" in head
    assert sum(counts.values()) == sum(c.kind == E.PAPER for c in CLAIMS)
    assert "non-default study parameters" not in path.read_text()
    # the exact claims on the real quick study
    rows = {r.claim.id: r for r in E.evaluate(tmp_path)}
    assert rows["liu_pml_ge_lml"].columns[E.SYNTHETIC].verdict == E.PROVED
    assert rows["liu_eq4"].columns[E.SYNTHETIC].verdict == E.REPRODUCED
    assert "worst-case" in rows["liu_eq4"].columns[E.SYNTHETIC].reading
    # a full run: no banner; non-default parameters marked on the rows of that study
    _timings(tmp_path, False, '{"n": 50}')
    text = ix.write_index(tmp_path)[0].read_text()
    assert not text.startswith("> **Smoke run")
    assert 'non-default study parameters**: bounds_vs_drafts {"n": 50}' in text


def test_package_checks_are_never_counted(tmp_path):
    rows = E.evaluate(tmp_path)
    n_checks = sum(c.kind == E.CHECK for c in CLAIMS)
    assert n_checks >= 3
    assert sum(E.summary(rows, E.CHECK).values()) == n_checks
    assert sum(E.summary(rows).values()) == len(CLAIMS) - n_checks
    text = E.render(rows, tmp_path)
    checks = text.split("## Package checks")[1]
    assert all(c.id.replace("_", "-") in checks for c in CLAIMS if c.kind == E.CHECK)


# -------------------------------------------------------------- the papers' own numbers


def test_paper_numbers_loader():
    nums = PN.PaperNumbers(pd.DataFrame(
        {"key": ["a", "b", "c"], "value": ["1.250", "2.5", "0.400"], "sd": ["0.100", "", "0.000"],
         "n": ["1000", "", "3"], "table": ["T"] * 3, "cell": ["x", "y", "z"]}))
    a, b, c = nums["a"], nums["b"], nums["c"]
    assert a.value == 1.25 and a.se == pytest.approx(0.1 / math.sqrt(1000)) and a.df is None
    assert b.se == 0.05 and b.df is None  # no spread: half a unit of the last digit
    assert c.se == pytest.approx(0.0005 / math.sqrt(3)) and c.df == 2  # few seeds: t
    with pytest.raises(E.MissingData):
        nums["d"]
    with pytest.raises(ValueError, match="columns"):
        PN.PaperNumbers(pd.DataFrame({"key": ["a"]}))


def test_paper_column_flips_on_fabricated_transcriptions(tmp_path):
    """The same rule on the paper's numbers: PFR ≈ VSpS holds on a transcription where the
    two are within the margin, and fails where one side is 10% lower."""
    def numbers(pfr):
        cells = []
        for L in (1, 2, 3, 4):
            cells += [(f"liu.t2.L{L}.pfr.aatps", pfr, "0.070"),
                      (f"liu.t2.L{L}.vsps.aatps", "2.000", "0.070")]
        return PN.PaperNumbers(pd.DataFrame(
            [{"key": k, "value": v, "sd": sd, "n": "1000", "table": "T", "cell": k}
             for k, v, sd in cells]))

    claim = BY_ID["liu_pfr_vs_vsps"]
    (ok,) = E.evaluate(tmp_path, [claim], numbers("2.001"))
    (bad,) = E.evaluate(tmp_path, [claim], numbers("1.800"))
    assert ok.columns[E.PAPER_DATA].verdict == E.REPRODUCED
    assert bad.columns[E.PAPER_DATA].verdict == E.NOT_REPRODUCED
    assert ok.verdict == bad.verdict == E.NOT_RUN  # the paper's data never enter our verdict


def test_shipped_transcription_verdicts(tmp_path):
    """Every number a claim needs is transcribed, and the paper's own tables give the
    verdicts docs/fidelity.md reports."""
    rows = {r.claim.id: r.columns[E.PAPER_DATA] for r in E.evaluate(tmp_path)}
    for c in CLAIMS:
        if c.paper_data is not None:
            assert rows[c.id].verdict != E.NOT_RUN, (c.id, rows[c.id].numbers)
    assert rows["liu_mpfr_anlppt"].verdict == E.REPRODUCED
    assert rows["liu_mpfr_anlppt_li_pl"].verdict == E.REPRODUCED
    # Table 2: MSE's AATPS above PFR's at every L, so PFR does not dominate MSE
    assert rows["liu_pfr_dominates"].verdict == E.NOT_REPRODUCED
    # Tables 7, 11-13: ΔLPPL of 0.017-0.05 nats, outside the stated ±0.013
    assert rows["liu_lppl_mpfr"].verdict == E.NOT_REPRODUCED
    # Tables 7, 10-13 and Table 1: deviations beyond 2% in Table 7
    assert rows["liu_mpfr_vs_invariant"].verdict == E.NOT_REPRODUCED


def test_no_paper_claim_compares_a_producer_with_itself(tmp_path, monkeypatch):
    """Perturb one producer at its definition and rerun ``bounds_vs_drafts``: every paper
    claim on that study must move (a claim comparing the producer's output with itself, as
    "MPFR attains PML" did, would not)."""
    from paper_figs import bounds_vs_drafts
    from specbound.theory import acceptance

    def verdict(folder, cid):
        (row,) = E.evaluate(folder, [BY_ID[cid]])
        return row.columns[E.SYNTHETIC].verdict

    base = tmp_path / "base"
    bounds_vs_drafts.main(base, quick=True)
    assert {cid: verdict(base, cid) for cid in ("liu_pml_ge_lml", "liu_mpfr_ge_gls",
                                                 "liu_eq4")} == \
        {"liu_pml_ge_lml": E.PROVED, "liu_mpfr_ge_gls": E.REPRODUCED,
         "liu_eq4": E.REPRODUCED}
    real_exact, real_pml = acceptance.exact_acceptance, acceptance.pml_bound
    cases = {
        "liu_pml_ge_lml": ("pml_bound", lambda p, q, B, **k: 0.5 * real_pml(p, q, B, **k)),
        "liu_mpfr_ge_gls": ("exact_acceptance", lambda p, q, s, B=1, **k:
                            real_exact(p, q, s, B, **k) + (0.3 if s == "gls" else 0.0)),
        "liu_eq4": ("exact_acceptance", lambda p, q, s, B=1, **k:
                    real_exact(p, q, s, B, **k) - (0.5 if s == "mpfr" else 0.0)),
    }
    for cid, (name, fake) in cases.items():
        folder = tmp_path / cid
        with monkeypatch.context() as m:
            m.setattr(bounds_vs_drafts, name, fake)
            bounds_vs_drafts.main(folder, quick=True)
        assert verdict(folder, cid) != verdict(base, cid), cid


# ------------------------------------------------------------------------------ run_all


def test_run_all_records_timings_and_prints_the_summary(tmp_path, capsys):
    from paper_figs import run_all

    def main(out_dir, quick=False):
        path = tmp_path / "fake.csv"
        pd.DataFrame({"x": [1]}).to_csv(path, index=False)
        return [path]

    mod = types.ModuleType("paper_figs.bounds_vs_drafts_fake")
    mod.main = main
    assert run_all.main(["--out", str(tmp_path), "--quick"], modules=[mod]) == 0
    t = pd.read_csv(tmp_path / ix.TIMINGS)
    assert list(t["study"]) == ["bounds_vs_drafts_fake"] and bool(t["quick"].iloc[0])
    assert run_all.main(["--out", str(tmp_path)], modules=[mod]) == 0  # replaces the row
    t = pd.read_csv(tmp_path / ix.TIMINGS)
    assert len(t) == 1 and not bool(t["quick"].iloc[0])
    out = capsys.readouterr().out
    assert "verdicts of" in out and ix.NOT_RUN in out
    assert (tmp_path / ix.INDEX).is_file()


def test_run_all_shares_one_pool_in_full_mode(tmp_path, monkeypatch):
    """A full run without --executor gives every study one 2-process pool (the same workers
    for all studies); quick runs and 1-core machines stay serial; a given executor wins."""
    from paper_figs import run_all
    from specbound import sweep

    assert run_all.default_executor_spec("dask://h:1", False) == "dask://h:1"
    assert run_all.default_executor_spec(None, True) is None
    monkeypatch.setattr(run_all.os, "cpu_count", lambda: 1)
    assert run_all.default_executor_spec(None, False) is None
    monkeypatch.setattr(run_all.os, "cpu_count", lambda: 2)
    assert run_all.default_executor_spec(None, False) == "process:2"
    seen = []

    def main(out_dir, quick=False):
        ex = sweep.current_executor(None)
        seen.append(ex)
        assert ex.submit(os.getpid).result() != os.getpid()  # runs in a worker process
        return []

    mods = []
    for name in ("a", "b"):
        mod = types.ModuleType(f"paper_figs.pool_fake_{name}")
        mod.main = main
        mods.append(mod)
    assert run_all.main(["--out", str(tmp_path)], modules=mods) == 0
    assert len(seen) == 2 and seen[0] is seen[1] and seen[0] is not None
    quick_seen = []
    q = types.ModuleType("paper_figs.pool_fake_quick")
    q.main = lambda out_dir, quick=False: quick_seen.append(sweep.current_executor("none")) or []
    assert run_all.main(["--out", str(tmp_path), "--quick"], modules=[q]) == 0
    assert quick_seen == ["none"]  # no executor set: each study's own (serial in quick mode)


def test_index_shows_runtime(tmp_path):
    from paper_figs._common import record_timing

    record_timing(tmp_path, "bounds_vs_drafts", 12.345, quick=True)
    text = ix.render(ix.evaluate(tmp_path), tmp_path)
    assert "| bounds_vs_drafts | quick | 12.35 | " in text


@pytest.mark.slow
def test_make_reproduce_quick(tmp_path):
    """``make reproduce QUICK=1`` (its command, without the install step): every study runs,
    its runtime is recorded, INDEX.md is written with the smoke-run banner and the verdict
    counts are printed; every claim with a synthetic column whose studies ran has run."""
    from paper_figs.run_all import figure_modules

    proc = subprocess.run([sys.executable, "-m", "paper_figs.run_all", "--quick", "--out",
                           str(tmp_path)], cwd=REPO, env=_env(), capture_output=True, text=True,
                          timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "verdicts of" in proc.stdout
    timings = pd.read_csv(tmp_path / ix.TIMINGS)
    studies = {m.__name__.rsplit(".", 1)[-1] for m in figure_modules()}
    assert set(timings["study"]) == studies and timings["quick"].all()
    text = (tmp_path / ix.INDEX).read_text()
    assert text.startswith("> **Smoke run")
    rows = E.evaluate(tmp_path)
    ran = [r for r in rows if r.claim.kind == E.PAPER and r.verdict != E.NOT_RUN]
    assert len(ran) >= 20


def test_readme_states_the_registry_tally():
    """The README's count of claims per paper and kind is the registry's (``--tally``); the
    verdict counts depend on an output folder and are left to its INDEX.md."""
    import re

    readme = " ".join((REPO / "README.md").read_text().split())
    line = E.registry_tally()
    assert line in readme
    proc = subprocess.run([sys.executable, "-m", "paper_figs.index", "--tally"], cwd=REPO,
                          env=_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip() == line
    # the numbers are the registry's: one untestable claim more changes the line
    extra = E.Claim("x", E.ZHOU, "l", E.PAPER, "s", "r", "f", untestable="why")
    assert E.registry_tally([*CLAIMS, extra]) != line
    assert re.search(r"Zhou et al\. 2026: \d+ paper claims", line)


def test_family_crit_keeps_the_family_tail_and_a_bound_at_equality_passes():
    """A bound checked on m rows: the family-wise critical value keeps the probability that
    some row of a true bound (at equality) looks violated at ALPHA; 256 Monte Carlo rows of
    PML = exact MPFR whose smallest z is -3.37 (what a full run printed) pass, and one
    violation of 0.02 at n = 100,000 still fails (the full run's draws per check)."""
    from scipy import stats

    from paper_figs.claims import liu

    assert E.family_crit(1) == E.Z
    for m in (2, 6, 256, 10**4):
        c = E.family_crit(m)
        assert 1 - (1 - stats.norm.sf(c)) ** m == pytest.approx(E.ALPHA, rel=1e-9)
        assert c > E.family_crit(max(1, m // 2))
    with pytest.raises(ValueError, match="m must"):
        E.family_crit(0)
    n, pml = 100_000, np.full(256, 0.6)
    se = np.sqrt(pml * (1 - pml) / n)
    # a calibrated family (normal quantiles) whose smallest z is -3.37
    z = stats.norm.ppf((np.arange(256) + 0.5) / 256)
    z[0] = -3.37
    mc = pml + z * se
    rows = list(zip(pml, pml - 0.01, mc, np.full(256, n), strict=True))
    assert liu.rule_pml_bound(rows).verdict == E.REPRODUCED
    # the three registered checks each catch their fault: a shift of every row by -0.5σ
    # (which the Šidák minimum alone passes), the linear family of mean z -0.44 (Stouffer
    # about -7), an estimate equal to its reference (Σz² = 0), an over-dispersed one
    for bad, check in ((z - 0.5, "Stouffer"), (np.linspace(-3.37, 2.5, 256), "Stouffer"),
                       (np.zeros(256), "calibration"), (1.6 * z.clip(-2.5, 2.5),
                                                        "calibration")):
        o = liu.rule_pml_bound(list(zip(pml, pml - 0.01, pml + bad * se, np.full(256, n),
                                        strict=True)))
        assert o.verdict == E.NOT_REPRODUCED, check
        assert [p.verdict for p in o.parts if check in p.label] == [E.NOT_REPRODUCED], check
        sidak = [p for p in o.parts if "Šidák" in p.label][0]
        assert sidak.verdict == E.REPRODUCED  # the minimum rule alone would have passed
    mc_bad = mc.copy()
    mc_bad[7] = 0.6 - 0.02
    rows = list(zip(pml, pml - 0.01, mc_bad, np.full(256, n), strict=True))
    assert liu.rule_pml_bound(rows).verdict == E.NOT_REPRODUCED


def test_reading_commands_never_write_and_a_folder_without_output_is_an_error(tmp_path,
                                                                              capsys):
    """``--json`` alone is a reading command (it used to rewrite INDEX.md); ``--out`` on a
    missing folder or one without study output exits 2 with one line and creates nothing;
    ``--list | head`` ends quietly."""
    out = tmp_path / "out"
    out.mkdir()
    pd.DataFrame({"pml": [0.5], "lml": [0.4], "pml_weak": [0.4],
                  "lml_relaxed": [0.3]}).to_csv(out / "prop1_study.csv", index=False)
    assert ix.main(["--json", "--out", str(out)]) == 0
    assert json.loads(capsys.readouterr().out)[0]["id"] == CLAIMS[0].id
    assert not (out / ix.INDEX).exists()
    (tmp_path / "empty").mkdir()
    for folder in (tmp_path / "missing", tmp_path / "empty"):
        with pytest.raises(SystemExit) as exc:
            ix.main(["--out", str(folder)])
        assert exc.value.code == 2 and "--out" in capsys.readouterr().err.splitlines()[-1]
        assert not (folder / ix.INDEX).exists()
    assert not (tmp_path / "missing").exists()
    proc = subprocess.run(f"{sys.executable} -m paper_figs.index --list | head -1", shell=True,
                          cwd=REPO, env=_env(), capture_output=True, text=True, timeout=300)
    assert proc.stdout.startswith(CLAIMS[0].id) and "Error" not in proc.stderr, proc.stderr


def test_index_opens_with_one_summary_table(tmp_path):
    """One line per claim with its verdict per column, the claim's verdict, the column that
    decided it and one line of reason, before the rules and the detail."""
    from tests.test_claims_flip import FLIPS

    FLIPS["zhou_prop1"](tmp_path, False)  # refuted by the synthetic column
    text = E.render(E.evaluate(tmp_path), tmp_path)
    head, rest = text.split("## Summary", 1)
    assert "**Rules**" not in head and "**Rules**" in rest
    table = [ln for ln in rest.split("\n\n", 2)[1].splitlines() if ln.startswith("| [")]
    assert len(table) == len(CLAIMS)
    (row,) = [ln for ln in table if ln.startswith("| [zhou_prop1]")]
    cells = [c.strip() for c in row.strip("|").split(" | ")]
    assert cells[2] == E.REFUTED and cells[5] == f"**{E.REFUTED}**"
    assert cells[6] == E.SYNTHETIC and "BE(truncation verification)" in cells[7]
    (row,) = [ln for ln in table if ln.startswith("| [zhou_judge_mix]")]
    assert E.PAPER_DATA in row and E.NOT_TESTABLE in row


def test_an_equivalence_the_sample_cannot_pass_says_so():
    """Table 5's "matches lossless" at ±0.1 points on 378 problems (a standard error of
    about 3 points): the rule could never pass, and the part says so."""
    p = E.equivalence("", 0.0, 3.1, 0.1)
    assert p.verdict == E.NOT_DISTINGUISHABLE and "cannot show equivalence" in p.text
    assert "cannot show" not in E.equivalence("", 0.0, 0.01, 0.1).text


def test_index_lists_what_no_row_covers(tmp_path):
    """The sentences and tables without a row are listed with the reason, per paper."""
    from paper_figs.claims.registry import NOT_COVERED

    text = E.render(E.evaluate(tmp_path), tmp_path)
    part = text.split("## Not covered by a row", 1)[1].split("## Studies", 1)[0]
    assert NOT_COVERED and {p for p, *_ in NOT_COVERED} == set(E.PAPERS)
    # a sentence that got a row of its own leaves the list
    rows = {(c.paper, c.location) for c in CLAIMS}
    assert not {(p, loc) for p, loc, *_ in NOT_COVERED} & rows
    for p, loc, what, why in NOT_COVERED:
        assert why and f"| {E.SHORT[p]} | {loc} | {what} |" in part


def test_cells_without_spread_carry_the_papers_repeat_spread():
    """Table 10 repeats Table 6's cells (the shipped transcription: up to 0.005 apart): a
    cell without a printed spread carries at least the spread of those repeats, not only
    its rounding; a table with a spread keeps its own."""
    rows = []
    for t, v, sd in (("t6", "2.000", "0.010"), ("t10", "2.004", "")):
        rows.append({"key": f"liu.{t}.B2.mpfr.aatps", "value": v, "sd": sd,
                     "n": "3" if sd else "", "table": t, "cell": "c"})
    nums = PN.PaperNumbers(pd.DataFrame(rows))
    assert nums.repeat_spread["aatps"] == pytest.approx(0.004 / math.sqrt(2))
    assert nums["liu.t10.B2.mpfr.aatps"].se == pytest.approx(0.004 / math.sqrt(2))
    assert nums["liu.t6.B2.mpfr.aatps"].se == pytest.approx(0.010 / math.sqrt(3))
    shipped = PN.load()
    assert shipped["liu.t12.B2.mpfr.aatps"].se > 0.0005  # more than the rounding alone
