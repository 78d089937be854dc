"""The Numba on-disk cache across an upgrade of the package (``specbound.sim._config.njit``).

Numba unpickles a cache index's overloads (their signatures, with the types they name)
before it compares the index's source stamp with the module's.  An index written by an
older version of the package whose kernel took a type since removed (the named tuple
``_compiled.Work``, replaced by a structure reference) made the first decode after an
in-place update fail with ``AttributeError: Can't get attribute 'Work' ...``.  These checks
reproduce the hazard on a small cached kernel in a temporary module (plain ``numba.njit``
fails) and show that the package's ``njit`` turns it into a recompile, with the cache beside
the sources and under ``NUMBA_CACHE_DIR``; and that every kernel of the package gets that
cache.  Deterministic.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: the child process: writes an old and a new version of a module whose cached kernel
#: took, then no longer takes, the named tuple ``Rec`` (the kernel on the same line, so the
#: two versions share Numba's index file), imports each fresh and calls the kernel
CHILD = r'''
import importlib, json, os, sys
sys.dont_write_bytecode = True
here = sys.argv[1]
sys.path.insert(0, here)
HEAD = "from {src} import njit\nfrom typing import NamedTuple\n\n\n"
OLD = (HEAD + "@njit(cache=True)\ndef kernel(r):\n    return r.a + 1.0\n\n\n"
       "class Rec(NamedTuple):\n    a: float\n\n\ndef run():\n    return kernel(Rec(1.0))\n")
NEW = (HEAD + "@njit(cache=True)\ndef kernel(x):\n    return x + 2.0\n\n\n"
       "def run():\n    return kernel(1.0)\n")


def fresh(name, text=None):
    if text is not None:
        with open(os.path.join(here, name + ".py"), "w") as f:
            f.write(text)
    sys.modules.pop(name, None)
    importlib.invalidate_caches()
    return importlib.import_module(name)


out = {}
for name, src in (("stale_plain", "numba"), ("stale_safe", "specbound.sim._config")):
    assert fresh(name, OLD.format(src=src)).run() == 2.0
    try:
        out[name] = fresh(name, NEW.format(src=src)).run()
    except AttributeError as e:
        out[name] = "AttributeError: " + str(e)
        continue
    k = fresh(name).kernel  # the same source again: the new index is read back
    k(1.0)
    out[name + "_hits"] = sum(k.stats.cache_hits.values())
print(json.dumps(out))
'''


def _child(tmp_path, cache_dir):
    env = {k: v for k, v in os.environ.items()
           if k not in ("NUMBA_DISABLE_JIT", "NUMBA_CACHE_DIR", "SPECBOUND_FASTMATH")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    if cache_dir is not None:
        env["NUMBA_CACHE_DIR"] = str(cache_dir)
    mods = tmp_path / "mods"
    mods.mkdir()
    res = subprocess.run([sys.executable, "-c", CHILD, str(mods)], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.strip().splitlines()[-1]), mods


@pytest.mark.parametrize("numba_cache_dir", [False, True], ids=["pycache", "NUMBA_CACHE_DIR"])
def test_a_stale_index_naming_a_removed_type_recompiles(tmp_path, numba_cache_dir):
    cache_dir = tmp_path / "numba-cache" if numba_cache_dir else None
    out, mods = _child(tmp_path, cache_dir)
    # the hazard: plain numba.njit fails on the index the old module wrote
    assert str(out["stale_plain"]).startswith("AttributeError: Can't get attribute 'Rec'"), out
    # the package's njit recompiles, and the index it writes back is read on the next import
    assert out["stale_safe"] == 3.0, out
    assert out["stale_safe_hits"] == 1, out
    beside = sorted(p.name for p in (mods / "__pycache__").glob("*.nbi"))
    if cache_dir is None:
        py = "py{}{}".format(*sys.version_info[:2])
        assert beside == [f"stale_plain.kernel-5.{py}.nbi", f"stale_safe.kernel-5.{py}.nbi"]
    else:  # the override is honoured: nothing is written beside the sources
        assert beside == []
        assert len(list(cache_dir.rglob("stale_safe.kernel-*.nbi"))) == 1


@pytest.mark.skipif(os.environ.get("NUMBA_DISABLE_JIT", "0") not in ("", "0"),
                    reason="no dispatchers without the JIT")
def test_every_cached_kernel_of_the_package_reads_stale_indexes_as_misses():
    from specbound.sim import _compiled, _compiled_detect, _compiled_lossy  # noqa: F401
    from specbound.sim._config import JIT, _package_dispatchers, _upgrade_safe_index

    if not JIT.get("cache"):
        pytest.skip("the on-disk cache is off (SPECBOUND_FASTMATH=0)")
    disps = list(_package_dispatchers())
    assert len(disps) > 50
    plain = [d for d in disps if not isinstance(d._cache._cache_file, _upgrade_safe_index())]
    assert plain == []
