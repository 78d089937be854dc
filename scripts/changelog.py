"""Assemble ``CHANGELOG.md`` from the fragments in ``CHANGELOG.d/*.md``.

Each change is written as a fragment (one Markdown file per area of work) so that parallel
branches never edit the same lines; this script joins them, in file-name order, under the
heading of the package version (``specbound/__init__.py``, read without importing the
package).  A fragment that starts with its own ``###`` heading keeps it; the others are
gathered under "Other changes".

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


def package_version(init: Path = INIT) -> str:
    """The ``__version__ = "X.Y.Z"`` string of ``specbound/__init__.py``."""
    m = re.search(r'^__version__\s*=\s*"([^"]+)"', init.read_text(), flags=re.M)
    if not m:
        raise ValueError(f"{init}: no __version__ assignment")
    return m.group(1)


def fragments(folder: Path = FRAGMENTS) -> list[tuple[str, str]]:
    """``(name, text)`` of every fragment, in file-name order, stripped."""
    return [(p.stem, p.read_text().strip()) for p in sorted(folder.glob("*.md"))
            if p.read_text().strip()]


def render(version: str, frags: list[tuple[str, str]]) -> str:
    titled = [t for _, t in frags if t.startswith("### ")]
    plain = [t for _, t in frags if not t.startswith("### ")]
    parts = [
        "# Changelog",
        "",
        "Changes that matter to users of specbound, newest first. This file is assembled "
        "from `CHANGELOG.d/*.md` by `python scripts/changelog.py`; edit the fragments, not "
        "this file.",
        "",
        f"## {version} (unreleased)",
        "",
    ]
    for t in titled:
        parts += [t, ""]
    if plain:
        parts += ["### Other changes", ""]
        for t in plain:
            parts += [t, ""]
    return "\n".join(parts)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="only check that CHANGELOG.md is "
                    "up to date")
    args = ap.parse_args(argv)
    text = render(package_version(), fragments())
    if args.check:
        ok = CHANGELOG.is_file() and CHANGELOG.read_text() == text
        print("CHANGELOG.md is up to date" if ok else
              "CHANGELOG.md is out of date: run python scripts/changelog.py")
        return 0 if ok else 1
    CHANGELOG.write_text(text)
    print(f"wrote {CHANGELOG} ({len(fragments())} fragments)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
