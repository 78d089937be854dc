"""Helpers of the figure scripts that read a real distribution log (``real_*``).

Which log: ``--log DIR`` names a folder written by ``specbound.llm.logs.DistributionLog``
(e.g. ``specbound log --out DIR``); without it a full run uses the *study log* and a quick
run the shipped one (``specbound.llm.shipped_log()``: 12 prompts x 48 tokens).  The study
log (:func:`study_log`, folder ``real_log/`` of the output folder, built on first use and
resumed prompt by prompt) is the shipped log's recipe at the scale of the real decoding
studies: the same 64 prompts as :mod:`paper_figs._real_runs` (24 HumanEval, 24 ShareGPT, 16
summarisation prompts), 64 tokens sampled by the target per prompt, the shipped log's four
drafts at every context, the processing of Liu, Wan, Gao & Gündüz (2026, arXiv:2609.21858,
App. D.1: temperature 1, top-k 50).
Logged pairs are handled on their compact support (the union of the two stored supports,
exact when the tails are 0, see ``LoggedDistributions.pairs``); batches of pairs are padded
with tokens of probability 0 under both models, which changes no formula.
"""

from __future__ import annotations

import functools
import hashlib
import json
import shutil
from pathlib import Path

import numpy as np

from paper_figs._common import Param

#: the ``--log DIR`` parameter of every script that reads a log (None: the study log in a
#: full run, the shipped log in a quick run; :func:`resolve_log`)
LOG_PARAM = Param("log", "path", None, None,
                  "folder of a distribution log (None: the study log real_log/ of the "
                  "output folder in a full run, built on first use; the shipped log, "
                  "specbound.llm.shipped_log(), in a quick run)",
                  check=lambda v: _log_message(v.log))
def _log_message(log) -> str | None:
    """Why ``--log`` names no distribution log (not a folder, or a folder without the log's
    ``manifest.json``, e.g. the current folder given as an empty text), or None; the log
    itself is checked when it is read."""
    if log is None:
        return None
    if not Path(log).is_dir():
        return f"{str(log)[:200]!r} is not a folder"
    if not (Path(log) / "manifest.json").is_file():
        return f"{str(log)[:200]!r} is not a distribution log (no manifest.json)"
    return None


#: the study log's folder under the output folder, its drafts (the shipped log's), the seed of
#: the target's samples
STUDY_LOG = "real_log"
STUDY_DRAFTS = ("temperature:0.5", "temperature:1.5", "early_exit:28", "quantized:3")
STUDY_SEED = 2026


def study_log_path(out_dir) -> Path:
    """The folder of the study log of output folder ``out_dir``."""
    return Path(out_dir) / STUDY_LOG


def study_log(out_dir, progress: bool = True, settings=None) -> Path:
    """Build the study log in ``out_dir/real_log`` (or resume it: a complete prompt is never
    redone; a complete log costs only the model load) and return its folder (module
    docstring).  One prompt at a time on one torch thread: 412 s on one core for the 64
    prompts (measured 2026-12-02, quiet machine).  ``settings``: the real runs' settings
    whose prompts, new tokens, model and processing the log takes (default
    ``paper_figs._real_runs.FULL``)."""
    import torch

    from paper_figs import _real_runs as rr
    from specbound import llm
    from specbound.llm.logs import log_distributions

    path = study_log_path(out_dir)
    s = rr.FULL if settings is None else settings
    if path.exists() and _settings_of(path) != s.signature():
        shutil.rmtree(path)  # made with other settings (a derived file): rebuilt
    if complete_log(path):
        return path
    torch.set_num_threads(1)
    pair = llm.load_pair(s.target, draft=STUDY_DRAFTS[0], device="cpu",
                         temperature=s.temperature, top_k=s.top_k)
    texts = rr.prompt_texts(s, pair)
    labels = [f"{name} #{i}" for name, i, _ in texts]
    log_distributions(pair, [t for _, _, t in texts], drafts=list(STUDY_DRAFTS),
                      max_new_tokens=s.max_new_tokens, seed=STUDY_SEED, path=path,
                      resume=True, progress=progress, prompt_labels=labels,
                      extra={"script": "paper_figs._real_log.study_log",
                             "settings": s.signature()})
    return path


def _settings_of(path):
    """The real-runs settings signature a study log at ``path`` was made with (None if none)."""
    try:
        meta = json.loads((Path(path) / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return (meta.get("meta", {}).get("extra") or {}).get("settings")


def complete_log(path) -> bool:
    """Whether ``path`` holds a log every prompt of which was logged."""
    from specbound.llm.logs import read_log

    path = Path(path)
    if not (path / "manifest.json").is_file():
        return False
    try:
        lg = read_log(path)
    except ValueError:
        return False
    return len(set(int(i) for i in lg.prompt_ids)) == len(lg.meta.get("prompts") or {}) > 0


def resolve_log(log, out_dir, quick: bool, progress: bool = True):
    """The log a script reads: ``log`` if given, the shipped log (None) in a quick run, else
    the study log of ``out_dir`` (built or resumed here)."""
    if log is not None:
        return log
    if quick:
        return None
    return str(study_log(out_dir, progress=progress))


def index_log(out_dir):
    """The log of the claims computed at INDEX time on output folder ``out_dir``: its study
    log where complete (a full run), else the shipped log (None)."""
    path = study_log_path(out_dir)
    return str(path) if complete_log(path) else None


#: ``--contexts N``: logged contexts used per draft (0: all of them)
QUICK_CONTEXTS = 12


def contexts_param(full: int = 0, quick: int = QUICK_CONTEXTS, memory=None) -> Param:
    """The ``--contexts N`` parameter: evenly spaced logged contexts per draft, 0 for all
    (at most the log's: :func:`contexts_message`); ``memory``: the study's estimate
    (:func:`lossy_memory`, :func:`bounds_memory`)."""
    return Param("contexts", "int", full, quick,
                 "logged contexts per draft, evenly spaced (0: all; at most the log's)",
                 low=0, memory=memory,
                 check=functools.partial(contexts_message, defaults=(full, quick)))


def logged_contexts(v) -> int | None:
    """The contexts per draft of the log a run reads, as the command line is parsed
    (:func:`log_shape`); None when only an upper bound is known (the study log of a full
    run before it is built, counted from its recipe) or the folder does not say."""
    if v.log is None and not v.quick:
        return None
    shape = log_shape(v.log, v.quick)
    return None if shape is None else shape[0]


def contexts_message(v, defaults=None) -> str | None:
    """Why ``--contexts`` asks for more contexts than the log holds (they would silently be
    all of them; ``0`` asks for all), or None.  ``defaults``: the study's own ``(full,
    quick)`` values, which are not refused (a small user log takes all its contexts, and
    :func:`chosen_contexts` says so on stderr)."""
    if defaults is not None and v.contexts == defaults[1 if v.quick else 0]:
        return None
    n = logged_contexts(v)
    if n is not None and v.contexts > n:
        return (f"{v.contexts} exceeds the {n} contexts per draft of the log (--contexts 0 "
                f"takes all of them)")
    return None


def chosen_contexts(v, n: int, name: str) -> int:
    """The contexts per draft a run of a log of ``n`` contexts uses: ``--contexts`` (0: all);
    a ``--contexts`` above ``n`` (possible only for the study log of a full run, counted
    from its recipe as the command line is parsed) is said on stderr: all ``n`` are used."""
    if v.contexts and v.contexts > n:
        from paper_figs._common import note

        note(name, f"--contexts {v.contexts}: the log holds {n} contexts per draft; all "
                   f"{n} are used")
    return n if not v.contexts else min(v.contexts, n)


#: bytes a worker of ``real_lossy`` holds per cell (context x token of the compact support)
#: of its padded pair arrays: the pairs, the rules' masks, induced laws and distortions at
#: once (measured with tracemalloc on the shipped log: 133 bytes a cell for the frontier's
#: worker, 90 for Lemma 1's)
CELL_BYTES = 160
#: bytes of one row of ``real_bounds`` (a context, a draft and a B: a dict of about 25
#: values in the worker, the CSV line and the frame); an upper estimate
BOUNDS_ROW_BYTES = 4096


def log_shape(log, quick: bool) -> tuple[int, int, int] | None:
    """``(positions, width, drafts)`` of the log a run reads (:func:`resolve_log`), from its
    ``manifest.json`` and ``contexts.jsonl`` alone (no array is read): the logged contexts,
    the widest compact pair (the union of two stored supports: at most twice the stored
    tokens, ``max_stored`` or the top-k of its processing, plus one) and the drafts.  The
    study log of a full run, not built yet, is counted from its recipe
    (``paper_figs._real_runs.FULL``: every prompt, every new token, top-k 50).  None when the
    folder does not say (a malformed log is reported when it is read)."""
    if log is None and not quick:
        from paper_figs import _real_runs as rr

        s = rr.FULL
        n = s.per_set * len(s.sets) * s.max_new_tokens
        return n, 2 * s.top_k + 1, len(STUDY_DRAFTS)
    if log is None:
        from specbound.llm.logs import shipped_log_path

        log = shipped_log_path()
    try:
        doc = json.loads((Path(log) / "manifest.json").read_text(encoding="utf-8"))
        meta = doc["meta"]
        stored = int(meta.get("max_stored") or 256)
        top_k = (meta.get("processing") or {}).get("top_k")
        if isinstance(top_k, int) and top_k > 0:
            stored = min(stored, top_k)
        drafts = len(meta["drafts"])
        n = 0
        with open(Path(log) / "contexts.jsonl", encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    n += int(json.loads(line).get("positions", 0))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return n, 2 * stored + 1, drafts


def _contexts(v, n: int) -> int:
    return n if not v.contexts else min(v.contexts, n)


def lossy_memory(v) -> int:
    """Bytes ``real_lossy`` holds at its peak: each worker's padded pairs of one draft over
    the chosen contexts (:data:`CELL_BYTES` a cell of :func:`log_shape`), in the processes
    of the default pool (one in quick mode)."""
    from paper_figs._real_runs import study_processes

    shape = log_shape(v.log, v.quick)
    if shape is None:
        return 0
    n, width, _ = shape
    return study_processes(v.quick) * CELL_BYTES * _contexts(v, n) * width


def bounds_memory(v) -> int:
    """Bytes of ``real_bounds``' rows (:data:`BOUNDS_ROW_BYTES`: every draft, B and chosen
    context of :func:`log_shape`)."""
    shape = log_shape(v.log, v.quick)
    if shape is None:
        return 0
    n, _, drafts = shape
    return BOUNDS_ROW_BYTES * drafts * len(v.B) * _contexts(v, n)


def store_signature(name: str, version: int, log, quick: bool, changed: dict) -> str:
    """The signature of a script's resumable store: script, version, the log's contents, the
    mode and the non-default parameters (none: the signature of earlier versions)."""
    sig = f"{name}-v{version}-{log_signature(log)}-{'quick' if quick else 'full'}"
    rest = {k: v for k, v in changed.items() if k != "log"}  # the log is in its signature
    if rest:
        blob = json.dumps(rest, sort_keys=True)
        sig += "-" + hashlib.blake2b(blob.encode(), digest_size=6).hexdigest()
    return sig


def open_log(log=None):
    """The shipped log (``log`` None) or the log in folder ``log``."""
    from specbound.llm.logs import read_log, shipped_log

    return shipped_log() if log is None else read_log(log)


def log_signature(log) -> str:
    """A short fingerprint of a log's contents (its metadata and stored arrays), so that a
    resumable store made from one log is never reused for another."""
    h = hashlib.sha256(repr(sorted(log.meta.items())).encode())
    h.update(str(len(log)).encode())
    for d in log.drafts:
        for name, arr in sorted(log[d].arrays().items()):
            h.update(name.encode())
            h.update(np.ascontiguousarray(arr).tobytes())
    return h.hexdigest()[:16]


def in_draft_order(df, drafts, by=()):
    """``df`` sorted by the position of its ``draft`` in ``drafts`` (the log's order), then
    by the columns ``by``, stably (a sweep store holds its rows in completion order)."""
    if df.empty:
        return df
    rank = {d: i for i, d in enumerate(drafts)}
    return (df.assign(_o=df["draft"].map(rank)).sort_values(["_o", *by], kind="stable")
            .drop(columns="_o").reset_index(drop=True))


def subsample(n: int, k: int | None) -> np.ndarray:
    """``k`` evenly spaced positions out of ``n`` (all when ``k`` is None, 0 or >= n)."""
    if not k or k >= n:
        return np.arange(n)
    return np.unique(np.round(np.linspace(0, n - 1, k)).astype(np.int64))


def padded_pairs(log, draft: str, positions=None) -> tuple[np.ndarray, np.ndarray, list]:
    """The logged pairs at ``positions`` (None: every pair) as two zero-padded 2-D arrays
    (rows sum to 1)."""
    pairs = list(log.pairs(draft))
    if positions is not None:
        pos = set(int(i) for i in positions)
        pairs = [lp for lp in pairs if lp.position in pos]
    width = max(lp.p.size for lp in pairs)
    P = np.zeros((len(pairs), width))
    Q = np.zeros((len(pairs), width))
    for i, lp in enumerate(pairs):
        P[i, : lp.p.size] = lp.p
        Q[i, : lp.q.size] = lp.q
    return P, Q, pairs


def index_file_stale(out_dir, name: str) -> bool:
    """Whether the INDEX-time CSV ``name`` of ``out_dir`` must be (re)computed: it is missing,
    or older than ``real_lossy.csv`` (which a run writes after its log is in place, so a CSV
    from an earlier log, e.g. the shipped one before the study log was built, is redone)."""
    path, lossy = Path(out_dir) / name, Path(out_dir) / "real_lossy.csv"
    if not path.is_file():
        return True
    return lossy.is_file() and path.stat().st_mtime_ns < lossy.stat().st_mtime_ns


def refresh_index_csv(out_dir, name: str, produce) -> bool:
    """(Re)compute the INDEX-time CSV ``name`` of ``out_dir`` with ``produce(out_dir, log)``
    on the run's log (:func:`index_log`) where it is stale (:func:`index_file_stale`) and
    ``real_lossy`` has run; whether the CSV is there afterwards."""
    path = Path(out_dir) / name
    if index_file_stale(out_dir, name) and (Path(out_dir) / "real_lossy.csv").is_file():
        produce(out_dir, index_log(out_dir))
    return path.is_file()
