"""``scripts/run_notebook.py`` (``make notebook``) saves a notebook without the progress bars
its cells wrote on stderr, and the committed notebooks carry none.  No kernel is started:
well under a second."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location("run_notebook",
                                                  ROOT / "scripts" / "run_notebook.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _stream(name, text):
    return nbformat.v4.new_output("stream", name=name, text=text)


def test_progress_bars_are_stripped_and_everything_else_kept():
    rn = _script()
    cell = nbformat.v4.new_code_cell("x = 1")
    cell.outputs = [
        _stream("stderr", "\rLoading weights:   0%|          | 0/272 [00:00<?, ?it/s]"),
        _stream("stderr", "\rLoading weights: 100%|##########| 272/272 [00:00<00:00]"),
        _stream("stderr", "\n"),
        _stream("stdout", "\r50% done\n"),  # stdout is the cell's own output: kept
        _stream("stderr", "a message the cell meant to show\n"),
        nbformat.v4.new_output("execute_result", data={"text/plain": "1"}, execution_count=1),
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# t"), cell])
    assert rn.strip_progress(nb) == 3
    kept = [(o.get("name"), o.get("text")) for o in nb.cells[1].outputs]
    assert kept == [("stdout", "\r50% done\n"), ("stderr", "a message the cell meant to show\n"),
                    (None, None)]
    assert rn.strip_progress(nb) == 0


def test_committed_notebooks_carry_no_progress_bars():
    rn = _script()
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        bars = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
                if rn.is_progress(o)]
        assert not bars, f"{path.name}: {len(bars)} progress-bar outputs (make notebook)"
