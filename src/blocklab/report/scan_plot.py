"""The scan sweep picture: a multiblock read size swept (one numeric knob, a scan
workload that records the average read size). Throughput against the knob on a
log2 axis, every run a dot, the median line in its 95% bootstrap band, and the
measured average read size on a second axis beside the size requested, the
proof that the knob took effect. One figure in rows/s, one in MB/s; the MB/s
figure carries the device's limit line when a calibration gives one, and the
device twin's line when the run has one.
"""

from __future__ import annotations

import math
from typing import Any

from matplotlib import ticker
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from ..units import first_upper, fmt_bytes, label_of, metric_title, unit_of
from .data import RunData
from .device_twin import device_line
from .plot_style import (
    BAND,
    BLUE,
    GREY,
    KNOB_WORDS,
    LIGHT,
    ScaledFormatter,
    axis_values,
    knob_axis_label,
    knob_ticks,
    log2_axis,
    new_figure,
)
from .sweep_plot import best_and_close, draw_runs_and_median, figure_words, limit_line, mark_best, y_top


def scan_sweep(data: RunData, knob: str, metric: str, limits: dict[str, float]) -> tuple[str, str, str, Figure]:
    """One scan figure of `metric` (rows_per_s or mb_per_s) against the knob, with the read sizes beside it."""
    figs = sorted(data.figures(metric), key=lambda f: f.settings[knob])
    unit = unit_of(metric)
    what = "Full-scan throughput" if metric == "rows_per_s" else "Full-scan read bandwidth"
    if (data.spec.get("workload") or {}).get("kind") not in (None, "full_scan"):
        what = first_upper(metric_title(metric))
    knob_words = KNOB_WORDS.get(knob, knob)
    title = f"{what} vs {knob_words}"

    fig, ax = new_figure(data, title)
    xs = [f.settings[knob] for f in figs]
    log2 = log2_axis(axis_values(data, knob, xs))
    draw_runs_and_median(ax, figs, xs, log2, unit)
    best_label, close = best_and_close(data, metric, figs)
    handles = mark_best(ax, figs, xs, best_label, close, data, unit, metric)

    limit_handle = limit_line(ax, metric, limits)
    ax.set_ylim(bottom=0, top=y_top(figs, limits, metric))
    ax.yaxis.set_major_formatter(ScaledFormatter())
    ax.set_ylabel(f"{unit}  (higher is better)" if data.goal == "max" or metric != data.metric else unit)
    knob_ticks(ax, data, knob, xs, log2)
    ax.set_xlabel(knob_axis_label(data, knob, log2))

    # the disk's own figure for the same I/O (issue 19: the device twin), when the run has one
    twin_handle, twin_sentence = device_line(ax, data, knob, metric)
    if twin_handle is not None:
        handles.append(twin_handle)

    io_handles = _io_size_axis(ax, data, knob, xs, log2)

    legend: list[Any] = [  # Artists and (Line2D, Patch) tuples: matplotlib's stub omits the tuples HandlerTuple draws
        Line2D([], [], color=LIGHT, marker="o", ls="none", ms=5, alpha=0.8, label="one run"),
        (Line2D([], [], color=BLUE, marker="o", lw=2.2, ms=6), Patch(color=BAND, alpha=0.55)),
        *handles,
        *([limit_handle] if limit_handle else []),
        *io_handles,
    ]
    labels = ["one run", f"{data.figure_word(metric).removesuffix(' level')} {unit}, CI band", *[str(h.get_label()) for h in handles]]
    if limit_handle:
        labels.append(str(limit_handle.get_label()))
    labels += [str(h.get_label()) for h in io_handles]
    fig.legend(legend, labels, loc="outside lower center", ncol=3, frameon=False)

    plot_id = f"{data.name}-{metric}".replace("_", "-")
    caption = (
        f"{what} at each {knob} value: every dot is one cold-cache run, the line joins the {figure_words(data, metric)}. Grey, right axis: the average size of the reads the engine really "
        f"issued, beside the size asked for."
    )
    if limit_handle:
        caption += " Red dashed: the device's limit measured by `blocklab calibrate` (fio)."
    caption += twin_sentence
    return plot_id, title, caption, fig


def _io_size_axis(ax: Axes, data: RunData, knob: str, xs: list[float], log2: bool) -> list[Artist]:
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
    handles: list[Artist] = []
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


def _label_for(data: RunData, knob: str, value: object) -> str:
    return label_of({knob: value})


__all__ = ["scan_sweep"]
