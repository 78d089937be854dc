"""One field-by-field comparison of two :class:`specbound.sim.DecodeResult` s.

Used wherever a compiled path must reproduce a reference path exactly (the compiled
decoders against the Python block loop, the compiled lossy rules against theirs): every
dataclass field is compared -- arrays by dtype, shape and values, the draft paths one by
one, the rest by equality -- so a field added to the result is checked without editing a
list of names.
"""

from __future__ import annotations

from dataclasses import fields

import numpy as np

from specbound.sim.decode import DecodeResult


def assert_same_result(ref, got, *, drafts: bool = True, label: str = "") -> None:
    """``got`` equals ``ref`` in every field of :class:`DecodeResult` (``drafts=False``:
    the draft paths are not compared)."""
    for f in fields(DecodeResult):
        a, b = getattr(ref, f.name), getattr(got, f.name)
        if f.name == "drafts":
            if drafts:
                assert len(a) == len(b), (label, "drafts")
                for x, y in zip(a, b, strict=True):
                    assert x.dtype == y.dtype and x.shape == y.shape, (label, "drafts")
                    np.testing.assert_array_equal(x, y, err_msg=f"{label} drafts")
        elif isinstance(a, np.ndarray):
            assert isinstance(b, np.ndarray), (label, f.name)
            assert a.dtype == b.dtype and a.shape == b.shape, (label, f.name)
            np.testing.assert_array_equal(a, b, err_msg=f"{label} {f.name}")
        else:
            assert a == b, (label, f.name, a, b)
