"""specbound.llm.generate_batch: many prompts, one batched forward per step.

Two kinds of model:

- a synthetic model as a torch ``nn.Module`` whose transformers ``DynamicCache`` holds the
  token ids as its "keys" and which reads its context through the 2-D attention mask and
  checks the position ids: a wrongly padded, stacked, split or cropped cache row, a wrong
  mask or wrong positions change the context (or fail an assertion), hence the tokens.  Rows
  do not interact numerically, so every prompt of a batch must emit exactly the tokens of
  :func:`specbound.llm.generate` of that prompt with its seed;
- the embedded SmolLM2-135M-Instruct (session fixture ``llm_pair``): the processed
  log-probabilities of batched and single runs agree within 1e-4 (float32 rounding of the
  padded batch), and the first token of batched runs follows the target (slow).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from transformers import DynamicCache  # noqa: E402

from specbound import sim  # noqa: E402
from specbound.llm import generation as G  # noqa: E402
from specbound.llm._loading import LoadInfo  # noqa: E402
from specbound.llm.batch import GenerationBatch, generate_batch  # noqa: E402
from specbound.llm.drafts import DraftSpec  # noqa: E402
from specbound.llm.models import LogitsProcessing, ModelPair  # noqa: E402
from specbound.sim.decode import KEYED_DECODERS, MULTI_DRAFT_DECODERS  # noqa: E402
from tests._results import assert_same_result as _same  # noqa: E402
from tests._stats import FIVE_SIGMA_RATE, assert_gof  # noqa: E402

V = 12
WINDOW_POSITIONS = 256
EOS = 11


class _SynthModule(torch.nn.Module):
    """A protocol model as a causal LM with a DynamicCache of token ids (module docstring)."""

    def __init__(self, lm):
        super().__init__()
        self.lm = lm
        self.config = SimpleNamespace(vocab_size=lm.vocab_size,
                                      max_position_embeddings=WINDOW_POSITIONS)
        self.calls = []

    def get_output_embeddings(self):
        return None

    def forward(self, input_ids, attention_mask=None, position_ids=None, past_key_values=None,
                use_cache=False, logits_to_keep=0):
        cache = past_key_values
        if cache is None and use_cache:
            cache = DynamicCache()
        new = input_ids.to(torch.float64)[:, None, :, None]
        if cache is not None:
            full = cache.update(new, new, 0)[0][:, 0, :, 0].long()
        else:
            full = input_ids
        R, T = full.shape
        n = input_ids.shape[1]
        k = logits_to_keep or n
        self.calls.append(tuple(input_ids.shape))
        ctxs = []
        if attention_mask is not None and attention_mask.ndim == 4:
            # a token tree (or a batch holding one): the context is what the query attends to
            assert attention_mask.shape == (R, 1, n, T)
            for b in range(R):
                for j in range(T - k, T):
                    sees = attention_mask[b, 0, j - (T - n)] == 0
                    ctxs.append(full[b][sees].numpy().astype(np.int64))
            return self._out(ctxs, R, k, cache, use_cache)
        mask = (torch.ones((R, T), dtype=torch.bool) if attention_mask is None
                else attention_mask.bool())
        assert mask.shape == (R, T)
        if position_ids is not None:
            want = (mask.long().cumsum(-1) - 1)[:, T - n:]
            real = mask[:, T - n:]
            assert torch.equal(position_ids[real], want[real]), "wrong position ids"
        for b in range(R):
            for j in range(T - k, T):
                ctxs.append(full[b, :j + 1][mask[b, :j + 1]].numpy().astype(np.int64))
        return self._out(ctxs, R, k, cache, use_cache)

    def _out(self, ctxs, R, k, cache, use_cache):
        P = sim.models.next_distributions(self.lm, ctxs).reshape(R, k, -1)
        with np.errstate(divide="ignore"):
            logits = torch.from_numpy(np.log(P))
        return SimpleNamespace(logits=logits, past_key_values=cache if use_cache else None)


class _Tok:
    """Just enough tokenizer for the end-of-sequence token and ``text``."""

    eos_token_id = EOS
    chat_template = None

    def decode(self, ids, skip_special_tokens=True):
        return " ".join(str(i) for i in ids)

    def __len__(self):
        return V

    def __call__(self, text, **kwargs):  # a tokenizer is callable; these tests pass token ids
        raise AssertionError("the batch tests encode no text")


def _synthetic_pair(target, draft, tokenizer=None):
    info = LoadInfo("synthetic", "synthetic", "folder", "", False, 0.0)
    return ModelPair(_SynthModule(target), _SynthModule(draft), tokenizer, LogitsProcessing(),
                     DraftSpec("model", "synthetic"), device=torch.device("cpu"),
                     load_info={"target": info, "draft": None})


@pytest.fixture(scope="module")
def synth():
    target = sim.SyntheticLM(V, context_length=3, seed=11)
    draft = sim.SyntheticLM(V, context_length=2, seed=12, temperature=1.3)
    return target, draft, _synthetic_pair(target, draft)


# ragged lengths, including a one-token prompt (no target prefill)
PROMPTS = [np.array(p, dtype=np.int64) for p in
           ([3, 1, 4, 1, 5], [2, 7], [9], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], [6, 6, 6])]


CASES = [(d, False) for d in sim.DECODERS] + [(d, True) for d in sorted(MULTI_DRAFT_DECODERS)]


@pytest.mark.parametrize("decoder,tree", CASES)
def test_batched_equals_one_prompt_at_a_time(synth, decoder, tree):
    """Every row emits generate's tokens for its prompt and seed, bit for bit (token-tree
    verification of the multi-draft decoders too)."""
    _, _, pair = synth
    B = 3 if decoder in MULTI_DRAFT_DECODERS else 1
    seeds = [5, 6, 7, 8, 9]
    kw = dict(L=3, B=B, key=7, window=2, stop_at_eos=False, tree=tree)
    pair.target.calls.clear()
    batch = generate_batch(pair, PROMPTS, decoder, max_new_tokens=30, seed=seeds, **kw)
    assert isinstance(batch, GenerationBatch) and len(batch) == len(PROMPTS)
    batched_calls = len(pair.target.calls)
    for i, (prompt, res) in enumerate(zip(PROMPTS, batch.results(), strict=True)):
        ref = G.generate(pair, prompt, decoder, max_new_tokens=30, seed=seeds[i], **kw)
        _same(res, ref)
        assert res.n_generated == 30 and res.total_seconds > 0
    # the prefills run alone (prompts longer than one token); then one target forward per
    # step for all rows: about as many as the longest single run (plus a few steps where the
    # rows' blocks drifted apart), far fewer than the rows' forwards together
    assert batched_calls == batch.n_target_forwards
    prefills = sum(p.size > 1 for p in PROMPTS)
    decode = batch.n_target_forwards - prefills
    longest = max(r.n_target_evals for r in batch)
    assert decode <= longest + len(PROMPTS)
    assert decode < sum(r.n_target_evals for r in batch) / 2
    assert batch.max_rows >= len(PROMPTS)
    assert batch.n_generated == 30 * len(PROMPTS) and batch.tokens_per_second > 0


@pytest.mark.parametrize("decoder,B", [("mpfr", 4), ("specinfer", 2), ("vsps", 1),
                                       ("ar", 1), ("pfr", 1)])
def test_rows_finish_at_different_blocks_and_at_eos(decoder, B):
    """Rows leave the batch at different blocks (EOS, different max_blocks reached) and the
    remaining rows go on with the same tokens as alone; the default seed spawns per row."""
    target = sim.SyntheticLM(V, context_length=3, seed=21)
    draft = sim.SyntheticLM(V, context_length=2, seed=22, temperature=1.2)
    pair = _synthetic_pair(target, draft, _Tok())
    prompts = PROMPTS * 2
    kw = dict(L=2, B=B, key=3, window=3, max_new_tokens=60)
    batch = generate_batch(pair, prompts, decoder, seed=123, **kw)
    children = np.random.SeedSequence(123).spawn(len(prompts))
    lengths = set()
    n_eos = 0
    for prompt, child, res in zip(prompts, children, batch, strict=True):
        ref = G.generate(pair, prompt, decoder, seed=child, **kw)
        _same(res, ref)
        assert res.stopped_at_eos == ref.stopped_at_eos and res.text == ref.text
        n_eos += res.stopped_at_eos
        lengths.add(res.n_generated)
    assert n_eos >= 2 and len(lengths) >= 3  # the rows really finished apart


@pytest.mark.parametrize("rule,params", [
    ("lossless", {}), ("lenience", {"ell": 0.5}),
    ("truncation", {"allowed": lambda p, q: p >= 0.05 * p.max()}),
    ("fuzzy", {"threshold": 0.9})])
def test_lossy_rules_batched_equal_generate_lossy(synth, rule, params):
    _, _, pair = synth
    seeds = [2, 3, 4, 5, 6]
    batch = generate_batch(pair, PROMPTS, f"lossy:{rule}", L=3, max_new_tokens=25, seed=seeds,
                           stop_at_eos=False, **params)
    assert batch.decoder == f"lossy:{rule}"
    for prompt, s, res in zip(PROMPTS, seeds, batch, strict=True):
        ref = G.generate_lossy(pair, prompt, rule, L=3, max_new_tokens=25, seed=s,
                               stop_at_eos=False, **params)
        _same(res, ref)
        assert res.decoder == f"lossy:{rule}"


def test_an_error_in_one_row_ends_the_batch_and_its_threads(synth):
    """A row that raises mid-run (here a lossy rule's parameter at its third context) ends
    the whole batch with that error; no row thread is left behind."""
    import threading

    _, _, pair = synth
    calls = []

    def allowed(p, q):
        calls.append(1)
        if len(calls) == 3:
            raise ValueError("allowed: failed on purpose")
        return p >= 0.05 * p.max()

    before = threading.active_count()
    with pytest.raises(ValueError, match="^allowed: failed on purpose"):
        generate_batch(pair, PROMPTS, "lossy:truncation", L=2, max_new_tokens=10,
                       allowed=allowed)
    assert threading.active_count() == before


def test_one_prompt_batch_is_generate(synth):
    _, _, pair = synth
    kw = dict(L=3, B=2, key=1, max_new_tokens=20)
    batch = generate_batch(pair, [PROMPTS[0]], "mpfr", seed=[4], **kw)
    _same(batch[0], G.generate(pair, PROMPTS[0], "mpfr", seed=4, **kw))


def test_log_records_every_row_in_order(synth):
    target, _, pair = synth

    class Log:
        def __init__(self):
            self.rows = []

        def record(self, prompt_id, context_tokens, p, qs):
            self.rows.append((prompt_id, context_tokens.copy(), p))

    log = Log()
    batch = generate_batch(pair, PROMPTS[:3], "vsps", L=2, max_new_tokens=8, log=log,
                           stop_at_eos=False)
    for i, res in enumerate(batch):
        mine = [r for r in log.rows if r[0] == i]
        assert len(mine) == res.n_target_contexts
        for _, ctx, p in mine:
            np.testing.assert_allclose(p, target.next_distribution(ctx), rtol=1e-12,
                                       atol=1e-15)


def test_bad_input_names_the_argument_and_decodes_nothing(synth):
    _, _, pair = synth
    pair.target.calls.clear()
    pair.draft.calls.clear()
    long = np.zeros(WINDOW_POSITIONS, dtype=np.int64)
    cases = [
        (dict(prompts=[]), "prompts"),
        (dict(prompts=[PROMPTS[0], []]), "prompts"),
        (dict(prompts=[PROMPTS[0], long]), "prompts"),
        (dict(prompts=[PROMPTS[0], "text"]), "prompts"),
        (dict(prompts=PROMPTS[0]), "prompts"),
        (dict(chat=[True, False]), "chat"),
        (dict(max_new_tokens=WINDOW_POSITIONS - 8), "max_new_tokens"),
        (dict(decoder="nope"), "decoder"),
        (dict(decoder="pfr", key=None), "key"),
        (dict(decoder="vsps", B=2), "B"),
        (dict(decoder="lossy:nope", key=None), "decoder"),
        (dict(decoder="lossy:lenience", B=2, key=None), "B"),
        (dict(decoder="lossy:lenience"), "key"),
        (dict(tree="yes"), "tree"),
        (dict(batch_verify=False), "batch_verify"),
        (dict(seed=[1, 2]), "seed"),
        (dict(seed=[1, 2, "x"]), r"seed\[2\]"),
        (dict(foo=1), "foo"),
        (dict(L=10**30), "L"),
        (dict(max_new_tokens=10**30), "max_new_tokens"),
        (dict(log=object()), "log"),
        (dict(prefix_cache={}), "prefix_cache"),
    ]
    for kw, name in cases:
        args = dict(prompts=PROMPTS[:3], decoder="mpfr", key=1, max_new_tokens=4) | kw
        with pytest.raises(ValueError, match=f"^{name}:"):
            generate_batch(pair, **args)
    assert pair.target.calls == [] and pair.draft.calls == []
    with pytest.raises(ValueError, match="^pair:"):
        generate_batch(object(), PROMPTS, "ar")


def _fixed_entropy(monkeypatch):
    """Make ``SeedSequence()`` (a None seed: fresh OS entropy) deterministic."""
    import numpy.random.bit_generator as bg

    monkeypatch.setattr(bg, "randbits", lambda k: 20261203)


def _ss(k):
    return np.random.SeedSequence(k)


def _gen(k):
    return np.random.default_rng(k)


# (batch seed, the single-run seed of row i): built twice by calls, so that a Generator of
# the batch and one of the reference start in the same state
SEED_TABLE = {
    "int": (lambda: 77, lambda i, n: _ss(77).spawn(n)[i]),
    "numpy int": (lambda: np.int64(77), lambda i, n: _ss(77).spawn(n)[i]),
    "None": (lambda: None, lambda i, n: _ss(0).spawn(n)[i]),
    "SeedSequence": (lambda: _ss(5), lambda i, n: _ss(5).spawn(n)[i]),
    "spawned SeedSequence": (lambda: _ss(5).spawn(3)[2],
                             lambda i, n: _ss(5).spawn(3)[2].spawn(n)[i]),
    "Generator": (lambda: _gen(9),
                  lambda i, n: np.random.SeedSequence(
                      _gen(9).integers(0, 2**63, size=4).tolist()).spawn(n)[i]),
    "list of int": (lambda: [3, 1, 4], lambda i, n: [3, 1, 4][i]),
    "list of None": (lambda: [None] * 3, lambda i, n: None),
    "list of SeedSequence": (lambda: [_ss(k) for k in (2, 7, 2)],
                             lambda i, n: _ss((2, 7, 2)[i])),
    "list of Generator": (lambda: [_gen(k) for k in (8, 6, 8)], lambda i, n: _gen((8, 6, 8)[i])),
    "array of int": (lambda: np.array([3, 1, 4]), lambda i, n: [3, 1, 4][i]),
}


@pytest.mark.parametrize("kind", list(SEED_TABLE))
def test_seed_table_rows_equal_generate(synth, kind, monkeypatch):
    """Every kind of seed: row i of generate_batch is generate with row i's seed, bit for
    bit (a list element is that row's seed itself; one seed is split by split_seeds)."""
    _fixed_entropy(monkeypatch)
    _, _, pair = synth
    batch_seed, row_seed = SEED_TABLE[kind]
    prompts = PROMPTS[:3]
    # vsps: unkeyed, every accept/reject coin and residual draw comes from the row's seed
    kw = dict(L=2, max_new_tokens=8, stop_at_eos=False)
    batch = generate_batch(pair, prompts, "vsps", seed=batch_seed(), **kw)
    for i, prompt in enumerate(prompts):
        _same(batch[i], G.generate(pair, prompt, "vsps", seed=row_seed(i, len(prompts)), **kw))
    # the test can fail: another seed gives other tokens
    assert any(not np.array_equal(batch[i].tokens, G.generate(
        pair, prompt, "vsps", seed=123_456, **kw).tokens) for i, prompt in enumerate(prompts))


def test_seeds_are_not_consumed_or_advanced_by_the_batch_call(synth):
    """The same SeedSequence passed twice gives the same rows; a refused call draws nothing
    from the rows' Generators."""
    _, _, pair = synth
    kw = dict(L=2, max_new_tokens=8, stop_at_eos=False)
    ss = np.random.SeedSequence(31)
    a = generate_batch(pair, PROMPTS[:2], "vsps", seed=ss, **kw)
    b = generate_batch(pair, PROMPTS[:2], "vsps", seed=ss, **kw)
    assert ss.n_children_spawned == 0
    for x, y in zip(a, b, strict=True):
        _same(x, y)
    gens = [np.random.default_rng(1), np.random.default_rng(2)]
    before = [g.bit_generator.state for g in gens]
    for bad in (dict(decoder="nope"), dict(foo=1), dict(L=10**30), dict(B=0)):
        with pytest.raises(ValueError):
            generate_batch(pair, PROMPTS[:2], **(dict(decoder="vsps", seed=gens) | kw | bad))
    assert [g.bit_generator.state for g in gens] == before


def test_split_seeds_names_the_bad_element():
    from specbound._validation import split_seeds

    # one rule for the package (the simulator's batches use it too): the children spawn()
    # gives, without advancing the SeedSequence; None is seed 0
    ss = np.random.SeedSequence(5).spawn(2)[1]
    for _ in range(2):
        got = split_seeds(ss, 3)
        assert ss.n_children_spawned == 0
        ref = np.random.SeedSequence(5).spawn(2)[1].spawn(3)
        assert [(c.entropy, c.spawn_key) for c in got] == [(c.entropy, c.spawn_key)
                                                          for c in ref]
    assert [c.spawn_key for c in split_seeds(None, 2)] == [(0,), (1,)]
    assert split_seeds(None, 2)[1].entropy == 0

    for bad, name in [([1, "x"], r"seed\[1\]"), ([1, -2], r"seed\[1\]"), ([1.5, 2], r"seed\[0\]"),
                      ("abc", "seed"), ([1], "seed"), (object(), "seed"), (-1, "seed")]:
        with pytest.raises(ValueError, match=f"^{name}:"):
            split_seeds(bad, 2)


# ----------------------------------------------------------------------------- real model

REAL_PROMPTS = ["Name a colour.", "Write a haiku about the sea.",
                "def add(a, b):", "What is the capital of France? Answer briefly."]


class _Recorder:
    def __init__(self):
        self.p = {}

    def record(self, prompt_id, context_tokens, p, qs):
        self.p[(prompt_id, tuple(context_tokens.tolist()))] = p


@pytest.mark.parametrize("tree", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_embedded_model_batched_logprobs_match_single(llm_pair, tree):
    """4 prompts x 8 tokens: at every context both runs verified, the processed target
    log-probabilities of the batched and the single run differ by less than 1e-4 (float32
    rounding of a padded batch); the largest difference and the token agreement are
    printed.  With ``tree=True`` the batch's 4-D mask holds the rows' token trees."""
    kw = dict(L=3, B=2, key=5, max_new_tokens=8, stop_at_eos=False, tree=tree)
    seeds = [1, 2, 3, 4]
    blog = _Recorder()
    batch = generate_batch(llm_pair, REAL_PROMPTS, "mpfr", seed=seeds, log=blog, **kw)
    slog = _Recorder()
    same_tokens = 0
    for i, prompt in enumerate(REAL_PROMPTS):
        ref = G.generate(llm_pair, prompt, "mpfr", seed=seeds[i], log=slog, prompt_id=i, **kw)
        same_tokens += np.array_equal(ref.tokens, batch[i].tokens)
    shared = set(blog.p) & set(slog.p)
    assert len(shared) >= len(REAL_PROMPTS)
    worst = 0.0
    for key in shared:
        a, b = np.log(blog.p[key]), np.log(slog.p[key])
        fin = np.isfinite(a) & np.isfinite(b)
        assert np.array_equal(np.isfinite(a), np.isfinite(b))
        worst = max(worst, float(np.max(np.abs(a[fin] - b[fin]))))
    print(f"largest |batched - single| processed log-prob: {worst:.3g} over {len(shared)} "
          f"contexts; identical token sequences: {same_tokens}/{len(REAL_PROMPTS)}")
    assert worst < 1e-4


def test_ghost_rows_keep_the_batch_cache_exact_on_the_embedded_model(llm_pair, monkeypatch):
    """Rows that end their blocks at different steps (and rows that finish first) ride along
    in the batch forward as ghosts (one dummy token written into a free column of their
    slot) instead of a rebuild of the batch cache: the ghosts are used, and at every context
    both runs verified the processed target log-probabilities of the batched run differ from
    the single runs' by less than 1e-4 -- a ghost that wrote into a column a row still reads
    would change them by far more."""
    from specbound.llm import _scheduler

    used = []
    plain = _scheduler.Scheduler._with_ghosts

    def counting(self, which, group, live):
        out = plain(self, which, group, live)
        used.append(out is not None)
        return out

    monkeypatch.setattr(_scheduler.Scheduler, "_with_ghosts", counting)
    kw = dict(L=4, max_new_tokens=24, stop_at_eos=False, share_forwards=True)
    seeds = [11, 12, 13, 14]
    blog = _Recorder()
    batch = generate_batch(llm_pair, REAL_PROMPTS, "vsps", seed=seeds, log=blog, **kw)
    assert sum(used) >= 2, used
    assert len({b.emitted_per_block.size for b in batch}) >= 2  # rows finished apart
    slog = _Recorder()
    for i, prompt in enumerate(REAL_PROMPTS):
        G.generate(llm_pair, prompt, "vsps", seed=seeds[i], log=slog, prompt_id=i, **kw)
    shared = set(blog.p) & set(slog.p)
    assert len(shared) >= 4 * len(REAL_PROMPTS)
    worst = max(float(np.max(np.abs(np.log(blog.p[k]) - np.log(slog.p[k]))[
        np.isfinite(np.log(slog.p[k]))])) for k in shared)
    print(f"ghost steps {sum(used)}; largest |batched - single| log-prob {worst:.3g} over "
          f"{len(shared)} contexts")
    assert worst < 1e-4


FIRST_TOKEN_ROWS = 300
# 2 decoders, each failing wrongly with probability FIVE_SIGMA_RATE (about 5.7e-7): a false
# failure of this test has probability below 1.2e-6.


@pytest.mark.slow
@pytest.mark.parametrize("decoder,B", [("vsps", 1), ("specinfer", 2)])
def test_first_token_follows_the_target_on_the_batched_path(llm_pair, decoder, B):
    """One batch of FIRST_TOKEN_ROWS copies of a prompt with spawned seeds (unkeyed decoders:
    a keyed decoder's first token is a function of key and context): the first emitted
    tokens follow the target's processed distribution at the prompt."""
    assert decoder not in KEYED_DECODERS
    ids = llm_pair.encode_prompt(REAL_PROMPTS[0])
    p = llm_pair.next_token_probs([ids])[0]
    # the prompt's prefills once, shared by every row through a PrefixCache
    pc = G.PrefixCache()
    G.generate(llm_pair, ids, decoder, L=1, B=B, max_new_tokens=1, prefix_cache=pc)
    batch = generate_batch(llm_pair, [ids] * FIRST_TOKEN_ROWS, decoder, L=1, B=B, seed=2026,
                           max_new_tokens=1, window=4, prefix_cache=pc)
    assert batch.n_target_forwards == 1 and pc.hits >= 2 * FIRST_TOKEN_ROWS
    first = np.array([r.generated[0] for r in batch])
    assert_gof(first, p, samples=True, alpha=FIVE_SIGMA_RATE, label=decoder)


def test_mpfr_on_a_public_proposal_batches_as_generate(synth):
    """``mpfr`` with ``proposal="uniform"`` (Liu et al. 2026, arXiv:2609.21858, Alg. 5 on a
    public process: the Python block loop) on the real-model path: every row of
    ``generate_batch`` is ``generate``'s run with that row's seed, and the public process
    gives other tokens than the default race on the same key and seed."""
    _, _, pair = synth
    seeds = [5, 6, 7, 8, 9]
    kw = dict(L=3, B=3, key=7, window=2, stop_at_eos=False, proposal="uniform")
    batch = generate_batch(pair, PROMPTS, "mpfr", max_new_tokens=30, seed=seeds, **kw)
    for i, (prompt, res) in enumerate(zip(PROMPTS, batch.results(), strict=True)):
        _same(res, G.generate(pair, prompt, "mpfr", max_new_tokens=30, seed=seeds[i], **kw))
    race = G.generate(pair, PROMPTS[0], "mpfr", max_new_tokens=30, seed=seeds[0],
                      **{**kw, "proposal": "race"})
    assert list(race.tokens) != list(batch.results()[0].tokens)
