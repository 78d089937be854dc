"""Cold-cache compile time of the compiled decoders' loop.

Run ``python -m benchmarks.bench_compile [--decoders pfr,mpfr] [--ref DIR]``.  For each
decoder, a fresh Python process with an empty Numba cache (``NUMBA_CACHE_DIR`` set to a new
temporary folder, so the repository's own cache is neither read nor touched) imports
``specbound.sim`` and decodes 16 tokens from one prompt with a 32-token ``SyntheticLM`` and
its draft; the process reports the CPU seconds (``time.process_time``) of the import and of
that first decode, which is almost all compilation: the first decode compiles the whole
block loop (every block kind, as ``decode_one`` dispatches to each), the model kernels and
the keyed randomness.  CPU time, not wall time, so that a busy machine distorts it less;
the load average is printed beside it.

``--ref DIR``: also time the source tree ``DIR`` (e.g. a ``git worktree`` of an older
commit) in the same run, the two trees alternating per decoder, and report the ratio of
CPU seconds (this tree / reference).  Results go to ``benchmarks/out/bench_compile.csv``.

Measured 2026-12-07 (2-core machine, load average about 10 from other work): ``pfr`` first
decode 158 s of CPU with the loop's records as named tuples, 103 s with them as structure
references (``specbound/sim/_records.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks._csv import write_rows

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, sys, time
t0 = time.process_time()
from specbound import sim
t1 = time.process_time()
name, B = sys.argv[1], int(sys.argv[2])
target = sim.SyntheticLM(32, seed=1)
draft = target.draft(0.3)
key = 7 if sim.DECODER_SPECS[name].keyed else None
sim.speculative_decode(target, draft, [1, 2, 3], name, L=4, B=B, key=key, max_new_tokens=16)
t2 = time.process_time()
print(json.dumps({"import_s": t1 - t0, "first_decode_s": t2 - t1}))
"""


def cold_compile(tree: Path, decoder: str, B: int) -> dict:
    """CPU seconds of the import and the first decode in a fresh process on ``tree`` with
    an empty Numba cache."""
    with tempfile.TemporaryDirectory(prefix="specbound-numba-") as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache, PYTHONPATH=str(tree),
                   NUMBA_NUM_THREADS="1", OMP_NUM_THREADS="1")
        proc = subprocess.run([sys.executable, "-c", CHILD, decoder, str(B)], cwd=tree,
                              env=env, capture_output=True, text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--decoders", default="pfr",
                    help="comma-separated decoders (multi-draft ones run with B = 4)")
    ap.add_argument("--ref", type=Path, default=None, help="a reference source tree")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "out")
    args = ap.parse_args(argv)
    from specbound.sim import DECODER_SPECS

    names = [d.strip() for d in args.decoders.split(",") if d.strip()]
    unknown = [d for d in names if d not in DECODER_SPECS]
    if unknown:
        ap.error(f"--decoders: unknown decoder(s) {unknown}")
    if args.ref is not None and not (args.ref / "specbound").is_dir():
        ap.error(f"--ref: {args.ref} holds no specbound source tree")
    rows = []
    for name in names:
        B = 4 if DECODER_SPECS[name].multi_draft else 1
        row = {"decoder": name, "B": B, "load_average": round(os.getloadavg()[0], 2)}
        new = cold_compile(ROOT, name, B)
        row.update({f"{k}": round(v, 1) for k, v in new.items()})
        if args.ref is not None:
            ref = cold_compile(args.ref, name, B)
            row.update({f"ref_{k}": round(v, 1) for k, v in ref.items()})
            row["ratio"] = round(new["first_decode_s"] / ref["first_decode_s"], 3)
        rows.append(row)
        print(json.dumps(row), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    columns = list(dict.fromkeys(k for r in rows for k in r))
    path = write_rows(args.out / "bench_compile.csv", rows, columns)
    print(f"wrote {path}; load average {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
