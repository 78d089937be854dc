"""The ``specbound`` command line (also ``python -m specbound``).

``specbound models [--target T] [--json] [--measure [--drafts ...]]``
    The target model (layers, parameters, vocabulary, context window, cache folder: read
    from its files, no weights loaded) and the draft kinds; ``--measure`` loads the model
    and measures each draft's 1 - TV against the target on a few fixed real prompts.
``specbound generate "prompt" --decoder mpfr --B 4 --L 4 --key 42 [--draft early_exit:20]``
    The generated text on standard output, one summary line (AATPS, tokens/s, watermark
    p-value) on standard error, so that ``specbound generate ... | specbound detect --key 42``
    scores exactly the generated text.
``specbound detect --key 42 [FILE|-] [--max-bytes N]``
    The watermark detection result for a text (the tokenizer and the key only), on standard
    output; a text longer than ``--max-bytes`` (default 16 MiB) is refused unread.
``specbound log --out DIR``
    A resumable log of the target's and drafts' next-token distributions.

The decoders are those of Liu, Wan, Gao & Gündüz (2026), arXiv:2609.21858 (Alg. 1, 3, 4, 9,
10) and the baselines of :mod:`specbound.sim.decode`; detection is their §4.1, Alg. 8.

Contract (tested by ``tests/test_cli_contract.py``):

- a ``generate`` prompt (on the command line or from standard input) longer than
  ``--max-bytes`` (default :data:`MAX_PROMPT_BYTES`, 1 MiB) is refused before anything else,
  as is a ``detect`` text or prompt longer than its ``--max-bytes`` (16 MiB);
- every flag is validated before any model or tokenizer is loaded, and a ``generate`` run
  whose estimated memory (:func:`generate_memory`, from the target's config) exceeds the
  available memory is refused then, naming ``--B``, ``--L`` or ``--max-new-tokens``, as is
  a ``log`` or ``models --measure`` run whose estimate (:func:`profile_memory`) exceeds it,
  naming ``--max-new-tokens`` or ``--max-tokens``;
- a user error (bad flag or input, a missing file, a device that is not there, an error
  raised by the library) prints exactly one line ``specbound COMMAND: error: --FLAG: ...``
  on standard error, nothing on standard output, and exits with status 2;
- ``--json`` prints one strict JSON object on standard output (non-finite numbers are
  ``null``); every p-value is reported as ``log10_pvalue`` (base-10 logarithm of the exact
  p-value under H0) and ``pvalue`` (which may underflow to 0);
- Ctrl-C (SIGINT) at any point, from the program's first imports on
  (:func:`specbound.__main__.run` sets a handler before importing anything), exits with
  status 130 within a second or so, printing
  one line ``specbound COMMAND: interrupted`` on standard error (the command runs in a
  worker thread; the main thread only waits for it and handles the signal, so a long call
  into a tokenizer or torch does not delay the exit);
- ``--quiet`` silences every progress bar (transformers' and huggingface_hub's included);
- torch uses one CPU thread unless ``--threads N`` is given (several threads on a busy
  machine make every forward pass slower; see the README's CLI section).

Exit status: 0 success, 1 internal error (a bug: the traceback is printed), 2 user error,
130 interrupted.

Commands are registered in :data:`COMMANDS` as (help, add_arguments, run) triples; each
``run(args)`` returns the exit status.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import signal
import struct
import sys
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["main", "COMMANDS", "build_parser", "CLIError", "MIN_TEMPERATURE", "EXIT_USAGE",
           "EXIT_INTERRUPTED"]

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

#: smallest accepted temperature (``--temperature`` and a ``temperature:T`` draft's T times
#: it): the largest float32 logit divided by it stays finite in float64
#: (3.4e38 / 1e-250 < 1.8e308), so the processed distributions never hold NaN.  Below it the
#: sampler is the argmax to every precision that matters; use e.g. 1e-6 for greedy decoding.
MIN_TEMPERATURE = 1e-250
#: upper bounds that keep a typo from allocating the machine away (a verification forward
#: holds B * (L + 1) positions)
MAX_B = 256
MAX_L = 1024
MAX_TOKENS = 10**7
INT64_MAX = 2**63 - 1


class CLIError(Exception):
    """A user error: reported as one line naming the flag, exit status 2."""


@dataclass(frozen=True)
class Command:
    """One subcommand: its help line, its argument setup and its action."""

    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


COMMANDS: dict[str, Command] = {}


def command(name: str, help: str, add_arguments):
    """Register ``run`` as the action of subcommand ``name``."""

    def deco(run):
        COMMANDS[name] = Command(help, add_arguments, run)
        return run

    return deco


# ----------------------------------------------------------------------------- argument types
# Each converter raises argparse.ArgumentTypeError; argparse reports it as
# "argument --FLAG: <message>", and _Parser.error turns that into one line and exit 2.


def _utf8(text: str) -> str:
    """``text`` if it encodes to UTF-8 (arguments with undecodable bytes carry surrogates)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise argparse.ArgumentTypeError("not valid UTF-8 text (undecodable bytes)") from None
    return text


def _int_in(lo: int, hi: int | None = None):
    def conv(text: str) -> int:
        try:
            v = int(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer, got {text[:40]!r}") from None
        if v < lo or (hi is not None and v > hi):
            bound = f">= {lo}" if hi is None else f"in [{lo}, {hi}]"
            raise argparse.ArgumentTypeError(f"must be an integer {bound}, got {v}")
        return v

    conv.__name__ = "integer"
    return conv


def _real(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text[:40]!r}") from None
    if not math.isfinite(v):
        raise argparse.ArgumentTypeError(f"must be finite, got {text[:40]!r}")
    return v


def _temperature(text: str) -> float:
    v = _real(text)
    if v < MIN_TEMPERATURE:
        raise argparse.ArgumentTypeError(
            f"must be >= {MIN_TEMPERATURE:g} (smaller values overflow logits / T; use e.g. "
            f"1e-6 for near-greedy sampling), got {text[:40]}")
    return v


def _top_p(text: str) -> float:
    v = _real(text)
    if not 0 < v <= 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {v:g}")
    return v


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _threads(text: str) -> int:
    return _int_in(1, _cpu_count())(text)


def _key(text: str):
    """A watermark key: an integer when the text is one, else the text itself."""
    _utf8(text)
    if not text:
        raise argparse.ArgumentTypeError("must not be empty")
    try:
        return int(text)
    except ValueError:
        return text


def _nonempty_text(text: str) -> str:
    _utf8(text)
    if not text:
        raise argparse.ArgumentTypeError("must not be empty")
    return text


_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")


def model_source(text: str) -> str:
    """'embedded', an existing path, or something that can be a Hugging Face model id."""
    _nonempty_text(text)
    if text == "embedded":
        return text
    path = Path(text).expanduser()
    if text.endswith(".gguf"):
        if not path.is_file():
            raise argparse.ArgumentTypeError(f"GGUF file {text!r} does not exist")
        return text
    if path.exists():
        if not path.is_dir():
            raise argparse.ArgumentTypeError(f"{text!r} is neither a model folder nor a .gguf "
                                             "file")
        return text
    if text.startswith(("/", ".", "~")) or text.count("/") > 1:
        raise argparse.ArgumentTypeError(f"{text[:80]!r}: no such file or folder")
    if not _HUB_ID.match(text):
        raise argparse.ArgumentTypeError(
            f"{text[:80]!r}: not an existing path and not a Hugging Face model id (OWNER/NAME)")
    return text


# ----------------------------------------------------------------------------- parser


class _Parser(argparse.ArgumentParser):
    """argparse, except that a usage error is one line (no usage block) and exit status 2."""

    def error(self, message):
        raise CLIError(message) from None


def _flag(args, name: str) -> str:
    """The command-line spelling of argument ``name`` (``"max_new_tokens"`` ->
    ``"--max-new-tokens"``)."""
    return _FLAG_OF.get((getattr(args, "command", None), name)) or _FLAG_OF.get(
        (None, name), name)


#: library argument names -> flags, per command (None: every command)
_FLAG_OF = {
    (None, "draft"): "--draft", ("models", "draft"): "--drafts", ("log", "draft"): "--drafts",
    (None, "drafts"): "--drafts", (None, "n"): "--prompts", (None, "temperature"):
        "--temperature", (None, "top_k"): "--top-k", (None, "top_p"): "--top-p",
    (None, "device"): "--device", (None, "dtype"): "--dtype", (None, "target"): "--target",
    (None, "tokenizer"): "--tokenizer", (None, "L"): "--L", (None, "B"): "--B",
    (None, "key"): "--key", (None, "window"): "--window", (None, "seed"): "--seed",
    (None, "max_new_tokens"): "--max-new-tokens", (None, "max_tokens"): "--max-tokens",
    (None, "template"): "--template", (None, "score"): "--score", (None, "path"): "--out",
    (None, "max_stored"): "--max-stored", (None, "threads"): "--threads",
    (None, "decoder"): "--decoder", ("generate", "text"): "prompt",
    ("generate", "prompt"): "prompt", ("detect", "text"): "file",
}

_NAMED = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*): ")


def _one_line(message: str, limit: int = 600) -> str:
    line = " ".join(str(message).split())
    return line if len(line) <= limit else line[:limit - 3] + "..."


def _library_message(args, exc: BaseException) -> str:
    """A library error's message with its argument name replaced by the flag's."""
    msg = str(exc) or type(exc).__name__
    m = _NAMED.match(msg)
    if m:
        msg = _flag(args, m.group(1)) + msg[m.end(1):]
    if isinstance(exc, UnicodeError) and not m:
        msg = f"not valid UTF-8 text ({msg})"
    return msg


def _model_arguments(p: argparse.ArgumentParser) -> None:
    """Options shared by every command that loads a model pair."""
    g = p.add_argument_group("model")
    g.add_argument("--target", default="embedded", type=model_source,
                   help="'embedded' (default), a Hugging Face model id, a folder or a .gguf file")
    g.add_argument("--device", default=None, type=_nonempty_text,
                   help="cpu, cuda, cuda:N or mps (default: CUDA if available, else cpu)")
    g.add_argument("--dtype", default=None,
                   choices=["auto", "float32", "float16", "bfloat16", "float64"],
                   help="weights' dtype (default: the checkpoint's)")
    g.add_argument("--temperature", type=_temperature, default=1.0,
                   help=f"shared temperature (>= {MIN_TEMPERATURE:g}; default 1)")
    g.add_argument("--top-k", type=_int_in(1, INT64_MAX), default=None,
                   help="shared top-k, at most the target's vocabulary (default: none)")
    g.add_argument("--top-p", type=_top_p, default=None,
                   help="shared top-p in (0, 1] (default: none)")
    g.add_argument("--threads", type=_threads, default=None,
                   help="torch CPU threads, 1 to the number of usable cores (default 1: more "
                        "threads slow a busy machine down; see the README)")


def _quiet_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quiet", action="store_true",
                   help="no progress bars and no status lines on standard error")


def _json_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true",
                   help="print one strict JSON object on standard output (p-values as "
                        "log10_pvalue, the base-10 log of the exact p-value, and pvalue)")


# ----------------------------------------------------------------------------- checks before
# loading anything (the heavy imports happen here, in the worker thread, so Ctrl-C works)


def _fail(flag: str, message: str):
    raise CLIError(f"{flag}: {message}")


def _check_device(args) -> None:
    if args.device is None:
        return
    import torch

    try:
        dev = torch.device(args.device)
    except (RuntimeError, TypeError, ValueError):
        _fail("--device", f"not a torch device: {args.device[:40]!r} (cpu, cuda, cuda:N "
                                "or mps)")
    if dev.type == "cpu":
        return
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            why = ("this torch build has no CUDA support" if torch.version.cuda is None
                   else "no CUDA device is visible")
            _fail("--device", f"{args.device!r} asked for, but CUDA is not available "
                                    f"({why}); use --device cpu")
        n = torch.cuda.device_count()
        if dev.index is not None and dev.index >= n:
            _fail("--device", f"{args.device!r}: only {n} CUDA device(s) visible")
        return
    if dev.type == "mps":
        mps = getattr(torch.backends, "mps", None)
        if mps is None or not mps.is_available():
            _fail("--device", "'mps' asked for, but MPS is not available; use --device "
                                    "cpu")
        return
    _fail("--device", f"must be cpu, cuda, cuda:N or mps, got {args.device[:40]!r}")


def _check_drafts(args, specs, flag: str) -> list[str]:
    """Parse draft specs; returns their canonical texts (a draft given twice, also as
    another text of the same spec, is refused: each is measured or logged once)."""
    from specbound.llm.drafts import parse_draft

    out = []
    for text in specs:
        try:
            _utf8(text)
            spec = parse_draft(text)
        except (ValueError, argparse.ArgumentTypeError) as exc:
            msg = str(exc)
            msg = msg[len("draft: "):] if msg.startswith("draft: ") else msg
            _fail(flag, msg)
        if spec.kind == "temperature" and spec.value * args.temperature < MIN_TEMPERATURE:
            _fail(flag, f"{text!r}: T times --temperature must be >= "
                              f"{MIN_TEMPERATURE:g} (smaller values overflow logits / T)")
        if spec.kind == "model":
            try:
                model_source(str(spec.value))
            except argparse.ArgumentTypeError as exc:
                _fail(flag, f"{text[:80]!r}: {exc}")
        if str(spec) in out:
            _fail(flag, f"{text[:80]!r} is given twice (as {spec}); give each draft once")
        out.append(str(spec))
    return out


def _check_top_k(args, meta: dict) -> None:
    """``--top-k`` against the target's vocabulary read from its config (no weights
    loaded): a larger top-k would silently be all the tokens."""
    vocab = meta.get("vocab_size")
    if args.top_k is not None and isinstance(vocab, int) and args.top_k > vocab:
        _fail("--top-k", f"{args.top_k} exceeds the target's vocabulary of {vocab} tokens "
                         "(leave --top-k out to keep every token)")


def _check_early_exit(meta: dict, drafts, flag: str) -> None:
    """``early_exit:K`` drafts against the target's layer count read from its config (no
    weights loaded); nothing is checked when the config does not say."""
    layers = meta.get("layers")
    if not isinstance(layers, int):
        return
    for d in drafts:
        if d.startswith("early_exit:"):
            k = d.split(":", 1)[1]
            if k.isdigit() and int(k) > layers:
                _fail(flag, f"{d!r}: early_exit K must be <= the target's {layers} layers")


def _load_target_pair(args):
    """The target of ``--target`` with its processing flags and a placeholder draft
    (``temperature:1``; the commands that use it measure or log other drafts), after the
    thread setting and a status line."""
    from specbound import llm

    _set_threads(args)
    _status(args, f"loading {args.target}")
    return llm.load_pair(args.target, draft="temperature:1", device=args.device,
                         dtype=args.dtype, temperature=args.temperature,
                         top_k=args.top_k, top_p=args.top_p)


def _set_threads(args) -> None:
    """One torch thread unless ``--threads`` says otherwise (set in the thread that runs)."""
    import torch

    torch.set_num_threads(args.threads or 1)


@contextlib.contextmanager
def _progress_bars(quiet: bool, transformers_used: bool = True):
    """Silence transformers' and huggingface_hub's progress bars under ``--quiet``."""
    if not quiet or not transformers_used:
        yield
        return
    from transformers.utils import logging as tlog

    was = tlog.is_progress_bar_enabled()
    tlog.disable_progress_bar()
    verbosity = tlog.get_verbosity()
    tlog.set_verbosity_error()
    try:
        import huggingface_hub.utils as hub_utils
    except ImportError:  # pragma: no cover
        hub_utils = None
    hub_was = hub_utils is not None and not hub_utils.are_progress_bars_disabled()
    if hub_utils is not None:
        hub_utils.disable_progress_bars()
    try:
        yield
    finally:
        tlog.set_verbosity(verbosity)
        if was:
            tlog.enable_progress_bar()
        if hub_was:
            hub_utils.enable_progress_bars()


def _status(args, message: str) -> None:
    """A status line on standard error (not under ``--quiet`` or ``--json``)."""
    if not getattr(args, "quiet", False):
        print(f"specbound {args.command}: {message}", file=sys.stderr, flush=True)


def _read_utf8(data: bytes, what: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CLIError(f"{what}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset "
                       f"{exc.start})") from None


def _read_stdin(what: str, limit: int | None = None, flag: str | None = "--max-bytes") -> str:
    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:  # a text stream without bytes (e.g. io.StringIO in tests)
        text = sys.stdin.read() if limit is None else sys.stdin.read(limit + 1)
        _check_size(len(text.encode("utf-8", "surrogatepass")), limit, what, flag)
        return _utf8_or_fail(text, what)
    data = stream.read() if limit is None else stream.read(limit + 1)
    _check_size(len(data), limit, what, flag)
    return _read_utf8(data, what)


#: default of ``detect --max-bytes``: the largest text read (16 MiB, about 4 million tokens
#: of English; the tokenizer's and the scores' memory stay well under 1 GiB)
MAX_TEXT_BYTES = 16 * 2**20


#: default of ``generate --max-bytes``: the longest prompt read (1 MiB).  A prompt must fit
#: the target's context window in tokens; English text takes about 4 bytes a token, so
#: 1 MiB is about twice a 128k-token window, and a prompt over it is refused before the
#: model or the tokenizer loads.
MAX_PROMPT_BYTES = 2**20


def _check_size(n: int, limit: int | None, what: str, flag: str | None = "--max-bytes"
                ) -> None:
    """Refuse an input longer than ``limit`` bytes (read up to ``limit + 1`` bytes to tell);
    ``flag``: the flag that raises the limit (None: a fixed limit)."""
    if limit is not None and n > limit:
        if flag is None:
            raise CLIError(f"{what}: longer than {limit} bytes")
        raise CLIError(f"{what}: longer than {flag} ({limit} bytes); pass a larger "
                       f"{flag} to read more")


def _read_file(path: str, what: str, limit: int | None = None) -> str:
    """A UTF-8 text file of at most ``limit`` bytes (a device such as /dev/urandom included:
    at most ``limit + 1`` bytes are read)."""
    try:
        with open(path, "rb") as fh:
            data = fh.read() if limit is None else fh.read(limit + 1)
    except OSError as exc:
        raise CLIError(f"{what}: cannot read {path[:200]!r} ({exc.strerror})") from None
    _check_size(len(data), limit, what)
    return _read_utf8(data, what)


def _utf8_or_fail(text: str, what: str) -> str:
    try:
        return _utf8(text)
    except argparse.ArgumentTypeError as exc:
        raise CLIError(f"{what}: {exc}") from None


# ----------------------------------------------------------------------------- output


def _finite(x):
    """``x`` with every non-finite float replaced by None (strict JSON)."""
    if isinstance(x, dict):
        return {str(k): _finite(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_finite(v) for v in x]
    if hasattr(x, "item") and getattr(x, "ndim", 1) == 0:
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def _print_json(obj) -> None:
    print(json.dumps(_finite(obj), indent=1, allow_nan=False, ensure_ascii=False))


_LOG10_E = 0.4342944819032518


def _pvalue_fields(det) -> dict:
    """``log10_pvalue`` and ``pvalue`` of a detection (None for no detection)."""
    if det is None:
        return {"score_name": None, "log10_pvalue": None, "pvalue": None, "n_scored": None}
    lp = float(det.log_pvalue)
    return {"score_name": det.score_name, "log10_pvalue": lp * _LOG10_E,
            "pvalue": math.exp(lp), "n_scored": int(det.n_scored)}


def format_pvalue(log10_p: float) -> str:
    """``10**log10_p`` as text, also far below the smallest float (``"3.2e-412"``)."""
    if log10_p is None or not math.isfinite(log10_p):
        return "nan" if log10_p is None or math.isnan(log10_p) else "0"
    if log10_p > -300:
        return f"{10 ** log10_p:.3g}"
    e = math.floor(log10_p)
    return f"{10 ** (log10_p - e):.2f}e{e}"


# ----------------------------------------------------------------------------- models

PROMPT_SEED = 0


def _models_arguments(p: argparse.ArgumentParser) -> None:
    _model_arguments(p)
    p.add_argument("--measure", action="store_true",
                   help="load the model and measure each draft's 1 - TV against the target "
                        "(about 30 s for the embedded model on 2 busy cores); without it "
                        "nothing is loaded")
    p.add_argument("--drafts", nargs="+", metavar="SPEC", default=None,
                   help="with --measure: drafts to measure (default: temperature:0.5 "
                        "temperature:1.5 early_exit:<2/3 of the layers> quantized:4 "
                        "quantized:3 quantized:2)")
    p.add_argument("--prompts", type=_int_in(1, 164), default=None, metavar="N",
                   help="with --measure: prompts per set (HumanEval and ShareGPT, seed 0; "
                        "default 2)")
    p.add_argument("--max-tokens", type=_int_in(1, MAX_TOKENS), default=None, metavar="T",
                   help="with --measure: tokens per prompt (every prefix is a context; "
                        "default 64)")
    _json_argument(p)
    _quiet_argument(p)


def default_drafts(n_layers: int) -> list[str]:
    """The drafts ``specbound models`` measures for a target with ``n_layers`` layers."""
    k = max(1, min(n_layers, round(2 * n_layers / 3)))
    return ["temperature:0.5", "temperature:1.5", f"early_exit:{k}", "quantized:4",
            "quantized:3", "quantized:2"]


_SYNTAX = {"temperature": "temperature:T", "early_exit": "early_exit:K",
           "quantized": "quantized:BITS[:GROUP]", "ngram": "ngram:N[:K[:ar]][:fixed=F][:cost=S]",
           "model": "model:ID_OR_PATH"}


def _safetensors_summary(folder: Path):
    """(parameter count, dtypes) from the safetensors headers of a model folder, or None.

    Reads the JSON header of each weight file (a few kB), never the weights.
    """
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        return None
    n, dtypes = 0, set()
    for f in files:
        with f.open("rb") as fh:
            head = fh.read(8)
            if len(head) != 8:
                return None
            size = struct.unpack("<Q", head)[0]
            if size > 100 << 20:
                return None
            header = json.loads(fh.read(size))
        for name, t in header.items():
            if name == "__metadata__":
                continue
            n += math.prod(t["shape"])
            dtypes.add(t["dtype"])
    return n, sorted(dtypes)


_ST_DTYPES = {"F32": "float32", "F16": "float16", "BF16": "bfloat16", "F64": "float64"}


def target_metadata(source: str) -> dict:
    """What the files say about a target, without loading its weights.

    For the embedded model and ``.gguf`` files: the cache folder written by the first load
    (``$SPECBOUND_CACHE``, default ``~/.cache/specbound``; ``converted: false`` before it);
    for folders their ``config.json``; for Hugging Face ids the hub cache's copy, if any.
    Unknown fields are None.
    """
    out = {"source": source, "name": None, "kind": None, "path": None, "cached": None,
           "layers": None, "vocab_size": None, "context_window": None, "parameters": None,
           "dtype": None}
    folder = None
    if source == "embedded" or source.endswith(".gguf"):
        from specbound.llm.models import gguf_cache_status

        status = gguf_cache_status(source)
        gguf, folder = status["gguf"], status["folder"]
        out.update(kind="gguf", gguf=str(gguf), gguf_bytes=gguf.stat().st_size,
                   name=status["name"], path=str(folder), cached=status["cached"])
        if status["wheel"] is not None:
            out["wheel"] = status["wheel"]
        if not out["cached"]:
            folder = None
    elif Path(source).expanduser().is_dir():
        folder = Path(source).expanduser()
        out.update(kind="folder", name=folder.name, path=str(folder), cached=True)
    else:
        out.update(kind="hub", name=source)
        try:
            from huggingface_hub import try_to_load_from_cache

            cfg = try_to_load_from_cache(source, "config.json")
        except Exception:  # noqa: BLE001 - any failure: nothing known from the cache
            cfg = None
        if isinstance(cfg, str):
            folder = Path(cfg).parent
            out.update(path=str(folder), cached=True)
        else:
            out["cached"] = False
    if folder is not None and (folder / "config.json").is_file():
        try:
            cfg = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            cfg = {}
        cfg = cfg.get("text_config", cfg) if isinstance(cfg, dict) else {}
        out["layers"] = cfg.get("num_hidden_layers")
        out["vocab_size"] = cfg.get("vocab_size")
        out["context_window"] = cfg.get("max_position_embeddings")
        out["dtype"] = cfg.get("dtype") or cfg.get("torch_dtype")
        heads = cfg.get("num_attention_heads")
        out["kv_heads"] = cfg.get("num_key_value_heads") or heads
        hidden = cfg.get("hidden_size")
        out["head_dim"] = cfg.get("head_dim") or (
            hidden // heads if isinstance(hidden, int) and isinstance(heads, int) and heads
            else None)
        try:
            st = _safetensors_summary(folder)
        except (OSError, ValueError, KeyError, TypeError):
            st = None
        if st is not None:
            out["parameters"] = st[0]
            if out["dtype"] is None and len(st[1]) == 1:
                out["dtype"] = _ST_DTYPES.get(st[1][0], st[1][0])
    return out


def _draft_kinds() -> list[dict]:
    from specbound.llm.drafts import DRAFT_DESCRIPTIONS, DRAFT_KINDS

    return [{"kind": k, "syntax": _SYNTAX[k], "description": DRAFT_DESCRIPTIONS[k]}
            for k in DRAFT_KINDS]


def _models_run(args: argparse.Namespace) -> int:
    if not args.measure:
        for flag, value in (("--drafts", args.drafts), ("--prompts", args.prompts),
                            ("--max-tokens", args.max_tokens)):
            if value is not None:
                _fail(flag, "only with --measure (without it nothing is loaded)")
    specs = _check_drafts(args, args.drafts, "--drafts") if args.drafts else None
    _check_device(args)
    meta = target_metadata(args.target)
    _check_early_exit(meta, specs or [], "--drafts")
    _check_top_k(args, meta)
    kinds = _draft_kinds()
    out = {"target": meta, "draft_kinds": kinds, "measured": bool(args.measure)}
    if args.measure:
        out.update(_measure(args, specs, meta))
    if args.json:
        _print_json(out)
        return EXIT_OK
    t = out["target"]

    def num(v, fmt="{}"):
        return "?" if v is None else fmt.format(v)

    print(f"target   {t['name']} ({t['source']}): {num(t['layers'])} layers, "
          f"{num(None if t['parameters'] is None else t['parameters'] / 1e6, '{:.1f}')}M "
          f"parameters, vocabulary {num(t['vocab_size'])}, context "
          f"{num(t['context_window'])}, {num(t['dtype'])}")
    if "wheel" in t:
        print(f"         from {t['wheel']}: {t['gguf']}")
    if t["kind"] == "gguf":
        if t["cached"]:
            print(f"         cached in {t['path']}")
        else:
            print(f"         not converted yet: the first load dequantizes the "
                  f"{t['gguf_bytes'] / 2**20:.0f} MiB GGUF file into {t['path']} (about a "
                  f"minute; $SPECBOUND_CACHE moves the cache)")
    elif t["kind"] == "hub" and not t["cached"]:
        print("         not in the local Hugging Face cache (the first load downloads it)")
    if "load_seconds" in t:
        how = "converted from GGUF and cached" if t["converted_now"] else "loaded"
        print(f"         {how} in {t['load_seconds']:.1f} s on {t['device']}")
    print("draft kinds")
    for k in kinds:
        print(f"  {k['syntax']:<24} {k['description']}")
    if not args.measure:
        print("run `specbound models --measure` to measure each draft's 1 - TV against the "
              "target (loads the model)")
        return EXIT_OK
    p = out["processing"]
    rows = out["drafts"]
    n_ctx = rows[0]["n_contexts"] if rows else 0
    print(f"processing  temperature={p['temperature']} top_k={p['top_k']} top_p={p['top_p']}")
    print(f"measured 1 - TV(p, q), mean over {n_ctx} contexts (every prefix of the first "
          f"{out['prompts']['max_tokens']} tokens of {2 * out['prompts']['per_set']} prompts: "
          f"HumanEval + ShareGPT, seed {PROMPT_SEED}); +- cluster-robust standard error")
    for r in rows:
        print(f"  {r['draft']:<24} {r['one_minus_tv']:.3f} +- {r['stderr']:.3f}")
    return EXIT_OK


def _measure(args, specs, meta) -> dict:
    """Load the target and measure 1 - TV of each draft (one pass over the prompts)."""
    from specbound import llm
    from specbound.llm.drafts import layer_count

    per_set = 2 if args.prompts is None else args.prompts
    max_tokens = 64 if args.max_tokens is None else args.max_tokens
    texts = (llm.prompts("humaneval", per_set, seed=PROMPT_SEED)
             + llm.prompts("sharegpt", per_set, seed=PROMPT_SEED))
    # unformatted prompts cut to --max-tokens: at most one token a character (and a BOS)
    _check_profile_memory(args, meta, specs or default_drafts(1),
                          min(max_tokens, max(map(len, texts)) + 1), "--max-tokens")
    with _progress_bars(args.quiet):
        pair = _load_target_pair(args)
        n_layers = layer_count(pair.target)
        if specs is None:
            specs = default_drafts(n_layers)
        _status(args, f"measuring {len(specs)} draft(s) on {len(texts)} prompts")
        prof = pair.acceptance_profile(texts, specs, B=1, schemes=(), max_tokens=max_tokens,
                                       progress=not args.quiet)
    by_draft = {r["draft"]: r for r in prof.summary.to_dict("records")}
    rows = []
    for spec in specs:
        s = by_draft[spec]
        rows.append({"draft": spec, "kind": spec.split(":", 1)[0],
                     "one_minus_tv": float(s["one_minus_tv"]),
                     "stderr": float(s["one_minus_tv_stderr"]),
                     "n_contexts": int(s["n_contexts"])})
    info = pair.load_info["target"]
    meta.update(
        name=info.name, kind=info.kind, path=info.path, cached=True, layers=n_layers,
        vocab_size=pair.vocab_size, context_window=pair.context_window,
        parameters=int(sum(p.numel() for p in pair.target.parameters())),
        dtype=str(pair.target.dtype).replace("torch.", ""), device=str(pair.device),
        converted_now=info.converted, load_seconds=round(info.seconds, 2))
    p = pair.processing
    return {"processing": {"temperature": p.temperature, "top_k": p.top_k, "top_p": p.top_p},
            "prompts": {"sets": ["humaneval", "sharegpt"], "per_set": per_set,
                        "seed": PROMPT_SEED, "max_tokens": max_tokens},
            "drafts": rows}


command("models", "describe the target model and the draft kinds (--measure: 1 - TV of each "
        "draft)", _models_arguments)(_models_run)


# ----------------------------------------------------------------------------- generate


def _generate_arguments(p: argparse.ArgumentParser) -> None:
    from specbound.llm.prompt_sets import TEMPLATES
    from specbound.sim.decode import DECODERS

    p.add_argument("prompt", type=_nonempty_text,
                   help="the prompt text ('-': read it from standard input as UTF-8)")
    p.add_argument("--max-bytes", type=_int_in(1, INT64_MAX), default=MAX_PROMPT_BYTES,
                   metavar="N", help=f"refuse a prompt longer than N bytes of UTF-8 (default "
                                     f"{MAX_PROMPT_BYTES}, 1 MiB)")
    p.add_argument("--decoder", default="mpfr", choices=DECODERS, help="decoder (default mpfr)")
    p.add_argument("--B", type=_int_in(1, MAX_B), default=1,
                   help=f"number of drafts, 1 to {MAX_B} (default 1)")
    p.add_argument("--L", type=_int_in(1, MAX_L), default=4,
                   help=f"lookahead, 1 to {MAX_L} (default 4)")
    p.add_argument("--key", type=_key, default=None,
                   help="watermark key (an integer or text; required by keyed decoders)")
    p.add_argument("--window", type=_int_in(0, INT64_MAX), default=None,
                   help="watermark context window: how many preceding tokens key each "
                        "token's pivot (default 4); 0: the key alone, no context")
    p.add_argument("--draft", default="temperature:1.5", type=_nonempty_text,
                   help="draft spec: temperature:T, early_exit:K, quantized:BITS[:GROUP], "
                        "ngram:N[:K] (prompt lookup, no model; no match or a running acceptance "
                        "below break-even: an ar step) or "
                        "model:ID_OR_PATH (default temperature:1.5)")
    p.add_argument("--max-new-tokens", type=_int_in(0, MAX_TOKENS), default=128,
                   help="default 128")
    p.add_argument("--seed", type=_int_in(0, INT64_MAX), default=0,
                   help="unkeyed randomness (default 0)")
    p.add_argument("--template", default="default", choices=sorted(TEMPLATES),
                   help="prompt template (default, summarize, eli5)")
    p.add_argument("--no-chat", action="store_true", help="do not apply the chat template")
    p.add_argument("--no-eos", action="store_true", help="do not stop at end-of-sequence")
    _json_argument(p)
    _quiet_argument(p)
    _model_arguments(p)


_DTYPE_BYTES = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2}
#: tokens a chat template adds around a prompt (an upper bound for the templates in use)
CHAT_OVERHEAD_TOKENS = 64


def available_memory(device: str | None = None) -> int | None:
    """Bytes of memory a run may still use: free memory of a CUDA device, else the system's
    ``MemAvailable`` (Linux; None where unknown)."""
    if device is not None and device.startswith("cuda"):
        import torch

        with contextlib.suppress(RuntimeError, AssertionError, ValueError):
            return int(torch.cuda.mem_get_info(torch.device(device))[0])
        return None
    from specbound._validation import system_available_memory

    return system_available_memory()


def generate_memory(meta: dict, B: int, L: int, max_new_tokens: int, prompt_tokens: int,
                    dtype: str | None = None, draft_layers: int | None = None) -> dict | None:
    """An estimate (bytes) of what one ``generate`` run holds at its peak, from the target's
    config (``target_metadata``): the target's and the draft's KV caches, ``2 * layers *
    kv_heads * head_dim * bytes`` per position, for ``B`` rows of up to ``prompt_tokens +
    max_new_tokens + L + 1`` positions; the verification forward's logits and the processed
    distributions (``B * (L + 1)`` positions of the vocabulary, float32 and float64, and the
    drafts' ``B * L``); the weights.  None when the config does not say."""
    layers, heads, hd, vocab = (meta.get(k) for k in ("layers", "kv_heads", "head_dim",
                                                      "vocab_size"))
    if not all(isinstance(x, int) and x > 0 for x in (layers, heads, hd, vocab)):
        return None
    size = _DTYPE_BYTES.get(dtype or meta.get("dtype") or "float32", 4)
    positions = prompt_tokens + max_new_tokens + L + 1
    per_position = 2 * heads * hd * size
    d_layers = layers if draft_layers is None else min(layers, draft_layers)
    kv = B * positions * per_position * (layers + d_layers)
    logits = B * (L + 1) * vocab * (4 + 8) + B * L * vocab * (4 + 8)
    weights = int(meta.get("parameters") or 0) * size
    return {"kv_cache": kv, "logits": logits, "weights": weights,
            "total": kv + logits + weights}


#: resident memory of a run before its arrays: the interpreter, torch, the tokenizer
#: (measured: about 530 MiB above the weights and arrays of a short ``specbound log``)
RUNTIME_BYTES = 512 * 2**20


def profile_memory(meta: dict, drafts, positions: int, dtype: str | None = None,
                   scored: int | None = None) -> dict | None:
    """An estimate (bytes) of what ``specbound log`` and ``models --measure`` hold at their
    peak for one prompt of ``positions`` tokens, ``scored`` of them (default all) with
    log-probabilities, from the target's config (``target_metadata``): the target's KV
    cache while it samples (``2 * layers * kv_heads * head_dim * bytes`` per position); the
    log-probabilities, float32 -- the target's logits, log-softmax and copies, and each
    draft's, all held at once (``(4 + 3 * drafts) * scored * vocab * 4``); the weights, once
    more for each ``quantized:`` draft (a quantized copy is dequantized to the model's
    dtype); the interpreter, torch and the tokenizer (:data:`RUNTIME_BYTES`).  Calibrated on
    the embedded model (peak RSS of ``specbound log`` with two drafts at 16 and 400 new
    tokens: 1.55 and 2.25 GiB, 9.5 float32 vocabulary arrays per scored position).  None
    when the config does not say."""
    layers, heads, hd, vocab = (meta.get(k) for k in ("layers", "kv_heads", "head_dim",
                                                      "vocab_size"))
    if not all(isinstance(x, int) and x > 0 for x in (layers, heads, hd, vocab)):
        return None
    size = _DTYPE_BYTES.get(dtype or meta.get("dtype") or "float32", 4)
    drafts = list(drafts)
    kv = positions * 2 * heads * hd * size * layers
    logits = (4 + 3 * len(drafts)) * (positions if scored is None else scored) * vocab * 4
    copies = 1 + sum(str(d).startswith("quantized:") for d in drafts)
    weights = int(meta.get("parameters") or 0) * size * copies
    return {"kv_cache": kv, "logits": logits, "weights": weights, "runtime": RUNTIME_BYTES,
            "total": kv + logits + weights + RUNTIME_BYTES}


def _check_profile_memory(args, meta, drafts, positions: int, flag: str,
                          scored: int | None = None) -> None:
    """Refuse a ``log`` or ``models --measure`` run whose estimate (:func:`profile_memory`)
    exceeds the available memory, naming ``flag`` (the flag that sets the positions)."""
    limit = meta.get("context_window")
    if isinstance(limit, int):
        positions = min(positions, limit)
        scored = None if scored is None else min(scored, limit)
    est = profile_memory(meta, drafts, positions, args.dtype, scored)
    free = available_memory(args.device)
    if est is None or free is None or est["total"] <= free:
        return
    _fail(flag, f"the run would need about {_gib(est['total'])} of memory (log-probabilities "
                f"{_gib(est['logits'])}, KV cache {_gib(est['kv_cache'])}, weights "
                f"{_gib(est['weights'])}), more than the {_gib(free)} available; use a "
                f"smaller {flag} or fewer --drafts")


def _gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB"


def _check_generate_memory(args, meta, draft: str, prompt_chars: int) -> None:
    """Refuse a run whose estimated memory (:func:`generate_memory`) exceeds what is
    available, naming the flag that drives it."""
    limit = meta.get("context_window")
    tokens = prompt_chars + (0 if args.no_chat else CHAT_OVERHEAD_TOKENS)
    if isinstance(limit, int):
        tokens = min(tokens, limit)
    d_layers = None
    if draft.startswith("early_exit:"):
        with contextlib.suppress(ValueError):
            d_layers = int(draft.split(":", 1)[1])
    est = generate_memory(meta, args.B, args.L, args.max_new_tokens, tokens, args.dtype,
                          d_layers)
    free = available_memory(args.device)
    if est is None or free is None or est["total"] <= free:
        return
    flag = "--B" if args.B > 1 else "--L" if est["logits"] > est["kv_cache"] else \
        "--max-new-tokens"
    _fail(flag, f"the run would need about {_gib(est['total'])} of memory (KV cache "
                f"{_gib(est['kv_cache'])}, logits {_gib(est['logits'])}, weights "
                f"{_gib(est['weights'])}), more than the {_gib(free)} available; use smaller "
                f"--B, --L or --max-new-tokens")


def _check_prompt_size(args) -> None:
    """A prompt given on the command line longer than ``--max-bytes`` bytes of UTF-8 is
    refused before anything else (standard input is read up to the same limit)."""
    if args.prompt != "-":
        _check_size(len(args.prompt.encode("utf-8")), args.max_bytes, "prompt")
        if not args.prompt.strip():
            _fail("prompt", "must not be empty (only whitespace)")


def _generate_run(args: argparse.Namespace) -> int:
    from specbound.sim.decode import KEYED_DECODERS, MULTI_DRAFT_DECODERS

    _check_prompt_size(args)
    if args.decoder in KEYED_DECODERS and args.key is None:
        _fail("--key", f"the keyed decoder {args.decoder!r} needs a watermark key")
    if args.B > 1 and args.decoder not in MULTI_DRAFT_DECODERS:
        _fail("--B", f"{args.decoder!r} takes one draft (B = 1); B > 1 needs one of "
                           f"{sorted(MULTI_DRAFT_DECODERS)}")
    draft = _check_drafts(args, [args.draft], "--draft")[0]
    _check_device(args)
    meta = target_metadata(args.target)
    _check_early_exit(meta, [draft], "--draft")
    _check_top_k(args, meta)
    limit = meta.get("context_window")
    if limit and args.max_new_tokens + args.L + 1 >= limit:
        _fail("--max-new-tokens", f"{args.max_new_tokens} new tokens + L + 1 reach the "
                                        f"target's context window of {limit}")
    # a prompt is read up to --max-bytes (an endless stream is not read to its end)
    prompt = (_read_stdin("prompt (standard input)", args.max_bytes)
              if args.prompt == "-" else args.prompt)
    if not prompt.strip():
        _fail("prompt", "must not be empty" + (" (only whitespace)" if prompt else ""))
    _check_generate_memory(args, meta, draft, len(prompt))

    from specbound import llm
    from specbound.llm.detection import detect
    from specbound.llm.generation import DEFAULT_WINDOW, generate

    window = DEFAULT_WINDOW if args.window is None else args.window
    _set_threads(args)
    _status(args, f"loading {args.target} with draft {draft}")
    with _progress_bars(args.quiet):
        pair = llm.load_pair(args.target, draft=draft, device=args.device, dtype=args.dtype,
                             temperature=args.temperature, top_k=args.top_k, top_p=args.top_p)
        _status(args, f"generating up to {args.max_new_tokens} tokens")
        res = generate(pair, prompt, args.decoder, L=args.L, B=args.B, key=args.key,
                       window=window, max_new_tokens=args.max_new_tokens, seed=args.seed,
                       chat=not args.no_chat, template=args.template,
                       stop_at_eos=not args.no_eos, progress=not args.quiet)
    det = detect(res, args.key) if args.decoder in KEYED_DECODERS else None
    pv = _pvalue_fields(det)
    scored = None
    if det is not None:
        scored = scored_note(res.n_generated, det.n_scored, 0, window, "generated text")
        if window and res.n_generated:
            scored += (f"; `specbound detect` on the text alone cannot score the first "
                       f"{min(window, res.n_generated)} (give it --prompt for this p-value)")
    summary = {
        "decoder": args.decoder, "draft": str(pair.draft_spec), "B": res.B, "L": res.L,
        "window": window, "key_id": res.watermark.key_id,
        "new_tokens": res.n_generated, "blocks": int(res.emitted_per_block.size),
        "aatps": res.aatps, "target_forwards_per_token": res.target_forwards_per_token,
        "tokens_per_second": res.tokens_per_second, "total_seconds": res.total_seconds,
        "forward_seconds": res.forward_seconds, "stopped_at_eos": res.stopped_at_eos,
        "threads": args.threads or 1, **pv, "scored": scored,
    }
    if args.json:
        _print_json({"text": res.text, **summary, "tokens": res.generated.tolist()})
        return EXIT_OK
    print(res.text, flush=True)
    wm = ("no watermark (unkeyed decoder)" if det is None else
          f"watermark p = {format_pvalue(pv['log10_pvalue'])} (log10 p = "
          f"{pv['log10_pvalue']:.2f}) over {det.n_scored} tokens: {scored}")
    aatps = "nan" if not math.isfinite(res.aatps) else f"{res.aatps:.3f}"
    print(f"[{args.decoder} B={res.B} L={res.L} draft={summary['draft']}] "
          f"{res.n_generated} tokens, AATPS {aatps}, "
          f"{res.tokens_per_second:.2f} tokens/s, {wm}", file=sys.stderr)
    return EXIT_OK


command("generate", "generate text with a (watermarked, speculative) decoder",
        _generate_arguments)(_generate_run)


# ----------------------------------------------------------------------------- detect

_SCORES = ("aaronson", "u", "li", "lattimore")


_WINDOW_HELP = ("the generator's watermark context window: how many preceding tokens key "
                "each token's pivot (default 4); 0: the key alone, no context, so each "
                "distinct token is scored once")


def _detect_arguments(p: argparse.ArgumentParser) -> None:
    from specbound.llm.prompt_sets import TEMPLATES

    p.add_argument("file", nargs="?", default="-", type=_nonempty_text,
                   help="UTF-8 text file to test ('-' or nothing: standard input); one "
                        "trailing newline is dropped, so `specbound generate ... | specbound "
                        "detect` scores exactly the generated text")
    p.add_argument("--key", required=True, type=_key, help="watermark key (an integer or text)")
    p.add_argument("--window", type=_int_in(0, INT64_MAX), default=None, help=_WINDOW_HELP)
    p.add_argument("--score", default="aaronson", choices=_SCORES,
                   help="aaronson (default), u, li, lattimore")
    p.add_argument("--tokenizer", default="embedded", type=model_source,
                   help="'embedded' (default) or a Hugging Face model id / folder")
    p.add_argument("--max-bytes", type=_int_in(1, INT64_MAX), default=MAX_TEXT_BYTES,
                   metavar="N", help=f"refuse a text (or a prompt) longer than N bytes "
                                     f"(default {MAX_TEXT_BYTES}, 16 MiB)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--prompt", default=None, type=_nonempty_text, metavar="TEXT",
                   help="the prompt the text was generated from: its tokens go in front of "
                        "the text, so every token is scored as `generate` scored it (same "
                        "p-value); without it the first WINDOW tokens cannot be scored")
    g.add_argument("--prompt-file", default=None, type=_nonempty_text, metavar="FILE",
                   help="as --prompt, read from a UTF-8 file (one trailing newline dropped)")
    p.add_argument("--template", default="default", choices=sorted(TEMPLATES),
                   help="with --prompt: the prompt template generate used (default)")
    p.add_argument("--no-chat", action="store_true",
                   help="with --prompt: generate ran with --no-chat")
    _json_argument(p)
    _quiet_argument(p)


def _read_text_file(path: str, what: str, limit: int | None = None) -> str:
    return _strip_newline(_read_file(path, what, limit))


def _strip_newline(text: str) -> str:
    """One trailing newline dropped: what `generate` (and most editors) add after a text."""
    return text[:-2] if text.endswith("\r\n") else text[:-1] if text.endswith("\n") else text


def scored_note(n_tokens: int, n_scored: int, unscored_head: int, window: int,
                where: str = "text") -> str:
    """Which tokens a detection scored, and why fewer than the text's: the first ``window``
    tokens of a text without its prompt (their context windows reach into the prompt) and
    repeated (context window, token) pairs, each scored once (Liu et al. 2026,
    arXiv:2609.21858, §4.1, App. E)."""
    repeated = n_tokens - unscored_head - n_scored
    why = []
    if unscored_head:
        why.append(f"the first {unscored_head} not scored: with window {window} their "
                   f"context reaches into the prompt, which the text lacks (--prompt "
                   f"restores them)")
    if repeated:
        why.append(f"{repeated} repeated (context, token) pairs scored once")
    if window == 0:
        why.append("window 0: the key alone keys each pivot, so each distinct token "
                   "counts once")
    head = f"{n_scored} of the {n_tokens} tokens of the {where} scored"
    return head + (f" ({'; '.join(why)})" if why else "")


def _detect_run(args: argparse.Namespace) -> int:
    if args.prompt is not None:  # as the text and --prompt-file: at most --max-bytes
        _check_size(len(args.prompt.encode("utf-8")), args.max_bytes, "--prompt")
    if args.file == "-":
        text = _strip_newline(_read_stdin("file (standard input)", args.max_bytes))
    else:
        text = _read_text_file(args.file, "file", args.max_bytes)
    if not text:
        _fail("file", "the text is empty: nothing to score")
    prompt = args.prompt
    if args.prompt_file is not None:
        prompt = _read_text_file(args.prompt_file, "--prompt-file", args.max_bytes)
        if not prompt.strip():
            _fail("--prompt-file", "the prompt is empty")
    if args.prompt is not None and not args.prompt.strip():
        _fail("--prompt", "must not be empty")
    from specbound.llm.detection import detect, tokenizer_for
    from specbound.llm.generation import DEFAULT_WINDOW
    from specbound.sim._config import compile_note

    window = DEFAULT_WINDOW if args.window is None else args.window
    say = (lambda m: None) if args.json else (lambda m: _status(args, m))
    with _progress_bars(args.quiet):
        say(f"loading the tokenizer ({args.tokenizer})")
        tokenizer = tokenizer_for(args.tokenizer)
        if len(text) > 1 << 20:
            _status(args, f"tokenizing and scoring {len(text) / 1e6:.1f} M characters")
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        if not ids:
            _fail("file", "the text has no tokens: nothing to score")
        say(f"scoring {len(ids)} tokens")
        quiet = args.quiet or args.json
        try:
            with contextlib.nullcontext() if quiet else compile_note(
                    f"specbound {args.command}: "):
                    det = detect(ids, args.key, tokenizer=tokenizer, window=window,
                             score=args.score, prompt=prompt, chat=not args.no_chat,
                             template=args.template)
        except ValueError as exc:
            msg = str(exc)
            if msg.startswith("prompt:"):
                _fail("--prompt", msg[len("prompt:"):].strip())
            raise
    head = 0 if prompt is not None else min(window, len(ids))
    if det.n_scored == 0:
        _fail("file", f"nothing to score: {scored_note(len(ids), 0, head, window)}")
    note = scored_note(len(ids), det.n_scored, head, window,
                       "text after the prompt" if prompt is not None else "text")
    out = {"score_name": det.score_name, "score": det.score, "n_scored": det.n_scored,
           **_pvalue_fields(det), "anlppt": det.anlppt, "window": window,
           "n_tokens": len(ids), "n_unscored_head": head,
           "n_repeated": len(ids) - head - det.n_scored, "with_prompt": prompt is not None,
           "scored": note}
    if args.json:
        _print_json(out)
        return EXIT_OK
    print(f"{det.score_name} score {det.score:.3f} over {det.n_scored} tokens: "
          f"p-value {format_pvalue(out['log10_pvalue'])} "
          f"(log10 p = {out['log10_pvalue']:.2f}); {note}")
    return EXIT_OK


command("detect", "test text for the keyed watermark (needs the key, not the model)",
        _detect_arguments)(_detect_run)
# ----------------------------------------------------------------------------- log


#: the kinds of the default drafts of ``specbound log`` (for its memory estimate)
_LOG_DEFAULT_DRAFT_KINDS = ("temperature:0.5", "temperature:1.5", "early_exit:1", "quantized:3")


def _log_arguments(p: argparse.ArgumentParser) -> None:
    _model_arguments(p)
    p.add_argument("--out", required=True, metavar="DIR", type=_nonempty_text,
                   help="folder of the log")
    p.add_argument("--drafts", nargs="+", metavar="SPEC", default=None,
                   help="drafts logged at every context (default: temperature:0.5 "
                        "temperature:1.5 early_exit:<2/3 of the layers> quantized:3)")
    p.add_argument("--sets", nargs="+", default=["humaneval", "sharegpt"],
                   choices=["humaneval", "sharegpt"], help="prompt sets (default: both)")
    p.add_argument("--prompts", type=_int_in(1), default=4, metavar="N",
                   help="prompts per set (seed --prompt-seed; default 4)")
    p.add_argument("--prompt-seed", type=_int_in(0, INT64_MAX), default=0,
                   help="prompt sampling seed")
    p.add_argument("--max-new-tokens", type=_int_in(1, MAX_TOKENS), default=64, metavar="T",
                   help="tokens the target samples per prompt (default 64)")
    p.add_argument("--seed", type=_int_in(0, INT64_MAX), default=0,
                   help="sampling seed (default 0)")
    p.add_argument("--no-chat", action="store_true", help="do not chat-format the prompts")
    p.add_argument("--max-stored", type=_int_in(1, INT64_MAX), default=256,
                   help="tokens stored per distribution, at most the target's vocabulary "
                        "(default 256; exact under top-k <= it)")
    p.add_argument("--no-resume", action="store_true",
                   help="refuse an existing log instead of resuming it")
    _quiet_argument(p)


def _log_run(args: argparse.Namespace) -> int:
    from specbound import llm
    from specbound.llm.drafts import layer_count
    from specbound.llm.logs import log_distributions

    out = Path(args.out).expanduser()
    if out.exists() and not out.is_dir():
        _fail("--out", f"{args.out!r} exists and is not a folder")
    specs = _check_drafts(args, args.drafts, "--drafts") if args.drafts else None
    twice = next((x for i, x in enumerate(args.sets) if x in args.sets[:i]), None)
    if twice is not None:
        _fail("--sets", f"{twice!r} is given twice; give each prompt set once")
    _check_device(args)
    meta = target_metadata(args.target)
    _check_early_exit(meta, specs or [], "--drafts")
    _check_top_k(args, meta)
    vocab = meta.get("vocab_size")
    if isinstance(vocab, int) and args.max_stored > vocab:
        _fail("--max-stored", f"{args.max_stored} exceeds the target's vocabulary of {vocab} "
                              f"tokens (--max-stored {vocab} stores every token)")
    texts, labels = [], []
    for name in args.sets:
        try:
            got = llm.prompts(name, args.prompts, seed=args.prompt_seed)
        except ValueError as exc:
            raise CLIError(_library_message(args, exc)) from None
        for i, t in enumerate(got):
            texts.append(t)
            labels.append(f"{name} prompts(n={args.prompts}, seed={args.prompt_seed})[{i}]")
    # a token has at least one character: the longest prompt bounds the prompt tokens
    prompt_tokens = max(map(len, texts)) + (0 if args.no_chat else CHAT_OVERHEAD_TOKENS)
    # the log scores the sampled positions only (the prompt's logits are not computed)
    _check_profile_memory(args, meta, specs or _LOG_DEFAULT_DRAFT_KINDS,
                          prompt_tokens + args.max_new_tokens, "--max-new-tokens",
                          scored=args.max_new_tokens)
    try:  # the folder can be written before the model loads
        out.mkdir(parents=True, exist_ok=True)
        if not os.access(out, os.W_OK | os.X_OK):
            raise PermissionError(13, "not writable")
    except OSError as exc:
        _fail("--out", f"{args.out[:200]!r}: cannot write a log there "
                       f"({exc.strerror or type(exc).__name__})")
    with _progress_bars(args.quiet):
        pair = _load_target_pair(args)
        if specs is None:
            n = layer_count(pair.target)
            specs = ["temperature:0.5", "temperature:1.5",
                     f"early_exit:{max(1, min(n, round(2 * n / 3)))}", "quantized:3"]
        log = log_distributions(pair, texts, drafts=specs, max_new_tokens=args.max_new_tokens,
                                seed=args.seed, path=args.out, resume=not args.no_resume,
                                progress=not args.quiet, chat=not args.no_chat,
                                max_stored=args.max_stored, prompt_labels=labels)
    print(f"{log.path}: {len(log)} positions, {len(log.prompt_ids)} prompts, "
          f"drafts {', '.join(log.drafts)}")
    return EXIT_OK


command("log", "log the target's and drafts' next-token distributions along the target's "
        "own samples (resumable)", _log_arguments)(_log_run)


# ----------------------------------------------------------------------------- check-sampler
# A self-contained command: its own argument setup and action (specbound.testing).

_CHECK_PROTOCOLS = ("step", "batch", "multi", "block", "keyed")


def _check_sampler_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("target", metavar="MODULE:FUNCTION", type=_nonempty_text,
                   help="the sampler, by import path (e.g. mypkg.sampling:my_step)")
    p.add_argument("--protocol", required=True, choices=_CHECK_PROTOCOLS,
                   help="how the sampler is called: step(p, q, x, rng) -> (token, accepted); "
                        "batch: the same over rows; multi(p, q, xs, rng) -> (token, index or "
                        "-1); block(P, Q, xs, rng) -> (tokens, n_accepted); keyed(p, q, x, "
                        "key, context) -> token")
    p.add_argument("--factory", action="store_true",
                   help="FUNCTION builds the sampler: call it with no arguments first (e.g. "
                        "specbound.testing.adapters:transformers_step)")
    p.add_argument("--vocab-size", type=_int_in(2, 100_000), default=8,
                   help="vocabulary of the test case (default 8): a Zipf-like target and a "
                        "noisy draft, specbound.testing.gallery.realistic_pair")
    p.add_argument("--B", type=_int_in(1, 64), default=2, help="drafts per call (multi)")
    p.add_argument("--L", type=_int_in(1, 16), default=3, help="block length (block)")
    p.add_argument("--scheme", default=None, choices=["specinfer", "mpfr", "gls"],
                   help="multi: also check the acceptance against this scheme's exact value")
    p.add_argument("--n", type=_int_in(100, 10**9), default=None,
                   help="sampler calls per check (default: enough to catch a TV deviation "
                        "of 0.01 with probability 0.99)")
    p.add_argument("--seed", type=_int_in(0, INT64_MAX), default=0, help="seed (default 0)")
    p.add_argument("--case-seed", type=_int_in(0, INT64_MAX), default=0,
                   help="seed of the test case's laws (default 0)")
    p.add_argument("--false-failure-rate", type=_real, default=1e-3,
                   help="probability that a correct sampler fails a check (default 1e-3)")


def _import_sampler(args):
    import importlib

    mod_name, sep, attr = args.target.partition(":")
    if not sep or not mod_name or not attr:
        _fail("MODULE:FUNCTION", f"{args.target[:80]!r} is not of the form MODULE:FUNCTION")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())  # a sampler in the current folder, as `python -m`
    try:
        obj = importlib.import_module(mod_name)
    except Exception as exc:  # noqa: BLE001 - any import failure is the user's
        _fail("MODULE:FUNCTION", f"cannot import {mod_name!r} ({type(exc).__name__}: {exc})")
    for part in attr.split("."):
        if not hasattr(obj, part):
            _fail("MODULE:FUNCTION", f"{mod_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if args.factory:
        if not callable(obj):
            _fail("--factory", f"{attr!r} is not callable")
        obj = obj()
    if not callable(obj):
        _fail("MODULE:FUNCTION", f"{attr!r} is not callable")
    return obj


def _check_sampler_run(args: argparse.Namespace) -> int:
    if not 0 < args.false_failure_rate <= 0.5:
        _fail("--false-failure-rate", f"must be in (0, 0.5], got {args.false_failure_rate:g}")
    sampler = _import_sampler(args)
    import numpy as np

    from specbound import testing as T
    from specbound.testing.gallery import realistic_pair

    V, cs = args.vocab_size, args.case_seed
    common = dict(n=args.n, seed=args.seed, false_failure_rate=args.false_failure_rate,
                  name=args.target)
    p, q = realistic_pair(V, cs)
    runs = []
    if args.protocol in ("step", "batch"):
        rate = args.false_failure_rate
        try:
            d = T.draw(sampler, p, q, protocol=args.protocol, seed=args.seed, name=args.target,
                       n=args.n or _default_n(p, q, rate))
        except (ValueError, TypeError) as exc:
            if not str(exc).startswith("sampler: "):
                raise
            print(f"check FAILED: {_one_line(str(exc))}")
            return EXIT_INTERNAL
        runs += [lambda: T.check_lossless(d, p, q, false_failure_rate=rate),
                 lambda: T.check_acceptance(d, p, q, false_failure_rate=rate)]
    elif args.protocol == "multi":
        runs.append(lambda: T.check_lossless(sampler, p, q, protocol="multi", B=args.B,
                                             **common))
        if args.scheme:
            runs.append(lambda: T.check_acceptance(sampler, p, q, protocol="multi", B=args.B,
                                                   scheme=args.scheme, **common))
    elif args.protocol == "block":
        pairs = [realistic_pair(V, cs + 17 * i) for i in range(args.L + 1)]
        P = np.stack([a for a, _ in pairs])
        Q = np.stack([b for _, b in pairs[:args.L]])
        runs.append(lambda: T.check_block(sampler, P, Q, **common))
    else:
        qs = np.stack([q, realistic_pair(V, cs + 1)[1], np.full(V, 1.0 / V)])
        runs.append(lambda: T.check_drafter_invariance(sampler, p, qs, **common))
    ok = True
    for run in runs:
        try:
            res = run()
        except (ValueError, TypeError) as exc:
            if not str(exc).startswith("sampler: "):
                raise
            print(f"check FAILED: {_one_line(str(exc))}")
            return EXIT_INTERNAL
        print(res)
        ok &= res.passed
    return EXIT_OK if ok else EXIT_INTERNAL


def _default_n(p, q, rate: float) -> int:
    """The larger of check_lossless's and check_acceptance's default sample sizes."""
    from specbound import theory
    from specbound.testing import _checks as C

    a = 1.0 - float(theory.tv_distance(p, q))
    dof = int((p > 0).sum()) - 1
    return max(C.n_for_tv(C.DETECT_TV, dof, rate, C.POWER),
               C.n_for_acceptance(C.DETECT_ACCEPTANCE, a, rate, C.POWER), C.MIN_DEFAULT_N)


command("check-sampler", "check a speculative sampler (MODULE:FUNCTION) against the exact "
        "laws with specbound.testing (exit 0 pass, 1 fail, 2 usage)",
        _check_sampler_arguments)(_check_sampler_run)


# ----------------------------------------------------------------------------- entry


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every registered subcommand."""
    from specbound import __version__

    parser = _Parser(
        prog="specbound",
        description="Speculative decoding on real language models: models, drafts, keyed "
                    "sampling.  Results on standard output, progress and summaries on "
                    "standard error; --json: one strict JSON object on standard output, "
                    "p-values as log10_pvalue (base-10 log of the exact p-value) and "
                    "pvalue.  Exit status: 0 ok, 1 internal error, 2 bad input (one line "
                    "on standard error naming the flag), 130 interrupted.")
    parser.add_argument("--version", action="version", version=f"specbound {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name, cmd in COMMANDS.items():
        p = sub.add_parser(name, help=cmd.help, description=cmd.help)
        cmd.add_arguments(p)
        p.set_defaults(_run=cmd.run)
    return parser


def _error_line(command_name, message: str) -> None:
    prog = "specbound" if not command_name else f"specbound {command_name}"
    print(f"{prog}: error: {_one_line(message)}", file=sys.stderr, flush=True)


def _dispatch(args) -> int:
    """Run one command; every user error becomes one line and exit status 2."""
    try:
        code = int(args._run(args))
        sys.stdout.flush()  # a closed pipe (`... | head`) is reported here, not at exit
        return code
    except CLIError as exc:
        _error_line(args.command, str(exc))
    except (ValueError, OSError, ImportError, LookupError, TypeError) as exc:
        if isinstance(exc, BrokenPipeError):
            _silence_stdout()
            return EXIT_INTERNAL
        if isinstance(exc, LookupError | TypeError) and not _NAMED.match(str(exc)):
            raise  # not a named argument error: a bug, keep the traceback
        _error_line(args.command, _library_message(args, exc))
    except MemoryError:
        _error_line(args.command, "out of memory (try smaller --B, --L, --max-new-tokens)")
        return EXIT_INTERNAL
    return EXIT_USAGE


def _silence_stdout() -> None:
    """After a closed pipe (``specbound ... | head``): no error at interpreter exit."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


def _interrupted(command_name) -> None:
    prefix = ""
    tqdm_mod = sys.modules.get("tqdm")
    if tqdm_mod is not None and getattr(tqdm_mod.tqdm, "_instances", None):
        prefix = "\n"  # end a progress bar's line first
    prog = "specbound" if not command_name else f"specbound {command_name}"
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(f"{prefix}{prog}: interrupted\n")
        sys.stderr.flush()


def main(argv=None, *, hard_exit: bool | None = None) -> int:
    """Run the command line; returns the exit status.

    ``argv`` defaults to ``sys.argv[1:]``.  The command runs in a worker thread while this
    (main) thread waits, so Ctrl-C is handled at once whatever the worker is doing: one line
    on standard error and status 130.  ``hard_exit`` (default: when ``argv`` is None, i.e.
    run as a program) ends the process at once on Ctrl-C (``os._exit(130)``) instead of
    returning 130 while the worker thread finishes in the background.
    """
    if hard_exit is None:
        hard_exit = argv is None
    command_name = None
    worker = None
    if hard_exit and threading.current_thread() is threading.main_thread() and (
            signal.getsignal(signal.SIGINT) is not signal.SIG_IGN):
        # from here on Ctrl-C is a KeyboardInterrupt handled below (the program's entry,
        # specbound.__main__.run, set an immediate-exit handler for the imports before)
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        parser = build_parser()
        try:
            args = parser.parse_args(argv)
        except CLIError as exc:
            words = list(sys.argv[1:] if argv is None else argv)
            command_name = next((w for w in words if w in COMMANDS), None)
            _error_line(command_name, str(exc))
            return EXIT_USAGE
        except SystemExit as exc:  # --help, --version
            return exc.code if isinstance(exc.code, int) else EXIT_OK
        command_name = args.command
        if threading.current_thread() is not threading.main_thread():
            return _dispatch(args)
        result: dict = {}

        def work():
            try:
                result["code"] = _dispatch(args)
            except BaseException as exc:  # noqa: BLE001 - reported by the main thread
                result["exc"] = exc

        worker = threading.Thread(target=work, name=f"specbound {command_name}", daemon=True)
        worker.start()
        while worker.is_alive():
            worker.join(0.1)
        if "exc" in result:
            exc = result["exc"]
            if isinstance(exc, KeyboardInterrupt):
                raise exc
            if isinstance(exc, SystemExit):
                return exc.code if isinstance(exc.code, int) else EXIT_INTERNAL
            traceback.print_exception(exc)
            return EXIT_INTERNAL
        return result["code"]
    except KeyboardInterrupt:
        if worker is not None and hard_exit:
            _stop(worker)
        if command_name is None:  # interrupted while the parser was built
            words = list(sys.argv[1:] if argv is None else argv)
            command_name = next((w for w in words if w in COMMANDS), None)
        _interrupted(command_name)
        if hard_exit:
            os._exit(EXIT_INTERRUPTED)
        return EXIT_INTERRUPTED


#: how long an interrupted worker gets to unwind (close files, end progress bars) before the
#: process ends anyway
STOP_GRACE_SECONDS = 0.8


def _stop(worker: threading.Thread) -> None:
    """Raise KeyboardInterrupt in the worker thread and give it a moment to unwind.

    The exception is delivered at the worker's next Python bytecode: at once in Python code,
    after the current call in a long native call (a tokenizer, a torch kernel), which the
    grace period does not wait for.
    """
    import ctypes

    with contextlib.suppress(Exception):
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(worker.ident),
                                                   ctypes.py_object(KeyboardInterrupt))
        worker.join(STOP_GRACE_SECONDS)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
