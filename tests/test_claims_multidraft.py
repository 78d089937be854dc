"""The multi-draft bound claims of Liu, Wan, Gao & Gündüz (2026), arXiv:2609.21858 (Prop.
B.5, Thm B.4; :mod:`paper_figs.claims.multidraft`): each side of the comparison comes from
an independent producer, so perturbing either one alone moves the verdict.

The unperturbed runs use the module's fixed seeds at reduced sample sizes; a correct bound
is reported "not reproduced" with probability at most 0.135% per cell (the rule's 3σ
level), and the seeds are fixed, so these tests are deterministic.
"""

from __future__ import annotations

import numpy as np
import pytest

from paper_figs.claims import engine as E
from paper_figs.claims import multidraft as M


@pytest.fixture
def small(monkeypatch):
    monkeypatch.setattr(M, "NI_DRAWS", 60_000)
    monkeypatch.setattr(M, "AS_BLOCKS", 60_000)
    monkeypatch.setattr(M, "AS_MIN_STEPS", 3_000)


def _verdicts(folder):
    """Prop. B.5's verdict and that of Thm B.4's proof reading (the Monte Carlo parts)."""
    (folder / "bounds_vs_drafts.csv").write_text("pair,B\nx,1\n")
    data = E.Data(folder)
    o = M.active_set_synth(data)
    proof = E.combine(p.verdict for p in o.parts if "proof's reading" in p.label)
    return M.nonidentical_synth(data).verdict, proof


def test_monte_carlo_agrees_with_the_bounds(tmp_path, small):
    assert _verdicts(tmp_path) == (E.REPRODUCED, E.REPRODUCED)
    # Thm B.4 as stated (a GLS step over the active drafts) fails on some pairs: that is the
    # verdict; the proof's reading, which holds, is named beside it and not counted
    o = M.active_set_synth(E.Data(tmp_path))
    assert o.verdict == E.REFUTED
    assert "as stated (a GLS step over the active drafts): fails" in o.reading
    assert "the proof's reading (Thm 5.1's coupling over the active drafts): reproduced" in \
        o.reading
    # the GLS part counts; the Šidák minimum, the Stouffer and PML(J) are shown
    assert [p.counted for p in o.parts] == [True, False, False, False]


def test_perturbing_the_bound_side_moves_the_verdict(tmp_path, small, monkeypatch):
    import specbound.theory as T

    ni, act = T.lml_nonidentical_bound, T.active_set_bound
    monkeypatch.setattr(T, "lml_nonidentical_bound", lambda p, qs: ni(p, qs) + 0.15)
    monkeypatch.setattr(T, "active_set_bound", lambda p, q, J: act(p, q, J) + 0.15)
    assert _verdicts(tmp_path) == (E.NOT_REPRODUCED, E.NOT_REPRODUCED)


def test_perturbing_the_monte_carlo_side_moves_the_verdict(tmp_path, small, monkeypatch):
    ni_mc, as_mc = M.nonidentical_mc, M.active_set_mc

    def low_ni(p, qs, n, rng):
        acc, blk = ni_mc(p, qs, n, rng)
        return acc - 0.15, blk

    def low_as(P, Q, n, rng):
        steps, accs = as_mc(P, Q, n, rng)
        return steps, np.floor(0.75 * accs).astype(np.int64)

    monkeypatch.setattr(M, "nonidentical_mc", low_ni)
    monkeypatch.setattr(M, "active_set_mc", low_as)
    assert _verdicts(tmp_path) == (E.NOT_REPRODUCED, E.NOT_REPRODUCED)


def test_monte_carlo_of_identical_drafts_matches_the_identical_case():
    """With Q_1 = ... = Q_B = q the augmented coupling's block events equal LML (Rowan et
    al.'s bound, a different function of the package): within 4σ at 100,000 draws."""
    from specbound.theory import lml_bound

    rng = np.random.default_rng(5)
    p, q = rng.dirichlet(np.ones(5)), rng.dirichlet(np.ones(5))
    _, blk = M.nonidentical_mc(p, np.stack([q, q, q]), 100_000, rng)
    want = float(lml_bound(p, q, 3))
    assert abs(blk - want) < 4 * np.sqrt(want * (1 - want) / 100_000)


def test_thm_b4_as_stated_decides_and_the_proof_reading_is_shown():
    """With the GLS reading present, it decides (exact: one pair below the bound refutes);
    the Monte Carlo of the proof's reading is shown beside it either way."""
    import pandas as pd

    df = pd.DataFrame({"context": [0, 1], "J": [2, 2], "steps": [10**6] * 2,
                       "mc_accept": [0.7004, 0.5996], "bound": [0.6, 0.5]})
    ok = pd.DataFrame({"pair": [0, 1], "J": [2, 3], "gls": [0.61, 0.7], "bound": [0.6, 0.7]})
    assert M.rule_active_set(df, ok).verdict == E.REPRODUCED
    o = M.rule_active_set(df, ok.assign(gls=[0.61, 0.69]))
    assert o.verdict == E.REFUTED and "fails" in o.reading
    assert M.rule_active_set(df).verdict == E.REPRODUCED  # no GLS file: the proof's reading
