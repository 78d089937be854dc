"""Regenerate every paper figure and table into ``paper_figs/out/`` (``make reproduce``).

Each figure script is a module of this package with a ``main(out_dir, quick=False)``
function and a ``FIGURE = True`` marker; this runner calls them in name order.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import time

import paper_figs
from paper_figs._common import parse_args


def figure_modules():
    names = sorted(
        m.name for m in pkgutil.iter_modules(paper_figs.__path__) if not m.name.startswith("_")
    )
    names = [n for n in names if n != "run_all"]
    mods = [importlib.import_module(f"paper_figs.{n}") for n in names]
    return [m for m in mods if getattr(m, "FIGURE", False)]


def main(argv=None) -> int:
    args = parse_args(__doc__, argv)
    for mod in figure_modules():
        t0 = time.perf_counter()
        print(f"[reproduce] {mod.__name__} ...", flush=True)
        written = mod.main(args.out, quick=args.quick)
        for path in written or []:
            print(f"[reproduce]   wrote {path}", flush=True)
        print(f"[reproduce]   done in {time.perf_counter() - t0:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
