"""Single-draft efficiency/watermark frontier (Fig. 1, §6 and App. D.3 of Liu, Wan, Gao & Gündüz
2026, arXiv:2609.21858).

Every single-draft decoder of :func:`specbound.sim.decode.speculative_decode` in the
(AATPS, ANLPPT-U) plane for lookahead L = 1, 2, 3, 4: ``vsps``, ``pfr_nowm``, ``pfr``,
``mws``, ``mse``, ``mse_pseudo``, and ``basic_uwm`` (no speculation, one point at AATPS = 1).

Settings (``paper_figs._wm_common``): target ``SyntheticLM(1000, context_length=2,
seed=2026, T=1)``, mean next-token entropy ~2.6 nats (measured, column
``mean_entropy_nats``); drafter D0 = ``target.draft(0.3, seed=1)``; 100 prompts of 4 uniform
tokens, 64 new tokens each; one watermark key; keyed labels over the whole prefix.
``--quick``: vocabulary 200, 3 prompts x 12 tokens.

Metrics per (decoder, L):

- AATPS = emitted tokens / blocks, with a cluster-robust standard error (clusters = prompts);
- ``theory_aatps``: the same with every block's accepted drafts replaced by the exact
  per-context acceptance summed along the block (:func:`specbound.sim.acceptance_compensator`:
  ``1 - TV`` for vsps/mse/mse_pseudo, the exponential race for pfr/pfr_nowm/mws), and
  ``theory_z`` = (simulated - theory) in standard errors of the per-block differences;
- ANLPPT-U = ``-log p / M`` per sequence with the U-score's Chernoff p-value bound
  (App. E.1 of the paper, its ANLPPT-U), mean and standard error over prompts; also the
  exact Irwin-Hall version (``anlppt_u_exact``) and Aaronson's (``anlppt_aaronson``).  The
  pivots are recomputed by the detector from tokens and key only, so unkeyed decoders
  (vsps, pfr_nowm) show the null level (ANLPPT ~ 0);
- LPPL (:func:`specbound.sim.log_perplexity`): mean -log p_target(w_t) of the emitted tokens
  (unbiasedness audit: every decoder is
  lossless, so all LPPL agree within noise; its expectation is the mean entropy of the
  visited contexts).

``basic_uwm`` has no lookahead (row ``L = 0``).  ``mws`` coincides token for token with
``pfr`` in this package (DeltaGumbel reweight, see :mod:`specbound.sim.decode`), so its points
lie on PFR's; PFR, MWS and BASIC-UWM emit the same keyed chain, hence the same ANLPPT.

Outputs: ``wm_single_draft_frontier.png`` and ``.csv`` (one row per decoder and L, with the
settings as columns).  The CSV is written incrementally and an interrupted run resumes.

Run: ``python -m paper_figs.wm_single_draft_frontier [--quick] [--out DIR]``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from paper_figs import _wm_common as wc
from paper_figs._common import DECODER_STYLE, cli, out_path, setup_matplotlib
from specbound.sim import (
    DECODER_SCHEME,
    CachedLM,
    acceptance_compensator,
    cluster_ratio_se,
    keyed_pivots,
    log_perplexity,
    mean_se,
    speculative_decode_batch,
)
from specbound.theory.watermark import anlppt

FIGURE = True
NAME = "wm_single_draft_frontier"
L_VALUES = (1, 2, 3, 4)
#: task groups (decoders in one group share a model cache: same keyed chain / draft paths)
GROUPS = (("vsps",), ("mse", "mse_pseudo"), ("basic_uwm", "pfr", "mws"), ("pfr_nowm",))
DECODERS = ("basic_uwm", "vsps", "pfr_nowm", "pfr", "mws", "mse", "mse_pseudo")
LABEL_OFFSETS = {"pfr": (0, -16), "mse": (0, -13), "vsps": (0, 8)}
STYLE = {d: DECODER_STYLE[d] for d in DECODERS}


def settings(quick: bool) -> wc.Settings:
    return wc.QUICK if quick else wc.FULL


def summarise(decoder, L, results, comp, s: wc.Settings, lppl, entropy) -> dict:
    """One CSV row from the runs of one (decoder, L)."""
    per_prompt = comp.groupby("prompt").agg(tokens=("emitted", "sum"), blocks=("emitted", "size"))
    ratio = cluster_ratio_se(per_prompt["tokens"], per_prompt["blocks"])
    U = np.array([keyed_pivots(r, s.key).pivots for r in results])
    row = {"decoder": decoder, "L": L, "B": 1, "n_prompts": len(results),
           "n_tokens": int(comp["emitted"].sum()), "n_blocks": len(comp),
           "aatps": ratio.mean, "aatps_se": ratio.stderr}
    if decoder in DECODER_SCHEME:
        diff = mean_se(comp["accepted"] - comp["predicted"])
        d, d_se = diff.mean, diff.stderr
        row.update(theory_aatps=ratio.mean - d, theory_diff=d, theory_diff_se=d_se,
                   theory_z=d / d_se if d_se > 0 else float("nan"),
                   acceptance_rate=comp["accepted"].sum() / comp["n_decisions"].sum())
    else:
        row.update(theory_aatps=1.0, theory_diff=0.0, theory_diff_se=float("nan"),
                   theory_z=float("nan"), acceptance_rate=float("nan"))
    for name, score, kw in (("anlppt_u", "u", {"method": "chernoff"}),
                            ("anlppt_u_exact", "u", {"method": "exact"}),
                            ("anlppt_aaronson", "aaronson", {})):
        est = mean_se(np.atleast_1d(anlppt(U, score, **kw)))
        row[name], row[name + "_se"] = est.mean, est.stderr
    est = mean_se(lppl)
    row["lppl"], row["lppl_se"] = est.mean, est.stderr
    row["mean_entropy_nats"] = entropy
    row.update(s.columns())
    return row


def worker(arg) -> list[dict]:
    """Run one decoder group for every L (arg = (settings, decoders))."""
    s, decoders = arg
    target0, draft0 = wc.make_models(s)
    target, draft = CachedLM(target0), CachedLM(draft0)
    ps = s.prompt_set()
    runs = {(d, L): ([], [], []) for d in decoders for L in _Ls(d)}
    # every prompt of one (decoder, L) in one compiled call (prompt i with ps.seeds[i])
    batches = {(d, L): speculative_decode_batch(target, draft, ps, d, L=max(L, 1), key=s.key,
                                                max_new_tokens=s.max_new_tokens,
                                                seed=ps.seeds, parallel=False)
               for d, L in runs}
    for i in range(len(ps)):
        for (d, L), (res, comps, lppl) in runs.items():
            r = batches[(d, L)][i]
            res.append(r)
            if d in DECODER_SCHEME:
                c = acceptance_compensator(r, target, draft)
            else:
                c = pd.DataFrame({"prompt": 0, "emitted": r.emitted_per_block,
                                  "accepted": 0, "n_decisions": 0, "predicted": 0.0})
            c["prompt"] = i
            comps.append(c)
            lppl.append(log_perplexity(target, r))
        target.clear()
        draft.clear()
    H = target0.mean_entropy(n_contexts=500, seed=s.run_seed)
    return [summarise(d, L, res, pd.concat(comps, ignore_index=True), s, lppl, H)
            for (d, L), (res, comps, lppl) in runs.items()]


def _Ls(decoder):
    return (0,) if decoder == "basic_uwm" else L_VALUES


def compute(out_dir, quick: bool = False, executor=None, progress: bool = True) -> pd.DataFrame:
    s = settings(quick)
    store = wc.ResumableCSV(out_path(out_dir, f"{NAME}.csv"), s.signature())
    configs = [("+".join(g), (s, g)) for g in GROUPS]
    df = wc.study_sweep(configs, worker, store, quick=quick, executor=executor, desc=NAME,
                        progress=progress)
    return df


def plot(df: pd.DataFrame, path: Path) -> None:
    plt = setup_matplotlib()
    fig, ax = plt.subplots(figsize=(8.4, 4.6))
    for d in DECODERS:
        sub = df[df["decoder"] == d].sort_values("L")
        if sub.empty:
            continue
        color, marker = STYLE[d]
        big = {"basic_uwm": 14, "pfr": 11}.get(d, 6)
        hollow = d in ("mws", "pfr_nowm")
        label = d.upper().replace("_", "-")
        if d == "mws":
            label += " (= PFR here)"
        ax.errorbar(sub["aatps"], sub["anlppt_u"], xerr=sub["aatps_se"],
                    yerr=sub["anlppt_u_se"], color=color, marker=marker, ms=big,
                    mfc="none" if hollow else color, mew=1.5, lw=1.4, capsize=2, label=label,
                    zorder=3 if d == "mws" else 2)
        if d in LABEL_OFFSETS:
            for _, r in sub.iterrows():
                ax.annotate(f"L={int(r['L'])}", (r["aatps"], r["anlppt_u"]),
                            textcoords="offset points", xytext=LABEL_OFFSETS[d], fontsize=7,
                            color=color, ha="center")
    H = df["mean_entropy_nats"].iloc[0]
    ax.set_xlabel("AATPS (accepted tokens per step)")
    ax.set_ylabel("ANLPPT-U (Chernoff)")
    ax.set_title(f"Single-draft frontier, synthetic LM (n={int(df['vocab_size'].iloc[0])}, "
                 f"H≈{H:.2f} nats)", fontsize=10)
    ax.axhline(0, color="k", lw=0.6)
    ax.text(1.02, 0.0, "points left to right:\nL = 1, 2, 3, 4\n(BASIC-UWM: no drafts)",
            transform=ax.transAxes, ha="left", va="bottom", fontsize=7, color="0.3")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.savefig(path)
    plt.close(fig)


def main(out_dir, quick: bool = False) -> list[Path]:
    """Run (or resume) the sweep, write the CSV and the PNG into ``out_dir``."""
    df = compute(out_dir, quick=quick)
    return wc.write_outputs(out_dir, NAME, df, plot)


if __name__ == "__main__":
    cli(main, __doc__)
