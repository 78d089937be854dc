"""Samplers for lossy verification rules (one speculative step per context).

Every sampler here runs the *mechanics* of a rule: a draft ``X ~ q``, the rule's acceptance
test ``U < h(X)`` with a uniform ``U``, and the rule's correction on rejection (a residual
distribution, the truncated target, or a fresh draft).  None of them samples a closed-form
induced distribution; the closed forms live in :mod:`specbound.theory.lossy` and the tests
compare the two by goodness-of-fit.  Tree (multi-candidate) verification is simulated in
:mod:`specbound.sim.tree`.

Notation follows Zhou et al. (2026), "Revisiting lossy verification in speculative
decoding", arXiv:2607.26627 (§3.1-3.2, App. A, F, G): ``p`` is the target, ``q`` the draft,
``A`` (``allowed``) a truncation set, ``p_Theta`` the truncated target ``p 1_A / Z_Theta(p)``.
The rule names, their parameters, the parameter parser, the Fuzzy SD gate's divergence and
the contrastive law are those of :mod:`specbound.theory.lossy` (one implementation each).

Randomness: all uniforms come from one ``numpy.random.Generator`` made from ``seed``
(SPEC 7) and are drawn in a fixed order, so results are bit-for-bit reproducible for a
given seed.  Sampling is vectorised with NumPy over the ``n`` draws (no Numba kernel is
needed: the work per draw is a constant number of array look-ups).
"""

from __future__ import annotations

import types
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from specbound._validation import as_choice, as_int, as_pair, as_rng, check_alloc
from specbound.theory.lossy import (
    RULE_PARAMS,
    RULES,
    contrastive_law,
    fuzzy_divergence,
    parse_rule_params,
)

__all__ = [
    "LOSSY_RULES",
    "RULE_SPECS",
    "RuleSpec",
    "rule_spec",
    "sample_induced",
]

#: rules accepted by :func:`sample_induced` (the names of ``theory.RULES``)
LOSSY_RULES = RULES

#: most uniforms drawn in one round of a redraw (rejection) loop
_REDRAW_BLOCK = 2_000_000


# --------------------------------------------------------------------------------------
# small NumPy building blocks (no validation: callers pass valid input)
# --------------------------------------------------------------------------------------
def categorical_draw(probs: np.ndarray, u: np.ndarray) -> np.ndarray:
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
    with np.errstate(over="ignore"):  # num/den -> inf (tiny ell): min(1, inf) = 1
        np.divide(num, den, out=out, where=den > 0)
    return np.minimum(out, 1.0)


def _divergence(p: np.ndarray, q: np.ndarray, kind: str) -> float:
    """The gate divergence of Fuzzy SD for one context: ``theory.lossy.fuzzy_divergence``
    on the pair as one row (so the gate opens on the same side of the threshold)."""
    return float(fuzzy_divergence(p[None, :], q[None, :], kind)[0])


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
        return categorical_draw(mech.residual, rng.random(n))
    x = categorical_draw(q, rng.random(n))
    accept = rng.random(n) < h[x]
    out = x
    rejected = np.flatnonzero(~accept)
    if rejected.size == 0:
        return out
    if not mech.redraw:
        out[rejected] = categorical_draw(mech.residual, rng.random(rejected.size))
        return out
    # rejection loop: every rejected draw redraws X ~ q and repeats the test until it
    # passes.  For speed a round gives each pending draw a row of ``m`` fresh drafts and
    # keeps the first that passes (the same law as one-at-a-time redraws); ``m`` is sized
    # from the pass probability so that a round resolves most pending draws.
    pending = rejected
    while pending.size:
        m = int(np.clip(np.ceil(3.0 / pass_prob), 1, max(1, _REDRAW_BLOCK // pending.size)))
        xs = categorical_draw(q, rng.random(pending.size * m)).reshape(pending.size, m)
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


# --------------------------------------------------------------------------------------
# the rules: one mechanism (and, where needed, one per-context preparation) per rule
# --------------------------------------------------------------------------------------
def _mech_lossless(p, q, prm) -> _Mechanism:
    """Speculative sampling (Leviathan et al. 2023, Alg. 1): ``min(1, p/q)``, ``(p - q)_+``."""
    return _Mechanism(q, _ratio(p, q), _residual(_pos(p - q), p), False)


def _mech_nu(p, q, prm) -> _Mechanism:
    """Speculative sampling towards the rule's law ``nu`` (interpolation, contrastive)."""
    nu = prm["nu"]
    return _Mechanism(q, _ratio(nu, q), _residual(_pos(nu - q), nu), False)


def _mech_fuzzy(p, q, prm) -> _Mechanism:
    """Fuzzy SD (App. A.2): accept every draft iff ``D(p, q) <= T``, else a token from ``p``."""
    g = float(_divergence(p, q, prm["divergence"]) <= prm["threshold"])
    return _Mechanism(q, np.full_like(q, g), p, False)


def _mech_lenience(p, q, prm) -> _Mechanism:
    """Lenience: ``min(1, p/(ell q))``, residual ``(p - q)_+``."""
    return _Mechanism(q, _ratio(p, prm["ell"] * q), _residual(_pos(p - q), p), False)


def _mech_judge(p, q, prm) -> _Mechanism:
    """Judge decoding: a judged draft ``j(x) = 1`` is always accepted."""
    j = prm["judge"]
    base = _ratio(p, q)
    h = np.where(q > p, base + (1.0 - base) * j, 1.0)
    h = np.where(q > 0, h, 0.0)
    return _Mechanism(q, h, _residual(_pos(p - q), p), False)


def _mech_truncation(p, q, prm) -> _Mechanism:
    """Truncation (Eq. 13): accept iff ``x in A``; redraw or a token from ``p_Theta``."""
    a = prm["allowed"]
    h = a.astype(np.float64)
    p_theta = p * a
    if p_theta.sum() > 0:
        p_theta = p_theta / p_theta.sum()
    return _Mechanism(q, h, p_theta, prm["on_reject"] == "renormalize")


def _mech_ceiling(p, q, prm) -> _Mechanism:
    """Ceiling ``min(1, p/(ell q))`` (1 on ``A`` for truncation_ceiling); residual
    ``(p - q h)_+`` or redraw."""
    h = _ratio(p, prm["ell"] * q)
    if "allowed" in prm:  # truncation_ceiling
        h = np.where(prm["allowed"] & (q > 0), 1.0, h)
    yield_ = q * h
    return _Mechanism(q, h, _residual(_pos(p - yield_), p), prm["completion"] == "renormalize")


def _prep_interpolation(p2, q2, prm, per):
    lam = prm["lam"]
    for i in range(p2.shape[0]):
        per[i]["nu"] = lam[i] * p2[i] + (1.0 - lam[i]) * q2[i]


def _prep_contrastive(p2, q2, prm, per):
    nu = contrastive_law(p2, q2, prm["beta"], prm["alpha"])
    for i in range(p2.shape[0]):
        per[i]["nu"] = nu[i]


def _prep_truncation(p2, q2, prm, per):
    """``p_Theta`` is needed when a rejection can occur and is corrected from it: refuse a
    set ``A`` without target mass there."""
    for i in range(p2.shape[0]):
        a_i = per[i]["allowed"]
        if prm["on_reject"] == "target":
            needed = bool(np.any((q2[i] > 0) & ~a_i))
        else:
            needed = not np.any((q2[i] > 0) & a_i)
        if needed and not np.any(a_i & (p2[i] > 0)):
            raise ValueError("allowed: the allowed set carries no target mass "
                             f"(context {i}); the truncated target p_Theta is undefined")


@dataclass(frozen=True)
class RuleSpec:
    """What the package knows about one lossy verification rule (Zhou et al. 2026,
    arXiv:2607.26627, §3.1-3.2, App. A, F, G).

    Attributes
    ----------
    name : str
        The rule's name (one of :data:`specbound.theory.RULES`).
    code : int
        Its number in the compiled loop (:mod:`specbound.sim._compiled_lossy`): its position
        in :data:`RULE_SPECS`, set by the registry (never written by hand).
    params : tuple
        ``(required names, optional parameters with defaults)``: the rule's entry of
        :data:`specbound.theory.lossy.RULE_PARAMS` (derived from the theory's table
        ``RULE_LAWS``, whose parser is the one parser of rule parameters).
    mechanism : callable
        ``mechanism(p, q, prm) -> _Mechanism`` for one context: the acceptance function
        ``h``, the correction distribution and whether a rejection redraws.
    prepare : callable or None
        ``prepare(p2, q2, prm, per)``: per-context quantities computed on all contexts at
        once (the law ``nu``) or checks across contexts, written into the per-context dicts
        ``per``; None when the parsed parameters suffice.
    summary : str
        One line for the docs.
    sd_step : bool
        The sequence decoders verify with speculative sampling's own step (``U q(x) <=
        p(x)``, residual ``(p - q)_+``; the ``vsps`` decoder), not with ``U < h(x)`` of the
        mechanism: only ``lossless``, so that ``lossy_decode(..., "lossless")`` is
        ``speculative_decode(..., "vsps")`` token for token.  The mechanism (and
        :func:`sample_induced`) is unchanged.
    """

    name: str
    code: int
    params: tuple
    mechanism: Callable
    prepare: Callable | None = None
    summary: str = ""
    sd_step: bool = False


def _rule(name, mechanism, prepare=None, summary="", sd_step=False):
    """A rule's spec with its parameters from the theory's table (its code is set by
    :func:`_rule_registry`)."""
    return RuleSpec(name, -1, RULE_PARAMS[name], mechanism, prepare, summary, sd_step)


def _rule_registry(*specs: RuleSpec) -> types.MappingProxyType:
    """The registry: each rule's code is its position."""
    out = {s.name: replace(s, code=i) for i, s in enumerate(specs)}
    if len(out) != len(specs):
        raise ValueError("name: a lossy rule is registered twice")
    return types.MappingProxyType(out)


#: name -> :class:`RuleSpec`, in the order of :data:`specbound.theory.RULES`
RULE_SPECS = _rule_registry(
    _rule("lossless", _mech_lossless, summary="speculative sampling (lossless)",
          sd_step=True),
    _rule("interpolation", _mech_nu, _prep_interpolation,
          summary="towards nu = lam p + (1 - lam) q (DIVERSED)"),
    _rule("fuzzy", _mech_fuzzy, summary="Fuzzy SD: a divergence gate"),
    _rule("lenience", _mech_lenience, summary="min(1, p / (ell q))"),
    _rule("judge", _mech_judge, summary="judge decoding"),
    _rule("truncation", _mech_truncation, _prep_truncation,
          summary="accept on the allowed set A"),
    _rule("ceiling", _mech_ceiling, summary="a ceiling on the acceptance"),
    _rule("truncation_ceiling", _mech_ceiling,
          summary="ceiling, 1 on the allowed set A"),
    _rule("contrastive", _mech_nu, _prep_contrastive,
          summary="towards the contrastive law p^(1+beta) q^(-beta)"),
)
if tuple(RULE_SPECS) != RULES or any(s.params != RULE_PARAMS[n] for n, s in RULE_SPECS.items()):
    raise ImportError("specbound.sim.lossy: RULE_SPECS must list theory.RULES with their "
                      "RULE_PARAMS, in order")

#: the codes of the rules whose context needs a preparation in the compiled block loop
#: (``specbound.sim._compiled``): the truncated target's check, the Fuzzy SD gate, the
#: contrastive law
RULE_FUZZY = RULE_SPECS["fuzzy"].code
RULE_TRUNCATION = RULE_SPECS["truncation"].code
RULE_CONTRASTIVE = RULE_SPECS["contrastive"].code


def rule_spec(rule) -> RuleSpec:
    """The spec of lossy rule ``rule`` (``ValueError`` naming ``rule`` when none)."""
    spec = RULE_SPECS.get(rule) if isinstance(rule, str) else None
    if spec is None:
        raise ValueError(f"rule: must be one of {sorted(RULE_SPECS)}, got {rule!r}")
    return spec


def context_params(params: dict, p, q) -> dict:
    """A rule's parameters in one context: callables ``f(p, q)`` evaluated on it."""
    return {k: (v(p, q) if callable(v) else v) for k, v in params.items()}


def _mechanism(rule: str, p: np.ndarray, q: np.ndarray, prm: dict) -> _Mechanism:
    """The acceptance function and correction of ``rule`` for one context (1-D p, q)."""
    return rule_spec(rule).mechanism(p, q, prm)


def _prepare(rule: str, p2: np.ndarray, q2: np.ndarray, params: dict) -> list[dict]:
    """Validate the rule's parameters (``theory.lossy.parse_rule_params``); returns
    per-context parameter dicts for :func:`_mechanism`: every parsed parameter, row ``i``
    of the per-context ones (option strings as they are), then the rule's own
    ``prepare``."""
    spec = rule_spec(rule)
    m = p2.shape[0]
    rule, prm = parse_rule_params(rule, p2, q2, params)
    per = [dict() for _ in range(m)]
    for name, value in prm.items():
        if name in ("lam", "beta", "alpha"):  # consumed by the rule's prepare
            continue
        for i in range(m):
            if isinstance(value, str):
                per[i][name] = value
            elif name == "judge":
                per[i][name] = value[i].astype(np.float64)
            elif name == "allowed":
                per[i][name] = value[i].copy()
            else:
                per[i][name] = value[i]
    if spec.prepare is not None:
        spec.prepare(p2, q2, prm, per)
    return per


def sample_induced(p, q, rule: str, n: int = 100_000, *, seed=0, normalize: bool = False,
                   **params) -> np.ndarray:
    """Emitted tokens of one speculative step under a lossy verification rule.

    Each draw runs the rule's mechanics (Zhou et al. 2026, arXiv:2607.26627, §3.1-3.2,
    App. A, F): a draft ``X ~ q``, acceptance if ``U < h(X)`` for ``U ~ U[0, 1)``, and the
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
    ``"ceiling"``           ``min(1, p/(ell q))``        ``completion="residual"`` (default):
    (``ell``,               (yield ``min(q, p/ell)``)    a token from ``(p - yield)_+``;
    ``completion``)                                      ``"renormalize"``: redraw until accepted
    ``"truncation_ceiling"``  1 on ``A``, else            as ``"ceiling"``
    (``allowed``, ``ell``,  ``min(1, p/(ell q))``
    ``completion``)         (yield of Table 5 row 5)
    ======================  ===========================  =====================================

    Parameters
    ----------
    p, q : array_like
        Target and draft, 1-D (one context) or 2-D (rows are contexts; a 1-D argument is
        broadcast).  Rows must sum to 1 within the tolerance of
        :func:`specbound._validation.sum_atol` (``1e-9`` for float64); every draw normalises
        the law it samples from, and the rule's quantities (h, the Fuzzy gate, the residual)
        are computed from the inputs as given, exactly as in ``theory.lossy``.
    rule : str
        One of :data:`LOSSY_RULES`.
    n : int
        Number of independent steps per context (>= 1).  The call allocates about
        ``40 n`` bytes per context and refuses sizes above the package's memory limit
        (``ValueError`` naming ``n``).
    seed : int, SeedSequence or Generator, keyword-only
        Source of all uniforms (SPEC 7).
    normalize : bool, default False
        Rescale the rows of ``p`` and ``q`` to sum to 1 instead of refusing rows whose sum is
        off by more than the tolerance.
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
    p2, q2, batched = as_pair(p, q, normalize=normalize)
    n = as_int(n, "n", min_value=1)
    check_alloc("n", n * (p2.shape[0] + 5), 8, what="int64 output plus uniforms and drafts")
    rng = as_rng(seed)
    per = _prepare(rule, p2, q2, params)
    out = np.empty((p2.shape[0], n), dtype=np.int64)
    for i in range(p2.shape[0]):
        out[i] = _run_mechanism(_mechanism(rule, p2[i], q2[i], per[i]), n, rng)
    return out if batched else out[0]
