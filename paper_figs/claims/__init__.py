"""Claims as data for ``INDEX.md``: the engine, split by concern (the verdict vocabulary
:mod:`~paper_figs.claims.verdicts`, the rule kinds :mod:`~paper_figs.claims.rules`, the data
access :mod:`~paper_figs.claims.data`, the evaluation :mod:`~paper_figs.claims.evaluation`,
the rendering :mod:`~paper_figs.claims.render`; :mod:`~paper_figs.claims.engine` re-exports
them), one claims
table per paper (:mod:`~paper_figs.claims.liu` for Liu, Wan, Gao & Gündüz (2026),
arXiv:2609.21858; :mod:`~paper_figs.claims.zhou` for Zhou et al. (2026), arXiv:2607.26627),
the package's own checks (:mod:`~paper_figs.claims.checks`), and the papers' transcribed
numbers (:mod:`~paper_figs.claims.paper_numbers`)."""
