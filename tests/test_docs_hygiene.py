"""Package hygiene: optional dependencies (tqdm, matplotlib) stay optional, extras are not
redundant, every package-data pattern ships a file (``py.typed`` included), and the shipped
text cites papers, not internal labels.

Cost: one Python subprocess (imports only, about 3 s) and a scan of the repository's text
files (well under a second).
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# A meta-path finder that makes ``import tqdm`` fail as if tqdm were not installed.
_HIDE_TQDM = textwrap.dedent(
    """
    import importlib.abc
    import sys

    class _NoTqdm(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "tqdm" or name.startswith("tqdm."):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, _NoTqdm())
    """
)


def test_tqdm_and_matplotlib_are_optional_at_import_time():
    code = _HIDE_TQDM + textwrap.dedent(
        """
        try:
            import tqdm  # noqa: F401
        except ModuleNotFoundError:
            pass
        else:
            raise SystemExit("the hook did not hide tqdm")
        import specbound
        import specbound.llm
        import specbound.results
        import specbound.sim
        import specbound.sweep
        import specbound.theory
        assert "tqdm" not in sys.modules, "a module imported tqdm at import time"
        # matplotlib is the optional extra `plot`, for the figure scripts only
        mpl = sorted(m for m in sys.modules if m.split(".")[0] == "matplotlib")
        assert not mpl, f"a module imported matplotlib at import time: {mpl[:3]}"
        print("imported without tqdm")
        """
    )
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "imported without tqdm" in res.stdout


def test_no_extra_repeats_a_core_dependency():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]

    def name(req: str) -> str:
        return re.split(r"[\s<>=!~;\[]", req, maxsplit=1)[0].lower().replace("_", "-")

    core = {name(r) for r in meta["dependencies"]}
    repeated = {extra: sorted(core & {name(r) for r in reqs})
                for extra, reqs in meta["optional-dependencies"].items()}
    repeated = {k: v for k, v in repeated.items() if v}
    assert not repeated, f"extras that only repeat core dependencies: {repeated}"
    # matplotlib is for the figure scripts and notebooks only
    assert "matplotlib" not in core
    assert [name(r) for r in meta["optional-dependencies"]["plot"]] == ["matplotlib"]



def test_every_package_data_pattern_ships_a_file():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = meta["tool"]["setuptools"]["package-data"]["specbound"]
    assert "py.typed" in patterns  # PEP 561 marker: the package's annotations are public
    assert (ROOT / "specbound" / "py.typed").is_file()
    empty = [pat for pat in patterns if not any((ROOT / "specbound").glob(pat))]
    assert not empty, f"package-data patterns that match no file: {empty}"


# Internal labels of the design notes that must never reach shipped text: papers are cited
# by authors, year and arXiv id, and the design notes are not part of the repository.
# (Built from pieces so that this file does not match itself.)
_LABELS = re.compile(
    "|".join([
        r"seed " + r"00[0-9]",
        r"\b" + "MATH" + r"\.md",
        r"\b" + "DESIGN" + r"\.md",
        r"\b" + "STYLE" + r"\.md",
        r"\b[Ii]ssue " + r"#?[0-9]+",
        r"\.\./" + r"shared/",
        r"\.\./" + r"seeds/",
    ])
)
_SCANNED = ("specbound", "paper_figs", "benchmarks", "tests", "notebooks", "docs")
_SUFFIXES = {".py", ".md", ".ipynb", ".toml", ".txt", ".cfg", ".mplstyle"}


def test_no_internal_labels_in_shipped_text():
    files = [ROOT / "README.md", ROOT / "pyproject.toml", ROOT / "Makefile"]
    for top in _SCANNED:
        files += [f for f in (ROOT / top).rglob("*")
                  if f.is_file() and f.suffix in _SUFFIXES and "/out/" not in f.as_posix()]
    hits = []
    for f in files:
        if not f.exists():
            continue
        for lineno, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
            m = _LABELS.search(line)
            if m:
                hits.append(f"{f.relative_to(ROOT)}:{lineno}: {m.group(0)!r}")
    assert not hits, "internal labels instead of citations:\n" + "\n".join(hits)
