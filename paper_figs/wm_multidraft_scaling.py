"""Multi-draft scaling: MPFR vs INVARIANT (GLS) at L = 4 (Table 1 and App. D.4 of Liu, Wan, Gao
& Gündüz 2026, arXiv:2609.21858).

AATPS of ``mpfr`` (keyed multi-draft Poisson sampling, Alg. 4/10) and ``invariant`` (list
coupling / GLS of Rowan et al. 2025, unkeyed) for B in {2, 4, 6, 8} (the paper's grid; MPFR
with B = 1 is PFR, see ``wm_single_draft_frontier``), lookahead L = 4, with two theory
predictions next to the simulated value, and ANLPPT-U across B.

Settings (``paper_figs._wm_common``): target ``SyntheticLM(1000, context_length=2,
seed=2026, T=1)`` (mean entropy ~2.6 nats, measured: ``mean_entropy_nats``), drafter D0 =
``target.draft(0.3, seed=1)``, the paper's scale 1,000 prompts x 128 new tokens x 3 seeds
(``Settings.runs``), whole-prefix labels.  ``--quick``: vocabulary 200, 4 prompts x 12 tokens
x 2 seeds, B in {2, 4}.  AATPS standard errors are taken over prompts (a prompt's seeds
pooled; ``paper_figs._wm_common``).

Theory predictions (columns):

``theory_aatps`` (exact per-context acceptance propagated along the realised block)
    At each decision of a block the accepted drafts are replaced by their conditional
    acceptance probability ``exact_acceptance(p(c), q(c), scheme, nu)``, where ``c`` is the
    realised context and ``nu`` the number of drafts still consistent with the emitted prefix
    (MPFR: the multiplicity nu(c) of the context tree; GLS: the active-set size), both recorded
    by the decoder, scheme ``"mpfr"`` (closed form, exact for Alg. 6: Thm. B.1 of the paper)
    or ``"gls"`` (exact quadrature of :func:`specbound.theory.exact_acceptance`).  Given the
    past, a not-yet-decided context has fresh clocks (distinct labels), so the accepted count
    minus this compensator is a martingale difference
    (:func:`specbound.sim.acceptance_compensator`): the prediction is unbiased with no
    independence assumption; ``theory_z`` is (simulated - theory) / its standard error over
    prompts.  The compensator is evaluated on the first ``n_theory_prompts`` prompts of seed 0,
    and, the GLS quadrature being costly, for ``invariant`` on the first ``theory_blocks``
    blocks of each (a selection by index, hence still unbiased); ``n_theory_blocks`` says how
    many.
``naive_aatps`` (i.i.d. depth approximation)
    ``block_efficiency(a_B, L) = (1 - a_B^{L+1}) / (1 - a_B)`` with ``a_B`` the mean over the
    visited block-start contexts of the acceptance with all B drafts.  It assumes B drafts stay
    consistent at every depth and ignores the Jensen gap, so it overestimates for B > 1 (the
    drafts that survive an acceptance are fewer than B); shown to make that effect visible.

ANLPPT-U: U-score with the Chernoff p-value (paper's ANLPPT-U), mean over prompts.  MPFR
emits the keyed target chain whatever B is (Prop. C.3), so its ANLPPT is identical across B;
INVARIANT carries no watermark (null level).

Comparisons (``wm_multidraft_scaling_comparisons.csv``, paired by prompt, with ``diff_se`` and
``z``): MPFR minus INVARIANT at each B in AATPS (Table 1, Table 6), ANLPPT-U and LPPL; MPFR's
ANLPPT-U at each B minus at the smallest B (App. D.4: stable across B).

Outputs: ``wm_multidraft_scaling.png``, ``.csv`` (one row per decoder and B; settings as
columns), ``_comparisons.csv`` and ``wm_multidraft_scaling.md`` (Table 1 layout).
Incremental (one sweep task per B) and resumable.

Run: ``python -m paper_figs.wm_multidraft_scaling [--quick] [--out DIR] [--B N,...] [--L N]
[--vocab N] [--prompts N] [--tokens N] [--seeds N] [--theory-prompts N]`` (``--help`` for the
defaults).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd

from paper_figs import _wm_common as wc
from paper_figs._common import (
    Param,
    decoder_style,
    integer_ticks,
    out_path,
    resolve_params,
    setup_matplotlib,
)
from specbound.sim import CachedLM, acceptance_compensator, detect_many, log_perplexity
from specbound.theory import block_efficiency

FIGURE = True
NAME = "wm_multidraft_scaling"
L = 4
B_FULL = (8, 6, 4, 2)  # the costliest task first (the pool balances the rest)
B_QUICK = (4, 2)
DECODERS = ("mpfr", "invariant")
THEORY_BLOCKS = {"mpfr": None, "invariant": 5}  # per prompt; None = every block
#: prompts (of seed 0) on which the compensator is evaluated
THEORY_PROMPTS = {False: 50, True: 4}
STYLE = {d: decoder_style(d) for d in DECODERS}
PARAMS = (
    Param("B", "ints", B_FULL, B_QUICK, f"numbers of drafts (at most {wc.MAX_B})", low=1,
          high=wc.MAX_B),
    Param("L", "int", L, L, f"lookahead (at most {wc.MAX_L})", low=1, high=wc.MAX_L),
    *wc.settings_params(wc.FULL, wc.QUICK),
    Param("theory_prompts", "int", THEORY_PROMPTS[False], THEORY_PROMPTS[True],
          "prompts of the exact-acceptance theory (at most --prompts; the default is cut "
          "to it)", low=1, check=wc.at_most("theory_prompts", "prompts", given_only=True)),
)


def settings(quick: bool, **params) -> wc.Settings:
    v = resolve_params(PARAMS, quick, params)
    base = wc.with_params(wc.QUICK if quick else wc.FULL, v)
    return wc.with_extra(base, L=v.L, theory_blocks_invariant=THEORY_BLOCKS["invariant"],
                         n_theory_prompts=v.theory_prompts)


def _decoder_at(s, target, draft, decoder, B, H):
    """Every seed of one (decoder, B): the summary row and the per-prompt arrays."""
    L = dict(s.extra)["L"]
    P = s.prompt_set().tokens
    n = len(P)
    st = {"tokens": np.zeros(n), "blocks": np.zeros(n), "anlppt_u": np.zeros(n),
          "anlppt_aaronson": np.zeros(n)}
    tc = dc = 0
    first = None
    for k, key, seeds in s.runs():
        res = wc.decode(target, draft, P, seeds, decoder, L=L, B=B, key=key,
                        max_new_tokens=s.max_new_tokens)
        first = res if k == 0 else first
        st["tokens"] += [r.emitted_per_block.sum() for r in res]
        st["blocks"] += [r.emitted_per_block.size for r in res]
        st["anlppt_u"] += detect_many(res, key, score="u", method="chernoff").anlppt
        st["anlppt_aaronson"] += detect_many(res, key, score="aaronson").anlppt
        tc += sum(r.n_target_contexts for r in res)
        dc += sum(r.n_draft_contexts for r in res)
    for f in ("anlppt_u", "anlppt_aaronson"):
        st[f] /= s.n_seeds
    st["lppl"] = np.array([log_perplexity(target, r) for r in first])
    # compensator on the first prompts of seed 0 (first blocks only for GLS)
    limit = THEORY_BLOCKS[decoder]
    t, d = CachedLM(target), CachedLM(draft)
    diff, nblk, a_first = [], [], []
    for r in first[:dict(s.extra)["n_theory_prompts"]]:
        nb = r.emitted_per_block.size
        blocks = None if limit is None else {(0, b) for b in range(min(limit, nb))}
        c = acceptance_compensator(r, t, d, blocks=blocks)
        diff.append(float((c["accepted"] - c["predicted"]).sum()))
        nblk.append(len(c))
        a_first += list(c["a_first"])
        t.clear()
        d.clear()
    aatps, aatps_se, _ = wc.ratio_stats(st["tokens"], st["blocks"])
    dd, dd_se, _ = wc.ratio_stats(diff, nblk)
    a_B = float(np.mean(a_first))
    u, u_se = wc.prompt_mean_se(st["anlppt_u"])
    aa, aa_se = wc.prompt_mean_se(st["anlppt_aaronson"])
    lp, lp_se = wc.prompt_mean_se(st["lppl"])
    nblocks = int(st["blocks"].sum())
    row = {
        "decoder": decoder, "L": L, "B": B, "n_prompts": n,
        "n_tokens": int(st["tokens"].sum()), "n_blocks": nblocks,
        "aatps": aatps, "aatps_se": aatps_se,
        "theory_aatps": aatps - dd, "theory_diff": dd, "theory_diff_se": dd_se,
        "theory_z": wc.z_score(dd, dd_se), "n_theory_prompts": len(diff),
        "n_theory_blocks": int(sum(nblk)),
        "acceptance_first": a_B, "naive_aatps": block_efficiency(a_B, L),
        "anlppt_u": u, "anlppt_u_se": u_se, "anlppt_aaronson": aa,
        "anlppt_aaronson_se": aa_se, "lppl": lp, "lppl_se": lp_se,
        "target_contexts_per_block": tc / nblocks,
        "draft_contexts_per_block": dc / nblocks,
        "mean_entropy_nats": H, **s.columns(),
    }
    return row, st


def worker(arg) -> list[dict]:
    """Both decoders at one B, every seed (arg = (settings, B, out_dir, config)); keeps the
    per-prompt arrays beside the CSV."""
    s, B, out_dir, config = arg
    cpu0 = time.process_time()
    target, draft = wc.make_models(s)
    H = target.mean_entropy(n_contexts=500, seed=s.run_seed)
    rows, stats = [], {}
    for d in DECODERS:
        row, st = _decoder_at(s, target, draft, d, B, H)
        rows.append(row)
        stats[f"{d}|{B}"] = st
    wc.save_prompt_stats(out_dir, NAME, s.signature(), config, stats)
    return wc.with_task_cpu(rows, cpu0)


def comparisons(stats: dict, s: wc.Settings, Bs) -> list[dict]:
    """MPFR - INVARIANT per B (AATPS, ANLPPT-U, LPPL) and MPFR's ANLPPT-U across B, paired."""
    L = dict(s.extra)["L"]
    rows = []
    Bs = sorted(B for B in Bs if f"mpfr|{B}" in stats and f"invariant|{B}" in stats)
    for B in Bs:
        m, g = stats[f"mpfr|{B}"], stats[f"invariant|{B}"]
        rows.append(wc.comparison_row("mpfr-invariant", "aatps", "mpfr", "invariant",
                                      wc.paired_ratio_diff(m, g), L=L, B=B,
                                      n_seeds=s.n_seeds))
        for metric in ("anlppt_u", "lppl"):
            rows.append(wc.comparison_row("mpfr-invariant", metric, "mpfr", "invariant",
                                          wc.paired_mean_diff(m[metric], g[metric]), L=L, B=B,
                                          n_seeds=1 if metric == "lppl" else s.n_seeds))
    if Bs:
        ref = stats[f"mpfr|{Bs[0]}"]
        for B in Bs[1:]:
            rows.append(wc.comparison_row(f"mpfr[B={B}]-mpfr[B={Bs[0]}]", "anlppt_u", "mpfr",
                                          "mpfr", wc.paired_mean_diff(
                                              stats[f"mpfr|{B}"]["anlppt_u"], ref["anlppt_u"]),
                                          L=L, B=B, n_seeds=s.n_seeds))
    return rows


def compute(out_dir, quick: bool = False, executor=None, progress: bool = True, **params
            ) -> pd.DataFrame:
    s = settings(quick, **params)
    Bs = resolve_params(PARAMS, quick, params).B
    store = wc.ResumableCSV(out_path(out_dir, f"{NAME}.csv"), s.signature())
    # largest B first (the costliest), so that the 2-process pool ends with the short tasks
    configs = [(f"B{B}", (s, B, str(out_dir), f"B{B}")) for B in sorted(Bs, reverse=True)]
    df = wc.study_sweep(configs, worker, store, quick=quick, executor=executor, desc=NAME,
                        progress=progress)
    stats = wc.load_prompt_stats(out_dir, NAME, s.signature())
    wc.write_comparisons(out_dir, NAME, comparisons(stats, s, Bs))
    return df.sort_values(["decoder", "B"], ascending=[False, True]).reset_index(drop=True)


def table(df: pd.DataFrame) -> str:
    """Markdown table in the layout of the paper's Table 1 (plus theory and ANLPPT columns)."""
    L = int(df["L"].iloc[0])
    lines = [
        f"Multi-draft scaling, L = {L}, synthetic LM (vocab {int(df['vocab_size'].iloc[0])}, "
        f"mean entropy {df['mean_entropy_nats'].iloc[0]:.2f} nats, "
        f"{int(df['n_prompts'].iloc[0])} prompts x {int(df['max_new_tokens'].iloc[0])} tokens x "
        f"{int(df['n_seeds'].iloc[0])} seeds).",
        "",
        "| decoder | B | AATPS (sim ± se) | theory | diff (z) | naive i.i.d. | ANLPPT-U |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for _, r in df.iterrows():
        lines.append(
            f"| {r['decoder'].upper()} | {int(r['B'])} | {r['aatps']:.3f} ± {r['aatps_se']:.3f} "
            f"| {r['theory_aatps']:.3f} | {r['theory_diff']:+.3f} ({r['theory_z']:+.2f}) "
            f"| {r['naive_aatps']:.3f} | {r['anlppt_u']:.4f} |"
        )
    mp = df[df["decoder"] == "mpfr"]["anlppt_u"]
    if len(mp):
        lines += ["", f"max |ΔANLPPT-U| of MPFR across B: {mp.max() - mp.min():.2e}"]
    return "\n".join(lines) + "\n"


def plot(df: pd.DataFrame, path: Path) -> None:
    plt = setup_matplotlib()
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 4.0))
    for d in DECODERS:
        sub = df[df["decoder"] == d].sort_values("B")
        if sub.empty:
            continue
        color, marker = STYLE[d]
        lab = d.upper()
        ax.errorbar(sub["B"], sub["aatps"], yerr=sub["aatps_se"], color=color, marker=marker,
                    capsize=3, label=f"{lab} simulated")
        ax.plot(sub["B"], sub["theory_aatps"], color=color, ls="--", marker=marker, mfc="none",
                ms=10, label=f"{lab} theory (exact acceptance along block)")
        ax.plot(sub["B"], sub["naive_aatps"], color=color, ls=":", lw=1.2,
                label=f"{lab} naive block_efficiency(a_B)")
        bx.errorbar(sub["B"], sub["anlppt_u"], yerr=sub["anlppt_u_se"], color=color,
                    marker=marker, capsize=3, label=lab)
    ax.set_xlabel("number of drafts B")
    ax.set_ylabel(f"AATPS (L = {int(df['L'].iloc[0])})")
    ax.set_title("Accepted tokens per step", fontsize=10)
    ax.legend(fontsize=7)
    bx.set_xlabel("number of drafts B")
    bx.set_ylabel("ANLPPT-U (Chernoff)")
    bx.set_title("Watermark strength across B", fontsize=10)
    bx.axhline(0, color="k", lw=0.6)
    bx.legend(fontsize=8)
    for a in (ax, bx):  # B is a number of drafts: integer ticks only
        integer_ticks(a, df["B"])
    fig.savefig(path)
    plt.close(fig)


def main(out_dir, quick: bool = False, **params) -> list[Path]:
    """Run (or resume) the sweep; write the CSV, the markdown table and the PNG."""
    df = compute(out_dir, quick=quick, **params)
    paths = wc.write_outputs(out_dir, NAME, df, plot, table)
    return paths + [out_path(out_dir, f"{NAME}_comparisons.csv")]


if __name__ == "__main__":
    from paper_figs._cli import cli

    cli(main, __doc__, PARAMS, NAME)
