"""Random-number limits of the benchmarks (Numba loops that only draw clocks).

They are the yardsticks of ``bench_sim.py``: a sampler that must read ``n`` clocks per trial
cannot run faster than drawing them.  They live with the benchmarks, not in the package.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from specbound.sim._config import JIT
from specbound.sim._kernels import trial_label
from specbound.sim.prf import prf_uniform


@njit(**JIT)
def exp_limit_numba_rng(n, trials, seed):
    """``trials`` x ``n`` Exp(1) draws of Numba's internal generator (one thread)."""
    np.random.seed(seed)  # noqa: NPY002 - Numba's internal per-thread generator
    acc = 0.0
    for _ in range(trials):
        for _u in range(n):
            acc += np.random.exponential()  # noqa: NPY002
    return acc


@njit(**JIT)
def exp_limit_prf(n, trials, base):
    """``trials`` x ``n`` keyed PRF Exp(1) clocks ``-log prf_uniform(label_t, u, 0)``."""
    acc = 0.0
    for t in range(trials):
        lab = trial_label(base, t)
        for u in range(n):
            acc += -np.log(prf_uniform(lab, u, 0))
    return acc
