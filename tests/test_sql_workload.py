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

from blocklab.workloads.pgscript import Runner, SetCommand, load_script, parse_script, split_weight
from blocklab.workloads.pgscript_expr import ScriptError, exponential, parse_expression, zipfian

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


# ---------------------------------------------------------------------- runs on real engines
import json  # noqa: E402
import subprocess  # noqa: E402

from conftest import blocklab_bin  # noqa: E402
from someones_servers import Pg15Server, pg15_cluster  # noqa: E402

from blocklab.lab import Overrides, load_experiment  # noqa: E402
from blocklab.spec import SpecError  # noqa: E402
from blocklab.sql_shortcut import ScriptRun  # noqa: E402


def _blocklab(cli_env, *args, cwd=None, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([blocklab_bin(), *args], env=cli_env, capture_output=True, text=True, timeout=timeout, cwd=cwd)


def _text(result: subprocess.CompletedProcess) -> str:
    text = result.stdout + result.stderr
    assert "Traceback" not in text, text
    return text


def _run_dir(cli_env) -> Path:
    found = [p.parent for p in Path(cli_env["BLOCKLAB_RESULTS"]).glob("*/results.jsonl")]
    assert len(found) == 1, found
    return found[0]


def _rows(cli_env) -> list[dict]:
    return [json.loads(line) for line in (_run_dir(cli_env) / "results.jsonl").read_text().splitlines()]


@pytest.mark.engine
def test_tpcb_like_on_the_embedded_postgresql_with_a_sweep_and_a_cold_cache(cli_env):
    result = _blocklab(cli_env, "run", "--script", str(FIXTURES / "tpcb-like.sql"), "--setup", str(FIXTURES / "schema.sql"),
                       "--load", str(FIXTURES / "load.sql"), "--set", "pg.synchronous_commit=on,off", "--repeats", "1",
                       "--sessions", "2", "--duration", "1s", "--protocol", "simple")
    text = _text(result)
    assert result.returncode == 0, text
    assert "Best pg.synchronous_commit is" in text
    rows = _rows(cli_env)
    assert [r["status"] for r in rows] == ["ok", "ok"], [r["status"] for r in rows]
    for r in rows:
        m = r["metrics"]
        assert m["tps"] > 0 and m["transactions"] >= 1 and m["statements"] == 7 * m["transactions"]  # BEGIN and END count
        # every statement of the script timed on its own (BEGIN and END too), keyed by its line
        assert {k.split(".")[1] for k in m if k.startswith("stmt.")} == {f"s1_l{n}" for n in range(5, 12)}
        assert m["stmt.s1_l6.count"] == m["transactions"] and m["latency.p95_ms"] >= m["latency.p50_ms"] > 0
        # cold: the 4 tables and 3 primary keys the check run found were evicted, and that was proven
        checks = r["notes"]["checks"]
        assert checks["cold_files"] == 7 and checks["cold_os_resident_bytes"] == 0 and checks["cold_engine_cached_bytes"] == 0
        assert "profile.total.total_s" in m  # the sessions' time profile
    record = json.loads((_run_dir(cli_env) / "workload.json").read_text())
    assert record["scripts"][0]["text"] == (FIXTURES / "tpcb-like.sql").read_text()
    assert record["variables"] == {"scale": 1, "rows": 3_000_000}
    assert record["protocol"] == "simple"  # as --protocol asked (pgbench -M simple)
    # the report shows the script, its parameters and every statement's latency per setting
    html = (_run_dir(cli_env) / "report.html").read_text()
    assert 'id="scripts"' in html and "UPDATE pgbench_tellers SET tbalance = tbalance + :delta WHERE tid = :tid;" in html
    table = html.split('id="statement-latency"', 1)[1].split("</table>", 1)[0]
    assert table.count("<tr>") == 1 + 7 and "tpcb-like.sql:6" in table and ">on</th>" in table and ">off</th>" in table


@pytest.mark.engine
def test_sqlite_runs_a_script_on_its_own_data_set(cli_env, tmp_path):
    (tmp_path / "schema.sql").write_text("CREATE TABLE kv (k INTEGER PRIMARY KEY, v INTEGER, pad TEXT);\nCREATE INDEX kv_v ON kv (v);\n")
    (tmp_path / "load.sql").write_text("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < :rows)\n"
                                       "INSERT INTO kv SELECT i, i % 97, printf('%050d', i) FROM n;\n")
    (tmp_path / "kv.sql").write_text("\\set k random_exponential(1, :rows, 4)\nBEGIN IMMEDIATE;\n"
                                     "SELECT v, pad FROM kv WHERE k = :k;\nUPDATE kv SET v = v + 1 WHERE k = :k;\nCOMMIT;\n")
    result = _blocklab(cli_env, "run", "--script", "kv.sql", "--setup", "schema.sql", "--load", "load.sql", "--rows", "5000",
                       "--engine", "sqlite", "--set", "sqlite.cache_size=100,2000", "--repeats", "1", "--sessions", "2",
                       "--transactions", "20", cwd=tmp_path)
    text = _text(result)
    assert result.returncode == 0, text
    rows = _rows(cli_env)
    assert [r["status"] for r in rows] == ["ok", "ok"], [r["status"] for r in rows]
    for r in rows:
        assert r["metrics"]["transactions"] == 40 and r["metrics"]["stmt.s1_l4.count"] == 40
        assert r["metrics"]["rows"] == 80  # a row read and a row updated per transaction
    # a bad script names its file, line and column, before any engine starts
    (tmp_path / "bad.sql").write_text("SELECT 1;\n\\set x random(1, :rows) +\nSELECT 2;\n")
    with pytest.raises(SpecError, match=r"bad\.sql:2:26: syntax error in expression"):
        _experiment(cli_env, [str(tmp_path / "bad.sql")], engine="sqlite")
    (tmp_path / "unknown.sql").write_text("SELECT * FROM kv\n WHERE k = :key;\n")
    with pytest.raises(SpecError, match=r"unknown\.sql:2:12: unknown variable :key"):
        _experiment(cli_env, [str(tmp_path / "unknown.sql")], engine="sqlite")


@pytest.mark.engine
def test_mariadb_private_instance_runs_a_script_cold(cli_env, tmp_path):
    (tmp_path / "schema.sql").write_text("CREATE TABLE kv (k INT PRIMARY KEY, v INT, pad VARCHAR(60), KEY kv_v (v)) ENGINE=InnoDB;\n")
    (tmp_path / "load.sql").write_text("INSERT INTO kv SELECT seq, seq % 97, LPAD(seq, 50, 0) FROM seq_1_to_100000;\n")
    (tmp_path / "kv.sql").write_text("\\set k random(1, 100000)\nBEGIN;\nSELECT v, pad FROM kv WHERE k = :k;\n"
                                     "UPDATE kv SET v = v + 1 WHERE k = :k;\nCOMMIT;\n")
    result = _blocklab(cli_env, "run", "--script", "kv.sql", "--setup", "schema.sql", "--load", "load.sql", "--engine", "mariadb",
                       "--set", "mariadb.innodb_flush_log_at_trx_commit=1,2", "--repeats", "1", "--sessions", "2",
                       "--transactions", "20", cwd=tmp_path)
    text = _text(result)
    assert result.returncode == 0, text
    rows = _rows(cli_env)
    assert [r["status"] for r in rows] == ["ok", "ok"], [r["status"] for r in rows]
    for r in rows:
        assert r["metrics"]["transactions"] == 40 and r["metrics"]["stmt.s1_l3.count"] == 40
        assert r["notes"]["evicted"]["engine_restarted"] and r["notes"]["evicted"]["os_dropped_files"] == 1  # kv's tablespace


def _experiment(cli_env, scripts: list[str], *, engine: str | None = None, dsn: str | None = None, allow_writes: bool = False):
    """The experiment `blocklab run --script ...` would run, validated in this process (nothing measured)."""
    overrides = Overrides(engine=engine, dsn=dsn, allow_writes=allow_writes)
    return load_experiment("--script", overrides, cache_dir=Path(cli_env["BLOCKLAB_CACHE"]), text=ScriptRun(scripts).toml())


# ---------------------------------------------------------------------- someone's PostgreSQL 15 by DSN
@pytest.fixture(scope="module")
def pg15(cache_dir) -> Pg15Server:
    with pg15_cluster(cache_dir / "sql-pg15") as server:
        server.psql("CREATE TABLE orders (id int PRIMARY KEY, customer int, amount numeric, placed date); "
                    "INSERT INTO orders SELECT g, g % 500, (g * 7) % 1000, date '2026-01-01' + g % 300 "
                    "FROM generate_series(1, 30000) g; CREATE INDEX orders_customer ON orders (customer); ANALYZE orders")
        yield server


def _checksum(pg15: Pg15Server, table: str = "orders") -> str:
    return pg15.psql(f"SELECT md5(string_agg(t::text, ',' ORDER BY id)) FROM {table} t")


def _blocklab_things(pg15: Pg15Server) -> str:
    return pg15.psql("SELECT string_agg(name, ',') FROM (SELECT nspname AS name FROM pg_namespace WHERE nspname LIKE 'blocklab%' "
                     "UNION ALL SELECT relname FROM pg_class WHERE relname LIKE 'blocklab%' "
                     "UNION ALL SELECT extname FROM pg_extension WHERE extname = 'pg_buffercache') AS x")


@pytest.mark.engine
def test_a_read_only_report_query_by_dsn_ends_with_a_verdict_and_leaves_the_table_as_it_was(pg15, cli_env, tmp_path):
    (tmp_path / "report.sql").write_text("\\set c random(1, 500)\n"
                                         "SELECT placed, sum(amount) FROM orders WHERE customer = :c GROUP BY placed ORDER BY placed;\n")
    before = _checksum(pg15)
    result = _blocklab(cli_env, "run", "--script", "report.sql", "--dsn", pg15.dsn, "--set", "pg.effective_io_concurrency=1,32",
                       "--repeats", "2", "--sessions", "2", "--duration", "0.5s", cwd=tmp_path)
    text = _text(result)
    assert result.returncode == 0, text
    assert "measure.cache = 'auto' measures warm here" in text and "by design" in text  # PostgreSQL 15: said so
    assert "Best pg.effective_io_concurrency is " in text and "block-adjusted" in text  # the figure it is picked on
    rows = _rows(cli_env)
    assert len(rows) == 4 and all(r["status"] == "ok" and r["metrics"]["transactions"] > 0 for r in rows)
    assert _checksum(pg15) == before
    clean = _blocklab(cli_env, "clean", "--dsn", pg15.dsn)
    assert clean.returncode == 0, _text(clean)
    assert _blocklab_things(pg15) == ""
    # a cold cache asked for in a file is refused, saying why
    (tmp_path / "cold.toml").write_text(f'[engine]\ndsn = "{pg15.dsn}"\n[workload]\nkind = "sql"\nscript = ["report.sql"]\n'
                                        '[measure]\ncache = "cold"\n')
    with pytest.raises(SpecError, match="PostgreSQL 15 cannot take a table out of shared buffers"):
        load_experiment(str(tmp_path / "cold.toml"), Overrides(), cache_dir=Path(cli_env["BLOCKLAB_CACHE"]))
    # the engine's own error, at the file, line and column of the statement
    (tmp_path / "typo.sql").write_text("SELECT 1;\nSELECT amount\n  FROM orders WHERE bogus = 1;\n")
    with pytest.raises(SpecError, match='typo\\.sql:3:21: PostgreSQL error 42703: column "bogus" does not exist'):
        _experiment(cli_env, [str(tmp_path / "typo.sql")], dsn=pg15.dsn)


@pytest.mark.engine
def test_a_writing_script_by_dsn_is_refused_and_with_allow_writes_works_on_copies(pg15, cli_env, tmp_path):
    (tmp_path / "write.sql").write_text("\\set id random(1, 30000)\nBEGIN;\nUPDATE orders SET amount = amount + 1 WHERE id = :id;\n"
                                        "SELECT amount FROM orders WHERE id = :id;\nEND;\n")
    before = _checksum(pg15)
    with pytest.raises(SpecError, match=r"write\.sql:3:1: the script writes \(public\.orders\) .*--allow-writes"):
        _experiment(cli_env, [str(tmp_path / "write.sql")], dsn=pg15.dsn)
    assert _blocklab_things(pg15) == "" and _checksum(pg15) == before
    result = _blocklab(cli_env, "run", "--script", "write.sql", "--dsn", pg15.dsn, "--allow-writes", "--repeats", "1",
                       "--set", "pg.effective_io_concurrency=1", "--duration", "1s", cwd=tmp_path)
    text = _text(result)
    assert result.returncode == 0, text
    assert _rows(cli_env)[0]["metrics"]["stmt.s1_l3.count"] > 0
    assert _checksum(pg15) == before  # the original: not one row changed
    assert _checksum(pg15, "blocklab_sql.orders") != before  # the copy took the updates
    assert "blocklab_sql" in _blocklab_things(pg15) and "schema blocklab_sql" in text
    # a script that names the original's schema cannot be redirected to the copy: refused before anything runs
    (tmp_path / "qualified.sql").write_text("UPDATE public.orders SET amount = amount + 1 WHERE id = 1;\n")
    with pytest.raises(SpecError, match=r"qualified\.sql:1:1: --allow-writes cannot send this statement's writes to a copy: "
                                        r"it names public\.orders with its schema"):
        _experiment(cli_env, [str(tmp_path / "qualified.sql")], dsn=pg15.dsn, allow_writes=True)
    assert _checksum(pg15) == before
    clean = _blocklab(cli_env, "clean", "--dsn", pg15.dsn)
    assert clean.returncode == 0 and "blocklab_sql" in clean.stdout, _text(clean)
    assert _blocklab_things(pg15) == ""


@pytest.mark.engine
def test_with_allow_writes_every_cell_starts_from_the_originals_rows(pg15, cli_env, cache_dir, tmp_path):
    from blocklab.engines.postgres import PostgresEngine
    from blocklab.spec import DatasetSpec, WorkloadSpec
    from blocklab.workloads import make_workload

    (tmp_path / "churn.sql").write_text("\\set id random(1, 30000)\nBEGIN;\nUPDATE orders SET amount = amount + 1 WHERE id = :id;\n"
                                        "DELETE FROM orders WHERE id = :id + 1;\nEND;\n")
    spec = WorkloadSpec(kind="sql", script=[str(tmp_path / "churn.sql")], allow_writes=True, transactions=40, sample=False)
    workload = make_workload(spec, DatasetSpec(), "postgres")
    engine = PostgresEngine(dsn=pg15.dsn, cache_dir=cache_dir / "sql-cells")
    original = _checksum(pg15)
    engine.start()
    try:
        workload.check(engine)
        for cell in range(3):
            workload.prepare(engine)  # what runner.run_cell does at every cell's start
            assert (pg15.psql("SELECT count(*) FROM blocklab_sql.orders"), _checksum(pg15, "blocklab_sql.orders")) == ("30000", original), cell
            assert workload.run(engine)["transactions"] == 40
            assert pg15.psql("SELECT count(*) FROM blocklab_sql.orders") != "30000"  # the cell wrote the copy
    finally:
        engine.stop()
    assert _checksum(pg15) == original
    clean = _blocklab(cli_env, "clean", "--dsn", pg15.dsn)
    assert clean.returncode == 0 and _blocklab_things(pg15) == "", _text(clean)


def test_protocol_is_checked_and_goes_with_script(tmp_path):
    """--protocol: one of pgbench's -M values, and only with --script; refused before anything runs, on stderr."""
    from click.testing import CliRunner

    from blocklab.cli import main

    script = tmp_path / "q.sql"
    script.write_text("SELECT 1;\n")
    bad = CliRunner().invoke(main, ["run", "--script", str(script), "--protocol", "extended"])
    assert bad.exit_code == 2 and "'extended' is not one of 'simple', 'prepared'" in " ".join(bad.stderr.split())
    alone = CliRunner().invoke(main, ["run", "mbrc", "--protocol", "simple"])
    assert alone.exit_code == 2 and "--transactions, --define and --protocol go with --script" in " ".join(alone.stderr.split())
    assert alone.stdout == ""
