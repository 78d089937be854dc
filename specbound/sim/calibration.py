"""Synthetic language models calibrated to the entropy of real text.

The default :class:`~specbound.sim.models.SyntheticLM` has a mean next-token entropy of about
2.5 nats at ``n = 1000``, several times the per-token log-perplexity (LPPL) that Liu, Wan,
Gao & Gündüz (2026), arXiv:2609.21858, App. D.4 (Table 6), report for Qwen2.5-7B-Instruct
on CNN/DailyMail (LPPL about 0.47 nats/token).  Acceptance rates, watermark evidence per
token and output overlap (ROUGE-L) all depend on the entropy, so comparisons against the
paper's numbers need a model family whose entropy can be set.  The two raw families of
:class:`~specbound.sim.models.SyntheticLM` are not realistic at low entropy: the Gaussian
field is light-tailed (at a mean entropy of 0.26 nats the mass outside the ten most likely
tokens is about 1e-5) and the Zipf field has the same entropy in every context.

:class:`CalibratedLM` takes a base :class:`~specbound.sim.models.SyntheticLM` and raises its
next-token law to a context-dependent power (a *sharpness*),

``p_c(v) ∝ base_c(v) ** beta(c)``,  ``beta(c) = beta0 * exp(spread * g(c))``,

where ``g(c) ~ N(0, 1)`` is a keyed function of (model seed, last ``context_length`` tokens)
(:mod:`specbound.sim.prf`; ``Phi^{-1}`` of one keyed uniform).  With the default Zipf base
(``base_c(v) ∝ (1 + rank_c(v))^{-1}``) every context has a power-law law
``p_c(v) ∝ (1 + rank_c(v))^{-beta(c)}``: a few dominant tokens and a long tail; the
log-normal spread of ``beta(c)`` mixes near-deterministic contexts with diffuse ones, as in
real text, where most tokens are nearly forced and a few carry most of the entropy.

:func:`calibrated_lm` solves for ``beta0`` by root finding (Brent) on the mean entropy over a
fixed set of random contexts: for a fixed law ``base`` the entropy of ``base ** beta``
(normalised) is non-increasing in ``beta`` (its derivative is ``-beta Var(log base)``), so
the mean over fixed contexts is monotone and the root is unique.  The achieved mean entropy
(and, with :meth:`CalibratedLM.lppl`, the LPPL of the model's own samples, whose
expectation is the mean entropy along generated contexts) is reported with the model.

Drafts (:meth:`CalibratedLM.draft`) add the base family's Gaussian logit noise (in units of
the base's scale, :meth:`SyntheticLM.draft`) and apply the same sharpness field, optionally
divided by a draft temperature: ``q_c ∝ q_base,c ** (beta(c) / T_d)``.
"""

from __future__ import annotations

import numpy as np
from scipy import optimize, special

from specbound._validation import as_choice, as_int, as_real, as_seedseq
from specbound.results import Estimate
from specbound.sim.models import (
    MAX_CONTEXT_LENGTH,
    MAX_VOCAB,
    SyntheticLM,
    as_context,
    as_contexts,
    log_perplexity,
    random_prompts,
)
from specbound.sim.prf import digest_label, key_digest, prf_uniform

__all__ = ["CalibratedLM", "calibrated_lm", "entropy_bounds"]

#: bracket of the sharpness ``beta0`` searched by :func:`calibrated_lm`
BETA_RANGE = (1e-3, 1e3)
#: largest number of float64 entries of a model's memo (:meth:`CalibratedLM.next_distributions`)
MEMO_ENTRIES = 2**23
#: largest number of generated tokens one :meth:`CalibratedLM.lppl` call scores
MAX_LPPL_TOKENS = 3 * 10**4


def _entropy_rows(p: np.ndarray) -> np.ndarray:
    """Entropy (nats) of each row of ``p`` (0 log 0 = 0)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)
    return -t.sum(axis=-1)


def _power(base: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """Rows of ``base ** beta`` normalised, in log space (zeros stay zeros)."""
    with np.errstate(divide="ignore"):
        logp = np.log(base)
    x = beta[:, None] * logp
    x -= x.max(axis=1, keepdims=True)
    out = np.exp(x)
    out /= out.sum(axis=1, keepdims=True)
    return out


class CalibratedLM:
    """A :class:`~specbound.sim.models.SyntheticLM` sharpened by a keyed per-context power.

    ``p_c(v) ∝ base_c(v) ** beta(c)`` with ``beta(c) = sharpness * exp(spread * g(c))``
    (module docstring).  Follows the model protocol of :mod:`specbound.sim.models`
    (``vocab_size``, ``next_distribution``, ``next_distributions``), so every decoder of
    :func:`specbound.sim.speculative_decode` and :func:`~specbound.sim.log_perplexity`
    accept it.  Usually built by :func:`calibrated_lm`.

    Parameters
    ----------
    base : SyntheticLM
        The base law (its draft noise, temperature and top-k included).
    sharpness : float > 0
        ``beta0``, the median power.
    spread : float >= 0
        Standard deviation of ``log beta(c)`` (0: the same power in every context).
    temperature : float > 0
        Divides the power (1 for a target; a draft temperature for a draft).
    seed : int or SeedSequence
        Seed of the sharpness field ``g`` (a target and its drafts share it).

    Attributes
    ----------
    target_entropy, entropy, entropy_se : float or None
        Set by :func:`calibrated_lm`: the requested mean entropy, the one achieved on the
        calibration contexts (nats), and the standard error of that mean as an estimate of
        the mean over all contexts (the spread of the per-context entropies over
        ``sqrt(n_contexts)``).
    """

    def __init__(self, base, sharpness, *, spread=1.0, temperature=1.0, seed=0):
        if not isinstance(base, SyntheticLM):
            raise ValueError(f"base: must be a SyntheticLM, got {type(base).__name__}")
        self.base = base
        self.vocab_size = base.vocab_size
        self.context_length = base.context_length
        self.sharpness = as_real(sharpness, "sharpness", low=0.0, low_open=True)
        self.spread = as_real(spread, "spread", low=0.0, high=10.0)
        self.temperature = as_real(temperature, "temperature", low=0.0, low_open=True)
        if isinstance(seed, np.random.Generator):
            raise ValueError("seed: must be an int or SeedSequence (a model is deterministic)")
        self.seed = seed
        ss = as_seedseq(seed)
        self._digest = key_digest(b"calibrated-lm-sharpness:" + ss.generate_state(
            4, dtype=np.uint32).tobytes())
        self.target_entropy = None
        self.entropy = None
        self.entropy_se = None

    # ------------------------------------------------------------------ evaluation
    def _beta(self, ctx: np.ndarray) -> float:
        if self.spread == 0.0:
            return self.sharpness / self.temperature
        m = self.context_length
        win = ctx[ctx.shape[0] - m:] if m and ctx.shape[0] >= m else ctx
        if m == 0:
            win = ctx[:0]
        u = prf_uniform(digest_label(self._digest, np.ascontiguousarray(win)), 0, 0)
        return self.sharpness * float(np.exp(self.spread * special.ndtri(u))) / self.temperature

    def _evaluate(self, ctxs: list) -> np.ndarray:
        base = self.base.next_distributions(ctxs, validate=False)
        if not ctxs:
            return base
        beta = np.array([self._beta(c) for c in ctxs])
        return _power(base, beta)

    def next_distributions(self, contexts, *, validate: bool = True) -> np.ndarray:
        """Next-token distributions after each context (the batched model protocol).

        Rows are memoised by the context's window (the last ``max(context_length, noise
        window)`` tokens, or the whole of a shorter context), of which the law is a pure
        function: every row is computed on its own (the base kernel per context, then
        row-wise NumPy), so a remembered row is bit for bit the one a new evaluation would
        give.  The memo holds at most :data:`MEMO_ENTRIES` float64 entries and is dropped
        when ``sharpness``, ``spread``, ``temperature`` or ``base`` change.
        """
        ctxs = as_contexts(contexts, self.vocab_size, validate)
        if not ctxs:
            return self._evaluate(ctxs)
        memo = self._memo_for()
        w = self._memo_window
        keys = [np.ascontiguousarray(c[max(c.shape[0] - w, 0):], dtype=np.int64).tobytes()
                for c in ctxs]
        out = np.empty((len(ctxs), self.vocab_size))
        miss = []
        for i, k in enumerate(keys):
            row = memo.get(k)
            if row is None:
                miss.append(i)
            else:
                out[i] = row
        if miss:
            new = self._evaluate([ctxs[i] for i in miss])
            cap = max(1, MEMO_ENTRIES // self.vocab_size)
            for j, i in enumerate(miss):
                out[i] = new[j]
                if keys[i] not in memo:
                    if len(memo) >= cap:
                        memo.pop(next(iter(memo)))  # the oldest entry
                    memo[keys[i]] = new[j]
        return out

    def _memo_for(self) -> dict:
        state = (self.sharpness, self.spread, self.temperature, id(self.base))
        if getattr(self, "_memo_state", None) != state:
            self._memo_state = state
            self._memo = {}
            self._memo_window = max(int(self.base.context_length),
                                    int(self.base._noise_order), int(self.context_length))
        return self._memo

    def __getstate__(self):
        # the memo is a cache: not pickled (rebuilt on use)
        return {k: v for k, v in self.__dict__.items()
                if k not in ("_memo", "_memo_state", "_memo_window")}

    def next_distribution(self, context) -> np.ndarray:
        """Next-token distribution after ``context`` (1-D float64, sums to 1)."""
        return self.next_distributions([as_context(context, self.vocab_size)],
                                       validate=False)[0]

    def sharpness_at(self, context) -> float:
        """The power ``beta(c)`` applied after ``context`` (temperature included)."""
        return self._beta(as_context(context, self.vocab_size))

    # ------------------------------------------------------------------ summaries
    def entropies(self, n_contexts=2048, *, seed=0) -> np.ndarray:
        """Next-token entropies (nats) after ``n_contexts`` uniform random contexts."""
        n_contexts = as_int(n_contexts, "n_contexts", min_value=1, max_value=10**6)
        return _entropy_rows(self.next_distributions(
            _calibration_contexts(self.vocab_size, self.context_length, n_contexts, seed),
            validate=False))

    def mean_entropy(self, n_contexts=2048, *, seed=0) -> float:
        """Mean next-token entropy (nats) over ``n_contexts`` uniform random contexts."""
        return float(np.mean(self.entropies(n_contexts, seed=seed)))

    def tail_mass(self, k=10, n_contexts=2048, *, seed=0) -> float:
        """Mean probability outside the ``k`` most likely tokens (the weight of the tail)."""
        k = as_int(k, "k", min_value=0)
        p = self.next_distributions(
            _calibration_contexts(self.vocab_size, self.context_length,
                                  as_int(n_contexts, "n_contexts", min_value=1,
                                         max_value=10**6), seed), validate=False)
        s = -np.sort(-p, axis=1)
        return float(np.mean(s[:, k:].sum(axis=1)))

    def lppl(self, n_sequences=32, max_new_tokens=64, *, prompt_length=4, seed=0) -> Estimate:
        """LPPL of the model's own autoregressive samples, with its standard error.

        ``n_sequences`` samples of ``max_new_tokens`` tokens after uniform prompts
        (:func:`~specbound.sim.random_prompts`), each scored by
        :func:`~specbound.sim.log_perplexity` under this model; the estimate is the mean over
        sequences and its standard error (sequences are independent).  Its expectation is
        the mean entropy along generated contexts (Liu et al. 2026, §6: LPPL of the target's
        samples).

        Raises
        ------
        ValueError
            ``n_sequences * max_new_tokens`` above :data:`MAX_LPPL_TOKENS` (``3 * 10**4``; a few
            seconds at a vocabulary of 1000), refused up front rather than run for minutes.
        """
        from specbound.sim.decode import speculative_decode
        from specbound.sim.metrics import mean_se

        n_sequences = as_int(n_sequences, "n_sequences", min_value=2, max_value=10**5)
        max_new_tokens = as_int(max_new_tokens, "max_new_tokens", min_value=1,
                                max_value=10**5)
        if n_sequences * max_new_tokens > MAX_LPPL_TOKENS:
            raise ValueError(
                f"n_sequences: {n_sequences} sequences of {max_new_tokens} tokens "
                f"({n_sequences * max_new_tokens:,} tokens) exceed the limit "
                f"MAX_LPPL_TOKENS = {MAX_LPPL_TOKENS:,} tokens per call (each token is one "
                "model evaluation in a Python loop); average several calls with other seeds"
            )
        prompts = random_prompts(n_sequences, as_int(prompt_length, "prompt_length",
                                                     min_value=0, max_value=10**4),
                                 self.vocab_size, seed=seed)
        vals = []
        for toks, s in zip(prompts.tokens, prompts.seeds, strict=True):
            res = speculative_decode(self, None, toks, "ar", max_new_tokens=max_new_tokens,
                                     seed=s)
            vals.append(log_perplexity(self, res))
        return mean_se(vals)

    # ------------------------------------------------------------------ drafts
    def draft(self, mismatch, *, seed=1, temperature=1.0) -> CalibratedLM:
        """A draft: the base's logit noise (:meth:`SyntheticLM.draft`) and the same sharpness.

        Parameters
        ----------
        mismatch : float >= 0
            Standard deviation of the base's Gaussian logit noise, in units of the base's
            scale (``zipf_exponent`` for a Zipf base).
        seed : int or SeedSequence
            Seed of the noise field.
        temperature : float > 0
            Draft temperature: the draft's power is ``beta(c) / temperature`` (0.5: a
            sharper draft, 1.5: a more diffuse one, as the drafters D2 and D3 of Liu et al.
            2026, App. D.5).

        Returns
        -------
        CalibratedLM
            ``self`` when nothing changes.
        """
        mismatch = as_real(mismatch, "mismatch", low=0.0)
        temperature = as_real(temperature, "temperature", low=0.0, low_open=True)
        if mismatch == 0.0 and temperature == self.temperature:
            return self
        base = self.base.draft(mismatch, seed=seed) if mismatch > 0 else self.base
        out = CalibratedLM(base, self.sharpness, spread=self.spread,
                           temperature=temperature, seed=self.seed)
        return out

    def __repr__(self) -> str:
        ent = "" if self.entropy is None else f", entropy={self.entropy:.4f}"
        return (f"CalibratedLM(vocab_size={self.vocab_size}, kind={self.base.kind!r}, "
                f"sharpness={self.sharpness:.6g}, spread={self.spread}, "
                f"temperature={self.temperature}, mismatch={self.base.mismatch}{ent})")


def _calibration_contexts(vocab_size, m, n, seed) -> list:
    rng = np.random.default_rng(as_seedseq(seed))
    arr = rng.integers(0, vocab_size, size=(n, max(m, 1)), dtype=np.int64)
    return [np.ascontiguousarray(r) for r in arr]


def _base_model(vocab_size, context_length, kind, top_k, seed) -> SyntheticLM:
    kind = as_choice(kind, "kind", ("zipf", "gaussian", "gaussian16"))
    # the Zipf base is (1 + rank)^(-1); the Gaussian base keeps its default scale
    return SyntheticLM(vocab_size, context_length, seed=seed, kind=kind, top_k=top_k,
                       zipf_exponent=1.0)


def entropy_bounds(vocab_size, *, top_k=None) -> tuple[float, float]:
    """The open interval of mean entropies :func:`calibrated_lm` can reach: ``(0, log n')``.

    ``n' = min(vocab_size, top_k)``: the entropy of the uniform law on the kept tokens is the
    limit ``beta0 -> 0``; ``beta0 -> inf`` concentrates every context on one token.
    """
    n = as_int(vocab_size, "vocab_size", min_value=2, max_value=MAX_VOCAB)
    if top_k is not None:
        n = min(n, as_int(top_k, "top_k", min_value=2))
    return 0.0, float(np.log(n))


def calibrated_lm(target_entropy, vocab_size=1000, *, context_length=2, kind="zipf",
                  spread=1.0, top_k=None, n_contexts=2048, seed=0, xtol=1e-6) -> CalibratedLM:
    """A :class:`CalibratedLM` whose mean next-token entropy equals ``target_entropy``.

    Solves ``mean_entropy(beta0) = target_entropy`` for the median sharpness ``beta0`` by
    Brent's method on :data:`BETA_RANGE`, over ``n_contexts`` uniform random contexts drawn
    from ``seed`` (the same contexts at every ``beta0``, so the function is monotone).  The
    achieved value is in ``model.entropy`` (it equals the target to about ``xtol`` on the
    calibration contexts; on fresh contexts it differs by the sampling error of a mean over
    ``n_contexts`` contexts); :meth:`CalibratedLM.lppl` measures the LPPL of the model's
    samples.

    Parameters
    ----------
    target_entropy : float
        Mean entropy in nats, strictly inside :func:`entropy_bounds` (e.g. 0.47, the LPPL of
        Liu, Wan, Gao & Gündüz 2026, arXiv:2609.21858, Table 6; about 2.5 is the default
        :class:`~specbound.sim.models.SyntheticLM` at n = 1000).
    vocab_size : int, 2 <= vocab_size <= 50,000
    context_length : int
        Window of the base model and of the sharpness field.
    kind : {"zipf", "gaussian", "gaussian16"}
        Base family: ``"zipf"`` (power-law tail, default), ``"gaussian"`` (the default
        :class:`~specbound.sim.models.SyntheticLM` field) or ``"gaussian16"`` (its cheap
        quantile-table form).
    spread : float >= 0
        Standard deviation of ``log beta(c)`` across contexts (0: one power everywhere).
    top_k : int or None
        Top-k of the base (50 in Liu et al. 2026, App. D.1).
    n_contexts : int
        Calibration contexts.
    seed : int or SeedSequence
        Model seed (base field, sharpness field and calibration contexts).
    xtol : float
        Absolute tolerance of the root in ``beta0``.

    Raises
    ------
    ValueError
        ``target_entropy`` outside the reachable interval, or an invalid argument (named).
    """
    vocab_size = as_int(vocab_size, "vocab_size", min_value=2, max_value=MAX_VOCAB)
    context_length = as_int(context_length, "context_length", min_value=0,
                            max_value=MAX_CONTEXT_LENGTH)
    lo_h, hi_h = entropy_bounds(vocab_size, top_k=top_k)
    h = as_real(target_entropy, "target_entropy")
    n_contexts = as_int(n_contexts, "n_contexts", min_value=1, max_value=10**5)
    xtol = as_real(xtol, "xtol", low=0.0, low_open=True)
    base = _base_model(vocab_size, context_length, kind, top_k, seed)
    model = CalibratedLM(base, 1.0, spread=spread, seed=seed)
    ctxs = _calibration_contexts(vocab_size, context_length, n_contexts, seed)
    base_p = base.next_distributions(ctxs, validate=False)
    g = np.array([model._beta(c) for c in ctxs])  # beta(c) at sharpness 1

    def entropies(beta0: float) -> np.ndarray:
        return _entropy_rows(_power(base_p, beta0 * g))

    def mean_h(beta0: float) -> float:
        return float(np.mean(entropies(beta0)))

    h_lo, h_hi = mean_h(BETA_RANGE[1]), mean_h(BETA_RANGE[0])
    if not (lo_h < h < hi_h) or not (h_lo < h < h_hi):
        raise ValueError(
            f"target_entropy: must lie in ({max(lo_h, h_lo):.4g}, {min(hi_h, h_hi):.4g}) "
            f"nats for this vocabulary, top_k and spread, got {h!r}"
        )
    beta0 = optimize.brentq(lambda b: mean_h(b) - h, *BETA_RANGE, xtol=xtol, rtol=1e-12)
    model.sharpness = float(beta0)
    model.target_entropy = h
    hs = entropies(beta0)
    model.entropy = float(np.mean(hs))
    model.entropy_se = float(np.std(hs, ddof=1) / np.sqrt(hs.size)) if hs.size > 1 else 0.0
    return model
