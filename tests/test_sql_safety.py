"""The `sql` workload's promises on someone else's server, and its parsing and paths (issue 27's review)."""

from __future__ import annotations

from pathlib import Path

import pytest

from blocklab.workloads.pgscript import parse_script
from blocklab.workloads.sql import percentiles


# ---------------------------------------------------------------------- percentiles: nearest rank
def test_percentiles_are_the_nearest_rank():
    ms = [float(i) / 1000 for i in range(1, 101)]  # 1 .. 100 ms
    p = percentiles("x", ms)
    assert (p["x.p50_ms"], p["x.p95_ms"], p["x.p99_ms"], p["x.max_ms"]) == pytest.approx((50, 95, 99, 100))
    p = percentiles("x", [0.001, 0.002])  # the median of two is the first (rank ceil(1.0) = 1)
    assert p["x.p50_ms"] == pytest.approx(1) and p["x.p95_ms"] == pytest.approx(2)
    p = percentiles("x", [float(i) / 1000 for i in range(1, 21)])  # 0.95 * 20 = 19: the 19th, not the 20th
    assert p["x.p95_ms"] == pytest.approx(19) and p["x.p50_ms"] == pytest.approx(10)
    assert percentiles("x", [0.007])["x.p99_ms"] == pytest.approx(7)


# ---------------------------------------------------------------------- parsing: empty statements, leading comments
@pytest.mark.parametrize("text", ["SELECT 1;;\n", "SELECT 1;\n/* the end */\n", "SELECT 1;\n/* a */ ; -- b\n;\n",
                                  "; SELECT 1;", "SELECT 1;\n/* nested /* c */ d */\n"])
def test_blank_and_comment_only_statements_are_not_statements(text):
    script = parse_script(text, "a.sql")
    assert [s.text.strip() for s in script.statements] == ["SELECT 1"]


def test_a_script_of_comments_only_has_no_statement():
    from blocklab.workloads.pgscript_expr import ScriptError

    with pytest.raises(ScriptError, match="a.sql: the script has no SQL statement"):
        parse_script("/* nothing */;\n;\n", "a.sql")


@pytest.mark.parametrize("text, word", [
    ("/* done */ COMMIT", "commit"), ("-- done\nCOMMIT;", "commit"), ("/* a */ -- b\n /* c /* d */ */ begin;", "begin"),
    ("/* x */ START TRANSACTION;", "begin"), ("/* x */ START something;", None), ("/* end */ SELECT 1;", None),
    ("/* x */ END;", "commit"), ("/* x */ ROLLBACK;", "rollback"),
])
def test_transaction_control_is_recognised_after_leading_comments(text, word):
    (statement,) = parse_script(text, "a.sql").statements
    assert statement.transaction == word


# ---------------------------------------------------------------------- script paths
def test_script_paths_are_the_experiment_file_s_directory_s_never_the_current_one(tmp_path, monkeypatch):
    from blocklab.workloads.sql import SqlOptions

    (tmp_path / "exp").mkdir()
    (tmp_path / "cwd").mkdir()
    for d in ("exp", "cwd"):
        (tmp_path / d / "q.sql").write_text(f"SELECT '{d}';\n")
        (tmp_path / d / "schema.sql").write_text("CREATE TABLE t (a int);\n")
    monkeypatch.chdir(tmp_path / "cwd")  # holds files of the same names: not these
    o = SqlOptions.model_validate({"script": ["q.sql@3", "sub/r.sql"], "setup": "schema.sql"},
                                  context={"base_dir": str(tmp_path / "exp")})
    assert o.script == [f"{tmp_path}/exp/q.sql@3", f"{tmp_path}/exp/sub/r.sql"] and o.setup == f"{tmp_path}/exp/schema.sql"
    # a relative experiment file's directory: still absolute, from where it was named
    o = SqlOptions.model_validate({"script": "q.sql"}, context={"base_dir": "../exp"})
    assert o.script == [str(tmp_path / "cwd" / ".." / "exp" / "q.sql")]
    # no file (the --script shortcut, a recipe): the current directory, made absolute
    o = SqlOptions.model_validate({"script": ["q.sql"], "load": "/abs/load.sql"}, context={"base_dir": None})
    assert o.script == [f"{tmp_path}/cwd/q.sql"] and o.load == "/abs/load.sql"


# ---------------------------------------------------------------------- MariaDB: the check run, the data set's build
import pymysql  # noqa: E402

from blocklab.engines.base import EngineError  # noqa: E402
from blocklab.engines.mariadb import MariadbEngine  # noqa: E402
from blocklab.workloads.sql import CheckStatement, SessionAccess  # noqa: E402


@pytest.fixture(scope="module")
def maria(cache_dir, pristine_mariadb):
    engine = MariadbEngine(cache_dir=pristine_mariadb(cache_dir / "sqlsafe-maria"))
    engine.start()
    yield engine
    engine.stop()


def _maria_root(maria: MariadbEngine, database: str | None = None) -> pymysql.connections.Connection:
    return pymysql.connect(unix_socket=str(maria.socket_path), user="root", database=database, autocommit=True)


@pytest.mark.engine
@pytest.mark.parametrize("first", ["ANALYZE TABLE shop.orders", "FLUSH TABLES", "CREATE TABLE IF NOT EXISTS shop.x (a int)",
                                   "COMMIT", "CALL shop.rw()", "LOCK TABLES shop.orders READ"])
def test_mariadb_check_run_refuses_a_statement_that_ends_its_transaction_and_writes_nothing(maria, first, monkeypatch):
    monkeypatch.setenv("HOME", str(maria.cache_dir))
    with _maria_root(maria) as c, c.cursor() as cur:
        cur.execute("CREATE DATABASE IF NOT EXISTS shop")
        cur.execute("DROP TABLE IF EXISTS shop.orders, shop.x")
        cur.execute("CREATE TABLE shop.orders (id INT PRIMARY KEY, v INT) ENGINE=InnoDB")
        cur.execute("INSERT INTO shop.orders VALUES (1, 100)")
        cur.execute("CREATE OR REPLACE PROCEDURE shop.rw() SET SESSION TRANSACTION READ WRITE")
    dsn = MariadbEngine(dsn=f"mysql://root@localhost?socket={maria.socket_path}")
    try:
        dialect = dsn.dialect("sql")
        facts = dialect.check_run([CheckStatement(first, [], 0, None),
                                   CheckStatement("UPDATE shop.orders SET v = v + 1 WHERE id = %s", [1], 1, None)],
                                  SessionAccess(read_only=True, schemas=()))
    finally:
        dsn.stop()
    if first.startswith("LOCK"):  # it commits, and starts another transaction: read only too, the write refused
        assert facts.failed is None and facts.writes == {1: ["blocklab.?"]}, facts
    else:
        why = "turns the session's READ ONLY off" if first.startswith("CALL") else "ends the transaction implicitly"
        assert facts.failed is not None and facts.failed[0] == 0 and why in facts.failed[1], facts
    with _maria_root(maria) as c, c.cursor() as cur:
        cur.execute("SELECT v FROM shop.orders WHERE id = 1")
        assert cur.fetchone()[0] == 100  # the user's row: not written


@pytest.mark.engine
def test_mariadb_a_failed_build_records_its_tables_and_the_next_build_drops_them(maria, monkeypatch):
    monkeypatch.setenv("HOME", str(maria.cache_dir))
    dialect = maria.dialect("sql")
    setup = CheckStatement("CREATE TABLE t (id INT PRIMARY KEY, v INT)", [], -1, None)
    dialect.build_dataset('{"fp": 1}', [setup, CheckStatement("INSERT INTO t VALUES (1, 1)", [], -1, None)])
    assert dialect.dataset_built('{"fp": 1}')
    with pytest.raises(EngineError, match="failed at its statement 2"):  # the user's load with a typo
        dialect.build_dataset('{"fp": 2}', [setup, CheckStatement("INSERT INTO t VALUES (1, 1", [], -1, None)])
    assert not dialect.dataset_built('{"fp": 2}') and not dialect.dataset_built('{"fp": 1}')
    dialect.build_dataset('{"fp": 3}', [setup, CheckStatement("INSERT INTO t VALUES (2, 2)", [], -1, None)])  # the typo fixed
    assert dialect.dataset_built('{"fp": 3}')
    assert maria.query("SELECT id FROM t") == [(2,)]


# ---------------------------------------------------------------------- PostgreSQL by DSN: someone's PostgreSQL 15
from someones_servers import Pg15Server, pg15_cluster  # noqa: E402

from blocklab.engines.postgres import PostgresEngine  # noqa: E402
from blocklab.lab import Overrides, load_experiment  # noqa: E402
from blocklab.spec import SpecError  # noqa: E402
from blocklab.sql_shortcut import ScriptRun  # noqa: E402


@pytest.fixture(scope="module")
def pg15(cache_dir) -> Pg15Server:
    with pg15_cluster(cache_dir / "sqlsafe-pg15") as server:
        server.psql("CREATE TABLE audit (n int); CREATE TABLE orders (id serial PRIMARY KEY, v int); "
                    "INSERT INTO orders (v) SELECT g FROM generate_series(1, 100) g; "
                    "CREATE FUNCTION bump(n int) RETURNS int LANGUAGE sql AS 'INSERT INTO public.audit VALUES (n) RETURNING n'")
        yield server


@pytest.fixture
def pg_dsn(pg15):
    engine = PostgresEngine(dsn=pg15.dsn)
    yield engine
    engine.stop()


def _audit(pg15: Pg15Server) -> str:
    return pg15.psql("SELECT count(*) FROM audit")


@pytest.mark.engine
@pytest.mark.parametrize("first, why", [
    ("COMMIT", "ends the transaction"),  # one the parser did not take for transaction control
    ("SELECT set_config('default_transaction_read_only', 'off', false)", "turns the session's READ ONLY off"),
])
def test_postgres_check_run_refuses_a_statement_that_leaves_its_read_only_transaction(pg15, pg_dsn, first, why):
    facts = pg_dsn.dialect("sql").check_run([CheckStatement(first, [], 0, None), CheckStatement("SELECT bump($1)", [1], 1, None)],
                                            SessionAccess(read_only=True, schemas=()))
    assert facts.failed is not None and facts.failed[0] == 0 and why in facts.failed[1], facts
    assert _audit(pg15) == "0"


@pytest.mark.engine
def test_postgres_dsn_sessions_stay_read_only_whatever_a_statement_does(pg15, pg_dsn):
    dialect = pg_dsn.dialect("sql")
    session = dialect.sql_session(SessionAccess(read_only=True, schemas=()))
    try:
        # a write only for some parameter values (the check run's were others): an error, never a change
        with pytest.raises(Exception, match="read-only transaction"):
            dialect.execute(session, "SELECT CASE WHEN $1::int > 5 THEN bump($1::int) END", [9])
        # the session's READ ONLY turned off by a function: stopped before the next statement
        dialect.execute(session, "SELECT set_config('default_transaction_read_only', 'off', false)", [])
        with pytest.raises(EngineError, match="turned the session's READ ONLY off"):
            dialect.execute(session, "SELECT bump($1)", [7])
    finally:
        session.close()
    assert _audit(pg15) == "0"


def _experiment(cli_env, scripts: list[str], *, dsn: str, allow_writes: bool = False):
    overrides = Overrides(dsn=dsn, allow_writes=allow_writes)
    return load_experiment("--script", overrides, cache_dir=Path(cli_env["BLOCKLAB_CACHE"]), text=ScriptRun(scripts).toml())


@pytest.mark.engine
@pytest.mark.parametrize("text", [
    "SET default_transaction_read_only = off;", "set session characteristics as transaction read write;", "RESET ALL;",
    "/* x */ DISCARD ALL;", "BEGIN READ WRITE;", "START TRANSACTION ISOLATION LEVEL SERIALIZABLE, READ WRITE;",
    "BEGIN;\nSET TRANSACTION READ WRITE;", "SELECT set_config('default_transaction_read_only', 'off', false);",
    "SET search_path = public;", "SET ROLE postgres;", "RESET default_transaction_read_only;",
])
def test_a_statement_that_could_undo_read_only_is_refused_on_a_dsn(pg15, cli_env, tmp_path, text):
    (tmp_path / "s.sql").write_text("SELECT 1;\n" + text + "\nSELECT count(*) FROM orders;\n")
    with pytest.raises(SpecError, match=r"s\.sql:[23]:1: on a server given by --dsn a script may not change the session's READ ONLY"):
        _experiment(cli_env, [str(tmp_path / "s.sql")], dsn=pg15.dsn, allow_writes=True)


@pytest.mark.engine
def test_postgres_copies_have_sequences_of_their_own_and_are_fresh_each_cell(pg15, pg_dsn):
    pg15.psql("DROP TABLE IF EXISTS items; CREATE TABLE items (id int GENERATED ALWAYS AS IDENTITY PRIMARY KEY, v int); "
              "INSERT INTO items (v) SELECT g FROM generate_series(1, 10) g; CREATE SCHEMA IF NOT EXISTS other; "
              "CREATE TABLE IF NOT EXISTS other.orders (id int)")
    sequence_before = pg15.psql("SELECT last_value FROM orders_id_seq")
    orders_before = pg15.psql("SELECT md5(string_agg(o::text, ',' ORDER BY id)) FROM orders o")
    dialect = pg_dsn.dialect("sql")
    schema = dialect.copy_tables(["public.items", "public.orders"])
    session = dialect.sql_session(SessionAccess(read_only=False, schemas=(schema,)))
    try:
        for i in range(5):
            dialect.execute(session, "INSERT INTO orders (v) VALUES ($1)", [i])
            dialect.execute(session, "INSERT INTO items (v) VALUES ($1)", [i])
    finally:
        session.close()
    # the user's sequence did not move, and nothing of the copy depends on it
    assert pg15.psql("SELECT last_value FROM orders_id_seq") == sequence_before == "100"
    assert pg15.psql("SELECT max(id) FROM blocklab_sql.orders") == "105"  # the copy's own, on from the original's
    assert pg15.psql("SELECT max(id) FROM blocklab_sql.items") == "15"
    assert pg15.psql("SELECT count(*) FROM pg_depend WHERE refobjid = 'public.orders_id_seq'::regclass "
                     "AND classid = 'pg_attrdef'::regclass AND objid IN (SELECT oid FROM pg_attrdef "
                     "WHERE adrelid = 'blocklab_sql.orders'::regclass)") == "0"
    # the next cell of the run (and the next run) starts from the original's rows, not from what this one wrote
    dialect.copy_tables(["public.orders"])
    assert pg15.psql("SELECT md5(string_agg(o::text, ',' ORDER BY id)) FROM blocklab_sql.orders o") == orders_before
    assert pg15.psql("SELECT last_value FROM orders_id_seq") == "100"
    again = PostgresEngine(dsn=pg15.dsn)
    try:
        again.dialect("sql").copy_tables(["public.orders"])
        assert pg15.psql("SELECT md5(string_agg(o::text, ',' ORDER BY id)) FROM blocklab_sql.orders o") == orders_before
        # a copy of another original of the same name (another search path) is made from that one
        again.dialect("sql").copy_tables(["other.orders"])
        assert pg15.psql("SELECT obj_description('blocklab_sql.orders'::regclass, 'pg_class')") == '"other"."orders"'
        with pytest.raises(EngineError, match="other.orders and public.orders.*both be blocklab_sql.orders"):
            again.dialect("sql").copy_tables(["public.orders", "other.orders"])
    finally:
        again.stop()
    assert pg15.psql("SELECT md5(string_agg(o::text, ',' ORDER BY id)) FROM orders o") == orders_before
    pg15.psql("DROP SCHEMA blocklab_sql CASCADE")


# ---------------------------------------------------------------------- --resume: the scripts as they were, the seed kept
def test_resume_refuses_an_edited_script_and_keeps_the_drawn_seed(cli_env, tmp_path):
    import json
    import subprocess

    from conftest import blocklab_bin

    def blocklab(*args):
        return subprocess.run([blocklab_bin(), *args], env=cli_env, capture_output=True, text=True, timeout=600, cwd=tmp_path)

    (tmp_path / "q.sql").write_text("\\set k random(1, 1000000)\nSELECT :k + 1;\n")
    first = blocklab("run", "--script", "q.sql", "--engine", "sqlite", "--set", "sqlite.cache_size=100,2000", "--repeats", "1",
                     "--transactions", "5", "--out", str(tmp_path / "run"))
    assert first.returncode == 0, first.stdout + first.stderr
    run = tmp_path / "run"
    record = json.loads((run / "workload.json").read_text())
    lines = (run / "results.jsonl").read_text().splitlines()
    assert {json.loads(line)["metrics"]["random_seed"] for line in lines} == {record["seed"]}
    (run / "results.jsonl").write_text(lines[0] + "\n")  # as if cut off after its first cell
    resumed = blocklab("run", "--resume", str(run))
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    rows = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and {r["metrics"]["random_seed"] for r in rows} == {record["seed"]}  # the seed drawn at the start
    assert json.loads((run / "workload.json").read_text()) == record  # not rewritten
    (run / "results.jsonl").write_text(lines[0] + "\n")
    (tmp_path / "q.sql").write_text("\\set k random(1, 1000000)\nSELECT :k + 2;\n")  # edited after the run started
    edited = blocklab("run", "--resume", str(run))
    assert edited.returncode == 2 and f"{tmp_path}/q.sql was edited after the run started" in edited.stderr, edited.stderr
    assert len((run / "results.jsonl").read_text().splitlines()) == 1

