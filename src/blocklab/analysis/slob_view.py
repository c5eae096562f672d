"""SLOB views (seed 003): saturation points, the "petal" figures and a table.

Input `rows`: results of a `slob` run, as ResultRow objects (RunDir.rows()),
dicts with a "metrics" dict (results.jsonl lines), or flat metric dicts. Rows
that failed or carry no read_iops are skipped. Repeats of one point (same
series and session count) are reduced to their median.

A series is one update share (and one block size, when the rows hold more
than one): its points, in session order, trace a "petal": IOPS and latency
grow with sessions until the CPU or the device is exhausted, then IOPS stop
rising (or fall back) while latency keeps growing.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..units import label_of

RISE = 1.05  # saturated: within 5 % of the series' highest read IOPS
LIMIT_SPAN = 3.0  # a device limit further than this many times the busiest point is written, not drawn
_MARKERS = ("o", "s", "^", "D", "v", "P")
_LABEL_OFFSETS = ((5, 4), (5, -11), (-5, 4), (-5, -11))  # session labels of neighbouring series apart

FIELDS = ("sessions", "update_pct", "block_size", "read_iops", "mb_per_s", "read_latency_ms", "ops_per_s", "cpu_busy_pct")


@dataclass(frozen=True)
class SlobPoint:
    sessions: int
    update_pct: float
    block_size: int | None
    read_iops: float
    mb_per_s: float
    read_latency_ms: float
    ops_per_s: float
    cpu_busy_pct: float
    n: int = 1  # repeats reduced into this point


@dataclass(frozen=True)
class Saturation:
    update_pct: float
    block_size: int | None
    sessions: int  # the saturation point's session count
    read_iops: float
    mb_per_s: float
    read_latency_ms: float
    stopped: bool  # True: more sessions were tried and added <= 5 %; False: the last point (still rising)

    @property
    def label(self) -> str:
        return series_label(self.update_pct, self.block_size)


def series_label(update_pct: float, block_size: int | None) -> str:
    text = f"{update_pct:g}% updates"
    return f"{text}, {block_size // 1024}k blocks" if block_size else text


def _metrics(row: Any) -> dict[str, Any] | None:
    if hasattr(row, "metrics"):  # ResultRow
        if not getattr(row, "ok", True):
            return None
        return dict(row.metrics)
    if isinstance(row, dict):
        if "metrics" in row:
            if row.get("status", "ok") != "ok":
                return None
            return dict(row["metrics"])
        return dict(row)
    return None


def _median_of(metrics: list[dict[str, Any]], name: str) -> float:
    values = [float(m[name]) for m in metrics if m.get(name) is not None]
    return statistics.median(values) if values else math.nan  # not measured (e.g. CPU in awr_info output)


def points(rows: Iterable[Any]) -> dict[tuple[float, int | None], list[SlobPoint]]:
    """Series key (update_pct, block_size or None) -> its points in session order (repeats: median)."""
    groups: dict[tuple[float, int, int | None], list[dict[str, Any]]] = {}
    for row in rows:
        m = _metrics(row)
        if not m or m.get("read_iops") is None or m.get("sessions") is None:
            continue
        bs = m.get("block_size")
        key = (float(m.get("update_pct", 0.0)), int(m["sessions"]), int(bs) if bs else None)
        groups.setdefault(key, []).append(m)
    block_sizes = {k[2] for k in groups}
    keep_bs = len(block_sizes) > 1
    out: dict[tuple[float, int | None], list[SlobPoint]] = {}
    for (pct, sessions, bs), ms in groups.items():
        p = SlobPoint(
            sessions, pct, bs, _median_of(ms, "read_iops"), _median_of(ms, "mb_per_s"), _median_of(ms, "read_latency_ms"),
            _median_of(ms, "ops_per_s"), _median_of(ms, "cpu_busy_pct"), len(ms),
        )
        out.setdefault((pct, bs if keep_bs else None), []).append(p)
    return {k: sorted(v, key=lambda p: p.sessions) for k, v in sorted(out.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0))}


def saturation_points(rows: Iterable[Any]) -> list[Saturation]:
    """Per series, the saturation point: the fewest sessions whose read IOPS
    come within 5 % of the series' highest (the petal's turning point, the
    seed's "optimum number of sessions": more sessions add no more than 5 %).
    stopped=True when more sessions were tried beyond it; False when it is
    the last point (still rising within the sessions tried). Measuring the
    whole series against its maximum, not each point against the previous one,
    keeps a noisy dip on the way up from being taken for saturation."""
    out = []
    for (pct, bs), pts in points(rows).items():
        top = max(p.read_iops for p in pts)
        chosen = next(p for p in pts if p.read_iops * RISE >= top)
        stopped = chosen is not pts[-1]
        out.append(Saturation(pct, bs, chosen.sessions, chosen.read_iops, chosen.mb_per_s, chosen.read_latency_ms, stopped))
    return out


def device_series(rows: Iterable[Any], device: Mapping[str, Mapping[str, float]]) -> dict[tuple[float, int | None], list[tuple[int, Mapping[str, float]]]]:
    """The device twin's points (setting label -> read_iops, mb_per_s, read_latency_ms,
    analysis/efficiency.device_points) per series, in session order, keyed like points()."""
    rows = list(rows)
    series = points(rows)
    keep_bs = any(bs for _, bs in series)
    out: dict[tuple[float, int | None], dict[int, Mapping[str, float]]] = {}
    for row in rows:
        m = _metrics(row)
        settings = getattr(row, "settings", None)
        if not m or settings is None or m.get("sessions") is None:
            continue
        point = device.get(label_of(settings))
        if point is None:
            continue
        bs = m.get("block_size")
        key = (float(m.get("update_pct", 0.0)), int(bs) if bs and keep_bs else None)
        out.setdefault(key, {})[int(m["sessions"])] = point
    return {k: sorted(v.items()) for k, v in out.items()}


def petal_figures(rows: Iterable[Any], limits: dict[str, Any] | None = None,
                  device: Mapping[str, Mapping[str, float]] | None = None) -> tuple[Any, Any]:
    """(latency vs IOPS, latency vs MB/s): matplotlib Figures, one line per
    series joined in session order, each point labelled with its session
    count, the saturation point ringed. `limits` (e.g. from a calibration:
    {"max_small_iops": 136000, "max_mb_per_s": 3300}, numbers or objects with
    .value) draws the device's limits as vertical dashed lines; a limit more
    than LIMIT_SPAN times beyond the busiest point would squeeze the petals
    into a corner, so it is written at the right edge instead (value, and the
    share of it the busiest point reaches).

    With several block sizes (MariaDB's page-size axis) the colour is the block
    size and the marker the update share, as in the seed's cluttered plot.

    `device` (setting label -> the device twin's read_iops, mb_per_s and
    read_latency_ms) draws the disk's own petal beside each series: fio replaying
    the same I/O, dashed, in the series' colour."""
    from matplotlib.figure import Figure

    rows = list(rows)
    series = points(rows)
    sat = {(s.update_pct, s.block_size): s for s in saturation_points(rows)}
    limits = limits or {}
    twins = device_series(rows, device) if device else {}
    block_sizes = sorted({bs for _, bs in series if bs})
    pcts = sorted({pct for pct, _ in series})
    many = len(series) > 6
    figures = []
    for x_name, x_label, limit_key, limit_text in (
        ("read_iops", "read IOPS", "max_small_iops", "device max small-I/O IOPS"),
        ("mb_per_s", "MB/s (reads + writes)", "max_mb_per_s", "device max MB/s"),
    ):
        fig = Figure(figsize=(10.5 if many else 8, 5.5), dpi=100)
        ax = fig.add_subplot(1, 1, 1)
        for i, (key, pts) in enumerate(series.items()):
            pct, bs = key
            if block_sizes and bs is not None:  # several block sizes: every series has one
                color, marker = f"C{block_sizes.index(bs) % 10}", _MARKERS[pcts.index(pct) % len(_MARKERS)]
            else:
                color, marker = f"C{i % 10}", "o"
            xs = [getattr(p, x_name) for p in pts]
            ys = [p.read_latency_ms for p in pts]
            s = sat.get(key)
            note = f"saturated at {s.sessions} sessions" if s and s.stopped else f"still rising at {pts[-1].sessions} sessions"
            ax.plot(xs, ys, "-", marker=marker, color=color, label=f"{series_label(*key)} ({note})", markersize=5, linewidth=1.5)
            dx, dy = _LABEL_OFFSETS[i % len(_LABEL_OFFSETS)]
            for p, x, y in zip(pts, xs, ys):
                ax.annotate(str(p.sessions), (x, y), textcoords="offset points", xytext=(dx, dy), fontsize=8, color=color,
                            ha="left" if dx > 0 else "right")
            if s is not None and s.stopped:
                ax.plot([getattr(s, x_name)], [s.read_latency_ms], "o", markersize=14, markerfacecolor="none",
                        markeredgecolor=color, markeredgewidth=2)
            twin = [(n, tp) for n, tp in twins.get(key, []) if math.isfinite(tp.get(x_name, math.nan))
                    and math.isfinite(tp.get("read_latency_ms", math.nan))]
            if twin:  # the disk's own petal for the same I/O, each point labelled with the reads fio kept in flight
                ax.plot([tp[x_name] for _, tp in twin], [tp["read_latency_ms"] for _, tp in twin], "--", marker="x",
                        color=color, markersize=6, linewidth=1.2, alpha=0.8)
                for _, tp in twin:
                    if tp.get("iodepth"):
                        ax.annotate(f"qd{tp['iodepth']:.0f}", (tp[x_name], tp["read_latency_ms"]), textcoords="offset points",
                                    xytext=(dx, -dy), fontsize=7, color=color, alpha=0.8, ha="left" if dx > 0 else "right")
        if twins:
            ax.plot([], [], "--", marker="x", color="black", linewidth=1.2, label="the disk for the same I/O (fio, device twin)")
        busiest = max([getattr(p, x_name) for pts in series.values() for p in pts]
                      + [p.get(x_name, 0.0) for pts in twins.values() for _, p in pts if math.isfinite(p.get(x_name, math.nan))],
                      default=0.0)
        right = busiest * 1.12 if busiest > 0 else 1.0
        limit = limits.get(limit_key)
        if limit is not None:
            value = float(getattr(limit, "value", limit))
            if value <= busiest * LIMIT_SPAN or busiest <= 0:
                ax.axvline(value, linestyle="--", color="grey", linewidth=1.2, label=f"{limit_text} ({value:,.0f})")
                right = max(right, value * 1.05)
            else:
                ax.annotate(
                    f"{limit_text}: {value:,.0f}, off scale \u2192\n(the busiest point reaches {100 * busiest / value:.0f} % of it)",
                    xy=(1.0, 0.97), xycoords="axes fraction", ha="right", va="top", fontsize=8, color="dimgrey",
                    bbox={"boxstyle": "round,pad=0.3", "facecolor": "white", "edgecolor": "lightgrey"},
                )
        ax.plot([], [], "o", markersize=10, markerfacecolor="none", markeredgecolor="black", label="saturation: more sessions add \u2264 5 % IOPS")
        ax.set_xlabel(x_label)
        ax.set_ylabel(f"read latency (ms, {_latency_source(rows)})")
        ax.set_xlim(0, right)
        top = max([p.read_latency_ms for pts in series.values() for p in pts]
                  + [p["read_latency_ms"] for pts in twins.values() for _, p in pts if math.isfinite(p.get("read_latency_ms", math.nan))],
                  default=1.0)
        ax.set_ylim(0, top * 1.2 if top > 0 else 1.0)
        ax.grid(True, alpha=0.3)
        ax.set_title(f"SLOB: read latency against {x_label}; points labelled with sessions", fontsize=11)
        if many:
            ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
        else:
            ax.legend(fontsize=8, loc="lower right")
        fig.tight_layout()
        figures.append(fig)
    return figures[0], figures[1]


def _latency_source(rows: list[Any]) -> str:
    """Where the engine's read times came from (the axis says which clock it is).
    Imported rows name theirs in notes["latency_source"] (e.g. an AWR event)."""
    for r in rows:
        notes = getattr(r, "notes", None) if not isinstance(r, dict) else r.get("notes")
        if isinstance(notes, dict) and notes.get("latency_source"):
            return str(notes["latency_source"])
    if any("data_file.read_s" in (_metrics(r) or {}) for r in rows):
        return "performance_schema"
    return "pg_stat_io"


def saturation_headline(rows: Iterable[Any]) -> str:
    """'Best sessions: 40 (0% updates, 4k blocks) · 32 (30% updates, 4k blocks)': a report's headline."""
    parts = [f"{s.sessions}{'' if s.stopped else '+'} ({s.label})" for s in saturation_points(rows)]
    return "Best sessions: " + " \u00b7 ".join(parts) if parts else ""


def saturation_text(rows: Iterable[Any]) -> str:
    """The best session count of every series in one sentence, for a verdict:
    the petal's turning point, or the last point when the series still rises."""
    parts = []
    for s in saturation_points(rows):
        figures = f"{s.read_iops:,.0f} read IOPS at {s.read_latency_ms:.3f} ms"
        if s.stopped:
            parts.append(f"{s.label}: {s.sessions} sessions ({figures})")
        else:
            parts.append(f"{s.label}: still rising at {s.sessions} sessions, the most tried ({figures})")
    if not parts:
        return ""
    return ("Best sessions count per series (where the petal turns: the fewest sessions within 5% of the series' "
            f"highest read IOPS): {'; '.join(parts)}.")


def slob_table(rows: Iterable[Any]) -> Any:
    """A rich Table: every point (series, sessions, IOPS, MB/s, latency, ops/s, CPU) with the saturation point marked."""
    from rich import box
    from rich.table import Table

    rows = list(rows)
    sat = {(s.update_pct, s.block_size): s for s in saturation_points(rows)}
    table = Table(box=box.SIMPLE_HEAD, title="SLOB points (saturation: the fewest sessions within 5 % of the series' highest read IOPS)",
                  title_justify="left", pad_edge=False)
    for name in ("series", "sessions", "read IOPS", "MB/s", "read ms", "ops/s", "CPU %", ""):
        table.add_column(name, justify="left" if name in ("series", "") else "right", no_wrap=True)
    for key, pts in points(rows).items():
        s = sat.get(key)
        for p in pts:
            mark = ""
            if s is not None and p.sessions == s.sessions:
                mark = "saturation" if s.stopped else "still rising (last point)"
            table.add_row(
                series_label(*key), str(p.sessions), f"{p.read_iops:,.0f}", f"{p.mb_per_s:,.0f}",
                f"{p.read_latency_ms:.3f}", _or_dash(p.ops_per_s, "{:,.0f}"), _or_dash(p.cpu_busy_pct, "{:.0f}"), mark,
            )
        table.add_section()
    return table


def _or_dash(value: float, fmt: str) -> str:
    return "\u2013" if math.isnan(value) else fmt.format(value)


__all__ = ["SlobPoint", "Saturation", "points", "saturation_points", "saturation_text", "saturation_headline", "petal_figures", "slob_table",
           "series_label"]
