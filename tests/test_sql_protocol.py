"""Workload `sql` (issue 27): how a statement's values reach the server (`workload.protocol`,
pgbench's -M), and the timed loop's bookkeeping."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from psycopg.adapt import Transformer

from blocklab.engines.postgres.sqlscript import literal
from blocklab.lab import Overrides, load_experiment
from blocklab.spec import DatasetSpec, SpecError, WorkloadSpec
from blocklab.workloads import make_workload
from blocklab.workloads.sql import Sql


# ---------------------------------------------------------------------- the simple protocol's literals
@given(st.one_of(st.integers(-2**70, 2**70), st.floats(allow_nan=True, allow_infinity=True)))
@settings(max_examples=300)
def test_a_value_is_written_into_the_text_exactly_as_psycopgs_client_side_cursor_quotes_it(value):
    assert literal(value) == bytes(Transformer().as_literal(value))


def test_a_negative_value_after_a_minus_never_becomes_a_comment():
    assert b"10 -" + literal(-5) == b"10 - -5" and b"1 -" + literal(-2.5) == b"1 - -2.5"
    assert literal(math.inf) == b"'Infinity'::float8" and literal(math.nan) == b"'NaN'::float8"
    with pytest.raises(TypeError, match="an int or a float, not str"):
        literal("1; DROP TABLE x")


# ---------------------------------------------------------------------- both protocols on PostgreSQL
def _workload(tmp_path: Path, protocol: str | None, transactions: int = 25) -> Sql:
    (tmp_path / "schema.sql").write_text("CREATE TABLE t (i int, f float8, s text);\n")
    # -:x with x negative: pasted as it comes this would be `--3`, a comment; a '$1' and a ':x' in a string stay text
    (tmp_path / "ins.sql").write_text("\\set x random(-9, -1)\n\\set f :x * 0.5\n"
                                      "INSERT INTO t VALUES (10 -:x, 0.0 -:f, '$1 :x 50%');\n")
    spec = WorkloadSpec(kind="sql", script=[str(tmp_path / "ins.sql")], setup=str(tmp_path / "schema.sql"), sessions=2,
                        transactions=transactions, sample=False, protocol=protocol)
    workload = make_workload(spec, DatasetSpec(rows=1), "postgres")
    assert isinstance(workload, Sql)
    return workload


@pytest.mark.engine
@pytest.mark.parametrize("protocol", ["simple", "prepared"])
def test_both_protocols_send_the_scripts_values_as_values(pg_engine, tmp_path, protocol):
    workload = _workload(tmp_path, protocol)
    workload.check(pg_engine)
    workload.prepare(pg_engine)
    schema = workload.access.schemas[0]
    pg_engine.query(f'TRUNCATE "{schema}".t')
    m = workload.run(pg_engine)
    assert m["transactions"] == 50 and m["rows"] == 50 and m["stmt.s1_l3.count"] == 50
    rows = pg_engine.query(f'SELECT i, f, s FROM "{schema}".t')
    assert len(rows) == 50
    assert all(11 <= i <= 19 and f == (10 - i) * -0.5 and s == "$1 :x 50%" for i, f, s in rows), rows[:5]
    assert len({i for i, _, _ in rows}) > 1  # drawn per transaction
    # on one session: simple prepares nothing (each statement sent whole), prepared prepares each statement once
    dialect = pg_engine.dialect("sql")
    session = dialect.sql_session(workload.access)
    try:
        run = dialect.bind(session, workload.statements, protocol)[0]
        assert run({"x": -3, "f": -1.5}) == 1 and run({"x": -4, "f": -2.0}) == 1
        assert session.execute("SELECT count(*) FROM pg_prepared_statements")[0][0] == (0 if protocol == "simple" else 1)
    finally:
        session.close()
    assert pg_engine.query(f'SELECT count(*) FROM "{schema}".t WHERE i IN (13, 14) AND s = $$$1 :x 50%$$')[0][0] >= 2


@pytest.mark.engine
def test_a_protocol_the_engine_cannot_use_is_refused_before_anything_runs(cli_env, tmp_path):
    (tmp_path / "q.sql").write_text("SELECT 1;\n")
    (tmp_path / "mine.toml").write_text('[engine]\nkind = "sqlite"\n[workload]\nkind = "sql"\nscript = ["q.sql"]\n'
                                        'protocol = "simple"\n')
    with pytest.raises(SpecError, match=r"workload\.protocol = 'simple': this engine sends statements only as 'prepared'"):
        load_experiment(str(tmp_path / "mine.toml"), Overrides(), cache_dir=Path(cli_env["BLOCKLAB_CACHE"]))
    (tmp_path / "bad.toml").write_text('[workload]\nkind = "sql"\nscript = ["q.sql"]\nprotocol = "extended"\n')
    with pytest.raises(SpecError, match=r"protocol.*'prepared' or 'simple'"):
        load_experiment(str(tmp_path / "bad.toml"), Overrides(), cache_dir=Path(cli_env["BLOCKLAB_CACHE"]))
