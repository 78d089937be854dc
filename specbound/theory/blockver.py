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

from specbound._validation import as_block_inputs, as_int, as_pair

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
    laws: dict = {}
    n_vocab: list[int] = []

    def law(ctx):
        key = tuple(ctx) if w is None else (tuple(ctx[max(len(ctx) - w, 0):]) if w > 0 else ())
        if key not in laws:
            c = np.array(ctx, dtype=np.int64)
            p2, q2, batched = as_pair(p_fn(c), q_fn(c), names=("p_fn(context)",
                                                                "q_fn(context)"))
            if batched:
                raise ValueError("p_fn: must return one 1-D distribution per context")
            n = p2.shape[1]
            if not n_vocab:
                n_vocab.append(n)
                if n > 1 and (L - 1) * math.log(n) > math.log(MAX_BLOCKVER_PATHS) + 1e-12:
                    raise ValueError(
                        f"L: enumerating the draft paths of depth {L} over {n} tokens visits "
                        f"more than {MAX_BLOCKVER_PATHS:.0e} paths; use a smaller L or "
                        f"vocabulary, or simulate")
            elif n != n_vocab[0]:
                raise ValueError(f"p_fn: vocabulary size changed from {n_vocab[0]} to {n}")
            laws[key] = (p2[0], q2[0])
        return laws[key]

    total = 1.0
    # level by level: (path, w, Q(path)) of every path of positive draft probability
    level = [(h, 1.0, 1.0)]
    for depth in range(L):
        nxt = []
        for path, wt, qm in level:
            p, q = law(path)
            qc = qm * q
            wc = np.minimum(wt * p, qc)
            total += float(wc.sum())
            if depth == L - 1:
                continue
            for x in np.flatnonzero(qc > 0.0):
                nxt.append((path + [int(x)], float(wc[x]), float(qc[x])))
        level = nxt
    return total
