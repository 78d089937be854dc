"""Token-tree verification: one target forward over the unique nodes of the draft paths.

The draft paths of a block (the B paths of ``mpfr`` / ``invariant`` / ``specinfer``, which
share prefixes) form a token tree rooted at the committed sequence.  Instead of a batch of
``B`` padded paths (:class:`specbound.llm.PairBackend`'s default), the tree's unique nodes
are fed once, in one sequence, after the tokens the cache does not hold yet; a 4-D
attention mask lets every node attend to the cached prefix, the pending tokens and its own
ancestors only, and each node gets the position id of its depth (SpecInfer, Miao et al.
2024, arXiv:2305.09781, §4 "tree-based parallel decoding"; Medusa, Cai et al. 2024,
arXiv:2401.10774, tree attention).  The logits at a node are then those of the path ending
there, as if the path were fed alone.
"""

from __future__ import annotations

from specbound.llm._deps import require_llm_extra

torch = require_llm_extra()

__all__ = ["TreeInputs", "tree_inputs"]


class TreeInputs:
    """The inputs of one tree forward.

    Attributes
    ----------
    input_ids : LongTensor (1, n_pending + n_nodes)
    position_ids : LongTensor (1, n_pending + n_nodes)
    attention_mask : float tensor (1, 1, n_pending + n_nodes, past + n_pending + n_nodes)
        0 where a query attends, the dtype's minimum elsewhere (an additive mask, accepted by
        transformers' eager and SDPA attention as a custom 4-D mask).
    row : dict
        Path (tuple of token ids, ``()`` the committed sequence) -> index of the query
        position whose logits give the distribution after that path.
    """

    def __init__(self, input_ids, position_ids, attention_mask, row):
        self.input_ids = input_ids
        self.position_ids = position_ids
        self.attention_mask = attention_mask
        self.row = row


def tree_inputs(pending, paths, past: int, *, dtype=torch.float32, device="cpu") -> TreeInputs:
    """Inputs for verifying every path of ``paths`` (and their prefixes) in one forward.

    Parameters
    ----------
    pending : sequence of int
        Committed tokens after the ``past`` cached ones (at least one).
    paths : iterable of tuples of int
        Draft paths continuing the committed sequence.
    past : int
        Number of positions already in the key-value cache.
    """
    pending = [int(t) for t in pending]
    if not pending:
        raise ValueError("pending: at least one committed token must be fed")
    nodes: list[tuple] = []
    seen = set()
    for p in dict.fromkeys(tuple(p) for p in paths):
        for i in range(1, len(p) + 1):
            node = p[:i]
            if node not in seen:
                seen.add(node)
                nodes.append(node)
    nodes.sort(key=len)  # parents before children (stable: first-seen order per depth)
    n0, m = len(pending), len(nodes)
    q = n0 + m
    index = {node: n0 + i for i, node in enumerate(nodes)}
    allowed = torch.zeros((q, past + q), dtype=torch.bool)
    allowed[:, :past] = True
    for i in range(n0):
        allowed[i, past:past + i + 1] = True
    ids = pending + [node[-1] for node in nodes]
    pos = list(range(past, past + n0))
    for node in nodes:
        r = index[node]
        allowed[r, past:past + n0] = True
        for j in range(1, len(node) + 1):
            allowed[r, past + index[node[:j]]] = True
        pos.append(past + n0 - 1 + len(node))
    mask = torch.zeros((1, 1, q, past + q), dtype=dtype)
    mask.masked_fill_(~allowed[None, None], torch.finfo(dtype).min)
    row = {(): n0 - 1, **index}
    return TreeInputs(torch.tensor([ids], dtype=torch.long, device=device),
                      torch.tensor([pos], dtype=torch.long, device=device),
                      mask.to(device), row)
