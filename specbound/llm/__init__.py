"""The same samplers driven by torch language models (optional extra ``llm``).

This layer reuses :mod:`specbound.sim`'s keyed randomness so that a token sampled on a GPU
and one sampled in a Numba kernel under the same key and context are the same token.  Its
implementation is scheduled by a later issue; nothing here is importable yet beyond this
docstring.
"""
