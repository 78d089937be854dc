"""Statistical assertions shared by the test suite.

Every statistical test of the project states its false-failure probability (the chance that
it fails although the code is right).  The default is :data:`FAILURE_RATE` for a whole test
function; a function that makes ``k`` comparisons splits it by Bonferroni
(:func:`bonferroni`).  The helpers raise ``AssertionError`` with the numbers that failed.
"""

from __future__ import annotations

import numpy as np
from scipy import special, stats

from specbound.sim import bonferroni_alpha, counts_from_samples, gof_test

#: overall false-failure probability of one statistical test function
FAILURE_RATE = 1e-4


def bonferroni(n_comparisons: int, rate: float = FAILURE_RATE) -> float:
    """Per-comparison level so that ``n_comparisons`` comparisons fail together w.p. <= rate."""
    return bonferroni_alpha(rate, n_comparisons)


def z_bound(alpha: float) -> float:
    """Two-sided normal critical value: ``P(|Z| > z) = alpha``."""
    return float(special.ndtri(1.0 - alpha / 2.0))


def assert_gof(observed, probs, *, alpha: float = FAILURE_RATE, samples: bool = False,
               label: str = "") -> None:
    """Goodness of fit of counts (or of token samples with ``samples=True``) to ``probs``.

    Uses :func:`specbound.sim.gof_test` (exact multinomial test for small problems, Pearson
    chi-square with pooling otherwise); fails iff its p-value is below ``alpha``.
    """
    probs = np.asarray(probs, dtype=np.float64)
    counts = counts_from_samples(observed, probs.size) if samples else np.asarray(observed)
    res = gof_test(counts, probs, normalize=True)
    assert res.pvalue >= alpha, (
        f"{label} goodness of fit rejected: p = {res.pvalue:.3g} < alpha = {alpha:.3g} "
        f"(n = {res.n}, statistic = {res.statistic:.4g})"
    )


def assert_not_gof(observed, probs, *, below: float = 1e-6, samples: bool = False,
                   label: str = "") -> None:
    """Power check: the goodness-of-fit p-value of a wrong law must be below ``below``."""
    probs = np.asarray(probs, dtype=np.float64)
    counts = counts_from_samples(observed, probs.size) if samples else np.asarray(observed)
    res = gof_test(counts, probs, normalize=True)
    assert res.pvalue < below, f"{label} wrong law not detected: p = {res.pvalue:.3g}"


def binom_ok(k: int, n: int, p: float, alpha: float = 1e-3) -> bool:
    """True iff ``k`` lies in the central ``1 - alpha`` interval of Binomial(n, p)."""
    lo, hi = stats.binom.interval(1.0 - alpha, n, p)
    return bool(lo <= k <= hi)


def assert_binom(k: int, n: int, p: float, *, alpha: float = FAILURE_RATE,
                 label: str = "") -> None:
    """``k`` successes out of ``n`` are compatible with success probability ``p``."""
    assert binom_ok(k, n, p, alpha), (
        f"{label} {k}/{n} = {k / n:.5g} outside the {1 - alpha:.6g} binomial interval "
        f"of p = {p:.5g}"
    )


def assert_within_se(estimate: float, truth: float, stderr: float, *, z: float = 5.0,
                     slack: float = 0.0, label: str = "") -> None:
    """``|estimate - truth| <= z * stderr + slack`` (z = 5: two-sided rate 5.7e-7 if normal)."""
    gap = abs(float(estimate) - float(truth))
    assert gap <= z * float(stderr) + slack, (
        f"{label} estimate {estimate:.6g} vs {truth:.6g}: |diff| = {gap:.3g} > "
        f"{z} x {stderr:.3g} + {slack:.3g}"
    )
