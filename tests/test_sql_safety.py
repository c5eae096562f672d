"""The `sql` workload's promises on someone else's server, and its parsing and paths (issue 27's review)."""

from __future__ import annotations

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
