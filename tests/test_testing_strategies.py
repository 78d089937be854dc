"""specbound.testing.strategies: the public hypothesis strategies and the rate bookkeeping."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings

from specbound import theory
from specbound.testing import check_lossless, specinfer_acceptance
from specbound.testing.gallery import sd_batch
from specbound.testing.strategies import example_rate, multi_draft_sets, prob_pairs

EXAMPLES = 8


@settings(max_examples=EXAMPLES, derandomize=True, deadline=None)
@given(prob_pairs(max_size=12))
def test_reference_sampler_is_lossless_on_awkward_pairs(pq):
    """Overall false-failure rate 1e-3, split over the examples (example_rate)."""
    p, q = pq
    r = check_lossless(sd_batch, p, q, protocol="batch", n=20_000, seed=0,
                       false_failure_rate=example_rate(1e-3, EXAMPLES))
    assert r.passed, r


@settings(max_examples=50, derandomize=True, deadline=None)
@given(multi_draft_sets(max_size=12, max_B=4))
def test_specinfer_acceptance_is_at_least_one_draft(pqs):
    p, qs = pqs
    assert qs.shape[1] == p.shape[0] and np.allclose(qs.sum(axis=1), 1.0)
    one = 1.0 - theory.tv_distance(p, qs[0])
    assert specinfer_acceptance(p, qs) >= one - 1e-12
    assert specinfer_acceptance(p, qs[:1]) == specinfer_acceptance(p, qs[0], 1)


def test_example_rate_is_the_bonferroni_share():
    assert example_rate(1e-3, 20) == 5e-5
