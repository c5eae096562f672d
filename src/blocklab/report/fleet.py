"""The report's hosts section for a fleet run: a table of the hosts side by side
(each host's best, its median with the interval, what the fleet's setting costs
there, the disk it measured) and one picture with a curve per host on the same
axes. Nothing here for a local run (fleet_context returns None).

The figures come from summary.json's `fleet` part (written by the coordinator
after every row); when that is missing or older than the rows they are
recomputed from results.jsonl with the same analysis (analysis/fleet.py)."""

from __future__ import annotations

import math
from typing import Any

from matplotlib.artist import Artist
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from ..analysis.fleet import Sweep, fleet_summary
from ..jsonvalue import as_object
from ..units import first_upper, human, metric_title
from .data import RunData

PLOT_ID = "fleet-hosts"
# one colour per host, readable on white and told apart in grey print (tab10 without its greys)
HOST_COLOURS = ("#1f5fa8", "#e0701f", "#2e8b3a", "#b3261e", "#7b4fb0", "#8c564b", "#d4509a", "#17a2b8", "#a69b00")


def is_fleet(data: RunData) -> bool:
    return isinstance(data.plan.get("fleet"), dict)


def hosts_of(data: RunData) -> list[str]:
    return list((data.plan.get("fleet") or {}).get("hosts") or {})


def fleet_part(data: RunData) -> dict[str, Any]:
    """summary.json's `fleet` (per-host analyses, the verdict's parts), recomputed from the
    rows when the summary is missing, stale or was recomputed without it."""
    saved = data.summary.get("fleet")
    counted = sum(int((s or {}).get("cells_ok") or 0) + int((s or {}).get("cells_failed") or 0)
                  for s in (saved or {}).get("hosts", {}).values())
    if saved and not data.summary_recomputed and counted == len(data.rows):
        return dict(saved)
    sweep = _sweep(data)
    planned = {h: int(info.get("cells") or 0) for h, info in (data.plan.get("fleet") or {}).get("hosts", {}).items()}
    return dict(as_object(fleet_summary(sweep, data.rows, planned, name=data.name, seed=int(data.seed or 0),
                                        lost=(saved or {}).get("lost"))["fleet"]))


def _sweep(data: RunData) -> Sweep:
    saved = (data.summary.get("fleet") or {}).get("sweep")
    if saved:
        return Sweep.from_dict(saved)
    labels = data.labels
    return Sweep(metric=data.metric, goal=data.goal, labels=labels, settings_by_label=data.settings_by_label,
                 baseline=data.summary.get("baseline"), practical=float((data.spec.get("measure") or {}).get("practical") or 0.0),
                 seed=int(data.seed or 0), describe={label: data.describe_label(label) for label in labels},
                 knob_label=", ".join(data.knobs) or "setting", unit=data.unit)


def fleet_context(data: RunData) -> dict[str, object] | None:
    """What the template's hosts section shows; None for a run on one machine."""
    if not is_fleet(data):
        return None
    part = fleet_part(data)
    sweep = _sweep(data)
    choice = part.get("choice")
    envs = data.environment.get("hosts") or {}
    rows = []
    for host in hosts_of(data):
        s = (part.get("hosts") or {}).get(host) or {}
        env = envs.get(host) or {}
        best = s.get("best_label")
        entry = (s.get("settings") or {}).get(best) or {}
        n = int(entry.get("n") or 0)
        if host in part.get("agree", []):
            there, mark = "best", "agree"
        elif host in part.get("close", []):
            there, mark = "indistinguishable from the best", "close"
        elif host in (part.get("differ") or {}):
            d = part["differ"][host]
            single = d.get("n", 0) < 2 or n < 2
            ci = "" if single or not _finite(d.get("ci_low")) else f" [{d['ci_low']:.2f}, {d['ci_high']:.2f}]"
            there, mark = (f"{d['factor']:.2f}× slower{ci}" if d.get("n") else "not measured"), "differ"
        else:
            there, mark = "no measurement yet", "empty"
        device = str(env.get("device") or "")  # rotational or not: in `blocklab fleet status` (the table stays narrow)
        rows.append({
            "host": host,
            "colour": HOST_COLOURS[hosts_of(data).index(host) % len(HOST_COLOURS)],
            "cells": f"{int(s.get('cells_ok') or 0)}/{int(s.get('cells_planned') or 0)}",
            "best": sweep.describe_setting(best) if best else "–",
            "median": human(entry.get("median"), sweep.unit) if best else "–",
            "ci": (f"{human(entry.get('ci_low'))} – {human(entry.get('ci_high'))}" if n >= 2 else "one run: no interval") if best else "–",
            "there": there,
            "mark": mark,
            "device": device,
            "file_system": str(env.get("file_system") or ""),
            "engine": f"{env.get('engine', '')} {env.get('engine_version', '')}".strip(),
            "machine": str(env.get("hostname") or ""),
            "verdict": str(s.get("verdict") or "No measurement yet."),
            "lost": (part.get("lost") or {}).get(host, ""),
        })
    return {
        "hosts": rows,
        "choice": sweep.describe_setting(choice) if choice else "",
        "verdict": str(part.get("verdict") or ""),
        "metric": sweep.metric,
        "share_disk": bool((data.plan.get("fleet") or {}).get("share_disk")),
        "shared": _shared_disks(data),
    }


def _shared_disks(data: RunData) -> list[str]:
    """'host-a, host-b, host-c took turns on one disk' lines, for the caption."""
    groups: dict[str, list[str]] = {}
    for host, disk in ((data.plan.get("fleet") or {}).get("disks") or {}).items():
        groups.setdefault(str(disk), []).append(host)
    return [", ".join(g) for g in groups.values() if len(g) > 1]


def _finite(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


# ---------------------------------------------------------------------- the picture
def fleet_figure(data: RunData, limits: dict[str, float]) -> tuple[str, str, str, Figure] | None:
    """The hosts side by side: the run's metric per setting, one curve per host (its
    median, its 95% band, its best starred) on the same axes; bars grouped by
    setting when the sweep is not one numeric knob."""
    from .plot_style import (
        ScaledFormatter,
        axis_values,
        knob_axis_label,
        knob_ticks,
        log2_axis,
        new_figure,
        single_numeric_knob,
    )

    if not is_fleet(data) or not data.ok_rows:
        return None
    part = fleet_part(data)
    sweep = _sweep(data)
    hosts = hosts_of(data)
    unit = sweep.unit
    title = f"{first_upper(_metric_words(sweep.metric))} per host"
    fig, ax = new_figure(data, title)
    ax.set_title(_subtitle(data, part, hosts), loc="left", color="#4d4d4d", pad=10)
    knob = single_numeric_knob(data)
    handles: list[Artist] = []
    top = 0.0
    labels = [label for label in data.labels if any(((part.get("hosts") or {}).get(h) or {}).get("settings", {}).get(label, {}).get("n") for h in hosts)]
    for i, host in enumerate(hosts):
        colour = HOST_COLOURS[i % len(HOST_COLOURS)]
        settings = (((part.get("hosts") or {}).get(host) or {}).get("settings")) or {}
        points = [(label, settings[label]) for label in labels if (settings.get(label) or {}).get("n")]
        if not points:
            continue
        best = ((part.get("hosts") or {}).get(host) or {}).get("best_label")
        if knob is not None:
            xs = [data.settings_by_label[label][knob] for label, _ in points]
            order = sorted(range(len(xs)), key=lambda k: xs[k])
            xs = [xs[k] for k in order]
            pts = [points[k] for k in order]
            med = [float(p["median"]) for _, p in pts]
            lo = [float(p.get("ci_low", p["median"])) for _, p in pts]
            hi = [float(p.get("ci_high", p["median"])) for _, p in pts]
            ax.fill_between(xs, lo, hi, color=colour, alpha=0.12, lw=0, zorder=1)
            line = ax.plot(xs, med, "-o", color=colour, lw=2.0, ms=5, zorder=3, label=host)[0]
            for (label, p), x in zip(pts, xs):
                if label == best:
                    ax.plot([x], [float(p["median"])], "*", ms=16, color=colour, mec="white", mew=0.8, zorder=5)
            top = max([top, *hi, *med])
        else:
            width = 0.8 / max(len(hosts), 1)
            pos = [labels.index(label) - 0.4 + width * (i + 0.5) for label, _ in points]
            med = [float(p["median"]) for _, p in points]
            lo = [max(m - float(p.get("ci_low", m)), 0) for m, (_, p) in zip(med, points)]
            hi = [max(float(p.get("ci_high", m)) - m, 0) for m, (_, p) in zip(med, points)]
            ax.bar(pos, med, width=width * 0.92, color=colour, zorder=2, label=host,
                   edgecolor=["black" if label == best else "white" for label, _ in points])
            ax.errorbar(pos, med, yerr=[lo, hi], fmt="none", ecolor="#4d4d4d", capsize=3, lw=1.1, zorder=3)
            line = Line2D([], [], color=colour, lw=6, label=host)
            top = max([top, *(m + h for m, h in zip(med, hi))])
        handles.append(line)
    if knob is not None:
        xs_all = [data.settings_by_label[label][knob] for label in labels]
        log2 = log2_axis(axis_values(data, knob, xs_all))
        knob_ticks(ax, data, knob, xs_all, log2)
        ax.set_xlabel(knob_axis_label(data, knob, log2))
        handles.append(Line2D([], [], color="#4d4d4d", marker="*", ls="none", ms=13, label="each host's best"))
    else:
        ax.set_xticks(range(len(labels)), [sweep.describe_setting(label).replace(", ", "\n") for label in labels])
        ax.grid(axis="x", visible=False)
        ax.set_xlabel(sweep.knob_label)
    ax.set_ylim(bottom=0, top=top * 1.12 if top > 0 else 1.0)
    ax.yaxis.set_major_formatter(ScaledFormatter())
    better = "higher is better" if sweep.goal == "max" else "lower is better"
    ax.set_ylabel(f"{unit}  ({better})" if unit else f"{sweep.metric}  ({better})")
    fig.legend(handles, [str(h.get_label()) for h in handles], loc="outside lower center", ncol=min(len(handles), 6), frameon=False)
    caption = (f"{first_upper(_metric_words(sweep.metric))} per setting on each host, on the same axes: "
               + ("each line joins a host's medians, its band is their 95% bootstrap interval and its star the host's best."
                  if knob is not None else "each bar is a host's median with its 95% bootstrap interval; a black edge marks the host's best."))
    return PLOT_ID, f"{title}: the hosts side by side", caption, fig


def _subtitle(data: RunData, part: dict[str, Any], hosts: list[str]) -> str:
    """The run's context and the runs per setting *on each host* (the pooled plots count all hosts')."""
    from .plot_style import wrap_line

    counts = [int(e.get("n") or 0) for h in hosts for e in (((part.get("hosts") or {}).get(h) or {}).get("settings") or {}).values()
              if e.get("n")]
    line = " · ".join(p for p in data.context_line().split(" · ") if not p.startswith("host "))
    extra = [f"{len(hosts)} hosts"]
    if counts:
        extra.append(f"n = {min(counts)} run{'s' if max(counts) > 1 else ''} per setting on each host" if min(counts) == max(counts)
                     else f"n = {min(counts)}–{max(counts)} runs per setting on each host")
    if not data.complete:
        extra.append(f"PARTIAL RUN: {len({r.cell_id for r in data.rows})} of {data.cells_planned} cells")
    return wrap_line(line, 110) + "\n" + " · ".join(extra)


def _metric_words(metric: str) -> str:
    return metric_title(metric)


__all__ = ["PLOT_ID", "fleet_context", "fleet_figure", "fleet_part", "hosts_of", "is_fleet"]
