"""The SLOB "petal" figures (seed 003): read latency against IOPS and against
MB/s, one line per series in session order (analysis/slob_view.py computes the
points and their saturation)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..analysis.slob_view import SlobRow, device_series, points, saturation_points, series_label

if TYPE_CHECKING:
    from matplotlib.figure import Figure

LIMIT_SPAN = 3.0  # a device limit further than this many times the busiest point is written, not drawn
_MARKERS = ("o", "s", "^", "D", "v", "P")
_LABEL_OFFSETS = ((5, 4), (5, -11), (-5, 4), (-5, -11))  # session labels of neighbouring series apart


def petal_figures(rows: Iterable[SlobRow], limits: dict[str, Any] | None = None,
                  device: Mapping[str, Mapping[str, float]] | None = None, latency_source: str = "") -> tuple[Figure, Figure]:
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
        ax.set_ylabel(f"read latency (ms, {_latency_source(rows, latency_source)})")
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


def _latency_source(rows: list[SlobRow], declared: str) -> str:
    """Where the engine's read times came from (the axis says which clock it is).
    Imported rows name theirs in notes["latency_source"] (e.g. an AWR event);
    a measured run's engine declared its own."""
    for r in rows:
        notes = getattr(r, "notes", None) if not isinstance(r, dict) else r.get("notes")
        if isinstance(notes, dict) and notes.get("latency_source"):
            return str(notes["latency_source"])
    return declared or "the engine's read timer"


__all__ = ["LIMIT_SPAN", "petal_figures"]
