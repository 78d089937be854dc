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
(the budgets where the curves of ``wm_detection`` are not saturated on this model) and the
paper's T_eval = 64 and 128; the TPR drift is max - min over the four drafters, with
``tpr_drift_T*_se`` the paired (by prompt) standard error of the difference between the two
drafters that attain the max and the min (conditional on which they are: the max - min of
four noisy rates is biased upwards, so a drift whose z is below 3 is noise).

Two variants in the paper's settings (column ``variant``):

- ``pfr_nowm`` with ``unkeyed="fresh"`` (``variant = "fresh"``): the unkeyed clocks are drawn
  from the generator block by block, so a drafter change (which moves the block boundaries)
  changes the randomness every later token sees, as with fresh randomness per run (the
  paper's Table 15 setting) -- next to the seeded default (``variant = "default"``: position
  clocks, identical for every drafter given the seed);
- ``mse_pseudo`` with He et al. 2026's dual-key correction (``residual="keyed"``) scored with
  the acceptance coin (``variant = "keyed_residual_coin"``, ``detect(..., coin_threshold=0.5)``)
  next to the token-pivot detector on the default decoder.

These options run in the compiled batch decoder too.  Output stability: token-level ROUGE-L F1
(:func:`specbound.sim.rouge_l`) between the generated token ids of each pair (Di, Dj) for the same
prompt, then (Table 15) the per-prompt minimum over the six pairs averaged over prompts, and
the fraction of prompts whose four outputs are identical.

Expected: PFR, MWS (which coincides with PFR for the DeltaGumbel reweight), MPFR and
PFR-NOWM (seeded) emit the target-side chain whatever the drafter (Prop. C.3 of the paper;
the seeded PFR-NOWM draws its unkeyed clocks from the run seed, which is shared across
drafters), so ROUGE-L = 1 and zero TPR drift; VSPS, INVARIANT, MSE, MSE-PSEUDO and the fresh
PFR-NOWM change their output with the drafter (ROUGE-L < 1), and MSE/MSE-PSEUDO their TPR too.

Settings: target ``SyntheticLM(1000, context_length=2, seed=2026, T=1)`` (mean entropy ~2.6
nats, ``mean_entropy_nats``), 500 prompts x 128 tokens x 1 seed by default (this study decodes
11 decoder variants x 4 drafters; 1,000 prompts would not fit the budget of ``make
reproduce``), whole-prefix keyed labels.
``--quick``: vocabulary 200, 4 prompts x 12 tokens x 2 seeds, T_eval in {4, 8, 12}.  A
prompt's seeds are pooled before the standard errors are taken over prompts.

Comparisons (``wm_drafter_substitution_comparisons.csv``, paired by prompt, ``diff_se``,
``z``): min-pair ROUGE-L of the fresh minus the seeded PFR-NOWM and of each variant decoder
minus the fresh PFR-NOWM; the TPR of the max- minus the min-drafter per decoder and T_eval
(the drift); the TPR of MSE-PSEUDO (both detectors) minus MSE per drafter and T_eval.

Outputs: ``wm_drafter_substitution.png`` (TPR per drafter, min-pair ROUGE-L), ``.csv`` (long
format, column ``row_type``: ``drafter`` rows per (decoder, variant, drafter), ``pair`` rows
per (decoder, variant, Di-Dj) with the mean ROUGE-L, ``summary`` rows per (decoder, variant)
with the Table 15 value, the identical fraction and the TPR drifts), ``_comparisons.csv`` and
``wm_drafter_substitution.md`` (Table 15 layout).  Incremental and resumable (one
configuration per decoder variant).

Run: ``python -m paper_figs.wm_drafter_substitution [--quick] [--out DIR] [--T N,...]
[--vocab N] [--prompts N] [--tokens N] [--seeds N]`` (``--help`` for the defaults).
"""

from __future__ import annotations

import itertools
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from paper_figs import _wm_common as wc
from paper_figs._common import (
    Param,
    decoder_color,
    out_path,
    resolve_params,
    setup_matplotlib,
)
from specbound.sim import keyed_pivots, rouge_l
from specbound.sim.decode import KEYED_DECODERS
from specbound.theory.watermark import anlppt, score_threshold, token_scores

FIGURE = True
NAME = "wm_drafter_substitution"
L = 4
B_MULTI = 4
FPR = 0.01
COIN_THRESHOLD = 0.5
T_FULL = (4, 8, 16, 64, 128)
T_QUICK = (4, 8, 12)
DECODERS = ("basic_uwm", "pfr", "mws", "pfr_nowm", "mpfr", "vsps", "invariant", "mse",
            "mse_pseudo")
#: (decoder, variant) -> (decoder options, coin threshold of the detector)
VARIANTS = {(d, "default"): ({}, None) for d in DECODERS}
VARIANTS[("pfr_nowm", "fresh")] = ({"unkeyed": "fresh"}, None)
VARIANTS[("mse_pseudo", "keyed_residual_coin")] = ({"residual": "keyed"}, COIN_THRESHOLD)
DRAFTER_NAMES = tuple(wc.DRAFTERS)
COLORS = {"D0": "tab:blue", "D1": "tab:orange", "D2": "tab:green", "D3": "tab:red"}


# 500 prompts x 1 seed in full mode: 11 decoder variants x 4 drafters fit the reproduce budget
PARAMS = (
    Param("T", "ints", T_FULL, T_QUICK, "detection budgets T_eval (tokens; at most --tokens)",
          low=1, check=wc.at_most("T", "tokens")),
    *wc.settings_params(replace(wc.FULL, n_prompts=500, n_seeds=1), wc.QUICK),
)


def settings(quick: bool, **params) -> wc.Settings:
    v = resolve_params(PARAMS, quick, params)
    base = wc.with_params(wc.QUICK if quick else replace(wc.FULL, n_prompts=500, n_seeds=1), v)
    s = wc.with_extra(base, L=L, B_multi=B_MULTI, coin_threshold=COIN_THRESHOLD)
    if v.T != (T_QUICK if quick else T_FULL):  # (the default grid is not in the signature)
        s = wc.with_extra(s, t_eval=v.T)
    return s


def t_values(s: wc.Settings) -> tuple[int, ...]:
    return tuple(dict(s.extra).get("t_eval", T_QUICK if s.quick else T_FULL))


def _label(decoder, variant):
    name = decoder.upper().replace("_", "-")
    return name if variant == "default" else f"{name} ({variant.replace('_', ' ')})"


def _rouge(a, b) -> float:
    return 1.0 if np.array_equal(a, b) else rouge_l(a, b)


def worker(arg) -> list[dict]:
    """One decoder variant with the four drafters (arg = (settings, decoder, variant, out_dir,
    config)); keeps the per-prompt arrays beside the CSV."""
    s, decoder, variant, out_dir, config = arg
    cpu0 = time.process_time()
    options, tau = VARIANTS[(decoder, variant)]
    models = {D: wc.make_models(s, D) for D in DRAFTER_NAMES}
    target = models["D0"][0]  # the target is the same model for every drafter
    P = s.prompt_set().tokens
    n = len(P)
    B = B_MULTI if decoder in ("mpfr", "invariant") else 1
    Ts = t_values(s)
    thr = {T: score_threshold(T, score="aaronson", fpr=FPR) for T in Ts}
    runs = s.runs()
    gen = {D: [] for D in DRAFTER_NAMES}  # per seed, the generated tokens of every prompt
    st = {D: {"tokens": np.zeros(n), "blocks": np.zeros(n), "anlppt_u": np.zeros(n),
              **{f"tpr_T{T}": np.zeros(n) for T in Ts}} for D in DRAFTER_NAMES}
    for D in DRAFTER_NAMES:
        for _, key, seeds in runs:
            res = wc.decode(target, models[D][1], P, seeds, decoder, L=L, B=B, key=key,
                            max_new_tokens=s.max_new_tokens, **options)
            gen[D].append([r.generated.copy() for r in res])
            x = st[D]
            x["tokens"] += [r.emitted_per_block.sum() for r in res]
            x["blocks"] += [r.emitted_per_block.size for r in res]
            U = np.array([keyed_pivots(r, key, coin_threshold=tau).pivots for r in res])
            x["anlppt_u"] += np.atleast_1d(anlppt(U, "u", method="chernoff"))
            S = np.cumsum(token_scores(U, "aaronson"), axis=1)
            for T in Ts:
                x[f"tpr_T{T}"] += S[:, T - 1] >= thr[T]
        for f in st[D]:
            if f not in ("tokens", "blocks"):
                st[D][f] /= len(runs)
    H = target.mean_entropy(n_contexts=500, seed=s.run_seed)
    common = {"decoder": decoder, "variant": variant, "B": B, "mean_entropy_nats": H,
              **s.columns()}
    rows = []
    for D in DRAFTER_NAMES:
        x = st[D]
        aatps, aatps_se, _ = wc.ratio_stats(x["tokens"], x["blocks"])
        u, u_se = wc.prompt_mean_se(x["anlppt_u"])
        rv = np.mean([[_rouge(a, b) for a, b in zip(gen[D][k], gen["D0"][k], strict=True)]
                      for k in range(len(runs))], axis=0)
        row = {"row_type": "drafter", "drafter": D, "aatps": aatps, "aatps_se": aatps_se,
               "anlppt_u": u, "anlppt_u_se": u_se, "rouge_l_vs_D0": float(np.mean(rv))}
        for T in Ts:
            row[f"tpr_T{T}"], row[f"tpr_T{T}_se"] = wc.prompt_mean_se(x[f"tpr_T{T}"])
        rows.append({**common, **row})
    pair_scores = {}
    for Di, Dj in itertools.combinations(DRAFTER_NAMES, 2):
        sc = np.mean([[_rouge(a, b) for a, b in zip(gen[Di][k], gen[Dj][k], strict=True)]
                      for k in range(len(runs))], axis=0)
        pair_scores[(Di, Dj)] = sc
        est, est_se = wc.prompt_mean_se(sc)
        rows.append({**common, "row_type": "pair", "drafter": f"{Di}-{Dj}",
                     "rouge_l": est, "rouge_l_se": est_se,
                     "identical_fraction": float(np.mean(sc == 1.0))})
    minpair = np.min(np.array(list(pair_scores.values())), axis=0)
    meanpair = np.mean(np.array(list(pair_scores.values())), axis=0)
    ident = [all(np.array_equal(gen[D][k][i], gen["D0"][k][i]) for D in DRAFTER_NAMES
                 for k in range(len(runs))) for i in range(n)]
    mp, mp_se = wc.prompt_mean_se(minpair)
    summary = {"row_type": "summary", "drafter": "all", "rouge_l_minpair": mp,
               "rouge_l_minpair_se": mp_se, "rouge_l_meanpair": float(meanpair.mean()),
               "identical_fraction": float(np.mean(ident))}
    for T in Ts:
        est = drift(st, T)
        summary[f"tpr_drift_T{T}"] = est["diff"]
        summary[f"tpr_drift_T{T}_se"] = est["diff_se"]
        summary[f"tpr_drift_T{T}_z"] = wc.z_score(est["diff"], est["diff_se"])
        summary[f"tpr_drift_T{T}_max"] = est["a"]
        summary[f"tpr_drift_T{T}_min"] = est["b"]
    rows.append({**common, **summary})
    stats = {f"{decoder}:{variant}:{D}": st[D] for D in DRAFTER_NAMES}
    stats[f"{decoder}:{variant}:all"] = {"rouge_l_minpair": minpair}
    wc.save_prompt_stats(out_dir, NAME, s.signature(), config, stats)
    return wc.with_task_cpu(rows, cpu0)


def drift(st: dict, T: int) -> dict:
    """TPR at ``T`` of the max- minus the min-drafter (first in :data:`DRAFTER_NAMES` order
    on ties), with the paired standard error of that difference."""
    rates = {D: float(np.mean(st[D][f"tpr_T{T}"])) for D in DRAFTER_NAMES}
    hi = max(DRAFTER_NAMES, key=lambda D: rates[D])
    lo = min(DRAFTER_NAMES, key=lambda D: rates[D])
    est = wc.paired_mean_diff(st[hi][f"tpr_T{T}"], st[lo][f"tpr_T{T}"])
    return {**est, "a": hi, "b": lo}


def comparisons(stats: dict, s: wc.Settings) -> list[dict]:
    rows = []
    fresh = stats.get("pfr_nowm:fresh:all")
    for d, v in (("pfr_nowm", "default"), ("vsps", "default"), ("invariant", "default"),
                 ("mse", "default"), ("mse_pseudo", "default")):
        other = stats.get(f"{d}:{v}:all")
        if fresh is None or other is None:
            continue
        rows.append(wc.comparison_row(f"pfr_nowm[fresh]-{d}", "rouge_l_minpair",
                                      "pfr_nowm[fresh]", d if v == "default" else f"{d}[{v}]",
                                      wc.paired_mean_diff(fresh["rouge_l_minpair"],
                                                          other["rouge_l_minpair"]),
                                      n_seeds=s.n_seeds))
    for (d, v) in VARIANTS:
        per = {D: stats.get(f"{d}:{v}:{D}") for D in DRAFTER_NAMES}
        if any(x is None for x in per.values()) or d not in KEYED_DECODERS:
            continue
        for T in t_values(s):
            est = drift(per, T)
            a, b = est.pop("a"), est.pop("b")
            label = d if v == "default" else f"{d}[{v}]"
            rows.append(wc.comparison_row(f"{label}:drift", "tpr", f"{label}:{a}",
                                          f"{label}:{b}", est, T_eval=T, n_seeds=s.n_seeds))
    for v in ("default", "keyed_residual_coin"):
        for D in DRAFTER_NAMES:
            a, b = stats.get(f"mse_pseudo:{v}:{D}"), stats.get(f"mse:default:{D}")
            if a is None or b is None:
                continue
            label = "mse_pseudo" if v == "default" else f"mse_pseudo[{v}]"
            for T in t_values(s):
                rows.append(wc.comparison_row(f"{label}-mse", "tpr", f"{label}:{D}",
                                              f"mse:{D}", wc.paired_mean_diff(
                                                  a[f"tpr_T{T}"], b[f"tpr_T{T}"]),
                                              T_eval=T, drafter=D, n_seeds=s.n_seeds))
    return rows


def compute(out_dir, quick: bool = False, executor=None, progress: bool = True, **params
            ) -> pd.DataFrame:
    s = settings(quick, **params)
    store = wc.ResumableCSV(out_path(out_dir, f"{NAME}.csv"), s.signature())
    # the slow tasks first (Python block loop, B = 4), so the pool balances the rest
    order = sorted(VARIANTS, key=lambda dv: (dv[1] == "default",
                                             dv[0] not in ("mpfr", "invariant")))
    configs = [(d if v == "default" else f"{d}:{v}",
                (s, d, v, str(out_dir), d if v == "default" else f"{d}:{v}"))
               for d, v in order]
    df = wc.study_sweep(configs, worker, store, quick=quick, executor=executor, desc=NAME,
                        progress=progress)
    stats = wc.load_prompt_stats(out_dir, NAME, s.signature())
    wc.write_comparisons(out_dir, NAME, comparisons(stats, s))
    return df


def _ordered(df: pd.DataFrame) -> list[tuple[str, str]]:
    have = set(zip(df["decoder"], df["variant"], strict=True))
    return [dv for dv in VARIANTS if dv in have]


def table(df: pd.DataFrame) -> str:
    """Markdown table in the layout of the paper's Table 15 plus the TPR drifts."""
    summ = df[df["row_type"] == "summary"].set_index(["decoder", "variant"])
    drift_cols = sorted((c for c in df.columns if c.startswith("tpr_drift_T")
                         and c[len("tpr_drift_T"):].isdigit()),
                        key=lambda c: int(c[len("tpr_drift_T"):]))
    head = "| decoder | min-pair mean ROUGE-L | mean-pair ROUGE-L | identical outputs | "
    head += " | ".join(f"TPR drift T={c[len('tpr_drift_T'):]}" for c in drift_cols) + " |"
    lines = [
        "Output stability under drafter substitution (D0-D3), synthetic LM "
        f"(vocab {int(df['vocab_size'].iloc[0])}, {int(df['n_prompts'].iloc[0])} prompts x "
        f"{int(df['max_new_tokens'].iloc[0])} tokens x {int(df['n_seeds'].iloc[0])} seeds, "
        f"L = {L}); ROUGE-L ± standard error over prompts, drift ± paired standard error.",
        "",
        head,
        "|---|" + "---:|" * (3 + len(drift_cols)),
    ]
    for d, v in _ordered(summ.reset_index()):
        r = summ.loc[(d, v)]
        keyed = d in KEYED_DECODERS
        drifts = " | ".join(f"{r[c]:.3f} ± {r[c + '_se']:.3f}" if keyed else "n/a (no wm)"
                            for c in drift_cols)
        name = _label(d, v) + ("" if keyed else " (no wm)")
        if d == "basic_uwm":
            name += " (no drafter)"
        lines.append(f"| {name} | {r['rouge_l_minpair']:.3f} ± {r['rouge_l_minpair_se']:.3f} | "
                     f"{r['rouge_l_meanpair']:.3f} | {r['identical_fraction']:.2f} | {drifts} |")
    return "\n".join(lines) + "\n"


def plot(df: pd.DataFrame, path: Path) -> None:
    plt = setup_matplotlib()
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.2), gridspec_kw={"width_ratios": [3, 2]})
    dr = df[df["row_type"] == "drafter"]
    tcols = sorted((c for c in dr.columns if c.startswith("tpr_T") and not c.endswith("_se")),
                   key=lambda c: int(c[len("tpr_T"):]))
    T_show = tcols[0] if tcols else None  # the smallest budget: curves not saturated
    keyed = [dv for dv in _ordered(dr) if dv[0] in KEYED_DECODERS]
    width = 0.2
    x = np.arange(len(keyed))
    for k, D in enumerate(DRAFTER_NAMES):
        sel = [dr[(dr["decoder"] == d) & (dr["variant"] == v) & (dr["drafter"] == D)]
               for d, v in keyed]
        vals = [r[T_show].iloc[0] for r in sel]
        errs = [r[T_show + "_se"].iloc[0] for r in sel]
        ax.bar(x + (k - 1.5) * width, vals, width, yerr=np.nan_to_num(errs), color=COLORS[D],
               label=wc.DRAFTER_LABELS[D], capsize=2)
    ax.set_xticks(x, [_label(d, v).replace(" (", "\n(") for d, v in keyed], fontsize=7)
    ax.set_ylabel(f"TPR @ 1% FPR, $T_{{eval}}$ = {T_show[len('tpr_T'):]}" if T_show else "TPR")
    ax.set_ylim(0, 1.08)
    ax.set_title("TPR under drafter substitution (Aaronson, exact null)", fontsize=10)
    ax.legend(fontsize=7, ncol=4, loc="upper center")
    summ = df[df["row_type"] == "summary"]
    order = _ordered(summ)
    sel = [summ[(summ["decoder"] == d) & (summ["variant"] == v)] for d, v in order]
    vals = [r["rouge_l_minpair"].iloc[0] for r in sel]
    errs = [r["rouge_l_minpair_se"].iloc[0] for r in sel]
    colors = [decoder_color(d) for d, _ in order]
    y = np.arange(len(order))
    bx.barh(y, vals, xerr=np.nan_to_num(errs), color=colors, capsize=2,
            hatch=None)
    bx.set_yticks(y, [_label(d, v) for d, v in order], fontsize=7)
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


def main(out_dir, quick: bool = False, **params) -> list[Path]:
    """Run (or resume) the sweep; write the CSVs, the markdown table and the PNG."""
    df = compute(out_dir, quick=quick, **params)
    paths = wc.write_outputs(out_dir, NAME, df, plot, table)
    return paths + [out_path(out_dir, f"{NAME}_comparisons.csv")]


if __name__ == "__main__":
    from paper_figs._cli import cli

    cli(main, __doc__, PARAMS, NAME)
