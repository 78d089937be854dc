"""Block verification (decoder ``blockver``; Sun et al. 2024, arXiv:2403.10444, Alg. 2) and
lossless hierarchical speculative decoding (decoder ``hsd``; Zhou et al., ICLR 2026,
arXiv:2601.05724), the two verifiers of one draft sequence as a whole, in the simulator:
for each decoder the mean block length against its exact value, the emitted law of the first
token and of the first two tokens against the target, its drafts (those of ``vsps``), empty
blocks and the two block loops; for ``blockver``, token-wise speculative sampling at
``L = 1`` and its kernels (HSD's kernels: ``tests/test_sim_hsd.py``).

Statistical checks state their false-failure probabilities and use fixed seeds; the others
are deterministic.  (The registry-wide tests pick the decoder up too: the compiled loop
against the Python loop in ``tests/test_sim_compiled.py``, the law of the first three
tokens in ``tests/test_sim_decode.py``, ``llm.generate`` / ``generate_batch`` /
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
from specbound.sim import _compiled_blockver as BV
from specbound.theory import blockver_block_tokens, expected_block_tokens, hsd_block_tokens
from tests._results import assert_same_result

DECODER = "blockver"
#: the decoders the shared checks run on: (name, seed of the first blocks, exact value)
WHOLE_BLOCK = {"blockver": (2403, blockver_block_tokens), "hsd": (2601, hsd_block_tokens)}
DECODERS = pytest.mark.parametrize("decoder", list(WHOLE_BLOCK))

# a first-order pair where block verification (hence lossless HSD, whose law is the same)
# gains a fifth of a token at L = 3: the target never emits token 0, the draft's row 1 is
# near-degenerate (0.002 on token 2)
TARGET = MarkovLM(np.array([[0.0, 0.084, 0.916, 0.0], [0.0, 0.169, 0.499, 0.332],
                            [0.0, 0.108, 0.275, 0.617], [0.0, 0.002, 0.316, 0.682]]))
DRAFT = MarkovLM(np.array([[0.333, 0.562, 0.064, 0.041], [0.351, 0.01, 0.002, 0.637],
                           [0.008, 0.438, 0.072, 0.482], [0.006, 0.453, 0.224, 0.317]]))
L = 3
N_BLOCKS = 40_000


def _fns(target, draft):
    return target.next_distribution, draft.next_distribution


@pytest.fixture(scope="module", params=list(WHOLE_BLOCK))
def first_blocks(request):
    """``(decoder, result)``: 40,000 independent first blocks of the decoder from the prompt
    ``[1]`` (one compiled batch, a seed per prompt): the full block (``L`` drafts and a
    bonus) is within ``max_new_tokens``."""
    seed = WHOLE_BLOCK[request.param][0]
    return request.param, speculative_decode_batch(
        TARGET, DRAFT, np.ones((N_BLOCKS, 1), np.int64), request.param, L=L,
        max_new_tokens=L + 1, seed=seed)


def test_mean_block_length_equals_the_exact_value(first_blocks):
    """z-test of the mean tokens of the first block against the decoder's exact value
    (``blockver_block_tokens``, ``hsd_block_tokens``): |z| <= 5 (false-failure probability
    5.7e-7 per decoder).  Power: the exact value of token-wise speculative sampling is more
    than 20 standard errors away, so a decoder verifying token by token fails it."""
    decoder, first_blocks = first_blocks
    k = np.array([e[0] for e in first_blocks.emitted_per_block], dtype=float)
    se = k.std(ddof=1) / np.sqrt(k.size)
    exact = WHOLE_BLOCK[decoder][1](*_fns(TARGET, DRAFT), [1], L=L, context_length=1)
    sd = expected_block_tokens(*_fns(TARGET, DRAFT), [1], "sd", L=L, context_length=1)
    assert abs(k.mean() - exact) <= 5 * se, (k.mean(), exact, se)
    assert exact - sd > 20 * se, (exact, sd, se)
    acc = np.array([a[0] for a in first_blocks.accepted_per_block])
    np.testing.assert_array_equal(acc, k - 1)  # a full block always emits one more token


@DECODERS
def test_model_form_of_the_exact_value(decoder):
    """``sim.expected_block_tokens(..., decoder)`` is the model-object form of the theory's
    exact value (``theory.blockver_block_tokens``, ``theory.hsd_block_tokens``; a Markov pair:
    window 1), equal to block verification's, above vsps's on this pair and equal to it at
    ``L = 1``; ``B > 1`` is refused naming ``B``."""
    from specbound.sim import expected_block_tokens as sim_block_tokens
    exact = WHOLE_BLOCK[decoder][1](*_fns(TARGET, DRAFT), [1], L=L, context_length=1)
    got = sim_block_tokens(TARGET, DRAFT, [1], decoder, L=L)
    assert got == exact
    assert got == pytest.approx(blockver_block_tokens(*_fns(TARGET, DRAFT), [1], L=L,
                                                      context_length=1), abs=1e-12)
    assert got > sim_block_tokens(TARGET, DRAFT, [1], "vsps", L=L) + 0.1
    assert sim_block_tokens(TARGET, DRAFT, [1], decoder, L=1) == pytest.approx(
        sim_block_tokens(TARGET, DRAFT, [1], "vsps", L=1), abs=1e-12)
    with pytest.raises(ValueError, match="^B"):
        sim_block_tokens(TARGET, DRAFT, [1], decoder, L=L, B=2)


def test_emitted_law_of_the_first_token_and_the_first_two_is_the_target(first_blocks):
    """Chi-square GOF, each at level 1e-4 (false-failure probability <= 2e-4 for the two, per
    decoder): the first token against the target's row 1, and the first two tokens (16
    cells, 4 of them impossible under the target) against its sequence law.  Both tokens lie
    in the first block, where the kept prefix and the weighted residual (block
    verification's) or the step-back levels and the capped residual (HSD's) act.  The
    draft's own law is rejected by the same test (it is not a vacuous check)."""
    _, first_blocks = first_blocks
    gen = np.array([t[1:3] for t in first_blocks.tokens])
    first = np.bincount(gen[:, 0], minlength=4)
    res = chisquare_gof(first, TARGET.next_distribution(np.array([1])), min_expected=5.0)
    assert res.pvalue > 1e-4, res
    counts = np.bincount(gen[:, 0] * 4 + gen[:, 1], minlength=16)
    res = chisquare_gof(counts, TARGET.sequence_law([1], 2).ravel(), min_expected=5.0)
    assert res.pvalue > 1e-4, res
    assert chisquare_gof(counts, DRAFT.sequence_law([1], 2).ravel()).pvalue < 1e-6


def test_one_draft_is_token_wise_speculative_sampling():
    """At ``L = 1`` block verification is ``vsps``: the same drafts (same uniforms), the
    acceptance ``eta <= min(p/q, 1)`` and the residual ``(p - q)_+``, token for token."""
    t = SyntheticLM(60, 2, seed=4)
    d = t.draft(0.6, seed=5)
    for seed in range(3):
        a = speculative_decode(t, d, [3, 4], DECODER, L=1, max_new_tokens=80, seed=seed)
        b = speculative_decode(t, d, [3, 4], "vsps", L=1, max_new_tokens=80, seed=seed)
        np.testing.assert_array_equal(a.tokens, b.tokens)
        np.testing.assert_array_equal(a.decision_accepted, b.decision_accepted)
        np.testing.assert_array_equal(a.emitted_per_block, b.emitted_per_block)


@DECODERS
def test_drafts_are_those_of_vsps_and_identical_models_keep_everything(decoder):
    t = SyntheticLM(40, 2, seed=8)
    d = t.draft(0.5, seed=9)
    a = speculative_decode(t, d, [1], decoder, L=4, max_new_tokens=5, seed=6, max_blocks=1)
    b = speculative_decode(t, d, [1], "vsps", L=4, max_new_tokens=5, seed=6, max_blocks=1)
    np.testing.assert_array_equal(a.drafts[0], b.drafts[0])
    same = speculative_decode(t, t, [1], decoder, L=4, max_new_tokens=25, seed=1)
    np.testing.assert_array_equal(same.emitted_per_block, [5] * 5)
    assert same.decision_accepted.all()


@DECODERS
@pytest.mark.parametrize(("n_tokens", "max_blocks", "window_prompt"),
                         [(17, None, [1]), (9, 2, []), (30, None, [2, 3, 0])])
def test_compiled_equals_python_loop_with_zeros_and_ragged_blocks(decoder, n_tokens,
                                                                   max_blocks, window_prompt):
    """The Markov pair with zero and near-zero probabilities, lookaheads 1-5 (the last block
    cut short), ``max_blocks``, an empty prompt: ``speculative_decode`` (compiled) equals the
    Python loop (``backend=SyntheticBackend``), generator states included."""
    for Lk in (1, 2, 5):
        g_ref, g_new = np.random.default_rng(Lk), np.random.default_rng(Lk)
        kw = dict(L=Lk, max_new_tokens=n_tokens, max_blocks=max_blocks)
        ref = speculative_decode(TARGET, DRAFT, window_prompt, decoder, seed=g_ref,
                                 backend=SyntheticBackend(TARGET, DRAFT), **kw)
        got = speculative_decode(TARGET, DRAFT, window_prompt, decoder, seed=g_new, **kw)
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


@DECODERS
def test_empty_blocks_are_one_token_from_the_target(decoder):
    """``block_length`` 0 (a prompt-lookup draft that finds nothing): the block drafts nothing
    and emits its bonus from the target's law; the run still completes."""
    be = _NoDraftBackend(TARGET, DRAFT)
    r = speculative_decode(TARGET, DRAFT, [1], decoder, L=3, max_new_tokens=20, seed=4,
                           backend=be)
    assert r.generated.size == 20 and np.all(r.emitted_per_block[::2] == 1)
    assert r.drafts[0].shape == (1, 0)


def test_kernels_agree_with_their_definitions():
    """``blockver_tau`` against the definition of Alg. 2 on a hand-made block; the
    correction at ``tau = 0`` is speculative sampling's residual draw."""
    P = np.array([[0.5, 0.5], [0.5, 0.5]])
    Q = np.array([[0.75, 0.25], [0.75, 0.25]])
    xs = np.array([0, 1], np.int64)
    ps = np.empty(3)
    # p_1 = 2/3, p_2 = min(2/3 * 2, 1) = 1: eta_2 <= h_2 = 1 always keeps both drafts
    us = np.array([0.0, 0.99, 0.0, 0.0, 0.999, 0.0, 0.0, 0.0, 0.0])
    assert BV.blockver_tau(P, Q, xs, 2, us, ps) == 2
    np.testing.assert_allclose(ps, [1.0, 2 / 3, 1.0])
    # x = (0, 0): p_2 = 4/9 < eta_2; h_1 = r_1 / (r_1 + 1/3), r_1 = (1/3 - 1/4)_+ = 1/12
    xs = np.array([0, 0], np.int64)
    h1 = (1 / 12) / (1 / 12 + 1 / 3)
    for eta1, tau in ((h1 - 1e-9, 1), (h1 + 1e-9, 0)):
        us = np.array([0.0, eta1, 0.0, 0.0, 0.5, 0.0, 0.0, 0.0, 0.0])
        assert BV.blockver_tau(P, Q, xs, 2, us, ps) == tau
    for u in (0.1, 0.5, 0.9):
        assert BV.blockver_correction(1.0, P[0], Q[0], u) == 1  # (p - q)_+ = e_1
        # p_1 = 2/3: (2/3 p - q)_+ = (0, 1/12) at depth 1
        assert BV.blockver_correction(2 / 3, P[1], Q[1], u) == 1
