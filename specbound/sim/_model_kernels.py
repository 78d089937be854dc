"""Numba kernels of the synthetic language models (private).

Every kernel is a pure function of its inputs: the "randomness" of a :class:`SyntheticLM` is
the counter-based mixer of :mod:`specbound.sim.prf` applied to (model seed, context window,
token), so a decoding kernel can query any context without storage.  The NumPy references
live in :mod:`specbound.sim._reference` (``window_label``, ``gaussian_field``,
``synthetic_probs``) and are compared with the kernels in ``tests/test_sim_models.py``.
"""

from __future__ import annotations

import numpy as np

from specbound.sim._config import JIT, njit
from specbound.sim.prf import _GOLDEN, _ONE, _mix

_S32 = np.uint64(32)
_LO32 = np.uint64(0xFFFFFFFF)
_INV32 = 1.0 / 4294967296.0  # 2**-32

KIND_GAUSSIAN = 0
KIND_ZIPF = 1
KIND_GAUSSIAN16 = 2
_TWO_PI = 2.0 * np.pi
_M16 = np.uint64(0xFFFF)
_S16 = np.uint64(16)
_S48 = np.uint64(48)
#: number of entries of the quantile table of the ``"gaussian16"`` kind
TABLE_SIZE = 1 << 16
_TABLE = None


def normal_table() -> np.ndarray:
    """The quantile table of the ``"gaussian16"`` kind (built once and shared; do not write).

    ``Q[j] = c * Phi^{-1}((j + 1/2) / 2^16)`` for ``j = 0..2^16 - 1``: the midpoint quantiles
    of the standard normal, made exactly antisymmetric (``Q[2^16 - 1 - j] = -Q[j]``) and
    rescaled by ``c`` to mean 0 and variance 1 (``c - 1`` is about 1.6e-4: the midpoint
    rule truncates the tails at +-4.33).  A uniform 16-bit index ``j`` makes ``Q[j]`` a
    discretised N(0, 1) variate.
    """
    global _TABLE
    if _TABLE is None:
        from scipy.special import ndtri

        q = ndtri((np.arange(TABLE_SIZE, dtype=np.float64) + 0.5) / TABLE_SIZE)
        q = 0.5 * (q - q[::-1])
        q = q / np.sqrt(np.mean(q * q))
        _TABLE = q
    return _TABLE


@njit(**JIT)
def window_label(base, order, ctx):
    """64-bit label of (``base``, ``order``, the last ``order`` tokens of ``ctx``).

    Positions before the start of ``ctx`` are padded with token ``-1`` (beginning of
    sequence), so a short context is a well-defined window of its own.
    """
    h = _mix(np.uint64(base) + _GOLDEN * np.uint64(order + 1))
    n = ctx.shape[0]
    for i in range(order):
        pos = n - order + i
        tok = ctx[pos] if pos >= 0 else -1
        h = _mix(h + _GOLDEN * np.uint64(tok + 2))
    return h


@njit(**JIT)
def _add_gaussian_field(label, weight, out):
    """``out[v] += weight * g_v`` with ``g_v`` i.i.d. N(0, 1) from (label, v).

    Tokens ``2i`` and ``2i+1`` share one Box-Muller pair whose two uniforms are the high and
    low 32 bits of ``mix(mix(label + G (i+1)) + G)`` (resolution 2^-32 keeps the normal
    tails exact to 6.6 sigma).
    """
    n = out.shape[0]
    for i in range((n + 1) // 2):
        h = _mix(_mix(np.uint64(label) + _GOLDEN * (np.uint64(i) + _ONE)) + _GOLDEN)
        u1 = (np.float64(h >> _S32) + 0.5) * _INV32
        u2 = (np.float64(h & _LO32) + 0.5) * _INV32
        r = np.sqrt(-2.0 * np.log(u1))
        out[2 * i] += weight * r * np.cos(_TWO_PI * u2)
        if 2 * i + 1 < n:
            out[2 * i + 1] += weight * r * np.sin(_TWO_PI * u2)


@njit(**JIT)
def _add_table_field(label, weight, table, out):
    """``out[v] += weight * Q[j_v]`` with ``j_v`` i.i.d. uniform 16-bit indices from
    (label, v) and ``Q`` the quantile table (:func:`normal_table`).

    Tokens ``4i .. 4i+3`` take the four 16-bit quarters (low to high) of
    ``mix(label + G (i+1))``, one SplitMix64 output per four tokens: no logarithm or
    trigonometric function, a table lookup per token.
    """
    n = out.shape[0]
    lab = np.uint64(label)
    nq = n >> 2
    for i in range(nq):
        h = _mix(lab + _GOLDEN * (np.uint64(i) + _ONE))
        out[4 * i] += weight * table[h & _M16]
        out[4 * i + 1] += weight * table[(h >> _S16) & _M16]
        out[4 * i + 2] += weight * table[(h >> _S32) & _M16]
        out[4 * i + 3] += weight * table[h >> _S48]
    if 4 * nq < n:
        h = _mix(lab + _GOLDEN * (np.uint64(nq) + _ONE))
        for j in range(n - 4 * nq):
            out[4 * nq + j] += weight * table[(h >> np.uint64(16 * j)) & _M16]


@njit(**JIT)
def add_field(kind, label, weight, table, out):
    """The Gaussian field of ``kind``: Box-Muller (``"gaussian"``, ``"zipf"``'s draft noise)
    or the quantile table (``"gaussian16"``)."""
    if kind == KIND_GAUSSIAN16:
        _add_table_field(label, weight, table, out)
    else:
        _add_gaussian_field(label, weight, out)


@njit(**JIT)
def _gcd(a, b):
    while b:
        a, b = b, a % b
    return a


@njit(**JIT)
def zipf_affine(label, n):
    """Context-dependent affine permutation ``rank(v) = (a v + b) mod n`` with gcd(a, n) = 1."""
    if n == 1:
        return 1, 0
    h = label
    a = 1
    found = False
    for _ in range(64):
        h = _mix(h + _GOLDEN)
        a = 1 + np.int64(h % np.uint64(n - 1))
        if _gcd(a, n) == 1:
            found = True
            break
    if not found:  # pragma: no cover - 64 failures in a row is astronomically unlikely
        a = 1
    h = _mix(h + _GOLDEN)
    b = np.int64(h % np.uint64(n))
    return a, b


@njit(**JIT)
def synthetic_logits(kind, m, field_seed, scale, zipf_exponent, noise_seed, noise_order,
                     noise_std, base, table, ctx, out):
    """Raw logits of a :class:`~specbound.sim.models.SyntheticLM` in context ``ctx``.

    Gaussian kind: ``scale / sqrt(m + 1) * sum_{k=0}^{m} g^(k)`` where ``g^(k)`` is the
    Gaussian field of the last ``k`` tokens (an n-gram back-off sum; the k = 0 term is the
    context-free unigram field, passed precomputed as ``base``).  Zipf kind:
    ``-zipf_exponent * log(1 + rank_c(v))`` with the affine permutation ``rank_c`` of the
    window of ``m`` tokens.  ``"gaussian16"``: as the Gaussian kind with every field drawn
    from the quantile ``table`` (:func:`_add_table_field`).  All: plus ``noise_std`` times an
    independent field (of the same kind; Box-Muller for Zipf) of the window of
    ``noise_order`` tokens (draft mismatch).
    """
    n = out.shape[0]
    # every branch writes every entry of ``out`` before adding to it (no zero fill needed)
    if kind == KIND_GAUSSIAN16:
        w = scale / np.sqrt(m + 1.0)
        out[:] = base
        for k in range(1, m + 1):
            _add_table_field(window_label(field_seed, k, ctx), w, table, out)
        if noise_std > 0.0:
            _add_table_field(window_label(noise_seed, noise_order, ctx), noise_std, table, out)
        return
    if kind == KIND_GAUSSIAN:
        w = scale / np.sqrt(m + 1.0)
        out[:] = base
        for k in range(1, m + 1):
            _add_gaussian_field(window_label(field_seed, k, ctx), w, out)
    else:
        a, b = zipf_affine(window_label(field_seed, m, ctx), n)
        for v in range(n):
            r = (a * v + b) % n
            out[v] = -zipf_exponent * np.log(1.0 + r)
    if noise_std > 0.0:
        _add_gaussian_field(window_label(noise_seed, noise_order, ctx), noise_std, out)


@njit(**JIT)
def finalize_probs(logits, temperature, top_k, out):
    """Softmax of ``logits / temperature`` restricted to the ``top_k`` largest (0: no top-k).

    Ties at the k-th largest logit keep every tied token (measure zero for these models).
    Tokens outside the top-k get probability exactly 0.  ``out`` may be ``logits`` itself
    (every entry is read before it is written, at its own index).
    """
    n = logits.shape[0]
    thr = -np.inf
    if 0 < top_k < n:
        tmp = -logits.copy()
        thr = -np.partition(tmp, top_k - 1)[top_k - 1]
    mx = -np.inf
    for v in range(n):
        if logits[v] >= thr and logits[v] > mx:
            mx = logits[v]
    total = 0.0
    for v in range(n):
        if logits[v] >= thr:
            e = np.exp((logits[v] - mx) / temperature)
            out[v] = e
            total += e
        else:
            out[v] = 0.0
    for v in range(n):
        out[v] /= total


@njit(**JIT)
def synthetic_probs(ints, uints, floats, base, table, ctx, out):
    """Next-token distribution of a synthetic LM (the Numba-callable model evaluation).

    ``ints = (kind, m, noise_order, top_k)``, ``uints = (field_seed, noise_seed)``,
    ``floats = (scale, zipf_exponent, noise_std, temperature)``, ``base`` the weighted
    context-free field (:func:`unigram_field`), ``table`` the quantile table of the
    ``"gaussian16"`` kind (:func:`normal_table`; any array for the other kinds); writes into
    ``out``.
    """
    # the logits are built in ``out`` and finalised in place (finalize_probs reads and writes
    # each entry at the same index): no vocabulary-sized allocation per evaluation
    synthetic_logits(ints[0], ints[1], uints[0], floats[0], floats[1], uints[1], ints[2],
                     floats[2], base, table, ctx, out)
    finalize_probs(out, floats[3], ints[3], out)


@njit(**JIT)
def first_order_rows(kind, field_seed, scale, m, base, table):
    """``R[t] = base + w g^(1)(t)`` for every last token ``t`` (``w = scale / sqrt(m + 1)``):
    the first two terms of the Gaussian (or ``"gaussian16"``) logits of every context that
    ends in ``t``, computed by the same operations in the same order as
    :func:`synthetic_logits` (``out[:] = base``, then the ``k = 1`` field added), so a row
    copied from ``R`` is bit for bit the partial sum the evaluation would build."""
    n = base.shape[0]
    w = scale / np.sqrt(m + 1.0)
    out = np.empty((n, n))
    ctx = np.empty(1, dtype=np.int64)
    for t in range(n):
        ctx[0] = t
        row = out[t]
        row[:] = base
        if kind == KIND_GAUSSIAN16:
            _add_table_field(window_label(field_seed, 1, ctx), w, table, row)
        else:
            _add_gaussian_field(window_label(field_seed, 1, ctx), w, row)
    return out


@njit(**JIT)
def synthetic_probs_rows(ints, uints, floats, base, table, rows, ctx, out):
    """:func:`synthetic_probs` with the precomputed first-order rows ``rows``
    (:func:`first_order_rows`; a ``(1, 1)`` placeholder: none): for a Gaussian (or
    ``"gaussian16"``) model with a window ``m >= 1`` and a non-empty context, the back-off sum
    starts from ``rows[ctx[-1]]`` instead of recomputing the ``k = 1`` field (bit for bit the
    same numbers, one field less per evaluation)."""
    kind = ints[0]
    m = ints[1]
    if (rows.shape[0] != out.shape[0] or kind == KIND_ZIPF or m < 1 or ctx.shape[0] == 0):
        synthetic_probs(ints, uints, floats, base, table, ctx, out)
        return
    w = floats[0] / np.sqrt(m + 1.0)
    out[:] = rows[ctx[ctx.shape[0] - 1]]
    for k in range(2, m + 1):
        if kind == KIND_GAUSSIAN16:
            _add_table_field(window_label(uints[0], k, ctx), w, table, out)
        else:
            _add_gaussian_field(window_label(uints[0], k, ctx), w, out)
    if floats[2] > 0.0:
        if kind == KIND_GAUSSIAN16:
            _add_table_field(window_label(uints[1], ints[2], ctx), floats[2], table, out)
        else:
            _add_gaussian_field(window_label(uints[1], ints[2], ctx), floats[2], out)
    finalize_probs(out, floats[3], ints[3], out)


@njit(**JIT)
def token_probs(ints, uints, floats, base, table, rows, toks, n0, out):
    """``out[t - n0] = p(toks[t] | toks[:t])`` for ``t = n0 .. len(toks) - 1`` (each
    evaluation is :func:`synthetic_probs_rows`, so bit for bit the model's
    ``next_distribution(toks[:t])[toks[t]]``)."""
    p = np.empty(base.shape[0])
    for t in range(n0, toks.shape[0]):
        synthetic_probs_rows(ints, uints, floats, base, table, rows, toks[:t], p)
        out[t - n0] = p[toks[t]]


@njit(**JIT)
def unigram_field(field_seed, scale, m, n):
    """The k = 0 (context-free) term ``scale / sqrt(m+1) * g^(0)`` of the Gaussian logits."""
    out = np.zeros(n)
    _add_gaussian_field(window_label(field_seed, 0, np.empty(0, dtype=np.int64)),
                        scale / np.sqrt(m + 1.0), out)
    return out


@njit(**JIT)
def unigram_table_field(field_seed, scale, m, table, n):
    """The k = 0 term of the ``"gaussian16"`` logits (the quantile-table field)."""
    out = np.zeros(n)
    _add_table_field(window_label(field_seed, 0, np.empty(0, dtype=np.int64)),
                     scale / np.sqrt(m + 1.0), table, out)
    return out
