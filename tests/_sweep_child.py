"""A sweep in a subprocess, for the crash, interrupt and lock tests of ``specbound.sweep``.

``python -m tests._sweep_child PATH --n N [options]`` runs ``run_sweep`` over configurations
``c000 .. c{N-1}`` with :func:`tests._sweep_helpers.rows_of` rows and prints ``calls=K``
(the number of file-system calls the store made) when it finishes.

``python -m tests._sweep_child --serve`` is a fork server for many short runs: it imports
everything once, then for each line ``{"argv": [...], "kill_after": seconds or null}`` read
from stdin forks a child that runs ``main(argv)`` (killed with SIGKILL after ``kill_after``
seconds if given) and answers one line ``{"rc": exit status, or -signal number}``.

``--crash-at K --tear-seed S`` kills the process with SIGKILL at the K-th file-system call
of the store (``os.write``, ``os.fsync``, ``os.replace``, ``os.open``, ``os.close``,
``os.unlink``, ``os.ftruncate``, ``os.pwrite`` called from ``specbound.sweep``, and
``write`` on a file it opened with ``open``); if that call is a write, a random prefix of
its bytes (seeded by S) is written first, i.e. a torn write.
"""

from __future__ import annotations

import argparse
import builtins
import os
import random
import signal
import sys

from specbound.sweep import ResumableCSV, open_executor, run_sweep
from tests._sweep_helpers import marked_worker, rows_of

CALLS = ("write", "fsync", "replace", "open", "close", "unlink", "ftruncate", "pwrite")


def install_crash(crash_at: int, tear_seed: int) -> list[int]:
    """Count the store's file-system calls; SIGKILL this process at call ``crash_at``."""
    rng = random.Random(tear_seed)
    count = [0]
    real = {name: getattr(os, name) for name in CALLS}

    def wrap(name):
        def call(*args, **kwargs):
            if sys._getframe(1).f_globals.get("__name__") == "specbound.sweep":
                count[0] += 1
                if count[0] == crash_at:
                    if name == "write":
                        data = bytes(args[1])
                        real["write"](args[0], data[: rng.randrange(len(data) + 1)])
                    os.kill(os.getpid(), signal.SIGKILL)
            return real[name](*args, **kwargs)

        return call

    for name in CALLS:
        setattr(os, name, wrap(name))

    class Tearing:
        """A file opened by the store: its ``write`` calls count (and tear) too."""

        def __init__(self, fh):
            self._fh = fh

        def write(self, data):
            count[0] += 1
            if count[0] == crash_at:
                self._fh.write(data[: rng.randrange(len(data) + 1)])
                self._fh.flush()
                os.kill(os.getpid(), signal.SIGKILL)
            return self._fh.write(data)

        def __getattr__(self, name):
            return getattr(self._fh, name)

        def __iter__(self):
            return iter(self._fh)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return self._fh.__exit__(*exc)

    real_open = builtins.open

    def open_(*args, **kwargs):
        fh = real_open(*args, **kwargs)
        if sys._getframe(1).f_globals.get("__name__") == "specbound.sweep":
            return Tearing(fh)
        return fh

    builtins.open = open_
    return count


def main(argv=None) -> int:
    # a runner started in the background of a non-interactive shell hands its children
    # SIGINT ignored, and Python then installs no KeyboardInterrupt handler: restore it, so
    # the Ctrl-C tests do not depend on how the test run was launched
    signal.signal(signal.SIGINT, signal.default_int_handler)
    ap = argparse.ArgumentParser()
    ap.add_argument("path")
    ap.add_argument("--n", type=int, required=True)
    ap.add_argument("--signature", default="sig")
    ap.add_argument("--crash-at", type=int, default=0)
    ap.add_argument("--tear-seed", type=int, default=0)
    ap.add_argument("--executor", default=None, help="open_executor spec")
    ap.add_argument("--study", action="store_true",
                    help="paper_figs' study_sweep in full mode (its own 2-process pool)")
    ap.add_argument("--markers", default=None, help="folder: use marked_worker")
    ap.add_argument("--delay", type=float, default=0.0)
    ap.add_argument("--report", default=None, help="file to write calls=K to")
    args = ap.parse_args(argv)
    count = install_crash(args.crash_at, args.tear_seed)
    if args.markers:
        configs = [(f"c{i:03d}", (i, args.markers, args.delay)) for i in range(args.n)]
        worker = marked_worker
    else:
        configs = [(f"c{i:03d}", i) for i in range(args.n)]
        worker = rows_of
    os.makedirs(os.path.dirname(os.path.abspath(args.path)), exist_ok=True)
    store = ResumableCSV(args.path, args.signature)
    if args.study:
        from paper_figs import _wm_common as wc

        wc.study_sweep(configs, worker, store, quick=False, progress=False)
    else:
        with open_executor(args.executor) as ex:
            run_sweep(configs, worker, store, executor=ex, progress=False)
    if args.report:
        with open(args.report, "w") as fh:
            fh.write(f"calls={count[0]}\n")
    else:
        print(f"calls={count[0]}", flush=True)
    return 0


def serve() -> int:
    import json
    import time

    import pandas  # noqa: F401  (imported once here, not in every forked child)

    for line in iter(sys.stdin.readline, ""):
        cmd = json.loads(line)
        pid = os.fork()
        if pid == 0:  # the child: run, never return into the server loop
            code = 1
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)  # stdout carries the server's answers only
            try:
                code = main(cmd["argv"])
            except BaseException:
                import traceback

                traceback.print_exc()
            finally:
                os._exit(code)
        kill_after = cmd.get("kill_after")
        if kill_after is not None:
            deadline = time.monotonic() + kill_after
            while time.monotonic() < deadline:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    break
                time.sleep(0.001)
            else:
                os.kill(pid, signal.SIGKILL)
                _, status = os.waitpid(pid, 0)
        else:
            _, status = os.waitpid(pid, 0)
        rc = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        print(json.dumps({"rc": rc}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(serve() if sys.argv[1:] == ["--serve"] else main())
