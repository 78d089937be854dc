"""Resumable, crash-safe sweeps over named configurations, on any executor.

A *sweep* maps ``worker(arg) -> list[dict]`` over configurations ``(config_id, arg)`` and
stores the rows of each configuration the moment it finishes, so that a run stopped in any
way (Ctrl-C, ``SIGKILL``, a crashed machine) resumes where it stopped and recomputes at most
the configurations that were in flight.  The rows go to one CSV file, whose columns are
``config``, ``signature``, ``config_rows`` and then the worker's columns (the union over all
rows, in order of first appearance; a row without a column leaves it empty; a row with a
column of one of the first three names is refused, since it would overwrite the store's own).

>>> import tempfile
>>> from pathlib import Path
>>> from specbound.sweep import ResumableCSV, run_sweep
>>> def square(x):
...     return [{"x": x, "x2": x * x}]
>>> path = Path(tempfile.mkdtemp()) / "squares.csv"
>>> df = run_sweep([(f"x={x}", x) for x in range(3)], square, ResumableCSV(path, "v1"),
...                progress=False)
>>> df[["config", "x2"]].values.tolist()
[['x=0', 0], ['x=1', 1], ['x=2', 4]]
>>> store = ResumableCSV(path, "v1")   # a later run: finished configurations are skipped
>>> store.done("x=2"), store.done("x=3")
(True, False)
>>> calls = []
>>> df = run_sweep([(f"x={x}", x) for x in range(4)], lambda x: calls.append(x) or square(x),
...                store, progress=False)
>>> calls, len(df)
([3], 4)
>>> ResumableCSV(path, "v2").done("x=0")   # other settings: old rows are set aside
False

Executors
    ``run_sweep(..., executor=ex)`` accepts any :class:`concurrent.futures.Executor`: a
    local :class:`~concurrent.futures.ProcessPoolExecutor`, the executor of a Dask
    ``distributed`` client (``client.get_executor()``), Ray's executor, ...; ``None`` runs
    serially in the calling process.  Only the calling process writes the store, so workers
    need no shared file system.  On a cluster (``pip install "specbound[dist]"``)::

        from distributed import Client
        with Client("tcp://scheduler:8786") as client:
            df = run_sweep(configs, worker, ResumableCSV("out/study.csv", sig),
                           executor=client.get_executor())

    ``worker`` and its arguments must be picklable and importable on the workers (a
    module-level function of an installed package or of the project folder the workers run
    in).  A worker that dies mid-task is retried elsewhere by Dask; its configuration is
    stored once, when its result arrives.  :func:`open_executor` builds an executor from a
    string (``"serial"``, ``"process:4"``, ``"dask://host:8786"``, ``"dask-local:2"``), which
    is what ``make reproduce EXECUTOR=...`` and the environment variable
    ``SPECBOUND_EXECUTOR`` use, and :func:`use_executor` sets an executor for every sweep of
    a block of code that asks for :func:`current_executor`.

Crash safety (what the store guarantees, and how)
    * The truth is one *record* per finished configuration, in the folder
      ``.NAME.sweep/records/`` beside ``NAME.csv``: the configuration's rows as JSON, with a
      SHA-256 checksum, written to a temporary name, flushed, ``fsync``-ed and renamed into
      place with :func:`os.replace` (atomic on POSIX file systems), then the folder is
      ``fsync``-ed.  A record is therefore complete or absent; a record whose checksum fails
      (a file system without atomic rename, bit rot, an edit by hand) is set aside and its
      configuration recomputed.
    * The CSV is a view of the records: the rows of a new record are appended to it in one
      write, and whenever a store is opened the CSV is compared with the records and, if it
      differs (a write torn by a crash, an edit by hand), rewritten atomically.  A torn row
      therefore never survives a resume, and a configuration whose record exists is never
      recomputed.  Rows keep the exact text they were first written with (floats as
      ``repr``, so values round-trip bit for bit); data rows end with ``\\r\\n`` and the header
      with ``\\n``.
    * Nothing finished is deleted.  Records written under another ``signature`` (other
      settings or code version) are moved to ``.NAME.sweep/aside/stale/SIGNATURE/`` (and
      come back if a later run uses that signature again); corrupt records to
      ``aside/torn/``; an unreadable CSV to ``aside/unreadable/``; and if the CSV itself was
      deleted (the way to ask for a fresh start), its records are moved to
      ``aside/orphaned-<time>/``.  Only temporary files of interrupted writes are removed.
    * One writer at a time: every writing operation takes an exclusive ``fcntl.flock`` on
      ``.NAME.sweep/lock`` without waiting, and :func:`run_sweep` holds it for the whole
      sweep, so a second run on the same file stops at once with :class:`SweepLockedError`
      instead of computing and appending the same configurations twice.
    * A CSV written by the earlier append-only store (no ``.NAME.sweep`` folder) is imported:
      its complete configurations become records, a torn last row or an incomplete
      configuration is dropped (the original file is kept under ``aside/legacy/``).

    The tests (``tests/test_sweep.py``) kill sweeps with SIGKILL at random file-system calls
    of the store, torn writes included, resume each, and compare the final CSV with an
    uninterrupted run's, byte for byte.

Interruption
    On any exception in the calling process (``KeyboardInterrupt`` included)
    :func:`run_sweep` cancels every configuration not yet started
    (``Future.cancel``) and re-raises; every finished configuration is already stored.
    Stopping the executor is its owner's business: :func:`shutdown_now` cancels the queued
    tasks and terminates a local pool's workers instead of waiting for the queue to drain
    (``executor.shutdown()`` runs every queued task first), and :func:`open_executor` calls
    it when its block ends with an exception.  The workers of :func:`local_executor` ignore
    Ctrl-C and exit by themselves if the process that made the pool dies.

The progress bar uses ``tqdm`` when it is installed (silently off otherwise).
"""

from __future__ import annotations

import contextlib
import contextvars
import csv
import hashlib
import importlib.util
import io
import json
import logging
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Executor, Future, wait
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from specbound._io import TMP_PREFIX, atomic_write, fsync_dir, write_all

__all__ = [
    "ResumableCSV",
    "SweepCounts",
    "SweepLockedError",
    "current_executor",
    "local_executor",
    "open_executor",
    "run_sweep",
    "shutdown_now",
    "use_executor",
    "watch_sweeps",
]

log = logging.getLogger(__name__)

#: format version of the record files
RECORD_FORMAT = 1

#: the columns the store adds in front of the worker's
KEY_COLUMNS = ("config", "signature", "config_rows")

_TMP = TMP_PREFIX
_SAFE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+=-]{0,63}")
_HEADER_END = "\n"  # the header line (written by pandas in the original store)
_ROW_END = "\r\n"  # data rows (csv.writer's default line terminator)


#: lock file descriptors held by stores of this process; a forked child (a process pool's
#: worker) closes its copies, so that the lock dies with the process that took it
_HELD_LOCKS: set[int] = set()


def _close_inherited_locks() -> None:
    for fd in list(_HELD_LOCKS):
        with contextlib.suppress(OSError):
            os.close(fd)
    _HELD_LOCKS.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_close_inherited_locks)


class SweepLockedError(RuntimeError):
    """Another process is writing the same sweep store (see :class:`ResumableCSV`)."""


# ------------------------------------------------------------------------ file primitives


def _stamp() -> str:
    return time.strftime("%Y%m%dT%H%M%S") + f"-{os.getpid()}-{os.urandom(2).hex()}"


def _move_aside(src: Path, dest_dir: Path, name: str | None = None) -> Path:
    dest_dir.mkdir(parents=True, exist_ok=True)
    dest = dest_dir / (name or src.name)
    if dest.exists():
        dest = dest_dir / f"{dest.name}.{_stamp()}"
    os.replace(src, dest)
    fsync_dir(dest_dir)
    return dest


# ------------------------------------------------------------------------ values and lines


def _fmt(v):
    """The value as the CSV writer gets it: floats as their exact ``repr``, NumPy ints as int."""
    if isinstance(v, float | np.floating):
        return repr(float(v))
    if isinstance(v, np.integer):
        return int(v)
    return v


def _text(v) -> str:
    """The text of a value in the CSV (what :mod:`csv` writes for it before quoting)."""
    if v is None:
        return ""
    v = _fmt(v)
    return v if isinstance(v, str) else str(v)


def _line(fields: Sequence[str], end: str) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator=end).writerow(fields)
    return buf.getvalue()


@dataclass(frozen=True)
class _Record:
    """One finished configuration: its rows as ``{column: text}`` in column order."""

    seq: int
    config: str
    signature: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]  # aligned with ``columns``

    def encode(self) -> bytes:
        body = json.dumps(
            {"format": RECORD_FORMAT, "seq": self.seq, "config": self.config,
             "signature": self.signature, "columns": list(self.columns),
             "rows": [list(r) for r in self.rows]},
            ensure_ascii=False, separators=(",", ":"),
        ).encode()
        return hashlib.sha256(body).hexdigest().encode() + b"\n" + body

    @classmethod
    def decode(cls, data: bytes) -> _Record:
        """Parse and verify a record; ``ValueError`` if it is torn or corrupt."""
        digest, sep, body = data.partition(b"\n")
        if not sep or hashlib.sha256(body).hexdigest().encode() != digest:
            raise ValueError("checksum mismatch")
        d = json.loads(body.decode())
        if d.get("format") != RECORD_FORMAT:
            raise ValueError(f"unknown record format {d.get('format')!r}")
        cols = tuple(d["columns"])
        rows = tuple(tuple(r) for r in d["rows"])
        if any(len(r) != len(cols) for r in rows):
            raise ValueError("row width differs from the columns")
        return cls(int(d["seq"]), str(d["config"]), str(d["signature"]), cols, rows)

    def filename(self) -> str:
        h = hashlib.sha1(self.config.encode()).hexdigest()[:16]
        return f"{self.seq:09d}-{h}.json"

    def lines(self, header: Sequence[str]) -> str:
        out = []
        for r in self.rows:
            d = dict(zip(self.columns, r, strict=True))
            out.append(_line([d.get(c, "") for c in header], _ROW_END))
        return "".join(out)


def _union(base: Iterable[str], more: Iterable[Iterable[str]]) -> list[str]:
    cols = list(base)
    seen = set(cols)
    for group in more:
        for c in group:
            if c not in seen:
                seen.add(c)
                cols.append(c)
    return cols


# ------------------------------------------------------------------------ the store


class ResumableCSV:
    """Crash-safe store of a sweep's finished configurations, viewed as one CSV file.

    Parameters
    ----------
    path : str or Path
        The CSV file.  Its records, lock and set-aside files live in the folder
        ``.NAME.sweep`` beside it (module docstring).
    signature : str
        Identifies the settings and code version that produced the rows: records written
        under another signature are set aside when the store is opened (so changing the
        settings recomputes everything, and nothing old is mixed in).

    Opening the store brings the folder to a consistent state (it takes the lock for that
    and raises :class:`SweepLockedError` if another process holds it): records are checked,
    stale and corrupt ones set aside, and the CSV rewritten if it does not match them.

    Notes
    -----
    ``append`` writes the record before the CSV (module docstring); ``frame`` reads the CSV
    with only empty fields and ``"nan"`` as missing values, so ids such as ``"null"`` or
    ``"NA"`` stay strings.
    """

    def __init__(self, path, signature: str):
        if not isinstance(signature, str) or not signature:
            raise ValueError(f"signature: must be a non-empty string, got {signature!r}")
        try:
            self.path = Path(path)
        except TypeError:
            raise ValueError(f"path: must be a file path, got {path!r}") from None
        if self.path.name in ("", ".", ".."):
            raise ValueError(f"path: must name a file, got {path!r}")
        if self.path.is_dir():
            raise ValueError(f"path: {str(self.path)!r} is a directory; give the path of the "
                             "CSV file (e.g. DIR/study.csv)")
        if self.path.exists() and not self.path.is_file():
            raise ValueError(f"path: {str(self.path)!r} exists and is not a regular file")
        for folder in self.path.parents:
            if folder.exists():
                if not folder.is_dir():
                    raise ValueError(f"path: {str(folder)!r} (a folder of the path) is not "
                                     "a directory")
                break
        self.signature = signature
        self.dir = self.path.parent / f".{self.path.name}.sweep"
        self._records_dir = self.dir / "records"
        self._aside = self.dir / "aside"
        self._lock_fd: int | None = None
        self._lock_depth = 0
        self._cache: dict[str, _Record] = {}  # file name -> record (current signature)
        self._by_config: dict[str, str] = {}  # config -> file name
        self._header: list[str] | None = None  # header of the CSV on disk (None: empty)
        self._synced: frozenset[str] | None = None  # records reflected in the CSV
        with self._locked():
            self._sync()

    # -- public API ------------------------------------------------------------------------

    @property
    def columns(self) -> list[str] | None:
        """The CSV's columns (None while it has no header)."""
        return None if self._header is None else list(self._header)

    def done(self, config: str) -> bool:
        """Whether configuration ``config`` is stored (as of the last opening or write)."""
        return config in self._by_config

    def __len__(self) -> int:
        """Number of stored configurations."""
        return len(self._by_config)

    def append(self, config: str, rows: Sequence[Mapping]) -> None:
        """Store all rows of configuration ``config`` at once (atomically).

        ``config`` is a non-empty id other than ``"nan"`` not stored yet; ``rows`` a
        sequence of mappings from column name to value (an empty sequence marks the
        configuration done without adding rows).  Each stored row is
        ``{"config": config, "signature": signature, "config_rows": len(rows), **row}``;
        a row may not have a column of the store's own (``config``, ``signature``,
        ``config_rows``: :data:`KEY_COLUMNS`), which would overwrite it (``ValueError``
        naming the column).
        """
        if not isinstance(config, str) or config in ("", "nan"):
            raise ValueError(f"config: must be a non-empty string other than 'nan', got "
                             f"{config!r}")
        if isinstance(rows, Mapping) or not isinstance(rows, Sequence) or isinstance(
                rows, str | bytes):
            raise ValueError(f"rows: must be a sequence of mappings (dicts), got "
                             f"{type(rows).__name__}")
        for r in rows:
            if not isinstance(r, Mapping):
                raise ValueError(f"rows: every row must be a mapping (dict), got "
                                 f"{type(r).__name__}")
            clash = [c for c in KEY_COLUMNS if c in r]
            if clash:
                raise ValueError(
                    f"rows: column {clash[0]!r} of configuration {config!r} is one of the "
                    f"store's own columns {KEY_COLUMNS}; rename it in the worker's rows")
        n = len(rows)
        full = [{"config": config, "signature": self.signature, "config_rows": n, **r}
                for r in rows]
        bad = [c for r in full for c in r if not isinstance(c, str)]
        if bad:
            raise ValueError(f"rows: column names must be strings, got {bad[0]!r}")
        cols = _union([], full)
        texts = tuple(tuple(_text(r.get(c)) if c in r else "" for c in cols) for r in full)
        with self._locked():
            if self._lock_depth == 1:  # not inside a run_sweep session: see other writers
                self._sync()
            if config in self._by_config:
                raise ValueError(f"config: {config!r} is already stored in {self.path}")
            seq = 1 + max((rec.seq for rec in self._cache.values()), default=0)
            rec = _Record(seq, config, self.signature, tuple(cols), texts)
            self._commit(rec)

    def frame(self):
        """The stored rows as a :class:`pandas.DataFrame` (the CSV, current signature only)."""
        import pandas as pd

        if not self.path.exists() or self.path.stat().st_size == 0:
            return pd.DataFrame()
        return pd.read_csv(self.path, dtype={"config": str, "signature": str},
                           keep_default_na=False, na_values=["", "nan"])

    def restart(self) -> int:
        """Start the store over: every stored configuration of this signature is set aside
        (moved to ``.NAME.sweep/aside/fresh-<time>/``, nothing is deleted) and the CSV
        emptied, so that every configuration is computed again; returns how many were set
        aside.  What deleting the CSV asks for, as a method (``--fresh`` of the studies,
        :func:`watch_sweeps`)."""
        with self._locked():
            self._sync()
            names = sorted(self._cache)
            if names:
                dest = self._aside / f"fresh-{_stamp()}"
                self._aside.mkdir(parents=True, exist_ok=True)
                os.replace(self._records_dir, dest)
                self._records_dir.mkdir()
                fsync_dir(self.dir)
                log.info("%s: %d records set aside in %s (restart)", self.path, len(names),
                         dest)
            self._cache.clear()
            self._by_config = {}
            if self.path.exists() and self.path.stat().st_size:
                atomic_write(self.path, b"")
            self._header = None
            self._synced = frozenset()
            return len(names)

    # -- locking ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Hold the store's exclusive lock (re-entrant within this object)."""
        if self._lock_fd is not None:
            self._lock_depth += 1
            try:
                yield
            finally:
                self._lock_depth -= 1
            return
        self.dir.mkdir(parents=True, exist_ok=True)
        lock = self.dir / "lock"
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX: no inter-process lock
            fcntl = None
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "?"
                os.close(fd)
                raise SweepLockedError(
                    f"{self.path}: another sweep (pid {holder}) is writing this store; wait "
                    f"for it to finish or stop it, then run again (finished configurations "
                    f"are kept)") from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._lock_fd, self._lock_depth = fd, 1
        _HELD_LOCKS.add(fd)
        try:
            yield
        finally:
            self._lock_fd, self._lock_depth = None, 0
            _HELD_LOCKS.discard(fd)
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    @contextlib.contextmanager
    def session(self) -> Iterator[ResumableCSV]:
        """Hold the lock for a block of appends (what :func:`run_sweep` does).

        Entering re-reads the folder, so configurations stored by a run that finished in the
        meantime count as done; a concurrent run gets :class:`SweepLockedError`.
        """
        with self._locked():
            self._sync()
            yield self

    # -- consistency -----------------------------------------------------------------------

    def _sync(self) -> None:
        """Bring folder, records and CSV to a consistent state (lock held)."""
        for tmp in self.path.parent.glob(f"{_TMP}{self.path.name}.*"):
            tmp.unlink(missing_ok=True)  # an interrupted CSV rewrite: never committed
        if not self._records_dir.is_dir():
            self._initialise()
        for tmp in self._records_dir.glob(f"{_TMP}*"):
            tmp.unlink(missing_ok=True)  # an interrupted record write: never committed
        self._restore_stale()
        names = sorted(p.name for p in self._records_dir.glob("*.json"))
        if names and not self.path.exists():
            # the CSV was deleted: start over, keeping its records aside
            dest = self._aside / f"orphaned-{_stamp()}"
            self._aside.mkdir(parents=True, exist_ok=True)
            os.replace(self._records_dir, dest)
            self._records_dir.mkdir()
            fsync_dir(self.dir)
            log.info("%s: CSV missing, %d records set aside in %s", self.path, len(names), dest)
            names = []
            self._cache.clear()
            self._synced = None
        for gone in set(self._cache) - set(names):
            del self._cache[gone]
        for name in names:
            if name not in self._cache:
                self._load(name)
        self._by_config = {}
        for name, rec in sorted(self._cache.items(), key=lambda kv: kv[1].seq):
            self._by_config.setdefault(rec.config, name)
        if len(self._by_config) != len(self._cache):  # the same config twice: keep the first
            for name in sorted(set(self._cache) - set(self._by_config.values())):
                self._set_aside(name, "duplicate")
        if self._synced != frozenset(self._cache):
            self._rebuild_csv()

    def _stale_dir(self, signature: str) -> Path:
        safe = signature if _SAFE.fullmatch(signature) else (
            "sig-" + hashlib.sha1(signature.encode()).hexdigest()[:16])
        return self._aside / "stale" / safe

    def _restore_stale(self) -> None:
        """Bring back records of this signature set aside earlier (settings switched back)."""
        stale = self._stale_dir(self.signature)
        if not stale.is_dir():
            return
        moved = 0
        for src in sorted(stale.glob("*.json")):
            if not (self._records_dir / src.name).exists():
                os.replace(src, self._records_dir / src.name)
                moved += 1
        if moved:
            fsync_dir(self._records_dir)
            log.info("%s: %d records of these settings restored from %s", self.path, moved,
                     stale)

    def _load(self, name: str) -> None:
        path = self._records_dir / name
        try:
            rec = _Record.decode(path.read_bytes())
            if rec.filename() != name:
                raise ValueError("file name does not match the record")
        except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError) as exc:
            dest = _move_aside(path, self._aside / "torn")
            log.warning("%s: corrupt record set aside as %s (%s); its configuration will be "
                        "recomputed", self.path, dest, exc)
            return
        if rec.signature != self.signature:
            dest = _move_aside(path, self._stale_dir(rec.signature))
            log.info("%s: record of other settings set aside as %s", self.path, dest)
            return
        self._cache[name] = rec

    def _set_aside(self, name: str, why: str) -> None:
        _move_aside(self._records_dir / name, self._aside / why)
        del self._cache[name]

    def _ordered(self) -> list[_Record]:
        return sorted(self._cache.values(), key=lambda r: r.seq)

    def _prior_header(self) -> list[str]:
        """The header of the CSV on disk, if it is complete and a sweep header."""
        try:
            with open(self.path, newline="", encoding="utf-8") as fh:
                first = fh.readline()
        except (OSError, UnicodeDecodeError):
            return []
        if not first.endswith("\n"):
            return []  # empty, or a torn first write
        header = next(csv.reader([first]), [])
        return header if set(KEY_COLUMNS) <= set(header) else []

    def _csv_text(self, header: list[str]) -> str:
        if not header:
            return ""
        return _line(header, _HEADER_END) + "".join(r.lines(header) for r in self._ordered())

    def _rebuild_csv(self) -> None:
        recs = self._ordered()
        header = _union(self._prior_header(), (r.columns for r in recs))
        text = self._csv_text(header).encode()
        if self.path.exists():
            if self.path.read_bytes() != text:
                atomic_write(self.path, text)
        elif text:
            atomic_write(self.path, text)
        self._header = header or None
        self._synced = frozenset(self._cache)

    def _commit(self, rec: _Record) -> None:
        """Write a record (the commit point) and bring the CSV up to date."""
        if not self.path.exists():
            # the CSV exists before the first record, so a missing CSV with records always
            # means that a user deleted it (see _sync)
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o666)
            os.close(fd)
            fsync_dir(self.path.parent)
        name = rec.filename()
        atomic_write(self._records_dir / name, rec.encode())
        self._cache[name] = rec
        self._by_config[rec.config] = name
        header = _union(self._header or [], [rec.columns])
        if self._header is not None and header == self._header:
            data = rec.lines(header).encode()
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
            try:
                write_all(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            self._synced = frozenset(self._cache)
        else:
            self._rebuild_csv()

    # -- import of a CSV written by the append-only store ---------------------------------

    def _initialise(self) -> None:
        """Create ``records/``, importing a CSV written without records (lock held)."""
        import shutil

        for old in self.dir.glob(f"{_TMP}records.*"):
            shutil.rmtree(old, ignore_errors=True)  # an interrupted import: never committed
        staging = self.dir / f"{_TMP}records.{_stamp()}"
        staging.mkdir(parents=True)
        if self.path.exists() and self.path.stat().st_size > 0:
            self._import_legacy(staging)
        fsync_dir(staging)
        os.replace(staging, self._records_dir)
        fsync_dir(self.dir)

    def _import_legacy(self, staging: Path) -> None:
        raw = self.path.read_bytes()
        try:
            text = raw.decode("utf-8")
            header, rows = self._parse_legacy(text)
        except (ValueError, UnicodeDecodeError, csv.Error) as exc:
            dest = _move_aside(self.path, self._aside / "unreadable",
                               f"{self.path.name}.{_stamp()}")
            log.warning("%s: not a sweep CSV (%s); moved to %s", self.path, exc, dest)
            return
        groups: dict[str, list[tuple[str, ...]]] = {}
        for r in rows:
            groups.setdefault(r[header.index("config")], []).append(r)
        i_sig, i_n = header.index("signature"), header.index("config_rows")
        seq = 0
        dropped = 0
        for config, grp in groups.items():
            sigs = {r[i_sig] for r in grp}
            ns = {r[i_n] for r in grp}
            ok = (len(sigs) == 1 and len(ns) == 1 and config not in ("", "nan")
                  and next(iter(ns)).isdigit() and int(next(iter(ns))) == len(grp))
            if not ok:
                dropped += len(grp)
                continue
            sig = next(iter(sigs))
            seq += 1
            rec = _Record(seq, config, sig, tuple(header), tuple(grp))
            if sig == self.signature:
                dest = staging
            else:
                dest = self._stale_dir(sig)
                dest.mkdir(parents=True, exist_ok=True)
            atomic_write(dest / rec.filename(), rec.encode())
        if dropped or not text.endswith("\n"):
            aside = self._aside / "legacy"
            aside.mkdir(parents=True, exist_ok=True)
            (aside / f"{self.path.name}.{_stamp()}").write_bytes(raw)
            log.warning("%s: %d rows of incomplete configurations dropped (original kept in "
                        "%s)", self.path, dropped, aside)

    @staticmethod
    def _parse_legacy(text: str) -> tuple[list[str], list[tuple[str, ...]]]:
        """Header and rows of a CSV of the append-only store, without a torn last row.

        A torn last row is one cut before its line break, or inside a quoted field (the
        strict reader then reaches the end of the data inside quotes).
        """
        reader = csv.reader(io.StringIO(text, newline=""), strict=True)
        rows: list[tuple[str, ...]] = []
        try:
            for r in reader:
                rows.append(tuple(r))
        except csv.Error as exc:
            if "unexpected end of data" not in str(exc):
                raise
            # torn inside a quoted field: the rows read so far are complete
        else:
            if not text.endswith("\n") and rows:
                rows.pop()  # cut before its line break
        if not rows:
            raise ValueError("no header")
        header = list(rows.pop(0))
        if not set(KEY_COLUMNS) <= set(header) or len(set(header)) != len(header):
            raise ValueError("no config/signature/config_rows header")
        for r in rows:
            if len(r) != len(header):
                raise ValueError(f"a row with {len(r)} fields under a {len(header)}-column "
                                 "header")
        return header, rows


# ------------------------------------------------------------------------ running a sweep


class _NoBar:
    def update(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass


def _progress_bar(total: int, desc: str, enabled: bool):
    if enabled and total:
        try:
            from tqdm.auto import tqdm
        except ImportError:
            return _NoBar()
        return tqdm(total=total, desc=desc, leave=False)
    return _NoBar()


def _check_configs(configs) -> list[tuple[str, object]]:
    try:
        items = list(configs)
    except TypeError:
        raise ValueError(f"configs: must be an iterable of (config_id, arg) pairs, got "
                         f"{type(configs).__name__}") from None
    seen: set[str] = set()
    out = []
    for item in items:
        if not isinstance(item, tuple | list) or len(item) != 2:
            raise ValueError(f"configs: every item must be a (config_id, arg) pair, got "
                             f"{item!r:.80}")
        c, a = item
        if not isinstance(c, str) or c in ("", "nan"):
            raise ValueError(f"configs: ids must be non-empty strings other than 'nan', got "
                             f"{c!r}")
        if c in seen:
            raise ValueError(f"configs: duplicate id {c!r}")
        seen.add(c)
        out.append((c, a))
    return out


def run_sweep(configs: Iterable[tuple[str, object]], worker: Callable, store: ResumableCSV, *,
              executor: Executor | None = None, progress: bool = True, desc: str = ""):
    """Run ``worker(arg) -> list[dict]`` for every pending ``(config_id, arg)``; store rows.

    Parameters
    ----------
    configs : iterable of (str, object)
        Configuration ids (unique, non-empty, not ``"nan"``) and the argument of each.
    worker : callable
        ``worker(arg)`` returns the rows (a list of dicts) of one configuration.
    store : ResumableCSV
        Configurations already stored are skipped; each finished one is stored at once
        (:meth:`ResumableCSV.append`), so an interruption loses at most the configurations
        in flight.
    executor : concurrent.futures.Executor, optional
        Where the workers run: any ``Executor`` (a local process pool, a Dask client's
        ``get_executor()``, Ray, ...).  None (default) runs them serially, in order.
    progress : bool
        Show a progress bar (if ``tqdm`` is installed).
    desc : str
        Label of the progress bar.

    Returns
    -------
    pandas.DataFrame
        All stored rows (:meth:`ResumableCSV.frame`).

    Notes
    -----
    The store's lock is held for the whole sweep: a second run on the same store raises
    :class:`SweepLockedError`.  With an executor, every pending configuration is submitted
    at once and stored in completion order (futures found done together are stored in
    submission order).  On any exception (a worker's, or ``KeyboardInterrupt``) the
    configurations not yet started are cancelled and the exception re-raised; shutting the
    executor down is the caller's business (:func:`shutdown_now` stops it at once).
    """
    todo_all = _check_configs(configs)
    if not callable(worker):
        raise ValueError(f"worker: must be callable, got {type(worker).__name__}")
    if not isinstance(store, ResumableCSV):
        raise ValueError(f"store: must be a ResumableCSV, got {type(store).__name__}")
    if executor is not None and not callable(getattr(executor, "submit", None)):
        raise ValueError(f"executor: must be a concurrent.futures.Executor or None, got "
                         f"{type(executor).__name__}")
    if not isinstance(progress, bool):
        raise ValueError(f"progress: must be a bool, got {type(progress).__name__}")
    with store.session():
        watch = _WATCH.get(None)
        set_aside = 0
        if watch is not None and watch.fresh:
            key = store.path.resolve()
            if key not in watch.restarted:  # once per store and block: a study may run
                watch.restarted.add(key)  # several sweeps on one store
                set_aside = store.restart()
        todo = [(c, a) for c, a in todo_all if not store.done(c)]
        if watch is not None and watch.callback is not None:
            watch.callback(SweepCounts(desc, store.path, len(todo_all) - len(todo), len(todo),
                                       set_aside))
        bar = _progress_bar(len(todo), desc, progress)
        try:
            if executor is None:
                for c, a in todo:
                    store.append(c, worker(a))
                    bar.update()
            else:
                _run_futures(todo, worker, store, executor, bar)
        finally:
            bar.close()
    return store.frame()


def _run_futures(todo, worker, store: ResumableCSV, executor: Executor, bar) -> None:
    order: dict[Future, int] = {}
    ids: dict[Future, str] = {}
    try:
        for i, (c, a) in enumerate(todo):
            fut = executor.submit(worker, a)
            order[fut], ids[fut] = i, c
        pending = set(order)
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for fut in sorted(done, key=order.__getitem__):
                store.append(ids[fut], fut.result())
                bar.update()
    except BaseException:
        for fut in order:
            fut.cancel()
        raise


# ------------------------------------------------------------------------ watching sweeps


@dataclass(frozen=True)
class SweepCounts:
    """What one :func:`run_sweep` found before computing (given to a :func:`watch_sweeps`
    callback): its ``desc``, the store's ``path``, how many of its configurations were
    ``stored`` already, how many it computes (``to_compute``) and how many stored
    configurations a fresh start set aside (``set_aside``)."""

    desc: str
    path: Path
    stored: int
    to_compute: int
    set_aside: int = 0

    @property
    def total(self) -> int:
        """Number of configurations of the sweep."""
        return self.stored + self.to_compute


@dataclass
class _Watch:
    callback: Callable | None
    fresh: bool
    restarted: set


_WATCH: contextvars.ContextVar = contextvars.ContextVar("specbound_sweep_watch")


@contextlib.contextmanager
def watch_sweeps(callback: Callable[[SweepCounts], object] | None = None, *,
                 fresh: bool = False) -> Iterator[None]:
    """Within the block, every :func:`run_sweep` calls ``callback(SweepCounts)`` once it has
    opened its store and before it computes anything (how many configurations it found
    stored, how many it computes); with ``fresh=True`` each store is first started over
    (:meth:`ResumableCSV.restart`: its stored configurations set aside, never deleted), once
    per store within the block (and within the blocks around it), so that everything is
    recomputed.  What the studies' ``--fresh`` flag and their "N of M stored" line use."""
    if callback is not None and not callable(callback):
        raise ValueError(f"callback: must be callable or None, got {type(callback).__name__}")
    if not isinstance(fresh, bool):
        raise ValueError(f"fresh: must be a bool, got {type(fresh).__name__}")
    outer = _WATCH.get(None)  # nested blocks share the stores already started over
    token = _WATCH.set(_Watch(callback, fresh, set() if outer is None else outer.restarted))
    try:
        yield
    finally:
        _WATCH.reset(token)


# ------------------------------------------------------------------------ executors


def _pool_worker_init(interval: float = 0.5) -> None:
    """Process-pool initializer: ignore Ctrl-C, and exit when the parent process is gone.

    Ctrl-C in a terminal reaches every process of the group; the parent alone handles it
    (:func:`shutdown_now` terminates the workers), so the workers print no tracebacks.  A
    pool's workers outlive a parent killed with SIGKILL (they wait on a queue whose writing
    end they hold themselves), keeping CPUs and inherited files; a daemon thread polls
    ``os.getppid()`` and ends the worker once it has been re-parented.
    """
    import signal
    import threading

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(interval)
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def local_executor(max_workers: int | None = None) -> Executor:
    """A :class:`~concurrent.futures.ProcessPoolExecutor` whose workers exit with it.

    ``max_workers`` defaults to the number of CPUs.  Each worker ends itself within half a
    second of the death of the process that made the pool (even by SIGKILL), so no worker
    is left running after the sweep's process is killed, and ignores Ctrl-C (the parent
    stops the pool, :func:`shutdown_now`).
    """
    from concurrent.futures import ProcessPoolExecutor

    if max_workers is not None and (isinstance(max_workers, bool) or not isinstance(
            max_workers, int | np.integer) or max_workers < 1):
        raise ValueError(f"max_workers: must be a positive integer or None, got "
                         f"{max_workers!r}")
    return ProcessPoolExecutor(max_workers=None if max_workers is None else int(max_workers),
                               initializer=_pool_worker_init)


def shutdown_now(executor: Executor | None) -> None:
    """Stop an executor at once: cancel queued tasks, don't wait for running ones.

    For a local process pool the worker processes are terminated (their running tasks are
    lost, which a resumable sweep recomputes on the next run); other executors get
    ``shutdown(wait=False, cancel_futures=True)`` (or ``shutdown(wait=False)`` where
    ``cancel_futures`` is not supported, e.g. Dask's, which cancels its futures then).
    """
    if executor is None:
        return
    terminate = getattr(executor, "terminate_workers", None)  # ProcessPool, Python >= 3.14
    procs = getattr(executor, "_processes", None)  # ProcessPoolExecutor before 3.14
    procs = list(procs.values()) if isinstance(procs, dict) and not callable(terminate) else []
    if callable(terminate):
        with contextlib.suppress(Exception):
            terminate()
    try:
        executor.shutdown(wait=False, cancel_futures=True)
    except TypeError:
        executor.shutdown(wait=False)
    for p in procs:
        with contextlib.suppress(Exception):
            p.terminate()
    for p in procs:
        with contextlib.suppress(Exception):
            p.join(5)


_AMBIENT: contextvars.ContextVar = contextvars.ContextVar("specbound_sweep_executor")


@contextlib.contextmanager
def use_executor(executor: Executor | None) -> Iterator[Executor | None]:
    """Within the block, :func:`current_executor` returns ``executor`` (None: serial).

    A driver (``paper_figs.run_all``) uses it to send the sweeps of code it does not call
    with an ``executor=`` argument to one executor.
    """
    if executor is not None and not callable(getattr(executor, "submit", None)):
        raise ValueError(f"executor: must be a concurrent.futures.Executor or None, got "
                         f"{type(executor).__name__}")
    token = _AMBIENT.set(executor)
    try:
        yield executor
    finally:
        _AMBIENT.reset(token)


def current_executor(default=None):
    """The executor set by the innermost :func:`use_executor` (may be None), else ``default``."""
    return _AMBIENT.get(default)


#: seconds :func:`open_executor` waits for a Dask scheduler before giving up
SCHEDULER_TIMEOUT_SECONDS = 10.0


def check_executor_spec(spec: str | None) -> tuple[str, int] | None:
    """Check an executor spec of :func:`open_executor` without starting anything; returns
    ``(host, port)`` for a Dask scheduler address, else None.  A ``ValueError`` naming
    ``spec`` for a malformed spec, a worker count that is not a positive integer, a port
    outside 1..65535 and a Dask spec without the ``distributed`` package."""
    if spec is not None and not isinstance(spec, str):
        raise ValueError(f"spec: must be a string or None, got {type(spec).__name__}")
    s = (spec or "").strip()
    kind, _, arg = s.partition(":")
    if s in ("", "serial"):
        return None
    if kind not in ("process", "dask", "tcp", "dask-local"):
        raise ValueError(f"spec: must be 'serial', 'process[:N]', 'dask://host:port', "
                         f"'tcp://host:port' or 'dask-local[:N]', got {s!r}")
    if kind in ("process", "dask-local"):
        if arg != "" and (not arg.isdigit() or int(arg) < 1):
            raise ValueError(f"spec: worker count must be a positive integer, got {s!r}")
    if kind == "process":
        return None
    if importlib.util.find_spec("distributed") is None:
        raise ValueError(f"spec: {s!r} needs the Dask 'distributed' package (pip install "
                         f"'specbound[dist]')")
    if kind == "dask-local":
        return None
    host, _, port = arg[2:].rpartition(":") if arg.startswith("//") else ("", "", "")
    host = host.strip("[]")
    if not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError(f"spec: a scheduler address must look like 'dask://host:port' "
                         f"(port 1 to 65535), got {s!r}")
    return host, int(port)


@contextlib.contextmanager
def open_executor(spec: str | None) -> Iterator[Executor | None]:
    """Build an executor from a string, and close it when the block ends.

    ``spec``:

    ``None`` or ``""`` or ``"serial"``
        None (serial, in the calling process).
    ``"process"`` or ``"process:N"``
        A local process pool (N workers; default: CPU count).
    ``"dask://HOST:PORT"`` or ``"tcp://HOST:PORT"``
        The executor of a Dask ``distributed`` client connected to that scheduler (extra
        ``dist``).  The workers must be able to import the sweep's worker functions.
    ``"dask-local"`` or ``"dask-local:N"``
        A Dask ``LocalCluster`` of N single-threaded worker processes (for testing the
        cluster path on one machine).

    On an exception inside the block the executor is stopped at once
    (:func:`shutdown_now`); otherwise it is shut down normally.
    """
    host_port = check_executor_spec(spec)
    s = (spec or "").strip()
    kind, _, arg = s.partition(":")
    if s in ("", "serial"):
        yield None
        return
    if kind == "process":
        ex = local_executor(int(arg) if arg else None)
        closers = []
    else:
        from distributed import Client, LocalCluster

        if kind == "dask-local":
            cluster = LocalCluster(n_workers=int(arg) if arg else 2, threads_per_worker=1,
                                   processes=True, dashboard_address=None)
            client = Client(cluster)
            closers = [cluster.close, client.close]
        else:
            try:
                host, port = host_port
                host = f"[{host}]" if ":" in host else host  # an IPv6 address
                client = Client(f"tcp://{host}:{port}", timeout=SCHEDULER_TIMEOUT_SECONDS)
            except (OSError, TimeoutError) as exc:
                raise ValueError(f"spec: cannot reach the Dask scheduler at {s!r} within "
                                 f"{SCHEDULER_TIMEOUT_SECONDS:g} s ({exc})") from None
            closers = [client.close]
        ex = client.get_executor()
    try:
        yield ex
    except BaseException:
        shutdown_now(ex)
        raise
    else:
        with contextlib.suppress(TypeError):
            ex.shutdown(wait=True)
    finally:
        for close in reversed(closers):
            with contextlib.suppress(Exception):
                close()
