"""The claims engine behind ``INDEX.md``, one public entry over its parts (kept for the
callers that import it; new code imports the part it needs, or :mod:`paper_figs.index`):

- :mod:`paper_figs.claims.verdicts` -- the verdict vocabulary, evidence columns, the claim
  record, how parts and columns combine;
- :mod:`paper_figs.claims.rules` -- the rule kinds (ordering, at least, equivalence, range,
  exact, universal, bound family, sweep) at one level, three standard errors;
- :mod:`paper_figs.claims.data` -- data access: the CSVs of an output folder, each checked
  against its schema, and the INDEX-time CSVs;
- :mod:`paper_figs.claims.evaluation` -- every claim's evidence columns on a folder;
- :mod:`paper_figs.claims.render` -- ``INDEX.md``, the registry as JSON and its tally.

Nothing inside :mod:`paper_figs.claims` imports this module (the claims tables import the
parts), so the package's import graph has no cycle (``tests/test_claims_imports.py``).
"""

# ruff: noqa: F401  (the facade re-exports its parts)
from __future__ import annotations

from paper_figs.claims.data import BadInput, Data, MissingData, rows
from paper_figs.claims.evaluation import _as_proved, _run, evaluate, summary, summary_line
from paper_figs.claims.render import (
    _cell,
    _not_covered,
    _params_of,
    _real_sample,
    _section,
    _studies,
    _verdict_cell,
    deciding,
    read_timings,
    reason,
    registry_json,
    registry_tally,
    render,
    summary_table,
    write_index,
)
from paper_figs.claims.rules import (
    ALPHA,
    EXACT_ATOL,
    MIN_UNITS,
    SAMPLE_TOO_SMALL,
    Z,
    _se_text,
    _too_small,
    _w,
    _z,
    at_least,
    bound_family,
    crit,
    equivalence,
    exact,
    family_crit,
    few,
    fmt,
    in_range,
    ordering,
    sweep,
    universal,
)
from paper_figs.claims.verdicts import (
    CHECK,
    COLUMNS,
    INDEX,
    KINDS,
    LIU,
    NOT_DISTINGUISHABLE,
    NOT_REPRODUCED,
    NOT_RUN,
    NOT_TESTABLE,
    PAPER,
    PAPER_DATA,
    PAPERS,
    PROVED,
    REAL,
    REFUTED,
    REPRODUCED,
    SHORT,
    SYNTHETIC,
    TIMINGS,
    VERDICTS,
    ZHOU,
    Claim,
    Evidence,
    Outcome,
    Part,
    Row,
    combine,
    combine_columns,
    outcome,
)

__all__ = [name for name in dir() if not name.startswith("__") and name != "annotations"]
