"""Sequence-level metrics of the watermark studies: ROUGE-L and standard errors.

- :func:`lcs_length` and :func:`rouge_l` -- token-level ROUGE-L F1 (Lin 2004), the output
  similarity under drafter substitution of Liu, Wan, Gao & Gündüz (2026), arXiv:2609.21858,
  §6 (a drafter-invariant decoder gives 1 for every pair of drafters);
- :func:`mean_se` -- a mean and its standard error, as a :class:`~specbound.results.Estimate`;
- :func:`cluster_ratio_se` -- a ratio of sums (AATPS = emitted tokens / blocks over
  sequences) with its cluster-robust standard error, as an
  :class:`~specbound.results.Estimate`; :func:`ratio_influence` -- its per-cluster influence
  values;
- :func:`paired_ratio_diff` and :func:`paired_mean_diff` -- the difference of two such
  estimates on the same clusters (prompts) with its paired standard error, as a
  :class:`PairedDifference`; :func:`z_score` -- a difference in units of its standard error.

LPPL (log-perplexity) is :func:`specbound.sim.models.log_perplexity`; detection scores are in
:mod:`specbound.sim.detect`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from specbound._validation import as_real_array, asarray_named
from specbound.results import Estimate

__all__ = [
    "PairedDifference",
    "cluster_ratio_se",
    "lcs_length",
    "mean_se",
    "paired_mean_diff",
    "paired_ratio_diff",
    "ratio_influence",
    "rouge_l",
    "z_score",
]


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
    ``m/(m-1) sum_i (num_i - r den_i)^2 / (sum den)^2`` over the ``m`` clusters, computed as
    ``sum_i psi_i^2 / (m (m-1))`` from the influence values of :func:`ratio_influence`.
    Returns an ``Estimate`` with ``n = m`` (``stderr`` NaN for one cluster).
    """
    num, den = _ratio_pair(num, den, "num", "den")
    r, psi = _influence(num, den)
    m = psi.size
    if m < 2:
        return Estimate(r, float("nan"), int(m))
    with np.errstate(over="ignore"):
        se = float(np.sqrt(np.sum(psi**2) / (m - 1) / m))
    if not math.isfinite(se):
        raise ValueError("num: values too large: the ratio's variance overflows a float")
    return Estimate(r, se, int(m))


def _ratio_pair(num, den, num_name: str, den_name: str) -> tuple[np.ndarray, np.ndarray]:
    num = _as_values(num, num_name)
    den = _as_values(den, den_name)
    if num.shape != den.shape:
        raise ValueError(f"{den_name}: shape mismatch with {num_name}: {den.shape} and "
                         f"{num.shape}")
    if num.size == 0 or den.sum() == 0:
        raise ValueError(f"{den_name}: the clusters' denominators must have a non-zero sum")
    return num, den


def _influence(num: np.ndarray, den: np.ndarray) -> tuple[float, np.ndarray]:
    with np.errstate(over="ignore", invalid="ignore"):
        r = float(num.sum() / den.sum())
        psi = (num - r * den) / den.mean()
    if not (math.isfinite(r) and np.all(np.isfinite(psi))):
        raise ValueError("num: values too large: the ratio or its influence overflows a float")
    return r, psi


def ratio_influence(num, den) -> np.ndarray:
    """Per-cluster influence values of the ratio ``r = sum(num) / sum(den)``.

    ``psi_i = (num_i - r den_i) / mean(den)``: the linearisation ``r_hat - r ~ mean(psi)``
    (delta method), so ``sum(psi) = 0`` and ``sd(psi) / sqrt(m)`` over the ``m`` clusters is
    the standard error of :func:`cluster_ratio_se`.  Two ratios measured on the same clusters
    are compared through the difference of their influence values
    (:func:`paired_ratio_diff`).
    """
    num, den = _ratio_pair(num, den, "num", "den")
    return _influence(num, den)[1]


@dataclass(frozen=True)
class PairedDifference:
    """The difference ``value_a - value_b`` of two estimates on the same clusters (prompts).

    Attributes
    ----------
    value_a, value_b : float
        The two estimates.
    diff : float
        ``value_a - value_b``.
    diff_se : float
        Its paired standard error (NaN for fewer than two clusters).
    n : int
        Number of clusters paired.
    """

    value_a: float
    value_b: float
    diff: float
    diff_se: float
    n: int

    @property
    def z(self) -> float:
        """``diff / diff_se`` (:func:`z_score`)."""
        return z_score(self.diff, self.diff_se)


def paired_ratio_diff(num_a, den_a, num_b, den_b) -> PairedDifference:
    """Difference of two ratios of sums on the same clusters, with its paired standard error.

    ``value_a = sum(num_a) / sum(den_a)`` and likewise ``value_b`` (e.g. the AATPS of two
    decoders on the same prompts); the per-cluster difference of the influence values
    (:func:`ratio_influence`) ``d_i = psi_a,i - psi_b,i`` gives the delta-method standard
    error ``sd(d) / sqrt(m)`` of ``value_a - value_b``, which keeps the correlation of the
    two estimates through their shared clusters (docs/mathematics.md §5.5).
    """
    num_a, den_a = _ratio_pair(num_a, den_a, "num_a", "den_a")
    num_b, den_b = _ratio_pair(num_b, den_b, "num_b", "den_b")
    if num_a.shape != num_b.shape:
        raise ValueError(f"num_b: the two ratios must be on the same clusters, got shapes "
                         f"{num_b.shape} and {num_a.shape}")
    ra, pa = _influence(num_a, den_a)
    rb, pb = _influence(num_b, den_b)
    d = pa - pb
    m = d.size
    se = float(np.sqrt(np.sum((d - d.mean()) ** 2) / (m - 1) / m)) if m > 1 else float("nan")
    return PairedDifference(ra, rb, ra - rb, se, int(m))


def paired_mean_diff(a, b) -> PairedDifference:
    """Difference of the means of two per-cluster values, paired by cluster.

    ``value_a = mean(a)``, ``value_b = mean(b)``; ``diff`` and ``diff_se`` are
    :func:`mean_se` of ``a - b`` (NaN for no clusters; ``diff_se`` NaN for one).
    """
    a = _as_values(a, "a")
    b = _as_values(b, "b")
    if a.shape != b.shape:
        raise ValueError(f"b: the two values must be on the same clusters, got shapes "
                         f"{b.shape} and {a.shape}")
    est = mean_se(a - b)
    if est.n == 0:
        return PairedDifference(float("nan"), float("nan"), float("nan"), float("nan"), 0)
    return PairedDifference(float(a.mean()), float(b.mean()), est.mean, est.stderr, est.n)


def z_score(diff: float, se: float) -> float:
    """``diff / se``: 0 for a zero difference with zero error, ``±inf`` for a non-zero
    difference with zero error, NaN where either is unknown (NaN or infinite)."""
    diff = float(diff)
    se = float(se)
    if not (math.isfinite(diff) and math.isfinite(se)):
        return float("nan")
    if se < 0:
        raise ValueError(f"se: a standard error is not negative, got {se!r}")
    if se == 0.0:
        return 0.0 if diff == 0.0 else math.copysign(math.inf, diff)
    return diff / se
