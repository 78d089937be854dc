"""Helpers shared by the figure scripts: argument parsing, style, output paths, executor."""

from __future__ import annotations

import argparse
import contextlib
import os
from importlib import resources
from pathlib import Path

OUT_DIR = Path(__file__).resolve().parent / "out"

#: environment variable naming the executor of every sweep (``specbound.sweep.open_executor``)
EXECUTOR_ENV = "SPECBOUND_EXECUTOR"


def parse_args(description: str, argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--quick", action="store_true", help="small smoke-test version")
    ap.add_argument("--out", type=Path, default=OUT_DIR, help="output folder")
    ap.add_argument(
        "--executor", default=os.environ.get(EXECUTOR_ENV) or None,
        help="where the sweeps run: 'serial', 'process[:N]', 'dask://host:port' (a Dask "
             "scheduler; extra 'dist') or 'dask-local[:N]'; default: $SPECBOUND_EXECUTOR, "
             "else each study's own (a 2-process pool in full mode)")
    return ap.parse_args(argv)


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


def cli(main, doc: str, argv=None) -> None:
    """Command-line entry of a figure script:
    ``python -m paper_figs.NAME [--quick] [--out DIR] [--executor SPEC]``."""
    args = parse_args(doc.splitlines()[0], argv)
    with sweep_executor(args.executor):
        for path in main(args.out, quick=args.quick):
            print(path)
