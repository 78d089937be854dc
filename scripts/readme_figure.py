"""Make the README's figure, ``docs/bounds_vs_drafts.png``, from a run of the figure script.

Runs ``paper_figs.bounds_vs_drafts`` (full mode, closed forms only, a few seconds) into a
temporary folder and copies its PNG to ``docs/``; the numbers behind it are that script's
CSV.  Run from the repository root: ``python scripts/readme_figure.py``.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET = ROOT / "docs" / "bounds_vs_drafts.png"


def main() -> int:
    sys.path.insert(0, str(ROOT))
    from paper_figs import bounds_vs_drafts

    with tempfile.TemporaryDirectory() as tmp:
        paths = bounds_vs_drafts.main(Path(tmp), quick=False)
        png = next(Path(p) for p in paths if str(p).endswith(".png"))
        shutil.copyfile(png, TARGET)
    print(f"wrote {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
