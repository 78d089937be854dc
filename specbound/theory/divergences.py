"""Distances between a target ``p`` and a draft ``q``: total variation, KL divergence, and the
no-communication coupling limit (Bavarian et al. 2016; Daliri et al. 2025).

Every public function takes one pair (1-D arrays, returns a Python float) or a batch of pairs
(2-D arrays, rows are contexts, returns a 1-D array; a 1-D argument is broadcast against a
2-D one), validates it with :func:`specbound._validation.as_pair` and accepts
``normalize=True`` to rescale rows that do not sum to 1 (the sum tolerance is documented in
:mod:`specbound._validation`).

Row-wise kernels (internal API)
-------------------------------
:func:`tv_rows`, :func:`kl_rows`, :func:`js_rows` and :func:`entropy_rows` are the one
implementation of these quantities in the package: the public functions here, the lossy
rules (:mod:`specbound.theory.lossy`, the Fuzzy SD gate), the tree analysis
(:mod:`specbound.theory.tree`) and the samplers and draft families of :mod:`specbound.sim`
all call them, so a gate ``D(p, q) <= threshold`` opens on the same side everywhere.  They
take validated 2-D float64 arrays (rows are contexts; a 1-D pair is treated as one row) and
return one value per row, without warnings.
"""

from __future__ import annotations

import numpy as np

from specbound._validation import as_pair, squeeze_out

__all__ = ["tv_distance", "kl_divergence", "no_communication_limit"]


# ---------------------------------------------------------------------------------------------
# row-wise kernels (validated input; internal API shared with theory.lossy, theory.tree, sim)
# ---------------------------------------------------------------------------------------------
def tv_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    r"""``TV(a_r, b_r) = ½ Σ_i |a_ri - b_ri|`` per row (last axis), not clipped."""
    return 0.5 * np.abs(a - b).sum(axis=-1)


def kl_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    r"""``KL(a_r ‖ b_r) = Σ_i a_ri (log a_ri - log b_ri)`` per row (last axis), in nats.

    ``0 log 0 = 0`` (also where ``b = 0``); ``+inf`` where some ``a > 0 = b``; clipped at 0
    (rounding can make the KL of equal laws a tiny negative number).  The difference of logs
    (not ``log(a/b)``) keeps it finite when ``a/b`` would overflow.
    """
    a, b = np.broadcast_arrays(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))
    pos = a > 0
    bad = np.any(pos & (b <= 0), axis=-1)
    ok = pos & (b > 0)
    terms = np.zeros(a.shape)
    terms[ok] = a[ok] * (np.log(a[ok]) - np.log(b[ok]))
    out = np.where(bad, np.inf, terms.sum(axis=-1))
    return np.maximum(out, 0.0)


def js_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    r"""Jensen--Shannon divergence ``½ KL(a ‖ m) + ½ KL(b ‖ m)``, ``m = (a + b)/2``, in nats."""
    m = 0.5 * (a + b)
    return 0.5 * kl_rows(a, m) + 0.5 * kl_rows(b, m)


def entropy_rows(p: np.ndarray) -> np.ndarray:
    r"""Shannon entropy ``H(p_r) = -Σ_i p_ri log p_ri`` per row (last axis), in nats."""
    terms = np.zeros_like(p)
    pos = p > 0
    terms[pos] = -p[pos] * np.log(p[pos])
    return terms.sum(axis=-1)


def _tv(p2: np.ndarray, q2: np.ndarray) -> np.ndarray:
    return np.clip(tv_rows(p2, q2), 0.0, 1.0)


def tv_distance(p, q, *, normalize: bool = False):
    r"""Total variation distance :math:`\mathrm{TV}(p, q) = \tfrac12 \sum_i |p_i - q_i|`.

    ``1 - TV`` is the acceptance probability of standard speculative sampling (the maximal
    coupling; Leviathan et al. 2023, arXiv:2211.17192; Chen et al. 2023, arXiv:2302.01318; Liu,
    Wan, Gao & Gündüz 2026, arXiv:2609.21858, Algorithm 1 and §3).

    Parameters
    ----------
    p, q : array_like, shape (n,) or (rows, n)
        Target and draft probability vectors (rows of a 2-D array are contexts).
    normalize : bool, default False
        Rescale every row to sum to 1 instead of rejecting rows that do not sum to 1
        within the tolerance of :func:`specbound._validation.sum_atol` (``1e-9`` for float64
        input; scaled to the dtype and length, e.g. ``4.9e-4`` for a float32 softmax over
        256k tokens).

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
    Computed as ``Σ p_i (log p_i - log q_i)``, which stays finite when ``p_i/q_i`` would
    overflow (e.g. ``q_i = 1e-310``).
    """
    p2, q2, batched = as_pair(p, q, normalize=normalize)
    return squeeze_out(kl_rows(p2, q2), batched)


def no_communication_limit(p, q, *, normalize: bool = False):
    r"""The coupling-without-communication limit :math:`(1-\mathrm{TV})/(1+\mathrm{TV})`.

    Bavarian et al. (2016); Daliri et al. (2025).  This number is a **worst-case
    limit**, not an upper bound on every pair: the exponential race (Gumbel/PFR coupling,
    Liu, Wan, Gao & Gündüz 2026, arXiv:2609.21858, Algorithm 2) achieves
    ``P(X = Y) >= (1 - TV)/(1 + TV)`` *for every* pair ``(p, q)``, and no coupling without
    communication can beat ``(1 - TV)/(1 + TV)`` simultaneously for all pairs at that total
    variation.  Liu et al. (2026), Eq. (4), write the relation as a plain "<=", which would
    wrongly suggest that no pair can exceed it; for a given pair the exponential-race
    acceptance (see :func:`specbound.theory.exact_acceptance` with
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
