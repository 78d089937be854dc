r"""Batched decoding across prompts: one model forward per step for every live prompt.

:func:`generate_batch` decodes many prompts together, through the one driver of real-model
runs (:func:`specbound.llm.generation.decode_requests`, of which
:func:`~specbound.llm.generate` is the one-prompt case; the scheduler, the batched forward
and the batch cache are :mod:`specbound.llm._scheduler`'s).  Each prompt (a *row*) runs the
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

Prompt-lookup drafts (``ngram``): a row's drafted block widens the step's shared forward for
every live row (all are padded to the widest block), so by default the acceptance gate
prices a block at that batched forward (``batch_gate``; :func:`specbound.llm.ngram.
best_length` with the number of live rows): a row drafts only where its expected gain pays
for widening the whole batch, which on one CPU core and a wide batch is almost never, and
its blocks are ``ar`` steps.

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

import inspect
import time
from dataclasses import dataclass, field

import numpy as np

from specbound._validation import INT64_MAX, as_bool, as_choice, as_int, split_seeds
from specbound.llm._deps import require_llm_extra
from specbound.llm.generation import (
    DEFAULT_WINDOW,
    DecodeRequest,
    GenerationResult,
    PrefixCache,
    as_protocol_models,
    check_shared,
    decode_options,
    decode_requests,
    decoder_call,
    encode_for_pair,
    stop_token_ids,
)
from specbound.sim.decode import (
    DECODERS,
    MAX_NEW_TOKENS,
    REPEATS,
    speculative_decode,
    validate_decode_args,
    validate_decode_options,
    validate_proposal,
)

require_llm_extra()

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
            if msg.startswith(("template:", "chat:")):
                raise  # an argument of the call, not of this prompt
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
    batch_gate : bool, default True (in ``**options``)
        For an ``ngram`` draft with its acceptance gate: price a block at the batched
        forward it widens (every live row's forward padded to the widest block;
        :func:`specbound.llm.ngram.best_length` with the number of live rows), so a row
        drafts only where the batch's expected gain clears the batched break-even.  A
        row's block lengths then depend on how many rows are live, so its tokens equal
        :func:`~specbound.llm.generate`'s only for keyed decoders (drafter invariance) and
        ungated drafts; False: the one-sequence gate of ``generate`` (each row emits
        ``generate``'s tokens).  Either way every row's law is the target's (the block
        lengths are fixed before a block draws its randomness).
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
    batch_gate = as_bool(options.pop("batch_gate", True), "batch_gate")
    if "batch_verify" in options:
        if not as_bool(options.pop("batch_verify"), "batch_verify"):
            raise ValueError("batch_verify: False (one forward per path) is not batched "
                             "across prompts")
    if rule is None:
        unknown = sorted(set(options) - decode_options())
        if unknown:
            raise ValueError(f"{unknown[0]}: not an option of generate_batch (unknown: "
                             f"{unknown}; decoder options: {sorted(decode_options())})")
    if not (hasattr(pair, "target_logprobs") and hasattr(pair, "forward_logprobs")):
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
    seeds = split_seeds(seed, len(encoded))
    # the decoder's arguments and options checked once, before any forward (the lossy
    # rules' parameters are checked in every context, as in generate_lossy)
    if rule is None:
        _check_options(pair, encoded[0][0], decoder, L, B, key, window, max_new_tokens,
                       options)
    decode = decoder_call(pair, decoder, L=L, B=B, key=key, window=window,
                          max_new_tokens=max_new_tokens, options=options)
    requests = [DecodeRequest(ids, text, s, i)
                for i, ((ids, text), s) in enumerate(zip(encoded, seeds, strict=True))]
    t0 = time.perf_counter()
    results, sched = decode_requests(
        pair, requests, decode, desc=f"generate_batch ({decoder}, {len(requests)} prompts)",
        max_new_tokens=max_new_tokens, progress=progress, tree=tree, log=log,
        stop_tokens=stop_token_ids(pair, stop_at_eos), prefix_cache=prefix_cache,
        share_forwards=share, batch_gate=batch_gate)
    total = time.perf_counter() - t0
    return GenerationBatch(decoder=decoder, L=L, B=B, rows=results, total_seconds=total,
                           target_seconds=sched.seconds["target"],
                           draft_seconds=sched.seconds["draft"],
                           n_target_forwards=sched.forwards["target"],
                           n_draft_forwards=sched.forwards["draft"], max_rows=sched.max_rows)


def _check_options(pair, ids, decoder, L, B, key, window, max_new_tokens, options):
    """The decoder's arguments and options as :func:`specbound.sim.speculative_decode`
    checks them (ValueError naming the argument): its argument check and the decoder
    registry's option table (:func:`specbound.sim.decode.validate_decode_options`, the
    options of each :class:`~specbound.sim.decoders.DecoderSpec`)."""
    target_lm, draft_lm = as_protocol_models(pair)
    validate_decode_args(target_lm, draft_lm, ids, decoder, L, B, key, max_new_tokens, window)
    defaults = {n: p.default
                for n, p in inspect.signature(speculative_decode).parameters.items()}
    chosen = {n: options.get(n, defaults[n]) for n in ("reweight", "unkeyed", "residual")}
    validate_decode_options(decoder, **chosen)
    validate_proposal(decoder, options.get("proposal", defaults["proposal"]))
    as_choice(options.get("repeats", defaults["repeats"]), "repeats", REPEATS)
    if options.get("max_blocks") is not None:
        as_int(options["max_blocks"], "max_blocks", min_value=1, max_value=INT64_MAX)
