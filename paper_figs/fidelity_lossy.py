"""Fidelity of the lossy-verification comparisons (Zhou et al. 2026): readings and draft families.

Three questions the package's default studies answer differently from the paper, each run
side by side in the paper's setting and the package's default, varying one cause at a time
(closed forms of ``specbound.theory``; every number is a mean over sampled contexts with its
standard error over contexts):

1. **Yield rows** (Zhou et al. 2026, arXiv:2607.26627, Table 5 rows 4-5; Table 1): the rules
   "ceiling only" (yield ``min(q, p/ℓ)``) and "truncation + ceiling" (``q`` on the min-p
   set ``A``, ``min(q, p/ℓ)`` off it) under the two readings of a yield, "residual" (the
   package default) and "renormalize", next to lossless, lenience and truncation (Eq. 13):
   acceptance, block efficiency at L = 4 (``theory.block_efficiency`` of the mean
   acceptance) and KL(induced ‖ p).  The paper reports BE lossless < truncation < lenience <
   ceiling < truncation + ceiling and the ceiling rows at lossless accuracy.
2. **SpecCascade acceptance** (min-p truncation) against lossless, per draft family and for
   the two readings of the truncation rule: membership ``h = 1[x ∈ A]`` (Definition 1,
   acceptance ``q(A)``) and lossless SD against the truncated target ``p_Θ`` (the rule of
   Lemma 1, acceptance ``Σ min(q, p_Θ)``).
3. **η-truncation ΔBE sign** (Lemma 1 discussion): the fraction of (context, ε) with
   ``ΔBE = Σ min(p_Θ, q) − Σ min(p, q) > 0`` for ε on a log grid 1e-4 .. 0.3, per family.

Draft families (targets over n = 200 tokens, 200 contexts; 50 tokens and 40 contexts with
``--quick``):

- ``noisy``: the package's default (``efficiency_frontier``): Zipf(1.1) targets, Gaussian
  logit noise at TV ~ U[0.1, 0.6] (mass spread onto the tail);
- ``sharpened``: the same targets, draft = target at temperature 0.6 plus logit noise at
  TV 0.1 (an over-confident small model, mass on the head);
- ``calibrated H=0.47``: contexts of ``sim.calibrated_lm(0.47)`` (the LPPL of Liu et al.
  2026, Table 6) with a draft of logit mismatch 0.5; ``calibrated H=0.47, T_d=0.5``: the same
  with a sharper draft (temperature 0.5, as drafter D2 of Liu et al. 2026);
- ``calibrated H=2.5``: ``sim.calibrated_lm(2.5)``, the entropy of the default synthetic LM.

Outputs: ``fidelity_lossy.csv`` (columns ``section, family, rule, reading, param_name, param,
metric, mean, se``), ``fidelity_lossy.png`` (one panel per section) and ``fidelity_lossy.md``
(the markdown tables quoted in docs/fidelity.md).

Run: ``python -m paper_figs.fidelity_lossy [--quick] [--out DIR] [--vocab N] [--contexts N]``
(``--help`` for the defaults).
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
from paper_figs.efficiency_frontier import draft_at_tv
from specbound.sim import calibrated_lm
from specbound.sim.distributions import temperature_draft, zipf
from specbound.theory import block_efficiency
from specbound.theory.lossy import acceptance_rate, distortion, induced_distribution
from specbound.theory.tree import (
    eta_allowed,
    min_p_allowed,
    truncated_target,
    truncation_efficiency_delta,
)

FIGURE = True
NAME = "fidelity_lossy"
ELLS = (1.0, 0.8, 0.5, 0.3)
P_BASE_YIELD = 0.1
P_BASES = (0.5, 0.3, 0.2, 0.1, 0.05)
EPSILONS = tuple(np.geomspace(1e-4, 0.3, 8))
PARAMS = (
    # the calibrated LMs' 512 contexts of the vocabulary (about 6 float64 arrays of 512 x
    # vocab) and the five families' targets, drafts and the rules' temporaries (about 20
    # arrays of contexts x vocab): measured (tracemalloc) 27 KB per token at 40 contexts
    Param("vocab", "int", 200, 50, "tokens n of every target", low=2,
          memory=lambda v: 6 * 512 * 8 * v.vocab
          + share(v, "vocab", ("vocab", "contexts"), 20 * 8 * v.contexts * v.vocab)),
    Param("contexts", "int", 200, 40, "contexts (target/draft pairs) per draft family", low=1,
          memory=lambda v: share(v, "contexts", ("vocab", "contexts"),
                                 20 * 8 * v.contexts * v.vocab)),
)


def _calibrated(h, n, m, seed, *, mismatch=0.5, draft_temperature=1.0):
    lm = calibrated_lm(h, n, n_contexts=512, seed=seed)
    d = lm.draft(mismatch, seed=seed + 1, temperature=draft_temperature)
    rng = np.random.default_rng(seed)
    ctxs = [rng.integers(0, n, size=2) for _ in range(m)]
    return lm.next_distributions(ctxs), d.next_distributions(ctxs)


def families(quick: bool, **params) -> list[tuple[str, np.ndarray, np.ndarray]]:
    v = resolve_params(PARAMS, quick, params)
    n, m = v.vocab, v.contexts
    P = zipf(n, 1.1, size=m, seed=31)
    tv = np.random.default_rng(40).uniform(0.1, 0.6, size=m)
    noisy = np.stack([draft_at_tv(P[i], tv[i], i) for i in range(m)])
    sharp = np.stack([draft_at_tv(temperature_draft(P[i], 0.6), 0.1, 5000 + i) for i in range(m)])
    return [
        ("noisy", P, noisy),
        ("sharpened", P, sharp),
        ("calibrated H=0.47", *_calibrated(0.47, n, m, 7)),
        ("calibrated H=0.47, T_d=0.5", *_calibrated(0.47, n, m, 7, draft_temperature=0.5)),
        ("calibrated H=2.5", *_calibrated(2.5, n, m, 8)),
    ]


def _ms(x) -> tuple[float, float]:
    x = np.asarray(x, dtype=np.float64)
    return float(x.mean()), float(x.std(ddof=1) / np.sqrt(x.size))


def _rows(section, fam, rule, reading, pname, param, **metrics):
    out = []
    for metric, x in metrics.items():
        mean, se = _ms(x)
        out.append({"section": section, "family": fam, "rule": rule, "reading": reading,
                    "param_name": pname, "param": float(param), "metric": metric,
                    "mean": mean, "se": se})
    return out


def yield_rows(fam, P, Q) -> list[dict]:
    A = min_p_allowed(P, P_BASE_YIELD)
    out = []

    def add(rule_label, reading, pname, param, rule, **kw):
        a = acceptance_rate(P, Q, rule, **kw)
        kl = distortion(induced_distribution(P, Q, rule, **kw), P).kl
        out.extend(_rows("yield", fam, rule_label, reading, pname, param, acceptance=a, kl=kl))

    add("lossless", "-", "-", 0.0, "lossless")
    add("truncation (min-p 0.1)", "renormalize (Eq. 13)", "p_base", P_BASE_YIELD,
        "truncation", allowed=A)
    for ell in ELLS:
        add("lenience", "-", "ell", ell, "lenience", ell=ell)
        for reading in ("residual", "renormalize"):
            add("ceiling only", reading, "ell", ell, "ceiling", ell=ell, completion=reading)
            add("truncation + ceiling", reading, "ell", ell, "truncation_ceiling", ell=ell,
                allowed=A, completion=reading)
    return out


def speccascade_rows(fam, P, Q) -> list[dict]:
    """Acceptances, and their paired differences from lossless (same contexts)."""
    lossless = np.minimum(P, Q).sum(axis=1)
    out = _rows("speccascade", fam, "lossless", "-", "-", 0.0, acceptance=lossless)
    for pb in P_BASES:
        A = min_p_allowed(P, pb)
        member = np.where(A, Q, 0.0).sum(axis=1)
        sd = np.minimum(Q, truncated_target(P, A)).sum(axis=1)
        out += _rows("speccascade", fam, "SpecCascade (min-p)", "membership (Def. 1)",
                     "p_base", pb, acceptance=member, gain_vs_lossless=member - lossless)
        out += _rows("speccascade", fam, "SpecCascade (min-p)", "SD against p_Θ",
                     "p_base", pb, acceptance=sd, gain_vs_lossless=sd - lossless)
    return out


def eta_rows(fam, P, Q) -> list[dict]:
    nets = []
    out = []
    for eps in EPSILONS:
        gain, loss = truncation_efficiency_delta(P, Q, eta_allowed(P, eps))
        net = gain - loss
        nets.append(net > 0)
        out += _rows("eta", fam, "η-truncation", "SD against p_Θ", "epsilon", eps,
                     net=net, positive=(net > 0).astype(float))
    # per context: the fraction of the ε grid with ΔBE > 0; its mean over contexts
    out += _rows("eta", fam, "η-truncation", "SD against p_Θ", "epsilon", np.nan,
                 positive=np.mean(nets, axis=0))
    return out


def compute(quick: bool = False, **params) -> pd.DataFrame:
    rows = []
    for fam, P, Q in families(quick, **params):
        rows += yield_rows(fam, P, Q)
        rows += speccascade_rows(fam, P, Q)
        rows += eta_rows(fam, P, Q)
    return pd.DataFrame(rows)


def _get(df, **kw):
    sub = df
    for k, v in kw.items():
        sub = sub[sub[k] == v]
    return sub


def _fmt(mean, se, digits=3):
    return f"{mean:.{digits}f} ± {se:.{digits}f}"


def markdown(df: pd.DataFrame) -> str:
    fams = list(dict.fromkeys(df["family"]))
    lines = ["# Fidelity of the lossy comparisons (Zhou et al. 2026)", "",
             "Means over contexts ± standard error over contexts.", "",
             "## 1. Yield rows at ℓ = 0.5 (min-p 0.1): acceptance, BE (L = 4), KL(induced ‖ p)",
             "", "| family | rule | reading | acceptance | BE L=4 | KL |",
             "|---|---|---|---|---|---|"]
    y = df[df["section"] == "yield"]
    for fam in fams:
        f = y[y["family"] == fam]
        keys = [("lossless", "-", 0.0), ("truncation (min-p 0.1)", "renormalize (Eq. 13)",
                                          P_BASE_YIELD), ("lenience", "-", 0.5),
                ("ceiling only", "residual", 0.5), ("ceiling only", "renormalize", 0.5),
                ("truncation + ceiling", "residual", 0.5),
                ("truncation + ceiling", "renormalize", 0.5)]
        for rule, reading, par in keys:
            g = f[(f["rule"] == rule) & (f["reading"] == reading) & (f["param"] == par)]
            a = g[g["metric"] == "acceptance"].iloc[0]
            k = g[g["metric"] == "kl"].iloc[0]
            lines.append(f"| {fam} | {rule} | {reading} | {_fmt(a['mean'], a['se'])} | "
                         f"{block_efficiency(a['mean'], 4):.3f} | {_fmt(k['mean'], k['se'])} |")
    lines += ["", "KL of the ceiling at ℓ = 1 (acceptance equal to lossless):", "",
              "| family | residual | renormalize |", "|---|---|---|"]
    for fam in fams:
        vals = []
        for reading in ("residual", "renormalize"):
            g = _get(y, family=fam, rule="ceiling only", reading=reading, param=1.0,
                     metric="kl").iloc[0]
            vals.append(_fmt(g["mean"], g["se"]))
        lines.append(f"| {fam} | {vals[0]} | {vals[1]} |")
    s = df[df["section"] == "speccascade"]
    lines += ["", "## 2. SpecCascade (min-p) acceptance against lossless", "",
              "Gains are paired differences from lossless on the same contexts.", "",
              "| family | lossless | p_base | membership (Def. 1) | gain | SD against p_Θ | "
              "gain |", "|---|---|---|---|---|---|---|"]
    for fam in fams:
        lo = _get(s, family=fam, rule="lossless").iloc[0]
        for pb in P_BASES:
            cells = []
            for reading in ("membership (Def. 1)", "SD against p_Θ"):
                for metric in ("acceptance", "gain_vs_lossless"):
                    g = _get(s, family=fam, reading=reading, param=pb, metric=metric).iloc[0]
                    cells.append(_fmt(g["mean"], g["se"]))
            lines.append(f"| {fam} | {_fmt(lo['mean'], lo['se'])} | {pb} | "
                         + " | ".join(cells) + " |")
    e = df[(df["section"] == "eta") & (df["metric"] == "positive") & df["param"].isna()]
    lines += ["", "## 3. η-truncation: fraction of (context, ε) with ΔBE > 0", "",
              "| family | fraction ΔBE > 0 |", "|---|---|"]
    for fam in fams:
        g = e[e["family"] == fam].iloc[0]
        lines.append(f"| {fam} | {_fmt(g['mean'], g['se'])} |")
    return "\n".join(lines) + "\n"


def plot(df: pd.DataFrame, png: Path) -> None:
    plt = setup_matplotlib()
    fams = list(dict.fromkeys(df["family"]))
    fig, axes = plt.subplots(1, 3, figsize=(14.0, 5.4))  # readable at its saved size
    ax = axes[0]
    y = df[df["section"] == "yield"]
    styles = {("ceiling only", "residual"): "-", ("ceiling only", "renormalize"): "--",
              ("truncation + ceiling", "residual"): "-",
              ("truncation + ceiling", "renormalize"): "--"}
    for k, fam in enumerate(fams):
        for (rule, reading), ls in styles.items():
            g = _get(y, family=fam, rule=rule, reading=reading)
            a = g[g["metric"] == "acceptance"]["mean"].to_numpy()
            kl = g[g["metric"] == "kl"]["mean"].to_numpy()
            ax.plot(kl, a, ls=ls, marker="o" if rule == "ceiling only" else "s", ms=4,
                    color=f"C{k}", lw=1.0)
        lo = _get(y, family=fam, rule="lossless", metric="acceptance")["mean"].iloc[0]
        ax.plot([0.0], [lo], "*", color=f"C{k}", ms=12, label=fam)
    ax.set_xscale("symlog", linthresh=1e-3)
    ax.set_xlim(left=0.0)
    ax.set_xlabel("KL(induced ‖ p) (nats, symlog)")
    ax.set_ylabel("acceptance")
    ax.set_title("1. ceiling rows: residual (—) vs renormalize (- -);\n"
                 "o ceiling only, s truncation + ceiling, * lossless", fontsize=9)
    ax.legend(fontsize=8)
    ax = axes[1]
    s = df[df["section"] == "speccascade"]
    for k, fam in enumerate(fams):
        lo = _get(s, family=fam, rule="lossless")["mean"].iloc[0]
        ax.axhline(lo, color=f"C{k}", lw=0.8, ls=":")
        for reading, ls in (("membership (Def. 1)", "-"), ("SD against p_Θ", "--")):
            g = _get(s, family=fam, reading=reading, metric="acceptance")
            ax.errorbar(g["param"], g["mean"], yerr=g["se"], color=f"C{k}", ls=ls,
                        marker="o", ms=3, lw=1.0, label=fam if ls == "-" else None)
    ax.set_xscale("log")
    from matplotlib.ticker import NullFormatter

    ax.xaxis.set_minor_formatter(NullFormatter())  # labelled minor ticks collided:
    grid = sorted(v for v in set(s["param"].dropna()) if v > 0)  # label the grid instead
    ax.set_xticks(grid, [f"{v:g}" for v in grid])
    ax.set_xlabel("min-p p_base")
    ax.set_ylabel("acceptance")
    ax.set_title("2. SpecCascade: membership (—), SD vs p_Θ (- -), lossless (⋯)", fontsize=9)
    ax.legend(fontsize=8)
    ax = axes[2]
    e = df[(df["section"] == "eta") & (df["metric"] == "positive") & df["param"].notna()]
    for k, fam in enumerate(fams):
        g = e[e["family"] == fam]
        ax.errorbar(g["param"], g["mean"], yerr=g["se"], color=f"C{k}", marker="o", ms=3,
                    lw=1.0, label=fam)
    ax.set_xscale("log")
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel("η-sampling ε")
    ax.set_ylabel("fraction of contexts with ΔBE > 0")
    ax.set_title("3. η-truncation: sign of ΔBE by draft family", fontsize=9)
    ax.legend(fontsize=8)
    fig.suptitle("Lossy verification in the paper's readings and draft families "
                 "(Zhou et al. 2026, Tables 1, 5; Lemma 1)")
    fig.tight_layout()
    fig.savefig(png)
    plt.close(fig)


def main(out_dir, quick: bool = False, **params) -> list[Path]:
    """Write ``fidelity_lossy.csv``, ``.png`` and ``.md`` into ``out_dir``; return the paths."""
    df = compute(quick=quick, **params)
    md = out_path(out_dir, f"{NAME}.md")
    md.write_text(markdown(df), encoding="utf-8")
    return [*write_table_and_figure(out_dir, NAME, df, plot), md]


if __name__ == "__main__":
    from paper_figs._cli import cli

    cli(main, __doc__, PARAMS, NAME)
