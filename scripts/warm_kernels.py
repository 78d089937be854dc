"""Compile the simulator's Numba kernels once, into Numba's on-disk cache.

``make test`` runs ``--part decoders`` in one process and ``--part steps`` in another (beside
the no-JIT tier), so that the two workers of the fast tier load the compiled kernels from
the cache instead of both compiling the same kernels at the same time (the decoders'
compiled loop alone is minutes of CPU on a cold cache).  Also useful on a fresh machine
before a first study: ``python scripts/warm_kernels.py``.

``decoders``: every registered decoder (one prompt, and a batch of two prompts serial and
parallel, then detection of its output) and every lossy rule with its defaults.  ``steps``:
the one-step samplers and their Monte Carlo estimators, and tree verification.  The inputs
are tiny; what this misses still compiles on first use, as without it.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np


def decoders() -> None:
    from specbound import sim
    from specbound.sim.lossy import RULE_SPECS

    target = sim.SyntheticLM(16, seed=1)
    draft = target.draft(0.3)
    for name, spec in sim.DECODER_SPECS.items():
        B = 2 if spec.multi_draft else 1
        key = 7 if spec.keyed else None
        r = sim.speculative_decode(target, draft, [1, 2], name, L=3, B=B, key=key,
                                   max_new_tokens=8)
        for parallel in (False, True):
            b = sim.speculative_decode_batch(target, draft, [[1, 2], [3]], name, L=3, B=B,
                                             key=key, max_new_tokens=8, parallel=parallel)
        if spec.keyed:
            sim.detect(r, 7)
            sim.detect_many([b[i] for i in range(len(b))], 7)
    for rule in RULE_SPECS:
        try:
            sim.lossy_decode(target, draft, [1, 2], rule, L=3, max_new_tokens=8)
        except (TypeError, ValueError):
            pass  # a rule whose parameters have no default compiles on first use


def steps() -> None:
    from specbound import sim

    p = np.array([0.5, 0.3, 0.2, 0.0])
    q = np.array([0.25, 0.25, 0.25, 0.25])
    for scheme in sim.SAMPLERS:
        for B in (1, 2):
            try:
                sim.estimate_acceptance(p, q, scheme, B=B, n=64, seed=0)
                sim.sample_emitted(p, q, scheme, B=B, n=64, seed=0)
            except ValueError:
                pass  # a scheme without this number of drafts
    sim.simulate_tree_verification(p, q, L=2, n=64, seed=0)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=("decoders", "steps", "all"), default="all")
    part = ap.parse_args(argv).part
    t0 = time.perf_counter()
    if part in ("decoders", "all"):
        decoders()
    if part in ("steps", "all"):
        steps()
    print(f"warm_kernels --part {part}: {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
