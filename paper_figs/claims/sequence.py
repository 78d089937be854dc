"""Exactness at sequence level (Liu, Wan, Gao & Gündüz (2026), arXiv:2609.21858, Thm A.6):
the tokens a keyed speculative decoder emits over a block follow the target's
autoregressive law, not only its first token (``paper_figs.claims.exactness`` tests one
step).

Tested against an independent sample: :func:`produce` decodes :data:`N_SEQ` prompts per
(scheme, B) with the package's batch decoder (``sim.speculative_decode_batch``, lookahead
:data:`L`, two new tokens) on a synthetic LM whose next-token law depends on the last two
tokens (vocabulary :data:`VOCAB`) and a draft of it; every prompt ends with the same two
tokens :data:`CONTEXT` after a random prefix, so each has the same two-token target law
``p(w1 | CONTEXT) p(w2 | CONTEXT[1], w1)`` while its keyed randomness (whole-prefix labels)
is its own.  Each (scheme, B) has its own key, so the three samples are independent.  The
counts of the :data:`VOCAB`² pairs are stored in ``claims_sequence_exactness.csv`` (computed
at INDEX time where ``bounds_vs_drafts`` has run, and again when this code changes); the
rule is the chi-square goodness of fit of :mod:`~paper_figs.claims.exactness` per (scheme,
B), one-sided z ≤ 3 (an exact decoder fails one of the three cells with probability about
0.4%; the seed and keys are fixed, so the verdict is reproducible).  Both tokens of a pair
can come from one block (a draft accepted, then the next), so a block mechanism that
distorts the second token is seen.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

from paper_figs.claims.data import code_signature, refresh, write_csv
from paper_figs.claims.exactness import rule_exact_law

FILE = "claims_sequence_exactness.csv"
N_SEQ = 6000
VOCAB = 6
L = 3
CONTEXT = (1, 2)
PREFIX = 8
CELLS = (("pfr", 1), ("mpfr", 2), ("mpfr", 4))
SEED = 2609


def models():
    """The target (a synthetic LM of context length 2) and its draft (mismatch 0.4)."""
    from specbound.sim import SyntheticLM

    target = SyntheticLM(VOCAB, context_length=2, seed=SEED)
    return target, target.draft(0.4, seed=SEED + 1)


def joint_law(target) -> np.ndarray:
    """``law[a, b] = p(a | CONTEXT) · p(b | CONTEXT[1], a)``."""
    first = np.asarray(target.next_distribution(list(CONTEXT)), dtype=float)
    second = np.stack([np.asarray(target.next_distribution([CONTEXT[1], a]), dtype=float)
                       for a in range(VOCAB)])
    return first[:, None] * second


def produce(out_dir) -> Path:
    """Decode the prompts of every cell and write :data:`FILE` (one row per scheme, B and
    token pair)."""
    from specbound.sim import speculative_decode_batch

    target, draft = models()
    law = joint_law(target)
    rng = np.random.default_rng(SEED)
    prompts = [[*map(int, r), *CONTEXT] for r in rng.integers(0, VOCAB, size=(N_SEQ, PREFIX))]
    rows = []
    for scheme, B in CELLS:
        res = speculative_decode_batch(target, draft, prompts, scheme, L=L, B=B,
                                       key=f"sequence-exactness-{scheme}-{B}",
                                       max_new_tokens=2, seed=list(range(N_SEQ)),
                                       parallel=False)
        pairs = np.array([np.asarray(r.generated)[:2] for r in res], dtype=np.int64)
        counts = np.zeros((VOCAB, VOCAB), dtype=np.int64)
        np.add.at(counts, (pairs[:, 0], pairs[:, 1]), 1)
        rows += [{"scheme": scheme, "B": B, "w1": a, "w2": b, "p": float(law[a, b]),
                  "count": int(counts[a, b]), "n": N_SEQ}
                 for a in range(VOCAB) for b in range(VOCAB)]
    path = Path(out_dir) / FILE
    write_csv(path, pd.DataFrame(rows))
    return path


def sequence_synth(data):
    refresh(data.out_dir, FILE, code_signature(sys.modules[__name__], FILE),
            lambda: produce(data.out_dir), "bounds_vs_drafts.csv")
    df = data.csv(FILE, ("scheme", "B", "w1", "w2", "p", "count"))
    cells = []
    for (s, B), g in df.groupby(["scheme", "B"], sort=False):
        g = g.sort_values(["w1", "w2"])
        cells.append((f"{s} B={int(B)}, two tokens", g["p"], g["count"]))
    return rule_exact_law(cells)
