"""Model-free parts of specbound.llm: the shared logits processing, round-to-nearest
quantization, draft specs and the install hints.  Deterministic (no statistical test)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from transformers import (  # noqa: E402
    LogitsProcessorList,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from specbound.llm import DraftSpec, LogitsProcessing, parse_draft  # noqa: E402
from specbound.llm._deps import require_llm_extra  # noqa: E402
from specbound.llm.drafts import rtn_quantize  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _transformers_logprobs(logits, temperature, top_k, top_p):
    procs = LogitsProcessorList()
    if temperature != 1.0:
        procs.append(TemperatureLogitsWarper(temperature))
    if top_k is not None:
        procs.append(TopKLogitsWarper(top_k))
    if top_p is not None and top_p < 1.0:
        procs.append(TopPLogitsWarper(top_p))
    return torch.log_softmax(procs(None, logits.clone()), dim=-1)


@settings(max_examples=60)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 300), rows=st.integers(1, 4),
       temperature=st.sampled_from([1.0, 0.5, 0.7, 1.5, 3.0]),
       top_k=st.one_of(st.none(), st.integers(1, 400)),
       top_p=st.one_of(st.none(), st.sampled_from([0.05, 0.5, 0.9, 0.95, 1.0])),
       ties=st.booleans())
def test_processing_equals_transformers_warpers(seed, n, rows, temperature, top_k, top_p, ties):
    rng = np.random.default_rng(seed)
    x = rng.normal(scale=3.0, size=(rows, n))
    if ties:  # ties at the top-k boundary are kept, as in transformers
        x = np.round(x)
    logits = torch.as_tensor(x, dtype=torch.float64)
    got = LogitsProcessing(temperature, top_k, top_p).logprobs(logits)
    want = _transformers_logprobs(logits, temperature, top_k, top_p)
    assert torch.equal(got, want)
    probs = got.exp()
    assert torch.all(probs.sum(-1).sub(1).abs() < 1e-12)
    assert torch.all((probs > 0).sum(-1) >= 1)


def test_processing_casts_to_float64_and_handles_3d():
    logits = torch.randn(2, 3, 50, dtype=torch.float32)
    proc = LogitsProcessing(0.8, 10, 0.9)
    got = proc.logprobs(logits)
    assert got.dtype == torch.float64 and got.shape == (2, 3, 50)
    flat = proc.logprobs(logits.reshape(6, 50))
    assert torch.equal(got.reshape(6, 50), flat)
    assert torch.all(torch.isfinite(got).sum(-1) <= 10)
    cut = proc.logprobs(logits, vocab_size=40)
    assert cut.shape == (2, 3, 40)


@pytest.mark.parametrize("kwargs, name", [
    ({"temperature": 0}, "temperature"), ({"temperature": -1.0}, "temperature"),
    ({"temperature": float("nan")}, "temperature"), ({"top_k": 0}, "top_k"),
    ({"top_k": 2.5}, "top_k"), ({"top_p": 0.0}, "top_p"), ({"top_p": 1.5}, "top_p"),
])
def test_processing_rejects_bad_options(kwargs, name):
    with pytest.raises(ValueError, match=f"^{name}"):
        LogitsProcessing(**kwargs)


def test_generation_kwargs_disable_transformers_defaults():
    assert LogitsProcessing().generation_kwargs() == {
        "do_sample": True, "temperature": 1.0, "top_k": 0, "top_p": 1.0}


@given(seed=st.integers(0, 2**32 - 1), rows=st.integers(1, 6), cols=st.integers(1, 200),
       bits=st.sampled_from([2, 3, 4]), group=st.integers(2, 70))
def test_rtn_quantize_properties(seed, rows, cols, bits, group):
    rng = np.random.default_rng(seed)
    w = torch.as_tensor(rng.normal(size=(rows, cols)), dtype=torch.float32)
    if cols > 3:
        w[0, :3] = 0.25  # a short constant run
    q = rtn_quantize(w, bits, group)
    assert q.shape == w.shape and q.dtype == w.dtype
    levels = 2**bits - 1
    for start in range(0, cols, group):
        blk_w, blk_q = w[:, start:start + group], q[:, start:start + group]
        for r in range(rows):
            vals = torch.unique(blk_q[r])
            assert len(vals) <= 2**bits
            lo, hi = float(blk_w[r].min()), float(blk_w[r].max())
            step = (hi - lo) / levels
            # within half a grid step (plus float32 rounding) and inside [lo, hi]
            err = float((blk_q[r] - blk_w[r]).abs().max())
            assert err <= step / 2 + 1e-5 * (abs(lo) + abs(hi) + 1)
            assert float(blk_q[r].min()) >= lo - 1e-6 and float(blk_q[r].max()) <= hi + 1e-5
    const = torch.full((2, 8), 0.3)
    assert torch.equal(rtn_quantize(const, 2, 4), const)


def test_parse_draft_canonical_text():
    assert str(parse_draft("temperature:1.50")) == "temperature:1.5"
    assert str(parse_draft("temperature:2")) == "temperature:2"
    assert parse_draft("early_exit:20") == DraftSpec("early_exit", 20)
    assert parse_draft("quantized:3") == DraftSpec("quantized", 3, 64)
    assert str(parse_draft("quantized:3:32")) == "quantized:3:32"
    assert parse_draft("model:Qwen/Qwen2.5-0.5B-Instruct").value == "Qwen/Qwen2.5-0.5B-Instruct"
    assert parse_draft("model:C:/models/x").value == "C:/models/x"


def test_draft_descriptions_and_layer_count():
    from specbound import llm
    from specbound.llm.drafts import DRAFT_DESCRIPTIONS, DRAFT_KINDS, layer_count
    from tests._llm_synth import tiny_llama

    assert llm.DRAFT_DESCRIPTIONS is DRAFT_DESCRIPTIONS
    assert tuple(DRAFT_DESCRIPTIONS) == DRAFT_KINDS
    assert parse_draft("early_exit:1").description == DRAFT_DESCRIPTIONS["early_exit"]
    with pytest.raises(TypeError):
        DRAFT_DESCRIPTIONS["model"] = "x"  # read-only
    assert layer_count(tiny_llama()) == 2
    with pytest.raises(ValueError, match="^draft: cannot find the decoder layers"):
        layer_count(torch.nn.Linear(2, 2))


@pytest.mark.parametrize("draft", [
    "bogus:1", "nocolon", 3, None, "temperature:0", "temperature:-1", "temperature:abc",
    "temperature:inf", "temperature:nan", "early_exit:0", "early_exit:x", "early_exit:1.5",
    "quantized:5", "quantized:1", "quantized:4:1", "quantized:4:8:2", "quantized:four",
    "model:", "model:  ",
])
def test_bad_draft_specs_name_draft(draft):
    with pytest.raises(ValueError, match="^draft"):
        parse_draft(draft)


def test_missing_llm_extra_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)
    with pytest.raises(ImportError, match=r"pip install 'specbound\[llm\]'"):
        require_llm_extra()


def test_import_without_torch_fails_only_on_use():
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'torch':\n"
        "            raise ModuleNotFoundError(\"No module named 'torch'\", name='torch')\n"
        "sys.meta_path.insert(0, Block())\n"
        "import specbound.llm as L\n"
        "assert L.prompts('humaneval', 1)\n"
        "try:\n"
        "    L.load_pair\n"
        "except ImportError as e:\n"
        "    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT)
    assert "pip install 'specbound[llm]'" in out.stdout
