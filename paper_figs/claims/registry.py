"""Every claim the INDEX reports, in order: the claims tables of Liu, Wan, Gao & Gündüz
(2026), arXiv:2609.21858 and Zhou et al. (2026), arXiv:2607.26627, then the package's own
checks."""

from __future__ import annotations

from paper_figs.claims import checks, liu, zhou

CLAIMS = [*liu.CLAIMS, *zhou.CLAIMS, *checks.CLAIMS]
BY_ID = {c.id: c for c in CLAIMS}
if len(BY_ID) != len(CLAIMS):
    raise RuntimeError("duplicate claim ids")
