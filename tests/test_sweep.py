"""Tests of :mod:`specbound.sweep`: the crash-safe resumable store and the sweep runner.

- the module's docstring example, the CSV format (byte for byte, property-based), exact
  round-trip of values, argument validation;
- regression tests of the append-only store this replaces (each failed on it): a torn last
  row counted as finished, a torn row followed by more rows (pandas ``ParserError``), an
  unreadable CSV deleted with all its finished rows, stale rows destroyed, two concurrent
  runs appending duplicates, Ctrl-C during a full-mode study waiting for the whole queue;
- crash injection: SIGKILL at random file-system calls of the store (torn writes included)
  in many runs, each resumed, and the final CSV equals an uninterrupted run's byte for byte
  (fast: a few dozen kills; ``slow``: hundreds, plus kills at random times and with a
  process pool);
- executors: ``open_executor`` specs, the executor set by a driver reaching the studies'
  ``study_sweep``, ``paper_figs.run_all --executor`` / ``SPECBOUND_EXECUTOR`` and its
  resumable interruption, and a Dask ``LocalCluster`` (same rows as a local process pool;
  a worker killed mid-task is retried and leaves no duplicate or missing row; a real figure
  study on a two-process cluster gives the rows of a serial run).  The Dask
  tests skip only where ``distributed`` (extra ``dist``) is not installed.

No test here is statistical: every check is exact, so none can fail by chance.
"""

from __future__ import annotations

import csv
import doctest
import io
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
import types
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import specbound.sweep as sw
from specbound.sweep import (
    ResumableCSV,
    SweepLockedError,
    current_executor,
    open_executor,
    run_sweep,
    use_executor,
)
from tests._sweep_helpers import die_once_worker, rows_of

REPO = Path(__file__).resolve().parents[1]


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.pop("SPECBOUND_EXECUTOR", None)
    return env


def _sweep_dir(path: Path) -> Path:
    return path.parent / f".{path.name}.sweep"


def _records(path: Path) -> list[Path]:
    return sorted((_sweep_dir(path) / "records").glob("*.json"))


def _configs(n: int, start: int = 0) -> list[tuple[str, int]]:
    return [(f"c{i:03d}", i) for i in range(start, n)]


def _reference_bytes(tmp: Path, n: int) -> bytes:
    path = tmp / "reference" / "s.csv"
    path.parent.mkdir(parents=True)
    run_sweep(_configs(n), rows_of, ResumableCSV(path, "sig"), progress=False)
    return path.read_bytes()


def _legacy_format(appends, signature: str) -> bytes:
    """The CSV format of the append-only store, written directly: header line (``\\n``)
    with the union of the columns, then ``csv.writer`` rows (``\\r\\n``), floats as repr."""

    def fmt(v):
        if isinstance(v, float | np.floating):
            return repr(float(v))
        if isinstance(v, np.integer):
            return int(v)
        return v

    full = [{"config": c, "signature": signature, "config_rows": len(rows), **r}
            for c, rows in appends for r in rows]
    cols: list[str] = []
    for r in full:
        cols += [c for c in r if c not in cols]
    buf = io.StringIO(newline="")
    if cols:
        csv.writer(buf, lineterminator="\n").writerow(cols)
    csv.writer(buf).writerows([[fmt(r.get(c, "")) for c in cols] for r in full])
    return buf.getvalue().encode()


# ----------------------------------------------------------------------------- the basics


def test_docstring_example():
    res = doctest.testmod(sw, optionflags=doctest.ELLIPSIS)
    assert res.attempted >= 10 and res.failed == 0


_values = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(width=32).map(np.float32),
    st.integers(-(2**63), 2**63 - 1),
    st.integers(-(2**63), 2**63 - 1).map(np.int64),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=8),
    st.booleans(),
    st.none(),
)
_rows = st.lists(st.dictionaries(st.sampled_from(["a", "b", "c d", "e,f", 'g"h', "x"]),
                                 _values, max_size=4), max_size=3)
_ids = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=6
               ).filter(lambda s: s != "nan")


@given(st.lists(st.tuples(_ids, _rows), max_size=6, unique_by=lambda t: t[0]))
@settings(max_examples=40)
def test_csv_bytes_match_append_only_format(appends):
    """Byte for byte the format of the append-only store (header grown in place), and
    reopening the store (CSV rebuilt from the records) changes nothing."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s.csv"
        store = ResumableCSV(path, "sig")
        for config, rows in appends:
            store.append(config, rows)
        expected = _legacy_format([(c, r) for c, r in appends if r], "sig")
        got = path.read_bytes() if path.exists() else b""
        assert got == expected
        again = ResumableCSV(path, "sig")
        assert (path.read_bytes() if path.exists() else b"") == expected
        assert all(again.done(c) for c, _ in appends) and len(again) == len(appends)


def test_values_round_trip_exactly(tmp_path):
    path = tmp_path / "s.csv"
    df = run_sweep(_configs(6), rows_of, ResumableCSV(path, "sig"), progress=False)
    want = pd.DataFrame([r for i in range(6) for r in rows_of(i)])
    for col in ("x", "z", "late"):
        a, b = df[col].to_numpy(), want[col].to_numpy(dtype=np.float64)
        assert np.array_equal(a, b, equal_nan=True), col  # bit for bit (repr round-trip)
    assert np.array_equal(df["y"].to_numpy(), want["y"].astype(np.float64).to_numpy())
    assert list(df["name"]) == list(want["name"]) and list(df["k"]) == list(want["k"])
    assert all(isinstance(c, str) for c in df["config"]) and list(df["config_rows"]) == [
        len(rows_of(i)) for i in range(6) for _ in rows_of(i)]


def test_empty_result_is_stored_as_done(tmp_path):
    path = tmp_path / "s.csv"
    calls = []

    def worker(i):
        calls.append(i)
        return [] if i == 1 else rows_of(i)

    run_sweep(_configs(3), worker, ResumableCSV(path, "sig"), progress=False)
    run_sweep(_configs(3), worker, ResumableCSV(path, "sig"), progress=False)
    assert calls == [0, 1, 2]  # the configuration without rows is not recomputed
    assert "c001" not in set(ResumableCSV(path, "sig").frame()["config"])


def test_append_validation(tmp_path):
    store = ResumableCSV(tmp_path / "s.csv", "sig")
    for bad in ("", "nan", 3, None):
        with pytest.raises(ValueError, match="^config"):
            store.append(bad, [{"v": 1}])
    for bad in ({"v": 1}, "rows", 5, [1, 2], [{"v": 1}, None]):
        with pytest.raises(ValueError, match="^rows"):
            store.append("a", bad)
    with pytest.raises(ValueError, match="^rows: column names"):
        store.append("a", [{1: 2}])
    store.append("a", [{"v": 1}])
    with pytest.raises(ValueError, match="^config: 'a' is already stored"):
        store.append("a", [{"v": 2}])
    assert list(store.frame()["v"]) == [1]
    for bad in ("", None, 5):
        with pytest.raises(ValueError, match="^signature"):
            ResumableCSV(tmp_path / "t.csv", bad)


def test_run_sweep_validation(tmp_path):
    store = ResumableCSV(tmp_path / "s.csv", "sig")
    for bad, msg in [(5, "^configs"), ([("a", 1), ("a", 2)], "^configs: duplicate"),
                     ([("a",)], "^configs"), ([(1, 1)], "^configs"), ([("nan", 1)], "^configs")]:
        with pytest.raises(ValueError, match=msg):
            run_sweep(bad, rows_of, store, progress=False)
    with pytest.raises(ValueError, match="^worker"):
        run_sweep(_configs(1), "rows_of", store, progress=False)
    with pytest.raises(ValueError, match="^store"):
        run_sweep(_configs(1), rows_of, tmp_path / "s.csv", progress=False)
    with pytest.raises(ValueError, match="^executor"):
        run_sweep(_configs(1), rows_of, store, executor="process", progress=False)
    with pytest.raises(ValueError, match="^progress"):
        run_sweep(_configs(1), rows_of, store, progress="no")
    assert len(store) == 0


def test_progress_without_tqdm(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)  # import fails: no bar, no error
    df = run_sweep(_configs(3), rows_of, ResumableCSV(tmp_path / "s.csv", "sig"),
                   desc="no bar")
    assert sorted(set(df["config"])) == ["c000", "c001", "c002"]


def test_worker_error_cancels_pending_and_keeps_finished(tmp_path):
    calls = []

    def worker(i):
        calls.append(i)
        if i == 1:
            raise RuntimeError("boom")
        time.sleep(0.05)
        return rows_of(i)

    path = tmp_path / "s.csv"
    with ThreadPoolExecutor(1) as ex, pytest.raises(RuntimeError, match="boom"):
        run_sweep(_configs(20), worker, ResumableCSV(path, "sig"), executor=ex,
                  progress=False)
    assert len(calls) <= 3  # configurations not started were cancelled
    store = ResumableCSV(path, "sig")
    assert store.done("c000") and not store.done("c001")


def test_completed_together_are_stored_in_submission_order(tmp_path):
    class Inline(ThreadPoolExecutor):
        def submit(self, fn, *args, **kwargs):  # every future is done on submission
            from concurrent.futures import Future

            fut = Future()
            fut.set_result(fn(*args, **kwargs))
            return fut

    path, serial = tmp_path / "a.csv", tmp_path / "b.csv"
    with Inline(1) as ex:
        run_sweep(_configs(8), rows_of, ResumableCSV(path, "sig"), executor=ex, progress=False)
    run_sweep(_configs(8), rows_of, ResumableCSV(serial, "sig"), progress=False)
    assert path.read_bytes() == serial.read_bytes()


# ----------------------------------------------------------------------------- regressions
# Each failed on the append-only store that wrote the CSV directly.


def test_torn_last_row_is_not_counted_as_finished(tmp_path):
    """A writer killed mid-row: the torn row's values must not survive a resume."""
    path = tmp_path / "s.csv"
    run_sweep(_configs(4), rows_of, ResumableCSV(path, "sig"), progress=False)
    whole = path.read_bytes()
    path.write_bytes(whole[:-9])  # the last row lost its end (and its line break)
    df = run_sweep(_configs(4), rows_of, ResumableCSV(path, "sig"), progress=False)
    assert path.read_bytes() == whole
    assert df["late"].iloc[-1] == 4.5 and df["z"].iloc[-1] == 0.30000000000000004


def test_torn_row_then_more_configurations(tmp_path):
    """The next rows are not glued to a torn one (pandas ParserError on the next run)."""
    path = tmp_path / "s.csv"
    run_sweep(_configs(4), rows_of, ResumableCSV(path, "sig"), progress=False)
    path.write_bytes(path.read_bytes()[:-30])
    run_sweep(_configs(6), rows_of, ResumableCSV(path, "sig"), progress=False)
    df = ResumableCSV(path, "sig").frame()
    assert path.read_bytes() == _reference_bytes(tmp_path, 6)
    assert list(df.groupby("config", sort=True).size()) == [len(rows_of(i)) for i in range(6)]


def test_unreadable_csv_keeps_finished_work(tmp_path):
    path = tmp_path / "s.csv"
    run_sweep(_configs(4), rows_of, ResumableCSV(path, "sig"), progress=False)
    whole = path.read_bytes()
    path.write_bytes(whole + b"x,1,2\n\x00garbage,\"unclosed\n")
    calls = []
    run_sweep(_configs(4), lambda i: calls.append(i) or rows_of(i), ResumableCSV(path, "sig"),
              progress=False)
    assert calls == [] and path.read_bytes() == whole


def test_stale_rows_are_set_aside_not_destroyed(tmp_path):
    path = tmp_path / "s.csv"
    run_sweep(_configs(3), rows_of, ResumableCSV(path, "quick"), progress=False)
    whole = path.read_bytes()
    other = ResumableCSV(path, "full")  # other settings: their rows leave the CSV
    assert len(other) == 0 and len(pd.read_csv(path)) == 0
    assert len(list((_sweep_dir(path) / "aside" / "stale" / "quick").glob("*.json"))) == 3
    calls = []
    back = ResumableCSV(path, "quick")  # ... and come back with their settings
    run_sweep(_configs(3), lambda i: calls.append(i) or rows_of(i), back, progress=False)
    assert calls == [] and path.read_bytes() == whole


def test_torn_record_is_set_aside_and_recomputed(tmp_path):
    path = tmp_path / "s.csv"
    run_sweep(_configs(4), rows_of, ResumableCSV(path, "sig"), progress=False)
    whole = path.read_bytes()
    rec = _records(path)[2]
    rec.write_bytes(rec.read_bytes().replace(b"c002", b"c00X", 1))  # checksum now fails
    store = ResumableCSV(path, "sig")
    assert not store.done("c002") and all(store.done(c) for c in ("c000", "c001", "c003"))
    assert "c002" not in set(store.frame()["config"])
    assert len(list((_sweep_dir(path) / "aside" / "torn").iterdir())) == 1
    run_sweep(_configs(4), rows_of, store, progress=False)
    df = store.frame()
    assert sorted(df["config"]) == sorted(pd.read_csv(io.BytesIO(whole))["config"])
    assert path.read_bytes() != whole  # c002 recomputed last (the rows are the same)


def test_deleted_csv_starts_over_keeping_records_aside(tmp_path):
    path = tmp_path / "s.csv"
    run_sweep(_configs(3), rows_of, ResumableCSV(path, "sig"), progress=False)
    path.unlink()
    store = ResumableCSV(path, "sig")
    assert len(store) == 0 and not path.exists()
    orphaned = list((_sweep_dir(path) / "aside").glob("orphaned-*/*.json"))
    assert len(orphaned) == 3


def test_csv_of_the_append_only_store_is_imported(tmp_path):
    """A CSV from the append-only store with a torn last row: complete configurations are
    kept (not recomputed), the torn one recomputed, the original file kept aside."""
    path = tmp_path / "s.csv"
    appends = [(c, rows_of(i)) for c, i in _configs(4)]
    legacy = _legacy_format(appends, "sig")
    path.write_bytes(legacy[:-12])
    calls = []
    run_sweep(_configs(4), lambda i: calls.append(i) or rows_of(i), ResumableCSV(path, "sig"),
              progress=False)
    assert calls == [3]
    assert path.read_bytes() == legacy
    kept = list((_sweep_dir(path) / "aside" / "legacy").iterdir())
    assert len(kept) == 1 and kept[0].read_bytes() == legacy[:-12]


def test_study_outputs_unchanged_by_import(tmp_path):
    """Opening a complete CSV of the append-only store rewrites nothing."""
    path = tmp_path / "s.csv"
    legacy = _legacy_format([(c, rows_of(i)) for c, i in _configs(5)], "sig")
    path.write_bytes(legacy)
    store = ResumableCSV(path, "sig")
    assert len(store) == 5 and path.read_bytes() == legacy
    assert not (_sweep_dir(path) / "aside").exists()


def test_second_writer_in_process_is_refused(tmp_path):
    path = tmp_path / "s.csv"
    store = ResumableCSV(path, "sig")
    with store.session():
        with pytest.raises(SweepLockedError, match=f"pid {os.getpid()}"):
            ResumableCSV(path, "sig")
    ResumableCSV(path, "sig")  # released


def _csv_configs(path: Path) -> int:
    """Configurations in the CSV so far (0 while it is missing or being rewritten)."""
    try:
        return int(pd.read_csv(path, usecols=["config"])["config"].nunique())
    except (OSError, ValueError, pd.errors.ParserError, pd.errors.EmptyDataError):
        return 0


def _wait_for(cond, timeout: float, proc=None) -> None:
    t0 = time.monotonic()
    while not cond():
        if proc is not None and proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"child exited early ({proc.returncode}): {err[-2000:]}")
        if time.monotonic() - t0 > timeout:
            raise AssertionError("timed out")
        time.sleep(0.05)


def test_concurrent_run_is_refused_and_leaves_no_duplicates(tmp_path):
    path, markers = tmp_path / "s.csv", tmp_path / "m"
    markers.mkdir()
    n = 10
    child = subprocess.Popen(
        [sys.executable, "-m", "tests._sweep_child", str(path), "--n", str(n),
         "--markers", str(markers), "--delay", "0.3"],
        cwd=REPO, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(lambda: _csv_configs(path) >= 1, 120, child)
        from tests._sweep_helpers import marked_worker

        configs = [(f"c{i:03d}", (i, str(markers), 0.0)) for i in range(n)]
        refused = None
        try:
            run_sweep(configs, marked_worker, ResumableCSV(path, "sig"), progress=False)
        except SweepLockedError as exc:
            refused = exc
        out, err = child.communicate(timeout=120)
    finally:
        child.kill()
    assert child.returncode == 0, err[-2000:]
    df = ResumableCSV(path, "sig").frame()
    assert not df.duplicated(["config", "j"]).any()
    assert sorted(set(df["config"])) == [c for c, _ in configs]
    assert refused is not None and str(path) in str(refused)
    assert f"pid {child.pid}" in str(refused)


def test_sigint_stops_full_mode_study_at_once(tmp_path):
    """Ctrl-C during ``study_sweep`` in full mode (its own 2-process pool): finished rows
    kept, queued configurations cancelled, no worker left running."""
    path, markers = tmp_path / "s.csv", tmp_path / "m"
    markers.mkdir()
    n = 40
    child = subprocess.Popen(
        [sys.executable, "-m", "tests._sweep_child", str(path), "--n", str(n), "--study",
         "--markers", str(markers), "--delay", "0.4"],
        cwd=REPO, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(lambda: _csv_configs(path) >= 2, 180, child)
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=120)
    finally:
        child.kill()
    assert child.returncode != 0 and "KeyboardInterrupt" in err
    started = {p.name for p in markers.iterdir()}
    time.sleep(1.5)
    assert {p.name for p in markers.iterdir()} == started  # no worker still running
    store = ResumableCSV(path, "sig")
    stored = len(store)
    assert stored >= 2
    # in flight at most: 2 running + 3 in the pool's call queue (+ 1 of slack)
    assert len(started) <= stored + 6, (len(started), stored)
    df = store.frame()
    for c, grp in df.groupby("config"):
        i = int(c[1:])
        assert list(grp["x"]) == [r["x"] for r in rows_of(i)]


# ----------------------------------------------------------------------------- crash injection


class ForkServer:
    """``tests._sweep_child --serve``: forks one short sweep run per request."""

    def __init__(self):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests._sweep_child", "--serve"], cwd=REPO, env=_env(),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)

    def run(self, argv, kill_after=None) -> int:
        self.proc.stdin.write(json.dumps({"argv": [str(a) for a in argv],
                                          "kill_after": kill_after}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, "fork server died"
        return json.loads(line)["rc"]

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
        self.proc.stdout.close()


@pytest.fixture(scope="module")
def server():
    srv = ForkServer()
    yield srv
    srv.close()


def _check_after_crash(path: Path, before: int, n: int) -> None:
    """Reopening (what a resume does): a prefix of the configurations is done (serial
    order), no committed record was lost, and no torn record exists (atomic rename)."""
    store = ResumableCSV(path, "sig")
    done = [c for c, _ in _configs(n) if store.done(c)]
    assert done == [c for c, _ in _configs(len(done))]
    assert len(done) >= before
    assert not (_sweep_dir(path) / "aside" / "torn").exists()


def _crash_trials(server, tmp: Path, n: int, trials: int, seed: int, executor=None,
                  timed: bool = False) -> int:
    ref = tmp / "ref" / "s.csv"
    report = tmp / "calls"
    extra = ["--executor", executor] if executor else []
    t0 = time.monotonic()
    assert server.run([ref, "--n", n, "--report", report, *extra]) == 0
    duration = time.monotonic() - t0
    total = int(report.read_text().strip().split("=")[1])
    want = ref.read_bytes()
    rng = np.random.default_rng(seed)
    kills = 0
    for t in range(trials):
        path = tmp / f"t{t}" / "s.csv"
        for _ in range(40):
            before = len(_records(path))
            if timed:
                rc = server.run([path, "--n", n, *extra],
                                kill_after=float(rng.uniform(0, duration)))
            else:
                rc = server.run([path, "--n", n, "--crash-at", int(rng.integers(1, total + 1)),
                                 "--tear-seed", int(rng.integers(2**31)), *extra])
            if rc == 0:
                break
            assert rc == -signal.SIGKILL
            kills += 1
            if executor is None:
                _check_after_crash(path, before, n)
        else:
            assert server.run([path, "--n", n, *extra]) == 0
        got = path.read_bytes()
        if executor is None:
            assert got == want, f"trial {t}"
        else:  # completion order may differ: same header, same rows
            g, w = got.split(b"\n", 1), want.split(b"\n", 1)
            assert g[0] == w[0] and sorted(g[1].split(b"\r\n")) == sorted(w[1].split(b"\r\n"))
        assert not list(path.parent.glob(".tmp-*"))
        assert not list((_sweep_dir(path) / "records").glob(".tmp-*"))
    return kills


def test_crash_injection(server, tmp_path):
    """SIGKILL at random file-system calls of the store, torn writes included (seeded);
    every run resumed; the final CSV equals an uninterrupted run's byte for byte."""
    kills = _crash_trials(server, tmp_path, n=6, trials=12, seed=20261201)
    assert kills >= 12  # the first run of every trial is killed (the crash point is in it)


@pytest.mark.slow
def test_crash_injection_heavy(server, tmp_path):
    kills = _crash_trials(server, tmp_path / "calls", n=10, trials=150, seed=1)
    assert kills >= 150
    kills = _crash_trials(server, tmp_path / "timed", n=10, trials=60, seed=2, timed=True)
    assert kills >= 20
    kills = _crash_trials(server, tmp_path / "pool", n=10, trials=20, seed=3,
                          executor="process:2")
    assert kills >= 20


# ----------------------------------------------------------------------------- executors


def test_open_executor_specs():
    for spec in (None, "", "serial", " serial "):
        with open_executor(spec) as ex:
            assert ex is None
    with open_executor("process:1") as ex:
        assert isinstance(ex, ProcessPoolExecutor)
        assert ex.submit(math.factorial, 5).result() == 120
    for bad in ("threads", "process:0", "process:x", "dask:", "dask://", "tcp:host", 3):
        with pytest.raises(ValueError, match="^spec"):
            with open_executor(bad):
                pass
    with pytest.raises(ValueError, match="^max_workers"):
        sw.local_executor(0)


def test_check_executor_spec_starts_nothing():
    from specbound.sweep import check_executor_spec

    for spec in (None, "serial", "process", "process:2"):
        assert check_executor_spec(spec) is None
    for bad in ("bogus", "process:0", "dask://host", "dask://host:0", "dask://host:70000",
                "tcp:host:1", 3):
        with pytest.raises(ValueError, match="^spec"):
            check_executor_spec(bad)
    pytest.importorskip("distributed")
    assert check_executor_spec("dask://127.0.0.1:8786") == ("127.0.0.1", 8786)
    assert check_executor_spec("tcp://[::1]:9") == ("::1", 9)
    assert check_executor_spec("dask-local:2") is None


def test_open_executor_stops_pool_at_once_on_error():
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt), open_executor("process:1") as ex:
        futs = [ex.submit(time.sleep, 0.5) for _ in range(20)]
        futs[0].result()
        raise KeyboardInterrupt
    assert sum(f.cancelled() for f in futs) >= 15
    assert time.monotonic() - t0 < 9.0  # not the 10 s of draining the queue


def test_use_executor_reaches_study_sweep(tmp_path):
    from paper_figs import _wm_common as wc

    class Counting(ThreadPoolExecutor):
        submitted = 0

        def submit(self, fn, *args, **kwargs):
            Counting.submitted += 1
            return super().submit(fn, *args, **kwargs)

    assert current_executor("unset") == "unset" and wc.default_executor(quick=True) is None
    pool = wc.default_executor(quick=False)
    assert pool is None or isinstance(pool, ProcessPoolExecutor)  # None on one core
    if pool is not None:
        pool.shutdown()
    with Counting(2) as ex, use_executor(ex):
        assert current_executor() is ex
        df = wc.study_sweep(_configs(4), rows_of, wc.ResumableCSV(tmp_path / "s.csv", "sig"),
                            quick=True, progress=False)
    assert Counting.submitted == 4 and len(set(df["config"])) == 4
    with use_executor(None):  # a driver asked for serial: no pool even in full mode
        df = wc.study_sweep(_configs(6), rows_of, wc.ResumableCSV(tmp_path / "s.csv", "sig"),
                            quick=False, progress=False)
    assert Counting.submitted == 4 and len(set(df["config"])) == 6
    with pytest.raises(ValueError, match="^executor"):
        with use_executor("process:2"):
            pass


def _fake_study(name, seen, n=5, interrupt_after=None):
    def main(out_dir, quick=False):
        seen.append(current_executor("unset"))
        calls = []

        def worker(i):
            if interrupt_after is not None and len(calls) == interrupt_after:
                raise KeyboardInterrupt
            calls.append(i)
            return rows_of(i)

        store = ResumableCSV(Path(out_dir) / f"{name}.csv", "sig")
        run_sweep(_configs(n), worker, store, progress=False)
        seen.append(calls)
        return [store.path]

    return types.SimpleNamespace(__name__=f"fake.{name}", main=main)


def test_run_all_executor_option_and_environment(tmp_path, monkeypatch, capsys):
    from paper_figs import run_all

    seen = []
    explicit = []

    def main_with_executor(out_dir, quick=False, executor=None):
        explicit.append(executor)
        return []

    mods = [_fake_study("a", seen), types.SimpleNamespace(__name__="fake.b",
                                                          main=main_with_executor)]
    monkeypatch.delenv("SPECBOUND_EXECUTOR", raising=False)
    assert run_all.main(["--out", str(tmp_path)], modules=mods) == 0
    # no executor in full mode: one 2-process pool shared by every study (made current, not
    # passed as an argument)
    assert isinstance(seen[0], ProcessPoolExecutor) and explicit == [None]
    monkeypatch.setenv("SPECBOUND_EXECUTOR", "process:1")
    assert run_all.main(["--quick", "--out", str(tmp_path)], modules=mods) == 0
    assert isinstance(seen[2], ProcessPoolExecutor) and explicit[1] is seen[2]
    assert "executor: process:1" in capsys.readouterr().out
    assert run_all.main(["--out", str(tmp_path), "--executor", "serial"], modules=mods) == 0
    assert seen[4] is None and explicit[2] is None


def test_run_all_interrupted_resumes(tmp_path, capsys):
    from paper_figs import run_all

    seen = []
    assert run_all.main(["--out", str(tmp_path)],
                        modules=[_fake_study("s", seen, n=6, interrupt_after=2)]) == 130
    assert "run the same command again to resume" in capsys.readouterr().err
    assert run_all.main(["--out", str(tmp_path)], modules=[_fake_study("s", seen, n=6)]) == 0
    assert seen[-1] == [2, 3, 4, 5]  # the two finished configurations were kept
    assert (tmp_path / "s.csv").read_bytes() == _reference_bytes(tmp_path, 6)


# ----------------------------------------------------------------------------- Dask

_NO_DASK = "the Dask tests need the 'dist' extra (pip install 'specbound[dist]')"


def test_dask_local_cluster_same_rows_as_process_pool(tmp_path):
    distributed = pytest.importorskip("distributed", reason=_NO_DASK)
    n = 8
    pool_path, dask_path = tmp_path / "pool.csv", tmp_path / "dask.csv"
    with ProcessPoolExecutor(2) as ex:
        pool = run_sweep(_configs(n), rows_of, ResumableCSV(pool_path, "sig"), executor=ex,
                         progress=False)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        got = run_sweep(_configs(n), rows_of, ResumableCSV(dask_path, "sig"),
                        executor=client.get_executor(), progress=False)
    key = ["config", "j"]
    pd.testing.assert_frame_equal(got.sort_values(key).reset_index(drop=True),
                                  pool.sort_values(key).reset_index(drop=True))
    g, p = dask_path.read_bytes().split(b"\n", 1), pool_path.read_bytes().split(b"\n", 1)
    assert g[0] == p[0] and sorted(g[1].split(b"\r\n")) == sorted(p[1].split(b"\r\n"))


def test_dask_worker_killed_mid_task_no_duplicate_or_missing_row(tmp_path):
    distributed = pytest.importorskip("distributed", reason=_NO_DASK)
    n, victim = 6, 2
    marks = tmp_path / "marks"
    marks.mkdir()
    path = tmp_path / "s.csv"
    configs = [(f"c{i:03d}", (i, str(marks), victim)) for i in range(n)]
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        df = run_sweep(configs, die_once_worker, ResumableCSV(path, "sig"),
                       executor=client.get_executor(), progress=False)
    assert (marks / "killed").exists()
    assert len(list(marks.glob(f"attempt-{victim}-*"))) >= 2  # killed, then retried
    assert not df.duplicated(["config", "j"]).any()
    want = pd.DataFrame([r for i in range(n) for r in rows_of(i)])
    got = df.sort_values(["i", "j"]).reset_index(drop=True)
    assert np.array_equal(got["x"].to_numpy(), want["x"].to_numpy())
    assert list(got["i"]) == list(want["i"])


_ORPHAN_SCRIPT = """
import os, sys, time
from specbound.sweep import local_executor
ex = local_executor(2)
futs = [ex.submit(time.sleep, 0.3) for _ in range(50)]
futs[0].result()
with open(sys.argv[1], "w") as fh:
    fh.write(" ".join(str(p) for p in ex._processes))
os.kill(os.getpid(), 9)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ", 1)[1][0] not in "ZX"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
def test_local_pool_workers_exit_with_killed_parent(tmp_path):
    """A plain process pool's workers outlive a parent killed by SIGKILL (and keep its
    files, the store's lock included); ``local_executor``'s exit within a second."""
    pids_file = tmp_path / "pids"
    proc = subprocess.run([sys.executable, "-c", _ORPHAN_SCRIPT, str(pids_file)], cwd=REPO,
                          env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                          timeout=120)
    assert proc.returncode == -signal.SIGKILL
    pids = [int(p) for p in pids_file.read_text().split()]
    assert len(pids) == 2
    try:
        _wait_for(lambda: not any(_alive(p) for p in pids), 30)
    finally:
        for p in pids:
            if _alive(p):
                os.kill(p, signal.SIGKILL)


def test_dask_local_cluster_runs_a_figure_study_like_serial(tmp_path):
    """A real study (the multi-draft scaling sweep, quick mode) sent to a two-worker Dask
    ``LocalCluster`` of separate processes writes the rows of a serial run."""
    distributed = pytest.importorskip("distributed", reason=_NO_DASK)
    from paper_figs import wm_multidraft_scaling as study

    serial_dir, dask_dir = tmp_path / "serial", tmp_path / "dask"
    ref = study.compute(serial_dir, quick=True, executor=None, progress=False)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        got = study.compute(dask_dir, quick=True, executor=client.get_executor(),
                            progress=False)
    key = ["decoder", "B"]
    # every column but the tasks' own CPU seconds (a measurement, not a result)
    got, ref = (df.drop(columns=["task_cpu_s"], errors="ignore") for df in (got, ref))
    pd.testing.assert_frame_equal(got.sort_values(key).reset_index(drop=True),
                                  ref.sort_values(key).reset_index(drop=True))
    assert not got.duplicated(key).any() and len(got) == len(ref) > 0
