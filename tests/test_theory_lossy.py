"""Tests for specbound.theory.lossy: induced laws of lossy verification rules
(Zhou et al. 2026, arXiv:2607.26627)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from specbound.testing.strategies import prob_pairs
from specbound.theory import lossy as L
from specbound.theory import tree as T

ATOL = 1e-9


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------
def _mask(n, seed, p):
    """A random allowed set that always contains the argmax of p (so Z_Θ(p) > 0)."""
    rng = np.random.default_rng(seed)
    A = rng.random(n) < rng.uniform(0.1, 0.9)
    A[np.argmax(p)] = True
    return A


def _generic_sd(p, q, h, nu=None):
    """P(Y=x) = q h + [1 - Σ q h] r, r = (nu - q)+ normalized (generic SD law) -- independent
    code."""
    nu = p if nu is None else nu
    rej = 1.0 - np.sum(q * h)
    resid = np.maximum(nu - q, 0.0)
    s = resid.sum()
    r = resid / s if s > 0 else np.zeros_like(p)
    return q * h + rej * r


def _assert_prob(d):
    assert np.all(d >= -1e-15)
    assert abs(d.sum() - 1.0) < ATOL


#: how each rule parameter is drawn: ``f(draw, p, seed, ell)`` (``ell`` one draw shared by
#: the rules that take it); the rules' parameters come from ``RULE_PARAMS``, so a new rule
#: whose parameters are here is drawn without a line of test code
PARAM_DRAWS = {
    "lam": lambda draw, p, seed, ell: draw(st.floats(0.0, 1.0)),
    "threshold": lambda draw, p, seed, ell: draw(st.floats(0.0, 1.0)),
    "divergence": lambda draw, p, seed, ell: draw(st.sampled_from(L.DIVERGENCES)),
    "ell": lambda draw, p, seed, ell: ell,
    "judge": lambda draw, p, seed, ell: np.random.default_rng(seed).random(p.size) < 0.5,
    "beta": lambda draw, p, seed, ell: draw(st.floats(0.0, 3.0)),
    "alpha": lambda draw, p, seed, ell: draw(st.floats(0.0, 1.0)),
    "allowed": lambda draw, p, seed, ell: _mask(p.size, seed, p),
    "on_reject": lambda draw, p, seed, ell: draw(st.sampled_from(L.ON_REJECT)),
    "completion": lambda draw, p, seed, ell: draw(st.sampled_from(L.COMPLETIONS)),
}


@st.composite
def rule_cases(draw):
    """(p, q, rule, params) for every rule, with parameters drawn over their ranges."""
    p, q = draw(prob_pairs(max_size=60))
    rule = draw(st.sampled_from(sorted(L.RULES)))
    seed = draw(st.integers(0, 2**32 - 1))
    ell = draw(st.floats(0.01, 1.0))
    required, optional = L.RULE_PARAMS[rule]
    kw = {name: PARAM_DRAWS[name](draw, p, seed, ell) for name in (*required, *optional)}
    return p, q, rule, kw


# ---------------------------------------------------------------------------------------------
# properties of every rule
# ---------------------------------------------------------------------------------------------
@given(rule_cases())
def test_every_induced_distribution_is_a_probability_vector(case):
    p, q, rule, kw = case
    d = L.induced_distribution(p, q, rule, **kw)
    assert d.shape == p.shape
    _assert_prob(d)
    h = L.acceptance_function(p, q, rule, **kw)
    assert h.shape == p.shape and np.all((h >= 0) & (h <= 1))
    a = L.acceptance_rate(p, q, rule, **kw)
    assert isinstance(a, float) and 0.0 <= a <= 1.0
    # the acceptance rate is the draft-weighted acceptance function
    assert a == pytest.approx(float(np.sum(q * h)), abs=1e-12)
    if rule in ("lossless", "interpolation", "contrastive"):
        # lossless SD against a reference nu reproduces nu: the induced law is a fixed point
        np.testing.assert_allclose(_generic_sd(p, q, h, nu=d), d, atol=1e-12)


@given(rule_cases())
def test_batched_rows_equal_single_pairs(case):
    p, q, rule, kw = case
    p2 = np.stack([p, q, p])
    q2 = np.stack([q, q, p])
    kw2 = dict(kw)
    for name in ("allowed", "judge"):
        if name in kw:
            kw2[name] = np.stack([kw[name]] * 3)
    d2 = L.induced_distribution(p2, q2, rule, **kw2)
    a2 = L.acceptance_rate(p2, q2, rule, **kw2)
    assert d2.shape == (3, p.size) and a2.shape == (3,)
    for i in range(3):
        kwi = {k: (v[i] if k in ("allowed", "judge") else v) for k, v in kw2.items()}
        if rule == "truncation" and not np.any(kwi["allowed"] & (p2[i] > 0)):
            continue
        np.testing.assert_allclose(
            d2[i], L.induced_distribution(p2[i], q2[i], rule, **kwi), atol=1e-15
        )
        assert a2[i] == pytest.approx(L.acceptance_rate(p2[i], q2[i], rule, **kwi), abs=1e-15)


@given(prob_pairs())
def test_lossless_gives_p_with_acceptance_one_minus_tv(pq):
    p, q = pq
    np.testing.assert_allclose(L.induced_distribution(p, q, "lossless"), p, atol=1e-12)
    tv = 0.5 * np.abs(p - q).sum()
    assert L.acceptance_rate(p, q, "lossless") == pytest.approx(1 - tv, abs=1e-12)


@given(prob_pairs(), st.floats(0.0, 1.0))
def test_interpolation_endpoints_and_closed_form(pq, lam):
    p, q = pq
    np.testing.assert_allclose(
        L.induced_distribution(p, q, "interpolation", lam=1.0), p, atol=1e-12
    )
    np.testing.assert_allclose(L.induced_distribution(p, q, "interpolation", lam=0.0), q, atol=0)
    nu = lam * p + (1 - lam) * q
    np.testing.assert_allclose(
        L.induced_distribution(p, q, "interpolation", lam=lam), nu, atol=1e-12
    )
    tv = 0.5 * np.abs(p - q).sum()
    assert L.acceptance_rate(p, q, "interpolation", lam=lam) == pytest.approx(
        1 - lam * tv, abs=1e-12
    )


@given(prob_pairs(), st.lists(st.floats(0.0, 1.0), min_size=2, max_size=2))
def test_acceptance_monotone_in_lam(pq, lams):
    p, q = pq
    lo, hi = sorted(lams)
    # more weight on q (smaller lam) -> higher acceptance
    assert (
        L.acceptance_rate(p, q, "interpolation", lam=lo)
        >= L.acceptance_rate(p, q, "interpolation", lam=hi) - 1e-15
    )


@given(prob_pairs(), st.lists(st.floats(0.01, 1.0), min_size=2, max_size=2))
def test_acceptance_monotone_in_ell(pq, ells):
    p, q = pq
    lo, hi = sorted(ells)
    for rule in ("lenience", "ceiling"):
        assert (
            L.acceptance_rate(p, q, rule, ell=lo) >= L.acceptance_rate(p, q, rule, ell=hi) - 1e-15
        )


@given(prob_pairs(), st.floats(0.01, 1.0))
def test_lenience_closed_form_equals_generic_sd_formula(pq, ell):
    p, q = pq
    d = L.induced_distribution(p, q, "lenience", ell=ell)
    h = L.acceptance_function(p, q, "lenience", ell=ell)
    np.testing.assert_allclose(d, _generic_sd(p, q, h), atol=1e-12)
    # acceptance of lenience = Σ min(q, p/ℓ) (Zhou et al. 2026, Eq. 10)
    assert L.acceptance_rate(p, q, "lenience", ell=ell) == pytest.approx(
        float(np.minimum(q, p / ell).sum()), abs=1e-12
    )
    # Δ_ℓ: the paper's form (½Σ|q - p/ℓ| + ½ - 1/(2ℓ)) / (½Σ|q - p|)
    tv = 0.5 * np.abs(q - p).sum()
    if tv > 1e-6:
        paper = (0.5 * np.abs(q - p / ell).sum() + 0.5 - 0.5 / ell) / tv
        assert L.lenience_delta(p, q, ell) == pytest.approx(paper, abs=1e-8)
    assert 0.0 <= L.lenience_delta(p, q, ell) <= 1.0 + 1e-12


@given(prob_pairs())
def test_lenience_with_ell_one_gives_p(pq):
    p, q = pq
    np.testing.assert_allclose(L.induced_distribution(p, q, "lenience", ell=1.0), p, atol=1e-12)


@given(prob_pairs(), st.floats(0.01, 1.0))
def test_ceiling_with_residual_completion_is_lenience(pq, ell):
    p, q = pq
    np.testing.assert_allclose(
        L.induced_distribution(p, q, "ceiling", ell=ell, completion="residual"),
        L.induced_distribution(p, q, "lenience", ell=ell),
        atol=1e-12,
    )


@given(prob_pairs(), st.integers(0, 2**32 - 1))
def test_judge_closed_form_equals_generic_sd_formula(pq, seed):
    p, q = pq
    j = np.random.default_rng(seed).random(p.size) < 0.5
    d = L.induced_distribution(p, q, "judge", judge=j)
    h = L.acceptance_function(p, q, "judge", judge=j)
    np.testing.assert_allclose(d, _generic_sd(p, q, h), atol=1e-12)
    expect = np.minimum(p, q).sum() + (np.maximum(q - p, 0) * j).sum()
    assert L.acceptance_rate(p, q, "judge", judge=j) == pytest.approx(expect, abs=1e-12)
    # j ≡ 0 is lossless, j ≡ 1 accepts every draft
    np.testing.assert_allclose(
        L.induced_distribution(p, q, "judge", judge=np.zeros(p.size, bool)), p, atol=1e-12
    )
    np.testing.assert_allclose(
        L.induced_distribution(p, q, "judge", judge=np.ones(p.size, bool)), q, atol=1e-12
    )


@given(prob_pairs(), st.integers(0, 2**32 - 1))
def test_truncation_variants(pq, seed):
    p, q = pq
    A = _mask(p.size, seed, p)
    pt = T.truncated_target(p, A)
    zq = q[A].sum()
    ren = L.induced_distribution(p, q, "truncation", allowed=A)
    tgt = L.induced_distribution(p, q, "truncation", allowed=A, on_reject="target")
    if zq > 0:
        np.testing.assert_allclose(ren, np.where(A, q, 0) / zq, atol=1e-12)
    else:  # documented zero-yield fallback: p_Θ
        np.testing.assert_allclose(ren, pt, atol=0)
    np.testing.assert_allclose(tgt, np.where(A, q, 0) + (1 - zq) * pt, atol=1e-12)
    assert L.acceptance_rate(p, q, "truncation", allowed=A) == pytest.approx(zq, abs=1e-12)
    # allowed = everything: the renormalized rule accepts every draft and emits q
    full = np.ones(p.size, bool)
    np.testing.assert_allclose(L.induced_distribution(p, q, "truncation", allowed=full), q)


@given(prob_pairs(), st.integers(0, 2**32 - 1), st.floats(0.01, 1.0))
def test_ceiling_yield_rows(pq, seed, ell):
    p, q = pq
    A = _mask(p.size, seed, p)
    for rule, y in (
        ("ceiling", np.minimum(q, p / ell)),
        ("truncation_ceiling", np.where(A, q, np.minimum(q, p / ell))),
    ):
        kw = {"ell": ell} if rule == "ceiling" else {"ell": ell, "allowed": A}
        assert L.acceptance_rate(p, q, rule, **kw) == pytest.approx(y.sum(), abs=1e-12)
        ren = L.induced_distribution(p, q, rule, completion="renormalize", **kw)
        res = L.induced_distribution(p, q, rule, completion="residual", **kw)
        if y.sum() > 0:
            np.testing.assert_allclose(ren, y / y.sum(), atol=1e-12)
        else:
            np.testing.assert_allclose(ren, res, atol=0)
        r = np.maximum(p - y, 0)
        expect = y + (1 - y.sum()) * (r / r.sum() if r.sum() > 0 else 0)
        np.testing.assert_allclose(res, expect, atol=1e-12)
        # the yield is the accepted-draft part of both completions
        assert np.all(res >= y - 1e-15)


def test_hand_computed_examples():
    p = np.array([0.5, 0.3, 0.2])
    q = np.array([0.2, 0.3, 0.5])
    # lenience ℓ = 0.5: min(q, 2p) = (0.2, 0.3, 0.4); TV = 0.3; Δ = 0.1 / 0.3
    np.testing.assert_allclose(
        L.induced_distribution(p, q, "lenience", ell=0.5), [0.3, 0.3, 0.4], atol=1e-15
    )
    assert L.acceptance_rate(p, q, "lenience", ell=0.5) == pytest.approx(0.9)
    assert L.lenience_delta(p, q, 0.5) == pytest.approx(1 / 3)
    # ceiling (renormalize): (0.2, 0.3, 0.4) / 0.9
    np.testing.assert_allclose(
        L.induced_distribution(p, q, "ceiling", ell=0.5, completion="renormalize"),
        np.array([0.2, 0.3, 0.4]) / 0.9,
    )
    # judge j = (0, 0, 1): token 2 overshoots and is kept -> q there; Δ_j = 0 -> q elsewhere
    j = np.array([False, False, True])
    np.testing.assert_allclose(L.induced_distribution(p, q, "judge", judge=j), q, atol=1e-15)
    assert L.judge_delta(p, q, j) == 0.0
    assert L.judge_delta(p, q, ~j) == pytest.approx(1.0)  # (0.3 + 0) / 0.3
    # truncation: A = {0, 2}: q 1_A / 0.7 and the "target" variant 0.3 * p_Θ added
    A = np.array([True, False, True])
    np.testing.assert_allclose(
        L.induced_distribution(p, q, "truncation", allowed=A), [2 / 7, 0, 5 / 7]
    )
    np.testing.assert_allclose(
        L.induced_distribution(p, q, "truncation", allowed=A, on_reject="target"),
        [0.2 + 0.3 * 5 / 7, 0.0, 0.5 + 0.3 * 2 / 7],
    )
    # truncation + ceiling ℓ = 0.5, A = {0}: yield (0.2, 0.3, 0.4) as token 0 is in A
    np.testing.assert_allclose(
        L.induced_distribution(
            p, q, "truncation_ceiling", allowed=np.array([True, False, False]), ell=0.5,
            completion="renormalize",
        ),
        np.array([0.2, 0.3, 0.4]) / 0.9,
    )
    # fuzzy: TV = 0.3
    assert np.allclose(L.induced_distribution(p, q, "fuzzy", threshold=0.3, divergence="tv"), q)
    assert np.allclose(L.induced_distribution(p, q, "fuzzy", threshold=0.29, divergence="tv"), p)
    assert L.acceptance_rate(p, q, "fuzzy", threshold=0.29, divergence="tv") == 0.0


def test_p_equals_q_limit():
    p = np.array([0.1, 0.0, 0.6, 0.3])
    for rule, kw in (
        ("lenience", {"ell": 0.3}),
        ("judge", {"judge": np.array([1, 0, 1, 0], bool)}),
        ("interpolation", {"lam": 0.2}),
        ("ceiling", {"ell": 0.3, "completion": "residual"}),
    ):
        np.testing.assert_allclose(L.induced_distribution(p, p, rule, **kw), p, atol=0)
        assert L.acceptance_rate(p, p, rule, **kw) == pytest.approx(1.0)
    assert L.lenience_delta(p, p, 0.3) == 0.0


@given(prob_pairs(min_size=2, max_size=60))
def test_fuzzy_gate(pq):
    p, q = pq
    tv = 0.5 * np.abs(p - q).sum()
    m = 0.5 * (p + q)

    def kl(a, b):
        s = a > 0
        return float(np.sum(a[s] * np.log(a[s] / b[s]))) if np.all(b[s] > 0) else np.inf

    js = 0.5 * kl(p, m) + 0.5 * kl(q, m)
    for name, d in (("tv", tv), ("kl", kl(p, q)), ("js", js)):
        cases = [(d * (1 + 1e-6) + 1e-12, 1.0)] if np.isfinite(d) else [(1e6, 0.0)]
        if np.isfinite(d) and d > 1e-6:  # well separated from rounding in the divergence
            cases.append((d * (1 - 1e-6), 0.0))
        for thr, gate in cases:
            got = L.induced_distribution(p, q, "fuzzy", threshold=thr, divergence=name)
            np.testing.assert_allclose(got, gate * q + (1 - gate) * p, atol=1e-15)
            assert L.acceptance_rate(p, q, "fuzzy", threshold=thr, divergence=name) == gate


def test_diversed_lam_per_context_array_and_callable():
    rng = np.random.default_rng(1)
    p = rng.dirichlet(np.ones(7), size=4)
    q = rng.dirichlet(np.ones(7), size=4)
    lams = np.array([0.0, 0.25, 0.6, 1.0])
    got = L.induced_distribution(p, q, "interpolation", lam=lams)
    np.testing.assert_allclose(got, lams[:, None] * p + (1 - lams[:, None]) * q, atol=1e-12)

    def lam_fn(pr, qr):  # DIVERSED-like: trust the draft more where it agrees with the target
        return 1.0 - 0.5 * np.abs(pr - qr).sum() / 2

    expect = np.array([lam_fn(p[i], q[i]) for i in range(4)])
    np.testing.assert_allclose(
        L.acceptance_rate(p, q, "interpolation", lam=lam_fn),
        1 - expect * 0.5 * np.abs(p - q).sum(axis=1),
        atol=1e-12,
    )
    # a numpy scalar returned by the callable is fine
    L.induced_distribution(p[0], q[0], "interpolation", lam=lambda a, b: np.float64(0.5))


def test_per_context_parameters_equal_row_by_row():
    rng = np.random.default_rng(2)
    p = rng.dirichlet(np.ones(9) * 0.5, size=3)
    q = rng.dirichlet(np.ones(9) * 0.5, size=3)
    cases = {
        "lenience": {"ell": np.array([0.2, 0.7, 1.0])},
        "ceiling": {"ell": np.array([0.2, 0.7, 1.0]), "completion": "residual"},
        "fuzzy": {"threshold": np.array([0.0, 0.5, 1.0])},
        "contrastive": {"beta": np.array([0.0, 0.5, 2.0]), "alpha": np.array([0.0, 0.1, 0.5])},
    }
    for rule, kw in cases.items():
        d = L.induced_distribution(p, q, rule, **kw)
        for i in range(3):
            kwi = {k: (v[i] if isinstance(v, np.ndarray) else v) for k, v in kw.items()}
            np.testing.assert_allclose(d[i], L.induced_distribution(p[i], q[i], rule, **kwi))
    np.testing.assert_allclose(
        L.lenience_delta(p, q, np.array([0.2, 0.7, 1.0])),
        [L.lenience_delta(p[i], q[i], e) for i, e in enumerate([0.2, 0.7, 1.0])],
    )
    # fuzzy's divergence defaults to "tv"
    tv = 0.5 * np.abs(p - q).sum(axis=1)
    np.testing.assert_array_equal(
        L.acceptance_rate(p, q, "fuzzy", threshold=float(np.median(tv))), tv <= np.median(tv)
    )


def test_contrastive_rule():
    p = np.array([0.5, 0.3, 0.15, 0.05])
    q = np.array([0.6, 0.2, 0.1, 0.1])
    beta, alpha = 0.5, 0.2
    head = p >= alpha * p.max()  # tokens 0, 1, 2
    w = np.where(head, p ** (1 + beta) * q ** (-beta), 0.0)
    nu = w / w.sum()
    got = L.induced_distribution(p, q, "contrastive", beta=beta, alpha=alpha)
    np.testing.assert_allclose(got, nu, atol=1e-14)
    assert L.acceptance_rate(p, q, "contrastive", beta=beta, alpha=alpha) == pytest.approx(
        np.minimum(q, nu).sum()
    )
    # β = 0, α = 0: plain target
    np.testing.assert_allclose(L.induced_distribution(p, q, "contrastive", beta=0.0, alpha=0.0), p)
    # default alpha = 0.1 keeps every token here
    w = p**1.5 * q**-0.5
    np.testing.assert_allclose(L.induced_distribution(p, q, "contrastive", beta=0.5), w / w.sum())
    # infinite contrast (q = 0 on the head) is the limit of q -> 0 there
    q0 = np.array([0.7, 0.0, 0.2, 0.1])
    lim = L.induced_distribution(p, q0, "contrastive", beta=1.0, alpha=0.2)
    np.testing.assert_allclose(lim, [0, 1, 0, 0])
    qe = np.array([0.7 - 1e-14, 1e-14, 0.2, 0.1])
    near = L.induced_distribution(p, qe, "contrastive", beta=1.0, alpha=0.2)
    np.testing.assert_allclose(near, lim, atol=1e-6)


# ---------------------------------------------------------------------------------------------
# distortion
# ---------------------------------------------------------------------------------------------
def test_distortion_values_and_no_warnings():
    p = np.array([0.5, 0.5, 0.0])
    d = np.array([0.25, 0.25, 0.5])
    q = np.array([0.2, 0.2, 0.6])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = L.distortion(d, p)
        assert res.tv == pytest.approx(0.5)
        assert res.kl == np.inf
        assert res.reverse_kl == pytest.approx(np.log(2))
        assert res.overshoot_mass == pytest.approx(0.5)  # = TV without q
        assert res.tv_truncated is None
        A = np.array([True, False, True])
        r2 = L.distortion(d, p, allowed=A, q=q)
        # p_Θ = (1, 0, 0); q overshoots p_Θ on tokens 1 and 2
        assert r2.tv_truncated == pytest.approx(0.75)
        assert r2.kl_truncated == np.inf and r2.reverse_kl_truncated == pytest.approx(np.log(4))
        assert r2.overshoot_mass_truncated == pytest.approx(0.75)
        assert r2.overshoot_mass == pytest.approx(0.5)  # region {q > p} = {2}
        # batched
        rb = L.distortion(np.stack([d, p]), p)
        np.testing.assert_allclose(rb.tv, [0.5, 0.0])
        np.testing.assert_allclose(rb.kl, [np.inf, 0.0])


@given(rule_cases())
def test_distortion_properties(case):
    p, q, rule, kw = case
    d = L.induced_distribution(p, q, rule, **kw)
    res = L.distortion(d, p, q=q)
    assert 0 <= res.tv <= 1 + 1e-12
    assert res.kl >= 0 and res.reverse_kl >= 0
    assert 0 <= res.overshoot_mass <= res.tv + 1e-12
    # Pinsker (when finite)
    if np.isfinite(res.kl):
        assert res.tv <= np.sqrt(res.kl / 2) + 1e-9


# ---------------------------------------------------------------------------------------------
# validation errors
# ---------------------------------------------------------------------------------------------
P3 = np.array([0.5, 0.3, 0.2])
Q3 = np.array([0.2, 0.3, 0.5])
A3 = np.array([True, False, True])


@pytest.mark.parametrize(
    ("rule", "kw", "match"),
    [
        ("nope", {}, "rule"),
        (3, {}, "rule"),
        ("lossless", {"ell": 0.5}, "ell: not a parameter of rule 'lossless'"),
        ("lenience", {}, "ell: required"),
        ("lenience", {"ell": 0.0}, "ell"),
        ("lenience", {"ell": 1.5}, "ell"),
        ("lenience", {"ell": 0.5, "lam": 0.1}, "lam: not a parameter"),
        ("ceiling", {"ell": -1}, "ell"),
        ("ceiling", {"ell": 0.5, "completion": "both"}, "completion"),
        ("ceiling", {"ell": 0.5, "allowed": A3}, "allowed: not a parameter"),
        ("interpolation", {}, "lam: required"),
        ("interpolation", {"lam": -0.1}, "lam"),
        ("interpolation", {"lam": 1.1}, "lam"),
        ("interpolation", {"lam": True}, "lam"),
        ("interpolation", {"lam": "a"}, "lam"),
        ("interpolation", {"lam": [0.1, 0.2]}, "lam: shape"),
        ("interpolation", {"lam": [[0.1]]}, "lam: shape"),
        ("interpolation", {"lam": lambda p, q: 2.0}, "lam"),
        ("interpolation", {"lam": lambda p, q: [0.1, 0.2]}, "lam: the callable must return one"),
        ("interpolation", {"lam": lambda p, q: 1 / 0}, "lam: the callable raised"),
        ("fuzzy", {"divergence": "tv"}, "threshold: required"),
        ("fuzzy", {"threshold": [0.1, 0.2]}, "threshold: shape"),
        ("lenience", {"ell": [0.5, 0.2]}, "ell: shape"),
        ("lenience", {"ell": [0.0]}, "ell"),
        ("lenience", {"ell": "x"}, "ell"),
        ("lenience", {"ell": False}, "ell"),
        ("fuzzy", {"threshold": -0.1, "divergence": "tv"}, "threshold"),
        ("fuzzy", {"threshold": 0.1, "divergence": "hellinger"}, "divergence"),
        ("judge", {"judge": [0.5, 0.1, 0.2]}, "judge: must be a boolean"),
        ("judge", {"judge": [True, False]}, "judge: shape"),
        ("truncation", {"allowed": A3, "on_reject": "draft"}, "on_reject"),
        ("truncation", {"allowed": [1.0, 0.0, 1.0]}, "allowed: must be a boolean"),
        ("truncation", {"allowed": [True, False]}, "allowed: shape"),
        ("truncation", {"allowed": [False, True, False], "on_reject": "target"}, "allowed"),
        ("truncation_ceiling", {"allowed": A3}, "ell: required"),
        ("contrastive", {"beta": -1.0}, "beta"),
        ("contrastive", {"beta": 1.0, "alpha": 1.5}, "alpha"),
    ],
)
def test_rule_validation_errors(rule, kw, match):
    p = np.array([0.5, 0.0, 0.5]) if "on_reject" in kw and kw["on_reject"] == "target" else P3
    for fn in (L.induced_distribution, L.acceptance_rate, L.acceptance_function):
        with pytest.raises(ValueError, match=match):
            fn(p, Q3, rule, **kw)


def test_other_validation_errors():
    with pytest.raises(ValueError, match="p:"):
        L.induced_distribution([0.5, 0.6], [0.5, 0.5], "lossless")
    with pytest.raises(ValueError, match="q: shape mismatch"):
        L.induced_distribution(P3, [0.5, 0.5], "lossless")
    with pytest.raises(ValueError, match="ell"):
        L.lenience_delta(P3, Q3, 2.0)
    with pytest.raises(ValueError, match="judge"):
        L.judge_delta(P3, Q3, [0.3, 0.2, 0.1])
    with pytest.raises(ValueError, match="q: shape mismatch"):
        L.distortion(P3, P3, q=[0.5, 0.5])
    with pytest.raises(ValueError, match="induced"):
        L.distortion([0.5, 0.6, 0.1], P3)
    with pytest.raises(ValueError, match="allowed"):
        L.distortion(P3, P3, allowed=[0.1, 0.2, 0.3])


def test_zero_yield_fallbacks():
    p = np.array([0.6, 0.4, 0.0])
    q = np.array([0.0, 0.0, 1.0])
    A = np.array([True, True, False])
    # Z_Θ(q) = 0: "renormalize" falls back to p_Θ (documented)
    np.testing.assert_allclose(L.induced_distribution(p, q, "truncation", allowed=A), p)
    assert L.acceptance_rate(p, q, "truncation", allowed=A) == 0.0
    assert T.kl_truncation_sd(p, q, A) == 0.0
    # disjoint supports: the ceiling's yield is empty, both completions emit p
    for completion in ("renormalize", "residual"):
        np.testing.assert_allclose(
            L.induced_distribution(p, q, "ceiling", ell=0.5, completion=completion), p
        )


# ------------------------------------------------------- the reading of the yield rows
def test_yield_rows_default_to_the_residual_reading():
    """Zhou et al. 2026, Table 5 rows 4-5: the default completion is "residual" (the reading
    their reported accuracies support), "renormalize" stays available by name."""
    assert L.RULE_PARAMS["ceiling"][1] == {"completion": "residual"}
    assert L.RULE_PARAMS["truncation_ceiling"][1] == {"completion": "residual"}
    assert L.RULE_PARAMS["truncation"][1] == {"on_reject": "renormalize"}  # Eq. 13
    p = np.array([0.5, 0.3, 0.2])
    q = np.array([0.2, 0.3, 0.5])
    # ceiling at ℓ = 1: the residual reading is lossless (law p, acceptance 1 - TV) ...
    np.testing.assert_allclose(L.induced_distribution(p, q, "ceiling", ell=1.0), p,
                               atol=1e-15)
    # ... while renormalize distorts at the same (lossless) acceptance: min(p, q) / 0.7
    np.testing.assert_allclose(
        L.induced_distribution(p, q, "ceiling", ell=1.0, completion="renormalize"),
        np.array([0.2, 0.3, 0.2]) / 0.7)
    # truncation + ceiling, A = {0}, ℓ = 0.5: yield (0.2, 0.3, 0.4), missing 0.1 to (p - q)_+
    np.testing.assert_allclose(
        L.induced_distribution(p, q, "truncation_ceiling", ell=0.5,
                               allowed=np.array([True, False, False])),
        [0.3, 0.3, 0.4], atol=1e-15)


@given(prob_pairs(), st.floats(0.01, 1.0), st.integers(0, 2**32 - 1))
def test_readings_share_the_acceptance_and_differ_only_in_the_law(pq, ell, seed):
    """The paper's block efficiencies cannot tell the readings apart: both accept the first
    draft with probability Σ y; the default call is the residual reading."""
    p, q = pq
    A = np.random.default_rng(seed).random(p.size) < 0.5
    for rule, kw in (("ceiling", {"ell": ell}),
                     ("truncation_ceiling", {"ell": ell, "allowed": A})):
        a_res = L.acceptance_rate(p, q, rule, completion="residual", **kw)
        a_ren = L.acceptance_rate(p, q, rule, completion="renormalize", **kw)
        assert a_res == pytest.approx(a_ren, abs=1e-12)
        np.testing.assert_array_equal(
            L.induced_distribution(p, q, rule, **kw),
            L.induced_distribution(p, q, rule, completion="residual", **kw))
