"""Compared values for the claims tables: one :class:`Pair` per setting (L, B, T_eval), read
from a study's paired comparisons, from the real model's per-prompt runs (prompt-clustered
standard errors, Student-t reference), or from the papers' transcribed tables.  Every rule of
a claim receives the same list of pairs whichever column it judges."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from paper_figs.claims.data import MissingData, rows
from paper_figs.claims.rules import few

REAL_RUNS = "real_runs.csv"


@dataclass(frozen=True)
class Pair:
    """``a − b`` at one setting: values, difference, its standard error, the degrees of
    freedom of its reference (None: normal) and whether both sides are the same output
    (an identity of the code: identical tokens on the same prompts)."""

    key: object
    a: float
    b: float
    diff: float
    se: float
    df: float | None = None
    n: int | None = None
    identical: bool = False

    @property
    def scale(self) -> float:
        return max(abs(self.a), abs(self.b))


def _default(df: pd.DataFrame) -> pd.DataFrame:
    if "variant" in df:
        return df[df["variant"].isna() | (df["variant"].astype(str) == "default")]
    return df


def study_pairs(data, csv: str, a: str, b: str, metric: str, by: str,
                variant: str = "default") -> list[Pair]:
    """Pairs from a synthetic study: its ``*_comparisons.csv`` row ``a-b`` (paired by prompt)
    where written, else the two rows of ``csv`` with independent errors."""
    cmp = data.maybe(csv.replace(".csv", "_comparisons.csv"),
                     ("comparison", "metric", "diff", "diff_se", "value_a", "value_b"))
    out = []
    if cmp is not None:
        sel = cmp[(cmp["comparison"] == f"{a}-{b}") & (cmp["metric"] == metric)]
        if "variant" in sel:
            sel = sel[sel["variant"].fillna("default").astype(str) == variant]
        for _, r in sel.iterrows():
            n = r.get("n_prompts")
            d, se = float(r["diff"]), float(r["diff_se"])
            out.append(Pair(r[by] if by in r else None, float(r["value_a"]),
                            float(r["value_b"]), d, se, few(n),
                            None if n is None or pd.isna(n) else int(n), d == 0 and se == 0))
    if out:
        return sorted(out, key=lambda p: p.key)
    df = data.csv(csv, ("decoder", by, metric, f"{metric}_se"))
    if "variant" in df:
        df = df[df["variant"].fillna("default").astype(str) == variant]
    A = rows(df, f"{a} in {csv}", decoder=a).groupby(by).first()
    B = rows(df, f"{b} in {csv}", decoder=b).groupby(by).first()
    for k in sorted(set(A.index) & set(B.index)):
        ra, rb = A.loc[k], B.loc[k]
        n = ra.get("n_prompts")
        va, vb = float(ra[metric]), float(rb[metric])
        se = math.hypot(float(ra[f"{metric}_se"]), float(rb[f"{metric}_se"]))
        out.append(Pair(k, va, vb, va - vb, se, few(n), None if n is None else int(n)))
    if not out:
        raise MissingData(f"{csv}: no common {by} for {a} and {b}")
    return out


def real_pairs(data, csv: str, a: str, b: str, by: str) -> list[Pair]:
    """AATPS pairs on the real model, clustered by prompt: the per-prompt AATPS of ``a`` and
    ``b`` (``real_runs.csv``, the configurations ``csv`` reports) differenced on the same
    prompts; standard error sd/√n with a Student-t reference on n − 1 degrees of freedom."""
    fr = data.csv(csv, ("decoder", "L", "B", "draft"))
    runs = data.csv(REAL_RUNS, ("decoder", "L", "B", "draft", "prompt_set", "prompt_index",
                                "aatps"))
    out = []
    A, B = rows(fr, f"{a} in {csv}", decoder=a), rows(fr, f"{b} in {csv}", decoder=b)
    for k in sorted(set(A[by]) & set(B[by])):
        side = []
        for dec, sub in ((a, A), (b, B)):
            r = sub[sub[by] == k].iloc[0]
            sel = runs[(runs["decoder"] == dec) & (runs["L"] == r["L"]) & (runs["B"] == r["B"])
                       & (runs["draft"] == r["draft"])]
            side.append(sel.groupby(["prompt_set", "prompt_index"])["aatps"].mean())
        j = side[0].index.intersection(side[1].index)
        if len(j) == 0:
            continue
        d = (side[0][j] - side[1][j]).to_numpy(dtype=float)
        n = len(d)
        se = float(np.std(d, ddof=1) / math.sqrt(n)) if n > 1 else math.nan
        same = bool(np.all(d == 0)) and n > 1
        # one prompt: df 0, so every rule reads "sample too small (n = 1)"
        out.append(Pair(k, float(side[0][j].mean()), float(side[1][j].mean()), float(d.mean()),
                        0.0 if same else se, n - 1, n, same))
    if not out:
        raise MissingData(f"{REAL_RUNS}: no prompts shared by {a} and {b}")
    return out


def real_metric_pairs(data, csv: str, a: str, b: str, metric: str, by: str) -> list[Pair]:
    """Pairs of a per-configuration metric of the real studies (standard errors over
    prompts as written, independent, Student-t reference on the fewer prompts − 1)."""
    df = data.csv(csv, ("decoder", by, metric, f"{metric}_se", "n_prompts"))
    A = rows(df, f"{a} in {csv}", decoder=a).groupby(by).first()
    B = rows(df, f"{b} in {csv}", decoder=b).groupby(by).first()
    out = []
    for k in sorted(set(A.index) & set(B.index)):
        ra, rb = A.loc[k], B.loc[k]
        va, vb = float(ra[metric]), float(rb[metric])
        se = math.hypot(float(ra[f"{metric}_se"]), float(rb[f"{metric}_se"]))
        n = int(min(ra["n_prompts"], rb["n_prompts"]))
        out.append(Pair(k, va, vb, va - vb, se, n - 1 if n > 1 else math.nan, n))
    if not out:
        raise MissingData(f"{csv}: no common {by} for {a} and {b}")
    return out


def paper_pairs(numbers, pattern: str, a: str, b: str, keys) -> list[Pair]:
    """Pairs from the transcribed tables: ``pattern.format(k=..., d=...)`` names a cell;
    independent errors; the t reference of the side with fewer units."""
    out = []
    for k in keys:
        ca, cb = numbers[pattern.format(k=k, d=a)], numbers[pattern.format(k=k, d=b)]
        dfs = [d for d in (ca.df, cb.df) if d is not None]
        out.append(Pair(k, ca.value, cb.value, ca.value - cb.value, math.hypot(ca.se, cb.se),
                        min(dfs) if dfs else None))
    return out
