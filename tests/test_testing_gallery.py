"""Proof of power: every buggy sampler of the gallery is caught, correct samplers pass at the
stated false-failure rate.

Fast tier: each batched bug at the *default* sample size with a fixed seed; the per-call
block and keyed bugs (about 0.1 ms per Python call, 1.3e5 calls at the default n) at a
reduced n whose detectable deviation is stated in the report.  Slow tier: power over seeds
(300 seeds per batched bug: all caught bounds the power below by 0.990 at 95% confidence)
and the block and keyed bugs at their default n.  The false-failure rate of the goodness of
fit is measured on a correct sampler (fast: 200 seeds at rate 0.1; slow: 2,000 at 0.05).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from specbound.testing import check_acceptance, check_lossless
from specbound.testing import gallery as G

BATCHED = [b for b in G.GALLERY if b.protocol == "batch"]
PER_CALL = [b for b in G.GALLERY if b.protocol != "batch"]


def test_gallery_has_at_least_eight_bugs_each_with_a_description():
    assert len(G.GALLERY) >= 8 and len({b.name for b in G.GALLERY}) == len(G.GALLERY)
    assert all(len(b.description) > 30 for b in G.GALLERY)
    assert {b.check for b in G.GALLERY} == {"lossless", "acceptance", "block",
                                            "drafter_invariance"}


@pytest.mark.parametrize("bug", BATCHED, ids=lambda b: b.name)
def test_batched_bug_is_caught_at_the_default_n(bug):
    r = G.catch(bug, seed=0)
    assert not r.passed, r
    assert r.min_detectable <= 0.01  # the default n's guarantee
    assert bug.name in str(r) and "FAILED" in str(r)


@pytest.mark.parametrize("bug", PER_CALL, ids=lambda b: b.name)
def test_per_call_bug_is_caught_at_a_small_n(bug):
    r = G.catch(bug, seed=0, n=3000 if bug.check == "block" else 1000)
    assert not r.passed, r


@pytest.mark.parametrize("bug", PER_CALL, ids=lambda b: b.name)
def test_correct_twin_of_each_per_call_bug_passes(bug):
    """The reference of the same protocol on the same case passes (rate 1e-3 each)."""
    ref = G.Bug("reference", G.sd_block if bug.protocol == "block" else G.race_keyed,
                bug.check, bug.protocol, V=bug.V, L=bug.L)
    r = G.catch(ref, seed=1, n=3000 if bug.check == "block" else 1000)
    assert r.passed, r


def _fail_fraction(n_seeds, n, rate):
    p, q = G.realistic_pair(8, seed=11)
    fails = sum(not check_lossless(G.sd_batch, p, q, protocol="batch", n=n, seed=s,
                                   false_failure_rate=rate).passed for s in range(n_seeds))
    return fails


def test_false_failure_rate_holds_on_a_correct_sampler():
    """200 seeds at rate 0.1: the failures are Binomial(200, <= 0.1); more than its 1 - 1e-4
    quantile (38) would contradict the stated rate (this test's own false-failure rate:
    1e-4)."""
    fails = _fail_fraction(200, 5000, 0.1)
    assert fails <= stats.binom.isf(1e-4, 200, 0.1)
    assert fails >= 1  # the test can fail a correct sampler: it is not vacuous


@pytest.mark.slow
def test_false_failure_rate_holds_at_scale():
    fails = _fail_fraction(2000, 20_000, 0.05)
    assert fails <= stats.binom.isf(1e-4, 2000, 0.05)


@pytest.mark.slow
@pytest.mark.parametrize("bug", BATCHED, ids=lambda b: b.name)
def test_power_over_seeds(bug):
    caught = [not G.catch(bug, seed=s, case_seed=s % 10).passed for s in range(300)]
    assert all(caught), f"{bug.name}: caught {sum(caught)} of 300"


@pytest.mark.slow
@pytest.mark.parametrize("bug", PER_CALL, ids=lambda b: b.name)
def test_per_call_bug_is_caught_at_the_default_n(bug):
    for s in range(3):
        r = G.catch(bug, seed=s, case_seed=s)
        assert not r.passed, r


@pytest.mark.slow
def test_references_pass_at_the_default_n():
    p, q = G.realistic_pair(1000, seed=2)
    assert check_lossless(G.sd_batch, p, q, protocol="batch", seed=3).passed
    assert check_acceptance(G.sd_batch, p, q, protocol="batch", seed=3).passed
    assert np.isfinite(check_lossless(G.sd_batch, p, q, protocol="batch", seed=4).pvalue)
