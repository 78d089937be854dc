"""The CSV writer shared by the benchmark scripts."""

from __future__ import annotations

import csv
from pathlib import Path


def write_rows(path, rows, columns, *, digits: int = 6) -> Path:
    """Write ``rows`` (dicts keyed by ``columns``) to ``path``, floats to ``digits``
    significant digits; returns the path."""
    path = Path(path)
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns)
        writer.writeheader()
        for r in rows:
            writer.writerow({k: (f"{v:.{digits}g}" if isinstance(v, float) else v)
                             for k, v in r.items()})
    return path
