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
    identical for every decoder, L, B and drafter.

Sweeps
    :class:`ResumableCSV` and :func:`run_sweep` are re-exported from :mod:`specbound.sweep`
    (crash-safe, resumable sweeps on any ``concurrent.futures`` executor);
    :func:`study_sweep` is the studies' choice of executor.

Theory prediction of AATPS
    :func:`specbound.sim.acceptance_compensator` (the martingale compensator of the accepted
    drafts, from the multiplicities ``nu`` the decoder records).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import asdict, dataclass, field, replace

import pandas as pd

from paper_figs._common import out_path
from specbound.sim.models import PromptSet, SyntheticLM, random_prompts
from specbound.sweep import (
    ResumableCSV,
    current_executor,
    local_executor,
    run_sweep,
    shutdown_now,
)

__all__ = [
    "DRAFTERS",
    "FULL",
    "QUICK",
    "ResumableCSV",
    "Settings",
    "default_executor",
    "make_models",
    "run_sweep",
    "study_sweep",
    "with_extra",
]

#: bump when a change in the code changes the numbers (invalidates resumed rows)
STUDY_VERSION = 1


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


FULL = Settings()
QUICK = Settings(vocab_size=200, n_prompts=3, max_new_tokens=12, quick=True)

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
