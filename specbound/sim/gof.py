"""Goodness-of-fit tests for sampled token counts, with a stated false-failure rate.

A distribution test in this package compares the counts of emitted tokens with the
probability vector they should follow (``H0: counts ~ Multinomial(n, probs)``) and fails when
the p-value is below a threshold ``alpha``.  Under ``H0`` the p-value is (super-)uniform, so
**one** comparison fails by chance with probability at most ``alpha``: ``alpha`` *is* that
comparison's false-failure rate.  A test that makes ``m`` comparisons (pairs, schemes, B
values, ...) states one overall false-failure rate ``r`` (e.g. ``1e-4``) and uses the
Bonferroni threshold ``alpha = r / m`` for each comparison (:func:`bonferroni_alpha`); by the
union bound the whole test then fails by chance with probability at most ``r``.  With a fixed
seed a test is deterministic; the rate is the chance that an arbitrary seed would fail.

Two tests are provided:

- :func:`chisquare_gof`: Pearson's chi-square with pooling of cells whose expected count is
  small (so the chi-square approximation holds);
- :func:`multinomial_exact_gof`: the exact multinomial test (sum of the probabilities of all
  outcomes no more likely than the observed one), for tiny vocabularies and sample sizes;

and :func:`gof_test` chooses between them.  Cells whose probability is exactly 0 are
removed; a positive count in such a cell is an impossible outcome under ``H0`` and gives
``pvalue = 0.0`` (``method="impossible"``) whatever the other counts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special, stats

from specbound._validation import (
    as_int,
    as_int_array,
    as_prob,
    as_real,
    asarray_named,
    check_alloc,
)

__all__ = [
    "EXACT_AUTO_OUTCOMES",
    "EXACT_MAX_OUTCOMES",
    "MAX_TOTAL_COUNT",
    "GofResult",
    "bonferroni_alpha",
    "chisquare_gof",
    "counts_from_samples",
    "gof_test",
    "multinomial_exact_gof",
]

#: largest number of outcomes :func:`multinomial_exact_gof` enumerates (else ValueError)
EXACT_MAX_OUTCOMES = 2_000_000
#: :func:`gof_test` uses the exact test when it needs at most this many outcomes
EXACT_AUTO_OUTCOMES = 100_000
#: relative tolerance when comparing outcome probabilities with the observed one (ties)
_TIE_RTOL = 1e-7
#: largest total number of observations (so that sums of counts never wrap in int64)
MAX_TOTAL_COUNT = 2**62


@dataclass(frozen=True)
class GofResult:
    """Result of a goodness-of-fit test of counts against a probability vector.

    Attributes
    ----------
    statistic : float
        Pearson's ``X^2`` (chi-square), the probability of the observed outcome (exact
        test), or ``inf`` (impossible outcome observed).
    dof : int or None
        Degrees of freedom of the chi-square reference law (cells after pooling minus 1);
        ``None`` for the exact and impossible cases.
    pvalue : float
        Probability under ``H0`` of a result at least as extreme as the observed one.
    method : str
        ``"chisquare"``, ``"exact"`` or ``"impossible"``.
    n : int
        Number of observations (sum of the counts).
    n_cells : int
        Number of cells used by the test (after removing zero-probability cells and pooling).
    n_pooled : int
        Number of original cells that were merged into pooled cells (0 if none).
    alpha : float or None
        Threshold the caller asked for (see :attr:`rejected`).
    note : str
        Human-readable remark (pooling done, impossible cells, no degrees of freedom, ...).
    """

    statistic: float
    dof: int | None
    pvalue: float
    method: str
    n: int
    n_cells: int
    n_pooled: int = 0
    alpha: float | None = None
    note: str = ""

    @property
    def rejected(self) -> bool | None:
        """``pvalue < alpha``, or ``None`` when no ``alpha`` was given."""
        if self.alpha is None:
            return None
        return bool(self.pvalue < self.alpha)


# ---------------------------------------------------------------------------- validation


def _as_counts(counts, name: str = "counts") -> np.ndarray:
    """Non-negative integer counts whose total fits (no int64 wrap-around).

    Unsigned or float counts above ``2**63 - 1`` and totals above :data:`MAX_TOTAL_COUNT`
    (``2**62``) are refused, so ``n`` and the expected counts are always exact.
    """
    arr = (asarray_named(counts, name) if not isinstance(counts, str | bytes)
           else np.asarray([counts]))
    if arr.dtype == np.bool_ or arr.dtype.kind not in "iuf":
        raise ValueError(f"{name}: must be a 1-D array of non-negative integer counts")
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name}: must be a non-empty 1-D array, got shape {arr.shape}")
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr)):
            raise ValueError(f"{name}: must contain integer counts (got non-integral values)")
    if np.any(arr < 0):
        raise ValueError(f"{name}: contains negative counts")
    out = as_int_array(arr, name, min_value=0, max_value=MAX_TOTAL_COUNT)
    if float(np.sum(out, dtype=np.float64)) > MAX_TOTAL_COUNT:  # before an int64 sum can wrap
        raise ValueError(
            f"{name}: the total number of observations exceeds {MAX_TOTAL_COUNT} (2**62); "
            "counts this large would wrap around in int64"
        )
    if out.sum() == 0:
        raise ValueError(f"{name}: must contain at least one observation (all counts are 0)")
    return out


def _prepare(counts, probs, normalize):
    c = _as_counts(counts)
    p = as_prob(probs, "probs", normalize=normalize, ndim=(1,))
    if p.shape[0] != c.shape[0]:
        raise ValueError(
            f"counts: shape mismatch with probs: {c.shape[0]} cells and {p.shape[0]} "
            "probabilities"
        )
    p = p / p.sum()
    return c, p


def _impossible(c, p, alpha):
    bad = np.flatnonzero((p == 0) & (c > 0))
    if bad.size == 0:
        return None
    shown = ", ".join(str(int(i)) for i in bad[:10]) + (", ..." if bad.size > 10 else "")
    return GofResult(
        statistic=math.inf,
        dof=None,
        pvalue=0.0,
        method="impossible",
        n=int(c.sum()),
        n_cells=int(np.count_nonzero(p > 0)),
        alpha=alpha,
        note=f"impossible outcome: positive counts in zero-probability cells [{shown}]",
    )


def _as_alpha(alpha):
    if alpha is None:
        return None
    return as_real(alpha, "alpha", low=0.0, high=1.0, low_open=True, high_open=True)


def _n_outcomes(n: int, k: int, cap: int) -> int:
    """Number of outcomes of Multinomial(n, k cells), ``C(n + k - 1, k - 1)``, or ``cap + 1``
    when it exceeds ``cap`` (decided from ``log C`` first: the exact binomial of a large
    ``n`` and many cells has millions of digits and would take minutes)."""
    log_c = special.gammaln(n + k) - special.gammaln(k) - special.gammaln(n + 1.0)
    if log_c > math.log(cap) + 1.0:
        return cap + 1
    return math.comb(n + k - 1, k - 1)


# ---------------------------------------------------------------------------- public tests


def bonferroni_alpha(total_rate, n_tests) -> float:
    """Per-comparison threshold for an overall false-failure rate: ``total_rate / n_tests``.

    Parameters
    ----------
    total_rate : float in (0, 1)
        Probability, under the null hypotheses, that *any* of the comparisons fails.
    n_tests : int >= 1
        Number of comparisons made by the test.

    Returns
    -------
    float
        ``alpha`` such that ``n_tests`` comparisons at level ``alpha`` fail together with
        probability at most ``total_rate`` (union bound; no independence needed).
    """
    r = as_real(total_rate, "total_rate", low=0.0, high=1.0, low_open=True, high_open=True)
    m = as_int(n_tests, "n_tests", min_value=1, max_value=2**63 - 1)
    return r / m


def counts_from_samples(samples, n_cells) -> np.ndarray:
    """Counts of integer samples in ``0..n_cells-1`` (``np.bincount`` with validation).

    ``n_cells`` whose count array would exceed the package's memory limit is refused up
    front (``ValueError`` naming ``n_cells`` and the memory it would need); token ids that do
    not fit in int64 are refused instead of wrapping around.
    """
    k = as_int(n_cells, "n_cells", min_value=1)
    check_alloc("n_cells", k, 8, what="one int64 count per cell")
    s = (asarray_named(samples, "samples") if not isinstance(samples, str | bytes)
         else np.asarray([samples]))
    if s.size and (s.dtype == np.bool_ or s.dtype.kind not in "iu"):
        raise ValueError("samples: must be an array of integer token ids")
    if s.size and s.dtype.kind == "u" and int(s.max()) >= k:
        raise ValueError(f"samples: token ids must lie in [0, {k - 1}]")
    s = s.reshape(-1).astype(np.int64)
    if s.size and (s.min() < 0 or s.max() >= k):
        raise ValueError(f"samples: token ids must lie in [0, {k - 1}]")
    return np.bincount(s, minlength=k).astype(np.int64)


def chisquare_gof(counts, probs, *, min_expected=5.0, normalize=False, alpha=None) -> GofResult:
    """Pearson chi-square goodness-of-fit test with pooling of small expected cells.

    Tests ``H0: counts ~ Multinomial(n, probs)`` with ``X^2 = sum (O - E)^2 / E`` referred to
    a chi-square law with ``(cells after pooling) - 1`` degrees of freedom.

    Pooling: cells with probability 0 are removed (a positive count in one of them gives
    ``pvalue = 0``, ``method="impossible"``).  The remaining cells are sorted by expected
    count ``E_i = n p_i``; walking up from the smallest, consecutive cells are merged into a
    pooled cell until its expected count reaches ``min_expected``, after which a new group
    starts (cells already at ``min_expected`` stay alone).  A final group that is still
    below ``min_expected`` is merged into the previous group.  Every cell of the test thus
    has ``E >= min_expected`` (Cochran's rule), except when all observations together expect
    fewer than ``min_expected`` (then one cell remains, ``dof = 0`` and ``pvalue = 1``: the
    test has no power; use :func:`multinomial_exact_gof`).

    Parameters
    ----------
    counts : array of int, shape (k,)
        Observed counts (integer-valued floats are accepted); the total must not exceed
        :data:`MAX_TOTAL_COUNT` (``2**62``).
    probs : array, shape (k,)
        Hypothesised probabilities (must sum to 1 within the tolerance of
        :func:`specbound._validation.sum_atol` unless ``normalize=True``).
    min_expected : float > 0
        Smallest expected count of a cell after pooling.
    normalize : bool
        Rescale ``probs`` to sum to 1 (a bool; the default tolerance on the sum is that of
        :func:`specbound._validation.sum_atol`).
    alpha : float in (0, 1), optional
        Threshold stored in the result (:attr:`GofResult.rejected`).

    Returns
    -------
    GofResult
    """
    me = as_real(min_expected, "min_expected", low=0.0, low_open=True)
    a = _as_alpha(alpha)
    c, p = _prepare(counts, probs, normalize)
    imp = _impossible(c, p, a)
    if imp is not None:
        return imp
    keep = p > 0
    c, p = c[keep], p[keep]
    n = int(c.sum())
    e = n * p
    order = np.argsort(e, kind="stable")
    e_s, c_s = e[order], c[order]
    # group boundaries: a group closes once its cumulative expected count reaches me
    groups_e, groups_c, sizes = [], [], []
    acc_e, acc_c, acc_n = 0.0, 0, 0
    for ei, ci in zip(e_s.tolist(), c_s.tolist(), strict=True):
        acc_e += ei
        acc_c += ci
        acc_n += 1
        if acc_e >= me:
            groups_e.append(acc_e)
            groups_c.append(acc_c)
            sizes.append(acc_n)
            acc_e, acc_c, acc_n = 0.0, 0, 0
    if acc_n:
        if groups_e:
            groups_e[-1] += acc_e
            groups_c[-1] += acc_c
            sizes[-1] += acc_n
        else:
            groups_e.append(acc_e)
            groups_c.append(acc_c)
            sizes.append(acc_n)
    ge = np.asarray(groups_e)
    gc = np.asarray(groups_c, dtype=np.float64)
    sz = np.asarray(sizes)
    n_pooled = int(sz[sz > 1].sum())
    k = ge.shape[0]
    note = f"pooled {n_pooled} cells into {int(np.count_nonzero(sz > 1))}" if n_pooled else ""
    if k < 2:
        return GofResult(
            statistic=0.0,
            dof=0,
            pvalue=1.0,
            method="chisquare",
            n=n,
            n_cells=k,
            n_pooled=n_pooled,
            alpha=a,
            note="one cell after pooling: no degrees of freedom, the test has no power",
        )
    stat = float(np.sum((gc - ge) ** 2 / ge))
    dof = k - 1
    pv = float(stats.chi2.sf(stat, dof))
    return GofResult(
        statistic=stat, dof=dof, pvalue=pv, method="chisquare", n=n, n_cells=k,
        n_pooled=n_pooled, alpha=a, note=note,
    )


def _exact_log_probs(n: int, p: np.ndarray) -> np.ndarray:
    """Log-probabilities of every outcome of Multinomial(n, p) (all cells of p positive).

    Outcomes are enumerated cell by cell keeping only (log-weight, remaining count) per
    partial outcome, so memory is O(number of outcomes), not O(outcomes x cells).
    """
    logp = np.log(p)
    lw = np.array([special.gammaln(n + 1)])
    rem = np.array([n], dtype=np.int64)
    for j in range(p.shape[0] - 1):
        reps = rem + 1
        idx = np.repeat(np.arange(rem.shape[0]), reps)
        starts = np.cumsum(reps) - reps
        x = np.arange(idx.shape[0]) - np.repeat(starts, reps)
        lw = lw[idx] + x * logp[j] - special.gammaln(x + 1)
        rem = rem[idx] - x
    return lw + rem * logp[-1] - special.gammaln(rem + 1)


def multinomial_exact_gof(counts, probs, *, normalize=False, alpha=None) -> GofResult:
    """Exact multinomial goodness-of-fit test (probability ordering).

    ``pvalue = sum of P(x) over all outcomes x with P(x) <= P(observed)`` under
    ``H0: counts ~ Multinomial(n, probs)``, where ``P(x) = n! prod p_i^{x_i} / x_i!``.
    Outcomes whose probability equals the observed one within a relative ``1e-7`` count as
    ties and are included (so the test is valid, i.e. ``P(pvalue <= a) <= a``).  Cells with
    probability 0 are removed first; a positive count in one of them gives ``pvalue = 0``
    (``method="impossible"``).

    The ``C(n + k - 1, k - 1)`` outcomes (``k`` positive cells) are all enumerated; this is
    for tiny vocabularies and sample sizes.

    Parameters
    ----------
    counts : array of int, shape (k,)
    probs : array, shape (k,)
    normalize : bool
        Rescale ``probs`` to sum to 1.
    alpha : float in (0, 1), optional
        Threshold stored in the result.

    Returns
    -------
    GofResult
        ``statistic`` is the probability of the observed outcome; ``dof`` is None.

    Raises
    ------
    ValueError
        ``counts`` too large: more than ``EXACT_MAX_OUTCOMES`` (2,000,000) outcomes would be
        enumerated.
    """
    a = _as_alpha(alpha)
    c, p = _prepare(counts, probs, normalize)
    imp = _impossible(c, p, a)
    if imp is not None:
        return imp
    keep = p > 0
    c, p = c[keep], p[keep]
    n, k = int(c.sum()), int(c.shape[0])
    m = _n_outcomes(n, k, EXACT_MAX_OUTCOMES)
    if m > EXACT_MAX_OUTCOMES:
        raise ValueError(
            f"counts: the exact test would enumerate C(n+k-1, k-1) > {EXACT_MAX_OUTCOMES} "
            f"outcomes (n={n}, k={k} positive cells; limit {EXACT_MAX_OUTCOMES}); "
            "use chisquare_gof"
        )
    if k == 1:
        return GofResult(statistic=1.0, dof=None, pvalue=1.0, method="exact", n=n, n_cells=1,
                         alpha=a, note="one positive cell: every outcome is certain")
    lw = _exact_log_probs(n, p)
    lobs = float(special.gammaln(n + 1) - special.gammaln(c + 1).sum() + np.sum(c * np.log(p)))
    tol = math.log1p(_TIE_RTOL)
    pv = float(np.exp(lw[lw <= lobs + tol]).sum())
    return GofResult(statistic=math.exp(lobs), dof=None, pvalue=min(pv, 1.0), method="exact",
                     n=n, n_cells=k, alpha=a)


def gof_test(counts, probs, *, alpha=None, min_expected=5.0, normalize=False) -> GofResult:
    """Goodness-of-fit test choosing the exact or the chi-square test automatically.

    Rule: with ``n = sum(counts)`` and ``k`` cells of positive probability, the exact
    multinomial test (:func:`multinomial_exact_gof`) is used when it needs at most
    ``EXACT_AUTO_OUTCOMES`` (100,000) outcomes, i.e. ``C(n + k - 1, k - 1) <= 100,000``
    (e.g. k = 2 and n < 100,000; k = 3 and n <= 445; k = 5 and n <= 31); otherwise the
    pooled chi-square test (:func:`chisquare_gof`).  The exact test is preferred whenever it
    is cheap because it needs no large-sample approximation.

    Parameters
    ----------
    counts, probs : see :func:`chisquare_gof`
    alpha : float in (0, 1), optional
        Per-comparison threshold (see :func:`bonferroni_alpha`); stored in the result so that
        ``result.rejected`` is ``pvalue < alpha``.
    min_expected : float
        Passed to :func:`chisquare_gof`.
    normalize : bool
        Rescale ``probs`` to sum to 1.
    """
    a = _as_alpha(alpha)
    me = as_real(min_expected, "min_expected", low=0.0, low_open=True)
    c, p = _prepare(counts, probs, normalize)
    k = int(np.count_nonzero(p > 0))
    if _n_outcomes(int(c.sum()), k, EXACT_AUTO_OUTCOMES) <= EXACT_AUTO_OUTCOMES:
        return multinomial_exact_gof(c, p, alpha=a)
    return chisquare_gof(c, p, min_expected=me, alpha=a)

