"""Evidence at embedded scale for a benchmark finding of Zhou et al. (2026), arXiv:2607.26627
(§1, Fig. 1, Fig. 6, Tables 7–8): truncation-based verification (SpecCascade: min-p gating of
the draft, Eq. 13) performs below *matched* truncation sampling (the target truncated by the
same min-p rule, Eq. 4), because its induced law is distorted away from the truncated target.

The paper measures task accuracy of 7B models; this is the closest honest analogue on the
logged distributions of the embedded model (the study log of a full run, 4 drafts × 64 prompts
× 64 tokens, else the shipped log, 4 drafts × 569 contexts; ``paper_figs._real_log``):
per context, the closed-form induced law of truncation-based verification
(``theory.lossy.induced_distribution(..., "truncation", allowed=min-p set)``) against the
truncated target ``p_Θ``, with two measures: KL(induced ‖ p_Θ) and a quality measure the
model is at neither floor nor ceiling on, the expected target log-probability of the emitted
token ``E[log p(y)]`` (higher is better: truncation sampling raises it over plain sampling).
The verdict is decided by the paper's metric of the distortion, the KL of Theorem 1; the
E[log p] proxy is stated beside it.
:func:`produce` writes one row per (draft, p_base, context) to ``claims_truncation_embedded.csv``
of the output folder (computed at INDEX time where ``real_lossy`` has run; about a second);
the rule clusters the contexts by prompt (Student-t reference on the prompts − 1).
"""

from __future__ import annotations

import math
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from paper_figs.claims.data import refresh_from_log, write_csv
from paper_figs.claims.rules import few, fmt, ordering
from paper_figs.claims.verdicts import Part, outcome

FILE = "claims_truncation_embedded.csv"
P_BASES = (0.1, 0.3)


def produce(out_dir, log=None) -> Path:
    """Per (draft, p_base, logged context): E[log p] under truncation-based verification and
    under matched truncation sampling, and KL(induced ‖ p_Θ)."""
    from paper_figs._real_log import open_log, padded_pairs
    from specbound.theory.lossy import induced_distribution
    from specbound.theory.tree import min_p_allowed

    lg = open_log(log)
    rows = []
    for draft in lg.drafts:
        P, Q, pairs = padded_pairs(lg, draft)
        logp = np.log(np.where(P > 0, P, 1.0))
        for pb in P_BASES:
            A = min_p_allowed(P, pb)
            ind = np.asarray(induced_distribution(P, Q, "truncation", allowed=A), dtype=float)
            kept = np.where(A, P, 0.0)
            pt = kept / kept.sum(axis=1, keepdims=True)
            ratio = np.divide(ind, pt, out=np.ones_like(ind), where=(ind > 0) & (pt > 0))
            kl = np.where(ind > 0, ind * np.log(ratio), 0.0).sum(axis=1)
            kl = np.where(np.any((ind > 0) & (pt == 0), axis=1), np.inf, kl)
            q_ind = np.sum(np.where(ind > 0, ind * logp, 0.0), axis=1)
            q_tr = np.sum(pt * logp, axis=1)
            rows += [{"draft": draft, "p_base": pb, "prompt_id": int(lp.prompt_id),
                      "position": int(lp.position), "logp_verification": float(a),
                      "logp_truncation_sampling": float(b), "kl_to_truncated": float(k)}
                     for lp, a, b, k in zip(pairs, q_ind, q_tr, kl, strict=True)]
    path = Path(out_dir) / FILE
    write_csv(path, pd.DataFrame(rows))
    return path


def rule_below(groups):
    """Per (draft, p_base), decided by the paper's metric of the distortion, KL(induced ‖
    p_Θ) of Theorem 1 (the divergence of the law truncation-based verification emits from
    the matched truncation sampling baseline's), averaged per prompt, above 0 (ordering at
    the t reference on the prompts − 1).  The E[log p] proxy (matched truncation sampling's
    expected target log-probability minus verification's, per prompt) is stated beside it,
    not counted: it can point the other way (a sharp draft concentrates its emissions on
    tokens of high target probability, raising E[log p] while distorting the law)."""
    parts = []
    for label, by_prompt, kl_by_prompt in groups:
        k = np.asarray(kl_by_prompt, dtype=float)
        d = np.asarray(by_prompt, dtype=float)
        n = k.size
        se_k = float(np.std(k, ddof=1) / math.sqrt(n)) if n > 1 else math.nan
        se_d = float(np.std(d, ddof=1) / math.sqrt(n)) if n > 1 else math.nan
        dof = few(n) if n > 1 else math.nan
        parts.append(ordering(f"{label}: KL(induced ‖ p_Θ) > 0", float(k.mean()), se_k, dof,
                              f"KL = {fmt(float(k.mean()), 3)} ± {fmt(se_k, 2)} nats over "
                              f"{n} prompts"))
        proxy = ordering(f"{label}: E[log p] proxy", float(d.mean()), se_d, dof,
                         f"ΔE[log p] = {fmt(float(d.mean()), 3)} ± {fmt(se_d, 2)} nats")
        parts.append(Part(proxy.label, proxy.verdict, proxy.text, proxy.z, False,
                          "the proxy, shown: not the paper's metric"))
    return outcome(parts)


def below_real(data):
    refresh_from_log(data.out_dir, FILE, sys.modules[__name__], produce)
    df = data.csv(FILE, ("draft", "p_base", "prompt_id", "logp_verification",
                         "logp_truncation_sampling", "kl_to_truncated"))
    df = df.assign(d=df["logp_truncation_sampling"] - df["logp_verification"])
    groups = []
    for (draft, pb), g in df.groupby(["draft", "p_base"], sort=False):
        # an infinite KL (mass outside the set) is the most distortion there is: kept
        kl = g.groupby("prompt_id")["kl_to_truncated"].mean()
        groups.append((f"{draft}, p_base = {pb:g}", g.groupby("prompt_id")["d"].mean(), kl))
    o = outcome(rule_below(groups).parts)
    n_ctx = int(df.groupby(["draft", "p_base"]).size().iloc[0])

    return replace(o, sample=f"{df['prompt_id'].nunique()} prompts, {n_ctx} logged contexts "
                             "per draft (real distribution log)")
