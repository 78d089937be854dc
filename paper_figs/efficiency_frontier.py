"""Efficiency–distortion frontier of lossy verification (Zhou et al. 2026 Tables 1 and 5 analogue).

For every rule of ``specbound.theory.lossy`` and a sweep of its parameter, the mean
single-token acceptance ``a`` over a batch of synthetic contexts, the block efficiency
``(1 − a^{L+1}) / (1 − a)`` for L = 4 and 8 (``theory.block_efficiency``; with contexts drawn
independently per position, E[Π a_i] = (E a)^k, so the mean acceptance is the right input),
and the mean distortion KL(induced ‖ p) (``theory.distortion``), all from closed forms.

Rules and sweeps: lossless; interpolation / CoS (λ = weight on the target, 1 → 0); lenience
(ℓ = 1 → 0.05); overshoot ceiling (Table 1 "ceiling only" / Table 5 row 4, same ℓ) in both
readings of its yield: "residual" (the default, which equals lenience) and "renormalize";
judge (a synthetic judge accepting an overestimated token when p/q ≥ δ,
δ = 1 → 0); Fuzzy SD (TV gate, threshold T = 0 → 1); truncation with the min-p set (SpecCascade
under standard SD, Eq. 13, p_base = 0.5 → 0.02) and with the η set (typical acceptance,
ε = 0.3 → 1e-4); truncation + ceiling (Table 5 row 5, min-p 0.1, ℓ = 1 → 0.05; both
readings, as for the ceiling; docs/fidelity.md derives the default); contrastive
reweighting (β = 0 → 2, α = 0.1).  Fuzzy SD follows Zhou et al. 2026 App. A.2 literally: a closed
gate rejects every draft (acceptance 0) and emits a target token.  For the renormalising
rules ``a`` is the probability that the first draft is accepted (the yield), as in
``theory.acceptance_rate``.

Synthetic families (fixed seeds; n = 200 tokens, 200 contexts — 50 tokens, 30 contexts with
``--quick``): Zipf(1.1) targets on a random token order, and softmax-Gaussian targets (logit
scale 2.5); each context's draft is a noisy draft (Gaussian logit noise,
``specbound.sim.distributions.noisy_draft``) at a TV drawn uniformly from [0.1, 0.6]
(lowered for the rare peaked target that cannot reach it along its noise direction).
Distributions logged from real language models come with the ``llm`` issue; this script
covers the synthetic families only.

Outputs: ``efficiency_frontier.png`` and ``efficiency_frontier.csv`` (columns ``family,
rule, param_name, param, acceptance, be_L4, be_L8, kl, reverse_kl, tv``; KL/TV are means
over contexts, ``reverse_kl`` = KL(p ‖ induced), ``inf`` where the induced law drops part of
the support of ``p``).

Run: ``python -m paper_figs.efficiency_frontier [--quick] [--out DIR]
[--vocab N] [--targets N] [--ell X,...]``
(``--help`` for the defaults).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from paper_figs._common import (
    Param,
    resolve_params,
    rule_color,
    setup_matplotlib,
    share,
    write_table_and_figure,
)
from specbound.sim.distributions import noisy_draft, softmax_gaussian, zipf
from specbound.theory import block_efficiency
from specbound.theory.lossy import acceptance_rate, distortion, induced_distribution
from specbound.theory.tree import eta_allowed, min_p_allowed

FIGURE = True
NAME = "efficiency_frontier"
ELLS = (1.0, 0.8, 0.6, 0.4, 0.3, 0.2, 0.1, 0.05)
PARAMS = (
    # the two families' targets and drafts and the rules' induced laws and temporaries:
    # measured (tracemalloc) 120 bytes per target and token, about 15 float64 arrays of
    # targets x vocab
    Param("vocab", "int", 200, 50, "tokens n of every target", low=2,
          memory=lambda v: share(v, "vocab", ("vocab", "targets"),
                                 16 * 8 * v.targets * v.vocab)),
    Param("targets", "int", 200, 30, "targets per family", low=1,
          memory=lambda v: share(v, "targets", ("vocab", "targets"),
                                 16 * 8 * v.targets * v.vocab)),
    Param("ell", "floats", ELLS, ELLS, "ℓ grid of the lenience and ceiling rules", low=0, high=1,
          check=lambda v: "every ℓ must be > 0" if min(v.ell) <= 0 else None),
)


def families(quick: bool, **params) -> list[tuple[str, np.ndarray, np.ndarray]]:
    v = resolve_params(PARAMS, quick, params)
    n, m = v.vocab, v.targets
    out = []
    for k, (name, P) in enumerate((("Zipf(1.1) targets", zipf(n, 1.1, size=m, seed=31)),
                                   ("softmax-Gaussian targets",
                                    softmax_gaussian(n, scale=2.5, size=m, seed=32)))):
        tv = np.random.default_rng(40 + k).uniform(0.1, 0.6, size=m)
        out.append((name, P, np.stack([draft_at_tv(P[i], tv[i], 1000 * k + i) for i in range(m)])))
    return out


def draft_at_tv(p: np.ndarray, tv: float, seed: int) -> np.ndarray:
    """Noisy draft at the requested TV; a very peaked target may not reach it along its
    noise direction, and then the request is lowered (by 20% at a time) until it does."""
    while True:
        try:
            return noisy_draft(p, tv, seed=seed).q
        except ValueError:
            tv *= 0.8


def sweeps(P: np.ndarray, Q: np.ndarray, ELLS=ELLS):
    """(rule label, rule, parameter name, values, params(value) -> dict)."""
    A01 = min_p_allowed(P, 0.1)
    ratio = np.divide(P, Q, out=np.zeros_like(P), where=Q > 0)
    return [
        ("lossless", "lossless", "-", [0.0], lambda v: {}),
        ("interpolation (CoS)", "interpolation", "lam",
         [1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1, 0.0], lambda v: {"lam": v}),
        ("lenience", "lenience", "ell", ELLS, lambda v: {"ell": v}),
        ("ceiling only (residual, default)", "ceiling", "ell", ELLS,
         lambda v: {"ell": v, "completion": "residual"}),
        ("ceiling only (renormalize)", "ceiling", "ell", ELLS,
         lambda v: {"ell": v, "completion": "renormalize"}),
        ("judge (p/q ≥ δ)", "judge", "delta", [1.0, 0.8, 0.6, 0.4, 0.2, 0.1, 0.05, 0.0],
         lambda v: {"judge": (Q > P) & (ratio >= v)}),
        ("Fuzzy SD (TV gate)", "fuzzy", "threshold", [0.0, 0.15, 0.25, 0.35, 0.45, 0.55, 1.0],
         lambda v: {"threshold": v, "divergence": "tv"}),
        ("SpecCascade (min-p, Eq. 13)", "truncation", "p_base",
         [0.5, 0.3, 0.2, 0.1, 0.05, 0.02], lambda v: {"allowed": min_p_allowed(P, v)}),
        ("typical acceptance (η, Eq. 13)", "truncation", "epsilon",
         [0.3, 0.1, 0.03, 0.01, 1e-3, 1e-4], lambda v: {"allowed": eta_allowed(P, v)}),
        ("truncation + ceiling (min-p 0.1, residual, default)", "truncation_ceiling", "ell",
         ELLS, lambda v: {"allowed": A01, "ell": v, "completion": "residual"}),
        ("truncation + ceiling (min-p 0.1, renormalize)", "truncation_ceiling", "ell", ELLS,
         lambda v: {"allowed": A01, "ell": v, "completion": "renormalize"}),
        ("contrastive", "contrastive", "beta", [0.0, 0.25, 0.5, 1.0, 2.0],
         lambda v: {"beta": v}),
    ]


def compute(quick: bool = False, **params) -> pd.DataFrame:
    pv = resolve_params(PARAMS, quick, params)
    rows = []
    for fam, P, Q in families(quick, vocab=pv.vocab, targets=pv.targets):
        for label, rule, pname, values, make in sweeps(P, Q, pv.ell):
            for v in values:
                params = make(v)
                a = float(np.mean(acceptance_rate(P, Q, rule, **params)))
                d = distortion(induced_distribution(P, Q, rule, **params), P)
                rows.append({"family": fam, "rule": label, "param_name": pname,
                             "param": float(v), "acceptance": a,
                             "be_L4": block_efficiency(a, 4), "be_L8": block_efficiency(a, 8),
                             "kl": float(np.mean(d.kl)), "reverse_kl": float(np.mean(d.reverse_kl)),
                             "tv": float(np.mean(d.tv))})
    return pd.DataFrame(rows)


MARKERS = "o*s^vD<>pXhPd"



def plot(df: pd.DataFrame, png: Path) -> None:
    plt = setup_matplotlib()
    fams = list(dict.fromkeys(df["family"]))
    cols = (("acceptance", "mean acceptance a"), ("be_L4", "block efficiency, L = 4"),
            ("be_L8", "block efficiency, L = 8"))
    fig, axes = plt.subplots(len(fams), 3, figsize=(15.0, 8.4), sharex=True)
    rules = list(dict.fromkeys(df["rule"]))
    for r, fam in enumerate(fams):
        for c, (col, ylabel) in enumerate(cols):
            ax = axes[r, c]
            for k, rule in enumerate(rules):
                sub = df[(df["family"] == fam) & (df["rule"] == rule)]
                if rule == "lossless":
                    ax.plot(sub["kl"], sub[col], "*", ms=13, color="black", zorder=10,
                            label=rule)
                    continue
                ax.plot(sub["kl"], sub[col], marker=MARKERS[k % len(MARKERS)], ms=5,
                        color=rule_color(rule), lw=1.2, label=rule,
                        ls="--" if "renormalize" in rule else "-")
            ax.set_xscale("symlog", linthresh=1e-3)
            ax.set_xlim(left=0.0)
            ax.set_ylabel(ylabel)
            ax.set_title(fam, fontsize=9.5)
            if r == len(fams) - 1:
                ax.set_xlabel("mean KL(induced ‖ p) (nats, symlog)")
    handles, names = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, names, loc="lower center", ncol=4, bbox_to_anchor=(0.5, -0.1))
    fig.suptitle("Efficiency–distortion frontier of lossy verification rules (closed forms; "
                 "noisy drafts, TV ~ U[0.1, 0.6])")
    fig.tight_layout()
    fig.savefig(png)
    plt.close(fig)


def main(out_dir, quick: bool = False, **params) -> list[Path]:
    """Write ``efficiency_frontier.csv`` and ``.png`` into ``out_dir``; return the paths."""
    df = compute(quick=quick, **params)
    return write_table_and_figure(out_dir, NAME, df, plot, "%.10g")


if __name__ == "__main__":
    from paper_figs._cli import cli

    cli(main, __doc__, PARAMS, NAME)
