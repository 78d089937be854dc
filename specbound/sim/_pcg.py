"""NumPy's ``PCG64`` stream replayed in Numba (private).

The compiled block loops (:mod:`specbound.sim._compiled`, the rule kernels of
:mod:`specbound.sim._compiled_lossy`) draw the same numbers in the same order as the Python
block loop's ``numpy.random.Generator``: ``rng.random()`` is :func:`pcg_double` and
``rng.integers(0, 2**64, dtype=np.uint64)`` is :func:`pcg_next`.
"""

from __future__ import annotations

import numpy as np

from specbound.sim._config import JIT, njit

__all__ = ["pcg_double", "pcg_doubles", "pcg_next", "pcg_state", "set_pcg_state"]

_M32 = np.uint64(0xFFFFFFFF)
_S32 = np.uint64(32)
_S58 = np.uint64(58)
_S11 = np.uint64(11)
_S63 = np.uint64(63)
_MUL_HI = np.uint64(0x2360ED051FC65DA4)
_MUL_LO = np.uint64(0x4385DF649FCCF645)
_ONE = np.uint64(1)
_INV53 = 1.0 / 9007199254740992.0  # 2**-53


@njit(inline="always", **JIT)
def _mulhi(a, b):
    """High 64 bits of the 128-bit product ``a * b``."""
    a0 = a & _M32
    a1 = a >> _S32
    b0 = b & _M32
    b1 = b >> _S32
    p00 = a0 * b0
    p01 = a0 * b1
    p10 = a1 * b0
    p11 = a1 * b1
    mid = (p00 >> _S32) + (p01 & _M32) + (p10 & _M32)
    return p11 + (p01 >> _S32) + (p10 >> _S32) + (mid >> _S32)


@njit(**JIT)
def pcg_next(st):
    """Next 64-bit output of NumPy's ``PCG64`` (XSL-RR 128/64); ``st = [state_hi, state_lo,
    inc_hi, inc_lo]`` is advanced in place (the LCG step comes first, as in NumPy)."""
    sh = st[0]
    sl = st[1]
    lo = sl * _MUL_LO
    hi = _mulhi(sl, _MUL_LO) + sl * _MUL_HI + sh * _MUL_LO
    nlo = lo + st[3]
    carry = _ONE if nlo < lo else np.uint64(0)
    nhi = hi + st[2] + carry
    st[0] = nhi
    st[1] = nlo
    x = nhi ^ nlo
    rot = nhi >> _S58
    return (x >> rot) | (x << ((np.uint64(64) - rot) & _S63))


@njit(**JIT)
def pcg_double(st):
    """``Generator.random()``: ``(next >> 11) * 2**-53``."""
    return np.float64(pcg_next(st) >> _S11) * _INV53


@njit(**JIT)
def pcg_doubles(st, out):
    """``out[:] = Generator.random(out.size)``."""
    for i in range(out.shape[0]):
        out[i] = pcg_double(st)


def pcg_state(rng: np.random.Generator) -> np.ndarray | None:
    """The ``PCG64`` state of ``rng`` as four words, or None for another bit generator."""
    bg = rng.bit_generator
    if type(bg) is not np.random.PCG64:
        return None
    s = bg.state["state"]
    m = (1 << 64) - 1
    return np.array([s["state"] >> 64, s["state"] & m, s["inc"] >> 64, s["inc"] & m],
                    dtype=np.uint64)


def set_pcg_state(rng: np.random.Generator, st: np.ndarray) -> None:
    """Write the advanced state back into ``rng`` (as if the draws had been made there)."""
    bg = rng.bit_generator
    state = bg.state
    state["state"] = {"state": (int(st[0]) << 64) | int(st[1]),
                      "inc": (int(st[2]) << 64) | int(st[3])}
    bg.state = state
