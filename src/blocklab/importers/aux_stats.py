"""SYS.AUX_STATS$ (SQL*Plus output or CSV) -> Oracle's system statistics, in
the shape `blocklab sysstats` saves its own (sysstats.json's aux_stats rows),
so the two read side by side.

Columns SNAME, PNAME, PVAL1 (a number, NULL when never gathered) and PVAL2
(text: STATUS, DSTART, DSTOP). Units: SREADTIM, MREADTIM, IOSEEKTIM ms; MBRC
blocks; MAXTHR, SLAVETHR bytes/s; IOTFRSPEED bytes/ms; CPUSPEED(NW) millions
of cycles/s. STATUS other than COMPLETED is reported (BADSTATS: Oracle itself
marked them unusable; *GATHERING: a gathering is still running).
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .common import (
    SQLPLUS_COMMA,
    ImportInputError,
    Line,
    Loc,
    end_error,
    is_dash_line,
    number,
    read_lines,
    sqlplus_table,
)

UNITS = {"SREADTIM": "ms", "MREADTIM": "ms", "IOSEEKTIM": "ms", "MBRC": "blocks", "MAXTHR": "bytes/s", "SLAVETHR": "bytes/s",
         "IOTFRSPEED": "bytes/ms", "CPUSPEED": "Mcycles/s", "CPUSPEEDNW": "Mcycles/s"}
COMPARED = ("SREADTIM", "MREADTIM", "MBRC", "MAXTHR", "SLAVETHR")  # what `blocklab sysstats` measures too
SNAMES = ("SYSSTATS_INFO", "SYSSTATS_MAIN", "SYSSTATS_TEMP")


@dataclass(frozen=True)
class AuxStat:
    sname: str
    pname: str
    pval1: float | None
    pval2: str
    loc: Loc
    text: str = ""  # PVAL1 exactly as printed (MAXTHR 510301184, not 5.10301e+08)

    @property
    def unit(self) -> str:
        return UNITS.get(self.pname, "")


def parse_aux_stats(path: Path) -> list[AuxStat]:
    shown = str(path)
    lines = read_lines(path, shown)
    first = next((ln.text for ln in lines if ln.text.strip()), "")
    if path.suffix.lower() == ".csv" or first.split(",")[0].strip().strip('"').upper() == "SNAME":
        records = _csv_records(lines, shown)
    else:
        start = next((i for i, ln in enumerate(lines[:-1]) if "SNAME" in ln.text.upper() and is_dash_line(lines[i + 1].text)), -1)
        partial = next((i for i, ln in enumerate(lines[:-1]) if "PNAME" in ln.text.upper() and is_dash_line(lines[i + 1].text)), -1)
        if start < 0 and partial >= 0:
            raise ImportInputError(shown, lines[partial].number, "SNAME", f"the heading {' '.join(lines[partial].text.split())!r} has no "
                                   "SNAME column (a SELECT of some columns only): paste the output of "
                                   "SELECT sname, pname, pval1, pval2 FROM sys.aux_stats$")
        if start < 0:
            raise end_error(lines, shown, "SNAME", "no 'SNAME  PNAME  PVAL1  PVAL2' heading over a dash line: "
                            "paste the output of SELECT sname, pname, pval1, pval2 FROM sys.aux_stats$")
        records, _ = sqlplus_table(lines, start, shown)
    out = []
    for rec in records:
        row_loc = next(iter(rec.values()))[1]
        for col in ("SNAME", "PNAME", "PVAL1"):
            if col not in rec:
                raise row_loc.error(col, f"no {col} column (columns: {', '.join(rec)}); SNAME, PNAME and PVAL1 are needed")
        sname, loc = rec["SNAME"]
        pname = rec["PNAME"][0]
        if sname not in SNAMES:
            raise loc.error("SNAME", f"{sname!r} is not one of {', '.join(SNAMES)}")
        if not pname:
            raise loc.error("PNAME", "is empty")
        text, vloc = rec["PVAL1"]
        pval1 = number(text, vloc, f"PVAL1 of {pname}", commas=False, comma_hint=SQLPLUS_COMMA) if text else None
        text = text.strip()
        out.append(AuxStat(sname, pname, pval1, rec.get("PVAL2", ("", loc))[0], loc, text))
    if not out:
        raise end_error(lines, shown, "SNAME", "the table has no rows")
    return out


def _csv_records(lines: list[Line], shown: str) -> list[dict[str, tuple[str, Loc]]]:
    reader = list(csv.reader(io.StringIO("\n".join(ln.text for ln in lines))))
    head = [h.strip().upper() for h in reader[0]] if reader else []
    loc0 = Loc(shown, lines[0].number if lines else 1)
    for col in ("SNAME", "PNAME", "PVAL1"):
        if col not in head:
            raise loc0.error(col, f"the CSV heading has no {col} column ({', '.join(head) or 'empty'})")
    out = []
    for i, row in enumerate(reader[1:], 1):
        if not any(c.strip() for c in row):
            continue
        loc = Loc(shown, lines[i].number)
        if len(row) != len(head):
            raise loc.error("columns", f"{len(row)} values for the {len(head)} columns of the heading")
        out.append({h: (v.strip(), loc) for h, v in zip(head, row)})
    return out


def status(stats: list[AuxStat]) -> str:
    return next((s.pval2 for s in stats if s.sname == "SYSSTATS_INFO" and s.pname == "STATUS"), "")


def document(stats: list[AuxStat], path: str) -> dict[str, object]:
    """sysstats.json for the imported statistics: the aux_stats rows as
    `blocklab sysstats` writes them, each with its source line."""
    main = {s.pname: s.pval1 for s in stats if s.sname == "SYSSTATS_MAIN"}
    doc: dict[str, object] = {
        "format": 1,
        "source": "import",
        "file": path,
        "status": status(stats),
        "aux_stats": [{"sname": s.sname, "pname": s.pname, "pval1": exact(s),
                       "pval2": s.pval2, "unit": s.unit, "source": str(s.loc)} for s in stats],
        "stats": {"sreadtim_ms": main.get("SREADTIM"), "mreadtim_ms": main.get("MREADTIM"), "mbrc": main.get("MBRC"),
                  "maxthr_bytes_per_s": main.get("MAXTHR"), "slavethr_bytes_per_s": main.get("SLAVETHR")},
    }
    s, m, b = main.get("SREADTIM"), main.get("MREADTIM"), main.get("MBRC")
    if s and m and b:
        doc["random_page_cost"] = s / (m / b)
        doc["formula"] = f"random_page_cost = SREADTIM / (MREADTIM / MBRC) = {s:.4g} / ({m:.4g} / {b:.4g}) = {s / (m / b):.2f}"
    return doc


def exact(s: AuxStat) -> str:
    """PVAL1 as SQL*Plus printed it ('' for NULL): a saved statistic is kept, never rounded."""
    if s.pval1 is None:
        return ""
    if s.text:
        return s.text
    return repr(int(s.pval1)) if float(s.pval1).is_integer() else repr(s.pval1)


def imported_run(stats: list[AuxStat], path: str, command: str) -> Any:
    """The statistics as an imported run (one row per PNAME with a value), so `blocklab report`,
    `export` and `compare` read the directory like any other."""
    from ..results import ResultRow
    from .rundir import ImportedRun

    rows = [ResultRow(cell=0, block=0, settings={"pname": f"{s.sname}.{s.pname}"}, applied={"pname": s.pname},
                      metrics={"pval1": float(s.pval1)}, notes={"file": path, "pval1_text": exact(s), "unit": s.unit,
                                                                "source": str(s.loc)})
            for s in stats if s.pval1 is not None]
    if not rows:
        raise ImportInputError(path, stats[-1].loc.line if stats else 1, "PVAL1", "no statistic has a value (every PVAL1 is NULL)")
    return ImportedRun(name="aux-stats-import", description="Oracle's system statistics (SYS.AUX_STATS$) as the optimizer uses them",
                       workload="aux_stats", knobs={"pname": [r.settings["pname"] for r in rows]}, rows=rows,
                       environment={"engine_version": "unknown (AUX_STATS$ names no release)"}, metric="pval1", goal="max",
                       unit="", command=command, headline="Oracle's system statistics (SYS.AUX_STATS$), imported as saved")


def verdict(stats: list[AuxStat], doc: dict[str, object]) -> str:
    main = {s.pname: s for s in stats if s.sname == "SYSSTATS_MAIN" and s.pval1 is not None}
    shown = ", ".join(f"{p} {exact(main[p])}{(' ' + main[p].unit) if main[p].unit else ''}" for p in
                      ("SREADTIM", "MREADTIM", "MBRC", "MAXTHR", "SLAVETHR", "IOSEEKTIM", "IOTFRSPEED", "CPUSPEED", "CPUSPEEDNW")
                      if p in main)
    status = doc.get("status") or "not given"
    words = f"SYS.AUX_STATS$ (STATUS {status}): {shown}. These are the values Oracle's optimizer costs plans with, kept as saved; " \
            "they are not settings measured against each other, so none is ranked."
    if doc.get("formula"):
        words += f" The cost they imply: {doc['formula']}."
    return words


def own_stats(path: Path) -> dict[str, str]:
    """PNAME -> PVAL1 of SYSSTATS_MAIN from a blocklab sysstats.json (ImportInputError if unreadable)."""
    import json

    try:
        data = json.loads(path.read_text())
        rows = data["aux_stats"]
        return {r["pname"]: str(r["pval1"]) for r in rows if r.get("sname") == "SYSSTATS_MAIN"}
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ImportInputError(str(path), 1, "aux_stats", f"not a blocklab sysstats.json ({err})") from None


__all__ = ["COMPARED", "UNITS", "AuxStat", "document", "exact", "imported_run", "own_stats", "parse_aux_stats", "status", "verdict"]
