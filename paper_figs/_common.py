"""Helpers shared by the figure scripts: the command line of every study, style, output
paths, executor.

Command line (:func:`run_study_cli`; the entry of ``python -m paper_figs.NAME`` is
:func:`paper_figs._cli.cli`, which adds the verdict): every figure script declares its grid
and sizes as a table of :class:`Param` (name, type, full-mode default, quick-mode default,
help) in ``PARAMS``; the table gives both the flags of ``python -m paper_figs.NAME`` (listed
with their defaults by ``--help``) and the keywords of its ``main(out_dir, quick=False,
**params)`` (:func:`resolve_params`).  A run with the defaults writes to
``paper_figs/out/`` (full) or ``paper_figs/out-quick/`` (``--quick``); a run with other
values to ``paper_figs/out-custom/NAME-HASH/`` (HASH: a short hash of the mode and the
values that differ from the defaults), unless ``--out`` is given.  Each run records its
wall time, its mode and its non-default values (JSON, column ``params``) in that folder's
``timings.csv`` (:func:`record_timing`), as ``paper_figs.run_all`` does.

Every flag is checked as the command line is parsed, by the table itself: finite numbers
only, the range ``[low, high]`` of a :class:`Param`, each value of a grid once (``unique``),
the relations between flags (``check``: list lengths, subsets), the study's arrays against
the available memory (``memory``) and the syntax and reachability of ``--executor``.  An
error is one line ``python -m paper_figs.NAME: error: --FLAG: ...`` with exit status 2.

What a run found stored (:func:`study_run`): every sweep of a study says, before it
computes, how many of its configurations it found stored and how many it computes ("11 of
11 stored, 0 to compute; --fresh recomputes"); ``--fresh`` sets the stored ones aside
(:meth:`specbound.sweep.ResumableCSV.restart`, nothing is deleted) and computes everything.
``timings.csv`` keeps the compute time of the stored results: a run that resumes adds its
own seconds to the recorded ones, a run that computes nothing leaves them as they are, and
only a run that computes everything replaces them.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import hashlib
import json
import math
import os
import sys
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from specbound._io import atomic_write

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
    #: the largest value admitted (every element of a list; e.g. 1 for a probability or a TV)
    high: float | None = None
    #: ``low`` / ``high`` themselves refused (an open end: e.g. a TV below 1, an ε in (0, 1))
    low_open: bool = False
    high_open: bool = False
    #: a list holds each value once (a grid); False for lists paired element by element with
    #: another one (their pairs are checked by ``check``)
    unique: bool = True
    #: ``check(values)``: a message when this parameter does not fit the others (a list
    #: length, a subset), else None -- checked once every parameter is converted
    check: Any = None
    #: ``memory(values)``: an estimate (bytes) of the arrays this parameter scales; the
    #: estimates of a study's parameters add up to the study's, checked against the
    #: available memory before the study starts (the largest one names the flag)
    memory: Any = None

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
            if self.unique:
                seen = set()
                for x in out:
                    if x in seen:
                        raise ValueError(f"{self.name}: {self.show(x)} is given twice (each "
                                         "value of a grid once)")
                    seen.add(x)
        else:
            out = self._one(typ, value)
        return out

    def parse(self, text: str):
        """:meth:`convert` as an argparse ``type``: the flag's text checked as the command
        line is parsed."""
        try:
            return self.convert(text)
        except ValueError as exc:
            msg = str(exc)
            prefix = f"{self.name}: "
            raise argparse.ArgumentTypeError(msg[len(prefix):] if msg.startswith(prefix)
                                             else msg) from None

    def _one(self, typ, v):
        try:
            if typ is int and isinstance(v, float) and not float(v).is_integer():
                raise ValueError
            if typ is not str and isinstance(v, bool):
                raise ValueError
            x = typ(v)
        except (TypeError, ValueError, OverflowError):
            raise ValueError(f"{self.name}: expected {typ.__name__}, got {v!r}") from None
        if typ is float and not math.isfinite(x):
            raise ValueError(f"{self.name}: must be a finite number, got {v!r}")
        if self.low is not None and (x <= self.low if self.low_open else x < self.low):
            raise ValueError(f"{self.name}: must be {'>' if self.low_open else '>='} "
                             f"{self.low}, got {v!r}")
        if self.high is not None and (x >= self.high if self.high_open else x > self.high):
            raise ValueError(f"{self.name}: must be {'<' if self.high_open else '<='} "
                             f"{self.high}, got {v!r}")
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
    that differ from the mode's defaults (JSON-ready), empty for a default run; ``quick``
    the mode (a ``memory`` estimate counts one process in quick mode, the default pool's
    two in full mode)."""

    changed: dict
    quick: bool = False

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
    out.quick = bool(quick)
    for p in table:
        default = p.default(quick)
        v = given.get(p.name)
        v = default if v is None else p.convert(v)
        out[p.name] = v
        if v != default:
            out.changed[p.name] = _jsonable(v)
    for p in table:
        msg = p.check(out) if p.check is not None else None
        if msg:
            raise ValueError(f"{p.name}: {msg}")
    check_memory(table, out)
    return out


def share(values, name: str, names, nbytes) -> float:
    """A ``memory`` estimate ``nbytes`` that grows with the product of several parameters
    ``names``, counted once: on ``name`` when its value is the largest of them (the first
    one on ties), else 0 -- so the flag named by a refusal is the one that was made large."""
    top = max(names, key=lambda k: values[k])
    return nbytes if top == name else 0


def check_memory(table, values: Values) -> None:
    """Refuse, naming the flag and the estimate, a run whose arrays (the sum of the
    parameters' ``memory`` estimates) exceed the memory available (``MemAvailable``); the
    flag named is the parameter with the largest estimate."""
    est = {p.name: int(p.memory(values)) for p in table if p.memory is not None}
    if not est:
        return
    from specbound.cli import available_memory

    free = available_memory()
    name = max(est, key=est.get)
    total = sum(est.values())
    if free is not None and total > free:
        raise ValueError(f"{name}: the study's arrays would need about "
                         f"{total / 2**30:.1f} GiB of memory, more than the "
                         f"{free / 2**30:.1f} GiB available")


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
    ap = _StudyParser(prog=prog, description=description)
    ap.param_names = {p.name: p.flag for p in table}
    ap.add_argument("--quick", action="store_true",
                    help="small smoke-test version (default output folder paper_figs/out-quick/)")
    ap.add_argument("--out", type=Path, default=None, metavar="DIR",
                    help="output folder (default: paper_figs/out/, paper_figs/out-quick/ with "
                         "--quick, paper_figs/out-custom/NAME-HASH/ with non-default "
                         "parameters)")
    ap.add_argument(
        "--executor", default=os.environ.get(EXECUTOR_ENV) or None, metavar="SPEC",
        type=_executor_spec,
        help="where the sweeps run: 'serial', 'process[:N]', 'dask://host:port' (a Dask "
             "scheduler; extra 'dist') or 'dask-local[:N]'; default: $SPECBOUND_EXECUTOR, "
             "else each study's own (a 2-process pool in full mode)")
    ap.add_argument(
        "--fresh", action="store_true",
        help="recompute every configuration: the stored results of the output folder are "
             "set aside (kept under .NAME.csv.sweep/aside/), not reused; the real-model "
             "studies' generation log real_log/ is kept (delete it to rebuild it)")
    if table:
        group = ap.add_argument_group("study parameters")
        for p in table:
            meta = {"ints": "N,N,...", "floats": "X,X,...", "strs": "S,S,...", "int": "N",
                    "float": "X", "str": "S", "path": "DIR"}[p.kind]
            if p.full == p.quick:
                dflt = f"default: {p.show(p.full)}"
            else:
                dflt = f"default: {p.show(p.full)}; with --quick: {p.show(p.quick)}"
            group.add_argument(p.flag, dest=p.name, metavar=meta, default=None, type=p.parse,
                               help=f"{p.help} ({dflt})".replace("%", "%%"))
    return ap


class _StudyParser(argparse.ArgumentParser):
    """argparse with one-line errors: ``PROG: error: --FLAG: ...`` on standard error and
    exit status 2 (a parameter's name at the start of a message becomes its flag)."""

    param_names: dict = {}

    def error(self, message):

        msg = " ".join(str(message).split())
        if msg.startswith("argument "):
            msg = msg[len("argument "):]
        head, sep, rest = msg.partition(": ")
        if sep and head in self.param_names:
            msg = f"{self.param_names[head]}: {rest}"
        elif sep and "/" in head:  # "--out/-o" style: keep the long flag
            msg = f"{head.split('/')[0]}: {rest}"
        self.exit(2, f"{self.prog}: error: {msg}\n")


#: seconds ``--executor dask://host:port`` waits for the scheduler to accept a connection
SCHEDULER_CONNECT_SECONDS = 3.0


def _executor_spec(text: str) -> str:
    """``--executor``: the syntax of :func:`specbound.sweep.open_executor` and, for a Dask
    scheduler, that it accepts a TCP connection within :data:`SCHEDULER_CONNECT_SECONDS`."""
    from specbound.sweep import check_executor_spec

    try:
        host_port = check_executor_spec(text)
    except ValueError as exc:
        msg = str(exc)
        raise argparse.ArgumentTypeError(msg[len("spec: "):] if msg.startswith("spec: ")
                                         else msg) from None
    if host_port is not None:
        import socket

        host, port = host_port
        try:
            socket.create_connection((host, port), timeout=SCHEDULER_CONNECT_SECONDS).close()
        except OSError as exc:
            why = exc.strerror or type(exc).__name__
            raise argparse.ArgumentTypeError(
                f"cannot reach the Dask scheduler at {host}:{port} within "
                f"{SCHEDULER_CONNECT_SECONDS:g} s ({why})") from None
    return text


def summary_of(doc: str) -> str:
    """The first paragraph of a docstring on one line (a study's ``--help`` description: a
    docstring's first line may end mid-sentence)."""
    return " ".join((doc or "").strip().split("\n\n")[0].split())


def parse_args(description: str, argv=None, table=()) -> argparse.Namespace:
    """Parse the command line of a figure script (or of ``paper_figs.run_all``)."""
    return build_parser(description, table).parse_args(argv)


@dataclass(frozen=True)
class StudyCall:
    """What one command-line run of a study did (:func:`run_study_cli`): the study's
    ``name``, its output folder ``out`` and whether that is a custom-parameters folder
    (``custom``: ``paper_figs/out-custom/NAME-HASH/``, chosen because parameters differ from
    the defaults and no ``--out`` was given)."""

    name: str
    out: Path
    custom: bool


def run_study_cli(main, doc: str, params=(), name: str | None = None,
                  argv=None) -> StudyCall:
    """The study half of the command line ``python -m paper_figs.NAME [--quick] [--out DIR]
    [--executor SPEC] [--fresh] [--PARAM VALUE ...]`` (module docstring): parses and checks
    the flags, runs ``main(out, quick=..., **params)`` with the executor
    (:func:`study_run`: what it found stored, ``--fresh``, the compute time in
    ``OUT/timings.csv``) and prints the files written.  The verdict half (``INDEX.md``)
    is :func:`paper_figs._cli.cli`'s, the entry every study's ``__main__`` block calls."""
    name = name or getattr(main, "__module__", "study").rsplit(".", 1)[-1]
    ap = build_parser(summary_of(doc), params, prog=f"python -m paper_figs.{name}")
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
    custom = args.out is None and bool(values.changed)
    try:
        with sweep_executor(args.executor), smoke_mark(args.quick):
            written = study_run(name, lambda: main(out, quick=args.quick, **given), out,
                                quick=args.quick, fresh=args.fresh,
                                params=params_json(values.changed))
    except ExecutorError as exc:
        ap.error(f"--executor: {exc}")
    for path in written or []:
        print(path)
    return StudyCall(name, out, custom)


@contextlib.contextmanager
def heartbeat(prefix: str, what: str, every: float = 5.0, stream=None):
    """Within the block, print ``PREFIX still WHAT (N s)`` every ``every`` seconds (from a
    daemon thread), so that no wait passes in silence; nothing for a block that ends
    sooner."""
    import threading

    stream = sys.stderr if stream is None else stream
    stop = threading.Event()
    t0 = time.perf_counter()

    def tick() -> None:
        while not stop.wait(every):
            print(f"{prefix} still {what} ({time.perf_counter() - t0:.0f} s)", file=stream,
                  flush=True)

    thread = threading.Thread(target=tick, daemon=True, name="heartbeat")
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def note(name: str, text: str) -> None:
    """One progress line of a study on stderr: ``[NAME] text``."""
    print(f"[{name}] {text}", file=sys.stderr, flush=True)


@dataclass
class StoreTally:
    """What the sweeps of one study run found (:func:`study_run`): configurations found
    ``stored``, ``computed`` (to compute) and ``set_aside`` by ``--fresh``, over its
    ``sweeps``."""

    stored: int = 0
    computed: int = 0
    set_aside: int = 0
    sweeps: int = 0


@contextlib.contextmanager
def report_stores(name: str, fresh: bool = False):
    """Within the block, each sweep says on stderr, before it computes, how many of its
    configurations were found stored and how many it computes (``fresh``: the stored ones
    are set aside first, :func:`specbound.sweep.watch_sweeps`); yields the running
    :class:`StoreTally`."""
    from specbound.sweep import watch_sweeps

    tally = StoreTally()

    def said(c) -> None:
        tally.stored += c.stored
        tally.computed += c.to_compute
        tally.set_aside += c.set_aside
        tally.sweeps += 1
        label = f"{c.desc or c.path.stem}: " if c.desc != name else ""
        text = (f"{label}{c.stored} of {c.total} configurations stored, {c.to_compute} to "
                f"compute")
        if fresh:
            text += f" (--fresh: {c.set_aside} stored configurations set aside)"
        elif c.stored:
            text += "; --fresh recomputes"
        note(name, text)

    with watch_sweeps(said, fresh=fresh):
        yield tally


def study_run(name: str, run, out, *, quick: bool, fresh: bool = False, params: str = ""):
    """Run one study (``run()``, returning the files written) as :func:`cli` and
    ``paper_figs.run_all`` do: announce a first compilation of the kernels, report what each
    sweep found stored (:func:`report_stores`), and record the compute time in
    ``OUT/timings.csv`` (module docstring): added to the recorded seconds when the run
    resumed stored results, left alone when it computed nothing, replaced otherwise; an
    interrupted run records its seconds the same way before the interruption goes on (its
    finished configurations are stored, so the run that resumes them adds to them)."""
    from specbound.sim._config import compile_note

    t0 = time.perf_counter()
    with report_stores(name, fresh) as tally, compile_note(f"[{name}] "):
        try:
            written = run()
        except BaseException:
            if tally.computed:  # finished configurations are stored: keep their time
                _record(name, out, quick, params, tally, time.perf_counter() - t0,
                        interrupted=True)
            raise
        if not tally.sweeps:
            note(name, "no stored results (this study keeps none between runs): all "
                       "computed now")
        elif tally.sweeps > 1:
            note(name, f"in all: {tally.stored} of {tally.stored + tally.computed} "
                       f"configurations were stored, {tally.computed} computed")
        _record(name, out, quick, params, tally, time.perf_counter() - t0)
    return written


#: the file of an output folder that records each study's compute time (the name the
#: claims engine reads, ``paper_figs.claims.verdicts.TIMINGS``)
TIMINGS = "timings.csv"

#: the columns of :data:`TIMINGS`
TIMING_COLUMNS = ["study", "seconds", "quick", "finished_utc", "params"]


def _read_timings(path: Path) -> list[dict]:
    import pandas as pd

    if not path.is_file():
        return []
    try:
        old = pd.read_csv(path, dtype={"params": str}, keep_default_na=False)
    except (pd.errors.EmptyDataError, pd.errors.ParserError):
        return []
    if list(old.columns) == TIMING_COLUMNS[:len(old.columns)] \
            and len(old.columns) >= TIMING_COLUMNS.index("params"):
        return [{**{"params": ""}, **r} for r in old.to_dict("records")]
    return []


def recorded_seconds(out_dir, study: str, quick: bool, params: str = "") -> float | None:
    """The seconds ``out_dir/timings.csv`` records for ``study`` run in mode ``quick`` with
    non-default parameters ``params`` (None if it records none)."""
    for r in _read_timings(Path(out_dir) / TIMINGS):
        if r["study"] == study and str(r["quick"]) == str(bool(quick)) \
                and str(r["params"] or "") == str(params or ""):
            return float(r["seconds"])
    return None


def record_timing(out_dir, study: str, seconds: float, quick: bool, params: str = "",
                  add: bool = False) -> Path:
    """Store one study's compute time in ``out_dir/timings.csv`` (replacing its earlier
    row): ``params`` is the JSON of its non-default parameters ("" for a default run);
    ``add``: a run that resumed stored results adds its seconds to those recorded for the
    same study, mode and parameters (the stored results' compute time is kept, never
    replaced by a resume's).  A file written before the ``params`` column existed is read
    with ``params`` empty."""
    import pandas as pd

    path = Path(out_dir) / TIMINGS
    if add:
        seconds += recorded_seconds(out_dir, study, quick, params) or 0.0
    rows = [r for r in _read_timings(path) if r["study"] != study]
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M:%S")
    rows.append({"study": study, "seconds": round(seconds, 2), "quick": bool(quick),
                 "finished_utc": stamp, "params": str(params or "")})
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, pd.DataFrame(rows, columns=TIMING_COLUMNS).to_csv(index=False).encode())
    return path


def _record(name, out, quick, params, tally: StoreTally, dt: float,
            interrupted: bool = False) -> None:
    before = recorded_seconds(out, name, quick, params)
    if tally.sweeps and tally.computed == 0:
        if before is None:
            note(name, f"nothing computed and no recorded time of the stored results: "
                       f"timings.csv left as it is (this run {dt:.1f} s)")
        else:
            note(name, f"nothing computed: timings.csv keeps the stored results' compute "
                       f"time ({before:.1f} s; this run {dt:.1f} s)")
        return
    resumed = tally.stored > 0 and before is not None
    path = record_timing(out, name, dt, quick, params=params, add=resumed)
    what = f"{dt:.1f} s added to the stored results' {before:.1f} s" if resumed else f"{dt:.1f} s"
    if interrupted:
        what += " (interrupted: the run that resumes it adds its own)"
    note(name, f"timing recorded in {path}: {what}")


class ExecutorError(ValueError):
    """The executor of ``--executor`` could not be opened (:func:`sweep_executor`): e.g. a
    Dask address that accepts a connection but is no scheduler."""


@contextlib.contextmanager
def sweep_executor(spec):
    """Open the executor named by ``spec`` and make it every sweep's (nothing if ``spec`` is
    None): :func:`specbound.sweep.open_executor` + :func:`specbound.sweep.use_executor`.  A
    failure to open it is an :class:`ExecutorError` naming the spec (one line, whatever the
    client raised); errors of the block pass unchanged."""
    if not spec:
        yield None
        return
    from specbound.sweep import open_executor, use_executor

    with contextlib.ExitStack() as stack:
        try:
            ex = stack.enter_context(open_executor(spec))
        except Exception as exc:  # noqa: BLE001 - any client failure: one line, not a trace
            msg = str(exc).splitlines()[0] if str(exc) else ""
            msg = msg[len("spec: "):] if msg.startswith("spec: ") else (
                f"cannot open {spec!r}: {type(exc).__name__}" + (f" ({msg[:200]})" if msg
                                                                  else ""))
            raise ExecutorError(msg) from None
        stack.enter_context(use_executor(ex))
        yield ex


#: the chosen colour and marker of each decoder of ``specbound.sim.DECODERS``, used by every
#: figure; a decoder without an entry gets a derived one (:func:`decoder_style`)
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
    "blockver": ("darkslategray", "d"),
    "hsd": ("mediumseagreen", "p"),
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


#: colours and markers a decoder without a chosen style takes, in order (none of them is
#: a chosen one)
DERIVED_COLORS = ("darkgoldenrod", "teal", "navy", "crimson", "darkolivegreen", "slateblue",
                  "sienna", "deeppink", "steelblue", "darkkhaki")
DERIVED_MARKERS = ("<", ">", "d", "p", "H", "8", "1", "2", "3", "4")


def derived_styles(decoders, chosen=None) -> dict[str, tuple[str, str]]:
    """The style of every decoder of ``decoders`` (in registry order): its entry in
    ``chosen`` (default :data:`DECODER_STYLE`), or else the next unused pair of
    :data:`DERIVED_COLORS` and :data:`DERIVED_MARKERS`, so that a new decoder of the registry
    needs no entry to be drawn (the derived colours cycle past the tenth)."""
    chosen = DECODER_STYLE if chosen is None else chosen
    out, k = {}, 0
    for name in decoders:
        if name in chosen:
            out[name] = chosen[name]
        else:
            out[name] = (DERIVED_COLORS[k % len(DERIVED_COLORS)],
                         DERIVED_MARKERS[k % len(DERIVED_MARKERS)])
            k += 1
    return out


def decoder_style(decoder: str) -> tuple[str, str]:
    """The (colour, marker) of ``decoder`` in every figure: its chosen style in
    :data:`DECODER_STYLE`, or a derived one (:func:`derived_styles` over the registry)."""
    if decoder in DECODER_STYLE:
        return DECODER_STYLE[decoder]
    from specbound.sim.decoders import DECODERS

    styles = derived_styles(DECODERS)
    if decoder not in styles:
        raise ValueError(f"decoder: unknown decoder {decoder!r}; known: {list(DECODERS)}")
    return styles[decoder]


def decoder_color(decoder: str) -> str:
    """The colour of ``decoder`` in every figure."""
    return decoder_style(decoder)[0]


def decoder_marker(decoder: str) -> str:
    """The marker of ``decoder`` in every figure."""
    return decoder_style(decoder)[1]


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
    :data:`RULE_LABEL_PREFIXES` (the longest prefix wins); None for an unknown rule.  A rule
    of the registry without a chosen colour in :data:`RULE_COLORS` takes a derived one (the
    next of :data:`DERIVED_COLORS` in registry order), so a new rule needs no entry."""
    if rule in RULE_COLORS:
        return RULE_COLORS[rule]
    from specbound.theory import RULES

    if rule in RULES:
        unchosen = [r for r in RULES if r not in RULE_COLORS]
        return DERIVED_COLORS[unchosen.index(rule) % len(DERIVED_COLORS)]
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
            self.text(bb.x1 / w, bb.y0 / h, SMOKE_TEXT, fontsize=8, color="tab:red",
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


def integer_ticks(ax, values, axis: str = "x") -> None:
    """Integer ticks on ``ax``'s ``axis`` for an integer quantity (a number of drafts B, a
    lookahead L) plotted at ``values``: the values themselves when there are at most 10 of
    them (one value alone would otherwise get ticks at 1.9, 1.95, ...), else integer ticks
    chosen by matplotlib."""
    from matplotlib.ticker import MaxNLocator

    vals = sorted({int(v) for v in values})
    target = ax.xaxis if axis == "x" else ax.yaxis
    if 0 < len(vals) <= 10:
        target.set_ticks(vals, [str(v) for v in vals])
    else:
        target.set_major_locator(MaxNLocator(integer=True))


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
