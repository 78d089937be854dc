"""The sweep store's own columns and path (specbound.sweep.ResumableCSV): a worker row cannot
overwrite ``config``, ``signature`` or ``config_rows``, and a path that cannot be a CSV file is
refused up front with a ``ValueError`` naming ``path``."""

from __future__ import annotations

import os

import pytest

from specbound.sweep import KEY_COLUMNS, ResumableCSV, run_sweep


@pytest.mark.parametrize("column", KEY_COLUMNS)
def test_a_row_cannot_overwrite_a_store_column(tmp_path, column):
    """The row {config: 'other'} under configuration 'a' was stored as configuration 'other'
    (and signature/config_rows likewise), while done('a') answered for the original."""
    store = ResumableCSV(tmp_path / "s.csv", "sig")
    with pytest.raises(ValueError, match=f"^rows: column '{column}' of configuration 'a'"):
        store.append("a", [{"v": 1}, {"v": 2, column: "other"}])
    assert not store.done("a") and not store.done("other") and len(store) == 0
    store.append("a", [{"v": 1}])
    reopened = ResumableCSV(tmp_path / "s.csv", "sig")
    assert reopened.done("a") and not reopened.done("other")
    df = reopened.frame()
    assert list(df["config"]) == ["a"] and list(df["signature"]) == ["sig"]
    assert list(df["config_rows"]) == [1]


def _worker(x):
    return [{"x": x}] if x != 2 else [{"x": x, "config": "c0"}]


def test_run_sweep_stops_at_a_row_with_a_store_column(tmp_path):
    store = ResumableCSV(tmp_path / "s.csv", "sig")
    with pytest.raises(ValueError, match="'config' of configuration 'c2'"):
        run_sweep([(f"c{i}", i) for i in range(4)], _worker, store, progress=False)
    # what was stored is true: c0 and c1 once each, with their own config and signature
    reopened = ResumableCSV(tmp_path / "s.csv", "sig")
    assert [reopened.done(f"c{i}") for i in range(4)] == [True, True, False, False]
    df = reopened.frame()
    assert list(df["config"]) == ["c0", "c1"] and list(df["x"]) == [0, 1]


def test_a_path_that_cannot_be_the_csv_file_names_path(tmp_path):
    with pytest.raises(ValueError, match="^path: .* is a directory"):
        ResumableCSV(tmp_path, "sig")
    (tmp_path / "sub").mkdir()
    with pytest.raises(ValueError, match="^path: .* is a directory"):
        ResumableCSV(tmp_path / "sub", "sig")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="^path: .* is not a directory"):
        ResumableCSV(tmp_path / "file" / "s.csv", "sig")
    with pytest.raises(ValueError, match="^path: .* is not a directory"):
        ResumableCSV(tmp_path / "file" / "deeper" / "s.csv", "sig")
    if hasattr(os, "mkfifo"):
        os.mkfifo(tmp_path / "fifo.csv")
        with pytest.raises(ValueError, match="^path: .* not a regular file"):
            ResumableCSV(tmp_path / "fifo.csv", "sig")
    # nothing was created beside the refused paths
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["sub", "file"] + (["fifo.csv"] if hasattr(os, "mkfifo") else []))
    # a missing folder is still created (as before)
    store = ResumableCSV(tmp_path / "new" / "s.csv", "sig")
    store.append("a", [{"v": 1}])
    assert (tmp_path / "new" / "s.csv").is_file()
