"""The forward scheduler of the batch path (private): rows, batched forwards, batch caches.

Every run of :func:`specbound.llm.generate`, :func:`~specbound.llm.generate_lossy` and
:func:`~specbound.llm.generate_batch` is a set of *rows* (one per prompt), each running the
simulator's decision logic on its own backend; every forward a row needs is a
:class:`ForwardRequest` posted to the :class:`Scheduler`, which runs the posted requests of
the live rows as one batched forward per model (:func:`batched_forward`) over a persistent
batch cache (:class:`Store`).  How ragged rows share a forward is described in
:mod:`specbound.llm.batch`.  One row runs in the caller's thread and its requests are
forwarded as they are posted (a forward of one request is the pair's own forward: the
one-prompt case); several rows run as threads that take turns.
"""

from __future__ import annotations

import functools
import threading
import time
from dataclasses import dataclass

import numpy as np

from specbound.llm._deps import require_llm_extra
from specbound.llm.models import NextTokenLogprobs

torch = require_llm_extra()

__all__ = ["ForwardRequest", "Row", "Scheduler", "Store", "batched_forward"]


@dataclass(frozen=True, eq=False)
class ForwardRequest:
    """One forward a row asks for.

    Attributes
    ----------
    model : {"target", "draft", "shared"}
        The forward's model (``"shared"``: the target's forward that also gives the
        ``temperature:T`` draft's law, ``share_forwards``).
    ids : (rows, n) long tensor
        The new tokens, one row per sequence of the request (a multi-draft block's paths).
    cache : transformers cache or None
        The request's key-value cache (``rows`` sequences of one length); None: a prefill.
    keep : int or None
        The trailing positions whose distributions are wanted (None: all ``n``).
    mask, positions : tensor or None
        A token tree's 4-D attention mask and position ids (:mod:`specbound.llm.tree`).
    """

    model: str
    ids: object
    cache: object
    keep: int | None
    mask: object = None
    positions: object = None

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


@functools.cache
def _ragged_layer_class():
    """A ``DynamicLayer`` over rows of a persistent buffer, each row at its own length (the
    class is made once, on first use: transformers is imported then).

    Row ``b`` holds its cache in columns ``[0, c_b)`` of its slot; ``update`` writes the
    step's new keys of row ``b`` at columns ``[c_b, c_b + n)`` in place (transformers'
    ``DynamicLayer.update`` would concatenate, copying the whole batch cache in every layer)
    and returns the buffer's first ``C + n`` columns (``C = max c_b``); the attention mask
    hides every column a row does not own.
    """
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

    return RaggedLayer


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
        if q.mask is not None:
            full[r0:r0 + r, 0, :n, :c + n] = q.mask[:, 0].to(dtype)
    return full


class Store:
    """The persistent batch cache of one model: per layer a (rows, ..., capacity, dim)
    key and value buffer, and which row of the batch (and how many sequences) owns each
    slot.  Rows keep their slot between steps; see :func:`batched_forward`."""

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


def _forward_alone(pair, q: ForwardRequest) -> NextTokenLogprobs:
    """The pair's own forward of one request (a prefill, or a step of a single row)."""
    return pair.forward_logprobs(q.model, q.ids, attention_mask=q.mask,
                                 position_ids=q.positions, cache=q.cache, use_cache=True,
                                 num_positions=q.keep)


def batched_forward(pair, requests, stores=None, owners=None):
    """One forward over several rows' requests (of one model); per-request NextTokenLogprobs.

    ``requests``: :class:`ForwardRequest` of one ``model``, each with its own cache length.
    ``stores`` (a dict, one :class:`Store` per model) and
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
    if owners is None:
        owners = list(range(len(requests)))
    alone = [i for i, q in enumerate(requests) if q.cache is None or len(requests) == 1]
    if alone:
        out = [None] * len(requests)
        for i in alone:
            out[i] = _forward_alone(pair, requests[i])
        rest = [i for i in range(len(requests)) if out[i] is None]
        n = len(alone)
        if rest:
            outs, m = batched_forward(pair, [requests[i] for i in rest], stores,
                                      [owners[i] for i in rest])
            n += m
            for i, o in zip(rest, outs, strict=True):
                out[i] = o
        return out, n
    which = requests[0].model
    if any(q.model != which for q in requests):
        raise ValueError("requests: one batched forward serves one model")
    dev = pair.device
    rows = [int(q.ids.shape[0]) for q in requests]
    ns = [int(q.ids.shape[1]) for q in requests]
    cs = [int(q.cache.get_seq_length()) for q in requests]
    ks = [int(q.keep) if q.keep is not None else int(q.ids.shape[1]) for q in requests]
    R, N, C = sum(rows), max(ns), max(cs)
    T = C + N
    starts = np.concatenate([[0], np.cumsum(rows)]).astype(int)
    ids_b = torch.zeros((R, N), dtype=torch.long, device=dev)
    pos = torch.zeros((R, N), dtype=torch.long, device=dev)
    ar = torch.arange(N, device=dev)
    for q, r0, r, n, c in zip(requests, starts, rows, ns, cs, strict=False):
        ids = q.ids
        ids_b[r0:r0 + r, :n] = ids
        ids_b[r0:r0 + r, n:] = ids[:, -1:]  # any valid token; masked out
        pos[r0:r0 + r] = ar + c
        if q.positions is not None:  # a token tree's own positions (its depths), then pads
            pos[r0:r0 + r, :n] = q.positions
    per_req = [_cache_layers(q.cache) for q in requests]
    model = pair.target if which == "target" else pair.draft
    params = next(iter(model.parameters()), None)
    mdtype = (params.dtype if params is not None and params.dtype.is_floating_point
              else torch.float32)
    mask = _batch_mask(requests, starts, rows, ns, cs, N, T, mdtype, dev)
    # the batch cache: the store of the previous step when the same rows come back in the
    # same order with room for this step's tokens, else a new one
    layout = [(o, r) for o, r in zip(owners, rows, strict=True)]  # slot owners, in order
    store_name = _model_of(which)
    store = stores.get(store_name) if stores is not None else None
    in_place = [False] * len(requests)
    if store is not None and store.owners == layout and T <= store.capacity and len(
            per_req[0]) == len(store.layers):
        in_place = [store.holds(q.cache, r0, r)
                    for q, r0, r in zip(requests, starts, rows, strict=False)]
        if any(not ok and store.shares(q.cache)
               for ok, q in zip(in_place, requests, strict=True)):
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
        store = Store(layers, layout, capacity)
        if stores is not None:
            stores[store_name] = store
    for li, (kb, vb) in enumerate(store.layers):
        for p, ok, r0, r, c in zip(per_req, in_place, starts, rows, cs, strict=False):
            if not ok and c > 0:
                kb[r0:r0 + r, ..., :c, :] = p[li][0]
                vb[r0:r0 + r, ..., :c, :] = p[li][1]
    per_req = None
    batch = _ragged_cache([(kb[:R], vb[:R]) for kb, vb in store.layers], C,
                          list(np.repeat(cs, rows)), N)
    keep = max(N - n + k for n, k in zip(ns, ks, strict=True))
    out = pair.forward_logprobs(which, ids_b, attention_mask=mask, position_ids=pos,
                                cache=batch, use_cache=True, num_positions=keep)
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


class Row:
    """One prompt of a run: its index (its slot owner), the request it waits on, and its
    result (``result``, ``error``, ``finished_at``: seconds from the run's start)."""

    def __init__(self, index: int):
        self.index = index
        self.go = threading.Event()
        self.request: ForwardRequest | None = None
        self.response = None
        self.result = None
        self.error = None
        self.done = False
        self.finished_at = 0.0


class Scheduler:
    """Runs the rows and their posted forwards as batched forwards (module docstring).

    Attributes
    ----------
    seconds, forwards : dict
        Per model (``"target"``, ``"draft"``; a shared forward counts as the target's): the
        wall-clock seconds inside the forwards (building the batch inputs and caches
        included) and the number of model forwards made.
    max_rows : int
        The most sequences served in one forward.
    """

    def __init__(self, pair):
        self.pair = pair
        self.back = threading.Event()
        self.aborted = False
        self.inline = False
        self.seconds = {"target": 0.0, "draft": 0.0}
        self.forwards = {"target": 0, "draft": 0}
        self.max_rows = 0
        self.stores: dict = {}  # the persistent batch cache of each model (Store)
        self.rows: list = []

    def live_rows(self) -> int:
        """The rows of the run that have not finished (at least 1).  Rows take turns in a
        fixed order, so the count a row reads is deterministic."""
        return max(sum(not r.done for r in self.rows), 1)

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
        store_name = _model_of(which)
        store = self.stores.get(store_name)
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
                reqs.append(group[in_group[o]].request)
            elif row is None:  # a row that left the batch: its slot rides along, unread,
                dead += 1      # until a quarter of the slots are such (then a rebuild)
                if dead > len(owners) // 4:
                    return None
                view = _make_cache([(kb[r0:r0 + nrows, ..., :1, :], vb[r0:r0 + nrows, ..., :1, :])
                                    for kb, vb in store.layers])
                reqs.append(ForwardRequest(which, torch.zeros(
                    (nrows, 1), dtype=torch.long, device=store.layers[0][0].device), view, 1))
            elif row.request is None:
                return None
            else:
                q = row.request
                if (_model_of(q.model) != store_name or q.cache is None
                        or int(q.ids.shape[0]) != nrows or not store.holds(q.cache, r0, nrows)):
                    return None
                reqs.append(ForwardRequest(which, q.ids[:, -1:], q.cache, 1))
            r0 += nrows
        return reqs, owners, picked

    def _forward(self, which, group, live):
        """The posted requests of ``group`` (rows waiting on model ``which``) as one batched
        forward (with ghosts when they keep the batch cache); each row gets its output and
        its share of the forward's seconds as its ``response``."""
        reqs = [r.request for r in group]
        tf = time.perf_counter()
        full = self._with_ghosts(which, group, live)
        if full is None:
            outs, n_forwards = batched_forward(self.pair, reqs, self.stores,
                                               [r.index for r in group])
        else:
            all_reqs, all_owners, picked = full
            outs, n_forwards = batched_forward(self.pair, all_reqs, self.stores, all_owners)
            outs = [outs[j] for j in picked]
        secs = time.perf_counter() - tf
        counted = _model_of(which)
        self.seconds[counted] += secs
        self.forwards[counted] += n_forwards
        self.max_rows = max(self.max_rows, sum(int(q.ids.shape[0]) for q in reqs))
        for r, o in zip(group, outs, strict=True):
            r.request = None
            r.response = (o, secs / len(group))

    # called in a row's thread (in the caller's thread when inline)
    def post(self, row: Row, request: ForwardRequest):
        """Wait for the forward of ``request``; ``(NextTokenLogprobs, seconds)``, the seconds
        being this row's share of the batched forward."""
        row.request = request
        if self.inline:  # one row: its forward now
            self._forward(request.model, [row], [row])
        else:
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
        """Run ``bodies[i]()`` as row ``rows[i]`` (its result in ``rows[i].result``); one row
        runs in this thread, several as threads that take turns between batched forwards."""
        self.rows = list(rows)
        if len(rows) == 1:
            self.inline = True
            row = rows[0]
            try:
                row.result = bodies[0]()
            finally:
                row.finished_at = time.perf_counter() - t0
                row.done = True
            return
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
                    groups.setdefault(row.request.model, []).append(row)
                # the larger group runs (the target on a tie); the other rows keep their
                # request for a later step, which brings rows that drifted apart (a prompt
                # without a target prefill, a shorter last block) back into one forward
                which = max(groups, key=lambda w: (len(groups[w]), w != "draft", w))
                self._forward(which, groups[which], live)
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
