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

import contextlib
import functools
import os
import pickle

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


# ------------------------------------------------------------------ the on-disk cache

#: what unpickling a cache index written by an older version of the package raises: a type
#: its kernels' signatures named is gone (``AttributeError: Can't get attribute ...``), or
#: its module (``ImportError``), or the file is cut short
_STALE_INDEX = (AttributeError, ImportError, EOFError, pickle.UnpicklingError)


@functools.cache
def _upgrade_safe_index():
    """The class of the cache files of the package's kernels: Numba's index-and-data file
    (``numba.core.caching.IndexDataCacheFile``), except that an index or data file it cannot
    unpickle is a cache miss.

    Numba unpickles an index's overloads (their signatures, with the types they name)
    before it compares the index's source stamp with the module's, so an index written by
    an older version of the package whose kernels took a type since removed (a named tuple
    replaced by a structure reference, say) would make the first call raise instead of
    recompiling; a source checkout updated in place and a ``pip`` upgrade over an old
    install keep such indexes.  With this class the kernel recompiles and its new index
    replaces the stale one (the stale data files are overwritten in turn, as Numba does
    for any stale index).  The cache's location is Numba's (``__pycache__`` beside the
    sources, or ``NUMBA_CACHE_DIR``); other programs' caches are not touched."""
    from numba.core.caching import IndexDataCacheFile

    class UpgradeSafeIndex(IndexDataCacheFile):
        def _load_index(self):
            try:
                return super()._load_index()
            except _STALE_INDEX:
                return {}

        def _load_data(self, name):
            try:
                return super()._load_data(name)
            except _STALE_INDEX:
                return None

    return UpgradeSafeIndex


def njit(*args, **options):
    """``numba.njit`` for the package's kernels (used as ``@njit(**JIT)``): the same
    dispatcher, whose on-disk cache (``cache=True``) reads an index written by an older
    version of the package as a miss (:func:`_upgrade_safe_index`) instead of failing."""
    import numba
    from numba.core.caching import IndexDataCacheFile

    def decorate(fn):
        disp = numba.njit(*args, **options)(fn)
        cache = getattr(disp, "_cache", None)  # none with NUMBA_DISABLE_JIT or cache=False
        old = getattr(cache, "_cache_file", None)
        safe = _upgrade_safe_index()
        if type(old) is IndexDataCacheFile:
            try:
                cache._cache_file = safe(cache_path=old._cache_path,
                                         filename_base=old._index_name[:-len(".nbi")],
                                         source_stamp=old._source_stamp)
            except AttributeError:  # another layout (a later Numba): its own cache file
                pass
        return disp

    return decorate


# ------------------------------------------------------------------ saying when it compiles

#: what a program tells its user when the kernels compile (once per machine: Numba caches
#: them on disk, ``cache=True`` above; a first ``fidelity_entropy`` run on a fresh clone spent
#: 152 s compiling on a busy 2-core machine, 2026-12-03)
COMPILE_NOTE = ("compiling the simulator's kernels, once per machine, about 2 minutes "
                "(cached afterwards)")


def _package_dispatchers():
    """The cached Numba dispatchers of the modules of ``specbound.sim`` imported so far."""
    import sys

    from numba.core.dispatcher import Dispatcher

    for name, mod in list(sys.modules.items()):
        if not name.startswith("specbound.sim") or mod is None:
            continue
        for obj in list(vars(mod).values()):
            if isinstance(obj, Dispatcher) and obj.__module__ == name:
                yield obj


def kernels_cached() -> bool | None:
    """Whether the on-disk cache holds the package's kernels: False when most of the cached
    kernels of the imported ``specbound.sim`` modules have no cache index yet (a first run
    on this machine, or after the sources changed), True otherwise, None when it cannot be
    told (the JIT or the cache is off, or Numba's cache layout is not the one expected).
    Costs one ``stat`` per kernel."""
    if not JIT.get("cache") or os.environ.get("NUMBA_DISABLE_JIT", "0") not in ("", "0"):
        return None
    try:
        paths = [d._cache._cache_file._index_path for d in _package_dispatchers()
                 if type(d._cache).__name__ == "FunctionCache"]
    except (AttributeError, ImportError):
        return None
    if not paths:
        return None
    missing = sum(not os.path.exists(p) for p in paths)
    return missing * 2 <= len(paths)


@contextlib.contextmanager
def compile_note(prefix: str = "", stream=None):
    """Within the block, tell the user once on stderr (``stream``) that the kernels are
    compiling (:data:`COMPILE_NOTE`, after ``prefix``): at once if the on-disk cache lacks
    them (:func:`kernels_cached`: the compilation may happen in worker processes), else at
    the first compilation of one of the package's kernels in this process (a Numba
    ``numba:compile`` event, which only a cache miss raises).  Used by the programs (the
    ``specbound`` command, the figure scripts), never by the library itself."""
    import sys

    said = []

    def say() -> None:
        if not said:
            said.append(True)
            print(f"{prefix}{COMPILE_NOTE}", file=stream or sys.stderr, flush=True)

    if os.environ.get("NUMBA_DISABLE_JIT", "0") not in ("", "0"):
        yield
        return
    if kernels_cached() is False:
        say()
    from numba.core import event

    class _FirstCompile(event.Listener):
        def on_start(self, ev):
            disp = (ev.data or {}).get("dispatcher")
            if str(getattr(disp, "__module__", "")).startswith("specbound"):
                say()

        def on_end(self, ev):
            pass

    listener = _FirstCompile()
    event.register("numba:compile", listener)
    try:
        yield
    finally:
        event.unregister("numba:compile", listener)
