"""MPFR on a public proposal process (Alg. 5, uniform marks) against the per-symbol race.

Run ``python -m benchmarks.bench_mpfr_public [--quick] [--rounds R] [--out DIR]``.  Two
groups, every ratio measured within one run with the two variants alternating in every
round (so a change of machine load affects both alike), each time the best of ``--rounds``:

- ``step``: one MPFR coupling on keyed points -- the ``B`` drafts of ``q`` and the target
  winner of ``p`` -- for ``p = softmax(2z)``, ``q = softmax(2z + 0.5z')`` at vocabularies
  50, 1,000 and 50,000 and ``B`` in {1, 4}: the race (``_kernels.mpfr_fast_step``) against
  the public process (two scans of ``_kernels.mpfr_public_select``, each after the O(V)
  ratio table ``samplers.public_plan``, as the decoder runs them), 2,000 labels (200 at
  50,000); ``ratio`` = public time / race time, ``points`` the mean number of points the two
  scans read, ``bound`` their expected order ``B V max q + V max p``;
- ``decode``: ``speculative_decode(..., "mpfr", proposal="uniform")`` against the race
  ``mpfr`` in the same Python block loop (``backend=SyntheticBackend(...)``), a
  ``SyntheticLM`` of vocabulary 1,000 and its ``draft(0.2)``, ``L = 4``, ``B = 4``, 64 new
  tokens from 4 prompts; ``ratio`` = public tokens/s over race tokens/s.

Results go to ``benchmarks/out/bench_mpfr_public.csv``.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

from benchmarks._csv import write_rows
from specbound.sim import _kernels as K
from specbound.sim.decode import SyntheticBackend, speculative_decode
from specbound.sim.models import SyntheticLM, random_prompts
from specbound.sim.samplers import MAX_SCAN, public_plan

COLUMNS = ("group", "V", "B", "race_s", "public_s", "ratio", "points", "bound")


def _pair(n, seed=0):
    rng = np.random.default_rng(seed)
    z, z2 = rng.standard_normal(n), rng.standard_normal(n)
    p = np.exp(2 * z - (2 * z).max())
    q = np.exp(2 * z + 0.5 * z2 - (2 * z + 0.5 * z2).max())
    return p / p.sum(), q / q.sum()


def _race(p, q, B, labels):
    drafts, heap, table = np.empty(B, np.int64), K.mpfr_heap(B), np.empty((1, 1))
    for lab in labels:
        K.mpfr_fast_step(p, q, B, lab, table, False, drafts, heap)


def _public(p, q, B, labels):
    q0 = np.ones(p.size)
    drafts, win = np.empty(B, np.int64), np.empty(1, np.int64)
    hb, h1, table = K.mpfr_heap(B), K.mpfr_heap(1), np.empty((1, 1))
    points = 0
    for lab in labels:
        mq, cdf, wq = public_plan(q, q0)
        n1, _ = K.mpfr_public_select(mq, cdf, B, wq, lab, table, False, MAX_SCAN, drafts, hb)
        mp, cdf, wp = public_plan(p, q0)
        n2, _ = K.mpfr_public_select(mp, cdf, 1, wp, lab, table, False, MAX_SCAN, win, h1)
        points += n1 + n2
    return points / len(labels)


def _best_alternating(fns, rounds):
    best = [np.inf] * len(fns)
    out = [None] * len(fns)
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter()
            out[i] = fn()
            best[i] = min(best[i], time.perf_counter() - t0)
    return best, out


def step_rows(quick, rounds):
    rows = []
    for V in ((50, 1000) if quick else (50, 1000, 50_000)):
        p, q = _pair(V)
        m = 200 if V >= 50_000 else (500 if quick else 2000)
        labels = np.random.default_rng(V).integers(0, 2**64, size=m, dtype=np.uint64)
        for B in (1, 4):
            _race(p, q, B, labels[:2])  # JIT warm-up
            _public(p, q, B, labels[:2])
            (tr, tp), (_, pts) = _best_alternating(
                [lambda p=p, q=q, B=B, lab=labels: _race(p, q, B, lab),
                 lambda p=p, q=q, B=B, lab=labels: _public(p, q, B, lab)], rounds)
            rows.append(dict(group="step", V=V, B=B, race_s=tr / m, public_s=tp / m,
                             ratio=tp / tr, points=float(pts),
                             bound=float(B * V * q.max() + V * p.max())))
            print(rows[-1], flush=True)
    return rows


def decode_rows(quick, rounds):
    V, B, L, new = 1000, 4, 4, (32 if quick else 64)
    target = SyntheticLM(V, 2, seed=7)
    draft = target.draft(0.2, seed=3)
    prompts = random_prompts(4, 3, V, seed=1)

    def run(proposal):
        toks = 0
        for i in range(len(prompts)):
            r = speculative_decode(target, draft, prompts.tokens[i], "mpfr", L=L, B=B,
                                   key=5, max_new_tokens=new, seed=prompts.seeds[i],
                                   proposal=proposal,
                                   backend=SyntheticBackend(target, draft))
            toks += r.tokens.size - len(prompts.tokens[i])
        return toks

    run("race")
    run("uniform")  # warm-up
    (tr, tp), (nr, npub) = _best_alternating([lambda: run("race"), lambda: run("uniform")],
                                             rounds)
    row = dict(group="decode", V=V, B=B, race_s=tr / nr, public_s=tp / npub,
               ratio=(npub / tp) / (nr / tr), points=float("nan"), bound=float("nan"))
    print(row, flush=True)
    return [row]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default="benchmarks/out")
    a = ap.parse_args(argv)
    if a.rounds < 1:
        ap.error("--rounds: must be at least 1")
    print(f"load average at start: {os.getloadavg()}", flush=True)
    rows = step_rows(a.quick, a.rounds) + decode_rows(a.quick, a.rounds)
    print(f"load average at end: {os.getloadavg()}", flush=True)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    print(write_rows(out / "bench_mpfr_public.csv", rows, COLUMNS))


if __name__ == "__main__":
    main()
