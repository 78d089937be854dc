"""``generate`` / ``generate_lossy`` pinned: fingerprints of a few runs, token for token.

Each case decodes a short run with a fixed seed (and key) and compares a SHA-256 fingerprint
of its result (tokens, per-block counts, decisions, pivots, text, stop flag) with the value
recorded before the one-prompt path was made the batch path's one-prompt case.  Two
models:

- a 2-layer random Llama over a 12-word vocabulary (real transformers key-value caches,
  built in memory in milliseconds), with a ``temperature:1.5`` view of itself as the draft
  (so ``share_forwards`` applies): every decoder kind, token-tree verification, one forward
  per path, shared forwards, a lossy rule and a prefix cache;
- the embedded SmolLM2-135M-Instruct (session fixture ``llm_pair``), three short runs.

A fingerprint changes when any token, decision or pivot changes: the test fails then (it
cannot pass by chance).  A deliberate change of the decoding recomputes the values with
``python -m tests.test_llm_generate_pinned``.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from specbound.llm import PrefixCache, generate, generate_lossy  # noqa: E402
from specbound.llm._loading import LoadInfo  # noqa: E402
from specbound.llm.drafts import DraftSpec, _temperature_draft  # noqa: E402
from specbound.llm.models import LogitsProcessing, ModelPair  # noqa: E402
from tests._llm_synth import tiny_llama, tiny_tokenizer  # noqa: E402

PROMPT = "hello the cat"


def fingerprint(res) -> str:
    """SHA-256 (first 16 hex digits) of what a run emitted and decided."""
    h = hashlib.sha256()
    for name in ("tokens", "emitted_per_block", "accepted_per_block", "nu",
                 "decision_accepted", "decision_position", "pivots"):
        h.update(name.encode())
        h.update(np.ascontiguousarray(getattr(res, name)).tobytes())
    h.update(repr((res.prompt_length, res.n_target_evals, res.n_draft_evals, res.decoder,
                   res.text, res.stopped_at_eos)).encode())
    return h.hexdigest()[:16]


def tiny_pair():
    """The 2-layer Llama with its own ``temperature:1.5`` view as the draft."""
    torch.set_num_threads(1)
    target = tiny_llama(0)
    info = LoadInfo("synthetic", "synthetic", "folder", "", False, 0.0)
    return ModelPair(target, _temperature_draft(target, 1.5), tiny_tokenizer(),
                     LogitsProcessing(), DraftSpec("temperature", 1.5),
                     device=torch.device("cpu"), load_info={"target": info, "draft": None})


#: (case, keyword arguments of generate; "rule" selects generate_lossy)
TINY_CASES = {
    "ar": dict(decoder="ar"),
    "vsps": dict(decoder="vsps"),
    "mpfr-B2-keyed": dict(decoder="mpfr", B=2, key=7),
    "mpfr-B3-tree": dict(decoder="mpfr", B=3, key="k", tree=True),
    "specinfer-B2-per-path": dict(decoder="specinfer", B=2, batch_verify=False),
    "pfr-window-none": dict(decoder="pfr", key=b"x", window=None),
    "vsps-shared": dict(decoder="vsps", share_forwards=True),
    "mpfr-B2-shared": dict(decoder="mpfr", B=2, key=3, share_forwards=True),
    "lossy-lenience": dict(rule="lenience", ell=0.5),
    "vsps-prefix-cache": dict(decoder="vsps", prefix_cache=True),
    "ar-no-eos-stop": dict(decoder="ar", stop_at_eos=False),
    # prompt-lookup drafts: the default gate, no gate, multi-draft, a gate that drafts, and
    # the back-off to shorter suffixes (min=1)
    "vsps-ngram2": dict(decoder="vsps", draft="ngram:2"),
    "vsps-ngram2-free": dict(decoder="vsps", draft="ngram:2:fixed=0:cost=0"),
    "mpfr-B2-ngram2-free": dict(decoder="mpfr", B=2, key=7, draft="ngram:2:fixed=0:cost=0"),
    "vsps-ngram3-cost": dict(decoder="vsps", draft="ngram:3:fixed=0:cost=0.3"),
    "vsps-ngram3-min1": dict(decoder="vsps", draft="ngram:3:min=1:fixed=0:cost=0.3"),
}

TINY_PINNED = {
    "ar": "b1b71760de5f8382", "vsps": "3ddd27566f189ca1", "mpfr-B2-keyed": "4fec80bf49811cc1",
    "mpfr-B3-tree": "d0578f5aeaa83221", "specinfer-B2-per-path": "d48e1dae36d2f2cc",
    "pfr-window-none": "6a92f1f96cebe9cd", "vsps-shared": "3ddd27566f189ca1",
    "mpfr-B2-shared": "1dd1d7ae16e9521a", "lossy-lenience": "52ba28312f7a7187",
    "vsps-prefix-cache": "3ddd27566f189ca1", "ar-no-eos-stop": "b1b71760de5f8382",
    # the first four recorded before the back-off existed (the same values after it)
    "vsps-ngram2": "b6aec927e312aa5b", "vsps-ngram2-free": "aa597fae6101032a",
    "mpfr-B2-ngram2-free": "176b0affdb3f074d", "vsps-ngram3-cost": "ca4a1d7892f2169a",
    "vsps-ngram3-min1": "6c03332dbd4b4284",
}

EMBEDDED_CASES = {
    "vsps": dict(decoder="vsps"),
    "mpfr-B2": dict(decoder="mpfr", B=2, key=42),
    "ar": dict(decoder="ar"),
}

EMBEDDED_PINNED = {
    "vsps": "11616d4c639c54d6", "mpfr-B2": "3efe906189870446", "ar": "88b945e14d6717b8",
}


def _run(pair, kwargs, seed, max_new_tokens):
    kwargs = dict(kwargs)
    if kwargs.pop("prefix_cache", False):
        pc = PrefixCache()
        generate(pair, PROMPT if pair.vocab_size < 100 else "Name a colour.", seed=seed + 1,
                 max_new_tokens=2, prefix_cache=pc, **kwargs)  # fills the cache
        kwargs["prefix_cache"] = pc
    prompt = PROMPT if pair.vocab_size < 100 else "Name a colour."
    if "rule" in kwargs:
        rule = kwargs.pop("rule")
        return generate_lossy(pair, prompt, rule, L=3, seed=seed,
                              max_new_tokens=max_new_tokens, **kwargs)
    return generate(pair, prompt, L=3, seed=seed, max_new_tokens=max_new_tokens, **kwargs)


@pytest.fixture(scope="module")
def tiny():
    return tiny_pair()


@pytest.mark.parametrize("case", list(TINY_CASES))
def test_generate_on_a_tiny_llama_is_pinned(tiny, case):
    assert fingerprint(_run(tiny, TINY_CASES[case], 5, 24)) == TINY_PINNED[case]


@pytest.mark.parametrize("case", list(EMBEDDED_CASES))
def test_generate_on_the_embedded_model_is_pinned(llm_pair, case):
    assert fingerprint(_run(llm_pair, EMBEDDED_CASES[case], 11, 8)) == EMBEDDED_PINNED[case]


if __name__ == "__main__":  # recompute the pinned values (a deliberate change of decoding)
    from specbound.llm import load_pair

    pair = tiny_pair()
    print({c: fingerprint(_run(pair, kw, 5, 24)) for c, kw in TINY_CASES.items()})
    big = load_pair("embedded", draft="temperature:1.5", device="cpu")
    print({c: fingerprint(_run(big, kw, 11, 8)) for c, kw in EMBEDDED_CASES.items()})
