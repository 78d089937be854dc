"""Evaluation of the claims: every claim's evidence columns on the CSVs of an output folder
(:mod:`paper_figs.claims.data`) and on the papers' transcribed numbers
(:mod:`paper_figs.claims.paper_numbers`), combined into one verdict per claim."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from paper_figs.claims import paper_numbers, registry
from paper_figs.claims.data import Data, MissingData
from paper_figs.claims.verdicts import (
    NOT_RUN,
    NOT_TESTABLE,
    PAPER,
    PAPER_DATA,
    PROVED,
    REAL,
    REPRODUCED,
    SYNTHETIC,
    VERDICTS,
    Claim,
    Outcome,
    Row,
    combine_columns,
)


def _run(fn, arg) -> Outcome:
    if fn is None:
        return Outcome(NOT_RUN, "—")
    try:
        return fn(arg)
    except MissingData as exc:
        # absent, or present and failing its schema (BadInput names the file and the fault)
        return Outcome(NOT_RUN, str(exc))
    except (KeyError, IndexError) as exc:
        # a row or column a partial output lacks: the INDEX of any folder is written, and
        # the reason is shown in the row with the files the claim read (a TypeError or
        # ValueError is a fault of the claim's code and propagates)
        files = ", ".join(getattr(arg, "reads", ())) or "the output"
        return Outcome(NOT_RUN, f"{files}: incomplete output ({type(exc).__name__}: {exc})")


def _as_proved(o: Outcome) -> Outcome:
    """A column of a claim that holds by algebra: *reproduced* there means the
    implementation agrees with the proof, so it reads :data:`PROVED`."""

    return replace(o, verdict=PROVED) if o.verdict == REPRODUCED else o


def evaluate(out_dir, claims: Iterable[Claim] | None = None, numbers=None) -> list[Row]:
    """Every claim's evidence columns on the CSVs of ``out_dir`` (missing: not run) and on
    the paper's transcribed numbers (``numbers``, default the shipped transcription)."""

    data = Data(Path(out_dir))
    nums = paper_numbers.load() if numbers is None else numbers
    out = []
    for cl in registry.CLAIMS if claims is None else claims:
        cols = {SYNTHETIC: _run(cl.synthetic, data), REAL: _run(cl.real, data),
                PAPER_DATA: _run(cl.paper_data, nums)}
        if cl.proved:
            keep = (PAPER_DATA, REAL) if cl.empirical else (PAPER_DATA,)
            cols = {c: o if c in keep else _as_proved(o) for c, o in cols.items()}
        verdict = NOT_TESTABLE if cl.untestable else \
            combine_columns(cols[c].verdict for c in (SYNTHETIC, REAL))
        out.append(Row(cl, cols, verdict))
    return out


def summary(rows: Iterable[Row], kind: str = PAPER, paper: str | None = None) -> dict:
    """Number of claims per verdict (zeros included) among ``kind`` (and ``paper``)."""
    counts = dict.fromkeys(VERDICTS, 0)
    for r in rows:
        if r.claim.kind == kind and (paper is None or r.claim.paper == paper):
            counts[r.verdict] += 1
    return counts


def summary_line(counts: dict) -> str:
    return ", ".join(f"{v}: {n}" for v, n in counts.items())

