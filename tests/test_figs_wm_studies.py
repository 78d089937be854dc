"""Tests of the watermark studies' settings (``paper_figs._wm_common``) and of the library
functions they rely on.

The generic quick-mode smoke test of the four figure modules lives in ``tests/test_figs_smoke.py``;
ROUGE-L and the standard errors in ``tests/test_sim_metrics.py``, the memoising model wrapper
in ``tests/test_sim_model_protocol.py``, the recorded decisions in ``tests/test_sim_decode.py``.
Here: the study settings, the detector's pivots of decoded sequences, the theory compensator
of AATPS (:func:`specbound.sim.acceptance_compensator`, against the exact enumeration of
``expected_block_tokens``), the resumable CSV store and the sweep runner, and the empirical
detection threshold.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd
import pytest

from paper_figs import _wm_common as wc
from paper_figs import wm_detection, wm_drafter_substitution
from specbound.sim import acceptance_compensator, keyed_pivots, mean_se, random_prompts
from specbound.sim.decode import expected_block_tokens, speculative_decode
from specbound.sim.models import MarkovLM, SyntheticLM

# ----------------------------------------------------------------------------- models, seeds


def test_make_models_drafters():
    s = wc.QUICK
    t0, d0 = wc.make_models(s, "D0")
    t1, d1 = wc.make_models(s, "D1")
    _, d2 = wc.make_models(s, "D2")
    _, d3 = wc.make_models(s, "D3")
    ctx = [1, 2]
    np.testing.assert_array_equal(t0.next_distribution(ctx), t1.next_distribution(ctx))
    assert d0.mismatch == s.mismatch and d1.mismatch == 0.2
    assert d2.temperature == 0.5 and d3.temperature == 1.5 and d0.temperature == 1.0
    # D2/D3 are D0 at another temperature: same logits, so the same argmax
    q0, q2, q3 = (d.next_distribution(ctx) for d in (d0, d2, d3))
    assert np.argmax(q0) == np.argmax(q2) == np.argmax(q3)
    h = [-(q * np.log(q)).sum() for q in (q2, q0, q3)]
    assert h[0] < h[1] < h[2]
    assert not np.allclose(t0.next_distribution(ctx), q0)


def test_make_models_rejects_unknown_drafter():
    with pytest.raises(ValueError, match="drafter"):
        wc.make_models(wc.QUICK, "D9")


def test_prompts_and_seeds_deterministic():
    s = wc.QUICK
    np.testing.assert_array_equal(s.prompt_set().tokens, s.prompt_set().tokens)
    P = s.prompt_set(50).tokens
    assert P.shape == (50, s.prompt_length) and P.min() >= 0 and P.max() < s.vocab_size
    a = [x.generate_state(2) for x in s.prompt_set().seeds]
    b = [x.generate_state(2) for x in s.prompt_set().seeds]
    np.testing.assert_array_equal(a, b)
    assert len(a) == s.n_prompts
    assert len({tuple(x) for x in a}) == len(a)  # distinct per prompt
    # the library function with the study seed: what the studies have always used
    ps = random_prompts(50, s.prompt_length, s.vocab_size, seed=s.run_seed)
    np.testing.assert_array_equal(ps.tokens, P)
    ref = np.random.default_rng(np.random.SeedSequence([s.run_seed, 0])).integers(
        0, s.vocab_size, size=(50, s.prompt_length), dtype=np.int64)
    np.testing.assert_array_equal(P, ref)
    ref_seeds = np.random.SeedSequence([s.run_seed, 1]).spawn(50)
    assert [x.generate_state(2).tolist() for x in ps.seeds] == [
        x.generate_state(2).tolist() for x in ref_seeds]


def _slow_square(x):
    import time

    time.sleep(0.02 * (3 - x))  # the first task finishes last
    return x * x


def test_study_map_keeps_the_order_of_its_arguments():
    assert wc.study_map(_slow_square, [0, 1, 2, 3], quick=True) == [0, 1, 4, 9]
    with ThreadPoolExecutor(2) as ex:
        assert wc.study_map(_slow_square, [0, 1, 2, 3], quick=False, executor=ex) == [0, 1, 4, 9]


def test_settings_signature_and_columns():
    s = wc.QUICK
    assert s.signature() == wc.Settings(**{**s.__dict__}).signature()
    assert wc.with_extra(s, L=4).signature() != s.signature()
    assert wc.with_extra(s, L=4).columns()["L"] == 4
    assert wc.FULL.signature() != wc.QUICK.signature()


# ----------------------------------------------------------------------------- pivots


@pytest.mark.parametrize("decoder, B", [("pfr", 1), ("mpfr", 3), ("mse", 1), ("basic_uwm", 1),
                                        ("mse_pseudo", 1)])
def test_keyed_pivots_match_decoder(decoder, B):
    t, d = wc.make_models(wc.QUICK)
    r = speculative_decode(t, d, [3, 1, 4], decoder, L=3, B=B, key="secret", max_new_tokens=25,
                           seed=5)
    U = keyed_pivots(r, "secret").pivots
    np.testing.assert_array_equal(U, r.pivots)
    assert np.all((U > 0) & (U < 1))
    # the studies' ANLPPT-U (theory.anlppt on the pivots) is the detector's
    from specbound.sim.detect import detect
    from specbound.theory.watermark import anlppt

    det = detect(r.tokens, r.prompt_length, "secret", score="u", method="chernoff")
    assert det.anlppt == pytest.approx(anlppt(U, "u", method="chernoff"), rel=1e-12)


def test_keyed_pivots_null_under_other_key():
    # text independent of the key -> pivots i.i.d. U(0,1).  Kolmogorov-Smirnov at
    # level 1e-4 on 2,000 pivots (false-failure probability 1e-4; fixed seed).
    from scipy import stats

    t, d = wc.make_models(wc.QUICK)
    U = []
    for i in range(20):
        r = speculative_decode(t, d, [i], "pfr", L=3, key="k1", max_new_tokens=100, seed=i)
        U.append(keyed_pivots(r, "another key").pivots)
    assert stats.kstest(np.concatenate(U), "uniform").pvalue > 1e-4


# ----------------------------------------------------------------------------- AATPS theory


def _markov_pair():
    return MarkovLM.random(4, seed=1), MarkovLM.random(4, seed=2)


def _compensated_block_mean(decoder, B, n, L=3):
    t, d = _markov_pair()
    res = [speculative_decode(t, d, [0], decoder, L=L, B=B, key=i, max_new_tokens=L + 1,
                              seed=i) for i in range(n)]
    c = acceptance_compensator(res, t, d)
    c = c[c["block"] == 0]  # the first block is a full block from the prompt
    assert len(c) == n
    est = c["emitted"] - c["accepted"] + c["predicted"]
    e, diff = mean_se(est), mean_se(c["accepted"] - c["predicted"])
    return (t, d), c, (e.mean, e.stderr), (diff.mean, diff.stderr)


@pytest.mark.parametrize("decoder, B", [("vsps", 1), ("pfr", 1), ("mpfr", 3)])
def test_compensator_matches_exact_block_tokens(decoder, B):
    # E[emitted - accepted + compensator] = E[emitted] = expected_block_tokens (exact
    # enumeration).  3,000 one-block runs (random keys / seeds); tolerance 4.5 standard errors:
    # false-failure probability 7e-6 (normal approximation), detects a bias of ~2%.
    (t, d), c, (m, se), _ = _compensated_block_mean(decoder, B, 3000)
    exact = expected_block_tokens(t, d, [0], decoder, L=3, B=B)
    assert abs(m - exact) < 4.5 * se, (m, se, exact)
    assert se < 0.015


@pytest.mark.slow
@pytest.mark.parametrize("decoder, B", [("vsps", 1), ("pfr", 1), ("pfr_nowm", 1), ("mws", 1),
                                        ("mse", 1), ("mse_pseudo", 1), ("mpfr", 2),
                                        ("mpfr", 4)])
def test_compensator_matches_exact_block_tokens_slow(decoder, B):
    # as above with 25,000 runs: 4.5 standard errors < 1% of the exact value (~2-3 tokens),
    # so a 1% bias is detected; false-failure probability 7e-6 per case.
    (t, d), c, (m, se), _ = _compensated_block_mean(decoder, B, 25_000)
    exact = expected_block_tokens(t, d, [0], decoder, L=3, B=B)
    assert abs(m - exact) < 4.5 * se, (m, se, exact)
    assert 4.5 * se < 0.01 * exact


@pytest.mark.slow
@pytest.mark.parametrize("B", [2, 4])
def test_compensator_unbiased_gls(B):
    # GLS has no exact block enumeration: check the martingale identity
    # E[accepted - compensator] = 0 with 25,000 blocks; |z| < 4.5 (false failure 7e-6);
    # 4.5 standard errors are < 1% of the block's mean emitted tokens (the AATPS).
    _, c, _, (m, se) = _compensated_block_mean("invariant", B, 25_000)
    assert abs(m) < 4.5 * se
    assert 4.5 * se < 0.01 * c["emitted"].mean()


def test_compensator_gls_smoke():
    # fast check of the GLS path (nu > 1 uses the quadrature) on a few blocks: |z| < 4.5
    # (false-failure probability 7e-6, fixed seeds)
    _, c, _, (m, se) = _compensated_block_mean("invariant", 3, 400)
    assert abs(m) < 4.5 * se
    assert (c["predicted"] <= c["n_decisions"] + 1e-12).all() and (c["predicted"] >= 0).all()


def test_compensator_restricted_blocks():
    t, d = wc.make_models(wc.QUICK)
    r = speculative_decode(t, d, [1, 2], "pfr", L=2, key="k", max_new_tokens=20, seed=0)
    full = acceptance_compensator([r], t, d)
    part = acceptance_compensator([r], t, d, blocks={(0, 0), (0, 2)})
    assert list(part["block"]) == [0, 2]
    pd.testing.assert_frame_equal(part.reset_index(drop=True),
                                  full.iloc[[0, 2]].reset_index(drop=True))
    # B = 1: a_first is the exponential-race acceptance of the block's first context
    from specbound.theory import exact_acceptance

    a0 = exact_acceptance(t.next_distribution(r.tokens[:2]), d.next_distribution(r.tokens[:2]),
                          "exp_race")
    assert full["a_first"].iloc[0] == pytest.approx(a0, rel=1e-12)


# ----------------------------------------------------------------------------- resumable CSV


def test_resumable_csv_roundtrip(tmp_path):
    path = tmp_path / "x.csv"
    st_ = wc.ResumableCSV(path, "sig1")
    assert not st_.done("a")
    st_.append("a", [{"v": 1.5, "name": "p"}, {"v": 0.1 + 0.2, "name": "q"}])
    st_.append("b", [{"v": 2.0, "name": "r", "extra": 7}])  # new column: header rewritten
    df = st_.frame()
    assert list(df["config"]) == ["a", "a", "b"]
    assert df["v"].iloc[1] == 0.1 + 0.2  # full float precision
    assert math.isnan(df["extra"].iloc[0]) and df["extra"].iloc[2] == 7
    again = wc.ResumableCSV(path, "sig1")
    assert again.done("a") and again.done("b") and not again.done("c")
    other = wc.ResumableCSV(path, "sig2")  # other settings: stale rows are dropped
    assert not other.done("a")
    assert len(pd.read_csv(path)) == 0


def test_resumable_csv_incomplete_config_is_redone(tmp_path):
    path = tmp_path / "x.csv"
    st_ = wc.ResumableCSV(path, "s")
    st_.append("a", [{"v": 1}, {"v": 2}])
    st_.append("b", [{"v": 3}, {"v": 4}])
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:-1]) + "\n")  # an interrupted write lost b's last row
    # ... and b's record (the store's truth, specbound.sweep) was torn too: a CSV row alone
    # is restored from its record, a torn record is recomputed
    rec_b = sorted((tmp_path / ".x.csv.sweep" / "records").glob("*.json"))[-1]
    rec_b.write_bytes(rec_b.read_bytes()[:-5])
    again = wc.ResumableCSV(path, "s")
    assert again.done("a") and not again.done("b")
    assert list(again.frame()["config"]) == ["a", "a"]


def test_resumable_csv_na_like_strings(tmp_path):
    path = tmp_path / "x.csv"
    st_ = wc.ResumableCSV(path, "s")
    st_.append("null", [{"name": "NA", "v": float("nan"), "w": 1.0}])
    again = wc.ResumableCSV(path, "s")
    assert again.done("null")
    df = again.frame()
    assert df["config"].iloc[0] == "null" and df["name"].iloc[0] == "NA"
    assert math.isnan(df["v"].iloc[0]) and df["w"].dtype == np.float64
    for bad in ("", "nan", 3):
        with pytest.raises(ValueError, match="config"):
            st_.append(bad, [{"v": 1}])


def test_resumable_csv_garbage_file(tmp_path):
    path = tmp_path / "x.csv"
    path.write_text("not,a\nsweep,file\n")
    st_ = wc.ResumableCSV(path, "s")
    assert not path.exists() and not st_.done("not")


def _square_worker(x):
    return [{"x": x, "y": x * x}]


@pytest.mark.parametrize("use_executor", [False, True])
def test_run_sweep_resumes(tmp_path, use_executor):
    calls = []

    def worker(x):
        calls.append(x)
        return _square_worker(x)

    path = tmp_path / "s.csv"
    ex = ThreadPoolExecutor(2) if use_executor else None
    try:
        df = wc.run_sweep([(f"c{i}", i) for i in range(3)], worker, wc.ResumableCSV(path, "s"),
                          executor=ex, progress=False)
        assert sorted(df["y"]) == [0, 1, 4] and sorted(calls) == [0, 1, 2]
        calls.clear()
        df = wc.run_sweep([(f"c{i}", i) for i in range(5)], worker, wc.ResumableCSV(path, "s"),
                          executor=ex, progress=False)
    finally:
        if ex is not None:
            ex.shutdown()
    assert sorted(calls) == [3, 4]  # only the new configurations ran
    assert sorted(df["y"]) == [0, 1, 4, 9, 16]


# ----------------------------------------------------------------------------- detection


def test_empirical_threshold_rule_and_tpr_at_fpr():
    from specbound.theory.watermark import tpr_at_fpr

    rng = np.random.default_rng(11)
    U0 = rng.random((10_000, 6))
    U1 = rng.random((300, 6)) ** 0.5  # pivots piled towards 1
    for score in ("aaronson", "u"):
        S0 = wm_detection.cumulative_scores(U0, score)
        S1 = wm_detection.cumulative_scores(U1, score)
        for T in (1, 3, 6):
            thr = wm_detection.empirical_threshold(S0[:, T - 1], 0.01)
            assert np.mean(S0[:, T - 1] > thr) <= 0.01
            ref = tpr_at_fpr(U1, [T], score=score, U_null=U0)
            assert ref["threshold"].iloc[0] == pytest.approx(thr, rel=1e-12)
            assert ref["tpr"].iloc[0] == pytest.approx(np.mean(S1[:, T - 1] > thr))
        # exact Gamma / Irwin-Hall threshold
        thr_exact = wm_detection.exact_threshold(4, score)
        ref = tpr_at_fpr(U1, [4], score=score)
        assert ref["threshold"].iloc[0] == pytest.approx(thr_exact, rel=1e-10)


def test_drafter_substitution_quick_content(tmp_path):
    df = wm_drafter_substitution.compute(tmp_path, quick=True, progress=False)
    every = df[df["row_type"] == "summary"].set_index(["decoder", "variant"])
    summ = every.xs("default", level="variant")
    # the paper's settings side by side with the defaults: fresh randomness breaks the
    # seeded PFR-NOWM's drafter invariance; He et al.'s coin detector row is there
    assert every.loc[("pfr_nowm", "fresh"), "rouge_l_minpair"] < 1.0
    assert ("mse_pseudo", "keyed_residual_coin") in every.index
    for d in ("basic_uwm", "pfr", "mws", "mpfr", "pfr_nowm"):
        assert summ.loc[d, "rouge_l_minpair"] == 1.0
        assert summ.loc[d, "identical_fraction"] == 1.0
    for d in ("pfr", "mpfr", "basic_uwm"):
        assert summ.loc[d, "tpr_drift_T4"] == 0.0
    for d in ("vsps", "invariant", "mse"):
        assert summ.loc[d, "rouge_l_minpair"] < 1.0
    table = wm_drafter_substitution.table(df)
    assert "| PFR | 1.000 ± 0.000 |" in table


def test_detection_acceptance_quick_content(tmp_path):
    # the acceptance sweep of wm_detection in quick mode: one row per drafter noise level,
    # decoder/detector and T_eval; deterministic (fixed prompts, seeds and key)
    df = wm_detection.compute_acceptance(tmp_path, quick=True, progress=False)
    s = wm_detection.acceptance_settings(True)
    Ts = wm_detection.ACC_T_QUICK
    assert len(df) == len(wm_detection.ACC_NOISE) * 3 * len(Ts)
    for m in wm_detection.ACC_METRICS:
        assert {m, f"{m}_se"} <= set(df.columns)
    assert {"noise", "acceptance", "acceptance_se", "label", "detector", "T_eval",
            "threshold"} <= set(df.columns)
    # only the drafter varies: the realised acceptance falls as its noise grows
    acc = df[df["label"] == "mse"].groupby("noise")["acceptance"].first()
    assert acc.is_monotonic_decreasing and acc.iloc[0] > 0.8 and acc.iloc[-1] < 0.35
    for T in Ts:
        assert (df.loc[df["T_eval"] == T, "threshold"] ==
                wm_detection.exact_threshold(T, "aaronson")).all()
    # MSE's misrouted positions are its rejections: at T = all tokens, the share equals
    # (decisions - accepted) / tokens from the same per-prompt counts
    stats = wc.load_prompt_stats(tmp_path, wm_detection.NAME_ACC, s.signature())
    for noise in wm_detection.ACC_NOISE:
        st = stats[f"noise={noise:g}/mse"]
        rej = (st["acc_den"] - st["acc_num"]) / (s.n_seeds * s.max_new_tokens)
        got = stats[f"noise={noise:g}/mse:tokens"][f"misrouted_share@{s.max_new_tokens}"]
        np.testing.assert_allclose(got, rej, rtol=0, atol=1e-12)
    # comparisons: per-level gains are the differences of the rows, and trend rows exist
    cmp = pd.read_csv(tmp_path / "wm_detection_acceptance_comparisons.csv")
    lv = cmp[(cmp["comparison"] == "coin-tokens") & (cmp["step"] == "level")]
    assert len(lv) == len(wm_detection.ACC_NOISE) * len(wm_detection.ACC_METRICS) * len(Ts)
    r = lv[(lv["metric"] == "score_per_token") & (lv["T_eval"] == Ts[-1])
           & (lv["noise"] == 0.9)].iloc[0]
    sel = df[(df["noise"] == 0.9) & (df["T_eval"] == Ts[-1])
             & (df["label"] == "mse_pseudo_keyed")].set_index("detector")
    assert r["diff"] == pytest.approx(sel.at["coin", "score_per_token"]
                                      - sel.at["tokens", "score_per_token"], abs=1e-9)
    end = cmp[(cmp["comparison"] == "trend:coin-tokens") & (cmp["step"] == "end")]
    assert len(end) == len(wm_detection.ACC_METRICS) * len(Ts)
    assert (end["acceptance_a"] < end["acceptance_b"]).all()
    # a second call resumes: nothing is recomputed, the rows are the same
    again = wm_detection.compute_acceptance(tmp_path, quick=True, progress=False)
    pd.testing.assert_frame_equal(again.reset_index(drop=True), df.reset_index(drop=True))
    table = wm_detection.acceptance_table(df, cmp)
    assert "## misrouted share" in table and "| 0.9 |" in table


def test_synthetic_entropy_in_range():
    # the studies' target: mean next-token entropy 2-3 nats
    t, _ = wc.make_models(wc.FULL)
    assert isinstance(t, SyntheticLM) and t.vocab_size == 1000
    assert 2.0 < t.mean_entropy(n_contexts=200, seed=wc.FULL.run_seed) < 3.0


def test_default_parameters_leave_the_settings_unchanged():
    """Each study's parameter table gives the settings of earlier versions exactly (same
    signatures: stored full runs resume, outputs unchanged); a non-default value changes
    the signature."""
    from dataclasses import replace

    old = {
        wm_detection.settings: lambda q: wc.with_extra(
            replace(wc.QUICK, n_prompts=12) if q else wc.FULL, L=4, B_mpfr=4,
            n_null_texts=20 if q else 200, n_null_keys=5 if q else 50, coin_threshold=0.5),
        wm_detection.acceptance_settings: lambda q: wc.with_extra(
            replace(wc.QUICK, n_prompts=12) if q else replace(wc.FULL, max_new_tokens=32),
            L=4, coin_threshold=0.5, noise_levels=(0.1, 0.2, 0.3, 0.5, 0.9),
            acc_t_eval=(4, 8, 12) if q else (4, 8, 16, 32)),
        wm_drafter_substitution.settings: lambda q: wc.with_extra(
            wc.QUICK if q else replace(wc.FULL, n_prompts=500, n_seeds=1), L=4, B_multi=4,
            coin_threshold=0.5),
    }
    from paper_figs import fidelity_entropy, wm_multidraft_scaling, wm_single_draft_frontier

    old[wm_multidraft_scaling.settings] = lambda q: wc.with_extra(
        wc.QUICK if q else wc.FULL, L=4, theory_blocks_invariant=5,
        n_theory_prompts=4 if q else 50)
    old[wm_single_draft_frontier.settings] = lambda q: wc.with_extra(
        wc.QUICK if q else wc.FULL, n_theory_prompts=4 if q else 50,
        n_hh_prompts=4 if q else 500)
    old[fidelity_entropy.config] = lambda q: fidelity_entropy.QUICK if q else (
        fidelity_entropy.FULL)
    for make, ref in old.items():
        for q in (True, False):
            assert make(q) == ref(q)
            if hasattr(ref(q), "signature"):
                assert make(q).signature() == ref(q).signature()
    assert wm_detection.settings(True, T="1,2").signature() != wm_detection.settings(
        True).signature()
    assert wm_detection.t_values(wm_detection.settings(True, T="1,2")) == (1, 2)
    assert wm_detection.t_values(wm_detection.settings(True)) == wm_detection.T_QUICK
    # (at least the quick budgets' 12 tokens: a budget above the tokens is refused)
    s = wm_drafter_substitution.settings(True, prompts=3, seeds=1, vocab=50, tokens=20)
    assert (s.n_prompts, s.n_seeds, s.vocab_size, s.max_new_tokens) == (3, 1, 50, 20)
