"""INDEX verdicts of the real-model decoding claims (``paper_figs._index_real``).

Each claim is fed a fabricated CSV where it holds and one where it fails, and the verdict
must follow; a missing file gives "not run".  Every input is fixed: nothing here is
statistical.
"""

from __future__ import annotations

import pandas as pd
import pytest

from paper_figs import _index_real as ir
from paper_figs import index as ix

CLAIMS = {c.key: c for c in ix.CLAIMS}
REAL_KEYS = ("real_crosscheck", "real_pfr_vs_nowm", "real_pfr_vs_vsps",
             "real_pfr_dominates_mws", "real_pfr_dominates_mse", "real_pfr_dominates_mse_pseudo",
             "real_mpfr_vs_invariant", "real_mpfr_anlppt", "real_anlppt_stable",
             "real_tpr_match", "real_tpr_weaker", "real_h0_floor", "real_drift_pfr",
             "real_drift_mse", "real_rouge_invariant", "real_rouge_variant",
             "real_rouge_paper_setting", "real_rouge_entropy")


def verdict(out_dir, key):
    (row,) = ix.evaluate(out_dir, [CLAIMS[key]])
    return row.outcome.verdict


def test_every_real_claim_is_registered_as_real():
    for key in REAL_KEYS:
        assert CLAIMS[key].model == "real", key
        assert CLAIMS[key].script in ("real_crosscheck", "real_watermarks", "real_wm_rouge")


@pytest.mark.parametrize("key", REAL_KEYS)
def test_missing_output_is_not_run(tmp_path, key):
    assert verdict(tmp_path, key) == ix.NOT_RUN


def _xcheck(tmp_path, z_of_mpfr):
    rows = [{"decoder": d, "aatps": 3.0, "predicted_aatps": 3.0 - 0.01 * z, "diff": 0.01 * z,
             "diff_se": 0.01, "z": z}
            for d, z in (("vsps", 0.5), ("pfr", -1.0), ("mpfr B=2", z_of_mpfr), ("all", 0.2))]
    pd.DataFrame(rows).to_csv(tmp_path / ir.XCHECK, index=False)


def test_crosscheck_flips(tmp_path):
    _xcheck(tmp_path, 1.0)
    assert verdict(tmp_path, "real_crosscheck") == ix.REPRODUCED
    _xcheck(tmp_path, -4.0)  # one decoder off by 4 standard errors
    assert verdict(tmp_path, "real_crosscheck") == ix.NOT_REPRODUCED
    _xcheck(tmp_path, 1.0)
    df = pd.read_csv(tmp_path / ir.XCHECK)
    df.loc[df["decoder"] == "all", "diff_se"] = 0.2  # pooled sample too small for 5%
    df.to_csv(tmp_path / ir.XCHECK, index=False)
    assert verdict(tmp_path, "real_crosscheck") == ix.NOT_DISTINGUISHABLE
    df[df["decoder"] != "all"].to_csv(tmp_path / ir.XCHECK, index=False)
    assert verdict(tmp_path, "real_crosscheck") == ix.NOT_RUN


def _frontier(tmp_path, pfr_aatps, pfr_anlppt=0.5):
    rows = []
    for L in (1, 2):
        for dec, a, w in (("pfr", pfr_aatps, pfr_anlppt), ("pfr_nowm", 2.0, 0.0),
                          ("vsps", 2.0, 0.0), ("mws", 1.5, 0.2), ("mse", 1.5, 0.2),
                          ("mse_pseudo", 1.5, 0.2)):
            rows.append({"decoder": dec, "L": L, "aatps": a, "aatps_se": 0.01,
                         "anlppt_u": w, "anlppt_u_se": 0.01, "theory_aatps": a})
    pd.DataFrame(rows).to_csv(tmp_path / ir.FRONTIER, index=False)


def test_frontier_claims_flip(tmp_path):
    _frontier(tmp_path, 2.005)
    for key in ("real_pfr_vs_nowm", "real_pfr_vs_vsps", "real_pfr_dominates_mws",
                "real_pfr_dominates_mse", "real_pfr_dominates_mse_pseudo"):
        assert verdict(tmp_path, key) == ix.REPRODUCED, key
    _frontier(tmp_path, 1.2)  # PFR accepts much less
    for key in ("real_pfr_vs_nowm", "real_pfr_vs_vsps", "real_pfr_dominates_mws"):
        assert verdict(tmp_path, key) == ix.NOT_REPRODUCED, key


def _scaling(tmp_path, mpfr_aatps, anlppt_by_B):
    rows = []
    for B, w in zip((2, 4), anlppt_by_B, strict=True):
        rows.append({"decoder": "mpfr", "B": B, "aatps": mpfr_aatps, "aatps_se": 0.01,
                     "anlppt_u": w, "anlppt_u_se": 0.001})
        rows.append({"decoder": "invariant", "B": B, "aatps": 3.0, "aatps_se": 0.01,
                     "anlppt_u": 0.0, "anlppt_u_se": 0.001})
    pd.DataFrame(rows).to_csv(tmp_path / ir.SCALING, index=False)


def test_scaling_claims_flip(tmp_path):
    _scaling(tmp_path, 3.001, (0.4, 0.4))
    for key in ("real_mpfr_vs_invariant", "real_mpfr_anlppt", "real_anlppt_stable"):
        assert verdict(tmp_path, key) == ix.REPRODUCED, key
    _scaling(tmp_path, 2.5, (0.4, 0.2))
    assert verdict(tmp_path, "real_mpfr_vs_invariant") == ix.NOT_REPRODUCED
    assert verdict(tmp_path, "real_anlppt_stable") == ix.NOT_REPRODUCED
    _scaling(tmp_path, 3.0, (-0.4, -0.4))
    assert verdict(tmp_path, "real_mpfr_anlppt") == ix.NOT_REPRODUCED


def _detection(tmp_path, mse_tpr, h0_fpr, mpfr_tpr=0.9):
    rows = []
    for T in (4, 8):
        for dec, t, n in (("pfr", 0.9, 600), ("mws", 0.9, 600), ("mpfr", mpfr_tpr, 600),
                          ("mse", mse_tpr, 600), ("mse_pseudo", mse_tpr, 600),
                          ("h0", h0_fpr, 20000)):
            rows.append({"decoder": dec, "T_eval": T, "tpr": t, "n_sequences": n,
                         "fpr": 0.01})
    pd.DataFrame(rows).to_csv(tmp_path / ir.DETECTION, index=False)


def test_detection_claims_flip(tmp_path):
    _detection(tmp_path, 0.3, 0.01)
    for key in ("real_tpr_match", "real_tpr_weaker", "real_h0_floor"):
        assert verdict(tmp_path, key) == ix.REPRODUCED, key
    _detection(tmp_path, 0.99, 0.03, mpfr_tpr=0.5)
    for key in ("real_tpr_match", "real_tpr_weaker", "real_h0_floor"):
        assert verdict(tmp_path, key) == ix.NOT_REPRODUCED, key


def _subst(tmp_path, pfr_drift, pfr_rouge, mse_drift, vsps_rouge):
    rows = []
    for dec, drift, rouge in (("pfr", pfr_drift, pfr_rouge), ("vsps", 0.0, vsps_rouge),
                              ("mse", mse_drift, 0.3)):
        for i in range(2):
            rows.append({"row_type": "drafter", "decoder": dec, "drafter_index": i,
                         "tpr_T4": 0.5, "tpr_T4_se": 0.02})
        rows.append({"row_type": "summary", "decoder": dec, "rouge_l_minpair": rouge,
                     "rouge_l_minpair_se": 0.01, "tpr_drift_T4": drift})
    pd.DataFrame(rows).to_csv(tmp_path / ir.SUBST, index=False)


def test_substitution_claims_flip(tmp_path):
    _subst(tmp_path, 0.0, 1.0, 0.3, 0.4)
    for key in ("real_drift_pfr", "real_drift_mse", "real_rouge_invariant",
                "real_rouge_variant"):
        assert verdict(tmp_path, key) == ix.REPRODUCED, key
    _subst(tmp_path, 0.5, 0.5, 0.3, 1.0)
    assert verdict(tmp_path, "real_drift_pfr") == ix.NOT_REPRODUCED
    assert verdict(tmp_path, "real_rouge_invariant") == ix.NOT_REPRODUCED
    assert verdict(tmp_path, "real_rouge_variant") == ix.NOT_DISTINGUISHABLE
    _subst(tmp_path, 0.0, 1.0, 0.0, 0.4)
    assert verdict(tmp_path, "real_drift_mse") == ix.NOT_DISTINGUISHABLE


def _rouge(tmp_path, vsps, mse, se=0.005):
    rows = [{"row_type": "cell", "prompt_set": ps, "decoder": dec, "T": T,
             "rouge_l_minpair": value if ps == ir.SUMMARIZE_SET and T == 64 else 0.9,
             "rouge_l_minpair_se": se}
            for ps in ("sharegpt", ir.SUMMARIZE_SET) for T in (8, 64)
            for dec, value in (("vsps", vsps), ("mse", mse), ("floor", 0.2))]
    rows.append({"row_type": "cell", "prompt_set": ir.SUMMARIZE_SET, "decoder": "floor",
                 "T": 128, "rouge_l_minpair": 0.25, "rouge_l_minpair_se": se})  # floor only
    pd.DataFrame(rows).to_csv(tmp_path / ir.ROUGE, index=False)


def test_rouge_paper_setting_flips(tmp_path):
    key = "real_rouge_paper_setting"
    _rouge(tmp_path, 0.40, 0.41)  # the paper's values within a standard error
    assert verdict(tmp_path, key) == ix.REPRODUCED
    (row,) = ix.evaluate(tmp_path, [CLAIMS[key]])
    assert "T = 64" in row.outcome.numbers and "T = 128: 0.25" in row.outcome.beyond
    _rouge(tmp_path, 0.15, 0.41)  # VSpS 49 standard errors below the paper's 0.394
    assert verdict(tmp_path, key) == ix.NOT_REPRODUCED
    _rouge(tmp_path, 0.30, 0.41, se=0.05)  # z = -1.9 but 3 se = 0.15, no 5% resolution
    assert verdict(tmp_path, key) == ix.NOT_DISTINGUISHABLE
    pd.read_csv(tmp_path / ir.ROUGE).query("decoder != 'mse'").to_csv(tmp_path / ir.ROUGE,
                                                                      index=False)
    assert verdict(tmp_path, key) == ix.NOT_RUN


def _rouge_tau(tmp_path, vsps, mse, se=0.005, h_low=0.45):
    """Entropy-section cells: tau = 1 at 1.9 nats (values 0.1), tau = 0.3 at ``h_low`` nats
    with the given VSpS/MSE values, at T = 8 (0.9 everywhere) and T = 64."""
    rows = [{"row_type": "tau_cell", "temperature": tau, "prompt_set": ps, "decoder": dec,
             "T": T, "entropy": h, "rouge_l_minpair": 0.9 if T == 8 else value,
             "rouge_l_minpair_se": se}
            for ps in ("sharegpt", ir.SUMMARIZE_SET) for T in (8, 64)
            for tau, h, vals in ((1.0, 1.9, (0.1, 0.1)), (0.3, h_low, (vsps, mse)))
            for dec, value in (("vsps", vals[0]), ("mse", vals[1]), ("floor", 0.2))]
    # a chat level at the paper's entropy with the paper's values must not be picked
    rows.append({"row_type": "tau_cell", "temperature": 0.4, "prompt_set": "sharegpt",
                 "decoder": "vsps", "T": 64, "entropy": 0.47, "rouge_l_minpair": 0.394,
                 "rouge_l_minpair_se": se})
    pd.DataFrame(rows).to_csv(tmp_path / ir.ROUGE, index=False)


def test_rouge_entropy_flips(tmp_path):
    key = "real_rouge_entropy"
    _rouge_tau(tmp_path, 0.40, 0.41)  # the paper's values within a standard error
    assert verdict(tmp_path, key) == ix.REPRODUCED
    (row,) = ix.evaluate(tmp_path, [CLAIMS[key]])
    assert "temperature 0.3" in row.outcome.numbers and "T = 64" in row.outcome.numbers
    assert "τ = 1: 1.9 nats" in row.outcome.beyond
    _rouge_tau(tmp_path, 0.15, 0.41)  # VSpS 49 standard errors below the paper's 0.394
    assert verdict(tmp_path, key) == ix.NOT_REPRODUCED
    _rouge_tau(tmp_path, 0.30, 0.41, se=0.05)  # z = -1.9, no 5% resolution
    assert verdict(tmp_path, key) == ix.NOT_DISTINGUISHABLE
    _rouge_tau(tmp_path, 0.40, 0.41, h_low=0.8)  # no level near 0.47 nats
    assert verdict(tmp_path, key) == ix.NOT_RUN
    _rouge(tmp_path, 0.40, 0.41)  # no entropy section at all
    assert verdict(tmp_path, key) == ix.NOT_RUN


def test_index_renders_real_rows_beside_synthetic(tmp_path):
    _xcheck(tmp_path, 1.0)
    rows = ix.evaluate(tmp_path)
    text = ix.render(rows, tmp_path)
    assert "real_crosscheck" in text
