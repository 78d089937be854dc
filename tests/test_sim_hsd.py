"""Lossless hierarchical speculative decoding (decoder ``hsd``; Zhou et al., ICLR 2026,
arXiv:2601.05724) in the simulator: the mean block length against the exact value, the
emitted law of the first token and of the first two tokens against the target, and the two
block loops.

Statistical checks state their false-failure probabilities and use fixed seeds; the others
are deterministic.  (The registry-wide tests pick the decoder up too: the compiled loop
against the Python loop in ``tests/test_sim_compiled.py``, the law of the first three
tokens there and in ``tests/test_sim_decode.py``, ``llm.generate`` / ``generate_batch`` /
``custom_generate`` in ``tests/test_llm_*.py``.)
"""

from __future__ import annotations

import numpy as np
import pytest

from specbound.sim import (
    MarkovLM,
    SyntheticBackend,
    SyntheticLM,
    chisquare_gof,
    speculative_decode,
    speculative_decode_batch,
)
from specbound.sim import _compiled_hsd as HS
from specbound.theory import blockver_block_tokens, expected_block_tokens, hsd_block_tokens
from tests._results import assert_same_result

DECODER = "hsd"

# the first-order pair of the block-verification tests: the hierarchical verification gains
# a fifth of a token over token-wise speculative sampling at L = 3; the target never emits
# token 0, the draft's row 1 is near-degenerate (0.002 on token 2)
TARGET = MarkovLM(np.array([[0.0, 0.084, 0.916, 0.0], [0.0, 0.169, 0.499, 0.332],
                            [0.0, 0.108, 0.275, 0.617], [0.0, 0.002, 0.316, 0.682]]))
DRAFT = MarkovLM(np.array([[0.333, 0.562, 0.064, 0.041], [0.351, 0.01, 0.002, 0.637],
                           [0.008, 0.438, 0.072, 0.482], [0.006, 0.453, 0.224, 0.317]]))
L = 3
N_BLOCKS = 40_000


def _fns(target, draft):
    return target.next_distribution, draft.next_distribution


@pytest.fixture(scope="module")
def first_blocks():
    """40,000 independent first blocks from the prompt ``[1]`` (one compiled batch, a seed
    per prompt): the full block (``L`` drafts and a bonus) is within ``max_new_tokens``."""
    return speculative_decode_batch(TARGET, DRAFT, np.ones((N_BLOCKS, 1), np.int64), DECODER,
                                    L=L, max_new_tokens=L + 1, seed=2601)


def test_mean_block_length_equals_the_exact_value(first_blocks):
    """z-test of the mean tokens of the first block against ``hsd_block_tokens``: |z| <= 5
    (false-failure probability 5.7e-7).  Power: token-wise speculative sampling's exact value
    is more than 20 standard errors away."""
    k = np.array([e[0] for e in first_blocks.emitted_per_block], dtype=float)
    se = k.std(ddof=1) / np.sqrt(k.size)
    exact = hsd_block_tokens(*_fns(TARGET, DRAFT), [1], L=L, context_length=1)
    sd = expected_block_tokens(*_fns(TARGET, DRAFT), [1], "sd", L=L, context_length=1)
    assert abs(k.mean() - exact) <= 5 * se, (k.mean(), exact, se)
    assert exact - sd > 20 * se, (exact, sd, se)
    acc = np.array([a[0] for a in first_blocks.accepted_per_block])
    np.testing.assert_array_equal(acc, k - 1)  # a full block always emits one more token


def test_model_form_of_the_exact_value():
    """``sim.expected_block_tokens(..., "hsd")`` is the model-object form of
    ``theory.hsd_block_tokens`` (a Markov pair: window 1), equal to block verification's,
    above vsps's on this pair and equal to it at ``L = 1``; ``B > 1`` is refused naming
    ``B``."""
    from specbound.sim import expected_block_tokens as sim_block_tokens
    exact = hsd_block_tokens(*_fns(TARGET, DRAFT), [1], L=L, context_length=1)
    got = sim_block_tokens(TARGET, DRAFT, [1], DECODER, L=L)
    assert got == exact
    assert got == pytest.approx(blockver_block_tokens(*_fns(TARGET, DRAFT), [1], L=L,
                                                      context_length=1), abs=1e-12)
    assert got > sim_block_tokens(TARGET, DRAFT, [1], "vsps", L=L) + 0.1
    assert sim_block_tokens(TARGET, DRAFT, [1], DECODER, L=1) == pytest.approx(
        sim_block_tokens(TARGET, DRAFT, [1], "vsps", L=1), abs=1e-12)
    with pytest.raises(ValueError, match="^B"):
        sim_block_tokens(TARGET, DRAFT, [1], DECODER, L=L, B=2)


def test_emitted_law_of_the_first_token_and_the_first_two_is_the_target(first_blocks):
    """Chi-square GOF, each at level 1e-4 (false-failure probability <= 2e-4 for the two):
    the first token against the target's row 1, and the first two tokens (16 cells, 4 of
    them impossible under the target) against its sequence law.  Both tokens lie in the
    first block, where the step-back levels and the capped residual act.  The draft's own
    law is rejected by the same test (it is not a vacuous check)."""
    gen = np.array([t[1:3] for t in first_blocks.tokens])
    first = np.bincount(gen[:, 0], minlength=4)
    res = chisquare_gof(first, TARGET.next_distribution(np.array([1])), min_expected=5.0)
    assert res.pvalue > 1e-4, res
    counts = np.bincount(gen[:, 0] * 4 + gen[:, 1], minlength=16)
    res = chisquare_gof(counts, TARGET.sequence_law([1], 2).ravel(), min_expected=5.0)
    assert res.pvalue > 1e-4, res
    assert chisquare_gof(counts, DRAFT.sequence_law([1], 2).ravel()).pvalue < 1e-6


def test_drafts_are_those_of_vsps_and_identical_models_keep_everything():
    t = SyntheticLM(40, 2, seed=8)
    d = t.draft(0.5, seed=9)
    a = speculative_decode(t, d, [1], DECODER, L=4, max_new_tokens=5, seed=6, max_blocks=1)
    b = speculative_decode(t, d, [1], "vsps", L=4, max_new_tokens=5, seed=6, max_blocks=1)
    np.testing.assert_array_equal(a.drafts[0], b.drafts[0])
    same = speculative_decode(t, t, [1], DECODER, L=4, max_new_tokens=25, seed=1)
    np.testing.assert_array_equal(same.emitted_per_block, [5] * 5)
    assert same.decision_accepted.all()


@pytest.mark.parametrize(("n_tokens", "max_blocks", "window_prompt"),
                         [(17, None, [1]), (9, 2, []), (30, None, [2, 3, 0])])
def test_compiled_equals_python_loop_with_zeros_and_ragged_blocks(n_tokens, max_blocks,
                                                                   window_prompt):
    """The Markov pair with zero and near-zero probabilities, lookaheads 1-5 (the last block
    cut short), ``max_blocks``, an empty prompt: ``speculative_decode`` (compiled) equals the
    Python loop (``backend=SyntheticBackend``), generator states included."""
    for Lk in (1, 2, 5):
        g_ref, g_new = np.random.default_rng(Lk), np.random.default_rng(Lk)
        kw = dict(L=Lk, max_new_tokens=n_tokens, max_blocks=max_blocks)
        ref = speculative_decode(TARGET, DRAFT, window_prompt, DECODER, seed=g_ref,
                                 backend=SyntheticBackend(TARGET, DRAFT), **kw)
        got = speculative_decode(TARGET, DRAFT, window_prompt, DECODER, seed=g_new, **kw)
        assert_same_result(ref, got, label=f"L={Lk}")
        assert g_ref.bit_generator.state == g_new.bit_generator.state


class _NoDraftBackend(SyntheticBackend):
    """A backend whose draft proposes nothing every other block (``block_length`` 0)."""

    def __init__(self, target, draft):
        super().__init__(target, draft)
        self.calls = 0

    def block_length(self, ell, B):
        self.calls += 1
        return 0 if self.calls % 2 else ell


def test_empty_blocks_are_one_token_from_the_target():
    """``block_length`` 0 (a prompt-lookup draft that finds nothing): the block drafts nothing
    and emits its bonus from the target's law; the run still completes."""
    be = _NoDraftBackend(TARGET, DRAFT)
    r = speculative_decode(TARGET, DRAFT, [1], DECODER, L=3, max_new_tokens=20, seed=4,
                           backend=be)
    assert r.generated.size == 20 and np.all(r.emitted_per_block[::2] == 1)
    assert r.drafts[0].shape == (1, 0)


def test_kernels_agree_with_their_definitions():
    """``hsd_tau`` on hand-made blocks: the caps ``c_k = R_k / max(1, R_1..R_k)``, the full
    block against ``c_ell`` (not the uncapped ``min(1, R_ell)``), the step-back probability
    ``1 - A / max(A, D)``; the correction draws from ``(c P - Q)_+``."""
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
    for u in (0.1, 0.5, 0.9):
        assert HS.hsd_correction(1.0, P[0], Q[0], u) == 1  # (p - q)_+ = e_1
        assert HS.hsd_correction(2 / 3, P[1], Q[1], u) == 1  # (2/3 p - q)_+ = (0, 1/12)
