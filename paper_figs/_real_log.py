"""Helpers of the figure scripts that read a real distribution log (``real_*``).

A log is the shipped one (``specbound.llm.shipped_log()``) unless ``--log DIR`` names a
folder written by ``specbound.llm.logs.DistributionLog`` (e.g. ``specbound log --out DIR``).
Logged pairs are handled on their compact support (the union of the two stored supports,
exact when the tails are 0, see ``LoggedDistributions.pairs``); batches of pairs are padded
with tokens of probability 0 under both models, which changes no formula.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np

from paper_figs._common import Param

#: the ``--log DIR`` parameter of every script that reads a log (None: the shipped log)
LOG_PARAM = Param("log", "path", None, None,
                  "folder of a distribution log (None: the shipped log, "
                  "specbound.llm.shipped_log())")
#: ``--contexts N``: logged contexts used per draft (0: all of them)
QUICK_CONTEXTS = 12


def contexts_param(full: int = 0, quick: int = QUICK_CONTEXTS) -> Param:
    """The ``--contexts N`` parameter: evenly spaced logged contexts per draft, 0 for all."""
    return Param("contexts", "int", full, quick,
                 "logged contexts per draft, evenly spaced (0: all)", low=0)


def store_signature(name: str, version: int, log, quick: bool, changed: dict) -> str:
    """The signature of a script's resumable store: script, version, the log's contents, the
    mode and the non-default parameters (none: the signature of earlier versions)."""
    sig = f"{name}-v{version}-{log_signature(log)}-{'quick' if quick else 'full'}"
    rest = {k: v for k, v in changed.items() if k != "log"}  # the log is in its signature
    if rest:
        blob = json.dumps(rest, sort_keys=True)
        sig += "-" + hashlib.blake2b(blob.encode(), digest_size=6).hexdigest()
    return sig


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
    """``k`` evenly spaced positions out of ``n`` (all when ``k`` is None, 0 or >= n)."""
    if not k or k >= n:
        return np.arange(n)
    return np.unique(np.round(np.linspace(0, n - 1, k)).astype(np.int64))


def padded_pairs(log, draft: str, positions=None) -> tuple[np.ndarray, np.ndarray, list]:
    """The logged pairs at ``positions`` (None: every pair) as two zero-padded 2-D arrays
    (rows sum to 1)."""
    pairs = list(log.pairs(draft))
    if positions is not None:
        pos = set(int(i) for i in positions)
        pairs = [lp for lp in pairs if lp.position in pos]
    width = max(lp.p.size for lp in pairs)
    P = np.zeros((len(pairs), width))
    Q = np.zeros((len(pairs), width))
    for i, lp in enumerate(pairs):
        P[i, : lp.p.size] = lp.p
        Q[i, : lp.q.size] = lp.q
    return P, Q, pairs
