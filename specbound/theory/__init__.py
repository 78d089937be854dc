"""Numbers from formulas: couplings, acceptance bounds, exact acceptance, lossy rules,
watermark scores.  Deterministic (no randomness); imports neither ``sim`` nor ``llm``."""

__all__: list[str] = []
