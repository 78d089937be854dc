r"""Prompt-lookup (n-gram) drafts: an index of the n-grams of the text so far (private).

A ``ngram:N[:K]`` draft (:mod:`specbound.llm.drafts`) runs no model.  At the start of every
block it looks up the last ``N`` committed tokens (prompt plus text so far) among their
earlier occurrences and proposes what followed them (prompt lookup decoding, Saxena 2023;
transformers' ``generate(prompt_lookup_num_tokens=...)``; vLLM's n-gram speculator).

:class:`NgramIndex` keeps, for every n-gram of the committed tokens that has a continuation,
the list of the positions where it ends; appending a token registers one n-gram (the one
that ends just before it, which now has a continuation), so the index is kept up to date in
``O(N)`` per token, and a lookup reads the list of one key from its end, a bounded number of
entries (:data:`SCAN`), never the text.

:class:`NgramDrafter` turns a lookup into the draft laws of one block (:meth:`plan`):

- the most recent earlier occurrence sets the block's length: ``ell = min(L, K, c)`` with
  ``c`` the number of tokens that follow it (``K`` absent: no cap but ``L``);
- for ``B`` drafts, the continuations (``ell`` tokens) of the ``B`` most recent occurrences
  whose continuations differ, most recent first (fewer occurrences, fewer distinct drafts);
- the draft law after a path of the block is the mixture, one equal weight per selected
  continuation through that path, of point masses at their next tokens; for ``B = 1`` (or
  one continuation) a point mass: ``q = one-hot``.

A law that depends only on the committed tokens and the block path is a draft model in the
sense of every decoder here (Leviathan et al. 2023, arXiv:2211.17192, Thm. 1; Liu, Wan, Gao
& Gündüz 2026, arXiv:2609.21858, Alg. 1, 4, 10), so the emitted law stays the target's.
Without an occurrence the block has no draft (``ell = 0``): the decoder's own one-token step
from the target's law alone, i.e. an ``ar`` step at the cost of one single-token target
forward (never a verification of an empty draft beside it).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

#: most entries of one key's occurrence list read by a lookup (the ``B`` distinct
#: continuations are searched among the ``SCAN * B`` most recent occurrences)
SCAN = 8


class NgramIndex:
    """Where every ``n``-gram of a growing token sequence ends (those with a continuation).

    ``positions(key)`` lists the end positions ``i`` (``tokens[i - n + 1 : i + 1] == key``,
    ``i < len(tokens) - 1``) in increasing order.  :meth:`extend` costs ``O(n)`` per token.
    """

    def __init__(self, n: int, tokens: Sequence[int] = ()):
        self.n = int(n)
        self.tokens: list[int] = []
        self._ends: dict[tuple, list[int]] = {}
        self.extend(tokens)

    def __len__(self) -> int:
        return len(self.tokens)

    def extend(self, tokens) -> None:
        """Append tokens; each registers the n-gram that ends just before it."""
        n, seq, ends = self.n, self.tokens, self._ends
        for t in tokens:
            seq.append(int(t))
            i = len(seq) - 2  # the n-gram ending at i now has a continuation
            if i >= n - 1:
                ends.setdefault(tuple(seq[i - n + 1:i + 1]), []).append(i)

    def positions(self, key) -> list[int]:
        """End positions of ``key`` with a continuation, increasing (a copy)."""
        return list(self._ends.get(tuple(int(t) for t in key), ()))

    def continuations(self, length: int, count: int = 1, cap: int | None = None):
        """Up to ``count`` distinct continuations of the last ``n`` tokens, most recent
        occurrence first.

        The most recent occurrence's continuation has ``m = min(cap, tokens after it)``
        tokens (``cap``: ``length``); the others are the next most recent occurrences
        followed by at least ``m`` tokens whose first ``m`` tokens differ from those already
        taken.  Returns a list of tuples of one length ``m`` (``[]`` without an occurrence).
        """
        n, seq = self.n, self.tokens
        if len(seq) < n:
            return []
        lst = self._ends.get(tuple(seq[-n:]))
        if not lst:
            return []
        m = min(int(length), len(seq) - 1 - lst[-1])
        out: list[tuple] = []
        seen: set = set()
        for i in reversed(lst[max(len(lst) - SCAN * max(count, 1), 0):]):
            if len(seq) - 1 - i < m:
                continue
            c = tuple(seq[i + 1:i + 1 + m])
            if c not in seen:
                seen.add(c)
                out.append(c)
                if len(out) == count:
                    break
        return out


def naive_continuations(tokens, n: int, length: int, count: int = 1):
    """:meth:`NgramIndex.continuations` by scanning the whole sequence (the tests'
    reference; no :data:`SCAN` bound when the occurrences are few)."""
    seq = [int(t) for t in tokens]
    if len(seq) < n:
        return []
    key = seq[-n:]
    occ = [i for i in range(n - 1, len(seq) - 1) if seq[i - n + 1:i + 1] == key]
    if not occ:
        return []
    m = min(int(length), len(seq) - 1 - occ[-1])
    out: list[tuple] = []
    for i in reversed(occ[max(len(occ) - SCAN * max(count, 1), 0):]):
        c = tuple(seq[i + 1:i + 1 + m])
        if len(seq) - 1 - i >= m and c not in out:
            out.append(c)
            if len(out) == count:
                break
    return out


class NgramDrafter:
    """The draft laws of an ``ngram:N[:K]`` draft, block by block (module docstring)."""

    def __init__(self, n: int, k: int | None, vocab_size: int):
        self.index = NgramIndex(n)
        self.k = k
        self.vocab_size = int(vocab_size)
        self._trie: dict[tuple, dict[int, int]] = {}

    def reset(self, tokens) -> None:
        self.index = NgramIndex(self.index.n, tokens)
        self._trie = {}

    def extend(self, tokens) -> None:
        self.index.extend(tokens)
        self._trie = {}

    def plan(self, ell: int, B: int) -> int:
        """Look up the block's drafts; returns its length (0: no occurrence)."""
        cap = ell if self.k is None else min(ell, self.k)
        conts = self.index.continuations(cap, B) if cap > 0 else []
        trie: dict[tuple, dict[int, int]] = {}
        for c in conts:
            for s in range(len(c)):
                kids = trie.setdefault(c[:s], {})
                kids[c[s]] = kids.get(c[s], 0) + 1
        self._trie = trie
        return len(conts[0]) if conts else 0

    def laws(self, paths) -> np.ndarray:
        """The draft law after each path of the planned block (rows of ``vocab_size``)."""
        Q = np.zeros((len(paths), self.vocab_size))
        for r, p in enumerate(paths):
            kids = self._trie.get(tuple(p))
            if not kids:  # off the planned continuations (no decoder drafts there)
                Q[r] = 1.0 / self.vocab_size
                continue
            total = sum(kids.values())
            for t, c in kids.items():
                Q[r, t] = c / total
        return Q
