"""Block efficiency of speculative decoding: expected tokens per target call (Leviathan, Kalman
& Matias 2023, arXiv:2211.17192, Eq. (1))."""

from __future__ import annotations

import numbers

import numpy as np

from specbound._validation import as_int, as_real_array

__all__ = ["block_efficiency"]


def _as_acceptance(a) -> tuple[np.ndarray, bool]:
    """Validate ``a``: a real scalar or array with every entry in [0, 1]."""
    if a is None or isinstance(a, bool | np.bool_):
        raise ValueError(f"a: must be a real number or array of reals, got {a!r}")
    scalar = isinstance(a, numbers.Real) or (isinstance(a, np.ndarray) and a.ndim == 0)
    arr, _ = as_real_array(a, "a", what="a real number or an array of reals")
    if arr.size == 0:
        raise ValueError(f"a: must not be empty (shape {arr.shape})")
    if not np.all(np.isfinite(arr)):
        raise ValueError("a: contains NaN or infinite entries")
    if np.any((arr < 0) | (arr > 1)):
        raise ValueError(
            f"a: acceptance probabilities must lie in [0, 1] (min {arr.min():.3g}, "
            f"max {arr.max():.3g})"
        )
    return arr, scalar and arr.ndim == 0


def block_efficiency(a, L):
    """Expected number of tokens emitted per target-model call (block efficiency).

    With lookahead ``L`` (drafts per block) and i.i.d. per-token acceptance probability
    ``a``, one verification step emits the accepted prefix of the block plus one token from
    the target (the correction on a rejection, or the bonus token when all ``L`` drafts are
    accepted), so (Leviathan et al. 2023, Eq. (1))

    .. math:: E[\\text{tokens per step}] = \\sum_{k=0}^{L} a^k = \\frac{1 - a^{L+1}}{1 - a}.

    Parameters
    ----------
    a : float or array_like of float
        Per-token acceptance probability, every entry in [0, 1].  The endpoints are the
        limits of the formula: ``a = 0`` gives 1 (only the target's own token) and ``a = 1``
        gives ``L + 1`` (the removable singularity of the quotient).
    L : int
        Lookahead, ``L >= 0`` (``L = 0`` is plain autoregressive decoding: 1 token per step).
        Any size up to the largest float (``L + 1 <= 1.8e308``) is exact in O(1); a larger
        integer is refused (``ValueError`` naming ``L``).

    Returns
    -------
    float or numpy.ndarray
        A Python float for scalar ``a``; an array of the shape of ``a`` otherwise.  Values lie
        in [1, L + 1], non-decreasing in ``a`` and in ``L``.

    Raises
    ------
    ValueError
        ``a``: non-numeric (strings, booleans and complex values included), empty, NaN/inf or
        outside [0, 1]; ``L``: not an integer, < 0 or beyond the float range.

    Notes
    -----
    Evaluated as ``-expm1((L + 1) log a) / (1 - a)``, which keeps full relative precision for
    ``a`` close to 1 (the naive quotient cancels catastrophically there) and costs O(1) in
    ``L``.
    """
    arr, scalar = _as_acceptance(a)
    L = as_int(L, "L", min_value=0)
    try:
        L1 = float(L + 1)
    except OverflowError:
        raise ValueError(
            f"L: too large (about 10^{int(L.bit_length() * 0.30103)}): L + 1 must be a "
            "finite float (at most 1.8e308)"
        ) from None
    out = np.empty_like(arr)
    zero = arr == 0.0
    one = arr == 1.0
    mid = ~(zero | one)
    out[zero] = 1.0
    out[one] = L1
    am = arr[mid]
    out[mid] = -np.expm1(L1 * np.log(am)) / (1.0 - am)
    # rounding can push the quotient an ulp outside [1, L + 1]
    np.clip(out, 1.0, L1, out=out)
    if scalar:
        return float(out)
    return out
