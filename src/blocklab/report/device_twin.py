"""The device twin in the report: the disk's own line on the plots, and the table
and words of the engine against it (analysis/efficiency.py holds the numbers).

Kept apart from the plots (scan_plot.py, plots.py) and html.py so those call one
function each: a run without pattern metrics or twin.json gets no line, no
table, no change.
"""

from __future__ import annotations

import math

from matplotlib.axes import Axes
from matplotlib.lines import Line2D

from ..analysis import efficiency
from ..analysis.efficiency import SettingEfficiency
from ..device.interleave import load_replays
from ..device.twin import load as load_twins
from ..units import first_upper, human, unit_of
from .data import RunData

GREEN = "#2e8b57"
_CACHE_KEY = "_blocklab_efficiency"  # kept on the RunData: every plot and the page share one analysis


def efficiencies(data: RunData) -> list[SettingEfficiency]:
    """Every setting against its twin (computed once per loaded run)."""
    cached = data.__dict__.get(_CACHE_KEY)
    if cached is None:
        cached = efficiency.analyse(data.rows, load_twins(data.path), order=data.labels, seed=int(data.seed or 0),
                                    replays=load_replays(data.path))
        data.__dict__[_CACHE_KEY] = cached
    return list(cached)


def has_device(data: RunData) -> bool:
    return any(e.has for e in efficiencies(data))


# ====================================================================== plots
def device_line(ax: Axes, data: RunData, knob: str, metric: str) -> tuple[Line2D | None, str]:
    """The disk's line on a sweep's axes: at each setting, what `metric` would be if
    the engine got all that fio gets for its I/O. Returns (legend handle, the caption's
    sentence), (None, '') when the run has no twin."""
    effs = efficiencies(data)
    values = efficiency.device_values(effs, data.ok_rows, metric)
    points = sorted((data.settings_by_label[label][knob], v) for label, v in values.items()
                    if label in data.settings_by_label and knob in data.settings_by_label[label])
    if not points:
        return None, ""
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    (handle,) = ax.plot(xs, ys, ls="--", color=GREEN, lw=1.8, marker="D", ms=5, zorder=3, gid="device-twin")
    handle.set_label("the disk for the same I/O (fio, device twin)" + ("" if metric == "mb_per_s" else f", as {unit_of(metric) or metric}"))
    bottom, top = ax.get_ylim()
    if max(ys) * 1.12 > top:
        ax.set_ylim(bottom, max(ys) * 1.12)
    return handle, plot_sentence(effs, data, metric)


def plot_sentence(effs: list[SettingEfficiency], data: RunData, metric: str) -> str:
    """The one sentence under a plot with the disk's line."""
    have = [e for e in effs if e.has]
    if not have:
        return ""
    kinds = sorted({e.pattern.kind for e in have if e.pattern})
    what = "MB/s" if metric == "mb_per_s" else ("rows a scan would return at that speed" if metric == "rows_per_s" else metric)
    best = next((e for e in have if e.label == data.summary.get("best_label")), None) or max(have, key=lambda e: e.median)
    return (f" Green dashed: the device twin, what fio gets from the same disk replaying each setting's I/O "
            f"({' and '.join(kinds)} of the engine's size, at its queue depth, direct or buffered as it was, on a file as "
            f"large as the data, on the same file system), drawn as {what}; at {data.describe_label(best.label)} "
            f"{data.engine} reaches {best.percent()} of it, and the gap between the lines is the engine's own cost.")


def petal_points(data: RunData) -> dict[str, dict[str, float]]:
    """Setting label -> the twin's read IOPS, MB/s and read latency, for the SLOB petals."""
    return efficiency.device_points(efficiencies(data))


PETAL_SENTENCE = (" Dashed lines with crosses: the device twin, fio replaying each point's I/O (the same page size, the "
                  "reads the engine kept in flight, qdN beside each cross, its writes beside them at its rate, on a file as "
                  "large as the sessions' tables): the disk's own petal, beside the engine's.")


# ====================================================================== the page
def html_context(data: RunData) -> dict[str, object]:
    """The report's 'engine against the device' section: empty when there is nothing to show."""
    effs = efficiencies(data)
    twins = load_twins(data.path)
    if not any(e.pattern is not None for e in effs) and twins is None:
        return {"rows": [], "status": "", "sentence": "", "commands": []}
    rows = []
    for e in effs:
        rows.append({
            "label": data.describe_label(e.label),
            "pattern": e.pattern.compact() if e.pattern else e.why_none,
            "engine": _rate(e.engine_rate, e.unit),
            "device": _rate(e.device_rate, e.unit) if e.has else "–",
            # an interval wholly above 100% is a twin that did not match: its reason, never a figure
            "efficiency": f"twin mismatch: {e.mismatch}" if e.mismatch else e.percent(),
            "busy": f"{e.util_pct:.0f}%" if math.isfinite(e.util_pct) else "–",
            "cpu": e.cpu_text(),
            "bottleneck": e.bottleneck or "–",
            "best": e.label == data.summary.get("best_label"),
        })
    status = ""
    if twins is None and data.summary.get("fleet"):  # `run --fleet` refuses the twin: say why, not how to add it
        status = "No device twin on a fleet run: each host's disk would need its own; run the recipe on one host to measure that disk's."
    elif twins is None:
        status = "No device twin for this run: `blocklab run --resume DIR --device-twin only` measures it."
    elif twins.status != "measured":
        status = f"Device twin {twins.status}: {twins.reason}."
    else:
        status = first_upper(twins.summary_line().removeprefix("device twin: ")) + "."
    commands = []
    if twins is not None:
        for twin in twins.twins.values():
            commands.append({"pattern": twin.pattern.describe(), "measured": twin.measured, "version": twin.fio_version,
                             "command": twin.command, "runs": ", ".join(human(r.iops, "IOPS") for r in twin.runs)})
    best = next((e for e in effs if e.label == data.summary.get("best_label")), None)
    return {
        "rows": rows,
        "status": status,
        "sentence": efficiency.sentence(effs, data.engine, data.describe_label, data.summary.get("best_label")),
        "verdict": efficiency.bottleneck_sentence(best, data.engine, data.describe_label) if best else "",
        "commands": commands,
    }


def _rate(x: float, unit: str) -> str:
    return human(x, unit) if math.isfinite(x) else "–"


__all__ = ["GREEN", "PETAL_SENTENCE", "device_line", "efficiencies", "has_device", "html_context", "petal_points", "plot_sentence"]
