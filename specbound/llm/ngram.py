r"""Prompt-lookup (n-gram) drafts: an index of the n-grams of the text so far (private).

A ``ngram:N[:K]`` draft (:mod:`specbound.llm.drafts`) runs no model.  At the start of every
block it looks up the last ``N`` committed tokens (prompt plus text so far) among their
earlier occurrences and proposes what followed them (prompt lookup decoding, Saxena 2023;
transformers' ``generate(prompt_lookup_num_tokens=...)``; vLLM's n-gram speculator).

:class:`NgramIndex` keeps, for every n-gram of the committed tokens that has a continuation,
the list of the positions where it ends; appending a token registers one n-gram (the one
that ends just before it, which now has a continuation), so the index is kept up to date in
``O(N)`` per token, and a lookup reads the list of one key from its end, a bounded number of
entries (:data:`SCAN`), never the text: the cost per token does not grow with the text.
With ``min_n = M < N`` (the spec's ``min=M``) it keeps the ``m``-grams of every length ``M
<= m <= N`` (``N - M + 1`` keys per appended token) and a lookup backs off: the longest
suffix of the text, ``N`` tokens down to ``M``, that has an earlier occurrence, and the
continuations of its most recent occurrences (transformers' ``max_matching_ngram_size``
tries the lengths in the same order).  The gate keeps one acceptance estimate per matched
length (a 1-gram match predicts worse than a 3-gram one), each scored only by the proposals
of its own length.

:class:`NgramDrafter` turns a lookup into the draft laws of one block (:meth:`plan`):

- the most recent earlier occurrence bounds the block's length: at most ``min(L, K, c)``
  tokens with ``c`` the number of tokens that follow it (``K`` absent: no cap but ``L``);
- the acceptance gate (below) drafts only where drafting pays, and sets the length;
- for ``B`` drafts, the continuations of the ``B`` most recent occurrences whose
  continuations differ, most recent first (fewer occurrences, fewer distinct drafts);
- draft ``b``'s own law (:meth:`NgramDrafter.laws_each`, the backend protocol's
  ``draft_step_each``): the point mass on the next token of the ``b``-th continuation, so
  with ``m`` continuations the ``B`` drafts are those ``m`` continuations, the drafts
  ``b >= m`` repeating draft ``b mod m`` (a repeated draft adds no verified path and no
  chance of acceptance: fewer matches, fewer live drafts).  The multi-draft decoders
  (``mpfr``, ``specinfer``, ``invariant``) take these non-identically distributed drafts and
  stay exact (:mod:`specbound.sim.decode`, "Backend protocol");
- the law after a path of the block without reference to a draft (:meth:`NgramDrafter.laws`,
  ``draft_step``) is the mixture, one equal weight per selected continuation through that
  path, of point masses at their next tokens: for ``B = 1`` (or one continuation) a point
  mass, ``q = one-hot``, and with ``B > 1`` what the blocks that need i.i.d. drafts draw
  from (``mpfr``'s skipped repeats under ``repeats="skip"``), and what a log records.

The acceptance gate ("never slower than plain sampling"). A block that drafts ``k`` tokens
costs one target forward over ``k + 1`` tokens per draft row, modelled as ``c_k = 1 + f + s
(m (k + 1) - 1)`` single-token forwards, where ``m`` is the number of distinct continuations
found (at most the decoder's ``B``: the verification's rows are the distinct draft paths,
one per distinct continuation), ``f`` the fixed overhead of a forward over more than one
token and ``s`` the cost of each further token (the spec's ``ngram:N[:K]:fixed=F:cost=S``,
defaults :data:`DEFAULT_COST`: ``f = 0.5``, ``s = 0.1``, so ``c_1 = 1.6`` and ``c_4 = 1.9``;
measured on one busy CPU core, a 2-token verification costs 1.55-1.62 single-token forwards
on code and chat prompts and a 5-token one 1.84-1.91, ``benchmarks/README.md``). Such a
block emits ``E_k(a) = (1 - a^(k+1)) / (1 - a)`` tokens on average when each drafted token
is accepted with probability ``a`` independently; an ``ar`` step costs 1 and emits 1. The
drafter keeps a running estimate ``â`` of the acceptance of its own proposals
(:class:`AcceptanceEstimate`: an exponentially weighted share of accepted decisions, memory
:data:`MEMORY` decisions, prior :data:`PRIOR` with weight :data:`PRIOR_WEIGHT`), and drafts
the ``k`` (1 to the lookup's bound) that maximises ``E_k(â) / c_k`` when that ratio exceeds
1 -- i.e. when ``â`` clears the exact break-even acceptance of that ``k``
(:func:`break_even`; for ``B = 1`` and ``k = 1`` it is ``s`` itself); otherwise the block is
an ``ar`` step. Where a match exists but the gate says no, the proposal is still scored: the
``ar`` step's token equals the proposed token with probability ``p(x)``, exactly the
acceptance of a drafted point mass in ``vsps`` (``min(1, p(x) / q(x))`` with ``q(x) = 1``),
so the estimate keeps learning and the gate reopens where the text starts to repeat.
``fixed=0:cost=0`` turns the gate off (every match is drafted to its full length).

Why the output law stays the target's. The block length and the draft laws are functions of
the committed tokens only (the lookup, the scores of earlier proposals against the committed
text, the spec's constants and, in ``generate_batch``, the number of live rows), fixed
before the block draws any randomness. A law that depends only on the committed tokens, the
block path (and, per draft, the draft's index: :mod:`specbound.sim.decode`, "Backend
protocol", for why the multi-draft decoders stay exact with drafts of different laws) is a
draft model in the sense of every decoder here, and every decoder is exact for any draft and
any block length chosen this way (Leviathan et al. 2023, arXiv:2211.17192, Thm. 1; Liu, Wan,
Gao & Gündüz 2026, arXiv:2609.21858, Alg. 1, 4, 10): conditionally on the past, each block
emits the target's law; by induction on the blocks so does the whole sequence. For the same
reason the choice is deterministic given the seed (no clock or timing enters it), and keyed
decoders emit the same tokens as with any other draft (their tokens do not depend on the
draft at all). Without an occurrence, or when the gate says no, the block has no draft
(``ell = 0``): the decoder's own one-token step from the target's law, i.e. an ``ar`` step
at the cost of one single-token target forward (never a verification of an empty draft
beside it). """

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

#: most entries of one key's occurrence list read by a lookup (the ``B`` distinct
#: continuations are searched among the ``SCAN * B`` most recent occurrences)
SCAN = 8
#: default verify-cost model ``(f, s)`` of the gate: a block drafting ``k`` tokens in ``m``
#: rows costs ``1 + f + s (m (k + 1) - 1)`` single-token forwards (one busy CPU core:
#: ``c_1`` 1.55-1.62, ``c_4`` 1.84-1.91 on code and chat prompts)
DEFAULT_COST = (0.5, 0.1)
#: the acceptance estimate before any proposal was scored, and its weight in decisions:
#: below every break-even of the default cost model (``E_k(0.45) < c_k`` for every ``k``),
#: so the default gate starts closed and opens once a scored proposal was accepted
#: (``(1 + 4 * 0.45) / 5 = 0.56``): the first match of a run is scored on an ``ar`` step,
#: not verified at the price of a drafted block
PRIOR, PRIOR_WEIGHT = 0.45, 4.0
#: memory of the acceptance estimate, in decisions (weights decay by ``1 - 1 / MEMORY``)
MEMORY = 32


def expected_tokens(a: float, k: int) -> float:
    """``E_k(a) = 1 + a + ... + a^k``: mean tokens of a block drafting ``k`` tokens, each
    accepted with probability ``a`` independently (plus the correction or bonus token)."""
    return float(sum(a ** i for i in range(int(k) + 1)))


def verify_cost(k: int, cost, B: int = 1) -> float:
    """``c_k = 1 + f + s (B (k + 1) - 1)``: a block drafting ``k`` tokens in ``B`` rows, in
    single-token forwards (``cost = (f, s)``; ``k = 0``: 1, an ``ar`` step)."""
    f, s = cost
    return 1.0 + float(f) + float(s) * (int(B) * (int(k) + 1) - 1) if k > 0 else 1.0


def break_even(c: float, k: int) -> float:
    """The exact break-even acceptance: the smallest ``a`` in [0, 1] with
    ``E_k(a) >= c`` (``E_k(a) / c = 1`` where ``c > 1``; 0 where ``c <= 1``; NaN where even
    ``a = 1`` does not pay, ``c > k + 1``).  ``E_k`` is increasing on [0, 1], so bisection
    (60 halvings: below 1e-17)."""
    c, k = float(c), int(k)
    if c <= 1.0:
        return 0.0
    if c > k + 1:
        return float("nan")
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if expected_tokens(mid, k) >= c:
            hi = mid
        else:
            lo = mid
    return hi


def forward_seconds(pair, ids, widths, reps: int = 7) -> list[float]:
    """Median seconds of a target forward of ``1 + width`` tokens over the cache of
    ``ids[:-1]``, for each ``width`` of ``widths`` (``reps`` timings each, every one on a fresh
    copy of the cache): the measured verify costs behind :func:`break_even` (a drafted block of
    ``k`` tokens is one forward of ``k + 1``; ``width = 0`` is the plain one-token step)."""
    import copy
    import time

    import torch

    base = pair.target_logprobs(torch.as_tensor(ids[:-1])[None], use_cache=True)
    out = []
    for width in widths:
        xs = []
        for _ in range(reps):
            cache = copy.deepcopy(base.cache)
            x = torch.as_tensor([list(ids[-1:]) + [int(ids[-1])] * width])
            t0 = time.perf_counter()
            pair.target_logprobs(x, cache=cache, use_cache=True, num_positions=width + 1)
            xs.append(time.perf_counter() - t0)
        out.append(float(np.median(xs)))
    return out


def forward_cost(n: int, cost) -> float:
    """One forward over ``n`` tokens in all (the rows of a batch together), in single-token
    forwards: ``1 + f + s (n - 1)`` (1 for ``n <= 1``; ``cost = (f, s)``)."""
    f, s = cost
    return 1.0 + float(f) + float(s) * (int(n) - 1) if n > 1 else 1.0


def best_length(a: float, bound: int, cost, B: int = 1, rows: int = 1) -> int:
    """The gate: the ``k`` in ``1 .. bound`` maximising the tokens per cost of the step's
    forward if that beats an ``ar`` step, else 0.  ``cost = (0, 0)``: ``bound`` (drafting is
    free).

    One sequence (``rows = 1``): ``E_k(a) / c_k`` against 1 (``c_k``: :func:`verify_cost`).
    In a batch of ``rows`` live sequences whose forwards run as one, padded to the widest
    block (:mod:`specbound.llm.batch`), with the others taking one-token steps: drafting
    ``k`` tokens in ``B`` rows makes the step a forward over ``(rows - 1 + B) (k + 1)``
    tokens that yields ``rows - 1 + E_k(a)`` tokens, against ``rows`` tokens from a forward
    over ``rows`` (both priced by :func:`forward_cost`): the batch's expected gain must clear
    the batched break-even, and a wider batch needs a higher acceptance."""
    if bound <= 0:
        return 0
    if tuple(cost) == (0.0, 0.0):
        return int(bound)
    R = int(rows)
    best, k_best = (1.0, 0) if R == 1 else (R / forward_cost(R, cost), 0)
    for k in range(1, int(bound) + 1):
        g = ((expected_tokens(a, k) / verify_cost(k, cost, B)) if R == 1 else
             (R - 1 + expected_tokens(a, k)) / forward_cost((R - 1 + B) * (k + 1), cost))
        if g > best:
            best, k_best = g, k
    return k_best


class AcceptanceEstimate:
    """Exponentially weighted share of accepted proposals: ``(A + w0 a0) / (D + w0)`` with
    ``A``, ``D`` the decayed counts of accepted decisions and of decisions (each older
    decision's weight multiplied by ``1 - 1 / memory`` at every new one), ``a0`` the prior
    and ``w0`` its weight."""

    def __init__(self, prior: float = PRIOR, weight: float = PRIOR_WEIGHT,
                 memory: float = MEMORY):
        self.prior, self.weight, self.decay = float(prior), float(weight), 1.0 - 1.0 / memory
        self.accepted = self.decisions = 0.0

    def add(self, accepted: bool) -> None:
        self.accepted = self.accepted * self.decay + (1.0 if accepted else 0.0)
        self.decisions = self.decisions * self.decay + 1.0

    @property
    def value(self) -> float:
        return ((self.accepted + self.weight * self.prior)
                / (self.decisions + self.weight))


class NgramIndex:
    """Where every ``m``-gram of a growing token sequence ends (those with a continuation),
    for every length ``m`` from ``min_n`` to ``n``.

    ``positions(key)`` lists the end positions ``i`` (``tokens[i - m + 1 : i + 1] == key``,
    ``i < len(tokens) - 1``) in increasing order, for a key of any indexed length ``m``.
    :meth:`extend` costs ``O(n (n - min_n + 1))`` per token (one key per length), whatever
    the length of the text.
    """

    def __init__(self, n: int, tokens: Sequence[int] = (), min_n: int | None = None):
        self.n = int(n)
        self.min_n = self.n if min_n is None else int(min_n)
        if not 1 <= self.min_n <= self.n:
            raise ValueError(f"min_n: must be an integer in [1, n = {self.n}], got {min_n!r}")
        self.tokens: list[int] = []
        self._ends: dict[tuple, list[int]] = {}
        self.extend(tokens)

    def __len__(self) -> int:
        return len(self.tokens)

    def extend(self, tokens) -> None:
        """Append tokens; each registers the ``m``-grams (``min_n <= m <= n``) that end just
        before it."""
        n0, n, seq, ends = self.min_n, self.n, self.tokens, self._ends
        for t in tokens:
            seq.append(int(t))
            i = len(seq) - 2  # the m-grams ending at i now have a continuation
            for m in range(n0, min(n, i + 1) + 1):
                ends.setdefault(tuple(seq[i - m + 1:i + 1]), []).append(i)

    def positions(self, key) -> list[int]:
        """End positions of ``key`` with a continuation, increasing (a copy)."""
        return list(self._ends.get(tuple(int(t) for t in key), ()))

    def match(self, length: int, count: int = 1):
        """``(m, continuations)``: the longest suffix of the tokens, ``m`` tokens long
        (``n`` down to ``min_n``), that has an earlier occurrence, and up to ``count``
        distinct continuations of it, most recent occurrence first; ``(0, [])`` when no
        suffix of an indexed length has one.

        The most recent occurrence's continuation has ``c = min(length, tokens after it)``
        tokens; the others are the next most recent occurrences
        followed by at least ``c`` tokens whose first ``c`` tokens differ from those already
        taken (among the :data:`SCAN` ``* count`` most recent occurrences)."""
        seq = self.tokens
        for m in range(min(self.n, len(seq)), self.min_n - 1, -1):
            lst = self._ends.get(tuple(seq[-m:]))
            if lst:
                return m, self._distinct(lst, int(length), count)
        return 0, []

    def _distinct(self, lst, length, count):
        seq = self.tokens
        c = min(length, len(seq) - 1 - lst[-1])
        out: list[tuple] = []
        seen: set = set()
        for i in reversed(lst[max(len(lst) - SCAN * max(count, 1), 0):]):
            if len(seq) - 1 - i < c:
                continue
            cont = tuple(seq[i + 1:i + 1 + c])
            if cont not in seen:
                seen.add(cont)
                out.append(cont)
                if len(out) == count:
                    break
        return out

    def continuations(self, length: int, count: int = 1):
        """Up to ``count`` distinct continuations of the longest matching suffix
        (:meth:`match`), most recent occurrence first: a list of tuples of one length
        (``[]`` without an occurrence)."""
        return self.match(length, count)[1]


def naive_continuations(tokens, n: int, length: int, count: int = 1,
                        min_n: int | None = None):
    """:meth:`NgramIndex.continuations` by scanning the whole sequence, the suffix lengths
    ``n`` down to ``min_n`` in turn (the tests' reference; no :data:`SCAN` bound when the
    occurrences are few)."""
    seq = [int(t) for t in tokens]
    for m in range(n, (n if min_n is None else min_n) - 1, -1):
        if len(seq) < m:
            continue
        key = seq[-m:]
        occ = [i for i in range(m - 1, len(seq) - 1) if seq[i - m + 1:i + 1] == key]
        if not occ:
            continue
        c = min(int(length), len(seq) - 1 - occ[-1])
        out: list[tuple] = []
        for i in reversed(occ[max(len(occ) - SCAN * max(count, 1), 0):]):
            cont = tuple(seq[i + 1:i + 1 + c])
            if len(seq) - 1 - i >= c and cont not in out:
                out.append(cont)
                if len(out) == count:
                    break
        return out
    return []


class NgramDrafter:
    """The draft laws of an ``ngram:N[:K]`` draft, block by block (module docstring).

    ``cost``: the gate's verify-cost model ``(f, s)`` (None: :data:`DEFAULT_COST`;
    ``(0, 0)``: no gate).  ``min_n``: the shortest suffix looked up when the last ``n``
    tokens have no earlier occurrence (None: ``n``, no shorter one); the gate keeps one
    acceptance estimate per matched length (:attr:`estimates`; :attr:`estimate` is the
    ``n``-gram's), since a shorter match is a weaker prediction.
    """

    def __init__(self, n: int, k: int | None, vocab_size: int, cost=None,
                 min_n: int | None = None):
        self.index = NgramIndex(n, min_n=min_n)
        self.k = k
        self.vocab_size = int(vocab_size)
        self.cost = DEFAULT_COST if cost is None else (float(cost[0]), float(cost[1]))
        self._new_estimates()
        self._trie: dict[tuple, dict[int, int]] = {}
        self._conts: list[tuple] = []  # the planned block's continuations, most recent first
        #: what the block now planned proposes: the trie of its drafts (drafted block) or
        #: the one proposed token an ``ar`` step is scored against; None: no proposal
        self._scored: tuple | None = None

    def _new_estimates(self) -> None:
        #: one running acceptance estimate per matched suffix length
        self.estimates = {m: AcceptanceEstimate()
                          for m in range(self.index.min_n, self.index.n + 1)}
        self.estimate = self.estimates[self.index.n]

    def reset(self, tokens) -> None:
        self.index = NgramIndex(self.index.n, tokens, self.index.min_n)
        self._new_estimates()
        self._trie = {}
        self._conts = []
        self._scored = None

    def extend(self, tokens) -> None:
        """Commit a block's tokens: score the block's proposals against them, then index
        them."""
        tokens = [int(t) for t in tokens]
        if self._scored is not None and tokens:
            trie, ell, m = self._scored
            estimate = self.estimates[m]
            path: tuple = ()
            for s in range(min(ell, len(tokens))):
                ok = tokens[s] in trie.get(path, ())
                estimate.add(ok)
                if not ok:
                    break
                path = path + (tokens[s],)
        self._scored = None
        self.index.extend(tokens)
        self._trie = {}
        self._conts = []

    @staticmethod
    def _make_trie(conts) -> dict[tuple, dict[int, int]]:
        trie: dict[tuple, dict[int, int]] = {}
        for c in conts:
            for s in range(len(c)):
                kids = trie.setdefault(c[:s], {})
                kids[c[s]] = kids.get(c[s], 0) + 1
        return trie

    def plan(self, ell: int, B: int, rows: int = 1) -> int:
        """Look up the block's drafts and apply the gate (priced for a batch of ``rows`` live
        sequences: :func:`best_length`); returns the block's length (0: no occurrence, or
        drafting does not pay: an ``ar`` step)."""
        cap = ell if self.k is None else min(ell, self.k)
        m, conts = self.index.match(cap, B) if cap > 0 else (0, [])
        self._trie = {}
        self._conts = []
        self._scored = None
        if not conts:
            return 0
        # the verification's rows: the distinct leaves, one per distinct continuation (draft
        # b >= m repeats draft b mod m), not B
        k = best_length(self.estimates[m].value, len(conts[0]), self.cost, len(conts), rows)
        if k == 0:  # no draft; the ar step's token is scored against the first proposal
            self._scored = ({(): {conts[0][0]: 1}}, 1, m)
            return 0
        if k < len(conts[0]):
            conts = self.index.match(k, B)[1]
        self._trie = self._make_trie(conts)
        self._conts = conts
        self._scored = (self._trie, k, m)
        return k

    def laws_each(self, paths) -> np.ndarray:
        """Draft ``b``'s own law after its own path ``paths[b]`` (one row per draft): the
        point mass on the next token of the planned block's ``b``-th continuation (draft
        ``b >= m`` repeats draft ``b mod m`` of the ``m`` found); uniform off it (no decoder
        drafts there)."""
        Q = np.zeros((len(paths), self.vocab_size))
        m = len(self._conts)
        for b, p in enumerate(paths):
            p = tuple(p)
            c = self._conts[b % m] if m else ()
            if len(p) < len(c) and c[:len(p)] == p:
                Q[b, c[len(p)]] = 1.0
            else:
                Q[b] = 1.0 / self.vocab_size
        return Q

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
