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

Theory prediction of AATPS
    :func:`specbound.sim.acceptance_compensator` (the martingale compensator of the accepted
    drafts, from the multiplicities ``nu`` the decoder records).
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor, as_completed
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from paper_figs._common import out_path
from specbound.sim.models import PromptSet, SyntheticLM, random_prompts

__all__ = [
    "DRAFTERS",
    "FULL",
    "QUICK",
    "ResumableCSV",
    "Settings",
    "default_executor",
    "make_models",
    "run_sweep",
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


class ResumableCSV:
    """Append-only CSV of finished configurations, so an interrupted sweep resumes.

    Every row carries a ``config`` id and the ``signature`` of the settings; on opening, rows
    with another signature (other settings or code version) are dropped and the file is
    rewritten.  :meth:`append` writes all rows of one configuration in a single write and
    flushes, so a configuration is either complete in the file or recomputed.
    """

    def __init__(self, path, signature: str):
        self.path = Path(path)
        self.signature = signature
        self.columns: list[str] | None = None
        self._done: set[str] = set()
        if self.path.exists() and self.path.stat().st_size > 0:
            try:
                df = self._read()
            except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError):
                df = None
            cols = {"config", "signature", "config_rows"}
            if df is not None and cols <= set(df.columns):
                keep = df[df["signature"] == signature]
                # a configuration counts as done only if all its rows were written
                counts = keep.groupby("config")["config"].transform("size")
                keep = keep[counts == keep["config_rows"]]
                self.columns = list(df.columns)
                self._done = set(keep["config"])
                if len(keep) != len(df):
                    keep.to_csv(self.path, index=False)
            else:
                self.path.unlink()

    def done(self, config: str) -> bool:
        return config in self._done

    def append(self, config: str, rows: Sequence[dict]) -> None:
        """Append all rows of configuration ``config`` (a non-empty id other than "nan")."""
        if not isinstance(config, str) or config in ("", "nan"):
            raise ValueError(f"config: must be a non-empty string other than 'nan', got "
                             f"{config!r}")
        n = len(rows)
        rows = [{"config": config, "signature": self.signature, "config_rows": n, **r}
                for r in rows]
        if not rows:
            return
        cols: list[str] = list(self.columns or [])
        for r in rows:
            cols += [c for c in r if c not in cols]
        if self.columns is None or cols != self.columns:
            # new file, or rows with new columns: (re)write the header with the union
            old = self.frame() if self.columns is not None else pd.DataFrame()
            self.columns = cols
            old.reindex(columns=cols).to_csv(self.path, index=False)
        lines = [[_fmt(r.get(c, "")) for c in self.columns] for r in rows]
        with open(self.path, "a", newline="") as fh:
            csv.writer(fh).writerows(lines)
            fh.flush()
            os.fsync(fh.fileno())
        self._done.add(config)

    def _read(self) -> pd.DataFrame:
        # only empty fields and "nan" are missing values: ids such as "null" or "NA" stay
        # strings
        return pd.read_csv(self.path, dtype={"config": str, "signature": str},
                           keep_default_na=False, na_values=["", "nan"])

    def frame(self) -> pd.DataFrame:
        """The stored rows (current signature only)."""
        if not self.path.exists():
            return pd.DataFrame()
        return self._read()


def _fmt(v):
    if isinstance(v, float | np.floating):
        return repr(float(v))
    if isinstance(v, np.integer):
        return int(v)
    return v


def default_executor(quick: bool) -> Executor | None:
    """A 2-process pool in full mode (None, i.e. serial, in quick mode and on 1 core)."""
    n = min(2, os.cpu_count() or 1)
    if quick or n < 2:
        return None
    from concurrent.futures import ProcessPoolExecutor

    return ProcessPoolExecutor(max_workers=n)


def run_sweep(configs: Iterable[tuple[str, object]], worker: Callable, store: ResumableCSV, *,
              desc: str = "", executor: Executor | None = None, progress: bool = True
              ) -> pd.DataFrame:
    """Run ``worker(arg) -> list[dict]`` for every pending ``(config_id, arg)`` and store rows.

    Configurations already in ``store`` are skipped; each finished configuration is appended
    at once (so Ctrl-C loses at most the configurations in flight).  ``executor`` is any
    :class:`concurrent.futures.Executor` (a local process pool, a Dask or Ray executor);
    None runs serially.  Returns the stored rows as a DataFrame.
    """
    from tqdm.auto import tqdm

    todo = [(c, a) for c, a in configs if not store.done(c)]
    bar = tqdm(total=len(todo), desc=desc, disable=not progress or not todo, leave=False)
    try:
        if executor is None:
            for c, a in todo:
                store.append(c, worker(a))
                bar.update()
        else:
            futs = {executor.submit(worker, a): c for c, a in todo}
            for fut in as_completed(futs):
                store.append(futs[fut], fut.result())
                bar.update()
    finally:
        bar.close()
    return store.frame()


def study_sweep(configs, worker: Callable, store: ResumableCSV, *, quick: bool,
                executor: Executor | None = None, desc: str = "", progress: bool = True
                ) -> pd.DataFrame:
    """:func:`run_sweep` with the studies' default executor: the caller's ``executor`` if given,
    else a 2-process pool in full mode (shut down afterwards) and serial in quick mode."""
    own = executor is None and not quick
    ex = default_executor(quick) if own else executor
    try:
        return run_sweep(configs, worker, store, desc=desc, executor=ex, progress=progress)
    finally:
        if own and ex is not None:
            ex.shutdown()


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
