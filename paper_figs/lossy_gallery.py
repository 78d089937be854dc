"""Induced-distribution gallery (Zhou et al. 2026 Fig. 2 analogue): what each lossy rule emits.

One illustrative pair over n = 20 tokens: a Zipf target ``p`` (p_k ∝ k^(−1.2), tokens sorted
by target probability) and a draft ``q`` with Gaussian logit noise at TV(p, q) = 0.4
(``specbound.sim.distributions.noisy_draft``, seed 4), so that the draft both under- and
over-estimates the target.  Each panel shows ``p`` (outline), ``q`` (grey) and the closed-form
induced distribution of one rule (``specbound.theory.induced_distribution``, bars), with the
overshoot region — tokens where the induced law exceeds ``p`` — marked in red.  Black dots are
the frequencies of tokens emitted by ``specbound.sim.sample_induced`` (the rule's accept/reject
mechanics; 200,000 draws, 20,000 with ``--quick``), which sit on the bars.

Rules (Zhou et al. 2026, arXiv:2607.26627, §3; docs/mathematics.md §3): lossless;
interpolation (CoS, λ = 0.5); lenience (ℓ = 0.5);
judge (synthetic judge accepting overestimated tokens with p/q ≥ 0.3); Fuzzy SD (TV gate,
T = 0.5: open, emits q); truncation with the min-p set (p_base = 0.1), both readings (Eq. 13
renormalise, and the target on rejection); overshoot ceiling (ℓ = 0.5); truncation + ceiling
(Table 5 row 5); contrastive (β = 0.5, α = 0.1).

Outputs: ``lossy_gallery.png`` and ``lossy_gallery.csv`` (columns ``rule, token, p, q,
induced, empirical, overshoot, n_samples``; one row per rule and token, ``overshoot`` =
induced − p where positive, else 0; ``n_samples`` the draws behind ``empirical``).  The TV
and KL to ``p`` of each induced law are in the panel titles.

Run: ``python -m paper_figs.lossy_gallery [--quick] [--out DIR] [--draws N] [--vocab N]
[--tv X] [--seed N]`` (``--help`` for the defaults).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from paper_figs._common import Param, resolve_params, setup_matplotlib, write_table_and_figure
from specbound.sim import sample_induced
from specbound.sim.distributions import noisy_draft
from specbound.theory.lossy import distortion, induced_distribution
from specbound.theory.tree import min_p_allowed

FIGURE = True
NAME = "lossy_gallery"
V = 20
SEED = 4
TV = 0.4
PARAMS = (
    Param("draws", "int", 200_000, 20_000, "samples of each induced law", low=1,
          # sample_induced's per-draw arrays of one rule: measured (tracemalloc) 63 bytes a
          # draw, about 8 float64 arrays of draws
          memory=lambda v: 8 * v.draws * 8),
    Param("vocab", "int", V, V, "tokens of the Zipf(1.2) target", low=2,
          # one table row per rule and token (row dicts, then the DataFrame): measured
          # (tracemalloc) 70 MiB at 10,000 tokens, about 730 bytes a row
          memory=lambda v: 10 * 750 * v.vocab),
    Param("tv", "float", TV, TV, "TV(p, q) of the noisy draft, below 1", low=0, high=1,
          high_open=True),
    Param("seed", "int", SEED, SEED, "seed of the draft's noise", low=0),
)


def make_pair(vocab: int = V, tv: float = TV, seed: int = SEED
              ) -> tuple[np.ndarray, np.ndarray]:
    """The illustrative pair: Zipf(1.2) target over 20 sorted tokens, noisy draft at TV 0.4."""
    p = np.arange(1, vocab + 1, dtype=np.float64) ** -1.2
    p /= p.sum()
    q = noisy_draft(p, tv, seed=seed).q
    return p, q


def rules(p: np.ndarray, q: np.ndarray) -> list[tuple[str, str, dict]]:
    """(panel title, rule, params) for the gallery."""
    A = min_p_allowed(p, 0.1)
    judge = (q > p) & (p >= 0.3 * q)
    return [
        ("lossless", "lossless", {}),
        ("interpolation (CoS), λ=0.5", "interpolation", {"lam": 0.5}),
        ("lenience, ℓ=0.5", "lenience", {"ell": 0.5}),
        ("judge (p/q ≥ 0.3)", "judge", {"judge": judge}),
        ("Fuzzy SD, TV gate T=0.5", "fuzzy", {"threshold": 0.5, "divergence": "tv"}),
        ("truncation min-p 0.1 (Eq. 13)", "truncation", {"allowed": A}),
        ("truncation min-p 0.1, target on reject", "truncation",
         {"allowed": A, "on_reject": "target"}),
        ("overshoot ceiling, ℓ=0.5", "ceiling", {"ell": 0.5}),
        ("truncation + ceiling, ℓ=0.5", "truncation_ceiling", {"allowed": A, "ell": 0.5}),
        ("contrastive, β=0.5", "contrastive", {"beta": 0.5}),
    ]


def compute(quick: bool = False, **params) -> pd.DataFrame:
    v = resolve_params(PARAMS, quick, params)
    n = v.draws
    p, q = make_pair(v.vocab, v.tv, v.seed)
    V = v.vocab
    rows = []
    for k, (title, rule, params) in enumerate(rules(p, q)):
        law = induced_distribution(p, q, rule, **params)
        x = sample_induced(p, q, rule, n, seed=100 + k, **params)
        emp = np.bincount(x, minlength=V) / n
        for t in range(V):
            rows.append({"rule": title, "token": t, "p": p[t], "q": q[t], "induced": law[t],
                         "empirical": emp[t], "overshoot": max(law[t] - p[t], 0.0),
                         "n_samples": n})
    return pd.DataFrame(rows)


def plot(df: pd.DataFrame, png: Path) -> None:
    plt = setup_matplotlib()
    titles = list(dict.fromkeys(df["rule"]))
    fig, axes = plt.subplots(2, 5, figsize=(14.5, 7.0), sharex=True, sharey=True)
    for ax, title in zip(axes.ravel(), titles, strict=True):
        sub = df[df["rule"] == title]
        t = sub["token"].to_numpy()
        p, q, law = (sub[c].to_numpy() for c in ("p", "q", "induced"))
        over = law > p + 1e-12
        ax.bar(t, q, width=0.85, color="0.85", label="draft q")
        ax.bar(t, law, width=0.55, color=np.where(over, "tab:red", "tab:blue"),
               label="induced")
        ax.step(t, p, where="mid", color="black", lw=1.2, label="target p")
        ax.plot(t, sub["empirical"], "k.", ms=3.5, label="sampled")
        d = distortion(law, p)
        kl = "∞" if not np.isfinite(d.kl) else f"{d.kl:.3f}"
        ax.set_title(f"{title}\nTV={d.tv:.3f}, KL(ind‖p)={kl}", fontsize=8.5)
        ax.set_xticks([0, 5, 10, 15, 19])
    for ax in axes[-1]:
        ax.set_xlabel("token (sorted by p)")
    for ax in axes[:, 0]:
        ax.set_ylabel("probability")
    handles, names = axes[0, 0].get_legend_handles_labels()
    from matplotlib.patches import Patch

    handles.append(Patch(color="tab:red"))
    names.append("overshoot: induced > p")
    fig.legend(handles, names, loc="lower center", ncol=5, bbox_to_anchor=(0.5, -0.04))
    p0, q0 = make_pair()
    tv = 0.5 * np.abs(p0 - q0).sum()
    fig.suptitle(f"Distributions induced by lossy verification rules (Zipf target, "
                 f"noisy draft, TV(p, q) = {tv:.2f})")
    fig.tight_layout()
    fig.savefig(png)
    plt.close(fig)


def main(out_dir, quick: bool = False, **params) -> list[Path]:
    """Write ``lossy_gallery.csv`` and ``.png`` into ``out_dir``; return the paths
    (``params``: the keywords of :data:`PARAMS`)."""
    df = compute(quick=quick, **params)
    return write_table_and_figure(out_dir, NAME, df, plot, "%.10g")


if __name__ == "__main__":
    from paper_figs._cli import cli

    cli(main, __doc__, PARAMS, NAME)
