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

import math
import random
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import SpecError

Value = int | float
PREDEFINED = ("scale", "client_id", "rows", "random_seed")  # pgbench's own (and blocklab's :rows)
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
SLEEP_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0}
TRANSACTION_WORDS = {"begin": "begin", "start": "begin", "commit": "commit", "end": "commit", "rollback": "rollback", "abort": "rollback"}


class ScriptError(SpecError):
    """A script that cannot run: the message names the file, line and column."""


@dataclass(frozen=True)
class Where:
    file: str
    line: int
    column: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


# ---------------------------------------------------------------------- expressions
Env = dict[str, Value]
Compiled = Callable[[Env, random.Random], Value]


@dataclass(frozen=True)
class Expr:
    """A parsed \\set expression: `run(env, rng)` evaluates it; `names` are the variables it reads."""

    run: Compiled
    names: tuple[tuple[str, Where], ...]


def _int_div(a: Value, b: Value, where: Where) -> Value:
    if b == 0:
        raise ScriptError(f"{where}: division by zero")
    if isinstance(a, int) and isinstance(b, int):
        q = abs(a) // abs(b)  # C's integer division, as pgbench's: truncated towards zero
        return q if (a >= 0) == (b >= 0) else -q
    return a / b


def _int_mod(a: Value, b: Value, where: Where) -> Value:
    if b == 0:
        raise ScriptError(f"{where}: division by zero")
    if isinstance(a, int) and isinstance(b, int):
        return a - _int_div(a, b, where) * b  # the dividend's sign, as C's %
    return math.fmod(a, b)


def uniform(rng: random.Random, lo: int, hi: int) -> int:
    """pgbench's random(lb, ub): every integer of [lb, ub] equally likely."""
    return rng.randint(lo, hi)


def exponential(rng: random.Random, lo: int, hi: int, parameter: float) -> int:
    """pgbench's random_exponential(lb, ub, parameter): value i is drawn with probability
    f(i) - f(i + 1), f(x) = exp(-parameter (x - lb) / (ub - lb + 1)) / (1 - exp(-parameter)):
    the truncated exponential's inverse CDF, projected onto the integers."""
    cut = math.exp(-parameter)
    u = 1.0 - rng.random()  # (0, 1]
    r = -math.log(cut + (1.0 - cut) * u) / parameter  # [0, 1)
    return lo + min(int((hi - lo + 1) * r), hi - lo)


def zipfian(rng: random.Random, lo: int, hi: int, s: float) -> int:
    """pgbench's random_zipfian(lb, ub, s), s in [1.001, 1000]: k drawn ((k+1)/k)**s times
    as often as k + 1 (from lb = 1). Devroye's rejection method (Non-Uniform Random Variate
    Generation, 1986, p. 550-551), as pgbench's documentation names it."""
    n = hi - lo + 1
    if n <= 1:
        return lo
    b = 2.0 ** (s - 1.0)
    while True:
        u = 1.0 - rng.random()
        v = rng.random()
        x = math.floor(u ** (-1.0 / (s - 1.0)))
        if x > n or x < 1:
            continue
        t = (1.0 + 1.0 / x) ** (s - 1.0)
        if v * x * (t - 1.0) / (b - 1.0) <= t / b:
            return lo - 1 + int(x)


def _check_range(lo: Value, hi: Value, fn: str, where: Where) -> tuple[int, int]:
    if not isinstance(lo, int) or not isinstance(hi, int):
        raise ScriptError(f"{where}: {fn}(): its bounds must be integers, got {lo!r} and {hi!r}")
    if hi < lo:
        raise ScriptError(f"{where}: {fn}(): empty range [{lo}, {hi}]")
    return lo, hi


def _call_random(args: list[Value], rng: random.Random, where: Where) -> Value:
    lo, hi = _check_range(args[0], args[1], "random", where)
    return uniform(rng, lo, hi)


def _call_exponential(args: list[Value], rng: random.Random, where: Where) -> Value:
    lo, hi = _check_range(args[0], args[1], "random_exponential", where)
    if not args[2] > 0:
        raise ScriptError(f"{where}: random_exponential(): parameter {args[2]!r} must be greater than 0")
    return exponential(rng, lo, hi, float(args[2]))


def _call_zipfian(args: list[Value], rng: random.Random, where: Where) -> Value:
    lo, hi = _check_range(args[0], args[1], "random_zipfian", where)
    if not 1.001 <= args[2] <= 1000:
        raise ScriptError(f"{where}: random_zipfian(): parameter {args[2]!r} must be in [1.001, 1000]")
    return zipfian(rng, lo, hi, float(args[2]))


FUNCTIONS: dict[str, tuple[int, Callable[[list[Value], random.Random, Where], Value]]] = {
    "random": (2, _call_random),
    "random_exponential": (3, _call_exponential),
    "random_zipfian": (3, _call_zipfian),
    "abs": (1, lambda a, r, w: abs(a[0])),
    "least": (-1, lambda a, r, w: min(a)),
    "greatest": (-1, lambda a, r, w: max(a)),
    "int": (1, lambda a, r, w: int(a[0])),
}

_TOKEN = re.compile(r"\s*(?:(?P<num>\d+\.\d*(?:[eE][-+]?\d+)?|\d+(?:[eE][-+]?\d+)?)|(?P<var>:[A-Za-z_][A-Za-z0-9_]*)"
                    r"|(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<op>[-+*/%(),]))")


class _ExprParser:
    """Recursive descent over one \\set expression; errors name the column."""

    def __init__(self, text: str, file: str, line: int, column: int):
        self.text, self.file, self.line, self.base = text, file, line, column
        self.tokens: list[tuple[str, str, int]] = []
        pos = 0
        while pos < len(text):
            if text[pos:].strip() == "":
                break
            m = _TOKEN.match(text, pos)
            if not m:
                raise ScriptError(f"{self.at(pos + len(text[pos:]) - len(text[pos:].lstrip()))}: "
                                  f"syntax error in expression at {text[pos:].strip()[:20]!r}; accepted: integers, "
                                  ":variables, + - * / %, parentheses and " + ", ".join(f"{f}()" for f in FUNCTIONS))
            kind = m.lastgroup or ""
            start = m.start(kind)
            self.tokens.append((kind, m.group(kind), start))
            pos = m.end()
        self.i = 0
        self.names: list[tuple[str, Where]] = []

    def at(self, offset: int) -> Where:
        return Where(self.file, self.line, self.base + offset)

    def peek(self) -> tuple[str, str, int] | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self, value: str) -> bool:
        tok = self.peek()
        if tok and tok[0] == "op" and tok[1] == value:
            self.i += 1
            return True
        return False

    def fail(self, what: str) -> ScriptError:
        tok = self.peek()
        where = self.at(tok[2]) if tok else self.at(len(self.text.rstrip()))
        found = repr(tok[1]) if tok else "the end of the line"
        return ScriptError(f"{where}: syntax error in expression: expected {what}, found {found}")

    def parse(self) -> Expr:
        if not self.tokens:
            raise self.fail("an expression")
        run = self.sum()
        if self.peek() is not None:
            raise self.fail("an operator or the end of the line")
        return Expr(run, tuple(self.names))

    def sum(self) -> Compiled:
        left = self.product()
        while (tok := self.peek()) and tok[0] == "op" and tok[1] in "+-":
            self.i += 1
            right = self.product()
            left = _binary(tok[1], left, right, self.at(tok[2]))
        return left

    def product(self) -> Compiled:
        left = self.unary()
        while (tok := self.peek()) and tok[0] == "op" and tok[1] in "*/%":
            self.i += 1
            right = self.unary()
            left = _binary(tok[1], left, right, self.at(tok[2]))
        return left

    def unary(self) -> Compiled:
        if self.take("-"):
            inner = self.unary()
            return lambda env, rng: -inner(env, rng)
        if self.take("+"):
            return self.unary()
        return self.atom()

    def atom(self) -> Compiled:
        tok = self.peek()
        if tok is None:
            raise self.fail("a number, a :variable, a function or '('")
        kind, text, offset = tok
        self.i += 1
        if kind == "num":
            value: Value = float(text) if any(c in text for c in ".eE") else int(text)
            return lambda env, rng: value
        if kind == "var":
            name = text[1:]
            self.names.append((name, self.at(offset)))
            return lambda env, rng: env[name]
        if kind == "name":
            return self.call(text, offset)
        if text == "(":
            inner = self.sum()
            if not self.take(")"):
                raise self.fail("')'")
            return inner
        self.i -= 1
        raise self.fail("a number, a :variable, a function or '('")

    def call(self, fn: str, offset: int) -> Compiled:
        where = self.at(offset)
        if fn.lower() not in FUNCTIONS:
            raise ScriptError(f"{where}: unknown function {fn}(); accepted: {', '.join(FUNCTIONS)}")
        arity, impl = FUNCTIONS[fn.lower()]
        if not self.take("("):
            raise self.fail(f"'(' after {fn}")
        args: list[Compiled] = []
        if not self.take(")"):
            args.append(self.sum())
            while self.take(","):
                args.append(self.sum())
            if not self.take(")"):
                raise self.fail("',' or ')'")
        if (arity >= 0 and len(args) != arity) or not args:
            raise ScriptError(f"{where}: {fn}() takes {arity if arity >= 0 else 'at least 1'} argument(s), got {len(args)}")
        return lambda env, rng: impl([a(env, rng) for a in args], rng, where)


def _binary(op: str, left: Compiled, right: Compiled, where: Where) -> Compiled:
    if op == "+":
        return lambda env, rng: left(env, rng) + right(env, rng)
    if op == "-":
        return lambda env, rng: left(env, rng) - right(env, rng)
    if op == "*":
        return lambda env, rng: left(env, rng) * right(env, rng)
    if op == "/":
        return lambda env, rng: _int_div(left(env, rng), right(env, rng), where)
    return lambda env, rng: _int_mod(left(env, rng), right(env, rng), where)


def parse_expression(text: str, file: str = "<expr>", line: int = 1, column: int = 1) -> Expr:
    return _ExprParser(text, file, line, column).parse()


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
    first = NAME.match(body.lstrip())
    word = TRANSACTION_WORDS.get(first.group(0).lower()) if first else None
    if word == "begin" and first and first.group(0).lower() == "start" and not re.match(r"start\s+transaction", body.strip(), re.I):
        word = None
    scan.commands.append(Statement(body, tuple(chunks), tuple(names), tuple(starts), where, tuple(name_wheres), word))


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
