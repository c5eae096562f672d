"""results as CSV: one line per cell (failed cells too), settings and metrics as columns."""

from __future__ import annotations

import csv
import io

from ..results import ResultRow
from ..units import label_of
from .data import RunData

BASE_COLUMNS = ("cell", "cell_id", "block", "started", "status", "setting")


def columns(data: RunData) -> list[str]:
    """The table's columns: the cell, the knobs as asked, the settings as the
    engine reported them (applied.NAME), then every metric, in first-seen order."""
    knobs = list(data.knobs)
    applied: list[str] = []
    metrics: list[str] = []
    for row in data.rows:
        knobs.extend(k for k in row.settings if k not in knobs)
        applied.extend(k for k in row.applied if k not in applied)
        metrics.extend(k for k in row.metrics if k not in metrics)
    base = list(BASE_COLUMNS)
    if any(row.host for row in data.rows):  # a fleet run: the host that measured each cell (a local run's columns stay as they were)
        base.insert(base.index("cell_id") + 1, "host")
    return [*base, *knobs, *(f"applied.{k}" for k in applied), *metrics]


def record(row: ResultRow, cols: list[str]) -> dict[str, object]:
    """One row as a flat dict over `cols` (None where a cell has no value)."""
    out: dict[str, object] = {
        "cell": row.cell,
        "cell_id": row.cell_id,
        "block": row.block,
        "started": row.started,
        "status": row.status,
        "setting": label_of(row.settings),
    }
    base = len(BASE_COLUMNS)
    if "host" in cols[:base + 1]:
        out["host"] = row.host
        base += 1
    for col in cols[base:]:
        if col.startswith("applied."):
            out[col] = row.applied.get(col[len("applied."):])
        elif col in row.settings:
            out[col] = row.settings[col]
        else:
            out[col] = row.metrics.get(col)
    return out


def export_csv(data: RunData) -> bytes:
    cols = columns(data)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=cols, lineterminator="\n")
    writer.writeheader()
    for row in data.rows:
        writer.writerow({k: _cell(v) for k, v in record(row, cols).items()})
    return buf.getvalue().encode("utf-8")


def _cell(value: object) -> object:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return int(value)
    return value
