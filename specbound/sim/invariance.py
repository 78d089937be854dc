"""Drafter-invariance checkers (Liu, Wan, Gao & Gündüz 2026, arXiv:2609.21858, App. C,
Defs. C.4-C.6, Prop. C.3).

For a speculative block started from an initial context ``x`` with shared randomness ``R``,
let ``Y_{1:tau}`` be the emitted tokens and ``X`` the realised draft sequences.  Given ``R``
every decoder of :mod:`specbound.sim.decode` is deterministic, so each conditional law in
the definitions is an indicator and a definition is violated by a single pair of drafters
(``D``, ``D~``) run on the same ``(x, R)``:

- **strong** (Def. C.4, Daliri et al. 2025): the emitted prefixes differ at some
  ``j <= min(tau, tau~)``;
- **conditional** (Def. C.5, Rowan et al. 2025): the realised draft sequences are equal
  (``X = X~``; ordered by draft index for draft-indexed decoders, as the multiset of
  root-to-leaf paths for the context tree of ``pfr``/``mpfr``/``mws``) but the emitted
  prefixes differ at some ``j <= min(tau, tau~)``;
- **stopping time** (Def. C.6; Def. 4.3 of Liu et al. 2026): the block lengths are equal
  (``tau = tau~``) but ``Y_{1:tau} != Y~_{1:tau}``.

``R`` is the key (keyed decoders) together with the seed of the unkeyed randomness, laid out
canonically per block (see :mod:`specbound.sim.decode`), so both drafters see the same
``R``.  The definitions are per block; the checks run one block (``max_new_tokens = L + 1``).
That ``pfr``/``mpfr`` emit the ``basic_uwm`` sequence for whole sequences is tested token for
token in ``tests/test_sim_invariance.py``.

Which definition holds for which decoder (proved where marked; all rows confirmed by the
search of :func:`check_drafter_invariance`, which finds counterexamples for every "no"):

============== ======== =========== ============= ==============================================
decoder        strong   conditional stopping time why
============== ======== =========== ============= ==============================================
ar, basic_uwm  yes      yes         yes           no drafter is used
pfr, mws       yes      yes         yes           Prop. C.3: output = target-side keyed chain
pfr_nowm       yes      yes         yes           same, with the seeded position clocks as R
mpfr           yes      yes         yes           Alg. 10 emits argmin G_{v,1}/p_v(c) on the
                                                  realised path: the same chain
invariant      no       yes         no            (B >= 2) the next token races over the
                                                  active drafts only, which depend on the
                                                  drafter; given the drafts they do not
vsps           no       no          no            acceptance ratio p/q and residual (p-q)_+
specinfer      no       no          no            same, recursively
mse            no       no          no            unkeyed coin against p/q, residual (p-q)_+
mse_pseudo     no       no          no            keyed coin, still against p/q
============== ======== =========== ============= ==============================================

(``invariant`` with ``B = 1`` races one draft's clocks per position and is strongly invariant
within a block.)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from specbound._validation import as_choice, as_int, as_rng
from specbound.sim.decode import (
    DECODERS,
    KEYED_DECODERS,
    MAX_DRAFTS,
    MAX_NEW_TOKENS,
    MULTI_DRAFT_DECODERS,
    speculative_decode,
)
from specbound.sim.models import as_language_model
from specbound.sim.prf import as_window

__all__ = ["Counterexample", "DefinitionCheck", "InvarianceResult", "check_drafter_invariance"]

DEFINITIONS = ("strong", "conditional", "stopping_time")
#: largest ``n_trials * (L + 1) * B`` of one :func:`check_drafter_invariance` call
MAX_INVARIANCE_WORK = 2 * 10**5
#: largest ``prompt_length`` of :func:`check_drafter_invariance`
MAX_PROMPT_LENGTH = 10**6


@dataclass(frozen=True)
class Counterexample:
    """A violation: the same (prompt, key, seed) and two drafters give different outputs.

    Attributes
    ----------
    definition : str
        ``"strong"``, ``"conditional"`` or ``"stopping_time"``.
    prompt : tuple of int
    key : int or None
        Key of the keyed decoders (None for unkeyed ones).
    seed : int
        Seed of the unkeyed randomness.
    drafters : tuple of int
        Indices of the two drafters in the ``drafters`` argument.
    outputs : tuple of tuple of int
        Emitted block tokens ``Y_{1:tau}`` for each drafter.
    drafts : tuple of tuple of tuple of int
        Realised draft sequences for each drafter (rows are drafts).
    """

    definition: str
    prompt: tuple
    key: int | None
    seed: int
    drafters: tuple
    outputs: tuple
    drafts: tuple


@dataclass(frozen=True)
class DefinitionCheck:
    """Outcome of the search for one definition.

    ``n_comparisons`` counts the trials where the definition constrains the outputs (all
    trials for ``strong``; equal drafts for ``conditional``; equal block lengths for
    ``stopping_time``).  ``holds`` is True when no violation was found (evidence, not proof).
    """

    holds: bool
    n_comparisons: int
    n_violations: int
    counterexample: Counterexample | None


@dataclass(frozen=True)
class InvarianceResult:
    """Result of :func:`check_drafter_invariance` (one :class:`DefinitionCheck` per definition)."""

    decoder: str
    n_trials: int
    strong: DefinitionCheck
    conditional: DefinitionCheck
    stopping_time: DefinitionCheck

    @property
    def holds(self) -> dict:
        """``{definition: no violation found}``."""
        return {d: getattr(self, d).holds for d in DEFINITIONS}


def _canonical_drafts(decoder, drafts):
    rows = [tuple(int(t) for t in r) for r in drafts]
    if decoder in ("pfr", "pfr_nowm", "mpfr", "mws"):
        rows = sorted(rows)
    return tuple(rows)


def check_drafter_invariance(decoder, target, drafters, *, n_trials=1000, seed=0, L=4, B=1,
                             prompt_length=3, window=None) -> InvarianceResult:
    """Search for violations of strong, conditional and stopping-time drafter invariance.

    Each trial draws a key, a seed for the unkeyed randomness, a prompt of
    ``prompt_length`` uniform tokens and an ordered pair of distinct drafters, runs one
    speculative block with each drafter on the same ``(prompt, key, seed)`` and applies the
    three checks of the module docstring.

    Parameters
    ----------
    decoder : str
        A decoder of :data:`specbound.sim.decode.DECODERS`.
    target : SyntheticLM or MarkovLM
    drafters : sequence of models
        At least two draft models with the target's vocabulary.  Small vocabularies make
        equal draft sequences (the condition of Def. C.5) frequent.
    n_trials : int, 1 <= n_trials <= 10**6
        Number of (key, prompt, drafter pair) trials; ``n_trials * (L + 1) * B`` is at most
        :data:`MAX_INVARIANCE_WORK` (``2 * 10**5``, about 5 s on a small vocabulary):
        larger searches are refused up front (split them over seeds).
    seed : int, SeedSequence or Generator
        Seed of the search.
    L, B : int
        Lookahead and number of drafts of the decoder (B > 1 only for multi-draft decoders).
    prompt_length : int, 0 <= prompt_length <= MAX_PROMPT_LENGTH (10**6)
    window : int >= 0 or None
        Window of the keyed labels (None: whole prefix).

    Returns
    -------
    InvarianceResult
        With the first counterexample found for each definition.
    """
    decoder = as_choice(decoder, "decoder", DECODERS)
    target = as_language_model(target, "target")
    if isinstance(drafters, np.ndarray) or not hasattr(drafters, "__len__"):
        raise ValueError("drafters: must be a sequence of draft models")
    drafters = [as_language_model(d, "drafters") for d in drafters]
    if len(drafters) < 2:
        raise ValueError(f"drafters: need at least 2 drafters, got {len(drafters)}")
    for d in drafters:
        if d.vocab_size != target.vocab_size:
            raise ValueError(
                f"drafters: vocabulary size {d.vocab_size} differs from the target's "
                f"{target.vocab_size}"
            )
    n_trials = as_int(n_trials, "n_trials", min_value=1, max_value=10**6)
    L = as_int(L, "L", min_value=1, max_value=MAX_NEW_TOKENS - 1)
    B = as_int(B, "B", min_value=1, max_value=MAX_DRAFTS)
    if B > 1 and decoder not in MULTI_DRAFT_DECODERS:
        raise ValueError(f"B: decoder {decoder!r} is single-draft (B must be 1)")
    work = n_trials * (L + 1) * B
    if work > MAX_INVARIANCE_WORK:
        raise ValueError(
            f"n_trials: {n_trials} trials of a block of L + 1 = {L + 1} positions with B = {B} "
            f"drafts ({work:,} draft positions per drafter) exceed the limit "
            f"MAX_INVARIANCE_WORK = {MAX_INVARIANCE_WORK:,} per call (the trials run in a "
            "Python loop); split the search over several seeds"
        )
    prompt_length = as_int(prompt_length, "prompt_length", min_value=0,
                           max_value=MAX_PROMPT_LENGTH)
    window = as_window(window)
    rng = as_rng(seed)
    keyed = decoder in KEYED_DECODERS
    n = target.vocab_size
    comps = dict.fromkeys(DEFINITIONS, 0)
    viols = dict.fromkeys(DEFINITIONS, 0)
    first: dict = dict.fromkeys(DEFINITIONS)
    for _ in range(n_trials):
        key = int(rng.integers(0, 2**62)) if keyed else None
        run_seed = int(rng.integers(0, 2**62))
        prompt = rng.integers(0, n, size=prompt_length).astype(np.int64)
        i, j = (int(x) for x in rng.choice(len(drafters), size=2, replace=False))
        outs = []
        for k in (i, j):
            res = speculative_decode(target, drafters[k], prompt, decoder, L=L, B=B, key=key,
                                     max_new_tokens=L + 1, seed=run_seed, window=window,
                                     max_blocks=1)
            dr = _canonical_drafts(decoder, res.drafts[0]) if res.drafts else ()
            outs.append((tuple(int(t) for t in res.generated), dr))
        (y1, x1), (y2, x2) = outs
        k = min(len(y1), len(y2))
        common_differs = y1[:k] != y2[:k]
        checks = {
            "strong": (True, common_differs),
            "conditional": (x1 == x2, common_differs),
            "stopping_time": (len(y1) == len(y2), y1 != y2),
        }
        for name, (applies, violated) in checks.items():
            if not applies:
                continue
            comps[name] += 1
            if violated:
                viols[name] += 1
                if first[name] is None:
                    first[name] = Counterexample(
                        definition=name, prompt=tuple(int(t) for t in prompt), key=key,
                        seed=run_seed, drafters=(i, j), outputs=(y1, y2), drafts=(x1, x2))
    checks_out = {
        name: DefinitionCheck(holds=viols[name] == 0, n_comparisons=comps[name],
                              n_violations=viols[name], counterexample=first[name])
        for name in DEFINITIONS
    }
    return InvarianceResult(decoder=decoder, n_trials=n_trials, **checks_out)
