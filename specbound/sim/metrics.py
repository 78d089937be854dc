"""Sequence-level metrics of the watermark studies: ROUGE-L and standard errors.

- :func:`lcs_length` and :func:`rouge_l` -- token-level ROUGE-L F1 (Lin 2004), the output
  similarity under drafter substitution of Liu, Wan, Gao & Gündüz (2026), arXiv:2609.21858,
  §6 (a drafter-invariant decoder gives 1 for every pair of drafters);
- :func:`mean_se` -- a mean and its standard error, as a :class:`~specbound.results.Estimate`;
- :func:`cluster_ratio_se` -- a ratio of sums (AATPS = emitted tokens / blocks over
  sequences) with its cluster-robust standard error, as an
  :class:`~specbound.results.Estimate`.

LPPL (log-perplexity) is :func:`specbound.sim.models.log_perplexity`; detection scores are in
:mod:`specbound.sim.detect`.
"""

from __future__ import annotations

import math

import numpy as np

from specbound._validation import as_real_array, asarray_named
from specbound.results import Estimate

__all__ = ["cluster_ratio_se", "lcs_length", "mean_se", "rouge_l"]


#: largest ``len(a) * len(b)`` of :func:`lcs_length` (the dynamic programme's cells)
MAX_LCS_CELLS = 10**9


def _as_seq(x, name: str) -> np.ndarray:
    if x is None or isinstance(x, str | bytes):
        raise ValueError(f"{name}: must be a 1-D sequence of integer token ids, got {x!r}")
    arr = asarray_named(x, name)
    if arr.ndim != 1:
        raise ValueError(f"{name}: must be a 1-D sequence of tokens, got shape {arr.shape}")
    if arr.size and (arr.dtype == np.bool_ or arr.dtype.kind not in "iu"):
        raise ValueError(f"{name}: must be a sequence of integer token ids, got dtype "
                         f"{arr.dtype}")
    return arr


def _as_values(x, name: str) -> np.ndarray:
    arr, _ = as_real_array(x, name)
    arr = arr.reshape(-1)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name}: contains NaN or infinite values")
    return arr


def lcs_length(a, b) -> int:
    """Length of the longest common subsequence of two token sequences.

    Row-by-row dynamic programme, vectorised with the identity
    ``L[i, j] = max_{j' <= j} T[i, j']``, ``T[i, j] = L[i-1, j-1] + 1`` if ``a_i = b_j`` else
    ``L[i-1, j]`` (a match never loses to the running maximum), so each row is one
    ``np.maximum.accumulate``: O(len(a) len(b)) work, O(len(b)) memory.
    """
    a = _as_seq(a, "a")
    b = _as_seq(b, "b")
    if a.size == 0 or b.size == 0:
        return 0
    if a.size * b.size > MAX_LCS_CELLS:
        raise ValueError(f"b: len(a) * len(b) = {a.size * b.size:,} exceeds the limit "
                         f"MAX_LCS_CELLS = {MAX_LCS_CELLS:,} of the O(len(a) len(b)) programme")
    prev = np.zeros(b.size + 1, dtype=np.int64)
    for x in a:
        t = np.where(b == x, prev[:-1] + 1, prev[1:])
        cur = np.empty_like(prev)
        cur[0] = 0
        np.maximum.accumulate(t, out=cur[1:])
        prev = cur
    return int(prev[-1])


def rouge_l(a, b) -> float:
    """Token-level ROUGE-L F1 (Lin 2004): ``2 LCS / (len(a) + len(b))``.

    With recall ``R = LCS/len(b)`` and precision ``P = LCS/len(a)``, the F-measure with
    ``beta = 1`` is ``2PR/(P+R) = 2 LCS/(len(a)+len(b))``, symmetric in ``a`` and ``b``.
    Conventions: two empty sequences score 1 (identical outputs), one empty sequence scores 0.
    """
    a = _as_seq(a, "a")
    b = _as_seq(b, "b")
    if a.size == 0 and b.size == 0:
        return 1.0
    return 2.0 * lcs_length(a, b) / (a.size + b.size)


def mean_se(x) -> Estimate:
    """Mean and standard error ``sd / sqrt(n)`` of a sample, as an ``Estimate``.

    ``stderr`` is NaN for fewer than 2 values, and ``mean`` NaN for none; ``.ci()`` gives the
    normal interval ``mean +- z stderr``.
    """
    x = _as_values(x, "x")
    if x.size == 0:
        return Estimate(float("nan"), float("nan"), 0)
    with np.errstate(over="ignore", invalid="ignore"):
        mean = float(x.mean())
        sd = float(x.std(ddof=1)) if x.size > 1 else 0.0
    if not (math.isfinite(mean) and math.isfinite(sd)):
        raise ValueError("x: values too large: their mean or spread overflows a float")
    if x.size < 2:
        return Estimate(mean, float("nan"), 1)
    return Estimate(mean, float(sd / math.sqrt(x.size)), int(x.size))


def cluster_ratio_se(num, den) -> Estimate:
    """Ratio estimator ``sum(num) / sum(den)`` and its cluster-robust standard error.

    Clusters are sequences (prompts): blocks of one sequence share contexts, so AATPS =
    total emitted tokens / total blocks has the linearised variance
    ``m/(m-1) sum_i (num_i - r den_i)^2 / (sum den)^2`` over the ``m`` clusters.  Returns an
    ``Estimate`` with ``n = m`` (``stderr`` NaN for one cluster).
    """
    num = _as_values(num, "num")
    den = _as_values(den, "den")
    if num.shape != den.shape:
        raise ValueError(f"den: shape mismatch with num: {den.shape} and {num.shape}")
    if num.size == 0 or den.sum() == 0:
        raise ValueError("den: the clusters' denominators must have a non-zero sum")
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        r = float(num.sum() / den.sum())
        m = num.size
        var = (m / (m - 1) * np.sum((num - r * den) ** 2) / den.sum() ** 2) if m > 1 else 0.0
    if not (math.isfinite(r) and math.isfinite(var)):
        raise ValueError("num: values too large: the ratio or its variance overflows a float")
    if m < 2:
        return Estimate(r, float("nan"), int(m))
    return Estimate(r, float(math.sqrt(var)), int(m))
