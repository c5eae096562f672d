"""The pictures of a run, as PNG and SVG bytes (matplotlib, Agg; no files, no pyplot).

* A sweep of the multiblock read size (one numeric knob, a scan workload that
  records the average read size): throughput against the knob on a log2 axis,
  every run a dot, the median line in its 95% bootstrap band, and the measured
  average read size on a second axis beside the size requested, the proof that
  the knob took effect. One figure in rows/s, one in MB/s; the MB/s figure
  carries the device's limit line when a calibration gives one.
* Any other sweep gets the generic picture of its metric: a numeric knob a
  line with its band, categorical or several knobs bars with CI whiskers.

`make_plots(data, limits)` returns them all; `limits` is e.g.
{"max_mb_per_s": 1450.0, "max_small_iops": 98000.0} (from `blocklab calibrate`).
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from typing import Any

import matplotlib
from matplotlib import ticker
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.layout_engine import ConstrainedLayoutEngine
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from .data import RunData, SettingFigures, axis_formatter_text, fmt_bytes, human, label_of, metric_title, unit_of
from .device_twin import PETAL_SENTENCE, device_line, petal_points

PNG_DPI = 150
SIZE = (10.0, 6.0)  # inches: 1500 x 900 px at 150 dpi

BLUE = "#1f5fa8"
BAND = "#9ec1e8"
ORANGE = "#e0701f"
GREY = "#4d4d4d"
LIGHT = "#9a9a9a"
RED = "#c0392b"

STYLE: dict[str, Any] = {
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

LIMIT_FOR_METRIC = {"mb_per_s": ("max_mb_per_s", "MB/s"), "iops": ("max_small_iops", "IOPS")}


@dataclass(frozen=True)
class Plot:
    """One picture: `id` names its files (plots/ID.png, plots/ID.svg) and its HTML element."""

    id: str
    title: str
    caption: str
    png: bytes
    svg: bytes


# ====================================================================== entry points
def make_plots(data: RunData, limits: dict[str, float] | None = None) -> list[Plot]:
    """Every picture this run has (none before its first measured cell)."""
    out: list[Plot] = []
    with matplotlib.rc_context(STYLE):  # type: ignore[arg-type]  # matplotlib types the keys as literals
        for plot_id, title, caption, fig in _figures(data, limits or {}):
            png, svg = render(fig)
            out.append(Plot(plot_id, title, caption, png, svg))
    return out


def render(fig: Figure) -> tuple[bytes, bytes]:
    """A figure -> (PNG bytes, SVG bytes)."""
    if not isinstance(fig.canvas, FigureCanvasAgg):
        FigureCanvasAgg(fig)
    png, svg = io.BytesIO(), io.BytesIO()
    fig.savefig(png, format="png", dpi=PNG_DPI, metadata={"Software": None})
    fig.savefig(svg, format="svg", metadata={"Date": None, "Creator": None})
    return png.getvalue(), svg.getvalue()


def _figures(data: RunData, limits: dict[str, float]) -> list[tuple[str, str, str, Figure]]:
    if not data.ok_rows:
        return []
    figures: list[tuple[str, str, str, Figure]] = []
    knob = _single_numeric_knob(data)
    metrics = set(data.metrics_present())
    scan = knob is not None and "avg_read_kb" in metrics and bool(metrics & {"rows_per_s", "mb_per_s"})
    if (not scan or data.metric not in ("rows_per_s", "mb_per_s")) and not _petals(data):
        figures.append(_generic(data, data.metric, limits))
    if scan:
        assert knob is not None
        for metric in ("rows_per_s", "mb_per_s"):
            if metric in metrics:
                figures.append(_scan_sweep(data, knob, metric, limits))
    for extra in EXTRA_FIGURES:
        made = extra(data, limits)
        if made is not None:
            figures.append(made)
    return figures


def _time_profile(data: RunData, limits: dict[str, float]) -> tuple[str, str, str, Figure] | None:
    """Where the time went (the update workload's wait profile), when the rows carry one."""
    from ..probes.profile_view import method_caption, profile_figure, setting_profiles

    fig = profile_figure(data.ok_rows, order=list(data.summary.get("settings", {})))
    if fig is None:
        return None
    profiles = setting_profiles(data.ok_rows)
    panels = ("DB time by class per report" if all(sp.slowest is None for sp in profiles)  # AWR: the instance's sessions only
              else "Time by class per setting, the slowest session on the left, all sessions summed on the right")
    caption = f"{panels}; {method_caption(profiles)}."
    return "time-profile", "Where the time went", caption, fig


def _checksum_overhead(data: RunData, limits: dict[str, float]) -> tuple[str, str, str, Figure] | None:
    """Seed 001's picture: elapsed normalised to no checksum, per block size and level."""
    from ..analysis.overhead import overhead_figure, reference_label

    fig = overhead_figure(data.ok_rows, data.metric)
    if fig is None:
        return None
    ref = reference_label(data.ok_rows)
    against = "the run without them" if ref == "checksum off" else f"the run with {ref} (this engine has no checksum off)"
    caption = (
        f"Elapsed time of each checksum / block-checking level divided by {against} "
        "(same block size and index): 1.0 means no difference. Bars are 95% bootstrap intervals."
    )
    return "checksum-overhead", "Checksum overhead, normalised", caption, fig


def _slob_petal(which: int, plot_id: str, title: str, caption: str) -> Any:
    """One of the SLOB petal plots (0: latency vs IOPS, 1: latency vs MB/s)."""

    def make(data: RunData, limits: dict[str, float]) -> tuple[str, str, str, Figure] | None:
        from ..analysis.slob_view import petal_figures, points

        if not points(data.ok_rows):
            return None
        device = petal_points(data)  # the device twin's own petal, when the run has one (issue 19)
        figures = petal_figures(data.ok_rows, limits or None, device=device)
        return plot_id, title, caption + (PETAL_SENTENCE if device else ""), figures[which]

    return make


_PETAL_CAPTION = (
    "Each line is one update share, its points joined in session order (the seed's petals); the ringed "
    "point is where the petal turns (the fewest sessions within 5% of the line's highest read IOPS). "
    "The device's limits from a calibration (`blocklab calibrate`, or ORION / CALIBRATE_IO brought in with "
    "`blocklab import`), when there is one, are dashed lines, or a note at the "
    "right edge when they lie far beyond the data."
)

def _block_drift(data: RunData, limits: dict[str, float]) -> tuple[str, str, str, Figure] | None:
    from .drift_plot import drift_plot

    return drift_plot(data, limits)


def _per_second(data: RunData, limits: dict[str, float]) -> tuple[str, str, str, Figure] | None:
    """A timed run's points second by second, with their warm-up and drift."""
    from .series_plot import series_figure

    made = series_figure(data)
    if made is None:
        return None
    fig, caption = made
    return "per-second", "Second by second: did each point settle?", caption, fig
def _fleet_hosts(data: RunData, limits: dict[str, float]) -> tuple[str, str, str, Figure] | None:
    """A fleet run's hosts side by side, one curve per host (report/fleet.py)."""
    from .fleet import fleet_figure

    return fleet_figure(data, limits)


# Recipe-specific pictures: each takes the run and returns (id, title, caption, figure) or None.
EXTRA_FIGURES = [
    _block_drift,
    _per_second,
    _fleet_hosts,
    _time_profile,
    _checksum_overhead,
    _slob_petal(0, "slob-latency-iops", "Read latency against IOPS", _PETAL_CAPTION),
    _slob_petal(1, "slob-latency-mbps", "Read latency against MB/s", _PETAL_CAPTION),
]


def _petals(data: RunData) -> bool:
    """A SLOB run: its petal plots show every point; a bar per (sessions, update %,
    block size) beside them (dozens of unreadable labels) would add nothing."""
    from ..analysis.slob_view import points

    return bool(points(data.ok_rows))


def _single_numeric_knob(data: RunData) -> str | None:
    knobs = data.knobs
    if len(knobs) != 1:
        return None
    values = [s.get(knobs[0]) for s in data.plan_settings]
    if len(set(values)) < 2 or not all(_is_number(v) for v in values):
        return None
    return knobs[0]


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


# ====================================================================== the scan sweep
def _scan_sweep(data: RunData, knob: str, metric: str, limits: dict[str, float]) -> tuple[str, str, str, Figure]:
    figs = sorted(data.figures(metric), key=lambda f: f.settings[knob])
    unit = unit_of(metric)
    what = "Full-scan throughput" if metric == "rows_per_s" else "Full-scan read bandwidth"
    if (data.spec.get("workload") or {}).get("kind") not in (None, "full_scan"):
        what = metric_title(metric).capitalize()
    knob_words = KNOB_WORDS.get(knob, knob)
    title = f"{what} vs {knob_words}"

    fig, ax = _new_figure(data, title)
    xs = [f.settings[knob] for f in figs]
    log2 = _log2_axis(_axis_values(data, knob, xs))
    _draw_runs_and_median(ax, figs, xs, log2, unit)
    best_label, close = _best_and_close(data, metric, figs)
    handles = _mark_best(ax, figs, xs, best_label, close, data, unit, metric)

    limit_handle = _limit_line(ax, metric, limits)
    ax.set_ylim(bottom=0, top=_top(figs, limits, metric))
    ax.yaxis.set_major_formatter(ScaledFormatter())
    ax.set_ylabel(f"{unit}  (higher is better)" if data.goal == "max" or metric != data.metric else unit)
    _knob_ticks(ax, data, knob, xs, log2)
    ax.set_xlabel(_knob_axis_label(data, knob, log2))

    # the disk's own figure for the same I/O (issue 19: the device twin), when the run has one
    twin_handle, twin_sentence = device_line(ax, data, knob, metric)
    if twin_handle is not None:
        handles.append(twin_handle)

    io_handles = _io_size_axis(ax, data, knob, xs, log2)

    legend = [
        Line2D([], [], color=LIGHT, marker="o", ls="none", ms=5, alpha=0.8, label="one run"),
        (Line2D([], [], color=BLUE, marker="o", lw=2.2, ms=6), Patch(color=BAND, alpha=0.55)),
        *handles,
        *([limit_handle] if limit_handle else []),
        *io_handles,
    ]
    labels = ["one run", f"median {unit}, 95% CI band", *[h.get_label() for h in handles]]
    if limit_handle:
        labels.append(limit_handle.get_label())
    labels += [h.get_label() for h in io_handles]
    fig.legend(legend, labels, loc="outside lower center", ncol=3, frameon=False)

    plot_id = f"{data.name}-{metric}".replace("_", "-")
    caption = (
        f"{what} at each {knob} value: every dot is one cold-cache run, the line joins the medians and the band "
        f"is their 95% bootstrap interval. Grey, right axis: the average size of the reads the engine really "
        f"issued, beside the size asked for."
    )
    if limit_handle:
        caption += " Red dashed: the device's limit measured by `blocklab calibrate` (fio)."
    caption += twin_sentence
    return plot_id, title, caption, fig


def _draw_runs_and_median(ax: Any, figs: list[SettingFigures], xs: list[float], log2: bool, unit: str) -> None:
    dots_x: list[float] = []
    dots_y: list[float] = []
    for f, x in zip(figs, xs):
        n = len(f.values)
        for i, v in enumerate(sorted(f.values)):
            offset = (i - (n - 1) / 2) * 0.05  # side by side, so equal values stay visible
            dots_x.append(x * 2**offset if log2 else x + offset * _linear_step(xs))
            dots_y.append(v)
    ax.plot(dots_x, dots_y, "o", ls="none", color=LIGHT, ms=5, alpha=0.8, zorder=3, mec="white", mew=0.4)
    med = [f.median for f in figs]
    lo = [f.ci_low for f in figs]
    hi = [f.ci_high for f in figs]
    ax.fill_between(xs, lo, hi, color=BAND, alpha=0.55, lw=0, zorder=1)
    ax.plot(xs, med, "-o", color=BLUE, lw=2.2, ms=6, zorder=4)


def _best_and_close(data: RunData, metric: str, figs: list[SettingFigures]) -> tuple[str | None, list[str]]:
    """The primary metric's best and indistinguishable come from the analysis; for
    another metric the highest (or lowest, for times) median is marked, no more."""
    if metric == data.metric and data.summary.get("best_label"):
        return data.summary["best_label"], list(data.summary.get("indistinguishable") or [])
    if not figs:
        return None, []
    pick = min if metric.endswith("_s") and not metric.endswith("per_s") else max
    return pick(figs, key=lambda f: f.median).label, []


def _mark_best(
    ax: Any, figs: list[SettingFigures], xs: list[float], best: str | None, close: list[str],
    data: RunData, unit: str, metric: str,
) -> list[Any]:
    handles: list[Any] = []
    by_label = {f.label: (f, x) for f, x in zip(figs, xs)}
    near = [by_label[c] for c in close if c in by_label]
    if near:
        h = ax.plot([x for _, x in near], [f.median for f, _ in near], "o", ms=11, mfc="none", mec=ORANGE, mew=1.6, zorder=5)[0]
        h.set_label("indistinguishable from the best (95% CI)")
        handles.append(h)
    if best in by_label:
        f, x = by_label[best]
        word = "best" if metric == data.metric else ("lowest" if metric.endswith("_s") and "per_s" not in metric else "highest")
        h = ax.plot([x], [f.median], "*", ms=17, color=ORANGE, mec="white", mew=0.8, zorder=6)[0]
        h.set_label(f"{word}: {data.describe_label(best)}, {human(f.median, unit)}")
        handles.insert(0, h)
    return handles


def _limit_line(ax: Any, metric: str, limits: dict[str, float]) -> Any:
    key_unit = LIMIT_FOR_METRIC.get(metric)
    if not key_unit:
        return None
    value = limits.get(key_unit[0])
    if not value or not math.isfinite(value):
        return None
    h = ax.axhline(value, color=RED, ls="--", lw=1.6, zorder=2, gid="device-limit")
    h.set_label(f"device limit (fio): {human(value, key_unit[1])}")
    return h


def _top(figs: list[SettingFigures], limits: dict[str, float], metric: str) -> float:
    top = max(max(f.values + [f.ci_high]) for f in figs)
    key_unit = LIMIT_FOR_METRIC.get(metric)
    if key_unit and limits.get(key_unit[0]):
        top = max(top, float(limits[key_unit[0]]))
    return top * 1.12 if top > 0 else 1.0


def _io_size_axis(ax: Any, data: RunData, knob: str, xs: list[float], log2: bool) -> list[Any]:
    """Right axis: the measured average read size per setting, and the size asked for."""
    io_figs = {f.label: f for f in data.figures("avg_read_kb")}
    points = []
    requested = []
    for x in xs:
        label = _label_for(data, knob, x)
        f = io_figs.get(label)
        if f is not None and f.median > 0:
            points.append((x, f.median))
        size = data._applied_size(knob, x)
        if size:
            requested.append((x, size / 1024))
    if not points:
        return []
    ax2 = ax.twinx()
    ax2.grid(False)
    ax2.spines["right"].set_visible(True)
    ax2.spines["right"].set_color(LIGHT)
    handles = []
    if requested:
        h = ax2.plot([p[0] for p in requested], [p[1] for p in requested], ls=":", color=LIGHT, lw=1.5, marker="_", ms=10, zorder=2)[0]
        h.set_label("read size requested (kB)")
        handles.append(h)
    h = ax2.plot([p[0] for p in points], [p[1] for p in points], ls="--", color=GREY, lw=1.3, marker="s", ms=4.5, zorder=3)[0]
    h.set_label("average read size measured (kB)")
    handles.insert(0, h)
    values = [p[1] for p in points] + [p[1] for p in requested]
    lo, hi = min(values), max(values)
    if lo > 0 and hi / lo >= 4:
        ax2.set_yscale("log", base=2)
        # the sizes take the lower two thirds, out of the way of the throughput at the top
        bottom = math.log2(lo / 1.5)
        top = bottom + (math.log2(hi * 1.3) - bottom) / 0.68
        ax2.set_ylim(2**bottom, 2**top)
        powers = list(range(math.floor(math.log2(lo)), math.ceil(math.log2(hi)) + 1))
        step = 1 if len(powers) <= 8 else 2
        ax2.yaxis.set_major_locator(ticker.FixedLocator([2.0**p for p in powers[::step]]))
        ax2.yaxis.set_minor_locator(ticker.NullLocator())
        ax2.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: fmt_bytes(v * 1024)))
    else:
        ax2.set_ylim(0, hi * 1.6)
        ax2.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g} kB"))
    ax2.set_ylabel("read size per I/O", color=GREY)
    ax2.tick_params(axis="y", colors=GREY)
    ax.set_zorder(ax2.get_zorder() + 1)  # the throughput stays in front
    ax.patch.set_visible(False)
    return handles


def _label_for(data: RunData, knob: str, value: Any) -> str:
    return label_of({knob: value})


# ====================================================================== the generic sweep
def _generic(data: RunData, metric: str, limits: dict[str, float]) -> tuple[str, str, str, Figure]:
    figs = data.figures(metric)
    unit = unit_of(metric)
    knob = _single_numeric_knob(data)
    knob_text = ", ".join(data.knobs) or "setting"
    title = f"{metric_title(metric).capitalize()} per {KNOB_WORDS.get(knob_text, knob_text)}"
    fig, ax = _new_figure(data, title)
    better = "higher is better" if data.goal == "max" else "lower is better"
    best, close = _best_and_close(data, metric, figs)
    if knob is not None:
        figs = sorted(figs, key=lambda f: f.settings[knob])
        xs = [f.settings[knob] for f in figs]
        log2 = _log2_axis(_axis_values(data, knob, xs))
        _draw_runs_and_median(ax, figs, xs, log2, unit)
        handles = _mark_best(ax, figs, xs, best, close, data, unit, metric)
        _knob_ticks(ax, data, knob, xs, log2)
        ax.set_xlabel(_knob_axis_label(data, knob, log2))
        legend = [
            Line2D([], [], color=LIGHT, marker="o", ls="none", ms=5, label="one run"),
            (Line2D([], [], color=BLUE, marker="o", lw=2.2, ms=6), Patch(color=BAND, alpha=0.55)),
            *handles,
        ]
        labels = ["one run", f"median {unit}, 95% CI band".replace("  ", " "), *[h.get_label() for h in handles]]
    else:
        handles = _bars(ax, data, figs, best, close, unit)
        legend = handles
        labels = [h.get_label() for h in handles]
        several = len(data.knobs) > 1
        ax.set_xlabel(f"{knob_text} (top to bottom)" if several else knob_text)
    limit_handle = _limit_line(ax, metric, limits)
    if limit_handle:
        legend.append(limit_handle)
        labels.append(limit_handle.get_label())
    if figs:
        ax.set_ylim(bottom=0, top=_top(figs, limits, metric))
    ax.yaxis.set_major_formatter(ScaledFormatter())
    ax.set_ylabel(f"{metric_title(metric)} ({unit})  [{better}]" if unit else f"{metric}  [{better}]")
    longest_label = max((len(text) for text in labels), default=0)
    fig.legend(legend, labels, loc="outside lower center", ncol=3 if longest_label <= 40 else 1, frameon=False)
    plot_id = f"{data.name}-{metric}".replace("_", "-")
    caption = (
        f"{metric_title(metric).capitalize()} ({metric}) per setting: every dot is one run; "
        + ("the line joins the medians and the band is their 95% bootstrap interval." if knob else
           "the bar is the median and the whisker its 95% bootstrap interval.")
    )
    return plot_id, title, caption, fig


def _bars(ax: Any, data: RunData, figs: list[SettingFigures], best: str | None, close: list[str], unit: str) -> list[Any]:
    positions = list(range(len(figs)))
    colours = [ORANGE if f.label == best else ("#f3b27a" if f.label in close else BAND) for f in figs]
    ax.bar(positions, [f.median for f in figs], color=colours, width=0.62, zorder=2, edgecolor="white")
    lower = [max(f.median - f.ci_low, 0) for f in figs]
    upper = [max(f.ci_high - f.median, 0) for f in figs]
    ax.errorbar(positions, [f.median for f in figs], yerr=[lower, upper], fmt="none", ecolor=GREY, capsize=5, lw=1.4, zorder=3)
    dots = [
        (pos + (i - (len(f.values) - 1) / 2) * 0.06, v)
        for pos, f in zip(positions, figs)
        for i, v in enumerate(sorted(f.values))
    ]
    ax.plot([d[0] for d in dots], [d[1] for d in dots], "o", ls="none", color=BLUE, ms=4, alpha=0.75, zorder=4)
    names = [_tick_label(data, f.label) for f in figs]
    ax.set_xticks(positions, names)
    ax.grid(axis="x", visible=False)
    longest = max((len(line) for n in names for line in n.split("\n")), default=0)
    if len(figs) * max(longest, 6) > 100:  # would not fit side by side
        for tick in ax.get_xticklabels():
            tick.set_rotation(30)
            tick.set_horizontalalignment("right")
    handles: list[Any] = [
        Line2D([], [], color=BLUE, marker="o", ls="none", ms=4, label="one run"),
        Patch(color=BAND, label=f"median {unit}".strip() + ", whisker: 95% CI"),
    ]
    if best is not None:
        f = next((f for f in figs if f.label == best), None)
        if f is not None:
            handles.insert(1, Patch(color=ORANGE, label=f"best: {data.describe_label(best)}, {human(f.median, unit)}"))
    if close:
        handles.append(Patch(color="#f3b27a", label="indistinguishable from the best (95% CI)"))
    return handles


def _tick_label(data: RunData, label: str) -> str:
    """One line per knob: with several knobs just the values, stacked in the order
    the axis label names the knobs ('64 kB / on / off'), so 16 settings fit side by side."""
    settings = data.settings_by_label.get(label)
    if not settings or len(settings) == 1:
        return data.describe_label(label).replace(", ", "\n")
    return "\n".join(data.describe_value(k, v) for k, v in settings.items())


# ====================================================================== shared
class ScaledFormatter(ticker.Formatter):
    """Every tick on the scale of the largest: 0, 2.5 M, 5 M ... 17.5 M."""

    def __call__(self, x: float, pos: int | None = None) -> str:
        locs = list(self.locs) if len(self.locs) else [x]
        texts = axis_formatter_text(locs + [x])
        return texts[-1]

    def format_ticks(self, values: Any) -> list[str]:
        self.set_locs(values)
        return axis_formatter_text(list(values))


def _new_figure(data: RunData, title: str) -> tuple[Figure, Any]:
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
    return _wrap_line(line, 110) + ("\n" + " · ".join(extra) if extra else "")


def _wrap_line(text: str, width: int) -> str:
    """Break a ' · '-joined line into lines of at most `width` characters."""
    parts = text.split(" · ")
    lines: list[str] = []
    for part in parts:
        if lines and len(lines[-1]) + 3 + len(part) <= width:
            lines[-1] += " · " + part
        else:
            lines.append(part)
    return "\n".join(lines)


def _axis_values(data: RunData, knob: str, xs: list[float]) -> list[float]:
    """The measured values and those the plan has yet to measure, sorted."""
    planned = [s[knob] for s in data.plan_settings if _is_number(s.get(knob))]
    return sorted(set(xs) | set(planned))


def _log2_axis(xs: list[float]) -> bool:
    """Log2 for sizes that double (1, 2, 4 ... 128); linear otherwise."""
    if len(xs) < 3 or min(xs) <= 0:
        return False
    return max(xs) / min(xs) >= 8


def _linear_step(xs: list[float]) -> float:
    span = (max(xs) - min(xs)) if xs else 1.0
    return span / max(len(xs), 1) * 0.6 or 1.0


def _knob_ticks(ax: Any, data: RunData, knob: str, xs: list[float], log2: bool) -> None:
    """A tick at every value the plan sweeps (measured or not yet), labelled '16\\n128 kB'."""
    measured = set(xs)
    xs = _axis_values(data, knob, xs)
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


def _knob_axis_label(data: RunData, knob: str, log2: bool) -> str:
    native = data.native_name(knob)
    text = knob + (f" ({native})" if native and native != knob else "")
    if knob == "multiblock_read" and data.block_size:
        text += f": {fmt_bytes(data.block_size)} blocks per read request"
    if log2:
        text += "   [log₂ scale]"
    return text
