r"""Lossy verification: the distributions lossy rules induce, their acceptance, their distortion.

Closed forms for the rules unified by Zhou et al. (2026), "Revisiting lossy verification in
speculative decoding", arXiv:2607.26627 (§3, App. A, E, F, G; the equation numbers below are
theirs).  Every rule is one step of speculative decoding (SD; Leviathan et al. 2023, Chen et
al. 2023) in one context: a draft ``X ~ q`` is accepted with probability ``h(X)``; a rejected
draft is replaced by a *correction* token.  For rules verified against a reference ``\nu`` the
law of the emitted token ``Y`` is the generic SD formula

.. math::  P(Y=x) = q(x)h(x) + \Big[1 - \sum_v q(v)h(v)\Big]\, r(x),
           \qquad r = (\nu - q)_+ / \textstyle\sum (\nu - q)_+ ,

with the convention that the bracket times ``r`` is 0 when the rejection mass is 0 (then
``r`` is not needed; this is how ``p = q`` -- TV = 0, Δ undefined -- is handled: the
induced law is then ``q = p``).

The truncation sets, tree verification and the results built on them (Lemma 1, Theorem 1,
Proposition 1 of Zhou et al. 2026) live in :mod:`specbound.theory.tree`.

Rules and their parameters (names are a contract shared with ``specbound.sim.sample_induced``)
-----------------------------------------------------------------------------------------------
:data:`RULES` is the tuple of rule names and :data:`RULE_PARAMS` maps each rule to its
required parameters and optional parameters with their defaults.

``"lossless"`` -- no parameters.
    h = min(1, p/q); a rejection emits r = (p-q)+ normalized.  Induced: p.
``"interpolation"`` -- ``lam``: float in [0, 1], the weight on the target (CoS); or an array
    with one value per row of a batch, or a callable ``lam(p_row, q_row) -> float`` called on
    each context (DIVERSED).
    Verify against nu = lam p + (1-lam) q: h = min(1, nu/q), r = (nu-q)+ normalized.
    Induced: nu (Eq. 8; App. A.1).
``"fuzzy"`` -- ``threshold``: float >= 0; ``divergence``: "tv" (default) | "kl" | "js"
    with D = TV(p, q), KL(p || q), JS(p, q) (nats).
    Gate g = 1[D(p, q) <= threshold] per context; if g = 1 every draft is accepted, if g = 0
    the draft is rejected and the emitted token is a sample of p (App. A.2).
    Induced: g q + (1-g) p, i.e. interpolation with lam = 1 - g.
``"lenience"`` -- ``ell``: float in (0, 1].
    h = min(1, p/(ell q)) (Eq. 9), r = (p-q)+ normalized.  Induced: Eq. 10 with Δ_ell.
``"judge"`` -- ``judge``: bool array, shape (n,) or (rows, n).
    h = 1 if q <= p, else p/q + (1 - p/q) j (Eq. 11), r = (p-q)+ normalized.
    Induced: Eq. 12 with Δ_j.
``"truncation"`` -- ``allowed``: bool array, shape (n,) or (rows, n);
    ``on_reject``: "renormalize" (default) | "target".
    h = 1[x in A] (Definition 1).  "renormalize": a rejected draft is redrawn from q until one
    is accepted -> q 1_A / Z_Θ(q) (Eq. 13).  "target": a rejection emits a sample of p_Θ
    -> q 1_A + (1 - Z_Θ(q)) p_Θ (the practical variant).
``"ceiling"`` -- ``ell``: float in (0, 1]; ``completion``: "residual" (default) | "renormalize".
    Yield y = min(q, p/ell) (Table 1 "ceiling only", Table 5 row 4); h = min(1, p/(ell q)).
    "residual": a rejection emits a sample of (p-y)+ normalized
    -> y + (1 - Σ y) (p-y)+ / Σ (p-y)+ (this equals lenience, as (p-y)+ = (p-q)+).
    "renormalize": a rejected draft is redrawn from q until accepted -> y / Σ y.
``"truncation_ceiling"`` -- ``allowed``, ``ell``, ``completion`` (as above, default
    "residual").
    Yield y = q on A, min(q, p/ell) off A (Table 5 row 5); h = 1 on A, min(1, p/(ell q))
    off A; the two completions as for "ceiling".
``"contrastive"`` -- ``beta``: float >= 0 (contrast strength); ``alpha``: float in [0, 1],
    default 0.1 (plausibility cut).
    Lossless SD against the contrastive law nu (below): h = min(1, nu/q),
    r = (nu-q)+ normalized.  Induced: nu.

``on_reject`` defaults to ``"renormalize"`` (Eq. 13 states it for truncation) and
``completion`` to ``"residual"``: the reading of the two yield rows of Zhou et al. 2026
(Table 5 rows 4 and 5) that agrees with the numbers the paper reports for them.  The two
readings give the same acceptance ``Σ y`` at every ``ell``, so the paper's block
efficiencies cannot tell them apart; its accuracies can: "renormalize" distorts the law even
at ``ell = 1`` (where the ceiling has lossless acceptance), strictly more than lenience at
every ``ell`` with the same acceptance, while Table 5 reports the ceiling row at lossless
accuracy (-0.4%, lenience -0.6%) and the truncation + ceiling row at exactly the lossless
accuracy.  Under "residual", "ceiling only" *is* lenience (so the paper's row 4 repeats row
3 up to noise: 5.58 vs 5.53 BE, 75.33 vs 75.22 accuracy), which the paper's reading of it as
"lenience without the adaptive interpolation" does not admit; no reading reproduces that
distinction (``paper_figs/fidelity_lossy.py``, docs/fidelity.md).  Both readings stay
available by name; the two are never mixed within one call.  If the yield has zero
mass (``Z_Θ(q) = 0`` for truncation: the draft puts no mass on ``A``; ``sum y = 0`` for the
ceilings) the redraw loop of "renormalize" never ends: the rule then *falls back to its other
completion*, which at zero yield is its correction law (``p_Θ`` for truncation, ``(p-y)_+``
normalized for the ceilings).  The samplers must do the same.

Contrastive rule (Zhou et al. 2026, Eq. 3, in the form of O'Brien & Lewis 2023, "Contrastive
decoding improves reasoning in large language models", with the plausibility mask of Li et
al. 2023, "Contrastive decoding: open-ended text generation as optimization", ACL): with the
head ``H = {x : p(x) >= alpha max p, p(x) > 0}``,
``nu(x) ∝ p(x)^(1+beta) q(x)^(-beta)`` on ``H`` and 0 off ``H`` (logits
``(1+beta) log p - beta log q``, softmax over ``H``).  Zeros: if some ``x`` in ``H`` has
``q(x) = 0`` and ``beta > 0`` the contrast there is infinite and ``nu`` is the limit
``nu ∝ p^(1+beta)`` on ``{x in H : q(x) = 0}``; with ``beta = 0``, ``nu`` is ``p`` restricted to
``H``.  The rule is lossless SD against ``nu``, so the induced law is exactly ``nu``
(:func:`contrastive_law` is the one implementation, shared with the sampler).

Scalar parameters (``ell``, ``threshold``, ``beta``, ``alpha``, like ``lam``) may also be
given per context: an array with one value per row of a batch.  Numbers must be real numbers
(a string such as ``"0.5"`` is refused) and flags must be booleans.

Zeros and conventions: ``acceptance_function`` returns ``h = 1`` where ``q(x) = 0`` for the
ratio rules (such tokens are never drafted, any value gives the same law).  ``p_Θ`` needs
``Z_Θ(p) > 0``: a ``ValueError`` naming ``allowed`` is raised when it is needed and ``A``
carries no target mass.  1-D inputs give 1-D vectors / Python floats; 2-D inputs (rows are
contexts) give 2-D arrays / 1-D arrays.  Every function taking distributions accepts
``normalize=True`` (rescale rows instead of refusing sums off 1; the default tolerance is
that of :func:`specbound._validation.sum_atol`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from specbound._validation import (
    as_bool_mask,
    as_choice,
    as_pair,
    as_prob,
    as_real,
    as_real_per_row,
    squeeze_out,
)
from specbound.theory.divergences import js_rows, kl_rows, tv_rows

__all__ = [
    "RULES",
    "RULE_LAWS",
    "RULE_PARAMS",
    "RuleLaw",
    "Distortion",
    "acceptance_function",
    "acceptance_rate",
    "distortion",
    "induced_distribution",
    "judge_delta",
    "lenience_delta",
]

#: divergences of the Fuzzy SD gate, rejection completions, yield completions
DIVERGENCES = ("tv", "kl", "js")
ON_REJECT = ("renormalize", "target")
COMPLETIONS = ("renormalize", "residual")


# ---------------------------------------------------------------------------------------------
# small row-wise helpers (2-D in, 1-D or 2-D out); inputs already validated
# ---------------------------------------------------------------------------------------------
def _pos(x):
    return np.maximum(x, 0.0)


def _safe_div_rows(num, den):
    """``num / den[:, None]`` with 0 where ``den == 0`` (no warnings)."""
    den = np.asarray(den, dtype=np.float64)
    out = np.zeros_like(num)
    ok = den > 0
    out[ok] = num[ok] / den[ok, None]
    return out


def _ratio_h(num, q):
    """``min(1, num / q)`` with the convention ``h = 1`` where ``q = 0``."""
    h = np.ones_like(q)
    pos = q > 0
    h[pos] = np.minimum(1.0, num[pos] / q[pos])
    return h


def truncated_rows(p, allowed, name="allowed"):
    """``p_Θ = p 1_A / Z_Θ(p)`` per row and ``Z_Θ(p)`` (internal API, validated 2-D input).

    Raises ``ValueError`` naming ``name`` if a row has ``Z_Θ(p) = 0`` (the truncated target
    of Zhou et al. 2026, Eq. 4, is then undefined).
    """
    kept = np.where(allowed, p, 0.0)
    z = kept.sum(axis=1)
    if np.any(z <= 0):
        rows = np.flatnonzero(z <= 0)
        raise ValueError(
            f"{name}: the allowed set carries no target mass (Z_Θ(p) = 0) in row(s) "
            f"{rows.tolist()[:5]}; the truncated target p_Θ is undefined"
        )
    return kept / z[:, None], z


def _sd_generic(q, y, nu):
    """Generic SD law: yield ``y = q h`` plus the rejection mass times r = (nu - q)+ normalized."""
    rej = np.maximum(q - y, 0.0).sum(axis=1)
    resid = _pos(nu - q)
    return y + rej[:, None] * _safe_div_rows(resid, resid.sum(axis=1))


# ---------------------------------------------------------------------------------------------
# validation of the rule parameters (internal API shared with specbound.sim.sample_induced)
# ---------------------------------------------------------------------------------------------
def check_rule_params(rule, params):
    """Validate ``rule`` and the *names* of its ``params`` against :data:`RULE_PARAMS`.

    Returns ``(rule, params)`` with the optional parameters' defaults filled in.
    """
    rule = as_choice(rule, "rule", RULES)
    required, optional = RULE_PARAMS[rule]
    for name in params:
        if name not in required and name not in optional:
            accepted = sorted((*required, *optional)) or ["none"]
            raise ValueError(
                f"{name}: not a parameter of rule {rule!r} (accepted: {', '.join(accepted)})"
            )
    for name in required:
        if name not in params:
            raise ValueError(f"{name}: required by rule {rule!r}")
    full = dict(optional)
    full.update(params)
    return rule, full


def _scalar(v, name):
    """The one number a user callable returned (a 1-element array is accepted)."""
    if v is None or isinstance(v, str | bytes):
        raise ValueError(f"{name}: the callable must return one real number, got {v!r}")
    arr = np.asarray(v)
    if arr.size != 1:
        raise ValueError(f"{name}: the callable must return one number, got shape {arr.shape}")
    v = arr.reshape(-1)[0]
    return v.item() if isinstance(v, np.generic) else v


def _as_lam(lam, p2, q2):
    m = p2.shape[0]
    if callable(lam):
        vals = []
        for i in range(m):
            pi = p2[i].copy()
            qi = q2[i].copy()
            try:
                v = lam(pi, qi)
            except Exception as exc:  # a user callable: report it under the argument's name
                raise ValueError(f"lam: the callable raised {type(exc).__name__}: {exc}") from exc
            vals.append(as_real(_scalar(v, "lam"), "lam", low=0.0, high=1.0))
        return np.asarray(vals, dtype=np.float64)
    return as_real_per_row(lam, "lam", m, low=0.0, high=1.0)


def parse_rule_params(rule, p2, q2, params) -> tuple[str, dict]:
    """Validate a rule and its parameters against validated 2-D ``p2``, ``q2`` (internal API).

    Returns ``(rule, P)`` where ``P`` maps every parameter (defaults filled in) to its parsed
    form: ``lam``, ``ell``, ``threshold``, ``beta``, ``alpha`` -> float arrays of shape
    ``(rows,)`` (one value per context; a callable ``lam`` is evaluated on each row);
    ``judge``, ``allowed`` -> bool arrays of the shape of ``p2``; ``divergence``,
    ``on_reject``, ``completion`` -> the validated option string.  The one parser of rule
    parameters, shared by :func:`induced_distribution` and ``specbound.sim.sample_induced``.
    """
    rule, full = check_rule_params(rule, params)
    m = p2.shape[0]
    return rule, {name: _PARAM_PARSERS[name](value, p2, q2, m) for name, value in full.items()}


#: parameter name -> its parser ``(value, p2, q2, rows) -> parsed`` (one entry per parameter
#: of :data:`RULE_PARAMS`, whatever rules take it)
_PARAM_PARSERS = {
    "lam": lambda v, p2, q2, m: _as_lam(v, p2, q2),
    "ell": lambda v, p2, q2, m: as_real_per_row(v, "ell", m, low=0.0, high=1.0, low_open=True),
    "judge": lambda v, p2, q2, m: as_bool_mask(v, "judge", p2.shape),
    "allowed": lambda v, p2, q2, m: as_bool_mask(v, "allowed", p2.shape),
    "threshold": lambda v, p2, q2, m: as_real_per_row(v, "threshold", m, low=0.0),
    "divergence": lambda v, p2, q2, m: as_choice(v, "divergence", DIVERGENCES),
    "on_reject": lambda v, p2, q2, m: as_choice(v, "on_reject", ON_REJECT),
    "completion": lambda v, p2, q2, m: as_choice(v, "completion", COMPLETIONS),
    "beta": lambda v, p2, q2, m: as_real_per_row(v, "beta", m, low=0.0),
    "alpha": lambda v, p2, q2, m: as_real_per_row(v, "alpha", m, low=0.0, high=1.0),
}


def _prepare(p, q, rule, params, normalize):
    p2, q2, batched = as_pair(p, q, normalize=normalize)
    rule, P = parse_rule_params(rule, p2, q2, params)
    return rule, p2, q2, batched, P


def _out_vec(x, batched):
    return x if batched else x[0]


# ---------------------------------------------------------------------------------------------
# the rules
# ---------------------------------------------------------------------------------------------
def _contrastive_row(p, q, beta, alpha):
    head = (p >= alpha * p.max()) & (p > 0)
    if beta == 0.0:
        nu = np.where(head, p, 0.0)
        return nu / nu.sum()
    infinite = head & (q <= 0)
    if np.any(infinite):  # infinite contrast somewhere on the head: the limit law
        w = np.where(infinite, p ** (1.0 + beta), 0.0)
        return w / w.sum()
    logw = np.full(p.shape, -np.inf)
    logw[head] = (1.0 + beta) * np.log(p[head]) - beta * np.log(q[head])
    w = np.where(head, np.exp(logw - logw.max()), 0.0)
    return w / w.sum()


def contrastive_law(p2, q2, beta, alpha):
    """The contrastive law ``nu`` of every row (module docstring; internal API).

    ``p2``, ``q2``: validated 2-D arrays; ``beta``, ``alpha``: one value per row.  The one
    implementation, used by the ``"contrastive"`` rule here and by its sampler in
    ``specbound.sim.sample_induced``.
    """
    nu = np.empty_like(p2)
    for i in range(p2.shape[0]):
        nu[i] = _contrastive_row(p2[i], q2[i], beta[i], alpha[i])
    return nu


def fuzzy_divergence(p2, q2, divergence):
    """The Fuzzy SD gate's divergence per row: TV, KL(p ‖ q) or JS in nats (internal API)."""
    if divergence == "tv":
        return tv_rows(p2, q2)
    if divergence == "kl":
        return kl_rows(p2, q2)
    return js_rows(p2, q2)


def _fuzzy_gate(p, q, threshold, divergence):
    return (fuzzy_divergence(p, q, divergence) <= threshold).astype(np.float64)


def _lenience_delta_rows(p, q, ell):
    with np.errstate(over="ignore"):  # p/ell -> inf for a tiny ell: (q - inf)+ = 0
        num = _pos(q - p / ell).sum(axis=1)  # = 1 - sum min(q, p/ell)
    den = _pos(p - q).sum(axis=1)  # = TV(p, q)
    out = np.zeros(p.shape[0])
    ok = den > 0
    out[ok] = num[ok] / den[ok]
    # in exact arithmetic num <= den; rounding (and rows summing to 1 only within the input
    # tolerance) can push the quotient above 1: the documented range is [0, 1]
    return np.clip(out, 0.0, 1.0)


def _judge_delta_rows(p, q, judge):
    num = (_pos(q - p) * (~judge)).sum(axis=1)
    den = _pos(p - q).sum(axis=1)
    out = np.zeros(p.shape[0])
    ok = den > 0
    out[ok] = num[ok] / den[ok]
    return np.clip(out, 0.0, 1.0)


def _complete(y, p, completion):
    """Complete a yield row: renormalize it, or send the missing mass to ``(p - y)_+``.

    "renormalize" falls back to "residual" in rows whose yield has zero mass.
    """
    s = y.sum(axis=1)
    resid = _pos(p - y)
    residual = y + np.maximum(1.0 - s, 0.0)[:, None] * _safe_div_rows(resid, resid.sum(axis=1))
    if completion == "residual":
        return residual
    out = residual
    ok = s > 0
    out[ok] = y[ok] / s[ok, None]
    return out


def _law(rule, p, q, P):
    """Return (h, yield, induced) for 2-D validated input (the rule's law of
    :data:`RULE_LAWS`).

    ``p/ell`` may overflow to ``inf`` for a tiny ``ell`` (the limit: every draft with
    ``p > 0`` is accepted); that is the intended value, so overflow is silenced.
    """
    with np.errstate(over="ignore"):
        return RULE_LAWS[rule].law(p, q, P)


def _law_lossless(p, q, P):
    y = np.minimum(q, p)
    return _ratio_h(p, q), y, _sd_generic(q, y, p)


def _law_towards(p, q, nu):
    """Speculative sampling towards the law ``nu`` (interpolation, contrastive)."""
    y = np.minimum(q, nu)
    return _ratio_h(nu, q), y, _sd_generic(q, y, nu)


def _law_interpolation(p, q, P):
    lam = P["lam"][:, None]
    return _law_towards(p, q, lam * p + (1.0 - lam) * q)


def _law_contrastive(p, q, P):
    return _law_towards(p, q, contrastive_law(p, q, P["beta"], P["alpha"]))


def _law_fuzzy(p, q, P):
    g = _fuzzy_gate(p, q, P["threshold"], P["divergence"])[:, None]
    h = np.broadcast_to(g, q.shape).copy()
    return h, g * q, g * q + (1.0 - g) * p


def _law_lenience(p, q, P):
    ell = P["ell"][:, None]
    y = np.minimum(q, p / ell)
    delta = _lenience_delta_rows(p, q, ell)[:, None]
    induced = np.where(q <= p, q + delta * (p - q), np.where(q <= p / ell, q, p / ell))
    return _ratio_h(p / ell, q), y, induced


def _law_judge(p, q, P):
    j = P["judge"]
    under = q <= p
    h = np.ones_like(q)
    over = ~under
    ratio = p[over] / q[over]
    h[over] = ratio + (1.0 - ratio) * j[over]
    y = np.where(under, q, p + (q - p) * j)
    delta = _judge_delta_rows(p, q, j)[:, None]
    induced = np.where(under, q + delta * (p - q), p + (q - p) * j)
    return h, y, induced


def _law_truncation(p, q, P):
    A = P["allowed"]
    y = np.where(A, q, 0.0)
    zq = y.sum(axis=1)
    h = A.astype(np.float64)
    # p_Θ is needed where the rejection mass is (numerically) positive ("target") or where
    # the yield is empty ("renormalize" falls back to p_Θ)
    need = (1.0 - zq > 1e-12) if P["on_reject"] == "target" else (zq <= 0)
    zp = np.where(A, p, 0.0).sum(axis=1)
    if np.any(need & (zp <= 0)):
        truncated_rows(p[need], A[need])  # raises, naming ``allowed``
    ptheta = np.zeros_like(p)
    ok = zp > 0
    ptheta[ok] = np.where(A[ok], p[ok], 0.0) / zp[ok, None]
    if P["on_reject"] == "target":
        induced = y + np.maximum(1.0 - zq, 0.0)[:, None] * ptheta
    else:
        induced = np.where((zq > 0)[:, None], _safe_div_rows(y, zq), ptheta)
    return h, y, induced


def _law_ceiling(p, q, P):
    """Ceiling (and, with an ``allowed`` set, truncation + ceiling): the yield rows of
    Table 1 and Table 5, completed by ``completion``."""
    ell = P["ell"][:, None]
    y = np.minimum(q, p / ell)
    h = _ratio_h(p / ell, q)
    if "allowed" in P:  # truncation_ceiling: 1 on A
        A = P["allowed"]
        y = np.where(A, q, y)
        h = np.where(A, 1.0, h)
    return h, y, _complete(y, p, P["completion"])


@dataclass(frozen=True)
class RuleLaw:
    """One lossy rule of the theory: its parameters and its law.

    Attributes
    ----------
    required : tuple of str
        Its required parameters.
    optional : dict
        Its optional parameters with their defaults.
    law : callable
        ``law(p2, q2, P) -> (h, yield, induced)`` on validated 2-D input, ``P`` the parsed
        parameters (:func:`parse_rule_params`): the acceptance function, the yield
        ``q h`` and the induced distribution.
    """

    required: tuple
    optional: dict
    law: Callable


#: rule -> :class:`RuleLaw`: the one table of the lossy rules of the theory (Zhou et al.
#: 2026, arXiv:2607.26627, §3.1-3.2, App. A, F, G); :data:`RULES`, :data:`RULE_PARAMS` and
#: the simulator's rule registry (``specbound.sim.lossy.RULE_SPECS``) derive from it
RULE_LAWS: dict[str, RuleLaw] = {
    "lossless": RuleLaw((), {}, _law_lossless),
    "interpolation": RuleLaw(("lam",), {}, _law_interpolation),
    "fuzzy": RuleLaw(("threshold",), {"divergence": "tv"}, _law_fuzzy),
    "lenience": RuleLaw(("ell",), {}, _law_lenience),
    "judge": RuleLaw(("judge",), {}, _law_judge),
    "truncation": RuleLaw(("allowed",), {"on_reject": "renormalize"}, _law_truncation),
    "ceiling": RuleLaw(("ell",), {"completion": "residual"}, _law_ceiling),
    "truncation_ceiling": RuleLaw(("allowed", "ell"), {"completion": "residual"},
                                  _law_ceiling),
    "contrastive": RuleLaw(("beta",), {"alpha": 0.1}, _law_contrastive),
}

#: rule -> (required parameter names, optional parameters with their defaults)
RULE_PARAMS: dict[str, tuple[tuple[str, ...], dict[str, object]]] = {
    name: (r.required, dict(r.optional)) for name, r in RULE_LAWS.items()}

#: the lossy rule names (the one list; ``specbound.sim`` derives its lists from it)
RULES: tuple[str, ...] = tuple(RULE_LAWS)
if set().union(*(set(r.required) | set(r.optional) for r in RULE_LAWS.values())) - set(
        _PARAM_PARSERS):  # pragma: no cover - a parameter without a parser
    raise ImportError("specbound.theory.lossy: every rule parameter needs a parser")



# ---------------------------------------------------------------------------------------------
# public API: rules
# ---------------------------------------------------------------------------------------------
def induced_distribution(p, q, rule: str, *, normalize: bool = False, **params):
    r"""Law of the token emitted by one step of a (lossy) verification rule.

    Parameters
    ----------
    p, q : array_like
        Target and draft: probability vectors (1-D) or batches (2-D, rows are contexts; a 1-D
        argument is broadcast against a 2-D one).  Rows must sum to 1 within the tolerance of
        :func:`specbound._validation.sum_atol` (``1e-9`` for float64); zeros are allowed
        everywhere.
    rule : str
        One of ``RULES`` (see the module docstring for the table of rules and parameters).
    **params
        The rule's parameters, by name: ``lam``, ``threshold``, ``divergence``, ``ell``,
        ``judge``, ``allowed``, ``on_reject``, ``completion``, ``beta``, ``alpha``.  Missing
        required parameters and parameters the rule does not take raise ``ValueError``.
    normalize : bool, default False
        Rescale the rows of ``p`` and ``q`` to sum to 1 instead of refusing rows whose sum is
        off by more than the tolerance.

    Returns
    -------
    numpy.ndarray
        The induced distribution, same shape as the broadcast input (1-D for one pair).

    Notes
    -----
    Closed forms (Zhou et al. 2026, arXiv:2607.26627; equation numbers are theirs):

    * lossless: ``p`` (computed through the generic SD formula, so it equals ``p`` up to
      rounding);
    * interpolation: ``lam p + (1-lam) q`` (Eq. 8; App. A.1 for DIVERSED, lam per context);
    * fuzzy: ``g q + (1-g) p`` with ``g = 1[D(p,q) <= threshold]`` (App. A.2);
    * lenience (Eq. 10, App. A.3): ``q + Δ_ℓ (p-q)`` where ``q <= p``; ``q`` where
      ``p < q <= p/ℓ``; ``p/ℓ`` where ``q > p/ℓ``, with
      ``Δ_ℓ = [1 - Σ min(q, p/ℓ)] / TV(p,q)`` (:func:`lenience_delta`);
    * judge (Eq. 12, App. F.1): ``q + Δ_j (p-q)`` where ``q <= p``; ``p + (q-p) j`` where
      ``q > p``, with ``Δ_j = Σ (q-p)_+ (1-j) / Σ (p-q)_+`` (:func:`judge_delta`);
    * truncation: ``q 1_A / Z_Θ(q)`` (Eq. 13, ``on_reject="renormalize"``) or
      ``q 1_A + (1 - Z_Θ(q)) p_Θ`` (``on_reject="target"``);
    * ceiling / truncation_ceiling: the yield rows of Table 1 ("ceiling only") and Table 5
      (rows 4 and 5), completed by ``completion`` (default ``"residual"``, the reading the
      paper's numbers support; module docstring).  With ``completion="residual"`` the
      ceiling rule equals lenience, because ``(p - min(q, p/ℓ))_+ = (p - q)_+``;
    * contrastive: ``nu`` of the module docstring.

    When TV(p, q) = 0 the Δ's are 0/0: they are defined as 0 (the limit), and the induced law
    is ``p``.  Zero-yield rows of the "renormalize" completions fall back to the other
    completion (module docstring).
    """
    rule, p2, q2, batched, P = _prepare(p, q, rule, params, normalize)
    _, _, induced = _law(rule, p2, q2, P)
    return _out_vec(induced, batched)


def acceptance_function(p, q, rule: str, *, normalize: bool = False, **params):
    r"""The rule's acceptance probability ``h(x)`` of a drafted token ``x``.

    Same arguments as :func:`induced_distribution`.  ``h(x) = min(1, p/q)`` (lossless),
    ``min(1, nu/q)`` (interpolation, contrastive), the gate ``g`` for every token (fuzzy),
    ``min(1, p/(ℓ q))`` (lenience, ceiling; Eq. 9), ``1`` if ``q <= p`` else
    ``p/q + (1-p/q) j`` (judge; Eq. 11), ``1[x ∈ A]`` (truncation; Definition 1), ``1`` on
    ``A`` and ``min(1, p/(ℓ q))`` off ``A`` (truncation_ceiling).  Where ``q(x) = 0`` the
    ratio rules return ``h = 1`` (such tokens are never drafted).

    Returns
    -------
    numpy.ndarray
        ``h``, same shape as the broadcast input, values in [0, 1].
    """
    rule, p2, q2, batched, P = _prepare(p, q, rule, params, normalize)
    h, _, _ = _law(rule, p2, q2, P)
    return _out_vec(h, batched)


def acceptance_rate(p, q, rule: str, *, normalize: bool = False, **params):
    r"""Probability that a draft ``X ~ q`` is accepted: ``Σ_x q(x) h(x)``.

    Same arguments as :func:`induced_distribution`.  Closed forms: ``1 - TV`` (lossless),
    ``1 - lam TV`` (interpolation), ``g`` (fuzzy), ``Σ min(q, p/ℓ)`` (lenience, ceiling;
    Zhou et al. 2026, §3), ``Σ min(p, q) + Σ (q-p)_+ j`` (judge), ``Z_Θ(q)`` (truncation),
    ``Σ_A q + Σ_{not A} min(q, p/ℓ)`` (truncation_ceiling), ``Σ min(q, nu)`` (contrastive).
    For the "renormalize" completions this is the probability that the *first* draft is
    accepted (the yield mass).  It is non-increasing in ``ell`` and in ``lam``.

    Returns
    -------
    float or numpy.ndarray
        A float for one pair, one value per row for a batch.
    """
    rule, p2, q2, batched, P = _prepare(p, q, rule, params, normalize)
    if rule == "fuzzy":  # exactly the gate (Σ g q would carry the rounding of Σ q)
        acc = _fuzzy_gate(p2, q2, P["threshold"], P["divergence"])
    else:
        _, y, _ = _law(rule, p2, q2, P)
        acc = np.minimum(y.sum(axis=1), 1.0)
    return squeeze_out(acc, batched)


def lenience_delta(p, q, ell, *, normalize: bool = False):
    r"""Interpolation strength of lenience, ``Δ_ℓ`` (Zhou et al. 2026, Eq. 10, App. A.3).

    ``Δ_ℓ = (½Σ|q - p/ℓ| + ½ - 1/(2ℓ)) / (½Σ|q - p|) = [1 - Σ min(q, p/ℓ)] / TV(p, q)``,
    computed as ``Σ (q - p/ℓ)_+ / Σ (p - q)_+``; it lies in [0, 1] (exactly: the quotient is
    clipped, since rounding can push it an ulp outside).  When ``TV(p, q) = 0`` it is 0/0 and
    is defined as 0 (then the induced law is ``p`` whatever the value).  ``ell`` is a real
    number in (0, 1] or one value per row; ``normalize`` as in :func:`induced_distribution`.

    Returns a float for one pair, an array for a batch.
    """
    p2, q2, batched = as_pair(p, q, normalize=normalize)
    ell = as_real_per_row(ell, "ell", p2.shape[0], low=0.0, high=1.0, low_open=True)[:, None]
    return squeeze_out(_lenience_delta_rows(p2, q2, ell), batched)


def judge_delta(p, q, judge, *, normalize: bool = False):
    r"""Interpolation strength of judge-based relaxation, ``Δ_j`` (Zhou et al. 2026, Eq. 12,
    App. F.1).

    ``Δ_j = Σ (q - p)_+ (1 - j) / Σ (p - q)_+`` (0 when ``p = q``), in [0, 1] exactly (clipped
    against rounding).  Returns a float for one pair, an array for a batch.
    """
    p2, q2, batched = as_pair(p, q, normalize=normalize)
    j = as_bool_mask(judge, "judge", p2.shape)
    return squeeze_out(_judge_delta_rows(p2, q2, j), batched)



# ---------------------------------------------------------------------------------------------
# distortion
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Distortion:
    """Distortion of an induced law against the target ``p`` (and ``p_Θ``).

    Attributes (floats for one pair, arrays for a batch)
    ----------------------------------------------------
    tv : TV(induced, p) = ½ Σ |induced - p|.
    kl : KL(induced ‖ p) in nats (``inf`` if induced puts mass where p = 0).
    reverse_kl : KL(p ‖ induced) in nats (``inf`` if p puts mass where induced = 0).
    overshoot_mass : mass moved into the overshoot region O (see :func:`distortion`).
    tv_truncated, kl_truncated, reverse_kl_truncated, overshoot_mass_truncated :
        the same against ``p_Θ``; None when no ``allowed`` set was given.
    """

    tv: float | np.ndarray
    kl: float | np.ndarray
    reverse_kl: float | np.ndarray
    overshoot_mass: float | np.ndarray
    tv_truncated: float | np.ndarray | None = None
    kl_truncated: float | np.ndarray | None = None
    reverse_kl_truncated: float | np.ndarray | None = None
    overshoot_mass_truncated: float | np.ndarray | None = None


def _distortion_rows(d, ref, q):
    region = (q > ref) if q is not None else (d > ref)
    over = np.where(region, _pos(d - ref), 0.0).sum(axis=1)
    return tv_rows(d, ref), kl_rows(d, ref), kl_rows(ref, d), over


def distortion(induced, p, allowed=None, q=None, *, normalize: bool = False) -> Distortion:
    r"""TV, KL both ways and overshoot mass of an induced law against ``p`` and ``p_Θ``.

    Parameters
    ----------
    induced : array_like
        The law a rule induces (e.g. :func:`induced_distribution`), 1-D or 2-D.
    p : array_like
        The target, same shape (broadcast like ``as_pair``).
    allowed : array_like of bool, optional
        If given, the same measures are also computed against ``p_Θ`` (Theorem 1's matched
        truncation-sampling baseline; Zhou et al. 2026, Theorem 1).
    q : array_like, optional
        The draft.  It defines the overshoot region ``O = {x : q(x) > ref(x)}`` (the draft's
        overestimation region of Zhou et al. 2026, §3.1, ``ref`` = ``p`` or ``p_Θ``), and
        ``overshoot_mass = Σ_{x∈O} (induced(x) - ref(x))_+`` is the excess mass the rule lets
        through where the draft overshoots.  Without ``q`` the region is
        ``{x : induced(x) > ref(x)}`` and the overshoot mass equals the TV distance.
    normalize : bool, default False
        Rescale the rows of ``induced``, ``p`` and ``q`` to sum to 1.

    Returns
    -------
    Distortion
        Floats for one pair, arrays for a batch.  KLs are ``inf`` (no warning) when the
        first argument is not absolutely continuous w.r.t. the second.
    """
    d2, p2, batched = as_pair(induced, p, normalize=normalize, names=("induced", "p"))
    q2 = None
    if q is not None:
        q2 = np.atleast_2d(as_prob(q, "q", normalize=normalize))
        if q2.shape[1] != p2.shape[1] or q2.shape[0] not in (1, p2.shape[0]):
            raise ValueError(f"q: shape mismatch with p: {q2.shape} and {p2.shape}")
        q2 = np.broadcast_to(q2, p2.shape)
        batched = batched or np.ndim(q) == 2
    vals = _distortion_rows(d2, p2, q2)
    out = [squeeze_out(v, batched) for v in vals]
    if allowed is not None:
        A = as_bool_mask(allowed, "allowed", p2.shape)
        pt, _ = truncated_rows(p2, A)
        out += [squeeze_out(v, batched) for v in _distortion_rows(d2, pt, q2)]
    return Distortion(*out)
