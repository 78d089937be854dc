"""The multi-draft scaling row with the prompt-lookup draft (``paper_figs.claims.ngram``;
Liu, Wan, Gao & Gündüz 2026, arXiv:2609.21858, Tables 6–13): decided from several prompts,
never one, and only on inputs that pass the n-gram study's schema.  Deterministic."""

from __future__ import annotations

import pandas as pd

from paper_figs.claims import engine as E
from paper_figs.claims.registry import BY_ID
from tests.test_claims_flip import _numbers, f_mpfr_scaling


def _real(folder):
    (row,) = E.evaluate(folder, [BY_ID["liu_mpfr_scaling"]], numbers=_numbers({}))
    return row.columns[E.REAL]


def test_one_prompt_decides_nothing(tmp_path):
    f_mpfr_scaling(tmp_path, False)
    assert _real(tmp_path).verdict == E.NOT_REPRODUCED
    runs = pd.read_csv(tmp_path / "real_runs.csv")
    runs[runs["prompt_index"] == 0].to_csv(tmp_path / "real_runs.csv", index=False)
    got = _real(tmp_path)
    assert got.verdict == E.NOT_DISTINGUISHABLE and "sample too small" in got.numbers, got


def test_a_broken_summary_is_not_judged(tmp_path):
    f_mpfr_scaling(tmp_path, True)
    assert _real(tmp_path).verdict == E.REPRODUCED
    cfg = pd.read_csv(tmp_path / "real_ngram.csv")
    pd.concat([cfg, cfg.iloc[[1]].assign(aatps=9.0)]).to_csv(tmp_path / "real_ngram.csv",
                                                             index=False)
    got = _real(tmp_path)
    assert got.verdict == E.NOT_RUN and "real_ngram.csv" in got.numbers, got


def test_a_draft_that_never_drafts_decides_nothing(tmp_path):
    """Every block of every prompt emitting one token at every B (the lookup found nothing to
    propose, as on a quick run of six new tokens) is 0 ± 0 but no evidence about more
    drafts: *not distinguishable*, said, never *reproduced*; one prompt where B = 4 drafted
    makes its pair evidence again."""
    f_mpfr_scaling(tmp_path, True)
    runs = pd.read_csv(tmp_path / "real_runs.csv")
    runs.assign(aatps=1.0).to_csv(tmp_path / "real_runs.csv", index=False)
    got = _real(tmp_path)
    assert got.verdict == E.NOT_DISTINGUISHABLE and "no evidence" in got.numbers, got
    moved = (runs["decoder"] == "mpfr") & (runs["B"] == 4) & (runs["prompt_index"] == 0)
    runs.assign(aatps=1.0).assign(aatps=lambda d: d["aatps"].where(~moved, 1.5)).to_csv(
        tmp_path / "real_runs.csv", index=False)
    parts = {p.label: p for p in _real(tmp_path).parts}
    assert "no evidence" not in parts["MPFR B=4 ≥ MPFR B=2"].text
    assert "no evidence" in parts["MPFR B=2 ≥ VSpS B=1"].text
