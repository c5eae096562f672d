"""pgbench's expression language as `\\set` takes it (integer arithmetic,
random(), random_exponential(), random_zipfian()), compiled to a function of
the variables, and where in a script a thing stands (for its errors); the
commands and the file are read in pgscript.py."""

from __future__ import annotations

import math
import random
import re
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import SpecError

Value = int | float


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
    """pgbench's random(lb, ub): every integer of [lb, ub] equally likely. As pgbench computed it
    (before 15: lb + (int64) ((ub - lb + 1) * a double in [0, 1))), which is ~2x cheaper in Python
    than randint, whose bias is below n / 2**53; randint beyond 2**53 values."""
    n = hi - lo + 1
    return lo + int(rng.random() * n) if n <= _EXACT else rng.randint(lo, hi)


_EXACT = 2**53


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
        if impl is _call_random:
            return _random(args[0], args[1], where)
        return lambda env, rng: impl([a(env, rng) for a in args], rng, where)


def _random(low: Compiled, high: Compiled, where: Where) -> Compiled:
    """random(lb, ub) without the general call's list and checks when its bounds are good
    (the timed loop evaluates it for every transaction)."""
    def run(env: Env, rng: random.Random) -> Value:
        lo, hi = low(env, rng), high(env, rng)
        if type(lo) is int and type(hi) is int and lo <= hi and hi - lo < _EXACT:
            return lo + int(rng.random() * (hi - lo + 1))
        return _call_random([lo, hi], rng, where)

    return run


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
