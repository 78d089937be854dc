"""Token-level samplers: one speculative step in one context (public wrappers).

Every sampler couples an emitted token ``Y ~ p`` with ``B`` draft tokens ``X_1..X_B ~ q``
(MATH.md §1) and reports whether a draft was accepted.  The randomness is a table of
uniforms ``U[row, col]`` in ``(0, 1)`` whose layout depends on the scheme
(:func:`clock_shape`):

========== ================ =====================================================================
scheme     shape            meaning
========== ================ =====================================================================
sd         ``(2, 2)``       draft ``X = F_q^{-1}(U[0,0])``; accept iff ``U[0,1] q(X) <= p(X)``;
                            else ``Y = F_r^{-1}(U[1,0])``, ``r = (p-q)+`` normalised (seed 000
                            Alg. 1)
exp_race   ``(n, 1)``       ``E_u = -log U[u,0]``; ``X = argmin E_u/q_u``, ``Y = argmin E_u/p_u``
                            (Alg. 2; PFR with B = 1)
mpfr       ``(n, B)``       token ``u``'s Poisson clock ``G_{u,j} = sum_{m<j} -log U[u,m]``;
                            ``Y = argmin G_{u,1}/p_u``; drafts: labels of the ``B`` smallest
                            ``G_{u,j}/q_u`` (Alg. 6); ``"mpfr"`` runs the O(n + B log B) kernel,
                            ``"mpfr_direct"`` the literal Alg. 6 -- identical outputs
mpfr_scan  ``(N, 2)``       candidate ``i``: arrival ``T_i = sum_{k<=i} -log U[k,0]``, mark
                            ``Z_i = F_q^{-1}(U[i,1])``; drafts ``Z_1..Z_B``; ``Y`` = mark of
                            ``argmin T_i q(Z_i)/p(Z_i)`` found by the scan of Alg. 5 with the
                            ratio bound ``w`` (needs ``p << q``; ``N`` unbounded)
gls        ``(n, B)``       block ``b`` uses arrival index ``b``: ``E_{b,u} = -log U[u,b]``;
                            ``X_b = argmin_u E_{b,u}/q_u``; ``Y`` = label of
                            ``argmin_{(b,u)} E_{b,u}/p_u`` (Rowan et al. 2025)
specinfer  ``(B+1, 2)``     drafts ``X_j = F_q^{-1}(U[j,0])``; draft ``j`` accepted iff
                            ``U[j,1] q(X_j) <= p_j(X_j)`` with ``p_0 = p``,
                            ``p_{j+1} = norm((p_j - q)+)``; else ``Y = F_{p_B}^{-1}(U[B,0])``
                            (recursive rejection sampling, Miao et al. 2023)
spectr     ``(B+1, 2)``     drafts as specinfer; draft ``j`` accepted iff
                            ``U[j,1] rho q(X_j) <= p(X_j)``; else ``Y`` from the residual
                            ``(p - min(q, p/rho) f)+``, ``f = (1-(1-beta)^B)/beta``,
                            ``beta = sum min(q, p/rho)``, ``rho`` the root of
                            ``rho beta(rho) = 1 - (1-beta(rho))^B`` (SpecTr k-seq, Sun et al. 2023)
========== ================ =====================================================================

``F_w^{-1}(u)`` is inversion of the cumulative sum of ``w`` (zero-probability tokens have an
empty interval and are never drawn).  In every scheme a token with ``p_u = 0`` is never
emitted and a token with ``q_u = 0`` is never drafted.  Under keyed clocks
(``key``/``context``) uniform ``(row, col)`` is ``prf_uniform(context_label(key, context, m),
row, col)``, i.e. for the token-clock schemes (exp_race, mpfr, gls) row = token id and col =
arrival index, so exp_race, mpfr (B = 1) and gls (B = 1) share their clocks and give the same
tokens, and mpfr's target winner is the PFR winner of every B.  For the slot schemes (sd,
specinfer, spectr, mpfr_scan) rows are draft slots / scan positions, not token ids.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import optimize

from specbound._validation import as_B, as_choice, as_pair, as_real, as_rng
from specbound.sim import _kernels as K
from specbound.sim.prf import context_label

__all__ = ["SCHEMES", "Step", "clock_shape", "sample_step", "spectr_rho"]

#: scheme name -> kernel code
SCHEMES = {
    "sd": K.SD,
    "exp_race": K.EXP_RACE,
    "mpfr": K.MPFR,
    "mpfr_direct": K.MPFR_DIRECT,
    "mpfr_scan": K.MPFR_SCAN,
    "gls": K.GLS,
    "specinfer": K.SPECINFER,
    "spectr": K.SPECTR,
}
#: schemes with exactly one draft
SINGLE_DRAFT = ("sd", "exp_race")
#: hard cap on the candidates one mpfr_scan step may examine
MAX_SCAN = 10**9
#: safety factor on the default ratio bound of mpfr_scan (guards the stopping rule against
#: rounding in ``1/r``; only delays stopping)
_W_SAFETY = 1.0 - 2.0**-40


@dataclass(frozen=True, eq=False)
class Step:
    """Outcome of one speculative step.

    Attributes
    ----------
    token : int
        The emitted token ``Y`` (distributed as ``p``).
    drafts : ndarray of int64, shape (B,)
        The draft tokens ``X_1..X_B`` (each distributed as ``q``), in the scheme's order.
    accepted : bool
        Whether a draft was accepted (for every scheme: ``token in drafts``).
    """

    token: int
    drafts: np.ndarray
    accepted: bool

    def __eq__(self, other):
        if not isinstance(other, Step):
            return NotImplemented
        return (self.token == other.token and self.accepted == other.accepted
                and np.array_equal(self.drafts, other.drafts))

    __hash__ = None  # drafts is an array


def clock_shape(scheme: str, n: int, B: int = 1, scan_rows: int = 4096) -> tuple[int, int]:
    """Shape of the uniform table a scheme reads (module table); ``mpfr_scan``: ``scan_rows``."""
    as_choice(scheme, "scheme", SCHEMES)
    if scheme in ("sd", "specinfer", "spectr"):
        return (B + 1, 2)
    if scheme == "exp_race":
        return (n, 1)
    if scheme == "mpfr_scan":
        return (scan_rows, 2)
    return (n, B)


# ---------------------------------------------------------------------------------------------
# per-pair preparation (NumPy, once per pair; shared with the estimators)


_RHO_TOL = 1e-13


def _h_spectr(rho, p, q, B):
    """``rho beta(rho) - (1 - (1 - beta(rho))^B)``, the last term via ``expm1``/``log1p``
    (accurate when ``beta`` is tiny)."""
    beta = float(np.minimum(q, p / rho).sum())
    accept = 1.0 if beta >= 1.0 else -math.expm1(B * math.log1p(-beta))
    return float(np.minimum(rho * q, p).sum()) - accept


def _spectr_rho_row(p, q, B):
    # rho = 1 when the equation holds at 1 up to the rounding of the sums (p = q gives
    # h(1) = (1 - beta)^B - (1 - beta) with beta = 1 - O(eps))
    if B == 1 or _h_spectr(1.0, p, q, B) >= -_RHO_TOL:
        return 1.0
    if _h_spectr(float(B), p, q, B) <= 0.0:  # h(B) >= 0 in exact arithmetic (Bernoulli)
        return float(B)
    rho = optimize.brentq(_h_spectr, 1.0, float(B), args=(p, q, B), xtol=1e-15, rtol=8.9e-16,
                          maxiter=200)
    # step to the side where rho * beta >= 1 - (1-beta)^B, so that the residual is >= 0
    for _ in range(100):
        if _h_spectr(rho, p, q, B) >= 0.0:
            break
        rho = min(float(B), rho * (1.0 + 1e-15) + 1e-300)
    return rho


def spectr_rho(p, q, B):
    """SpecTr's ``rho``: the root in ``[1, B]`` of ``rho beta(rho) = 1 - (1 - beta(rho))^B``.

    ``beta(rho) = sum_x min(q(x), p(x)/rho)``; ``rho beta(rho)`` is nondecreasing and
    ``1 - (1-beta)^B`` nonincreasing in ``rho``, so the root is found by Brent's method
    (``scipy.optimize.brentq``, ``xtol = 1e-15``) and then nudged to the side where the
    residual ``p - min(q, p/rho) f`` is nonnegative.  ``rho = 1`` when ``B = 1`` or when
    the equation already holds at 1 up to ``1e-13`` (rounding of the sums; e.g. ``p = q`` or
    disjoint supports).  Zeros are allowed in ``p`` and ``q``.  The SpecTr
    acceptance is ``1 - (1 - beta(rho))^B``.

    Returns a float for 1-D input, an array for a 2-D batch.
    """
    p2, q2, batched = as_pair(p, q)
    B = as_B(B)
    out = np.array([_spectr_rho_row(a, b, B) for a, b in zip(p2, q2, strict=True)])
    return out if batched else float(out[0])


def _residual_or(v, fallback):
    r = np.maximum(v, 0.0)
    s = r.sum()
    return r / s if s > 0 else fallback


def _default_w(p, q):
    """Largest valid ratio bound ``w = min_{p_u > 0} q_u / p_u`` (times a safety factor)."""
    mask = p > 0
    with np.errstate(over="ignore"):
        return float(np.min(q[mask] / p[mask])) * _W_SAFETY


@dataclass
class _Prepared:
    code: int
    B: int
    p: np.ndarray
    q: np.ndarray
    qcdf: np.ndarray
    targ: np.ndarray  # (m, R, n)
    scale: np.ndarray  # (m,)
    fincdf: np.ndarray  # (m, n)
    ratio: np.ndarray  # (m, n) or (1, 1)
    w: np.ndarray  # (m,)


def _check_scheme_B(scheme, B):
    as_choice(scheme, "scheme", SCHEMES)
    B = as_B(B)
    if scheme in SINGLE_DRAFT and B != 1:
        raise ValueError(f"B: scheme {scheme!r} uses exactly one draft, got B={B}")
    return B


def _prepare(p2, q2, scheme, B, w=None) -> _Prepared:
    """Per-pair arrays for the kernels (validated 2-D input)."""
    m, n = p2.shape
    dummy2 = np.zeros((m, 1))
    targ = np.zeros((m, 1, 1))
    scale = np.ones(m)
    fincdf = dummy2
    ratio = np.zeros((m, 1))
    wv = np.ones(m)
    qcdf = np.cumsum(q2, axis=1)
    if scheme == "sd":
        targ = p2[:, None, :].copy()
        fincdf = np.cumsum([_residual_or(a - b, a) for a, b in zip(p2, q2, strict=True)], axis=1)
    elif scheme == "specinfer":
        targ = np.empty((m, B, n))
        fin = np.empty((m, n))
        for i in range(m):
            cur = p2[i].copy()
            for j in range(B):
                targ[i, j] = cur
                cur = _residual_or(cur - q2[i], cur)
            fin[i] = cur
        fincdf = np.cumsum(fin, axis=1)
    elif scheme == "spectr":
        targ = p2[:, None, :].copy()
        fin = np.empty((m, n))
        for i in range(m):
            rho = _spectr_rho_row(p2[i], q2[i], B)
            scale[i] = rho
            beta = float(np.minimum(q2[i], p2[i] / rho).sum())
            f = sum((1.0 - beta) ** k for k in range(B))
            res = np.maximum(p2[i] - np.minimum(q2[i], p2[i] / rho) * f, 0.0)
            fin[i] = res if res.sum() > 0 else p2[i]
        fincdf = np.cumsum(fin, axis=1)
    elif scheme == "mpfr_scan":
        bad = np.any((p2 > 0) & (q2 == 0), axis=1)
        if np.any(bad):
            raise ValueError(
                "q: scheme 'mpfr_scan' needs p absolutely continuous w.r.t. q (p > 0 where "
                f"q = 0 in row {int(np.flatnonzero(bad)[0])})"
            )
        ratio = np.zeros((m, n))
        with np.errstate(over="ignore"):
            np.divide(p2, q2, out=ratio, where=q2 > 0)
        wmax = np.array([_default_w(a, b) for a, b in zip(p2, q2, strict=True)])
        if w is None:
            wv = wmax
        else:
            wv = np.broadcast_to(np.asarray(w, dtype=np.float64), (m,)).copy()
            if np.any(wv > wmax / _W_SAFETY):
                raise ValueError(
                    "w: must satisfy w <= min_{p_u>0} q_u/p_u (Alg. 5's bound 1/r >= w), got "
                    f"w = {float(np.max(wv)):.6g} > {float(np.min(wmax / _W_SAFETY)):.6g}"
                )
    return _Prepared(SCHEMES[scheme], B, p2, q2, qcdf, np.ascontiguousarray(targ), scale,
                     np.ascontiguousarray(fincdf), ratio, wv)


def _check_w(w, scheme):
    if w is None:
        return None
    if scheme != "mpfr_scan":
        raise ValueError(f"w: only used by scheme 'mpfr_scan', got scheme {scheme!r}")
    return as_real(w, "w", low=0.0, low_open=True)


def _run_step(prep: _Prepared, i, label, table, use_table):
    """One step of pair ``i`` on a uniform source; returns ``(y, drafts, acc, status)``."""
    code, B = prep.code, prep.B
    p, q = prep.p[i], prep.q[i]
    drafts = np.empty(B, np.int64)
    status = 0
    if code in (K.SD, K.SPECINFER, K.SPECTR):
        y, acc = K.seq_step(q, prep.qcdf[i], prep.targ[i], prep.scale[i], prep.fincdf[i], B,
                            label, table, use_table, drafts)
    elif code == K.EXP_RACE:
        y, x = K.exp_race_step(p, q, label, table, use_table)
        drafts[0] = x
        acc = y == x
    elif code == K.MPFR:
        y, acc = K.mpfr_fast_step(p, q, B, label, table, use_table, drafts, np.empty(B),
                                  np.empty(B, np.int64), np.empty(B), np.empty(B, np.int64))
    elif code == K.MPFR_DIRECT:
        y, acc = K.mpfr_direct_step(p, q, B, label, table, use_table, drafts, np.empty(B),
                                    np.empty(B, np.int64), np.empty(B, np.int64))
    elif code == K.GLS:
        y, acc = K.gls_step(p, q, B, label, table, use_table, drafts)
    else:
        y, acc, status = K.mpfr_scan_step(p, prep.ratio[i], prep.qcdf[i], B, prep.w[i], label,
                                          table, use_table, MAX_SCAN, drafts)
    return int(y), drafts, bool(acc), int(status)


def sample_step(p, q, scheme, B=1, *, key=None, context=(), m=None, seed=None, uniforms=None,
                w=None) -> Step:
    """One speculative step: the emitted token, the drafts and whether a draft was accepted.

    Parameters
    ----------
    p, q : array_like, shape (n,)
        Target and draft distributions (zeros allowed; ``mpfr_scan`` needs ``p << q``).
    scheme : str
        ``"sd"``, ``"exp_race"``, ``"mpfr"``, ``"mpfr_direct"``, ``"mpfr_scan"``, ``"gls"``,
        ``"specinfer"`` or ``"spectr"`` (see the module docstring for each construction).
    B : int
        Number of drafts (must be 1 for ``"sd"`` and ``"exp_race"``).
    key : int, str or bytes, optional
        Secret key: the step runs on the keyed clocks of ``(key, context)``.
    context : sequence of int
        Context tokens for the keyed clocks.
    m : int or None
        Only the last ``m`` context tokens enter the context label (``None``: all of them);
        see :func:`specbound.sim.prf.context_label`.
    seed : int, SeedSequence or Generator, optional
        Without ``key``/``uniforms``: the uniform table (:func:`clock_shape`) is drawn from
        ``np.random.default_rng(seed)`` outside the kernel.  For ``mpfr_scan`` rows are drawn
        4096 at a time until the scan stops.
    uniforms : array_like, optional
        An explicit uniform table (at least :func:`clock_shape`), values in (0, 1).
    w : float, optional
        ``mpfr_scan`` only: the ratio bound ``w <= min_{p_u>0} q_u/p_u`` (default: that
        minimum times ``1 - 2**-40``); smaller valid values only lengthen the scan.

    Returns
    -------
    Step
        ``token``, ``drafts`` (int64, shape (B,)) and ``accepted``.
    """
    p2, q2, batched = as_pair(p, q)
    if batched:
        raise ValueError("p: sample_step takes one pair of 1-D vectors; use sample_emitted "
                         "for batches")
    B = _check_scheme_B(scheme, B)
    w = _check_w(w, scheme)
    sources = (key is not None) + (uniforms is not None) + (seed is not None)
    if sources > 1:
        raise ValueError("key: give at most one of key, uniforms and seed")
    prep = _prepare(p2, q2, scheme, B, w)
    n = p2.shape[1]
    if key is not None:
        label = context_label(key, context, m)
        y, drafts, acc, status = _run_step(prep, 0, label, np.empty((1, 1)), False)
        if status != 0:
            raise RuntimeError(f"mpfr_scan: the scan did not stop within {MAX_SCAN} candidates")
        return Step(y, drafts, acc)
    if uniforms is not None:
        table = np.ascontiguousarray(np.asarray(uniforms, dtype=np.float64))
        need = clock_shape(scheme, n, B, scan_rows=1)
        if (table.ndim != 2 or table.shape[0] < need[0] or table.shape[1] < need[1]
                or not np.all((table > 0) & (table < 1))):
            raise ValueError(f"uniforms: must be a 2-D array of at least {need} with entries "
                             f"in (0, 1), got shape {table.shape}")
        y, drafts, acc, status = _run_step(prep, 0, np.uint64(0), table, True)
        if status != 0:
            raise ValueError(f"uniforms: {table.shape[0]} rows are too few for the mpfr_scan "
                             "scan to stop")
        return Step(y, drafts, acc)
    rng = as_rng(seed)
    table = rng.random(clock_shape(scheme, n, B))
    while True:
        # Generator.random draws in C order, so appending rows equals drawing more at once
        table = np.maximum(table, np.finfo(np.float64).tiny)  # (0, 1): random() can give 0
        y, drafts, acc, status = _run_step(prep, 0, np.uint64(0), table, True)
        if status == 0:
            return Step(y, drafts, acc)
        if table.shape[0] >= MAX_SCAN:  # pragma: no cover - needs w ~ 1e-9
            raise RuntimeError("mpfr_scan: the scan did not stop")
        table = np.vstack([table, rng.random((table.shape[0], 2))])


def sample_step_reference(p, q, scheme, B, table, w=None):
    """NumPy reference of :func:`sample_step` on a uniform table (tests, benchmarks)."""
    from specbound.sim import _reference as R

    p = np.asarray(p, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    if scheme == "sd":
        return R.sd(p, q, table)
    if scheme == "exp_race":
        return R.exp_race(p, q, table)
    if scheme in ("mpfr", "mpfr_direct"):
        return R.mpfr(p, q, table, B)
    if scheme == "gls":
        return R.gls(p, q, table, B)
    if scheme == "specinfer":
        return R.specinfer(p, q, table, B)
    if scheme == "spectr":
        return R.spectr(p, q, table, B, _spectr_rho_row(p, q, B))
    if scheme == "mpfr_scan":
        return R.mpfr_scan(p, q, table, B, _default_w(p, q) if w is None else w)
    raise ValueError(f"scheme: unknown {scheme!r}")
