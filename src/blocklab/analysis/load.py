"""Sweeps with load axes: the knobs that say how much work there is, not how to do it.

A workload declares which of its options are load (LOAD_AXES: slob's sessions and
update share): they are the x axis of a saturation curve and its series, never
settings to rank ("sessions=16 ... sessions=1 is 4.1x slower" told a DBA nothing).
The verdict then ranks only the real knobs, within each load level, or, with no
real knob swept, says where each series saturates.

    load_axes_of("slob", ["workload.sessions", "workload.update_pct", "block_size"])
    -> ["workload.sessions", "workload.update_pct"]
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..results import ResultRow
from ..spec import WORKLOAD_AXIS, Scalar
from ..units import human, label_of
from .entry import figure_of

SATURATED = 1.05  # a point within 5% of its series' best is where more load adds nothing (slob_view.RISE)


def load_axes_of(workload_kind: str, knobs: Iterable[str]) -> list[str]:
    """The swept knobs that are the workload's load axes (its class's LOAD_AXES), in sweep order."""
    from ..workloads import workload_class

    try:
        declared = set(getattr(workload_class(workload_kind), "LOAD_AXES", ()))
    except Exception:  # an imported run's unknown workload: nothing declared
        return []
    return [k for k in knobs if k.startswith(WORKLOAD_AXIS) and k[len(WORKLOAD_AXIS):] in declared]


def _short(knob: str) -> str:
    return knob.removeprefix(WORKLOAD_AXIS)


def level_text(settings: Mapping[str, object], axes: list[str]) -> str:
    """'sessions=8, update_pct=30': a load level as a reader writes it."""
    return ", ".join(f"{_short(k)}={settings[k]}" for k in axes if k in settings)


def apply_load(
    summary: dict[str, Any],
    rows: list[ResultRow],
    *,
    axes: list[str],
    settings_by_label: Mapping[str, Mapping[str, Scalar]],
    describe: Callable[[str], str],
    analyse_level: Callable[[list[ResultRow], list[str]], dict[str, Any]],
    unit: str = "",
) -> None:
    """Rewrite a summary (in place) for a sweep with load axes: no best over all
    settings; the real knobs ranked within each load level (analyse_level gives a
    level's own summary), else each series' saturation point."""
    from .verdict import compose

    if not axes or not summary.get("settings"):
        return
    knobs = list(next(iter(settings_by_label.values()), {}).keys())
    swept = {k for k in knobs if len({str(s.get(k)) for s in settings_by_label.values()}) > 1}  # one value: fixed, not a knob
    real = [k for k in knobs if k not in axes and k in swept]
    summary["load"] = {"axes": axes, "knobs": real}
    summary["best"], summary["best_label"] = {}, None
    summary["as_good"], summary["undecided"] = [], []
    levels: dict[str, list[str]] = {}
    for label, entry in summary["settings"].items():
        settings = settings_by_label.get(label) or entry.get("settings") or {}
        levels.setdefault(level_text(settings, axes), []).append(label)
    if real:
        lines = _rank_within_levels(summary, rows, levels, real, settings_by_label, describe, analyse_level)
    else:
        lines = _saturation_lines(summary, axes, settings_by_label, unit)
    summary["verdict_options"] = [lines]
    summary["verdict"] = compose(summary["verdict_options"])
    summary.setdefault("explain", []).insert(0, (
        f"{', '.join(_short(a) for a in axes)} {'is' if len(axes) == 1 else 'are'} the load (declared by the workload), "
        "not settings to choose: " + ("each knob is ranked within each load level, against the best at that level."
                                       if real else "the verdict says where each series stops gaining from more load.")))


def _real_part(label: str, real: list[str], describe: Callable[[str], str]) -> str:
    """The real knobs' part of a setting's description: 'block_size=4 kB'."""
    parts = [p for p in describe(label).split(", ") if any(p.startswith(f"{k}=") for k in real)]
    if len(real) == 1 and len(parts) == 1:
        return parts[0].split("=", 1)[1]
    return ", ".join(parts) or label


def _rank_within_levels(summary: dict[str, Any], rows: list[ResultRow], levels: dict[str, list[str]], real: list[str],
                        settings_by_label: Mapping[str, Mapping[str, Scalar]], describe: Callable[[str], str],
                        analyse_level: Callable[[list[ResultRow], list[str]], dict[str, Any]]) -> list[str]:
    wins: dict[str, list[str]] = {}
    slower: list[float] = []
    open_levels = 0
    blocks_needed: list[int] = []
    for level, labels in levels.items():
        own = [r for r in rows if label_of(r.settings) in labels]
        sub = analyse_level(own, labels)
        best = sub.get("best_label")
        if not best:
            continue
        wins.setdefault(_real_part(best, real, describe), []).append(level)
        for label in labels:
            entry, mine = summary["settings"].get(label), (sub.get("settings") or {}).get(label) or {}
            if entry is None:
                continue
            for key in ("ratio_to_best", "ratio_to_best_ci_low", "ratio_to_best_ci_high", "standing", "blocks_needed"):
                entry[key] = mine.get(key)
            entry["best_at_load"] = label == best
            if mine.get("standing") == "slower" and mine.get("ratio_to_best"):
                r = float(mine["ratio_to_best"])
                slower.append(1.0 / r if summary.get("goal") == "max" else r)
            if mine.get("standing") == "undecided":
                open_levels += 1
                if mine.get("blocks_needed"):
                    blocks_needed.append(int(mine["blocks_needed"]))
    total = len(levels)
    knob = ", ".join(real)
    ordered = sorted(wins.items(), key=lambda kv: -len(kv[1]))
    first = f"Best {knob} at each load level: " + "; ".join(
        f"{value} at {len(where)} of {total}" + (f" ({' · '.join(where)})" if len(where) <= 2 and len(where) < total else "")
        for value, where in ordered) + "."
    second = []
    if slower:
        span = f"{min(slower):.2f}x" if f"{min(slower):.2f}" == f"{max(slower):.2f}" else f"{min(slower):.2f}x to {max(slower):.2f}x"
        second.append(f"Where separated, the others are {span} slower")
    if open_levels:
        blocks = int((summary.get("analysis") or {}).get("blocks") or 0)
        more = f"about {max(blocks_needed)} would: --repeats {max(blocks_needed)}" if blocks_needed else "repeat to measure the noise: --repeats 3"
        second.append(f"{blocks} block{'s' if blocks != 1 else ''} cannot separate {open_levels} setting(s) from their level's best ({more})")
    return [first, *(["; ".join(second) + "."] if second else [])]


def _saturation_lines(summary: dict[str, Any], axes: list[str], settings_by_label: Mapping[str, Mapping[str, Scalar]],
                      unit: str) -> list[str]:
    """No real knob: per series (the other load axes), the fewest of the first axis
    (the curve's x) whose figure is within 5% of the series' best."""
    x_axis, rest = axes[0], axes[1:]
    series: dict[str, list[tuple[float, float]]] = {}
    for label, entry in summary["settings"].items():
        settings = settings_by_label.get(label) or {}
        value = figure_of(entry)[0]
        if x_axis not in settings or not isinstance(value, (int, float)) or not math.isfinite(value):
            continue
        series.setdefault(level_text(settings, rest) or "all", []).append((float(settings[x_axis]), float(value)))
    goal_max = summary.get("goal") != "min"
    parts = []
    for name, points in series.items():
        points.sort()
        top = max(v for _, v in points) if goal_max else min(v for _, v in points)
        at = next(p for p in points if (p[1] * SATURATED >= top if goal_max else p[1] <= top * SATURATED))
        rising = at is points[-1] and len(points) > 1
        where = f"still rising at {_short(x_axis)}={at[0]:g}" if rising else f"{_short(x_axis)}={at[0]:g}"
        parts.append(f"{name}: {where} ({human(at[1], unit)})")
    metric = summary.get("metric") or "the metric"
    return [f"No knob to rank: {_short(x_axis)} is the load. Saturation (the least load within 5% of the series' best "
            f"{metric}): " + "; ".join(parts) + "."]
