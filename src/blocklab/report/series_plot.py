"""The per-second series of a timed run's points (slob, update): one small
panel per measured cell, the series its steadiness was judged on against
time, its warm-up shaded and a drifting point's title in red.

It answers "did this point settle?" the way a DBA reads an AWR report's
per-second graph, without opening results.jsonl.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from ..results import ResultRow
from ..units import SERIES_TITLES, label_of
from .data import RunData
from .plot_style import ScaledFormatter

MAX_PANELS = 48  # beyond this the panels are too small to read; the caption says how many are shown
COLUMNS = 6
TITLE_CHARS = 34  # a panel title's line, wrapped at the commas' spaces
BLUE = "#1f5fa8"
RED = "#b3261e"
SHADE = "#d9d9d9"
# the series a panel shows when the row does not name one (older rows): the first present
DEFAULT_KEYS = ("device_read_iops", "device_mb_per_s")


def _key_of(row: ResultRow) -> str | None:
    named = (row.notes.get("steady") or {}).get("series")
    if named and named in row.series:
        return str(named)
    return next((k for k in DEFAULT_KEYS if k in row.series), None)


def series_figure(data: RunData) -> tuple[Figure, str] | None:
    """(figure, caption), or None when no measured cell carries a series of two seconds or more."""
    rows = [r for r in data.rows if (r.ok or r.status.startswith("invalid")) and len(r.series.get("t", [])) >= 2 and _key_of(r)]
    if not rows:
        return None
    order = {label: i for i, label in enumerate(data.labels)}
    rows.sort(key=lambda r: (order.get(label_of(r.settings), math.inf), r.block, r.cell))
    shown = rows[:MAX_PANELS]
    columns = min(COLUMNS, len(shown))
    lines = math.ceil(len(shown) / columns)
    fig = Figure(figsize=(max(6.0, 2.1 * columns), 2.0 * lines + 0.9), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    keys = {k for r in shown if (k := _key_of(r))}
    fig.suptitle("Second by second: " + ", ".join(sorted(SERIES_TITLES.get(k, k) for k in keys)), x=0.01, ha="left")
    drifting = 0
    varying = [k for k in data.knobs if len({str(r.settings.get(k)) for r in shown}) > 1]
    for i, row in enumerate(shown):
        ax = fig.add_subplot(lines, columns, i + 1)
        key = _key_of(row)
        assert key is not None
        steady = row.notes.get("steady") or {}
        t, values = row.series["t"], row.series[key]
        warmup = float(steady.get("warmup_s") or 0.0)
        if warmup > 0:
            ax.axvspan(t[0], t[0] + warmup, color=SHADE, lw=0)
        ax.plot(t, values, color=BLUE, lw=1.2)
        ax.set_ylim(bottom=0)
        ax.tick_params(labelsize=7)
        is_drifting = bool(steady.get("drifting"))
        drifting += is_drifting
        # a panel is ~2 inches wide: at 7.5 pt, about 34 characters a line before it runs into the next
        title = textwrap.fill(_title(data, row.settings, varying), TITLE_CHARS) + f"\nblock {row.block + 1}" + (" · drifting" if is_drifting else "")
        ax.set_title(title, fontsize=7.5, color=RED if is_drifting else "black", loc="left")
        ax.yaxis.set_major_formatter(ScaledFormatter())
        ax.grid(True, alpha=0.3)
    fig.supxlabel("seconds into the point's timed run", fontsize=9)
    caption = (
        f"One panel per measured point (its setting and block), t in seconds from the start of its timed run; "
        f"grey: the warm-up left out (MSER-5); a red title: still drifting after it (trend over {_limit()} of the "
        f"mean, p < 0.05, over at least 10 s), counted but flagged. {drifting} of {len(shown)} drifting."
    )
    if len(rows) > len(shown):
        caption += f" The first {len(shown)} of {len(rows)} points are shown."
    return fig, caption


def _title(data: RunData, settings: Mapping[str, object], varying: list[str]) -> str:
    """The knobs that differ between the panels, shortly: 'sessions=4, update_pct=30'."""
    shown = {k: v for k, v in settings.items() if k in varying} or settings
    if len(shown) == 1 and len(settings) == 1:
        return _short(data.describe_label(label_of(settings)))
    return ", ".join(f"{_short(k)}={data.describe_value(k, v)}" for k, v in shown.items())


def _short(text: str) -> str:
    return text.replace("workload.", "")


def _limit() -> str:
    from ..analysis.series import DRIFT_LIMIT

    return f"{DRIFT_LIMIT:.0%}"
