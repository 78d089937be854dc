"""Sequence-level speculative decoders on synthetic language models.

:func:`speculative_decode` runs one of eleven decoders (seed 000 §4-§6, App. A, C, D) on a
target/draft pair of :class:`~specbound.sim.models.SyntheticLM` or
:class:`~specbound.sim.models.MarkovLM` models and returns a frozen :class:`DecodeResult`.

Implementation
--------------
The block loop is Python; every vocabulary-sized step (model evaluation, exponential race,
MPFR top-B, residual draw, recursive rejection) is a Numba kernel
(``_model_kernels``, ``_kernels``).  Keyed context labels are BLAKE2b digests computed
once per context in Python (:func:`specbound.sim.prf.context_label`), which is why the loop
is not one compiled kernel; the Python overhead is a few microseconds per context, small
next to a 50,000-token model evaluation.  Target distributions are computed lazily along
the realised path only, while ``n_target_contexts`` counts every context a batched target
pass would evaluate (so the simulated cost accounting is that of the real algorithm).

Randomness
----------
Keyed clocks (shared with :mod:`specbound.sim.detect`): in context ``c`` with
``label = context_label(key, c, m=context_length)`` the ``j``-th inter-arrival clock of token
``v`` is ``-log(prf_uniform(label, v, j))``.  Unkeyed randomness comes from
``np.random.default_rng(seed)`` and is laid out canonically per block (the same array shape
whatever the drafter does), so that "the same shared randomness R" is well defined for the
drafter-invariance checks of :mod:`specbound.sim.invariance`:

- ``ar``: one uniform per token (inverse CDF);
- ``vsps``, ``mse``, ``mse_pseudo``: ``rng.random((ell + 1, 3))`` per block (draft draw,
  acceptance coin, residual/bonus draw at each block position);
- ``specinfer``: ``rng.random((ell + 1, B, 3))`` per block;
- ``invariant``: ``ell + 1`` 64-bit labels per block; draft ``b`` at block position ``s``
  races the clocks ``-log prf_uniform(label_s, v, b)``;
- ``pfr_nowm`` and masked repeats: a run label ``R`` (the first draw of the generator); the
  clocks of absolute position ``t`` use ``label = mix(R + G (t + 1))``, fresh for every
  position and independent of the key, so the unkeyed PFR chain is again drafter invariant
  given the seed.

Decoders
--------
``ar``
    Autoregressive sampling from the target (inverse CDF).
``basic_uwm``
    Keyed exponential race / Gumbel-max watermark without speculation:
    ``w_t = argmin_v E_{v,1}(c_t) / p_v(c_t)``.
``vsps``
    Vanilla speculative sampling (seed 000 Alg. 1 blockwise): ``L`` drafts ``x_s ~ q``, accept
    while ``U_s <= p(x_s)/q(x_s)``, residual ``(p - q)_+`` at the first rejection, bonus from
    the target when all are accepted.
``pfr`` / ``pfr_nowm``
    Single-draft PFR (Alg. 3/9): draft ``argmin_v E_v/q_v(c_s)``, target
    ``argmin_v E_v/p_v(c_s)`` on the same clocks; the emitted token is always the target-side
    winner (correction and bonus included: never fresh noise).  ``pfr_nowm`` uses the
    unkeyed position clocks described above.
``mpfr``
    Multi-draft MPFR with the context tree and multiplicities (Alg. 4/10, batched form of
    Alg. 7): context ``c`` with multiplicity ``nu(c)`` proposes the labels of the ``nu(c)``
    smallest scores ``G_{v,j}/q_v(c)`` (Alg. 6); equal tokens merge into a child whose
    multiplicity is their count; the emitted token is ``argmin_v G_{v,1}/p_v(c)``; the path
    is followed while the emitted token is among the children.  With ``B = 1`` it is ``pfr``.
``invariant``
    List coupling / GLS (Rowan et al. 2025): ``B`` draft sequences, draft ``b`` at position
    ``s`` is ``argmin_v E_{s,b,v}/q_v`` on its own path; the target token at position ``s`` is
    the label of ``argmin_{b in A_s, v} E_{s,b,v}/p_v`` over the active drafts ``A_s`` (those
    whose drafts agree with the emitted prefix); accepted iff some active draft proposed it;
    the active set shrinks to the drafts that proposed it.
``specinfer``
    ``B`` i.i.d. draft sequences; at each position recursive rejection sampling (Miao et al.
    2024) over the active drafts' proposals in draft order; correction from the last residual;
    bonus from the target.
``mws`` / ``mse`` / ``mse_pseudo``
    Hu & Huang (2024) and He et al. (2026) with the DeltaGumbel (exponential-race) reweighting
    ``R_E(P) = delta_{argmin_v E_v/P_v}`` on this package's keyed clocks, so that
    :func:`specbound.sim.detect.detect` applies to every keyed decoder.  Choices, after
    studying ``accuwm/mc_watermark.py`` and ``accuwm/utils.py`` of the authors' code:

    - **mws** ("maintain watermark strength", their ``reweight_in_mc=True``): draft tokens
      from the watermarked draft ``R_E(Q)``; speculative sampling between the *watermarked*
      distributions ``R_E(P)`` and ``R_E(Q)``; residual ``(R_E(P) - R_E(Q))_+``; watermarked
      bonus.  With the DeltaGumbel reweight both are point masses, so a draft is accepted iff
      the two races agree and the residual is the target winner: MWS coincides token for
      token with ``pfr`` (tested).  (With other reweights, e.g. gamma, it would not.)
    - **mse** ("maintain sampling efficiency", ``reweight_in_mc=False``): draft tokens from
      the watermarked draft ``R_E(Q)`` (keyed race on ``q``); acceptance with the
      *unwatermarked* ratio ``U <= p(x)/q(x)`` with a seeded coin (acceptance 1 - TV, as
      vsps); unwatermarked residual ``(p - q)_+``; watermarked bonus (keyed race on ``p``).
      Exact marginally over keys because ``x ~ q`` when the key is random.
    - **mse_pseudo** (He et al. 2026, "pseudorandom r", ``psedo_r=True`` in
      ``real/accuwm/utils.py``): as mse, but the acceptance coin is keyed:
      ``r = prf_uniform(context_label(key2, c_s, m), 0, 0)`` with the second key ``key2`` =
      ``b"mse_pseudo-acceptance:" + key_digest(key)`` (the dual-key design of the reference
      code; independent of the token clocks).

Repeated contexts (``mask_repeats=True``): when the context window (last
``context_length`` tokens) of a position already occurred at an earlier *generated* position
of the sequence (or earlier on the same draft path within the block), the keyed label is
replaced by the unkeyed position label (see Randomness), for drafts and target alike.  The
reported pivot is still the keyed one (what the detector recomputes); the detector scores
each (window, token) pair once.  With ``context_length=None`` (whole prefix) no window
repeats.

Block length: ``ell = min(L, max_new_tokens - generated)``; the bonus token is emitted only
while ``generated < max_new_tokens``, so the last block may be shorter (Alg. 9/10).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from specbound._validation import as_choice, as_int, as_rng
from specbound.sim import _kernels as _K
from specbound.sim.models import MarkovLM, SyntheticLM
from specbound.sim.prf import context_label, key_digest, prf_uniform

__all__ = ["DECODERS", "KEYED_DECODERS", "MULTI_DRAFT_DECODERS", "DecodeResult",
           "speculative_decode"]

DECODERS = ("ar", "basic_uwm", "vsps", "pfr", "pfr_nowm", "mpfr", "invariant", "specinfer",
            "mws", "mse", "mse_pseudo")
#: decoders that need ``key`` (their emitted tokens carry the keyed watermark)
KEYED_DECODERS = frozenset({"basic_uwm", "pfr", "mpfr", "mws", "mse", "mse_pseudo"})
#: decoders that accept ``B > 1``
MULTI_DRAFT_DECODERS = frozenset({"mpfr", "invariant", "specinfer"})
_NO_DRAFT = frozenset({"ar", "basic_uwm"})
_U64 = np.uint64


@dataclass(frozen=True, eq=False)
class DecodeResult:
    """Output of :func:`speculative_decode`.

    Attributes
    ----------
    tokens : ndarray of int64
        Prompt followed by the generated tokens (as transformers' ``generate`` returns them).
    prompt_length : int
        Number of prompt tokens at the start of ``tokens``.
    accepted : ndarray of int64
        Tokens emitted by every block (accepted drafts plus the correction or bonus token), so
        ``accepted.mean()`` is the AATPS; ``ar`` and ``basic_uwm`` give all 1s.
    n_target_evals, n_draft_evals : int
        Target and draft forward passes: one target pass per block (per token for
        ``ar``/``basic_uwm``), one draft pass per draft depth (tree levels are batched).
    n_target_contexts, n_draft_contexts : int
        Next-token distributions the passes compute (a batched tree pass counts every
        context of the tree, depth 0..ell for the target).
    pivots : ndarray of float64
        Per generated position, the keyed pivot ``prf_uniform(context_label(key, c_t, m), w_t,
        0)`` for keyed decoders (the detector's ``U_t``); NaN for unkeyed decoders.
    drafts : tuple of ndarray
        Per block, the realised draft sequences, shape ``(B, ell)`` (tree decoders: the B
        root-to-leaf paths with multiplicity, sorted); empty for ``ar``/``basic_uwm``.
    decoder : str
        Decoder name.
    """

    tokens: np.ndarray
    prompt_length: int
    accepted: np.ndarray
    n_target_evals: int
    n_draft_evals: int
    n_target_contexts: int
    n_draft_contexts: int
    pivots: np.ndarray
    drafts: tuple = field(repr=False)
    decoder: str = ""

    @property
    def generated(self) -> np.ndarray:
        """The generated tokens (``tokens[prompt_length:]``)."""
        return self.tokens[self.prompt_length:]

    @property
    def aatps(self) -> float:
        """Average accepted tokens per step (mean of ``accepted``; NaN if nothing ran)."""
        if self.accepted.size == 0:
            return float("nan")
        return float(self.accepted.mean())


# ------------------------------------------------------------------------- validation


def _check_model(model, name):
    if isinstance(model, SyntheticLM | MarkovLM):
        return model
    if hasattr(model, "vocab_size") and hasattr(model, "next_distribution"):
        return model
    raise ValueError(
        f"{name}: must be a SyntheticLM, a MarkovLM or an object with vocab_size and "
        f"next_distribution, got {type(model).__name__}"
    )


def _probs_fn(model):
    if hasattr(model, "_probs"):
        return model._probs
    return lambda ctx: np.asarray(model.next_distribution(ctx), dtype=np.float64)


def _validate(target, draft, prompt, decoder, L, B, key, max_new_tokens, context_length):
    decoder = as_choice(decoder, "decoder", DECODERS)
    target = _check_model(target, "target")
    if decoder not in _NO_DRAFT or draft is not None:
        draft = _check_model(draft, "draft")
        if draft.vocab_size != target.vocab_size:
            raise ValueError(
                f"draft: vocabulary size {draft.vocab_size} differs from the target's "
                f"{target.vocab_size}"
            )
    L = as_int(L, "L", min_value=1)
    B = as_int(B, "B", min_value=1)
    if B > 1 and decoder not in MULTI_DRAFT_DECODERS:
        raise ValueError(
            f"B: decoder {decoder!r} is single-draft (B must be 1); multi-draft decoders are "
            f"{sorted(MULTI_DRAFT_DECODERS)}"
        )
    if decoder in KEYED_DECODERS and key is None:
        raise ValueError(f"key: decoder {decoder!r} is keyed and needs a key (int, str, bytes)")
    if key is not None:
        key_digest(key)  # raises "key: ..." for an unusable key
    max_new_tokens = as_int(max_new_tokens, "max_new_tokens", min_value=0)
    if context_length is not None:
        context_length = as_int(context_length, "context_length", min_value=0)
    arr = np.asarray(prompt if prompt is not None else [])
    if arr.ndim > 1:
        raise ValueError(f"prompt: must be a 1-D sequence of token ids, got shape {arr.shape}")
    if arr.size and (arr.dtype == np.bool_ or arr.dtype.kind not in "iu"):
        raise ValueError("prompt: must be a sequence of integer token ids")
    arr = arr.astype(np.int64).reshape(-1)
    if arr.size and (arr.min() < 0 or arr.max() >= target.vocab_size):
        raise ValueError(
            f"prompt: token ids must lie in [0, {target.vocab_size}), got range "
            f"[{arr.min()}, {arr.max()}]"
        )
    return target, draft, arr, decoder, L, B, max_new_tokens, context_length


# ------------------------------------------------------------------------- the runner


class _Run:
    """State of one decoding run (tokens, counters, label caches)."""

    def __init__(self, target, draft, prompt, decoder, L, B, key, N, rng, m, mask):
        self.p = _probs_fn(target)
        self.q = _probs_fn(draft) if draft is not None else None
        self.decoder, self.L, self.B, self.N, self.rng, self.m, self.mask = (
            decoder, L, B, N, rng, m, mask)
        self.tokens = [int(t) for t in prompt]
        self.n0 = len(self.tokens)
        self.keyed = decoder in KEYED_DECODERS
        self.digest = key_digest(key) if key is not None else None
        self.acc_digest = (key_digest(b"mse_pseudo-acceptance:" + self.digest)
                           if decoder == "mse_pseudo" else None)
        self.run_label = _U64(rng.integers(0, 2**64, dtype=np.uint64))
        self.accepted: list[int] = []
        self.pivots: list[float] = []
        self.drafts: list[np.ndarray] = []
        self.seen: set = set()
        self.n_target_evals = self.n_draft_evals = 0
        self.n_target_contexts = self.n_draft_contexts = 0

    # -- labels ---------------------------------------------------------------------
    @property
    def generated(self) -> int:
        return len(self.tokens) - self.n0

    def window(self, ctx):
        if self.m is None:
            return None
        return tuple(ctx[len(ctx) - self.m:]) if self.m > 0 else ()

    def position_label(self, t):
        """Unkeyed clocks of absolute position ``t`` (pfr_nowm, masked repeats)."""
        return _U64(_K.trial_label(self.run_label, t))

    def keyed_label(self, ctx):
        return context_label(self.digest, np.asarray(ctx, dtype=np.int64), self.m)

    def clock_label(self, ctx, path_windows=()):
        """Label whose clocks drive draft and target in context ``ctx``."""
        if self.decoder == "pfr_nowm":
            return self.position_label(len(ctx))
        if self.mask and self.m is not None:
            w = self.window(ctx)
            if w in self.seen or w in path_windows:
                return self.position_label(len(ctx))
        return self.keyed_label(ctx)

    # -- emission -------------------------------------------------------------------
    def emit(self, y, ctx):
        y = int(y)
        if self.keyed:
            self.pivots.append(float(prf_uniform(self.keyed_label(ctx), y, 0)))
        else:
            self.pivots.append(float("nan"))
        if self.mask and self.m is not None:
            self.seen.add(self.window(ctx))
        self.tokens.append(y)

    def ctx_array(self, extra=()):
        return np.array(self.tokens + list(extra), dtype=np.int64)

    # -- decoders -------------------------------------------------------------------
    def step_ar(self):
        ctx = self.ctx_array()
        p = self.p(ctx)
        self.n_target_evals += 1
        self.n_target_contexts += 1
        if self.decoder == "ar":
            y = _K.categorical(p, self.rng.random())
        else:
            y = _K.race_argmin(self.clock_label(self.tokens), p, 0)
        self.emit(y, self.tokens)
        return 1

    def _path_windows(self, h, path):
        if not (self.mask and self.m is not None):
            return ()
        return {self.window(h + list(path[:i])) for i in range(len(path))}

    def block_tree(self, ell):
        """pfr / pfr_nowm / mws (B = 1) and mpfr: Alg. 10 with lazy target evaluation."""
        h = list(self.tokens)
        labels: dict = {}

        def lab(path):
            if path not in labels:
                labels[path] = self.clock_label(h + list(path), self._path_windows(h, path))
            return labels[path]

        mult = {(): self.B}
        children: dict = {}
        level = [()]
        buf = np.empty(self.B, dtype=np.int64)
        for _ in range(ell):
            nxt: dict = {}
            for path in level:
                qv = self.q(np.array(h + list(path), dtype=np.int64))
                self.n_draft_contexts += 1
                k = mult[path]
                _K.mpfr_topk(lab(path), qv, k, buf)
                kids = children.setdefault(path, set())
                for t in buf[:k]:
                    child = path + (int(t),)
                    nxt[child] = nxt.get(child, 0) + 1
                    kids.add(int(t))
            self.n_draft_evals += 1
            mult.update(nxt)
            level = list(nxt)
        leaves = sorted(p for p in level for _ in range(mult[p]))
        self.drafts.append(np.array(leaves, dtype=np.int64).reshape(self.B, ell))
        self.n_target_evals += 1
        self.n_target_contexts += len(mult)
        path: tuple = ()
        emitted = 0
        for _ in range(ell):
            ctx = h + list(path)
            y = int(_K.race_argmin(lab(path), self.p(np.array(ctx, dtype=np.int64)), 0))
            self.emit(y, ctx)
            emitted += 1
            if y not in children.get(path, ()):
                return emitted
            path = path + (y,)
        if self.generated < self.N:
            ctx = h + list(path)
            y = int(_K.race_argmin(lab(path), self.p(np.array(ctx, dtype=np.int64)), 0))
            self.emit(y, ctx)
            emitted += 1
        return emitted

    def block_single(self, ell):
        """vsps / mse / mse_pseudo: one draft sequence, Alg. 1 verification."""
        h = list(self.tokens)
        us = self.rng.random((ell + 1, 3))
        xs: list[int] = []
        qs = []
        path_windows: set = set()
        labs = []
        for s in range(ell):
            ctx = h + xs
            qv = self.q(np.array(ctx, dtype=np.int64))
            self.n_draft_contexts += 1
            if self.decoder == "vsps":
                x = int(_K.categorical(qv, us[s, 0]))
                labs.append(None)
            else:
                lab = self.clock_label(ctx, path_windows)
                labs.append(lab)
                x = int(_K.race_argmin(lab, qv, 0))
                if self.mask and self.m is not None:
                    path_windows.add(self.window(ctx))
            xs.append(x)
            qs.append(qv)
        self.n_draft_evals += ell
        self.drafts.append(np.array(xs, dtype=np.int64).reshape(1, ell))
        self.n_target_evals += 1
        self.n_target_contexts += ell + 1
        emitted = 0
        for s in range(ell):
            ctx = h + xs[:s]
            pv = self.p(np.array(ctx, dtype=np.int64))
            x = xs[s]
            if self.decoder == "mse_pseudo":
                coin = prf_uniform(
                    context_label(self.acc_digest, np.array(ctx, dtype=np.int64), self.m), 0, 0)
            else:
                coin = us[s, 1]
            emitted += 1
            if coin * qs[s][x] <= pv[x]:
                self.emit(x, ctx)
                continue
            self.emit(_K.residual_sample(pv, qs[s], us[s, 2]), ctx)
            return emitted
        if self.generated < self.N:
            ctx = h + xs
            pv = self.p(np.array(ctx, dtype=np.int64))
            if self.decoder == "vsps":
                y = _K.categorical(pv, us[ell, 2])
            else:
                y = _K.race_argmin(self.clock_label(ctx, path_windows), pv, 0)
            self.emit(y, ctx)
            emitted += 1
        return emitted

    def _draft_paths(self, ell, draw):
        """B draft sequences, each on its own path; ``draw(s, b, q)`` -> token."""
        h = list(self.tokens)
        cache: dict = {}
        paths = [[] for _ in range(self.B)]
        for s in range(ell):
            for b in range(self.B):
                key = tuple(paths[b])
                if key not in cache:
                    cache[key] = self.q(np.array(h + paths[b], dtype=np.int64))
                    self.n_draft_contexts += 1
                paths[b].append(int(draw(s, b, cache[key])))
        self.n_draft_evals += ell
        self.drafts.append(np.array(paths, dtype=np.int64).reshape(self.B, ell))
        prefixes = {tuple(pb[:i]) for pb in paths for i in range(ell + 1)}
        self.n_target_evals += 1
        self.n_target_contexts += len(prefixes)
        return h, paths, cache

    def block_gls(self, ell):
        """invariant: list coupling (GLS) with the active-draft set."""
        labels = self.rng.integers(0, 2**64, size=ell + 1, dtype=np.uint64)
        h, paths, _ = self._draft_paths(
            ell, lambda s, b, qv: _K.race_argmin(labels[s], qv, b))
        active = np.arange(self.B, dtype=np.int64)
        emitted = 0
        for s in range(ell):
            ctx = h + paths[active[0]][:s]
            y = int(_K.gls_argmin(labels[s], self.p(np.array(ctx, dtype=np.int64)), active))
            self.emit(y, ctx)
            emitted += 1
            active = np.array([b for b in active if paths[b][s] == y], dtype=np.int64)
            if active.size == 0:
                return emitted
        if self.generated < self.N:
            ctx = h + paths[active[0]]
            y = _K.gls_argmin(labels[ell], self.p(np.array(ctx, dtype=np.int64)), active)
            self.emit(y, ctx)
            emitted += 1
        return emitted

    def block_specinfer(self, ell):
        """specinfer: recursive rejection sampling over the active drafts."""
        us = self.rng.random((ell + 1, self.B, 3))
        h, paths, cache = self._draft_paths(
            ell, lambda s, b, qv: _K.categorical(qv, us[s, b, 0]))
        active = np.arange(self.B, dtype=np.int64)
        emitted = 0
        for s in range(ell):
            prefix = paths[active[0]][:s]
            ctx = h + prefix
            pv = self.p(np.array(ctx, dtype=np.int64))
            cands = np.array([paths[b][s] for b in active], dtype=np.int64)
            y, ok = _K.specinfer_verify(pv, cache[tuple(prefix)], cands, us[s, active, 1],
                                         us[s, 0, 2])
            self.emit(y, ctx)
            emitted += 1
            if not ok:
                return emitted
            active = np.array([b for b in active if paths[b][s] == y], dtype=np.int64)
        if self.generated < self.N:
            ctx = h + paths[active[0]]
            y = _K.categorical(self.p(np.array(ctx, dtype=np.int64)), us[ell, 0, 2])
            self.emit(y, ctx)
            emitted += 1
        return emitted

    def run(self, max_blocks=None):
        d = self.decoder
        blocks = 0
        while self.generated < self.N and (max_blocks is None or blocks < max_blocks):
            ell = min(self.L, self.N - self.generated)
            if d in _NO_DRAFT:
                k = self.step_ar()
            elif d in ("pfr", "pfr_nowm", "mpfr", "mws"):
                k = self.block_tree(ell)
            elif d in ("vsps", "mse", "mse_pseudo"):
                k = self.block_single(ell)
            elif d == "invariant":
                k = self.block_gls(ell)
            else:
                k = self.block_specinfer(ell)
            self.accepted.append(k)
            blocks += 1
        return DecodeResult(
            tokens=np.array(self.tokens, dtype=np.int64),
            prompt_length=self.n0,
            accepted=np.array(self.accepted, dtype=np.int64),
            n_target_evals=self.n_target_evals,
            n_draft_evals=self.n_draft_evals,
            n_target_contexts=self.n_target_contexts,
            n_draft_contexts=self.n_draft_contexts,
            pivots=np.array(self.pivots, dtype=np.float64),
            drafts=tuple(self.drafts),
            decoder=d,
        )


def _decode(target, draft, prompt, decoder, *, L=4, B=1, key=None, max_new_tokens=64, seed=0,
            context_length=None, mask_repeats=False, max_blocks=None):
    target, draft, prompt, decoder, L, B, N, m = _validate(
        target, draft, prompt, decoder, L, B, key, max_new_tokens, context_length)
    if not isinstance(mask_repeats, bool | np.bool_):
        raise ValueError(f"mask_repeats: must be a bool, got {mask_repeats!r}")
    mask = bool(mask_repeats)
    rng = as_rng(seed)
    return _Run(target, draft, prompt, decoder, L, B, key, N, rng, m, mask).run(max_blocks)


def speculative_decode(target, draft, prompt, decoder, *, L=4, B=1, key=None,
                       max_new_tokens=64, seed=0, context_length=None,
                       mask_repeats=False) -> DecodeResult:
    """Generate ``max_new_tokens`` tokens with a (speculative) decoder.

    Parameters
    ----------
    target, draft : SyntheticLM or MarkovLM
        Target and draft models with equal vocabulary sizes (``draft`` may be None for
        ``"ar"`` and ``"basic_uwm"``).
    prompt : sequence of int
        Prompt token ids in ``[0, vocab_size)`` (may be empty).
    decoder : str
        One of :data:`DECODERS` (see the module docstring for each algorithm).
    L : int >= 1
        Lookahead (draft length per block).
    B : int >= 1
        Number of drafts; B > 1 only for ``"mpfr"``, ``"invariant"``, ``"specinfer"``.
    key : int, str or bytes
        Secret key; required by the keyed decoders (:data:`KEYED_DECODERS`), ignored by the
        others.
    max_new_tokens : int >= 0
        Number of tokens to generate.
    seed : int, SeedSequence or Generator
        Source of the unkeyed randomness (SPEC 7); results are bit-for-bit reproducible.
    context_length : int or None
        Window ``m`` of the keyed context labels (None: the whole prefix); must match the
        detector's ``context_length``.
    mask_repeats : bool
        Use unkeyed clocks at positions whose context window already occurred (module
        docstring).

    Returns
    -------
    DecodeResult

    Notes
    -----
    Every decoder is exact (lossless): the emitted sequence follows the target's
    autoregressive law, for the keyed decoders when the key is random (each distinct context
    gets independent clocks).  With a fixed key and repeated context windows the keyed
    decoders reuse clocks (the known repeated-context bias of keyed watermarks); use
    ``mask_repeats`` or ``context_length=None`` to avoid it.  ``pfr``, ``mpfr`` and ``mws``
    emit exactly the ``basic_uwm`` sequence for every drafter (seed 000 Prop. C.3).
    """
    return _decode(target, draft, prompt, decoder, L=L, B=B, key=key,
                   max_new_tokens=max_new_tokens, seed=seed, context_length=context_length,
                   mask_repeats=mask_repeats)


# --------------------------------------------------------------- theory: tokens per block


def _race_joint(p, q):
    """``P(X = Y = i)`` of the exponential race: ``1 / sum_j max(p_j/p_i, q_j/q_i)``."""
    out = np.zeros_like(p)
    for i in np.flatnonzero((p > 0) & (q > 0)):
        out[i] = 1.0 / np.sum(np.maximum(p / p[i], q / q[i]))
    return out


def mpfr_multiplicity_law(p, q, nu) -> np.ndarray:
    """Joint law of the MPFR target winner and its multiplicity among ``nu`` drafts.

    Returns ``J`` with ``J[i, k] = P(Y = i, N_i = k)``, ``k = 0..nu``, where
    ``Y = argmin_v G_{v,1}/p_v`` and ``N_i`` is the number of the ``nu`` direct MPFR drafts
    (seed 000 Alg. 6 on ``q``) equal to ``i``.

    Derivation (extends the sketch of MATH.md §2.2): given ``Y = i`` and ``G_{i,1} = g``
    (density ``e^{-g/p_i}``), token ``j``'s draft arrivals form a Poisson process of rate
    ``q_j`` on score times ``t > g p_j / (p_i q_j)``, and ``i``'s ``k``-th draft arrival is at
    ``(g + Gamma_{k-1}) / q_i``.  Hence ``N_i >= k`` iff at most ``nu - k`` other arrivals
    precede it:
    ``P(Y=i, N_i>=k) = int_0^inf e^{-g/p_i} E[F_Pois(nu-k; Lambda(g, Gamma_{k-1}))] dg`` with
    ``Lambda(g, s) = sum_{j != i} (q_j (g + s)/q_i - g p_j/p_i)_+``.  ``k = 1`` has the closed
    form ``p_i (1 - (alpha_i/(1+alpha_i))^nu)``; ``k >= 2`` is a nested adaptive quadrature
    (scipy ``quad``, split at the kinks of ``Lambda``).
    """
    from scipy import integrate, special, stats

    p = np.asarray(p, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    n = p.shape[0]
    ge = np.zeros((n, nu + 2))  # ge[i, k] = P(Y = i, N_i >= k)
    for i in np.flatnonzero(p > 0):
        ge[i, 0] = p[i]
        if q[i] <= 0:
            continue
        others = np.arange(n) != i
        qj, pj = q[others], p[others]
        a = np.sum(np.maximum(qj / q[i] - pj / p[i], 0.0))  # alpha_i / p_i
        alpha = a * p[i]
        ge[i, 1] = p[i] * (1.0 - (alpha / (1.0 + alpha)) ** nu)
        for k in range(2, nu + 1):
            def inner(s, k=k, qj=qj, pj=pj, i=i):
                slope = qj / q[i] - pj / p[i]
                icpt = qj * s / q[i]
                with np.errstate(divide="ignore", invalid="ignore"):
                    kinks = np.where(slope < 0, -icpt / slope, np.nan)
                kinks = np.sort(kinks[np.isfinite(kinks) & (kinks > 0)])

                def f(g):
                    lam = np.sum(np.maximum(icpt + slope * g, 0.0))
                    return np.exp(-g / p[i]) * special.pdtr(nu - k, lam)

                edges = np.concatenate([[0.0], kinks])
                val = 0.0
                for lo, hi in zip(edges[:-1], edges[1:], strict=True):
                    val += integrate.quad(f, lo, hi, epsabs=1e-11, epsrel=1e-8)[0]
                val += integrate.quad(f, edges[-1], np.inf, epsabs=1e-11, epsrel=1e-8)[0]
                return val * stats.gamma.pdf(s, k - 1)

            ge[i, k] = integrate.quad(inner, 0.0, np.inf, epsabs=1e-10, epsrel=1e-7,
                                      limit=200)[0]
    return ge[:, :-1] - ge[:, 1:]


def expected_block_tokens(target, draft, prompt, decoder, *, L=4, B=1) -> float:
    """Exact expected number of tokens emitted by one block (theory for the AATPS).

    Propagates the exact per-context acceptance along the block by recursion over the draft
    paths: ``E_d(c) = 1 + sum_x P(accept x | c) E_{d-1}(c x)`` with ``E_0 = 1`` (bonus), where
    ``P(accept x)`` is ``min(p_x, q_x)`` (``vsps``, ``mse``, ``mse_pseudo``: Alg. 1, total
    1 - TV), ``1 / sum_j max(p_j/p_x, q_j/q_x)`` (``pfr``, ``pfr_nowm``, ``mws``: exponential
    race) or, for ``mpfr``, the joint law of the winner and its multiplicity
    (:func:`mpfr_multiplicity_law`), the child inheriting that multiplicity.

    Assumes independent clocks in distinct contexts (a random key and distinct context labels,
    e.g. ``context_length=None``) and a full block (``max_new_tokens >= L + 1``).  Enumerates
    up to ``n^L`` paths (memoised by state for a :class:`MarkovLM`), so it is meant for small
    vocabularies.
    """
    dec = as_choice(decoder, "decoder",
                    ("vsps", "mse", "mse_pseudo", "pfr", "pfr_nowm", "mws", "mpfr"))
    target, draft, prompt, dec, L, B, _, _ = _validate(
        target, draft, prompt, dec, L, B, 0 if dec in KEYED_DECODERS else None, L + 1, None)
    n = target.vocab_size
    markov = isinstance(target, MarkovLM) and isinstance(draft, MarkovLM)
    if not markov and float(n) ** L > 1e6:
        raise ValueError(f"L: enumerating {n}^{L} draft paths is too many (limit 1e6)")
    pf, qf = _probs_fn(target), _probs_fn(draft)
    h = [int(t) for t in prompt]
    memo: dict = {}
    laws: dict = {}

    def law(ctx, nu):
        state = (ctx[-1] if ctx else -1) if markov else tuple(ctx)
        if (state, nu) not in laws:
            c = np.array(ctx, dtype=np.int64)
            p, q = pf(c), qf(c)
            if dec in ("vsps", "mse", "mse_pseudo"):
                laws[(state, nu)] = np.minimum(p, q)[:, None]
            elif dec in ("pfr", "pfr_nowm", "mws"):
                laws[(state, nu)] = _race_joint(p, q)[:, None]
            else:
                laws[(state, nu)] = mpfr_multiplicity_law(p, q, nu)[:, 1:]
        return laws[(state, nu)]

    def E(ctx, d, nu):
        if d == 0:
            return 1.0
        state = ((ctx[-1] if ctx else -1) if markov else tuple(ctx), d, nu)
        if state not in memo:
            J = law(ctx, nu)
            tot = 1.0
            for x in range(n):
                for k in range(J.shape[1]):
                    if J[x, k] > 0:
                        tot += J[x, k] * E(ctx + [x], d - 1, k + 1)
            memo[state] = tot
        return memo[state]

    return E(h, L, B)
