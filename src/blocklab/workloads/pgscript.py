"""pgbench's script language, the subset users write (workload `sql`): engine-neutral.

A script is what `pgbench -f FILE` runs once per transaction:

    \\set aid random(1, 100000 * :scale)       integer arithmetic, random(), random_exponential(),
    \\set delta random(-5000, 5000)            random_zipfian() as pgbench documents them
    BEGIN;
    UPDATE accounts SET abalance = abalance + :delta WHERE aid = :aid;
    \\sleep 10 ms                              \\sleep N [us|ms|s], N a number or :name
    END;

SQL statements end at a `;` outside quotes and comments (several lines each, as
pgbench reads them since 14). `:name` in a statement is a variable: each becomes a
bound parameter of the engine's own placeholder style (the engine's `sql` dialect
joins the statement's `chunks`), never text pasted into the SQL. `::` casts, quoted
strings, quoted identifiers, dollar quotes and comments are left alone.

Everything is checked when the file is read, before anything runs: a meta-command
that does not parse names the file, line and column; a `:name` that no earlier
`\\set` defines and that is not a predefined variable (`scale`, `client_id`, `rows`,
and the workload's `variables`) is refused with where it is used. `FILE@W` gives a
script its weight, as pgbench's `-f FILE@W`.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .pgscript_expr import Env, Expr, ScriptError, Value, Where, parse_expression

PREDEFINED = ("scale", "client_id", "rows", "random_seed")  # pgbench's own (and blocklab's :rows)
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
SLEEP_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0}
TRANSACTION_WORDS = {"begin": "begin", "start": "begin", "commit": "commit", "end": "commit", "rollback": "rollback", "abort": "rollback"}


# ---------------------------------------------------------------------- commands
@dataclass(frozen=True)
class SetCommand:
    name: str
    expr: Expr
    where: Where


@dataclass(frozen=True)
class SleepCommand:
    amount: Expr  # a number or one :variable
    seconds_per_unit: float
    where: Where


@dataclass(frozen=True)
class Statement:
    """One SQL statement: `chunks` are its text between variables, `names` the variables
    in order (len(chunks) == len(names) + 1). `source_starts[i]` is where chunk i starts
    in `text` (the statement as written), `where` where the statement starts in the file."""

    text: str
    chunks: tuple[str, ...]
    names: tuple[str, ...]
    source_starts: tuple[int, ...]
    where: Where
    name_wheres: tuple[Where, ...] = ()
    transaction: str | None = None  # begin | commit | rollback: transaction control, not work

    def render(self, placeholder: Callable[[int], str]) -> str:
        """The statement as the engine sees it, variable i as placeholder(i + 1)."""
        out = [self.chunks[0]]
        for i, chunk in enumerate(self.chunks[1:]):
            out += [placeholder(i + 1), chunk]
        return "".join(out)

    def source_where(self, offset: int, placeholder: Callable[[int], str]) -> Where:
        """The file position of character `offset` (0-based) of render(placeholder)."""
        rendered = 0
        for i, chunk in enumerate(self.chunks):
            if offset < rendered + len(chunk) or i == len(self.chunks) - 1:
                return self._where_of(self.source_starts[i] + max(0, offset - rendered))
            rendered += len(chunk)
            hole = len(placeholder(i + 1))
            if offset < rendered + hole:
                return self._where_of(self.source_starts[i] + len(chunk))
            rendered += hole
        return self.where  # pragma: no cover - the loop returns on its last chunk

    def _where_of(self, source_offset: int) -> Where:
        before = self.text[:source_offset]
        newlines = before.count("\n")
        if newlines == 0:
            return Where(self.where.file, self.where.line, self.where.column + source_offset)
        return Where(self.where.file, self.where.line + newlines, source_offset - before.rfind("\n"))

    @property
    def first_line(self) -> str:
        return " ".join(self.text.split())[:80]


Command = SetCommand | SleepCommand | Statement


@dataclass
class Script:
    path: str
    text: str
    commands: list[Command]
    weight: int = 1

    @property
    def name(self) -> str:
        return Path(self.path).name

    @property
    def statements(self) -> list[Statement]:
        return [c for c in self.commands if isinstance(c, Statement)]

    @property
    def work(self) -> list[Statement]:
        """The statements that do work (not BEGIN/COMMIT)."""
        return [s for s in self.statements if s.transaction is None]

    def check_names(self, known: set[str]) -> None:
        """Refuse a :name used before anything defines it (before anything runs)."""
        defined = set(known)
        for command in self.commands:
            if isinstance(command, SetCommand):
                _check(command.expr.names, defined)
                defined.add(command.name)
            elif isinstance(command, SleepCommand):
                _check(command.amount.names, defined)
            else:
                _check(tuple(zip(command.names, command.name_wheres)), defined)


def _check(names: tuple[tuple[str, Where], ...], defined: set[str]) -> None:
    for name, where in names:
        if name not in defined:
            known = ", ".join(sorted(defined)) or "none"
            raise ScriptError(f"{where}: unknown variable :{name}; defined here: {known} "
                              "(set it with \\set before it is used, or give it in the workload's variables)")


# ---------------------------------------------------------------------- the file
@dataclass
class _Scan:
    file: str
    text: str
    pos: int = 0
    line: int = 1
    col: int = 1
    commands: list[Command] = field(default_factory=list)

    def advance(self, n: int = 1) -> None:
        for ch in self.text[self.pos:self.pos + n]:
            if ch == "\n":
                self.line += 1
                self.col = 1
            else:
                self.col += 1
        self.pos += n

    def where(self) -> Where:
        return Where(self.file, self.line, self.col)


def parse_script(text: str, file: str, weight: int = 1) -> Script:
    """A script's text -> its commands; ScriptError naming file:line:column on a bad meta-command."""
    scan = _Scan(file, text)
    while scan.pos < len(text):
        ch = text[scan.pos]
        if ch in " \t\r\n":
            scan.advance()
        elif text.startswith("--", scan.pos):
            end = text.find("\n", scan.pos)
            scan.advance((end if end >= 0 else len(text)) - scan.pos)
        elif ch == "\\":
            _meta(scan)
        else:
            _statement(scan)
    if not any(isinstance(c, Statement) for c in scan.commands):
        raise ScriptError(f"{file}: the script has no SQL statement")
    return Script(file, text, scan.commands, weight)


def _meta(scan: _Scan) -> None:
    where = scan.where()
    end = scan.text.find("\n", scan.pos)
    end = len(scan.text) if end < 0 else end
    line = scan.text[scan.pos:end].rstrip("\r")
    m = re.match(r"\\([A-Za-z_]*)", line)
    word = m.group(1) if m else ""
    rest_at = len(word) + 1
    if word == "set":
        scan.commands.append(_parse_set(line, rest_at, where))
    elif word == "sleep":
        scan.commands.append(_parse_sleep(line, rest_at, where))
    else:
        raise ScriptError(f"{where}: meta-command \\{word} is not supported; accepted: \\set NAME EXPR, \\sleep N [us|ms|s]")
    scan.advance(end - scan.pos)


def _parse_set(line: str, at: int, where: Where) -> SetCommand:
    m = re.compile(r"\s+([A-Za-z_][A-Za-z0-9_]*)").match(line, at)
    if not m:
        col = len(line[:at]) + len(line[at:]) - len(line[at:].lstrip()) + where.column
        raise ScriptError(f"{Where(where.file, where.line, col)}: \\set needs a variable name and an expression (\\set aid random(1, 1000))")
    expr_at = m.end()
    if not line[expr_at:].strip():
        raise ScriptError(f"{Where(where.file, where.line, where.column + expr_at)}: \\set {m.group(1)}: missing expression")
    return SetCommand(m.group(1), parse_expression(line[expr_at:], where.file, where.line, where.column + expr_at), where)


def _parse_sleep(line: str, at: int, where: Where) -> SleepCommand:
    rest = line[at:]
    words = rest.split()
    if not words or len(words) > 2:
        raise ScriptError(f"{Where(where.file, where.line, where.column + at)}: \\sleep needs a duration: \\sleep N [us|ms|s]")
    unit_factor = 1.0
    if len(words) == 2:
        if words[1].lower() not in SLEEP_UNITS:
            col = where.column + at + rest.index(words[1], rest.index(words[0]) + len(words[0]))
            raise ScriptError(f"{Where(where.file, where.line, col)}: \\sleep unit {words[1]!r} is not accepted; accepted: us, ms, s")
        unit_factor = SLEEP_UNITS[words[1].lower()]
    col = where.column + at + rest.index(words[0])
    if not (re.fullmatch(r"\d+", words[0]) or re.fullmatch(r":[A-Za-z_][A-Za-z0-9_]*", words[0])):
        raise ScriptError(f"{Where(where.file, where.line, col)}: \\sleep {words[0]!r}: expected an integer or a :variable")
    return SleepCommand(parse_expression(words[0], where.file, where.line, col), unit_factor, where)


def _statement(scan: _Scan) -> None:
    """One SQL statement up to its `;` (outside quotes and comments), variables split out."""
    text = scan.text
    where = scan.where()
    start = scan.pos
    chunks: list[str] = []
    names: list[str] = []
    name_wheres: list[Where] = []
    starts = [0]
    piece_from = start
    while scan.pos < len(text):
        ch = text[scan.pos]
        if ch == ";":
            break
        if ch == "'" or ch == '"':
            _skip_quoted(scan, ch)
        elif text.startswith("--", scan.pos):
            end = text.find("\n", scan.pos)
            scan.advance((end if end >= 0 else len(text)) - scan.pos)
        elif text.startswith("/*", scan.pos):
            _skip_block_comment(scan)
        elif ch == "$" and (m := re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)?\$").match(text, scan.pos)) and not _in_word(text, scan.pos):
            tag = m.group(0)
            end = text.find(tag, m.end())
            if end < 0:
                raise ScriptError(f"{scan.where()}: unterminated dollar-quoted string {tag}")
            scan.advance(end + len(tag) - scan.pos)
        elif ch == ":" and text.startswith("::", scan.pos):
            scan.advance(2)
        elif ch == ":" and (m := NAME.match(text, scan.pos + 1)) and not (scan.pos > start and text[scan.pos - 1] == ":"):
            chunks.append(text[piece_from:scan.pos])
            names.append(m.group(0))
            name_wheres.append(scan.where())
            scan.advance(1 + len(m.group(0)))
            piece_from = scan.pos
            starts.append(scan.pos - start)
        else:
            scan.advance()
    chunks.append(text[piece_from:scan.pos])
    body = text[start:scan.pos]
    if scan.pos < len(text):
        scan.advance()  # the ';'
    head = after_comments(body)
    if not head:
        return  # only blanks and comments (`;;`, a comment after the last `;`): pgbench sends nothing either
    first = NAME.match(head)
    word = TRANSACTION_WORDS.get(first.group(0).lower()) if first else None
    if word == "begin" and first and first.group(0).lower() == "start" and not re.match(r"start\s+transaction", head, re.I):
        word = None
    scan.commands.append(Statement(body, tuple(chunks), tuple(names), tuple(starts), where, tuple(name_wheres), word))


def after_comments(body: str) -> str:
    """The statement from its first word on: leading blanks, `-- ...` and `/* ... */` (nested) skipped."""
    pos = 0
    while True:
        while pos < len(body) and body[pos] in " \t\r\n":
            pos += 1
        if body.startswith("--", pos):
            end = body.find("\n", pos)
            pos = len(body) if end < 0 else end + 1
        elif body.startswith("/*", pos):
            depth = 0
            while pos < len(body):
                if body.startswith("/*", pos):
                    depth, pos = depth + 1, pos + 2
                elif body.startswith("*/", pos):
                    depth, pos = depth - 1, pos + 2
                    if depth == 0:
                        break
                else:
                    pos += 1
        else:
            return body[pos:].rstrip()


def _in_word(text: str, pos: int) -> bool:
    return pos > 0 and (text[pos - 1].isalnum() or text[pos - 1] == "_")


def _skip_quoted(scan: _Scan, quote: str) -> None:
    where = scan.where()
    text = scan.text
    pos = scan.pos + 1
    while True:
        end = text.find(quote, pos)
        if end < 0:
            kind = "string" if quote == "'" else "quoted identifier"
            raise ScriptError(f"{where}: unterminated {kind} (it opens here and never closes)")
        if text.startswith(quote * 2, end):
            pos = end + 2
            continue
        scan.advance(end + 1 - scan.pos)
        return


def _skip_block_comment(scan: _Scan) -> None:
    where = scan.where()
    depth = 0
    text = scan.text
    while scan.pos < len(text):
        if text.startswith("/*", scan.pos):
            depth += 1
            scan.advance(2)
        elif text.startswith("*/", scan.pos):
            depth -= 1
            scan.advance(2)
            if depth == 0:
                return
        else:
            scan.advance()
    raise ScriptError(f"{where}: unterminated comment /* (it opens here and never closes)")


# ---------------------------------------------------------------------- files and weights
def split_weight(spec: str) -> tuple[str, int]:
    """'a.sql@9' -> ('a.sql', 9), as pgbench's -f FILE@WEIGHT; 'a.sql' -> ('a.sql', 1)."""
    path, sep, weight = spec.rpartition("@")
    if not sep or "/" in weight or not path:
        return spec, 1  # no '@', or one inside a directory's name
    if not weight.isdigit():
        raise ScriptError(f"script {spec!r}: the weight after '@' must be a whole number (a.sql@9); got {weight!r}")
    return path, int(weight)


def load_script(spec: str, base: Path | None = None) -> Script:
    """Read and parse FILE[@WEIGHT] (relative to `base`, the experiment file's directory)."""
    name, weight = split_weight(spec)
    path = Path(name) if base is None or Path(name).is_absolute() else base / name
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ScriptError(f"script {name}: no such file ({path})") from None
    except UnicodeDecodeError as err:
        raise ScriptError(f"script {name}: not UTF-8 text (byte {err.start}); save it as UTF-8") from None
    except OSError as err:
        raise ScriptError(f"script {name}: cannot be read: {err.strerror}") from None
    return parse_script(text, str(name), weight)


class Runner:
    """One session's interpreter: the \\set variables of one transaction, from its own
    random generator (seeded per session, so a run can be repeated)."""

    def __init__(self, scripts: list[Script], variables: Mapping[str, Value], seed: int):
        self.scripts = scripts
        self.rng = random.Random(seed)
        self.env: Env = dict(variables)
        self.weights = [s.weight for s in scripts]
        self.total = sum(self.weights)

    def choose(self) -> int:
        """Which script the next transaction runs (by weight, as pgbench)."""
        if len(self.scripts) == 1:
            return 0
        pick = self.rng.randrange(self.total)
        for i, w in enumerate(self.weights):
            if pick < w:
                return i
            pick -= w
        return len(self.scripts) - 1  # pragma: no cover - the weights sum to total

    def evaluate(self, expr: Expr) -> Value:
        return expr.run(self.env, self.rng)

    def params(self, statement: Statement) -> list[Value]:
        env = self.env
        return [env[n] for n in statement.names]
