"""specbound: acceptance theory, lossy verification and keyed speculative sampling.

Three layers (see ``docs/`` in the repository):

- :mod:`specbound.theory` -- numbers from formulas (no randomness);
- :mod:`specbound.sim` -- numbers from sampling (Numba kernels);
- :mod:`specbound.llm` -- the same samplers driven by torch models (optional extra ``llm``).
"""

#: the package version (the single source: pyproject.toml reads it from here)
__version__ = "0.2.0"

__all__ = ["theory", "sim", "llm", "__version__"]


def __getattr__(name):
    # every layer is imported on first use: ``import specbound`` (and so the command line,
    # ``specbound.cli``) starts without SciPy, Numba or torch, and Ctrl-C at start-up is
    # handled by the command line rather than interrupting an import
    if name in ("theory", "sim", "llm"):
        import importlib

        return importlib.import_module(f"specbound.{name}")
    raise AttributeError(f"module 'specbound' has no attribute {name!r}")
