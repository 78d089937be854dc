"""Data access of the claims engine: the CSVs of one output folder, each checked against its
schema before any claim reads it.

A claim of the INDEX -- a sentence of Liu, Wan, Gao & Gündüz (2026), arXiv:2609.21858, or
Zhou et al. (2026), arXiv:2607.26627 -- is judged on numbers a study wrote.  A file that is
present but broken (cut short, a row dropped or repeated, a NaN or an infinity where a number
is needed, a garbled cell, a missing column) must not be judged: :meth:`Data.csv` raises
:class:`BadInput` and the evidence column reads "not run — <file>: <what is wrong>".

:class:`Schema` states, per file: its text columns (labels), its numeric columns (names or
regular expressions; checked where present: parsable, finite), the numeric columns where NaN
means "not computed here" (``nullable``) or is allowed only on rows of fewer than two units
(``small_nan``: a standard error over one prompt), the columns where an infinity is a value
(``nonfinite``: a z with a zero standard error), the columns that identify a row (``keys``:
no two rows share them) and the grid the rows fill (``grid``: within each group of ``by``
every combination of the grid's axes is present once).  Every file has one; a file without
one gets the checks every file gets (cut short, repeated rows).
"""

from __future__ import annotations

import hashlib
import inspect
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd


class MissingData(Exception):
    """An output file, or rows/columns an evidence column needs, are absent: not run."""


class BadInput(MissingData):
    """A file is present but fails its schema: not run, naming the file and the fault."""


@dataclass(frozen=True)
class Schema:
    """What a CSV of an output folder must satisfy (see the module docstring)."""

    text: tuple[str, ...] = ()
    numeric: tuple[str, ...] = ()
    nullable: tuple[str, ...] = ()
    small_nan: tuple[str, ...] = ()
    small_by: str = "n_prompts"
    #: (column pattern, column, value): NaN allowed only on rows where ``column != value``
    #: (a number, or a text compared as text)
    nan_unless: tuple[tuple[str, str, float | str], ...] = ()
    nonfinite: tuple[str, ...] = ()
    keys: tuple[str, ...] = ()
    by: tuple[str, ...] = ()
    grid: tuple[tuple[str, ...], ...] = ()
    #: the grid axes (indices into ``grid``) whose values every group shares (None: all; a
    #: truncation's thresholds differ from another's)
    across: tuple[int, ...] | None = None
    #: (column, total): within each group of ``by`` the column sums to ``total`` (a number,
    #: or the name of a column constant in the group), relative tolerance 1e-6
    totals: tuple[tuple[str, object], ...] = ()


def _match(col: str, patterns: Iterable[str]) -> bool:
    return any(col == p or re.fullmatch(p, col) for p in patterns)


_CMP_TEXT = ("comparison", "metric", "a", "b", "variant", "score", "method", "detector",
             "step", "row_type", "decoder", "draft")
_CMP_NUM = ("value_a", "value_b", "diff", "diff_se", "n_prompts", "L", "B", "T_eval")
#: the comparisons of the synthetic watermark studies (one row per compared pair and setting)
COMPARISONS = Schema(text=_CMP_TEXT, numeric=_CMP_NUM, nonfinite=("z",),
                     small_nan=("diff_se",))
_WM_TEXT = ("decoder", "variant", "draft", "detector", "score", "method", "row_type",
            "prompt_set", "setting_target", "reading")
_WM_NUM = ("L", "B", "T_eval", "n_prompts", "n_sequences", "aatps", "anlppt_u", "lppl", "tpr",
           "fpr", "rouge_l_minpair", r"(aatps|anlppt_u|lppl|tpr|rouge_l_minpair)_se",
           r"tpr_drift_T\d+", r"tpr_T\d+", "T", "temperature", "entropy")
_WM_SMALL = (r"(aatps|anlppt_u|lppl|tpr|rouge_l_minpair)_se", r"tpr_drift_T\d+_se",
             r"tpr_T\d+_se")
#: a per-configuration table of a watermark study (synthetic or real model)
WATERMARK = Schema(text=_WM_TEXT, numeric=_WM_NUM + _WM_SMALL, small_nan=_WM_SMALL)
#: the per-drafter rows of a drafter-substitution table carry no drift (NaN there)
SUBSTITUTION = Schema(text=_WM_TEXT, numeric=_WM_NUM + _WM_SMALL + ("identical_fraction",),
                      nullable=(r"tpr_drift_T\d+(_se)?", "rouge_l_minpair", "identical_fraction",
                                "rouge_l_minpair_se", r"tpr_T\d+(_se)?", "aatps", "aatps_se",
                                "anlppt_u", "anlppt_u_se"),
                      small_nan=_WM_SMALL)
_LOSSY_TEXT = ("family", "rule", "param_name", "draft", "truncation", "section", "reading",
               "metric", "decoder", "pair")

SCHEMAS: dict[str, Schema] = {
    "bounds_vs_drafts.csv": Schema(
        text=("pair",), numeric=("tv", "B", "pml", "pml_weak", "lml", "lml_relaxed",
                                 "exact_mpfr", "exact_gls", "exp_race"),
        keys=("pair", "B"), by=("pair",), grid=(("B",),)),
    "real_bounds.csv": Schema(
        text=("draft", "context"), numeric=("B", "tv", "mpfr", "pml", "pml_weak", "lml",
                                            "lml_relaxed", "gls", "exp_race", "sd", "mc_n",
                                            r"mc_(mpfr|gls|exp_race|sd)"),
        nullable=("mc_n", r"mc_(mpfr|gls|exp_race|sd)"),
        nan_unless=(("sd", "B", 1), ("exp_race", "B", 1)), keys=("draft", "position", "B")),
    "wm_single_draft_frontier.csv": WATERMARK,
    "wm_multidraft_scaling.csv": WATERMARK,
    "wm_detection.csv": WATERMARK,
    "wm_drafter_substitution.csv": SUBSTITUTION,
    "real_wm_frontier.csv": WATERMARK,
    "real_wm_scaling.csv": WATERMARK,
    "real_wm_detection.csv": WATERMARK,
    "real_wm_substitution.csv": SUBSTITUTION,
    "real_wm_rouge.csv": Schema(text=_WM_TEXT, numeric=("T", "n_prompts", "rouge_l_minpair",
                                                        "temperature", "entropy"),
                                nullable=("temperature", "entropy"),
                                small_nan=("rouge_l_minpair_se",)),
    "wm_single_draft_frontier_comparisons.csv": COMPARISONS,
    "wm_multidraft_scaling_comparisons.csv": COMPARISONS,
    "wm_detection_comparisons.csv": COMPARISONS,
    "wm_detection_acceptance_comparisons.csv": COMPARISONS,
    "real_runs.csv": Schema(text=("decoder", "draft", "prompt_set"),
                            numeric=("L", "B", "prompt_index", "aatps")),
    # the n-gram study's summaries (the columns written today; a column added later is read
    # by no claim until its schema names it)
    "real_ngram.csv": Schema(
        text=("config", "decoder", "draft", "prompt_type"),
        numeric=("B", "n_prompts", "n_blocks", "aatps", "predicted_aatps",
                 "target_forwards_per_token", "tokens_per_cpu_second"),
        nullable=("predicted_aatps",),  # a decoder without a per-context scheme: NaN
        keys=("config", "prompt_type")),
    "real_ngram_keyed.csv": Schema(
        text=("config", "reference"),
        numeric=("same_tokens", "n_prompts", "log10_p_median", "log10_p_max"),
        keys=("config",)),
    "real_crosscheck.csv": Schema(text=("decoder", "setting_target"),
                                  numeric=("aatps", "predicted_aatps", "diff", "n_prompts",
                                           "n_blocks", "setting_max_new_tokens"),
                                  small_nan=("diff_se",)),
    # the package's default model (family "default SyntheticLM") has no target entropy
    "fidelity_entropy.csv": Schema(text=("section", "family", "decoder", "metric", "drafter"),
                                   numeric=("entropy_target", "mean", "L", "B"),
                                   nan_unless=(("entropy_target", "family", "calibrated"),),
                                   small_nan=("se",)),
    "lemma1_study.csv": Schema(
        text=_LOSSY_TEXT, numeric=("family_param", "tv", "param", "gain", "loss", "net",
                                   "direct", "frac_positive"),
        keys=("family", "family_param", "pair", "draft", "truncation", "param"),
        by=("truncation",), grid=(("family", "family_param", "pair", "draft"), ("param",)),
        across=(0,)),
    "real_lossy_lemma1.csv": Schema(text=_LOSSY_TEXT, numeric=("param", "net",
                                                               "frac_positive")),
    "fidelity_lossy.csv": Schema(text=_LOSSY_TEXT, numeric=("param", "mean"),
                                 nullable=("param",), small_nan=("se",)),
    "theorem1_study.csv": Schema(
        text=("truncation",), numeric=("t", "kl_sd", "kl_tree_D1", "kl_tree_D4"),
        nullable=(r"mc_kl_(sd|tree_D1)",), keys=("pair", "truncation", "t"),
        by=("pair", "truncation"), grid=(("t",),)),
    "lossy_gallery.csv": Schema(
        text=("rule",), numeric=("token", "induced", "empirical", "n_samples"),
        keys=("rule", "token"), by=("rule",), grid=(("token",),),
        totals=(("induced", 1.0), ("empirical", 1.0))),
    "lenience_study.csv": Schema(
        numeric=("ell", "tv", "delta"), nullable=("mc_delta", "mc_se", "n_mc"),
        keys=("ell", "direction", "tv_target"), by=("ell",),
        grid=(("direction", "tv_target"),)),
    "lenience_study_ceiling.csv": Schema(numeric=("token", "p", "ceiling", "lenience"),
                                         keys=("token",)),
    "lenience_study_curves.csv": Schema(
        numeric=("ell", "tv_mean", "delta_mean"), keys=("ell", "tv_target"), by=("ell",),
        grid=(("tv_target",),)),
    "prop1_study.csv": Schema(
        text=("truncation",), numeric=("be_truncation", "be_lossless"),
        keys=("zipf_s", "D", "truncation", "param", "L")),
    "efficiency_frontier.csv": Schema(text=_LOSSY_TEXT, numeric=("param", "acceptance", "kl"),
                                      keys=("family", "rule", "param")),
    "real_lossy.csv": Schema(text=_LOSSY_TEXT, numeric=("param", "acceptance", "kl"),
                             nonfinite=("kl",), keys=("draft", "rule", "param")),
    "claims_exactness.csv": Schema(
        text=("pair", "scheme"), numeric=("B", "token", "p", "count", "n"),
        keys=("pair", "scheme", "B", "token"), by=("pair", "scheme", "B"),
        grid=(("token",),), totals=(("count", "n"), ("p", 1.0))),
    "claims_sequence_exactness.csv": Schema(
        text=("scheme",), numeric=("B", "w1", "w2", "p", "count", "n"),
        keys=("scheme", "B", "w1", "w2"), by=("scheme", "B"), grid=(("w1", "w2"),),
        totals=(("count", "n"), ("p", 1.0))),
    "claims_score_bound.csv": Schema(numeric=("entropy", "closed_form", "mc_mean", "mc_se",
                                              "bound", "n")),
    "claims_nonidentical.csv": Schema(numeric=("case", "B", "bound", "mc_accept", "mc_blocks",
                                               "n"), keys=("case",)),
    "claims_active_set.csv": Schema(numeric=("context", "J", "steps", "mc_accept", "bound",
                                             "pml"), keys=("context", "J")),
    "claims_active_set_gls.csv": Schema(numeric=("vocab", "J", "gls", "bound"),
                                        keys=("pair", "J")),
    "claims_truncation_embedded.csv": Schema(
        text=("draft",), numeric=("p_base", "prompt_id", "position", "logp_verification",
                                  "logp_truncation_sampling", "kl_to_truncated",
                                  "kl_verification_to_target", "kl_sampling_to_target"),
        keys=("draft", "p_base", "prompt_id", "position")),
    "claims_thm1_path.csv": Schema(
        text=("draft", "truncation"), numeric=("t", "contexts", "multi", "kl_sd_mean",
                                               "kl_tree_mean", "kl_tree_min", "sd_below_tree"),
        keys=("draft", "truncation", "t")),
    "claims_prop1_paths.csv": Schema(
        text=("draft", "truncation"), numeric=("D", "prompt_id", "start", "walks",
                                               "be_lossless", "mc_lossless", "be_truncation",
                                               "mc_truncation"),
        keys=("draft", "truncation", "D", "prompt_id", "start")),
    "claims_collaborative_embedded.csv": Schema(
        text=("draft", "rule"), numeric=("param", "prompt_id", "position", "acceptance",
                                         "hellinger"),
        nullable=("acceptance",),  # Table 1's two rows have no acceptance of their own
        keys=("draft", "rule", "param", "prompt_id", "position")),
}
#: every file gets these checks (cut short, repeated rows) even without a schema of its own
DEFAULT = Schema()


def _row(i) -> str:
    return f"row {int(i) + 2}"  # the file's line number (header on line 1)


def check(name: str, df: pd.DataFrame, raw: bytes, schema: Schema | None = None) -> None:
    """Raise :class:`BadInput` naming ``name`` and the first fault of ``df`` (read from the
    bytes ``raw``) against ``schema`` (default: the file's in :data:`SCHEMAS`)."""
    s = SCHEMAS.get(name, DEFAULT) if schema is None else schema

    def bad(what: str):
        raise BadInput(f"{name}: {what}")

    if raw and not raw.endswith(b"\n"):
        bad("cut short (the last line has no end)")
    if df.empty:
        bad("no rows")
    if len(set(df.columns)) != len(df.columns) or any(str(c).startswith("Unnamed")
                                                      for c in df.columns):
        bad("a column without a name or a repeated column name")
    for col in df.columns:
        if _match(col, s.text) or not _match(col, s.numeric):
            continue
        x = df[col]
        if x.dtype == bool:
            continue
        if not pd.api.types.is_numeric_dtype(x):
            num = pd.to_numeric(x, errors="coerce")
            garbled = x.notna() & num.isna()
            i = garbled.to_numpy().nonzero()[0]
            if i.size:
                bad(f"column {col}: garbled cell {str(x.iloc[i[0]])!r} in {_row(i[0])}")
            x = num
        v = x.to_numpy(dtype=float)
        if _match(col, s.nonfinite):
            continue
        inf = np.isinf(v).nonzero()[0]
        if inf.size:
            bad(f"column {col}: an infinity in {_row(inf[0])}")
        nan = np.isnan(v)
        if _match(col, s.nullable):
            continue
        if _match(col, s.small_nan) and s.small_by in df.columns:
            units = pd.to_numeric(df[s.small_by], errors="coerce").to_numpy(dtype=float)
            nan &= ~(units < 2)
        for pat, c, val in s.nan_unless:
            if _match(col, (pat,)) and c in df.columns:
                at = df[c].astype(str) == val if isinstance(val, str) else \
                    pd.to_numeric(df[c], errors="coerce") == val
                nan &= at.to_numpy()
        i = nan.nonzero()[0]
        if i.size:
            bad(f"column {col}: a missing number (NaN) in {_row(i[0])}")
    dup = df.duplicated(keep=False).to_numpy().nonzero()[0]
    if dup.size:
        bad(f"a repeated row ({_row(dup[0])} and {_row(dup[1])})")
    # keys and grid where the file has all their columns (a fabricated or older file may
    # carry fewer; a column a claim needs is asked for by the claim itself)
    keys = list(s.keys) if set(s.keys) <= set(df.columns) else []
    if keys:
        d = df.duplicated(subset=keys, keep=False).to_numpy().nonzero()[0]
        if d.size:
            bad(f"two rows with the same {', '.join(keys)} ({_row(d[0])} and {_row(d[1])})")
    axes = [list(ax) for ax in s.grid]
    if axes and set(s.by).union(*axes) <= set(df.columns):
        by = list(s.by)
        groups = df.groupby(by, sort=False, dropna=False) if by else [((), df)]
        first = None
        for g, sub in groups:
            key = g if isinstance(g, tuple) else (g,)
            where = f" at {dict(zip(by, key, strict=True))}" if by else ""
            want = math.prod(len(sub.drop_duplicates(ax)) for ax in axes)
            cells = [set(map(tuple, sub[ax].astype(str).to_numpy())) for ax in axes]
            shared = range(len(axes)) if s.across is None else s.across
            if len(sub) != want or (first is not None
                                    and any(cells[i] != first[i] for i in shared)):
                full = [first[i] if first is not None and i in shared else cells[i]
                        for i in range(len(axes))]
                bad(f"incomplete grid{where}: {len(sub)} rows where the "
                    f"{' × '.join('/'.join(ax) for ax in axes)} grid of the file implies "
                    f"{math.prod(len(c) for c in full)}")
            first = cells if first is None else first
    if s.totals and set(s.by) <= set(df.columns):
        by = list(s.by)
        groups = df.groupby(by, sort=False, dropna=False) if by else [((), df)]
        for g, sub in groups:
            for col, total in s.totals:
                if col not in sub or (isinstance(total, str) and total not in sub):
                    continue
                want = float(sub[total].iloc[0]) if isinstance(total, str) else float(total)
                got = float(pd.to_numeric(sub[col], errors="coerce").sum())
                if not math.isclose(got, want, rel_tol=1e-6, abs_tol=1e-9):
                    key = g if isinstance(g, tuple) else (g,)
                    where = f" at {dict(zip(by, key, strict=True))}" if by else ""
                    bad(f"column {col} sums to {got:.6g}{where}, not {want:.6g} (a row "
                        "missing or repeated)")


@dataclass
class Data:
    """The CSVs of one output folder, each read once and checked against its schema."""

    out_dir: Path
    _cache: dict = field(default_factory=dict)
    #: the files asked for, in order (named where a claim fails on one of them)
    reads: list = field(default_factory=list)

    def csv(self, name: str, columns: Iterable[str] = ()) -> pd.DataFrame:
        if name not in self._cache:
            path = Path(self.out_dir) / name
            if not path.is_file():
                raise MissingData(f"{name} is missing")
            raw = path.read_bytes()
            try:
                df = pd.read_csv(path)
            except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError) as exc:
                self._cache[name] = BadInput(f"{name}: unreadable ({exc})")
            else:
                try:
                    check(name, df, raw)
                    df.attrs["file"] = name
                    self._cache[name] = df
                except BadInput as exc:
                    self._cache[name] = exc
        got = self._cache[name]
        if name not in self.reads:
            self.reads.append(name)
        if isinstance(got, BadInput):
            raise BadInput(str(got))
        missing = [c for c in columns if c not in got.columns]
        if missing:
            raise MissingData(f"{name} lacks the columns {missing}")
        return got

    def maybe(self, name: str, columns: Iterable[str] = ()) -> pd.DataFrame | None:
        """The file, or None where it is absent; a file present but broken is not silently
        skipped (:class:`BadInput` propagates)."""
        try:
            return self.csv(name, columns)
        except BadInput:
            if (Path(self.out_dir) / name).is_file():
                raise
            return None
        except MissingData:
            return None


def rows(df: pd.DataFrame, what: str, **eq) -> pd.DataFrame:
    """The rows of ``df`` with the given column values; none is :class:`MissingData`."""
    sel = df
    for col, val in eq.items():
        if col not in sel:
            raise MissingData(f"no column {col} for {what}")
        sel = sel[sel[col] == val]
    if sel.empty:
        name = df.attrs.get("file")
        raise MissingData(f"{name}: no rows for {what}" if name else f"no rows for {what}")
    return sel


# -------------------------------------------------------------------- INDEX-time CSVs


def signature(*parts) -> str:
    """A short hash of ``parts`` (their ``repr``): what an INDEX-time CSV was computed from."""
    return hashlib.blake2b(repr(parts).encode(), digest_size=8).hexdigest()


def code_signature(module, *inputs) -> str:
    """The signature of an INDEX-time CSV computed by ``module``: its source (constants,
    seeds, the producer's code), the package's version and the ``inputs`` (e.g. the bytes
    of the study output it is computed from)."""
    import specbound

    return signature(inspect.getsource(module), specbound.__version__, *inputs)


def _sig_path(out_dir, name: str) -> Path:
    return Path(out_dir) / f".{name}.signature"


def write_csv(path, df: pd.DataFrame, **kw) -> Path:
    """Write ``df`` to ``path`` atomically (a reader never sees half a file)."""
    from specbound._io import atomic_write

    path = Path(path)
    atomic_write(path, df.to_csv(index=False, **kw).encode())
    return path


def refresh(out_dir, name: str, sig: str, produce: Callable, requires: str) -> None:
    """(Re)compute the INDEX-time CSV ``name`` with ``produce()`` where it is missing or
    was computed from other inputs (its recorded signature is not ``sig``); only in a
    folder where ``requires`` (the study output it belongs to) exists, else
    :class:`MissingData`.  The CSV is written before its signature, both atomically, so an
    interrupted computation is redone."""
    from specbound._io import atomic_write

    out_dir = Path(out_dir)
    path, sp = out_dir / name, _sig_path(out_dir, name)
    if path.is_file() and sp.is_file() and sp.read_text().strip() == sig:
        return
    if not (out_dir / requires).is_file():
        if path.is_file() and not sp.is_file():
            return  # a file written by hand or by an older version: read as it is
        raise MissingData(f"{name} is missing (computed where {requires.removesuffix('.csv')} "
                          "has run)")
    produce()
    atomic_write(sp, (sig + "\n").encode())


def refresh_from_log(out_dir, name: str, module, produce: Callable) -> None:
    """:func:`refresh` for a CSV computed from the real model's log of the run: its inputs'
    signature includes ``real_lossy.csv`` (written once the run's log is in place, so a new
    log gives a new signature); ``produce(out_dir, log)``."""
    from paper_figs._real_log import index_log

    out_dir = Path(out_dir)
    lossy = out_dir / "real_lossy.csv"
    sig = code_signature(module, lossy.read_bytes() if lossy.is_file() else b"")
    refresh(out_dir, name, sig, lambda: produce(out_dir, index_log(out_dir)), lossy.name)
