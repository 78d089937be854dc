"""The conformance step of ``scripts/gpu_check.sh`` (``gpu_check.py --conformance``) rehearsed
on the CPU: the same checks on CPU tensors, so that the script works when a CUDA device is
next lent.  Slow tier (about 10,000 calls of transformers' function); each check at
false-failure rate 1e-3 (five checks: 5e-3 together).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "gpu_check.py"


def _module():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_conformance_step_is_wired():
    text = (SCRIPT.parent / "gpu_check.sh").read_text()
    assert "--conformance" in text and "CONFORMANCE_N" in text
    assert callable(_module().check_conformance)


@pytest.mark.slow
def test_conformance_step_on_cpu_tensors():
    pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    rows = _module().check_conformance("cpu", 2000)
    assert len(rows) == 7
    assert all(r["ok"] for r in rows), rows
