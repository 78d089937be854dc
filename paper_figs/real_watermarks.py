"""The watermark studies of the multi-draft paper on the real embedded model.

Liu, Wan, Gao & Gündüz (2026, arXiv:2609.21858), §6 and App. D, at embedded scale: the
embedded SmolLM2-135M-Instruct target with its ``temperature:1.5`` draft D0 (settings:
``paper_figs._real_runs``: 64 prompts (24 HumanEval, 24 ShareGPT, 16 ShareGPT summarisation
requests) x exactly 64 new tokens, temperature 1 and top-k 50, one key, whole-prefix keyed
labels; the synthetic versions are the ``wm_*`` scripts). Four studies, each with PNG + CSV
+ markdown table:

``real_wm_frontier`` (Fig. 1, App. D.3)
    ``vsps``, ``pfr``, ``pfr_nowm``, ``mws``, ``mse``, ``mse_pseudo`` at L = 4 (``--L``): AATPS
    (emitted tokens / blocks, cluster-robust standard error over prompts), the theory's
    prediction along the realised blocks (``theory_aatps``, ``theory_z``: exact per-decision
    acceptance, ``specbound.llm.decision_acceptance``) and ANLPPT-U (Chernoff bound of the
    U-score p-value per token, mean and standard error over prompts; pivots recomputed from
    tokens and key, so unkeyed decoders sit at the null level).
``real_wm_scaling`` (Table 6, App. D.4)
    ``mpfr`` against ``invariant`` at B = 2 (L = 4; ``--B 2,4,6,8`` for the paper's grid):
    AATPS,
    prediction, ANLPPT-U.
``real_wm_detection`` (Fig. 2a, App. D.5)
    TPR@1%FPR of ``pfr``, ``mws``, ``mpfr`` (the largest B), ``mse``, ``mse_pseudo`` (L = 4)
    against the token budget T_eval in {1, 2, 4, 8, 16, 32, 64}: Aaronson's score against its exact
    Gamma(T, 1) null (detect iff ``S >= gamma.isf(0.01, T)``).  H0 floor (rows ``decoder =
    h0``): the same test on every generated sequence scored under 20 wrong keys (pivots
    i.i.d. U(0, 1) under H0 with whole-prefix labels), with its 99.9% Clopper-Pearson
    interval.
``real_wm_substitution`` (Fig. 2b, Table 15)
    ``vsps``, ``mse`` (L = 4) with four drafts (D0 ``temperature:1.5`` and the three of
    ``paper_figs._real_runs.SUBSTITUTE_DRAFTS``; ``pfr``, drafter-invariant by construction,
    with D0 and ``temperature:0.5``: :data:`INVARIANT_DECODERS`), the same
    target, key, prompts and unkeyed seeds: AATPS, TPR@1%FPR at T_eval in {4, 8, 16, 32} and its
    drift (max − min over drafts), token-level ROUGE-L F1 between the outputs of every pair of
    drafts for the same prompt, the per-prompt minimum over the six pairs averaged over prompts
    (Table 15) and the fraction of prompts whose four outputs are identical.

Scale: 15 decoding configurations (the four of ``real_crosscheck`` reused) x 64 prompts x
64 tokens, every configuration's prompts decoded together by ``specbound.llm.generate_batch``
with shared target-draft forwards (``paper_figs._real_runs``).  Measured 2026-12-02 on the
shared 2-core machine (load 2-4): a single-draft configuration costs about 200 CPU-seconds
(``vsps`` 195, ``pfr`` 206), a B = 2 configuration about 380 (``mpfr`` 367, ``invariant``
391), prefills included.  ``--quick``: one ShareGPT prompt of at most 64 tokens, 6 new tokens,
L = 2, B = 2, one substitute draft.

Outputs: ``real_wm_frontier.{csv,md,png}``, ``real_wm_scaling.{csv,md,png}``,
``real_wm_detection.{csv,md,png}``, ``real_wm_substitution.{csv,md,png}``; the runs in
``real_runs.csv`` (resumable through ``specbound.sweep``, shared with ``real_crosscheck``).

Run: ``python -m paper_figs.real_watermarks [--quick] [--out DIR] [--executor SPEC]
[--target MODEL] [--draft SPEC] [--prompts N] [--tokens N] [--prompt-tokens N] [--L N,...]
[--B N,...] [--T N,...] [--T-subst N,...]`` (D0 replaced by ``--draft``; the substitution
study keeps the other three drafts).
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pandas as pd

from paper_figs import _real_runs as rr
from paper_figs import _wm_common as wc
from paper_figs._common import (
    Param,
    decoder_color,
    decoder_marker,
    integer_ticks,
    out_path,
    resolve_params,
    setup_matplotlib,
)
from specbound.cli import MAX_B, MAX_L
from specbound.results import proportion_ci
from specbound.sim import cluster_ratio_se, keyed_pivots, mean_se, rouge_l
from specbound.theory.watermark import anlppt, score_threshold, token_scores

FIGURE = True
NAME = "real_watermarks"
#: the grids of the four studies, full and quick (:func:`sizes`)
GRIDS = {False: {"L": (4,), "B": (2,), "T": (1, 2, 4, 8, 16, 32, 64),
                 "T_subst": (4, 8, 16, 32)},
         True: {"L": (2,), "B": (2,), "T": (1, 2, 4, 6), "T_subst": (4,)}}
#: the study's parameters (``--help``): the model pair and sizes of every real-model run
#: (``paper_figs._real_runs.PARAMS``) and the studies' grids
PARAMS = (
    *rr.real_params(runs=lambda v: _runs(v)),
    Param("L", "ints", GRIDS[False]["L"], GRIDS[True]["L"], "lookaheads of the frontier",
          low=1, high=MAX_L, memory=rr.memory_hook("L", lambda v: _runs(v))),
    Param("B", "ints", GRIDS[False]["B"], GRIDS[True]["B"],
          "numbers of drafts of the multi-draft scaling", low=1, high=MAX_B,
          memory=rr.memory_hook("B", lambda v: _runs(v))),
    Param("T", "ints", GRIDS[False]["T"], GRIDS[True]["T"],
          "detection budgets T_eval (tokens; at most --tokens)", low=1,
          check=wc.at_most("T", "tokens")),
    Param("T_subst", "ints", GRIDS[False]["T_subst"], GRIDS[True]["T_subst"],
          "detection budgets of the drafter substitution (at most --tokens)", low=1,
          check=wc.at_most("T_subst", "tokens")),
)
FRONTIER_DECODERS = ("vsps", "pfr", "pfr_nowm", "mws", "mse", "mse_pseudo")
DETECTION_DECODERS = ("pfr", "mws", "mpfr", "mse", "mse_pseudo")
SUBST_DECODERS = ("pfr", "vsps", "mse")
#: decoders whose output does not depend on the draft by construction (drafter invariance,
#: Liu et al. 2026 Prop. 4.4): their substitution runs are a check of the code, made with the
#: drafts of ``invariant_drafts`` (:func:`sizes`: the temperature drafts, which share the
#: target's forwards) rather than all four
INVARIANT_DECODERS = ("pfr",)
FPR = 0.01
N_WRONG_KEYS = 20


def sizes(s: rr.RealSettings, **grids) -> dict:
    """The grids of the four studies (:data:`GRIDS`, with those of ``grids`` that are not
    None), the drafts of the substitution and MPFR's B in the detection study."""
    drafts = rr.substitute_drafts(s)
    z = dict(GRIDS[s.quick])
    z.update({k: tuple(v) for k, v in grids.items() if v is not None})
    if s.quick:
        drafts = drafts[:2]
    return {**z, "drafts": drafts, "B_det": max(z["B"]), "invariant_drafts": drafts[:2]}


def _runs(v) -> list:
    """The decoding runs of the parameter values ``v`` (the memory estimate's input,
    ``paper_figs._real_runs.decoding_memory``)."""
    s = rr.settings(v.quick, **{p.name: v[p.name] for p in rr.PARAMS})
    z = sizes(s, **{k: v[k] for k in GRIDS[v.quick]})
    return [(s, [x for group in specs(s, z).values() for x in group])]


def specs(s: rr.RealSettings, z: dict | None = None) -> dict[str, list[rr.RunSpec]]:
    z = sizes(s) if z is None else z
    Lmax = max(z["L"])
    return {
        "frontier": [rr.RunSpec(d, L=L, draft=s.draft) for d in FRONTIER_DECODERS
                     for L in z["L"]],
        "scaling": [rr.RunSpec(d, L=Lmax, B=B, draft=s.draft) for d in ("mpfr", "invariant")
                    for B in z["B"]],
        "detection": [rr.RunSpec(d, L=Lmax, B=z["B_det"] if d == "mpfr" else 1, draft=s.draft)
                      for d in DETECTION_DECODERS],
        "substitution": [rr.RunSpec(d, L=Lmax, B=z["B_det"] if d == "mpfr" else 1, draft=dr)
                         for d in SUBST_DECODERS for dr in z["drafts"]
                         if d not in INVARIANT_DECODERS or dr in z["invariant_drafts"]],
    }


# ------------------------------------------------------------------------- metrics


def pivots(sub: pd.DataFrame, key: str) -> np.ndarray:
    """Keyed pivots of every run of ``sub`` under ``key`` (rows: prompts)."""
    return np.array([keyed_pivots(t, n0, key, window=None).pivots
                     for t, n0 in rr.sequences(sub)])


def efficiency_row(sub: pd.DataFrame, s: rr.RealSettings) -> dict:
    """AATPS (cluster-robust), its prediction and z, ANLPPT-U of one configuration."""
    blocks = [rr.parse(e, np.int64) for e in sub["emitted"]]
    ratio = cluster_ratio_se([b.sum() for b in blocks], [b.size for b in blocks])
    row = {"n_prompts": len(sub), "n_tokens": int(sum(b.sum() for b in blocks)),
           "n_blocks": int(sum(b.size for b in blocks)), "aatps": ratio.mean,
           "aatps_se": ratio.stderr}
    if "dec_predicted" in sub and sub["dec_predicted"].notna().all():
        diffs = []
        for (_, r), b in zip(sub.iterrows(), blocks, strict=True):
            blk = rr.parse(r["dec_block"], np.int64)
            w = rr.parse(r["dec_accepted"], float) - rr.parse(r["dec_predicted"], float)
            diffs.append(np.bincount(blk, weights=w, minlength=b.size)[:b.size])
        d = mean_se(np.concatenate(diffs))
        row.update(theory_aatps=ratio.mean - d.mean, theory_diff=d.mean,
                   theory_diff_se=d.stderr,
                   theory_z=d.mean / d.stderr if d.stderr > 0 else math.nan)
    U = pivots(sub, s.key)
    for name, kw in (("anlppt_u", {"method": "chernoff"}), ("anlppt_u_exact", {"method": "exact"})):
        est = mean_se(np.atleast_1d(anlppt(U, "u", **kw)))
        row[name], row[name + "_se"] = est.mean, est.stderr
    return row


def _tag(df: pd.DataFrame, s: rr.RealSettings) -> pd.DataFrame:
    for k, v in s.columns().items():
        df[f"setting_{k}"] = v
    return df


def frontier(runs: pd.DataFrame, s, sp) -> pd.DataFrame:
    rows = [{"decoder": x.decoder, "L": x.L, "B": x.B, "draft": x.draft,
             **efficiency_row(rr.select(runs, x), s)} for x in sp]
    return _tag(pd.DataFrame(rows), s)


def detection(runs: pd.DataFrame, s, sp, Ts) -> pd.DataFrame:
    rows = []
    thr = {T: score_threshold(T, score="aaronson", fpr=FPR) for T in Ts}
    null = []
    for x in sp:
        sub = rr.select(runs, x)
        S = np.cumsum(token_scores(pivots(sub, s.key), "aaronson"), axis=1)
        n = S.shape[0]
        for T in Ts:
            k = int(np.sum(S[:, T - 1] >= thr[T]))
            rows.append({"decoder": x.decoder, "B": x.B, "score": "aaronson", "method": "exact",
                         "T_eval": T, "tpr": k / n, "tpr_se": math.sqrt(k / n * (1 - k / n) / n),
                         "ci999_low": math.nan, "ci999_high": math.nan, "threshold": thr[T],
                         "n_sequences": n, "fpr": FPR})
        for j in range(1, N_WRONG_KEYS + 1):
            null.append(np.cumsum(token_scores(pivots(sub, f"{s.key}#wrong{j}"), "aaronson"),
                                  axis=1))
    S0 = np.concatenate(null)
    n = S0.shape[0]
    for T in Ts:
        k = int(np.sum(S0[:, T - 1] >= thr[T]))
        ci = proportion_ci(k, n, 0.999, method="exact")
        rows.append({"decoder": "h0", "B": 0, "score": "aaronson", "method": "exact",
                     "T_eval": T, "tpr": k / n, "tpr_se": math.sqrt(k / n * (1 - k / n) / n),
                     "ci999_low": ci.low, "ci999_high": ci.high, "threshold": thr[T],
                     "n_sequences": n, "fpr": FPR})
    return _tag(pd.DataFrame(rows), s)


def substitution(runs: pd.DataFrame, s, sp, Ts, drafts) -> pd.DataFrame:
    rows = []
    thr = {T: score_threshold(T, score="aaronson", fpr=FPR) for T in Ts}
    for dec in dict.fromkeys(x.decoder for x in sp):
        mine = [x for x in sp if x.decoder == dec]
        gen = {}
        tprs = {T: [] for T in Ts}
        for i, x in enumerate(mine):
            sub = rr.select(runs, x)
            gen[x.draft] = [t[n0:] for t, n0 in rr.sequences(sub)]
            eff = efficiency_row(sub, s)
            S = np.cumsum(token_scores(pivots(sub, s.key), "aaronson"), axis=1)
            row = {"row_type": "drafter", "decoder": dec, "B": x.B, "drafter": x.draft,
                   "drafter_index": i, "aatps": eff["aatps"], "aatps_se": eff["aatps_se"],
                   "anlppt_u": eff["anlppt_u"], "anlppt_u_se": eff["anlppt_u_se"]}
            for T in Ts:
                t = float(np.mean(S[:, T - 1] >= thr[T]))
                n = S.shape[0]
                row[f"tpr_T{T}"] = t
                row[f"tpr_T{T}_se"] = math.sqrt(t * (1 - t) / n)
                tprs[T].append(t)
            rows.append(row)
        ds = [d for d in drafts if d in gen]  # the drafts this decoder ran with
        n_prompts = len(gen[ds[0]])
        per_prompt_min = np.ones(n_prompts)
        for a, b in itertools.combinations(ds, 2):
            r = np.array([rouge_l(gen[a][i], gen[b][i]) for i in range(n_prompts)])
            per_prompt_min = np.minimum(per_prompt_min, r)
            est = mean_se(r)
            rows.append({"row_type": "pair", "decoder": dec, "pair": f"{a} vs {b}",
                         "rouge_l": est.mean, "rouge_l_se": est.stderr})
        ident = np.mean([all(np.array_equal(gen[d][i], gen[ds[0]][i]) for d in ds)
                         for i in range(n_prompts)])
        est = mean_se(per_prompt_min)
        summ = {"row_type": "summary", "decoder": dec, "rouge_l_minpair": est.mean,
                "rouge_l_minpair_se": est.stderr, "identical_fraction": float(ident),
                "n_drafts": len(ds)}
        for T in Ts:
            summ[f"tpr_drift_T{T}"] = float(max(tprs[T]) - min(tprs[T]))
        rows.append(summ)
    return _tag(pd.DataFrame(rows), s)


# ------------------------------------------------------------------------ tables, plots


def _fmt(x, d=3):
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{d}f}"


def frontier_table(df: pd.DataFrame, by: str) -> str:
    lines = [f"| decoder | {by} | AATPS ± se | predicted (z) | ANLPPT-U ± se |",
             "|---|---|---|---|---|"]
    for _, r in df.iterrows():
        pred = (f"{_fmt(r['theory_aatps'])} ({_fmt(r['theory_z'], 2)})"
                if "theory_aatps" in r and not pd.isna(r.get("theory_aatps")) else "—")
        lines.append(f"| {r['decoder']} | {int(r[by])} | {_fmt(r['aatps'])} ± "
                     f"{_fmt(r['aatps_se'])} | {pred} | {_fmt(r['anlppt_u'], 4)} ± "
                     f"{_fmt(r['anlppt_u_se'], 4)} |")
    return "\n".join(lines) + "\n"


def detection_table(df: pd.DataFrame) -> str:
    Ts = sorted(df["T_eval"].unique())
    lines = ["| decoder | " + " | ".join(f"T={T}" for T in Ts) + " |",
             "|---|" + "---|" * len(Ts)]
    for dec in dict.fromkeys(df["decoder"]):
        sub = df[df["decoder"] == dec].set_index("T_eval")
        lines.append(f"| {dec} | " + " | ".join(_fmt(sub.at[T, "tpr"], 3) for T in Ts) + " |")
    n0 = int(df[df["decoder"] == "h0"]["n_sequences"].iloc[0])
    return ("\n".join(lines) + f"\n\nTPR@1%FPR, Aaronson score, exact Gamma(T, 1) threshold; "
            f"h0: {n0} (sequence, wrong key) pairs.\n")


def substitution_table(df: pd.DataFrame) -> str:
    summ = df[df["row_type"] == "summary"]
    Ts = sorted(int(c[len("tpr_drift_T"):]) for c in df.columns if c.startswith("tpr_drift_T"))
    lines = ["| decoder | min-pair ROUGE-L ± se | identical outputs | "
             + " | ".join(f"TPR drift T={T}" for T in Ts) + " |",
             "|---|---|---|" + "---|" * len(Ts)]
    for _, r in summ.iterrows():
        lines.append(f"| {r['decoder']} | {_fmt(r['rouge_l_minpair'], 4)} ± "
                     f"{_fmt(r['rouge_l_minpair_se'], 4)} | {_fmt(r['identical_fraction'], 2)} | "
                     + " | ".join(_fmt(r[f"tpr_drift_T{T}"], 3) for T in Ts) + " |")
    return "\n".join(lines) + "\n"


def _style(dec):
    return dict(color=decoder_color(dec), marker=decoder_marker(dec))


def plot_frontier(df: pd.DataFrame, png: Path) -> None:
    plt = setup_matplotlib()
    fig, ax = plt.subplots(figsize=(7.6, 4.4))
    for dec in FRONTIER_DECODERS:
        sub = df[df["decoder"] == dec].sort_values("L")
        if sub.empty:
            continue
        ax.errorbar(sub["aatps"], sub["anlppt_u"], xerr=sub["aatps_se"],
                    yerr=sub["anlppt_u_se"], ms=7, capsize=2, lw=1.2,
                    mfc="none" if dec in ("mws", "pfr_nowm") else decoder_color(dec),
                    label=dec.upper().replace("_", "-"), **_style(dec))
    ax.axhline(0, color="k", lw=0.6)
    ax.set_xlabel("AATPS (accepted tokens per step)")
    ax.set_ylabel("ANLPPT-U (Chernoff)")
    Ls = sorted(int(x) for x in df["L"].unique())
    ax.set_title("Single-draft frontier on the real embedded model "
                 f"(L = {', '.join(map(str, Ls))})", fontsize=10)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.savefig(png)
    plt.close(fig)


def plot_scaling(df: pd.DataFrame, png: Path) -> None:
    plt = setup_matplotlib()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10.0, 4.0))
    for dec in ("mpfr", "invariant"):
        sub = df[df["decoder"] == dec].sort_values("B")
        a1.errorbar(sub["B"], sub["aatps"], yerr=sub["aatps_se"], capsize=2,
                    label=dec.upper(), **_style(dec))
        if "theory_aatps" in sub:
            a1.plot(sub["B"], sub["theory_aatps"], ls=":", color=decoder_color(dec),
                    label=f"{dec.upper()} predicted")
        a2.errorbar(sub["B"], sub["anlppt_u"], yerr=sub["anlppt_u_se"], capsize=2,
                    label=dec.upper(), **_style(dec))
    a1.set_xlabel("B (drafts)")
    a1.set_ylabel("AATPS")
    a2.set_xlabel("B (drafts)")
    a2.set_ylabel("ANLPPT-U (Chernoff)")
    a2.axhline(0, color="k", lw=0.6)
    a1.legend(fontsize=8)
    for ax in (a1, a2):  # B is a number of drafts: integer ticks only
        integer_ticks(ax, df["B"])
    fig.suptitle("Multi-draft scaling on the real embedded model (L = 4)", fontsize=10)
    fig.tight_layout()
    fig.savefig(png)
    plt.close(fig)


def plot_detection(df: pd.DataFrame, png: Path) -> None:
    plt = setup_matplotlib()
    fig, ax = plt.subplots(figsize=(7.0, 4.2))
    for dec in DETECTION_DECODERS:
        sub = df[df["decoder"] == dec].sort_values("T_eval")
        ax.errorbar(sub["T_eval"], sub["tpr"], yerr=sub["tpr_se"], capsize=2, ms=6,
                    mfc="none" if dec == "mws" else decoder_color(dec),
                    label=dec.upper().replace("_", "-"), **_style(dec))
    h0 = df[df["decoder"] == "h0"].sort_values("T_eval")
    ax.plot(h0["T_eval"], h0["tpr"], color="tab:gray", ls="--", marker=".",
            label="H0 (wrong keys) FPR")
    ax.fill_between(h0["T_eval"], h0["ci999_low"], h0["ci999_high"], color="tab:gray",
                    alpha=0.2, lw=0, label="99.9% interval")
    ax.axhline(FPR, color="k", lw=0.6, ls=":")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("detection token budget $T_{eval}$")
    ax.set_ylabel("TPR @ 1% FPR (Aaronson, exact null)")
    ax.set_title("Detection on the real embedded model", fontsize=10)
    ax.legend(fontsize=7.5, loc="center right")
    fig.savefig(png)
    plt.close(fig)


def plot_substitution(df: pd.DataFrame, png: Path) -> None:
    plt = setup_matplotlib()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10.5, 4.0))
    dr = df[df["row_type"] == "drafter"]
    Ts = sorted(int(c[len("tpr_drift_T"):]) for c in df.columns if c.startswith("tpr_drift_T"))
    T = Ts[len(Ts) // 2]
    for dec in SUBST_DECODERS:
        sub = dr[dr["decoder"] == dec].sort_values("drafter_index")
        if sub.empty:
            continue
        a1.plot(sub["drafter_index"], sub[f"tpr_T{T}"], label=dec.upper(), **_style(dec))
    names = list(dict.fromkeys(dr.sort_values("drafter_index")["drafter"]))
    a1.set_xticks(range(len(names)), names, fontsize=7)
    a1.set_ylabel(f"TPR @ 1% FPR, T_eval = {T}")
    a1.set_title("TPR across drafts", fontsize=10)
    a1.legend(fontsize=8)
    summ = df[df["row_type"] == "summary"]
    a2.bar(range(len(summ)), summ["rouge_l_minpair"],
           color=[decoder_color(d) for d in summ["decoder"]])
    a2.set_xticks(range(len(summ)), [d.upper() for d in summ["decoder"]])
    a2.set_ylabel("min-pair ROUGE-L (mean over prompts)")
    a2.set_ylim(0, 1.05)
    a2.set_title("Output stability under drafter substitution", fontsize=10)
    fig.tight_layout()
    fig.savefig(png)
    plt.close(fig)


def compute(out_dir, quick: bool = False, executor=None, progress: bool = True, **params
            ) -> dict[str, pd.DataFrame]:
    v = resolve_params(PARAMS, quick, params)
    s = rr.settings(quick, **{p.name: v[p.name] for p in rr.PARAMS})
    z = sizes(s, **{k: v[k] for k in GRIDS[quick]})
    sp = specs(s, z)
    # crosscheck's configurations first (shared runs), then the rest
    todo = [x for group in sp.values() for x in group]
    runs = rr.runs(out_dir, todo, s, executor=executor, progress=progress, desc=NAME)
    return {"frontier": frontier(runs, s, sp["frontier"]),
            "scaling": frontier(runs, s, sp["scaling"]),
            "detection": detection(runs, s, sp["detection"], z["T"]),
            "substitution": substitution(runs, s, sp["substitution"], z["T_subst"],
                                         z["drafts"])}


STUDIES = {
    "frontier": (plot_frontier, lambda df: frontier_table(df, "L")),
    "scaling": (plot_scaling, lambda df: frontier_table(df, "B")),
    "detection": (plot_detection, detection_table),
    "substitution": (plot_substitution, substitution_table),
}


def main(out_dir, quick: bool = False, executor=None, **params) -> list[Path]:
    """Run (or resume) the runs; write the four studies' CSV, markdown and PNG (``params``:
    the keywords of ``paper_figs._real_runs.PARAMS``, as in ``real_crosscheck``)."""
    frames = compute(out_dir, quick=quick, executor=executor, **params)
    written = []
    for study, df in frames.items():
        plot, table = STUDIES[study]
        written += wc.write_frame_outputs(out_dir, f"real_wm_{study}", df, plot, table)
    return written + [out_path(out_dir, f"{rr.RUNS}.csv")]


if __name__ == "__main__":
    from paper_figs._cli import cli

    cli(main, __doc__, PARAMS, NAME)
