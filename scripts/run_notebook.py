"""Execute a notebook in place, saying what it does, and save it clean (``make notebook``).

``python scripts/run_notebook.py notebooks/05_real_model.ipynb [--full] [--timeout S]``
runs the notebook with nbclient (what the tests and ``jupyter execute`` use) in quick mode
(``SPECBOUND_QUICK=1``; ``--full``: the full sizes), prints on stderr which cell runs and a
line every 5 s of a long cell (a notebook on the real model takes about 2 minutes), and
saves it with the progress bars that cells wrote on stderr removed (:func:`strip_progress`),
as the committed notebooks are.  Run from the repository root.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QUICK_ENV = "SPECBOUND_QUICK"
_BAR = re.compile(r"\d+%\||\d+/\d+ \[")


def is_progress(output) -> bool:
    """Whether a cell output is a progress bar (or its leftover newline) written on stderr:
    a stderr stream whose text is blank, or holds a carriage return or a tqdm bar."""
    if output.get("output_type") != "stream" or output.get("name") != "stderr":
        return False
    text = output.get("text", "")
    return not text.strip() or "\r" in text or _BAR.search(text) is not None


def strip_progress(nb) -> int:
    """Remove the progress-bar outputs (:func:`is_progress`) of every code cell of ``nb``
    (an ``nbformat`` notebook, changed in place); returns how many were removed."""
    removed = 0
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        keep = [o for o in cell.get("outputs", []) if not is_progress(o)]
        removed += len(cell.get("outputs", [])) - len(keep)
        cell.outputs = keep
    return removed


def main(argv=None) -> int:
    import nbformat
    from nbclient import NotebookClient

    sys.path.insert(0, str(ROOT))
    from paper_figs._common import heartbeat

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("notebook", type=Path, help="the .ipynb file (saved in place)")
    ap.add_argument("--full", action="store_true", help="full sizes (default: quick mode)")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per cell (default 600)")
    args = ap.parse_args(argv)
    if not args.notebook.is_file():
        ap.error(f"notebook: no file {str(args.notebook)!r}")
    nb = nbformat.read(args.notebook, as_version=4)
    code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    if args.full:
        os.environ.pop(QUICK_ENV, None)
    else:
        os.environ[QUICK_ENV] = "1"  # inherited by the kernel
    name = args.notebook.name
    t0 = time.perf_counter()

    def started(cell, cell_index, **_):
        print(f"[{name}] cell {code.index(cell_index) + 1}/{len(code)} "
              f"({time.perf_counter() - t0:.0f} s so far)", file=sys.stderr, flush=True)

    print(f"[{name}] starting a kernel ({'full' if args.full else 'quick'} mode)",
          file=sys.stderr, flush=True)
    client = NotebookClient(nb, timeout=args.timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(args.notebook.parent)}},
                            on_cell_start=started)
    with heartbeat(f"[{name}]", "running"):
        client.execute()
    removed = strip_progress(nb)
    nbformat.write(nb, args.notebook)
    print(f"[{name}] saved in {time.perf_counter() - t0:.0f} s ({removed} progress-bar "
          f"outputs removed)", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
