"""Drafter substitution: TPR drift and output stability (Fig. 2b, Table 15 and App. D.5 of Liu,
Wan, Gao & Gündüz 2026, arXiv:2609.21858).

The target, the watermark key, the prompts and the unkeyed seeds are fixed; only the drafter
changes among D0-D3 (``paper_figs._wm_common.DRAFTERS``):

- D0 ``target.draft(0.3, seed=1)`` (default);
- D1 ``target.draft(0.2, seed=2)``: another "size" (a better drafter with an independent noise
  field, the analogue of the paper's 0.5B -> 1.5B swap);
- D2 = D0 at temperature 0.5; D3 = D0 at temperature 1.5.

For every decoder (``basic_uwm`` as the vacuous reference, ``pfr``, ``mws``, ``pfr_nowm``,
``mpfr`` (B = 4), ``vsps``, ``invariant`` (B = 4), ``mse``, ``mse_pseudo``; L = 4) and drafter:
AATPS, ANLPPT-U and TPR@1%FPR (Aaronson score, exact Gamma null) at T_eval in {4, 8, 16}
(the budgets where the curves of ``wm_detection`` are not saturated on this model); the TPR
drift is max - min over the four drafters.  Output stability: token-level ROUGE-L F1
(:func:`specbound.sim.rouge_l`) between the generated token ids of each pair (Di, Dj) for the same
prompt, then (Table 15) the per-prompt minimum over the six pairs averaged over prompts, and
the fraction of prompts whose four outputs are identical.

Expected: PFR, MWS (which coincides with PFR for the DeltaGumbel reweight), MPFR and
PFR-NOWM emit the target-side chain whatever the drafter (Prop. C.3 of the paper; PFR-NOWM here
draws its unkeyed clocks from the run seed, which is shared across drafters), so ROUGE-L = 1
and zero TPR drift; VSPS, INVARIANT, MSE and MSE-PSEUDO change their output with the drafter
(ROUGE-L < 1), and MSE/MSE-PSEUDO their TPR too.

Settings: target ``SyntheticLM(1000, context_length=2, seed=2026, T=1)`` (mean entropy ~2.6
nats, ``mean_entropy_nats``), 100 prompts x 64 tokens, whole-prefix keyed labels.
``--quick``: vocabulary 200, 3 prompts x 12 tokens, T_eval in {4, 8}.

Outputs: ``wm_drafter_substitution.png`` (TPR per drafter, min-pair ROUGE-L), ``.csv`` (long
format, column ``row_type``: ``drafter`` rows per (decoder, drafter), ``pair`` rows per
(decoder, Di-Dj) with the mean ROUGE-L, ``summary`` rows per decoder with the Table 15 value,
the identical fraction and the TPR drifts) and ``wm_drafter_substitution.md`` (Table 15
layout).  Incremental and resumable (one configuration per decoder).

Run: ``python -m paper_figs.wm_drafter_substitution [--quick] [--out DIR]``.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from paper_figs import _wm_common as wc
from paper_figs._common import cli, decoder_color, out_path, setup_matplotlib
from specbound.sim import (
    CachedLM,
    cluster_ratio_se,
    keyed_pivots,
    mean_se,
    rouge_l,
    speculative_decode_batch,
)
from specbound.sim.decode import KEYED_DECODERS
from specbound.theory.watermark import anlppt, score_threshold, token_scores

FIGURE = True
NAME = "wm_drafter_substitution"
L = 4
B_MULTI = 4
FPR = 0.01
T_FULL = (4, 8, 16)
T_QUICK = (4, 8)
DECODERS = ("basic_uwm", "pfr", "mws", "pfr_nowm", "mpfr", "vsps", "invariant", "mse",
            "mse_pseudo")
DRAFTER_NAMES = tuple(wc.DRAFTERS)
COLORS = {"D0": "tab:blue", "D1": "tab:orange", "D2": "tab:green", "D3": "tab:red"}


def settings(quick: bool) -> wc.Settings:
    if quick:
        return wc.with_extra(wc.QUICK, L=L, B_multi=B_MULTI)
    return wc.with_extra(replace(wc.FULL, n_prompts=100), L=L, B_multi=B_MULTI)


def t_values(s: wc.Settings) -> tuple[int, ...]:
    return T_QUICK if s.quick else T_FULL


def worker(arg) -> list[dict]:
    """One decoder with the four drafters (arg = (settings, decoder))."""
    s, decoder = arg
    models = {D: wc.make_models(s, D) for D in DRAFTER_NAMES}
    target = CachedLM(models["D0"][0])  # the target is the same model for every drafter
    drafts = {D: CachedLM(models[D][1]) for D in DRAFTER_NAMES}
    ps = s.prompt_set()
    P, seeds = ps.tokens, ps.seeds
    B = B_MULTI if decoder in ("mpfr", "invariant") else 1
    gen = {D: [] for D in DRAFTER_NAMES}
    blocks = {D: [] for D in DRAFTER_NAMES}
    for D in DRAFTER_NAMES:  # all prompts in one compiled call (prompt i with seeds[i])
        batch = speculative_decode_batch(target, drafts[D], ps, decoder, L=L, B=B, key=s.key,
                                         max_new_tokens=s.max_new_tokens, seed=seeds,
                                         parallel=False)
        gen[D] = [r.generated.copy() for r in batch]
        blocks[D] = [e.copy() for e in batch.emitted_per_block]
    H = models["D0"][0].mean_entropy(n_contexts=500, seed=s.run_seed)
    Ts = t_values(s)
    thr = {T: score_threshold(T, score="aaronson", fpr=FPR) for T in Ts}
    common = {"decoder": decoder, "B": B, "mean_entropy_nats": H, **s.columns()}
    rows = []
    tprs = {}
    for D in DRAFTER_NAMES:
        toks = [np.concatenate([p, g]) for p, g in zip(P, gen[D], strict=True)]
        U = np.array([keyed_pivots(t, s.prompt_length, s.key).pivots for t in toks])
        S = np.cumsum(token_scores(U, "aaronson"), axis=1)
        num = [b.sum() for b in blocks[D]]
        den = [b.size for b in blocks[D]]
        ratio = cluster_ratio_se(num, den)
        u = mean_se(np.atleast_1d(anlppt(U, "u", method="chernoff")))
        row = {"row_type": "drafter", "drafter": D, "aatps": ratio.mean,
               "aatps_se": ratio.stderr, "anlppt_u": u.mean, "anlppt_u_se": u.stderr,
               "rouge_l_vs_D0": float(np.mean([rouge_l(a, b) for a, b in
                                               zip(gen[D], gen["D0"], strict=True)]))}
        for T in Ts:
            tpr = float(np.mean(S[:, T - 1] >= thr[T]))
            tprs[(D, T)] = tpr
            row[f"tpr_T{T}"] = tpr
            row[f"tpr_T{T}_se"] = math.sqrt(tpr * (1 - tpr) / len(toks))
        rows.append({**common, **row})
    n = len(P)
    pair_scores = {}
    for Di, Dj in itertools.combinations(DRAFTER_NAMES, 2):
        sc = np.array([rouge_l(a, b) for a, b in zip(gen[Di], gen[Dj], strict=True)])
        pair_scores[(Di, Dj)] = sc
        est = mean_se(sc)
        rows.append({**common, "row_type": "pair", "drafter": f"{Di}-{Dj}",
                     "rouge_l": est.mean, "rouge_l_se": est.stderr,
                     "identical_fraction": float(np.mean(sc == 1.0))})
    minpair = np.min(np.array(list(pair_scores.values())), axis=0)
    meanpair = np.mean(np.array(list(pair_scores.values())), axis=0)
    ident = [all(np.array_equal(gen[D][i], gen["D0"][i]) for D in DRAFTER_NAMES)
             for i in range(n)]
    summary = {"row_type": "summary", "drafter": "all",
               "rouge_l_minpair": float(minpair.mean()), "rouge_l_minpair_se":
               mean_se(minpair).stderr, "rouge_l_meanpair": float(meanpair.mean()),
               "identical_fraction": float(np.mean(ident))}
    for T in Ts:
        vals = [tprs[(D, T)] for D in DRAFTER_NAMES]
        summary[f"tpr_drift_T{T}"] = max(vals) - min(vals)
    rows.append({**common, **summary})
    return rows


def compute(out_dir, quick: bool = False, executor=None, progress: bool = True) -> pd.DataFrame:
    s = settings(quick)
    store = wc.ResumableCSV(out_path(out_dir, f"{NAME}.csv"), s.signature())
    configs = [(d, (s, d)) for d in DECODERS]
    df = wc.study_sweep(configs, worker, store, quick=quick, executor=executor, desc=NAME,
                        progress=progress)
    return df


def table(df: pd.DataFrame) -> str:
    """Markdown table in the layout of the paper's Table 15 plus the TPR drifts."""
    summ = df[df["row_type"] == "summary"].set_index("decoder")
    drift_cols = sorted((c for c in df.columns if c.startswith("tpr_drift_T")),
                        key=lambda c: int(c[len("tpr_drift_T"):]))
    head = "| decoder | min-pair mean ROUGE-L | mean-pair ROUGE-L | identical outputs | "
    head += " | ".join(f"TPR drift T={c[len('tpr_drift_T'):]}" for c in drift_cols) + " |"
    lines = [
        "Output stability under drafter substitution (D0-D3), synthetic LM "
        f"(vocab {int(df['vocab_size'].iloc[0])}, {int(df['n_prompts'].iloc[0])} prompts x "
        f"{int(df['max_new_tokens'].iloc[0])} tokens, L = {L}).",
        "",
        head,
        "|---|" + "---:|" * (3 + len(drift_cols)),
    ]
    for d in DECODERS:
        if d not in summ.index:
            continue
        r = summ.loc[d]
        keyed = d in KEYED_DECODERS
        drifts = " | ".join(f"{r[c]:.3f}" if keyed else "n/a (no wm)" for c in drift_cols)
        name = d.upper().replace("_", "-") + ("" if keyed else " (no wm)")
        if d == "basic_uwm":
            name += " (no drafter)"
        lines.append(f"| {name} | {r['rouge_l_minpair']:.3f} | {r['rouge_l_meanpair']:.3f} | "
                     f"{r['identical_fraction']:.2f} | {drifts} |")
    return "\n".join(lines) + "\n"


def plot(df: pd.DataFrame, path: Path) -> None:
    plt = setup_matplotlib()
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.2), gridspec_kw={"width_ratios": [3, 2]})
    dr = df[df["row_type"] == "drafter"]
    tcols = sorted((c for c in dr.columns if c.startswith("tpr_T") and not c.endswith("_se")),
                   key=lambda c: int(c[len("tpr_T"):]))
    T_show = tcols[0] if tcols else None  # the smallest budget: curves not saturated
    keyed = [d for d in DECODERS if d in KEYED_DECODERS and d in set(dr["decoder"])]
    width = 0.2
    x = np.arange(len(keyed))
    for k, D in enumerate(DRAFTER_NAMES):
        vals = [dr[(dr["decoder"] == d) & (dr["drafter"] == D)][T_show].iloc[0] for d in keyed]
        errs = [dr[(dr["decoder"] == d) & (dr["drafter"] == D)][T_show + "_se"].iloc[0]
                for d in keyed]
        ax.bar(x + (k - 1.5) * width, vals, width, yerr=errs, color=COLORS[D],
               label=wc.DRAFTER_LABELS[D], capsize=2)
    ax.set_xticks(x, [d.upper().replace("_", "-") for d in keyed], fontsize=8)
    ax.set_ylabel(f"TPR @ 1% FPR, $T_{{eval}}$ = {T_show[len('tpr_T'):]}" if T_show else "TPR")
    ax.set_ylim(0, 1.08)
    ax.set_title("TPR under drafter substitution (Aaronson, exact null)", fontsize=10)
    ax.legend(fontsize=7, ncol=4, loc="upper center")
    summ = df[df["row_type"] == "summary"]
    order = [d for d in DECODERS if d in set(summ["decoder"])]
    vals = [summ[summ["decoder"] == d]["rouge_l_minpair"].iloc[0] for d in order]
    errs = [summ[summ["decoder"] == d]["rouge_l_minpair_se"].iloc[0] for d in order]
    colors = [decoder_color(d) for d in order]
    y = np.arange(len(order))
    bx.barh(y, vals, xerr=np.nan_to_num(errs), color=colors, capsize=2)
    bx.set_yticks(y, [d.upper().replace("_", "-") for d in order], fontsize=8)
    bx.invert_yaxis()
    bx.set_xlim(0, 1.05)
    bx.set_xlabel("min-pair ROUGE-L (token ids), mean over prompts")
    bx.set_title("Output stability (Table 15 analogue)", fontsize=10)
    for yi, v in zip(y, vals, strict=True):
        inside = v > 0.5
        bx.text(v - 0.02 if inside else v + 0.03, yi, f"{v:.3f}", va="center",
                ha="right" if inside else "left", fontsize=7,
                color="white" if inside else "black")
    fig.savefig(path)
    plt.close(fig)


def main(out_dir, quick: bool = False) -> list[Path]:
    """Run (or resume) the sweep; write the CSV, the markdown table and the PNG."""
    df = compute(out_dir, quick=quick)
    return wc.write_outputs(out_dir, NAME, df, plot, table)


if __name__ == "__main__":
    cli(main, __doc__)
