"""Adapters: existing samplers behind the protocols of :mod:`specbound.testing`.

- :func:`transformers_step`, :func:`transformers_block`: transformers'
  ``transformers.generation.utils._speculative_sampling`` (Leviathan et al. 2023,
  arXiv:2211.17192, Alg. 1, with its ``assistant_ensemble_weight`` where the installed
  version has it) on the logits layout it expects;
- :func:`specbound_step`, :func:`specbound_multi`, :func:`specbound_keyed`: this package's
  own samplers (:func:`specbound.sim.samplers.sample_step`) run on the protocol's draft.

Each returns a plain callable of the protocol, so that, e.g.::

    from specbound.testing import assert_lossless
    from specbound.testing.adapters import transformers_step
    assert_lossless(transformers_step(), p, q)

checks transformers' sampler.  torch and transformers are imported when an adapter is
built, never at import of this module.
"""

from __future__ import annotations

import inspect

import numpy as np

from specbound._validation import as_choice, as_real

__all__ = ["transformers_step", "transformers_block", "specbound_step", "specbound_multi",
           "specbound_keyed"]


def _torch_logits(P, torch, device, dtype):
    """``log P`` as a ``(1, rows, V)`` tensor (``-inf`` where ``P = 0``): softmax gives P."""
    with np.errstate(divide="ignore"):
        lp = np.log(np.asarray(P, dtype=np.float64))
    return torch.as_tensor(lp, dtype=dtype, device=device).reshape(1, -1, lp.shape[-1])


def _spec_fn(function):
    if function is not None:
        return function
    from transformers.generation.utils import _speculative_sampling

    return _speculative_sampling


def _call_kwargs(fn, assistant_ensemble_weight):
    params = inspect.signature(fn).parameters
    kw = {}
    if "is_done_candidate" in params:  # transformers 4.x
        kw["is_done_candidate"] = False
    if assistant_ensemble_weight is not None:
        if "assistant_ensemble_weight" not in params:
            raise ValueError("assistant_ensemble_weight: the installed transformers' "
                             "_speculative_sampling has no such argument (transformers >= 5)")
        kw["assistant_ensemble_weight"] = float(assistant_ensemble_weight)
    return kw


def transformers_block(*, assistant_ensemble_weight=None, device="cpu", dtype=None,
                       function=None):
    """Block protocol ``block(P, Q, xs, rng) -> (tokens, n_accepted)`` over transformers'
    ``_speculative_sampling``.

    ``P`` (``(L + 1, V)``) becomes ``new_logits`` (``log P``, shape ``(1, L + 1, V)``), ``Q``
    (``(L, V)``) ``candidate_logits`` and ``xs`` the candidate ids (``(1, L)``,
    ``candidate_length = L``).  transformers draws from torch's global generator: each call
    seeds it from ``rng`` (``torch.manual_seed``), so a run is reproducible from the
    harness's seed.

    Parameters
    ----------
    assistant_ensemble_weight : float in (0, 1), optional
        Passed through (transformers >= 5: DIVERSE's static ensemble verification, whose
        emitted law is ``w p + (1 - w) q``, i.e. :mod:`specbound.theory`'s
        ``"interpolation"`` rule with ``lam = w``).
    device : str
        Torch device of the tensors (``"cuda"`` on a GPU).
    dtype : torch dtype, optional
        Of the logits (default float64, so the check sees the algorithm, not float32
        rounding; pass ``torch.float32`` for transformers' own precision).
    function : callable, optional
        Another function with the same signature (default: transformers' own).
    """
    import torch

    fn = _spec_fn(function)
    if assistant_ensemble_weight is not None:
        as_real(assistant_ensemble_weight, "assistant_ensemble_weight", low=0.0, high=1.0)
    kw = _call_kwargs(fn, assistant_ensemble_weight)
    dt = torch.float64 if dtype is None else dtype

    def block(P, Q, xs, rng):
        torch.manual_seed(int(rng.integers(0, 2**63 - 1)))
        L = len(xs)
        ids = torch.as_tensor(np.array(xs, dtype=np.int64), device=device).reshape(1, L)
        valid, n_matches = fn(ids, _torch_logits(Q, torch, device, dt), L,
                              _torch_logits(P, torch, device, dt), **kw)
        return valid[0].tolist(), int(n_matches)

    block.__module__ = "transformers.generation.utils"
    block.__qualname__ = "_speculative_sampling" + (
        f"[w={assistant_ensemble_weight}]" if assistant_ensemble_weight is not None else "")
    return block


def transformers_step(*, assistant_ensemble_weight=None, device="cpu", dtype=None,
                      function=None):
    """Single-draft step protocol ``step(p, q, x, rng) -> (token, accepted)`` over
    transformers' ``_speculative_sampling`` with one candidate (``candidate_length = 1``).

    ``new_logits`` holds ``log p`` twice (the position and the bonus position); a call with
    ``n_matches = 1`` accepted the draft.  Arguments as :func:`transformers_block`.
    """
    block = transformers_block(assistant_ensemble_weight=assistant_ensemble_weight,
                               device=device, dtype=dtype, function=function)

    def step(p, q, x, rng):
        tokens, k = block(np.stack([p, p]), q[None, :], [x], rng)
        return tokens[0], k == 1

    step.__module__, step.__qualname__ = block.__module__, block.__qualname__
    return step


def _uniforms_for(q, x, rng):
    """A uniform in draft ``x``'s interval of ``q``'s inverse CDF (so the package's
    slot samplers draft exactly ``x``), drawn conditionally uniform."""
    lo = float(np.sum(q[:x]))
    return min(max((lo + rng.random() * q[x]) / float(np.sum(q)), 1e-300), 1 - 2**-53)


def specbound_step(scheme: str = "sd"):
    """:func:`specbound.sim.samplers.sample_step` (``"sd"``: Alg. 1 of Liu, Wan, Gao & Gündüz
    2026, arXiv:2609.21858) as a step protocol on the harness's draft: the uniform table's
    draft slot is set inside ``x``'s interval of ``q``'s inverse CDF, the other uniforms are
    drawn from ``rng``."""
    from specbound.sim.samplers import clock_shape, sample_step

    as_choice(scheme, "scheme", ("sd",))

    def step(p, q, x, rng):
        table = rng.random(clock_shape(scheme, len(p), 1))
        table[0, 0] = _uniforms_for(q, x, rng)
        np.maximum(table, np.finfo(float).tiny, out=table)
        s = sample_step(p, q, scheme, 1, uniforms=table)
        return s.token, s.accepted

    step.__module__, step.__qualname__ = "specbound.sim.samplers", f"sample_step[{scheme}]"
    return step


def specbound_multi(scheme: str = "specinfer"):
    """The package's multi-draft ``"specinfer"`` sampler (recursive rejection sampling,
    Miao et al. 2024, arXiv:2305.09781) as a multi protocol ``step(p, q, xs, rng) ->
    (token, accepted_index)`` on the harness's i.i.d. drafts."""
    from specbound.sim.samplers import clock_shape, sample_step

    as_choice(scheme, "scheme", ("specinfer",))

    def step(p, q, xs, rng):
        B = len(xs)
        table = rng.random(clock_shape(scheme, len(p), B))
        for j, x in enumerate(xs):
            table[j, 0] = _uniforms_for(q, int(x), rng)
        np.maximum(table, np.finfo(float).tiny, out=table)
        s = sample_step(p, q, scheme, B, uniforms=table)
        if not s.accepted:
            return s.token, -1
        return s.token, int(np.flatnonzero(s.drafts == s.token)[0])

    step.__module__, step.__qualname__ = "specbound.sim.samplers", f"sample_step[{scheme}]"
    return step


def specbound_keyed(scheme: str = "exp_race", window=None):
    """The package's keyed sampler (:func:`specbound.sim.samplers.sample_step` with ``key``
    and ``context``; default the exponential race, Alg. 2 of Liu et al. 2026) as a keyed
    protocol ``step(p, q, x, key, context) -> token``.  The race draws its own draft from
    the keyed clocks, so ``x`` is not used."""
    from specbound.sim.samplers import sample_step

    as_choice(scheme, "scheme", ("exp_race", "mpfr", "gls"))

    def step(p, q, x, key, context):
        return sample_step(p, q, scheme, 1, key=key, context=context, window=window).token

    step.__module__ = "specbound.sim.samplers"
    step.__qualname__ = f"sample_step[{scheme}, keyed]"
    return step
