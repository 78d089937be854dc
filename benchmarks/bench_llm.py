"""Decoders on the embedded model (CPU) against transformers' own generation, in one run.

Run ``python -m benchmarks.bench_llm [--quick] [--tokens N] [--threads T] [--out DIR]``.
On the embedded SmolLM2-135M-Instruct, one chat prompt, ``N`` new tokens per run (no stop
at end-of-sequence on either side), torch on ``T`` threads (default 1), it measures:

- ``ar`` (:func:`specbound.llm.generate`) against transformers' ``generate(do_sample=True)``
  with the same processing: the tokens/s ratio;
- ``vsps`` with the ``early_exit`` draft against transformers' assisted generation with the
  same draft module as ``assistant_model`` (``num_assistant_tokens = L``, constant schedule,
  no confidence cut-off): AATPS (transformers': new tokens per target forward after the
  prefill, counted with a forward hook) and the tokens/s ratio;
- for every decoder (``B = 4`` for the multi-draft ones) with the early-exit draft: AATPS,
  target forwards per emitted token, tokens/s and its ratio to ``ar``, and the time outside
  the model forwards as a fraction of the time inside them (``outside / forward``).

Every rate is the best of ``--rounds`` rounds (each round runs every row once, so a change of
machine load affects all rows alike).  Results go to ``benchmarks/out/bench_llm.csv``.

Batched decoding (``--batch``; only these rows): ``--prompts`` chat prompts (half HumanEval,
half ShareGPT) x ``N`` new tokens decoded by :func:`specbound.llm.generate_batch` (one batched
forward per step over every live prompt) against the same prompts decoded one at a time by
:func:`specbound.llm.generate`, same seeds per prompt, for ``ar``, ``vsps`` and ``mpfr``
(B = 4) with the early-exit draft.  Every round runs every (method, mode) row once, the rows'
order reversed from one round to the next; the ratio of tokens/s (batched / one at a time) is
taken within each round and reported as the median over rounds with its min and max; the
load average is printed before and after.  Results go to ``benchmarks/out/bench_llm_batch.csv``.

Tree verification (``--tree``; ``--tree-only`` skips the rows above): ``mpfr`` at B = 2, 4, 8
(L = 4, same prompt, key and seed) verified as a token tree (``generate(..., tree=True)``:
one target forward over the unique nodes of the draft paths, Alg. 7 of Liu, Wan, Gao &
Gündüz 2026, arXiv:2609.21858) and as a batch of paths (one row per leaf path, padded):
the target tokens processed per block (every ``input_ids`` entry of the target's forwards
after the prompt prefill, counted with a forward hook), the saving, whether both emitted the
same tokens, and the time outside model forwards over model time for the tree runs (the
best of ``--rounds``).  Results go to ``benchmarks/out/bench_llm_tree.csv``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from benchmarks._csv import write_rows

PROMPT = "Write a short poem about the sea."
COLUMNS = ["row", "decoder", "draft", "L", "B", "n_tokens", "seconds", "tokens_per_s",
           "ratio_to_ar", "aatps", "target_forwards_per_token", "outside_over_forward"]


def _transformers_rates(pair, ids, n, L, assistant=None):
    """(seconds, target forwards after the prefill) of one transformers generate call."""
    import torch

    calls = []
    hook = pair.target.register_forward_pre_hook(lambda *a: calls.append(1))
    kw = dict(pair.generation_kwargs(), max_new_tokens=n, min_new_tokens=n,
              pad_token_id=pair.tokenizer.eos_token_id)
    if assistant is not None:
        gc = assistant.generation_config
        gc.num_assistant_tokens = L
        gc.num_assistant_tokens_schedule = "constant"
        gc.assistant_confidence_threshold = 0.0
        kw["assistant_model"] = assistant
    inp = torch.as_tensor(ids, dtype=torch.long)[None, :]
    torch.manual_seed(0)
    t0 = time.perf_counter()
    try:
        with torch.no_grad():
            out = pair.target.generate(inp, attention_mask=torch.ones_like(inp), **kw)
    finally:
        hook.remove()
    sec = time.perf_counter() - t0
    assert out.shape[1] - inp.shape[1] == n
    return sec, len(calls) - 1


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
    """Rows of the tree vs batch-of-paths comparison (module docstring)."""
    import numpy as np

    rows = []
    for B in Bs:
        best = {}
        for _ in range(rounds):
            for tree in (True, False):
                res, fed = _counted(pair, prompt=ids, decoder="mpfr", L=L, B=B, key=42,
                                    max_new_tokens=n, stop_at_eos=False, seed=0, tree=tree,
                                    batch_verify=True)
                r = best.get(tree)
                if r is None or res.total_seconds < r[0].total_seconds:
                    best[tree] = (res, fed)
        (t, tf), (p, pf) = best[True], best[False]
        nb = t.emitted_per_block.size
        rows.append({"B": B, "L": L, "n_tokens": t.n_generated, "blocks": nb,
                     "path_tokens_per_block": pf / nb, "tree_tokens_per_block": tf / nb,
                     "saving": 1 - tf / pf,
                     "same_tokens": bool(np.array_equal(t.tokens, p.tokens)),
                     "tree_seconds": t.total_seconds, "path_seconds": p.total_seconds,
                     "tree_outside_over_forward": t.outside_seconds / t.forward_seconds,
                     "path_outside_over_forward": p.outside_seconds / p.forward_seconds})
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


def run(quick=False, tokens=None, threads=1, rounds=None, out_dir=None, draft=None,
        tree=False, tree_only=False, batch=False, n_prompts=16):
    import torch

    from specbound.llm import generate, load_pair

    torch.set_num_threads(threads)
    n = tokens or (24 if quick else 64)
    L = 4
    pair = load_pair("embedded", draft=draft or "early_exit:20", device="cpu")
    if batch:
        return run_batch(pair, n, rounds or (1 if quick else 5),
                         n_prompts=4 if quick else n_prompts, L=L, out_dir=out_dir)
    rounds = rounds or (1 if quick else 2)
    ids = pair.encode_prompt(PROMPT)
    if tree or tree_only:
        generate(pair, ids, "mpfr", L=2, B=2, key=0, max_new_tokens=4, stop_at_eos=False,
                 tree=True)
        tree_path = _write_tree(run_tree(pair, ids, n, rounds), out_dir)
        if tree_only:
            return tree_path
    rows = [("ar", 1), ("basic_uwm", 1), ("vsps", 1), ("pfr", 1), ("mse", 1), ("mpfr", 4),
            ("invariant", 4), ("specinfer", 4)]
    if quick:
        rows = [("ar", 1), ("vsps", 1), ("pfr", 1), ("mpfr", 4)]
    best: dict = {}
    # warm-up (JIT kernels, allocator)
    generate(pair, ids, "mpfr", L=2, B=2, key=0, max_new_tokens=4, stop_at_eos=False)
    for _ in range(rounds):
        sec, fw = _transformers_rates(pair, ids, n, L)
        r = best.get("hf_sample")
        if r is None or sec < r["seconds"]:
            best["hf_sample"] = {"row": "transformers generate(do_sample=True)",
                                 "decoder": "hf_sample", "draft": "", "L": "", "B": 1,
                                 "n_tokens": n, "seconds": sec, "aatps": n / max(fw + 1, 1),
                                 "target_forwards_per_token": (fw + 1) / n,
                                 "outside_over_forward": ""}
        sec, fw = _transformers_rates(pair, ids, n, L, assistant=pair.draft)
        r = best.get("hf_assisted")
        if r is None or sec < r["seconds"]:
            best["hf_assisted"] = {"row": "transformers assisted generation",
                                   "decoder": "hf_assisted", "draft": str(pair.draft_spec),
                                   "L": L, "B": 1, "n_tokens": n, "seconds": sec,
                                   "aatps": n / max(fw + 1, 1),
                                   "target_forwards_per_token": (fw + 1) / n,
                                   "outside_over_forward": ""}
        for dec, B in rows:
            res = generate(pair, ids, dec, L=L, B=B, key=42, max_new_tokens=n,
                           stop_at_eos=False, seed=0)
            name = f"specbound {dec}"
            r = best.get(name)
            if r is None or res.total_seconds < r["seconds"]:
                best[name] = {"row": name, "decoder": dec,
                              "draft": "" if dec in ("ar", "basic_uwm") else str(pair.draft_spec),
                              "L": "" if dec in ("ar", "basic_uwm") else L, "B": B,
                              "n_tokens": res.n_generated, "seconds": res.total_seconds,
                              "aatps": res.aatps,
                              "target_forwards_per_token": res.target_forwards_per_token,
                              "outside_over_forward": res.outside_seconds / res.forward_seconds}
    ar_rate = best["specbound ar"]["n_tokens"] / best["specbound ar"]["seconds"]
    for r in best.values():
        r["tokens_per_s"] = r["n_tokens"] / r["seconds"]
        r["ratio_to_ar"] = r["tokens_per_s"] / ar_rate
    out_dir = Path(out_dir) if out_dir is not None else Path(__file__).parent / "out"
    out_dir.mkdir(parents=True, exist_ok=True)
    path = write_rows(out_dir / "bench_llm.csv",
                      [{k: v for k, v in r.items() if k in COLUMNS} for r in best.values()],
                      COLUMNS, digits=4)
    hf, hfa = best["hf_sample"], best["hf_assisted"]
    ours, vs = best["specbound ar"], best["specbound vsps"]
    print(f"{'row':<42} {'AATPS':>6} {'tgt fw/tok':>10} {'tok/s':>7} {'x ar':>6} "
          f"{'out/fw':>7}")
    for r in best.values():
        o = r["outside_over_forward"]
        print(f"{r['row']:<42} {r['aatps']:>6.3f} {r['target_forwards_per_token']:>10.3f} "
              f"{r['tokens_per_s']:>7.2f} {r['ratio_to_ar']:>6.3f} "
              f"{(f'{o:.3f}' if o != '' else '-'):>7}")
    print(f"ar / transformers sampling: {ours['tokens_per_s'] / hf['tokens_per_s']:.3f}")
    print(f"vsps / transformers assisted: {vs['tokens_per_s'] / hfa['tokens_per_s']:.3f} "
          f"(AATPS {vs['aatps']:.3f} vs {hfa['aatps']:.3f})")
    if "specbound mpfr" in best:
        print(f"mpfr B=4 L=4 outside/forward: {best['specbound mpfr']['outside_over_forward']:.3f}")
    print(f"wrote {path}")
    return path


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--tokens", type=int, default=None)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--draft", default=None, help="default early_exit:20")
    ap.add_argument("--out", default=None)
    ap.add_argument("--tree", action="store_true",
                    help="also compare tree and batch-of-paths verification (mpfr, B = 2, 4, 8)")
    ap.add_argument("--tree-only", action="store_true", help="only the tree comparison")
    ap.add_argument("--batch", action="store_true",
                    help="only batched against one-at-a-time decoding (generate_batch)")
    ap.add_argument("--prompts", type=int, default=16, help="prompts of --batch (default 16)")
    a = ap.parse_args(argv)
    run(a.quick, a.tokens, a.threads, a.rounds, a.out, a.draft, a.tree, a.tree_only, a.batch,
        a.prompts)


if __name__ == "__main__":
    main()
