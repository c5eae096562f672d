"""SLOB views (seed 003): the points of a run and their saturation points (the
petal figures are drawn by report/slob_plot.py, the table by report/console_tables.py).

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
from typing import Any, TypeAlias

from ..results import ResultRow
from ..units import label_of

RISE = 1.05  # saturated: within 5 % of the series' highest read IOPS

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


# a SLOB point as the views take it: a result row, or its JSON form (results.jsonl), or its metrics alone
SlobRow: TypeAlias = ResultRow | Mapping[str, object]


def series_label(update_pct: float, block_size: int | None) -> str:
    text = f"{update_pct:g}% updates"
    return f"{text}, {block_size // 1024}k blocks" if block_size else text


def _metrics(row: SlobRow) -> dict[str, Any] | None:
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


def points(rows: Iterable[SlobRow]) -> dict[tuple[float, int | None], list[SlobPoint]]:
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


def saturation_points(rows: Iterable[SlobRow]) -> list[Saturation]:
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


def device_series(rows: Iterable[SlobRow], device: Mapping[str, Mapping[str, float]]) -> dict[tuple[float, int | None], list[tuple[int, Mapping[str, float]]]]:
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


def saturation_headline(rows: Iterable[SlobRow]) -> str:
    """'Best sessions: 40 (0% updates, 4k blocks) · 32 (30% updates, 4k blocks)': a report's headline."""
    parts = [f"{s.sessions}{'' if s.stopped else '+'} ({s.label})" for s in saturation_points(rows)]
    return "Best sessions: " + " \u00b7 ".join(parts) if parts else ""


def saturation_text(rows: Iterable[SlobRow]) -> str:
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


__all__ = ["SlobPoint", "Saturation", "device_series", "points", "saturation_points", "saturation_text", "saturation_headline",
           "series_label"]
