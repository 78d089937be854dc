"""Hypothesis strategies for probability vectors and (p, q) pairs.

The strategies deliberately include the awkward cases: zeros, one-hot vectors, near-uniform
vectors, Zipf-like (heavy-tailed) vectors and very skewed vectors, at sizes 1..200.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

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
