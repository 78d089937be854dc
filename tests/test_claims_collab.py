"""The embedded-scale analogue of Zhou et al. (2026, arXiv:2607.26627)'s collaborative-
verification findings (``paper_figs.claims.collab``): the two sides of each comparison come
from different producers, so perturbing one producer moves the verdict.  Deterministic (the
shipped log, closed forms)."""

from __future__ import annotations

import numpy as np

from paper_figs.claims import collab
from paper_figs.claims import engine as E


def _verdicts(folder):
    collab.produce(folder)
    data = E.Data(folder)
    return collab.tradeoff_real(data), collab.table1_real(data)


def test_perturbing_one_producer_moves_the_verdicts(tmp_path, monkeypatch):
    (tmp_path / "base").mkdir()
    base_trade, base_t1 = _verdicts(tmp_path / "base")
    # on the shipped log lenience is below CoS at equal acceptance for the wide drafts, and
    # Table 1's ceiling row is below its interpolation row for every draft
    wide = [p for p in base_trade.parts if p.counted and "quantized" in p.label]
    assert wide and all(p.verdict == E.REPRODUCED for p in wide)
    rows = [p for p in base_t1.parts if "interpolation row" in p.label]
    assert rows and all(p.verdict == E.REPRODUCED for p in rows)

    from specbound.theory import lossy

    real = lossy.induced_distribution

    def pushed(p, q, rule, **kw):  # lenience's law pushed halfway to the draft
        law = real(p, q, rule, **kw)
        return 0.5 * law + 0.5 * np.asarray(q) if rule == "lenience" else law

    monkeypatch.setattr(lossy, "induced_distribution", pushed)
    monkeypatch.setattr(collab, "table1_ceiling",
                        lambda P, Q, lam: 0.5 * P + 0.5 * Q)  # a heavier distortion
    (tmp_path / "pert").mkdir()
    trade, t1 = _verdicts(tmp_path / "pert")
    wide = [p for p in trade.parts if p.counted and "quantized" in p.label]
    assert all(p.verdict == E.NOT_REPRODUCED for p in wide)
    rows = [p for p in t1.parts if "interpolation row" in p.label and "quantized" in p.label]
    assert rows[-1].verdict == E.NOT_REPRODUCED  # λ = 0.8: the pushed ceiling row is worse


def test_hellinger_and_the_table1_rows_are_distributions():
    rng = np.random.default_rng(0)
    P = rng.dirichlet(np.ones(8), size=5)
    Q = rng.dirichlet(np.ones(8), size=5)
    assert np.allclose(collab.hellinger2(P, P), 0.0)
    h = collab.hellinger2(P, Q)
    assert np.all((h > 0) & (h <= 1))
    for g in collab.GRID:
        for law in (collab.table1_interpolation(P, Q, g), collab.table1_ceiling(P, Q, g)):
            assert np.all(law >= 0) and np.allclose(law.sum(axis=1), 1.0)
