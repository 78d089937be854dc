"""Harness time against sampler time in ``specbound.testing`` (ratios within one run).

Two cases, each run ``--repeats`` times with their order alternated, best time kept:

- **vectorised**: ``check_lossless`` with the ``"batch"`` protocol, ``10**6`` draws at
  V = 1,000 (``--n``), on the correct reference ``gallery.sd_batch`` (standard speculative
  sampling over rows) and on a null sampler that returns the drafts (what the harness alone
  costs: drafting, calling, validating, counting, the goodness of fit);
- **per call**: ``check_lossless`` with the ``"step"`` protocol, ``--n-step`` calls at V = 8,
  on ``gallery.sd_step`` (a per-call Python sampler).

Harness time = the check's total time minus the time inside the sampler calls (both
measured by the check).  Targets: vectorised harness under 2 s for 10**6 draws at V = 1,000
on one core; per-call harness at most 20% of the sampler's own time.  One thread
(``OMP_NUM_THREADS``/``MKL_NUM_THREADS`` are set to 1 before NumPy is imported).

Run: ``python -m benchmarks.bench_conformance [--quick]``; writes
``benchmarks/out/bench_conformance.csv``.
"""

from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from benchmarks._csv import write_rows  # noqa: E402
from specbound.testing import check_lossless  # noqa: E402
from specbound.testing import gallery as G  # noqa: E402

COLUMNS = ["case", "protocol", "sampler", "V", "n", "total_seconds", "sampler_seconds",
           "harness_seconds", "harness_over_sampler"]


def null_batch(P, Q, X, rng):
    """Returns the drafts as emitted tokens (accepted): the harness's cost alone."""
    return X, np.ones(X.shape[0], dtype=bool)


def _one(case, protocol, sampler, p, q, n):
    r = check_lossless(sampler, p, q, protocol=protocol, n=n, seed=0,
                       false_failure_rate=0.5 if sampler is null_batch else 1e-3)
    h = max(r.seconds_total - r.seconds_sampler, 0.0)
    return dict(case=case, protocol=protocol, sampler=sampler.__name__, V=p.size, n=n,
                total_seconds=r.seconds_total, sampler_seconds=r.seconds_sampler,
                harness_seconds=h,
                harness_over_sampler=h / r.seconds_sampler if r.seconds_sampler else np.inf)


def run(n: int, n_step: int, repeats: int, out_dir: Path) -> Path:
    load0 = os.getloadavg()[0]
    p1000, q1000 = G.realistic_pair(1000, seed=0)
    p8, q8 = G.realistic_pair(8, seed=0)
    jobs = [("vectorised", "batch", G.sd_batch, p1000, q1000, n),
            ("vectorised", "batch", null_batch, p1000, q1000, n),
            ("per call", "step", G.sd_step, p8, q8, n_step)]
    best: dict = {}
    for rep in range(repeats):
        order = jobs if rep % 2 == 0 else jobs[::-1]
        for job in order:
            row = _one(*job)
            key = (job[0], job[2].__name__)
            if key not in best or row["total_seconds"] < best[key]["total_seconds"]:
                best[key] = row
    rows = [best[(j[0], j[2].__name__)] for j in jobs]
    for r in rows:
        print(f"{r['case']:10s} {r['sampler']:10s} V={r['V']:5d} n={r['n']:>9,}: total "
              f"{r['total_seconds']:.3f} s, sampler {r['sampler_seconds']:.3f} s, harness "
              f"{r['harness_seconds']:.3f} s (harness / sampler {r['harness_over_sampler']:.3f})")
    out_dir.mkdir(parents=True, exist_ok=True)
    path = write_rows(out_dir / "bench_conformance.csv", rows, COLUMNS)
    print(f"wrote {path}; load average {load0:.2f} at the start, "
          f"{os.getloadavg()[0]:.2f} at the end")
    return path


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10**6, help="draws of the vectorised case")
    ap.add_argument("--n-step", type=int, default=20_000, help="calls of the per-call case")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="n = 10**5, 2,000 calls, 1 repeat")
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "out")
    a = ap.parse_args(argv)
    if a.quick:
        a.n, a.n_step, a.repeats = 10**5, 2000, 1
    run(a.n, a.n_step, a.repeats, a.out)


if __name__ == "__main__":
    main()
