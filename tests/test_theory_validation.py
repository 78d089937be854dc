"""Every validation error path of the acceptance theory (and, below, every theory
function taking distributions) raises a
``ValueError`` whose message names the argument and the problem."""

from __future__ import annotations

import numpy as np
import pytest

from specbound.theory import (
    active_set_bound,
    exact_acceptance,
    kl_divergence,
    lml_bound,
    lml_nonidentical_bound,
    lml_relaxed_bound,
    no_communication_limit,
    pml_alpha,
    pml_bound,
    pml_weak_bound,
    tv_distance,
)

P = np.array([0.5, 0.3, 0.2])
Q = np.array([0.2, 0.3, 0.5])

# every pair function, called with (p, q) and valid remaining arguments
PAIR_FUNCS = {
    "tv_distance": lambda p, q, **k: tv_distance(p, q, **k),
    "kl_divergence": lambda p, q, **k: kl_divergence(p, q, **k),
    "no_communication_limit": lambda p, q, **k: no_communication_limit(p, q, **k),
    "pml_alpha": lambda p, q, **k: pml_alpha(p, q, **k),
    "pml_bound": lambda p, q, **k: pml_bound(p, q, 2, **k),
    "pml_weak_bound": lambda p, q, **k: pml_weak_bound(p, q, 2, **k),
    "lml_bound": lambda p, q, **k: lml_bound(p, q, 2, **k),
    "lml_relaxed_bound": lambda p, q, **k: lml_relaxed_bound(p, q, 2, **k),
    "active_set_bound": lambda p, q, **k: active_set_bound(p, q, 2, **k),
    "sd": lambda p, q, **k: exact_acceptance(p, q, "sd", **k),
    "exp_race": lambda p, q, **k: exact_acceptance(p, q, "exp_race", **k),
    "mpfr": lambda p, q, **k: exact_acceptance(p, q, "mpfr", 2, **k),
    "gls": lambda p, q, **k: exact_acceptance(p, q, "gls", 2, **k),
    "nonidentical": lambda p, q, **k: (
        lml_nonidentical_bound(p, np.atleast_2d(q)[None], **k)
        if np.ndim(q) == 2
        else lml_nonidentical_bound(p, np.atleast_2d(q), **k)
    ),
}
funcs = pytest.mark.parametrize("f", list(PAIR_FUNCS.values()), ids=list(PAIR_FUNCS))


def _name_for(f, which):
    """The argument name the message must start with (``qs`` for the non-identical bound)."""
    if which == "q" and f is PAIR_FUNCS["nonidentical"]:
        return "qs"
    return which


BAD_VECTORS = [
    ([0.5, np.nan, 0.5], "NaN or infinite"),
    ([0.5, np.inf, 0.5], "NaN or infinite"),
    ([0.6, -0.1, 0.5], "negative"),
    ([0.5, 0.3, 0.3], "sum to 1"),
    ([], "empty"),
    ([["a", "b", "c"]], "real numbers"),
]


@funcs
@pytest.mark.parametrize(("bad", "problem"), BAD_VECTORS)
@pytest.mark.parametrize("which", ["p", "q"])
def test_bad_vectors(f, bad, problem, which):
    args = (bad, Q) if which == "p" else (P, bad)
    name = _name_for(f, which)
    with pytest.raises(ValueError, match=rf"^{name}: .*{problem}"):
        f(*args)


@funcs
def test_wrong_ndim(f):
    with pytest.raises(ValueError, match=r"^p: must be 1-D or 2-D"):
        f(np.full((1, 1, 3), 1 / 3), Q)
    with pytest.raises(ValueError, match=r"^p: must be 1-D or 2-D"):
        f(np.float64(1.0), Q)


@funcs
def test_shape_mismatch(f):
    name = _name_for(f, "q")
    with pytest.raises(ValueError, match=rf"^{name}: shape mismatch with p: vocabulary sizes"):
        f(P, np.array([0.5, 0.5]))
    with pytest.raises(ValueError, match=rf"^{name}: shape mismatch with p: .*rows"):
        f(np.tile(P, (2, 1)), np.tile(Q, (3, 1)) if name == "q" else np.tile(Q, (3, 2, 1)))


@funcs
def test_normalize_true_accepts_unnormalized_rows(f):
    with pytest.raises(ValueError, match="normalize=True"):
        f(2 * P, Q)
    a = f(2 * P, 3 * Q, normalize=True)
    b = f(P, Q)
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    with pytest.raises(ValueError, match=r"^p: cannot normalize a vector whose entries sum to 0"):
        f(np.zeros(3), Q, normalize=True)


def test_sum_tolerance_is_1e_9():
    assert pml_bound(P + np.array([5e-10, 0, 0]), Q, 2) == pytest.approx(pml_bound(P, Q, 2))
    with pytest.raises(ValueError, match=r"^p: entries must sum to 1 within 1e-09"):
        pml_bound(P + np.array([5e-9, 0, 0]), Q, 2)


B_FUNCS = {
    "pml_bound": lambda B: pml_bound(P, Q, B),
    "pml_weak_bound": lambda B: pml_weak_bound(P, Q, B),
    "lml_bound": lambda B: lml_bound(P, Q, B),
    "lml_relaxed_bound": lambda B: lml_relaxed_bound(P, Q, B),
    "mpfr": lambda B: exact_acceptance(P, Q, "mpfr", B),
    "gls": lambda B: exact_acceptance(P, Q, "gls", B),
}


@pytest.mark.parametrize("f", list(B_FUNCS.values()), ids=list(B_FUNCS))
def test_bad_B(f):
    with pytest.raises(ValueError, match=r"^B: must be >= 1, got 0"):
        f(0)
    with pytest.raises(ValueError, match=r"^B: must be >= 1, got -3"):
        f(-3)
    with pytest.raises(ValueError, match=r"^B: must be an integer, got 2.5"):
        f(2.5)
    with pytest.raises(ValueError, match=r"^B: must be an integer, got True"):
        f(True)
    with pytest.raises(ValueError, match=r"^B: must be an integer, got '2'"):
        f("2")
    with pytest.raises(ValueError, match=r"^B: must be an integer"):
        f(np.array([2, 3]))
    # integral floats and numpy integers are fine
    assert f(2.0) == f(np.int64(2)) == f(2)


@pytest.mark.parametrize("scheme", ["sd", "exp_race"])
def test_single_draft_schemes_reject_B_above_1(scheme):
    with pytest.raises(
        ValueError, match=rf"^B: scheme '{scheme}' is defined for B = 1 only, got B=3"
    ):
        exact_acceptance(P, Q, scheme, 3)
    assert exact_acceptance(P, Q, scheme, 1) == exact_acceptance(P, Q, scheme)


def test_unknown_scheme():
    with pytest.raises(ValueError, match=r"^scheme: must be one of .*'gls'.*got 'spectr'"):
        exact_acceptance(P, Q, "spectr", 2)
    with pytest.raises(ValueError, match=r"^scheme: must be one of"):
        exact_acceptance(P, Q, None)


def test_bad_J():
    with pytest.raises(ValueError, match=r"^J: must be >= 1, got 0"):
        active_set_bound(P, Q, 0)
    with pytest.raises(ValueError, match=r"^J: must be an integer, got 1.5"):
        active_set_bound(P, Q, 1.5)
    with pytest.raises(ValueError, match=r"^J: must be an integer, got True"):
        active_set_bound(P, Q, True)
    batch_p, batch_q = np.tile(P, (3, 1)), np.tile(Q, (3, 1))
    with pytest.raises(ValueError, match=r"^J: must be an integer or, for a batch, .*one entry"):
        active_set_bound(batch_p, batch_q, [1, 2])
    with pytest.raises(ValueError, match=r"^J: must be an integer or, for a batch"):
        active_set_bound(P, Q, [1])
    with pytest.raises(ValueError, match=r"^J: must contain integers"):
        active_set_bound(batch_p, batch_q, [1, 2.5, 3])
    with pytest.raises(ValueError, match=r"^J: must contain integers"):
        active_set_bound(batch_p, batch_q, [True, True, False])
    with pytest.raises(ValueError, match=r"^J: every entry must be >= 1, got min 0"):
        active_set_bound(batch_p, batch_q, [1, 0, 3])
    assert active_set_bound(P, Q, np.int64(3)) == active_set_bound(P, Q, 3)
    assert active_set_bound(P, Q, np.array(3)) == active_set_bound(P, Q, 3)


def test_bad_qs():
    good = np.tile(Q, (2, 1))
    with pytest.raises(ValueError, match=r"^qs: must be 2-D or 3-D"):
        lml_nonidentical_bound(P, Q)
    with pytest.raises(ValueError, match=r"^qs: must be 2-D or 3-D"):
        lml_nonidentical_bound(P, np.ones((1, 1, 1, 3)) / 3)
    with pytest.raises(ValueError, match=r"^qs: shape mismatch with p: vocabulary sizes 2 and 3"):
        lml_nonidentical_bound(P, [[0.5, 0.5]])
    with pytest.raises(ValueError, match=r"^qs: shape mismatch with p: 4 rows of drafts and 2"):
        lml_nonidentical_bound(np.tile(P, (2, 1)), np.tile(good, (4, 1, 1)))
    with pytest.raises(ValueError, match=r"^qs: .*sum to 1"):
        lml_nonidentical_bound(P, [Q, 2 * Q])
    with pytest.raises(ValueError, match=r"^qs: contains negative"):
        lml_nonidentical_bound(P, [Q, [1.5, -0.5, 0.0]])
    with pytest.raises(ValueError, match=r"^qs: must not be empty"):
        lml_nonidentical_bound(P, np.zeros((0, 3)))
    with pytest.raises(ValueError, match=r"^p: must be 1-D or 2-D"):
        lml_nonidentical_bound(np.ones((1, 1, 3)) / 3, good)


# ----------------------------------------------------------------------------------------
# one validation rule for theory and sim (hardening)
# ----------------------------------------------------------------------------------------
import inspect  # noqa: E402

import specbound.sim as sim  # noqa: E402
from specbound import theory  # noqa: E402
from specbound._validation import sum_atol  # noqa: E402


def _float32_softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp((z - z.max()).astype(np.float32))
    return e / e.sum(dtype=np.float32)


def test_tolerance_scales_with_dtype_and_length():
    assert sum_atol(3) == 1e-9 and sum_atol(10**6) == 1e-9  # float64 keeps 1e-9
    assert sum_atol(256_000, np.float32) == pytest.approx(8 * 256_000**0.5 * 2**-23)
    assert 4e-4 < sum_atol(256_000, np.float32) < 5e-4
    assert sum_atol(32_000, np.float32) == pytest.approx(1.7e-4, rel=0.01)


def test_real_float32_softmaxes_pass_and_non_distributions_fail():
    # regression: a 32k-vocabulary float32 softmax was refused even by tv_distance
    rng = np.random.default_rng(0)
    for n in (32_000, 256_000):
        z = rng.standard_normal(n) * 3.0
        p = _float32_softmax(z)
        q = _float32_softmax(z + rng.standard_normal(n))
        assert p.dtype == np.float32
        assert 0 < theory.tv_distance(p, q) < 1
        theory.pml_bound(p, q, 2)
        theory.induced_distribution(p, q, "lenience", ell=0.5)
        sim.sample_induced(p, q, "lossless", 10, seed=0)
        # the worst rounding measured for torch.softmax in float32 over 256k logits is 9.4e-5
        # off 1; that still passes, a vector off by 1e-3 does not
        off = p.copy()
        off[0] += np.float32(9e-5)
        theory.tv_distance(off, q)
        bad = p.copy()
        bad[0] += np.float32(1e-3)
        with pytest.raises(ValueError, match=r"^p: entries must sum to 1 within"):
            theory.tv_distance(bad, q)
        with pytest.raises(ValueError, match=r"^q: entries must sum to 1 within"):
            sim.sample_induced(p, np.roll(bad, 1), "lossless", 10, seed=0)
    # the same rounding in float64 is refused: float64 keeps the 1e-9 tolerance
    with pytest.raises(ValueError, match="within 1e-09"):
        theory.tv_distance(off.astype(np.float64), q)


def test_real_torch_float32_softmax_passes():
    torch = pytest.importorskip("torch")
    gen = torch.Generator().manual_seed(0)
    z = torch.randn(256_000, generator=gen) * 2.0
    z[torch.randint(0, 256_000, (100,), generator=gen)] += 15.0  # the measured worst shape
    p = torch.softmax(z, -1).numpy()
    q = torch.softmax(z * 0.8, -1).numpy()
    assert 0 < theory.tv_distance(p, q) < 1
    assert 0 <= theory.exact_acceptance(p, q, "mpfr", 2) <= 1


@pytest.mark.parametrize(
    "call",
    [
        lambda: theory.tv_distance(np.array([0.5 + 0.3j, 0.3, 0.2, 0]), [0.25] * 4),
        lambda: theory.kl_divergence([0.5, 0.5], np.array([0.5, 0.5 + 0j])),
        lambda: theory.pml_bound(["0.5", "0.5"], [0.5, 0.5], 2),
        lambda: theory.induced_distribution([True, False], [0.5, 0.5], "lossless"),
        lambda: theory.lenience_delta(P, Q, "0.5"),
        lambda: theory.lenience_delta(P, Q, 0.5 + 0j),
        lambda: theory.induced_distribution(P, Q, "fuzzy", threshold="0.1"),
        lambda: theory.acceptance_rate(P, Q, "contrastive", beta=[1.0, "2"]),
        lambda: theory.min_p_allowed(P, "0.5"),
        lambda: theory.eta_allowed(P, 0.1 + 0j),
    ],
)
def test_complex_strings_and_booleans_are_refused(call):
    # regression: tv_distance([.5+.3j, .3, .2, 0], [.25]*4) returned 0.3 (imaginary part
    # dropped), and ell='0.5' was parsed as a number
    with pytest.raises(ValueError):
        call()


def _takes_a_distribution(fn) -> bool:
    params = inspect.signature(fn).parameters
    return any(name in params for name in ("p", "q", "P", "induced", "probs"))


THEORY_DIST_FUNCS = [name for name in theory.__all__
                     if callable(getattr(theory, name)) and not isinstance(getattr(theory, name),
                                                                           type)
                     and _takes_a_distribution(getattr(theory, name))]
SIM_DIST_FUNCS = ["sample_induced", "simulate_tree_verification", "top_k", "temperature_draft",
                  "noisy_draft", "mixture_draft", "chisquare_gof", "multinomial_exact_gof",
                  "gof_test"]


@pytest.mark.parametrize("name", THEORY_DIST_FUNCS)
def test_every_theory_function_taking_a_distribution_takes_normalize(name):
    params = inspect.signature(getattr(theory, name)).parameters
    assert "normalize" in params
    assert params["normalize"].default is False
    assert params["normalize"].kind is inspect.Parameter.KEYWORD_ONLY


@pytest.mark.parametrize("name", SIM_DIST_FUNCS)
def test_every_sim_function_in_scope_takes_normalize(name):
    params = inspect.signature(getattr(sim, name)).parameters
    assert params["normalize"].default is False


def test_normalize_must_be_a_bool_everywhere():
    # regression: normalize='no' was treated as True
    for bad in ("no", 1, None, np.array(True)):
        with pytest.raises(ValueError, match="^normalize: must be True or False"):
            theory.tv_distance(P, Q, normalize=bad)
        with pytest.raises(ValueError, match="^normalize: must be True or False"):
            theory.induced_distribution(P, Q, "lossless", normalize=bad)
        with pytest.raises(ValueError, match="^normalize: must be True or False"):
            sim.gof_test([1, 2, 3], P, normalize=bad)
    assert theory.tv_distance(P, Q, normalize=np.bool_(False)) == theory.tv_distance(P, Q)


def test_lenience_and_judge_deltas_stay_in_their_documented_range():
    # regression: lenience_delta could return 1 + 2e-16 (270 of 300 random batches with
    # ell = 1, where the quotient is TV / TV up to rounding); the range [0, 1] holds exactly
    for seed in range(300):
        rng = np.random.default_rng(seed)
        p = rng.dirichlet(np.ones(8), size=5)
        q = rng.dirichlet(np.ones(8), size=5)
        d = theory.lenience_delta(p, q, 1.0)
        assert np.all((d >= 0) & (d <= 1)), seed
        j = theory.judge_delta(p, q, np.zeros((5, 8), bool))
        assert np.all((j >= 0) & (j <= 1)), seed
        if seed < 3:  # and the value is the quotient itself up to that last ulp
            np.testing.assert_allclose(d, 1.0, rtol=0, atol=1e-15)


def test_option_names_are_tuples_defined_once():
    assert theory.SCHEMES == ("sd", "exp_race", "mpfr", "gls")
    assert isinstance(theory.RULES, tuple) and theory.RULES == tuple(theory.RULE_PARAMS)
    assert theory.SCORES == ("aaronson", "u", "li", "lattimore")
    assert theory.TREE_RULES == ("lossless", "truncation", "speccascade", "typical")
    assert set(theory.TREE_RULES) - {"speccascade", "typical"} <= set(theory.RULES)
    from specbound.sim.lossy import LOSSY_RULES
    from specbound.sim.tree import TREE_RULES

    assert LOSSY_RULES is theory.RULES and TREE_RULES is theory.TREE_RULES
