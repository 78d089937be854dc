"""The command line of one study, ``python -m paper_figs.NAME``: the study's run
(:func:`paper_figs._common.run_study_cli`) and then its verdict (``INDEX.md`` through
:mod:`paper_figs.index`).

This module is the top of ``paper_figs``: it imports the verdict machinery
(:mod:`paper_figs.index`, and through it :mod:`paper_figs.claims`), and nothing below it
does -- the studies' own code and :mod:`paper_figs._common` never import the claims, so the
claims can read the studies' helpers without closing a circle.  Each study calls
:func:`cli` from its ``if __name__ == "__main__":`` block only; ``make reproduce``'s runner
(:mod:`paper_figs.run_all`) writes the INDEX of a whole run the same way.
"""

from __future__ import annotations

from pathlib import Path

from paper_figs._common import heartbeat, note, run_study_cli
from paper_figs.index import INDEX, write_index


def cli(main, doc: str, params=(), name: str | None = None, argv=None) -> Path:
    """Command-line entry of a figure script: ``python -m paper_figs.NAME [--quick]
    [--out DIR] [--executor SPEC] [--fresh] [--PARAM VALUE ...]`` (module docstring of
    :mod:`paper_figs._common`).  Runs the study (:func:`paper_figs._common.run_study_cli`:
    the flags checked, ``main(out, quick=..., **params)`` with the executor, the compute
    time in ``OUT/timings.csv``, the files written printed); a custom-parameters folder
    (``paper_figs/out-custom/NAME-HASH/``) gets its ``INDEX.md`` as the default folders do
    under ``make reproduce``, and a folder that already holds one has it written again (the
    verdicts and the run's mode follow the new outputs); returns the output folder."""
    run = run_study_cli(main, doc, params, name, argv)
    out, name = run.out, run.name
    # a folder with a verdict: keep it (and its mode) current; a custom-parameters folder
    # gets its verdict like the default folders of make reproduce
    if run.custom or (Path(out) / INDEX).exists():
        note(name, f"writing {Path(out) / INDEX} (every claim, from the CSVs) ...")
        with heartbeat(f"[{name}]", f"writing {INDEX}"):
            index_path, _ = write_index(out)
        note(name, f"{index_path} {'written' if run.custom else 'updated'}")
    return out
