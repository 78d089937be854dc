"""Lossless hierarchical speculative decoding (decoder ``hsd``; Zhou et al., ICLR 2026,
arXiv:2601.05724) in the simulator: its kernels against their definitions.

The checks it shares with block verification (the mean block length against the exact
value, the emitted law of the first token and of the first two tokens against the target,
the drafts of ``vsps``, empty blocks, the two block loops) run on both decoders in
``tests/test_sim_blockver.py``.  (The registry-wide tests pick the decoder up too: the
compiled loop against the Python loop in ``tests/test_sim_compiled.py``, the law of the
first three tokens there and in ``tests/test_sim_decode.py``, ``llm.generate`` /
``generate_batch`` / ``custom_generate`` in ``tests/test_llm_*.py``.)
"""

from __future__ import annotations

import numpy as np
import pytest

from specbound.sim import _compiled_hsd as HS


def test_kernels_agree_with_their_definitions():
    """``hsd_tau`` on hand-made blocks: the caps ``c_k = R_k / max(1, R_1..R_k)``, the full
    block against ``c_ell`` (not the uncapped ``min(1, R_ell)``), the step-back probability
    ``1 - A / max(A, D)``.  The correction, a draw from ``(c P - Q)_+``, is block
    verification's kernel ``blockver_correction`` (with ``c`` for its ``p_tau``), checked on
    these blocks (``c = 1`` and ``c = 2/3``) in ``tests/test_sim_blockver.py``."""
    P = np.array([[0.5, 0.5], [0.5, 0.5]])
    Q = np.array([[0.75, 0.25], [0.75, 0.25]])
    cs = np.empty(3)
    # x = (1, 0): R_1 = 2, R_2 = 4/3; c = (1, 1, 2/3).  The released test keeps the block
    # whenever R_2 >= 1; the capped test keeps it with probability 2/3 only.
    xs = np.array([1, 0], np.int64)
    for coin, tau in ((0.66, 2), (0.67, 1)):
        us = np.array([0.0, 0.0, 0.0, 0.0, coin, 0.0, 0.0, 0.0, 0.0])
        assert HS.hsd_tau(P, Q, xs, 2, us, cs) == tau  # level 1 (c = 1) is never left
    np.testing.assert_allclose(cs, [1.0, 1.0, 2 / 3])
    # x = (0, 0): c_1 = 2/3, c_2 = 4/9; level 1: A = (1/3 - 1/4)_+ = 1/12,
    # D = (3/4 - 1/3) = 5/12, step back with probability 1 - A / D = 4/5
    xs = np.array([0, 0], np.int64)
    assert HS.hsd_step_back(2 / 3, P[1], Q[1]) == pytest.approx(0.8, abs=1e-12)
    for coin, tau in ((0.8 - 1e-9, 0), (0.8 + 1e-9, 1)):
        us = np.array([0.0, coin, 0.0, 0.0, 0.5, 0.0, 0.0, 0.0, 0.0])
        assert HS.hsd_tau(P, Q, xs, 2, us, cs) == tau
    np.testing.assert_allclose(cs, [1.0, 2 / 3, 4 / 9])
    assert HS.hsd_step_back(1.0, P[0], P[0]) == 0.0  # a balanced branch is never left
