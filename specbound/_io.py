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


# ----------------------------------------------------------------------------- checksums

#: the checksum file of a log folder: one line ``<sha256 hex digest>  <relative path>`` per
#: file (``#`` starts a comment line)
SUMS = "SHA256SUMS"
#: first line of the ``SHA256SUMS`` a writer of the package writes when it closes a log: such
#: a log may be resumed (its checksums are checked, then rewritten at the next close); a
#: ``SHA256SUMS`` without it marks a published log (``scripts/make_log.py``)
WRITER_MARK = "# specbound: written when the log was closed; rewritten when it is resumed"


def file_digests(folder) -> dict[str, str]:
    """SHA-256 of every file under ``folder`` except its ``SHA256SUMS`` (relative POSIX paths,
    sorted; temporary files of an atomic write are left out)."""
    folder = Path(folder)
    out = {}
    for f in sorted(folder.rglob("*")):
        rel = f.relative_to(folder).as_posix()
        if f.is_file() and rel != SUMS and not f.name.startswith(TMP_PREFIX):
            out[rel] = _sha256(f)
    return out


def _sha256(f: Path) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(f, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write_sums(folder) -> Path:
    """Write ``folder/SHA256SUMS`` (atomically) for every file under it, headed by
    :data:`WRITER_MARK`; returns its path."""
    folder = Path(folder)
    lines = [WRITER_MARK] + [f"{d}  {name}" for name, d in file_digests(folder).items()]
    path = folder / SUMS
    atomic_write(path, ("\n".join(lines) + "\n").encode("utf-8"))
    return path


def sums_written_by_writer(folder) -> bool:
    """Whether ``folder/SHA256SUMS`` starts with :data:`WRITER_MARK` (a resumable log)."""
    try:
        with open(Path(folder) / SUMS, "rb") as fh:
            return fh.readline().rstrip(b"\r\n") == WRITER_MARK.encode()
    except OSError:
        return False


def read_sums(folder) -> dict[str, str]:
    """``SHA256SUMS`` of a log folder: relative file name -> hex digest (lines
    ``<digest>  <name>``; ``#`` starts a comment line).  ``ValueError`` naming ``path`` for
    a malformed line, a file outside the folder and a file listed twice."""
    import re

    line_re = re.compile(r"([0-9a-f]{64})  (\S(?:.*\S)?)")
    f = Path(folder) / SUMS
    try:
        text = f.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"path: {f} is not UTF-8 text ({exc})") from None
    out: dict[str, str] = {}
    for k, line in enumerate(text.split("\n"), 1):
        if line.startswith("#") or (not line and k == text.count("\n") + 1):
            continue
        m = line_re.fullmatch(line)
        name = m.group(2) if m else ""
        parts = name.split("/")
        if m is None or any(p in ("", ".", "..") for p in parts) or "\\" in name:
            raise ValueError(f"path: {f}, line {k}: not '<sha256 hex digest>  <file>' with a "
                             f"file inside the log, got {line[:80]!r}")
        if name in out:
            raise ValueError(f"path: {f}, line {k}: lists {name!r} a second time")
        out[name] = m.group(1)
    return out


def verify_sums(folder, required: bool, what: str = "log") -> dict[str, str] | None:
    """Check every file listed in ``folder/SHA256SUMS`` against its digest; None if there is
    no such file and it is not ``required``.  ``ValueError`` naming ``path`` and the file for
    a missing or changed file."""
    folder = Path(folder)
    if not (folder / SUMS).is_file():
        if required:
            raise ValueError(f"path: {folder} has no {SUMS}: the {what} cannot be checked")
        return None
    sums = read_sums(folder)
    for name, digest in sums.items():
        g = folder / name
        if not g.is_file():
            raise ValueError(f"path: {SUMS} lists {name!r}, which is missing from {folder}")
        if _sha256(g) != digest:
            raise ValueError(f"path: {name} in {folder} does not match its SHA-256 in {SUMS} "
                             "(the file was changed or corrupted)")
    return sums
