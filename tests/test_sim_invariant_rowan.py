"""The ``invariant`` decoder against the list coupling (GLS) of Rowan et al. (2025).

Rowan et al.'s list coupling of ``B`` draws: draft ``b`` is ``X_b = argmin_v E_{b,v}/q_v``
(its own exponential clocks, i.e. Gumbel-max), the target draw is the token of
``argmin_{(b, v)} E_{b,v}/p_v`` over all ``B`` clock columns, and a draft is accepted iff the
target draw is one of the ``X_b``; in multi-draft decoding only the drafts that agree with the
emitted prefix stay in the list.  Three checks:

1. line by line: every decision of ``speculative_decode(..., "invariant")`` equals the
   token-level sampler ``sample_step(p, q, "gls", |A|, uniforms=...)`` run on the decoder's
   own clocks restricted to the active drafts ``A`` (deterministic, no false failures);
2. the token-level sampler's acceptance equals ``theory.exact_acceptance(p, q, "gls", B)``
   on random pairs, including low-entropy pairs of a calibrated model (Monte Carlo,
   ``n = 400,000`` per pair: the 5-sigma band is below 1% of the acceptance);
3. the decoder's first-decision acceptance frequency equals the same number (Monte Carlo over
   seeds, 5 standard errors).

Each comparison of 2 and 3 fails by chance with probability ``FIVE_SIGMA_RATE`` = 5.7e-7
(normal approximation of a binomial with ``n a (1 - a) > 1000``); at most 12 comparisons.
"""

from __future__ import annotations

import numpy as np
import pytest

from specbound import sim, theory
from specbound.sim.prf import prf_uniform_numpy
from tests._stats import FIVE_SIGMA_RATE, assert_within_se

assert 12 * FIVE_SIGMA_RATE < 1e-5


def _markov_pair(n, seed):
    t = sim.MarkovLM.random(n, seed=seed, concentration=0.5)
    d = sim.MarkovLM.random(n, seed=seed + 1000, concentration=0.5)
    # a draft that resembles the target (mixture), as a real drafter does
    mix = 0.6 * t.transition_matrix + 0.4 * d.transition_matrix
    return t, sim.MarkovLM(mix / mix.sum(axis=1, keepdims=True))


@pytest.mark.parametrize("B", [1, 2, 3, 5])
def test_decoder_decisions_are_the_gls_step_on_the_active_columns(B):
    n, L = 7, 4
    target, draft = _markov_pair(n, seed=B)
    checked = 0
    for seed in range(60):
        res = sim.speculative_decode(target, draft, [seed % n], "invariant", L=L, B=B,
                                     max_new_tokens=L + 1, seed=seed, max_blocks=1)
        # the decoder's randomness: the run label first, then the block's L + 1 labels
        rng = np.random.default_rng(seed)
        rng.integers(0, 2**64, dtype=np.uint64)
        labels = rng.integers(0, 2**64, size=L + 1, dtype=np.uint64)
        paths = res.drafts[0]
        assert paths.shape == (B, L)
        emitted = res.tokens[res.prompt_length:]
        active = np.arange(B)
        ctx = list(res.tokens[:res.prompt_length])
        for s in range(emitted.size):
            table = prf_uniform_numpy(labels[s], np.arange(n)[:, None], np.arange(B)[None, :])
            p, q = target.next_distribution(ctx), draft.next_distribution(ctx)
            if s == L:  # the bonus: a target draw on the active columns, no drafts
                step = sim.sample_step(p, p, "gls", B=active.size,
                                       uniforms=table[:, active])
                assert emitted[s] == step.token
                break
            step = sim.sample_step(p, q, "gls", B=active.size, uniforms=table[:, active])
            # the active drafts proposed exactly the gls drafts of their columns
            assert np.array_equal(paths[active, s], step.drafts)
            assert emitted[s] == step.token
            assert res.decision_accepted[s] == step.accepted
            assert res.nu[s] == active.size
            checked += 1
            if not step.accepted:
                assert emitted.size == s + 1
                break
            active = active[paths[active, s] == step.token]
            ctx.append(int(step.token))
    assert checked > 60


def _pairs():
    rng = np.random.default_rng(2025)
    out = []
    for n, conc in ((5, 1.0), (12, 0.3)):
        p = rng.dirichlet(np.full(n, conc))
        q = 0.5 * p + 0.5 * rng.dirichlet(np.full(n, conc))
        out.append((p, q))
    lm = sim.calibrated_lm(0.47, 200, n_contexts=128, seed=4)
    d = lm.draft(0.5, seed=9)
    for c in ([3, 8], [100, 7]):
        out.append((lm.next_distribution(c), d.next_distribution(c)))
    return out


@pytest.mark.parametrize("B", [2, 4])
def test_step_sampler_acceptance_equals_exact_gls(B):
    n = 400_000
    for i, (p, q) in enumerate(_pairs()):
        exact = theory.exact_acceptance(p, q, "gls", B)
        est = sim.estimate_acceptance(p, q, "gls", B, n=n, seed=100 * B + i)
        se = np.sqrt(exact * (1 - exact) / n)
        assert 5 * se < 0.01 * exact  # strict enough to catch a 1% bias
        assert_within_se(est.mean, exact, se, label=f"gls pair {i} B={B}")


@pytest.mark.parametrize(("n", "B"), [(6, 2), (9, 4)])
def test_decoder_first_decision_acceptance_equals_exact_gls(n, B):
    target, draft = _markov_pair(n, seed=10 + B)
    c = 2
    exact = theory.exact_acceptance(target.next_distribution([c]),
                                    draft.next_distribution([c]), "gls", B)
    trials = 12_000
    acc = 0
    for seed in range(trials):
        res = sim.speculative_decode(target, draft, [c], "invariant", L=1, B=B,
                                     max_new_tokens=1, seed=seed)
        acc += bool(res.decision_accepted[0])
    se = np.sqrt(exact * (1 - exact) / trials)
    assert_within_se(acc / trials, exact, se, label=f"invariant decoder B={B}")
