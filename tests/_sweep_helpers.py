"""Workers for the sweep tests, importable by subprocesses and Dask worker processes.

Kept free of test-only imports (pytest, hypothesis) so that a worker process loads it fast.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import numpy as np

NAMES = ("plain", "a,b", 'say "hi"', "two\nlines", "NA", "null", "é ü")


def rows_of(i: int) -> list[dict]:
    """Deterministic rows of configuration ``i``.

    1-3 rows per configuration; full-precision float64, float32 and int64 values, NaN,
    booleans, strings that need CSV quoting (comma, quote, newline), NA-like strings and
    non-ASCII text; configurations ``i >= 3`` add a column (the CSV header grows).
    """
    rng = np.random.default_rng(i)
    out = []
    for j in range(1 + i % 3):
        r = {"i": i, "j": j, "x": float(rng.standard_normal()), "y": np.float32(rng.random()),
             "k": np.int64(rng.integers(0, 10**12)), "name": NAMES[(i + j) % len(NAMES)],
             "flag": bool(rng.random() < 0.5),
             "z": float("nan") if (i + j) % 4 == 0 else 0.1 * i}
        if i >= 3:
            r["late"] = i * 1.5
        out.append(r)
    return out


def marked_worker(arg) -> list[dict]:
    """``rows_of(i)`` after touching ``started-i`` in ``folder`` and sleeping ``delay`` s."""
    i, folder, delay = arg
    Path(folder, f"started-{i}").touch()
    time.sleep(delay)
    return rows_of(i)


def die_once_worker(arg) -> list[dict]:
    """``rows_of(i)``; configuration ``victim`` SIGKILLs its own process on its first try."""
    i, folder, victim = arg
    Path(folder, f"attempt-{i}-{os.getpid()}").touch()
    if i == victim:
        try:
            fd = os.open(Path(folder, "killed"), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            pass  # the retry, on another (or a restarted) worker
        else:
            os.close(fd)
            os.kill(os.getpid(), signal.SIGKILL)
    return rows_of(i)
