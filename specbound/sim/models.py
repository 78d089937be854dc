"""Synthetic autoregressive language models for sequence-level simulation.

Two families, both with a Numba-callable evaluation (``_model_kernels``) so that a kernel
can query any context without storage:

:class:`SyntheticLM`
    Next-token distributions that are a deterministic function of (model seed, last ``m``
    tokens), over vocabularies up to 50,000 tokens.  Logits are drawn from the counter-based
    mixer of :mod:`specbound.sim.prf` (no stored random tables; ``"gaussian16"`` reads a
    fixed table of normal quantiles):

    - ``kind="gaussian"``: an n-gram back-off sum of Gaussian fields,
      ``z_v(c) = scale / sqrt(m+1) * sum_{k=0}^{m} g_v^(k)(last k tokens of c)``, each
      ``g^(k)`` i.i.d. N(0, 1) over (window, token) (Box-Muller on two keyed uniforms).  The
      k = 0 term is a context-free "unigram" preference shared by all contexts.
    - ``kind="zipf"``: sorted Zipf magnitudes ``-s log(1 + rank)`` placed by a
      context-dependent permutation.  The permutation is affine, ``rank_c(v) = (a_c v + b_c)
      mod n`` with ``gcd(a_c, n) = 1`` (a pseudo-random member of a family of ``n phi(n)``
      permutations rather than a uniform one: O(n) per evaluation instead of a sort).
    - ``kind="gaussian16"``: the Gaussian back-off sum with cheap fields: ``g_v^(k)`` is
      ``Q[j_v]`` for a uniform 16-bit index ``j_v`` (the four 16-bit quarters of one mixer
      output give four tokens) and ``Q`` the table of the 2^16 midpoint quantiles of N(0, 1)
      rescaled to unit variance (``_model_kernels.normal_table``): a discretised Gaussian
      whose tails stop at +-4.33 per field (+-7.5 for the default sum of three), no
      logarithm or trigonometric function per token.  At vocabulary 50,000 an evaluation
      costs about one softmax (``benchmarks/bench_decode.py --compiled``), against about 9
      for ``"gaussian"``.  Its numbers are its own (not those of ``"gaussian"`` with the
      same seed); its entropy behaviour is the Gaussian one: mean entropy (default scale,
      T = 1, m = 2, averaged over model seeds) 2.0 / 2.6 / 3.4 nats at n = 100 / 1,000 /
      50,000 (``"gaussian"``: 2.0 / 2.6 / 3.4), and draft mismatch 0.1, 0.2, 0.3, 0.5 gives
      a mean 1 - TV of about 0.85, 0.68, 0.52, 0.28 at n = 50,000.

    then temperature and top-k (the same logits processing for target and draft, as in
    Liu, Wan, Gao & Gündüz 2026, arXiv:2609.21858, App. A.4).  Contexts shorter than ``m``
    are padded with a beginning-of-sequence token.

    **Realistic entropy (defaults).**  The default ``scale=None`` means
    ``scale = sqrt(2 log n)``, the "freezing" point of the Gaussian softmax, which gives a
    mean next-token entropy (T = 1, no top-k, m = 2) of about 3.3 nats at n = 50,000, 2.5 at
    n = 1,000 and 2.0 at n = 100 (measured with :meth:`SyntheticLM.mean_entropy`, 60
    contexts); LLM chat models at T = 1 sit around 1.5-3.5 nats per token.  ``top_k=50``
    (App. D.1 of Liu et al. 2026) caps the entropy at log 50 = 3.9 nats.

    **Drafts.**  :meth:`SyntheticLM.draft` returns a model with the same base fields plus an
    independent Gaussian logit-noise field of standard deviation ``mismatch * scale`` (so its
    logits are correlated with the target's with correlation ``1/sqrt(1+mismatch^2)``),
    optionally another temperature and/or another context length ``m`` (a Gaussian draft with
    a smaller ``m`` is the back-off model that drops the longest-window terms).  ``mismatch=0``
    with no other change returns the target itself; larger values lower the acceptance: at
    n = 50,000 (default scale) ``mismatch`` = 0.1, 0.2, 0.3, 0.5 give a mean 1 - TV of about
    0.83, 0.66, 0.51, 0.30 (15 random contexts).

:class:`MarkovLM`
    A first-order chain over a small vocabulary (rows of ``transition_matrix`` are the
    next-token distributions, ``initial`` is used for an empty context) whose exact sequence
    law can be enumerated with :meth:`MarkovLM.sequence_law`.

:class:`CachedLM`
    A memoising wrapper of any model (the next-token law is a pure function of the context).

:func:`log_perplexity`
    LPPL, the per-token log-perplexity of a sequence under a model (the quality metric of
    Liu, Wan, Gao & Gündüz 2026, arXiv:2609.21858, §6).

:func:`random_prompts`
    Uniform prompts and per-prompt decoding seeds for sequence-level studies.

The model protocol
------------------
Everything that evaluates a model in :mod:`specbound.sim` (the decoders of
:func:`specbound.sim.speculative_decode`, :func:`specbound.sim.expected_block_tokens`,
:func:`log_perplexity`) accepts any object with

- ``vocab_size`` (int) and
- ``next_distribution(context) -> p``: the next-token distribution (1-D float64, sums to 1)
  after ``context`` (a 1-D sequence of token ids in ``[0, vocab_size)``), a pure function of
  the context;

and optionally

- ``next_distributions(contexts, *, validate=True) -> P``: the batched form, one row per
  context (2-D float64).  With ``validate=False`` the contexts must already be C-contiguous
  int64 arrays of valid token ids and nothing is checked: the decoders' fast path.

:func:`next_distributions` applies the batched form of any model (falling back to
``next_distribution`` row by row), and :func:`as_language_model` validates an object against
the protocol.  The three models of this module implement both methods.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import config as _numba_config

from specbound._validation import (
    INT64_MAX,
    as_bool,
    as_choice,
    as_int,
    as_prob,
    as_real,
    as_seedseq,
    asarray_named,
    check_alloc,
)
from specbound.sim import _model_kernels as _mk

__all__ = ["CachedLM", "MarkovLM", "PromptSet", "SyntheticLM", "as_language_model",
           "log_perplexity", "next_distributions", "random_prompts"]

MAX_VOCAB = 50_000
#: the logit families of :class:`SyntheticLM` (``kind=``)
_KINDS = ("gaussian", "zipf", "gaussian16")
_KIND_CODES = {"gaussian": _mk.KIND_GAUSSIAN, "zipf": _mk.KIND_ZIPF,
               "gaussian16": _mk.KIND_GAUSSIAN16}
_NO_TABLE = np.zeros(1)
_NO_ROWS = np.zeros((1, 1))
#: largest vocabulary whose first-order rows (``n x n`` float64) a model precomputes
MAX_ROWS_VOCAB = 2048
#: first-order rows by (kind, field seed, scale, window, vocabulary): a target and its drafts
#: share them; the least recently used table is dropped beyond this many
_ROWS_CACHE: dict = {}
_ROWS_CACHE_SIZE = 4
#: largest window ``context_length`` of a :class:`SyntheticLM` (an evaluation costs
#: ``O(m^2 + m n)`` for the Gaussian kind)
MAX_CONTEXT_LENGTH = 256
#: largest number of entries of the array :meth:`MarkovLM.sequence_law` returns
MAX_LAW_ENTRIES = 10**7


def as_context(context, vocab_size, name="context") -> np.ndarray:
    arr = asarray_named(context if context is not None else [], name, dtype=object)
    if arr.ndim > 1:
        raise ValueError(f"{name}: must be a 1-D sequence of token ids, got shape {arr.shape}")
    arr = asarray_named(context if context is not None else [], name)
    if arr.size and (arr.dtype == np.bool_ or arr.dtype.kind not in "iu"):
        raise ValueError(f"{name}: must be a sequence of integer token ids")
    arr = arr.astype(np.int64).reshape(-1)
    if arr.size and (arr.min() < 0 or arr.max() >= vocab_size):
        raise ValueError(
            f"{name}: token ids must lie in [0, {vocab_size}), got range "
            f"[{arr.min()}, {arr.max()}]"
        )
    return np.ascontiguousarray(arr)


def as_contexts(contexts, vocab_size, validate, name="contexts") -> list:
    """A list of C-contiguous int64 contexts (checked unless ``validate`` is False)."""
    if isinstance(contexts, np.ndarray) and contexts.ndim == 2:
        rows = list(contexts)
    else:
        try:
            rows = list(contexts)
        except TypeError:
            raise ValueError(f"{name}: must be a sequence of contexts (1-D token id "
                             f"sequences)") from None
    if not as_bool(validate, "validate"):
        return rows
    return [as_context(r, vocab_size, name) for r in rows]


def _seed_u64(seed, name="seed") -> np.uint64:
    ss = as_seedseq(seed, name)
    return np.uint64(ss.generate_state(1, dtype=np.uint64)[0])


class SyntheticLM:
    """Deterministic synthetic LM: next-token law = f(model seed, last ``m`` tokens).

    Parameters
    ----------
    vocab_size : int
        Vocabulary size n, 1 <= n <= 50,000.
    context_length : int
        Window length ``0 <= m <= 256`` of the context the distribution depends on (an
        evaluation costs ``O(m^2 + m n)``; :data:`MAX_CONTEXT_LENGTH`).
    seed : int or SeedSequence
        Model seed (different seeds give unrelated models).  Keyword-only, as are
        ``temperature`` and ``top_k``.
    temperature : float
        Softmax temperature T > 0.
    top_k : int or None
        Keep the ``top_k`` largest logits (others get probability exactly 0).
    kind : {"gaussian", "zipf", "gaussian16"}
        Logit family (see the module docstring); ``"gaussian16"`` is the fast
        quantile-table form of ``"gaussian"``.
    scale : float or None
        Standard deviation of the Gaussian logits; None means ``sqrt(2 log n)`` (ignored by
        ``"zipf"`` except as the unit of the draft noise).
    zipf_exponent : float
        Exponent ``s`` of the Zipf magnitudes.

    Notes
    -----
    Evaluation is a pure function of its inputs (``_model_kernels.synthetic_probs``), so the
    same context always gives bit-identical probabilities.  Distributions never contain NaN;
    a token has probability 0 only when cut by top-k (or underflow at tiny temperatures).
    """

    def __init__(self, vocab_size, context_length=2, *, seed=0, temperature=1.0, top_k=None,
                 kind="gaussian", scale=None, zipf_exponent=1.1, _noise=None):
        self.vocab_size = as_int(vocab_size, "vocab_size", min_value=1, max_value=MAX_VOCAB)
        self.context_length = as_int(context_length, "context_length", min_value=0,
                                     max_value=MAX_CONTEXT_LENGTH)
        self.temperature = as_real(temperature, "temperature", low=0.0, low_open=True)
        if top_k is not None:
            top_k = as_int(top_k, "top_k", min_value=1, max_value=INT64_MAX)
        self.top_k = top_k
        self.kind = as_choice(kind, "kind", _KINDS)
        if scale is None:
            scale = float(np.sqrt(2.0 * np.log(self.vocab_size)))
        self.scale = as_real(scale, "scale", low=0.0)
        self.zipf_exponent = as_real(zipf_exponent, "zipf_exponent", low=0.0)
        if isinstance(seed, np.random.Generator):
            raise ValueError("seed: must be an int or SeedSequence (a model is deterministic)")
        self.seed = seed
        self._field_seed = _seed_u64(seed)
        # draft noise: (noise seed label, window order, std); std 0 means none
        if _noise is None:
            _noise = (np.uint64(0), self.context_length, 0.0, 0.0)
        self._noise_seed, self._noise_order, self._noise_std, self.mismatch = _noise
        self._ints = np.array(
            [_KIND_CODES[self.kind],
             self.context_length, self._noise_order, 0 if top_k is None else top_k],
            dtype=np.int64,
        )
        self._uints = np.array([self._field_seed, self._noise_seed], dtype=np.uint64)
        self._floats = np.array(
            [self.scale, self.zipf_exponent, self._noise_std, self.temperature],
            dtype=np.float64,
        )
        self._table = _NO_TABLE
        if self.kind == "gaussian":
            self._base = _mk.unigram_field(self._field_seed, self.scale, self.context_length,
                                           self.vocab_size)
        elif self.kind == "gaussian16":
            self._table = _mk.normal_table()
            self._base = _mk.unigram_table_field(self._field_seed, self.scale,
                                                 self.context_length, self._table,
                                                 self.vocab_size)
        else:
            self._base = np.zeros(self.vocab_size)

    # ------------------------------------------------------------------ evaluation
    def _rows(self) -> np.ndarray:
        """The first-order rows of the logits (``_model_kernels.first_order_rows``), built
        on first use and shared by every model with the same fields (a target and its
        drafts); a ``(1, 1)`` placeholder where they do not apply (Zipf kind, window 0,
        vocabulary above :data:`MAX_ROWS_VOCAB`, Numba's JIT disabled).  A pure performance
        device: evaluations with and without them are bit for bit the same."""
        if (self.kind == "zipf" or self.context_length < 1
                or self.vocab_size > MAX_ROWS_VOCAB or _numba_config.DISABLE_JIT):
            return _NO_ROWS  # (without the JIT, building them would cost more than it saves)
        key = (self.kind, int(self._field_seed), self.scale, self.context_length,
               self.vocab_size)
        rows = _ROWS_CACHE.pop(key, None)
        if rows is None:
            rows = _mk.first_order_rows(_KIND_CODES[self.kind], self._field_seed, self.scale,
                                        self.context_length, self._base, self._table)
            rows.setflags(write=False)
            while len(_ROWS_CACHE) >= _ROWS_CACHE_SIZE:
                _ROWS_CACHE.pop(next(iter(_ROWS_CACHE)))
        _ROWS_CACHE[key] = rows  # most recently used last
        return rows

    def _probs(self, ctx: np.ndarray) -> np.ndarray:
        """Unvalidated fast path: ``ctx`` is a C-contiguous int64 array of valid ids."""
        out = np.empty(self.vocab_size)
        _mk.synthetic_probs_rows(self._ints, self._uints, self._floats, self._base,
                                 self._table, self._rows(), ctx, out)
        return out

    def next_distribution(self, context) -> np.ndarray:
        """Next-token distribution after ``context`` (a 1-D float64 array summing to 1)."""
        return self._probs(as_context(context, self.vocab_size))

    def next_distributions(self, contexts, *, validate: bool = True) -> np.ndarray:
        """Next-token distributions after each of ``contexts`` (the batched model protocol).

        Parameters
        ----------
        contexts : sequence of 1-D sequences of int
            One context per row of the result (lengths may differ).
        validate : bool
            False: every context is already a C-contiguous int64 array of ids in
            ``[0, vocab_size)`` and nothing is checked (the decoders' fast path).

        Returns
        -------
        ndarray, shape (len(contexts), vocab_size)
            Row ``i`` is bit-for-bit ``next_distribution(contexts[i])``.
        """
        ctxs = as_contexts(contexts, self.vocab_size, validate)
        out = np.empty((len(ctxs), self.vocab_size))
        rows = self._rows() if ctxs else _NO_ROWS
        for i, ctx in enumerate(ctxs):
            _mk.synthetic_probs_rows(self._ints, self._uints, self._floats, self._base,
                                     self._table, rows, ctx, out[i])
        return out

    def mean_entropy(self, n_contexts=200, *, seed=0) -> float:
        """Mean next-token entropy (nats) over ``n_contexts`` random contexts."""
        n_contexts = as_int(n_contexts, "n_contexts", min_value=1, max_value=10**6)
        rng = np.random.default_rng(as_seedseq(seed))
        h = 0.0
        for _ in range(n_contexts):
            ctx = rng.integers(0, self.vocab_size, size=max(self.context_length, 1))
            p = self._probs(ctx.astype(np.int64))
            nz = p[p > 0]
            h -= float(np.sum(nz * np.log(nz)))
        return h / n_contexts

    # ------------------------------------------------------------------ drafts
    def draft(self, mismatch, *, seed=1, temperature=None, context_length=None, top_k="same"):
        """A draft model derived from this target with a controlled mismatch.

        Parameters
        ----------
        mismatch : float >= 0
            Standard deviation of an independent Gaussian logit-noise field, in units of
            ``scale`` (for ``kind="zipf"``: of ``zipf_exponent``).  0 adds no noise.  The
            noise field of a ``"gaussian16"`` model is a quantile-table field as well.
        seed : int or SeedSequence
            Seed of the noise field (different seeds give different drafts); keyword-only.
            Its default is 1, not 0, so that the default noise field is not the field of a
            default target (model seed 0).
        temperature : float or None
            Draft temperature (None: the target's).
        context_length : int or None
            Draft window m (None: the target's).  A Gaussian draft with a smaller ``m`` keeps
            the back-off terms k <= m only; a Zipf draft permutes by its own window.
        top_k : int, None or "same"
            Draft top-k ("same": the target's).

        Returns
        -------
        SyntheticLM
            ``self`` when nothing changes (``mismatch == 0``), else a new model.
        """
        mismatch = as_real(mismatch, "mismatch", low=0.0)
        temp = self.temperature if temperature is None else as_real(
            temperature, "temperature", low=0.0, low_open=True)
        m = self.context_length if context_length is None else as_int(
            context_length, "context_length", min_value=0, max_value=MAX_CONTEXT_LENGTH)
        tk = self.top_k if isinstance(top_k, str) and top_k == "same" else top_k
        if isinstance(top_k, str) and top_k != "same":
            raise ValueError(f"top_k: must be an int, None or 'same', got {top_k!r}")
        if tk is not None:
            tk = as_int(tk, "top_k", min_value=1, max_value=INT64_MAX)
        if mismatch == 0.0 and temp == self.temperature and m == self.context_length and (
            tk == self.top_k
        ):
            return self
        m = as_int(m, "context_length", min_value=0, max_value=MAX_CONTEXT_LENGTH)
        unit = self.zipf_exponent if self.kind == "zipf" else self.scale
        noise = (_seed_u64(seed), m, mismatch * unit, mismatch)
        return SyntheticLM(
            self.vocab_size, m, seed=self.seed, temperature=temp, top_k=tk, kind=self.kind,
            scale=self.scale, zipf_exponent=self.zipf_exponent, _noise=noise,
        )

    def __repr__(self) -> str:
        return (
            f"SyntheticLM(vocab_size={self.vocab_size}, context_length={self.context_length}, "
            f"seed={self.seed!r}, temperature={self.temperature}, top_k={self.top_k}, "
            f"kind={self.kind!r}, scale={self.scale}, mismatch={self.mismatch})"
        )


class MarkovLM:
    """First-order Markov language model over a small vocabulary.

    Parameters
    ----------
    transition_matrix : array_like, shape (n, n)
        Row ``a`` is the next-token distribution after token ``a`` (rows sum to 1).
    initial : array_like, shape (n,), optional
        Distribution used for an empty context (default: uniform).

    Notes
    -----
    ``context_length`` is 1: only the last token matters.  Zero entries are allowed
    (impossible transitions).
    """

    context_length = 1

    def __init__(self, transition_matrix, initial=None):
        mat = as_prob(transition_matrix, "transition_matrix", ndim=(2,))
        if mat.shape[0] != mat.shape[1]:
            raise ValueError(
                f"transition_matrix: must be square (n, n), got shape {mat.shape}"
            )
        self.vocab_size = int(mat.shape[1])
        self.transition_matrix = mat
        if initial is None:
            init = np.full(self.vocab_size, 1.0 / self.vocab_size)
        else:
            init = as_prob(initial, "initial", ndim=(1,))
            if init.shape[0] != self.vocab_size:
                raise ValueError(
                    f"initial: shape mismatch with transition_matrix: {init.shape[0]} "
                    f"entries for a vocabulary of {self.vocab_size}"
                )
        self.initial = init

    @classmethod
    def random(cls, vocab_size, *, seed=0, concentration=1.0, initial=None) -> MarkovLM:
        """Rows drawn i.i.d. from a symmetric Dirichlet(``concentration``)."""
        n = as_int(vocab_size, "vocab_size", min_value=1)
        check_alloc("vocab_size", n * n, what="the n x n transition matrix")
        a = as_real(concentration, "concentration", low=0.0, low_open=True)
        rng = np.random.default_rng(as_seedseq(seed))
        mat = rng.dirichlet(np.full(n, a), size=n)
        mat = np.maximum(mat, 1e-12)
        mat /= mat.sum(axis=1, keepdims=True)
        return cls(mat, initial)

    def _probs(self, ctx: np.ndarray) -> np.ndarray:
        if ctx.shape[0] == 0:
            return self.initial.copy()
        return self.transition_matrix[ctx[-1]].copy()

    def next_distribution(self, context) -> np.ndarray:
        """Next-token distribution after ``context``."""
        return self._probs(as_context(context, self.vocab_size))

    def next_distributions(self, contexts, *, validate: bool = True) -> np.ndarray:
        """Batched :meth:`next_distribution` (see :meth:`SyntheticLM.next_distributions`)."""
        ctxs = as_contexts(contexts, self.vocab_size, validate)
        out = np.empty((len(ctxs), self.vocab_size))
        for i, ctx in enumerate(ctxs):
            out[i] = self.initial if ctx.shape[0] == 0 else self.transition_matrix[ctx[-1]]
        return out

    def sequence_law(self, prompt, length) -> np.ndarray:
        """Exact law of the next ``length`` tokens after ``prompt``.

        Returns
        -------
        ndarray, shape (n,) * length
            ``out[u1, ..., uL] = P(W_{t+1} = u1, ..., W_{t+L} = uL | prompt)``; sums to 1.

        Raises
        ------
        ValueError
            ``length`` not in ``[1, 32]`` (NumPy's dimension limit), or ``n**length``
            above :data:`MAX_LAW_ENTRIES` (1e7; the message gives the size it would need).
        """
        ctx = as_context(prompt, self.vocab_size, "prompt")
        length = as_int(length, "length", min_value=1)
        n = self.vocab_size
        # min(): a length of 10**6 is already far above the limit for n >= 2 (and a huge
        # Python int would overflow the float product)
        if min(length, 10**6) * np.log(n) > np.log(MAX_LAW_ENTRIES) + 1e-12:
            try:
                size = f"about 10^{length * np.log10(n):.1f}"
            except OverflowError:
                size = "more than 10^308"
            raise ValueError(
                f"length: the law of {length} tokens over a vocabulary of {n} has {n}^{length} "
                f"({size}) entries, 8 bytes each; the limit is {MAX_LAW_ENTRIES:.0e} entries"
            )
        if length > 32:
            raise ValueError(f"length: must be <= 32 (NumPy's dimension limit), got {length}")
        law = self._probs(ctx)
        for _ in range(length - 1):
            law = law[..., None] * self.transition_matrix.reshape((1,) * (law.ndim - 1) + (n, n))
        return law

    def __repr__(self) -> str:
        return f"MarkovLM(vocab_size={self.vocab_size})"



# ---------------------------------------------------------------------- the model protocol


def as_language_model(model, name: str = "model"):
    """Check that ``model`` follows the model protocol (module docstring); returns it.

    Raises ``ValueError`` naming ``name`` when ``vocab_size`` or ``next_distribution`` is
    missing, or ``vocab_size`` is not a positive integer.
    """
    if isinstance(model, SyntheticLM | MarkovLM | CachedLM):
        return model
    if not (hasattr(model, "vocab_size") and callable(getattr(model, "next_distribution",
                                                                   None))):
        raise ValueError(
            f"{name}: must be a SyntheticLM, a MarkovLM or an object with vocab_size and "
            f"next_distribution, got {type(model).__name__}"
        )
    as_int(model.vocab_size, f"{name}.vocab_size", min_value=1)
    return model


def next_distributions(model, contexts, *, validate: bool = True) -> np.ndarray:
    """Batched next-token distributions of any protocol model (one row per context).

    Uses ``model.next_distributions`` when the model has it, else ``next_distribution`` row
    by row (converted to float64).  ``validate=False`` is the unchecked fast path: the
    contexts are C-contiguous int64 arrays of valid ids.
    """
    validate = as_bool(validate, "validate")
    batched = getattr(model, "next_distributions", None)
    if batched is not None:
        return batched(contexts, validate=validate)
    rows = as_contexts(contexts, model.vocab_size, validate)
    out = np.empty((len(rows), int(model.vocab_size)))
    for i, ctx in enumerate(rows):
        out[i] = np.asarray(model.next_distribution(ctx), dtype=np.float64)
    return out


class CachedLM:
    """Memoised wrapper of a model: next-token distributions cached by the exact context.

    A pure performance device: the wrapped model's output is a deterministic function of the
    context, so caching by the full context (no assumption on the window length) returns the
    same numbers.  Sweeps whose configurations revisit the same contexts (PFR at every
    lookahead, MWS and BASIC-UWM emit the same keyed chain, MPFR trees for several B share
    nodes) then evaluate each context once.  Call :meth:`clear` between prompts to bound the
    memory.

    Parameters
    ----------
    model
        Any object of the model protocol (module docstring).

    Attributes
    ----------
    model, vocab_size, context_length
        The wrapped model, its vocabulary size and its window (None if it has none).
    hits, misses : int
        Cache statistics.
    """

    def __init__(self, model):
        self.model = as_language_model(model, "model")
        self.vocab_size = int(model.vocab_size)
        self.context_length = getattr(model, "context_length", None)
        self._cache: dict[bytes, np.ndarray] = {}
        self.hits = 0
        self.misses = 0

    def _lookup(self, ctx: np.ndarray) -> np.ndarray:
        arr = np.ascontiguousarray(ctx, dtype=np.int64)
        k = arr.tobytes()
        out = self._cache.get(k)
        if out is None:
            self.misses += 1
            if type(self.model) is SyntheticLM:  # ``ctx`` is checked already: no second check
                out = self.model._probs(arr)
            else:
                out = np.asarray(self.model.next_distribution(ctx), dtype=np.float64)
            out.setflags(write=False)
            self._cache[k] = out
        else:
            self.hits += 1
        return out

    def next_distribution(self, context) -> np.ndarray:
        """The wrapped model's distribution after ``context`` (a read-only cached array)."""
        return self._lookup(as_context(context, self.vocab_size))

    def next_distributions(self, contexts, *, validate: bool = True) -> np.ndarray:
        """Batched :meth:`next_distribution` (a new 2-D array; rows from the cache)."""
        rows = as_contexts(contexts, self.vocab_size, validate)
        out = np.empty((len(rows), self.vocab_size))
        for i, ctx in enumerate(rows):
            out[i] = self._lookup(ctx)
        return out

    def clear(self) -> None:
        """Empty the cache (the statistics are kept)."""
        self._cache.clear()

    def __repr__(self) -> str:
        return f"CachedLM({self.model!r}, cached={len(self._cache)})"


def log_perplexity(model, tokens, prompt_length=None) -> float:
    """LPPL: the per-token log-perplexity of the generated part of a sequence under a model.

    ``LPPL = -(1/T) sum_{t = prompt_length}^{len - 1} log p(w_t | w_{<t})``, the quality
    metric of Liu, Wan, Gao & Gündüz (2026), arXiv:2609.21858, §6 (lower is better; the
    target's own samples have expected LPPL equal to the mean next-token entropy).

    Parameters
    ----------
    model
        Any object of the model protocol (usually the target).
    tokens : sequence of int, or a decoding result
        Prompt followed by the generated tokens.  A result of
        :func:`specbound.sim.speculative_decode` (anything with ``tokens`` and
        ``prompt_length``) may be passed instead; its prompt length is then used.
    prompt_length : int
        Number of leading prompt tokens (not scored); required for a plain token sequence.

    Returns
    -------
    float
        The mean negative log-probability (nats per token); NaN when nothing is generated,
        ``inf`` when a token has probability 0 under the model.
    """
    model = as_language_model(model, "model")
    if hasattr(tokens, "tokens") and hasattr(tokens, "prompt_length"):
        if prompt_length is not None and int(prompt_length) != int(tokens.prompt_length):
            raise ValueError(
                f"prompt_length: {prompt_length!r} conflicts with the result's "
                f"{tokens.prompt_length}"
            )
        prompt_length = tokens.prompt_length
        tokens = tokens.tokens
    toks = as_context(tokens, model.vocab_size, "tokens")
    if prompt_length is None:
        raise ValueError("prompt_length: required when tokens is a plain sequence")
    n0 = as_int(prompt_length, "prompt_length", min_value=0, max_value=toks.size)
    if n0 == toks.size:
        return float("nan")
    if type(model) is SyntheticLM:
        # the probabilities of the tokens in one compiled loop (the same evaluations)
        probs = np.empty(toks.size - n0)
        _mk.token_probs(model._ints, model._uints, model._floats, model._base, model._table,
                        model._rows(), toks, n0, probs)
    else:
        probs = [model.next_distribution(toks[:t])[toks[t]] for t in range(n0, toks.size)]
    with np.errstate(divide="ignore"):
        # the logarithm one float64 at a time, as before (not NumPy's vectorised loop)
        lp = [np.log(x) for x in probs]
    return float(-np.mean(lp))


@dataclass(frozen=True, eq=False)
class PromptSet:
    """Prompts and per-prompt decoding seeds (what :func:`random_prompts` returns).

    Attributes
    ----------
    tokens : ndarray of int64, shape (n, length)
        Prompt ``i`` is ``tokens[i]``.
    seeds : tuple of numpy.random.SeedSequence
        Seed of the unkeyed randomness for decoding prompt ``i`` (pass ``seeds[i]`` as the
        decoder's ``seed``), identical for every decoder and setting compared on the prompts.
    """

    tokens: np.ndarray
    seeds: tuple

    def __len__(self) -> int:
        return int(self.tokens.shape[0])


def random_prompts(n, length, vocab_size, *, seed=0) -> PromptSet:
    """``n`` uniform prompts of ``length`` token ids and ``n`` independent decoding seeds.

    Token ids are drawn with ``default_rng(SeedSequence([seed, 0]))`` (uniform on
    ``[0, vocab_size)``), the seeds are ``SeedSequence([seed, 1]).spawn(n)`` (never
    ``seed + i``), so the prompts and seeds do not depend on anything else and the same
    ``seed`` reproduces a study.  For a ``SeedSequence`` seed, its entropy takes the place of
    ``seed`` (its spawn key is kept).

    Parameters
    ----------
    n : int in [0, 10**5]
        Number of prompts (each gets its own spawned seed, several microseconds each: the cap keeps
        a call under a second).
    length : int in [0, 10**6]
        Tokens per prompt (``n * length`` at most 1e8 token ids).
    vocab_size : int >= 1
        Vocabulary size of the models.
    seed : int >= 0 or SeedSequence
        Study seed.

    Returns
    -------
    PromptSet
    """
    n = as_int(n, "n", min_value=0, max_value=10**5)
    length = as_int(length, "length", min_value=0, max_value=10**6)
    if n * length > 10**8:
        raise ValueError(f"n: {n} prompts of {length} tokens exceed the limit of 1e8 token ids")
    vocab_size = as_int(vocab_size, "vocab_size", min_value=1, max_value=INT64_MAX)
    if isinstance(seed, np.random.Generator):
        raise ValueError("seed: must be an int or SeedSequence (prompts are reproducible)")
    ss = as_seedseq(seed)
    ent = ss.entropy
    ent = list(ent) if isinstance(ent, list | tuple) else [ent]
    rng = np.random.default_rng(np.random.SeedSequence(ent + [0], spawn_key=ss.spawn_key))
    tokens = rng.integers(0, vocab_size, size=(n, length), dtype=np.int64)
    seeds = tuple(np.random.SeedSequence(ent + [1], spawn_key=ss.spawn_key).spawn(n))
    return PromptSet(tokens, seeds)
