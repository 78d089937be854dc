"""The programs say when the kernels compile (``specbound.sim._config.compile_note``): once
per block, at the first compilation of one of the package's kernels (a Numba cache miss),
or at once when the on-disk cache lacks them; nothing for other code's compilations or
outside the block.  One tiny function compiled three times: about a second."""

from __future__ import annotations

import io

import numba
import pytest

from specbound.sim import _config


def _fresh_function(module: str):
    def add_one(x):
        return x + 1

    add_one.__module__ = module
    return numba.njit(cache=False)(add_one)


@pytest.mark.skipif(numba.config.DISABLE_JIT, reason="nothing compiles without the JIT")
def test_compile_note_once_at_the_first_compilation_of_a_package_kernel(monkeypatch):
    monkeypatch.setattr(_config, "kernels_cached", lambda: True)
    out = io.StringIO()
    with _config.compile_note("[t] ", stream=out):
        _fresh_function("not_the_package")(1)
        assert out.getvalue() == ""  # another package's compilation: nothing said
        f = _fresh_function("specbound.sim._probe")
        f(1)
        f(2.5)  # a second signature: said once only
    assert out.getvalue() == f"[t] {_config.COMPILE_NOTE}\n"
    _fresh_function("specbound.sim._probe")(3)  # outside the block: the listener is gone
    assert out.getvalue().count("\n") == 1


@pytest.mark.skipif(numba.config.DISABLE_JIT, reason="nothing compiles without the JIT")
def test_compile_note_at_once_when_the_cache_lacks_the_kernels(monkeypatch):
    monkeypatch.setattr(_config, "kernels_cached", lambda: False)
    out = io.StringIO()
    with _config.compile_note(stream=out):
        assert out.getvalue() == _config.COMPILE_NOTE + "\n"
    import specbound.sim  # noqa: F401  (the kernels' modules)

    monkeypatch.undo()
    assert _config.kernels_cached() in (True, False, None)
