"""Monte Carlo estimators: exactness of every lossless sampler, agreement with theory,
determinism across thread counts, validation.

Statistical tests use fixed seeds (so they are deterministic); each states the probability
that it would fail by chance for an arbitrary seed (its false-failure rate).
"""

from __future__ import annotations

import numba
import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from specbound import theory
from specbound.results import EstimateBatch, proportion_ci
from specbound.sim import SAMPLERS, Estimate, estimate_acceptance, sample_emitted, spectr_rho
from tests._stats import (
    FAILURE_RATE,
    assert_binom_at_least,
    assert_binom_close,
    assert_gof,
    assert_not_gof,
    bonferroni,
)

LOSSLESS = SAMPLERS  # every sampler scheme is lossless
# overall false-failure rate of test_emitted_follow_p_and_drafts_follow_q: FAILURE_RATE (1e-4)
# over 2 comparisons x 20 pairs x every scheme
GOF_ALPHA = bonferroni(len(LOSSLESS) * 20 * 2, FAILURE_RATE)


def _pairs(seed, count=20, max_n=64, abs_cont=False):
    """Random pairs: dense, sparse (zeros in p and q), skewed, Zipf, one-hot, near-equal."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(count):
        n = int(rng.integers(2, max_n + 1))
        kind = k % 5
        if kind == 0:
            p, q = rng.dirichlet(np.ones(n)), rng.dirichlet(np.ones(n))
        elif kind == 1:  # sparse
            p, q = rng.dirichlet(np.full(n, 0.5)), rng.dirichlet(np.full(n, 0.5))
            p[rng.permutation(n)[: n // 2]] = 0.0
            q[rng.permutation(n)[: n // 3]] = 0.0
            if p.sum() == 0:
                p[0] = 1.0
            if q.sum() == 0:
                q[-1] = 1.0
        elif kind == 2:  # skewed
            p = rng.dirichlet(np.ones(n)) ** 4
            q = rng.dirichlet(np.ones(n)) ** 2
        elif kind == 3:  # Zipf target, tempered draft
            p = rng.permutation(1.0 / np.arange(1, n + 1) ** 1.2)
            q = p ** 0.5
        else:  # near-equal pair
            p = rng.dirichlet(np.full(n, 2.0))
            q = np.abs(p + 0.02 * rng.standard_normal(n) / n)
        p, q = p / p.sum(), q / q.sum()
        if abs_cont:
            q = 0.85 * q + 0.15 * p
            q = q / q.sum()
        out.append((p, q))
    return out


def _B_for(scheme, k):
    return 1 if scheme in ("sd", "exp_race") else (2, 3, 4)[k % 3]


@pytest.mark.parametrize("scheme", LOSSLESS)
def test_emitted_follow_p_and_drafts_follow_q(scheme):
    """Chi-square GOF (cells with expected count < 5 pooled) on 20 pairs, n = 200,000 each.

    Emitted tokens against p; drafts (all B columns pooled: i.i.d. q within a trial for every
    scheme) against q.  False-failure rate: 2 x 20 comparisons per scheme x 8 schemes at the
    Bonferroni level 1e-4 / 320, so all parametrized cases together fail by chance with
    probability <= 1e-4.  At n = 200,000 moving 1% of the mass between two cells of
    probability >= 0.05 gives a noncentrality >= 40 and is caught (see
    test_gof_catches_one_percent_bias).
    """
    pairs = _pairs(100, abs_cont=scheme == "mpfr_scan")
    for k, (p, q) in enumerate(pairs):
        B = _B_for(scheme, k)
        y, x = sample_emitted(p, q, scheme, B, n=200_000, seed=k, return_drafts=True)
        assert_gof(np.bincount(y, minlength=p.size), p, alpha=GOF_ALPHA,
                   label=f"{scheme} pair {k} emitted")
        assert_gof(np.bincount(x.ravel(), minlength=q.size), q, alpha=GOF_ALPHA,
                   label=f"{scheme} pair {k} drafts")


def test_gof_catches_one_percent_bias():
    """The exactness test's procedure rejects a sampler whose law is off by 1% of mass.

    Tokens of an exact sampler are tested against p' = p with 0.01 of mass moved from the
    largest cell to the second largest.  Fails only if the (fixed-seed) test lacks power;
    the null control fails by chance with probability GOF_ALPHA (< 1e-4).
    """
    p = np.array([0.3, 0.25, 0.2, 0.15, 0.1])
    y = sample_emitted(p, p[::-1], "mpfr", 3, n=200_000, seed=1)
    biased = p.copy()
    biased[0] -= 0.01
    biased[1] += 0.01
    assert_not_gof(np.bincount(y, minlength=5), biased, below=GOF_ALPHA)
    assert_gof(np.bincount(y, minlength=5), p, alpha=GOF_ALPHA)


@pytest.mark.slow
@pytest.mark.parametrize("scheme", LOSSLESS)
def test_emitted_follow_p_large_vocab(scheme):
    """As above on 20 pairs with vocabularies up to 300 and B up to 8 (rate <= 1e-4 overall)."""
    pairs = _pairs(200, max_n=300, abs_cont=scheme == "mpfr_scan")
    for k, (p, q) in enumerate(pairs):
        B = 1 if scheme in ("sd", "exp_race") else (2, 5, 8)[k % 3]
        y, x = sample_emitted(p, q, scheme, B, n=200_000, seed=k, return_drafts=True)
        assert_gof(np.bincount(y, minlength=p.size), p, alpha=GOF_ALPHA,
                   label=f"{scheme} pair {k} emitted")
        assert_gof(np.bincount(x.ravel(), minlength=q.size), q, alpha=GOF_ALPHA,
                   label=f"{scheme} pair {k} drafts")


# --------------------------------------------------------------------------- theory


# Acceptance counts against exact values: |successes - n a| <= 5 sqrt(n a (1-a)) + 5 counts
# (tests._stats.assert_binom_close).  The 5-count slack covers the Poisson regime a ~ 0 or 1
# where the normal approximation fails; per comparison the chance failure probability is
# <= ~6e-7 (FIVE_SIGMA_RATE), and half that for the one-sided checks against lower bounds.
N_THEORY = 100_000
SLACK = 5


def test_sd_and_exp_race_match_theory():
    """40 comparisons, false-failure rate <= 40 x 6e-7 < 1e-4."""
    P, Q = _stack(_pairs(7))
    for scheme in ("sd", "exp_race"):
        df = estimate_acceptance(P, Q, scheme, 1, n=N_THEORY, seed=3)
        assert_binom_close(df.successes, N_THEORY, theory.exact_acceptance(P, Q, scheme, 1),
                           slack=SLACK, label=scheme)
    # exp race is drafter-invariant and beats the no-communication limit (1-TV)/(1+TV)
    assert_binom_at_least(df.successes, N_THEORY, theory.no_communication_limit(P, Q),
                          slack=SLACK, label="exp_race vs (1-TV)/(1+TV)")


def _stack(pairs):
    # pairs have different vocabulary sizes: pad with zeros to a common size
    n = max(p.size for p, _ in pairs)
    P = np.zeros((len(pairs), n))
    Q = np.zeros((len(pairs), n))
    for i, (p, q) in enumerate(pairs):
        P[i, : p.size] = p
        Q[i, : q.size] = q
    return P, Q


def _alpha_local(p, q):
    """alpha_i = p_i sum_j (q_j/q_i - p_j/p_i)+ with the zero-support limits (Liu, Wan, Gao &
    Gündüz 2026, arXiv:2609.21858, App. B)."""
    out = np.zeros(p.size)
    for i in range(p.size):
        if p[i] == 0:
            continue
        if q[i] == 0:
            out[i] = np.inf
            continue
        out[i] = p[i] * np.maximum(q / q[i] - p / p[i], 0).sum()
    return out


def test_local_closed_forms_agree_with_theory_module():
    P, Q = _stack(_pairs(7))
    for p, q in zip(P, Q, strict=True):
        a = _alpha_local(p, q)
        with np.errstate(invalid="ignore"):
            r = np.where(np.isinf(a), 1.0, a / (1 + a))
        for B in (1, 2, 4, 8):
            assert np.isclose(theory.exact_acceptance(p, q, "mpfr", B), 1 - np.sum(p * r ** B))
        assert np.isclose(theory.exact_acceptance(p, q, "exp_race", 1), np.sum(p * (1 - r)))
        assert np.isclose(theory.exact_acceptance(p, q, "sd", 1), np.minimum(p, q).sum())


def test_mpfr_matches_pml_exactly():
    """MPFR acceptance = PML (exact for Alg. 6 of arXiv:2609.21858) for B = 1, 2, 4, 8, and
    >= PML-weak, LML.

    80 two-sided comparisons and 160 one-sided ones that hold with margin (a bound <= the
    exact value), false-failure rate <= 80 x 6e-7 + 160 x 3e-7 < 1e-4.
    """
    P, Q = _stack(_pairs(8))
    for B in (1, 2, 4, 8):
        df = estimate_acceptance(P, Q, "mpfr", B, n=N_THEORY, seed=B)
        exact = theory.exact_acceptance(P, Q, "mpfr", B)
        assert np.allclose(exact, theory.pml_bound(P, Q, B))
        assert_binom_close(df.successes, N_THEORY, exact, slack=SLACK, label=f"mpfr B={B}")
        # Thm 5.1 (PML-weak) and Rowan's LML are lower bounds of the MPFR acceptance
        for bound in (theory.pml_weak_bound(P, Q, B), theory.lml_bound(P, Q, B)):
            assert_binom_at_least(df.successes, N_THEORY, bound, slack=SLACK, label=f"B={B}")


def test_mpfr_scan_matches_pml_exactly():
    """Proposal-scanning MPFR (Alg. 5 of arXiv:2609.21858) has the acceptance of Alg. 6.

    The scan's candidates form a unit-rate Poisson process with i.i.d. marks Z ~ q, i.e. the
    superposition of the rate-q_u processes G_{u,j}/q_u of the token clocks, and its target
    score T/r(Z) is the token clock's G_{u,1}/p_u on the first arrival of each mark
    (docs/mathematics.md §1.8): the joint law of (Y, drafts) is that of Alg. 6, so the
    acceptance is the PML expression for every p << q.  40 comparisons (20 pairs x B = 2, 4),
    false-failure rate <= 40 x 6e-7 < 1e-4.
    """
    P, Q = _stack(_pairs(12, abs_cont=True))
    for B in (2, 4):
        df = estimate_acceptance(P, Q, "mpfr_scan", B, n=N_THEORY, seed=40 + B)
        assert_binom_close(df.successes, N_THEORY, theory.pml_bound(P, Q, B), slack=SLACK,
                           label=f"mpfr_scan B={B}")


def test_gls_matches_theory_and_beats_lml():
    """GLS (B = 2, 4) vs the exact quadrature (40 comparisons) and >= LML (40 one-sided).

    False-failure rate <= 80 x 6e-7 < 1e-4.
    """
    P, Q = _stack(_pairs(9))
    for B in (2, 4):
        df = estimate_acceptance(P, Q, "gls", B, n=N_THEORY, seed=10 + B)
        assert_binom_close(df.successes, N_THEORY, theory.exact_acceptance(P, Q, "gls", B),
                           slack=SLACK, label=f"gls B={B}")
        assert_binom_at_least(df.successes, N_THEORY, theory.lml_bound(P, Q, B), slack=SLACK,
                              label=f"gls B={B} vs LML")


def _specinfer_exact(p, q, B):
    cur, rej = p.copy(), 1.0
    for _ in range(B):
        rej *= np.maximum(q - cur, 0).sum()
        r = np.maximum(cur - q, 0)
        cur = r / r.sum() if r.sum() > 0 else cur
    return 1 - rej


def test_specinfer_and_spectr_match_their_closed_forms():
    """specinfer 1 - prod_j TV(p_j, q); spectr 1 - (1 - beta(rho))^B; B = 2, 4.

    80 comparisons, false-failure rate < 1e-4.
    """
    P, Q = _stack(_pairs(10))
    for B in (2, 4):
        df = estimate_acceptance(P, Q, "specinfer", B, n=N_THEORY, seed=20 + B)
        exact = [_specinfer_exact(p, q, B) for p, q in zip(P, Q, strict=True)]
        assert_binom_close(df.successes, N_THEORY, exact, slack=SLACK, label=f"specinfer B={B}")
        rho = spectr_rho(P, Q, B)
        beta = np.minimum(Q, P / rho[:, None]).sum(axis=1)
        df = estimate_acceptance(P, Q, "spectr", B, n=N_THEORY, seed=30 + B)
        assert_binom_close(df.successes, N_THEORY, 1 - (1 - beta) ** B, slack=SLACK,
                           label=f"spectr B={B}")


# --------------------------------------------------------------------------- determinism


def test_same_seed_same_output_and_thread_count_independence():
    P, Q = _stack(_pairs(11, count=6))
    old = numba.get_num_threads()
    try:
        for scheme, B in (("mpfr", 4), ("gls", 3), ("sd", 1), ("spectr", 3)):
            numba.set_num_threads(1)
            y1, x1 = sample_emitted(P, Q, scheme, B, n=5000, seed=9, return_drafts=True)
            e1 = estimate_acceptance(P, Q, scheme, B, n=5000, seed=9)
            numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
            y2, x2 = sample_emitted(P, Q, scheme, B, n=5000, seed=9, return_drafts=True)
            e2 = estimate_acceptance(P, Q, scheme, B, n=5000, seed=9)
            assert np.array_equal(y1, y2) and np.array_equal(x1, x2)
            pd.testing.assert_frame_equal(e1.to_frame(), e2.to_frame())
            y3 = sample_emitted(P, Q, scheme, B, n=5000, seed=10)
            assert not np.array_equal(y1, y3)
    finally:
        numba.set_num_threads(old)


def test_estimate_and_samples_describe_the_same_trials():
    p = np.array([0.5, 0.3, 0.2, 0.0])
    q = np.array([0.1, 0.2, 0.3, 0.4])
    for scheme in LOSSLESS:
        if scheme == "mpfr_scan":
            q2 = 0.5 * q + 0.5 * p
        else:
            q2 = q
        B = 1 if scheme in ("sd", "exp_race") else 3
        y, x = sample_emitted(p, q2, scheme, B, n=3000, seed=4, return_drafts=True)
        est = estimate_acceptance(p, q2, scheme, B, n=3000, seed=4)
        assert est.successes == int(np.sum(np.any(x == y[:, None], axis=1)))
        assert isinstance(est, Estimate) and est.n == 3000
        # a 1-D pair is row 0 of a batch
        yb = sample_emitted(np.stack([p, p]), q2, scheme, B, n=3000, seed=4)
        assert np.array_equal(yb[0], y)
    a = sample_emitted(p, q, "mpfr", 5, n=4000, seed=2, return_drafts=True)
    b = sample_emitted(p, q, "mpfr_direct", 5, n=4000, seed=2, return_drafts=True)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])


@given(st.integers(1, 10_000), st.data(), st.sampled_from([0.5, 0.9, 0.95, 0.99, 0.999999]),
       st.sampled_from(["wilson", "exact"]))
def test_proportion_ci_equals_scipy(n, data, level, method):
    """The one interval helper equals scipy's ``BinomTestResult.proportion_ci`` (Wilson 1927
    score interval without continuity correction; Clopper-Pearson 1934), also vectorised."""
    k = data.draw(st.integers(0, n))
    ref = stats.binomtest(k, n).proportion_ci(level, method)
    got = proportion_ci(k, n, level, method)
    assert got.low == pytest.approx(ref.low, rel=1e-9, abs=1e-12)
    assert got.high == pytest.approx(ref.high, rel=1e-9, abs=1e-12)
    both = proportion_ci(np.array([k, n - k]), n, level, method)
    assert both.low[0] == got.low and both.high[0] == got.high
    ref2 = stats.binomtest(n - k, n).proportion_ci(level, method)
    assert both.low[1] == pytest.approx(ref2.low, rel=1e-9, abs=1e-12)


def test_batch_result_frame_columns_and_intervals():
    P, Q = _stack(_pairs(12, count=3))
    batch = estimate_acceptance(P, Q, "mpfr", 2, n=2000, seed=0)
    assert isinstance(batch, EstimateBatch) and len(batch) == 3
    df = batch.to_frame()
    assert list(df.columns) == ["mean", "stderr", "n", "successes", "ci_low", "ci_high"]
    for i in range(3):
        assert batch[i] == Estimate.from_successes(int(df.successes[i]), 2000)
    ci = batch.ci()
    np.testing.assert_array_equal(ci.low, df.ci_low)
    np.testing.assert_array_equal(ci.high, df.ci_high)
    with pytest.raises(TypeError, match="integers"):  # a column is batch.to_frame()["mean"]
        batch["mean"]
    for i in range(3):
        e = Estimate.from_successes(int(df.successes[i]), 2000)
        ci = e.ci()
        assert np.isclose(df.ci_low[i], ci.low) and np.isclose(df.ci_high[i], ci.high)
        assert np.isclose(df.stderr[i], e.stderr) and df["mean"][i] == e.mean
    one = estimate_acceptance(P[0], Q[0], "mpfr", 2, n=2000, seed=0)
    assert one.successes == df.successes[0]
    assert one.ci(0.99, method="exact").low <= one.mean <= one.ci(0.99, method="exact").high


def test_identical_pair_always_accepts():
    p = np.array([0.2, 0.0, 0.8])
    for scheme in LOSSLESS:
        B = 1 if scheme in ("sd", "exp_race") else 2
        assert estimate_acceptance(p, p, scheme, B, n=2000).mean == 1.0


def test_estimator_validation_errors():
    p = np.array([0.5, 0.5])
    with pytest.raises(ValueError, match="scheme"):
        estimate_acceptance(p, p, "bogus")
    with pytest.raises(ValueError, match="B"):
        estimate_acceptance(p, p, "sd", B=4)
    with pytest.raises(ValueError, match="B"):
        estimate_acceptance(p, p, "gls", B=0)
    with pytest.raises(ValueError, match="^n"):
        estimate_acceptance(p, p, "mpfr", n=0)
    with pytest.raises(ValueError, match="^n"):
        sample_emitted(p, p, "mpfr", n=2.5)
    with pytest.raises(ValueError, match="seed"):
        estimate_acceptance(p, p, "mpfr", seed=-1)
    with pytest.raises(ValueError, match="^q"):
        estimate_acceptance(p, [0.3, 0.3, 0.4], "mpfr")
    with pytest.raises(ValueError, match="^p"):
        estimate_acceptance([0.5, np.nan], p, "mpfr")
    with pytest.raises(ValueError, match="^q"):
        estimate_acceptance(p, [1.0, 0.0], "mpfr_scan", B=2)
    with pytest.raises(ValueError, match="^w"):
        estimate_acceptance(p, p, "gls", B=2, w=0.1)
    with pytest.raises(ValueError, match="return_drafts"):
        sample_emitted(p, p, "mpfr", n=10, return_drafts="yes")


@pytest.mark.kernel
def test_batch_kernel_trials_match_the_reference():
    """Trial t of chunk c of sample_emitted is the NumPy reference run on the keyed clocks of
    label trial_label(chunk_label[c], t), chunk labels from SeedSequence(seed).spawn."""
    from specbound.sim import _reference as R
    from specbound.sim.montecarlo import CHUNK, _chunks
    from specbound.sim.samplers import clock_shape

    sample_step_reference = R.sample_step

    p = np.array([0.05, 0.0, 0.4, 0.25, 0.3])
    q = np.array([0.3, 0.2, 0.1, 0.0, 0.4])
    n = 2 * CHUNK + 7
    for scheme in LOSSLESS:
        q2 = 0.5 * q + 0.5 * p if scheme == "mpfr_scan" else q
        B = 1 if scheme in ("sd", "exp_race") else 3
        y, x = sample_emitted(p, q2, scheme, B, n=n, seed=21, return_drafts=True)
        pair, start, length, labels = _chunks(1, n, np.random.SeedSequence(21))
        for c, t in ((0, 0), (0, 1), (1, CHUNK - 1), (2, 0), (2, 6)):
            lab = R.trial_label(labels[c], t)
            rows, cols = clock_shape(scheme, p.size, B, scan_rows=5000)
            ry, rx, _ = sample_step_reference(p, q2, scheme, B, R.clock_table(lab, rows, cols))
            assert y[start[c] + t] == ry and np.array_equal(x[start[c] + t], rx), (scheme, c, t)


# --------------------------------------------------------------------------- names and limits


def test_seed_is_keyword_only():
    p = np.array([0.5, 0.3, 0.2])
    q = np.array([0.2, 0.3, 0.5])
    with pytest.raises(TypeError, match="positional"):
        estimate_acceptance(p, q, "mpfr", 2, 3000, 5)
    with pytest.raises(TypeError, match="positional"):
        sample_emitted(p, q, "mpfr", 2, 3000, 5)
    # the default seed is 0 in both
    assert estimate_acceptance(p, q, "sd", n=500) == estimate_acceptance(p, q, "sd", n=500,
                                                                          seed=0)


@pytest.mark.parametrize("scheme", ["mpfr", "mpfr_direct", "gls", "mpfr_scan"])
@pytest.mark.parametrize("B", [2**62, 10**20])
def test_huge_B_raises_a_value_error_naming_B(scheme, B):
    """Before: SystemError inside the Numba kernel (2**62), OverflowError (10**20)."""
    with pytest.raises(ValueError, match=r"^B: at most 1,048,576 drafts"):
        estimate_acceptance([0.5, 0.5], [0.2, 0.8], scheme, B, n=10)
    with pytest.raises(ValueError, match=r"^B"):
        sample_emitted([0.5, 0.5], [0.2, 0.8], scheme, B, n=10)


def test_absurd_n_is_refused_with_the_size_it_needs():
    """Before: n = 10**12 tried to allocate 10**12 / 256 chunk labels (or 8 TB of tokens)."""
    p = np.array([0.5, 0.5])
    with pytest.raises(ValueError, match=r"^n: .* exceeds the limit MAX_TRIALS"):
        estimate_acceptance(p, p, "mpfr", n=10**12)
    with pytest.raises(ValueError, match=r"^n: storing 1 x 1,000,000,000,000 trials would need "
                                         r"7.45e\+03 GiB"):
        sample_emitted(p, p, "mpfr", n=10**12)
    with pytest.raises(ValueError, match=r"^n: storing .* GiB"):
        sample_emitted(p, p, "mpfr", 8, n=10**8, return_drafts=True)
    with pytest.raises(ValueError, match=r"^n: .* MAX_TRIALS"):
        estimate_acceptance(np.full((2**10, 2), 0.5), p, "sd", n=2**25)


def test_progress_bar_changes_no_result(capsys):
    """Long calls run in segments of chunks with a progress bar; results are unchanged."""
    P, Q = _stack(_pairs(13, count=3))
    a = estimate_acceptance(P, Q, "gls", 3, n=20 * 256 + 11, seed=3, progress=True)
    assert capsys.readouterr().err  # something was shown
    b = estimate_acceptance(P, Q, "gls", 3, n=20 * 256 + 11, seed=3, progress=False)
    assert capsys.readouterr().err == ""
    np.testing.assert_array_equal(a.successes, b.successes)
    y1, x1 = sample_emitted(P, Q, "mpfr", 4, n=3000, seed=1, return_drafts=True, progress=True)
    y2, x2 = sample_emitted(P, Q, "mpfr", 4, n=3000, seed=1, return_drafts=True)
    assert np.array_equal(y1, y2) and np.array_equal(x1, x2)
    with pytest.raises(ValueError, match="^progress"):
        estimate_acceptance(P, Q, "sd", n=10, progress="yes")


def test_long_runs_show_progress_by_default():
    from specbound.sim.montecarlo import PROGRESS_WORK, _work_units
    from specbound.sim.samplers import prepare_pairs

    # exp_race over 50,000 tokens: 10**5 trials are 5e9 clock draws -> progress bar
    prep = prepare_pairs(np.full(50_000, 2e-5), np.full(50_000, 2e-5), "exp_race", 1)
    assert 10**5 * _work_units(prep) > PROGRESS_WORK
    # the defaults of the tests and notebooks stay silent
    small = prepare_pairs(np.full(64, 1 / 64), np.full(64, 1 / 64), "gls", 8)
    assert 200_000 * _work_units(small) < PROGRESS_WORK
