"""Claims as data for ``INDEX.md``: the engine (:mod:`paper_figs.claims.engine`), one claims
table per paper (:mod:`~paper_figs.claims.liu` for Liu, Wan, Gao & Gündüz (2026),
arXiv:2609.21858; :mod:`~paper_figs.claims.zhou` for Zhou et al. (2026), arXiv:2607.26627),
the package's own checks (:mod:`~paper_figs.claims.checks`), and the papers' transcribed
numbers (:mod:`~paper_figs.claims.paper_numbers`)."""
