"""The verdict of ``make reproduce``: ``INDEX.md`` of an output folder.

``python -m paper_figs.index [--out DIR]`` evaluates every claim of the claims tables in
:mod:`paper_figs.claims` -- Liu, Wan, Gao & Gündüz (2026), arXiv:2609.21858, and Zhou et al.
(2026), arXiv:2607.26627 -- on the CSVs of ``DIR`` (default ``paper_figs/out``) and writes
``DIR/INDEX.md``; any output folder (quick, partial, full or empty) gives an INDEX, with
"not run" where data are missing.  ``python -m paper_figs.index --list --json`` prints the
claims registry (``id``, ``paper``, ``location``, ``kind``, ``statement``, ``rule``,
``flip_test``); ``--tally`` prints the registry's counts in one line (paper claims per paper,
package checks), the line the README quotes.  The rules, verdicts and rendering live in
:mod:`paper_figs.claims.engine` (one module, so running this file as ``__main__`` shares its
classes with every importer).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from paper_figs._common import OUT_DIR
from paper_figs.claims.engine import (  # noqa: F401  (the public names of the INDEX)
    INDEX,
    NOT_RUN,
    TIMINGS,
    VERDICTS,
    MissingData,
    evaluate,
    registry_json,
    registry_tally,
    render,
    summary,
    summary_line,
    write_index,
)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=OUT_DIR, help="folder of the CSVs")
    ap.add_argument("--list", action="store_true", help="print the claims registry")
    ap.add_argument("--json", action="store_true", help="with --list: as JSON")
    ap.add_argument("--tally", action="store_true",
                    help="print the registry's claims per paper and kind in one line")
    args = ap.parse_args(argv)
    if args.tally:
        print(registry_tally())
        return 0
    if args.list:
        if args.json:
            print(registry_json())
        else:
            from paper_figs.claims.registry import CLAIMS

            for c in CLAIMS:
                print(f"{c.id}\t{c.kind}\t{c.location}\t{c.statement}")
        return 0
    path, counts = write_index(args.out)
    print(f"[index] wrote {path}")
    print(f"[index] paper claims: {summary_line(counts)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
