"""Tests of ``paper_figs.index`` (the computed INDEX.md of ``make reproduce``).

Verdicts must follow the data: fabricated CSVs where a claim holds and where it fails flip
the verdict; a missing file gives "not run"; the |z| > 3 threshold is applied by code (moving
it moves the verdict).  One test runs a real figure script in quick mode and checks the
verdicts of its claims.  No test here is statistical: every input is fixed, so none can fail
by chance.
"""

from __future__ import annotations

import math
import os
import types

import numpy as np
import pandas as pd
import pytest

from paper_figs import index as ix

CLAIMS = {c.key: c for c in ix.CLAIMS}


def verdict(out_dir, key: str) -> ix.Outcome:
    (row,) = ix.evaluate(out_dir, [CLAIMS[key]])
    return row.outcome


# ------------------------------------------------------------------------- verdict rules


def test_threshold_rules():
    t = ix.Z_THRESHOLD
    assert t == 3.0
    assert ix.ordering(t + 0.01) == ix.REPRODUCED
    assert ix.ordering(t - 0.01) == ix.NOT_DISTINGUISHABLE
    assert ix.ordering(-t - 0.01) == ix.NOT_REPRODUCED
    assert ix.ordering(math.nan) == ix.NOT_DISTINGUISHABLE
    assert ix.equality(t - 0.01) == ix.REPRODUCED
    assert ix.equality(-t - 0.01) == ix.NOT_REPRODUCED
    # an equality needs a sample fine enough to see a difference of RESOLUTION x scale
    r = ix.RESOLUTION
    assert ix.equality(1.0, se=0.9 * r / t, scale=1.0) == ix.REPRODUCED
    assert ix.equality(1.0, se=1.1 * r / t, scale=1.0) == ix.NOT_DISTINGUISHABLE
    assert ix.exact(True) == ix.REPRODUCED and ix.exact(False) == ix.REFUTED
    assert ix.combine([ix.REPRODUCED, ix.REPRODUCED]) == ix.REPRODUCED
    assert ix.combine([ix.REPRODUCED, ix.NOT_DISTINGUISHABLE]) == ix.NOT_DISTINGUISHABLE
    assert ix.combine([ix.NOT_DISTINGUISHABLE, ix.NOT_REPRODUCED]) == ix.NOT_REPRODUCED
    assert ix.combine([ix.NOT_REPRODUCED, ix.REFUTED]) == ix.REFUTED
    assert ix.sweep_ordering([0.0, 3.5, 1.0]) == ix.REPRODUCED
    assert ix.sweep_ordering([0.0, 3.5, -3.5]) == ix.NOT_REPRODUCED
    assert ix.sweep_ordering([0.0, 2.0]) == ix.NOT_DISTINGUISHABLE


def test_z_helpers():
    assert ix.z_diff(1.0, 0.3, 0.4, 0.4) == pytest.approx(0.6 / 0.5)
    assert ix.z_diff(1.0, 0.0, 1.0, 0.0) == 0.0
    assert ix.z_diff(1.0, 0.0, 0.5, 0.0) == math.inf
    assert math.isnan(ix.z_diff(1.0, math.nan))
    assert ix.z_binomial(20, 1000, 0.01) == pytest.approx(0.01 / math.sqrt(0.01 * 0.99 / 1000))
    # pooled two-proportion z: 60/100 vs 40/100
    assert ix.z_two_proportions(60, 100, 40, 100) == pytest.approx(0.2 / math.sqrt(0.25 * 0.02))
    assert ix.z_two_proportions(100, 100, 50, 50) == 0.0


# ------------------------------------------------------------------- missing => not run


def test_missing_outputs_are_not_run(tmp_path):
    rows = ix.evaluate(tmp_path)
    assert len(rows) == len(ix.CLAIMS) and rows
    assert all(r.outcome.verdict == ix.NOT_RUN for r in rows)
    assert all("missing" in r.outcome.numbers for r in rows)
    assert ix.summary(rows)[ix.NOT_RUN] == len(rows)


def test_missing_column_is_not_run(tmp_path):
    pd.DataFrame({"pair": ["a"], "B": [1]}).to_csv(tmp_path / "bounds_vs_drafts.csv",
                                                   index=False)
    out = verdict(tmp_path, "pml_bound")
    assert out.verdict == ix.NOT_RUN and "lacks the columns" in out.numbers


# ------------------------------------------------------- exact claims: fabricated data


def _bounds(tmp_path, mpfr_shift: float = 0.0, race_above_limit: bool = True):
    tv = np.array([0.1, 0.3])
    limit = (1 - tv) / (1 + tv)
    rows = []
    for k, t in enumerate(tv):
        for B in (1, 2, 4):
            pml = limit[k] + 0.05 if race_above_limit else limit[k] - 0.05
            pml = min(pml + 0.02 * (B - 1), 0.99)
            rows.append({"pair": f"p{k}", "tv": t, "B": B, "pml": pml, "pml_weak": pml - 0.1,
                         "lml": pml - 0.01 * (B - 1), "lml_relaxed": pml - 0.2,
                         "exact_mpfr": pml + mpfr_shift, "exact_gls": pml - 0.005})
    pd.DataFrame(rows).to_csv(tmp_path / "bounds_vs_drafts.csv", index=False)


def test_pml_bound_verdict_flips_with_the_data(tmp_path):
    _bounds(tmp_path)
    assert verdict(tmp_path, "pml_bound").verdict == ix.REPRODUCED
    assert verdict(tmp_path, "pml_ge_lml").verdict == ix.REPRODUCED
    _bounds(tmp_path, mpfr_shift=-1e-3)  # MPFR below the PML bound: a counterexample
    out = verdict(tmp_path, "pml_bound")
    assert out.verdict == ix.REFUTED
    assert "-0.001" in out.numbers


def test_limit_direction_verdict_flips_with_the_data(tmp_path):
    _bounds(tmp_path, race_above_limit=True)
    out = verdict(tmp_path, "limit_direction")
    assert out.verdict == ix.REFUTED and "counterexample" in out.beyond
    assert verdict(tmp_path, "limit_attained").verdict == ix.REPRODUCED
    _bounds(tmp_path, race_above_limit=False)
    assert verdict(tmp_path, "limit_direction").verdict == ix.REPRODUCED
    assert verdict(tmp_path, "limit_attained").verdict == ix.REFUTED


def _lemma1(tmp_path, eta_net: float):
    rows = []
    for trunc, params in (("min-p", (0.1, 0.5, 0.9)), ("eta", (1e-3, 0.1))):
        for d in ("noisy", "sharp"):
            for k, prm in enumerate(params):
                net = eta_net if trunc == "eta" else (0.1 - 0.1 * k)
                gain, loss = max(net, 0.0) + 0.01, max(-net, 0.0) + 0.01
                rows.append({"draft": d, "truncation": trunc, "param": prm, "gain": gain,
                             "loss": loss, "net": gain - loss, "direct": gain - loss})
    pd.DataFrame(rows).to_csv(tmp_path / "lemma1_study.csv", index=False)


def test_lemma1_eta_verdict_flips_with_the_data(tmp_path):
    _lemma1(tmp_path, eta_net=0.05)
    assert verdict(tmp_path, "lemma1_eta").verdict == ix.REPRODUCED
    assert verdict(tmp_path, "lemma1_identity").verdict == ix.REPRODUCED
    assert verdict(tmp_path, "lemma1_minp").verdict == ix.REPRODUCED
    _lemma1(tmp_path, eta_net=-0.05)
    out = verdict(tmp_path, "lemma1_eta")
    assert out.verdict == ix.REFUTED and "counterexample" in out.beyond


# ------------------------------------------------- Monte Carlo claims: fabricated data


def _frontier(tmp_path, nowm_shift_in_se: float, se: float = 0.01):
    rows = []
    for L in (1, 2):
        for dec, a, w in (("pfr", 2.0, 0.5), ("pfr_nowm", 2.0 + nowm_shift_in_se * se * 2**0.5,
                                               0.0),
                          ("vsps", 2.0, 0.0), ("mse", 1.5, 0.1)):
            rows.append({"decoder": dec, "L": L, "aatps": a, "aatps_se": se, "anlppt_u": w,
                         "anlppt_u_se": 0.01, "lppl": 2.0, "lppl_se": 0.05})
    rows.append({"decoder": "basic_uwm", "L": 0, "aatps": 1.0, "aatps_se": 0.0,
                 "anlppt_u": 0.5, "anlppt_u_se": 0.01, "lppl": 2.0, "lppl_se": 0.05})
    pd.DataFrame(rows).to_csv(tmp_path / "wm_single_draft_frontier.csv", index=False)


def test_equality_claim_flips_at_the_threshold(tmp_path):
    _frontier(tmp_path, nowm_shift_in_se=2.9)
    out = verdict(tmp_path, "pfr_vs_nowm")
    assert out.verdict == ix.REPRODUCED and abs(out.z) == pytest.approx(2.9)
    _frontier(tmp_path, nowm_shift_in_se=3.1)
    out = verdict(tmp_path, "pfr_vs_nowm")
    assert out.verdict == ix.NOT_REPRODUCED and abs(out.z) == pytest.approx(3.1)


def test_equality_needs_a_fine_enough_sample(tmp_path):
    _frontier(tmp_path, nowm_shift_in_se=1.0, se=0.5)  # |z| = 1 but 3 se of the gap ~ 2.1
    out = verdict(tmp_path, "pfr_vs_nowm")
    assert out.verdict == ix.NOT_DISTINGUISHABLE and abs(out.z) == pytest.approx(1.0)
    _frontier(tmp_path, nowm_shift_in_se=0.0, se=0.5)  # identical estimates: paired error 0
    assert verdict(tmp_path, "pfr_vs_nowm").verdict == ix.REPRODUCED


def test_threshold_is_applied_by_code(tmp_path, monkeypatch):
    _frontier(tmp_path, nowm_shift_in_se=3.1)
    assert verdict(tmp_path, "pfr_vs_nowm").verdict == ix.NOT_REPRODUCED
    monkeypatch.setattr(ix, "Z_THRESHOLD", 4.0)
    assert verdict(tmp_path, "pfr_vs_nowm").verdict == ix.REPRODUCED


def test_ordering_claim_three_ways(tmp_path):
    # PFR vs MSE: AATPS 2.0 vs 1.5 (z = 35), ANLPPT 0.5 vs 0.1 (z = 28): dominates
    _frontier(tmp_path, 0.0)
    assert verdict(tmp_path, "pfr_dominates_mse").verdict == ix.REPRODUCED
    df = pd.read_csv(tmp_path / "wm_single_draft_frontier.csv")
    df.loc[df["decoder"] == "mse", "anlppt_u"] = 0.49  # watermark gap within noise
    df.to_csv(tmp_path / "wm_single_draft_frontier.csv", index=False)
    assert verdict(tmp_path, "pfr_dominates_mse").verdict == ix.NOT_DISTINGUISHABLE
    df.loc[df["decoder"] == "mse", "aatps"] = 2.5  # MSE accepts significantly more
    df.to_csv(tmp_path / "wm_single_draft_frontier.csv", index=False)
    assert verdict(tmp_path, "pfr_dominates_mse").verdict == ix.NOT_REPRODUCED


def _detection(tmp_path, k_h0: int, n: int = 1000):
    rows = [{"decoder": "h0", "score": "aaronson", "method": "exact", "T_eval": T,
             "tpr": k_h0 / n, "n_sequences": n, "fpr": 0.01} for T in (1, 2)]
    pd.DataFrame(rows).to_csv(tmp_path / "wm_detection.csv", index=False)


def test_h0_floor_binomial(tmp_path):
    _detection(tmp_path, k_h0=12)  # z = 0.64
    assert verdict(tmp_path, "h0_floor").verdict == ix.REPRODUCED
    _detection(tmp_path, k_h0=25)  # z = 4.8: the test is miscalibrated
    out = verdict(tmp_path, "h0_floor")
    assert out.verdict == ix.NOT_REPRODUCED and out.z > 3
    assert verdict(tmp_path, "tpr_match").verdict == ix.NOT_RUN  # no decoder rows


# ------------------------- paired comparisons and the papers' settings: fabricated data


def _cmp_csv(tmp_path, study: str, rows: list[dict]) -> None:
    pd.DataFrame(rows).to_csv(tmp_path / f"{study}_comparisons.csv", index=False)


def _cmp(comparison, metric, a_val, b_val, diff_se, **where):
    d = a_val - b_val
    return {"comparison": comparison, "metric": metric, "value_a": a_val, "value_b": b_val,
            "diff": d, "diff_se": diff_se, "z": d / diff_se if diff_se else 0.0, **where}


def test_paired_comparisons_replace_independent_errors(tmp_path):
    # independent errors: |z| = 2.9 (reproduced); the study's paired error is 10x smaller,
    # so the same gap has |z| = 29 and the equality fails
    _frontier(tmp_path, nowm_shift_in_se=2.9)
    assert verdict(tmp_path, "pfr_vs_nowm").verdict == ix.REPRODUCED
    gap = 2.9 * 0.01 * 2**0.5
    _cmp_csv(tmp_path, "wm_single_draft_frontier",
             [_cmp("pfr-pfr_nowm", "aatps", 2.0, 2.0 + gap, gap / 29, L=L, variant="default")
              for L in (1, 2)])
    out = verdict(tmp_path, "pfr_vs_nowm")
    assert out.verdict == ix.NOT_REPRODUCED and out.z == pytest.approx(-29)
    assert "paired" in out.numbers


def _hh(tmp_path, mse_aatps_gap_z: float):
    rows = []
    for b in ("mse", "mse_pseudo", "mws_gamma"):
        z = mse_aatps_gap_z if b == "mse" else 5.0
        rows += [_cmp(f"pfr-{b}", "aatps", 2.0 + 0.01 * z, 2.0, 0.01, L=4,
                      variant="hh_window3_skip"),
                 _cmp(f"pfr-{b}", "anlppt_u", 0.5, 0.1, 0.01, L=4, variant="hh_window3_skip")]
    _cmp_csv(tmp_path, "wm_single_draft_frontier", rows)


def test_hh_dominance_verdict_flips_with_the_data(tmp_path):
    _frontier(tmp_path, 0.0)
    _hh(tmp_path, 4.0)
    assert verdict(tmp_path, "pfr_dominates_hh").verdict == ix.REPRODUCED
    _hh(tmp_path, 1.0)
    assert verdict(tmp_path, "pfr_dominates_hh").verdict == ix.NOT_DISTINGUISHABLE
    _hh(tmp_path, -4.0)  # MSE accepts more than PFR in Hu & Huang's setting
    out = verdict(tmp_path, "pfr_dominates_hh")
    assert out.verdict == ix.NOT_REPRODUCED and out.z == pytest.approx(-4.0)


def _coin_detection(tmp_path, coin_gain_z: float, Ts=(8, 64)):
    rows, cmps = [], []
    for T in Ts:
        for dec, var, det, tpr in (("mse", "default", "tokens", 0.5),
                                   ("mse_pseudo", "keyed_residual", "coin",
                                    0.5 + 0.01 * coin_gain_z)):
            rows.append({"decoder": dec, "variant": var, "detector": det, "score": "aaronson",
                         "method": "exact", "T_eval": T, "tpr": tpr, "n_sequences": 1000})
        cmps.append(_cmp("mse_pseudo_keyed:coin-mse:tokens", "tpr", 0.5 + 0.01 * coin_gain_z,
                         0.5, 0.01, score="aaronson", method="exact", T_eval=T))
    pd.DataFrame(rows).to_csv(tmp_path / "wm_detection.csv", index=False)
    _cmp_csv(tmp_path, "wm_detection", cmps)


def test_coin_detector_verdict_flips_with_the_data(tmp_path):
    _coin_detection(tmp_path, 3.5)
    assert verdict(tmp_path, "tpr_pseudo_coin").verdict == ix.REPRODUCED
    _coin_detection(tmp_path, 2.0)
    assert verdict(tmp_path, "tpr_pseudo_coin").verdict == ix.NOT_DISTINGUISHABLE
    _coin_detection(tmp_path, -3.5)
    assert verdict(tmp_path, "tpr_pseudo_coin").verdict == ix.NOT_REPRODUCED


def _coin_acceptance(tmp_path, end_z: float, step_z: float = 1.0, Ts=(8, 32)):
    # the acceptance sweep's trend rows: the gain at the lower acceptance (a) minus the gain
    # at the higher one (b), between consecutive levels and lowest vs highest
    rows = []
    accs = (0.9, 0.65, 0.25)
    for gain in ("coin-tokens", "coin-mse"):
        for T in Ts:
            for i, acc in enumerate(accs):
                rows.append(_cmp(gain, "tpr", 0.1 * i, 0.0, 0.01, noise=i, acceptance=acc,
                                 T_eval=T, step="level"))
            steps = [(accs[1], accs[0], step_z, "step"), (accs[2], accs[1], step_z, "step"),
                     (accs[2], accs[0], end_z, "end")]
            for a, b, z, step in steps:
                rows.append(_cmp(f"trend:{gain}", "score_per_token", 0.01 * z, 0.0, 0.01,
                                 acceptance_a=a, acceptance_b=b, T_eval=T, step=step))
    _cmp_csv(tmp_path, "wm_detection_acceptance", rows)


def test_coin_gain_acceptance_verdict_flips_with_the_data(tmp_path):
    assert verdict(tmp_path, "coin_gain_acceptance").verdict == ix.NOT_RUN
    _coin_acceptance(tmp_path, 4.0)
    out = verdict(tmp_path, "coin_gain_acceptance")
    assert out.verdict == ix.REPRODUCED and out.z == pytest.approx(4.0)
    assert "at acceptance 0.25" in out.beyond
    _coin_acceptance(tmp_path, 2.0)
    assert verdict(tmp_path, "coin_gain_acceptance").verdict == ix.NOT_DISTINGUISHABLE
    _coin_acceptance(tmp_path, -4.0)  # the gain shrinks as the acceptance falls
    assert verdict(tmp_path, "coin_gain_acceptance").verdict == ix.NOT_REPRODUCED
    _coin_acceptance(tmp_path, 4.0, step_z=-3.5)  # grows overall, falls at one step
    out = verdict(tmp_path, "coin_gain_acceptance")
    assert out.verdict == ix.NOT_REPRODUCED and out.z == pytest.approx(-3.5)


def _subst_csv(tmp_path, drifts: dict, se: float = 0.01, rouge_fresh: float = 0.436,
               Ts=(64, 128)):
    rows = []
    for (dec, var), d in drifts.items():
        summ = {"row_type": "summary", "decoder": dec, "variant": var, "drafter": "all",
                "rouge_l_minpair": 1.0, "rouge_l_minpair_se": 0.0}
        dr = {"row_type": "drafter", "decoder": dec, "variant": var, "drafter": "D0"}
        for T in Ts:
            summ[f"tpr_drift_T{T}"], summ[f"tpr_drift_T{T}_se"] = d, se
            dr[f"tpr_T{T}"], dr[f"tpr_T{T}_se"] = 0.5, se
        rows += [summ, dr]
    for var, r in (("default", 1.0), ("fresh", rouge_fresh)):
        rows.append({"row_type": "summary", "decoder": "pfr_nowm", "variant": var,
                     "drafter": "all", "rouge_l_minpair": r, "rouge_l_minpair_se": 0.005})
        rows.append({"row_type": "drafter", "decoder": "pfr_nowm", "variant": var,
                     "drafter": "D0"})
    pd.DataFrame(rows).to_csv(tmp_path / "wm_drafter_substitution.csv", index=False)


def test_drift_budget_verdict_flips_with_the_data(tmp_path):
    ok = {("mse", "default"): 0.15, ("mse_pseudo", "keyed_residual_coin"): 0.08,
          ("mse_pseudo", "default"): 0.3}
    _subst_csv(tmp_path, ok)
    out = verdict(tmp_path, "drift_budget")
    assert out.verdict == ix.REPRODUCED and "token pivots only" in out.beyond
    _subst_csv(tmp_path, {**ok, ("mse_pseudo", "keyed_residual_coin"): 0.13})  # 2 se above 11
    assert verdict(tmp_path, "drift_budget").verdict == ix.NOT_DISTINGUISHABLE
    _subst_csv(tmp_path, {**ok, ("mse", "default"): 0.50})  # 28 se above 22 points
    out = verdict(tmp_path, "drift_budget")
    assert out.verdict == ix.NOT_REPRODUCED and out.z == pytest.approx(28)


def test_rouge_nowm_fresh_verdict_flips_with_the_data(tmp_path):
    drifts = {("mse", "default"): 0.15, ("mse_pseudo", "keyed_residual_coin"): 0.08}
    _subst_csv(tmp_path, drifts, rouge_fresh=0.44)
    out = verdict(tmp_path, "rouge_nowm_fresh")
    assert out.verdict == ix.REPRODUCED and "seeded" in out.beyond
    _subst_csv(tmp_path, drifts, rouge_fresh=0.30)  # the synthetic models' value: z = -27.2
    out = verdict(tmp_path, "rouge_nowm_fresh")
    assert out.verdict == ix.NOT_REPRODUCED and out.z == pytest.approx(-27.2)
    # the default (seeded) variant still answers the drafter-invariance claim
    assert verdict(tmp_path, "rouge_invariant").verdict == ix.NOT_RUN  # no PFR rows here


# -------------------------------------------------- real study, INDEX.md and run_all


def test_real_quick_study_verdicts(tmp_path):
    from paper_figs import bounds_vs_drafts

    bounds_vs_drafts.main(tmp_path, quick=True)
    assert verdict(tmp_path, "pml_bound").verdict == ix.REPRODUCED
    assert verdict(tmp_path, "pml_ge_lml").verdict == ix.REPRODUCED
    assert verdict(tmp_path, "limit_attained").verdict == ix.REPRODUCED
    # the exponential race beats (1 - TV)/(1 + TV) on these pairs: Eq. 4 read as "<="
    assert verdict(tmp_path, "limit_direction").verdict == ix.REFUTED
    path, counts = ix.write_index(tmp_path)
    text = path.read_text()
    assert sum(counts.values()) == len(ix.CLAIMS)
    assert f"| {ix.REFUTED} | {counts[ix.REFUTED]} |" in text
    assert "|z| > 3" in text and "check_pml_bound" in text


def test_registry_is_well_formed():
    keys = [c.key for c in ix.CLAIMS]
    assert len(keys) == len(set(keys))
    for c in ix.CLAIMS:
        assert c.paper in (ix.LIU, ix.ZHOU)
        assert c.outputs and all(o.endswith(".csv") for o in c.outputs)
        assert c.model in ("synthetic", "real")
        assert callable(c.check) and c.check.__name__.startswith("check_")
    named = {c.key for c in ix.CLAIMS}
    # the claims the reproduction must cover, synthetic and real side by side
    assert {"pml_bound", "pml_ge_lml", "limit_direction", "pfr_vs_nowm", "mpfr_vs_invariant",
            "mpfr_vs_gls", "anlppt_stable", "tpr_weaker", "h0_floor", "drift_pfr",
            "rouge_invariant", "lppl_pfr", "induced_forms", "lemma1_eta", "thm1_ordering",
            "prop1", "trunc_ceiling", "real_pml_bound"} <= named


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
    from paper_figs import run_all

    _bounds(tmp_path)
    run_all.record_timing(tmp_path, "bounds_vs_drafts", 12.345, quick=True)
    text = ix.render(ix.evaluate(tmp_path), tmp_path)
    assert "| bounds_vs_drafts | `python -m paper_figs.bounds_vs_drafts --quick` | quick | 12.3 |" \
        in text


@pytest.mark.slow
def test_make_reproduce_quick(tmp_path):
    """``make reproduce QUICK=1`` (its command, without the install step): every study runs,
    its runtime is recorded, INDEX.md is written and the verdict counts are printed."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from paper_figs.run_all import figure_modules

    repo = Path(__file__).resolve().parents[1]
    env = dict(os.environ, MPLBACKEND="Agg")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(repo), env.get("PYTHONPATH")]))
    env.pop("SPECBOUND_EXECUTOR", None)
    proc = subprocess.run([sys.executable, "-m", "paper_figs.run_all", "--quick", "--out",
                           str(tmp_path)], cwd=repo, env=env, capture_output=True, text=True,
                          timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "verdicts of" in proc.stdout
    timings = pd.read_csv(tmp_path / ix.TIMINGS)
    studies = {m.__name__.rsplit(".", 1)[-1] for m in figure_modules()}
    assert set(timings["study"]) == studies and timings["quick"].all()
    rows = ix.evaluate(tmp_path)
    # every claim whose study exists here has run (the real-model studies may be absent)
    for r in rows:
        if r.claim.script in studies:
            assert r.outcome.verdict != ix.NOT_RUN, (r.claim.key, r.outcome.numbers)
    assert (tmp_path / ix.INDEX).read_text().count("| **") == len(ix.CLAIMS)


def test_real_model_claims_read_the_real_studies_columns(tmp_path):
    """The real-model studies name the exact values ``mpfr``/``gls``/``exp_race`` and the
    pair ``draft``, and aggregate Lemma 1 per draft (``frac_positive``)."""
    _bounds(tmp_path)
    df = pd.read_csv(tmp_path / "bounds_vs_drafts.csv").rename(
        columns={"exact_mpfr": "mpfr", "exact_gls": "gls", "pair": "draft"})
    df["exp_race"] = np.where(df["B"] == 1, df["mpfr"], np.nan)
    df.to_csv(tmp_path / "real_bounds.csv", index=False)
    assert verdict(tmp_path, "real_pml_bound").verdict == ix.REPRODUCED
    assert verdict(tmp_path, "real_limit_direction").verdict == ix.REFUTED
    rows = [{"draft": d, "truncation": t, "param": prm, "net": 0.01, "frac_positive": fp}
            for d in ("temperature:0.5", "early_exit:28") for t, prm, fp in
            (("eta", 0.01, 1.0), ("eta", 0.1, 1.0), ("min_p", 0.1, 0.7), ("min_p", 0.9, 0.2))]
    pd.DataFrame(rows).to_csv(tmp_path / "real_lossy_lemma1.csv", index=False)
    assert verdict(tmp_path, "real_lemma1_eta").verdict == ix.REPRODUCED
    rows[0]["frac_positive"] = 0.9  # one context of one draft with ΔBE <= 0
    pd.DataFrame(rows).to_csv(tmp_path / "real_lossy_lemma1.csv", index=False)
    assert verdict(tmp_path, "real_lemma1_eta").verdict == ix.REFUTED
    assert verdict(tmp_path, "real_trunc_ceiling").verdict == ix.NOT_RUN
