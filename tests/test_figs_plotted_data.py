"""Every figure's PNG comes with CSVs holding exactly the plotted numbers, in the packaged
style and the shared colours.

Each figure script runs in quick mode with matplotlib's drawing calls recorded (``plot``,
``errorbar``, ``step``, ``scatter``, ``fill_between``, ``bar``, ``barh``); every finite
plotted data value must appear (to the CSV's 10 significant digits) among the numbers of the
CSVs the script wrote.  Bar positions (``bar`` x, ``barh`` y) are layout, not data, and are
not checked; a curve drawn mirrored (−loss) is matched up to sign.  No randomness: the
scripts are deterministic.

The same runs check that every saved figure is readable at its saved size
(:func:`_readability_problems`): every text is at least 8 pt when the PNG is shown at 100%
on a laptop screen, and every axis whose plotted values are all integers (B, L, a number
of prompts) has integer ticks.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from paper_figs._common import (
    BOUND_COLORS,
    DECODER_STYLE,
    RULE_COLORS,
    decoder_color,
    decoder_style,
    derived_styles,
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


#: the PNG shown at 100% zoom: one image pixel per CSS pixel (96 per inch), on a laptop
#: screen LAPTOP_PX CSS pixels wide (a 13-inch laptop: 1440; an image wider than that is
#: scaled down to fit)
CSS_PX_PER_INCH = 96
LAPTOP_PX = 1440
MIN_PT = 8.0


def _png_width(path: Path) -> int:
    head = Path(path).read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", path
    return int.from_bytes(head[16:20], "big")


#: axis labels that name an integer quantity (a number of drafts B, a lookahead L, a number
#: of tokens T): such an axis, if every value plotted along it is an integer, has integer
#: ticks only (a TPR that happens to be 0 or 1 is not an integer quantity)
INTEGER_QUANTITY = re.compile(r"^(B|L|T|number of|lookahead|scored tokens|detection token "
                              r"budget|prompts|drafts)\b")


def _integer_valued(values: np.ndarray) -> bool:
    v = values[np.isfinite(values)]
    return v.size > 0 and bool(np.all(v == np.round(v)))


def _axis_data(ax):
    """The plotted data values of ``ax`` along x and along y (lines and markers drawn in
    data coordinates; reference lines such as ``axhline`` are not data)."""
    xs, ys = [], []
    for line in ax.get_lines():
        if line.get_transform() is not ax.transData:
            continue
        xs.append(_numbers(line.get_xdata()))
        ys.append(_numbers(line.get_ydata()))
    for coll in ax.collections:
        off = coll.get_offsets() if coll.get_offset_transform() is ax.transData else None
        if off is not None and len(off) and np.ndim(off) == 2:
            xs.append(_numbers(np.asarray(off)[:, 0]))
            ys.append(_numbers(np.asarray(off)[:, 1]))
    cat = lambda parts: np.concatenate(parts) if parts else np.empty(0)  # noqa: E731
    return cat(xs), cat(ys)


def _readability_problems(fig, width_px: int, dpi: float) -> list[str]:
    """What makes a saved figure hard to read (the module docstring's two rules)."""
    from matplotlib.text import Text

    problems = []
    scale = dpi / CSS_PX_PER_INCH * min(1.0, LAPTOP_PX / width_px)
    small = sorted({round(t.get_fontsize(), 2) for t in fig.findobj(Text)
                    if t.get_visible() and t.get_text().strip()
                    and t.get_fontsize() * scale < MIN_PT})
    if small:
        problems.append(f"{width_px} px wide at {dpi:g} dpi: text of {small} pt shows below "
                        f"{MIN_PT:g} pt at 100% on a {LAPTOP_PX}-px screen")
    for ax in fig.axes:
        for name, values, axis in zip("xy", _axis_data(ax), (ax.xaxis, ax.yaxis),
                                      strict=True):
            label = axis.get_label().get_text()
            if not INTEGER_QUANTITY.match(label) or not _integer_valued(values) \
                    or axis.get_scale() not in ("linear", "log"):
                continue
            lo, hi = sorted(axis.get_view_interval())
            locs = [t for t in axis.get_majorticklocs() if lo - 1e-9 <= t <= hi + 1e-9]
            bad = [t for t in locs if abs(t - round(t)) > 1e-9 and t >= 1]
            if axis.get_scale() == "linear":
                bad = [t for t in locs if abs(t - round(t)) > 1e-9]
            if bad:
                problems.append(f"{name} axis '{label}' plots integers but has ticks at "
                                f"{[float(b) for b in bad[:4]]}")
    return problems


@pytest.fixture
def saved_figures(monkeypatch):
    """The readability problems of every figure saved in the test (by PNG name)."""
    import matplotlib
    from matplotlib.figure import Figure

    found: dict[str, list[str]] = {}
    orig = Figure.savefig

    def savefig(self, fname, *args, **kwargs):
        out = orig(self, fname, *args, **kwargs)
        if str(fname).endswith(".png"):
            dpi = kwargs.get("dpi") or matplotlib.rcParams["savefig.dpi"]
            dpi = self.dpi if dpi == "figure" else float(dpi)
            found[Path(fname).name] = _readability_problems(self, _png_width(fname), dpi)
        return out

    monkeypatch.setattr(Figure, "savefig", savefig)
    return found


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
def test_every_png_has_the_csv_of_its_plotted_numbers(mod, tmp_path, recorder, saved_figures):
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
    # readable at the saved size (module docstring)
    assert {p.name for p in pngs} <= set(saved_figures)
    problems = {k: v for k, v in saved_figures.items() if v}
    assert not problems, problems


def test_the_readability_check_catches_a_strip_and_half_integer_ticks(tmp_path):
    """The check above fails on what a reader trips on: four panels in a 22-inch strip (text
    shrunk below 8 pt to fit a laptop screen) and B = 2, 4 ticked at 2.5."""
    from matplotlib.ticker import MaxNLocator

    from paper_figs._common import setup_matplotlib

    plt = setup_matplotlib()
    fig, axes = plt.subplots(1, 4, figsize=(22, 4.8))
    axes[0].plot([2, 4], [0.5, 0.61])  # default ticks: 2.0, 2.5, 3.0, ...
    axes[0].set_xlabel("number of drafts B")
    axes[0].set_title("1. multi-draft: AATPS", fontsize=9)
    fig.savefig(tmp_path / "strip.png")
    problems = _readability_problems(fig, _png_width(tmp_path / "strip.png"), 150)
    plt.close(fig)
    assert any("shows below 8 pt" in p for p in problems)
    assert any("x axis" in p and "ticks at" in p for p in problems)
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    ax.plot([2, 4], [0.5, 0.61])
    ax.set_xlabel("B")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    fig.savefig(tmp_path / "ok.png")
    assert _readability_problems(fig, _png_width(tmp_path / "ok.png"), 150) == []
    plt.close(fig)


def test_a_new_decoder_needs_no_style_entry():
    """A decoder added to the registry without an entry in DECODER_STYLE is drawn in a
    derived style: its own colour and marker, none of them a chosen one, and the chosen
    styles of the other decoders unchanged."""
    names = [*DECODERS, "toy_one", "toy_two"]
    styles = derived_styles(names)
    assert {d: styles[d] for d in DECODER_STYLE} == DECODER_STYLE
    chosen_colors = {c for c, _ in DECODER_STYLE.values()}
    new = [styles["toy_one"], styles["toy_two"]]
    assert new[0] != new[1]
    assert not {c for c, _ in new} & chosen_colors
    assert len({c for c, _ in styles.values()}) == len(names)
    with pytest.raises(ValueError, match="^decoder: "):
        decoder_style("no_such_decoder")


def test_one_colour_per_decoder_and_rule():
    # the chosen styles name registered decoders only; every decoder of the registry has a
    # style (chosen or derived), and no two share a colour
    assert set(DECODER_STYLE) <= set(DECODERS), (
        f"paper_figs._common.DECODER_STYLE names decoders the registry does not have: "
        f"{sorted(set(DECODER_STYLE) - set(DECODERS))}")
    # the chosen rule colours name registered rules only (a rule without one gets a derived
    # colour from rule_color, checked below)
    assert set(RULE_COLORS) - {"truncation:min-p", "truncation:eta"} <= set(theory.RULES)
    assert all(rule_color(r) for r in theory.RULES)
    styles = {d: decoder_style(d) for d in DECODERS}
    colors = [c for c, _ in styles.values()]
    assert len(set(colors)) == len(colors)
    markers = [m for _, m in styles.values()]
    assert len(markers) == len(styles)
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
    ``specbound.mplstyle``) and takes decoder colours from ``_common`` (``decoder_style``:
    the chosen style or the derived one)."""
    import inspect

    for mod in MODULES:
        src = inspect.getsource(mod)
        assert "setup_matplotlib()" in src, mod.__name__
        assert "plt.style.use" not in src and "rcParams" not in src, mod.__name__
        if "decoder" in src and "STYLE = {" in src:
            assert "decoder_style(" in src, mod.__name__
