"""Input validation helpers shared by every public function (the ``_iv`` layer).

Every public function validates once, at its boundary, with these helpers and then calls
code that assumes valid input.  Every error is a :class:`ValueError` whose message starts
with the argument's name, so a user can tell at once which argument is wrong.
"""

from __future__ import annotations

import numbers

import numpy as np

#: tolerance on ``sum(p) == 1`` (DESIGN.md conventions)
SUM_ATOL = 1e-9


def as_prob(x, name: str, *, normalize: bool = False, ndim: tuple[int, ...] = (1, 2)):
    """Validate a probability vector (1-D) or a batch of them (2-D, rows are contexts).

    Returns a float64 C-contiguous array of the same shape.  Raises ``ValueError`` naming
    ``name`` for: non-numeric input, wrong number of dimensions, an empty vector, NaN/inf,
    negative entries, and rows that do not sum to 1 within ``SUM_ATOL`` (unless
    ``normalize=True``, in which case rows are rescaled and must have a positive sum).
    """
    try:
        arr = np.array(x, dtype=np.float64, copy=True)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name}: must be an array of real numbers ({exc})") from None
    if arr.ndim not in ndim:
        allowed = " or ".join(f"{d}-D" for d in ndim)
        raise ValueError(f"{name}: must be {allowed}, got an array with shape {arr.shape}")
    if arr.size == 0 or arr.shape[-1] == 0:
        raise ValueError(f"{name}: must not be empty (shape {arr.shape})")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name}: contains NaN or infinite entries")
    if np.any(arr < 0):
        raise ValueError(f"{name}: contains negative entries (min {arr.min():.3g})")
    sums = arr.sum(axis=-1)
    if normalize:
        if np.any(sums <= 0):
            raise ValueError(f"{name}: cannot normalize a vector whose entries sum to 0")
        arr /= sums[..., None]
    elif np.any(np.abs(sums - 1.0) > SUM_ATOL):
        worst = float(np.max(np.abs(sums - 1.0)))
        raise ValueError(
            f"{name}: entries must sum to 1 within {SUM_ATOL:g} (off by {worst:.3g}); "
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
    """Validate an integer argument (bools and non-integral floats are rejected)."""
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


def as_B(B, name: str = "B") -> int:
    """Number of drafts: an integer >= 1."""
    return as_int(B, name, min_value=1)


def as_real(x, name: str, *, low=None, high=None, low_open=False, high_open=False) -> float:
    """Validate a finite real scalar in an interval."""
    if isinstance(x, bool | np.bool_) or not isinstance(x, numbers.Real):
        raise ValueError(f"{name}: must be a real number, got {x!r}")
    x = float(x)
    if not np.isfinite(x):
        raise ValueError(f"{name}: must be finite, got {x}")
    if low is not None and (x < low or (low_open and x == low)):
        raise ValueError(f"{name}: must be {'>' if low_open else '>='} {low}, got {x}")
    if high is not None and (x > high or (high_open and x == high)):
        raise ValueError(f"{name}: must be {'<' if high_open else '<='} {high}, got {x}")
    return x


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
    if isinstance(seed, bool | np.bool_):
        raise ValueError(f"{name}: must be an int, SeedSequence or Generator, got {seed!r}")
    try:
        return np.random.default_rng(seed)
    except (TypeError, ValueError) as exc:
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


def as_bool_mask(x, name: str, shape) -> np.ndarray:
    """Validate a boolean mask broadcastable to ``shape``."""
    arr = np.asarray(x)
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
