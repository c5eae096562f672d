"""What every importer shares: the error that names file, line and field, the
numbers Oracle's tools print, and fixed-width tables cut by their dash lines.

Oracle's text output is column-aligned: a header, a line of dashes whose
groups mark each column's width, then rows. Cutting rows at the dash groups
(as flashdba's awr-parser.sh does) is what lets an event name with spaces sit
beside numbers; a value that runs into its neighbour's column is refused, not
guessed at, since a shifted column would give a silently wrong number.
"""

from __future__ import annotations

import gzip
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path


class ImportInputError(ValueError):
    """Input an importer cannot read: the message names the file, the line and the field."""

    def __init__(self, file: str, line: int, field: str, problem: str, *, end_of_file: bool = False):
        self.file, self.line, self.field, self.problem = file, line, field, problem
        where = f"line {line} (end of file)" if end_of_file else f"line {line}"
        super().__init__(f"{file}: {where}: {field}: {problem}")


class ImportOptionError(ValueError):
    """A command-line option an import cannot use (names the option and what is accepted)."""


@dataclass(frozen=True)
class Loc:
    """Where a number came from: a file (as the user named it) and a 1-based line."""

    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"

    def error(self, field: str, problem: str) -> ImportInputError:
        return ImportInputError(self.file, self.line, field, problem)


@dataclass(frozen=True)
class Value:
    """A number read from a file, with where it was read and what it is there."""

    value: float
    loc: Loc
    what: str

    def source(self) -> str:
        return f"{self.loc} {self.what}"


@dataclass(frozen=True)
class Line:
    """One line of a text file, keeping its number in the original file even
    when lines around it are dropped (SQL*Plus page headings)."""

    number: int
    text: str
    page: bool = False  # the line began with a form feed: a report section starts here


def read_text(path: Path, shown: str) -> str:
    """The file's text; a gzipped file (SLOB kits ship awr.html.gz) is unpacked.
    Undecodable bytes become U+FFFD (names only; numbers are ASCII)."""
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise ImportInputError(shown, 0, "file", f"cannot be read: {err.strerror}") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as err:
            raise ImportInputError(shown, 0, "file", f"is gzipped but cannot be unpacked ({err})") from None
    return raw.decode("utf-8", errors="replace")


def text_lines(text: str) -> list[Line]:
    """Lines of a text (CRLF or LF); a form feed at a line's start is dropped and remembered.
    Tabs are expanded to 8-column stops: SQL*Plus (SET TAB ON, its default) prints runs of
    blanks as tabs on the terminal, so a pasted table keeps its columns only so."""
    out = []
    for number, line in enumerate(text.split("\n"), 1):
        line = line.rstrip("\r").expandtabs(8)
        page = line.startswith("\f")
        out.append(Line(number, line.lstrip("\f").replace("\f", ""), page))
    if out and out[-1].text == "" and len(out) > 1:
        out.pop()  # the newline ending the last line is not a line of its own
    return out


def read_lines(path: Path, shown: str) -> list[Line]:
    """The file's lines (see read_text and text_lines)."""
    return text_lines(read_text(path, shown))


def looks_html(text: str) -> bool:
    """An HTML document (AWR's awrrpt.sql default), not a text report."""
    head = text[:2000].lstrip().lower()
    return head.startswith(("<!doctype html", "<html")) or "<html" in head[:400]


def end_error(lines: list[Line], file: str, field: str, problem: str) -> ImportInputError:
    """Something the file should hold but does not: named at its last line."""
    last = lines[-1].number if lines else 0
    return ImportInputError(file, last, field, problem, end_of_file=True)


# ---------------------------------------------------------------------- numbers
_PLAIN = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_GROUPED = re.compile(r"[+-]?\d{1,3}(?:,\d{3})+(?:\.\d*)?")
_SUFFIX = {"K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}  # AWR 12.2+ and its histograms: "K is 1000"


SQLPLUS_COMMA = ("SQL*Plus prints numbers without thousands separators, so this is a decimal comma "
                 "(NLS_NUMERIC_CHARACTERS) or a COLUMN format, and which one cannot be told; query again after "
                 "ALTER SESSION SET NLS_NUMERIC_CHARACTERS='.,' and without a COLUMN format")


def number(text: str, loc: Loc, field: str, *, commas: bool = True, suffix: bool = False, comma_hint: str = "") -> float:
    """A number as Oracle's reports print it: '21,628,695', '.918', '1.69E+05',
    '558.' (a truncated column) and, with suffix=True, '16.4K'. commas=False
    for output that never groups thousands (awr_info, SQL*Plus): a comma there
    is refused, with `comma_hint` saying why it may be there."""
    t = text.strip()
    if not t:
        raise loc.error(field, "is empty where a number belongs")
    if "#" in t:
        raise loc.error(field, f"shows {t!r}: the value overflowed its column in the report, so it cannot be known")
    factor = 1.0
    if suffix and t[-1:].upper() in _SUFFIX and len(t) > 1:
        factor, t = _SUFFIX[t[-1].upper()], t[:-1]
    if "," in t:
        if not commas:
            raise loc.error(field, f"{text.strip()!r} has a comma, which this output never prints"
                            + (f"; {comma_hint}" if comma_hint else ""))
        if not _GROUPED.fullmatch(t):
            grouping = _PLAIN.fullmatch(t.replace(",", "")) is not None  # digits, but commas in the wrong places
            raise loc.error(field, f"cannot read {text.strip()!r} as a number"
                            + (" (misplaced thousands separator)" if grouping else ""))
        t = t.replace(",", "")
    if not _PLAIN.fullmatch(t):
        raise loc.error(field, f"cannot read {text.strip()!r} as a number")
    return float(t) * factor


_DURATION = re.compile(r"(?P<n>[\d.,]+(?:[eE][+-]?\d+)?)\s*(?P<unit>ns|us|µs|ms|s|m|h)?")
_TO_MS = {"ns": 1e-6, "us": 1e-3, "µs": 1e-3, "ms": 1.0, "s": 1e3, "m": 6e4, "h": 3.6e6}


def duration_ms(text: str, loc: Loc, field: str, default_unit: str | None) -> float:
    """'758.64us', '3.23ms', '52.86 s' (AWR 12.2+) or a bare number in
    `default_unit` (the column heading's unit, e.g. '(ms)') -> milliseconds."""
    t = text.strip()
    m = _DURATION.fullmatch(t)
    if not m:
        if "#" in t:
            raise loc.error(field, f"shows {t!r}: the value overflowed its column in the report")
        raise loc.error(field, f"cannot read {t!r} as a time (a number, optionally with us, ms or s)")
    unit = m.group("unit") or default_unit
    if unit is None:
        raise loc.error(field, f"{t!r} has no unit and the column heading gives none")
    return number(m.group("n"), loc, field) * _TO_MS[unit]


# ---------------------------------------------------------------------- fixed-width tables
_DASHES = re.compile(r"-+")


def is_dash_line(text: str) -> bool:
    s = text.strip()
    return len(s) >= 3 and set(s) <= {"-", " "}


def spans(dash_line: str) -> list[tuple[int, int]]:
    """Column extents from a line of dash groups: [(start, end), ...]."""
    return [(m.start(), m.end()) for m in _DASHES.finditer(dash_line)]


def labels(header_lines: Iterable[str], cols: list[tuple[int, int]]) -> list[str]:
    """Each column's heading, its words gathered from every heading line (the
    word goes to the column it overlaps most, or the nearest one)."""
    out: list[list[str]] = [[] for _ in cols]
    for text in header_lines:
        for m in re.finditer(r"\S+", text):
            a, b = m.span()
            overlaps = [max(0, min(b, e) - max(a, s)) for s, e in cols]
            best = max(range(len(cols)), key=lambda i: overlaps[i])
            if overlaps[best] == 0:
                best = min(range(len(cols)), key=lambda i: min(abs(a - cols[i][1]), abs(b - cols[i][0])))
            out[best].append(m.group())
    return [" ".join(words) for words in out]


def cut(text: str, cols: list[tuple[int, int]], loc: Loc, names: list[str], *, check: bool = True) -> list[str]:
    """A row cut at the columns (the last one runs to the end of the line). A
    character in the gap before a column means a value ran over its width:
    refused, naming the column, since the cut would split a number."""
    out = []
    for i, (s, e) in enumerate(cols):
        end = len(text) if i == len(cols) - 1 else e
        gap = s - 1
        if check and i > 0 and cols[i - 1][1] <= gap < len(text) and text[gap] not in " \t":
            field = names[i] or f"column {i + 1}"
            raise loc.error(
                field,
                f"{text[max(0, s - 12) : min(len(text), e)].strip()!r} runs across the gap before this column: "
                "the row does not line up with the heading's dashes",
            )
        out.append(text[s:end].strip() if s < len(text) else "")
    return out


def sqlplus_table(lines: list[Line], start: int, file: str) -> tuple[list[dict[str, tuple[str, Loc]]], int]:
    """Records of the SQL*Plus query result whose heading starts at lines[start]
    (a heading line followed by a dash line). Wrapped records (a heading of
    several heading/dash pairs, each record then several lines) and repeated
    page headings are read; the table ends at a blank line followed by text
    that is no heading of the same columns, at 'N rows selected.', or at the
    end. Returns (records: column -> (text, where), index after the table)."""
    heading, i = _heading_block(lines, start)
    if not heading:
        return [], start
    records: list[dict[str, tuple[str, Loc]]] = []
    n = len(lines)
    while i < n:
        t = lines[i].text
        if not t.strip():
            i += 1
            continue
        if re.match(r"\s*(\d+ rows? selected|no rows selected)", t, re.IGNORECASE):
            return records, i + 1
        if PROMPT.match(t):
            return records, i  # the next prompt (SQL>, SYS@cdb1>, SYS @ orcl >): the query's output is over
        again, j = _heading_block(lines, i)
        if again:
            if [h for h, _ in again] != [h for h, _ in heading]:
                return records, i  # another query's result
            i = j
            continue
        if i > 0 and not lines[i - 1].text.strip() and not _fits(t, heading[0][1]):
            return records, i  # text after the table, not a row of it
        record: dict[str, tuple[str, Loc]] = {}
        for header, cols in heading:
            if i >= n:
                raise end_error(lines, file, "record", "the last record of the table is cut short")
            line = lines[i]
            names = [h.upper() for h in labels([header], cols)]
            for name, value in zip(names, cut(line.text, cols, Loc(file, line.number), names)):
                record[name] = (value, Loc(file, line.number))
            i += 1
        records.append(record)
    return records, i


def _heading_block(lines: list[Line], i: int) -> tuple[list[tuple[str, list[tuple[int, int]]]], int]:
    block = []
    while i + 1 < len(lines) and lines[i].text.strip() and not is_dash_line(lines[i].text) and is_dash_line(lines[i + 1].text):
        block.append((lines[i].text, spans(lines[i + 1].text)))
        i += 2
    return block, i


def _fits(text: str, cols: list[tuple[int, int]]) -> bool:
    """Every word of the line lies inside some column."""
    return all(any(s <= m.start() < e for s, e in cols) for m in re.finditer(r"\S+", text))


PROMPT = re.compile(r"^\s*(?:SQL|SQLcl|[\w$#]+\s*@\s*[\w$#.:/-]+)\s*>")  # SQL*Plus / SQLcl prompts, SET SQLPROMPT '_user@_connect_identifier>'

MIB = 1024 * 1024  # Oracle's tools count MB as 2^20 bytes (awr_info divides byte counts by 2^20)
MIB_TO_MB = MIB / 1e6  # blocklab's MB/s is 1e6 bytes per second


__all__ = [
    "MIB",
    "MIB_TO_MB",
    "PROMPT",
    "SQLPLUS_COMMA",
    "ImportInputError",
    "ImportOptionError",
    "Line",
    "Loc",
    "Value",
    "cut",
    "duration_ms",
    "end_error",
    "is_dash_line",
    "labels",
    "looks_html",
    "number",
    "read_lines",
    "read_text",
    "spans",
    "sqlplus_table",
    "text_lines",
]
