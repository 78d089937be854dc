"""Deprecation helpers shared by every layer (private).

Public names of specbound change only with a deprecated alias that keeps working for one
release and emits a :class:`DeprecationWarning` naming the replacement (the policy recorded
in ``CHANGELOG.md``).  Three kinds of change are covered:

- a renamed keyword argument (:func:`renamed_kwargs`);
- a parameter that became keyword-only (:func:`legacy_positional`): extra positional
  arguments are still mapped onto it, with a warning;
- a renamed or moved module attribute (:func:`module_aliases`, used as a module's
  ``__getattr__``).
"""

from __future__ import annotations

import functools
import importlib
import inspect
import warnings

#: release in which the current aliases were introduced, and the one that removes them
SINCE = "0.2.0"
REMOVAL = "0.3.0"


def warn_deprecated(old: str, new: str, *, stacklevel: int = 3) -> None:
    """Emit the package's standard :class:`DeprecationWarning` for ``old`` -> ``new``."""
    warnings.warn(
        f"{old} is deprecated since specbound {SINCE} and will be removed in {REMOVAL}; "
        f"use {new} instead",
        DeprecationWarning,
        stacklevel=stacklevel,
    )


def renamed_kwargs(**mapping: str):
    """Decorator: accept the old keyword names ``old=new`` with a deprecation warning.

    Passing both the old and the new name raises ``ValueError`` naming the new one.
    """

    def deco(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            for old, new in mapping.items():
                if old in kwargs:
                    if new in kwargs:
                        raise ValueError(
                            f"{new}: given together with its deprecated alias {old!r}"
                        )
                    warn_deprecated(f"{fn.__name__}({old}=...)", f"{fn.__name__}({new}=...)")
                    kwargs[new] = kwargs.pop(old)
            return fn(*args, **kwargs)

        wrapper.__deprecated_kwargs__ = dict(mapping)
        return wrapper

    return deco


def legacy_positional(*names: str):
    """Decorator: parameters ``names`` became keyword-only; positional use still works.

    Extra positional arguments beyond the function's positional parameters are assigned to
    ``names`` in order, with a deprecation warning.  More extras than ``names`` is a
    ``TypeError`` as for any Python call.
    """

    def deco(fn):
        sig = inspect.signature(fn)
        n_pos = sum(
            1
            for p in sig.parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        )

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            if len(args) > n_pos:
                extra = args[n_pos:]
                if len(extra) > len(names):
                    raise TypeError(
                        f"{fn.__name__}() takes at most {n_pos + len(names)} positional "
                        f"arguments ({len(args)} given)"
                    )
                for name, value in zip(names, extra, strict=False):
                    if name in kwargs:
                        raise TypeError(f"{fn.__name__}() got multiple values for {name!r}")
                    warn_deprecated(
                        f"passing {name!r} to {fn.__name__}() by position",
                        f"{fn.__name__}(..., {name}=...)",
                    )
                    kwargs[name] = value
                args = args[:n_pos]
            return fn(*args, **kwargs)

        return wrapper

    return deco


def module_aliases(module_name: str, aliases: dict[str, str]):
    """A module-level ``__getattr__`` resolving deprecated names.

    ``aliases`` maps an old attribute name to ``"package.module:new_name"``; accessing the
    old name warns and returns the new object.
    """

    def __getattr__(name):
        target = aliases.get(name)
        if target is None:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        mod, _, attr = target.partition(":")
        warn_deprecated(f"{module_name}.{name}", f"{mod}.{attr}")
        return getattr(importlib.import_module(mod), attr)

    return __getattr__
