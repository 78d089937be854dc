"""specbound.testing: the checks, their results, their defaults and their refusals.

Every check below on a correct sampler fails by chance with probability at most its
``false_failure_rate`` (1e-3 unless stated; fixed seeds make each run deterministic); the
checks on wrong samplers are caught with z-scores far beyond any threshold.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from specbound import theory
from specbound.testing import (
    CheckResult,
    assert_acceptance,
    assert_lossless,
    check_acceptance,
    check_block,
    check_drafter_invariance,
    check_induced,
    check_lossless,
    draw,
    specinfer_acceptance,
)
from specbound.testing import gallery as G
from specbound.testing.adapters import specbound_keyed, specbound_multi, specbound_step

P8, Q8 = G.realistic_pair(8, seed=3)


def test_reference_batch_passes_at_the_default_n_with_stated_power():
    r = check_lossless(G.sd_batch, P8, Q8, protocol="batch", seed=1)
    assert isinstance(r, CheckResult) and r.passed and r.check == "lossless"
    assert r.n == 113_456  # lambda*(7 dof, 1e-3, 0.99) / (4 * 0.01^2)
    assert r.false_failure_rate == 1e-3 and r.power == 0.99
    assert r.min_detectable <= 0.01 and "TV" in r.min_detectable_of
    assert r.observed.sum() == r.n and np.array_equal(r.expected, P8)
    a = check_acceptance(G.sd_batch, P8, Q8, protocol="batch", seed=1)
    assert a.passed and a.min_detectable <= 0.01
    assert abs(a.statistic - (1 - theory.tv_distance(P8, Q8))) < 0.01
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.passed = False


def test_failure_report_names_the_cell_and_assert_raises_it():
    r = check_lossless(G.resample_from_p, P8, Q8, protocol="batch", seed=0, n=20_000)
    assert not r.passed and r.pvalue < 1e-3
    text = str(r)
    assert "FAILED" in text and "token" in text and "expected" in text
    assert "resample_from_p" in text
    with pytest.raises(AssertionError, match="failing: token"):
        assert_lossless(G.resample_from_p, P8, Q8, protocol="batch", n=20_000)
    ok = assert_acceptance(G.sd_batch, P8, Q8, protocol="batch", n=20_000)
    assert ok.passed and "passed" in str(ok)


def test_impossible_token_fails_outright():
    p = np.array([0.5, 0.5, 0.0, 0.0])
    q = np.array([0.25, 0.25, 0.25, 0.25])

    def emits_drafts(P, Q, X, rng):  # accepts everything: emits q
        return X, np.ones(X.shape[0], bool)

    r = check_lossless(emits_drafts, p, q, protocol="batch", n=2000)
    assert not r.passed and r.pvalue == 0.0
    assert "has probability 0 but was emitted" in r.failing


def test_induced_and_lossless_tell_a_lossy_rule_apart():
    lam = 0.3
    nu = lam * P8 + (1 - lam) * Q8

    def interpolation(P, Q, X, rng):  # lossless SD against nu
        return G.sd_batch(np.broadcast_to(nu, P.shape), Q, X, rng)

    ri = check_induced(interpolation, P8, Q8, "interpolation", lam=lam, protocol="batch")
    assert ri.passed, ri
    rl = check_lossless(interpolation, P8, Q8, protocol="batch")
    assert not rl.passed
    ra = check_acceptance(interpolation, P8, Q8, rule="interpolation", lam=lam,
                          protocol="batch")
    assert ra.passed, ra
    rg = check_induced(interpolation, P8, Q8, law=nu, protocol="batch")
    assert rg.passed


def test_draws_are_shared_between_checks():
    d = draw(G.sd_batch, P8, Q8, protocol="batch", n=50_000, seed=2)
    assert d.n == 50_000 and d.seconds_total >= d.seconds_sampler > 0
    assert check_lossless(d, P8, Q8).passed and check_acceptance(d, P8, Q8).passed
    with pytest.raises(ValueError, match="another"):
        check_lossless(d, Q8, P8)


def test_package_samplers_pass_through_the_public_protocols():
    """The package's own sd (step protocol), specinfer (multi) and keyed race; three checks
    at rate 1e-3 each plus a deterministic invariance check: false-failure rate <= 3e-3."""
    p, q = G.realistic_pair(4, seed=5)
    r = check_lossless(specbound_step("sd"), p, q, n=1000, seed=0)
    assert r.passed, r
    B = 2
    ra = check_acceptance(specbound_multi("specinfer"), p, q, protocol="multi", B=B,
                          scheme="specinfer", n=1000, seed=0)
    assert ra.passed, ra
    assert abs(specinfer_acceptance(p, q, 1) - (1 - theory.tv_distance(p, q))) < 1e-12
    qs = np.stack([q, G.realistic_pair(4, seed=6)[1]])
    ri = check_drafter_invariance(specbound_keyed("exp_race"), p, qs, n=500, seed=0)
    assert ri.passed, ri


def test_block_reference_passes_and_names_theory():
    P = np.stack([G.realistic_pair(5, seed=s)[0] for s in range(3)])
    Q = np.stack([G.realistic_pair(5, seed=s)[1] for s in range(2)])
    r = check_block(G.sd_block, P, Q, n=6000, seed=0)
    assert r.passed, r
    assert len(r.parts) == 4 and "expected_block_tokens" in str(r)
    bad = check_block(G.block_off_by_one, P, Q, n=6000, seed=0)
    assert not bad.passed and "accepted count: n_accepted = 0 observed 0 times" in bad.failing
    assert "[FAIL] position 0" in str(bad)


# ------------------------------------------------------------------------------ bad input


def _batch_returning(fn):
    def sampler(P, Q, X, rng):
        return fn(X)
    return sampler


@pytest.mark.parametrize(("out", "err", "match"), [
    (lambda X: (X + 100, np.zeros(len(X), bool)), ValueError, "outside the vocabulary"),
    (lambda X: (X.astype(float) + 0.5, np.zeros(len(X), bool)), TypeError, "non-integer"),
    (lambda X: (np.full(len(X), np.nan), np.zeros(len(X), bool)), TypeError, "non-integer"),
    (lambda X: (X[:-1], np.zeros(len(X) - 1, bool)), ValueError, "shape"),
    (lambda X: X, TypeError, "pair"),
    (lambda X: ((X + 1) % 8, np.ones(len(X), bool)), ValueError, "accepted=True"),
])
def test_bad_batch_outputs_name_the_sampler_and_the_call(out, err, match):
    with pytest.raises(err, match=match) as info:
        check_lossless(_batch_returning(out), P8, Q8, protocol="batch", n=500, name="mine")
    assert str(info.value).startswith("sampler: mine (protocol") and "seed=0" in str(info.value)


def test_bad_step_outputs_and_a_raising_sampler():
    def raises(p, q, x, rng):
        if x == 3:
            raise RuntimeError("boom")
        return x, True

    with pytest.raises(ValueError, match=r"raised RuntimeError: boom") as info:
        check_lossless(raises, P8, Q8, n=500)
    assert "x=3" in str(info.value) and "p=[" in str(info.value)
    with pytest.raises(TypeError, match="not an integer"):
        check_lossless(lambda p, q, x, rng: ("a", False), P8, Q8, n=200)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        check_lossless(lambda p, q, x, rng: (-1, False), P8, Q8, n=200)
    with pytest.raises(TypeError, match="not a bool"):
        check_lossless(lambda p, q, x, rng: (x, "yes"), P8, Q8, n=200)

    def writes(p, q, x, rng):
        p[0] = 1.0
        return x, True

    with pytest.raises(ValueError, match="read-only"):
        check_lossless(writes, P8, Q8, n=200)


def test_bad_arguments_are_refused_by_name():
    with pytest.raises(ValueError, match="^p: "):
        check_lossless(G.sd_batch, P8 * 1.1, Q8)
    with pytest.raises(ValueError, match="^rule: "):
        check_induced(G.sd_batch, P8, Q8, "nonsense")
    with pytest.raises(ValueError, match="^n: .*at least"):
        check_lossless(G.sd_batch, P8, Q8, protocol="batch", n=1000, detect=0.01)
    with pytest.raises(ValueError, match="^n: "):
        check_lossless(G.sd_batch, P8, Q8, protocol="batch", n=10)
    with pytest.raises(ValueError, match="^false_failure_rate: "):
        check_lossless(G.sd_batch, P8, Q8, false_failure_rate=0.0)
    with pytest.raises(ValueError, match="^protocol: "):
        check_lossless(G.sd_batch, P8, Q8, protocol="tree")
    with pytest.raises(ValueError, match="^P: "):
        check_block(G.sd_block, np.stack([P8, P8]), np.stack([Q8, Q8]))
    with pytest.raises(ValueError, match="^qs: "):
        check_drafter_invariance(G.race_keyed, P8, Q8[None, :])
    with pytest.raises(ValueError, match="^scheme: "):
        check_acceptance(G.sd_batch, P8, Q8, scheme="warp")


def test_power_alone_also_refuses_a_small_n():
    with pytest.raises(ValueError, match="^n: "):
        check_lossless(G.sd_batch, P8, Q8, protocol="batch", n=2000, power=0.99)
    with pytest.raises(ValueError, match="^n: "):
        check_acceptance(G.sd_batch, P8, Q8, protocol="batch", n=2000, power=0.99)
    r = check_lossless(G.sd_batch, P8, Q8, protocol="batch", n=2000, detect=0.2, power=0.9)
    assert r.passed and r.min_detectable <= 0.2


def _rrs(p, qs, xs, rng):
    """Recursive rejection sampling with one draft law per draft (reference for the test)."""
    cur = np.asarray(p, float)
    for j, x in enumerate(xs):
        qj = qs[j]
        if rng.random() * qj[x] < cur[x]:
            return int(x), j
        res = np.maximum(cur - qj, 0.0)
        cur = res / res.sum()
    return int(G._rows_choice(cur[None, :], np.array([rng.random()]))[0]), -1


def test_multi_protocols_with_one_law_per_draft_and_batched():
    """Two checks of the per-call and two of the batched variant (rate 4e-3 together)."""
    p, q = G.realistic_pair(6, seed=8)
    qs = np.stack([q, G.realistic_pair(6, seed=9)[1], np.full(6, 1 / 6)])

    def multi(p_, q_, xs, rng):
        return _rrs(p_, q_, xs, rng)

    d = draw(multi, p, qs, protocol="multi", n=2000, seed=0)
    assert d.B == 3 and check_lossless(d, p, qs).passed
    assert check_acceptance(d, p, qs, scheme="specinfer").passed

    def multi_batch(P, Q, XS, rng):
        # one shared law: Q is (m, V); one law per draft: (m, B, V)
        out = [_rrs(P[i], Q[i] if Q.ndim == 3 else [Q[i]] * XS.shape[1], XS[i], rng)
               for i in range(XS.shape[0])]
        return np.array([t for t, _ in out]), np.array([j for _, j in out])

    rb = check_lossless(multi_batch, p, q, protocol="multi_batch", B=2, n=2000, seed=1)
    assert rb.passed, rb
    ra = check_acceptance(multi_batch, p, q, protocol="multi_batch", B=2, n=2000, seed=1,
                          scheme="specinfer")
    assert ra.passed and abs(ra.statistic - specinfer_acceptance(p, q, 2)) < 0.05
