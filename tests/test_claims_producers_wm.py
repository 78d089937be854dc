"""Producer tests of the watermark claims of Liu, Wan, Gao & Gündüz (2026), arXiv:2609.21858
(``paper_figs.claims.liu`` and the package checks): the synthetic watermark studies
themselves, run on their quick grid (vocabulary 200, 4 prompts × 12 tokens × 2 seeds), once
intact and once with one fault injected into the study's call to the decoder
(``paper_figs._wm_common.decode``) or into its detection threshold, must turn the claim's
verdict.  A flip test (``tests/test_claims_flip.py``) perturbs fabricated data and cannot
catch a study that returns its own reference; these can.

The faults:

- *lossy*: PFR and MPFR decode the draft's law instead of the target's (a biased sampler:
  every draft accepted, the emitted law is q, not p);
- *wrong key*: PFR and MPFR watermark with another key than the detector's (their tokens
  carry no signal the detector can read);
- *drafter-blind VSpS*: vanilla speculative sampling is handed the target as its drafter,
  whatever drafter the study substitutes (its output no longer depends on the drafter);
- *drafter-blind*: every decoder is handed the target as its drafter (the study's sweep of
  drafters of different acceptance collapses to one drafter);
- *low threshold*: the exact Gamma(T, 1) detection threshold halved (a shifted bound: the
  null's false-positive rate is no longer 1%).

On the quick grid most equivalence rows read *not distinguishable* intact (four prompts
cannot show equivalence within ±2%); the fault must then turn them to *not reproduced* or
*refuted*, which the same four prompts can show.  Each study runs once intact and once per
fault (shared across the cases of this module); every run is deterministic (the studies'
fixed seeds), so nothing here is statistical.  Marked slow: the quick runs take 3–13 s each.
"""

from __future__ import annotations

import pytest

from paper_figs.claims import engine as E
from tests._claims_helpers import BAD, column_verdict, study_runner

KEYED = ("pfr", "mpfr")


def _lossy(decode):
    def run(target, draft, prompts, seeds, decoder, **kw):
        if decoder in KEYED and draft is not None:
            target = draft
        return decode(target, draft, prompts, seeds, decoder, **kw)

    return run


def _wrong_key(decode):
    def run(target, draft, prompts, seeds, decoder, **kw):
        if decoder in KEYED and kw.get("key") is not None:
            kw = {**kw, "key": f"{kw['key']}#another"}
        return decode(target, draft, prompts, seeds, decoder, **kw)

    return run


def _drafter_blind_vsps(decode):
    def run(target, draft, prompts, seeds, decoder, **kw):
        return decode(target, target if decoder == "vsps" else draft, prompts, seeds, decoder,
                      **kw)

    return run


def _drafter_blind(decode):
    def run(target, draft, prompts, seeds, decoder, **kw):
        return decode(target, None if draft is None else target, prompts, seeds, decoder, **kw)

    return run


def _patch(fault, module, m):
    from paper_figs import _wm_common as wc

    if fault == "low threshold":
        exact = module.exact_threshold
        m.setattr(module, "exact_threshold", lambda T, score: 0.5 * exact(T, score))
        return
    make = {"lossy": _lossy, "wrong key": _wrong_key,
            "drafter-blind VSpS": _drafter_blind_vsps, "drafter-blind": _drafter_blind}[fault]
    m.setattr(wc, "decode", make(wc.decode))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """``get(study, fault)``: the output folder of ``paper_figs.<study>`` on its quick grid,
    intact (``fault=None``) or with the fault, each computed once for the module."""
    return study_runner(tmp_path_factory, _patch)


#: claim: (study, fault, the synthetic column's verdict intact on the quick grid[, the
#: grid's parameters where the quick grid is too small])
CASES = {
    # sixteen prompts: on the quick grid's four (t on 3 degrees of freedom) the Šidák value
    # of the family of four L (14.8 against 9.2 for one test) hides even a decoder of the
    # draft's law
    "liu_pfr_vs_nowm": ("wm_single_draft_frontier", "lossy", E.NOT_DISTINGUISHABLE,
                        {"prompts": 16}),
    "liu_pfr_dominates": ("wm_single_draft_frontier", "wrong key", E.NOT_DISTINGUISHABLE),
    "liu_mpfr_vs_invariant": ("wm_multidraft_scaling", "lossy", E.NOT_DISTINGUISHABLE,
                              {"prompts": 16}),
    "liu_tpr_match": ("wm_detection", "wrong key", E.PROVED),
    "liu_tpr_weaker": ("wm_detection", "wrong key", E.NOT_DISTINGUISHABLE),
    "chk_identical_tokens": ("wm_detection", "lossy", E.PROVED),
    "liu_prop44": ("wm_drafter_substitution", "lossy", E.PROVED),
    "liu_rouge_variant": ("wm_drafter_substitution", "drafter-blind VSpS", E.REPRODUCED),
    "liu_h0_floor": ("wm_detection", "low threshold", E.NOT_DISTINGUISHABLE),
    "chk_coin_gain_acceptance": ("wm_detection", "drafter-blind", E.REPRODUCED),
    # four prompts cannot move PFR − VSpS out of "not distinguishable"; sixteen can
    "liu_pfr_vs_vsps": ("wm_single_draft_frontier", "lossy", E.NOT_DISTINGUISHABLE,
                        {"prompts": 16}),
}


@pytest.mark.slow
@pytest.mark.parametrize("claim_id", sorted(CASES))
def test_a_fault_in_a_watermark_study_turns_the_verdict(runs, claim_id):
    study, fault, intact, *params = CASES[claim_id]
    params = params[0] if params else {}
    got = column_verdict(runs(study, **params), claim_id)
    assert got.verdict == intact, (claim_id, got)
    bad = column_verdict(runs(study, fault, **params), claim_id)
    assert bad.verdict in BAD, (claim_id, fault, bad)


@pytest.mark.slow
def test_anlppt_of_mpfr_falls_to_the_null_with_a_wrong_key(runs):
    """``liu_mpfr_anlppt`` (MPFR's ANLPPT-U above INVARIANT's) is reproduced intact; with the
    wrong key MPFR's score falls to the null floor, where INVARIANT (unkeyed) already sits, so
    the ordering is no longer reproduced (no decoder can score significantly below the null:
    *not distinguishable* is the farthest a fault can move this row)."""
    assert column_verdict(runs("wm_multidraft_scaling"), "liu_mpfr_anlppt").verdict == E.REPRODUCED
    bad = column_verdict(runs("wm_multidraft_scaling", "wrong key"), "liu_mpfr_anlppt")
    assert bad.verdict != E.REPRODUCED, bad
