"""Hypothesis strategies for probability vectors, (p, q) pairs and multi-draft sets.

The strategies deliberately include the awkward cases: zeros, one-hot vectors, near-uniform
vectors, Zipf-like (heavy-tailed) vectors and very skewed vectors, at sizes 1..200.  They
are the package's own test strategies (one home), public so that a test of any sampler can
draw the same cases::

    from hypothesis import given, settings
    from specbound.testing import check_lossless
    from specbound.testing.strategies import example_rate, prob_pairs

    @settings(max_examples=20, derandomize=True)
    @given(prob_pairs(max_size=16))
    def test_my_sampler(pq):
        p, q = pq
        assert check_lossless(my_step, p, q, n=20_000,
                              false_failure_rate=example_rate(1e-3, 20)).passed

:func:`example_rate` splits one overall false-failure rate across hypothesis' examples (the
Bonferroni bookkeeping of :func:`specbound.sim.gof.bonferroni_alpha`).  Needs hypothesis
(the ``testing`` extra); nothing else in :mod:`specbound.testing` does.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from specbound.sim.gof import bonferroni_alpha

__all__ = ["KINDS", "prob_vectors", "prob_pairs", "multi_draft_sets", "example_rate"]

KINDS = ("dirichlet", "sparse", "onehot", "near_uniform", "zipf", "skewed")


def _make(kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    if kind == "dirichlet":
        v = rng.dirichlet(np.full(n, rng.choice([0.1, 0.5, 1.0, 5.0])))
    elif kind == "sparse":
        v = rng.dirichlet(np.ones(n))
        k = int(rng.integers(0, n))  # number of zeros (keeps at least one entry)
        v[rng.permutation(n)[:k]] = 0.0
    elif kind == "onehot":
        v = np.zeros(n)
        v[rng.integers(n)] = 1.0
    elif kind == "near_uniform":
        v = np.full(n, 1.0 / n) * (1.0 + 1e-6 * rng.standard_normal(n))
        v = np.abs(v)
    elif kind == "zipf":
        s = rng.uniform(0.5, 2.5)
        v = rng.permutation(1.0 / np.arange(1, n + 1) ** s)
    elif kind == "skewed":
        v = rng.dirichlet(np.ones(n)) ** rng.uniform(3.0, 12.0)
        v[rng.integers(n)] += 1.0
    else:  # pragma: no cover
        raise AssertionError(kind)
    v = np.asarray(v, dtype=np.float64)
    if v.sum() <= 0 or not np.all(np.isfinite(v)):
        v = np.zeros(n)
        v[0] = 1.0
    v = v / v.sum()
    return v


@st.composite
def prob_vectors(draw, min_size: int = 1, max_size: int = 200, kinds=KINDS, n=None):
    """A probability vector of a random kind; ``n`` fixes the size."""
    if n is None:
        n = draw(st.integers(min_size, max_size))
    kind = draw(st.sampled_from(kinds))
    seed = draw(st.integers(0, 2**32 - 1))
    return _make(kind, n, np.random.default_rng(seed))


@st.composite
def prob_pairs(draw, min_size: int = 1, max_size: int = 200, kinds=KINDS, abs_cont=False):
    """A (p, q) pair of equal size.  ``abs_cont=True`` makes supp(p) inside supp(q)."""
    n = draw(st.integers(min_size, max_size))
    p = draw(prob_vectors(n=n, kinds=kinds))
    relation = draw(st.sampled_from(["independent", "equal", "mixture", "perturbed"]))
    if relation == "equal":
        q = p.copy()
    elif relation == "mixture":
        other = draw(prob_vectors(n=n, kinds=kinds))
        t = draw(st.floats(0.0, 1.0))
        q = (1 - t) * p + t * other
    elif relation == "perturbed":
        seed = draw(st.integers(0, 2**32 - 1))
        rng = np.random.default_rng(seed)
        with np.errstate(divide="ignore"):
            logits = np.log(p) + draw(st.floats(0.01, 3.0)) * rng.standard_normal(n)
        q = np.exp(logits - np.max(logits))
    else:
        q = draw(prob_vectors(n=n, kinds=kinds))
    if abs_cont:
        q = q + (p > 0) * 1e-3
    q = np.asarray(q, dtype=np.float64)
    q = q / q.sum()
    return p, q


@st.composite
def multi_draft_sets(draw, min_size: int = 2, max_size: int = 32, max_B: int = 4,
                     kinds=KINDS, identical=None):
    """``(p, qs)`` with ``qs`` of shape ``(B, n)``: one draft law per draft (``B`` in
    ``1..max_B``).  ``identical=True`` repeats one ``q`` (i.i.d. drafts), ``False`` draws
    each law on its own, ``None`` either."""
    B = draw(st.integers(1, max_B))
    p, q = draw(prob_pairs(min_size=min_size, max_size=max_size, kinds=kinds))
    same = draw(st.booleans()) if identical is None else identical
    if same:
        qs = np.broadcast_to(q, (B, q.shape[0])).copy()
    else:
        qs = np.stack([q] + [draw(prob_vectors(n=q.shape[0], kinds=kinds))
                             for _ in range(B - 1)])
    return p, qs


def example_rate(total_rate: float, max_examples: int) -> float:
    """Per-example false-failure rate so that ``max_examples`` hypothesis examples together
    fail by chance with probability at most ``total_rate`` (union bound:
    ``total_rate / max_examples``; hypothesis may also replay a failing example while
    shrinking, which only happens after a failure)."""
    return bonferroni_alpha(total_rate, max_examples)
