"""Distances between a target ``p`` and a draft ``q``: total variation, KL divergence, and the
no-communication coupling limit (MATH.md §2.4).

Every function takes one pair (1-D arrays, returns a Python float) or a batch of pairs
(2-D arrays, rows are contexts, returns a 1-D array; a 1-D argument is broadcast against a
2-D one), validates it with :func:`specbound._validation.as_pair` and accepts
``normalize=True`` to rescale rows that do not sum to 1.
"""

from __future__ import annotations

import numpy as np
from scipy.special import rel_entr

from specbound._validation import as_pair, squeeze_out

__all__ = ["tv_distance", "kl_divergence", "no_communication_limit"]


def _tv(p2: np.ndarray, q2: np.ndarray) -> np.ndarray:
    return np.clip(0.5 * np.sum(np.abs(p2 - q2), axis=1), 0.0, 1.0)


def tv_distance(p, q, *, normalize: bool = False):
    r"""Total variation distance :math:`\mathrm{TV}(p, q) = \tfrac12 \sum_i |p_i - q_i|`.

    ``1 - TV`` is the acceptance probability of standard speculative sampling (the maximal
    coupling; seed 000, Algorithm 1 and §3).

    Parameters
    ----------
    p, q : array_like, shape (n,) or (rows, n)
        Target and draft probability vectors (rows of a 2-D array are contexts).
    normalize : bool, default False
        Rescale every row to sum to 1 instead of rejecting rows that do not sum to 1
        within ``1e-9``.

    Returns
    -------
    float or ndarray of shape (rows,)
        The distance, in ``[0, 1]``.

    Raises
    ------
    ValueError
        NaN/inf or negative entries, rows not summing to 1, shape mismatch, empty input,
        wrong number of dimensions; the message starts with the argument's name.

    Notes
    -----
    Zeros need no special handling: a token with ``p_i = q_i = 0`` contributes 0.
    """
    p2, q2, batched = as_pair(p, q, normalize=normalize)
    return squeeze_out(_tv(p2, q2), batched)


def kl_divergence(p, q, *, normalize: bool = False):
    r"""Kullback–Leibler divergence :math:`\mathrm{KL}(p\,\|\,q) = \sum_i p_i \log(p_i/q_i)`
    in nats.

    Parameters
    ----------
    p, q : array_like, shape (n,) or (rows, n)
        Probability vectors; the divergence is of ``p`` from ``q``.
    normalize : bool, default False
        Rescale rows to sum to 1.

    Returns
    -------
    float or ndarray of shape (rows,)
        The divergence in ``[0, inf]``.

    Raises
    ------
    ValueError
        As :func:`tv_distance`.

    Notes
    -----
    Zeros follow the usual limits: a token with ``p_i = 0`` contributes 0 (``0 log 0 = 0``,
    also when ``q_i = 0``), and the divergence is ``+inf`` when ``p`` is not absolutely
    continuous with respect to ``q`` (some ``p_i > 0 = q_i``).  No warning is emitted.
    """
    p2, q2, batched = as_pair(p, q, normalize=normalize)
    kl = np.sum(rel_entr(p2, q2), axis=1)
    return squeeze_out(np.maximum(kl, 0.0), batched)


def no_communication_limit(p, q, *, normalize: bool = False):
    r"""The coupling-without-communication limit :math:`(1-\mathrm{TV})/(1+\mathrm{TV})`.

    MATH.md §2.4 (Bavarian et al. 2016; Daliri et al. 2025).  This number is a **worst-case
    limit**, not an upper bound on every pair: the exponential race (Gumbel/PFR coupling,
    seed 000 Alg. 2) achieves ``P(X = Y) >= (1 - TV)/(1 + TV)`` *for every* pair ``(p, q)``,
    and no coupling without communication can beat ``(1 - TV)/(1 + TV)`` simultaneously for
    all pairs at that total variation.  Seed 000's Eq. (4) writes the relation as a plain
    "<=", which would wrongly suggest that no pair can exceed it; for a given pair the
    exponential-race acceptance (see :func:`specbound.theory.exact_acceptance` with
    ``scheme="exp_race"``) is at least this value and can be strictly larger.

    Parameters
    ----------
    p, q : array_like, shape (n,) or (rows, n)
        Target and draft probability vectors.
    normalize : bool, default False
        Rescale rows to sum to 1.

    Returns
    -------
    float or ndarray of shape (rows,)
        ``(1 - TV)/(1 + TV)`` in ``[0, 1]`` (0 for disjoint supports, 1 for ``p = q``).

    Raises
    ------
    ValueError
        As :func:`tv_distance`.
    """
    p2, q2, batched = as_pair(p, q, normalize=normalize)
    tv = _tv(p2, q2)
    return squeeze_out((1.0 - tv) / (1.0 + tv), batched)
