"""Plain NumPy references of every Numba kernel of :mod:`specbound.sim` (tests, benchmarks).

Each reference is written independently of its kernel (vectorised where NumPy allows, no
shared helpers beyond the inverse-CDF rule), so that agreement on the same inputs checks
both; the tests marked ``kernel`` compare them, also with ``NUMBA_DISABLE_JIT=1``.
Algorithm numbers are those of Liu, Wan, Gao & Gündüz 2026, arXiv:2609.21858.

- token-level samplers (:mod:`specbound.sim._kernels`): the functions ``sd`` ... ``mpfr_scan``
  take the same table of uniforms ``U[row, col]`` as the kernels (layout per scheme in
  :func:`specbound.sim.samplers.clock_shape`) and return ``(y, drafts, accepted)``;
  :func:`sample_step` dispatches on the scheme name; :func:`mpfr_public` is MPFR with a
  public proposal (``_kernels.mpfr_public_select``).  For keyed clocks build the table with
  :func:`clock_table`;
- decoder step kernels (:mod:`specbound.sim._kernels`): :func:`race_argmin`,
  :func:`gls_argmin`, :func:`mpfr_topk`, :func:`residual_sample`, :func:`specinfer_verify`,
  :func:`trial_label`;
- the inverse CDF: :func:`inv_cdf` / :func:`inv_cdf_many` (the rule of
  ``_kernels.inv_cdf``: smallest ``i`` with ``cumsum(w)[i] > u * sum(w)``, never a zero-mass
  token, the last positive-mass token when rounding reaches the total; "mass" is that of the
  running sum, in which a weight below its rounding has none);
- synthetic language models (:mod:`specbound.sim._model_kernels`): :func:`window_label`,
  :func:`gaussian_field`, :func:`table_field`, :func:`synthetic_probs`.
"""

from __future__ import annotations

import numpy as np

from specbound.sim._model_kernels import KIND_GAUSSIAN, KIND_GAUSSIAN16, zipf_affine
from specbound.sim.prf import _GOLDEN, _ONE, _mix_np, prf_uniform_numpy


def clock_table(label, rows: int, cols: int) -> np.ndarray:
    """The keyed source's uniforms ``U[row, col] = prf_uniform(label, row, col)``."""
    return prf_uniform_numpy(np.uint64(label), np.arange(rows)[:, None], np.arange(cols)[None, :])


def trial_label(base, t) -> np.uint64:
    """NumPy reference of ``_kernels.trial_label`` (trial ``t`` of a chunk, position ``t``)."""
    with np.errstate(over="ignore"):
        return np.uint64(_mix_np(np.uint64(base) + _GOLDEN * (np.uint64(t) + _ONE)))


def inv_cdf(prob_like: np.ndarray, u: float) -> int:
    """Token drawn from the (unnormalised) weights with uniform ``u`` by inversion."""
    return int(inv_cdf_many(prob_like, np.array([u], dtype=np.float64))[0])


def inv_cdf_many(prob_like: np.ndarray, us: np.ndarray) -> np.ndarray:
    """:func:`inv_cdf` for every uniform of ``us`` (``np.searchsorted``, side ``right``)."""
    w = np.asarray(prob_like, dtype=np.float64)
    cdf = np.cumsum(w)
    i = np.searchsorted(cdf, np.asarray(us, dtype=np.float64) * cdf[-1], side="right")
    # u * total rounded up to the total: the last token with positive mass, i.e. whose
    # interval [cdf[i-1], cdf[i]) is not empty (a weight absorbed by rounding has none)
    last = np.flatnonzero(np.diff(cdf, prepend=0.0) > 0)
    return np.where(i >= cdf.size, last[-1] if last.size else 0, i).astype(np.int64)


def _scores(e: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``e / w`` with ``+inf`` where ``w == 0`` (no division by zero)."""
    out = np.full(np.broadcast_shapes(e.shape, w.shape), np.inf)
    with np.errstate(over="ignore"):  # e / (denormal w) -> inf, as in the kernels
        np.divide(e, w, out=out, where=w > 0)
    return out


def _positive_part_or(v: np.ndarray, fallback: np.ndarray) -> np.ndarray:
    r = np.maximum(v, 0.0)
    s = r.sum()
    return r / s if s > 0 else fallback


def sd(p, q, U):
    """Standard SD (Alg. 1): X from ``U[0,0]``, test ``U[0,1]``, residual from ``U[1,0]``."""
    x = inv_cdf(q, U[0, 0])
    if U[0, 1] * 1.0 * q[x] <= p[x]:
        return x, np.array([x]), True
    res = np.maximum(p - q, 0.0)
    if res.sum() <= 0:
        res = p
    return inv_cdf(res, U[1, 0]), np.array([x]), False


def exp_race(p, q, U):
    """Exponential race (Alg. 2): ``E_u = -log U[u, 0]``."""
    e = -np.log(U[: p.size, 0])
    y = int(np.argmin(_scores(e, p)))
    x = int(np.argmin(_scores(e, q)))
    return y, np.array([x]), y == x


def mpfr(p, q, U, B):
    """Direct finite-support MPFR (Alg. 6): all ``n*B`` candidates, then the ``B`` smallest."""
    n = p.size
    g = np.cumsum(-np.log(U[:n, :B]), axis=1)  # G_{u,j}, row u, column j-1
    y = int(np.argmin(_scores(g[:, 0], p)))
    s = _scores(g, q[:, None])  # (n, B), +inf where q = 0
    flat = s.reshape(-1)  # token-major: (u, j) order, as the kernel lists candidates
    labels = np.repeat(np.arange(n), B)
    keep = np.repeat(q > 0, B)
    order = np.argsort(flat[keep], kind="stable")[:B]
    drafts = labels[keep][order]
    return y, drafts, bool(np.isin(y, drafts))


def gls(p, q, U, B):
    """GLS / list coupling: block ``b`` uses ``E_{b,u} = -log U[u, b]``."""
    n = p.size
    e = -np.log(U[:n, :B]).T  # (B, n)
    drafts = np.argmin(_scores(e, q[None, :]), axis=1)
    y = int(np.argmin(_scores(e, p[None, :]).reshape(-1)) % n)
    return y, drafts, bool(np.isin(y, drafts))


def specinfer(p, q, U, B):
    """Recursive rejection sampling (SpecInfer): residual ``p <- norm((p - q)+)`` per rejection."""
    cur = p.copy()
    drafts = np.array([inv_cdf(q, U[j, 0]) for j in range(B)])
    for j in range(B):
        x = drafts[j]
        if U[j, 1] * 1.0 * q[x] <= cur[x]:
            return int(x), drafts, True
        cur = _positive_part_or(cur - q, cur)
    return inv_cdf(cur, U[B, 0]), drafts, False


def spectr_beta(p, q, rho):
    return float(np.minimum(q, p / rho).sum())


def spectr(p, q, U, B, rho):
    """SpecTr k-sequential selection with parameter ``rho`` (Sun et al. 2023)."""
    drafts = np.array([inv_cdf(q, U[j, 0]) for j in range(B)])
    for j in range(B):
        x = drafts[j]
        if U[j, 1] * rho * q[x] <= p[x]:
            return int(x), drafts, True
    beta = spectr_beta(p, q, rho)
    # f = sum_{i<B} (1 - beta)^i = (1 - (1 - beta)^B) / beta, in closed form
    f = float(B) if beta <= 0.0 else (1.0 if beta >= 1.0 else
                                       -np.expm1(B * np.log1p(-beta)) / beta)
    res = np.maximum(p - np.minimum(q, p / rho) * f, 0.0)
    if res.sum() <= 0:
        res = p
    return inv_cdf(res, U[B, 0]), drafts, False


def mpfr_scan(p, q, U, B, w):
    """Proposal-scanning MPFR (Alg. 5) on the rows of ``U``; ``ValueError`` if ``U`` is too short.

    Vectorised: all arrival times and marks of the table, the global argmin of the scores
    among the first ``N`` candidates, and a check that the stopping rule fired within them.
    """
    t = np.cumsum(-np.log(U[:, 0]))
    z = inv_cdf_many(q, U[:, 1])
    r = np.zeros_like(p)
    with np.errstate(over="ignore"):
        np.divide(p, q, out=r, where=q > 0)
    s = _scores(t, r[z])
    best = np.minimum.accumulate(s)
    idx = np.arange(t.size)
    stop = np.flatnonzero((idx + 1 >= B) & (best <= t * w))
    if stop.size == 0:
        raise ValueError("U: too few rows for the scan to stop")
    last = stop[0]
    y = int(z[int(np.argmin(s[: last + 1]))])
    drafts = z[:B]
    return y, drafts, bool(np.isin(y, drafts))


def mpfr_public(p, q0, U, B, w):
    """MPFR with a public proposal ``q0`` (Alg. 5) on the rows of ``U``: ``(marks, n_points)``.

    Vectorised: every point's arrival ``T_i`` (cumulative ``-log U[i, 0]``), mark
    ``Z_i = inv_cdf(q0, U[i, 1])`` and score ``T_i (q0 / p)(Z_i)`` (``q0`` normalised,
    ``+inf`` where ``p = 0``); the scan stops at the first ``n`` whose ``B``-th smallest
    score among the first ``n`` points is at most ``T_n w``; the marks of the ``B`` smallest
    scores in increasing order (stable sort by point index).  ``ValueError`` if ``U`` is too
    short.
    """
    p = np.asarray(p, dtype=np.float64)
    q0 = np.asarray(q0, dtype=np.float64)
    t = np.cumsum(-np.log(U[:, 0]))
    z = inv_cdf_many(q0, U[:, 1])
    mult = _scores(q0 / q0.sum(), p)  # 1 / r = q0 / p, the kernel's multiplier
    s = t * mult[z]
    for n in range(B, t.size + 1):
        kth = np.partition(s[:n], B - 1)[B - 1]
        if np.isfinite(kth) and kth <= t[n - 1] * w:
            order = np.argsort(s[:n], kind="stable")[:B]
            return z[order].astype(np.int64), n
    raise ValueError("U: too few rows for the scan to stop")


def sample_step(p, q, scheme, B, table, w=None):
    """Reference of :func:`specbound.sim.sample_step` on a uniform table: ``(y, drafts, acc)``.

    ``spectr`` takes its ``rho`` from :func:`specbound.sim.spectr_rho`; ``mpfr_scan`` its
    default ratio bound from :func:`specbound.sim.samplers.default_ratio_bound`.
    """
    from specbound.sim.samplers import default_ratio_bound, spectr_rho

    p = np.asarray(p, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    if scheme == "sd":
        return sd(p, q, table)
    if scheme == "exp_race":
        return exp_race(p, q, table)
    if scheme in ("mpfr", "mpfr_direct"):
        return mpfr(p, q, table, B)
    if scheme == "gls":
        return gls(p, q, table, B)
    if scheme == "specinfer":
        return specinfer(p, q, table, B)
    if scheme == "spectr":
        return spectr(p, q, table, B, spectr_rho(p, q, B))
    if scheme == "mpfr_scan":
        return mpfr_scan(p, q, table, B, default_ratio_bound(p, q) if w is None else w)
    raise ValueError(f"scheme: unknown {scheme!r}")


# --------------------------------------------------------------------- decoder step kernels


def race_argmin(label, p, arrival) -> int:
    """Reference of ``_kernels.race_argmin``: ``argmin_{p_v > 0} -log U(label, v, arrival)/p_v``."""
    p = np.asarray(p, dtype=np.float64)
    v = np.flatnonzero(p > 0)
    e = -np.log(prf_uniform_numpy(label, v, arrival))
    return int(v[np.argmin(e / p[v])])


def gls_argmin(label, p, cols) -> int:
    """Reference of ``_kernels.gls_argmin``: the token of the smallest ``E_{b,v} / p_v``."""
    p = np.asarray(p, dtype=np.float64)
    v = np.flatnonzero(p > 0)
    e = -np.log(prf_uniform_numpy(label, v[None, :], np.asarray(cols)[:, None]))
    s = e / p[v][None, :]  # (column, token), flattened in the kernel's scan order
    return int(v[np.argmin(s.reshape(-1)) % v.size])


def mpfr_topk(label, q, k) -> np.ndarray:
    """Reference of ``_kernels.mpfr_topk``: all ``n k`` candidates, stable sort, first ``k``."""
    q = np.asarray(q, dtype=np.float64)
    v = np.flatnonzero(q > 0)
    e = -np.log(prf_uniform_numpy(label, v[:, None], np.arange(k)[None, :]))
    s = np.cumsum(e, axis=1) / q[v][:, None]
    flat = np.argsort(s.reshape(-1), kind="stable")[:k]
    return v[flat // k].astype(np.int64)


def residual(r, q) -> np.ndarray:
    """Reference of ``_kernels.residual``: ``(r - q)_+`` normalised, ``r`` if it is empty."""
    return _positive_part_or(np.asarray(r, dtype=np.float64) - q, np.asarray(r, dtype=np.float64))


def residual_sample(p, q, u) -> int:
    """Reference of ``_kernels.residual_sample``: inversion of ``(p - q)_+`` (``p`` if empty)."""
    w = np.maximum(np.asarray(p, dtype=np.float64) - q, 0.0)
    return inv_cdf(w if w.sum() > 0 else p, u)


def specinfer_verify(p, q, cands, u_acc, u_res):
    """Reference of ``_kernels.specinfer_verify`` (recursive rejection, lazy residuals)."""
    r = np.asarray(p, dtype=np.float64).copy()
    q = np.asarray(q, dtype=np.float64)
    for i, x in enumerate(cands):
        if q[x] > 0 and u_acc[i] * q[x] <= r[x]:
            return int(x), True
        r = residual(r, q)
    return inv_cdf(r, u_res), False


# --------------------------------------------------------------------- synthetic models


def window_label(base, order, ctx) -> np.uint64:
    """Reference of ``_model_kernels.window_label``."""
    ctx = np.asarray(ctx, dtype=np.int64)
    with np.errstate(over="ignore"):
        h = _mix_np(np.uint64(base) + _GOLDEN * np.uint64(order + 1))
        for i in range(order):
            pos = len(ctx) - order + i
            tok = int(ctx[pos]) if pos >= 0 else -1
            h = _mix_np(h + _GOLDEN * np.uint64(tok + 2))
    return np.uint64(h)


def gaussian_field(label, n) -> np.ndarray:
    """Reference of the Gaussian field of ``_model_kernels`` (Box-Muller on 32-bit halves)."""
    i = np.arange((n + 1) // 2).astype(np.uint64)
    with np.errstate(over="ignore"):
        h = _mix_np(_mix_np(np.uint64(label) + _GOLDEN * (i + _ONE)) + _GOLDEN)
    u1 = ((h >> np.uint64(32)).astype(np.float64) + 0.5) * 2.0**-32
    u2 = ((h & np.uint64(0xFFFFFFFF)).astype(np.float64) + 0.5) * 2.0**-32
    r = np.sqrt(-2.0 * np.log(u1))
    g = np.empty(2 * i.shape[0])
    g[0::2] = r * np.cos(2.0 * np.pi * u2)
    g[1::2] = r * np.sin(2.0 * np.pi * u2)
    return g[:n]


def table_field(label, n, table) -> np.ndarray:
    """Reference of the quantile-table field of ``_model_kernels`` (``"gaussian16"``): token
    ``4i + j`` reads ``table`` at the ``j``-th 16-bit quarter of ``mix(label + G (i+1))``."""
    i = np.arange((n + 3) // 4).astype(np.uint64)
    with np.errstate(over="ignore"):
        h = _mix_np(np.uint64(label) + _GOLDEN * (i + _ONE))
    j = (h[:, None] >> (np.uint64(16) * np.arange(4, dtype=np.uint64))[None, :]) & np.uint64(
        0xFFFF)
    return np.asarray(table)[j.reshape(-1).astype(np.int64)][:n]


def synthetic_probs(ints, uints, floats, ctx, n, table=None) -> np.ndarray:
    """Reference of ``_model_kernels.synthetic_probs`` (computes every field itself, the
    context-free one included; the Zipf permutation reuses the scalar helper; ``table``: the
    quantile table of the ``"gaussian16"`` kind)."""
    kind, m, noise_order, top_k = (int(x) for x in ints)
    scale, zipf_exponent, noise_std, temperature = (float(x) for x in floats)
    ctx = np.asarray(ctx, dtype=np.int64)
    noise = gaussian_field
    if kind == KIND_GAUSSIAN16:
        logits = np.zeros(n)
        for k in range(m + 1):
            logits += scale / np.sqrt(m + 1.0) * table_field(
                window_label(uints[0], k, ctx), n, table
            )
        noise = lambda label, n: table_field(label, n, table)  # noqa: E731
    elif kind == KIND_GAUSSIAN:
        logits = np.zeros(n)
        for k in range(m + 1):
            logits += scale / np.sqrt(m + 1.0) * gaussian_field(
                window_label(uints[0], k, ctx), n
            )
    else:
        a, b = zipf_affine(window_label(uints[0], m, ctx), n)
        logits = -zipf_exponent * np.log1p((a * np.arange(n) + b) % n)
    if noise_std > 0.0:
        logits = logits + noise_std * noise(window_label(uints[1], noise_order, ctx), n)
    keep = np.ones(n, dtype=bool)
    if 0 < top_k < n:
        thr = np.sort(logits)[::-1][top_k - 1]
        keep = logits >= thr
    z = np.where(keep, (logits - logits[keep].max()) / temperature, -np.inf)
    e = np.where(keep, np.exp(np.where(keep, z, 0.0)), 0.0)
    return e / e.sum()
