"""Multi-draft scaling of MPFR with a drafter of another family: Liu, Wan, Gao & Gündüz
(2026), arXiv:2609.21858, Tables 6–13 report MPFR's AATPS at B = 2, 4, 6, 8 (every cell
rises with B: e.g. 2.563, 2.918, 3.109, 3.235 in Table 7); the sentence tested is that more
drafts give at least as many accepted tokens per step.

Real-model evidence: the n-gram study (``paper_figs.real_ngram``) runs the embedded model
with a prompt-lookup draft (``ngram:3``: the continuations of the B most recent earlier
occurrences of the last three tokens, a point-mass draft of no model family), MPFR at
B = 2 and B = 4 and VSpS with the same draft as B = 1 (for a point-mass draft q = δ_x,
VSpS and the exponential race of PFR, MPFR at B = 1, both accept with probability p(x) and
resample from p off x, so the two have the same law of accepted tokens).  The per-prompt
AATPS are read from ``real_runs.csv`` (the study's store), the configurations from
``real_ngram.csv``; consecutive B are differenced on the same prompts.

Paper's own numbers: MPFR's AATPS of Tables 6–13 at consecutive B (printed spread over three
seeds as the error; Tables 10–13 print none: the spread of the paper's repeated cells).

Rule (every column): "at least" per consecutive pair (B' > B: AATPS(B') ≥ AATPS(B)), a
deficit of :data:`MARGIN` of the larger AATPS must be visible; Student-t reference on the
prompts − 1, nothing decided below two prompts.
"""

from __future__ import annotations

import math

import numpy as np

from paper_figs.claims.data import MissingData, rows
from paper_figs.claims.rules import at_least, few, fmt
from paper_figs.claims.verdicts import NOT_DISTINGUISHABLE, Part, outcome

NGRAM_CSV = "real_ngram.csv"
RUNS_CSV = "real_runs.csv"
DRAFT = "ngram:3"
#: a deficit of 2% of the larger AATPS must be visible (the margin of the AATPS rows)
MARGIN = 0.02
TABLES = ("t6", "t7", "t8", "t9", "t10", "t11", "t12", "t13")
BS = (2, 4, 6, 8)


def rule_scaling(pairs):
    """``pairs``: (label, per-prompt differences AATPS(B') − AATPS(B), the larger mean
    AATPS) with per-prompt arrays, or (label, diff, se, scale, df) with a standard error
    already computed; "at least" per pair."""
    parts = []
    for label, *rest in pairs:
        if len(rest) == 2:
            d, scale = np.asarray(rest[0], dtype=float), float(rest[1])
            n = d.size
            diff = float(d.mean()) if n else math.nan
            se = float(np.std(d, ddof=1) / math.sqrt(n)) if n > 1 else math.nan
            df = few(n) if n > 1 else math.nan
            text = f"ΔAATPS {fmt(diff, 3)} ± {fmt(se, 2)} over {n} prompts"
        else:
            diff, se, scale, df = (float(x) if x is not None else None for x in rest)
            text = f"ΔAATPS {fmt(diff, 3)} ± {fmt(se, 2)}"
        parts.append(at_least(label, diff, se, MARGIN * scale, df,
                              f"{text} (margin {fmt(MARGIN * scale, 2)})"))
    return outcome(parts)


def _per_prompt(runs, decoder: str, B: int):
    sel = runs[(runs["decoder"] == decoder) & (runs["B"] == B) & (runs["draft"] == DRAFT)]
    if sel.empty:
        raise MissingData(f"{RUNS_CSV}: no {decoder} B = {B} rows with the {DRAFT} draft")
    return sel.groupby(["prompt_set", "prompt_index"])["aatps"].mean()


def scaling_real(data):
    cfg = rows(data.csv(NGRAM_CSV, ("config", "decoder", "B", "draft", "prompt_type",
                                    "n_prompts", "aatps")),
               f"the {DRAFT} configurations", draft=DRAFT)
    runs = data.csv(RUNS_CSV, ("decoder", "B", "draft", "prompt_set", "prompt_index", "aatps"))
    ladder = [("vsps", 1)] if len(cfg[cfg["decoder"] == "vsps"]) else []
    ladder += [("mpfr", int(b)) for b in sorted(set(cfg[cfg["decoder"] == "mpfr"]["B"]))]
    if len(ladder) < 2:
        raise MissingData(f"{NGRAM_CSV}: fewer than two B with the {DRAFT} draft")
    pairs, prompts, idles, joins = [], set(), [], []
    for (da, ba), (db, bb) in zip(ladder, ladder[1:], strict=False):
        lo, hi = _per_prompt(runs, da, ba), _per_prompt(runs, db, bb)
        j = lo.index.intersection(hi.index)
        prompts |= set(j)
        idles.append(len(j) > 0 and bool((lo[j] == 1).all() and (hi[j] == 1).all()))
        joins.append(j)
        name = "VSpS" if da == "vsps" else "MPFR"
        pairs.append((f"MPFR B={bb} ≥ {name} B={ba}", (hi[j] - lo[j]).to_numpy(dtype=float),
                      max(float(hi[j].mean()), float(lo[j].mean())) if len(j) else 1.0))
    o = rule_scaling(pairs)
    # a pair where every block of every prompt emitted one token at both B (the lookup
    # proposed nothing that was accepted) is no evidence about more drafts: 0 ± 0 decides
    # nothing
    parts = [Part(p.label, NOT_DISTINGUISHABLE, f"every block emitted one token at both B "
                  f"on the {len(j)} prompts (the {DRAFT} draft had nothing accepted): no "
                  "evidence", None) if idle else p
             for p, idle, j in zip(o.parts, idles, joins, strict=True)]
    return outcome(parts, sample=f"{len(prompts)} prompts, {DRAFT} draft (prompt lookup) "
                                   "on the embedded model")


def scaling_paper(numbers):
    pairs = []
    for t in TABLES:
        cells = [numbers[f"liu.{t}.B{b}.mpfr.aatps"] for b in BS]
        for (ba, a), (bb, b) in zip(zip(BS, cells, strict=True),
                                    list(zip(BS, cells, strict=True))[1:], strict=False):
            dfs = [x.df for x in (a, b) if x.df is not None]
            pairs.append((f"{t.replace('t', 'Table ')}: B={bb} ≥ B={ba}", b.value - a.value,
                          math.hypot(a.se, b.se), max(a.value, b.value),
                          min(dfs) if dfs else None))
    return rule_scaling(pairs)
