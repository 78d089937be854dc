"""Shared settings and helpers of the watermark studies (issue 5, item 5; seed 000 §6, App. D).

The four scripts ``wm_single_draft_frontier``, ``wm_multidraft_scaling``, ``wm_detection`` and
``wm_drafter_substitution`` run the sequence-level decoders of
:func:`specbound.sim.decode.speculative_decode` on one synthetic target/draft pair and write
PNG + CSV.  This module holds what they share:

Synthetic models (:class:`Settings`, :func:`make_models`)
    Target ``SyntheticLM(vocab_size=1000, context_length=2, seed=2026, temperature=1.0,
    top_k=None)`` (Gaussian n-gram back-off logits with the default ``scale =
    sqrt(2 log n)``): mean next-token entropy about 2.6 nats (measured by every script with
    :meth:`SyntheticLM.mean_entropy` on 500 random contexts and written to the CSV as
    ``mean_entropy_nats``), inside the 1.5-3.5 nats of chat LLMs at T = 1.  The reference
    drafter D0 is ``target.draft(0.3, seed=1)`` (independent logit noise of 0.3 ``scale``:
    per-token acceptance 1 - TV ~ 0.65, exponential race ~ 0.60).  ``--quick`` uses a
    200-token vocabulary and a handful of short sequences.

Drafters D0-D3 (:data:`DRAFTERS`, seed 000 §6 "drafter-substitution ablation")
    D0 ``draft(0.3, seed=1)`` (default); D1 ``draft(0.2, seed=2)`` (another "size": a better,
    "larger" drafter with a smaller, independent noise field, like the paper's 0.5B -> 1.5B
    swap); D2 = D0 at temperature 0.5 (sharper); D3 = D0 at temperature 1.5 (more diffuse).
    The target, key, prompts and unkeyed seeds are identical across drafters.

Keys, prompts and seeds
    The watermark key is ``Settings.key``; keyed context labels hash the whole prefix
    (``context_length=None`` in both decoder and detector, seed 000 §4.1: ``c_t = w_{:t-1}``),
    so no context repeats and the H0 pivots are exactly i.i.d. U(0, 1).  Prompts are
    ``prompt_length`` uniform token ids; prompt ``i`` and its unkeyed decoding seed come from
    ``SeedSequence([run_seed, k]).spawn``, identical for every decoder, L, B and drafter.

Helpers
    :func:`rouge_l` (token-level ROUGE-L F1, LCS-based), :func:`keyed_pivots` (the
    detector's per-token pivots), :func:`block_decisions` and :func:`acceptance_compensator`
    (theory prediction of the accepted tokens per block, see below), :class:`CachedLM`
    (memoised model evaluation shared by configurations that visit the same contexts),
    :class:`ResumableCSV` and :func:`run_sweep` (re-exported from :mod:`specbound.sweep`:
    crash-safe, resumable sweeps on any ``concurrent.futures`` executor) and
    :func:`study_sweep` (the studies' choice of executor).

Theory prediction of AATPS (:func:`acceptance_compensator`)
    At decision ``s`` of a block (context ``c_s``, ``nu_s`` drafts consistent with the emitted
    prefix: MPFR multiplicity / GLS active set), the decoder accepts with conditional
    probability ``a_s = exact_acceptance(p(c_s), q(c_s), scheme, nu_s)`` given everything
    before the decision ("sd" = 1 - TV for vsps/mse/mse_pseudo, "exp_race" for pfr/pfr_nowm/mws,
    "mpfr" and "gls" with ``B = nu_s``), because the clocks / coins of a context not yet
    decided are fresh (distinct context labels, per-position unkeyed labels).  Hence
    ``sum_s (1[accept_s] - a_s)`` is a sum of martingale differences: the compensator
    ``sum_s a_s`` is an unbiased prediction of the accepted drafts of a block, with no
    independence or stationarity assumption on the contexts.  The predicted AATPS replaces
    each block's accepted-draft count by its compensator; the z-score of the difference uses
    the (uncorrelated) per-block differences.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import asdict, dataclass, field, replace

import numpy as np
import pandas as pd

from paper_figs._common import out_path
from specbound.sim.models import SyntheticLM
from specbound.sweep import (
    ResumableCSV,
    current_executor,
    local_executor,
    run_sweep,
    shutdown_now,
)
from specbound.theory import exact_acceptance

__all__ = [
    "DRAFTERS",
    "FULL",
    "KEYED",
    "QUICK",
    "SCHEME_OF",
    "CachedLM",
    "ResumableCSV",
    "Settings",
    "acceptance_compensator",
    "block_decisions",
    "cluster_ratio_se",
    "decode_prompts",
    "default_executor",
    "keyed_pivots",
    "lcs_length",
    "make_models",
    "mean_se",
    "measured_entropy",
    "prompt_seeds",
    "prompts",
    "rouge_l",
    "run_sweep",
    "study_sweep",
    "with_extra",
]

#: bump when a change in the code changes the numbers (invalidates resumed rows)
STUDY_VERSION = 1

#: decoders whose tokens carry the keyed watermark (detection makes sense)
KEYED = ("basic_uwm", "pfr", "mws", "mpfr", "mse", "mse_pseudo")

#: per-context coupling of each speculative decoder, for :func:`exact_acceptance`
SCHEME_OF = {
    "vsps": "sd",
    "mse": "sd",
    "mse_pseudo": "sd",
    "pfr": "exp_race",
    "pfr_nowm": "exp_race",
    "mws": "exp_race",
    "mpfr": "mpfr",
    "invariant": "gls",
}


@dataclass(frozen=True)
class Settings:
    """Synthetic target/draft pair, key, prompts and sizes shared by the studies."""

    vocab_size: int = 1000
    context_length: int = 2
    temperature: float = 1.0
    model_seed: int = 2026
    mismatch: float = 0.3
    draft_seed: int = 1
    key: str = "specbound-wm-study"
    prompt_length: int = 4
    n_prompts: int = 100
    max_new_tokens: int = 64
    run_seed: int = 20260
    quick: bool = False
    extra: tuple = field(default=())  # study-specific (name, value) pairs, part of signature

    def signature(self) -> str:
        """Short hash of the settings and :data:`STUDY_VERSION` (stale rows are dropped)."""
        blob = json.dumps([STUDY_VERSION, asdict(self)], sort_keys=True, default=str)
        return hashlib.blake2b(blob.encode(), digest_size=6).hexdigest()

    def columns(self) -> dict:
        """The settings as CSV columns (documented in every output row)."""
        d = asdict(self)
        d.pop("extra")
        d.update({k: v for k, v in self.extra})
        return d


FULL = Settings()
QUICK = Settings(vocab_size=200, n_prompts=3, max_new_tokens=12, quick=True)

#: drafter name -> keyword arguments of ``SyntheticLM.draft`` (None: the Settings default)
DRAFTERS = {
    "D0": {},
    "D1": {"mismatch": 0.2, "seed": 2},
    "D2": {"temperature": 0.5},
    "D3": {"temperature": 1.5},
}

DRAFTER_LABELS = {
    "D0": "D0 (default)",
    "D1": "D1 (other size)",
    "D2": "D2 (T=0.5)",
    "D3": "D3 (T=1.5)",
}


def make_models(s: Settings, drafter: str = "D0") -> tuple[SyntheticLM, SyntheticLM]:
    """``(target, draft)`` for the settings and a drafter name of :data:`DRAFTERS`."""
    if drafter not in DRAFTERS:
        raise ValueError(f"drafter: must be one of {sorted(DRAFTERS)}, got {drafter!r}")
    target = SyntheticLM(s.vocab_size, s.context_length, s.model_seed, s.temperature)
    kw = dict(DRAFTERS[drafter])
    mismatch = kw.pop("mismatch", s.mismatch)
    seed = kw.pop("seed", s.draft_seed)
    return target, target.draft(mismatch, seed, **kw)


def prompts(s: Settings, n: int | None = None) -> np.ndarray:
    """``(n, prompt_length)`` int64 prompt token ids (uniform), deterministic in ``run_seed``."""
    n = s.n_prompts if n is None else n
    ss = np.random.SeedSequence([s.run_seed, 0])
    rng = np.random.default_rng(ss)
    return rng.integers(0, s.vocab_size, size=(n, s.prompt_length), dtype=np.int64)


def prompt_seeds(s: Settings, n: int | None = None) -> list[np.random.SeedSequence]:
    """Per-prompt seeds of the unkeyed randomness (``SeedSequence.spawn``, never seed + i)."""
    n = s.n_prompts if n is None else n
    return np.random.SeedSequence([s.run_seed, 1]).spawn(n)


# ------------------------------------------------------------------------ model memoising


class CachedLM:
    """Memoised wrapper of a model: ``next_distribution`` cached by the exact context.

    A pure performance device: the wrapped model's output is a deterministic function of the
    context, so caching by the full context (no assumption on the window length) returns the
    same arrays.  Configurations that revisit the same contexts (PFR at every L, MWS and
    BASIC-UWM emit the same keyed chain; MPFR trees for several B share nodes) then evaluate
    each context once.  Call :meth:`clear` between prompts to bound the memory.
    """

    def __init__(self, model):
        self.model = model
        self.vocab_size = model.vocab_size
        self.context_length = getattr(model, "context_length", None)
        self._cache: dict[bytes, np.ndarray] = {}
        self.hits = 0
        self.misses = 0

    def _probs(self, ctx: np.ndarray) -> np.ndarray:
        k = np.ascontiguousarray(ctx, dtype=np.int64).tobytes()
        out = self._cache.get(k)
        if out is None:
            self.misses += 1
            out = self.model.next_distribution(ctx)
            out.setflags(write=False)
            self._cache[k] = out
        else:
            self.hits += 1
        return out

    def next_distribution(self, context) -> np.ndarray:
        return self._probs(np.asarray(context, dtype=np.int64).reshape(-1))

    def clear(self) -> None:
        self._cache.clear()


def decode_prompts(s: Settings, decoder: str, *, target, draft, L: int = 4, B: int = 1,
                   prompt_ids=None, seeds=None, key=None):
    """Decode every prompt; yields ``(i, DecodeResult)`` (import-light wrapper)."""
    from specbound.sim.decode import speculative_decode

    P = prompts(s) if prompt_ids is None else prompt_ids
    S = prompt_seeds(s, len(P)) if seeds is None else seeds
    key = s.key if key is None else key
    for i in range(len(P)):
        yield i, speculative_decode(target, draft, P[i], decoder, L=L, B=B, key=key,
                                    max_new_tokens=s.max_new_tokens, seed=S[i],
                                    context_length=None)


# ------------------------------------------------------------------------ detection


def keyed_pivots(tokens, prompt_length: int, key, context_length=None) -> np.ndarray:
    """The detector's pivots ``U_t`` of the generated positions (seed 000 Alg. 8, MATH.md §4).

    ``U_t = prf_uniform(context_label(key, w_{:t}, m), w_t, 0)``, from the tokens and the key
    only (:func:`specbound.sim.detect.keyed_pivots`; the same values as
    ``DecodeResult.pivots`` of a keyed decoder).  With ``context_length=None`` (whole prefix)
    no context repeats, so every generated position is scored.
    """
    from specbound.sim.detect import keyed_pivots as _detector_pivots

    U, _ = _detector_pivots(tokens, prompt_length, key, context_length=context_length)
    return U


# ------------------------------------------------------------------------ ROUGE-L


def lcs_length(a, b) -> int:
    """Length of the longest common subsequence of two token sequences.

    Row-by-row dynamic programme, vectorised with the identity
    ``L[i, j] = max_{j' <= j} T[i, j']``, ``T[i, j] = L[i-1, j-1] + 1`` if ``a_i = b_j`` else
    ``L[i-1, j]`` (a match never loses to the running maximum), so each row is one
    ``np.maximum.accumulate``: O(len(a) len(b)) work, O(len(b)) memory.
    """
    a = np.asarray(a).reshape(-1)
    b = np.asarray(b).reshape(-1)
    if a.size == 0 or b.size == 0:
        return 0
    prev = np.zeros(b.size + 1, dtype=np.int64)
    for x in a:
        t = np.where(b == x, prev[:-1] + 1, prev[1:])
        cur = np.empty_like(prev)
        cur[0] = 0
        np.maximum.accumulate(t, out=cur[1:])
        prev = cur
    return int(prev[-1])


def rouge_l(a, b) -> float:
    """Token-level ROUGE-L F1 (Lin 2004): ``2 LCS / (len(a) + len(b))``.

    With recall ``R = LCS/len(b)`` and precision ``P = LCS/len(a)``, the F-measure with
    ``beta = 1`` is ``2PR/(P+R) = 2 LCS/(len(a)+len(b))``, symmetric in ``a`` and ``b``.
    Conventions: two empty sequences score 1 (identical outputs), one empty sequence scores 0.
    """
    a = np.asarray(a).reshape(-1)
    b = np.asarray(b).reshape(-1)
    if a.size == 0 and b.size == 0:
        return 1.0
    return 2.0 * lcs_length(a, b) / (a.size + b.size)


# ------------------------------------------------------------------------ AATPS theory


def block_decisions(result, L: int) -> list[tuple[int, int, int, list[int]]]:
    """Reconstruct the verification decisions of every block of a decoding run.

    Returns one ``(start, emitted, accepted, nus)`` per block: ``start`` the index (among the
    generated tokens) of the block's first token, ``emitted`` its tokens (``accepted[b]`` of
    the result), ``accepted`` the number of accepted drafts and ``nus`` the number of drafts
    consistent with the emitted prefix at each decision (MPFR multiplicity / GLS active-set
    size; 1 for single-draft decoders).  A draft at block position ``s`` is accepted iff the
    emitted token equals the token of a consistent draft (a rejection always emits another
    token: the residual of Alg. 1 puts no mass on the rejected draft, and the PFR / MPFR / GLS
    correction is by construction not among the consistent drafts).  Raises ``RuntimeError``
    when the decoder's bookkeeping is inconsistent (a self-check of the result).
    """
    gen = np.asarray(result.generated)
    N = gen.size
    out = []
    g0 = 0
    for b, k in enumerate(np.asarray(result.accepted)):
        k = int(k)
        ell = min(L, N - g0)
        drafts = np.asarray(result.drafts[b])
        if drafts.shape[1] != ell:
            raise RuntimeError(f"block {b}: drafts of length {drafts.shape[1]}, expected {ell}")
        emitted = gen[g0:g0 + k]
        n_dec = min(k, ell)
        nus = []
        acc = 0
        for s_ in range(n_dec):
            consistent = np.all(drafts[:, :s_] == emitted[:s_], axis=1)
            nus.append(int(consistent.sum()))
            if emitted[s_] in drafts[consistent, s_]:
                acc += 1
            else:
                break
        rejected = acc < n_dec
        ok = (acc == n_dec - 1 and k == n_dec) if rejected else (
            acc == ell and (k == ell + 1 or (k == ell and g0 + k == N)))
        if not ok or len(nus) != n_dec:
            raise RuntimeError(f"block {b}: inconsistent (emitted {k}, accepted {acc}, ell {ell})")
        out.append((g0, k, acc, nus))
        g0 += k
    return out


def acceptance_compensator(results, target, draft, decoder: str, L: int, *,
                           blocks=None) -> pd.DataFrame:
    """Per-block accepted drafts and their theory compensator (module docstring).

    Parameters
    ----------
    results : sequence of DecodeResult
        Runs of one decoder (prompt index = position in the sequence).
    target, draft : models
        The models used for the runs (wrapping them in :class:`CachedLM` is fine).
    decoder : str
        A key of :data:`SCHEME_OF`.
    L : int
        Lookahead of the runs.
    blocks : set of (prompt, block) pairs, optional
        Restrict the (costly, for GLS) theory to these blocks.

    Returns
    -------
    pandas.DataFrame
        Columns ``prompt, block, emitted, accepted, predicted, n_decisions, a_first``
        (``a_first``: the acceptance at the block's first decision, with all ``B`` drafts).
    """
    scheme = SCHEME_OF[decoder]
    rows = []
    ctx_rows: list[tuple[int, np.ndarray, int]] = []  # (row index, context, nu)
    for i, res in enumerate(results):
        toks = np.asarray(res.tokens)
        n0 = res.prompt_length
        for b, (g0, k, acc, nus) in enumerate(block_decisions(res, L)):
            if blocks is not None and (i, b) not in blocks:
                continue
            r = len(rows)
            rows.append({"prompt": i, "block": b, "emitted": k, "accepted": acc,
                         "n_decisions": len(nus)})
            for s_, nu in enumerate(nus):
                ctx_rows.append((r, toks[:n0 + g0 + s_], nu))
    pred = np.zeros(len(rows))
    first = np.full(len(rows), np.nan)
    if ctx_rows:
        P = np.array([target.next_distribution(c) for _, c, _ in ctx_rows])
        Q = np.array([draft.next_distribution(c) for _, c, _ in ctx_rows])
        nus = np.array([nu for _, _, nu in ctx_rows])
        a = np.empty(len(ctx_rows))
        for nu in np.unique(nus):
            sel = nus == nu
            sch = scheme if nu > 1 or scheme in ("sd", "exp_race") else "exp_race"
            a[sel] = np.atleast_1d(exact_acceptance(P[sel], Q[sel], sch, int(nu)))
        seen = set()
        for (r, _, _), val in zip(ctx_rows, a, strict=True):
            pred[r] += val
            if r not in seen:
                first[r] = val
                seen.add(r)
    df = pd.DataFrame(rows, columns=["prompt", "block", "emitted", "accepted", "n_decisions"])
    df["predicted"] = pred
    df["a_first"] = first
    return df


# ------------------------------------------------------------------------ statistics


def mean_se(x) -> tuple[float, float]:
    """Mean and standard error (``nan`` standard error for fewer than 2 values)."""
    x = np.asarray(x, dtype=np.float64).reshape(-1)
    if x.size == 0:
        return float("nan"), float("nan")
    if x.size < 2:
        return float(x.mean()), float("nan")
    return float(x.mean()), float(x.std(ddof=1) / math.sqrt(x.size))


def cluster_ratio_se(num, den) -> tuple[float, float]:
    """Ratio estimator ``sum(num)/sum(den)`` and its cluster-robust standard error.

    Clusters are sequences (prompts): blocks of one sequence share contexts, so AATPS =
    total emitted tokens / total blocks has the linearised variance
    ``m/(m-1) sum_i (num_i - r den_i)^2 / (sum den)^2`` over the ``m`` clusters.
    """
    num = np.asarray(num, dtype=np.float64)
    den = np.asarray(den, dtype=np.float64)
    r = float(num.sum() / den.sum())
    m = num.size
    if m < 2:
        return r, float("nan")
    var = m / (m - 1) * np.sum((num - r * den) ** 2) / den.sum() ** 2
    return r, float(math.sqrt(var))


# ------------------------------------------------------------------------ resumable sweeps
# The store and the runner are :mod:`specbound.sweep` (imported above as ``ResumableCSV`` and
# ``run_sweep``); the studies' policy on executors is here.

#: stands for "no executor given or set by a driver": the studies' own default applies
_STUDY_DEFAULT = object()


def default_executor(quick: bool) -> Executor | None:
    """A 2-process pool in full mode (None, i.e. serial, in quick mode and on 1 core)."""
    n = min(2, os.cpu_count() or 1)
    if quick or n < 2:
        return None
    return local_executor(n)


def study_sweep(configs, worker: Callable, store: ResumableCSV, *, quick: bool,
                executor: Executor | None = None, desc: str = "", progress: bool = True
                ) -> pd.DataFrame:
    """:func:`specbound.sweep.run_sweep` with the studies' choice of executor.

    The caller's ``executor`` if given; else the one a driver set with
    :func:`specbound.sweep.use_executor` (``paper_figs.run_all --executor``, the
    ``SPECBOUND_EXECUTOR`` environment variable); else a 2-process pool in full mode and
    serial in quick mode.  A pool made here is shut down afterwards, at once (queued tasks
    cancelled, workers terminated) if the sweep is interrupted.
    """
    ex = executor if executor is not None else current_executor(_STUDY_DEFAULT)
    own = ex is _STUDY_DEFAULT
    if own:
        ex = default_executor(quick)
    try:
        out = run_sweep(configs, worker, store, desc=desc, executor=ex, progress=progress)
    except BaseException:
        if own:
            shutdown_now(ex)
        raise
    if own and ex is not None:
        ex.shutdown()
    return out


def with_extra(s: Settings, **extra) -> Settings:
    """Settings with study-specific parameters added to the signature and CSV columns."""
    return replace(s, extra=tuple(sorted({**dict(s.extra), **extra}.items())))


def measured_entropy(s: Settings, n_contexts: int = 500) -> float:
    """Mean next-token entropy (nats) of the target over random contexts."""
    target, _ = make_models(s)
    return float(target.mean_entropy(n_contexts=n_contexts, seed=s.run_seed))


def write_outputs(out_dir, name: str, df, plot, table=None) -> list:
    """Finish a resumable study: ``compute`` already wrote ``NAME.csv`` row by row; write the
    PNG (``plot(df, png)``) and, if ``table`` is given, the markdown ``NAME.md``."""
    png = out_path(out_dir, f"{name}.png")
    paths = [png, out_path(out_dir, f"{name}.csv")]
    if table is not None:
        md = out_path(out_dir, f"{name}.md")
        md.write_text(table(df))
        paths.append(md)
    plot(df, png)
    return paths
