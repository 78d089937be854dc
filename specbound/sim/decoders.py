"""The registry of sequence decoders: one :class:`DecoderSpec` per decoder.

Everything the package knows about a decoder of :func:`specbound.sim.speculative_decode` is
one frozen :class:`DecoderSpec` in :data:`DECODER_SPECS` (name -> spec): whether it is keyed,
whether it takes ``B > 1`` drafts, its *block kind* (which block function runs a block of
it), the per-context coupling of one verification decision (the ``scheme`` of
:func:`specbound.theory.exact_acceptance`), the options it takes, the acceptance test of the
single-draft block, and its number in the compiled loop.  The public lists
(:data:`DECODERS`, :data:`KEYED_DECODERS`, :data:`MULTI_DRAFT_DECODERS`,
:data:`DECODER_SCHEME`) and the compiled loop's tables (``_compiled.CODE_NAMES``,
``_compiled._KEYED``) are derived from it.

Both block loops -- the Python loop of :mod:`specbound.sim.decode` and the Numba loop of
:mod:`specbound.sim._compiled` -- dispatch on :attr:`DecoderSpec.block` explicitly (one
block function per kind of :data:`BLOCK_KINDS`); a kind without a block function raises a
``ValueError`` naming the decoder, never falls through to another decoder's block.  Within a
block the behaviour is read from the spec's fields (``keyed``, ``acceptance``), never from
the decoder's name, so a new decoder that fits an existing block is one spec; a new block is
one spec plus one block function in each loop (``docs/sim.md``, "Adding a decoder").

The algorithms are those of Liu, Wan, Gao & Gündüz (2026), arXiv:2609.21858, §4-§6, App. A,
C, D (Alg. 1, 3, 4, 6, 9, 10), the baselines named there (module docstring of
:mod:`specbound.sim.decode`) and the block verification of Sun, Mendlovic, Leviathan,
Aharoni, Beirami, Ro & Suresh (2024), arXiv:2403.10444, Alg. 2
(:mod:`specbound.sim._compiled_blockver`) and the lossless hierarchical speculative decoding
of Zhou, Huang, Li, Wu, Wang, Zhang, Lin & Cheng (ICLR 2026), arXiv:2601.05724
(:mod:`specbound.sim._compiled_hsd`).
"""

from __future__ import annotations

import types
from dataclasses import dataclass

__all__ = ["ACCEPTANCES", "BLOCK_KINDS", "DECODERS", "DECODER_SCHEME", "DECODER_SPECS",
           "KEYED_DECODERS", "MULTI_DRAFT_DECODERS", "OPTIONS", "PYTHON_LOOP_OPTIONS",
           "DecoderSpec", "decoder_spec"]

#: block kinds, each run by one block function in each loop (number = position):
#: ``"token"`` one target token per step (no drafts), ``"tree"`` the PFR / MPFR draft tree
#: (Alg. 10), ``"single"`` one draft sequence verified position by position (Alg. 1),
#: ``"gls"`` B draft paths with the list coupling, ``"specinfer"`` B draft paths with
#: recursive rejection, ``"blockver"`` one draft sequence verified as a whole block (Sun et
#: al. 2024, arXiv:2403.10444, Alg. 2), ``"hsd"`` one draft sequence verified by lossless
#: hierarchical speculative decoding (Zhou et al., ICLR 2026, arXiv:2601.05724)
BLOCK_KINDS = ("token", "tree", "single", "gls", "specinfer", "blockver", "hsd")
#: compiled numbers of the block kinds (the position in :data:`BLOCK_KINDS`)
(BLOCK_TOKEN, BLOCK_TREE, BLOCK_SINGLE, BLOCK_GLS, BLOCK_SPECINFER,
 BLOCK_BLOCKVER, BLOCK_HSD) = range(len(BLOCK_KINDS))

#: acceptance tests of the single-draft block: ``"plain"`` ``U <= p(x)/q(x)`` with the
#: block's unkeyed coin, ``"reweighted"`` the same test between the reweighted laws
#: ``R(p)``, ``R(q)`` with residual ``(R(p) - R(q))_+``, ``"keyed_coin"`` the plain test
#: with a coin from the second key (He et al. 2026, arXiv:2602.01428)
ACCEPTANCES = ("plain", "reweighted", "keyed_coin")
ACC_PLAIN, ACC_REWEIGHTED, ACC_KEYED_COIN = range(len(ACCEPTANCES))

#: decoder options a spec may take besides ``repeats`` (which every keyed decoder takes):
#: ``reweight="gamma"``, ``unkeyed="fresh"``, ``residual="keyed"``, ``proposal="uniform"``
OPTIONS = ("reweight", "unkeyed", "residual", "proposal")
#: options whose non-default value runs in the Python block loop only: the compiled loop
#: declines the run (``speculative_decode`` and ``speculative_decode_batch`` then take the
#: Python loop).  ``proposal="uniform"``: ``mpfr`` on a public Poisson process (Alg. 5 of
#: Liu et al. 2026, App. A.3), whose scans have no compiled block
PYTHON_LOOP_OPTIONS = frozenset({"proposal"})


@dataclass(frozen=True)
class DecoderSpec:
    """What the package knows about one sequence decoder.

    Attributes
    ----------
    name : str
        The decoder's name (``speculative_decode(..., decoder=name)``).
    code : int
        Its number in the compiled loop (``_compiled.CODE_NAMES[code] == name``); the codes
        of :data:`DECODER_SPECS` are ``0, 1, ...`` in registry order.
    block : str
        The block kind of :data:`BLOCK_KINDS` that runs it.
    keyed : bool
        Whether it needs ``key``: its drafts and emitted tokens are keyed races (the
        watermark); unkeyed decoders draw with the seeded generator.
    multi_draft : bool
        Whether it accepts ``B > 1``.
    scheme : str or None
        The per-context coupling of one verification decision: the ``scheme`` of
        :func:`specbound.theory.exact_acceptance` giving its acceptance probability with
        ``nu`` consistent drafts; None when there is no closed form (``specinfer``) or no
        drafts.
    options : frozenset of str
        The options of :data:`OPTIONS` it takes (others accept only their defaults).
    gamma_block : str or None
        The block kind under ``reweight="gamma"`` when it differs from ``block`` (``mws``:
        the reweighted laws are no longer point masses, so it is single-draft speculative
        sampling, not a race).
    acceptance : str
        The acceptance test of the single-draft block (:data:`ACCEPTANCES`).
    summary : str
        One line for the docs.
    """

    name: str
    code: int
    block: str
    keyed: bool
    multi_draft: bool = False
    scheme: str | None = None
    options: frozenset = frozenset()
    gamma_block: str | None = None
    acceptance: str = "plain"
    summary: str = ""

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"name: a decoder spec needs a non-empty name, got {self.name!r}")
        if not set(self.options) <= set(OPTIONS):
            raise ValueError(f"options: unknown options {sorted(set(self.options) - set(OPTIONS))}"
                             f" of decoder {self.name!r}; known: {list(OPTIONS)}")
        if self.acceptance not in ACCEPTANCES:
            raise ValueError(f"acceptance: {self.acceptance!r} of decoder {self.name!r} is not "
                             f"one of {list(ACCEPTANCES)}")
        object.__setattr__(self, "options", frozenset(self.options))

    def block_for(self, reweight: str = "delta") -> str:
        """The block kind of a run with ``reweight``."""
        if reweight == "gamma" and self.gamma_block is not None:
            return self.gamma_block
        return self.block

    def scheme_for(self, reweight: str = "delta") -> str | None:
        """The per-context :attr:`scheme` of a run with ``reweight``: None when that run's
        block is not the one ``scheme`` describes (``mws`` under ``reweight="gamma"``, whose
        reweighted laws are verified by speculative sampling, not raced)."""
        return self.scheme if self.block_for(reweight) == self.block else None

    @property
    def drafts(self) -> bool:
        """Whether it uses a draft model (every block kind but ``"token"``)."""
        return self.block != "token"


def _registry(*specs: DecoderSpec) -> types.MappingProxyType:
    out = {}
    for i, s in enumerate(specs):
        if s.name in out:
            raise ValueError(f"name: decoder {s.name!r} registered twice")
        if s.code != i:
            raise ValueError(f"code: decoder {s.name!r} has code {s.code}, expected {i} (the "
                             f"codes are the registry order)")
        out[s.name] = s
    return types.MappingProxyType(out)


_SD = "sd"
_RACE = "exp_race"

#: name -> :class:`DecoderSpec`, in the order of :data:`DECODERS`
DECODER_SPECS = _registry(
    DecoderSpec("ar", 0, "token", keyed=False,
                summary="autoregressive sampling from the target (inverse CDF)"),
    DecoderSpec("basic_uwm", 1, "token", keyed=True, options={"reweight"},
                summary="keyed exponential race (Gumbel-max) without speculation"),
    DecoderSpec("vsps", 2, "single", keyed=False, scheme=_SD,
                summary="vanilla speculative sampling (Alg. 1, blockwise)"),
    DecoderSpec("pfr", 3, "tree", keyed=True, scheme=_RACE,
                summary="single-draft PFR (Alg. 3/9)"),
    DecoderSpec("pfr_nowm", 4, "tree", keyed=False, scheme=_RACE, options={"unkeyed"},
                summary="PFR on unkeyed clocks (no watermark)"),
    DecoderSpec("mpfr", 5, "tree", keyed=True, multi_draft=True, scheme="mpfr",
                options={"proposal"},
                summary="multi-draft MPFR with the context tree (Alg. 4/10)"),
    DecoderSpec("invariant", 6, "gls", keyed=False, multi_draft=True, scheme="gls",
                summary="list coupling / GLS (Rowan et al. 2025)"),
    DecoderSpec("specinfer", 7, "specinfer", keyed=False, multi_draft=True,
                summary="recursive rejection over B i.i.d. drafts (Miao et al. 2024)"),
    DecoderSpec("mws", 8, "tree", keyed=True, scheme=_RACE, options={"reweight"},
                gamma_block="single", acceptance="reweighted",
                summary="Hu & Huang 2024, maintain watermark strength"),
    DecoderSpec("mse", 9, "single", keyed=True, scheme=_SD, options={"reweight"},
                summary="Hu & Huang 2024, maintain sampling efficiency"),
    DecoderSpec("mse_pseudo", 10, "single", keyed=True, scheme=_SD,
                options={"reweight", "residual"}, acceptance="keyed_coin",
                summary="mse with the pseudorandom acceptance coin (He et al. 2026)"),
    DecoderSpec("blockver", 11, "blockver", keyed=False,
                summary="block verification of one draft sequence (Sun et al. 2024, Alg. 2)"),
    DecoderSpec("hsd", 12, "hsd", keyed=False,
                summary="lossless hierarchical speculative decoding of one draft sequence "
                        "(Zhou et al., ICLR 2026)"),
)

DECODERS: tuple[str, ...] = tuple(DECODER_SPECS)
#: decoders that need ``key`` (their emitted tokens carry the keyed watermark)
KEYED_DECODERS = frozenset(n for n, s in DECODER_SPECS.items() if s.keyed)
#: decoders that accept ``B > 1``
MULTI_DRAFT_DECODERS = frozenset(n for n, s in DECODER_SPECS.items() if s.multi_draft)
#: per-context coupling of each speculative decoder: the ``scheme`` of
#: :func:`specbound.theory.exact_acceptance` giving the acceptance probability of one
#: verification decision with ``nu`` consistent drafts (``"sd"``: 1 - TV, Alg. 1;
#: ``"exp_race"``: the exponential race; ``"mpfr"``: Thm. B.1 of Liu et al. 2026, exact for
#: Alg. 6; ``"gls"``: Rowan et al. 2025).  ``specinfer`` (recursive rejection) has no
#: per-context closed form here; ``ar`` and ``basic_uwm`` have no drafts.
DECODER_SCHEME = types.MappingProxyType(
    {n: s.scheme for n, s in DECODER_SPECS.items() if s.scheme is not None})


def decoder_spec(decoder, specs=None) -> DecoderSpec:
    """The spec of ``decoder`` (``ValueError`` naming ``decoder`` when none is registered).

    ``specs`` defaults to :data:`DECODER_SPECS` (read at call time)."""
    specs = DECODER_SPECS if specs is None else specs
    if isinstance(decoder, str):
        spec = specs.get(decoder)
        if spec is not None:
            if not isinstance(spec, DecoderSpec) or spec.name != decoder:
                raise ValueError(f"decoder: the registry entry of {decoder!r} is not its "
                                 f"DecoderSpec")
            return spec
    raise ValueError(f"decoder: must be one of {sorted(specs)}, got {decoder!r}")
