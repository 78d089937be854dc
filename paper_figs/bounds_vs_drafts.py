"""Acceptance bounds and exact acceptance against the number of drafts B.

Liu, Wan, Gao & Gündüz (2026), arXiv:2609.21858, §5 and App. B.

For B = 1..16 and three (p, q) pairs the figure shows the PML bound (Liu et al. 2026 Thm B.1), the
PML-weak bound (Thm 5.1), the LML bound (Rowan et al. 2025 Eq. 3), the relaxed LML bound
(Eq. 4) and the exact acceptance of MPFR with token clocks (docs/mathematics.md §2.2, equal
to PML) and of GLS / list coupling (docs/mathematics.md §2.3, by quadrature).

How the pairs are made (deterministic, no randomness beyond the fixed seed below):

- target ``p``: Zipf law over n = 1000 tokens (n = 200 with ``--quick``),
  p_k ∝ k^(−1.1), k = 1..n (``specbound.sim.distributions.zipf_law``);
- draft ``q_σ``: the target with Gaussian noise on its logits,
  q_σ ∝ exp(log p + σ ε) (``specbound.sim.distributions.logit_noise_draft``), with one
  fixed ε ~ N(0, I_n) (``numpy`` seed 2026) shared by the
  three pairs, and σ ≥ 0 solved (Brent's method) so that TV(p, q_σ) hits the nominal value
  0.1 ("near"), 0.3 ("medium") and 0.6 ("far").  The achieved TV is written in the CSV and
  the panel titles.

Outputs (in ``out_dir``): ``bounds_vs_drafts.png`` (three panels, one per pair) and
``bounds_vs_drafts.csv`` with columns ``pair, tv, sigma, n, B, pml, pml_weak, lml,
lml_relaxed, exact_mpfr, exact_gls`` (one row per pair and B).

Run: ``python -m paper_figs.bounds_vs_drafts [--quick] [--out DIR] [--vocab N] [--B N,...]
[--tv X,...] [--zipf X]`` (``--help`` for the defaults; a pair of another nominal TV is
labelled ``tv=X``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import brentq

from paper_figs._common import (
    BOUND_COLORS,
    Param,
    check_memory,
    resolve_params,
    setup_matplotlib,
    write_table_and_figure,
)
from specbound.sim.decode import MAX_DRAFTS
from specbound.sim.distributions import logit_noise_draft, zipf_law
from specbound.theory import (
    exact_acceptance,
    lml_bound,
    lml_relaxed_bound,
    pml_bound,
    pml_weak_bound,
    tv_distance,
)

FIGURE = True
NAME = "bounds_vs_drafts"

ZIPF_EXPONENT = 1.1
N_FULL = 1000
N_QUICK = 200
NOISE_SEED = 2026
PAIRS = (("near", 0.1), ("medium", 0.3), ("far", 0.6))
B_VALUES = tuple(range(1, 17))
PARAMS = (
    Param("vocab", "int", N_FULL, N_QUICK, "tokens n of the Zipf target", low=2,
          # measured: the peak of compute() is about 28 float64 arrays of n entries
          memory=lambda v: 32 * v.vocab * 8),
    Param("B", "ints", B_VALUES, B_VALUES, "numbers of drafts", low=1, high=MAX_DRAFTS),
    Param("tv", "floats", tuple(t for _, t in PAIRS), tuple(t for _, t in PAIRS),
          "nominal TV(p, q) of the pairs (one panel each; each below the TV the noisy "
          "drafts of the target reach)", low=1e-6, high=1,
          check=lambda v: _reach_message(v, "tv")),
    Param("zipf", "float", ZIPF_EXPONENT, ZIPF_EXPONENT, "Zipf exponent of the target", low=0,
          check=lambda v: _reach_message(v, "zipf")),
)
#: the largest noise scale σ of the drafts (:func:`make_pair` solves σ in [0, SIGMA_MAX])
SIGMA_MAX = 50.0


def reach(n: int, exponent: float, eps: np.ndarray | None = None) -> float:
    """The largest TV to the Zipf(``exponent``) target over ``n`` tokens that the noisy
    drafts reach (σ = :data:`SIGMA_MAX`, noise ``eps``, default the study's fixed draw): a
    steep target puts almost all its mass on its first token, which the noise cannot move
    (``--zipf 1e12``: every other probability is 0, and so is every reachable TV)."""
    eps = np.random.default_rng(NOISE_SEED).standard_normal(n) if eps is None else eps
    p = zipf_law(n, exponent)
    return float(tv_distance(p, logit_noise_draft(p, eps, SIGMA_MAX)))


def _reach_message(v, name: str) -> str | None:
    """Why a nominal TV of ``--tv`` cannot be reached by the drafts of the ``--vocab`` /
    ``--zipf`` target (checked as the command line is parsed, on ``--zipf`` when it was
    given, else on ``--tv``), or None."""
    if (name == "zipf") != ("zipf" in v.changed):
        return None
    check_memory(PARAMS, v)  # the target's arrays fit before they are made
    top = reach(v.vocab, v.zipf)
    bad = [t for t in v.tv if not t < top]
    if not bad:
        return None
    return (f"the noisy drafts of the Zipf({v.zipf:g}) target over {v.vocab} tokens reach a TV "
            f"of at most {top:.3g} (noise scale up to {SIGMA_MAX:g}), not --tv {bad[0]:g} "
            f"(use a smaller --zipf or --tv)")
COLUMNS = [
    "pair",
    "tv",
    "sigma",
    "n",
    "B",
    "pml",
    "pml_weak",
    "lml",
    "lml_relaxed",
    "exact_mpfr",
    "exact_gls",
]


def make_pair(n: int, tv_target: float, eps: np.ndarray, exponent: float = ZIPF_EXPONENT
              ) -> tuple[np.ndarray, np.ndarray, float]:
    """The Zipf target and the noisy draft whose TV to it is ``tv_target``; returns (p, q, σ)."""
    p = zipf_law(n, exponent)
    top = reach(n, exponent, eps)
    if not 0.0 < tv_target < top:
        raise ValueError(f"tv: the noisy drafts of this target reach TV in (0, {top:.3g}), "
                         f"got {tv_target}")
    sigma = brentq(
        lambda s: tv_distance(p, logit_noise_draft(p, eps, s)) - tv_target,
        0.0,
        SIGMA_MAX,
        xtol=1e-12,
        rtol=1e-12,
    )
    return p, logit_noise_draft(p, eps, sigma), float(sigma)


def pair_labels(tvs) -> list[tuple[str, float]]:
    """``(label, nominal TV)`` of each pair: near/medium/far for the default TVs."""
    names = dict((t, lab) for lab, t in PAIRS)
    return [(names.get(t, f"tv={t:g}") if tuple(tvs) == tuple(names) else f"tv={t:g}", t)
            for t in tvs]


def compute(quick: bool = False, **params) -> pd.DataFrame:
    """All bounds and exact values for the three pairs and B = 1..16 (one row per pair, B);
    ``params``: the keywords of :data:`PARAMS`."""
    v = resolve_params(PARAMS, quick, params)
    n = v.vocab
    eps = np.random.default_rng(NOISE_SEED).standard_normal(n)
    rows = []
    for label, tv_target in pair_labels(v.tv):
        p, q, sigma = make_pair(n, tv_target, eps, v.zipf)
        tv = tv_distance(p, q)
        for B in v.B:
            rows.append(
                {
                    "pair": label,
                    "tv": tv,
                    "sigma": sigma,
                    "n": n,
                    "B": B,
                    "pml": pml_bound(p, q, B),
                    "pml_weak": pml_weak_bound(p, q, B),
                    "lml": lml_bound(p, q, B),
                    "lml_relaxed": lml_relaxed_bound(p, q, B),
                    "exact_mpfr": exact_acceptance(p, q, "mpfr", B),
                    "exact_gls": exact_acceptance(p, q, "gls", B),
                }
            )
    return pd.DataFrame(rows, columns=COLUMNS)


# (column, legend label, line style, marker)
SERIES = (
    ("pml", "PML bound (Thm B.1)", "-", None),
    ("exact_mpfr", "exact MPFR (= PML, docs/mathematics.md §2.2)", "none", "o"),
    ("pml_weak", "PML-weak bound (Thm 5.1)", "--", None),
    ("exact_gls", "exact GLS", "-", "s"),
    ("lml", "LML bound (Rowan Eq. 3)", "-.", None),
    ("lml_relaxed", "LML-relaxed bound (Rowan Eq. 4)", ":", None),
)


def plot(df: pd.DataFrame, png: Path) -> None:
    plt = setup_matplotlib()
    labels = list(dict.fromkeys(df["pair"]))
    fig, axes = plt.subplots(1, len(labels), figsize=(12.0, 4.0), sharex=True, squeeze=False)
    axes = axes[0]
    for ax, label in zip(axes, labels, strict=True):
        sub = df[df["pair"] == label].sort_values("B")
        for col, name, ls, marker in SERIES:
            ax.plot(
                sub["B"],
                sub[col],
                linestyle=ls,
                marker=marker,
                markersize=4 if marker else 0,
                markerfacecolor="none" if marker == "o" else None,
                color=BOUND_COLORS[col],
                label=name,
            )
        tv = float(sub["tv"].iloc[0])
        ax.set_title(f"{label}: TV(p, q) = {tv:.3f}, n = {int(sub['n'].iloc[0])}")
        ax.set_xlabel("number of drafts B")
        if df["B"].max() == 16:
            ax.set_xticks([1, 4, 8, 12, 16])
    axes[0].set_ylabel("P(accept)")
    handles, names = axes[0].get_legend_handles_labels()
    fig.legend(handles, names, loc="lower center", ncol=3, bbox_to_anchor=(0.5, -0.12))
    fig.suptitle("Acceptance vs number of drafts: bounds and exact values (Zipf target)")
    fig.tight_layout()
    fig.savefig(png)
    plt.close(fig)


def main(out_dir, quick: bool = False, **params) -> list[Path]:
    """Compute, write ``bounds_vs_drafts.csv`` and ``.png`` into ``out_dir``; return the paths
    (``params``: the keywords of :data:`PARAMS`)."""
    df = compute(quick=quick, **params)
    return write_table_and_figure(out_dir, NAME, df, plot, "%.12g")


if __name__ == "__main__":
    from paper_figs._cli import cli

    cli(main, __doc__, PARAMS, NAME)
