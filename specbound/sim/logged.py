"""Logged (p, q) pairs from real models: a sparse top-k on-disk format, writer and reader.

The ``llm`` layer records, at every generated position, the target's distribution ``p`` and
the draft's distribution ``q`` after all processing (temperature, top-k, top-p, ...), keeping
for each model only its own top-k tokens and the remaining (tail) mass.  The estimators then
replay these pairs from disk.

On-disk format (version 1)
--------------------------
A log is a directory::

    meta.json        format tag, version, value dtype, committed counts, user metadata
    prompt_id.npy    int64  (N,)     prompt id of each position
    step.npy         int64  (N,)     index of the position within its prompt (0, 1, ...)
    p_offsets.npy    int64  (N + 1,) CSR offsets: position i's target entries are
                                     p_idx[p_offsets[i]:p_offsets[i + 1]]
    p_idx.npy        int32  (nnz_p,) token ids of the target's stored (top-k) tokens
    p_val.npy        float32 or float64 (nnz_p,) their probabilities
    p_tail.npy       float64 (N,)    target mass outside its stored tokens
    q_offsets.npy, q_idx.npy, q_val.npy, q_tail.npy   the same for the draft

Every array is a standard ``.npy`` file (format 1.0, fixed 128-byte header) and is opened
with ``np.load(mmap_mode="r")``.  ``meta.json`` holds::

    {"format": "specbound.logged", "version": 1, "value_dtype": "float32",
     "committed": {"positions": N, "p_nnz": nnz_p, "q_nnz": nnz_q}, "complete": bool,
     "meta": {user metadata}}

User metadata (a JSON object) must contain ``"vocab_size"`` and should contain
``"target_model"``, ``"draft_model"``, ``"processing"`` (e.g. ``{"temperature": 0.7,
"top_k": 50, "top_p": null}``, applied to both models before logging) and ``"prompts"``
(prompt id -> prompt text or token ids); the position -> prompt mapping is ``prompt_id.npy``
and ``step.npy``.  Stored token ids are unique within a position and lie in
``[0, vocab_size)``; each stored value is a probability and ``sum(values) + tail = 1`` within
``1e-5`` (checked at writing).  The number of stored tokens may differ between positions and
between the two models (e.g. top-p logging).

Crash safety and resuming
-------------------------
:class:`LogWriter` buffers appended positions in memory and commits them in chunks
(``chunk_size`` positions, at :meth:`LogWriter.flush` and at :meth:`LogWriter.close`):
(1) the new data are written after the committed data of every array; (2) the ``.npy``
headers are rewritten in place with the new lengths and each file is fsynced; (3) ``meta.json`` is
replaced atomically (write a temporary file, fsync, ``os.replace``) with the new committed
counts.  Step (3) is the commit: a run interrupted at any point loses only the positions not
yet committed, and every file stays readable, since readers use only the committed counts.
``LogWriter(path, meta, resume=True)`` reopens such a log (the user metadata must be equal),
discards any uncommitted bytes and appends after the committed positions.  One
:meth:`LogWriter.append` call is never split across commits, so a caller that logs a whole
prompt per call finds each prompt either complete or absent (:attr:`LogWriter.prompt_ids`).

Tail mass when densifying
-------------------------
A top-k log does not know the individual probabilities of a model's tail tokens, so a dense
``(batch, V)`` reconstruction has to choose; :meth:`LogReader.batches` offers three
``tail=`` modes and states what each is exact for:

``"other"`` (default) -- common coarsening, width ``V + 1``.
    Tokens stored for *both* models (``I = topk(p) ∩ topk(q)``) keep their columns; every
    other token is merged into one pseudo-token OTHER (column ``V``) with
    ``p(OTHER) = 1 - p(I)`` and ``q(OTHER) = 1 - q(I)``; both are known exactly.  The same
    merge map ``g`` is applied to p and q, so ``(p', q')`` is the image of the true pair
    under ``g``: ``TV(p', q') <= TV(p, q) <= TV(p', q') + min(p(OTHER), q(OTHER))``
    (:meth:`DenseBatch.tv_bounds`); ``1 - TV(p', q')`` over-estimates standard speculative
    sampling's acceptance by at most ``min(p(OTHER), q(OTHER))``.  Exact (equalities) when
    ``p - q`` has one sign on OTHER, in particular when both models' stored sets cover the
    whole support (tails 0 and equal supports, e.g. full logs).  Other schemes' acceptance
    computed on ``(p', q')`` is that of the same scheme on the coarsened vocabulary, not a
    bound on the true value in general.
``"spread"`` -- width ``V``.
    Each model's tail mass is spread uniformly over the tokens it did not store.  Exact when
    the tails are 0 (logs of top-k-truncated sampling, or ``k = V``); otherwise an
    approximation with ``TV(p_spread, p) <= p_tail`` and
    ``|TV(p_spread, q_spread) - TV(p, q)| <= p_tail + q_tail``.
``"drop"`` -- width ``V``.
    Each model restricted to its stored tokens and renormalised: the distribution a top-k
    sampler draws from.  ``TV(p_drop, p) = p_tail``.

In every mode rows are renormalised in float64 after densifying (stored float32 values round
at ~1e-7), so they are float64 probability vectors within the package's float64 tolerance
(``1e-9``; :func:`specbound._validation.sum_atol`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from specbound._io import SUMS, atomic_write, read_manifest, verify_sums, write_sums
from specbound._validation import (
    as_bool,
    as_choice,
    as_int,
    as_real_array,
    asarray_named,
    check_alloc,
)
from specbound.theory.divergences import tv_rows

__all__ = ["DenseBatch", "LogReader", "LogWriter", "SparseBatch"]

FORMAT = "specbound.logged"
VERSION = 1
_HEADER_BYTES = 128
_SUM_ATOL = 1e-5
_VALUE_DTYPES = ("float32", "float64")
#: the arrays of a log folder, one ``<name>.npy`` file each (the on-disk format)
ARRAY_NAMES = ("prompt_id", "step", "p_offsets", "p_idx", "p_val", "p_tail", "q_offsets",
               "q_idx", "q_val", "q_tail")


def _dtypes(value_dtype: str) -> dict[str, np.dtype]:
    v = np.dtype(value_dtype).newbyteorder("<")
    i8, i4, f8 = np.dtype("<i8"), np.dtype("<i4"), np.dtype("<f8")
    return {"prompt_id": i8, "step": i8, "p_offsets": i8, "p_idx": i4, "p_val": v,
            "p_tail": f8, "q_offsets": i8, "q_idx": i4, "q_val": v, "q_tail": f8}


def _header(dtype: np.dtype, n: int) -> bytes:
    """A fixed-size (128-byte) .npy 1.0 header for a 1-D array of length ``n``."""
    d = f"{{'descr': '{dtype.str}', 'fortran_order': False, 'shape': ({n},), }}"
    body_len = _HEADER_BYTES - 10
    if len(d) + 1 > body_len:  # pragma: no cover - n < 2**63 always fits
        raise ValueError("internal: header too long")
    body = (d + " " * (body_len - len(d) - 1) + "\n").encode("latin1")
    return b"\x93NUMPY\x01\x00" + body_len.to_bytes(2, "little") + body


def _counts(committed: dict) -> dict[str, int]:
    n, pn, qn = committed["positions"], committed["p_nnz"], committed["q_nnz"]
    return {"prompt_id": n, "step": n, "p_offsets": n + 1, "p_idx": pn, "p_val": pn,
            "p_tail": n, "q_offsets": n + 1, "q_idx": qn, "q_val": qn, "q_tail": n}


def _check_meta(meta) -> dict:
    if not isinstance(meta, dict):
        raise ValueError(f"meta: must be a dict (JSON object), got {type(meta).__name__}")
    if "vocab_size" not in meta:
        raise ValueError("meta: must contain 'vocab_size'")
    as_int(meta["vocab_size"], "meta['vocab_size']", min_value=1, max_value=2**31 - 1)
    try:
        return json.loads(json.dumps(meta))  # a JSON round trip: what the reader will see
    except (TypeError, ValueError) as exc:
        raise ValueError(f"meta: must be JSON-serialisable ({exc})") from None


# ----------------------------------------------------------------------------- writer


class LogWriter:
    """Incremental, crash-safe writer of a logged (p, q) directory (see module docstring).

    Parameters
    ----------
    path : str or Path
        Directory of the log (created; must not already hold a log unless ``resume``).
    meta : dict
        User metadata (JSON object) with at least ``"vocab_size"``.
    chunk_size : int
        Commit when this many positions are buffered.
    value_dtype : {"float32", "float64"}
        Storage type of the stored probabilities (tails are always float64).
    resume : bool
        Reopen an existing log (possibly interrupted) and append after its committed
        positions; ``meta`` must equal the stored metadata.  A closed log's ``SHA256SUMS`` is
        checked first (an edited log is not resumed) and removed (the log changes; it is
        written again at :meth:`close`).
    checksums : bool, default True
        Write ``SHA256SUMS`` (every file's SHA-256) at :meth:`close`; :class:`LogReader`
        checks it.  False for a sub-log whose parent folder holds the checksums
        (:class:`specbound.llm.DistributionLog`).
    """

    def __init__(self, path, meta, *, chunk_size=4096, value_dtype="float32", resume=False,
                 checksums=True):
        self.path = Path(path)
        self.chunk_size = as_int(chunk_size, "chunk_size", min_value=1)
        as_choice(value_dtype, "value_dtype", _VALUE_DTYPES)
        resume = as_bool(resume, "resume")
        self._checksums = as_bool(checksums, "checksums")
        meta = _check_meta(meta)
        self._closed = False
        self._buf: list[dict[str, np.ndarray]] = []
        self._buf_positions = 0
        meta_file = self.path / "meta.json"
        if resume:
            if not meta_file.exists():
                raise ValueError(f"path: {self.path} holds no log to resume (no meta.json)")
            reader = LogReader(self.path, validate=True)
            if reader.meta != meta:
                raise ValueError("meta: differs from the metadata stored in the log to resume")
            value_dtype = reader._doc["value_dtype"]
            self._committed = dict(reader._doc["committed"])
            self._last = {"p": int(reader._arr["p_offsets"][-1]),
                          "q": int(reader._arr["q_offsets"][-1])}
            ids, cnt = np.unique(np.array(reader._arr["prompt_id"]), return_counts=True)
            self._steps = dict(zip(ids.tolist(), cnt.tolist(), strict=True))
            del reader  # drop the memory maps before truncating the files below
            if (self.path / SUMS).exists():  # checked by the reader above; the log changes
                (self.path / SUMS).unlink()
        else:
            if meta_file.exists():
                raise ValueError(
                    f"path: {self.path} already holds a log; pass resume=True to append to it"
                )
            self.path.mkdir(parents=True, exist_ok=True)
            self._committed = {"positions": 0, "p_nnz": 0, "q_nnz": 0}
            self._last = {"p": 0, "q": 0}
            self._steps = {}
        self.meta = meta
        self.value_dtype = value_dtype
        self._dt = _dtypes(value_dtype)
        # (re)initialise the array files: truncate anything beyond the committed data
        counts = _counts(self._committed)
        for name in ARRAY_NAMES:
            f = self.path / f"{name}.npy"
            dt = self._dt[name]
            if not resume:
                init = np.zeros(1, dt) if name.endswith("_offsets") else np.zeros(0, dt)
                with open(f, "wb") as fh:
                    fh.write(_header(dt, init.shape[0]))
                    fh.write(init.tobytes())
                    fh.flush()
                    os.fsync(fh.fileno())
            else:
                with open(f, "r+b") as fh:
                    fh.truncate(_HEADER_BYTES + counts[name] * dt.itemsize)
                    fh.seek(0)
                    fh.write(_header(dt, counts[name]))
                    fh.flush()
                    os.fsync(fh.fileno())
        self._write_meta(complete=False)

    # -- bookkeeping -----------------------------------------------------------------

    @property
    def n_positions(self) -> int:
        """Committed plus buffered positions."""
        return self._committed["positions"] + self._buf_positions

    @property
    def prompt_ids(self) -> set[int]:
        """Prompt ids with at least one position (committed or buffered)."""
        return set(self._steps)

    def _write_meta(self, complete: bool) -> None:
        doc = {"format": FORMAT, "version": VERSION, "value_dtype": self.value_dtype,
               "committed": self._committed, "complete": bool(complete), "meta": self.meta}
        atomic_write(self.path / "meta.json", json.dumps(doc, indent=1).encode("utf-8"))

    # -- appending -------------------------------------------------------------------

    def _side(self, idx, val, tail, name: str, T: int):
        V = self.meta["vocab_size"]
        ia = (asarray_named(idx, f"{name}_idx") if not isinstance(idx, str | bytes)
              else np.asarray([idx]))
        try:
            va = as_real_array(val, f"{name}_val")[0]
        except ValueError as exc:
            raise ValueError(f"{name}_val: must contain real numbers ({exc})") from None
        if ia.ndim == 1:
            ia, va = ia[None, :], va[None, :] if va.ndim == 1 else va
        if ia.ndim != 2 or ia.shape[1] == 0:
            raise ValueError(f"{name}_idx: must have shape (k,) or (T, k) with k >= 1, "
                             f"got {np.asarray(idx).shape}")
        if ia.shape[0] != T:
            raise ValueError(f"{name}_idx: {ia.shape[0]} positions but p_idx has {T}")
        if va.shape != ia.shape:
            raise ValueError(f"{name}_val: shape {np.asarray(val).shape} does not match "
                             f"{name}_idx shape {np.asarray(idx).shape}")
        if ia.dtype == np.bool_ or ia.dtype.kind not in "iu":
            raise ValueError(f"{name}_idx: must contain integer token ids")
        if np.any(ia < 0) or np.any(ia >= V):
            raise ValueError(f"{name}_idx: token ids must lie in [0, {V - 1}] (vocab_size)")
        srt = np.sort(ia, axis=1)
        if np.any(srt[:, 1:] == srt[:, :-1]):
            raise ValueError(f"{name}_idx: token ids must be unique within a position")
        if not np.all(np.isfinite(va)) or np.any(va < 0) or np.any(va > 1):
            raise ValueError(f"{name}_val: probabilities must be finite and in [0, 1]")
        s = va.sum(axis=1)
        if np.any(s <= 0):
            raise ValueError(f"{name}_val: the stored probabilities of a position sum to 0")
        if tail is None:
            ta = np.clip(1.0 - s, 0.0, 1.0)
        else:
            ta = as_real_array(tail, f"{name}_tail")[0].reshape(-1)
            if ta.shape != (T,):
                raise ValueError(f"{name}_tail: must have one value per position ({T})")
            if not np.all(np.isfinite(ta)) or np.any(ta < -_SUM_ATOL) or np.any(ta > 1):
                raise ValueError(f"{name}_tail: must be finite and in [0, 1]")
            ta = np.clip(ta, 0.0, 1.0)  # rounding: 1 - sum(values) may be -1e-16
        bad = np.abs(s + ta - 1.0) > _SUM_ATOL
        if np.any(bad):
            raise ValueError(
                f"{name}_val: stored probabilities plus tail must sum to 1 within {_SUM_ATOL:g}"
                f" (off by {float(np.max(np.abs(s + ta - 1.0))):.3g})"
            )
        return ia.astype(np.int32), va, ta

    def append(self, prompt_id, p_idx, p_val, q_idx, q_val, *, p_tail=None, q_tail=None):
        """Append one position (1-D arguments) or ``T`` positions (2-D, shape ``(T, k)``).

        Parameters
        ----------
        prompt_id : int >= 0
            Prompt of these positions; their ``step`` numbers continue that prompt's count.
        p_idx, p_val : array, shape (k,) or (T, k)
            Target's stored token ids (unique, in ``[0, vocab_size)``) and probabilities.
        q_idx, q_val : array, shape (k_q,) or (T, k_q)
            The same for the draft (``k_q`` may differ from ``k``).
        p_tail, q_tail : float or array of shape (T,), optional
            Mass outside the stored tokens; default ``1 - sum(values)`` (clipped at 0).
            ``sum(values) + tail`` must be 1 within ``1e-5``; a tail in ``[-1e-5, 0)``
            (rounding of ``1 - sum``) is stored as 0.
        """
        if self._closed:
            raise ValueError("append: the writer is closed")
        pid = as_int(prompt_id, "prompt_id", min_value=0, max_value=2**63 - 1)
        pi = asarray_named(p_idx, "p_idx") if not isinstance(p_idx, str | bytes) else None
        if pi is None:
            raise ValueError("p_idx: must contain integer token ids")
        T = 1 if pi.ndim == 1 else (pi.shape[0] if pi.ndim == 2 else -1)
        if T < 1:
            raise ValueError(f"p_idx: must have shape (k,) or (T, k) with T >= 1, "
                             f"got {pi.shape}")
        pi, pv, pt = self._side(p_idx, p_val, p_tail, "p", T)
        qi, qv, qt = self._side(q_idx, q_val, q_tail, "q", T)
        start = self._steps.get(pid, 0)
        self._steps[pid] = start + T
        self._buf.append({
            "prompt_id": np.full(T, pid, np.int64),
            "step": np.arange(start, start + T, dtype=np.int64),
            "p_k": np.full(T, pi.shape[1], np.int64), "p_idx": pi.reshape(-1),
            "p_val": pv.reshape(-1), "p_tail": pt,
            "q_k": np.full(T, qi.shape[1], np.int64), "q_idx": qi.reshape(-1),
            "q_val": qv.reshape(-1), "q_tail": qt,
        })
        self._buf_positions += T
        if self._buf_positions >= self.chunk_size:
            self.flush()

    def flush(self) -> None:
        """Commit the buffered positions (see "Crash safety" in the module docstring)."""
        if not self._buf:
            return
        cat = {k: np.concatenate([b[k] for b in self._buf]) for k in self._buf[0]}
        new = {
            "prompt_id": cat["prompt_id"], "step": cat["step"],
            "p_offsets": self._last["p"] + np.cumsum(cat["p_k"]), "p_idx": cat["p_idx"],
            "p_val": cat["p_val"], "p_tail": cat["p_tail"],
            "q_offsets": self._last["q"] + np.cumsum(cat["q_k"]), "q_idx": cat["q_idx"],
            "q_val": cat["q_val"], "q_tail": cat["q_tail"],
        }
        old = _counts(self._committed)
        committed = {"positions": self._committed["positions"] + cat["prompt_id"].shape[0],
                     "p_nnz": self._committed["p_nnz"] + cat["p_idx"].shape[0],
                     "q_nnz": self._committed["q_nnz"] + cat["q_idx"].shape[0]}
        counts = _counts(committed)
        for name in ARRAY_NAMES:  # (1) data after the committed part, (2) header
            dt = self._dt[name]
            with open(self.path / f"{name}.npy", "r+b") as fh:
                fh.seek(_HEADER_BYTES + old[name] * dt.itemsize)
                fh.write(np.ascontiguousarray(new[name], dtype=dt).tobytes())
                fh.truncate()
                fh.seek(0)
                fh.write(_header(dt, counts[name]))
                fh.flush()
                os.fsync(fh.fileno())
        self._committed = committed
        self._last = {"p": int(new["p_offsets"][-1]), "q": int(new["q_offsets"][-1])}
        self._buf, self._buf_positions = [], 0
        self._write_meta(complete=False)  # (3) the commit

    def close(self) -> None:
        """Commit everything and mark the log complete.  Idempotent."""
        if self._closed:
            return
        self.flush()
        self._write_meta(complete=True)
        if self._checksums:
            write_sums(self.path)
        self._closed = True

    def __enter__(self) -> LogWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# ----------------------------------------------------------------------------- reader


@dataclass(frozen=True)
class SparseBatch:
    """Positions ``start .. start + len(prompt_id) - 1`` in sparse (CSR) form.

    ``p_offsets``/``q_offsets`` are rebased to start at 0 (length ``batch + 1``); the other
    arrays are read-only views of the memory-mapped files where possible.
    """

    start: int
    prompt_id: np.ndarray
    step: np.ndarray
    p_offsets: np.ndarray
    p_idx: np.ndarray
    p_val: np.ndarray
    p_tail: np.ndarray
    q_offsets: np.ndarray
    q_idx: np.ndarray
    q_val: np.ndarray
    q_tail: np.ndarray


@dataclass(frozen=True)
class DenseBatch:
    """Dense reconstruction of a batch of positions (rows), see "Tail mass" above.

    ``p`` and ``q`` have shape ``(batch, V + 1)`` for ``tail="other"`` (column ``V`` is the
    OTHER pseudo-token) and ``(batch, V)`` otherwise; rows sum to 1.
    """

    start: int
    prompt_id: np.ndarray
    step: np.ndarray
    p: np.ndarray
    q: np.ndarray
    tail: str

    def tv_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Bracket ``[TV(p', q'), TV(p', q') + min(p'(OTHER), q'(OTHER))]`` on the true TV.

        Only for ``tail="other"``, where the coarsening makes it a guaranteed bracket.
        """
        if self.tail != "other":
            raise ValueError(f"tail: tv_bounds needs tail='other', got {self.tail!r}")
        low = tv_rows(self.p, self.q)
        return low, low + np.minimum(self.p[:, -1], self.q[:, -1])


class LogReader:
    """Memory-mapped reader of a logged (p, q) directory (see module docstring).

    Parameters
    ----------
    path : str or Path
        Directory written by :class:`LogWriter`.
    validate : bool
        Check offsets, token ids, probabilities and tails of the whole log on opening (one
        vectorised pass); errors are ``ValueError`` naming the file and the problem.
    checksums : bool, optional
        Check every file against the log's ``SHA256SUMS`` (written by
        :meth:`LogWriter.close`), after the checks above: ``None`` (default) when the
        folder has one and ``validate``, ``True`` always (a missing ``SHA256SUMS`` is an
        error), ``False`` never.  An edited value that passes every other check (a token id
        swapped for another valid one) is caught only here.

    Attributes
    ----------
    meta : dict
        User metadata (with ``"vocab_size"``).
    vocab_size : int
    complete : bool
        Whether the writer was closed (False for an interrupted log; its committed positions
        are still valid).  A closed writer leaves every array file at its committed length,
        so a complete log whose files hold more entries than ``meta.json`` commits (counts
        lowered by hand or by corruption: a short read) is a ``ValueError``.
    """

    def __init__(self, path, *, validate=True, checksums=None):
        self.path = Path(path)
        validate = as_bool(validate, "validate")
        required = checksums is not None and as_bool(checksums, "checksums")
        check_sums = validate if checksums is None else required
        mf = self.path / "meta.json"
        doc = read_manifest(self.path, "meta.json", fmt=FORMAT, version=VERSION, what="log")
        try:
            raw = doc["committed"]
            if not isinstance(raw, dict):
                raise TypeError("'committed' is not an object")
            committed = {k: as_int(raw[k], f"committed[{k!r}]", min_value=0,
                                   max_value=2**62) for k in ("positions", "p_nnz", "q_nnz")}
            value_dtype = doc["value_dtype"]
            meta = _check_meta(doc["meta"])
        except KeyError as exc:
            raise ValueError(f"path: {mf} lacks a required field ({exc})") from None
        except (TypeError, ValueError) as exc:
            raise ValueError(f"path: {mf} has a malformed field ({exc})") from None
        if value_dtype not in _VALUE_DTYPES:
            raise ValueError(f"path: {mf} has an invalid value_dtype {value_dtype!r}")
        if not isinstance(doc.get("complete", False), bool):
            raise ValueError(f"path: {mf}: 'complete' must be true or false, got "
                             f"{doc['complete']!r}")
        self._doc = doc
        self.meta = meta
        self.vocab_size = int(meta["vocab_size"])
        self.complete = bool(doc.get("complete", False))
        dts = _dtypes(value_dtype)
        counts = _counts(committed)
        self._n = committed["positions"]
        self._arr: dict[str, np.ndarray] = {}
        for name in ARRAY_NAMES:
            f = self.path / f"{name}.npy"
            if not f.is_file():
                raise ValueError(f"path: missing array file {name}.npy")
            try:
                arr = np.load(f, mmap_mode="r", allow_pickle=False)
            except (ValueError, OSError, EOFError) as exc:
                raise ValueError(f"path: {name}.npy is corrupted ({exc})") from None
            if arr.ndim != 1 or arr.dtype != dts[name]:
                raise ValueError(f"path: {name}.npy has dtype {arr.dtype} and shape "
                                 f"{arr.shape}, expected 1-D {dts[name]}")
            if arr.shape[0] < counts[name]:
                raise ValueError(f"path: {name}.npy holds {arr.shape[0]} entries but "
                                 f"meta.json commits {counts[name]} (truncated file)")
            if self.complete and arr.shape[0] != counts[name]:
                # a closed writer leaves every file at its committed length (uncommitted
                # entries exist only in an interrupted log)
                raise ValueError(f"path: {name}.npy holds {arr.shape[0]} entries but the "
                                 f"complete log's {mf} commits {counts[name]}")
            self._arr[name] = arr[: counts[name]]
        if validate:
            self._validate(committed)
        if check_sums:
            verify_sums(self.path, required)

    def _validate(self, committed) -> None:
        a = self._arr
        for side in ("p", "q"):
            off = np.asarray(a[f"{side}_offsets"])
            if off[0] != 0 or off[-1] != committed[f"{side}_nnz"] or np.any(np.diff(off) < 1):
                raise ValueError(f"path: {side}_offsets.npy is inconsistent (must start at 0, "
                                 "increase by >= 1 per position and end at the entry count)")
            idx = np.asarray(a[f"{side}_idx"])
            if idx.size and (idx.min() < 0 or idx.max() >= self.vocab_size):
                raise ValueError(f"path: {side}_idx.npy has token ids outside "
                                 f"[0, {self.vocab_size - 1}]")
            if idx.size:  # a token stored twice in one position (dense() would drop mass)
                row = np.repeat(np.arange(self._n), np.diff(off))
                order = np.lexsort((idx, row))
                r, t = row[order], idx[order]
                dup = (r[1:] == r[:-1]) & (t[1:] == t[:-1])
                if dup.any():
                    i = int(r[1:][dup][0])
                    raise ValueError(f"path: {side}_idx.npy repeats token {int(t[1:][dup][0])} "
                                     f"within position {i} (token ids must be unique)")
            val = np.asarray(a[f"{side}_val"], dtype=np.float64)
            if not np.all(np.isfinite(val)) or np.any(val < 0) or np.any(val > 1):
                raise ValueError(f"path: {side}_val.npy has entries outside [0, 1] or NaN")
            tail = np.asarray(a[f"{side}_tail"])
            if not np.all(np.isfinite(tail)) or np.any(tail < 0) or np.any(tail > 1):
                raise ValueError(f"path: {side}_tail.npy has entries outside [0, 1] or NaN")
            if self._n:
                s = np.add.reduceat(val, off[:-1]) + tail
                if np.any(np.abs(s - 1.0) > 2 * _SUM_ATOL):
                    raise ValueError(f"path: {side}_val.npy + {side}_tail.npy rows do not sum "
                                     "to 1")
        pid = np.asarray(a["prompt_id"])
        if pid.size and pid.min() < 0:
            raise ValueError("path: prompt_id.npy has negative prompt ids")

    def __len__(self) -> int:
        return self._n

    @property
    def prompt_id(self) -> np.ndarray:
        """Prompt id of every position (memory-mapped, read-only)."""
        return self._arr["prompt_id"]

    @property
    def step(self) -> np.ndarray:
        """Index of every position within its prompt (memory-mapped, read-only)."""
        return self._arr["step"]

    def arrays(self) -> dict[str, np.ndarray]:
        """The committed part of every array (memory-mapped, read-only)."""
        return dict(self._arr)

    def _bounds(self, start, stop) -> tuple[int, int]:
        start = as_int(start, "start", min_value=0, max_value=self._n)
        stop = as_int(stop, "stop", min_value=start, max_value=self._n)
        return start, stop

    def sparse(self, start, stop) -> SparseBatch:
        """Positions ``start:stop`` in sparse form (``0 <= start <= stop <= len(self)``;
        other bounds raise ``ValueError`` naming ``start`` or ``stop``)."""
        start, stop = self._bounds(start, stop)
        a = self._arr
        out = {"start": start, "prompt_id": a["prompt_id"][start:stop],
               "step": a["step"][start:stop]}
        for side in ("p", "q"):
            off = np.asarray(a[f"{side}_offsets"][start : stop + 1])
            lo, hi = int(off[0]), int(off[-1])
            out[f"{side}_offsets"] = off - lo
            out[f"{side}_idx"] = a[f"{side}_idx"][lo:hi]
            out[f"{side}_val"] = a[f"{side}_val"][lo:hi]
            out[f"{side}_tail"] = a[f"{side}_tail"][start:stop]
        return SparseBatch(**out)

    def dense(self, start, stop, tail="other") -> DenseBatch:
        """Positions ``start:stop`` as dense probability rows (see "Tail mass" above).

        Bounds as in :meth:`sparse`; a batch whose dense rows would exceed the package's
        memory limit is refused up front (``ValueError`` naming ``stop``).
        """
        as_choice(tail, "tail", ("other", "spread", "drop"))
        start, stop = self._bounds(start, stop)
        check_alloc("stop", (stop - start) * (self.vocab_size + 1), 8 * 2 + 2,
                    what="two dense float64 rows and two masks per position")
        sb = self.sparse(start, stop)
        b, V = sb.prompt_id.shape[0], self.vocab_size
        width = V + 1 if tail == "other" else V
        mats, masks = {}, {}
        for side in ("p", "q"):
            off = getattr(sb, f"{side}_offsets")
            k = np.diff(off)
            rows = np.repeat(np.arange(b), k)
            idx = np.asarray(getattr(sb, f"{side}_idx"), dtype=np.int64)
            m = np.zeros((b, width))
            m[rows, idx] = np.asarray(getattr(sb, f"{side}_val"), dtype=np.float64)
            mask = np.zeros((b, width), dtype=bool)
            mask[rows, idx] = True
            mats[side], masks[side] = m, mask
            t = np.asarray(getattr(sb, f"{side}_tail"), dtype=np.float64)
            if tail == "spread":
                free = V - k
                fill = np.divide(t, free, out=np.zeros(b), where=free > 0)
                m += np.where(mask, 0.0, fill[:, None])
        if tail == "other":
            inter = masks["p"] & masks["q"]
            for side in ("p", "q"):
                m = mats[side]
                m[~inter] = 0.0
                # OTHER = 1 - mass on the common stored tokens (tail + own non-common tokens)
                m[:, V] = np.maximum(1.0 - m[:, :V].sum(axis=1), 0.0)
        for side in ("p", "q"):
            m = mats[side]
            m /= m.sum(axis=1, keepdims=True)
        return DenseBatch(start=start, prompt_id=np.asarray(sb.prompt_id),
                          step=np.asarray(sb.step), p=mats["p"], q=mats["q"], tail=tail)

    def batches(self, batch_size, dense=True, tail="other") -> Iterator[DenseBatch | SparseBatch]:
        """Iterate over the log in order, ``batch_size`` positions at a time.

        Parameters
        ----------
        batch_size : int >= 1
        dense : bool
            Yield :class:`DenseBatch` (float64 rows, width ``V + 1`` for ``tail="other"``,
            else ``V``; memory ``2 * batch_size * width * 8`` bytes) or :class:`SparseBatch`.
        tail : {"other", "spread", "drop"}
            How the tail mass is densified (module docstring: what each mode is exact for).
        """
        bs = as_int(batch_size, "batch_size", min_value=1)
        dense = as_bool(dense, "dense")
        as_choice(tail, "tail", ("other", "spread", "drop"))
        if dense:
            check_alloc("batch_size", min(bs, max(self._n, 1)) * (self.vocab_size + 1), 8 * 2 + 2,
                        what="two dense float64 rows and two masks per position")
        for s in range(0, self._n, bs):
            e = min(s + bs, self._n)
            yield self.dense(s, e, tail) if dense else self.sparse(s, e)

    def __repr__(self) -> str:
        return (f"LogReader({str(self.path)!r}, positions={self._n}, "
                f"vocab_size={self.vocab_size}, complete={self.complete})")

