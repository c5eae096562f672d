"""The generic sweep picture of a run's metric (a numeric knob: a line in its
band; categorical or several knobs: bars with CI whiskers), and the marks every
sweep picture draws (each run a dot, the medians in their band, the best and
those indistinguishable from it, the device's limit), shared with scan_plot.py.
"""

from __future__ import annotations

import math
from typing import Any

from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from ..units import first_upper, human, metric_title, unit_of
from .data import RunData, SettingFigures
from .plot_style import (
    BAND,
    BLUE,
    GREY,
    KNOB_WORDS,
    LIGHT,
    ORANGE,
    RED,
    ScaledFormatter,
    axis_values,
    knob_axis_label,
    knob_ticks,
    log2_axis,
    new_figure,
    single_numeric_knob,
)

LIMIT_FOR_METRIC = {"mb_per_s": ("max_mb_per_s", "MB/s"), "iops": ("max_small_iops", "IOPS")}


# ====================================================================== the generic sweep
def generic_sweep(data: RunData, metric: str, limits: dict[str, float]) -> tuple[str, str, str, Figure]:
    """The run's metric per setting: one numeric knob a line in its band, else bars with CI whiskers."""
    figs = data.figures(metric)
    unit = unit_of(metric)
    knob = single_numeric_knob(data)
    knob_text = ", ".join(data.knobs) or "setting"
    title = f"{first_upper(metric_title(metric))} per {KNOB_WORDS.get(knob_text, knob_text)}"
    fig, ax = new_figure(data, title)
    better = "higher is better" if data.goal == "max" else "lower is better"
    best, close = best_and_close(data, metric, figs)
    if knob is not None:
        figs = sorted(figs, key=lambda f: f.settings[knob])
        xs = [f.settings[knob] for f in figs]
        log2 = log2_axis(axis_values(data, knob, xs))
        draw_runs_and_median(ax, figs, xs, log2, unit)
        handles = mark_best(ax, figs, xs, best, close, data, unit, metric)
        knob_ticks(ax, data, knob, xs, log2)
        ax.set_xlabel(knob_axis_label(data, knob, log2))
        legend: list[Any] = [  # Artists and (Line2D, Patch) tuples: matplotlib's stub omits the tuples HandlerTuple draws
            Line2D([], [], color=LIGHT, marker="o", ls="none", ms=5, label="one run"),
            (Line2D([], [], color=BLUE, marker="o", lw=2.2, ms=6), Patch(color=BAND, alpha=0.55)),
            *handles,
        ]
        labels = ["one run", f"{data.figure_word(metric).removesuffix(' level')} {unit}, CI band".replace("  ", " "), *[str(h.get_label()) for h in handles]]
    else:
        handles = _bars(ax, data, figs, best, close, unit, metric)
        legend = list(handles)
        labels = [str(h.get_label()) for h in handles]
        several = len(data.knobs) > 1
        ax.set_xlabel(f"{knob_text} (top to bottom)" if several else knob_text)
    limit_handle = limit_line(ax, metric, limits)
    if limit_handle:
        legend.append(limit_handle)
        labels.append(str(limit_handle.get_label()))
    if figs:
        ax.set_ylim(bottom=0, top=y_top(figs, limits, metric))
    ax.yaxis.set_major_formatter(ScaledFormatter())
    ax.set_ylabel(f"{metric_title(metric)} ({unit})  [{better}]" if unit else f"{metric}  [{better}]")
    longest_label = max((len(text) for text in labels), default=0)
    fig.legend(legend, labels, loc="outside lower center", ncol=3 if longest_label <= 40 else 1, frameon=False)
    plot_id = f"{data.name}-{metric}".replace("_", "-")
    caption = (
        f"{first_upper(metric_title(metric))} ({metric}) per setting: every dot is one run; "
        + (f"the line joins the {figure_words(data, metric)}." if knob else
           f"the bar is the {figure_words(data, metric, bars=True)}.")
    )
    return plot_id, title, caption, fig


def _bars(ax: Axes, data: RunData, figs: list[SettingFigures], best: str | None, close: list[str], unit: str,
          metric: str) -> list[Artist]:
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
    handles: list[Artist] = [
        Line2D([], [], color=BLUE, marker="o", ls="none", ms=4, label="one run"),
        Patch(color=BAND, label=f"{data.figure_word(metric)} {unit}".strip() + ", whisker: CI"),
    ]
    if best is not None:
        f = next((f for f in figs if f.label == best), None)
        if f is not None:
            handles.insert(1, Patch(color=ORANGE, label=f"best: {data.describe_label(best)}, {human(f.median, unit)}"))
    if close:
        handles.append(Patch(color="#f3b27a", label=AS_GOOD_LABEL))
    return handles


def _tick_label(data: RunData, label: str) -> str:
    """One line per knob: with several knobs just the values, stacked in the order
    the axis label names the knobs ('64 kB / on / off'), so 16 settings fit side by side."""
    settings = data.settings_by_label.get(label)
    if not settings or len(settings) == 1:
        return data.describe_label(label).replace(", ", "\n")
    return "\n".join(data.describe_value(k, v) for k, v in settings.items())


# ====================================================================== marks every sweep draws
def draw_runs_and_median(ax: Axes, figs: list[SettingFigures], xs: list[float], log2: bool, unit: str) -> None:
    """Every run a grey dot (equal values side by side), the medians a blue line in their 95% band."""
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


AS_GOOD_LABEL = "as good as the best (within tolerance)"


def figure_words(data: RunData, metric: str, bars: bool = False) -> str:
    """The caption's words for what the line (or bar) and its band (or whisker) are."""
    if data.figure_word(metric) == "median":
        return ("median and the whisker its 95% bootstrap interval" if bars
                else "medians and the band is their 95% bootstrap interval")
    what = "(each setting's geometric mean with the blocks' drift taken out: the figure the best is picked on)"
    return (f"block-adjusted level {what} and the whisker its interval" if bars
            else f"block-adjusted levels {what} and the band is their interval")


def best_and_close(data: RunData, metric: str, figs: list[SettingFigures]) -> tuple[str | None, list[str]]:
    """The primary metric's best and those as good as it come from the analysis
    (an older summary without standings: those indistinguishable); for another
    metric the highest (or lowest, for times) median is marked, no more."""
    if metric == data.metric and data.summary.get("best_label"):
        if "as_good" in data.summary:
            return data.summary["best_label"], list(data.summary["as_good"])
        return data.summary["best_label"], list(data.summary.get("indistinguishable") or [])
    if data.summary.get("unranked") or not figs:  # device limits, system statistics: each a value by itself
        return None, []
    pick = min if metric.endswith("_s") and not metric.endswith("per_s") else max
    return pick(figs, key=lambda f: f.median).label, []


def mark_best(
    ax: Axes, figs: list[SettingFigures], xs: list[float], best: str | None, close: list[str],
    data: RunData, unit: str, metric: str,
) -> list[Artist]:
    """The best setting starred, those as good as it ringed, those the run cannot
    separate from it yet ringed in grey dashes; their legend handles, the best first."""
    handles: list[Artist] = []
    by_label = {f.label: (f, x) for f, x in zip(figs, xs)}
    near = [by_label[c] for c in close if c in by_label]
    if near:
        h = ax.plot([x for _, x in near], [f.median for f, _ in near], "o", ms=11, mfc="none", mec=ORANGE, mew=1.6, zorder=5)[0]
        h.set_label(AS_GOOD_LABEL)
        handles.append(h)
    open_ = [by_label[c] for c in (data.summary.get("undecided") or []) if c in by_label] if metric == data.metric else []
    if open_:
        h = ax.plot([x for _, x in open_], [f.median for f, _ in open_], "o", ms=12, mfc="none", mec=GREY, mew=1.3, ls="none",
                    zorder=5)[0]
        blocks = int((data.summary.get("analysis") or {}).get("blocks") or 0)
        h.set_label(f"open: not separated by {blocks} block{'s' if blocks != 1 else ''}" if blocks else "open: not separated yet")
        handles.append(h)
    if best in by_label:
        f, x = by_label[best]
        word = "best" if metric == data.metric else ("lowest" if metric.endswith("_s") and "per_s" not in metric else "highest")
        h = ax.plot([x], [f.median], "*", ms=17, color=ORANGE, mec="white", mew=0.8, zorder=6)[0]
        h.set_label(f"{word}: {data.describe_label(best)}, {human(f.median, unit)}")
        handles.insert(0, h)
    return handles


def limit_line(ax: Axes, metric: str, limits: dict[str, float]) -> Line2D | None:
    """The device's limit from a calibration as a red dashed line; None without one for this metric."""
    key_unit = LIMIT_FOR_METRIC.get(metric)
    if not key_unit:
        return None
    value = limits.get(key_unit[0])
    if not value or not math.isfinite(value):
        return None
    h = ax.axhline(value, color=RED, ls="--", lw=1.6, zorder=2, gid="device-limit")
    h.set_label(f"device limit (fio): {human(value, key_unit[1])}")
    return h


def y_top(figs: list[SettingFigures], limits: dict[str, float], metric: str) -> float:
    """The top of the y axis: above every run, every interval and the device's limit."""
    top = max(max(f.values + [f.ci_high]) for f in figs)
    key_unit = LIMIT_FOR_METRIC.get(metric)
    if key_unit and limits.get(key_unit[0]):
        top = max(top, float(limits[key_unit[0]]))
    return top * 1.12 if top > 0 else 1.0


def _linear_step(xs: list[float]) -> float:
    """How far a step of the dots' offset goes on a linear axis (a log2 axis doubles instead)."""
    span = (max(xs) - min(xs)) if xs else 1.0
    return span / max(len(xs), 1) * 0.6 or 1.0


__all__ = ["LIMIT_FOR_METRIC", "best_and_close", "draw_runs_and_median", "generic_sweep", "limit_line", "mark_best", "y_top"]
