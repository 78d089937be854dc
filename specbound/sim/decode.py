"""Sequence-level speculative decoders on language models given as next-token distributions.

:func:`speculative_decode` runs one of thirteen decoders (Liu, Wan, Gao & Gündüz 2026,
arXiv:2609.21858, §4-§6, App. A, C, D, the baselines named there, the block verification
of Sun et al. 2024, arXiv:2403.10444, and the lossless hierarchical speculative decoding of
Zhou et al., ICLR 2026, arXiv:2601.05724) on a target/draft pair
of models and returns a frozen :class:`DecodeResult`: the tokens, what every block emitted
and accepted, the multiplicity ``nu`` of every verification decision, the evaluation counts,
the keyed pivots and the watermark configuration.

Implementation
--------------
The decision logic never calls a model: it asks a *backend* (the protocol below) for one
batched draft evaluation per draft depth and one batched target evaluation per block, so the
same decisions and the same random draws drive the synthetic models of this package
(:class:`SyntheticBackend`) and, with a backend holding key-value caches, real networks.
Two block loops make the same decisions with the same draws, token for token.  Without a
``backend``, :func:`speculative_decode` runs the compiled loop (:mod:`specbound.sim._compiled`:
the whole block loop in Numba, models evaluated inside it) whenever it covers the run:
:class:`~specbound.sim.models.SyntheticLM` / :class:`~specbound.sim.models.MarkovLM` models,
a ``PCG64`` generator and work arrays within ``_compiled.MAX_WORK``.  Every other run -- a
given backend (a real model), other models, other generators, larger runs -- takes the
reference loop of this module (``BlockRun``): the block logic in Python, each vocabulary-sized
step (exponential race, MPFR top-B, residual draw, recursive rejection) a Numba kernel
(``_kernels``), keyed context labels BLAKE2b digests computed once per context
(:mod:`specbound.sim.prf`; whole-prefix labels keep the hash state along the committed
sequence).
Which block runs a decoder is the block kind of its :class:`~specbound.sim.decoders.
DecoderSpec` (:data:`specbound.sim.decoders.DECODER_SPECS`), in both loops; the key is
hashed once (:func:`specbound.sim.prf.key_digest`) and its digest passed down.

Backend protocol
----------------
Contexts are passed as *paths*: tuples of token ids that continue the committed sequence
(the prompt plus every token emitted by the finished blocks); ``()`` is the committed
sequence itself.

``reset(prompt)``
    Start a new sequence whose committed tokens are ``prompt``.
``draft_step(paths) -> Q``
    One batched draft evaluation: ``Q[i]`` is the draft's next-token distribution after
    ``paths[i]``.  Called once per draft depth with the distinct paths of that depth (the B
    draft paths of a multi-draft decoder, the tree level of MPFR); ``n_draft_evals`` counts
    the calls, ``n_draft_contexts`` the paths.
``verify(paths) -> P``
    One batched target evaluation per block over every path prefix of the block (depth 0 to
    ``ell``, the root included): what a real model computes with one forward pass over the
    draft tree.  ``P[i]`` is the target's distribution after ``paths[i]``.  A backend may
    compute the rows lazily on first access (:class:`SyntheticBackend` does: it evaluates
    only the realised path); the decision logic reads only rows of paths it passed.
    ``n_target_evals`` counts the calls, ``n_target_contexts`` the paths.
``commit(tokens)``
    The tokens emitted by the block just finished (accepted drafts plus the correction or
    bonus token), appended to the committed sequence: a cached backend crops its key-value
    caches to the accepted prefix here.
``finished`` (optional attribute)
    When a backend sets it to True (e.g. after committing a real model's end-of-sequence
    token), the run stops after the current block.
``block_length(ell, B) -> int`` (optional)
    Called before every block of a drafting decoder with the block's length ``ell``; the
    block is made this long instead (clipped to ``0 .. ell``).  A draft that proposes only
    where it finds something (a prompt lookup) returns 0 where it does not: the block then
    drafts nothing and is the decoder's one-token step from the target's law (its bonus
    token), an autoregressive step.
``per_draft_laws`` (optional attribute) and ``draft_step_each(paths) -> Q`` (optional)
    A backend whose ``B`` drafts are not identically distributed (a prompt lookup: draft
    ``b`` the point mass on the ``b``-th distinct continuation found) sets
    ``per_draft_laws = True`` and gives ``Q[b]``, draft ``b``'s own law after its own path
    ``paths[b]`` (``len(paths) == B``, one call per draft depth).  The multi-draft blocks
    then draw draft ``b`` from ``Q[b]`` (``B > 1``, without ``repeats="skip"``, whose
    skipped contexts draw i.i.d. drafts from ``draft_step``): ``mpfr`` proposes draft
    ``b``'s race winner ``argmin_v G_{v,j}/Q[b]_v`` (``j`` its rank among the drafts at its
    context) and still emits the target-side winner, so its tokens do not depend on the
    drafts at all; ``invariant`` races draft ``b`` on its own clocks, and its target token at
    position ``s`` races clocks that the active set (fixed by the earlier positions) does
    not read; ``specinfer`` verifies with SpecInfer's recursive rejection over the active
    drafts' own laws, each rejection leaving the residual ``(r - Q[b])_+`` (Miao et al.
    2024, arXiv:2305.09781, §4.2, drafts of different small models).  Each stays exact:
    given the past, every block emits the target's law.

Randomness
----------
Keyed clocks (shared with :mod:`specbound.sim.detect`): in context ``c`` with
``label = context_label(key, c, window)`` the ``j``-th inter-arrival clock of token ``v`` is
``-log(prf_uniform(label, v, j))``.  Unkeyed randomness comes from
``np.random.default_rng(seed)`` and is laid out canonically per block (the same array shape
whatever the drafter does), so that "the same shared randomness R" is well defined for the
drafter-invariance checks of :mod:`specbound.sim.invariance`:

- ``ar``: one uniform per token (inverse CDF);
- ``vsps``, ``mse``, ``mse_pseudo``, ``blockver``, ``hsd``: ``rng.random((ell + 1, 3))`` per block
  (draft draw, acceptance coin, residual/bonus draw at each block position);
- ``specinfer``: ``rng.random((ell + 1, B, 3))`` per block;
- ``invariant``: ``ell + 1`` 64-bit labels per block; draft ``b`` at block position ``s``
  races the clocks ``-log prf_uniform(label_s, v, b)``;
- ``pfr_nowm`` and masked repeats: a run label ``R`` (the first draw of the generator); the
  clocks of absolute position ``t`` use ``label = mix(R + G (t + 1))``, fresh for every
  position and independent of the key, so the unkeyed PFR chain is again drafter invariant
  given the seed.

Decoders
--------
``ar``
    Autoregressive sampling from the target (inverse CDF).
``basic_uwm``
    Keyed exponential race / Gumbel-max watermark without speculation:
    ``w_t = argmin_v E_{v,1}(c_t) / p_v(c_t)``.
``vsps``
    Vanilla speculative sampling (Leviathan et al. 2023, arXiv:2211.17192; Chen et al. 2023,
    arXiv:2302.01318; Alg. 1 of Liu et al. 2026 blockwise): ``L`` drafts ``x_s ~ q``, accept
    while ``U_s <= p(x_s)/q(x_s)``, residual ``(p - q)_+`` at the first rejection, bonus from
    the target when all are accepted.
``pfr`` / ``pfr_nowm``
    Single-draft PFR (Liu et al. 2026, Alg. 3/9): draft ``argmin_v E_v/q_v(c_s)``, target
    ``argmin_v E_v/p_v(c_s)`` on the same clocks; the emitted token is always the target-side
    winner (correction and bonus included: never fresh noise).  ``pfr_nowm`` uses the
    unkeyed position clocks described above.
``mpfr``
    Multi-draft MPFR with the context tree and multiplicities (Liu et al. 2026, Alg. 4/10,
    batched form of Alg. 7): context ``c`` with multiplicity ``nu(c)`` proposes the labels of
    the ``nu(c)`` smallest scores ``G_{v,j}/q_v(c)`` (Alg. 6); equal tokens merge into a child
    whose multiplicity is their count; the emitted token is ``argmin_v G_{v,1}/p_v(c)``; the
    path is followed while the emitted token is among the children.  With ``B = 1`` it is
    ``pfr``.
``invariant``
    List coupling / GLS (Rowan et al. 2025): ``B`` draft sequences, draft ``b`` at position
    ``s`` is ``argmin_v E_{s,b,v}/q_v`` on its own path; the target token at position ``s`` is
    the label of ``argmin_{b in A_s, v} E_{s,b,v}/p_v`` over the active drafts ``A_s`` (those
    whose drafts agree with the emitted prefix); accepted iff some active draft proposed it;
    the active set shrinks to the drafts that proposed it.
``specinfer``
    ``B`` i.i.d. draft sequences; at each position recursive rejection sampling (Miao et al.
    2024, arXiv:2305.09781) over the active drafts' proposals in draft order; correction from
    the last residual; bonus from the target.
``mws`` / ``mse`` / ``mse_pseudo``
    Hu & Huang (2024) and He et al. (2026), arXiv:2602.01428, with the DeltaGumbel
    (exponential-race) reweighting ``R_E(P) = delta_{argmin_v E_v/P_v}`` on this package's
    keyed clocks, so that :func:`specbound.sim.detect.detect` applies to every keyed decoder.
    Choices, after studying ``accuwm/mc_watermark.py`` and ``accuwm/utils.py`` of the authors'
    code:

    - **mws** ("maintain watermark strength", their ``reweight_in_mc=True``): draft tokens
      from the watermarked draft ``R_E(Q)``; speculative sampling between the *watermarked*
      distributions ``R_E(P)`` and ``R_E(Q)``; residual ``(R_E(P) - R_E(Q))_+``; watermarked
      bonus.  With the DeltaGumbel reweight both are point masses, so a draft is accepted iff
      the two races agree and the residual is the target winner: MWS coincides token for
      token with ``pfr`` (tested).  (With other reweights, e.g. gamma, it would not.)
    - **mse** ("maintain sampling efficiency", ``reweight_in_mc=False``): draft tokens from
      the watermarked draft ``R_E(Q)`` (keyed race on ``q``); acceptance with the
      *unwatermarked* ratio ``U <= p(x)/q(x)`` with a seeded coin (acceptance 1 - TV, as
      vsps); unwatermarked residual ``(p - q)_+``; watermarked bonus (keyed race on ``p``).
      Exact marginally over keys because ``x ~ q`` when the key is random.
    - **mse_pseudo** (He et al. 2026, "pseudorandom r", ``psedo_r=True`` in
      ``real/accuwm/utils.py``): as mse, but the acceptance coin is keyed:
      ``r = prf_uniform(context_label(key2, c_s, window), 0, 0)`` with the second key
      ``key2 = b"mse_pseudo-acceptance:" + key_digest(key)`` (the dual-key design of the
      reference code; independent of the token clocks).

``blockver``
    Block verification (Sun, Mendlovic, Leviathan, Aharoni, Beirami, Ro & Suresh 2024,
    arXiv:2403.10444, Alg. 2): the drafts of ``vsps``; with the residual weights
    ``p_i = min(p_{i-1} p(x_i)/q(x_i), 1)`` the block keeps ``x_1..x_tau``, ``tau`` the
    largest ``i`` whose coin is at most ``h_i`` (``h_ell = p_ell``), then draws one token from
    ``(p_tau P_tau - Q_tau)_+`` or the bonus from the target
    (:mod:`specbound.sim._compiled_blockver`; ``docs/mathematics.md`` §5.7).  At ``L = 1`` it
    is ``vsps``.  Its decisions have no per-context closed form (it is not in
    :data:`DECODER_SCHEME`); :func:`specbound.theory.blockver_block_tokens` gives its exact
    tokens per block.
``hsd``
    Lossless hierarchical speculative decoding (Zhou, Huang, Li, Wu, Wang, Zhang, Lin & Cheng,
    ICLR 2026, arXiv:2601.05724): the drafts of ``vsps``; the whole block is kept with the
    capped joint ratio ``c_ell = R_ell / max(1, R_1..R_ell)`` (``R_k`` the joint ratio
    ``P(x_1..x_k) / Q(x_1..x_k)``), otherwise the verification steps back from level
    ``ell - 1`` towards the root, leaving level ``k`` with probability ``1 - A_k / max(A_k,
    D_k)`` (excess and deficit of the branch), and draws the correction from
    ``(c_k P_k - Q_k)_+`` at the level it stops at (:mod:`specbound.sim._compiled_hsd`;
    ``docs/hsd.md``).  Its kept prefix has the law of ``blockver``'s (so it is ``vsps`` in law
    at ``L = 1``); :func:`specbound.theory.hsd_block_tokens` gives its exact tokens per block.

Verification decisions
----------------------
A *decision* is the verification of the drafts at one block position (the bonus token is not
one).  At a decision the decoder knows ``nu``, the number of drafts consistent with the
emitted prefix: the multiplicity ``nu(c)`` of the context in the MPFR tree, the size of the
active set for ``invariant`` and ``specinfer``, 1 for single-draft decoders.  Given the past,
the decision accepts with probability ``exact_acceptance(p(c), q(c), DECODER_SCHEME[decoder],
nu)`` (fresh clocks or coins in a context not yet decided), so the accepted count minus
the sum of these probabilities is a martingale: :func:`acceptance_compensator`.

Repeated contexts (``repeats=``): a position is a *repeat* when its context window (last
``window`` tokens) already occurred at an earlier *generated* position of the sequence (or
earlier on the same draft path within the block). ``"reuse"`` (default) keeps the keyed
clocks there. ``"mask"`` replaces the keyed label by the unkeyed position label (see
Randomness), for drafts and target alike, keeping the decoder's coupling; the detector
scores each (window, token) pair once. ``"skip"`` is Hu & Huang 2024's setting (their
context-code history): a repeat falls back to vanilla speculative sampling, ``x ~ q`` drawn
and accepted with the block's unkeyed uniforms (acceptance ``1 - TV``), residual
``(p - q)_+``, bonus from ``p`` (an ``mpfr`` context of multiplicity ``k > 1`` drafts ``k`` i.i.d.
tokens from ``q`` and verifies them by SpecInfer's recursive rejection); it is recorded in
``DecodeResult.skipped`` / ``decision_skipped`` and the detector does not score it. The
reported pivot is always the keyed one (what the detector recomputes). With ``window=None``
(whole prefix) no window repeats. In ``"skip"`` mode the keyed decoders draw
``rng.random((ell + 1, 3))`` per block (``(ell + 1, B, 3)`` for the tree) and ``basic_uwm``
one uniform per token (also with the gamma reweight), so the default streams are unchanged.

Gamma reweight (``reweight="gamma"``, ``basic_uwm``, ``mws``, ``mse``, ``mse_pseudo``): the
keyed permutation orders the tokens by ``prf_uniform(label, v, 0)``; ``R_G(P)`` drops the
first half of the cumulative interval along it and doubles the second (Hu et al. 2023,
arXiv:2310.10669).  Keyed draws from ``R_G`` use the block's unkeyed uniforms (``us[s, 0]``
for drafts, ``us[ell, 2]`` for the bonus).  ``mws`` then verifies between ``R_G(P)`` and
``R_G(Q)`` (ordinary speculative sampling, residual ``(R_G(P) - R_G(Q))_+``) and is no longer
PFR; ``mse`` keeps the unwatermarked verification.  The detector's pivot is unchanged.

Fresh unkeyed clocks (``pfr_nowm``, ``unkeyed="fresh"``): ``ell + 1`` labels are drawn from
the generator per block (``rng.integers(0, 2**64, ell + 1)``) and depth ``s`` of the block
races on label ``s``, so a token's clocks depend on the block boundaries before it (a fresh
stream per run, as a sampler drawing from a global generator), not on its absolute position.

Block length: ``ell = min(L, max_new_tokens - generated)``; the bonus token is emitted only
while ``generated < max_new_tokens``, so the last block may be shorter (Alg. 9/10).
"""

from __future__ import annotations

import numbers
import os
from collections.abc import Iterable, Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from specbound._validation import (
    INT64_MAX,
    as_choice,
    as_int,
    as_rng,
    asarray_named,
    check_memory,
    limit_from_env,
)
from specbound.sim import _compiled
from specbound.sim import _compiled_blockver as _BV
from specbound.sim import _compiled_hsd as _HS
from specbound.sim import _kernels as _K
from specbound.sim import lossy as _lossy
from specbound.sim.decoders import (
    DECODER_SCHEME,
    DECODER_SPECS,
    DECODERS,
    KEYED_DECODERS,
    MULTI_DRAFT_DECODERS,
    DecoderSpec,
    decoder_spec,
)
from specbound.sim.detect import acceptance_digest
from specbound.sim.models import MarkovLM, as_language_model, next_distributions
from specbound.sim.prf import (
    PrefixLabels,
    as_window,
    digest_label,
    key_digest,
    key_id,
    prf_uniform,
    prf_uniform_numpy,
)
from specbound.sim.results import DecodeResult, WatermarkConfig
from specbound.sim.samplers import public_plan, public_scan
from specbound.theory.blocks import expected_block_tokens as _theory_block_tokens
from specbound.theory.blockver import blockver_block_tokens as _blockver_block_tokens
from specbound.theory.hsd import hsd_block_tokens as _hsd_block_tokens

__all__ = ["DECODERS", "DECODER_SCHEME", "KEYED_DECODERS", "MULTI_DRAFT_DECODERS", "REPEATS",
           "PROPOSALS", "RESIDUALS", "REWEIGHTS", "UNKEYED", "DecodeBackend", "DecodeResult",
           "SyntheticBackend",
           "WatermarkConfig", "acceptance_compensator", "expected_block_tokens",
           "speculative_decode"]

#: largest ``B`` of :func:`speculative_decode`
MAX_DRAFTS = 1024
#: largest ``max_new_tokens`` of :func:`speculative_decode`
MAX_NEW_TOKENS = 100_000
#: largest estimated work of one decoding call on the package's models
#: (:func:`decode_work`: model-law entries), above which :func:`speculative_decode`,
#: :func:`~specbound.sim.speculative_decode_batch` and the lossy decoders refuse the call
#: before decoding; the environment variable ``SPECBOUND_MAX_WORK`` overrides it (a positive
#: number, or ``inf`` for no limit).  Measured on a busy 2-core machine: 2 to 35 ns a unit
#: (vocabularies 2 to 50,000, every block kind), so the limit is a run of a few minutes to
#: an hour; the largest call of the package's studies (the watermark studies' batch: 1,000
#: prompts x 128 tokens, B = 8, L = 4, vocabulary 1,000) is 5.0e9, 20 times below it.
MAX_DECODE_WORK = 10**11
#: the environment variable that overrides :data:`MAX_DECODE_WORK`
MAX_WORK_ENV = "SPECBOUND_MAX_WORK"
#: the per-law cost of a decoder step besides the vocabulary scan, in vocabulary entries
#: (measured: 100 to 560 ns a law at vocabulary 2, about 10 to 40 entries' time)
LAW_OVERHEAD = 64
#: handling of repeated context windows by the keyed decoders (``repeats=``): ``"reuse"`` the
#: keyed clocks, ``"mask"`` them with unkeyed position clocks, ``"skip"`` the watermark
#: (vanilla speculative sampling with unkeyed coins; not scored by the detector)
REPEATS = ("reuse", "mask", "skip")
#: reweighting of the Hu & Huang decoders (``reweight=``): ``"delta"`` (DeltaGumbel, the
#: exponential race) or ``"gamma"`` (the gamma-reweighting of Hu et al. 2023)
REWEIGHTS = ("delta", "gamma")
#: unkeyed clocks of ``pfr_nowm`` (``unkeyed=``): ``"position"`` (seeded position clocks,
#: drafter invariant given the seed) or ``"fresh"`` (labels drawn from the generator per block)
UNKEYED = ("position", "fresh")
#: correction of ``mse_pseudo`` after a rejection (``residual=``): ``"plain"`` (a draw from
#: ``(p - q)_+`` with the block's unkeyed uniform) or ``"keyed"`` (He et al. 2026's dual-key
#: design: the exponential race on ``(p - q)_+`` with the second key's clocks)
RESIDUALS = ("plain", "keyed")
#: the Poisson process of ``mpfr`` (``proposal=``): ``"race"`` (the per-symbol exponential
#: race, Alg. 6, in both loops) or ``"uniform"`` (Alg. 5 on a public process whose marks are
#: uniform on the vocabulary; Python block loop only, same joint law by Thm. A.1)
PROPOSALS = ("race", "uniform")
#: the default of every option of :data:`specbound.sim.decoders.OPTIONS`
_OPTION_DEFAULTS = {"reweight": "delta", "unkeyed": "position", "residual": "plain",
                    "proposal": "race"}
_U64 = np.uint64


# ------------------------------------------------------------------------- validation


def validate_decode_args(target, draft, prompt, decoder, L, B, key, max_new_tokens, window):
    """The checked arguments of a run: ``(target, draft, prompt, decoder, L, B,
    max_new_tokens, window, digest)``, ``digest`` the key hashed once
    (:func:`specbound.sim.prf.key_digest`; None without a key), passed down as the key."""
    spec = decoder_spec(decoder)
    target, draft, L, B, max_new_tokens, window, digest = _validate_args(
        spec, target, draft, L, B, key, max_new_tokens, window)
    return (target, draft, validate_prompt(prompt, target.vocab_size), decoder, L, B,
            max_new_tokens, window, digest)


def _validate_args(spec, target, draft, L, B, key, max_new_tokens, window):
    """The checks of :func:`validate_decode_args` but the prompt's, for the decoder of
    ``spec``: ``(target, draft, L, B, max_new_tokens, window, digest)``."""
    decoder = spec.name
    target = as_language_model(target, "target")
    if spec.drafts or draft is not None:
        draft = as_language_model(draft, "draft")
        if draft.vocab_size != target.vocab_size:
            raise ValueError(
                f"draft: vocabulary size {draft.vocab_size} differs from the target's "
                f"{target.vocab_size}"
            )
    L = as_int(L, "L", min_value=1)
    B = as_int(B, "B", min_value=1, max_value=MAX_DRAFTS)
    if B > 1 and not spec.multi_draft:
        raise ValueError(
            f"B: decoder {decoder!r} is single-draft (B must be 1); multi-draft decoders are "
            f"{sorted(n for n, s in DECODER_SPECS.items() if s.multi_draft)}"
        )
    if spec.keyed and key is None:
        raise ValueError(f"key: decoder {decoder!r} is keyed and needs a key (int, str, bytes)")
    digest = key_digest(key) if key is not None else None  # "key: ..." for an unusable key
    max_new_tokens = as_int(max_new_tokens, "max_new_tokens", min_value=0,
                            max_value=MAX_NEW_TOKENS)
    window = as_window(window)
    return target, draft, L, B, max_new_tokens, window, digest


def validate_prompt(prompt, vocab_size, name="prompt") -> np.ndarray:
    """The checked prompt: a 1-D int64 array of token ids in ``[0, vocab_size)`` (``ValueError``
    naming ``name`` otherwise)."""
    arr = asarray_named(prompt if prompt is not None else [], name)
    if arr.ndim > 1:
        raise ValueError(f"{name}: must be a 1-D sequence of token ids, got shape {arr.shape}")
    if arr.size and (arr.dtype == np.bool_ or arr.dtype.kind not in "iu"):
        raise ValueError(f"{name}: must be a sequence of integer token ids")
    arr = arr.astype(np.int64).reshape(-1)
    if arr.size and (arr.min() < 0 or arr.max() >= vocab_size):
        raise ValueError(
            f"{name}: token ids must lie in [0, {vocab_size}), got range "
            f"[{arr.min()}, {arr.max()}]"
        )
    return arr


def decode_run_args(target, draft, decoder, *, L, B, key, max_new_tokens, window,
                    repeats="reuse", reweight="delta", unkeyed="position", residual="plain",
                    max_blocks=None, proposal="race"):
    """The checked arguments of a decoding call but its prompts, derived once and passed
    down: ``(target, draft, args)`` with ``args`` the :class:`specbound.sim._compiled.RunArgs`
    (the decoder's spec looked up once, the key hashed once, the options checked against
    the spec).  ``ValueError`` naming the argument."""
    spec = decoder_spec(decoder)
    target, draft, L, B, N, w, digest = _validate_args(spec, target, draft, L, B, key,
                                                       max_new_tokens, window)
    repeats = as_choice(repeats, "repeats", REPEATS)
    reweight, unkeyed, residual = validate_decode_options(spec, reweight, unkeyed, residual)
    proposal = validate_proposal(spec, proposal)
    if max_blocks is not None:
        max_blocks = as_int(max_blocks, "max_blocks", min_value=1, max_value=INT64_MAX)
    return target, draft, _compiled.RunArgs(spec, L, B, N, digest, w, max_blocks, repeats,
                                            reweight, unkeyed, residual, proposal)


def _block_laws(kind: str, ell: int, B: int) -> tuple[int, int]:
    """``(laws, held)`` of one block of ``ell`` positions of block kind ``kind``: the model
    laws it evaluates at most (the drafts' ``B * ell`` and the target's ``ell + 1``; one
    for a token step) and those it holds at once at most (the reference loop: a depth of
    the tree, or every draft law of a block for the list decoders)."""
    if kind == "token":
        return 1, 1
    laws = B * ell + ell + 1
    if kind in ("gls", "specinfer"):
        return laws, laws
    if kind == "tree":
        return laws, B + ell + 1
    return laws, 2 * ell + 1


def decode_work(vocab_size: int, kind: str, L: int, B: int, max_new_tokens: int,
                max_blocks: int | None = None, prompts: int = 1) -> int:
    """An upper bound of the work of a decoding call, in model-law entries: ``prompts``
    times at most ``min(max_new_tokens, max_blocks)`` blocks (each emits at least one
    token) times the laws of a block of ``ell = min(L, max_new_tokens)`` positions
    (``B * ell`` draft laws and ``ell + 1`` target laws; one law a token for the block
    kind ``token``) times ``vocab_size + LAW_OVERHEAD`` entries (:data:`LAW_OVERHEAD`: the
    per-law cost besides the vocabulary scan).  Calibrated against measured run times
    (:data:`MAX_DECODE_WORK`); a run that accepts drafts takes fewer blocks than the
    bound.  Each block adds the token references of its draft paths (``B * ell * (ell +
    1) / 2``: the reference loop keeps every path prefix as a tuple), which dominate at
    ``B = L = 1024`` with a small vocabulary."""
    N = int(max_new_tokens)
    ell = min(int(L), N)
    blocks = N if max_blocks is None else min(N, int(max_blocks))
    laws, _ = _block_laws(kind, ell, int(B))
    return int(prompts) * blocks * (laws * (int(vocab_size) + LAW_OVERHEAD)
                                    + _path_entries(kind, ell, int(B)))


def _path_entries(kind: str, ell: int, B: int) -> int:
    """Token references of a block's draft paths in the reference loop (``B`` paths of
    lengths 1 to ``ell``, each a tuple): a block of ``B = L = 1024`` holds 5.4e8 (4 GiB)."""
    return 0 if kind == "token" else B * ell * (ell + 1) // 2


def decode_memory(vocab_size: int, kind: str, L: int, B: int, max_new_tokens: int,
                  max_blocks: int | None = None, prompt_length: int = 0,
                  store_drafts: bool = True) -> int:
    """An upper bound (bytes) of what one run holds at once: the laws of a block the
    reference loop keeps (float64 rows of ``vocab_size``) and its draft paths (tuples of
    token references), and the run's records (int64:
    the tokens, per block the emitted and accepted counts, per decision its multiplicity,
    outcome, position and pivot, and with ``store_drafts`` the ``B * ell`` drafts of every
    block)."""
    N = int(max_new_tokens)
    ell = min(int(L), N)
    blocks = N if max_blocks is None else min(N, int(max_blocks))
    _, held = _block_laws(kind, ell, int(B))
    # the draft paths of a block as tuples (a reference each, 64 bytes a tuple)
    paths = _path_entries(kind, ell, int(B)) + (0 if kind == "token" else 8 * int(B) * ell)
    records = int(prompt_length) + N + 2 * blocks + 4 * N + paths
    if store_drafts:
        records += blocks * int(B) * ell
    return 8 * (held * int(vocab_size) + records)


def check_decode_cost(target, args: _compiled.RunArgs, prompts=(), *, batch: bool = False,
                      store_drafts: bool = True) -> None:
    """Refuse up front a call whose estimated work (:func:`decode_work`) exceeds
    :data:`MAX_DECODE_WORK` (or ``SPECBOUND_MAX_WORK``), or whose estimated memory
    (:func:`decode_memory`) exceeds the memory available, with a ``ValueError`` naming
    the arguments that drive the estimate (``max_new_tokens``, ``B``, ``L``, and
    ``prompts`` for a batch) and stating it.  ``prompts``: the checked prompts of the call."""
    prompts = list(prompts) or [np.zeros(0, np.int64)]
    spec, L, B, N = args.spec, args.L, args.B, args.N
    kind = spec.block_for(args.reweight)
    V = int(target.vocab_size)
    names = ", ".join((["prompts"] if batch else []) + ["max_new_tokens"]
                      + (["B"] if B > 1 else []) + ([] if kind == "token" else ["L"]))
    work = decode_work(V, kind, L, B, N, args.max_blocks, len(prompts))
    limit = limit_from_env(MAX_WORK_ENV, MAX_DECODE_WORK)
    if work > limit:
        ell = min(L, N)
        blocks = N if args.max_blocks is None else min(N, args.max_blocks)
        laws, _ = _block_laws(kind, ell, B)
        many = f"{len(prompts)} prompts x " if batch else ""
        source = (f"from {MAX_WORK_ENV}" if os.environ.get(MAX_WORK_ENV, "").strip()
                  else "specbound.sim.decode.MAX_DECODE_WORK")
        raise ValueError(
            f"{names}: the call's estimated work is {work:.3g} model-law entries ({many}"
            f"up to {blocks} blocks x ({laws} laws a block x (vocabulary {V} + "
            f"{LAW_OVERHEAD}) + {_path_entries(kind, ell, B)} draft-path tokens)), above the "
            f"limit {limit:.3g} ({source}; set the environment variable {MAX_WORK_ENV} to "
            f"raise it)")
    longest = max(int(p.size) for p in prompts)
    need = decode_memory(V, kind, L, B, N, args.max_blocks, longest, store_drafts)
    check_memory(names, need, what=f"a block's laws and the run's records, vocabulary {V}",
                 hint=f"use smaller {names}")


# ------------------------------------------------------------------------- the backend


@runtime_checkable
class DecodeBackend(Protocol):
    """The model evaluation the decoders call (module docstring, "Backend protocol").

    Paths are tuples of token ids continuing the committed sequence.  :class:`SyntheticBackend`
    implements it for the models of :mod:`specbound.sim.models`; a backend for real networks
    holds key-value caches, verifies a block with one batched forward pass and crops its
    caches in :meth:`commit`.
    """

    def reset(self, prompt) -> None:
        """Start a sequence whose committed tokens are ``prompt``."""

    def draft_step(self, paths) -> Sequence:
        """Draft distributions after each path (one batched pass at one draft depth)."""

    def verify(self, paths) -> Sequence:
        """Target distributions after each path (one batched pass per block)."""

    def commit(self, tokens) -> None:
        """Append the tokens a block emitted to the committed sequence."""


class _LazyRows(Sequence):
    """Target distributions of a block's paths, evaluated on first access (and kept)."""

    __slots__ = ("_committed", "_fn", "_paths", "_rows")

    def __init__(self, fn, committed, paths):
        self._fn = fn
        self._committed = committed
        self._paths = paths
        self._rows: list = [None] * len(paths)

    def __len__(self) -> int:
        return len(self._paths)

    def __getitem__(self, i):
        row = self._rows[i]
        if row is None:
            ctx = np.array(self._committed + list(self._paths[i]), dtype=np.int64)
            row = self._fn([ctx])[0]
            self._rows[i] = row
        return row


def _batched(model):
    """``contexts -> 2-D distributions`` of a protocol model, unchecked (the fast path)."""
    fn = getattr(model, "next_distributions", None)
    if fn is not None:
        return lambda ctxs: fn(ctxs, validate=False)
    return lambda ctxs: next_distributions(model, ctxs, validate=False)


class SyntheticBackend:
    """The decoders' model evaluation for models of the model protocol.

    Implements the backend protocol of this module (``reset``, ``draft_step``, ``verify``,
    ``commit``) for any object with ``vocab_size`` and ``next_distribution``
    (:class:`~specbound.sim.models.SyntheticLM`, :class:`~specbound.sim.models.MarkovLM`,
    :class:`~specbound.sim.models.CachedLM`, ...), through the batched
    ``next_distributions(contexts, validate=False)`` fast path when the model has it.  Such
    models are pure functions of the context and hold no cache, so ``commit`` only extends
    the committed sequence, and ``verify`` evaluates the rows lazily (only the realised path
    of a block is computed; the counts of :class:`DecodeResult` still count every context a
    batched pass evaluates).

    Parameters
    ----------
    target, draft
        Protocol models (``draft`` may be None for decoders without drafts).
    """

    def __init__(self, target, draft=None):
        self.target = as_language_model(target, "target")
        self.draft = draft if draft is None else as_language_model(draft, "draft")
        if draft is not None and draft.vocab_size != target.vocab_size:
            raise ValueError(f"draft: vocabulary size {draft.vocab_size} differs from the "
                             f"target's {target.vocab_size}")
        self._p = _batched(target)
        self._q = _batched(draft) if draft is not None else None
        self._committed: list[int] = []

    def reset(self, prompt) -> None:
        """Start a sequence whose committed tokens are ``prompt``."""
        self._committed = [int(t) for t in self._ids(prompt, "prompt")]

    def _ids(self, seq, name):
        """``seq`` if it is a 1-D sequence of token ids in ``[0, vocab_size)``."""
        if isinstance(seq, str | bytes) or not isinstance(seq, Sequence | np.ndarray) or (
            isinstance(seq, np.ndarray) and seq.ndim != 1
        ):
            raise ValueError(f"{name}: must be a 1-D sequence of token ids, got "
                             f"{type(seq).__name__}")
        n = self.target.vocab_size
        for t in seq:
            if (type(t) is not int and (isinstance(t, bool | np.bool_)
                                        or not isinstance(t, numbers.Integral))) or not (
                0 <= t < n
            ):
                raise ValueError(f"{name}: token ids must be integers in [0, {n}), got {t!r}")
        return seq

    def _paths(self, paths):
        if isinstance(paths, str | bytes) or not isinstance(paths, Sequence | np.ndarray) or (
            isinstance(paths, np.ndarray) and paths.ndim == 0
        ):
            raise ValueError(f"paths: must be a sequence of token-id paths, got "
                             f"{type(paths).__name__}")
        return [self._ids(path, "paths") for path in paths]

    def _contexts(self, paths) -> list:
        h = self._committed
        return [np.array(h + list(path), dtype=np.int64) for path in self._paths(paths)]

    def draft_step(self, paths) -> np.ndarray:
        """Draft distributions after every path (one row per path)."""
        if self._q is None:
            raise ValueError("draft: this backend has no draft model (draft=None)")
        return self._q(self._contexts(paths))

    def verify(self, paths) -> Sequence:
        """Target distributions after every path (rows computed on first access)."""
        return _LazyRows(self._p, list(self._committed), self._paths(paths))

    def commit(self, tokens) -> None:
        """Append the tokens emitted by a block to the committed sequence."""
        self._committed.extend(int(t) for t in self._ids(tokens, "tokens"))


# ------------------------------------------------------------------------- the runner


def _gamma_reweight(label, w) -> np.ndarray:
    """Gamma-reweighting of ``w`` under the keyed permutation of ``label`` (Hu et al. 2023,
    arXiv:2310.10669, §4.2; used for speculative sampling by Hu & Huang 2024,
    arXiv:2410.20418).

    The permutation orders the tokens by their first-arrival uniforms
    ``prf_uniform(label, v, 0)`` ascending (a uniformly random order over keys); along it
    token ``v`` covers ``[a_v, b_v)`` of the cumulative distribution and receives
    ``max(2 b_v - 1, 0) - max(2 a_v - 1, 0)``: the first half of the interval [0, 1) is
    dropped and the second half doubled.  Averaging over a permutation and its reverse gives
    ``w`` back, so the reweighting is unbiased over keys; the detector's pivot
    ``prf_uniform(label, w_t, 0)`` is stochastically larger under it (later tokens gain).
    """
    w = np.asarray(w, dtype=np.float64)
    u = prf_uniform_numpy(_U64(label), np.arange(w.size), 0)
    order = np.argsort(u, kind="stable")
    b = np.cumsum(w[order])
    b /= b[-1]
    a = np.concatenate(([0.0], b[:-1]))
    out = np.empty_like(w)
    out[order] = np.maximum(np.maximum(2.0 * b - 1.0, 0.0) - np.maximum(2.0 * a - 1.0, 0.0), 0.0)
    return out


def uses_per_draft_laws(backend, decoder, B, repeats="reuse") -> bool:
    """Whether a run of ``decoder`` with ``B`` drafts on ``backend`` draws each draft from
    its own law (backend protocol: ``per_draft_laws``): a multi-draft decoder with
    ``B > 1``, a backend that offers it, and no skipped repeats of a keyed decoder (those
    draw i.i.d. drafts)."""
    if int(B) <= 1 or not getattr(backend, "per_draft_laws", False):
        return False
    spec = decoder_spec(decoder)
    return spec.multi_draft and not (repeats == "skip" and spec.keyed)


def _specinfer_each(p, qs, cands, u_acc, u_res):
    """SpecInfer's recursive rejection over candidates of different laws (Miao et al. 2024,
    arXiv:2305.09781, §4.2): candidate ``i`` (drawn from ``qs[i]``) is accepted iff
    ``u_acc[i] qs[i](x_i) <= r(x_i)`` for the current residual ``r`` (initially ``p``), and a
    rejection leaves ``r <- (r - qs[i])_+`` normalised; when all are rejected the token is
    drawn from the last residual with ``u_res``.  With every ``qs[i]`` equal it is
    :func:`specbound.sim._kernels.specinfer_verify`.  Returns ``(token, accepted)``."""
    r = np.asarray(p, dtype=np.float64)
    for i in range(cands.shape[0]):
        q = np.asarray(qs[i], dtype=np.float64)
        x = int(cands[i])
        if q[x] > 0.0 and u_acc[i] * q[x] <= r[x]:
            return x, True
        r = _K.residual(r, q)
    return int(_K.categorical(r, u_res)), False


class BlockRun:
    """State of one decoding run: the decision logic (tokens, counters, label caches)."""

    def __init__(self, backend, prompt, args: _compiled.RunArgs, rng, rule=None,
                 rule_params=None):
        """``args``: the validated arguments of the call (:func:`decode_run_args`: the
        decoder's spec looked up once, the sizes, the key, the window and the options);
        ``rng`` the call's generator; ``rule`` (with ``rule_params``) a lossy rule as the
        verification step of the single-draft block."""
        self.backend = backend
        # a lossy rule (``rule``) is the verification step of the single-draft block
        self.rule = rule
        self.rule_spec = _lossy.rule_spec(rule) if rule is not None else None
        self.rule_params = dict(rule_params or {})
        self.verification = self.verify_sd if rule is None else self.verify_rule
        self.spec = spec = args.spec
        decoder, key, window = spec.name, args.key, args.window
        self.name = decoder if rule is None else f"lossy:{rule}"
        self.decoder, self.L, self.B, self.N, self.rng, self.w = (
            decoder, args.L, args.B, args.N, rng, window)
        repeats, reweight = args.repeats, args.reweight
        self.repeats, self.reweight, self.unkeyed = repeats, reweight, args.unkeyed
        self.residual = args.residual
        self.public = args.proposal != "race"  # mpfr on the public process (Alg. 5)
        self.n_points = 0  # points of the public process read (its cost)
        self.mask = repeats == "mask"
        self.kind = spec.block_for(reweight)
        if rule is not None and self.kind != "single":
            raise ValueError(f"rule: a lossy rule is the verification step of the single-draft "
                             f"block, not of {decoder!r}")
        self.block = _block_function(spec, self.kind)  # before anything is drawn
        self.skip = repeats == "skip" and spec.keyed
        # drafts with laws of their own (backend protocol: ``per_draft_laws``)
        self.per_draft = uses_per_draft_laws(backend, decoder, args.B, repeats)
        if self.public and self.per_draft:
            raise ValueError(f"proposal: {args.proposal!r} needs drafts of one law (the "
                             f"backend gives draft laws per draft)")
        self.gamma = reweight == "gamma"
        # repeated windows are tracked for masking and skipping (never with window=None)
        self.track = (self.mask or self.skip) and window is not None
        self.fresh_labels = None  # pfr_nowm with unkeyed="fresh": this block's labels
        self.tokens = [int(t) for t in prompt]
        self.n0 = len(self.tokens)
        self.keyed = spec.keyed
        self.digest = key_digest(key) if key is not None else None  # no re-hash of a digest
        self.key_id = key_id(self.digest) if self.keyed else None
        self.acc_digest = (acceptance_digest(self.digest)
                           if spec.acceptance == "keyed_coin" else None)
        # whole-prefix labels keep the hash state of the committed tokens
        self.prefix = (PrefixLabels(self.digest, self.tokens)
                       if self.keyed and window is None else None)
        self.acc_prefix = (PrefixLabels(self.acc_digest, self.tokens)
                           if self.acc_digest is not None and window is None else None)
        self.run_label = _U64(rng.integers(0, 2**64, dtype=np.uint64))
        self.emitted: list[int] = []
        self.accepted: list[int] = []
        self.nus: list[int] = []
        self.dec_ok: list[bool] = []
        self.dec_pos: list[int] = []
        self.pivots: list[float] = []
        self.skipped: list[bool] = []
        self.dec_skipped: list[bool] = []
        self.drafts: list[np.ndarray] = []
        self.seen: set = set()
        self.n_target_evals = self.n_draft_evals = 0
        self.n_target_contexts = self.n_draft_contexts = 0
        self.h_len = self.n0  # committed tokens when the current block started
        self._vindex: dict = {}
        self._vrows: Sequence = ()
        backend.reset(self.tokens)

    # -- model evaluation (through the backend only) --------------------------------
    def draft_step(self, paths):
        """One batched draft evaluation at one depth (``paths`` relative to the block)."""
        self.n_draft_evals += 1
        self.n_draft_contexts += len(paths)
        return self.backend.draft_step(paths)

    def draft_step_each(self, paths):
        """One draft evaluation per draft at one depth: ``paths[b]`` draft ``b``'s path, the
        result's row ``b`` its own law there (``per_draft``)."""
        self.n_draft_evals += 1
        self.n_draft_contexts += len(paths)
        return self.backend.draft_step_each(paths)

    def verify(self, paths):
        """The block's one batched target evaluation over all its path prefixes."""
        self.n_target_evals += 1
        self.n_target_contexts += len(paths)
        self._vindex = {path: i for i, path in enumerate(paths)}
        self._vrows = self.backend.verify(paths)

    def p(self, ctx):
        """The verified target distribution of context ``ctx`` (committed + block path)."""
        tail = ctx[self.h_len:]
        path = tuple(tail.tolist() if isinstance(tail, np.ndarray) else tail)
        try:
            return self._vrows[self._vindex[path]]
        except KeyError:  # pragma: no cover - a decoder reading an unverified context
            raise RuntimeError(f"context path {path} was not verified in this block") from None

    # -- labels ---------------------------------------------------------------------
    @property
    def generated(self) -> int:
        return len(self.tokens) - self.n0

    def win(self, ctx):
        """The watermark window of ``ctx`` as a tuple (repeat masking)."""
        if self.w is None:
            return None
        return tuple(ctx[max(len(ctx) - self.w, 0):]) if self.w > 0 else ()

    def position_label(self, t):
        """Unkeyed clocks of absolute position ``t`` (pfr_nowm, masked repeats)."""
        return _U64(_K.trial_label(self.run_label, t))

    def is_repeat(self, ctx, path_windows=()):
        """Whether the window of ``ctx`` occurred at an earlier generated position (or
        earlier on the same draft path): masked or skipped under ``repeats``."""
        if not self.track:
            return False
        w = self.win(ctx)
        return w in self.seen or w in path_windows

    def skipped_ctx(self, ctx, path_windows=()):
        """``repeats="skip"``: the watermark is skipped in ``ctx`` (vanilla sampling)."""
        return self.skip and self.is_repeat(ctx, path_windows)

    def _windowed(self, ctx):
        arr = np.asarray(ctx, dtype=np.int64)
        return arr[max(arr.size - self.w, 0):] if self.w > 0 else arr[:0]

    def keyed_label(self, ctx):
        if self.prefix is not None:  # ctx = committed tokens + a path of this block
            return self.prefix.label(ctx[self.h_len:])
        return digest_label(self.digest, self._windowed(ctx))

    def acceptance_label(self, ctx):
        """mse_pseudo: the label of the keyed acceptance coin (second key)."""
        if self.acc_prefix is not None:
            return self.acc_prefix.label(ctx[self.h_len:])
        return digest_label(self.acc_digest, self._windowed(ctx))

    def clock_label(self, ctx, path_windows=()):
        """Label whose clocks drive draft and target in context ``ctx``."""
        if not self.keyed:  # pfr_nowm: unkeyed clocks
            if self.fresh_labels is not None:
                return self.fresh_labels[len(ctx) - self.h_len]
            return self.position_label(len(ctx))
        if self.mask and self.is_repeat(ctx, path_windows):
            return self.position_label(len(ctx))
        return self.keyed_label(ctx)

    def gamma_weights(self, lab, w):
        """The gamma-reweighted distribution of ``w`` under the clocks of ``lab``."""
        return _gamma_reweight(lab, w)

    # -- emission -------------------------------------------------------------------
    def emit(self, y, ctx, skipped=False, pivot=None):
        y = int(y)
        if pivot is not None:  # the public process's pivot of the winner (proposal=)
            self.pivots.append(float(pivot))
        elif self.keyed:
            self.pivots.append(float(prf_uniform(self.keyed_label(ctx), y, 0)))
        else:
            self.pivots.append(float("nan"))
        if self.track:
            self.seen.add(self.win(ctx))
        self.skipped.append(bool(skipped))
        self.tokens.append(y)

    def decide(self, nu, ok, skipped=False):
        """Record a verification decision (after :meth:`emit` of its token)."""
        self.nus.append(int(nu))
        self.dec_ok.append(bool(ok))
        self.dec_pos.append(self.generated - 1)
        self.dec_skipped.append(bool(skipped))

    def ctx_array(self, extra=()):
        return np.array(self.tokens + list(extra), dtype=np.int64)

    # -- decoders -------------------------------------------------------------------
    def step_ar(self, ell=1):
        """ar / basic_uwm: one target token per step (``ell`` is not used)."""
        self.verify([()])
        p = self.p(self.tokens)
        skipped = False
        if not self.keyed:
            y = _K.categorical(p, self.rng.random())
        elif self.skip or self.gamma:
            # one unkeyed uniform per token: the skipped repeat's draw or the gamma draw
            u = self.rng.random()
            skipped = self.skipped_ctx(self.tokens)
            if skipped:
                y = _K.categorical(p, u)
            else:
                y = _K.categorical(self.gamma_weights(self.clock_label(self.tokens), p), u) \
                    if self.gamma else _K.race_argmin(self.clock_label(self.tokens), p, 0)
        else:
            y = _K.race_argmin(self.clock_label(self.tokens), p, 0)
        self.emit(y, self.tokens, skipped)
        return 1

    def _path_windows(self, h, path):
        if not self.track:
            return ()
        return {self.win(h + list(path[:i])) for i in range(len(path))}

    def block_tree(self, ell):
        """pfr / pfr_nowm / mws (B = 1) and mpfr: Alg. 10 with lazy target evaluation.

        ``repeats="skip"``: a skipped context with multiplicity ``k`` drafts ``k`` i.i.d.
        tokens from ``q`` and verifies them by vanilla speculative sampling (``k = 1``) or
        SpecInfer's recursive rejection (``k > 1``, Miao et al. 2024), with the unkeyed
        uniforms ``us[depth, slot:slot + k]`` of its draft slots (``us`` has shape
        ``(ell + 1, B, 3)``; the slots of a depth are numbered in level order).
        """
        h = list(self.tokens)
        labels: dict = {}
        skips: dict = {}
        qs: dict = {}
        cands: dict = {}
        slots: dict = {}
        us = self.rng.random((ell + 1, self.B, 3)) if self.skip else None
        if not self.keyed and self.unkeyed == "fresh":
            self.fresh_labels = self.rng.integers(0, 2**64, size=ell + 1, dtype=np.uint64)

        def lab(path):
            if path not in labels:
                labels[path] = self.clock_label(h + list(path), self._path_windows(h, path))
            return labels[path]

        def skipped(path):
            if path not in skips:
                skips[path] = self.skipped_ctx(h + list(path), self._path_windows(h, path))
            return skips[path]

        mult = {(): self.B}
        children: dict = {}
        level = [()]
        buf = np.empty(self.B, dtype=np.int64)
        if self.per_draft:  # drafts with laws of their own: the tree of their paths
            level = self._tree_each(ell, lab, mult, children)
        for depth in range(ell if not self.per_draft else 0):
            nxt: dict = {}
            slot = 0
            for path, qv in zip(level, self.draft_step(level), strict=True):
                k = mult[path]
                if skipped(path):  # k i.i.d. drafts from q
                    qs[path] = qv
                    slots[path] = slot
                    for j in range(k):
                        buf[j] = _K.categorical(qv, us[depth, slot + j, 0])
                    cands[path] = buf[:k].copy()
                elif self.public:
                    self.public_topk(lab(path), qv, k, buf)
                else:
                    _K.mpfr_topk(lab(path), qv, k, buf)
                slot += k
                kids = children.setdefault(path, set())
                for t in buf[:k]:
                    child = path + (int(t),)
                    nxt[child] = nxt.get(child, 0) + 1
                    kids.add(int(t))
            mult.update(nxt)
            level = list(nxt)
        leaves = sorted(p for p in level for _ in range(mult[p]))
        self.drafts.append(np.array(leaves, dtype=np.int64).reshape(self.B, ell))
        self.verify(list(mult))
        path: tuple = ()
        emitted = 0
        for s in range(ell):
            ctx = h + list(path)
            pv = self.p(np.array(ctx, dtype=np.int64))
            skip = skipped(path)
            if skip and mult[path] == 1:  # vanilla speculative sampling, unkeyed coins
                (x,) = children[path]
                j = slots[path]
                ok = us[s, j, 1] * qs[path][x] <= pv[x]
                y = x if ok else int(_K.residual_sample(pv, qs[path], us[s, j, 2]))
            elif skip:  # recursive rejection over the k i.i.d. drafts
                j = slots[path]
                y, ok = _K.specinfer_verify(pv, qs[path], cands[path],
                                            us[s, j:j + mult[path], 1], us[s, j, 2])
                y, ok = int(y), bool(ok)
            else:
                y, piv = (self.public_winner(lab(path), pv) if self.public
                          else (int(_K.race_argmin(lab(path), pv, 0)), None))
                ok = y in children.get(path, ())
            self.emit(y, ctx, skip, None if skip else piv)
            emitted += 1
            self.decide(mult[path], ok, skip)
            if not ok:
                return emitted
            path = path + (y,)
        if self.generated < self.N:
            ctx = h + list(path)
            pv = self.p(np.array(ctx, dtype=np.int64))
            skip = skipped(path)
            piv = None
            if skip:
                y = int(_K.categorical(pv, us[ell, 0, 2]))
            elif self.public:
                y, piv = self.public_winner(lab(path), pv)
            else:
                y = int(_K.race_argmin(lab(path), pv, 0))
            self.emit(y, ctx, skip, piv)
            emitted += 1
        return emitted

    def _public_scan(self, label, w, k, out):
        """Alg. 5 on the public process of ``label`` (marks uniform on the vocabulary) for
        the law ``w``: the ``k`` smallest scores into ``out[:k]``; returns the scores."""
        mult, q0cdf, wb = public_plan(np.asarray(w, dtype=np.float64), self._uniform(len(w)))
        n, heap = public_scan(label, mult, q0cdf, k, wb, out)
        self.n_points += n
        return heap[0]

    def _uniform(self, n):
        q0 = getattr(self, "_q0", None)
        if q0 is None or q0.shape[0] != n:
            q0 = self._q0 = np.ones(n)
        return q0

    def public_topk(self, label, q, k, out):
        """``proposal="uniform"``: the ``k`` drafts of a context, the marks of the ``k``
        smallest scores ``T_i Q0(Z_i)/q(Z_i)`` of its public process (Alg. 5)."""
        self._public_scan(label, q, k, out)

    def public_winner(self, label, p):
        """``proposal="uniform"``: the target winner of a context on its public process and
        its pivot ``exp(-p(y) s)`` (``s`` the winning score, so ``p(y) s = Q0(y) S_y``)."""
        out = np.empty(1, np.int64)
        s = self._public_scan(label, p, 1, out)[0]
        y = int(out[0])
        return y, float(np.exp(-float(p[y]) * s))

    def _tree_each(self, ell, lab, mult, children):
        """The context tree of ``B`` drafts with laws of their own (``per_draft``): draft
        ``b`` proposes ``argmin_v G_{v,j}/Q[b]_v`` on its context's clocks (``j`` its rank
        among the drafts at that context); fills ``mult`` and ``children`` and returns the
        paths of depth ``ell``."""
        paths = [()] * self.B
        level = [()]
        for _ in range(ell):
            rank: dict = {}
            nxt: dict = {}
            for b, qv in enumerate(self.draft_step_each(paths)):
                path = paths[b]
                j = rank.get(path, 0)
                rank[path] = j + 1
                t = int(_K.race_argmin(lab(path), qv, j))
                children.setdefault(path, set()).add(t)
                paths[b] = path + (t,)
                nxt[paths[b]] = nxt.get(paths[b], 0) + 1
            mult.update(nxt)
            level = list(nxt)
        return level

    def block_single(self, ell):
        """vsps / mse / mse_pseudo, and mws with the gamma reweight: one draft sequence,
        Alg. 1 verification.

        The keyed drafts are ``R(q)`` (the race winner for ``"delta"``, a draw from the
        gamma-reweighted ``q`` with ``us[s, 0]`` for ``"gamma"``).  ``mws`` verifies between
        ``R(p)`` and ``R(q)`` with residual ``(R(p) - R(q))_+``; ``mse`` / ``mse_pseudo``
        between ``p`` and ``q``.  A skipped repeat is vanilla speculative sampling.
        """
        h = list(self.tokens)
        us = self.rng.random((ell + 1, 3))
        xs: list[int] = []
        qs = []
        path_windows: set = set()
        labs = []
        skips = []
        for s in range(ell):
            ctx = h + xs
            qv = self.draft_step([tuple(xs)])[0]
            skip = self.skipped_ctx(ctx, path_windows)
            skips.append(skip)
            if not self.keyed or skip:
                x = int(_K.categorical(qv, us[s, 0]))
                labs.append(None)
            else:
                lab = self.clock_label(ctx, path_windows)
                labs.append(lab)
                if self.gamma:
                    x = int(_K.categorical(self.gamma_weights(lab, qv), us[s, 0]))
                else:
                    x = int(_K.race_argmin(lab, qv, 0))
            if self.track:
                path_windows.add(self.win(ctx))
            xs.append(x)
            qs.append(qv)
        self.drafts.append(np.array(xs, dtype=np.int64).reshape(1, ell))
        self.verify([tuple(xs[:i]) for i in range(ell + 1)])
        emitted = 0
        for s in range(ell):
            ctx = h + xs[:s]
            pv = self.p(np.array(ctx, dtype=np.int64))
            skip = skips[s]
            y, ok = self.verification(s, ctx, xs[s], pv, qs[s], us, skip, labs[s])
            emitted += 1
            self.emit(y, ctx, skip)
            self.decide(1, ok, skip)
            if not ok:
                return emitted
        if self.generated < self.N:
            ctx = h + xs
            pv = self.p(np.array(ctx, dtype=np.int64))
            skip = self.skipped_ctx(ctx, path_windows)
            if not self.keyed or skip:
                y = _K.categorical(pv, us[ell, 2])
            elif self.gamma:
                y = _K.categorical(self.gamma_weights(self.clock_label(ctx, path_windows), pv),
                                   us[ell, 2])
            else:
                y = _K.race_argmin(self.clock_label(ctx, path_windows), pv, 0)
            self.emit(y, ctx, skip)
            emitted += 1
        return emitted

    # -- the verification step of the single-draft block (pluggable) ------------------
    def verify_sd(self, s, ctx, x, pv, qv, us, skip, lab):
        """Speculative sampling's step (Leviathan et al. 2023, Alg. 1): accept ``x`` iff
        ``U q(x) <= p(x)``, else a token from the residual ``(p - q)_+``.  The decoders' flags
        vary it: ``acceptance="reweighted"`` (mws, gamma) tests between ``R(p)`` and ``R(q)``,
        ``"keyed_coin"`` (mse_pseudo) takes the second key's coin and, with
        ``residual="keyed"``, races the residual on its clocks.  It is the ``lossless`` rule.
        Returns ``(token, accepted)``."""
        if self.spec.acceptance == "reweighted" and not skip:  # between R(p) and R(q)
            pv = self.gamma_weights(lab, pv)
            qv = self.gamma_weights(lab, qv)
        if self.spec.acceptance == "keyed_coin" and not skip:
            coin = prf_uniform(self.acceptance_label(ctx), 0, 0)
        else:
            coin = us[s, 1]
        if coin * qv[x] <= pv[x]:
            return x, True
        if self.residual == "keyed" and not skip:  # the second key's race on (p - q)_+
            w = np.maximum(pv - qv, 0.0)
            y = _K.race_argmin(self.acceptance_label(ctx), w if w.sum() > 0 else pv, 1)
        else:
            y = _K.residual_sample(pv, qv, us[s, 2])
        return y, False

    def verify_rule(self, s, ctx, x, pv, qv, us, skip, lab):
        """A lossy rule's step (Zhou et al. 2026, arXiv:2607.26627, §3.1-3.2): the rule's
        mechanism in this context (:data:`specbound.sim.lossy.RULE_SPECS`, parameters
        evaluated here when callable): accept iff ``U < h(x)``, else the rule's correction
        (a draw from its residual with ``us[s, 2]``, or the redraw loop of the
        ``"renormalize"`` readings on the generator's next uniforms).  A rule whose spec is
        speculative sampling's step (``lossless``) runs :meth:`verify_sd`."""
        if self.rule_spec.sd_step:
            return self.verify_sd(s, ctx, x, pv, qv, us, skip, lab)
        p = np.asarray(pv, dtype=np.float64)
        per = _lossy._prepare(self.rule, p[None], qv[None],
                              _lossy.context_params(self.rule_params, p, qv))[0]
        mech = self.rule_spec.mechanism(p, qv, per)
        if us[s, 1] < mech.h[x]:
            return x, True
        if mech.redraw and float(np.dot(mech.q, mech.h)) > 0.0:
            while True:
                y = int(_K.categorical(mech.q, self.rng.random()))
                if self.rng.random() < mech.h[y]:
                    return y, False
        return int(_K.categorical(mech.residual, us[s, 2])), False

    def _draft_paths(self, ell, draw):
        """B draft sequences, each on its own path; ``draw(s, b, q)`` -> token."""
        h = list(self.tokens)
        cache: dict = {}
        paths = [[] for _ in range(self.B)]
        for s in range(ell):
            if self.per_draft:  # each draft's own law on its own path: cache[(s, b)]
                rows = self.draft_step_each([tuple(pb) for pb in paths])
                for b in range(self.B):
                    cache[s, b] = rows[b]
                    paths[b].append(int(draw(s, b, rows[b])))
                continue
            # one batched draft pass over the distinct paths of depth s (first-seen order)
            todo = list(dict.fromkeys(tuple(pb) for pb in paths))
            cache.update(zip(todo, self.draft_step(todo), strict=True))
            for b in range(self.B):
                paths[b].append(int(draw(s, b, cache[tuple(paths[b])])))
        self.drafts.append(np.array(paths, dtype=np.int64).reshape(self.B, ell))
        self.verify(list(dict.fromkeys(tuple(pb[:i]) for i in range(ell + 1) for pb in paths)))
        return h, paths, cache

    def block_gls(self, ell):
        """invariant: list coupling (GLS) with the active-draft set."""
        labels = self.rng.integers(0, 2**64, size=ell + 1, dtype=np.uint64)
        h, paths, _ = self._draft_paths(
            ell, lambda s, b, qv: _K.race_argmin(labels[s], qv, b))
        active = np.arange(self.B, dtype=np.int64)
        emitted = 0
        for s in range(ell):
            ctx = h + paths[active[0]][:s]
            y = int(_K.gls_argmin(labels[s], self.p(np.array(ctx, dtype=np.int64)), active))
            self.emit(y, ctx)
            emitted += 1
            nu = active.size
            active = np.array([b for b in active if paths[b][s] == y], dtype=np.int64)
            self.decide(nu, active.size > 0)
            if active.size == 0:
                return emitted
        if self.generated < self.N:
            ctx = h + paths[active[0]]
            y = _K.gls_argmin(labels[ell], self.p(np.array(ctx, dtype=np.int64)), active)
            self.emit(y, ctx)
            emitted += 1
        return emitted

    def block_specinfer(self, ell):
        """specinfer: recursive rejection sampling over the active drafts."""
        us = self.rng.random((ell + 1, self.B, 3))
        h, paths, cache = self._draft_paths(
            ell, lambda s, b, qv: _K.categorical(qv, us[s, b, 0]))
        active = np.arange(self.B, dtype=np.int64)
        emitted = 0
        for s in range(ell):
            prefix = paths[active[0]][:s]
            ctx = h + prefix
            pv = self.p(np.array(ctx, dtype=np.int64))
            cands = np.array([paths[b][s] for b in active], dtype=np.int64)
            if self.per_draft:
                y, ok = _specinfer_each(pv, [cache[s, b] for b in active], cands,
                                        us[s, active, 1], us[s, 0, 2])
            else:
                y, ok = _K.specinfer_verify(pv, cache[tuple(prefix)], cands,
                                             us[s, active, 1], us[s, 0, 2])
            self.emit(y, ctx)
            emitted += 1
            self.decide(active.size, ok)
            if not ok:
                return emitted
            active = np.array([b for b in active if paths[b][s] == y], dtype=np.int64)
        if self.generated < self.N:
            ctx = h + paths[active[0]]
            y = _K.categorical(self.p(np.array(ctx, dtype=np.int64)), us[ell, 0, 2])
            self.emit(y, ctx)
            emitted += 1
        return emitted

    def _whole_block(self, ell, tau_kernel):
        """One draft sequence verified as a whole, the Python twin of
        ``_compiled._whole_block``: drafts ``x_s ~ q`` with ``us[s, 0]`` (the drafts of
        ``vsps``), one verification over every prefix, the kept prefix ``x_1..x_tau`` of
        ``tau_kernel`` (which writes the residual weights ``w_0..w_ell``), then one token:
        the residual ``(w_tau P_tau - Q_tau)_+`` drawn with ``us[tau, 2]``
        (:func:`~specbound.sim._compiled_blockver.blockver_correction`) when ``tau < ell``,
        else the bonus from ``P_ell`` with ``us[ell, 2]``.  Decisions: accepted at the kept
        positions, rejected at the correction's."""
        h = list(self.tokens)
        us = self.rng.random((ell + 1, 3))
        xs: list[int] = []
        qs = []
        for s in range(ell):
            qv = np.asarray(self.draft_step([tuple(xs)])[0], dtype=np.float64)
            xs.append(int(_K.categorical(qv, us[s, 0])))
            qs.append(qv)
        self.drafts.append(np.array(xs, dtype=np.int64).reshape(1, ell))
        self.verify([tuple(xs[:i]) for i in range(ell + 1)])
        rows = [np.asarray(self.p(np.array(h + xs[:i], dtype=np.int64)), dtype=np.float64)
                for i in range(ell)]
        n = rows[0].shape[0] if rows else 1
        P = np.array(rows, dtype=np.float64).reshape(ell, n)
        Q = np.array(qs, dtype=np.float64).reshape(ell, n)
        ws = np.empty(ell + 1)
        tau = int(tau_kernel(P, Q, np.array(xs, dtype=np.int64), ell, us.ravel(), ws))
        for s in range(tau):
            self.emit(xs[s], h + xs[:s])
            self.decide(1, True)
        if tau < ell:
            self.emit(_BV.blockver_correction(ws[tau], P[tau], Q[tau], us[tau, 2]),
                      h + xs[:tau])
            self.decide(1, False)
            return tau + 1
        if self.generated < self.N:
            ctx = h + xs
            self.emit(_K.categorical(np.asarray(self.p(np.array(ctx, dtype=np.int64)),
                                                dtype=np.float64), us[ell, 2]), ctx)
            return tau + 1
        return tau

    def block_blockver(self, ell):
        """blockver: block verification of one draft sequence (Sun et al. 2024,
        arXiv:2403.10444, Alg. 2; :mod:`specbound.sim._compiled_blockver`): the kept prefix
        ``tau = max{i : us[i-1, 1] <= h_i}``, the residual weights ``p_i``."""
        return self._whole_block(ell, _BV.blockver_tau)

    def block_hsd(self, ell):
        """hsd: lossless hierarchical speculative decoding of one draft sequence (Zhou et al.,
        ICLR 2026, arXiv:2601.05724; :mod:`specbound.sim._compiled_hsd`): the kept prefix of
        :func:`~specbound.sim._compiled_hsd.hsd_tau` (the full block against ``us[ell - 1,
        1]``, the step-back coin of level ``k`` ``us[k - 1, 1]``), the capped ratios
        ``c_i``."""
        return self._whole_block(ell, _HS.hsd_tau)

    def run(self, max_blocks=None):
        block = self.block
        blocks = 0
        # a backend may end a run early (a real model's end-of-sequence token) by setting
        # ``finished``; the synthetic backend never does
        while (self.generated < self.N and (max_blocks is None or blocks < max_blocks)
               and not getattr(self.backend, "finished", False)):
            ell = min(self.L, self.N - self.generated)
            if self.kind != "token" and hasattr(self.backend, "block_length"):
                # a backend whose draft sets the block length (a prompt lookup); 0: no draft,
                # the block is the decoder's one-token step from the target's law
                ell = min(max(int(self.backend.block_length(ell, self.B)), 0), ell)
            self.h_len = len(self.tokens)
            n_dec = len(self.dec_ok)
            k = block(self, ell)
            self.emitted.append(k)
            self.accepted.append(sum(self.dec_ok[n_dec:]))
            new = self.tokens[self.h_len:]
            self.backend.commit(new)
            if self.prefix is not None:
                self.prefix.extend(new)
            if self.acc_prefix is not None:
                self.acc_prefix.extend(new)
            blocks += 1
        return DecodeResult(
            tokens=np.array(self.tokens, dtype=np.int64),
            prompt_length=self.n0,
            emitted_per_block=np.array(self.emitted, dtype=np.int64),
            accepted_per_block=np.array(self.accepted, dtype=np.int64),
            nu=np.array(self.nus, dtype=np.int64),
            decision_accepted=np.array(self.dec_ok, dtype=bool),
            decision_position=np.array(self.dec_pos, dtype=np.int64),
            n_target_evals=self.n_target_evals,
            n_draft_evals=self.n_draft_evals,
            n_target_contexts=self.n_target_contexts,
            n_draft_contexts=self.n_draft_contexts,
            pivots=np.array(self.pivots, dtype=np.float64),
            drafts=tuple(self.drafts),
            decoder=self.name,
            L=self.L,
            B=self.B,
            watermark=WatermarkConfig(self.key_id, self.w, self.mask, self.repeats,
                                      self.reweight, self.residual),
            skipped=np.array(self.skipped, dtype=bool),
            decision_skipped=np.array(self.dec_skipped, dtype=bool),
            unkeyed=self.unkeyed,
        )


#: the block function of every block kind of :data:`specbound.sim.decoders.BLOCK_KINDS`
#: (the compiled loop has the same kinds: :func:`specbound.sim._compiled.decode_one`)
_BLOCKS = {
    "token": BlockRun.step_ar,
    "tree": BlockRun.block_tree,
    "single": BlockRun.block_single,
    "gls": BlockRun.block_gls,
    "specinfer": BlockRun.block_specinfer,
    "blockver": BlockRun.block_blockver,
    "hsd": BlockRun.block_hsd,
}


def _block_function(spec: DecoderSpec, kind: str):
    """The block function of ``kind`` (``ValueError`` naming the decoder when none)."""
    fn = _BLOCKS.get(kind)
    if fn is None:
        raise ValueError(f"decoder: {spec.name!r} has block kind {kind!r}, which has no block "
                         f"function; known kinds: {sorted(_BLOCKS)}")
    return fn


def _check_registry():
    """Every registered decoder has a block function (at import: a spec whose kind has none
    fails here, not at its first run)."""
    for spec in DECODER_SPECS.values():
        for kind in {spec.block, spec.block_for("gamma")}:
            if kind not in _BLOCKS:
                raise ImportError(f"decoder {spec.name!r}: block kind {kind!r} has no block "
                                  f"function in specbound.sim.decode")


_check_registry()


def validate_decode_options(decoder, reweight, unkeyed, residual):
    """The checked ``reweight``, ``unkeyed`` and ``residual`` options of ``decoder`` (a
    name or its :class:`~specbound.sim.decoders.DecoderSpec`: the options the spec takes)."""
    spec = decoder if isinstance(decoder, DecoderSpec) else decoder_spec(decoder)
    decoder = spec.name
    takers = {o: sorted(n for n, s in DECODER_SPECS.items() if o in s.options)
              for o in _OPTION_DEFAULTS}
    out = {}
    for name, value, choices in (("reweight", reweight, REWEIGHTS),
                                 ("residual", residual, RESIDUALS),
                                 ("unkeyed", unkeyed, UNKEYED)):
        value = as_choice(value, name, choices)
        if value != _OPTION_DEFAULTS[name] and name not in spec.options:
            raise ValueError(f"{name}: {value!r} applies to {takers[name]} only, not to "
                             f"{decoder!r}")
        out[name] = value
    return out["reweight"], out["unkeyed"], out["residual"]


def validate_proposal(decoder, proposal):
    """The checked ``proposal`` option of ``decoder`` (a name or its spec): one of
    :data:`PROPOSALS`; a value other than ``"race"`` only for the decoders whose spec takes
    the option (``ValueError`` naming ``proposal``)."""
    spec = decoder if isinstance(decoder, DecoderSpec) else decoder_spec(decoder)
    value = as_choice(proposal, "proposal", PROPOSALS)
    if value != _OPTION_DEFAULTS["proposal"] and "proposal" not in spec.options:
        takers = sorted(n for n, s in DECODER_SPECS.items() if "proposal" in s.options)
        raise ValueError(f"proposal: {value!r} applies to {takers} only, not to {spec.name!r}")
    return value


# ------------------------------------------------------------------------- public API


def speculative_decode(target, draft, prompt, decoder, *, L=4, B=1, key=None,
                       max_new_tokens=64, seed=0, window=None, repeats="reuse",
                       reweight="delta", unkeyed="position", residual="plain",
                       max_blocks=None, backend=None, proposal="race") -> DecodeResult:
    """Generate ``max_new_tokens`` tokens with a (speculative) decoder.

    Parameters
    ----------
    target, draft : models
        Target and draft models with equal vocabulary sizes: any objects of the model
        protocol of :mod:`specbound.sim.models` (``vocab_size`` and ``next_distribution``),
        e.g. :class:`~specbound.sim.models.SyntheticLM`,
        :class:`~specbound.sim.models.MarkovLM`, :class:`~specbound.sim.models.CachedLM`.
        ``draft`` may be None for ``"ar"`` and ``"basic_uwm"``.
    prompt : sequence of int
        Prompt token ids in ``[0, vocab_size)`` (may be empty).
    decoder : str
        One of :data:`DECODERS` (see the module docstring for each algorithm).
    L : int >= 1
        Lookahead (draft length per block).
    B : int, 1 <= B <= 1024
        Number of drafts; B > 1 only for ``"mpfr"``, ``"invariant"``, ``"specinfer"``.
    key : int, str or bytes
        Secret key; required by the keyed decoders (:data:`KEYED_DECODERS`), ignored by the
        others.
    max_new_tokens : int, 0 <= max_new_tokens <= 100,000
        Number of tokens to generate (at most :data:`MAX_NEW_TOKENS`).
    seed : int, SeedSequence or Generator
        Source of the unkeyed randomness (SPEC 7); results are bit-for-bit reproducible.
    window : int >= 0 or None
        The watermark's context window: keyed labels hash the last ``window`` tokens (None:
        the whole prefix).  Recorded in ``result.watermark``, from which
        :func:`specbound.sim.detect.detect` takes it.  (A model's own window is its
        ``context_length``.)
    repeats : {"reuse", "mask", "skip"}
        Keyed decoders at positions whose context window already occurred at an earlier
        generated position (module docstring, "Repeated contexts"): ``"reuse"`` the keyed
        clocks (default), ``"mask"`` them with unkeyed position clocks, or ``"skip"`` the
        watermark there (Hu & Huang 2024's setting: vanilla speculative sampling with unkeyed
        coins, acceptance ``1 - TV``; for an ``mpfr`` context of multiplicity ``k > 1``,
        ``k`` i.i.d. drafts from ``q`` and SpecInfer's recursive rejection; the detector does
        not score them).  Ignored by the unkeyed decoders.
    reweight : {"delta", "gamma"}
        The reweighting of ``basic_uwm``, ``mws``, ``mse`` and ``mse_pseudo``: the
        DeltaGumbel exponential race (default) or the gamma-reweighting of Hu et al. 2023
        (module docstring); the other decoders accept only ``"delta"``.
    unkeyed : {"position", "fresh"}
        ``pfr_nowm``'s unkeyed clocks: seeded position clocks (default; the same for every
        drafter given the seed) or labels drawn from the generator block by block, so that
        the randomness an emitted token sees depends on the blocks before it, as with a
        fresh random stream per run (the multi-draft paper's setting).  Other decoders
        accept only ``"position"``.
    residual : {"plain", "keyed"}
        ``mse_pseudo``'s correction after a rejection: a draw from ``(p - q)_+`` with the
        block's unkeyed uniform (default), or He et al. 2026's dual-key design, the
        exponential race on ``(p - q)_+`` with the clocks ``prf_uniform(label2, v, 1)`` of the
        second key (the acceptance coin is ``prf_uniform(label2, 0, 0)``), so that every
        token is a deterministic function of the keys; :func:`specbound.sim.detect.detect`
        with ``coin_threshold`` scores such positions by that second pivot.  Other decoders
        accept only ``"plain"``.
    max_blocks : int >= 1 or None
        Stop after this many blocks (None: when ``max_new_tokens`` are generated).  The
        drafter-invariance checks run single blocks this way.
    proposal : {"race", "uniform"}
        ``mpfr``'s Poisson process: the per-symbol exponential race (default, Alg. 6) or
        Alg. 5 of Liu, Wan, Gao & Gündüz 2026 (arXiv:2609.21858, App. A.3) on a *public*
        process whose marks are uniform on the vocabulary, scanned until its stopping rule
        fires (about ``k V max q`` points for ``k`` drafts, ``V max p`` for a target token).
        Same joint law of drafts, emitted tokens and decisions (Thm. A.1), other tokens for a
        given key; it runs in the Python block loop only (the compiled loop declines it,
        :func:`speculative_decode_batch` decodes its prompts one by one), and its recorded
        pivots are ``exp(-E_y)``, ``E_y = Q0(y) S_y`` the winner's first arrival on the
        public process, which :func:`specbound.sim.detect.detect` (race pivots) does not
        score.  Other decoders accept only ``"race"``.
    backend : DecodeBackend or None
        The model evaluation (module docstring, "Backend protocol"); None builds a
        :class:`SyntheticBackend` on ``target`` and ``draft``.  A custom backend must return
        the distributions of the same models (the decision logic is shared, so the same
        distributions give the same tokens).

    Returns
    -------
    DecodeResult

    Raises
    ------
    ValueError
        An argument out of range, named in the message (unknown decoder, ``B > 1`` for a
        single-draft decoder, missing key, vocabulary mismatch, prompt ids out of range,
        sizes above the documented limits, ...).

    Notes
    -----
    Every decoder is exact (lossless): the emitted sequence follows the target's
    autoregressive law, for the keyed decoders when the key is random (each distinct context
    gets independent clocks).  With a fixed key and repeated context windows the keyed
    decoders reuse clocks (the known repeated-context bias of keyed watermarks); use
    ``repeats="mask"`` or ``"skip"``, or ``window=None``, to avoid it.  ``pfr``, ``mpfr``
    and ``mws`` (delta reweight) emit exactly the ``basic_uwm`` sequence for every drafter
    (Liu, Wan, Gao & Gündüz 2026, arXiv:2609.21858, Prop. C.3).
    """
    target, draft, args = decode_run_args(
        target, draft, decoder, L=L, B=B, key=key, max_new_tokens=max_new_tokens,
        window=window, repeats=repeats, reweight=reweight, unkeyed=unkeyed, residual=residual,
        max_blocks=max_blocks, proposal=proposal)
    prompt = validate_prompt(prompt, target.vocab_size)
    if backend is None:  # the package's models: the call's work and memory bounded up front
        check_decode_cost(target, args, [prompt])
    rng = as_rng(seed)
    if backend is None:  # the compiled loop (same results) where it covers the run; else BlockRun
        res = _compiled.decode_single(target, draft, prompt, rng, args)
        if res is not None:
            return res
    if backend is None:
        backend = SyntheticBackend(target, draft)
    elif not isinstance(backend, DecodeBackend):
        raise ValueError(
            f"backend: must implement reset, draft_step, verify and commit (DecodeBackend), "
            f"got {type(backend).__name__}"
        )
    return BlockRun(backend, prompt, args, rng).run(args.max_blocks)


def _model_window(target, draft):
    """Common window of two models for memoising (None if either depends on all tokens)."""
    ws = [getattr(m, "context_length", None) for m in (target, draft)]
    if any(not isinstance(x, int | np.integer) or isinstance(x, bool) for x in ws):
        return None
    return int(max(ws))


def expected_block_tokens(target, draft, prompt, decoder, *, L=4, B=1) -> float:
    """Exact expected number of tokens emitted by one block (theory for the AATPS).

    The model-object form of :func:`specbound.theory.blocks.expected_block_tokens`: the
    per-context coupling is ``DECODER_SCHEME[decoder]`` (``min(p, q)`` for ``vsps``,
    ``mse``, ``mse_pseudo``; the exponential race for ``pfr``, ``pfr_nowm``, ``mws``; the
    joint law of the winner and its multiplicity, :func:`specbound.theory.blocks.
    mpfr_multiplicity_law`, for ``mpfr``), and the enumeration is memoised by the models'
    window (``context_length``, 1 for a :class:`~specbound.sim.models.MarkovLM`).
    ``blockver`` (block verification, Sun et al. 2024, arXiv:2403.10444, Alg. 2) has no
    per-context coupling: its value is :func:`specbound.theory.blockver_block_tokens` over
    the same models; that of ``hsd`` (lossless hierarchical speculative decoding, Zhou et
    al., ICLR 2026, arXiv:2601.05724) is :func:`specbound.theory.hsd_block_tokens`.

    Assumes independent clocks in distinct contexts (a random key and distinct context labels,
    e.g. ``window=None``) and a full block (``max_new_tokens >= L + 1``).  Meant for small
    vocabularies (at most 1e6 enumerated context states).

    Raises
    ------
    ValueError
        ``decoder`` without an exact block law (``ar``, ``basic_uwm``, ``invariant``,
        ``specinfer``), ``B > 1`` for a single-draft decoder, invalid models or prompt, or an
        enumeration that is too large (named ``L``).
    """
    allowed = tuple(d for d in DECODERS
                    if DECODER_SCHEME.get(d) in ("sd", "exp_race", "mpfr")
                    or d in ("blockver", "hsd"))
    dec = as_choice(decoder, "decoder", allowed)
    target, draft, prompt, dec, L, B, _, _, _ = validate_decode_args(
        target, draft, prompt, dec, L, B, 0 if dec in KEYED_DECODERS else None, 0, None)
    markov = isinstance(target, MarkovLM) and isinstance(draft, MarkovLM)
    window = 1 if markov else _model_window(target, draft)

    def p_fn(ctx):
        return next_distributions(target, [ctx], validate=False)[0]

    def q_fn(ctx):
        return next_distributions(draft, [ctx], validate=False)[0]

    if dec == "blockver":
        return float(_blockver_block_tokens(p_fn, q_fn, prompt, L=L, context_length=window))
    if dec == "hsd":
        return float(_hsd_block_tokens(p_fn, q_fn, prompt, L=L, context_length=window))
    return float(_theory_block_tokens(p_fn, q_fn, prompt, DECODER_SCHEME[dec], L=L, B=B,
                                      context_length=window))


def _as_blocks(blocks):
    """``None`` or a set of ``(prompt, block)`` pairs of non-negative integers."""
    if blocks is None:
        return None
    if isinstance(blocks, str | bytes | np.ndarray) or not isinstance(blocks, Iterable):
        raise ValueError(f"blocks: must be None or a set of (prompt, block) pairs, got "
                         f"{type(blocks).__name__}")
    out = set()
    for pair in blocks:
        if isinstance(pair, str | bytes) or not isinstance(pair, Sequence | np.ndarray) or (
            len(pair) != 2
        ):
            raise ValueError(f"blocks: every entry must be a (prompt, block) pair, got {pair!r}")
        out.add((as_int(pair[0], "blocks", min_value=0), as_int(pair[1], "blocks", min_value=0)))
    return out


def acceptance_compensator(results, target, draft, *, blocks=None):
    """Per-block accepted drafts and their exact compensator (the theory of the AATPS).

    At decision ``s`` of a block (context ``c_s``, ``nu_s`` consistent drafts, both recorded
    by the decoder in :class:`DecodeResult`), the decoder accepts with conditional
    probability ``a_s = exact_acceptance(p(c_s), q(c_s), DECODER_SCHEME[decoder], nu_s)``
    given everything before the decision, because the clocks or coins of a context not yet
    decided are fresh (distinct context labels, per-position unkeyed labels).  Hence
    ``sum_s (1[accept_s] - a_s)`` is a sum of martingale differences: the compensator
    ``sum_s a_s`` is an unbiased prediction of the accepted drafts of a block, with no
    independence or stationarity assumption on the contexts.  Replacing every block's
    accepted count by its compensator gives an unbiased theory prediction of the AATPS; the
    per-block differences are uncorrelated, so their standard error gives its z-score.

    ``mpfr`` and ``invariant`` decisions with ``nu = 1`` use the exponential race (MPFR and
    GLS with one draft are the race). Decisions skipped as repeated contexts
    (``repeats="skip"``, :attr:`DecodeResult.decision_skipped`) are vanilla speculative
    sampling: ``1 - TV`` (skipped ``mpfr`` decisions with ``nu > 1`` are refused). ``mse`` /
    ``mse_pseudo`` with the gamma reweight keep ``1 - TV`` (the draft is ``q``-distributed
    over keys); ``mws`` with it has no closed form and is refused.  ``exact_acceptance``
    for ``"gls"`` is a quadrature (slow): restrict with ``blocks``.

    Parameters
    ----------
    results : DecodeResult or sequence of DecodeResult
        Runs of one decoder of :data:`DECODER_SCHEME` (prompt index = position in the
        sequence).
    target, draft : models
        The models used for the runs (wrapped in a :class:`~specbound.sim.models.CachedLM` or
        not).
    blocks : set of (prompt, block) pairs, optional
        Restrict the theory to these blocks.

    Returns
    -------
    pandas.DataFrame
        One row per block, columns ``prompt, block, emitted, accepted, n_decisions,
        predicted, a_first``: emitted tokens, accepted drafts, number of decisions, the
        compensator, and the acceptance at the block's first decision (all ``B`` drafts).

    Raises
    ------
    ValueError
        ``results`` empty, not decoding results, from several decoders or from a decoder
        without a per-context scheme (``ar``, ``basic_uwm``, ``specinfer``).
    """
    import pandas as pd

    from specbound.theory import exact_acceptance

    if isinstance(results, DecodeResult):
        results = [results]
    try:
        results = list(results)
    except TypeError:
        raise ValueError("results: must be a DecodeResult or a sequence of them") from None
    if not results or not all(isinstance(r, DecodeResult) for r in results):
        raise ValueError("results: must be a non-empty sequence of DecodeResult")
    decs = {r.decoder for r in results}
    if len(decs) != 1:
        raise ValueError(f"results: runs of one decoder expected, got {sorted(decs)}")
    decoder = decs.pop()
    spec = DECODER_SPECS.get(decoder)
    if (spec is not None and spec.block_for("gamma") != spec.block
            and any(r.watermark.reweight != "delta" for r in results)):
        # mws: the gamma reweight changes its block (no longer the race of its scheme)
        raise ValueError(f"results: {decoder} with the gamma reweight has no per-context "
                         f"closed-form acceptance (1 - TV between the reweighted laws, averaged "
                         f"over keys)")
    if decoder not in DECODER_SCHEME:
        raise ValueError(
            f"results: decoder {decoder!r} has no per-context acceptance scheme; supported: "
            f"{sorted(DECODER_SCHEME)}"
        )
    target = as_language_model(target, "target")
    draft = as_language_model(draft, "draft")
    blocks = _as_blocks(blocks)
    scheme = DECODER_SCHEME[decoder]
    rows = []
    ctx_rows: list[tuple[int, np.ndarray, int]] = []  # (row index, context, nu)
    skipped: list[bool] = []  # skipped repeats are vanilla speculative sampling ("sd")
    for i, res in enumerate(results):
        toks = np.asarray(res.tokens)
        n0 = res.prompt_length
        blk = res.block_of_decision()
        for b, k in enumerate(res.emitted_per_block):
            if blocks is not None and (i, b) not in blocks:
                continue
            sel = np.flatnonzero(blk == b)
            r = len(rows)
            rows.append({"prompt": i, "block": b, "emitted": int(k),
                         "accepted": int(res.accepted_per_block[b]),
                         "n_decisions": int(sel.size)})
            for j in sel:
                ctx_rows.append((r, toks[:n0 + int(res.decision_position[j])], int(res.nu[j])))
                skipped.append(bool(res.decision_skipped[j]))
    pred = np.zeros(len(rows))
    first = np.full(len(rows), np.nan)
    if ctx_rows:
        P = next_distributions(target, [c for _, c, _ in ctx_rows])
        Q = next_distributions(draft, [c for _, c, _ in ctx_rows])
        nus = np.array([nu for _, _, nu in ctx_rows])
        skp = np.array(skipped, dtype=bool)
        a = np.empty(len(ctx_rows))
        for nu in np.unique(nus):
            sel = (nus == nu) & ~skp
            if not sel.any():
                continue
            sch = scheme if nu > 1 or scheme in ("sd", "exp_race") else "exp_race"
            a[sel] = np.atleast_1d(exact_acceptance(P[sel], Q[sel], sch, int(nu)))
        if skp.any():
            if np.any(nus[skp] > 1):
                raise ValueError("results: skipped mpfr decisions with nu > 1 (recursive "
                                 "rejection) have no per-context closed form here")
            a[skp] = np.atleast_1d(exact_acceptance(P[skp], Q[skp], "sd", 1))
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

