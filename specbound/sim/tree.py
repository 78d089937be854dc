"""Monte Carlo of tree (multi-candidate) verification with greedy drafting.

The simulator of Zhou et al. (2026), "Revisiting lossy verification in speculative
decoding", arXiv:2607.26627, App. G (EAGLE-3-style tree verification against a truncated
target); the closed-form per-position laws it is tested against are in
:mod:`specbound.theory.tree`.  Argument order is that of the theory functions: the target,
what was drafted (``q`` or ``candidates``), the ``rule``, then keyword arguments.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from specbound._validation import (
    as_bool_mask,
    as_choice,
    as_int,
    as_int_array,
    as_prob,
    as_rng,
    check_alloc,
)
from specbound.sim.lossy import categorical_draw
from specbound.sim.results import Estimate
from specbound.theory.tree import TREE_RULES

__all__ = ["TREE_RULES", "TreeVerificationResult", "simulate_tree_verification"]


@dataclass(frozen=True)
class TreeVerificationResult:
    """Outcome of :func:`simulate_tree_verification`.

    Attributes
    ----------
    rule : str
        The verification rule.
    D, L, n : int
        Candidates per position, depth (drafted positions per step) and number of steps.
    candidates : numpy.ndarray of int64, shape (L, D)
        The ordered candidates ``x^(1), ..., x^(D)`` of every position.
    p_theta : numpy.ndarray, shape (L, V)
        The truncated targets the candidates were verified against.
    reached : numpy.ndarray of int64, shape (L,)
        Number of steps in which position ``t`` was verified (all earlier positions
        accepted a candidate).
    emitted_counts : numpy.ndarray of int64, shape (L, V)
        ``emitted_counts[t, v]``: steps in which position ``t`` was reached and emitted
        token ``v`` (an accepted candidate or, after ``D`` rejections, the correction).
    accepted_counts : numpy.ndarray of int64, shape (L,)
        Steps in which position ``t`` was reached and accepted a candidate.
    accepted_per_block : numpy.ndarray of int64, shape (n,)
        Accepted drafted tokens of every step (0..L), the bonus/correction token excluded
        (``accepted_per_block + 1`` tokens are emitted by the step).
    """

    rule: str
    D: int
    L: int
    n: int
    candidates: np.ndarray
    p_theta: np.ndarray
    reached: np.ndarray
    emitted_counts: np.ndarray
    accepted_counts: np.ndarray
    accepted_per_block: np.ndarray

    @property
    def emitted_law(self) -> np.ndarray:
        """Empirical law of the token emitted at each position, shape (L, V) (rows of
        positions never reached are NaN)."""
        out = np.full(self.emitted_counts.shape, np.nan)
        ok = self.reached > 0
        out[ok] = self.emitted_counts[ok] / self.reached[ok, None]
        return out

    @property
    def acceptance(self) -> np.ndarray:
        """Per-position acceptance ``a_t(C)`` = accepted / reached, shape (L,) (NaN where
        not reached)."""
        out = np.full(self.L, np.nan)
        ok = self.reached > 0
        out[ok] = self.accepted_counts[ok] / self.reached[ok]
        return out

    @property
    def accepted_per_step(self) -> Estimate:
        """Mean accepted drafted tokens per step (the "L" of Zhou et al. 2026, Tables 9-10)."""
        return Estimate.from_samples(self.accepted_per_block)

    @property
    def block_efficiency(self) -> Estimate:
        """Mean tokens per step including the bonus / correction token (accepted + 1)."""
        return Estimate.from_samples(self.accepted_per_block + 1)


def _tree_position(rule, p_theta, allowed, cand):
    """Per-candidate acceptance probabilities ``h_i`` (given that the earlier candidates
    were rejected) and the correction law after ``D`` rejections, for one position.

    Greedy drafting makes the candidates deterministic, so the rejection history before
    candidate ``i`` is always "all earlier ones rejected" and the residual after it is
    fixed: the zero-and-renormalise update of App. G.3(i) is applied here once.
    """
    res = p_theta.copy()
    h = np.zeros(cand.size)
    for i, x in enumerate(cand):
        mass = res.sum()
        if rule == "lossless":
            # min(1, p_res(x) / q(x)) with the greedy draft a point mass (q(x) = 1), Eq. 67
            h[i] = res[x] / mass if mass > 0 else 0.0
        else:
            # SpecCascade / typical acceptance: 1[x in A], Eqs. 68-69
            h[i] = 1.0 if allowed[x] else 0.0
        if h[i] >= 1.0:
            break  # later candidates are never examined
        res[x] = 0.0  # zero-and-renormalise on rejection
    return h, res


def simulate_tree_verification(p, q=None, rule: str = "lossless", *, D: int = 1, L=None,
                               allowed=None, candidates=None, n: int = 100_000,
                               seed=0, normalize: bool = False) -> TreeVerificationResult:
    """Monte Carlo of EAGLE-style tree verification with greedy drafting (Zhou et al. 2026,
    App. G).

    Each step walks ``L`` drafted positions.  Position ``t`` has ``D`` ordered candidates
    ``x^(1), ..., x^(D)`` (greedy drafting: the top-``D`` tokens of ``q_t``, ties broken by
    the lower token id, or given by ``candidates``), examined in order against the truncated
    target ``p_Theta,t = p_t 1_A / Z_Theta(p_t)``, each accepted iff ``U <= h(x^(i))`` for a
    fresh uniform ``U`` (App. G.2):

    - ``"lossless"`` (truncation sampling + SD, Eq. 67): ``h = min(1, p_res(x) / q(x))`` with
      the greedy draft a point mass, i.e. ``h = p_res(x)``, where ``p_res`` starts at
      ``p_Theta`` and a rejected candidate is zeroed and ``p_res`` renormalised; after ``D``
      rejections the position emits a correction from ``p_res``.  The position then emits
      ``p_Theta`` exactly (Lemma 2(i)).
    - ``"speccascade"`` (Eq. 68) and ``"typical"`` (Medusa typical acceptance, Eq. 69):
      ``h = 1[x in A]``, so the first in-set candidate is accepted surely (a point mass,
      Theorem 1 statement 2); if no candidate is in ``A`` the correction comes from
      ``p_Theta`` (zero on the rejected candidates, which lie outside ``A``).  The two rules
      differ only in the allowed set the caller passes: the min-p set for SpecCascade, the
      eta set for typical acceptance (``theory.min_p_allowed`` / ``theory.eta_allowed``).

    An accepted candidate moves the walk to position ``t + 1``; a rejection of all ``D``
    candidates ends the step with the correction token, and a walk that accepts at all ``L``
    positions ends with a bonus token (counted, not sampled: its law is the next position's
    target, which is not an input).  The per-position pairs do not depend on which candidate
    was accepted (a sequence of per-position pairs, as in App. G.3's per-position analysis).

    Parameters
    ----------
    p : array_like, shape (V,) or (L, V)
        Target at every position (one row per position, or one vector for all).
    q : array_like, shape (V,) or (L, V), optional
        Draft; required unless ``candidates`` is given (only its order matters).
    rule : {"lossless", "truncation", "speccascade", "typical"}
        One of :data:`TREE_RULES`; ``"speccascade"`` and ``"typical"`` are aliases of the
        indicator rule ``"truncation"`` (as in ``theory.tree_emitted_distribution``).
    D : int >= 1
        Candidates per position (at most V).
    L : int >= 1, optional
        Depth; required when ``p`` and ``q`` are 1-D, else the number of rows.
    allowed : bool array, shape (V,) or (L, V), optional
        The truncation set ``A`` (it must carry target mass at every position); default:
        the support of ``p`` (no truncation).  Required for ``"speccascade"`` and
        ``"typical"``.
    candidates : int array, shape (D,) or (L, D), optional
        Explicit ordered candidates (distinct token ids) instead of greedy drafting.
    n : int >= 1
        Number of steps (the call needs about ``8 n (D + 3)`` bytes and refuses sizes above
        the package's memory limit, naming ``n``).
    seed : int, SeedSequence or Generator
    normalize : bool, default False
        Rescale the rows of ``p`` and ``q`` to sum to 1 instead of refusing rows whose sum is
        off by more than the tolerance of :func:`specbound._validation.sum_atol`.

    Returns
    -------
    TreeVerificationResult
    """
    rule = as_choice(rule, "rule", TREE_RULES)
    pa = as_prob(p, "p", normalize=normalize)
    V = pa.shape[-1]
    if L is not None:
        L = as_int(L, "L", min_value=1)
    if pa.ndim == 2:
        if L is not None and L != pa.shape[0]:
            raise ValueError(f"L: must equal the number of rows of p ({pa.shape[0]}), got {L}")
        L = pa.shape[0]
    elif L is None:
        raise ValueError("L: required when p is 1-D")
    check_alloc("L", L * V, 8 * 5, what="per-position targets, truncated targets and counts")
    p2 = np.ascontiguousarray(np.broadcast_to(pa, (L, V)))
    D = as_int(D, "D", min_value=1, max_value=V)
    n = as_int(n, "n", min_value=1)
    check_alloc("n", n * (D + 3), 8, what="uniforms, tokens and per-step counts")
    if candidates is None:
        if q is None:
            raise ValueError("q: required unless candidates are given")
        qa = as_prob(q, "q", normalize=normalize)
        if qa.shape[-1] != V:
            raise ValueError(f"q: shape mismatch with p: vocabulary sizes {qa.shape[-1]} and {V}")
        if qa.ndim == 2 and qa.shape[0] != L:
            raise ValueError(f"q: must have {L} rows (one per position), got {qa.shape[0]}")
        q2 = np.broadcast_to(qa, (L, V))
        # greedy drafting: top-D of q, ties to the lower token id (stable sort)
        cand = np.argsort(-q2, axis=1, kind="stable")[:, :D].astype(np.int64)
    else:
        c = np.asarray(candidates) if not isinstance(candidates, str | bytes) else None
        if c is None or c.dtype.kind not in "iu" or c.ndim not in (1, 2):
            raise ValueError("candidates: must be an integer array of shape (D,) or (L, D)")
        c = as_int_array(c, "candidates")
        try:
            cand = np.ascontiguousarray(np.broadcast_to(c, (L, D))).astype(np.int64)
        except ValueError:
            raise ValueError(f"candidates: shape {c.shape} does not fit (L, D) = ({L}, {D})"
                             ) from None
        if np.any(cand < 0) or np.any(cand >= V):
            raise ValueError(f"candidates: token ids must lie in [0, {V})")
        if any(np.unique(row).size != D for row in cand):
            raise ValueError("candidates: the candidates of a position must be distinct")
    if allowed is None:
        if rule != "lossless":
            raise ValueError(f"allowed: required by rule {rule!r}")
        a2 = p2 > 0
    else:
        a2 = as_bool_mask(allowed, "allowed", (L, V))
        if not np.all((a2 & (p2 > 0)).any(axis=1)):
            raise ValueError("allowed: the allowed set carries no target mass at some "
                             "position; the truncated target is undefined")
    rng = as_rng(seed)

    p_theta = p2 * a2
    p_theta /= p_theta.sum(axis=1, keepdims=True)
    emitted = np.zeros((L, V), dtype=np.int64)
    reached = np.zeros(L, dtype=np.int64)
    acc_counts = np.zeros(L, dtype=np.int64)
    accepted = np.zeros(n, dtype=np.int64)
    active = np.arange(n)
    for t in range(L):
        m = active.size
        reached[t] = m
        if m == 0:
            continue
        h, res = _tree_position(rule, p_theta[t], a2[t], cand[t])
        u = rng.random((m, D))
        ok = u < h[None, :]
        hit = ok.any(axis=1)
        first = ok.argmax(axis=1)
        tok = np.empty(m, dtype=np.int64)
        tok[hit] = cand[t][first[hit]]
        miss = np.flatnonzero(~hit)
        if miss.size:
            tok[miss] = categorical_draw(res, rng.random(miss.size))
        emitted[t] = np.bincount(tok, minlength=V)
        acc_counts[t] = int(hit.sum())
        active = active[hit]
        accepted[active] += 1
    return TreeVerificationResult(rule=rule, D=D, L=L, n=n, candidates=cand,
                                  p_theta=p_theta, reached=reached, emitted_counts=emitted,
                                  accepted_counts=acc_counts, accepted_per_block=accepted)
