"""Keyed randomness: a counter-based pseudo-random function (PRF).

``(key, context, token id, arrival index) -> uniform in (0, 1)``, identical in Numba, NumPy
and (in the ``llm`` layer) torch.

Construction
------------
1. The key (``int``, ``str`` or ``bytes``) is encoded unambiguously with a type tag
   (``b"i:" + decimal`` for ints, ``b"s:" + UTF-8`` for strings, ``b"b:" + raw`` for bytes;
   never ``bytes(int)``) and digested with BLAKE2b (32 bytes, personalised).
2. A context label is a 64-bit integer: BLAKE2b-64 of the key digest followed by the last
   ``window`` context tokens as little-endian int64 (``window=None``: the whole prefix).  It
   is computed once per context, in Python; :class:`PrefixLabels` keeps the hash state along
   a growing sequence so that whole-prefix labels cost O(1) per new token instead of O(t).
   (``window`` is the watermark's context window; a model's own window is its
   ``context_length``.)
3. The expansion label -> uniforms is SplitMix64's finaliser applied to two counter rounds,
   ``s = mix(mix(label + G*(token+1)) + G*(arrival+1))`` with the golden-ratio increment ``G``;
   the uniform is ``((s >> 12) + 0.5) / 2**52``, which lies in ``[2**-53, 1 - 2**-53]``,
   strictly inside (0, 1) (with ``>> 11`` and ``/ 2**53`` the top value ``2**53 - 0.5`` rounds
   to ``2**53`` and gives exactly 1.0).
4. Exponential clocks are ``-log(u)``; the ``j``-th arrival time of token ``v``'s unit
   Poisson process is the sum of the first ``j`` clocks (arrivals ``0..j-1``).

:func:`key_id` is a short non-secret fingerprint of a key (recorded with decoding results so
that a detector can tell which key produced them without storing the key).

The construction is the keyed source of the watermarkable speculative samplers of Liu, Wan,
Gao & Gündüz (2026), arXiv:2609.21858, §4.1 (one unit Poisson process per token and
context, shared by generation and detection).
"""

from __future__ import annotations

import hashlib
import numbers

import numpy as np

from specbound._validation import INT64_MAX, as_choice, asarray_named, check_alloc
from specbound.sim._config import JIT, njit

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_S30 = np.uint64(30)
_S27 = np.uint64(27)
_S31 = np.uint64(31)
_S12 = np.uint64(12)
_ONE = np.uint64(1)
_INV52 = 1.0 / 4503599627370496.0  # 2**-52
_PERSON = b"specbound-prf"
_PERSON_ID = b"specbound-keyid"


def encode_key(key) -> bytes:
    """Unambiguous byte encoding of a key (int, str or bytes)."""
    if isinstance(key, bool | np.bool_):
        raise ValueError("key: must be an int, str or bytes, got a bool")
    if isinstance(key, numbers.Integral):
        return b"i:" + str(int(key)).encode("ascii")
    if isinstance(key, str):
        return b"s:" + key.encode("utf-8")
    if isinstance(key, bytes | bytearray | memoryview):
        return b"b:" + bytes(key)
    raise ValueError(f"key: must be an int, str or bytes, got {type(key).__name__}")


class KeyDigest(bytes):
    """A precomputed key digest (what :func:`key_digest` returns).

    A distinct type so that :func:`context_label` never mistakes a 32-byte raw ``bytes`` key
    for a digest: raw keys are always encoded and hashed.
    """

    __slots__ = ()


def key_digest(key) -> KeyDigest:
    """32-byte BLAKE2b digest of the encoded key (pass it as ``key`` to skip re-hashing)."""
    if isinstance(key, KeyDigest):
        return key
    return KeyDigest(hashlib.blake2b(encode_key(key), digest_size=32, person=_PERSON).digest())


def key_id(key) -> str:
    """Short non-secret fingerprint of a key: 8 hex digits.

    BLAKE2b-32 of the key digest under its own personalisation, so it reveals nothing useful
    about the key (nor about the context labels) but tells two keys apart with probability
    ``1 - 2**-32``.  Recorded as ``DecodeResult.watermark.key_id``.
    """
    return hashlib.blake2b(key_digest(key), digest_size=4, person=_PERSON_ID).hexdigest()


def as_window(window, name: str = "window"):
    """Validate a watermark context window: None (the whole prefix) or an integer >= 0."""
    if window is None:
        return None
    if isinstance(window, bool | np.bool_) or not isinstance(window, numbers.Integral) or (
        window < 0 or window > INT64_MAX
    ):
        raise ValueError(f"{name}: must be None or an integer in [0, 2**63 - 1], got {window!r}")
    return int(window)


def _window(context, window):
    raw = asarray_named(context if context is not None else [], "context")
    if raw.size and raw.dtype.kind not in "iu":
        raise ValueError(f"context: must be a sequence of integer token ids, got dtype {raw.dtype}")
    ctx = raw.astype(np.int64).reshape(-1)
    if window is not None:
        window = as_window(window)
        ctx = ctx[max(len(ctx) - window, 0) :] if window > 0 else ctx[:0]
    return ctx


def digest_label(digest: bytes, window_tokens: np.ndarray) -> np.uint64:
    """Context label from a key digest and the window's tokens, with no checks.

    The fast path of :func:`context_label` for the decoders and the detector:
    ``digest_label(key_digest(key), tokens[-window:]) == context_label(key, tokens, window)``.
    ``window_tokens`` must be an integer array (it is hashed as little-endian int64).
    """
    ctx = window_tokens
    h = hashlib.blake2b(digest, digest_size=8, person=_PERSON)
    h.update(ctx.astype("<i8").tobytes())
    return np.uint64(int.from_bytes(h.digest(), "little"))


def context_label(key, context, window=None) -> np.uint64:
    """64-bit label of (key, last ``window`` tokens of ``context``; None: all of them)."""
    return digest_label(key_digest(key), _window(context, window))


class PrefixLabels:
    """Whole-prefix context labels (``window=None``) along one growing token sequence.

    Keeps the BLAKE2b state after the key digest and the tokens committed so far, so the
    label of ``committed + suffix`` costs O(len(suffix)) instead of O(len(committed)):
    ``PrefixLabels(key, tokens).label(suffix) == context_label(key, tokens + suffix)`` bit
    for bit (the hash of a concatenation is the hash of successive updates).  Used by the
    decoders and the detector.

    Parameters
    ----------
    key : int, str, bytes or KeyDigest
    tokens : sequence of int
        The committed tokens (more are added with :meth:`extend`).
    """

    __slots__ = ("_h", "n")

    def __init__(self, key, tokens=()):
        self._h = hashlib.blake2b(key_digest(key), digest_size=8, person=_PERSON)
        self.n = 0
        self.extend(tokens)

    def extend(self, tokens) -> None:
        """Append committed tokens."""
        arr = np.asarray(tokens, dtype="<i8").reshape(-1)
        self._h.update(arr.tobytes())
        self.n += int(arr.size)

    def label(self, suffix=()) -> np.uint64:
        """Label of the committed tokens followed by ``suffix``."""
        h = self._h.copy()
        if len(suffix):
            h.update(np.asarray(suffix, dtype="<i8").tobytes())
        return np.uint64(int.from_bytes(h.digest(), "little"))


@njit(**JIT)
def _mix(z):
    z = (z ^ (z >> _S30)) * _M1
    z = (z ^ (z >> _S27)) * _M2
    return z ^ (z >> _S31)


@njit(**JIT)
def prf_uniform(label, token, arrival):
    """Uniform in (0, 1) for (label, token, arrival); Numba-callable, pure."""
    s = _mix(np.uint64(label) + _GOLDEN * (np.uint64(token) + _ONE))
    s = _mix(s + _GOLDEN * (np.uint64(arrival) + _ONE))
    return (np.float64(s >> _S12) + 0.5) * _INV52


@njit(**JIT)
def prf_exponential(label, token, arrival):
    """Exp(1) clock: ``-log(prf_uniform(...))``."""
    return -np.log(prf_uniform(label, token, arrival))


@njit(**JIT)
def _fill_uniforms(label, tokens, arrivals, out):
    for i in range(tokens.shape[0]):
        for j in range(arrivals):
            out[i, j] = prf_uniform(label, tokens[i], j)


def _mix_np(z: np.ndarray) -> np.ndarray:
    z = (z ^ (z >> _S30)) * _M1
    z = (z ^ (z >> _S27)) * _M2
    return z ^ (z >> _S31)


def prf_uniform_numpy(label, tokens, arrivals) -> np.ndarray:
    """NumPy reference of :func:`prf_uniform`, broadcasting ``tokens`` against ``arrivals``."""
    with np.errstate(over="ignore"):
        lab = np.asarray(label, dtype=np.uint64)
        tok = np.asarray(tokens, dtype=np.int64).astype(np.uint64)
        arr = np.asarray(arrivals, dtype=np.int64).astype(np.uint64)
        s = _mix_np(lab + _GOLDEN * (tok + _ONE))
        s = _mix_np(s + _GOLDEN * (arr + _ONE))
        return ((s >> _S12).astype(np.float64) + 0.5) * _INV52


def keyed_uniforms(key, context, tokens, arrivals=1, *, window=None,
                   backend="numba") -> np.ndarray:
    """The keyed source's uniforms for ``tokens`` in ``context``.

    Parameters
    ----------
    key : int, str or bytes
        Secret key (encoded unambiguously, see module docstring).
    context : sequence of int
        Token ids before the position; only the last ``window`` are used (None: all).
    tokens : sequence of int
        Token ids whose clocks are wanted (non-negative).
    arrivals : int
        Number of arrivals per token (columns of the result).
    window : int >= 0 or None
        The watermark's context window.
    backend : {"numba", "numpy"}
        Both give bit-identical results.

    Returns
    -------
    ndarray, shape (len(tokens), arrivals)
        Uniforms strictly inside (0, 1).  ``-log`` of column ``j`` is the ``j``-th
        inter-arrival time of the token's unit Poisson process.
    """
    if isinstance(arrivals, bool) or not isinstance(arrivals, numbers.Integral) or arrivals < 1:
        raise ValueError(f"arrivals: must be an integer >= 1, got {arrivals!r}")
    as_choice(backend, "backend", ("numba", "numpy"))
    tok = asarray_named(tokens, "tokens")
    if tok.ndim > 1 or (tok.size and tok.dtype.kind not in "iu"):
        raise ValueError("tokens: must be a 1-D sequence of integer token ids")
    tok = tok.astype(np.int64).reshape(-1)
    if np.any(tok < 0):
        raise ValueError("tokens: token ids must be non-negative")
    check_alloc("arrivals", tok.shape[0] * int(arrivals), what="len(tokens) x arrivals uniforms")
    ctx = asarray_named(context if context is not None else [], "context")
    if ctx.size and ctx.dtype.kind not in "iu":
        raise ValueError("context: must be a sequence of integer token ids")
    label = digest_label(key_digest(key), _window(ctx, window))
    if backend == "numpy":
        return prf_uniform_numpy(label, tok[:, None], np.arange(int(arrivals))[None, :])
    out = np.empty((tok.shape[0], int(arrivals)), dtype=np.float64)
    _fill_uniforms(label, tok, int(arrivals), out)
    return out
