"""Watermark detection from keyed pivots (Liu, Wan, Gao & Gündüz 2026, arXiv:2609.21858,
§4.1, Alg. 8, App. E).

The keyed generators of this package (``basic_uwm``, ``pfr``, ``mpfr``, ... in
:func:`specbound.sim.speculative_decode`) give token ``v`` in context ``c`` the first
arrival time ``E_{v,1} = -log(prf_uniform(context_label(key, c, window), v, 0))`` and emit
``argmin_v E_{v,1} / P(v)`` (the exponential race / Gumbel-max watermark).  The detector
recovers, at every position ``t`` after the prompt, the pivot

    ``U_t = exp(-E_{w_t,1}) = prf_uniform(context_label(key, tokens[:t], window), w_t, 0)``,

which is U(0, 1) under H0 (text not generated with the key) and concentrates near 1 under
the watermark, and scores the pivots with :mod:`specbound.theory.watermark` (Aaronson's
score with its exact Gamma null; the U-score of Hu & Huang 2024; the scores of Li et al.
2025 and Lattimore 2026).

Repeated contexts reuse the same keyed randomness, so their pivots are not independent; with
``dedup=True`` each (context window, token) pair is scored once (the habit of the
three_bricks detectors), which keeps the H0 law of the pivots exactly i.i.d. U(0, 1) for a
fixed key drawn at random.

Repeated windows skipped by the decoder (``speculative_decode(..., repeats="skip")``, Hu &
Huang 2024's setting) are not scored: with ``repeats="skip"`` only the first occurrence of
every context window is scored, whatever the token (a result decoded that way sets it).

``mse_pseudo`` (He et al. 2026, arXiv:2602.01428) accepts a draft ``x`` at context ``c``
iff ``r(c) <= p(x)/q(x)`` with the keyed coin ``r(c) = prf_uniform(context_label(key2, c,
window), 0, 0)`` of a second key (:func:`acceptance_coins`).  The detector holds both keys,
so it can use the coin as evidence (``coin_threshold=tau``, He et al. 2026's threshold
rule): a position with ``r_t <= tau`` was probably an accepted draft (or a bonus) and is
scored by its pivot under ``key``; a position with ``r_t > tau`` was probably a rejection and
is scored by the pivot of the correction's race under the second key,
``prf_uniform(context_label(key2, c, window), w_t, 1)``, which carries the watermark when the
decoder used the keyed residual (``speculative_decode(..., residual="keyed")``, their dual-key
design; with the plain residual such positions are noise).  Under H0 the coin and the two
pivots are independent uniforms (distinct keys or arrival columns), so the chosen pivots
are still i.i.d. U(0, 1) and the null law of every score is exact.

Every function accepts a :class:`~specbound.sim.decode.DecodeResult` (or any result with
``tokens``, ``prompt_length`` and ``watermark``) in place of the token sequence: the prompt
length and the watermark window are then taken from it, and an explicit ``window`` that
differs from the result's raises ``ValueError`` (decoding with one window and detecting with
another cannot happen silently).  With a result the key is the second positional argument:
``detect(result, key)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from specbound._validation import INT64_MAX, as_bool, as_choice, as_int, as_real, asarray_named
from specbound.results import ResultBatch
from specbound.sim import _compiled_detect
from specbound.sim.prf import PrefixLabels, as_window, digest_label, key_digest, prf_uniform_numpy
from specbound.theory.watermark import (
    LLR_SCORES,
    null_log_sf,
    parse_score_params,
    token_scores,
)

__all__ = ["DetectionBatch", "DetectionResult", "Pivots", "acceptance_coins", "detect",
           "detect_many", "keyed_pivots"]

#: the repeated-context modes of the decoders (``speculative_decode(repeats=...)``)
_REPEATS = ("reuse", "mask", "skip")
_ACCEPTANCE_PREFIX = b"mse_pseudo-acceptance:"


def acceptance_digest(key):
    """Digest of ``mse_pseudo``'s second key, the key of its pseudorandom acceptance coin
    (He et al. 2026, arXiv:2602.01428): ``key_digest(b"mse_pseudo-acceptance:" +
    key_digest(key))``, independent of the token clocks of ``key``."""
    return key_digest(_ACCEPTANCE_PREFIX + key_digest(key))


class _FromResult:
    """Default of ``window``: the result's window, or None (whole prefix) for plain tokens."""

    def __repr__(self) -> str:
        return "<the result's window; None for token sequences>"


_FROM_RESULT = _FromResult()


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


@dataclass(frozen=True, eq=False)
class DetectionBatch(ResultBatch):
    """Result of :func:`detect_many`: one entry per sequence (the batched-result pattern).

    ``len(batch)`` sequences; ``batch[i]`` is the :class:`DetectionResult` of sequence ``i``;
    :meth:`to_frame` gives a DataFrame with columns ``score``, ``log_pvalue``, ``anlppt``,
    ``n_scored``.

    Attributes
    ----------
    score, log_pvalue, anlppt : ndarray of float64
    n_scored : ndarray of int64
    pivots, positions : list of ndarray
        Per sequence, the scored pivots and their token indices.
    score_name : str
    """

    score: np.ndarray
    log_pvalue: np.ndarray
    anlppt: np.ndarray
    n_scored: np.ndarray
    pivots: list
    positions: list
    score_name: str

    _item_fields = ("score", "log_pvalue", "anlppt", "n_scored", "pivots", "positions")
    _item_type = DetectionResult
    _frame_fields = ("score", "log_pvalue", "anlppt", "n_scored")


@dataclass(frozen=True, eq=False)
class Pivots(ResultBatch):
    """Result of :func:`keyed_pivots`: the scored pivots and their token indices.

    ``len(p)`` is the number of scored positions; :meth:`to_frame` gives the columns
    ``pivots`` and ``positions``.

    Attributes
    ----------
    pivots : ndarray of float64
        Pivots ``U_t`` in (0, 1), in position order.
    positions : ndarray of int64
        The scored token indices ``t``.
    """

    pivots: np.ndarray
    positions: np.ndarray

    _item_fields = ("pivots", "positions")

    @property
    def n_scored(self) -> int:
        """Number of scored positions."""
        return int(self.pivots.size)


# ------------------------------------------------------------------------- validation


def _as_tokens(tokens, name: str = "tokens") -> np.ndarray:
    arr = asarray_named(tokens, name)
    if arr.ndim != 1:
        raise ValueError(f"{name}: must be a 1-D sequence of token ids, got shape {arr.shape}")
    if arr.size and arr.dtype.kind not in "iu":
        if arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)):
            if np.any(np.abs(arr) >= 2.0**63):
                raise ValueError(f"{name}: token ids must be below 2**63 (int64)")
            arr = arr.astype(np.int64)
        else:
            raise ValueError(f"{name}: must contain integer token ids, got dtype {arr.dtype}")
    if arr.dtype == np.uint64 and arr.size and int(arr.max()) > INT64_MAX:
        raise ValueError(f"{name}: token ids must be below 2**63 (int64)")
    arr = arr.astype(np.int64)
    if np.any(arr < 0):
        raise ValueError(f"{name}: token ids must be non-negative")
    return arr


def _is_result(x) -> bool:
    return all(hasattr(x, a) for a in ("tokens", "prompt_length", "watermark"))


def _resolve_repeats(res, repeats):
    """The repeated-context mode: a result's unless given (they must then agree)."""
    mine = getattr(getattr(res, "watermark", None), "repeats", None) or "reuse"
    if repeats is _FROM_RESULT:
        return mine if res is not None else "reuse"
    repeats = as_choice(repeats, "repeats", _REPEATS)
    if res is not None and (repeats == "skip") != (mine == "skip"):
        raise ValueError(f"repeats: {repeats!r} differs from the mode {mine!r} the sequence "
                         f"was decoded with (omit repeats to use the result's)")
    return repeats


def _as_threshold(coin_threshold):
    if coin_threshold is None:
        return None
    return as_real(coin_threshold, "coin_threshold", low=0.0, high=1.0, low_open=True)


def _resolve(tokens, prompt_length, key, window, name="tokens"):
    """``(tokens array, prompt_length, key, window)`` for a sequence or a decoding result."""
    if _is_result(tokens):
        res = tokens
        if key is None:  # detect(result, key): the key is the second positional argument
            key, prompt_length = prompt_length, None
        if prompt_length is not None and as_int(prompt_length, "prompt_length") != int(
            res.prompt_length
        ):
            raise ValueError(
                f"prompt_length: {prompt_length!r} conflicts with the result's prompt length "
                f"{res.prompt_length}"
            )
        wm_window = res.watermark.window
        if window is _FROM_RESULT:
            window = wm_window
        elif as_window(window) != wm_window:
            raise ValueError(
                f"window: {window!r} differs from the window {wm_window!r} the sequence was "
                f"decoded with (omit window to use the result's)"
            )
        tok = _as_tokens(res.tokens, name)
        prompt_length = int(res.prompt_length)
    else:
        tok = _as_tokens(tokens, name)
        if prompt_length is None:
            raise ValueError("prompt_length: required for a token sequence (an integer >= 0)")
        if window is _FROM_RESULT:
            window = None
    if key is None:
        raise ValueError("key: the detection key is required (int, str or bytes)")
    prompt_length = as_int(prompt_length, "prompt_length", min_value=0, max_value=tok.size)
    return tok, prompt_length, key, as_window(window)


def _labels(tok: np.ndarray, prompt_length: int, digests, window, dedup: bool, skip: bool):
    """Scored positions and, per digest, their context labels (validated input)."""
    labels = [[] for _ in digests]
    positions = []
    if window is None:
        # whole-prefix labels: keep the hash state along the sequence (O(1) per position)
        prefixes = [PrefixLabels(d, tok[:prompt_length]) for d in digests]
        for t in range(prompt_length, tok.size):
            for lab, prefix in zip(labels, prefixes, strict=True):
                lab.append(prefix.label())
                prefix.extend(tok[t:t + 1])
            positions.append(t)
    else:
        seen = set()
        for t in range(prompt_length, tok.size):
            ctx = tok[max(0, t - window):t]
            if skip:  # a repeated window was decoded without the watermark
                key = ctx.tobytes()
                if key in seen:
                    continue
                seen.add(key)
            elif dedup:
                key = (ctx.tobytes(), int(tok[t]))
                if key in seen:
                    continue
                seen.add(key)
            for lab, d in zip(labels, digests, strict=True):
                lab.append(digest_label(d, ctx))
            positions.append(t)
    return (np.asarray(positions, dtype=np.int64),
            [np.asarray(lab, dtype=np.uint64) for lab in labels])


def _pivots(tok: np.ndarray, prompt_length: int, digest, window, dedup: bool,
            skip: bool = False, coin_threshold=None) -> Pivots:
    """Keyed pivots of positions prompt_length..len-1 (validated input)."""
    digests = [digest] if coin_threshold is None else [digest, acceptance_digest(digest)]
    positions, labels = _labels(tok, prompt_length, digests, window, dedup, skip)
    if positions.size == 0:
        return Pivots(np.zeros(0), positions)
    U = prf_uniform_numpy(labels[0], tok[positions], 0)
    if coin_threshold is not None:
        # He et al. 2026: a high coin means a probable rejection, whose correction raced
        # on the second key's clocks (arrival column 1)
        second = prf_uniform_numpy(labels[1], tok[positions], 1)
        U = np.where(prf_uniform_numpy(labels[1], 0, 0) > coin_threshold, second, U)
    return Pivots(U, positions)


# ------------------------------------------------------------------------- public API


def keyed_pivots(tokens, prompt_length=None, key=None, *, window=_FROM_RESULT,
                 dedup=True, repeats=_FROM_RESULT, coin_threshold=None) -> Pivots:
    """Per-position keyed pivots ``U_t = exp(-E_{w_t,1})`` of a token sequence.

    Parameters
    ----------
    tokens : sequence of int, or a DecodeResult
        The full sequence (prompt followed by the generated tokens), as
        ``speculative_decode(...).tokens`` returns it; or the result itself (then call
        ``keyed_pivots(result, key)``).
    prompt_length : int
        Number of leading prompt tokens (not scored), ``0 <= prompt_length <= len(tokens)``;
        taken from a result.
    key : int, str or bytes
        The secret key.
    window : int >= 0 or None
        Watermark context window: the label of position ``t`` hashes ``tokens[t-window:t]``
        (fewer at the start; None: the whole prefix).  Must match the generator's window;
        default: a result's window, None for a token sequence.
    dedup : bool
        Score each (context window, token) pair once (first occurrence).  Has no effect for
        ``window=None``, where every prefix is distinct.
    repeats : {"reuse", "mask", "skip"}
        The decoder's handling of repeated windows (``speculative_decode(repeats=...)``);
        default: a result's, ``"reuse"`` for a token sequence.  ``"skip"`` scores only the
        first occurrence of every window (the decoder did not watermark the others);
        ``"reuse"`` and ``"mask"`` follow ``dedup``.  A value whose skipping differs from a
        result's raises.
    coin_threshold : float in (0, 1] or None
        He et al. 2026's use of ``mse_pseudo``'s keyed acceptance coin (module docstring):
        positions whose coin ``r_t`` exceeds it are scored by the second key's pivot (the
        keyed residual's race).  None (default): ignore the coin.

    Returns
    -------
    Pivots
        ``pivots`` in (0, 1) and the scored token indices ``positions``.

    Raises
    ------
    ValueError
        ``tokens`` not 1-D non-negative integers; ``prompt_length`` missing or out of range;
        ``key`` missing or of an unsupported type; ``window`` negative, not an integer, or
        different from a result's; ``dedup`` not a bool; ``repeats`` unknown or conflicting
        with a result's; ``coin_threshold`` outside (0, 1].
    """
    res = tokens if _is_result(tokens) else None
    tok, prompt_length, key, window = _resolve(tokens, prompt_length, key, window)
    dedup = as_bool(dedup, "dedup")
    skip = _resolve_repeats(res, repeats) == "skip"
    return _pivots(tok, prompt_length, key_digest(key), window, dedup, skip,
                   _as_threshold(coin_threshold))


def acceptance_coins(tokens, prompt_length=None, key=None, *, window=_FROM_RESULT):
    """``mse_pseudo``'s keyed acceptance coins ``r_t`` at every position after the prompt.

    ``r_t = prf_uniform(context_label(acceptance_digest(key), tokens[:t], window), 0, 0)``:
    the coin the decoder compared with ``p(x)/q(x)`` when it verified position ``t`` (He et
    al. 2026, arXiv:2602.01428, pseudorandom acceptance).  Arguments as in
    :func:`keyed_pivots`; returns a float64 array of length ``len(tokens) - prompt_length``.
    """
    tok, prompt_length, key, window = _resolve(tokens, prompt_length, key, window)
    _, (labels,) = _labels(tok, prompt_length, [acceptance_digest(key)], window, False, False)
    return prf_uniform_numpy(labels, 0, 0) if labels.size else np.zeros(0)


def detect(
    tokens,
    prompt_length=None,
    key=None,
    *,
    window=_FROM_RESULT,
    score: str = "aaronson",
    dedup: bool = True,
    repeats=_FROM_RESULT,
    coin_threshold=None,
    **score_params,
) -> DetectionResult:
    """Detect the keyed watermark in one token sequence (Liu et al. 2026, Alg. 8, App. E).

    Call as ``detect(tokens, prompt_length, key, window=...)`` or ``detect(result, key)``
    with a :class:`~specbound.sim.decode.DecodeResult` (prompt length and window from it).

    Parameters
    ----------
    tokens, prompt_length, key, window, dedup, repeats, coin_threshold
        As in :func:`keyed_pivots` (``repeats`` defaults to the result's; ``coin_threshold``
        uses ``mse_pseudo``'s acceptance coin, He et al. 2026).
    score : {"aaronson", "u", "li", "lattimore", "llr", "robust_llr"}
        The score; ``score_params`` are passed on (``delta`` for ``"li"``, ``epsilon`` for
        ``"lattimore"``, ``method`` for ``"u"``; see
        :func:`specbound.theory.null_log_sf`).  The likelihood-ratio scores ``"llr"`` and
        ``"robust_llr"`` (Hu et al. 2023, arXiv:2310.10669, §5.2-5.3; Hu & Huang 2024,
        arXiv:2410.20418) also need the **model**: ``model=`` the target (any model of
        :mod:`specbound.sim.models`), whose next-token law at every scored position enters
        the score; their options are ``reweight`` (``"delta"``, default, or ``"gamma"``:
        the decoder's ``reweight=``), ``radius`` (``robust_llr``: the total-variation
        radius, or a sequence of radii), ``null`` (``"auto"``, default: the closed-form
        method of :func:`specbound.theory.llr_log_pvalue`; ``"montecarlo"``: ``n_null``
        fresh keys, default 999, with ``seed``) -- see :mod:`specbound.sim._detect_llr`.
        They score every context window once (the first occurrence), because the score of
        a position depends on the keyed uniforms of every token of its window.

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
    if isinstance(score, str) and score in LLR_SCORES:
        if coin_threshold is not None:
            raise ValueError("coin_threshold: not used by the likelihood-ratio scores")
        from specbound.sim._detect_llr import detect_llr

        tok, prompt_length, key, window = _resolve(tokens, prompt_length, key, window)
        as_bool(dedup, "dedup")
        res = tokens if _is_result(tokens) else None
        _resolve_repeats(res, repeats)
        positions, (labels,) = _labels(tok, prompt_length, [key_digest(key)], window,
                                       False, True)
        S, lp, an, M, pivots = detect_llr(tok, positions, labels, score, score_params)
        return DetectionResult(S, lp, an, M, pivots, positions, score)
    if "model" in score_params:
        raise ValueError(f"model: only the likelihood-ratio scores {LLR_SCORES} use the "
                         f"model (score={score!r} needs the key and the tokens alone)")
    score, params = parse_score_params(score, score_params)
    piv = keyed_pivots(tokens, prompt_length, key, window=window, dedup=dedup,
                       repeats=repeats, coin_threshold=coin_threshold)
    return _result(piv.pivots, piv.positions, score, params)


def _result(U, pos, score, params) -> DetectionResult:
    M = int(U.size)
    if M == 0:
        return DetectionResult(0.0, 0.0, float("nan"), 0, U, pos, score)
    S = float(token_scores(U, score, **params).sum())
    lp = float(null_log_sf(S, M, score, **params))
    return DetectionResult(S, lp, -lp / M + 0.0, M, U, pos, score)


def detect_many(
    sequences,
    prompt_length=None,
    key=None,
    *,
    window=_FROM_RESULT,
    score: str = "aaronson",
    dedup: bool = True,
    repeats=_FROM_RESULT,
    coin_threshold=None,
    **score_params,
) -> DetectionBatch:
    """Batched :func:`detect` for many sequences under one key.

    Parameters
    ----------
    sequences : 2-D array_like of int, sequence of 1-D sequences, or sequence of results
        One token sequence per row (ragged allowed), or decoding results (then call
        ``detect_many(results, key)``: prompt lengths and the window come from the results,
        which must share one window).
    prompt_length : int or sequence of int
        Prompt length of every sequence (one value for all, or one per sequence).
    key, window, score, dedup, repeats, coin_threshold, **score_params
        As in :func:`detect` (results must share one ``repeats`` mode).

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
        or out of range; results with different windows, or a ``window`` that differs from
        theirs; as in :func:`detect` otherwise.
    """
    if isinstance(score, str) and score in LLR_SCORES:
        # per sequence (each needs its own model forward)
        try:
            seqs = list(sequences)
        except TypeError:
            raise ValueError("sequences: must be a 2-D array or a list of sequences") from None
        if not seqs:
            raise ValueError("sequences: must contain at least one sequence")
        results = _llr_many(seqs, prompt_length, key, window, score, dedup, repeats,
                            coin_threshold, score_params)
        return DetectionBatch(
            np.array([r.score for r in results]), np.array([r.log_pvalue for r in results]),
            np.array([r.anlppt for r in results]),
            np.array([r.n_scored for r in results], dtype=np.int64),
            [r.pivots for r in results], [r.positions for r in results], score)
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
    dedup = as_bool(dedup, "dedup")
    coin_threshold = _as_threshold(coin_threshold)
    skips = None
    if all(_is_result(r) for r in rows):
        if key is None:
            key, prompt_length = prompt_length, None
        windows = {r.watermark.window for r in rows}
        if len(windows) > 1:
            raise ValueError(f"sequences: results decoded with different windows {windows}")
        if prompt_length is not None:
            raise ValueError("prompt_length: taken from the results (do not pass it)")
        resolved = [_resolve(r, None, key, window, "sequences") for r in rows]
        skips = {_resolve_repeats(r, repeats) == "skip" for r in rows}
        if len(skips) > 1:
            raise ValueError("sequences: results decoded with different repeats modes")
    elif any(_is_result(r) for r in rows):
        raise ValueError("sequences: mixes decoding results and token sequences")
    else:
        toks = [_as_tokens(r, "sequences") for r in rows]
        if prompt_length is None:
            raise ValueError("prompt_length: required for token sequences")
        pl = asarray_named(prompt_length, "prompt_length")
        if pl.ndim == 0:
            pls = [pl.item()] * len(toks)
        elif pl.ndim == 1 and pl.size == len(toks):
            pls = list(pl.tolist())
        else:
            raise ValueError(
                f"prompt_length: must be one integer or one per sequence ({len(toks)}), "
                f"got shape {pl.shape}"
            )
        w = None if window is _FROM_RESULT else as_window(window)
        if key is None:
            raise ValueError("key: the detection key is required (int, str or bytes)")
        resolved = [
            (tok, as_int(p, "prompt_length", min_value=0, max_value=tok.size), key, w)
            for tok, p in zip(toks, pls, strict=True)
        ]
    skip = skips.pop() if skips else _resolve_repeats(None, repeats) == "skip"
    digest = key_digest(resolved[0][2])
    if not skip and coin_threshold is None:
        # one compiled call over every sequence (the same pivots as _pivots, one by one)
        piv, poss = _compiled_detect.pivots_many(
            [r[0] for r in resolved], [r[1] for r in resolved], digest, resolved[0][3], dedup)
    else:
        piv, poss = [], []
        for tok, p, _, w in resolved:
            pv = _pivots(tok, p, digest, w, dedup, skip, coin_threshold)
            piv.append(pv.pivots)
            poss.append(pv.positions)
    n = np.array([u.size for u in piv], dtype=np.int64)
    S = np.array([float(token_scores(u, score, **params).sum()) if u.size else 0.0 for u in piv])
    lp = np.zeros(len(piv))
    has = n > 0
    if has.any():
        lp[has] = null_log_sf(S[has], n[has], score, **params)
    with np.errstate(invalid="ignore", divide="ignore"):
        an = np.where(has, -lp / np.maximum(n, 1) + 0.0, np.nan)
    return DetectionBatch(S, lp, an, n, piv, poss, score)


def _llr_many(seqs, prompt_length, key, window, score, dedup, repeats, coin_threshold,
              score_params):
    """:func:`detect` of every sequence with a likelihood-ratio score."""
    if all(_is_result(r) for r in seqs):
        if key is None:
            key, prompt_length = prompt_length, None
        if prompt_length is not None:
            raise ValueError("prompt_length: taken from the results (do not pass it)")
        pls = [None] * len(seqs)
    else:
        if prompt_length is None:
            raise ValueError("prompt_length: required for token sequences")
        pl = asarray_named(prompt_length, "prompt_length")
        if pl.ndim == 0:
            pls = [pl.item()] * len(seqs)
        elif pl.ndim == 1 and pl.size == len(seqs):
            pls = list(pl.tolist())
        else:
            raise ValueError(f"prompt_length: must be one integer or one per sequence "
                             f"({len(seqs)}), got shape {pl.shape}")
    return [detect(s, p, key, window=window, score=score, dedup=dedup, repeats=repeats,
                   coin_threshold=coin_threshold, **score_params)
            for s, p in zip(seqs, pls, strict=True)]
