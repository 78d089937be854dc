"""Every figure's PNG comes with CSVs holding exactly the plotted numbers, in the packaged
style and the shared colours.

Each figure script runs in quick mode with matplotlib's drawing calls recorded (``plot``,
``errorbar``, ``step``, ``scatter``, ``fill_between``, ``bar``, ``barh``); every finite
plotted data value must appear (to the CSV's 10 significant digits) among the numbers of the
CSVs the script wrote.  Bar positions (``bar`` x, ``barh`` y) are layout, not data, and are
not checked; a curve drawn mirrored (−loss) is matched up to sign.  No randomness: the
scripts are deterministic.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from paper_figs._common import (
    BOUND_COLORS,
    DECODER_STYLE,
    RULE_COLORS,
    decoder_color,
    rule_color,
)
from paper_figs.run_all import figure_modules
from specbound import theory
from specbound.sim import DECODERS

MODULES = figure_modules()


def _numbers(x) -> np.ndarray:
    try:
        a = np.asarray(x, dtype=np.float64).ravel()
    except (TypeError, ValueError):
        return np.empty(0)
    return a[np.isfinite(a)]


@pytest.fixture
def recorder(monkeypatch):
    from matplotlib.axes import Axes

    seen: list[tuple[str, np.ndarray]] = []
    depth = [0]  # only the script's own calls (bar draws its error bars with errorbar)

    def wrap(name, pick):
        orig = getattr(Axes, name)

        def method(self, *args, **kwargs):
            if depth[0] == 0:
                for what, values in pick(args, kwargs):
                    seen.append((f"{name}:{what}", _numbers(values)))
            depth[0] += 1
            try:
                return orig(self, *args, **kwargs)
            finally:
                depth[0] -= 1

        monkeypatch.setattr(Axes, name, method)

    def xy(args, kwargs):
        data = [a for a in args if not isinstance(a, str)]
        if len(data) == 1:
            return [("y", data[0])]
        return [("x", data[0]), ("y", data[1])] if len(data) >= 2 else []

    wrap("plot", xy)
    wrap("errorbar", lambda a, k: [("x", a[0]), ("y", a[1])] if len(a) >= 2 else [])
    wrap("scatter", lambda a, k: [("x", a[0]), ("y", a[1])] if len(a) >= 2 else [])
    wrap("step", lambda a, k: [("x", a[0]), ("y", a[1])] if len(a) >= 2 else [])
    wrap("fill_between", lambda a, k: [("x", a[0])] + [("y", v) for v in a[1:3]])
    wrap("bar", lambda a, k: [("height", a[1])] if len(a) >= 2 else [])
    wrap("barh", lambda a, k: [("width", a[1])] if len(a) >= 2 else [])
    return seen


def _csv_numbers(out_dir: Path) -> np.ndarray:
    vals = []
    for path in out_dir.glob("*.csv"):
        df = pd.read_csv(path)
        for col in df.columns:
            v = pd.to_numeric(df[col], errors="coerce").to_numpy(dtype=np.float64)
            vals.append(v[np.isfinite(v)])
        vals.append(np.arange(len(df), dtype=np.float64))  # row positions
    return np.unique(np.abs(np.concatenate(vals)))


def _missing(plotted: np.ndarray, table: np.ndarray) -> np.ndarray:
    x = np.abs(plotted)
    i = np.clip(np.searchsorted(table, x), 1, len(table) - 1)
    near = np.minimum(np.abs(table[i] - x), np.abs(table[i - 1] - x))
    return x[near > 1e-9 * np.maximum(x, 1.0)]


@pytest.mark.parametrize("mod", MODULES, ids=[m.__name__.rsplit(".", 1)[-1] for m in MODULES])
def test_every_png_has_the_csv_of_its_plotted_numbers(mod, tmp_path, recorder):
    written = [Path(p) for p in mod.main(tmp_path, quick=True)]
    pngs = [p for p in written if p.suffix == ".png"]
    assert pngs
    for png in pngs:
        assert (png.with_suffix(".csv")).is_file(), f"{png.name} has no {png.stem}.csv"
    table = _csv_numbers(tmp_path)
    assert recorder, "the figure drew nothing that was recorded"
    for what, values in recorder:
        bad = _missing(values, table)
        assert bad.size == 0, f"{what}: plotted values not in the CSVs: {bad[:5]}"


def test_one_colour_per_decoder_and_rule():
    # the styles are the figures' own, the decoders the registry's: exactly the same names
    assert set(DECODER_STYLE) == set(DECODERS), (
        f"paper_figs._common.DECODER_STYLE and specbound.sim.DECODERS differ: "
        f"{sorted(set(DECODER_STYLE) ^ set(DECODERS))}")
    assert set(RULE_COLORS) - {"truncation:min-p", "truncation:eta"} == set(theory.RULES)
    colors = [c for c, _ in DECODER_STYLE.values()]
    assert len(set(colors)) == len(colors)
    markers = [m for _, m in DECODER_STYLE.values()]
    assert len(markers) == len(DECODER_STYLE)
    rules = {k: v for k, v in RULE_COLORS.items() if k != "truncation"}
    assert len(set(rules.values())) == len(rules)
    assert rule_color("SpecCascade (min-p, Eq. 13)") == RULE_COLORS["truncation:min-p"]
    assert rule_color("truncation + ceiling (min-p 0.1)") == RULE_COLORS["truncation_ceiling"]
    assert rule_color("ceiling only") == RULE_COLORS["ceiling"]
    assert rule_color("no such rule") is None
    assert BOUND_COLORS["exact_mpfr"] == decoder_color("mpfr")
    assert BOUND_COLORS["exact_gls"] == decoder_color("invariant")


def test_figures_use_the_packaged_style():
    """Every figure script draws through ``_common.setup_matplotlib`` (the packaged
    ``specbound.mplstyle``) and takes decoder colours from ``_common``."""
    import inspect

    for mod in MODULES:
        src = inspect.getsource(mod)
        assert "setup_matplotlib()" in src, mod.__name__
        assert "plt.style.use" not in src and "rcParams" not in src, mod.__name__
        if "decoder" in src and "STYLE = {" in src:
            assert "DECODER_STYLE" in src, mod.__name__
