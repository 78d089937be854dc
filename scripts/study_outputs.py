"""Run the synthetic watermark studies at a chosen size and compare two output folders.

Used to show that a speed-up changes no number: run it with each tree on ``PYTHONPATH``
(the same command), then compare the folders byte for byte (CSV columns ``task_cpu_s``, the
sweep tasks' CPU seconds, excepted)::

    PYTHONPATH=/path/to/old python scripts/study_outputs.py run OUT_OLD medium
    PYTHONPATH=/path/to/new python scripts/study_outputs.py run OUT_NEW medium
    python scripts/study_outputs.py compare OUT_OLD OUT_NEW

``task STUDY NAME OUT.json`` runs one full-size sweep task in this process (``L1``..``L4``,
``hh``, ``basic_uwm`` of ``wm_single_draft_frontier``; ``B2``..``B8`` of
``wm_multidraft_scaling``), prints its wall and CPU seconds and writes its rows (without
``task_cpu_s``) as JSON, to compare with ``cmp``.

Sizes: ``quick`` (the studies' ``--quick``), ``medium`` (the full settings with 24 prompts,
8 for ``fidelity_entropy``; the drafter-substitution study keeps its own 500 prompts), and
``full``.  The sweeps run serially in the calling process unless ``--pool`` is given (the
studies' default executor then).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import dataclasses
import importlib
import io
import sys
import time
from pathlib import Path

STUDIES = ("wm_single_draft_frontier", "wm_multidraft_scaling", "wm_drafter_substitution",
           "fidelity_entropy")


def run(out: Path, size: str, studies, pool: bool) -> None:
    from paper_figs import _wm_common as wc
    from paper_figs import fidelity_entropy as fe
    from specbound.sweep import use_executor

    if size == "medium":
        wc.FULL = dataclasses.replace(wc.FULL, n_prompts=24)
        fe.FULL = dataclasses.replace(fe.FULL, n_prompts=8)
    out.mkdir(parents=True, exist_ok=True)
    with contextlib.nullcontext() if pool else use_executor(None):
        for name in studies:
            mod = importlib.import_module(f"paper_figs.{name}")
            kw = {}
            if size == "medium" and hasattr(mod, "PARAMS"):  # studies with a --prompts flag
                n = {"fidelity_entropy": 8, "wm_drafter_substitution": None}.get(name, 24)
                kw = {} if n is None else {"prompts": n}
            t0, c0 = time.time(), time.process_time()
            mod.main(out, quick=size == "quick", **kw)
            print(f"{name} {size}: wall {time.time() - t0:.1f} s, CPU of this process "
                  f"{time.process_time() - c0:.1f} s", flush=True)


def task(study: str, name: str, out: Path) -> None:
    import json
    import os
    import tempfile

    mod = importlib.import_module(f"paper_figs.{study}")
    s = mod.settings(False)
    if study == "wm_single_draft_frontier":
        t = ("L", int(name[1:])) if name.startswith("L") else (name,)
    else:
        t = int(name[1:])
    with tempfile.TemporaryDirectory() as d:
        t0, c0 = time.time(), time.process_time()
        rows = mod.worker((s, t, d, name))
        w, c = time.time() - t0, time.process_time() - c0
    for r in rows:
        r.pop("task_cpu_s", None)
    out.write_text(json.dumps(rows, sort_keys=True, default=str))
    print(f"{study} {name}: wall {w:.1f} s, CPU {c:.1f} s, load {os.getloadavg()}")


def _rows(text: str) -> list:
    rows = list(csv.reader(io.StringIO(text)))
    if rows and "task_cpu_s" in rows[0]:
        i = rows[0].index("task_cpu_s")
        rows = [r[:i] + r[i + 1:] for r in rows]
    return rows


def compare(a: Path, b: Path) -> int:
    """Print one line per CSV / markdown file of ``a``; the number of files that differ."""
    bad = 0
    for f in sorted(p.name for p in a.iterdir() if p.suffix in (".csv", ".md")):
        ta = (a / f).read_text()
        tb = (b / f).read_text() if (b / f).exists() else None
        if tb is None:
            tag = "MISSING"
        elif ta == tb:
            tag = "byte-identical"
        elif f.endswith(".csv") and _rows(ta) == _rows(tb):
            tag = "identical except task_cpu_s"
        else:
            tag = "DIFFERENT"
        bad += tag in ("MISSING", "DIFFERENT")
        print(f"{f}: {tag}")
    print("all identical" if not bad else f"{bad} files differ")
    return bad


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("out", type=Path)
    r.add_argument("size", choices=("quick", "medium", "full"))
    r.add_argument("studies", nargs="*", default=list(STUDIES))
    r.add_argument("--pool", action="store_true")
    t = sub.add_parser("task")
    t.add_argument("study")
    t.add_argument("name")
    t.add_argument("out", type=Path)
    c = sub.add_parser("compare")
    c.add_argument("a", type=Path)
    c.add_argument("b", type=Path)
    args = ap.parse_args(argv)
    if args.cmd == "run":
        run(args.out, args.size, args.studies, args.pool)
        return 0
    if args.cmd == "task":
        task(args.study, args.name, args.out)
        return 0
    return 1 if compare(args.a, args.b) else 0


if __name__ == "__main__":
    sys.exit(main())
