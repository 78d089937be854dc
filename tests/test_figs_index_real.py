"""INDEX statistics of the real embedded model's rows (``paper_figs.claims``).

Real-model AATPS comparisons are clustered by prompt (per-prompt differences on the same
prompts, standard error sd/√n, a Student-t reference on n − 1 degrees of freedom); the null
rows count identical sequences of several decoders once; rows comparing decoders that emit
the same tokens are identities and never evidence.  Every input is fixed: nothing here is
statistical.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from paper_figs.claims import _pairs as P
from paper_figs.claims import engine as E
from paper_figs.claims import liu
from paper_figs.claims.registry import BY_ID


def _runs(tmp_path, diffs, decoders=("pfr", "vsps")):
    fr = [{"decoder": d, "L": 2, "B": 1, "draft": "temperature:1.5", "aatps": 2.0,
           "aatps_se": 0.1, "anlppt_u": 0.5 if d == "pfr" else 0.0, "anlppt_u_se": 0.01,
           "n_prompts": len(diffs), "setting_max_new_tokens": 20,
           "setting_target": "embedded"} for d in decoders]
    pd.DataFrame(fr).to_csv(tmp_path / "real_wm_frontier.csv", index=False)
    runs = []
    for i, d in enumerate(diffs):
        for dec, v in ((decoders[0], 2.0 + d), (decoders[1], 2.0)):
            runs.append({"decoder": dec, "L": 2, "B": 1, "draft": "temperature:1.5",
                         "prompt_set": "humaneval", "prompt_index": i, "aatps": v})
    pd.DataFrame(runs).to_csv(tmp_path / "real_runs.csv", index=False)


def test_real_pairs_are_clustered_by_prompt_with_a_t_reference(tmp_path):
    diffs = [0.01, -0.02, 0.015, 0.0, -0.005, 0.01]
    _runs(tmp_path, diffs)
    (p,) = P.real_pairs(E.Data(tmp_path), "real_wm_frontier.csv", "pfr", "vsps", "L")
    assert p.n == 6 and p.df == 5
    assert math.isclose(p.diff, np.mean(diffs), abs_tol=1e-12)
    assert math.isclose(p.se, np.std(diffs, ddof=1) / math.sqrt(6), rel_tol=1e-9)
    # the t reference with 6 prompts is wider than 3σ: an ordering at z = 4 is not decided
    assert E.ordering("", 4 * p.se, p.se, p.df).verdict == E.NOT_DISTINGUISHABLE
    # the claim's real column follows the prompt-clustered pairs
    (row,) = E.evaluate(tmp_path, [BY_ID["liu_pfr_vs_vsps"]])
    assert row.columns[E.REAL].verdict == E.REPRODUCED
    assert "6 prompts" in row.columns[E.REAL].sample
    _runs(tmp_path, [0.5, 0.45, 0.55, 0.5, 0.48, 0.52])  # PFR 25% above VSpS
    (row,) = E.evaluate(tmp_path, [BY_ID["liu_pfr_vs_vsps"]])
    assert row.columns[E.REAL].verdict == E.NOT_REPRODUCED


def test_real_identical_outputs_are_not_evidence(tmp_path):
    """PFR and MWS emit the same tokens: TPR equality between them is not evidence for the
    sentence (it holds by construction), so the real column reads "proved; implementation
    checked", never "reproduced"; a differing TPR is judged and fails."""
    rows = [{"decoder": d, "B": 1, "score": "aaronson", "method": "exact", "T_eval": T,
             "tpr": 0.8, "n_sequences": 600, "fpr": 0.01}
            for d in ("pfr", "mpfr", "mws") for T in (4, 8)]
    pd.DataFrame(rows).to_csv(tmp_path / "real_wm_detection.csv", index=False)
    (row,) = E.evaluate(tmp_path, [BY_ID["liu_tpr_match"]])
    assert row.columns[E.REAL].verdict == row.verdict == E.PROVED
    assert "identical outputs" in row.columns[E.REAL].numbers
    (chk,) = E.evaluate(tmp_path, [BY_ID["chk_identical_tokens"]])
    assert chk.columns[E.REAL].verdict == E.PROVED
    rows[0]["tpr"] = 0.6  # PFR's TPR off by 0.2 at T = 4: the implementation is broken
    pd.DataFrame(rows).to_csv(tmp_path / "real_wm_detection.csv", index=False)
    (row,) = E.evaluate(tmp_path, [BY_ID["liu_tpr_match"]])
    assert row.columns[E.REAL].verdict == E.NOT_REPRODUCED


def test_real_null_counts_distinct_sequences_once(tmp_path):
    """Five decoders' sequences under wrong keys, three of them identical: 600 scored
    (sequence, key) pairs are 360 distinct ones."""
    rows = [{"decoder": d, "B": 1, "score": "aaronson", "method": "exact", "T_eval": 4,
             "tpr": t, "n_sequences": 120, "fpr": 0.01}
            for d, t in (("pfr", 0.8), ("mpfr", 0.8), ("mws", 0.8), ("mse", 0.3),
                         ("mse_pseudo", 0.4))]
    rows.append({"decoder": "h0", "B": 0, "score": "aaronson", "method": "exact",
                 "T_eval": 4, "tpr": 0.01, "n_sequences": 600, "fpr": 0.01})
    pd.DataFrame(rows).to_csv(tmp_path / "real_wm_detection.csv", index=False)
    o = liu.h0_real(E.Data(tmp_path))
    assert "360 distinct" in o.sample
    rows[1]["tpr"] = 0.7  # MPFR differs from PFR: no longer counted as the same sequences
    pd.DataFrame(rows).to_csv(tmp_path / "real_wm_detection.csv", index=False)
    assert "600 distinct" in liu.h0_real(E.Data(tmp_path)).sample


def test_real_sample_is_stated(tmp_path):
    _runs(tmp_path, [0.0, 0.01])
    text = E.render(E.evaluate(tmp_path), tmp_path)
    assert "real_wm_frontier: 2 prompts × 20 new tokens per configuration (embedded)" in text


def test_no_verdict_from_one_prompt(tmp_path):
    """One prompt per configuration (a smoke run): no rule decides, whatever the numbers --
    a difference of 0 ± 0 or of 25% over one prompt reads "not distinguishable — sample too
    small (n = 1)"; three prompts with that difference decide."""
    for diffs in ([0.0], [0.5]):
        _runs(tmp_path, diffs)
        (row,) = E.evaluate(tmp_path, [BY_ID["liu_pfr_vs_vsps"]])
        o = row.columns[E.REAL]
        assert o.verdict == E.NOT_DISTINGUISHABLE, o
        assert "sample too small (n = 1" in o.numbers
    _runs(tmp_path, [0.5, 0.49, 0.51])
    (row,) = E.evaluate(tmp_path, [BY_ID["liu_pfr_vs_vsps"]])
    assert row.columns[E.REAL].verdict == E.NOT_REPRODUCED
    # the rule kinds: below the minimum nothing is decided, at it the usual rule applies
    for part in (E.ordering("", 1.0, 0.0, df=0), E.equivalence("", 0.0, 0.0, 0.1, df=0),
                 E.at_least("", -1.0, 0.0, 0.02, df=math.nan), E.in_range("", 0.5, 0.0, 0, 1, 0),
                 E.sweep("", [math.inf], df=0), E.ordering("", 1.0, 0.1, df=4, min_units=6)):
        assert part.verdict == E.NOT_DISTINGUISHABLE and "sample too small" in part.text
    assert E.ordering("", 1.0, 0.0, df=1).verdict == E.REPRODUCED


def test_dominance_counts_no_identity_and_shows_the_deficit(tmp_path):
    """MWS emits PFR's tokens on the real model: that pair is an identity (shown, not
    counted; it used to read "not reproduced"); a deficit against MSE decides with its own
    z, not the z of the strict ordering."""
    fr, runs = [], []
    aatps = {"pfr": 2.0, "mws": 2.0, "mse": 2.5}
    for dec in aatps:
        fr.append({"decoder": dec, "L": 2, "B": 1, "draft": "t", "aatps": aatps[dec],
                   "aatps_se": 0.01, "anlppt_u": 0.5 if dec != "mse" else 0.0,
                   "anlppt_u_se": 0.01, "n_prompts": 8})
        for i in range(8):
            runs.append({"decoder": dec, "L": 2, "B": 1, "draft": "t", "prompt_set": "s",
                         "prompt_index": i, "aatps": aatps[dec] + 0.01 * (i % 3) * (dec == "mse")})
    pd.DataFrame(fr).to_csv(tmp_path / "real_wm_frontier.csv", index=False)
    pd.DataFrame(runs).to_csv(tmp_path / "real_runs.csv", index=False)
    o = liu.dominates_real(E.Data(tmp_path))
    mws, mse = o.parts
    assert not mws.counted and "identical" in mws.text
    assert mse.counted and mse.verdict == E.NOT_REPRODUCED and mse.z < -3
    assert "AATPS below the baseline's" in mse.text


def test_anlppt_stable_allows_equality():
    """"ΔANLPPT ≤ 0.001": a range of exactly 0.001 holds (it read "not distinguishable"
    under the strict ordering); 0.003 with the same error does not."""
    assert liu.rule_anlppt_stable([("t", [0.050, 0.051], 0.00005)]).verdict == E.REPRODUCED
    assert liu.rule_anlppt_stable([("t", [0.050, 0.053], 0.00005)]).verdict == \
        E.NOT_REPRODUCED
