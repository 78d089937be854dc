"""Why VSpS and MSE reach ROUGE-L ≈ 0.40 under drafter substitution in the paper, not here.

Liu, Wan, Gao & Gündüz (2026, arXiv:2609.21858), Table 15 and App. D.5: min-pair ROUGE-L F1
between the realised *token* sequences of one prompt under four drafters (the minimum over
the six drafter pairs, averaged over prompts) is 0.394 for VSpS and 0.406 for MSE, on
Qwen2.5-7B-Instruct with CNN/DailyMail summarisation prompts and ``max_new_tokens = 128``
(App. D.1).  On the embedded SmolLM2-135M-Instruct (``real_wm_substitution``: code and chat
prompts, 20 tokens) the same statistic is about 0.1-0.2.  This study varies the two
suspected causes and then the target's entropy, one at a time, everything else fixed
(target, temperature 1, top-k 50, the four drafts of ``real_wm_substitution``, one key, the
same unkeyed seed for every draft, L = 4):

prompt type
    code (HumanEval), chat (ShareGPT) and summarisation (``sharegpt_summarize``: ShareGPT
    prompts asking to summarise a text they contain, selected by the rule of
    :func:`paper_figs._real_runs.summarize_prompts`, read at run time; prompts up to
    ``summarize_prompt_tokens`` = 640 tokens, against 160 for the other two sets), and all
    64 prompts together (``prompt_set = all``);
generation length
    every run generates its 64 tokens once and ROUGE-L is scored on the first T of them, T in
    {8, 16, 32, 64}, so only the length differs between the T's;
entropy (the entropy section)
    the target's sampling temperature lowered (``--tau``, e.g. 0.5; none by default,
    :data:`TEMPERATURES`) against the main runs' tau = 1, on the summarisation prompts
    (:data:`TAU_SETS`), every run 64 tokens, scored at T in {8, 16, 32, 64}; the same
    prompts, drafts, key and seeds.
    The pair's shared processing applies tau to the target and to every draft alike
    (``specbound.llm.drafts``): the ``temperature:T`` drafts become the target at temperature
    ``T * tau``, so the drafts stay as far from the target in ratio as at tau = 1,
    and only the entropy of the laws changes.  The measured entropy (``tau_entropy``) is
    that of the processed law at tau along that level's own plain samples.

Rows of ``real_wm_rouge.csv`` (``row_type``):

``cell``
    per prompt set, decoder (``vsps``, ``mse``, or ``floor``) and T: min-pair and mean-pair
    ROUGE-L (mean ± standard error over prompts) and the shared prefix (the fraction of the
    first T tokens before two outputs first differ, mean over pairs).  ``floor``: four
    independent plain samples of the target (``ar``, four unkeyed seeds) per prompt, i.e. the
    content that unrelated outputs for the same prompt share; its mean-pair value is the
    ROUGE-L of two independent samples, its min-pair value the one comparable to Table 15.
``entropy``
    per prompt set and T: per-token entropy (nats) of the target's processed next-token law
    along the plain samples' first T tokens (mean over the samples, then over prompts).
``effect``
    paired differences with their standard errors and z: ``length`` (the min-pair value at the
    largest T minus the smallest T, per prompt), ``type`` (summarisation minus code or chat
    at each T; independent prompts), ``over_floor`` (decoder minus floor, per prompt).
``prompt``
    every prompt's min-pair ROUGE-L (the data behind the means).
``tau_cell``, ``tau_entropy``, ``tau_prompt``
    the entropy section's ``cell``, ``entropy`` and ``prompt`` rows, with a ``temperature``
    column (1.0: the main runs' first 64 tokens, scored again), and on ``tau_cell`` the
    level's measured entropy at the same T and the paper's 0.47 nats (``paper_entropy``).
``tau_effect``
    ``temperature``: the level minus tau = 1 per prompt (``temperature_ref`` = 1), for the
    min-pair value of each decoder and the floor, and for the entropy (``decoder = ar``);
    ``over_floor``: decoder minus floor at each level.

PFR is not rerun: its drafter invariance (min-pair ROUGE-L 1) does not depend on the prompt
or the length and is shown by ``real_wm_substitution``.

Scale: the 64 prompts of ``paper_figs._real_runs`` (24 HumanEval, 24 ShareGPT, 16
summarisation requests), VSpS and MSE with the four drafts of ``real_wm_substitution`` (the
same runs, in the shared store) and four plain samples per prompt, 64 new tokens each; the
entropy section (``--tau``) 8 speculative runs + 4 plain runs per summarisation prompt and
level.  ``--quick``: one summarisation prompt of at most 256 tokens, 8 new tokens (16 for the
plain samples), two drafts, two plain samples; its entropy section one level (0.5), 4 tokens,
VSpS and the floor only.

Outputs: ``real_wm_rouge.{csv,md,png}``; the runs in the shared ``real_runs.csv`` (the
speculative runs are ``real_watermarks``' drafter substitution; with other settings than the
main study's, ``real_wm_rouge_runs.csv`` and ``real_wm_rouge_floor_runs.csv``) and
``real_wm_rouge_tau{050,...}_runs.csv`` (resumable through ``specbound.sweep``).

Extended run (not part of ``make reproduce``; about 30 minutes on one core):
``python -m paper_figs.real_wm_rouge --summaries N --out DIR`` runs only the summarisation
set with ``N`` prompts (the first ``N`` of the same selection) at tau = 1 and
:data:`EXTENDED_TEMPERATURES`, everything else as in the full study, so that the
entropy effect at the paper's entropy is measured with more than two prompts.

Run: ``python -m paper_figs.real_wm_rouge [--quick] [--out DIR] [--executor SPEC]
[--target MODEL] [--draft SPEC] [--prompts N] [--tokens N] [--prompt-tokens N]
[--summaries N] [--floor N] [--summary-prompt-tokens N] [--tau X,...]`` (``--help`` for the
defaults).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from paper_figs import _real_runs as rr
from paper_figs import _wm_common as wc
from paper_figs._common import Param, decoder_color, out_path, resolve_params, setup_matplotlib
from specbound.sim import mean_se, rouge_l

FIGURE = True
NAME = "real_wm_rouge"
RUNS = f"{NAME}_runs"
FLOOR_RUNS = f"{NAME}_floor_runs"
DECODERS = ("vsps", "mse")
FLOOR = "floor"
#: Table 15 of Liu et al. 2026: min-pair ROUGE-L under drafter substitution
PAPER = {"vsps": 0.394, "mse": 0.406}
#: the paper's target entropy on CNN/DailyMail (nats/token): its LPPL, Table 6
PAPER_ENTROPY = 0.47
#: the ``prompt_set`` of the rows over every prompt of the study together
ALL = "all"
SET_LABELS = {"humaneval": "code (HumanEval)", "sharegpt": "chat (ShareGPT)",
              rr.SUMMARIZE_SET: "summarise (ShareGPT)", ALL: "all prompts"}


@dataclass(frozen=True)
class RougeSettings(rr.RealSettings):
    """:class:`paper_figs._real_runs.RealSettings` with the number of plain samples per
    prompt (the floor)."""

    n_floor: int = 4


SETS = ("humaneval", "sharegpt", rr.SUMMARIZE_SET)
#: the main real-model settings (the runs are those of ``real_watermarks``' drafter
#: substitution, in the shared store)
FULL = RougeSettings(sets=SETS)
QUICK = RougeSettings(per_set=1, max_new_tokens=8, sets=(rr.SUMMARIZE_SET,),
                      summarize_prompt_tokens=256, n_floor=2, quick=True)


#: the lowered temperatures of the extended run (``--summaries N``): the level nearest the
#: paper's 0.47 nats
EXTENDED_TEMPERATURES = (0.5,)


def settings(quick: bool, target=None, draft=None, summaries=None, floor=None, tau=None,
             **sizes) -> RougeSettings:
    """The study's settings; ``summaries``: the extended run's (the summarisation set only,
    ``summaries`` prompts); ``sizes``: ``prompts``, ``tokens``, ``prompt_tokens``
    (``paper_figs._real_runs.real_params``); ``floor``: plain samples per prompt;
    ``summary_prompt_tokens``: the summarisation set's prompt limit (``tau`` is not a
    setting: :func:`temperatures`)."""
    s = QUICK if quick else FULL
    if floor is not None:
        s = replace(s, n_floor=int(floor))
    sizes = {k: v for k, v in sizes.items() if v is not None}
    if sizes:
        s = rr.settings(quick, base=s, **sizes)
    if summaries is not None:
        from specbound._validation import as_int

        s = replace(s, per_set=as_int(summaries, "summaries", min_value=1),
                    sets=(rr.SUMMARIZE_SET,))
    if target is not None:
        s = replace(s, target=str(target))
    if draft is not None:
        from specbound.llm.drafts import parse_draft

        s = replace(s, draft=str(parse_draft(draft)))
    return s


#: new tokens of the plain samples (the floor), full and quick: the speculative runs' 64 (the
#: paper's 128, App. D.1, would double the floor's cost at 64 prompts)
FLOOR_TOKENS = {False: 64, True: 16}


def floor_settings(s: RougeSettings) -> rr.RealSettings:
    """The settings of the plain samples: ``s`` with :data:`FLOOR_TOKENS` new tokens."""
    return replace(s.base(), max_new_tokens=FLOOR_TOKENS[s.quick])


def store_for(s: rr.RealSettings, own: str) -> str:
    """The store of runs with settings ``s``: the shared ``real_runs`` store when ``s`` are
    the main real-model settings (full or quick), so the runs ``real_watermarks`` made are
    reused; else the store ``own``."""
    return rr.RUNS if s.base() == rr.settings(s.quick) else own


#: target temperatures of the entropy section besides the main study's tau = 1 (full, quick):
#: none in the full study by default (at 64 prompts a level costs about 8 configurations on
#: the 16 summarisation prompts; ``--tau 0.5`` runs it, ``--summaries N`` the extended run)
TEMPERATURES = {False: (), True: (0.5,)}
#: the prompt sets of the entropy section
TAU_SETS = (rr.SUMMARIZE_SET,)
#: new tokens of every run (speculative and plain) at a lowered temperature
TAU_TOKENS = {False: 64, True: 4}
#: decoders of the entropy section (the quick run keeps one, to stay within its time)
TAU_DECODERS = {False: DECODERS, True: ("vsps",)}


def tau_settings(s: RougeSettings, tau: float) -> RougeSettings:
    """The settings of the entropy section at target temperature ``tau``: ``s`` with
    temperature ``tau``, the sets of :data:`TAU_SETS` and :data:`TAU_TOKENS` new tokens for
    the speculative runs and the plain samples alike (one store per level)."""
    sets = tuple(x for x in s.sets if x in TAU_SETS)
    if not sets:
        raise ValueError(f"s: the entropy section needs one of the sets {TAU_SETS}")
    return replace(s, temperature=float(tau), sets=sets, max_new_tokens=TAU_TOKENS[s.quick])


def tau_store(tau: float) -> str:
    """The store (CSV stem) of the runs at target temperature ``tau``."""
    return f"{NAME}_tau{round(100 * tau):03d}_runs"


def tau_specs(s: RougeSettings) -> dict[str, list[rr.RunSpec]]:
    """The configurations of the entropy section: :func:`specs` for the decoders of
    :data:`TAU_DECODERS` and the floor."""
    sp = specs(s)
    return {dec: sp[dec] for dec in (*TAU_DECODERS[s.quick], FLOOR)}


def tau_grid(s: RougeSettings) -> tuple:
    """The scored lengths of the entropy section (every decoder and the floor)."""
    return tuple(T for T in sizes(s)["T"][FLOOR] if T <= TAU_TOKENS[s.quick])


def sizes(s: RougeSettings) -> dict:
    """Drafts and scored lengths: ``T`` per decoder (the floor's grid goes on to its own
    length)."""
    drafts = rr.substitute_drafts(s)
    grid = (2, 4, 8, 16) if s.quick else (8, 16, 32, 64, 128)
    dec = tuple(T for T in grid if T <= s.max_new_tokens)
    return {"T": {**dict.fromkeys(DECODERS, dec), FLOOR: grid},
            "drafts": drafts[:2] if s.quick else drafts}


def specs(s: RougeSettings) -> dict[str, list[rr.RunSpec]]:
    z = sizes(s)
    out = {dec: [rr.RunSpec(dec, L=4, draft=dr) for dr in z["drafts"]] for dec in DECODERS}
    out[FLOOR] = [rr.RunSpec("ar", L=1, draft=s.draft, seed=k) for k in range(s.n_floor)]
    return out


# ------------------------------------------------------------------------------ metrics


def shared_prefix(a, b) -> int:
    """Number of leading tokens two sequences share."""
    n = min(len(a), len(b))
    diff = np.flatnonzero(np.asarray(a[:n]) != np.asarray(b[:n]))
    return int(diff[0]) if diff.size else n


def pair_scores(outputs: list[np.ndarray], T: int) -> dict:
    """Min-pair and mean-pair ROUGE-L and the mean shared-prefix fraction of the first ``T``
    tokens of ``outputs`` (the realised sequences of one prompt, one per draft or seed)."""
    r, pre = [], []
    for a, b in itertools.combinations(outputs, 2):
        r.append(rouge_l(a[:T], b[:T]))
        pre.append(shared_prefix(a[:T], b[:T]) / T)
    return {"minpair": min(r), "meanpair": float(np.mean(r)), "prefix": float(np.mean(pre))}


def _outputs(runs: pd.DataFrame, group: list[rr.RunSpec]) -> list[list[np.ndarray]]:
    """``[prompt][run of group]`` generated tokens."""
    per_run = [[t[n0:] for t, n0 in rr.sequences(rr.select(runs, x))] for x in group]
    return [list(seqs) for seqs in zip(*per_run, strict=True)]


def _prompt_sets(runs: pd.DataFrame, spec: rr.RunSpec) -> list[str]:
    return list(rr.select(runs, spec)["prompt_set"])


def _se_row(est) -> tuple[float, float]:
    return est.mean, est.stderr


def _pair_stats(scores, idx, T) -> dict:
    """Min-pair and mean-pair ROUGE-L and the shared prefix at ``T`` (mean and standard
    error over the prompts ``idx`` of one decoder's :func:`pair_scores`)."""
    out = {}
    for k, col in (("minpair", "rouge_l_minpair"), ("meanpair", "rouge_l_meanpair"),
                   ("prefix", "shared_prefix")):
        est = mean_se([scores[i][T][k] for i in idx])
        out[col], out[f"{col}_se"] = est.mean, est.stderr
    return out


def compute_frame(runs: pd.DataFrame, s: RougeSettings, sp: dict, Ts: dict) -> pd.DataFrame:
    """The study's rows (module docstring) from the runs (``Ts``: the scored lengths of each
    group of ``sp``)."""
    sets_of = np.array(_prompt_sets(runs, sp[FLOOR][0]))
    sets = list(dict.fromkeys(sets_of))
    # per prompt: decoder -> T -> scores
    scores = {dec: [{T: pair_scores(outs, T) for T in Ts[dec]}
                    for outs in _outputs(runs, group)] for dec, group in sp.items()}
    rows = []
    groups = [(ps, np.flatnonzero(sets_of == ps)) for ps in sets]
    if len(sets) > 1:  # every prompt together (the sample of the claims' counted rows)
        groups.append((ALL, np.arange(sets_of.size)))
    for ps, idx in groups:
        for dec in (*DECODERS, FLOOR):
            for T in Ts[dec]:
                rows.append({"row_type": "cell", "prompt_set": ps, "decoder": dec, "T": T,
                             "n_prompts": idx.size,
                             "prompts_asked": s.per_set * (len(sets) if ps == ALL else 1),
                             **_pair_stats(scores[dec], idx, T),
                             "paper_rouge_l": PAPER.get(dec, math.nan)})
                for i in (idx if ps != ALL else ()):
                    rows.append({"row_type": "prompt", "prompt_set": ps, "decoder": dec,
                                 "T": T, "prompt": int(i),
                                 "rouge_l_minpair": scores[dec][i][T]["minpair"]})
        # entropy along the plain samples
        ent = [[rr.parse(e) for e in rr.select(runs, x)["entropy"]] for x in sp[FLOOR]]
        for T in Ts[FLOOR]:
            per_prompt = [np.mean([ent[k][i][:T].mean() for k in range(len(ent))]) for i in idx]
            est = mean_se(per_prompt)
            rows.append({"row_type": "entropy", "prompt_set": ps, "decoder": "ar", "T": T,
                         "n_prompts": idx.size, "entropy": est.mean, "entropy_se": est.stderr})
        # paired effects within the set
        for dec in (*DECODERS, FLOOR):
            hi, lo = max(Ts[dec]), min(Ts[dec])
            d = mean_se([scores[dec][i][hi]["minpair"] - scores[dec][i][lo]["minpair"]
                         for i in idx])
            rows.append(_effect("length", ps, dec, hi, lo, d.mean, d.stderr))
        for dec in DECODERS:
            for T in Ts[dec]:
                d = mean_se([scores[dec][i][T]["minpair"] - scores[FLOOR][i][T]["minpair"]
                             for i in idx])
                rows.append(_effect("over_floor", ps, dec, T, T, d.mean, d.stderr))
    if rr.SUMMARIZE_SET in sets:
        cells = pd.DataFrame([r for r in rows if r["row_type"] == "cell"])
        for other in (x for x in sets if x != rr.SUMMARIZE_SET):
            for dec in (*DECODERS, FLOOR):
                for T in Ts[dec]:
                    a = _cell(cells, rr.SUMMARIZE_SET, dec, T)
                    b = _cell(cells, other, dec, T)
                    se = math.hypot(a["rouge_l_minpair_se"], b["rouge_l_minpair_se"])
                    rows.append(_effect("type", f"{rr.SUMMARIZE_SET} - {other}", dec, T, T,
                                        a["rouge_l_minpair"] - b["rouge_l_minpair"], se))
    df = pd.DataFrame(rows)
    for k, v in s.columns().items():
        df[f"setting_{k}"] = v
    return df


def _cell(cells: pd.DataFrame, ps: str, dec: str, T: int) -> pd.Series:
    return cells[(cells["prompt_set"] == ps) & (cells["decoder"] == dec)
                 & (cells["T"] == T)].iloc[0]


def _effect(kind, ps, dec, T, T_ref, diff, se) -> dict:
    z = diff / se if se > 0 else (0.0 if diff == 0 else math.nan)
    return {"row_type": "effect", "effect": kind, "prompt_set": ps, "decoder": dec, "T": T,
            "T_ref": T_ref, "diff": diff, "diff_se": se, "z": z}


# ------------------------------------------------------------- entropy (temperature)


def _per_prompt_entropy(runs: pd.DataFrame, group: list[rr.RunSpec], T: int) -> list[float]:
    """Per prompt: the mean entropy along the first ``T`` tokens of the plain samples
    ``group`` (mean over samples)."""
    ent = [[rr.parse(e) for e in rr.select(runs, x)["entropy"]] for x in group]
    return [float(np.mean([e[i][:T].mean() for e in ent])) for i in range(len(ent[0]))]


def tau_frame(levels: dict, s: RougeSettings, sp: dict, grid: tuple) -> pd.DataFrame:
    """The entropy section's rows from ``levels`` (target temperature -> its runs, the
    speculative runs and the plain samples of ``sp`` together; 1.0 must be among them), on
    the prompts of :data:`TAU_SETS` and the scored lengths ``grid``.

    Rows: ``tau_cell`` (as ``cell``, per temperature, with the measured entropy of that
    temperature's plain samples at the same T), ``tau_entropy`` (as ``entropy``),
    ``tau_effect`` (``temperature``: the level minus tau = 1, per prompt, for the min-pair
    value and the entropy (``decoder = ar``); ``over_floor``: decoder minus floor at each
    level), ``tau_prompt`` (every prompt's min-pair value)."""
    if 1.0 not in levels:
        raise ValueError("levels: must hold the runs at temperature 1.0 (the reference)")
    decs = tuple(d for d in DECODERS if d in sp)
    per = {}  # tau -> (prompt sets, scores, entropy)
    for tau, runs in levels.items():
        first = rr.select(runs, sp[FLOOR][0])
        sets_of = np.array(first["prompt_set"])
        # which prompt of its set each run is (pairs the levels; absent: taken in order)
        pidx = (np.array(first["prompt_index"]) if "prompt_index" in first
                else np.full(len(first), -1))
        scores = {dec: [{T: pair_scores(outs, T) for T in grid}
                        for outs in _outputs(runs, group)] for dec, group in sp.items()}
        ent = {T: _per_prompt_entropy(runs, sp[FLOOR], T) for T in grid}
        per[float(tau)] = (sets_of, scores, ent, pidx)
    rows = []
    ref_sets, ref_pidx = per[1.0][0], per[1.0][3]
    for ps in (x for x in dict.fromkeys(ref_sets) if x in TAU_SETS):
        ref_idx = np.flatnonzero(ref_sets == ps)
        for tau in sorted(per, reverse=True):
            sets_of, scores, ent, pidx = per[tau]
            idx = np.flatnonzero(sets_of == ps)
            if idx.size != ref_idx.size or (pidx[idx] != ref_pidx[ref_idx]).any():
                raise ValueError(f"levels: temperature {tau} has other prompts of {ps} than "
                                 "temperature 1")
            for T in grid:
                h = mean_se([ent[T][i] for i in idx])
                rows.append({"row_type": "tau_entropy", "temperature": tau, "prompt_set": ps,
                             "decoder": "ar", "T": T, "n_prompts": idx.size,
                             "entropy": h.mean, "entropy_se": h.stderr})
                for dec in (*decs, FLOOR):
                    rows.append({"row_type": "tau_cell", "temperature": tau, "prompt_set": ps,
                                 "decoder": dec, "T": T, "n_prompts": idx.size,
                                 **_pair_stats(scores[dec], idx, T),
                                 "entropy": h.mean, "entropy_se": h.stderr,
                                 "paper_rouge_l": PAPER.get(dec, math.nan),
                                 "paper_entropy": PAPER_ENTROPY})
                    for i in idx:
                        rows.append({"row_type": "tau_prompt", "temperature": tau,
                                     "prompt_set": ps, "decoder": dec, "T": T,
                                     "prompt": int(i),
                                     "rouge_l_minpair": scores[dec][i][T]["minpair"]})
                for dec in decs:
                    d = mean_se([scores[dec][i][T]["minpair"] - scores[FLOOR][i][T]["minpair"]
                                 for i in idx])
                    rows.append(_tau_effect("over_floor", tau, ps, dec, T, d))
            if tau == 1.0:
                continue
            # paired with tau = 1 by prompt (the same prompts in the same order, same seeds)
            _, ref_scores, ref_ent, _ = per[1.0]
            for T in grid:
                d = mean_se([ent[T][i] - ref_ent[T][j] for i, j in zip(idx, ref_idx,
                                                                          strict=True)])
                rows.append(_tau_effect("temperature", tau, ps, "ar", T, d))
                for dec in (*decs, FLOOR):
                    d = mean_se([scores[dec][i][T]["minpair"] - ref_scores[dec][j][T]["minpair"]
                                 for i, j in zip(idx, ref_idx, strict=True)])
                    rows.append(_tau_effect("temperature", tau, ps, dec, T, d))
    return pd.DataFrame(rows)


def _tau_effect(kind, tau, ps, dec, T, est) -> dict:
    row = _effect(kind, ps, dec, T, T, est.mean, est.stderr)
    row.update(row_type="tau_effect", temperature=tau,
               temperature_ref=1.0 if kind == "temperature" else tau)
    return row


def tau_summary(df: pd.DataFrame) -> pd.DataFrame:
    """Per prompt set and temperature, at the largest scored length: the entropy, VSpS's,
    MSE's and the floor's min-pair ROUGE-L (± se) and the floor's mean-pair value."""
    c = df[df["row_type"] == "tau_cell"]
    out = []
    for (ps, tau), g in c.groupby(["prompt_set", "temperature"], sort=False):
        T = g["T"].max()
        g = g[g["T"] == T].set_index("decoder")
        row = {"prompt_set": ps, "temperature": tau, "T": T,
               "entropy": g["entropy"].iloc[0], "entropy_se": g["entropy_se"].iloc[0]}
        for dec in (*DECODERS, FLOOR):
            row[dec] = g.at[dec, "rouge_l_minpair"] if dec in g.index else math.nan
            row[f"{dec}_se"] = g.at[dec, "rouge_l_minpair_se"] if dec in g.index else math.nan
        row["floor_meanpair"] = g.at[FLOOR, "rouge_l_meanpair"]
        out.append(row)
    return pd.DataFrame(out)


# ------------------------------------------------------------------------ table, plot


def _pm(m, se, d=3) -> str:
    if m is None or (isinstance(m, float) and math.isnan(m)):
        return "—"
    return f"{m:.{d}f}" if se is None or math.isnan(se) else f"{m:.{d}f} ± {se:.{d}f}"


def table(df: pd.DataFrame) -> str:
    cells = df[df["row_type"] == "cell"]
    Ts = sorted(cells["T"].unique())
    lines = ["Min-pair ROUGE-L (mean ± se over prompts) under drafter substitution; floor: "
             "four independent plain samples (mean-pair value in brackets).", "",
             "| prompt set | decoder | " + " | ".join(f"T={T}" for T in Ts) + " |",
             "|---|---|" + "---|" * len(Ts)]
    for (ps, dec), g in cells.groupby(["prompt_set", "decoder"], sort=False):
        g = g.set_index("T")
        vals = []
        for T in Ts:
            if T not in g.index:
                vals.append("—")
                continue
            v = _pm(g.at[T, "rouge_l_minpair"], g.at[T, "rouge_l_minpair_se"])
            if dec == FLOOR:
                v += f" [{g.at[T, 'rouge_l_meanpair']:.3f}]"
            vals.append(v)
        lines.append(f"| {ps} | {dec} | " + " | ".join(vals) + " |")
    lines += _shortfall_lines(cells)
    ent = df[df["row_type"] == "entropy"]
    lines += ["", "| prompt set | entropy (nats/token) at " + ", ".join(f"T={T}" for T in Ts)
              + " |", "|---|---|"]
    for ps, g in ent.groupby("prompt_set", sort=False):
        g = g.set_index("T")
        lines.append(f"| {ps} | " + ", ".join(_pm(g.at[T, "entropy"], g.at[T, "entropy_se"], 2)
                                              for T in Ts) + " |")
    eff = df[df["row_type"] == "effect"]
    lines += ["", "| effect | prompt set | decoder | T (ref) | difference ± se | z |",
              "|---|---|---|---|---|---|"]
    for _, r in eff.iterrows():
        lines.append(f"| {r['effect']} | {r['prompt_set']} | {r['decoder']} | {int(r['T'])} "
                     f"({int(r['T_ref'])}) | {_pm(r['diff'], r['diff_se'])} | "
                     f"{_pm(r['z'], None, 2)} |")
    return "\n".join(lines + _tau_table(df)) + "\n"


def _shortfall_lines(cells: pd.DataFrame) -> list[str]:
    """A note under the table for every prompt set that gave fewer prompts than asked
    (``n_prompts`` below ``prompts_asked``: fewer of the drawn prompts fit the set's prompt
    limit), so that a shortfall is never silent."""
    if "prompts_asked" not in cells.columns:
        return []
    out = []
    for ps, g in cells[cells["prompt_set"] != ALL].groupby("prompt_set", sort=False):
        used, asked = int(g["n_prompts"].min()), int(g["prompts_asked"].max())
        if used < asked:
            out.append(f"Prompt set {ps}: {used} prompts used, not the {asked} asked (only "
                       f"{used} of the prompts drawn fit its prompt limit).")
    return ["", *out] if out else []


def _tau_table(df: pd.DataFrame) -> list[str]:
    cells = df[df["row_type"] == "tau_cell"]
    if cells.empty:
        return []
    Ts = sorted(cells["T"].unique())
    lines = ["", f"Entropy section: the target's temperature lowered (target and drafts alike); "
             f"min-pair ROUGE-L (floor: [mean-pair]) and the measured entropy (nats/token) of "
             f"the plain samples; the paper: {PAPER['vsps']} / {PAPER['mse']} at "
             f"{PAPER_ENTROPY} nats.", "",
             "| prompt set | temperature | decoder | " + " | ".join(f"T={T}" for T in Ts)
             + " |", "|---|---|---|" + "---|" * len(Ts)]
    for (ps, tau), g in cells.groupby(["prompt_set", "temperature"], sort=False):
        ent = g[g["decoder"] == FLOOR].set_index("T")
        lines.append(f"| {ps} | {tau:g} | entropy | "
                     + " | ".join(_pm(ent.at[T, "entropy"], ent.at[T, "entropy_se"], 2)
                                  for T in Ts) + " |")
        for dec, h in g.groupby("decoder", sort=False):
            h = h.set_index("T")
            vals = [_pm(h.at[T, "rouge_l_minpair"], h.at[T, "rouge_l_minpair_se"])
                    + (f" [{h.at[T, 'rouge_l_meanpair']:.3f}]" if dec == FLOOR else "")
                    for T in Ts]
            lines.append(f"| {ps} | {tau:g} | {dec} | " + " | ".join(vals) + " |")
    eff = df[df["row_type"] == "tau_effect"]
    lines += ["", "| effect | prompt set | temperature (ref) | decoder | T | "
              "difference ± se | z |", "|---|---|---|---|---|---|---|"]
    for _, r in eff.iterrows():
        lines.append(f"| {r['effect']} | {r['prompt_set']} | {r['temperature']:g} "
                     f"({r['temperature_ref']:g}) | {r['decoder']} | {int(r['T'])} | "
                     f"{_pm(r['diff'], r['diff_se'])} | {_pm(r['z'], None, 2)} |")
    return lines


def plot(df: pd.DataFrame, png: Path) -> None:
    plt = setup_matplotlib()
    cells = df[df["row_type"] == "cell"]
    panels = (*DECODERS, FLOOR)
    summ = tau_summary(df) if (df["row_type"] == "tau_cell").any() else pd.DataFrame()
    n = len(panels) + (not summ.empty)
    rows = 1 if n <= 3 else 2  # a grid, readable at its saved size (not a 16-inch strip)
    cols = -(-n // rows)
    fig, grid = plt.subplots(rows, cols, figsize=(4.4 * cols, 3.9 * rows), sharey=True,
                             squeeze=False)
    axes = list(grid.ravel())
    for extra in axes[n:]:
        extra.set_visible(False)
    axes = axes[:n]
    colors = dict(zip(SETS, ("tab:blue", "tab:orange", "tab:green"), strict=True))
    for ax, dec in zip(axes, panels, strict=False):
        for ps, g in cells[cells["decoder"] == dec].groupby("prompt_set", sort=False):
            g = g.sort_values("T")
            ax.errorbar(g["T"], g["rouge_l_minpair"], yerr=g["rouge_l_minpair_se"].fillna(0),
                        capsize=2, marker="o", color=colors.get(ps, "k"),
                        label=SET_LABELS.get(ps, ps))
            if dec != FLOOR:  # the floor of the same prompts, for comparison
                f = cells[(cells["decoder"] == FLOOR) & (cells["prompt_set"] == ps)
                          & cells["T"].isin(g["T"])].sort_values("T")
                ax.plot(f["T"], f["rouge_l_minpair"], ls=":", lw=1, color=colors.get(ps, "k"))
        for d in (PAPER if dec == FLOOR else (dec,) if dec in PAPER else ()):
            ax.axhline(PAPER[d], color=decoder_color(d), ls="--", lw=1,
                       label=f"paper {d.upper()} ({PAPER[d]}, T = 128)")
        ax.set_xscale("log", base=2)
        ts = sorted(cells[cells["decoder"] == dec]["T"].unique())
        ax.set_xticks(ts, [str(int(t)) for t in ts])
        ax.set_xlabel("scored tokens T")
        ax.set_title("floor: independent plain samples" if dec == FLOOR
                     else f"{dec.upper()} (dotted: floor)", fontsize=10)
        ax.legend(fontsize=8)
    if not summ.empty:
        _plot_entropy(axes[-1], summ)
    for ax in grid[:, 0]:
        ax.set_ylabel("min-pair ROUGE-L (mean over prompts)")
    axes[0].set_ylim(0, 1.0)
    fig.suptitle("ROUGE-L under drafter substitution: prompt type × length × target entropy "
                 "(embedded model)",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(png)
    plt.close(fig)


def _plot_entropy(ax, summ: pd.DataFrame) -> None:
    """ROUGE-L against the measured entropy, one point per temperature (the largest T)."""
    for ps, g in summ.groupby("prompt_set", sort=False):
        g = g.sort_values("entropy")
        for dec, mk in (("vsps", "o"), ("mse", "s"), (FLOOR, "^")):
            if g[dec].isna().all():  # a decoder the run left out (the quick run's MSE)
                continue
            ax.errorbar(g["entropy"], g[dec], xerr=g["entropy_se"].fillna(0),
                        yerr=g[f"{dec}_se"].fillna(0), capsize=2, marker=mk,
                        color=decoder_color(dec) if dec != FLOOR else "k",
                        label=f"{dec.upper() if dec != FLOOR else 'floor'} "
                              f"({SET_LABELS.get(ps, ps)})")
        ax.plot(g["entropy"], g["floor_meanpair"], ls=":", color="k", lw=1,
                label="floor, mean-pair")
        for _, r in g.iterrows():
            ax.annotate(f"τ={r['temperature']:g}", (r["entropy"], r[FLOOR]), fontsize=7.5,
                        xytext=(3, -9), textcoords="offset points")
    for d, mk in (("vsps", "*"), ("mse", "P")):
        ax.plot([PAPER_ENTROPY], [PAPER[d]], marker=mk, ms=11, ls="none",
                color=decoder_color(d), markeredgecolor="k",
                label=f"paper {d.upper()} ({PAPER[d]} at {PAPER_ENTROPY} nats)")
    ax.set_xlabel(f"measured entropy (nats/token, T = {int(summ['T'].max())})")
    ax.set_title("target temperature lowered: ROUGE-L vs entropy", fontsize=10)
    ax.legend(fontsize=7.5)


#: the most plain samples per prompt ``--floor`` takes (each is a stored configuration)
MAX_FLOOR = 1000


def _runs(v) -> list:
    """The decoding runs of the parameter values ``v`` as :func:`compute` makes them (the
    memory estimate's input, ``paper_figs._real_runs.decoding_memory``)."""
    s = settings(v.quick, **v)
    sp = specs(s)
    out = [(s.base(), [x for d in DECODERS for x in sp[d]]), (floor_settings(s), sp[FLOOR])]
    taus = temperatures(v.quick, v)
    if taus and any(x in TAU_SETS for x in s.sets):
        tsp = tau_specs(s)
        out += [(tau_settings(s, tau), [x for g in tsp.values() for x in g]) for tau in taus]
    return out


PARAMS = (
    *rr.real_params(FULL, QUICK, runs=_runs),
    Param("summaries", "int", None, None,
          "extended run: N summarisation prompts at tau = 1 and 0.5 (None: the study; at "
          "most the ShareGPT prompts that ask for a summary; fewer may fit "
          "--summary-prompt-tokens: the run says how many it used)", low=1,
          high=rr.PROMPT_POOL, memory=rr.memory_hook("summaries", _runs),
          check=lambda v: _summaries_message(v)),
    Param("floor", "int", FULL.n_floor, QUICK.n_floor,
          f"independent plain samples per prompt (the floor; at most {MAX_FLOOR}, one "
          "configuration each)", low=2, high=MAX_FLOOR, memory=rr.memory_hook("floor", _runs)),
    Param("tau", "floats", TEMPERATURES[False], TEMPERATURES[True],
          "lowered target temperatures of the entropy section (with --summaries: "
          f"{', '.join(map(str, EXTENDED_TEMPERATURES))}; each below 1)", low=1e-3,
          memory=rr.memory_hook("tau", _runs),
          check=lambda v: next((f"{t:g} is not below 1 (the section lowers the target's "
                                "temperature from the study's 1)" for t in v.tau if t >= 1),
                               None)),
)


def _summaries_message(v) -> str | None:
    """Why ``--summaries`` asks for more prompts than the summarisation set has (the
    ShareGPT prompts that ask for a summary, :func:`paper_figs._real_runs.summarize_prompts`,
    read from the prompt set's wheel, no model), or None.  Of those, the ones longer than
    ``--summary-prompt-tokens`` are left out when the run tokenizes them; the run says how
    many it used (``paper_figs._real_runs.report_prompts``, and ``n_prompts`` /
    ``prompts_asked`` of the table)."""
    if v.summaries is None:
        return None
    pool = len(rr.summarize_prompts(FULL.prompt_seed))
    if v.summaries > pool:
        return (f"{v.summaries} exceeds the {pool} ShareGPT prompts that ask for a summary "
                f"(the summarisation set)")
    return None


def _temperatures(quick: bool, summaries) -> tuple:
    return EXTENDED_TEMPERATURES if summaries is not None else TEMPERATURES[quick]


def temperatures(quick: bool, values) -> tuple:
    """The lowered temperatures of a run: ``tau`` if given, else :data:`TEMPERATURES`
    (:data:`EXTENDED_TEMPERATURES` with ``summaries``)."""
    if "tau" in values.changed:
        return tuple(values.tau)
    return _temperatures(quick, values.summaries)


def compute(out_dir, quick: bool = False, executor=None, progress: bool = True, **params
            ) -> pd.DataFrame:
    v = resolve_params(PARAMS, quick, params)
    taus = temperatures(quick, v)
    s = settings(quick, **v)
    sp = specs(s)
    dec = [x for d in DECODERS for x in sp[d]]
    runs = rr.runs(out_dir, dec, s.base(), executor=executor, progress=progress, desc=NAME,
                   store=store_for(s, RUNS))
    fs = floor_settings(s)
    plain = rr.runs(out_dir, sp[FLOOR], fs, executor=executor,
                    progress=progress, desc=f"{NAME} (plain samples)",
                    store=store_for(fs, FLOOR_RUNS))
    base = pd.concat([runs, plain], ignore_index=True)
    df = compute_frame(base, s, sp, sizes(s)["T"])
    if not taus or not any(x in TAU_SETS for x in s.sets):
        return df
    levels = {1.0: base}
    tsp = tau_specs(s)
    for tau in taus:
        levels[tau] = rr.runs(out_dir, [x for g in tsp.values() for x in g], tau_settings(s, tau),
                              executor=executor, progress=progress,
                              desc=f"{NAME} (temperature {tau:g})", store=tau_store(tau))
    tf = tau_frame(levels, s, tsp, tau_grid(s))
    for k, v in s.columns().items():
        tf[f"setting_{k}"] = v
    tf["setting_temperature"] = tf["temperature"]
    return pd.concat([df, tf], ignore_index=True)


def main(out_dir, quick: bool = False, executor=None, **params) -> list[Path]:
    """Run (or resume) the runs; write ``real_wm_rouge.{csv,md,png}`` (``params``: the
    keywords of :data:`PARAMS`; ``summaries``: the extended run, module docstring)."""
    taus = temperatures(quick, resolve_params(PARAMS, quick, params))
    df = compute(out_dir, quick=quick, executor=executor, **params)
    written = wc.write_frame_outputs(out_dir, NAME, df, plot, table)
    s = settings(quick, **resolve_params(PARAMS, quick, params))
    stores = dict.fromkeys([store_for(s, RUNS), store_for(floor_settings(s), FLOOR_RUNS),
                            *(tau_store(t) for t in taus)])
    return written + [out_path(out_dir, f"{x}.csv") for x in stores]


if __name__ == "__main__":
    from paper_figs._cli import cli

    cli(main, __doc__, PARAMS, NAME)
