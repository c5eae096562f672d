"""ORION output (PREFIX_summary.txt, PREFIX_iops.csv, PREFIX_mbps.csv,
PREFIX_lat.csv) -> a device calibration, the same shape `blocklab calibrate`
writes, plus orion.json with the full matrices.

The CSV matrices: the top-left cell is 'Large/Small'; rows are outstanding
large I/Os, columns outstanding small I/Os; a row that was not run keeps only
its label and a row stops at its last point. _iops.csv and _lat.csv hold the
small I/Os' rate and mean latency, _mbps.csv the large I/Os' MB/s (MB of
2^20 bytes: converted to blocklab's 1e6).

Latency unit: milliseconds up to 11.1, microseconds from 11.2 (the 11.2
sample's 1029.84 cannot be ms). Decided from the summary's ORION VERSION,
else its 'usecs' on Minimum Small Latency, else its wording ('Commandline:'
is 11.1, 'Command line:' 11.2), else --latency-unit; contradicting signs are
refused.

Calibration points: the small I/O points with no large I/O beside them
(Large=0), the large ones with no small I/O (Small=0); mixed points stay in
orion.json only (no one block size describes them). The summary's Maximum
/ Minimum lines are checked against the matrices.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..device.calibrate import Calibration
from ..device.fio import Point, describe
from .common import (
    MIB,
    MIB_TO_MB,
    ImportInputError,
    ImportOptionError,
    Line,
    Loc,
    Value,
    end_error,
    number,
    read_lines,
)
from .limits import calibration, default_device

SUFFIXES = ("summary.txt", "iops.csv", "mbps.csv", "lat.csv")
Matrix = dict[tuple[int, int], Value]  # (large, small) -> value


@dataclass
class OrionSummary:
    path: str
    version: str = ""
    version_loc: Loc | None = None
    wording: str = ""  # "11.1" or "11.2": how the header is worded
    test: str = ""
    small_bytes: int = 8192
    large_bytes: int = MIB
    large_pattern: str = "rand"
    duration_s: float = math.nan
    luns: list[str] = field(default_factory=list)
    extremes: dict[str, tuple[Value, int, int, str]] = field(default_factory=dict)  # name -> (value, small, large, unit text)
    read_latency: dict[tuple[int, int], tuple[Value, str]] = field(default_factory=dict)  # (small, large) -> avg, unit (11.2+)
    first_line: int = 1


def resolve_prefix(given: Path) -> Path:
    """PREFIX, a file of the set (PREFIX_iops.csv ...), or a test name with one timestamped run -> PREFIX."""
    if not given.name:  # '', '.', '/': no name to add ORION's suffixes to
        raise ImportOptionError(f"{str(given)!r}: not an ORION prefix; give the test's name, e.g. lun1_20261120_0915 or lun1_20261120_0915_summary.txt")
    for suffix in SUFFIXES:
        if given.name.endswith("_" + suffix):
            return given.with_name(given.name[: -len(suffix) - 1])
    if any(given.with_name(f"{given.name}_{s}").exists() for s in SUFFIXES):
        return given
    runs = sorted(given.parent.glob(f"{given.name}_*_summary.txt")) if given.parent.is_dir() else []
    if len(runs) == 1:
        return runs[0].with_name(runs[0].name[: -len("_summary.txt")])
    if runs:
        raise ImportOptionError(f"{given}: {len(runs)} ORION runs match ({', '.join(r.name for r in runs)}); give the full prefix")
    raise ImportOptionError(f"{given}: no ORION output (looked for {given}_summary.txt, _iops.csv, _mbps.csv, _lat.csv)")


_EXTREME = re.compile(r"^(Maximum Large MBPS|Maximum Small IOPS|Minimum Small Latency)=(\S+)\s*(\S*)\s*@\s*Small=(\d+) and Large=(\d+)")


_RUN_START = re.compile(r"^\s*(ORION VERSION|ORION: ORacle IO Numbers)")


def parse_summaries(path: Path) -> list[OrionSummary]:
    """Every ORION run in the file: summaries pasted one after another are
    separate runs (each starts at its 'ORION VERSION' line), never merged."""
    shown = str(path)
    lines = read_lines(path, shown)
    starts = [i for i, ln in enumerate(lines) if _RUN_START.match(ln.text)]
    if len(starts) <= 1:
        return [_parse_run(lines, shown)]
    bounds = [0, *starts[1:], len(lines)]
    return [_parse_run(lines[a:b], shown) for a, b in zip(bounds, bounds[1:])]


def parse_summary(path: Path) -> OrionSummary:
    """The file's ORION run (the last, when several are pasted in one file)."""
    return parse_summaries(path)[-1]


_READ_LAT = re.compile(r"^Small Read Latency:\s*avg=(\S+)\s*(us|usecs|ms)?.*@\s*Small=(\d+) and Large=(\d+)")


def _parse_run(lines: list[Line], shown: str) -> OrionSummary:
    s = OrionSummary(shown)
    s.first_line = lines[0].number if lines else 1
    for ln in lines:
        t = ln.text.strip()
        loc = Loc(shown, ln.number)
        if m := re.match(r"(?:ORION VERSION |ORION: ORacle IO Numbers -- Version (?:RDBMS_)?)(\d+(?:\.\d+)+)", t):
            s.version, s.version_loc = m.group(1), loc
        elif t in ("Commandline:", "This maps to this test:"):
            s.wording = "11.1"
        elif t in ("Command line:", "These options enable these settings:"):
            s.wording = "11.2"
        elif m := re.match(r"Test:\s*(\S+)", t):
            s.test = m.group(1)
        elif m := re.match(r"(Small|Large) IO size:\s*(\S+)\s*KB", t, re.IGNORECASE):
            size = int(number(m.group(2), loc, f"{m.group(1)} IO size", commas=False) * 1024)
            if m.group(1).lower() == "small":
                s.small_bytes = size
            else:
                s.large_bytes = size
        elif m := re.match(r"IO types?:\s*(.*)", t, re.IGNORECASE):
            s.large_pattern = "seq" if re.search(r"large sequential", m.group(1), re.IGNORECASE) else "rand"
        elif m := re.match(r"Duration for each data point:\s*(\S+)\s*seconds", t, re.IGNORECASE):
            s.duration_s = number(m.group(1), loc, "Duration for each data point", commas=False)
        elif m := re.match(r"Name:\s*(\S+)", t):
            s.luns.append(m.group(1))
        elif m := _EXTREME.match(t):
            value = number(m.group(2), loc, m.group(1), commas=False)
            s.extremes[m.group(1)] = (Value(value, loc, m.group(1)), int(m.group(4)), int(m.group(5)), m.group(3))
        elif m := _READ_LAT.match(t):
            value = number(m.group(1), loc, "Small Read Latency avg", commas=False)
            s.read_latency.setdefault((int(m.group(3)), int(m.group(4))), (Value(value, loc, "Small Read Latency avg"),
                                                                          m.group(2) or ""))
    if not s.version and not s.wording and not s.extremes:
        raise end_error(lines, shown, "ORION VERSION", "not an ORION summary: no 'ORION VERSION', no 'Command line:' and no "
                        "'Maximum Small IOPS=' line")
    return s


def latency_unit(s: OrionSummary, option: str | None) -> str:
    signs: list[tuple[str, str]] = []
    if s.version:
        parts = [int(x) for x in s.version.split(".")[:2]]
        signs.append(("us" if parts >= [11, 2] else "ms", f"ORION VERSION {s.version}"))
    lat = s.extremes.get("Minimum Small Latency")
    if lat is not None and lat[3]:
        signs.append(("us" if lat[3].lower().startswith("usec") else "ms", f"'{lat[3]}' on Minimum Small Latency"))
    if s.wording:
        signs.append(("us" if s.wording == "11.2" else "ms", f"the {s.wording} wording of the header"))
    units = {u for u, _ in signs}
    if len(units) > 1:
        where = s.version_loc or (lat[0].loc if lat else Loc(s.path, 1))
        raise where.error("latency unit", "the summary contradicts itself: " + "; ".join(f"{w} means {u}" for u, w in signs))
    if option is not None:
        if units and option not in units:
            raise ImportOptionError(f"--latency-unit {option}: the summary says {units.pop()} ({signs[0][1]})")
        return option
    if not units:
        raise ImportOptionError(f"{s.path}: the latency unit cannot be told (no version); give --latency-unit us or ms")
    return units.pop()


def parse_matrix(path: Path, what: str) -> Matrix:
    shown = str(path)
    lines = [ln for ln in read_lines(path, shown) if ln.text.strip()]
    if not lines:
        raise ImportInputError(shown, 1, "Large/Small", "the file is empty")
    head = [c.strip() for c in lines[0].text.split(",")]
    loc0 = Loc(shown, lines[0].number)
    if head[0] != "Large/Small":
        raise loc0.error("Large/Small", f"the top-left cell is {head[0]!r}; an ORION matrix starts 'Large/Small'")
    small = [int(number(c, loc0, f"column {i + 1} of the heading (small I/Os)", commas=False)) for i, c in enumerate(head[1:])]
    out: Matrix = {}
    for ln in lines[1:]:
        loc = Loc(shown, ln.number)
        cells = [c.strip() for c in ln.text.split(",")]
        large = int(number(cells[0], loc, "Large (the row label)", commas=False))
        if len(cells) - 1 > len(small):
            raise loc.error(f"Large={large}", f"{len(cells) - 1} values but the heading has {len(small)} columns")
        for sm, text in zip(small, cells[1:]):
            if text:
                field = f"Large={large}, Small={sm}"
                value = number(text, loc, field, commas=False)
                if value < 0:
                    raise loc.error(field, f"{value:g} is negative")
                out[large, sm] = Value(value, loc, f"{what} at {field}")
    return out


def _check(s: OrionSummary, name: str, matrix: Matrix, scale: float = 1.0) -> None:
    """The summary's extreme against its matrix cell (the summary rounds: 0.5% and half a unit of slack)."""
    if name not in s.extremes:
        return
    value, sm, lg, _ = s.extremes[name]
    cell = matrix.get((lg, sm))
    if cell is None:
        raise value.loc.error(name, f"the summary names Small={sm}, Large={lg} but the matrix has no such point")
    if abs(cell.value * scale - value.value) > 0.005 * abs(value.value) + 0.5:
        raise value.loc.error(name, f"{value.value:g} here but {cell.value * scale:g} in {cell.loc} for Small={sm}, "
                              f"Large={lg}: the summary and the matrix disagree")


def import_orion(given: Path, *, device: str | None = None, latency_unit_option: str | None = None, run: int | None = None,
                 ) -> tuple[Calibration, list[dict[str, str]], dict[str, Any], OrionSummary]:
    """(calibration, the source of each point's numbers, orion.json, the summary).
    A summary file holding several runs: the last, or `run` (1-based); orion.json
    lists them all. Without the CSVs, the summary's Maximum / Minimum lines are
    the points."""
    if given.is_file() and not any(given.name.endswith("_" + suffix) for suffix in SUFFIXES):
        prefix = given.with_suffix("")  # a summary pasted into a file of its own name: no matrices beside it
        files = {s: given if s == "summary.txt" else given.with_name(f"{given.name}.absent_{s}") for s in SUFFIXES}
    else:
        prefix = resolve_prefix(given)
        files = {s: prefix.with_name(f"{prefix.name}_{s}") for s in SUFFIXES}
    if not files["summary.txt"].exists():
        raise ImportOptionError(f"{files['summary.txt']}: missing; ORION writes it beside the matrices (the units depend on it)")
    runs = parse_summaries(files["summary.txt"])
    if run is not None and not 1 <= run <= len(runs):
        raise ImportOptionError(f"--run {run}: {files['summary.txt']} holds {len(runs)} ORION run(s); give 1 to {len(runs)}")
    chosen = (run or len(runs)) - 1
    summary = runs[chosen]
    unit = latency_unit(summary, latency_unit_option)
    mats = {s: parse_matrix(p, s.split(".")[0]) if p.exists() and len(runs) == 1 else {} for s, p in files.items()
            if s != "summary.txt"}
    iops, mbps, lat = mats["iops.csv"], mats["mbps.csv"], mats["lat.csv"]
    if not iops and not mbps:
        only_cal, only_sources, only_doc = _summary_only(summary, prefix, unit, device)
        only_doc["runs"] = _runs_doc(runs, chosen, run)
        return only_cal, only_sources, only_doc, summary
    _check(summary, "Maximum Small IOPS", iops)
    _check(summary, "Maximum Large MBPS", mbps)
    _check(summary, "Minimum Small Latency", lat)
    to_ms = 1e-3 if unit == "us" else 1.0
    points: list[Point] = []
    sources: list[dict[str, str]] = []
    for (lg, sm), v in sorted(iops.items()):
        if lg == 0:
            latency = lat.get((0, sm))
            points.append(Point("rand", summary.small_bytes, sm, v.value, v.value * summary.small_bytes / 1e6,
                                latency.value * to_ms if latency else math.nan, math.nan, summary.duration_s))
            sources.append({"iops": v.source(), "lat_mean_ms": f"{latency.source()} ({unit})" if latency else "not in the files"})
    for (lg, sm), v in sorted(mbps.items()):
        if sm == 0 and lg > 0:
            points.append(Point(summary.large_pattern, summary.large_bytes, lg, v.value * MIB / summary.large_bytes,
                                v.value * MIB_TO_MB, math.nan, math.nan, summary.duration_s))
            sources.append({"mb_per_s": f"{v.source()} x 1.048576"})
    if not points:
        raise ImportOptionError(f"{prefix}: no point without mixed load (Large=0 or Small=0): nothing to use as a limit")
    name = device or (default_device(summary.luns[0]) if len(summary.luns) == 1 else summary.test or prefix.name)
    cal = calibration(points, device=name, directory=", ".join(summary.luns) or str(prefix), tool="ORION",
                      note=f"ORION {summary.version or summary.wording}: imported from {prefix}_*", runtime_s=summary.duration_s)
    document = {
        "format": 1, "prefix": str(prefix), "version": summary.version, "test": summary.test, "luns": summary.luns,
        "latency_unit_in_files": unit, "small_io_bytes": summary.small_bytes, "large_io_bytes": summary.large_bytes,
        "summary": {k: {"value": v.value, "small": sm, "large": lg, "source": str(v.loc)}
                    for k, (v, sm, lg, _) in summary.extremes.items()},
        "matrices": {k.split(".")[0]: [{"large": lg, "small": sm, "value": v.value, "source": str(v.loc)}
                                       for (lg, sm), v in sorted(m.items())] for k, m in mats.items()},
        "points_used": [describe(p.pattern, p.block_size, p.iodepth) for p in points],
        "runs": _runs_doc(runs, chosen, run),
    }
    return cal, sources, document, summary


def _runs_doc(runs: list[OrionSummary], chosen: int, run: int | None) -> list[dict[str, object]]:
    why = f"--run {run}" if run else ("the only run" if len(runs) == 1 else f"the last of {len(runs)} runs pasted in the summary "
                                                                          "file; --run N imports another")
    return [{"run": i + 1, "line": r.first_line, "version": r.version, "test": r.test, "imported": i == chosen,
             "why": why if i == chosen else "",
             "extremes": {k: {"value": v.value, "small": sm, "large": lg, "source": str(v.loc)}
                          for k, (v, sm, lg, _) in r.extremes.items()}} for i, r in enumerate(runs)]


def _summary_only(s: OrionSummary, prefix: Path, unit: str, device: str | None,
                  ) -> tuple[Calibration, list[dict[str, str]], dict[str, object]]:
    """Points from the summary's own lines when the CSVs are not there: Maximum
    Small IOPS (its latency from 'Small Read Latency: avg=' at the same point,
    11.2+) and Maximum Large MBPS. Minimum Small Latency stays in orion.json and
    the notes: the summary gives no rate at that point."""
    to_ms = 1e-3 if unit == "us" else 1.0
    points: list[Point] = []
    sources: list[dict[str, str]] = []
    if "Maximum Small IOPS" in s.extremes:
        v, sm, lg, _ = s.extremes["Maximum Small IOPS"]
        lat = s.read_latency.get((sm, lg))
        latency = lat[0].value * (1e-3 if lat[1].startswith("us") else 1.0) if lat else math.nan
        if lat is None and "Minimum Small Latency" in s.extremes and s.extremes["Minimum Small Latency"][1:3] == (sm, lg):
            latency = s.extremes["Minimum Small Latency"][0].value * to_ms
        points.append(Point("rand", s.small_bytes, sm, v.value, v.value * s.small_bytes / 1e6, latency, math.nan, s.duration_s))
        sources.append({"iops": v.source() + f" (Small={sm}, Large={lg})",
                        "lat_mean_ms": f"{lat[0].source()} ({lat[1] or unit})" if lat else "not in the summary at this point"})
    if "Maximum Large MBPS" in s.extremes:
        v, sm, lg, _ = s.extremes["Maximum Large MBPS"]
        points.append(Point(s.large_pattern, s.large_bytes, lg, v.value * MIB / s.large_bytes, v.value * MIB_TO_MB, math.nan,
                            math.nan, s.duration_s))
        sources.append({"mb_per_s": f"{v.source()} (Small={sm}, Large={lg}) x 1.048576"})
    if not points:
        raise ImportOptionError(f"{prefix}: no _iops.csv / _mbps.csv and the summary has no 'Maximum Small IOPS=' or "
                                "'Maximum Large MBPS=' line: nothing to use as a limit")
    name = device or (default_device(s.luns[0]) if len(s.luns) == 1 else s.test or prefix.name)
    cal = calibration(points, device=name, directory=", ".join(s.luns) or str(prefix), tool="ORION",
                      note=f"ORION {s.version or s.wording}: the summary only ({prefix}_summary.txt)", runtime_s=s.duration_s)
    document = {
        "format": 1, "prefix": str(prefix), "version": s.version, "test": s.test, "luns": s.luns, "latency_unit_in_files": unit,
        "small_io_bytes": s.small_bytes, "large_io_bytes": s.large_bytes, "summary_only": True,
        "summary": {k: {"value": v.value, "small": sm, "large": lg, "source": str(v.loc)} for k, (v, sm, lg, _) in s.extremes.items()},
        "matrices": {}, "points_used": [describe(p.pattern, p.block_size, p.iodepth) for p in points],
    }
    return cal, sources, document


__all__ = ["OrionSummary", "import_orion", "latency_unit", "parse_matrix", "parse_summaries", "parse_summary", "resolve_prefix"]
