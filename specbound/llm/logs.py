r"""Logged real next-token distributions: a target and several drafts at the same contexts.

A :class:`DistributionLog` is a folder that holds, for every logged context of a real model
pair, the target's processed next-token distribution ``p`` and each draft's ``q`` at the
same context, in the sparse top-k format of :mod:`specbound.sim.logged` (one
:class:`~specbound.sim.logged.LogWriter` sub-log per draft, the same target rows in each)
plus the contexts' token ids::

    manifest.json       format tag, version, the drafts and their sub-folders, metadata
    draft0-<spec>/      a specbound.logged log: p = target, q = draft 0
    draft1-<spec>/      ... one per draft, positions in the same order
    target-only/        (if needed) contexts recorded without any draft distribution
                        (e.g. the bonus position after L accepted drafts): p, and q = p
    contexts.jsonl      one line per committed prompt: its context token ids

Metadata (in ``manifest.json`` and, except the prompts and with the draft's own
``draft_model``, in every sub-log): ``vocab_size``, ``target_model``, ``drafts``,
``processing`` (temperature, top-k, top-p applied to both models before logging),
``decoder`` (what produced the contexts: ``"ar"`` for the target's own samples, a
decoder name for a speculative run), ``key_id`` (:func:`specbound.sim.prf.key_id` of the
decoder's key, never the key itself), ``prompts`` (prompt id -> prompt text, when known in
advance) and free ``extra`` settings.

What is stored per distribution: every token of non-zero probability when there are at
most ``max_stored`` of them, else the ``max_stored`` most likely ones plus the remaining
(tail) mass.  Under top-k processing with ``top_k <= max_stored`` (the shipped log uses
``top_k = 50``, the setting of Liu, Wan, Gao & Gündüz 2026, arXiv:2609.21858, App. D.1)
every tail is 0 and the log is exact: :meth:`LoggedDistributions.pairs` rebuilds each
``(p, q)`` on the union of the two supports, where every theory formula gives the same value
as on the full vocabulary.  With non-zero tails it falls back to the common coarsening of
:mod:`specbound.sim.logged` (tokens stored for both models plus one OTHER pseudo-token).

Crash safety and resuming.  :meth:`DistributionLog.record` buffers the contexts of the
current prompt; a prompt is committed when a record of another prompt arrives, at
:meth:`DistributionLog.flush` and at :meth:`DistributionLog.close`: first every sub-log
commits the prompt's positions (atomically, as :mod:`specbound.sim.logged` does), then one
line is appended to ``contexts.jsonl`` and fsynced -- that line is the commit of the
prompt.  Reopened with ``resume=True``, a log keeps exactly the prompts with a complete line
(sub-log positions beyond them, from a crash between the two steps, and a torn last line are
discarded), so every prompt is either complete in every sub-log or absent from all.

:func:`log_distributions` walks the target's own sampled continuation of each prompt
(autoregressive sampling, seeded per prompt) and logs ``p`` and every draft's ``q`` along it
with one teacher-forced forward per model and prompt; prompts already in the log are
skipped.  :func:`shipped_log` opens the small log committed with the package (made by
``scripts/make_log.py``).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from specbound._io import atomic_write, read_manifest
from specbound._validation import as_bool, as_int
from specbound.sim.logged import LogReader, LogWriter

__all__ = ["DistributionLog", "LoggedDistributions", "LoggedPair", "log_distributions",
           "read_log", "shipped_log", "sparse_top"]

FORMAT = "specbound.llm.distribution_log"
VERSION = 1
MANIFEST = "manifest.json"
CONTEXTS = "contexts.jsonl"
DEFAULT_MAX_STORED = 256
#: folder of the shipped log inside the package
SHIPPED = ("data", "shipped_log")
_ZERO_TAIL = 1e-12
#: sub-log of the contexts recorded without a draft distribution (its q column repeats p)
TARGET_ONLY = "target-only"
TARGET_ONLY_NAME = "(target only)"


def _subdir(i: int, spec: str) -> str:
    return f"draft{i}-" + re.sub(r"[^A-Za-z0-9_.=+-]", "_", spec)


def sparse_top(p, max_stored: int = DEFAULT_MAX_STORED, name: str = "p"):
    """Stored part of one distribution: (token ids ascending, probabilities, tail mass).

    Every token with non-zero probability when there are at most ``max_stored`` of them,
    else the ``max_stored`` most likely (ties broken towards the smaller token id); the tail
    is ``1 - sum(stored)`` (clipped at 0).
    """
    arr = np.asarray(p)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name}: must be a non-empty 1-D probability vector, got shape "
                         f"{arr.shape}")
    if arr.dtype.kind not in "fiu":
        raise ValueError(f"{name}: must hold real numbers, got dtype {arr.dtype}")
    arr = arr.astype(np.float64, copy=False)
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise ValueError(f"{name}: probabilities must be finite and non-negative")
    s = float(arr.sum())
    if abs(s - 1.0) > 1e-6:
        raise ValueError(f"{name}: must sum to 1 (within 1e-6), sums to {s:.9g}")
    idx = np.flatnonzero(arr > 0)
    if idx.size > max_stored:
        # stable order: probability descending, then token id ascending
        order = np.lexsort((idx, -arr[idx]))[:max_stored]
        idx = np.sort(idx[order])
    val = arr[idx]
    tail = max(0.0, 1.0 - float(val.sum())) if idx.size < np.count_nonzero(arr) else 0.0
    return idx.astype(np.int64), val, tail


# ----------------------------------------------------------------------------- contexts


def _read_contexts(path: Path, repair: bool) -> list[dict]:
    """Complete lines of ``contexts.jsonl``; a torn last line is cut off when ``repair``."""
    f = path / CONTEXTS
    if not f.exists():
        return []
    data = f.read_bytes()
    out, good = [], 0
    pos = 0
    while pos < len(data):
        end = data.find(b"\n", pos)
        if end < 0:
            break
        try:
            rec = json.loads(data[pos:end].decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            break
        out.append(rec)
        pos = good = end + 1
    if good < len(data) and repair:
        with open(f, "r+b") as fh:
            fh.truncate(good)
            fh.flush()
            os.fsync(fh.fileno())
    return out


def _compress_contexts(contexts: list[np.ndarray]) -> tuple[list[list[int]], list[list[int]]]:
    """Store ragged contexts as a few sequences + (sequence, length) per context.

    A context that is a prefix of a stored sequence refers to it; a stored sequence that is a
    prefix of the context is extended; otherwise a new sequence is added.  The contexts of one
    generated text (all prefixes of it) take one sequence.
    """
    seqs: list[list[int]] = []
    refs: list[list[int]] = []
    for ctx in contexts:
        c = [int(t) for t in ctx]
        for j, s in enumerate(seqs):
            n = min(len(s), len(c))
            if s[:n] == c[:n]:
                if len(c) > len(s):
                    seqs[j] = c
                refs.append([j, len(c)])
                break
        else:
            seqs.append(c)
            refs.append([len(seqs) - 1, len(c)])
    return seqs, refs


# ----------------------------------------------------------------------------- writer


class DistributionLog:
    """Writer of a target-and-drafts distribution log (see the module docstring).

    Parameters
    ----------
    path : str or Path
        Folder of the log (created).
    vocab_size : int
        Length of every distribution.
    drafts : sequence of str
        Names (spec texts) of the drafts whose distributions each record carries, in order.
    target_model : str
        Name of the target.
    processing : dict
        The shared logits processing, e.g. ``{"temperature": 1.0, "top_k": 50, "top_p": None}``.
    decoder : str, default "ar"
        What produced the contexts.
    key_id : str, optional
        Fingerprint of the decoder's key (:func:`specbound.sim.prf.key_id`).
    prompts : dict or sequence of str, optional
        Prompt id -> prompt text (a sequence: ids 0, 1, ...).
    extra : dict, optional
        Further JSON metadata (e.g. the seed and lengths of the run).
    max_stored : int, default 256
        At most this many tokens stored per distribution (see :func:`sparse_top`).
    resume : bool, default False
        Reopen an existing log and append after its committed prompts; every setting above
        must equal the stored one.
    value_dtype : {"float32", "float64"}, default "float32"
        Storage type of stored probabilities.

    Raises
    ------
    ValueError
        Bad arguments; a log already at ``path`` without ``resume``; ``resume`` with other
        settings or an inconsistent log.
    """

    def __init__(self, path, *, vocab_size, drafts, target_model, processing, decoder="ar",
                 key_id=None, prompts=None, extra=None, max_stored=DEFAULT_MAX_STORED,
                 resume=False, value_dtype="float32"):
        self.path = Path(path)
        vocab_size = as_int(vocab_size, "vocab_size", min_value=1, max_value=2**31 - 1)
        if isinstance(drafts, str) or not isinstance(drafts, Sequence) or not drafts:
            raise ValueError("drafts: must be a non-empty sequence of draft names")
        drafts = [str(d) for d in drafts]
        if len(set(drafts)) != len(drafts):
            raise ValueError("drafts: names must be distinct")
        if not isinstance(processing, dict):
            raise ValueError("processing: must be a dict (temperature, top_k, top_p)")
        if not isinstance(decoder, str) or not decoder:
            raise ValueError("decoder: must be a non-empty string")
        if key_id is not None and not isinstance(key_id, str):
            raise ValueError("key_id: must be a string (sim.prf.key_id(key)) or None")
        if prompts is not None and not isinstance(prompts, dict):
            if isinstance(prompts, str) or not isinstance(prompts, Sequence):
                raise ValueError("prompts: must be a dict (id -> text) or a sequence of texts")
            prompts = dict(enumerate(prompts))
        if prompts is not None:
            prompts = {str(as_int(int(k) if isinstance(k, str) and k.isdigit() else k,
                                  "prompts", min_value=0)): str(v)
                       for k, v in prompts.items()}
        if extra is not None and not isinstance(extra, dict):
            raise ValueError("extra: must be a dict")
        self.max_stored = as_int(max_stored, "max_stored", min_value=1)
        resume = as_bool(resume, "resume")
        meta = {"vocab_size": vocab_size, "target_model": str(target_model),
                "drafts": drafts, "processing": processing, "decoder": decoder,
                "key_id": key_id, "prompts": prompts, "extra": extra or {},
                "max_stored": self.max_stored}
        try:
            meta = json.loads(json.dumps(meta))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"extra: metadata must be JSON-serialisable ({exc})") from None
        self.meta = meta
        self.drafts = drafts
        self.vocab_size = vocab_size
        subdirs = [_subdir(i, d) for i, d in enumerate(drafts)]
        manifest = {"format": FORMAT, "version": VERSION, "subdirs": subdirs, "meta": meta}
        mf = self.path / MANIFEST
        if resume and mf.exists():
            stored = read_manifest(self.path, MANIFEST, fmt=FORMAT, version=VERSION,
                                   what="distribution log")
            old = dict(stored["meta"])
            old_prompts, new_prompts = old.pop("prompts", None), meta.get("prompts")
            same = {k: v for k, v in meta.items() if k != "prompts"} == old
            if not same or stored["subdirs"] != subdirs:
                raise ValueError("resume: the settings differ from those stored in the log at "
                                 f"{self.path}")
            if old_prompts != new_prompts:
                if old_prompts is None or new_prompts is None or any(
                        new_prompts.get(k, v) != v for k, v in old_prompts.items()):
                    raise ValueError("prompts: differ from the prompts stored in the log at "
                                     f"{self.path} (same id, other text)")
                meta["prompts"] = {**old_prompts, **new_prompts}
                manifest["meta"] = meta
                atomic_write(mf, json.dumps(manifest, indent=1, sort_keys=True).encode("utf-8"))
            lines = _read_contexts(self.path, repair=True)
            n = sum(int(r["positions"]) for r in lines)
            for sd in subdirs:
                _rollback(self.path / sd, n)
            self._done = {int(r["prompt_id"]) for r in lines}
            self._writers = [LogWriter(self.path / sd, self._sub_meta(d), chunk_size=2**62,
                                       value_dtype=value_dtype, resume=True)
                             for sd, d in zip(subdirs, drafts, strict=True)]
            if stored.get("target_only"):
                manifest["target_only"] = stored["target_only"]
                _rollback(self.path / TARGET_ONLY,
                          sum(int(r.get("target_positions", 0)) for r in lines))
                self._twriter = LogWriter(self.path / TARGET_ONLY,
                                          self._sub_meta(TARGET_ONLY_NAME),
                                          chunk_size=2**62, value_dtype=value_dtype,
                                          resume=True)
        else:
            if mf.exists():
                raise ValueError(f"path: {self.path} already holds a log; pass resume=True")
            self.path.mkdir(parents=True, exist_ok=True)
            atomic_write(mf, json.dumps(manifest, indent=1, sort_keys=True).encode("utf-8"))
            (self.path / CONTEXTS).write_bytes(b"")
            self._done = set()
            self._writers = [LogWriter(self.path / sd, self._sub_meta(d), chunk_size=2**62,
                                       value_dtype=value_dtype)
                             for sd, d in zip(subdirs, drafts, strict=True)]
        if not (resume and mf.exists() and manifest.get("target_only")):
            self._twriter = None
        self._manifest = manifest
        self._value_dtype = value_dtype
        self._pid: int | None = None
        self._buf: list[tuple[np.ndarray, tuple, list[tuple]]] = []
        self._tbuf: list[tuple[np.ndarray, tuple]] = []
        self._closed = False

    def _sub_meta(self, draft: str) -> dict:
        # the prompt texts live in the manifest only (a resumed run may add prompts)
        return {**{k: v for k, v in self.meta.items() if k != "prompts"}, "draft_model": draft}

    @classmethod
    def for_pair(cls, pair, path, *, drafts=None, decoder="ar", key=None, prompts=None,
                 extra=None, max_stored=DEFAULT_MAX_STORED, resume=False,
                 value_dtype="float32") -> DistributionLog:
        """A log with the metadata of a :class:`~specbound.llm.ModelPair` (``drafts``:
        spec texts, default the pair's own draft; ``key``: recorded as its ``key_id``)."""
        from specbound.sim.prf import key_id as _key_id

        names = [str(pair.draft_spec)] if drafts is None else [str(d) for d in drafts]
        p = pair.processing
        return cls(path, vocab_size=pair.vocab_size, drafts=names,
                   target_model=pair.load_info["target"].name,
                   processing={"temperature": p.temperature, "top_k": p.top_k,
                               "top_p": p.top_p},
                   decoder=decoder, key_id=None if key is None else _key_id(key),
                   prompts=prompts, extra=extra, max_stored=max_stored, resume=resume,
                   value_dtype=value_dtype)

    # ------------------------------------------------------------------ bookkeeping
    @property
    def prompt_ids(self) -> set[int]:
        """Committed prompt ids (complete in every sub-log)."""
        return set(self._done)

    def __len__(self) -> int:
        """Committed positions."""
        return int(self._writers[0]._committed["positions"])

    # ------------------------------------------------------------------ recording
    def record(self, prompt_id, context_tokens, p, qs) -> None:
        """Log one context: the target's ``p`` and each draft's ``q`` (in ``drafts`` order).

        Parameters
        ----------
        prompt_id : int >= 0
            Records of one prompt must be consecutive; a prompt already committed is refused.
        context_tokens : 1-D sequence of int
            Token ids of the context (prompt and generated tokens before the position).
        p : 1-D float array of length ``vocab_size``
            Target's processed next-token probabilities.
        qs : sequence of 1-D float arrays
            One draft distribution per draft name, same length.  Empty: the context has no
            draft distribution (e.g. the bonus position after ``L`` accepted drafts); ``p``
            goes to the target-only sub-log (module docstring).
        """
        if self._closed:
            raise ValueError("record: the log is closed")
        pid = as_int(prompt_id, "prompt_id", min_value=0)
        if pid in self._done:
            raise ValueError(f"prompt_id: prompt {pid} is already committed in this log")
        ctx = np.asarray(context_tokens)
        if ctx.ndim != 1 or ctx.size == 0 or (ctx.dtype.kind not in "iu"):
            raise ValueError("context_tokens: must be a non-empty 1-D sequence of token ids")
        if isinstance(qs, np.ndarray) and qs.ndim == 1:
            qs = [qs]
        qs = list(qs)
        if qs and len(qs) != len(self.drafts):
            raise ValueError(f"qs: {len(qs)} draft distributions for {len(self.drafts)} drafts")
        for name, arr in [("p", p)] + [(f"qs[{i}]", q) for i, q in enumerate(qs)]:
            if np.shape(arr) != (self.vocab_size,):
                raise ValueError(f"{name}: must have shape ({self.vocab_size},), got "
                                 f"{np.shape(arr)}")
        sp = sparse_top(p, self.max_stored, "p")
        sq = [sparse_top(q, self.max_stored, f"qs[{i}]") for i, q in enumerate(qs)]
        if self._pid is not None and pid != self._pid:
            self.flush()
        self._pid = pid
        if qs:
            self._buf.append((ctx.astype(np.int64), sp, sq))
        else:
            self._tbuf.append((ctx.astype(np.int64), sp))

    def flush(self) -> None:
        """Commit the buffered prompt (every sub-log, then its ``contexts.jsonl`` line)."""
        if not self._buf and not self._tbuf:
            return
        pid = self._pid
        for d, w in enumerate(self._writers):
            for _, (pi, pv, pt), sq in self._buf:
                qi, qv, qt = sq[d]
                w.append(pid, pi, pv, qi, qv, p_tail=[pt], q_tail=[qt])
            w.flush()
        if self._tbuf:
            if self._twriter is None:
                self._manifest["target_only"] = TARGET_ONLY
                atomic_write(self.path / MANIFEST, json.dumps(
                    self._manifest, indent=1, sort_keys=True).encode("utf-8"))
                self._twriter = LogWriter(self.path / TARGET_ONLY,
                                          self._sub_meta(TARGET_ONLY_NAME), chunk_size=2**62,
                                          value_dtype=self._value_dtype)
            for _, (pi, pv, pt) in self._tbuf:
                self._twriter.append(pid, pi, pv, pi, pv, p_tail=[pt], q_tail=[pt])
            self._twriter.flush()
        n = len(self._buf)
        seqs, refs = _compress_contexts([b[0] for b in self._buf] + [b[0] for b in self._tbuf])
        rec = {"prompt_id": pid, "positions": n, "sequences": seqs, "contexts": refs[:n]}
        if self._tbuf:
            rec["target_positions"] = len(self._tbuf)
            rec["target_contexts"] = refs[n:]
        line = json.dumps(rec, separators=(",", ":"))
        with open(self.path / CONTEXTS, "ab") as fh:
            fh.write(line.encode("utf-8") + b"\n")
            fh.flush()
            os.fsync(fh.fileno())
        self._done.add(pid)
        self._buf, self._tbuf = [], []
        self._pid = None

    def close(self) -> None:
        """Commit and mark every sub-log complete (idempotent)."""
        if self._closed:
            return
        self.flush()
        for w in self._writers:
            w.close()
        if self._twriter is not None:
            self._twriter.close()
        self._closed = True

    def __enter__(self) -> DistributionLog:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _rollback(sub: Path, n: int) -> None:
    """Lower a sub-log's committed positions to ``n`` (prompts without a contexts line)."""
    reader = LogReader(sub, validate=False)
    have = len(reader)
    if have < n:
        raise ValueError(f"path: {sub} commits {have} positions but contexts.jsonl commits "
                         f"{n} (inconsistent log)")
    if have == n:
        return
    a = reader.arrays()
    doc = dict(reader._doc)
    doc["committed"] = {"positions": n, "p_nnz": int(a["p_offsets"][n]),
                        "q_nnz": int(a["q_offsets"][n])}
    doc["complete"] = False
    del reader, a
    atomic_write(sub / "meta.json", json.dumps(doc, indent=1).encode("utf-8"))


# ----------------------------------------------------------------------------- reader


@dataclass(frozen=True, eq=False)
class LoggedPair:
    """One logged context of one draft, on a compact support.

    Attributes
    ----------
    position : int
        Index of the position in the log.
    prompt_id, step : int
    tokens : ndarray of int64
        Token id of each entry (``-1`` for the OTHER pseudo-token of a coarsened pair).
    p, q : ndarray of float64
        Target and draft probabilities on ``tokens``; each sums to 1.
    exact : bool
        Both tails are 0: ``(p, q)`` is the true pair restricted to the union of supports
        (every acceptance and divergence formula gives its full-vocabulary value).
    """

    position: int
    prompt_id: int
    step: int
    tokens: np.ndarray
    p: np.ndarray
    q: np.ndarray
    exact: bool


class LoggedDistributions:
    """Reader of a :class:`DistributionLog` folder: one :class:`~specbound.sim.logged.LogReader`
    per draft plus the contexts.

    Attributes
    ----------
    path : Path
    meta : dict
        The log's metadata (module docstring).
    drafts : list of str
    readers : dict
        Draft name -> :class:`~specbound.sim.logged.LogReader` (``p`` = target, ``q`` = draft).
    """

    def __init__(self, path, *, validate=True):
        self.path = Path(path)
        doc = read_manifest(self.path, MANIFEST, fmt=FORMAT, version=VERSION,
                            what="distribution log")
        self.meta = doc["meta"]
        self.drafts = list(self.meta["drafts"])
        self._lines = _read_contexts(self.path, repair=False)
        n = sum(int(r["positions"]) for r in self._lines)
        self.readers: dict[str, LogReader] = {}
        for sd, d in zip(doc["subdirs"], self.drafts, strict=True):
            r = LogReader(self.path / sd, validate=validate)
            if len(r) < n:
                raise ValueError(f"path: {sd} holds {len(r)} positions, fewer than the {n} of "
                                 f"{CONTEXTS}")
            self.readers[d] = r
        self._n = n
        self.target_only: LogReader | None = None
        if doc.get("target_only"):
            self.target_only = LogReader(self.path / doc["target_only"], validate=validate)
            nt = sum(int(r.get("target_positions", 0)) for r in self._lines)
            if len(self.target_only) < nt:
                raise ValueError(f"path: {doc['target_only']} holds {len(self.target_only)} "
                                 f"positions, fewer than the {nt} of {CONTEXTS}")
        first = self.readers[self.drafts[0]]
        if validate and n:
            pid = np.asarray(first.prompt_id[:n])
            expect = np.repeat([int(r["prompt_id"]) for r in self._lines],
                               [int(r["positions"]) for r in self._lines])
            if not np.array_equal(pid, expect):
                raise ValueError(f"path: the sub-logs' prompt ids disagree with {CONTEXTS}")
            for d in self.drafts[1:]:
                o = self.readers[d]
                if not np.array_equal(np.asarray(o.prompt_id[:n]), pid):
                    raise ValueError(f"path: sub-log of {d!r} disagrees with the first one")
                for k in ("p_offsets", "p_idx", "p_val"):
                    if not np.array_equal(np.asarray(first.arrays()[k]),
                                          np.asarray(o.arrays()[k])):
                        raise ValueError(f"path: the target rows of {d!r} differ from those "
                                         "of the first draft")

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, draft: str) -> LogReader:
        if draft not in self.readers:
            raise ValueError(f"draft: {draft!r} is not in this log (drafts: {self.drafts})")
        return self.readers[draft]

    @property
    def vocab_size(self) -> int:
        return int(self.meta["vocab_size"])

    @property
    def prompt_ids(self) -> list[int]:
        """Prompt ids in log order."""
        return [int(r["prompt_id"]) for r in self._lines]

    def contexts(self, which: str = "pairs") -> list[np.ndarray]:
        """Token ids of every position's context, in log order (``which="target_only"``:
        those of the target-only sub-log)."""
        key = {"pairs": "contexts", "target_only": "target_contexts"}.get(which)
        if key is None:
            raise ValueError(f"which: must be 'pairs' or 'target_only', got {which!r}")
        out = []
        for r in self._lines:
            seqs = r["sequences"]
            out.extend(np.asarray(seqs[s][:ln], dtype=np.int64) for s, ln in r.get(key, []))
        return out

    def replay(self, draft: str) -> tuple[ReplayLM, ReplayLM]:
        """Target and draft models that serve the logged distributions, by context.

        Objects with ``vocab_size`` and ``next_distribution(context)`` (the model protocol
        of :mod:`specbound.sim.models`), so ``sim.speculative_decode`` can re-run a logged
        decoding run on them.  Each distribution is the stored values, unnormalised (a
        float64 log of a top-k-processed pair is then bit for bit the logged one); a
        context absent from the log raises ``ValueError``.  When a context was logged more
        than once, its first record is served.
        """
        reader = self[draft]
        tables: dict[str, dict] = {"p": {}, "q": {}}
        sources = [(reader, self.contexts(), ("p", "q"))]
        if self.target_only is not None:
            sources.append((self.target_only, self.contexts("target_only"), ("p",)))
        for r, ctxs, sides in sources:
            a = r.arrays()
            for side in sides:
                off, idx, val = (np.asarray(a[f"{side}_offsets"]), a[f"{side}_idx"],
                                 a[f"{side}_val"])
                for i, c in enumerate(ctxs):
                    key = tuple(c.tolist())
                    if key not in tables[side]:
                        tables[side][key] = (np.asarray(idx[off[i]:off[i + 1]], np.int64),
                                             np.asarray(val[off[i]:off[i + 1]], np.float64))
        V = self.vocab_size
        return ReplayLM(V, tables["p"], "target"), ReplayLM(V, tables["q"], draft)

    def pairs(self, draft: str, start: int = 0, stop: int | None = None
              ) -> Iterator[LoggedPair]:
        """Positions ``start:stop`` of one draft as compact :class:`LoggedPair` s.

        Exact pairs (both tails 0) live on the union of the two stored supports; otherwise
        the common coarsening (tokens stored for both models + OTHER, token id ``-1``) of
        :mod:`specbound.sim.logged` is used, and ``exact`` is False.
        """
        reader = self[draft]
        stop = self._n if stop is None else as_int(stop, "stop", min_value=0, max_value=self._n)
        start = as_int(start, "start", min_value=0, max_value=stop)
        sb = reader.sparse(start, stop)
        for i in range(stop - start):
            pi = np.asarray(sb.p_idx[sb.p_offsets[i]:sb.p_offsets[i + 1]], dtype=np.int64)
            pv = np.asarray(sb.p_val[sb.p_offsets[i]:sb.p_offsets[i + 1]], dtype=np.float64)
            qi = np.asarray(sb.q_idx[sb.q_offsets[i]:sb.q_offsets[i + 1]], dtype=np.int64)
            qv = np.asarray(sb.q_val[sb.q_offsets[i]:sb.q_offsets[i + 1]], dtype=np.float64)
            pt, qt = float(sb.p_tail[i]), float(sb.q_tail[i])
            exact = pt <= _ZERO_TAIL and qt <= _ZERO_TAIL
            if exact:
                tok = np.union1d(pi, qi)
                p = np.zeros(tok.size)
                q = np.zeros(tok.size)
                p[np.searchsorted(tok, pi)] = pv
                q[np.searchsorted(tok, qi)] = qv
            else:
                tok = np.intersect1d(pi, qi)
                p = np.append(pv[np.isin(pi, tok)], 0.0)
                q = np.append(qv[np.isin(qi, tok)], 0.0)
                p[-1] = max(1.0 - p[:-1].sum(), 0.0)
                q[-1] = max(1.0 - q[:-1].sum(), 0.0)
                tok = np.append(tok, -1)
            p /= p.sum()
            q /= q.sum()
            yield LoggedPair(position=start + i, prompt_id=int(sb.prompt_id[i]),
                             step=int(sb.step[i]), tokens=tok, p=p, q=q, exact=exact)

    def __repr__(self) -> str:
        return (f"LoggedDistributions({str(self.path)!r}, positions={self._n}, "
                f"prompts={len(self._lines)}, drafts={self.drafts})")


class ReplayLM:
    """A model that serves logged next-token distributions (see
    :meth:`LoggedDistributions.replay`)."""

    def __init__(self, vocab_size: int, table: dict, name: str):
        self.vocab_size = int(vocab_size)
        self._table = table
        self.name = name

    def next_distribution(self, context) -> np.ndarray:
        key = tuple(int(t) for t in np.asarray(context).reshape(-1))
        hit = self._table.get(key)
        if hit is None:
            raise ValueError(f"context: not in the log for {self.name} (length {len(key)})")
        out = np.zeros(self.vocab_size)
        out[hit[0]] = hit[1]
        return out


def read_log(path, *, validate: bool = True) -> LoggedDistributions:
    """Open a :class:`DistributionLog` folder for reading."""
    return LoggedDistributions(path, validate=as_bool(validate, "validate"))


def shipped_log_path() -> Path:
    """Folder of the log committed with the package (``specbound/llm/data/shipped_log``)."""
    return Path(str(resources.files("specbound.llm").joinpath(*SHIPPED)))


def shipped_log(*, validate: bool = True) -> LoggedDistributions:
    """The small real log committed with the package (made by ``scripts/make_log.py``).

    The embedded SmolLM2-135M-Instruct target, processed with temperature 1 and top-k 50,
    on fixed HumanEval and ShareGPT prompts (chat-formatted), its own sampled continuations,
    and four drafts at every context (their names: ``shipped_log().drafts``); every tail is
    0, so each logged pair is exact (see :meth:`LoggedDistributions.pairs`).  Needs no torch.
    """
    return read_log(shipped_log_path(), validate=validate)


# ----------------------------------------------------------------------------- logging


def log_distributions(pair, prompts, *, drafts=None, max_new_tokens=64, seed=0, path,
                      resume=True, progress=False, chat=True, template="default",
                      max_stored=DEFAULT_MAX_STORED, extra=None, prompt_labels=None
                      ) -> LoggedDistributions:
    """Log the target's and every draft's distributions along the target's own samples.

    For each prompt (chat-formatted with ``pair.encode_prompt`` unless ``chat=False``), the
    target samples a continuation of up to ``max_new_tokens`` tokens (stopping after the
    end-of-sequence token) with its KV cache, by inverse-CDF sampling with a NumPy generator
    seeded by ``SeedSequence(seed, spawn_key=(prompt_id,))`` -- so a prompt's continuation
    does not depend on which prompts ran before (resuming changes nothing).  Then one
    teacher-forced forward per model over the sampled text gives ``p`` and every draft's
    ``q`` at each of its contexts, and these are logged (the logged ``p`` is this forward's,
    equal to the sampling forward's up to the model's float32 rounding).

    Parameters
    ----------
    pair : ModelPair
    prompts : sequence of str
        Prompt texts; prompt ids are their indices.
    drafts : sequence of draft specs, optional
        Default: the pair's own draft.  Built with ``pair.with_draft`` (sharing the target).
    max_new_tokens : int, default 64
    seed : int, default 0
    path : str or Path
        Folder of the log.
    resume : bool, default True
        Reopen an existing log at ``path`` (same settings) and skip its complete prompts.
    progress : bool, default False
        tqdm progress bar over prompts.
    chat, template
        Prompt formatting (``pair.encode_prompt``).
    max_stored : int, default 256
    extra : dict, optional
        Further metadata.
    prompt_labels : sequence of str, optional
        Stored in the metadata as the prompts (e.g. ``"humaneval seed=0 #3"``) instead of
        the prompt texts.

    Returns
    -------
    LoggedDistributions
    """
    from specbound.llm.drafts import parse_draft

    if isinstance(prompts, str) or not isinstance(prompts, Sequence) or not prompts:
        raise ValueError("prompts: must be a non-empty sequence of prompt strings")
    if not all(isinstance(t, str) and t.strip() for t in prompts):
        raise ValueError("prompts: every prompt must be a non-empty string")
    max_new_tokens = as_int(max_new_tokens, "max_new_tokens", min_value=1)
    seed = as_int(seed, "seed", min_value=0)
    resume = as_bool(resume, "resume")
    progress = as_bool(progress, "progress")
    chat = as_bool(chat, "chat")
    specs = ([pair.draft_spec] if drafts is None
             else [parse_draft(d) for d in ([drafts] if isinstance(drafts, str) else drafts)])
    names = [str(s) for s in specs]
    if prompt_labels is not None:
        if isinstance(prompt_labels, str) or len(prompt_labels) != len(prompts):
            raise ValueError("prompt_labels: must hold one label per prompt")
        prompt_labels = [str(x) for x in prompt_labels]
    settings = {"max_new_tokens": max_new_tokens, "seed": seed, "chat": chat,
                "template": template, **(extra or {})}
    log = DistributionLog.for_pair(pair, path, drafts=names, decoder="ar",
                                   prompts=list(prompt_labels or prompts), extra=settings,
                                   max_stored=max_stored,
                                   resume=resume and (Path(path) / MANIFEST).exists())
    todo = [i for i in range(len(prompts)) if i not in log.prompt_ids]
    dpairs = []
    for s in specs:
        dpairs.append(pair if str(s) == str(pair.draft_spec) else pair.with_draft(s))
    eos = pair.tokenizer.eos_token_id
    it = todo
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(todo, desc="logging distributions")
    with log:
        for pid in it:
            ids = pair.encode_prompt(prompts[pid], chat=chat, template=template)
            rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(pid,)))
            out = pair.target_logprobs(ids, use_cache=True, num_positions=1)
            gen: list[int] = []
            while True:
                p = out.numpy()[0, -1]
                c = np.cumsum(p)
                tok = int(np.searchsorted(c, rng.random() * c[-1], side="right"))
                tok = min(tok, p.size - 1)
                while p[tok] == 0.0:  # a zero-width bin can only be hit by rounding
                    tok -= 1
                gen.append(tok)
                if len(gen) >= max_new_tokens or tok == eos:
                    break
                out = pair.target_logprobs(np.array([[tok]]), cache=out.cache,
                                           use_cache=True, num_positions=1)
            seq = np.concatenate([ids, np.asarray(gen, dtype=np.int64)])
            T = len(gen)
            forced = seq[:-1]
            P = pair.target_logprobs(forced, num_positions=T).numpy()[0]
            Qs = [dp.draft_logprobs(forced, num_positions=T).numpy()[0] for dp in dpairs]
            for j in range(T):
                log.record(pid, seq[: ids.size + j], P[j], [Q[j] for Q in Qs])
            log.flush()
    return read_log(path)
