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

#: two-sided normal tail beyond 5 standard errors, ``P(|Z| > 5) = 5.73e-7``: the chance
#: failure probability of one comparison made with ``z = 5`` (the default of the helpers below)
FIVE_SIGMA_RATE = float(2.0 * special.ndtr(-5.0))


def bonferroni(n_comparisons: int, rate: float = FAILURE_RATE) -> float:
    """Per-comparison level so that ``n_comparisons`` comparisons fail together w.p. <= rate."""
    return bonferroni_alpha(rate, n_comparisons)


def z_bound(alpha: float) -> float:
    """Two-sided normal critical value: ``P(|Z| > z) = alpha``.

    Computed as ``-ndtri(alpha / 2)`` (the lower quantile; ``ndtri(1 - alpha / 2)`` would
    lose digits to the rounding of ``1 - alpha / 2``).
    """
    return float(-special.ndtri(alpha / 2.0))


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


def binom_close(successes, n, p, *, z: float = 5.0, slack: float = 0.0) -> np.ndarray:
    """Vectorised two-sided check ``|k - n p| <= z sqrt(n p (1 - p)) + slack`` (in counts).

    ``successes`` (k), ``n`` and ``p`` broadcast.  With ``z = 5`` one comparison fails by
    chance with probability about :data:`FIVE_SIGMA_RATE` (normal approximation); a
    ``slack`` of a few counts covers the Poisson regime ``n p`` or ``n (1 - p)`` small, where
    the approximation fails.
    """
    k = np.asarray(successes, dtype=np.float64)
    a = np.asarray(p, dtype=np.float64)
    tol = z * np.sqrt(n * a * (1.0 - a)) + slack
    return np.abs(k - n * a) <= tol


def assert_binom_close(successes, n, p, *, z: float = 5.0, slack: float = 0.0,
                       label: str = "") -> None:
    """:func:`binom_close` for every entry; the failing entries are reported."""
    ok = np.atleast_1d(binom_close(successes, n, p, z=z, slack=slack))
    if not ok.all():
        k = np.broadcast_to(np.asarray(successes, dtype=np.float64), ok.shape)
        a = np.broadcast_to(np.asarray(p, dtype=np.float64), ok.shape)
        bad = np.flatnonzero(~ok)[:5]
        rows = ", ".join(f"[{i}] {k[i] / n:.6g} vs {a[i]:.6g}" for i in bad)
        raise AssertionError(
            f"{label} {int((~ok).sum())} of {ok.size} frequencies outside {z} binomial "
            f"standard errors (+ {slack} counts) of the exact value: {rows}"
        )


def assert_binom_at_least(successes, n, bound, *, z: float = 5.0, slack: float = 0.0,
                          label: str = "") -> None:
    """One-sided: ``k >= n b - z sqrt(n b (1 - b)) - slack`` for every entry.

    For a lower bound ``b`` of the true success probability; one comparison fails by chance
    with probability at most ``FIVE_SIGMA_RATE / 2`` at ``z = 5`` (less when ``b`` is below
    the truth).
    """
    k = np.asarray(successes, dtype=np.float64)
    b = np.asarray(bound, dtype=np.float64)
    ok = np.atleast_1d(k >= n * b - z * np.sqrt(n * b * (1.0 - b)) - slack)
    if not ok.all():
        kk = np.broadcast_to(k, ok.shape)
        bb = np.broadcast_to(b, ok.shape)
        bad = np.flatnonzero(~ok)[:5]
        rows = ", ".join(f"[{i}] {kk[i] / n:.6g} < {bb[i]:.6g}" for i in bad)
        raise AssertionError(f"{label} frequencies below the lower bound: {rows}")
