"""What the producer tests of the claims share (``tests/test_claims_producers_*.py``): a
memo of study runs, intact or with one fault patched in, and the verdict of one evidence
column of one claim on an output folder.

:func:`study_runner` is the body of each module's ``runs`` fixture: the module says how a
fault is patched in (``patch(fault, module, monkeypatch)``), the runner runs each study once
per (study, fault, parameters) for the module and hands back its output folder.
"""

from __future__ import annotations

import importlib

import pytest

from paper_figs.claims import engine as E
from paper_figs.claims.registry import BY_ID
from tests.test_claims_flip import _numbers

#: the verdicts a fault must turn a row to (against the sentence)
BAD = {E.NOT_REPRODUCED, E.REFUTED}


def study_runner(tmp_path_factory, patch):
    """``get(study, fault=None, **params)``: the output folder of ``paper_figs.<study>`` on
    its quick grid (with ``params``), intact (``fault=None``) or with ``patch(fault, module,
    monkeypatch)`` applied while it runs, each computed once per runner.  ``study``: a
    study's name, or several joined by ``+`` (their outputs in one folder; ``params`` then
    maps each study to its own)."""
    done = {}

    def get(study, fault=None, **params):
        key = (study, fault, repr(sorted(params.items())))
        if key not in done:
            name = f"{study}-{fault or 'intact'}".replace(" ", "_").replace("+", "_")
            folder = tmp_path_factory.mktemp(name)
            studies = study.split("+")
            for one in studies:
                module = importlib.import_module(f"paper_figs.{one}")
                kw = params.get(one, {}) if len(studies) > 1 else params
                with pytest.MonkeyPatch.context() as m:
                    if fault is not None:
                        patch(fault, module, m)
                    module.main(folder, quick=True, **kw)
            done[key] = folder
        return done[key]

    return get


def column_verdict(folder, claim_id, column=E.SYNTHETIC):
    """The outcome of ``column`` of claim ``claim_id`` on the output folder ``folder`` (the
    paper's numbers left out)."""
    (row,) = E.evaluate(folder, [BY_ID[claim_id]], numbers=_numbers({}))
    return row.columns[column]
