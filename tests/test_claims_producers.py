"""Producer tests of the claims (``paper_figs.claims``): the study code itself, run on its
quick grid with one fault injected at its source (a wrong closed form, a biased quantity, a
shifted bound), must turn the claim's verdict; run intact it gives the verdict a correct
implementation gives.  A flip test (``tests/test_claims_flip.py``) perturbs fabricated data
and cannot catch a study that returns its own reference; these can.  Each runs a study
twice (marked slow).  Nothing here is statistical beyond the studies' fixed seeds.
"""

from __future__ import annotations

import numpy as np
import pytest

from paper_figs.claims import engine as E
from paper_figs.claims.registry import BY_ID
from tests.test_claims_flip import _numbers


def _faults():
    from paper_figs import (
        lemma1_study,
        lenience_study,
        lossy_gallery,
        prop1_study,
        theorem1_study,
    )

    law, leni = lossy_gallery.induced_distribution, lenience_study.induced_distribution
    ted, tbe = lemma1_study.truncation_efficiency_delta, prop1_study.tree_block_efficiency
    kls, ldelta = theorem1_study.kl_truncation_sd, lenience_study.lenience_delta

    def wrong_law(p, q, rule, **kw):  # a closed form off by 20% of mass towards uniform
        x = np.asarray(law(p, q, rule, **kw), dtype=float)
        return 0.8 * x + 0.2 / x.size if rule == "lenience" else x

    def no_cap(p, q, rule, **kw):  # "lenience" that keeps the draft above p/ℓ
        return np.asarray(q, dtype=float) if rule == "lenience" else leni(p, q, rule, **kw)

    return {
        # claim: (study module, attribute, fault, verdict when intact)
        "zhou_induced_forms": (lossy_gallery, "induced_distribution", wrong_law, E.REPRODUCED),
        "zhou_ceiling_cap": (lenience_study, "induced_distribution", no_cap, E.PROVED),
        # the quick grid's Monte Carlo points are too few to show equivalence within ±0.02
        "zhou_lenience_eq10": (lenience_study, "lenience_delta",
                               lambda p, q, ell, **k: ldelta(p, q, ell, **k) + 0.1,
                               E.NOT_DISTINGUISHABLE),
        "zhou_lemma1": (lemma1_study, "truncation_efficiency_delta",
                        lambda P, Q, A: (lambda g, lo: (g, 1.1 * np.asarray(lo)))(*ted(P, Q, A)),
                        E.PROVED),
        "zhou_prop1": (prop1_study, "tree_block_efficiency",
                       lambda P, C, rule, **k: tbe(P, C, rule, **k) * (0.5 if rule ==
                                                                     "truncation" else 1.0),
                       E.PROVED),
        "zhou_thm1": (theorem1_study, "kl_truncation_sd",
                      lambda p, q, A: kls(p, q, A) + 0.1, E.PROVED),
        # a Δ_ℓ that ignores the pair: no adaptation to the draft's distance
        "zhou_lenience_adapts": (lenience_study, "lenience_delta",
                                 lambda p, q, ell, **k: 0.0 * ldelta(p, q, ell, **k) + 0.3,
                                 E.REPRODUCED),
    }


@pytest.mark.slow
@pytest.mark.parametrize("claim_id", ["zhou_induced_forms", "zhou_ceiling_cap",
                                      "zhou_lenience_eq10", "zhou_lemma1", "zhou_prop1",
                                      "zhou_thm1", "zhou_lenience_adapts"])
def test_a_fault_in_the_producer_turns_the_verdict(tmp_path, monkeypatch, claim_id):
    module, attr, fake, intact = _faults()[claim_id]
    claim = BY_ID[claim_id]

    def verdict(folder):
        (row,) = E.evaluate(folder, [claim], numbers=_numbers({}))
        return row.columns[E.SYNTHETIC]

    module.main(tmp_path / "intact", quick=True)
    got = verdict(tmp_path / "intact")
    assert got.verdict == intact, (claim_id, got)
    with monkeypatch.context() as m:
        m.setattr(module, attr, fake)
        module.main(tmp_path / "fault", quick=True)
    bad = verdict(tmp_path / "fault")
    assert bad.verdict in (E.NOT_REPRODUCED, E.REFUTED), (claim_id, bad)


def _real_faults():
    from dataclasses import replace

    import specbound.sim as sim
    import specbound.theory.tree as tree

    kls, sim_tree = tree.kl_truncation_sd, sim.simulate_tree_verification

    def halved(p, q, rule, **kw):  # a biased sampler: truncation verification counted as
        r = sim_tree(p, q, "lossless", **kw)  # lossless, half its accepted tokens dropped
        return replace(r, accepted_per_block=r.accepted_per_block // 2) if rule == \
            "truncation" else r

    return {
        # claim: (module, attribute, fault, producer) — KL_SD that never vanishes; a
        # mechanism that loses tokens
        "zhou_thm1": (tree, "kl_truncation_sd", lambda p, q, A: kls(p, q, A) + 0.05,
                      "produce_thm1"),
        "zhou_prop1": (sim, "simulate_tree_verification", halved, "produce_prop1"),
    }


@pytest.mark.slow
@pytest.mark.parametrize("claim_id", ["zhou_thm1", "zhou_prop1"])
def test_a_fault_in_the_real_path_producer_turns_the_verdict(tmp_path, monkeypatch, claim_id):
    """The real-model column of a proved row with empirical content (Theorem 1 along real
    paths, Proposition 1 on real trees): the producer on the shipped log reproduces the
    sentence intact and not with one fault injected at its source."""
    from paper_figs.claims import zhou_real

    module, attr, fake, producer = _real_faults()[claim_id]
    _intact_reproduces_fault_turns(tmp_path, monkeypatch, claim_id,
                                   getattr(zhou_real, producer), E.REAL, (module, attr, fake))


def _intact_reproduces_fault_turns(tmp_path, monkeypatch, claim_id, produce, column, fault):
    """``produce`` (an INDEX-time producer) into a folder, the claim's ``column`` judged:
    reproduced intact, not reproduced or refuted with ``fault`` = (module, attribute,
    replacement) patched in."""
    claim = BY_ID[claim_id]

    def verdict(folder):
        folder.mkdir()
        produce(folder)
        (row,) = E.evaluate(folder, [claim], numbers=_numbers({}))
        return row.columns[column]

    got = verdict(tmp_path / "intact")
    assert got.verdict == E.REPRODUCED, (claim_id, got)
    module, attr, fake = fault
    with monkeypatch.context() as m:
        m.setattr(module, attr, fake)
        bad = verdict(tmp_path / "fault")
    assert bad.verdict in (E.NOT_REPRODUCED, E.REFUTED), (claim_id, bad)


def _exactness_faults():
    import specbound.sim as sim
    import specbound.theory as theory

    sample, bound = sim.sample_emitted, theory.aaronson_entropy_bound

    def biased(p, q, scheme, B, n, seed):  # 1% of the draws of the likeliest token moved on
        y = np.asarray(sample(p, q, scheme, B, n=n, seed=seed)).copy()
        top = int(np.argmax(p))
        hit = np.flatnonzero(y == top)
        y[hit[: hit.size // 100]] = (top + 1) % len(p)
        return y

    return {
        # claim: (module, attribute, fault, producer of paper_figs.claims.exactness)
        "liu_exactness": (sim, "sample_emitted", biased, "produce"),
        "liu_eq3": (theory, "aaronson_entropy_bound", lambda P: bound(P) + 0.2,
                    "produce_score"),
    }


@pytest.mark.slow
@pytest.mark.parametrize("claim_id", ["liu_exactness", "liu_eq3"])
def test_a_fault_in_an_exactness_producer_turns_the_verdict(tmp_path, monkeypatch, claim_id):
    """The INDEX-time producers of the exactness rows: the exact samplers' emitted law
    (a sampler biased by 1% of one token's draws is caught) and Eq. 3's expected score
    against its bound (a bound shifted by 0.2 is caught)."""
    from paper_figs.claims import exactness

    module, attr, fake, producer = _exactness_faults()[claim_id]
    _intact_reproduces_fault_turns(tmp_path, monkeypatch, claim_id,
                                   getattr(exactness, producer), E.SYNTHETIC,
                                   (module, attr, fake))


@pytest.mark.slow
@pytest.mark.parametrize("claim_id", ["zhou_eta", "zhou_minp"])
def test_a_fault_in_the_producer_turns_a_refutation(tmp_path, monkeypatch, claim_id):
    """The sign sentences of §5.1 are refuted by the intact study (pairs where the loss of
    truncation exceeds its gain); a Lemma 1 decomposition whose gain counts the loss back
    (gain + loss + 0.01) makes ΔBE > 0 everywhere and the verdict *reproduced*: the verdict
    is the study's, not a constant of the rule."""
    from paper_figs import lemma1_study

    ted = lemma1_study.truncation_efficiency_delta
    claim = BY_ID[claim_id]

    def verdict(folder):
        (row,) = E.evaluate(folder, [claim], numbers=_numbers({}))
        return row.columns[E.SYNTHETIC].verdict

    lemma1_study.main(tmp_path / "intact", quick=True)
    assert verdict(tmp_path / "intact") == E.REFUTED
    with monkeypatch.context() as m:
        m.setattr(lemma1_study, "truncation_efficiency_delta",
                  lambda P, Q, A: (lambda g, lo: (np.asarray(g) + np.asarray(lo) + 0.01, lo))(
                      *ted(P, Q, A)))
        lemma1_study.main(tmp_path / "fault", quick=True)
    assert verdict(tmp_path / "fault") == E.REPRODUCED


def _below_parts(folder):
    (row,) = E.evaluate(folder, [BY_ID["zhou_truncation_below_sampling"]],
                        numbers=_numbers({}))
    got = row.columns[E.REAL]
    return got, {p.label: p for p in got.parts}


def test_a_fault_in_the_truncation_producer_turns_the_verdict(tmp_path, monkeypatch):
    """``zhou_truncation_below_sampling`` on the shipped log (4 drafts × 569 contexts, 12
    prompts): intact, the drafts close to the target inside the min-p set (temperature 0.5
    and 1.5) add less distortion than truncation itself makes (KL_SD < KL(p_Θ ‖ p)), so the
    row is *not reproduced* while the quantized draft at p_base = 0.1 reproduces it.  Two
    faults in the induced law of truncation verification, each at its source
    (``specbound.theory.lossy.induced_distribution``): a verifier that emits the set's least
    likely token (a wrong law) turns every part and the row to *reproduced*; a verifier that
    secretly emits p_Θ (no distortion) turns the quantized part and the shown chain-rule
    part to *not reproduced*.  Deterministic (closed forms on a fixed log)."""
    import specbound.theory.lossy as lossy
    from paper_figs.claims import embedded

    law = lossy.induced_distribution
    quant = "quantized:3, p_base = 0.1: KL_SD > KL(p_Θ ‖ p)"
    chain = "quantized:3, p_base = 0.1: KL(q_Θ ‖ p) > KL(p_Θ ‖ p)"

    def run(name, fake=None):
        folder = tmp_path / name
        folder.mkdir()
        with monkeypatch.context() as m:
            if fake is not None:
                m.setattr(lossy, "induced_distribution", fake)
            embedded.produce(folder)
        return _below_parts(folder)

    def least_likely(p, q, rule, **kw):
        x = np.asarray(law(p, q, rule, **kw), dtype=float)
        if rule != "truncation":
            return x
        out = np.zeros_like(x)
        out[np.arange(x.shape[0]), np.where(kw["allowed"], p, np.inf).argmin(axis=1)] = 1.0
        return out

    def truncated_target(p, q, rule, **kw):
        x = np.asarray(law(p, q, rule, **kw), dtype=float)
        if rule != "truncation":
            return x
        kept = np.where(kw["allowed"], p, 0.0)
        return kept / kept.sum(axis=1, keepdims=True)

    intact, parts = run("intact")
    assert intact.verdict == E.NOT_REPRODUCED, intact
    assert parts[quant].verdict == E.REPRODUCED and parts[chain].verdict == E.REPRODUCED
    assert parts["temperature:1.5, p_base = 0.1: KL_SD > KL(p_Θ ‖ p)"].verdict == \
        E.NOT_REPRODUCED
    wrong, wparts = run("least_likely", least_likely)
    assert wrong.verdict == E.REPRODUCED, wrong
    assert all(p.verdict == E.REPRODUCED for p in wparts.values() if p.counted)
    lossless, lparts = run("truncated_target", truncated_target)
    assert lparts[quant].verdict == E.NOT_REPRODUCED
    assert lparts[chain].verdict != E.REPRODUCED  # KL(p_Θ ‖ p) − KL(p_Θ ‖ p) = 0
