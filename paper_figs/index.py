"""The verdict of ``make reproduce``: ``INDEX.md`` of an output folder.

``python -m paper_figs.index [--out DIR]`` evaluates every claim of the claims tables in
:mod:`paper_figs.claims` -- Liu, Wan, Gao & Gündüz (2026), arXiv:2609.21858, and Zhou et al.
(2026), arXiv:2607.26627 -- on the CSVs of ``DIR`` (default ``paper_figs/out``) and writes
``DIR/INDEX.md``; any output folder with study output (quick, partial or full) gives an
INDEX, with "not run" where data are missing; a folder that does not exist or holds no CSV
is an error (exit 2).  ``python -m paper_figs.index --list --json`` (or ``--json``) prints
the claims registry (``id``, ``paper``, ``location``, ``kind``, ``statement``, ``rule``,
``flip_test``); reading commands never write.  ``--tally`` prints the registry's counts in
one line (paper claims per paper, package checks), the line the README quotes.  The engine is
split by concern: the verdict vocabulary (:mod:`paper_figs.claims.verdicts`), the rule kinds
(:mod:`paper_figs.claims.rules`), the data access and input schemas
(:mod:`paper_figs.claims.data`), the evaluation (:mod:`paper_figs.claims.evaluation`) and the
rendering (:mod:`paper_figs.claims.render`); this module is the public entry the studies'
machinery calls (imported, so running this file as ``__main__`` shares their classes with
every importer).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from paper_figs._common import OUT_DIR, heartbeat
from paper_figs.claims.data import MissingData  # noqa: F401  (the public names of the INDEX)
from paper_figs.claims.evaluation import evaluate, summary, summary_line  # noqa: F401
from paper_figs.claims.render import (  # noqa: F401
    registry_json,
    registry_tally,
    render,
    write_index,
)
from paper_figs.claims.verdicts import INDEX, NOT_RUN, TIMINGS, VERDICTS  # noqa: F401


def _print(text: str) -> int:
    """Print ``text``; a reader that stops early (``--list | head``) is not an error."""
    try:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        # Python flushes stdout again at exit: point it at devnull so that flush is quiet
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=OUT_DIR, help="folder of the CSVs")
    ap.add_argument("--list", action="store_true", help="print the claims registry")
    ap.add_argument("--json", action="store_true",
                    help="print the claims registry as JSON (implies --list)")
    ap.add_argument("--tally", action="store_true",
                    help="print the registry's claims per paper and kind in one line")
    args = ap.parse_args(argv)
    # reading commands (--tally, --list, --json) never write
    if args.tally:
        return _print(registry_tally())
    if args.list or args.json:
        if args.json:
            return _print(registry_json())
        from paper_figs.claims.registry import CLAIMS

        return _print("\n".join(f"{c.id}\t{c.kind}\t{c.location}\t{c.statement}"
                                for c in CLAIMS))
    if not args.out.is_dir():
        ap.error(f"--out: no such folder: {args.out} (run the studies first, e.g. make "
                 "reproduce)")
    if not any(args.out.glob("*.csv")):
        ap.error(f"--out: no study output (CSV) in {args.out}; nothing to judge")
    # a full folder takes about 15 s (INDEX-time CSVs may be recomputed): never in silence
    print(f"[index] writing {args.out / INDEX} (every claim, from the CSVs) ...",
          file=sys.stderr, flush=True)
    with heartbeat("[index]", f"writing {INDEX}"):
        path, counts = write_index(args.out)
    print(f"[index] wrote {path}")
    print(f"[index] paper claims: {summary_line(counts)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
