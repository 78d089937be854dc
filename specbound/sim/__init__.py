"""Numbers from sampling: keyed randomness, token-level samplers, estimators, synthetic
language models and speculative decoders (Numba kernels behind validated wrappers)."""

__all__: list[str] = []
