"""The model protocol of specbound.sim.models: batched evaluation, the memoising wrapper,
log-perplexity, study prompts, and the size limits of the synthetic models."""

from __future__ import annotations

import numpy as np
import pytest

from specbound.sim import (
    CachedLM,
    MarkovLM,
    PromptSet,
    SyntheticLM,
    log_perplexity,
    random_prompts,
    speculative_decode,
)
from specbound.sim.models import as_language_model, next_distributions


class _Plain:
    """A protocol model with only vocab_size and next_distribution (a list output)."""

    def __init__(self, model):
        self.model = model
        self.vocab_size = model.vocab_size

    def next_distribution(self, ctx):
        return list(self.model.next_distribution(ctx))


def _models():
    t = SyntheticLM(60, context_length=3, seed=4)
    return [t, t.draft(0.4, seed=2, temperature=0.7), SyntheticLM(60, kind="zipf", seed=1),
            SyntheticLM(60, seed=3, top_k=5), MarkovLM.random(60, seed=9), CachedLM(t),
            _Plain(t)]


def test_next_distributions_equal_next_distribution_bit_for_bit():
    rng = np.random.default_rng(0)
    ctxs = [rng.integers(0, 60, size=k) for k in (0, 1, 2, 3, 7)]
    for model in _models():
        ref = np.array([np.asarray(model.next_distribution(c), dtype=np.float64)
                        for c in ctxs])
        got = next_distributions(model, ctxs)
        assert got.shape == (5, 60) and got.dtype == np.float64
        np.testing.assert_array_equal(got, ref)
        fast = next_distributions(model, [np.ascontiguousarray(c, dtype=np.int64)
                                          for c in ctxs], validate=False)
        np.testing.assert_array_equal(fast, ref)
        if hasattr(model, "next_distributions"):
            np.testing.assert_array_equal(model.next_distributions(ctxs), ref)
        assert next_distributions(model, []).shape == (0, 60)


def test_next_distributions_validation():
    t = SyntheticLM(10)
    with pytest.raises(ValueError, match="contexts"):
        t.next_distributions([[1, 10]])
    with pytest.raises(ValueError, match="contexts"):
        MarkovLM.random(3).next_distributions([[0.5]])
    with pytest.raises(ValueError, match="contexts"):
        next_distributions(_Plain(t), [[-1]])
    with pytest.raises(ValueError, match="contexts"):
        t.next_distributions(5)
    with pytest.raises(ValueError, match="validate"):
        t.next_distributions([[1]], validate="no")
    with pytest.raises(ValueError, match="validate"):
        next_distributions(t, [[1]], validate=0)


def test_as_language_model():
    t = SyntheticLM(5)
    assert as_language_model(t) is t
    p = _Plain(t)
    assert as_language_model(p) is p
    for bad in (None, "gpt", 3, object()):
        with pytest.raises(ValueError, match="target"):
            as_language_model(bad, "target")

    class NoVocab:
        vocab_size = 0

        def next_distribution(self, ctx):
            return [1.0]

    with pytest.raises(ValueError, match="vocab_size"):
        as_language_model(NoVocab())


def test_cached_lm_identical_results():
    t = SyntheticLM(200, context_length=2, seed=2026)
    d = t.draft(0.3, seed=1)
    ct, cd = CachedLM(t), CachedLM(d)
    for dec, B in (("pfr", 1), ("mpfr", 3), ("vsps", 1)):
        a = speculative_decode(t, d, [1, 2], dec, L=3, B=B, key="k", max_new_tokens=20, seed=3)
        b = speculative_decode(ct, cd, [1, 2], dec, L=3, B=B, key="k", max_new_tokens=20,
                               seed=3)
        np.testing.assert_array_equal(a.tokens, b.tokens)
        np.testing.assert_array_equal(a.emitted_per_block, b.emitted_per_block)
        np.testing.assert_array_equal(a.nu, b.nu)
    assert ct.hits > 0 and ct.misses > 0
    np.testing.assert_array_equal(ct.next_distribution([4, 5]), t.next_distribution([4, 5]))
    assert not ct.next_distribution([4, 5]).flags.writeable
    misses = ct.misses
    ct.next_distribution(np.array([4, 5], dtype=np.int32))  # same context, other dtype: a hit
    assert ct.misses == misses
    ct.clear()
    assert not ct._cache and ct.vocab_size == 200 and ct.context_length == 2
    with pytest.raises(ValueError, match="context"):
        ct.next_distribution([200])
    with pytest.raises(ValueError, match="model"):
        CachedLM("not a model")


def test_log_perplexity():
    t = SyntheticLM(50, context_length=2, seed=1)
    r = speculative_decode(t, None, [3, 4], "ar", max_new_tokens=30, seed=2)
    toks = r.tokens
    ref = -np.mean([np.log(t.next_distribution(toks[:i])[toks[i]]) for i in range(2, 32)])
    assert log_perplexity(t, toks, 2) == ref
    assert log_perplexity(t, r) == ref
    assert log_perplexity(CachedLM(t), r, 2) == ref
    # the target's own samples: LPPL averages to the mean entropy (loose, 30 tokens of one
    # sequence: only a sanity range)
    assert 0.5 < ref < 6.0
    assert np.isnan(log_perplexity(t, [1, 2], 2))
    m = MarkovLM(np.array([[1.0, 0.0], [0.5, 0.5]]))
    assert log_perplexity(m, [0, 1], 1) == np.inf  # an impossible token
    with pytest.raises(ValueError, match="prompt_length"):
        log_perplexity(t, r, 3)
    with pytest.raises(ValueError, match="prompt_length"):
        log_perplexity(t, toks)
    with pytest.raises(ValueError, match="prompt_length"):
        log_perplexity(t, toks, 40)
    with pytest.raises(ValueError, match="tokens"):
        log_perplexity(t, [1, 99], 0)


def test_random_prompts():
    ps = random_prompts(20, 4, 100, seed=7)
    assert isinstance(ps, PromptSet) and len(ps) == 20
    assert ps.tokens.shape == (20, 4) and ps.tokens.dtype == np.int64
    assert ps.tokens.min() >= 0 and ps.tokens.max() < 100
    again = random_prompts(20, 4, 100, seed=7)
    np.testing.assert_array_equal(ps.tokens, again.tokens)
    assert [s.generate_state(1)[0] for s in ps.seeds] == [
        s.generate_state(1)[0] for s in again.seeds]
    assert len({s.generate_state(1)[0] for s in ps.seeds}) == 20
    assert not np.array_equal(random_prompts(20, 4, 100, seed=8).tokens, ps.tokens)
    ss = np.random.SeedSequence(7)
    np.testing.assert_array_equal(random_prompts(20, 4, 100, seed=ss).tokens, ps.tokens)
    child = np.random.SeedSequence(7).spawn(1)[0]  # another spawn key: other prompts
    assert not np.array_equal(random_prompts(20, 4, 100, seed=child).tokens, ps.tokens)
    assert random_prompts(0, 4, 100).tokens.shape == (0, 4)
    for kwargs, match in (({"n": -1}, "n"), ({"length": 1.5}, "length"),
                          ({"vocab_size": 0}, "vocab_size"), ({"n": 10**7, "length": 10**6}, "n"),
                          ({"n": 10**5 + 1, "length": 0}, "n"),
                          ({"seed": np.random.default_rng(0)}, "seed"), ({"seed": -3}, "seed")):
        args = {"n": 2, "length": 3, "vocab_size": 10, **kwargs}
        seed = args.pop("seed", 0)
        with pytest.raises(ValueError, match=match):
            random_prompts(args["n"], args["length"], args["vocab_size"], seed=seed)


def test_absurd_model_sizes_are_refused_up_front():
    with pytest.raises(ValueError, match="context_length"):
        SyntheticLM(10, context_length=10**6)
    with pytest.raises(ValueError, match="context_length"):
        SyntheticLM(10).draft(0.1, context_length=257)
    assert SyntheticLM(10, context_length=256).context_length == 256
    m = MarkovLM.random(3, seed=1)
    with pytest.raises(ValueError, match=r"length: .*3\^40.*entries"):
        m.sequence_law([0], 40)
    with pytest.raises(ValueError, match="length"):
        MarkovLM(np.ones((1, 1))).sequence_law([0], 33)
    law = m.sequence_law([0], 12)  # 531,441 entries: allowed
    assert law.size == 3**12 and law.sum() == pytest.approx(1.0)


def test_seed_is_keyword_only():
    new = SyntheticLM(30, 2, seed=5, temperature=0.8)
    for call in (lambda: SyntheticLM(30, 2, 5, 0.8), lambda: new.draft(0.3, 4),
                 lambda: new.mean_entropy(10, 3), lambda: MarkovLM.random(3, 7, 0.5)):
        with pytest.raises(TypeError, match="positional"):
            call()
