"""The documentation in ``docs/`` stays true to the code.

- every public name (``__all__`` of ``specbound.theory``, ``.sim``, ``.llm``, ``.sweep``,
  ``.results`` and ``.testing``) is listed on its page;
- every test the documentation names (``tests/FILE.py::TEST``) exists;
- every relative link and ``#anchor`` resolves, and every ``docs/mathematics.md §N`` that the
  code cites is a section of that page;
- every Markdown table row has as many cells as its header (a ``|`` inside a formula must be
  written ``\\|``, or the row breaks on a code host).

Each test reports every problem at once, so that names added by several people at the same
time can be filled in together.  Cost: reading the docs and the sources, well under a second
(``specbound.llm`` is imported without torch).
"""

from __future__ import annotations

import importlib
import re
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

#: module -> the page that lists its public names
PAGES = {
    "specbound.theory": "theory.md",
    "specbound.sim": "sim.md",
    "specbound.llm": "llm.md",
    "specbound.sweep": "sweep.md",
    "specbound.results": "sweep.md",
    "specbound.testing": "testing.md",
}


def _pages() -> list[Path]:
    return sorted(DOCS.glob("*.md"))


def _doc_files() -> list[Path]:
    return [*_pages(), ROOT / "README.md"]


def _listed(name: str, text: str) -> bool:
    """``name`` appears as an entry: in backticks, alone or followed by a call/subscript."""
    return re.search(r"`" + re.escape(name) + r"[`(\[]", text) is not None


def test_docs_pages_exist():
    for page in ("index.md", "mathematics.md", *sorted(set(PAGES.values()))):
        assert (DOCS / page).is_file(), f"docs/{page} is missing"


def test_every_public_name_is_documented():
    missing = []
    for module_name, page in PAGES.items():
        module = importlib.import_module(module_name)
        text = (DOCS / page).read_text()
        missing += [f"{module_name}.{name} (docs/{page})" for name in module.__all__
                    if not _listed(name, text)]
    assert not missing, (
        f"{len(missing)} public names are not listed on their docs page (add a row with a "
        "one-line description, the paper reference and the test that checks it):\n  "
        + "\n  ".join(missing)
    )


_TEST_REF = re.compile(r"tests/([\w/]+\.py)::(\w+)")


def test_every_named_test_exists():
    defined: dict[str, set[str]] = {}
    missing = []
    n_refs = 0
    for doc in _doc_files():
        for rel, name in _TEST_REF.findall(doc.read_text()):
            n_refs += 1
            path = ROOT / "tests" / rel
            if rel not in defined:
                src = path.read_text() if path.is_file() else ""
                defined[rel] = set(re.findall(r"^\s*(?:async\s+)?(?:def|class)\s+(\w+)", src,
                                              flags=re.M))
            if name not in defined[rel]:
                missing.append(f"{doc.relative_to(ROOT)}: tests/{rel}::{name}")
    assert n_refs > 100, "the docs should name the tests that check each claim"
    assert not missing, "named tests that do not exist:\n  " + "\n  ".join(sorted(set(missing)))


def _slug(heading: str) -> str:
    """The anchor a code host (GitHub) gives a heading: lower case, punctuation and symbols
    dropped (letters, marks, digits, ``_``, ``-`` and spaces kept), spaces to hyphens."""
    text = re.sub(r"`", "", heading.strip().lower())
    kept = "".join(c for c in text
                   if c in " -_" or unicodedata.category(c)[0] in "LMN")
    return kept.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    out: set[str] = set()
    in_code = False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and line.startswith("#"):
            out.add(_slug(line.lstrip("#")))
    return out


_LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_links_and_anchors_resolve():
    broken = []
    for doc in _doc_files():
        for target in _LINK.findall(doc.read_text()):
            if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
                continue
            file_part, _, anchor = target.partition("#")
            dest = (doc.parent / file_part).resolve() if file_part else doc
            if not dest.exists():
                broken.append(f"{doc.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                broken.append(f"{doc.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken, "broken links:\n  " + "\n  ".join(broken)


def test_mathematics_sections_cited_by_the_code_exist():
    headings = (DOCS / "mathematics.md").read_text()
    sections = set(re.findall(r"^#+ §(\d+(?:\.\d+)*)\s", headings, flags=re.M))
    assert {"1", "2", "2.1", "2.2", "2.3", "2.4", "3", "4", "5"} <= sections
    missing = []
    for top in ("specbound", "paper_figs", "benchmarks", "tests", "notebooks"):
        for f in sorted((ROOT / top).rglob("*")):
            if not f.is_file() or f.suffix not in (".py", ".ipynb", ".md"):
                continue
            text = f.read_text(errors="replace")
            for sec in re.findall(r"mathematics\.md\s*§\s*(\d+(?:\.\d+)*)", text):
                if sec not in sections:
                    missing.append(f"{f.relative_to(ROOT)}: §{sec}")
    assert not missing, "citations of missing sections:\n  " + "\n  ".join(missing)


def _cells(row: str) -> int:
    body = row.strip()
    body = body[1:] if body.startswith("|") else body
    body = body[:-1] if body.endswith("|") and not body.endswith("\\|") else body
    return len(re.split(r"(?<!\\)\|", body))


@pytest.mark.parametrize("doc", _doc_files(), ids=lambda p: p.name)
def test_table_rows_have_the_header_width(doc):
    bad = []
    lines = doc.read_text().splitlines()
    in_code = False
    width = None
    for i, line in enumerate(lines, 1):
        if line.startswith("```"):
            in_code = not in_code
            continue
        if in_code or not line.startswith("|"):
            width = None
            continue
        if width is None:
            width = _cells(line)
        elif _cells(line) != width:
            bad.append(f"{doc.name}:{i}: {_cells(line)} cells, header has {width}")
    assert not bad, "table rows of the wrong width:\n  " + "\n  ".join(bad)
