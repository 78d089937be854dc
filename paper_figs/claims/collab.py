"""Evidence at embedded scale for the collaborative-verification findings of Zhou et al. (2026),
arXiv:2607.26627: the ceiling-vs-interpolation ablation (§4.1, Table 1) and the trade-off of
CoS, lenience and the judge (§4.1, Fig. 4, App. D).

The paper measures task accuracy of 7B-72B model pairs on MBPP+ and three other suites; this
is the closest honest analogue on the logged distributions of the embedded model (the study
log of a full run: 4 drafts × 64 prompts × 64 sampled tokens, ``paper_figs._real_log``; the
shipped log, 12 prompts and 569 contexts, where a run has none).  Per logged context, the
closed-form induced
law of each rule against the target ``p`` it relaxes, measured by the squared Hellinger
distance ``H²(r, p) = 1 − Σ √(r p)`` (0 for lossless verification; lower is better).  KL(r ‖ p)
is not used: CoS emits tokens outside the target's support (the early-exit and quantized drafts
do in every context), where it is infinite; the total variation is not used either: at matched
acceptance lenience and CoS move the same mass (their TV to ``p`` is equal by algebra), so only
a divergence that weighs *where* the mass goes can tell them apart.

Rules (``specbound.theory.lossy`` where the package has the rule; the two ablation rows of
Table 1 are written here from the table, since the package has no such rule):

* ``cos`` -- interpolation, ``λ p + (1 − λ) q`` (Eq. 8), ``λ`` ∈ :data:`GRID`;
* ``lenience`` -- Eq. 10, ``ℓ`` ∈ :data:`GRID`;
* ``cos_matched`` -- CoS with ``λ = Δ_ℓ`` in each context: its acceptance ``1 − λ·TV`` then
  equals lenience's ``Σ min(q, p/ℓ)`` (lenience and CoS agree on ``q ≤ p``; they differ only in
  how they remove the same excess mass where ``q > p``);
* ``t1_interpolation`` -- Table 1, left: ``q + Δ_λ (p − q)`` where ``q ≤ p`` (lenience's adaptive
  interpolation, ``ℓ = λ``), ``λ p + (1 − λ) q`` where ``q > p`` (CoS), renormalized;
* ``t1_ceiling`` -- Table 1, right: ``λ p + (1 − λ) q`` where ``q ≤ p/λ``, ``p/λ`` above it,
  renormalized (neither row of the table sums to 1 as printed; renormalizing is the reading of
  the paper's Eq. 13, and the only one that needs no further assumption).

:func:`produce` writes ``claims_collaborative_embedded.csv`` (one row per draft, rule, parameter
and context; computed at INDEX time where ``real_lossy`` has run, a second or two); the rules
average per prompt and use the Student-t reference on the prompts − 1.

The judge (AutoJudge: a classifier of "important" mismatches trained on downstream task
outcomes, App. F.2) is not built: a judge needs task-outcome supervision the embedded model
cannot give, and against a divergence from ``p`` the best "judge" is the one that never fires
(lossless).  The Fig. 4 row says so in a part that is shown, never counted.
"""

from __future__ import annotations

import math
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from paper_figs.claims.data import MissingData, refresh_from_log, write_csv
from paper_figs.claims.rules import few, fmt, ordering
from paper_figs.claims.verdicts import NOT_DISTINGUISHABLE, NOT_TESTABLE, REPRODUCED, Part, outcome

FILE = "claims_collaborative_embedded.csv"
#: the parameter grid of Table 1 (λ) and of the Table 5 ablation (ℓ)
GRID = (0.2, 0.4, 0.6, 0.8)
COLUMNS = ("draft", "rule", "param", "prompt_id", "position", "acceptance", "hellinger")


def hellinger2(r, p):
    """Squared Hellinger distance per row, ``1 − Σ √(r p)`` (clipped at 0)."""
    return np.maximum(1.0 - np.sum(np.sqrt(np.asarray(r) * np.asarray(p)), axis=1), 0.0)


def table1_interpolation(P, Q, lam: float):
    """Table 1, left row, renormalized: lenience's adaptive interpolation where ``q ≤ p``
    (``Δ_λ``), CoS where ``q > p``."""
    from specbound.theory.lossy import lenience_delta

    d = np.asarray(lenience_delta(P, Q, lam), dtype=float)[:, None]
    y = np.where(Q <= P, Q + d * (P - Q), lam * P + (1.0 - lam) * Q)
    return y / y.sum(axis=1, keepdims=True)


def table1_ceiling(P, Q, lam: float):
    """Table 1, right row, renormalized: CoS where ``q ≤ p/λ``, the ceiling ``p/λ`` above."""
    y = np.where(Q <= P / lam, lam * P + (1.0 - lam) * Q, P / lam)
    return y / y.sum(axis=1, keepdims=True)


def produce(out_dir, log=None) -> Path:
    """Per (draft, rule, parameter, logged context): acceptance and H²(induced, p)."""
    from paper_figs._real_log import open_log, padded_pairs
    from specbound.theory.lossy import acceptance_rate, induced_distribution, lenience_delta

    lg = open_log(log)
    frames = []
    for draft in lg.drafts:
        P, Q, pairs = padded_pairs(lg, draft)
        pid = np.array([int(lp.prompt_id) for lp in pairs])
        pos = np.array([int(lp.position) for lp in pairs])

        def add(rule, param, acc, law, draft=draft, P=P, pid=pid, pos=pos):
            frames.append(pd.DataFrame({
                "draft": draft, "rule": rule, "param": param, "prompt_id": pid,
                "position": pos, "acceptance": np.asarray(acc, dtype=float),
                "hellinger": hellinger2(law, P)}))

        for g in GRID:
            lam = np.full(len(P), g)
            add("cos", g, acceptance_rate(P, Q, "interpolation", lam=lam),
                induced_distribution(P, Q, "interpolation", lam=lam))
            add("lenience", g, acceptance_rate(P, Q, "lenience", ell=g),
                induced_distribution(P, Q, "lenience", ell=g))
            dl = np.clip(np.asarray(lenience_delta(P, Q, g), dtype=float), 0.0, 1.0)
            add("cos_matched", g, acceptance_rate(P, Q, "interpolation", lam=dl),
                induced_distribution(P, Q, "interpolation", lam=dl))
            nan = np.full(len(P), np.nan)
            add("t1_interpolation", g, nan, table1_interpolation(P, Q, g))
            add("t1_ceiling", g, nan, table1_ceiling(P, Q, g))
    path = Path(out_dir) / FILE
    write_csv(path, pd.concat(frames, ignore_index=True))
    return path


def _load(data) -> pd.DataFrame:
    refresh_from_log(data.out_dir, FILE, sys.modules[__name__], produce)
    return data.csv(FILE, COLUMNS)


#: two induced laws whose H² differ by less than this in a context coincide there (rounding)
TIE = 1e-12


def _paired(df, draft, a, b, g):
    """Per prompt, mean H² of rule ``a`` minus rule ``b`` at parameter ``g`` (one draft), over
    the contexts where the two laws differ (where they coincide -- every draft accepted, or
    the ceiling not binding -- the context says nothing about which is better); returns the
    per-prompt means and the number of contexts kept."""
    sel = df[(df["draft"] == draft) & np.isclose(df["param"], g)]
    ra = sel[sel["rule"] == a].set_index(["prompt_id", "position"])["hellinger"]
    rb = sel[sel["rule"] == b].set_index(["prompt_id", "position"])["hellinger"]
    if ra.empty or rb.empty:
        raise MissingData(f"{FILE}: no {a} / {b} rows at {g} for {draft}")
    d = (ra - rb).dropna()
    d = d[d.abs() >= TIE]
    return d.groupby(level="prompt_id").mean().to_numpy(float), int(d.size)


def _below(label, paired, what):
    """"a below b": the per-prompt mean of b − a above 0 (t reference, prompts − 1); where
    the two laws coincide in every context the part is shown, not counted."""
    by_prompt, kept = paired
    d = -np.asarray(by_prompt, dtype=float)
    n = d.size
    if kept == 0:
        return Part(label, NOT_DISTINGUISHABLE, "the two laws coincide in every context",
                    None, False, "an identity of the rules on these data")
    se = float(np.std(d, ddof=1) / math.sqrt(n)) if n > 1 else math.nan
    return ordering(label, float(d.mean()), se, few(n) if n > 1 else math.nan,
                    f"{what} {fmt(float(d.mean()), 3)} ± {fmt(se, 2)} over {n} prompts "
                    f"({kept} contexts where the laws differ)")


def _sample(df):
    n_ctx = int(df.groupby(["draft", "rule", "param"]).size().iloc[0])
    return (f"{df['prompt_id'].nunique()} prompts, {n_ctx} logged contexts per draft × "
            f"{df['draft'].nunique()} drafts (real distribution log); H² averaged per prompt")


def rule_table1(df):
    """Table 1 at embedded scale, per (draft, λ): the ceiling row's H² below the interpolation
    row's, and below CoS's (the ceiling is what protects quality); ordering on the per-prompt
    differences."""
    parts = []
    for draft in dict.fromkeys(df["draft"]):
        for g in GRID:
            parts.append(_below(f"{draft}, λ = {g:g}: ceiling row below interpolation row",
                                _paired(df, draft, "t1_ceiling", "t1_interpolation", g),
                                "H²(interpolation) − H²(ceiling)"))
            parts.append(_below(f"{draft}, λ = {g:g}: ceiling row below CoS",
                                _paired(df, draft, "t1_ceiling", "cos", g),
                                "H²(CoS) − H²(ceiling)"))

    return replace(outcome(parts), sample=_sample(df))


def table1_real(data):
    return rule_table1(_load(data))


def rule_tradeoff(df):
    """Fig. 4 / App. D at embedded scale, per (draft, ℓ): lenience's H² below CoS's at the
    same acceptance (``λ = Δ_ℓ`` per context; ordering). CoS's H² growing as λ falls holds
    by convexity of H² along the mixture (shown, not counted); the judge is not built (shown,
    not counted)."""
    parts = []
    for draft in dict.fromkeys(df["draft"]):
        for g in GRID:
            parts.append(_below(f"{draft}, ℓ = {g:g}: lenience below CoS at equal acceptance",
                                _paired(df, draft, "lenience", "cos_matched", g),
                                "H²(CoS, λ = Δ_ℓ) − H²(lenience)"))
        cos = df[(df["draft"] == draft) & (df["rule"] == "cos")]
        m = cos.groupby("param")["hellinger"].mean()
        parts.append(Part(f"{draft}: CoS's H² as λ falls 0.8 → 0.2", REPRODUCED,
                          " → ".join(fmt(m.get(g, math.nan), 3) for g in reversed(GRID)),
                          None, False, "monotone by convexity of H² along λ p + (1 − λ) q"))
    parts.append(Part("the judge does best", NOT_TESTABLE,
                      "not built: AutoJudge is trained on task outcomes the embedded model "
                      "cannot supply, and against a divergence from p the best judge never "
                      "fires", None, False, "not testable at embedded scale"))

    return replace(outcome(parts), sample=_sample(df))


def tradeoff_real(data):
    return rule_tradeoff(_load(data))
