"""The verdict vocabulary of ``INDEX.md``: verdicts, evidence columns, the claim record and how
parts and columns combine (the rule kinds are in :mod:`paper_figs.claims.rules`).

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
    margin``; else not distinguishable.  A sentence that holds "at every L" (B, T_eval,
    row) is one family of such tests: reproduced when every member passes at ``c`` (an
    intersection-union test, no correction), not reproduced when some member lies outside
    the margin at the Šidák critical value of the family (``family_crit(m)``: a union of
    ``m`` tests, so a sentence true at every member fails wrongly with probability at most
    the stated tail, not ``m`` times it).  The same holds for ``in_range`` over cells.
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

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from paper_figs.claims.data import MissingData

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

