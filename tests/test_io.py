"""Tests of the shared file primitives (specbound._io): atomic writes and manifest reading."""

from __future__ import annotations

import json
import os

import pytest

from specbound._io import TMP_PREFIX, atomic_write, read_manifest


def test_atomic_write_replaces_the_contents_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "file.json"
    atomic_write(path, b"first")
    assert path.read_bytes() == b"first"
    atomic_write(path, b"second, longer contents" * 1000)
    assert path.read_bytes() == b"second, longer contents" * 1000
    atomic_write(path, b"")
    assert path.read_bytes() == b""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file.json"]


def test_atomic_write_keeps_the_old_contents_on_failure(tmp_path, monkeypatch):
    path = tmp_path / "file"
    atomic_write(path, b"old")

    def broken_replace(src, dst):
        raise OSError("simulated crash before the rename")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="simulated"):
        atomic_write(path, b"new")
    monkeypatch.undo()
    assert path.read_bytes() == b"old"
    assert not any(p.name.startswith(TMP_PREFIX) for p in tmp_path.iterdir())
    with pytest.raises(TypeError):
        atomic_write(path, "not bytes")
    assert path.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def _manifest(folder, **doc):
    folder.mkdir(exist_ok=True)
    (folder / "meta.json").write_text(json.dumps(doc))
    return folder


def test_read_manifest_checks_format_and_version(tmp_path):
    kw = {"fmt": "specbound.test", "version": 2, "what": "test log"}
    good = _manifest(tmp_path / "good", format="specbound.test", version=2, x=[1, 2])
    assert read_manifest(good, "meta.json", **kw) == {"format": "specbound.test", "version": 2,
                                                      "x": [1, 2]}
    (tmp_path / "empty").mkdir()
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "meta.json").write_text("{oops")
    (tmp_path / "latin").mkdir()
    (tmp_path / "latin" / "meta.json").write_bytes(b"\xff\xfe")
    cases = [
        (tmp_path / "empty", r"path: .* is not a test log \(no meta.json\)"),
        (tmp_path / "bad", "path: .* is not valid JSON"),
        (tmp_path / "latin", "path: .* is not valid JSON"),
        (_manifest(tmp_path / "list"), "is not a specbound.test test log"),
        (_manifest(tmp_path / "other", format="other", version=2), "is not a specbound.test"),
        (_manifest(tmp_path / "v1", format="specbound.test", version=1),
         r"unsupported format version 1 \(this reader reads version 2\)"),
    ]
    (tmp_path / "list" / "meta.json").write_text("[1, 2]")
    for folder, message in cases:
        with pytest.raises(ValueError, match=message):
            read_manifest(folder, "meta.json", **kw)
