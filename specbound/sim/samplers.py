"""Token-level samplers: one speculative step in one context (public wrappers).

Every sampler couples an emitted token ``Y ~ p`` with ``B`` draft tokens ``X_1..X_B ~ q``
(Liu, Wan, Gao & Gündüz 2026, arXiv:2609.21858, §3 and App. B; algorithm numbers below are
that paper's) and reports whether a draft was accepted.  The randomness is a table of
uniforms ``U[row, col]`` in ``(0, 1)`` whose layout depends on the scheme
(:func:`clock_shape`):

========== ================ =====================================================================
scheme     shape            meaning
========== ================ =====================================================================
sd         ``(2, 2)``       draft ``X = F_q^{-1}(U[0,0])``; accept iff ``U[0,1] q(X) <= p(X)``;
                            else ``Y = F_r^{-1}(U[1,0])``, ``r = (p-q)+`` normalised
                            (arXiv:2609.21858 Alg. 1; Leviathan et al. 2023, arXiv:2211.17192)
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
                            (recursive rejection sampling, Miao et al. 2024,
                            arXiv:2305.09781)
spectr     ``(B+1, 2)``     drafts as specinfer; draft ``j`` accepted iff
                            ``U[j,1] rho q(X_j) <= p(X_j)``; else ``Y`` from the residual
                            ``(p - min(q, p/rho) f)+``, ``f = (1-(1-beta)^B)/beta``,
                            ``beta = sum min(q, p/rho)``, ``rho`` the root of
                            ``rho beta(rho) = 1 - (1-beta(rho))^B`` (SpecTr k-seq, Sun et al. 2023,
                            arXiv:2310.15141)
========== ================ =====================================================================

``F_w^{-1}(u)`` is the package's one inverse CDF (``_kernels.inv_cdf``): the smallest ``i``
with ``cumsum(w)[i] > u * sum(w)``, so zero-probability tokens have an empty interval and are
never drawn (the last positive-mass token if rounding reaches the total).  In every scheme a
token with ``p_u = 0`` is never emitted and a token with ``q_u = 0`` is never drafted.  Under
keyed clocks (``key``/``context``) uniform ``(row, col)`` is
``prf_uniform(context_label(key, context, window), row, col)``, i.e. for the token-clock
schemes (exp_race, mpfr, gls) row = token id and col = arrival index, so exp_race, mpfr
(B = 1) and gls (B = 1) share their clocks and give the same tokens, and mpfr's target winner
is the PFR winner of every B.  For the slot schemes (sd, specinfer, spectr, mpfr_scan) rows
are draft slots / scan positions, not token ids.

Size limits, checked up front (``ValueError`` naming the argument): ``B <= MAX_B`` (the
kernels keep ``O(B)`` work buffers per thread); ``specinfer`` precomputes ``B`` residual
distributions per pair, ``m B n`` floats of at most ``MAX_TABLE_BYTES``; ``mpfr_scan`` scans
about ``max(B, 1/w)`` candidates per step and refuses an expected scan longer than
``MAX_EXPECTED_SCAN``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import optimize

from specbound._validation import as_choice, as_int, as_pair, as_prob, as_real, as_rng
from specbound.sim import _kernels as K
from specbound.sim.prf import context_label

__all__ = ["SAMPLERS", "PublicSample", "Step", "clock_shape", "mpfr_public", "sample_step",
           "spectr_rho"]

#: the sampler schemes, in a fixed order (a superset of ``specbound.theory.SCHEMES``, the
#: schemes with an exact acceptance formula); every other list of schemes derives from it
SAMPLERS = ("sd", "exp_race", "mpfr", "mpfr_direct", "mpfr_scan", "gls", "specinfer", "spectr")
#: schemes with exactly one draft
SINGLE_DRAFT = tuple(s for s in SAMPLERS if s in ("sd", "exp_race"))
#: schemes whose uniform rows are draft slots and that verify drafts one after another
SEQUENTIAL = tuple(s for s in SAMPLERS if s in ("sd", "specinfer", "spectr"))
#: schemes whose uniform rows are token ids and columns arrival indices (token clocks)
TOKEN_CLOCK = tuple(s for s in SAMPLERS if s in ("exp_race", "mpfr", "mpfr_direct", "gls"))
_CODES = dict(zip(SAMPLERS, (K.SD, K.EXP_RACE, K.MPFR, K.MPFR_DIRECT, K.MPFR_SCAN, K.GLS,
                            K.SPECINFER, K.SPECTR), strict=True))
#: largest number of drafts: every kernel keeps a few length-``B`` work buffers per thread
#: (40 bytes per draft), and ``B`` beyond a million has no use in speculative decoding
MAX_B = 2**20
#: largest per-call table of precomputed residuals (``specinfer``: ``m * B * n`` floats), bytes
MAX_TABLE_BYTES = 2**31
#: largest expected number of candidates one ``mpfr_scan`` step may scan (about ``1/w``)
MAX_EXPECTED_SCAN = 10**6
#: hard cap on the candidates one mpfr_scan step may examine (reached with probability
#: ``exp(-MAX_SCAN / MAX_EXPECTED_SCAN)`` or less)
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
    as_choice(scheme, "scheme", SAMPLERS)
    if scheme in SEQUENTIAL:
        return (B + 1, 2)
    if scheme == "exp_race":
        return (n, 1)
    if scheme == "mpfr_scan":
        return (scan_rows, 2)
    return (n, B)


# ---------------------------------------------------------------------------------------------
# per-pair preparation (NumPy, once per pair; shared with the estimators)


_RHO_TOL = 1e-13


def _spectr_accept(beta, B):
    """``1 - (1 - beta)^B`` via ``expm1``/``log1p`` (accurate when ``beta`` is tiny)."""
    return 1.0 if beta >= 1.0 else -math.expm1(B * math.log1p(-beta))


def _h_spectr(rho, p, q, B):
    """``rho beta(rho) - (1 - (1 - beta(rho))^B)``."""
    beta = float(np.minimum(q, p / rho).sum())
    return float(np.minimum(rho * q, p).sum()) - _spectr_accept(beta, B)


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
    acceptance is ``1 - (1 - beta(rho))^B`` (Sun et al. 2023).

    Returns a float for 1-D input, an array for a 2-D batch.
    """
    p2, q2, batched = as_pair(p, q)
    B = check_B(B)
    out = np.array([_spectr_rho_row(a, b, B) for a, b in zip(p2, q2, strict=True)])
    return out if batched else float(out[0])


def _spectr_residual(p, q, rho, B):
    """SpecTr's correction distribution ``(p - min(q, p/rho) f)_+`` (``p`` if it is empty).

    ``f = sum_{k<B} (1 - beta)^k = (1 - (1 - beta)^B) / beta`` in closed form (``B`` if
    ``beta = 0``), so the cost does not grow with ``B``.
    """
    beta = float(np.minimum(q, p / rho).sum())
    f = float(B) if beta <= 0.0 else _spectr_accept(beta, B) / beta
    res = np.maximum(p - np.minimum(q, p / rho) * f, 0.0)
    return res if res.sum() > 0 else p


def default_ratio_bound(p, q) -> float:
    """Internal: ``mpfr_scan``'s default ratio bound ``w = min_{p_u > 0} q_u / p_u``.

    Times ``1 - 2**-40`` (guards Alg. 5's stopping rule against the rounding of ``1/r``;
    a smaller valid ``w`` only lengthens the scan).  Validated 1-D ``p``, ``q`` with
    ``p << q``.
    """
    mask = p > 0
    with np.errstate(over="ignore"):
        return float(np.min(q[mask] / p[mask])) * _W_SAFETY


@dataclass(frozen=True)
class PreparedPairs:
    """Internal API (shared by :func:`sample_step` and :mod:`specbound.sim.montecarlo`).

    The validated pairs of one call and the per-pair arrays the kernels read
    (``_kernels.seq_step``, ``mpfr_scan_step``, ``batch_kernel``), built once per call by
    :func:`prepare_pairs`.  ``m`` pairs over a vocabulary of ``n`` tokens:

    Attributes
    ----------
    scheme, code, B : str, int, int
        Scheme name, kernel code, number of drafts.
    batched : bool
        Whether the input was a 2-D batch.
    arrays : specbound.sim._kernels.Pairs
        The per-pair arrays, the record ``batch_kernel`` reads: ``p``, ``q`` (m, n) the target
        and draft rows (C-contiguous); ``qcdf`` (m, n) ``cumsum(q)`` per row (the drafts'
        inverse CDF); the sequential schemes' ``targ`` (m, R, n) (the distributions draft
        ``j`` is verified against), ``scale`` (m,) (``rho`` of SpecTr, 1 otherwise) and
        ``fincdf`` (m, n) (cumsum of the correction distribution); ``mpfr_scan``'s
        ``ratio`` (m, n) ``p / q`` and ``w`` (m,) the ratio bound.
    """

    scheme: str
    code: int
    B: int
    batched: bool
    arrays: K.Pairs

    @property
    def m(self) -> int:
        return self.arrays.p.shape[0]

    @property
    def n(self) -> int:
        return self.arrays.p.shape[1]


def check_B(B, scheme: str | None = None) -> int:
    """Internal: validate the number of drafts (``1 <= B <= MAX_B``; 1 for single-draft)."""
    B = as_int(B, "B", min_value=1)
    if B > MAX_B:
        raise ValueError(
            f"B: at most {MAX_B:,} drafts are supported (the kernels keep O(B) work buffers "
            f"per thread), got B={B}"
        )
    if scheme in SINGLE_DRAFT and B != 1:
        raise ValueError(f"B: scheme {scheme!r} uses exactly one draft, got B={B}")
    return B


def _check_w(w, scheme):
    if w is None:
        return None
    if scheme != "mpfr_scan":
        raise ValueError(f"w: only used by scheme 'mpfr_scan', got scheme {scheme!r}")
    return as_real(w, "w", low=0.0, low_open=True)


def _prepare_scan(p2, q2, B, w):
    m, n = p2.shape
    bad = np.any((p2 > 0) & (q2 == 0), axis=1)
    if np.any(bad):
        raise ValueError(
            "q: scheme 'mpfr_scan' needs p absolutely continuous w.r.t. q (p > 0 where "
            f"q = 0 in row {int(np.flatnonzero(bad)[0])})"
        )
    ratio = np.zeros((m, n))
    with np.errstate(over="ignore"):
        np.divide(p2, q2, out=ratio, where=q2 > 0)
    wmax = np.array([default_ratio_bound(a, b) for a, b in zip(p2, q2, strict=True)])
    if w is None:
        wv = wmax
    else:
        wv = np.full(m, w)
        if np.any(wv > wmax / _W_SAFETY):
            raise ValueError(
                "w: must satisfy w <= min_{p_u>0} q_u/p_u (Alg. 5's bound 1/r >= w), got "
                f"w = {float(np.max(wv)):.6g} > {float(np.min(wmax / _W_SAFETY)):.6g}"
            )
    # Alg. 5 stops at the first candidate with T_i >= best / w; best ~ Exp(1) (the target
    # race's winning score), so a step scans about max(B, 1/w) candidates
    wmin = float(np.min(wv))
    if 1.0 / wmin > MAX_EXPECTED_SCAN:
        name = "q" if w is None else "w"
        what = ("the default ratio bound w = min q/p" if w is None else "w")
        raise ValueError(
            f"{name}: mpfr_scan scans about 1/w candidates per step (Alg. 5 stops once "
            f"T_i >= best/w); {what} = {wmin:.3g} gives about {1.0 / wmin:.3g}, above the "
            f"limit MAX_EXPECTED_SCAN = {MAX_EXPECTED_SCAN:.0e}; use w >= "
            f"{1.0 / MAX_EXPECTED_SCAN:.0e}" + (" (a draft q with min q/p of at least that)"
                                                if w is None else "")
        )
    return ratio, wv


def prepare_pairs(p, q, scheme, B, w=None) -> PreparedPairs:
    """Internal API: validate ``(p, q, scheme, B, w)`` and build the per-pair arrays.

    Raises ``ValueError`` naming the argument for invalid input or a size above the module's
    limits (``MAX_B``, ``MAX_TABLE_BYTES``, ``MAX_EXPECTED_SCAN``).
    """
    p2, q2, batched = as_pair(p, q)
    as_choice(scheme, "scheme", SAMPLERS)
    B = check_B(B, scheme)
    w = _check_w(w, scheme)
    m, n = p2.shape
    targ = np.zeros((m, 1, 1))
    scale = np.ones(m)
    fincdf = np.zeros((m, 1))
    ratio = np.zeros((m, 1))
    wv = np.ones(m)
    qcdf = np.cumsum(q2, axis=1)
    if scheme == "sd":
        targ = p2[:, None, :].copy()
        fincdf = np.cumsum([K.residual(a, b) for a, b in zip(p2, q2, strict=True)], axis=1)
    elif scheme == "specinfer":
        need = m * B * n * 8
        if need > MAX_TABLE_BYTES:
            raise ValueError(
                f"B: scheme 'specinfer' precomputes B residual distributions per pair "
                f"({m} x {B} x {n} floats = {need / 2**30:.3g} GiB), above the limit of "
                f"{MAX_TABLE_BYTES / 2**30:.3g} GiB; use a smaller B or fewer pairs per call"
            )
        targ = np.empty((m, B, n))
        fin = np.empty((m, n))
        for i in range(m):
            cur = p2[i]
            for j in range(B):
                targ[i, j] = cur
                cur = K.residual(cur, q2[i])
            fin[i] = cur
        fincdf = np.cumsum(fin, axis=1)
    elif scheme == "spectr":
        targ = p2[:, None, :].copy()
        fin = np.empty((m, n))
        for i in range(m):
            scale[i] = _spectr_rho_row(p2[i], q2[i], B)
            fin[i] = _spectr_residual(p2[i], q2[i], scale[i], B)
        fincdf = np.cumsum(fin, axis=1)
    elif scheme == "mpfr_scan":
        ratio, wv = _prepare_scan(p2, q2, B, w)
    return PreparedPairs(scheme, _CODES[scheme], B, batched,
                         K.Pairs(p2, q2, qcdf, np.ascontiguousarray(targ), scale,
                                 np.ascontiguousarray(fincdf), ratio, wv))


def _run_step(prep: PreparedPairs, i, label, table, use_table):
    """One step of pair ``i`` on a uniform source; returns ``(y, drafts, acc, status)``."""
    code, B, a = prep.code, prep.B, prep.arrays
    p, q = a.p[i], a.q[i]
    drafts = np.empty(B, np.int64)
    status = 0
    if code in (K.SD, K.SPECINFER, K.SPECTR):
        y, acc = K.seq_step(q, a.qcdf[i], a.targ[i], a.scale[i], a.fincdf[i], B, label,
                            table, use_table, drafts)
    elif code == K.EXP_RACE:
        y, x = K.exp_race_step(p, q, label, table, use_table)
        drafts[0] = x
        acc = y == x
    elif code in (K.MPFR, K.MPFR_DIRECT):
        step = K.mpfr_fast_step if code == K.MPFR else K.mpfr_direct_step
        y, acc = step(p, q, B, label, table, use_table, drafts, K.mpfr_heap(B))
    elif code == K.GLS:
        y, acc = K.gls_step(p, q, B, label, table, use_table, drafts)
    else:
        y, acc, status = K.mpfr_scan_step(p, a.ratio[i], a.qcdf[i], B, a.w[i], label,
                                          table, use_table, MAX_SCAN, drafts)
    return int(y), drafts, bool(acc), int(status)


def sample_step(p, q, scheme, B=1, *, key=None, context=(), window=None, seed=None,
                uniforms=None, w=None) -> Step:
    """One speculative step: the emitted token, the drafts and whether a draft was accepted.

    Parameters
    ----------
    p, q : array_like, shape (n,)
        Target and draft distributions (zeros allowed; ``mpfr_scan`` needs ``p << q``).
    scheme : str
        One of :data:`SAMPLERS`: ``"sd"``, ``"exp_race"``, ``"mpfr"``, ``"mpfr_direct"``,
        ``"mpfr_scan"``, ``"gls"``, ``"specinfer"`` or ``"spectr"`` (see the module
        docstring for each construction).
    B : int
        Number of drafts (must be 1 for ``"sd"`` and ``"exp_race"``; at most ``MAX_B``).
    key : int, str or bytes, optional
        Secret key: the step runs on the keyed clocks of ``(key, context)``.
    context : sequence of int
        Context tokens for the keyed clocks.
    window : int or None
        The keyed context window: only the last ``window`` context tokens enter the context
        label (``None``: all of them); see :func:`specbound.sim.prf.context_label`.
    seed : int, SeedSequence or Generator, optional
        Without ``key``/``uniforms``: the uniform table (:func:`clock_shape`) is drawn from
        ``np.random.default_rng(seed)`` outside the kernel.  For ``mpfr_scan`` rows are drawn
        4096 at a time (then doubling) until the scan stops.
    uniforms : array_like, optional
        An explicit uniform table (at least :func:`clock_shape`), values in (0, 1).
    w : float, optional
        ``mpfr_scan`` only: the ratio bound ``w <= min_{p_u>0} q_u/p_u`` (default: that
        minimum times ``1 - 2**-40``); smaller valid values only lengthen the scan (about
        ``max(B, 1/w)`` candidates; ``1/w`` above ``MAX_EXPECTED_SCAN`` is refused).

    Returns
    -------
    Step
        ``token``, ``drafts`` (int64, shape (B,)) and ``accepted``.
    """
    prep = prepare_pairs(p, q, scheme, B, w)
    if prep.batched:
        raise ValueError("p: sample_step takes one pair of 1-D vectors; use sample_emitted "
                         "for batches")
    B = prep.B
    sources = (key is not None) + (uniforms is not None) + (seed is not None)
    if sources > 1:
        raise ValueError("key: give at most one of key, uniforms and seed")
    n = prep.n
    if key is not None:
        label = context_label(key, context, window)
        y, drafts, acc, status = _run_step(prep, 0, label, np.empty((1, 1)), False)
        if status != 0:  # pragma: no cover - probability exp(-1000) after the up-front check
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
        if table.shape[0] >= MAX_SCAN:  # pragma: no cover - probability exp(-1000)
            raise RuntimeError("mpfr_scan: the scan did not stop")
        table = np.vstack([table, rng.random((table.shape[0], 2))])


# ---------------------------------------------------------------------------------------------
# MPFR with a public proposal (Alg. 5 with a proposal that does not depend on the model)


@dataclass(frozen=True, eq=False)
class PublicSample:
    """The outcome of :func:`mpfr_public`.

    Attributes
    ----------
    tokens : ndarray of int64, shape (B,)
        The marks of the ``B`` smallest mapped scores, in increasing score order (i.i.d.
        draws from ``p``; ``tokens[0]`` is the PFR sample).
    n_points : int
        The number of points of the public process read before the stopping rule fired
        (the sampler's cost; at least ``B``).
    """

    tokens: np.ndarray
    n_points: int


def public_proposal(proposal, n: int) -> np.ndarray:
    """Internal: the public proposal's weights (uniform on ``n`` symbols for None/"uniform"),
    a float64 array of length ``n`` with a positive sum (``ValueError`` naming
    ``proposal``)."""
    if proposal is None or (isinstance(proposal, str) and proposal == "uniform"):
        return np.ones(n)
    if isinstance(proposal, str):
        raise ValueError(f"proposal: must be 'uniform' or an array of weights, got {proposal!r}")
    q0 = as_prob(proposal, "proposal", normalize=True, ndim=(1,))
    if q0.shape[0] != n:
        raise ValueError(f"proposal: has {q0.shape[0]} entries, the distribution has {n}")
    return q0


def public_plan(p, q0, w=None, name="p"):
    """Internal: ``(mult, q0cdf, w)`` of Alg. 5 with proposal ``q0`` for target ``p``
    (validated 1-D arrays): ``mult = (q0 / sum q0) / p`` (``+inf`` where ``p = 0``), the
    proposal's running sum and the ratio bound ``w`` (default ``min mult`` times
    ``1 - 2**-40``; a given ``w`` must lie in ``(0, min mult]``).  ``ValueError`` naming
    ``proposal`` when ``q0 = 0`` where ``p > 0`` (``p`` not absolutely continuous with
    respect to ``q0``), ``w`` when out of range, ``name`` when ``p`` has no mass."""
    q0n = q0 / q0.sum()
    pos = p > 0
    if not np.any(pos):
        raise ValueError(f"{name}: has no positive entry")
    bad = pos & (q0n <= 0)
    if np.any(bad):
        raise ValueError(
            f"proposal: must be positive wherever {name} is (Alg. 5 needs {name} << proposal); "
            f"zero at symbol {int(np.flatnonzero(bad)[0])} where {name} > 0")
    mult = np.full(p.shape[0], np.inf)
    with np.errstate(over="ignore"):
        np.divide(q0n, p, out=mult, where=pos)
    wmax = float(np.min(mult))
    if not (wmax > 0.0 and np.isfinite(wmax)):
        raise ValueError(f"proposal: the ratio bound min q0/{name} = {wmax!r} is not positive")
    if w is None:
        wv = wmax * _W_SAFETY
    else:
        wv = as_real(w, "w", low=0.0, low_open=True)
        if wv > wmax:
            raise ValueError(f"w: must satisfy 0 < w <= min_{{{name} > 0}} q0/{name} = "
                             f"{wmax:.6g} (Alg. 5's bound 1/r >= w), got {wv:.6g}")
    return mult, np.cumsum(q0), wv


def public_scan(label, mult, q0cdf, k, w, out):
    """Internal: Alg. 5 on the keyed public process of ``label`` (point ``i`` reads
    ``prf_uniform(label, i, col)``) for the plan ``(mult, q0cdf, w)`` of :func:`public_plan`:
    the marks of the ``k`` smallest scores into ``out[:k]``; returns ``(n_points, heap)``,
    ``heap`` the kernel's score heap (``heap[0][0]``: the smallest score when ``k = 1``)."""
    heap = K.mpfr_heap(k)
    n, status = K.mpfr_public_select(mult, q0cdf, k, w, np.uint64(label), np.empty((1, 1)),
                                     False, MAX_SCAN, out, heap)
    if status != 0:  # pragma: no cover - about k / w points are expected, far below MAX_SCAN
        raise RuntimeError(f"mpfr_public: the scan did not stop within {MAX_SCAN} points")
    return int(n), heap


def mpfr_public(p, B=1, *, proposal=None, w=None, key=None, context=(), window=None,
                seed=None, uniforms=None) -> PublicSample:
    """``B`` samples of ``p`` by MPFR on a *public* proposal process (Alg. 5).

    The finite implementation of the ``B``-sample mapped PFR of Liu, Wan, Gao & Gündüz
    2026, arXiv:2609.21858, App. A.3, Alg. 5, with a proposal ``Q0`` that does not depend on
    the model (uniform on the vocabulary by default): point ``i`` of the process has arrival
    ``T_i = sum_{k<=i} -log U[k, 0]`` and mark ``Z_i = F_{Q0}^{-1}(U[i, 1])``; its score is
    ``T_i / r(Z_i)``, ``r = p/Q0``; the marks of the ``B`` smallest scores are returned in
    increasing order, found by scanning until the ``B``-th smallest kept score is at most
    ``T_i w`` (Theorem A.4: ``w <= 1/r`` everywhere, so no later point can enter).  They are
    i.i.d. draws from ``p``; by Theorem A.1 the first arrivals ``E_z = Q0(z) S_z`` are i.i.d.
    Exp(1), so on one process the samples of two laws ``p`` and ``q`` are coupled exactly as
    the per-symbol exponential race of scheme ``"mpfr"`` couples them (docs/theory.md,
    "MPFR with a public proposal").  The number of points read grows as about
    ``B / w = B max_z p(z)/Q0(z)`` (``B V max p`` for the uniform proposal).

    Parameters
    ----------
    p : array_like, shape (n,)
        The distribution to sample (zeros allowed).
    B : int
        Number of samples (``1 <= B <= MAX_B``).
    proposal : None, "uniform" or array_like, shape (n,)
        The public proposal ``Q0`` (weights, normalised here); must be positive wherever
        ``p`` is.  Default: uniform on the ``n`` symbols.
    w : float, optional
        The ratio bound, ``0 < w <= min_{p>0} Q0/p`` (default: that minimum times
        ``1 - 2**-40``); a smaller valid ``w`` only lengthens the scan.  An expected scan
        ``B / w`` above ``MAX_EXPECTED_SCAN`` is refused.
    key, context, window :
        Keyed source: point ``i`` reads ``prf_uniform(context_label(key, context, window),
        i, col)`` (``col`` 0: arrival, 1: mark), the convention of scheme ``"mpfr_scan"``.
    seed : int, SeedSequence or Generator, optional
        Without ``key``/``uniforms``: rows of uniforms drawn from
        ``np.random.default_rng(seed)``, 4096 at a time then doubling, until the scan stops.
    uniforms : array_like, optional
        An explicit table of shape ``(rows, >= 2)`` with entries in (0, 1); ``ValueError``
        naming ``uniforms`` when its rows are too few for the scan to stop.

    Returns
    -------
    PublicSample
        ``tokens`` (int64, shape (B,)) and ``n_points``.
    """
    p = as_prob(p, "p", ndim=(1,))
    B = check_B(B)
    q0 = public_proposal(proposal, p.shape[0])
    mult, q0cdf, wv = public_plan(p, q0, w)
    if B / wv > MAX_EXPECTED_SCAN:
        raise ValueError(
            f"{'proposal' if w is None else 'w'}: the scan reads about B/w = {B / wv:.3g} "
            f"points, above the limit MAX_EXPECTED_SCAN = {MAX_EXPECTED_SCAN:.0e} (w = "
            f"min proposal/p gives the shortest scan)")
    if (key is not None) + (uniforms is not None) + (seed is not None) > 1:
        raise ValueError("key: give at most one of key, uniforms and seed")
    out = np.empty(B, np.int64)
    if key is not None:
        n, _ = public_scan(context_label(key, context, window), mult, q0cdf, B, wv, out)
        return PublicSample(out, n)
    heap = K.mpfr_heap(B)
    if uniforms is not None:
        table = np.ascontiguousarray(np.asarray(uniforms, dtype=np.float64))
        if (table.ndim != 2 or table.shape[1] < 2 or table.shape[0] < 1
                or not np.all((table > 0) & (table < 1))):
            raise ValueError(f"uniforms: must be a 2-D array with at least 2 columns and "
                             f"entries in (0, 1), got shape {table.shape}")
        n, status = K.mpfr_public_select(mult, q0cdf, B, wv, np.uint64(0), table, True,
                                         MAX_SCAN, out, heap)
        if status != 0:
            raise ValueError(f"uniforms: {table.shape[0]} rows are too few for the scan to stop")
        return PublicSample(out, int(n))
    rng = as_rng(seed)
    table = rng.random((4096, 2))
    while True:
        table = np.maximum(table, np.finfo(np.float64).tiny)  # (0, 1): random() can give 0
        n, status = K.mpfr_public_select(mult, q0cdf, B, wv, np.uint64(0), table, True,
                                         MAX_SCAN, out, heap)
        if status == 0:
            return PublicSample(out, int(n))
        if table.shape[0] >= MAX_SCAN:  # pragma: no cover - probability exp(-1000)
            raise RuntimeError("mpfr_public: the scan did not stop")
        table = np.vstack([table, rng.random((table.shape[0], 2))])
