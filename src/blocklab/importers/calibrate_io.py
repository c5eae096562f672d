"""DBMS_RESOURCE_MANAGER.CALIBRATE_IO results -> device limits.

Three inputs are read:

* the procedure's own output as a caller's block prints it (SLOB's
  misc/calibrate.sql: 'max_iops = 36439', 'latency  = 0', 'max_mbps = 486';
  other scripts print 'Max IOPS:' or 'actual_latency ='), other lines (SQL*Plus
  prompts, 18c's 'Note: ...' paragraph) passed over;
* DBA_RSRC_IO_CALIBRATE as SQL*Plus prints it, records wrapped or not;
* the same view as CSV (SQL Developer, sqlcl, spool with SET MARKUP CSV).

Units (the package reference): MAX_IOPS random reads of one database block
per second; MAX_MBPS MB/s of random 1 MB reads (MB = 2^20 bytes, converted to
blocklab's 1e6); MAX_PMBPS the same for one process; LATENCY ms. The
procedure's OUT latency is an integer, so 'latency = 0' (common on flash)
means under 1 ms, not 0: it is kept as the bound it is, not as a latency.
"""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass
from pathlib import Path

from ..device.calibrate import Calibration
from ..device.fio import Point
from .common import (
    MIB,
    MIB_TO_MB,
    SQLPLUS_COMMA,
    ImportInputError,
    Line,
    Loc,
    Value,
    end_error,
    is_dash_line,
    number,
    read_lines,
    sqlplus_table,
)
from .limits import calibration

_PRINTED = re.compile(r"^\s*(max[_ ]iops|max[_ ]mbps|max[_ ]pmbps|(?:actual[_ ])?latency)\s*[:=]\s*(\S*)\s*$", re.IGNORECASE)
COLUMNS = ("MAX_IOPS", "MAX_MBPS", "MAX_PMBPS", "LATENCY", "NUM_PHYSICAL_DISKS")


@dataclass
class CalibrateIo:
    path: str
    form: str  # "procedure output", "DBA_RSRC_IO_CALIBRATE" or "CSV"
    max_iops: Value
    max_mbps: Value
    latency_ms: Value | None
    latency_whole_ms: bool  # the procedure's integer: 0 means < 1 ms
    max_pmbps: Value | None = None
    num_disks: int | None = None
    start: str = ""
    end: str = ""


def parse_calibrate_io(path: Path) -> CalibrateIo:
    shown = str(path)
    lines = read_lines(path, shown)
    if path.suffix.lower() == ".csv" or (lines and lines[0].text.count(",") >= 2 and "MAX_IOPS" in lines[0].text.upper()):
        return _csv(path, shown, lines)
    for i, ln in enumerate(lines[:-1]):
        if re.match(r"^\s*(START_TIME|END_TIME|MAX_IOPS)\b", ln.text) and is_dash_line(lines[i + 1].text):
            return _view(lines, i, shown)
    return _printed(lines, shown)


def _printed(lines: list[Line], shown: str) -> CalibrateIo:
    found: dict[str, Value] = {}
    for ln in lines:
        m = _PRINTED.match(ln.text)
        if not m:
            continue
        key = m.group(1).lower().replace(" ", "_")
        key = "latency" if key.endswith("latency") else key
        loc = Loc(shown, ln.number)
        if not m.group(2):
            raise loc.error(m.group(1), "has no value (CALIBRATE_IO did not finish? it prints NULL when it fails)")
        found[key] = Value(number(m.group(2), loc, m.group(1), commas=False,
                                  comma_hint="CALIBRATE_IO's OUT parameters are whole numbers, concatenated without a format"),
                           loc, f"CALIBRATE_IO {m.group(1)}")
    for key in ("max_iops", "max_mbps"):
        if key not in found:
            raise end_error(lines, shown, key, "no 'max_iops = N' / 'max_mbps = N' line: not CALIBRATE_IO output")
    return CalibrateIo(shown, "procedure output", found["max_iops"], found["max_mbps"], found.get("latency"), True,
                       found.get("max_pmbps"))


def _view(lines: list[Line], start: int, shown: str) -> CalibrateIo:
    records, _ = sqlplus_table(lines, start, shown)
    if not records:
        raise ImportInputError(shown, lines[start].number, "MAX_IOPS", "the query printed no row (no calibration has run)")
    return _record(records[-1], shown, "DBA_RSRC_IO_CALIBRATE")


def _csv(path: Path, shown: str, lines: list[Line]) -> CalibrateIo:
    text = "\n".join(ln.text for ln in lines)
    reader = list(csv.reader(io.StringIO(text)))
    if not reader:
        raise ImportInputError(shown, 1, "header", "the file is empty")
    head = [h.strip().upper() for h in reader[0]]
    for need in ("MAX_IOPS", "MAX_MBPS"):
        if need not in head:
            raise ImportInputError(shown, lines[0].number, need, f"the CSV heading has no {need} column ({', '.join(head)})")
    rows = [(lines[i].number, r) for i, r in enumerate(reader) if i > 0 and any(c.strip() for c in r)]
    if not rows:
        raise end_error(lines, shown, "MAX_IOPS", "the CSV has a heading but no row")
    number_, row = rows[-1]
    loc = Loc(shown, number_)
    if len(row) != len(head):
        raise loc.error("columns", f"{len(row)} values for {len(head)} columns")
    return _record({h: (v.strip(), loc) for h, v in zip(head, row)}, shown, "CSV")


def _record(rec: dict[str, tuple[str, Loc]], shown: str, form: str) -> CalibrateIo:
    def value(col: str, required: bool) -> Value | None:
        if col not in rec:
            if required:
                raise ImportInputError(shown, next(iter(rec.values()))[1].line, col, f"no {col} column")
            return None
        text, loc = rec[col]
        if not text:
            if required:
                raise loc.error(col, "is empty (NULL: the calibration did not finish)")
            return None
        return Value(number(text, loc, col, commas=False, comma_hint=SQLPLUS_COMMA), loc, f"{form} {col}")

    iops, mbps = value("MAX_IOPS", True), value("MAX_MBPS", True)
    assert iops is not None and mbps is not None
    disks = value("NUM_PHYSICAL_DISKS", False)
    return CalibrateIo(shown, form, iops, mbps, value("LATENCY", False), False, value("MAX_PMBPS", False),
                       int(disks.value) if disks else None, rec.get("START_TIME", ("", None))[0], rec.get("END_TIME", ("", None))[0])


def to_calibration(c: CalibrateIo, *, block_size: int, device: str) -> tuple[Calibration, list[dict[str, str]]]:
    """Two points: random database-block reads at MAX_IOPS (with LATENCY), random 1 MiB reads at MAX_MBPS.
    The queue depth CALIBRATE_IO used is not reported: 0 stands for unknown."""
    latency = math.nan
    lat_source = "not in the file"
    if c.latency_ms is not None:
        if c.latency_whole_ms and c.latency_ms.value == 0:
            lat_source = f"{c.latency_ms.source()}: 0 means under 1 ms (the procedure prints whole ms), kept as unknown"
        else:
            latency, lat_source = c.latency_ms.value, c.latency_ms.source()
    points = [
        Point("rand", block_size, 0, c.max_iops.value, c.max_iops.value * block_size / 1e6, latency, math.nan, math.nan),
        Point("rand", MIB, 0, c.max_mbps.value, c.max_mbps.value * MIB_TO_MB, math.nan, math.nan, math.nan),
    ]
    sources = [{"iops": c.max_iops.source(), "block_size": "--block-size (CALIBRATE_IO reads database blocks)",
                "lat_mean_ms": lat_source},
               {"mb_per_s": f"{c.max_mbps.source()} x 1.048576"}]
    cal = calibration(points, device=device, directory=c.path, tool="CALIBRATE_IO",
                      note=f"CALIBRATE_IO ({c.form}): imported from {c.path}", started=c.start, finished=c.end)
    return cal, sources


__all__ = ["CalibrateIo", "parse_calibrate_io", "to_calibration"]
