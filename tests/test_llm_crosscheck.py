"""specbound.llm.crosscheck: the theory's acceptance of every decision of a real run.

- on a synthetic model wrapped as a torch module (tests.test_llm_generate): the per-decision
  predictions of :func:`decision_acceptance` (from the recorded distributions, on their
  compact support) equal :func:`specbound.sim.acceptance_compensator` (from the models, on
  the full vocabulary) block by block, for every decoder with a scheme; deterministic;
- :class:`ContextRecorder` and bad input;
- slow tier: ``paper_figs.real_crosscheck`` at its full scale on the embedded model, realised
  against predicted AATPS within 5 standard errors per decoder and overall.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from specbound import llm, sim  # noqa: E402
from specbound.llm import generation as G  # noqa: E402
from tests.test_llm_generate import PROMPT, _synthetic_pair  # noqa: E402

V = 12


@pytest.fixture(scope="module")
def synth():
    target = sim.SyntheticLM(V, context_length=3, seed=11)
    draft = sim.SyntheticLM(V, context_length=2, seed=12, temperature=1.3)
    return target, draft, _synthetic_pair(target, draft)


CASES = [("vsps", 1), ("pfr", 1), ("pfr_nowm", 1), ("mws", 1), ("mse", 1), ("mse_pseudo", 1),
         ("mpfr", 2), ("mpfr", 4), ("invariant", 2), ("invariant", 3)]


@pytest.mark.parametrize("decoder,B", CASES)
def test_predictions_equal_the_simulator_compensator(synth, decoder, B):
    target, draft, pair = synth
    rec = llm.ContextRecorder()
    res = G.generate(pair, PROMPT, decoder, L=3, B=B, key=5, window=None, max_new_tokens=20,
                     seed=3, log=rec, prompt_id=2, tree=B > 1)
    dec = llm.decision_acceptance(res, rec, prompt_id=2)
    assert len(dec) == res.nu.size and np.array_equal(dec["nu"], res.nu)
    assert np.array_equal(dec["accepted"], res.decision_accepted)
    assert ((dec["predicted"] >= 0) & (dec["predicted"] <= 1)).all()
    comp = sim.acceptance_compensator(res, target, draft)
    blocks = llm.block_crosscheck(res, dec)
    np.testing.assert_allclose(blocks["predicted"], comp["predicted"], rtol=0, atol=1e-9)
    assert np.array_equal(blocks["accepted"], comp["accepted"])
    assert np.array_equal(blocks["emitted"], res.emitted_per_block)
    np.testing.assert_allclose(blocks["diff"], blocks["accepted"] - blocks["predicted"])


def test_recorder_keeps_compact_first_records():
    rec = llm.ContextRecorder()
    p = np.array([0.5, 0.0, 0.5, 0.0])
    q = np.array([0.0, 0.25, 0.75, 0.0])
    rec.record(0, np.array([1, 2]), p, [])
    rec.record(0, np.array([1, 2]), np.array([1.0, 0, 0, 0]), [q])  # p kept, q added
    pp, qq = rec.pair(0, [1, 2])
    np.testing.assert_array_equal(pp, [0.5, 0.0, 0.5])
    np.testing.assert_array_equal(qq, [0.0, 0.25, 0.75])
    assert len(rec) == 1
    with pytest.raises(ValueError, match="context"):
        rec.pair(1, [1, 2])
    rec.record(0, np.array([3]), p, [])
    with pytest.raises(ValueError, match="context"):
        rec.pair(0, [3])  # no draft distribution there
    rec.clear()
    assert len(rec) == 0


def test_bad_input(synth):
    target, draft, pair = synth
    rec = llm.ContextRecorder()
    res = G.generate(pair, PROMPT, "specinfer", L=2, B=2, max_new_tokens=6, log=rec)
    with pytest.raises(ValueError, match="result"):
        llm.decision_acceptance(res, rec)
    with pytest.raises(ValueError, match="result"):
        llm.decision_acceptance("not a result", rec)
    # mws under the gamma reweight is single-draft speculative sampling of the reweighted
    # laws: its spec's race scheme does not apply (DecoderSpec.scheme_for), the delta one does
    rec = llm.ContextRecorder()
    res = G.generate(pair, PROMPT, "mws", L=2, key=5, max_new_tokens=6, log=rec,
                     reweight="gamma")
    with pytest.raises(ValueError, match=r"^result: decoder 'mws' has no per-context.*"
                                         r"\(mws with the delta reweight\)"):
        llm.decision_acceptance(res, rec)
    rec = llm.ContextRecorder()
    res = G.generate(pair, PROMPT, "mws", L=2, key=5, max_new_tokens=6, log=rec)
    assert len(llm.decision_acceptance(res, rec)) == res.nu.size
    res = G.generate(pair, PROMPT, "vsps", L=2, max_new_tokens=6)
    with pytest.raises(ValueError, match="recorder"):
        llm.decision_acceptance(res, {})
    with pytest.raises(ValueError, match="context"):  # run made without the recorder
        llm.decision_acceptance(res, rec)


@pytest.mark.slow
def test_real_model_realised_matches_predicted_within_five_se(tmp_path):
    """Full-scale ``real_crosscheck`` (6 prompts x 20 tokens per decoder on the embedded
    model; minutes on CPU).  Under the theory each per-block difference is a martingale
    difference, so z is approximately standard normal: P(|z| > 5) ~ 5.7e-7 per check, 7
    checks, false failure < 5e-6.  At this size 5 standard errors are about 6% of the AATPS
    overall (and 0.5 accepted drafts per block for one decoder): a gross error in a scheme,
    in nu or in the recorded rows is caught; a 1% bias is caught instead by
    ``test_predictions_equal_the_simulator_compensator`` (exact identity with the simulator's
    compensator, whose own Monte Carlo tests are in tests/test_sim_decode.py)."""
    from paper_figs import real_crosscheck

    real_crosscheck.main(tmp_path, quick=False)
    S = pd.read_csv(tmp_path / "real_crosscheck.csv")
    assert set(S["decoder"]) == {real_crosscheck.label(s) for s in real_crosscheck.SPECS} | {
        "all"}
    assert (S["n_blocks"] >= 20).all()
    assert np.isfinite(S["z"]).all()
    assert (S["z"].abs() < 5).all(), S[["decoder", "aatps", "predicted_aatps", "z"]]
