"""One central Numba policy (cf. stumpy's ``config.py``).

fastmath never includes ``nnan``/``ninf``: this package works with ``-inf``
log-probabilities and zero probabilities everywhere.
"""

FASTMATH = {"nsz", "arcp", "contract", "afn", "reassoc"}
JIT = {"cache": True, "fastmath": FASTMATH}
