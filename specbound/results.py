"""Result types shared by every layer, and the one confidence-interval helper.

- :class:`ConfidenceInterval` -- a two-sided interval ``[low, high]`` (floats, or arrays for
  a batch), as scipy's ``BinomTestResult.proportion_ci`` returns it.
- :class:`Estimate` -- one Monte Carlo estimate (mean, standard error, trials, successes)
  with :meth:`Estimate.ci`.
- :class:`ResultBatch` -- the batched-result pattern: a frozen dataclass whose fields are
  arrays with one entry per item, with ``len()``, ``batch[i]`` (the single-item result),
  :meth:`ResultBatch.to_frame` and, where it applies, ``.ci()``.
  :class:`EstimateBatch` is the batch of :class:`Estimate`.
- :func:`proportion_ci` -- Wilson score or Clopper-Pearson ("exact") intervals for
  binomial proportions, vectorised; every interval of the package comes from here.

This module imports neither :mod:`specbound.theory` nor :mod:`specbound.sim`, so both layers
use it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import special, stats

from specbound._validation import INT64_MAX, as_choice, as_int, as_real, as_real_array

__all__ = ["ConfidenceInterval", "Estimate", "EstimateBatch", "ResultBatch", "proportion_ci"]

CI_METHODS = ("wilson", "exact")


@dataclass(frozen=True)
class ConfidenceInterval:
    """A two-sided confidence interval ``[low, high]`` (floats, or arrays for a batch)."""

    low: float
    high: float


def _level(confidence_level) -> float:
    return as_real(confidence_level, "confidence_level", low=0, high=1, low_open=True,
                   high_open=True)


def proportion_ci(successes, n, confidence_level: float = 0.95,
                  method: str = "wilson") -> ConfidenceInterval:
    """Confidence interval for a binomial proportion ``successes / n`` (vectorised).

    Parameters
    ----------
    successes, n : int or array_like of int
        Successes and trials (broadcast against each other; ``0 <= successes <= n``,
        ``n >= 1``).
    confidence_level : float in (0, 1)
        Coverage of the two-sided interval.
    method : {"wilson", "exact"}
        ``"wilson"``: the score interval of Wilson (1927) without continuity correction;
        ``"exact"``: Clopper-Pearson (1934), from Beta quantiles, with ``low = 0`` at
        ``successes = 0`` and ``high = 1`` at ``successes = n``.  Both equal scipy's
        ``binomtest(k, n).proportion_ci(confidence_level, method)`` (tested).

    Returns
    -------
    ConfidenceInterval
        Floats for scalar input, arrays otherwise.
    """
    cl = _level(confidence_level)
    as_choice(method, "method", CI_METHODS)
    k = np.asarray(successes)
    nn = np.asarray(n)
    for arr, name in ((k, "successes"), (nn, "n")):
        if arr.dtype == np.bool_ or arr.dtype.kind not in "iu":
            raise ValueError(f"{name}: must be integer counts, got dtype {arr.dtype}")
    k, nn = np.broadcast_arrays(k.astype(np.float64), nn.astype(np.float64))
    if np.any(nn < 1):
        raise ValueError("n: must be >= 1")
    if np.any((k < 0) | (k > nn)):
        raise ValueError("successes: must lie in [0, n]")
    alpha = 1.0 - cl
    if method == "wilson":
        z = special.ndtri(1.0 - alpha / 2.0)
        phat = k / nn
        den = 1.0 + z * z / nn
        center = (phat + z * z / (2.0 * nn)) / den
        half = z * np.sqrt(phat * (1.0 - phat) / nn + z * z / (4.0 * nn * nn)) / den
        lo = np.clip(center - half, 0.0, 1.0)
        hi = np.clip(center + half, 0.0, 1.0)
    else:
        with np.errstate(invalid="ignore"):
            lo = np.where(k > 0, stats.beta.ppf(alpha / 2.0, k, nn - k + 1.0), 0.0)
            hi = np.where(k < nn, stats.beta.ppf(1.0 - alpha / 2.0, k + 1.0, nn - k), 1.0)
    if lo.ndim == 0:
        return ConfidenceInterval(float(lo), float(hi))
    return ConfidenceInterval(lo, hi)


@dataclass(frozen=True)
class Estimate:
    """A Monte Carlo estimate of a probability (or a mean).

    Attributes
    ----------
    mean : float
        The sample mean.
    stderr : float
        Its standard error (``sqrt(mean (1 - mean) / n)`` for a proportion).
    n : int
        Number of trials.
    successes : int or None
        Number of successes when the estimate is a proportion (enables exact intervals).
    """

    mean: float
    stderr: float
    n: int
    successes: int | None = None

    @property
    def ci_low(self) -> float:
        return self.ci().low

    @property
    def ci_high(self) -> float:
        return self.ci().high

    def ci(self, confidence_level: float = 0.95, method: str = "wilson") -> ConfidenceInterval:
        """Confidence interval for the mean.

        ``method="wilson"`` (score interval) or ``"exact"`` (Clopper-Pearson) for proportions
        (:func:`proportion_ci`); for a non-proportion estimate (``successes is None``) the
        normal interval ``mean +- z stderr`` is returned whatever the method.
        """
        cl = _level(confidence_level)
        as_choice(method, "method", CI_METHODS)
        if self.successes is None:
            z = float(special.ndtri(0.5 + cl / 2))
            return ConfidenceInterval(self.mean - z * self.stderr, self.mean + z * self.stderr)
        return proportion_ci(int(self.successes), int(self.n), cl, method)

    @classmethod
    def from_successes(cls, successes: int, n: int) -> Estimate:
        """The proportion ``successes / n`` (``n >= 1``, ``0 <= successes <= n`` integers)."""
        n = as_int(n, "n", min_value=1, max_value=INT64_MAX)
        successes = as_int(successes, "successes", min_value=0, max_value=n)
        m = successes / n
        return cls(mean=m, stderr=float(np.sqrt(max(m * (1 - m), 0.0) / n)), n=int(n),
                   successes=int(successes))

    @classmethod
    def from_samples(cls, x) -> Estimate:
        """Mean and standard error of a non-empty sample of finite real numbers."""
        x, _ = as_real_array(x, "x")
        x = x.reshape(-1)
        if x.size == 0:
            raise ValueError("x: must contain at least one value")
        if not np.all(np.isfinite(x)):
            raise ValueError("x: contains NaN or infinite values")
        with np.errstate(over="ignore", invalid="ignore"):
            if not (np.isfinite(x.mean()) and np.isfinite(x.std(ddof=1) if x.size > 1 else 0)):
                raise ValueError("x: values too large: their mean or spread overflows a float")
        n = x.size
        sd = float(x.std(ddof=1)) if n > 1 else 0.0
        return cls(mean=float(x.mean()), stderr=float(sd / np.sqrt(n)), n=int(n))


class ResultBatch:
    """Mixin of the batched-result pattern (used by frozen dataclasses with array fields).

    Subclasses list in ``_item_fields`` the per-item fields (arrays or lists of equal
    length) and may set ``_item_type`` to the single-item result class built by
    ``batch[i]``; fields not listed are shared by all items (e.g. the score name).
    ``to_frame()`` gives one row per item with the per-item scalar fields as columns.
    """

    _item_fields: tuple[str, ...] = ()
    _item_type: type | None = None
    _frame_fields: tuple[str, ...] | None = None

    def __len__(self) -> int:
        return len(getattr(self, self._item_fields[0]))

    def _item_kwargs(self, i: int) -> dict:
        out = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.name in self._item_fields:
                x = v[i]
                if isinstance(x, np.generic):
                    x = x.item()
                out[f.name] = x
            else:
                out[f.name] = v
        return out

    def __getitem__(self, i):
        n = len(self)
        if not isinstance(i, int | np.integer):
            raise TypeError(f"{type(self).__name__} indices must be integers, got {i!r}")
        if not -n <= i < n:
            raise IndexError(f"index {i} out of range for a batch of {n}")
        i = int(i) % n
        if self._item_type is None:
            return self._item_kwargs(i)
        return self._item_type(**self._item_kwargs(i))

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def to_frame(self) -> pd.DataFrame:
        """One row per item; columns are the per-item scalar fields."""
        names = self._frame_fields or self._item_fields
        cols = {}
        for name in names:
            v = getattr(self, name)
            if isinstance(v, np.ndarray) and v.ndim == 1:
                cols[name] = v
        return pd.DataFrame(cols)


@dataclass(frozen=True, eq=False)
class EstimateBatch(ResultBatch):
    """A batch of :class:`Estimate` (one entry per row of a batched input).

    Attributes
    ----------
    mean, stderr : ndarray of float64
    n : ndarray of int64
    successes : ndarray of int64 or None
    """

    mean: np.ndarray
    stderr: np.ndarray
    n: np.ndarray
    successes: np.ndarray | None = None

    _item_fields = ("mean", "stderr", "n", "successes")
    _item_type = Estimate

    def _item_kwargs(self, i: int) -> dict:
        out = super()._item_kwargs(i) if self.successes is not None else {
            "mean": float(self.mean[i]), "stderr": float(self.stderr[i]), "n": int(self.n[i]),
            "successes": None}
        return out

    def ci(self, confidence_level: float = 0.95, method: str = "wilson") -> ConfidenceInterval:
        """Per-item intervals as arrays (see :meth:`Estimate.ci`)."""
        cl = _level(confidence_level)
        as_choice(method, "method", CI_METHODS)
        if self.successes is None:
            z = float(special.ndtri(0.5 + cl / 2))
            return ConfidenceInterval(self.mean - z * self.stderr, self.mean + z * self.stderr)
        return proportion_ci(np.asarray(self.successes), np.asarray(self.n), cl, method)

    def to_frame(self, confidence_level: float = 0.95, method: str = "wilson") -> pd.DataFrame:
        """Columns ``mean, stderr, n, successes, ci_low, ci_high`` (interval as :meth:`ci`)."""
        ci = self.ci(confidence_level, method)
        df = pd.DataFrame({"mean": self.mean, "stderr": self.stderr, "n": self.n})
        if self.successes is not None:
            df["successes"] = self.successes
        df["ci_low"] = np.atleast_1d(ci.low)
        df["ci_high"] = np.atleast_1d(ci.high)
        return df

    @classmethod
    def from_successes(cls, successes, n) -> EstimateBatch:
        k = np.asarray(successes, dtype=np.int64)
        nn = np.broadcast_to(np.asarray(n, dtype=np.int64), k.shape).copy()
        m = k / nn
        return cls(mean=m, stderr=np.sqrt(np.maximum(m * (1 - m), 0.0) / nn), n=nn,
                   successes=k)
