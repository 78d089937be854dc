"""Correct reference samplers and a gallery of realistic buggy ones (the kit's proof of power).

Each bug is a mistake that has been made, or is easy to make, when speculative sampling
(Leviathan et al. 2023, arXiv:2211.17192; Chen et al. 2023, arXiv:2302.01318) is written by
hand: a residual that is not renormalised, the residual ``(q - p)_+`` instead of
``(p - q)_+``, resampling from ``p`` after a rejection, the ratio ``q/p``, half-precision
arithmetic, a bonus token drawn from the draft, an off-by-one in the accepted count, a
correction drawn at the wrong position, a lossless sampler that wastes acceptance, and a
keyed sampler whose token depends on the draft.  :data:`GALLERY` lists them with the check
that catches each and a realistic case (:func:`realistic_pair`); the tests measure that
every one is caught at the default sample size (``tests/test_testing_gallery.py``).

The references are correct samplers of each protocol: :func:`sd_step`, :func:`sd_batch`,
:func:`sd_block` (standard speculative sampling, Alg. 1 of Liu, Wan, Gao & Gündüz 2026,
arXiv:2609.21858) and :func:`race_keyed` (the keyed exponential race, their Alg. 2).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

__all__ = ["GALLERY", "Bug", "realistic_pair", "sd_step", "sd_batch", "sd_block",
           "race_keyed", "catch"]


def realistic_pair(V: int = 32, seed: int = 0, *, zipf: float = 1.1, noise: float = 0.6):
    """A target with a Zipf-like head (``p_i ~ i^-zipf``, shuffled) and a draft that is the
    target with log-normal noise on its logits (``TV`` about 0.2-0.3): the shape of a small
    model's next-token law against a large one's."""
    rng = np.random.default_rng(seed)
    p = rng.permutation(1.0 / np.arange(1, V + 1) ** zipf)
    p /= p.sum()
    lq = np.log(p) + noise * rng.standard_normal(V)
    q = np.exp(lq - lq.max())
    return p, q / q.sum()


def _rows_choice(W, u):
    """Row-wise inverse CDF: the smallest ``j`` with ``cumsum(W[i])[j] > u[i] * sum(W[i])``."""
    c = np.cumsum(W, axis=1)
    idx = (c <= (u * c[:, -1])[:, None]).sum(axis=1)
    return np.minimum(idx, W.shape[1] - 1)


# ------------------------------------------------------------------------------ references


def sd_step(p, q, x, rng):
    """Standard speculative sampling, one call per step (correct)."""
    if rng.random() * q[x] < p[x]:
        return x, True
    r = np.maximum(p - q, 0.0)
    return int(_rows_choice(r[None, :], np.array([rng.random()]))[0]), False


def _sd_rows(P, Q, X, rng, *, ratio=None, residual=None, on_reject=None):
    m = X.shape[0]
    r = np.arange(m)
    px, qx = P[r, X], Q[r, X]
    acc = rng.random(m) * qx < (px if ratio is None else ratio(px, qx) * qx)
    y = np.array(X, dtype=np.int64, copy=True)
    rej = np.flatnonzero(~acc)
    if rej.size:
        Pr, Qr = P[rej], Q[rej]
        if on_reject is not None:
            y[rej] = on_reject(Pr, Qr, rng.random(rej.size))
        else:
            R = np.maximum(Pr - Qr, 0.0) if residual is None else residual(Pr, Qr)
            y[rej] = _rows_choice(R, rng.random(rej.size))
    return y, acc


def sd_batch(P, Q, X, rng):
    """Standard speculative sampling over rows (correct; the batch protocol)."""
    return _sd_rows(P, Q, X, rng)


def sd_block(P, Q, xs, rng):
    """An ``L``-token block of standard speculative sampling (correct; the block protocol)."""
    L = len(xs)
    for i in range(L):
        x = int(xs[i])
        if not rng.random() * Q[i, x] < P[i, x]:
            r = np.maximum(P[i] - Q[i], 0.0)
            t = int(_rows_choice(r[None, :], np.array([rng.random()]))[0])
            return [int(v) for v in xs[:i]] + [t], i
    t = int(_rows_choice(P[L][None, :], np.array([rng.random()]))[0])
    return [int(v) for v in xs] + [t], L


def _keyed_uniforms(key, context, V):
    h = hashlib.blake2b(repr((int(key), tuple(int(c) for c in context))).encode(),
                        digest_size=16).digest()
    return np.random.default_rng(list(np.frombuffer(h, np.uint32))).random(V + 1)


def race_keyed(p, q, x, key, context):
    """The keyed exponential race (correct, drafter-invariant): ``Y = argmin E_u / p_u``
    with ``E_u = -log U_u`` keyed by ``(key, context)``."""
    u = _keyed_uniforms(key, context, len(p))[: len(p)]
    with np.errstate(divide="ignore"):
        return int(np.argmin(np.where(p > 0, -np.log(u) / np.where(p > 0, p, 1.0), np.inf)))


# ------------------------------------------------------------------------------ bugs


def residual_not_renormalised(P, Q, X, rng):
    """The correction is drawn from ``(p - q)_+`` without dividing by its mass: an inverse
    CDF on an unnormalised vector sends the missing mass to the last token."""
    def pick(Pr, Qr, u):
        c = np.cumsum(np.maximum(Pr - Qr, 0.0), axis=1)
        return np.minimum((c <= u[:, None]).sum(axis=1), Pr.shape[1] - 1)
    return _sd_rows(P, Q, X, rng, on_reject=pick)


def residual_q_minus_p(P, Q, X, rng):
    """The residual ``(q - p)_+`` (target and draft swapped in the correction)."""
    return _sd_rows(P, Q, X, rng, residual=lambda Pr, Qr: np.maximum(Qr - Pr, 0.0))


def resample_from_p(P, Q, X, rng):
    """On rejection a fresh token from ``p`` instead of the residual."""
    return _sd_rows(P, Q, X, rng, on_reject=lambda Pr, Qr, u: _rows_choice(Pr, u))


def ratio_q_over_p(P, Q, X, rng):
    """Acceptance ``min(1, q/p)`` (the ratio inverted)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return _sd_rows(P, Q, X, rng,
                        ratio=lambda px, qx: np.where(px > 0, qx / np.where(px > 0, px, 1), 1)
                        / np.where(qx > 0, qx, 1) * px)


def half_precision(P, Q, X, rng):
    """The whole step in float16, as with half-precision logits: acceptance
    ``min(1, p/q)`` on float16 probabilities and the correction's inverse CDF on a float16
    running sum (whose rounding, about 2**-11 per step near 1, shifts every token's interval
    at a large vocabulary)."""
    m = X.shape[0]
    r = np.arange(m)
    same = P.strides[0] == 0 and Q.strides[0] == 0
    # one law on every row (the harness's broadcast views): the float16 arrays and running
    # sum are computed once and shared (identical outputs, much faster)
    P16 = (np.broadcast_to(P[0].astype(np.float16), P.shape) if same
           else P.astype(np.float16))
    Q16 = (np.broadcast_to(Q[0].astype(np.float16), Q.shape) if same
           else Q.astype(np.float16))
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = P16[r, X] / Q16[r, X]
    acc = rng.random(m).astype(np.float16) < ratio
    y = np.array(X, dtype=np.int64, copy=True)
    rej = np.flatnonzero(~acc)
    if rej.size:
        u = rng.random(rej.size).astype(np.float16)
        if same:
            c = np.cumsum(np.maximum(P16[0] - Q16[0], np.float16(0)), dtype=np.float16)
            t = (u * c[-1]).astype(np.float64)
            y[rej] = np.minimum(np.searchsorted(c.astype(np.float64), t, side="right"),
                                P.shape[1] - 1)
        else:
            R = np.maximum(P16[rej] - Q16[rej], np.float16(0))
            c = np.cumsum(R, axis=1, dtype=np.float16)
            y[rej] = np.minimum((c <= (u * c[:, -1])[:, None]).sum(axis=1), P.shape[1] - 1)
    return y, acc


def shaved_acceptance(P, Q, X, rng):
    """Accepts with ``0.95 min(1, p/q)`` and compensates in the residual
    ``p - 0.95 min(p, q)``: lossless, but it wastes 5% of the acceptance."""
    return _sd_rows(P, Q, X, rng, ratio=lambda px, qx: 0.95 * np.minimum(1.0, px / qx),
                    residual=lambda Pr, Qr: np.maximum(Pr - 0.95 * np.minimum(Pr, Qr), 0.0))


def block_off_by_one(P, Q, xs, rng):
    """Block: the first rejected draft is emitted as accepted too (``n_accepted`` counted as
    the index of the first rejection plus one)."""
    L = len(xs)
    for i in range(L):
        x = int(xs[i])
        if not rng.random() * Q[i, x] < P[i, x]:
            k = min(i + 1, L)
            if k == L:
                t = int(_rows_choice(P[L][None, :], np.array([rng.random()]))[0])
            else:
                r = np.maximum(P[k] - Q[k], 0.0)
                r = r if r.sum() > 0 else P[k]
                t = int(_rows_choice(r[None, :], np.array([rng.random()]))[0])
            return [int(v) for v in xs[:k]] + [t], k
    t = int(_rows_choice(P[L][None, :], np.array([rng.random()]))[0])
    return [int(v) for v in xs] + [t], L


def block_bonus_from_q(P, Q, xs, rng):
    """Block: when every draft is accepted, the bonus token is drawn from the draft's last
    law instead of the target's next one."""
    toks, k = sd_block(P, Q, xs, rng)
    if k == len(xs):
        toks[-1] = int(_rows_choice(Q[-1][None, :], np.array([rng.random()]))[0])
    return toks, k


def block_stale_residual(P, Q, xs, rng):
    """Block: the correction after a rejection at position ``i`` is drawn from position 0's
    residual (a position index that was not advanced)."""
    L = len(xs)
    for i in range(L):
        x = int(xs[i])
        if not rng.random() * Q[i, x] < P[i, x]:
            r = np.maximum(P[0] - Q[0], 0.0)
            t = int(_rows_choice(r[None, :], np.array([rng.random()]))[0])
            return [int(v) for v in xs[:i]] + [t], i
    t = int(_rows_choice(P[L][None, :], np.array([rng.random()]))[0])
    return [int(v) for v in xs] + [t], L


def keyed_sd(p, q, x, key, context):
    """Keyed standard speculative sampling: the uniforms come from the key, but acceptance
    and correction depend on the draft, so the token changes with the drafter."""
    u = _keyed_uniforms(key, context, 2)
    if u[0] * q[x] < p[x]:
        return int(x)
    r = np.maximum(p - q, 0.0)
    return int(_rows_choice(r[None, :], u[1:2])[0])


# ------------------------------------------------------------------------------ the gallery


@dataclass(frozen=True)
class Bug:
    """One buggy sampler, the check that catches it and its case."""

    name: str
    sampler: object = field(repr=False)
    check: str
    protocol: str
    V: int = 32
    L: int = 3

    @property
    def description(self) -> str:
        return (self.sampler.__doc__ or "").strip().split("\n\n")[0].replace("\n", " ")

    def case(self, seed: int = 0):
        """The keyword arguments of the check for a realistic case."""
        if self.protocol == "block":
            pairs = [realistic_pair(self.V, seed + 17 * i) for i in range(self.L + 1)]
            P = np.stack([a for a, _ in pairs])
            Q = np.stack([b for _, b in pairs[: self.L]])
            return dict(P=P, Q=Q)
        p, q = realistic_pair(self.V, seed)
        if self.protocol == "keyed":
            qs = np.stack([q, realistic_pair(self.V, seed + 1)[1], np.full(self.V, 1 / self.V)])
            return dict(p=p, qs=qs)
        return dict(p=p, q=q)


GALLERY: tuple[Bug, ...] = (
    Bug("residual_not_renormalised", residual_not_renormalised, "lossless", "batch"),
    Bug("residual_q_minus_p", residual_q_minus_p, "lossless", "batch"),
    Bug("resample_from_p", resample_from_p, "lossless", "batch"),
    Bug("ratio_q_over_p", ratio_q_over_p, "lossless", "batch"),
    Bug("half_precision", half_precision, "lossless", "batch", V=1000),
    Bug("shaved_acceptance", shaved_acceptance, "acceptance", "batch"),
    Bug("block_off_by_one", block_off_by_one, "block", "block", V=8),
    Bug("block_bonus_from_q", block_bonus_from_q, "block", "block", V=8),
    Bug("block_stale_residual", block_stale_residual, "block", "block", V=8),
    Bug("keyed_sd", keyed_sd, "drafter_invariance", "keyed", V=8),
)


def catch(bug: Bug, *, n=None, seed: int = 0, case_seed: int = 0, **kwargs):
    """Run ``bug``'s check on its case; returns the :class:`~specbound.testing.CheckResult`."""
    from specbound import testing as T

    case = bug.case(case_seed)
    common = dict(n=n, seed=seed, name=bug.name, **kwargs)
    if bug.check == "block":
        return T.check_block(bug.sampler, case["P"], case["Q"], **common)
    if bug.check == "drafter_invariance":
        return T.check_drafter_invariance(bug.sampler, case["p"], case["qs"], **common)
    fn = T.check_lossless if bug.check == "lossless" else T.check_acceptance
    return fn(bug.sampler, case["p"], case["q"], protocol=bug.protocol, **common)
