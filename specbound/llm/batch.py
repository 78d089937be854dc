r"""Batched decoding across prompts: one model forward per step for every live prompt.

:func:`generate_batch` decodes many prompts together.  Each prompt (a *row*) runs the
one-prompt path of :func:`specbound.llm.generate` unchanged -- the simulator's decision logic
(:func:`specbound.sim.speculative_decode`: Liu, Wan, Gao & Gündüz 2026, arXiv:2609.21858,
Alg. 1, 3, 4, 9, 10 and the baselines of :mod:`specbound.sim.decode`) driving a KV-cached
:class:`~specbound.llm.PairBackend` with that row's own seed -- except that the backend's model
forwards do not run one by one: every forward a row asks for is posted to a scheduler, which
waits until every live row has posted one (or finished), then runs ONE batched forward per
model (one for the draft, one for the target) over all posted rows and hands each row its
processed distributions and its own KV cache back.  Serving engines batch the same way
(reading the weights once for many prompts is what makes a memory-bound forward cheap per
token).

How rows of different lengths share one forward
-----------------------------------------------
Each model keeps one persistent batch cache (per layer a key and a value buffer with a slot
per sequence and free columns after the longest row).  Row ``b`` holds its cache in columns
``[0, c_b)`` of its slot, at its own length (cropped after its own rejection point exactly as
in :func:`~specbound.llm.generate`); a step's new tokens (a pending token plus a block's draft
paths, or one draft token per path) are right-padded to the longest and written in place
after each row's own cache (columns ``[c_b, c_b + n)``: transformers' ``DynamicLayer.update``
would concatenate, copying the whole batch cache in every layer).  A 4-D attention mask
hides every column a row does not own and explicit ``position_ids`` continue each row's own
positions, so each row's logits are those of the row alone up to float32 rounding of the
model (padding changes the order of some sums).  After the forward each row gets back a view
of its slot (its own positions) and the processed distributions at its own positions.  Rows
keep their slot between steps: when the same rows post again in the same order, a row whose
cache is still the store's view of its slot (cropped or not) is used in place, and only
rows whose cache was replaced (a prefill, a selection of draft paths) are copied into their
slot; the store is rebuilt (every row copied once) only when rows leave the batch, a row's
number of sequences changes (the draft paths of multi-draft decoders) or the free columns
run out.  (Restacking every row's cache at every step took about 30% of a batched step
at 16 rows, measured.)  A prompt's prefill (a forward without cache) runs alone: it is
compute-bound, so stacking gains nothing, and padding ragged prompts to the longest cost
2.7x its time (measured).  A step with one live row runs exactly the single-prompt forward.

Scheduling: when the live rows wait on different models (a prompt of one token has no
target prefill; a last block may be shorter), the larger group runs and the others keep
their request, which brings the rows back into step.

Consequences: a row emits the same tokens as :func:`~specbound.llm.generate` of its prompt
with its seed whenever its processed distributions are the same -- bit for bit on models
whose rows do not interact numerically (tested on a synthetic torch module); on the embedded
SmolLM2-135M the processed log-probabilities of batched and single runs differ by float32
rounding (largest difference measured by the tests, below 1e-4).

Rows are run as threads that take turns (one at a time, in row order, between two batched
forwards), so a run is deterministic and ``log.record`` is called in a fixed order.

The lossy verification rules (Zhou et al. 2026, arXiv:2607.26627, §3.1-3.2) are batched the
same way: ``decoder="lossy:<rule>"`` runs :func:`specbound.sim.lossy_decode` on the row's
backend per row (the rows of :func:`~specbound.llm.generate_lossy`), the rule's parameters
passed as options.
Token-tree verification (``tree=True``; :mod:`specbound.llm.tree`) is batched too: a tree
row's 4-D mask and node positions are placed into the batch's 4-D mask.
Shared forwards (``share_forwards=True``, a ``temperature:T`` draft: the target's own
forward gives both laws; :mod:`specbound.llm.generation`) are batched the same way: the
rows' draft steps and leaf verifications are the target's batched forwards, on the
target's batch cache.  Not covered (a ``ValueError`` names the option): one forward
per draft path (``batch_verify=False``).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import numpy as np

from specbound._validation import as_bool, as_choice, as_int, split_seeds
from specbound.llm._deps import require_llm_extra
from specbound.llm.generation import (
    DEFAULT_WINDOW,
    GenerationResult,
    PairBackend,
    PrefixCache,
    as_protocol_models,
    check_shared,
    decode_options,
    encode_for_pair,
    generation_result,
    stop_token_ids,
)
from specbound.llm.models import NextTokenLogprobs
from specbound.sim.decode import DECODERS, MAX_NEW_TOKENS, speculative_decode
from specbound.sim.lossy_seq import lossy_decode

torch = require_llm_extra()

__all__ = ["GenerationBatch", "generate_batch"]


@dataclass(frozen=True, eq=False)
class GenerationBatch:
    """Output of :func:`generate_batch`: one :class:`~specbound.llm.GenerationResult` per prompt.

    Attributes
    ----------
    decoder : str
    L, B : int
    rows : tuple of GenerationResult
        In prompt order.  A row's ``target_seconds`` / ``draft_seconds`` are its share of the
        batched forwards it took part in (each forward's time divided by its number of rows);
        its ``total_seconds`` is the wall-clock time from the start of the batch until the row
        finished.
    total_seconds : float
        Wall-clock time of the whole batch (prefills included, tokenization excluded).
    target_seconds, draft_seconds : float
        Wall-clock time inside the batched target and draft forwards (building the batch
        inputs and caches and the float64 processing included; a shared forward of
        ``share_forwards=True`` is a target forward).
    n_target_forwards, n_draft_forwards : int
        Model forwards made: the batched forwards and the prompts' prefills (a prefill runs
        alone: it is compute-bound, so stacking gains nothing and padding costs).
    max_rows : int
        The largest number of sequences served in one step (draft paths of multi-draft
        decoders count one each).
    """

    decoder: str
    L: int
    B: int
    rows: tuple = field(repr=False)
    total_seconds: float = 0.0
    target_seconds: float = 0.0
    draft_seconds: float = 0.0
    n_target_forwards: int = 0
    n_draft_forwards: int = 0
    max_rows: int = 0

    def results(self) -> list[GenerationResult]:
        """The per-prompt results (a new list, in prompt order)."""
        return list(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i) -> GenerationResult:
        return self.rows[i]

    def __iter__(self):
        return iter(self.rows)

    @property
    def tokens(self) -> list[np.ndarray]:
        """Per prompt: the prompt followed by the generated tokens."""
        return [r.tokens for r in self.rows]

    @property
    def generated(self) -> list[np.ndarray]:
        """Per prompt: the generated tokens."""
        return [r.generated for r in self.rows]

    @property
    def texts(self) -> list[str]:
        """Per prompt: the generated text (cut at the first end-of-sequence token)."""
        return [r.text for r in self.rows]

    @property
    def emitted_per_block(self) -> list[np.ndarray]:
        return [r.emitted_per_block for r in self.rows]

    @property
    def decision_accepted(self) -> list[np.ndarray]:
        return [r.decision_accepted for r in self.rows]

    @property
    def nu(self) -> list[np.ndarray]:
        return [r.nu for r in self.rows]

    @property
    def n_generated(self) -> int:
        """Generated tokens over all prompts."""
        return int(sum(r.n_generated for r in self.rows))

    @property
    def forward_seconds(self) -> float:
        return self.target_seconds + self.draft_seconds

    @property
    def tokens_per_second(self) -> float:
        """Generated tokens of all prompts per second of ``total_seconds``."""
        if self.total_seconds <= 0:
            return float("nan")
        return self.n_generated / self.total_seconds


# ----------------------------------------------------------------------------- caches


def _cache_layers(cache) -> list[tuple]:
    """``[(keys, values), ...]`` of a transformers cache, one pair per layer."""
    layers = getattr(cache, "layers", None)
    if layers is not None:
        out = []
        for layer in layers:
            if getattr(layer, "is_sliding", False) or not hasattr(layer, "keys"):
                raise ValueError(f"pair: generate_batch needs plain (DynamicLayer) key-value "
                                 f"caches, got {type(layer).__name__}")
            out.append((layer.keys, layer.values))
        return out
    if hasattr(cache, "key_cache"):  # older transformers
        return list(zip(cache.key_cache, cache.value_cache, strict=True))
    raise ValueError(f"pair: generate_batch needs transformers key-value caches, got "
                     f"{type(cache).__name__}")


def _ragged_layer_class():
    """A ``DynamicLayer`` over rows of a persistent buffer, each row at its own length.

    Row ``b`` holds its cache in columns ``[0, c_b)`` of its slot; ``update`` writes the
    step's new keys of row ``b`` at columns ``[c_b, c_b + n)`` in place (transformers'
    ``DynamicLayer.update`` would concatenate, copying the whole batch cache in every layer)
    and returns the buffer's first ``C + n`` columns (``C = max c_b``); the attention mask
    hides every column a row does not own.
    """
    global _RaggedLayer
    if _RaggedLayer is None:
        from transformers.cache_utils import DynamicLayer

        class RaggedLayer(DynamicLayer):
            def __init__(self, kbuf, vbuf, length, index):
                super().__init__()
                self.lazy_initialization(kbuf, vbuf)
                self._kb, self._vb, self._n, self._index = kbuf, vbuf, length, index
                self.keys, self.values = kbuf[..., :length, :], vbuf[..., :length, :]

            def update(self, key_states, value_states, *args, **kwargs):
                n = key_states.shape[-2]
                if self._index is None:  # every row at the same length
                    self._kb[..., self._n:self._n + n, :] = key_states
                    self._vb[..., self._n:self._n + n, :] = value_states
                else:
                    rows, cols = self._index
                    self._kb[rows[:, :n], :, cols[:, :n], :] = key_states.transpose(1, 2)
                    self._vb[rows[:, :n], :, cols[:, :n], :] = value_states.transpose(1, 2)
                self.keys = self._kb[..., :self._n + n, :]
                self.values = self._vb[..., :self._n + n, :]
                return self.keys, self.values

        _RaggedLayer = RaggedLayer
    return _RaggedLayer


_RaggedLayer = None


def _ragged_cache(layers, C, cs, N):
    """A ``DynamicCache`` over persistent buffers whose row ``b`` holds ``cs[b]`` positions."""
    from transformers import DynamicCache

    cache = DynamicCache()
    if not isinstance(getattr(cache, "layers", None), list):  # pragma: no cover - old versions
        raise ValueError("pair: generate_batch needs transformers >= 4.56 (cache layers)")
    index = None
    if any(c != C for c in cs):
        dev = layers[0][0].device
        c = torch.tensor(cs, dtype=torch.long, device=dev)
        rows = torch.arange(len(cs), device=dev)[:, None].expand(len(cs), N)
        index = (rows, c[:, None] + torch.arange(N, device=dev)[None, :])
    cls = _ragged_layer_class()
    for k, v in layers:
        cache.layers.append(cls(k, v, C, index))
    return cache


def _make_cache(layers):
    """A ``DynamicCache`` holding the given tensors (not copies of them)."""
    from transformers import DynamicCache

    cache = DynamicCache()
    if isinstance(getattr(cache, "layers", None), list):
        from transformers.cache_utils import DynamicLayer

        for k, v in layers:
            layer = DynamicLayer()
            layer.lazy_initialization(k, v)
            layer.keys, layer.values = k, v
            cache.layers.append(layer)
        return cache
    for i, (k, v) in enumerate(layers):  # older transformers: update copies
        cache.update(k, v, i)
    return cache


def _batch_mask(requests, starts, rows, ns, cs, N, T, dtype, dev):
    """The 4-D additive mask (rows, 1, N, T) of a batch in the store's layout.

    Row ``b`` of a request with cache length ``c`` holds its cache in columns ``[0, c)`` and
    its new tokens in ``[c, c + N)``: query ``j`` of a plain request sees columns
    ``[0, c + j]`` (causal); a token-tree request's own mask (each node sees the cache, the
    pending tokens and its ancestors; :mod:`specbound.llm.tree`) is placed over columns
    ``[0, c + n)``; padded queries see the causal prefix (never an empty row).
    """
    low = torch.finfo(dtype).min
    c_row = torch.tensor(np.repeat(cs, rows), dtype=torch.long, device=dev)
    lim = c_row[:, None] + torch.arange(N, device=dev)[None, :]
    allowed = torch.arange(T, device=dev)[None, None, :] <= lim[:, :, None]
    full = torch.zeros(allowed.shape, dtype=dtype, device=dev).masked_fill_(~allowed, low)
    full = full[:, None]
    for q, r0, r, n, c in zip(requests, starts, rows, ns, cs, strict=False):
        if q[3] is not None:
            full[r0:r0 + r, 0, :n, :c + n] = q[3][:, 0].to(dtype)
    return full


class _Store:
    """The persistent batch cache of one model: per layer a (rows, ..., capacity, dim)
    key and value buffer, and which row of the batch (and how many sequences) owns each
    slot.  Rows keep their slot between steps; see :func:`_batched_forward`."""

    def __init__(self, layers, owners, capacity):
        self.layers = layers
        self.owners = owners
        self.capacity = capacity

    def holds(self, cache, start, r) -> bool:
        """Whether ``cache`` is the store's view of slots ``[start, start + r)`` at column 0."""
        try:
            got = _cache_layers(cache)
        except ValueError:
            return False
        if len(got) != len(self.layers):
            return False
        for li in (0, len(got) - 1):
            for a, b in zip(got[li], self.layers[li], strict=True):
                if (a.untyped_storage().data_ptr() != b.untyped_storage().data_ptr()
                        or a.storage_offset() != start * b.stride(0)
                        or a.stride() != b.stride() or a.shape[0] != r):
                    return False
        return True

    def shares(self, cache) -> bool:
        """Whether ``cache`` has tensors in the store's buffers (at any slot)."""
        ptr = self.layers[0][0].untyped_storage().data_ptr()
        try:
            return any(k.untyped_storage().data_ptr() == ptr for k, _ in _cache_layers(cache))
        except ValueError:
            return False


#: free columns a new store keeps after the longest row, per new token of the step (at
#: least 32): rows grow into them for several steps before the store is rebuilt
_STORE_SLACK = 12


def _model_of(which: str) -> str:
    """The model whose forward and batch store a request of kind ``which`` uses: a shared
    forward (``share_forwards``) is the target's."""
    return "target" if which == "shared" else which


def _batched_forward(pair, which, requests, stores=None, owners=None):
    """One forward of ``which`` over several rows' requests; per-request NextTokenLogprobs.

    ``requests``: ``(ids, cache, k[, mask4, pos4])`` with ``ids`` a (rows, n) long tensor of
    new tokens, ``cache`` the request's KV cache (rows, ..., c, ...) or None, ``k`` the
    trailing positions wanted.  ``stores`` (a dict, one :class:`_Store` per model) and
    ``owners`` (one hashable per request: the row that posted it) keep the batch cache
    between steps: when the same rows post again in the same order, each request whose
    cache is still the store's view of its slots is used in place (nothing is copied) and
    only the others are written into their slots; otherwise (rows left the batch, a row's
    number of sequences changed, the store is full) a new store is built, with free columns
    for the next steps.  New tokens are right-padded after each row's own cache (module
    docstring).  Also returns the number of model forwards made.  A request without a
    cache (a prompt's prefill) runs alone: a prefill is compute-bound, so stacking it gains
    nothing and padding it costs a lot.
    """
    requests = [tuple(q) + (None, None)[:5 - len(q)] for q in requests]
    if owners is None:
        owners = list(range(len(requests)))
    alone = [i for i, q in enumerate(requests) if q[1] is None or len(requests) == 1]
    if alone:
        out = [None] * len(requests)
        for i in alone:
            ids, cache, k, mask4, pos4 = requests[i]
            out[i] = pair._forward(which, ids, mask4, pos4, cache, True, k)
        rest = [i for i in range(len(requests)) if out[i] is None]
        n = len(alone)
        if rest:
            outs, m = _batched_forward(pair, which, [requests[i] for i in rest], stores,
                                       [owners[i] for i in rest])
            n += m
            for i, o in zip(rest, outs, strict=True):
                out[i] = o
        return out, n
    dev = pair.device
    rows = [int(q[0].shape[0]) for q in requests]
    ns = [int(q[0].shape[1]) for q in requests]
    cs = [int(q[1].get_seq_length()) for q in requests]
    ks = [int(q[2]) if q[2] is not None else int(q[0].shape[1]) for q in requests]
    R, N, C = sum(rows), max(ns), max(cs)
    T = C + N
    starts = np.concatenate([[0], np.cumsum(rows)]).astype(int)
    ids_b = torch.zeros((R, N), dtype=torch.long, device=dev)
    pos = torch.zeros((R, N), dtype=torch.long, device=dev)
    ar = torch.arange(N, device=dev)
    for q, r0, r, n, c in zip(requests, starts, rows, ns, cs, strict=False):
        ids = q[0]
        ids_b[r0:r0 + r, :n] = ids
        ids_b[r0:r0 + r, n:] = ids[:, -1:]  # any valid token; masked out
        pos[r0:r0 + r] = ar + c
        if q[4] is not None:  # a token tree's own positions (its depths), pads after them
            pos[r0:r0 + r, :n] = q[4]
    per_req = [_cache_layers(q[1]) for q in requests]
    model = pair.target if which == "target" else pair.draft
    params = next(iter(model.parameters()), None)
    mdtype = (params.dtype if params is not None and params.dtype.is_floating_point
              else torch.float32)
    mask = _batch_mask(requests, starts, rows, ns, cs, N, T, mdtype, dev)
    # the batch cache: the store of the previous step when the same rows come back in the
    # same order with room for this step's tokens, else a new one
    key = [(o, r) for o, r in zip(owners, rows, strict=True)]
    skey = _model_of(which)
    store = stores.get(skey) if stores is not None else None
    in_place = [False] * len(requests)
    if store is not None and store.owners == key and T <= store.capacity and len(
            per_req[0]) == len(store.layers):
        in_place = [store.holds(q[1], r0, r)
                    for q, r0, r in zip(requests, starts, rows, strict=False)]
        if any(not ok and store.shares(q[1]) for ok, q in zip(in_place, requests, strict=True)):
            store = None  # a cache that moved between slots: rebuild
    else:
        store = None
    if store is None:
        in_place = [False] * len(requests)
        # free columns for the next steps (rows with several draft paths too: a store whose
        # rows keep their number of sequences grows into them; measured on mpfr B = 2, 24
        # prompts x 64 tokens: 187 -> 132 rebuilds, 85.8 -> 81.9 CPU seconds)
        capacity = T + max(32, _STORE_SLACK * N)
        layers = []
        for k0, v0 in per_req[0]:
            layers.append((k0.new_zeros((R, *k0.shape[1:-2], capacity, k0.shape[-1])),
                           v0.new_zeros((R, *v0.shape[1:-2], capacity, v0.shape[-1]))))
        store = _Store(layers, key, capacity)
        if stores is not None:
            stores[skey] = store
    for li, (kb, vb) in enumerate(store.layers):
        for p, ok, r0, r, c in zip(per_req, in_place, starts, rows, cs, strict=False):
            if not ok and c > 0:
                kb[r0:r0 + r, ..., :c, :] = p[li][0]
                vb[r0:r0 + r, ..., :c, :] = p[li][1]
    per_req = None
    batch = _ragged_cache([(kb[:R], vb[:R]) for kb, vb in store.layers], C,
                          list(np.repeat(cs, rows)), N)
    keep = max(N - n + k for n, k in zip(ns, ks, strict=True))
    out = pair._forward(which, ids_b, mask, pos, batch, True, keep)
    results = []
    for r0, r, n, c, k in zip(starts, rows, ns, cs, ks, strict=False):
        lo = n - k - (N - keep)
        lp = out.logprobs[r0:r0 + r, lo:lo + k]
        dlp = (out.draft_logprobs[r0:r0 + r, lo:lo + k] if out.draft_logprobs is not None
               else None)
        cache = _make_cache([(kb[r0:r0 + r, ..., :c + n, :], vb[r0:r0 + r, ..., :c + n, :])
                             for kb, vb in store.layers])
        results.append(NextTokenLogprobs(lp, cache, dlp))
    return results, 1


# ----------------------------------------------------------------------------- rows


class _Abort(BaseException):
    """Raised inside a row's thread to unwind it when the batch is abandoned."""


class _Row:
    def __init__(self, index):
        self.index = index
        self.go = threading.Event()
        self.request = None
        self.response = None
        self.share = 0.0
        self.result = None
        self.error = None
        self.done = False
        self.finished_at = 0.0


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
        out, share = b._sched.post(b._row, "target", input_ids, cache, num_positions,
                                   attention_mask, position_ids)
        # the caller adds the whole wait to target_seconds; keep only this row's share
        b.target_seconds -= (time.perf_counter() - t0) - share
        return out


class _RowBackend(PairBackend):
    """:class:`PairBackend` whose forwards are posted to the batch scheduler."""

    def __init__(self, pair, row, scheduler, **kwargs):
        self._row = row
        self._sched = scheduler
        super().__init__(pair, **kwargs)
        self.pair = _PairProxy(pair, self)

    def _target(self, ids, cache, k):
        out, secs = self._sched.post(self._row, "target", ids, cache, k)
        self.target_seconds += secs
        self.n_target_forwards += 1
        return out

    def _draft(self, ids, cache):
        out, secs = self._sched.post(self._row, "draft", ids, cache, 1)
        self.draft_seconds += secs
        self.n_draft_forwards += 1
        return out

    def _shared(self, ids, cache):
        out, secs = self._sched.post(self._row, "shared", ids, cache, 1)
        self.target_seconds += secs
        self.n_target_forwards += 1
        return out


class _Scheduler:
    """Runs the rows' threads in turns and their posted forwards as batched forwards."""

    def __init__(self, pair):
        self.pair = pair
        self.back = threading.Event()
        self.aborted = False
        self.seconds = {"target": 0.0, "draft": 0.0}
        self.forwards = {"target": 0, "draft": 0}
        self.max_rows = 0
        self.stores: dict = {}  # the persistent batch cache of each model (_Store)

    def _with_ghosts(self, which, group, live):
        """The requests of a forward over every slot of the model's batch store when
        ``group`` is a part of the rows that own it: the other owners are live rows waiting
        on another kind of forward, whose caches are still the store's views of their
        slots, and rows that have finished (up to a quarter of the slots).  They ride along
        as *ghosts* (one dummy token each, its output dropped, its key and value written into
        the first free column of the ghost's slot, which the ghost's next forward
        overwrites); without them the store would be rebuilt -- every layer's cache zeroed
        and copied -- at each step where the rows drift apart or one finishes (rows of a
        speculative batch end their blocks at different steps near the end of a run).
        Returns ``(requests, owners, positions of the group's requests)`` or None (no
        store, or a ghost that cannot ride along: the group is forwarded alone)."""
        skey = _model_of(which)
        store = self.stores.get(skey)
        if store is None or len(store.owners) <= len(group):
            return None
        owners = [o for o, _ in store.owners]
        in_group = {r.index: j for j, r in enumerate(group)}
        if not in_group.keys() <= set(owners):
            return None
        by_index = {r.index: r for r in live}
        reqs, picked, r0, dead = [], [0] * len(group), 0, 0
        for o, nrows in store.owners:
            row = by_index.get(o)
            if o in in_group:
                picked[in_group[o]] = len(reqs)
                reqs.append(group[in_group[o]].request[1:])
            elif row is None:  # a row that left the batch: its slot rides along, unread,
                dead += 1      # until a quarter of the slots are such (then a rebuild)
                if dead > len(owners) // 4:
                    return None
                view = _make_cache([(kb[r0:r0 + nrows, ..., :1, :], vb[r0:r0 + nrows, ..., :1, :])
                                    for kb, vb in store.layers])
                reqs.append((torch.zeros((nrows, 1), dtype=torch.long,
                                         device=store.layers[0][0].device), view, 1))
            elif row.request is None:
                return None
            else:
                kind, ids, cache = row.request[:3]
                if (_model_of(kind) != skey or cache is None or int(ids.shape[0]) != nrows
                        or not store.holds(cache, r0, nrows)):
                    return None
                reqs.append((ids[:, -1:], cache, 1))
            r0 += nrows
        return reqs, owners, picked

    # called in a row's thread
    def post(self, row, which, ids, cache, k, mask4=None, pos4=None):
        row.request = (which, ids, cache, k, mask4, pos4)
        self.back.set()
        row.go.wait()
        row.go.clear()
        if self.aborted:
            raise _Abort
        out, row.response = row.response, None
        return out

    def _resume(self, row):
        self.back.clear()
        row.go.set()
        self.back.wait()

    def run(self, rows, bodies, t0):
        threads = []
        for row, body in zip(rows, bodies, strict=True):
            th = threading.Thread(target=self._thread, args=(row, body, t0), daemon=True,
                                  name=f"generate_batch-row-{row.index}")
            th.start()
            threads.append(th)
        try:
            live = list(rows)
            while live:
                for row in live:
                    if row.request is None:  # not waiting on a forward: let it run on
                        self._resume(row)
                        if row.error is not None:
                            raise row.error
                live = [r for r in live if not r.done]
                if not live:
                    break
                groups: dict = {}
                for row in live:
                    groups.setdefault(row.request[0], []).append(row)
                # the larger group runs (the target on a tie); the other rows keep their
                # request for a later step, which brings rows that drifted apart (a prompt
                # without a target prefill, a shorter last block) back into one forward
                which = max(groups, key=lambda w: (len(groups[w]), w != "draft", w))
                group = groups[which]
                reqs = [r.request[1:] for r in group]
                tf = time.perf_counter()
                full = self._with_ghosts(which, group, live)
                if full is None:
                    outs, n_forwards = _batched_forward(self.pair, which, reqs, self.stores,
                                                        [r.index for r in group])
                else:
                    all_reqs, all_owners, picked = full
                    outs, n_forwards = _batched_forward(self.pair, which, all_reqs,
                                                        self.stores, all_owners)
                    outs = [outs[j] for j in picked]
                secs = time.perf_counter() - tf
                counted = _model_of(which)
                self.seconds[counted] += secs
                self.forwards[counted] += n_forwards
                self.max_rows = max(self.max_rows, sum(int(q[0].shape[0]) for q in reqs))
                for r, o in zip(group, outs, strict=True):
                    r.request = None
                    r.response = (o, secs / len(group))
        except BaseException:
            self.aborted = True
            for row in rows:
                row.go.set()
            for th in threads:
                th.join()
            raise
        for th in threads:
            th.join()

    def _thread(self, row, body, t0):
        row.go.wait()
        row.go.clear()
        try:
            if not self.aborted:
                row.result = body()
        except _Abort:
            pass
        except BaseException as exc:  # handed to the scheduler's thread
            row.error = exc
        finally:
            row.finished_at = time.perf_counter() - t0
            row.done = True
            row.request = None
            self.back.set()


# ----------------------------------------------------------------------------- public


def _encode_all(pair, prompts, chat, template, max_new_tokens, L):
    if isinstance(prompts, str) or hasattr(prompts, "shape") and np.ndim(prompts) == 1:
        raise ValueError("prompts: must be a list of prompts (text or token-id sequences), "
                         "got a single prompt")
    try:
        prompts = list(prompts)
    except TypeError:
        raise ValueError(f"prompts: must be a list of prompts, got "
                         f"{type(prompts).__name__}") from None
    if not prompts:
        raise ValueError("prompts: must not be empty")
    kinds = {isinstance(p, str) for p in prompts}
    if len(kinds) > 1:
        raise ValueError("prompts: mixes text and token ids (chat formatting would apply to "
                         "some prompts only); pass all text or all token ids")
    limit = pair.context_window
    out = []
    for i, prompt in enumerate(prompts):
        try:
            ids, text = encode_for_pair(pair, prompt, chat, template)
        except ValueError as exc:
            msg = str(exc)
            rest = msg.split(":", 1)[1] if msg.startswith("prompt:") else " " + msg
            raise ValueError(f"prompts: prompt {i}:{rest}") from None
        if limit is not None:
            if ids.size >= limit:
                raise ValueError(f"prompts: prompt {i} has {ids.size} tokens, more than the "
                                 f"target's context window of {limit}")
            if ids.size + int(L) + 1 > limit:
                raise ValueError(f"L: prompt {i}'s {ids.size} tokens + L = {L} + 1 exceed the "
                                 f"target's context window of {limit}")
            if ids.size + max_new_tokens + int(L) + 1 > limit:
                raise ValueError(f"max_new_tokens: prompt {i}'s {ids.size} tokens + "
                                 f"{max_new_tokens} new tokens + L + 1 exceed the target's "
                                 f"context window of {limit}")
        out.append((ids, text))
    return out


def generate_batch(pair, prompts, decoder="mpfr", *, L=4, B=1, key=None, window=DEFAULT_WINDOW,
                   max_new_tokens=128, seed=0, chat=True, template="default", draft=None,
                   stop_at_eos=True, progress=False, log=None, prefix_cache=None,
                   **options) -> GenerationBatch:
    """Generate from many prompts at once, one batched forward per step (module docstring).

    Each prompt's run is :func:`specbound.llm.generate`'s (the simulator's decision logic on
    a KV-cached :class:`~specbound.llm.PairBackend`); only the forwards are shared.

    Parameters
    ----------
    pair : ModelPair
    prompts : list of str or list of sequences of int
        Non-empty list; all text (chat-formatted when ``chat``) or all token ids.
    decoder, L, B, key, window, max_new_tokens, template, draft, stop_at_eos
        As :func:`~specbound.llm.generate` (one value for every prompt; ``key`` is the one
        watermark key of the batch).  ``decoder="lossy:<rule>"`` (a rule of
        :data:`specbound.theory.RULES`) runs :func:`~specbound.llm.generate_lossy`'s rows
        (``B = 1``, ``key=None``, the rule's parameters in ``**options``).
    seed : int, SeedSequence, Generator, None or list, default 0
        A list gives one seed per prompt (prompt ``i`` then emits the tokens of
        ``generate(pair, prompts[i], ..., seed=seed[i])``, whatever the kind of ``seed[i]``;
        nothing is drawn from a Generator before its row runs); otherwise prompt ``i`` gets
        the ``i``-th child of ``SeedSequence(seed).spawn(len(prompts))`` without advancing a
        SeedSequence (None is seed 0; :func:`specbound._validation.split_seeds`).
    chat : bool, default True
        One flag for the whole batch.
    progress : bool, default False
        A tqdm bar over the generated tokens of all prompts.
    log : object with ``record(prompt_id, context_tokens, p, qs)``, optional
        As in :func:`~specbound.llm.generate`, with ``prompt_id`` the prompt's index.
    prefix_cache : PrefixCache, optional
        As in :func:`~specbound.llm.generate` (a prefill computed in this batch is stored).
    share_forwards : bool, default False (in ``**options``)
        As in :func:`~specbound.llm.generate`: for a ``temperature:T`` draft, one batched
        forward per draft depth gives both laws and the verification forwards only the
        leaves (``tree`` does not apply); counted as target forwards.
    **options
        Further options of :func:`specbound.sim.speculative_decode` (or the lossy rule's
        parameters).

    Returns
    -------
    GenerationBatch

    Raises
    ------
    ValueError
        An empty ``prompts`` list, an empty prompt or one beyond the target's context window
        (``prompts``, with its index), text mixed with token ids (``prompts``), a non-bool
        ``chat``, ``batch_verify=False`` (not batched), ``share_forwards=True`` with a draft
        that is not the target at another temperature, and the errors of
        :func:`~specbound.llm.generate`; raised before any forward, nothing is decoded.
    """
    L = as_int(L, "L", min_value=1)
    B = as_int(B, "B", min_value=1)
    rule = None
    if isinstance(decoder, str) and decoder.startswith("lossy:"):
        from specbound.sim.lossy import LOSSY_RULES

        rule = as_choice(decoder[len("lossy:"):], "decoder", LOSSY_RULES)
        decoder = f"lossy:{rule}"
        if B != 1:
            raise ValueError(f"B: the lossy rules verify one draft (B = 1), got {B}")
        if key is not None:
            raise ValueError("key: the lossy rules are unwatermarked; pass key=None")
    else:
        decoder = as_choice(decoder, "decoder", DECODERS)
    max_new_tokens = as_int(max_new_tokens, "max_new_tokens", min_value=0,
                            max_value=MAX_NEW_TOKENS)
    if isinstance(chat, list | tuple | np.ndarray):
        raise ValueError("chat: one flag for the whole batch (prompts cannot mix chat and "
                         "plain formatting)")
    chat = as_bool(chat, "chat")
    stop_at_eos = as_bool(stop_at_eos, "stop_at_eos")
    progress = as_bool(progress, "progress")
    for name in ("backend", "prompt_id"):
        if name in options:
            raise ValueError(f"{name}: generate_batch sets it per prompt")
    tree = as_bool(options.pop("tree", False), "tree")
    share = as_bool(options.pop("share_forwards", False), "share_forwards")
    if "batch_verify" in options:
        if not as_bool(options.pop("batch_verify"), "batch_verify"):
            raise ValueError("batch_verify: False (one forward per path) is not batched "
                             "across prompts")
    if rule is None:
        unknown = sorted(set(options) - decode_options())
        if unknown:
            raise ValueError(f"{unknown[0]}: not an option of generate_batch (unknown: "
                             f"{unknown}; decoder options: {sorted(decode_options())})")
    if not (hasattr(pair, "target_logprobs") and hasattr(pair, "_forward")):
        raise ValueError(f"pair: must be a ModelPair (specbound.llm.load_pair), got "
                         f"{type(pair).__name__}")
    if log is not None and not callable(getattr(log, "record", None)):
        raise ValueError("log: must have a method record(prompt_id, context_tokens, p, qs)")
    if prefix_cache is not None and not isinstance(prefix_cache, PrefixCache):
        raise ValueError(f"prefix_cache: must be a PrefixCache or None, got "
                         f"{type(prefix_cache).__name__}")
    if draft is not None:
        pair = pair.with_draft(draft)
    if share:
        check_shared(pair)
    encoded = _encode_all(pair, prompts, chat, template, max_new_tokens, L)
    n = len(encoded)
    seeds = split_seeds(seed, n)
    # validate the decoder options once, on the first prompt, without any forward (the
    # lossy rules' parameters are validated in every context, as in generate_lossy)
    if rule is None:
        _check_options(pair, encoded[0][0], decoder, L, B, key, window, max_new_tokens,
                       options)

    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=max_new_tokens * n, desc=f"generate_batch ({decoder}, {n} prompts)",
                   unit="tok")
    sched = _Scheduler(pair)
    stops = stop_token_ids(pair, stop_at_eos)
    target_lm, draft_lm = as_protocol_models(pair)
    rows, backends, bodies = [], [], []
    for i, (ids, _) in enumerate(encoded):
        row = _Row(i)
        backend = _RowBackend(pair, row, sched, tree=tree, log=log, prompt_id=i,
                              stop_tokens=stops, progress=bar, prefix_cache=prefix_cache,
                              share_forwards=share)

        def body(ids=ids, backend=backend, s=seeds[i]):
            if rule is not None:
                return lossy_decode(target_lm, draft_lm, ids, rule, L=L,
                                    max_new_tokens=max_new_tokens, seed=s, backend=backend,
                                    **options)
            return speculative_decode(target_lm, draft_lm, ids, decoder, L=L, B=B, key=key,
                                      max_new_tokens=max_new_tokens, seed=s, window=window,
                                      backend=backend, **options)

        rows.append(row)
        backends.append(backend)
        bodies.append(body)
    t0 = time.perf_counter()
    try:
        sched.run(rows, bodies, t0)
    finally:
        if bar is not None:
            bar.close()
    total = time.perf_counter() - t0
    results = tuple(
        generation_result(pair, row.result, backend, text, row.finished_at)
        for row, backend, (_, text) in zip(rows, backends, encoded, strict=True))
    return GenerationBatch(decoder=decoder, L=L, B=B, rows=results, total_seconds=total,
                           target_seconds=sched.seconds["target"],
                           draft_seconds=sched.seconds["draft"],
                           n_target_forwards=sched.forwards["target"],
                           n_draft_forwards=sched.forwards["draft"], max_rows=sched.max_rows)


class _NoForward(Exception):
    pass


class _CheckBackend:
    """A backend that stops the decoder at its first call: options are validated by then."""

    finished = False

    def reset(self, prompt):
        raise _NoForward

    def draft_step(self, paths):  # pragma: no cover - never reached
        raise _NoForward

    def verify(self, paths):  # pragma: no cover - never reached
        raise _NoForward

    def commit(self, tokens):  # pragma: no cover - never reached
        raise _NoForward


def _check_options(pair, ids, decoder, L, B, key, window, max_new_tokens, options):
    target_lm, draft_lm = as_protocol_models(pair)
    try:
        speculative_decode(target_lm, draft_lm, ids, decoder, L=L, B=B, key=key,
                           max_new_tokens=max_new_tokens, seed=0, window=window,
                           backend=_CheckBackend(), **options)
    except _NoForward:
        pass
