"""The lossy rule registry (:data:`specbound.sim.lossy.RULE_SPECS`): the public rule list,
the parameters, the mechanisms and the compiled codes all come from one spec per rule.

All checks are deterministic (no statistical test here).
"""

from __future__ import annotations

import dataclasses
import inspect
import types

import numpy as np
import pytest

from specbound import theory
from specbound.sim import (
    SyntheticBackend,
    SyntheticLM,
    lossy_decode,
    lossy_decode_batch,
    speculative_decode,
)
from specbound.sim import _compiled as C
from specbound.sim import _compiled_lossy as CL
from specbound.sim import lossy as LO
from specbound.sim import lossy_seq as LS
from specbound.sim.lossy import RULE_SPECS, RuleSpec, rule_spec
from specbound.theory.lossy import RULE_PARAMS
from tests._results import assert_same_result


def _pair(n=20):
    t = SyntheticLM(n, 2, seed=8)
    return t, t.draft(0.5, seed=9)


def test_registry_is_the_rule_list_with_its_parameters():
    assert tuple(RULE_SPECS) == theory.RULES == LO.LOSSY_RULES
    for name, spec in RULE_SPECS.items():
        assert spec.name == name and spec.params == RULE_PARAMS[name]
        assert spec.code in CL.CODES
        assert rule_spec(name) is spec
    assert len({s.code for s in RULE_SPECS.values()}) == len(RULE_SPECS)
    with pytest.raises(dataclasses.FrozenInstanceError):
        RULE_SPECS["lossless"].code = 3


def test_compiled_codes_are_the_specs_not_positions(monkeypatch):
    """The compiled constants are the registry's codes: reordering ``theory.RULES`` (as a
    new rule inserted in the middle would) changes no code."""
    assert CL.LOSSLESS == RULE_SPECS["lossless"].code
    assert CL.TRUNCATION_CEILING == RULE_SPECS["truncation_ceiling"].code
    monkeypatch.setattr(LO, "LOSSY_RULES", tuple(reversed(theory.RULES)))
    dummy = {"allowed": np.arange(20) < 4, "ell": 0.5}
    assert LS._constants("truncation_ceiling", dummy, 20)[0] == CL.TRUNCATION_CEILING
    assert LS._constants("lossless", {}, 20)[0] == -1  # speculative sampling's own step


def test_unknown_rule_is_refused_everywhere():
    t, d = _pair()
    for backend in (None, SyntheticBackend(t, d)):
        with pytest.raises(ValueError, match="^rule: must be one of"):
            lossy_decode(t, d, [1], "sloppy", backend=backend)
    with pytest.raises(ValueError, match="^rule:"):
        lossy_decode_batch(t, d, [[1]], "sloppy")
    with pytest.raises(ValueError, match="^rule:"):
        rule_spec(None)


@pytest.mark.kernel
def test_compiled_lossy_loop_refuses_an_unknown_code():
    """No fall-through in the compiled loop: a code outside the registry raises instead of
    running the last rule of an if-chain."""
    t, d = _pair()
    _, fpar, ipar, jud, alw = LS._constants("lossless", {}, 20)
    tm, dm, share = LS._plan(t, d, 2, 4, True, False)
    for bad in (max(CL.CODES) + 1, -2):
        st = C.pcg_state(np.random.default_rng(0))[None, :].copy()
        with pytest.raises(ValueError, match="unknown rule code"):
            LS._run_compiled("lossless", (bad, fpar, ipar, jud, alw), (tm, dm, share),
                             [np.array([1], np.int64)], 4, 2, st, True, False)
    src = inspect.getsource(CL.accept_prob) + inspect.getsource(CL.correction)
    assert src.count('raise ValueError("rule: unknown rule code in the compiled loop")') == 2


def test_mechanism_comes_from_the_spec(monkeypatch):
    """The Python loop takes the rule's mechanism from its spec: a spec whose mechanism is
    lossless speculative sampling makes ``lenience`` decode as ``lossless`` (with the same
    uniforms), and restoring it restores ``lenience``."""
    t, d = _pair()
    kw = dict(L=3, max_new_tokens=12, seed=4)
    base = lossy_decode(t, d, [1], "lossless", backend=SyntheticBackend(t, d), **kw)
    spec = dataclasses.replace(RULE_SPECS["lenience"], mechanism=LO._mech_lossless)
    reg = dict(RULE_SPECS)
    reg["lenience"] = spec
    monkeypatch.setattr(LO, "RULE_SPECS", types.MappingProxyType(reg))
    got = lossy_decode(t, d, [1], "lenience", backend=SyntheticBackend(t, d), ell=0.2, **kw)
    np.testing.assert_array_equal(got.tokens, base.tokens)
    monkeypatch.undo()
    real = lossy_decode(t, d, [1], "lenience", backend=SyntheticBackend(t, d), ell=0.2, **kw)
    assert_same_result(real, lossy_decode(t, d, [1], "lenience", ell=0.2, **kw))


def test_rule_spec_fields():
    spec = RULE_SPECS["truncation"]
    assert isinstance(spec, RuleSpec) and spec.prepare is not None
    assert RULE_SPECS["lossless"].prepare is None
    with pytest.raises(ValueError, match="registered twice"):
        LO._rule_registry(RULE_SPECS["lossless"], RULE_SPECS["lossless"])


@pytest.mark.parametrize("n", [3, 40])
def test_lossless_rule_is_vanilla_speculative_sampling(n):
    """One single-draft block: ``lossy_decode(..., "lossless")`` is
    ``speculative_decode(..., "vsps")`` token for token, block for block and decision for
    decision, in the Python loop, in the compiled loop and in the batch (same seed, same
    random stream)."""
    t = SyntheticLM(n, 2, seed=n)
    d = t.draft(0.6, seed=n + 1)
    for seed in range(4):
        kw = dict(L=3, max_new_tokens=25, seed=seed)
        ref = speculative_decode(t, d, [1, 2], "vsps", **kw)
        runs = [lossy_decode(t, d, [1, 2], "lossless", **kw),
                lossy_decode(t, d, [1, 2], "lossless", backend=SyntheticBackend(t, d), **kw),
                lossy_decode_batch(t, d, [[1, 2]], "lossless", L=3, max_new_tokens=25,
                                   seed=[seed], store_drafts=True)[0]]
        for got in runs:
            assert got.decoder == "lossy:lossless"
            assert_same_result(ref, dataclasses.replace(got, decoder="vsps"), label=str(seed))
