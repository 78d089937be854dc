"""Proposition 1 study: block efficiency of tree verification, truncation-based vs lossless.

Proposition 1 (Zhou et al. 2026, arXiv:2607.26627, App. G.5, Eq. 73; docs/mathematics.md
§3.3): with path-independent positions, the expected accepted path length of tree
verification is ``BE = Σ_k Π_{i≤k} a_i``; every per-position acceptance ``a_i`` of the
truncation-based rules (SpecCascade / typical acceptance: in-set candidates accepted with
probability one) is at least that of truncation sampling + lossless verification
(``p_Θ(C)``, Corollary 1), so their BE is weakly higher.  Theorem 1 says what this costs:
the per-position distortion ``KL_tree = −log p_Θ(x)`` of the first in-set candidate.

Synthetic trees (fixed seeds): depth L = 6 (4 with ``--quick``); at each depth a Zipf(s)
target over n = 100 tokens (s = 0.8, 1.1, 1.4; random token order) and a noisy draft
(Gaussian logit noise, ``specbound.sim.distributions.noisy_draft``) at TV 0.3; candidates
are the top-D tokens of the draft, D ∈ {1, 2, 4}; truncation sets min-p (p_base ∈ {0.05,
0.1, 0.2, 0.3}) and η (ε ∈ {1e-3, 1e-2, 0.1}).  All numbers are closed forms
(``theory.tree_block_efficiency``, ``theory.kl_truncation_tree``).

Outputs: ``prop1_study.png`` and ``prop1_study.csv`` (columns ``zipf_s, D, truncation,
param, L, be_lossless, be_truncation, gain, mean_kl_tree``; ``gain = be_truncation −
be_lossless``, ``mean_kl_tree`` the mean over depths of KL_tree of the truncation rule).

Run: ``python -m paper_figs.prop1_study [--quick] [--out DIR]
[--depth N] [--vocab N] [--D N,...] [--tv X]``
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
    write_table_and_figure,
)
from specbound.sim.distributions import noisy_draft, zipf
from specbound.theory.tree import (
    eta_allowed,
    kl_truncation_tree,
    min_p_allowed,
    tree_block_efficiency,
)

FIGURE = True
NAME = "prop1_study"
V = 100
ZIPF_S = (0.8, 1.1, 1.4)
DS = (1, 2, 4)
DRAFT_TV = 0.3
SETS = (("min-p", (0.05, 0.1, 0.2, 0.3), min_p_allowed),
        ("eta", (1e-3, 1e-2, 0.1), eta_allowed))


PARAMS = (
    Param("depth", "int", 6, 4, "tree depth L", low=1,
          # measured: the peak of compute() is about 10.5 float64 arrays of depth x vocab
          memory=lambda v: 12 * v.depth * v.vocab * 8),
    Param("vocab", "int", V, V, "tokens of every target", low=2),
    Param("D", "ints", DS, DS, "children per node (draft tokens kept)", low=1,
          check=lambda v: None if max(v.D) <= v.vocab else
          f"every D must be at most --vocab = {v.vocab} (a node has at most that many "
          f"children)"),
    Param("tv", "float", DRAFT_TV, DRAFT_TV, "TV of the drafts, below 1", low=0, high=1,
          high_open=True),
)


def compute(quick: bool = False, **params) -> pd.DataFrame:
    v = resolve_params(PARAMS, quick, params)
    depth, V, DS, DRAFT_TV = v.depth, v.vocab, v.D, v.tv
    rows = []
    for k, s in enumerate(ZIPF_S):
        P = zipf(V, s, size=depth, seed=50 + k)
        Q = noisy_draft(P, DRAFT_TV, seed=60 + k).q
        order = np.argsort(-Q, axis=1, kind="stable")
        for D in DS:
            C = order[:, :D]
            for trunc, params, make in SETS:
                for prm in params:
                    A = make(P, prm)
                    ll = tree_block_efficiency(P, C, "lossless", allowed=A)
                    tr = tree_block_efficiency(P, C, "truncation", allowed=A)
                    kl = np.atleast_1d(kl_truncation_tree(P, C, A))
                    rows.append({"zipf_s": s, "D": D, "truncation": trunc, "param": prm,
                                 "L": depth, "be_lossless": float(ll),
                                 "be_truncation": float(tr), "gain": float(tr - ll),
                                 "mean_kl_tree": float(np.mean(kl))})
    df = pd.DataFrame(rows)
    df.attrs["tv"] = DRAFT_TV
    return df


def plot(df: pd.DataFrame, png: Path) -> None:
    plt = setup_matplotlib()
    fig, axes = plt.subplots(1, 2, figsize=(11.0, 4.2))
    for ax, (trunc, _, _) in zip(axes, SETS, strict=True):
        sub = df[df["truncation"] == trunc]
        color = rule_color(f"truncation:{trunc}")
        for j, D in enumerate(dict.fromkeys(df["D"])):
            for i, s in enumerate(ZIPF_S):
                g = sub[(sub["D"] == D) & (sub["zipf_s"] == s)].sort_values("param")
                ax.plot(g["be_lossless"], g["be_truncation"], marker="osD^v<>ph"[j % 9],
                        color=color, alpha=0.45 + 0.25 * i, ms=5, lw=1.0,
                        label=f"D = {D}" if i == 1 else None)
        lo = float(min(sub["be_lossless"].min(), sub["be_truncation"].min()))
        hi = float(max(sub["be_lossless"].max(), sub["be_truncation"].max()))
        ax.plot([lo, hi], [lo, hi], color="black", lw=0.8, ls="--")
        ax.set_xlabel("BE, truncation sampling + lossless verification")
        ax.set_ylabel("BE, truncation-based verification")
        ax.set_title(f"{trunc} sets (above the diagonal: Proposition 1)", fontsize=10)
        ax.legend(fontsize=8)
    fig.suptitle("Proposition 1: tree block efficiency (closed forms; Zipf targets, noisy "
                 f"drafts at TV {df.attrs.get('tv', DRAFT_TV)}, top-D candidates)")
    fig.tight_layout()
    fig.savefig(png)
    plt.close(fig)


def main(out_dir, quick: bool = False, **params) -> list[Path]:
    """Write ``prop1_study.csv`` and ``.png`` into ``out_dir``; return the paths."""
    df = compute(quick=quick, **params)
    return write_table_and_figure(out_dir, NAME, df, plot, "%.10g")


if __name__ == "__main__":
    from paper_figs._cli import cli

    cli(main, __doc__, PARAMS, NAME)
