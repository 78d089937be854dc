"""One central Numba policy (cf. stumpy's ``config.py``).

fastmath never includes ``nnan``/``ninf``: this package works with ``-inf``
log-probabilities and zero probabilities everywhere.  The flags kept only allow
reassociation, contraction and reciprocal/approximate-function rewrites, which may change a
score in its last bit but never the discrete outputs of a sampler on a fixed table of
uniforms (``tests/test_sim_kernels.py`` compiles every kernel both ways and compares).

``SPECBOUND_FASTMATH=0`` in the environment (read once, at import) compiles every kernel
of the package without fastmath and without the on-disk cache (Numba's cache key does not
include the fastmath flags, so a cached fastmath build must not be reused); it exists for
that comparison and for debugging.
"""

from __future__ import annotations

import os

FASTMATH = {"nsz", "arcp", "contract", "afn", "reassoc"}


def jit_options(fastmath: bool = True) -> dict:
    """Keyword arguments of ``numba.njit`` for the package's kernels.

    ``fastmath=True``: the flags above and ``cache=True``; ``False``: IEEE arithmetic and no
    on-disk cache.
    """
    if fastmath:
        return {"cache": True, "fastmath": FASTMATH}
    return {"cache": False, "fastmath": False}


#: whether this process compiles with fastmath (``SPECBOUND_FASTMATH=0`` turns it off)
FASTMATH_ON = os.environ.get("SPECBOUND_FASTMATH", "1").strip() != "0"
JIT = jit_options(FASTMATH_ON)
#: for kernels whose result is defined by a running sum in index order (the inverse CDF):
#: the same flags without ``reassoc``, which would let LLVM reorder (vectorise) the additions
JIT_SEQUENTIAL = dict(JIT, fastmath=FASTMATH - {"reassoc"}) if FASTMATH_ON else dict(JIT)
