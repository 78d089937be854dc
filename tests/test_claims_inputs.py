"""The claims engine never judges a broken input (``paper_figs.claims.data``).

The corruption table: for every claim, the fabricated folder on which it holds
(:data:`tests.test_claims_flip.FLIPS`) and a quick run of ``bounds_vs_drafts`` are corrupted
one file at a time -- cut short, a row dropped, a row repeated, a NaN, an infinity or a
garbled cell in a number the claim reads, a column dropped, the columns reordered -- and the
verdict must be the intact one or "not run" naming the file (reordered columns: the intact
one).  Nothing here is statistical: every input is fixed.
"""

from __future__ import annotations

import shutil

import pandas as pd
import pytest

from paper_figs.claims import data as D
from paper_figs.claims import engine as E
from paper_figs.claims.registry import BY_ID
from tests.test_claims_flip import FLIPS, _numbers

CORRUPTIONS = ("truncate", "drop_row", "duplicate_row", "nan", "inf", "garbled",
               "drop_column", "reorder_columns")


def _target_column(name: str, df: pd.DataFrame) -> str | None:
    """The numeric column a cell corruption hits: the first one the schema checks that must
    be finite everywhere (a column where NaN means "not computed" is skipped)."""
    s = D.SCHEMAS.get(name, D.DEFAULT)
    for col in df.columns:
        if (D._match(col, s.numeric) and not D._match(col, s.text)
                and not D._match(col, s.nullable) and not D._match(col, s.nonfinite)
                and not D._match(col, s.small_nan)
                and not any(D._match(col, (p,)) for p, _, _ in s.nan_unless)):
            return col
    return None


def corrupt(path, how: str) -> bool:
    """Corrupt the CSV at ``path`` in place; False where the corruption does not apply."""
    raw = path.read_bytes()
    df = pd.read_csv(path)
    mid = len(df) // 2
    if how == "truncate":
        lines = raw.split(b"\n")
        cut = len(b"\n".join(lines[: max(2, len(lines) // 2)])) - 1  # inside a line
        path.write_bytes(raw[:cut])
        return True
    if how == "drop_row":
        if len(df) < 2:
            return False
        df = df.drop(index=mid)
    elif how == "duplicate_row":
        df = pd.concat([df.iloc[: mid + 1], df.iloc[mid:]], ignore_index=True)
    elif how in ("nan", "inf", "garbled"):
        col = _target_column(path.name, df)
        if col is None:
            return False
        df[col] = df[col].astype(object)
        df.loc[mid, col] = {"nan": None, "inf": float("inf"), "garbled": "0.5x#"}[how]
    elif how == "drop_column":
        df = df.drop(columns=df.columns[-1])
    elif how == "reorder_columns":
        df = df[df.columns[::-1]]
    df.to_csv(path, index=False)
    return True


def _verdict(folder, cid, column, numbers):
    (row,) = E.evaluate(folder, [BY_ID[cid]], numbers=numbers)
    return row.columns[column]


#: a fast subset of the table: one claim per kind of input (a grid with totals, Monte Carlo
#: rows with nullable columns, paired comparisons, a per-configuration table with summary
#: rows, per-prompt rows, a closed-form table); the whole table is marked slow
FAST = ("liu_exactness", "liu_pml_bound", "liu_pfr_dominates", "liu_drift",
        "zhou_truncation_below_sampling", "zhou_lemma1", "zhou_induced_forms")
TABLE = [c if c in FAST else pytest.param(c, marks=pytest.mark.slow)
         for c in sorted(c for c in FLIPS if not BY_ID[c].untestable)]


@pytest.mark.parametrize("claim_id", TABLE)
def test_corruption_table(tmp_path, claim_id):
    """Every CSV of the claim's holding folder × every corruption: the intact verdict or
    "not run" naming the file; reordered columns keep the intact verdict."""
    base = tmp_path / "intact"
    base.mkdir()
    got = FLIPS[claim_id](base, True)
    if isinstance(got, tuple):  # the paper's own numbers: no CSV of ours
        return
    column, numbers = got, _numbers({})
    intact = _verdict(base, claim_id, column, numbers)
    assert intact.verdict in (E.REPRODUCED, E.PROVED)
    seen = 0
    for csv in sorted(base.glob("*.csv")):
        for how in CORRUPTIONS:
            folder = tmp_path / f"{csv.stem}-{how}"
            shutil.copytree(base, folder)
            if not corrupt(folder / csv.name, how):
                continue
            seen += 1
            o = _verdict(folder, claim_id, column, numbers)
            if how == "reorder_columns":
                assert o.verdict == intact.verdict, (csv.name, how, o)
            elif o.verdict != intact.verdict:
                assert o.verdict == E.NOT_RUN and csv.name in o.numbers, (csv.name, how, o)
    assert seen >= 5


def _grid_bounds(folder):
    """A ``bounds_vs_drafts.csv`` of the study's shape: 3 pairs × B = 1..4 (the columns of
    the study; values with the study's orderings and Eq. 4 failing at B = 1)."""
    rows = []
    for i, pair in enumerate(("near", "mid", "far")):
        tv = 0.1 + 0.2 * i
        for B in (1, 2, 3, 4):
            pml = 1 - tv / (1 + 0.5 * B)
            rows.append({"pair": pair, "tv": tv, "sigma": 0.3, "n": 200, "B": B, "pml": pml,
                         "pml_weak": pml - 0.05, "lml": pml - 0.02 * (B > 1),
                         "lml_relaxed": pml - 0.06, "exact_mpfr": pml,
                         "exact_gls": pml - 0.01 * (B > 1)})
    pd.DataFrame(rows).to_csv(folder / "bounds_vs_drafts.csv", index=False)


@pytest.fixture(scope="module")
def quick_bounds(tmp_path_factory):
    from paper_figs import bounds_vs_drafts

    out = tmp_path_factory.mktemp("bounds")
    bounds_vs_drafts.main(out, quick=True)
    return out


@pytest.mark.parametrize("source", ["fabricated", pytest.param("quick", marks=pytest.mark.slow)])
@pytest.mark.parametrize("how", CORRUPTIONS)
def test_corruption_of_a_study_output(tmp_path, request, how, source):
    """A ``bounds_vs_drafts.csv`` grid of pairs × B (fabricated in the study's shape, and a
    quick run of the study, slow): each corruption gives "not run — bounds_vs_drafts.csv:
    ..." on every claim that reads it (reordered columns: the intact verdicts), including a
    dropped row, which only the grid can see."""
    ids = ("liu_pml_ge_lml", "liu_eq4", "liu_mpfr_ge_gls")
    folder = tmp_path / how
    folder.mkdir()
    if source == "quick":
        shutil.copy(request.getfixturevalue("quick_bounds") / "bounds_vs_drafts.csv", folder)
    else:
        _grid_bounds(folder)
    nums = _numbers({})
    intact = {cid: _verdict(folder, cid, E.SYNTHETIC, nums).verdict for cid in ids}
    assert intact == {"liu_pml_ge_lml": E.PROVED, "liu_eq4": E.REPRODUCED,
                      "liu_mpfr_ge_gls": E.REPRODUCED}
    assert corrupt(folder / "bounds_vs_drafts.csv", how)
    for cid in ids:
        o = _verdict(folder, cid, E.SYNTHETIC, nums)
        if how in ("reorder_columns", "drop_column"):  # the last column: exact_gls
            ok = o.verdict == intact[cid] or (o.verdict == E.NOT_RUN and "exact_gls" in
                                               o.numbers)
            assert ok, (cid, o)
        else:
            assert o.verdict == E.NOT_RUN, (cid, how, o)
            assert o.numbers.startswith("bounds_vs_drafts.csv: "), o.numbers


@pytest.mark.parametrize("text, what", [
    ("a,b\n1,2\n1,2\n", "repeated row"),
    ("a,b\n1,2\n3,", "cut short"),
    ("a,b\n1,2\n3,x\n", None),  # b is not a number of any schema: not checked
])
def test_generic_checks(tmp_path, text, what):
    (tmp_path / "unknown.csv").write_text(text)
    data = D.Data(tmp_path)
    if what is None:
        assert len(data.csv("unknown.csv")) == 2
        return
    with pytest.raises(D.BadInput, match=what):
        data.csv("unknown.csv")
    # a broken file is not silently skipped by maybe()
    with pytest.raises(D.BadInput):
        data.maybe("unknown.csv")
    assert data.maybe("absent.csv") is None


def test_nan_is_allowed_only_where_the_schema_says(tmp_path):
    """real_bounds: the exponential race is NaN where B ≥ 2 (not computed), never at B = 1;
    a standard error over one prompt may be NaN (small_nan), over two it may not."""
    ok = pd.DataFrame({"draft": ["d"] * 2, "position": [0, 0], "B": [1, 2], "tv": [0.3, 0.3],
                       "exp_race": [0.6, float("nan")]})
    D.check("real_bounds.csv", ok, b"x\n")
    bad = ok.assign(exp_race=[float("nan"), 0.6])
    with pytest.raises(D.BadInput, match="exp_race: a missing number"):
        D.check("real_bounds.csv", bad, b"x\n")
    fr = pd.DataFrame({"decoder": ["pfr"], "L": [1], "aatps": [2.0], "aatps_se": [float("nan")],
                       "n_prompts": [1]})
    D.check("real_wm_frontier.csv", fr, b"x\n")
    with pytest.raises(D.BadInput, match="aatps_se"):
        D.check("real_wm_frontier.csv", fr.assign(n_prompts=[2]), b"x\n")
    with pytest.raises(D.BadInput, match="an infinity"):
        D.check("real_wm_frontier.csv", fr.assign(aatps=[float("inf")]), b"x\n")
    # fidelity_entropy: the package's default model has no target entropy (NaN, as the
    # study writes it); a calibrated family always has one
    fe = pd.DataFrame({"section": ["drift", "single"], "decoder": ["mse", "exp_race/sd"],
                       "family": ["calibrated", "default SyntheticLM"], "metric": ["m", "m"],
                       "drafter": ["D1-D2", "D0"], "entropy_target": [0.47, float("nan")],
                       "mean": [0.1, 0.2], "L": [4, 4], "B": [1, 1], "se": [0.01, 0.01]})
    D.check("fidelity_entropy.csv", fe, b"x\n")
    with pytest.raises(D.BadInput, match="entropy_target: a missing number"):
        D.check("fidelity_entropy.csv", fe.assign(entropy_target=[float("nan"), 1.0]),
                b"x\n")


def test_index_time_csvs_are_redone_when_their_inputs_change(tmp_path):
    """An INDEX-time CSV is computed where missing, again where the signature of its inputs
    changed (or none was recorded), and read as it is where nothing changed; in a folder
    without the study it belongs to it is missing (or read as written, fabricated)."""
    calls = []

    def produce():
        calls.append(1)
        D.write_csv(tmp_path / "claims_x.csv", pd.DataFrame({"a": [len(calls)]}))

    with pytest.raises(D.MissingData, match="computed where bounds_vs_drafts has run"):
        D.refresh(tmp_path, "claims_x.csv", "s1", produce, "bounds_vs_drafts.csv")
    (tmp_path / "claims_x.csv").write_text("a\n0\n")
    D.refresh(tmp_path, "claims_x.csv", "s1", produce, "bounds_vs_drafts.csv")
    assert calls == []  # fabricated, no study: read as written
    (tmp_path / "bounds_vs_drafts.csv").write_text("pair,B\nx,1\n")
    D.refresh(tmp_path, "claims_x.csv", "s1", produce, "bounds_vs_drafts.csv")
    assert len(calls) == 1  # no signature recorded: redone
    D.refresh(tmp_path, "claims_x.csv", "s1", produce, "bounds_vs_drafts.csv")
    assert len(calls) == 1
    D.refresh(tmp_path, "claims_x.csv", "s2", produce, "bounds_vs_drafts.csv")
    assert len(calls) == 2 and pd.read_csv(tmp_path / "claims_x.csv")["a"].iloc[0] == 2
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp")]
    from paper_figs.claims import exactness

    assert D.code_signature(exactness, "a") != D.code_signature(exactness, "b")


def test_a_claim_stated_for_several_drafts_leaves_out_B1(tmp_path):
    """A custom run with ``--B 1,3,6``: the B = 1 row (single-draft decoding) never counts
    toward a sentence stated for B ≥ 2, and the row says what was left out."""
    from tests.test_claims_flip import _cmp

    def folder(name, b1_diff):
        f = tmp_path / name
        f.mkdir()
        rows = [_cmp("mpfr-invariant", "anlppt_u", 0.5, 0.01, a=0.1, B=B, L=4) for B in (3, 6)]
        rows.append(_cmp("mpfr-invariant", "anlppt_u", b1_diff, 0.01, a=0.1, B=1, L=4))
        pd.DataFrame(rows).to_csv(f / "wm_multidraft_scaling_comparisons.csv", index=False)
        (row,) = E.evaluate(f, [BY_ID["liu_mpfr_anlppt"]], numbers=_numbers({}))
        return row.columns[E.SYNTHETIC]

    for name, d in (("b1_fails", -0.5), ("b1_holds", 0.5)):
        o = folder(name, d)
        assert o.verdict == E.REPRODUCED, o
        assert "left out B = 1" in o.sample
        assert all("B=1" != p.label for p in o.parts)
