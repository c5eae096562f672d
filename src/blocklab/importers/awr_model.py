"""An AWR report as both readers give it (awr.py the text, awr_html.py the
HTML): the report's fields with where each was read, and the row readers both
share (an events-table row, the Host CPU row, SLOB's DECLARE block)."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field

from .common import ImportInputError, Line, Loc, Value, duration_ms, number

# Load Profile row names (both generations) -> one key
LOAD_NAMES = {
    "db time(s)": "db_time", "db cpu(s)": "db_cpu", "background cpu(s)": "background_cpu",
    "redo size": "redo_bytes", "redo size (bytes)": "redo_bytes",
    "logical reads": "logical_reads", "logical read (blocks)": "logical_reads",
    "block changes": "block_changes",
    "physical reads": "physical_reads", "physical read (blocks)": "physical_reads",
    "physical writes": "physical_writes", "physical write (blocks)": "physical_writes",
    "read io requests": "read_requests", "write io requests": "write_requests",
    "read io (mb)": "read_mb", "write io (mb)": "write_mb",
    "executes": "executes", "executes (sql)": "executes",
    "user calls": "user_calls", "transactions": "transactions",
}
CPU_EVENT = "DB CPU"


@dataclass(frozen=True)
class NotRead:
    """An optional field the importer left out: what, where, why."""

    field: str
    line: int
    reason: str

    def text(self, file: str) -> str:
        return f"{file}:{self.line}: {self.field}: {self.reason}"

    def to_dict(self) -> dict[str, object]:
        return {"field": self.field, "line": self.line, "reason": self.reason}


@dataclass(frozen=True)
class Event:
    """One row of an events table."""

    name: str
    waits: float | None  # None on the DB CPU row
    time_s: float
    avg_ms: float | None
    avg_has_unit: bool  # 12.2+: '758.64us' (5 significant digits) rather than a rounded '(ms)' column
    pct_db_time: float | None
    wait_class: str
    loc: Loc
    time_truncated: bool = False  # 11.2.0.4's 4-character Time column

    def latency_ms(self) -> tuple[float, str]:
        """Mean wait and how it was computed. 11g/12.1 print Avg in whole or
        hundredths of ms but Time(s) in full, so time / waits is the precise
        figure there (awr_info does the same); 12.2+ prints Avg with 5 digits."""
        if self.avg_has_unit and self.avg_ms is not None:
            return self.avg_ms, "Avg Wait"
        if self.waits:
            return 1000.0 * self.time_s / self.waits, "Time / Waits"
        if self.avg_ms is not None:
            return self.avg_ms, "Avg wait"
        raise self.loc.error(f"Waits of {self.name!r}", "no waits and no average: the mean wait cannot be known")


class LoadProfile:
    """Load Profile rows, per second. A row that cannot be read is kept as its
    error and raised only when that row is used (a report's odd row about
    something blocklab never reads must not stop an import)."""

    def __init__(self, rows: dict[str, Value | ImportInputError]):
        self._rows = rows

    def __contains__(self, key: object) -> bool:
        return key in self._rows

    def __getitem__(self, key: str) -> Value:
        found = self._rows[key]
        if isinstance(found, ImportInputError):
            raise found
        return found

    def get(self, key: str) -> Value | None:
        return self[key] if key in self._rows else None

    def keys(self) -> list[str]:
        return list(self._rows)


@dataclass
class AwrReport:
    path: str
    lines: int
    release: str
    header: dict[str, str]  # DB Name, DB Id, Instance, Host Name, Platform, CPUs, Cores, Sockets, Memory(GB) ...
    release_loc: Loc
    begin_snap: str
    end_snap: str
    elapsed_s: Value | None  # None: the file has no 'Elapsed:' line (an excerpt), named in not_read
    load: LoadProfile
    top_title: str
    top_events: list[Event]
    foreground_events: dict[str, Event | ImportInputError]  # a row that could not be read: its error
    activity: dict[str, tuple[str, str, Loc] | ImportInputError]  # statistic -> (total, per second, where)
    time_model: dict[str, tuple[str, Loc] | ImportInputError]
    parameters: dict[str, tuple[str, Loc]]
    host_idle_pct: Value | None
    std_block_size: Value | None
    slob_vars: dict[str, tuple[str, Loc]]
    db_time_header_s: Value | None = None
    notes: list[str] = field(default_factory=list)
    not_read: list[NotRead] = field(default_factory=list)  # optional fields left out, each with where and why
    form: str = "text"  # "text" or "html"

    def elapsed(self) -> Value:
        """The snapshot interval; an excerpt without one cannot give per-second or total figures."""
        if self.elapsed_s is None:
            raise ImportInputError(self.path, self.lines, "Elapsed", "the file has no 'Elapsed: N (mins)' line (an excerpt, "
                                   "not a whole report): export the whole report with @?/rdbms/admin/awrrpt.sql", end_of_file=True)
        return self.elapsed_s

    def event(self, name: str) -> Event | None:
        """The event from the Top table, else from Foreground Wait Events (None if in neither)."""
        for e in self.top_events:
            if e.name == name:
                return e
        found = self.foreground_events.get(name)
        if isinstance(found, ImportInputError):
            raise found
        return found

    def per_second(self, stat: str) -> Value | None:
        """An Instance Activity statistic per second (None if the report does not list it)."""
        found = self.activity.get(stat)
        if found is None:
            return None
        if isinstance(found, ImportInputError):
            raise found
        _, per_s, loc = found
        what = f"Instance Activity Stats {stat!r} per Second"
        return Value(number(per_s, loc, what), loc, what)

    def time_model_s(self, stat: str) -> Value | None:
        found = self.time_model.get(stat)
        if found is None:
            return None
        if isinstance(found, ImportInputError):
            raise found
        text, loc = found
        what = f"Time Model {stat!r} Time (s)"
        return Value(number(text, loc, what), loc, what)

    def db_time_s(self) -> Value:
        """DB time in seconds: Time Model's (0.1 s), else the header's minutes (0.6 s), else Load Profile x Elapsed."""
        model = self.time_model_s("DB time")
        if model is not None:
            return model
        if self.db_time_header_s is not None:
            return self.db_time_header_s
        if "db_time" in self.load and self.elapsed_s is not None:
            v = self.load["db_time"]
            return Value(v.value * self.elapsed_s.value, v.loc, f"Load Profile DB Time(s) per second x Elapsed ({self.elapsed_s.loc})")
        raise ImportInputError(self.path, self.lines, "DB Time", "the report gives DB time nowhere (Time Model, the header's "
                               "DB Time, Load Profile x Elapsed): export the whole report with @?/rdbms/admin/awrrpt.sql",
                               end_of_file=True)


RAC_GLOBAL_HELP = ("a RAC global report (awrgrpt.sql: every instance of the cluster in one report, in per-instance tables); "
                   "blocklab reads one instance's report: export one per instance with @?/rdbms/admin/awrrpti.sql "
                   "(text or HTML) and import those")


def classify(label: str) -> str:
    """What an events-table column holds, from its heading."""
    low = label.lower()
    if "event" in low or "statistic" in low:
        return "name"
    if "class" in low:
        return "class"
    if "outs" in low or "/txn" in low:
        return "skip"
    if "%" in low:
        return "pct"
    if "avg" in low or low in ("(ms)", "wait (ms)"):
        return "avg"
    if "time" in low or "tota" in low:
        return "time"
    if "waits" in low:
        return "waits"
    return "skip"


_MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
SNAP_TIME = re.compile(r"(\d{1,2})-(\S+?) ?-(\d\d) (\d\d):(\d\d):(\d\d)")
SNAP_TIME_HELP = ("is not DD-MON-YY HH:MI:SS with an English month (23-Nov-26) or a numeric one (23-8月 -26): "
                  "left out; awrrpt.sql prints the month in the session's NLS_DATE_LANGUAGE, so export the report again "
                  "after ALTER SESSION SET NLS_DATE_LANGUAGE = AMERICAN to keep it")


def snap_time(text: str) -> str | None:
    """A Begin/End Snap time (DD-MON-RR HH24:MI:SS in the session's
    NLS_DATE_LANGUAGE) as ISO, as blocklab's own rows record when they started.
    English months, and the numbered months of Chinese and Japanese ('8月',
    padded to '8月 ') and Korean ('8월'): the number is the month, so nothing
    is guessed. Other languages' names (OKT, AOÛT, ...) give None."""
    m = SNAP_TIME.fullmatch(text.strip())
    if m is None:
        return None
    month_text = m.group(2).upper()
    numbered = re.fullmatch(r"(\d{1,2})[月월]", month_text)
    month = int(numbered.group(1)) if numbered else _MONTHS.index(month_text) + 1 if month_text in _MONTHS else 0
    yy = int(m.group(3))
    try:  # the year as strptime's %y reads it (00-68 -> 2000s)
        when = dt.datetime(2000 + yy if yy < 69 else 1900 + yy, month, int(m.group(1)),
                           int(m.group(4)), int(m.group(5)), int(m.group(6)))
    except ValueError:
        return None
    return when.isoformat()


def event_from_fields(event: str, fields: dict[str, str], loc: Loc, title: str, time_label: str, avg_label: str,
                      avg_unit: str | None, truncated: bool = False, not_read: list[NotRead] | None = None) -> Event:
    """One events-table row from its cells by kind (name, waits, time, avg, pct,
    class), as the text and the HTML report both print them. Given not_read, an
    Avg that overflowed its column ('######') is left out and named there (the
    mean wait is then Time / Waits); without it, it is an error."""
    if not event:
        raise loc.error(f"{title}: Event", "the row has no event name")
    what = f"{title}: {{}} of {event!r}"
    waits_text = fields.get("waits", "")
    if not waits_text and event != CPU_EVENT:
        raise loc.error(what.format("Waits"), "is empty")
    waits = number(waits_text, loc, what.format("Waits"), suffix=True) if waits_text else None
    time_s = number(fields.get("time", ""), loc, what.format(time_label), suffix=True)
    avg_text = fields.get("avg", "")
    if not_read is not None and re.fullmatch(r"#+", avg_text.strip()):
        not_read.append(NotRead(what.format(avg_label or "Avg"), loc.line, f"shows {avg_text.strip()!r}: the value overflowed "
                                "its column in the report; left out (the mean wait is Time / Waits)"))
        avg_text = ""
    avg = duration_ms(avg_text, loc, what.format(avg_label or "Avg"), avg_unit) if avg_text else None
    pct_text = fields.get("pct", "")
    pct = number(pct_text, loc, what.format("% DB time")) if pct_text else None
    has_unit = bool(re.search(r"[a-zµ]\s*$", avg_text))
    return Event(event, waits, time_s, avg, has_unit, pct, fields.get("class", ""), loc, truncated)


def host_idle_value(values: dict[str, str], loc: Loc) -> Value:
    """%Idle of the Host CPU row, checked against %User and %System: a row
    printed shifted (a blank Sockets value) puts numbers under the wrong
    headings, and only their sum shows it."""
    idle = number(values.get("%Idle", ""), loc, "Host CPU %Idle")
    if not 0 <= idle <= 100:
        raise loc.error("Host CPU %Idle", f"{idle:g} is not a percentage: the row does not line up with its heading")
    try:
        busy = number(values.get("%User", ""), loc, "Host CPU %User") + number(values.get("%System", ""), loc, "Host CPU %System")
    except ImportInputError:
        return Value(idle, loc, "Host CPU %Idle")
    if abs(busy + idle - 100.0) > 2.0 and busy + idle > 100.0:
        raise loc.error("Host CPU %Idle", f"%User + %System + %Idle = {busy + idle:.1f}, over 100: the row does not line up "
                        "with its heading (printed shifted)")
    return Value(idle, loc, "Host CPU %Idle")


_SLOB_VAR = re.compile(r"v_(\w+?) (?:PLS_INTEGER|VARCHAR2\(\d+\))\s*:\s*=\s*'([^']*)'")


def slob_vars(lines: list[Line], name: str) -> dict[str, tuple[str, Loc]]:
    """SLOB's DECLARE block as AWR prints its SQL text, wrapped at 80 columns
    (even inside a name: 'v_re' / 'do_stress'), so lines are joined with
    nothing between them before matching. Every session's block must agree."""
    texts = [ln.text for ln in lines]
    joined = "".join(texts)
    starts = []
    pos = 0
    for t in texts:
        starts.append(pos)
        pos += len(t)
    out: dict[str, tuple[str, Loc]] = {}
    for m in _SLOB_VAR.finditer(joined):
        k = _line_at(starts, m.start())
        loc = Loc(name, lines[k].number)
        var, value = m.group(1), m.group(2)
        if var == "default_schema_number":
            continue  # one per session: each SLOB session has its own schema
        if var in out and out[var][0] != value:
            raise loc.error(f"SLOB v_{var}", f"{value!r} here but {out[var][0]!r} at line {out[var][1].line}: "
                            "the report holds sessions of different SLOB runs")
        out.setdefault(var, (value, loc))
    return out


def _line_at(starts: list[int], offset: int) -> int:
    lo, hi = 0, len(starts) - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if starts[mid] <= offset:
            lo = mid
        else:
            hi = mid - 1
    return lo
