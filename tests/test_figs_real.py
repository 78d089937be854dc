"""The figure scripts on real logged distributions (``paper_figs.real_*``), in quick mode.

``tests/test_figs_smoke.py`` already runs every figure script on the shipped log; here each
script runs on a small user log (``--log DIR``) written with ``DistributionLog`` and its
numbers are checked: bounds never exceed the exact values they bound, PML equals exact MPFR,
the Monte Carlo z-scores are small, Lemma 1's gain − loss is the direct difference.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from paper_figs import _real_log, real_bounds, real_lossy
from paper_figs._cli import cli
from paper_figs._common import build_parser, resolve_params
from specbound.llm.logs import DistributionLog, read_log

V = 30


@pytest.fixture(scope="module")
def user_log(tmp_path_factory):
    """6 contexts, 2 drafts (one sharpened, one noisy), top-8 supports: an exact log."""
    path = tmp_path_factory.mktemp("figs_real") / "log"
    rng = np.random.default_rng(11)
    with DistributionLog(path, vocab_size=V, drafts=["sharp", "noisy"], target_model="toy",
                         processing={"temperature": 1.0, "top_k": 8, "top_p": None},
                         prompts=["a", "b"]) as log:
        for pid in (0, 1):
            for s in range(3):
                logits = rng.normal(size=V) * 2
                keep = np.argsort(logits)[-8:]

                def law(x, keep=keep):
                    w = np.zeros(V)
                    w[keep] = np.exp(x[keep] - x[keep].max())
                    return w / w.sum()

                p = law(logits)
                noisy = logits + rng.normal(size=V)
                log.record(pid, [1, 2, s], p, [law(2 * logits), law(noisy)])
    return path


def test_log_option_is_parsed(tmp_path):
    with pytest.raises(ValueError, match="is not a distribution log"):
        resolve_params(real_bounds.PARAMS, True, {"log": str(tmp_path)})
    (tmp_path / "manifest.json").write_text("{}")  # (the log itself is read by the study)
    ap = build_parser(real_bounds.__doc__, real_bounds.PARAMS)
    args = ap.parse_args(["--quick", "--log", str(tmp_path), "--B", "1,3"])
    assert args.quick
    v = resolve_params(real_bounds.PARAMS, args.quick, {"log": args.log, "B": args.B})
    assert v.log == tmp_path and v.B == (1, 3) and v.contexts == 12
    assert set(v.changed) == {"log", "B"}
    with pytest.raises(ValueError, match="^log: 'some/dir' is not a folder"):
        resolve_params(real_bounds.PARAMS, True, {"log": "some/dir"})
    assert resolve_params(real_bounds.PARAMS, False, {}).log is None
    assert resolve_params(real_lossy.PARAMS, False, {}).contexts == 0  # 0: every context
    assert _real_log.subsample(10, 3).tolist() == [0, 4, 9]
    assert _real_log.subsample(10, 0).tolist() == list(range(10))


def test_real_bounds_on_a_user_log(user_log, tmp_path):
    written = real_bounds.main(tmp_path, quick=True, log=user_log)
    assert {p.suffix for p in written} == {".png", ".csv", ".md"}
    df = pd.read_csv(tmp_path / "real_bounds.csv")
    assert set(df["draft"]) == {"sharp", "noisy"} and set(df["B"]) == set(real_bounds.B_QUICK)
    assert len(df) == 2 * len(real_bounds.B_QUICK) * len(read_log(user_log))
    # PML is exact MPFR; every bound is below the exact value it bounds
    np.testing.assert_allclose(df["pml"], df["mpfr"], atol=1e-9)
    for bound, scheme in real_bounds.BOUND_OF.items():
        ok = df[scheme].notna()
        assert (df.loc[ok, bound] <= df.loc[ok, scheme] + 1e-9).all(), bound
    b1 = df[df["B"] == 1]
    np.testing.assert_allclose(b1["gls"], b1["exp_race"], atol=1e-12)
    np.testing.assert_allclose(b1["sd"], 1 - b1["tv"], atol=1e-12)
    # Monte Carlo agrees with the exact values: |z| < 5 for every check (about 30 checks,
    # false failure < 30 * 5.7e-7)
    z = df.filter(like="z_").to_numpy().ravel()
    z = z[np.isfinite(z)]
    assert z.size >= 20 and np.abs(z).max() < 5
    # resuming recomputes nothing and keeps the rows
    before = (tmp_path / "real_bounds.csv").read_bytes()
    real_bounds.main(tmp_path, quick=True, log=user_log)
    assert (tmp_path / "real_bounds.csv").read_bytes() == before
    assert "| sharp | 1 |" in (tmp_path / "real_bounds.md").read_text()


def test_real_lossy_on_a_user_log(user_log, tmp_path):
    written = real_lossy.main(tmp_path, quick=True, log=user_log)
    assert len(written) == 4
    front = pd.read_csv(tmp_path / "real_lossy.csv")
    lem = pd.read_csv(tmp_path / "real_lossy_lemma1.csv")
    lossless = front[front["rule"] == "lossless"]
    np.testing.assert_allclose(lossless["gain"], 0.0, atol=1e-12)
    np.testing.assert_allclose(lossless["tv"], 0.0, atol=1e-12)
    # lenience with ell = 1 is lossless; smaller ell accepts more
    len_rows = front[(front["rule"] == "lenience")].sort_values("param")
    for d, g in len_rows.groupby("draft"):
        assert np.all(np.diff(g["acceptance"].to_numpy()) <= 1e-12), d
    np.testing.assert_allclose(lem["net"], lem["gain"] - lem["loss"], atol=1e-12)
    assert ((lem["frac_positive"] >= 0) & (lem["frac_positive"] <= 1)).all()
    # Lemma 1 on the user log, one case by hand: min-p 0.5 on the sharpened draft
    log = read_log(user_log)
    P, Q, _ = _real_log.padded_pairs(log, "sharp", range(len(log)))
    from specbound.theory.tree import min_p_allowed, truncated_target

    pt = truncated_target(P, min_p_allowed(P, 0.5))
    direct = np.minimum(pt, Q).sum(axis=1) - np.minimum(P, Q).sum(axis=1)
    row = lem[(lem["draft"] == "sharp") & (lem["truncation"] == "min_p")
              & np.isclose(lem["param"], 0.5)]
    assert row["net"].item() == pytest.approx(direct.mean(), abs=1e-12)


# ------------------------------------------------- runs of the embedded model (quick mode)


def _needs_llm():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")


def test_real_crosscheck_quick(tmp_path):
    """One ShareGPT prompt x 6 tokens per decoder on the embedded model (seconds)."""
    _needs_llm()
    from paper_figs import real_crosscheck as xc

    written = xc.main(tmp_path, quick=True)
    assert {p.suffix for p in written} == {".png", ".csv", ".md"}
    S = pd.read_csv(tmp_path / "real_crosscheck.csv")
    assert list(S["decoder"]) == [xc.label(s) for s in xc.SPECS] + ["all"]
    per = S[S["decoder"] != "all"]
    allrow = S[S["decoder"] == "all"].iloc[0]
    assert allrow["n_blocks"] == per["n_blocks"].sum()
    assert allrow["n_decisions"] == per["n_decisions"].sum()
    # predicted AATPS = realised - mean(accepted - predicted), within [1, L + 1]
    np.testing.assert_allclose(S["predicted_aatps"], S["aatps"] - S["diff"], atol=1e-9)
    assert ((S["predicted_aatps"] >= 1) & (S["predicted_aatps"] <= 5)).all()
    assert ((S["predicted_rate"] > 0) & (S["predicted_rate"] < 1)).all()
    C = pd.read_csv(tmp_path / "real_crosscheck_calibration.csv")
    assert ((C["mean_predicted"] >= C["bin_lo"]) & (C["mean_predicted"] <= C["bin_hi"])).all()
    assert ((C["ci_lo"] <= C["realised"]) & (C["realised"] <= C["ci_hi"])).all()
    for dec, g in C.groupby("decoder"):  # every decision is in one bin
        assert g["n"].sum() == S.set_index("decoder").at[dec, "n_decisions"], dec
    # resuming recomputes nothing and rewrites the same numbers
    runs = (tmp_path / "real_runs.csv").read_bytes()
    before = (tmp_path / "real_crosscheck.csv").read_bytes()
    xc.main(tmp_path, quick=True)
    assert (tmp_path / "real_runs.csv").read_bytes() == runs
    assert (tmp_path / "real_crosscheck.csv").read_bytes() == before
    assert "| all |" in (tmp_path / "real_crosscheck.md").read_text()


def test_real_watermarks_quick(tmp_path):
    _needs_llm()
    from paper_figs import real_watermarks as rw

    written = rw.main(tmp_path, quick=True)
    assert len([p for p in written if p.suffix == ".png"]) == 4
    fr = pd.read_csv(tmp_path / "real_wm_frontier.csv")
    assert set(fr["decoder"]) == set(rw.FRONTIER_DECODERS)
    # unkeyed decoders: the detector's pivots are those of an unwatermarked text; PFR and
    # MWS (DeltaGumbel reweight) emit the same keyed chain
    pfr, mws = (fr[fr["decoder"] == d].iloc[0] for d in ("pfr", "mws"))
    assert pfr["anlppt_u"] == mws["anlppt_u"] and pfr["aatps"] == mws["aatps"]
    det = pd.read_csv(tmp_path / "real_wm_detection.csv")
    h0 = det[det["decoder"] == "h0"]
    assert (h0["n_sequences"] == rw.N_WRONG_KEYS * len(rw.DETECTION_DECODERS)).all()
    assert ((h0["ci999_low"] <= h0["tpr"]) & (h0["tpr"] <= h0["ci999_high"])).all()
    sub = pd.read_csv(tmp_path / "real_wm_substitution.csv")
    summ = sub[sub["row_type"] == "summary"].set_index("decoder")
    # PFR's output depends on the target and the key only (drafter invariance)
    assert summ.at["pfr", "rouge_l_minpair"] == 1.0 and summ.at["pfr", "identical_fraction"] == 1
    assert (summ.filter(like="tpr_drift").loc["pfr"] == 0).all()
    assert "| pfr |" in (tmp_path / "real_wm_substitution.md").read_text()


def test_real_run_options_are_parsed(tmp_path):
    from paper_figs import _real_runs as rr

    seen = {}

    def main(out, quick, **params):
        seen.update(out=str(out), quick=quick, **params)
        return []

    out = tmp_path / "d"
    cli(main, "doc", rr.PARAMS, "real_x", ["--quick", "--out", str(out), "--target", "m",
                                           "--draft", "early_exit:20", "--tokens", "3"])
    assert seen == {"out": str(out), "quick": True, "target": "m", "draft": "early_exit:20",
                    "tokens": 3}  # converted and checked as the command line is parsed
    t = pd.read_csv(out / "timings.csv", keep_default_na=False)
    assert t["study"].tolist() == ["real_x"]
    assert json.loads(t["params"].iloc[0]) == {"target": "m", "draft": "early_exit:20",
                                               "tokens": 3}
    s = rr.settings(True, **resolve_params(rr.PARAMS, True, {"tokens": "3", "prompts": 2}))
    assert (s.max_new_tokens, s.per_set, s.max_prompt_tokens) == (3, 2, rr.QUICK.max_prompt_tokens)
    assert rr.settings(True, **resolve_params(rr.PARAMS, True, {})) == rr.QUICK
    s = rr.settings(False, draft="early_exit:20")
    assert s.draft == "early_exit:20" and s.signature() != rr.FULL.signature()
    assert rr.substitute_drafts(rr.settings(False, draft="temperature:0.8")) == (
        "temperature:0.8", "temperature:0.5", "temperature:2.5")
    spec = rr.resolve([rr.RunSpec("pfr")], s)[0]
    assert spec.id == "pfr-L4-B1-early_exit:20"
    with pytest.raises(ValueError, match="draft"):
        rr.settings(False, draft="nonsense")


# ------------------------------------ Table 15's ROUGE-L: prompt type x length (real_wm_rouge)


def test_summarisation_rule():
    from paper_figs import _real_runs as rr

    text = "x" * rr.SUMMARIZE_MIN_TEXT
    assert rr.asks_to_summarize("Summarize this article:\n\n" + text)
    assert rr.asks_to_summarize("Please summarise the passage below\n" + text)
    assert rr.asks_to_summarize("Write a SUMMARY of:\n" + text)
    assert not rr.asks_to_summarize("Do not summarize, just say ok\n" + text)
    assert not rr.asks_to_summarize("Summarize this article:\n\n" + text[:-1])  # text too short
    assert not rr.asks_to_summarize("Summaries are nice\n" + text)  # no whole word
    assert not rr.asks_to_summarize("a" * rr.SUMMARIZE_MAX_HEAD + " summarize\n" + text)
    assert not rr.asks_to_summarize(text + "\nSummarize")  # the request must come first


def test_run_spec_seed():
    from paper_figs import _real_runs as rr

    s = rr.FULL
    a, b = rr.RunSpec("ar", L=1, draft="d"), rr.RunSpec("ar", L=1, draft="d", seed=2)
    assert a.id == "ar-L1-B1-d" and b.id == "ar-L1-B1-d-s2"  # seed 0 keeps the old ids
    assert a.run_seed(s, 3) == s.run_seed + 3
    u = [np.random.default_rng(rr.RunSpec("ar", seed=k).run_seed(s, 0)).random()
         for k in (1, 2)]
    assert u[0] != u[1]


def test_rouge_pair_scores():
    from paper_figs import real_wm_rouge as rg

    assert rg.shared_prefix([1, 2, 3], [1, 2, 4]) == 2 and rg.shared_prefix([1], [1, 5]) == 1
    outs = [np.array([1, 2, 3, 4]), np.array([1, 2, 3, 4]), np.array([5, 2, 6, 4])]
    sc = rg.pair_scores(outs, 4)
    # pairs: (0,1) identical -> 1; (0,2), (1,2): LCS [2, 4] -> 2*2/8 = 0.5
    assert sc["minpair"] == 0.5 and sc["meanpair"] == pytest.approx(2 / 3)
    assert sc["prefix"] == pytest.approx(1 / 3)
    assert rg.pair_scores(outs, 1) == {"minpair": 0.0, "meanpair": 1 / 3, "prefix": 1 / 3}


def _fake_runs(sp, sets, outputs, n0=5, entropy=1.5):
    """A runs frame: ``outputs[decoder][prompt][k]`` generated tokens of the k-th run; the
    plain samples' recorded entropy ``entropy`` at every position."""
    rows = []
    for dec, group in sp.items():
        for k, x in enumerate(group):
            for i, ps in enumerate(sets):
                gen = outputs[dec][i][k]
                rows.append({"config": x.id, "prompt": i, "prompt_set": ps, "prompt_index": i,
                             "prompt_length": n0,
                             "tokens": " ".join(map(str, [0] * n0 + list(gen))),
                             "entropy": " ".join([repr(entropy)] * len(gen))
                             if x.decoder == "ar"
                             else np.nan})
    return pd.DataFrame(rows)


def test_rouge_study_on_fabricated_runs():
    """Set A: identical outputs for VSpS, disjoint for MSE; set B the reverse; the floor
    identical in A's first half only: every cell, effect and entropy row follows."""
    from paper_figs import _real_runs as rr
    from paper_figs import real_wm_rouge as rg

    s = rg.FULL
    sp = rg.specs(s)
    sets = ["sharegpt", "sharegpt", rr.SUMMARIZE_SET, rr.SUMMARIZE_SET]
    T = 8
    same = [list(range(1, T + 1))] * 4
    apart = [[100 * (k + 1) + t for t in range(T)] for k in range(4)]
    half = [list(range(1, T // 2 + 1)) + [50 * (k + 1) + t for t in range(T // 2)]
            for k in range(4)]
    outputs = {"vsps": [same, same, apart, apart], "mse": [apart, apart, same, same],
               "floor": [half, half, apart, apart]}
    Ts = {"vsps": (4, 8), "mse": (4, 8), "floor": (4, 8)}
    df = rg.compute_frame(_fake_runs(sp, sets, outputs), s, sp, Ts)
    cell = df[df["row_type"] == "cell"].set_index(["prompt_set", "decoder", "T"])
    assert cell.at[("sharegpt", "vsps", 8), "rouge_l_minpair"] == 1.0
    assert cell.at[("sharegpt", "vsps", 8), "rouge_l_minpair_se"] == 0.0
    assert cell.at[(rr.SUMMARIZE_SET, "vsps", 8), "rouge_l_minpair"] == 0.0
    assert cell.at[(rr.SUMMARIZE_SET, "mse", 4), "rouge_l_minpair"] == 1.0
    assert cell.at[("sharegpt", "floor", 4), "rouge_l_minpair"] == 1.0
    assert cell.at[("sharegpt", "floor", 8), "rouge_l_minpair"] == 0.5
    assert cell.at[("sharegpt", "floor", 8), "shared_prefix"] == 0.5
    assert cell.at[("sharegpt", "vsps", 8), "paper_rouge_l"] == rg.PAPER["vsps"]
    eff = df[df["row_type"] == "effect"].set_index(["effect", "prompt_set", "decoder", "T"])
    assert eff.at[("length", "sharegpt", "floor", 8), "diff"] == -0.5
    assert eff.at[("over_floor", "sharegpt", "vsps", 8), "diff"] == 0.5
    assert eff.at[("over_floor", rr.SUMMARIZE_SET, "mse", 8), "diff"] == 1.0
    key = ("type", f"{rr.SUMMARIZE_SET} - sharegpt")
    assert eff.at[(*key, "vsps", 4), "diff"] == -1.0
    assert eff.at[(*key, "mse", 8), "diff"] == 1.0
    ent = df[df["row_type"] == "entropy"]
    np.testing.assert_allclose(ent["entropy"], 1.5)
    per = df[(df["row_type"] == "prompt") & (df["decoder"] == "floor") & (df["T"] == 8)]
    assert list(per["rouge_l_minpair"]) == [0.5, 0.5, 0.0, 0.0]
    md = rg.table(df)
    assert "| sharegpt | vsps | 1.000 ± 0.000 | 1.000 ± 0.000 |" in md


def test_rouge_extended_settings():
    """``--summaries N``: the summarisation set only, N prompts, tau = 1 and 0.5; everything
    else (and so the run signature of a given N) as the full study."""
    from dataclasses import replace

    from paper_figs import _real_runs as rr
    from paper_figs import real_wm_rouge as rg

    s = rg.settings(False, summaries=5)
    assert s.per_set == 5 and s.sets == (rr.SUMMARIZE_SET,)
    assert s == replace(rg.FULL, per_set=5, sets=(rr.SUMMARIZE_SET,))
    assert s.signature() != rg.FULL.signature()
    assert rg._temperatures(False, 5) == rg.EXTENDED_TEMPERATURES == (0.5,)
    assert rg._temperatures(False, None) == rg.TEMPERATURES[False]
    with pytest.raises(ValueError, match="^summaries"):
        rg.settings(False, summaries=0)


def test_rouge_tau_frame_on_fabricated_runs():
    """Entropy section: at tau = 1 the outputs are disjoint (min-pair 0), at tau = 0.5 VSpS's
    and the floor's agree in their first half and MSE's fully: the cells, the entropy of each
    level, the paired effects against tau = 1 and the summary follow; chat prompts are left
    out (the section's sets only)."""
    from paper_figs import _real_runs as rr
    from paper_figs import real_wm_rouge as rg

    s = rg.FULL
    sp = rg.tau_specs(s)
    assert set(sp) == {"vsps", "mse", "floor"} and len(sp["floor"]) == s.n_floor
    sets = ["sharegpt", rr.SUMMARIZE_SET, rr.SUMMARIZE_SET]
    T = 8
    apart = [[100 * (k + 1) + t for t in range(T)] for k in range(4)]
    same = [list(range(1, T + 1))] * 4
    half = [list(range(1, T // 2 + 1)) + [50 * (k + 1) + t for t in range(T // 2)]
            for k in range(4)]
    lvl1 = _fake_runs(sp, sets, {d: [apart] * 3 for d in sp}, entropy=2.0)
    lvl05 = _fake_runs(sp, sets, {"vsps": [half] * 3, "mse": [same] * 3,
                                  "floor": [apart, half, half]}, entropy=0.5)
    df = rg.tau_frame({1.0: lvl1, 0.5: lvl05}, s, sp, (4, 8))
    assert set(df["prompt_set"]) == {rr.SUMMARIZE_SET}
    cell = df[df["row_type"] == "tau_cell"].set_index(["temperature", "decoder", "T"])
    assert cell.at[(1.0, "vsps", 8), "rouge_l_minpair"] == 0.0
    assert cell.at[(0.5, "vsps", 8), "rouge_l_minpair"] == 0.5
    assert cell.at[(0.5, "vsps", 4), "rouge_l_minpair"] == 1.0
    assert cell.at[(0.5, "mse", 8), "rouge_l_minpair"] == 1.0
    assert cell.at[(0.5, "floor", 8), "rouge_l_meanpair"] == 0.5  # the chat prompt left out
    assert cell.at[(0.5, "floor", 8), "entropy"] == 0.5
    assert cell.at[(1.0, "mse", 4), "entropy"] == 2.0
    assert (cell["n_prompts"] == 2).all() and (cell["paper_entropy"] == rg.PAPER_ENTROPY).all()
    ent = df[df["row_type"] == "tau_entropy"].set_index(["temperature", "T"])
    assert ent.at[(0.5, 8), "entropy"] == 0.5 and ent.at[(1.0, 8), "entropy"] == 2.0
    eff = df[df["row_type"] == "tau_effect"].set_index(["effect", "temperature", "decoder",
                                                        "T"])
    assert eff.at[("temperature", 0.5, "vsps", 8), "diff"] == 0.5
    assert eff.at[("temperature", 0.5, "vsps", 8), "temperature_ref"] == 1.0
    assert eff.at[("temperature", 0.5, "ar", 8), "diff"] == -1.5
    assert eff.at[("over_floor", 0.5, "mse", 8), "diff"] == 0.5
    assert eff.at[("over_floor", 1.0, "vsps", 4), "diff"] == 0.0
    per = df[(df["row_type"] == "tau_prompt") & (df["temperature"] == 0.5)
             & (df["decoder"] == "mse") & (df["T"] == 8)]
    assert list(per["rouge_l_minpair"]) == [1.0, 1.0]
    summ = rg.tau_summary(df).set_index("temperature")
    assert summ.at[0.5, "T"] == 8 and summ.at[0.5, "mse"] == 1.0
    assert summ.at[0.5, "floor_meanpair"] == 0.5 and summ.at[1.0, "entropy"] == 2.0
    md = rg.table(df)
    assert f"| {rr.SUMMARIZE_SET} | 0.5 | mse | 1.000 ± 0.000 | 1.000 ± 0.000 |" in md
    assert f"| {rr.SUMMARIZE_SET} | 0.5 | entropy | 0.50 ± 0.00 | 0.50 ± 0.00 |" in md
    with pytest.raises(ValueError, match="levels"):
        rg.tau_frame({0.5: lvl05}, s, sp, (4, 8))
    with pytest.raises(ValueError, match="levels"):  # another number of prompts
        rg.tau_frame({1.0: lvl1, 0.5: lvl05[lvl05["prompt"] != 2]}, s, sp, (4, 8))
    other = lvl05.assign(prompt_index=lvl05["prompt_index"] + 7)
    with pytest.raises(ValueError, match="other prompts"):  # not the same prompts
        rg.tau_frame({1.0: lvl1, 0.5: other}, s, sp, (4, 8))
    with pytest.raises(ValueError, match="s:"):
        rg.tau_settings(rg.RougeSettings(sets=("sharegpt",)), 0.5)
    ts = rg.tau_settings(s, 0.3)
    assert ts.temperature == 0.3 and ts.sets == rg.TAU_SETS and ts.max_new_tokens == 64
    assert ts.signature() != s.signature() and rg.tau_store(0.3) == "real_wm_rouge_tau030_runs"


def test_real_wm_rouge_quick(tmp_path):
    """One summarisation prompt, 8 tokens, two drafts, two plain samples on the embedded
    model: the study's numbers are the ROUGE-L of the stored runs, the recorded entropy is
    the target's processed law at the generated contexts."""
    _needs_llm()
    from paper_figs import _real_runs as rr
    from paper_figs import real_wm_rouge as rg
    from specbound.sim import rouge_l

    written = rg.main(tmp_path, quick=True)
    assert {p.suffix for p in written} == {".png", ".csv", ".md"}
    df = pd.read_csv(tmp_path / "real_wm_rouge.csv")
    dec_runs = pd.read_csv(tmp_path / "real_wm_rouge_runs.csv")
    plain = pd.read_csv(tmp_path / "real_wm_rouge_floor_runs.csv")
    runs = pd.concat([dec_runs, plain])
    s = rg.settings(True)
    sp = rg.specs(s)
    assert set(dec_runs["config"]) == {x.id for d in rg.DECODERS for x in sp[d]}
    assert set(plain["config"]) == {x.id for x in sp[rg.FLOOR]}
    assert set(runs["prompt_set"]) == {rr.SUMMARIZE_SET}
    assert (dec_runs["n_generated"] == s.max_new_tokens).all()
    assert (plain["n_generated"] == rg.FLOOR_TOKENS[True]).all()
    (text,) = [t for _, _, t in rr.prompt_texts(s)]
    assert rr.asks_to_summarize(text)
    cell = df[df["row_type"] == "cell"].set_index(["decoder", "T"])
    sz = rg.sizes(s)["T"]
    assert max(sz["vsps"]) == s.max_new_tokens and max(sz["floor"]) == rg.FLOOR_TOKENS[True]
    for dec, group in sp.items():
        a, b = (rr.parse(runs[runs["config"] == x.id]["tokens"].iloc[0], np.int64)
                for x in group)
        n0 = int(runs["prompt_length"].iloc[0])
        for T in sz[dec]:
            assert cell.at[(dec, T), "rouge_l_minpair"] == rouge_l(a[n0:n0 + T], b[n0:n0 + T])
    # entropy at the first and last generated context, recomputed from the model
    ar = plain[plain["config"] == sp[rg.FLOOR][0].id].iloc[0]
    toks = rr.parse(ar["tokens"], np.int64)
    pair = rr.pair_for(s, s.draft)
    n0 = int(ar["prompt_length"])
    for t in (0, rg.FLOOR_TOKENS[True] - 1):  # uncached forward: equal up to float32 rounding
        p = pair.next_token_probs([toks[:n0 + t]])[0]
        p = p[p > 0]
        assert rr.parse(ar["entropy"])[t] == pytest.approx(-(p * np.log(p)).sum(), rel=1e-4)
    assert 0 < df[df["row_type"] == "entropy"]["entropy"].min() <= np.log(s.top_k)
    # resuming recomputes nothing
    names = ("real_wm_rouge_runs.csv", "real_wm_rouge_floor_runs.csv",
             *(f"{rg.tau_store(t)}.csv" for t in rg.TEMPERATURES[True]))
    before = [(tmp_path / n).read_bytes() for n in names]
    rg.main(tmp_path, quick=True)
    assert [(tmp_path / n).read_bytes() for n in names] == before
    assert "| sharegpt_summarize | floor |" in (tmp_path / "real_wm_rouge.md").read_text()
    # entropy section: the lowered temperature's own store, scored like the main runs
    (tau,) = rg.TEMPERATURES[True]
    ts = rg.tau_settings(s, tau)
    tsp = rg.tau_specs(s)
    low = pd.read_csv(tmp_path / f"{rg.tau_store(tau)}.csv")
    assert set(low["config"]) == {x.id for g in tsp.values() for x in g}
    assert (low["setting_temperature"] == tau).all()
    assert (low["n_generated"] == rg.TAU_TOKENS[True]).all()
    tcell = df[df["row_type"] == "tau_cell"].set_index(["temperature", "decoder", "T"])
    assert set(tcell.index.get_level_values(0)) == {1.0, tau}
    for dec, group in tsp.items():
        for t, rr_ in ((1.0, runs), (tau, low)):
            a, b = (rr.parse(rr_[rr_["config"] == x.id]["tokens"].iloc[0], np.int64)
                    for x in group)
            for T in rg.tau_grid(s):
                assert tcell.at[(t, dec, T), "rouge_l_minpair"] == rouge_l(a[n0:n0 + T],
                                                                           b[n0:n0 + T])
    # the first generated context is the prompt at either temperature: the lowered one's
    # processed law has the lower entropy, recomputed from the model at tau
    first = low[low["config"] == tsp[rg.FLOOR][0].id].iloc[0]
    p = rr.pair_for(ts, ts.draft).next_token_probs([toks[:n0]])[0]
    p = p[p > 0]
    h_low = rr.parse(first["entropy"])[0]
    assert h_low == pytest.approx(-(p * np.log(p)).sum(), rel=1e-4)
    assert h_low < rr.parse(ar["entropy"])[0]


def test_default_parameters_leave_the_settings_unchanged():
    """The parameter tables reproduce the settings of earlier versions exactly (same
    signatures: stored runs resume, outputs unchanged)."""
    from paper_figs import _real_runs as rr
    from paper_figs import real_wm_rouge as rg

    for quick, ref in ((True, rr.QUICK), (False, rr.FULL)):
        s = rr.settings(quick, **resolve_params(rr.PARAMS, quick, {}))
        assert s == ref and s.signature() == ref.signature()
    for quick, ref in ((True, rg.QUICK), (False, rg.FULL)):
        v = resolve_params(rg.PARAMS, quick, {})
        assert rg.settings(quick, **v) == ref and v.changed == {}
    assert rg.settings(False, **resolve_params(rg.PARAMS, False, {"summaries": 5})) == (
        rg.settings(False, summaries=5))


def test_real_runs_chunks_bound_sequences_and_positions():
    """The batched runs' groups: every prompt once, each group within the sequence and the
    padded-position bounds (a single prompt beyond them still gets its own group), prompts
    of similar length together."""
    from paper_figs import _real_runs as rr

    rng = np.random.default_rng(0)
    lengths = [int(x) for x in rng.integers(20, 700, size=64)]
    for B in (1, 2, 4, 8):
        groups = rr.chunks(lengths, B, 64)
        flat = [i for g in groups for i in g]
        assert sorted(flat) == list(range(64))
        for g in groups:
            rows = len(g) * B
            assert len(g) == 1 or (rows <= rr.BATCH_SEQUENCES and rows * (
                max(lengths[i] for i in g) + 64) <= rr.BATCH_POSITIONS)
        # groups in increasing length: a group's longest prompt is at most the next's shortest
        for a, b in zip(groups, groups[1:], strict=False):
            assert max(lengths[i] for i in a) <= min(lengths[i] for i in b)
    assert rr.chunks([5000], 4, 64) == [[0]]


# ----------------------------------------------------------------------------- the study log


def _fake_study_log(out_dir, settings):
    """A copy of the shipped log placed as ``out_dir``'s study log, stamped with ``settings``
    (a complete log: every prompt logged)."""
    import shutil

    from specbound.llm.logs import shipped_log_path

    path = _real_log.study_log_path(out_dir)
    shutil.copytree(shipped_log_path(), path)
    (path / "SHA256SUMS").unlink()  # edited below: the checksums would no longer match
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["meta"]["extra"]["settings"] = settings
    (path / "manifest.json").write_text(json.dumps(manifest))
    for sub in manifest["subdirs"]:  # every sub-log repeats the settings
        meta = json.loads((path / sub / "meta.json").read_text())
        meta["meta"]["extra"]["settings"] = settings
        (path / sub / "meta.json").write_text(json.dumps(meta))
    return path


def test_which_log_a_script_reads(tmp_path, user_log, monkeypatch):
    """--log wins; a quick run reads the shipped log; a full run its study log, which a
    complete log with the studies' settings is reused as is (no model is loaded)."""
    from paper_figs import _real_runs as rr
    from specbound import llm

    assert _real_log.resolve_log(str(user_log), tmp_path, quick=False) == str(user_log)
    assert _real_log.resolve_log(None, tmp_path, quick=True) is None
    assert _real_log.index_log(tmp_path) is None  # no study log: the shipped log
    path = _fake_study_log(tmp_path, rr.FULL.signature())
    assert _real_log.complete_log(path)

    def no_model(*a, **k):
        raise AssertionError("a complete study log was rebuilt")

    monkeypatch.setattr(llm, "load_pair", no_model)
    assert _real_log.resolve_log(None, tmp_path, quick=False) == str(path)
    assert _real_log.index_log(tmp_path) == str(path)
    assert len(set(read_log(path).prompt_ids)) == 12


def test_a_study_log_of_other_settings_or_incomplete_is_not_used(tmp_path, monkeypatch):
    from specbound import llm

    path = _fake_study_log(tmp_path, "other-settings")
    calls = []

    def stop(*a, **k):
        calls.append(1)
        raise RuntimeError("would load the model")

    monkeypatch.setattr(llm, "load_pair", stop)
    with pytest.raises(RuntimeError, match="would load"):
        _real_log.study_log(tmp_path, progress=False)
    assert calls == [1] and not path.exists()  # removed, to be rebuilt
    # a log missing a prompt is not complete, and INDEX time falls back to the shipped log
    part = tmp_path / "part"
    with DistributionLog(part, vocab_size=V, drafts=["d"], target_model="toy",
                         processing={"temperature": 1.0, "top_k": None, "top_p": None},
                         prompts=["a", "b"]) as log:
        p = np.full(V, 1 / V)
        log.record(0, [1], p, [p])
    assert not _real_log.complete_log(part)
    assert not _real_log.complete_log(tmp_path / "nothing")


@pytest.mark.slow
def test_study_log_is_built_resumed_and_read(tmp_path):
    """A study log at a small scale (one prompt of each set, 4 tokens) on the embedded model:
    built, complete, and reused as is (no model load, nothing rewritten)."""
    from paper_figs import _real_runs as rr

    s = rr.settings(False, prompts=1, tokens=4)
    path = _real_log.study_log(tmp_path, progress=False, settings=s)
    lg = read_log(path)
    assert _real_log.complete_log(path) and len(set(lg.prompt_ids)) == 3
    assert list(lg.drafts) == list(_real_log.STUDY_DRAFTS) and len(lg) <= 3 * 4
    stamp = (path / "manifest.json").stat().st_mtime_ns
    assert _real_log.study_log(tmp_path, progress=False, settings=s) == path
    assert (path / "manifest.json").stat().st_mtime_ns == stamp


def test_index_time_csvs_are_redone_after_a_newer_real_lossy(tmp_path):
    import os

    name = "claims_collaborative_embedded.csv"
    assert _real_log.index_file_stale(tmp_path, name)  # missing
    (tmp_path / name).write_text("x\n")
    assert not _real_log.index_file_stale(tmp_path, name)  # no real_lossy: kept (fabricated)
    (tmp_path / "real_lossy.csv").write_text("y\n")
    t = (tmp_path / name).stat().st_mtime_ns
    os.utime(tmp_path / "real_lossy.csv", ns=(t + 10**9, t + 10**9))
    assert _real_log.index_file_stale(tmp_path, name)  # real_lossy redone since: redo
    os.utime(tmp_path / name, ns=(t + 2 * 10**9, t + 2 * 10**9))
    assert not _real_log.index_file_stale(tmp_path, name)


def test_a_full_run_builds_the_study_log_in_the_background(tmp_path, capsys):
    """run_all starts the study log's builder at once in a full run whose scripts read a log,
    and the first such script runs after the builder has finished (here the log is already
    complete, so the spawned builder only checks it); a quick run, and a run without such a
    script, start nothing."""
    import types

    from paper_figs import _real_runs as rr
    from paper_figs import run_all

    _fake_study_log(tmp_path, rr.FULL.signature())
    seen = []

    def main(out_dir, quick=False):
        seen.append(("log", quick))
        return []

    reader = types.ModuleType("paper_figs.real_fake")
    reader.main, reader.PARAMS = main, (_real_log.LOG_PARAM,)
    plain = types.ModuleType("paper_figs.plain_fake")
    plain.main, plain.PARAMS = (lambda out_dir, quick=False: seen.append(("plain", quick))), ()
    assert run_all.main(["--out", str(tmp_path)], modules=[plain, reader]) == 0
    out = capsys.readouterr().out
    assert "building the study log" in out and "(exit code 0)" in out
    assert out.index("(exit code 0)") > out.index("paper_figs.real_fake ...")
    assert seen == [("plain", False), ("log", False)]
    assert run_all.start_study_log(tmp_path, True, [reader]) is None
    assert run_all.start_study_log(tmp_path, False, [plain]) is None


def test_refresh_index_csv_produces_only_where_real_lossy_has_run(tmp_path):
    name, calls = "claims_truncation_embedded.csv", []

    def produce(out_dir, log):
        calls.append(log)
        (tmp_path / name).write_text("x\n")

    assert not _real_log.refresh_index_csv(tmp_path, name, produce) and calls == []
    (tmp_path / "real_lossy.csv").write_text("y\n")
    assert _real_log.refresh_index_csv(tmp_path, name, produce) and calls == [None]
    assert _real_log.refresh_index_csv(tmp_path, name, produce) and calls == [None]  # fresh


def test_real_ngram_quick(tmp_path):
    """The prompt-lookup study in quick mode: one prompt x 6 tokens per configuration."""
    _needs_llm()
    from paper_figs import real_ngram as ng

    written = ng.main(tmp_path, quick=True)
    assert {p.suffix for p in written} == {".png", ".csv"}
    S = pd.read_csv(tmp_path / "real_ngram.csv")
    from paper_figs import _real_runs as rr

    specs = rr.resolve(ng.SPECS, rr.QUICK)
    assert list(dict.fromkeys(S["config"])) == [ng.label(s) for s in specs]
    assert ((S["aatps"] >= 1) & (S["aatps"] <= 5)).all()
    ngram = S[S["draft"] == ng.NGRAM]
    # a lookup costs no model forward: at most one target forward per generated token
    assert (ngram["target_forwards_per_token"] <= 1).all()
    pred = S[S["decoder"].isin(["vsps", "mpfr"])]
    assert pred["predicted_aatps"].between(1, 5).all()
    assert S[S["decoder"].isin(["ar", "specinfer"])]["predicted_aatps"].isna().all()
    K = pd.read_csv(tmp_path / "real_ngram_keyed.csv")
    assert len(K) == 3 and K["same_tokens"].between(0, 1).all()
    assert (K["log10_p_median"] <= 0).all()
