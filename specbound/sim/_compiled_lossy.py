"""The compiled verification step of the lossy rules (private).

The lossy decoder has no block loop of its own: :func:`specbound.sim.lossy_decode` runs the
single-draft block of the compiled decoders (:func:`specbound.sim._compiled.decode_one`,
the block of ``vsps``: blockwise speculative sampling, Leviathan et al. 2023,
arXiv:2211.17192, Alg. 1) with the verification step of a lossy rule of Zhou et al. 2026,
arXiv:2607.26627, §3.1-3.2, App. A, F, G.  This module is that step: the per-context
mechanism of the rule's spec (:data:`specbound.sim.lossy.RULE_SPECS`) rewritten element by
element -- the same acceptance ``h(x)`` (:func:`accept_prob`), the same correction
distribution and redraw loop (:func:`correction`, NumPy's ``PCG64`` stream replayed by
:mod:`specbound.sim._pcg`), the same step kernels (``_kernels.categorical``,
``_kernels.residual_sample``) -- dispatched on the rule's code explicitly (an unknown code
raises).  The ``lossless`` rule is the decoders' own step and never reaches it.

Numerics.  Everything is compiled without fastmath (IEEE operations in NumPy's order, no
fused multiply-add).  The NumPy reductions whose *values* matter -- the normalisation of the
truncated target ``p_Theta``, of the contrastive law, and the Fuzzy SD divergences -- use
:func:`pairwise_sum`, NumPy's pairwise summation (8 accumulators, blocks of 128 elements,
halves rounded down to a multiple of 8), so those sums are NumPy's bit for bit.  Reductions
only compared with 0 (``sum (p - q)_+ > 0``, ``q . h > 0``) are sums of non-negative terms
and are positive iff some term is, whatever the order.  The one remaining difference is the
elementary functions: the contrastive law (``log``, ``exp``, ``**``) and the KL / JS gates
of Fuzzy SD call the C library's ``log``/``exp``/``pow`` here, while NumPy may dispatch them
to its own SIMD implementations (it does on AVX-512 machines), which differ from the C
library's in the last bit for a few per cent of arguments.  Such a one-ulp difference in
``nu`` or ``D(p, q)`` changes an output only if a uniform (or the gate threshold) falls
within about one ulp of the compared value: probability of order ``V 2^-52`` per decision
(``V`` the vocabulary size), i.e. never in practice, but these three settings are equal to
the Python loop with overwhelming probability rather than by construction.  Every other rule
and setting (lossless, interpolation, lenience, judge, truncation, ceiling,
truncation_ceiling, Fuzzy SD with ``divergence="tv"``) uses only ``+ - * /``, comparisons and
pairwise sums: bit for bit by construction.
"""

from __future__ import annotations

import numpy as np

from specbound.sim import _kernels as _K
from specbound.sim._config import JIT, njit
from specbound.sim._pcg import pcg_double
from specbound.sim.lossy import RULE_SPECS

#: IEEE arithmetic (the NumPy mechanism's roundings); cached like the other kernels
JIT_IEEE = dict(JIT, fastmath=False)

# rule codes: ``RuleSpec.code`` of the rule registry (specbound.sim.lossy.RULE_SPECS, where
# a rule's code is its position); each names the branches of its step below
LOSSLESS = RULE_SPECS["lossless"].code
INTERPOLATION = RULE_SPECS["interpolation"].code
FUZZY = RULE_SPECS["fuzzy"].code
LENIENCE = RULE_SPECS["lenience"].code
JUDGE = RULE_SPECS["judge"].code
TRUNCATION = RULE_SPECS["truncation"].code
CEILING = RULE_SPECS["ceiling"].code
TRUNCATION_CEILING = RULE_SPECS["truncation_ceiling"].code
CONTRASTIVE = RULE_SPECS["contrastive"].code
#: the compiled rules: those with a step here (the block loop refuses any other code)
CODES = (LOSSLESS, INTERPOLATION, FUZZY, LENIENCE, JUDGE, TRUNCATION, CEILING,
         TRUNCATION_CEILING, CONTRASTIVE)
# positions in ``fpar`` and ``ipar``
F_LAM, F_THRESHOLD, F_ELL, F_BETA, F_ALPHA = range(5)
I_DIVERGENCE, I_REDRAW = range(2)
DIV_TV, DIV_KL, DIV_JS = range(3)

#: the block loop's error code: the truncated target was needed with no target mass on ``A``
ERR_NO_MASS = 1

_PW_BLOCK = 128
#: frames of pairwise_sum's stack (the depth is log2(n / 128) + 2 < 64 for any size)
_PW_STACK = 128


@njit(**JIT_IEEE)
def _pairwise_leaf(a, lo, n):
    """NumPy's pairwise sum of ``a[lo:lo + n]`` for ``n <= 128`` (no further split)."""
    if n < 8:
        res = 0.0
        for i in range(n):
            res += a[lo + i]
        return res
    r0 = a[lo]
    r1 = a[lo + 1]
    r2 = a[lo + 2]
    r3 = a[lo + 3]
    r4 = a[lo + 4]
    r5 = a[lo + 5]
    r6 = a[lo + 6]
    r7 = a[lo + 7]
    m = n - n % 8
    i = 8
    while i < m:
        r0 += a[lo + i]
        r1 += a[lo + i + 1]
        r2 += a[lo + i + 2]
        r3 += a[lo + i + 3]
        r4 += a[lo + i + 4]
        r5 += a[lo + i + 5]
        r6 += a[lo + i + 6]
        r7 += a[lo + i + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += a[lo + i]
        i += 1
    return res


@njit(**JIT_IEEE)
def pairwise_sum(a):
    """``a.sum()`` of a contiguous float64 vector, bit for bit NumPy's (pairwise summation:
    runs of fewer than 8 summed in order, up to 128 with 8 interleaved accumulators combined
    as ``((r0+r1)+(r2+r3))+((r4+r5)+(r6+r7))`` plus the tail in order, longer runs split at
    half their length rounded down to a multiple of 8 and the two halves' sums added).

    The recursion is run on an explicit stack (a recursive njit function does not load from
    Numba's on-disk cache): post-order, so the additions are NumPy's, in its order.
    """
    n = a.shape[0]
    if n <= _PW_BLOCK:
        return _pairwise_leaf(a, 0, n)
    los = np.empty(_PW_STACK, np.int64)
    lens = np.empty(_PW_STACK, np.int64)
    stage = np.empty(_PW_STACK, np.int64)
    vals = np.empty(_PW_STACK)
    top = 0
    los[0] = 0
    lens[0] = n
    stage[0] = 0
    nv = 0
    while top >= 0:
        lo = los[top]
        m = lens[top]
        if m <= _PW_BLOCK:
            vals[nv] = _pairwise_leaf(a, lo, m)
            nv += 1
            top -= 1
            continue
        n2 = m // 2
        n2 -= n2 % 8
        if stage[top] == 0:  # the first half
            stage[top] = 1
            top += 1
            los[top] = lo
            lens[top] = n2
            stage[top] = 0
        elif stage[top] == 1:  # the second half
            stage[top] = 2
            top += 1
            los[top] = lo + n2
            lens[top] = m - n2
            stage[top] = 0
        else:  # both halves done
            vals[nv - 2] = vals[nv - 2] + vals[nv - 1]
            nv -= 1
            top -= 1
    return vals[0]


# ------------------------------------------------------------------ per-context quantities


@njit(**JIT_IEEE)
def _ratio(num, den):
    """``theory``'s / ``sim.lossy``'s ``_ratio``: ``min(1, num/den)`` where ``den > 0``, else 0."""
    if den > 0.0:
        r = num / den
        return r if r < 1.0 else 1.0
    return 0.0


@njit(**JIT_IEEE)
def _kl(a, b, terms):
    """``theory.divergences.kl_rows`` of one row (``terms``: scratch of the row's size)."""
    n = a.shape[0]
    bad = False
    for i in range(n):
        if a[i] > 0.0 and b[i] > 0.0:
            terms[i] = a[i] * (np.log(a[i]) - np.log(b[i]))
        else:
            terms[i] = 0.0
            if a[i] > 0.0:
                bad = True
    if bad:
        return np.inf
    out = pairwise_sum(terms)
    return out if out > 0.0 else 0.0


@njit(**JIT_IEEE)
def fuzzy_divergence(p, q, kind, w, terms):
    """``theory.lossy.fuzzy_divergence`` of one context: TV, KL(p || q) or JS (nats)."""
    n = p.shape[0]
    if kind == DIV_TV:
        for i in range(n):
            terms[i] = abs(p[i] - q[i])
        return 0.5 * pairwise_sum(terms)
    if kind == DIV_KL:
        return _kl(p, q, terms)
    for i in range(n):
        w[i] = 0.5 * (p[i] + q[i])
    return 0.5 * _kl(p, w, terms) + 0.5 * _kl(q, w, terms)


@njit(**JIT_IEEE)
def contrastive_law(p, q, beta, alpha, nu):
    """``theory.lossy.contrastive_law`` of one context into ``nu``: ``p^(1+beta) q^(-beta)``
    on the head ``{p >= alpha max p, p > 0}`` normalised (the limit law on the head's
    ``q = 0`` tokens when ``beta > 0``; ``p`` on the head when ``beta = 0``)."""
    n = p.shape[0]
    thr = alpha * np.max(p)
    if beta == 0.0:
        for i in range(n):
            nu[i] = p[i] if (p[i] >= thr and p[i] > 0.0) else 0.0
    else:
        infinite = False
        for i in range(n):
            if p[i] >= thr and p[i] > 0.0 and q[i] <= 0.0:
                infinite = True
                break
        if infinite:
            e = 1.0 + beta
            for i in range(n):
                head = p[i] >= thr and p[i] > 0.0
                nu[i] = p[i] ** e if (head and q[i] <= 0.0) else 0.0
        else:
            top = -np.inf
            for i in range(n):
                if p[i] >= thr and p[i] > 0.0:
                    nu[i] = (1.0 + beta) * np.log(p[i]) - beta * np.log(q[i])
                    if nu[i] > top:
                        top = nu[i]
                else:
                    nu[i] = -np.inf
            for i in range(n):
                nu[i] = np.exp(nu[i] - top) if nu[i] != -np.inf else 0.0
    s = pairwise_sum(nu)
    for i in range(n):
        nu[i] = nu[i] / s


@njit(**JIT_IEEE)
def accept_prob(rule, p, q, nu, i, fpar, jud, alw, gate):
    """The rule's acceptance probability ``h(i)`` of a drafted token ``i``
    (:func:`specbound.sim.lossy._mechanism`, element by element); ``nu``: the contrastive law
    (contrastive only), ``gate``: the Fuzzy SD gate (fuzzy only)."""
    if rule == LOSSLESS:
        return _ratio(p[i], q[i])
    if rule == INTERPOLATION:
        lam = fpar[F_LAM]
        return _ratio(lam * p[i] + (1.0 - lam) * q[i], q[i])
    if rule == CONTRASTIVE:
        return _ratio(nu[i], q[i])
    if rule == FUZZY:
        return gate
    if rule == LENIENCE or rule == CEILING:
        return _ratio(p[i], fpar[F_ELL] * q[i])
    if rule == JUDGE:
        h = 1.0
        if q[i] > p[i]:
            base = _ratio(p[i], q[i])
            h = base + (1.0 - base) * jud[i]
        return h if q[i] > 0.0 else 0.0
    if rule == TRUNCATION:
        return 1.0 if alw[i] else 0.0
    if rule == TRUNCATION_CEILING:
        if alw[i] and q[i] > 0.0:
            return 1.0
        return _ratio(p[i], fpar[F_ELL] * q[i])
    raise ValueError("rule: unknown rule code in the compiled loop")


@njit(**JIT_IEEE)
def _no_target_mass(p, q, alw, redraw):
    """``sim.lossy._prepare``'s check for truncation: ``p_Theta`` is needed in this context
    (a rejection can occur and is corrected from it) but ``A`` carries no target mass."""
    n = p.shape[0]
    needed = False
    if redraw:
        needed = True
        for i in range(n):
            if q[i] > 0.0 and alw[i]:
                needed = False
                break
    else:
        for i in range(n):
            if q[i] > 0.0 and not alw[i]:
                needed = True
                break
    if not needed:
        return False
    for i in range(n):
        if alw[i] and p[i] > 0.0:
            return False
    return True


@njit(**JIT_IEEE)
def correction(rule, p, q, nu, fpar, ipar, jud, alw, u, st, w):
    """The token emitted after a rejection (:func:`specbound.sim.lossy._mechanism` and the
    Python loop's correction): the redraw loop of the ``"renormalize"`` readings (fresh
    drafts ``categorical(q, U)`` tested with ``U' < h`` until one passes, uniforms from
    ``st``) when the yield ``q . h`` is positive, otherwise a draw with ``u`` from the
    rule's residual; ``w``: scratch of the vocabulary's size."""
    n = p.shape[0]
    redraw = ipar[I_REDRAW] != 0 and (rule == TRUNCATION or rule == CEILING
                                      or rule == TRUNCATION_CEILING)
    if redraw:
        passes = False
        for i in range(n):
            if q[i] * accept_prob(rule, p, q, nu, i, fpar, jud, alw, 0.0) > 0.0:
                passes = True
                break
        if passes:
            while True:
                y = _K.categorical(q, pcg_double(st))
                if pcg_double(st) < accept_prob(rule, p, q, nu, y, fpar, jud, alw, 0.0):
                    return y
    if rule == LOSSLESS or rule == LENIENCE or rule == JUDGE:
        return _K.residual_sample(p, q, u)
    if rule == INTERPOLATION:
        lam = fpar[F_LAM]
        for i in range(n):
            w[i] = lam * p[i] + (1.0 - lam) * q[i]
        return _K.residual_sample(w, q, u)
    if rule == CONTRASTIVE:
        return _K.residual_sample(nu, q, u)
    if rule == FUZZY:
        return _K.categorical(p, u)
    if rule == TRUNCATION:
        for i in range(n):
            w[i] = p[i] * (1.0 if alw[i] else 0.0)
        s = pairwise_sum(w)
        if s > 0.0:
            for i in range(n):
                w[i] = w[i] / s
        return _K.categorical(w, u)
    if rule == CEILING or rule == TRUNCATION_CEILING:  # residual (p - q h)_+, p if empty
        for i in range(n):
            w[i] = q[i] * accept_prob(rule, p, q, nu, i, fpar, jud, alw, 0.0)
        return _K.residual_sample(p, w, u)
    raise ValueError("rule: unknown rule code in the compiled loop")
