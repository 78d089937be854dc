"""This tree's step kernels against the kernels of an older commit, in one process.

Run ``python -m benchmarks.bench_against [--ref REV] [--quick] [--clock wall|cpu] [--out
DIR]`` from a git checkout.  The old kernel modules (``specbound/sim/_kernels.py`` and,
where the commit has it, ``specbound/sim/_decode_kernels.py``) are extracted with ``git show
REV:PATH`` into a temporary folder and imported as standalone modules next to the current
ones; each timing alternates old and new calls on the same inputs (best of five), so a
busy machine slows both alike and the ratio ``old/new`` stays meaningful; on a machine
busier than its cores, ``--clock cpu`` times by this process's CPU time instead of the
wall clock.

Two groups of rows:

- ``decoder``: the vocabulary-sized step kernels the sequence decoders call once per context
  (exponential race, MPFR top-k draft tree, GLS target race over 4 columns, inverse-CDF
  draw, SD residual draw, SpecInfer verification over 4 candidates) on the next-token
  distributions of a 50,000-token :class:`~specbound.sim.models.SyntheticLM` pair (the
  ``bench_decode`` models), and, as the yardstick, one ``next_distribution`` evaluation;
- ``sampler``: ``batch_kernel`` (what ``estimate_acceptance`` runs) on one thread for every
  scheme at ``n`` in {50, 49152} and ``B`` in {1, 4} (``bench_sim``'s pair).

Writes ``bench_against.csv``.  Nothing is asserted.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numba
import numpy as np

from benchmarks._csv import write_rows
from benchmarks.bench_sim import make_pair
from specbound.sim import _kernels as K
from specbound.sim.models import SyntheticLM
from specbound.sim.montecarlo import CHUNK, _chunks
from specbound.sim.samplers import MAX_SCAN, prepare_pairs

ROOT = Path(__file__).resolve().parents[1]
COLUMNS = ["group", "what", "n", "B", "new_us", "old_us", "old_over_new", "new_over_eval"]


def _load_old(ref: str, tmp: Path):
    mods = {}
    for name in ("_kernels", "_decode_kernels"):
        path = f"specbound/sim/{name}.py"
        res = subprocess.run(["git", "show", f"{ref}:{path}"], cwd=ROOT, capture_output=True,
                             text=True, check=False)
        if res.returncode != 0:
            continue
        file = tmp / f"old{name}.py"
        file.write_text(res.stdout)
        spec = importlib.util.spec_from_file_location(f"old{name}", file)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod
        spec.loader.exec_module(mod)
        mods[name] = mod
    return mods


#: the clock of the timings: wall-clock seconds, or this process's CPU seconds
#: (``--clock cpu``: a machine busier than its cores takes the process off the CPU for
#: stretches that a wall clock counts and a CPU clock does not)
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
_clock = CLOCKS["wall"]


def _pair_time(new, old, reps, rounds=5):
    """Best seconds per call of ``new()`` and ``old()`` (alternating, ``reps`` calls each)."""
    new()
    if old is not None:
        old()
    bn = bo = np.inf
    for _ in range(rounds):
        t0 = _clock()
        for _ in range(reps):
            new()
        bn = min(bn, (_clock() - t0) / reps)
        if old is not None:
            t0 = _clock()
            for _ in range(reps):
                old()
            bo = min(bo, (_clock() - t0) / reps)
    return bn, (bo if old is not None else np.nan)


def decoder_rows(mods, quick):
    vocab = 50_000
    target = SyntheticLM(vocab, context_length=2, seed=0)
    draft = target.draft(0.2, seed=1)
    ctx = np.array([1, 2], dtype=np.int64)
    p = target.next_distribution(ctx)
    q = draft.next_distribution(ctx)
    reps = 5 if quick else 20
    lab = iter(np.random.default_rng(0).integers(0, 2**63, size=10**6).astype(np.uint64))
    u = iter(np.random.default_rng(1).random(10**6))
    cols = np.arange(4, dtype=np.int64)
    buf = np.empty(4, np.int64)
    cands = np.empty(4, np.int64)
    K.mpfr_topk(np.uint64(5), q, 4, cands)
    ev, _ = _pair_time(lambda: target.next_distribution(ctx), None, reps)
    # the decoder kernels lived in their own module in older commits
    old = mods.get("_decode_kernels", mods.get("_kernels"))
    old_categorical = old and getattr(old, "categorical", getattr(old, "inverse_cdf", None))
    cases = [
        ("race_argmin", lambda: K.race_argmin(next(lab), p, 0),
         old and (lambda: old.race_argmin(next(lab), p, 0))),
        ("mpfr_topk k=1", lambda: K.mpfr_topk(next(lab), q, 1, buf),
         old and (lambda: old.mpfr_topk(next(lab), q, 1, buf))),
        ("mpfr_topk k=4", lambda: K.mpfr_topk(next(lab), q, 4, buf),
         old and (lambda: old.mpfr_topk(next(lab), q, 4, buf))),
        ("gls_argmin 4 cols", lambda: K.gls_argmin(next(lab), p, cols),
         old and (lambda: old.gls_argmin(next(lab), p, cols))),
        ("categorical", lambda: K.categorical(p, next(u)),
         old_categorical and (lambda: old_categorical(p, next(u)))),
        ("residual_sample", lambda: K.residual_sample(p, q, next(u)),
         old and (lambda: old.residual_sample(p, q, next(u)))),
        ("specinfer_verify 4", lambda: K.specinfer_verify(p, q, cands, np.full(4, 0.999), 0.5),
         old and (lambda: old.specinfer_verify(p, q, cands, np.full(4, 0.999), 0.5))),
    ]
    rows = [dict(group="decoder", what="next_distribution (yardstick)", n=vocab, B=1,
                 new_us=ev * 1e6, old_us=np.nan, old_over_new=np.nan, new_over_eval=1.0)]
    for what, new, oldf in cases:
        tn, to = _pair_time(new, oldf or None, reps * 10)
        rows.append(dict(group="decoder", what=what, n=vocab, B=1, new_us=tn * 1e6,
                         old_us=to * 1e6, old_over_new=to / tn, new_over_eval=tn / ev))
    return rows


def _batch_call(mod, prep, B, chunks):
    """A call of ``mod.batch_kernel`` on ``prep``'s pair (nothing stored), in the kernel's
    own signature: the pairs, chunks and outputs as records (``Pairs``, ``Chunks``,
    ``Trials``) or, in older commits, every array positionally (with or without
    ``store_x``)."""
    pair, start, length, labels = chunks
    oy, ox = np.empty((1, 1), np.int64), np.empty((1, 1, 1), np.int64)
    succ = np.zeros(pair.size, np.int64)
    st = np.zeros(pair.size, np.int64)
    arrays = tuple(prep.arrays)
    if hasattr(mod, "Pairs"):
        args = (prep.code, B, mod.Pairs(*arrays), MAX_SCAN, mod.Chunks(*chunks), False, False,
                mod.Trials(oy, ox, succ, st))
    else:
        stores = (False,) * (mod.batch_kernel.py_func.__code__.co_argcount - 19)
        args = (prep.code, B, *arrays, MAX_SCAN, *chunks, *stores, oy, ox, succ, st)
    return lambda: mod.batch_kernel(*args)


def sampler_rows(mods, quick):
    old = mods.get("_kernels")
    rows = []
    numba.set_num_threads(1)
    for n in (50, 49_152):
        p, q = make_pair(n)
        for scheme in ("sd", "exp_race", "mpfr", "mpfr_direct", "gls", "specinfer", "spectr",
                       "mpfr_scan"):
            for B in (1, 4):
                if scheme in ("sd", "exp_race") and B != 1:
                    continue
                prep = prepare_pairs(p, q if scheme != "mpfr_scan" else 0.9 * q + 0.1 * p,
                                     scheme, B)
                trials = max(CHUNK, int((2e5 if n == 50 else 400) / (1 if quick else 0.25)
                                        / (B if scheme in ("gls", "mpfr_direct") else 1)))
                chunks = _chunks(1, trials, np.random.SeedSequence(1))
                new = _batch_call(K, prep, B, chunks)
                oldf = _batch_call(old, prep, B, chunks) if old is not None else None

                tn, to = _pair_time(new, oldf if old is not None else None, 1, rounds=3)
                rows.append(dict(group="sampler", what=scheme, n=n, B=B,
                                 new_us=tn / trials * 1e6, old_us=to / trials * 1e6,
                                 old_over_new=to / tn, new_over_eval=np.nan))
                print(f"{scheme:>12s} n={n:<6d} B={B}: new {trials / tn:10.4g} trials/s, "
                      f"old/new time {to / tn:5.2f}", flush=True)
    return rows


def run(ref="b4e0818", quick=False, out_dir=None, clock="wall") -> Path:
    global _clock
    _clock = CLOCKS[clock]
    out_dir = Path(out_dir) if out_dir is not None else Path(__file__).parent / "out"
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        mods = _load_old(ref, Path(tmp))
        rows = decoder_rows(mods, quick)
        for r in rows:
            print(f"{r['what']:>30s}: new {r['new_us']:9.2f} us  old {r['old_us']:9.2f} us  "
                  f"old/new {r['old_over_new']:5.2f}  new/eval {r['new_over_eval']:.4f}",
                  flush=True)
        rows += sampler_rows(mods, quick)
    path = write_rows(out_dir / "bench_against.csv", rows, COLUMNS)
    print(f"wrote {path}")
    return path


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ref", default="b4e0818", help="git revision with the old kernels")
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    ap.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                    help="time by the wall clock or by this process's CPU time")
    ap.add_argument("--out", type=Path, default=None, help="output folder")
    args = ap.parse_args(argv)
    run(ref=args.ref, quick=args.quick, out_dir=args.out, clock=args.clock)


if __name__ == "__main__":
    main()
