"""The README's tour must run as written (keeps the README true)."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_tour_runs():
    text = README.read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks, "README must contain a python tour"
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, str(README), "exec"), namespace)  # noqa: S102
    theory = namespace["theory"]
    p, q = namespace["p"], namespace["q"]
    # the numbers the comments state
    assert abs(theory.tv_distance(p, q) - 0.3) < 1e-12
    assert abs(theory.exact_acceptance(p, q, "sd") - 0.7) < 1e-12
    assert abs(theory.exact_acceptance(p, q, "mpfr", B=4) - theory.pml_bound(p, q, 4)) < 1e-12
    assert theory.exact_acceptance(p, q, "gls", B=4) >= theory.lml_bound(p, q, 4)
    est = namespace["est"]
    exact = theory.exact_acceptance(p, q, "mpfr", B=4)
    assert abs(est.mean - exact) < 5 * est.stderr


def test_readme_names_the_two_commands():
    text = README.read_text()
    assert "make reproduce" in text and "make test" in text
