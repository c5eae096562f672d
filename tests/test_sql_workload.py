"""Workload `sql` (issue 27): pgbench's script language, the user's own scripts on
blocklab's engines and on someone's PostgreSQL by DSN."""

from __future__ import annotations

import math
import random
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blocklab.workloads.pgscript import (
    Runner,
    ScriptError,
    SetCommand,
    exponential,
    load_script,
    parse_expression,
    parse_script,
    split_weight,
    zipfian,
)

FIXTURES = Path(__file__).parent / "fixtures" / "pgbench"
DOLLAR = lambda n: f"${n}"  # noqa: E731 - PostgreSQL's placeholders, as its dialect renders them


# ---------------------------------------------------------------------- the parser
def test_pgbench_tpcb_like_script_parses_into_its_statements_and_variables():
    script = load_script(str(FIXTURES / "tpcb-like.sql"))
    assert [c.name for c in script.commands if isinstance(c, SetCommand)] == ["aid", "bid", "tid", "delta"]
    assert [s.transaction for s in script.statements] == ["begin", None, None, None, None, None, "commit"]
    update = script.work[0]
    assert update.names == ("delta", "aid")
    assert update.render(DOLLAR) == "UPDATE pgbench_accounts SET abalance = abalance + $1 WHERE aid = $2"
    assert update.render(lambda n: "?") == "UPDATE pgbench_accounts SET abalance = abalance + ? WHERE aid = ?"
    assert script.work[-1].names == ("tid", "bid", "aid", "delta")
    script.check_names({"scale", "client_id"})
    runner = Runner([script], {"scale": 3}, seed=1)
    for _ in range(200):
        for c in script.commands:
            if isinstance(c, SetCommand):
                runner.env[c.name] = runner.evaluate(c.expr)
        assert 1 <= runner.env["aid"] <= 300_000 and 1 <= runner.env["bid"] <= 3 and 1 <= runner.env["tid"] <= 30
        assert -5000 <= runner.env["delta"] <= 5000
        assert runner.params(update) == [runner.env["delta"], runner.env["aid"]]


def test_pgbench_select_only_script_parses():
    script = load_script(str(FIXTURES / "select-only.sql"))
    assert [s.names for s in script.work] == [("aid",)]
    assert script.statements[0].transaction is None


def test_an_unknown_variable_is_refused_with_where_it_is_used():
    script = parse_script("\\set a 1\nSELECT :a,\n  :b FROM t;\n", "q.sql")
    with pytest.raises(ScriptError, match=r"^q\.sql:3:3: unknown variable :b"):
        script.check_names(set())
    with pytest.raises(ScriptError, match=r"^q\.sql:1:16: unknown variable :scale"):
        parse_script("\\set a 1 + 2 * :scale\nSELECT 1;", "q.sql").check_names(set())


@pytest.mark.parametrize(("text", "where", "what"), [
    ("\\set x random(1, \nSELECT 1;", "s.sql:1:17", "syntax error in expression"),
    ("SELECT 1;\n  \\set x 1 +* 2\n", "s.sql:2:13", "found '*'"),
    ("\\set\nSELECT 1;", "s.sql:1:5", "needs a variable name"),
    ("\\set x rand(1, 2)\nSELECT 1;", "s.sql:1:8", "unknown function rand()"),
    ("\\set x random(1)\nSELECT 1;", "s.sql:1:8", "takes 2 argument"),
    ("\\sleep 3 min\nSELECT 1;", "s.sql:1:10", "unit 'min' is not accepted"),
    ("\\sleep soon\nSELECT 1;", "s.sql:1:8", "expected an integer or a :variable"),
    ("\\gset\nSELECT 1;", "s.sql:1:1", "\\gset is not supported"),
    ("SELECT 'abc;\n", "s.sql:1:8", "unterminated string"),
    ("SELECT 1 /* x\n", "s.sql:1:10", "unterminated comment"),
])
def test_a_bad_meta_command_names_file_line_and_column(text, where, what):
    with pytest.raises(ScriptError) as err:
        parse_script(text, "s.sql")
    assert str(err.value).startswith(where + ": "), str(err.value)
    assert what in str(err.value)


def test_variables_are_not_taken_from_quotes_comments_or_casts():
    text = "SELECT ':a', \"b:c\", $$:d$$, $t$ :e $t$, x::int, :v /* :w */ -- :z\nFROM t;"
    statement = parse_script(text, "q.sql").statements[0]
    assert statement.names == ("v",)
    assert statement.render(DOLLAR).startswith("SELECT ':a', \"b:c\", $$:d$$, $t$ :e $t$, x::int, $1 /* :w */")


def test_several_statements_on_several_lines_and_the_last_without_semicolon():
    script = parse_script("SELECT\n  1;\n\nSELECT 2; SELECT 3", "q.sql")
    assert [s.where.line for s in script.statements] == [1, 4, 4]
    assert [s.where.column for s in script.statements] == [1, 1, 11]
    assert [" ".join(s.text.split()) for s in script.statements] == ["SELECT 1", "SELECT 2", "SELECT 3"]


def test_an_engine_error_position_maps_back_to_the_file():
    script = parse_script("\\set a 1\nSELECT x\n  FROM t WHERE a = :a AND bogus(;", "q.sql")
    statement = script.statements[0]
    rendered = statement.render(DOLLAR)
    assert statement.source_where(rendered.index("bogus"), DOLLAR).__str__() == "q.sql:3:27"
    assert str(statement.source_where(rendered.index("$1"), DOLLAR)) == "q.sql:3:20"
    assert str(statement.source_where(0, DOLLAR)) == "q.sql:2:1"


def test_weights_as_pgbench_writes_them():
    assert split_weight("a.sql@9") == ("a.sql", 9)
    assert split_weight("dir@x/a.sql") == ("dir@x/a.sql", 1)
    assert split_weight("b.sql") == ("b.sql", 1)
    with pytest.raises(ScriptError, match="whole number"):
        split_weight("a.sql@nine")
    a, b = parse_script("SELECT 1;", "a.sql", 9), parse_script("SELECT 2;", "b.sql", 1)
    runner = Runner([a, b], {}, seed=3)
    counts = Counter(runner.choose() for _ in range(20_000))
    assert 0.88 < counts[0] / 20_000 < 0.92


# ---------------------------------------------------------------------- arithmetic and distributions
@given(st.integers(-10**9, 10**9), st.integers(-10**6, 10**6).filter(lambda b: b != 0))
def test_integer_division_and_modulo_are_c_s(a, b):
    env = {"a": a, "b": b}
    q = parse_expression(":a / :b").run(env, random.Random())
    r = parse_expression(":a % :b").run(env, random.Random())
    assert q == int(a / b) if abs(a) < 2**52 else True
    assert q * b + r == a and abs(r) < abs(b) and (r == 0 or (r > 0) == (a > 0))


@given(st.integers(-1000, 1000), st.integers(0, 1000), st.integers(0, 2**32))
@settings(max_examples=60)
def test_random_stays_in_its_bounds(lo, span, seed):
    rng = random.Random(seed)
    env: dict = {}
    for fn in (f"random({lo}, {lo + span})", f"random_exponential({lo}, {lo + span}, 3.0)", f"random_zipfian({lo}, {lo + span}, 1.5)"):
        value = parse_expression(fn).run(env, rng)
        assert isinstance(value, int) and lo <= value <= lo + span, (fn, value)


def test_precedence_unary_minus_and_parentheses():
    run = lambda text: parse_expression(text).run({"s": 4}, random.Random())  # noqa: E731
    assert run("1 + 2 * 3") == 7 and run("(1 + 2) * 3") == 9 and run("-7 / 2") == -3 and run("-7 % 2") == -1
    assert run("100000 * :s") == 400000 and run("-(2 - 5)") == 3 and run("least(3, :s, 9) + greatest(1, 2)") == 5


def test_zipfian_draws_k_k_plus_1_over_k_to_the_s_times_as_often_as_k_plus_1():
    # pgbench's documentation: random_zipfian(1, ..., 2.5) draws 1 about (2/1)**2.5 = 5.66 times as often as 2,
    # which is drawn (3/2)**2.5 = 2.76 times as often as 3
    rng = random.Random(7)
    counts = Counter(zipfian(rng, 1, 1000, 2.5) for _ in range(200_000))
    assert counts[1] / counts[2] == pytest.approx(2**2.5, rel=0.05)
    assert counts[2] / counts[3] == pytest.approx(1.5**2.5, rel=0.08)
    assert max(counts) <= 1000


def test_exponential_follows_pgbench_s_formula():
    # value i with probability f(i) - f(i + 1), f(x) = exp(-p (x - lb) / (ub - lb + 1)) / (1 - exp(-p))
    p, lo, hi, n = 2.0, 1, 10, 200_000
    rng = random.Random(11)
    counts = Counter(exponential(rng, lo, hi, p) for _ in range(n))
    f = lambda x: (math.exp(-p * (x - lo) / (hi - lo + 1)) - math.exp(-p)) / (1 - math.exp(-p))  # noqa: E731
    for i in range(lo, hi + 1):
        assert counts[i] / n == pytest.approx(f(i) - f(i + 1), abs=0.004), i


def test_bad_distribution_parameters_say_where():
    expr = parse_expression("random_zipfian(1, 10, 0.5)", "z.sql", 4, 8)
    with pytest.raises(ScriptError, match=r"^z\.sql:4:8: random_zipfian\(\): parameter 0.5 must be in \[1.001, 1000\]"):
        expr.run({}, random.Random())
    with pytest.raises(ScriptError, match="empty range"):
        parse_expression("random(5, 1)").run({}, random.Random())
