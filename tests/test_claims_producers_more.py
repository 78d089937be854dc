"""More producer tests of the watermark claims of Liu, Wan, Gao & Gündüz (2026),
arXiv:2609.21858 (``paper_figs.claims.liu``): the synthetic studies themselves, run on a small
grid once intact and once with one fault injected at the study's call to the decoder
(``paper_figs._wm_common.decode``), must turn the claim's verdict.  A flip test
(``tests/test_claims_flip.py``) perturbs fabricated data and cannot catch a study that
returns its own reference; these can.

The faults:

- *hot target*: the keyed decoder (PFR, MPFR) samples the target at temperature 3 instead of
  the target (a wrong law: its tokens are no longer the target's, so its LPPL under the target
  rises, where VSpS's and INVARIANT's do not);
- *key moved with B*: MPFR with B ≥ 4 drafts watermarks with another key than the detector's
  (the signal of its tokens changes with B);
- *wrong key for MSE-PSEUDO*: MSE-PSEUDO watermarks with another key than the detector's (its
  tokens and its acceptance coins carry no signal the detector can read).

Every run is deterministic (the studies' fixed seeds), so nothing here is statistical; each
study runs once intact and once per fault (shared across the cases of this module).  Marked
slow: a run takes seconds once the decoders are compiled, minutes before.
"""

from __future__ import annotations

import importlib

import pytest

from paper_figs.claims import engine as E
from paper_figs.claims.registry import BY_ID
from tests.test_claims_flip import _numbers

BAD = {E.NOT_REPRODUCED, E.REFUTED}
#: the temperature of the wrong law the *hot target* fault samples
HOT = 3.0


def _hot_target(decoders):
    def make(decode):
        def run(target, draft, prompts, seeds, decoder, **kw):
            if decoder in decoders:
                target = target.draft(0.0, temperature=HOT)
            return decode(target, draft, prompts, seeds, decoder, **kw)

        return run

    return make


def _key_moved_with_b(decode):
    def run(target, draft, prompts, seeds, decoder, **kw):
        if decoder == "mpfr" and kw.get("B", 1) >= 4 and kw.get("key") is not None:
            kw = {**kw, "key": f"{kw['key']}#B{kw['B']}"}
        return decode(target, draft, prompts, seeds, decoder, **kw)

    return run


def _wrong_key_mse_pseudo(decode):
    def run(target, draft, prompts, seeds, decoder, **kw):
        if decoder == "mse_pseudo" and kw.get("key") is not None:
            kw = {**kw, "key": f"{kw['key']}#another"}
        return decode(target, draft, prompts, seeds, decoder, **kw)

    return run


FAULTS = {"hot PFR": _hot_target({"pfr"}), "hot MPFR": _hot_target({"mpfr"}),
          "key moved with B": _key_moved_with_b,
          "wrong key for MSE-PSEUDO": _wrong_key_mse_pseudo}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """``get(study, fault, **params)``: the output folder of ``paper_figs.<study>`` on its
    quick grid (with ``params``), intact (``fault=None``) or with the fault, each computed
    once for the module."""
    from paper_figs import _wm_common as wc

    done = {}

    def get(study, fault=None, **params):
        key = (study, fault, tuple(sorted(params.items())))
        if key not in done:
            module = importlib.import_module(f"paper_figs.{study}")
            name = f"{study}-{fault or 'intact'}".replace(" ", "_")
            folder = tmp_path_factory.mktemp(name)
            with pytest.MonkeyPatch.context() as m:
                if fault is not None:
                    m.setattr(wc, "decode", FAULTS[fault](wc.decode))
                module.main(folder, quick=True, **params)
            done[key] = folder
        return done[key]

    return get


def _verdict(folder, claim_id):
    (row,) = E.evaluate(folder, [BY_ID[claim_id]], numbers=_numbers({}))
    return row.columns[E.SYNTHETIC]


#: claim: (study, fault, the synthetic column's verdict intact, the grid's parameters)
CASES = {
    # 16 prompts (the quick grid's 4 leave a t reference on 3 degrees of freedom, whose
    # 0.135% quantile, 10.2, hides even a wrong law); intact the sample cannot show the
    # equivalence within ±2.7% (the narrowest it could show is about ±0.5 nats)
    "liu_lppl_mpfr": ("wm_multidraft_scaling", "hot MPFR", E.NOT_DISTINGUISHABLE,
                      {"prompts": 16}),
    # intact MPFR emits the same tokens at every B (Prop. C.3): the row cannot be tested
    # ("not run"); a watermark that moves with B is caught
    "liu_anlppt_stable": ("wm_multidraft_scaling", "key moved with B", E.NOT_RUN,
                          {"prompts": 16}),
    "liu_tpr_pseudo": ("wm_detection", "wrong key for MSE-PSEUDO", E.NOT_DISTINGUISHABLE, {}),
    # 8 prompts: intact not distinguishable (the first 16 prompts' seed 0 is a rare draw,
    # see the report of liu_lppl_unbiased in the INDEX); the quick grid's 4 hide any law
    "liu_lppl_unbiased": ("wm_single_draft_frontier", "hot PFR", E.NOT_DISTINGUISHABLE,
                          {"prompts": 8}),
}


@pytest.mark.slow
@pytest.mark.parametrize("claim_id", sorted(CASES))
def test_a_fault_in_a_watermark_study_turns_the_verdict(runs, claim_id):
    study, fault, intact, params = CASES[claim_id]
    got = _verdict(runs(study, **params), claim_id)
    assert got.verdict == intact, (claim_id, got)
    bad = _verdict(runs(study, fault, **params), claim_id)
    assert bad.verdict in BAD, (claim_id, fault, bad)
