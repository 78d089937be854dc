"""Every validation error path of the acceptance theory (MATH.md §1–2 functions) raises a
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
