"""One sentence, several equivalence tests (``paper_figs.claims.rules.equivalence`` with
``family``): "PFR's LPPL matches VSpS's at every L" (Liu, Wan, Gao & Gündüz 2026,
arXiv:2609.21858, App. D.3) is reproduced only where every L passes its own TOST (an
intersection-union test: no correction), and *not reproduced* only where some L lies outside
the margin at the Šidák level of the family of L (a union of tests: without the correction a
sentence true at every one of four L would read *not reproduced* four times as often as the
stated level).  A real deficit at one L still turns the sentence."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from paper_figs.claims import engine as E
from paper_figs.claims._pairs import Pair
from paper_figs.claims.liu import LPPL_MARGIN, rule_lppl
from paper_figs.claims.rules import ALPHA, Z, crit, equivalence, family_crit, in_range

#: VSpS's LPPL in the fabricated pairs (nats/token) and the margin it implies
REF = 0.474
MARGIN = LPPL_MARGIN * REF


def _pairs(diffs, se, df=None):
    return [Pair(L, REF + d, REF, d, se, df) for L, d in zip((1, 2, 3, 4), diffs, strict=True)]


def _between(se, df=None, m=4):
    """A difference outside the margin at the per-test level, inside it at the family's."""
    c, cf = crit(df), family_crit(m, df)
    assert cf > c
    return MARGIN + 0.5 * (c + cf) * se


@pytest.mark.parametrize("df", [None, 7.0])
def test_one_l_outside_at_the_per_test_level_only_is_not_distinguishable(df):
    se = 0.1 * MARGIN
    d = _between(se, df)
    alone = rule_lppl(_pairs([d, 0, 0, 0], se, df)[:1], "L")
    assert alone.verdict == E.NOT_REPRODUCED  # one test: its own level
    got = rule_lppl(_pairs([d, 0, 0, 0], se, df), "L")
    assert got.verdict == E.NOT_DISTINGUISHABLE, got
    assert "family-wise" in got.parts[0].text


@pytest.mark.parametrize("df", [None, 7.0])
def test_a_real_deficit_at_one_l_still_turns_the_sentence(df):
    se = 0.1 * MARGIN
    d = MARGIN + 1.01 * family_crit(4, df) * se
    got = rule_lppl(_pairs([0, 0, -d, 0], se, df), "L")
    assert got.verdict == E.NOT_REPRODUCED, got
    assert [p.verdict for p in got.parts].count(E.NOT_REPRODUCED) == 1


def test_reproduced_needs_every_l_at_its_own_level():
    """The intersection-union side is unchanged: every L inside at the per-test level
    reproduces, one L that is not (undecided) keeps the sentence undecided."""
    se = 0.1 * MARGIN
    inside = MARGIN - 1.01 * crit(None) * se
    assert rule_lppl(_pairs([inside, -inside, 0, inside], se), "L").verdict == E.REPRODUCED
    edge = MARGIN - 0.5 * crit(None) * se
    assert rule_lppl(_pairs([inside, edge, 0, 0], se), "L").verdict == E.NOT_DISTINGUISHABLE


def test_family_crit_has_the_sidak_tail_on_both_references():
    for m in (1, 2, 4, 16, 256):
        tail = 1 - (1 - ALPHA) ** (1 / m)
        assert stats.norm.sf(family_crit(m)) == pytest.approx(tail, rel=1e-9)
        assert stats.t.sf(family_crit(m, 7.0), 7.0) == pytest.approx(tail, rel=1e-9)
    assert family_crit(1) == Z and family_crit(1, 7.0) == crit(7.0)
    assert family_crit(4, math.nan) == math.inf


def test_a_sentence_true_at_every_l_reads_not_reproduced_at_most_at_the_level():
    """Monte Carlo of the worst case (every L exactly at the margin, z standard normal):
    the family of four reads *not reproduced* with probability ALPHA = 0.135% (27 expected
    in 20,000 families); without the correction 0.54% (108 expected).  Passes for a count
    at most 48: wrongly fails with probability 2e-4 (Poisson(27) above 48); the
    uncorrected rule fails it with probability above 1 − 1e-9 (Poisson(108) at most 48).
    Fixed seed."""
    rng = np.random.default_rng(20261207)
    se = 0.1 * MARGIN
    z = rng.standard_normal((20_000, 4))
    bad = 0
    for row in z:
        parts = [equivalence("", MARGIN + x * se, se, MARGIN, family=4) for x in row]
        bad += any(p.verdict == E.NOT_REPRODUCED for p in parts)
    assert bad <= 48, bad
    uncorrected = int(np.sum(z.max(axis=1) > Z))
    assert uncorrected > 48, uncorrected  # the test would catch the per-test rule


def test_family_must_be_positive():
    with pytest.raises(ValueError, match="family must be"):
        equivalence("", 0.0, 0.1, 1.0, family=0)
    with pytest.raises(ValueError, match="family must be"):
        in_range("", 0.0, 0.1, -1.0, 1.0, family=0)
