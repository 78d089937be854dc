"""Single-draft efficiency/watermark frontier (Fig. 1, §6 and App. D.3 of Liu, Wan, Gao & Gündüz
2026, arXiv:2609.21858).

Every single-draft decoder of :func:`specbound.sim.decode.speculative_decode` in the
(AATPS, ANLPPT-U) plane for lookahead L = 1, 2, 3, 4: ``vsps``, ``pfr_nowm``, ``pfr``,
``mws``, ``mse``, ``mse_pseudo``, and ``basic_uwm`` (no speculation, one point at AATPS = 1).

Settings (``paper_figs._wm_common``): target ``SyntheticLM(1000, context_length=2,
seed=2026, T=1)``, mean next-token entropy ~2.6 nats (measured, column
``mean_entropy_nats``); drafter D0 = ``target.draft(0.3, seed=1)``; the paper's scale: 1,000
prompts of 4 uniform tokens x 128 new tokens x 3 seeds (seed ``k``: own key and unkeyed
seeds, ``Settings.runs``); keyed labels over the whole prefix.  ``--quick``: vocabulary 200,
4 prompts x 12 tokens x 2 seeds.

Metrics per (decoder, L):

- AATPS = emitted tokens / blocks over all prompts and seeds, with the delta-method standard
  error over prompts (a prompt's seeds pooled: ``paper_figs._wm_common`` "Standard errors");
- ``theory_aatps``: the same with every block's accepted drafts replaced by the exact
  per-context acceptance summed along the block (:func:`specbound.sim.acceptance_compensator`:
  ``1 - TV`` for vsps/mse/mse_pseudo, the exponential race for pfr/pfr_nowm/mws), evaluated on
  the first ``n_theory_prompts`` prompts of seed 0 (a selection by index: unbiased), and
  ``theory_z`` = (simulated - theory) / its standard error over those prompts;
- ANLPPT-U = ``-log p / M`` per sequence with the U-score's Chernoff p-value bound
  (App. E.1 of the paper, its ANLPPT-U), mean and standard error over prompts; also the
  exact Irwin-Hall version (``anlppt_u_exact``) and Aaronson's (``anlppt_aaronson``).  The
  pivots are recomputed by the detector (:func:`specbound.sim.detect_many`) from tokens and
  key only, so unkeyed decoders (vsps, pfr_nowm) show the null level (ANLPPT ~ 0);
- LPPL (:func:`specbound.sim.log_perplexity`): mean -log p_target(w_t) of the emitted tokens
  on seed 0 (unbiasedness audit: every decoder is lossless, so all LPPL agree within noise;
  its expectation is the mean entropy of the visited contexts).

Hu & Huang 2024's setting (rows ``variant = "hh_window3_skip"``, L = 4, seed 0 only, the
first ``n_hh_prompts`` prompts): ``pfr``, ``mws``, ``mws`` with their gamma reweighting
(``decoder = mws``, ``reweight = gamma``), ``mse`` and ``mse_pseudo`` with a 3-token
watermark window and repeated windows skipped (``repeats="skip"``: vanilla speculative
sampling with unkeyed coins there, not scored), next to the default rows (``variant =
"default"``: whole-prefix labels).  These options run in the compiled batch decoder too.

Comparisons (``wm_single_draft_frontier_comparisons.csv``, one row per difference, paired by
prompt, with ``diff_se`` and ``z``): at each L, PFR minus PFR-NOWM, VSpS, MWS, MSE and
MSE-PSEUDO in AATPS and in ANLPPT-U (Fig. 1); every decoder's LPPL minus BASIC-UWM's; and in
Hu & Huang's setting PFR minus MWS (both reweightings), MSE and MSE-PSEUDO, and each decoder
in that setting minus its default.

``basic_uwm`` has no lookahead (row ``L = 0``).  ``mws`` coincides token for token with
``pfr`` in this package (DeltaGumbel reweight, see :mod:`specbound.sim.decode`), so its points
lie on PFR's; PFR, MWS and BASIC-UWM emit the same keyed chain, hence the same ANLPPT.

Outputs: ``wm_single_draft_frontier.png``, ``.csv`` (one row per decoder, variant and L, with
the settings as columns) and ``_comparisons.csv``.  The CSV is written incrementally (one
sweep task per L) and an interrupted run resumes.

Run: ``python -m paper_figs.wm_single_draft_frontier [--quick] [--out DIR] [--L N,...]
[--vocab N] [--prompts N] [--tokens N] [--seeds N] [--theory-prompts N] [--hh-prompts N]``
(``--help`` for the defaults).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd

from paper_figs import _wm_common as wc
from paper_figs._common import Param, decoder_style, out_path, resolve_params, setup_matplotlib
from specbound.sim import (
    DECODER_SCHEME,
    CachedLM,
    acceptance_compensator,
    detect_many,
    log_perplexity,
)

FIGURE = True
NAME = "wm_single_draft_frontier"
L_VALUES = (1, 2, 3, 4)
#: decoders of every L task (basic_uwm, which has no lookahead, is its own task)
LOOKAHEAD_DECODERS = ("vsps", "pfr_nowm", "pfr", "mws", "mse", "mse_pseudo")
DECODERS = ("basic_uwm",) + LOOKAHEAD_DECODERS
#: Hu & Huang 2024's setting: (label, decoder, options), at L = HH_L on seed 0
HH_L = 4
HH_OPTIONS = {"window": 3, "repeats": "skip"}
HH_RUNS = (("pfr", "pfr", {}), ("mws", "mws", {}), ("mws_gamma", "mws", {"reweight": "gamma"}),
           ("mse", "mse", {}), ("mse_pseudo", "mse_pseudo", {}))
HH_VARIANT = "hh_window3_skip"
#: prompts (of seed 0) on which the compensator (theory_aatps) is evaluated
THEORY_PROMPTS = {False: 50, True: 4}
#: prompts (of seed 0) of Hu & Huang's setting (Python block loop)
HH_PROMPTS = {False: 500, True: 4}
LABEL_OFFSETS = {"pfr": (0, -16), "mse": (0, -13), "vsps": (0, 8)}
STYLE = {d: decoder_style(d) for d in DECODERS}
SCORES = (("anlppt_u", "u", {"method": "chernoff"}), ("anlppt_u_exact", "u", {"method": "exact"}),
          ("anlppt_aaronson", "aaronson", {}))


PARAMS = (
    Param("L", "ints", L_VALUES, L_VALUES, f"lookaheads (at most {wc.MAX_L})", low=1,
          high=wc.MAX_L),
    *wc.settings_params(wc.FULL, wc.QUICK),
    Param("theory_prompts", "int", THEORY_PROMPTS[False], THEORY_PROMPTS[True],
          "prompts of the exact-acceptance theory (at most --prompts; the default is cut "
          "to it)", low=1, check=wc.at_most("theory_prompts", "prompts", given_only=True)),
    Param("hh_prompts", "int", HH_PROMPTS[False], HH_PROMPTS[True],
          f"prompts of Hu & Huang's setting (L = {HH_L}; at most --prompts; the default is "
          "cut to it)", low=1, check=wc.at_most("hh_prompts", "prompts", given_only=True)),
)


def settings(quick: bool, **params) -> wc.Settings:
    v = resolve_params(PARAMS, quick, params)
    base = wc.with_params(wc.QUICK if quick else wc.FULL, v)
    return wc.with_extra(base, n_theory_prompts=v.theory_prompts,
                         n_hh_prompts=v.hh_prompts)


def _run(s, target, draft, decoder, L, runs, n=None, **options):
    """Decode every seed of ``runs`` on the first ``n`` prompts; per-prompt arrays (seeds
    pooled) and the results of seed 0."""
    P = s.prompt_set().tokens[:n]
    m = len(P)
    st = {"tokens": np.zeros(m), "blocks": np.zeros(m)}
    st.update({name: np.zeros(m) for name, _, _ in SCORES})
    first = None
    for k, key, seeds in runs:
        res = wc.decode(target, draft, P, seeds[:m], decoder, L=max(L, 1), key=key,
                        max_new_tokens=s.max_new_tokens, **options)
        if k == 0:
            first = res
        st["tokens"] += [r.emitted_per_block.sum() for r in res]
        st["blocks"] += [r.emitted_per_block.size for r in res]
        for name, score, kw in SCORES:
            st[name] += detect_many(res, key, score=score, **kw).anlppt
    for name, _, _ in SCORES:
        st[name] /= len(runs)
    st["lppl"] = np.array([log_perplexity(target, r) for r in first])
    st["tokens0"] = np.array([r.emitted_per_block.sum() for r in first], dtype=float)
    st["blocks0"] = np.array([r.emitted_per_block.size for r in first], dtype=float)
    return st, first


def _theory(decoder, first, target, draft, n):
    """Compensator on the first ``n`` results: per-prompt (accepted - predicted), blocks and
    accepted / decisions."""
    if decoder not in DECODER_SCHEME:
        return None
    t, d = CachedLM(target), CachedLM(draft)
    diff, blocks, acc, dec = [], [], 0, 0
    for r in first[:n]:
        c = acceptance_compensator(r, t, d)
        diff.append(float((c["accepted"] - c["predicted"]).sum()))
        blocks.append(len(c))
        acc += int(c["accepted"].sum())
        dec += int(c["n_decisions"].sum())
        t.clear()
        d.clear()
    return np.array(diff), np.array(blocks, dtype=float), acc / dec


def _row(decoder, L, variant, st, th, s, entropy, options) -> dict:
    aatps, aatps_se, _ = wc.ratio_stats(st["tokens"], st["blocks"])
    n_seeds = s.n_seeds if variant == "default" else 1
    row = {**s.columns(), "decoder": decoder, "variant": variant, "L": L, "B": 1,
           "reweight": options.get("reweight", "delta"),
           "window_used": options.get("window", "prefix"),
           "repeats": options.get("repeats", "reuse"), "n_prompts": len(st["tokens"]),
           "n_seeds_used": n_seeds, "n_tokens": int(st["tokens"].sum()),
           "n_blocks": int(st["blocks"].sum()), "aatps": aatps, "aatps_se": aatps_se}
    if th is not None:
        diff, blocks, rate = th
        d, d_se, _ = wc.ratio_stats(diff, blocks)
        row.update(theory_aatps=aatps - d, theory_diff=d, theory_diff_se=d_se,
                   theory_z=wc.z_score(d, d_se), n_theory_prompts=len(diff),
                   acceptance_rate=rate)
    elif decoder == "basic_uwm":
        row.update(theory_aatps=1.0, theory_diff=0.0, theory_diff_se=float("nan"),
                   theory_z=float("nan"), n_theory_prompts=0, acceptance_rate=float("nan"))
    for name, _, _ in SCORES:
        row[name], row[name + "_se"] = wc.prompt_mean_se(st[name])
    row["lppl"], row["lppl_se"] = wc.prompt_mean_se(st["lppl"])
    row["mean_entropy_nats"] = entropy
    return row


def worker(arg) -> list[dict]:
    """One sweep task: ``("L", L)`` (every lookahead decoder at L, all seeds),
    ``("basic_uwm",)`` or ``("hh",)`` (Hu & Huang's setting).  Keeps the per-prompt arrays
    beside the CSV (``_wm_common.save_prompt_stats``) and returns the summary rows."""
    s, task, out_dir, config = arg
    cpu0 = time.process_time()
    target, draft = wc.make_models(s)
    H = target.mean_entropy(n_contexts=500, seed=s.run_seed)
    ex = dict(s.extra)
    runs = s.runs()
    rows, stats = [], {}
    if task[0] == "L":
        L = task[1]
        for d in LOOKAHEAD_DECODERS:
            st, first = _run(s, target, draft, d, L, runs)
            th = _theory(d, first, target, draft, ex["n_theory_prompts"])
            rows.append(_row(d, L, "default", st, th, s, H, {}))
            stats[f"{d}|{L}|default"] = st
    elif task[0] == "basic_uwm":
        st, _ = _run(s, target, draft, "basic_uwm", 0, runs)
        rows.append(_row("basic_uwm", 0, "default", st, None, s, H, {}))
        stats["basic_uwm|0|default"] = st
    else:
        n = ex["n_hh_prompts"]
        for label, d, opts in HH_RUNS:
            o = {**HH_OPTIONS, **opts}
            st, first = _run(s, target, draft, d, HH_L, runs[:1], n=n, **o)
            gamma = o.get("reweight") == "gamma"  # no closed-form acceptance (docs)
            th = None if gamma else _theory(d, first, target, draft,
                                            min(n, ex["n_theory_prompts"]))
            rows.append(_row(d, HH_L, HH_VARIANT, st, th, s, H, o))
            stats[f"{label}|{HH_L}|{HH_VARIANT}"] = st
    wc.save_prompt_stats(out_dir, NAME, s.signature(), config, stats)
    return wc.with_task_cpu(rows, cpu0)


def comparisons(stats: dict, s: wc.Settings, L_VALUES=L_VALUES) -> list[dict]:
    """Every difference the paper draws from Fig. 1, paired by prompt (module docstring)."""
    rows = []

    def get(label, L, variant="default"):
        return stats.get(f"{label}|{L}|{variant}")

    L_VALUES = sorted(L_VALUES)
    for L in L_VALUES:
        a = get("pfr", L)
        if a is None:
            continue
        for b in ("pfr_nowm", "vsps", "mws", "mse", "mse_pseudo"):
            B_ = get(b, L)
            if B_ is None:
                continue
            rows.append(wc.comparison_row(f"pfr-{b}", "aatps", "pfr", b,
                                          wc.paired_ratio_diff(a, B_), L=L,
                                          variant="default", n_seeds=s.n_seeds))
            rows.append(wc.comparison_row(f"pfr-{b}", "anlppt_u", "pfr", b,
                                          wc.paired_mean_diff(a["anlppt_u"], B_["anlppt_u"]),
                                          L=L, variant="default", n_seeds=s.n_seeds))
    ref = get("basic_uwm", 0)
    if ref is not None:
        for L in L_VALUES:
            for d in LOOKAHEAD_DECODERS:
                x = get(d, L)
                if x is not None:
                    rows.append(wc.comparison_row(f"{d}-basic_uwm", "lppl", d, "basic_uwm",
                                                  wc.paired_mean_diff(x["lppl"], ref["lppl"]),
                                                  L=L, variant="default", n_seeds=1))
    hp = get("pfr", HH_L, HH_VARIANT)
    if hp is not None:
        n = len(hp["tokens"])
        for b in ("mws", "mws_gamma", "mse", "mse_pseudo"):
            x = get(b, HH_L, HH_VARIANT)
            rows.append(wc.comparison_row(f"pfr-{b}", "aatps", "pfr", b,
                                          wc.paired_ratio_diff(hp, x), L=HH_L,
                                          variant=HH_VARIANT, n_seeds=1))
            rows.append(wc.comparison_row(f"pfr-{b}", "anlppt_u", "pfr", b,
                                          wc.paired_mean_diff(hp["anlppt_u"], x["anlppt_u"]),
                                          L=HH_L, variant=HH_VARIANT, n_seeds=1))
        for label, d, _ in HH_RUNS:
            x, dflt = get(label, HH_L, HH_VARIANT), get(d, HH_L)
            if dflt is None:
                continue
            d0 = {"tokens": dflt["tokens0"][:n], "blocks": dflt["blocks0"][:n]}
            rows.append(wc.comparison_row(f"{label}[hh]-{d}", "aatps", f"{label}[hh]", d,
                                          wc.paired_ratio_diff(x, d0), L=HH_L,
                                          variant=HH_VARIANT, n_seeds=1))
    return rows


def compute(out_dir, quick: bool = False, executor=None, progress: bool = True, **params
            ) -> pd.DataFrame:
    s = settings(quick, **params)
    L_VALUES = resolve_params(PARAMS, quick, params).L
    store = wc.ResumableCSV(out_path(out_dir, f"{NAME}.csv"), s.signature())
    # costliest first (the cost of an L task grows with L; Hu & Huang's setting and BASIC-UWM
    # are the cheapest), so that the 2-process pool ends with the short tasks
    Ls = sorted(L_VALUES, reverse=True)
    tasks = [("L", L) for L in Ls] + [("hh",), ("basic_uwm",)]
    names = [f"L{L}" for L in Ls] + ["hh", "basic_uwm"]
    configs = [(n, (s, t, str(out_dir), n)) for n, t in zip(names, tasks, strict=True)]
    df = wc.study_sweep(configs, worker, store, quick=quick, executor=executor, desc=NAME,
                        progress=progress)
    stats = wc.load_prompt_stats(out_dir, NAME, s.signature())
    wc.write_comparisons(out_dir, NAME, comparisons(stats, s, L_VALUES))
    return df


def plot(df: pd.DataFrame, path: Path) -> None:
    plt = setup_matplotlib()
    fig, ax = plt.subplots(figsize=(8.4, 4.6))
    base = df[df["variant"] == "default"] if "variant" in df else df
    for d in DECODERS:
        sub = base[base["decoder"] == d].sort_values("L")
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
    hh = df[df["variant"] == HH_VARIANT] if "variant" in df else df.iloc[:0]
    for _, r in hh.iterrows():
        color, marker = STYLE[r["decoder"]]
        gamma = r["reweight"] == "gamma"
        ax.errorbar([r["aatps"]], [r["anlppt_u"]], xerr=[r["aatps_se"]], yerr=[r["anlppt_u_se"]],
                    color=color, marker=marker, ms=9, mfc="white", mec=color, mew=1.2,
                    ls="none", capsize=2, alpha=0.8,
                    label=(f"{r['decoder'].upper().replace('_', '-')}"
                           f"{' (γ)' if gamma else ''}, window 3 + skip, L={HH_L}"))
    H = df["mean_entropy_nats"].iloc[0]
    ax.set_xlabel("AATPS (accepted tokens per step)")
    ax.set_ylabel("ANLPPT-U (Chernoff)")
    ax.set_title(f"Single-draft frontier, synthetic LM (n={int(df['vocab_size'].iloc[0])}, "
                 f"H≈{H:.2f} nats, {int(df['n_prompts'].max())} prompts x "
                 f"{int(df['max_new_tokens'].iloc[0])} tokens x {int(df['n_seeds'].iloc[0])} "
                 "seeds)", fontsize=9)
    ax.axhline(0, color="k", lw=0.6)
    ax.text(1.02, 0.0, "points left to right:\nL = 1, 2, 3, 4\n(BASIC-UWM: no drafts)",
            transform=ax.transAxes, ha="left", va="bottom", fontsize=7, color="0.3")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.savefig(path)
    plt.close(fig)


def main(out_dir, quick: bool = False, **params) -> list[Path]:
    """Run (or resume) the sweep, write the CSVs and the PNG into ``out_dir``."""
    df = compute(out_dir, quick=quick, **params)
    paths = wc.write_outputs(out_dir, NAME, df, plot)
    return paths + [out_path(out_dir, f"{NAME}_comparisons.csv")]


if __name__ == "__main__":
    from paper_figs._cli import cli

    cli(main, __doc__, PARAMS, NAME)
