"""Tests of the synthetic distribution families (specbound.sim.distributions)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from scipy import stats

from specbound.sim.distributions import (
    NoisyDraft,
    dirichlet,
    logit_noise_draft,
    mixture_draft,
    noisy_draft,
    softmax_gaussian,
    temperature_draft,
    top_k,
    zipf,
    zipf_law,
)
from specbound.testing.strategies import prob_pairs, prob_vectors
from tests._stats import assert_within_se


def _is_prob(x, shape):
    x = np.asarray(x)
    assert x.shape == shape and x.dtype == np.float64
    assert np.all(np.isfinite(x)) and np.all(x >= 0)
    np.testing.assert_allclose(x.sum(axis=-1), 1.0, rtol=0, atol=1e-12)


def _tv(p, q):
    return 0.5 * np.abs(np.asarray(p) - np.asarray(q)).sum(axis=-1)


# ----------------------------------------------------------------------------- targets


@pytest.mark.parametrize(
    ("fn", "kwargs"),
    [
        (dirichlet, {"alpha": 1.0}),
        (dirichlet, {"alpha": 0.005}),
        (dirichlet, {"alpha": 50.0}),
        (zipf, {"s": 0.0}),
        (zipf, {"s": 1.1}),
        (zipf, {"s": 8.0}),
        (softmax_gaussian, {}),
        (softmax_gaussian, {"temperature": 0.01, "scale": 3.0}),
        (softmax_gaussian, {"temperature": 100.0}),
        (softmax_gaussian, {"scale": 0.0}),
    ],
)
@pytest.mark.parametrize("n", [1, 2, 37, 2000])
def test_targets_are_probability_vectors_and_deterministic(fn, kwargs, n):
    one = fn(n, **kwargs, seed=5)
    _is_prob(one, (n,))
    batch = fn(n, **kwargs, size=7, seed=5)
    _is_prob(batch, (7, n))
    np.testing.assert_array_equal(fn(n, **kwargs, size=7, seed=5), batch)
    gen = fn(n, **kwargs, size=7, seed=np.random.default_rng(5))
    np.testing.assert_array_equal(gen, batch)  # SPEC 7: int seed == default_rng(seed)
    ss = fn(n, **kwargs, size=7, seed=np.random.SeedSequence(5))
    np.testing.assert_array_equal(ss, batch)
    if n > 1 and not (fn is zipf and kwargs["s"] == 0.0) and kwargs.get("scale", 1) != 0:
        assert not np.array_equal(fn(n, **kwargs, size=7, seed=6), batch)


def test_dirichlet_mean_and_vector_alpha():
    # mean of 20,000 draws vs alpha / sum(alpha): |z| < 4.9 per coordinate, 4 coordinates,
    # false-failure rate <= 4e-6.
    alpha = np.array([0.5, 1.0, 2.0, 4.5])
    x = dirichlet(4, alpha, size=20_000, seed=1)
    a0 = alpha.sum()
    mean = alpha / a0
    var = mean * (1 - mean) / (a0 + 1)
    for i, m in enumerate(x.mean(axis=0)):
        assert_within_se(m, mean[i], math.sqrt(var[i] / 20_000), z=4.9, label=f"coordinate {i}")


def test_zipf_values_and_permutation():
    n, s = 50, 1.3
    x = zipf(n, s, size=200, seed=2)
    w = np.arange(1, n + 1) ** -s
    w /= w.sum()
    np.testing.assert_allclose(np.sort(x, axis=1)[:, ::-1], np.broadcast_to(w, (200, n)),
                               rtol=1e-15)
    # the argmax position is uniform over the 50 tokens: chi-square-free sanity check that
    # at least 40 distinct positions appear among 200 rows (P(fail) < 1e-10 if uniform)
    assert len(np.unique(np.argmax(x, axis=1))) >= 40
    np.testing.assert_allclose(zipf(5, 0.0, seed=0), np.full(5, 0.2))


def test_softmax_gaussian_depends_on_scale_over_temperature():
    a = softmax_gaussian(30, temperature=2.0, scale=3.0, size=4, seed=9)
    b = softmax_gaussian(30, temperature=1.0, scale=1.5, size=4, seed=9)
    np.testing.assert_allclose(a, b, rtol=1e-12)
    # log-ratio of two tokens equals the difference of N(0, 1) logits times scale / T
    z = np.random.default_rng(9).standard_normal((4, 30))
    np.testing.assert_allclose(np.log(a[:, 1] / a[:, 0]), 1.5 * (z[:, 1] - z[:, 0]),
                               rtol=1e-9)


# ----------------------------------------------------------------------------- top-k


def test_top_k_examples():
    np.testing.assert_allclose(top_k([0.1, 0.4, 0.3, 0.2], 2), [0, 4 / 7, 3 / 7, 0])
    # ties at the boundary: the lower token id wins
    np.testing.assert_allclose(top_k([0.25, 0.25, 0.25, 0.25], 2), [0.5, 0.5, 0, 0])
    np.testing.assert_allclose(top_k([0.2, 0.8], 5), [0.2, 0.8])
    np.testing.assert_allclose(top_k([[0.0, 1.0, 0.0], [0.5, 0.2, 0.3]], 2),
                               [[0.0, 1.0, 0.0], [0.5 / 0.8, 0.0, 0.3 / 0.8]])


@given(p=prob_vectors(max_size=100), k=st.integers(1, 120))
def test_top_k_property(p, k):
    q = top_k(p, k)
    _is_prob(q, p.shape)
    kept = q > 0
    assert np.count_nonzero(kept) <= k
    assert np.all(p[kept] > 0)
    if np.any(kept) and np.any(~kept):
        assert p[kept].min() >= p[~kept].max()  # nothing dropped beats anything kept
    np.testing.assert_allclose(q[kept], p[kept] / p[kept].sum(), rtol=1e-12)
    if k >= np.count_nonzero(p):
        np.testing.assert_allclose(q, p / p.sum(), rtol=1e-12, atol=0)


# ----------------------------------------------------------------------------- drafts


@given(p=prob_vectors(max_size=100), T=st.floats(0.05, 20.0))
def test_temperature_draft_property(p, T):
    q = temperature_draft(p, T)
    _is_prob(q, p.shape)
    assert np.all(q[p == 0] == 0)
    pos = p > 0
    lz = np.log(p[pos]) / T
    lq = lz - lz.max() - np.log(np.exp(lz - lz.max()).sum())
    assert np.all(q[pos][lq > -700] > 0)  # only entries below ~1e-304 may underflow
    ref = p[pos] ** (1.0 / T)
    if np.all(ref > 1e-300) and ref.sum() > 0:
        np.testing.assert_allclose(q[pos], ref / ref.sum(), rtol=1e-9, atol=1e-300)


def test_temperature_draft_limits_and_batch():
    p = np.array([0.1, 0.0, 0.6, 0.3])
    np.testing.assert_allclose(temperature_draft(p, 1.0), p, rtol=1e-14)
    np.testing.assert_array_equal(temperature_draft(p, 1e-6), [0, 0, 1, 0])
    np.testing.assert_allclose(temperature_draft(p, 1e6), [1 / 3, 0, 1 / 3, 1 / 3], rtol=1e-5)
    P = np.stack([p, p[::-1]])
    _is_prob(temperature_draft(P, 2.0), (2, 4))


@given(pq=prob_pairs(max_size=80), w=st.floats(0.0, 1.0))
def test_mixture_draft_property(pq, w):
    p, other = pq
    q = mixture_draft(p, other, w)
    _is_prob(q, p.shape)
    assert _tv(p, q) == pytest.approx(w * _tv(p, other), abs=1e-12)


def test_mixture_draft_broadcast():
    P = dirichlet(6, 1.0, size=3, seed=0)
    o = np.full(6, 1 / 6)
    q = mixture_draft(P, o, 0.5)
    assert q.shape == (3, 6)
    np.testing.assert_allclose(q, 0.5 * P + 0.5 * o)


_TARGETS = (
    [zipf(n, s, seed=i) for i, (n, s) in enumerate([(10, 1.0), (1000, 1.1), (50_000, 1.0)])]
    + [dirichlet(n, a, seed=10 + i) for i, (n, a) in enumerate([(2, 1.0), (30, 0.1),
                                                               (500, 1.0)])]
    + [softmax_gaussian(n, 0.7, 2.0, seed=20 + i) for i, n in enumerate([5, 200, 4096])]
    + [top_k(zipf(300, 1.2, seed=30), 20), np.array([0.5, 0.0, 0.25, 0.0, 0.25])]
)


@pytest.mark.parametrize("i", range(len(_TARGETS)))
@pytest.mark.parametrize("tv", [1e-4, 0.01, 0.1, 0.3])
def test_noisy_draft_hits_requested_tv(i, tv):
    p = _TARGETS[i]
    res = noisy_draft(p, tv, seed=i)
    assert isinstance(res, NoisyDraft)
    _is_prob(res.q, p.shape)
    assert abs(res.tv - tv) <= 1e-6
    assert res.tv == pytest.approx(_tv(p, res.q), abs=1e-15)
    assert np.all(res.q[p == 0] == 0)  # log 0 = -inf stays -inf
    assert res.sigma > 0


@given(p=prob_vectors(min_size=2, max_size=150), frac=st.floats(0.0, 0.95),
       seed=st.integers(0, 2**32 - 1))
def test_noisy_draft_property(p, frac, seed):
    eps = np.random.default_rng(seed).standard_normal(p.shape)
    limit = 1.0 - p[np.argmax(np.where(p > 0, eps, -np.inf))]
    tv = frac * limit
    assume(limit - tv > 1e-5)
    res = noisy_draft(p, tv, seed=seed)
    assert abs(res.tv - tv) <= 1e-6
    _is_prob(res.q, p.shape)
    assert np.all(res.q[p == 0] == 0)


@given(vocab_size=st.integers(1, 400), s=st.floats(0.0, 5.0))
def test_zipf_law_is_a_sorted_probability_vector(vocab_size, s):
    """*property*: a probability vector, non-increasing in token order, with
    ``p_k / p_1 = k^{-s}``, and the values of :func:`zipf` before its permutation."""
    p = zipf_law(vocab_size, s)
    _is_prob(p, (vocab_size,))
    assert np.all(np.diff(p) <= 0)
    k = np.arange(1, vocab_size + 1)
    np.testing.assert_allclose(p / p[0], k ** (-s), rtol=1e-12)
    np.testing.assert_array_equal(np.sort(zipf(vocab_size, s, seed=1))[::-1], p)


def test_zipf_law_values_and_validation():
    np.testing.assert_array_equal(zipf_law(4, 0.0), np.full(4, 0.25))
    h = 1 + 1 / 2 + 1 / 3
    np.testing.assert_allclose(zipf_law(3, 1.0), [1 / h, 1 / (2 * h), 1 / (3 * h)], rtol=1e-15)
    for bad, name in [((0, 1.0), "vocab_size"), ((2.5, 1.0), "vocab_size"),
                      ((3, -0.1), "s"), ((3, "1"), "s"), ((3, float("nan")), "s")]:
        with pytest.raises(ValueError, match=name):
            zipf_law(*bad)


@given(p=prob_vectors(min_size=1, max_size=150), seed=st.integers(0, 2**32 - 1),
       sigma=st.floats(0.0, 20.0))
def test_logit_noise_draft_property(p, seed, sigma):
    """*property*: a probability vector with the target's support; ``sigma = 0`` gives the
    target back; it is the family :func:`noisy_draft` searches (same direction from the
    same seed, at the scale ``noisy_draft`` found)."""
    eps = np.random.default_rng(seed).standard_normal(p.shape)
    q = logit_noise_draft(p, eps, sigma)
    _is_prob(q, p.shape)
    assert np.all(q[p == 0] == 0)
    np.testing.assert_allclose(logit_noise_draft(p, eps, 0.0), p, rtol=1e-12, atol=1e-300)
    limit = 1.0 - p[np.argmax(np.where(p > 0, eps, -np.inf))]
    assume(limit > 0.02)
    res = noisy_draft(p, 0.5 * limit, seed=seed)
    np.testing.assert_allclose(logit_noise_draft(p, eps, res.sigma), res.q, rtol=1e-12,
                               atol=1e-15)


def test_logit_noise_draft_batch_and_validation():
    P = dirichlet(30, 0.7, size=4, seed=2)
    eps = np.random.default_rng(5).standard_normal(30)
    sig = np.array([0.0, 0.5, 1.0, 3.0])
    Q = logit_noise_draft(P, eps, sig)
    _is_prob(Q, P.shape)
    for i in range(4):  # a batch is its rows; one direction is shared
        np.testing.assert_array_equal(Q[i], logit_noise_draft(P[i], eps, sig[i]))
    # a larger scale moves further from the target along a fixed direction (this one)
    tv = _tv(P, Q)
    assert tv[0] == pytest.approx(0.0, abs=1e-12) and np.all(np.diff(tv) > 0)
    np.testing.assert_array_equal(logit_noise_draft(P, np.tile(eps, (4, 1)), 0.5),
                                  logit_noise_draft(P, eps, 0.5))
    for call, name in [
        (lambda: logit_noise_draft([0.5, 0.5], [1.0, 2.0, 3.0], 1.0), "direction"),
        (lambda: logit_noise_draft([0.5, 0.5], [1.0, np.nan], 1.0), "direction"),
        (lambda: logit_noise_draft([0.5, 0.5], [1.0, 2.0], -1.0), "sigma"),
        (lambda: logit_noise_draft([0.5, 0.5], [1.0, 2.0], [1.0]), "sigma"),
        (lambda: logit_noise_draft(P, eps, [1.0, 2.0]), "sigma"),
        (lambda: logit_noise_draft(P, eps, [1.0, 2.0, -1.0, 0.0]), "sigma"),
        (lambda: logit_noise_draft([0.5, 0.5], [1.0, 2.0], True), "sigma"),
        (lambda: logit_noise_draft([0.5, 0.5], [1.0, -1.0], 1e308), "sigma"),
        (lambda: logit_noise_draft([0.5, 0.6], [1.0, 2.0], 1.0), "p"),
        (lambda: logit_noise_draft([0.5, 0.5], "ab", 1.0), "direction"),
    ]:
        with pytest.raises(ValueError, match=name):
            call()


def test_noisy_draft_batch_determinism_and_zero():
    P = dirichlet(40, 0.5, size=25, seed=3)
    tv = np.linspace(0.0, 0.4, 25)
    res = noisy_draft(P, tv, seed=8)
    assert res.q.shape == (25, 40) and res.tv.shape == (25,) and res.sigma.shape == (25,)
    assert np.all(np.abs(res.tv - tv) <= 1e-6)
    again = noisy_draft(P, tv, seed=8)
    np.testing.assert_array_equal(again.q, res.q)
    assert res.sigma[0] == 0.0
    np.testing.assert_array_equal(res.q[0], P[0])
    # a single row of the batch equals the 1-D call with the same noise only if the same eps
    # is drawn, so rows are not compared; a different seed gives a different draft
    assert not np.array_equal(noisy_draft(P, tv, seed=9).q, res.q)
    scalar = noisy_draft(P, 0.2, seed=8)
    assert np.all(np.abs(scalar.tv - 0.2) <= 1e-6)
    one = noisy_draft(P[0], 0.0, seed=0)
    assert one.tv == 0.0 and one.sigma == 0.0 and isinstance(one.tv, float)


def test_noisy_draft_custom_tolerance():
    p = zipf(100, 1.0, seed=0)
    res = noisy_draft(p, 0.25, seed=1, tol=1e-10)
    assert abs(res.tv - 0.25) <= 1e-10


def test_noisy_draft_unreachable():
    with pytest.raises(ValueError, match="tv: .*not reachable"):
        noisy_draft([0.0, 1.0, 0.0], 0.1)
    p = np.array([0.9, 0.1])
    # the supremum is 1 - p[argmax eps]; both candidates are at most 0.9
    with pytest.raises(ValueError, match="tv: .*supremum"):
        noisy_draft(p, 0.95, seed=0)


# ----------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: dirichlet(0, 1.0), "vocab_size: must be >= 1"),
        (lambda: dirichlet(3.5, 1.0), "vocab_size: must be an integer"),
        (lambda: dirichlet(3, 0.0), "alpha"),
        (lambda: dirichlet(3, [1.0, 2.0]), "alpha"),
        (lambda: dirichlet(3, "a"), "alpha"),
        (lambda: dirichlet(3, True), "alpha"),
        (lambda: dirichlet(3, np.nan), "alpha"),
        (lambda: dirichlet(3, 1.0, size=0), "size"),
        (lambda: dirichlet(3, 1.0, seed=-1), "seed"),
        (lambda: dirichlet(3, 1.0, seed=True), "seed"),
        (lambda: zipf(3, -0.5), "s: must be >= 0"),
        (lambda: zipf(3, np.inf), "s: must be finite"),
        (lambda: zipf(True, 1.0), "vocab_size: must be an integer"),
        (lambda: softmax_gaussian(3, temperature=0.0), "temperature"),
        (lambda: softmax_gaussian(3, scale=-1.0), "scale"),
        (lambda: softmax_gaussian(3, size=2.5), "size"),
        (lambda: top_k([0.5, 0.5], 0), "k: must be >= 1"),
        (lambda: top_k([0.5, 0.6], 1), "p: entries must sum to 1"),
        (lambda: temperature_draft([0.5, 0.5], 0.0), "temperature: must be > 0"),
        (lambda: temperature_draft([-0.5, 1.5], 1.0), "p: contains negative"),
        (lambda: mixture_draft([0.5, 0.5], [1.0], 0.5), "other: shape mismatch"),
        (lambda: mixture_draft([0.5, 0.5], [1.0, 0.0], 1.5), "weight"),
        (lambda: mixture_draft([0.5, 0.5], [1.0, 0.1], 0.5), "other: entries must sum"),
        (lambda: noisy_draft([0.5, 0.5], 1.0), "tv: must be < 1"),
        (lambda: noisy_draft([0.5, 0.5], -0.1), "tv: must be >= 0"),
        (lambda: noisy_draft([0.5, 0.5], [0.1]), "tv: must be a scalar"),
        (lambda: noisy_draft([[0.5, 0.5]] * 2, [0.1]), "tv: must be a scalar"),
        (lambda: noisy_draft([[0.5, 0.5]] * 2, [0.1, 1.0]), "tv: entries must lie"),
        (lambda: noisy_draft([0.5, 0.5], True), "tv: must be a scalar"),
        (lambda: noisy_draft([0.5, 0.5], 0.1, tol=0), "tol"),
        (lambda: noisy_draft([0.5, 0.5], 0.1, max_iter=0), "max_iter"),
        (lambda: noisy_draft([0.5, np.nan], 0.1), "p: contains NaN"),
    ],
)
def test_validation_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_noisy_draft_tv_is_monotone_in_sigma_on_average():
    # sanity of the bisection's premise on a typical target: TV grows with sigma
    p = softmax_gaussian(500, seed=0)
    tvs = [noisy_draft(p, t, seed=3).sigma for t in (0.05, 0.1, 0.2, 0.4)]
    assert np.all(np.diff(tvs) > 0)
    assert stats.spearmanr([0.05, 0.1, 0.2, 0.4], tvs).statistic == 1.0


# ----------------------------------------------------------------------------- hardening


def test_extreme_temperatures_give_the_limit_not_nan():
    # regression: temperature_draft(p, 1e-310) and softmax_gaussian(4, temperature=5e-324)
    # returned all NaN; the limit T -> 0 is the argmax (ties share the mass uniformly)
    p = np.array([0.1, 0.0, 0.6, 0.3])
    for t in (1e-310, 5e-324, 1e-300):
        np.testing.assert_array_equal(temperature_draft(p, t), [0, 0, 1, 0])
    np.testing.assert_array_equal(temperature_draft([0.4, 0.4, 0.2], 5e-324), [0.5, 0.5, 0])
    np.testing.assert_array_equal(temperature_draft(np.stack([p, p[::-1]]), 5e-324),
                                  [[0, 0, 1, 0], [0, 1, 0, 0]])
    q = softmax_gaussian(4, temperature=5e-324, seed=0)
    z = np.random.default_rng(0).standard_normal(4)
    np.testing.assert_array_equal(q, np.eye(4)[np.argmax(z)])
    Q = softmax_gaussian(6, temperature=1e-320, scale=3.0, size=5, seed=2)
    assert np.all(np.isfinite(Q)) and np.all(Q.sum(axis=1) == 1.0)
    # the finite path is untouched (bit for bit the plain formula)
    lp = np.log(np.array([0.1, 0.6, 0.3])) / 0.7
    ref = np.exp(lp - lp.max())
    np.testing.assert_array_equal(temperature_draft([0.1, 0.6, 0.3], 0.7), ref / ref.sum())


def test_removed_aliases_are_refused():
    """``n=`` (now ``vocab_size``), ``T=`` (now ``temperature``) and a positional ``seed``
    were pre-release aliases; they are gone."""
    for call in (lambda: dirichlet(n=5, alpha=0.5, seed=3), lambda: zipf(n=7, s=1.0),
                 lambda: softmax_gaussian(n=7), lambda: temperature_draft([0.2, 0.8], T=2.0)):
        with pytest.raises(TypeError, match="'n'|'T'"):
            call()
    with pytest.raises(TypeError, match="positional"):
        dirichlet(5, 0.5, None, 3)
    with pytest.raises(TypeError, match="positional"):
        noisy_draft([0.3, 0.7], 0.1, 4)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: dirichlet(3, "0.5"), "alpha"),
        (lambda: dirichlet(3, 0.5 + 1j), "alpha"),
        (lambda: zipf(3, "1.0"), "s: must be a real number"),
        (lambda: zipf("3", 1.0), "vocab_size: must be an integer"),
        (lambda: softmax_gaussian(3, temperature="1"), "temperature"),
        (lambda: temperature_draft([0.5, 0.5], "2"), "temperature"),
        (lambda: temperature_draft(["0.5", "0.5"], 2.0), "p: must be real numbers .*strings"),
        (lambda: temperature_draft(np.array([0.5 + 0.1j, 0.5]), 2.0), "p: .*complex"),
        (lambda: mixture_draft([0.5, 0.5], [1.0, 0.0], "0.5"), "weight"),
        (lambda: noisy_draft([0.5, 0.5], "0.1"), "tv"),
        (lambda: noisy_draft([[0.5, 0.5]] * 2, ["0.1", "0.2"]), "tv"),
        (lambda: top_k([0.5, 0.5], 1, normalize="no"), "normalize: must be True or False"),
        (lambda: dirichlet(10**12, 1.0), "vocab_size: too large"),
        (lambda: zipf(10**6, 1.0, size=10**6), "size: too large"),
        (lambda: softmax_gaussian(10**11), "vocab_size: too large"),
    ],
)
def test_hostile_inputs_name_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_normalize_rescales_rows_in_every_draft_family():
    raw = np.array([2.0, 6.0, 2.0])
    p = raw / raw.sum()
    np.testing.assert_array_equal(top_k(raw, 2, normalize=True), top_k(p, 2))
    np.testing.assert_array_equal(temperature_draft(raw, 1.5, normalize=True),
                                  temperature_draft(p, 1.5))
    np.testing.assert_array_equal(mixture_draft(raw, [0, 0, 1.0], 0.5, normalize=True),
                                  mixture_draft(p, [0, 0, 1.0], 0.5))
    np.testing.assert_array_equal(noisy_draft(raw, 0.2, seed=1, normalize=True).q,
                                  noisy_draft(p, 0.2, seed=1).q)
