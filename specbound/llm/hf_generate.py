r"""Every specbound decoder from transformers' own ``model.generate`` call.

:func:`custom_generate` is a decoding method for transformers' ``generate``: pass it as
``custom_generate=`` (transformers 5 accepts a callable there) and ``generate`` does its
usual preparation -- generation config, logits processors, stopping criteria, ``max_length``
-- then hands the prompt to it::

    from specbound.llm import custom_generate, detect, load_pair

    pair = load_pair("embedded", draft="temperature:1.5")
    ids = pair.encode_prompt("Name a colour.")[None, :]          # (1, length) token ids
    out = pair.target.generate(torch.as_tensor(ids), custom_generate=custom_generate,
                               assistant_model=pair.draft, decoder="mpfr", L=4, B=3,
                               key=2026, max_new_tokens=40)
    detect(out[0], key=2026, prompt_length=ids.shape[1])

The decoding is :func:`specbound.llm.generate`'s: the model and the draft become a
:class:`~specbound.llm.ModelPair` (the model as target; ``assistant_model``, a ``draft``
spec such as ``"temperature:1.5"``, or a draft module as draft) and
:func:`~specbound.llm.generate` runs the decoder on it with the KV-cached
:class:`~specbound.llm.PairBackend`, the simulator's decision logic
(:func:`specbound.sim.speculative_decode`; Liu, Wan, Gao & Gündüz 2026, arXiv:2609.21858,
Alg. 1, 3, 4, 9, 10).  There is no second decoding loop: the same key, seed, prompt and
processing give the same tokens as :func:`specbound.llm.generate` (tested), and
:func:`specbound.llm.detect` detects them.

What is taken from ``generate``
-------------------------------
- **Processing**: the logits warpers transformers prepared, i.e. what it would sample with:
  ``TemperatureLogitsWarper``, ``TopKLogitsWarper``, ``TopPLogitsWarper`` (present only with
  ``do_sample=True``) become the pair's :class:`~specbound.llm.LogitsProcessing`, applied to
  the target's and the draft's logits alike.  Without them (``do_sample=False``, the default
  of most checkpoints) the decoders sample the model's unprocessed distribution: specbound's
  decoders always sample (greedy decoding is not one of them).  Any other logits processor
  (repetition penalty, minimum length, bad words, ...) raises a :class:`ValueError`: the
  decoders' guarantees are stated for one processing of every distribution.
  ``pair.generation_kwargs()`` gives the ``generate`` keywords of a pair's processing.
- **Length**: ``max_new_tokens`` (or ``max_length``) from the generation config.
- **Stopping**: the run ends after the block that emits one of the model's end-of-sequence
  tokens (``model.generation_config.eos_token_id``; :func:`~specbound.llm.generate` also
  stops at the tokenizer's, the same token for the embedded model); that block is kept
  whole, so ``sequences`` may hold a few tokens after the end-of-sequence token.
  ``stop_at_eos=False`` generates the full length.  An ``eos_token_id`` given to
  ``generate`` that differs from the model's is refused (:class:`ValueError`).
- **Tokenizer**: none is needed (token ids in, token ids out); transformers 5 does not pass
  ``generate``'s ``tokenizer`` on to a callable either.
- **Draft**: ``assistant_model``.  transformers 5 (checked up to 5.24) does not pass
  ``assistant_model`` on to a callable ``custom_generate``; :func:`custom_generate` reads it
  from the calling ``GenerationMixin.generate`` frame of the same model.  ``draft=`` (a spec
  string of :mod:`specbound.llm.drafts` or a draft module) is the explicit alternative, and
  the only one when the function is called directly.

Not supported (a :class:`ValueError` naming the argument): a batch of more than one prompt
(``input_ids``, ``num_return_sequences``), a padded prompt (``attention_mask``), a prefilled
cache, stopping criteria other than length and end-of-sequence (``stop_strings``,
``max_time``), and the ``output_scores`` / ``output_logits`` / ``output_attentions`` /
``output_hidden_states`` outputs.  transformers' random generator is not used: the unkeyed
randomness comes from ``seed`` (default 0) as in :func:`~specbound.llm.generate`.
"""

from __future__ import annotations

import inspect
import sys
from dataclasses import dataclass

import numpy as np

from specbound._validation import as_bool, as_choice
from specbound.llm._deps import require_llm_extra
from specbound.llm._loading import LoadInfo
from specbound.llm.drafts import DraftSpec, make_draft, parse_draft
from specbound.llm.generation import DEFAULT_WINDOW
from specbound.llm.generation import generate as _generate
from specbound.llm.models import LogitsProcessing, ModelPair
from specbound.sim.decoders import DECODER_SPECS, DECODERS

#: decoders that run without a draft (one keyed or sampled token per step)
_NO_DRAFT = frozenset(n for n, s in DECODER_SPECS.items() if s.block == "token")

torch = require_llm_extra()

__all__ = ["custom_generate", "CustomGenerateOutput"]

# transformers' logits processors that have a generation-config option of their own, to
# name that option in the error
_PROCESSOR_OPTIONS = {
    "RepetitionPenaltyLogitsProcessor": "repetition_penalty",
    "EncoderRepetitionPenaltyLogitsProcessor": "encoder_repetition_penalty",
    "NoRepeatNGramLogitsProcessor": "no_repeat_ngram_size",
    "MinLengthLogitsProcessor": "min_length",
    "MinNewTokensLengthLogitsProcessor": "min_new_tokens",
    "NoBadWordsLogitsProcessor": "bad_words_ids",
    "SequenceBiasLogitsProcessor": "sequence_bias",
    "MinPLogitsWarper": "min_p",
    "TypicalLogitsWarper": "typical_p",
    "EpsilonLogitsWarper": "epsilon_cutoff",
    "EtaLogitsWarper": "eta_cutoff",
    "ForcedBOSTokenLogitsProcessor": "forced_bos_token_id",
    "ForcedEOSTokenLogitsProcessor": "forced_eos_token_id",
    "SuppressTokensLogitsProcessor": "suppress_tokens",
    "SuppressTokensAtBeginLogitsProcessor": "begin_suppress_tokens",
    "ExponentialDecayLengthPenalty": "exponential_decay_length_penalty",
    "PrefixConstrainedLogitsProcessor": "prefix_allowed_tokens_fn",
    "SynthIDTextWatermarkLogitsProcessor": "watermarking_config",
    "WatermarkLogitsProcessor": "watermarking_config",
}
_WARPER_ORDER = ("TemperatureLogitsWarper", "TopKLogitsWarper", "TopPLogitsWarper")
_LENGTH_CRITERIA = ("MaxLengthCriteria", "EosTokenCriteria")
_UNSUPPORTED_OUTPUTS = ("output_scores", "output_logits", "output_attentions",
                        "output_hidden_states")


def _output_class():
    from transformers.generation.utils import GenerateDecoderOnlyOutput

    @dataclass
    class CustomGenerateOutput(GenerateDecoderOnlyOutput):
        """transformers' output of ``generate`` with specbound's result added.

        ``sequences`` is a ``(1, length)`` tensor (prompt and generated tokens); ``result``
        the :class:`~specbound.llm.GenerationResult` of the run (blocks, acceptance,
        pivots, watermark, timings; ``text`` is empty: decode ``sequences`` with your
        tokenizer).
        """

        result: object = None

    CustomGenerateOutput.__module__ = __name__
    CustomGenerateOutput.__qualname__ = "CustomGenerateOutput"
    return CustomGenerateOutput


CustomGenerateOutput = _output_class()


# ----------------------------------------------------------------------------- helpers


def _processing(logits_processor, generation_config=None) -> LogitsProcessing:
    """The pair's processing from transformers' prepared warpers (ValueError otherwise)."""
    temperature, top_k, top_p = 1.0, None, None
    seen = []
    for proc in logits_processor or ():
        name = type(proc).__name__
        if name not in _WARPER_ORDER:
            option = _PROCESSOR_OPTIONS.get(name, "logits_processor")
            if option in ("min_length", "min_new_tokens") and getattr(
                    generation_config, "min_new_tokens", None):
                # transformers may enforce min_new_tokens with a MinLengthLogitsProcessor
                option = "min_new_tokens"
            raise ValueError(
                f"{option}: {name} is not supported by specbound.llm.custom_generate; its "
                "decoders apply one processing (temperature, top_k, top_p) to every target "
                "and draft distribution")
        if seen and _WARPER_ORDER.index(name) <= _WARPER_ORDER.index(seen[-1]):
            raise ValueError(f"logits_processor: {name} after {seen[-1]}; the warpers must "
                             "come in transformers' order (temperature, top-k, top-p)")
        seen.append(name)
        filter_value = getattr(proc, "filter_value", -float("inf"))
        if filter_value != -float("inf"):
            raise ValueError(f"logits_processor: {name} with filter_value={filter_value}; "
                             "only -inf (removed tokens) is supported")
        if name == "TemperatureLogitsWarper":
            temperature = float(proc.temperature)
        elif name == "TopKLogitsWarper":
            top_k = int(proc.top_k)
        else:
            if int(getattr(proc, "min_tokens_to_keep", 1)) != 1:
                raise ValueError("min_tokens_to_keep: only 1 is supported")
            top_p = float(proc.top_p)
    return LogitsProcessing(temperature, top_k, top_p)


def _check_stopping(stopping_criteria) -> None:
    for crit in stopping_criteria or ():
        name = type(crit).__name__
        if name not in _LENGTH_CRITERIA:
            option = {"StopStringCriteria": "stop_strings",
                      "MaxTimeCriteria": "max_time"}.get(name, "stopping_criteria")
            raise ValueError(f"{option}: {name} is not supported by "
                             "specbound.llm.custom_generate (only max_length / "
                             "max_new_tokens and the end-of-sequence token)")


def _eos_set(value) -> set:
    if value is None:
        return set()
    if isinstance(value, torch.Tensor):
        return {int(t) for t in value.flatten().tolist()}
    if isinstance(value, int):
        return {int(value)}
    return {int(t) for t in value}


def _assistant_from_generate(model):
    """``assistant_model`` of the ``GenerationMixin.generate`` call of ``model`` that called us.

    transformers 5 drops ``assistant_model`` before it calls a callable ``custom_generate``;
    the value is still a local of that ``generate`` frame.  Only a frame running
    ``GenerationMixin.generate`` whose ``self`` is ``model`` is read (None otherwise).
    """
    try:
        from transformers.generation.utils import GenerationMixin
    except ImportError:  # pragma: no cover - transformers is part of the llm extra
        return None
    code = inspect.unwrap(GenerationMixin.generate).__code__
    frame = sys._getframe(1)
    for _ in range(8):
        frame = frame.f_back
        if frame is None:
            return None
        if frame.f_code is code and frame.f_locals.get("self") is model:
            return frame.f_locals.get("assistant_model")
    return None


def _device(module):
    dev = getattr(module, "device", None)
    if isinstance(dev, torch.device):
        return dev
    param = next(iter(module.parameters()), None) if hasattr(module, "parameters") else None
    return param.device if param is not None else torch.device("cpu")


def _model_name(module) -> str:
    cfg = getattr(module, "config", None)
    return str(getattr(cfg, "_name_or_path", "") or type(module).__name__)


def _pair(model, draft, processing, decoder, B) -> ModelPair:
    """A :class:`ModelPair` of ``model`` (target) and ``draft`` (module, spec or None)."""
    device = _device(model)
    info = LoadInfo(source="custom_generate", name=_model_name(model), kind="folder",
                    path="", converted=False, seconds=0.0)
    if draft is None:
        if decoder not in _NO_DRAFT:
            many = f" with B={B} drafts" if B > 1 else ""
            raise ValueError(
                f"assistant_model: decoder {decoder!r}{many} needs a draft model: pass "
                "assistant_model=... (or draft='temperature:1.5', a draft spec of "
                "specbound.llm.drafts)")
        # ar and basic_uwm never call the draft; the target stands in for it
        return ModelPair(model, model, None, processing, DraftSpec("model", "none"),
                         device=device, load_info={"target": info, "draft": None})
    if isinstance(draft, str | DraftSpec):
        spec = parse_draft(draft)
        if spec.kind == "model":
            raise ValueError("draft: a 'model:' draft is a separate checkpoint; load it and "
                             "pass it as assistant_model (its tokenizer must be the model's)")
        spec, module, dinfo = make_draft(model, None, spec, device=device, dtype="auto")
        if module is not model:
            module.eval()
        return ModelPair(model, module, None, processing, spec, device=device,
                         load_info={"target": info, "draft": dinfo})
    if not (isinstance(draft, torch.nn.Module) and callable(getattr(draft, "forward", None))):
        raise ValueError(f"draft: must be a draft spec (e.g. 'temperature:1.5') or a causal "
                         f"LM module, got {type(draft).__name__}")
    return ModelPair(model, draft, None, processing,
                     DraftSpec("model", _model_name(draft)), device=device,
                     load_info={"target": info, "draft": None})


# ----------------------------------------------------------------------------- entry point


def custom_generate(model, input_ids, logits_processor=None, stopping_criteria=None,
                    generation_config=None, *, decoder="mpfr", L=4, B=1, key=None,
                    window=DEFAULT_WINDOW, seed=0, draft=None, assistant_model=None,
                    stop_at_eos=True, batch_verify=True, tree=False,
                    progress=False, log=None, prompt_id=0, prefix_cache=None, repeats=None,
                    reweight=None, unkeyed=None, residual=None, max_blocks=None,
                    **model_kwargs):
    """Run a specbound decoder as transformers' ``generate(..., custom_generate=...)``.

    Pass the function itself: ``model.generate(input_ids, custom_generate=custom_generate,
    assistant_model=draft, decoder="pfr", key=42, max_new_tokens=64)``.  transformers
    prepares the generation config, logits processors and stopping criteria and calls
    ``custom_generate(model, input_ids, logits_processor=..., stopping_criteria=...,
    generation_config=..., <the keywords below>, **model_kwargs)``; the keywords below are
    extracted from the ``generate`` call by name.  The decoding is
    :func:`specbound.llm.generate` on the pair (model, draft) (module docstring): the same
    tokens for the same key, seed, prompt and processing.

    Parameters
    ----------
    model : transformers causal LM
        The target (``generate``'s ``self``).
    input_ids : torch.LongTensor of shape (1, length)
        The prompt (one sequence, not padded).
    logits_processor, stopping_criteria, generation_config
        Prepared by ``generate``: the processing (temperature, top-k, top-p warpers), the
        length and the end-of-sequence tokens are read from them.
    decoder : str, default "mpfr"
        One of :data:`specbound.sim.DECODERS` (keyed: ``basic_uwm``, ``pfr``, ``mpfr``,
        ``mws``, ``mse``, ``mse_pseudo``).
    L, B : int
        Lookahead and number of drafts (``B > 1`` for ``mpfr``, ``invariant``,
        ``specinfer``: ``B`` draft sequences from the one draft model).
    key : int, str or bytes
        Watermark key (required by the keyed decoders).
    window : int >= 0 or None, default 4
        Watermark context window (:data:`specbound.llm.DEFAULT_WINDOW`).
    seed : int, SeedSequence or Generator, default 0
        Source of the unkeyed randomness (transformers' random generator is not used).
    assistant_model : causal LM module, optional
        The draft, given to ``generate`` as usual (read from ``generate``'s frame; see the
        module docstring).
    draft : str or causal LM module, optional
        The draft as a spec of :mod:`specbound.llm.drafts` made from the model
        (``"temperature:1.5"``, ``"early_exit:K"``, ``"quantized:BITS"``; a ``"model:ID"``
        checkpoint is loaded by you and passed as ``assistant_model``) or a module; instead
        of ``assistant_model``.  ``ar`` and ``basic_uwm`` need no draft.
    stop_at_eos, batch_verify, tree, progress, log, prompt_id, prefix_cache
        As in :func:`specbound.llm.generate`.
    repeats, reweight, unkeyed, residual, max_blocks
        Options of :func:`specbound.sim.speculative_decode` (None: its default).
    **model_kwargs
        What ``generate`` prepared for its own loops (``attention_mask``, ``position_ids``,
        an empty ``cache``, ``use_cache``, ``logits_to_keep``); checked, not used.

    Returns
    -------
    torch.LongTensor of shape (1, length), or CustomGenerateOutput
        The prompt followed by the generated tokens (``result.tokens`` of
        :func:`specbound.llm.generate`).  With ``return_dict_in_generate=True``: a
        :class:`CustomGenerateOutput` (transformers' ``GenerateDecoderOnlyOutput`` with
        ``sequences`` and ``result``, the :class:`~specbound.llm.GenerationResult`).

    Raises
    ------
    ValueError
        Unknown ``decoder``; a decoder that needs a draft without ``assistant_model`` /
        ``draft``; both given; ``B > 1`` for a single-draft decoder; a batch of several
        prompts (``input_ids``, ``num_return_sequences``); a padded prompt
        (``attention_mask``); a prefilled ``cache``; an unsupported logits processor or
        stopping criterion (named by its ``generate`` option); an unsupported output
        (``output_scores``, ...); an ``eos_token_id`` other than the model's (unless
        ``stop_at_eos=False``); and every error of :func:`specbound.llm.generate`.  Each
        message starts with the argument's name.
    """
    decoder = as_choice(decoder, "decoder", DECODERS)
    if generation_config is None:
        raise ValueError("generation_config: custom_generate is called by transformers' "
                         "generate, which passes the prepared generation config")
    if assistant_model is None:
        assistant_model = _assistant_from_generate(model)
    if assistant_model is not None and draft is not None:
        raise ValueError("draft: give the draft as assistant_model or as draft, not both")
    for name in _UNSUPPORTED_OUTPUTS:
        if getattr(generation_config, name, False):
            raise ValueError(f"{name}: not supported by specbound.llm.custom_generate "
                             "(return_dict_in_generate=True returns the specbound result)")
    n_seq = int(getattr(generation_config, "num_return_sequences", 1) or 1)
    if n_seq != 1:
        raise ValueError(f"num_return_sequences: must be 1, got {n_seq}")
    if int(getattr(generation_config, "num_beams", 1) or 1) != 1:
        raise ValueError("num_beams: beam search is not a specbound decoder; must be 1")
    if not isinstance(input_ids, torch.Tensor) or input_ids.ndim != 2:
        raise ValueError("input_ids: must be a (1, length) tensor of token ids")
    if input_ids.shape[0] != 1:
        raise ValueError(f"input_ids: one prompt at a time (batch size 1), got batch size "
                         f"{input_ids.shape[0]}")
    stop_at_eos = as_bool(stop_at_eos, "stop_at_eos")
    model_eos = _eos_set(getattr(getattr(model, "generation_config", None), "eos_token_id",
                                 None))
    wanted = _eos_set(getattr(generation_config, "eos_token_id", None))
    if stop_at_eos and wanted != model_eos:
        # checked before the mask: transformers masks a prompt's tokens equal to the pad
        # token when the pad token is not the (changed) end-of-sequence token
        raise ValueError(
            f"eos_token_id: custom_generate stops at the model's end-of-sequence tokens "
            f"{sorted(model_eos)} (the rule of specbound.llm.generate), got {sorted(wanted)}; "
            "set model.generation_config.eos_token_id or pass stop_at_eos=False")
    mask = model_kwargs.get("attention_mask")
    if mask is not None and not bool((mask == 1).all()):
        pad = getattr(generation_config, "pad_token_id", None)
        if pad is not None and bool(((mask == 0) == (input_ids == int(pad))).all()):
            raise ValueError(
                f"attention_mask: transformers masked the prompt's {int((mask == 0).sum())} "
                f"tokens equal to pad_token_id {int(pad)} (a pad token that is not the "
                f"end-of-sequence token {sorted(wanted)}); pass "
                "attention_mask=torch.ones_like(input_ids), or set pad_token_id to the "
                "end-of-sequence token")
        raise ValueError("attention_mask: padded prompts are not supported (batch size 1, "
                         "no padding)")
    for cache_name in ("cache", "past_key_values"):
        cache = model_kwargs.get(cache_name)
        if cache is not None and hasattr(cache, "get_seq_length") and int(
                cache.get_seq_length()) > 0:
            raise ValueError(f"{cache_name}: a prefilled cache is not supported (the pair "
                             "builds its own KV caches)")
    processing = _processing(logits_processor, generation_config)
    _check_stopping(stopping_criteria)
    prompt = input_ids[0]
    max_length = getattr(generation_config, "max_length", None)
    max_new = getattr(generation_config, "max_new_tokens", None)
    if max_new is None:
        if max_length is None:
            raise ValueError("max_new_tokens: the generation config sets neither "
                             "max_new_tokens nor max_length")
        max_new = max(int(max_length) - int(prompt.shape[0]), 0)

    n_drafts = int(B) if isinstance(B, int | np.integer) else 1
    pair = _pair(model, draft if draft is not None else assistant_model, processing, decoder,
                 n_drafts)
    options = {name: value for name, value in (
        ("repeats", repeats), ("reweight", reweight), ("unkeyed", unkeyed),
        ("residual", residual), ("max_blocks", max_blocks))
        if value is not None}
    res = _generate(pair, prompt, decoder, L=L, B=B, key=key, window=window,
                    max_new_tokens=max_new, seed=seed, stop_at_eos=stop_at_eos,
                    batch_verify=batch_verify, tree=tree, progress=progress, log=log,
                    prompt_id=prompt_id, prefix_cache=prefix_cache, **options)
    sequences = torch.as_tensor(np.asarray(res.tokens, dtype=np.int64),
                                device=input_ids.device)[None, :]
    if getattr(generation_config, "return_dict_in_generate", False):
        return CustomGenerateOutput(sequences=sequences, result=res)
    return sequences
