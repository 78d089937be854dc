"""The conformance checks of :mod:`specbound.testing` and their frozen result."""

from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass, field

import numpy as np
from scipy import optimize, stats

from specbound import theory
from specbound._validation import as_choice, as_int, as_prob, as_real
from specbound.sim.gof import gof_test
from specbound.testing._harness import (
    Draws,
    _Context,
    _int_tokens,
    _readonly,
    _to_numpy,
    as_law,
    as_n,
    draw,
    draws_of,
    sampler_name,
    streams,
)

#: default overall false-failure rate of one check (the chance that a correct sampler fails)
FALSE_FAILURE_RATE = 1e-3
#: default power and the deviations the default sample sizes are sized for
POWER = 0.99
#: default detectable deviation of an emitted law, in total-variation distance
DETECT_TV = 0.01
#: default detectable deviation of an acceptance rate (absolute)
DETECT_ACCEPTANCE = 0.01
#: smallest default sample size
MIN_DEFAULT_N = 1000


# ------------------------------------------------------------------------------- power


@functools.lru_cache(maxsize=256)
def _lambda_star(dof: int, alpha: float, power: float) -> float:
    """Noncentrality at which the chi-square test at level ``alpha`` has ``power``."""
    crit = stats.chi2.isf(alpha, dof)
    f = lambda lam: stats.ncx2.sf(crit, dof, lam) - power
    hi = 10.0
    while f(hi) < 0:
        hi *= 4.0
    return float(optimize.brentq(f, 1e-9, hi, xtol=1e-6))


def tv_detectable(n: int, dof: int, alpha: float, power: float) -> float:
    """Smallest TV distance caught with probability ``power`` by ``n`` draws.

    Any law ``r`` at TV distance ``d`` from ``pi`` has chi-square effect
    ``w^2 = sum (r - pi)^2 / pi >= (sum |r - pi|)^2 = 4 d^2`` (Cauchy-Schwarz), so the
    Pearson test's noncentrality ``n w^2`` is at least ``4 n d^2``; it reaches the value
    ``lambda*`` that gives ``power`` at ``d = sqrt(lambda* / n) / 2``.  Large-sample
    (noncentral chi-square) approximation; ``dof`` is the number of positive cells minus one
    before pooling (pooling only lowers it, which raises the power).
    """
    if dof < 1:
        return math.inf
    return 0.5 * math.sqrt(_lambda_star(dof, alpha, power) / n)


def n_for_tv(delta: float, dof: int, alpha: float, power: float) -> int:
    if dof < 1:
        return MIN_DEFAULT_N
    return math.ceil(_lambda_star(dof, alpha, power) / (4.0 * delta * delta))


def _z(alpha: float, power: float) -> float:
    return float(stats.norm.isf(alpha / 2.0) + stats.norm.isf(1.0 - power))


def acc_detectable(n: int, a: float, alpha: float, power: float) -> float:
    """Smallest ``|a' - a|`` the two-sided binomial test catches with ``power``."""
    normal = _z(alpha, power) * math.sqrt(max(a * (1.0 - a), 0.0) / n)
    edge = -math.expm1(math.log1p(-power) / n)  # a in {0, 1}: one contrary draw suffices
    return max(normal, edge)


def n_for_acceptance(delta: float, a: float, alpha: float, power: float) -> int:
    need = (_z(alpha, power) / delta) ** 2 * max(a * (1.0 - a), 0.0)
    edge = math.log1p(-power) / math.log1p(-delta)
    return max(math.ceil(need), math.ceil(edge))


# ------------------------------------------------------------------------------- result


@dataclass(frozen=True, eq=False)
class CheckResult:
    """The outcome of one conformance check (frozen).

    Attributes
    ----------
    check : str
        ``"lossless"``, ``"induced"``, ``"acceptance"``, ``"block"`` or
        ``"drafter_invariance"``, or the name of a part (``"position 2"``, ...).
    sampler : str
        The sampler's name.
    passed : bool
        ``pvalue >= false_failure_rate`` (for a check with parts: every part passed at its
        Bonferroni share).
    pvalue : float
        The test's p-value (with parts: the smallest part p-value times the number of
        parts, capped at 1 -- the Bonferroni-adjusted p-value).
    statistic : float
        Pearson's chi-square (law checks), the observed acceptance rate (acceptance), the
        number of keys whose token changed with the draft (invariance), or the worst part's.
    n : int
        Sampler calls (keys for drafter invariance).
    false_failure_rate : float
        The probability that a correct sampler fails this check (exact for the binomial
        test; the chi-square approximation for laws; 0 for a deterministic property).
    min_detectable : float
        The smallest deviation caught with probability ``power`` at this ``n``: a TV distance
        of the emitted law, an absolute difference of acceptance rates, or a probability of
        a drafter-dependent token (see ``min_detectable_of``).
    min_detectable_of : str
        What ``min_detectable`` measures.
    power : float
        The power ``min_detectable`` refers to.
    failing : str
        The failing (or, when passed, the most deviant) cell, in words.
    expected, observed : ndarray or None
        The expected law and the observed counts (law checks).
    parts : tuple of CheckResult
        The sub-tests of a combined check.
    notes : tuple of str
        Further lines of the report (theory's expected tokens per block, timings, ...).
    seconds_sampler, seconds_total : float
        Time inside the sampler, and of the whole check.
    """

    check: str
    sampler: str
    passed: bool
    pvalue: float
    statistic: float
    n: int
    false_failure_rate: float
    min_detectable: float
    min_detectable_of: str
    power: float
    failing: str = ""
    expected: np.ndarray | None = None
    observed: np.ndarray | None = None
    parts: tuple = ()
    notes: tuple = ()
    seconds_sampler: float = 0.0
    seconds_total: float = 0.0
    claim: str = field(default="")

    def __bool__(self) -> bool:
        return bool(self.passed)

    def __str__(self) -> str:
        verdict = "passed" if self.passed else "FAILED"
        rel = ">=" if self.passed else "<"
        lines = [f"check_{self.check}({self.sampler}) {verdict}: {self.claim} "
                 f"(p-value {self.pvalue:.3g} {rel} false-failure rate "
                 f"{self.false_failure_rate:.3g}; n = {self.n:,})"]
        if self.failing:
            lines.append(("  failing: " if not self.passed else "  largest deviation: ")
                         + self.failing)
        for part in self.parts:
            mark = "ok  " if part.passed else "FAIL"
            lines.append(f"  [{mark}] {part.check}: {part.claim}, p-value {part.pvalue:.3g}"
                         + (f"; {part.failing}" if part.failing and not part.passed else ""))
        if math.isfinite(self.min_detectable):
            lines.append(f"  power: a deviation of {self.min_detectable:.3g} in "
                         f"{self.min_detectable_of} is caught with probability >= "
                         f"{self.power:g} at this n")
        lines += [f"  {s}" for s in self.notes]
        return "\n".join(lines)


# ------------------------------------------------------------------------------- helpers


def _as_rate(x) -> float:
    return as_real(x, "false_failure_rate", low=0.0, high=0.5, low_open=True)


def _as_power(x) -> float:
    return as_real(x, "power", low=0.0, high=1.0, low_open=True, high_open=True)


def _law_part(counts: np.ndarray, law: np.ndarray, alpha: float, power: float, label: str,
              claim: str, sampler: str, unit: str = "token",
              verb: str = "emitted") -> CheckResult:
    """One goodness-of-fit test of ``counts`` against ``law`` at level ``alpha``."""
    n = int(counts.sum())
    dof = int(np.count_nonzero(law > 0)) - 1
    if n == 0:
        return CheckResult(label, sampler, True, 1.0, 0.0, 0, alpha, math.inf,
                           "TV distance of the emitted law", power, claim=claim + " (no draws)")
    res = gof_test(counts, law, alpha=alpha, normalize=True)
    imp = np.flatnonzero((law == 0) & (counts > 0))
    if imp.size:
        i = int(imp[0])
        failing = (f"{unit} {i} has probability 0 but was {verb} {int(counts[i]):,} times"
                   + (f" (and {imp.size - 1} more such {unit}s)" if imp.size > 1 else ""))
    else:
        e = n * law
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.where(law > 0, (counts - e) / np.sqrt(e * (1.0 - law)), 0.0)
        z = np.nan_to_num(z)
        i = int(np.argmax(np.abs(z)))
        failing = (f"{unit} {i} {verb} {int(counts[i]):,} times ({counts[i] / n:.5f}), "
                   f"expected {law[i]:.5f} (z = {z[i]:+.1f})")
    return CheckResult(label, sampler, bool(res.pvalue >= alpha), float(res.pvalue),
                       float(res.statistic), n, alpha, tv_detectable(n, dof, alpha, power),
                       "TV distance of the emitted law", power, failing=failing,
                       expected=law, observed=counts, claim=claim)


def _combine(check, sampler, parts, rate, power, claim, n, *, notes=(), ts=0.0, tt=0.0,
             min_det=None, min_det_of=None):
    m = len(parts)
    pv = min(1.0, m * min(p.pvalue for p in parts))
    worst = min(parts, key=lambda r: r.pvalue)
    failing = "" if worst.passed else f"{worst.check}: {worst.failing}"
    return CheckResult(check, sampler, all(p.passed for p in parts), pv, worst.statistic, n,
                       rate, worst.min_detectable if min_det is None else min_det,
                       worst.min_detectable_of if min_det_of is None else min_det_of, power,
                       failing=failing, parts=tuple(parts), notes=tuple(notes),
                       seconds_sampler=ts, seconds_total=tt, claim=claim)


def _draws(sampler, p, q, protocol, n, seed, B, name, chunk, n_default):
    """Reuse a :class:`Draws` (checked against p, q) or draw ``n`` (default ``n_default``)."""
    if isinstance(sampler, Draws):
        d = sampler
        if not (np.array_equal(d.p, p) and np.array_equal(d.q, np.asarray(q, float))):
            raise ValueError("sampler: these draws were made on another (p, q)")
        if n is not None and as_int(n, "n") != d.n:
            raise ValueError(f"n: the draws hold {d.n} calls, got n={n}")
        return d
    return draw(sampler, p, q, protocol=protocol, n=n_default if n is None else n, seed=seed,
                B=B, name=name, chunk=chunk)


def _check_n(n, needed: int, what: str, detect, power, default=DETECT_TV):
    """Refuse an ``n`` below ``needed`` when a detection target was asked for (``detect``, or
    ``power`` alone with the default deviation)."""
    if detect is None and power is not None:
        detect = default
    power = POWER if power is None else power
    if n is not None and detect is not None:
        n = as_n(n)
        if n < needed:
            raise ValueError(f"n: {n:,} draws are too few to catch {what} of {detect:g} with "
                             f"probability {power:g}; at least {needed:,} are needed")


def _law_check(check, sampler, p, q, law, claim, *, protocol, n, seed, false_failure_rate,
               power, detect, B, name, chunk):
    rate = _as_rate(false_failure_rate)
    pw = _as_power(POWER if power is None else power)
    det = None if detect is None else as_real(detect, "detect", low=0.0, high=1.0,
                                               low_open=True)
    dof = int(np.count_nonzero(law > 0)) - 1
    needed = max(n_for_tv(det or DETECT_TV, dof, rate, pw), MIN_DEFAULT_N)
    _check_n(n, needed, "a TV deviation", det, power)
    d = _draws(sampler, p, q, protocol, n, seed, B, name, chunk, needed)
    t0 = time.perf_counter()
    counts = np.bincount(d.tokens, minlength=law.shape[0])
    part = _law_part(counts, law, rate, pw, check, claim, d.sampler)
    tt = d.seconds_total + time.perf_counter() - t0
    notes = (f"time: sampler {d.seconds_sampler:.3g} s, harness "
             f"{max(tt - d.seconds_sampler, 0.0):.3g} s",)
    return CheckResult(check, d.sampler, part.passed, part.pvalue, part.statistic, d.n, rate,
                       part.min_detectable, part.min_detectable_of, pw, failing=part.failing,
                       expected=law, observed=counts, notes=notes,
                       seconds_sampler=d.seconds_sampler, seconds_total=tt, claim=claim)


# ------------------------------------------------------------------------------- checks


def check_lossless(sampler, p, q, *, protocol="step", n=None, seed=0,
                   false_failure_rate=FALSE_FAILURE_RATE, power=None, detect=None, B=None,
                   name=None, chunk=None) -> CheckResult:
    """Check that the emitted token is distributed as the target ``p``.

    Pearson's chi-square (the exact multinomial test for tiny cases) of the emitted tokens
    against ``p`` (:func:`specbound.sim.gof.gof_test`), at level ``false_failure_rate``.  A
    token with ``p = 0`` that is emitted fails the check outright.

    Parameters
    ----------
    sampler : callable or Draws
        The sampler, called through ``protocol`` (:mod:`specbound.testing`), or the
        :class:`Draws` of an earlier :func:`draw` on the same ``(p, q)``.
    p, q : array_like
        Target and draft laws (1-D; for ``"multi"`` protocols ``q`` may be ``(B, V)``: one
        law per draft).
    protocol : {"step", "batch", "multi", "multi_batch"}
    n : int, optional
        Sampler calls (rows for the batched protocols).  Default: enough to catch any
        emitted law at TV distance ``detect`` (default 0.01) from ``p`` with probability
        ``power`` (default 0.99): ``lambda* / (4 detect^2)``, e.g. 113,456 at V = 8 and
        673,482 at V = 1,000.  With ``detect`` or ``power`` given, a smaller ``n`` is refused.
    seed : int, SeedSequence or Generator
        Seeds the harness's drafts and the generator handed to the sampler.
    false_failure_rate : float in (0, 0.5]
        The test's level: the probability that a correct sampler fails (default 1e-3).
    power, detect : float, optional
        See ``n``.
    B : int, optional
        Drafts per call (multi protocols with one shared ``q``).
    name : str, optional
        The sampler's name in the report (default: its qualified name).
    chunk : int, optional
        Rows per call of the batched protocols (default: about 4 M probabilities per call).
    """
    p = as_law(p, "p")
    return _law_check("lossless", sampler, p, q, p, "emitted law = p", protocol=protocol,
                      n=n, seed=seed, false_failure_rate=false_failure_rate, power=power,
                      detect=detect, B=B, name=name, chunk=chunk)


def check_induced(sampler, p, q, rule=None, *, law=None, protocol="step", n=None, seed=0,
                  false_failure_rate=FALSE_FAILURE_RATE, power=None, detect=None, B=None,
                  name=None, chunk=None, **params) -> CheckResult:
    """Check that the emitted law is the closed form of a lossy rule, or a given law.

    ``rule`` is a name of :data:`specbound.theory.RULES` with its parameters ``**params``
    (``lam=...`` for ``"interpolation"``, ``ell=...`` for ``"lenience"``, ...): the expected
    law is :func:`specbound.theory.induced_distribution` (Zhou et al. 2026,
    arXiv:2607.26627, §3 and App. A).  Or pass ``law`` (any distribution).  Everything else
    as :func:`check_lossless`.
    """
    p = as_law(p, "p")
    if (rule is None) == (law is None):
        raise ValueError("rule: give exactly one of rule (a name of theory.RULES) and law")
    if law is not None:
        if params:
            raise ValueError(f"law: rule parameters {sorted(params)} need a rule")
        target = as_law(law, "law")
        if target.shape != p.shape:
            raise ValueError(f"law: vocabulary size {target.shape[0]} differs from p's "
                             f"{p.shape[0]}")
        claim = "emitted law = the given law"
    else:
        rule = as_choice(rule, "rule", theory.RULES)
        qq = as_law(q, "q")
        target = np.asarray(theory.induced_distribution(p, qq, rule, **params), float)
        shown = ", ".join(f"{k}={v!r}" for k, v in params.items() if np.ndim(v) == 0)
        claim = f"emitted law = theory.induced_distribution({rule!r}{', ' if shown else ''}" \
                f"{shown})"
    return _law_check("induced", sampler, p, q, target, claim, protocol=protocol, n=n,
                      seed=seed, false_failure_rate=false_failure_rate, power=power,
                      detect=detect, B=B, name=name, chunk=chunk)


def specinfer_acceptance(p, q, B: int = 1) -> float:
    """Exact acceptance of recursive rejection sampling (SpecInfer; Miao et al. 2024,
    arXiv:2305.09781) with i.i.d. drafts from ``q`` (1-D) or one law per draft (``(B, V)``):
    ``1 - prod_j (1 - sum_x min(p_j, q_j))`` with ``p_0 = p`` and
    ``p_{j+1} = (p_j - q_j)_+`` normalised (the residual after draft ``j`` is rejected)."""
    p = as_law(p, "p")
    q = as_prob(q, "q", ndim=(1, 2))
    qs = q if q.ndim == 2 else np.broadcast_to(q, (as_int(B, "B", min_value=1), q.shape[0]))
    reject = 1.0
    cur = p
    for qj in qs:
        a = float(np.minimum(cur, qj).sum())
        reject *= max(1.0 - a, 0.0)
        res = np.maximum(cur - qj, 0.0)
        if res.sum() <= 0:
            return 1.0
        cur = res / res.sum()
    return 1.0 - reject


def check_acceptance(sampler, p, q, *, expected=None, scheme=None, rule=None,
                     protocol="step", n=None, seed=0, false_failure_rate=FALSE_FAILURE_RATE,
                     power=None, detect=None, B=None, name=None, chunk=None,
                     **params) -> CheckResult:
    """Check the acceptance rate against its exact value (two-sided exact binomial test).

    The expected rate is, in order: ``expected`` (a number); the lossy ``rule``'s
    :func:`specbound.theory.acceptance_rate` with ``**params``; the exact multi-draft
    acceptance of ``scheme`` (:func:`specbound.theory.exact_acceptance` for ``"sd"``,
    ``"exp_race"``, ``"mpfr"``, ``"gls"``; :func:`specinfer_acceptance` for
    ``"specinfer"``); by default the optimal single-draft rate ``1 - TV(p, q)`` (Leviathan et
    al. 2023, arXiv:2211.17192).  The test is two-sided: a lossless sampler that accepts
    less often than it could fails too.  Default ``n``: enough to catch a difference of
    ``detect`` (default 0.01) with probability ``power`` (default 0.99).  Other arguments as
    :func:`check_lossless`.
    """
    p = as_law(p, "p")
    rate = _as_rate(false_failure_rate)
    pw = _as_power(POWER if power is None else power)
    if isinstance(sampler, Draws):
        protocol, B = sampler.protocol, sampler.B
    given = sum(x is not None for x in (expected, scheme, rule))
    if given > 1:
        raise ValueError("expected: give at most one of expected, scheme and rule")
    if params and rule is None:
        raise ValueError(f"rule: parameters {sorted(params)} need a rule")
    multi = protocol.startswith("multi")
    qa = as_prob(q, "q", ndim=(1, 2) if multi else (1,))
    bb = qa.shape[0] if qa.ndim == 2 else (1 if B is None else as_int(B, "B", min_value=1))
    if expected is not None:
        a = as_real(expected, "expected", low=0.0, high=1.0)
        what = f"the given rate {a:.6g}"
    elif rule is not None:
        rule = as_choice(rule, "rule", theory.RULES)
        a = float(theory.acceptance_rate(p, qa, rule, **params))
        what = f"theory.acceptance_rate({rule!r}) = {a:.6g}"
    elif scheme is not None or bb > 1:
        if scheme is None:
            raise ValueError("scheme: a multi-draft acceptance needs the scheme "
                             "(specinfer, mpfr, gls) or the expected rate")
        scheme = as_choice(scheme, "scheme", (*theory.SCHEMES, "specinfer"))
        if scheme == "specinfer":
            a = specinfer_acceptance(p, qa, bb)
        else:
            if qa.ndim == 2:
                raise ValueError(f"q: scheme {scheme!r} has an exact acceptance for one "
                                 "shared draft law only; pass expected=")
            a = float(theory.exact_acceptance(p, qa, scheme, bb))
        what = f"exact acceptance of {scheme!r} (B={bb}) = {a:.6g}"
    else:
        a = 1.0 - float(theory.tv_distance(p, qa))
        what = f"1 - TV(p, q) = {a:.6g}"
    det = None if detect is None else as_real(detect, "detect", low=0.0, high=1.0,
                                               low_open=True)
    needed = max(n_for_acceptance(det or DETECT_ACCEPTANCE, a, rate, pw), MIN_DEFAULT_N)
    _check_n(n, needed, "an acceptance difference", det, power, DETECT_ACCEPTANCE)
    d = _draws(sampler, p, q, protocol, n, seed, B, name, chunk, needed)
    t0 = time.perf_counter()
    k = int(d.accepted.sum())
    if a in (0.0, 1.0):
        pv = 1.0 if k == round(a * d.n) else 0.0
    else:
        pv = float(stats.binomtest(k, d.n, a).pvalue)
    obs = k / d.n
    se = math.sqrt(max(a * (1 - a), 1e-300) / d.n)
    failing = f"accepted {k:,} of {d.n:,} ({obs:.5f}) against {what} (z = {(obs - a) / se:+.1f})"
    tt = d.seconds_total + time.perf_counter() - t0
    return CheckResult("acceptance", d.sampler, bool(pv >= rate), pv, obs, d.n, rate,
                       acc_detectable(d.n, a, rate, pw), "the acceptance rate", pw,
                       failing=failing, claim=f"acceptance rate = {what}",
                       notes=(f"time: sampler {d.seconds_sampler:.3g} s, harness "
                              f"{max(tt - d.seconds_sampler, 0.0):.3g} s",),
                       seconds_sampler=d.seconds_sampler, seconds_total=tt)


# ------------------------------------------------------------------------------- block


def _as_block_laws(P, Q):
    P = as_prob(P, "P", ndim=(2,))
    Q = as_prob(Q, "Q", ndim=(2,))
    if P.shape[0] != Q.shape[0] + 1:
        raise ValueError(f"P: needs one law per position plus the bonus: L + 1 = "
                         f"{Q.shape[0] + 1} rows for Q's L = {Q.shape[0]}, got {P.shape[0]}")
    if P.shape[1] != Q.shape[1]:
        raise ValueError(f"Q: vocabulary size {Q.shape[1]} differs from P's {P.shape[1]}")
    return P, Q


def check_block(block, P, Q, *, rule="lossless", n=None, seed=0,
                false_failure_rate=FALSE_FAILURE_RATE, power=None, detect=None, name=None,
                **params) -> CheckResult:
    """Check an L-token block sampler ``block(P, Q, xs, rng) -> (tokens, n_accepted)``.

    ``P`` (``(L + 1, V)``) holds the target's law at each position of the block (the last
    row: the bonus token's), ``Q`` (``(L, V)``) the draft's; the harness draws
    ``xs[i] ~ Q[i]``.  The sampler returns the emitted tokens (the ``n_accepted`` accepted
    drafts, then one correction or bonus token) and ``n_accepted``.

    With position-wise laws the verification at position ``i`` is one step of the rule on
    ``(P[i], Q[i])``, independent of the earlier positions, so (Leviathan et al. 2023,
    arXiv:2211.17192, §3; Zhou et al. 2026, arXiv:2607.26627, §3):

    - the token at position ``i``, among blocks that reach it, follows the rule's law at
      ``i`` (``P[i]`` for ``"lossless"``, :func:`specbound.theory.induced_distribution`
      otherwise; the bonus position ``L`` follows ``P[L]``);
    - ``n_accepted = k`` with probability ``prod_{i<k} a_i (1 - a_k)`` (``a_L := 0``), with
      ``a_i`` the rule's :func:`specbound.theory.acceptance_rate` at ``i`` (``1 - TV`` for
      lossless), and the expected tokens per block equal
      :func:`specbound.theory.expected_block_tokens` (``"sd"``; reported).

    ``L + 2`` goodness-of-fit tests at the Bonferroni share of ``false_failure_rate``.
    Default ``n``: what :func:`check_lossless` would use for one position at the Bonferroni
    share of the rate, divided by the smallest probability (at least 0.05) of reaching a
    position, so that every position reached that often gets that many draws; capped at
    10**6.
    """
    if not callable(block):
        raise TypeError(f"block: must be a callable, got {type(block).__name__}")
    P, Q = _as_block_laws(P, Q)
    L, V = Q.shape
    rate = _as_rate(false_failure_rate)
    pw = _as_power(POWER if power is None else power)
    rule = as_choice(rule, "rule", theory.RULES)
    if rule == "lossless" and params:
        raise ValueError(f"rule: parameters {sorted(params)} need a lossy rule")
    laws = np.empty((L + 1, V))
    acc = np.empty(L)
    for i in range(L):
        laws[i] = theory.induced_distribution(P[i], Q[i], rule, **params)
        acc[i] = theory.acceptance_rate(P[i], Q[i], rule, **params)
    laws[L] = P[L]
    reach = np.concatenate([[1.0], np.cumprod(acc)])
    count_law = reach * np.concatenate([1.0 - acc, [1.0]])
    count_law = np.clip(count_law, 0.0, None)
    count_law /= count_law.sum()
    m = L + 2
    alpha = rate / m
    det = None if detect is None else as_real(detect, "detect", low=0.0, high=1.0,
                                               low_open=True)
    # sized so that each position reached with probability >= 0.05 gets its share of draws
    far = min(r for r in reach if r >= 0.05)
    needed = max(n_for_tv(det or DETECT_TV, V - 1, alpha, pw), MIN_DEFAULT_N)
    needed = min(math.ceil(needed / far), 10**6)
    _check_n(n, needed, "a TV deviation", det, power)
    n = needed if n is None else as_n(n)
    ctx = _Context(block, name, seed, "block")
    rng_h, rng_s = streams(seed)
    xs = np.stack([draws_of(Q[i], n, rng_h) for i in range(L)], axis=1)
    Pr, Qr = _readonly(P), _readonly(Q)
    t_all = time.perf_counter()
    outs, ts = ctx.call_each(n, lambda j: block(Pr, Qr, _readonly(xs[j]), rng_s),
                             lambda j: dict(P=P, Q=Q, xs=xs[j]))
    fast = _blocks_fast(outs, xs, L, V)
    if fast is None:
        tok, kk = _blocks_slow(outs, xs, L, V, ctx, P, Q)
    else:
        tok, kk = fast
    parts = []
    for i in range(L + 1):
        sel = tok[:, i][kk >= i]
        counts = np.bincount(sel, minlength=V)
        lab = f"position {i}" + (" (bonus)" if i == L else "")
        parts.append(_law_part(counts, laws[i], alpha, pw, lab,
                               f"token law at position {i} = "
                               + ("P[L]" if i == L else ("P[i]" if rule == "lossless"
                                                         else f"induced law of {rule!r}")),
                               ctx.name))
    parts.append(_law_part(np.bincount(kk, minlength=L + 1), count_law, alpha, pw,
                           "accepted count", "law of n_accepted = prod a_i (1 - a_k)",
                           ctx.name, unit="n_accepted =", verb="observed"))
    e_tokens = float(np.sum(count_law * np.arange(1, L + 2)))
    notes = []
    if rule == "lossless":
        e_theory = theory.expected_block_tokens(lambda c: P[len(c)], lambda c: Q[len(c)], [],
                                                "sd", L=L)
        notes.append(f"tokens per block: observed {kk.mean() + 1:.4f}, theory "
                     f"{e_theory:.4f} (theory.expected_block_tokens, scheme 'sd')")
    else:
        notes.append(f"tokens per block: observed {kk.mean() + 1:.4f}, expected "
                     f"{e_tokens:.4f}")
    tt = time.perf_counter() - t_all
    notes.append(f"time: sampler {ts:.3g} s, harness {max(tt - ts, 0.0):.3g} s")
    return _combine("block", ctx.name, parts, rate, pw,
                    f"L = {L} block: position laws and accepted count of rule {rule!r}", n,
                    notes=notes, ts=ts, tt=tt)


def _blocks_fast(outs, xs, L, V):
    """Vectorised validation of well-formed block outputs (lists or arrays of Python or NumPy
    integers); ``None`` when anything is off, and the slow path then names the bad call."""
    try:
        ks = np.array([o[1] for o in outs])
        if ks.dtype.kind not in "iu" or ks.ndim != 1:
            return None
        toks = [o[0] for o in outs]
        lens = np.fromiter((len(t) for t in toks), np.int64, len(toks))
        flat = np.concatenate([np.asarray(t) for t in toks]) if toks else np.empty(0, int)
    except Exception:  # noqa: BLE001 - any malformed output goes to the slow path
        return None
    if flat.dtype.kind not in "iu" or flat.ndim != 1:
        return None
    if np.any((ks < 0) | (ks > L)) or np.any(lens != ks + 1):
        return None
    if flat.size and (flat.min() < 0 or flat.max() >= V):
        return None
    n = len(outs)
    tok = np.full((n, L + 1), -1, np.int64)
    rows = np.repeat(np.arange(n), lens)
    cols = np.arange(flat.size) - np.repeat(np.cumsum(lens) - lens, lens)
    tok[rows, cols] = flat
    acc_cols = cols < np.repeat(ks, lens)
    if np.any(flat[acc_cols] != xs[rows[acc_cols], cols[acc_cols]]):
        return None
    return tok, ks.astype(np.int64)


def _blocks_slow(outs, xs, L, V, ctx, P, Q):
    n = len(outs)
    tok = np.full((n, L + 1), -1, np.int64)
    kk = np.empty(n, np.int64)
    for j, o in enumerate(outs):
        def inputs(i, j=j):
            return dict(P=P, Q=Q, xs=xs[j])
        try:
            t, k = o
        except (TypeError, ValueError):
            raise ctx.bad(f"{type(o).__name__} instead of a pair (tokens, n_accepted)", j,
                          err=TypeError, **inputs(0)) from None
        k = _int_tokens([_scalar(k)], _Fixed(ctx, j), L + 1, inputs, what="n_accepted")[0]
        t = np.asarray(_to_numpy(t)).reshape(-1) if np.ndim(_to_numpy(t)) else None
        if t is None or t.shape[0] != k + 1:
            raise ctx.bad(f"{None if t is None else t.shape[0]} tokens with n_accepted={k} "
                          f"(a block emits n_accepted + 1 tokens)", j, **inputs(0))
        t = _int_tokens(list(t) if t.dtype == object else t, _Fixed(ctx, j), V, inputs)
        if np.any(t[:k] != xs[j, :k]):
            raise ctx.bad(f"tokens {t.tolist()} whose first n_accepted={k} are not the drafts "
                          f"{xs[j, :k].tolist()}", j, **inputs(0))
        tok[j, :k + 1] = t
        kk[j] = k
    return tok, kk


def _scalar(v):
    v = _to_numpy(v) if hasattr(v, "detach") else v
    if isinstance(v, np.ndarray) and v.size == 1:
        return v.reshape(()).item() if v.dtype.kind in "iub" else v.reshape(())[()]
    return v


class _Fixed(_Context):
    def __init__(self, ctx, call):
        super().__init__(ctx.sampler, ctx.name, ctx.seed, ctx.protocol)
        self.call = call

    def where(self, call, **inputs):
        return super().where(self.call, **inputs)


# ------------------------------------------------------------------------------- keyed


def check_drafter_invariance(step, p, qs, *, n=None, seed=0, context_length=4,
                             false_failure_rate=FALSE_FAILURE_RATE, power=None, detect=None,
                             name=None) -> CheckResult:
    """Check a keyed sampler ``step(p, q, x, key, context) -> token`` for drafter invariance.

    For ``n`` random keys and contexts (``context_length`` random token ids), the sampler is
    called once per draft law in ``qs`` (shape ``(D, V)``, ``D >= 2``) with a draft
    ``x ~ q_d``.  Two parts (Liu, Wan, Gao & Gündüz 2026, arXiv:2609.21858, App. C,
    strong drafter invariance):

    - **invariance**: the emitted token is the same for every draft law under the same key
      and context (a deterministic property: it fails on the first key whose token changes;
      false-failure rate 0);
    - **marginal**: over keys, the token follows ``p`` (goodness of fit at
      ``false_failure_rate``).

    Default ``n``: :func:`check_lossless`'s for ``p``.  ``min_detectable`` is the smallest
    probability of a drafter-dependent token that ``n`` keys catch with ``power``.
    """
    if not callable(step):
        raise TypeError(f"step: must be a callable, got {type(step).__name__}")
    p = as_law(p, "p")
    qs = as_prob(qs, "qs", ndim=(2,))
    if qs.shape[0] < 2:
        raise ValueError(f"qs: needs at least 2 draft laws to compare, got {qs.shape[0]}")
    if qs.shape[1] != p.shape[0]:
        raise ValueError(f"qs: vocabulary size {qs.shape[1]} differs from p's {p.shape[0]}")
    cl = as_int(context_length, "context_length", min_value=0, max_value=10**6)
    rate = _as_rate(false_failure_rate)
    pw = _as_power(POWER if power is None else power)
    det = None if detect is None else as_real(detect, "detect", low=0.0, high=1.0,
                                               low_open=True)
    V, D = p.shape[0], qs.shape[0]
    needed = max(n_for_tv(det or DETECT_TV, int(np.count_nonzero(p)) - 1, rate, pw),
                 MIN_DEFAULT_N)
    _check_n(n, needed, "a TV deviation", det, power)
    n = needed if n is None else as_n(n)
    ctx = _Context(step, name, seed, "keyed")
    rng_h, _ = streams(seed)
    keys = rng_h.integers(0, 2**63 - 1, n).tolist()
    ctxs = rng_h.integers(0, V, (n, cl))
    xs = np.stack([draws_of(qs[d], n, rng_h) for d in range(D)], axis=1).tolist()
    pr = _readonly(p)
    qr = [_readonly(qs[d]) for d in range(D)]
    out = [[None] * D for _ in range(n)]
    t0 = time.perf_counter()
    j = d = 0
    try:
        for j in range(n):  # noqa: B007
            c = tuple(ctxs[j].tolist())
            for d in range(D):  # noqa: B007
                out[j][d] = step(pr, qr[d], xs[j][d], keys[j], c)
    except Exception as exc:
        raise ctx.raised(exc, j, p=p, q=qs[d], x=xs[j][d], key=keys[j],
                         context=tuple(ctxs[j].tolist())) from exc
    ts = time.perf_counter() - t0
    flat = [v for row in out for v in row]

    def inputs(i):
        j, d = divmod(i, D)
        return dict(p=p, q=qs[d], x=xs[j][d], key=keys[j], context=tuple(ctxs[j].tolist()))

    toks = _int_tokens(flat, _Keyed(ctx, D), V, inputs).reshape(n, D)
    diff = np.flatnonzero(np.any(toks != toks[:, :1], axis=1))
    eps = -math.expm1(math.log1p(-pw) / n)
    if diff.size:
        j = int(diff[0])
        failing = (f"{diff.size:,} of {n:,} keys emit a token that depends on the draft; "
                   f"first: key={keys[j]}, context={tuple(ctxs[j].tolist())} gives tokens "
                   f"{toks[j].tolist()} for the {D} draft laws (drafts {xs[j]})")
    else:
        failing = ""
    inv = CheckResult("invariance", ctx.name, diff.size == 0, 0.0 if diff.size else 1.0,
                      float(diff.size), n, 0.0, eps, "the probability of a drafter-dependent "
                      "token", pw, failing=failing,
                      claim="same token for every draft law under one key and context")
    marg = _law_part(np.bincount(toks[:, 0], minlength=V), p, rate, pw, "marginal",
                     "token law over keys = p", ctx.name)
    tt = time.perf_counter() - t0
    res = _combine("drafter_invariance", ctx.name, [inv, marg], rate, pw,
                   f"drafter invariance over {D} draft laws and the marginal law p", n,
                   notes=(f"time: sampler {ts:.3g} s, harness {max(tt - ts, 0.0):.3g} s",),
                   ts=ts, tt=tt, min_det=marg.min_detectable, min_det_of=marg.min_detectable_of)
    # the invariance part is deterministic: the combined p-value is the marginal's
    object.__setattr__(res, "pvalue", 0.0 if diff.size else marg.pvalue)
    return res


class _Keyed(_Context):
    def __init__(self, ctx, D):
        super().__init__(ctx.sampler, ctx.name, ctx.seed, ctx.protocol)
        self.D = D

    def where(self, call, **inputs):
        j, d = divmod(call, self.D)
        return super().where(j, **inputs) + f" (draft law {d})"


# ------------------------------------------------------------------------------- asserts


def _raise(result: CheckResult) -> CheckResult:
    if not result.passed:
        raise AssertionError(str(result))
    return result


def assert_lossless(*args, **kwargs) -> CheckResult:
    """:func:`check_lossless`; raises ``AssertionError`` with the report when it fails."""
    return _raise(check_lossless(*args, **kwargs))


def assert_induced(*args, **kwargs) -> CheckResult:
    """:func:`check_induced`; raises ``AssertionError`` with the report when it fails."""
    return _raise(check_induced(*args, **kwargs))


def assert_acceptance(*args, **kwargs) -> CheckResult:
    """:func:`check_acceptance`; raises ``AssertionError`` with the report when it fails."""
    return _raise(check_acceptance(*args, **kwargs))


def assert_block(*args, **kwargs) -> CheckResult:
    """:func:`check_block`; raises ``AssertionError`` with the report when it fails."""
    return _raise(check_block(*args, **kwargs))


def assert_drafter_invariance(*args, **kwargs) -> CheckResult:
    """:func:`check_drafter_invariance`; raises ``AssertionError`` with the report when it
    fails."""
    return _raise(check_drafter_invariance(*args, **kwargs))


__all__ = ["CheckResult", "check_lossless", "check_induced", "check_acceptance", "check_block",
           "check_drafter_invariance", "assert_lossless", "assert_induced", "assert_acceptance",
           "assert_block", "assert_drafter_invariance", "specinfer_acceptance", "sampler_name"]
