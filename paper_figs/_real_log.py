"""Helpers of the figure scripts that read a real distribution log (``real_*``).

A log is the shipped one (``specbound.llm.shipped_log()``) unless ``--log DIR`` names a
folder written by ``specbound.llm.logs.DistributionLog`` (e.g. ``specbound log --out DIR``).
Logged pairs are handled on their compact support (the union of the two stored supports,
exact when the tails are 0, see ``LoggedDistributions.pairs``); batches of pairs are padded
with tokens of probability 0 under both models, which changes no formula.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from paper_figs._common import parse_args, sweep_executor


def parse_log_args(doc: str, argv=None):
    """``--quick``, ``--out``, ``--executor`` (paper_figs._common) and ``--log DIR``."""
    import argparse

    ap = argparse.ArgumentParser(add_help=False)
    ap.add_argument("--log", type=Path, default=None,
                    help="folder of a distribution log (default: the shipped log)")
    known, rest = ap.parse_known_args(argv)
    args = parse_args(doc.splitlines()[0], rest)
    args.log = known.log
    return args


def cli(main, doc: str, argv=None) -> None:
    """``python -m paper_figs.NAME [--quick] [--out DIR] [--executor SPEC] [--log DIR]``."""
    args = parse_log_args(doc, argv)
    with sweep_executor(args.executor):
        for path in main(args.out, quick=args.quick, log=args.log):
            print(path)


def open_log(log=None):
    """The shipped log (``log`` None) or the log in folder ``log``."""
    from specbound.llm.logs import read_log, shipped_log

    return shipped_log() if log is None else read_log(log)


def log_signature(log) -> str:
    """A short fingerprint of a log's contents (its metadata and stored arrays), so that a
    resumable store made from one log is never reused for another."""
    h = hashlib.sha256(repr(sorted(log.meta.items())).encode())
    h.update(str(len(log)).encode())
    for d in log.drafts:
        for name, arr in sorted(log[d].arrays().items()):
            h.update(name.encode())
            h.update(np.ascontiguousarray(arr).tobytes())
    return h.hexdigest()[:16]


def in_draft_order(df, drafts, by=()):
    """``df`` sorted by the position of its ``draft`` in ``drafts`` (the log's order), then
    by the columns ``by``, stably (a sweep store holds its rows in completion order)."""
    if df.empty:
        return df
    rank = {d: i for i, d in enumerate(drafts)}
    return (df.assign(_o=df["draft"].map(rank)).sort_values(["_o", *by], kind="stable")
            .drop(columns="_o").reset_index(drop=True))


def subsample(n: int, k: int | None) -> np.ndarray:
    """``k`` evenly spaced positions out of ``n`` (all when ``k`` is None or >= n)."""
    if k is None or k >= n:
        return np.arange(n)
    return np.unique(np.round(np.linspace(0, n - 1, k)).astype(np.int64))


def padded_pairs(log, draft: str, positions) -> tuple[np.ndarray, np.ndarray, list]:
    """The logged pairs at ``positions`` as two zero-padded 2-D arrays (rows sum to 1)."""
    pos = set(int(i) for i in positions)
    pairs = [lp for lp in log.pairs(draft) if lp.position in pos]
    width = max(lp.p.size for lp in pairs)
    P = np.zeros((len(pairs), width))
    Q = np.zeros((len(pairs), width))
    for i, lp in enumerate(pairs):
        P[i, : lp.p.size] = lp.p
        Q[i, : lp.q.size] = lp.q
    return P, Q, pairs
