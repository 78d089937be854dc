"""Samplers for lossy verification rules and for tree (multi-candidate) verification.

Every sampler here runs the *mechanics* of a rule: a draft ``X ~ q``, the rule's acceptance
test ``U < h(X)`` with a uniform ``U``, and the rule's correction on rejection (a residual
distribution, the truncated target, or a fresh draft).  None of them samples a closed-form
induced distribution; the closed forms live in :mod:`specbound.theory.lossy` and the tests
compare the two by goodness-of-fit.

Notation follows ``docs/MATH.md`` section 3 and seed 004 (Sections 3.1-3.2, App. A, F, G):
``p`` is the target, ``q`` the draft, ``A`` (``allowed``) a truncation set, ``p_Theta`` the
truncated target ``p 1_A / Z_Theta(p)``.

Randomness: all uniforms come from one ``numpy.random.Generator`` made from ``seed``
(SPEC 7) and are drawn in a fixed order, so results are bit-for-bit reproducible for a
given seed.  Sampling is vectorised with NumPy over the ``n`` draws (no Numba kernel is
needed: the work per draw is a constant number of array look-ups).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from specbound._validation import (
    as_bool_mask,
    as_choice,
    as_int,
    as_pair,
    as_prob,
    as_real,
    as_rng,
)
from specbound.sim.results import Estimate
from specbound.theory.lossy import RULES, check_rule_params

__all__ = [
    "LOSSY_RULES",
    "TREE_RULES",
    "TreeVerificationResult",
    "sample_induced",
    "simulate_tree_verification",
]

#: rules accepted by :func:`sample_induced` (the same names as ``theory.induced_distribution``)
LOSSY_RULES = tuple(RULES)

#: verification rules of :func:`simulate_tree_verification` (seed 004 App. G.2)
TREE_RULES = ("lossless", "speccascade", "typical", "truncation")

#: most uniforms drawn in one round of a redraw (rejection) loop
_REDRAW_BLOCK = 2_000_000


# --------------------------------------------------------------------------------------
# small NumPy building blocks (no validation: callers pass valid input)
# --------------------------------------------------------------------------------------
def _categorical(probs: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Inverse-CDF draws from the (possibly unnormalised) non-negative vector ``probs``.

    ``u`` are uniforms in [0, 1); the package's one inverse CDF (``_kernels.inv_cdf``): the
    smallest ``i`` with ``cumsum(probs)[i] > u * sum(probs)``, so a zero-mass token is never
    returned (the last positive-mass token if rounding reaches the total).
    """
    from specbound.sim import _kernels as _K  # one inverse CDF for the whole package

    cdf = np.cumsum(np.asarray(probs, dtype=np.float64))
    us = np.ascontiguousarray(u, dtype=np.float64).reshape(-1)
    out = np.empty(us.size, dtype=np.int64)
    _K.inv_cdf_many(cdf, us, out)
    return out.reshape(np.shape(u))


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """``min(1, num/den)`` where ``den > 0``, and 0 where ``den == 0`` (never drafted)."""
    out = np.zeros_like(num)
    np.divide(num, den, out=out, where=den > 0)
    return np.minimum(out, 1.0)


def _divergence(p: np.ndarray, q: np.ndarray, kind: str) -> float:
    """The gate divergence of Fuzzy SD, computed exactly as ``theory.lossy`` does (so the
    gate opens on the same side of the threshold): ``tv`` = 1/2 sum|p - q|, ``kl`` =
    KL(p || q) in nats (``inf`` when p is not absolutely continuous w.r.t. q; clipped at 0),
    ``js`` = Jensen-Shannon (nats)."""
    if kind == "tv":
        return float(0.5 * np.abs(p - q)[None, :].sum(axis=1)[0])

    def _kl(a, b):
        pos = a > 0
        if np.any(pos & (b <= 0)):
            return np.inf
        ok = pos & (b > 0)
        terms = np.zeros_like(a)
        terms[ok] = a[ok] * (np.log(a[ok]) - np.log(b[ok]))
        return max(float(terms[None, :].sum(axis=1)[0]), 0.0)

    if kind == "kl":
        return _kl(p, q)
    mix = 0.5 * (p + q)
    return 0.5 * _kl(p, mix) + 0.5 * _kl(q, mix)


@dataclass(frozen=True)
class _Mechanism:
    """One SD-style step: draft from ``q``, accept with probability ``h[X]``, and on
    rejection either draw from ``residual`` (``redraw=False``) or draw a fresh draft and
    test it again (``redraw=True``, a rejection loop; ``residual`` is then used only when
    the yield is 0)."""

    q: np.ndarray
    h: np.ndarray
    residual: np.ndarray
    redraw: bool


def _run_mechanism(mech: _Mechanism, n: int, rng: np.random.Generator) -> np.ndarray:
    q, h = mech.q, mech.h
    pass_prob = float(np.dot(q, h))
    if mech.redraw and pass_prob <= 0.0:
        # zero yield: the redraw loop would never end; the rule falls back to its other
        # completion (theory.lossy's convention), i.e. every token comes from the residual
        return _categorical(mech.residual, rng.random(n))
    x = _categorical(q, rng.random(n))
    accept = rng.random(n) < h[x]
    out = x
    rejected = np.flatnonzero(~accept)
    if rejected.size == 0:
        return out
    if not mech.redraw:
        out[rejected] = _categorical(mech.residual, rng.random(rejected.size))
        return out
    # rejection loop: every rejected draw redraws X ~ q and repeats the test until it
    # passes.  For speed a round gives each pending draw a row of ``m`` fresh drafts and
    # keeps the first that passes (the same law as one-at-a-time redraws); ``m`` is sized
    # from the pass probability so that a round resolves most pending draws.
    pending = rejected
    while pending.size:
        m = int(np.clip(np.ceil(3.0 / pass_prob), 1, max(1, _REDRAW_BLOCK // pending.size)))
        xs = _categorical(q, rng.random(pending.size * m)).reshape(pending.size, m)
        ok = rng.random((pending.size, m)) < h[xs]
        hit = ok.any(axis=1)
        first = ok.argmax(axis=1)
        rows = np.flatnonzero(hit)
        out[pending[rows]] = xs[rows, first[rows]]
        pending = pending[~hit]
    return out


def _residual(pos_part: np.ndarray, fallback: np.ndarray) -> np.ndarray:
    """``pos_part`` if it has mass, else ``fallback``.

    The residual of an SD-style rule has zero mass only when the rule rejects with
    probability 0 up to rounding (e.g. p = q up to 1e-16); a rejection then can only come
    from rounding and is corrected from ``fallback`` (the target)."""
    return pos_part if pos_part.sum() > 0 else fallback


def _pos(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0.0)


def _mechanism(rule: str, p: np.ndarray, q: np.ndarray, prm: dict) -> _Mechanism:
    """The acceptance function and correction of ``rule`` for one context (1-D p, q)."""
    if rule == "lossless":
        return _Mechanism(q, _ratio(p, q), _residual(_pos(p - q), p), False)
    if rule in ("interpolation", "contrastive"):
        nu = prm["nu"]
        return _Mechanism(q, _ratio(nu, q), _residual(_pos(nu - q), nu), False)
    if rule == "fuzzy":
        g = float(_divergence(p, q, prm["divergence"]) <= prm["threshold"])
        return _Mechanism(q, np.full_like(q, g), p, False)
    if rule == "lenience":
        return _Mechanism(q, _ratio(p, prm["ell"] * q), _residual(_pos(p - q), p), False)
    if rule == "judge":
        j = prm["judge"]
        base = _ratio(p, q)
        h = np.where(q > p, base + (1.0 - base) * j, 1.0)
        h = np.where(q > 0, h, 0.0)
        return _Mechanism(q, h, _residual(_pos(p - q), p), False)
    if rule == "truncation":
        a = prm["allowed"]
        h = a.astype(np.float64)
        p_theta = p * a
        if p_theta.sum() > 0:
            p_theta = p_theta / p_theta.sum()
        return _Mechanism(q, h, p_theta, prm["on_reject"] == "renormalize")
    if rule in ("ceiling", "truncation_ceiling"):
        h = _ratio(p, prm["ell"] * q)
        if rule == "truncation_ceiling":
            h = np.where(prm["allowed"] & (q > 0), 1.0, h)
        yield_ = q * h
        return _Mechanism(q, h, _residual(_pos(p - yield_), p),
                          prm["completion"] == "renormalize")
    raise AssertionError(rule)  # pragma: no cover


def _per_context_real(x, name, m, *, low=None, high=None, low_open=False, high_open=False):
    """A real parameter given as a scalar or one value per context; returns shape (m,)."""
    arr = np.asarray(x)
    if arr.ndim == 0:
        v = as_real(x if isinstance(x, bool) else arr.item(), name, low=low, high=high,
                    low_open=low_open, high_open=high_open)
        return np.full(m, v)
    if arr.ndim == 1 and arr.shape[0] == 1:
        arr = np.broadcast_to(arr, (m,))
    if arr.ndim != 1 or arr.shape[0] != m:
        raise ValueError(f"{name}: must be a scalar or have one entry per context ({m}), "
                         f"got shape {arr.shape}")
    return np.array([as_real(v.item(), name, low=low, high=high, low_open=low_open,
                             high_open=high_open) for v in arr])


def _prepare(rule: str, p2: np.ndarray, q2: np.ndarray, params: dict) -> list[dict]:
    """Validate the rule's parameters; returns per-context parameter dicts."""
    m, v = p2.shape
    _, prm = check_rule_params(rule, params)
    per = [dict() for _ in range(m)]
    if rule == "interpolation":
        lam = prm["lam"]
        if callable(lam):
            lam = [_call_lam(lam, p2[i], q2[i]) for i in range(m)]
        lam = _per_context_real(lam, "lam", m, low=0.0, high=1.0)
        for i in range(m):
            per[i]["nu"] = lam[i] * p2[i] + (1.0 - lam[i]) * q2[i]
    elif rule == "contrastive":
        beta = _per_context_real(prm["beta"], "beta", m, low=0.0)
        alpha = _per_context_real(prm["alpha"], "alpha", m, low=0.0, high=1.0)
        for i in range(m):
            per[i]["nu"] = _contrastive_target(p2[i], q2[i], beta[i], alpha[i])
    elif rule == "fuzzy":
        thr = _per_context_real(prm["threshold"], "threshold", m, low=0.0)
        div = as_choice(prm["divergence"], "divergence", ("tv", "kl", "js"))
        for i in range(m):
            per[i].update(threshold=thr[i], divergence=div)
    elif rule in ("lenience", "ceiling", "truncation_ceiling"):
        ell = _per_context_real(prm["ell"], "ell", m, low=0.0, high=1.0, low_open=True)
        for i in range(m):
            per[i]["ell"] = ell[i]
    if rule == "judge":
        j = as_bool_mask(prm["judge"], "judge", (m, v))
        for i in range(m):
            per[i]["judge"] = j[i].astype(np.float64)
    if rule in ("truncation", "truncation_ceiling"):
        a = as_bool_mask(prm["allowed"], "allowed", (m, v))
        for i in range(m):
            per[i]["allowed"] = a[i].copy()
    if rule == "truncation":
        on_reject = as_choice(prm["on_reject"], "on_reject", ("renormalize", "target"))
        for i in range(m):
            a_i = per[i]["allowed"]
            per[i]["on_reject"] = on_reject
            # p_Theta is needed when a rejection can occur and is corrected from it
            if on_reject == "target":
                needed = bool(np.any((q2[i] > 0) & ~a_i))
            else:
                needed = not np.any((q2[i] > 0) & a_i)
            if needed and not np.any(a_i & (p2[i] > 0)):
                raise ValueError("allowed: the allowed set carries no target mass "
                                 f"(context {i}); the truncated target p_Theta is undefined")
    if rule in ("ceiling", "truncation_ceiling"):
        comp = as_choice(prm["completion"], "completion", ("renormalize", "residual"))
        for i in range(m):
            per[i]["completion"] = comp
    return per


def _call_lam(fn, p_row, q_row):
    try:
        return fn(p_row.copy(), q_row.copy())
    except Exception as exc:  # a user callable: report which argument failed
        raise ValueError(f"lam: the callable raised {type(exc).__name__}: {exc}") from exc


def _contrastive_target(p: np.ndarray, q: np.ndarray, beta: float, alpha: float) -> np.ndarray:
    """The contrastive law ``nu`` (O'Brien & Lewis 2023 with the plausibility head of Li et
    al. 2023), as defined in ``theory.lossy``: on ``H = {p >= alpha max p, p > 0}``,
    ``nu ∝ p^(1+beta) q^(-beta)``; if ``beta > 0`` and ``q = 0`` somewhere on ``H`` the
    contrast is infinite there and ``nu ∝ p^(1+beta)`` on ``{x in H : q(x) = 0}``."""
    head = (p > 0) & (p >= alpha * p.max())
    if beta > 0 and np.any(head & (q == 0)):
        keep = head & (q == 0)
        logit = np.where(keep, (1.0 + beta) * np.log(np.where(keep, p, 1.0)), -np.inf)
    else:
        keep = head
        safe_p = np.where(keep, p, 1.0)
        safe_q = np.where(keep & (q > 0), q, 1.0)
        logit = np.where(keep, (1.0 + beta) * np.log(safe_p) - beta * np.log(safe_q), -np.inf)
    w = np.exp(logit - logit[keep].max())
    return w / w.sum()


def sample_induced(p, q, rule: str, n: int = 100_000, seed=0, **params) -> np.ndarray:
    """Emitted tokens of one speculative step under a lossy verification rule.

    Each draw runs the rule's mechanics (seed 004 Sections 3.1-3.2, App. A, F; MATH.md
    section 3): a draft ``X ~ q``, acceptance if ``U < h(X)`` for ``U ~ U[0, 1)``, and the
    rule's correction on rejection.  The induced law is never sampled directly.

    ======================  ===========================  =====================================
    rule (params)           acceptance ``h(x)``          on rejection
    ======================  ===========================  =====================================
    ``"lossless"``          ``min(1, p/q)``              residual ``(p - q)_+`` normalised
    ``"interpolation"``     ``min(1, nu/q)``,            ``(nu - q)_+`` normalised
    (``lam``)               ``nu = lam p + (1-lam) q``
    ``"contrastive"``       ``min(1, nu/q)``, ``nu`` the  ``(nu - q)_+`` normalised
    (``beta``, ``alpha``)   contrastive target
    ``"fuzzy"``             ``g = 1[D(p, q) <= T]``      a fresh token from ``p`` (App. A.2)
    (``threshold``,         for every token
    ``divergence``)
    ``"lenience"`` (``ell``)  ``min(1, p/(ell q))``      ``(p - q)_+`` normalised
    ``"judge"`` (``judge``)   1 if ``q <= p``, else      ``(p - q)_+`` normalised
                            ``p/q + (1 - p/q) j(x)``
    ``"truncation"``        ``1[x in A]``                ``on_reject="renormalize"``: redraw
    (``allowed``,                                        ``X ~ q`` until accepted (Eq. 13);
    ``on_reject``)                                       ``"target"``: a token from ``p_Theta``
    ``"ceiling"``           ``min(1, p/(ell q))``        ``completion="renormalize"``: redraw
    (``ell``,               (yield ``min(q, p/ell)``)    until accepted; ``"residual"``: a
    ``completion``)                                      token from ``(p - yield)_+``
    ``"truncation_ceiling"``  1 on ``A``, else            as ``"ceiling"``
    (``allowed``, ``ell``,  ``min(1, p/(ell q))``
    ``completion``)         (yield of Table 5 row 5)
    ======================  ===========================  =====================================

    Parameters
    ----------
    p, q : array_like
        Target and draft, 1-D (one context) or 2-D (rows are contexts; a 1-D argument is
        broadcast).  Rows must sum to 1 (within 1e-9); every draw normalises the law it
        samples from, and the rule's quantities (h, the Fuzzy gate, the residual) are
        computed from the inputs as given, exactly as in ``theory.lossy``.
    rule : str
        One of :data:`LOSSY_RULES`.
    n : int
        Number of independent steps per context (>= 1).
    seed : int, SeedSequence or Generator
        Source of all uniforms (SPEC 7).
    **params
        ``lam`` in [0, 1] (scalar, one value per context, or a callable ``lam(p, q)``
        returning either; DIVERSED), ``threshold`` >= 0 and ``divergence`` in ``"tv"``,
        ``"kl"`` (KL(p || q)), ``"js"`` (Fuzzy SD), ``ell`` in (0, 1], ``judge`` (bool
        array, shape ``(V,)`` or ``(m, V)``), ``allowed`` (bool array, the set A),
        ``on_reject`` (``"renormalize"`` | ``"target"``), ``completion``
        (``"renormalize"`` | ``"residual"``), ``beta`` >= 0 (contrast strength) and
        ``alpha`` in [0, 1] (plausibility cut, default 0.1) of the contrastive law
        ``nu ∝ p^(1+beta) q^(-beta)`` on ``{p >= alpha max p}`` (``theory.lossy``'s
        definition, including its zero conventions).

    Returns
    -------
    numpy.ndarray of int64
        Shape ``(n,)`` for 1-D input, ``(m, n)`` for m contexts.

    Notes
    -----
    Zeros: a token with ``q = 0`` is never drafted; a token with ``p = 0`` is never emitted
    by a correction.  When a residual has zero mass the rule rejects only through rounding
    (e.g. ``p = q`` up to 1e-16), and such a rejection is corrected from ``p``.  The redraw
    loop of ``"renormalize"`` takes on average ``1 / sum(q h)`` drafts per emitted token;
    when the yield ``sum(q h)`` is 0 (Eq. 13 with ``Z_Theta(q) = 0``, a zero ceiling yield)
    the loop could never end and, as in ``theory.induced_distribution``, the rule falls back
    to its other completion (``p_Theta`` for truncation, ``(p - yield)_+`` normalised for the
    ceilings).  ``ValueError`` (naming ``allowed``) when ``p_Theta`` is needed and ``A``
    carries no target mass.
    """
    rule = as_choice(rule, "rule", LOSSY_RULES)
    p2, q2, batched = as_pair(p, q)
    n = as_int(n, "n", min_value=1)
    rng = as_rng(seed)
    per = _prepare(rule, p2, q2, params)
    out = np.empty((p2.shape[0], n), dtype=np.int64)
    for i in range(p2.shape[0]):
        out[i] = _run_mechanism(_mechanism(rule, p2[i], q2[i], per[i]), n, rng)
    return out if batched else out[0]


# --------------------------------------------------------------------------------------
# tree verification (seed 004 App. G)
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TreeVerificationResult:
    """Outcome of :func:`simulate_tree_verification`.

    Attributes
    ----------
    rule : str
        The verification rule.
    D, L, n : int
        Candidates per position, depth (drafted positions per step) and number of steps.
    candidates : numpy.ndarray of int64, shape (L, D)
        The ordered candidates ``x^(1), ..., x^(D)`` of every position.
    p_theta : numpy.ndarray, shape (L, V)
        The truncated targets the candidates were verified against.
    reached : numpy.ndarray of int64, shape (L,)
        Number of steps in which position ``t`` was verified (all earlier positions
        accepted a candidate).
    emitted_counts : numpy.ndarray of int64, shape (L, V)
        ``emitted_counts[t, v]``: steps in which position ``t`` was reached and emitted
        token ``v`` (an accepted candidate or, after ``D`` rejections, the correction).
    accepted_counts : numpy.ndarray of int64, shape (L,)
        Steps in which position ``t`` was reached and accepted a candidate.
    accepted : numpy.ndarray of int64, shape (n,)
        Accepted drafted tokens of every step (0..L), the bonus/correction excluded.
    """

    rule: str
    D: int
    L: int
    n: int
    candidates: np.ndarray
    p_theta: np.ndarray
    reached: np.ndarray
    emitted_counts: np.ndarray
    accepted_counts: np.ndarray
    accepted: np.ndarray

    @property
    def emitted_law(self) -> np.ndarray:
        """Empirical law of the token emitted at each position, shape (L, V) (rows of
        positions never reached are NaN)."""
        out = np.full(self.emitted_counts.shape, np.nan)
        ok = self.reached > 0
        out[ok] = self.emitted_counts[ok] / self.reached[ok, None]
        return out

    @property
    def acceptance(self) -> np.ndarray:
        """Per-position acceptance ``a_t(C)`` = accepted / reached, shape (L,) (NaN where
        not reached)."""
        out = np.full(self.L, np.nan)
        ok = self.reached > 0
        out[ok] = self.accepted_counts[ok] / self.reached[ok]
        return out

    @property
    def accepted_per_step(self) -> Estimate:
        """Mean accepted drafted tokens per step (the "L" of seed 004 Tables 9-10)."""
        return Estimate.from_samples(self.accepted)

    @property
    def block_efficiency(self) -> Estimate:
        """Mean tokens per step including the bonus / correction token (accepted + 1)."""
        return Estimate.from_samples(self.accepted + 1)


def _tree_position(rule, p_theta, allowed, cand):
    """Per-candidate acceptance probabilities ``h_i`` (given that the earlier candidates
    were rejected) and the correction law after ``D`` rejections, for one position.

    Greedy drafting makes the candidates deterministic, so the rejection history before
    candidate ``i`` is always "all earlier ones rejected" and the residual after it is
    fixed: the zero-and-renormalise update of App. G.3(i) is applied here once.
    """
    res = p_theta.copy()
    h = np.zeros(cand.size)
    for i, x in enumerate(cand):
        mass = res.sum()
        if rule == "lossless":
            # min(1, p_res(x) / q(x)) with the greedy draft a point mass (q(x) = 1), Eq. 67
            h[i] = res[x] / mass if mass > 0 else 0.0
        else:
            # SpecCascade / typical acceptance: 1[x in A], Eqs. 68-69
            h[i] = 1.0 if allowed[x] else 0.0
        if h[i] >= 1.0:
            break  # later candidates are never examined
        res[x] = 0.0  # zero-and-renormalise on rejection
    return h, res


def simulate_tree_verification(p, q=None, rule: str = "lossless", *, D: int = 1, L=None,
                               allowed=None, candidates=None, n: int = 100_000,
                               seed=0) -> TreeVerificationResult:
    """Monte Carlo of EAGLE-style tree verification with greedy drafting (seed 004 App. G).

    Each step walks ``L`` drafted positions.  Position ``t`` has ``D`` ordered candidates
    ``x^(1), ..., x^(D)`` (greedy drafting: the top-``D`` tokens of ``q_t``, ties broken by
    the lower token id, or given by ``candidates``), examined in order against the truncated
    target ``p_Theta,t = p_t 1_A / Z_Theta(p_t)``, each accepted iff ``U <= h(x^(i))`` for a
    fresh uniform ``U`` (App. G.2):

    - ``"lossless"`` (truncation sampling + SD, Eq. 67): ``h = min(1, p_res(x) / q(x))`` with
      the greedy draft a point mass, i.e. ``h = p_res(x)``, where ``p_res`` starts at
      ``p_Theta`` and a rejected candidate is zeroed and ``p_res`` renormalised; after ``D``
      rejections the position emits a correction from ``p_res``.  The position then emits
      ``p_Theta`` exactly (Lemma 2(i)).
    - ``"speccascade"`` (Eq. 68) and ``"typical"`` (Medusa typical acceptance, Eq. 69):
      ``h = 1[x in A]``, so the first in-set candidate is accepted surely (a point mass,
      Theorem 1 statement 2); if no candidate is in ``A`` the correction comes from
      ``p_Theta`` (zero on the rejected candidates, which lie outside ``A``).  The two rules
      differ only in the allowed set the caller passes: the min-p set for SpecCascade, the
      eta set for typical acceptance (``theory.min_p_allowed`` / ``theory.eta_allowed``).

    An accepted candidate moves the walk to position ``t + 1``; a rejection of all ``D``
    candidates ends the step with the correction token, and a walk that accepts at all ``L``
    positions ends with a bonus token (counted, not sampled: its law is the next position's
    target, which is not an input).  The per-position pairs do not depend on which candidate
    was accepted (a sequence of per-position pairs, as in App. G.3's per-position analysis).

    Parameters
    ----------
    p : array_like, shape (V,) or (L, V)
        Target at every position (one row per position, or one vector for all).
    q : array_like, shape (V,) or (L, V), optional
        Draft; required unless ``candidates`` is given (only its order matters).
    rule : {"lossless", "speccascade", "typical", "truncation"}
        ``"truncation"`` is an alias of the two indicator rules (as in
        ``theory.tree_emitted_distribution``).
    D : int >= 1
        Candidates per position (at most V).
    L : int >= 1, optional
        Depth; required when ``p`` and ``q`` are 1-D, else the number of rows.
    allowed : bool array, shape (V,) or (L, V), optional
        The truncation set ``A`` (it must carry target mass at every position); default:
        the support of ``p`` (no truncation).  Required for ``"speccascade"`` and
        ``"typical"``.
    candidates : int array, shape (D,) or (L, D), optional
        Explicit ordered candidates (distinct token ids) instead of greedy drafting.
    n : int >= 1
        Number of steps.
    seed : int, SeedSequence or Generator

    Returns
    -------
    TreeVerificationResult
    """
    rule = as_choice(rule, "rule", TREE_RULES)
    pa = as_prob(p, "p")
    V = pa.shape[-1]
    if L is not None:
        L = as_int(L, "L", min_value=1)
    if pa.ndim == 2:
        if L is not None and L != pa.shape[0]:
            raise ValueError(f"L: must equal the number of rows of p ({pa.shape[0]}), got {L}")
        L = pa.shape[0]
    elif L is None:
        raise ValueError("L: required when p is 1-D")
    p2 = np.ascontiguousarray(np.broadcast_to(pa, (L, V)))
    D = as_int(D, "D", min_value=1, max_value=V)
    n = as_int(n, "n", min_value=1)
    if candidates is None:
        if q is None:
            raise ValueError("q: required unless candidates are given")
        qa = as_prob(q, "q")
        if qa.shape[-1] != V:
            raise ValueError(f"q: shape mismatch with p: vocabulary sizes {qa.shape[-1]} and {V}")
        if qa.ndim == 2 and qa.shape[0] != L:
            raise ValueError(f"q: must have {L} rows (one per position), got {qa.shape[0]}")
        q2 = np.broadcast_to(qa, (L, V))
        # greedy drafting: top-D of q, ties to the lower token id (stable sort)
        cand = np.argsort(-q2, axis=1, kind="stable")[:, :D].astype(np.int64)
    else:
        c = np.asarray(candidates)
        if c.dtype.kind not in "iu" or c.ndim not in (1, 2):
            raise ValueError("candidates: must be an integer array of shape (D,) or (L, D)")
        try:
            cand = np.ascontiguousarray(np.broadcast_to(c, (L, D))).astype(np.int64)
        except ValueError:
            raise ValueError(f"candidates: shape {c.shape} does not fit (L, D) = ({L}, {D})"
                             ) from None
        if np.any(cand < 0) or np.any(cand >= V):
            raise ValueError(f"candidates: token ids must lie in [0, {V})")
        if any(np.unique(row).size != D for row in cand):
            raise ValueError("candidates: the candidates of a position must be distinct")
    if allowed is None:
        if rule != "lossless":
            raise ValueError(f"allowed: required by rule {rule!r}")
        a2 = p2 > 0
    else:
        a2 = as_bool_mask(allowed, "allowed", (L, V))
        if not np.all((a2 & (p2 > 0)).any(axis=1)):
            raise ValueError("allowed: the allowed set carries no target mass at some "
                             "position; the truncated target is undefined")
    rng = as_rng(seed)

    p_theta = p2 * a2
    p_theta /= p_theta.sum(axis=1, keepdims=True)
    emitted = np.zeros((L, V), dtype=np.int64)
    reached = np.zeros(L, dtype=np.int64)
    acc_counts = np.zeros(L, dtype=np.int64)
    accepted = np.zeros(n, dtype=np.int64)
    active = np.arange(n)
    for t in range(L):
        m = active.size
        reached[t] = m
        if m == 0:
            continue
        h, res = _tree_position(rule, p_theta[t], a2[t], cand[t])
        u = rng.random((m, D))
        ok = u < h[None, :]
        hit = ok.any(axis=1)
        first = ok.argmax(axis=1)
        tok = np.empty(m, dtype=np.int64)
        tok[hit] = cand[t][first[hit]]
        miss = np.flatnonzero(~hit)
        if miss.size:
            tok[miss] = _categorical(res, rng.random(miss.size))
        emitted[t] = np.bincount(tok, minlength=V)
        acc_counts[t] = int(hit.sum())
        active = active[hit]
        accepted[active] += 1
    return TreeVerificationResult(rule=rule, D=D, L=L, n=n, candidates=cand,
                                  p_theta=p_theta, reached=reached, emitted_counts=emitted,
                                  accepted_counts=acc_counts, accepted=accepted)
