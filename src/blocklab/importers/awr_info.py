"""SLOB's awr_info.sh output -> one record per report it summarised.

    FILE|SESSIONS|ELAPSED|DB CPU|DB Tm|EXECUTES|LIO|PREADS|READ_MBS|PWRITES|WRITE_MBS|REDO_MBS|DFSR_LAT|DPR_LAT|DFPR_LAT|DFPW_LAT|LFPW_LAT|TOP WAIT|

Eighteen '|'-separated fields and an empty one after the closing '|'.
Units (the script and SLOB's README): ELAPSED seconds; DB CPU, DB Tm,
EXECUTES, LIO, PREADS, PWRITES per second; READ_MBS, WRITE_MBS, REDO_MBS in
MB of 2^20 bytes per second; the *_LAT fields microseconds, 0 when the
report had no such event. DB CPU includes Background CPU on reports that
have it (19c), so it is kept apart from the foreground DB CPU of a report.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .common import MIB_TO_MB, ImportInputError, Line, Loc, Value, number, read_lines

HEADER = ("FILE", "SESSIONS", "ELAPSED", "DB CPU", "DB Tm", "EXECUTES", "LIO", "PREADS", "READ_MBS", "PWRITES",
          "WRITE_MBS", "REDO_MBS", "DFSR_LAT", "DPR_LAT", "DFPR_LAT", "DFPW_LAT", "LFPW_LAT", "TOP WAIT")
NUMERIC = HEADER[2:17]


@dataclass(frozen=True)
class AwrInfoRow:
    file: str  # the FILE field: the report's name
    sessions: str  # the SESSIONS field as printed (blank for the harness's awr.NNN.txt names)
    values: dict[str, Value]  # NUMERIC field -> value
    top_wait: str
    loc: Loc


def looks_like_awr_info(lines: list[Line]) -> bool:
    first = next((ln.text for ln in lines if ln.text.strip()), "")
    return first.replace(" ", "").upper().startswith("FILE|SESSIONS|")


def parse_awr_info(path: Path, shown: str | None = None) -> list[AwrInfoRow]:
    """Every data line; ImportInputError naming file, line and field otherwise."""
    name = shown or str(path)
    lines = read_lines(path, name)
    if not looks_like_awr_info(lines):
        first = next((ln for ln in lines if ln.text.strip()), None)
        raise ImportInputError(name, first.number if first else 1, "header",
                               "not awr_info.sh output: the first line is not FILE|SESSIONS|ELAPSED|...")
    rows: list[AwrInfoRow] = []
    header_seen = False
    for ln in lines:
        text = ln.text.strip()
        if not text:
            continue
        loc = Loc(name, ln.number)
        if text.replace(" ", "").upper().startswith("FILE|SESSIONS|"):
            _check_header(text, loc)
            header_seen = True  # awr_info.sh prints its header once per run; several runs may be concatenated
            continue
        if not header_seen:
            continue
        rows.append(_row(text, loc))
    if not rows:
        raise ImportInputError(name, lines[-1].number, "rows", "the header is not followed by any report line", end_of_file=True)
    return rows


def _check_header(text: str, loc: Loc) -> None:
    fields = [f.strip() for f in text.split("|")]
    if fields and fields[-1] == "":
        fields.pop()
    if tuple(f.upper() for f in fields) != tuple(h.upper() for h in HEADER):
        raise loc.error("header", f"{len(fields)} fields {fields}; awr_info.sh prints these {len(HEADER)}: {'|'.join(HEADER)}|")


def _row(text: str, loc: Loc) -> AwrInfoRow:
    fields = text.split("|")
    if fields[-1].strip() == "":
        fields.pop()  # the closing '|'
    if len(fields) != len(HEADER):
        raise loc.error(
            "fields", f"{len(fields)} '|'-separated fields, awr_info.sh prints {len(HEADER)} ({'|'.join(HEADER)}|); "
            "a field is missing or a value holds a '|'")
    values = {}
    for key, text_value in zip(HEADER, fields):
        if key in NUMERIC:
            values[key] = Value(number(text_value, loc, key, commas=False), loc, f"awr_info {key}")
    return AwrInfoRow(fields[0].strip(), fields[1].strip(), values, fields[-1].strip(), loc)


def point_metrics(row: AwrInfoRow) -> tuple[dict[str, float], dict[str, str]]:
    """The slob metrics of one awr_info line and where each came from."""
    v = row.values
    if v["ELAPSED"].value <= 0:
        raise v["ELAPSED"].loc.error("ELAPSED", "is 0: the report covered no time")
    if v["DFSR_LAT"].value <= 0:
        raise v["DFSR_LAT"].loc.error(
            "DFSR_LAT", "is 0: the report had no db file sequential read, so there is no read latency to draw")
    metrics = {
        "read_iops": v["PREADS"].value,
        "write_iops": v["PWRITES"].value,
        "mb_per_s": (v["READ_MBS"].value + v["WRITE_MBS"].value) * MIB_TO_MB,
        "read_mb_per_s": v["READ_MBS"].value * MIB_TO_MB,
        "read_latency_ms": v["DFSR_LAT"].value / 1000.0,
        "ops_per_s": v["EXECUTES"].value,
        "logical_reads_per_s": v["LIO"].value,
        "db_time_per_s": v["DB Tm"].value,
        "cpu_per_s": v["DB CPU"].value,
        "redo_mb_per_s": v["REDO_MBS"].value * MIB_TO_MB,
        "elapsed_s": v["ELAPSED"].value,
    }
    for key, lat in (("DPR_LAT", "direct_path_read_ms"), ("DFPR_LAT", "parallel_read_ms"),
                     ("DFPW_LAT", "dbwr_write_ms"), ("LFPW_LAT", "lgwr_write_ms")):
        if v[key].value > 0:
            metrics[lat] = v[key].value / 1000.0
    where = str(row.loc)
    sources = {
        "read_iops": f"{where} PREADS", "write_iops": f"{where} PWRITES",
        "mb_per_s": f"{where} (READ_MBS + WRITE_MBS) x 1.048576", "read_mb_per_s": f"{where} READ_MBS x 1.048576",
        "read_latency_ms": f"{where} DFSR_LAT / 1000", "ops_per_s": f"{where} EXECUTES",
        "cpu_per_s": f"{where} DB CPU (with Background CPU where the report has it)",
        "elapsed_s": f"{where} ELAPSED",
    }
    return metrics, sources


__all__ = ["HEADER", "AwrInfoRow", "looks_like_awr_info", "parse_awr_info", "point_metrics"]
