r"""Every decoder of the simulator on a real model pair, with key-value caches.

:func:`generate` runs a decoder of :data:`specbound.sim.DECODERS` on a
:class:`~specbound.llm.ModelPair` and returns a :class:`GenerationResult`, a
:class:`~specbound.sim.DecodeResult` (same fields, same meanings) with the generated text
and wall-clock timings added.

The sampling rules are literally the simulator's: :func:`generate` calls
:func:`specbound.sim.speculative_decode` with a :class:`PairBackend`, the torch
implementation of the simulator's backend protocol (``reset`` / ``draft_step`` / ``verify``
/ ``commit``; :mod:`specbound.sim.decode`).  The same key, prompt and processed per-step
distributions therefore give the same tokens in the simulator and here; every decoder
option of ``speculative_decode`` (e.g. ``repeats``) is passed through.

The backend
-----------
- **Target**: one forward pass per block.  Its input is the committed tokens the cache does
  not hold yet (the previous block's correction or bonus token) followed by the block's
  draft paths: the ``B`` paths of a multi-draft decoder (the maximal paths among the
  contexts to verify: the leaves of the MPFR tree, the distinct draft sequences of
  ``invariant`` / ``specinfer``) are right-padded into one batch over a cache repeated ``B``
  times, so all paths are verified in ONE batched forward (right padding is invisible to a
  causal model at the positions read).  The row whose path shares the longest prefix with
  the emitted tokens is kept and cropped to the accepted prefix in ``commit``
  (transformers' assisted generation crops its ``DynamicCache`` the same way).
  ``batch_verify=False`` verifies the paths one forward each (a check of the batched form).
- **Draft**: one forward pass per draft depth over the distinct paths of that depth (one
  token per path after depth 0), with the cache rows selected from their parents.
- **Distributions**: the pair's processed float64 distributions
  (:meth:`~specbound.llm.ModelPair.target_logprobs`), converted to NumPy for the
  simulator's Numba kernels.

- **Shared forwards** (``share_forwards=True``): when the draft is the target itself at
  another temperature (a ``temperature:T`` draft: a view of the target whose head divides
  the logits by ``T``), the draft's forward at a context IS the target's forward there, so
  one forward gives both processed laws: the target's (the pair's processing of the raw
  logits) and the draft's (the same raw logits in float64 divided by ``T``, as
  :class:`~specbound.llm.drafts.TemperatureHead` does, then processed: bit for bit what the
  draft's own forward returns).  The draft step at depth 0 forwards the pending committed
  tokens, each later depth one token per path, and each such forward stores the target's
  law at its nodes too; ``verify`` then forwards only the nodes no draft step reached (one
  token per leaf path; the root in a block without draft steps, e.g. ``ar``) and reads
  every other node's law from the block.  One KV cache serves both (``commit`` keeps the
  accepted path's row, cropped, as for the draft cache), the prompt's prefill is made
  once, and a block costs ``L + 1`` single-token forwards per path instead of ``L``
  draft forwards plus an ``(L + 1)``-token target forward.  Verification is always this
  per-depth form (``tree`` and ``batch_verify`` do not apply).  The tokens differ from
  the unshared run only through float32 rounding of the target's logits (single-token
  forwards instead of one multi-token forward): on models without such rounding they are
  the same bit for bit (tested).  Counting: a shared forward counts once, as a target
  forward (``n_target_forwards``; its time, both laws' processing included, in
  ``target_seconds``); ``n_draft_forwards`` and ``draft_seconds`` stay 0.

- **Prefill**: a run starts with the target's forward over the prompt without its last
  token and the draft's over the whole prompt.  A :class:`PrefixCache` passed as
  ``prefix_cache`` keeps those forwards' KV caches and distributions, so that further runs
  of the same prompt (other decoders, seeds, drafts) start from copies of them instead of
  repeating the forwards; the tokens are the same bit for bit.

One driver: :func:`generate` and :func:`generate_lossy` are the one-prompt case of the batch
path (:func:`decode_requests`, which :func:`~specbound.llm.generate_batch` runs over many
prompts): the backend posts each forward to the scheduler of
:mod:`specbound.llm._scheduler`, which, for one prompt, runs it at once in the caller's
thread as the pair's own forward (:meth:`~specbound.llm.ModelPair.forward_logprobs`).

Timings: ``target_seconds`` / ``draft_seconds`` are wall-clock time inside the forwards the
run took part in (the model's forward and the float64 logits processing, as timed by the
scheduler; the prompt's prefill included, unless a :class:`PrefixCache` supplied it; in a
batch, each forward's time divided by its number of rows); ``total_seconds`` is the time
from the start of the run until its last block (tokenization, loading and building the
backend excluded); everything else (the decision logic, the conversion to NumPy, cache
selection) is ``total_seconds - forward_seconds``.
"""

from __future__ import annotations

import functools
import numbers
import time
from collections.abc import Sequence
from dataclasses import dataclass, fields

import numpy as np

from specbound._validation import (
    INT64_MAX,
    as_bool,
    as_choice,
    as_int,
    asarray_named,
)
from specbound.llm._deps import require_llm_extra
from specbound.llm._scheduler import ForwardRequest, Row, Scheduler
from specbound.llm.models import NextTokenLogprobs
from specbound.sim.decode import (
    DECODERS,
    MAX_NEW_TOKENS,
    DecodeResult,
    speculative_decode,
    uses_per_draft_laws,
)
from specbound.sim.lossy_seq import lossy_decode as _sim_lossy_decode

torch = require_llm_extra()

__all__ = ["DEFAULT_WINDOW", "GenerationResult", "PairBackend", "PrefixCache", "generate",
           "generate_lossy"]

#: default watermark context window of :func:`generate` (the last 4 tokens): a finite window
#: lets :func:`specbound.llm.detect` score text without its prompt
DEFAULT_WINDOW = 4


@dataclass(frozen=True, eq=False)
class GenerationResult(DecodeResult):
    """Output of :func:`generate`: a :class:`~specbound.sim.DecodeResult` plus text and time.

    Every field of :class:`~specbound.sim.DecodeResult` has its meaning there (``tokens`` is
    the prompt followed by the generated tokens, ``emitted_per_block``, ``nu``, ...).

    Attributes
    ----------
    text : str
        The generated text (special tokens skipped; cut at the first end-of-sequence token).
    prompt_text : str or None
        The prompt as given (None for a prompt of token ids).
    stopped_at_eos : bool
        Whether the run ended after a block that emitted an end-of-sequence token.
    target_seconds, draft_seconds : float
        Wall-clock time inside the target's and the draft's forward calls (module docstring).
    total_seconds : float
        Wall-clock time of the whole decoding (prompt prefill included, tokenization and
        loading excluded).
    per_draft : bool
        Whether the ``B > 1`` drafts had laws of their own (an ``ngram`` draft: draft ``b``
        the point mass on the ``b``-th distinct continuation; :func:`specbound.sim.decode.
        uses_per_draft_laws`): a decision's exact acceptance is then ``p`` of the tokens the
        drafts propose at its context (:func:`specbound.llm.decision_acceptance`).
    """

    text: str = ""
    prompt_text: str | None = None
    stopped_at_eos: bool = False
    target_seconds: float = 0.0
    draft_seconds: float = 0.0
    total_seconds: float = 0.0
    per_draft: bool = False

    @property
    def forward_seconds(self) -> float:
        """Time inside model forwards (target plus draft)."""
        return self.target_seconds + self.draft_seconds

    @property
    def outside_seconds(self) -> float:
        """Time outside model forwards (decision logic, bookkeeping)."""
        return max(self.total_seconds - self.forward_seconds, 0.0)

    @property
    def n_generated(self) -> int:
        """Number of generated tokens."""
        return int(self.tokens.size - self.prompt_length)

    @property
    def tokens_per_second(self) -> float:
        """Generated tokens per second of ``total_seconds`` (NaN when nothing was timed)."""
        if self.total_seconds <= 0:
            return float("nan")
        return self.n_generated / self.total_seconds

    @property
    def target_forwards_per_token(self) -> float:
        """Target forward passes per generated token (NaN when nothing was generated)."""
        n = self.n_generated
        return self.n_target_evals / n if n else float("nan")


# ----------------------------------------------------------------------------- caches


def _crop_to(cache, length: int) -> None:
    """Keep the first ``length`` positions of a cache (transformers' ``crop`` removes)."""
    extra = int(cache.get_seq_length()) - int(length)
    if extra > 0:
        cache.crop(-extra)


def _common_prefix(a, b) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _leaves(paths) -> list[tuple]:
    """The maximal paths (not a proper prefix of another), in first-seen order."""
    inner = set()
    uniq = list(dict.fromkeys(tuple(p) for p in paths))
    for p in uniq:
        for i in range(len(p)):
            inner.add(p[:i])
    return [p for p in uniq if p not in inner]


def _tensor_bytes(obj, depth: int = 0) -> int:
    """Bytes of the torch tensors held by ``obj`` (a transformers cache), a few levels deep."""
    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if depth > 3:
        return 0
    if isinstance(obj, list | tuple):
        return sum(_tensor_bytes(x, depth + 1) for x in obj)
    if isinstance(obj, dict):
        return sum(_tensor_bytes(x, depth + 1) for x in obj.values())
    attrs = getattr(obj, "__dict__", None)
    return sum(_tensor_bytes(x, depth + 1) for x in attrs.values()) if attrs else 0


class PrefixCache:
    """Prompt prefills kept for later runs of the same prompt (least recently used first out).

    Every run of :class:`PairBackend` starts with two prefill forwards: the target over the
    prompt without its last token, the draft over the whole prompt.  Studies decode each
    prompt many times (decoders, lookaheads, seeds, drafts), so they repeat these forwards;
    for a prompt of a few hundred tokens each costs as much as ten single-token forwards.
    Pass one ``PrefixCache`` to :func:`generate` / :func:`generate_lossy` (``prefix_cache=``)
    for all those runs: the first run of a (model, processing, tokens) triple makes the
    forward and stores a copy of its KV cache and its processed distribution; later runs
    start from copies of them.  The same forward on the same input gives the same values, so
    the tokens, acceptance counts and distributions are the same bit for bit as without the
    cache (tested); only the timings lose the prefill.

    Parameters
    ----------
    max_bytes : int, default 512 MiB
        Bound on the bytes of the stored KV caches (SmolLM2-135M: about 46 KB per prompt
        token); the least recently used entries are dropped first.  An entry larger than the
        bound is not stored.

    Attributes
    ----------
    hits, misses : int
        Prefills supplied from the cache, and prefills computed.
    nbytes : int
        Bytes of the KV caches held now.
    """

    def __init__(self, max_bytes: int = 512 * 2**20):
        self.max_bytes = as_int(max_bytes, "max_bytes", min_value=0)
        # key -> (model, kv cache, logprobs, bytes), in use order; the entry holds the model,
        # so its id in the key cannot be reused by another object while the entry exists
        self._entries: dict = {}
        self.hits = 0
        self.misses = 0
        self.nbytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        """Drop every entry (the hit and miss counts are kept)."""
        self._entries.clear()
        self.nbytes = 0

    @staticmethod
    def _key(model, processing, tokens) -> tuple:
        from specbound.llm.models import LogitsProcessing

        if not isinstance(model, torch.nn.Module):
            raise ValueError(f"model: must be a torch module (the pair's target or draft), "
                             f"got {type(model).__name__}")
        if not isinstance(processing, LogitsProcessing):
            raise ValueError(f"processing: must be a LogitsProcessing, got "
                             f"{type(processing).__name__}")
        tokens = _token_ids(tokens, "tokens", INT64_MAX)
        return (id(model), processing, tuple(int(t) for t in tokens))

    def get(self, model, processing, tokens):
        """A fresh copy ``(kv_cache, logprobs)`` of a stored prefill, or None."""
        import copy

        key = self._key(model, processing, tokens)
        entry = self._entries.pop(key, None)
        if entry is None:
            self.misses += 1
            return None
        self._entries[key] = entry  # most recently used last
        self.hits += 1
        return copy.deepcopy(entry[1]), entry[2]

    def put(self, model, processing, tokens, kv_cache, logprobs) -> None:
        """Store a copy of a prefill's KV cache and its processed log-probabilities."""
        import copy

        key = self._key(model, processing, tokens)
        if not isinstance(logprobs, torch.Tensor):
            raise ValueError(f"logprobs: must be a tensor, got {type(logprobs).__name__}")
        if kv_cache is not None and not callable(getattr(kv_cache, "get_seq_length", None)):
            raise ValueError(f"kv_cache: must be a transformers cache or None, got "
                             f"{type(kv_cache).__name__}")
        size = _tensor_bytes(kv_cache) + _tensor_bytes(logprobs)
        old = self._entries.pop(key, None)
        if old is not None:
            self.nbytes -= old[3]
        if size > self.max_bytes:
            return
        while self._entries and self.nbytes + size > self.max_bytes:
            _, dropped = self._pop_oldest()
            self.nbytes -= dropped[3]
        self._entries[key] = (model, copy.deepcopy(kv_cache), logprobs.clone(), size)
        self.nbytes += size

    def _pop_oldest(self):
        key = next(iter(self._entries))
        return key, self._entries.pop(key)


def _token_ids(seq, name: str, vocab_size: int):
    """``seq`` if it is a 1-D sequence of token ids in ``[0, vocab_size)`` (ValueError naming
    ``name`` otherwise)."""
    if hasattr(seq, "detach"):
        seq = seq.detach().cpu().numpy()
    if isinstance(seq, str | bytes) or not isinstance(seq, Sequence | np.ndarray | range) or (
            isinstance(seq, np.ndarray) and seq.ndim != 1):
        raise ValueError(f"{name}: must be a 1-D sequence of token ids, got "
                         f"{type(seq).__name__}")
    for t in seq:
        if isinstance(t, bool | np.bool_) or not isinstance(t, numbers.Integral) or not (
                0 <= t < vocab_size):
            raise ValueError(f"{name}: token ids must be integers in [0, {vocab_size}), got "
                             f"{t!r}")
    return seq


class PairBackend:
    """The simulator's backend protocol on a :class:`~specbound.llm.ModelPair`, with KV caches.

    See the module docstring for the forward passes it makes.  Implements ``reset``,
    ``draft_step``, ``verify``, ``commit`` (:class:`specbound.sim.DecodeBackend`) and
    ``finished`` (set after an end-of-sequence token when ``stop_tokens`` are given).

    Parameters
    ----------
    pair : ModelPair
    batch_verify : bool, default True
        Verify all draft paths of a block in one batched target forward (False: one forward
        per path, each from a copy of the cache).
    tree : bool, default False
        Verify the block as a token tree instead: one forward over the unique nodes of the
        draft paths with a 4-D attention mask and per-node position ids
        (:mod:`specbound.llm.tree`); the tree's nodes are cropped from the cache after the
        block and the accepted tokens are fed again with the next block's forward.
    log : object with ``record(prompt_id, context_tokens, p, qs)``, optional
        Called at every verified context (every path of every block): ``context_tokens`` the
        full context (int64 array), ``p`` the target's processed next-token distribution
        (1-D float64), ``qs`` the draft's distribution at that context as a one-element list
        when the draft evaluated it in this block, else an empty list.
    prompt_id : int, default 0
        Passed to ``log.record``.
    stop_tokens : collection of int, optional
        Token ids that end the run (after the block that emitted one).
    progress : tqdm-like, optional
        ``update(n)`` is called with the number of tokens of every block.
    prefix_cache : PrefixCache, optional
        Where the prompt's two prefill forwards are looked up and stored (see
        :class:`PrefixCache`; the tokens do not change).  A prefill found there still counts
        in ``n_target_forwards`` / ``n_draft_forwards`` but adds nothing to the timings.
    share_forwards : bool, default False
        For a draft that is the target itself at another temperature (``temperature:T``,
        ``T = 1`` included; a ``ValueError`` naming ``share_forwards`` otherwise): one
        forward serves both models (module docstring, "Shared forwards").  ``tree`` and
        ``batch_verify`` do not apply then.
    """

    def __init__(self, pair, *, batch_verify=True, tree=False, log=None, prompt_id=0,
                 stop_tokens=(), progress=None, prefix_cache=None, share_forwards=False):
        _check_pair_and_log(pair, log)
        self.pair = pair
        self.batch_verify = as_bool(batch_verify, "batch_verify")
        self.tree = as_bool(tree, "tree")
        self.share_forwards = as_bool(share_forwards, "share_forwards")
        if self.share_forwards:
            check_shared(pair)
        self.log = log
        self.prompt_id = as_int(prompt_id, "prompt_id")
        self.stop_tokens = frozenset(int(t) for t in _token_ids(stop_tokens, "stop_tokens",
                                                                 pair.vocab_size))
        if progress is not None and not callable(getattr(progress, "update", None)):
            raise ValueError(f"progress: must have a method update(n) (a tqdm bar) or be "
                             f"None, got {type(progress).__name__}")
        self.progress = progress
        if prefix_cache is not None and not isinstance(prefix_cache, PrefixCache):
            raise ValueError(f"prefix_cache: must be a PrefixCache or None, got "
                             f"{type(prefix_cache).__name__}")
        self.prefix_cache = prefix_cache
        spec = getattr(pair, "draft_spec", None)
        #: the prompt-lookup drafter of an ``ngram`` draft (no draft model; None otherwise)
        self.ngram = None
        if getattr(spec, "kind", None) == "ngram":
            from specbound.llm.ngram import NgramDrafter

            self.ngram = NgramDrafter(spec.value, spec.proposals, pair.vocab_size,
                                      spec.verify_cost, getattr(spec, "min_n", None))
        self.target_seconds = 0.0
        self.draft_seconds = 0.0
        self.n_target_forwards = 0
        self.n_draft_forwards = 0
        self._start([])

    # ------------------------------------------------------------------ forwards
    def _target(self, ids, cache, k):
        t0 = time.perf_counter()
        out = self.pair.target_logprobs(ids, cache=cache, use_cache=True, num_positions=k)
        self.target_seconds += time.perf_counter() - t0
        self.n_target_forwards += 1
        return out

    def _draft(self, ids, cache):
        t0 = time.perf_counter()
        out = self.pair.draft_logprobs(ids, cache=cache, use_cache=True, num_positions=1)
        self.draft_seconds += time.perf_counter() - t0
        self.n_draft_forwards += 1
        return out

    def _shared(self, ids, cache):
        """One target forward that also gives the draft's law (``share_forwards``); it
        counts as one target forward, its time (both laws' processing included) as target
        time."""
        t0 = time.perf_counter()
        out = self.pair.forward_logprobs("shared", ids, cache=cache, use_cache=True,
                                         num_positions=1)
        self.target_seconds += time.perf_counter() - t0
        self.n_target_forwards += 1
        return out

    def _prefill(self, which, tokens):
        """The first forward of a model over ``tokens`` (no cache), through the prefix cache."""
        pc = self.prefix_cache
        model = self.pair.target if which == "t" else self.pair.draft
        if pc is not None:
            hit = pc.get(model, self.pair.processing, tokens)
            if hit is not None:
                if which == "t":
                    self.n_target_forwards += 1
                else:
                    self.n_draft_forwards += 1
                return NextTokenLogprobs(hit[1], hit[0])
        ids = self._ids([list(tokens)])
        out = self._target(ids, None, 1) if which == "t" else self._draft(ids, None)
        if pc is not None:
            pc.put(model, self.pair.processing, tokens, out.cache, out.logprobs)
        return out

    def _ids(self, rows):
        return torch.tensor(rows, dtype=torch.long, device=self.pair.device)

    # ------------------------------------------------------------------ protocol
    def _paths(self, paths, *, same_length=False):
        if isinstance(paths, str | bytes) or not isinstance(paths, Sequence | np.ndarray) or (
                isinstance(paths, np.ndarray) and paths.ndim == 0):
            raise ValueError(f"paths: must be a sequence of token-id paths, got "
                             f"{type(paths).__name__}")
        out = [tuple(int(t) for t in _token_ids(p, "paths", self.pair.vocab_size))
               for p in paths]
        if not out:
            raise ValueError("paths: must hold at least one path (() is the committed "
                             "sequence itself)")
        if same_length and len({len(p) for p in out}) > 1:
            raise ValueError("paths: the paths of one draft step must have one length")
        return out

    def reset(self, prompt) -> None:
        """Start a sequence; the target's cache is filled with all prompt tokens but the last."""
        prompt = _token_ids(prompt, "prompt", self.pair.vocab_size)
        if len(prompt) == 0:
            raise ValueError("prompt: must hold at least one token id")
        self._start([int(t) for t in prompt])

    def _start(self, committed) -> None:
        self.committed = committed
        self.finished = False
        self.t_cache = None
        self.t_len = 0  # committed tokens held by the target cache
        self.t_rows: list[tuple] = [()]  # path held by each target cache row after t_len
        self.t_caches = None  # per-path caches of batch_verify=False
        self.t_tree = False  # the cache holds a verified token tree after t_len
        self.d_cache = None
        self.d_len = 0
        self.d_rows: list[tuple] = [()]
        self._q_block: dict = {}
        self._p_block: dict = {}  # share_forwards: the target's law at the block's nodes
        if self.ngram is not None:
            self.ngram.reset(self.committed)
        if len(self.committed) > 1:
            out = self._prefill("t", self.committed[:-1])
            self.t_cache, self.t_len = out.cache, len(self.committed) - 1

    def _pending(self, which):
        """Committed tokens the cache does not hold; at least one (crop one if needed)."""
        cache = self.t_cache if which == "t" else self.d_cache
        n = self.t_len if which == "t" else self.d_len
        if n >= len(self.committed) and cache is not None:
            n = len(self.committed) - 1
            _crop_to(cache, n)
            if which == "t":
                self.t_len = n
            else:
                self.d_len = n
        return self.committed[n:]

    def block_length(self, ell: int, B: int = 1) -> int:
        """The length of the next block, at most ``ell``: ``ell`` for a model draft; for an
        ``ngram`` draft the lookup's (:meth:`specbound.llm.ngram.NgramDrafter.plan`; 0
        without an occurrence: the block is the decoder's one-token step from the target's
        law, an ``ar`` step).  Called by the decision logic before every block."""
        for name, value, low in (("ell", ell, 0), ("B", B, 1)):
            if (isinstance(value, bool) or not isinstance(value, (int, np.integer))
                    or value < low):
                raise ValueError(f"{name}: must be an integer >= {low}, got {value!r:.40}")
        if self.ngram is None:
            return ell
        t0 = time.perf_counter()
        n = self.ngram.plan(ell, B, self.gate_rows())
        self.draft_seconds += time.perf_counter() - t0
        return n

    def gate_rows(self) -> int:
        """The sequences whose forwards the next block's verification shares (the
        ``ngram`` gate's batch size, :func:`specbound.llm.ngram.best_length`): 1 here."""
        return 1

    def _ngram_step(self, paths) -> np.ndarray:
        """An ``ngram`` draft's laws after ``paths`` (no forward; the time is draft time)."""
        t0 = time.perf_counter()
        q = self.ngram.laws(paths)
        self.draft_seconds += time.perf_counter() - t0
        for p, row in zip(paths, q, strict=True):
            self._q_block[p] = row
        return q

    @property
    def per_draft_laws(self) -> bool:
        """Whether the ``B`` drafts have laws of their own (an ``ngram`` draft: draft ``b`` the
        point mass on the ``b``-th distinct continuation; :meth:`draft_step_each`)."""
        return self.ngram is not None

    def draft_step_each(self, paths) -> np.ndarray:
        """Draft ``b``'s own law after its own path ``paths[b]`` (an ``ngram`` draft; no
        forward, the time is draft time).  A log records at each distinct path the mixture
        of the laws of the drafts through it (:meth:`specbound.llm.ngram.NgramDrafter.laws`:
        its support is the set of tokens they propose there)."""
        if self.ngram is None:
            raise ValueError("paths: draft_step_each serves an ngram draft (per-draft laws); "
                             "this pair's drafts share one law (draft_step)")
        paths = self._paths(paths, same_length=True)
        t0 = time.perf_counter()
        q = self.ngram.laws_each(paths)
        distinct = list(dict.fromkeys(paths))
        mix = self.ngram.laws(distinct) if self.log is not None else ()
        self.draft_seconds += time.perf_counter() - t0
        for p, row in zip(distinct, mix, strict=False):
            self._q_block[p] = row
        return q

    def draft_step(self, paths) -> np.ndarray:
        """Draft distributions after each path: one batched forward at one depth."""
        paths = self._paths(paths, same_length=True)
        if self.ngram is not None:
            return self._ngram_step(paths)
        s = len(paths[0])
        if self.share_forwards:
            if s and (self.t_len != len(self.committed)
                      or any(p[:-1] not in self.t_rows for p in paths)):
                raise ValueError("paths: a draft step extends the previous step's paths by "
                                 "one token each (start with [()])")
            out = self._shared_forward(paths)
            q = out.draft_logprobs[:, -1, :].exp().cpu().numpy()
            for p, row in zip(paths, q, strict=True):
                self._q_block[p] = row
            return q
        if s and (self.d_cache is None or any(p[:-1] not in self.d_rows for p in paths)):
            raise ValueError("paths: a draft step extends the previous step's paths by one "
                             "token each (start with [()])")
        if s == 0:
            pending = self._pending("d")
            if self.d_cache is None:
                out = self._prefill("d", pending)
            else:
                out = self._draft(self._ids([pending]), self.d_cache)
            self.d_cache, self.d_len, self.d_rows = out.cache, len(self.committed), [()]
        else:
            index = {p: i for i, p in enumerate(self.d_rows)}
            try:
                parents = [index[p[:-1]] for p in paths]
            except KeyError:  # pragma: no cover - the decoders extend paths one depth at a time
                raise RuntimeError("draft_step: a path does not extend the previous depth's "
                                   "paths") from None
            if parents != list(range(len(self.d_rows))):
                self.d_cache.batch_select_indices(
                    torch.tensor(parents, dtype=torch.long, device=self.pair.device))
            out = self._draft(self._ids([[p[-1]] for p in paths]), self.d_cache)
            self.d_cache, self.d_rows = out.cache, paths
        q = out.probs[:, -1, :].cpu().numpy()
        for p, row in zip(paths, q, strict=True):
            self._q_block[p] = row
        return q

    def _shared_forward(self, paths, *, draft=True):
        """``share_forwards``: the forward after every path of ``paths`` (the root: the
        pending committed tokens; else one token per path, each extending a row of the
        cache), storing the target's law at each path; ``draft=False``: the target's law
        only (a block without draft steps)."""
        if paths == [()]:
            ids = self._ids([self._pending("t")])
            out = self._shared(ids, self.t_cache) if draft else self._target(
                ids, self.t_cache, 1)
            self.t_cache, self.t_len, self.t_rows = out.cache, len(self.committed), [()]
        else:
            index = {p: i for i, p in enumerate(self.t_rows)}
            parents = [index[p[:-1]] for p in paths]
            if parents != list(range(len(self.t_rows))):
                self.t_cache.batch_select_indices(
                    torch.tensor(parents, dtype=torch.long, device=self.pair.device))
            ids = self._ids([[p[-1]] for p in paths])
            out = self._shared(ids, self.t_cache) if draft else self._target(
                ids, self.t_cache, 1)
            self.t_cache, self.t_rows = out.cache, paths
        P = out.logprobs[:, -1, :].exp().cpu().numpy()
        for p, row in zip(paths, P, strict=True):
            self._p_block[p] = row
        return out

    def _verify_shared(self, paths) -> np.ndarray:
        """``share_forwards``: the target's laws of the drafted nodes are the block's stored
        ones; only the nodes no draft step forwarded (the leaves, or the root of a block
        without draft steps) are forwarded here, one token per leaf."""
        if () not in self._p_block and () in paths:
            self._shared_forward([()], draft=False)
        missing = list(dict.fromkeys(p for p in paths if p not in self._p_block))
        if missing:
            if self.t_len != len(self.committed) or any(
                    not p or p[:-1] not in self.t_rows for p in missing):
                raise ValueError("paths: with share_forwards, a verified path is a drafted "
                                 "path or extends one of the last draft step's paths by "
                                 "one token")
            self._shared_forward(missing, draft=False)
        P = np.stack([self._p_block[p] for p in paths])
        self._log(paths, P)
        return P

    def verify(self, paths) -> np.ndarray:
        """Target distributions after each path: ONE forward over all draft paths."""
        paths = self._paths(paths)
        if not self.committed:
            raise ValueError("paths: nothing to verify after: reset(prompt) first")
        limit = self.pair.context_window
        if limit is not None and len(self.committed) + max(map(len, paths)) + 1 > limit:
            raise ValueError(f"paths: {len(self.committed)} committed tokens + a path of "
                             f"{max(map(len, paths))} exceed the target's context window of "
                             f"{limit}")
        if self.share_forwards:
            return self._verify_shared(paths)
        pending = self._pending("t")
        leaves = _leaves(paths)
        width = max(len(leaf) for leaf in leaves)
        k = width + 1
        n0 = len(pending)
        if self.tree:
            from specbound.llm.tree import tree_inputs

            params = next(iter(self.pair.target.parameters()), None)
            dtype = (params.dtype if params is not None and params.dtype.is_floating_point
                     else torch.float32)
            ti = tree_inputs(pending, paths, self.t_len, dtype=dtype, device=self.pair.device)
            t0 = time.perf_counter()
            out = self.pair.target_logprobs(ti.input_ids, attention_mask=ti.attention_mask,
                                            position_ids=ti.position_ids, cache=self.t_cache,
                                            use_cache=True, num_positions=None)
            self.target_seconds += time.perf_counter() - t0
            self.n_target_forwards += 1
            self.t_cache, self.t_caches, self.t_tree = out.cache, None, True
            self.t_len += n0
            P = out.logprobs[0, [ti.row[p] for p in paths]].exp().cpu().numpy()
            self._log(paths, P)
            return P
        if self.batch_verify or len(leaves) == 1:
            if self.t_cache is None and len(leaves) > 1 and n0 > 1:
                out = self._target(self._ids([pending[:-1]]), None, 1)
                self.t_cache, self.t_len = out.cache, self.t_len + n0 - 1
                pending, n0 = pending[-1:], 1
            rows = [pending + list(leaf) + [leaf[-1] if leaf else pending[-1]] * (width -
                                                                                   len(leaf))
                    for leaf in leaves]
            if self.t_cache is not None and len(leaves) > 1:
                self.t_cache.batch_repeat_interleave(len(leaves))
            out = self._target(self._ids(rows), self.t_cache, k)
            self.t_cache, self.t_caches = out.cache, None
            logprobs = out.logprobs
        else:
            import copy

            outs = []
            for leaf in leaves:
                cache = copy.deepcopy(self.t_cache) if self.t_cache is not None else None
                outs.append(self._target(self._ids([pending + list(leaf)]), cache, len(leaf) + 1))
            self.t_caches = [o.cache for o in outs]
            logprobs = [o.logprobs[0] for o in outs]
        self.t_rows = leaves
        self.t_len += n0
        where = []
        for p in paths:
            li = next(i for i, leaf in enumerate(leaves) if leaf[:len(p)] == p)
            where.append((li, len(p)))
        if isinstance(logprobs, list):
            sel = torch.stack([logprobs[li][j] for li, j in where])
        else:
            sel = logprobs[[li for li, _ in where], [j for _, j in where]]
        P = sel.exp().cpu().numpy()
        self._log(paths, P)
        return P

    def _log(self, paths, P):
        if self.log is not None:
            for p, row in zip(paths, P, strict=True):
                q = self._q_block.get(p)
                self.log.record(self.prompt_id,
                                np.array(self.committed + list(p), dtype=np.int64), row,
                                [] if q is None else [q])

    def _keep_path(self, cache, rows, tokens, base: int) -> int:
        """Keep the cache row whose path shares the most leading tokens with the committed
        ``tokens`` (the accepted path), cropped to the committed part; its new length."""
        m = [_common_prefix(row, tokens) for row in rows]
        i = int(np.argmax(m))
        if len(rows) > 1:
            cache.batch_select_indices(torch.tensor([i], dtype=torch.long,
                                                    device=self.pair.device))
        _crop_to(cache, base + m[i])
        return base + m[i]

    def commit(self, tokens) -> None:
        """Append a block's tokens; keep the cache rows of the accepted path, cropped."""
        tokens = [int(t) for t in _token_ids(tokens, "tokens", self.pair.vocab_size)]
        base = len(self.committed)
        self._p_block = {}
        if self.share_forwards:  # one cache: keep the accepted path's row, cropped
            if self.t_cache is not None and self.t_len == base:
                self.t_len = self._keep_path(self.t_cache, self.t_rows, tokens, base)
                self.t_rows = [()]
        elif self.t_tree:  # drop the tree's nodes; the accepted tokens are fed next block
            _crop_to(self.t_cache, base)
            self.t_len, self.t_tree = base, False
        elif self.t_cache is not None or self.t_caches is not None:
            m = [_common_prefix(leaf, tokens) for leaf in self.t_rows]
            i = int(np.argmax(m))
            if self.t_caches is not None:
                self.t_cache, self.t_caches = self.t_caches[i], None
            elif len(self.t_rows) > 1:
                self.t_cache.batch_select_indices(
                    torch.tensor([i], dtype=torch.long, device=self.pair.device))
            self.t_len = base + m[i]
            _crop_to(self.t_cache, self.t_len)
            self.t_rows = [()]
        if self.d_cache is not None and self.d_len == base:
            self.d_len = self._keep_path(self.d_cache, self.d_rows, tokens, base)
            self.d_rows = [()]
        self._q_block = {}
        self.committed.extend(tokens)
        if self.ngram is not None:
            self.ngram.extend(tokens)
        if self.progress is not None:
            self.progress.update(len(tokens))
        if self.stop_tokens and any(t in self.stop_tokens for t in tokens):
            self.finished = True


class _PairLM:
    """A pair's model as a protocol model of :mod:`specbound.sim.models` (no cache).

    What :func:`specbound.sim.speculative_decode` validates; with the default
    :class:`~specbound.sim.SyntheticBackend` it evaluates every context from scratch
    (the no-cache reference of the KV-cached :class:`PairBackend`).
    """

    def __init__(self, pair, which: str):
        self.pair = pair
        self.which = which
        self.vocab_size = int(pair.vocab_size)

    def next_distribution(self, context):
        return self.pair.next_token_probs([np.asarray(context, dtype=np.int64)],
                                          model=self.which)[0]


def as_protocol_models(pair):
    """``(target, draft)`` protocol models of a pair, evaluated without cache.

    ``pair`` must be a :class:`~specbound.llm.ModelPair` (``ValueError`` naming it otherwise).

    ``speculative_decode(*as_protocol_models(pair), prompt, decoder, ...)`` is the
    uncached, unbatched reference of :func:`generate` (the same tokens up to float32
    rounding of the model, exactly for models whose logits do not depend on batching).
    """
    _check_pair_and_log(pair, None)
    return _PairLM(pair, "target"), _PairLM(pair, "draft")


def stop_token_ids(pair, stop_at_eos: bool):
    if not stop_at_eos:
        return ()
    tok = pair.tokenizer
    ids = set()
    for source in (getattr(tok, "eos_token_id", None),
                   getattr(getattr(pair.target, "generation_config", None), "eos_token_id",
                           None)):
        if isinstance(source, int):
            ids.add(source)
        elif isinstance(source, list | tuple):
            ids.update(int(t) for t in source)
    return tuple(sorted(t for t in ids if 0 <= t < pair.vocab_size))


def encode_for_pair(pair, prompt, chat, template):
    if isinstance(prompt, str):
        if not prompt.strip():
            raise ValueError("prompt: must not be empty")
        try:
            return pair.encode_prompt(prompt, chat=chat, template=template), prompt
        except ValueError as exc:
            msg = str(exc)
            if msg.startswith("text:"):
                raise ValueError("prompt:" + msg[len("text:"):]) from None
            raise
    if hasattr(prompt, "detach"):
        prompt = prompt.detach().cpu().numpy()
    if prompt is None or isinstance(prompt, bytes):
        raise ValueError(f"prompt: must be text or a 1-D sequence of token ids, got {prompt!r}")
    arr = asarray_named(prompt, "prompt")
    if arr.ndim != 1:
        raise ValueError(f"prompt: must be text or a 1-D sequence of token ids, got shape "
                         f"{arr.shape}")
    if arr.size == 0:
        raise ValueError("prompt: must not be empty")
    if arr.dtype == np.bool_ or arr.dtype.kind not in "iu":
        raise ValueError(f"prompt: must be text or integer token ids, got dtype {arr.dtype}")
    if arr.min() < 0 or arr.max() >= pair.vocab_size:
        raise ValueError(f"prompt: token ids must lie in [0, {pair.vocab_size}), got range "
                         f"[{arr.min()}, {arr.max()}]")
    return arr.astype(np.int64), None



def check_shared(pair) -> None:
    """``share_forwards`` needs a draft that is the target at another temperature."""
    from specbound.llm.drafts import view_temperature

    if view_temperature(pair.target, pair.draft) is None:
        raise ValueError(f"share_forwards: needs a draft that is the target itself at another "
                         f"temperature (a 'temperature:T' draft, which shares the target's "
                         f"forward), got draft {str(getattr(pair, 'draft_spec', '?'))!r}")


def _check_pair_and_log(pair, log) -> None:
    """The public functions' checks of ``pair`` and ``log`` (ValueError naming them)."""
    if not (hasattr(pair, "target_logprobs") and hasattr(pair, "draft_logprobs")
            and hasattr(pair, "with_draft")):
        raise ValueError(f"pair: must be a ModelPair (specbound.llm.load_pair), got "
                         f"{type(pair).__name__}")
    if log is not None and not callable(getattr(log, "record", None)):
        raise ValueError("log: must have a method record(prompt_id, context_tokens, p, qs), "
                         f"got {type(log).__name__}")


def decode_options() -> frozenset:
    """Options of :func:`specbound.sim.speculative_decode` that ``generate`` passes through."""
    import inspect

    params = inspect.signature(speculative_decode).parameters
    own = {"L", "B", "key", "max_new_tokens", "seed", "window", "backend"}
    return frozenset(n for n, p in params.items()
                     if p.kind is inspect.Parameter.KEYWORD_ONLY and n not in own)


def _check_lengths(pair, ids, L, max_new_tokens) -> None:
    """Prompt, lookahead and new tokens within the target's context window (named)."""
    limit = pair.context_window
    if limit is None:
        return
    if ids.size >= limit:
        raise ValueError(f"prompt: {ids.size} tokens, more than the target's context "
                         f"window of {limit}")
    if ids.size + L + 1 > limit:
        raise ValueError(f"L: {ids.size} prompt tokens + L = {L} + 1 exceed the target's "
                         f"context window of {limit}")
    if ids.size + max_new_tokens + L + 1 > limit:
        raise ValueError(f"max_new_tokens: {ids.size} prompt tokens + {max_new_tokens} new "
                         f"tokens + L + 1 exceed the target's context window of {limit}")


def generation_result(pair, res, backend, prompt_text, total) -> GenerationResult:
    """A decoder's result with the text up to the first stop token and the backend's timings."""
    gen = res.tokens[res.prompt_length:]
    stops = set(stop_token_ids(pair, True))
    cut = next((i for i, t in enumerate(gen.tolist()) if t in stops), gen.size)
    text = pair.decode(gen[:cut]) if pair.tokenizer is not None else ""
    base = {f.name: getattr(res, f.name) for f in fields(res)}
    return GenerationResult(**base, text=text, prompt_text=prompt_text,
                            stopped_at_eos=bool(backend.finished),
                            target_seconds=backend.target_seconds,
                            draft_seconds=backend.draft_seconds, total_seconds=total,
                            per_draft=uses_per_draft_laws(backend, res.decoder, res.B,
                                                          res.watermark.repeats))

def generate(pair, prompt, decoder="mpfr", *, L=4, B=1, key=None, window=DEFAULT_WINDOW,
             max_new_tokens=128, seed=0, chat=True, template="default", draft=None,
             stop_at_eos=True, batch_verify=True, tree=False, progress=False, log=None, prompt_id=0,
             prefix_cache=None, share_forwards=False, **options) -> GenerationResult:
    """Generate text with a (speculative) decoder on a real target/draft pair.

    The decision logic is :func:`specbound.sim.speculative_decode`'s (Liu, Wan, Gao &
    Gündüz 2026, arXiv:2609.21858, Alg. 1, 3, 4, 9, 10 and the baselines of
    :mod:`specbound.sim.decode`), driven by a KV-cached :class:`PairBackend`: the same key,
    prompt and processed distributions give the same tokens as the simulator.

    Parameters
    ----------
    pair : ModelPair
        From :func:`specbound.llm.load_pair`.
    prompt : str or sequence of int
        Text (chat-formatted with ``apply_chat_template`` when ``chat``) or token ids used as
        they are.  Must not be empty.
    decoder : str, default "mpfr"
        One of :data:`specbound.sim.DECODERS`.
    L, B : int
        Lookahead and number of drafts (``B > 1`` only for ``mpfr``, ``invariant``,
        ``specinfer``).
    key : int, str or bytes
        The watermark key (required by the keyed decoders).
    window : int >= 0 or None, default 4
        Watermark context window (:data:`DEFAULT_WINDOW`; None: the whole prefix, which
        detection from text alone cannot recompute).
    max_new_tokens : int, default 128
    seed : int, SeedSequence or Generator
        Source of the unkeyed randomness.
    chat : bool, default True
        Format a text prompt with the tokenizer's chat template.
    template : {"default", "summarize", "eli5"}
        Named prompt template (Liu et al. 2026, App. D.2; :data:`specbound.llm.TEMPLATES`).
    draft : str, optional
        Use another draft with the pair's target (``pair.with_draft(draft)``).
    stop_at_eos : bool, default True
        End the run after the block that emits the tokenizer's end-of-sequence token (that
        block's tokens are kept; ``text`` stops at the token).
    batch_verify : bool, default True
        One batched target forward over all draft paths per block (False: one per path).
    tree : bool, default False
        Verify each block as a token tree: one forward over the unique nodes of the draft
        paths with a tree attention mask (:mod:`specbound.llm.tree`).
    progress : bool, default False
        Show a tqdm bar over the generated tokens.
    log : object with ``record(prompt_id, context_tokens, p, qs)``, optional
        Called at every verified context (:class:`PairBackend`), e.g. a
        ``specbound.llm.DistributionLog``.
    prompt_id : int, default 0
        Identifier passed to ``log.record``.
    prefix_cache : PrefixCache, optional
        Reuse the prompt's prefill forwards across runs that share it (same tokens bit for
        bit; :class:`PrefixCache`).
    share_forwards : bool, default False
        When the draft is the target at another temperature (``temperature:T``): one forward
        per draft depth serves both models, and the target's verification forwards only
        the leaves (module docstring, "Shared forwards"; ``batch_verify`` and ``tree`` do
        not apply).  The tokens differ from ``False`` only through float32 rounding of the
        target's logits (equal bit for bit on models without it).
    **options
        Further options of :func:`specbound.sim.speculative_decode` (``repeats``,
        ``max_blocks``, ...).

    Returns
    -------
    GenerationResult

    Raises
    ------
    ValueError
        Unknown ``decoder`` or ``draft``, ``L < 1`` or ``L`` beyond the target's context
        window, ``B < 1`` (or ``B > 1`` for a single-draft decoder), a missing ``key`` for a
        keyed decoder, an empty ``prompt``, one that is not valid Unicode text or one longer
        than the target's context window, ``max_new_tokens`` beyond it, an option that
        :func:`specbound.sim.speculative_decode` does not have, a ``pair`` that is not a
        :class:`~specbound.llm.ModelPair`, a ``log`` without ``record``,
        ``share_forwards=True`` with a draft that is not the target at another temperature;
        every message names the argument.
    """
    decoder = as_choice(decoder, "decoder", DECODERS)
    L = as_int(L, "L", min_value=1)
    as_int(B, "B", min_value=1)
    max_new_tokens = as_int(max_new_tokens, "max_new_tokens", min_value=0,
                            max_value=MAX_NEW_TOKENS)
    chat = as_bool(chat, "chat")
    stop_at_eos = as_bool(stop_at_eos, "stop_at_eos")
    progress = as_bool(progress, "progress")
    if "backend" in options:
        raise ValueError("backend: generate builds its own PairBackend")
    unknown = sorted(set(options) - decode_options())
    if unknown:
        raise ValueError(f"{unknown[0]}: not an option of generate (unknown: {unknown}; "
                         f"decoder options: {sorted(decode_options())})")
    _check_pair_and_log(pair, log)
    if draft is not None:
        pair = pair.with_draft(draft)
    if as_bool(share_forwards, "share_forwards"):
        check_shared(pair)
    ids, prompt_text = encode_for_pair(pair, prompt, chat, template)
    _check_lengths(pair, ids, L, max_new_tokens)
    decode = decoder_call(pair, decoder, L=L, B=B, key=key, window=window,
                          max_new_tokens=max_new_tokens, options=options)
    results, _ = decode_requests(
        pair, [DecodeRequest(ids, prompt_text, seed, prompt_id)], decode,
        desc=f"generate ({decoder})", max_new_tokens=max_new_tokens, progress=progress,
        batch_verify=batch_verify, tree=tree, log=log, prefix_cache=prefix_cache,
        stop_tokens=stop_token_ids(pair, stop_at_eos), share_forwards=share_forwards)
    return results[0]


# ----------------------------------------------------------------------------- the driver


@dataclass(frozen=True, eq=False)
class DecodeRequest:
    """One prompt of a run of :func:`decode_requests`.

    Attributes
    ----------
    ids : ndarray of int64
        The prompt's token ids.
    prompt_text : str or None
        The prompt as text (None for token ids), kept in the result.
    seed : int, SeedSequence, Generator or None
        The seed of this prompt's run, passed to the decoder as it is.
    prompt_id : int
        Passed to ``log.record``.
    """

    ids: np.ndarray
    prompt_text: str | None
    seed: object
    prompt_id: int = 0


def decoder_call(pair, decoder, *, L, B, key, window, max_new_tokens, options):
    """``decode(request, backend)``: the simulator's run of ``decoder`` on one prompt with a
    given backend -- :func:`specbound.sim.speculative_decode`, or for ``"lossy:<rule>"``
    :func:`specbound.sim.lossy_decode` (``B``, ``key`` and ``window`` unused; ``options``
    are the rule's parameters)."""
    target, draft_lm = as_protocol_models(pair)
    if decoder.startswith("lossy:"):
        rule = decoder[len("lossy:"):]

        def decode(request, backend):
            return _sim_lossy_decode(target, draft_lm, request.ids, rule, L=L,
                                     max_new_tokens=max_new_tokens, seed=request.seed,
                                     backend=backend, **options)
    else:
        def decode(request, backend):
            return speculative_decode(target, draft_lm, request.ids, decoder, L=L, B=B,
                                      key=key, max_new_tokens=max_new_tokens,
                                      seed=request.seed, window=window, backend=backend,
                                      **options)
    return decode


def decode_requests(pair, requests, decode, *, desc, max_new_tokens, progress=False,
                    **backend_options):
    """The one driver of real-model runs: every request a row with its own backend.

    Each request (a :class:`DecodeRequest`) gets a :class:`PairBackend` whose forwards are
    posted to one scheduler (:mod:`specbound.llm._scheduler`), and ``decode(request,
    backend)`` -- the simulator's block loop -- runs on it; the posted forwards of the live
    rows run as batched forwards.  One request runs in the caller's thread with the pair's
    own forwards (what :func:`generate` does); :func:`~specbound.llm.generate_batch` passes
    many.  ``backend_options`` go to every row's backend (``batch_verify``, ``tree``,
    ``log``, ``stop_tokens``, ``prefix_cache``, ``share_forwards``, ``batch_gate``: an
    ``ngram`` gate priced for the run's live rows, default True), ``progress`` makes one
    tqdm bar (labelled ``desc``) over the generated tokens of all rows.

    Returns ``(results, scheduler)``: one :class:`GenerationResult` per request, in order,
    and the :class:`~specbound.llm._scheduler.Scheduler` (its forward counts and seconds).
    Timings of a row: ``target_seconds`` / ``draft_seconds`` its share of the forwards it
    took part in (each forward's time divided by the rows in it; for one request, the time
    inside its forwards), ``total_seconds`` the time from the start of the run until the row
    finished (prefills included; tokenization and building the backends excluded).
    """
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=max_new_tokens * len(requests), desc=desc, unit="tok")
    sched = Scheduler(pair)
    rows, backends, bodies = [], [], []
    try:
        for i, request in enumerate(requests):
            row = Row(i)
            backend = _RowBackend(pair, row, sched, prompt_id=request.prompt_id, progress=bar,
                                  **backend_options)
            rows.append(row)
            backends.append(backend)
            bodies.append(functools.partial(decode, request, backend))
        t0 = time.perf_counter()
        sched.run(rows, bodies, t0)
    finally:
        if bar is not None:
            bar.close()
    results = tuple(
        generation_result(pair, row.result, backend, request.prompt_text, row.finished_at)
        for row, backend, request in zip(rows, backends, requests, strict=True))
    return results, sched


class _PairProxy:
    """The pair as seen by a row's backend: ``target_logprobs`` (the token-tree verification
    of :meth:`PairBackend.verify`) is posted to the scheduler; everything else is the pair's."""

    def __init__(self, pair, backend):
        self._pair = pair
        self._backend = backend

    def __getattr__(self, name):
        return getattr(self._pair, name)

    def target_logprobs(self, input_ids, *, attention_mask=None, position_ids=None, cache=None,
                        use_cache=False, num_positions=1):
        b = self._backend
        t0 = time.perf_counter()
        out, share = b.scheduler.post(b.row, ForwardRequest(
            "target", input_ids, cache, num_positions, attention_mask, position_ids))
        # the caller adds the whole wait to target_seconds; keep only this row's share
        b.target_seconds -= (time.perf_counter() - t0) - share
        return out


class _RowBackend(PairBackend):
    """:class:`PairBackend` whose forwards are posted to the run's scheduler; with
    ``batch_gate`` an ``ngram`` draft's gate prices a block at the batched forward of the
    run's live rows (:meth:`gate_rows`)."""

    def __init__(self, pair, row, scheduler, batch_gate=True, **kwargs):
        self.row = row
        self.scheduler = scheduler
        self.batch_gate = batch_gate
        super().__init__(pair, **kwargs)
        self.pair = _PairProxy(pair, self)

    def gate_rows(self) -> int:
        return self.scheduler.live_rows() if self.batch_gate else 1

    def _target(self, ids, cache, k):
        out, secs = self.scheduler.post(self.row, ForwardRequest("target", ids, cache, k))
        self.target_seconds += secs
        self.n_target_forwards += 1
        return out

    def _draft(self, ids, cache):
        out, secs = self.scheduler.post(self.row, ForwardRequest("draft", ids, cache, 1))
        self.draft_seconds += secs
        self.n_draft_forwards += 1
        return out

    def _shared(self, ids, cache):
        out, secs = self.scheduler.post(self.row, ForwardRequest("shared", ids, cache, 1))
        self.target_seconds += secs
        self.n_target_forwards += 1
        return out


# ----------------------------------------------------------------------------- lossy rules


def generate_lossy(pair, prompt, rule, *, L=4, max_new_tokens=128, seed=0, chat=True,
                   template="default", draft=None, stop_at_eos=True, progress=False,
                   log=None, prompt_id=0, prefix_cache=None, **params) -> GenerationResult:
    """:func:`specbound.sim.lossy_decode` on a real pair with the KV-cached
    :class:`PairBackend`: blockwise speculative sampling (Leviathan et al. 2023,
    arXiv:2211.17192, Alg. 1) whose verification step is a rule of
    :data:`specbound.theory.RULES` (Zhou et al. 2026, arXiv:2607.26627, §3.1-3.2), the
    single-draft block of :func:`generate` with the rule's step; the first token of a block
    follows :func:`specbound.theory.induced_distribution` of the context's ``(p, q)``.  On
    any other backend call ``sim.lossy_decode(target, draft, prompt, rule, ...,
    backend=PairBackend(pair))`` (``target, draft = as_protocol_models(pair)``).

    Arguments as :func:`generate` (no key: the lossy rules are unwatermarked; ``prefix_cache``
    as there) plus the rule's parameters (constants, or callables ``f(p, q)`` evaluated in
    every context, e.g. a min-p set ``allowed=lambda p, q: p >= 0.1 * p.max()``).
    ``result.decoder`` is ``"lossy:<rule>"``.

    Raises
    ------
    ValueError
        Unknown ``rule`` or bad rule parameters, and the errors of :func:`generate`
        (``pair``, ``log``, ``L``, ``prompt``, ``draft``, ``max_new_tokens``), each naming
        the argument.
    """
    from specbound.sim.lossy import LOSSY_RULES

    as_choice(rule, "rule", LOSSY_RULES)
    L = as_int(L, "L", min_value=1)
    max_new_tokens = as_int(max_new_tokens, "max_new_tokens", min_value=0,
                            max_value=MAX_NEW_TOKENS)
    _check_pair_and_log(pair, log)
    if draft is not None:
        pair = pair.with_draft(draft)
    ids, prompt_text = encode_for_pair(pair, prompt, as_bool(chat, "chat"), template)
    _check_lengths(pair, ids, L, max_new_tokens)
    decode = decoder_call(pair, f"lossy:{rule}", L=L, B=1, key=None, window=None,
                          max_new_tokens=max_new_tokens, options=params)
    results, _ = decode_requests(
        pair, [DecodeRequest(ids, prompt_text, seed, prompt_id)], decode,
        desc=f"generate (lossy:{rule})", max_new_tokens=max_new_tokens,
        progress=as_bool(progress, "progress"), log=log, prefix_cache=prefix_cache,
        stop_tokens=stop_token_ids(pair, as_bool(stop_at_eos, "stop_at_eos")))
    return results[0]
