"""The package reports its version, and CHANGELOG.md holds every CHANGELOG.d fragment."""

from __future__ import annotations

import importlib.util
import re
import tomllib
from pathlib import Path

import pytest

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


def test_fragment_names_are_topic_and_type():
    pattern = _script().NAME_PATTERN
    bad = [p.name for p in sorted((ROOT / "CHANGELOG.d").iterdir())
           if not pattern.fullmatch(p.name)]
    assert not bad, f"CHANGELOG.d/<topic>.<added|changed|fixed|removed>.md: {bad}"


def test_changelog_script_groups_fragments_by_type(tmp_path):
    mod = _script()
    (tmp_path / "b-topic.added.md").write_text("- second added\n")
    (tmp_path / "a-topic.added.md").write_text("- first added\n")
    (tmp_path / "a-topic.removed.md").write_text("- a removal\n")
    (tmp_path / "z-topic.fixed.md").write_text("- a fix\n")
    (tmp_path / "empty.changed.md").write_text("\n")
    frags = mod.fragments(tmp_path)
    assert [(t, k) for t, k, _ in frags] == [
        ("a-topic", "added"), ("a-topic", "removed"), ("b-topic", "added"), ("z-topic", "fixed")]
    text = mod.render("9.9.9", frags)
    order = ["## 9.9.9", "### Added", "- first added", "- second added", "### Fixed", "- a fix",
             "### Removed", "- a removal"]
    pos = [text.index(s) for s in order]
    assert pos == sorted(pos), text
    # a type without fragments gets no heading (the empty fragment is skipped)
    assert "### Changed" not in text
    assert text.count("### ") == 3


def test_changelog_script_refuses_bad_fragments(tmp_path):
    mod = _script()
    for name in ["w5-lead.md", "topic.deprecated.md", "Topic.added.md", "a_b.fixed.md"]:
        folder = tmp_path / name.replace(".", "_")
        folder.mkdir()
        (folder / name).write_text("- change\n")
        with pytest.raises(ValueError, match=re.escape(name)):
            mod.fragments(folder)
    (tmp_path / "h").mkdir()
    (tmp_path / "h" / "topic.added.md").write_text("### Own heading\n\n- change\n")
    with pytest.raises(ValueError, match="heading"):
        mod.fragments(tmp_path / "h")

