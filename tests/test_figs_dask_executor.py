"""``--executor dask://HOST:PORT`` naming a scheduler that does not answer is refused as the
command line is parsed: exit status 2 and one line naming ``--executor`` (a closed local
port; an address that does not answer within ``paper_figs._common.SCHEDULER_CONNECT_SECONDS``,
or, where a network middlebox accepts every connection, one that answers but is no
scheduler: refused as the executor opens, before the study writes anything) -- never the
Dask client's own timeout and traceback.  The real command line, in a subprocess (slow: a
fresh interpreter)."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow


def _closed(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1.0)
        return s.connect_ex(("127.0.0.1", port)) != 0


@pytest.mark.parametrize("spec", ["dask://127.0.0.1:9999", "dask://10.255.255.1:8786"])
def test_unreachable_dask_scheduler_is_one_line_exit_2(spec, tmp_path):
    pytest.importorskip("distributed")
    if spec.startswith("dask://127.") and not _closed(9999):
        pytest.skip("something listens on 127.0.0.1:9999 here")
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "paper_figs.bounds_vs_drafts", "--quick", "--out", str(out),
         "--executor", spec],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    head = "python -m paper_figs.bounds_vs_drafts: error: --executor: "
    assert (proc.stderr.startswith(head + "cannot reach the Dask scheduler at ")
            or proc.stderr.startswith(head + f"cannot open {spec!r}: ")), proc.stderr
    assert not out.exists()
