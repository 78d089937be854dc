"""Conformance kit: check any speculative sampler against the exact laws.

A speculative sampler is correct when the token it emits follows the target law ``p``
(Leviathan et al. 2023, arXiv:2211.17192; Liu, Wan, Gao & Gündüz 2026, arXiv:2609.21858,
Alg. 1), when it accepts as often as its coupling should (``1 - TV(p, q)`` for one draft;
the exact multi-draft values of :func:`specbound.theory.exact_acceptance`), when a lossy
rule induces the law its closed form says (Zhou et al. 2026, arXiv:2607.26627, §3), and, for
keyed samplers, when the emitted token does not depend on the drafter.  This module points
those exact answers at *your* sampler, with goodness-of-fit tests whose false-failure rate is
stated (:mod:`specbound.sim.gof`) and whose power is reported::

    from specbound.testing import assert_lossless
    from specbound.testing.adapters import transformers_step
    assert_lossless(transformers_step(), p, q)

Protocols (plain callables; the harness draws the drafts with its own generator and hands
the sampler another generator ``rng``; inputs are read-only arrays)
--------------------------------------------------------------------------------------------
``"step"``
    ``step(p, q, x, rng) -> (token, accepted)``: one draft ``x ~ q``.
``"batch"``
    ``step(P, Q, X, rng) -> (tokens, accepted)``: rows of ``P``, ``Q`` (``(m, V)``; the same
    law on every row, as broadcast views) and ``X`` (``(m,)``); returns two length-``m``
    arrays (NumPy or torch).  The fast path: ``10**6`` draws cost the harness well under a
    second at ``V = 1000``.
``"multi"`` / ``"multi_batch"``
    ``step(p, q, xs, rng) -> (token, accepted_index)``: ``B`` drafts ``xs`` (i.i.d. from
    ``q``, or ``xs[b] ~ q[b]`` when ``q`` is ``(B, V)``); ``accepted_index`` is the index of
    the accepted draft or -1.  The batched variant takes ``(m, V)``, ``(m, V)`` or
    ``(m, B, V)``, ``(m, B)`` and returns two length-``m`` arrays.
``"block"``
    ``block(P, Q, xs, rng) -> (tokens, n_accepted)``: an ``L``-token block with per-position
    laws ``P`` (``(L + 1, V)``, the last row for the bonus token) and ``Q`` (``(L, V)``),
    drafts ``xs[i] ~ Q[i]``; emits ``n_accepted`` drafts and one more token.
``"keyed"``
    ``step(p, q, x, key, context) -> token``: a keyed (watermarked) sampler.

Checks (each returns a frozen :class:`CheckResult`; the ``assert_*`` twins raise
``AssertionError`` with its text)
--------------------------------------------------------------------------------------------
:func:`check_lossless`, :func:`check_induced`, :func:`check_acceptance`,
:func:`check_block`, :func:`check_drafter_invariance`; :func:`draw` runs a sampler once so
that several checks can share the draws.

Defaults: false-failure rate ``1e-3`` per check; ``n`` sized so that any emitted law at
total-variation distance ``>= 0.01`` from the expected one (or an acceptance rate off by
``>= 0.01``) is caught with probability ``>= 0.99``.  Bad sampler outputs (a token outside
the vocabulary, a non-integer, NaN, a wrong shape, an exception) raise ``ValueError`` /
``TypeError`` naming the sampler and the first bad call's inputs; bad laws, unknown rules
and an ``n`` too small for the requested power raise ``ValueError`` naming the argument.

Submodules: :mod:`specbound.testing.adapters` (transformers' sampler, the package's own),
:mod:`specbound.testing.gallery` (realistic buggy samplers, and correct references),
:mod:`specbound.testing.strategies` (hypothesis strategies; needs the ``testing`` extra).
"""

from specbound.testing._checks import (
    CheckResult,
    assert_acceptance,
    assert_block,
    assert_drafter_invariance,
    assert_induced,
    assert_lossless,
    check_acceptance,
    check_block,
    check_drafter_invariance,
    check_induced,
    check_lossless,
    specinfer_acceptance,
)
from specbound.testing._harness import PROTOCOLS, Draws, draw

__all__ = [
    "PROTOCOLS",
    "CheckResult",
    "Draws",
    "draw",
    "check_lossless",
    "check_induced",
    "check_acceptance",
    "check_block",
    "check_drafter_invariance",
    "assert_lossless",
    "assert_induced",
    "assert_acceptance",
    "assert_block",
    "assert_drafter_invariance",
    "specinfer_acceptance",
]
