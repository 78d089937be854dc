"""Real-model decoding runs shared by ``real_crosscheck`` and ``real_watermarks``.

The studies of Liu, Wan, Gao & Gündüz (2026, arXiv:2609.21858, §6, App. D) at embedded
scale: the embedded SmolLM2-135M-Instruct target (``specbound.llm.load_pair("embedded")``),
processed with temperature 1 and top-k 50 (the paper's App. D.1 setting) for target and
drafts alike, on CPU with one torch thread per process.

Settings (:class:`RealSettings`)
    Prompts: 64 by default, from three sets: the first ``per_set`` = 24 HumanEval and 24
    ShareGPT prompts of ``specbound.llm.prompts(name, 64, seed=0)`` whose chat-formatted
    encoding has at most ``max_prompt_tokens`` = 160 tokens (long ShareGPT prompts would make
    every prefill dominate the run), and the summarisation set ``sharegpt_summarize``
    (:func:`summarize_prompts`: ShareGPT prompts that ask to summarise a text they contain;
    the 16 of at most ``summarize_prompt_tokens`` = 640 tokens, since they carry the text),
    read from their wheels at run time.  Each prompt is decoded for exactly
    ``max_new_tokens`` = 64 tokens (``stop_at_eos=False``: every sequence has the same length,
    as the detection budgets need), unkeyed seed ``run_seed + prompt index`` (the same for
    every decoder, L, B and draft), one watermark key, whole-prefix keyed labels
    (``window=None``: no context repeats, so the clocks of every new context are fresh, which
    the acceptance theory and the exact i.i.d. detection null both need).
    Drafts: D0 ``temperature:1.5`` (the default draft), and for the drafter substitution
    ``temperature:0.5``, ``temperature:0.8``, ``temperature:2.5`` (:data:`SUBSTITUTE_DRAFTS`).
    :attr:`RunSpec.seed` ``k > 0`` gives a configuration an independent unkeyed stream
    (repeated plain samples); ``ar`` runs also store the entropy of the target's processed
    law at every generated position (:class:`EntropyLog`).

Decoding: all prompts of a configuration are decoded together by
:func:`specbound.llm.generate_batch` (one batched model forward per step for every live
prompt; prompt ``i`` emits the tokens of ``generate`` with its seed up to float32 rounding
of the batched forwards), in groups of similar prompt length of at most
:data:`BATCH_SEQUENCES` sequences (prompts x draft paths) and :data:`BATCH_POSITIONS` padded
cache positions (:func:`chunks`), which bounds the memory of the batched KV caches. A
``temperature:T`` draft is the target's own forward at another temperature, so the target
shares the draft's forwards (``share_forwards=True``: one forward per drafted token gives
both laws and the verification forwards only the leaves; :func:`share_forwards`); the other
drafts verify multi-draft paths as a token tree (``tree=True``).

Runs (:class:`RunSpec`, one stored configuration of the sweep per decoder, L, B and draft;
one CSV row per prompt) go to ``real_runs.csv`` through :mod:`specbound.sweep`, so an
interrupted study resumes and the two scripts share the runs they both need (``vsps`` and
``pfr`` at L = 4, ``mpfr`` and ``invariant`` at B = 2, 4). Every row holds the full token
sequence, the emitted tokens per block and, for decoders with a per-context acceptance
scheme, every decision's ``nu``, outcome and exact predicted acceptance
(:func:`specbound.llm.decision_acceptance` on the distributions the decoder read, recorded
by :class:`specbound.llm.ContextRecorder`), plus the forward, total and CPU seconds (a row's
share of its batch: the batch's CPU time of the process over its prompts) and the model
evaluations the row counted (``n_target_evals``, ``n_draft_evals``). A worker process keeps
the prompts' prefill forwards in one :class:`specbound.llm.PrefixCache` for all the
configurations it runs (the tokens are those of uncached runs bit for bit; the timings of a
run that found its prefill there exclude it), and the configurations start costliest first
(:func:`expected_cost`).
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from dataclasses import asdict, dataclass, replace

import numpy as np
import pandas as pd

from paper_figs import _wm_common as wc
from paper_figs._common import Param, out_path

#: bump when a change in the code changes the numbers (invalidates resumed rows)
VERSION = 4
RUNS = "real_runs"
D0 = "temperature:1.5"
#: the drafts the drafter substitution puts in place of D0: the target at other temperatures,
#: each sharing the target's forwards (the shipped log's ``early_exit:28`` and ``quantized:3``
#: keep a KV cache of their own: at 64 prompts a worker decoding with them held 11.5 GB and
#: the run did not fit a 23 GB machine)
SUBSTITUTE_DRAFTS = ("temperature:0.5", "temperature:0.8", "temperature:2.5")


@dataclass(frozen=True)
class RealSettings:
    """Model, processing, prompts and sizes shared by the real-model studies."""

    target: str = "embedded"
    draft: str = D0
    temperature: float = 1.0
    top_k: int = 50
    per_set: int = 24
    max_prompt_tokens: int = 160
    max_new_tokens: int = 64
    key: str = "specbound-real-study"
    run_seed: int = 2026
    prompt_seed: int = 0
    sets: tuple = ("humaneval", "sharegpt", "sharegpt_summarize")
    quick: bool = False
    #: the prompt limit of the summarisation set (its prompts carry the text to summarise)
    summarize_prompt_tokens: int = 640

    def signature(self) -> str:
        blob = json.dumps([VERSION, asdict(self)], sort_keys=True)
        return hashlib.blake2b(blob.encode(), digest_size=6).hexdigest()

    def columns(self) -> dict:
        d = asdict(self)
        d["sets"] = "+".join(self.sets)
        return d

    def prompt_limit(self, name: str) -> int:
        """Largest chat-formatted prompt length (tokens) admitted from prompt set ``name``."""
        return self.summarize_prompt_tokens if name == SUMMARIZE_SET else self.max_prompt_tokens

    def base(self) -> RealSettings:
        """These settings as plain :class:`RealSettings` (a subclass's own fields dropped):
        the settings, and so the store, of the decoding runs themselves."""
        import dataclasses

        names = {f.name for f in dataclasses.fields(RealSettings)}
        return RealSettings(**{k: v for k, v in asdict(self).items() if k in names})


FULL = RealSettings()
QUICK = RealSettings(per_set=1, max_prompt_tokens=64, max_new_tokens=6, sets=("sharegpt",),
                     quick=True)


def _source_message(target) -> str | None:
    """Why ``--target`` names no model (the command line's rule), or None."""
    import argparse

    from specbound.cli import model_source

    if target is None:
        return None
    try:
        model_source(target)
    except argparse.ArgumentTypeError as exc:
        return str(exc)
    return None


def _draft_message(draft) -> str | None:
    """Why ``--draft`` is not a draft spec (``specbound.llm.parse_draft``), or None."""
    if draft is None:
        return None
    from specbound.llm.drafts import parse_draft

    try:
        parse_draft(draft)
    except ValueError as exc:
        msg = str(exc)
        return msg[len("draft: "):] if msg.startswith("draft: ") else msg
    return None


#: the prompts drawn from each prompt set (``specbound.llm.prompts(name, 64, ...)``): the
#: most ``--prompts`` can take from a set
PROMPT_POOL = 64


def real_params(full: RealSettings = FULL, quick: RealSettings = QUICK, runs=None
                ) -> tuple[Param, ...]:
    """The parameters of a real-model study whose settings are ``full`` and ``quick``:
    ``target``, ``draft`` (the model pair), ``prompts`` (per prompt set), ``tokens`` (new
    tokens per prompt), ``prompt_tokens`` (longest prompt admitted); see :func:`settings`.
    ``runs(values)``: the study's decoding runs, ``[(settings, [RunSpec, ...]), ...]``; with
    it the sizes carry the run's memory estimate (:func:`memory_hook`) and ``--tokens``,
    ``--prompt-tokens`` and ``--summary-prompt-tokens`` are checked against the target's
    context window (:func:`context_message`)."""
    hook = (lambda name: None) if runs is None else (lambda name: memory_hook(name, runs))
    fits = ((lambda name: None) if runs is None else
            (lambda name: lambda v: context_message(v, runs, name)))
    return (
        Param("target", "str", None, None,
              "target model (specbound.llm.load_pair; None: the embedded model)",
              check=lambda v: _source_message(v.target)),
        Param("draft", "str", None, None, f"draft D0 (None: {D0})",
              check=lambda v: _draft_message(v.draft)),
        Param("prompts", "int", full.per_set, quick.per_set,
              f"prompts per prompt set (at most the {PROMPT_POOL} drawn from each set)",
              low=1, high=PROMPT_POOL, memory=hook("prompts")),
        Param("tokens", "int", full.max_new_tokens, quick.max_new_tokens,
              "new tokens per prompt", low=1, memory=hook("tokens"), check=fits("tokens")),
        Param("prompt_tokens", "int", full.max_prompt_tokens, quick.max_prompt_tokens,
              "longest chat-formatted prompt admitted (tokens)", low=1,
              memory=hook("prompt_tokens"), check=fits("prompt_tokens")),
        Param("summary_prompt_tokens", "int", full.summarize_prompt_tokens,
              quick.summarize_prompt_tokens,
              "longest summarisation prompt admitted (tokens; its prompts carry the text)",
              low=1, memory=hook("summary_prompt_tokens"), check=fits("summary_prompt_tokens")),
    )


PARAMS = real_params()


# ----------------------------------------------------------------------- memory estimate

#: the most bytes of prompt prefills :func:`prefix_cache` keeps (``PrefixCache``'s default
#: bound), counted in every worker's estimate (:func:`decoding_memory`)
PREFIX_CACHE_BYTES = 512 * 2**20
#: a stored run row (one prompt of one configuration) as the study holds it (a Python dict
#: and its DataFrame row): a fixed part and a part per position of the sequence (its token
#: ids, emitted counts and decisions as text, about 8 characters each, in the dict, the CSV
#: line and the frame); an upper estimate, not a measurement
ROW_BYTES = 4096
ROW_BYTES_PER_POSITION = 64
#: the full-mode value of each size a study's memory grows with, to name the flag made
#: large (:func:`memory_hook`); a list counts its largest value (``tau``: its length)
SIZE_DEFAULTS = {"prompts": FULL.per_set, "tokens": FULL.max_new_tokens,
                 "prompt_tokens": FULL.max_prompt_tokens,
                 "summary_prompt_tokens": FULL.summarize_prompt_tokens,
                 "B": 2, "L": 4, "summaries": 16, "floor": 4, "tau": 1}


def model_metadata(target) -> dict:
    """What the target's files say (:func:`specbound.cli.target_metadata`: layers, KV heads,
    head size, vocabulary, context window, parameters, dtype; nothing is loaded); an empty
    dict where they cannot be read."""
    from specbound.cli import target_metadata

    try:
        return target_metadata(str(target or "embedded"))
    except Exception:  # noqa: BLE001 - unreadable files: no estimate (the load reports them)
        return {}


def _draft_layers(draft: str, layers: int) -> int:
    """Layers of KV cache a draft keeps of its own: none for the target at another
    temperature (it shares the target's forwards) and for an n-gram draft (no model); ``K``
    for ``early_exit:K``; the target's for the others (a quantized copy, another model)."""
    kind, _, arg = str(draft).partition(":")
    if kind in ("temperature", "ngram"):
        return 0
    if kind == "early_exit":
        try:
            return min(int(arg), layers)
        except ValueError:
            return layers
    return layers


#: what a worker's batched decoding holds at its peak, in units of the batch's KV caches and
#: logits as :func:`specbound.cli.generate_memory` counts them (:func:`decoding_memory`):
#: the batch store is rebuilt while the old one is alive, transformers expands the caches
#: of SmolLM2's 3 key-value heads to its 9 query heads in every attention call, the
#: processed distributions are copied in float64, and freed blocks stay in the process.
#: Calibrated on measured peaks (resident memory, ``ru_maxrss``) of the embedded model: one
#: worker decoding 64 prompts (64 new tokens, L = 4, a shared temperature draft;
#: benchmarks/README.md, "Persistent batch cache") held 4.54 GB with ``vsps`` and 7.22 GB
#: with ``mpfr`` B = 2 (a tree of draft paths), against counted caches and logits of 1.0 GB
#: above 1.5 GB of weights, interpreter and prefills (factors 3.0 and 5.6); ``vsps`` on the
#: studies' own 64 prompts (``FULL``) held 4.66 GB (estimated 4.89 GB); the largest process
#: of a full ``make reproduce`` held 8.2 GB (README), which the tree factor covers for the
#: studies' ``mpfr`` B = 2 runs (8.2 GB estimated)
PATH_PEAK_FACTOR = 3.0
TREE_PEAK_FACTOR = 6.25


def decoding_memory(runs, meta: dict, processes: int) -> dict | None:
    """An estimate (bytes) of what the decoding ``runs`` (``[(settings, [RunSpec, ...])]``)
    hold at their peak, from the target's config ``meta`` (:func:`model_metadata`), before
    any model loads.  Per worker process, for the costliest configuration: its largest
    batch as :func:`_worker` groups the prompts (:func:`chunks`: at most
    :data:`BATCH_SEQUENCES` sequences, ``B`` per prompt, whose padded cache positions fit
    the configuration's budget; the prompts may be shorter than the admitted length ``P``,
    the chat-formatted limit at most the context window, so a group may hold the most
    sequences), counted by :func:`specbound.cli.generate_memory` (both KV caches, the
    draft's only where it keeps one, :func:`_draft_layers`; the verification logits and
    processed distributions) and scaled to the measured peak (:data:`PATH_PEAK_FACTOR`,
    :data:`TREE_PEAK_FACTOR` for ``B > 1``); plus the weights (once more for each
    ``quantized:`` draft, a dequantized copy), the prompt prefills (every prompt's KV
    cache, at most :data:`PREFIX_CACHE_BYTES`) and the interpreter
    (``specbound.cli.RUNTIME_BYTES``); times ``processes``.  Plus the stored rows
    (:data:`ROW_BYTES`).  ``per_process`` is one worker's estimate: about 8.2 GB (7.7 GiB)
    for the studies' ``mpfr`` B = 2 runs of the embedded model, the measured peak of one
    process of a full ``make reproduce`` (README), so a full run of a real-model study that
    decodes them is estimated at about 15.3 GiB in its two processes.  None when the config
    does not say (the model is not converted yet)."""
    from specbound.cli import RUNTIME_BYTES, generate_memory

    layers = meta.get("layers")
    if not isinstance(layers, int) or layers <= 0:
        return None
    window = meta.get("context_window")
    batch, weights, rows, prefills, drafts = 0, 0, 0, 0, set()
    for s, specs in runs:
        P = max(s.prompt_limit(name) for name in s.sets)
        if isinstance(window, int) and window > 0:
            P = min(P, window)
        N = s.max_new_tokens
        n_prompts = s.per_set * len(s.sets)
        prefill = generate_memory(meta, 1, 0, 0, P - 1, draft_layers=0)
        prefills += n_prompts * (0 if prefill is None else prefill["kv_cache"])
        for sp in resolve(specs, s):
            budget = BATCH_POSITIONS if share_forwards(sp) else BATCH_POSITIONS // 2
            # the most sequences of a group (short prompts), and those of them whose caches
            # fit the budget at the longest prompt (a group holds at least one prompt)
            seqs = max(1, min(BATCH_SEQUENCES // sp.B, n_prompts)) * sp.B
            fit = max(1, min(seqs // sp.B, budget // (sp.B * (P + N + sp.L + 1)))) * sp.B
            d_layers = _draft_layers(sp.draft, layers)
            kv = generate_memory(meta, fit, sp.L, N, P, draft_layers=d_layers)
            est = generate_memory(meta, seqs, sp.L, N, P, draft_layers=d_layers)
            if est is None or kv is None:
                return None
            factor = TREE_PEAK_FACTOR if sp.B > 1 else PATH_PEAK_FACTOR
            batch = max(batch, int(factor * (kv["kv_cache"] + est["logits"])))
            weights = est["weights"]
            drafts.add(str(sp.draft))
            rows += n_prompts * (ROW_BYTES + ROW_BYTES_PER_POSITION * (P + N))
    copies = 1 + sum(d.startswith("quantized:") for d in drafts)
    prefix = min(prefills, PREFIX_CACHE_BYTES)
    per_process = batch + weights * copies + prefix + RUNTIME_BYTES
    return {"models": processes * per_process, "rows": rows, "per_process": per_process,
            "total": processes * per_process + rows}


def study_processes(quick: bool) -> int:
    """Processes that load the model in a run: the default pool's (``_wm_common``: two in
    full mode, fewer on fewer cores), one in quick mode (serial)."""
    import os

    return 1 if quick else min(2, os.cpu_count() or 1)


def _growth(v, name: str) -> float:
    x = v.get(name)
    if x is None:
        return 0.0
    if isinstance(x, tuple):
        x = len(x) if name == "tau" else max(x)
    return float(x) / max(SIZE_DEFAULTS[name], 1)


def _study_memory(v, runs) -> int:
    memo = v.__dict__.setdefault("_real_memory", {})
    if "total" not in memo:
        meta = model_metadata(v.get("target"))
        est = decoding_memory(runs(v), meta, study_processes(v.quick)) if meta else None
        memo["total"] = 0 if est is None else int(est["total"])
    return memo["total"]


def memory_hook(name: str, runs):
    """The ``memory`` of size parameter ``name`` of a real-model study whose decoding runs
    are ``runs(values)``: the study's whole estimate (:func:`decoding_memory`) on the size
    that grew most over its full-mode value (:data:`SIZE_DEFAULTS`; the first on ties), 0 on
    the others -- so a refusal names the flag that was made large."""
    def memory(v) -> int:
        sizes = [k for k in SIZE_DEFAULTS if k in v]
        top = max(sizes, key=lambda k: _growth(v, k))
        return _study_memory(v, runs) if top == name else 0

    return memory


def fixed_runs(specs):
    """``runs(values)`` of a study that decodes the configurations ``specs`` with the
    settings of its flags (:func:`settings`), for :func:`real_params`."""
    def runs(v):
        return [(settings(v.quick, **{p.name: v[p.name] for p in PARAMS}), list(specs))]

    return runs


def context_message(v, runs, name: str = "tokens") -> str | None:
    """Why the runs do not fit the target's context window, or None (also when the config
    does not say): ``name`` ``"tokens"``, the new tokens and a block of ``L + 1`` alone do
    not fit; ``"prompt_tokens"`` / ``"summary_prompt_tokens"``, a prompt of the admitted
    length followed by them does not, or no run reads a prompt set it limits (given for
    nothing: e.g. ``--summary-prompt-tokens`` of a quick run, which reads ShareGPT alone)."""
    if name != "tokens" and name in getattr(v, "changed", {}):
        summ = name == "summary_prompt_tokens"
        read = sorted({x for s, _ in runs(v) for x in s.sets})
        if not any((x == SUMMARIZE_SET) == summ for x in read):
            return (f"has no effect: this run reads no "
                    f"{'summarisation' if summ else 'HumanEval or ShareGPT'} prompts (its "
                    f"prompt sets: {', '.join(read)})")
    window = model_metadata(v.get("target")).get("context_window")
    if not isinstance(window, int) or window <= 0:
        return None
    for s, specs in runs(v):
        L = max((sp.L for sp in specs), default=0)
        N = s.max_new_tokens
        if name == "tokens":
            if N + L + 1 >= window:
                return (f"{N} new tokens + L + 1 (L = {L}) reach the target's context window "
                        f"of {window}")
            continue
        sets = [x for x in s.sets if (x == SUMMARIZE_SET) == (name == "summary_prompt_tokens")]
        if sets and N + L + 1 < window and s.prompt_limit(sets[0]) + N + L + 1 > window:
            return (f"prompts of up to {s.prompt_limit(sets[0])} tokens + {N} new tokens + "
                    f"L + 1 (L = {L}) exceed the target's context window of {window}")
    return None


def settings(quick: bool, target: str | None = None, draft: str | None = None, *,
             base: RealSettings | None = None, prompts: int | None = None,
             tokens: int | None = None, prompt_tokens: int | None = None,
             summary_prompt_tokens: int | None = None) -> RealSettings:
    """The full or quick settings (or ``base``), with another target model or draft D0 and
    other sizes (:func:`real_params`) if given."""
    s = base if base is not None else (QUICK if quick else FULL)
    sizes = {"per_set": prompts, "max_new_tokens": tokens, "max_prompt_tokens": prompt_tokens,
             "summarize_prompt_tokens": summary_prompt_tokens}
    s = replace(s, **{k: v for k, v in sizes.items() if v is not None})
    if target is not None:
        s = replace(s, target=str(target))
    if draft is not None:
        from specbound.llm.drafts import parse_draft

        s = replace(s, draft=str(parse_draft(draft)))
    return s


@dataclass(frozen=True)
class RunSpec:
    """One decoding configuration: decoder, lookahead, number of drafts and draft."""

    decoder: str
    L: int = 4
    B: int = 1
    draft: str | None = None  # None: the settings' draft D0 (see :func:`resolve`)
    #: 0: unkeyed seed ``run_seed + prompt index`` (every study's default); k > 0: another
    #: independent stream, ``SeedSequence([run_seed, prompt index, k])`` (repeated samples)
    seed: int = 0

    @property
    def id(self) -> str:
        base = f"{self.decoder}-L{self.L}-B{self.B}-{self.draft}"
        return base if self.seed == 0 else f"{base}-s{self.seed}"

    def run_seed(self, s: RealSettings, prompt: int):
        """The unkeyed seed of this configuration's run on prompt number ``prompt``."""
        if self.seed == 0:
            return s.run_seed + prompt
        return np.random.SeedSequence([s.run_seed, prompt, self.seed])


def resolve(specs, s: RealSettings) -> list[RunSpec]:
    """``specs`` with the settings' draft where a spec names none."""
    return [sp if sp.draft is not None else replace(sp, draft=s.draft) for sp in specs]


def substitute_drafts(s: RealSettings) -> tuple[str, ...]:
    """D0 followed by the drafts of the substitution study (without repeating D0)."""
    return (s.draft, *[d for d in SUBSTITUTE_DRAFTS if d != s.draft])


# ----------------------------------------------------------------------------- models

_PAIRS: dict = {}


def pair_for(s: RealSettings, draft: str):
    """The model pair of the settings with ``draft``: the target is loaded once per process and
    each draft built from it once; the settings' logits processing is applied with
    :meth:`~specbound.llm.ModelPair.with_processing`, so studies at other temperatures share
    the loaded modules (the processing is the same computation either way)."""
    import torch

    from specbound import llm

    torch.set_num_threads(1)
    model_key = (s.target,)
    if model_key not in _PAIRS:
        _PAIRS[model_key] = llm.load_pair(s.target, draft=D0, device="cpu")
    draft_key = (s.target, draft)
    if draft_key not in _PAIRS:
        _PAIRS[draft_key] = _PAIRS[model_key].with_draft(draft)
    key = (s.target, draft, s.temperature, s.top_k)
    if key not in _PAIRS:
        _PAIRS[key] = _PAIRS[draft_key].with_processing(temperature=s.temperature,
                                                        top_k=s.top_k)
    return _PAIRS[key]


def prompt_texts(s: RealSettings, pair=None) -> list[tuple[str, int, str]]:
    """``(set name, index in its sample, text)`` of the study's prompts (see the module
    docstring); deterministic."""
    from specbound import llm

    pair = pair_for(s, s.draft) if pair is None else pair
    out = []
    for name in s.sets:
        k = 0
        pool = (summarize_prompts(s.prompt_seed) if name == SUMMARIZE_SET
                else llm.prompts(name, 64, seed=s.prompt_seed))
        for i, text in enumerate(pool):
            if pair.encode_prompt(text).size <= s.prompt_limit(name):
                out.append((name, i, text))
                k += 1
                if k == s.per_set:
                    break
    return out


#: the summarisation-like prompt set drawn from ShareGPT (:func:`summarize_prompts`)
SUMMARIZE_SET = "sharegpt_summarize"
_ASKS_SUMMARY = re.compile(r"\b(summari[sz]e|summary|summari[sz]ation)\b", re.IGNORECASE)
_REFUSES_SUMMARY = re.compile(r"\b(not|don't|dont|never)\s+summar", re.IGNORECASE)
SUMMARIZE_MAX_HEAD = 200
SUMMARIZE_MIN_TEXT = 300


def summarize_prompts(seed=0) -> list[str]:
    """ShareGPT prompts that ask to summarise a text they contain, in the order of
    ``specbound.llm.prompts("sharegpt", all, seed=seed)``.

    The rule: the prompt's first line (up to the first newline) has at most
    :data:`SUMMARIZE_MAX_HEAD` characters and contains "summarize", "summarise", "summary"
    or "summarization" (any case, whole word) but no "not / don't / never summar...", and the
    rest of the prompt (the text to summarise) has at least :data:`SUMMARIZE_MIN_TEXT`
    characters once stripped.  The texts are read from the ShareGPT wheel at run time (about
    30 of the 9,319 prompts qualify).
    """
    from specbound import llm
    from specbound.llm.prompt_sets import prompt_set_size

    return [text for text in llm.prompts("sharegpt", prompt_set_size("sharegpt"), seed=seed)
            if asks_to_summarize(text)]


def asks_to_summarize(text: str) -> bool:
    """The selection rule of :func:`summarize_prompts` for one prompt."""
    head, _, rest = text.partition("\n")
    return bool(len(head) <= SUMMARIZE_MAX_HEAD and _ASKS_SUMMARY.search(head)
                and not _REFUSES_SUMMARY.search(head)
                and len(rest.strip()) >= SUMMARIZE_MIN_TEXT)


class EntropyLog:
    """A ``log=`` target for :func:`specbound.llm.generate` that keeps, per context length,
    the entropy (nats) of the target's processed next-token law (the first record of each
    length; an autoregressive run visits each length once)."""

    def __init__(self):
        self._h: dict[int, float] = {}

    def record(self, prompt_id, context_tokens, p, qs) -> None:
        n = int(np.asarray(context_tokens).size)
        if n not in self._h:
            p = np.asarray(p, dtype=np.float64).reshape(-1)
            p = p[p > 0]
            self._h[n] = float(-(p * np.log(p)).sum())

    def entropy(self, n: int) -> float:
        """Entropy at the context of length ``n`` (NaN if it was not recorded)."""
        return self._h.get(int(n), float("nan"))


def _join(a) -> str:
    return " ".join(repr(float(x)) if isinstance(x, float | np.floating) else str(int(x))
                    for x in a)


#: quick-mode rows already computed in this process (the runs are deterministic, so a smoke
#: test that runs several quick studies computes each configuration once)
_QUICK_MEMO: dict = {}


def worker(arg) -> list[dict]:
    """All prompts of one :class:`RunSpec` (arg = ``(settings, spec)``)."""
    s, spec = arg
    spec = resolve([spec], s)[0]
    if s.quick:
        if arg not in _QUICK_MEMO:
            _QUICK_MEMO[arg] = _worker(s, spec)
        return [dict(r) for r in _QUICK_MEMO[arg]]
    return _worker(s, spec)


#: this process's prompt prefills (``specbound.llm.PrefixCache``): the runs of a prompt share
#: them across the configurations a worker process runs (same tokens bit for bit)
_PREFIXES = None


def prefix_cache():
    """The process's :class:`specbound.llm.PrefixCache` (made on first use)."""
    global _PREFIXES
    if _PREFIXES is None:
        from specbound import llm

        _PREFIXES = llm.PrefixCache()
    return _PREFIXES


def expected_cost(spec: RunSpec) -> float:
    """A rough relative CPU cost per generated token of a configuration (measured on the
    embedded model: a speculative block costs about 1.8 plain tokens per emitted token with a
    temperature draft, twice that with the drafts that accept less; more drafts and a longer
    lookahead a little more), used only to start the costliest configurations first."""
    if spec.decoder == "ar":
        return 1.0
    draft = str(spec.draft or D0)
    kind = 1.0 if draft.startswith("temperature:") else 2.0
    return 1.8 * kind * (0.6 + 0.1 * spec.L) * (1.0 + 0.05 * (spec.B - 1))


class _EntropyLogs:
    """One :class:`EntropyLog` per prompt of a batched run (``log.record`` gets the prompt's
    index as ``prompt_id``)."""

    def __init__(self):
        self.logs: dict[int, EntropyLog] = {}

    def record(self, prompt_id, context_tokens, p, qs) -> None:
        self.logs.setdefault(int(prompt_id), EntropyLog()).record(prompt_id, context_tokens,
                                                                 p, qs)

    def entropy(self, prompt_id: int, n: int) -> float:
        log = self.logs.get(int(prompt_id))
        return float("nan") if log is None else log.entropy(n)


#: the most sequences (prompts x draft paths) decoded together in one batched run, and the
#: most cache positions they may span together (sequences x the longest prompt plus the new
#: tokens): the batched caches are padded to the longest sequence of the batch, so the
#: prompts are grouped by length (:func:`chunks`)
BATCH_SEQUENCES = 64
BATCH_POSITIONS = 64 * 256


def chunks(lengths, B: int, new_tokens: int, positions: int = BATCH_POSITIONS
           ) -> list[list[int]]:
    """Groups of prompt indices decoded together: the prompts in order of length (shortest
    first, ties by index), cut where a group would exceed :data:`BATCH_SEQUENCES` sequences
    (``B`` per prompt) or ``positions`` padded cache positions (default
    :data:`BATCH_POSITIONS`; half of it for a draft with its own KV cache, :func:`_worker`)."""
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    out, cur = [], []
    for i in order:
        rows = (len(cur) + 1) * B
        if cur and (rows > BATCH_SEQUENCES or rows * (lengths[i] + new_tokens) > positions):
            out.append(cur)
            cur = []
        cur.append(i)
    if cur:
        out.append(cur)
    return out


class _Indexed:
    """A ``log=`` target that maps a batch's prompt ids to the study's prompt numbers."""

    def __init__(self, log, ids: list[int]):
        self.log, self.ids = log, ids

    def record(self, prompt_id, context_tokens, p, qs) -> None:
        self.log.record(self.ids[int(prompt_id)], context_tokens, p, qs)


def _worker(s: RealSettings, spec: RunSpec) -> list[dict]:
    """Every prompt of ``spec`` decoded together (:func:`specbound.llm.generate_batch`: one
    batched forward per step for all prompts; prompt ``i`` emits the tokens of
    ``generate(..., seed=spec.run_seed(s, i))`` up to float32 rounding of the batched
    forwards); a temperature draft shares the target's forwards (``share_forwards``)."""
    from specbound import llm
    from specbound.sim.decode import DECODER_SCHEME

    pair = pair_for(s, spec.draft)
    cache = prefix_cache()
    texts = prompt_texts(s)
    rec = _EntropyLogs() if spec.decoder == "ar" else llm.ContextRecorder()
    share = share_forwards(spec)
    # an ngram draft's gate as in generate (one sequence), not priced for the batch: the
    # study measures the drafter, and a row then emits generate's tokens
    options = {"share_forwards": True} if share else {"tree": spec.B > 1, "batch_gate": False}
    seeds = [spec.run_seed(s, i) for i in range(len(texts))]
    # the sequences of one batched step and the padded cache positions are bounded: the
    # prompts go in groups of similar length (chunks); results are in prompt order
    lengths = [int(pair.encode_prompt(t).size) for _, _, t in texts]
    results, batches = [None] * len(texts), [None] * len(texts)
    cpu0 = time.process_time()
    # a draft that is not the target's view keeps a KV cache of its own: half the positions
    # (a worker with such a draft held 13 GB at the full budget and was killed for memory)
    budget = BATCH_POSITIONS if share else BATCH_POSITIONS // 2
    for ids in chunks(lengths, spec.B, s.max_new_tokens, budget):
        batch = llm.generate_batch(pair, [texts[i][2] for i in ids], spec.decoder,
                                   L=spec.L, B=spec.B, key=s.key, window=None,
                                   max_new_tokens=s.max_new_tokens, seed=[seeds[i] for i in ids],
                                   stop_at_eos=False, log=_Indexed(rec, ids), prefix_cache=cache,
                                   **options)
        for i, r in zip(ids, batch.rows, strict=True):
            results[i], batches[i] = r, batch
    cpu = time.process_time() - cpu0
    rows = []
    for i, ((name, idx, _), r, batch) in enumerate(zip(texts, results, batches, strict=True)):
        row = {"decoder": spec.decoder, "L": spec.L, "B": spec.B, "draft": spec.draft,
               "prompt": i, "prompt_set": name, "prompt_index": idx,
               "prompt_length": int(r.prompt_length), "n_generated": int(r.generated.size),
               "n_blocks": int(r.emitted_per_block.size), "aatps": float(r.aatps),
               "target_seconds": r.target_seconds, "draft_seconds": r.draft_seconds,
               "total_seconds": r.total_seconds, "cpu_seconds": cpu / len(texts),
               "batch_seconds": batch.total_seconds, "batch_rows": len(batch.rows),
               "shared_forwards": share,
               "n_target_evals": int(r.n_target_evals),
               "n_draft_evals": int(r.n_draft_evals),
               "tokens": _join(r.tokens), "emitted": _join(r.emitted_per_block)}
        if spec.decoder == "ar":  # entropy of the law each generated token was drawn from
            row["entropy"] = _join(rec.entropy(i, r.prompt_length + t)
                                   for t in range(r.generated.size))
        if spec.decoder in DECODER_SCHEME:
            dec = llm.decision_acceptance(r, rec, prompt_id=i)
            blocks = llm.block_crosscheck(r, dec)
            row.update(dec_block=_join(dec["block"]), dec_nu=_join(dec["nu"]),
                       dec_accepted=_join(dec["accepted"].astype(int)),
                       dec_predicted=_join(dec["predicted"].astype(float)),
                       accepted=int(blocks["accepted"].sum()),
                       predicted=float(blocks["predicted"].sum()))
        row.update({f"setting_{k}": v for k, v in s.columns().items()})
        rows.append(row)
    return rows


def share_forwards(spec: RunSpec) -> bool:
    """Whether ``spec``'s draft is the target at another temperature, whose forwards the
    target shares (``generate_batch(..., share_forwards=True)``: one forward per drafted
    token gives both laws, the verification forwards only the leaves)."""
    return str(spec.draft or D0).startswith("temperature:")


def runs(out_dir, specs, s: RealSettings, *, executor=None, progress: bool = True,
         desc: str = RUNS, store: str = RUNS) -> pd.DataFrame:
    """Run (or resume) ``specs`` in the store ``STORE.csv`` (default the shared
    ``real_runs.csv``; a study with other settings keeps its own, since a store holds the
    rows of one signature); their rows."""
    store = wc.ResumableCSV(out_path(out_dir, f"{store}.csv"), s.signature())
    specs = list(dict.fromkeys(resolve(specs, s)))
    # costliest first, so that the last configuration to finish is a short one
    order = sorted(specs, key=expected_cost, reverse=True)
    configs = [(sp.id, (s, sp)) for sp in order]
    df = wc.study_sweep(configs, worker, store, quick=s.quick, executor=executor, desc=desc,
                        progress=progress)
    df = df[df["config"].isin({sp.id for sp in specs})].reset_index(drop=True)
    report_prompts(desc, df, s)
    return df


def prompts_used(df: pd.DataFrame, s: RealSettings) -> dict[str, int]:
    """The prompts of each prompt set of ``s`` that the runs ``df`` decoded: at most
    ``s.per_set``, fewer where fewer of the drawn prompts fit the set's prompt limit
    (:meth:`RealSettings.prompt_limit`; e.g. 16 of the 31 summarisation prompts fit 640
    tokens)."""
    if df.empty or not {"prompt_set", "prompt"} <= set(df.columns):
        return dict.fromkeys(s.sets, 0)
    seen = df[["prompt_set", "prompt"]].drop_duplicates()["prompt_set"].value_counts()
    return {name: int(seen.get(name, 0)) for name in s.sets}


def shortfall_text(s: RealSettings, used: dict[str, int]) -> list[str]:
    """One sentence per prompt set of ``s`` that gave fewer prompts than the ``s.per_set``
    asked (:func:`prompts_used`), saying how many were used and why; empty if none."""
    out = []
    for name in s.sets:
        n = used.get(name, 0)
        if n < s.per_set:
            flag = "--summary-prompt-tokens" if name == SUMMARIZE_SET else "--prompt-tokens"
            out.append(f"prompt set {name}: {n} prompts used, not the {s.per_set} asked: only "
                       f"{n} of the prompts drawn fit its {s.prompt_limit(name)}-token limit "
                       f"({flag})")
    return out


#: the shortfalls already said in this process (:func:`report_prompts`: once per study and
#: settings, not once per group of runs)
_SAID: set = set()


def report_prompts(desc: str, df: pd.DataFrame, s: RealSettings) -> None:
    """Say on stderr (``[DESC] ...``, once per study and settings) every prompt set of ``s``
    from which the runs ``df`` decoded fewer prompts than asked (:func:`shortfall_text`):
    never a silent shortfall; the study's tables record the numbers used (``n_prompts``)."""
    from paper_figs._common import note

    name = desc.split(" ", 1)[0]
    for text in shortfall_text(s, prompts_used(df, s)):
        key = (name, s.target, s.prompt_seed, text)
        if key not in _SAID:
            _SAID.add(key)
            note(name, text)


def parse(text, dtype=float) -> np.ndarray:
    """A space-joined column of :func:`worker` as an array."""
    if isinstance(text, float) and np.isnan(text):
        return np.empty(0, dtype=dtype)
    return np.array(str(text).split(), dtype=dtype)


def select(df: pd.DataFrame, spec: RunSpec) -> pd.DataFrame:
    """The rows (one per prompt) of one resolved configuration, in prompt order."""
    sub = df[df["config"] == spec.id].sort_values("prompt")
    if sub.empty:
        raise ValueError(f"spec: no runs of {spec.id}")
    return sub


def sequences(sub: pd.DataFrame) -> list[tuple[np.ndarray, int]]:
    """``(tokens, prompt_length)`` of every run of ``sub``."""
    return [(parse(r["tokens"], np.int64), int(r["prompt_length"])) for _, r in sub.iterrows()]
