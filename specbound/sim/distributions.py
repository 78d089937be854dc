"""Synthetic target distributions and draft families with a controlled mismatch.

Targets (random, reproducible from ``seed`` as in numpy's SPEC 7: an int, a
``SeedSequence`` or a ``Generator``):

- :func:`dirichlet` -- ``Dirichlet(alpha)`` on ``vocab_size`` tokens;
- :func:`zipf` -- Zipf(s) weights ``k^{-s}`` (``k = 1..vocab_size``) assigned to a random
  permutation of the tokens (:func:`zipf_law`: the same law in token order, deterministic);
- :func:`softmax_gaussian` -- ``softmax(scale * z / temperature)`` with ``z ~ N(0, I)``;
- :func:`top_k` -- keep the ``k`` most likely tokens and renormalise (deterministic).

Drafts made from a target ``p`` (``q`` is the draft, as everywhere in the package):

- :func:`temperature_draft` -- ``q ∝ p^{1/temperature}`` (the target's logits divided by
  the temperature);
- :func:`noisy_draft` -- ``q = softmax(log p + sigma * eps)`` with Gaussian logit noise
  ``eps`` and ``sigma`` found by bisection so that ``TV(p, q)`` is the requested value;
- :func:`logit_noise_draft` -- the same family at a given noise direction ``eps`` and scale
  ``sigma`` (for a caller that fixes the direction and solves for ``sigma`` itself);
- :func:`mixture_draft` -- ``q = (1 - w) p + w * other``.

Every function returns a 1-D probability vector for a single distribution and a 2-D batch
(rows are contexts) when ``size`` is given or a 2-D ``p`` is passed.  Zeros: the draft
families work with log-probabilities ``log 0 = -inf`` that stay ``-inf`` (so
``temperature_draft`` and ``noisy_draft`` keep ``supp(q) = supp(p)``); no floating-point
warning is ever emitted, and no function returns NaN: the limits of extreme temperatures
(``temperature -> 0``: the argmax, ties shared uniformly) are computed in log space.

Names: ``vocab_size`` is the vocabulary size (``n`` means a number of samples in the
package), ``temperature`` the temperature, and ``seed`` is keyword-only with default 0.
Functions taking distributions accept
``normalize=True`` (rescale rows instead of refusing sums off 1; default tolerance
:func:`specbound._validation.sum_atol`).  Sizes whose output would exceed the package's
memory limit are refused up front (``ValueError`` naming the argument).
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

from specbound._validation import (
    as_int,
    as_pair,
    as_prob,
    as_real,
    as_real_array,
    as_rng,
    check_alloc,
)
from specbound.theory.divergences import tv_rows

__all__ = [
    "NoisyDraft",
    "dirichlet",
    "logit_noise_draft",
    "mixture_draft",
    "noisy_draft",
    "softmax_gaussian",
    "temperature_draft",
    "top_k",
    "zipf",
    "zipf_law",
]


# ----------------------------------------------------------------------------- helpers


def _as_size(size):
    if size is None:
        return None
    return as_int(size, "size", min_value=1)


def _shape(vocab_size, size):
    return (vocab_size,) if size is None else (size, vocab_size)


def _check_out(vocab_size, size, arrays=3):
    """Refuse up front an output of ``size x vocab_size`` floats above the memory limit."""
    what = "the output and its work arrays"
    check_alloc("vocab_size", vocab_size, 8 * arrays, what=what)
    if size is not None:
        check_alloc("size", vocab_size * size, 8 * arrays, what=what)


def _softmax_logits(z: np.ndarray) -> np.ndarray:
    """Row-wise softmax of logits that may contain ``-inf`` (at least one finite per row)."""
    m = np.max(z, axis=-1, keepdims=True)
    e = np.exp(z - m)  # exp(-inf) = 0 without a warning
    return e / e.sum(axis=-1, keepdims=True)


def _softmax_scaled(logits: np.ndarray, factor: float) -> np.ndarray:
    """``softmax(factor * logits)`` row-wise, for any ``factor >= 0`` (``inf`` included).

    The plain product is used where it is finite (bit-for-bit the historical values); rows
    where it overflows or is ``-inf`` everywhere (``factor`` near ``inf``, e.g. a temperature
    of 1e-310) are computed in log space from ``factor * (logits - max)``, whose largest entry
    is 0, with ``0 * inf = 0``: the limit is the argmax, ties sharing the mass uniformly.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        out = _softmax_logits(logits * factor)
    bad = ~np.all(np.isfinite(out), axis=-1)
    if np.any(bad):
        z = np.atleast_2d(logits)
        o = np.atleast_2d(out)
        rows = np.flatnonzero(np.atleast_1d(bad))
        d = z[rows] - np.max(z[rows], axis=-1, keepdims=True)  # <= 0, -inf stays -inf
        with np.errstate(over="ignore", invalid="ignore"):
            scaled = np.where(d == 0.0, 0.0, d * factor)
        o[rows] = _softmax_logits(scaled)
        out = o if out.ndim == 2 else o[0]
    return out


def _log(p: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.log(p)


# ----------------------------------------------------------------------------- targets


def dirichlet(vocab_size, alpha, size=None, *, seed=0) -> np.ndarray:
    """Probability vector(s) drawn from ``Dirichlet(alpha)`` on ``vocab_size`` tokens.

    Parameters
    ----------
    vocab_size : int >= 1
        Vocabulary size.
    alpha : float > 0 or array of shape (vocab_size,)
        Concentration (a scalar means the symmetric Dirichlet).  Small ``alpha`` gives sparse,
        peaked vectors; entries may underflow to exactly 0 for ``alpha`` below about 0.01.
    size : int, optional
        Number of rows; ``None`` returns one 1-D vector.
    seed : int, SeedSequence or Generator, keyword-only

    Returns
    -------
    ndarray, shape (vocab_size,) or (size, vocab_size)
        Rows sum to 1 (rescaled after drawing to remove rounding error).
    """
    n = as_int(vocab_size, "vocab_size", min_value=1)
    size = _as_size(size)
    _check_out(n, size)
    try:
        a = None if isinstance(alpha, bool | np.bool_) else as_real_array(alpha, "alpha")[0]
    except ValueError:
        a = None
    if a is None or a.ndim > 1 or (a.ndim == 1 and a.shape[0] != n):
        raise ValueError(f"alpha: must be a positive scalar or a length-{n} vector")
    if not np.all(np.isfinite(a)) or np.any(a <= 0):
        raise ValueError("alpha: entries must be finite and > 0")
    rng = as_rng(seed)
    a = np.broadcast_to(a, (n,))
    out = rng.dirichlet(a, size=size)
    out = np.atleast_2d(out)
    s = out.sum(axis=-1, keepdims=True)
    bad = (s[:, 0] <= 0) | ~np.isfinite(s[:, 0])
    if np.any(bad):  # total underflow (tiny alpha): put the mass on one random token
        out[bad] = 0.0
        out[bad, rng.integers(0, n, size=int(bad.sum()))] = 1.0
        s = out.sum(axis=-1, keepdims=True)
    out = out / s
    return out[0] if size is None else out


def _zipf_weights(n: int, s: float) -> np.ndarray:
    w = np.arange(1, n + 1, dtype=np.float64) ** (-s)
    return w / w.sum()


def zipf_law(vocab_size, s) -> np.ndarray:
    """The Zipf(s) law in token order: ``p_k = k^{-s} / H_{V,s}``, ``k = 1..V`` (token
    ``k - 1`` has rank ``k``), ``H_{V,s} = sum_k k^{-s}``, ``V = vocab_size``.

    Deterministic (no seed): the most likely token is token 0 and the probabilities are
    non-increasing; ``s = 0`` is the uniform law.  :func:`zipf` is the same law on a random
    permutation of the tokens.

    Parameters
    ----------
    vocab_size : int >= 1
    s : float >= 0
        Exponent.
    """
    n = as_int(vocab_size, "vocab_size", min_value=1)
    s = as_real(s, "s", low=0.0)
    _check_out(n, None, arrays=2)
    return _zipf_weights(n, s)


def zipf(vocab_size, s, size=None, *, seed=0) -> np.ndarray:
    """Zipf(s) probability vector(s) on a random permutation of ``vocab_size`` tokens.

    The ``k``-th most likely token (``k = 1..V``, ``V = vocab_size``) has probability
    ``k^{-s} / H_{V,s}`` with ``H_{V,s} = sum_k k^{-s}``; which token gets rank ``k`` is a
    uniformly random permutation (independent per row).  ``s = 0`` is the uniform
    distribution.

    Parameters
    ----------
    vocab_size : int >= 1
        Vocabulary size.
    s : float >= 0
        Exponent.
    size : int, optional
        Number of rows; ``None`` returns one 1-D vector.
    seed : int, SeedSequence or Generator, keyword-only
    """
    n = as_int(vocab_size, "vocab_size", min_value=1)
    s = as_real(s, "s", low=0.0)
    size = _as_size(size)
    _check_out(n, size, arrays=4)
    rng = as_rng(seed)
    w = _zipf_weights(n, s)
    rows = 1 if size is None else size
    perm = np.argsort(rng.random((rows, n)), axis=-1)
    out = w[perm]
    return out[0] if size is None else out


def softmax_gaussian(vocab_size, temperature=1.0, scale=1.0, size=None, *,
                     seed=0) -> np.ndarray:
    """``softmax(scale * z / temperature)`` with standard Gaussian logits ``z ~ N(0, I)``.

    Parameters
    ----------
    vocab_size : int >= 1
        Vocabulary size.
    temperature : float > 0
    scale : float >= 0
        Standard deviation of the logits before the temperature (``0``: uniform).
    size : int, optional
        Number of rows; ``None`` returns one 1-D vector.
    seed : int, SeedSequence or Generator, keyword-only

    Notes
    -----
    Only ``scale / temperature`` matters: the two parameters are kept because a model's
    logit scale and its sampling temperature are separate knobs in experiments.  When the
    ratio overflows (a temperature of 5e-324) the result is the limit, the one-hot vector at
    the largest logit, never NaN.
    """
    n = as_int(vocab_size, "vocab_size", min_value=1)
    t = as_real(temperature, "temperature", low=0.0, low_open=True)
    sc = as_real(scale, "scale", low=0.0)
    size = _as_size(size)
    _check_out(n, size)
    rng = as_rng(seed)
    z = rng.standard_normal(_shape(n, size))
    with np.errstate(over="ignore"):
        factor = sc / t
    return _softmax_scaled(z, factor)


def top_k(p, k, *, normalize: bool = False) -> np.ndarray:
    """Keep the ``k`` most likely tokens of ``p`` and renormalise.

    Ties at the boundary are broken in favour of the lower token id (deterministic).  If
    ``k >= n`` the input is returned unchanged (as a copy).  Zeros: a vector with fewer than
    ``k`` positive entries is unchanged.

    Parameters
    ----------
    p : array, shape (n,) or (batch, n)
        Probability vector(s).
    k : int >= 1
    normalize : bool, default False
        Rescale the rows of ``p`` to sum to 1 first.

    Returns
    -------
    ndarray of the same shape as ``p``
    """
    pa = as_prob(p, "p", normalize=normalize)
    k = as_int(k, "k", min_value=1)
    p2 = np.atleast_2d(pa)
    n = p2.shape[1]
    if k >= n:
        return pa.copy()
    order = np.argsort(-p2, axis=-1, kind="stable")[:, :k]
    out = np.zeros_like(p2)
    rows = np.arange(p2.shape[0])[:, None]
    out[rows, order] = p2[rows, order]
    out /= out.sum(axis=-1, keepdims=True)
    return out[0] if pa.ndim == 1 else out


# ----------------------------------------------------------------------------- drafts


def temperature_draft(p, temperature, *, normalize: bool = False) -> np.ndarray:
    """Draft ``q ∝ p^{1/temperature}``: the target's logits divided by the temperature.

    ``temperature > 1`` flattens, ``< 1`` sharpens (``-> 0`` tends to the argmax).  Computed
    in log space, ``log 0 = -inf`` stays ``-inf``: ``supp(q) = supp(p)``.  Temperatures so
    small that ``log p / temperature`` overflows (e.g. 1e-310) give the limit exactly: the
    argmax of ``p``, ties sharing the mass uniformly (never NaN).

    Parameters
    ----------
    p : array, shape (n,) or (batch, n)
    temperature : float > 0
    normalize : bool, default False
        Rescale the rows of ``p`` to sum to 1 first.

    Returns
    -------
    ndarray of the same shape as ``p``
    """
    pa = as_prob(p, "p", normalize=normalize)
    t = as_real(temperature, "temperature", low=0.0, low_open=True)
    with np.errstate(over="ignore"):
        factor = 1.0 / t
    if np.isfinite(factor):
        with np.errstate(over="ignore", invalid="ignore"):
            out = _softmax_logits(_log(pa) / t)  # the historical arithmetic, where finite
        if np.all(np.isfinite(out)):
            return out
    return _softmax_scaled(_log(pa), factor)


@dataclass(frozen=True)
class NoisyDraft:
    """Result of :func:`noisy_draft`.

    Attributes
    ----------
    q : ndarray, shape (n,) or (batch, n)
        The draft distribution(s).
    tv : float or ndarray
        Achieved ``TV(p, q)`` (within ``tol`` of the request).
    sigma : float or ndarray
        Noise scale found by the bisection.
    """

    q: np.ndarray
    tv: float | np.ndarray
    sigma: float | np.ndarray


def noisy_draft(p, tv, *, seed=0, tol=1e-6, max_iter=200,
                normalize: bool = False) -> NoisyDraft:
    """Draft with Gaussian logit noise scaled to a requested total variation distance.

    ``q(sigma) = softmax(log p + sigma * eps)`` with ``eps ~ N(0, I_n)`` drawn once from
    ``seed``; ``sigma >= 0`` is found by bisection so that ``|TV(p, q(sigma)) - tv| <= tol``
    (``TV = ½ Σ|p − q|``).  ``TV(p, q(0)) = 0`` and
    ``sigma -> TV`` is continuous, so the bisection on a bracket ``[0, sigma_hi]`` with
    ``TV(sigma_hi) >= tv`` always converges (TV need not be monotone in ``sigma``; the
    bracket still holds a solution).  If ``max_iter`` steps do not reach ``tol`` the
    last iterate is returned and its achieved TV reported.  Zeros: ``log 0 = -inf`` stays
    ``-inf``, so ``supp(q) = supp(p)``.

    Reachable distances: as ``sigma -> inf``, ``q`` tends to the one-hot vector at
    ``j* = argmax {eps_j : p_j > 0}`` and ``TV -> 1 - p_{j*}``; requests at or beyond that
    limit (e.g. any ``tv > 0`` for a one-hot ``p``) raise ``ValueError``.

    Parameters
    ----------
    p : array, shape (n,) or (batch, n)
        Target distribution(s).
    tv : float in [0, 1) or array of shape (batch,)
        Requested ``TV(p, q)`` (a scalar applies to every row).
    seed : int, SeedSequence or Generator, keyword-only
        Seed of the noise direction ``eps``.
    tol : float > 0
        Tolerance on the achieved TV.
    max_iter : int
        Maximum number of bisection steps.
    normalize : bool, default False
        Rescale the rows of ``p`` to sum to 1 first.

    Returns
    -------
    NoisyDraft
        ``q``, the achieved ``tv`` and the noise scale ``sigma`` (floats for 1-D ``p``,
        arrays for a batch).
    """
    pa = as_prob(p, "p", normalize=normalize)
    tol = as_real(tol, "tol", low=0.0, low_open=True)
    max_iter = as_int(max_iter, "max_iter", min_value=1)
    p2 = np.atleast_2d(pa)
    rows = p2.shape[0]
    if isinstance(tv, numbers.Real) and not isinstance(tv, bool | np.bool_):
        target = np.full(rows, as_real(tv, "tv", low=0.0, high=1.0, high_open=True))
    else:
        target = (None if isinstance(tv, bool | np.bool_) or tv is None
                  else as_real_array(tv, "tv")[0])
        if target is None or target.shape != (rows,) or pa.ndim == 1:
            raise ValueError(f"tv: must be a scalar or an array of shape ({rows},) for a batch")
        if not np.all(np.isfinite(target)) or np.any((target < 0) | (target >= 1)):
            raise ValueError("tv: entries must lie in [0, 1)")
    rng = as_rng(seed)
    eps = rng.standard_normal(p2.shape)
    logp = _log(p2)

    def draft(sig):
        return _softmax_logits(logp + sig[:, None] * eps)

    # reachability: the sigma -> inf limit
    masked = np.where(p2 > 0, eps, -np.inf)
    jstar = np.argmax(masked, axis=-1)
    limit = 1.0 - p2[np.arange(rows), jstar]
    unreachable = target >= limit - tol
    unreachable &= target > tol  # tv within tol of 0 is served by sigma = 0
    if np.any(unreachable):
        i = int(np.flatnonzero(unreachable)[0])
        raise ValueError(
            f"tv: {target[i]:.6g} is not reachable for row {i} with this noise direction "
            f"(supremum {limit[i]:.6g} = 1 - p[argmax noise]); lower tv or change seed"
        )
    lo = np.zeros(rows)
    hi = np.ones(rows)
    f_hi = tv_rows(p2, draft(hi))
    for _ in range(200):  # expand the bracket (TV(hi) -> limit > target)
        grow = f_hi < target
        if not np.any(grow):
            break
        hi[grow] *= 2.0
        f_hi[grow] = tv_rows(p2[grow], _softmax_logits(logp[grow] + hi[grow, None] * eps[grow]))
    if np.any(f_hi < target):
        i = int(np.flatnonzero(f_hi < target)[0])
        raise ValueError(
            f"tv: {target[i]:.6g} is not reachable numerically for row {i} (TV stalls at "
            f"{f_hi[i]:.6g} below the supremum {limit[i]:.6g})"
        )
    sig = np.where(target <= tol, 0.0, 0.5 * (lo + hi))
    f = tv_rows(p2, draft(sig))
    for _ in range(max_iter):
        done = np.abs(f - target) <= tol
        if np.all(done):
            break
        below = f < target
        lo = np.where(~done & below, sig, lo)
        hi = np.where(~done & ~below, sig, hi)
        sig = np.where(done, sig, 0.5 * (lo + hi))
        f = tv_rows(p2, draft(sig))
    q = draft(sig)
    q[sig == 0] = p2[sig == 0]  # no noise: the target itself, bit for bit
    f = tv_rows(p2, q)
    if pa.ndim == 1:
        return NoisyDraft(q=q[0], tv=float(f[0]), sigma=float(sig[0]))
    return NoisyDraft(q=q, tv=f, sigma=sig)


def logit_noise_draft(p, direction, sigma, *, normalize: bool = False) -> np.ndarray:
    """Draft ``q = softmax(log p + sigma * direction)``: Gaussian-style logit noise along a
    given direction at a given scale.

    The family of :func:`noisy_draft` with its two choices made by the caller: the noise
    direction ``eps`` (e.g. one fixed draw shared by several drafts) and the scale ``sigma``
    (e.g. solved by a root finder for a target distance).  ``sigma = 0`` gives back ``p``
    (up to rounding); ``log 0 = -inf`` stays ``-inf``, so a token with ``p = 0`` keeps
    ``q = 0``.  A ``sigma`` whose logits overflow a float is a ``ValueError``.

    Parameters
    ----------
    p : array, shape (n,) or (batch, n)
        Target distribution(s).
    direction : array, shape (n,) or that of ``p``
        Finite noise direction (one direction is shared by every row of a batch).
    sigma : float >= 0 or array of shape (batch,)
        Noise scale (a scalar applies to every row).
    normalize : bool, default False
        Rescale the rows of ``p`` to sum to 1 first.
    """
    pa = as_prob(p, "p", normalize=normalize)
    eps, _ = as_real_array(direction, "direction")
    if eps.shape not in (pa.shape, pa.shape[-1:]):
        raise ValueError(f"direction: must have shape {pa.shape[-1:]} or {pa.shape} (that of "
                         f"p), got {eps.shape}")
    if not np.all(np.isfinite(eps)):
        raise ValueError("direction: contains NaN or infinite entries")
    if isinstance(sigma, numbers.Real) and not isinstance(sigma, bool | np.bool_):
        sig = as_real(sigma, "sigma", low=0.0)
    else:
        sig = (None if isinstance(sigma, bool | np.bool_) or sigma is None
               else as_real_array(sigma, "sigma")[0])
        if sig is None or pa.ndim == 1 or sig.shape != pa.shape[:1]:
            raise ValueError(f"sigma: must be a scalar or, for a batch, an array of shape "
                             f"{pa.shape[:1]}")
        if not np.all(np.isfinite(sig)) or np.any(sig < 0):
            raise ValueError("sigma: entries must be finite and >= 0")
        sig = sig[:, None]
    with np.errstate(over="ignore", invalid="ignore"):
        logits = _log(pa) + sig * eps
        spread = logits - np.max(logits, axis=-1, keepdims=True)
    if not np.all(np.isfinite(spread) | (pa == 0)):
        raise ValueError("sigma: sigma * direction overflows a float")
    with np.errstate(over="ignore"):  # a spread beyond the float range only underflows
        return _softmax_logits(logits)


def mixture_draft(p, other, weight, *, normalize: bool = False) -> np.ndarray:
    """Draft ``q = (1 - weight) * p + weight * other``.

    ``TV(p, q) = weight * TV(p, other)`` exactly, so ``weight`` controls the mismatch
    linearly.  ``supp(q) = supp(p) ∪ supp(other)`` for ``0 < weight < 1``.

    Parameters
    ----------
    p, other : array, shape (n,) or (batch, n)
        Target and the distribution mixed in (a 1-D argument broadcasts against a batch).
    weight : float in [0, 1]
    normalize : bool, default False
        Rescale the rows of ``p`` and ``other`` to sum to 1 first.

    Returns
    -------
    ndarray, 1-D if both inputs are 1-D, else 2-D
    """
    p2, o2, batched = as_pair(p, other, normalize=normalize, names=("p", "other"))
    w = as_real(weight, "weight", low=0.0, high=1.0)
    q = (1.0 - w) * p2 + w * o2
    q /= q.sum(axis=-1, keepdims=True)
    return q if batched else q[0]
