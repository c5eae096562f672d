"""AWR HTML reports (awrrpt.sql's default output, 10g to 23ai) -> the same
AwrReport the text reader gives, so both import alike.

    report = parse_awr(Path("awrrpt_1_100_101.html"))   # awr.parse_awr sends HTML here

The tables are found by what they say they are: the `summary` attribute Oracle
puts on each (e.g. "This table displays load profile", stable from 10g to
23ai), else the heading or caption just above them ("Top 10 Foreground Events
by Total Wait Time", "Load Profile"), else their header cells (the DB Name /
Release table of older releases). A column is known by its heading, as in the
text reader (awr.classify), so a release that adds or moves a column reads the
same. Cells keep the text report's numbers (thousands separators, '758.64us'),
read by the same functions; each number keeps the file and the line of its
<tr>. Python's html.parser is enough: AWR writes plain, well-formed tables, and
a new dependency would buy nothing here.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any

from .awr_model import (
    CPU_EVENT,
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
from .common import ImportInputError, Line, Loc, Value, number


@dataclass
class Row:
    line: int
    cells: list[str]
    heads: list[bool]  # True for a <th>


@dataclass
class Table:
    line: int
    summary: str
    heading: str  # the heading, caption or short text just above
    rows: list[Row] = field(default_factory=list)

    def header(self) -> list[str]:
        """The column headings: the first row made of <th> cells (two header rows are joined column by column)."""
        heads = [r for r in self.rows[:2] if r.cells and all(r.heads)]
        if not heads:
            return []
        if len(heads) == 2 and len(heads[1].cells) == len(heads[0].cells):
            return [f"{a} {b}".strip() for a, b in zip(heads[0].cells, heads[1].cells)]
        return heads[-1].cells

    def body(self) -> list[Row]:
        return [r for r in self.rows if r.cells and not all(r.heads)]

    def says(self, *words: str) -> bool:
        text = f"{self.summary} {self.heading}".lower()
        return all(w.lower() in text for w in words)


class _Tables(HTMLParser):
    """Every <table> of the document with its rows of cell texts, its summary
    and the text just above it; the title and the <h1> kept for the report kind."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: list[Table] = []
        self.stack: list[Table] = []
        self.row: Row | None = None
        self.cell: list[str] | None = None
        self.cell_head = False
        self.text: list[str] = []  # text since the last table, outside any table
        self.title = ""
        self.in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "table":
            heading = next((t for t in reversed(self.text) if t), "")
            self.stack.append(Table(self.getpos()[0], a.get("summary", ""), heading[:160]))
            self.text = []
        elif tag == "tr" and self.stack:
            self.row = Row(self.getpos()[0], [], [])
        elif tag in ("td", "th") and self.row is not None:
            self.cell, self.cell_head = [], tag == "th"
        elif tag == "br" and self.cell is not None:
            self.cell.append(" ")
        elif tag == "caption" and self.stack:
            self.cell = []
        elif tag == "title":
            self.in_title = True
        elif tag in ("h1", "h2", "h3", "h4", "p") and not self.stack:
            self.text.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self.row is not None and self.cell is not None:
            self.row.cells.append(_clean("".join(self.cell)))
            self.row.heads.append(self.cell_head)
            self.cell = None
        elif tag == "caption" and self.stack and self.cell is not None:
            self.stack[-1].heading = _clean("".join(self.cell)) or self.stack[-1].heading
            self.cell = None
        elif tag == "tr" and self.row is not None and self.stack:
            self.stack[-1].rows.append(self.row)
            self.row = None
        elif tag == "table" and self.stack:
            self.tables.append(self.stack.pop())
        elif tag == "title":
            self.in_title = False

    def handle_data(self, data: str) -> None:
        if self.in_title:
            self.title += data
        if self.cell is not None:
            self.cell.append(data)
        elif not self.stack:
            text = _clean(data)
            if text:
                if self.text and self.text[-1] and not self.text[-1].endswith(" "):
                    self.text[-1] += " " + text
                else:
                    self.text.append(text)


def _clean(text: str) -> str:
    return re.sub(r"\s+", " ", text.replace("\xa0", " ")).strip()


# ---------------------------------------------------------------------- the report
def parse_awr_html(text: str, name: str) -> AwrReport:
    parser = _Tables()
    parser.feed(text)
    parser.close()
    tables = parser.tables
    last = text.count("\n") + 1
    head = f"{parser.title} {text[:6000]}"
    if re.search(r"AWR RAC Report|WORKLOAD REPOSITORY REPORT \(RAC\)|WORKLOAD REPOSITORY RAC report", head, re.IGNORECASE):
        line = next((i for i, t in enumerate(text.split("\n"), 1) if re.search(r"RAC Report|REPORT \(RAC\)|RAC report", t)), 1)
        raise ImportInputError(name, line, "title", RAC_GLOBAL_HELP)
    not_read: list[NotRead] = []
    load = _load(tables, name, not_read)
    top_title, top = _top(tables, name, not_read)
    if load is None and top is None:
        raise ImportInputError(name, last, "Load Profile / Top events",
                               "an HTML page with no 'load profile' table and no top events table: not an AWR report, or "
                               "cut short before them (gave up at the end of the file); export the report again with "
                               "@?/rdbms/admin/awrrpt.sql", end_of_file=True)
    if top is None:
        not_read.append(NotRead("Top Foreground Events", last, "the page has no top events table"))
    header = _header(tables, name, not_read)
    snaps = _snaps(tables, name, not_read)
    release_line = header.pop("_line", "1")
    return AwrReport(
        path=name,
        lines=last,
        release=header.get("Release", ""),
        header=header,
        release_loc=Loc(name, int(release_line)),
        begin_snap=snaps.get("begin", ""),
        end_snap=snaps.get("end", ""),
        elapsed_s=snaps.get("elapsed"),
        db_time_header_s=snaps.get("db_time"),
        load=load or LoadProfile({}),
        top_title=top_title,
        top_events=top or [],
        foreground_events=_foreground(tables, name),
        activity=_activity(tables, name),
        time_model=_time_model(tables, name),
        parameters=_parameters(tables, name),
        host_idle_pct=_host_idle(tables, name, not_read),
        std_block_size=_std_block_size(tables, name, not_read),
        slob_vars=_slob(tables, name),
        not_read=not_read,
        form="html",
    )


def _find(tables: list[Table], pred: Callable[[Table], bool]) -> list[Table]:
    return [t for t in tables if pred(t)]


def _header(tables: list[Table], name: str, not_read: list[NotRead]) -> dict[str, str]:
    """DB Name / DB Id / Release / RAC, the Instance and Host tables: by their header cells."""
    out: dict[str, str] = {}
    for t in tables:
        if t.says("load profile"):
            break  # the header tables come first; later ones (ASH's Top SQL has Container Name) are no header
        cols = t.header()
        if not cols or not ({"DB Name", "Host Name", "Instance", "Container Name"} & set(cols)):
            continue
        body = t.body()
        if not body:
            continue
        row = body[0]
        for col, value in zip(cols, row.cells):
            key = "Memory(GB)" if col.replace(" ", "") == "Memory(GB)" else col
            out.setdefault(key, value)
        if "Release" in cols:
            out["_line"] = str(row.line)
    if "DB Name" not in out:
        not_read.append(NotRead("DB Name / Release", 1, "no table with DB Name / Release header cells"))
    elif not re.fullmatch(r"\d+(\.\d+)+", out.get("Release", "")):
        not_read.append(NotRead("Release", int(out.get("_line", "1")), f"{out.get('Release', '')!r} is not an Oracle release "
                                "number (e.g. 19.0.0.0.0)"))
        out.pop("Release", None)
    return out


_MINS = re.compile(r"([\d,.]+)\s*\(mins\)")


def _snaps(tables: list[Table], name: str, not_read: list[NotRead]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for t in tables:
        # by its summary or its Snap Id column, not by the text above it: a PDB report's
        # <h1> ("... PDB report (PDB snapshots)") sits above the DB Name table
        if not ("snapshot" in t.summary.lower() or "Snap Id" in t.header()):
            continue
        cols = t.header()
        for row in t.body():
            label = row.cells[0].rstrip(":").strip() if row.cells else ""
            loc = Loc(name, row.line)
            if label in ("Begin Snap", "End Snap"):
                # the Snap Time column's cell, else the row's cell ending in a time of day
                cells = (row.cells[cols.index("Snap Time"):][:1] if "Snap Time" in cols else []) + row.cells[1:]
                when = next((c for c in cells if re.search(r"\d:\d\d:\d\d$", c)), cells[0] if cells else "")
                iso = snap_time(when)
                if iso is None:
                    not_read.append(NotRead(f"{label} time", row.line, f"{when!r} {SNAP_TIME_HELP}"))
                out[label.split()[0].lower()] = iso or ""
            elif label in ("Elapsed", "DB Time"):
                m = next((m for c in row.cells if (m := _MINS.search(c))), None)
                if m is None:
                    not_read.append(NotRead(label, row.line, "no 'N (mins)' in the row"))
                    continue
                minutes = number(m.group(1), loc, label)
                out["elapsed" if label == "Elapsed" else "db_time"] = Value(round(minutes * 60.0, 6), loc,
                                                                            f"{label}: {m.group(1)} (mins) x 60")
        break
    if "elapsed" not in out:
        not_read.append(NotRead("Elapsed", 1, "no snapshot table with an 'Elapsed: N (mins)' row"))
    elif out["elapsed"].value <= 0:
        not_read.append(NotRead("Elapsed", out["elapsed"].loc.line, "is zero: no interval to divide by"))
        del out["elapsed"]
    return out


def _load(tables: list[Table], name: str, not_read: list[NotRead]) -> LoadProfile | None:
    found = _find(tables, lambda t: t.says("load profile") and not t.says("global cache") and not t.says("io profile"))
    if not found:
        not_read.append(NotRead("Load Profile", 1, "the page has no load profile table"))
        return None
    out: dict[str, Value | ImportInputError] = {}
    for row in found[0].body():
        if len(row.cells) < 2 or not row.cells[0].endswith(":"):
            continue
        label = row.cells[0][:-1].strip()
        if not row.cells[1]:
            continue
        key = LOAD_NAMES.get(label.lower(), label.lower())
        loc = Loc(name, row.line)
        try:
            out[key] = Value(number(row.cells[1], loc, f"Load Profile {label!r} Per Second"), loc,
                             f"Load Profile {label!r} per second")
        except ImportInputError as err:
            out[key] = err
    if not out:
        not_read.append(NotRead("Load Profile", found[0].line, "the table has no rows"))
        return None
    return LoadProfile(out)


_TOP = re.compile(r"Top \d+ .*Events", re.IGNORECASE)


def _is_top(t: Table) -> bool:
    s = t.summary.lower()
    if "background" in s or "background" in t.heading.lower():
        return False
    return bool(re.search(r"top \d+ .*(wait )?events", s) or _TOP.search(t.heading))


def _events(t: Table, name: str, title: str, lazy: bool, not_read: list[NotRead] | None = None) -> list[Event | ImportInputError]:
    names = t.header()
    kinds = [classify(n) for n in names]
    for need, label in (("name", "Event"), ("time", "Time")):
        if need not in kinds:
            raise ImportInputError(name, t.line, label, f"{title}: no {label} column in the heading {' | '.join(names)}")
    avg_label = names[kinds.index("avg")] if "avg" in kinds else ""
    avg_unit = "ms" if "(ms)" in avg_label.replace(" ", "") else None
    time_label = names[kinds.index("time")]
    out: list[Event | ImportInputError] = []
    for row in t.body():
        if len(row.cells) < len(names) or not any(c for c in row.cells):
            continue
        loc = Loc(name, row.line)
        fields = {k: v for k, v in zip(kinds, row.cells) if k != "skip"}
        try:
            out.append(event_from_fields(fields.get("name", ""), fields, loc, title, time_label, avg_label, avg_unit,
                                         not_read=not_read))
        except ImportInputError as err:
            if not lazy:
                raise
            out.append(err)
    return out


def _top(tables: list[Table], name: str, not_read: list[NotRead]) -> tuple[str, list[Event] | None]:
    found = _find(tables, _is_top)
    if not found:
        return "", None
    t = found[0]
    title = t.heading if _TOP.search(t.heading) else (t.summary or "Top events")
    m = _TOP.search(title)
    title = title[m.start():] if m else title
    events = [e for e in _events(t, name, title, lazy=False, not_read=not_read) if isinstance(e, Event)]
    if not events:
        raise ImportInputError(name, t.line, title, "the table has no rows")
    return title, events


def _foreground(tables: list[Table], name: str) -> dict[str, Event | ImportInputError]:
    out: dict[str, Event | ImportInputError] = {}
    for t in _find(tables, lambda t: t.says("foreground wait events") and not _is_top(t)):
        for e in _events(t, name, "Foreground Wait Events", lazy=True):
            key = e.name if isinstance(e, Event) else f"(line {e.line})"
            out.setdefault(key, e)
    return out


def _activity(tables: list[Table], name: str) -> dict[str, tuple[str, str, Loc] | ImportInputError]:
    out: dict[str, tuple[str, str, Loc] | ImportInputError] = {}
    for t in _find(tables, lambda t: t.says("instance activity") and "per Second" in " ".join(t.header())):
        cols = t.header()
        i_total = next((i for i, c in enumerate(cols) if c.lower() == "total"), 1)
        i_sec = next((i for i, c in enumerate(cols) if c.lower() == "per second"), 2)
        for row in t.body():
            if len(row.cells) <= max(i_total, i_sec):
                continue
            out.setdefault(row.cells[0], (row.cells[i_total], row.cells[i_sec], Loc(name, row.line)))
    return out


def _time_model(tables: list[Table], name: str) -> dict[str, tuple[str, Loc] | ImportInputError]:
    out: dict[str, tuple[str, Loc] | ImportInputError] = {}
    for t in _find(tables, lambda t: t.says("time model")):
        cols = t.header()
        i_time = next((i for i, c in enumerate(cols) if c.startswith("Time")), 1)
        for row in t.body():
            if len(row.cells) > i_time and row.cells[0]:
                out.setdefault(row.cells[0], (row.cells[i_time], Loc(name, row.line)))
    return out


def _parameters(tables: list[Table], name: str) -> dict[str, tuple[str, Loc]]:
    out: dict[str, tuple[str, Loc]] = {}
    for t in _find(tables, lambda t: "Parameter Name" in t.header() and "Begin value" in t.header()):
        for row in t.body():
            if len(row.cells) >= 2 and row.cells[0]:
                end = row.cells[2] if len(row.cells) > 2 else ""
                out.setdefault(row.cells[0], (end or row.cells[1], Loc(name, row.line)))
    return out


def _is_host_cpu(t: Table) -> bool:
    """The Host CPU table: a %Idle column with %User and %System beside it, or under a 'Host CPU'
    heading or summary (shared servers and dispatchers print a %Idle of their own)."""
    cols = t.header()
    if "%Idle" not in cols or t.says("instance cpu"):
        return False
    return {"%User", "%System"} <= set(cols) or t.says("host cpu") or t.says("system load statistics")


def _host_idle(tables: list[Table], name: str, not_read: list[NotRead]) -> Value | None:
    for t in _find(tables, _is_host_cpu):
        body = t.body()
        if not body:
            return None
        loc = Loc(name, body[0].line)
        try:
            return host_idle_value(dict(zip(t.header(), body[0].cells)), loc)
        except ImportInputError as err:
            not_read.append(NotRead("Host CPU %Idle", err.line, err.problem))
            return None
    return None


def _std_block_size(tables: list[Table], name: str, not_read: list[NotRead]) -> Value | None:
    for t in tables:
        for row in t.body():
            for i, c in enumerate(row.cells[:-1]):
                if c.rstrip(":").strip() == "Std Block Size":
                    text = row.cells[i + 1].replace(" ", "")
                    loc = Loc(name, row.line)
                    if not re.fullmatch(r"\d+K", text):
                        not_read.append(NotRead("Std Block Size", row.line, f"{text!r} is not a size in K (e.g. 8K)"))
                        return None
                    return Value(int(text[:-1]) * 1024.0, loc, f"Cache Sizes Std Block Size {text}")
    return None


def _slob(tables: list[Table], name: str) -> dict[str, tuple[str, Loc]]:
    """SLOB's DECLARE block in the SQL text tables, as the text reader reads it."""
    lines = [Line(row.line, cell) for t in tables if t.says("sql") for row in t.body() for cell in row.cells
             if "v_" in cell]
    return slob_vars(lines, name)


__all__ = ["CPU_EVENT", "parse_awr_html"]
