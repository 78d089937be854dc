"""Lossy verification on real logged distributions: efficiency frontier and Lemma 1's sign.

Zhou et al. (2026), arXiv:2607.26627, on the next-token distributions of a real model pair
instead of synthetic ones (the synthetic versions are ``efficiency_frontier`` and
``lemma1_study``).

Log: in a full run the study log of ``paper_figs._real_log`` (64 prompts x 64 tokens), in a
quick run the shipped one (``specbound.llm.shipped_log()``, 12 prompts x 48 tokens), both
SmolLM2-135M-Instruct at temperature 1, top-k 50, its own samples on HumanEval and ShareGPT
(and summarisation) prompts, drafts ``temperature:0.5``, ``temperature:1.5``,
``early_exit:28``, ``quantized:3``; or any log given by ``--log DIR``.
Every logged pair is exact on the union of the two top-50 supports (tails 0).

Frontier: for each draft, every rule of ``specbound.theory.lossy`` with the parameter sweeps
of ``paper_figs.efficiency_frontier.sweeps`` (lossless; interpolation / CoS; lenience;
ceiling only; judge p/q ≥ δ; Fuzzy SD with a TV gate; truncation to the min-p set
(SpecCascade) and to the η set (typical acceptance), Eq. 13; truncation + ceiling;
contrastive), over all logged contexts: the mean single-token acceptance, its *gain* over
lossless SD (same contexts), the block efficiency for L = 4 (``theory.block_efficiency``),
and the distortion of the induced law against p: mean TV and KL(induced ‖ p)
(``theory.distortion``).  On real top-k logs the draft's support differs from the target's
for the ``early_exit`` and ``quantized`` drafts, so rules that let draft mass through where
p = 0 (interpolation, judge at δ = 0, an open Fuzzy gate) have KL = ∞ on those contexts;
the CSV gives the fraction of contexts with finite KL and the mean KL over them, and the
KL panel plots only parameter values whose KL is finite on every context.

Lemma 1 (§5.1, App. G.1; docs/mathematics.md §3): truncating the target to its min-p set
(p_base ∈ {0.05, 0.1, ..., 0.9}) or η set (ε from 1e-4 to 0.3) changes standard SD's
acceptance by ΔBE = gain − loss (``theory.truncation_efficiency_delta``); per draft and
parameter, the mean gain, loss and net ΔBE and the fraction of contexts where ΔBE > 0.

Outputs: ``real_lossy.csv`` (frontier: ``draft, rule, param_name, param, contexts,
acceptance, lossless_acceptance, gain, be_L4, tv, kl_finite_frac, kl, reverse_kl_finite_frac``),
``real_lossy_lemma1.csv`` (``draft, truncation, param, contexts, gain, loss, net,
frac_positive, net_se``), ``real_lossy.md`` (per draft, the best gain of each rule at mean TV
≤ 0.05 and ≤ 0.1, and Lemma 1's sign), ``real_lossy.png``.  Resumable: one stored
configuration per draft and part (``specbound.sweep``).

``--quick``: 12 contexts per draft.

Run: ``python -m paper_figs.real_lossy [--quick] [--out DIR] [--log DIR] [--contexts N]``
(``--help`` for the defaults).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from paper_figs import _wm_common as wc
from paper_figs._common import out_path, resolve_params, setup_matplotlib
from paper_figs._real_log import (
    LOG_PARAM,
    chosen_contexts,
    contexts_param,
    in_draft_order,
    lossy_memory,
    open_log,
    padded_pairs,
    resolve_log,
    store_signature,
    subsample,
)
from paper_figs.efficiency_frontier import sweeps
from specbound.theory import block_efficiency
from specbound.theory.lossy import acceptance_rate, distortion, induced_distribution
from specbound.theory.tree import eta_allowed, min_p_allowed, truncation_efficiency_delta

FIGURE = True
NAME = "real_lossy"
VERSION = 1
QUICK_CONTEXTS = 12
PARAMS = (LOG_PARAM, contexts_param(0, QUICK_CONTEXTS, memory=lossy_memory))
P_BASES = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
EPSILONS = tuple(float(x) for x in np.geomspace(1e-4, 0.3, 10))


def frontier_worker(arg) -> list[dict]:
    log_dir, draft, positions = arg
    P, Q, _ = padded_pairs(open_log(log_dir), draft, positions)
    a0 = acceptance_rate(P, Q, "lossless")
    rows = []
    for label, rule, pname, values, make in sweeps(P, Q):
        for v in values:
            params = make(v)
            a = np.asarray(acceptance_rate(P, Q, rule, **params), dtype=float)
            d = distortion(induced_distribution(P, Q, rule, **params), P)
            kl = np.asarray(d.kl, dtype=float)
            rkl = np.asarray(d.reverse_kl, dtype=float)
            fin = np.isfinite(kl)
            rows.append({"draft": draft, "rule": label, "param_name": pname,
                         "param": float(v), "contexts": len(P),
                         "acceptance": float(a.mean()),
                         "lossless_acceptance": float(np.mean(a0)),
                         "gain": float(np.mean(a - a0)),
                         "be_L4": block_efficiency(float(a.mean()), 4),
                         "tv": float(np.mean(d.tv)), "kl_finite_frac": float(fin.mean()),
                         "kl": float(kl[fin].mean()) if fin.any() else np.inf,
                         "reverse_kl_finite_frac": float(np.isfinite(rkl).mean())})
    return rows


def lemma1_worker(arg) -> list[dict]:
    log_dir, draft, positions = arg
    P, Q, _ = padded_pairs(open_log(log_dir), draft, positions)
    rows = []
    for fam, values, allowed in (("min_p", P_BASES, min_p_allowed),
                                 ("eta", EPSILONS, eta_allowed)):
        for v in values:
            gain, loss = truncation_efficiency_delta(P, Q, allowed(P, v))
            net = np.asarray(gain) - np.asarray(loss)
            rows.append({"draft": draft, "truncation": fam, "param": float(v),
                         "contexts": len(P), "gain": float(np.mean(gain)),
                         "loss": float(np.mean(loss)), "net": float(net.mean()),
                         "frac_positive": float(np.mean(net > 0)),
                         "net_se": float(net.std(ddof=1) / np.sqrt(len(net)))
                         if len(net) > 1 else np.nan})
    return rows


def compute(out_dir, quick: bool = False, executor=None, progress: bool = True, **params
            ) -> tuple[pd.DataFrame, pd.DataFrame]:
    v = resolve_params(PARAMS, quick, params)
    log = resolve_log(v.log, out_dir, quick, progress)
    lg = open_log(log)
    positions = subsample(len(lg), chosen_contexts(v, len(lg), NAME)).tolist()
    sig = store_signature(NAME, VERSION, lg, quick, v.changed)
    log_dir = None if log is None else str(log)
    configs = [(d, (log_dir, d, positions)) for d in lg.drafts]
    front = wc.study_sweep(configs, frontier_worker,
                           wc.ResumableCSV(out_path(out_dir, f"{NAME}.csv"), sig),
                           quick=quick, executor=executor, desc=NAME, progress=progress)
    lem = wc.study_sweep(configs, lemma1_worker,
                         wc.ResumableCSV(out_path(out_dir, f"{NAME}_lemma1.csv"), sig),
                         quick=quick, executor=executor, desc=f"{NAME} lemma 1",
                         progress=progress)
    return in_draft_order(front, lg.drafts), in_draft_order(lem, lg.drafts)


def table(front: pd.DataFrame, lem: pd.DataFrame) -> str:
    lines = ["| draft | rule | best gain, TV ≤ 0.05 | best gain, TV ≤ 0.1 |",
             "|---|---|---|---|"]
    for d in dict.fromkeys(front["draft"]):
        for rule in dict.fromkeys(front["rule"]):
            if rule == "lossless":
                continue
            sub = front[(front["draft"] == d) & (front["rule"] == rule)]
            cells = []
            for cap in (0.05, 0.1):
                ok = sub[sub["tv"] <= cap]
                cells.append("—" if ok.empty else f"{ok['gain'].max():+.4f}")
            lines.append(f"| {d} | {rule} | {cells[0]} | {cells[1]} |")
    lines += ["", "Lemma 1 on real contexts: mean net ΔBE (fraction of contexts with ΔBE > 0)",
              "", "| draft | truncation | param | gain | loss | net ΔBE | frac > 0 |",
              "|---|---|---|---|---|---|---|"]
    for _, r in lem.iterrows():
        lines.append(f"| {r['draft']} | {r['truncation']} | {r['param']:.4g} | "
                     f"{r['gain']:.4f} | {r['loss']:.4f} | {r['net']:+.4f} | "
                     f"{r['frac_positive']:.2f} |")
    lines.append("\nGain: mean acceptance minus lossless SD's on the same contexts; TV: mean "
                 "TV(induced, p).\n")
    return "\n".join(lines)


MARKERS = "o*s^vD<>pXh"


def plot(front: pd.DataFrame, lem: pd.DataFrame, png: Path) -> None:
    plt = setup_matplotlib()
    drafts = list(dict.fromkeys(front["draft"]))
    rules = [r for r in dict.fromkeys(front["rule"]) if r != "lossless"]
    fig, axes = plt.subplots(len(drafts), 4, figsize=(14.0, 3.4 * len(drafts)),
                             squeeze=False)
    for i, d in enumerate(drafts):
        fd = front[front["draft"] == d]
        for k, rule in enumerate(rules):
            sub = fd[fd["rule"] == rule]
            style = dict(marker=MARKERS[k % len(MARKERS)], ms=4, color=f"C{k % 10}", lw=1.1,
                         label=rule)
            axes[i, 1].plot(sub["tv"], sub["gain"], **style)
            fin = sub[sub["kl_finite_frac"] == 1.0]
            axes[i, 0].plot(fin["kl"], fin["gain"], **style)
        axes[i, 0].set_xscale("symlog", linthresh=1e-3)
        axes[i, 0].set_xlim(left=0.0)
        axes[i, 0].set_ylabel(f"{d}\nacceptance gain")
        axes[i, 0].set_xlabel("mean KL(induced ‖ p) (finite on every context)")
        axes[i, 1].set_xlabel("mean TV(induced, p)")
        ld = lem[lem["draft"] == d]
        for j, fam in enumerate(("min_p", "eta")):
            ax = axes[i, 2 + j]
            sub = ld[ld["truncation"] == fam].sort_values("param")
            ax.plot(sub["param"], sub["gain"], "-o", ms=3, color="C2", label="gain")
            ax.plot(sub["param"], sub["loss"], "-s", ms=3, color="C3", label="loss")
            ax.errorbar(sub["param"], sub["net"], yerr=sub["net_se"], fmt="-^", ms=3,
                        color="k", capsize=2, label="net ΔBE")
            ax.axhline(0, color="0.5", lw=0.6)
            ax2 = ax.twinx()
            ax2.plot(sub["param"], sub["frac_positive"], ":", color="C0",
                     label="fraction ΔBE > 0")
            ax2.set_ylim(0, 1)
            ax2.set_ylabel("fraction of contexts with ΔBE > 0", color="C0", fontsize=8)
            ax2.tick_params(axis="y", colors="C0")
            if fam == "eta":
                ax.set_xscale("log")
            ax.set_xlabel("p_base (min-p)" if fam == "min_p" else "ε (η truncation)")
            if i == 0:
                ax.set_title(f"Lemma 1, {fam.replace('_', '-')} truncation", fontsize=9.5)
                h1, n1 = ax.get_legend_handles_labels()
                h2, n2 = ax2.get_legend_handles_labels()
                ax.legend(h1 + h2, n1 + n2, fontsize=8)
    handles, names = axes[0, 1].get_legend_handles_labels()
    # the rules' legend in a band of its own below the bottom row's axis labels
    ncol = 4
    band = (0.3 + 0.2 * -(-len(names) // ncol)) / fig.get_figheight()
    fig.legend(handles, names, loc="lower center", ncol=ncol, bbox_to_anchor=(0.5, 0.0),
               fontsize=8.5, frameon=False)
    fig.suptitle("Lossy verification on real next-token distributions: gain vs distortion, "
                 "and Lemma 1's ΔBE", y=1.0)
    fig.tight_layout(rect=(0, band, 1, 0.985))
    fig.savefig(png)
    plt.close(fig)


def main(out_dir, quick: bool = False, executor=None, **params) -> list[Path]:
    """Run (or resume); write ``real_lossy.csv``, ``real_lossy_lemma1.csv``, ``.md``, ``.png``
    (``params``: the keywords of :data:`PARAMS`, e.g. ``log=DIR``)."""
    front, lem = compute(out_dir, quick=quick, executor=executor, **params)
    png = out_path(out_dir, f"{NAME}.png")
    md = out_path(out_dir, f"{NAME}.md")
    md.write_text(table(front, lem))
    plot(front, lem, png)
    return [png, out_path(out_dir, f"{NAME}.csv"), out_path(out_dir, f"{NAME}_lemma1.csv"), md]


if __name__ == "__main__":
    from paper_figs._cli import cli

    cli(main, __doc__, PARAMS, NAME)
