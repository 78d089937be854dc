"""Derivations behind the acceptance formulas, checked by sympy.

Every function here builds the statement symbolically, lets sympy reduce it, and reports
what sympy established.  Nothing is evaluated at sample points: a claim counts as proved only
when its residual (left-hand side minus right-hand side) simplifies to exactly ``0``, or, for
an inequality, when sympy exhibits a *certificate* (a rational function whose numerator and
denominator are polynomials with nonnegative coefficients on the half line).

The module imports sympy, which is slow to import, so :mod:`specbound.theory` does not
import it; use ``from specbound.theory import symbolic``.

Contents (Liu, Wan, Gao & Gündüz 2026, "Watermarkable multi-draft speculative sampling",
arXiv:2609.21858, cited below as Liu et al. 2026; Zhou et al. 2026, arXiv:2607.26627):

- :func:`max_identity` -- Σ_j max(p_j/p_i, q_j/q_i) = (1 + α_i)/p_i (Liu et al. 2026, proof
  of Thm B.2);
- :func:`key_inequality` -- 1 − (α/(1+α))^B ≥ B/(B+α), the term-by-term step of PML ≥ LML
  (Liu et al. 2026, Thm B.2), strict for B > 1 and α > 0;
- :func:`mpfr_integral` -- ∫_0^∞ e^{−t} P(Poisson(tα) ≥ B) dt = (α/(1+α))^B, which makes the
  PML expression the *exact* acceptance of the token-clock MPFR (Liu et al. 2026, Alg. 6);
- :func:`lenience_numerator` -- 1 − Σ min(q, p/ℓ) = ½Σ|q − p/ℓ| + ½ − 1/(2ℓ), the numerator of
  Δ_ℓ (Zhou et al. 2026, Eq. 10, the lenience rule);
- :func:`gumbel_exponential_race` -- the Gumbel-max trick is the exponential race
  (Liu et al. 2026, App. A.2).

The zero-probability conventions of the numerical code (:mod:`specbound.theory.acceptance`)
are limits of these formulas; the symbolic statements assume strictly positive p and q, as
the paper does.  The vector identities take the vocabulary size ``vocab_size``.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import sympy as sp

from specbound._validation import as_bool, as_choice, as_int

__all__ = [
    "Derivation",
    "InequalityProof",
    "KeyInequality",
    "gumbel_exponential_race",
    "key_inequality",
    "lenience_numerator",
    "max_identity",
    "mpfr_integral",
    "nonnegative_on_halfline",
]

#: largest vocabulary for the symbolic vector identities (runtime grows like 2^n with cases)
MAX_N = 6
MAX_N_CASES = 4
#: largest B for the symbolic B-indexed statements
MAX_B = 16


@dataclass(frozen=True)
class Derivation:
    """The outcome of a symbolic identity check.

    Attributes
    ----------
    name : str
        What was checked.
    statements : tuple of sympy.Eq
        The claims, one per index or case (unevaluated equations ``lhs == rhs``).
    residuals : tuple of sympy.Expr
        ``lhs − rhs`` for each statement after sympy's reduction; ``0`` when proved.
    proved : bool
        True iff every residual is identically zero (``residual == 0`` structurally, after
        reduction), i.e. sympy proved every statement.
    cases : int
        How many cases the proof split into (1 when no case split was needed).
    conditions : tuple of sympy boolean
        For a case split, the condition of each case (aligned with :attr:`statements`;
        ``True`` for a statement proved without case split).  Empty when there is no split.
    """

    name: str
    statements: tuple
    residuals: tuple
    proved: bool
    cases: int = 1
    conditions: tuple = ()

    @property
    def simplified(self) -> sp.Expr:
        """Sum of the absolute residuals (``0`` iff :attr:`proved`)."""
        return sp.Add(*(sp.Abs(r) for r in self.residuals))


@dataclass(frozen=True)
class InequalityProof:
    """A certificate that ``f(x) ≥ 0`` for all ``x ≥ 0`` (and where it is strict).

    ``f = numerator / denominator`` with both polynomials in ``x``; ``f ≥ 0`` on ``x ≥ 0``
    is certified when all coefficients of both are ≥ 0 and the denominator is not the zero
    polynomial with a positive constant term (so it is > 0 on ``x ≥ 0``).

    Attributes
    ----------
    expression : sympy.Expr
        The difference ``lhs − rhs`` that must be nonnegative.
    variable : sympy.Symbol
    numerator, denominator : sympy.Expr
        ``expression == numerator / denominator`` (checked by sympy).
    numerator_coeffs, denominator_coeffs : tuple of sympy.Rational
        Coefficients, highest degree first.
    nonnegative : bool
        The certificate holds: ``expression ≥ 0`` for every ``x ≥ 0``.  False means *no
        certificate was found*, not that the claim is false.
    strict : bool
        Certified ``expression > 0`` for every ``x > 0`` (nonnegative certificate and a
        nonzero numerator).
    identically_zero : bool
        ``expression == 0`` for every x (the numerator is the zero polynomial).
    value_at_zero : sympy.Expr
        ``expression`` at ``x = 0``.
    """

    expression: sp.Expr
    variable: sp.Symbol
    numerator: sp.Expr
    denominator: sp.Expr
    numerator_coeffs: tuple
    denominator_coeffs: tuple
    nonnegative: bool
    strict: bool
    identically_zero: bool
    value_at_zero: sp.Expr


@dataclass(frozen=True)
class KeyInequality(InequalityProof):
    """:class:`InequalityProof` of 1 − (α/(1+α))^B ≥ B/(B+α) for one B.

    Extra attributes
    ----------------
    B : int
    closed_form : sympy.Expr
        The binomial-theorem numerator Σ_{k=0}^{B−2} C(B,k) α^{k+1} of the proof of Thm B.2
        in Liu et al. (2026).
    matches_closed_form : bool
        sympy's numerator equals :attr:`closed_form` identically.
    """

    B: int = 1
    closed_form: sp.Expr = sp.S.Zero
    matches_closed_form: bool = False


def _is_zero(expr) -> bool:
    return sp.sympify(expr) == 0


def _reduce(expr) -> sp.Expr:
    """Reduce a rational expression (possibly with Abs/log atoms) to a canonical form."""
    expr = sp.cancel(sp.together(sp.expand(expr)))
    if expr != 0:
        expr = sp.simplify(expr)
    return expr


def _vectors(n: int):
    p = sp.symbols(f"p1:{n + 1}", positive=True)
    q = sp.symbols(f"q1:{n + 1}", positive=True)
    return p, q


def _normalize_subs(vec) -> dict:
    """Substitution that enforces Σ vec = 1 by eliminating the last entry."""
    return {vec[-1]: 1 - sp.Add(*vec[:-1])}


def _gap_symbol(k: int, sign: int) -> sp.Symbol:
    """The gap d_k of a case split: d_k ≥ 0 when ``sign = +1``, d_k > 0 when ``sign = −1``.

    Writing a ratio as ``a + d`` (d ≥ 0) or ``a − d`` (d > 0) covers every real value exactly
    once, so the two cases per coordinate are exhaustive.
    """
    if sign > 0:
        return sp.Symbol(f"d{k + 1}", nonnegative=True)
    return sp.Symbol(f"d{k + 1}", positive=True)


def _check_n(n, name: str = "vocab_size", max_value: int = MAX_N) -> int:
    return as_int(n, name, min_value=2, max_value=max_value)


def max_identity(vocab_size: int = 3, method: str = "abs",
                 normalized: bool = True) -> Derivation:
    """Prove Σ_j max(p_j/p_i, q_j/q_i) = (1 + α_i)/p_i for symbolic vectors of length n.

    Here α_i := p_i Σ_j (q_j/q_i − p_j/p_i)₊ (Liu et al. 2026, proof of Thm B.2), with
    positive symbols p_1..p_n, q_1..q_n and the constraint Σ_j p_j = 1 (imposed by
    eliminating p_n).  The identity is the term-by-term fact
    max(a, b) = a + (b − a)₊ summed over j, with Σ_j p_j/p_i = 1/p_i.

    Parameters
    ----------
    vocab_size : int
        Vocabulary size n, 2 ≤ n ≤ 6 (``method="cases"``: n ≤ 4).
    method : {"abs", "cases"}
        ``"abs"``: sympy rewrites ``Max(a, b)`` as ``(a + b + |a − b|)/2`` and the residual
        reduces to 0.  ``"cases"``: for every j ≠ i the ratio q_j/q_i is written as
        p_j/p_i + d_j (d_j ≥ 0) or p_j/p_i − d_j (d_j > 0), which covers every value once;
        sympy resolves every ``Max`` from the sign of d_j alone, and each of the 2^(n−1)
        cases per i must reduce to 0 (after substituting d_j back).
    normalized : bool
        Impose Σ p = 1 (default).  With ``False`` the identity is false in general (the
        residual is (Σ_j p_j − 1)/p_i), a negative control showing the check can fail.

    Returns
    -------
    Derivation
        One statement per index i (``"abs"``) or per (i, case) (``"cases"``).
    """
    method = as_choice(method, "method", ("abs", "cases"))
    n = _check_n(vocab_size, "vocab_size", MAX_N_CASES if method == "cases" else MAX_N)
    normalized = as_bool(normalized, "normalized")
    p, q = _vectors(n)
    subs = _normalize_subs(p) if normalized else {}
    statements, residuals, conditions = [], [], []
    cases = 0
    for i in range(n):
        others = [j for j in range(n) if j != i]
        lhs_i = sp.Add(*(sp.Max(p[j] / p[i], q[j] / q[i]) for j in range(n)))
        alpha_i = p[i] * sp.Add(*(sp.Max(q[j] / q[i] - p[j] / p[i], 0) for j in range(n)))
        statement = sp.Eq(lhs_i, (1 + alpha_i) / p[i], evaluate=False)
        if method == "abs":
            patterns = [None]
        else:
            patterns = list(itertools.product((1, -1), repeat=len(others)))
        for pattern in patterns:
            cases += 1
            qv = list(q)
            back = {}
            cond = []
            if pattern is not None:
                for j, s in zip(others, pattern, strict=True):
                    d = _gap_symbol(j, s)
                    qv[j] = q[i] * (p[j] / p[i] + s * d)
                    back[d] = s * (q[j] / q[i] - p[j] / p[i])
                    rel = sp.Ge if s > 0 else sp.Lt
                    cond.append(rel(q[j] / q[i], p[j] / p[i]))
            statements.append(statement)
            conditions.append(sp.And(*cond))
            lhs = sp.Add(*(sp.Max(p[j] / p[i], qv[j] / qv[i]) for j in range(n)))
            alpha = p[i] * sp.Add(*(sp.Max(qv[j] / qv[i] - p[j] / p[i], 0) for j in range(n)))
            rhs = (1 + alpha) / p[i]
            diff = lhs - rhs
            if method == "abs":
                diff = diff.rewrite(sp.Abs)
            elif diff.has(sp.Max):  # pragma: no cover - sympy failed to resolve a case
                residuals.append(diff)
                continue
            residuals.append(_reduce(diff.subs(back).subs(subs)))
    return Derivation(
        name=f"sum_j max(p_j/p_i, q_j/q_i) = (1 + alpha_i)/p_i, n={n}, method={method}",
        statements=tuple(statements),
        residuals=tuple(residuals),
        proved=all(_is_zero(r) for r in residuals),
        cases=cases,
        conditions=tuple(conditions) if method == "cases" else (),
    )


def nonnegative_on_halfline(expr, x: sp.Symbol) -> InequalityProof:
    """Certify ``expr ≥ 0`` for all ``x ≥ 0`` by a nonnegative-coefficient certificate.

    sympy brings ``expr`` to a single fraction N(x)/D(x) of polynomials (denominator with
    positive leading coefficient).  If every coefficient of N and of D is ≥ 0 and D(0) > 0,
    then D > 0 and N ≥ 0 on [0, ∞), hence ``expr ≥ 0`` there; if moreover N is not the zero
    polynomial it has a positive coefficient, so N(x) > 0 for x > 0 when N(0) = 0 or not.

    Parameters
    ----------
    expr : sympy expression
        Rational in ``x`` (other symbols are not allowed).
    x : sympy.Symbol

    Returns
    -------
    InequalityProof
        ``nonnegative=False`` means only that this certificate does not apply.
    """
    if not isinstance(x, sp.Symbol):
        raise ValueError(f"x: must be a sympy Symbol, got {x!r}")
    expr = sp.sympify(expr)
    extra = expr.free_symbols - {x}
    if extra:
        raise ValueError(f"expr: must depend on {x} only, also has {sorted(map(str, extra))}")
    num, den = sp.fraction(sp.cancel(sp.together(expr)))
    num, den = sp.expand(num), sp.expand(den)
    try:
        pn, pd = sp.Poly(num, x), sp.Poly(den, x)
    except sp.PolynomialError:
        raise ValueError(f"expr: must be a rational function of {x}") from None
    if pd.LC() < 0:
        pn, pd, num, den = -pn, -pd, -num, -den
    if not _is_zero(sp.cancel(num / den - expr)):  # pragma: no cover - sympy invariant
        raise AssertionError("cancel() changed the expression")
    cn, cd = tuple(pn.all_coeffs()), tuple(pd.all_coeffs())
    zero = pn.is_zero
    nonneg = all(c >= 0 for c in cn) and all(c >= 0 for c in cd) and pd.eval(0) > 0
    return InequalityProof(
        expression=expr,
        variable=x,
        numerator=num,
        denominator=den,
        numerator_coeffs=cn,
        denominator_coeffs=cd,
        nonnegative=bool(nonneg),
        strict=bool(nonneg and not zero),
        identically_zero=bool(zero),
        value_at_zero=sp.cancel(num.subs(x, 0) / den.subs(x, 0)),
    )


def key_inequality(B: int) -> KeyInequality:
    """Prove 1 − (α/(1+α))^B ≥ B/(B+α) for every α ≥ 0, for one integer B ≥ 1.

    This is the term-by-term comparison in the proof of Thm B.2 of Liu et al. (2026) (PML ≥
    LML, i.e.
    1 − Σ_i p_i(α_i/(1+α_i))^B ≥ Σ_i p_i B/(B+α_i)).  sympy writes the difference as
    N_B(α)/D_B(α) with D_B = (1+α)^B (B+α) and N_B = Σ_{k=0}^{B−2} C(B,k) α^{k+1}
    (nonnegative coefficients), so:

    - the inequality holds for all α ≥ 0 (certificate :attr:`nonnegative`);
    - for B = 1, N_1 ≡ 0: equality for every α (PML = LML = exp-race at B = 1);
    - for B > 1, N_B has the positive coefficient C(B,0)·α, so it is strict for α > 0;
    - at α = 0 (p_i = q_i) both sides equal 1.

    Parameters
    ----------
    B : int
        Number of drafts, 1 ≤ B ≤ 16.

    Returns
    -------
    KeyInequality
    """
    B = as_int(B, "B", min_value=1, max_value=MAX_B)
    a = sp.Symbol("alpha", nonnegative=True)
    diff = 1 - (a / (1 + a)) ** B - sp.Integer(B) / (B + a)
    cert = nonnegative_on_halfline(diff, a)
    closed = sp.Add(*(sp.binomial(B, k) * a ** (k + 1) for k in range(B - 1)))
    den = sp.expand((1 + a) ** B * (B + a))
    # the certificate's fraction may carry a common constant factor: compare N/D
    matches = _is_zero(sp.cancel(cert.numerator * den - closed * cert.denominator))
    return KeyInequality(
        **{f: getattr(cert, f) for f in InequalityProof.__dataclass_fields__},
        B=B,
        closed_form=closed,
        matches_closed_form=bool(matches),
    )


def mpfr_integral(B: int) -> Derivation:
    """Prove ∫_0^∞ e^{−t} P(Poisson(tα) ≥ B) dt = (α/(1+α))^B for one B ≥ 1.

    This is the rejection probability of the discrete token-clock MPFR (Liu et al. 2026,
    Alg. 6) given that the target token is i, with α = α_i: given the winning score
    t ~ Exp(1), the number of other-token draft arrivals that beat token i's first draft
    arrival is Poisson(tα_i), and i is missed by the B drafts iff that count is ≥ B.  Hence
    P(accept) = 1 − Σ_i p_i (α_i/(1+α_i))^B exactly, the PML expression of Thm B.1.

    The Poisson tail is written as 1 − Σ_{k<B} e^{−tα}(tα)^k/k! and sympy integrates it with
    α a positive symbol.

    Parameters
    ----------
    B : int
        1 ≤ B ≤ 16.

    Returns
    -------
    Derivation
        One statement; :attr:`Derivation.proved` is True iff sympy's integral minus
        (α/(1+α))^B reduces to 0.
    """
    B = as_int(B, "B", min_value=1, max_value=MAX_B)
    t = sp.Symbol("t", positive=True)
    a = sp.Symbol("alpha", positive=True)
    tail = 1 - sp.Add(*(sp.exp(-t * a) * (t * a) ** k / sp.factorial(k) for k in range(B)))
    integral = sp.Integral(sp.exp(-t) * tail, (t, 0, sp.oo))
    value = integral.doit()
    rhs = (a / (1 + a)) ** B
    residual = _reduce(value - rhs)
    if value.has(sp.Integral):  # pragma: no cover - sympy could not integrate
        residual = value - rhs
    return Derivation(
        name=f"int_0^oo e^-t P(Poisson(t alpha) >= {B}) dt = (alpha/(1+alpha))^{B}",
        statements=(sp.Eq(integral, rhs, evaluate=False),),
        residuals=(residual,),
        proved=_is_zero(residual),
    )


def lenience_numerator(vocab_size: int = 3, method: str = "abs") -> Derivation:
    """Prove 1 − Σ_k min(q_k, p_k/ℓ) = ½Σ_k|q_k − p_k/ℓ| + ½ − 1/(2ℓ) for length-n vectors.

    The left side is the rejection probability of the lenience rule h = min(1, p/(ℓq))
    (Zhou et al. 2026, §3), the right side the numerator of Δ_ℓ (ibid., Eq. 10), so
    Δ_ℓ = [1 − Σ min(q, p/ℓ)] / TV(p, q).  Symbols: positive p, q, ℓ with Σp = Σq = 1
    (imposed by eliminating p_n and q_n).  Term by term it is min(a, b) = (a + b − |a − b|)/2.

    Parameters
    ----------
    vocab_size : int
        Vocabulary size n, 2 ≤ n ≤ 6 (``method="cases"``: n ≤ 4).
    method : {"abs", "cases"}
        ``"abs"``: sympy rewrites ``Min`` through ``Abs``.  ``"cases"``: each q_k is written
        as p_k/ℓ + d_k (d_k ≥ 0) or p_k/ℓ − d_k (d_k > 0), sympy resolves every ``Min`` and
        ``Abs`` from the sign, and each of the 2^n cases must reduce to 0.

    Returns
    -------
    Derivation
        Also contains, as the last statement, the ℓ = 1 check that the numerator equals
        TV(p, q) = ½Σ|q − p| (so Δ_1 = 1 and lenience 1 is lossless).
    """
    method = as_choice(method, "method", ("abs", "cases"))
    n = _check_n(vocab_size, "vocab_size", MAX_N_CASES if method == "cases" else MAX_N)
    p, q = _vectors(n)
    ell = sp.Symbol("ell", positive=True)
    subs = {**_normalize_subs(p), **_normalize_subs(q)}
    half = sp.Rational(1, 2)

    def sides(qv):
        lhs = 1 - sp.Add(*(sp.Min(qv[k], p[k] / ell) for k in range(n)))
        rhs = half * sp.Add(*(sp.Abs(qv[k] - p[k] / ell) for k in range(n)))
        return lhs, rhs + half - 1 / (2 * ell)

    statements, residuals, conditions = [], [], []
    statement = sp.Eq(*sides(q), evaluate=False)
    patterns = [None] if method == "abs" else itertools.product((1, -1), repeat=n)
    cases = 0
    for pattern in patterns:
        cases += 1
        qv, back, cond = list(q), {}, []
        if pattern is not None:
            for k, s in enumerate(pattern):
                d = _gap_symbol(k, s)
                qv[k] = p[k] / ell + s * d
                back[d] = s * (q[k] - p[k] / ell)
                cond.append((sp.Ge if s > 0 else sp.Lt)(q[k], p[k] / ell))
        statements.append(statement)
        conditions.append(sp.And(*cond))
        lhs, rhs = sides(qv)
        diff = lhs - rhs
        if method == "abs":
            diff = diff.rewrite(sp.Abs)
        elif diff.has(sp.Min, sp.Abs):  # pragma: no cover - sympy failed to resolve a case
            residuals.append(diff)
            continue
        residuals.append(_reduce(diff.subs(back).subs(subs)))
    # ℓ = 1: numerator = TV(p, q)
    _, rhs1 = sides(q)
    tv = half * sp.Add(*(sp.Abs(q[k] - p[k]) for k in range(n)))
    statements.append(sp.Eq(rhs1.subs(ell, 1), tv, evaluate=False))
    conditions.append(sp.true)
    residuals.append(_reduce(rhs1.subs(ell, 1) - tv))
    return Derivation(
        name=f"1 - sum min(q, p/ell) = numerator of Delta_ell, n={n}, method={method}",
        statements=tuple(statements),
        residuals=tuple(residuals),
        proved=all(_is_zero(r) for r in residuals),
        cases=cases,
        conditions=tuple(conditions) if method == "cases" else (),
    )


def gumbel_exponential_race(vocab_size: int = 3) -> Derivation:
    """Prove that the Gumbel-max trick is the exponential race (Liu et al. 2026, App. A.2).

    With G_i i.i.d. standard Gumbel and E_i := exp(−G_i), sympy shows:

    1. ``log p_i + G_i = −log(E_i/p_i)`` (so, −log being strictly decreasing,
       argmax_i(log p_i + G_i) = argmin_i E_i/p_i: the same winner, sample by sample);
    2. ``d/dE [−log(E/p)] = −1/E`` is negative for E > 0 (the map is strictly decreasing);
    3. E_i ~ Exp(1): P(E ≤ x) = P(G ≥ −log x) = 1 − exp(−x) for x > 0;
    4. for each i, the exponential-race win probability
       ∫_0^∞ p_i e^{−t p_i} Π_{j≠i} e^{−t p_j} dt = p_i/Σ_j p_j;
    5. for each i, the Gumbel-max win probability
       ∫_ℝ f_G(x − log p_i) Π_{j≠i} F_G(x − log p_j) dx, transformed by u = e^{−x},
       is the integral of item 4 (integrands equal) and hence also p_i/Σ_j p_j.

    Parameters
    ----------
    vocab_size : int
        Vocabulary size n, 2 ≤ n ≤ 6; p_1..p_n are positive symbols, not normalized (the
        win probability is p_i/Σp).

    Returns
    -------
    Derivation
        Statements 1–3 then, for each i, statements 4 and 5.
    """
    n = _check_n(vocab_size)
    G = sp.Symbol("G", real=True)
    E = sp.Symbol("E", positive=True)
    xpos = sp.Symbol("x", positive=True)
    xr = sp.Symbol("x", real=True)
    t = sp.Symbol("t", positive=True)
    u = sp.Symbol("u", positive=True)
    p = sp.symbols(f"p1:{n + 1}", positive=True)
    S = sp.Add(*p)
    statements, residuals = [], []

    # 1. the score map
    lhs = sp.log(p[0]) + G
    rhs = -sp.log(sp.exp(-G) / p[0])
    statements.append(sp.Eq(lhs, rhs, evaluate=False))
    residuals.append(sp.simplify(sp.expand_log(lhs - rhs)))
    # 2. monotone: derivative negative (encoded as residual 0 iff sympy proves it negative)
    deriv = sp.diff(-sp.log(E / p[0]), E)
    statements.append(sp.Eq(deriv, -1 / E, evaluate=False))
    residuals.append(sp.simplify(deriv + 1 / E) if deriv.is_negative else deriv)
    # 3. E = exp(-G) ~ Exp(1): P(E <= x) = P(G >= -log x) = 1 - F_G(-log x)
    F_G = lambda y: sp.exp(-sp.exp(-y))
    f_G = lambda y: sp.exp(-y - sp.exp(-y))
    cdf_E = 1 - F_G(-sp.log(xpos))
    statements.append(sp.Eq(cdf_E, 1 - sp.exp(-xpos), evaluate=False))
    residuals.append(sp.simplify(cdf_E - (1 - sp.exp(-xpos))))

    for i in range(n):
        # 4. exponential race: density of E_i/p_i is p_i e^{-p_i t}, survival of E_j/p_j e^{-p_j t}
        race_integrand = p[i] * sp.exp(-t * p[i])
        for j in range(n):
            if j != i:
                race_integrand *= sp.exp(-t * p[j])
        race = sp.Integral(race_integrand, (t, 0, sp.oo))
        race_val = race.doit()
        statements.append(sp.Eq(race, p[i] / S, evaluate=False))
        res4 = _reduce(race_val - p[i] / S)
        residuals.append(race_val - p[i] / S if race_val.has(sp.Integral) else res4)
        # 5. Gumbel-max: argmax of log p_j + G_j is i at level x
        gum_integrand = f_G(xr - sp.log(p[i]))
        for j in range(n):
            if j != i:
                gum_integrand *= F_G(xr - sp.log(p[j]))
        gumbel = sp.Integral(gum_integrand, (xr, -sp.oo, sp.oo))
        transformed = gumbel.transform(sp.exp(-xr), u)
        ((var, lo, hi),) = transformed.limits
        same_integrand = sp.simplify(transformed.function.subs(var, t) - race_integrand)
        same_limits = lo == 0 and hi == sp.oo
        statements.append(sp.Eq(gumbel, p[i] / S, evaluate=False))
        if same_limits and _is_zero(same_integrand):
            residuals.append(_reduce(transformed.doit() - p[i] / S))
        else:  # pragma: no cover - transformation not recognised
            residuals.append(sp.Integral(same_integrand, (t, lo, hi)))
    return Derivation(
        name=f"Gumbel-max trick = exponential race, n={n}",
        statements=tuple(statements),
        residuals=tuple(residuals),
        proved=all(_is_zero(r) for r in residuals),
        cases=1,
    )
