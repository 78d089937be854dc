"""Multi-draft scaling: MPFR vs INVARIANT (GLS) at L = 4 (Table 1 and App. D.4 of Liu, Wan, Gao
& Gündüz 2026, arXiv:2609.21858).

AATPS of ``mpfr`` (keyed multi-draft Poisson sampling, Alg. 4/10) and ``invariant`` (list
coupling / GLS of Rowan et al. 2025, unkeyed) for B in {2, 4, 6, 8} (and B = 1 as a
reference: MPFR with B = 1 is PFR), lookahead L = 4, with two theory predictions next to the
simulated value, and ANLPPT-U across B.

Settings (``paper_figs._wm_common``): target ``SyntheticLM(1000, context_length=2,
seed=2026, T=1)`` (mean entropy ~2.6 nats, measured: ``mean_entropy_nats``), drafter D0 =
``target.draft(0.3, seed=1)``, 100 prompts x 64 new tokens, one key, whole-prefix labels.
``--quick``: vocabulary 200, 3 prompts x 12 tokens, B in {1, 2, 4}.

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
    independence assumption; ``theory_z`` is (simulated - theory) / its standard error over the
    per-block differences.  The GLS quadrature is costly, so for ``invariant`` it is evaluated
    on the first ``theory_blocks`` blocks of every prompt (a selection by index, hence still
    unbiased); ``n_theory_blocks`` says how many.
``naive_aatps`` (i.i.d. depth approximation)
    ``block_efficiency(a_B, L) = (1 - a_B^{L+1}) / (1 - a_B)`` with ``a_B`` the mean over the
    visited block-start contexts of the acceptance with all B drafts.  It assumes B drafts stay
    consistent at every depth and ignores the Jensen gap, so it overestimates for B > 1 (the
    drafts that survive an acceptance are fewer than B); shown to make that effect visible.

ANLPPT-U: U-score with the Chernoff p-value (paper's ANLPPT-U), mean over prompts.  MPFR
emits the keyed target chain whatever B is (Prop. C.3), so its ANLPPT is identical across B;
INVARIANT carries no watermark (null level).

Outputs: ``wm_multidraft_scaling.png``, ``.csv`` (one row per decoder and B; settings as
columns) and ``wm_multidraft_scaling.md`` (Table 1 layout).  Incremental and resumable.

Run: ``python -m paper_figs.wm_multidraft_scaling [--quick] [--out DIR]``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from paper_figs import _wm_common as wc
from paper_figs._common import DECODER_STYLE, cli, out_path, setup_matplotlib
from specbound.sim import (
    CachedLM,
    acceptance_compensator,
    cluster_ratio_se,
    keyed_pivots,
    log_perplexity,
    mean_se,
    speculative_decode_batch,
)
from specbound.theory import block_efficiency
from specbound.theory.watermark import anlppt

FIGURE = True
NAME = "wm_multidraft_scaling"
L = 4
B_FULL = (1, 2, 4, 6, 8)
B_QUICK = (1, 2, 4)
DECODERS = ("mpfr", "invariant")
THEORY_BLOCKS = {"mpfr": None, "invariant": 5}  # per prompt; None = every block
STYLE = {d: DECODER_STYLE[d] for d in DECODERS}


def settings(quick: bool) -> wc.Settings:
    base = wc.QUICK if quick else wc.FULL
    return wc.with_extra(base, L=L, theory_blocks_invariant=THEORY_BLOCKS["invariant"])


def worker(arg) -> list[dict]:
    """All B for one decoder (arg = (settings, decoder, Bs)); B share one model cache."""
    s, decoder, Bs = arg
    target0, draft0 = wc.make_models(s)
    target, draft = CachedLM(target0), CachedLM(draft0)
    ps = s.prompt_set()
    limit = THEORY_BLOCKS[decoder]
    acc = {B: {"res": [], "comp": [], "lppl": [], "tc": 0, "dc": 0} for B in Bs}
    # every prompt of one B in one compiled call (prompt i with ps.seeds[i])
    batches = {B: speculative_decode_batch(target, draft, ps, decoder, L=L, B=B, key=s.key,
                                           max_new_tokens=s.max_new_tokens, seed=ps.seeds,
                                           parallel=False)
               for B in Bs}
    for i in range(len(ps)):
        for B in Bs:
            r = batches[B][i]
            nb = r.emitted_per_block.size
            blocks = None if limit is None else {(0, b) for b in range(min(limit, nb))}
            comp = acceptance_compensator(r, target, draft, blocks=blocks)
            comp["prompt"] = i
            full = pd.DataFrame({"prompt": i, "emitted": r.emitted_per_block})
            a = acc[B]
            a["res"].append(r)
            a["comp"].append((full, comp))
            a["lppl"].append(log_perplexity(target, r))
            a["tc"] += r.n_target_contexts
            a["dc"] += r.n_draft_contexts
        target.clear()
        draft.clear()
    H = target0.mean_entropy(n_contexts=500, seed=s.run_seed)
    rows = []
    for B in Bs:
        a = acc[B]
        full = pd.concat([f for f, _ in a["comp"]], ignore_index=True)
        comp = pd.concat([c for _, c in a["comp"]], ignore_index=True)
        per = full.groupby("prompt")["emitted"].agg(["sum", "size"])
        ratio = cluster_ratio_se(per["sum"], per["size"])
        diff = mean_se(comp["accepted"] - comp["predicted"])
        d, d_se = diff.mean, diff.stderr
        a_B = float(comp["a_first"].mean())
        U = np.array([keyed_pivots(r, s.key).pivots for r in a["res"]])
        u = mean_se(np.atleast_1d(anlppt(U, "u", method="chernoff")))
        aa = mean_se(np.atleast_1d(anlppt(U, "aaronson")))
        lp = mean_se(a["lppl"])
        rows.append({
            "decoder": decoder, "L": L, "B": B, "n_prompts": len(ps),
            "n_tokens": int(full["emitted"].sum()), "n_blocks": len(full),
            "aatps": ratio.mean, "aatps_se": ratio.stderr,
            "theory_aatps": ratio.mean - d, "theory_diff": d, "theory_diff_se": d_se,
            "theory_z": d / d_se if d_se > 0 else float("nan"),
            "n_theory_blocks": len(comp),
            "acceptance_first": a_B, "naive_aatps": block_efficiency(a_B, L),
            "anlppt_u": u.mean, "anlppt_u_se": u.stderr, "anlppt_aaronson": aa.mean,
            "anlppt_aaronson_se": aa.stderr, "lppl": lp.mean, "lppl_se": lp.stderr,
            "target_contexts_per_block": a["tc"] / len(full),
            "draft_contexts_per_block": a["dc"] / len(full),
            "mean_entropy_nats": H, **s.columns(),
        })
    return rows


def compute(out_dir, quick: bool = False, executor=None, progress: bool = True) -> pd.DataFrame:
    s = settings(quick)
    Bs = B_QUICK if quick else B_FULL
    store = wc.ResumableCSV(out_path(out_dir, f"{NAME}.csv"), s.signature())
    configs = [(d, (s, d, Bs)) for d in DECODERS]
    df = wc.study_sweep(configs, worker, store, quick=quick, executor=executor, desc=NAME,
                        progress=progress)
    return df.sort_values(["decoder", "B"], ascending=[False, True]).reset_index(drop=True)


def table(df: pd.DataFrame) -> str:
    """Markdown table in the layout of the paper's Table 1 (plus theory and ANLPPT columns)."""
    lines = [
        f"Multi-draft scaling, L = {L}, synthetic LM (vocab {int(df['vocab_size'].iloc[0])}, "
        f"mean entropy {df['mean_entropy_nats'].iloc[0]:.2f} nats, "
        f"{int(df['n_prompts'].iloc[0])} prompts x {int(df['max_new_tokens'].iloc[0])} tokens).",
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
    ax.set_ylabel(f"AATPS (L = {L})")
    ax.set_title("Accepted tokens per step", fontsize=10)
    ax.legend(fontsize=7)
    bx.set_xlabel("number of drafts B")
    bx.set_ylabel("ANLPPT-U (Chernoff)")
    bx.set_title("Watermark strength across B", fontsize=10)
    bx.axhline(0, color="k", lw=0.6)
    bx.legend(fontsize=8)
    fig.savefig(path)
    plt.close(fig)


def main(out_dir, quick: bool = False) -> list[Path]:
    """Run (or resume) the sweep; write the CSV, the markdown table and the PNG."""
    df = compute(out_dir, quick=quick)
    return wc.write_outputs(out_dir, NAME, df, plot, table)


if __name__ == "__main__":
    cli(main, __doc__)
