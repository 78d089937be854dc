"""Throughput of the token-level samplers behind ``specbound.sim.estimate_acceptance``.

Run ``python -m benchmarks.bench_sim [--quick] [--out DIR]``.  For every scheme, vocabulary
size ``n`` in {50, 1000, 49152} and ``B`` in {1, 4, 8} (B = 1 only for ``sd``/``exp_race``)
it measures trials (speculative steps) per second of

- ``numba_1t`` / ``numba_2t``: ``estimate_acceptance`` with 1 and 2 Numba threads (keyed PRF
  clocks per trial, see :mod:`specbound.sim.montecarlo`);
- ``numpy``: a straightforward NumPy implementation of the same sampler (per trial,
  vectorised over the vocabulary, per-pair precomputation hoisted out of the loop,
  uniforms/exponentials from ``np.random.Generator``), in this file;
- ``rng_limit``: the random-number limit, a Numba loop that only draws ``n`` Exp(1) variates
  per trial (Numba's built-in ``np.random.exponential``), single thread;
- ``prf_limit``: the same loop with the keyed PRF clocks ``-log prf_uniform``.

and the ratios ``x_numpy = numba_1t / numpy``, ``x_rng = numba_1t / rng_limit``,
``x_prf = numba_1t / prf_limit``, ``speedup_2t = numba_2t / numba_1t``.  The pair is
``p = softmax(2 z)``, ``q = softmax(2 z + 0.5 z')`` with ``z, z'`` standard normal (full
support, 1 - TV about 0.8).  Results go to ``benchmarks/out/bench_sim.csv`` and a table is
printed.  Timings are the best wall-clock time of three runs (1- and 2-thread runs
alternate, and both limits are re-measured for every row, so a row sees one machine load);
nothing is asserted.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numba
import numpy as np

from benchmarks._csv import write_rows
from benchmarks._limits import exp_limit_numba_rng, exp_limit_prf
from specbound.sim import estimate_acceptance, spectr_rho
from specbound.sim.montecarlo import CHUNK

SIZES = (50, 1000, 49_152)
BS = (1, 4, 8)
SCHEMES = ("sd", "exp_race", "mpfr", "mpfr_direct", "gls", "specinfer", "spectr", "mpfr_scan")
COLUMNS = ["scheme", "n", "B", "numba_1t", "numba_2t", "numpy", "rng_limit", "prf_limit",
           "x_numpy", "x_rng", "x_prf", "speedup_2t"]


def make_pair(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    z = 2.0 * rng.standard_normal(n)
    p = np.exp(z - z.max())
    zq = z + 0.5 * rng.standard_normal(n)
    q = np.exp(zq - zq.max())
    return p / p.sum(), q / q.sum()


# ----------------------------------------------------------------- straightforward NumPy


class NumpySampler:
    """Per-trial NumPy implementations (per-pair precomputation done once in ``__init__``)."""

    def __init__(self, p, q, scheme, B):
        self.p, self.q, self.scheme, self.B = p, q, scheme, B
        self.n = p.size
        self.qcdf = np.cumsum(q)
        res = np.maximum(p - q, 0.0)
        self.sd_cdf = np.cumsum(res / res.sum())
        if scheme == "specinfer":
            cur, rows = p.copy(), []
            for _ in range(B + 1):
                rows.append(cur)
                r = np.maximum(cur - q, 0.0)
                cur = r / r.sum() if r.sum() > 0 else cur
            self.targ = rows
            self.fin_cdf = np.cumsum(rows[B])
        if scheme == "spectr":
            self.rho = spectr_rho(p, q, B)
            beta = np.minimum(q, p / self.rho).sum()
            f = sum((1 - beta) ** i for i in range(B))
            self.fin_cdf = np.cumsum(np.maximum(p - np.minimum(q, p / self.rho) * f, 0.0))
        if scheme == "mpfr_scan":
            self.ratio = p / q
            self.w = float(np.min(q / p))

    def _draw(self, cdf, u):
        return min(int(np.searchsorted(cdf, u * cdf[-1], side="right")), self.n - 1)

    def step(self, rng):
        p, q, B, s = self.p, self.q, self.B, self.scheme
        if s == "sd":
            u = rng.random(3)
            x = self._draw(self.qcdf, u[0])
            return True if u[1] * q[x] <= p[x] else self._draw(self.sd_cdf, u[2]) == x
        if s == "exp_race":
            e = rng.standard_exponential(self.n)
            return np.argmin(e / p) == np.argmin(e / q)
        if s in ("mpfr", "mpfr_direct"):
            g = np.cumsum(rng.standard_exponential((self.n, B)), axis=1)
            y = np.argmin(g[:, 0] / p)
            sc = (g / q[:, None]).ravel()
            top = np.argpartition(sc, B - 1)[:B] if B < sc.size else np.arange(sc.size)
            return y in top // B
        if s == "gls":
            e = rng.standard_exponential((B, self.n))
            drafts = np.argmin(e / q, axis=1)
            return (np.argmin(e / p) % self.n) in drafts
        if s in ("specinfer", "spectr"):
            u = rng.random((B + 1, 2))
            xs = [self._draw(self.qcdf, u[j, 0]) for j in range(B)]
            for j, x in enumerate(xs):
                if s == "specinfer" and u[j, 1] * q[x] <= self.targ[j][x]:
                    return True
                if s == "spectr" and u[j, 1] * self.rho * q[x] <= p[x]:
                    return True
            return False
        if s == "mpfr_scan":
            t, best, y, zs, i = 0.0, np.inf, -1, [], 0
            while True:
                t += rng.standard_exponential()
                z = self._draw(self.qcdf, rng.random())
                zs.append(z)
                sc = t / self.ratio[z]
                if sc < best:
                    best, y = sc, z
                i += 1
                if i >= B and best <= t * self.w:
                    return y in zs[:B]
        raise ValueError(s)


# ----------------------------------------------------------------- timing helpers


def _rate(fn, min_time):
    """Trials per second of ``fn(trials)``: grow ``trials`` until a run takes ``min_time``,
    then take the best of three runs."""
    trials = 8
    while True:
        t0 = time.perf_counter()
        fn(trials)
        dt = time.perf_counter() - t0
        if dt >= min_time or trials >= 1 << 24:
            break
        trials = int(trials * max(2.0, min(16.0, 1.5 * min_time / max(dt, 1e-6))))
    best = dt
    for _ in range(2):
        t0 = time.perf_counter()
        fn(trials)
        best = min(best, time.perf_counter() - t0)
    return trials / best


def _numba_rates(p, q, scheme, B, min_time, reps=3):
    """Trials per second of ``estimate_acceptance`` with 1 and with 2 Numba threads.

    The trial count is grown until one single-thread run takes ``min_time``; then 1- and
    2-thread runs alternate ``reps`` times and the best of each is kept (so both see the
    same machine load).  At least 8 chunks per thread are run so ``prange`` can balance.
    """
    old = numba.get_num_threads()

    def timed(threads, trials):
        numba.set_num_threads(threads)
        t0 = time.perf_counter()
        estimate_acceptance(p, q, scheme, B, n=trials, seed=1)
        return time.perf_counter() - t0

    try:
        trials = 16 * CHUNK
        while (dt := timed(1, trials)) < min_time:
            trials = int(trials * max(2.0, min(16.0, 1.5 * min_time / max(dt, 1e-6))))
        best1, best2 = dt, np.inf
        for _ in range(reps):
            best2 = min(best2, timed(2, trials))
            best1 = min(best1, timed(1, trials))
        return trials / best1, trials / best2
    finally:
        numba.set_num_threads(old)


def run(quick: bool = False, out_dir: Path | None = None, schemes=SCHEMES) -> Path:
    out_dir = Path(out_dir) if out_dir is not None else Path(__file__).parent / "out"
    out_dir.mkdir(parents=True, exist_ok=True)
    min_time = 0.1 if quick else 0.3
    sizes = (50, 49_152) if quick else SIZES
    # warm-up (JIT compile or load from cache)
    pw, qw = make_pair(10)
    for s in schemes:
        estimate_acceptance(pw, qw, s, 1 if s in ("sd", "exp_race") else 2, n=10)
    exp_limit_numba_rng(10, 2, 0)
    exp_limit_prf(10, 2, np.uint64(1))
    rows = []
    print(f"{'scheme':<12}{'n':>7}{'B':>3}{'numba 1T':>12}{'numba 2T':>12}{'numpy':>11}"
          f"{'x numpy':>9}{'x rng':>9}{'x prf':>9}{'2T/1T':>7}")
    for n in sizes:
        p, q = make_pair(n)
        for s in schemes:
            for B in BS:
                if s in ("sd", "exp_race") and B != 1:
                    continue
                if quick and B == 4:
                    continue
                # the limits are measured next to each row so that both see the same load
                rng_lim = _rate(lambda t, n=n: exp_limit_numba_rng(n, t, 0), min_time)
                prf_lim = _rate(lambda t, n=n: exp_limit_prf(n, t, np.uint64(7)), min_time)
                one, two = _numba_rates(p, q, s, B, min_time)
                ns = NumpySampler(p, q, s, B)
                gen = np.random.default_rng(0)
                npr = _rate(lambda t, ns=ns, gen=gen: [ns.step(gen) for _ in range(t)],
                            min_time)
                row = dict(scheme=s, n=n, B=B, numba_1t=one, numba_2t=two, numpy=npr,
                           rng_limit=rng_lim, prf_limit=prf_lim, x_numpy=one / npr,
                           x_rng=one / rng_lim, x_prf=one / prf_lim, speedup_2t=two / one)
                rows.append(row)
                print(f"{s:<12}{n:>7}{B:>3}{one:>12.4g}{two:>12.4g}{npr:>11.4g}"
                      f"{one / npr:>9.1f}{one / rng_lim:>9.2f}{one / prf_lim:>9.2f}"
                      f"{two / one:>7.2f}", flush=True)
    path = write_rows(out_dir / "bench_sim.csv", rows, COLUMNS)
    print(f"wrote {path}")
    return path


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer sizes, shorter timings")
    ap.add_argument("--out", type=Path, default=None, help="output folder")
    ap.add_argument("--schemes", nargs="*", default=list(SCHEMES))
    args = ap.parse_args(argv)
    run(quick=args.quick, out_dir=args.out, schemes=tuple(args.schemes))


if __name__ == "__main__":
    main()
