"""Tests of specbound.theory.watermark: scores, exact null p-values, ANLPPT, TPR@FPR.

Statistical tests state their false-failure probability; all use fixed seeds (so each one
either always passes or always fails for a given implementation).
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, optimize, special, stats

from specbound.testing.strategies import prob_vectors
from specbound.theory import _nulls as N
from specbound.theory import (
    aaronson_entropy_bound,
    aaronson_log_pvalue,
    aaronson_score,
    anlppt,
    expected_aaronson_score,
    lattimore_log_pvalue,
    lattimore_score,
    li_log_pvalue,
    li_score,
    null_log_sf,
    score_log_pvalue,
    score_threshold,
    token_scores,
    tpr_at_fpr,
    u_score,
    u_score_log_pvalue,
)
from specbound.theory import watermark as W
from tests._stats import assert_gof, assert_within_se, binom_ok

PARAMS = {
    "aaronson": {},
    "u": {},
    "li": {"delta": 0.1},
    "lattimore": {"epsilon": 0.01},
}


def _mp_irwin_hall_log_sf(M: int, s: float) -> float:
    """Exact Irwin--Hall upper tail by the alternating sum in high precision."""
    with mpmath.workdps(60 + 4 * M):
        x = mpmath.mpf(M) - mpmath.mpf(s)
        if x <= 0:
            return -math.inf
        tot = mpmath.mpf(0)
        for k in range(int(mpmath.floor(x)) + 1):
            tot += (-1) ** k * mpmath.binomial(M, k) * (x - k) ** M
        return float(mpmath.log(tot / mpmath.factorial(M)))


# ----------------------------------------------------------------------------------------
# scores
# ----------------------------------------------------------------------------------------


def test_scores_match_definitions_and_shapes():
    rng = np.random.default_rng(0)
    U = rng.uniform(size=(4, 30))
    assert np.allclose(aaronson_score(U), (-np.log(1 - U)).sum(1))
    assert np.allclose(u_score(U), U.sum(1))
    # Li, Δ = 0.3: k = 1, q = 0.3, h = log(r^{3/7} + r^{7/3})
    assert np.allclose(li_score(U, 0.3), np.log(U ** (3 / 7) + U ** (7 / 3)).sum(1))
    eps = 0.05
    ref = (np.minimum(eps**-0.5, (1 - U) ** -0.5) - (2 - math.sqrt(eps))).sum(1)
    assert np.allclose(lattimore_score(U, eps), ref)
    # 1-D gives a float, 2-D an array
    assert isinstance(aaronson_score(U[0]), float)
    assert isinstance(aaronson_log_pvalue(U[0]), float)
    assert isinstance(anlppt(U[0], "li", delta=0.1), float)
    assert aaronson_log_pvalue(U).shape == (4,)
    assert token_scores(U[None], "u").shape == (1, 4, 30)


def test_li_score_constants_and_continuity():
    # Δ = 0.5: k = 2, q = 0 -> h = log 2 + log r
    r = np.array([0.1, 0.5, 0.9])
    assert np.allclose(token_scores(r, "li", delta=0.5), math.log(2) + np.log(r))
    # 1/(1-Δ) integer up to rounding: q is snapped to 0, and the score is continuous in Δ
    for d in (2 / 3, 0.75, 0.8):
        a = token_scores(r, "li", delta=d)
        b = token_scores(r, "li", delta=d - 1e-9)
        c = token_scores(r, "li", delta=d + 1e-9)
        assert np.allclose(a, b, atol=1e-6) and np.allclose(a, c, atol=1e-6)
    # the maximum value log(k + 1[q > 0]) is approached as r -> 1
    for d in (0.1, 0.3, 0.6, 0.9):
        k, q, _, _ = N.li_constants(d)
        top = math.log(k + (q > 0))
        assert token_scores(np.array([1 - 1e-12]), "li", delta=d)[0] == pytest.approx(top, abs=1e-9)


@pytest.mark.parametrize("delta", [0.05, 0.3, 0.5, 0.7, 0.95])
def test_li_score_is_a_log_density(delta):
    # h is the log-density of the pivot under the least-favourable P*: ∫ e^h = 1
    val, err = integrate.quad(
        lambda u: math.exp(N.li_h_from_logu(math.log(u), delta)), 0, 1, limit=200
    )
    assert val == pytest.approx(1.0, abs=1e-8)


@pytest.mark.parametrize("eps", [0.5, 0.1, 0.01, 1e-4, 1e-6])
def test_lattimore_null_mean_zero_by_quadrature(eps):
    f = lambda u: float(W._h_lattimore(np.array(u), eps))
    val, _ = integrate.quad(f, 0, 1, points=[1 - eps], limit=400)
    assert abs(val) < 1e-8
    # and the (approximate, steering-only) grid mean of the lattice engine agrees
    assert abs(N.law("lattimore", eps).mean()) < 1e-4  # grid quadrature (kink at 1 - ε)


# ----------------------------------------------------------------------------------------
# exact p-values: Aaronson (Gamma) and U (Irwin--Hall)
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "M,S",
    [(1, 0.5), (1, 800.0), (5, 800.0), (10, 1e3), (50, 60.0), (50, 200.0), (100, 1e4),
     (1000, 1200.0), (1000, 5000.0), (100_000, 120_000.0)],
)
def test_aaronson_log_pvalue_matches_mpmath_far_tail(M, S):
    exact = float(mpmath.log(mpmath.gammainc(M, S, mpmath.inf, regularized=True)))
    got = null_log_sf(S, M, "aaronson")
    assert got == pytest.approx(exact, rel=1e-12, abs=1e-13)


def test_aaronson_log_pvalue_is_gamma_tail_of_the_score():
    rng = np.random.default_rng(1)
    U = rng.uniform(size=(50, 40))
    S = aaronson_score(U)
    assert np.allclose(aaronson_log_pvalue(U), stats.gamma.logsf(S, 40), rtol=1e-12)
    # a very strong watermark stays finite (gammaincc alone underflows to 0 here)
    U_strong = np.full(500, 1 - 1e-12)
    lp = aaronson_log_pvalue(U_strong)
    assert np.isfinite(lp) and lp < -10_000


def test_aaronson_null_law_monte_carlo():
    # S_A of M = 7 uniform pivots is Gamma(7, 1): KS test (false-failure rate 1e-3)
    rng = np.random.default_rng(2)
    S = aaronson_score(rng.uniform(size=(20_000, 7)))
    assert stats.kstest(S, stats.gamma(7).cdf).pvalue > 1e-3


@pytest.mark.parametrize(
    "M,s",
    [(1, 0.3), (2, 1.5), (3, 0.2), (5, 4.2), (10, 3.0), (10, 9.99), (50, 40.0), (50, 26.0),
     (50, 20.0), (120, 100.0), (200, 160.0), (200, 100.0)],
)
def test_irwin_hall_exact_matches_high_precision_alternating_sum(M, s):
    got = null_log_sf(s, M, "u")
    assert got == pytest.approx(_mp_irwin_hall_log_sf(M, s), rel=1e-11, abs=1e-13)


def test_irwin_hall_small_m_closed_forms_and_edges():
    # M = 2: P(S >= s) = (2 - s)^2 / 2 for s >= 1, 1 - s^2/2 for s <= 1
    for s in (0.2, 0.7, 1.0, 1.3, 1.9):
        ref = (2 - s) ** 2 / 2 if s >= 1 else 1 - s**2 / 2
        assert null_log_sf(s, 2, "u") == pytest.approx(math.log(ref), rel=1e-13)
    assert null_log_sf(2.5, 2, "u") == -math.inf
    assert null_log_sf(-1.0, 2, "u") == 0.0


def test_irwin_hall_monte_carlo():
    # P(S_U >= s) for M = 5 at four levels vs 400,000 simulations; each comparison fails
    # with probability < 6e-7 (5 standard errors), < 3e-6 in all
    rng = np.random.default_rng(3)
    S = rng.uniform(size=(400_000, 5)).sum(1)
    for s in (2.5, 3.3, 4.0, 4.5):
        p = math.exp(null_log_sf(s, 5, "u"))
        phat = np.mean(S >= s)
        assert_within_se(phat, p, math.sqrt(p * (1 - p) / S.size), z=5.0, label=f"s={s}")


@settings(max_examples=60)
@given(st.integers(1, 300), st.floats(0.0, 1.0), st.integers(0, 2**32 - 1))
def test_u_chernoff_bounds_the_exact_tail(M, frac, seed):
    s = M * (0.5 + 0.5 * frac) * 0.999999
    exact = null_log_sf(s, M, "u")
    bound = null_log_sf(s, M, "u", method="chernoff")
    assert bound >= exact - 1e-9
    assert bound <= 0.0


def test_u_chernoff_values():
    # below the mean the bound is trivial; the optimum matches a brute-force minimisation
    assert null_log_sf(10.0, 30, "u", method="chernoff") == 0.0
    M, S = 40, 31.0
    lam = np.linspace(1e-3, 60, 600_001)
    brute = np.min(M * np.log(np.expm1(lam) / lam) - lam * S)
    assert null_log_sf(S, M, "u", method="chernoff") == pytest.approx(brute, abs=1e-6)
    U = np.full(40, 31.0 / 40)
    assert u_score_log_pvalue(U, method="chernoff") == pytest.approx(brute, abs=1e-6)
    assert null_log_sf(40.0, 40, "u", method="chernoff") == -math.inf


# ----------------------------------------------------------------------------------------
# the tilted lattice convolution (Li, Lattimore)
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "M,s",
    [(1, 0.9), (1, 0.999), (2, 1.9), (5, 4.2), (50, 26.0), (50, 40.0), (50, 45.0),
     (200, 160.0), (1000, 550.0), (1000, 700.0), (1000, 990.0)],
)
def test_lattice_engine_reproduces_irwin_hall(M, s):
    # the engine run on the U-score's law against the exact Irwin--Hall tail: relative
    # error of log p below 1e-5 (absolute 1e-5 for moderate p), down to log p = -3600
    got = N.lattice_log_sf(N._UniformLaw(), M, np.array([s]))[0]
    exact = N.irwin_hall_log_sf_exact(np.array([s]), M)[0]
    assert abs(got - exact) <= 1e-5 * max(1.0, abs(exact))


@pytest.mark.parametrize("delta", [0.1, 0.5, 0.9, 0.99])
@pytest.mark.parametrize("u0", [0.5, 0.9, 0.999, 1 - 1e-8])
def test_li_single_token_exact(delta, u0):
    # M = 1: P(h(U) >= h(u0)) = 1 - u0
    s = float(token_scores(np.array([u0]), "li", delta=delta)[0])
    got = null_log_sf(s, 1, "li", delta=delta)
    exact = math.log1p(-u0)
    assert abs(got - exact) <= 1e-5 * max(1.0, abs(exact))


@pytest.mark.parametrize("eps", [0.5, 0.1, 0.01, 1e-4])
@pytest.mark.parametrize("u0", [0.3, 0.9, 0.999])
def test_lattimore_single_token_exact_with_atom(eps, u0):
    # M = 1: P(h(U) >= h(u0)) = 1 - u0 below the cap and ε (the atom) at the cap
    s = float(token_scores(np.array([u0]), "lattimore", epsilon=eps)[0])
    got = null_log_sf(s, 1, "lattimore", epsilon=eps)
    exact = math.log(max(1 - u0, eps))
    assert abs(got - exact) <= 1e-4 * max(1.0, abs(exact))


@pytest.mark.parametrize("eps", [0.5, 0.01, 1e-4])
def test_lattimore_all_capped_is_eps_to_the_m(eps):
    U = np.full(5, 1 - eps / 2)
    assert lattimore_log_pvalue(U, eps) == pytest.approx(5 * math.log(eps), rel=1e-9)


@pytest.mark.parametrize("delta", [0.1, 0.6])
def test_li_two_tokens_deep_tail_by_quadrature(delta):
    # M = 2, independent check of the tilted rungs: P(X1 + X2 >= s) = ∫ P(X >= s - h(u)) du,
    # with P(X >= x) = 1 - u*(x), h(u*) = x solved by Brent's method on the score itself
    k, q, _, _ = N.li_constants(delta)
    top = math.log(k + (q > 0))

    def h(u):
        return float(N.li_h_from_logu(math.log(u), delta))

    def sf(x):  # P(X >= x) = 1 - u*: solve h(e^y) = x for y = log u* <= 0 (h increasing)
        if x >= top:
            return 0.0
        g = lambda y: float(N.li_h_from_logu(y, delta)) - x
        lo = -1.0
        while g(lo) > 0:
            lo *= 2.0
        y = optimize.brentq(g, lo, 0.0, xtol=1e-300, rtol=1e-15)
        return -math.expm1(y)

    for gap in (0.5, 0.05, 0.005):
        s = 2 * top - gap

        def integrand(u, s=s):
            return sf(s - h(u))

        u_min = 1.0 - sf(s - top)
        val, _ = integrate.quad(integrand, u_min, 1.0, limit=500, epsabs=0, epsrel=1e-11)
        got = null_log_sf(s, 2, "li", delta=delta)
        assert got == pytest.approx(math.log(val), rel=1e-4)


@pytest.mark.parametrize(
    "score,params",
    [("li", {"delta": 0.1}), ("li", {"delta": 0.9}), ("lattimore", {"epsilon": 0.01}),
     ("lattimore", {"epsilon": 1e-4})],
)
def test_li_lattimore_pvalues_monte_carlo(score, params):
    # p-values at the empirical 50/90/99/99.9% quantiles of 200,000 simulated null sums
    # (M = 20): |p - phat| <= 5 binomial standard errors; each comparison fails with
    # probability < 6e-7 (the quantile is itself random; its effect is below 1 s.e.)
    rng = np.random.default_rng(11)
    M = 20
    S = token_scores(rng.uniform(size=(200_000, M)), score, **params).sum(1)
    for q in (0.5, 0.9, 0.99, 0.999):
        s = float(np.quantile(S, q))
        p = math.exp(null_log_sf(s, M, score, **params))
        phat = float(np.mean(S >= s))
        assert_within_se(phat, p, math.sqrt(p * (1 - p) / S.size), z=5.0, slack=1e-12,
                         label=f"{score} quantile {q}")


@pytest.mark.slow
@pytest.mark.parametrize("score,params", [("li", {"delta": 0.3}), ("lattimore", {"epsilon": 1e-3})])
def test_li_lattimore_tail_monte_carlo_large(score, params):
    # M = 50, 2,000,000 null sums, p down to 1e-5: 5 s.e. per comparison (< 6e-7 each)
    rng = np.random.default_rng(12)
    M = 50
    S = np.concatenate(
        [token_scores(rng.uniform(size=(200_000, M)), score, **params).sum(1) for _ in range(10)]
    )
    for q in (0.9, 0.999, 0.99999):
        s = float(np.quantile(S, q))
        p = math.exp(null_log_sf(s, M, score, **params))
        phat = float(np.mean(S >= s))
        assert_within_se(phat, p, math.sqrt(p * (1 - p) / S.size), z=5.0, slack=1e-12,
                         label=f"{score} quantile {q}")


def test_lattice_grid_refinement_is_stable():
    # halving the lattice step changes log p by far less than the documented accuracy
    U = np.random.default_rng(4).uniform(0.5, 1.0, size=300) ** 0.3
    for score, params in (("li", {"delta": 0.2}), ("lattimore", {"epsilon": 0.01})):
        a = score_log_pvalue(U, score, **params, n_grid=2**17)
        b = score_log_pvalue(U, score, **params, n_grid=2**18)
        assert a < -20
        assert abs(a - b) <= 1e-5 * abs(b)


def test_pvalues_decrease_with_the_score():
    # monotone in S for every score
    for score, params in PARAMS.items():
        law_top = {"aaronson": 30.0, "u": 20.0, "li": 20 * math.log(2), "lattimore": 20 * 8.1}
        s = np.linspace(0.3, 0.999, 25) * law_top[score]
        lp = null_log_sf(s, 20, score, **params)
        assert np.all(np.diff(lp) <= 1e-12)


# ----------------------------------------------------------------------------------------
# null calibration at α = 1%
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("score", list(PARAMS))
def test_null_calibration_iid_pivots(score):
    # 10,000 unwatermarked sequences (M = 50 i.i.d. U(0,1) pivots): the number of p <= 1%
    # lies in its binomial 99.9% interval (false-failure rate <= 1e-3 per score)
    rng = np.random.default_rng(100)
    U = rng.uniform(size=(10_000, 50))
    lp = score_log_pvalue(U, score, **PARAMS[score])
    k = int(np.sum(lp <= math.log(0.01)))
    assert binom_ok(k, 10_000, 0.01), k
    # and the p-values are uniform (KS, false-failure rate 1e-3)
    assert stats.kstest(np.exp(lp), "uniform").pvalue > 1e-3


# ----------------------------------------------------------------------------------------
# ANLPPT, dispatch
# ----------------------------------------------------------------------------------------


def test_anlppt_and_dispatch_agree():
    rng = np.random.default_rng(5)
    U = rng.uniform(size=(3, 25)) ** 0.5
    assert np.allclose(anlppt(U), -aaronson_log_pvalue(U) / 25)
    assert np.allclose(anlppt(U, "u"), -u_score_log_pvalue(U) / 25)
    assert np.allclose(anlppt(U, "u", method="chernoff"), -u_score_log_pvalue(U, "chernoff") / 25)
    assert np.allclose(anlppt(U, "li", delta=0.2), -li_log_pvalue(U, 0.2) / 25)
    assert np.allclose(anlppt(U, "lattimore", epsilon=0.1), -lattimore_log_pvalue(U, 0.1) / 25)
    assert np.all(anlppt(U, "aaronson") > 0)
    S = aaronson_score(U)
    assert np.allclose(null_log_sf(S, 25), aaronson_log_pvalue(U))
    assert np.allclose(null_log_sf(S, [25, 25, 25]), aaronson_log_pvalue(U))


# ----------------------------------------------------------------------------------------
# expected Aaronson score
# ----------------------------------------------------------------------------------------


def test_expected_aaronson_point_mass_and_uniform():
    assert expected_aaronson_score([1.0]) == pytest.approx(1.0, abs=1e-14)
    assert expected_aaronson_score([0.0, 1.0, 0.0]) == pytest.approx(1.0, abs=1e-14)
    assert aaronson_entropy_bound([0.0, 1.0]) == pytest.approx(1.0)
    # uniform over n: ψ(n + 1) + γ = harmonic number H_n
    for n in (2, 7, 1000):
        ref = float(sum(1.0 / k for k in range(1, n + 1)))
        assert expected_aaronson_score(np.full(n, 1.0 / n)) == pytest.approx(ref, rel=1e-12)
    P = np.array([[0.5, 0.5], [1.0, 0.0]])
    assert np.allclose(expected_aaronson_score(P), [1.5, 1.0])
    assert aaronson_entropy_bound(P).shape == (2,)


@given(prob_vectors())
def test_expected_aaronson_score_at_least_entropy_bound(P):
    e = expected_aaronson_score(P)
    assert e >= aaronson_entropy_bound(P) - 1e-9
    assert e >= 1.0 - 1e-12
    # zeros contribute nothing
    assert expected_aaronson_score(np.concatenate([P, [0.0, 0.0]])) == pytest.approx(e)


@pytest.mark.parametrize(
    "P", [[0.5, 0.3, 0.2], [0.9, 0.05, 0.05, 0.0], list(np.full(20, 0.05))]
)
def test_expected_aaronson_score_monte_carlo(P):
    # simulate the Gumbel watermark Y = argmax U_v^{1/P(v)}, score -log(1 - U_Y);
    # 200,000 draws, |mean - formula| <= 5 standard errors (false-failure rate < 6e-7)
    P = np.asarray(P, dtype=float)
    rng = np.random.default_rng(6)
    U = rng.uniform(size=(200_000, P.size))
    with np.errstate(divide="ignore"):
        key = np.where(P > 0, np.log(U) / np.where(P > 0, P, 1.0), -np.inf)
    Y = np.argmax(key, axis=1)
    s = -np.log1p(-U[np.arange(U.shape[0]), Y])
    assert_within_se(s.mean(), expected_aaronson_score(P), s.std() / math.sqrt(s.size), z=5.0)
    # the watermarked token is P-distributed (unbiasedness), chi-square at 1e-3
    counts = np.bincount(Y, minlength=P.size)[P > 0]
    assert_gof(counts, P[P > 0], alpha=1e-3, label="watermarked token")


# ----------------------------------------------------------------------------------------
# thresholds and TPR@FPR
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("score", list(PARAMS))
def test_score_threshold_solves_the_tail_equation(score):
    thr = score_threshold(40, score=score, fpr=0.01, **PARAMS[score])
    assert null_log_sf(thr, 40, score, **PARAMS[score]) == pytest.approx(math.log(0.01), abs=1e-6)


def test_score_threshold_score_and_fpr_are_keyword_only():
    with pytest.raises(TypeError, match="positional"):  # the pre-release form
        score_threshold(40, 0.01, "u")
    assert score_threshold(40, score="u", fpr=0.01) < score_threshold(40, score="u", fpr=0.001)


def test_score_threshold_lattimore_atom_above_fpr_never_rejects():
    # ε^M = 0.5 > 1%: no threshold has level 1%
    assert score_threshold(1, score="lattimore", fpr=0.01, epsilon=0.5) == math.inf
    thr = score_threshold(3, score="lattimore", fpr=0.01, epsilon=0.1)  # 0.1^3 < 1%: finite
    assert math.isfinite(thr)


def _gumbel_pivots(n_seq, T, rng, n_vocab=20, conc=0.3):
    """Pivots of Gumbel-watermarked tokens for random next-token laws."""
    out = np.empty((n_seq, T))
    for t in range(T):
        P = rng.dirichlet(np.full(n_vocab, conc), size=n_seq)
        U = rng.uniform(size=(n_seq, n_vocab))
        with np.errstate(divide="ignore"):
            key = np.where(P > 0, np.log(U) / np.where(P > 0, P, 1.0), -np.inf)
        Y = np.argmax(key, axis=1)
        out[:, t] = U[np.arange(n_seq), Y]
    return np.clip(out, 1e-300, 1 - 1e-16)


def test_tpr_at_fpr_exact_null_on_null_and_watermarked_pivots():
    rng = np.random.default_rng(7)
    null = rng.uniform(size=(10_000, 64))
    df = tpr_at_fpr(null, [8, 32, 64], score="aaronson")
    assert list(df.columns) == [
        "T_eval", "n_sequences", "tpr", "tpr_stderr", "threshold", "method", "n_null", "fpr"
    ]
    assert (df["method"] == "exact").all()
    # on null pivots the TPR is the FPR: binomial 99.9% intervals (3 rows, < 3e-3 in all)
    for tpr in df["tpr"]:
        assert binom_ok(round(tpr * 10_000), 10_000, 0.01)
    wm = _gumbel_pivots(400, 64, rng)
    for score in PARAMS:
        d = tpr_at_fpr(wm, [4, 16, 64], score=score, **PARAMS[score])
        assert d["tpr"].is_monotonic_increasing
        assert d["tpr"].iloc[-1] > 0.9
    # ragged input: sequences shorter than T are left out of that row
    d = tpr_at_fpr([wm[0, :10], wm[1]], [5, 20])
    assert list(d["n_sequences"]) == [2, 1]


def test_tpr_at_fpr_empirical_threshold_matches_exact():
    # the 1% quantile of 10,000 null Aaronson scores vs the exact Gamma quantile: the
    # empirical threshold lies within the distribution-free 99.9% order-statistic interval
    rng = np.random.default_rng(8)
    T = 32
    null = rng.uniform(size=(10_000, T))
    wm = _gumbel_pivots(300, T, rng)
    d_emp = tpr_at_fpr(wm, [T], U_null=null)
    d_ex = tpr_at_fpr(wm, [T])
    assert d_emp["method"].iloc[0] == "empirical" and d_emp["n_null"].iloc[0] == 10_000
    lo, hi = stats.binom.interval(0.999, 10_000, 0.01)
    q_lo, q_hi = stats.gamma.isf([hi / 10_000, lo / 10_000], T)
    assert q_lo <= d_emp["threshold"].iloc[0] <= q_hi
    assert abs(d_emp["tpr"].iloc[0] - d_ex["tpr"].iloc[0]) <= 0.05
    # the empirical FPR on the null set is at most the target
    S0 = aaronson_score(null)
    assert np.mean(S0 > d_emp["threshold"].iloc[0]) <= 0.01


# ----------------------------------------------------------------------------------------
# validation
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: aaronson_score([0.5, 1.0]), "U"),
        (lambda: aaronson_score([0.0, 0.5]), "U"),
        (lambda: aaronson_score([np.nan]), "U"),
        (lambda: aaronson_score([]), "U"),
        (lambda: aaronson_score(np.zeros((2, 2, 2)) + 0.5), "U"),
        (lambda: aaronson_score(["a"]), "U"),
        (lambda: aaronson_score([True]), "U"),
        (lambda: li_score([0.5], 0.0), "delta"),
        (lambda: li_score([0.5], 1.0), "delta"),
        (lambda: lattimore_score([0.5], 1.5), "epsilon"),
        (lambda: lattimore_score([0.5], 0.0), "epsilon"),
        (lambda: anlppt([0.5], "li"), "delta"),
        (lambda: anlppt([0.5], "lattimore"), "epsilon"),
        (lambda: anlppt([0.5], "gumbel"), "score"),
        (lambda: anlppt([0.5], "aaronson", delta=0.1), "delta"),
        (lambda: u_score_log_pvalue([0.5], method="saddle"), "method"),
        (lambda: li_log_pvalue([0.5], 0.1, n_grid=10), "n_grid"),
        (lambda: null_log_sf(np.nan, 3), "S"),
        (lambda: null_log_sf(1.0, 0), "M"),
        (lambda: null_log_sf(1.0, 2.5), "M"),
        (lambda: null_log_sf([1.0, 2.0], [3, 4, 5]), "M"),
        (lambda: expected_aaronson_score([0.5, 0.6]), "P"),
        (lambda: aaronson_entropy_bound([-0.5, 1.5]), "P"),
        (lambda: score_threshold(0, fpr=0.01), "M"),
        (lambda: score_threshold(10, fpr=1.0), "fpr"),
        (lambda: tpr_at_fpr(np.full((3, 4), 0.5), [0]), "T_eval"),
        # a repeated budget would repeat its row
        (lambda: tpr_at_fpr(np.full((3, 4), 0.5), [2, 4, 2]), "T_eval"),
        (lambda: tpr_at_fpr(np.full((3, 4), 0.5), [2], fpr=0.0), "fpr"),
        (lambda: tpr_at_fpr(np.full((3, 4), 0.5), [2], null="empirical"), "U_null"),
        (lambda: tpr_at_fpr(np.full((3, 4), 0.5), [2], null="bootstrap"), "null"),
        (lambda: tpr_at_fpr(np.full((3, 4), 0.5), [2], U_null=np.full((50, 4), 0.5)), "U_null"),
        (lambda: tpr_at_fpr(np.full((3, 4), 1.5), [2]), "U_wm"),
        (lambda: tpr_at_fpr(np.full(4, 0.5), [2]), "U_wm"),
        (lambda: tpr_at_fpr([], [2]), "U_wm"),
    ],
)
def test_validation_errors_name_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_tpr_dataframe_values():
    # M = 4 Aaronson pivots 0.9: S = 4 log 10 = 9.21 < the 1% threshold gamma.isf(0.01, 4)
    # = 10.05, so no sequence is detected; pivots 0.99 give S = 18.4 and all are detected
    thr = stats.gamma.isf(0.01, 4)
    for u, tpr in ((0.9, 0.0), (0.99, 1.0)):
        df = tpr_at_fpr(np.full((3, 4), u), 4)
        assert isinstance(df, pd.DataFrame)
        assert list(df.columns) == ["T_eval", "n_sequences", "tpr", "tpr_stderr", "threshold",
                                    "method", "n_null", "fpr"]
        assert len(df) == 1
        row = df.iloc[0]
        assert row["T_eval"] == 4 and row["n_sequences"] == 3
        assert row["tpr"] == tpr and row["tpr_stderr"] == 0.0
        assert row["threshold"] == pytest.approx(thr, rel=1e-12)
        assert row["method"] == "exact" and row["n_null"] == 0 and row["fpr"] == 0.01
    # budgets: sequences shorter than T are left out of that row
    ragged = [np.full(2, 0.99), np.full(4, 0.99), np.full(4, 0.9)]
    df = tpr_at_fpr(ragged, [2, 4])
    assert df["n_sequences"].tolist() == [3, 2]
    assert df["tpr"].tolist() == pytest.approx([2 / 3, 0.5])
    assert df["tpr_stderr"].tolist() == pytest.approx([math.sqrt(2 / 27), 0.5 / math.sqrt(2)])


def test_tpr_at_fpr_budget_longer_than_every_sequence_is_refused():
    # regression: this used to return a row with n_sequences = 0 and tpr = NaN
    with pytest.raises(ValueError, match="T_eval: a budget of 5 tokens is longer"):
        tpr_at_fpr(np.full((3, 4), 0.9), [2, 5])


def test_gamma_continued_fraction_against_mpmath_grid():
    # the continued fraction branch alone, over a grid of (a, x) with x > a + 1
    a = np.array([1.0, 3.0, 20.0, 500.0, 5000.0])
    for x_over in (1.5, 3.0, 30.0):
        x = a * x_over + 2.0
        got = N._log_gamma_cf(a, x)
        for ai, xi, gi in zip(a, x, got, strict=True):
            ref = float(mpmath.log(mpmath.gammainc(ai, xi, mpmath.inf, regularized=True)))
            assert gi == pytest.approx(ref, rel=1e-12)
    assert special.gammaincc(10, 1e3) == 0.0  # why the branch is needed


# ----------------------------------------------------------------------------------------
# hardening: integer wrap-around, complex input, bounded run time, the law cache
# ----------------------------------------------------------------------------------------


def test_lengths_that_would_wrap_are_refused():
    # regression: np.uint64(2**64 - 1) was cast to int64 -1 and gave log p = -inf
    with pytest.raises(ValueError, match="M: values must be at most"):
        null_log_sf(1.0, np.uint64(2**64 - 1))
    with pytest.raises(ValueError, match="M"):
        null_log_sf(1.0, 2**70)
    with pytest.raises(ValueError, match="M"):
        null_log_sf(1.0, "3")
    # the largest int64 length is fine and gives the right answers
    big = np.uint64(2**63 - 1)
    assert null_log_sf(1.0, big, "u") == 0.0
    assert null_log_sf(1.0, big, "aaronson") == 0.0


@pytest.mark.parametrize(
    "call",
    [
        lambda: aaronson_score(np.array([0.5 + 0.1j, 0.3])),
        lambda: null_log_sf(np.array([3.0 + 1j]), 3),
        lambda: token_scores(["0.5", "0.3"]),
        lambda: li_score(np.array([0.5, 0.3]), "0.1"),
        lambda: tpr_at_fpr(np.full((3, 4), 0.5), ["2"]),
        lambda: expected_aaronson_score(np.array([0.5 + 0j, 0.5])),
    ],
)
def test_complex_and_string_numbers_are_refused(call):
    with pytest.raises(ValueError):
        call()


def test_u_score_large_m_uses_the_bounded_saddle_point(monkeypatch):
    # regression: the exact O(M^2) recursion ran for minutes on a million pivots; above
    # U_EXACT_MAX_M the saddle-point tail is used (the exact one must not be called)
    def boom(*a, **k):
        raise AssertionError("the O(M^2) recursion was called")

    monkeypatch.setattr(N, "irwin_hall_log_sf_exact", boom)
    M = 10**6
    assert u_score_log_pvalue(np.full(M, 0.5)) == pytest.approx(math.log(0.5), abs=1e-9)
    # 5 standard deviations above the mean: the Edgeworth expansion of the symmetric
    # Irwin--Hall law, Φ̄(z) + φ(z)(3z - z^3)/(20 M), is exact to O(1/M^2) here
    z = 5.0
    U = np.full(M, 0.5 + z * math.sqrt(1 / 12) / math.sqrt(M))
    ref = math.log(stats.norm.sf(z) + stats.norm.pdf(z) * (3 * z - z**3) / (20 * M))
    assert u_score_log_pvalue(U) == pytest.approx(ref, abs=1e-7)
    assert W.U_EXACT_MAX_M == 1000


@pytest.mark.parametrize("M", [1001, 1500, 3000])
def test_u_saddlepoint_matches_the_exact_tail(M):
    # where both run: the documented accuracy |Δ log p| <= 1e-6 max(1, |log p|) over the whole
    # range of S (centre, moderate and far tails, the corner within 1 of the top, lower half)
    sd = math.sqrt(M / 12)
    s = np.concatenate([M / 2 + np.array([-30, -3, -0.05, 0.0, 0.05, 0.5, 3, 10, 40]) * sd,
                        M - np.array([50.0, 5.0, 1.0, 0.3])])
    exact = N.irwin_hall_log_sf_exact(s, M)
    approx = N.irwin_hall_log_sf_saddle(s, M)
    assert np.all(np.abs(approx - exact) <= 1e-6 * np.maximum(1.0, np.abs(exact)))
    # the public entry point switches at U_EXACT_MAX_M
    np.testing.assert_array_equal(null_log_sf(s, M, "u"), approx)


def test_law_cache_is_bounded():
    N.law.cache_clear()
    for i in range(N.LAW_CACHE_SIZE + 20):
        N.law("lattimore", 0.01 + 1e-4 * i)
    assert N.law.cache_info().currsize == N.LAW_CACHE_SIZE
    assert N.law.cache_info().maxsize == N.LAW_CACHE_SIZE


# ----------------------------------------------------------------------------------------
# Li and Lattimore over the whole parameter range (regression: tiny Δ and ε)
# ----------------------------------------------------------------------------------------

#: a log grid of the parameter down to the smallest positive float (subnormal 5e-324)
LOG_GRID = [0.9, 0.5, 0.3, 0.1, 1e-2, 1e-4, 1e-6, 1e-8, 1e-12, 1e-16, 1e-32, 1e-64,
            1e-128, 1e-256, 1e-300, 1e-308, 5e-324]
REPORTED_U = np.array([0.3, 0.9, 0.99, 0.5])


def test_li_and_lattimore_reported_small_parameter_cases():
    # the reported cases: Lattimore at ε = 1e-50 returned 0.0 and at 1e-16 -1.73 (truth
    # -3.227 ± 0.004 by 2e6 Monte Carlo draws); Li at Δ = 1e-6 returned -0.476 (truth
    # -1.930 ± 0.002); both now agree with Monte Carlo (see the grid tests below)
    for eps in (1e-16, 1e-50):
        assert lattimore_log_pvalue(REPORTED_U, eps) == pytest.approx(-3.227, abs=0.012)
    assert li_log_pvalue(REPORTED_U, 1e-6) == pytest.approx(-1.930, abs=0.006)


@settings(max_examples=60)
@given(st.floats(-323.3, -1e-3), st.floats(1e-9, 1 - 1e-9))
def test_single_token_tail_exact_over_the_whole_range(log10_param, u0):
    # M = 1 has an exact reference for every parameter: P(h(U) >= h(u0)) = 1 - u0 (Li,
    # h increasing) and max(1 - u0, ε) for Lattimore (the atom of mass ε at the cap); one
    # token is the law's own tail, computed from its exact CDF (relative error ~1e-10)
    x = 10.0**log10_param
    got = li_log_pvalue(np.array([u0]), x)
    assert got == pytest.approx(math.log1p(-u0), rel=1e-8)
    got = lattimore_log_pvalue(np.array([u0]), x)
    assert got == pytest.approx(math.log(max(1 - u0, x)), rel=1e-8)


def _mc_check(score, param, U, n, seed):
    """|p - p̂| <= 5 binomial standard errors at the statistic of the pivots U, with p̂ from
    n null sums of len(U) tokens, summed in the engine's own units (exact for every Δ).
    One comparison fails by chance with probability < 6e-7 (two-sided normal 5σ)."""
    rng = np.random.default_rng(seed)
    M = U.size
    if score == "li":
        def stat(V):
            return N.li_scaled_from_logu(np.log(V), param).sum(axis=-1)
        lp = li_log_pvalue(U, param)
    else:
        def stat(V):
            return token_scores(V, "lattimore", epsilon=param).sum(axis=-1)
        lp = lattimore_log_pvalue(U, param)
    s0 = stat(U)
    hits = 0
    for start in range(0, n, 250_000):
        m = min(250_000, n - start)
        hits += int(np.count_nonzero(stat(rng.uniform(size=(m, M))) >= s0))
    p = math.exp(lp)
    assert_within_se(hits / n, p, math.sqrt(p * (1 - p) / n), z=5.0, label=f"{score} {param}")


@pytest.mark.parametrize("param", LOG_GRID)
@pytest.mark.parametrize("score", ["li", "lattimore"])
def test_tail_matches_monte_carlo_over_a_log_grid(score, param):
    # light version (fast tier): 200,000 null sums per grid point and the reported cases' pivots;
    # 34 comparisons at < 6e-7 each: the test fails by chance with probability < 2.1e-5.
    # It detects a relative error of p above ~3% (the bug was a factor 4 in p).
    _mc_check(score, param, REPORTED_U, 200_000, seed=int(1e3 * -math.log10(param)) + 7)


@pytest.mark.slow
@pytest.mark.parametrize("param", LOG_GRID)
@pytest.mark.parametrize("score", ["li", "lattimore"])
def test_tail_matches_monte_carlo_over_a_log_grid_heavy(score, param):
    # heavy version: 4,000,000 null sums, three pivot vectors (null-like, the reported cases', and
    # watermark-like near 1, M = 6); 102 comparisons at < 6e-7 each: false-failure rate
    # < 6.2e-5.  Detects a relative error of p of about 1% at p ~ 0.1.
    rng = np.random.default_rng(99)
    for U in (rng.uniform(size=6), REPORTED_U, 1 - 0.3 * rng.uniform(size=6) ** 2):
        _mc_check(score, param, U, 4_000_000, seed=int(1e3 * -math.log10(param)) + 11)


def test_empirical_threshold_detects_exactly_floor_fpr_n():
    # Regression: the threshold was the k-th largest null score, so `S > threshold` detected
    # only k - 1 of them (empirical FPR 0.0099 at n = 10,000, fpr = 0.01).  Without ties the
    # rule now detects exactly the k = floor(fpr n) largest.
    from specbound.theory import empirical_threshold

    rng = np.random.default_rng(3)
    for n, fpr in ((10_000, 0.01), (1_000, 0.05), (999, 0.01), (50, 0.01), (7, 0.5)):
        S0 = rng.standard_normal(n)
        thr = empirical_threshold(S0, fpr)
        assert int(np.sum(S0 > thr)) == int(np.floor(fpr * n)), (n, fpr)
