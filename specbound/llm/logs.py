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
    SHA256SUMS          every file's SHA-256, written when the log is closed (a published
                        log's, by scripts/make_log.py, has no writer's first line)

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
discarded), so every prompt is either complete in every sub-log or absent from all.  Resuming
repairs nothing else: a corrupt line, or sub-log positions of more than one prompt beyond
the lines, is a ``ValueError``; so is a published log (``SHA256SUMS`` without the
writer's first line, :data:`specbound._io.WRITER_MARK`).  A closed log's ``SHA256SUMS`` is
checked before it is resumed (an edited log is refused, nothing is repaired) and removed;
the next close writes it again.

Reading (:func:`read_log`) never returns a short or reordered log: the manifest and every
line of ``contexts.jsonl`` are schema-checked, the sub-logs' metadata must match the
manifest and their prompt ids the lines, a closed log must hold exactly the lines' positions,
and a ``SHA256SUMS`` present is checked (every closed log has one, so a token id edited
into another valid one is caught); anything else is a ``ValueError`` naming the file
and the line or field.  The one line left out is the torn last line of a log whose writer was
not closed (its prompt was never committed).

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

from specbound._io import (
    SUMS,
    atomic_write,
    read_manifest,
    sums_written_by_writer,
    verify_sums,
    write_sums,
)
from specbound._validation import as_bool, as_int
from specbound.sim.logged import ARRAY_NAMES, LogReader, LogWriter

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
#: checksums of the files of a published log (``scripts/make_log.py``); checked on reading
_SUB_ARRAYS = tuple(f"{name}.npy" for name in ARRAY_NAMES)


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


def _is_int(x) -> bool:
    """A JSON integer (not a bool, not a float)."""
    return type(x) is int


def _check_refs(refs, seqs: list, key: str, count: int, where: str) -> None:
    if not isinstance(refs, list) or len(refs) != count:
        got = f"{len(refs)} entries" if isinstance(refs, list) else type(refs).__name__
        raise ValueError(f"{where}: {key!r} must list one [sequence, length] pair per "
                         f"position ({count}), got {got}")
    for ref in refs:
        if not (isinstance(ref, list) and len(ref) == 2 and _is_int(ref[0])
                and _is_int(ref[1]) and 0 <= ref[0] < len(seqs)
                and 1 <= ref[1] <= len(seqs[ref[0]])):
            raise ValueError(f"{where}: {key!r} holds {ref!r}, not a [sequence, length] pair "
                             f"of its {len(seqs)} 'sequences'")


def _check_line(rec, where: str, vocab_size: int) -> dict:
    """Schema of one ``contexts.jsonl`` line (``ValueError`` naming the field)."""
    if not isinstance(rec, dict):
        raise ValueError(f"{where}: must be a JSON object, got {type(rec).__name__}")
    for key in ("prompt_id", "positions", "sequences", "contexts"):
        if key not in rec:
            raise ValueError(f"{where}: lacks the field {key!r}")
    if ("target_positions" in rec) != ("target_contexts" in rec):
        raise ValueError(f"{where}: 'target_positions' and 'target_contexts' go together")
    for key in ("prompt_id", "positions", "target_positions"):
        if key in rec and not (_is_int(rec[key]) and rec[key] >= 0):
            raise ValueError(f"{where}: {key!r} must be an integer >= 0, got {rec[key]!r}")
    seqs = rec["sequences"]
    if not isinstance(seqs, list) or not all(isinstance(q, list) and q for q in seqs):
        raise ValueError(f"{where}: 'sequences' must be a list of non-empty lists of token ids")
    for q in seqs:
        for t in q:
            if not (_is_int(t) and 0 <= t < vocab_size):
                raise ValueError(f"{where}: 'sequences' holds {t!r}, not a token id in "
                                 f"[0, {vocab_size - 1}] (vocab_size)")
    _check_refs(rec["contexts"], seqs, "contexts", rec["positions"], where)
    if "target_contexts" in rec:
        _check_refs(rec["target_contexts"], seqs, "target_contexts", rec["target_positions"],
                    where)
    return rec


def _read_contexts(path: Path, vocab_size: int, *, repair: bool = False,
                   missing_ok: bool = False) -> tuple[list[dict], bool]:
    """The lines of ``contexts.jsonl`` (schema-checked) and whether a torn last line (bytes
    after the last line break: a write cut by a crash) was found.

    Every complete line must decode and pass :func:`_check_line`, prompt ids must be
    distinct: otherwise ``ValueError`` naming the file and the line number (a bad line is
    never skipped, and nothing after it is lost).  The torn last line is not a line of the
    log (its prompt was not committed); ``repair`` cuts it off the file.  A missing file is
    an error unless ``missing_ok`` (a log whose creation was interrupted, when resuming).
    """
    f = path / CONTEXTS
    if not f.is_file():
        if missing_ok and not f.exists():
            return [], False
        raise ValueError(f"path: {path} has no {CONTEXTS} (the commit lines of a "
                         "distribution log's prompts): not a complete log")
    data = f.read_bytes()
    raw = data.split(b"\n")
    tail = raw.pop()  # after the last line break: empty unless the last write was torn
    out: list[dict] = []
    seen: dict[int, int] = {}
    for k, line in enumerate(raw, 1):
        where = f"path: {f}, line {k}"
        try:
            rec = json.loads(line.decode("utf-8"))
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            raise ValueError(f"{where}: not a JSON line ({exc})") from None
        rec = _check_line(rec, where, vocab_size)
        pid = rec["prompt_id"]
        if pid in seen:
            raise ValueError(f"{where}: 'prompt_id' {pid} is already committed on line "
                             f"{seen[pid]}")
        seen[pid] = k
        out.append(rec)
    if tail and repair:
        with open(f, "r+b") as fh:
            fh.truncate(len(data) - len(tail))
            fh.flush()
            os.fsync(fh.fileno())
    return out, bool(tail)


# ----------------------------------------------------------------------------- checksums


def _verify_sums(path: Path, required: bool) -> dict[str, str] | None:
    """Check every file listed in ``SHA256SUMS`` (:func:`specbound._io.verify_sums`)."""
    return verify_sums(path, required, what="log")


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
            if (self.path / SUMS).exists():  # a closed log: checked before anything changes
                if not sums_written_by_writer(self.path):
                    raise ValueError(f"resume: the log at {self.path} is a published one (its "
                                     f"files are listed in {SUMS}); extend a copy without "
                                     f"{SUMS}")
                verify_sums(self.path, True)
                (self.path / SUMS).unlink()  # the log changes; written again at close
            if old_prompts != new_prompts:
                if old_prompts is None or new_prompts is None or any(
                        new_prompts.get(k, v) != v for k, v in old_prompts.items()):
                    raise ValueError("prompts: differ from the prompts stored in the log at "
                                     f"{self.path} (same id, other text)")
                meta["prompts"] = {**old_prompts, **new_prompts}
                manifest["meta"] = meta
                atomic_write(mf, json.dumps(manifest, indent=1, sort_keys=True).encode("utf-8"))
            lines, _ = _read_contexts(self.path, vocab_size, repair=True, missing_ok=True)
            n = sum(int(r["positions"]) for r in lines)
            self._done = {int(r["prompt_id"]) for r in lines}
            for sd in subdirs:
                _rollback(self.path / sd, n, self._done)
            if not (self.path / CONTEXTS).exists():
                (self.path / CONTEXTS).write_bytes(b"")
            self._writers = [LogWriter(self.path / sd, self._sub_meta(d), chunk_size=2**62,
                                       value_dtype=value_dtype, resume=True, checksums=False)
                             for sd, d in zip(subdirs, drafts, strict=True)]
            if stored.get("target_only"):
                manifest["target_only"] = stored["target_only"]
                _rollback(self.path / TARGET_ONLY,
                          sum(int(r.get("target_positions", 0)) for r in lines), self._done)
                self._twriter = LogWriter(self.path / TARGET_ONLY,
                                          self._sub_meta(TARGET_ONLY_NAME),
                                          chunk_size=2**62, value_dtype=value_dtype,
                                          resume=True, checksums=False)
        else:
            if mf.exists():
                raise ValueError(f"path: {self.path} already holds a log; pass resume=True")
            self.path.mkdir(parents=True, exist_ok=True)
            atomic_write(mf, json.dumps(manifest, indent=1, sort_keys=True).encode("utf-8"))
            (self.path / CONTEXTS).write_bytes(b"")
            self._done = set()
            self._writers = [LogWriter(self.path / sd, self._sub_meta(d), chunk_size=2**62,
                                       value_dtype=value_dtype, checksums=False)
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

        _check_pair(pair)
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
        try:
            ctx = np.asarray(context_tokens)
        except (ValueError, TypeError):
            ctx = np.empty((0, 0))
        if ctx.ndim != 1 or ctx.size == 0 or (ctx.dtype.kind not in "iu"):
            raise ValueError("context_tokens: must be a non-empty 1-D sequence of token ids")
        if isinstance(qs, np.ndarray) and qs.ndim == 1:
            qs = [qs]
        if isinstance(qs, (str, bytes, dict)) or not hasattr(qs, "__iter__"):
            raise ValueError(f"qs: must be a sequence of draft distributions, got "
                             f"{type(qs).__name__}")
        qs = list(qs)
        if qs and len(qs) != len(self.drafts):
            raise ValueError(f"qs: {len(qs)} draft distributions for {len(self.drafts)} drafts")
        for name, arr in [("p", p)] + [(f"qs[{i}]", q) for i, q in enumerate(qs)]:
            try:
                shape = np.shape(arr)
            except (ValueError, TypeError):
                shape = "ragged"
            if shape != (self.vocab_size,):
                raise ValueError(f"{name}: must have shape ({self.vocab_size},), got "
                                 f"{shape}")
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
                                          value_dtype=self._value_dtype, checksums=False)
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
        """Commit, mark every sub-log complete and write the log's ``SHA256SUMS``
        (idempotent)."""
        if self._closed:
            return
        self.flush()
        for w in self._writers:
            w.close()
        if self._twriter is not None:
            self._twriter.close()
        write_sums(self.path)
        self._closed = True

    def __enter__(self) -> DistributionLog:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _read_manifest(path: Path) -> dict:
    """The schema-checked manifest of a log folder (``ValueError`` naming the field)."""
    mf = Path(path) / MANIFEST
    doc = read_manifest(path, MANIFEST, fmt=FORMAT, version=VERSION, what="manifest")
    for key in ("subdirs", "meta"):
        if key not in doc:
            raise ValueError(f"path: {mf} lacks the field {key!r}")
    meta = doc["meta"]
    if not isinstance(meta, dict):
        raise ValueError(f"path: {mf}: 'meta' must be an object, got {type(meta).__name__}")
    for key in ("vocab_size", "drafts"):
        if key not in meta:
            raise ValueError(f"path: {mf} lacks the field 'meta.{key}'")
    V = meta["vocab_size"]
    if not (_is_int(V) and 1 <= V <= 2**31 - 1):
        raise ValueError(f"path: {mf}: 'meta.vocab_size' must be an integer in [1, 2**31 - 1], "
                         f"got {V!r}")
    drafts = meta["drafts"]
    if (not isinstance(drafts, list) or not drafts
            or not all(isinstance(d, str) and d for d in drafts)
            or len(set(drafts)) != len(drafts)):
        raise ValueError(f"path: {mf}: 'meta.drafts' must be a non-empty list of distinct "
                         f"draft names, got {drafts!r}")
    subdirs = doc["subdirs"]
    if not isinstance(subdirs, list) or not all(isinstance(d, str) for d in subdirs):
        raise ValueError(f"path: {mf}: 'subdirs' must be a list of folder names, got "
                         f"{subdirs!r}")
    if len(subdirs) != len(drafts):
        raise ValueError(f"path: {mf}: 'subdirs' names {len(subdirs)} sub-logs for "
                         f"{len(drafts)} drafts in 'meta.drafts'")
    for i, (sd, d) in enumerate(zip(subdirs, drafts, strict=True)):
        if sd != _subdir(i, d):
            raise ValueError(f"path: {mf}: 'subdirs'[{i}] is {sd!r}, but the sub-log of draft "
                             f"{d!r} is {_subdir(i, d)!r}")
    if doc.get("target_only") not in (None, TARGET_ONLY):
        raise ValueError(f"path: {mf}: 'target_only' must be {TARGET_ONLY!r} or absent, got "
                         f"{doc['target_only']!r}")
    prompts = meta.get("prompts")
    if prompts is not None and not (isinstance(prompts, dict) and all(
            isinstance(k, str) and k.isdigit() and isinstance(v, str)
            for k, v in prompts.items())):
        raise ValueError(f"path: {mf}: 'meta.prompts' must be null or an object of prompt id "
                         "-> text")
    for key, kind in (("processing", dict), ("extra", dict), ("decoder", str),
                      ("target_model", str)):
        if key in meta and not isinstance(meta[key], kind):
            raise ValueError(f"path: {mf}: 'meta.{key}' must be a JSON "
                             f"{'object' if kind is dict else 'string'}, got {meta[key]!r}")
    if meta.get("key_id") is not None and not isinstance(meta["key_id"], str):
        raise ValueError(f"path: {mf}: 'meta.key_id' must be a string or null")
    return doc


def _rollback(sub: Path, n: int, committed: set[int]) -> None:
    """Lower a sub-log's committed positions to ``n``: the positions of the one prompt whose
    sub-logs committed before a crash cut its ``contexts.jsonl`` line (``committed``: the
    prompt ids of the lines)."""
    reader = LogReader(sub, validate=False)
    have = len(reader)
    if have < n:
        raise ValueError(f"path: {sub} commits {have} positions but contexts.jsonl commits "
                         f"{n} (inconsistent log)")
    if have == n:
        return
    extra = np.unique(np.asarray(reader.prompt_id[n:]))
    if extra.size > 1 or int(extra[0]) in committed:
        raise ValueError(f"path: {sub} holds {have - n} positions beyond those of {CONTEXTS} "
                         f"(prompts {extra.tolist()}), more than one interrupted prompt: the "
                         "log is inconsistent (a line of contexts.jsonl lost?); not resumed")
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

    def __init__(self, path, *, validate=True, checksums=None):
        self.path = Path(path)
        if not self.path.is_dir():
            raise ValueError(f"path: {str(self.path)!r} is not a folder (a distribution log is "
                             "one)")
        checksums = None if checksums is None else as_bool(checksums, "checksums")
        sums = None if checksums is False else _verify_sums(self.path, bool(checksums))
        doc = _read_manifest(self.path)
        self.meta = doc["meta"]
        self.drafts = list(self.meta["drafts"])
        V = int(self.meta["vocab_size"])
        subs = [(sd, d, "pairs") for sd, d in zip(doc["subdirs"], self.drafts, strict=True)]
        if doc.get("target_only"):
            subs.append((doc["target_only"], TARGET_ONLY_NAME, "target_only"))
        if sums is not None:
            need = [MANIFEST, CONTEXTS] + [f"{sd}/{name}" for sd, _, _ in subs
                                           for name in ("meta.json", *_SUB_ARRAYS)]
            missing = [name for name in need if name not in sums]
            if missing:
                raise ValueError(f"path: {SUMS} in {self.path} does not list {missing[0]!r}, "
                                 "a file of the log")
        self._lines, torn = _read_contexts(self.path, V)
        pids = [r["prompt_id"] for r in self._lines]
        counts = {"pairs": [r["positions"] for r in self._lines],
                  "target_only": [r.get("target_positions", 0) for r in self._lines]}
        n, nt = sum(counts["pairs"]), sum(counts["target_only"])
        if nt and not doc.get("target_only"):
            raise ValueError(f"path: {CONTEXTS} has target-only positions but {MANIFEST} names "
                             "no 'target_only' sub-log")
        shared = {k: v for k, v in self.meta.items() if k != "prompts"}
        self.readers: dict[str, LogReader] = {}
        self.target_only: LogReader | None = None
        for sd, d, which in subs:
            r = LogReader(self.path / sd, validate=validate,
                          checksums=False if sums is not None else None)
            if r.meta != {**shared, "draft_model": d}:
                want = {**shared, "draft_model": d}
                key = sorted(set(r.meta) ^ set(want) | {k for k in want
                                                         if r.meta.get(k) != want[k]})[0]
                raise ValueError(f"path: {sd}/meta.json disagrees with {MANIFEST} on "
                                 f"{key!r} (a sub-log of another log, or a changed file)")
            if torn and r.complete:
                raise ValueError(f"path: {self.path / CONTEXTS}: the last line is cut off (no "
                                 "line break) in a complete log")
            m = n if which == "pairs" else nt
            if len(r) < m:
                raise ValueError(f"path: {sd} holds {len(r)} positions, fewer than the {m} of "
                                 f"{CONTEXTS}")
            if r.complete and len(r) != m:
                raise ValueError(f"path: {sd} is complete with {len(r)} positions, but "
                                 f"{CONTEXTS} commits {m} (a line lost or added)")
            expect = np.repeat(np.asarray(pids, dtype=np.int64),
                               np.asarray(counts[which], dtype=np.int64))
            if not np.array_equal(np.asarray(r.prompt_id[:m]), expect):
                raise ValueError(f"path: the prompt ids of {sd} disagree with the lines of "
                                 f"{CONTEXTS} (lines reordered, removed or duplicated?)")
            if which == "pairs":
                self.readers[d] = r
            else:
                self.target_only = r
        self._n = n
        first = self.readers[self.drafts[0]]
        if validate and n:
            a = first.arrays()
            off = np.asarray(a["p_offsets"][: n + 1])
            ref = {"p_offsets": off, "p_idx": np.asarray(a["p_idx"][: off[-1]]),
                   "p_val": np.asarray(a["p_val"][: off[-1]])}
            for d in self.drafts[1:]:
                o = self.readers[d].arrays()
                for k, v in ref.items():
                    if not np.array_equal(v, np.asarray(o[k][: v.shape[0]])):
                        raise ValueError(f"path: the target rows of {d!r} differ from those "
                                         "of the first draft")

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, draft: str) -> LogReader:
        if not isinstance(draft, str) or draft not in self.readers:
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
        key = ({"pairs": "contexts", "target_only": "target_contexts"}.get(which)
               if isinstance(which, str) else None)
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


def read_log(path, *, validate: bool = True, checksums: bool | None = None
             ) -> LoggedDistributions:
    """Open a :class:`DistributionLog` folder for reading.

    Parameters
    ----------
    path : str or Path
        The log's folder.
    validate : bool, default True
        Check every sub-log's offsets, token ids and probabilities
        (:class:`~specbound.sim.logged.LogReader`) and that every draft's sub-log holds the
        same target rows.  The structure is checked either way: the manifest's and every
        ``contexts.jsonl`` line's fields, the sub-logs' metadata against the manifest, and the
        sub-logs' prompt ids against the lines.
    checksums : bool, optional
        Check every file against the folder's ``SHA256SUMS`` (written when the log is
        closed, or by ``scripts/make_log.py``): ``None`` (default) when the folder has one,
        ``True``
        always (a missing ``SHA256SUMS`` is an error), ``False`` never.

    Raises
    ------
    ValueError
        Naming the file (and the line or field) of anything that does not read as a
        complete log: a ``contexts.jsonl`` line that does not decode or lacks a field, a
        missing ``contexts.jsonl``, a manifest without ``subdirs``/``meta`` or with fewer
        drafts than sub-logs, a token id outside the vocabulary, lines reordered, removed or
        duplicated against the sub-logs, a file that does not match its checksum.  A log
        is never read short: the only line left out is a torn last line (no line break: a
        write cut by a crash) of a log whose writer was not closed -- that prompt was never
        committed; in a closed log it is an error.
    """
    return LoggedDistributions(path, validate=as_bool(validate, "validate"),
                               checksums=checksums)


def shipped_log_path() -> Path:
    """Folder of the log committed with the package (``specbound/llm/data/shipped_log``)."""
    return Path(str(resources.files("specbound.llm").joinpath(*SHIPPED)))


def shipped_log(*, validate: bool = True) -> LoggedDistributions:
    """The small real log committed with the package (made by ``scripts/make_log.py``).

    The embedded SmolLM2-135M-Instruct target, processed with temperature 1 and top-k 50,
    on fixed HumanEval and ShareGPT prompts (chat-formatted), its own sampled continuations,
    and four drafts at every context (their names: ``shipped_log().drafts``); every tail is
    0, so each logged pair is exact (see :meth:`LoggedDistributions.pairs`).  Needs no torch.
    Every file is checked against the shipped ``SHA256SUMS`` (a changed or missing file is a
    ``ValueError`` naming it; :func:`read_log` with ``checksums=True``).
    """
    return read_log(shipped_log_path(), validate=validate, checksums=True)


# ----------------------------------------------------------------------------- logging


def _check_pair(pair) -> None:
    """``ValueError`` naming ``pair`` unless it is a :class:`~specbound.llm.ModelPair`."""
    from specbound.llm.models import ModelPair

    if not isinstance(pair, ModelPair):
        raise ValueError(f"pair: must be a specbound.llm.ModelPair (from load_pair), got "
                         f"{type(pair).__name__}")


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

    _check_pair(pair)
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
