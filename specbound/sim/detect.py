"""Watermark detection from keyed pivots (seed 000 §4.1, Alg. 8, App. E; MATH.md §4).

The keyed generators of this package (``basic_uwm``, ``pfr``, ``mpfr``, ... in
:func:`specbound.sim.speculative_decode`) give token ``v`` in context ``c`` the first
arrival time ``E_{v,1} = -log(prf_uniform(context_label(key, c, m), v, 0))`` and emit
``argmin_v E_{v,1} / P(v)`` (the exponential race / Gumbel-max watermark).  The detector
recovers, at every position ``t`` after the prompt, the pivot

    ``U_t = exp(-E_{w_t,1}) = prf_uniform(context_label(key, tokens[:t], m), w_t, 0)``,

which is U(0, 1) under H0 (text not generated with the key) and concentrates near 1 under
the watermark, and scores the pivots with :mod:`specbound.theory.watermark`.

Repeated contexts reuse the same keyed randomness, so their pivots are not independent; with
``dedup=True`` each (context window, token) pair is scored once (the habit of the
three_bricks detectors), which keeps the H0 law of the pivots exactly i.i.d. U(0, 1) for a
fixed key drawn at random.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np
import pandas as pd

from specbound._validation import as_int
from specbound.sim.prf import context_label, key_digest, prf_uniform_numpy
from specbound.theory.watermark import null_log_sf, parse_score_params, token_scores

__all__ = ["DetectionBatch", "DetectionResult", "detect", "detect_many", "keyed_pivots"]


@dataclass(frozen=True)
class DetectionResult:
    """Result of :func:`detect` for one sequence.

    Attributes
    ----------
    score : float
        The score summed over the scored positions (0.0 when none is scored).
    log_pvalue : float
        Natural log of the H0 p-value (0.0 when no position is scored).
    anlppt : float
        ``-log_pvalue / n_scored`` (NaN when no position is scored).
    n_scored : int
        Number of scored positions ``M`` (after de-duplication).
    pivots : numpy.ndarray
        The scored pivots ``U_t`` in position order.
    positions : numpy.ndarray
        The token indices ``t`` that were scored.
    score_name : str
        Which score was used.
    """

    score: float
    log_pvalue: float
    anlppt: float
    n_scored: int
    pivots: np.ndarray
    positions: np.ndarray
    score_name: str


@dataclass(frozen=True)
class DetectionBatch:
    """Result of :func:`detect_many`: one entry per sequence (arrays of equal length).

    ``pivots`` and ``positions`` are lists of 1-D arrays; :meth:`to_frame` gives a
    DataFrame with columns ``score``, ``log_pvalue``, ``anlppt``, ``n_scored``.
    """

    score: np.ndarray
    log_pvalue: np.ndarray
    anlppt: np.ndarray
    n_scored: np.ndarray
    pivots: list
    positions: list
    score_name: str

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame(
            {
                "score": self.score,
                "log_pvalue": self.log_pvalue,
                "anlppt": self.anlppt,
                "n_scored": self.n_scored,
            }
        )


def _as_tokens(tokens, name: str = "tokens") -> np.ndarray:
    arr = np.asarray(tokens)
    if arr.ndim != 1:
        raise ValueError(f"{name}: must be a 1-D sequence of token ids, got shape {arr.shape}")
    if arr.size and arr.dtype.kind not in "iu":
        if arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)):
            arr = arr.astype(np.int64)
        else:
            raise ValueError(f"{name}: must contain integer token ids, got dtype {arr.dtype}")
    arr = arr.astype(np.int64)
    if np.any(arr < 0):
        raise ValueError(f"{name}: token ids must be non-negative")
    return arr


def _as_context_length(m):
    if m is None:
        return None
    if isinstance(m, bool | np.bool_) or not isinstance(m, numbers.Integral) or m < 0:
        raise ValueError(f"context_length: must be None or an integer >= 0, got {m!r}")
    return int(m)


def _pivots(tok: np.ndarray, prompt_length: int, digest, m, dedup: bool):
    """Keyed pivots of positions prompt_length..len-1 (validated input)."""
    labels = []
    positions = []
    seen = set()
    for t in range(prompt_length, tok.size):
        lo = 0 if m is None else max(0, t - m)
        window = tok[lo:t]
        if dedup and m is not None:
            key = (window.tobytes(), int(tok[t]))
            if key in seen:
                continue
            seen.add(key)
        labels.append(context_label(digest, window))
        positions.append(t)
    positions = np.asarray(positions, dtype=np.int64)
    if not labels:
        return np.zeros(0), positions
    U = prf_uniform_numpy(np.asarray(labels, dtype=np.uint64), tok[positions], 0)
    return U, positions


def keyed_pivots(tokens, prompt_length, key, *, context_length=None, dedup=True):
    """Per-position keyed pivots ``U_t = exp(-E_{w_t,1})`` of a token sequence.

    Parameters
    ----------
    tokens : sequence of int
        The full sequence (prompt followed by the generated tokens), as
        ``speculative_decode(...).tokens`` returns it.
    prompt_length : int
        Number of leading prompt tokens (not scored), ``0 <= prompt_length <= len(tokens)``.
    key : int, str or bytes
        The secret key.
    context_length : int or None
        Watermark context window ``m``: the label of position ``t`` hashes
        ``tokens[t-m:t]`` (fewer at the start; ``None``: the whole prefix).  Must match the
        generator's window.
    dedup : bool
        Score each (context window, token) pair once (first occurrence).  Has no effect for
        ``context_length=None``, where every prefix is distinct.

    Returns
    -------
    (pivots, positions) : tuple of numpy.ndarray
        Pivots in (0, 1) and the scored token indices.

    Raises
    ------
    ValueError
        ``tokens`` not 1-D non-negative integers; ``prompt_length`` out of range; ``key`` of
        an unsupported type; ``context_length`` negative or not an integer.
    """
    tok = _as_tokens(tokens)
    prompt_length = as_int(prompt_length, "prompt_length", min_value=0, max_value=tok.size)
    m = _as_context_length(context_length)
    digest = key_digest(key)
    return _pivots(tok, prompt_length, digest, m, bool(dedup))


def detect(
    tokens,
    prompt_length,
    key,
    *,
    context_length=None,
    score: str = "aaronson",
    dedup: bool = True,
    **score_params,
) -> DetectionResult:
    """Detect the keyed watermark in one token sequence (seed 000 Alg. 8, App. E).

    Parameters
    ----------
    tokens, prompt_length, key, context_length, dedup
        As in :func:`keyed_pivots`.
    score : {"aaronson", "u", "li", "lattimore"}
        The score; ``score_params`` are passed on (``delta`` for ``"li"``, ``epsilon`` for
        ``"lattimore"``, ``method`` for ``"u"``; see
        :func:`specbound.theory.null_log_sf`).

    Returns
    -------
    DetectionResult
        ``score``, ``log_pvalue`` (exact H0 p-value in log space), ``anlppt``,
        ``n_scored``, ``pivots``, ``positions``.  With nothing to score the result has
        ``score = 0``, ``log_pvalue = 0`` and ``anlppt = NaN``.

    Raises
    ------
    ValueError
        Invalid input (see :func:`keyed_pivots`), unknown score or invalid score parameters.
    """
    score, params = parse_score_params(score, score_params)
    U, pos = keyed_pivots(tokens, prompt_length, key, context_length=context_length, dedup=dedup)
    return _result(U, pos, score, params)


def _result(U, pos, score, params) -> DetectionResult:
    M = int(U.size)
    if M == 0:
        return DetectionResult(0.0, 0.0, float("nan"), 0, U, pos, score)
    S = float(token_scores(U, score, **params).sum())
    lp = float(null_log_sf(S, M, score, **params))
    return DetectionResult(S, lp, -lp / M + 0.0, M, U, pos, score)


def detect_many(
    sequences,
    prompt_length,
    key,
    *,
    context_length=None,
    score: str = "aaronson",
    dedup: bool = True,
    **score_params,
) -> DetectionBatch:
    """Batched :func:`detect` for many sequences under one key.

    Parameters
    ----------
    sequences : 2-D array_like of int or sequence of 1-D sequences
        One token sequence per row (ragged allowed).
    prompt_length : int or sequence of int
        Prompt length of every sequence (one value for all, or one per sequence).
    key, context_length, score, dedup, **score_params
        As in :func:`detect`.

    Returns
    -------
    DetectionBatch
        Arrays ``score``, ``log_pvalue``, ``anlppt``, ``n_scored`` (one entry per sequence)
        and lists ``pivots``, ``positions``.  p-values of sequences with the same number of
        scored tokens are computed together (one null law per ``M``).

    Raises
    ------
    ValueError
        ``sequences`` empty or not integer sequences; ``prompt_length`` of the wrong length
        or out of range; as in :func:`detect` otherwise.
    """
    score, params = parse_score_params(score, score_params)
    if isinstance(sequences, np.ndarray) and sequences.ndim == 2:
        rows = list(sequences)
    else:
        try:
            rows = list(sequences)
        except TypeError:
            raise ValueError("sequences: must be a 2-D array or a list of sequences") from None
    if not rows:
        raise ValueError("sequences: must contain at least one sequence")
    toks = [_as_tokens(r, "sequences") for r in rows]
    pl = np.asarray(prompt_length)
    if pl.ndim == 0:
        pls = [pl.item()] * len(toks)
    elif pl.ndim == 1 and pl.size == len(toks):
        pls = list(pl.tolist())
    else:
        raise ValueError(
            f"prompt_length: must be one integer or one per sequence ({len(toks)}), "
            f"got shape {pl.shape}"
        )
    m = _as_context_length(context_length)
    digest = key_digest(key)
    piv, poss = [], []
    for tok, p in zip(toks, pls, strict=True):
        p = as_int(p, "prompt_length", min_value=0, max_value=tok.size)
        U, pos = _pivots(tok, p, digest, m, bool(dedup))
        piv.append(U)
        poss.append(pos)
    n = np.array([u.size for u in piv], dtype=np.int64)
    S = np.array([float(token_scores(u, score, **params).sum()) if u.size else 0.0 for u in piv])
    lp = np.zeros(len(piv))
    has = n > 0
    if has.any():
        lp[has] = null_log_sf(S[has], n[has], score, **params)
    with np.errstate(invalid="ignore", divide="ignore"):
        an = np.where(has, -lp / np.maximum(n, 1) + 0.0, np.nan)
    return DetectionBatch(S, lp, an, n, piv, poss, score)
