"""specbound.llm.generate: the simulator's decoders on torch models with KV caches.

Two kinds of model:

- a synthetic model wrapped as a torch ``nn.Module`` (``tests._llm_synth.SynthModule``: a
  :class:`~specbound.sim.SyntheticLM` whose "key-value cache" holds the token ids, so a
  wrongly cropped or wrongly selected cache row changes the context and hence the tokens):
  exact, deterministic identity with :func:`specbound.sim.speculative_decode` for every
  decoder, batched = one-at-a-time verification, one target forward per block;
- the embedded SmolLM2-135M-Instruct (session fixture ``llm_pair``): drafter invariance,
  KV cache = no cache, exactness of the first token (goodness of fit), bad input.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from specbound import sim  # noqa: E402
from specbound.llm import generation as G  # noqa: E402
from specbound.sim.decode import MULTI_DRAFT_DECODERS  # noqa: E402
from tests._llm_synth import WINDOW_POSITIONS, synthetic_pair  # noqa: E402
from tests._stats import FIVE_SIGMA_RATE, assert_gof  # noqa: E402

V = 12


def _synthetic_pair(target, draft):
    return synthetic_pair(target, draft)


@pytest.fixture(scope="module")
def synth():
    target = sim.SyntheticLM(V, context_length=3, seed=11)
    draft = sim.SyntheticLM(V, context_length=2, seed=12, temperature=1.3)
    return target, draft, _synthetic_pair(target, draft)


PROMPT = np.array([3, 1, 4, 1, 5], dtype=np.int64)


def _same(a, b):
    assert np.array_equal(a.tokens, b.tokens)
    assert np.array_equal(a.emitted_per_block, b.emitted_per_block)
    assert np.array_equal(a.accepted_per_block, b.accepted_per_block)
    assert np.array_equal(a.nu, b.nu)
    assert np.array_equal(a.decision_accepted, b.decision_accepted)
    assert np.array_equal(a.pivots, b.pivots, equal_nan=True)
    assert (a.n_target_evals, a.n_draft_evals, a.n_target_contexts, a.n_draft_contexts) == (
        b.n_target_evals, b.n_draft_evals, b.n_target_contexts, b.n_draft_contexts)
    assert len(a.drafts) == len(b.drafts)
    for x, y in zip(a.drafts, b.drafts, strict=True):
        assert np.array_equal(x, y)


@pytest.mark.parametrize("decoder", sim.DECODERS)
@pytest.mark.parametrize("window", [2, None])
def test_simulator_and_llm_emit_the_same_tokens(synth, decoder, window):
    target, draft, pair = synth
    B = 3 if decoder in MULTI_DRAFT_DECODERS else 1
    kw = dict(L=3, B=B, key=7, window=window, max_new_tokens=40, seed=5)
    res = G.generate(pair, PROMPT, decoder, **kw)
    ref = sim.speculative_decode(target, draft, PROMPT, decoder, **kw)
    assert isinstance(res, sim.DecodeResult) and res.decoder == decoder
    _same(res, ref)
    assert res.watermark == ref.watermark
    assert res.total_seconds > 0 and res.target_seconds > 0
    assert res.n_generated == 40 and res.tokens_per_second > 0


@pytest.mark.parametrize("decoder", ["mpfr", "invariant", "specinfer"])
@pytest.mark.parametrize("B", [2, 4])
def test_batched_verification_equals_one_path_at_a_time(synth, decoder, B):
    _, _, pair = synth
    kw = dict(L=4, B=B, key=3, window=3, max_new_tokens=40, seed=1)
    _same(G.generate(pair, PROMPT, decoder, batch_verify=True, **kw),
          G.generate(pair, PROMPT, decoder, batch_verify=False, **kw))


@pytest.mark.parametrize("decoder", ["mpfr", "invariant", "specinfer"])
@pytest.mark.parametrize("B", [2, 4])
def test_tree_verification_equals_batch_of_paths(synth, decoder, B):
    """One forward over the unique tree nodes with a tree attention mask gives the tokens of
    the batch-of-paths verification (the synthetic module reads each node's context from
    the mask, so a wrong mask or position changes the tokens)."""
    _, _, pair = synth
    kw = dict(L=4, B=B, key=3, window=3, max_new_tokens=40, seed=1)
    pair.target.calls.clear()
    tree = G.generate(pair, PROMPT, decoder, tree=True, **kw)
    assert all(batch == 1 for batch, _ in pair.target.calls)
    _same(tree, G.generate(pair, PROMPT, decoder, **kw))


def test_tree_inputs_mask_and_positions():
    from specbound.llm.tree import tree_inputs

    ti = tree_inputs([7, 8], [(1, 2), (1, 3), (4,)], past=5)
    assert ti.input_ids.tolist() == [[7, 8, 1, 4, 2, 3]]
    assert ti.position_ids.tolist() == [[5, 6, 7, 7, 8, 8]]
    sees = (ti.attention_mask[0, 0] == 0).int().tolist()
    assert sees[0] == [1] * 5 + [1, 0, 0, 0, 0, 0]
    assert sees[3] == [1] * 5 + [1, 1, 0, 1, 0, 0]  # (4,) sees the pending tokens and itself
    assert sees[5] == [1] * 5 + [1, 1, 1, 0, 0, 1]  # (1, 3) sees (1,) and itself
    assert ti.row == {(): 1, (1,): 2, (4,): 3, (1, 2): 4, (1, 3): 5}
    with pytest.raises(ValueError, match="^pending:"):
        tree_inputs([], [(1,)], past=0)


@pytest.mark.parametrize("decoder,B", [("mpfr", 4), ("specinfer", 3), ("vsps", 1),
                                       ("basic_uwm", 1)])
def test_one_target_forward_per_block_and_cached_inputs(synth, decoder, B):
    """Each block makes one target forward, whose input is only the new tokens."""
    target, draft, pair = synth
    pair.target.calls.clear()
    backend = G.PairBackend(pair)
    res = sim.speculative_decode(target, draft, PROMPT, decoder, L=4, B=B, key=1,
                                 max_new_tokens=30, backend=backend)
    calls = pair.target.calls
    assert calls[0] == (1, PROMPT.size - 1)  # prefill of the prompt but its last token
    assert len(calls) == 1 + res.n_target_evals == 1 + backend.n_target_forwards - 1
    L = 4 if decoder != "basic_uwm" else 0
    for batch, n in calls[1:]:
        assert batch <= B and n <= 1 + L  # the pending token and one path of the block
    assert backend.t_cache.get_seq_length() <= res.tokens.size


def test_log_receives_every_verified_context(synth):
    target, draft, pair = synth

    class Log:
        def __init__(self):
            self.rows = []

        def record(self, prompt_id, context_tokens, p, qs):
            self.rows.append((prompt_id, context_tokens.copy(), p, qs))

    log = Log()
    res = G.generate(pair, PROMPT, "mpfr", L=3, B=2, key=1, max_new_tokens=12, log=log,
                     prompt_id=9)
    assert len(log.rows) == res.n_target_contexts
    for pid, ctx, p, qs in log.rows:
        assert pid == 9 and p.dtype == np.float64 and p.shape == (V,)
        np.testing.assert_allclose(p, target.next_distribution(ctx), rtol=1e-12, atol=1e-15)
        assert len(qs) <= 1
        for q in qs:
            np.testing.assert_allclose(q, draft.next_distribution(ctx), rtol=1e-12,
                                       atol=1e-15)
    # every context the decoder decided in was logged with the draft's distribution
    logged = {tuple(c) for _, c, _, qs in log.rows if qs}
    toks = res.tokens
    for pos in res.decision_position:
        assert tuple(toks[:res.prompt_length + pos]) in logged


def test_bad_input_names_the_argument(synth, llm_pair):
    _, _, pair = synth
    cases = [
        (dict(decoder="nope"), "decoder"),
        (dict(B=0), "B"),
        (dict(L=0), "L"),
        (dict(decoder="vsps", B=2), "B"),
        (dict(decoder="pfr", key=None), "key"),
        (dict(max_new_tokens=WINDOW_POSITIONS), "max_new_tokens"),
        (dict(log=object()), "log"),
    ]
    for kw, name in cases:
        args = dict(decoder="mpfr", key=1, max_new_tokens=4) | kw
        with pytest.raises(ValueError, match=f"^{name}:"):
            G.generate(pair, PROMPT, **args)
    for prompt in ([], np.zeros((2, 2), dtype=np.int64), [0.5], [V], ""):
        with pytest.raises(ValueError, match="^prompt:"):
            G.generate(pair, prompt, "ar", max_new_tokens=2)
    with pytest.raises(ValueError, match="^prompt:"):
        G.generate(pair, np.zeros(WINDOW_POSITIONS, dtype=np.int64), "ar")
    with pytest.raises(ValueError, match="^pair:"):
        G.generate(object(), PROMPT, "ar")
    # the real pair: unknown draft kind, empty text, too long text
    with pytest.raises(ValueError, match="^draft:"):
        G.generate(llm_pair, "hi", "vsps", draft="bogus:1")
    with pytest.raises(ValueError, match="^prompt:"):
        G.generate(llm_pair, "   ", "ar")
    with pytest.raises(ValueError, match="^prompt:"):
        G.generate(llm_pair, "word " * 9000, "ar", chat=False)


# ----------------------------------------------------------------------------- real model

REAL_PROMPT = "Name a colour."


@pytest.fixture(scope="module")
def real_ids(llm_pair):
    return llm_pair.encode_prompt(REAL_PROMPT)


def test_drafter_invariance_on_the_embedded_model(llm_pair, real_ids):
    """pfr and mpfr emit basic_uwm's tokens under one key, whatever the draft (Liu et al.
    2026, Prop. C.3), for three drafts of the real model."""
    kw = dict(key=2026, window=4, max_new_tokens=8, stop_at_eos=False)
    ref = G.generate(llm_pair, real_ids, "basic_uwm", **kw)
    for draft in ("temperature:1.5", "temperature:0.5", "early_exit:10"):
        for decoder, B in (("pfr", 1), ("mpfr", 2)):
            res = G.generate(llm_pair, real_ids, decoder, L=3, B=B, draft=draft, **kw)
            assert np.array_equal(res.tokens, ref.tokens), (draft, decoder)
            np.testing.assert_array_equal(res.pivots, ref.pivots)


def test_kv_cache_equals_no_cache_on_the_embedded_model(llm_pair, real_ids):
    """The cached, batched backend and the uncached reference give the same tokens (the
    processed distributions differ by float32 rounding only; a near tie that rounding could
    flip has probability ~1e-5 per token)."""
    for decoder, B, tree in (("mpfr", 3, False), ("specinfer", 2, False), ("vsps", 1, False),
                             ("mpfr", 3, True)):
        kw = dict(L=3, B=B, key=5, window=4, max_new_tokens=6, seed=3)
        res = G.generate(llm_pair, real_ids, decoder, stop_at_eos=False, tree=tree, **kw)
        ref = sim.speculative_decode(*G.as_protocol_models(llm_pair), real_ids, decoder, **kw)
        _same(res, ref)
    assert res.text == llm_pair.decode(res.generated)


FIRST_TOKEN_KEYS = 1500
# 11 decoder configurations, each failing wrongly with probability FIVE_SIGMA_RATE
# (about 5.7e-7): a false failure of this test has probability below 7e-6.


def test_first_token_follows_the_target_on_the_embedded_model(llm_pair, real_ids):
    """Over many keys (and seeds), the first emitted token of every lossless decoder follows
    the target's processed next-token distribution at the prompt.

    Cheap: the prompt's target and draft distributions are computed once (``CachedLM`` over
    the pair's uncached models, which equal the cached backend's, test above) and every run
    reuses them; one run per decoder goes through ``generate`` to tie the two paths.
    """
    t_lm, d_lm = G.as_protocol_models(llm_pair)
    target, draft = sim.CachedLM(t_lm), sim.CachedLM(d_lm)
    p = target.next_distribution(real_ids)
    configs = [(d, 2 if d in MULTI_DRAFT_DECODERS else 1) for d in sim.DECODERS]
    for decoder, B in configs:
        first = np.empty(FIRST_TOKEN_KEYS, dtype=np.int64)
        for i in range(FIRST_TOKEN_KEYS):
            r = sim.speculative_decode(target, draft, real_ids, decoder, L=1, B=B,
                                       key=i, seed=i, window=4, max_new_tokens=1)
            first[i] = r.generated[0]
        g = G.generate(llm_pair, real_ids, decoder, L=1, B=B, key=0, seed=0,
                       max_new_tokens=1)
        assert g.generated[0] == first[0]
        assert_gof(first, p, samples=True, alpha=FIVE_SIGMA_RATE, label=decoder)


def test_stop_token_ends_the_run_after_its_block(synth):
    target, draft, pair = synth
    kw = dict(L=3, B=2, key=4, max_new_tokens=60, seed=0)
    full = sim.speculative_decode(target, draft, PROMPT, "mpfr", **kw)
    gen = full.generated.tolist()
    stop = gen[10]
    first = gen.index(stop)
    ends = np.cumsum(full.emitted_per_block)
    block = int(np.searchsorted(ends, first, side="right"))
    backend = G.PairBackend(pair, stop_tokens=[stop])
    res = sim.speculative_decode(target, draft, PROMPT, "mpfr", backend=backend, **kw)
    assert backend.finished
    assert res.generated.tolist() == gen[:ends[block]]  # the stop token's block is kept
    # progress bar counts the generated tokens
    bar = SimpleNamespace(n=0)
    bar.update = lambda k: setattr(bar, "n", bar.n + k)
    sim.speculative_decode(target, draft, PROMPT, "mpfr", backend=G.PairBackend(
        pair, progress=bar), **kw)
    assert bar.n == 60


# ----------------------------------------------------------------------------- lossy rules

LOSSY_CASES = [
    ("lossless", {}),
    ("lenience", {"ell": 0.5}),
    ("interpolation", {"lam": 0.3}),
    ("judge", {"judge": lambda p, q: p >= 1e-3}),
    ("truncation", {"allowed": lambda p, q: p >= 0.05 * p.max()}),
    ("truncation", {"allowed": lambda p, q: p >= 0.05 * p.max(), "on_reject": "target"}),
    ("ceiling", {"ell": 0.5}),
    ("contrastive", {"beta": 0.5}),
    ("fuzzy", {"threshold": 0.9}),
]


@pytest.mark.parametrize("rule,params", LOSSY_CASES[:5])
def test_lossy_rules_same_tokens_on_cached_and_synthetic_backends(synth, rule, params):
    target, draft, pair = synth
    ref = sim.lossy_decode(target, draft, PROMPT, rule, L=3, max_new_tokens=30, seed=2,
                           backend=sim.SyntheticBackend(target, draft), **params)
    res = G.generate_lossy(pair, PROMPT, rule, L=3, max_new_tokens=30, seed=2, **params)
    _same(res, ref)
    assert res.decoder == f"lossy:{rule}" and res.n_generated == 30


LOSSY_SEEDS = 1000
# 9 rules, each failing wrongly with probability FIVE_SIGMA_RATE: below 6e-6 in all.


def test_lossy_first_token_follows_the_induced_law_on_the_embedded_model(llm_pair, real_ids):
    """The first token of every lossy rule follows ``theory.induced_distribution`` of the
    real (p, q) at the prompt (Zhou et al. 2026), over 1000 seeds (the prompt's
    distributions computed once, as in the lossless test above)."""
    from specbound import theory
    from specbound.sim.lossy import context_params

    t_lm, d_lm = G.as_protocol_models(llm_pair)
    target, draft = sim.CachedLM(t_lm), sim.CachedLM(d_lm)
    p = target.next_distribution(real_ids)
    q = draft.next_distribution(real_ids)
    for rule, params in LOSSY_CASES:
        concrete = context_params(params, p, q)
        law = theory.induced_distribution(p, q, rule, **concrete)
        first = np.array([sim.lossy_decode(target, draft, real_ids, rule, L=1, max_new_tokens=1,
                                           seed=i, backend=sim.SyntheticBackend(target, draft),
                                           **params).generated[0]
                          for i in range(LOSSY_SEEDS)])
        assert_gof(first, law, samples=True, alpha=FIVE_SIGMA_RATE, label=rule)
    g = G.generate_lossy(llm_pair, real_ids, "lenience", L=2, max_new_tokens=3, ell=0.5)
    assert g.n_generated == 3 and g.decoder == "lossy:lenience"
    with pytest.raises(ValueError, match="^rule:"):
        G.generate_lossy(llm_pair, real_ids, "nope")
    with pytest.raises(ValueError, match="^ell:"):
        G.generate_lossy(llm_pair, real_ids, "lenience", ell=2.0, max_new_tokens=2)


# ----------------------------------------------------------------------------- prefix cache

PREFIX_CASES = [("ar", 1, False), ("basic_uwm", 1, False), ("vsps", 1, False), ("pfr", 1, False),
                ("mse", 1, False), ("mpfr", 3, False), ("mpfr", 3, True), ("specinfer", 2, False),
                ("invariant", 2, True)]


@pytest.mark.parametrize("decoder,B,tree", PREFIX_CASES)
def test_prefix_cache_gives_the_same_run_without_the_prefill_forwards(synth, decoder, B, tree):
    """A second run of a prompt through a PrefixCache emits the same result field for field
    and makes every forward of the first run but its prefills (one per model used)."""
    _, _, pair = synth
    kw = dict(L=2, B=B, key=4, window=None, max_new_tokens=20, seed=7, tree=tree)
    ref = G.generate(pair, PROMPT, decoder, **kw)
    pc = G.PrefixCache()
    calls = []
    for _ in range(3):
        pair.target.calls.clear()
        pair.draft.calls.clear()
        res = G.generate(pair, PROMPT, decoder, prefix_cache=pc, **kw)
        _same(res, ref)
        calls.append((list(pair.target.calls), list(pair.draft.calls)))
    (t1, d1), (t2, d2), (t3, d3) = calls
    uses_draft = bool(d1)
    assert t1[0] == (1, PROMPT.size - 1) and t2 == t3 == t1[1:]
    if uses_draft:
        assert d1[0] == (1, PROMPT.size) and d2 == d3 == d1[1:]
    n = 1 + uses_draft
    assert (pc.misses, pc.hits, len(pc)) == (n, 2 * n, n)
    assert pc.nbytes > 0


def test_prefix_cache_keys_on_model_processing_and_tokens(synth):
    """Another prompt, another processing of the same modules or other modules do not hit;
    another decoder and seed on the same prompt and pair do."""
    target, draft, pair = synth
    pc = G.PrefixCache()
    kw = dict(L=2, key=4, window=None, max_new_tokens=12)
    other_prompt = PROMPT[::-1].copy()
    hot = pair.with_processing(temperature=0.7)
    other_draft = _synthetic_pair(target, sim.SyntheticLM(V, context_length=1, seed=5))
    runs = [(pair, PROMPT, "vsps", 0), (pair, PROMPT, "pfr", 1), (pair, other_prompt, "vsps", 0),
            (hot, PROMPT, "vsps", 0), (other_draft, PROMPT, "vsps", 0)]
    for p_, prompt, decoder, seed in runs:
        before = (pc.hits, pc.misses)
        res = G.generate(p_, prompt, decoder, prefix_cache=pc, seed=seed, **kw)
        _same(res, G.generate(p_, prompt, decoder, seed=seed, **kw))
        # only the second decoder on the first prompt finds both prefills (the other pairs
        # are other modules or another processing of the same modules)
        shared = p_ is pair and prompt is PROMPT and decoder == "pfr"
        assert (pc.hits - before[0], pc.misses - before[1]) == ((2, 0) if shared else (0, 2))


def test_prefix_cache_byte_bound_drops_the_least_recently_used(synth):
    _, _, pair = synth
    kw = dict(L=2, key=4, window=None, max_new_tokens=8)
    probe = G.PrefixCache()
    G.generate(pair, PROMPT, "vsps", prefix_cache=probe, **kw)
    per_run = probe.nbytes  # two entries: the target's and the draft's prefill
    small = G.PrefixCache(max_bytes=per_run)  # room for one prompt's two entries
    prompts = [PROMPT, PROMPT[::-1].copy(), PROMPT + 1]
    for prompt in prompts:
        res = G.generate(pair, prompt, "vsps", prefix_cache=small, **kw)
        _same(res, G.generate(pair, prompt, "vsps", **kw))
        assert small.nbytes <= per_run and len(small) == 2
    G.generate(pair, prompts[-1], "vsps", prefix_cache=small, **kw)
    assert small.hits == 2  # the last prompt is held
    G.generate(pair, prompts[0], "vsps", prefix_cache=small, **kw)
    assert small.hits == 2 and small.misses == 8  # the first was dropped
    none = G.PrefixCache(max_bytes=0)
    res = G.generate(pair, PROMPT, "vsps", prefix_cache=none, **kw)
    _same(res, G.generate(pair, PROMPT, "vsps", **kw))
    assert len(none) == 0 and none.nbytes == 0 and none.misses == 2
    none.clear()
    small.clear()
    assert len(small) == 0 and small.nbytes == 0 and small.hits == 2


def test_prefix_cache_bad_input_names_the_argument(synth):
    _, _, pair = synth
    for bad in (-1, 1.5, "big", True):
        with pytest.raises(ValueError, match="^max_bytes:"):
            G.PrefixCache(max_bytes=bad)
    with pytest.raises(ValueError, match="^prefix_cache:"):
        G.generate(pair, PROMPT, "ar", max_new_tokens=2, prefix_cache={})
    with pytest.raises(ValueError, match="^prefix_cache:"):
        G.generate_lossy(pair, PROMPT, "lossless", max_new_tokens=2, prefix_cache=object())


def test_prefix_cache_on_the_lossy_rules(synth):
    _, _, pair = synth
    pc = G.PrefixCache()
    for rule, params in LOSSY_CASES[:3]:
        ref = G.generate_lossy(pair, PROMPT, rule, L=3, max_new_tokens=16, seed=2, **params)
        res = G.generate_lossy(pair, PROMPT, rule, L=3, max_new_tokens=16, seed=2,
                               prefix_cache=pc, **params)
        _same(res, ref)
    assert (pc.misses, pc.hits) == (2, 4)


def test_prefix_cache_same_tokens_on_the_embedded_model(llm_pair, real_ids):
    """Real transformers caches: runs started from copies of a stored prefill emit the same
    tokens and predicted acceptances as runs that compute it (bit for bit), for a shared-weight
    draft and an early-exit draft."""
    pc = G.PrefixCache()
    kw = dict(L=3, key=5, window=None, max_new_tokens=8, seed=3, stop_at_eos=False)
    for draft in ("temperature:1.5", "early_exit:20"):
        pair = llm_pair if draft == "temperature:1.5" else llm_pair.with_draft(draft)
        for decoder, B, tree in (("vsps", 1, False), ("mpfr", 2, True), ("mse", 1, False)):
            ref = G.generate(pair, real_ids, decoder, B=B, tree=tree, **kw)
            res = G.generate(pair, real_ids, decoder, B=B, tree=tree, prefix_cache=pc, **kw)
            _same(res, ref)
    assert pc.misses == 3 and pc.hits == 9  # one target entry, one per draft module
