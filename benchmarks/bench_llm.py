"""Decoders on the embedded model (CPU) against transformers' own generation, in one run.

Run ``python -m benchmarks.bench_llm [MODE] [--tokens N] [--rounds R] [--out DIR]``.  Every
mode loads the embedded SmolLM2-135M-Instruct (float32 unless ``--dtype`` says otherwise,
torch on ``--threads`` threads, default 1) with one processing for both sides: temperature
1, top-k 50.  Neither side stops at end-of-sequence (specbound ``stop_at_eos=False``;
transformers ``eos_token_id=None``, so end-of-sequence is sampled and decoding goes on: the
same law and the same length on both sides).

The method, the same for every comparison (:func:`_measure`): every round runs every row
once, the rows' order reversed from one round to the next; each round has its own seeds
and watermark key (round ``r``: specbound ``seed = r`` (one seed per prompt when batched),
``key = 42 + r``; transformers ``torch.manual_seed(r)``); a ratio is taken within a round
and reported as the median over rounds with its min and max; rates are wall-clock
(``time.perf_counter`` around the whole call, prefill included) and reported as the median
over rounds with min and max; the load average and ``uptime`` are printed before and after
and written to the CSV.  Rounds: at least 7 for the rows against transformers, 5 otherwise.

Modes (one per invocation):

- default: one chat prompt, ``ar`` against transformers' ``generate(do_sample=True)``, and
  for every draft of ``--drafts`` (default ``early_exit:20``) ``vsps`` against transformers'
  assisted generation with the same draft module as ``assistant_model``
  (``num_assistant_tokens = L``, constant schedule, no confidence cut-off); ``--all`` adds
  every other decoder (``B = 4`` for the multi-draft ones).  Per row: AATPS, target forwards
  per emitted token (transformers': counted with a forward hook), tokens/s, the ratio to
  ``ar`` (specbound rows) or to transformers' sampling (transformers rows), and the time
  outside model forwards over the time inside (specbound).  ``bench_llm.csv``.
- ``--sweep``: ``vsps`` with ``early_exit:k`` drafts (``--ks``, default 1,2,4,8) at
  ``L`` in ``--Ls`` (default 2,4) against ``ar``, one prompt: where speculation pays on
  this CPU.  ``bench_llm_sweep.csv``.
- ``--batch``: batched against one-at-a-time decoding (below).  ``bench_llm_batch.csv``.
- ``--batch-hf``: ``generate_batch(..., "ar")`` against transformers' batched
  ``generate(do_sample=True)`` on the same left-padded batch of the ``--prompts`` shortest
  of 40 HumanEval and 40 ShareGPT prompts (half each).  ``bench_llm_batch_hf.csv``.
- ``--threads-compare``: ``ar`` batched and one at a time on the same short prompts, torch on
  1 and on 2 threads (``torch.set_num_threads`` between rows; the only mode where threads
  vary).  ``bench_llm_threads.csv``.
- ``--memory``: peak resident memory of ``ar``/``vsps`` on one prompt against the batched
  run of the short prompts, each in a fresh subprocess (``resource.getrusage`` maxrss for
  the whole process, and the peak above the resident size after loading and a 2-token
  warm-up, which pages the memory-mapped weights in: ``VmHWM`` of ``/proc/self/status``
  after resetting it through ``/proc/self/clear_refs``).
  ``bench_llm_memory.csv``.
- ``--dtype``: float32 against ``bfloat16`` (``load_pair(dtype="bfloat16")``) and int8
  (``torch.ao.quantization.quantize_dynamic`` of every ``nn.Linear`` of the float32 target):
  ``ar`` tokens/s on one prompt, and the largest total-variation distance between the
  float32 and the reduced-precision processed next-token distributions over every context
  of the shipped log (``specbound.llm.shipped_log()``).  ``bench_llm_dtype.csv``.

- ``--ngram``: prompt lookup, one prompt per type of ``--types`` (default all four:
  ``code``: a HumanEval prompt; ``chat``: a ShareGPT prompt; ``summaries``: a ShareGPT
  request to summarise a text it contains; ``edit``: "fix the typo in this function" built
  from a HumanEval prompt whose answer quotes it) x temperature (``--temps``, default
  0.3,0.7,1.0; top-k 50): ``vsps`` with ``ngram:3`` (the acceptance gate) and with
  ``ngram:3:fixed=0:cost=0`` (every match drafted), or the n-gram drafts of
  ``--ngram-drafts`` (e.g. ``ngram:3,ngram:3:min=1``), against ``ar`` and (unless
  ``--no-peer``) against transformers' prompt lookup (``generate(do_sample=True,
  prompt_lookup_num_tokens=L, max_matching_ngram_size=3)``, same prompt, same L, same
  processing, no end-of-sequence), rounds as above; per row AATPS, target forwards per
  token, the share of blocks that drafted (specbound), the acceptance (accepted drafts /
  decisions) and the exact break-even acceptances (below).  ``bench_llm_ngram.csv``.
- ``--ngram-multi``: ``mpfr`` B = 4 against B = 1 with ``ngram:3:fixed=0:cost=0`` (n-gram
  multi-drafts, every match drafted, so both draft at the same positions) on ``--types``
  (default code, edit) x ``--temps`` (default 0.3,1.0): AATPS pooled over the rounds, the
  theory's AATPS (every decision's exact acceptance at its recorded context,
  ``specbound.llm.decision_acceptance``) and both gains B = 4 / B = 1.  Every run records
  its contexts, so the tokens/s of both rows include that.  ``bench_llm_ngram_multi.csv``.
- ``--ngram-batch``: ``generate_batch`` with ``vsps`` and ``ngram:3`` (the gate priced at the
  batched forward, the one-sequence gate with ``batch_gate=False``, and no gate) against
  batched ``ar`` on the ``--prompts`` shortest prompts (half HumanEval, half ShareGPT).
  ``bench_llm_ngram_batch.csv``.

Break-even of prompt lookup: a block that drafts ``k`` tokens costs one ``(k + 1)``-token
target forward, ``c_k`` single-token forwards (measured once per prompt: the median of 9
timed forwards of each width over the prompt's cache; ``c_1`` and ``c_L``), and emits
``1 + A`` tokens, ``A`` its accepted drafts; plain sampling emits one token per
single-token forward.  Drafting pays where ``E[1 + A] > c_k``: with a per-token acceptance
``a`` of independent decisions ``E[1 + A] = (1 - a^(k+1)) / (1 - a)``; the smallest ``a``
with ``(1 - a^(k+1)) / (1 - a) >= c_k`` (:func:`specbound.llm.ngram.break_even`) is the
break-even reported beside the measured acceptance, for ``k = 1`` and ``k = L``.

Batched decoding (``--batch``): ``--prompts`` chat prompts (half HumanEval, half ShareGPT)
x ``N`` new tokens decoded by :func:`specbound.llm.generate_batch` (one batched forward per
step over every live prompt) against the same prompts decoded one at a time by
:func:`specbound.llm.generate`, same seeds per prompt, for ``ar``, ``vsps`` and ``mpfr``
(B = 4) with the early-exit draft, rounds as above.

Tree verification (``--tree``; ``--tree-only`` skips the default rows): ``mpfr`` at B = 2,
4, 8 (L = 4, same prompt, key and seed) verified as a token tree (``generate(...,
tree=True)``: one target forward over the unique nodes of the draft paths, Alg. 7 of Liu,
Wan, Gao & Gündüz 2026, arXiv:2609.21858) and as a batch of paths (one row per leaf path,
padded): the target tokens processed per block (every ``input_ids`` entry of the target's
forwards after the prompt prefill, counted with a forward hook), the saving, whether both
emitted the same tokens, and the time outside model forwards over model time for the tree
runs (medians over rounds).  ``bench_llm_tree.csv``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from benchmarks._csv import write_rows

PROMPT = "Write a short poem about the sea."
HF_ROUNDS, ROUNDS = 7, 5


# ----------------------------------------------------------------------------- the method


def _machine_load() -> tuple[tuple[float, float, float], str]:
    """(load average, the ``uptime`` line)."""
    up = subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    return os.getloadavg(), up


def _measure(rows, rounds):
    """Run every ``(name, fn)`` of ``rows`` once per round, the order reversed every other
    round; ``fn(round)`` returns a dict with ``n_tokens`` and ``seconds``.  Returns
    ``{name: [dict per round]}``."""
    out = {name: [] for name, _ in rows}
    for rnd in range(rounds):
        for name, fn in (rows if rnd % 2 == 0 else rows[::-1]):
            m = fn(rnd)
            m["tokens_per_s"] = m["n_tokens"] / m["seconds"]
            out[name].append(m)
            print(f"round {rnd + 1}/{rounds}: {name:<44} {m['seconds']:7.2f} s "
                  f"{m['tokens_per_s']:8.2f} tok/s", flush=True)
    return out


def _spread(values):
    """(median, min, max) of a list of numbers."""
    import numpy as np

    a = np.asarray(values, dtype=float)
    return float(np.median(a)), float(a.min()), float(a.max())


def _ratios(meas, a, b):
    """Per-round tokens/s of row ``a`` over row ``b`` (same round)."""
    return [x["tokens_per_s"] / y["tokens_per_s"] for x, y in zip(meas[a], meas[b], strict=True)]


def _summary(meas, name, ref=None, extra=()):
    """One CSV row: medians (min, max) of tokens/s, the ratio to ``ref`` and ``extra``."""
    med, lo, hi = _spread([m["tokens_per_s"] for m in meas[name]])
    row = {"row": name, "rounds": len(meas[name]),
           "n_tokens": int(meas[name][0]["n_tokens"]),
           "seconds_median": _spread([m["seconds"] for m in meas[name]])[0],
           "tok_s_median": med, "tok_s_min": lo, "tok_s_max": hi}
    if ref is not None:
        r = _ratios(meas, name, ref)
        row.update(ratio_to=ref, ratio_median=_spread(r)[0], ratio_min=min(r),
                   ratio_max=max(r), ratios=" ".join(f"{x:.3f}" for x in r))
    for k in extra:
        vals = [m[k] for m in meas[name] if m.get(k) is not None]
        row[k] = _spread(vals)[0] if vals else ""
    return row


def _write(name, rows, columns, out_dir, load_before, load_after, command):
    out_dir = Path(out_dir) if out_dir is not None else Path(__file__).parent / "out"
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    for r in rows:
        r.update(load_before=f"{load_before[0][0]:.2f}", load_after=f"{load_after[0][0]:.2f}",
                 finished=stamp, command=command)
    cols = [*columns, "load_before", "load_after", "finished", "command"]
    path = write_rows(out_dir / name, [{k: r.get(k, "") for k in cols} for r in rows], cols,
                      digits=4)
    print(f"uptime before: {load_before[1]}\nuptime after:  {load_after[1]}\nwrote {path}")
    return path


def _print_table(rows, cols):
    head = " | ".join(cols)
    print(head)
    for r in rows:
        print(" | ".join((f"{r[c]:.3f}" if isinstance(r.get(c), float) else str(r.get(c, "")))
                         for c in cols))


# ----------------------------------------------------------------------------- runners


def _hf_run(pair, ids, mask, n, seed, assistant=None, L=4):
    """One transformers ``generate(do_sample=True)`` call on a (padded) batch ``ids``: its
    wall time, tokens and target forwards (prefill included)."""
    import torch

    calls = []
    hook = pair.target.register_forward_pre_hook(lambda *a: calls.append(1))
    kw = dict(pair.generation_kwargs(), max_new_tokens=n, eos_token_id=None,
              pad_token_id=pair.tokenizer.eos_token_id)
    if assistant is not None:
        gc = assistant.generation_config
        gc.num_assistant_tokens = L
        gc.num_assistant_tokens_schedule = "constant"
        gc.assistant_confidence_threshold = 0.0
        kw["assistant_model"] = assistant
    torch.manual_seed(seed)
    t0 = time.perf_counter()
    try:
        with torch.no_grad():
            out = pair.target.generate(ids, attention_mask=mask, **kw)
    finally:
        hook.remove()
    sec = time.perf_counter() - t0
    if out.shape[1] - ids.shape[1] != n:
        raise RuntimeError(f"transformers generated {out.shape[1] - ids.shape[1]} != {n}")
    return {"n_tokens": n * ids.shape[0], "seconds": sec, "aatps": n / len(calls),
            "target_forwards_per_token": len(calls) / n}


def _sb_run(pair, ids, dec, n, rnd, L=4, B=1):
    """One :func:`specbound.llm.generate` call, wall-clock timed."""
    from specbound.llm import generate

    t0 = time.perf_counter()
    res = generate(pair, ids, dec, L=L, B=B, key=42 + rnd, max_new_tokens=n,
                   stop_at_eos=False, seed=rnd)
    sec = time.perf_counter() - t0
    return {"n_tokens": res.n_generated, "seconds": sec, "aatps": res.aatps,
            "target_forwards_per_token": res.target_forwards_per_token,
            "outside_over_forward": res.outside_seconds / res.forward_seconds}


def _short_prompts(pair, n_prompts, pool=40):
    """The ``n_prompts`` shortest chat-encoded prompts of ``pool`` HumanEval and ``pool``
    ShareGPT prompts (half from each set), in set order."""
    from specbound.llm import prompts

    half = n_prompts // 2
    out = []
    for name, k in (("humaneval", n_prompts - half), ("sharegpt", half)):
        ids = [pair.encode_prompt(t) for t in prompts(name, pool, seed=0)]
        keep = sorted(sorted(range(len(ids)), key=lambda i: len(ids[i]))[:k])
        out += [ids[i] for i in keep]
    return out


def _left_padded(pair, ids):
    """A left-padded (batch, length) tensor of the prompts and its attention mask."""
    import torch

    n = max(map(len, ids))
    t = torch.full((len(ids), n), pair.tokenizer.eos_token_id, dtype=torch.long)
    mask = torch.zeros_like(t)
    for i, x in enumerate(ids):
        t[i, n - len(x):] = torch.as_tensor(x, dtype=torch.long)
        mask[i, n - len(x):] = 1
    return t, mask


COLUMNS = ["row", "rounds", "n_tokens", "seconds_median", "tok_s_median", "tok_s_min",
           "tok_s_max", "ratio_to", "ratio_median", "ratio_min", "ratio_max", "ratios",
           "aatps", "target_forwards_per_token", "outside_over_forward"]
EXTRA = ("aatps", "target_forwards_per_token", "outside_over_forward")


def run_default(pair, n, rounds, drafts, every=False, L=4, out_dir=None, command=""):
    """ar and vsps (per draft) against transformers' sampling and assisted generation."""
    import torch

    ids = pair.encode_prompt(PROMPT)
    t = torch.as_tensor(ids, dtype=torch.long)[None, :]
    mask = torch.ones_like(t)
    rows = [("transformers sample", lambda r: _hf_run(pair, t, mask, n, r)),
            ("specbound ar", lambda r: _sb_run(pair, ids, "ar", n, r))]
    pairs = {d: pair.with_draft(d) for d in drafts}
    for d, p in pairs.items():
        rows.append((f"transformers assisted {d}",
                     lambda r, p=p: _hf_run(p, t, mask, n, r, assistant=p.draft, L=L)))
        rows.append((f"specbound vsps {d}", lambda r, p=p: _sb_run(p, ids, "vsps", n, r, L=L)))
        if every:
            for dec, B in (("pfr", 1), ("mse", 1), ("mpfr", 4), ("invariant", 4),
                           ("specinfer", 4)):
                rows.append((f"specbound {dec} B={B} {d}",
                             lambda r, p=p, dec=dec, B=B: _sb_run(p, ids, dec, n, r, L=L, B=B)))
    if every:
        rows.insert(2, ("specbound basic_uwm", lambda r: _sb_run(pair, ids, "basic_uwm", n, r)))
    _sb_run(pair, ids, "ar", 4, 0)  # warm-up
    before = _machine_load()
    print(f"one prompt ({len(ids)} tokens) x {n} new tokens, L = {L}, {rounds} rounds; "
          f"{before[1]}")
    meas = _measure(rows, rounds)
    after = _machine_load()
    out = []
    for name, _ in rows:
        ref = "transformers sample" if name.startswith("transformers") else "specbound ar"
        out.append(_summary(meas, name, None if name in ("transformers sample",
                                                         "specbound ar") else ref, EXTRA))
    out[0].update(_summary(meas, "transformers sample", "specbound ar"))
    out[0]["row"] = "transformers sample"
    for d in drafts:
        r = _ratios(meas, f"specbound vsps {d}", f"transformers assisted {d}")
        out.append({"row": f"vsps / assisted {d}", "rounds": len(r), "ratio_to":
                    f"transformers assisted {d}", "ratio_median": _spread(r)[0],
                    "ratio_min": min(r), "ratio_max": max(r),
                    "ratios": " ".join(f"{x:.3f}" for x in r)})
    r = _ratios(meas, "specbound ar", "transformers sample")
    out.append({"row": "ar / transformers sample", "rounds": len(r),
                "ratio_to": "transformers sample", "ratio_median": _spread(r)[0],
                "ratio_min": min(r), "ratio_max": max(r),
                "ratios": " ".join(f"{x:.3f}" for x in r)})
    _print_table(out, ["row", "tok_s_median", "tok_s_min", "tok_s_max", "ratio_to",
                       "ratio_median", "ratio_min", "ratio_max", "aatps",
                       "target_forwards_per_token", "outside_over_forward"])
    return _write("bench_llm.csv", out, COLUMNS, out_dir, before, after, command)


def run_sweep(pair, n, rounds, ks, Ls, out_dir=None, command=""):
    """vsps with early_exit:k drafts at several L against ar (one prompt)."""
    ids = pair.encode_prompt(PROMPT)
    rows = [("specbound ar", lambda r: _sb_run(pair, ids, "ar", n, r))]
    for k in ks:
        p = pair.with_draft(f"early_exit:{k}")
        for L in Ls:
            rows.append((f"vsps early_exit:{k} L={L}",
                         lambda r, p=p, L=L: _sb_run(p, ids, "vsps", n, r, L=L)))
    _sb_run(pair, ids, "ar", 4, 0)
    before = _machine_load()
    print(f"one prompt ({len(ids)} tokens) x {n} new tokens, {rounds} rounds; {before[1]}")
    meas = _measure(rows, rounds)
    after = _machine_load()
    out = [_summary(meas, name, None if name == "specbound ar" else "specbound ar", EXTRA)
           for name, _ in rows]
    _print_table(out, ["row", "tok_s_median", "ratio_median", "ratio_min", "ratio_max",
                       "aatps", "target_forwards_per_token"])
    return _write("bench_llm_sweep.csv", out, COLUMNS, out_dir, before, after, command)


def _batched_ar(pair, ids, n, rnd, dec="ar", L=4, B=1, **options):
    from specbound.llm import generate_batch

    t0 = time.perf_counter()
    res = generate_batch(pair, ids, dec, L=L, B=B, key=42 + rnd, max_new_tokens=n,
                         stop_at_eos=False, seed=[1000 * rnd + i for i in range(len(ids))],
                         **options)
    sec = time.perf_counter() - t0
    drafted = [d.shape[1] > 0 for r in res for d in r.drafts]
    blocks = sum(r.emitted_per_block.size for r in res)
    return {"n_tokens": res.n_generated, "seconds": sec,
            "drafted_share": sum(drafted) / len(drafted) if drafted else 0.0,
            "aatps": res.n_generated / max(blocks, 1)}


def _single_ar(pair, ids, n, rnd, dec="ar", L=4, B=1):
    from specbound.llm import generate

    t0 = time.perf_counter()
    tot = sum(generate(pair, x, dec, L=L, B=B, key=42 + rnd, max_new_tokens=n,
                       stop_at_eos=False, seed=1000 * rnd + i).n_generated
              for i, x in enumerate(ids))
    return {"n_tokens": tot, "seconds": time.perf_counter() - t0}


def _batched_rounds(pair, ids, n, rows, rounds):
    """Warm up the batched path, then :func:`_measure` ``rows`` over ``rounds``; the
    measurements and the machine load before and after."""
    _batched_ar(pair, ids[:2], 4, 0)
    before = _machine_load()
    print(f"{len(ids)} prompts ({min(map(len, ids))}-{max(map(len, ids))} tokens) x {n} new "
          f"tokens, {rounds} rounds; {before[1]}")
    meas = _measure(rows, rounds)
    return meas, before, _machine_load()


def run_batch_hf(pair, n, rounds, n_prompts, out_dir=None, command=""):
    """generate_batch ar against transformers' batched sampling on the same padded batch."""
    ids = _short_prompts(pair, n_prompts)
    t, mask = _left_padded(pair, ids)
    rows = [("transformers batched sample", lambda r: _hf_run(pair, t, mask, n, r)),
            ("specbound generate_batch ar", lambda r: _batched_ar(pair, ids, n, r))]
    meas, before, after = _batched_rounds(pair, ids, n, rows, rounds)
    out = [_summary(meas, rows[0][0]),
           _summary(meas, rows[1][0], rows[0][0])]
    _print_table(out, ["row", "tok_s_median", "tok_s_min", "tok_s_max", "ratio_median",
                       "ratio_min", "ratio_max", "ratios"])
    return _write("bench_llm_batch_hf.csv", out, COLUMNS, out_dir, before, after, command)


def run_threads(pair, n, rounds, n_prompts, out_dir=None, command=""):
    """ar batched and one at a time, torch on 1 and 2 threads."""
    import torch

    ids = _short_prompts(pair, n_prompts)

    def at(threads, fn):
        def go(r):
            torch.set_num_threads(threads)
            try:
                return fn(pair, ids, n, r)
            finally:
                torch.set_num_threads(1)
        return go

    rows = [(f"{mode} {th}T", at(th, fn)) for th in (1, 2)
            for mode, fn in (("batched", _batched_ar), ("one at a time", _single_ar))]
    meas, before, after = _batched_rounds(pair, ids, n, rows, rounds)
    out = [_summary(meas, "batched 1T", "one at a time 1T"),
           _summary(meas, "batched 2T", "one at a time 2T"),
           _summary(meas, "one at a time 2T", "one at a time 1T"),
           _summary(meas, "batched 2T", "batched 1T")]
    out.insert(0, _summary(meas, "one at a time 1T"))
    _print_table(out, ["row", "tok_s_median", "tok_s_min", "tok_s_max", "ratio_to",
                       "ratio_median", "ratio_min", "ratio_max"])
    return _write("bench_llm_threads.csv", out, COLUMNS, out_dir, before, after, command)


# ----------------------------------------------------------------------------- memory

MEMORY_CASES = ("ar single", "ar batched", "vsps single", "vsps batched",
                "transformers batched")
MEMORY_COLUMNS = ["case", "prompts", "n_tokens", "seconds", "rss_after_load_mb",
                  "rss_after_warmup_mb", "peak_rss_mb", "peak_above_warmup_mb"]


def _rss_kb(field):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(field)


def memory_child(case, n, n_prompts):
    """One measurement in this (fresh) process; prints a JSON line."""
    import resource

    import torch

    from specbound.llm import load_pair

    torch.set_num_threads(1)
    pair = load_pair("embedded", draft="early_exit:20", device="cpu", top_k=50)
    ids = _short_prompts(pair, n_prompts)
    dec = case.split()[0]
    dec = "ar" if dec == "transformers" else dec
    if case.endswith("single"):
        ids = ids[:1]
    rss_load = _rss_kb("VmRSS")
    # warm-up: the first forward pages the memory-mapped weights in (about 525 MB)
    _sb_run(pair, ids[0], "ar", 2, 0)
    rss0 = _rss_kb("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current RSS
    t0 = time.perf_counter()
    if case.startswith("transformers"):
        t, mask = _left_padded(pair, ids)
        _hf_run(pair, t, mask, n, 0)
    else:
        _batched_ar(pair, ids, n, 0, dec=dec)
    sec = time.perf_counter() - t0
    hwm = _rss_kb("VmHWM")
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"case": case, "prompts": len(ids), "n_tokens": n, "seconds": sec,
                      "rss_after_load_mb": rss_load / 1024,
                      "rss_after_warmup_mb": rss0 / 1024, "peak_rss_mb": maxrss / 1024,
                      "peak_above_warmup_mb": (hwm - rss0) / 1024}))


def run_memory(n, n_prompts, out_dir=None, command=""):
    before = _machine_load()
    rows = []
    for case in MEMORY_CASES:
        cmd = [sys.executable, "-m", "benchmarks.bench_llm", "--memory-child", case,
               "--tokens", str(n), "--prompts", str(n_prompts)]
        res = subprocess.run(cmd, capture_output=True, text=True, check=True)
        rows.append(json.loads(res.stdout.strip().splitlines()[-1]))
        print(rows[-1], flush=True)
    after = _machine_load()
    _print_table(rows, MEMORY_COLUMNS)
    return _write("bench_llm_memory.csv", rows, MEMORY_COLUMNS, out_dir, before, after,
                  command)


# ----------------------------------------------------------------------------- dtype


def _int8_pair(pair):
    """The pair with the ``nn.Linear`` layers of its target's decoder layers dynamically
    quantized to int8 (weights int8 per tensor, activations quantized per call); the
    embedding and the tied output head stay float32."""
    import copy

    import torch

    from specbound.llm.models import ModelPair

    target = copy.deepcopy(pair.target)
    target.model.layers = torch.ao.quantization.quantize_dynamic(
        target.model.layers, {torch.nn.Linear}, dtype=torch.qint8)
    from specbound.llm.drafts import parse_draft

    return ModelPair(target, target, pair.tokenizer, pair.processing,
                     parse_draft("temperature:1"), device=pair.device,
                     load_info=pair.load_info)


def _log_groups():
    """Contexts of the shipped log grouped by sequence: (longest context, [lengths])."""
    import numpy as np

    from specbound.llm import shipped_log

    groups = []
    for c in shipped_log().contexts():
        if groups and len(c) > len(groups[-1][0]) and np.array_equal(
                c[:len(groups[-1][0])], groups[-1][0]):
            groups[-1] = (c, [*groups[-1][1], len(c)])
        elif groups and len(c) <= len(groups[-1][0]) and np.array_equal(
                c, groups[-1][0][:len(c)]):
            groups[-1][1].append(len(c))
        else:
            groups.append((c, [len(c)]))
    return groups


def _log_distributions(pair, groups):
    """Processed next-token distributions at every logged context, (contexts, vocab)."""
    import numpy as np
    import torch

    out = []
    with torch.no_grad():
        for seq, lengths in groups:
            lp = pair.target_logprobs(torch.as_tensor(seq[None, :]), num_positions=None)
            out.append(lp.numpy()[0][np.asarray(lengths) - 1])  # probabilities
    return np.concatenate(out)


DTYPE_COLUMNS = ["row", "rounds", "n_tokens", "tok_s_median", "tok_s_min", "tok_s_max",
                 "ratio_to", "ratio_median", "ratio_min", "ratio_max", "contexts",
                 "max_tv", "median_tv", "mean_tv"]


def run_dtype(pair, n, rounds, out_dir=None, command=""):
    import numpy as np

    from specbound.llm import load_pair

    pairs = {"float32": pair,
             "bfloat16": load_pair("embedded", draft="temperature:1.5", device="cpu",
                                   dtype="bfloat16", top_k=50),
             "int8 dynamic": _int8_pair(pair)}
    groups = _log_groups()
    t0 = time.perf_counter()
    dist = {k: _log_distributions(p, groups) for k, p in pairs.items()}
    print(f"{len(dist['float32'])} contexts of the shipped log in {len(groups)} sequences, "
          f"{time.perf_counter() - t0:.1f} s")
    ids = pair.encode_prompt(PROMPT)
    for p in pairs.values():
        _sb_run(p, ids, "ar", 4, 0)
    rows = [(k, lambda r, p=p: _sb_run(p, ids, "ar", n, r)) for k, p in pairs.items()]
    before = _machine_load()
    print(f"one prompt ({len(ids)} tokens) x {n} new tokens, {rounds} rounds; {before[1]}")
    meas = _measure(rows, rounds)
    after = _machine_load()
    out = []
    for k in pairs:
        row = _summary(meas, k, None if k == "float32" else "float32")
        tv = 0.5 * np.abs(dist[k] - dist["float32"]).sum(axis=1)
        row.update(contexts=len(tv), max_tv=float(tv.max()), median_tv=float(np.median(tv)),
                   mean_tv=float(tv.mean()))
        out.append(row)
    _print_table(out, ["row", "tok_s_median", "tok_s_min", "tok_s_max", "ratio_median",
                       "ratio_min", "ratio_max", "max_tv", "median_tv"])
    return _write("bench_llm_dtype.csv", out, DTYPE_COLUMNS, out_dir, before, after, command)


TREE_COLUMNS = ["B", "L", "n_tokens", "blocks", "path_tokens_per_block",
                "tree_tokens_per_block", "saving", "same_tokens", "tree_seconds",
                "path_seconds", "tree_outside_over_forward", "path_outside_over_forward"]


def _counted(pair, **kw):
    """A ``generate`` run with the target's fed tokens counted (prefill excluded)."""
    from specbound.llm import generate

    fed = []

    def hook(module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        fed.append(int(ids.numel()))

    h = pair.target.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        res = generate(pair, **kw)
    finally:
        h.remove()
    return res, sum(fed[1:])  # the first forward prefills the prompt but its last token


def run_tree(pair, ids, n, rounds, Bs=(2, 4, 8), L=4):
    """Rows of the tree vs batch-of-paths comparison (module docstring): per B, the tree and
    the paths run alternate (order reversed every other round), medians over rounds."""
    import numpy as np

    rows = []
    for B in Bs:
        runs = {True: [], False: []}
        for rnd in range(rounds):
            for tree in ((True, False) if rnd % 2 == 0 else (False, True)):
                runs[tree].append(_counted(pair, prompt=ids, decoder="mpfr", L=L, B=B, key=42,
                                           max_new_tokens=n, stop_at_eos=False, seed=0,
                                           tree=tree, batch_verify=True))
        (t, tf), (p, pf) = runs[True][0], runs[False][0]
        nb = t.emitted_per_block.size

        def med(xs):
            return float(np.median(xs))

        rows.append({"B": B, "L": L, "n_tokens": t.n_generated, "blocks": nb,
                     "path_tokens_per_block": pf / nb, "tree_tokens_per_block": tf / nb,
                     "saving": 1 - tf / pf,
                     "same_tokens": bool(np.array_equal(t.tokens, p.tokens)),
                     "tree_seconds": med([r.total_seconds for r, _ in runs[True]]),
                     "path_seconds": med([r.total_seconds for r, _ in runs[False]]),
                     "tree_outside_over_forward": med([r.outside_seconds / r.forward_seconds
                                                       for r, _ in runs[True]]),
                     "path_outside_over_forward": med([r.outside_seconds / r.forward_seconds
                                                       for r, _ in runs[False]])})
    return rows


def _write_tree(rows, out_dir):
    out_dir = Path(out_dir) if out_dir is not None else Path(__file__).parent / "out"
    out_dir.mkdir(parents=True, exist_ok=True)
    path = write_rows(out_dir / "bench_llm_tree.csv", rows, TREE_COLUMNS, digits=4)
    print(f"{'B':>2} {'blocks':>6} {'paths tok/blk':>13} {'tree tok/blk':>12} {'saving':>7} "
          f"{'same':>5} {'tree out/fw':>11}")
    for r in rows:
        print(f"{r['B']:>2} {r['blocks']:>6} {r['path_tokens_per_block']:>13.2f} "
              f"{r['tree_tokens_per_block']:>12.2f} {r['saving']:>7.3f} "
              f"{str(r['same_tokens']):>5} {r['tree_outside_over_forward']:>11.3f}")
    print(f"wrote {path}")
    return path


BATCH_COLUMNS = ["decoder", "B", "L", "prompts", "n_tokens", "rounds", "batched_tok_s_median",
                 "single_tok_s_median", "ratio_median", "ratio_min", "ratio_max",
                 "same_tokens_rows", "load_before", "load_after"]


def run_batch(pair, n, rounds, n_prompts=16, L=4, out_dir=None):
    """Batched against one-at-a-time decoding of the same prompts (module docstring)."""
    import os

    import numpy as np

    from specbound.llm import generate, generate_batch, prompts

    half = n_prompts // 2
    texts = prompts("humaneval", n_prompts - half, seed=0) + prompts("sharegpt", half, seed=0)
    ids = [pair.encode_prompt(t) for t in texts]
    methods = [("ar", 1), ("vsps", 1), ("mpfr", 4)]
    load_before = os.getloadavg()
    print(f"{n_prompts} prompts ({min(map(len, ids))}-{max(map(len, ids))} tokens) x {n} new "
          f"tokens, {rounds} rounds; load average before: "
          + " ".join(f"{x:.2f}" for x in load_before))
    # warm-up (JIT kernels, allocator)
    generate_batch(pair, ids[:2], "mpfr", L=2, B=2, key=0, max_new_tokens=4, stop_at_eos=False)
    order = [(dec, B, mode) for dec, B in methods for mode in ("batched", "single")]
    rates: dict = {}
    same: dict = {}
    for rnd in range(rounds):
        seeds = [1000 * rnd + i for i in range(len(ids))]
        toks = {}
        for dec, B, mode in (order if rnd % 2 == 0 else order[::-1]):
            kw = dict(L=L, B=B, key=42 + rnd, max_new_tokens=n, stop_at_eos=False)
            t0 = time.perf_counter()
            if mode == "batched":
                out = generate_batch(pair, ids, dec, seed=seeds, **kw).results()
            else:
                out = [generate(pair, x, dec, seed=s, **kw) for x, s in zip(ids, seeds,
                                                                               strict=True)]
            sec = time.perf_counter() - t0
            toks[dec, mode] = [r.tokens for r in out]
            rates.setdefault((dec, B, mode), []).append(sum(r.n_generated for r in out) / sec)
            print(f"round {rnd + 1}: {dec:<5} B={B} {mode:<7} {sec:7.1f} s "
                  f"{rates[dec, B, mode][-1]:7.2f} tok/s", flush=True)
        for dec, _ in methods:
            same.setdefault(dec, []).append(sum(
                np.array_equal(a, b) for a, b in zip(toks[dec, "batched"], toks[dec, "single"],
                                                     strict=True)))
    load_after = os.getloadavg()
    rows = []
    for dec, B in methods:
        b, s = np.array(rates[dec, B, "batched"]), np.array(rates[dec, B, "single"])
        ratio = b / s
        rows.append({"decoder": dec, "B": B, "L": "" if dec == "ar" else L,
                     "prompts": len(ids), "n_tokens": n, "rounds": rounds,
                     "batched_tok_s_median": float(np.median(b)),
                     "single_tok_s_median": float(np.median(s)),
                     "ratio_median": float(np.median(ratio)), "ratio_min": float(ratio.min()),
                     "ratio_max": float(ratio.max()),
                     "same_tokens_rows": f"{min(same[dec])}/{len(ids)}",
                     "load_before": f"{load_before[0]:.2f}", "load_after": f"{load_after[0]:.2f}"})
    out_dir = Path(out_dir) if out_dir is not None else Path(__file__).parent / "out"
    out_dir.mkdir(parents=True, exist_ok=True)
    path = write_rows(out_dir / "bench_llm_batch.csv", rows, BATCH_COLUMNS, digits=4)
    print(f"{'decoder':<7} {'B':>2} {'batched tok/s':>13} {'single tok/s':>12} "
          f"{'ratio (min-max)':>22} {'same tokens':>11}")
    for r in rows:
        print(f"{r['decoder']:<7} {r['B']:>2} {r['batched_tok_s_median']:>13.2f} "
              f"{r['single_tok_s_median']:>12.2f} {r['ratio_median']:>8.2f} "
              f"({r['ratio_min']:.2f}-{r['ratio_max']:.2f}) {r['same_tokens_rows']:>11}")
    print("load average after: " + " ".join(f"{x:.2f}" for x in load_after))
    print(f"wrote {path}")
    return path


NGRAM_COLUMNS = ["prompt_type", "temperature", *COLUMNS, "drafted_share", "acceptance",
                 "verify_cost_ratio", "break_even_acceptance", "verify_cost_ratio_1",
                 "break_even_acceptance_1", "measured_cost_slope"]
#: the n-gram drafts of ``--ngram``: the gated default and the ungated one (every match)
NGRAM_GATED, NGRAM_FREE = "ngram:3", "ngram:3:fixed=0:cost=0"
NGRAM_TYPES = ("code", "chat", "summaries", "edit")


def _edit_prompt(code: str) -> str:
    """A prompt whose answer quotes it: a HumanEval prompt with one typo to fix."""
    for word, typo in ((" the ", " teh "), ("return", "retrun"), (" a ", " an ")):
        if word in code:
            code = code.replace(word, typo, 1)
            break
    return ("Fix the typo in this function and write the whole function again, unchanged "
            f"otherwise:\n\n{code}")


def _ngram_prompts(types=NGRAM_TYPES):
    """One prompt per type: ``code`` a HumanEval prompt, ``chat`` a ShareGPT prompt,
    ``summaries`` the first ShareGPT request to summarise a text it contains (the selection
    of ``paper_figs._real_runs.summarize_prompts``) of at most 1,600 characters, ``edit``
    "fix the typo" around another HumanEval prompt."""
    from specbound.llm import prompts

    code = prompts("humaneval", 2, seed=0)
    out = {"code": code[0], "chat": prompts("sharegpt", 1, seed=0)[0],
           "edit": _edit_prompt(code[1])}
    if "summaries" in types:
        from paper_figs._real_runs import summarize_prompts

        out["summaries"] = next(t for t in summarize_prompts(0) if len(t) <= 1600)
    return {k: out[k] for k in types}


def _verify_cost(pair, ids, k, reps=9):
    """Median time of a ``(k + 1)``-token target forward over the prompt's cache divided by
    that of a 1-token forward (the exact cost ratio of a drafted block)."""
    from specbound.llm.ngram import forward_seconds

    t_k, t_1 = forward_seconds(pair, ids, (k, 0), reps)
    return t_k / t_1


def _break_even(c, k=4):
    """Smallest per-token acceptance ``a`` with ``(1 - a^(k+1)) / (1 - a) >= c``
    (:func:`specbound.llm.ngram.break_even`)."""
    from specbound.llm.ngram import break_even

    return break_even(c, k)


def _sb_ngram_run(pair, ids, n, rnd, L=4, dec="vsps", B=1, log=None):
    from specbound.llm import generate

    t0 = time.perf_counter()
    res = generate(pair, ids, dec, L=L, B=B, key=42 + rnd, max_new_tokens=n,
                   stop_at_eos=False, seed=rnd, log=log)
    sec = time.perf_counter() - t0
    drafted = [d.shape[1] > 0 for d in res.drafts]
    return {"n_tokens": res.n_generated, "seconds": sec, "aatps": res.aatps,
            "target_forwards_per_token": res.target_forwards_per_token,
            "outside_over_forward": res.outside_seconds / res.forward_seconds,
            "drafted_share": sum(drafted) / len(drafted),
            # None (left out of the medians) for a run without decisions
            "acceptance": (float(res.decision_accepted.mean()) if res.decision_accepted.size
                           else None), "result": res}


def _hf_lookup_run(pair, ids, n, seed, L=4):
    """transformers' prompt lookup: ``generate(do_sample=True,
    prompt_lookup_num_tokens=L)``; target forwards counted with a hook."""
    import torch

    t = torch.as_tensor(ids, dtype=torch.long)[None, :]
    calls = []
    hook = pair.target.register_forward_pre_hook(lambda *a: calls.append(1))
    kw = dict(pair.generation_kwargs(), max_new_tokens=n, eos_token_id=None,
              pad_token_id=pair.tokenizer.eos_token_id, prompt_lookup_num_tokens=L,
              max_matching_ngram_size=3)
    torch.manual_seed(seed)
    t0 = time.perf_counter()
    try:
        with torch.no_grad():
            out = pair.target.generate(t, attention_mask=torch.ones_like(t), **kw)
    finally:
        hook.remove()
    sec = time.perf_counter() - t0
    return {"n_tokens": int(out.shape[1] - t.shape[1]), "seconds": sec,
            "aatps": (out.shape[1] - t.shape[1]) / len(calls),
            "target_forwards_per_token": len(calls) / (out.shape[1] - t.shape[1])}


def run_ngram(pair, n, rounds, temps, L=4, out_dir=None, command="", types=NGRAM_TYPES,
              peer=True, free=True, drafts=None):
    """vsps with ngram:3 (gated and, with ``free``, ungated; or the n-gram specs of
    ``drafts``) against ar and (``peer``) transformers' prompt lookup, prompt type x T."""
    texts = _ngram_prompts(types)
    if drafts is None:
        drafts = (NGRAM_GATED, NGRAM_FREE) if free else (NGRAM_GATED,)
    out = []
    before = _machine_load()
    print(f"{len(texts)} prompt types x T in {list(temps)} x {n} new tokens, L = {L}, "
          f"{rounds} rounds; {before[1]}")
    for T in temps:
        tp = pair.with_processing(temperature=T)
        for kind, text in texts.items():
            ids = tp.encode_prompt(text)
            rows = [("specbound ar", lambda r, tp=tp, ids=ids: _sb_run(tp, ids, "ar", n, r))]
            for d in drafts:
                ng = tp.with_draft(d)
                _sb_ngram_run(ng, ids, 4, 0, L)  # warm-up
                rows.append((f"specbound vsps {d}",
                             lambda r, ng=ng, ids=ids: _sb_ngram_run(ng, ids, n, r, L)))
            if peer:
                rows.append(("transformers prompt lookup",
                             lambda r, tp=tp, ids=ids: _hf_lookup_run(tp, ids, n, r, L)))
            c, c1 = _verify_cost(tp, ids, L), _verify_cost(tp, ids, 1)
            print(f"-- {kind} ({len(ids)} prompt tokens), T = {T}, verify cost ratios "
                  f"c_{L} = {c:.2f}, c_1 = {c1:.2f}")
            meas = _measure(rows, rounds)
            extra = (*EXTRA, "drafted_share", "acceptance")
            for name, _ in rows:
                ref = None if name == "specbound ar" else "specbound ar"
                row = _summary(meas, name, ref, extra)
                row.update(prompt_type=kind, temperature=T, verify_cost_ratio=c,
                           break_even_acceptance=_break_even(c, L), verify_cost_ratio_1=c1,
                           break_even_acceptance_1=_break_even(c1, 1),
                           measured_cost_slope=(c - 1) / L)
                out.append(row)
            for d in drafts if peer else ():
                r = _ratios(meas, f"specbound vsps {d}", "transformers prompt lookup")
                out.append({"prompt_type": kind, "temperature": T,
                            "row": f"vsps {d} / transformers prompt lookup",
                            "rounds": len(r), "ratio_to": "transformers prompt lookup",
                            "ratio_median": _spread(r)[0], "ratio_min": min(r),
                            "ratio_max": max(r), "ratios": " ".join(f"{x:.3f}" for x in r)})
    after = _machine_load()
    _print_table(out, ["prompt_type", "temperature", "row", "tok_s_median", "ratio_to",
                       "ratio_median", "ratio_min", "ratio_max", "aatps", "drafted_share",
                       "acceptance", "break_even_acceptance_1", "break_even_acceptance"])
    return _write("bench_llm_ngram.csv", out, NGRAM_COLUMNS, out_dir, before, after, command)


NGRAM_MULTI_COLUMNS = ["prompt_type", "temperature", "row", "B", "rounds", "n_tokens",
                       "tok_s_median", "ratio_to", "ratio_median", "ratio_min", "ratio_max",
                       "aatps", "predicted_aatps", "aatps_gain", "predicted_gain",
                       "drafted_share", "acceptance"]


def _predicted_aatps(res, rec):
    """The theory's AATPS of a run: its realised AATPS with every decision's realised
    acceptance replaced by its exact conditional probability
    (:func:`specbound.llm.decision_acceptance` at the recorded contexts)."""
    from specbound.llm import decision_acceptance

    dec = decision_acceptance(res, rec)
    e = res.emitted_per_block
    return float((e.sum() - dec["accepted"].sum() + dec["predicted"].sum()) / e.size)


def run_ngram_multi(pair, n, rounds, temps, L=4, out_dir=None, command="",
                    types=("code", "edit")):
    """mpfr B = 4 against B = 1 with n-gram multi-drafts (``ngram:3:fixed=0:cost=0``: every match
    drafted, so both draft at the same positions): AATPS gain against the exact-acceptance
    theory.  Every run records its verified contexts (``ContextRecorder``), so tokens/s
    include the recording for both rows alike."""
    from specbound.llm import ContextRecorder

    texts = _ngram_prompts(types)
    out = []
    before = _machine_load()
    print(f"mpfr B=1 vs B=4 with {NGRAM_FREE}: {list(texts)} x T in {list(temps)} x {n} new "
          f"tokens, L = {L}, {rounds} rounds; {before[1]}")

    def one(ng, ids, r, B):
        rec = ContextRecorder()
        m = _sb_ngram_run(ng, ids, n, r, L, dec="mpfr", B=B, log=rec)
        m["predicted_aatps"] = _predicted_aatps(m["result"], rec)
        return m

    for T in temps:
        ng = pair.with_processing(temperature=T).with_draft(NGRAM_FREE)
        for kind, text in texts.items():
            ids = ng.encode_prompt(text)
            _sb_ngram_run(ng, ids, 4, 0, L, dec="mpfr", B=4)  # warm-up
            rows = [(f"mpfr B={B} {NGRAM_FREE}",
                     lambda r, ng=ng, ids=ids, B=B: one(ng, ids, r, B))
                    for B in (1, 4)]
            print(f"-- {kind} ({len(ids)} prompt tokens), T = {T}")
            meas = _measure(rows, rounds)
            base = rows[0][0]
            for (name, _), B in zip(rows, (1, 4), strict=True):
                row = _summary(meas, name, None if B == 1 else base,
                               ("aatps", "predicted_aatps", "drafted_share", "acceptance"))
                # gains: totals over the rounds (tokens per block pooled), not medians
                tot = {k: sum(m[k] * m["result"].emitted_per_block.size for m in meas[name])
                       for k in ("aatps", "predicted_aatps")}
                blocks = sum(m["result"].emitted_per_block.size for m in meas[name])
                row.update(prompt_type=kind, temperature=T, B=B,
                           aatps=tot["aatps"] / blocks,
                           predicted_aatps=tot["predicted_aatps"] / blocks)
                out.append(row)
            one_, four = out[-2], out[-1]
            four.update(aatps_gain=four["aatps"] / one_["aatps"],
                        predicted_gain=four["predicted_aatps"] / one_["predicted_aatps"])
    after = _machine_load()
    _print_table(out, ["prompt_type", "temperature", "row", "aatps", "predicted_aatps",
                       "aatps_gain", "predicted_gain", "tok_s_median", "ratio_median"])
    return _write("bench_llm_ngram_multi.csv", out, NGRAM_MULTI_COLUMNS, out_dir, before,
                  after, command)


def run_ngram_batch(pair, n, rounds, n_prompts, L=4, out_dir=None, command=""):
    """``generate_batch`` vsps with ``ngram:3`` against batched ``ar`` on the ``n_prompts``
    shortest prompts (half HumanEval, half ShareGPT): the gate priced at the batched forward
    (the default), the one-sequence gate (``batch_gate=False``) and no gate.  "aatps":
    tokens per block over all rows; "drafted_share": the share of blocks that drafted."""
    ids = _short_prompts(pair, n_prompts)
    rows = [("batched ar", lambda r: _batched_ar(pair, ids, n, r))]
    for d, gate, label in ((NGRAM_GATED, True, ""),
                           (NGRAM_GATED, False, " batch_gate=False"),
                           (NGRAM_FREE, True, "")):
        ng = pair.with_draft(d)
        rows.append((f"batched vsps {d}{label}",
                     lambda r, ng=ng, gate=gate: _batched_ar(ng, ids, n, r, dec="vsps", L=L,
                                                             batch_gate=gate)))
    meas, before, after = _batched_rounds(pair, ids, n, rows, rounds)
    out = [_summary(meas, name, None if name == "batched ar" else "batched ar",
                    ("aatps", "drafted_share")) for name, _ in rows]
    _print_table(out, ["row", "tok_s_median", "ratio_median", "ratio_min", "ratio_max",
                       "aatps", "drafted_share"])
    return _write("bench_llm_ngram_batch.csv", out, [*COLUMNS, "drafted_share"], out_dir,
                  before, after, command)


def run(mode="default", quick=False, tokens=None, threads=1, rounds=None, out_dir=None,
        drafts=None, every=False, n_prompts=16, ks=(1, 2, 4, 8), Ls=(2, 4), command="",
        temps=None, types=None, peer=True, free=True, ngram_drafts=None):
    import torch

    from specbound.llm import generate, load_pair

    torch.set_num_threads(threads)
    n = tokens or (24 if quick else 64)
    L = 4
    if mode == "memory":
        return run_memory(n, n_prompts, out_dir, command)
    pair = load_pair("embedded", draft="early_exit:20", device="cpu", top_k=50)
    if mode == "batch":
        return run_batch(pair, n, rounds or (1 if quick else ROUNDS),
                         n_prompts=4 if quick else n_prompts, L=L, out_dir=out_dir)
    if mode == "batch-hf":
        return run_batch_hf(pair, n, rounds or (1 if quick else HF_ROUNDS), n_prompts,
                            out_dir, command)
    if mode == "threads":
        return run_threads(pair, n, rounds or (1 if quick else ROUNDS), n_prompts, out_dir,
                           command)
    if mode == "sweep":
        return run_sweep(pair, n, rounds or (1 if quick else ROUNDS), ks, Ls, out_dir,
                         command)
    if mode == "ngram":
        return run_ngram(pair, n, rounds or (1 if quick else ROUNDS),
                         temps or ((1.0,) if quick else (0.3, 0.7, 1.0)), L, out_dir, command,
                         types or NGRAM_TYPES, peer, free, ngram_drafts)
    if mode == "ngram-multi":
        return run_ngram_multi(pair, n, rounds or (1 if quick else ROUNDS),
                               temps or ((1.0,) if quick else (0.3, 1.0)), L, out_dir, command,
                               types or ("code", "edit"))
    if mode == "ngram-batch":
        return run_ngram_batch(pair, n, rounds or (1 if quick else ROUNDS),
                               4 if quick else n_prompts, L, out_dir, command)
    if mode == "dtype":
        return run_dtype(pair, n, rounds or (1 if quick else ROUNDS), out_dir, command)
    if mode in ("tree", "tree-only"):
        ids = pair.encode_prompt(PROMPT)
        generate(pair, ids, "mpfr", L=2, B=2, key=0, max_new_tokens=4, stop_at_eos=False,
                 tree=True)
        tree_path = _write_tree(run_tree(pair, ids, n, rounds or (1 if quick else 3)),
                                out_dir)
        if mode == "tree-only":
            return tree_path
    return run_default(pair, n, rounds or (1 if quick else HF_ROUNDS),
                       drafts or ["early_exit:20"], every, L, out_dir, command)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--tokens", type=int, default=None)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--drafts", default="early_exit:20",
                    help="comma-separated drafts of the default mode (default early_exit:20)")
    ap.add_argument("--all", action="store_true", help="every decoder in the default mode")
    ap.add_argument("--out", default=None)
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--tree", action="store_true",
                   help="also compare tree and batch-of-paths verification (mpfr, B = 2, 4, 8)")
    g.add_argument("--tree-only", action="store_true", help="only the tree comparison")
    g.add_argument("--batch", action="store_true",
                   help="only batched against one-at-a-time decoding (generate_batch)")
    g.add_argument("--batch-hf", action="store_true",
                   help="generate_batch ar against transformers' batched sampling")
    g.add_argument("--threads-compare", action="store_true",
                   help="ar batched and one at a time on 1 and 2 threads")
    g.add_argument("--sweep", action="store_true", help="vsps with early_exit:k drafts vs ar")
    g.add_argument("--memory", action="store_true", help="peak memory, one subprocess a case")
    g.add_argument("--dtype", action="store_true", help="float32 vs bfloat16 vs int8")
    g.add_argument("--ngram", action="store_true",
                   help="vsps with ngram:3 vs ar and transformers' prompt lookup")
    g.add_argument("--ngram-multi", action="store_true",
                   help="mpfr B=4 vs B=1 with n-gram multi-drafts: AATPS gain vs theory")
    g.add_argument("--ngram-batch", action="store_true",
                   help="generate_batch vsps ngram:3 vs batched ar (--prompts prompts)")
    ap.add_argument("--temps", default=None,
                    help="temperatures of the --ngram modes (0.3,0.7,1.0; multi: 0.3,1.0)")
    ap.add_argument("--types", default=None,
                    help="prompt types of the --ngram modes (code,chat,summaries,edit)")
    ap.add_argument("--no-peer", action="store_true",
                    help="--ngram without transformers' prompt lookup rows")
    ap.add_argument("--ngram-drafts", default=None,
                    help="comma-separated n-gram drafts of --ngram (default ngram:3 and, "
                         "unless --no-free, ngram:3:fixed=0:cost=0)")
    ap.add_argument("--no-free", action="store_true",
                    help="--ngram without the ungated ngram:3:fixed=0:cost=0 rows")
    g.add_argument("--memory-child", choices=MEMORY_CASES, help=argparse.SUPPRESS)
    ap.add_argument("--prompts", type=int, default=16, help="prompts of the batched modes")
    ap.add_argument("--ks", default="1,2,4,8", help="early_exit layers of --sweep")
    ap.add_argument("--Ls", default="2,4", help="block lengths of --sweep")
    a = ap.parse_args(argv)
    if a.types and not set(a.types.split(",")) <= set(NGRAM_TYPES):
        ap.error(f"--types: must be a comma-separated subset of {','.join(NGRAM_TYPES)}, got "
                 f"{a.types!r}")
    if a.memory_child:
        return memory_child(a.memory_child, a.tokens or 64, a.prompts)
    mode = next((m for m, on in (("tree", a.tree), ("tree-only", a.tree_only),
                                 ("batch", a.batch), ("batch-hf", a.batch_hf),
                                 ("threads", a.threads_compare), ("sweep", a.sweep),
                                 ("memory", a.memory), ("dtype", a.dtype),
                                 ("ngram", a.ngram), ("ngram-multi", a.ngram_multi),
                                 ("ngram-batch", a.ngram_batch)) if on), "default")
    command = "python -m benchmarks.bench_llm " + " ".join(
        sys.argv[1:] if argv is None else argv)
    run(mode, a.quick, a.tokens, a.threads, a.rounds, a.out,
        [d for d in a.drafts.split(",") if d], a.all, a.prompts,
        tuple(int(k) for k in a.ks.split(",")), tuple(int(x) for x in a.Ls.split(",")),
        command.strip(), tuple(float(t) for t in a.temps.split(",")) if a.temps else None,
        tuple(a.types.split(",")) if a.types else None, not a.no_peer, not a.no_free,
        _ngram_drafts(ap, a.ngram_drafts))


def _ngram_drafts(ap, text):
    """The specs of ``--ngram-drafts`` (None: the default), each an n-gram draft (else a
    usage error naming the option, before any model loads)."""
    if text is None:
        return None
    from specbound.llm.drafts import parse_draft

    out = []
    for d in (x.strip() for x in text.split(",")):
        try:
            spec = parse_draft(d)
        except ValueError as e:
            ap.error(f"--ngram-drafts: {e}")
        if spec.kind != "ngram":
            ap.error(f"--ngram-drafts: {d!r} is not an ngram draft")
        out.append(d)
    return tuple(out)


if __name__ == "__main__":
    main()
