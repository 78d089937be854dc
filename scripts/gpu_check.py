"""GPU check of the real-model layer on randomly initialised models of realistic size.

Builds, on the device, a Qwen2.5-7B-shaped target and a Qwen2.5-0.5B-shaped draft (the pair
of Liu, Wan, Gao & Gündüz 2026, arXiv:2609.21858, App. D.1) from configurations written
below, with random weights (nothing is downloaded; no network), wraps them in a
``specbound.llm.ModelPair`` (temperature 1, top-k 50) and

1. checks that the keyed uniforms computed on the device (``specbound.llm.keyed_uniforms``)
   equal the CPU ones (``specbound.sim.keyed_uniforms``) bit for bit, over the whole
   vocabulary, for several keys, contexts, windows and arrivals;
2. checks the exactness of every decoder's first token on the device: ``n`` runs of
   ``specbound.llm.generate`` (one new token, a fresh key and seed per run) against the
   target's processed distribution at the prompt, by a chi-square goodness-of-fit test
   (cells with expected count < 5 merged; a decoder fails when the p-value is below
   ``1e-6``, the false-failure probability of each test);
3. measures tokens per second and the time outside model forwards (``total_seconds -
   target_seconds - draft_seconds`` of ``GenerationResult``) for ``ar``, ``vsps``, ``pfr``
   and ``mpfr`` with B = 4 (token-tree verification when ``generate`` offers it, else one
   batched forward over the draft paths), and writes a Markdown table;
4. tests the first token's exactness on the batched path (``specbound.llm.generate_batch``,
   ``n`` distinct prompts as rows of batches of 50, a probability-integral-transform KS test:
   :func:`check_first_token_batched`) and measures the batched path's tokens per second
   (``ar``, ``vsps``, ``mpfr`` B = 4 over ``--batch-prompts`` prompts) beside transformers'
   batched sampling (``model.generate(do_sample=True)`` on the same left-padded batch).

5. with ``--conformance``: the conformance kit (``specbound.testing``) on the device --
   transformers' ``_speculative_sampling`` on CUDA tensors (float64 and transformers' own
   float32 logits): emitted law = p, acceptance = 1 - TV, the ensemble weight 0.5 as the
   interpolation rule, an L = 3 block against theory's block law; and vLLM's rejection
   sampler where vLLM is importable (:func:`check_conformance`).

Random weights give near-uniform next-token distributions, so the drafts are rarely
accepted: the throughput rows measure the machinery (forwards, verification, bookkeeping),
not a speed-up.  ``--tiny`` builds small models of the same architecture, for a CPU
rehearsal of the script.

Run: ``scripts/gpu_check.sh`` (or ``python scripts/gpu_check.py --device cuda --out FILE``).
"""

from __future__ import annotations

import argparse
import inspect
import platform
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

#: Qwen2.5-7B-Instruct's and Qwen2.5-0.5B-Instruct's published architecture settings
QWEN_7B = dict(hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
               num_attention_heads=28, num_key_value_heads=4, vocab_size=152064,
               max_position_embeddings=32768, rope_theta=1_000_000.0, rms_norm_eps=1e-6,
               tie_word_embeddings=False)
QWEN_05B = dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                num_attention_heads=14, num_key_value_heads=2, vocab_size=151936,
                max_position_embeddings=32768, rope_theta=1_000_000.0, rms_norm_eps=1e-6,
                tie_word_embeddings=True)
TINY_TARGET = dict(QWEN_7B, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                   num_attention_heads=4, num_key_value_heads=2, vocab_size=1000)
TINY_DRAFT = dict(QWEN_05B, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                  num_attention_heads=2, num_key_value_heads=1, vocab_size=1000)
GOF_ALPHA = 1e-6


def build_pair(device, dtype, tiny: bool, top_k: int = 50, seed: int = 0):
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from specbound.llm import LoadInfo, LogitsProcessing, ModelPair
    from specbound.llm.drafts import DraftSpec

    torch.manual_seed(seed)
    models = []
    t0 = time.perf_counter()
    for cfg in ((TINY_TARGET, TINY_DRAFT) if tiny else (QWEN_7B, QWEN_05B)):
        config = Qwen2Config(**cfg)
        with torch.device(device):
            m = Qwen2ForCausalLM._from_config(config, dtype=dtype)
        models.append(m.eval())
    seconds = time.perf_counter() - t0
    info = LoadInfo(source="random", name="random Qwen2.5-7B-shaped" if not tiny else
                    "random tiny Qwen2", kind="folder", path="", converted=False,
                    seconds=seconds)
    dinfo = LoadInfo(source="random", name="random Qwen2.5-0.5B-shaped" if not tiny else
                     "random tiny Qwen2 draft", kind="folder", path="", converted=False,
                     seconds=0.0)
    pair = ModelPair(models[0], models[1], None, LogitsProcessing(1.0, top_k, None),
                     DraftSpec("model", dinfo.name), device=torch.device(device),
                     load_info={"target": info, "draft": dinfo}, dtype=dtype)
    return pair, seconds


def check_keyed(device, vocab: int) -> list[dict]:
    import torch

    from specbound import llm, sim

    rng = np.random.default_rng(1)
    rows = []
    tokens = np.arange(vocab, dtype=np.int64)
    for key in (0, "gpu-check", b"\x00\xffkey"):
        for window, arrivals in ((None, 1), (4, 1), (2, 3)):
            ctx = rng.integers(0, vocab, size=int(rng.integers(1, 40)))
            cpu = np.asarray(sim.keyed_uniforms(key, ctx, tokens, arrivals, window=window))
            dev = llm.keyed_uniforms(key, ctx, torch.as_tensor(tokens, device=device),
                                     arrivals, window=window, device=device)
            dev = dev.detach().cpu().numpy()
            same = cpu.shape == dev.shape and np.array_equal(cpu.view(np.uint64),
                                                             dev.astype(np.float64)
                                                             .view(np.uint64))
            rows.append({"key": repr(key), "window": window, "arrivals": arrivals,
                         "values": int(cpu.size), "bit_equal": bool(same)})
    return rows


def _chisquare(counts: np.ndarray, p: np.ndarray) -> tuple[float, int]:
    from scipy import stats

    n = counts.sum()
    order = np.argsort(-p)
    exp, obs = n * p[order], counts[order]
    cells_e, cells_o, acc_e, acc_o = [], [], 0.0, 0
    for e, o in zip(exp, obs, strict=True):
        acc_e += e
        acc_o += o
        if acc_e >= 5:
            cells_e.append(acc_e)
            cells_o.append(acc_o)
            acc_e, acc_o = 0.0, 0
    if acc_e > 0 and cells_e:
        cells_e[-1] += acc_e
        cells_o[-1] += acc_o
    e, o = np.array(cells_e), np.array(cells_o)
    res = stats.chisquare(o, e * o.sum() / e.sum())
    return float(res.pvalue), len(e)


def check_first_token(pair, generate, decoders, n: int, prompt) -> list[dict]:
    p = pair.target_logprobs(prompt).numpy()[0, -1]
    rows = []
    for dec in decoders:
        B = 2 if dec in ("mpfr", "invariant", "specinfer") else 1
        counts = np.zeros(p.size, dtype=np.int64)
        t0 = time.perf_counter()
        for i in range(n):
            res = generate(pair, prompt, dec, L=2, B=B, key=f"gof-{i}", seed=i,
                           max_new_tokens=1, chat=False, stop_at_eos=False)
            counts[int(res.tokens[len(prompt)])] += 1
        pv, cells = _chisquare(counts, p)
        bad = int(counts[p == 0].sum())
        rows.append({"decoder": dec, "B": B, "n": n, "cells": cells, "p_value": pv,
                     "zero_prob_hits": bad, "ok": bool(pv >= GOF_ALPHA and bad == 0),
                     "seconds": round(time.perf_counter() - t0, 1)})
    return rows


def throughput(pair, generate, prompt, new_tokens: int) -> list[dict]:
    import torch

    params = inspect.signature(generate).parameters
    rows = []
    for dec, B in (("ar", 1), ("vsps", 1), ("pfr", 1), ("mpfr", 4)):
        kw = dict(L=4, B=B, key="bench", seed=0, chat=False, stop_at_eos=False)
        verify = "batch of paths" if B > 1 else "single path"
        if B > 1 and "tree" in params:
            kw["tree"] = True
            verify = "token tree"
        generate(pair, prompt, dec, max_new_tokens=8, **kw)  # warm-up
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        res = generate(pair, prompt, dec, max_new_tokens=new_tokens, **kw)
        n_new = int(len(res.tokens) - len(prompt))
        outside = res.total_seconds - res.target_seconds - res.draft_seconds
        model = res.target_seconds + res.draft_seconds
        blocks = len(getattr(res, "accepted", ())) or 1
        rows.append({"decoder": dec, "B": B, "verification": verify, "new_tokens": n_new,
                     "tokens_per_s": n_new / res.total_seconds,
                     "total_s": res.total_seconds, "target_s": res.target_seconds,
                     "draft_s": res.draft_seconds, "outside_s": outside,
                     "outside_over_model": outside / model if model > 0 else float("nan"),
                     "tokens_per_block": n_new / blocks})
    return rows


def check_first_token_batched(pair, decoders, n: int, prompt) -> list[dict]:
    """The first token's exactness on the batched path (``specbound.llm.generate_batch``).

    The ``n`` rows are ``n`` distinct prompts (``prompt`` with one random token appended),
    decoded in batches of 50 (one key per batch: ``generate_batch`` takes one key, and a keyed
    decoder's first token is a function of key and context, so the rows' contexts must
    differ).  Row ``i``'s first token ``x_i`` is drawn from the target's processed law
    ``p_i`` at its own prompt if the batched path is exact; its randomized probability
    integral transform ``u_i = F_i(x_i - 1) + V_i p_i(x_i)`` (``V_i`` uniform, independent)
    is then U(0, 1), independently across rows (whole-prefix keyed labels of distinct
    contexts are independent), and a Kolmogorov-Smirnov test against U(0, 1) fails below
    p = ``GOF_ALPHA``."""
    from scipy import stats

    from specbound.llm import generate_batch

    rng = np.random.default_rng(11)
    extra = rng.choice(pair.vocab_size, size=n, replace=n > pair.vocab_size)
    prompts = [np.append(prompt, t).astype(np.int64) for t in extra]
    laws = [np.exp(pair.target_logprobs(x).numpy()[0, -1].astype(np.float64)) for x in prompts]
    v = rng.random(n)
    rows = []
    for dec in decoders:
        B = 2 if dec in ("mpfr", "invariant", "specinfer") else 1
        u = np.empty(n)
        bad = 0
        t0 = time.perf_counter()
        per = 50
        for a in range(0, n, per):
            k = min(per, n - a)
            batch = generate_batch(pair, prompts[a:a + k], dec, L=2, B=B, key=f"gof-batch-{a}",
                                   seed=list(range(a, a + k)), max_new_tokens=1, chat=False,
                                   stop_at_eos=False)
            for i, r in enumerate(batch.rows, start=a):
                x = int(r.tokens[len(prompts[i])])
                p = laws[i] / laws[i].sum()
                bad += int(p[x] == 0)
                u[i] = p[:x].sum() + v[i] * p[x]
        pv = float(stats.kstest(np.clip(u, 0.0, 1.0), "uniform").pvalue)
        rows.append({"decoder": dec, "B": B, "n": n, "ks_p_value": pv,
                     "zero_prob_hits": bad, "ok": bool(pv >= GOF_ALPHA and bad == 0),
                     "seconds": round(time.perf_counter() - t0, 1)})
    return rows


def throughput_batched(pair, n_prompts: int, new_tokens: int) -> list[dict]:
    """Tokens per second of ``generate_batch`` over ``n_prompts`` random prompts of 32-64
    tokens (``ar``, ``vsps``, ``mpfr`` B = 4), and of transformers' batched sampling
    (``model.generate(do_sample=True)``, the same left-padded batch, top-k 50, temperature 1,
    no stop at end-of-sequence) beside ``ar``."""
    import torch

    from specbound.llm import generate_batch

    rng = np.random.default_rng(5)
    prompts = [rng.integers(0, pair.vocab_size, size=int(m)).astype(np.int64)
               for m in rng.integers(32, 65, size=n_prompts)]
    rows = []

    def sync():
        if torch.cuda.is_available():
            torch.cuda.synchronize()

    for dec, B in (("ar", 1), ("vsps", 1), ("mpfr", 4)):
        kw = dict(L=4, B=B, key="bench", seed=0, chat=False, stop_at_eos=False)
        generate_batch(pair, prompts, dec, max_new_tokens=4, **kw)  # warm-up
        sync()
        t0 = time.perf_counter()
        res = generate_batch(pair, prompts, dec, max_new_tokens=new_tokens, **kw)
        sync()
        wall = time.perf_counter() - t0
        rows.append({"method": f"generate_batch {dec}", "B": B, "prompts": n_prompts,
                     "new_tokens": res.n_generated, "tokens_per_s": res.n_generated / wall,
                     "seconds": wall})
    width = max(len(x) for x in prompts)
    pad = 0
    ids = torch.tensor([[pad] * (width - len(x)) + list(x) for x in prompts],
                       device=pair.device)
    mask = torch.tensor([[0] * (width - len(x)) + [1] * len(x) for x in prompts],
                        device=pair.device)
    kw = dict(do_sample=True, top_k=50, temperature=1.0, top_p=1.0,
              max_new_tokens=new_tokens, min_new_tokens=new_tokens, pad_token_id=pad)
    pair.target.generate(input_ids=ids, attention_mask=mask, **{**kw, "max_new_tokens": 4,
                                                               "min_new_tokens": 4})
    sync()
    t0 = time.perf_counter()
    out = pair.target.generate(input_ids=ids, attention_mask=mask, **kw)
    sync()
    wall = time.perf_counter() - t0
    n = int((out.shape[1] - width) * n_prompts)
    rows.append({"method": "transformers generate(do_sample=True)", "B": 1,
                 "prompts": n_prompts, "new_tokens": n, "tokens_per_s": n / wall,
                 "seconds": wall})
    return rows


def _vllm_block(device):
    """vLLM's v1 ``rejection_sample`` as a block protocol, or ``None`` with the reason.

    Built from the function's signature (draft ids, per-request draft counts, draft and
    target probabilities, bonus ids, sampling metadata); a vLLM whose signature or metadata
    differs is reported as not checked rather than guessed at.
    """
    try:
        import torch
        from vllm.v1.sample import rejection_sampler as rs
    except Exception as exc:  # noqa: BLE001 - any import failure means: not importable
        return None, f"vLLM not importable ({type(exc).__name__}: {str(exc)[:80]})"
    fn = getattr(rs, "rejection_sample", None)
    if fn is None:
        return None, "vllm.v1.sample.rejection_sampler.rejection_sample not found"
    params = list(inspect.signature(fn).parameters)
    need = ["draft_token_ids", "num_draft_tokens", "max_spec_len", "cu_num_draft_tokens",
            "draft_probs", "target_probs", "bonus_token_ids", "sampling_metadata"]
    if params[:len(need)] != need:
        return None, f"rejection_sample has parameters {params}: not the ones this check knows"
    try:
        from vllm.v1.sample.metadata import SamplingMetadata

        fields = inspect.signature(SamplingMetadata).parameters
        base = {k: None for k, v in fields.items() if v.default is inspect.Parameter.empty}
    except Exception as exc:  # noqa: BLE001
        return None, f"SamplingMetadata not built ({type(exc).__name__}: {str(exc)[:80]})"

    def block(P, Q, xs, rng):
        L = len(xs)
        torch.manual_seed(int(rng.integers(0, 2**63 - 1)))
        meta = SamplingMetadata(**{**base, "temperature": torch.ones(1, device=device),
                                   "all_greedy": False, "all_random": True,
                                   "generators": {}})
        t = torch.as_tensor(np.asarray(P[:L]), dtype=torch.float32, device=device)
        d = torch.as_tensor(np.asarray(Q), dtype=torch.float32, device=device)
        bonus = torch.multinomial(torch.as_tensor(np.asarray(P[L]), dtype=torch.float32,
                                                  device=device), 1).view(1, 1)
        out = fn(torch.as_tensor(np.array(xs), dtype=torch.int32, device=device), [L], L,
                 torch.tensor([L], dtype=torch.int32, device=device), d, t, bonus, meta)
        row = [int(v) for v in out[0].tolist() if int(v) >= 0]
        return row, len(row) - 1

    return block, ""


def check_conformance(device, n: int) -> list[dict]:
    """The conformance kit on ``device``: transformers' sampler (and vLLM's where importable)
    against the exact laws, each check at false-failure rate 1e-3."""
    import torch

    from specbound.testing import check_acceptance, check_block, check_induced, check_lossless, draw
    from specbound.testing.adapters import transformers_block, transformers_step
    from specbound.testing.gallery import realistic_pair

    p, q = realistic_pair(8, seed=4, noise=1.5)
    pairs = [realistic_pair(8, seed=10 + i) for i in range(4)]
    P = np.stack([a for a, _ in pairs])
    Q = np.stack([b for _, b in pairs[:3]])
    rows = []

    def add(name, res):
        rows.append(dict(check=name, ok=bool(res.passed), pvalue=f"{res.pvalue:.3g}",
                         n=res.n, min_detectable=f"{res.min_detectable:.3g}",
                         seconds=f"{res.seconds_total:.1f}"))

    for dt in (torch.float64, torch.float32):
        tag = str(dt).replace("torch.", "")
        d = draw(transformers_step(device=device, dtype=dt), p, q, n=n, seed=1)
        add(f"transformers {tag}: law = p", check_lossless(d, p, q))
        add(f"transformers {tag}: acceptance = 1 - TV", check_acceptance(d, p, q))
    d = draw(transformers_step(assistant_ensemble_weight=0.5, device=device), p, q, n=n,
             seed=2)
    add("transformers w=0.5: interpolation law", check_induced(d, p, q, "interpolation",
                                                               lam=0.5))
    add("transformers L=3 block", check_block(transformers_block(device=device), P, Q, n=n,
                                              seed=3))
    block, why = _vllm_block(device)
    if block is None:
        rows.append(dict(check=f"vLLM rejection sampler: not checked ({why})", ok=True,
                         pvalue="", n=0, min_detectable="", seconds=""))
    else:
        try:
            add("vLLM rejection sampler L=3 block", check_block(block, P, Q, n=n, seed=4))
        except (TypeError, ValueError) as exc:
            rows.append(dict(check=f"vLLM rejection sampler: call failed ({str(exc)[:120]})",
                             ok=False, pvalue="", n=0, min_detectable="", seconds=""))
    return rows


def _md(rows: list[dict]) -> str:
    if not rows:
        return "(none)\n"
    cols = list(rows[0])
    out = "| " + " | ".join(cols) + " |\n|" + "---|" * len(cols) + "\n"
    for r in rows:
        out += "| " + " | ".join(f"{r[c]:.4g}" if isinstance(r[c], float) else str(r[c])
                                 for c in cols) + " |\n"
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--tiny", action="store_true", help="small models (CPU rehearsal)")
    ap.add_argument("--gof-n", type=int, default=200, help="runs per decoder (default 200)")
    ap.add_argument("--new-tokens", type=int, default=128, help="tokens per throughput run")
    ap.add_argument("--batch-prompts", type=int, default=16,
                    help="prompts of the batched throughput rows (default 16)")
    ap.add_argument("--out", type=Path, default=None, help="write the Markdown report here")
    ap.add_argument("--conformance", action="store_true",
                    help="run only the conformance kit's checks on the device")
    ap.add_argument("--conformance-n", type=int, default=20_000,
                    help="sampler calls per conformance check (default 20,000)")
    args = ap.parse_args(argv)

    import torch

    if args.conformance:
        rows = check_conformance(args.device, args.conformance_n)
        ok = all(r["ok"] for r in rows)
        text = "\n".join(["# Conformance kit on the device", "", _md(rows), "",
                          "ALL CHECKS PASSED" if ok else "SOME CHECKS FAILED", ""])
        print(text)
        if args.out is not None:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(text)
        return 0 if ok else 1

    from specbound import sim

    dtype = getattr(torch, args.dtype)
    t_start = time.perf_counter()
    report = [f"# GPU check ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})", ""]
    dev_name = (torch.cuda.get_device_name(0) if args.device.startswith("cuda")
                else platform.processor() or "cpu")
    report.append(f"device {args.device} ({dev_name}), torch {torch.__version__}, "
                  f"dtype {args.dtype}, {'tiny' if args.tiny else 'Qwen2.5-7B/0.5B-shaped'} "
                  "random models")
    pair, build_s = build_pair(args.device, dtype, args.tiny)
    n_params = [sum(p.numel() for p in m.parameters()) for m in (pair.target, pair.draft)]
    report.append(f"built in {build_s:.1f} s: target {n_params[0] / 1e9:.2f} B parameters, "
                  f"draft {n_params[1] / 1e9:.3f} B, vocabulary {pair.vocab_size}")
    ok = True

    keyed = check_keyed(args.device, pair.vocab_size)
    ok &= all(r["bit_equal"] for r in keyed)
    report += ["", "## Keyed uniforms: device vs CPU, bit for bit", "", _md(keyed)]

    from specbound.llm import generate

    prompt = np.random.default_rng(2).integers(0, pair.vocab_size, size=16).astype(np.int64)
    gof = check_first_token(pair, generate, list(sim.DECODERS), args.gof_n, prompt)
    ok &= all(r["ok"] for r in gof)
    report += ["", f"## First token on the device: chi-square GOF vs p (fails below "
               f"p = {GOF_ALPHA:g})", "", _md(gof)]
    gofb = check_first_token_batched(pair, list(sim.DECODERS), args.gof_n, prompt)
    ok &= all(r["ok"] for r in gofb)
    report += ["", f"## First token on the batched path (generate_batch): randomized PIT of "
               f"distinct prompts, KS test (fails below p = {GOF_ALPHA:g})", "", _md(gofb)]
    long_prompt = np.random.default_rng(3).integers(0, pair.vocab_size, size=64)
    thr = throughput(pair, generate, long_prompt.astype(np.int64), args.new_tokens)
    report += ["", "## Throughput (L = 4; random weights: drafts are rarely accepted)",
               "", _md(thr)]
    thb = throughput_batched(pair, args.batch_prompts, args.new_tokens)
    report += ["", f"## Batched across prompts ({args.batch_prompts} random prompts, L = 4)",
               "", _md(thb)]
    report += ["", f"total {time.perf_counter() - t_start:.0f} s; "
               f"{'ALL CHECKS PASSED' if ok else 'SOME CHECKS FAILED'}", ""]
    text = "\n".join(report)
    print(text)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
