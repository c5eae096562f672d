"""AWR text reports (awrrpt.sql, 11g to 19c) -> the numbers blocklab uses.

    report = parse_awr(Path("awr.004.txt"))
    report.release, report.elapsed_s, report.load["executes"], report.top_events ...

Read: the header tables (DB Name / Release, Instance, Host), the snapshot
block (Elapsed, DB Time), Load Profile (11.2.0.3 names and the unit-bearing
names of 11.2.0.4+), the Top events table in its three layouts (11g "Top 5
Timed Foreground Events" with Time(s) and Avg (ms); 11.2.0.4/12.1 "Top 10
... by Total Wait Time", the earlier with a 4-character Time column that
truncates "558.x" to "558."; 12.2+/19c with a unit on Avg Wait and K/M on
large times), Foreground Wait Events, Instance Activity Stats (11g's one
table, 12c's Key/Other tables), Time Model Statistics, init.ora Parameters,
Host CPU, and the SLOB variables of the SQL text (v_update_pct ...).

SQL*Plus page headings ("OUTPUT" over a dash line, when a report is spooled
from AWR_REPORT_TEXT) are dropped before reading, line numbers kept. Every
number keeps the file and line it came from (Value.loc).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .awr_model import (
    LOAD_NAMES,
    RAC_GLOBAL_HELP,
    SNAP_TIME_HELP,
    AwrReport,
    Event,
    LoadProfile,
    NotRead,
    classify,
    event_from_fields,
    host_idle_value,
    slob_vars,
    snap_time,
)
from .common import (
    ImportInputError,
    Line,
    Loc,
    Value,
    cut,
    end_error,
    is_dash_line,
    labels,
    looks_html,
    number,
    read_text,
    spans,
    text_lines,
)

_TITLE = re.compile(r"WORKLOAD REPOSITORY (PDB )?report", re.IGNORECASE)
_RAC_GLOBAL = re.compile(r"WORKLOAD REPOSITORY REPORT \(RAC\)|WORKLOAD REPOSITORY RAC report|AWR RAC Report", re.IGNORECASE)
_STATSPACK = re.compile(r"^\s*STATSPACK (report|Statistics Report) for", re.IGNORECASE)
STATSPACK_HELP = ("a Statspack report (spreport.sql), not an AWR report: its sections are another report's ('Top 5 Timed "
                  "Events' with 'CPU time', a Load Profile without units) and blocklab does not read them; export the same "
                  "interval as an AWR report with @?/rdbms/admin/awrrpt.sql (AWR needs the Diagnostics Pack)")


def parse_awr(path: Path, shown: str | None = None) -> AwrReport:
    """Read an AWR report, text or HTML (gzipped or not). Optional fields that
    cannot be read are left out and named in report.not_read; ImportInputError
    (file, line, field) only when neither key section (Load Profile, the Top
    events table) is there, or a row blocklab uses cannot be read."""
    name = shown or str(path)
    raw = read_text(path, name)
    if looks_html(raw):
        from .awr_html import parse_awr_html

        return parse_awr_html(raw, name)
    lines = _drop_sqlplus_headings(text_lines(raw))
    return _parse_text(lines, name)


def _parse_text(lines: list[Line], name: str) -> AwrReport:
    if not lines:
        raise ImportInputError(name, 0, "file", "is empty")
    for ln in lines[:60]:
        if _RAC_GLOBAL.search(ln.text):
            raise ImportInputError(name, ln.number, "title", RAC_GLOBAL_HELP)
        if _STATSPACK.match(ln.text):
            raise ImportInputError(name, ln.number, "title", STATSPACK_HELP)
    not_read: list[NotRead] = []
    if not any(_TITLE.search(ln.text) for ln in lines[:60]):
        not_read.append(NotRead("title", lines[0].number, "no 'WORKLOAD REPOSITORY report for' in the first lines: read as an "
                                "excerpt of a report"))
    load = _optional(not_read, lambda: _load_profile(lines, name), "Load Profile")
    top = _optional(not_read, lambda: _top_events(lines, name, not_read), "Top Foreground Events", missing_only=True)
    if load is None and top is None:
        raise end_error(lines, name, "Load Profile / Top events",
                        "neither a Load Profile section nor a 'Top 5 Timed Foreground Events' / 'Top 10 Foreground Events' "
                        "table: not an AWR report, or cut short before them (gave up at the end of the file); export the "
                        "report again with @?/rdbms/admin/awrrpt.sql")
    no_header: tuple[dict[str, str], Loc | None] = ({}, None)
    header, release_loc = _optional(not_read, lambda: _header(lines, name), "DB Name / Release") or no_header
    snaps = _optional(not_read, lambda: _snaps(lines, name, not_read), "Elapsed") or {}
    top_title, top_events = top or ("", [])
    return AwrReport(
        path=name,
        lines=lines[-1].number,
        release=_release(header, release_loc, not_read),
        header=header,
        release_loc=release_loc or Loc(name, lines[0].number),
        begin_snap=snaps.get("begin", ""),
        end_snap=snaps.get("end", ""),
        elapsed_s=snaps.get("elapsed"),
        db_time_header_s=snaps.get("db_time"),
        load=load or LoadProfile({}),
        top_title=top_title,
        top_events=top_events,
        foreground_events=_section_events(lines, name, "Foreground Wait Events"),
        activity=_activity(lines, name),
        time_model=_time_model(lines, name),
        parameters=_parameters(lines, name),
        host_idle_pct=_optional(not_read, lambda: _host_idle(lines, name), "Host CPU %Idle"),
        std_block_size=_optional(not_read, lambda: _std_block_size(lines, name), "Std Block Size"),
        slob_vars=slob_vars(lines, name),
        not_read=not_read,
    )


def _optional(not_read: list[NotRead], read: Callable[[], Any], what: str, missing_only: bool = False) -> Any:
    """read(); a field it cannot read is named in not_read and left out (None).
    missing_only: only a missing section is left out; a row of it that cannot
    be read still stops the import (every row of the Top events table is used)."""
    try:
        return read()
    except ImportInputError as err:
        if missing_only and err.field != what:
            raise
        reason = err.problem if err.field == what else f"{err.field}: {err.problem}"
        not_read.append(NotRead(what, err.line, reason))
        return None


# ---------------------------------------------------------------------- helpers
def _drop_sqlplus_headings(lines: list[Line]) -> list[Line]:
    """AWR_REPORT_TEXT spooled from SQL*Plus repeats the column heading 'OUTPUT'
    and its dash line on every page, with a blank line before: not report text."""
    drop: set[int] = set()
    for i, ln in enumerate(lines):
        if ln.text.strip() == "OUTPUT" and i + 1 < len(lines) and is_dash_line(lines[i + 1].text):
            drop.update({i, i + 1})
            if i > 0 and not lines[i - 1].text.strip():
                drop.add(i - 1)
    return [ln for i, ln in enumerate(lines) if i not in drop]


def _find(lines: list[Line], pred: Callable[[str], bool], start: int = 0) -> int:
    for i in range(start, len(lines)):
        if pred(lines[i].text):
            return i
    return -1


def _table_row(lines: list[Line], i_head: int, name: str) -> tuple[dict[str, str], Loc]:
    """A one-row header table: heading at i_head, dashes below, the row below that."""
    if i_head + 2 >= len(lines) or not is_dash_line(lines[i_head + 1].text):
        raise ImportInputError(name, lines[i_head].number, lines[i_head].text.strip()[:30], "no dash line under this heading")
    cols = spans(lines[i_head + 1].text)
    names = labels([lines[i_head].text], cols)
    row = lines[i_head + 2]
    loc = Loc(name, row.number)
    return dict(zip(names, cut(row.text, cols, loc, names))), loc


def _header(lines: list[Line], name: str) -> tuple[dict[str, str], Loc]:
    i = _find(lines, lambda t: t.startswith("DB Name") and "DB Id" in t)
    if i < 0:
        raise end_error(lines, name, "DB Name / Release", "the report has no 'DB Name ... Release' header table")
    header, loc = _table_row(lines, i, name)
    for k in range(i + 3, min(i + 20, len(lines) - 2)):  # 12.2+ splits Instance and Host into tables of their own
        t = lines[k].text
        # a 19c PDB report heads its container table "Container DB Id  Container Name  Open Time"
        if t.startswith(("Instance", "Host Name", "Container Name", "Container DB Id")) and is_dash_line(lines[k + 1].text):
            header.update(_table_row(lines, k, name)[0])
    return header, loc


def _release(header: dict[str, str], loc: Loc | None, not_read: list[NotRead]) -> str:
    """The header's Release, or '' and a note saying why it was left out (the rest of the header stays)."""
    release = header.get("Release", "")
    if loc is None:
        return ""
    if not release:
        not_read.append(NotRead("Release", loc.line, "the header table has no Release value"))
    elif not re.fullmatch(r"\d+(\.\d+)+", release):
        not_read.append(NotRead("Release", loc.line, f"{release!r} is not an Oracle release number (e.g. 19.0.0.0.0)"))
        release = ""
    return release


_SNAP = re.compile(r"^\s*(Begin|End) Snap:\s+\d+\s+(\S.*?\d:\d\d:\d\d)(?:\s|$)")
_MINS = re.compile(r"^\s*(Elapsed|DB Time):\s+(\S+)\s+\(mins\)")


def _snaps(lines: list[Line], name: str, not_read: list[NotRead]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for ln in lines[:80]:
        if m := _SNAP.match(ln.text):
            iso = snap_time(m.group(2))
            if iso is None:
                not_read.append(NotRead(f"{m.group(1)} Snap time", ln.number, f"{m.group(2)!r} {SNAP_TIME_HELP}"))
            out[m.group(1).lower()] = iso or ""
        elif m := _MINS.match(ln.text):
            loc = Loc(name, ln.number)
            minutes = number(m.group(2), loc, m.group(1))
            key = "elapsed" if m.group(1) == "Elapsed" else "db_time"
            out[key] = Value(round(minutes * 60.0, 6), loc, f"{m.group(1)}: {m.group(2)} (mins) x 60")
    if "elapsed" not in out:
        raise end_error(lines, name, "Elapsed", "the snapshot block has no 'Elapsed: N (mins)' line")
    if out["elapsed"].value <= 0:
        raise out["elapsed"].loc.error("Elapsed", "is zero: no interval to divide by")
    out.setdefault("begin", "")
    out.setdefault("end", "")
    return out


def _load_profile(lines: list[Line], name: str) -> LoadProfile:
    i = _find(lines, lambda t: t.startswith("Load Profile"))
    if i < 0:
        raise end_error(lines, name, "Load Profile", "the report has no Load Profile section")
    out: dict[str, Value | ImportInputError] = {}
    for ln in lines[i + 1:]:
        t = ln.text
        if not t.strip():
            if out:
                break
            continue
        if t.lstrip().startswith(("~", "-")):
            continue
        m = re.match(r"^\s*([^:]+?):\s*(\S*)", t)
        if not m:
            break
        label = m.group(1).strip()
        if not m.group(2):
            continue  # a row the instance left empty (e.g. 'Session Logical Read IM:')
        key = LOAD_NAMES.get(label.lower(), label.lower())
        loc = Loc(name, ln.number)
        try:
            out[key] = Value(number(m.group(2), loc, f"Load Profile {label!r} Per Second"), loc, f"Load Profile {label!r} per second")
        except ImportInputError as err:
            out[key] = err
    if not out:
        raise ImportInputError(name, lines[i].number, "Load Profile", "the section has no rows")
    return LoadProfile(out)


def _event_table(lines: list[Line], i_title: int, name: str, title: str, lazy: bool = False,
                 not_read: list[NotRead] | None = None) -> list[Event | ImportInputError]:
    """The events table under a title line: heading lines, dashes, rows. With
    lazy=True a row that cannot be read is kept as its error, raised only if
    that event is asked for (a table of which one row is used). not_read: see
    event_from_fields."""
    j = _find(lines, lambda t: is_dash_line(t) and t.startswith("-"), i_title + 1)
    if j < 0 or j > i_title + 12:
        raise ImportInputError(name, lines[i_title].number, title, "no column heading (a line of dashes) under the title")
    heading = [ln.text for ln in lines[i_title + 1:j] if ln.text.strip() and not ln.text.lstrip().startswith(("~", "->"))]
    cols = spans(lines[j].text)
    names = labels(heading, cols)
    kinds = [classify(label) for label in names]
    for need, label in (("name", "Event"), ("time", "Time")):
        if need not in kinds:
            raise ImportInputError(name, lines[j].number, label, f"{title}: no {label} column in the heading {' | '.join(names)}")
    avg_label = names[kinds.index("avg")] if "avg" in kinds else ""
    avg_unit = "ms" if "(ms)" in avg_label.replace(" ", "") else None
    time_label = names[kinds.index("time")]
    time_col = cols[kinds.index("time")]
    truncated = time_col[1] - time_col[0] <= 4  # 11.2.0.4's 'Tota' column: '558.' is 558.x cut, not rounded
    events: list[Event | ImportInputError] = []
    for k in range(j + 1, len(lines)):
        ln = lines[k]
        t = ln.text
        nxt = lines[k + 1].text if k + 1 < len(lines) else ""
        if not t.strip() or ln.page or re.match(r"^\s+-{10,}", t) or nxt.lstrip().startswith("~"):
            break
        if is_dash_line(t) or t.startswith("->") or not re.search(r"[A-Za-z0-9]", t):
            continue  # rules, notes, and a pasted elision ('.')
        try:
            events.append(_event_row(ln, name, cols, kinds, names, title, time_label, avg_label, avg_unit, truncated,
                                     not_read))
        except ImportInputError as err:
            if not lazy:
                raise
            events.append(err)
    if not events:
        raise ImportInputError(name, lines[j].number, title, "the table has no rows")
    return events


def _event_row(ln: Line, name: str, cols: list[tuple[int, int]], kinds: list[str], names: list[str], title: str,
               time_label: str, avg_label: str, avg_unit: str | None, truncated: bool,
               not_read: list[NotRead] | None) -> Event:
    loc = Loc(name, ln.number)
    event = ln.text[: cols[kinds.index("name")][1]].strip()
    fields = dict(zip(kinds, cut(ln.text, cols, loc, [f"{title}: {n}" + (f" of {event!r}" if event else "") for n in names])))
    return event_from_fields(event, fields, loc, title, time_label, avg_label, avg_unit, truncated, not_read)


_TOP = re.compile(r"^Top \d+ .*Events")


def _top_events(lines: list[Line], name: str, not_read: list[NotRead]) -> tuple[str, list[Event]]:
    i = _find(lines, lambda t: bool(_TOP.match(t)))
    if i < 0:
        raise end_error(lines, name, "Top Foreground Events",
                        "the report has no 'Top 5 Timed Foreground Events' / 'Top 10 Foreground Events' table")
    title = lines[i].text.strip()
    # not lazy: every row is used; an overflowed Avg is left out and named
    events = [e for e in _event_table(lines, i, name, title, not_read=not_read) if isinstance(e, Event)]
    return title, events


def _section_starts(lines: list[Line], pred: Callable[[str], bool]) -> list[int]:
    return [i for i, ln in enumerate(lines) if pred(ln.text)]


def _section_events(lines: list[Line], name: str, title: str) -> dict[str, Event | ImportInputError]:
    out: dict[str, Event | ImportInputError] = {}
    for i in _section_starts(lines, lambda t: t.startswith(title)):
        for e in _event_table(lines, i, name, title, lazy=True):
            key = e.name if isinstance(e, Event) else _row_name(e)
            out.setdefault(key, e)
    return out


def _row_name(err: ImportInputError) -> str:
    m = re.search(r" of '([^']*)'", err.field)
    return m.group(1) if m else f"(line {err.line})"


def _rows(lines: list[Line], i_title: int) -> tuple[int, list[int]]:
    """(dash line index, row indices) of a titled table: rows until the section's end rule or a blank line."""
    j = _find(lines, lambda t: is_dash_line(t) and t.startswith("-"), i_title + 1)
    if j < 0 or j > i_title + 12:
        return -1, []
    rows = []
    for k in range(j + 1, len(lines)):
        t = lines[k].text
        if not t.strip() or lines[k].page or re.match(r"^\s+-{10,}", t):
            break
        rows.append(k)
    return j, rows


def _activity(lines: list[Line], name: str) -> dict[str, tuple[str, str, Loc] | ImportInputError]:
    """Statistic -> its Total and per Second texts, read into numbers only when
    used: one overflowed statistic blocklab never reads must not stop an import."""
    out: dict[str, tuple[str, str, Loc] | ImportInputError] = {}
    starts = _section_starts(lines, lambda t: bool(re.match(r"^(Key |Other )?Instance Activity Stats(?! -)", t)))
    for i in starts:
        j, rows = _rows(lines, i)
        if j < 0:
            continue
        cols = spans(lines[j].text)
        names = labels([lines[j - 1].text], cols)
        for k in rows:
            loc = Loc(name, lines[k].number)
            stat = lines[k].text[: cols[0][1]].strip()
            if stat in out or len(cols) < 3:
                continue
            try:
                parts = cut(lines[k].text, cols, loc, [f"Instance Activity Stats {stat!r}: {n}" for n in names])
                out[stat] = (parts[1], parts[2], loc)
            except ImportInputError as err:
                out[stat] = err
    return out


def _time_model(lines: list[Line], name: str) -> dict[str, tuple[str, Loc] | ImportInputError]:
    out: dict[str, tuple[str, Loc] | ImportInputError] = {}
    for i in _section_starts(lines, lambda t: t.startswith("Time Model Statistics")):
        j, rows = _rows(lines, i)
        if j < 0:
            continue
        cols = spans(lines[j].text)
        for k in rows:
            loc = Loc(name, lines[k].number)
            stat = lines[k].text[: cols[0][1]].strip()
            if not stat or stat in out:
                continue
            try:
                parts = cut(lines[k].text, cols, loc, [f"Time Model {stat!r}: {n}" for n in ("Statistic Name", "Time (s)", "% of DB Time")])
                out[stat] = (parts[1], loc)
            except ImportInputError as err:
                out[stat] = err
    return out


def _parameters(lines: list[Line], name: str) -> dict[str, tuple[str, Loc]]:
    out: dict[str, tuple[str, Loc]] = {}
    for i in _section_starts(lines, lambda t: t.startswith("init.ora Parameters")):
        j, rows = _rows(lines, i)
        if j < 0:
            continue
        cols = spans(lines[j].text)
        for k in rows:
            loc = Loc(name, lines[k].number)
            parts = cut(lines[k].text, cols, loc, ["init.ora: Parameter Name", "init.ora: Begin value", "init.ora: End value"], check=False)
            if parts and parts[0]:
                end = parts[2] if len(parts) > 2 else ""
                out[parts[0]] = (end or (parts[1] if len(parts) > 1 else ""), loc)
    return out


def _host_idle(lines: list[Line], name: str) -> Value | None:
    i = _find(lines, lambda t: t.startswith("Host CPU"))
    if i < 0:
        return None
    for k in range(i, min(i + 8, len(lines) - 2)):
        if "%Idle" in lines[k].text and is_dash_line(lines[k + 1].text):
            cols = spans(lines[k + 1].text)
            names = labels([lines[k].text], cols)
            if "%Idle" not in names:
                return None
            loc = Loc(name, lines[k + 2].number)
            values = dict(zip(names, cut(lines[k + 2].text, cols, loc, [f"Host CPU {n}" for n in names])))
            return host_idle_value(values, loc)
    return None


def _std_block_size(lines: list[Line], name: str) -> Value | None:
    for ln in lines[:80]:
        if m := re.search(r"Std Block Size:\s+(\S+)", ln.text):
            loc = Loc(name, ln.number)
            text = m.group(1)
            if not re.fullmatch(r"\d+K", text):
                raise loc.error("Std Block Size", f"{text!r} is not a size in K (e.g. 8K)")
            return Value(int(text[:-1]) * 1024.0, loc, f"Cache Sizes Std Block Size {text}")
    return None


def cpu_marks(r: AwrReport) -> list[str]:
    """DB CPU against the host's busy CPUs: the database cannot use more CPU than
    the host was busy. A mark when it does (10% and half a CPU of slack for
    rounding and sampling), never a refusal: both figures are kept as printed."""
    cpus_text = r.header.get("CPUs", "")
    if r.host_idle_pct is None or "db_cpu" not in r.load or not cpus_text.isdigit():
        return []
    try:
        db_cpu = r.load["db_cpu"]
    except ImportInputError:
        return []
    cpus = int(cpus_text)
    busy = cpus * (100.0 - r.host_idle_pct.value) / 100.0
    if db_cpu.value <= busy * 1.1 + 0.5:
        return []
    return [f"{r.path}: DB CPU {db_cpu.value:g} s per second ({db_cpu.loc}) is more than the host's busy CPUs, "
            f"{cpus} CPUs x {100.0 - r.host_idle_pct.value:.1f}% busy = {busy:.1f} ({r.host_idle_pct.loc}): the Host CPU "
            "figures and the database's disagree (another host's or an older CPU count, or a report edited by hand); "
            "both are kept as printed"]


__all__ = ["cpu_marks", "parse_awr"]
