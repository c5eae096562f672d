"""SLOB results (AWR text reports, or awr_info.sh output) -> slob result rows.

    run = import_slob([Path("harness")], update_pct=None, block_size=None)
    write_run(RunDir(out), run)

Each report is one point. Where its three coordinates come from:

* sessions: the file name, as the harness or SLOB's README names reports:
  the last all-digit '.'-token (awr.004.txt -> 4, awr.0012.txt -> 12,
  awr.txt.128 -> 128); awr_info's SESSIONS field, else its FILE name. An AWR
  report alone does not say how many SLOB sessions ran (its snapshot's
  session count includes background and idle sessions), so a report named
  otherwise is refused.
* update percentage: --update-pct, else the slob.conf beside the report (in
  its directory or one above, within what was named: the harness copies it
  into AWRs/), else the v_update_pct SLOB's sessions show in the report's SQL
  text. When the report shows v_update_pct, any other source must agree.
* block size: --block-size (the SLOB tablespace may have its own BLOCKSIZE),
  else the report's db_block_size, else its Std Block Size. awr_info output
  carries none: --block-size is needed.

Numbers (per second over the report's interval): read_iops = physical read IO
requests (Instance Activity; else Load Profile Read IO requests), mb_per_s =
physical read + write total bytes / 1e6, read_latency_ms = db file sequential
read (Avg Wait where it has 5 digits and a unit, else Time / Waits, as
awr_info computes it), ops_per_s = executes, cpu_busy_pct = 100 - Host CPU
%Idle. Each row's notes say which file and line each number came from.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..results import ResultRow
from .awr import cpu_marks, parse_awr
from .awr_info import AwrInfoRow, parse_awr_info, point_metrics
from .awr_model import AwrReport
from .common import ImportInputError, ImportOptionError, Loc, Value, read_lines
from .rundir import ImportedRun, import_notes

if TYPE_CHECKING:
    from ..spec import Scalar

LATENCY_SOURCE = "AWR: db file sequential read"
READ_EVENT = "db file sequential read"


@dataclass
class Point:
    shown: str  # the file as the user would name it
    kind: str  # "awr" or "awr_info"
    sessions: int
    update_pct: float
    block_size: int
    metrics: dict[str, float]
    sources: dict[str, str]
    started: str = ""
    database: dict[str, str] = field(default_factory=dict)
    parameters: dict[str, str] = field(default_factory=dict)
    slob: dict[str, str] = field(default_factory=dict)
    loc: Loc | None = None  # an awr_info line
    extra: dict[str, object] = field(default_factory=dict)  # not_read / marks for the run's import-notes.json


# ---------------------------------------------------------------------- finding the files
def find_inputs(paths: list[Path]) -> list[tuple[Path, str, Path, str]]:
    """(file, how to show it, the directory it was named under, 'awr' or
    'awr_info') for every AWR text report or awr_info output under `paths`;
    other files in a directory (logs, slob.conf) are passed over."""
    out: list[tuple[Path, str, Path, str]] = []
    for given in paths:
        if given.is_dir():
            for path in sorted(p for p in given.rglob("*") if p.is_file()):
                if kind := _kind(path):
                    out.append((path, str(path), given, kind))
        elif given.is_file():
            # a file named on its own is read as a report unless it is awr_info output: the AWR
            # reader then says what it found and where it gave up (an excerpt, a RAC global report)
            out.append((given, str(given), given.parent, _kind(given) or "awr"))
        else:
            raise ImportOptionError(f"{given}: no such file or directory")
    if not out:
        raise ImportOptionError(f"{', '.join(map(str, paths))}: no AWR report (text or HTML) and no awr_info.sh "
                                "output found (an AWR report starts 'WORKLOAD REPOSITORY report for'; awr_info output 'FILE|SESSIONS|')")
    return out


def _kind(path: Path) -> str:
    """'awr', 'awr_info' or '' from the file's first 16 kB (an AWR HTML report's style sheet comes before its title)."""
    try:
        with open(path, "rb") as f:
            head = f.read(16384).decode("utf-8", errors="replace")
    except OSError:
        return ""
    if head.startswith("\x1f\ufffd"):  # gzip's magic bytes (SLOB kits ship awr.html.gz)
        try:
            import gzip

            with gzip.open(path, "rb") as g:
                head = g.read(16384).decode("utf-8", errors="replace")
        except (OSError, EOFError):
            return ""
    first = next((line for line in head.splitlines() if line.strip()), "")
    if first.replace(" ", "").upper().startswith("FILE|SESSIONS|"):
        return "awr_info"
    if re.search(r"WORKLOAD REPOSITORY|AWR (RAC )?Report for|^\s*Load Profile\s", head, re.IGNORECASE | re.MULTILINE):
        return "awr"
    return ""


def sessions_from_name(name: str) -> int | None:
    """The last all-digit '.'-token of a report's name (the harness's awr.004.txt, SLOB's awr.txt.128)."""
    digits = [t for t in Path(name).name.split(".") if t.isdigit()]
    return int(digits[-1]) if digits else None


# ---------------------------------------------------------------------- slob.conf
_CONF = re.compile(r"^\s*UPDATE_PCT\s*=\s*(.*?)\s*(#.*)?$")


def read_update_pct(conf: Path) -> Value | None:
    """UPDATE_PCT from a slob.conf (the last assignment wins, as in the shell)."""
    found = None
    for ln in read_lines(conf, str(conf)):
        m = _CONF.match(ln.text)
        if not m:
            continue
        text = m.group(1).strip("\"'")
        loc = Loc(str(conf), ln.number)
        if not re.fullmatch(r"\d+(\.\d+)?", text):
            raise loc.error("UPDATE_PCT", f"{m.group(1)!r} is not a percentage (SLOB's slob.conf holds e.g. UPDATE_PCT=20)")
        value = float(text)
        if value > 100:
            raise loc.error("UPDATE_PCT", f"{value:g} is more than 100")
        found = Value(value, loc, "slob.conf UPDATE_PCT")
    return found


def _conf_beside(path: Path, root: Path) -> Path | None:
    """slob.conf in the report's directory, else one directory up (not above what the user named)."""
    root = root.resolve()
    for d in (path.parent, path.parent.parent):
        conf = d / "slob.conf"
        if conf.is_file():
            return conf
        if d.resolve() == root:
            break
    return None


# ---------------------------------------------------------------------- points
def _update_pct(option: float | None, conf: Value | None, report: tuple[str, Loc] | None, shown: str) -> tuple[float, str]:
    if option is not None:
        value, source = option, "--update-pct"
    elif conf is not None:
        value, source = conf.value, f"{conf.loc} UPDATE_PCT"
    elif report is not None:
        return float(report[0]), f"{report[1]} v_update_pct in the SQL text"
    else:
        raise ImportInputError(shown, 1, "update percentage", "no slob.conf beside this file, no v_update_pct in it, and no "
                               "--update-pct: give --update-pct N (SLOB's UPDATE_PCT)")
    if report is not None and float(report[0]) != value:
        raise report[1].error("update percentage", f"SLOB ran with v_update_pct {report[0]!r} (here) but {source} says "
                              f"{value:g}; import with the slob.conf of that run, or --update-pct {report[0]}")
    return value, source


def _block_size(option: int | None, report: AwrReport | None, shown: str) -> tuple[int, str]:
    if option is not None:
        return option, "--block-size"
    if report is not None:
        param = report.parameters.get("db_block_size")
        if param is not None:
            if not param[0].isdigit():
                raise param[1].error("db_block_size", f"{param[0]!r} is not a number of bytes")
            return int(param[0]), f"{param[1]} init.ora db_block_size"
        if report.std_block_size is not None:
            return int(report.std_block_size.value), report.std_block_size.source()
    raise ImportInputError(shown, 1, "block size", "the report gives no db_block_size (awr_info output never does): "
                           "give --block-size (e.g. 8k)")


def report_point(report: AwrReport, shown: str, root: Path, path: Path, update_pct: float | None,
                 block_size: int | None) -> Point:
    sessions = sessions_from_name(shown)
    if sessions is None or sessions < 1:
        raise ImportInputError(shown, 1, "sessions", "the name does not say how many sessions ran; name it as SLOB's "
                               "harness does (awr.NNN.txt, e.g. awr.016.txt) or as SLOB's README says (awr.txt.N)")
    conf_path = _conf_beside(path, root)
    conf = read_update_pct(conf_path) if conf_path else None
    pct, pct_source = _update_pct(update_pct, conf, report.slob_vars.get("update_pct"), shown)
    bs, bs_source = _block_size(block_size, report, shown)
    metrics, sources = awr_metrics(report)
    sources.update({"update_pct": pct_source, "block_size": bs_source, "sessions": f"{shown} (file name)"})
    extra = import_notes(report, cpu_marks(report))
    h = report.header
    database = {"db_name": h.get("DB Name", ""), "db_id": h.get("DB Id", ""), "release": report.release,
                "host": h.get("Host Name", ""), "platform": h.get("Platform", ""), "cpus": h.get("CPUs", ""),
                "cores": h.get("Cores", ""), "sockets": h.get("Sockets", ""), "memory_gb": h.get("Memory(GB)", "")}
    return Point(shown, "awr", sessions, pct, bs, metrics, sources, report.begin_snap, database,
                 {k: v for k, (v, _) in report.parameters.items()}, {k: v for k, (v, _) in report.slob_vars.items()},
                 extra=extra)


def awr_metrics(r: AwrReport) -> tuple[dict[str, float], dict[str, str]]:
    m: dict[str, float] = {}
    src: dict[str, str] = {}

    def put(key: str, value: Value | None, scale: float = 1.0, how: str = "") -> None:
        if value is not None:
            m[key] = value.value * scale
            src[key] = value.source() + how

    reads = r.per_second("physical read IO requests") or r.load.get("read_requests")
    if reads is None:
        raise ImportInputError(r.path, r.lines, "physical read IO requests", "neither Instance Activity Stats nor Load "
                               "Profile (Read IO requests) gives the read I/O requests", end_of_file=True)
    put("read_iops", reads)
    put("write_iops", r.per_second("physical write IO requests") or r.load.get("write_requests"))
    read_b, write_b = r.per_second("physical read total bytes"), r.per_second("physical write total bytes")
    if read_b is not None:
        put("read_mb_per_s", read_b, 1e-6, " / 1e6")
        m["mb_per_s"] = (read_b.value + (write_b.value if write_b else 0.0)) / 1e6
        src["mb_per_s"] = f"{read_b.source()} + {write_b.source() if write_b else '(no write bytes)'}, / 1e6"
    elif "read_mb" in r.load:
        put("read_mb_per_s", r.load["read_mb"], 1.048576, " x 1.048576")
        write_mb = r.load.get("write_mb")
        m["mb_per_s"] = (r.load["read_mb"].value + (write_mb.value if write_mb else 0.0)) * 1.048576
        src["mb_per_s"] = f"{r.load['read_mb'].source()} + Write IO (MB), x 1.048576"
    else:
        raise ImportInputError(r.path, r.lines, "physical read total bytes", "neither Instance Activity Stats nor Load "
                               "Profile (Read IO (MB)) gives the bytes read", end_of_file=True)
    event = r.event(READ_EVENT)
    if event is None:
        raise ImportInputError(r.path, r.lines, READ_EVENT, "the event is in neither the Top events table nor Foreground "
                               "Wait Events: no single-block read latency to draw", end_of_file=True)
    latency, how = event.latency_ms()
    m["read_latency_ms"] = latency
    src["read_latency_ms"] = f"{event.loc} {READ_EVENT} {how}"
    put("ops_per_s", r.load.get("executes") or r.per_second("execute count"))
    if r.host_idle_pct is not None:
        m["cpu_busy_pct"] = round(100.0 - r.host_idle_pct.value, 6)
        src["cpu_busy_pct"] = f"{r.host_idle_pct.source()}: 100 - %Idle"
    put("db_time_per_s", r.load.get("db_time"))
    put("db_cpu_per_s", r.load.get("db_cpu"))
    put("logical_reads_per_s", r.load.get("logical_reads"))
    put("redo_mb_per_s", r.load.get("redo_bytes"), 1e-6, " / 1e6")
    put("elapsed_s", r.elapsed())
    return m, src


def info_points(rows: list[AwrInfoRow], path: Path, root: Path, update_pct: float | None, block_size: int | None,
                shown: str) -> list[Point]:
    conf_path = _conf_beside(path, root)
    conf = read_update_pct(conf_path) if conf_path else None
    out = []
    for row in rows:
        sessions = int(row.sessions) if row.sessions.isdigit() else sessions_from_name(row.file)
        if not sessions:
            raise row.loc.error("SESSIONS", f"blank, and the FILE name {row.file!r} holds no session count")
        pct, pct_source = _update_pct(update_pct, conf, None, shown)
        if block_size is None:
            raise row.loc.error("block size", "awr_info.sh output does not carry the block size: give --block-size (e.g. 8k)")
        metrics, sources = point_metrics(row)
        sources.update({"update_pct": pct_source, "block_size": "--block-size", "sessions": f"{row.loc} SESSIONS/FILE"})
        out.append(Point(f"{shown} ({row.file})", "awr_info", sessions, pct, block_size, metrics, sources,
                         slob={"top_wait": row.top_wait}, loc=row.loc))
    return out


def import_slob(paths: list[Path], *, update_pct: float | None = None, block_size: int | None = None,
                environment: dict[str, object] | None = None, command: str = "blocklab import slob") -> ImportedRun:
    """Read every report under `paths` into the rows of one slob run."""
    if update_pct is not None and not 0 <= update_pct <= 100:
        raise ImportOptionError(f"--update-pct {update_pct:g}: give a percentage from 0 to 100")
    points: list[Point] = []
    reports_by_name: dict[str, str] = {}
    for path, shown, root, kind in find_inputs(paths):
        if kind == "awr":
            points.append(report_point(parse_awr(path, shown), shown, root, path, update_pct, block_size))
            reports_by_name.setdefault(path.name, shown)
        else:
            points += info_points(parse_awr_info(path, shown), path, root, update_pct, block_size, shown)
    _no_double_counting(points, reports_by_name)
    points.sort(key=lambda p: (p.block_size, p.update_pct, p.sessions, p.shown))
    rows = [_row(p) for p in points]
    knobs: dict[str, list[Any]] = {
        "workload.sessions": sorted({p.sessions for p in points}),
        "workload.update_pct": sorted({_num(p.update_pct) for p in points}),
        "block_size": sorted({p.block_size for p in points}),
    }
    from ..analysis.slob_view import saturation_headline, saturation_text

    return ImportedRun(
        name="slob-import", description="SLOB results imported from Oracle AWR reports: latency against IOPS and MB/s, "
        "saturation per update share and block size", workload="slob", knobs=knobs, rows=rows,
        environment={**_environment(points), **(environment or {})}, metric="read_iops", goal="max", unit="IOPS",
        command=command, verdict_extra=saturation_text(rows), headline=saturation_headline(rows),
    )


def _no_double_counting(points: list[Point], reports: dict[str, str]) -> None:
    """awr_info output and the reports it summarised, imported together, would count each point twice."""
    for p in points:
        name = p.shown.rsplit("(", 1)[-1].rstrip(")")
        if p.loc is not None and name in reports:
            raise p.loc.error("FILE", f"{name!r} is also imported as the report {reports[name]}: import one of them")


def _num(x: float) -> float | int:
    return int(x) if float(x).is_integer() else x


def _row(p: Point) -> ResultRow:
    settings: dict[str, Scalar] = {"workload.sessions": p.sessions, "workload.update_pct": _num(p.update_pct), "block_size": p.block_size}
    metrics = {"sessions": float(p.sessions), "update_pct": float(p.update_pct), "block_size": float(p.block_size), **p.metrics}
    notes = {"file": p.shown, "kind": p.kind, "sources": p.sources, "latency_source": LATENCY_SOURCE, **p.extra}
    if p.slob:
        notes["slob"] = p.slob
    return ResultRow(cell=0, block=0, settings=settings, applied={k: str(v) for k, v in settings.items()}, metrics=metrics,
                     started=p.started, notes=notes)


def _environment(points: list[Point]) -> dict[str, Any]:
    """One environment for all the reports: what they agree on as it is, what differs joined."""
    dbs: dict[tuple[str, str], Point] = {}
    for p in points:
        if p.database:
            dbs.setdefault((p.database["db_name"], p.database["db_id"]), p)
    if not dbs:
        return {"engine_version": "unknown (awr_info output names no release)"}

    def joined(key: str) -> str:
        return " / ".join(dict.fromkeys(str(p.database[key]) for p in dbs.values() if p.database.get(key)))

    env: dict[str, Any] = {"engine_version": joined("release"), "host": joined("host"), "machine": joined("platform")}
    first = next(iter(dbs.values())).database
    if len(dbs) == 1 and str(first.get("cpus", "")).isdigit():
        env["cpu_count"] = int(first["cpus"])
        env["cpu"] = f"{first['cpus']} CPUs, {first['cores']} cores, {first['sockets']} sockets (from the AWR report)"
        try:
            env["memory_bytes"] = int(float(first["memory_gb"]) * 2**30)
        except ValueError:
            pass
    env["engine_extra"] = {"databases": "; ".join(
        f"{p.database['db_name']} ({p.database['release']}, db_block_size {p.parameters.get('db_block_size', '?')})"
        for p in dbs.values())}
    block_sizes = {p.block_size for p in points}
    if len(block_sizes) == 1:
        env["engine_extra"]["block_size"] = next(iter(block_sizes))
    prefix = len(dbs) > 1
    env["engine_settings"] = {(f"{p.database['db_name']}: " if prefix else "") + k: v
                              for p in dbs.values() for k, v in sorted(p.parameters.items())}
    slob = {k: v for p in points for k, v in p.slob.items() if k != "top_wait"}
    if slob:
        env["slob"] = slob
    return env


__all__ = ["LATENCY_SOURCE", "Point", "awr_metrics", "find_inputs", "import_slob", "read_update_pct", "sessions_from_name"]
