"""The rule kinds of the claims (one level, three standard errors, :data:`Z`): each turns
one comparison into a :class:`~paper_figs.claims.verdicts.Part` (see
:mod:`paper_figs.claims.verdicts` for what each kind decides)."""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy import stats

from paper_figs.claims.data import MissingData
from paper_figs.claims.verdicts import (
    NOT_DISTINGUISHABLE,
    NOT_REPRODUCED,
    REFUTED,
    REPRODUCED,
    Part,
    combine,
)

#: the level of every rule: three standard errors (one-sided tail 0.135%)
Z = 3.0


#: one-sided tail probability of the level (the t reference uses the same tail)
ALPHA = float(stats.norm.sf(Z))


#: tolerance of exact comparisons (rounding of the CSVs' 10-12 digits)
EXACT_ATOL = 1e-9


def crit(df: float | None = None) -> float:
    """The critical value of every rule: :data:`Z` on the normal reference, or the
    Student-t quantile with ``df`` degrees of freedom for the same one-sided tail (used
    where the standard error comes from few prompts)."""
    if df is None:
        return Z
    df = float(df)
    if math.isnan(df) or df < 1:
        return math.inf  # no degrees of freedom: nothing can be decided
    if math.isinf(df):
        return Z
    return float(stats.t.isf(ALPHA, df))


#: the smallest sample any rule decides on, in units of its standard error (prompts, seeds,
#: sequences, grid points): a standard error over one unit is no standard error, and a
#: difference of 0 ± 0 over one prompt is no evidence; a rule may state a larger minimum
MIN_UNITS = 2


SAMPLE_TOO_SMALL = "sample too small"


def _too_small(label: str, df, min_units: int, text: str) -> Part | None:
    """The part of a rule whose sample (``df + 1`` units) is below ``min_units``:
    *not distinguishable — sample too small (n = ...)*; None where the sample suffices or
    no unit count applies (``df`` None: the normal reference over many units)."""
    if df is None:
        return None
    df = float(df)
    if not math.isnan(df) and df + 1 >= min_units:
        return None
    n = "n < 2" if math.isnan(df) else f"n = {int(df + 1)}"
    return Part(label, NOT_DISTINGUISHABLE, f"{SAMPLE_TOO_SMALL} ({n}; the rule needs at "
                f"least {min_units})" + (f" — {text}" if text else ""), None)


def _w(c: float, se: float) -> float:
    """Half-width ``c · se`` of the interval (0 for an exact value, whatever ``c``)."""
    return 0.0 if se == 0 else c * se


def _z(diff: float, se: float) -> float:
    if se is None or not np.isfinite(se):
        return math.nan
    if se == 0:
        return 0.0 if diff == 0 else math.copysign(math.inf, diff)
    return diff / se


def fmt(x, digits: int = 4) -> str:
    """A number for the INDEX (n/a for NaN, ∞ for infinities)."""
    if x is None:
        return "n/a"
    x = float(x)
    if math.isnan(x):
        return "n/a"
    if math.isinf(x):
        return "∞" if x > 0 else "−∞"
    return f"{x:.{digits}g}"


def _se_text(se: float, df: float | None) -> str:
    """``± se`` with its reference and the smallest difference the sample could detect."""
    ref = f", t({int(df)})" if df is not None and np.isfinite(df) else ""
    return f"± {fmt(se, 2)}{ref}; detectable ≥ {fmt(_w(crit(df), se), 2)}"


def ordering(label: str, diff: float, se: float, df: float | None = None,
             text: str = "", min_units: int = MIN_UNITS) -> Part:
    """"a > b" from ``diff = a − b`` and its standard error (none below ``min_units``)."""
    if (small := _too_small(label, df, min_units, text)) is not None:
        return small
    c = crit(df)
    z = _z(diff, se)
    if math.isnan(z):
        v = NOT_DISTINGUISHABLE
    elif se == 0:
        v = REPRODUCED if diff > 0 else NOT_REPRODUCED
    elif z > c:
        v = REPRODUCED
    elif z < -c:
        v = NOT_REPRODUCED
    else:
        v = NOT_DISTINGUISHABLE
    return Part(label, v, text or f"Δ = {fmt(diff, 3)} {_se_text(se, df)}", z)


@functools.lru_cache(maxsize=4096)
def family_crit(m: int, df: float | None = None) -> float:
    """The critical value of each of ``m`` one-sided tests judged together ("no violation
    in any row"), so that the family fails wrongly with probability :data:`ALPHA` (Šidák:
    each test's tail ``1 − (1 − ALPHA)^(1/m)``; :data:`Z` for one test).  Without it, 256
    Monte Carlo checks of a bound that holds with equality (PML = exact MPFR) would fail
    wrongly about 29% of the time.  ``df``: the Student-t quantile of the same tail (the
    reference of :func:`crit`)."""
    m = int(m)
    if m < 1:
        raise ValueError(f"m must be >= 1, got {m}")
    if m == 1:
        return crit(df)
    tail = -math.expm1(math.log1p(-ALPHA) / m)
    if df is None:
        return float(stats.norm.isf(tail))
    df = float(df)
    if math.isnan(df) or df < 1:
        return math.inf
    if math.isinf(df):
        return float(stats.norm.isf(tail))
    return float(stats.t.isf(tail, df))


def bound_family(label: str, diffs, ses, margin: float, calibrated: bool = False,
                 text: str = "") -> list[Part]:
    """A bound checked by Monte Carlo on ``m`` rows (``diffs`` = estimate − bound, ``ses``
    their standard errors), by three checks registered before the data: (1) *Šidák minimum*
    -- every row :func:`at_least` at the family-wise critical value :func:`family_crit`
    (one badly violated row); (2) *one-sided Stouffer* -- ``Σ z / √m`` above ``−Z`` (a
    small violation on every row, which (1) cannot see: a shift of every row by −0.5σ over
    256 rows is Stouffer −8); (3) where the bound holds with equality (``calibrated``: the
    truth is estimate = bound, so each z is standard normal) *calibration* -- ``Σ z²``
    inside the central ``1 − ALPHA`` of χ²(m) (too large: a bias either way; too small: an
    estimate that copies its reference).  Each check fails wrongly with probability about
    :data:`ALPHA`; the three parts combine like the parts of a sentence."""
    d, se = np.asarray(diffs, dtype=float), np.asarray(ses, dtype=float)
    m = d.size
    if m == 0:
        raise MissingData(f"{label}: no rows")
    c = family_crit(m)
    per = [at_least("row", x, s, margin, c=c) for x, s in zip(d, se, strict=True)]
    worst = min(per, key=lambda x: x.z if x.z is not None else math.inf)
    parts = [Part(f"{label}: Šidák minimum", combine(x.verdict for x in per),
                  f"{m} rows; smallest z = {fmt(worst.z, 3)} (family-wise critical value "
                  f"{fmt(c, 3)}, a violation of {fmt(margin, 2)} visible)"
                  + (f"; {text}" if text else ""), worst.z)]
    z = np.array([x.z for x in per], dtype=float)
    z = z[np.isfinite(z)]
    if z.size:
        st = float(z.sum() / math.sqrt(z.size))
        parts.append(Part(f"{label}: one-sided Stouffer", NOT_REPRODUCED if st < -Z else
                          REPRODUCED, f"Σz/√m = {fmt(st, 3)} over {z.size} rows (a systematic "
                          f"violation below −{fmt(Z)})", st))
        if calibrated:
            q = float(np.sum(z * z))
            lo, hi = stats.chi2.ppf(ALPHA / 2, z.size), stats.chi2.isf(ALPHA / 2, z.size)
            ok = lo <= q <= hi
            parts.append(Part(f"{label}: calibration", REPRODUCED if ok else NOT_REPRODUCED,
                              f"Σz² = {fmt(q, 4)} on {z.size} rows (χ² central range "
                              f"{fmt(lo, 4)}–{fmt(hi, 4)}: the bound holds with equality)",
                              float(stats.norm.isf(stats.chi2.sf(q, z.size)))))
    return parts


def at_least(label: str, diff: float, se: float, margin: float, df: float | None = None,
             text: str = "", c: float | None = None, min_units: int = MIN_UNITS) -> Part:
    """"a ≥ b" (a bound that may hold with equality) from ``diff = a − b``: a significant
    violation is not reproduced; a 3σ lower limit above ``−margin`` is reproduced.  ``c``:
    another critical value (:func:`family_crit` where many rows are judged together)."""
    if (small := _too_small(label, df, min_units, text)) is not None:
        return small
    c = crit(df) if c is None else float(c)
    z = _z(diff, se)
    if math.isnan(z):
        v = NOT_DISTINGUISHABLE
    elif diff + _w(c, se) < 0:
        v = NOT_REPRODUCED
    elif diff - _w(c, se) > -margin:
        v = REPRODUCED
    else:
        v = NOT_DISTINGUISHABLE
    return Part(label, v, text or f"Δ = {fmt(diff, 3)} {_se_text(se, df)} (margin "
                f"{fmt(margin, 2)})", z)


def equivalence(label: str, diff: float, se: float, margin: float, df: float | None = None,
                text: str = "", min_units: int = MIN_UNITS, family: int = 1) -> Part:
    """"a ≈ b" within ``margin``: two one-sided tests at the 3σ level (TOST).

    ``family``: the number of equivalence tests of one sentence ("comparable at every L":
    one test per L, the sentence holds only if every one does).  *Reproduced* needs every
    member to pass its own TOST at the per-test level: an intersection-union test (Berger
    1982), whose size is at most ALPHA without any correction.  *Not reproduced* says that
    some member lies outside the margin: a union of ``family`` tests, each at the Šidák
    critical value :func:`family_crit` (``family``, ``df``), so that a sentence true at
    every member reads *not reproduced* with probability at most ALPHA (at the per-test
    level four L would read it about 4 × 0.135% of the time, 200 L 24%).  A member that
    lies outside the margin by more than the family-wise width still turns the sentence."""
    if margin <= 0:
        raise ValueError(f"margin must be positive, got {margin}")
    if int(family) < 1:
        raise ValueError(f"family must be >= 1, got {family}")
    if (small := _too_small(label, df, min_units, text)) is not None:
        return small
    c = crit(df)
    cf = family_crit(family, df)
    z = _z(diff, se)
    if math.isnan(z):
        v = NOT_DISTINGUISHABLE
    elif abs(diff) + _w(c, se) < margin:
        v = REPRODUCED
    elif abs(diff) - _w(cf, se) > margin:
        v = NOT_REPRODUCED
    else:
        v = NOT_DISTINGUISHABLE
    text = text or f"Δ = {fmt(diff, 3)} {_se_text(se, df)} (margin ± {fmt(margin, 2)})"
    if v == NOT_DISTINGUISHABLE and _w(c, se) >= margin:
        # a rule this sample can never pass: say so rather than let it look undecided
        text += (f" — this sample cannot show equivalence within ± {fmt(margin, 2)} (the "
                 f"narrowest it could show: ± {fmt(_w(c, se), 2)})")
    elif v == NOT_DISTINGUISHABLE and family > 1 and abs(diff) - _w(c, se) > margin:
        # outside the margin at the per-test level, not at the family's
        text += (f" — outside the margin at the per-test level, not at the family-wise "
                 f"level of {family} tests (critical value {fmt(cf, 3)})")
    return Part(label, v, text, z)


def in_range(label: str, value: float, se: float, lo: float, hi: float,
             df: float | None = None, text: str = "", min_units: int = MIN_UNITS,
             family: int = 1) -> Part:
    """"the value lies in [lo, hi]": the 3σ interval inside the range reproduces, outside
    it does not, straddling an end is not distinguishable.  ``family``: the number of such
    tests of one sentence ("in the range on every cell"); *outside* then uses the Šidák
    critical value :func:`family_crit`, *inside* the per-test one (see
    :func:`equivalence`)."""
    if lo > hi:
        raise ValueError(f"lo must be <= hi, got [{lo}, {hi}]")
    if int(family) < 1:
        raise ValueError(f"family must be >= 1, got {family}")
    if (small := _too_small(label, df, min_units, text)) is not None:
        return small
    c = crit(df)
    if not np.isfinite(se):
        v, z = NOT_DISTINGUISHABLE, math.nan
    else:
        low, high = value - _w(c, se), value + _w(c, se)
        cf = family_crit(family, df)
        if lo <= low and high <= hi:
            v = REPRODUCED
        elif value + _w(cf, se) < lo or value - _w(cf, se) > hi:
            v = NOT_REPRODUCED
        else:
            v = NOT_DISTINGUISHABLE
        z = _z(value - (hi if value > hi else lo), se) if not lo <= value <= hi else 0.0
    return Part(label, v, text or f"{fmt(value, 3)} {_se_text(se, df)} (range "
                f"[{fmt(lo, 3)}, {fmt(hi, 3)}])", z)


def exact(label: str, diffs, text: str = "", tol: float = EXACT_ATOL) -> Part:
    """A closed-form inequality ``diffs ≥ 0`` on every row (two independent computations):
    reproduced, or refuted by the most negative row."""
    d = np.asarray(diffs, dtype=float)
    d = d[~np.isnan(d)]
    if d.size == 0:
        raise MissingData(f"{label}: no rows")
    holds = float(d.min()) >= -tol
    return Part(label, REPRODUCED if holds else REFUTED,
                text or f"min over {d.size} rows {fmt(float(d.min()), 3)}")


def universal(label: str, holds_per_row, text: str = "") -> Part:
    """"for all" over a finite set of rows (a fraction of 1 per row, or booleans):
    reproduced when every row holds, refuted by any row that does not."""
    h = np.asarray(holds_per_row, dtype=float)
    if h.size == 0:
        raise MissingData(f"{label}: no rows")
    bad = int(np.sum(h < 1.0))
    return Part(label, REPRODUCED if bad == 0 else REFUTED,
                text or f"{bad} of {h.size} rows fail")


def sweep(label: str, zs, df: float | None = None, text: str = "",
          min_units: int = MIN_UNITS) -> Part:
    """"a ≥ b at every point of a sweep and a > b somewhere" (e.g. TPR against the token
    budget, where every decoder saturates at 1): not reproduced if any z < −c, reproduced
    if some z > c, else not distinguishable; the z shown is the deciding one."""
    if (small := _too_small(label, df, min_units, text)) is not None:
        return small
    c = crit(df)
    z = [float(x) for x in zs if x is not None and not math.isnan(float(x))]
    if not z:
        return Part(label, NOT_DISTINGUISHABLE, text or "no finite z", None)
    if min(z) < -c:
        return Part(label, NOT_REPRODUCED, text or f"z from {fmt(min(z), 3)}", min(z))
    v = REPRODUCED if max(z) > c else NOT_DISTINGUISHABLE
    return Part(label, v, text or f"z from {fmt(min(z), 3)} to {fmt(max(z), 3)}", max(z))


def few(n) -> float | None:
    """Degrees of freedom of a standard error over ``n`` units (prompts, seeds): ``n − 1``
    where units are few (under 30: the t reference), else None (the normal reference)."""
    if n is None or not np.isfinite(float(n)):
        return None
    n = float(n)
    return n - 1 if n < 30 else None

