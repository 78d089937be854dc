"""Prompt-lookup (n-gram) drafts on the real embedded model, against the derived draft.

A draft of another family than every derived one: ``ngram:3`` proposes the continuation of
the most recent earlier occurrence of the last 3 tokens in the prompt and the text so far
(``specbound.llm.drafts``; q is a point mass, with B drafts the continuations of the B most
recent distinct occurrences, no model forward; no occurrence: an ``ar`` step).  On the
study's 64 prompts (settings: ``paper_figs._real_runs``: HumanEval, ShareGPT and ShareGPT
summarisation requests, 64 new tokens, temperature 1, top-k 50, whole-prefix keyed labels)
it runs ``vsps`` (L = 4), ``specinfer`` B = 2, ``mpfr`` B = 2 and B = 4 with ``ngram:3``,
beside ``ar`` and ``vsps`` / ``mpfr`` B = 2 with the derived draft D0 (``temperature:1.5``;
those runs are shared with ``real_crosscheck`` in ``real_runs.csv``).

The n-gram draft is the default ``ngram:3``: with its acceptance gate (``specbound.llm.
ngram``: a block drafts only where the running acceptance of the lookup's proposals clears
the break-even of the default verify-cost model; otherwise an ``ar`` step), so its AATPS is
that of a drafter that declines to draft where drafting does not pay.

Per configuration and prompt type: AATPS (tokens per block), the theory's predicted AATPS
(each decision's exact acceptance at its realised context, ``specbound.llm.
decision_acceptance``: for a point-mass draft in ``vsps`` it is ``p`` of the drafted token;
``specinfer`` has no per-context scheme: NaN), target forwards per generated token, the
configuration's generated tokens per CPU second (the whole batched run's process CPU time,
so one value per configuration), the realised acceptance (accepted / decisions; NaN without
decisions) and the exact break-even acceptance of a single-draft block of ``L`` (and of 1)
drafted tokens: the smallest ``a`` with ``1 + a + ... + a^k >= c_k``, ``c_k`` the measured
cost of a ``(k + 1)``-token target forward over a 1-token forward on the first prompt's
cache (median of 7 each, timed in this process: machine-dependent, like tokens per CPU
second).  Keyed rows: ``mpfr`` with ``ngram:3`` (B = 2, 4) against
``mpfr`` B = 2 with D0 under the same key: the share of prompts whose 64 tokens are equal
(drafter invariance of Liu, Wan, Gao & Gündüz 2026, arXiv:2609.21858, Prop. C.3; the two
differ only through float32 rounding of the batched forwards), and the median and largest
detection log10 p-value (``specbound.llm.detect``, whole-prefix labels) of each.
At temperature 0.7 (:data:`T_LOW`; its own store ``real_ngram_t07.csv``; the first third of
each prompt set, 8 prompts per set at full scale, same key and seeds): ``ar``, ``vsps`` and
``mpfr`` B = 4 with ``ngram:3``, the same summary columns plus ``temperature``.

Cost at full scale (an estimate from the quick run's tokens per CPU second, one prompt x 6
tokens on a busy 2-core machine, not a timed full run): relative to ``ar`` the n-gram
configurations cost 0.9-1.1x and ``mpfr`` B = 4 1.3-2.2x, so the four n-gram configurations
at temperature 1 cost about 5.3 ``ar`` configurations of 64 prompts x 64 tokens and the
three at 0.7 (24 prompts) about 1.1, each ``ar`` configuration about a minute on the
reference machine's two workers (the derived-draft rows come from the shared store): about
6.5 minutes in all.  ``--quick``: one ShareGPT prompt of at most 64 tokens, 6 new tokens
(both temperatures).

Outputs: ``real_ngram.csv`` (``config, decoder, B, draft, prompt_type, n_prompts, n_blocks,
aatps, predicted_aatps, target_forwards_per_token, tokens_per_cpu_second, acceptance,
verify_cost_ratio, break_even_acceptance, verify_cost_ratio_1, break_even_acceptance_1``),
``real_ngram_temperature.csv`` (the same columns and ``temperature``, the 0.7 rows),
``real_ngram_keyed.csv`` (``config, reference, same_tokens, n_prompts,
log10_p_median, log10_p_max``), ``real_ngram.png``.

Run: ``python -m paper_figs.real_ngram [--quick] [--out DIR] [--executor SPEC] [--target
MODEL] [--draft SPEC] [--prompts N] [--tokens N] [--prompt-tokens N]``.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from paper_figs import _real_runs as rr
from paper_figs._common import out_path, resolve_params, setup_matplotlib

FIGURE = True
NAME = "real_ngram"
PARAMS = rr.real_params(runs=lambda v: rr.fixed_runs(SPECS)(v))
NGRAM = "ngram:3"
#: the n-gram configurations and the derived-draft ones they are set against (``draft``
#: None: the settings' D0)
SPECS = (rr.RunSpec("ar"), rr.RunSpec("vsps"), rr.RunSpec("mpfr", B=2),
         rr.RunSpec("vsps", draft=NGRAM), rr.RunSpec("specinfer", B=2, draft=NGRAM),
         rr.RunSpec("mpfr", B=2, draft=NGRAM), rr.RunSpec("mpfr", B=4, draft=NGRAM))
TYPES = {"humaneval": "code", "sharegpt": "chat", "sharegpt_summarize": "summaries"}
#: the second temperature, its configurations and its share of the prompts (own store: a
#: store holds one signature); a third of the prompts of each set keeps the study's cost
#: within the reproduction budget
T_LOW = 0.7
SPECS_LOW = (rr.RunSpec("ar"), rr.RunSpec("vsps", draft=NGRAM),
             rr.RunSpec("mpfr", B=4, draft=NGRAM))
LOW_SHARE = 3


def label(spec: rr.RunSpec) -> str:
    if spec.decoder == "ar":
        return "ar"
    b = "" if spec.B == 1 else f" B={spec.B}"
    return f"{spec.decoder}{b} {spec.draft}"


def _predicted(sub: pd.DataFrame, decoder: str) -> float:
    """Realised AATPS minus the mean per-block (accepted - predicted) drafts (NaN for a
    decoder without a per-context scheme; a run without decisions predicts itself)."""
    from specbound.sim import DECODER_SCHEME

    if decoder not in DECODER_SCHEME:
        return math.nan
    blocks = emitted = pred = acc = 0.0
    for _, r in sub.iterrows():
        e = rr.parse(r["emitted"], np.int64)
        blocks += e.size
        emitted += e.sum()
        pred += rr.parse(r["dec_predicted"], float).sum()
        acc += rr.parse(r["dec_accepted"], float).sum()
    return float((emitted - acc + pred) / blocks)


def _acceptance(sub: pd.DataFrame) -> float:
    """Accepted decisions over decisions (NaN without decisions or a per-context scheme)."""
    if "dec_accepted" not in sub:
        return math.nan
    acc = [rr.parse(x, float) for x in sub["dec_accepted"]]
    n = sum(a.size for a in acc)
    return float(sum(a.sum() for a in acc) / n) if n else math.nan


def verify_costs(s, L: int = 4, reps: int = 7) -> dict:
    """``c_1`` and ``c_L``: the median time of a 2- and an ``(L + 1)``-token target forward
    over the first prompt's cache, each over the median of a 1-token forward; and the exact
    break-even acceptances of single-draft blocks of 1 and ``L`` drafted tokens."""
    from specbound.llm.ngram import break_even, forward_seconds

    pair = rr.pair_for(s, NGRAM)
    ids = pair.encode_prompt(rr.prompt_texts(s, pair)[0][2])
    one, t1, tL = forward_seconds(pair, ids, (0, 1, L), reps)
    c1, cL = t1 / one, tL / one
    return {"verify_cost_ratio": cL, "break_even_acceptance": break_even(cL, L),
            "verify_cost_ratio_1": c1, "break_even_acceptance_1": break_even(c1, 1)}


def summary_rows(df: pd.DataFrame, specs, costs=None) -> pd.DataFrame:
    rows = []
    for sp in specs:
        sub = rr.select(df, sp)
        rate = float(sub["n_generated"].sum() / sub["cpu_seconds"].sum())
        groups = [(TYPES.get(k, k), g) for k, g in sub.groupby("prompt_set", sort=False)]
        for kind, g in [*groups, ("all", sub)]:
            n_blocks = int(g["n_blocks"].sum())
            rows.append({"config": label(sp), "decoder": sp.decoder, "B": sp.B,
                         "draft": "" if sp.decoder == "ar" else sp.draft,
                         "prompt_type": kind, "n_prompts": len(g), "n_blocks": n_blocks,
                         "aatps": float(g["n_generated"].sum() / n_blocks),
                         "predicted_aatps": _predicted(g, sp.decoder),
                         "target_forwards_per_token": float(g["n_target_evals"].sum()
                                                            / g["n_generated"].sum()),
                         "tokens_per_cpu_second": rate,
                         "acceptance": _acceptance(g), **(costs or {})})
    return pd.DataFrame(rows)


def keyed_rows(df: pd.DataFrame, specs, s) -> pd.DataFrame:
    from specbound import llm

    by = {(sp.decoder, sp.B, sp.draft): sp for sp in specs}
    ref = by[("mpfr", 2, s.draft)]
    ref_tok = [t for t, _ in rr.sequences(rr.select(df, ref))]
    rows = []
    for sp in (by[("mpfr", 2, NGRAM)], by[("mpfr", 4, NGRAM)], ref):
        seqs = rr.sequences(rr.select(df, sp))
        same = [np.array_equal(t, u) for (t, _), u in zip(seqs, ref_tok, strict=True)]
        logp = [llm.detect(t, s.key, window=None, prompt_length=n).log_pvalue / math.log(10)
                for t, n in seqs]
        rows.append({"config": label(sp), "reference": label(ref),
                     "same_tokens": float(np.mean(same)), "n_prompts": len(seqs),
                     "log10_p_median": float(np.median(logp)),
                     "log10_p_max": float(np.max(logp))})
    return pd.DataFrame(rows)


def compute(out_dir, quick: bool = False, executor=None, progress: bool = True, **params):
    s = rr.settings(quick, **resolve_params(PARAMS, quick, params))
    specs = rr.resolve(SPECS, s)
    df = rr.runs(out_dir, specs, s, executor=executor, progress=progress, desc=NAME)
    costs = verify_costs(s)
    S = summary_rows(df, specs, costs)
    K = keyed_rows(df, specs, s)
    for k, v in s.columns().items():
        S[f"setting_{k}"] = v
    low = replace(s, temperature=T_LOW, per_set=max(1, s.per_set // LOW_SHARE))
    specs_low = rr.resolve(SPECS_LOW, low)
    df_low = rr.runs(out_dir, specs_low, low, executor=executor, progress=progress,
                     desc=f"{NAME} T={T_LOW}", store=f"{NAME}_t07")
    S_low = summary_rows(df_low, specs_low, costs)
    S_low.insert(0, "temperature", T_LOW)
    for k, v in low.columns().items():
        S_low[f"setting_{k}"] = v
    return S, K, S_low


def plot(S: pd.DataFrame, png: Path) -> None:
    plt = setup_matplotlib()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11.0, 4.2))
    configs = list(dict.fromkeys(S["config"]))
    kinds = list(dict.fromkeys(S["prompt_type"]))
    w = 0.8 / max(len(configs), 1)
    for i, c in enumerate(configs):
        sub = S[S["config"] == c].set_index("prompt_type").reindex(kinds)
        x = np.arange(len(kinds)) + (i - (len(configs) - 1) / 2) * w
        a1.bar(x, sub["aatps"], w, label=c, hatch="//" if NGRAM in c else None,
               edgecolor="0.3", linewidth=0.4)
        # the theory's prediction as a black line across its bar (x: bar positions only)
        a1.hlines(sub["predicted_aatps"], x - w / 2, x + w / 2, colors="k", linewidth=1.5)
    a1.set_xticks(np.arange(len(kinds)), kinds)
    a1.set_ylabel("AATPS (bars); predicted (black lines)")
    a1.set_title("Tokens per block by prompt type", fontsize=10)
    a1.legend(fontsize=6, ncol=2)
    allr = S[S["prompt_type"] == "all"]
    a2.barh(allr["config"], allr["tokens_per_cpu_second"], color="0.6")
    a2.set_xlabel("generated tokens per CPU second (whole batched run)")
    a2.set_title("Cost: ngram:3 spends no draft forward", fontsize=10)
    a2.tick_params(axis="y", labelsize=7)
    fig.tight_layout()
    fig.savefig(png)
    plt.close(fig)


def main(out_dir, quick: bool = False, executor=None, **params) -> list[Path]:
    """Run (or resume); write the CSVs and the PNG into ``out_dir`` (``params``: the keywords
    of ``paper_figs._real_runs.PARAMS``)."""
    S, K, S_low = compute(out_dir, quick=quick, executor=executor, **params)
    csv = out_path(out_dir, f"{NAME}.csv")
    kcsv = out_path(out_dir, f"{NAME}_keyed.csv")
    tcsv = out_path(out_dir, f"{NAME}_temperature.csv")
    S.to_csv(csv, index=False, float_format="%.10g")
    K.to_csv(kcsv, index=False, float_format="%.10g")
    S_low.to_csv(tcsv, index=False, float_format="%.10g")
    png = out_path(out_dir, f"{NAME}.png")
    plot(S, png)
    return [png, csv, kcsv, tcsv, out_path(out_dir, f"{rr.RUNS}.csv"),
            out_path(out_dir, f"{NAME}_t07.csv")]


if __name__ == "__main__":
    from paper_figs._cli import cli

    cli(main, __doc__, PARAMS, NAME)
