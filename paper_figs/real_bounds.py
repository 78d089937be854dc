"""Acceptance bounds against exact acceptance on real logged distributions.

Liu, Wan, Gao & Gündüz (2026), arXiv:2609.21858, §5 and App. B, on the next-token
distributions of a real model pair instead of synthetic ones.

For every chosen logged context of every draft of the log (a full run: the study log of
``paper_figs._real_log``, 64 prompts x 64 tokens, of which ``--contexts`` = 640 evenly spaced
contexts; a quick run: the shipped log of ``specbound.llm.shipped_log()``; both
SmolLM2-135M-Instruct at temperature 1, top-k 50, its own samples on HumanEval, ShareGPT (and
summarisation) prompts, drafts ``temperature:0.5``, ``temperature:1.5``, ``early_exit:28``,
``quantized:3``; any other log with ``--log DIR``) and B = 1..8 the script computes, from
closed forms:

- exact acceptance of standard SD (``sd``, B = 1: 1 − TV) and of the exponential race
  (``exp_race``, B = 1: Σ_i p_i / (1 + α_i)), of MPFR with token clocks (``mpfr``: Liu et al.
  Alg. 6, equal to the PML expression, docs/mathematics.md §2.2) and of GLS / list coupling
  (``gls``: Rowan et al. 2025, by quadrature, docs/mathematics.md §2.3; B = 1: the
  exponential race);
- the bounds PML (Liu et al. Thm B.1), PML-weak (Thm 5.1), LML (Rowan et al. 2025 Eq. 3),
  LML-relaxed (Eq. 4), and the no-communication limit (1 − TV)/(1 + TV) (Bavarian et al.
  2016; Daliri et al. 2025).

What each bound is a bound of, and so its *gap* on a context: PML and PML-weak are lower
bounds of MPFR (``gap = mpfr − bound``; PML's gap is 0 up to rounding), LML and LML-relaxed
lower bounds of GLS (``gap = gls − bound``), (1 − TV)/(1 + TV) a lower bound of the
exponential race (B = 1).  Monte Carlo (``specbound.sim.estimate_acceptance``) on a
subsample of contexts re-estimates every exact value; the CSV holds the estimate and its
z-score ``(estimate − exact) / sqrt(exact (1 − exact) / n)``.

Outputs: ``real_bounds.csv`` (one row per draft, context and B: ``draft, position,
prompt_id, step, support, tv, B, sd, exp_race, mpfr, gls, pml, pml_weak, lml, lml_relaxed,
limit``, and on subsampled contexts ``mc_n, mc_<scheme>, z_<scheme>``), ``real_bounds.md``
(per draft and B: means, the 10 % / 50 % / 90 % quantiles of exact MPFR and GLS across
contexts, mean and maximum gap of each bound, the largest |z|), ``real_bounds.png``.
Resumable: one stored configuration per (draft, B) (``specbound.sweep``).

``--quick``: 12 contexts per draft, B ∈ {1, 2, 4}, Monte Carlo on 2 contexts with n = 4000.

Run: ``python -m paper_figs.real_bounds [--quick] [--out DIR] [--log DIR] [--B N,...]
[--contexts N] [--mc-contexts N] [--trials N]`` (``--help`` for the defaults).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from paper_figs import _wm_common as wc
from paper_figs._common import Param, note, out_path, resolve_params, setup_matplotlib
from paper_figs._real_log import (
    LOG_PARAM,
    bounds_memory,
    chosen_contexts,
    contexts_param,
    in_draft_order,
    logged_contexts,
    open_log,
    resolve_log,
    store_signature,
    subsample,
)
from specbound.cli import MAX_B
from specbound.sim.montecarlo import MAX_TRIALS
from specbound.theory import (
    exact_acceptance,
    lml_bound,
    lml_relaxed_bound,
    no_communication_limit,
    pml_bound,
    pml_weak_bound,
    tv_distance,
)

FIGURE = True
NAME = "real_bounds"
VERSION = 2
B_FULL = tuple(range(1, 9))
B_QUICK = (1, 2, 4)
MC_FULL = (8, 100_000)  # contexts per draft, Monte Carlo trials per context and scheme
MC_QUICK = (2, 4_000)
QUICK_CONTEXTS = 12
#: contexts per draft of a full run, evenly spaced over the study log's 64 prompts (about ten
#: per prompt; the closed forms of B = 1..8 took 107 s on the shipped log's 569 contexts, so
#: all 3,910 of the study log would take about 12 minutes)
FULL_CONTEXTS = 640
MC_SEED = 2026


def _memory(name: str):
    """The study's rows (``paper_figs._real_log.bounds_memory``) on ``--contexts`` or
    ``--B``, whichever grew more over its full-mode value (0 contexts: all, the largest)."""
    def memory(v) -> int:
        grew = (v.contexts or 10**12) / FULL_CONTEXTS >= len(v.B) / len(B_FULL)
        return bounds_memory(v) if (name == "contexts") == grew else 0

    return memory


PARAMS = (
    LOG_PARAM,
    Param("B", "ints", B_FULL, B_QUICK, "numbers of drafts", low=1, high=MAX_B,
          memory=_memory("B")),
    contexts_param(FULL_CONTEXTS, QUICK_CONTEXTS, memory=_memory("contexts")),
    Param("mc_contexts", "int", MC_FULL[0], MC_QUICK[0],
          "contexts per draft checked by Monte Carlo (among the --contexts chosen)", low=0,
          check=lambda v: _mc_message(v)),
    Param("trials", "int", MC_FULL[1], MC_QUICK[1],
          "Monte Carlo trials per checked context and scheme", low=1, high=MAX_TRIALS),
)


def _mc_message(v) -> str | None:
    """Why ``--mc-contexts`` exceeds the contexts the run uses (``--contexts``, or the log's
    when it is 0): the Monte Carlo checks a subset of them, so more would silently be all of
    them; None if it fits."""
    if not v.mc_contexts:
        return None
    if v.contexts and v.mc_contexts > v.contexts:
        return (f"{v.mc_contexts} exceeds --contexts {v.contexts} (the Monte Carlo checks a "
                f"subset of the chosen contexts)")
    n = logged_contexts(v)
    if n is not None and v.mc_contexts > n:
        return (f"{v.mc_contexts} exceeds the {n} contexts per draft of the log (--contexts "
                f"{v.contexts}; the Monte Carlo checks a subset of them)")
    return None


#: bound -> the exact acceptance it bounds from below
BOUND_OF = {"pml": "mpfr", "pml_weak": "mpfr", "lml": "gls", "lml_relaxed": "gls",
            "limit": "exp_race"}


def _schemes(B: int) -> tuple[str, ...]:
    return ("sd", "exp_race", "mpfr", "gls") if B == 1 else ("mpfr", "gls")


def _exact(p, q, scheme: str, B: int) -> float:
    if B == 1 and scheme == "gls":
        scheme = "exp_race"  # GLS with one draft is the exponential race
    return float(exact_acceptance(p, q, scheme, B))


def worker(arg) -> list[dict]:
    """All exact values and bounds of one (draft, B) over the chosen contexts."""
    log_dir, draft, B, positions, mc_positions, mc_n = arg
    log = open_log(log_dir)
    mc = set(int(i) for i in mc_positions)
    keep = set(int(i) for i in positions)
    rows = []
    for lp in log.pairs(draft):
        if lp.position not in keep:
            continue
        p, q = lp.p, lp.q
        tv = float(tv_distance(p, q))
        row = {"draft": draft, "position": lp.position, "prompt_id": lp.prompt_id,
               "step": lp.step, "support": int(p.size), "tv": tv, "B": B,
               "sd": 1.0 - tv if B == 1 else np.nan,
               "exp_race": _exact(p, q, "exp_race", 1) if B == 1 else np.nan,
               "mpfr": _exact(p, q, "mpfr", B), "gls": _exact(p, q, "gls", B),
               "pml": float(pml_bound(p, q, B)), "pml_weak": float(pml_weak_bound(p, q, B)),
               "lml": float(lml_bound(p, q, B)), "lml_relaxed": float(lml_relaxed_bound(p, q, B)),
               "limit": float(no_communication_limit(p, q))}
        if lp.position in mc:
            from specbound.sim import estimate_acceptance

            row["mc_n"] = mc_n
            for k, s in enumerate(_schemes(B)):
                seed = np.random.SeedSequence(MC_SEED, spawn_key=(lp.position, B, k))
                est = estimate_acceptance(p, q, s, B=B, n=mc_n, seed=seed)
                exact = row[s]
                se = np.sqrt(max(exact * (1.0 - exact), 1e-300) / mc_n)
                row[f"mc_{s}"] = float(est.mean)
                row[f"z_{s}"] = float((est.mean - exact) / se)
        rows.append(row)
    return rows


def compute(out_dir, quick: bool = False, executor=None, progress: bool = True, **params
            ) -> pd.DataFrame:
    v = resolve_params(PARAMS, quick, params)
    log = resolve_log(v.log, out_dir, quick, progress)
    lg = open_log(log)
    Bs = v.B
    n_mc, mc_n = v.mc_contexts, v.trials
    positions = subsample(len(lg), chosen_contexts(v, len(lg), NAME))
    if n_mc > positions.size:  # the study log of a full run holds fewer than its recipe
        note(NAME, f"--mc-contexts {n_mc}: {positions.size} contexts per draft are used; "
                   f"all {positions.size} are checked by Monte Carlo")
    mc_positions = positions[subsample(len(positions), n_mc)] if n_mc else positions[:0]
    sig = store_signature(NAME, VERSION, lg, quick, v.changed)
    store = wc.ResumableCSV(out_path(out_dir, f"{NAME}.csv"), sig)
    log_dir = None if log is None else str(log)
    configs = [(f"{d}|B={B}", (log_dir, d, B, positions.tolist(), mc_positions.tolist(), mc_n))
               for d in lg.drafts for B in Bs]
    df = wc.study_sweep(configs, worker, store, quick=quick, executor=executor, desc=NAME,
                        progress=progress)
    return in_draft_order(df, lg.drafts, by=("B", "position"))


def summary(df: pd.DataFrame) -> pd.DataFrame:
    """Per draft and B: means, quantiles across contexts, gaps of the bounds, largest |z|."""
    out = []
    zcols = [c for c in df.columns if c.startswith("z_")]
    for (d, B), g in df.groupby(["draft", "B"], sort=False):
        rec = {"draft": d, "B": int(B), "contexts": len(g), "mean_tv": g["tv"].mean()}
        for s in ("sd", "exp_race", "mpfr", "gls"):
            if g[s].notna().any():
                rec[f"{s}_mean"] = g[s].mean()
        for s in ("mpfr", "gls"):
            for qq in (0.1, 0.5, 0.9):
                rec[f"{s}_q{int(qq * 100)}"] = g[s].quantile(qq)
        for b, s in BOUND_OF.items():
            if g[s].notna().any():
                gap = g[s] - g[b]
                rec[f"{b}_mean"] = g[b].mean()
                rec[f"{b}_gap_mean"] = gap.mean()
                rec[f"{b}_gap_max"] = gap.max()
        zs = g[zcols].abs().to_numpy().ravel() if zcols else np.array([])
        zs = zs[np.isfinite(zs)]
        rec["mc_checks"] = int(zs.size)
        rec["max_abs_z"] = float(zs.max()) if zs.size else np.nan
        out.append(rec)
    return pd.DataFrame(out)


def table(df: pd.DataFrame) -> str:
    s = summary(df)
    cols = ["draft", "B", "contexts", "mean_tv", "mpfr_mean", "mpfr_q10", "mpfr_q90",
            "gls_mean", "pml_gap_max", "pml_weak_gap_mean", "lml_gap_mean",
            "lml_relaxed_gap_mean", "limit_gap_mean", "mc_checks", "max_abs_z"]
    s = s[[c for c in cols if c in s.columns]]
    head = "| " + " | ".join(s.columns) + " |\n|" + "---|" * len(s.columns) + "\n"
    body = ""
    for _, r in s.iterrows():
        cells = [f"{v:.4g}" if isinstance(v, float) else str(v) for v in r.tolist()]
        body += "| " + " | ".join(cells) + " |\n"
    note = ("\nExact values are means over the logged contexts; q10/q90: quantiles across "
            "contexts; a gap is exact − bound (PML, PML-weak vs MPFR; LML, LML-relaxed vs "
            "GLS; limit = (1−TV)/(1+TV) vs the exponential race, B = 1). max_abs_z: largest "
            "|z| of the Monte Carlo checks of this draft and B.\n")
    return head + body + note


SERIES = (("mpfr", "exact MPFR (= PML)", "-", "o"), ("gls", "exact GLS", "-", "s"),
          ("pml_weak", "PML-weak", "--", None), ("lml", "LML", "-.", None),
          ("lml_relaxed", "LML-relaxed", ":", None))
GAPS = ("pml_weak", "lml", "lml_relaxed", "limit")


def gap_quantiles(df: pd.DataFrame) -> pd.DataFrame:
    """Median and 10%/90% quantiles across contexts of exact - bound for each bound of
    :data:`GAPS` (the limit at B = 1 against the exponential race), per draft and B."""
    rows = []
    for (d, B), sub in df.groupby(["draft", "B"]):
        b1 = df[(df["draft"] == d) & (df["B"] == 1)]
        for pos, b in enumerate(GAPS, start=1):
            gap = (sub[BOUND_OF[b]] - sub[b]) if b != "limit" else (b1["exp_race"] - b1["limit"])
            q = np.quantile(gap.to_numpy(), [0.1, 0.5, 0.9])
            rows.append({"draft": d, "B": B, "gap": b, "position": pos,
                         "q10": q[0], "median": q[1], "q90": q[2]})
    return pd.DataFrame(rows)


def plot(df: pd.DataFrame, png: Path) -> None:
    plt = setup_matplotlib()
    drafts = list(dict.fromkeys(df["draft"]))
    fig, axes = plt.subplots(2, len(drafts), figsize=(3.6 * len(drafts), 7.2), squeeze=False)
    for j, d in enumerate(drafts):
        sub = df[df["draft"] == d]
        ax = axes[0, j]
        g = sub.groupby("B")
        Bs = np.array(sorted(sub["B"].unique()))
        for k, (col, label, ls, marker) in enumerate(SERIES):
            ax.plot(Bs, g[col].mean().loc[Bs], ls=ls, marker=marker, ms=4, color=f"C{k}",
                    label=label)
            if col in ("mpfr", "gls"):
                ax.fill_between(Bs, g[col].quantile(0.1).loc[Bs], g[col].quantile(0.9).loc[Bs],
                                color=f"C{k}", alpha=0.15, lw=0)
        b1 = sub[sub["B"] == 1]
        ax.plot([1], [b1["limit"].mean()], "kx", ms=7, label="(1−TV)/(1+TV), B = 1")
        ax.set_title(f"{d}: mean TV {sub['tv'].mean():.2f}", fontsize=9.5)
        ax.set_xlabel("number of drafts B")
        ax.set_ylim(0, 1.02)
        ax = axes[1, j]
        Bmid = 4 if 4 in Bs else int(Bs.max())
        gaps = gap_quantiles(sub)
        gaps = gaps[gaps["B"] == Bmid]
        ax.errorbar(gaps["position"], gaps["median"],
                    yerr=[gaps["median"] - gaps["q10"], gaps["q90"] - gaps["median"]],
                    fmt="o", color="black", capsize=3)
        ax.set_xticks(range(1, len(GAPS) + 1),
                      ["PML-weak", "LML", "LML-rel.", "limit\n(B = 1)"], fontsize=8)
        ax.set_title(f"gap exact − bound across contexts, B = {Bmid}", fontsize=9)
    axes[0, 0].set_ylabel("P(accept)")
    axes[1, 0].set_ylabel("gap")
    handles, names = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, names, loc="lower center", ncol=6, bbox_to_anchor=(0.5, -0.04))
    fig.suptitle("Bounds vs exact acceptance on real next-token distributions "
                 "(bands and bars: 10–90 % of contexts)")
    fig.tight_layout()
    fig.savefig(png)
    plt.close(fig)


def main(out_dir, quick: bool = False, executor=None, **params) -> list[Path]:
    """Run (or resume) the sweep; write ``real_bounds.csv``, ``.md`` and ``.png``
    (``params``: the keywords of :data:`PARAMS`, e.g. ``log=DIR``)."""
    df = compute(out_dir, quick=quick, executor=executor, **params)
    paths = wc.write_outputs(out_dir, NAME, df, plot, table)
    # the plotted summaries across contexts (means and 10%/90% quantiles per draft and B)
    num = df.select_dtypes("number").columns.drop("B", errors="ignore")
    g = df.groupby(["draft", "B"])[list(num)]
    summary = pd.concat({"mean": g.mean(), "q10": g.quantile(0.1), "q90": g.quantile(0.9)},
                        names=["stat"]).reset_index()
    path = Path(out_dir) / f"{NAME}_summary.csv"
    summary.to_csv(path, index=False, float_format="%.17g")
    gaps = Path(out_dir) / f"{NAME}_gaps.csv"
    gap_quantiles(df).to_csv(gaps, index=False, float_format="%.17g")
    return [*paths, path, gaps]


if __name__ == "__main__":
    from paper_figs._cli import cli

    cli(main, __doc__, PARAMS, NAME)
