r"""Exact tokens per block of lossless hierarchical speculative decoding (HSD).

Hierarchical speculative decoding (Zhou, Huang, Li, Wu, Wang, Zhang, Lin & Cheng, ICLR 2026,
"Overcoming joint intractability with lossless hierarchical speculative decoding",
arXiv:2601.05724) verifies a draft block ``x_1..x_L ~ Q`` through the joint ratios
:math:`R_k = P(x_{\le k}) / Q(x_{\le k})` of its prefixes, capped as

.. math:: c_k = \frac{R_k}{\max(1, R_1, \dots, R_k)}, \qquad c_0 = 1 .

The whole block is kept with probability :math:`a = c_L`; otherwise the verification steps
back from level :math:`L - 1` towards the root, leaving level :math:`k` with probability
:math:`b_k = 1 - A_k / \max(A_k, D_k)` (:math:`A_k`, :math:`D_k` the excess and deficit
:math:`\sum_v (c_k P_k(v) - Q_k(v))_\pm` of the branch after :math:`x_{\le k}`), and keeps
:math:`x_{\le \tau}` with :math:`\tau` the first level it does not leave (level 0 is never
left).  Given the full draft path, therefore,

.. math:: E[\tau \mid x_{\le L}] = L\,a + (1 - a) \sum_{k=1}^{L-1}
          \Bigl(1 - \prod_{j=k}^{L-1} b_j\Bigr),

and one more token (the correction or the bonus) ends the block.  :func:`hsd_block_tokens`
sums this over every draft path, an enumeration independent of block verification's
(:func:`specbound.theory.blockver_block_tokens`, which sums the residual weights); the two
agree because :math:`c_k` is block verification's residual weight and :math:`1 - b_k` its
:math:`h_k` (``docs/hsd.md``).  With ``acceptance="joint"`` the full block is kept with
:math:`\min(1, R_L)`, the test of the authors' released code; that verifier is not lossless
and its value can exceed block verification's, the largest of any lossless verification of
one draft block (Sun et al. 2024, arXiv:2403.10444; Thomas & Pal 2026, arXiv:2602.16961,
for verifiers that also read the off-path probabilities, as HSD does).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from specbound._validation import as_block_inputs, as_choice, as_int
from specbound.theory.blockver import MAX_BLOCKVER_PATHS, sum_over_draft_paths

__all__ = ["HSD_ACCEPTANCES", "hsd_block_tokens"]

#: the test of the full block: ``"capped"`` (lossless HSD, the capped joint ratio ``c_L``)
#: or ``"joint"`` (the released code's uncapped ``min(1, R_L)``; not lossless)
HSD_ACCEPTANCES = ("capped", "joint")
#: largest lookahead of :func:`hsd_block_tokens`
MAX_HSD_LOOKAHEAD = 64
#: most draft paths :func:`hsd_block_tokens` enumerates (``sum_{d < L} n^d`` bounds them):
#: block verification's, whose enumeration it shares
MAX_HSD_PATHS = MAX_BLOCKVER_PATHS


def _step_back(c: float, p: np.ndarray, q: np.ndarray) -> float:
    """``1 - A / max(A, D)`` of a branch with capped ratio ``c`` (0 when balanced)."""
    d = c * p - q
    a = float(np.maximum(d, 0.0).sum())
    m = max(a, float(np.maximum(-d, 0.0).sum()))
    return 0.0 if m <= 0.0 else 1.0 - a / m


def hsd_block_tokens(p_fn: Callable, q_fn: Callable, prompt, *, L: int = 4,
                     context_length: int | None = None, acceptance: str = "capped") -> float:
    """Exact expected number of tokens emitted by one block of hierarchical speculative
    decoding (Zhou et al., ICLR 2026, arXiv:2601.05724; module docstring, ``docs/hsd.md``).

    ``1 + sum_x Q(x) E[tau | x]`` over the draft paths ``x_1..x_L`` with ``E[tau | x] = L a +
    (1 - a) sum_{k=1}^{L-1} (1 - prod_{j=k}^{L-1} b_j)``: ``a`` the probability of keeping the
    whole block and ``b_j`` the step-back probability of level ``j``.

    Parameters
    ----------
    p_fn, q_fn : callable
        ``p_fn(context) -> p`` and ``q_fn(context) -> q``: the target's and the draft's
        next-token distributions (1-D, equal length) after ``context``, a 1-D int64 array of
        token ids (the prompt followed by the path).  Each output is validated.
    prompt : sequence of int
        The context the block starts from.
    L : int, 1 <= L <= 64
        Lookahead (drafts per block); the block is a full one (``L`` drafts and a bonus).
    context_length : int >= 0 or None
        Window of the models (None: the whole context): ``p_fn`` / ``q_fn`` are called once
        per distinct window.
    acceptance : {"capped", "joint"}
        The test of the full block: ``"capped"`` (default) the capped joint ratio ``c_L``, the
        lossless HSD of decoder ``hsd``; ``"joint"`` the uncapped ``min(1, R_L)`` of the
        authors' released code, which is not lossless (``docs/hsd.md``).

    Returns
    -------
    float
        Between 1 and ``L + 1``.  With ``"capped"`` it equals
        :func:`specbound.theory.blockver_block_tokens` (hence at least
        :func:`specbound.theory.expected_block_tokens` with ``scheme="sd"``, equal to it at
        ``L = 1``); ``"joint"`` is at least ``"capped"``, equal at ``L = 1``.

    Raises
    ------
    ValueError
        A non-callable ``p_fn`` / ``q_fn``, ``L`` out of range or an enumeration of more than
        1e6 draft paths (named ``L``), an unknown ``acceptance``, an invalid ``prompt`` or
        ``context_length``, a callable returning something that is not a distribution or
        distributions of different lengths.
    """
    h, w = as_block_inputs(p_fn, q_fn, prompt, context_length)
    L = as_int(L, "L", min_value=1, max_value=MAX_HSD_LOOKAHEAD)
    capped = as_choice(acceptance, "acceptance", HSD_ACCEPTANCES) == "capped"

    def visit(depth, state, p, q, last):
        qm, lr, lm, backs = state
        backs = backs + (_step_back(math.exp(lr - lm), p, q),) if depth else backs
        live = q > 0.0
        with np.errstate(divide="ignore"):
            lrc = np.where(live & (p > 0.0), lr + np.log(p) - np.log(np.where(live, q, 1.0)),
                           -np.inf)
        lmc = np.maximum(lm, lrc)
        if last:
            a = np.exp(lrc - lmc) if capped else np.exp(np.minimum(lrc, 0.0))
            stay = sum(1.0 - math.prod(backs[k:]) for k in range(len(backs)))
            return qm * float(np.dot(q, L * a + (1.0 - a) * stay)), ()
        return 0.0, ((x, (qm * float(q[x]), float(lrc[x]), float(lmc[x]), backs))
                     for x in np.flatnonzero(live))

    # the state of a path: (Q(path), log R, log max(1, R_1..), step-back probabilities)
    return sum_over_draft_paths(p_fn, q_fn, h, w, L, (1.0, 0.0, 0.0, ()), visit)
