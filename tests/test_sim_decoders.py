"""The decoder registry (:mod:`specbound.sim.decoders`): every list of decoders is derived
from it, both block loops dispatch on its block kind with no fall-through, and a decoder
registered by one spec runs in both loops.

All checks are deterministic (no statistical test here).
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import types
from pathlib import Path

import numpy as np
import pytest

from specbound import sim
from specbound.sim import SyntheticBackend, SyntheticLM, prf, speculative_decode
from specbound.sim import _compiled as C
from specbound.sim import decode as D
from specbound.sim import decoders as R
from specbound.sim.decoders import DECODER_SPECS, DecoderSpec
from tests._results import assert_same_result


def _pair(n=30):
    t = SyntheticLM(n, 2, seed=5)
    return t, t.draft(0.5, seed=6)


def _register(monkeypatch, *specs):
    """Register ``specs`` besides the package's decoders for one test."""
    reg = dict(DECODER_SPECS)
    reg.update({s.name: s for s in specs})
    monkeypatch.setattr(R, "DECODER_SPECS", types.MappingProxyType(reg))


def test_public_lists_are_derived_from_the_registry():
    assert sim.DECODERS == tuple(DECODER_SPECS) == R.DECODERS
    assert D.KEYED_DECODERS == {n for n, s in DECODER_SPECS.items() if s.keyed}
    assert D.MULTI_DRAFT_DECODERS == {n for n, s in DECODER_SPECS.items() if s.multi_draft}
    assert dict(sim.DECODER_SCHEME) == {n: s.scheme for n, s in DECODER_SPECS.items()
                                        if s.scheme is not None}
    # the compiled loop's tables
    assert C.CODE_NAMES == tuple(DECODER_SPECS)
    for name, spec in DECODER_SPECS.items():
        assert spec.name == name and C.CODE_NAMES[spec.code] == name
        assert (spec.code in C._KEYED) == spec.keyed
        assert spec.block in R.BLOCK_KINDS and spec.block_for("gamma") in R.BLOCK_KINDS
        assert spec.drafts == (spec.block != "token")
    # the options each decoder takes are the ones its spec lists
    assert {n for n, s in DECODER_SPECS.items() if "reweight" in s.options} == {
        "basic_uwm", "mws", "mse", "mse_pseudo"}


def test_scheme_applies_only_to_the_block_it_describes():
    for name, spec in DECODER_SPECS.items():
        assert spec.scheme_for("delta") == spec.scheme == R.DECODER_SCHEME.get(name)
        other_block = spec.block_for("gamma") != spec.block
        assert spec.scheme_for("gamma") == (None if other_block else spec.scheme), name
    assert DECODER_SPECS["mws"].scheme_for("gamma") is None
    assert DECODER_SPECS["mse"].scheme_for("gamma") == "sd"


def test_spec_is_frozen_and_checks_its_fields():
    spec = DECODER_SPECS["vsps"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.keyed = True
    with pytest.raises(ValueError, match="^options:"):
        DecoderSpec("x", 0, "single", keyed=False, options={"colour"})
    with pytest.raises(ValueError, match="^acceptance:"):
        DecoderSpec("x", 0, "single", keyed=False, acceptance="maybe")
    with pytest.raises(ValueError, match="^code:"):
        R._registry(DecoderSpec("a", 1, "token", keyed=False))
    with pytest.raises(ValueError, match="registered twice"):
        R._registry(DecoderSpec("a", 0, "token", keyed=False),
                    DecoderSpec("a", 1, "token", keyed=False))


def test_decoder_without_a_spec_is_refused_by_every_entry_point():
    t, d = _pair()
    for backend in (None, SyntheticBackend(t, d)):
        with pytest.raises(ValueError, match="^decoder: must be one of"):
            speculative_decode(t, d, [1], "nonexistent", backend=backend)
    with pytest.raises(ValueError, match="^decoder:"):
        sim.speculative_decode_batch(t, d, [[1]], "nonexistent")
    with pytest.raises(ValueError, match="^decoder:"):
        C.run_args("nonexistent", L=2, B=1, N=4)
    with pytest.raises(ValueError, match="^decoder:"):
        R.decoder_spec(3)


def test_unknown_block_kind_raises_in_both_loops(monkeypatch):
    """A spec whose block kind has no block function gets a ValueError naming the decoder
    from the Python loop and from the compiled loop, never another decoder's block."""
    _register(monkeypatch, DecoderSpec("fake", 11, "nonexistent", keyed=False))
    t, d = _pair()
    g = np.random.default_rng(0)
    with pytest.raises(ValueError, match="^decoder: 'fake' has block kind 'nonexistent'"):
        speculative_decode(t, d, [1], "fake", backend=SyntheticBackend(t, d), seed=g)
    assert g.random() == np.random.default_rng(0).random()  # refused before any draw
    with pytest.raises(ValueError, match="^decoder: 'fake' has block kind 'nonexistent'"):
        speculative_decode(t, d, [1], "fake")  # the compiled path
    with pytest.raises(ValueError, match="^decoder: 'fake'"):
        sim.speculative_decode_batch(t, d, [[1], [2]], "fake")


@pytest.mark.kernel
def test_the_compiled_kernel_itself_refuses_an_unknown_kind():
    """The kernel's own check (behind :func:`_compiled.compiled_spec`): a kind number
    outside the known kinds raises instead of running some block."""
    t, d = _pair()
    p = C.plan(t, d, C.run_args("vsps", L=2, B=1, N=4))
    for bad in (len(R.BLOCK_KINDS), -1):
        R_ = C.run_record(p.dspec, C.option_flags(), N=4, L=2, B=1, share=p.share)._replace(
            kind=bad)
        st = C.pcg_state(np.random.default_rng(0))[None, :].copy()
        with pytest.raises(ValueError, match="unknown block kind"):
            C.run_kernel(R_, p.tm, p.dm, [np.array([1], np.int64)], st)


def test_a_spec_without_a_block_function_fails_the_import_check(monkeypatch):
    _register(monkeypatch, DecoderSpec("fake", 11, "nonexistent", keyed=False))
    monkeypatch.setattr(D, "DECODER_SPECS", R.DECODER_SPECS)
    with pytest.raises(ImportError, match="'fake': block kind 'nonexistent' has no block"):
        D._check_registry()


def test_block_dispatch_has_no_fall_through():
    """Static check: the Python loop's blocks are a table keyed by every kind, and the
    compiled kernel's block chain tests every kind and ends in a raise."""
    assert set(D._BLOCKS) == set(R.BLOCK_KINDS)
    src = inspect.getsource(C.decode_one)
    for kind in ("BLOCK_TOKEN", "BLOCK_TREE", "BLOCK_SINGLE", "BLOCK_GLS", "BLOCK_SPECINFER"):
        assert f"kind == {kind}" in src
    assert 'else:  # no fall-through to another decoder\'s block\n            raise ValueError' \
        in src


def test_compiled_module_never_imports_the_python_loop():
    """No import circle: ``_compiled`` (and the result types) import neither ``decode`` nor
    anything that imports it."""
    root = Path(C.__file__).parent
    for name in ("_compiled.py", "results.py", "decoders.py"):
        tree = ast.parse((root / name).read_text())
        mods = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        mods |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        assert not any(m and m.startswith(("specbound.sim.decode", "specbound.sim.batch",
                                           "specbound.llm")) and m != "specbound.sim.decoders"
                       for m in mods), (name, mods)


@pytest.mark.parametrize(("base", "toy"), [
    ("vsps", DecoderSpec("toy_sd", 11, "single", keyed=False, scheme="sd")),
    ("pfr", DecoderSpec("toy_race", 11, "tree", keyed=True, scheme="exp_race")),
    ("mse_pseudo", DecoderSpec("toy_coin", 11, "single", keyed=True, acceptance="keyed_coin",
                               options={"residual"})),
])
def test_a_registered_spec_runs_in_both_loops(base, toy, monkeypatch):
    """A decoder added by one spec (here one that reuses a block function) runs in the
    Python loop and in the compiled loop with the same results, and its behaviour comes from
    the spec's fields, not from its name: it decodes as the registered decoder with the same
    fields does."""
    _register(monkeypatch, toy)
    t, d = _pair()
    kw = dict(L=3, key="toy", max_new_tokens=14, window=1, seed=3)
    if "residual" in toy.options:
        kw["residual"] = "keyed"
    ref = speculative_decode(t, d, [1, 2], toy.name, backend=SyntheticBackend(t, d), **kw)
    got = speculative_decode(t, d, [1, 2], toy.name, **kw)
    assert_same_result(ref, got, label=toy.name)
    assert got.decoder == toy.name
    assert (got.watermark.key_id is not None) == toy.keyed
    batch = sim.speculative_decode_batch(t, d, [[1, 2]], toy.name, seed=[3], store_drafts=True,
                                         **{k: v for k, v in kw.items() if k != "seed"})
    assert_same_result(ref, batch[0], label=f"{toy.name} batch")
    same = speculative_decode(t, d, [1, 2], base, **kw)
    np.testing.assert_array_equal(got.tokens, same.tokens)
    np.testing.assert_array_equal(got.pivots, same.pivots)
    np.testing.assert_array_equal(got.decision_accepted, same.decision_accepted)


def test_the_key_is_hashed_once(monkeypatch):
    """From ``speculative_decode`` / ``speculative_decode_batch`` down to the kernel the key
    is hashed once; its digest is passed down (and ``key_digest`` of a digest is itself)."""
    raw_calls = []
    real = prf.key_digest

    def counting(key):
        if not isinstance(key, prf.KeyDigest):
            raw_calls.append(key)
        return real(key)

    monkeypatch.setattr(prf, "key_digest", counting)
    monkeypatch.setattr(D, "key_digest", counting)
    t, d = _pair()
    for call in (lambda: speculative_decode(t, d, [1], "mpfr", B=2, key="k", max_new_tokens=6),
                 lambda: speculative_decode(t, d, [1], "mse", key="k", max_new_tokens=6,
                                            backend=SyntheticBackend(t, d)),
                 lambda: sim.speculative_decode_batch(t, d, [[1], [2], [0]], "pfr", key="k",
                                                      max_new_tokens=6)):
        raw_calls.clear()
        call()
        assert raw_calls == ["k"]
