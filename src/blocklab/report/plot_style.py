"""What every sweep picture shares: its look (colours, matplotlib's style, a
figure with the run's subtitle), the y axis's tick labels, and the swept knob's
x axis (log2 for sizes that double, a tick at every planned value).

Used by the scan sweep (scan_plot.py), the generic sweep (sweep_plot.py), the
per-second series (series_plot.py) and the fleet's hosts (fleet.py).
"""

from __future__ import annotations

import math

from matplotlib import ticker
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.layout_engine import ConstrainedLayoutEngine

from ..units import fmt_bytes, tick_labels
from .data import RunData

SIZE = (10.0, 6.0)  # inches: 1500 x 900 px at 150 dpi (plots.PNG_DPI)

BLUE = "#1f5fa8"
BAND = "#9ec1e8"
ORANGE = "#e0701f"
GREY = "#4d4d4d"
LIGHT = "#9a9a9a"
RED = "#c0392b"

STYLE: dict[str, object] = {
    "font.family": "DejaVu Sans",
    "font.size": 11,
    "axes.titlesize": 10,
    "axes.labelsize": 11,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.color": "#e3e3e3",
    "grid.linewidth": 0.8,
    "xtick.labelsize": 10,
    "ytick.labelsize": 10,
    "legend.fontsize": 10,
    "figure.titlesize": 15,
    "figure.titleweight": "bold",
    "svg.fonttype": "path",  # the SVG looks the same without the font installed
    "svg.hashsalt": "blocklab",  # stable element ids: the same run gives the same file
}

KNOB_WORDS = {
    "multiblock_read": "multiblock read size",
    "block_size": "block size",
    "buffer_cache": "buffer cache size",
    "writers": "writer processes",
    "checksum": "checksum",
    "block_checking": "block checking",
    "direct_io": "direct I/O",
}


# ====================================================================== the y axis
class ScaledFormatter(ticker.Formatter):
    """Every tick on the scale of the largest: 0, 2.5 M, 5 M ... 17.5 M."""

    def __call__(self, x: float, pos: int | None = None) -> str:
        locs = list(self.locs) if len(self.locs) else [x]
        texts = tick_labels(locs + [x])
        return texts[-1]

    def format_ticks(self, values: list[float]) -> list[str]:
        self.set_locs(values)
        return tick_labels(list(values))


# ====================================================================== the figure
def new_figure(data: RunData, title: str) -> tuple[Figure, Axes]:
    """A figure of the usual size titled `title`, the run's context beneath: (figure, its one axes)."""
    fig = Figure(figsize=SIZE, dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    fig.set_layout_engine(ConstrainedLayoutEngine(h_pad=0.12, w_pad=0.12))
    fig.suptitle(title, x=0.01, ha="left")
    ax = fig.add_subplot()
    ax.set_title(_subtitle(data), loc="left", color=GREY, pad=10)
    return fig, ax


def _subtitle(data: RunData) -> str:
    line = data.context_line()
    measured = len({r.cell_id for r in data.rows})
    extra = []
    n = [len(v) for v in data.samples(data.metric).values() if v]
    if n:
        extra.append(f"n = {min(n)} runs per setting" if min(n) == max(n) else f"n = {min(n)}–{max(n)} runs per setting")
    if not data.complete:
        extra.append(f"PARTIAL RUN: {measured} of {data.cells_planned} cells")
    if data.failed_rows:
        extra.append(f"{len(data.failed_rows)} failed cell(s)")
    return wrap_line(line, 110) + ("\n" + " · ".join(extra) if extra else "")


def wrap_line(text: str, width: int) -> str:
    """Break a ' · '-joined line into lines of at most `width` characters."""
    parts = text.split(" · ")
    lines: list[str] = []
    for part in parts:
        if lines and len(lines[-1]) + 3 + len(part) <= width:
            lines[-1] += " · " + part
        else:
            lines.append(part)
    return "\n".join(lines)


# ====================================================================== the knob's x axis
def single_numeric_knob(data: RunData) -> str | None:
    """The swept knob when the run sweeps one knob over numbers (a line on an x axis), else None."""
    knobs = data.knobs
    if len(knobs) != 1:
        return None
    values = [s.get(knobs[0]) for s in data.plan_settings]
    if len(set(values)) < 2 or not all(_is_number(v) for v in values):
        return None
    return knobs[0]


def _is_number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def axis_values(data: RunData, knob: str, xs: list[float]) -> list[float]:
    """The measured values and those the plan has yet to measure, sorted."""
    planned = [s[knob] for s in data.plan_settings if _is_number(s.get(knob))]
    return sorted(set(xs) | set(planned))


def log2_axis(xs: list[float]) -> bool:
    """Log2 for sizes that double (1, 2, 4 ... 128); linear otherwise."""
    if len(xs) < 3 or min(xs) <= 0:
        return False
    return max(xs) / min(xs) >= 8


def knob_ticks(ax: Axes, data: RunData, knob: str, xs: list[float], log2: bool) -> None:
    """A tick at every value the plan sweeps (measured or not yet), labelled '16\\n128 kB'."""
    measured = set(xs)
    xs = axis_values(data, knob, xs)
    if log2:
        ax.set_xscale("log", base=2)
        ax.set_xlim(min(xs) / 1.5, max(xs) * 1.5)
    else:
        pad = (max(xs) - min(xs)) * 0.06 or 1.0
        ax.set_xlim(min(xs) - pad, max(xs) + pad)
    ax.xaxis.set_minor_locator(ticker.NullLocator())
    labels = []
    for x in xs:
        head, tail = data.value_parts(knob, x)
        labels.append(f"{head}\n{tail}" if tail else head)
    ax.set_xticks(xs, labels)
    for x, tick in zip(xs, ax.get_xticklabels()):
        if x not in measured:
            tick.set_color(LIGHT)  # planned, no measurement yet
    ax.grid(axis="x", visible=False)
    if len(xs) > 12:
        for tick in ax.get_xticklabels():
            tick.set_fontsize(8)


def knob_axis_label(data: RunData, knob: str, log2: bool) -> str:
    """The x axis's label: the knob, its name in the engine, the block size a read is counted in, the scale."""
    native = data.native_name(knob)
    text = knob + (f" ({native})" if native and native != knob else "")
    if knob == "multiblock_read" and data.block_size:
        text += f": {fmt_bytes(data.block_size)} blocks per read request"
    if log2:
        text += "   [log₂ scale]"
    return text


__all__ = [
    "BAND",
    "BLUE",
    "GREY",
    "KNOB_WORDS",
    "LIGHT",
    "ORANGE",
    "RED",
    "SIZE",
    "STYLE",
    "ScaledFormatter",
    "axis_values",
    "knob_axis_label",
    "knob_ticks",
    "log2_axis",
    "new_figure",
    "single_numeric_knob",
    "wrap_line",
]
