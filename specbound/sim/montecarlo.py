"""Monte Carlo estimators of acceptance probabilities and emitted-token laws (batched, parallel).

Randomness design
-----------------
The trials of each (p, q) pair are pre-split into chunks of ``CHUNK`` trials.  The seed is
turned into a :class:`numpy.random.SeedSequence`; ``SeedSequence.spawn`` gives one child per
pair, and each child's ``generate_state`` gives one independent 64-bit label per chunk (never
``seed + i``).  Trial ``t`` of a chunk reads the counter-based keyed PRF of
:mod:`specbound.sim.prf` at label ``trial_label(chunk_label, t)``; the kernel therefore
computes its own uniforms yet stays a pure function of its inputs (no generator state), so
the chunks run under ``numba.prange`` in any order and on any number of threads with
bit-for-bit identical results, without materialising ``n x vocabulary x B`` uniforms.
The results depend on ``seed`` and ``CHUNK`` only.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from specbound._validation import as_bool_mask, as_int, as_pair, as_seedseq
from specbound.sim import _kernels as K
from specbound.sim.results import Estimate
from specbound.sim.samplers import MAX_SCAN, _check_scheme_B, _check_w, _prepare

__all__ = ["CHUNK", "estimate_acceptance", "sample_emitted"]

#: trials per chunk (part of the definition of the random stream: changing it changes results)
CHUNK = 256


def _chunks(m: int, n: int, ss: np.random.SeedSequence):
    n_chunks = -(-n // CHUNK)
    children = ss.spawn(m)
    labels = np.concatenate([c.generate_state(n_chunks, np.uint64) for c in children])
    pair = np.repeat(np.arange(m, dtype=np.int64), n_chunks)
    start = np.tile(np.arange(n_chunks, dtype=np.int64) * CHUNK, m)
    length = np.minimum(CHUNK, n - start).astype(np.int64)
    return pair, start, length, labels.astype(np.uint64)


def _run(p, q, scheme, B, n, seed, w, store):
    p2, q2, batched = as_pair(p, q)
    B = _check_scheme_B(scheme, B)
    n = as_int(n, "n", min_value=1)
    w = _check_w(w, scheme)
    ss = as_seedseq(seed)
    prep = _prepare(p2, q2, scheme, B, w)
    m = p2.shape[0]
    pair, start, length, labels = _chunks(m, n, ss)
    if store:
        out_y = np.empty((m, n), np.int64)
        out_x = np.empty((m, n, B), np.int64)
    else:
        out_y = np.empty((1, 1), np.int64)
        out_x = np.empty((1, 1, 1), np.int64)
    succ = np.zeros(pair.size, np.int64)
    status = np.zeros(pair.size, np.int64)
    K.batch_kernel(prep.code, B, prep.p, prep.q, prep.qcdf, prep.targ, prep.scale, prep.fincdf,
                   prep.ratio, prep.w, MAX_SCAN, pair, start, length, labels, store, out_y,
                   out_x, succ, status)
    if np.any(status != 0):
        raise RuntimeError(f"mpfr_scan: a scan did not stop within {MAX_SCAN} candidates")
    successes = np.zeros(m, np.int64)
    np.add.at(successes, pair, succ)
    return successes, out_y, out_x, batched, n


def _wilson(k, n, cl=0.95):
    z = stats.norm.ppf(0.5 + cl / 2)
    phat = k / n
    den = 1 + z * z / n
    center = (phat + z * z / (2 * n)) / den
    half = z * np.sqrt(phat * (1 - phat) / n + z * z / (4 * n * n)) / den
    return np.clip(center - half, 0, 1), np.clip(center + half, 0, 1)


def estimate_acceptance(p, q, scheme, B=1, n=100_000, seed=0, *, w=None):
    """Monte Carlo estimate of the probability that a draft is accepted.

    Runs ``n`` independent steps of :func:`specbound.sim.sample_step`'s sampler ``scheme``
    per (p, q) pair and counts the accepted ones (for every scheme: emitted token among the
    drafts).  Exact values to compare with: ``sd`` 1 - TV; ``exp_race``
    ``sum_i p_i/(1+alpha_i)``; ``mpfr`` ``1 - sum_i p_i (alpha_i/(1+alpha_i))^B`` (MATH.md
    §2.2); ``gls`` MATH.md §2.3; ``specinfer`` ``1 - prod_j TV(p_j, q)``; ``spectr``
    ``1 - (1 - beta(rho))^B``.

    Parameters
    ----------
    p, q : array_like, shape (n_vocab,) or (m, n_vocab)
        Target and draft distributions (rows are contexts; a 1-D argument is broadcast).
        Zeros are allowed; ``mpfr_scan`` needs ``p << q``.
    scheme : str
        ``"sd"``, ``"exp_race"``, ``"mpfr"``, ``"mpfr_direct"``, ``"mpfr_scan"``, ``"gls"``,
        ``"specinfer"`` or ``"spectr"``.
    B : int
        Number of drafts (1 for ``"sd"``, ``"exp_race"``).
    n : int
        Trials per pair (>= 1).
    seed : int, SeedSequence or Generator
        SPEC 7 seed; results are bit-for-bit reproducible for any number of threads (see the
        module docstring).
    w : float, optional
        Ratio bound for ``"mpfr_scan"`` (see :func:`specbound.sim.sample_step`).

    Returns
    -------
    Estimate or pandas.DataFrame
        For one pair an :class:`~specbound.sim.results.Estimate` (``mean``, ``stderr``,
        ``n``, ``successes``, ``ci(confidence_level, method)``).  For a 2-D batch a DataFrame
        with one row per pair and columns ``mean``, ``stderr``, ``n``, ``successes``,
        ``ci_low``, ``ci_high`` (95% Wilson interval, as ``Estimate.ci()``); rebuild an
        ``Estimate`` of row ``i`` with ``Estimate.from_successes(df.successes[i], n)``.
    """
    successes, _, _, batched, n = _run(p, q, scheme, B, n, seed, w, store=False)
    if not batched:
        return Estimate.from_successes(int(successes[0]), n)
    mean = successes / n
    lo, hi = _wilson(successes, n)
    return pd.DataFrame({
        "mean": mean,
        "stderr": np.sqrt(mean * (1 - mean) / n),
        "n": np.full(successes.size, n, dtype=np.int64),
        "successes": successes.astype(np.int64),
        "ci_low": lo,
        "ci_high": hi,
    })


def sample_emitted(p, q, scheme, B=1, n=100_000, seed=0, *, return_drafts=False, w=None):
    """Emitted token ids of ``n`` independent steps (for goodness-of-fit against ``p``).

    Parameters are those of :func:`estimate_acceptance`; the same ``seed`` gives the same
    trials in both (trial ``t`` is accepted in ``estimate_acceptance`` iff
    ``tokens[t] in drafts[t]``).

    Returns
    -------
    tokens : ndarray of int64, shape (n,) or (m, n)
        The emitted tokens (rows are pairs for a 2-D batch).
    drafts : ndarray of int64, shape (n, B) or (m, n, B)
        Only with ``return_drafts=True``: the draft tokens of each trial.
    """
    return_drafts = bool(as_bool_mask(return_drafts, "return_drafts", ()))
    _, out_y, out_x, batched, n = _run(p, q, scheme, B, n, seed, w, store=True)
    if not batched:
        out_y, out_x = out_y[0], out_x[0]
    return (out_y, out_x) if return_drafts else out_y
