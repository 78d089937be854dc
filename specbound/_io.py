"""File primitives shared by every layer (private): crash-safe writes and manifest reading.

- :func:`atomic_write` -- replace a file's contents all at once: the data go to a temporary
  file in the same folder (named ``TMP_PREFIX + name + .PID.RANDOM``, created exclusively),
  which is flushed and ``fsync``-ed, then renamed over the target with :func:`os.replace`
  (atomic on POSIX file systems), and the folder is ``fsync``-ed so that the rename itself
  survives a crash.  A reader sees the old contents or the new ones, never a mixture; a
  crash leaves at most a stray temporary file, which :data:`TMP_PREFIX` lets its owner find.
- :func:`read_manifest` -- read a folder's JSON manifest and check its format tag and
  version, with one ``ValueError`` naming ``path`` for every way it can be wrong.

Used by :mod:`specbound.sweep` (records and the CSV of a sweep), :mod:`specbound.sim.logged`
and :mod:`specbound.llm.logs` (distribution logs) and the figure scripts.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

__all__ = ["TMP_PREFIX", "atomic_write", "fsync_dir", "read_manifest", "write_all"]

#: name prefix of the temporary files of :func:`atomic_write`
TMP_PREFIX = ".tmp-"


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of ``data`` to the file descriptor ``fd`` (``os.write`` may write
    fewer bytes than asked)."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def fsync_dir(path) -> None:
    """``fsync`` the folder ``path``, so that a rename or a new file in it is durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path, data: bytes) -> None:
    """Replace the contents of ``path`` with ``data`` atomically and durably.

    Through a temporary file in the same folder, ``fsync`` and :func:`os.replace`, then an
    ``fsync`` of the folder (see the module docstring).  On any error the temporary file is
    removed and the error raised; ``path`` keeps its old contents.
    """
    path = Path(path)
    tmp = path.with_name(f"{TMP_PREFIX}{path.name}.{os.getpid()}.{os.urandom(4).hex()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        try:
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)


def read_manifest(folder, name: str, *, fmt: str, version: int, what: str) -> dict:
    """The JSON object in ``folder/name``, checked to be a ``fmt`` document of ``version``.

    ``what`` names the document in messages (``"log"``, ``"distribution log"``).  Raises
    ``ValueError`` naming ``path`` when the file is missing, is not valid UTF-8 JSON, is not
    an object with ``"format": fmt``, or has another ``"version"``.
    """
    mf = Path(folder) / name
    if not mf.is_file():
        raise ValueError(f"path: {folder} is not a {what} (no {name})")
    try:
        doc = json.loads(mf.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise ValueError(f"path: {mf} is not valid JSON ({exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != fmt:
        raise ValueError(f"path: {mf} is not a {fmt} {what}")
    if doc.get("version") != version:
        raise ValueError(f"path: {mf}: unsupported format version {doc.get('version')!r} "
                         f"(this reader reads version {version})")
    return doc
