"""Lenience study (Zhou et al. 2026 Fig. 7 analogue): interpolation and the overshoot ceiling.

Lenience (Leviathan et al. 2023; Zhou et al. 2026, arXiv:2607.26627, Eq. 10, App. A.3, App. B;
docs/mathematics.md §3) accepts a draft with probability min(1, p/(ℓ q)) and induces
``q + Δ_ℓ (p − q)`` where ``q ≤ p``, ``q`` where ``p < q ≤ p/ℓ`` and ``p/ℓ`` where
``q > p/ℓ``, with ``Δ_ℓ = [1 − Σ min(q, p/ℓ)] / TV(p, q)``.

(a) Interpolation strength Δ_ℓ against TV(p, q) for ℓ ∈ {0.2, 0.4, 0.6, 0.8, 0.9}: a Zipf(1.1)
target over n = 100 tokens (random order, seed 3) and noisy drafts (Gaussian logit noise,
``specbound.sim.distributions.noisy_draft``) at 25 TVs in [0.02, 0.8], 6 noise directions
each (2 with ``--quick``); lines are the mean over directions, the band their range
(``theory.lenience_delta``).  Markers: Monte Carlo estimates of Δ_ℓ from 2,000,000 tokens
emitted by ``sim.sample_induced`` (20,000 with ``--quick``) at 5 TVs, one direction, via
Δ̂ = Σ_{q<p} (f − q) / Σ_{q<p} (p − q) with f the emitted frequencies (crosses: the closed
form for the same draft).

(b) Where the relaxation acts, on one illustrative pair (n = 25 tokens sorted by p, Zipf(1.0)
target, noisy draft at TV 0.5, ℓ = 0.4): the ceiling p/ℓ, the lenience law, and the global
linear mixture ℓ p + (1 − ℓ) q (interpolation with λ = ℓ).  Shaded: the overshoot region
q > p/ℓ, where the ceiling clips the draft and the linear mixture keeps part of it.

Outputs: ``lenience_study.png``, ``lenience_study.csv`` (panel a: ``ell, direction, tv_target,
tv, delta, mc_delta, mc_se, n_mc`` — the Monte Carlo columns are empty off the Monte Carlo
points; ``mc_se`` is the binomial standard error of ``mc_delta``) and
``lenience_study_ceiling.csv`` (panel b: ``token, p, q, ceiling, lenience, linear_mixture,
overshoot``) and ``lenience_study_curves.csv`` (the plotted lines of panel a: ``ell,
tv_target, tv_mean, delta_mean, delta_min, delta_max``).

Run: ``python -m paper_figs.lenience_study [--quick] [--out DIR]
[--draws N] [--directions N] [--ell X,...]``
(``--help`` for the defaults).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from paper_figs._common import Param, out_path, resolve_params, rule_color, setup_matplotlib
from specbound.sim import sample_induced
from specbound.sim.distributions import noisy_draft, zipf
from specbound.theory.lossy import induced_distribution, lenience_delta

FIGURE = True
NAME = "lenience_study"
ELLS = (0.2, 0.4, 0.6, 0.8, 0.9)
TV_GRID = np.linspace(0.02, 0.8, 25)
MC_TV_IDX = (3, 9, 15, 21, 24)
ELL_B = 0.4
PARAMS = (
    Param("draws", "int", 2_000_000, 20_000, "Monte Carlo draws per checked point", low=1,
          # sample_induced's uniforms, proposals and tokens and the bincount of one checked
          # point: measured (tracemalloc) 43 bytes a draw, about 5.4 float64 arrays of draws
          memory=lambda v: 6 * v.draws * 8),
    Param("directions", "int", 6, 2, "random noise directions per TV", low=1,
          # one row (a dict of nine numbers, then a DataFrame row) per direction, TV and ℓ:
          # at most 1 KiB each
          memory=lambda v: v.directions * TV_GRID.size * len(v.ell) * 1024),
    Param("ell", "floats", ELLS, ELLS, "lenience values ℓ", low=0, high=1,
          check=lambda v: "every ℓ must be > 0" if min(v.ell) <= 0 else None),
)


def compute_delta(quick: bool = False, **params) -> pd.DataFrame:
    v = resolve_params(PARAMS, quick, params)
    n_dir, n_mc, ELLS = v.directions, v.draws, v.ell
    p = zipf(100, 1.1, seed=3)
    rows = []
    for d in range(n_dir):
        drafts = noisy_draft(np.tile(p, (TV_GRID.size, 1)), TV_GRID, seed=100 + d)
        for k, tv_target in enumerate(TV_GRID):
            q = drafts.q[k]
            for ell in ELLS:
                row = {"ell": ell, "direction": d, "tv_target": float(tv_target),
                       "tv": float(drafts.tv[k]), "delta": lenience_delta(p, q, ell),
                       "mc_delta": np.nan, "mc_se": np.nan, "n_mc": np.nan}
                if d == 0 and k in MC_TV_IDX:
                    x = sample_induced(p, q, "lenience", n_mc, seed=1000 * k + int(100 * ell),
                                       ell=ell)
                    f = np.bincount(x, minlength=p.size) / n_mc
                    under = q < p
                    gap = (p - q)[under].sum()
                    row["mc_delta"] = float((f - q)[under].sum() / gap)
                    # binomial error of the emitted mass on {q < p}, divided by the gap
                    F = float(induced_distribution(p, q, "lenience", ell=ell)[under].sum())
                    row["mc_se"] = math.sqrt(F * (1.0 - F) / n_mc) / gap
                    row["n_mc"] = n_mc
                rows.append(row)
    return pd.DataFrame(rows)


def compute_ceiling() -> pd.DataFrame:
    p = np.arange(1, 26, dtype=np.float64) ** -1.0
    p /= p.sum()
    q = noisy_draft(p, 0.5, seed=5).q
    lenience = induced_distribution(p, q, "lenience", ell=ELL_B)
    linear = induced_distribution(p, q, "interpolation", lam=ELL_B)
    return pd.DataFrame({"token": np.arange(p.size), "p": p, "q": q, "ceiling": p / ELL_B,
                         "lenience": lenience, "linear_mixture": linear,
                         "overshoot": q > p / ELL_B})


def curves(df: pd.DataFrame) -> pd.DataFrame:
    """The plotted lines of panel (a): per ℓ and nominal TV the mean achieved TV and the
    mean, min and max of Δ_ℓ over the noise directions."""
    g = df.groupby(["ell", "tv_target"], sort=True)
    return pd.DataFrame({"tv_mean": g["tv"].mean(), "delta_mean": g["delta"].mean(),
                         "delta_min": g["delta"].min(), "delta_max": g["delta"].max()}
                        ).reset_index()


def plot(df: pd.DataFrame, ceil: pd.DataFrame, png: Path) -> None:
    plt = setup_matplotlib()
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(13.0, 4.6))
    cv = curves(df)
    for k, ell in enumerate(dict.fromkeys(df["ell"])):
        sub = df[df["ell"] == ell]
        m = cv[cv["ell"] == ell]
        tv = m["tv_mean"].to_numpy()
        ax.plot(tv, m["delta_mean"], color=f"C{k}", label=f"ℓ = {ell}")
        ax.fill_between(tv, m["delta_min"], m["delta_max"], color=f"C{k}", alpha=0.15, lw=0)
        mc = sub.dropna(subset=["mc_delta"])
        ax.plot(mc["tv"], mc["mc_delta"], "o", color=f"C{k}", mfc="none", ms=7)
        ax.plot(mc["tv"], mc["delta"], "x", color=f"C{k}", ms=5)
    ax.plot([], [], "o", color="0.3", mfc="none", label="Monte Carlo (sample_induced)")
    ax.plot([], [], "x", color="0.3", label="closed form, same draft")
    ax.set_xlabel("TV(p, q)")
    ax.set_ylabel("interpolation strength Δ_ℓ")
    ax.set_title("(a) adaptive interpolation: Δ_ℓ grows with the mismatch and saturates")
    ax.legend(loc="upper left", fontsize=8.5)
    t = ceil["token"].to_numpy()
    over = ceil["overshoot"].to_numpy()
    for i in np.flatnonzero(over):
        bx.axvspan(i - 0.5, i + 0.5, color="tab:red", alpha=0.12, lw=0)
    bx.bar(t, ceil["q"], width=0.8, color="0.8", label="draft q")
    bx.step(t, ceil["p"], where="mid", color="black", lw=1.2, label="target p")
    bx.step(t, ceil["ceiling"], where="mid", color="tab:red", ls="--", lw=1.2,
            label=f"ceiling p/ℓ (ℓ = {ELL_B})")
    bx.plot(t, ceil["lenience"], "o-", color=rule_color("lenience"), ms=4,
            label="lenience law (Eq. 10)")
    bx.plot(t, ceil["linear_mixture"], "s-", color=rule_color("interpolation"), ms=3.5,
            label="linear mixture ℓp + (1−ℓ)q")
    bx.set_xlabel("token (sorted by p)")
    bx.set_ylabel("probability")
    bx.set_title("(b) overshoot ceiling vs linear mixture (shaded: q > p/ℓ)")
    bx.legend(fontsize=8.5)
    fig.suptitle("Lenience-based relaxation (Zipf targets, noisy drafts)")
    fig.tight_layout()
    fig.savefig(png)
    plt.close(fig)


def main(out_dir, quick: bool = False, **params) -> list[Path]:
    """Write ``lenience_study.csv``, ``lenience_study_ceiling.csv``,
    ``lenience_study_curves.csv`` and ``.png``."""
    df = compute_delta(quick=quick, **params)
    ceil = compute_ceiling()
    csv = out_path(out_dir, f"{NAME}.csv")
    csv_b = out_path(out_dir, f"{NAME}_ceiling.csv")
    csv_c = out_path(out_dir, f"{NAME}_curves.csv")
    png = out_path(out_dir, f"{NAME}.png")
    df.to_csv(csv, index=False, float_format="%.10g")
    ceil.to_csv(csv_b, index=False, float_format="%.10g")
    curves(df).to_csv(csv_c, index=False, float_format="%.10g")
    plot(df, ceil, png)
    return [png, csv, csv_b, csv_c]


if __name__ == "__main__":
    from paper_figs._cli import cli

    cli(main, __doc__, PARAMS, NAME)
