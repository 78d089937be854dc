r"""Truncation sets and tree verification: Lemma 1, Theorem 1 and Proposition 1 of Zhou et al.
(2026), "Revisiting lossy verification in speculative decoding", arXiv:2607.26627 (§2.3, §5,
App. G; equation numbers below are theirs).

Truncation sets (§2.3, Eqs. 4-6): the min-p set ``A = {v : p(v) >= p_base max p}``
(:func:`min_p_allowed`; SpecCascade) and the η-sampling set ``A = {v : p(v) > η}`` (Hewitt et
al. 2022; :func:`eta_allowed`; Medusa typical acceptance); the truncated target
``p_Θ = p 1_A / Z_Θ(p)`` (:func:`truncated_target`).

Tree verification with greedy drafting (App. G, EAGLE-3): each position has ordered, distinct
candidates ``x^(1), ..., x^(D)`` examined in order against ``p_Θ``.  The rules (:data:`TREE_RULES`)
are ``"lossless"`` (truncation sampling + SD, Eq. 67) and ``"truncation"`` (the indicator
rule of Definition 1), with the aliases ``"speccascade"`` (Eq. 68) and ``"typical"``
(Eq. 69), which differ only in the allowed set the caller passes.

Argument order (the same as the lossy rules of :mod:`specbound.theory.lossy` and the
simulator ``specbound.sim.simulate_tree_verification``): the target, what was drafted
(``candidates`` here, ``q`` in the simulator), the ``rule``, then keyword arguments
(``allowed``, ...).

Every function taking distributions accepts ``normalize=True`` (rescale rows instead of
refusing sums off 1; default tolerance :func:`specbound._validation.sum_atol`).  1-D inputs give
Python floats / 1-D arrays; 2-D inputs (rows are positions or contexts) give arrays.
"""

from __future__ import annotations

import numpy as np

from specbound._validation import (
    as_bool,
    as_bool_mask,
    as_choice,
    as_int,
    as_int_array,
    as_pair,
    as_prob,
    as_real,
    asarray_named,
    check_alloc,
    squeeze_out,
)
from specbound.theory.divergences import entropy_rows, kl_rows
from specbound.theory.lossy import RULES, truncated_rows

__all__ = [
    "TREE_RULES",
    "TREE_RULE_ALIASES",
    "eta_allowed",
    "kl_truncation_sd",
    "kl_truncation_tree",
    "min_p_allowed",
    "tree_acceptance",
    "tree_block_efficiency",
    "tree_emitted_distribution",
    "truncated_target",
    "truncation_efficiency_delta",
]

#: aliases of the indicator rule: SpecCascade (Eq. 68) and Medusa typical acceptance (Eq. 69)
TREE_RULE_ALIASES = {"speccascade": "truncation", "typical": "truncation"}

#: verification rules of tree verification: two lossy rules of ``RULES`` plus their aliases
TREE_RULES: tuple[str, ...] = (
    *(r for r in RULES if r in ("lossless", "truncation")),
    *TREE_RULE_ALIASES,
)


def _pos(x):
    return np.maximum(x, 0.0)


def _safe_div_rows(num, den):
    out = np.zeros_like(num)
    ok = den > 0
    out[ok] = num[ok] / den[ok, None]
    return out


# ---------------------------------------------------------------------------------------------
# truncation sets and the truncated target (Zhou et al. 2026, §2.3, Eqs. 4-6)
# ---------------------------------------------------------------------------------------------
def min_p_allowed(p, p_base, *, normalize: bool = False):
    r"""Min-p allowed set ``A = {v : p(v) >= p_base · max_u p(u)}`` (Zhou et al. 2026, Eq. 5).

    Parameters
    ----------
    p : array_like
        Target distribution(s), 1-D or 2-D (rows are contexts).
    p_base : float
        In [0, 1] (the paper uses (0, 1); 0 keeps every token, 1 keeps the argmax ties).
    normalize : bool, default False
        Rescale the rows of ``p`` to sum to 1.

    Returns
    -------
    numpy.ndarray of bool
        Same shape as ``p``.  Never empty (the argmax is always kept); with ``p_base > 0``
        every kept token has ``p > 0``.
    """
    pa = as_prob(p, "p", normalize=normalize)
    p_base = as_real(p_base, "p_base", low=0.0, high=1.0)
    return pa >= p_base * pa.max(axis=-1, keepdims=True)


def eta_allowed(p, epsilon, *, normalize: bool = False):
    r"""η-sampling allowed set ``A = {v : p(v) > η}``, ``η = min(ε, √ε · e^{-H(p)})``.

    Hewitt et al. (2022); Zhou et al. (2026), Eq. 6 with ``δ = √ε``; ``H`` is the Shannon
    entropy in nats (``0 log 0 = 0``).

    Parameters
    ----------
    p : array_like
        Target distribution(s), 1-D or 2-D.
    epsilon : float
        In (0, 1).
    normalize : bool, default False
        Rescale the rows of ``p`` to sum to 1.

    Returns
    -------
    numpy.ndarray of bool
        Same shape as ``p``.  The set is never empty: ``max p >= e^{-H(p)} > √ε e^{-H(p)} >= η``
        for ``ε < 1``; as a guard against rounding, a row that would still come out empty keeps
        its argmax.
    """
    pa = as_prob(p, "p", normalize=normalize)
    epsilon = as_real(epsilon, "epsilon", low=0.0, high=1.0, low_open=True, high_open=True)
    p2 = np.atleast_2d(pa)
    eta = np.minimum(epsilon, np.sqrt(epsilon) * np.exp(-entropy_rows(p2)))
    A = p2 > eta[:, None]
    empty = ~np.any(A, axis=1)
    if np.any(empty):  # pragma: no cover - impossible in exact arithmetic (see docstring)
        A[empty, np.argmax(p2[empty], axis=1)] = True
    return A if pa.ndim == 2 else A[0]


def truncated_target(p, allowed, *, normalize: bool = False):
    r"""Truncated target ``p_Θ = p 1_A / Z_Θ(p)``, ``Z_Θ(p) = Σ_{v∈A} p(v)`` (Zhou et al. 2026,
    Eq. 4).

    Raises ``ValueError`` naming ``allowed`` if ``A`` carries no target mass in some row.
    ``allowed`` is a bool array of the shape of ``p`` (or broadcastable to it).
    """
    pa = as_prob(p, "p", normalize=normalize)
    p2 = np.atleast_2d(pa)
    A = as_bool_mask(allowed, "allowed", p2.shape)
    pt, _ = truncated_rows(p2, A)
    return pt if pa.ndim == 2 else pt[0]


def _pair_allowed(p, q, allowed, normalize):
    p2, q2, batched = as_pair(p, q, normalize=normalize)
    A = as_bool_mask(allowed, "allowed", p2.shape)
    return p2, q2, A, batched


def truncation_efficiency_delta(p, q, allowed, *, normalize: bool = False):
    r"""Gain and loss terms of Lemma 1 (Zhou et al. 2026, §5.1, proof in App. G.1).

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
    normalize : bool, default False
        Rescale the rows of ``p`` and ``q`` to sum to 1.

    Returns
    -------
    (gain, loss)
        Two floats for one pair, two arrays for a batch; both are >= 0 and
        ``gain - loss`` is the net change ΔBE of the single-token acceptance.
    """
    p2, q2, A, batched = _pair_allowed(p, q, allowed, normalize)
    _, z = truncated_rows(p2, A)
    # z <= 1 up to the input tolerance: clip so that rounding cannot make the gain < 0
    factor = np.maximum(1.0 / z - 1.0, 0.0)[:, None]
    gain = np.where(A, np.minimum(_pos(q2 - p2), factor * p2), 0.0).sum(axis=1)
    loss = np.where(A, 0.0, np.minimum(p2, q2)).sum(axis=1)
    return squeeze_out(gain, batched), squeeze_out(loss, batched)


def kl_truncation_sd(p, q, allowed, *, normalize: bool = False):
    r"""``KL_SD = KL(q_Θ ‖ p_Θ)`` of Theorem 1 (Zhou et al. 2026, §5.2, App. G.4, statement 1).

    ``q_Θ = q 1_A / Z_Θ(q)`` is what truncation-based verification emits under standard SD
    (Eq. 13) and ``p_Θ`` what the matched truncation-sampling baseline emits.  It tends to 0
    as ``q → p``.  Zeros: ``inf`` if ``q_Θ`` puts mass where ``p_Θ = 0`` (possible only when
    ``A`` contains tokens with ``p = 0``); if ``Z_Θ(q) = 0`` the rule emits ``p_Θ`` (the
    zero-yield fallback of ``induced_distribution``) and the value is 0.

    Returns a float for one pair, an array for a batch.
    """
    p2, q2, A, batched = _pair_allowed(p, q, allowed, normalize)
    pt, _ = truncated_rows(p2, A)
    y = np.where(A, q2, 0.0)
    zq = y.sum(axis=1)
    qt = np.where((zq > 0)[:, None], _safe_div_rows(y, zq), pt)
    return squeeze_out(kl_rows(qt, pt), batched)


# ---------------------------------------------------------------------------------------------
# tree verification (Zhou et al. 2026, App. G)
# ---------------------------------------------------------------------------------------------
def _as_candidates(candidates, n, m):
    if candidates is None or isinstance(candidates, str | bytes):
        raise ValueError(f"candidates: must be a non-empty 1-D or 2-D array, got {candidates!r}")
    arr = asarray_named(candidates, "candidates")
    if arr.ndim not in (1, 2) or arr.size == 0:
        raise ValueError(f"candidates: must be a non-empty 1-D or 2-D array, got {arr.shape}")
    if arr.dtype.kind not in "iuf":
        raise ValueError(f"candidates: must be integer token ids, got dtype {arr.dtype}")
    if arr.dtype.kind == "f":
        integral = np.all(np.isfinite(arr)) and np.all(arr == np.round(arr))
        if not integral:
            raise ValueError(f"candidates: must be integer token ids, got dtype {arr.dtype}")
    if np.any(arr < 0) or np.any(arr >= n):
        raise ValueError(f"candidates: token ids must lie in [0, {n})")
    arr = np.atleast_2d(as_int_array(arr, "candidates", min_value=0))
    if arr.shape[0] != m:
        if arr.shape[0] == 1:
            arr = np.broadcast_to(arr, (m, arr.shape[1]))
        else:
            raise ValueError(f"candidates: shape mismatch: {arr.shape[0]} rows, p has {m}")
    srt = np.sort(arr, axis=1)
    if np.any(srt[:, 1:] == srt[:, :-1]):
        raise ValueError("candidates: token ids must be distinct within a position")
    return np.ascontiguousarray(arr)


def _tree_inputs(p, candidates, allowed, normalize, rule=None):
    pa = as_prob(p, "p", normalize=normalize)
    p2 = np.atleast_2d(pa)
    if allowed is None:
        if rule is not None and TREE_RULE_ALIASES.get(rule, rule) != "lossless":
            raise ValueError(f"allowed: required by rule {rule!r}")
        A = p2 > 0  # no truncation: p_Θ = p
    else:
        A = as_bool_mask(allowed, "allowed", p2.shape)
    C = _as_candidates(candidates, p2.shape[1], p2.shape[0])
    pt, _ = truncated_rows(p2, A)
    inA = np.take_along_axis(A, C, axis=1)
    has = np.any(inA, axis=1)
    first = C[np.arange(C.shape[0]), np.argmax(inA, axis=1)]
    return pa.ndim == 2, p2, A, C, pt, has, first


def kl_truncation_tree(p, candidates, allowed, *, normalize: bool = False):
    r"""``KL_EAGLE = -log p_Θ(x)`` of Theorem 1 (Zhou et al. 2026, §5.2, App. G.2-G.4,
    statement 2).

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
    normalize : bool, default False
        Rescale the rows of ``p`` to sum to 1.

    Returns
    -------
    float or numpy.ndarray
        ``-log p_Θ(x)``; ``inf`` if ``x ∈ A`` has ``p(x) = 0`` (only if ``A`` contains such
        tokens).  If no candidate lies in ``A`` every candidate is rejected and the path ends
        with a bonus token drawn from ``p_Θ`` (App. G.2), so the position emits ``p_Θ`` and the
        divergence is 0.
    """
    batched, p2, A, C, pt, has, first = _tree_inputs(p, candidates, allowed, normalize)
    ptx = pt[np.arange(p2.shape[0]), first]
    out = np.zeros(p2.shape[0])
    with np.errstate(divide="ignore"):
        out[has] = -np.log(ptx[has])
    return squeeze_out(np.maximum(out, 0.0), batched)


def tree_emitted_distribution(p, candidates, rule: str, *, allowed=None,
                              normalize: bool = False):
    r"""Per-position law emitted by tree verification against ``p_Θ`` (Zhou et al. 2026,
    Lemma 2).

    ``rule="lossless"`` (truncation sampling + SD, Eq. 67: candidate ``x^(i)`` accepted w.p.
    ``p_Θ(x^(i))`` under zero-and-renormalize) emits ``p_Θ`` exactly (Lemma 2(i)).
    ``rule="truncation"`` (aliases ``"speccascade"``, Eq. 68, and ``"typical"``, Eq. 69, which
    the paper reads as the indicator of Definition 1: in-set candidates are accepted with
    probability one) emits the point mass at the first candidate in ``A``, or ``p_Θ`` (the
    bonus token) when no candidate lies in ``A``.

    Parameters
    ----------
    p, candidates
        As in :func:`kl_truncation_tree`.
    rule : str
        One of :data:`TREE_RULES`.
    allowed : array_like of bool, optional
        The allowed set ``A_Θ``; default: the support of ``p`` (no truncation), which only
        ``"lossless"`` accepts (the indicator rules require a set).
    normalize : bool, default False
        Rescale the rows of ``p`` to sum to 1.

    Returns
    -------
    numpy.ndarray
        Of the shape of ``p``.
    """
    rule = as_choice(rule, "rule", TREE_RULES)
    batched, p2, A, C, pt, has, first = _tree_inputs(p, candidates, allowed, normalize, rule)
    if rule == "lossless":
        out = pt
    else:
        out = pt.copy()
        rows = np.flatnonzero(has)
        out[rows] = 0.0
        out[rows, first[rows]] = 1.0
    return out if batched else out[0]


def tree_acceptance(p, candidates, rule: str, *, allowed=None, normalize: bool = False):
    r"""Per-position acceptance ``a(C)`` of tree verification (Zhou et al. 2026, Lemma 2,
    Eqs. 70-71).

    ``a^lossless(C) = p_Θ(C) = Σ_{x∈C} p_Θ(x)``; ``a^truncation(C) = 1[C ∩ A ≠ ∅]`` (rules
    ``"truncation"``, ``"speccascade"``, ``"typical"``).  Corollary 1:
    ``a^lossless <= a^truncation``, with equality iff ``p_Θ(C) ∈ {0, 1}``.  Same arguments
    as :func:`tree_emitted_distribution`.  Returns a float for 1-D ``p``, an array for 2-D.
    """
    rule = as_choice(rule, "rule", TREE_RULES)
    batched, p2, A, C, pt, has, first = _tree_inputs(p, candidates, allowed, normalize, rule)
    if rule == "lossless":
        a = np.minimum(np.take_along_axis(pt, C, axis=1).sum(axis=1), 1.0)
    else:
        a = has.astype(np.float64)
    return squeeze_out(a, batched)


def tree_block_efficiency(p, candidates, rule: str, *, allowed=None, L=None,
                          bonus: bool = False, normalize: bool = False):
    r"""Expected accepted path length of tree verification (Zhou et al. 2026, Eq. 73,
    Proposition 1).

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
        As in :func:`tree_emitted_distribution` (per row for 2-D ``p``).
    rule : str
        ``"lossless"`` or ``"truncation"`` (aliases ``"speccascade"``, ``"typical"``).
    L : int, optional
        Depth for 1-D ``p`` (the running products take ``16 L`` bytes: ``L`` is refused
        above the package's memory limit).
    bonus : bool
        Add the bonus token (Zhou et al. 2026, App. G.2, exclude it: default False).
    normalize : bool, default False
        Rescale the rows of ``p`` to sum to 1.

    Returns
    -------
    float
        Proposition 1: the value for ``"truncation"`` is >= the value for ``"lossless"``.
    """
    rule = as_choice(rule, "rule", TREE_RULES)
    pa = as_prob(p, "p", normalize=normalize)
    bonus = as_bool(bonus, "bonus")
    if pa.ndim == 1:
        if L is None:
            raise ValueError("L: required when p is 1-D (i.i.d. positions)")
        L = as_int(L, "L", min_value=1)
        check_alloc("L", L, 16, what="the running products of the L per-position acceptances")
    elif L is not None:
        L = as_int(L, "L", min_value=1)
        if L != pa.shape[0]:
            raise ValueError(f"L: must equal the number of rows of p ({pa.shape[0]}), got {L}")
    a = np.atleast_1d(tree_acceptance(pa, candidates, rule, allowed=allowed))
    if pa.ndim == 1:
        a = np.full(L, a[0])
    be = float(np.cumprod(a).sum())
    return be + 1.0 if bonus else be
