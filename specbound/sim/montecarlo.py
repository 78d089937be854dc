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

Sizes and run time
------------------
A call runs at most :data:`MAX_TRIALS` trials in all (pairs times ``n``; the chunk labels
take 8 bytes per ``CHUNK`` trials), and :func:`sample_emitted` stores at most
:data:`MAX_OUTPUT_BYTES` of tokens; larger requests are refused up front with a
``ValueError`` naming ``n`` and the size needed.  A call whose estimated work is long (see
:func:`_work_units`) runs in segments of chunks and shows a progress bar on stderr (``tqdm``
if installed); segmenting does not change any result.
"""


from __future__ import annotations

import math
import sys

import numpy as np

from specbound._validation import as_bool, as_int, as_seedseq
from specbound.results import Estimate, EstimateBatch
from specbound.sim import _kernels as K
from specbound.sim.samplers import MAX_SCAN, PreparedPairs, prepare_pairs

__all__ = ["CHUNK", "MAX_OUTPUT_BYTES", "MAX_TRIALS", "estimate_acceptance", "sample_emitted"]

#: trials per chunk (part of the definition of the random stream: changing it changes results)
CHUNK = 256
#: most trials (pairs x n) one call runs: 2**34 (about 1.7e10) trials, 512 MiB of chunk labels
MAX_TRIALS = 2**34
#: most bytes of emitted tokens (and drafts, with ``return_drafts``) one sample_emitted call stores
MAX_OUTPUT_BYTES = 2**32
#: estimated work (in units of one clock draw, about 10 ns) above which a call shows progress
PROGRESS_WORK = 3 * 10**9
_SEGMENTS = 100


def _chunks(m: int, n: int, ss: np.random.SeedSequence):
    n_chunks = -(-n // CHUNK)
    children = ss.spawn(m)
    labels = np.concatenate([c.generate_state(n_chunks, np.uint64) for c in children])
    pair = np.repeat(np.arange(m, dtype=np.int64), n_chunks)
    start = np.tile(np.arange(n_chunks, dtype=np.int64) * CHUNK, m)
    length = np.minimum(CHUNK, n - start).astype(np.int64)
    return pair, start, length, labels.astype(np.uint64)


def _work_units(prep: PreparedPairs) -> float:
    """Rough cost of one trial in clock draws (for the progress decision only)."""
    n, B = prep.n, prep.B
    if prep.scheme in ("sd", "specinfer", "spectr"):
        return B + 1.0
    if prep.scheme == "exp_race":
        return float(n)
    if prep.scheme == "mpfr":
        return n + B * math.log2(B + 1.0)
    if prep.scheme == "mpfr_scan":
        return B + 1.0 / float(np.min(prep.arrays.w))
    return float(n) * B  # mpfr_direct, gls


def _gib(nbytes: int) -> str:
    """``nbytes`` in GiB for a message (also for integers too large for a float)."""
    if nbytes.bit_length() > 1000:
        return f"2^{nbytes.bit_length() - 1} bytes or more"
    return f"{nbytes / 2**30:.3g} GiB"


def _check_size(m, n, B, store_y, store_x):
    total = m * n
    need = 8 * total * ((1 if store_y else 0) + (B if store_x else 0))
    if need > MAX_OUTPUT_BYTES:
        raise ValueError(
            f"n: storing {m} x {n:,} trials would need {_gib(need)}, above the limit "
            f"MAX_OUTPUT_BYTES = {MAX_OUTPUT_BYTES / 2**30:.3g} GiB; draw fewer samples per "
            "call (or use estimate_acceptance, which stores nothing)"
        )
    if total > MAX_TRIALS:
        raise ValueError(
            f"n: {m} pair(s) x n = {n:,} trials exceeds the limit MAX_TRIALS = {MAX_TRIALS:,} "
            f"per call ({_gib(total // CHUNK * 8)} of chunk labels); split the work "
            "over several seeds"
        )


class _Progress:
    """A progress bar on stderr: ``tqdm`` if it is installed, else plain percentage lines."""

    def __init__(self, total, desc):
        self.total = total
        self.done = 0
        try:
            from tqdm.auto import tqdm
        except ImportError:  # pragma: no cover - tqdm is a dependency, optional at import
            self.bar = None
            print(f"{desc}: {total:,} trials", file=sys.stderr, flush=True)
        else:
            self.bar = tqdm(total=total, desc=desc, unit="trial", unit_scale=True, leave=False)

    def update(self, k):
        self.done += k
        if self.bar is not None:
            self.bar.update(k)
        else:  # pragma: no cover
            print(f"  {100 * self.done / self.total:5.1f}%", file=sys.stderr, flush=True)

    def close(self):
        if self.bar is not None:
            self.bar.close()


def _run(p, q, scheme, B, n, seed, w, store_y, store_x, progress):
    prep = prepare_pairs(p, q, scheme, B, w)
    B = prep.B
    n = as_int(n, "n", min_value=1)
    ss = as_seedseq(seed)
    progress = None if progress is None else as_bool(progress, "progress")
    m = prep.m
    _check_size(m, n, B, store_y, store_x)
    pair, start, length, labels = _chunks(m, n, ss)
    out_y = np.empty((m, n) if store_y else (1, 1), np.int64)
    out_x = np.empty((m, n, B) if store_x else (1, 1, 1), np.int64)
    succ = np.zeros(pair.size, np.int64)
    status = np.zeros(pair.size, np.int64)
    if progress is None:
        progress = m * n * _work_units(prep) > PROGRESS_WORK
    n_seg = min(_SEGMENTS, pair.size) if progress else 1
    bounds = np.linspace(0, pair.size, n_seg + 1).astype(np.int64)
    bar = _Progress(m * n, f"{scheme} (B={B})") if progress else None
    try:
        for a, b in zip(bounds[:-1], bounds[1:], strict=True):
            # chunk c always reads its own label: segmenting changes no result
            K.batch_kernel(prep.code, B, prep.arrays, MAX_SCAN,
                           K.Chunks(pair[a:b], start[a:b], length[a:b], labels[a:b]),
                           store_y, store_x, K.Trials(out_y, out_x, succ[a:b], status[a:b]))
            if bar is not None:
                bar.update(int(length[a:b].sum()))
    finally:
        if bar is not None:
            bar.close()
    if np.any(status != 0):  # pragma: no cover - probability exp(-1000) after the checks
        raise RuntimeError(f"mpfr_scan: a scan did not stop within {MAX_SCAN} candidates")
    successes = np.zeros(m, np.int64)
    np.add.at(successes, pair, succ)
    return successes, out_y, out_x, prep.batched, n


def estimate_acceptance(p, q, scheme, B=1, n=100_000, *, seed=0, w=None, progress=None):
    """Monte Carlo estimate of the probability that a draft is accepted.

    Runs ``n`` independent steps of :func:`specbound.sim.sample_step`'s sampler ``scheme``
    per (p, q) pair and counts the accepted ones (for every scheme: emitted token among the
    drafts).  Exact values to compare with (``specbound.theory.exact_acceptance``): ``sd``
    1 - TV; ``exp_race`` ``sum_i p_i/(1+alpha_i)``; ``mpfr``
    ``1 - sum_i p_i (alpha_i/(1+alpha_i))^B`` (the PML expression of Liu, Wan, Gao & Gündüz
    2026, arXiv:2609.21858, Thm. B.1, which is exact for Alg. 6); ``gls`` the quadrature of
    the list coupling (Rowan et al. 2025); ``specinfer`` ``1 - prod_j TV(p_j, q)``;
    ``spectr`` ``1 - (1 - beta(rho))^B``.

    Parameters
    ----------
    p, q : array_like, shape (n_vocab,) or (m, n_vocab)
        Target and draft distributions (rows are contexts; a 1-D argument is broadcast).
        Zeros are allowed; ``mpfr_scan`` needs ``p << q``.
    scheme : str
        One of :data:`specbound.sim.SAMPLERS`.
    B : int
        Number of drafts (1 for ``"sd"``, ``"exp_race"``; at most
        ``specbound.sim.samplers.MAX_B``).
    n : int
        Trials per pair (>= 1; pairs x n at most :data:`MAX_TRIALS`).
    seed : int, SeedSequence or Generator, keyword-only
        SPEC 7 seed; results are bit-for-bit reproducible for any number of threads (see the
        module docstring).
    w : float, optional
        Ratio bound for ``"mpfr_scan"`` (see :func:`specbound.sim.sample_step`).
    progress : bool or None
        Show a progress bar on stderr; ``None`` (default): only when the estimated work is
        long (above ``PROGRESS_WORK`` clock draws, tens of seconds).

    Returns
    -------
    Estimate or EstimateBatch
        For one pair an :class:`~specbound.results.Estimate` (``mean``, ``stderr``, ``n``,
        ``successes``, ``ci(confidence_level, method)``).  For a 2-D batch an
        :class:`~specbound.results.EstimateBatch` with one entry per pair (``batch[i]`` is
        the ``Estimate`` of pair ``i``; ``batch.to_frame()`` has the columns ``mean``,
        ``stderr``, ``n``, ``successes``, ``ci_low``, ``ci_high``, the 95% Wilson interval).
    """
    successes, _, _, batched, n = _run(p, q, scheme, B, n, seed, w, store_y=False,
                                       store_x=False, progress=progress)
    if not batched:
        return Estimate.from_successes(int(successes[0]), n)
    return EstimateBatch.from_successes(successes, n)


def sample_emitted(p, q, scheme, B=1, n=100_000, *, seed=0, return_drafts=False, w=None,
                   progress=None):
    """Emitted token ids of ``n`` independent steps (for goodness-of-fit against ``p``).

    Parameters are those of :func:`estimate_acceptance`; the same ``seed`` gives the same
    trials in both (trial ``t`` is accepted in ``estimate_acceptance`` iff
    ``tokens[t] in drafts[t]``).  The stored tokens (and drafts) may take at most
    :data:`MAX_OUTPUT_BYTES`.

    Returns
    -------
    tokens : ndarray of int64, shape (n,) or (m, n)
        The emitted tokens (rows are pairs for a 2-D batch).
    drafts : ndarray of int64, shape (n, B) or (m, n, B)
        Only with ``return_drafts=True``: the draft tokens of each trial.
    """
    return_drafts = as_bool(return_drafts, "return_drafts")
    _, out_y, out_x, batched, n = _run(p, q, scheme, B, n, seed, w, store_y=True,
                                       store_x=return_drafts, progress=progress)
    if not batched:
        out_y, out_x = out_y[0], out_x[0]
    return (out_y, out_x) if return_drafts else out_y
