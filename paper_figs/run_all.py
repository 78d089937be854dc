"""Regenerate every paper figure and table into ``paper_figs/out/`` (``make reproduce``).

Each figure script is a module of this package with a ``main(out_dir, quick=False,
**params)`` function and a ``FIGURE = True`` marker; this runner calls them in name order,
with their default parameters (``python -m paper_figs.NAME``, :func:`paper_figs._cli.cli`:
run one script alone for other values).  Output folder: ``--out DIR``; default
``paper_figs/out/``, and ``paper_figs/out-quick/`` with ``--quick`` (``make reproduce
QUICK=1``), so that smoke numbers never mix with a full run's; every figure of a quick run
carries a "smoke run" mark.

Resuming: the studies that sweep many configurations (``wm_*``) store each finished
configuration at once (:mod:`specbound.sweep`), so an interrupted run, rerun with the same
options, recomputes only the configurations that were in flight; the other scripts take
seconds and simply run again.  Each sweep says how many of its configurations it found
stored and how many it computes; ``--fresh`` (``make reproduce FRESH=1``) sets the stored
ones aside and recomputes everything.  Ctrl-C stops at once (exit status 130).

Executor: ``--executor SPEC`` (or the environment variable ``SPECBOUND_EXECUTOR``; ``make
reproduce EXECUTOR=SPEC``) sends every sweep to one executor, e.g. ``dask://host:8786`` for
a Dask ``distributed`` scheduler (extra ``dist``).  The scheduler and every worker must
import ``paper_figs`` and ``specbound``: both are installed by ``pip install -e .`` (``make
install``), so a ``dask scheduler`` and ``dask worker`` started anywhere in that environment
will do (docs/sweep.md); from a source tree that is not installed, set ``PYTHONPATH`` to the
repository root for them.  The executor is passed as ``executor=`` to a script's
``main`` that accepts it and made the current executor
(:func:`specbound.sweep.use_executor`) for the others.  Without one, a full run on two or
more cores opens one 2-process pool (``process:2``) for all the studies, so that its two
workers load the embedded model, its drafts and the compiled kernels once for the whole run
instead of once per study (each study alone makes its own pool of the same size); a quick
run stays serial.  A full run that includes a script reading a real log also builds the
study log (``paper_figs._real_log.study_log``) in one background process from the start and
the first such script waits for it (:func:`start_study_log`).

Verdict: each study's wall time is recorded in ``timings.csv`` (columns ``study, seconds,
quick, finished_utc, params``: ``params`` is the JSON of the non-default parameters, empty
for a default run; a rerun of a study replaces its row, and a study run alone,
``python -m paper_figs.NAME``, records its row the same way; the seconds are the compute time
of the stored results: a run that resumes adds its own, one that computes nothing leaves
the row as it is), and at the end
:mod:`paper_figs.index` writes ``INDEX.md`` (every claim of the two papers, its numbers and
its verdict, computed from the CSVs) and the runner prints the count of claims per verdict.
"""

from __future__ import annotations

import importlib
import inspect
import os
import pkgutil
import sys
import time
from pathlib import Path

import paper_figs
from paper_figs import index
from paper_figs._common import (
    default_out_dir,
    heartbeat,
    parse_args,
    smoke_mark,
    study_run,
    sweep_executor,
)
from specbound.sweep import watch_sweeps


def figure_modules():
    names = sorted(
        m.name for m in pkgutil.iter_modules(paper_figs.__path__) if not m.name.startswith("_")
    )
    names = [n for n in names if n != "run_all"]
    mods = [importlib.import_module(f"paper_figs.{n}") for n in names]
    return [m for m in mods if getattr(m, "FIGURE", False)]


def print_index(out_dir) -> dict:
    """Write ``INDEX.md`` and print the number of claims per verdict."""
    print(f"[reproduce] writing {Path(out_dir) / index.INDEX}: every claim of the two papers "
          "from the CSVs ...", flush=True)
    with heartbeat("[reproduce]", f"writing {index.INDEX}"):
        path, counts = index.write_index(out_dir)
    print(f"[reproduce] wrote {path}", flush=True)
    print(f"[reproduce] verdicts of {sum(counts.values())} claims:", flush=True)
    for verdict, n in counts.items():
        print(f"[reproduce]   {verdict:<40s} {n:3d}", flush=True)
    return counts


def _accepts_executor(func) -> bool:
    try:
        params = inspect.signature(func).parameters
    except (TypeError, ValueError):
        return False
    return "executor" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def default_executor_spec(executor, quick: bool) -> str | None:
    """The executor of a run (module docstring): ``executor`` if given; else ``"process:2"``
    in full mode on two or more cores; else None (serial)."""
    if executor:
        return executor
    if quick or (os.cpu_count() or 1) < 2:
        return None
    return "process:2"


def _build_study_log(out_dir: str) -> None:
    """The background process of :func:`start_study_log` (a module-level function, so that a
    spawned process can import it)."""
    from paper_figs._real_log import study_log

    study_log(out_dir, progress=False)


def _reads_a_log(mod) -> bool:
    from paper_figs._real_log import LOG_PARAM

    return any(p is LOG_PARAM for p in getattr(mod, "PARAMS", ()))


def start_study_log(out_dir, quick: bool, mods):
    """In a full run whose scripts read a real log, start building the study log
    (:func:`paper_figs._real_log.study_log`, about 7 minutes on one core) in a background
    process at once, so that it uses the CPU time the run leaves idle (a full run kept its
    2 cores 77% busy); the first script that reads the log waits for it (:func:`main`).
    Returns the process, or None when nothing is to be built."""
    import multiprocessing

    from paper_figs._real_log import study_log_path

    if quick or not any(_reads_a_log(m) for m in mods):
        return None
    print(f"[reproduce] building the study log {study_log_path(out_dir)} in the background",
          flush=True)
    proc = multiprocessing.get_context("spawn").Process(
        target=_build_study_log, args=(str(out_dir),), daemon=True, name="study-log")
    proc.start()
    return proc


def main(argv=None, modules=None) -> int:
    """Run every figure script (``modules``: the scripts to run, default all of them)."""
    args = parse_args(__doc__.splitlines()[0], argv)
    if args.out is None:
        args.out = default_out_dir(args.quick)
    mods = figure_modules() if modules is None else list(modules)
    builder = None
    try:
        # one fresh start per store for the whole run (studies share the real-runs store)
        with sweep_executor(default_executor_spec(args.executor, args.quick)) as ex, \
                smoke_mark(args.quick), watch_sweeps(None, fresh=args.fresh):
            if args.executor:
                print(f"[reproduce] executor: {args.executor}", flush=True)
            builder = start_study_log(args.out, args.quick, mods)
            for mod in mods:
                t0 = time.perf_counter()
                name = mod.__name__.rsplit(".", 1)[-1]
                print(f"[reproduce] {mod.__name__} ...", flush=True)
                if builder is not None and _reads_a_log(mod):
                    builder.join()  # the script resumes the log if the builder failed
                    print(f"[reproduce]   waited {time.perf_counter() - t0:.1f} s for the "
                          f"study log (exit code {builder.exitcode})", flush=True)
                    builder = None
                kwargs = {"executor": ex} if args.executor and _accepts_executor(mod.main) else {}
                written = study_run(
                    name, lambda mod=mod, kwargs=kwargs: mod.main(args.out, quick=args.quick,
                                                                  **kwargs),
                    args.out, quick=args.quick, fresh=args.fresh)
                for path in written or []:
                    print(f"[reproduce]   wrote {path}", flush=True)
                dt = time.perf_counter() - t0
                print(f"[reproduce]   done in {dt:.1f} s", flush=True)
    except KeyboardInterrupt:
        print("[reproduce] interrupted: finished configurations are kept; run the same "
              "command again to resume", file=sys.stderr, flush=True)
        return 130
    finally:
        if builder is not None and builder.is_alive():  # interrupted before it was needed:
            builder.terminate()  # its finished prompts are kept (the log resumes)
            builder.join()
    if args.fresh:
        print("[reproduce] --fresh: the stored configurations were set aside under each "
              "store's .NAME.csv.sweep/aside/ and everything computed again", flush=True)
    print_index(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
