"""Decoding throughput of every decoder on a 50,000-token synthetic model.

Run ``python -m benchmarks.bench_decode [--quick] [--out DIR]``.  For each decoder of
:data:`specbound.sim.decode.DECODERS` it generates ``max_new_tokens`` tokens from several
prompts with a :class:`~specbound.sim.models.SyntheticLM` target (vocabulary 50,000,
``context_length=2``, default entropy ~3.3 nats) and its draft ``target.draft(0.2)`` (mean
1 - TV about 0.66), with ``L = 4`` and ``B = 4`` for the multi-draft decoders (B = 1 for
the others), and reports

- ``tokens_per_s``: emitted tokens per wall-clock second (after a JIT warm-up run), the
  best of ``--rounds`` rounds (default 3; every round runs every decoder once, so a change
  of machine load affects all decoders alike);
- ``ratio_to_ar``: that rate divided by the rate of ``"ar"`` measured in the same run;
- ``aatps``, ``target_evals`` and ``draft_evals`` (forward passes), ``target_contexts``.

Here a model evaluation costs the same for target and draft (both are synthetic), so the
token rate mostly measures the simulator; the AATPS and evaluation counts are what a real
speed-up would follow.  Results go to ``benchmarks/out/bench_decode.csv``.

``python -m benchmarks.bench_decode --compiled [--quick]`` measures the compiled decoders
(:func:`specbound.sim.speculative_decode_batch`), every ratio within the same run, and writes
``bench_decode_compiled.csv``:

- ``limit``: compiled decoding time against the *model-evaluation limit*, the time the same
  number of model evaluations takes alone in a compiled loop (draft evaluations: every
  drafted context; target evaluations: one per emitted token, the contexts the compiled loop
  evaluates), for ar, pfr, mpfr (B = 4, 8) at vocabularies 1,000 and 50,000, one thread;
  ``ratio = limit time / decoding time`` (1 would be a free simulator);
- ``python``: tokens/s of the compiled path (``speculative_decode``, one thread) against
  the Python loop (``backend=SyntheticBackend(...)``, which calls the same compiled model
  evaluation) measured in the same run, at vocabulary 1,000 for ar, pfr, mpfr (B = 4), for
  both Gaussian kinds (``"gaussian"`` and ``"gaussian16"``); ``ratio`` is compiled / Python
  loop, and ``ratio_recorded`` is the compiled rate over the Python-loop rate recorded when
  the compiled-simulator work was planned (ar 4,300, pfr 1,000, mpfr B = 4 800 tokens/s,
  ``"gaussian"`` models, 64 new tokens per prompt: :data:`RECORDED_PYTHON_LOOP`), a figure
  from another run and another machine state, given for reference only;
- ``threads``: a batch of 64 prompts with 2 threads against 1;
- ``lossy``: tokens/s of the compiled lossy decoder (:func:`specbound.sim.lossy_decode`, one
  thread) against its Python loop (``backend=SyntheticBackend(...)``) in the same run, for a
  few rules at vocabularies 1,000 and 50,000 (``"gaussian16"`` models); ``ratio`` is
  compiled / Python loop (:func:`_lossy_rows`);
- ``model``: one target and one draft (``draft(0.2)``) ``next_distribution`` evaluation at
  vocabulary 50,000 against one compiled pass of ``exp`` over 50,000 logits, for every
  kind;
- ``blockver``: tokens/s of block verification (decoder ``blockver``, Sun et al. 2024,
  arXiv:2403.10444, Alg. 2) against ``vsps`` in the compiled simulator, one thread, the same
  prompts and seeds, the two decoders alternating within every round
  (:func:`_versus_vsps_rows`); ``ratio`` is blockver / vsps tokens/s (the target is at
  least 1 / 1.5), ``evals`` the blockver AATPS over the vsps AATPS.
  ``python -m benchmarks.bench_decode --blockver [--quick]`` runs this group alone;
- ``hsd``: the same against ``vsps`` for lossless hierarchical speculative decoding (decoder
  ``hsd``, Zhou et al., ICLR 2026, arXiv:2601.05724);
  ``python -m benchmarks.bench_decode --hsd [--quick]`` runs this group alone.

Each time is the best of ``--rounds`` repetitions.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numba
import numpy as np
from numba import njit

from benchmarks._csv import write_rows
from specbound.sim import _compiled
from specbound.sim._config import JIT
from specbound.sim.batch import speculative_decode_batch
from specbound.sim.decode import (
    DECODERS,
    MULTI_DRAFT_DECODERS,
    SyntheticBackend,
    speculative_decode,
)
from specbound.sim.lossy_seq import lossy_decode
from specbound.sim.models import SyntheticLM, random_prompts

VOCAB = 50_000
L = 4
B = 4
#: Python-loop tokens/s at vocabulary 1,000 recorded when the compiled simulator was planned
#: (``"gaussian"`` models, 64 new tokens per prompt, load 1-2; the loop was sped up since)
RECORDED_PYTHON_LOOP = {"ar": 4_300.0, "pfr": 1_000.0, "mpfr": 800.0}
KINDS = ("gaussian", "gaussian16")
COLUMNS = ["decoder", "vocab_size", "L", "B", "n_tokens", "seconds", "tokens_per_s",
           "ratio_to_ar", "aatps", "target_evals", "draft_evals", "target_contexts"]


def run(quick: bool = False, out_dir: Path | None = None, rounds: int = 3) -> Path:
    out_dir = Path(out_dir) if out_dir is not None else Path(__file__).parent / "out"
    out_dir.mkdir(parents=True, exist_ok=True)
    target = SyntheticLM(VOCAB, context_length=2, seed=0)
    draft = target.draft(0.2, seed=1)
    n_new = 16 if quick else 64
    prompts = [[1, 2]] if quick else [[1, 2], [3, 4], [5, 6]]
    # warm-up: compile every kernel once on a small model
    small = SyntheticLM(50, seed=0)
    for dec in DECODERS:
        bb = 2 if dec in MULTI_DRAFT_DECODERS else 1
        speculative_decode(small, small.draft(0.5), [1], dec, L=2, B=bb, key=0,
                           max_new_tokens=4)
    best: dict = {}
    for rnd in range(rounds):
        for dec in DECODERS:
            bb = B if dec in MULTI_DRAFT_DECODERS else 1
            n_tok = 0
            acc = []
            te = de = tc = 0
            t0 = time.perf_counter()
            for i, prompt in enumerate(prompts):
                res = speculative_decode(target, draft, prompt, dec, L=L, B=bb, key=12345,
                                         max_new_tokens=n_new, seed=i)
                n_tok += res.generated.size
                acc.extend(res.emitted_per_block.tolist())
                te += res.n_target_evals
                de += res.n_draft_evals
                tc += res.n_target_contexts
            secs = time.perf_counter() - t0
            if dec not in best or secs < best[dec]["seconds"]:
                best[dec] = {"decoder": dec, "vocab_size": VOCAB, "L": L, "B": bb,
                             "n_tokens": n_tok, "seconds": secs, "tokens_per_s": n_tok / secs,
                             "aatps": float(np.mean(acc)), "target_evals": te,
                             "draft_evals": de, "target_contexts": tc}
            print(f"round {rnd + 1}: {dec:>11s}: {n_tok / secs:8.1f} tokens/s  "
                  f"AATPS {np.mean(acc):.2f}", flush=True)
    rows = [best[dec] for dec in DECODERS]
    ar_rate = next(r["tokens_per_s"] for r in rows if r["decoder"] == "ar")
    for r in rows:
        r["ratio_to_ar"] = r["tokens_per_s"] / ar_rate
    return write_rows(out_dir / "bench_decode.csv", rows, COLUMNS)


# ------------------------------------------------------------------- the compiled decoders

C_COLUMNS = ["group", "what", "kind", "vocab_size", "L", "B", "prompts", "n_tokens", "evals",
             "seconds", "reference_seconds", "ratio", "tokens_per_s", "reference_tokens_per_s",
             "ratio_recorded"]


@njit(**JIT)
def _eval_loop(m, ctxs, count, out):
    """``count`` compiled model evaluations, cycling over the rows of ``ctxs``."""
    acc = 0.0
    for i in range(count):
        _compiled.model_probs(m, ctxs[i % ctxs.shape[0]], out)
        acc += out[0]
    return acc


@njit(**JIT)
def _exp_pass(x, out):
    for i in range(x.shape[0]):
        out[i] = np.exp(x[i])
    return out[0]


def _best(fn, rounds, *args):
    best = np.inf
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn(*args)
        best = min(best, time.perf_counter() - t0)
    return best


def _time_batch(target, draft, ps, dec, kw, threads, rounds):
    """Best time of one ``speculative_decode_batch`` call with ``threads`` Numba threads."""
    numba.set_num_threads(threads)
    try:
        return _best(lambda: speculative_decode_batch(target, draft, ps, dec, **kw), rounds)
    finally:
        numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)


def _time_loop(target, draft, ps, dec, kw, k, python, rounds):
    """Best time of ``speculative_decode`` on ``k`` prompts, one thread; ``python``: the
    Python loop (``backend=SyntheticBackend``)."""

    def go():
        for i in range(k):
            be = SyntheticBackend(target, draft) if python else None
            speculative_decode(target, draft, ps.tokens[i], dec, seed=ps.seeds[i], backend=be,
                               **kw)

    numba.set_num_threads(1)
    try:
        return _best(go, rounds)
    finally:
        numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)


def _vocab_rows(vocab, n_prompts, n_new, rounds, kind="gaussian"):
    rows = []
    target = SyntheticLM(vocab, context_length=2, seed=0, kind=kind)
    draft = target.draft(0.2, seed=1)
    ps = random_prompts(n_prompts, 4, vocab, seed=1)
    ctxs = ps.tokens.astype(np.int64)
    out = np.empty(vocab)
    tm = _compiled.model_spec(target)
    _eval_loop(tm, ctxs, 1, out)
    for dec, bb in (("ar", 1), ("pfr", 1), ("mpfr", 4), ("mpfr", 8)):
        kw = dict(L=L, B=bb, key=12345, max_new_tokens=n_new)
        batch = speculative_decode_batch(target, draft, ps, dec, **kw)
        secs = _time_batch(target, draft, ps, dec, kw, 1, rounds)
        n_tok = int(batch.generated.sum())
        evals = n_tok + int(batch.n_draft_contexts.sum())
        lim = _best(_eval_loop, rounds, tm, ctxs, evals, out)
        rows.append(dict(group="limit", what=dec, kind=kind, vocab_size=vocab, L=L, B=bb,
                         prompts=n_prompts, n_tokens=n_tok, evals=evals, seconds=secs,
                         reference_seconds=lim, ratio=lim / secs,
                         tokens_per_s=n_tok / secs))
        print(f"limit  {kind:>10s} {dec:>5s} B={bb} n={vocab}: {secs:.3f} s "
              f"({n_tok / secs:,.0f} tok/s), evaluations alone {lim:.3f} s, "
              f"ratio {lim / secs:.2f}", flush=True)
    if vocab == 1_000:
        for dec, bb in (("ar", 1), ("pfr", 1), ("mpfr", 4)):
            kw = dict(L=L, B=bb, key=12345, max_new_tokens=n_new)
            k = min(4, n_prompts)
            tp = _time_loop(target, draft, ps, dec, kw, k, True, rounds)
            tc = _time_loop(target, draft, ps, dec, kw, k, False, rounds)
            rate = k * n_new / tc
            rec = rate / RECORDED_PYTHON_LOOP[dec]
            rows.append(dict(group="python", what=dec, kind=kind, vocab_size=vocab, L=L, B=bb,
                             prompts=k, n_tokens=k * n_new, evals=0, seconds=tc,
                             reference_seconds=tp, ratio=tp / tc, tokens_per_s=rate,
                             reference_tokens_per_s=k * n_new / tp, ratio_recorded=rec))
            print(f"python {kind:>10s} {dec:>5s} B={bb} n={vocab}: compiled {rate:,.0f} "
                  f"tok/s, Python loop (this run) {k * n_new / tp:,.0f} tok/s: "
                  f"{tp / tc:.1f}x; vs the recorded Python loop "
                  f"{RECORDED_PYTHON_LOOP[dec]:,.0f} tok/s: {rec:.1f}x", flush=True)
    return rows


# ------------------------------------------------------------------- the lossy decoder

#: the rules of the ``lossy`` rows (constant parameters: the compiled path)
LOSSY_BENCH = (("lossless", {}), ("lenience", {"ell": 0.5}),
               ("truncation", {"allowed": "every third token out"}),
               ("contrastive", {"beta": 0.5}), ("fuzzy", {"threshold": 0.3, "divergence": "js"}))


def _lossy_runs(python, target, draft, ps, k, rule, n_new, params):
    """``lossy_decode`` on the first ``k`` prompts; ``python``: the Python loop."""
    for i in range(k):
        be = SyntheticBackend(target, draft) if python else None
        lossy_decode(target, draft, ps.tokens[i], rule, L=L, max_new_tokens=n_new,
                     seed=ps.seeds[i], backend=be, **params)


def _lossy_rows(n_prompts, n_new, rounds):
    """Compiled ``lossy_decode`` against its Python loop (same prompts and seeds, one thread,
    best of ``rounds``), at vocabularies 1,000 and 50,000."""
    rows = []
    for vocab in (1_000, 50_000):
        target = SyntheticLM(vocab, context_length=2, seed=0, kind="gaussian16")
        draft = target.draft(0.2, seed=1)
        ps = random_prompts(n_prompts, 4, vocab, seed=3)
        k = min(2, n_prompts)
        for rule, params in LOSSY_BENCH:
            if rule == "truncation":
                params = {"allowed": np.arange(vocab) % 3 != 0}

            args = (target, draft, ps, k, rule, n_new, params)
            _lossy_runs(False, *args)  # compile
            numba.set_num_threads(1)
            try:
                tc = _best(_lossy_runs, rounds, False, *args)
                tp = _best(_lossy_runs, rounds, True, *args)
            finally:
                numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
            n_tok = k * n_new
            rows.append(dict(group="lossy", what=rule, kind="gaussian16", vocab_size=vocab,
                             L=L, B=1, prompts=k, n_tokens=n_tok, evals=0, seconds=tc,
                             reference_seconds=tp, ratio=tp / tc, tokens_per_s=n_tok / tc,
                             reference_tokens_per_s=n_tok / tp))
            print(f"lossy  {rule:>12s} n={vocab}: compiled {n_tok / tc:,.0f} tok/s, Python "
                  f"loop {n_tok / tp:,.0f} tok/s: {tp / tc:.1f}x", flush=True)
    return rows


def _versus_vsps_rows(decoder, n_prompts, n_new, rounds):
    """``decoder`` (``blockver`` or ``hsd``) against ``vsps`` (compiled batch, one thread,
    ``L = 4``) at vocabularies 1,000 and 50,000: per round both decoders, in alternating
    order; the best time of each."""
    rows = []
    for vocab in (1_000, 50_000):
        target = SyntheticLM(vocab, context_length=2, seed=0)
        draft = target.draft(0.2, seed=1)
        ps = random_prompts(n_prompts, 4, vocab, seed=4)
        kw = dict(L=L, max_new_tokens=n_new)
        aatps = {}
        for dec in ("vsps", decoder):
            aatps[dec] = speculative_decode_batch(target, draft, ps, dec,
                                                  **kw).aatps_estimate().mean
        best = {"vsps": np.inf, decoder: np.inf}
        for rnd in range(rounds):
            for dec in (("vsps", decoder) if rnd % 2 == 0 else (decoder, "vsps")):
                best[dec] = min(best[dec], _time_batch(target, draft, ps, dec, kw, 1, 1))
        n_tok = n_prompts * n_new
        rate = {d: n_tok / t for d, t in best.items()}
        rows.append(dict(group=decoder, what=f"{decoder}/vsps", kind="gaussian",
                         vocab_size=vocab, L=L, B=1, prompts=n_prompts, n_tokens=n_tok,
                         evals=aatps[decoder] / aatps["vsps"], seconds=best[decoder],
                         reference_seconds=best["vsps"], ratio=best["vsps"] / best[decoder],
                         tokens_per_s=rate[decoder], reference_tokens_per_s=rate["vsps"]))
        print(f"{decoder} n={vocab}: {rate[decoder]:,.0f} tok/s (AATPS "
              f"{aatps[decoder]:.3f}), vsps {rate['vsps']:,.0f} tok/s (AATPS "
              f"{aatps['vsps']:.3f}): ratio {best['vsps'] / best[decoder]:.2f}", flush=True)
    return rows


def run_versus_vsps(decoder: str, quick: bool = False, out_dir: Path | None = None,
                    rounds: int = 3) -> Path:
    """The ``blockver`` or ``hsd`` group alone, into ``bench_decode_<decoder>.csv``."""
    out_dir = Path(out_dir) if out_dir is not None else Path(__file__).parent / "out"
    out_dir.mkdir(parents=True, exist_ok=True)
    small = SyntheticLM(50, seed=0)
    for dec in ("vsps", decoder):  # compile
        speculative_decode_batch(small, small.draft(0.5), [[1]], dec, L=2, max_new_tokens=4)
    rows = _versus_vsps_rows(decoder, 4 if quick else 16, 32 if quick else 64, rounds)
    path = write_rows(out_dir / f"bench_decode_{decoder}.csv", rows, C_COLUMNS)
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return path


def run_compiled(quick: bool = False, out_dir: Path | None = None, rounds: int = 3) -> Path:
    out_dir = Path(out_dir) if out_dir is not None else Path(__file__).parent / "out"
    out_dir.mkdir(parents=True, exist_ok=True)
    n_prompts = 4 if quick else 16
    n_new = 32 if quick else 64
    small = SyntheticLM(50, seed=0)
    for dec in DECODERS:  # compile
        bb = 2 if dec in MULTI_DRAFT_DECODERS else 1
        speculative_decode_batch(small, small.draft(0.5), [[1]], dec, L=2, B=bb, key=0,
                                 max_new_tokens=4)
    rows = []
    for kind in KINDS:
        for vocab in (1_000, 50_000):
            rows += _vocab_rows(vocab, n_prompts, n_new, rounds, kind)
    rows += _lossy_rows(n_prompts, n_new, rounds)
    rows += _versus_vsps_rows("blockver", n_prompts, n_new, rounds)
    rows += _versus_vsps_rows("hsd", n_prompts, n_new, rounds)
    # 2 threads vs 1 on 64 prompts
    vocab = 1_000
    target = SyntheticLM(vocab, context_length=2, seed=0)
    draft = target.draft(0.2, seed=1)
    ps = random_prompts(64, 4, vocab, seed=2)
    k = min(2, numba.config.NUMBA_NUM_THREADS)
    for dec, bb in (("pfr", 1), ("mpfr", 4)):
        kw = dict(L=L, B=bb, key=12345, max_new_tokens=n_new)
        t1 = _time_batch(target, draft, ps, dec, kw, 1, rounds)
        t2 = _time_batch(target, draft, ps, dec, kw, k, rounds)
        rows.append(dict(group="threads", what=dec, kind="gaussian", vocab_size=vocab, L=L,
                         B=bb, prompts=64,
                         n_tokens=64 * n_new, evals=0, seconds=t2, reference_seconds=t1,
                         ratio=t1 / t2))
        print(f"threads {dec:>5s} B={bb}: 1 thread {t1:.3f} s, {k} threads {t2:.3f} s, "
              f"{t1 / t2:.2f}x", flush=True)
    # one model evaluation vs one exp pass at 50,000
    vocab = 50_000
    out = np.empty(vocab)
    x = np.random.default_rng(0).standard_normal(vocab)
    reps = 50
    _exp_pass(x, out)
    te = _best(lambda: [_exp_pass(x, out) for _ in range(reps)], rounds) / reps
    ctx = np.array([[1, 2]], dtype=np.int64)
    for kind in ("gaussian", "zipf", "gaussian16"):
        tgt = SyntheticLM(vocab, context_length=2, seed=0, kind=kind)
        for what, model in (("target", tgt), ("draft", tgt.draft(0.2, seed=1))):
            tm = _compiled.model_spec(model)
            _eval_loop(tm, ctx, 1, out)
            tmod = _best(_eval_loop, rounds, tm, ctx, reps, out) / reps
            rows.append(dict(group="model", what=f"next_distribution {what}", kind=kind,
                             vocab_size=vocab, L=0, B=0, prompts=0, n_tokens=0, evals=1,
                             seconds=tmod, reference_seconds=te, ratio=tmod / te))
            print(f"model  {kind:>10s} {what:>6s} next_distribution at {vocab}: "
                  f"{tmod * 1e6:.0f} us, exp pass {te * 1e6:.0f} us, {tmod / te:.2f}x",
                  flush=True)
    path = write_rows(out_dir / "bench_decode_compiled.csv", rows, C_COLUMNS)
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return path


def main(argv=None) -> Path:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="16 tokens from one prompt")
    parser.add_argument("--out", type=Path, default=None, help="output folder")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (best time is kept)")
    parser.add_argument("--compiled", action="store_true",
                        help="the compiled decoders: model-evaluation limit, Python loop, "
                             "threads")
    parser.add_argument("--blockver", action="store_true",
                        help="only block verification against vsps (compiled, one thread)")
    parser.add_argument("--hsd", action="store_true",
                        help="only lossless hierarchical speculative decoding against vsps "
                             "(compiled, one thread)")
    args = parser.parse_args(argv)
    if args.blockver or args.hsd:
        path = run_versus_vsps("hsd" if args.hsd else "blockver", quick=args.quick,
                               out_dir=args.out, rounds=args.rounds)
    elif args.compiled:
        path = run_compiled(quick=args.quick, out_dir=args.out, rounds=args.rounds)
    else:
        path = run(quick=args.quick, out_dir=args.out, rounds=args.rounds)
    print(f"wrote {path}")
    return path


if __name__ == "__main__":
    main()
