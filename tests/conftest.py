"""Shared pytest configuration: hypothesis profiles chosen by HYPOTHESIS_PROFILE.

- ``ci``: derandomized, no example database, no deadline (used by ``make test``);
- ``dev``: random exploration with a database, no deadline (default locally).
"""

import os

import matplotlib
from hypothesis import HealthCheck, settings

matplotlib.use("Agg")

settings.register_profile(
    "ci",
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=100,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
settings.register_profile(
    "dev",
    deadline=None,
    max_examples=100,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


def pytest_configure(config):
    # Under NUMBA_DISABLE_JIT=1 (coverage of the kernels' Python source) the intended uint64
    # wrap-around of the keyed PRF's mixer runs as NumPy scalar arithmetic, which warns.
    if os.environ.get("NUMBA_DISABLE_JIT", "0") not in ("", "0"):
        config.addinivalue_line("filterwarnings", "ignore:overflow encountered:RuntimeWarning")
