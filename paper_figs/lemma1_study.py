"""Lemma 1 study (Zhou et al. 2026 Fig. 5 analogue): gain and loss of truncating the target.

Lemma 1 (Zhou et al. 2026, arXiv:2607.26627, §5.1, App. G.1; docs/mathematics.md §3):
truncating the target to ``p_Θ`` changes the single-token acceptance of standard SD by

    ΔBE = Σ min(p_Θ, q) − Σ min(p, q) = gain − loss,
    gain = Σ_{x∈A} min{(q − p)_+, (1/z − 1) p},   loss = Σ_{x∉A} min(p, q),   z = Z_Θ(p).

Synthetic pairs (fixed seeds): targets over n = 200 tokens (n = 50 with ``--quick``) from two
families — Zipf(s), s ∈ {0.8, 1.1, 1.4}, on a random token order, and softmax-Gaussian with
logit scale 1.5, 2.5, 3.5 — 8 targets per family and parameter (2 with ``--quick``), each with
six drafts: noisy drafts (Gaussian logit noise, ``specbound.sim.distributions.noisy_draft``)
at TV(p, q) ∈ {0.1, 0.3, 0.5}, and sharpened (over-confident) drafts, the target at
temperature T ∈ {0.8, 0.6, 0.4} (``temperature_draft``) with logit noise at TV 0.1 from it.
Noisy drafts put mass on the tail, so truncation mostly loses; sharpened drafts overshoot
the head, where truncation gains — the net sign flips with the draft and the threshold.
Truncation sets: min-p with p_base ∈ {0.1, 0.2, ..., 0.9} and
η-sampling with ε on a log grid from 1e-4 to 0.3 (``theory.min_p_allowed`` /
``theory.eta_allowed``).  Gain and loss come from ``theory.truncation_efficiency_delta``; the
CSV also holds the direct difference Σ min(p_Θ, q) − Σ min(p, q) (Lemma 1 is an identity: the
two agree to rounding).

Figure: for each truncation family (columns) the mean gain, loss and net ΔBE against the
truncation parameter, one colour per draft (top row), and the fraction of pairs whose net
ΔBE is positive (bottom row); a dotted vertical line marks where the mean net ΔBE changes sign.

Outputs: ``lemma1_study.png``, ``lemma1_study.csv`` (columns ``family, family_param, pair,
draft, tv, truncation, param, z, gain, loss, net, direct``; ``draft`` as in the legend,
``tv`` the achieved TV(p, q)) and ``lemma1_study_curves.csv`` (the plotted numbers:
``truncation, draft, param, gain, loss, net, frac_positive, n_targets``, means over targets).

Run: ``python -m paper_figs.lemma1_study [--quick] [--out DIR] [--vocab N] [--targets N]
[--p-base X,...] [--eps X,...]`` (``--help`` for the defaults).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from paper_figs._common import (
    Param,
    out_path,
    resolve_params,
    setup_matplotlib,
    share,
    write_table_and_figure,
)
from specbound.sim.distributions import noisy_draft, softmax_gaussian, temperature_draft, zipf
from specbound.theory.tree import (
    eta_allowed,
    min_p_allowed,
    truncated_target,
    truncation_efficiency_delta,
)

FIGURE = True
NAME = "lemma1_study"
DRAFTS = (("noisy", 0.1), ("noisy", 0.3), ("noisy", 0.5), ("sharpened", 0.8),
          ("sharpened", 0.6), ("sharpened", 0.4))
P_BASES = tuple(np.round(np.arange(0.1, 0.91, 0.1), 2))
EPSILONS = tuple(np.geomspace(1e-4, 0.3, 12))
PARAMS = (
    Param("vocab", "int", 200, 50, "tokens n of every target", low=2,
          memory=lambda v: share(v, "vocab", ("vocab", "targets"), _memory(v))),
    Param("targets", "int", 8, 2, "targets per family and family parameter", low=1,
          memory=lambda v: share(v, "targets", ("vocab", "targets"), _memory(v))),
    Param("p_base", "floats", P_BASES, P_BASES, "min-p thresholds", low=0, high=1),
    Param("eps", "floats", EPSILONS, EPSILONS, "eta-sampling epsilons, each in (0, 1)", low=0,
          high=1, low_open=True, high_open=True),
)


def _memory(v) -> int:
    """Bytes of the study's peak: the six batches of targets and one family's drafts,
    masks, truncated targets and temporaries (measured with tracemalloc: 157 bytes per
    target and token, about 20 float64 arrays of targets x vocab), and the table's rows
    (about 700 bytes each, one per family, draft, truncation parameter and target)."""
    rows = 6 * len(DRAFTS) * (len(v.p_base) + len(v.eps)) * v.targets
    return 20 * 8 * v.targets * v.vocab + 700 * rows


def targets(quick: bool, **params) -> list[tuple[str, float, np.ndarray]]:
    """(family, parameter, batch of targets) for the two synthetic families."""
    v = resolve_params(PARAMS, quick, params)
    n, k = v.vocab, v.targets
    out = []
    for i, s in enumerate((0.8, 1.1, 1.4)):
        out.append(("zipf", s, zipf(n, s, size=k, seed=10 + i)))
    for i, scale in enumerate((1.5, 2.5, 3.5)):
        out.append(("softmax_gaussian", scale, softmax_gaussian(n, scale=scale, size=k,
                                                                seed=20 + i)))
    return out


def compute(quick: bool = False, **params) -> pd.DataFrame:
    v = resolve_params(PARAMS, quick, params)
    rows = []
    for fam_idx, (family, fparam, P) in enumerate(targets(quick, vocab=v.vocab,
                                                          targets=v.targets)):
        for d_idx, (kind, val) in enumerate(DRAFTS):
            seed = 1000 * fam_idx + d_idx
            if kind == "noisy":
                Q = noisy_draft(P, val, seed=seed).q
            else:
                Q = noisy_draft(temperature_draft(P, val), 0.1, seed=seed).q
            tvs = 0.5 * np.abs(P - Q).sum(axis=1)
            label = _label(kind, val)
            base = np.minimum(P, Q).sum(axis=1)
            for trunc, grid, make in (("min-p", v.p_base, min_p_allowed),
                                      ("eta", v.eps, eta_allowed)):
                for param in grid:
                    A = make(P, float(param))
                    gain, loss = truncation_efficiency_delta(P, Q, A)
                    pt = truncated_target(P, A)
                    direct = np.minimum(pt, Q).sum(axis=1) - base
                    z = np.where(A, P, 0.0).sum(axis=1)
                    for i in range(P.shape[0]):
                        rows.append({"family": family, "family_param": fparam, "pair": i,
                                     "draft": label, "tv": tvs[i], "truncation": trunc,
                                     "param": float(param),
                                     "z": z[i], "gain": gain[i], "loss": loss[i],
                                     "net": gain[i] - loss[i], "direct": direct[i]})
    return pd.DataFrame(rows)


def _label(kind: str, val: float) -> str:
    return f"noisy, TV={val}" if kind == "noisy" else f"sharpened T={val} (+noise)"


def _sign_changes(x: np.ndarray, y: np.ndarray) -> list[float]:
    """Parameters where the piecewise-linear curve y(x) crosses 0 (log-x for eta)."""
    out = []
    for i in range(len(x) - 1):
        if y[i] == 0.0:
            out.append(float(x[i]))
        elif y[i] * y[i + 1] < 0:
            out.append(float(x[i] - y[i] * (x[i + 1] - x[i]) / (y[i + 1] - y[i])))
    return out


def curves(df: pd.DataFrame) -> pd.DataFrame:
    """The plotted numbers: per truncation, draft and parameter the mean gain, loss and net
    ΔBE over the targets and the fraction of targets with ΔBE > 0."""
    g = df.groupby(["truncation", "draft", "param"], sort=True)
    out = g[["gain", "loss", "net"]].mean()
    out["frac_positive"] = g["net"].apply(lambda s: float(np.mean(s > 0)))
    out["n_targets"] = g.size()
    return out.reset_index()


def plot(df: pd.DataFrame, png: Path) -> None:
    plt = setup_matplotlib()
    cv = curves(df)
    fig, axes = plt.subplots(2, 2, figsize=(12.0, 7.5), sharex="col",
                             gridspec_kw={"height_ratios": [2.2, 1]})
    for col, (trunc, xlabel) in enumerate((("min-p", "min-p threshold p_base"),
                                           ("eta", "η-sampling ε"))):
        ax, axf = axes[0, col], axes[1, col]
        sub = df[df["truncation"] == trunc]
        for k, (kind, val) in enumerate(DRAFTS):
            m = cv[(cv["truncation"] == trunc) & (cv["draft"] == _label(kind, val))]
            x = m["param"].to_numpy()
            c = f"C{k}"
            ax.plot(x, m["gain"], color=c, ls="--", lw=1.2)
            ax.plot(x, -m["loss"], color=c, ls=":", lw=1.2)
            ax.plot(x, m["net"], color=c, lw=2.0, label=_label(kind, val))
            for xc in _sign_changes(np.log(x) if trunc == "eta" else x, m["net"].to_numpy()):
                ax.axvline(np.exp(xc) if trunc == "eta" else xc, color=c, ls=":", lw=0.9)
            axf.plot(x, m["frac_positive"], color=c, marker="o", ms=3)
        ax.axhline(0.0, color="black", lw=0.8)
        n_t = sub.groupby(["family", "family_param"]).ngroups * sub["pair"].nunique()
        ax.set_title(f"{trunc} truncation: mean over {n_t} targets per draft")
        ax.set_ylabel("Δ acceptance (single token)")
        axf.set_ylabel("fraction with ΔBE > 0")
        axf.set_xlabel(xlabel)
        axf.set_ylim(-0.05, 1.05)
        if trunc == "eta":
            ax.set_xscale("log")
    from matplotlib.lines import Line2D

    handles, names = axes[0, 0].get_legend_handles_labels()
    handles += [Line2D([], [], color="0.3", ls="--"), Line2D([], [], color="0.3", ls=":"),
                Line2D([], [], color="0.3", lw=2.0)]
    names += ["gain (Lemma 1)", "− loss (Lemma 1)", "net ΔBE = gain − loss"]
    fig.legend(handles, names, loc="lower center", ncol=5, bbox_to_anchor=(0.5, -0.08))
    fig.suptitle("Lemma 1: truncating the target gains on the kept support, loses the tail "
                 "(dotted verticals: sign change of the mean net ΔBE)")
    fig.tight_layout()
    fig.savefig(png)
    plt.close(fig)


def main(out_dir, quick: bool = False, **params) -> list[Path]:
    """Write ``lemma1_study.csv``, ``lemma1_study_curves.csv`` (the plotted means) and
    ``.png`` into ``out_dir``; return the paths."""
    df = compute(quick=quick, **params)
    paths = write_table_and_figure(out_dir, NAME, df, plot, "%.10g")
    cv = out_path(out_dir, f"{NAME}_curves.csv")
    curves(df).to_csv(cv, index=False, float_format="%.10g")
    return [*paths, cv]


if __name__ == "__main__":
    from paper_figs._cli import cli

    cli(main, __doc__, PARAMS, NAME)
