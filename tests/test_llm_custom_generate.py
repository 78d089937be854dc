"""specbound.llm.custom_generate: the decoders from transformers' ``model.generate``.

The claim tested: ``model.generate(ids, custom_generate=custom_generate, assistant_model=d,
decoder=..., key=..., ...)`` returns the tokens of ``specbound.llm.generate`` on the pair
(model, d) with the same key, seed, prompt and processing, for every decoder, and
``specbound.llm.detect`` scores them alike.  Three kinds of model:

- the synthetic torch module of ``test_llm_generate`` (a SyntheticLM whose cache holds the
  token ids): ``custom_generate`` called as transformers calls it (it has no ``generate``);
- a tiny randomly initialised ``LlamaForCausalLM`` (2 layers, 32 tokens): the real
  ``generate`` path (preparation, warpers from ``do_sample``/``temperature``/``top_k``/
  ``top_p``, ``assistant_model`` through ``generate``, ``return_dict_in_generate``);
- the embedded SmolLM2-135M-Instruct once (session fixture ``llm_pair``).

All comparisons are exact (deterministic keyed and seeded randomness, same forwards).
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM  # noqa: E402
from transformers.generation.logits_process import (  # noqa: E402
    LogitsProcessorList,
    RepetitionPenaltyLogitsProcessor,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)
from transformers.generation.stopping_criteria import (  # noqa: E402
    MaxLengthCriteria,
    MaxTimeCriteria,
    StoppingCriteriaList,
)

from specbound import llm, sim  # noqa: E402
from specbound.llm import generation as G  # noqa: E402
from specbound.llm._loading import LoadInfo  # noqa: E402
from specbound.llm.drafts import make_draft  # noqa: E402
from specbound.llm.models import LogitsProcessing, ModelPair  # noqa: E402
from specbound.sim.decode import MULTI_DRAFT_DECODERS  # noqa: E402
from tests.test_llm_generate import PROMPT, _same, _synthetic_pair  # noqa: E402


def _B(decoder):
    return 3 if decoder in MULTI_DRAFT_DECODERS else 1


# ----------------------------------------------------------------------------- synthetic


@pytest.fixture(scope="module")
def synth():
    torch.set_num_threads(1)
    target = sim.SyntheticLM(12, context_length=3, seed=11)
    draft = sim.SyntheticLM(12, context_length=2, seed=12, temperature=1.3)
    return _synthetic_pair(target, draft)


def _call(pair, processors=(), max_new_tokens=12, **kw):
    """custom_generate called the way transformers' generate calls a callable."""
    ids = torch.as_tensor(PROMPT)[None, :]
    config = GenerationConfig(max_new_tokens=max_new_tokens)
    stopping = StoppingCriteriaList([MaxLengthCriteria(ids.shape[1] + max_new_tokens)])
    return llm.custom_generate(pair.target, ids, logits_processor=LogitsProcessorList(
        list(processors)), stopping_criteria=stopping, generation_config=config, **kw)


@pytest.mark.parametrize("decoder", sim.DECODERS)
def test_same_tokens_as_generate_on_the_synthetic_module(synth, decoder):
    kw = dict(L=3, B=_B(decoder), key=2026, seed=5, window=2)
    out = _call(synth, draft=synth.draft, decoder=decoder, **kw)
    ref = G.generate(synth, PROMPT, decoder, max_new_tokens=12, **kw)
    assert out.dtype == torch.long and out.shape == (1, ref.tokens.size)
    np.testing.assert_array_equal(out[0].numpy(), ref.tokens)


def test_warpers_become_the_pairs_processing_on_the_synthetic_module(synth):
    """transformers' temperature / top-k / top-p warpers give the same run as a pair with
    that LogitsProcessing (and differ from the unprocessed run)."""
    kw = dict(L=3, B=3, key=9, seed=1)
    warpers = [TemperatureLogitsWarper(0.7), TopKLogitsWarper(6), TopPLogitsWarper(0.9)]
    res = _call(synth, warpers, draft=synth.draft, decoder="mpfr", **kw)
    processed = synth.with_processing(temperature=0.7, top_k=6, top_p=0.9)
    ref = G.generate(processed, PROMPT, "mpfr", max_new_tokens=12, **kw)
    np.testing.assert_array_equal(res[0].numpy(), ref.tokens)
    plain = G.generate(synth, PROMPT, "mpfr", max_new_tokens=12, **kw)
    assert not np.array_equal(plain.tokens, ref.tokens)


def test_options_of_speculative_decode_pass_through(synth):
    kw = dict(L=2, key=3, seed=2, window=1, repeats="mask", residual="keyed")
    out = _call(synth, draft=synth.draft, decoder="mse_pseudo", max_new_tokens=20, **kw)
    ref = G.generate(synth, PROMPT, "mse_pseudo", max_new_tokens=20, **kw)
    np.testing.assert_array_equal(out[0].numpy(), ref.tokens)
    out = _call(synth, draft=synth.draft, decoder="vsps", max_new_tokens=20, max_blocks=2)
    ref = G.generate(synth, PROMPT, "vsps", max_new_tokens=20, max_blocks=2)
    np.testing.assert_array_equal(out[0].numpy(), ref.tokens)
    assert ref.emitted_per_block.size == 2


def test_bad_input_names_the_argument_on_the_synthetic_module(synth):
    cases = [
        (dict(decoder="nope"), "decoder"),
        (dict(decoder="mpfr", B=3), "assistant_model"),
        (dict(decoder="pfr"), "assistant_model"),
        (dict(decoder="vsps", B=2, draft=synth.draft), "B"),
        (dict(decoder="pfr", draft=synth.draft), "key"),
        (dict(decoder="mpfr", key=1, L=0, draft=synth.draft), "L"),
        (dict(decoder="ar", draft=3.5), "draft"),
        (dict(decoder="ar", max_new_tokens=300), "max_new_tokens"),
        (dict(decoder="ar", stop_at_eos="yes"), "stop_at_eos"),
    ]
    for kw, name in cases:
        with pytest.raises(ValueError, match=f"^{name}:"):
            _call(synth, **kw)
    with pytest.raises(ValueError, match="^repetition_penalty:"):
        _call(synth, [RepetitionPenaltyLogitsProcessor(1.2)], decoder="ar")
    with pytest.raises(ValueError, match="^logits_processor:"):
        _call(synth, [TopKLogitsWarper(5), TemperatureLogitsWarper(0.5)], decoder="ar")
    ids = torch.as_tensor(PROMPT)[None, :]
    base = dict(logits_processor=LogitsProcessorList(), stopping_criteria=None,
                generation_config=GenerationConfig(max_new_tokens=4), decoder="ar")
    with pytest.raises(ValueError, match="^input_ids:"):
        llm.custom_generate(synth.target, ids.repeat(2, 1), **base)
    with pytest.raises(ValueError, match="^attention_mask:"):
        llm.custom_generate(synth.target, ids, attention_mask=torch.tensor([[0, 1, 1, 1, 1]]),
                            **base)
    with pytest.raises(ValueError, match="^max_time:"):
        llm.custom_generate(synth.target, ids, **(base | dict(
            stopping_criteria=StoppingCriteriaList([MaxTimeCriteria(10.0)]))))
    with pytest.raises(ValueError, match="^generation_config:"):
        llm.custom_generate(synth.target, ids, **(base | dict(generation_config=None)))


# ----------------------------------------------------------------------------- tiny llama


@pytest.fixture(scope="module")
def tiny():
    """A 2-layer Llama with random weights (32 tokens; token 1 ends a sequence) and a
    ``temperature:1.5`` draft view of it; the pair of both with the default processing."""
    torch.set_num_threads(1)
    cfg = LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=32,
                      num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2,
                      max_position_embeddings=128, bos_token_id=0, eos_token_id=1)
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg).eval()
    spec, draft, _ = make_draft(model, None, "temperature:1.5", device=torch.device("cpu"),
                                dtype="auto")
    info = LoadInfo("tiny", "tiny", "folder", "", False, 0.0)
    pair = ModelPair(model, draft, None, LogitsProcessing(), spec, device=torch.device("cpu"),
                     load_info={"target": info, "draft": None})
    return pair


TINY_PROMPT = torch.tensor([[0, 5, 9, 3, 7]])


@pytest.mark.parametrize("decoder", sim.DECODERS)
def test_model_generate_with_assistant_model_equals_generate(tiny, decoder):
    """Through transformers' own generate: assistant_model reaches the decoder, the length
    comes from max_new_tokens, the end-of-sequence rule is generate's."""
    kw = dict(L=3, B=_B(decoder), key=77, seed=4)
    extra = {} if decoder in ("ar", "basic_uwm") else {"assistant_model": tiny.draft}
    out = tiny.target.generate(TINY_PROMPT, custom_generate=llm.custom_generate,
                               decoder=decoder, max_new_tokens=16, **extra, **kw)
    ref = G.generate(tiny, TINY_PROMPT[0], decoder, max_new_tokens=16, **kw)
    np.testing.assert_array_equal(out[0].numpy(), ref.tokens)


def test_model_generate_sampling_options_and_result(tiny):
    """do_sample/temperature/top_k/top_p of generate are the pair's processing; the
    returned result is llm.generate's; detect gives the same p-value on all three inputs."""
    kw = dict(L=4, B=3, key="k", seed=8)
    out = tiny.target.generate(TINY_PROMPT, custom_generate=llm.custom_generate,
                               assistant_model=tiny.draft, decoder="mpfr", max_new_tokens=24,
                               do_sample=True, temperature=0.8, top_k=12, top_p=0.95,
                               stop_at_eos=False, return_dict_in_generate=True, **kw)
    assert isinstance(out, llm.CustomGenerateOutput)
    pair = tiny.with_processing(temperature=0.8, top_k=12, top_p=0.95)
    ref = G.generate(pair, TINY_PROMPT[0], "mpfr", max_new_tokens=24, stop_at_eos=False, **kw)
    np.testing.assert_array_equal(out.sequences[0].numpy(), ref.tokens)
    _same(out.result, ref)
    assert out.sequences.shape[1] == TINY_PROMPT.shape[1] + 24
    d_ids = llm.detect(out.sequences[0], key="k", prompt_length=TINY_PROMPT.shape[1])
    d_res = llm.detect(out.result, key="k")
    d_ref = llm.detect(ref, key="k")
    assert d_ids.log_pvalue == d_res.log_pvalue == d_ref.log_pvalue < 0
    # the pair's own generate keywords select the same (unprocessed) law as the default
    out2 = tiny.target.generate(TINY_PROMPT, custom_generate=llm.custom_generate,
                                assistant_model=tiny.draft, decoder="mpfr", max_new_tokens=24,
                                stop_at_eos=False, **tiny.generation_kwargs(), **kw)
    ref2 = G.generate(tiny, TINY_PROMPT[0], "mpfr", max_new_tokens=24, stop_at_eos=False, **kw)
    np.testing.assert_array_equal(out2[0].numpy(), ref2.tokens)


def test_draft_spec_instead_of_assistant_model(tiny):
    kw = dict(L=2, key=5, seed=0, stop_at_eos=False)
    out = tiny.target.generate(TINY_PROMPT, custom_generate=llm.custom_generate,
                               draft="early_exit:1", decoder="pfr", max_new_tokens=10, **kw)
    ref = G.generate(tiny, TINY_PROMPT[0], "pfr", draft="early_exit:1", max_new_tokens=10,
                     **kw)
    np.testing.assert_array_equal(out[0].numpy(), ref.tokens)


def test_model_generate_bad_input_names_the_argument(tiny):
    def gen(**kw):
        return tiny.target.generate(TINY_PROMPT, custom_generate=llm.custom_generate,
                                    max_new_tokens=4, **kw)

    with pytest.raises(ValueError, match="^draft:"):
        gen(decoder="pfr", key=1, assistant_model=tiny.draft, draft="temperature:2")
    with pytest.raises(ValueError, match="^assistant_model:"):
        gen(decoder="mpfr", B=2, key=1)
    with pytest.raises(ValueError, match="^repetition_penalty:"):
        gen(decoder="ar", repetition_penalty=1.3)
    with pytest.raises(ValueError, match="^num_return_sequences:"):
        gen(decoder="ar", do_sample=True, num_return_sequences=2)
    with pytest.raises(ValueError, match="^eos_token_id:"):
        gen(decoder="ar", eos_token_id=4)
    with pytest.raises(ValueError, match="^output_scores:"):
        gen(decoder="ar", output_scores=True, return_dict_in_generate=True)
    with pytest.raises(ValueError, match="^draft:"):
        gen(decoder="pfr", key=1, draft="bogus:1")
    with pytest.raises(ValueError, match="^draft:"):
        gen(decoder="pfr", key=1, draft="model:embedded")
    with pytest.raises(ValueError, match="^decoder:"):
        gen(decoder="greedy")
    # eos override with stop_at_eos=False is fine
    out = gen(decoder="ar", eos_token_id=4, stop_at_eos=False)
    assert out.shape == (1, TINY_PROMPT.shape[1] + 4)
    # the option the user set is named (transformers may enforce min_new_tokens with a
    # MinLengthLogitsProcessor)
    with pytest.raises(ValueError, match="^min_new_tokens:"):
        gen(decoder="ar", min_new_tokens=2)
    with pytest.raises(ValueError, match="^min_length:"):
        gen(decoder="ar", min_length=7)


def test_a_changed_eos_is_named_before_the_mask_it_implies(tiny):
    """A prompt holding the pad token (a chat prompt's end-of-turn token) and an
    ``eos_token_id`` other than the pad token: transformers masks those tokens; the error
    names ``eos_token_id`` (the user's choice), and with ``stop_at_eos=False`` says why the
    mask has zeros."""
    prompt = torch.tensor([[0, 2, 9, 2, 7]])

    def gen(**kw):
        return tiny.target.generate(prompt, custom_generate=llm.custom_generate,
                                    max_new_tokens=4, decoder="ar", pad_token_id=2, **kw)

    with pytest.raises(ValueError, match="^eos_token_id:"):
        gen(eos_token_id=4)
    with pytest.raises(ValueError, match="^attention_mask: transformers masked the prompt's 2 "
                                         "tokens equal to pad_token_id 2"):
        gen(eos_token_id=4, stop_at_eos=False)
    out = gen(eos_token_id=4, stop_at_eos=False, attention_mask=torch.ones_like(prompt))
    assert out.shape == (1, prompt.shape[1] + 4)


# ----------------------------------------------------------------------------- embedded


def test_embedded_model_generate_equals_llm_generate(llm_pair):
    """The embedded SmolLM2-135M: generate(custom_generate=...) with the pair's draft as
    assistant_model gives llm.generate's tokens and detection (8 tokens, 2 drafts)."""
    ids = llm_pair.encode_prompt("Name a colour.")
    kw = dict(L=3, B=2, key=2026, seed=1)
    out = llm_pair.target.generate(torch.as_tensor(ids)[None, :],
                                   custom_generate=llm.custom_generate,
                                   assistant_model=llm_pair.draft, decoder="mpfr",
                                   max_new_tokens=8,
                                   return_dict_in_generate=True, **llm_pair.generation_kwargs(),
                                   **kw)
    ref = G.generate(llm_pair, ids, "mpfr", max_new_tokens=8, **kw)
    np.testing.assert_array_equal(out.sequences[0].numpy(), ref.tokens)
    assert llm_pair.decode(out.sequences[0, ids.size:]) == ref.text
    assert (llm.detect(out.sequences[0], key=2026, prompt_length=ids.size).log_pvalue
            == llm.detect(ref, key=2026).log_pvalue)
