"""What a sweep says before it computes, and a fresh start (``watch_sweeps``,
``ResumableCSV.restart``): the counts of stored and pending configurations, and ``fresh=True``
recomputing every configuration exactly once per store, with the old records set aside and
the new CSV byte for byte that of a first run.  Deterministic; well under a second."""

from __future__ import annotations

import pytest

from specbound.sweep import ResumableCSV, SweepCounts, run_sweep, watch_sweeps


def _square(x):
    return [{"x": x, "x2": x * x}]


def _configs(n):
    return [(f"x={x}", x) for x in range(n)]


def test_watch_reports_stored_and_to_compute(tmp_path):
    path = tmp_path / "sq.csv"
    seen: list[SweepCounts] = []
    with watch_sweeps(seen.append):
        run_sweep(_configs(3), _square, ResumableCSV(path, "v1"), progress=False, desc="sq")
        run_sweep(_configs(5), _square, ResumableCSV(path, "v1"), progress=False, desc="sq")
        run_sweep(_configs(5), _square, ResumableCSV(path, "v1"), progress=False)
    got = [(c.desc, c.stored, c.to_compute, c.total, c.set_aside) for c in seen]
    assert got == [("sq", 0, 3, 3, 0), ("sq", 3, 2, 5, 0), ("", 5, 0, 5, 0)]
    assert all(c.path == path for c in seen)
    # outside the block nothing is reported
    run_sweep(_configs(5), _square, ResumableCSV(path, "v1"), progress=False)
    assert len(seen) == 3
    with pytest.raises(ValueError, match="callback"):
        with watch_sweeps(3):
            pass
    with pytest.raises(ValueError, match="fresh"):
        with watch_sweeps(None, fresh=1):
            pass


def test_fresh_recomputes_everything_once_per_store(tmp_path):
    path = tmp_path / "sq.csv"
    run_sweep(_configs(4), _square, ResumableCSV(path, "v1"), progress=False)
    first = path.read_bytes()
    calls, seen = [], []

    def worker(x):
        calls.append(x)
        return _square(x)

    with watch_sweeps(seen.append, fresh=True):
        run_sweep(_configs(2), worker, ResumableCSV(path, "v1"), progress=False)
        # a second sweep on the same store in the block keeps what the first computed
        run_sweep(_configs(4), worker, ResumableCSV(path, "v1"), progress=False)
    assert calls == [0, 1, 2, 3]
    assert [(c.stored, c.to_compute, c.set_aside) for c in seen] == [(0, 2, 4), (2, 2, 0)]
    assert path.read_bytes() == first  # the same bytes as the first run
    aside = sorted((tmp_path / ".sq.csv.sweep" / "aside").glob("fresh-*/*.json"))
    assert len(aside) == 4  # nothing deleted
    # restart on an empty store sets nothing aside
    assert ResumableCSV(tmp_path / "empty.csv", "v1").restart() == 0
