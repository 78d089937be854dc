"""Does the entropy of the synthetic LM explain the watermark studies' gaps to Liu et al. 2026?

Liu, Wan, Gao & Gündüz (2026), arXiv:2609.21858, run Qwen2.5-7B-Instruct on CNN/DailyMail
(LPPL about 0.47 nats/token, Table 6); the package's watermark studies run a synthetic LM of
about 2.6 nats/token.  Three gaps in their comparisons are checked here by sweeping only the
entropy of the models (``sim.calibrated_lm``, target mean entropy 0.3 .. 3 nats) at fixed
vocabulary, context window, draft mismatch (logit noise 0.5 in units of the Zipf base's
exponent, noise seed 1), prompts, unkeyed seeds, key and token budget:

1. **MPFR vs INVARIANT over B** (Table 6: parity; the package: INVARIANT 6-7% lower): AATPS
   of ``mpfr`` (keyed) and ``invariant`` (Rowan et al. 2025) at L = 4, B in {2, 4, 6, 8}, and
   the exact token-level acceptances ``theory.exact_acceptance(p, q, "mpfr" | "gls", B)``
   averaged over contexts (noise-free);
2. **PFR vs VSpS / MWS / MSE** (Fig. 1: PFR 2.7% below VSpS; the package: 7.5%): AATPS of
   ``pfr``, ``vsps``, ``mws``, ``mse`` at L in {1, 2, 3, 4}, and the exact token-level
   ``exp_race`` vs ``sd`` acceptances;
3. **ROUGE-L under drafter substitution** (Table 15: VSpS / MSE about 0.40; the package
   about 0.11): token-level ROUGE-L between the outputs with drafter D0 and with D2 (D0 at
   temperature 0.5) or D3 (temperature 1.5), same prompt and seed, for ``vsps``, ``mse``
   and ``pfr`` at L = 4.

4. **TPR drift under drafter substitution** (Fig. 2(b): MSE 12–22 points, MSE-PSEUDO 6–11
   points at T_eval 64 and 128; the package's default model: other values): TPR@1%FPR
   (Aaronson score, exact Gamma null) of ``mse`` and of ``mse_pseudo`` with He et al. 2026's
   keyed residual scored with the acceptance coin (the ``keyed_residual_coin`` variant of
   ``wm_drafter_substitution``) with each of the drafters D0 (noise 0.5, seed 1), D1 (noise
   1/3, seed 2: a better drafter), D2 / D3 (D0 at temperature 0.5 / 1.5), L = 4; the drift is
   the TPR of the max- minus the min-drafter with the paired (by prompt) standard error of
   that difference (conditional on which two they are), on the calibrated families of
   ``--drift-entropy`` only, with ``--drift-prompts`` prompts of their own.

AATPS is total emitted tokens over total blocks with its cluster-robust (per prompt)
standard error (``sim.cluster_ratio_se``); a relative gap ``A/B - 1`` between two decoders
run on the same prompts gets the paired linearised standard error (:func:`ratio_gap`).
The package's default setting (``SyntheticLM(1000)`` with ``draft(0.3)``) is run as a
reference row (``family = "default SyntheticLM"``).

Full mode: n = 1000 tokens, 48 prompts of 8 tokens, 128 new tokens (the paper's
``max_new_tokens``), entropies 0.3, 0.47, 1, 2, 3; the drift on 0.3, 0.47, 1 and 2 nats with 80
prompts at T_eval 64 and 128 (8 decoding runs of 80 prompts × 128 tokens per family;
measured 190–210 s of wall time per family on a machine shared by other jobs, load about 5 on
2 cores; a TPR standard error of about 5 points per drafter, so the paper's 10-point ranges
are resolved only where the drift is far outside them); ``--quick``: n = 200, 3 prompts, 12
new tokens, entropies 0.47 and 2, the drift at T_eval 12 on 4 prompts.

Outputs: ``fidelity_entropy.csv`` (columns ``section, family, entropy_target,
entropy_achieved, decoder, L, B, drafter, metric, mean, se``), ``fidelity_entropy.png`` and
``fidelity_entropy.md``.

Each family runs as two tasks (:data:`PARTS`) on the studies' executor
(``paper_figs._wm_common.study_map``: a 2-process pool in full mode, serial in quick mode);
the rows are those of a serial run, in its order.

Run: ``python -m paper_figs.fidelity_entropy [--quick] [--out DIR] [--vocab N] [--prompts N]
[--tokens N] [--entropy X,...] [--B N,...] [--L N,...] [--contexts N] [--drift-entropy X,...]
[--drift-prompts N] [--drift-T N,...]`` (``--help`` for the
defaults).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from paper_figs._common import (
    Param,
    check_memory,
    out_path,
    resolve_params,
    setup_matplotlib,
    share,
    write_table_and_figure,
)
from specbound import sim, theory
from specbound.sim.decode import MAX_DRAFTS
from specbound.sim.models import MAX_VOCAB

FIGURE = True
NAME = "fidelity_entropy"
KEY = "fidelity-entropy"
MISMATCH = 0.5


@dataclass(frozen=True)
class Config:
    vocab_size: int
    n_prompts: int
    new_tokens: int
    entropies: tuple
    Bs: tuple
    Ls: tuple
    n_contexts: int  # contexts of the exact token-level comparison
    drift_entropies: tuple = ()  # calibrated families of section 4 (TPR drift)
    drift_prompts: int = 0
    drift_T: tuple = ()


FULL = Config(1000, 48, 128, (0.3, 0.47, 1.0, 2.0, 3.0), (2, 4, 6, 8), (1, 2, 3, 4), 48,
              (0.3, 0.47, 1.0, 2.0), 80, (64, 128))
QUICK = Config(200, 3, 12, (0.47, 2.0), (2, 4), (2,), 6, (0.47, 2.0), 4, (12,))
_DECODE_SIZES = ("prompts", "drift_prompts", "tokens")


def _decode_memory(v) -> int:
    """Bytes of the decoded texts a family's task holds: the runs of up to four decoders of
    every prompt and new token (the decoders' records and generated tokens, at most 256
    bytes a token, measured with tracemalloc on the synthetic watermark studies' decoder at
    150 bytes), in each of the two processes of the default pool; the exact part (vocabulary
    x contexts) is ``--contexts``'s own estimate."""
    return 2 * 4 * 256 * (v.prompts + v.drift_prompts) * v.tokens


#: calibration contexts of the study's calibrated LMs (:func:`_family`) and the float64
#: arrays of contexts x vocabulary a calibration holds at once (the base laws, their power
#: and its normalisation, the entropies' temporaries; an upper estimate)
CALIBRATION_CONTEXTS = 1024
CALIBRATION_ARRAYS = 4
#: entropies this far inside (0, log --vocab) are reached by every calibration of the
#: study (its sharpness range leaves about 1e-11 nats at the bottom and far less than 0.01
#: at the top); one closer to an end is checked by calibrating it (:func:`_entropy_message`)
ENTROPY_MARGIN = 1e-3


def _entropy_message(v) -> str | None:
    """Why an ``--entropy`` is not one the calibrated LMs reach (``sim.calibrated_lm``
    refuses it: it would fail after the study started), or None; checked as the command line
    is parsed, by calibrating the values near an end of ``(0, log --vocab)``."""
    top = math.log(v.vocab)
    if max(v.entropy) >= top:
        return f"every entropy must be below log(--vocab) = {top:.4g} nats"
    edge = [h for h in v.entropy if not ENTROPY_MARGIN < h < top - 10 * ENTROPY_MARGIN]
    if edge:
        check_memory(PARAMS, v)  # the calibration's arrays fit before they are made
    for h in edge:
        try:
            sim.calibrated_lm(h, v.vocab, n_contexts=CALIBRATION_CONTEXTS, seed=2026)
        except ValueError as exc:
            msg = str(exc)
            return msg[len("target_entropy: "):] if msg.startswith("target_entropy: ") else msg
    return None


#: the largest lookahead of the study's flags (the watermark studies' bound)
MAX_LOOKAHEAD = 1024

PARAMS = (
    Param("vocab", "int", FULL.vocab_size, QUICK.vocab_size,
          f"vocabulary of the LMs (at most {MAX_VOCAB:,})", low=2, high=MAX_VOCAB,
          memory=lambda v: CALIBRATION_ARRAYS * 8 * CALIBRATION_CONTEXTS * v.vocab),
    Param("prompts", "int", FULL.n_prompts, QUICK.n_prompts, "prompts per model", low=1,
          memory=lambda v: share(v, "prompts", _DECODE_SIZES, _decode_memory(v))),
    Param("tokens", "int", FULL.new_tokens, QUICK.new_tokens, "new tokens per prompt", low=1,
          memory=lambda v: share(v, "tokens", _DECODE_SIZES, _decode_memory(v))),
    Param("entropy", "floats", FULL.entropies, QUICK.entropies,
          "target entropies (nats) of the calibrated LMs, each one they reach", low=0,
          check=lambda v: _entropy_message(v)),
    Param("B", "ints", FULL.Bs, QUICK.Bs, "numbers of drafts (multi-draft part)", low=1,
          high=MAX_DRAFTS),
    Param("L", "ints", FULL.Ls, QUICK.Ls, "lookaheads (single-draft part)", low=1,
          high=MAX_LOOKAHEAD),
    Param("contexts", "int", FULL.n_contexts, QUICK.n_contexts,
          "contexts of the exact token-level comparison", low=1,
          # the contexts' target and draft laws and exact_acceptance's temporaries: measured
          # (tracemalloc, 200 contexts x 2,000 tokens) 21.4 float64 arrays of contexts x vocab
          memory=lambda v: 24 * 8 * v.contexts * v.vocab),
    Param("drift_entropy", "floats", FULL.drift_entropies, QUICK.drift_entropies,
          "target entropies of the TPR-drift section (each one of --entropy)", low=0,
          check=lambda v: next((f"{h:g} is not one of --entropy" for h in v.drift_entropy
                                if not any(math.isclose(h, x) for x in v.entropy)), None)),
    Param("drift_prompts", "int", FULL.drift_prompts, QUICK.drift_prompts,
          "prompts of the TPR-drift section", low=2,
          memory=lambda v: share(v, "drift_prompts", _DECODE_SIZES, _decode_memory(v))),
    Param("drift_T", "ints", FULL.drift_T, QUICK.drift_T,
          "detection budgets T_eval of the TPR-drift section (at most --tokens)", low=1,
          check=lambda v: next((f"{T} exceeds --tokens {v.tokens}" for T in v.drift_T
                                if T > v.tokens), None)),
)


def config(quick: bool, **params) -> Config:
    """The :class:`Config` of a run: the mode's, with the values of ``params``."""
    v = resolve_params(PARAMS, quick, params)
    return Config(v.vocab, v.prompts, v.tokens, v.entropy, v.B, v.L, v.contexts,
                  v.drift_entropy, v.drift_prompts, v.drift_T)


def ratio_gap(num1, den1, num2, den2) -> tuple[float, float]:
    """``(sum num1 / sum den1) / (sum num2 / sum den2) - 1`` with its paired cluster SE.

    Clusters (prompts) are shared by the two runs; the linearised influence of cluster ``i``
    is ``g [(num1_i - r1 den1_i)/(r1 D1) - (num2_i - r2 den2_i)/(r2 D2)]`` with
    ``g = r1/r2``, and the variance ``m/(m-1) sum_i influence_i^2``.
    """
    num1, den1, num2, den2 = (np.asarray(x, dtype=np.float64) for x in (num1, den1, num2,
                                                                          den2))
    d1, d2 = den1.sum(), den2.sum()
    r1, r2 = num1.sum() / d1, num2.sum() / d2
    g = r1 / r2
    infl = g * ((num1 - r1 * den1) / (r1 * d1) - (num2 - r2 * den2) / (r2 * d2))
    m = num1.size
    se = math.sqrt(m / (m - 1) * float(np.sum(infl**2))) if m > 1 else float("nan")
    return float(g - 1.0), se


def _family(cfg: Config, i: int):
    """Family ``i`` of :func:`models` (built on its own: the same models)."""
    if i < len(cfg.entropies):
        h = cfg.entropies[i]
        t = sim.calibrated_lm(h, cfg.vocab_size, n_contexts=CALIBRATION_CONTEXTS,
                              seed=2026)
        d0 = t.draft(MISMATCH, seed=1)
        return ("calibrated", h, t, d0, d0.draft(0.0, temperature=0.5),
                d0.draft(0.0, temperature=1.5), t.entropy)
    t = sim.SyntheticLM(cfg.vocab_size, 2, seed=2026)
    d0 = t.draft(0.3, seed=1)
    return ("default SyntheticLM", float("nan"), t, d0, d0.draft(0.0, temperature=0.5),
            d0.draft(0.0, temperature=1.5), t.mean_entropy(500))


def models(cfg: Config):
    """(family, target entropy, target, drafters D0, D2, D3, achieved entropy)."""
    return [_family(cfg, i) for i in range(len(cfg.entropies) + 1)]


def _runs(target, draft, prompts, decoder, L, B, n):
    """Per-prompt emitted totals, block counts and generated token arrays."""
    emitted, blocks, gens = [], [], []
    for toks, seed in zip(prompts.tokens, prompts.seeds, strict=True):
        res = sim.speculative_decode(target, draft, toks, decoder, L=L, B=B, key=KEY,
                                     max_new_tokens=n, seed=seed)
        emitted.append(int(res.emitted_per_block.sum()))
        blocks.append(res.emitted_per_block.size)
        gens.append(res.tokens[res.prompt_length:])
    return np.array(emitted), np.array(blocks), gens


#: the two tasks of a family, in the order of their rows: the exact token-level acceptances
#: and section 1 (multi-draft); sections 2 and 3 (single-draft; section 3's D0 runs repeat
#: section 2's at L = 4, so they share a process and its model memo)
PARTS = ("multi", "single", "drift")
#: section 4: (decoder, decoder options, coin threshold of the detector)
DRIFT_DECODERS = (("mse", {}, None), ("mse_pseudo", {"residual": "keyed"}, 0.5))
FPR = 0.01


def _drift_rows(cfg: Config, target, drafters: dict, add) -> None:
    """Section 4: TPR@1%FPR per drafter and the max − min drift per decoder and T_eval."""
    from paper_figs import _wm_common as wc
    from specbound.theory.watermark import score_threshold, token_scores

    Ts = [T for T in cfg.drift_T if T <= cfg.new_tokens]
    if not Ts:
        raise ValueError(f"drift_T: every budget exceeds --tokens {cfg.new_tokens}")
    thr = {T: score_threshold(T, score="aaronson", fpr=FPR) for T in Ts}
    prompts = sim.random_prompts(cfg.drift_prompts, 8, cfg.vocab_size, seed=13)
    for dec, options, tau in DRIFT_DECODERS:
        tpr = {}
        for name, draft in drafters.items():
            res = wc.decode(target, draft, prompts.tokens, prompts.seeds, dec, L=4, B=1,
                            key=KEY, max_new_tokens=cfg.new_tokens, **options)
            U = np.array([sim.keyed_pivots(r, KEY, coin_threshold=tau).pivots for r in res])
            S = np.cumsum(token_scores(U, "aaronson"), axis=1)
            for T in Ts:
                x = (S[:, T - 1] >= thr[T]).astype(np.float64)
                tpr[name, T] = x
                e = sim.mean_se(x)
                add("drift", dec, 4, 1, name, f"tpr_T{T}", e.mean, e.stderr)
        for T in Ts:
            rate = {D: float(tpr[D, T].mean()) for D in drafters}
            hi, lo = max(drafters, key=rate.get), min(drafters, key=rate.get)
            est = wc.paired_mean_diff(tpr[hi, T], tpr[lo, T])
            add("drift", dec, 4, 1, f"{hi}-{lo}", f"tpr_drift_T{T}", est["diff"],
                est["diff_se"])


def _family_rows(arg) -> list[dict]:
    """The rows of one family and part (``arg = (cfg, family index, part)``)."""
    cfg, i, part = arg
    fam, h, target, d0, d2, d3, h_ach = _family(cfg, i)
    prompts = sim.random_prompts(cfg.n_prompts, 8, cfg.vocab_size, seed=12)
    rows = []
    base = {"family": fam, "entropy_target": h, "entropy_achieved": h_ach}

    def add(section, decoder, L, B, drafter, metric, mean, se):
        rows.append({"section": section, **base, "decoder": decoder, "L": L, "B": B,
                     "drafter": drafter, "metric": metric, "mean": mean, "se": se})

    if part == "drift":
        if fam != "calibrated" or not any(np.isclose(h, x) for x in cfg.drift_entropies):
            return rows
        drafters = {"D0": d0, "D1": target.draft(MISMATCH * 2 / 3, seed=2), "D2": d2,
                    "D3": d3}
        _drift_rows(cfg, target, drafters, add)
        return rows

    if part == "multi":
        # exact token-level acceptances on random contexts (noise-free)
        rng = np.random.default_rng(5)
        ctxs = [rng.integers(0, cfg.vocab_size, size=2) for _ in range(cfg.n_contexts)]
        P = target.next_distributions(ctxs)
        Q = d0.next_distributions(ctxs)
        for B in cfg.Bs:
            am = theory.exact_acceptance(P, Q, "mpfr", B)
            ag = theory.exact_acceptance(P, Q, "gls", B)
            e = sim.mean_se(ag / am - 1.0)
            add("multidraft", "gls/mpfr", 1, B, "D0", "token_gap_exact", e.mean, e.stderr)
        e = sim.mean_se(theory.exact_acceptance(P, Q, "exp_race", 1)
                        / theory.exact_acceptance(P, Q, "sd", 1) - 1.0)
        add("single", "exp_race/sd", 1, 1, "D0", "token_gap_exact", e.mean, e.stderr)

        # 1. MPFR vs INVARIANT over B
        for B in cfg.Bs:
            runs = {d: _runs(target, d0, prompts, d, 4, B, cfg.new_tokens)
                    for d in ("mpfr", "invariant")}
            for d, (em, bl, _) in runs.items():
                est = sim.cluster_ratio_se(em, bl)
                add("multidraft", d, 4, B, "D0", "aatps", est.mean, est.stderr)
            g, se = ratio_gap(runs["invariant"][0], runs["invariant"][1], runs["mpfr"][0],
                              runs["mpfr"][1])
            add("multidraft", "invariant/mpfr", 4, B, "D0", "aatps_gap", g, se)
        return rows

    # 2. PFR vs VSpS / MWS / MSE over L
    for L in cfg.Ls:
        runs = {d: _runs(target, d0, prompts, d, L, 1, cfg.new_tokens)
                for d in ("pfr", "vsps", "mws", "mse")}
        for d, (em, bl, _) in runs.items():
            est = sim.cluster_ratio_se(em, bl)
            add("single", d, L, 1, "D0", "aatps", est.mean, est.stderr)
        for other in ("vsps", "mws", "mse"):
            g, se = ratio_gap(runs["pfr"][0], runs["pfr"][1], runs[other][0],
                              runs[other][1])
            add("single", f"pfr/{other}", L, 1, "D0", "aatps_gap", g, se)

    # 3. ROUGE-L between the outputs with D0 and with D2 / D3
    for d in ("vsps", "mse", "pfr"):
        ref = _runs(target, d0, prompts, d, 4, 1, cfg.new_tokens)[2]
        for name, drafter in (("D2", d2), ("D3", d3)):
            gens = _runs(target, drafter, prompts, d, 4, 1, cfg.new_tokens)[2]
            e = sim.mean_se([sim.rouge_l(a, b) for a, b in zip(ref, gens, strict=True)])
            add("rouge", d, 4, 1, name, "rouge_l", e.mean, e.stderr)
    return rows


def compute(quick: bool = False, executor=None, **params) -> pd.DataFrame:
    """Every family and part (:data:`PARTS`) as one task on the studies' executor
    (``paper_figs._wm_common.study_map``: a 2-process pool in full mode, serial in quick
    mode), the rows in the order of a serial run."""
    from paper_figs._wm_common import study_map

    cfg = config(quick, **params)
    args = [(cfg, i, part) for i in range(len(cfg.entropies) + 1) for part in PARTS]
    parts = study_map(_family_rows, args, quick=quick, executor=executor)
    return pd.DataFrame([r for rows in parts for r in rows])


def _fmt(mean, se, pct=False):
    if pct:
        return f"{100 * mean:+.1f}% ± {100 * se:.1f}%"
    return f"{mean:.3f} ± {se:.3f}"


def _label(r) -> str:
    if r["family"] == "calibrated":
        return f"calibrated H={r['entropy_target']:g} ({r['entropy_achieved']:.2f})"
    return f"default SyntheticLM ({r['entropy_achieved']:.2f})"


def markdown(df: pd.DataFrame) -> str:
    df = df.assign(setting=df.apply(_label, axis=1))
    settings = list(dict.fromkeys(df["setting"]))
    lines = ["# Entropy and the watermark comparisons (Liu et al. 2026)", "",
             "Mean entropy of the target in nats (target → achieved). Gaps are relative, with "
             "paired cluster standard errors (AATPS) or standard errors over contexts "
             "(exact token level).", "",
             "## 1. INVARIANT / MPFR − 1", "",
             "| setting | B | AATPS MPFR | AATPS INVARIANT | gap (AATPS) | gap (token, exact) |",
             "|---|---|---|---|---|---|"]
    m = df[df["section"] == "multidraft"]
    for s in settings:
        for B in sorted(set(m["B"])):
            g = m[(m["setting"] == s) & (m["B"] == B)]

            def one(dec, metric, pct=False, g=g):
                r = g[(g["decoder"] == dec) & (g["metric"] == metric)].iloc[0]
                return _fmt(r["mean"], r["se"], pct)
            lines.append(f"| {s} | {B} | {one('mpfr', 'aatps')} | "
                         f"{one('invariant', 'aatps')} | "
                         f"{one('invariant/mpfr', 'aatps_gap', True)} | "
                         f"{one('gls/mpfr', 'token_gap_exact', True)} |")
    lines += ["", "## 2. PFR / baseline − 1 (AATPS)", "",
              "| setting | L | AATPS PFR | AATPS VSpS | PFR/VSpS | PFR/MWS | PFR/MSE | "
              "token exp_race/sd (exact) |", "|---|---|---|---|---|---|---|---|"]
    s1 = df[df["section"] == "single"]
    for s in settings:
        tok = s1[(s1["setting"] == s) & (s1["metric"] == "token_gap_exact")].iloc[0]
        for L in sorted(set(s1[s1["metric"] == "aatps"]["L"])):
            g = s1[(s1["setting"] == s) & (s1["L"] == L)]

            def one(dec, metric, pct=False, g=g):
                r = g[(g["decoder"] == dec) & (g["metric"] == metric)].iloc[0]
                return _fmt(r["mean"], r["se"], pct)
            lines.append(f"| {s} | {L} | {one('pfr', 'aatps')} | {one('vsps', 'aatps')} | "
                         f"{one('pfr/vsps', 'aatps_gap', True)} | "
                         f"{one('pfr/mws', 'aatps_gap', True)} | "
                         f"{one('pfr/mse', 'aatps_gap', True)} | "
                         f"{_fmt(tok['mean'], tok['se'], True)} |")
    lines += ["", "## 3. ROUGE-L between the outputs with D0 and with D2 / D3 (L = 4)", "",
              "| setting | decoder | D0 vs D2 | D0 vs D3 |", "|---|---|---|---|"]
    r = df[df["section"] == "rouge"]
    for s in settings:
        for d in ("vsps", "mse", "pfr"):
            g = r[(r["setting"] == s) & (r["decoder"] == d)]
            c = [_fmt(*g[g["drafter"] == k][["mean", "se"]].iloc[0]) for k in ("D2", "D3")]
            lines.append(f"| {s} | {d} | {c[0]} | {c[1]} |")
    dr = df[(df["section"] == "drift") & df["metric"].str.startswith("tpr_drift_T")]
    if len(dr):
        lines += ["", "## 4. TPR drift under drafter substitution (max − min over D0–D3, "
                  "TPR@1%FPR, L = 4)", "",
                  "| setting | decoder | T_eval | drift (points) | drafters (max-min) |",
                  "|---|---|---|---|---|"]
        for _, r in dr.iterrows():
            lines.append(f"| {r['setting']} | {r['decoder']} | "
                         f"{r['metric'][len('tpr_drift_T'):]} | {100 * r['mean']:.1f} ± "
                         f"{100 * r['se']:.1f} | {r['drafter']} |")
    return "\n".join(lines) + "\n"


def plot(df: pd.DataFrame, png: Path) -> None:
    plt = setup_matplotlib()
    cal = df[df["family"] == "calibrated"]
    dflt = df[df["family"] != "calibrated"]
    # a 2 x 2 grid, readable at its saved size (a 1 x 4 strip was 3284 px wide)
    fig, grid = plt.subplots(2, 2, figsize=(12.0, 9.0))
    axes = grid.ravel()
    ax = axes[0]
    m = cal[cal["section"] == "multidraft"]
    for k, B in enumerate(sorted(set(m["B"]))):
        g = m[(m["B"] == B) & (m["metric"] == "aatps_gap")]
        ax.errorbar(g["entropy_achieved"], g["mean"], yerr=g["se"], marker="o",
                    ms=4, color=f"C{k}", label=f"AATPS, B = {B}")
        t = m[(m["B"] == B) & (m["metric"] == "token_gap_exact")]
        ax.plot(t["entropy_achieved"], t["mean"], ls="--", color=f"C{k}", lw=1.0)
        d = dflt[(dflt["section"] == "multidraft") & (dflt["B"] == B)
                 & (dflt["metric"] == "aatps_gap")]
        ax.errorbar(d["entropy_achieved"], d["mean"], yerr=d["se"], marker="x",
                    ms=7, ls="none", color=f"C{k}")
    ax.axhline(0.0, color="black", lw=0.6)
    ax.set_xlabel("mean next-token entropy of the target (nats)")
    ax.set_ylabel("INVARIANT / MPFR − 1")
    ax.set_title("1. multi-draft (L = 4): AATPS (—), exact token level (- -),\n"
                 "× the package's default model", fontsize=9)
    ax.legend(fontsize=8)
    ax = axes[1]
    s1 = cal[(cal["section"] == "single") & (cal["metric"] == "aatps_gap")]
    Lmax = s1["L"].max()
    for k, other in enumerate(("vsps", "mws", "mse")):
        g = s1[(s1["decoder"] == f"pfr/{other}") & (s1["L"] == Lmax)]
        ax.errorbar(g["entropy_achieved"], g["mean"], yerr=g["se"], marker="o",
                    ms=4, color=f"C{k}", label=f"PFR / {other.upper()} − 1, L = {Lmax}")
        d = dflt[(dflt["section"] == "single") & (dflt["decoder"] == f"pfr/{other}")
                 & (dflt["L"] == Lmax)]
        ax.errorbar(d["entropy_achieved"], d["mean"], yerr=d["se"], marker="x",
                    ms=7, ls="none", color=f"C{k}")
    t = cal[(cal["section"] == "single") & (cal["metric"] == "token_gap_exact")]
    ax.plot(t["entropy_achieved"], t["mean"], ls="--", color="black", lw=1.0,
            label="token level exp_race / sd − 1 (exact)")
    ax.axhline(0.0, color="black", lw=0.6)
    ax.set_xlabel("mean next-token entropy of the target (nats)")
    ax.set_ylabel("AATPS gap (relative)")
    ax.set_title("2. single draft: PFR against the baselines", fontsize=9)
    ax.legend(fontsize=8)
    ax = axes[2]
    r = cal[cal["section"] == "rouge"]
    for k, d in enumerate(("vsps", "mse", "pfr")):
        # D3 in large hollow markers: a series equal to D2's stays visible
        for drafter, ls, ms, mfc in (("D2", "-", 4, None), ("D3", "--", 8, "none")):
            g = r[(r["decoder"] == d) & (r["drafter"] == drafter)]
            ax.errorbar(g["entropy_achieved"], g["mean"], yerr=g["se"], marker="o", ms=ms,
                        mfc=mfc, ls=ls, color=f"C{k}", label=f"{d}, D0 vs {drafter}")
    ax.set_ylim(0.0, 1.05)
    ax.set_xlabel("mean next-token entropy of the target (nats)")
    ax.set_ylabel("ROUGE-L")
    ax.set_title("3. output overlap under drafter substitution (L = 4)", fontsize=9)
    ax.legend(fontsize=8)
    ax = axes[3]
    dr = cal[(cal["section"] == "drift") & cal["metric"].str.startswith("tpr_drift_T")]
    for k, (dec, lo, hi) in enumerate((("mse", 0.12, 0.22), ("mse_pseudo", 0.06, 0.11))):
        ax.axhspan(lo, hi, color=f"C{k}", alpha=0.12)
        groups = list(dr[dr["decoder"] == dec].groupby("metric", sort=False))
        for ls, (metric, g) in zip(("-", "--", ":", "-."), groups[:4], strict=False):
            # mse in large hollow squares: a series equal to mse_pseudo's stays visible
            ax.errorbar(g["entropy_achieved"], g["mean"], yerr=g["se"],
                        marker="s" if k == 0 else "o", ms=9 if k == 0 else 4,
                        mfc="none" if k == 0 else None, ls=ls, color=f"C{k}",
                        label=f"{dec}, T_eval = {metric[len('tpr_drift_T'):]}")
    ax.set_xlabel("mean next-token entropy of the target (nats)")
    ax.set_ylabel("TPR drift (max − min over D0–D3)")
    ax.set_title("4. TPR drift under drafter substitution; bands: the paper's ranges",
                 fontsize=9)
    if len(dr):
        ax.legend(fontsize=8)
    fig.suptitle("Entropy sweep at fixed vocabulary, drafter mismatch, prompts and seeds "
                 "(calibrated synthetic LMs)", fontsize=11)
    fig.tight_layout()
    fig.savefig(png)
    plt.close(fig)


def main(out_dir, quick: bool = False, **params) -> list[Path]:
    """Write ``fidelity_entropy.csv``, ``.png`` and ``.md`` into ``out_dir``."""
    df = compute(quick=quick, **params)
    md = out_path(out_dir, f"{NAME}.md")
    md.write_text(markdown(df), encoding="utf-8")
    return [*write_table_and_figure(out_dir, NAME, df, plot), md]


if __name__ == "__main__":
    from paper_figs._cli import cli

    cli(main, __doc__, PARAMS, NAME)
