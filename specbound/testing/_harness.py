"""The harness: draws drafts, calls a sampler through one of the protocols, validates what it
returns, and collects the emitted tokens (private; the checks of :mod:`specbound.testing`
are built on it).

Every sampler call receives read-only inputs (a sampler that writes into ``p`` raises at once
instead of corrupting later calls), and every output is validated in bulk after the calls:
a token outside ``0..V-1``, a non-integer, NaN, a wrong shape or length, an ``accepted`` flag
that contradicts the emitted token, or an exception raised by the sampler is reported as a
``ValueError`` (``TypeError`` for outputs of the wrong type) naming the sampler and the first
bad call's inputs -- never a goodness-of-fit test on garbage.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from specbound._validation import as_int, as_prob, as_seedseq

#: the sampler protocols (see :mod:`specbound.testing`)
PROTOCOLS = ("step", "batch", "multi", "multi_batch", "block", "keyed")

#: rows per call of the batched protocols: about 2**22 probabilities per (broadcast) row block
_BATCH_ELEMENTS = 2**22


def sampler_name(sampler) -> str:
    """``module.qualname`` of a callable (its ``repr`` when it has none)."""
    name = getattr(sampler, "__qualname__", None) or getattr(sampler, "__name__", None)
    if name is None:
        return repr(sampler)[:80]
    mod = getattr(sampler, "__module__", None)
    return f"{mod}.{name}" if mod and mod not in ("__main__", "builtins") else name


def _short(a) -> str:
    a = np.asarray(a)
    with np.printoptions(precision=4, threshold=12, edgeitems=4, suppress=True):
        return np.array2string(a, separator=", ").replace("\n", "")


def _readonly(a: np.ndarray) -> np.ndarray:
    v = a.view()
    v.flags.writeable = False
    return v


class _Context:
    """What the error messages need to name a call: the sampler, the run's seed, the laws."""

    def __init__(self, sampler, name, seed, protocol):
        self.sampler = sampler
        self.name = name or sampler_name(sampler)
        self.seed = seed
        self.protocol = protocol

    def where(self, call: int, **inputs) -> str:
        shown = ", ".join(f"{k}={_short(v)}" if isinstance(v, np.ndarray) else f"{k}={v!r}"
                          for k, v in inputs.items())
        return (f"{self.name} (protocol {self.protocol!r}), call {call} of the run with "
                f"seed={self.seed!r}, inputs {shown}")

    def raised(self, exc: BaseException, call: int, **inputs):
        return ValueError(f"sampler: {self.where(call, **inputs)} raised "
                          f"{type(exc).__name__}: {exc}")

    def call_each(self, n: int, call, inputs_of):
        """``[call(i) for i in range(n)]`` and its seconds; a call that raises becomes
        :meth:`raised` naming that call and ``inputs_of(i)``."""
        outs = [None] * n
        i = 0
        t0 = time.perf_counter()
        try:
            for i in range(n):  # noqa: B007 - i names the failing call
                outs[i] = call(i)
        except Exception as exc:
            raise self.raised(exc, i, **inputs_of(i)) from exc
        return outs, time.perf_counter() - t0

    def bad(self, what: str, call: int, err=ValueError, **inputs):
        return err(f"sampler: {self.where(call, **inputs)} returned {what}")


def inv_cdf(cdf: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Tokens ``F^{-1}(u)`` for a 1-D cumulative sum ``cdf`` (zero-probability tokens are
    never returned)."""
    tot = cdf[-1]
    idx = np.searchsorted(cdf, u * tot, side="right")
    last = int(np.flatnonzero(np.diff(np.concatenate([[0.0], cdf])) > 0)[-1])
    return np.minimum(idx, last)


def draws_of(q: np.ndarray, size, rng: np.random.Generator) -> np.ndarray:
    """``size`` i.i.d. draws from the 1-D law ``q`` (int64)."""
    return inv_cdf(np.cumsum(q), rng.random(size)).astype(np.int64)


def as_law(x, name: str) -> np.ndarray:
    return as_prob(x, name, ndim=(1,))


def as_n(n, name: str = "n", minimum: int = 100) -> int:
    return as_int(n, name, min_value=minimum, max_value=10**10)


def streams(seed):
    """Two independent generators: the harness's (drafts, keys) and the sampler's."""
    ss = as_seedseq(seed)
    a, b = ss.spawn(2)
    return np.random.default_rng(a), np.random.default_rng(b)


@dataclass(frozen=True, eq=False)
class Draws:
    """The outputs of ``n`` sampler calls on one ``(p, q)`` (from :func:`draw`).

    Attributes
    ----------
    protocol : str
        The protocol the sampler was called through.
    sampler : str
        The sampler's name.
    p, q : ndarray
        The target and the draft law(s) (``q`` has shape ``(B, V)`` for one law per draft).
    B : int
        Drafts per call (1 for the single-draft protocols).
    tokens : ndarray of int64, shape (n,)
        The emitted tokens.
    accepted : ndarray of bool, shape (n,)
        Whether a draft was accepted.
    accepted_index : ndarray of int64, shape (n,)
        The accepted draft's index, -1 on rejection (0 for an accepted single draft).
    seed : object
        The run's seed.
    seconds_sampler, seconds_total : float
        Time inside the sampler calls, and of the whole run (the harness's own time is the
        difference).
    """

    protocol: str
    sampler: str
    p: np.ndarray
    q: np.ndarray
    B: int
    tokens: np.ndarray
    accepted: np.ndarray
    accepted_index: np.ndarray
    seed: object
    seconds_sampler: float
    seconds_total: float

    @property
    def n(self) -> int:
        return int(self.tokens.shape[0])


def _int_tokens(vals, ctx: _Context, V: int, inputs_of, what="token"):
    """Validate a 1-D array of tokens (from a list of per-call outputs or a concatenation).

    ``inputs_of(i)`` gives the inputs of the call that produced element ``i``.
    """
    try:
        arr = np.asarray(vals)
    except (ValueError, TypeError):
        arr = np.asarray(vals, dtype=object)
    if arr.dtype == object or arr.dtype.kind not in "iub" or arr.dtype == np.bool_:
        # find the first element that is not an integer
        for i, v in enumerate(vals):
            if isinstance(v, bool | np.bool_) or not isinstance(v, int | np.integer):
                if hasattr(v, "item") and getattr(v, "ndim", 1) == 0:
                    try:
                        iv = v.item()
                    except (TypeError, ValueError):
                        iv = None
                    if isinstance(iv, int) and not isinstance(iv, bool):
                        continue
                kind = "NaN" if isinstance(v, float) and v != v else f"{type(v).__name__} {v!r}"
                raise ctx.bad(f"a {what} that is not an integer ({kind[:80]})", i,
                              err=TypeError, **inputs_of(i))
        arr = np.array([int(v.item()) if hasattr(v, "item") else int(v) for v in vals],
                       dtype=np.int64)
    arr = arr.astype(np.int64, copy=False)
    bad = np.flatnonzero((arr < 0) | (arr >= V))
    if bad.size:
        i = int(bad[0])
        raise ctx.bad(f"{what} {int(arr[i])} outside the vocabulary 0..{V - 1}", i,
                      **inputs_of(i))
    return arr


def _bool_flags(vals, ctx: _Context, inputs_of):
    arr = np.asarray(vals)
    if arr.dtype == np.bool_:
        return arr
    if arr.dtype.kind in "iu" and np.all((arr == 0) | (arr == 1)):
        return arr.astype(bool)
    for i, v in enumerate(vals):
        if not (isinstance(v, bool | np.bool_) or (isinstance(v, int | np.integer)
                                                     and v in (0, 1))):
            if hasattr(v, "item"):
                try:
                    if v.item() in (0, 1, True, False):
                        continue
                except (TypeError, ValueError):
                    pass
            raise ctx.bad(f"an accepted flag that is not a bool ({type(v).__name__} "
                          f"{v!r:.60})", i, err=TypeError, **inputs_of(i))
    return np.array([bool(v.item() if hasattr(v, "item") else v) for v in vals])


def _pairs(outs, ctx: _Context, inputs_of, what="(token, accepted)"):
    """Split per-call outputs into two lists; a non-pair is a TypeError naming the call."""
    try:
        a, b = zip(*outs, strict=True)
        if len(a) != len(outs):
            raise ValueError
        return list(a), list(b)
    except (TypeError, ValueError):
        for i, o in enumerate(outs):
            try:
                if len(o) != 2:
                    raise TypeError
            except TypeError:
                raise ctx.bad(f"{type(o).__name__} {o!r:.80} instead of a pair {what}", i,
                              err=TypeError, **inputs_of(i)) from None
        raise  # pragma: no cover


def draw(sampler, p, q, *, protocol: str = "step", n: int, seed=0, B: int | None = None,
         name: str | None = None, chunk: int | None = None) -> Draws:
    """Call ``sampler`` ``n`` times (or on ``n`` rows) through ``protocol``; validated outputs.

    The harness draws the drafts from ``q`` with its own generator; the sampler gets another
    one (both spawned from ``seed``).  See :mod:`specbound.testing` for the protocols.
    """
    if protocol not in ("step", "batch", "multi", "multi_batch"):
        raise ValueError(f"protocol: draw() takes 'step', 'batch', 'multi' or 'multi_batch' "
                         f"(check_block and check_drafter_invariance run the others), got "
                         f"{protocol!r}")
    if not callable(sampler):
        raise TypeError(f"sampler: must be a callable, got {type(sampler).__name__}")
    p = as_law(p, "p")
    multi = protocol.startswith("multi")
    if multi:
        q = as_prob(q, "q", ndim=(1, 2))
        if q.ndim == 2:
            if B is not None and as_int(B, "B", min_value=1) != q.shape[0]:
                raise ValueError(f"B: q has one law per draft ({q.shape[0]} rows), got B={B}")
            B = q.shape[0]
        elif B is None:
            raise ValueError("B: the multi-draft protocols need B (or one q per draft)")
        B = as_int(B, "B", min_value=1, max_value=4096)
    else:
        q = as_law(q, "q")
        if B not in (None, 1):
            raise ValueError(f"B: protocol {protocol!r} is single-draft, got B={B}")
        B = 1
    V = p.shape[0]
    if q.shape[-1] != V:
        raise ValueError(f"q: vocabulary size {q.shape[-1]} differs from p's {V}")
    n = as_n(n)
    ctx = _Context(sampler, name, seed, protocol)
    rng_h, rng_s = streams(seed)
    pr, qr = _readonly(p), _readonly(q)
    t_all = time.perf_counter()
    if protocol == "step":
        xs = draws_of(q, n, rng_h)
        xl = xs.tolist()

        def inputs_of(i):
            return dict(p=p, q=q, x=xl[i])
        outs, t_s = ctx.call_each(n, lambda i: sampler(pr, qr, xl[i], rng_s), inputs_of)
        toks, accs = _pairs(outs, ctx, inputs_of)
        tokens = _int_tokens(toks, ctx, V, inputs_of)
        acc = _bool_flags(accs, ctx, inputs_of)
        idx = np.where(acc, 0, -1)
        _consistent_single(tokens, acc, xs, ctx, inputs_of)
    elif protocol == "multi":
        xs = _multi_drafts(q, B, n, rng_h)

        def inputs_of(i):
            return dict(p=p, q=q, xs=xs[i])
        outs, t_s = ctx.call_each(n, lambda i: sampler(pr, qr, _readonly(xs[i]), rng_s),
                                  inputs_of)
        toks, ids = _pairs(outs, ctx, inputs_of, "(token, accepted_index)")
        tokens = _int_tokens(toks, ctx, V, inputs_of)
        idx = _indices(ids, ctx, B, inputs_of)
        acc = idx >= 0
        _consistent_multi(tokens, idx, xs, ctx, inputs_of)
    else:  # batch, multi_batch
        rows = as_int(chunk, "chunk", min_value=1) if chunk is not None else max(
            1, min(n, _BATCH_ELEMENTS // V))
        tokens = np.empty(n, np.int64)
        idx = np.empty(n, np.int64)
        t_s = 0.0
        start = 0
        call = 0
        while start < n:
            m = min(rows, n - start)
            P = np.broadcast_to(p, (m, V))
            if protocol == "batch":
                X = draws_of(q, m, rng_h)
                Q = np.broadcast_to(q, (m, V))
            else:
                X = _multi_drafts(q, B, m, rng_h)
                Q = np.broadcast_to(q, (m, *q.shape))
            Xr = _readonly(X)
            t0 = time.perf_counter()
            try:
                out = sampler(P, Q, Xr, rng_s)
            except Exception as exc:
                raise ctx.raised(exc, call, p=p, q=q, rows=m, first_drafts=X[:4]) from exc
            t_s += time.perf_counter() - t0
            def inputs_of(i, X=X, call=call):
                return dict(p=p, q=q, row=i, drafts=X[i])
            tk, ac = _batch_out(out, m, ctx, call, inputs_of)
            tk = _int_tokens(tk, _RowCtx(ctx, call), V, inputs_of)
            if protocol == "batch":
                a = _bool_flags(ac, _RowCtx(ctx, call), inputs_of)
                _consistent_single(tk, a, X, _RowCtx(ctx, call), inputs_of)
                idx[start:start + m] = np.where(a, 0, -1)
            else:
                ix = _indices(ac, _RowCtx(ctx, call), B, inputs_of)
                _consistent_multi(tk, ix, X, _RowCtx(ctx, call), inputs_of)
                idx[start:start + m] = ix
            tokens[start:start + m] = tk
            start += m
            call += 1
        acc = idx >= 0
    return Draws(protocol, ctx.name, p, q, B, tokens, acc, idx, seed, t_s,
                 time.perf_counter() - t_all)


class _RowCtx(_Context):
    """Names row ``i`` of batched call ``call`` instead of a call number."""

    def __init__(self, ctx: _Context, call: int):
        super().__init__(ctx.sampler, ctx.name, ctx.seed, ctx.protocol)
        self.call = call

    def where(self, call: int, **inputs) -> str:
        return super().where(self.call, **inputs)


def _batch_out(out, m, ctx, call, inputs_of):
    try:
        tk, ac = out
    except (TypeError, ValueError):
        raise ctx.bad(f"{type(out).__name__} instead of a pair (tokens, accepted)", call,
                      err=TypeError, **inputs_of(0)) from None
    tk = _to_numpy(tk)
    ac = _to_numpy(ac)
    for what, a in (("tokens", tk), ("accepted", ac)):
        if np.ndim(a) != 1 or np.shape(a)[0] != m:
            raise ctx.bad(f"{what} of shape {np.shape(a)} (expected ({m},): one per row)",
                          call, **inputs_of(0))
    tk = np.asarray(tk)
    if tk.dtype.kind == "f":
        bad = np.flatnonzero(~np.isfinite(tk) | (tk != np.round(tk)))
        if bad.size:
            i = int(bad[0])
            raise ctx.bad(f"a non-integer token {tk[i]!r} in row {i}", call, err=TypeError,
                          **inputs_of(i))
        raise ctx.bad(f"tokens of float dtype {tk.dtype} (token ids must be integers)", call,
                      err=TypeError, **inputs_of(0))
    return list(tk) if tk.dtype == object else tk, ac


def _to_numpy(a):
    """A torch tensor (any device) or array-like as a NumPy array."""
    if hasattr(a, "detach") and hasattr(a, "cpu"):
        return a.detach().cpu().numpy()
    return np.asarray(a) if not isinstance(a, np.ndarray) else a


def _indices(ids, ctx, B, inputs_of):
    arr = _to_numpy(ids) if not isinstance(ids, list) else ids
    try:
        a = np.asarray(arr)
    except (TypeError, ValueError):
        a = np.asarray(arr, dtype=object)
    if a.dtype == np.bool_ or a.dtype.kind not in "iu":
        for i, v in enumerate(list(a)):
            if isinstance(v, bool | np.bool_) or not isinstance(v, int | np.integer):
                raise ctx.bad(f"an accepted_index that is not an integer "
                              f"({type(v).__name__} {v!r:.60})", i, err=TypeError,
                              **inputs_of(i))
        a = np.asarray([int(v) for v in a], dtype=np.int64)
    a = a.astype(np.int64)
    bad = np.flatnonzero((a < -1) | (a >= B))
    if bad.size:
        i = int(bad[0])
        raise ctx.bad(f"accepted_index {int(a[i])} outside -1..{B - 1}", i, **inputs_of(i))
    return a


def _consistent_single(tokens, acc, xs, ctx, inputs_of):
    bad = np.flatnonzero(acc & (tokens != xs))
    if bad.size:
        i = int(bad[0])
        raise ctx.bad(f"accepted=True with token {int(tokens[i])} != the draft "
                      f"{int(xs[i])} (an accepted draft is the emitted token)", i,
                      **inputs_of(i))


def _consistent_multi(tokens, idx, xs, ctx, inputs_of):
    hit = idx >= 0
    rows = np.flatnonzero(hit)
    bad = rows[tokens[rows] != xs[rows, idx[rows]]]
    if bad.size:
        i = int(bad[0])
        raise ctx.bad(f"accepted_index {int(idx[i])} with token {int(tokens[i])} != that "
                      f"draft {int(xs[i, idx[i]])}", i, **inputs_of(i))


def _multi_drafts(q, B, m, rng):
    if q.ndim == 2:
        return np.stack([draws_of(q[b], m, rng) for b in range(B)], axis=1)
    return draws_of(q, (m, B), rng)
