"""Assemble ``CHANGELOG.md`` from the fragments in ``CHANGELOG.d/``.

Each change is written as a fragment named by its topic and its type,
``CHANGELOG.d/<topic>.<type>.md`` with ``<type>`` one of ``added``, ``changed``, ``fixed``,
``removed`` (e.g. ``sweep.added.md``), so that parallel branches never edit the same lines.
A fragment is a Markdown bullet list without headings.  This script renders them under the
heading of the package version (``specbound/__init__.py``, read without importing the
package), grouped by type under ``### Added``, ``### Changed``, ``### Fixed`` and
``### Removed``, in topic order within a group.  A fragment whose name does not follow the
pattern, or that carries its own ``#`` heading, is a ``ValueError``.

Run ``python scripts/changelog.py`` after adding or editing a fragment (``--check``: exit 1
if ``CHANGELOG.md`` is not up to date, write nothing).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FRAGMENTS = ROOT / "CHANGELOG.d"
CHANGELOG = ROOT / "CHANGELOG.md"
INIT = ROOT / "specbound" / "__init__.py"

#: fragment types, in the order they are rendered, with their headings
TYPES = {"added": "Added", "changed": "Changed", "fixed": "Fixed", "removed": "Removed"}
#: a fragment's file name: a lower-case topic (words joined by ``-``), its type, ``.md``
NAME_PATTERN = re.compile(r"(?P<topic>[a-z0-9]+(?:-[a-z0-9]+)*)\.(?P<type>"
                          + "|".join(TYPES) + r")\.md")


def package_version(init: Path = INIT) -> str:
    """The ``__version__ = "X.Y.Z"`` string of ``specbound/__init__.py``."""
    m = re.search(r'^__version__\s*=\s*"([^"]+)"', init.read_text(), flags=re.M)
    if not m:
        raise ValueError(f"{init}: no __version__ assignment")
    return m.group(1)


def fragments(folder: Path = FRAGMENTS) -> list[tuple[str, str, str]]:
    """``(topic, type, text)`` of every non-empty fragment, in file-name order, stripped.

    Raises ``ValueError`` naming the file for a name that is not ``<topic>.<type>.md`` or a
    fragment with its own heading (the headings are the types').
    """
    out = []
    for p in sorted(folder.glob("*.md")):
        m = NAME_PATTERN.fullmatch(p.name)
        if m is None:
            raise ValueError(f"{p.name}: a fragment is named <topic>.<type>.md with <type> one "
                             f"of {', '.join(TYPES)} (topic: lower-case words joined by '-')")
        text = p.read_text().strip()
        if re.search(r"^#", text, flags=re.M):
            raise ValueError(f"{p.name}: a fragment has no headings (they come from its type)")
        if text:
            out.append((m["topic"], m["type"], text))
    return out


def render(version: str, frags: list[tuple[str, str, str]]) -> str:
    """The changelog text: the fragments grouped by type, topics in name order in a group."""
    parts = [
        "# Changelog",
        "",
        "Changes that matter to users of specbound, newest first. This file is assembled "
        "from `CHANGELOG.d/<topic>.<type>.md` by `python scripts/changelog.py`; edit the "
        "fragments, not this file.",
        "",
        f"## {version} (unreleased)",
        "",
    ]
    for typ, heading in TYPES.items():
        group = sorted((topic, text) for topic, t, text in frags if t == typ)
        if group:
            parts += [f"### {heading}", ""]
            parts += [text for _, text in group]
            parts += [""]
    return "\n".join(parts)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="only check that CHANGELOG.md is "
                    "up to date")
    args = ap.parse_args(argv)
    frags = fragments()
    text = render(package_version(), frags)
    if args.check:
        ok = CHANGELOG.is_file() and CHANGELOG.read_text() == text
        print("CHANGELOG.md is up to date" if ok else
              "CHANGELOG.md is out of date: run python scripts/changelog.py")
        return 0 if ok else 1
    CHANGELOG.write_text(text)
    print(f"wrote {CHANGELOG} ({len(frags)} fragments)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
