"""The package reports its version, and CHANGELOG.md holds every CHANGELOG.d fragment."""

from __future__ import annotations

import importlib.util
import re
import tomllib
from pathlib import Path

import specbound

ROOT = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location("changelog", ROOT / "scripts" / "changelog.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_version_is_defined_once_and_reported():
    assert re.fullmatch(r"\d+\.\d+\.\d+", specbound.__version__)
    assert specbound.__version__ == "0.2.0"
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in meta["project"] and "version" in meta["project"]["dynamic"]
    assert meta["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "specbound.__version__"}
    assert _script().package_version() == specbound.__version__


def test_changelog_holds_every_fragment():
    text = (ROOT / "CHANGELOG.md").read_text()
    frags = sorted((ROOT / "CHANGELOG.d").glob("*.md"))
    assert frags
    missing = [p.name for p in frags if p.read_text().strip() not in text]
    assert not missing, f"run python scripts/changelog.py: fragments missing {missing}"
    assert f"## {specbound.__version__}" in text


def test_changelog_script_renders_fragments(tmp_path):
    mod = _script()
    (tmp_path / "b.md").write_text("- plain change\n")
    (tmp_path / "a.md").write_text("### Area\n\n- titled change\n")
    text = mod.render("9.9.9", mod.fragments(tmp_path))
    assert text.index("## 9.9.9") < text.index("### Area") < text.index("### Other changes")
    assert "- titled change" in text and "- plain change" in text
