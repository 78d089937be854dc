"""Regenerate every paper figure and table into ``paper_figs/out/`` (``make reproduce``).

Each figure script is a module of this package with a ``main(out_dir, quick=False)``
function and a ``FIGURE = True`` marker; this runner calls them in name order.

Resuming: the studies that sweep many configurations (``wm_*``) store each finished
configuration at once (:mod:`specbound.sweep`), so an interrupted run, rerun with the same
options, recomputes only the configurations that were in flight; the other scripts take
seconds and simply run again.  Ctrl-C stops at once (exit status 130).

Executor: ``--executor SPEC`` (or the environment variable ``SPECBOUND_EXECUTOR``; ``make
reproduce EXECUTOR=SPEC``) sends every sweep to one executor, e.g. ``dask://host:8786`` for
a Dask ``distributed`` scheduler (extra ``dist``; the workers must be able to import
``paper_figs`` and ``specbound``, e.g. started from this folder).  It is passed as
``executor=`` to a script's ``main`` that accepts it and made the current executor
(:func:`specbound.sweep.use_executor`) for the others.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import sys
import time

import paper_figs
from paper_figs._common import parse_args, sweep_executor


def figure_modules():
    names = sorted(
        m.name for m in pkgutil.iter_modules(paper_figs.__path__) if not m.name.startswith("_")
    )
    names = [n for n in names if n != "run_all"]
    mods = [importlib.import_module(f"paper_figs.{n}") for n in names]
    return [m for m in mods if getattr(m, "FIGURE", False)]


def _accepts_executor(func) -> bool:
    try:
        params = inspect.signature(func).parameters
    except (TypeError, ValueError):
        return False
    return "executor" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def main(argv=None, modules=None) -> int:
    """Run every figure script (``modules``: the scripts to run, default all of them)."""
    args = parse_args(__doc__.splitlines()[0], argv)
    mods = figure_modules() if modules is None else list(modules)
    try:
        with sweep_executor(args.executor) as ex:
            if args.executor:
                print(f"[reproduce] executor: {args.executor}", flush=True)
            for mod in mods:
                t0 = time.perf_counter()
                print(f"[reproduce] {mod.__name__} ...", flush=True)
                kwargs = {"executor": ex} if args.executor and _accepts_executor(mod.main) else {}
                written = mod.main(args.out, quick=args.quick, **kwargs)
                for path in written or []:
                    print(f"[reproduce]   wrote {path}", flush=True)
                print(f"[reproduce]   done in {time.perf_counter() - t0:.1f} s", flush=True)
    except KeyboardInterrupt:
        print("[reproduce] interrupted: finished configurations are kept; run the same "
              "command again to resume", file=sys.stderr, flush=True)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
