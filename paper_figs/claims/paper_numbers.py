"""The papers' own published numbers, as transcribed in ``paper_numbers.csv``.

Each row is one cell of a table of Liu, Wan, Gao & Gündüz (2026), arXiv:2609.21858 (Tables
1–13, 15): ``key`` (``liu.t<table>.<setting>.<decoder>.<metric>``), ``value``, ``sd`` and
``n`` where the table gives a spread (Tables 2–5: std over 1000 prompts; Tables 6–9: std over
3 seeds), and the ``table`` and ``cell`` it came from.  The claims tables apply the
same rule to these numbers as to the studies' outputs.  Zhou et al. (2026), arXiv:2607.26627:
Tables 1–3 and 5–10 (``zhou.t<table>.<setting>.<method>.<benchmark>.<metric>``; the
appendix Tables 7–10 hold BE, DS and accuracy of every method and parameter for the four
model pairs of App. C, Table 7 with spreads over 3 runs, the others one run whose accuracy
carries the binomial spread over the benchmark's problems).  The standard error of a cell
is ``sd / √n`` (a printed spread of 0 means below half a unit of the last digit, so half a
unit is used), with a Student-t reference on ``n − 1`` degrees of freedom when ``n`` is
below :data:`FEW`; a cell without spread carries its rounding, half a unit of the last
printed digit, on the normal reference -- and, where the paper prints the same setting
twice (Liu et al.'s Table 10 repeats Table 6's cells, Table 11 Table 7's, up to 0.005 apart),
at least the spread those repeats show (:data:`REPEATS`): the root mean square of the
repeats' differences over √2, per metric, for every multi-draft cell without a spread
(:data:`NO_SPREAD`).  Rounding alone gave z up to 112 for differences the paper's own
repeats exceed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from paper_figs.claims.data import MissingData

PATH = Path(__file__).resolve().parent / "paper_numbers.csv"
#: below this many units (seeds, prompts) a standard error uses the t reference
FEW = 30


@dataclass(frozen=True)
class Cell:
    """One transcribed number: value, standard error, degrees of freedom (None: normal
    reference) and its source."""

    value: float
    se: float
    df: float | None
    source: str


def _half_unit(text: str) -> float:
    text = str(text).strip()
    decimals = len(text.split(".", 1)[1]) if "." in text else 0
    return 0.5 * 10.0 ** (-decimals)


#: tables of Liu et al. (2026) that print the same cells: (table, its repeat)
REPEATS = (("t6", "t10"), ("t7", "t11"))
#: Liu et al.'s multi-draft tables without a printed spread: their cells carry at least the
#: spread of the paper's repeated cells
NO_SPREAD = ("t1", "t10", "t11", "t12", "t13")


def _repeat_spread(rows: dict) -> dict[str, float]:
    """Per metric, the standard deviation of one printed cell that the paper's repeated
    cells imply: sqrt(mean(difference²) / 2) over :data:`REPEATS`."""
    diffs: dict[str, list[float]] = {}
    for a, b in REPEATS:
        pre_a, pre_b = f"liu.{a}.", f"liu.{b}."
        for k in rows:
            if k.startswith(pre_a) and pre_b + k[len(pre_a):] in rows:
                metric = k.rsplit(".", 1)[-1]
                d = float(rows[k]["value"]) - float(rows[pre_b + k[len(pre_a):]]["value"])
                diffs.setdefault(metric, []).append(d)
    return {m: math.sqrt(sum(x * x for x in v) / len(v) / 2) for m, v in diffs.items()}


class PaperNumbers:
    """The transcription as a lookup: ``numbers[key]`` is a :class:`Cell`; an absent key is
    :class:`~paper_figs.claims.engine.MissingData` (the column shows "not run")."""

    def __init__(self, frame: pd.DataFrame):
        need = {"key", "value", "sd", "n", "table", "cell"}
        if not need <= set(frame.columns):
            raise ValueError(f"frame lacks the columns {sorted(need - set(frame.columns))}")
        self._rows = {str(r["key"]): r for _, r in frame.astype(str).iterrows()}
        self.repeat_spread = _repeat_spread(self._rows)

    def __contains__(self, key: str) -> bool:
        return key in self._rows

    def __getitem__(self, key: str) -> Cell:
        if key not in self._rows:
            raise MissingData(f"the paper's number {key} is not transcribed")
        r = self._rows[key]
        value = float(r["value"])
        half = _half_unit(r["value"])
        sd_text = r["sd"].strip()
        if sd_text in ("", "nan"):
            se, df = half, None
            parts = key.split(".")
            if parts[0] == "liu" and parts[1] in NO_SPREAD:
                se = max(se, self.repeat_spread.get(parts[-1], 0.0))
        else:
            n = float(r["n"])
            se = max(float(sd_text), _half_unit(sd_text)) / math.sqrt(n)
            df = n - 1 if n < FEW else None
        return Cell(value, se, df, f"{r['table']}: {r['cell']}")

    def keys(self, prefix: str = "") -> list[str]:
        return [k for k in self._rows if k.startswith(prefix)]


def load(path=PATH) -> PaperNumbers:
    """The shipped transcription (or another file of the same columns)."""
    return PaperNumbers(pd.read_csv(path, dtype=str, keep_default_na=False))
