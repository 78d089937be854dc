r"""Keyed randomness on torch: the package's PRF, bit for bit, on any torch device.

The keyed source of :mod:`specbound.sim.prf` maps (key, context window, token id, arrival
index) to a uniform in (0, 1).  Here the expansion step runs with torch integer ops, so that
the uniforms of a whole vocabulary are computed on the model's device (CPU or CUDA) in one
vectorised call, and equal the Numba/NumPy uniforms bit for bit:

1. the context label (a 64-bit BLAKE2b hash of the key digest and the last ``window``
   context tokens) is computed once per context, on the host, by
   :func:`specbound.sim.prf.context_label`;
2. the expansion is SplitMix64's finaliser (Steele, Lea & Flood 2014) applied to two
   counter rounds,

   .. math:: s = \mathrm{mix}\bigl(\mathrm{mix}(\ell + G(v+1)) + G(j+1)\bigr),\qquad
             u = \bigl(\lfloor s / 2^{12} \rfloor + \tfrac12\bigr) / 2^{52},

   with label :math:`\ell`, token id :math:`v`, arrival index :math:`j` and the
   golden-ratio increment :math:`G`; :math:`u \in [2^{-53}, 1 - 2^{-53}]`.

Torch has no unsigned 64-bit arithmetic on every device, so the uint64 words are carried in
``int64`` tensors holding the same bits: additions and multiplications wrap modulo
:math:`2^{64}` in two's complement exactly as unsigned ones do, XOR is bitwise, and the
logical right shift is emulated as an arithmetic shift followed by a mask of the low
``64 - k`` bits.  The top 52 bits of ``s`` are non-negative, so their conversion to float64
is exact, and the final affine map is the same IEEE operation as in NumPy.  Hence the
results are identical, not merely close (tested on random keys, windows, token ids up to
:math:`2^{31}` and beyond, the full vocabulary of a real model, and many arrivals; on CUDA by
the ``gpu``-marked test).

This is the keyed source used by the watermarkable decoders of Liu, Wan, Gao & Gündüz
(2026, arXiv:2609.21858), Alg. 3 and Alg. 6: ``-log(u)`` are the exponential clocks, and the
``j``-th arrival of token ``v``'s unit Poisson process is the sum of its first ``j`` clocks.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from specbound._validation import as_int, asarray_named, check_alloc
from specbound.llm._deps import require_llm_extra
from specbound.sim.prf import context_label

torch = require_llm_extra("specbound.llm.keyed")

__all__ = ["prf_uniform_torch", "keyed_uniforms", "context_labels"]

_U64 = 1 << 64


def _i64(x: int) -> int:
    """The int64 whose two's-complement bits are those of the uint64 ``x``."""
    x = int(x) % _U64
    return x - _U64 if x >= 1 << 63 else x


_GOLDEN = _i64(0x9E3779B97F4A7C15)
_M1 = _i64(0xBF58476D1CE4E5B9)
_M2 = _i64(0x94D049BB133111EB)
_INV52 = 1.0 / 4503599627370496.0  # 2**-52
_LOW = {k: (1 << (64 - k)) - 1 for k in (12, 27, 30, 31)}


def _srl(z, k: int):
    """Logical right shift of the uint64 bits held in an int64 tensor."""
    return (z >> k) & _LOW[k]


def _mix(z):
    # SplitMix64 finaliser; int64 multiplication wraps modulo 2**64 like uint64's
    z = (z ^ _srl(z, 30)) * _M1
    z = (z ^ _srl(z, 27)) * _M2
    return z ^ _srl(z, 31)


def _as_long(x, name: str, device):
    if isinstance(x, torch.Tensor):
        if x.dtype.is_floating_point or x.dtype.is_complex or x.dtype == torch.bool:
            raise ValueError(f"{name}: must hold integers, got dtype {x.dtype}")
        t = x.to(dtype=torch.int64)
        return t if device is None else t.to(device)
    if x is None or isinstance(x, str | bytes):
        raise ValueError(f"{name}: must hold integers, got {x!r}")
    arr = asarray_named(x, name)
    if arr.dtype == np.uint64:
        # uint64 labels: keep the bits
        arr = arr.view(np.int64)
    elif arr.size and arr.dtype.kind not in "iu":
        raise ValueError(f"{name}: must hold integers, got dtype {arr.dtype}")
    return torch.as_tensor(arr.astype(np.int64), device=device)


def prf_uniform_torch(label, tokens, arrivals):
    """Uniforms in (0, 1) for (label, token, arrival), broadcast, on the tensors' device.

    The torch twin of :func:`specbound.sim.prf.prf_uniform_numpy` (same arguments, same
    broadcasting, bit-identical float64 results).

    Parameters
    ----------
    label : int, numpy.uint64 or integer tensor
        Context label(s) from :func:`specbound.sim.prf.context_label` (a uint64); a tensor of
        several labels (``int64`` holding the uint64 bits, as :func:`context_labels` returns)
        broadcasts against ``tokens`` and ``arrivals``.
    tokens, arrivals : int, array_like or integer tensor
        Token ids and arrival indices (0-based), broadcast against each other and ``label``.

    Returns
    -------
    torch.Tensor of float64
        On the device of the first tensor argument (CPU if none is a tensor).
    """
    device = next((t.device for t in (label, tokens, arrivals) if isinstance(t, torch.Tensor)),
                  None)
    if isinstance(label, numbers.Integral | np.integer) and not isinstance(label, bool):
        lab = torch.tensor(_i64(int(label)), dtype=torch.int64, device=device)
    else:
        lab = _as_long(label, "label", device)
    tok = _as_long(tokens, "tokens", device)
    arr = _as_long(arrivals, "arrivals", device)
    try:
        shape = torch.broadcast_shapes(lab.shape, tok.shape, arr.shape)
    except RuntimeError:
        raise ValueError(f"tokens: shapes {tuple(lab.shape)} (label), {tuple(tok.shape)} "
                         f"(tokens) and {tuple(arr.shape)} (arrivals) do not broadcast") from None
    check_alloc("tokens", math.prod(shape), 8, what="one uniform per broadcast element")
    s = _mix(lab + _GOLDEN * (tok + 1))
    s = _mix(s + _GOLDEN * (arr + 1))
    return (_srl(s, 12).to(torch.float64) + 0.5) * _INV52


def _as_device(device):
    if device is None:
        return None
    from specbound.llm._loading import resolve_device

    return resolve_device(device)


def _as_window(window):
    if window is None:
        return None
    return as_int(window, "window", min_value=0)


def _context_array(context) -> np.ndarray:
    if isinstance(context, torch.Tensor):
        context = context.detach().cpu().numpy()
    return asarray_named(context if context is not None else [], "context")


def context_labels(key, contexts, *, window=None, device=None):
    """Labels of several contexts as one ``int64`` tensor (uint64 bits) on ``device``.

    Each label is :func:`specbound.sim.prf.context_label` of (``key``, the last ``window``
    tokens of the context); pass the result as ``label`` to :func:`prf_uniform_torch`
    (e.g. ``labels[:, None]`` against a vocabulary row) to get every context's uniforms in
    one call.
    """
    window = _as_window(window)
    device = _as_device(device)
    if isinstance(contexts, str | bytes) or not hasattr(contexts, "__iter__") or (
            isinstance(contexts, np.ndarray) and contexts.ndim == 0):
        raise ValueError(f"contexts: must be a sequence of token-id sequences, got "
                         f"{type(contexts).__name__}")
    vals = [int(context_label(key, _context_array(c), window)) for c in contexts]
    return torch.tensor([_i64(v) for v in vals], dtype=torch.int64, device=device)


def keyed_uniforms(key, context, tokens, arrivals=1, *, window=None, device=None):
    """The keyed source's uniforms for ``tokens`` in ``context``, on a torch device.

    Bit for bit the same numbers as :func:`specbound.sim.keyed_uniforms` with the same key,
    context window, token ids and arrivals; the per-token expansion runs vectorised on
    ``device``.

    Parameters
    ----------
    key : int, str or bytes
        Secret key (encoded unambiguously, as in :mod:`specbound.sim.prf`).
    context : sequence of int or integer tensor
        Token ids before the position; only the last ``window`` are hashed.
    tokens : sequence of int or 1-D integer tensor
        Non-negative token ids whose uniforms are wanted (e.g. ``torch.arange(vocab_size)``).
    arrivals : int, default 1
        Number of arrivals per token (columns of the result).
    window : int or None, default None
        Context window (``None``: the whole prefix; 0: no context).
    device : str or torch.device, optional
        Where to compute; default: the device of ``tokens`` if it is a tensor, else CPU.

    Returns
    -------
    torch.Tensor of float64, shape (len(tokens), arrivals)
        Uniforms strictly inside (0, 1).

    Raises
    ------
    ValueError
        ``tokens`` not a 1-D sequence of non-negative integers, ``arrivals`` not an integer
        ``>= 1``, ``window`` not ``None`` or a non-negative integer, ``context`` not integer.
    """
    arrivals = as_int(arrivals, "arrivals", min_value=1)
    window = _as_window(window)
    device = _as_device(device)
    if device is None and isinstance(tokens, torch.Tensor):
        device = tokens.device
    tok = _as_long(tokens, "tokens", device)
    if tok.ndim != 1:
        raise ValueError(f"tokens: must be a 1-D sequence of token ids, got shape "
                         f"{tuple(tok.shape)}")
    if tok.numel() and bool((tok < 0).any()):
        raise ValueError("tokens: token ids must be non-negative")
    ctx = _context_array(context)
    if ctx.size and ctx.dtype.kind not in "iu":
        raise ValueError(f"context: must be a sequence of integer token ids, got dtype "
                         f"{ctx.dtype}")
    check_alloc("arrivals", int(tok.numel()) * arrivals, 8, what="len(tokens) x arrivals")
    label = context_label(key, ctx, window)
    arr = torch.arange(arrivals, dtype=torch.int64, device=tok.device)
    return prf_uniform_torch(int(label), tok[:, None], arr[None, :])
