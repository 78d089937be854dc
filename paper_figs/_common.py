"""Helpers shared by the figure scripts: the command line of every study, style, output
paths, executor.

Command line (:func:`cli`): every figure script declares its grid and sizes as a table of
:class:`Param` (name, type, full-mode default, quick-mode default, help) in ``PARAMS``; the
table gives both the flags of ``python -m paper_figs.NAME`` (listed with their defaults by
``--help``) and the keywords of its ``main(out_dir, quick=False, **params)``
(:func:`resolve_params`).  A run with the defaults writes to ``paper_figs/out/`` (full) or
``paper_figs/out-quick/`` (``--quick``); a run with other values to
``paper_figs/out-custom/NAME-HASH/`` (HASH: a short hash of the mode and the values that
differ from the defaults), unless ``--out`` is given.  Each run records its wall time, its
mode and its non-default values (JSON, column ``params``) in that folder's ``timings.csv``
(:func:`paper_figs.run_all.record_timing`), as ``paper_figs.run_all`` does.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
#: output folder of a full run with the default parameters
OUT_DIR = HERE / "out"
#: output folder of a quick (smoke) run with the default parameters
OUT_QUICK_DIR = HERE / "out-quick"
#: parent of the output folders of runs with non-default parameters
OUT_CUSTOM_DIR = HERE / "out-custom"

#: environment variable naming the executor of every sweep (``specbound.sweep.open_executor``)
EXECUTOR_ENV = "SPECBOUND_EXECUTOR"


def default_out_dir(quick: bool) -> Path:
    """``paper_figs/out-quick/`` for a quick run, ``paper_figs/out/`` for a full one."""
    return OUT_QUICK_DIR if quick else OUT_DIR


# ------------------------------------------------------------------ study parameters

_SCALARS = {"int": int, "float": float, "str": str}


@dataclass(frozen=True)
class Param:
    """One parameter of a study: keyword ``name`` of its ``main`` and flag ``--name`` (``_``
    written ``-``); ``kind`` one of ``"int"``, ``"float"``, ``"str"``, ``"path"`` or a
    comma-separated list of them, ``"ints"``, ``"floats"``, ``"strs"`` (a tuple in Python);
    ``full`` and ``quick`` its defaults in full and quick mode; ``low`` the smallest value
    admitted (every element of a list); ``choices`` the admitted values of a ``str``; a
    default of None means "the study's own choice" (e.g. the shipped log)."""

    name: str
    kind: str
    full: Any
    quick: Any
    help: str
    low: float | None = None
    choices: tuple | None = None

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def default(self, quick: bool):
        return self.quick if quick else self.full

    def convert(self, value):
        """``value`` (a Python value or the text of a flag) in this parameter's type; a
        ``ValueError`` naming the parameter when it is not one."""
        if value is None:
            return None
        if self.kind == "path":
            return Path(value)
        many = self.kind.endswith("s") and self.kind[:-1] in _SCALARS
        typ = _SCALARS[self.kind[:-1] if many else self.kind]
        if many:
            items = ([v.strip() for v in value.split(",") if v.strip()]
                     if isinstance(value, str) else list(value))
            if not items:
                raise ValueError(f"{self.name}: must be a non-empty list, got {value!r}")
            out = tuple(self._one(typ, v) for v in items)
        else:
            out = self._one(typ, value)
        return out

    def _one(self, typ, v):
        try:
            if typ is int and isinstance(v, float) and not float(v).is_integer():
                raise ValueError
            if typ is not str and isinstance(v, bool):
                raise ValueError
            x = typ(v)
        except (TypeError, ValueError):
            raise ValueError(f"{self.name}: expected {typ.__name__}, got {v!r}") from None
        if self.low is not None and x < self.low:
            raise ValueError(f"{self.name}: must be >= {self.low}, got {v!r}")
        if self.choices is not None and x not in self.choices:
            raise ValueError(f"{self.name}: must be one of {list(self.choices)}, got {v!r}")
        return x

    def show(self, value) -> str:
        """``value`` as ``--help`` shows it (floats to 6 significant digits)."""
        if isinstance(value, tuple):
            return ",".join(self.show(v) for v in value)
        if isinstance(value, float):
            return f"{value:.6g}"
        return str(value)


class Values(dict):
    """A study's parameter values (a dict with attribute access); ``changed`` holds those
    that differ from the mode's defaults (JSON-ready), empty for a default run."""

    changed: dict

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def _jsonable(v):
    if isinstance(v, tuple):
        return [_jsonable(x) for x in v]
    if isinstance(v, Path):
        return str(v)
    return v


def resolve_params(table, quick: bool, given: dict | None = None) -> Values:
    """The values of every parameter of ``table`` in mode ``quick``: those of ``given``
    (None: the default) converted and checked, the mode's defaults for the others.  An
    unknown name is a ``ValueError`` naming it."""
    given = dict(given or {})
    by = {p.name: p for p in table}
    unknown = sorted(set(given) - set(by))
    if unknown:
        raise ValueError(f"{unknown[0]}: not a parameter of this study "
                         f"(parameters: {', '.join(by) or 'none'})")
    out = Values()
    out.changed = {}
    for p in table:
        default = p.default(quick)
        v = given.get(p.name)
        v = default if v is None else p.convert(v)
        out[p.name] = v
        if v != default:
            out.changed[p.name] = _jsonable(v)
    return out


def params_json(changed: dict) -> str:
    """The ``params`` column of ``timings.csv``: JSON of the non-default values, "" if none."""
    return json.dumps(changed, sort_keys=True) if changed else ""


def custom_out_dir(name: str, quick: bool, changed: dict) -> Path:
    """``paper_figs/out-custom/NAME-HASH/`` of a run with non-default values ``changed``."""
    blob = json.dumps({"quick": bool(quick), **changed}, sort_keys=True)
    return OUT_CUSTOM_DIR / f"{name}-{hashlib.blake2b(blob.encode(), digest_size=4).hexdigest()}"


def build_parser(description: str, table=(), prog: str | None = None
                 ) -> argparse.ArgumentParser:
    """The parser of a figure script: ``--quick``, ``--out``, ``--executor`` and one flag per
    parameter of ``table`` (its help shows the full and quick defaults)."""
    ap = argparse.ArgumentParser(prog=prog, description=description)
    ap.add_argument("--quick", action="store_true",
                    help="small smoke-test version (default output folder paper_figs/out-quick/)")
    ap.add_argument("--out", type=Path, default=None, metavar="DIR",
                    help="output folder (default: paper_figs/out/, paper_figs/out-quick/ with "
                         "--quick, paper_figs/out-custom/NAME-HASH/ with non-default "
                         "parameters)")
    ap.add_argument(
        "--executor", default=os.environ.get(EXECUTOR_ENV) or None, metavar="SPEC",
        help="where the sweeps run: 'serial', 'process[:N]', 'dask://host:port' (a Dask "
             "scheduler; extra 'dist') or 'dask-local[:N]'; default: $SPECBOUND_EXECUTOR, "
             "else each study's own (a 2-process pool in full mode)")
    if table:
        group = ap.add_argument_group("study parameters")
        for p in table:
            meta = {"ints": "N,N,...", "floats": "X,X,...", "strs": "S,S,...", "int": "N",
                    "float": "X", "str": "S", "path": "DIR"}[p.kind]
            if p.full == p.quick:
                dflt = f"default: {p.show(p.full)}"
            else:
                dflt = f"default: {p.show(p.full)}; with --quick: {p.show(p.quick)}"
            group.add_argument(p.flag, dest=p.name, metavar=meta, default=None,
                               help=f"{p.help} ({dflt})".replace("%", "%%"))
    return ap


def parse_args(description: str, argv=None, table=()) -> argparse.Namespace:
    """Parse the command line of a figure script (or of ``paper_figs.run_all``)."""
    return build_parser(description, table).parse_args(argv)


def cli(main, doc: str, params=(), name: str | None = None, argv=None) -> Path:
    """Command-line entry of a figure script: ``python -m paper_figs.NAME [--quick]
    [--out DIR] [--executor SPEC] [--PARAM VALUE ...]`` (module docstring).  Runs
    ``main(out, quick=..., **params)`` with the executor, prints the files written and records
    the run in ``OUT/timings.csv``; when ``OUT`` already holds an ``INDEX.md``, it is written
    again (the verdicts and the run's mode follow the new outputs); returns the output
    folder."""
    import sys

    from paper_figs.run_all import record_timing

    name = name or getattr(main, "__module__", "study").rsplit(".", 1)[-1]
    ap = build_parser(doc.splitlines()[0], params, prog=f"python -m paper_figs.{name}")
    args = ap.parse_args(argv)
    given = {p.name: getattr(args, p.name) for p in params
             if getattr(args, p.name) is not None}
    try:
        values = resolve_params(params, args.quick, given)
    except ValueError as e:
        ap.error(str(e))
    out = args.out
    if out is None:
        out = (custom_out_dir(name, args.quick, values.changed) if values.changed
               else default_out_dir(args.quick))
    t0 = time.perf_counter()
    with sweep_executor(args.executor), smoke_mark(args.quick):
        written = main(out, quick=args.quick, **given)
    for path in written or []:
        print(path)
    path = record_timing(out, name, time.perf_counter() - t0, args.quick,
                         params=params_json(values.changed))
    print(f"[{name}] timing recorded in {path}", file=sys.stderr)
    from paper_figs.index import INDEX, write_index

    if (Path(out) / INDEX).exists():  # a folder with a verdict: keep it (and its mode) current
        index_path, _ = write_index(out)
        print(f"[{name}] {index_path} updated", file=sys.stderr)
    return out


@contextlib.contextmanager
def sweep_executor(spec):
    """Open the executor named by ``spec`` and make it every sweep's (nothing if ``spec`` is
    None): :func:`specbound.sweep.open_executor` + :func:`specbound.sweep.use_executor`."""
    if not spec:
        yield None
        return
    from specbound.sweep import open_executor, use_executor

    with open_executor(spec) as ex, use_executor(ex):
        yield ex


#: one colour and marker per decoder of ``specbound.sim.DECODERS``, used by every figure
DECODER_STYLE = {
    "ar": ("tab:brown", "."),
    "basic_uwm": ("black", "*"),
    "vsps": ("tab:gray", "o"),
    "pfr_nowm": ("tab:cyan", "v"),
    "pfr": ("tab:red", "s"),
    "mws": ("tab:purple", "D"),
    "mpfr": ("tab:orange", "X"),
    "invariant": ("tab:blue", "o"),
    "specinfer": ("tab:pink", "h"),
    "mse": ("tab:green", "^"),
    "mse_pseudo": ("tab:olive", "P"),
}

#: one colour per verification rule of ``specbound.theory.RULES`` (lossless is black), and
#: per truncation set where a figure separates them
RULE_COLORS = {
    "lossless": "black",
    "interpolation": "#1f77b4",
    "lenience": "#ff7f0e",
    "ceiling": "#2ca02c",
    "judge": "#d62728",
    "fuzzy": "#9467bd",
    "truncation": "#8c564b",
    "truncation:min-p": "#8c564b",
    "truncation:eta": "#e377c2",
    "truncation_ceiling": "#7f7f7f",
    "contrastive": "#bcbd22",
}

#: the bounds of Liu et al. (2026) take the colour of the decoder whose acceptance they bound
BOUND_COLORS = {
    "pml": DECODER_STYLE["mpfr"][0],
    "exact_mpfr": DECODER_STYLE["mpfr"][0],
    "pml_weak": "#8c564b",
    "exact_gls": DECODER_STYLE["invariant"][0],
    "lml": DECODER_STYLE["invariant"][0],
    "lml_relaxed": "#17becf",
}


def decoder_color(decoder: str) -> str:
    """The colour of ``decoder`` in every figure."""
    return DECODER_STYLE[decoder][0]


def decoder_marker(decoder: str) -> str:
    """The marker of ``decoder`` in every figure."""
    return DECODER_STYLE[decoder][1]


#: figure labels (by prefix) of the rules, for scripts that label rows by a readable name
RULE_LABEL_PREFIXES = (
    ("lossless", "lossless"), ("interpolation", "interpolation"), ("CoS", "interpolation"),
    ("lenience", "lenience"), ("ceiling", "ceiling"), ("overshoot ceiling", "ceiling"),
    ("judge", "judge"), ("Fuzzy", "fuzzy"), ("SpecCascade", "truncation:min-p"),
    ("typical", "truncation:eta"), ("truncation + ceiling", "truncation_ceiling"),
    ("truncation min-p", "truncation:min-p"), ("contrastive", "contrastive"),
)


def rule_color(rule: str) -> str | None:
    """The colour of a verification rule: a name of ``specbound.theory.RULES`` (or
    ``"truncation:min-p"`` / ``"truncation:eta"``) or a figure label starting with one of
    :data:`RULE_LABEL_PREFIXES` (the longest prefix wins); None for an unknown rule."""
    if rule in RULE_COLORS:
        return RULE_COLORS[rule]
    best = max((p for p in RULE_LABEL_PREFIXES if rule.startswith(p[0])),
               key=lambda p: len(p[0]), default=None)
    return None if best is None else RULE_COLORS[best[1]]


#: the text put on every figure of a quick run (:func:`smoke_mark`)
SMOKE_TEXT = "smoke run (--quick): small sizes, not the paper's numbers"


@contextlib.contextmanager
def smoke_mark(active: bool = True):
    """Within the block (if ``active``), every figure saved carries :data:`SMOKE_TEXT` below
    everything drawn, on the right (entered by :func:`cli` and ``paper_figs.run_all`` in
    quick mode)."""
    if not active:
        yield
        return
    from matplotlib.figure import Figure

    orig = Figure.savefig

    def savefig(self, *args, **kwargs):
        if not getattr(self, "_specbound_smoke", False):
            # just below everything drawn, right-aligned: never on a label or a legend (the
            # style's savefig.bbox "tight" widens the canvas to hold it)
            bb = self.get_tightbbox(self.canvas.get_renderer())
            w, h = self.get_size_inches()
            self.text(bb.x1 / w, bb.y0 / h, SMOKE_TEXT, fontsize=7, color="tab:red",
                      ha="right", va="top")
            self._specbound_smoke = True
        return orig(self, *args, **kwargs)

    Figure.savefig = savefig
    try:
        yield
    finally:
        Figure.savefig = orig


def setup_matplotlib():
    """Agg backend and the packaged style; returns ``pyplot``.

    matplotlib is the ``plot`` extra of specbound (the library itself never imports it).
    """
    try:
        import matplotlib
    except ModuleNotFoundError as exc:  # pragma: no cover - the Makefile installs the extra
        raise ModuleNotFoundError(
            "the figure scripts need matplotlib: pip install 'specbound[plot]'", name=exc.name
        ) from exc

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    style = resources.files("specbound").joinpath("specbound.mplstyle")
    with resources.as_file(style) as path:
        plt.style.use(str(path))
    return plt


def out_path(out_dir: Path, name: str) -> Path:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    return out_dir / name


def write_table_and_figure(out_dir, name: str, df, plot, float_format: str = "%.10g"):
    """Write ``df`` to ``NAME.csv`` and ``plot(df, png)`` to ``NAME.png``; return both paths."""
    csv = out_path(out_dir, f"{name}.csv")
    png = out_path(out_dir, f"{name}.png")
    df.to_csv(csv, index=False, float_format=float_format)
    plot(df, png)
    return [png, csv]
