r"""Acceptance bounds and exact acceptance probabilities of token-level couplings.

Liu, Wan, Gao & Gündüz (2026), arXiv:2609.21858, §5 and App. B (cited below as Liu et al.
2026); Rowan et al. (2025), "list matching lemma".  With target ``p``, draft ``q`` and ``B``
drafts, the Poisson-matching exponent of token ``i`` is

.. math:: \alpha_i = p_i \sum_j \Bigl(\frac{q_j}{q_i} - \frac{p_j}{p_i}\Bigr)_+ \ge 0,
   \qquad \sum_j \max\Bigl(\frac{p_j}{p_i}, \frac{q_j}{q_i}\Bigr) = \frac{1+\alpha_i}{p_i},

and ``alpha = 0`` for all tokens iff ``p = q``.

Zeros (the paper assumes full support; the package defines every formula by its limits):

* a token with ``p_i = 0`` contributes nothing to any bound or acceptance; its ``alpha_i``
  is reported as 0;
* a token with ``p_i > 0 = q_i`` has ``alpha_i = +inf``: it can never be drafted, hence never
  accepted (``(alpha/(1+alpha))^B = 1``, ``B/(B+alpha) = 0``);
* a token with ``p_i > 0`` and ``q_i`` so small that ``p_i/q_i`` overflows float64 is treated
  as ``q_i = 0`` (its true ``alpha_i`` exceeds 1e308).

Every public function takes one pair (1-D arrays; returns a Python float, or for
:func:`pml_alpha` a 1-D array) or a batch (2-D arrays, rows are contexts; returns an array;
a 1-D argument is broadcast against a 2-D one), validates once at the boundary and accepts
``normalize=True``.
"""

from __future__ import annotations

import numbers

import numpy as np

from specbound._validation import (
    as_B,
    as_choice,
    as_int_array,
    as_pair,
    as_prob,
    asarray_named,
    squeeze_out,
)
from specbound.theory._gls import alpha_fast, gls_acceptance

__all__ = [
    "pml_alpha",
    "pml_bound",
    "pml_weak_bound",
    "lml_bound",
    "lml_relaxed_bound",
    "lml_nonidentical_bound",
    "active_set_bound",
    "exact_acceptance",
]

SCHEMES = ("sd", "exp_race", "mpfr", "gls")


# ----------------------------------------------------------------------------- kernels
# (2-D valid input; ``B`` an int or an int array of shape (rows, 1))


def _fail_ratio(alpha: np.ndarray) -> np.ndarray:
    """``alpha / (1 + alpha)`` with ``alpha = inf -> 1``."""
    with np.errstate(invalid="ignore"):
        return np.where(np.isinf(alpha), 1.0, alpha / (1.0 + alpha))


def _pml(p2, alpha, B) -> np.ndarray:
    fail = np.sum(p2 * _fail_ratio(alpha) ** B, axis=1)
    return np.clip(1.0 - fail, 0.0, 1.0)


def _pml_weak(p2, q2, B) -> np.ndarray:
    den = p2 + q2
    ratio = np.divide(p2, den, out=np.zeros_like(p2), where=den > 0)
    return np.clip(1.0 - np.sum(p2 * ratio**B, axis=1), 0.0, 1.0)


def _lml(p2, alpha, B) -> np.ndarray:
    # B / (B + inf) = 0: a token that can never be drafted contributes nothing
    return np.clip(np.sum(p2 * (B / (B + alpha)), axis=1), 0.0, 1.0)


def _lml_relaxed(p2, q2, B) -> np.ndarray:
    den = p2 + B * q2
    frac = np.divide(B * q2, den, out=np.zeros_like(p2), where=den > 0)
    return np.clip(np.sum(p2 * frac, axis=1), 0.0, 1.0)


# ----------------------------------------------------------------------------- public API


def pml_alpha(p, q, *, normalize: bool = False) -> np.ndarray:
    r"""The Poisson-matching exponents :math:`\alpha_i` of Liu et al. (2026), Thm B.1.

    .. math:: \alpha_i = p_i \sum_j (q_j/q_i - p_j/p_i)_+
                       = \rho_i Q_<(\rho_i) - P_<(\rho_i),\quad \rho = p/q,

    where ``Q_<``, ``P_<`` sum ``q`` and ``p`` over tokens with a strictly smaller ratio
    ``p_j/q_j``.  Computed by one sort and cumulative sums, ``O(n log n)`` per row (not the
    ``O(n^2)`` definition); the absolute rounding error is of order ``n * eps * (1 + alpha_i)``.

    Parameters
    ----------
    p, q : array_like, shape (n,) or (rows, n)
        Target and draft probability vectors.
    normalize : bool, default False
        Rescale rows to sum to 1 instead of rejecting rows that do not sum to 1 within the
        tolerance of :func:`specbound._validation.sum_atol` (``1e-9`` for float64 input).

    Returns
    -------
    ndarray of shape (n,) or (rows, n)
        ``alpha >= 0``; ``alpha_i = 0`` for every token iff ``p = q``.

    Raises
    ------
    ValueError
        NaN/inf or negative entries, rows not summing to 1, shape mismatch, empty input,
        wrong number of dimensions (message starts with the argument's name).

    Notes
    -----
    Limit conventions for zeros (module docstring): ``alpha_i = 0`` where ``p_i = 0`` (such a token
    contributes nothing to any formula, whatever its alpha); ``alpha_i = +inf`` where
    ``p_i > 0 = q_i`` (the token is never drafted); a token with ``p_i > 0`` and ``q_i`` so small
    that ``p_i/q_i`` overflows is treated as ``q_i = 0``.  Tokens with ``q_j = 0`` contribute
    nothing to the sum for other tokens; tokens with ``p_j = 0 < q_j`` contribute
    ``p_i q_j / q_i``.
    """
    p2, q2, batched = as_pair(p, q, normalize=normalize)
    alpha = alpha_fast(p2, q2)
    return alpha if batched else alpha[0]


def pml_bound(p, q, B, *, normalize: bool = False):
    r"""PML bound (Liu et al. 2026, Thm B.1, Eq. 13):
    :math:`1 - \sum_i p_i (\alpha_i/(1+\alpha_i))^B`.

    For the discrete MPFR with token clocks (Liu et al. 2026, Alg. 6) this is not only a lower
    bound but the exact acceptance probability (given the target token i with first clock g,
    the other tokens' draft arrivals scoring below it are Poisson(g α_i/p_i); integrating
    gives the expression, see :func:`specbound.theory.symbolic.mpfr_integral`); it equals
    ``exact_acceptance(p, q, "mpfr", B)``.  For ``B = 1`` it equals the exponential-race
    acceptance ``sum_i p_i/(1+alpha_i)`` and :func:`lml_bound`.

    Parameters
    ----------
    p, q : array_like, shape (n,) or (rows, n)
        Target and draft probability vectors.
    B : int
        Number of drafts, ``>= 1``.
    normalize : bool, default False
        Rescale rows to sum to 1.

    Returns
    -------
    float or ndarray of shape (rows,)
        The bound, in ``[0, 1]``; non-decreasing in ``B``; ``>= pml_weak_bound`` and
        ``>= lml_bound`` (strictly when ``B > 1`` and some token has ``p_i > 0`` and
        ``0 < alpha_i < inf``, which holds whenever ``p != q`` and ``p << q``).

    Raises
    ------
    ValueError
        Invalid ``p``/``q`` (see :func:`pml_alpha`); ``B`` not an integer (bools rejected)
        or ``B < 1``.

    Notes
    -----
    Zeros: a token with ``p_i = 0`` contributes nothing; a token with ``p_i > 0 = q_i`` has
    ``alpha_i = inf`` and is never accepted (the zero limits of the module docstring; the paper
    assumes full support).
    """
    B = as_B(B)
    p2, q2, batched = as_pair(p, q, normalize=normalize)
    return squeeze_out(_pml(p2, alpha_fast(p2, q2), B), batched)


def pml_weak_bound(p, q, B, *, normalize: bool = False):
    r"""PML-weak bound, Liu et al. (2026), Thm 5.1: :math:`1 - \sum_i p_i (p_i/(p_i+q_i))^B`.

    Weaker than :func:`pml_bound` because ``alpha_i <= p_i/q_i``.

    Parameters
    ----------
    p, q : array_like, shape (n,) or (rows, n)
        Target and draft probability vectors.
    B : int
        Number of drafts, ``>= 1``.
    normalize : bool, default False
        Rescale rows to sum to 1.

    Returns
    -------
    float or ndarray of shape (rows,)
        The bound, in ``[0, 1]``; ``>= lml_relaxed_bound`` (strictly when ``B > 1`` and some
        token has ``p_i q_i > 0``).

    Raises
    ------
    ValueError
        As :func:`pml_bound`.

    Notes
    -----
    Zeros: a token with ``p_i = 0`` contributes nothing; a token with ``p_i > 0 = q_i``
    contributes ``p_i`` to the failure probability (``p_i/(p_i+q_i) = 1``).
    """
    B = as_B(B)
    p2, q2, batched = as_pair(p, q, normalize=normalize)
    return squeeze_out(_pml_weak(p2, q2, B), batched)


def lml_bound(p, q, B, *, normalize: bool = False):
    r"""LML bound, Rowan et al. 2025 Eq. (3): :math:`\sum_i p_i\, B/(B + \alpha_i)`.

    Written in the notation of Liu et al. (2026), Thm B.2.  It is exactly the probability that
    the winning block of GLS / list coupling accepts, so ``exact GLS >= LML``.

    Parameters
    ----------
    p, q : array_like, shape (n,) or (rows, n)
        Target and draft probability vectors.
    B : int
        Number of drafts, ``>= 1``.
    normalize : bool, default False
        Rescale rows to sum to 1.

    Returns
    -------
    float or ndarray of shape (rows,)
        The bound, in ``[0, 1]``; ``<= pml_bound`` (Liu et al. 2026, Thm B.2).

    Raises
    ------
    ValueError
        As :func:`pml_bound`.

    Notes
    -----
    Zeros: a token with ``p_i = 0`` contributes nothing; a token with ``p_i > 0 = q_i`` has
    ``alpha_i = inf`` and is never accepted (the zero limits of the module docstring; the paper
    assumes full support).
    """
    B = as_B(B)
    p2, q2, batched = as_pair(p, q, normalize=normalize)
    return squeeze_out(_lml(p2, alpha_fast(p2, q2), B), batched)


def lml_relaxed_bound(p, q, B, *, normalize: bool = False):
    r"""Relaxed LML bound, Rowan et al. 2025 Eq. (4): :math:`\sum_i p_i\, B q_i/(p_i + B q_i)`.

    Written in the notation of Liu et al. (2026), Thm B.3.

    Parameters
    ----------
    p, q : array_like, shape (n,) or (rows, n)
        Target and draft probability vectors.
    B : int
        Number of drafts, ``>= 1``.
    normalize : bool, default False
        Rescale rows to sum to 1.

    Returns
    -------
    float or ndarray of shape (rows,)
        The bound, in ``[0, 1]``; ``<= pml_weak_bound`` (Liu et al. 2026, Thm B.3).

    Raises
    ------
    ValueError
        As :func:`pml_bound`.

    Notes
    -----
    Zeros: tokens with ``p_i = 0`` or ``q_i = 0`` contribute nothing.
    """
    B = as_B(B)
    p2, q2, batched = as_pair(p, q, normalize=normalize)
    return squeeze_out(_lml_relaxed(p2, q2, B), batched)


def lml_nonidentical_bound(p, qs, *, normalize: bool = False):
    r"""Non-identical proposals, Liu et al. (2026), Prop. B.5:
    :math:`\sum_i p_i \sum_{b=1}^B 1/(B + \alpha_i^{(b)})`,
    with :math:`\alpha_i^{(b)} = p_i \sum_j (q_{b,j}/q_{b,i} - p_j/p_i)_+`.

    With ``q_1 = ... = q_B = q`` it reduces to :func:`lml_bound`; with ``B = 1`` to the
    exponential-race acceptance.

    Parameters
    ----------
    p : array_like, shape (n,) or (rows, n)
        Target distribution(s).
    qs : array_like, shape (B, n) or (rows, B, n)
        The ``B`` draft distributions (per context when 3-D).  A 1-D ``p`` with a 3-D ``qs``
        is broadcast over the rows, and a 2-D ``qs`` over the rows of a 2-D ``p``.
    normalize : bool, default False
        Rescale every distribution to sum to 1.

    Returns
    -------
    float or ndarray of shape (rows,)
        The bound, in ``[0, 1]``; a float when ``p`` is 1-D and ``qs`` is 2-D.

    Raises
    ------
    ValueError
        Invalid ``p`` or ``qs`` (NaN/inf, negative, not summing to 1, empty, wrong number of
        dimensions), vocabulary sizes or numbers of rows that do not match.

    Notes
    -----
    Zeros: a token with ``p_i = 0`` contributes nothing; a token with ``p_i > 0 = q_{b,i}``
    has ``alpha_i^{(b)} = inf`` and contributes nothing through draft ``b``.
    """
    pa = as_prob(p, "p", normalize=normalize, ndim=(1, 2))
    qa = as_prob(qs, "qs", normalize=normalize, ndim=(2, 3))
    n = pa.shape[-1]
    if qa.shape[-1] != n:
        raise ValueError(
            f"qs: shape mismatch with p: vocabulary sizes {qa.shape[-1]} and {n} differ"
        )
    batched = pa.ndim == 2 or qa.ndim == 3
    p2 = np.atleast_2d(pa)
    q3 = qa if qa.ndim == 3 else qa[None]
    rows = max(p2.shape[0], q3.shape[0])
    if p2.shape[0] not in (1, rows) or q3.shape[0] not in (1, rows):
        raise ValueError(
            f"qs: shape mismatch with p: {q3.shape[0]} rows of drafts and {p2.shape[0]} rows "
            "of p (qs must have shape (B, n) or (rows, B, n))"
        )
    B = q3.shape[1]
    p2 = np.broadcast_to(p2, (rows, n))
    q3 = np.broadcast_to(q3, (rows, B, n))
    pb = np.ascontiguousarray(np.repeat(p2, B, axis=0))
    alpha = alpha_fast(pb, np.ascontiguousarray(q3.reshape(rows * B, n))).reshape(rows, B, n)
    val = np.sum(p2 * np.sum(1.0 / (B + alpha), axis=1), axis=1)
    return squeeze_out(np.clip(val, 0.0, 1.0), batched)


def _as_J(J, rows: int, batched: bool):
    """Validate the number(s) of active drafts: an int >= 1, or one per row when batched."""
    if isinstance(J, str | bytes) or J is None:
        return as_B(J, "J")
    arr = asarray_named(J, "J")
    if arr.ndim == 0:
        return as_B(J.item() if isinstance(J, np.ndarray) else J, "J")
    if not batched or arr.ndim != 1 or arr.shape[0] != rows:
        raise ValueError(
            f"J: must be an integer or, for a batch, a 1-D array with one entry per row "
            f"({rows}), got shape {arr.shape}"
        )
    if arr.dtype == np.bool_ or not all(
        isinstance(x, numbers.Integral) or (isinstance(x, numbers.Real) and float(x).is_integer())
        for x in arr.tolist()
    ):
        raise ValueError(f"J: must contain integers, got dtype {arr.dtype}")
    if any(int(x) < 1 for x in arr.tolist()):
        raise ValueError(f"J: every entry must be >= 1, got min {int(min(arr.tolist()))}")
    out = as_int_array(arr, "J", min_value=1)
    return out[:, None]


def active_set_bound(p, q, J, *, normalize: bool = False):
    r"""Active-set bound (Liu et al. 2026, Thm B.4): PML-weak with ``B`` replaced by the number
    ``J`` of active drafts, :math:`1 - \sum_i p_i (p_i/(p_i+q_i))^{J}`.

    In the draft-indexed active-set version of multi-draft speculative sampling, the step
    only uses the ``J_t = |S_t|`` drafts still active; at the first step of a block
    ``J_t = B``.

    Parameters
    ----------
    p, q : array_like, shape (n,) or (rows, n)
        Target and draft distributions at the current step.
    J : int or array_like of int, shape (rows,)
        Number of active drafts (``>= 1``), one per row for a batch.
    normalize : bool, default False
        Rescale rows to sum to 1.

    Returns
    -------
    float or ndarray of shape (rows,)
        The bound, in ``[0, 1]``.

    Raises
    ------
    ValueError
        As :func:`pml_bound`, with ``J`` in place of ``B``; a per-row ``J`` of the wrong
        length.

    Notes
    -----
    Zeros as in :func:`pml_weak_bound`.  ``J = 0`` (no active draft) is rejected: the step
    does not take place (the bound would be 0).
    """
    p2, q2, batched = as_pair(p, q, normalize=normalize)
    Jv = _as_J(J, p2.shape[0], batched)
    return squeeze_out(_pml_weak(p2, q2, Jv), batched)


def exact_acceptance(p, q, scheme, B=1, *, normalize: bool = False):
    r"""Exact probability that a token-level coupling accepts.

    ``scheme``:

    ``"sd"``
        Standard speculative sampling (Leviathan et al. 2023; Liu et al. 2026, Alg. 1), the
        maximal coupling:
        ``1 - TV(p, q) = sum_i min(p_i, q_i)``.  ``B = 1`` only.
    ``"exp_race"``
        Exponential race / PFR with one draft (Liu et al. 2026, Alg. 2, 3):
        ``sum_i p_i / (1 + alpha_i) = sum_i 1 / sum_j max(p_j/p_i, q_j/q_i)``.  ``B = 1`` only.
    ``"mpfr"``
        MPFR with direct token clocks (Liu et al. 2026, Alg. 6):
        ``1 - sum_i p_i (alpha_i/(1+alpha_i))^B``, the PML expression of Thm B.1, which is exact
        for this scheme (see :func:`pml_bound`).
    ``"gls"``
        GLS / list coupling (Rowan et al. 2025) with ``B`` blocks, by the 1-D integral over the
        winning score ``s`` (density ``B e^{-Bs}``),
        ``sum_i B p_i int_0^inf e^{-Bs} [1 - (1 - e^{-s alpha_i})(1 - r_i(s))^{B-1}] ds``,
        with ``r_i(s) = q_i T(s p_i/q_i)`` and ``T(x) = int_x^inf exp(-sum_j q_j (t - c_j)_+) dt``.
        Computed as ``LML + extra``: the closed-form winning-block term plus a trapezoidal rule
        in ``log s`` refined until successive values agree to 1e-11, after truncating the
        integral with a proven tail bound of 2e-13; absolute error below 1e-8 (observed
        ~1e-13 against a 30-digit mpmath reference).  One sort per row, then ``O(n)`` per node
        (about 300 nodes), e.g. ~0.5 s of CPU for ``n = 50,000``.  For ``B = 1`` it equals
        ``"exp_race"``.

    Parameters
    ----------
    p, q : array_like, shape (n,) or (rows, n)
        Target and draft probability vectors.
    scheme : {"sd", "exp_race", "mpfr", "gls"}
        The coupling.
    B : int, default 1
        Number of drafts, ``>= 1``; must be 1 for ``"sd"`` and ``"exp_race"``.
    normalize : bool, default False
        Rescale rows to sum to 1.

    Returns
    -------
    float or ndarray of shape (rows,)
        The acceptance probability, in ``[0, 1]``, non-decreasing in ``B``; 1 when ``p = q``.

    Raises
    ------
    ValueError
        Unknown ``scheme``; ``B`` not an integer or ``< 1``; ``B > 1`` with ``"sd"`` or
        ``"exp_race"``; invalid ``p``/``q`` (see :func:`pml_alpha`).

    Notes
    -----
    Zeros: a token with ``p_i = 0`` contributes nothing; a token with ``p_i > 0 = q_i`` has
    ``alpha_i = inf`` and is never accepted (the zero limits of the module docstring; the paper
    assumes full support).
    For GLS, a token with ``q_i = 0`` is never drafted by any block (``r_i = 0``) and a token
    with ``p_j = 0 < q_j`` has shift ``c_j = 0``.
    """
    scheme = as_choice(scheme, "scheme", SCHEMES)
    B = as_B(B)
    if scheme in ("sd", "exp_race") and B != 1:
        raise ValueError(
            f"B: scheme {scheme!r} is defined for B = 1 only, got B={B} "
            "(use 'mpfr' or 'gls' for multiple drafts)"
        )
    p2, q2, batched = as_pair(p, q, normalize=normalize)
    if scheme == "sd":
        out = np.clip(np.sum(np.minimum(p2, q2), axis=1), 0.0, 1.0)
    elif scheme == "exp_race":
        out = _lml(p2, alpha_fast(p2, q2), 1)
    elif scheme == "mpfr":
        out = _pml(p2, alpha_fast(p2, q2), B)
    else:
        out = np.clip(gls_acceptance(p2, q2, B), 0.0, 1.0)
    return squeeze_out(out, batched)
