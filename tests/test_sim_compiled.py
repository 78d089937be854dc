"""The compiled sequence decoders equal the reference (Python-loop) decoders bit for bit.

The reference is ``speculative_decode(..., backend=SyntheticBackend(target, draft))``: a
backend given explicitly always runs the Python loop.  The compiled path is
``speculative_decode_batch`` (and ``speculative_decode`` itself, which dispatches to it).
Equality checks are deterministic; the statistical checks state their false-failure rates.
"""

from __future__ import annotations

import numba
import numpy as np
import pytest

from specbound.sim import (
    DECODERS,
    CachedLM,
    DecodeBatch,
    MarkovLM,
    SyntheticBackend,
    SyntheticLM,
    chisquare_gof,
    random_prompts,
    speculative_decode,
    speculative_decode_batch,
)
from specbound.sim import _compiled as C
from specbound.sim.decode import MULTI_DRAFT_DECODERS
from specbound.sim.decoders import DECODER_SPECS, KEYED_DECODERS, OPTIONS, PYTHON_LOOP_OPTIONS
from tests._results import assert_same_result

THREADS = (1, min(2, numba.config.NUMBA_NUM_THREADS))


def assert_same(ref, got, drafts=True, label=""):
    assert_same_result(ref, got, drafts=drafts, label=label)


def _reference(target, draft, prompt, decoder, **kw):
    return speculative_decode(target, draft, prompt, decoder,
                              backend=SyntheticBackend(target, draft), **kw)


def _pair(n):
    if n <= 3:
        return MarkovLM.random(n, seed=21), MarkovLM.random(n, seed=22, concentration=0.7)
    t = SyntheticLM(n, 2, seed=7, top_k=None if n < 1000 else 50)
    return t, t.draft(0.4, seed=3)


@pytest.mark.parametrize("n", [3, 50, 5000])
@pytest.mark.parametrize("decoder", DECODERS)
def test_batch_equals_reference_token_for_token(decoder, n):
    """Every decoder, vocabularies 3, 50, 5000, 1 and 2 threads: the batch is the
    reference loop per prompt (tokens, blocks, decisions, nu, pivots, counts, drafts)."""
    target, draft = _pair(n)
    B = 3 if decoder in MULTI_DRAFT_DECODERS else 1
    n_prompts = 4 if n < 5000 else 2
    ps = random_prompts(n_prompts, 3, n, seed=n)
    window = None if DECODERS.index(decoder) % 2 else 2
    kw = dict(L=3, B=B, key="compiled", max_new_tokens=14, window=window)
    refs = [_reference(target, draft, ps.tokens[i], decoder, seed=ps.seeds[i], **kw)
            for i in range(n_prompts)]
    for threads in THREADS:
        numba.set_num_threads(threads)
        try:
            batch = speculative_decode_batch(target, draft, ps, decoder, store_drafts=True, **kw)
        finally:
            numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
        assert len(batch) == n_prompts
        for i, ref in enumerate(refs):
            assert_same(ref, batch[i], label=f"{decoder} n={n} prompt {i} threads {threads}")


#: a non-default value of each decoder option of the registry (``OPTIONS``); those of
#: ``PYTHON_LOOP_OPTIONS`` run in the Python loop only (tests/test_sim_mpfr_public.py)
NON_DEFAULT = {"reweight": "gamma", "unkeyed": "fresh", "residual": "keyed",
               "proposal": "uniform"}


def _option_cases():
    """Non-default options of every registered decoder: a keyed decoder with masked and
    with skipped repeats, each option it takes alone, and all its options together with
    masked and with skipped repeats; an unkeyed decoder's options alone and together with
    masked repeats; an unkeyed drafting decoder without options with skipped repeats."""
    cases = []
    for name, spec in DECODER_SPECS.items():
        every = {o: NON_DEFAULT[o] for o in sorted(spec.options - PYTHON_LOOP_OPTIONS)}
        if spec.keyed:
            settings = [dict(repeats="mask"), dict(repeats="skip")]
            settings += [{o: v} for o, v in every.items()]
            if every:
                settings += [dict(every, repeats="mask"), dict(every, repeats="skip")]
        elif every:
            settings = [{o: v} for o, v in every.items()] + [dict(every, repeats="mask")]
        else:
            settings = [dict(repeats="skip")] if spec.drafts else []
        cases += [(name, s) for s in settings]
    return cases


OPTION_CASES = _option_cases()

#: the keyed and the unkeyed decoders, in registry order
KEYED = [d for d in DECODERS if d in KEYED_DECODERS]
UNKEYED = [d for d in DECODERS if d not in KEYED_DECODERS]


def test_option_cases_cover_the_registry():
    """Every option of every decoder runs in the option cases, and every keyed decoder with
    masked and with skipped repeats."""
    assert set(NON_DEFAULT) == set(OPTIONS)
    seen = {(d, o) for d, opts in OPTION_CASES for o in opts}
    for name, spec in DECODER_SPECS.items():
        assert {(name, o) for o in spec.options - PYTHON_LOOP_OPTIONS} <= seen, name
        if spec.keyed:
            assert {(name, "repeats")} <= seen, name


def _spy_compiled_calls(monkeypatch) -> list:
    """Wrap ``_compiled.decode_single``; the returned list records, per call, whether the
    compiled loop ran (``decode_single`` returns None when it declines a run)."""
    calls = []
    real = C.decode_single

    def spy(*a, **k):
        out = real(*a, **k)
        calls.append(out is not None)
        return out

    monkeypatch.setattr(C, "decode_single", spy)
    return calls


@pytest.mark.parametrize("n", [3, 50, 5000])
@pytest.mark.parametrize(("decoder", "opts"), OPTION_CASES)
def test_decoder_options_run_compiled_token_for_token(decoder, opts, n, monkeypatch):
    """Non-default options (masked and skipped repeats, gamma reweight, fresh unkeyed clocks,
    keyed residual) on the compiled path: the batch (1 and 2 threads) and ``speculative_decode``
    equal the reference loop (tokens, blocks, decisions, nu, pivots, counts, drafts, the
    recorded options).  Windows 1 (vocabularies 3, 50) and 0 (5,000) make repeats common."""
    target, draft = _pair(n)
    B = 3 if decoder in MULTI_DRAFT_DECODERS else 1
    n_prompts = 3 if n < 5000 else 2
    ps = random_prompts(n_prompts, 3, n, seed=n + 1)
    kw = dict(L=3, B=B, key="options", max_new_tokens=12, window=1 if n < 5000 else 0, **opts)
    refs = [_reference(target, draft, ps.tokens[i], decoder, seed=ps.seeds[i], **kw)
            for i in range(n_prompts)]
    for threads in THREADS:
        numba.set_num_threads(threads)
        try:
            batch = speculative_decode_batch(target, draft, ps, decoder, store_drafts=True, **kw)
        finally:
            numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
        for i, ref in enumerate(refs):
            got = batch[i]
            assert_same(ref, got, label=f"{decoder} {opts} n={n} prompt {i} threads {threads}")
            assert got.watermark == ref.watermark and got.unkeyed == ref.unkeyed
            np.testing.assert_array_equal(got.skipped, ref.skipped)
            np.testing.assert_array_equal(got.decision_skipped, ref.decision_skipped)
    calls = _spy_compiled_calls(monkeypatch)
    one = speculative_decode(target, draft, ps.tokens[0], decoder, seed=ps.seeds[0], **kw)
    assert calls == [True]
    assert_same(refs[0], one)
    assert one.watermark == refs[0].watermark


@pytest.mark.parametrize("decoder", DECODERS)
def test_speculative_decode_dispatches_to_the_compiled_loop(decoder, monkeypatch):
    """``speculative_decode`` = the reference loop, also for the state of a Generator seed,
    windows 0 and 1, ``max_blocks``, an empty prompt and ragged block lengths."""
    target, draft = _pair(4)
    B = 2 if decoder in MULTI_DRAFT_DECODERS else 1
    for window, max_blocks, prompt in ((None, None, []), (0, 3, [1]), (1, None, [2, 3])):
        g_ref, g_new = np.random.default_rng(11), np.random.default_rng(11)
        kw = dict(L=4, B=B, key=b"k", max_new_tokens=11, window=window, max_blocks=max_blocks)
        ref = _reference(target, draft, prompt, decoder, seed=g_ref, **kw)
        got = speculative_decode(target, draft, prompt, decoder, seed=g_new, **kw)
        assert_same(ref, got, label=f"{decoder} window={window}")
        assert g_ref.bit_generator.state == g_new.bit_generator.state
    calls = _spy_compiled_calls(monkeypatch)
    speculative_decode(target, draft, [0], decoder, L=2, B=B, key=1, max_new_tokens=3)
    assert calls == [True]


def test_unsupported_runs_fall_back_to_the_reference_loop():
    target, draft = _pair(50)
    # CachedLM (its cache must see the calls), another bit generator, non-default options
    ct = CachedLM(target)
    a = speculative_decode(ct, draft, [1], "pfr", L=2, key=3, max_new_tokens=6, seed=1)
    assert ct.misses > 0
    assert_same(_reference(target, draft, [1], "pfr", L=2, key=3, max_new_tokens=6, seed=1), a)
    assert C.decode_single(ct, draft, np.array([1]), np.random.default_rng(1),
                           C.run_args("pfr", L=2, B=1, N=6, key=3)) is None
    g = np.random.Generator(np.random.Philox(5))
    assert C.decode_single(target, draft, np.array([1]), g,
                           C.run_args("vsps", L=2, B=1, N=6)) is None
    assert g.random() == np.random.Generator(np.random.Philox(5)).random()  # nothing drawn
    m = speculative_decode(target, draft, [1], "mpfr", L=2, B=2, key=3, max_new_tokens=6,
                           window=1, repeats="mask", seed=2)
    assert m.watermark.mask_repeats
    for opts in (dict(decoder="pfr", repeats="skip"), dict(decoder="mws", reweight="gamma"),
                 dict(decoder="pfr_nowm", unkeyed="fresh"),
                 dict(decoder="mse_pseudo", residual="keyed")):
        kw = dict(L=2, key=3, max_new_tokens=8, window=1, seed=4, **opts)
        dec = kw.pop("decoder")
        assert_same(_reference(target, draft, [1, 1], dec, **kw),
                    speculative_decode(target, draft, [1, 1], dec, **kw))


@pytest.mark.parametrize("decoder", KEYED)
def test_skip_mode_without_window_draws_the_same_stream(decoder):
    """``repeats="skip"`` with ``window=None``: nothing repeats, yet the mode's unkeyed
    uniforms are drawn per block; compiled = reference, generator states included."""
    target, draft = _pair(50)
    B = 2 if decoder in MULTI_DRAFT_DECODERS else 1
    g_ref, g_new = np.random.default_rng(3), np.random.default_rng(3)
    kw = dict(L=3, B=B, key=5, max_new_tokens=10, repeats="skip")
    ref = _reference(target, draft, [4], decoder, seed=g_ref, **kw)
    got = speculative_decode(target, draft, [4], decoder, seed=g_new, **kw)
    assert_same(ref, got)
    assert g_ref.bit_generator.state == g_new.bit_generator.state
    assert not got.skipped.any() and got.watermark.repeats == "skip"


@pytest.mark.kernel
def test_pcg64_replay_equals_numpy():
    """NumPy's PCG64 replayed in Numba: the raw stream, ``random()`` and the state."""
    for seed in (0, 1, 2**63, np.random.SeedSequence([4, 5])):
        g = np.random.default_rng(seed)
        st = C.pcg_state(g)
        raw = np.array([C.pcg_next(st) for _ in range(50)], dtype=np.uint64)
        out = np.empty(70)
        C.pcg_doubles(st, out)
        np.testing.assert_array_equal(raw, g.bit_generator.random_raw(50))
        np.testing.assert_array_equal(out, g.random(70))
        h = np.random.default_rng(0)
        C.set_pcg_state(h, st)
        assert h.random() == g.random()


@pytest.mark.kernel
def test_compiled_models_equal_next_distribution():
    rng = np.random.default_rng(0)
    for model in (SyntheticLM(300, 3, seed=1, top_k=20), SyntheticLM(77, 2, kind="zipf").draft(
            0.3), MarkovLM.random(5, seed=2)):
        spec = C.model_spec(model)
        for length in (0, 1, 5):
            ctx = rng.integers(0, model.vocab_size, size=length).astype(np.int64)
            out = np.empty(model.vocab_size)
            C.model_probs(spec, ctx, out)
            np.testing.assert_array_equal(out, model.next_distribution(ctx))
    assert C.model_spec(object()) is None


@pytest.mark.kernel
def test_shared_back_off_sums_equal_next_distribution():
    """A target and its draft share the back-off sum of a context: finishing it with either
    model's noise, temperature and top-k is bit for bit that model's distribution."""
    rng = np.random.default_rng(1)
    t = SyntheticLM(400, 3, seed=4)
    for d in (t.draft(0.5, seed=2), t.draft(0.2, temperature=0.7, top_k=30), t):
        tm, dm = C.model_spec(t), C.model_spec(d)
        assert C.shares_fields(tm, dm)
        S, lg, out = np.empty(400), np.empty(400), np.empty(400)
        for length in (0, 2, 6):
            ctx = rng.integers(0, 400, size=length).astype(np.int64)
            C.model_partial(dm, ctx, S)
            for m, model in ((tm, t), (dm, d)):
                C.model_finish(m, ctx, S, lg, out)
                np.testing.assert_array_equal(out, model.next_distribution(ctx))
    assert not C.shares_fields(C.model_spec(t), C.model_spec(t.draft(0.3, context_length=2)))
    assert not C.shares_fields(C.model_spec(t), C.model_spec(SyntheticLM(400, 3, seed=5)))
    z = SyntheticLM(400, 3, kind="zipf")
    assert not C.shares_fields(C.model_spec(z), C.model_spec(z.draft(0.3)))
    mk = MarkovLM.random(3)
    assert not C.shares_fields(C.model_spec(mk), C.model_spec(mk))


# ------------------------------------------------------------------- exactness (compiled)


@pytest.mark.parametrize("decoder", UNKEYED)
def test_batched_law_of_first_three_tokens_is_exact(decoder):
    """Unkeyed decoders, 3,000 prompts in one compiled batch (independent seeds): the law of
    the first three tokens is the enumerated Markov law.  Chi-square GOF (pooling expected
    counts < 5), alpha = 1e-4 per decoder: the k cases (k = 7 unkeyed decoders today) fail
    by chance w.p. <= k * 1e-4 (7e-4).  (The
    keyed decoders' law over keys runs on the compiled path through ``speculative_decode`` in
    ``tests/test_sim_decode.py::test_law_of_first_three_tokens_is_exact``.)"""
    target = MarkovLM.random(3, seed=21)
    draft = MarkovLM.random(3, seed=22, concentration=0.7)
    B = 2 if decoder in MULTI_DRAFT_DECODERS else 1
    n_trials = 3000
    batch = speculative_decode_batch(target, draft, np.zeros((n_trials, 1), np.int64), decoder,
                                     L=2, B=B, max_new_tokens=3, seed=2026)
    gen = np.array([t[1:] for t in batch.tokens])
    counts = np.bincount((gen[:, 0] * 3 + gen[:, 1]) * 3 + gen[:, 2], minlength=27)
    res = chisquare_gof(counts, target.sequence_law([0], 3).ravel(), min_expected=5.0)
    assert res.pvalue > 1e-4, res


def test_keyed_law_runs_compiled(monkeypatch):
    """The keyed exact-law test's calls (MarkovLM, a key per trial) take the compiled path."""
    target = MarkovLM.random(3, seed=21)
    calls = []
    real = C.decode_single
    monkeypatch.setattr(C, "decode_single", lambda *a: calls.append(real(*a) is not None))
    for dec in KEYED:
        speculative_decode(target, target, [0], dec, L=2,
                           B=2 if dec in MULTI_DRAFT_DECODERS else 1, key=3,
                           max_new_tokens=3, seed=np.random.SeedSequence([0, 1]))
    assert calls == [True] * len(KEYED)


# ------------------------------------------------------------------- the batch object


def test_decode_batch_follows_the_result_batch_pattern():
    target, draft = _pair(50)
    ps = random_prompts(5, 2, 50, seed=3)
    batch = speculative_decode_batch(target, draft, ps, "mpfr", L=3, B=2, key=1,
                                     max_new_tokens=12)
    assert isinstance(batch, DecodeBatch) and len(batch) == 5
    assert [r.tokens.size for r in batch] == [14] * 5
    assert batch[-1].tokens.size == 14 and batch[0].drafts == ()
    df = batch.to_frame()
    assert list(df["generated"]) == [12] * 5 and df.shape[0] == 5
    np.testing.assert_allclose(df["aatps"], [r.aatps for r in batch])
    est = batch.aatps_estimate()
    assert est.mean == pytest.approx(60 / batch.n_blocks.sum())
    ci = batch.ci()
    assert ci.low < est.mean < ci.high
    with pytest.raises(IndexError):
        batch[5]
    # one seed: its SeedSequence children are the prompts' seeds
    one = speculative_decode_batch(target, draft, ps.tokens, "vsps", L=2, max_new_tokens=5,
                                   seed=9)
    kids = np.random.SeedSequence(9).spawn(5)
    for i in range(5):
        assert_same(_reference(target, draft, ps.tokens[i], "vsps", L=2, max_new_tokens=5,
                               seed=kids[i]), one[i], drafts=False)
    # ragged prompts, zero new tokens
    rag = speculative_decode_batch(target, draft, [[1], [2, 3, 4], []], "pfr", L=2, key=1,
                                   max_new_tokens=0)
    assert list(rag.prompt_length) == [1, 3, 0] and rag.n_blocks.sum() == 0


def test_batch_falls_back_for_other_models():
    class Uniform:
        vocab_size = 4

        def next_distribution(self, context):
            return np.full(4, 0.25)

    u = Uniform()
    batch = speculative_decode_batch(u, u, [[0], [1]], "pfr", L=2, key=1, max_new_tokens=4,
                                     seed=[1, 2])
    for i in range(2):
        assert_same(speculative_decode(u, u, [i], "pfr", L=2, key=1, max_new_tokens=4,
                                       seed=i + 1), batch[i], drafts=False)


@pytest.mark.parametrize(("kwargs", "match"), [
    (dict(prompts=[]), "prompts"),
    (dict(prompts=np.zeros((2, 2, 2), np.int64)), "prompts"),
    (dict(prompts=[[0], [99]]), "prompt"),
    (dict(seed=[1, 2, 3]), "seed"),
    (dict(seed="x"), "seed"),
    (dict(decoder="nope"), "decoder"),
    (dict(store_drafts="yes"), "store_drafts"),
    (dict(B=2), "B"),
])
def test_batch_bad_input(kwargs, match):
    target, draft = _pair(50)
    args = dict(prompts=[[0], [1]], decoder="pfr", seed=None)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        speculative_decode_batch(target, draft, args.pop("prompts"), args.pop("decoder"),
                                 key=1, **args)


# ------------------------------------------------------------------- compiled detection


@pytest.mark.parametrize("window", [None, 0, 1, 3])
def test_compiled_pivots_equal_keyed_pivots(window):
    """Compiled pivots of many sequences = ``keyed_pivots`` per sequence (with and without
    dedup; small alphabets so that windows repeat; 1 and 2 threads)."""
    from specbound.sim import _compiled_detect as D
    from specbound.sim import keyed_pivots
    from specbound.sim.prf import key_digest

    rng = np.random.default_rng(0 if window is None else window + 1)
    toks = [rng.integers(0, rng.integers(1, 6), size=rng.integers(0, 60)).astype(np.int64)
            for _ in range(40)]
    n0 = [int(rng.integers(0, t.size + 1)) for t in toks]
    for dedup in (True, False):
        for threads in THREADS:
            numba.set_num_threads(threads)
            try:
                U, pos = D.pivots_many(toks, n0, key_digest("det"), window, dedup)
            finally:
                numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
            for i in range(len(toks)):
                ref = keyed_pivots(toks[i], n0[i], "det", window=window, dedup=dedup)
                np.testing.assert_array_equal(U[i], ref.pivots)
                np.testing.assert_array_equal(pos[i], ref.positions)
                assert pos[i].dtype == ref.positions.dtype


@pytest.mark.kernel
@pytest.mark.parametrize("decoder", DECODERS)
def test_compiled_loop_small_runs(decoder):
    """A short run of every decoder through the compiled loop (also its Python source under
    ``NUMBA_DISABLE_JIT=1``) = the reference loop, whole-prefix and windowed labels."""
    target, draft = _pair(3)
    B = 2 if decoder in MULTI_DRAFT_DECODERS else 1
    for window in (None, 1):
        kw = dict(L=2, B=B, key=4, max_new_tokens=5, window=window)
        batch = speculative_decode_batch(target, draft, [[0], [2, 1]], decoder, seed=[7, 8],
                                         store_drafts=True, **kw)
        for i, prompt in enumerate(([0], [2, 1])):
            assert_same(_reference(target, draft, prompt, decoder, seed=7 + i, **kw), batch[i])


_FORK_SCRIPT = """
import multiprocessing as mp
from concurrent.futures import ProcessPoolExecutor
from specbound.sim import SyntheticLM, detect_many, speculative_decode, speculative_decode_batch
t = SyntheticLM(60, 2, seed=1)
d = t.draft(0.3)
r = speculative_decode(t, d, [1], "mpfr", B=2, key=1, max_new_tokens=6)
detect_many([r, r], 1)
speculative_decode_batch(t, d, [[1], [2]], "pfr", key=1, max_new_tokens=6, parallel=False)

def child(i):
    b = speculative_decode_batch(t, d, [[i], [i + 1]], "mpfr", B=2, key=1, max_new_tokens=6)
    return int(b.tokens[0].sum())

if __name__ == "__main__":
    with ProcessPoolExecutor(2, mp_context=mp.get_context("fork")) as ex:
        print(sum(ex.map(child, range(3))))
"""


def test_single_prompt_decoding_and_detection_stay_fork_safe(tmp_path):
    """``speculative_decode``, ``detect_many`` and ``parallel=False`` batches do not start
    Numba's thread pool, so a process can fork workers afterwards (the OpenMP threading layer
    aborts a forked child that uses a pool its parent started); the children run parallel
    batches."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = tmp_path / "fork_after_decoding.py"
    script.write_text(_FORK_SCRIPT)
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, str(script)], cwd=root, capture_output=True,
                         text=True, timeout=300, env={**os.environ,
                                                      "PYTHONPATH": str(root)})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().isdigit()


def test_parallel_false_gives_the_same_batch():
    target, draft = _pair(50)
    ps = random_prompts(5, 2, 50, seed=8)
    a = speculative_decode_batch(target, draft, ps, "specinfer", L=3, B=3, max_new_tokens=9)
    b = speculative_decode_batch(target, draft, ps, "specinfer", L=3, B=3, max_new_tokens=9,
                                 parallel=False)
    for i in range(5):
        assert_same(a[i], b[i], drafts=False)
