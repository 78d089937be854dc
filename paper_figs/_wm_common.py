"""Settings of the watermark studies (Liu, Wan, Gao & Gündüz 2026, arXiv:2609.21858, §6,
App. D).

The four scripts ``wm_single_draft_frontier``, ``wm_multidraft_scaling``, ``wm_detection`` and
``wm_drafter_substitution`` run the sequence-level decoders of
:func:`specbound.sim.speculative_decode` on one synthetic target/draft pair and write
PNG + CSV.  This module holds only what they share as settings; the library does the work
(decoding, detection, :class:`specbound.sim.CachedLM`, :func:`specbound.sim.log_perplexity`,
:func:`specbound.sim.random_prompts`, :func:`specbound.sim.acceptance_compensator`,
:mod:`specbound.sim.metrics`), so a study with other settings needs only these calls.

Synthetic models (:class:`Settings`, :func:`make_models`)
    Target ``SyntheticLM(vocab_size=1000, context_length=2, seed=2026, temperature=1.0,
    top_k=None)`` (Gaussian n-gram back-off logits with the default ``scale =
    sqrt(2 log n)``): mean next-token entropy about 2.6 nats (measured by every script with
    :meth:`SyntheticLM.mean_entropy` on 500 random contexts and written to the CSV as
    ``mean_entropy_nats``), inside the 1.5-3.5 nats of chat LLMs at T = 1.  The reference
    drafter D0 is ``target.draft(0.3, seed=1)`` (independent logit noise of 0.3 ``scale``:
    per-token acceptance 1 - TV ~ 0.65, exponential race ~ 0.60).  ``--quick`` uses a
    200-token vocabulary and a handful of short sequences.

Drafters D0-D3 (:data:`DRAFTERS`, the drafter-substitution ablation of §6)
    D0 ``draft(0.3, seed=1)`` (default); D1 ``draft(0.2, seed=2)`` (another "size": a better,
    "larger" drafter with a smaller, independent noise field, like the paper's 0.5B -> 1.5B
    swap); D2 = D0 at temperature 0.5 (sharper); D3 = D0 at temperature 1.5 (more diffuse).
    The target, key, prompts and unkeyed seeds are identical across drafters.

Keys, prompts and seeds
    The watermark key is ``Settings.key``; keyed context labels hash the whole prefix
    (``window=None`` in decoder and detector, §4.1 of the paper: ``c_t = w_{:t-1}``), so no
    context repeats and the H0 pivots are exactly i.i.d. U(0, 1).  Prompts and their unkeyed
    decoding seeds are :meth:`Settings.prompt_set` (``random_prompts`` with the study seed),
    identical for every decoder, L, B and drafter.  The paper's scale is 1,000 prompts x 128
    new tokens x 3 seeds (:data:`FULL`); seed ``k`` (:meth:`Settings.runs`) decodes the same
    prompts with its own key and unkeyed seeds (seed 0: ``Settings.key`` and
    ``prompt_set().seeds``).

Standard errors (:func:`ratio_stats`, :func:`paired_ratio_diff`, :func:`paired_mean_diff`)
    The prompt is the unit of replication: a prompt's seeds are pooled first (tokens and
    blocks summed, per-sequence scores averaged), then the estimate and its delta-method
    standard error are taken over prompts.  Blocks and tokens of one sequence are never
    treated as independent.  Every decoder of a study sees the same prompts, keys and
    unkeyed seeds, so a difference between two decoders is paired by prompt (the difference
    of their per-prompt influence values), which is the honest error of that difference.
    Per-prompt values are kept beside the study's CSV (:func:`save_prompt_stats`,
    ``.NAME.prompts/``) so that differences between configurations computed by different
    sweep tasks stay paired; ``NAME_comparisons.csv`` holds every difference with its standard
    error and ``z = diff / se`` (:func:`comparison_row`).

Sweeps
    :class:`ResumableCSV` and :func:`run_sweep` are re-exported from :mod:`specbound.sweep`
    (crash-safe, resumable sweeps on any ``concurrent.futures`` executor);
    :func:`study_sweep` is the studies' choice of executor (:func:`study_map` the same for a
    study that is not a resumable sweep).

Theory prediction of AATPS
    :func:`specbound.sim.acceptance_compensator` (the martingale compensator of the accepted
    drafts, from the multiplicities ``nu`` the decoder records).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import time
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import asdict, dataclass, field, replace

import numpy as np
import pandas as pd

from paper_figs._common import Param, out_path, share
from specbound._io import atomic_write
from specbound.sim import metrics
from specbound.sim.decode import MAX_DRAFTS, MAX_NEW_TOKENS
from specbound.sim.metrics import z_score  # noqa: F401  (wc.z_score in the studies)
from specbound.sim.models import MAX_VOCAB, PromptSet, SyntheticLM, random_prompts
from specbound.sweep import (
    ResumableCSV,
    current_executor,
    local_executor,
    run_sweep,
    shutdown_now,
)

__all__ = [
    "at_most",
    "DRAFTERS",
    "FULL",
    "QUICK",
    "ResumableCSV",
    "Settings",
    "comparison_row",
    "decode",
    "default_executor",
    "load_prompt_stats",
    "make_models",
    "paired_mean_diff",
    "paired_ratio_diff",
    "ratio_stats",
    "run_sweep",
    "save_prompt_stats",
    "settings_params",
    "with_params",
    "study_map",
    "study_sweep",
    "with_extra",
    "with_task_cpu",
    "write_comparisons",
]

#: bump when a change in the code changes the numbers (invalidates resumed rows)
STUDY_VERSION = 2


@dataclass(frozen=True)
class Settings:
    """Synthetic target/draft pair, key, prompts and sizes shared by the studies."""

    vocab_size: int = 1000
    context_length: int = 2
    temperature: float = 1.0
    model_seed: int = 2026
    mismatch: float = 0.3
    draft_seed: int = 1
    key: str = "specbound-wm-study"
    prompt_length: int = 4
    n_prompts: int = 100
    max_new_tokens: int = 64
    run_seed: int = 20260
    n_seeds: int = 1
    quick: bool = False
    extra: tuple = field(default=())  # study-specific (name, value) pairs, part of signature

    def signature(self) -> str:
        """Short hash of the settings and :data:`STUDY_VERSION` (stale rows are dropped)."""
        blob = json.dumps([STUDY_VERSION, asdict(self)], sort_keys=True, default=str)
        return hashlib.blake2b(blob.encode(), digest_size=6).hexdigest()

    def columns(self) -> dict:
        """The settings as CSV columns (documented in every output row)."""
        d = asdict(self)
        d.pop("extra")
        d.update({k: v for k, v in self.extra})
        return d

    def prompt_set(self, n: int | None = None) -> PromptSet:
        """The study's ``n`` (default ``n_prompts``) prompts and per-prompt decoding seeds."""
        n = self.n_prompts if n is None else n
        return random_prompts(n, self.prompt_length, self.vocab_size, seed=self.run_seed)

    def runs(self, n_seeds: int | None = None) -> list[tuple[int, str, list]]:
        """``(k, key_k, seeds_k)`` for seeds ``k = 0..n_seeds-1`` (default ``n_seeds``): the
        same prompts, seed ``k``'s watermark key and one unkeyed seed per prompt.  Seed 0 is
        ``(Settings.key, prompt_set().seeds)``; seed ``k > 0`` uses the key
        ``f"{key}#seed{k}"`` and ``SeedSequence([run_seed, 1, k]).spawn(n_prompts)``."""
        n_seeds = self.n_seeds if n_seeds is None else n_seeds
        out = [(0, self.key, list(self.prompt_set().seeds))]
        for k in range(1, n_seeds):
            seeds = np.random.SeedSequence([self.run_seed, 1, k]).spawn(self.n_prompts)
            out.append((k, f"{self.key}#seed{k}", seeds))
        return out


#: the multi-draft paper's scale: 1,000 prompts x 128 new tokens x 3 seeds
FULL = Settings(n_prompts=1000, max_new_tokens=128, n_seeds=3)
QUICK = Settings(vocab_size=200, n_prompts=4, max_new_tokens=12, n_seeds=2, quick=True)

_SIZES = ("prompts", "tokens", "seeds")


def decode_memory(v, tokens: int | None = None) -> int:
    """Bytes a study's sweep holds for its decoded texts: every prompt, new token and seed
    of a task (the decoder's records, measured with tracemalloc at 150 bytes a generated
    token at their peak, and the generated tokens, pivots and cumulative scores kept for
    every drafter and seed) in each of the two processes of the default pool -- at most 256
    bytes a token and process.  ``tokens``: another number of new tokens than ``v.tokens``
    (a sweep of the study with its own)."""
    return 2 * 256 * v.prompts * (v.tokens if tokens is None else tokens) * v.seeds


def settings_params(full: Settings, quick: Settings) -> tuple[Param, ...]:
    """The parameters ``vocab``, ``prompts``, ``tokens``, ``seeds`` of a study whose settings
    are ``full`` (full mode) and ``quick`` (``--quick``): see :func:`with_params`."""
    return (
        Param("vocab", "int", full.vocab_size, quick.vocab_size,
              f"vocabulary of the synthetic LMs (at most {MAX_VOCAB:,})", low=2,
              high=MAX_VOCAB),
        Param("prompts", "int", full.n_prompts, quick.n_prompts, "prompts", low=1,
              memory=lambda v: share(v, "prompts", _SIZES, decode_memory(v))),
        Param("tokens", "int", full.max_new_tokens, quick.max_new_tokens,
              f"new tokens per prompt (at most {MAX_NEW_TOKENS:,})", low=1,
              high=MAX_NEW_TOKENS,
              memory=lambda v: share(v, "tokens", _SIZES, decode_memory(v))),
        Param("seeds", "int", full.n_seeds, quick.n_seeds,
              "independent seeds (watermark keys) per prompt", low=1,
              memory=lambda v: share(v, "seeds", _SIZES, decode_memory(v))),
    )


#: the longest lookahead ``--L`` of a watermark study takes (``specbound generate``'s limit)
MAX_L = 1024
#: the most drafts ``--B`` takes (``specbound.sim.speculative_decode``'s limit)
MAX_B = MAX_DRAFTS


def at_most(name: str, bound: str, given_only: bool = False):
    """A ``check`` of :class:`paper_figs._common.Param`: every value of parameter ``name`` (an
    int or a list) is at most the value of parameter ``bound`` (e.g. the detection budgets
    and the new tokens they score, a subset of prompts and the prompts).  ``given_only``:
    only a value given (not the default, which the study cuts to ``bound``)."""
    def check(v) -> str | None:
        if given_only and name not in getattr(v, "changed", {name: None}):
            return None
        x = v[name]
        top = max(x) if isinstance(x, tuple) else x
        if top > v[bound]:
            flag = "--" + bound.replace("_", "-")
            return f"{top} exceeds {flag} {v[bound]}"
        return None

    return check


def with_params(s: Settings, values) -> Settings:
    """``s`` with the values of :func:`settings_params` (those present in ``values``)."""
    names = {"vocab": "vocab_size", "prompts": "n_prompts", "tokens": "max_new_tokens",
             "seeds": "n_seeds"}
    return replace(s, **{f: values[k] for k, f in names.items() if k in values})


#: drafter name -> keyword arguments of ``SyntheticLM.draft`` (None: the Settings default)
DRAFTERS = {
    "D0": {},
    "D1": {"mismatch": 0.2, "seed": 2},
    "D2": {"temperature": 0.5},
    "D3": {"temperature": 1.5},
}

DRAFTER_LABELS = {
    "D0": "D0 (default)",
    "D1": "D1 (other size)",
    "D2": "D2 (T=0.5)",
    "D3": "D3 (T=1.5)",
}


def make_models(s: Settings, drafter: str = "D0") -> tuple[SyntheticLM, SyntheticLM]:
    """``(target, draft)`` for the settings and a drafter name of :data:`DRAFTERS`."""
    if drafter not in DRAFTERS:
        raise ValueError(f"drafter: must be one of {sorted(DRAFTERS)}, got {drafter!r}")
    target = SyntheticLM(s.vocab_size, s.context_length, seed=s.model_seed,
                         temperature=s.temperature)
    kw = dict(DRAFTERS[drafter])
    mismatch = kw.pop("mismatch", s.mismatch)
    seed = kw.pop("seed", s.draft_seed)
    return target, target.draft(mismatch, seed=seed, **kw)


# ------------------------------------------------------------------------ resumable sweeps
# The store and the runner are :mod:`specbound.sweep` (imported above as ``ResumableCSV`` and
# ``run_sweep``); the studies' policy on executors is here.

#: stands for "no executor given or set by a driver": the studies' own default applies
_STUDY_DEFAULT = object()


def default_executor(quick: bool) -> Executor | None:
    """A 2-process pool in full mode (None, i.e. serial, in quick mode and on 1 core)."""
    n = min(2, os.cpu_count() or 1)
    if quick or n < 2:
        return None
    return local_executor(n)


def study_sweep(configs, worker: Callable, store: ResumableCSV, *, quick: bool,
                executor: Executor | None = None, desc: str = "", progress: bool = True
                ) -> pd.DataFrame:
    """:func:`specbound.sweep.run_sweep` with the studies' choice of executor.

    The caller's ``executor`` if given; else the one a driver set with
    :func:`specbound.sweep.use_executor` (``paper_figs.run_all --executor``, the
    ``SPECBOUND_EXECUTOR`` environment variable); else a 2-process pool in full mode and
    serial in quick mode.  A pool made here is shut down afterwards, at once (queued tasks
    cancelled, workers terminated) if the sweep is interrupted.
    """
    ex = executor if executor is not None else current_executor(_STUDY_DEFAULT)
    own = ex is _STUDY_DEFAULT
    if own:
        ex = default_executor(quick)
    try:
        out = run_sweep(configs, worker, store, desc=desc, executor=ex, progress=progress)
    except BaseException:
        if own:
            shutdown_now(ex)
        raise
    if own and ex is not None:
        ex.shutdown()
    return out


def study_map(worker: Callable, args: list, *, quick: bool, executor: Executor | None = None
              ) -> list:
    """``[worker(a) for a in args]`` on the studies' executor (the policy of
    :func:`study_sweep`: the caller's, else the driver's, else a 2-process pool in full mode
    and serial in quick mode), in the order of ``args`` whatever the order of completion;
    for a study that is not a resumable sweep.  A pool made here is shut down afterwards (at
    once if interrupted)."""
    ex = executor if executor is not None else current_executor(_STUDY_DEFAULT)
    own = ex is _STUDY_DEFAULT
    if own:
        ex = default_executor(quick)
    if ex is None:
        return [worker(a) for a in args]
    try:
        futures = [ex.submit(worker, a) for a in args]
        out = [f.result() for f in futures]
    except BaseException:
        if own:
            shutdown_now(ex)
        raise
    if own:
        ex.shutdown()
    return out


def with_extra(s: Settings, **extra) -> Settings:
    """Settings with study-specific parameters added to the signature and CSV columns."""
    return replace(s, extra=tuple(sorted({**dict(s.extra), **extra}.items())))


def write_outputs(out_dir, name: str, df, plot, table=None) -> list:
    """Finish a resumable study: ``compute`` already wrote ``NAME.csv`` row by row; write the
    PNG (``plot(df, png)``) and, if ``table`` is given, the markdown ``NAME.md``."""
    png = out_path(out_dir, f"{name}.png")
    paths = [png, out_path(out_dir, f"{name}.csv")]
    if table is not None:
        md = out_path(out_dir, f"{name}.md")
        md.write_text(table(df))
        paths.append(md)
    plot(df, png)
    return paths


def write_frame_outputs(out_dir, name: str, df, plot, table) -> list:
    """Write a study table computed from stored runs: ``NAME.csv`` (``df``), ``NAME.md``
    (``table(df)``) and ``NAME.png`` (``plot(df, png)``); their paths, PNG first."""
    df.to_csv(out_path(out_dir, f"{name}.csv"), index=False, float_format="%.10g")
    return write_outputs(out_dir, name, df, plot, table)


# ------------------------------------------------------------------------------ decoding


def decode(target, draft, prompts, seeds, decoder, *, L, B=1, key, max_new_tokens,
           **options) -> list:
    """Decode every prompt (prompt ``i`` with ``seeds[i]``); a list of ``DecodeResult``.

    Every run, with any decoder options (``window``, ``repeats``, ``unkeyed``, ``residual``,
    ``reweight``), goes through the compiled batch decoder
    :func:`specbound.sim.speculative_decode_batch` (on the calling thread: the studies'
    parallelism is the sweep's process pool); it gives the tokens of
    :func:`specbound.sim.speculative_decode` prompt by prompt.
    """
    from specbound.sim import speculative_decode_batch

    return list(speculative_decode_batch(target, draft, prompts, decoder, L=L, B=B, key=key,
                                         max_new_tokens=max_new_tokens, seed=list(seeds),
                                         parallel=False, **options))


# ----------------------------------------------------------- per-prompt statistics, SEs


def ratio_stats(num, den) -> tuple[float, float, np.ndarray]:
    """Pooled ratio ``sum num / sum den`` over prompts, its cluster standard error
    (:func:`specbound.sim.metrics.cluster_ratio_se`) and the per-prompt influence values
    ``psi_i`` (:func:`specbound.sim.metrics.ratio_influence`; ``se = sd(psi) / sqrt(m)``).
    ``num``, ``den``: one value per prompt (seeds pooled)."""
    est = metrics.cluster_ratio_se(num, den)
    return est.mean, est.stderr, metrics.ratio_influence(num, den)


def prompt_mean_se(x) -> tuple[float, float]:
    """Mean and standard error over prompts of a per-prompt value (NaN entries dropped;
    :func:`specbound.sim.metrics.mean_se`)."""
    x = np.asarray(x, dtype=np.float64)
    est = metrics.mean_se(x[np.isfinite(x)])
    return est.mean, est.stderr


def _as_row(est: metrics.PairedDifference) -> dict:
    return {"value_a": est.value_a, "value_b": est.value_b, "diff": est.diff,
            "diff_se": est.diff_se, "n_prompts": est.n}


def paired_ratio_diff(a: dict, b: dict, num: str = "tokens", den: str = "blocks") -> dict:
    """Difference of two pooled ratios on the same prompts (``a[num] / a[den]`` minus
    ``b[num] / b[den]``, per-prompt arrays) with the paired delta-method standard error
    (:func:`specbound.sim.metrics.paired_ratio_diff`), as the columns of a comparison row."""
    return _as_row(metrics.paired_ratio_diff(a[num], a[den], b[num], b[den]))


def paired_mean_diff(xa, xb) -> dict:
    """Difference of the means over prompts of two per-prompt values, paired by prompt
    (prompts where either is NaN dropped; :func:`specbound.sim.metrics.paired_mean_diff`)."""
    xa = np.asarray(xa, dtype=np.float64)
    xb = np.asarray(xb, dtype=np.float64)
    ok = np.isfinite(xa) & np.isfinite(xb)
    return _as_row(metrics.paired_mean_diff(xa[ok], xb[ok]))


def comparison_row(comparison: str, metric: str, a: str, b: str, est: dict, **where) -> dict:
    """One row of ``NAME_comparisons.csv``: what is compared (``a`` minus ``b`` on
    ``metric``), where (``L``, ``B``, ``T_eval``, ...), both values, the difference, its
    standard error and ``z``."""
    return {"comparison": comparison, "metric": metric, "a": a, "b": b, **where, **est,
            "z": z_score(est["diff"], est["diff_se"])}


def _stats_dir(out_dir, name: str, signature: str):
    from pathlib import Path

    return Path(out_dir) / f".{name}.prompts" / signature


def save_prompt_stats(out_dir, name: str, signature: str, config: str, stats: dict) -> None:
    """Keep one sweep task's per-prompt arrays (``{label: {field: array}}``) beside the
    study's CSV, atomically (written before the task's rows are stored, so a stored task
    always has them)."""
    d = _stats_dir(out_dir, name, signature)
    d.mkdir(parents=True, exist_ok=True)
    flat = {f"{label}|{field}": np.asarray(v) for label, fields in stats.items()
            for field, v in fields.items()}
    safe = hashlib.blake2b(config.encode(), digest_size=8).hexdigest()
    buf = io.BytesIO()
    np.savez(buf, **flat)
    atomic_write(d / f"{safe}.npz", buf.getvalue())


def load_prompt_stats(out_dir, name: str, signature: str) -> dict:
    """Every per-prompt array saved by :func:`save_prompt_stats` under ``signature``:
    ``{label: {field: array}}``."""
    out: dict = {}
    d = _stats_dir(out_dir, name, signature)
    for f in sorted(d.glob("*.npz")) if d.is_dir() else ():
        with np.load(f) as z:
            for k in z.files:
                label, field_ = k.rsplit("|", 1)
                out.setdefault(label, {})[field_] = z[k]
    return out


def with_task_cpu(rows: list, cpu0: float) -> list:
    """The rows with the sweep task's CPU seconds (``time.process_time() - cpu0`` in the
    worker) as column ``task_cpu_s``: the study's cost independent of the machine's load."""
    cpu = round(time.process_time() - cpu0, 2)
    return [{**r, "task_cpu_s": cpu} for r in rows]


def write_comparisons(out_dir, name: str, rows: list) -> pd.DataFrame:
    """Write ``NAME_comparisons.csv`` (the rows of :func:`comparison_row`)."""
    df = pd.DataFrame(rows)
    df.to_csv(out_path(out_dir, f"{name}_comparisons.csv"), index=False, float_format="%.10g")
    return df
