"""Optional dependencies of :mod:`specbound.llm`, imported on demand with install hints."""

from __future__ import annotations

import importlib

#: the command that installs the ``llm`` extra.  Where no GPU is wanted, install the CPU
#: build of torch first (``pip install torch==2.13.0 --index-url
#: https://download.pytorch.org/whl/cpu``) so that pip never pulls a multi-GB CUDA build.
EXTRA_INSTALL = "pip install 'specbound[llm]'"


def require(module: str, *, purpose: str = "specbound.llm"):
    """Import ``module`` or raise an :class:`ImportError` that says what to install."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"{purpose} needs the optional 'llm' extra ({module!r} is not installed): "
            f"install it with `{EXTRA_INSTALL}`"
        ) from exc


def require_llm_extra(purpose: str = "specbound.llm"):
    """Import torch and transformers (the core of the ``llm`` extra); return torch."""
    torch = require("torch", purpose=purpose)
    require("transformers", purpose=purpose)
    return torch
