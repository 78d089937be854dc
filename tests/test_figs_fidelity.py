"""Content checks of the fidelity studies (``paper_figs.fidelity_*``), in quick mode.

The generic smoke test (``tests/test_figs_smoke.py``) runs every figure script; these tests
check that the numbers the docs quote from them mean what the docs say.  All checks are of
closed forms or exact identities (no false failures).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from paper_figs import fidelity_lossy
from paper_figs.run_all import figure_modules


def test_fidelity_scripts_are_registered():
    names = {m.__name__.rsplit(".", 1)[-1] for m in figure_modules()}
    assert {"fidelity_lossy", "fidelity_entropy"} <= names


@pytest.fixture(scope="module")
def lossy(tmp_path_factory):
    out = tmp_path_factory.mktemp("fidelity_lossy")
    written = fidelity_lossy.main(out, quick=True)
    return pd.read_csv(out / "fidelity_lossy.csv"), written


def test_lossy_outputs(lossy):
    df, written = lossy
    assert {p.suffix for p in written} == {".png", ".csv", ".md"}
    md = [p for p in written if p.suffix == ".md"][0].read_text(encoding="utf-8")
    for head in ("## 1. Yield rows", "## 2. SpecCascade", "## 3. η-truncation"):
        assert head in md
    assert set(df["section"]) == {"yield", "speccascade", "eta"}
    assert np.all(df["se"].dropna() >= 0)


def test_lossy_readings_share_acceptance_and_residual_ceiling_is_lenience(lossy):
    df, _ = lossy
    y = df[df["section"] == "yield"]
    for fam in set(y["family"]):
        f = y[y["family"] == fam]
        for rule in ("ceiling only", "truncation + ceiling"):
            a = [f[(f["rule"] == rule) & (f["reading"] == r) & (f["metric"] == "acceptance")]
                 ["mean"].to_numpy() for r in ("residual", "renormalize")]
            np.testing.assert_allclose(a[0], a[1], atol=1e-12)
        res = f[(f["rule"] == "ceiling only") & (f["reading"] == "residual")]
        len_ = f[f["rule"] == "lenience"]
        for metric in ("acceptance", "kl"):
            np.testing.assert_allclose(res[res["metric"] == metric]["mean"].to_numpy(),
                                       len_[len_["metric"] == metric]["mean"].to_numpy(),
                                       atol=1e-9)
        # at ℓ = 1 the residual ceiling is lossless; renormalize distorts
        kl1 = f[(f["rule"] == "ceiling only") & (f["param"] == 1.0) & (f["metric"] == "kl")]
        assert kl1[kl1["reading"] == "residual"]["mean"].iloc[0] < 1e-9
        assert kl1[kl1["reading"] == "renormalize"]["mean"].iloc[0] > 1e-3


def test_speccascade_gain_sign_depends_on_the_draft_family(lossy):
    df, _ = lossy
    s = df[(df["section"] == "speccascade") & (df["metric"] == "gain_vs_lossless")
           & (df["reading"] == "membership (Def. 1)") & (df["param"] == 0.1)]
    gain = dict(zip(s["family"], s["mean"], strict=True))
    assert gain["noisy"] < 0 < gain["sharpened"]


@pytest.fixture(scope="module")
def entropy(tmp_path_factory):
    from paper_figs import fidelity_entropy

    out = tmp_path_factory.mktemp("fidelity_entropy")
    written = fidelity_entropy.main(out, quick=True)
    return pd.read_csv(out / "fidelity_entropy.csv"), written


def test_entropy_outputs_and_exact_identities(entropy):
    df, written = entropy
    assert {p.suffix for p in written} == {".png", ".csv", ".md"}
    assert set(df["section"]) == {"multidraft", "single", "rouge", "drift"}
    cal = df[df["family"] == "calibrated"]
    # the calibration reached its targets
    np.testing.assert_allclose(cal["entropy_achieved"], cal["entropy_target"], atol=1e-5)
    # MWS with the DeltaGumbel reweight is PFR token for token: gap exactly 0
    g = df[(df["decoder"] == "pfr/mws") & (df["metric"] == "aatps_gap")]
    assert len(g) > 0 and np.all(g["mean"] == 0.0)
    # PFR is drafter invariant: ROUGE-L 1 under drafter substitution
    r = df[(df["section"] == "rouge") & (df["decoder"] == "pfr")]
    assert np.all(r["mean"] == 1.0)
    # section 4: per calibrated family of --drift-entropy, decoder and T_eval, four drafter
    # TPRs and one drift, the drift being max − min of the four
    d = df[df["section"] == "drift"]
    assert set(d["family"]) == {"calibrated"} and set(d["decoder"]) == {"mse", "mse_pseudo"}
    for _, g in d.groupby(["entropy_target", "decoder"]):
        tpr = g[g["metric"] == "tpr_T12"]
        drift = g[g["metric"] == "tpr_drift_T12"]
        assert sorted(tpr["drafter"]) == ["D0", "D1", "D2", "D3"] and len(drift) == 1
        assert drift["mean"].iloc[0] == pytest.approx(tpr["mean"].max() - tpr["mean"].min())


def test_ratio_gap_standard_error():
    from paper_figs.fidelity_entropy import ratio_gap

    g, se = ratio_gap([4, 6, 5], [2, 2, 2], [4, 6, 5], [2, 2, 2])
    assert g == 0.0 and se == 0.0
    g, se = ratio_gap([6, 6], [2, 2], [3, 3], [1, 1])
    assert g == 0.0 and se == 0.0
    g, se = ratio_gap([8, 4], [2, 2], [3, 3], [1, 1])
    assert g == pytest.approx(0.0) and se > 0
