r"""Lossy verification: the distributions lossy rules induce, their acceptance, their distortion.

Closed forms for the rules unified by seed 004 ("Revisiting lossy verification in speculative
decoding", §3, App. A, E, F, G), with the equations that the extracted text of the seed lost
restored in ``MATH.md`` §3.  Every rule is one step of speculative decoding (SD) in one
context: a draft ``X ~ q`` is accepted with probability ``h(X)``; a rejected draft is replaced
by a *correction* token.  For rules verified against a reference ``\nu`` the law of the
emitted token ``Y`` is the generic SD formula

.. math::  P(Y=x) = q(x)h(x) + \Big[1 - \sum_v q(v)h(v)\Big]\, r(x),
           \qquad r = (\nu - q)_+ / \textstyle\sum (\nu - q)_+ ,

with the convention that the bracket times ``r`` is 0 when the rejection mass is 0 (then
``r`` is not needed; this is how ``p = q`` -- TV = 0, Δ undefined -- is handled: the
induced law is then ``q = p``).

Rules and their parameters (names are a contract shared with ``specbound.sim.sample_induced``)
-----------------------------------------------------------------------------------------------

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
``"ceiling"`` -- ``ell``: float in (0, 1]; ``completion``: "renormalize" (default) | "residual".
    Yield y = min(q, p/ell) (Table 1 "ceiling only", Table 5 row 4); h = min(1, p/(ell q)).
    "renormalize": a rejected draft is redrawn from q until accepted -> y / Σ y.
    "residual": a rejection emits a sample of (p-y)+ normalized
    -> y + (1 - Σ y) (p-y)+ / Σ (p-y)+ (this equals lenience, as (p-y)+ = (p-q)+).
``"truncation_ceiling"`` -- ``allowed``, ``ell``, ``completion`` (as above).
    Yield y = q on A, min(q, p/ell) off A (Table 5 row 5); h = 1 on A, min(1, p/(ell q))
    off A; the two completions as for "ceiling".
``"contrastive"`` -- ``beta``: float >= 0 (contrast strength); ``alpha``: float in [0, 1],
    default 0.1 (plausibility cut).
    Lossless SD against the contrastive law nu (below): h = min(1, nu/q),
    r = (nu-q)+ normalized.  Induced: nu.

``completion`` and ``on_reject`` default to ``"renormalize"`` (the paper's reading of its
yield rows, Eq. 13); the two readings are never mixed within one call.  If the yield has zero
mass (``Z_Θ(q) = 0`` for truncation: the draft puts no mass on ``A``; ``sum y = 0`` for the
ceilings) the redraw loop of "renormalize" never ends: the rule then *falls back to its other
completion*, which at zero yield is its correction law (``p_Θ`` for truncation, ``(p-y)_+``
normalized for the ceilings).  The samplers must do the same.

Contrastive rule (seed 004 Eq. 3, in the form of O'Brien & Lewis 2023, "Contrastive decoding
improves reasoning in large language models", with the plausibility mask of Li et al. 2023,
"Contrastive decoding: open-ended text generation as optimization", ACL): with the head
``H = {x : p(x) >= alpha max p, p(x) > 0}``,
``nu(x) ∝ p(x)^(1+beta) q(x)^(-beta)`` on ``H`` and 0 off ``H`` (logits
``(1+beta) log p - beta log q``, softmax over ``H``).  Zeros: if some ``x`` in ``H`` has
``q(x) = 0`` and ``beta > 0`` the contrast there is infinite and ``nu`` is the limit
``nu ∝ p^(1+beta)`` on ``{x in H : q(x) = 0}``; with ``beta = 0``, ``nu`` is ``p`` restricted to
``H``.  The rule is lossless SD against ``nu``, so the induced law is exactly ``nu``.

Scalar parameters (``ell``, ``threshold``, ``beta``, ``alpha``, like ``lam``) may also be
given per context: an array with one value per row of a batch.

Zeros and conventions: ``acceptance_function`` returns ``h = 1`` where ``q(x) = 0`` for the
ratio rules (such tokens are never drafted, any value gives the same law).  ``p_Θ`` needs
``Z_Θ(p) > 0``: a ``ValueError`` naming ``allowed`` is raised when it is needed and ``A``
carries no target mass.  1-D inputs give 1-D vectors / Python floats; 2-D inputs (rows are
contexts) give 2-D arrays / 1-D arrays.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

from specbound._validation import (
    as_bool_mask,
    as_choice,
    as_int,
    as_pair,
    as_prob,
    as_real,
    squeeze_out,
)

__all__ = [
    "RULES",
    "Distortion",
    "acceptance_function",
    "acceptance_rate",
    "distortion",
    "eta_allowed",
    "induced_distribution",
    "judge_delta",
    "kl_truncation_sd",
    "kl_truncation_tree",
    "lenience_delta",
    "min_p_allowed",
    "tree_acceptance",
    "tree_block_efficiency",
    "tree_emitted_distribution",
    "truncated_target",
    "truncation_efficiency_delta",
]

#: rule -> (required parameter names, optional parameters with their defaults)
RULES: dict[str, tuple[tuple[str, ...], dict[str, object]]] = {
    "lossless": ((), {}),
    "interpolation": (("lam",), {}),
    "fuzzy": (("threshold",), {"divergence": "tv"}),
    "lenience": (("ell",), {}),
    "judge": (("judge",), {}),
    "truncation": (("allowed",), {"on_reject": "renormalize"}),
    "ceiling": (("ell",), {"completion": "renormalize"}),
    "truncation_ceiling": (("allowed", "ell"), {"completion": "renormalize"}),
    "contrastive": (("beta",), {"alpha": 0.1}),
}

_DIVERGENCES = ("tv", "kl", "js")
_ON_REJECT = ("renormalize", "target")
_COMPLETIONS = ("renormalize", "residual")
_TREE_RULES = ("lossless", "truncation", "speccascade", "typical")


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


def _kl_rows(a, b):
    """KL(a || b) per row in nats; ``inf`` where a > 0 = b; 0 log 0 = 0."""
    out = np.zeros(a.shape[0])
    pos = a > 0
    bad = np.any(pos & (b <= 0), axis=1)
    ok = pos & (b > 0)
    terms = np.zeros_like(a)
    terms[ok] = a[ok] * (np.log(a[ok]) - np.log(b[ok]))
    out[:] = terms.sum(axis=1)
    out[bad] = np.inf
    # rounding can make a KL of (numerically) equal laws a tiny negative number
    return np.maximum(out, 0.0)


def _tv_rows(a, b):
    return 0.5 * np.abs(a - b).sum(axis=1)


def _js_rows(a, b):
    m = 0.5 * (a + b)
    return 0.5 * _kl_rows(a, m) + 0.5 * _kl_rows(b, m)


def _entropy_rows(p):
    terms = np.zeros_like(p)
    pos = p > 0
    terms[pos] = -p[pos] * np.log(p[pos])
    return terms.sum(axis=1)


def _ratio_h(num, q):
    """``min(1, num / q)`` with the convention ``h = 1`` where ``q = 0``."""
    h = np.ones_like(q)
    pos = q > 0
    h[pos] = np.minimum(1.0, num[pos] / q[pos])
    return h


def _truncated_rows(p, allowed, name="allowed"):
    """p_Θ = p 1_A / Z_Θ(p); ValueError naming ``allowed`` if a row has Z_Θ(p) = 0."""
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
# validation of the rule parameters
# ---------------------------------------------------------------------------------------------
def check_rule_params(rule, params):
    """Validate ``rule`` and its ``params`` against :data:`RULES`; return ``(rule, params)``
    with the optional parameters' defaults filled in (shared with ``sim.sample_induced``)."""
    rule = as_choice(rule, "rule", tuple(RULES))
    required, optional = RULES[rule]
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
    if isinstance(lam, bool | np.bool_):
        raise ValueError(f"lam: must be a real number, an array or a callable, got {lam!r}")
    if isinstance(lam, numbers.Real):
        return np.full(m, as_real(lam, "lam", low=0.0, high=1.0))
    try:
        arr = np.asarray(lam, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(
            f"lam: must be a real number, an array or a callable, got {type(lam).__name__}"
        ) from None
    if arr.ndim == 0:
        return np.full(m, as_real(float(arr), "lam", low=0.0, high=1.0))
    if arr.ndim != 1 or arr.shape[0] not in (1, m):
        raise ValueError(f"lam: shape mismatch: expected a scalar or {m} value(s), got {arr.shape}")
    if not np.all(np.isfinite(arr)) or np.any(arr < 0) or np.any(arr > 1):
        raise ValueError("lam: every value must be a finite number in [0, 1]")
    return np.broadcast_to(arr, (m,)).astype(np.float64)


def _per_row(value, name, m, **bounds):
    """A real parameter given once or per context (one value per row): returns shape (m,)."""
    if isinstance(value, bool | np.bool_):
        raise ValueError(f"{name}: must be a real number or an array of them, got {value!r}")
    if isinstance(value, numbers.Real):
        return np.full(m, as_real(value, name, **bounds))
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(
            f"{name}: must be a real number or an array of them, got {type(value).__name__}"
        ) from None
    if arr.ndim == 0:
        return np.full(m, as_real(float(arr), name, **bounds))
    if arr.ndim != 1 or arr.shape[0] not in (1, m):
        raise ValueError(
            f"{name}: shape mismatch: expected a scalar or {m} value(s), got {arr.shape}"
        )
    vals = [as_real(float(v), name, **bounds) for v in arr]
    return np.broadcast_to(np.asarray(vals), (m,)).astype(np.float64)


def _scalar(v, name):
    arr = np.asarray(v)
    if arr.size != 1:
        raise ValueError(f"{name}: the callable must return one number, got shape {arr.shape}")
    v = arr.reshape(-1)[0]
    return v.item() if hasattr(v, "item") else v


def _prepare(p, q, rule, params):
    rule, full = check_rule_params(rule, params)
    p2, q2, batched = as_pair(p, q)
    m = p2.shape[0]
    P = {}
    for name, value in full.items():
        if name == "lam":
            P[name] = _as_lam(value, p2, q2)
        elif name == "ell":
            P[name] = _per_row(value, "ell", m, low=0.0, high=1.0, low_open=True)[:, None]
        elif name == "judge":
            P[name] = as_bool_mask(value, "judge", p2.shape)
        elif name == "allowed":
            P[name] = as_bool_mask(value, "allowed", p2.shape)
        elif name == "threshold":
            P[name] = _per_row(value, "threshold", m, low=0.0)
        elif name == "divergence":
            P[name] = as_choice(value, "divergence", _DIVERGENCES)
        elif name == "on_reject":
            P[name] = as_choice(value, "on_reject", _ON_REJECT)
        elif name == "completion":
            P[name] = as_choice(value, "completion", _COMPLETIONS)
        elif name == "beta":
            P[name] = _per_row(value, "beta", m, low=0.0)
        elif name == "alpha":
            P[name] = _per_row(value, "alpha", m, low=0.0, high=1.0)
        else:  # pragma: no cover - RULES and this dispatch are kept in sync
            raise AssertionError(name)
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


def _contrastive_nu(p, q, beta, alpha):
    nu = np.empty_like(p)
    for i in range(p.shape[0]):
        nu[i] = _contrastive_row(p[i], q[i], beta[i], alpha[i])
    return nu


def _fuzzy_gate(p, q, threshold, divergence):
    if divergence == "tv":
        d = _tv_rows(p, q)
    elif divergence == "kl":
        d = _kl_rows(p, q)
    else:
        d = _js_rows(p, q)
    return (d <= threshold).astype(np.float64)


def _lenience_delta_rows(p, q, ell):
    num = _pos(q - p / ell).sum(axis=1)  # = 1 - sum min(q, p/ell)
    den = _pos(p - q).sum(axis=1)  # = TV(p, q)
    out = np.zeros(p.shape[0])
    ok = den > 0
    out[ok] = num[ok] / den[ok]
    return out


def _judge_delta_rows(p, q, judge):
    num = (_pos(q - p) * (~judge)).sum(axis=1)
    den = _pos(p - q).sum(axis=1)
    out = np.zeros(p.shape[0])
    ok = den > 0
    out[ok] = num[ok] / den[ok]
    return out


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
    """Return (h, yield, induced) for 2-D validated input."""
    if rule == "lossless":
        y = np.minimum(q, p)
        return _ratio_h(p, q), y, _sd_generic(q, y, p)
    if rule == "interpolation":
        lam = P["lam"][:, None]
        nu = lam * p + (1.0 - lam) * q
        y = np.minimum(q, nu)
        return _ratio_h(nu, q), y, _sd_generic(q, y, nu)
    if rule == "contrastive":
        nu = _contrastive_nu(p, q, P["beta"], P["alpha"])
        y = np.minimum(q, nu)
        return _ratio_h(nu, q), y, _sd_generic(q, y, nu)
    if rule == "fuzzy":
        g = _fuzzy_gate(p, q, P["threshold"], P["divergence"])[:, None]
        h = np.broadcast_to(g, q.shape).copy()
        return h, g * q, g * q + (1.0 - g) * p
    if rule == "lenience":
        ell = P["ell"]
        y = np.minimum(q, p / ell)
        delta = _lenience_delta_rows(p, q, ell)[:, None]
        induced = np.where(q <= p, q + delta * (p - q), np.where(q <= p / ell, q, p / ell))
        return _ratio_h(p / ell, q), y, induced
    if rule == "judge":
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
    if rule == "truncation":
        A = P["allowed"]
        y = np.where(A, q, 0.0)
        zq = y.sum(axis=1)
        h = A.astype(np.float64)
        # p_Θ is needed where the rejection mass is (numerically) positive ("target") or where
        # the yield is empty ("renormalize" falls back to p_Θ)
        need = (1.0 - zq > 1e-12) if P["on_reject"] == "target" else (zq <= 0)
        zp = np.where(A, p, 0.0).sum(axis=1)
        if np.any(need & (zp <= 0)):
            _truncated_rows(p[need], A[need])  # raises, naming ``allowed``
        ptheta = np.zeros_like(p)
        ok = zp > 0
        ptheta[ok] = np.where(A[ok], p[ok], 0.0) / zp[ok, None]
        if P["on_reject"] == "target":
            induced = y + np.maximum(1.0 - zq, 0.0)[:, None] * ptheta
        else:
            induced = np.where((zq > 0)[:, None], _safe_div_rows(y, zq), ptheta)
        return h, y, induced
    if rule in ("ceiling", "truncation_ceiling"):
        ell = P["ell"]
        cap = np.minimum(q, p / ell)
        hcap = _ratio_h(p / ell, q)
        if rule == "ceiling":
            y, h = cap, hcap
        else:
            A = P["allowed"]
            y = np.where(A, q, cap)
            h = np.where(A, 1.0, hcap)
        return h, y, _complete(y, p, P["completion"])
    raise AssertionError(rule)  # pragma: no cover


# ---------------------------------------------------------------------------------------------
# public API: rules
# ---------------------------------------------------------------------------------------------
def induced_distribution(p, q, rule: str, **params):
    r"""Law of the token emitted by one step of a (lossy) verification rule.

    Parameters
    ----------
    p, q : array_like
        Target and draft: probability vectors (1-D) or batches (2-D, rows are contexts; a 1-D
        argument is broadcast against a 2-D one).  Rows must sum to 1 within 1e-9; zeros are
        allowed everywhere.
    rule : str
        One of ``RULES`` (see the module docstring for the table of rules and parameters).
    **params
        The rule's parameters, by name: ``lam``, ``threshold``, ``divergence``, ``ell``,
        ``judge``, ``allowed``, ``on_reject``, ``completion``, ``beta``, ``alpha``.  Missing
        required parameters and parameters the rule does not take raise ``ValueError``.

    Returns
    -------
    numpy.ndarray
        The induced distribution, same shape as the broadcast input (1-D for one pair).

    Notes
    -----
    Closed forms (seed 004; equations restored in ``MATH.md`` §3):

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
      (rows 4 and 5), completed by ``completion``.  With ``completion="residual"`` the ceiling
      rule equals lenience, because ``(p - min(q, p/ℓ))_+ = (p - q)_+``;
    * contrastive: ``nu`` of the module docstring.

    When TV(p, q) = 0 the Δ's are 0/0: they are defined as 0 (the limit), and the induced law
    is ``p``.  Zero-yield rows of the "renormalize" completions fall back to the other
    completion (module docstring).
    """
    rule, p2, q2, batched, P = _prepare(p, q, rule, params)
    _, _, induced = _law(rule, p2, q2, P)
    return _out_vec(induced, batched)


def acceptance_function(p, q, rule: str, **params):
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
    rule, p2, q2, batched, P = _prepare(p, q, rule, params)
    h, _, _ = _law(rule, p2, q2, P)
    return _out_vec(h, batched)


def acceptance_rate(p, q, rule: str, **params):
    r"""Probability that a draft ``X ~ q`` is accepted: ``Σ_x q(x) h(x)``.

    Same arguments as :func:`induced_distribution`.  Closed forms: ``1 - TV`` (lossless),
    ``1 - lam TV`` (interpolation), ``g`` (fuzzy), ``Σ min(q, p/ℓ)`` (lenience, ceiling;
    ``MATH.md`` §3), ``Σ min(p, q) + Σ (q-p)_+ j`` (judge), ``Z_Θ(q)`` (truncation),
    ``Σ_A q + Σ_{not A} min(q, p/ℓ)`` (truncation_ceiling), ``Σ min(q, nu)`` (contrastive).
    For the "renormalize" completions this is the probability that the *first* draft is
    accepted (the yield mass).  It is non-increasing in ``ell`` and in ``lam``.

    Returns
    -------
    float or numpy.ndarray
        A float for one pair, one value per row for a batch.
    """
    rule, p2, q2, batched, P = _prepare(p, q, rule, params)
    if rule == "fuzzy":  # exactly the gate (Σ g q would carry the rounding of Σ q)
        acc = _fuzzy_gate(p2, q2, P["threshold"], P["divergence"])
    else:
        _, y, _ = _law(rule, p2, q2, P)
        acc = np.minimum(y.sum(axis=1), 1.0)
    return squeeze_out(acc, batched)


def lenience_delta(p, q, ell):
    r"""Interpolation strength of lenience, ``Δ_ℓ`` (seed 004 Eq. 10, App. A.3).

    ``Δ_ℓ = (½Σ|q - p/ℓ| + ½ - 1/(2ℓ)) / (½Σ|q - p|) = [1 - Σ min(q, p/ℓ)] / TV(p, q)``,
    computed as ``Σ (q - p/ℓ)_+ / Σ (p - q)_+``; it lies in [0, 1].  When ``TV(p, q) = 0``
    it is 0/0 and is defined as 0 (then the induced law is ``p`` whatever the value).

    Returns a float for one pair, an array for a batch.
    """
    p2, q2, batched = as_pair(p, q)
    ell = _per_row(ell, "ell", p2.shape[0], low=0.0, high=1.0, low_open=True)[:, None]
    return squeeze_out(_lenience_delta_rows(p2, q2, ell), batched)


def judge_delta(p, q, judge):
    r"""Interpolation strength of judge-based relaxation, ``Δ_j`` (seed 004 Eq. 12, App. F.1).

    ``Δ_j = Σ (q - p)_+ (1 - j) / Σ (p - q)_+`` (0 when ``p = q``).  Returns a float for one
    pair, an array for a batch.
    """
    p2, q2, batched = as_pair(p, q)
    j = as_bool_mask(judge, "judge", p2.shape)
    return squeeze_out(_judge_delta_rows(p2, q2, j), batched)


# ---------------------------------------------------------------------------------------------
# truncation sets and the truncated target (seed 004 §2.3, Eqs. 4-6)
# ---------------------------------------------------------------------------------------------
def min_p_allowed(p, p_base):
    r"""Min-p allowed set ``A = {v : p(v) >= p_base · max_u p(u)}`` (seed 004 Eq. 5).

    Parameters
    ----------
    p : array_like
        Target distribution(s), 1-D or 2-D (rows are contexts).
    p_base : float
        In [0, 1] (the paper uses (0, 1); 0 keeps every token, 1 keeps the argmax ties).

    Returns
    -------
    numpy.ndarray of bool
        Same shape as ``p``.  Never empty (the argmax is always kept); with ``p_base > 0``
        every kept token has ``p > 0``.
    """
    pa = as_prob(p, "p")
    p_base = as_real(p_base, "p_base", low=0.0, high=1.0)
    return pa >= p_base * pa.max(axis=-1, keepdims=True)


def eta_allowed(p, epsilon):
    r"""η-sampling allowed set ``A = {v : p(v) > η}``, ``η = min(ε, √ε · e^{-H(p)})``.

    Hewitt et al. (2022), seed 004 Eq. 6 with ``δ = √ε``; ``H`` is the Shannon entropy in nats
    (``0 log 0 = 0``).

    Parameters
    ----------
    p : array_like
        Target distribution(s), 1-D or 2-D.
    epsilon : float
        In (0, 1).

    Returns
    -------
    numpy.ndarray of bool
        Same shape as ``p``.  The set is never empty: ``max p >= e^{-H(p)} > √ε e^{-H(p)} >= η``
        for ``ε < 1``; as a guard against rounding, a row that would still come out empty keeps
        its argmax.
    """
    pa = as_prob(p, "p")
    epsilon = as_real(epsilon, "epsilon", low=0.0, high=1.0, low_open=True, high_open=True)
    p2 = np.atleast_2d(pa)
    eta = np.minimum(epsilon, np.sqrt(epsilon) * np.exp(-_entropy_rows(p2)))
    A = p2 > eta[:, None]
    empty = ~np.any(A, axis=1)
    if np.any(empty):  # pragma: no cover - impossible in exact arithmetic (see docstring)
        A[empty, np.argmax(p2[empty], axis=1)] = True
    return A if pa.ndim == 2 else A[0]


def truncated_target(p, allowed):
    r"""Truncated target ``p_Θ = p 1_A / Z_Θ(p)``, ``Z_Θ(p) = Σ_{v∈A} p(v)`` (seed 004 Eq. 4).

    Raises ``ValueError`` naming ``allowed`` if ``A`` carries no target mass in some row.
    ``allowed`` is a bool array of the shape of ``p`` (or broadcastable to it).
    """
    pa = as_prob(p, "p")
    p2 = np.atleast_2d(pa)
    A = as_bool_mask(allowed, "allowed", p2.shape)
    pt, _ = _truncated_rows(p2, A)
    return pt if pa.ndim == 2 else pt[0]


def _pair_allowed(p, q, allowed):
    p2, q2, batched = as_pair(p, q)
    A = as_bool_mask(allowed, "allowed", p2.shape)
    return p2, q2, A, batched


def truncation_efficiency_delta(p, q, allowed):
    r"""Gain and loss terms of Lemma 1 (seed 004 §5.1, proof in App. G.1).

    With ``z = Z_Θ(p)``, truncating the target changes the single-token acceptance by

    .. math::  Σ \min(p_Θ, q) - Σ \min(p, q)
               = \underbrace{Σ_{x∈A} \min\{(q - p)_+, (1/z - 1) p\}}_{\text{gain}}
               - \underbrace{Σ_{x∉A} \min(p, q)}_{\text{loss}} .

    Parameters
    ----------
    p, q : array_like
        Target and draft (1-D or 2-D).
    allowed : array_like of bool
        The allowed set ``A_Θ``; it must carry target mass (``z > 0``).

    Returns
    -------
    (gain, loss)
        Two floats for one pair, two arrays for a batch; both are >= 0 and
        ``gain - loss`` is the net change ΔBE of the single-token acceptance.
    """
    p2, q2, A, batched = _pair_allowed(p, q, allowed)
    _, z = _truncated_rows(p2, A)
    # z <= 1 up to the 1e-9 input tolerance: clip so that rounding cannot make the gain < 0
    factor = np.maximum(1.0 / z - 1.0, 0.0)[:, None]
    gain = np.where(A, np.minimum(_pos(q2 - p2), factor * p2), 0.0).sum(axis=1)
    loss = np.where(A, 0.0, np.minimum(p2, q2)).sum(axis=1)
    return squeeze_out(gain, batched), squeeze_out(loss, batched)


def kl_truncation_sd(p, q, allowed):
    r"""``KL_SD = KL(q_Θ ‖ p_Θ)`` of Theorem 1 (seed 004 §5.2, App. G.4, statement 1).

    ``q_Θ = q 1_A / Z_Θ(q)`` is what truncation-based verification emits under standard SD
    (Eq. 13) and ``p_Θ`` what the matched truncation-sampling baseline emits.  It tends to 0
    as ``q → p``.  Zeros: ``inf`` if ``q_Θ`` puts mass where ``p_Θ = 0`` (possible only when
    ``A`` contains tokens with ``p = 0``); if ``Z_Θ(q) = 0`` the rule emits ``p_Θ`` (the
    zero-yield fallback of ``induced_distribution``) and the value is 0.

    Returns a float for one pair, an array for a batch.
    """
    p2, q2, A, batched = _pair_allowed(p, q, allowed)
    pt, _ = _truncated_rows(p2, A)
    y = np.where(A, q2, 0.0)
    zq = y.sum(axis=1)
    qt = np.where((zq > 0)[:, None], _safe_div_rows(y, zq), pt)
    return squeeze_out(_kl_rows(qt, pt), batched)


def _as_candidates(candidates, n, m):
    arr = np.asarray(candidates)
    if arr.ndim not in (1, 2) or arr.size == 0:
        raise ValueError(f"candidates: must be a non-empty 1-D or 2-D array, got {arr.shape}")
    if arr.dtype.kind not in "iu":
        integral = (
            arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr))
        )
        if not integral:
            raise ValueError(f"candidates: must be integer token ids, got dtype {arr.dtype}")
    arr = np.atleast_2d(arr).astype(np.int64)
    if arr.shape[0] != m:
        if arr.shape[0] == 1:
            arr = np.broadcast_to(arr, (m, arr.shape[1]))
        else:
            raise ValueError(f"candidates: shape mismatch: {arr.shape[0]} rows, p has {m}")
    if np.any(arr < 0) or np.any(arr >= n):
        raise ValueError(f"candidates: token ids must lie in [0, {n})")
    srt = np.sort(arr, axis=1)
    if np.any(srt[:, 1:] == srt[:, :-1]):
        raise ValueError("candidates: token ids must be distinct within a position")
    return np.ascontiguousarray(arr)


def _tree_inputs(p, candidates, allowed):
    pa = as_prob(p, "p")
    p2 = np.atleast_2d(pa)
    A = as_bool_mask(allowed, "allowed", p2.shape)
    C = _as_candidates(candidates, p2.shape[1], p2.shape[0])
    pt, _ = _truncated_rows(p2, A)
    inA = np.take_along_axis(A, C, axis=1)
    has = np.any(inA, axis=1)
    first = C[np.arange(C.shape[0]), np.argmax(inA, axis=1)]
    return pa.ndim == 2, p2, A, C, pt, has, first


def kl_truncation_tree(p, candidates, allowed):
    r"""``KL_EAGLE = -log p_Θ(x)`` of Theorem 1 (seed 004 §5.2, App. G.2-G.4, statement 2).

    Under tree verification with greedy drafting (EAGLE-3) and a truncation-based rule
    (SpecCascade, typical acceptance), the candidates of a position are examined in order and
    the first one in ``A`` is accepted surely (Lemma 2(ii)), so the position emits the point
    mass ``δ_x`` at that candidate ``x``; its divergence from the matched baseline ``p_Θ`` is
    ``KL(δ_x ‖ p_Θ) = -log p_Θ(x)``.  It is > 0 unless ``p_Θ`` is a point mass, and it does
    not vanish as ``q → p``.

    Parameters
    ----------
    p : array_like
        Target distribution (1-D) or one per position/context (2-D).
    candidates : array_like of int
        Ordered, distinct candidate token ids (e.g. top-D of ``q``), shape ``(D,)`` or
        ``(rows, D)``.
    allowed : array_like of bool
        The allowed set ``A_Θ`` (must carry target mass).

    Returns
    -------
    float or numpy.ndarray
        ``-log p_Θ(x)``; ``inf`` if ``x ∈ A`` has ``p(x) = 0`` (only if ``A`` contains such
        tokens).  If no candidate lies in ``A`` every candidate is rejected and the path ends
        with a bonus token drawn from ``p_Θ`` (App. G.2), so the position emits ``p_Θ`` and the
        divergence is 0.
    """
    batched, p2, A, C, pt, has, first = _tree_inputs(p, candidates, allowed)
    ptx = pt[np.arange(p2.shape[0]), first]
    out = np.zeros(p2.shape[0])
    with np.errstate(divide="ignore"):
        out[has] = -np.log(ptx[has])
    return squeeze_out(np.maximum(out, 0.0), batched)


def tree_emitted_distribution(p, candidates, allowed, rule: str):
    r"""Per-position law emitted by tree verification against ``p_Θ`` (seed 004 Lemma 2).

    ``rule="lossless"`` (truncation sampling + SD, Eq. 67: candidate ``x^(i)`` accepted w.p.
    ``p_Θ(x^(i))`` under zero-and-renormalize) emits ``p_Θ`` exactly (Lemma 2(i)).
    ``rule="truncation"`` (aliases ``"speccascade"``, Eq. 68, and ``"typical"``, Eq. 69, which
    the paper reads as the indicator of Definition 1: in-set candidates are accepted with
    probability one) emits the point mass at the first candidate in ``A``, or ``p_Θ`` (the
    bonus token) when no candidate lies in ``A``.  Same arguments as
    :func:`kl_truncation_tree`; returns an array of the shape of ``p``.
    """
    rule = as_choice(rule, "rule", _TREE_RULES)
    batched, p2, A, C, pt, has, first = _tree_inputs(p, candidates, allowed)
    if rule == "lossless":
        out = pt
    else:
        out = pt.copy()
        rows = np.flatnonzero(has)
        out[rows] = 0.0
        out[rows, first[rows]] = 1.0
    return out if batched else out[0]


def tree_acceptance(p, candidates, allowed, rule: str):
    r"""Per-position acceptance ``a(C)`` of tree verification (seed 004 Lemma 2, Eqs. 70-71).

    ``a^lossless(C) = p_Θ(C) = Σ_{x∈C} p_Θ(x)``; ``a^truncation(C) = 1[C ∩ A ≠ ∅]`` (rules
    ``"truncation"``, ``"speccascade"``, ``"typical"``).  Corollary 1:
    ``a^lossless <= a^truncation``, with equality iff ``p_Θ(C) ∈ {0, 1}``.  Same arguments
    as :func:`kl_truncation_tree`.  Returns a float for 1-D ``p``, an array for 2-D.
    """
    rule = as_choice(rule, "rule", _TREE_RULES)
    batched, p2, A, C, pt, has, first = _tree_inputs(p, candidates, allowed)
    if rule == "lossless":
        a = np.minimum(np.take_along_axis(pt, C, axis=1).sum(axis=1), 1.0)
    else:
        a = has.astype(np.float64)
    return squeeze_out(a, batched)


def tree_block_efficiency(p, candidates, allowed, rule: str, L=None, bonus: bool = False):
    r"""Expected accepted path length of tree verification (seed 004 Eq. 73, Prop. 1).

    The walk descends one position per accepted candidate and stops at the first position
    where every candidate is rejected, so with per-position acceptances ``a_1, ..., a_L``
    (:func:`tree_acceptance`) the expected number of accepted drafted tokens is

    .. math::  \mathrm{BE} = Σ_{k=1}^{L} Π_{i=1}^{k} a_i

    (plus 1 with ``bonus=True``, counting the bonus token as ``block_efficiency`` does).  This
    assumes that the position-``k`` law, candidates and allowed set do not depend on which
    candidate was accepted before (a path-independent tree, as in the paper's Eq. 73).

    Parameters
    ----------
    p : array_like
        1-D: the law of every position (i.i.d. positions; then ``L`` is required).  2-D: row
        ``k`` is the law at depth ``k+1`` of the path (then ``L`` must be None or the number of
        rows).
    candidates, allowed
        As in :func:`kl_truncation_tree` (per row for 2-D ``p``).
    rule : str
        ``"lossless"`` or ``"truncation"`` (aliases ``"speccascade"``, ``"typical"``).
    L : int, optional
        Depth for 1-D ``p``.
    bonus : bool
        Add the bonus token (seed 004 App. G.2 excludes it: default False).

    Returns
    -------
    float
        Proposition 1: the value for ``"truncation"`` is >= the value for ``"lossless"``.
    """
    rule = as_choice(rule, "rule", _TREE_RULES)
    pa = as_prob(p, "p")
    if not isinstance(bonus, bool | np.bool_):
        raise ValueError(f"bonus: must be a bool, got {bonus!r}")
    a = np.atleast_1d(tree_acceptance(pa, candidates, allowed, rule))
    if pa.ndim == 1:
        if L is None:
            raise ValueError("L: required when p is 1-D (i.i.d. positions)")
        L = as_int(L, "L", min_value=1)
        a = np.full(L, a[0])
    elif L is not None:
        L = as_int(L, "L", min_value=1)
        if L != pa.shape[0]:
            raise ValueError(f"L: must equal the number of rows of p ({pa.shape[0]}), got {L}")
    be = float(np.cumprod(a).sum())
    return be + 1.0 if bonus else be


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
    return _tv_rows(d, ref), _kl_rows(d, ref), _kl_rows(ref, d), over


def distortion(induced, p, allowed=None, q=None) -> Distortion:
    r"""TV, KL both ways and overshoot mass of an induced law against ``p`` and ``p_Θ``.

    Parameters
    ----------
    induced : array_like
        The law a rule induces (e.g. :func:`induced_distribution`), 1-D or 2-D.
    p : array_like
        The target, same shape (broadcast like ``as_pair``).
    allowed : array_like of bool, optional
        If given, the same measures are also computed against ``p_Θ`` (Theorem 1's matched
        truncation-sampling baseline).
    q : array_like, optional
        The draft.  It defines the overshoot region ``O = {x : q(x) > ref(x)}`` (the draft's
        overestimation region of seed 004 §3.1, ``ref`` = ``p`` or ``p_Θ``), and
        ``overshoot_mass = Σ_{x∈O} (induced(x) - ref(x))_+`` is the excess mass the rule lets
        through where the draft overshoots.  Without ``q`` the region is
        ``{x : induced(x) > ref(x)}`` and the overshoot mass equals the TV distance.

    Returns
    -------
    Distortion
        Floats for one pair, arrays for a batch.  KLs are ``inf`` (no warning) when the
        first argument is not absolutely continuous w.r.t. the second.
    """
    d2, p2, batched = as_pair(induced, p, names=("induced", "p"))
    q2 = None
    if q is not None:
        q2 = np.atleast_2d(as_prob(q, "q"))
        if q2.shape[1] != p2.shape[1] or q2.shape[0] not in (1, p2.shape[0]):
            raise ValueError(f"q: shape mismatch with p: {q2.shape} and {p2.shape}")
        q2 = np.broadcast_to(q2, p2.shape)
        batched = batched or np.ndim(q) == 2
    vals = _distortion_rows(d2, p2, q2)
    out = [squeeze_out(v, batched) for v in vals]
    if allowed is not None:
        A = as_bool_mask(allowed, "allowed", p2.shape)
        pt, _ = _truncated_rows(p2, A)
        out += [squeeze_out(v, batched) for v in _distortion_rows(d2, pt, q2)]
    return Distortion(*out)
