r"""Exact tokens per block of block verification (Sun et al. 2024, arXiv:2403.10444).

Block verification (Sun, Mendlovic, Leviathan, Aharoni, Beirami, Ro & Suresh 2024, "Block
verification accelerates speculative decoding", arXiv:2403.10444, Alg. 2) keeps the prefix
``x_1..x_tau`` of a draft block ``x_1..x_L ~ q`` with ``P(tau >= i | x_1..x_i) = p_i``, the
*residual weight* of the prefix:

.. math:: p_0 = 1, \qquad p_i = \min\Bigl(p_{i-1} \frac{P(x_i \mid x_{<i})}{Q(x_i \mid x_{<i})},
          1\Bigr),

so the expected number of kept drafts is :math:`\sum_{i=1}^{L} E_{x \sim Q}[p_i]`, and one
more token (the correction or the bonus) is emitted per block.  Written with the unnormalised
weights :math:`w_i(x_{\le i}) = p_i\, Q(x_{\le i})` the recursion is

.. math:: w_0 = 1, \qquad w_i(x_{\le i}) = \min\bigl(w_{i-1}(x_{<i})\, P(x_i \mid x_{<i}),\;
          Q(x_{\le i})\bigr), \qquad E[\text{tokens}] = 1 + \sum_{i=1}^{L} \sum_{x_{\le i}}
          w_i(x_{\le i}),

the expected block length that Sun et al. prove to be the largest of any lossless
verification of one draft block.  Token-wise speculative sampling keeps ``x_1..x_i`` with
probability :math:`\prod_{j \le i} \min(P_j, Q_j)(x_j) \le w_i`, hence block verification
keeps at least as many tokens, and the same number at ``L = 1`` (``docs/mathematics.md``
§5.7).

The enumeration visits every draft path of positive draft probability (the weights depend
on the whole path, so there is no memoisation by context window); the model laws are
memoised by the models' window.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from specbound._validation import as_block_inputs, as_int
from specbound.theory.blocks import block_laws

__all__ = ["blockver_block_tokens"]

#: largest lookahead of :func:`blockver_block_tokens`
MAX_BLOCKVER_LOOKAHEAD = 64
#: most draft paths :func:`blockver_block_tokens` enumerates (``sum_{d < L} n^d`` bounds them)
MAX_BLOCKVER_PATHS = 1e6


def blockver_block_tokens(p_fn: Callable, q_fn: Callable, prompt, *, L: int = 4,
                          context_length: int | None = None) -> float:
    """Exact expected number of tokens emitted by one block of block verification.

    ``1 + sum_{i=1}^{L} sum_{x_1..x_i} w_i`` with ``w_i = min(w_{i-1} P(x_i | x_{<i}),
    Q(x_1..x_i))`` and ``w_0 = 1`` (module docstring; Sun et al. 2024, arXiv:2403.10444,
    Alg. 2; ``docs/mathematics.md`` §5.7): the expected kept drafts plus the correction or
    bonus token.

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

    Returns
    -------
    float
        Between 1 and ``L + 1``; at least :func:`specbound.theory.expected_block_tokens`
        with ``scheme="sd"`` (token-wise speculative sampling), equal to it at ``L = 1``.

    Raises
    ------
    ValueError
        A non-callable ``p_fn`` / ``q_fn``, ``L`` out of range or an enumeration of more than
        1e6 draft paths (named ``L``), an invalid ``prompt`` or ``context_length``, a callable
        returning something that is not a distribution or distributions of different
        lengths.
    """
    h, w = as_block_inputs(p_fn, q_fn, prompt, context_length)
    L = as_int(L, "L", min_value=1, max_value=MAX_BLOCKVER_LOOKAHEAD)

    def visit(depth, state, p, q, last):
        wt, qm = state
        qc = qm * q
        wc = np.minimum(wt * p, qc)
        kids = () if last else ((x, (float(wc[x]), float(qc[x])))
                                for x in np.flatnonzero(qc > 0.0))
        return float(wc.sum()), kids

    # the state of a path: (w, Q(path)); every path of positive draft probability
    return sum_over_draft_paths(p_fn, q_fn, h, w, L, (1.0, 1.0), visit)


def sum_over_draft_paths(p_fn: Callable, q_fn: Callable, h: list, w: int | None, L: int,
                         root, visit: Callable) -> float:
    """Internal API: ``1 +`` the sum of ``visit``'s terms over the draft paths of depth
    ``< L`` after the prompt ``h``, level by level (the enumeration of
    :func:`blockver_block_tokens` and :func:`specbound.theory.hsd_block_tokens`).

    ``visit(depth, state, p, q, last) -> (term, children)``: ``p`` / ``q`` the target's and
    the draft's laws after the path (:func:`specbound.theory.blocks.block_laws`, memoised by
    the models' window ``w``), ``state`` the path's (``root`` at the prompt), ``last`` whether
    ``depth == L - 1``; ``children`` the ``(token, state)`` pairs of the paths one token
    longer to visit (none at the last level).  The terms are added in the order visited.
    Raises ``ValueError`` naming ``L`` when ``sum_{d < L} n^d`` paths could exceed
    :data:`MAX_BLOCKVER_PATHS`.
    """

    def check_size(n):
        if n > 1 and (L - 1) * math.log(n) > math.log(MAX_BLOCKVER_PATHS) + 1e-12:
            raise ValueError(
                f"L: enumerating the draft paths of depth {L} over {n} tokens visits "
                f"more than {MAX_BLOCKVER_PATHS:.0e} paths; use a smaller L or "
                f"vocabulary, or simulate")

    law = block_laws(p_fn, q_fn, w, check_size)[1]
    total = 1.0
    level = [(h, root)]
    for depth in range(L):
        nxt = []
        for path, state in level:
            p, q = law(path)
            term, kids = visit(depth, state, p, q, depth == L - 1)
            total += term
            nxt.extend((path + [int(x)], kid) for x, kid in kids)
        level = nxt
    return total
