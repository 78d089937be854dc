"""The figure scripts on real logged distributions (``paper_figs.real_*``), in quick mode.

``tests/test_figs_smoke.py`` already runs every figure script on the shipped log; here each
script runs on a small user log (``--log DIR``) written with ``DistributionLog`` and its
numbers are checked: bounds never exceed the exact values they bound, PML equals exact MPFR,
the Monte Carlo z-scores are small, Lemma 1's gain − loss is the direct difference.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from paper_figs import _real_log, real_bounds, real_lossy
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


def test_log_option_is_parsed():
    args = _real_log.parse(real_bounds.__doc__, ["--quick", "--log", "some/dir"])
    assert args.quick and str(args.log) == "some/dir"
    assert _real_log.parse(real_bounds.__doc__, []).log is None
    assert _real_log.subsample(10, 3).tolist() == [0, 4, 9]


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


def test_real_run_options_are_parsed():
    from paper_figs import _real_runs as rr

    seen = {}

    def main(out, quick, target, draft):
        seen.update(out=str(out), quick=quick, target=target, draft=draft)
        return []

    rr.cli(main, "doc", ["--quick", "--out", "d", "--target", "m", "--draft", "early_exit:20"])
    assert seen == {"out": "d", "quick": True, "target": "m", "draft": "early_exit:20"}
    s = rr.settings(False, draft="early_exit:20")
    assert s.draft == "early_exit:20" and s.signature() != rr.FULL.signature()
    assert rr.substitute_drafts(rr.settings(False, draft="quantized:3")) == (
        "quantized:3", "temperature:0.5", "early_exit:28")
    spec = rr.resolve([rr.RunSpec("pfr")], s)[0]
    assert spec.id == "pfr-L4-B1-early_exit:20"
    with pytest.raises(ValueError, match="draft"):
        rr.settings(False, draft="nonsense")
