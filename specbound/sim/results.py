"""Small frozen result types shared by the simulators."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from specbound._validation import as_choice, as_real


@dataclass(frozen=True)
class ConfidenceInterval:
    """A two-sided confidence interval ``[low, high]``."""

    low: float
    high: float


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

        ``method="wilson"`` (score interval) or ``"exact"`` (Clopper-Pearson) for proportions;
        for a non-proportion estimate (``successes is None``) the normal interval is returned
        whatever the method.
        """
        cl = as_real(confidence_level, "confidence_level", low=0, high=1, low_open=True,
                     high_open=True)
        as_choice(method, "method", ("wilson", "exact"))
        if self.successes is None:
            z = stats.norm.ppf(0.5 + cl / 2)
            return ConfidenceInterval(self.mean - z * self.stderr, self.mean + z * self.stderr)
        res = stats.binomtest(int(self.successes), int(self.n)).proportion_ci(
            confidence_level=cl, method=method
        )
        return ConfidenceInterval(float(res.low), float(res.high))

    @classmethod
    def from_successes(cls, successes: int, n: int) -> Estimate:
        m = successes / n
        return cls(mean=m, stderr=float(np.sqrt(max(m * (1 - m), 0.0) / n)), n=int(n),
                   successes=int(successes))

    @classmethod
    def from_samples(cls, x) -> Estimate:
        x = np.asarray(x, dtype=np.float64)
        n = x.size
        sd = float(x.std(ddof=1)) if n > 1 else 0.0
        return cls(mean=float(x.mean()), stderr=float(sd / np.sqrt(n)), n=int(n))
