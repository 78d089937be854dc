"""Realised against predicted acceptance on the real embedded model.

The third side of the package's three-way agreement (formula, Monte Carlo, real model):
``vsps``, ``pfr`` (L = 4), ``mpfr`` and ``invariant`` (L = 4, B = 2) generate text
with the embedded SmolLM2-135M-Instruct target and its ``temperature:1.5`` draft (settings:
``paper_figs._real_runs``: 64 prompts (HumanEval, ShareGPT and ShareGPT summarisation
requests) x 64 new tokens, top-k 50, whole-prefix keyed labels). For every verification
decision the prediction is the theory's exact acceptance at the realised context given the
realised number of consistent drafts ``nu`` (``specbound.llm.decision_acceptance``: 1 - TV
for VSpS (Alg. 1 of Liu, Wan, Gao & Gündüz 2026, arXiv:2609.21858), the exponential race for
PFR (Alg. 2-3), Thm B.1's PML expression, exact for MPFR (Alg. 6), GLS for INVARIANT (Rowan
et al. 2025)), evaluated on the very distributions the decoder read.

Realised vs predicted AATPS: the predicted AATPS replaces every block's accepted drafts by the
sum of its decisions' probabilities; the per-block differences are martingale differences
(mean 0 under the theory, uncorrelated), so ``z = mean(diff) / (sd(diff) / sqrt(blocks))``,
per decoder and over all decoders.  Calibration: decisions binned by predicted acceptance
(10 bins of width 0.1), realised acceptance frequency with its 95% Wilson interval against
the mean prediction in the bin, and the bin's z-score with the predicted Bernoulli variance.

Outputs: ``real_crosscheck.csv`` (per decoder and ``all``: ``decoder, L, B, n_prompts,
n_blocks, n_decisions, aatps, predicted_aatps, diff, diff_se, z, acceptance_rate,
predicted_rate``), ``real_crosscheck_calibration.csv`` (per decoder and ``all`` and bin:
``bin_lo, bin_hi, n, mean_predicted, realised, ci_lo, ci_hi, z``), ``real_crosscheck.md``,
``real_crosscheck.png``; the runs themselves in ``real_runs.csv`` (resumable,
``specbound.sweep``; shared with ``real_watermarks``).

``--quick``: one ShareGPT prompt of at most 64 tokens, 6 new tokens.

Run: ``python -m paper_figs.real_crosscheck [--quick] [--out DIR] [--executor SPEC]
[--target MODEL] [--draft SPEC] [--prompts N] [--tokens N] [--prompt-tokens N]`` (another
model pair: any target and draft of ``specbound.llm.load_pair``; other sizes).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from paper_figs import _real_runs as rr
from paper_figs._common import (
    decoder_color,
    decoder_marker,
    out_path,
    resolve_params,
    setup_matplotlib,
)
from specbound.results import proportion_ci

FIGURE = True
NAME = "real_crosscheck"
#: the study's parameters (``--help``): the model pair and sizes of every real-model run
PARAMS = rr.real_params(runs=lambda v: rr.fixed_runs(SPECS)(v))
#: the configurations (at B = 4 a multi-draft run costs twice B = 2's on a CPU, where a
#: forward's cost grows with its sequences; ``real_watermarks --B 2,4`` runs them)
SPECS = (rr.RunSpec("vsps"), rr.RunSpec("pfr"), rr.RunSpec("mpfr", B=2),
         rr.RunSpec("invariant", B=2))
BINS = np.linspace(0.0, 1.0, 11)


def label(spec: rr.RunSpec) -> str:
    return spec.decoder if spec.B == 1 else f"{spec.decoder} B={spec.B}"


def _blocks(sub: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Emitted tokens and accepted-minus-predicted of every block of the runs in ``sub``."""
    emitted, diff = [], []
    for _, r in sub.iterrows():
        e = rr.parse(r["emitted"], np.int64)
        blk = rr.parse(r["dec_block"], np.int64)
        acc = rr.parse(r["dec_accepted"], float)
        pr = rr.parse(r["dec_predicted"], float)
        emitted.append(e)
        diff.append(np.bincount(blk, weights=acc - pr, minlength=e.size)[:e.size])
    return np.concatenate(emitted), np.concatenate(diff)


def _decisions(sub: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    acc = np.concatenate([rr.parse(v, float) for v in sub["dec_accepted"]])
    pr = np.concatenate([rr.parse(v, float) for v in sub["dec_predicted"]])
    return acc, pr


def summary_row(name: str, sub: pd.DataFrame, L, B) -> dict:
    e, d = _blocks(sub)
    acc, pr = _decisions(sub)
    n = d.size
    se = float(d.std(ddof=1) / math.sqrt(n)) if n > 1 else math.nan
    mean_d = float(d.mean())
    return {"decoder": name, "L": L, "B": B, "n_prompts": int(sub["prompt"].nunique()),
            "n_blocks": int(n), "n_decisions": int(acc.size), "aatps": float(e.mean()),
            "predicted_aatps": float(e.mean() - mean_d), "diff": mean_d, "diff_se": se,
            "z": mean_d / se if se > 0 else math.nan,
            "acceptance_rate": float(acc.mean()), "predicted_rate": float(pr.mean())}


def calibration_rows(name: str, acc: np.ndarray, pr: np.ndarray) -> list[dict]:
    rows = []
    which = np.clip(np.searchsorted(BINS, pr, side="right") - 1, 0, len(BINS) - 2)
    for b in range(len(BINS) - 1):
        sel = which == b
        n = int(sel.sum())
        if n == 0:
            continue
        k = int(acc[sel].sum())
        ci = proportion_ci(k, n)
        var = float(np.sum(pr[sel] * (1 - pr[sel])))
        rows.append({"decoder": name, "bin_lo": BINS[b], "bin_hi": BINS[b + 1], "n": n,
                     "mean_predicted": float(pr[sel].mean()), "realised": k / n,
                     "ci_lo": ci.low, "ci_hi": ci.high,
                     "z": (k - float(pr[sel].sum())) / math.sqrt(var) if var > 0 else math.nan})
    return rows


def compute(out_dir, quick: bool = False, executor=None, progress: bool = True, **params
            ) -> tuple[pd.DataFrame, pd.DataFrame]:
    s = rr.settings(quick, **resolve_params(PARAMS, quick, params))
    specs = rr.resolve(SPECS, s)
    df = rr.runs(out_dir, specs, s, executor=executor, progress=progress, desc=NAME)
    summ, cal = [], []
    for sp in specs:
        sub = rr.select(df, sp)
        summ.append(summary_row(label(sp), sub, sp.L, sp.B))
        cal += calibration_rows(label(sp), *_decisions(sub))
    allsub = df[df["config"].isin({sp.id for sp in specs})]
    summ.append(summary_row("all", allsub, 4, math.nan))
    cal += calibration_rows("all", *_decisions(allsub))
    S = pd.DataFrame(summ)
    for k, v in s.columns().items():
        S[f"setting_{k}"] = v
    return S, pd.DataFrame(cal)


def table(S: pd.DataFrame) -> str:
    lines = ["| decoder | blocks | decisions | AATPS realised | AATPS predicted | diff ± se | z |",
             "|---|---|---|---|---|---|---|"]
    for _, r in S.iterrows():
        lines.append(f"| {r['decoder']} | {int(r['n_blocks'])} | {int(r['n_decisions'])} | "
                     f"{r['aatps']:.4f} | {r['predicted_aatps']:.4f} | "
                     f"{r['diff']:+.4f} ± {r['diff_se']:.4f} | {r['z']:+.2f} |")
    lines.append("\nPrediction: the exact per-context acceptance of each decision given its "
                 "realised nu (specbound.llm.decision_acceptance), summed per block; z = mean "
                 "per-block (accepted − predicted) / its standard error.\n")
    return "\n".join(lines)


def plot(S: pd.DataFrame, C: pd.DataFrame, png: Path) -> None:
    plt = setup_matplotlib()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11.0, 4.4))
    from matplotlib.transforms import ScaledTranslation

    per = S[S["decoder"] != "all"]
    # decoders with (nearly) equal predictions (vsps and pfr emit the same blocks on a short
    # run) would hide each other: the members of such a group are dodged sideways by a few
    # points on the page (a display offset; the plotted values are the CSV's)
    x = per["predicted_aatps"].to_numpy(dtype=float)
    tol = 0.02 * max(float(np.ptp(x)), 1e-9)
    order = np.argsort(x, kind="stable")
    group = np.zeros(len(x), dtype=int)
    for a, b in zip(order[:-1], order[1:], strict=True):
        group[b] = group[a] + (x[b] - x[a] > tol)
    shift = np.zeros(len(x))
    for g in np.unique(group):
        members = np.flatnonzero(group == g)
        shift[members] = (np.arange(members.size) - (members.size - 1) / 2) * 7.0
    for k, (_, r) in enumerate(per.iterrows()):
        dec = r["decoder"].split()[0]
        dodge = ScaledTranslation(shift[k] / 72, 0, fig.dpi_scale_trans)
        a1.errorbar(r["predicted_aatps"], r["aatps"], yerr=2 * r["diff_se"],
                    color=decoder_color(dec), marker=decoder_marker(dec), ms=7, capsize=3,
                    mfc="none" if "B=2" in r["decoder"] else decoder_color(dec),
                    label=r["decoder"], ls="none", transform=a1.transData + dodge,
                    zorder=3 + k)
    # (artists drawn with a display offset do not scale the axes: the data do)
    for sign in (-2, 2):
        a1.update_datalim(np.column_stack([per["predicted_aatps"],
                                           per["aatps"] + sign * per["diff_se"]]))
    a1.margins(x=0.06)
    a1.autoscale_view()
    lo, hi = float(per["predicted_aatps"].min()), float(per["predicted_aatps"].max())
    a1.plot([lo, hi], [lo, hi], color="0.5", lw=0.8, ls="--")
    a1.set_xlabel("predicted AATPS (exact per-context acceptance)")
    a1.set_ylabel("realised AATPS (± 2 se)")
    a1.text(0.99, 0.01, "equal predictions: markers dodged sideways", transform=a1.transAxes,
            ha="right", va="bottom", fontsize=7, color="0.4")
    a1.set_title("Real model: realised vs predicted AATPS", fontsize=10)
    a1.legend(fontsize=7)
    allc = C[C["decoder"] == "all"]
    a2.errorbar(allc["mean_predicted"], allc["realised"],
                yerr=[allc["realised"] - allc["ci_lo"], allc["ci_hi"] - allc["realised"]],
                color="k", marker="o", ms=5, capsize=3, ls="none",
                label="all decisions (95% Wilson)")
    a2.plot(BINS[[0, -1]], BINS[[0, -1]], color="0.5", lw=0.8, ls="--")
    a2.set_xlabel("predicted acceptance (bin mean)")
    a2.set_ylabel("realised acceptance frequency")
    a2.set_title("Calibration of the per-decision predictions", fontsize=10)
    a2.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(png)
    plt.close(fig)


def main(out_dir, quick: bool = False, executor=None, **params) -> list[Path]:
    """Run (or resume); write the CSVs, the markdown table and the PNG into ``out_dir``
    (``params``: the keywords of ``paper_figs._real_runs.PARAMS``, e.g. ``target``,
    ``draft``: another model pair than the embedded model and its ``temperature:1.5``
    draft)."""
    S, C = compute(out_dir, quick=quick, executor=executor, **params)
    csv = out_path(out_dir, f"{NAME}.csv")
    ccsv = out_path(out_dir, f"{NAME}_calibration.csv")
    S.to_csv(csv, index=False, float_format="%.10g")
    C.to_csv(ccsv, index=False, float_format="%.10g")
    md = out_path(out_dir, f"{NAME}.md")
    md.write_text(table(S))
    png = out_path(out_dir, f"{NAME}.png")
    plot(S, C, png)
    return [png, csv, ccsv, md, out_path(out_dir, f"{rr.RUNS}.csv")]


if __name__ == "__main__":
    from paper_figs._cli import cli

    cli(main, __doc__, PARAMS, NAME)
