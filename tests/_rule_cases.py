"""Settings of every lossy rule for the tests, derived from the theory's table of rules.

A rule's parameters are named in :data:`specbound.theory.lossy.RULE_PARAMS` (derived from
``RULE_LAWS``); the tests build each rule's settings from one example value per *parameter*
(:func:`rule_settings`), so that a new rule whose parameters are known here is tested by
every test that takes its settings from this module without a line of test code.  A new
parameter needs its example here (``KeyError`` naming it otherwise).
"""

from __future__ import annotations

from specbound.theory.lossy import COMPLETIONS, DIVERGENCES, ON_REJECT, RULE_PARAMS

#: the choices of each option parameter (a parameter whose value is one of a few strings)
OPTION_CHOICES = {"divergence": DIVERGENCES, "on_reject": ON_REJECT, "completion": COMPLETIONS}


def rule_settings(values: dict) -> list[tuple[str, str, dict]]:
    """``(label, rule, params)`` for every rule of the registry, in registry order.

    ``values`` maps each non-option parameter to its example value (a required one must be
    there; an optional one keeps its default unless given).  Each rule gets one setting with
    its options at their defaults, plus one setting per other choice of each option (the
    label names the choice: ``"fuzzy-kl"``).
    """
    out = []
    for rule, (required, optional) in RULE_PARAMS.items():
        base = {name: values[name] for name in required}
        base.update({name: values[name] for name in optional
                     if name not in OPTION_CHOICES and name in values})
        out.append((rule, rule, base))
        for name, default in optional.items():
            for choice in OPTION_CHOICES.get(name, ()):
                if choice != default:
                    out.append((f"{rule}-{choice}", rule, {**base, name: choice}))
    return out
