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


def setup_matplotlib():
    """Agg backend and the packaged style; returns ``pyplot``."""
    import matplotlib

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
