"""results as Parquet, one row per cell (the CSV's columns), when pyarrow is installed.

pyarrow is not a dependency of blocklab: without it this format says how to get it."""

from __future__ import annotations

import io

from .csv_export import columns, record
from .data import RunData


class ExportUnavailable(RuntimeError):
    """A format whose library is not installed."""


def export_parquet(data: RunData) -> bytes:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ExportUnavailable(
            "--format parquet needs the optional pyarrow package, which is not installed: pip install 'blocklab[parquet]' "
            "(or use --format csv or --format json)"
        ) from None
    cols = columns(data)
    records = [record(row, cols) for row in data.rows]
    table = pa.Table.from_pylist(records) if records else pa.table({c: pa.array([], pa.string()) for c in cols})
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()
