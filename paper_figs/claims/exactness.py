"""Evidence for the exactness of PFR and MPFR decoding (Liu, Wan, Gao & Gündüz (2026),
arXiv:2609.21858, Thm A.4–A.6): the emitted token of one speculative step follows the target
``p`` whatever the draft ``q`` and the number of drafts ``B``.

Tested against an independent sample, not by an identity: :func:`produce` draws
:data:`N_DRAWS` steps of ``sim.sample_emitted`` per (pair, scheme, B) on fixed random pairs
(vocabulary 8, Dirichlet(1) and a peaked pair; one seed per cell) and stores the token
counts in ``claims_exactness.csv`` of the output folder; the rule is a chi-square goodness
of fit of the counts against ``p``, converted to a one-sided z (z ≤ 3 per cell).  The file is
computed at INDEX time, only in a folder where the theory study ``bounds_vs_drafts`` has
run (about 2 s once the kernels are compiled); an existing file is read as it is.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from paper_figs.claims.engine import NOT_REPRODUCED, REPRODUCED, MissingData, Part, fmt, outcome

FILE = "claims_exactness.csv"
N_DRAWS = 200_000
VOCAB = 8
CELLS = (("exp_race", 1), ("mpfr", 2), ("mpfr", 4))
SEED = 2026


def pairs() -> list[tuple[str, np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(SEED)
    out = [(f"dirichlet-{k}", rng.dirichlet(np.ones(VOCAB)), rng.dirichlet(np.ones(VOCAB)))
           for k in range(2)]
    peaked = np.array([0.9] + [0.1 / (VOCAB - 1)] * (VOCAB - 1))
    out.append(("peaked", peaked, np.full(VOCAB, 1.0 / VOCAB)))
    return out


def produce(out_dir) -> Path:
    """Draw the samples and write :data:`FILE` (one row per pair, scheme, B and token)."""
    from specbound.sim import sample_emitted

    rows = []
    for i, (label, p, q) in enumerate(pairs()):
        for j, (scheme, B) in enumerate(CELLS):
            y = sample_emitted(p, q, scheme, B, n=N_DRAWS, seed=SEED + 10 * i + j)
            counts = np.bincount(y, minlength=VOCAB)
            rows += [{"pair": label, "scheme": scheme, "B": B, "token": t, "p": p[t],
                      "count": int(counts[t]), "n": N_DRAWS} for t in range(VOCAB)]
    path = Path(out_dir) / FILE
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def rule_exact_law(cells):
    """Per (pair, scheme, B): chi-square of the emitted counts against ``n p``, as a z."""
    from scipy import stats

    parts = []
    for label, p, counts in cells:
        p, counts = np.asarray(p, float), np.asarray(counts, float)
        n = counts.sum()
        e = n * p
        m = e > 0
        if np.any(counts[~m] > 0):
            parts.append(Part(label, NOT_REPRODUCED, "emitted a token of target probability 0",
                              math.inf))
            continue
        chi2 = float(np.sum((counts[m] - e[m]) ** 2 / e[m]))
        z = float(stats.norm.isf(stats.chi2.sf(chi2, max(int(m.sum()) - 1, 1))))
        parts.append(Part(label, REPRODUCED if z <= 3.0 else NOT_REPRODUCED,
                          f"chi-square {fmt(chi2, 3)} on {int(m.sum()) - 1} dof, z = {fmt(z, 3)}, "
                          f"{int(n)} draws", z))
    return outcome(parts)


def exactness_synth(data):
    path = Path(data.out_dir) / FILE
    if not path.is_file():
        if not (Path(data.out_dir) / "bounds_vs_drafts.csv").is_file():
            raise MissingData(f"{FILE} is missing (computed where bounds_vs_drafts has run)")
        produce(data.out_dir)
    df = data.csv(FILE, ("pair", "scheme", "B", "token", "p", "count"))
    cells = [(f"{s} B={int(B)}, {pair}", g.sort_values("token")["p"],
              g.sort_values("token")["count"])
             for (pair, s, B), g in df.groupby(["pair", "scheme", "B"], sort=False)]
    return rule_exact_law(cells)
