"""Block verification against token-wise speculative sampling: the block efficiency gain.

Block verification (Sun, Mendlovic, Leviathan, Aharoni, Beirami, Ro & Suresh 2024,
arXiv:2403.10444, Alg. 2; decoder ``blockver``, ``docs/mathematics.md`` §5.7) keeps the
longest prefix of a draft block whose residual weight ``p_i = min(p_{i-1} P(x_i)/Q(x_i), 1)``
passes its stop coin; Sun et al. prove that no lossless verification of one draft
block keeps more tokens in expectation, and token-wise speculative sampling (``vsps``) keeps
as many at ``L = 1``.  This study measures the gain, the ratio of the expected tokens per
block ``E_blockver / E_vsps`` (1 at ``L = 1``, at least 1 always), exactly and by Monte
Carlo of the compiled decoders, on synthetic pairs and on the real logged distributions.

Synthetic pairs (fixed seeds): ``SyntheticLM(6, context_length=2)`` targets of the two logit
families ``gaussian`` and ``zipf`` (seeds 31, 32), each with drafts ``target.draft(m)`` at
the logit-noise mismatches ``m`` of ``--mismatch`` (0.25, 0.5, 1.0; 0.5, 1.0 with
``--quick``); the block starts from the prompt ``(0, 1)``.  For every ``L`` of ``--L``
(1..8; 1..4 with ``--quick``): the exact expected tokens of one full block of ``blockver``
and ``vsps`` (``specbound.sim.expected_block_tokens``: ``theory.blockver_block_tokens`` and
the ``sd`` recursion of ``theory.expected_block_tokens``), their ratio, and a Monte Carlo
estimate of both from ``--blocks`` first blocks of ``sim.speculative_decode_batch``
(``max_new_tokens = L + 1``, one prompt row per block, the same seeds for both decoders, so
the drafts are the same and the gain's estimate is paired) with standard errors and
z-scores against the exact values (the gain's standard error by the delta method over the
paired blocks).

Real logged distributions: the shipped log of the embedded model (``specbound.llm.
shipped_log()``: SmolLM2-135M-Instruct at temperature 1, top-k 50, 12 prompts x 48 of its own
tokens, drafts ``temperature:0.5``, ``temperature:1.5``, ``early_exit:28``, ``quantized:3``;
any other log with ``--log DIR``).  The log holds the two models' laws only after the
target's own sampled prefix, not after the other prefixes a draft block could take, so the
exact value computed is that of the *position-wise pair* of a context: a block starting at
logged step ``t`` of a prompt drafts its ``i``-th token from the logged ``q_{t+i-1}`` and is
verified against the logged ``p_{t+i-1}`` whatever the drafted prefix (Zhou et al. 2026,
arXiv:2607.26627, Prop. 1's path-independent positions; the i.i.d. analysis of Leviathan,
Kalman & Matias 2023, arXiv:2211.17192, §3.1, position by position).  For that pair both
values are exact (:func:`positionwise_block_tokens`): ``vsps`` gives ``1 + sum_i prod_{j<=i}
alpha_j`` with ``alpha_j = sum min(p_j, q_j)``, and ``blockver`` ``1 + sum_i E_Q[p_i]``, the
residual weight ``p_i`` being a product of likelihood ratios clipped at 1, whose law is
carried exactly atom by atom.  At ``L = 1`` both are the real model's exact value at that
context.  The contexts are every logged step followed by ``max(--real-L) - 1`` logged steps
of the same prompt (``--contexts`` of them evenly spaced; 24 with ``--quick``), ``L`` in
``--real-L`` (1..4; at most 5, where the atoms number ``50^4``).  Per draft and ``L`` the
means over contexts of both values, of their difference and of the per-context gain carry a
cluster standard error over prompts (``specbound.sim.metrics.cluster_ratio_se``: contexts of
one prompt are never independent; a single prompt gives no standard error).  On
``--mc-contexts`` of the contexts per draft the compiled decoders re-estimate both values
on the position-wise pair itself (a ``MarkovLM`` whose state is the depth and the token,
empty prompt), with z-scores against the exact values.

Checks (:func:`checks`): every exact gain is at least 1 (to rounding) and equals 1 at
``L = 1``; every Monte Carlo z-score of a value and of a gain is within ``Z_MAX = 5`` (per
check a false-failure probability of 5.7e-7).

Outputs: ``blockver_gain.csv`` (one row per synthetic pair and ``L``, and per logged context,
draft and ``L``: ``part, setting, family, mismatch, draft, position, prompt_id, step,
exact_log, L, alpha1, blockver, vsps, diff, gain`` and, on Monte Carlo rows, ``mc_n,
mc_blockver, se_blockver, z_blockver, mc_vsps, se_vsps, z_vsps, mc_gain, se_gain, z_gain``),
``blockver_gain.md`` (the synthetic table, the logged means with their cluster standard
errors, the checks), ``blockver_gain.png``.  Resumable: one stored configuration per
synthetic pair and per draft (``specbound.sweep``).

Run: ``python -m paper_figs.blockver_gain [--quick] [--out DIR] [--log DIR] [--L N,...]
[--vocab N] [--mismatch X,...] [--blocks N] [--real-L N,...] [--contexts N]
[--mc-contexts N]`` (``--help`` for the defaults).
"""

from __future__ import annotations

import dataclasses
import math
import os
from pathlib import Path

import numpy as np
import pandas as pd

from paper_figs import _wm_common as wc
from paper_figs._common import (
    Param,
    decoder_color,
    integer_ticks,
    out_path,
    resolve_params,
    setup_matplotlib,
)
from paper_figs._real_log import (
    LOG_PARAM,
    contexts_param,
    open_log,
    store_signature,
    subsample,
)
from specbound.sim import metrics

FIGURE = True
NAME = "blockver_gain"
VERSION = 1
FAMILIES = (("gaussian", 31), ("zipf", 32))
MISMATCH_FULL = (0.25, 0.5, 1.0)
MISMATCH_QUICK = (0.5, 1.0)
VOCAB = 6
CONTEXT_LENGTH = 2
PROMPT = (0, 1)
L_FULL = tuple(range(1, 9))
L_QUICK = (1, 2, 3, 4)
REAL_L = (1, 2, 3, 4)
#: largest logged lookahead: the residual weight of depth L - 2 has up to k^(L-2) atoms
#: (k <= 100 tokens of a compact pair of the top-50 log)
MAX_REAL_L = 5
#: most draft paths the synthetic pairs' exact value enumerates
#: (``specbound.theory.blockver.MAX_BLOCKVER_PATHS``)
MAX_PATHS = 1e6
MC_SEED = 2403
#: the largest |z| of a Monte Carlo check (two-sided normal tail 5.7e-7 per check)
Z_MAX = 5.0
#: rounding allowed below 1 of an exact gain (two float64 recursions of the same value)
GAIN_ATOL = 1e-12
#: bytes a Monte Carlo block holds in one batch: its ``DecodeResult`` (tokens, decisions,
#: per-block arrays: a dozen small arrays and the object), its seed and generator state, and
#: its prompt row (measured with tracemalloc: about 2.5 kB at L = 8)
BLOCK_BYTES = 4096


def _paths_message(v) -> str | None:
    """``--L`` against ``--vocab``: the exact value enumerates ``vocab^(L-1)`` draft paths."""
    top = max(v.L)
    if v.vocab > 1 and (top - 1) * math.log(v.vocab) > math.log(MAX_PATHS) + 1e-12:
        return (f"L = {top} over --vocab {v.vocab} tokens enumerates more than "
                f"{MAX_PATHS:.0e} draft paths for the exact value; use a smaller L or vocab")
    return None


PARAMS = (
    dataclasses.replace(LOG_PARAM, help="folder of a distribution log (None: the shipped "
                                        "log, specbound.llm.shipped_log(), in both modes)"),
    Param("L", "ints", L_FULL, L_QUICK, "lookaheads of the synthetic pairs", low=1, high=64,
          check=_paths_message),
    Param("vocab", "int", VOCAB, VOCAB, "tokens of the synthetic models", low=2, high=1000),
    Param("mismatch", "floats", MISMATCH_FULL, MISMATCH_QUICK,
          "logit-noise mismatches of the synthetic drafts (units of the target's scale)",
          low=0, high=100),
    Param("blocks", "int", 10_000, 1_000,
          "Monte Carlo first blocks per pair or context, L and decoder", low=2,
          memory=lambda v: BLOCK_BYTES * v.blocks * (1 if v.quick else 2)),
    Param("real_L", "ints", REAL_L, REAL_L, "lookaheads on the logged distributions",
          low=1, high=MAX_REAL_L),
    contexts_param(0, 24),
    Param("mc_contexts", "int", 2, 2, "logged contexts per draft checked by Monte Carlo",
          low=0),
)


# ------------------------------------------------------------------ exact values


def _min_linear_sum(s, c, d) -> np.ndarray:
    """``sum_t min(s c_t, d_t)`` at every ``s >= 0`` of ``s`` (``c, d >= 0``): the terms with
    ``s < d_t / c_t`` give ``s c_t``, the others ``d_t``, found by one sorted search of the
    thresholds ``d_t / c_t`` (terms with ``c_t = 0`` give 0)."""
    s = np.asarray(s, dtype=np.float64)
    c = np.asarray(c, dtype=np.float64).ravel()
    d = np.asarray(d, dtype=np.float64).ravel()
    pos = c > 0.0
    c, d = c[pos], d[pos]
    t = d / c
    order = np.argsort(t, kind="stable")
    t, c, d = t[order], c[order], d[order]
    below = np.concatenate(([0.0], np.cumsum(d)))  # the capped terms (t < s)
    above = np.concatenate((np.cumsum(c[::-1])[::-1], [0.0]))  # the linear ones (t >= s)
    j = np.searchsorted(t, s, side="left")
    return below[j] + s * above[j]


def _next_atoms(vals, wts, p, q):
    """The law of ``r_i = min(r_{i-1} p(x)/q(x), 1)``, ``x ~ q``, from the atoms
    ``(vals, wts)`` of ``r_{i-1}``: atoms at 0 dropped (they stay 0 and weigh nothing
    afterwards), those clipped at 1 merged, equal values merged."""
    s = q > 0.0
    rho = p[s] / q[s]
    v = np.minimum(vals[:, None] * rho[None, :], 1.0).ravel()
    w = (wts[:, None] * q[s][None, :]).ravel()
    keep = v > 0.0
    v, w = v[keep], w[keep]
    one = v >= 1.0
    w_one = float(w[one].sum())
    u, inv = np.unique(v[~one], return_inverse=True)
    w_rest = np.bincount(inv, weights=w[~one], minlength=u.size)
    return np.concatenate((u, [1.0])), np.concatenate((w_rest, [w_one]))


def positionwise_block_tokens(P, Q) -> tuple[np.ndarray, np.ndarray]:
    """Exact expected tokens of one full block of ``blockver`` and ``vsps`` on a
    position-wise pair, at every lookahead ``1..len(P)``.

    ``P[i]``, ``Q[i]`` (1-D, equal length within a depth; lengths may differ between depths)
    are the target's and the draft's laws of the ``(i + 1)``-th token of the block, whatever
    the tokens before it.  Block verification (Sun et al. 2024, arXiv:2403.10444, Alg. 2)
    keeps ``sum_i E_Q[r_i]`` drafts, ``r_0 = 1``, ``r_i = min(r_{i-1} P_i(x_i)/Q_i(x_i), 1)``
    (``docs/mathematics.md`` §5.7, ``w_i = r_i Q(x_{<=i})``): ``E[r_i | r_{i-1} = s] =
    sum_x min(s P_i(x), Q_i(x))`` and, two depths at once, ``E[r_i | r_{i-2} = s] = sum_{x,y}
    min(s P_{i-1}(x) P_i(y), Q_{i-1}(x) min(P_i(y), Q_i(y)))``; both are sums of
    ``min(s c, d)`` evaluated at the atoms of ``r_{i-1}`` (``r_{i-2}`` for the last depth) by a
    sorted search, and the atoms are carried exactly (merged at 0, 1 and equal values).
    Token-wise speculative sampling keeps ``sum_i prod_{j<=i} alpha_j``, ``alpha_j = sum
    min(P_j, Q_j)``.  Both add the one token after the kept drafts.

    Returns ``(blockver, vsps)``, arrays of ``len(P)`` values (lookahead ``1..len(P)``).
    Cost: the atoms of depth ``len(P) - 2`` (at most ``k^(len(P) - 2)`` for ``k`` tokens).
    """
    if len(P) != len(Q) or len(P) == 0:
        raise ValueError(f"Q: needs one law per depth of P ({len(P)}), got {len(Q)}")
    P = [np.asarray(p, dtype=np.float64) for p in P]
    Q = [np.asarray(q, dtype=np.float64) for q in Q]
    for i, (p, q) in enumerate(zip(P, Q, strict=True)):
        if p.ndim != 1 or p.shape != q.shape:
            raise ValueError(f"Q: depth {i}: p and q must be 1-D of equal length, got "
                             f"{p.shape} and {q.shape}")
    n = len(P)
    kept = np.empty(n)  # kept[i] = E[r_{i+1}]
    atoms = [(np.ones(1), np.ones(1))]  # the laws of r_0, ..., r_{n-2}
    for i in range(n - 1):
        vals, wts = atoms[i]
        kept[i] = float(wts @ _min_linear_sum(vals, P[i], Q[i]))
        if i < n - 2:
            atoms.append(_next_atoms(vals, wts, P[i], Q[i]))
    if n == 1:
        kept[0] = float(np.minimum(P[0], Q[0]).sum())
    else:  # the last depth from the atoms of r_{n-2}, two depths at once
        vals, wts = atoms[n - 2]
        c = np.outer(P[n - 2], P[n - 1])
        d = np.outer(Q[n - 2], np.minimum(P[n - 1], Q[n - 1]))
        kept[n - 1] = float(wts @ _min_linear_sum(vals, c, d))
    alpha = np.array([np.minimum(p, q).sum() for p, q in zip(P, Q, strict=True)])
    return 1.0 + np.cumsum(kept), 1.0 + np.cumsum(np.cumprod(alpha))


# ------------------------------------------------------------------ Monte Carlo


def _first_blocks(target, draft, prompt, decoder: str, L: int, n: int, seed) -> np.ndarray:
    """Tokens emitted by the first block of ``n`` independent runs from ``prompt``
    (``max_new_tokens = L + 1``: the block is a full one)."""
    from specbound.sim import speculative_decode_batch

    prompts = np.tile(np.asarray(prompt, dtype=np.int64), (n, 1)).reshape(n, len(prompt))
    batch = speculative_decode_batch(target, draft, prompts, decoder, L=L,
                                     max_new_tokens=L + 1, seed=seed, parallel=False)
    return np.array([e[0] for e in batch.emitted_per_block], dtype=np.float64)


def _z(diff: float, se: float) -> float:
    # an exact zero of both (L = 1: the decoders are equal token for token) is no deviation
    return metrics.z_score(0.0 if abs(diff) <= GAIN_ATOL else diff, se)


def monte_carlo(target, draft, prompt, L: int, n: int, seed, bv: float, sd: float) -> dict:
    """Monte Carlo of both decoders on the same seeds (paired blocks) against the exact
    values ``bv`` (blockver) and ``sd`` (vsps): means, standard errors, z-scores, and the
    gain with its delta-method standard error over the paired blocks."""
    kb = _first_blocks(target, draft, prompt, "blockver", L, n, seed)
    kv = _first_blocks(target, draft, prompt, "vsps", L, n, seed)
    out = {"mc_n": n}
    for name, k, exact in (("blockver", kb, bv), ("vsps", kv, sd)):
        est = metrics.mean_se(k)
        se = _se_floor(est.stderr, L, n)
        out[f"mc_{name}"] = est.mean
        out[f"se_{name}"] = se
        out[f"z_{name}"] = _z(est.mean - exact, se)
    ratio = kb.mean() / kv.mean()
    infl = (kb - ratio * kv) / kv.mean()  # influence values of the ratio of paired means
    se = _se_floor(float(infl.std(ddof=1) / np.sqrt(n)), L / kv.mean(), n)
    out["mc_gain"] = float(ratio)
    out["se_gain"] = se
    out["z_gain"] = _z(ratio - bv / sd, se)
    return out


def _se_floor(se: float, span: float, n: int) -> float:
    """A standard error of 0 from a sample in which every block gave the same value (or
    both decoders the same tokens) is a boundary artefact, not a certainty: it becomes the
    standard error one block deviating by the largest possible ``span`` would give,
    ``span / n``."""
    return se if se > 0.0 else span / n


def positionwise_models(P, Q):
    """The position-wise pair ``(P, Q)`` as two ``MarkovLM``\\ s for the compiled decoders:
    token ``i k + x`` is token ``x`` at depth ``i`` (``k`` the widest law, shorter laws padded
    with zeros), the law after a depth-``i`` token is the depth-``(i + 1)`` law (after the
    last depth the first law again: the bonus, whose value is not counted), the initial law
    (an empty prompt) the first depth's."""
    from specbound.sim import MarkovLM

    L, k = len(P), max(np.size(p) for p in P)
    models = []
    for laws in (P, Q):
        rows = np.zeros((L, L * k))
        for i, law in enumerate(laws):
            rows[i, i * k: i * k + np.size(law)] = law
        mat = np.repeat(np.roll(rows, -1, axis=0), k, axis=0)
        models.append(MarkovLM(mat, initial=rows[0]))
    return models[0], models[1]


# ------------------------------------------------------------------ the two parts


def synthetic_worker(arg) -> list[dict]:
    """Exact values and Monte Carlo of one synthetic pair at every L."""
    _, family, seed, mismatch, k, Ls, vocab, n = arg
    from specbound.sim import SyntheticLM, expected_block_tokens

    target = SyntheticLM(vocab, CONTEXT_LENGTH, seed=seed, kind=family)
    draft = target.draft(mismatch, seed=100 + k)
    p = target.next_distribution(list(PROMPT))
    q = draft.next_distribution(list(PROMPT))
    rows = []
    for L in Ls:
        bv = expected_block_tokens(target, draft, list(PROMPT), "blockver", L=L)
        sd = expected_block_tokens(target, draft, list(PROMPT), "vsps", L=L)
        seed_mc = np.random.SeedSequence(MC_SEED, spawn_key=(0, k, L))
        row = {"part": "synthetic", "setting": f"{family}, mismatch {mismatch:g}",
               "family": family, "mismatch": mismatch, "L": L,
               "alpha1": float(np.minimum(p, q).sum()), "blockver": bv, "vsps": sd,
               "diff": bv - sd, "gain": bv / sd}
        row.update(monte_carlo(target, draft, list(PROMPT), L, n, seed_mc, bv, sd))
        rows.append(row)
    return rows


def logged_contexts(log, draft: str, depth: int) -> list[list]:
    """Every run of ``depth`` consecutive logged steps of one prompt (the logged pairs of
    ``draft``), in log order."""
    pairs = list(log.pairs(draft))
    by = {(lp.prompt_id, lp.step): lp for lp in pairs}
    out = []
    for lp in pairs:
        run = [by.get((lp.prompt_id, lp.step + i)) for i in range(depth)]
        if all(r is not None for r in run):
            out.append(run)
    return out


def logged_worker(arg) -> list[dict]:
    """Exact values of every chosen context of one draft, Monte Carlo on some of them."""
    _, log_dir, draft, d_index, Ls, chosen, mc_chosen, n = arg
    log = open_log(log_dir)
    runs = logged_contexts(log, draft, max(Ls))
    mc = set(int(i) for i in mc_chosen)
    rows = []
    for j in (int(i) for i in chosen):
        run = runs[j]
        P, Q = [lp.p for lp in run], [lp.q for lp in run]
        bv, sd = positionwise_block_tokens(P, Q)
        head = run[0]
        for L in Ls:
            row = {"part": "logged", "setting": draft, "family": "logged", "draft": draft,
                   "position": head.position, "prompt_id": head.prompt_id, "step": head.step,
                   "exact_log": bool(all(lp.exact for lp in run[:L])), "L": L,
                   "alpha1": float(np.minimum(head.p, head.q).sum()),
                   "blockver": float(bv[L - 1]), "vsps": float(sd[L - 1]),
                   "diff": float(bv[L - 1] - sd[L - 1]), "gain": float(bv[L - 1] / sd[L - 1])}
            if j in mc:
                target, dmodel = positionwise_models(P[:L], Q[:L])
                seed_mc = np.random.SeedSequence(MC_SEED, spawn_key=(1, d_index, j, L))
                row.update(monte_carlo(target, dmodel, [], L, n, seed_mc, row["blockver"],
                                       row["vsps"]))
            rows.append(row)
    return rows


def compute(out_dir, quick: bool = False, executor=None, progress: bool = True, **params
            ) -> pd.DataFrame:
    v = resolve_params(PARAMS, quick, params)
    lg = open_log(v.log)
    log_dir = None if v.log is None else str(v.log)
    sig = store_signature(NAME, VERSION, lg, quick, v.changed)
    store = wc.ResumableCSV(out_path(out_dir, f"{NAME}.csv"), sig)
    configs = []
    k = 0
    for family, seed in FAMILIES:
        for m in v.mismatch:
            arg = ("synthetic", family, seed, float(m), k, tuple(v.L), v.vocab, v.blocks)
            configs.append((f"synthetic|{family}|{m:g}", arg))
            k += 1
    for d_index, d in enumerate(lg.drafts):
        n_runs = len(logged_contexts(lg, d, max(v.real_L)))
        if n_runs == 0:
            continue
        chosen = subsample(n_runs, v.contexts)
        mc = chosen[subsample(len(chosen), v.mc_contexts)] if v.mc_contexts else chosen[:0]
        arg = ("logged", log_dir, d, d_index, tuple(v.real_L), chosen.tolist(), mc.tolist(),
               v.blocks)
        configs.append((f"logged|{d}", arg))
    df = wc.study_sweep(configs, _worker, store, quick=quick, executor=executor, desc=NAME,
                        progress=progress)
    return _ordered(df, [f for f, _ in FAMILIES], lg.drafts)


def _worker(arg) -> list[dict]:
    return synthetic_worker(arg) if arg[0] == "synthetic" else logged_worker(arg)


def _ordered(df: pd.DataFrame, families, drafts) -> pd.DataFrame:
    """Synthetic rows first (family, mismatch, L), then logged ones (draft in log order,
    context, L): a sweep store holds its rows in completion order."""
    if df.empty:
        return df
    rank = {**{f: i for i, f in enumerate(families)},
            **{d: len(families) + i for i, d in enumerate(drafts)}}
    key = df["family"].where(df["part"] == "synthetic", df.get("draft"))
    out = df.assign(_o=key.map(rank))
    cols = ["_o", "mismatch", "position", "L"]
    return (out.sort_values([c for c in cols if c in out.columns], kind="stable")
            .drop(columns="_o").reset_index(drop=True))


# ------------------------------------------------------------------ checks, summaries


def checks(df: pd.DataFrame) -> list[str]:
    """What contradicts the theory or the Monte Carlo (module docstring), one line each:
    an exact gain below 1 (beyond :data:`GAIN_ATOL`), a gain other than 1 at ``L = 1``, a
    Monte Carlo |z| above :data:`Z_MAX`; empty when everything holds."""
    out = []
    low = df[df["gain"] < 1.0 - GAIN_ATOL]
    for _, r in low.iterrows():
        out.append(f"gain {r['gain']:.12g} < 1: {r['setting']}, L = {int(r['L'])}")
    one = df[(df["L"] == 1) & ((df["gain"] - 1.0).abs() > GAIN_ATOL)]
    for _, r in one.iterrows():
        out.append(f"gain {r['gain']:.12g} != 1 at L = 1: {r['setting']}")
    for col in ("z_blockver", "z_vsps", "z_gain"):
        if col not in df.columns:
            continue
        bad = df[df[col].abs() > Z_MAX]
        for _, r in bad.iterrows():
            where = r["setting"] + ("" if r["part"] == "synthetic"
                                    else f", position {int(r['position'])}")
            out.append(f"|{col}| = {abs(r[col]):.2f} > {Z_MAX:g}: {where}, L = {int(r['L'])}")
    return out


def logged_summary(df: pd.DataFrame) -> pd.DataFrame:
    """Per draft and L: means over contexts of both exact values, their difference and the
    per-context gain, each with its cluster standard error over prompts; the ratio of the
    means; the smallest gain; the prompts whose mean gain exceeds 1; the contexts whose
    pair is exact (tails 0)."""
    sub = df[df["part"] == "logged"]
    out = []
    for (d, L), g in sub.groupby(["draft", "L"], sort=False):
        by = g.groupby("prompt_id")
        count = by.size().to_numpy(dtype=np.float64)
        rec = {"draft": d, "L": int(L), "contexts": len(g), "prompts": by.ngroups}
        for col in ("blockver", "vsps", "diff", "gain"):
            est = metrics.cluster_ratio_se(by[col].sum().to_numpy(), count)
            rec[col] = est.mean
            rec[f"{col}_se"] = est.stderr
        rec["ratio_of_means"] = rec["blockver"] / rec["vsps"]
        rec["gain_min"] = float(g["gain"].min())
        rec["prompts_gain_above_1"] = int((by["gain"].mean() > 1.0 + GAIN_ATOL).sum())
        rec["exact_contexts"] = int(g["exact_log"].astype(bool).sum())
        out.append(rec)
    return pd.DataFrame(out)


def _fmt(v) -> str:
    if isinstance(v, float | np.floating):
        return "" if not np.isfinite(v) else f"{v:.4g}"
    return str(v)


def _md_table(frame: pd.DataFrame) -> str:
    head = "| " + " | ".join(frame.columns) + " |\n|" + "---|" * len(frame.columns) + "\n"
    return head + "".join("| " + " | ".join(_fmt(x) for x in r) + " |\n"
                          for r in frame.itertuples(index=False))


def table(df: pd.DataFrame) -> str:
    syn = df[df["part"] == "synthetic"]
    cols = ["setting", "L", "alpha1", "blockver", "vsps", "gain", "mc_blockver", "z_blockver",
            "mc_vsps", "z_vsps", "mc_gain", "se_gain", "z_gain"]
    text = ["# Block verification against token-wise speculative sampling\n",
            "Expected tokens per block of `blockver` (Sun et al. 2024, arXiv:2403.10444, "
            "Alg. 2) and `vsps`, exact and by Monte Carlo of the compiled decoders; gain = "
            "blockver / vsps.\n",
            "## Synthetic pairs (`SyntheticLM`, prompt (0, 1))\n", _md_table(syn[cols])]
    summ = logged_summary(df)
    if not summ.empty:
        text += ["\n## Logged distributions (position-wise pairs along the logged path)\n",
                 "Means over contexts; `_se`: cluster standard error over prompts (empty for "
                 "one prompt).\n", _md_table(summ)]
        lmc = df[(df["part"] == "logged") & df.get("mc_n", pd.Series(np.nan,
                                                                     index=df.index)).notna()]
        if not lmc.empty:
            text += ["\nMonte Carlo on the position-wise pairs of some contexts:\n",
                     _md_table(lmc[["draft", "position", "prompt_id", "L", "blockver",
                                    "mc_blockver", "z_blockver", "vsps", "mc_vsps", "z_vsps",
                                    "gain", "mc_gain", "z_gain"]])]
    bad = checks(df)
    zc = [c for c in ("z_blockver", "z_vsps", "z_gain") if c in df.columns]
    zs = df[zc].abs().to_numpy().ravel() if zc else np.array([])
    zs = zs[np.isfinite(zs)]
    text.append(f"\n## Checks\n\n{zs.size} Monte Carlo z-scores, largest |z| "
                f"{zs.max() if zs.size else float('nan'):.2f} (limit {Z_MAX:g}); smallest exact "
                f"gain {df['gain'].min():.6g}; ")
    text.append("all checks pass.\n" if not bad else
                f"{len(bad)} checks fail:\n\n" + "".join(f"- {b}\n" for b in bad))
    return "".join(text)


# ------------------------------------------------------------------ figure


def plot(df: pd.DataFrame, png: Path) -> None:
    plt = setup_matplotlib()
    fig, axes = plt.subplots(2, 2, figsize=(12.0, 8.4))
    syn = df[df["part"] == "synthetic"]
    settings = list(dict.fromkeys(syn["setting"]))
    ax = axes[0, 0]
    for i, s in enumerate(settings):
        g = syn[syn["setting"] == s].sort_values("L")
        ax.plot(g["L"], g["blockver"], color=f"C{i}", label=s)
        ax.plot(g["L"], g["vsps"], color=f"C{i}", ls="--")
        if "mc_blockver" in g:
            ax.errorbar(g["L"], g["mc_blockver"], yerr=2 * g["se_blockver"], fmt="o",
                        color=f"C{i}", ms=3, mfc="none")
            ax.errorbar(g["L"], g["mc_vsps"], yerr=2 * g["se_vsps"], fmt="s", color=f"C{i}",
                        ms=3, mfc="none")
    ax.set_xlabel("lookahead L")
    ax.set_ylabel("tokens per block")
    ax.set_title("synthetic pairs: blockver (solid) and vsps (dashed), exact; "
                 "Monte Carlo ± 2 se", fontsize=9)
    ax.legend(fontsize=8)
    ax = axes[0, 1]
    for i, s in enumerate(settings):
        g = syn[syn["setting"] == s].sort_values("L")
        ax.plot(g["L"], g["gain"], color=f"C{i}", label=s)
        if "mc_gain" in g:
            ax.errorbar(g["L"], g["mc_gain"], yerr=2 * g["se_gain"], fmt="o", color=f"C{i}",
                        ms=3, mfc="none")
    ax.axhline(1.0, color="black", lw=0.8)
    ax.set_xlabel("lookahead L")
    ax.set_ylabel("gain E_blockver / E_vsps")
    ax.set_title("synthetic pairs: exact gain (lines), Monte Carlo ± 2 se (markers)",
                 fontsize=9)
    summ = logged_summary(df)
    ax = axes[1, 0]
    for i, d in enumerate(dict.fromkeys(summ["draft"]) if not summ.empty else []):
        g = summ[summ["draft"] == d].sort_values("L")
        ax.errorbar(g["L"], g["gain"], yerr=2 * g["gain_se"].fillna(0.0), marker="o",
                    color=f"C{i}", capsize=3, label=d)
    ax.axhline(1.0, color="black", lw=0.8)
    ax.set_xlabel("lookahead L")
    ax.set_ylabel("mean gain over contexts")
    ax.set_title("logged distributions (position-wise pairs): mean gain ± 2 cluster se",
                 fontsize=9)
    ax.legend(fontsize=8)
    ax = axes[1, 1]
    for col, marker, dec in (("z_blockver", "o", "blockver"), ("z_vsps", "s", "vsps"),
                             ("z_gain", "^", None)):
        if col not in df.columns:
            continue
        color = decoder_color(dec) if dec else "black"
        for part, fill in (("synthetic", "none"), ("logged", color)):
            g = df[df[col].notna() & (df["part"] == part)]
            ax.plot(g["L"], g[col], marker, ms=4, mfc=fill, ls="none", color=color,
                    label=f"{col}, {part}")
    for y in (-Z_MAX, Z_MAX):
        ax.axhline(y, color="tab:red", lw=0.8, ls=":")
    ax.axhline(0.0, color="black", lw=0.6)
    ax.set_xlabel("lookahead L")
    ax.set_ylabel("z = (Monte Carlo − exact) / se")
    ax.set_title(f"every Monte Carlo check (hollow: synthetic, filled: logged; dotted: "
                 f"±{Z_MAX:g})", fontsize=9)
    ax.legend(fontsize=8)
    for a in axes.ravel():
        integer_ticks(a, df["L"])
    fig.suptitle("Block verification (Sun et al. 2024) against token-wise speculative "
                 "sampling: tokens per block and gain")
    fig.tight_layout()
    fig.savefig(png)
    plt.close(fig)


def _replace_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file of the same folder and
    ``os.replace``: a reader finds the old file or the new one, never a part."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def main(out_dir, quick: bool = False, executor=None, **params) -> list[Path]:
    """Run (or resume) the sweep; write ``blockver_gain.csv``, ``.md``, ``.png`` and
    ``blockver_gain_summary.csv`` (the logged means per draft and L, :func:`logged_summary`,
    which the figure plots)."""
    df = compute(out_dir, quick=quick, executor=executor, **params)
    csv, md, png = (out_path(out_dir, f"{NAME}{ext}") for ext in (".csv", ".md", ".png"))
    summary = out_path(out_dir, f"{NAME}_summary.csv")
    # the sweep store wrote the CSV; the others are replaced whole (never half-written)
    _replace_text(md, table(df))
    _replace_text(summary, logged_summary(df).to_csv(index=False, float_format="%.17g"))
    plot(df, png)
    return [png, csv, md, summary]


if __name__ == "__main__":
    from paper_figs._cli import cli

    cli(main, __doc__, PARAMS, NAME)
