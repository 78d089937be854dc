"""The compiled decoders against the Python-loop decoder of an older commit, in one run.

Run ``python -m benchmarks.bench_against_loop [--ref REV] [--quick] [--rounds K] [--out DIR]``
from a git checkout.  ``REV`` (default :data:`LOOP_REF`, the tree on which the compiled
sequence simulator was planned; ``6ef9ebe`` is the last one before it landed) is extracted
with ``git archive`` into a temporary folder and imported by a worker process
(``PYTHONPATH`` = that folder, one Numba thread); this process times the current tree.  Each round
alternates the two on the same work -- ``speculative_decode`` of
``k`` prompts of :func:`~specbound.sim.models.random_prompts` (seed 1) x ``max_new_tokens``,
key 12345, ``L = 4`` -- so a change of machine load slows both alike, and the best of the
rounds is kept for each.  The models are ``SyntheticLM(1000, context_length=2, seed=0)`` and
``target.draft(0.2, seed=1)``: the old tree has only the ``"gaussian"`` and ``"zipf"`` kinds,
so its rows use ``"gaussian"``; the current tree is timed with ``"gaussian"`` (the same model:
the worker returns its tokens and they are checked equal, so both did the same work) and with
``"gaussian16"`` (the cheaper model evaluation, other tokens).

Writes ``bench_against_loop.csv`` with one row per (decoder, kind): ``old_tokens_per_s``,
``new_tokens_per_s``, ``ratio`` (new / old) and ``tokens_equal`` (``"gaussian"`` only).
Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

import numba
import numpy as np

from benchmarks._csv import write_rows
from specbound.sim.decode import speculative_decode
from specbound.sim.models import SyntheticLM, random_prompts

ROOT = Path(__file__).resolve().parents[1]
#: the tree in which the compiled simulator was planned (its Python-loop figures were
#: recorded on it); ``6ef9ebe`` is the last commit before the compiled simulator landed
LOOP_REF = "cac777b"
VOCAB = 1_000
L = 4
KEY = 12345
CASES = (("ar", 1), ("pfr", 1), ("mpfr", 4))
COLUMNS = ["decoder", "B", "kind", "vocab_size", "prompts", "n_tokens", "old_seconds",
           "new_seconds", "old_tokens_per_s", "new_tokens_per_s", "ratio", "tokens_equal",
           "ref"]

# the worker: imports the old tree, answers one JSON request per line with its best time
_WORKER = r"""
import json, sys, time
import numpy as np
from specbound.sim.decode import speculative_decode
from specbound.sim.models import SyntheticLM

target = SyntheticLM(VOCAB, context_length=2, seed=0)
draft = target.draft(0.2, seed=1)
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    req = json.loads(line)
    seeds = [np.random.SeedSequence(e, spawn_key=tuple(s)) for e, s in req["seeds"]]
    t0 = time.perf_counter()
    toks = []
    for prompt, seed in zip(req["prompts"], seeds):
        res = speculative_decode(target, draft, prompt, req["dec"], L=L, B=req["B"],
                                 key=KEY, max_new_tokens=req["n_new"], seed=seed)
        toks.append(res.generated.tolist())
    secs = time.perf_counter() - t0
    print(json.dumps({"seconds": secs, "tokens": toks}), flush=True)
"""


def _extract(ref: str, dest: Path) -> str:
    """``git archive`` of ``specbound/`` at ``ref`` into ``dest``; returns the full hash."""
    full = subprocess.run(["git", "rev-parse", f"{ref}^{{commit}}"], cwd=ROOT, check=True,
                          capture_output=True, text=True).stdout.strip()
    data = subprocess.run(["git", "archive", "--format=tar", full, "specbound"], cwd=ROOT,
                          check=True, capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(dest, filter="data")
    return full


class _OldLoop:
    """The worker process running the old tree's decoder."""

    def __init__(self, folder: Path):
        env = dict(os.environ, PYTHONPATH=str(folder), NUMBA_NUM_THREADS="1")
        src = _WORKER.replace("VOCAB", str(VOCAB)).replace("KEY", str(KEY)).replace(
            "L=L", f"L={L}")
        self.proc = subprocess.Popen([sys.executable, "-u", "-c", src], cwd=folder, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self._read()

    def _read(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the old tree's worker exited (see its stderr above)")
        return json.loads(line)

    def time(self, dec: str, bb: int, ps, k: int, n_new: int) -> tuple[float, list]:
        req = {"dec": dec, "B": bb, "n_new": n_new,
               "prompts": [[int(t) for t in ps.tokens[i]] for i in range(k)],
               "seeds": [[list(s.entropy), list(s.spawn_key)] for s in ps.seeds[:k]]}
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        out = self._read()
        return out["seconds"], out["tokens"]

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def _new_time(target, draft, ps, dec, bb, k, n_new):
    t0 = time.perf_counter()
    toks = []
    for i in range(k):
        res = speculative_decode(target, draft, ps.tokens[i], dec, L=L, B=bb, key=KEY,
                                 max_new_tokens=n_new, seed=ps.seeds[i])
        toks.append(res.generated.tolist())
    return time.perf_counter() - t0, toks


def run(ref: str = LOOP_REF, quick: bool = False, rounds: int = 3,
        out_dir: Path | None = None) -> Path:
    out_dir = Path(out_dir) if out_dir is not None else Path(__file__).parent / "out"
    out_dir.mkdir(parents=True, exist_ok=True)
    k = 2 if quick else 4
    n_new = 32 if quick else 64
    ps = random_prompts(k, 4, VOCAB, seed=1)
    models = {}
    for kind in ("gaussian", "gaussian16"):
        t = SyntheticLM(VOCAB, context_length=2, seed=0, kind=kind)
        models[kind] = (t, t.draft(0.2, seed=1))
    numba.set_num_threads(1)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        full = _extract(ref, Path(tmp))
        old = _OldLoop(Path(tmp))
        try:
            for dec, bb in CASES:  # warm-up: JIT compilation on both sides
                old.time(dec, bb, ps, 1, 4)
                for t, d in models.values():
                    _new_time(t, d, ps, dec, bb, 1, 4)
            for dec, bb in CASES:
                best = {"old": np.inf, "gaussian": np.inf, "gaussian16": np.inf}
                equal = True
                for _ in range(rounds):
                    secs, old_toks = old.time(dec, bb, ps, k, n_new)
                    best["old"] = min(best["old"], secs)
                    for kind, (t, d) in models.items():
                        secs, toks = _new_time(t, d, ps, dec, bb, k, n_new)
                        best[kind] = min(best[kind], secs)
                        if kind == "gaussian":
                            equal = equal and toks == old_toks
                n_tok = k * n_new
                for kind in ("gaussian", "gaussian16"):
                    r_old, r_new = n_tok / best["old"], n_tok / best[kind]
                    rows.append(dict(decoder=dec, B=bb, kind=kind, vocab_size=VOCAB, prompts=k,
                                     n_tokens=n_tok, old_seconds=best["old"],
                                     new_seconds=best[kind], old_tokens_per_s=r_old,
                                     new_tokens_per_s=r_new, ratio=r_new / r_old,
                                     tokens_equal=equal if kind == "gaussian" else "",
                                     ref=full[:12]))
                    print(f"{dec:>5s} B={bb} {kind:>10s}: old loop ({full[:7]}, gaussian) "
                          f"{r_old:,.0f} tok/s, compiled {r_new:,.0f} tok/s: "
                          f"{r_new / r_old:.1f}x"
                          + (f" (tokens equal: {equal})" if kind == "gaussian" else ""),
                          flush=True)
        finally:
            old.close()
            numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
    path = out_dir / "bench_against_loop.csv"
    write_rows(path, rows, COLUMNS)
    print(f"wrote {path}; load average {os.getloadavg()[0]:.1f}")
    return path


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ref", default=LOOP_REF, help="the older commit (default: %(default)s)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    run(a.ref, a.quick, a.rounds, a.out)


if __name__ == "__main__":
    main()
