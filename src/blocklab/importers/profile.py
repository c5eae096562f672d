"""AWR reports -> time profiles (seed 002's TIMESOURCE / SECONDS / PERCENTAGE),
one result row per report, so two reports taken before and after a change
read side by side.

    TOTAL_TIME        DB time: Time Model (0.1 s), else the header's DB Time
                      minutes, else Load Profile DB Time(s) x Elapsed
    CPU               the DB CPU row of the Top events table (Time Model DB CPU
                      when the table has none)
    each wait         its Total Wait Time in the Top events table
    UNACCOUNTED_TIME  what is left: waits too small for the Top table and time
                      sessions spent queued for a CPU

Settings: the init.ora parameters that differ between the reports (the change
the comparison is about, e.g. db_writer_processes 4 -> 36), else the file
names; --label names them instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..probes.profile import SessionProfile, flatten_profile
from ..results import ResultRow
from .awr import cpu_marks, parse_awr
from .awr_model import CPU_EVENT, AwrReport
from .common import ImportInputError, ImportOptionError
from .rundir import ImportedRun, import_notes

MAX_PARAMETERS = 4  # more differing parameters than this make a label nobody reads: the file names say it better
IGNORED_PARAMETERS = ("resource_manager_plan",)  # the scheduler's maintenance window changes it on its own


def awr_profile(r: AwrReport) -> tuple[SessionProfile, dict[str, str], list[str]]:
    """The report's profile, where its numbers came from, and the marks its own
    consistency checks leave (shown in the report; never a refusal: the numbers
    are the database's own)."""
    if not r.top_events:
        where = next((n for n in r.not_read if n.field == "Top Foreground Events"), None)
        raise ImportInputError(r.path, where.line if where else r.lines, "Top Foreground Events",
                               "the profile is built from the Top events table and this file has none: export the whole "
                               "report with @?/rdbms/admin/awrrpt.sql", end_of_file=True)
    total = r.db_time_s()
    waits = {e.name: e.time_s for e in r.top_events if e.name != CPU_EVENT}
    sources = {"TOTAL_TIME": total.source()}
    cpu_row = next((e for e in r.top_events if e.name == CPU_EVENT), None)
    if cpu_row is not None:
        cpu = cpu_row.time_s
        sources["CPU"] = f"{cpu_row.loc} {r.top_title}: DB CPU"
    else:
        model = r.time_model_s("DB CPU") or r.load.get("db_cpu")
        if model is None:
            raise total.loc.error("DB CPU", "neither the Top events table nor Time Model nor Load Profile gives DB CPU")
        cpu = model.value if model.what.startswith("Time Model") else model.value * r.elapsed().value
        sources["CPU"] = model.source()
    for e in r.top_events:
        if e.name != CPU_EVENT:
            sources[e.name] = f"{e.loc} {r.top_title}: {e.name}" + (" (4-character Time column: cut, not rounded)"
                                                                      if e.time_truncated else "")
    marks = cpu_marks(r)
    listed = cpu + sum(waits.values())
    if listed > total.value * 1.01 + 1.0:
        marks.append(f"{r.path}: the Top events add up to {listed:,.1f} s, more than DB time {total.value:,.1f} s "
                     f"({total.loc}): foreground waits overlap (12c and later count some inside others, and the report's "
                     f"'% of DB time' passes 100%), so UNACCOUNTED_TIME is negative here; the figures are the report's own")
    return SessionProfile(pid=0, elapsed_s=total.value, waits=waits, cpu_s=cpu), sources, marks


def import_awr_profiles(paths: list[Path], labels: list[str] | None = None, command: str = "blocklab import awr") -> ImportedRun:
    if not paths:
        raise ImportOptionError("give at least one AWR text report")
    if labels and len(labels) != len(paths):
        raise ImportOptionError(f"--label given {len(labels)} times for {len(paths)} reports: give one per report, in order")
    reports = [parse_awr(p, str(p)) for p in paths]
    settings = _settings(reports, paths, labels)
    rows = []
    for r, s in zip(reports, settings):
        profile, sources, marks = awr_profile(r)
        elapsed = r.elapsed().value
        metrics = {**flatten_profile(profile, "profile.total"), "profile.awr": 1.0, "db_time_s": profile.elapsed_s,
                   "db_cpu_s": profile.cpu_s, "elapsed_s": elapsed,
                   "average_active_sessions": profile.elapsed_s / elapsed}
        for key, name in (("read_requests", "read_iops"), ("write_requests", "write_iops"), ("executes", "executes_per_s"),
                          ("transactions", "transactions_per_s")):
            if key in r.load:
                metrics[name] = r.load[key].value
                sources[name] = r.load[key].source()
        rows.append(ResultRow(cell=0, block=0, settings=s, applied={k: str(v) for k, v in s.items()}, metrics=metrics,
                              started=r.begin_snap, notes={"file": r.path, "sources": sources, "top_table": r.top_title,
                                                           **import_notes(r, marks)}))
    knobs: dict[str, list[Any]] = {}
    for s in settings:
        for k, v in s.items():
            knobs.setdefault(k, [])
            if v not in knobs[k]:
                knobs[k].append(v)
    return ImportedRun(
        name="awr-profile", description="Where the time went, from Oracle AWR reports (DB time by wait event, CPU, the rest)",
        workload="awr_profile", knobs=knobs, rows=rows, environment=_environment(reports), metric="db_time_s", goal="min",
        unit="s", command=command)


def _settings(reports: list[AwrReport], paths: list[Path], labels: list[str] | None) -> list[dict[str, Any]]:
    if labels:
        if len(set(labels)) != len(labels):
            raise ImportOptionError(f"--label {', '.join(labels)}: each report needs its own label")
        return [{"report": label} for label in labels]
    params = [{k: v for k, (v, _) in r.parameters.items() if k not in IGNORED_PARAMETERS} for r in reports]
    names = sorted({k for p in params for k in p})
    differing = [k for k in names if len({p.get(k, "(not set)") for p in params}) > 1]
    out = [{k: p.get(k, "(not set)") for k in differing} for p in params]
    if 0 < len(differing) <= MAX_PARAMETERS and len({tuple(s.items()) for s in out}) == len(out):
        return out
    stems = [p.name for p in paths]
    if len(set(stems)) != len(stems):
        stems = [str(p) for p in paths]
    return [{"report": s} for s in stems]


def _environment(reports: list[AwrReport]) -> dict[str, object]:
    def joined(values: list[str]) -> str:
        return " / ".join(dict.fromkeys(v for v in values if v))

    env: dict[str, object] = {
        "engine_version": joined([r.release for r in reports]),
        "host": joined([r.header.get("Host Name", "") for r in reports]),
        "machine": joined([r.header.get("Platform", "") for r in reports]),
        "engine_extra": {"databases": joined([f"{r.header.get('DB Name', '?')} ({r.release})" for r in reports])},
    }
    first = reports[0]
    if len(reports) == 1 or all(r.parameters == first.parameters for r in reports):
        env["engine_settings"] = {k: v for k, (v, _) in first.parameters.items()}
    else:
        env["engine_settings"] = {f"{r.path}: {k}": v for r in reports for k, (v, _) in r.parameters.items()}
    return env


__all__ = ["awr_profile", "import_awr_profiles"]
