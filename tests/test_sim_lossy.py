"""Samplers of lossy verification rules (``specbound.sim.sample_induced``).

The central check: for every rule and every pair of a fixed panel (12 pairs, including
sparse, non-absolutely-continuous, skewed, Zipf and near-equal pairs), the counts of 200,000
tokens emitted through the rule's accept/reject mechanics fit the closed form
``theory.induced_distribution`` (Pearson chi-square with pooling, ``sim.gof``).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specbound import theory
from specbound.sim import sample_induced
from specbound.sim.gof import bonferroni_alpha, chisquare_gof, counts_from_samples
from specbound.sim.lossy import LOSSY_RULES
from specbound.testing.strategies import prob_pairs
from specbound.theory.lossy import induced_distribution
from tests._rule_cases import rule_settings

N = 200_000


# ------------------------------------------------------------------------------ the panel
def _panel() -> list[tuple[str, np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(20260)
    pairs = []
    # 1-3: Dirichlet pairs of several sizes and concentrations
    for v, conc in ((5, 1.0), (20, 0.5), (50, 0.2)):
        pairs.append((f"dirichlet{v}", rng.dirichlet(np.full(v, conc)),
                      rng.dirichlet(np.full(v, conc))))
    # 4: Zipf target, noisy draft (softmax of log p + noise)
    v = 40
    p = 1.0 / np.arange(1, v + 1) ** 1.1
    p /= p.sum()
    logit = np.log(p) + 0.8 * rng.standard_normal(v)
    q = np.exp(logit - logit.max())
    pairs.append(("zipf_noisy", p, q / q.sum()))
    # 5: sparse target and draft with different supports (p not abs. continuous w.r.t. q)
    p = rng.dirichlet(np.ones(15))
    q = rng.dirichlet(np.ones(15))
    p[[0, 3, 7, 11]] = 0.0
    q[[1, 3, 8, 12, 13]] = 0.0
    pairs.append(("sparse", p / p.sum(), q / q.sum()))
    # 6: very skewed target, flat draft (large overshoot nowhere, undershoot at the peak)
    p = rng.dirichlet(np.ones(10)) ** 8
    p[2] += 1.0
    pairs.append(("skewed_p", p / p.sum(), np.full(10, 0.1)))
    # 7: flat target, skewed (overconfident) draft: big overshoot region
    q = rng.dirichlet(np.ones(10)) ** 8
    q[5] += 1.0
    pairs.append(("skewed_q", np.full(10, 0.1), q / q.sum()))
    # 8: near-equal pair (small TV)
    p = rng.dirichlet(np.ones(12))
    q = p * np.exp(0.05 * rng.standard_normal(12))
    pairs.append(("near_equal", p, q / q.sum()))
    # 9: two tokens
    pairs.append(("binary", np.array([0.7, 0.3]), np.array([0.2, 0.8])))
    # 10: draft a point mass on a token of moderate target probability
    p = rng.dirichlet(np.full(8, 2.0))
    q = np.zeros(8)
    q[int(np.argsort(p)[3])] = 1.0
    pairs.append(("onehot_q", p, q))
    # 11: heavy-tailed target over 100 tokens, draft a tempered copy
    v = 100
    p = 1.0 / np.arange(1, v + 1) ** 0.8
    p = rng.permutation(p / p.sum())
    q = p**1.6
    pairs.append(("zipf_tempered", p, q / q.sum()))
    # 12: target with tiny-probability tail, draft puts mass on that tail
    p = np.r_[0.5, 0.3, 0.15, np.full(7, 0.05 / 7)]
    q = np.r_[0.2, 0.1, 0.1, np.full(7, 0.6 / 7)]
    pairs.append(("tail_heavy_draft", p, q))
    return pairs


PANEL = _panel()


def _min_p(p, p_base):
    return p >= p_base * p.max()


def _judge(p, q, seed):
    return np.random.default_rng(seed).random(p.size) < 0.5


def _tv_lam(p, q):
    # a DIVERSED-style context-dependent weight on the target: larger when p and q disagree
    return float(0.2 + 0.6 * 0.5 * np.abs(p - q).sum())


def _builder(params):
    """``make(p, q) -> dict``: the parameters, callables ``f(p, q)`` evaluated on the pair."""
    return lambda p, q: {k: (v(p, q) if callable(v) and k != "lam" else v)
                         for k, v in params.items()}


#: one example per parameter (functions of the pair where the value depends on it): every
#: rule of the registry and every choice of its options (tests/_rule_cases.py)
EXAMPLES = {
    "lam": 0.3,
    "threshold": 0.3,
    "ell": 0.6,
    "judge": lambda p, q: _judge(p, q, p.size),
    "allowed": lambda p, q: _min_p(p, 0.2) | (q >= q.max()),
    "beta": 0.5,
}

# each configuration: (label, rule, params-builder(p, q) -> dict): the registry's rules and
# options, then settings of particular interest
CONFIGS = [(label, rule, _builder(params))
           for label, rule, params in rule_settings(EXAMPLES)] + [
    ("diversed", "interpolation", lambda p, q: {"lam": _tv_lam}),
    ("fuzzy_kl_0.2", "fuzzy", lambda p, q: {"threshold": 0.2, "divergence": "kl"}),
    ("fuzzy_js_0.05", "fuzzy", lambda p, q: {"threshold": 0.05, "divergence": "js"}),
    ("lenience_0.9", "lenience", lambda p, q: {"ell": 0.9}),
    ("trunc_target_min_p", "truncation",
     lambda p, q: {"allowed": _min_p(p, 0.2), "on_reject": "target"}),
    ("tceil_min_p_0.3", "truncation_ceiling",
     lambda p, q: {"allowed": _min_p(p, 0.3), "ell": 0.7, "completion": "renormalize"}),
    ("contrastive_b1_a0", "contrastive", lambda p, q: {"beta": 1.0, "alpha": 0.0}),
]

# Overall false-failure rate of test_sample_induced_matches_closed_form: 1e-4, split by
# Bonferroni over all (configuration, pair) comparisons.
N_COMPARISONS = len(CONFIGS) * len(PANEL)
ALPHA = bonferroni_alpha(1e-4, N_COMPARISONS)


def test_every_rule_is_covered():
    assert {rule for _, rule, _ in CONFIGS} == set(LOSSY_RULES)


@pytest.mark.parametrize("label, rule, make", CONFIGS, ids=[c[0] for c in CONFIGS])
def test_sample_induced_matches_closed_form(label, rule, make):
    # Chi-square GOF of N = 200,000 emitted tokens per pair against the closed form; each of
    # the len(CONFIGS) * 12 comparisons at alpha = 1e-4 / that number (overall false-failure
    # probability 1e-4).  A token that the closed form gives probability 0 and the sampler
    # emits fails at once (pvalue 0).
    for k, (name, p, q) in enumerate(PANEL):
        params = make(p, q)
        law = induced_distribution(p, q, rule, **params)
        x = sample_induced(p, q, rule, N, seed=1000 + k, **params)
        assert x.dtype == np.int64 and x.shape == (N,)
        res = chisquare_gof(counts_from_samples(x, p.size), law, min_expected=5.0)
        assert res.pvalue >= ALPHA, (label, name, res)


# Power.  The same GOF must reject a closed form that is wrong by a little.  These checks
# use fixed seeds and would fail (i.e. the test would be useless) only if the test lacked
# power; the numbers below were measured with these seeds.
def test_gof_rejects_one_percent_mass_shift():
    # move 1% of probability mass from the most to the least likely emitted token
    rejected = 0
    for k, (name, p, q) in enumerate(PANEL):
        law = induced_distribution(p, q, "lenience", ell=0.5)
        x = sample_induced(p, q, "lenience", N, seed=1000 + k, ell=0.5)
        counts = counts_from_samples(x, p.size)
        assert chisquare_gof(counts, law).pvalue >= ALPHA, name
        pos = np.flatnonzero(law > 0)
        if pos.size < 2:
            continue
        wrong = law.copy()
        hi, lo = pos[np.argmax(law[pos])], pos[np.argmin(law[pos])]
        wrong[hi] -= 0.01
        wrong[lo] += 0.01
        assert chisquare_gof(counts, wrong).pvalue < ALPHA, name
        rejected += 1
    assert rejected >= 10


def test_gof_rejects_perturbed_lenience():
    # lenience with ell perturbed by 1% (0.6 -> 0.606 in the closed form) is rejected; the
    # correct ell is not.  The pair has most mass in the overshoot region q > p/ell, where
    # the cap p/ell moves by 1% and the missing mass moves a single under-estimated token
    # by 5% (expected X^2 about 100 on 5 degrees of freedom).
    p = np.array([0.5, 0.1, 0.1, 0.1, 0.1, 0.1])
    q = np.array([0.0, 0.2, 0.2, 0.2, 0.2, 0.2])
    x = sample_induced(p, q, "lenience", N, seed=7, ell=0.6)
    counts = counts_from_samples(x, p.size)
    assert chisquare_gof(counts, induced_distribution(p, q, "lenience", ell=0.6)).pvalue >= ALPHA
    wrong = induced_distribution(p, q, "lenience", ell=0.606)
    assert chisquare_gof(counts, wrong).pvalue < ALPHA


def test_gof_separates_the_two_truncation_readings():
    # Eq. 13 (renormalise the draft) and the practical variant (target on rejection) differ;
    # samples of one must be rejected against the other's closed form.
    _, p, q = PANEL[3]
    allowed = _min_p(p, 0.2)
    x = sample_induced(p, q, "truncation", N, seed=3, allowed=allowed)
    counts = counts_from_samples(x, p.size)
    ok = induced_distribution(p, q, "truncation", allowed=allowed)
    other = induced_distribution(p, q, "truncation", allowed=allowed, on_reject="target")
    assert chisquare_gof(counts, ok).pvalue >= ALPHA
    assert chisquare_gof(counts, other).pvalue < ALPHA


# --------------------------------------------------------------------- batches, DIVERSED
def test_batched_input_with_per_context_lambda():
    # DIVERSED: one lambda per context (array) and a callable; each row is checked by GOF
    # (2 x 3 comparisons at alpha = 1e-5 each: overall false-failure probability 6e-5).
    rng = np.random.default_rng(5)
    P = rng.dirichlet(np.ones(9), size=3)
    Q = rng.dirichlet(np.ones(9), size=3)
    lam = np.array([0.0, 0.4, 1.0])
    for lam_arg in (lam, _tv_lam):
        x = sample_induced(P, Q, "interpolation", N // 2, seed=11, lam=lam_arg)
        assert x.shape == (3, N // 2)
        law = induced_distribution(P, Q, "interpolation", lam=lam_arg)
        for i in range(3):
            res = chisquare_gof(counts_from_samples(x[i], 9), law[i])
            assert res.pvalue >= 1e-5, (i, res)


def test_one_d_argument_broadcasts_against_a_batch():
    # a 1-D p against a 2-D Q is the batch with p repeated on every row: the same tokens bit
    # for bit, and row i follows the law induced by (p, Q[i]) -- not Q[j] -- by GOF
    # (2 acceptances at alpha = 1e-5: false-failure probability 2e-5; the two rejections of
    # the other row's law hold for this fixed seed, with p-values far below 1e-5)
    rng = np.random.default_rng(6)
    p = rng.dirichlet(np.ones(6))
    Q = rng.dirichlet(np.ones(6), size=2)
    x = sample_induced(p, Q, "lenience", 20_000, seed=0, ell=0.7)
    assert x.shape == (2, 20_000) and x.dtype == np.int64
    np.testing.assert_array_equal(
        x, sample_induced(np.tile(p, (2, 1)), Q, "lenience", 20_000, seed=0, ell=0.7))
    law = induced_distribution(p, Q, "lenience", ell=0.7)
    for i in range(2):
        counts = counts_from_samples(x[i], 6)
        assert chisquare_gof(counts, law[i]).pvalue >= 1e-5
        assert chisquare_gof(counts, law[1 - i]).pvalue < 1e-5
    # and a 1-D q against a 2-D P likewise
    y = sample_induced(np.stack([p, Q[0]]), Q[1], "lenience", 20_000, seed=0, ell=0.7)
    np.testing.assert_array_equal(
        y, sample_induced(np.stack([p, Q[0]]), np.tile(Q[1], (2, 1)), "lenience", 20_000,
                          seed=0, ell=0.7))


# ----------------------------------------------------------------- exact special cases
def test_degenerate_rules_are_exact():
    rng = np.random.default_rng(8)
    p = rng.dirichlet(np.ones(7))
    q = rng.dirichlet(np.ones(7))
    # lambda = 0: every draft accepted, so the output is the draft itself, token for token
    gen = np.random.default_rng(1)
    x = sample_induced(p, q, "interpolation", 5000, seed=gen, lam=0.0)
    drafts = np.searchsorted(np.cumsum(q) / q.sum(), np.random.default_rng(1).random(5000),
                             side="right")
    np.testing.assert_array_equal(x, drafts)
    # fuzzy gate open (threshold 1 >= TV): likewise
    x = sample_induced(p, q, "fuzzy", 5000, seed=1, threshold=1.0)
    np.testing.assert_array_equal(x, drafts)
    # truncation with A = V accepts every draft under both readings
    for on_reject in ("renormalize", "target"):
        x = sample_induced(p, q, "truncation", 5000, seed=1, allowed=np.ones(7, bool),
                           on_reject=on_reject)
        np.testing.assert_array_equal(x, drafts)


def test_point_masses():
    # q a point mass inside A: Eq. 13 emits it always; target a point mass: lossless emits it
    p = np.array([0.0, 0.6, 0.4])
    q = np.array([0.0, 0.0, 1.0])
    x = sample_induced(p, q, "truncation", 1000, seed=0, allowed=np.array([0, 1, 1], bool))
    assert np.all(x == 2)
    x = sample_induced(np.array([0.0, 1.0, 0.0]), q, "lossless", 1000, seed=0)
    assert np.all(x == 1)


def test_zero_yield_falls_back_to_the_other_completion():
    # disjoint supports: the ceiling yield min(q, p/ell) is 0 and "renormalize" cannot run
    # its redraw loop; like theory.lossy it then uses the residual completion (here p).
    # Truncation with Z(q) = 0 falls back to p_Theta.  (Both are GOF-checked at 1e-6 each.)
    p = np.array([0.5, 0.3, 0.2, 0.0])
    q = np.array([0.0, 0.0, 0.0, 1.0])
    for rule, params in (("ceiling", {"ell": 0.5, "completion": "renormalize"}),
                         ("truncation_ceiling", {"ell": 0.5, "completion": "renormalize",
                                                 "allowed": np.array([1, 0, 0, 0], bool)}),
                         ("truncation", {"allowed": np.array([1, 1, 0, 0], bool)})):
        x = sample_induced(p, q, rule, 50_000, seed=2, **params)
        law = induced_distribution(p, q, rule, **params)
        assert chisquare_gof(counts_from_samples(x, 4), law).pvalue >= 1e-6, rule


def test_redraw_loop_with_small_yield():
    # Z(q) = 0.002: the redraw loop needs ~500 drafts per token and must still be exact
    # (GOF at alpha 1e-6, false-failure probability 1e-6).
    p = np.array([0.3, 0.3, 0.4, 0.0])
    q = np.array([0.001, 0.001, 0.0, 0.998])
    allowed = np.array([1, 1, 1, 0], bool)
    x = sample_induced(p, q, "truncation", 20_000, seed=4, allowed=allowed)
    law = induced_distribution(p, q, "truncation", allowed=allowed)
    np.testing.assert_allclose(law, [0.5, 0.5, 0.0, 0.0])
    assert chisquare_gof(counts_from_samples(x, 4), law).pvalue >= 1e-6


# ------------------------------------------------------------------------- reproducibility
def test_reproducible_by_seed():
    _, p, q = PANEL[3]
    for rule, params in (("lenience", {"ell": 0.5}), ("ceiling", {"ell": 0.5}),
                         ("truncation", {"allowed": _min_p(p, 0.3)})):
        a = sample_induced(p, q, rule, 10_000, seed=123, **params)
        b = sample_induced(p, q, rule, 10_000, seed=np.random.SeedSequence(123), **params)
        c = sample_induced(p, q, rule, 10_000, seed=124, **params)
        np.testing.assert_array_equal(a, b)
        assert not np.array_equal(a, c)


# ------------------------------------------------------------------------------ properties
#: every rule and option setting, each parameter's example a function of the pair and of
#: the drawn ``ell`` and ``lam``
SUPPORT_SETTINGS = rule_settings({
    "lam": lambda p, q, ell, lam: lam,
    "threshold": lambda p, q, ell, lam: lam,
    "ell": lambda p, q, ell, lam: ell,
    "beta": lambda p, q, ell, lam: ell,
    "judge": lambda p, q, ell, lam: np.arange(p.size) % 2 == 0,
    "allowed": lambda p, q, ell, lam: _min_p(p, 0.5) | (q > 0),
})


@settings(max_examples=60)
@given(pair=prob_pairs(min_size=1, max_size=30), setting=st.sampled_from(SUPPORT_SETTINGS),
       ell=st.floats(0.05, 1.0), lam=st.floats(0.0, 1.0), seed=st.integers(0, 2**32 - 1))
def test_emitted_tokens_lie_in_the_induced_support(pair, setting, ell, lam, seed):
    # Property: every emitted token has positive induced probability, whatever the pair;
    # ids are in range.
    p, q = pair
    _, rule, template = setting
    params = {k: (v(p, q, ell, lam) if callable(v) else v) for k, v in template.items()}
    law = induced_distribution(p, q, rule, **params)
    x = sample_induced(p, q, rule, 500, seed=seed, **params)
    assert x.min() >= 0 and x.max() < p.size
    assert np.all(law[x] > 0)


# ------------------------------------------------------------------------------ validation
P0 = np.array([0.5, 0.3, 0.2])
Q0 = np.array([0.2, 0.3, 0.5])


@pytest.mark.parametrize("kwargs, match", [
    ({"rule": "nope"}, "rule"),
    ({"rule": "lossless", "n": 0}, "n"),
    ({"rule": "lossless", "n": 2.5}, "n"),
    ({"rule": "lossless", "seed": -1}, "seed"),
    ({"rule": "lossless", "seed": "x"}, "seed"),
    ({"rule": "lossless", "ell": 0.5}, "ell"),
    ({"rule": "lenience"}, "ell"),
    ({"rule": "lenience", "ell": 0.0}, "ell"),
    ({"rule": "lenience", "ell": 1.5}, "ell"),
    ({"rule": "lenience", "ell": "a"}, "ell"),
    ({"rule": "interpolation"}, "lam"),
    ({"rule": "interpolation", "lam": 1.2}, "lam"),
    ({"rule": "interpolation", "lam": [0.1, 0.2]}, "lam"),
    ({"rule": "interpolation", "lam": lambda p, q: 1 / 0}, "lam"),
    ({"rule": "interpolation", "lam": lambda p, q: 2.0}, "lam"),
    ({"rule": "fuzzy", "threshold": -0.1}, "threshold"),
    ({"rule": "fuzzy", "threshold": 0.1, "divergence": "hellinger"}, "divergence"),
    ({"rule": "judge"}, "judge"),
    ({"rule": "judge", "judge": [True, False]}, "judge"),
    ({"rule": "judge", "judge": [0.5, 0.1, 0.0]}, "judge"),
    ({"rule": "truncation", "allowed": [True, True, True], "on_reject": "x"}, "on_reject"),
    ({"rule": "truncation", "allowed": [False, False, False], "on_reject": "target"},
     "allowed"),
    ({"rule": "ceiling", "ell": 0.5, "completion": "x"}, "completion"),
    ({"rule": "truncation_ceiling", "ell": 0.5}, "allowed"),
    ({"rule": "contrastive"}, "beta"),
    ({"rule": "contrastive", "beta": -1.0}, "beta"),
    ({"rule": "contrastive", "beta": 1.0, "alpha": 2.0}, "alpha"),
])
def test_validation_errors(kwargs, match):
    kwargs = dict(kwargs)
    rule = kwargs.pop("rule")
    n = kwargs.pop("n", 10)
    seed = kwargs.pop("seed", 0)
    with pytest.raises(ValueError, match=match):
        sample_induced(P0, Q0, rule, n, seed=seed, **kwargs)


@pytest.mark.parametrize("p, q, match", [
    ([0.5, 0.6, -0.1], Q0, "p"),
    (P0, [0.5, 0.5], "q"),
    (P0, [0.5, 0.5, 0.1], "q"),
    ([[[0.5, 0.5]]], Q0, "p"),
    (np.ones((2, 3)) / 3, np.ones((3, 3)) / 3, "q"),
])
def test_validation_of_distributions(p, q, match):
    with pytest.raises(ValueError, match=match):
        sample_induced(p, q, "lossless", 10, seed=0)


# ------------------------------------------------------------------------------ hardening
@pytest.mark.parametrize("bad", [lambda p, q: None, lambda p, q: "0.5", lambda p, q: [0.1, 0.2],
                                 lambda p, q: 0.5 + 0j])
def test_lam_callable_returning_a_non_number_names_lam(bad):
    # regression: lam returning None raised AttributeError inside the sampler (theory already
    # raised a ValueError naming lam); both now share one parser
    with pytest.raises(ValueError, match="^lam: "):
        sample_induced(P0, Q0, "interpolation", n=10, lam=bad)
    with pytest.raises(ValueError, match="^lam: "):
        induced_distribution(P0, Q0, "interpolation", lam=bad)


@pytest.mark.parametrize("kwargs, match", [
    ({"rule": "lenience", "ell": "0.5"}, "^ell: must be a real number"),
    ({"rule": "lenience", "ell": ["0.5"]}, "^ell: must be"),
    ({"rule": "lenience", "ell": 0.5 + 0j}, "^ell: must be"),
    ({"rule": "fuzzy", "threshold": "0.1"}, "^threshold: must be"),
    ({"rule": "contrastive", "beta": "1"}, "^beta: must be"),
    ({"rule": "interpolation", "lam": "0.5"}, "^lam: must be"),
    ({"rule": "lossless", "normalize": "no"}, "^normalize: must be True or False"),
    ({"rule": "lossless", "n": 10**12}, "^n: too large"),
])
def test_strings_and_absurd_sizes_are_refused(kwargs, match):
    kwargs = dict(kwargs)
    rule = kwargs.pop("rule")
    n = kwargs.pop("n", 10)
    with pytest.raises(ValueError, match=match):
        sample_induced(P0, Q0, rule, n, seed=0, **kwargs)


def test_seed_is_keyword_only_and_normalize_rescales():
    with pytest.raises(TypeError, match="positional"):
        sample_induced(P0, Q0, "lossless", 50, 3)
    np.testing.assert_array_equal(
        sample_induced(2 * P0, 3 * Q0, "lenience", 50, seed=3, ell=0.5, normalize=True),
        sample_induced(P0, Q0, "lenience", 50, seed=3, ell=0.5))


def test_tree_names_live_in_sim_tree_only():
    import specbound.sim.lossy as sim_lossy
    import specbound.sim.tree as sim_tree

    for name in ("TREE_RULES", "TreeVerificationResult", "simulate_tree_verification"):
        assert hasattr(sim_tree, name)
        with pytest.raises(AttributeError, match=name):
            getattr(sim_lossy, name)
    assert LOSSY_RULES == theory.RULES
