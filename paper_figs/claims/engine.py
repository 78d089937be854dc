"""The claims engine behind ``INDEX.md``: verdicts, rule kinds, combination and rendering.

Every row of the INDEX is one sentence of a paper -- Liu, Wan, Gao & Gündüz (2026),
arXiv:2609.21858, or Zhou et al. (2026), arXiv:2607.26627 -- or one of the package's own
consistency checks.  A claim (:class:`Claim`) names its statement, location, kind, rule and
flip test, and up to three evidence columns: the synthetic studies, the real embedded model,
and the paper's own published numbers (:mod:`paper_figs.claims.paper_numbers`), each judged
by the same rule function.

Rule kinds (one level, three standard errors, :data:`Z`; with few prompts the Student-t
quantile of the same one-sided tail, :func:`crit`):

``ordering``
    "a > b": reproduced when ``(a − b) / se > c``; not reproduced when ``< −c`` or when an
    exact tie (se = 0) refutes the strict order; else not distinguishable.
``at_least``
    "a ≥ b" where equality may hold (a bound): not reproduced when ``(a − b) + c·se < 0``
    (a significant violation); reproduced when ``(a − b) − c·se > −margin`` (the data could
    have seen a violation of ``margin``); else not distinguishable.
``equivalence``
    "comparable", "matches", "nearly identical": TOST at the 3σ level with a stated margin:
    reproduced when ``|a − b| + c·se < margin``; not reproduced when ``|a − b| − c·se >
    margin``; else not distinguishable.
``in_range``
    a range in the statement ("12–22 points"): reproduced when the 3σ interval of the value
    lies inside the range, not reproduced when it lies outside, else not distinguishable.
``exact`` / ``universal``
    a closed-form statement checked by two independent computations, or "for all" over a
    finite set: reproduced when it holds on every row within :data:`EXACT_ATOL`, refuted by
    a counterexample.

A sentence no experiment at embedded scale can test honestly (a learned judge, EAGLE-3
draft heads, task suites of 7B models) names why in :attr:`Claim.untestable`; its verdict is
:data:`NOT_TESTABLE`, counted on its own, with the paper's own numbers judged beside it.

A sentence that holds by algebra or by definition (an identity of the formulas, a bound that
holds by construction, decoders that emit the same tokens by construction) says why in
:attr:`Claim.proved`; where its implementation checks out its columns read :data:`PROVED`
("proved; implementation checked"), counted apart from *reproduced*: no data could have
contradicted the sentence, only our code of it.

A sentence with several parts has one verdict, :func:`combine` of its parts (refuted, then
not reproduced, then not distinguishable; reproduced only when every counted part is).
A part that is an identity of the code (two decoders emitting the same tokens) is shown
but never counted.  The verdict of a claim combines its evidence columns with
:func:`combine_columns`: a refutation or a significant difference against the claim in any
column wins; else reproduced if any column reproduces it; the paper's own data are shown
beside it and never enter our verdict.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from paper_figs.claims import data as _data
from paper_figs.claims.data import BadInput, Data, MissingData  # noqa: F401  (re-exported)

#: the rows of a table with given column values (re-exported from the data layer)
rows = _data.rows

#: the level of every rule: three standard errors (one-sided tail 0.135%)
Z = 3.0
#: one-sided tail probability of the level (the t reference uses the same tail)
ALPHA = float(stats.norm.sf(Z))
#: tolerance of exact comparisons (rounding of the CSVs' 10-12 digits)
EXACT_ATOL = 1e-9

REPRODUCED = "reproduced"
NOT_REPRODUCED = "not reproduced"
NOT_DISTINGUISHABLE = "not distinguishable at this sample size"
REFUTED = "refuted"
NOT_RUN = "not run"
#: a sentence no experiment at embedded scale can test honestly (a benchmark of 7B models, a
#: learned judge): the row shows the paper's own numbers and says why; counted on its own
NOT_TESTABLE = "not testable at embedded scale"
#: a sentence that holds by algebra or by definition (an identity of the formulas, a bound
#: that holds by construction): the data check the implementation, never the sentence, so
#: such a row is never counted as *reproduced*; a failing implementation still refutes it
PROVED = "proved; implementation checked"
VERDICTS = (REPRODUCED, PROVED, NOT_REPRODUCED, NOT_DISTINGUISHABLE, REFUTED, NOT_RUN,
            NOT_TESTABLE)

PAPER = "paper"
CHECK = "check"
KINDS = (PAPER, CHECK)

LIU = "liu"
ZHOU = "zhou"
PAPERS = {LIU: "Liu, Wan, Gao & Gündüz 2026 (arXiv:2609.21858)",
          ZHOU: "Zhou et al. 2026 (arXiv:2607.26627)"}
SHORT = {LIU: "Liu et al. 2026", ZHOU: "Zhou et al. 2026"}

#: evidence columns, in the order the INDEX shows them
SYNTHETIC, REAL, PAPER_DATA = "synthetic", "real model", "paper's own data"
COLUMNS = (SYNTHETIC, REAL, PAPER_DATA)

TIMINGS = "timings.csv"
INDEX = "INDEX.md"


# ------------------------------------------------------------------------------ results


@dataclass(frozen=True)
class Part:
    """One comparison inside a claim: its label, verdict, numbers and deciding z."""

    label: str
    verdict: str
    text: str
    z: float | None = None
    counted: bool = True
    note: str = ""


@dataclass(frozen=True)
class Outcome:
    """What one evidence column found: the combined verdict, its parts, a summary, the
    deciding z, what it shows beyond the paper, the sample it rests on, and (for a sentence
    with complementary readings) the reading that holds."""

    verdict: str
    numbers: str = ""
    parts: tuple[Part, ...] = ()
    z: float | None = None
    beyond: str = ""
    sample: str = ""
    reading: str = ""


def combine(verdicts: Iterable[str]) -> str:
    """One verdict from the parts of one sentence: refuted, else not reproduced, else not
    distinguishable if any part is, else reproduced; no part at all is not run."""
    vs = [v for v in verdicts if v != NOT_RUN]
    if not vs:
        return NOT_RUN
    for v in (REFUTED, NOT_REPRODUCED, NOT_DISTINGUISHABLE):
        if v in vs:
            return v
    return REPRODUCED


def combine_columns(verdicts: Iterable[str]) -> str:
    """One verdict from independent evidence columns (synthetic, real model) of the same
    sentence: evidence against it wins; else reproduced if any column reproduces it."""
    vs = [v for v in verdicts if v != NOT_RUN]
    if not vs:
        return NOT_RUN
    for v in (REFUTED, NOT_REPRODUCED, REPRODUCED, PROVED):
        if v in vs:
            return v
    return NOT_DISTINGUISHABLE


def outcome(parts: Sequence[Part], numbers: str = "", beyond: str = "", sample: str = "",
            reading: str = "") -> Outcome:
    """An :class:`Outcome` whose verdict combines the counted parts; its z is, among the
    parts with the deciding verdict, the largest |z| when the verdict goes against the claim
    and the smallest otherwise."""
    counted = [p for p in parts if p.counted]
    if not counted:
        raise MissingData("no comparison could be made (no counted part)")
    v = combine(p.verdict for p in counted)
    zs = [p.z for p in counted if p.verdict == v and p.z is not None and not math.isnan(p.z)]
    # against the claim: the strongest evidence; for it or undecided: the weakest part
    pick = max if v in (NOT_REPRODUCED, REFUTED) else min
    z = pick(zs, key=abs) if zs else None
    if not numbers:
        numbers = "; ".join(f"{p.label}: {p.text}" for p in parts)
    return Outcome(v, numbers, tuple(parts), z, beyond, sample, reading)


# ---------------------------------------------------------------------------- rule kinds


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


def family_crit(m: int) -> float:
    """The critical value of each of ``m`` one-sided tests judged together ("no violation
    in any row"), so that the family fails wrongly with probability :data:`ALPHA` (Šidák:
    each test's tail ``1 − (1 − ALPHA)^(1/m)``; :data:`Z` for one test).  Without it, 256
    Monte Carlo checks of a bound that holds with equality (PML = exact MPFR) would fail
    wrongly about 29% of the time."""
    m = int(m)
    if m < 1:
        raise ValueError(f"m must be >= 1, got {m}")
    if m == 1:
        return Z
    return float(stats.norm.isf(-math.expm1(math.log1p(-ALPHA) / m)))


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
                text: str = "", min_units: int = MIN_UNITS) -> Part:
    """"a ≈ b" within ``margin``: two one-sided tests at the 3σ level (TOST)."""
    if margin <= 0:
        raise ValueError(f"margin must be positive, got {margin}")
    if (small := _too_small(label, df, min_units, text)) is not None:
        return small
    c = crit(df)
    z = _z(diff, se)
    if math.isnan(z):
        v = NOT_DISTINGUISHABLE
    elif abs(diff) + _w(c, se) < margin:
        v = REPRODUCED
    elif abs(diff) - _w(c, se) > margin:
        v = NOT_REPRODUCED
    else:
        v = NOT_DISTINGUISHABLE
    text = text or f"Δ = {fmt(diff, 3)} {_se_text(se, df)} (margin ± {fmt(margin, 2)})"
    if v == NOT_DISTINGUISHABLE and _w(c, se) >= margin:
        # a rule this sample can never pass: say so rather than let it look undecided
        text += (f" — this sample cannot show equivalence within ± {fmt(margin, 2)} (the "
                 f"narrowest it could show: ± {fmt(_w(c, se), 2)})")
    return Part(label, v, text, z)


def in_range(label: str, value: float, se: float, lo: float, hi: float,
             df: float | None = None, text: str = "", min_units: int = MIN_UNITS) -> Part:
    """"the value lies in [lo, hi]": the 3σ interval inside the range reproduces, outside
    it does not, straddling an end is not distinguishable."""
    if lo > hi:
        raise ValueError(f"lo must be <= hi, got [{lo}, {hi}]")
    if (small := _too_small(label, df, min_units, text)) is not None:
        return small
    c = crit(df)
    if not np.isfinite(se):
        v, z = NOT_DISTINGUISHABLE, math.nan
    else:
        low, high = value - _w(c, se), value + _w(c, se)
        if lo <= low and high <= hi:
            v = REPRODUCED
        elif high < lo or low > hi:
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


# ------------------------------------------------------------------------------- claims


Evidence = Callable[..., Outcome]


@dataclass(frozen=True)
class Claim:
    """One row of the INDEX (see the module docstring)."""

    id: str
    paper: str
    location: str
    kind: str
    statement: str
    rule: str
    flip_test: str
    synthetic: Evidence | None = None
    real: Evidence | None = None
    paper_data: Evidence | None = None
    studies: tuple[str, ...] = ()
    scale: str = ""
    #: why no experiment of ours can test the sentence (empty: testable); such a claim has
    #: no synthetic or real-model evidence and the verdict :data:`NOT_TESTABLE`
    untestable: str = ""
    #: why the sentence holds by algebra or definition (empty: it has empirical content);
    #: such a claim's synthetic and real-model columns check the implementation, and a
    #: column that would read *reproduced* reads :data:`PROVED` (see :func:`evaluate`)
    proved: str = ""
    #: for a proved claim: the empirical content of the sentence its real-model column tests
    #: (empty: none); that column keeps its verdict (*reproduced* counts as reproduced)
    empirical: str = ""

    def __post_init__(self):
        if self.untestable and (self.synthetic is not None or self.real is not None):
            raise ValueError(f"{self.id}: an untestable claim has no synthetic or real "
                             "evidence")
        if self.untestable and self.proved:
            raise ValueError(f"{self.id}: a claim is either untestable or proved, not both")
        if self.empirical and not (self.proved and self.real is not None):
            raise ValueError(f"{self.id}: empirical content is tested by the real-model "
                             "column of a proved claim")
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")
        if self.paper not in PAPERS:
            raise ValueError(f"paper must be one of {tuple(PAPERS)}, got {self.paper!r}")

    def registry_entry(self) -> dict:
        return {"id": self.id, "paper": PAPERS[self.paper], "location": self.location,
                "kind": self.kind, "statement": self.statement, "rule": self.rule,
                "flip_test": self.flip_test,
                "evidence": [c for c, f in zip(COLUMNS, (self.synthetic, self.real,
                                                          self.paper_data), strict=True)
                             if f is not None],
                "studies": list(self.studies), "scale": self.scale or None,
                "untestable": self.untestable or None, "proved": self.proved or None,
                "empirical": self.empirical or None}


@dataclass(frozen=True)
class Row:
    claim: Claim
    columns: dict
    verdict: str


def _run(fn, arg) -> Outcome:
    if fn is None:
        return Outcome(NOT_RUN, "—")
    try:
        return fn(arg)
    except MissingData as exc:
        # absent, or present and failing its schema (BadInput names the file and the fault)
        return Outcome(NOT_RUN, str(exc))
    except (KeyError, IndexError) as exc:
        # a row or column a partial output lacks: the INDEX of any folder is written, and
        # the reason is shown in the row with the files the claim read (a TypeError or
        # ValueError is a fault of the claim's code and propagates)
        files = ", ".join(getattr(arg, "reads", ())) or "the output"
        return Outcome(NOT_RUN, f"{files}: incomplete output ({type(exc).__name__}: {exc})")


def _as_proved(o: Outcome) -> Outcome:
    """A column of a claim that holds by algebra: *reproduced* there means the
    implementation agrees with the proof, so it reads :data:`PROVED`."""
    from dataclasses import replace

    return replace(o, verdict=PROVED) if o.verdict == REPRODUCED else o


def evaluate(out_dir, claims: Iterable[Claim] | None = None, numbers=None) -> list[Row]:
    """Every claim's evidence columns on the CSVs of ``out_dir`` (missing: not run) and on
    the paper's transcribed numbers (``numbers``, default the shipped transcription)."""
    from paper_figs.claims import paper_numbers, registry

    data = Data(Path(out_dir))
    nums = paper_numbers.load() if numbers is None else numbers
    out = []
    for cl in registry.CLAIMS if claims is None else claims:
        cols = {SYNTHETIC: _run(cl.synthetic, data), REAL: _run(cl.real, data),
                PAPER_DATA: _run(cl.paper_data, nums)}
        if cl.proved:
            keep = (PAPER_DATA, REAL) if cl.empirical else (PAPER_DATA,)
            cols = {c: o if c in keep else _as_proved(o) for c, o in cols.items()}
        verdict = NOT_TESTABLE if cl.untestable else \
            combine_columns(cols[c].verdict for c in (SYNTHETIC, REAL))
        out.append(Row(cl, cols, verdict))
    return out


def summary(rows: Iterable[Row], kind: str = PAPER, paper: str | None = None) -> dict:
    """Number of claims per verdict (zeros included) among ``kind`` (and ``paper``)."""
    counts = dict.fromkeys(VERDICTS, 0)
    for r in rows:
        if r.claim.kind == kind and (paper is None or r.claim.paper == paper):
            counts[r.verdict] += 1
    return counts


def summary_line(counts: dict) -> str:
    return ", ".join(f"{v}: {n}" for v, n in counts.items())


# ------------------------------------------------------------------------------ render


def read_timings(out_dir) -> pd.DataFrame | None:
    """``timings.csv`` with a ``params`` column (empty where absent: default parameters)."""
    path = Path(out_dir) / TIMINGS
    if not path.is_file():
        return None
    try:
        t = pd.read_csv(path, dtype={"params": str}, keep_default_na=False)
    except (pd.errors.EmptyDataError, pd.errors.ParserError):
        return None
    if "study" not in t:
        return None
    if "params" not in t:
        t["params"] = ""
    t["params"] = t["params"].fillna("").astype(str).str.strip()
    if "quick" in t:
        t["quick"] = t["quick"].astype(str).str.lower().isin(("true", "1"))
    else:
        t["quick"] = False
    return t


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _params_of(claim: Claim, tinfo: dict) -> list[str]:
    out = []
    for s in claim.studies:
        t = tinfo.get(s)
        if t is not None and t["params"] not in ("", "{}", "nan"):
            out.append(f"{s} {t['params']}")
    return out


def render(rows: list[Row], out_dir) -> str:
    """INDEX.md text."""
    timings = read_timings(out_dir)
    tinfo = {} if timings is None else {str(t["study"]): t for _, t in timings.iterrows()}
    quick = sorted(s for s, t in tinfo.items() if bool(t["quick"]))
    lines = []
    if quick:
        lines += [f"> **Smoke run, not a reproduction**: {len(quick)} of {len(tinfo)} studies "
                  f"in this folder ran with `--quick` ({', '.join(quick)}); their verdicts rest "
                  "on samples far below the papers'.", ""]
    lines += ["# Reproduction index", ""]
    for p in PAPERS:
        c = summary(rows, PAPER, p)
        n = sum(c.values())
        lines.append(f"- **{SHORT[p]}**: {n} paper claims: {summary_line(c)}.")
    ck = summary(rows, CHECK)
    lines.append(f"- **package checks** (not counted as paper claims): {sum(ck.values())}: "
                 f"{summary_line(ck)}.")
    lines.append(f"- **real-model sample**: {_real_sample(out_dir)}.")
    lines += [""] + summary_table(rows)
    lines += [
        "",
        f"Generated by `python -m paper_figs.index` from the CSVs in this folder with the "
        f"claims tables of `paper_figs/claims/`; papers: {PAPERS[LIU]}; {PAPERS[ZHOU]}.",
        "",
        f"**Rules** (one level: {fmt(Z)} standard errors, one-sided tail {ALPHA:.3%}; where a "
        "standard error comes from few prompts, the Student-t quantile of the same tail). "
        "*ordering* a > b: z > c; *at least* (a bound): no violation beyond c standard errors "
        "and the lower limit above −margin; a bound checked by Monte Carlo on many rows has "
        "three registered checks: the Šidák minimum (c the family-wise value for the same "
        "tail over all rows: one bad row), the one-sided Stouffer Σz/√m above −3 (a "
        "systematic violation) and, where the bound holds with equality, Σz² in the central "
        "χ² range (calibration); *equivalence* "
        "(comparable, matches): TOST, |Δ| + c·se < margin; *range*: the c·se interval inside "
        "the stated range; *exact* / "
        f"*universal*: every row within {EXACT_ATOL:g} (two independent computations). No rule "
        f"decides on fewer than {MIN_UNITS} units (prompts, seeds, sequences) where its "
        "standard error is taken over units: such a part reads *not distinguishable — "
        f"{SAMPLE_TOO_SMALL} (n = …)*. Parts of "
        "one sentence combine into one verdict; identities of the code are shown and never "
        "counted. A claim's verdict combines the synthetic and real-model columns (evidence "
        "against it in either wins); the paper's own published numbers are judged by the "
        "same rule and shown beside it.",
        "",
        "Verdicts: *reproduced* (the data could have said otherwise and support the "
        "sentence); *proved; implementation checked* (the sentence holds by algebra or by "
        "definition, so no data could contradict it: the data check our implementation of "
        "it, and the row is counted apart from *reproduced*); *not reproduced* (a "
        "significant difference against it); *not "
        "distinguishable at this sample size*; *refuted* (an exact counterexample); *not run* "
        "(the output or the rows it needs are missing); *not testable at embedded scale* (no "
        "honest experiment of ours exists: the row shows the paper's own numbers and why).",
        "",
    ]
    for p in PAPERS:
        lines += _section(f"Claims of {PAPERS[p]}",
                          [r for r in rows if r.claim.kind == PAPER and r.claim.paper == p],
                          tinfo)
    lines += _section("Package checks (not counted as paper claims)",
                      [r for r in rows if r.claim.kind == CHECK], tinfo)
    lines += _not_covered()
    lines += _studies(rows, tinfo)
    return "\n".join(lines) + "\n"


def deciding(row: Row) -> str:
    """The evidence column(s) whose verdict is the claim's: the one a reader must look at
    (the paper's own numbers for a claim not testable at embedded scale)."""
    if row.claim.untestable:
        return PAPER_DATA
    cols = [c for c in (SYNTHETIC, REAL) if row.columns[c].verdict == row.verdict
            and row.verdict != NOT_RUN]
    return ", ".join(cols) or "—"


def reason(row: Row, width: int = 110) -> str:
    """One line on why the claim reads its verdict: the deciding part (or the reason it was
    not run) of the deciding column."""
    col = deciding(row).split(", ")[0]
    o = row.columns.get(col) if col != "—" else next(
        (row.columns[c] for c in (SYNTHETIC, REAL) if row.columns[c].numbers not in ("", "—")),
        row.columns[SYNTHETIC])
    if row.claim.untestable:
        text = f"no experiment at embedded scale; the paper's own numbers: {o.verdict}"
    elif row.claim.synthetic is None and row.claim.real is None:
        text = ("no column of ours; the paper's own numbers, shown: "
                f"{row.columns[PAPER_DATA].verdict}")
    else:
        parts = [p for p in o.parts if p.counted and p.verdict == o.verdict]
        text = f"{parts[0].label}: {parts[0].text}" if parts else o.numbers
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def summary_table(rows: list[Row]) -> list[str]:
    """The table INDEX.md opens with: one line per claim (paper claims, then the package
    checks), its verdict per evidence column, the claim's verdict, the column that decided
    it and a one-line reason; the detail per claim follows below."""
    lines = ["## Summary", "",
             "| claim | location | synthetic | real model | paper's own data | verdict | "
             "decided by | reason |", "|---|---|---|---|---|---|---|---|"]
    order = [r for p in PAPERS for r in rows if r.claim.kind == PAPER and r.claim.paper == p]
    order += [r for r in rows if r.claim.kind == CHECK]
    for r in order:
        cl = r.claim
        cells = [_verdict_cell(r.columns[col]) if fn is not None else "—" for col, fn in
                 zip(COLUMNS, (cl.synthetic, cl.real, cl.paper_data), strict=True)]
        lines.append(f"| [{cl.id}](#{cl.id.replace('_', '-')}) | {SHORT[cl.paper]}, "
                     f"{_cell(cl.location)} | {' | '.join(cells)} | **{r.verdict}** | "
                     f"{deciding(r)} | {_cell(reason(r))} |")
    return lines + [""]


def _verdict_cell(o: Outcome) -> str:
    return o.verdict if o.verdict != NOT_RUN else "not run"


def _section(title: str, rows: list[Row], tinfo: dict) -> list[str]:
    lines = [f"## {title}", "",
             "| id | location | claim | synthetic | real model | paper's own data | verdict |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        cl = r.claim
        cells = [_verdict_cell(r.columns[col]) if fn is not None else "—" for col, fn in
                 zip(COLUMNS, (cl.synthetic, cl.real, cl.paper_data), strict=True)]
        lines.append(f"| [{cl.id}](#{cl.id.replace('_', '-')}) | {_cell(cl.location)} | "
                     f"{_cell(cl.statement)} | {' | '.join(cells)} | **{r.verdict}** |")
    lines.append("")
    for r in rows:
        cl = r.claim
        lines += [f"### {cl.id.replace('_', '-')}", "",
                  f"**{r.verdict}** — {_cell(cl.statement)} ({SHORT[cl.paper]}, "
                  f"{cl.location}; kind: {cl.kind}"
                  + (f", {cl.scale}" if cl.scale else "") + ")", "",
                  f"- rule: {cl.rule}",
                  f"- flip test: `{cl.flip_test}`"]
        if cl.untestable:
            lines.append(f"- not testable at embedded scale: {_cell(cl.untestable)}")
        if cl.proved:
            lines.append(f"- holds by algebra: {_cell(cl.proved)}")
        if cl.empirical:
            lines.append(f"- empirical content, tested by the real-model column: "
                         f"{_cell(cl.empirical)}")
        params = _params_of(cl, tinfo)
        if params:
            lines.append(f"- **non-default study parameters**: {'; '.join(params)}")
        for col in COLUMNS:
            o = r.columns[col]
            fn = {SYNTHETIC: cl.synthetic, REAL: cl.real, PAPER_DATA: cl.paper_data}[col]
            if fn is None:
                continue
            z = f" (z = {fmt(o.z, 3)})" if o.z is not None else ""
            lines.append(f"- {col}: *{o.verdict}*{z}"
                         + (f" — readings: {o.reading}" if o.reading else ""))
            if o.sample:
                lines.append(f"  - sample: {o.sample}")
            if o.parts:
                for p in o.parts:
                    flag = "" if p.counted else \
                        f" (not counted: {p.note or 'an identity of the code'})"
                    pz = f", z = {fmt(p.z, 3)}" if p.z is not None else ""
                    lines.append(f"  - {p.label}: {p.verdict}{pz} — {_cell(p.text)}{flag}")
            else:
                lines.append(f"  - {_cell(o.numbers)}")
            if o.beyond:
                lines.append(f"  - beyond the paper: {_cell(o.beyond)}")
        lines.append("")
    return lines


def _not_covered() -> list[str]:
    """The sentences and tables of the papers without a row, and why."""
    from paper_figs.claims.registry import NOT_COVERED

    lines = ["## Not covered by a row", "", "| paper | location | what | why not |",
             "|---|---|---|---|"]
    lines += [f"| {SHORT[p]} | {_cell(loc)} | {_cell(what)} | {_cell(why)} |"
              for p, loc, what, why in NOT_COVERED]
    return lines + [""]


def _studies(rows: list[Row], tinfo: dict) -> list[str]:
    studies = list(dict.fromkeys(s for r in rows for s in r.claim.studies))
    lines = ["## Studies", "", "| study | mode | runtime (s) | finished (UTC) | parameters |",
             "|---|---|---:|---|---|"]
    for s in studies:
        t = tinfo.get(s)
        if t is None:
            lines.append(f"| {s} | not recorded | — | — | — |")
        else:
            lines.append(f"| {s} | {'quick' if bool(t['quick']) else 'full'} | "
                         f"{fmt(float(t['seconds']), 4) if 'seconds' in t else '—'} | "
                         f"{t.get('finished_utc', '—')} | {_cell(t['params']) or 'default'} |")
    return lines + [""]


def _real_sample(out_dir) -> str:
    """Prompts × tokens of the real embedded model's decoding runs, from their settings."""
    parts = []
    for name in ("real_wm_frontier.csv", "real_crosscheck.csv"):
        path = Path(out_dir) / name
        if not path.is_file():
            continue
        try:
            df = pd.read_csv(path)
        except (pd.errors.EmptyDataError, pd.errors.ParserError):
            continue
        if "n_prompts" in df and "setting_max_new_tokens" in df and len(df):
            parts.append(f"{name.removesuffix('.csv')}: {int(df['n_prompts'].max())} prompts × "
                         f"{int(df['setting_max_new_tokens'].iloc[0])} new tokens per "
                         f"configuration ({df.get('setting_target', pd.Series(['?'])).iloc[0]})")
    return "; ".join(parts) if parts else "no real-model decoding run in this folder"


def write_index(out_dir) -> tuple[Path, dict]:
    """Evaluate every claim on ``out_dir`` and write ``out_dir/INDEX.md``; returns the path
    and the paper claims per verdict (both papers)."""
    out_dir = Path(out_dir)
    rows = evaluate(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / INDEX
    from specbound._io import atomic_write

    atomic_write(path, render(rows, out_dir).encode())
    return path, summary(rows)


def registry_tally(claims=None) -> str:
    """The registry in one line: paper claims per paper (with how many are not testable at
    embedded scale) and the package checks; the README quotes it (verdict counts depend on an
    output folder and sit in its INDEX.md)."""
    from paper_figs.claims import registry

    cl = registry.CLAIMS if claims is None else list(claims)
    parts = []
    for p in PAPERS:
        mine = [c for c in cl if c.kind == PAPER and c.paper == p]
        nt = sum(bool(c.untestable) for c in mine)
        parts.append(f"{SHORT[p]}: {len(mine)} paper claims"
                     + (f", {nt} of them not testable at embedded scale" if nt else ""))
    parts.append(f"{sum(c.kind == CHECK for c in cl)} package checks")
    return "; ".join(parts)


def registry_json() -> str:
    from paper_figs.claims import registry

    return json.dumps([c.registry_entry() for c in registry.CLAIMS], indent=2,
                      ensure_ascii=False)


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
