"""Input validation helpers shared by every public function (the ``_iv`` layer).

Every public function validates once, at its boundary, with these helpers and then calls
code that assumes valid input.  Every error is a :class:`ValueError` whose message starts
with the argument's name, so a user can tell at once which argument is wrong.

One rule for every layer:

* **numbers are real numbers**: Python/NumPy integers and floats (or arrays of them).
  Strings (``"0.5"``), bytes, booleans where a number is meant, ``None`` and complex values
  are refused (NumPy would silently parse a string or drop an imaginary part);
* **flags are booleans**: only ``True``/``False`` (:func:`as_bool`), so ``normalize="no"``
  cannot switch an option on;
* **counts and lengths are integers that fit**: :func:`as_int` and :func:`as_int_array`
  refuse values that would wrap around in ``int64``;
* **sizes are bounded**: :func:`check_alloc` refuses an allocation above
  :data:`MAX_ARRAY_BYTES` up front, naming the argument and the memory it would need,
  instead of a ``MemoryError`` deep inside NumPy; :func:`check_memory` refuses a run whose
  estimated memory exceeds the memory available;
* **limits can be raised explicitly**: :func:`limit_from_env` reads a limit's override
  from an environment variable (e.g. ``SPECBOUND_MAX_WORK`` for the decoders' work cap).

Probability vectors and their sum tolerance
-------------------------------------------
A row must sum to 1 within ``atol = max(SUM_ATOL, SUM_EPS_FACTOR * sqrt(n) * eps)``, where
``n`` is the row length and ``eps`` the machine epsilon of the array's floating dtype
(float64 for lists and integer arrays).  For float64 input this is ``1e-9`` up to
``n ~ 10^11``.  For a float32 softmax it scales with the rounding a real model's output
carries: ``8 * sqrt(n) * 1.19e-7``, i.e. ``1.7e-4`` for a 32k vocabulary and ``4.9e-4`` for
256k tokens, about five times the worst error measured for ``torch.softmax`` in float32 over
256k logits (``9.4e-5``), while a vector off by ``1e-3`` is still refused.  ``normalize=True``
rescales every row instead (its sum must be positive); the tolerance is then not applied.
"""

from __future__ import annotations

import math
import numbers
import os

import numpy as np

#: floor of the tolerance on ``sum(p) == 1`` (float64 input of any practical length)
SUM_ATOL = 1e-9
#: the constant ``c`` of the dtype- and length-scaled tolerance ``c * sqrt(n) * eps(dtype)``
SUM_EPS_FACTOR = 8.0
#: largest array (in bytes) a public function allocates before refusing with a ValueError
MAX_ARRAY_BYTES = 2**33
#: largest integer count or length accepted where values are stored as int64
INT64_MAX = 2**63 - 1


def sum_atol(n: int, dtype=np.float64) -> float:
    """Tolerance on a row sum for a row of length ``n`` stored in ``dtype`` (module docstring)."""
    dt = np.dtype(dtype)
    eps = float(np.finfo(dt).eps) if dt.kind == "f" else float(np.finfo(np.float64).eps)
    return max(SUM_ATOL, SUM_EPS_FACTOR * math.sqrt(max(int(n), 1)) * eps)


def _human_bytes(n: int) -> str:
    n = int(n)
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if n < 1024 * 1024 or unit == "EiB":
            break
        n //= 1024
    if unit == "EiB" and n >= 1024 * 1024:
        return f"2^{n.bit_length() + 60} bytes"
    return f"{n} {unit}" if unit == "bytes" else f"{n / 1024:.1f} {_NEXT[unit]}"


_NEXT = {"bytes": "KiB", "KiB": "MiB", "MiB": "GiB", "GiB": "TiB", "TiB": "PiB", "PiB": "EiB",
         "EiB": "ZiB"}


def asarray_named(x, name: str, **kwargs) -> np.ndarray:
    """``np.asarray(x, **kwargs)``, with NumPy's own errors (ragged nesting, unconvertible
    objects) re-raised as a ``ValueError`` naming ``name``."""
    try:
        return np.asarray(x, **kwargs)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ValueError(f"{name}: not a well-formed array ({exc})") from None


def check_alloc(name: str, n_items, itemsize: int = 8, *, what: str | None = None) -> None:
    """Refuse up front an allocation of ``n_items`` items of ``itemsize`` bytes above the limit.

    ``n_items`` may be a Python int of any size (the product of several arguments); the
    message names ``name`` and states the memory the call would need and the limit
    :data:`MAX_ARRAY_BYTES`.
    """
    need = int(n_items) * int(itemsize)
    if need > MAX_ARRAY_BYTES:
        desc = f" ({what})" if what else ""
        raise ValueError(
            f"{name}: too large: the call would need about {_human_bytes(need)} of memory"
            f"{desc}; the limit is {_human_bytes(MAX_ARRAY_BYTES)} "
            "(specbound._validation.MAX_ARRAY_BYTES)"
        )


def system_available_memory() -> int | None:
    """Bytes of system memory a run may still use: Linux's ``MemAvailable`` (else the
    available physical pages; None where neither is known)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):  # pragma: no cover - not POSIX
        return None


def check_memory(name: str, need: int, *, what: str, hint: str = "") -> None:
    """Refuse up front a run whose estimated memory ``need`` (bytes, an upper bound of
    what it holds at once) exceeds the system's available memory
    (:func:`system_available_memory`; :data:`MAX_ARRAY_BYTES` where unknown), naming
    ``name`` and stating the estimate, ``what`` it is made of and the memory available."""
    free = system_available_memory()
    limit = MAX_ARRAY_BYTES if free is None else free
    need = int(need)
    if need > limit:
        where = "the limit" if free is None else "available"
        raise ValueError(f"{name}: the run would need about {_human_bytes(need)} of memory "
                         f"({what}), more than the {_human_bytes(limit)} {where}"
                         + (f"; {hint}" if hint else ""))


def limit_from_env(var: str, default: float) -> float:
    """A numeric limit with an override from the environment variable ``var``: unset or
    empty gives ``default``; otherwise a positive number (``1e13``, ``5000000``) or ``inf``
    (no limit).  ``ValueError`` naming ``var`` for anything else."""
    text = os.environ.get(var, "").strip()
    if not text:
        return float(default)
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not value > 0:  # NaN, zero and negative values
        raise ValueError(f"{var}: must be a positive number or 'inf', got {text[:80]!r}")
    return value


def _refuse_kind(arr: np.ndarray, name: str, what: str) -> None:
    kind = arr.dtype.kind
    if kind == "c":
        raise ValueError(
            f"{name}: must be {what}, got complex values (the imaginary part would be dropped)"
        )
    if kind in "US":
        raise ValueError(f"{name}: must be {what}, got strings")
    if kind == "b":
        raise ValueError(f"{name}: must be {what}, got booleans")
    if kind not in "iuf":
        raise ValueError(f"{name}: must be {what}, got dtype {arr.dtype}")


def _is_real_scalar(v) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool | np.bool_)


def as_real_array(x, name: str, *, what: str = "real numbers") -> tuple[np.ndarray, np.dtype]:
    """Validate an array of real numbers; returns ``(float64 copy, source dtype)``.

    Refuses strings, bytes, booleans, ``None``, complex values and object arrays holding
    anything but real numbers (the shared rule of the module docstring).  The source dtype
    is that of the input if it was a floating array, else float64.  NaN/inf are not
    checked here.
    """
    if x is None or isinstance(x, str | bytes):
        raise ValueError(f"{name}: must be {what}, got {x!r}")
    raw = asarray_named(x, name)
    if raw.dtype.kind == "O":
        flat = raw.reshape(-1)
        for v in flat:
            if not _is_real_scalar(v):
                raise ValueError(
                    f"{name}: must be an array of {what}, got an element {v!r} of type "
                    f"{type(v).__name__}"
                )
        try:
            arr = np.array(raw, dtype=np.float64)
        except (TypeError, ValueError, OverflowError) as exc:
            raise ValueError(f"{name}: must be an array of {what} ({exc})") from None
        return arr, np.dtype(np.float64)
    _refuse_kind(raw, name, what)
    src = raw.dtype if raw.dtype.kind == "f" else np.dtype(np.float64)
    return np.array(raw, dtype=np.float64, copy=True), src


def as_prob(x, name: str, *, normalize: bool = False, ndim: tuple[int, ...] = (1, 2)):
    """Validate a probability vector (1-D) or a batch of them (2-D, rows are contexts).

    Returns a float64 C-contiguous array of the same shape.  Raises ``ValueError`` naming
    ``name`` for: non-numeric input (strings, booleans, complex values, ...), wrong number of
    dimensions, an empty vector, NaN/inf, negative entries, and rows that do not sum to 1
    within :func:`sum_atol` (module docstring) unless ``normalize=True``, in which case rows
    are rescaled and must have a positive sum.  ``normalize`` must be a bool.
    """
    normalize = as_bool(normalize, "normalize")
    arr, src = as_real_array(x, name, what="real numbers (probabilities)")
    if arr.ndim not in ndim:
        allowed = " or ".join(f"{d}-D" for d in ndim)
        raise ValueError(f"{name}: must be {allowed}, got an array with shape {arr.shape}")
    if arr.size == 0 or arr.shape[-1] == 0:
        raise ValueError(f"{name}: must not be empty (shape {arr.shape})")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name}: contains NaN or infinite entries")
    if np.any(arr < 0):
        raise ValueError(f"{name}: contains negative entries (min {arr.min():.3g})")
    with np.errstate(over="ignore"):
        sums = arr.sum(axis=-1)
    if normalize:
        if np.any(sums <= 0):
            raise ValueError(f"{name}: cannot normalize a vector whose entries sum to 0")
        if not np.all(np.isfinite(sums)):
            raise ValueError(f"{name}: cannot normalize a vector whose sum overflows")
        arr /= sums[..., None]
    else:
        atol = sum_atol(arr.shape[-1], src)
        if np.any(np.abs(sums - 1.0) > atol):
            worst = float(np.max(np.abs(sums - 1.0)))
            raise ValueError(
                f"{name}: entries must sum to 1 within {atol:.3g} (off by {worst:.3g}); "
                "pass normalize=True to rescale"
            )
    return np.ascontiguousarray(arr)


def as_pair(p, q, *, normalize: bool = False, names=("p", "q")):
    """Validate a target/draft pair; returns ``(p2, q2, batched)``.

    ``p2`` and ``q2`` are 2-D with equal shape (a 1-D argument is broadcast against a 2-D
    one with the same vocabulary size); ``batched`` is False when both inputs were 1-D, so the
    caller can return a scalar.
    """
    pa = as_prob(p, names[0], normalize=normalize)
    qa = as_prob(q, names[1], normalize=normalize)
    if pa.shape[-1] != qa.shape[-1]:
        raise ValueError(
            f"{names[1]}: shape mismatch with {names[0]}: vocabulary sizes "
            f"{qa.shape[-1]} and {pa.shape[-1]} differ"
        )
    batched = pa.ndim == 2 or qa.ndim == 2
    p2 = np.atleast_2d(pa)
    q2 = np.atleast_2d(qa)
    if p2.shape[0] != q2.shape[0]:
        if p2.shape[0] == 1:
            p2 = np.broadcast_to(p2, q2.shape)
        elif q2.shape[0] == 1:
            q2 = np.broadcast_to(q2, p2.shape)
        else:
            raise ValueError(
                f"{names[1]}: shape mismatch with {names[0]}: {q2.shape[0]} rows and "
                f"{p2.shape[0]} rows"
            )
    return np.ascontiguousarray(p2), np.ascontiguousarray(q2), batched


def as_int(x, name: str, *, min_value: int | None = None, max_value: int | None = None) -> int:
    """Validate an integer argument (bools, strings and non-integral floats are rejected).

    An integral float (``4.0``) is accepted as ``4``.  Python integers of any size are kept
    exactly (compare them with ``max_value`` before allocating or storing in int64).
    """
    if isinstance(x, np.ndarray) and x.ndim == 0 and x.dtype.kind in "iuf":
        x = x.item()
    if isinstance(x, bool | np.bool_) or not isinstance(x, numbers.Integral):
        if isinstance(x, numbers.Real) and not isinstance(x, bool) and float(x).is_integer():
            # 4.0 is a fine "4"; 4.5 is not
            x = int(x)
        else:
            raise ValueError(f"{name}: must be an integer, got {x!r}")
    x = int(x)
    if min_value is not None and x < min_value:
        raise ValueError(f"{name}: must be >= {min_value}, got {x}")
    if max_value is not None and x > max_value:
        raise ValueError(f"{name}: must be <= {max_value}, got {x}")
    return x


def as_int_array(x, name: str, *, min_value: int | None = None,
                 max_value: int = INT64_MAX) -> np.ndarray:
    """Validate an array of integers (counts, lengths, token ids); returns an int64 copy.

    Integer arrays of any width and integral floats are accepted; booleans, strings, complex
    values and non-integral or non-finite floats are refused.  Values outside
    ``[min_value, max_value]`` (``max_value`` at most ``2**63 - 1``) are refused *before* the
    cast, so nothing wraps around (``np.uint64(2**64 - 1)`` is not silently ``-1``).
    """
    max_value = min(int(max_value), INT64_MAX)
    if x is None or isinstance(x, str | bytes):
        raise ValueError(f"{name}: must be integers, got {x!r}")
    raw = asarray_named(x, name)
    if raw.dtype.kind == "O":
        flat = raw.reshape(-1)
        for v in flat:
            if isinstance(v, bool | np.bool_) or not isinstance(v, numbers.Real):
                raise ValueError(f"{name}: must be integers, got an element {v!r}")
        if flat.size and any(
            not (float(v).is_integer() if not isinstance(v, numbers.Integral) else True)
            for v in flat
        ):
            raise ValueError(f"{name}: must be integers (got non-integral values)")
        vals = [int(v) for v in flat]
        if vals and (max(vals) > max_value or (min_value is not None and min(vals) < min_value)):
            lo = "" if min_value is None else f"[{min_value}, "
            raise ValueError(f"{name}: values must lie in {lo or '(-inf, '}{max_value}]")
        return np.array(vals, dtype=np.int64).reshape(raw.shape)
    _refuse_kind(raw, name, "integers")
    if raw.dtype.kind == "f":
        if raw.size and (not np.all(np.isfinite(raw)) or np.any(raw != np.round(raw))):
            raise ValueError(f"{name}: must be integers (got non-integral or non-finite values)")
        if raw.size and float(raw.max()) >= 2.0**63:
            raise ValueError(f"{name}: values must be at most {max_value} (got {raw.max():.3g})")
    if raw.size:
        hi = raw.max()
        lo = raw.min()
        if int(hi) > max_value:
            raise ValueError(f"{name}: values must be at most {max_value} (got {int(hi)})")
        if min_value is not None and int(lo) < min_value:
            raise ValueError(f"{name}: values must be >= {min_value} (got {int(lo)})")
    return np.array(raw, dtype=np.int64, copy=True)


def as_block_inputs(p_fn, q_fn, prompt, context_length):
    """The inputs shared by the exact block enumerations of :mod:`specbound.theory`
    (``expected_block_tokens``, ``blockver_block_tokens``): ``p_fn`` and ``q_fn`` callables
    ``context -> distribution``; ``prompt`` a 1-D sequence of non-negative integer token
    ids that fit int64 (refused before any cast), returned as a list of int; the window
    ``context_length`` None or an int >= 0.  Returns ``(prompt, context_length)``."""
    if not callable(p_fn):
        raise ValueError(f"p_fn: must be a callable context -> distribution, got "
                         f"{type(p_fn).__name__}")
    if not callable(q_fn):
        raise ValueError(f"q_fn: must be a callable context -> distribution, got "
                         f"{type(q_fn).__name__}")
    if context_length is not None:
        context_length = as_int(context_length, "context_length", min_value=0)
    h = asarray_named(prompt if prompt is not None else [], "prompt")
    if h.ndim > 1 or (h.size and (h.dtype == np.bool_ or h.dtype.kind not in "iu")):
        raise ValueError("prompt: must be a 1-D sequence of integer token ids")
    return [int(t) for t in as_int_array(h.reshape(-1), "prompt", min_value=0)], context_length


def as_B(B, name: str = "B") -> int:
    """Number of drafts: an integer in ``[1, 2**63 - 1]`` (formulas use it as an exponent)."""
    return as_int(B, name, min_value=1, max_value=INT64_MAX)


def as_real(x, name: str, *, low=None, high=None, low_open=False, high_open=False) -> float:
    """Validate a finite real scalar in an interval (strings, bools, complex are refused)."""
    if isinstance(x, np.ndarray) and x.ndim == 0 and x.dtype.kind in "iuf":
        x = x.item()
    if isinstance(x, bool | np.bool_) or not isinstance(x, numbers.Real):
        raise ValueError(f"{name}: must be a real number, got {x!r}")
    try:
        x = float(x)
    except OverflowError:
        raise ValueError(f"{name}: must be finite, got an integer too large for a float") from None
    if not np.isfinite(x):
        raise ValueError(f"{name}: must be finite, got {x}")
    if low is not None and (x < low or (low_open and x == low)):
        raise ValueError(f"{name}: must be {'>' if low_open else '>='} {low}, got {x}")
    if high is not None and (x > high or (high_open and x == high)):
        raise ValueError(f"{name}: must be {'<' if high_open else '<='} {high}, got {x}")
    return x


def as_real_per_row(value, name: str, m: int, **bounds) -> np.ndarray:
    """A real parameter given once or per context (one value per row); returns shape ``(m,)``.

    ``value`` is a real scalar, a 0-d array, or a 1-D array of length 1 or ``m``; every value
    is checked with :func:`as_real` (``bounds`` are its ``low``/``high``/``low_open``/
    ``high_open``).  Strings, booleans, complex values and ``None`` are refused.  The one
    per-row parser of the package (lossy-rule parameters in ``theory`` and ``sim``).
    """
    if isinstance(value, bool | np.bool_) or value is None or isinstance(value, str | bytes):
        raise ValueError(f"{name}: must be a real number or an array of them, got {value!r}")
    if isinstance(value, numbers.Real):
        return np.full(m, as_real(value, name, **bounds))
    if callable(value):
        raise ValueError(f"{name}: must be a real number or an array of them, got a callable")
    arr, _ = as_real_array(value, name, what="a real number or an array of them")
    if arr.ndim == 0:
        return np.full(m, as_real(float(arr), name, **bounds))
    if arr.ndim != 1 or arr.shape[0] not in (1, m):
        raise ValueError(
            f"{name}: shape mismatch: expected a scalar or {m} value(s) (one per context), "
            f"got shape {arr.shape}"
        )
    vals = [as_real(float(v), name, **bounds) for v in arr]
    return np.broadcast_to(np.asarray(vals, dtype=np.float64), (m,)).astype(np.float64)


def as_bool(x, name: str) -> bool:
    """Validate a flag: only ``True``/``False`` (Python or NumPy bools) are accepted.

    Strings such as ``"no"`` and numbers are refused, so a typo can never switch an option on.
    """
    if isinstance(x, bool | np.bool_):
        return bool(x)
    raise ValueError(f"{name}: must be True or False, got {x!r}")


def as_choice(x, name: str, choices) -> str:
    """Validate a string option against the allowed ``choices``."""
    if not isinstance(x, str) or x not in choices:
        raise ValueError(f"{name}: must be one of {sorted(choices)}, got {x!r}")
    return x


def as_rng(seed, name: str = "seed") -> np.random.Generator:
    """SPEC 7: accept None, an int, a SeedSequence, a BitGenerator or a Generator."""
    if isinstance(seed, bool | np.bool_ | str | bytes | float | complex):
        raise ValueError(f"{name}: must be an int, SeedSequence or Generator, got {seed!r}")
    try:
        return np.random.default_rng(seed)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ValueError(f"{name}: not usable as a seed ({exc})") from None


def as_seedseq(seed, name: str = "seed") -> np.random.SeedSequence:
    """A SeedSequence from any SPEC 7 seed (a Generator contributes fresh entropy from itself)."""
    if isinstance(seed, np.random.SeedSequence):
        return seed
    if isinstance(seed, np.random.Generator):
        return np.random.SeedSequence(seed.integers(0, 2**63, size=4).tolist())
    if seed is None:
        return np.random.SeedSequence()
    if isinstance(seed, bool | np.bool_) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ValueError(
            f"{name}: must be a non-negative int, SeedSequence or Generator, got {seed!r}"
        )
    return np.random.SeedSequence(int(seed))


def check_seed(seed, name: str = "seed") -> None:
    """Check one SPEC 7 seed (None, a non-negative int or array of them, a SeedSequence, a
    BitGenerator or a Generator) *without drawing from it*: a Generator handed on to a run
    must be in the state the caller left it in."""
    if seed is None or isinstance(seed, np.random.SeedSequence | np.random.BitGenerator
                                  | np.random.Generator):
        return
    as_rng(seed, name)  # an int or an array of ints: a throwaway Generator validates it


def split_seeds(seed, n: int, name: str = "seed") -> list:
    """One seed per row of a batch of ``n`` runs: the package's one seed-splitting rule.

    * a sequence (list, tuple or 1-D array) of ``n`` seeds: row ``i`` gets ``seed[i]``
      itself, so it runs exactly as a single run with ``seed=seed[i]`` (a Generator is handed
      on, not drawn from; every element is checked with :func:`check_seed`, which draws
      nothing; a None element is fresh OS entropy, as in a single run);
    * an int or a SeedSequence ``ss``: row ``i`` gets the child
      ``SeedSequence(ss.entropy, spawn_key=ss.spawn_key + (k + i,))`` with
      ``k = ss.n_children_spawned`` -- the children ``ss.spawn(n)`` would give, but ``ss``
      is not advanced, so the same SeedSequence passed twice gives the same rows;
    * None: seed 0 (a batch is reproducible unless its seeds say otherwise);
    * a Generator: the children of ``SeedSequence(g.integers(0, 2**63, size=4))`` (four
      draws, the batch's seed material).

    Raises ``ValueError`` naming ``name`` (``name[i]`` for an element) for a sequence of the
    wrong length, one Generator given for two rows (the rows would share its stream, so
    neither would run as a single run with it) and anything that is not a seed.
    """
    n = int(n)
    if seed is None:
        seed = 0
    if isinstance(seed, np.random.Generator):
        seed = as_seedseq(seed, name)
    if isinstance(seed, np.random.SeedSequence) or (
        isinstance(seed, numbers.Integral) and not isinstance(seed, bool | np.bool_)
    ):
        ss = as_seedseq(seed, name)
        k = ss.n_children_spawned
        return [np.random.SeedSequence(ss.entropy, spawn_key=tuple(ss.spawn_key) + (k + i,),
                                       pool_size=ss.pool_size) for i in range(n)]
    if isinstance(seed, np.ndarray) and seed.ndim == 1 and seed.dtype.kind in "iuO":
        seed = list(seed)
    if not isinstance(seed, list | tuple):
        raise ValueError(f"{name}: must be an int, a SeedSequence, a Generator, None or a "
                         f"list of one seed per row, got {type(seed).__name__}")
    if len(seed) != n:
        raise ValueError(f"{name}: a list of seeds needs one per row ({n}), got {len(seed)}")
    first: dict = {}
    for i, s in enumerate(seed):
        check_seed(s, f"{name}[{i}]")
        if isinstance(s, np.random.Generator):
            if id(s) in first:
                raise ValueError(f"{name}[{i}]: the Generator of {name}[{first[id(s)]}] again "
                                 "(rows sharing one stream do not run as single runs with "
                                 "it; give each row its own, e.g. Generator.spawn)")
            first[id(s)] = i
    return list(seed)


def as_bool_mask(x, name: str, shape) -> np.ndarray:
    """Validate a boolean mask broadcastable to ``shape`` (0/1 integer arrays are accepted)."""
    if x is None or isinstance(x, str | bytes):
        raise ValueError(f"{name}: must be a boolean array, got {x!r}")
    arr = asarray_named(x, name)
    if arr.dtype != np.bool_:
        if arr.dtype.kind in "iu" and np.all((arr == 0) | (arr == 1)):
            arr = arr.astype(bool)
        else:
            raise ValueError(f"{name}: must be a boolean array, got dtype {arr.dtype}")
    try:
        return np.ascontiguousarray(np.broadcast_to(arr, shape))
    except ValueError:
        raise ValueError(
            f"{name}: shape mismatch: shape {arr.shape} does not fit {tuple(shape)}"
        ) from None


def squeeze_out(x, batched: bool):
    """Return a Python float for unbatched input, else the 1-D array."""
    x = np.asarray(x)
    if batched:
        return x
    return float(x.reshape(-1)[0])
