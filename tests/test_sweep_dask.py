"""The two Dask examples of docs/sweep.md ("A figure study on a Dask cluster"), run as a
user would: a script that starts a ``LocalCluster``, and a ``dask scheduler`` + ``dask
worker`` started from a folder outside the repository, each running one figure study in
quick mode; the rows equal those of the serial run up to row order.

Every process here starts in a temporary folder, not in the repository root, so that
``paper_figs`` is found the way a cluster finds it (``PYTHONPATH`` names this tree, which an
editable install does too; ``tests/test_figs_smoke.py::test_paper_figs_imports_from_any_folder``
checks the install).  Slow tier: the cluster's worker processes start and load the compiled
kernels (tens of seconds).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("distributed",
                    reason="the Dask tests need the 'dist' extra (pip install 'specbound[dist]')")

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
STUDY = "wm_drafter_substitution"

#: the LocalCluster example of docs/sweep.md (with the output folder as its argument)
LOCAL_CLUSTER_SCRIPT = '''\
import sys

from distributed import Client, LocalCluster

from paper_figs import wm_drafter_substitution
from specbound.sweep import use_executor

if __name__ == "__main__":
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster, \\
            Client(cluster) as client, use_executor(client.get_executor()):
        wm_drafter_substitution.main(sys.argv[1], quick=True)
'''


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["MPLBACKEND"] = "Agg"
    env.pop("SPECBOUND_EXECUTOR", None)
    return env


@pytest.fixture(scope="module")
def serial_rows(tmp_path_factory) -> dict:
    """The study's CSVs from a serial run in this process (quick mode is serial)."""
    from paper_figs import wm_drafter_substitution as study
    from specbound.sweep import use_executor

    out = tmp_path_factory.mktemp("serial")
    with use_executor(None):
        study.main(out, quick=True)
    return _tables(out)


def _tables(out: Path) -> dict:
    """The study's CSVs, rows sorted, without the tasks' CPU seconds (a measurement)."""
    tables = {}
    for name in (f"{STUDY}.csv", f"{STUDY}_comparisons.csv"):
        df = pd.read_csv(out / name).drop(columns=["task_cpu_s"], errors="ignore")
        tables[name] = df.sort_values(list(df.columns)).reset_index(drop=True)
    return tables


def _assert_same(got: dict, ref: dict) -> None:
    for name, df in ref.items():
        assert len(df) > 0, name
        pd.testing.assert_frame_equal(got[name], df, check_exact=True, obj=name)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_port(port: int, proc: subprocess.Popen, timeout: float) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        assert proc.poll() is None, "the scheduler exited"
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
            return
        time.sleep(0.5)
    raise TimeoutError(f"no scheduler on port {port} after {timeout} s")


def _stop(proc: subprocess.Popen) -> None:
    """Stop a process started here and the processes it started (its own session)."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


def test_local_cluster_script_runs_a_study_like_serial(tmp_path, serial_rows):
    script = tmp_path / "run_on_cluster.py"
    script.write_text(LOCAL_CLUSTER_SCRIPT)
    out = tmp_path / "out-dask"
    proc = subprocess.run([sys.executable, str(script), str(out)], cwd=tmp_path, env=_env(),
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    _assert_same(_tables(out), serial_rows)


def test_dask_scheduler_and_workers_run_a_study_like_serial(tmp_path, serial_rows):
    dask = Path(sys.executable).with_name("dask")
    if not dask.exists():
        pytest.skip("the `dask` command is not installed beside this Python")
    port = _free_port()
    address = f"127.0.0.1:{port}"
    logs = {k: open(tmp_path / f"{k}.log", "w") for k in ("scheduler", "worker")}
    started = []
    try:
        sched = subprocess.Popen(
            [str(dask), "scheduler", "--host", "127.0.0.1", "--port", str(port),
             "--no-dashboard"], cwd=tmp_path, env=_env(), stdout=logs["scheduler"],
            stderr=subprocess.STDOUT, start_new_session=True)
        started.append(sched)
        _wait_for_port(port, sched, 120)
        worker = subprocess.Popen(
            [str(dask), "worker", f"tcp://{address}", "--nworkers", "2", "--nthreads", "1",
             "--no-dashboard"], cwd=tmp_path, env=_env(), stdout=logs["worker"],
            stderr=subprocess.STDOUT, start_new_session=True)
        started.append(worker)
        out = tmp_path / "out-dask"
        proc = subprocess.run(
            [sys.executable, "-m", f"paper_figs.{STUDY}", "--quick", "--out", str(out),
             "--executor", f"dask://{address}"],
            cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, (proc.stderr[-3000:]
                                      + (tmp_path / "worker.log").read_text()[-3000:])
    finally:
        for p in reversed(started):
            _stop(p)
        for f in logs.values():
            f.close()
    _assert_same(_tables(out), serial_rows)
    timings = pd.read_csv(out / "timings.csv", keep_default_na=False)
    assert timings[["study", "quick", "params"]].values.tolist() == [[STUDY, True, ""]]
