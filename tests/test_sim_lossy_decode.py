"""``sim.lossy_decode`` / ``sim.lossy_decode_batch``: the compiled lossy block loop equals the
Python block loop, and the first token of a block follows the rule's induced law.

The reference is :func:`specbound.sim.lossy_seq.lossy_loop` on a
:class:`~specbound.sim.SyntheticBackend` (the loop ``llm.generate_lossy`` runs on real models).
Equality checks are deterministic; the statistical checks state their false-failure rates.
"""

from __future__ import annotations

import numba
import numpy as np
import pytest

from specbound import theory
from specbound.sim import (
    CachedLM,
    MarkovLM,
    SyntheticBackend,
    SyntheticLM,
    lossy_decode,
    lossy_decode_batch,
    random_prompts,
)
from specbound.sim import _compiled as C
from specbound.sim import _compiled_lossy as CL
from specbound.sim import lossy_seq as LS
from tests._results import assert_same_result
from tests._rule_cases import rule_settings
from tests._stats import assert_gof, assert_not_gof

THREADS = (1, min(2, numba.config.NUMBA_NUM_THREADS))


def assert_same(ref, got, drafts=True, label=""):
    assert_same_result(ref, got, drafts=drafts, label=label)


def _reference(target, draft, prompt, rule, *, L, max_new_tokens, seed, **params):
    return LS.lossy_loop(SyntheticBackend(target, draft), np.asarray(prompt, dtype=np.int64),
                         rule, L, max_new_tokens, np.random.default_rng(seed), params)


def _pair(n, kind=None):
    """MarkovLM at vocabulary 3 (or ``kind="markov"``), SyntheticLM otherwise (top-k 50 from
    vocabulary 1,000: zeros in both laws)."""
    if kind == "markov" or (kind is None and n <= 3):
        return MarkovLM.random(n, seed=21), MarkovLM.random(n, seed=22, concentration=0.7)
    t = SyntheticLM(n, 2, seed=7, top_k=None if n < 1000 else 50)
    return t, t.draft(0.4, seed=3)


def _spy_kernels(monkeypatch) -> list:
    """Record every call of the compiled block loop (serial and parallel kernels), which the
    lossy decoder runs with the rule as the verification step of the single-draft block."""
    calls = []
    for name in ("decode_serial", "decode_batch"):
        real = getattr(C, name)

        def spy(*a, _real=real, _name=name):
            calls.append(_name)
            return _real(*a)

        monkeypatch.setattr(C, name, spy)
    return calls


def _cases(n):
    """(rule, params) for every rule: several settings each; masks drawn once per vocabulary."""
    rng = np.random.default_rng(n)
    allowed = rng.random(n) < 0.7
    allowed[0] = True
    half = rng.random(n) < 0.5
    examples = {"lam": 0.3, "threshold": 0.3, "ell": 0.4, "judge": rng.random(n) < 0.5,
                "allowed": allowed, "beta": 0.5}
    # every rule of the registry and every choice of its options (tests/_rule_cases.py),
    # then settings of particular interest: a per-context ell, a 2-D allowed set, the
    # contrastive law's beta = 0 and alpha = 0 branches
    return [(rule, params) for _, rule, params in rule_settings(examples)] + [
        ("lenience", {"ell": np.array([0.1])}),
        ("truncation_ceiling", {"ell": 0.6, "allowed": half[None, :],
                                "completion": "renormalize"}),
        ("contrastive", {"beta": 0.0, "alpha": 0.2}),
        ("contrastive", {"beta": 1.0, "alpha": 0.0}),
    ]


def _case_id(case):
    rule, params = case
    opts = [str(v) for k, v in params.items() if isinstance(v, str)]
    return "-".join([rule, *opts])


_IDS = [_case_id(c) for c in _cases(3)]


MODELS = [(3, "markov"), (3, "synthetic"), (50, "markov"), (50, "synthetic"),
          (5000, "synthetic")]


@pytest.mark.parametrize(("n", "kind"), MODELS, ids=[f"{k}{n}" for n, k in MODELS])
@pytest.mark.parametrize("index", range(len(_IDS)), ids=_IDS)
def test_compiled_equals_python_loop_token_for_token(index, n, kind, monkeypatch):
    """Every rule and setting, vocabularies 3, 50 (MarkovLM and SyntheticLM) and 5,000
    (SyntheticLM, top-k 50): the batch (1 and 2 threads) and ``lossy_decode`` equal the
    Python loop per prompt (tokens, blocks, decisions, positions, counts, drafts); a spy
    proves the compiled loop ran."""
    rule, params = _cases(n)[index]
    target, draft = _pair(n, kind)
    n_prompts = 3 if n < 5000 else 2
    ps = random_prompts(n_prompts, 3, n, seed=n + index)
    kw = dict(L=3, max_new_tokens=14 if n < 5000 else 10)
    refs = [_reference(target, draft, ps.tokens[i], rule, seed=ps.seeds[i], **kw, **params)
            for i in range(n_prompts)]
    calls = _spy_kernels(monkeypatch)
    for threads in THREADS:
        numba.set_num_threads(threads)
        try:
            batch = lossy_decode_batch(target, draft, ps, rule, store_drafts=True, **kw,
                                       **params)
        finally:
            numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
        for i, ref in enumerate(refs):
            assert_same(ref, batch[i], label=f"{rule} n={n} prompt {i} threads {threads}")
    one = lossy_decode(target, draft, ps.tokens[0], rule, seed=ps.seeds[0], **kw, **params)
    assert_same(refs[0], one, label=f"{rule} n={n} single")
    assert calls == ["decode_batch", "decode_batch", "decode_serial"]
    assert one.decoder == f"lossy:{rule}"


def test_zeros_in_both_laws_give_the_same_tokens_or_the_same_error():
    """Target and draft with different top-k supports (zeros where the other is positive:
    the contrastive law's infinite-contrast limit, empty residuals, a truncated target with
    no mass): compiled = Python loop for every setting, or both refuse naming ``allowed``."""
    n = 40
    target = SyntheticLM(n, 1, seed=5, top_k=6)
    draft = SyntheticLM(n, 1, seed=6, top_k=4)
    ps = random_prompts(6, 2, n, seed=9)
    small = np.arange(n) < 4  # often outside both supports
    extra = [("truncation", {"allowed": small}), ("truncation", {"allowed": small,
                                                               "on_reject": "target"}),
             ("truncation_ceiling", {"allowed": small, "ell": 0.3,
                                     "completion": "renormalize"})]
    refused = 0
    for rule, params in _cases(n) + extra:
        for i in range(len(ps)):
            kw = dict(L=3, max_new_tokens=12, seed=ps.seeds[i])
            try:
                ref = _reference(target, draft, ps.tokens[i], rule, **kw, **params)
            except ValueError as exc:
                with pytest.raises(ValueError, match="^allowed:") as got:
                    lossy_decode(target, draft, ps.tokens[i], rule, **kw, **params)
                assert str(got.value) == str(exc)
                refused += 1
                continue
            assert_same(ref, lossy_decode(target, draft, ps.tokens[i], rule, **kw, **params),
                        label=f"{rule} {params} prompt {i}")
    assert refused > 0  # the no-mass branch was reached


def test_generator_seed_is_advanced_as_by_the_python_loop(monkeypatch):
    """A Generator seed: the compiled run leaves it in the Python loop's state (the redraw
    loops included), for ragged block lengths and an empty prompt."""
    target, draft = _pair(50)
    for prompt in ([], [4, 5]):
        for rule, params in (("truncation", {"allowed": np.arange(50) < 3}),
                             ("ceiling", {"ell": 0.05, "completion": "renormalize"})):
            g_ref, g_new = np.random.default_rng(5), np.random.default_rng(5)
            ref = LS.lossy_loop(SyntheticBackend(target, draft), np.array(prompt, np.int64),
                                rule, 4, 11, g_ref, params)
            got = lossy_decode(target, draft, prompt, rule, L=4, max_new_tokens=11, seed=g_new,
                               **params)
            assert_same(ref, got, label=rule)
            assert g_ref.bit_generator.state == g_new.bit_generator.state


def test_callables_and_uncovered_runs_take_the_python_loop(monkeypatch):
    """Callable parameters, a custom backend, a CachedLM (single run), another bit generator
    and work above MAX_WORK run the Python loop (the spy sees no kernel call) and give
    the Python loop's tokens; a callable returning a constant gives the constant's
    compiled tokens."""
    target, draft = _pair(50)
    kw = dict(L=3, max_new_tokens=20, seed=4)
    const = lossy_decode(target, draft, [1], "lenience", ell=0.5, **kw)
    calls = _spy_kernels(monkeypatch)
    minp = {"allowed": lambda p, q: p >= 0.05 * p.max()}
    for rule, params in (("truncation", minp), ("lenience", {"ell": lambda p, q: 0.5}),
                         ("interpolation", {"lam": lambda p, q: 1.0 - float(np.max(q))})):
        got = lossy_decode(target, draft, [1], rule, **kw, **params)
        ref = lossy_decode(target, draft, [1], rule, backend=SyntheticBackend(target, draft),
                           **kw, **params)
        assert_same(ref, got, label=rule)
        b = lossy_decode_batch(target, draft, [[1], [2]], rule, seed=[4, 5], L=3,
                               max_new_tokens=20, store_drafts=True, **params)
        assert_same(ref, b[0], label=f"{rule} batch")
    assert_same(const, lossy_decode(target, draft, [1], "lenience",
                                    ell=lambda p, q: 0.5, **kw))
    ct = CachedLM(target)
    a = lossy_decode(ct, draft, [1], "lenience", ell=0.5, **kw)
    assert ct.misses > 0
    assert_same(const, a)
    g = np.random.Generator(np.random.Philox(3))
    ref = lossy_decode(target, draft, [1], "judge", backend=SyntheticBackend(target, draft),
                       L=3, max_new_tokens=20, seed=np.random.Generator(np.random.Philox(3)),
                       judge=np.arange(50) % 2 == 0)
    assert_same(ref, lossy_decode(target, draft, [1], "judge", L=3, max_new_tokens=20, seed=g,
                                  judge=np.arange(50) % 2 == 0))
    assert_same(const, lossy_decode(target, draft, [1], "lenience", ell=0.5,
                                    backend=SyntheticBackend(target, draft), **kw))
    monkeypatch.setattr(C, "MAX_WORK", 100)
    assert_same(const, lossy_decode(target, draft, [1], "lenience", ell=0.5, **kw))
    assert calls == []
    monkeypatch.undo()
    calls = _spy_kernels(monkeypatch)
    b = lossy_decode_batch(ct, CachedLM(draft), [[1]], "lenience", seed=[4], L=3,
                           max_new_tokens=20, store_drafts=True, ell=0.5)
    assert calls == ["decode_serial"]  # a CachedLM's model runs compiled in the batch
    assert_same(const, b[0])


def _block_firsts(res):
    """(context token, first token) of every block of a run (MarkovLM: the context is the
    last token before the block)."""
    starts = np.concatenate(([0], np.cumsum(res.emitted_per_block)[:-1]))
    toks = res.tokens
    n0 = res.prompt_length
    return toks[n0 + starts - 1], toks[n0 + starts]


# Law of the first token of a block, on the compiled path.  MarkovLM (vocabulary 4): a
# block starting after token c draws its first token from induced(P[c], Q[c]) with uniforms
# independent of the past, so the first M block starts after c (M fixed in advance) are M
# i.i.d. draws of that law.  M = 100,000 per context; each test fails wrongly with
# probability ALPHA = 1e-5, 4 contexts x 2 rules: at most 8e-5 in all.  Power: any law at
# total variation 0.01 from the claimed one has chi-square noncentrality >= M (2 * 0.01)^2 =
# 40, rejected at ALPHA with probability about 0.9 (3 degrees of freedom); checked on the
# same samples against a law with 0.01 of mass moved (assert_not_gof).
LAW_M = 100_000
ALPHA = 1e-5
LAW_CASES = [
    ("truncation", {"allowed": np.array([True, False, True, True])}),
    ("contrastive", {"beta": 0.7, "alpha": 0.1}),
]
SLOW_LAW_CASES = [
    ("lenience", {"ell": 0.5}),
    ("ceiling", {"ell": 0.3, "completion": "renormalize"}),
    ("truncation_ceiling", {"ell": 0.3, "allowed": np.array([True, False, False, True])}),
    ("judge", {"judge": np.array([True, False, True, False])}),
    ("fuzzy", {"threshold": 0.25, "divergence": "js"}),
    ("interpolation", {"lam": 0.4}),
    ("truncation", {"allowed": np.array([False, True, True, False]), "on_reject": "target"}),
]


def _law_models():
    return MarkovLM.random(4, seed=3), MarkovLM.random(4, seed=4, concentration=0.6)


def _shifted(law):
    """``law`` with 0.01 of mass moved from its largest to its smallest entry."""
    out = law.copy()
    out[np.argmax(law)] -= 0.01
    out[np.argmin(law)] += 0.01
    return out


def _check_block_law(rule, params, monkeypatch):
    target, draft = _law_models()
    calls = _spy_kernels(monkeypatch)
    ctx, first = [], []
    seed = 0
    while True:
        res = lossy_decode(target, draft, [0], rule, L=1, max_new_tokens=100_000, seed=seed,
                           **params)
        c, f = _block_firsts(res)
        ctx.append(c)
        first.append(f)
        seed += 1
        cc = np.concatenate(ctx)
        if min(np.sum(cc == v) for v in range(4)) >= LAW_M:
            break
    assert set(calls) == {"decode_serial"}
    ff = np.concatenate(first)
    for v in range(4):
        sample = ff[cc == v][:LAW_M]
        P, Q = target.transition_matrix[v], draft.transition_matrix[v]
        law = theory.induced_distribution(P, Q, rule, **params)
        assert_gof(sample, law, samples=True, alpha=ALPHA, label=f"{rule} context {v}")
        assert_not_gof(sample, _shifted(law), below=ALPHA, samples=True,
                       label=f"{rule} context {v} (power)")


@pytest.mark.parametrize(("rule", "params"), LAW_CASES, ids=[r for r, _ in LAW_CASES])
def test_block_first_token_follows_the_induced_law_compiled(rule, params, monkeypatch):
    _check_block_law(rule, params, monkeypatch)


@pytest.mark.slow
@pytest.mark.parametrize(("rule", "params"), SLOW_LAW_CASES,
                         ids=[_case_id(c) for c in SLOW_LAW_CASES])
def test_block_first_token_follows_the_induced_law_compiled_more_rules(rule, params,
                                                                        monkeypatch):
    """As above for the remaining rules (7 rules x 4 contexts at ALPHA: at most 2.8e-4)."""
    _check_block_law(rule, params, monkeypatch)


@pytest.mark.slow
def test_first_token_of_the_first_block_over_prompts(monkeypatch):
    """The first token of the first block of 100,000 prompts (one seed each, one batch call)
    follows ``theory.induced_distribution`` of the prompt's context.  2 rules at ALPHA:
    false failure at most 2e-5; power as above (M = 100,000 draws)."""
    target, draft = SyntheticLM(6, 1, seed=2), None
    draft = target.draft(0.5, seed=1)
    prompt = [3]
    p = target.next_distribution(prompt)
    q = draft.next_distribution(prompt)
    calls = _spy_kernels(monkeypatch)
    for rule, params in (("ceiling", {"ell": 0.4, "completion": "renormalize"}),
                         ("fuzzy", {"threshold": 1.0, "divergence": "kl"})):
        b = lossy_decode_batch(target, draft, np.full((LAW_M, 1), 3), rule, L=2,
                               max_new_tokens=1, seed=11, **params)
        first = np.array([t[1] for t in b.tokens])
        law = theory.induced_distribution(p, q, rule, **params)
        assert_gof(first, law, samples=True, alpha=ALPHA, label=rule)
        assert_not_gof(first, _shifted(law), below=ALPHA, samples=True, label=rule)
    assert calls == ["decode_batch", "decode_batch"]


def test_bad_input_names_the_argument_before_any_kernel_runs(monkeypatch):
    target, draft = _pair(50)
    calls = _spy_kernels(monkeypatch)
    bad = [
        (dict(rule="nope"), "rule"),
        (dict(rule="lenience"), "ell"),  # required
        (dict(rule="lenience", ell=2.0), "ell"),
        (dict(rule="lenience", ell="0.5"), "ell"),
        (dict(rule="lenience", ell=0.5, lam=0.3), "lam"),  # not a parameter of the rule
        (dict(rule="judge", judge=np.ones(7, bool)), "judge"),
        (dict(rule="fuzzy", threshold=0.1, divergence="hellinger"), "divergence"),
        (dict(rule="truncation", allowed=np.ones(50, bool), on_reject="x"), "on_reject"),
        (dict(rule="ceiling", ell=0.5, completion="x"), "completion"),
        (dict(rule="contrastive", beta=-1.0), "beta"),
        (dict(rule="lossless", L=0), "L"),
        (dict(rule="lossless", max_new_tokens=-1), "max_new_tokens"),
        (dict(rule="lossless", prompt=[50]), "prompt"),
        (dict(rule="lossless", backend=object()), "backend"),
    ]
    for kw, name in bad:
        kw = dict(kw)
        prompt = kw.pop("prompt", [1])
        rule = kw.pop("rule")
        with pytest.raises(ValueError, match=f"^{name}:"):
            lossy_decode(target, draft, prompt, rule, **kw)
        kw.pop("backend", None)
        if name not in ("backend", "prompt"):
            with pytest.raises(ValueError, match=f"^{name}:"):
                lossy_decode_batch(target, draft, [[1], [2]], rule, **kw)
    with pytest.raises(ValueError, match="^draft:"):
        lossy_decode(target, SyntheticLM(7, 1), [1], "lossless")
    with pytest.raises(ValueError, match="^prompts:"):
        lossy_decode_batch(target, draft, [], "lossless")
    with pytest.raises(ValueError, match="^seed:"):
        lossy_decode_batch(target, draft, [[1], [2]], "lossless", seed=[1])
    assert calls == []
    # the truncated target is needed where A carries no target mass: both loops refuse
    t = SyntheticLM(50, 1, seed=1, top_k=3)
    d = t.draft(0.9, seed=2)
    p = t.next_distribution([1])
    allowed = p == 0
    for backend in (None, SyntheticBackend(t, d)):
        with pytest.raises(ValueError, match="^allowed:"):
            lossy_decode(t, d, [1], "truncation", allowed=allowed, on_reject="target",
                         backend=backend, max_new_tokens=5)


@pytest.mark.kernel
def test_compiled_loop_source_equals_the_python_loop():
    """Short runs of the compiled loop (also under NUMBA_DISABLE_JIT=1, where its Python
    source runs) equal the Python loop for a few rules at vocabulary 3 and 12."""
    for n in (3, 12):
        target, draft = _pair(n)
        for rule, params in (("lossless", {}), ("fuzzy", {"threshold": 0.2, "divergence": "js"}),
                             ("truncation", {"allowed": np.arange(n) != 1}),
                             ("ceiling", {"ell": 0.3, "completion": "renormalize"}),
                             ("contrastive", {"beta": 0.5})):
            refs = [_reference(target, draft, [i], rule, L=2, max_new_tokens=7, seed=i,
                               **params) for i in range(2)]
            b = lossy_decode_batch(target, draft, [[0], [1]], rule, L=2, max_new_tokens=7,
                                   seed=[0, 1], store_drafts=True, **params)
            for i in range(2):
                assert_same(refs[i], b[i], label=f"{rule} n={n}")


@pytest.mark.kernel
def test_pairwise_sum_is_numpys():
    """``pairwise_sum`` = ``ndarray.sum`` bit for bit (lengths across the 8 / 128 / split
    boundaries, magnitudes over ten decades)."""
    rng = np.random.default_rng(0)
    for n in (*range(0, 20), 127, 128, 129, 135, 136, 255, 256, 257, 1000, 4099, 50_000):
        a = rng.random(n) ** 3 * 10.0 ** rng.integers(-5, 5, size=n)
        assert CL.pairwise_sum(a) == a.sum(), n
