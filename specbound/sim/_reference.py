"""Plain NumPy references of the token-level samplers (used by the tests and benchmarks).

Each reference takes the same table of uniforms ``U`` as the Numba kernels in
:mod:`specbound.sim._kernels` (``U[row, col]``, layout per scheme in
:func:`specbound.sim.samplers.clock_shape`) and returns ``(y, drafts, accepted)``.  They are
written independently of the kernels (vectorised, no shared helpers beyond the inverse CDF
convention), so that agreement on the same uniforms checks both.  For keyed clocks, build the
table with :func:`clock_table`.
"""

from __future__ import annotations

import numpy as np

from specbound.sim.prf import _GOLDEN, _mix_np, prf_uniform_numpy


def clock_table(label, rows: int, cols: int) -> np.ndarray:
    """The keyed source's uniforms ``U[row, col] = prf_uniform(label, row, col)``."""
    return prf_uniform_numpy(np.uint64(label), np.arange(rows)[:, None], np.arange(cols)[None, :])


def trial_label(base, t) -> np.uint64:
    """NumPy reference of ``_kernels.trial_label``: label of trial ``t`` of a chunk."""
    with np.errstate(over="ignore"):
        return np.uint64(_mix_np(np.uint64(base) + _GOLDEN * (np.uint64(t) + np.uint64(1))))


def inv_cdf(prob_like: np.ndarray, u: float) -> int:
    """Token drawn from the (unnormalised) weights with uniform ``u`` by inversion."""
    cdf = np.cumsum(prob_like)
    i = int(np.searchsorted(cdf, u * cdf[-1], side="right"))
    if i >= cdf.size:  # u * total rounded up to the total: last token with positive mass
        i = int(np.flatnonzero(prob_like > 0)[-1])
    return i


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
    f = sum((1.0 - beta) ** i for i in range(B))
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
    z = np.array([inv_cdf(q, u) for u in U[:, 1]])
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
