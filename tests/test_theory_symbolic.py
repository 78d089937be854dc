"""Tests for :mod:`specbound.theory.symbolic`: every claim must be *proved by sympy*.

Each test asserts that the residuals are structurally ``0`` (or that a polynomial
certificate exists) and, as a negative control, that the same machinery does *not* prove a
false variant, so a check that always says "proved" would fail here.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest
import sympy as sp

from specbound.theory import symbolic

# --- Σ_j max(p_j/p_i, q_j/q_i) = (1 + α_i)/p_i -----------------------------------------------


@pytest.mark.parametrize("n", [2, 3, 4])
@pytest.mark.parametrize("method", ["abs", "cases"])
def test_max_identity(n, method):
    res = symbolic.max_identity(n, method=method)
    assert res.proved
    assert all(r == 0 for r in res.residuals)
    assert res.simplified == 0
    expected_cases = n if method == "abs" else n * 2 ** (n - 1)
    assert res.cases == expected_cases == len(res.statements) == len(res.residuals)
    assert all(isinstance(s, sp.Eq) for s in res.statements)
    # the statement really is the identity of Liu et al. (2026), proof of Thm B.2 (not
    # something trivial)
    assert all(s.lhs.has(sp.Max) for s in res.statements)
    if method == "cases":
        _assert_cases_partition(res, n, n, 2 ** (n - 1))


def _assert_cases_partition(res, n, groups, per_group):
    # the case conditions of each group (one index i) are exhaustive and disjoint: at random
    # rational points (ties included) exactly one condition of every group holds
    p = sp.symbols(f"p1:{n + 1}", positive=True)
    q = sp.symbols(f"q1:{n + 1}", positive=True)
    ell = sp.Symbol("ell", positive=True)
    rng = np.random.default_rng(7)
    conds = res.conditions[: groups * per_group]
    assert len(conds) == groups * per_group
    for trial in range(20):
        pv = rng.integers(1, 4, size=n)
        qv = rng.integers(1, 4, size=n) if trial % 2 else pv  # odd trials: ties everywhere
        point = {p[k]: sp.Rational(int(pv[k]), 1) for k in range(n)}
        point |= {q[k]: sp.Rational(int(qv[k]), 1) for k in range(n)}
        point[ell] = sp.Integer(1)
        for g in range(groups):
            held = [bool(c.subs(point)) for c in conds[g * per_group : (g + 1) * per_group]]
            assert sum(held) == 1


@pytest.mark.parametrize("method", ["abs", "cases"])
def test_max_identity_needs_normalization(method):
    # negative control: without Σp = 1 the identity is false and must not be "proved";
    # the residual is exactly (Σp − 1)/p_i
    res = symbolic.max_identity(3, method=method, normalized=False)
    assert not res.proved
    p = sp.symbols("p1:4", positive=True)
    for k, r in enumerate(res.residuals):
        i = k if method == "abs" else k // 4
        assert sp.simplify(r - (sum(p) - 1) / p[i]) == 0


def test_max_identity_agrees_numerically():
    # sanity check of the statement itself at a rational point (not the proof)
    res = symbolic.max_identity(3)
    p = sp.symbols("p1:4", positive=True)
    q = sp.symbols("q1:4", positive=True)
    point = {p[0]: sp.Rational(1, 2), p[1]: sp.Rational(1, 3), p[2]: sp.Rational(1, 6)}
    point |= {q[0]: sp.Rational(1, 5), q[1]: sp.Rational(3, 5), q[2]: sp.Rational(1, 5)}
    for s in res.statements:
        assert sp.nsimplify(s.lhs.subs(point) - s.rhs.subs(point)) == 0


# --- key inequality 1 − (α/(1+α))^B ≥ B/(B+α) ----------------------------------------------


@pytest.mark.parametrize("B", range(1, 9))
def test_key_inequality(B):
    res = symbolic.key_inequality(B)
    a = res.variable
    assert res.B == B
    assert res.nonnegative
    assert res.matches_closed_form
    assert res.value_at_zero == 0  # equality at α = 0 (p = q)
    assert all(c >= 0 for c in res.numerator_coeffs)
    assert all(c >= 0 for c in res.denominator_coeffs)
    # the certificate represents the difference exactly
    diff = 1 - (a / (1 + a)) ** B - sp.Integer(B) / (B + a)
    assert sp.cancel(res.numerator / res.denominator - diff) == 0
    if B == 1:
        assert res.identically_zero and not res.strict  # PML = LML at B = 1
    else:
        assert res.strict and not res.identically_zero
        # the linear coefficient C(B, 0) = 1 makes it strict for α > 0
        assert sp.Poly(res.numerator, a).coeff_monomial(a) > 0


def test_key_inequality_closed_form_is_binomial():
    res = symbolic.key_inequality(5)
    a = res.variable
    assert sp.expand(res.closed_form - (10 * a**4 + 10 * a**3 + 5 * a**2 + a)) == 0


def test_certificate_rejects_false_inequality():
    # negative control: 1 − (α/(1+α))^B ≥ (B+1)/(B+1+α) is false for large α; no certificate
    a = sp.Symbol("alpha", nonnegative=True)
    B = 3
    false_claim = 1 - (a / (1 + a)) ** B - sp.Integer(B + 1) / (B + 1 + a)
    res = symbolic.nonnegative_on_halfline(false_claim, a)
    assert not res.nonnegative and not res.strict
    assert false_claim.subs(a, 100) < 0  # it is indeed false


def test_certificate_zero_and_positive_constant():
    x = sp.Symbol("x")
    z = symbolic.nonnegative_on_halfline(x / (1 + x) - 1 + 1 / (1 + x), x)
    assert z.nonnegative and z.identically_zero and not z.strict
    c = symbolic.nonnegative_on_halfline((x + 2) / (3 * x + 1), x)
    assert c.nonnegative and c.strict and c.value_at_zero == 2
    neg_den = symbolic.nonnegative_on_halfline(1 / (x - 1), x)
    assert not neg_den.nonnegative


def test_certificate_validation():
    x, y = sp.symbols("x y")
    with pytest.raises(ValueError, match="^x: must be a sympy Symbol"):
        symbolic.nonnegative_on_halfline(x, "x")
    with pytest.raises(ValueError, match="^expr: must depend on x only"):
        symbolic.nonnegative_on_halfline(x + y, x)
    with pytest.raises(ValueError, match="^expr: must be a rational function"):
        symbolic.nonnegative_on_halfline(sp.exp(x), x)


# --- MPFR exactness integral ---------------------------------------------------------------


@pytest.mark.parametrize("B", range(1, 7))
def test_mpfr_integral(B):
    res = symbolic.mpfr_integral(B)
    assert res.proved
    assert res.residuals == (0,)
    (stmt,) = res.statements
    assert isinstance(stmt.lhs, sp.Integral)
    # negative control: the same integral is not (α/(1+α))^(B+1)
    a = sp.Symbol("alpha", positive=True)
    value = stmt.lhs.doit()
    assert sp.simplify(value - (a / (1 + a)) ** (B + 1)) != 0


def test_mpfr_integral_matches_quadrature():
    # independent numerical sanity check of the statement at α = 0.7, B = 3
    from scipy import integrate, stats

    alpha, B = 0.7, 3
    val, _ = integrate.quad(lambda t: np.exp(-t) * stats.poisson.sf(B - 1, t * alpha), 0, np.inf)
    assert val == pytest.approx((alpha / (1 + alpha)) ** B, rel=1e-8)


# --- lenience constant ---------------------------------------------------------------------


@pytest.mark.parametrize("n", [2, 3, 4])
@pytest.mark.parametrize("method", ["abs", "cases"])
def test_lenience_numerator(n, method):
    res = symbolic.lenience_numerator(n, method=method)
    assert res.proved
    assert all(r == 0 for r in res.residuals)
    assert res.cases == (1 if method == "abs" else 2**n)
    # one statement per case plus the ℓ = 1 (numerator = TV) statement
    assert len(res.statements) == res.cases + 1
    assert res.statements[0].lhs.has(sp.Min)
    if method == "cases":
        assert len(res.conditions) == len(res.statements)
        _assert_cases_partition(res, n, 1, 2**n)


def test_lenience_numerator_numeric():
    # sanity check of the statement with numbers (ℓ = 0.6)
    rng = np.random.default_rng(3)
    p, q = rng.dirichlet(np.ones(5)), rng.dirichlet(np.ones(5))
    ell = 0.6
    lhs = 1 - np.minimum(q, p / ell).sum()
    rhs = 0.5 * np.abs(q - p / ell).sum() + 0.5 - 1 / (2 * ell)
    assert lhs == pytest.approx(rhs, abs=1e-14)


# --- Gumbel-max = exponential race ---------------------------------------------------------


@pytest.mark.parametrize("n", [2, 3])
def test_gumbel_exponential_race(n):
    res = symbolic.gumbel_exponential_race(n)
    assert res.proved
    assert all(r == 0 for r in res.residuals)
    assert len(res.statements) == 3 + 2 * n
    p = sp.symbols(f"p1:{n + 1}", positive=True)
    # the win-probability statements are p_i / Σp and they sum to 1
    wins = [s.rhs for s in res.statements[3::2]]
    assert sp.simplify(sum(wins) - 1) == 0
    assert all(sp.simplify(w - p[i] / sum(p)) == 0 for i, w in enumerate(wins))
    # the Gumbel statements are integrals over the real line
    for s in res.statements[4::2]:
        assert isinstance(s.lhs, sp.Integral)
        ((_, lo, hi),) = s.lhs.limits
        assert lo == -sp.oo and hi == sp.oo


# --- validation and import hygiene ---------------------------------------------------------


@pytest.mark.parametrize(
    ("func", "kwargs", "match"),
    [
        (symbolic.max_identity, {"vocab_size": 1}, "^vocab_size: must be >= 2"),
        (symbolic.max_identity, {"vocab_size": 7}, "^vocab_size: must be <= 6"),
        (symbolic.max_identity, {"vocab_size": 5, "method": "cases"},
         "^vocab_size: must be <= 4"),
        (symbolic.max_identity, {"vocab_size": 2.5}, "^vocab_size: must be an integer"),
        (symbolic.max_identity, {"vocab_size": 3, "method": "numeric"},
         "^method: must be one of"),
        (symbolic.max_identity, {"vocab_size": 3, "normalized": "no"},
         "^normalized: must be True or False"),
        (symbolic.lenience_numerator, {"vocab_size": 0}, "^vocab_size: must be >= 2"),
        (symbolic.lenience_numerator, {"vocab_size": 3, "method": "x"},
         "^method: must be one of"),
        (symbolic.gumbel_exponential_race, {"vocab_size": 1}, "^vocab_size: must be >= 2"),
        (symbolic.key_inequality, {"B": 0}, "^B: must be >= 1"),
        (symbolic.key_inequality, {"B": 17}, "^B: must be <= 16"),
        (symbolic.key_inequality, {"B": "2"}, "^B: must be an integer"),
        (symbolic.mpfr_integral, {"B": 0}, "^B: must be >= 1"),
        (symbolic.mpfr_integral, {"B": 1.5}, "^B: must be an integer"),
    ],
)
def test_validation(func, kwargs, match):
    with pytest.raises(ValueError, match=match):
        func(**kwargs)


def test_theory_package_does_not_import_sympy_module():
    import specbound.theory as theory

    assert "symbolic" not in theory.__all__
    assert "specbound.theory.symbolic" in sys.modules  # imported by this test file only
    assert symbolic.__name__ == "specbound.theory.symbolic"


def test_results_are_frozen():
    res = symbolic.mpfr_integral(1)
    with pytest.raises(AttributeError):
        res.proved = False


def test_vocab_size_renamed_from_n():
    # the vector identities take vocab_size (n means a number of samples in the package)
    assert symbolic.max_identity(vocab_size=2).proved
    for fn in (symbolic.max_identity, symbolic.gumbel_exponential_race):
        with pytest.raises(TypeError, match="'n'"):  # the removed pre-release alias
            fn(n=2)
