"""The real-model boundary: limits, named errors, offline loading, exact draft specs.

Regression tests, each for a failure of an earlier version:

- a temperature so small that ``logits / T`` overflows gave all-NaN distributions and then an
  ``IndexError`` in ``generate``; now the processed distribution is the ``T -> 0`` limit
  (the argmax, ties uniform) and decoding is greedy;
- lone surrogates, devices this machine does not have, unknown ``generate`` options, a
  missing pair or a bad log in ``generate_lossy``, unusable model folders, huge ``L``,
  ``detect(None, key)``: tracebacks or wrongly named errors, now ``ValueError`` naming the
  argument;
- a Hugging Face id that is not cached was retried for about a minute without network, and
  a missing path was taken for a hub id; now both fail at once, without network access;
- ``DraftSpec`` text rounded temperatures to 6 digits and ``acceptance_profile`` merged
  drafts that differ beyond them.

Everything runs on the synthetic pair and the 2-layer Llama of :mod:`tests._llm_synth`
(no weights to load, no network).
"""

from __future__ import annotations

import math
import socket
import threading
import time

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from specbound import llm, sim  # noqa: E402
from specbound.llm import _loading  # noqa: E402
from specbound.llm.drafts import TemperatureHead, divide_logits, parse_draft  # noqa: E402
from specbound.llm.models import LogitsProcessing  # noqa: E402
from tests._llm_synth import (  # noqa: E402
    WORDS,
    save_tiny_model,
    synthetic_pair,
    tiny_tokenizer,
)

torch.set_num_threads(1)

V = len(WORDS)
PROMPT = np.array([3, 1, 4, 1, 5], dtype=np.int64)
TINY_T = (1e-320, 5e-324, 1e-308)


@pytest.fixture(scope="module")
def synth():
    target = sim.SyntheticLM(V, context_length=3, seed=11)
    draft = sim.SyntheticLM(V, context_length=2, seed=12, temperature=1.3)
    return target, draft, synthetic_pair(target, draft, tiny_tokenizer())


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory):
    return save_tiny_model(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(scope="module")
def tiny_pair(tiny_folder):
    return llm.load_pair(tiny_folder, draft="temperature:1.5", device="cpu")


# ----------------------------------------------------------------------------- T -> 0


def _limit(x):
    top = x.max(axis=-1, keepdims=True)
    ties = (x == top).astype(float)
    return ties / ties.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("t", TINY_T)
def test_a_tiny_temperature_gives_the_argmax_limit_not_nan(t):
    # rows: a tie at the top, every logit negative (x / T -> -inf everywhere), all equal,
    # a masked (-inf) logit, float32-like magnitudes
    x = torch.tensor([[1.0, 3.0, 3.0, -2.0], [-5.0, -7.0, -5.0, -9.0], [0.0, 0.0, 0.0, 0.0],
                      [2.0, -math.inf, 1.0, 0.5], [31.5, 31.499998, -40.0, 0.0]],
                     dtype=torch.float64)
    # (a nucleus below the tied mass would keep only some of the tied tokens, in
    # transformers' convention: top-p <= 0.5 is not the plain argmax limit with ties)
    for top_k, top_p in [(None, None), (2, None), (None, 0.9), (3, 0.9)]:
        probs = LogitsProcessing(t, top_k, top_p).logprobs(x).exp().numpy()
        assert np.all(np.isfinite(probs))
        np.testing.assert_array_equal(probs, _limit(x.numpy()))


def test_ordinary_temperatures_are_the_plain_division_bit_for_bit():
    x = torch.randn(3, 50, dtype=torch.float64, generator=torch.Generator().manual_seed(0)) * 9
    for t in (0.5, 0.7, 1.5, 1e-3, 1e-200):
        assert torch.equal(divide_logits(x, t), x / t)
        assert torch.equal(LogitsProcessing(t).logprobs(x), torch.log_softmax(x / t, dim=-1))


@pytest.mark.parametrize("t", TINY_T)
def test_temperature_head_at_a_tiny_temperature(t):
    torch.manual_seed(0)
    head = torch.nn.Linear(4, 7, bias=False)
    h = torch.randn(2, 3, 4)
    with torch.no_grad():
        out = TemperatureHead(head, t)(h)
        assert not torch.isnan(out).any()
        probs = LogitsProcessing(0.8).logprobs(out).exp().numpy()
        np.testing.assert_array_equal(probs, _limit(head(h).double().numpy()))


def _greedy(lm, prompt, n):
    seq = list(prompt)
    for _ in range(n):
        seq.append(int(np.argmax(lm.next_distribution(np.asarray(seq)))))
    return np.asarray(seq)


@pytest.mark.parametrize("decoder", ["ar", "vsps", "mpfr", "specinfer"])
def test_generate_at_a_tiny_temperature_decodes_greedily(synth, decoder):
    target, _, pair = synth
    cold = pair.with_processing(temperature=1e-320)
    B = 2 if decoder in ("mpfr", "specinfer") else 1
    res = llm.generate(cold, PROMPT, decoder, key=3, B=B, L=3, max_new_tokens=12,
                       stop_at_eos=False)
    np.testing.assert_array_equal(res.tokens[:PROMPT.size + 12], _greedy(target, PROMPT, 12))
    lossy = llm.generate_lossy(cold, PROMPT, "lenience", ell=0.5, max_new_tokens=8,
                               stop_at_eos=False)
    np.testing.assert_array_equal(lossy.tokens[:PROMPT.size + 8], _greedy(target, PROMPT, 8))


def test_tiny_temperatures_of_load_pair_and_of_a_draft_spec(tiny_folder):
    pair = llm.load_pair(tiny_folder, draft="temperature:1e-320", device="cpu",
                         temperature=1e-320)
    ids = pair.encode_prompt("hello cat", chat=False)
    for lp in (pair.target_logprobs(ids, num_positions=None),
               pair.draft_logprobs(ids, num_positions=None)):
        probs = lp.numpy()
        assert np.all(np.isfinite(probs)) and np.all(probs.max(axis=-1) == 1.0)
    res = llm.generate(pair, "hello cat", "mpfr", key=5, B=2, max_new_tokens=6)
    assert res.n_generated >= 1 and np.all(res.tokens < V)


def test_transformers_generate_at_a_tiny_temperature_is_the_same_greedy_text(tiny_folder):
    # generation_kwargs: transformers' float32 division would give NaN probabilities (an
    # error in generate); below GREEDY_TEMPERATURE it decodes greedily, like the processing
    pair = llm.load_pair(tiny_folder, device="cpu", temperature=1e-320)
    ids = torch.tensor([[3, 1, 4]])
    out = pair.target.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=8,
                               **pair.generation_kwargs())
    ref = llm.generate(pair, ids[0].numpy(), "ar", max_new_tokens=8, stop_at_eos=False)
    n = out.shape[1]
    np.testing.assert_array_equal(out[0].numpy(), ref.tokens[:n])
    assert LogitsProcessing(0.5).generation_kwargs()["do_sample"] is True


# ----------------------------------------------------------------------------- named errors


def test_lone_surrogates_are_refused_naming_the_argument(synth, tiny_pair):
    _, _, pair = synth
    bad = "hello \ud800 cat"
    with pytest.raises(ValueError, match=r"^prompt: not valid Unicode text.*character 6"):
        llm.generate(pair, bad, "ar", max_new_tokens=2)
    with pytest.raises(ValueError, match="^prompt: not valid Unicode"):
        llm.generate_lossy(pair, bad, "lenience", ell=0.5, max_new_tokens=2)
    with pytest.raises(ValueError, match="^text: not valid Unicode"):
        llm.detect(bad, 1, tokenizer=pair)
    with pytest.raises(ValueError, match="^text: not valid Unicode"):
        pair.encode_prompt(bad)
    with pytest.raises(ValueError, match=r"^prompts\[1\]: not valid Unicode"):
        llm.acceptance_profile(tiny_pair, ["hello", bad], progress=False)
    with pytest.raises(ValueError, match="^target: not valid Unicode"):
        llm.load_pair("\udcff/model")


@pytest.fixture
def no_loading(monkeypatch):
    """Fail the test if a model is loaded (arguments must be refused before)."""
    def refuse(*args, **kwargs):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr("specbound.llm.models.load_model", refuse)


def test_devices_this_machine_lacks_are_refused_before_loading(monkeypatch, no_loading):
    monkeypatch.setattr(_loading, "_backend_count", lambda kind: 0)
    for device in ("cuda", "cuda:0", "mps", "xpu"):
        with pytest.raises(ValueError, match=f"^device: '{device}' is not available"):
            llm.load_pair(device=device)
    for device in ("meta", "cpu:0x", 3.5, object()):
        with pytest.raises(ValueError, match="^device:"):
            llm.load_pair(device=device)
    monkeypatch.setattr(_loading, "_backend_count", lambda kind: 2 if kind == "cuda" else 0)
    with pytest.raises(ValueError, match=r"^device: 'cuda:2' does not exist.*cuda:0 to cuda:1"):
        llm.load_pair(device="cuda:2")
    assert _loading.resolve_device("cuda:1") == torch.device("cuda:1")
    assert _loading.resolve_device(None) == torch.device("cuda")


def test_generate_rejects_unknown_options_by_name(synth):
    _, _, pair = synth
    with pytest.raises(ValueError, match=r"^unknown: not an option of generate"):
        llm.generate(pair, PROMPT, "mpfr", key=1, max_new_tokens=2, unknown=1)
    with pytest.raises(ValueError, match=r"^max_block: not an option.*'max_blocks'"):
        llm.generate(pair, PROMPT, "mpfr", key=1, max_new_tokens=2, max_block=1)
    # the removed alias of ``repeats`` is refused by name like any other unknown option
    with pytest.raises(ValueError, match=r"^mask_repeats: not an option of generate"):
        llm.generate(pair, PROMPT, "mpfr", key=1, max_new_tokens=2, mask_repeats=True)
    # the simulator's own options still pass through
    llm.generate(pair, PROMPT, "mpfr", key=1, max_new_tokens=2, max_blocks=3,
                 repeats="reuse")


def test_generate_lossy_names_a_missing_pair_and_a_bad_log(synth):
    _, _, pair = synth
    for bad in (None, object(), "embedded"):
        with pytest.raises(ValueError, match="^pair: must be a ModelPair"):
            llm.generate_lossy(bad, PROMPT, "lenience", ell=0.5)
    with pytest.raises(ValueError, match="^log: must have a method record"):
        llm.generate_lossy(pair, PROMPT, "lenience", ell=0.5, log=object())
    with pytest.raises(ValueError, match="^log:"):
        llm.PairBackend(pair, log=3)


def test_huge_lookahead_names_L(synth):
    _, _, pair = synth
    with pytest.raises(ValueError, match="^L: "):
        llm.generate(pair, PROMPT, "ar", L=10**30, max_new_tokens=2)
    with pytest.raises(ValueError, match="^L: "):
        llm.generate_lossy(pair, PROMPT, "lenience", ell=0.5, L=10**30, max_new_tokens=2)
    with pytest.raises(ValueError, match="^max_new_tokens: "):
        llm.generate(pair, PROMPT, "ar", L=2, max_new_tokens=10**30)


def test_detect_names_its_first_argument_text(synth):
    _, _, pair = synth
    for bad in (None, b"abc", {1: 2}, [[1, 2], [3, 4]], [1.5, 2.0], [-1, 2], object()):
        with pytest.raises(ValueError, match="^text: "):
            llm.detect(bad, 1, tokenizer=pair)


def test_prompts_keeps_naming_n():
    with pytest.raises(ValueError, match="^n: must be >= 1"):
        llm.prompts("humaneval", 0)


def test_pair_backend_refuses_bad_protocol_input(synth):
    _, _, pair = synth
    backend = llm.PairBackend(pair)
    with pytest.raises(ValueError, match="^prompt:"):
        backend.reset([])
    with pytest.raises(ValueError, match="^prompt:"):
        backend.reset([0, V])
    backend.reset([0, 1])
    with pytest.raises(ValueError, match="^paths:"):
        backend.draft_step([(1,)])  # depth 1 before depth 0
    backend.draft_step([()])
    with pytest.raises(ValueError, match="^paths:"):
        backend.draft_step([(1,), (2, 3)])
    with pytest.raises(ValueError, match="^paths:"):
        backend.verify(None)
    with pytest.raises(ValueError, match="^tokens:"):
        backend.commit([0.5])
    for bad in ({"a": 1}, -1, "x"):
        with pytest.raises(ValueError, match="^(stop_tokens|progress|prompt_id):"):
            llm.PairBackend(pair, stop_tokens=bad if bad != -1 else [-1])


# ----------------------------------------------------------------------------- loading


def test_an_unusable_folder_names_the_argument_and_the_path(tmp_path, tiny_pair):
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ValueError, match=f"^target: the folder '{tmp_path}' is not a usable"):
        llm.load_pair(str(tmp_path))
    with pytest.raises(ValueError, match=f"^draft: the folder '{tmp_path}' is not a usable"):
        tiny_pair.with_draft(f"model:{tmp_path}")
    with pytest.raises(ValueError, match=f"^tokenizer: the folder '{tmp_path}'"):
        llm.detect("hello", 1, tokenizer=str(tmp_path))
    (tmp_path / "weights.bin").write_bytes(b"0")
    with pytest.raises(ValueError, match="^target: .*is a file"):
        llm.load_pair(str(tmp_path / "weights.bin"))
    (tmp_path / "broken.gguf").write_bytes(b"not a gguf file")
    with pytest.raises(ValueError, match="^target: could not read the GGUF file"):
        llm.load_pair(str(tmp_path / "broken.gguf"), device="cpu")


@pytest.fixture
def no_network(monkeypatch):
    """Record and refuse every TCP connection attempt (tests never touch the network)."""
    attempts = []

    def refuse(address, *args, **kwargs):
        attempts.append(address)
        raise OSError("network disabled in tests")

    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket.socket, "connect", lambda self, address: refuse(address))
    return attempts


@pytest.mark.parametrize("var", ["HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"])
def test_an_uncached_hub_id_fails_at_once_when_offline(monkeypatch, no_network, var):
    monkeypatch.setenv(var, "1")
    with pytest.raises(ValueError, match=r"^target: the model 'nobody/not-cached-model' is not "
                                         r"available offline.*folder.*\.gguf file"):
        llm.load_pair("nobody/not-cached-model", device="cpu")
    assert no_network == []  # no connection was even tried
    target = sim.SyntheticLM(V, context_length=1, seed=1)
    pair = synthetic_pair(target, target, tiny_tokenizer())
    with pytest.raises(ValueError, match="^draft: the model 'nobody/x' is not available"):
        pair.with_draft("model:nobody/x")
    with pytest.raises(ValueError, match="^tokenizer: the model 'nobody/x' is not available"):
        llm.detect("hello", 1, tokenizer="nobody/x")
    assert no_network == []


def test_an_uncached_hub_id_fails_at_once_when_the_hub_is_unreachable(monkeypatch, no_network):
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(_loading, "PROBE_SECONDS", 0.5)
    with pytest.raises(ValueError, match="^target: the model 'nobody/not-cached' is not "
                                         "available offline"):
        llm.load_pair("nobody/not-cached", device="cpu")
    assert len(no_network) == 1  # the one probe of the hub's host, no download attempt


def test_a_cached_hub_id_loads_offline_without_network(monkeypatch, no_network, tmp_path):
    # the hub's cache layout: models--{namespace}--{name}/snapshots/{revision}/ + refs/main
    from huggingface_hub import constants

    repo = tmp_path / "models--nobody--tiny"
    save_tiny_model(repo / "snapshots" / "0123456789abcdef")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0123456789abcdef")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)  # as if set before the import
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    pair = llm.load_pair("nobody/tiny", draft="model:nobody/tiny", device="cpu")
    assert pair.load_info["target"].kind == "hub"
    ids = pair.encode_prompt("hello cat", chat=False)
    np.testing.assert_array_equal(pair.target_logprobs(ids).numpy(),
                                  pair.draft_logprobs(ids).numpy())
    assert no_network == []


def test_the_probe_gives_up_on_a_connection_that_hangs(monkeypatch):
    release = threading.Event()

    def hang(*args, **kwargs):
        release.wait(30)  # a connection (or a name lookup) that does not answer
        raise OSError("timed out")

    monkeypatch.setattr(socket, "create_connection", hang)
    t0 = time.monotonic()
    try:
        assert _loading._probe("example.invalid", 443, 0.2) is False
        assert time.monotonic() - t0 < 10  # a hang guard: the probe waits 0.2 s, not 30 s
    finally:
        release.set()  # let the probe's thread end now, inside this test


def test_the_probe_asks_the_proxy_when_one_is_set(monkeypatch):
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    assert _loading._hub_address() == ("proxy.example", 3128)
    for var in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "https://hub.example:8443")
    assert _loading._hub_address() == ("hub.example", 8443)


@pytest.mark.parametrize("source", ["/path/that/does/not/exist", "./missing-model",
                                    "~/missing-model-xyz", "../a/b/c", "a/b/c", "name with space"])
def test_a_missing_path_is_named_not_sent_to_the_hub(source, no_loading, no_network):
    with pytest.raises(ValueError, match=f"^target: no such file or folder: '{source}'"):
        llm.load_pair(source, device="cpu")
    with pytest.raises(ValueError, match=f"^draft: no such file or folder: '{source}'"):
        llm.load_pair(draft=f"model:{source}", device="cpu")  # before the target loads
    assert no_network == []


# ----------------------------------------------------------------------------- draft specs


@given(st.floats(min_value=0, exclude_min=True, allow_infinity=False, allow_nan=False))
def test_draft_spec_text_round_trips_exactly(t):
    spec = parse_draft(f"temperature:{t!r}")
    assert spec.value == t
    assert parse_draft(str(spec)) == spec


def test_draft_spec_text_keeps_short_temperatures_short():
    for text in ("temperature:1", "temperature:1.5", "temperature:0.5", "temperature:2"):
        assert str(parse_draft(text)) == text
    assert str(parse_draft("temperature:1.0000001")) == "temperature:1.0000001"
    assert str(parse_draft("temperature:1e-320")) == "temperature:1e-320"


def test_acceptance_profile_keeps_close_drafts_apart_and_merges_equal_ones(tiny_pair):
    prof = llm.acceptance_profile(
        tiny_pair, ["hello world cat dog", "the cat"],
        ["temperature:1", "temperature:1.0000001", "temperature:1.0", "temperature:2"],
        B=(1, 2), progress=False)
    s = prof.summary
    assert list(s["draft"]) == ["temperature:1", "temperature:1.0000001", "temperature:2"]
    assert list(s["n_contexts"]) == [6, 6, 6]
    assert s["one_minus_tv"].iloc[0] == 1.0  # the target itself
    assert s["one_minus_tv"].iloc[1] < 1.0  # a different draft, however close
    assert len(prof.contexts) == 18


def test_acceptance_profile_shows_progress_by_default(tiny_pair, capsys):
    llm.acceptance_profile(tiny_pair, ["hello cat"], B=1, schemes=())
    assert "acceptance profile" in capsys.readouterr().err
    llm.acceptance_profile(tiny_pair, ["hello cat"], B=1, schemes=(), progress=False)
    assert capsys.readouterr().err == ""


def test_generate_batch_names_its_template_not_a_prompt(tiny_pair):
    """A bad ``template`` of ``generate_batch`` is the call's argument (it was reported as
    ``prompts: prompt 0: template: ...``); a prompt's own problem still names the prompt."""
    from specbound import llm

    with pytest.raises(ValueError, match=r"^template: must be one of"):
        llm.generate_batch(tiny_pair, ["hello world"], "vsps", template="bogus",
                           max_new_tokens=2)
    with pytest.raises(ValueError, match=r"^prompts: prompt 1: must not be empty"):
        llm.generate_batch(tiny_pair, ["hello world", ""], "vsps", max_new_tokens=2)
