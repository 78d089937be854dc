"""Tests of specbound.sim.detect: keyed pivots, detection, null calibration, key sensitivity.

Statistical tests state their false-failure probability and use fixed seeds.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math

import numpy as np
import pytest
from scipy import stats

from specbound.sim import DetectionBatch, DetectionResult, detect, detect_many, keyed_pivots
from specbound.sim.prf import context_label, keyed_uniforms, prf_uniform
from specbound.theory import null_log_sf, score_log_pvalue, token_scores
from tests._stats import binom_ok

PARAMS = {
    "aaronson": {},
    "u": {},
    "li": {"delta": 0.1},
    "lattimore": {"epsilon": 0.01},
}


def _toy_next(ctx, vocab: int, m: int = 2, conc: float = 0.5) -> np.ndarray:
    """A toy LM: a Dirichlet next-token law seeded by the last m tokens (deterministic)."""
    h = hashlib.blake2b(np.asarray(ctx[-m:], dtype="<i8").tobytes(), digest_size=8).digest()
    rng = np.random.default_rng(int.from_bytes(h, "little"))
    return rng.dirichlet(np.full(vocab, conc))


def _race_generate(prompt, n_new, key, *, vocab=30, m=2, lm_m=2):
    """Exponential-race watermark: Y = argmin_v -log(u_v) / P(v), u from the keyed PRF."""
    toks = list(prompt)
    for _ in range(n_new):
        P = _toy_next(toks, vocab, lm_m)
        u = keyed_uniforms(key, toks, np.arange(vocab), window=m)[:, 0]
        with np.errstate(divide="ignore"):
            race = np.where(P > 0, -np.log(u) / np.where(P > 0, P, 1.0), np.inf)
        toks.append(int(np.argmin(race)))
    return np.asarray(toks, dtype=np.int64)


# ----------------------------------------------------------------------------------------
# pivots
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("m", [None, 0, 1, 3])
def test_pivots_are_the_keyed_first_clocks(m):
    rng = np.random.default_rng(0)
    tok = rng.integers(0, 5000, size=40)
    kp = keyed_pivots(tok, 4, "secret", window=m, dedup=False)
    U, pos = kp.pivots, kp.positions
    ref = [prf_uniform(context_label("secret", tok[:t], window=m), tok[t], 0)
           for t in range(4, 40)]
    assert np.array_equal(pos, np.arange(4, 40))
    assert np.array_equal(U, np.asarray(ref))
    # exp(-E) with E the first keyed clock
    E = -np.log(keyed_uniforms("secret", tok[:10], [tok[10]], window=m)[0, 0])
    assert U[6] == pytest.approx(math.exp(-E), rel=1e-15)


def test_dedup_scores_each_window_token_pair_once():
    tok = np.array([7, 1, 2, 3, 1, 2, 3, 1, 2, 9, 1, 2, 3], dtype=np.int64)
    pos = keyed_pivots(tok, 1, 5, window=2, dedup=True).positions
    pairs = [(tuple(tok[t - 2 : t]), tok[t]) for t in pos]
    assert len(pairs) == len(set(pairs))
    # every skipped position repeats an earlier scored (window, token) pair
    for t in set(range(1, tok.size)) - set(pos.tolist()):
        w = tuple(tok[max(0, t - 2) : t])
        assert (w, tok[t]) in {(tuple(tok[max(0, s - 2) : s]), tok[s]) for s in pos if s < t}
    pos_all = keyed_pivots(tok, 1, 5, window=2, dedup=False).positions
    assert pos_all.size == tok.size - 1 and pos.size < pos_all.size
    # with the whole prefix as context nothing repeats
    assert keyed_pivots(tok, 1, 5, window=None).positions.size == tok.size - 1


# ----------------------------------------------------------------------------------------
# detection results
# ----------------------------------------------------------------------------------------


def test_detect_result_fields_and_consistency():
    rng = np.random.default_rng(1)
    tok = rng.integers(0, 1000, size=60)
    for score, params in PARAMS.items():
        r = detect(tok, 10, 123, window=3, score=score, **params)
        assert isinstance(r, DetectionResult)
        assert r.n_scored == r.pivots.size == 50
        assert r.score == pytest.approx(float(token_scores(r.pivots, score, **params).sum()))
        assert r.log_pvalue == pytest.approx(score_log_pvalue(r.pivots, score, **params))
        assert r.anlppt == pytest.approx(-r.log_pvalue / 50)
        assert r.score_name == score
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.score = 0.0
    empty = detect(tok, 60, 123)
    assert empty.n_scored == 0 and empty.log_pvalue == 0.0 and math.isnan(empty.anlppt)


def test_detect_many_equals_detect():
    rng = np.random.default_rng(2)
    seqs = [rng.integers(0, 50, size=n) for n in (5, 30, 44, 44, 8)]
    b = detect_many(seqs, [2, 5, 5, 0, 8], "k", window=2, score="li", delta=0.3)
    assert isinstance(b, DetectionBatch)
    for i, (s, p) in enumerate(zip(seqs, [2, 5, 5, 0, 8], strict=True)):
        r = detect(s, p, "k", window=2, score="li", delta=0.3)
        assert b.n_scored[i] == r.n_scored
        assert np.array_equal(b.pivots[i], r.pivots)
        assert b.score[i] == pytest.approx(r.score)
        assert b.log_pvalue[i] == pytest.approx(r.log_pvalue, rel=1e-12, abs=1e-14)
    assert math.isnan(b.anlppt[4])  # nothing scored
    df = b.to_frame()
    assert list(df.columns) == ["score", "log_pvalue", "anlppt", "n_scored"] and len(df) == 5
    # a 2-D array of sequences and one prompt length for all
    arr = rng.integers(0, 50, size=(3, 20))
    b2 = detect_many(arr, 4, "k")
    assert list(b2.n_scored) == [16, 16, 16]


# ----------------------------------------------------------------------------------------
# null calibration via detect
# ----------------------------------------------------------------------------------------


def test_null_calibration_via_detect_random_sequences():
    # 10,000 unwatermarked sequences of 55 random tokens (prompt 5, ~50 scored) under a key:
    # for every score, the number of p <= 1% lies in its binomial 99.9% interval
    # (false-failure rate <= 1e-3 per score, 4e-3 in all).  The pivots are computed once by
    # detect_many; the other scores reuse them through the theory functions.
    rng = np.random.default_rng(3)
    seqs = rng.integers(0, 2000, size=(10_000, 55))
    b = detect_many(seqs, 5, key="null-calibration", window=2)
    assert b.n_scored.min() >= 45
    for score, params in PARAMS.items():
        if score == "aaronson":
            lp = b.log_pvalue
        else:
            S = np.array([token_scores(u, score, **params).sum() for u in b.pivots])
            lp = null_log_sf(S, b.n_scored, score, **params)
        k = int(np.sum(lp <= math.log(0.01)))
        assert binom_ok(k, 10_000, 0.01), (score, k)


# ----------------------------------------------------------------------------------------
# watermarked text and key sensitivity
# ----------------------------------------------------------------------------------------


def test_watermarked_sequence_gets_a_tiny_pvalue_and_other_keys_do_not():
    seq = _race_generate([3, 4], 120, key="alice")
    for score, params in PARAMS.items():
        r = detect(seq, 2, "alice", window=2, score=score, **params)
        assert r.log_pvalue < -20, (score, r.log_pvalue)
        assert r.anlppt > 0.15
    # wrong window length or wrong key: no evidence (these p-values are single draws from
    # U(0,1); a failure below needs p < 1e-4: rate 1e-4 each)
    for key, m in (("bob", 2), ("alice", 3)):
        r = detect(seq, 2, key, window=m)
        assert r.log_pvalue > math.log(1e-4)


def test_key_sensitivity_pvalues_are_uniform():
    # 300 sequences watermarked with key "alice"; detection with key "bob" gives U(0,1)
    # p-values (KS test, false-failure rate 1e-3); detection with "alice" rejects them.
    # With a window of m = 2 the generator is a deterministic map of the last two tokens,
    # so a small vocabulary would make different sequences share (window, token) pairs and
    # hence pivots; 2,000 tokens and random prompts keep the 300 sequences nearly disjoint.
    rng = np.random.default_rng(4)
    prompts = rng.integers(0, 2000, size=(300, 2))
    seqs = [_race_generate(pr, 30, key="alice", vocab=2000) for pr in prompts]
    pairs = {(tuple(s[t - 2 : t]), s[t]) for s in seqs for t in range(2, s.size)}
    assert len(pairs) > 0.97 * 300 * 30  # a few trajectories merge (birthday collisions)
    b_wrong = detect_many(seqs, 2, "bob", window=2)
    assert stats.kstest(np.exp(b_wrong.log_pvalue), "uniform").pvalue > 1e-3
    b_right = detect_many(seqs, 2, "alice", window=2)
    assert np.median(b_right.log_pvalue) < math.log(1e-3)


def test_detects_speculative_decode_basic_uwm_output():
    # integration with the decoders: basic_uwm emits argmin_v E_v / p_v with the same keyed
    # clocks, so detect recovers exactly the decoder's pivots and a tiny p-value
    from specbound.sim import SyntheticLM, speculative_decode

    target = SyntheticLM(200, context_length=2, seed=5)
    res = speculative_decode(
        target, target, [1, 2, 3], "basic_uwm", key=99, max_new_tokens=80, seed=0,
        window=2,
    )
    r = detect(res.tokens, res.prompt_length, 99, window=2, dedup=False)
    assert np.allclose(r.pivots, res.pivots)
    assert r.log_pvalue < -10


def test_detect_takes_prompt_length_and_window_from_a_decode_result():
    from specbound.sim import SyntheticLM, speculative_decode

    target = SyntheticLM(200, context_length=2, seed=5)
    draft = target.draft(0.5, seed=6)
    for w in (None, 1, 3):
        res = speculative_decode(target, draft, [1, 2, 3], "mpfr", B=2, key="k", window=w,
                                 max_new_tokens=40, seed=1)
        ref = detect(res.tokens, res.prompt_length, "k", window=w)
        for r in (detect(res, "k"), detect(res, key="k"), detect(res, 3, "k"),
                  detect(res, "k", window=w)):
            assert (r.score, r.log_pvalue, r.n_scored) == (ref.score, ref.log_pvalue,
                                                            ref.n_scored)
            np.testing.assert_array_equal(r.positions, ref.positions)
        kp = keyed_pivots(res, "k", dedup=False)
        np.testing.assert_array_equal(kp.pivots, res.pivots)
        np.testing.assert_array_equal(kp.positions, np.arange(3, 43))
        # another window than the decoder's cannot be used silently
        other = 2 if w is None else None
        with pytest.raises(ValueError, match="window"):
            detect(res, "k", window=other)
        with pytest.raises(ValueError, match="window"):
            keyed_pivots(res, "k", window=other)
        with pytest.raises(ValueError, match="prompt_length"):
            detect(res, 2, "k")
    # detect_many on results: one window, keys and lengths from the results
    runs = [speculative_decode(target, draft, [i], "pfr", key="k", window=2,
                               max_new_tokens=10 + i, seed=i) for i in range(4)]
    b = detect_many(runs, "k")
    for i, run in enumerate(runs):
        assert b[i].score == detect(run, "k").score and b.n_scored[i] == b[i].n_scored
    with pytest.raises(ValueError, match="window"):
        detect_many(runs, "k", window=3)
    mixed = runs[:1] + [speculative_decode(target, draft, [1], "pfr", key="k", window=1,
                                           max_new_tokens=5)]
    with pytest.raises(ValueError, match="sequences"):
        detect_many(mixed, "k")
    with pytest.raises(ValueError, match="sequences"):
        detect_many([runs[0], runs[1].tokens], 1, "k")
    with pytest.raises(ValueError, match="prompt_length"):
        detect_many(runs, 1, "k")


def test_removed_aliases_are_refused():
    """The pre-release aliases are gone: ``context_length=`` (now ``window``) is an unknown
    keyword, and a ``Pivots`` is a batch of scored positions, not a ``(pivots, positions)``
    tuple."""
    tok = np.random.default_rng(7).integers(0, 300, size=30)
    # detect and detect_many take the score's parameters as keywords: a named ValueError
    with pytest.raises(ValueError, match="^context_length: unexpected parameter"):
        detect(tok, 2, "k", context_length=2)
    with pytest.raises(ValueError, match="^context_length: unexpected parameter"):
        detect_many([tok], 2, "k", context_length=2)
    with pytest.raises(TypeError, match="context_length"):
        keyed_pivots(tok, 2, "k", context_length=2)
    kp = keyed_pivots(tok, 2, "k", window=2)
    assert len(kp) == kp.pivots.size == kp.n_scored > 2
    assert kp[1] == {"pivots": kp.pivots[1], "positions": kp.positions[1]}


def test_batched_results_follow_the_result_batch_pattern():
    from specbound.results import ResultBatch
    from specbound.sim import Pivots

    rng = np.random.default_rng(8)
    seqs = [rng.integers(0, 500, size=n) for n in (12, 30, 3)]
    b = detect_many(seqs, 3, "k")
    assert isinstance(b, ResultBatch) and len(b) == 3
    for i, s in enumerate(seqs):
        r = detect(s, 3, "k")
        assert isinstance(b[i], DetectionResult)
        assert (b[i].score, b[i].log_pvalue, b[i].n_scored, b[i].score_name) == (
            r.score, r.log_pvalue, r.n_scored, "aaronson")
        np.testing.assert_array_equal(b[i].pivots, r.pivots)
    assert [x.n_scored for x in b] == [9, 27, 0]
    kp = keyed_pivots(seqs[1], 3, "k")
    assert isinstance(kp, Pivots) and isinstance(kp, ResultBatch)
    assert len(kp) == kp.n_scored == 27
    df = kp.to_frame()
    assert list(df.columns) == ["pivots", "positions"] and len(df) == 27
    np.testing.assert_array_equal(df["positions"], np.arange(3, 30))


def test_long_whole_prefix_sequence_is_linear_and_exact():
    # whole-prefix labels keep the hash state (no O(t) rehash per position): the pivots of a
    # 20,000-token text equal the per-position labels at sampled positions
    tok = np.random.default_rng(9).integers(0, 50_000, size=20_000)
    kp = keyed_pivots(tok, 0, "long")
    assert kp.n_scored == 20_000
    for t in (0, 1, 777, 19_999):
        u = prf_uniform(context_label("long", tok[:t]), tok[t], 0)
        assert kp.pivots[t] == u


# ----------------------------------------------------------------------------------------
# validation
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: detect([[1, 2], [3, 4]], 0, 1), "tokens"),
        (lambda: detect([1, -2, 3], 0, 1), "tokens"),
        (lambda: detect([1.5, 2.0], 0, 1), "tokens"),
        (lambda: detect([1, 2, 3], 4, 1), "prompt_length"),
        (lambda: detect([1, 2, 3], -1, 1), "prompt_length"),
        (lambda: detect([1, 2, 3], 0, 1.5), "key"),
        (lambda: detect([1, 2, 3], 0, 1, window=-1), "window"),
        (lambda: detect([1, 2, 3], 0, 1, window=1.5), "window"),
        (lambda: detect([1, 2, 3], None, 1), "prompt_length"),
        (lambda: detect([1, 2, 3], 0), "key"),
        (lambda: detect([1, 2, 3], 0, 1, dedup="no"), "dedup"),
        (lambda: detect_many([[1, 2]], 0, 1, dedup=1), "dedup"),
        (lambda: detect_many([[1, 2]], None, 1), "prompt_length"),
        (lambda: keyed_pivots([1, 2], 0, 1, dedup="yes"), "dedup"),
        (lambda: detect([1, 2, 3], 0, 1, score="kirchenbauer"), "score"),
        (lambda: detect([1, 2, 3], 0, 1, score="li"), "delta"),
        (lambda: detect([1, 2, 3], 0, 1, score="lattimore", epsilon=2.0), "epsilon"),
        (lambda: detect([1, 2, 3], 0, 1, gamma=0.5), "gamma"),
        (lambda: detect_many([], 0, 1), "sequences"),
        (lambda: detect_many([[1, 2], [3, 4]], [0, 0, 0], 1), "prompt_length"),
        (lambda: detect_many([[1, 2], [3, 4]], [0, 5], 1), "prompt_length"),
        (lambda: detect_many([[1, 2], [3, -4]], 0, 1), "sequences"),
        (lambda: keyed_pivots([1, 2], 0, None), "key"),
    ],
)
def test_validation_errors_name_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()
