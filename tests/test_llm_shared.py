"""``share_forwards=True``: one forward for the target and its ``temperature:T`` view.

On the synthetic torch module of ``tests/test_llm_batch.py`` (a protocol model as a causal
LM; its logits do not depend on how the tokens are batched) the shared path emits the
unshared path's tokens and decisions bit for bit, and ``log.record`` receives the same
``(p, qs)``; the draft here is a real ``temperature:T`` view of the module
(:func:`specbound.llm.drafts.make_draft`'s construction).
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from specbound import sim  # noqa: E402
from specbound.llm import generation as G  # noqa: E402
from specbound.llm._loading import LoadInfo  # noqa: E402
from specbound.llm.batch import generate_batch  # noqa: E402
from specbound.llm.drafts import DraftSpec, _temperature_draft, view_temperature  # noqa: E402
from specbound.llm.models import LogitsProcessing, ModelPair  # noqa: E402
from tests._results import assert_same_result as _same  # noqa: E402
from tests._stats import FIVE_SIGMA_RATE, assert_gof  # noqa: E402
from tests.test_llm_batch import PROMPTS, V, _SynthModule, _Tok  # noqa: E402


class _Head(torch.nn.Module):
    """The output head of the synthetic module: the identity on its float64 logits."""

    def forward(self, x):
        return x


class _HeadSynth(_SynthModule):
    """The synthetic module with a named output head (so a ``temperature:T`` view exists)."""

    def __init__(self, lm):
        super().__init__(lm)
        self.head = _Head()

    def get_output_embeddings(self):
        return self.head

    def _out(self, ctxs, R, k, cache, use_cache):
        out = super()._out(ctxs, R, k, cache, use_cache)
        out.logits = self.head(out.logits)
        return out


def _view_pair(t, *, top_k=None, tokenizer=None, seed=31):
    lm = sim.SyntheticLM(V, context_length=3, seed=seed)
    target = _HeadSynth(lm)
    draft = _temperature_draft(target, t)
    info = LoadInfo("synthetic", "synthetic", "folder", "", False, 0.0)
    return ModelPair(target, draft, tokenizer, LogitsProcessing(top_k=top_k),
                     DraftSpec("temperature", float(t)), device=torch.device("cpu"),
                     load_info={"target": info, "draft": None})


@pytest.fixture(scope="module")
def vpair():
    return _view_pair(1.5, top_k=10, tokenizer=_Tok(), seed=21)


class _Log:
    def __init__(self):
        self.rows = []

    def record(self, prompt_id, context_tokens, p, qs):
        self.rows.append((prompt_id, context_tokens.copy(), p.copy(), [q.copy() for q in qs]))


def _same_logs(a, b):
    assert len(a.rows) == len(b.rows) > 0
    for (i, c, p, qs), (j, d, r, ss) in zip(a.rows, b.rows, strict=True):
        assert i == j and np.array_equal(c, d) and np.array_equal(p, r)
        assert len(qs) == len(ss) and all(np.array_equal(x, y) for x, y in zip(qs, ss,
                                                                                strict=True))


def test_the_view_is_recognised(vpair):
    assert view_temperature(vpair.target, vpair.draft) == 1.5
    assert view_temperature(vpair.target, vpair.target) is None
    other = _HeadSynth(sim.SyntheticLM(V, context_length=2, seed=3))
    assert view_temperature(vpair.target, other) is None


CASES = [("ar", 1, False), ("vsps", 1, False), ("pfr", 1, False), ("mws", 1, False),
         ("mse", 1, False), ("mpfr", 4, False), ("mpfr", 4, True), ("invariant", 3, True),
         ("specinfer", 2, False)]


@pytest.mark.parametrize("decoder,B,tree", CASES)
def test_shared_equals_unshared_bit_for_bit(vpair, decoder, B, tree):
    """Ragged prompts (one of one token), EOS, rows finishing apart: the shared path's
    tokens, decisions and logged laws are the unshared path's, one prompt at a time and
    batched; a shared run makes no draft forward and fewer target forwards than the
    unshared run's target plus draft forwards."""
    prompts = PROMPTS * 2
    kw = dict(L=3, B=B, key=7, window=3, max_new_tokens=60, tree=tree)
    seeds = list(range(100, 100 + len(prompts)))
    logs = (_Log(), _Log())
    ref = generate_batch(vpair, prompts, decoder, seed=seeds, log=logs[0], **kw)
    got = generate_batch(vpair, prompts, decoder, seed=seeds, log=logs[1],
                         share_forwards=True, **kw)
    for a, b in zip(ref, got, strict=True):
        _same(b, a)
        assert a.stopped_at_eos == b.stopped_at_eos and a.text == b.text
    _same_logs(*logs)
    assert got.n_draft_forwards == 0 and got.draft_seconds == 0
    if decoder == "ar":  # no draft: the same forwards
        assert got.n_target_forwards == ref.n_target_forwards
    else:
        assert got.n_target_forwards < ref.n_target_forwards + ref.n_draft_forwards
    assert len({r.n_generated for r in got}) >= 2 and any(r.stopped_at_eos for r in got)
    # one prompt at a time (generate), with its log
    for i in (0, 2):
        la, lb = _Log(), _Log()
        a = G.generate(vpair, prompts[i], decoder, seed=seeds[i], log=la, **kw)
        b = G.generate(vpair, prompts[i], decoder, seed=seeds[i], log=lb, share_forwards=True,
                       **kw)
        _same(b, a)
        _same(b, got[i])
        _same_logs(la, lb)


@pytest.mark.parametrize("rule,params", [
    ("lenience", {"ell": 0.5}), ("truncation", {"allowed": lambda p, q: p >= 0.05 * p.max()})])
def test_lossy_rules_shared_equal_unshared(vpair, rule, params):
    seeds = [2, 3, 4, 5, 6]
    kw = dict(L=3, max_new_tokens=25, seed=seeds, stop_at_eos=False, **params)
    ref = generate_batch(vpair, PROMPTS, f"lossy:{rule}", **kw)
    got = generate_batch(vpair, PROMPTS, f"lossy:{rule}", share_forwards=True, **kw)
    for a, b in zip(ref, got, strict=True):
        _same(b, a)


def test_temperature_one_view_is_the_target():
    """``temperature:1``: q == p bit for bit, every draft token is accepted."""
    pair = _view_pair(1.0)
    ref = G.generate(pair, PROMPTS[0], "vsps", L=3, max_new_tokens=20, seed=1,
                     stop_at_eos=False)
    got = G.generate(pair, PROMPTS[0], "vsps", L=3, max_new_tokens=20, seed=1,
                     stop_at_eos=False, share_forwards=True)
    _same(got, ref)
    assert np.all(got.decision_accepted)


def test_share_forwards_needs_a_temperature_view(vpair):
    target = sim.SyntheticLM(V, context_length=3, seed=11)
    draft = sim.SyntheticLM(V, context_length=2, seed=12)
    info = LoadInfo("synthetic", "synthetic", "folder", "", False, 0.0)
    other = ModelPair(_SynthModule(target), _SynthModule(draft), None, LogitsProcessing(),
                      DraftSpec("model", "synthetic"), device=torch.device("cpu"),
                      load_info={"target": info, "draft": None})
    for call in (lambda: G.PairBackend(other, share_forwards=True),
                 lambda: G.generate(other, PROMPTS[0], "vsps", share_forwards=True),
                 lambda: generate_batch(other, PROMPTS, "vsps", share_forwards=True)):
        with pytest.raises(ValueError, match="share_forwards"):
            call()
    with pytest.raises(ValueError, match="share_forwards"):
        G.generate(vpair, PROMPTS[0], "vsps", share_forwards="yes")
    assert other.target.calls == [] and other.draft.calls == []


FIRST_TOKEN_ROWS = 2000
# one goodness-of-fit test at level FIVE_SIGMA_RATE: a false failure has probability
# about 5.7e-7 (fixed seed: the outcome is deterministic)


def test_first_token_follows_the_target_in_shared_mode():
    """vsps in shared mode, batched over FIRST_TOKEN_ROWS copies of a prompt with spawned
    seeds: the first emitted token follows the target's processed law at the prompt (the
    draft at T = 3 is far from it, so a wrong verification would show)."""
    pair = _view_pair(3.0, seed=41)
    prompt = PROMPTS[0]
    p = pair.next_token_probs([prompt])[0]
    q = pair.next_token_probs([prompt], model="draft")[0]
    assert 0.5 * np.abs(p - q).sum() > 0.05
    batch = generate_batch(pair, [prompt] * FIRST_TOKEN_ROWS, "vsps", L=2, seed=2026,
                           max_new_tokens=1, share_forwards=True)
    first = np.array([r.generated[0] for r in batch])
    assert_gof(first, p, samples=True, alpha=FIVE_SIGMA_RATE, label="vsps shared")
