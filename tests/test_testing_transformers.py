"""transformers' ``_speculative_sampling`` checked by specbound.testing (a real client).

Fast tier: small runs (1-6 ms per call of transformers' function, by machine load), each
check at false-failure rate 1e-3 (the default); the module's checks on correct behaviour
together fail by chance with probability at most 5e-3.  Slow tier: the issue's scale (V = 8,
20,000 calls per check; ensemble weights 0.25, 0.5 and 0.9; an L = 3 block).
"""

from __future__ import annotations

import numpy as np
import pytest

from specbound import theory
from specbound.testing import (
    assert_acceptance,
    assert_block,
    assert_induced,
    assert_lossless,
    check_lossless,
    draw,
)
from specbound.testing.gallery import realistic_pair

pytest.importorskip("transformers")
torch = pytest.importorskip("torch")
from specbound.testing.adapters import transformers_block, transformers_step  # noqa: E402

P4 = np.array([0.5, 0.3, 0.15, 0.05])
Q4 = np.array([0.1, 0.2, 0.3, 0.4])  # TV 0.5


@pytest.fixture(autouse=True)
def _one_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


def test_transformers_lossless_in_three_lines():
    d = draw(transformers_step(), P4, Q4, n=1000, seed=0)
    assert_lossless(d, P4, Q4)
    r = assert_acceptance(d, P4, Q4)  # against 1 - TV = 0.5, two-sided
    assert abs(r.statistic - 0.5) < 0.05


def test_transformers_ensemble_weight_is_the_interpolation_rule():
    """DIVERSE's static ensemble (w = 0.5) emits 0.5 p + 0.5 q: TV 0.25 from p (600 calls
    catch TV 0.13 with probability 0.99)."""
    d = draw(transformers_step(assistant_ensemble_weight=0.5), P4, Q4, n=600, seed=1)
    assert_induced(d, P4, Q4, "interpolation", lam=0.5)
    assert_acceptance(d, P4, Q4, rule="interpolation", lam=0.5)
    assert not check_lossless(d, P4, Q4).passed


def test_transformers_block_against_theory():
    P = np.stack([P4, Q4[::-1], np.full(4, 0.25)])
    Q = np.stack([Q4, P4])
    r = assert_block(transformers_block(), P, Q, n=500, seed=2)
    assert "expected_block_tokens" in str(r)


@pytest.mark.slow
@pytest.mark.parametrize("w", [0.25, 0.5, 0.9])
def test_transformers_ensemble_weights_at_scale(w):
    """20,000 calls at V = 8 per weight: the law w p + (1 - w) q (interpolation, lam = w)
    and its acceptance 1 - w TV; three weights x two checks at 1e-3 each."""
    p, q = realistic_pair(8, seed=4, noise=1.5)
    d = draw(transformers_step(assistant_ensemble_weight=w), p, q, n=20_000, seed=int(w * 100))
    assert_induced(d, p, q, "interpolation", lam=w)
    r = assert_acceptance(d, p, q, rule="interpolation", lam=w)
    assert abs(r.statistic - (1 - w * theory.tv_distance(p, q))) < 0.02


@pytest.mark.slow
def test_transformers_lossless_and_block_at_scale():
    p, q = realistic_pair(8, seed=4, noise=1.5)
    d = draw(transformers_step(), p, q, n=20_000, seed=7)
    r = assert_lossless(d, p, q)
    assert r.min_detectable < 0.03
    assert_acceptance(d, p, q)
    pairs = [realistic_pair(8, seed=10 + i, noise=1.0) for i in range(4)]
    P = np.stack([a for a, _ in pairs])
    Q = np.stack([b for _, b in pairs[:3]])
    assert_block(transformers_block(), P, Q, n=20_000, seed=8)


@pytest.mark.slow
def test_readme_three_lines_run_as_written():
    """The README's "three lines" block (94,829 calls of transformers' function)."""
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    section = readme.split("## Test your own sampler in three lines", 1)[1]
    block = re.search(r"```py\n(.*?)```", section, flags=re.S).group(1)
    namespace: dict = {}
    exec(compile(block, "README.md", "exec"), namespace)  # noqa: S102
    assert namespace["assert_lossless"].__module__ == "specbound.testing._checks"
