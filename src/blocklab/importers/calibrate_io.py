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
    ImportOptionError,
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
_COMPLETED = re.compile(r"^\s*PL/SQL procedure successfully completed\.?\s*$", re.IGNORECASE)
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


@dataclass
class CalibrateRuns:
    """Every calibration a file holds, and the one taken (with why)."""

    runs: list[CalibrateIo]
    chosen: int  # index into runs
    why: str

    @property
    def result(self) -> CalibrateIo:
        return self.runs[self.chosen]


def parse_calibrate_io(path: Path) -> CalibrateIo:
    """The calibration a file holds (the last one when it holds several; see parse_calibrate_runs)."""
    return parse_calibrate_runs(path).result


def parse_calibrate_runs(path: Path, run: int | None = None) -> CalibrateRuns:
    """Every CALIBRATE_IO result in the file, in order; `run` (1-based) picks one, else the last."""
    shown = str(path)
    lines = read_lines(path, shown)
    if path.suffix.lower() == ".csv" or (lines and _csv_heading(lines[0].text)):
        runs = _csv(path, shown, lines)
    else:
        starts = _view_starts(lines)
        runs = [r for i in starts for r in _view(lines, i, shown)] if starts else _printed(lines, shown)
    return _choose(runs, run, shown)


def _csv_heading(text: str) -> bool:
    """A CSV heading naming MAX_IOPS (not a pasted query that names it between commas)."""
    cells = [c.strip().strip('"').upper() for c in text.split(",")]
    return len(cells) >= 3 and "MAX_IOPS" in cells and all(re.fullmatch(r"[A-Z_][A-Z0-9_$#]*", c) for c in cells)


def _choose(runs: list[CalibrateIo], run: int | None, shown: str) -> CalibrateRuns:
    if run is not None:
        if not 1 <= run <= len(runs):
            raise ImportOptionError(f"--run {run}: {shown} holds {len(runs)} calibration run(s); give 1 to {len(runs)}")
        return CalibrateRuns(runs, run - 1, f"--run {run}")
    if len(runs) == 1:
        return CalibrateRuns(runs, 0, "the only run in the file")
    where = ", ".join(f"{i + 1} (line {r.max_iops.loc.line})" for i, r in enumerate(runs))
    return CalibrateRuns(runs, len(runs) - 1, f"the last of {len(runs)} runs in the file ({where}): CALIBRATE_IO keeps only "
                         "its latest result (DBA_RSRC_IO_CALIBRATE), so the last one pasted is the one the database uses; "
                         "--run N imports another")


def _view_starts(lines: list[Line]) -> list[int]:
    """Where each DBA_RSRC_IO_CALIBRATE result's heading starts, whatever the column order
    (a heading line naming MAX_IOPS over a dash line, and the wrapped heading lines before it)."""
    starts: list[int] = []
    i = 0
    while i < len(lines) - 1:
        if re.search(r"\bMAX_IOPS\b", lines[i].text) and is_dash_line(lines[i + 1].text):
            k = i
            while k >= 2 and lines[k - 2].text.strip() and is_dash_line(lines[k - 1].text) and not is_dash_line(lines[k - 2].text):
                k -= 2
            starts.append(k)
            i += 2
            while i < len(lines) - 1 and not (re.search(r"\bMAX_IOPS\b", lines[i].text) and is_dash_line(lines[i + 1].text)):
                i += 1
            continue
        i += 1
    return starts


def _printed(lines: list[Line], shown: str) -> list[CalibrateIo]:
    """Runs of 'max_iops = N' / 'latency = N' / 'max_mbps = N' lines. SQL*Plus's
    'PL/SQL procedure successfully completed.' ends a run. Within one, a value
    printed again alike (the procedure's and a script's own print) stays in the
    run; a key that comes back with another value starts the next run, which
    takes the lines repeated alike just before it (two runs with the same
    max_iops pasted without the feedback line)."""
    runs: list[dict[str, Value]] = [{}]
    repeated: list[tuple[str, Value]] = []  # lines since the run's last new key that printed a value it holds
    for ln in lines:
        if _COMPLETED.match(ln.text):
            runs.append({})
            repeated = []
            continue
        m = _PRINTED.match(ln.text)
        if not m:
            continue
        key = m.group(1).lower().replace(" ", "_")
        key = "latency" if key.endswith("latency") else key
        loc = Loc(shown, ln.number)
        if not m.group(2):
            raise loc.error(m.group(1), "has no value (CALIBRATE_IO did not finish? it prints NULL when it fails)")
        value = Value(number(m.group(2), loc, m.group(1), commas=False,
                             comma_hint="CALIBRATE_IO's OUT parameters are whole numbers, concatenated without a format"),
                      loc, f"CALIBRATE_IO {m.group(1)}")
        current = runs[-1]
        if key not in current:
            current[key] = value
            repeated = []
        elif current[key].value == value.value:
            repeated.append((key, value))
        else:
            since = [k for k, _ in repeated]
            carried = repeated[len(since) - since[::-1].index(key):] if key in since else repeated
            runs.append(dict(carried))
            runs[-1].setdefault(key, value)
            repeated = []
    runs = [r for r in runs if r]
    if not runs:
        raise end_error(lines, shown, "max_iops", "no 'max_iops = N' / 'max_mbps = N' line and no DBA_RSRC_IO_CALIBRATE "
                        "heading (MAX_IOPS over a dash line): not CALIBRATE_IO output")
    out = []
    for found in runs:
        for key in ("max_iops", "max_mbps"):
            if key not in found:
                first = min(v.loc.line for v in found.values())
                raise ImportInputError(shown, first, key, f"this run (from line {first}) prints no '{key} = N' line")
        out.append(CalibrateIo(shown, "procedure output", found["max_iops"], found["max_mbps"], found.get("latency"), True,
                               found.get("max_pmbps")))
    return out


def _view(lines: list[Line], start: int, shown: str) -> list[CalibrateIo]:
    records, _ = sqlplus_table(lines, start, shown)
    if not records:
        raise ImportInputError(shown, lines[start].number, "MAX_IOPS", "the query printed no row (no calibration has run)")
    return [_record(rec, shown, "DBA_RSRC_IO_CALIBRATE") for rec in records]


def _csv(path: Path, shown: str, lines: list[Line]) -> list[CalibrateIo]:
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
    out = []
    for number_, row in rows:
        loc = Loc(shown, number_)
        if len(row) != len(head):
            raise loc.error("columns", f"{len(row)} values for {len(head)} columns")
        out.append(_record({h: (v.strip(), loc) for h, v in zip(head, row)}, shown, "CSV"))
    return out


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


__all__ = ["CalibrateIo", "CalibrateRuns", "parse_calibrate_io", "parse_calibrate_runs", "to_calibration"]
