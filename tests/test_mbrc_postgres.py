"""The mbrc experiment end to end on a real embedded PostgreSQL 18, small data."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import blocklab_bin, ctrl_c_reaches_child

pytestmark = pytest.mark.engine

SMALL = ["--rows", "200000", "--seed", "11"]


def blocklab(args, env, timeout=300):
    return subprocess.run([blocklab_bin(), *args], env=env, capture_output=True, text=True, timeout=timeout)


def rows_of(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines() if line.strip()]


def test_mbrc_run_knob_takes_effect_and_cold_is_proven(cli_env, tmp_path):
    out = tmp_path / "run"
    result = blocklab(["run", "mbrc", *SMALL, "--set", "multiblock_read=1,16,128", "--repeats", "2", "--out", str(out)], cli_env)
    assert result.returncode == 0, result.stderr + result.stdout
    assert "multiblock_read = 16 (128 kB) ..." in result.stdout
    assert "Best multiblock_read is" in result.stdout
    rows = rows_of(out)
    assert len(rows) == 6 and all(r["status"] == "ok" for r in rows)
    by_value: dict[int, list[dict]] = {}
    for r in rows:
        by_value.setdefault(r["settings"]["multiblock_read"], []).append(r)
    for r in by_value[1]:
        assert 7.5 <= r["metrics"]["avg_read_kb"] <= 8.5
        assert r["applied"]["multiblock_read"] == "8kB"
    for r in by_value[16]:
        assert r["metrics"]["avg_read_kb"] >= 64
        assert r["applied"]["multiblock_read"] == "128kB"
    for r in rows:
        m = r["metrics"]
        assert m["rows"] == 200000
        assert m["cold_proven"] == 1.0, m
        assert 0.9 <= m["read_bytes"] / m["relation_bytes"] <= 1.1
        assert r["applied"]["direct_io"] == "data"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["best"]["multiblock_read"] in (1, 16, 128)
    assert set(summary["medians"]) == {"multiblock_read=1", "multiblock_read=16", "multiblock_read=128"}
    env = json.loads((out / "environment.json").read_text())
    assert env["engine_version"].startswith("18")
    assert env["engine_settings"]["io_max_combine_limit"] == "128"
    assert env["device"] and env["file_system"]


def test_killed_run_resumes_with_every_cell_once(cli_env, tmp_path):
    out = tmp_path / "run"
    args = [blocklab_bin(), "run", "mbrc", *SMALL, "--set", "multiblock_read=1,2,4,8", "--repeats", "2", "--out", str(out)]
    proc = subprocess.Popen(args, env=cli_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            preexec_fn=ctrl_c_reaches_child)
    deadline = time.time() + 240
    while time.time() < deadline:
        line = proc.stdout.readline()
        assert line, "the run ended before it could be interrupted"
        if "[block 1]" in line:  # one cell is done: interrupt the next
            break
    proc.send_signal(signal.SIGINT)
    output = proc.communicate(timeout=120)[0]
    assert proc.returncode == 130, output
    assert "blocklab run --resume" in output
    saved = rows_of(out)
    assert 1 <= len(saved) < 8
    # the embedded server was stopped
    pgdata = Path(cli_env["BLOCKLAB_CACHE"]) / "postgres" / "data"
    assert not (pgdata / "postmaster.pid").exists()
    result = blocklab(["run", "--resume", str(out)], cli_env)
    assert result.returncode == 0, result.stderr + result.stdout
    ids = [r["cell_id"] for r in rows_of(out)]
    plan = json.loads((out / "plan.json").read_text())
    assert sorted(ids) == sorted(c["cell_id"] for c in plan["cells"])
    assert len(ids) == len(set(ids)) == 8


@pytest.mark.parametrize(
    "args, message",
    [
        (["plan", "mbrc", "--set", "bogus=1"], "--set bogus: unknown knob; accepted: block_size, multiblock_read"),
        (["plan", "mbrc", "--set", "multiblock_read=0,16"], "knob 'multiblock_read' (postgres io_combine_limit): 0 is out of range; accepted: an integer from 1 to 128"),
        (["plan", "nosuchrecipe"], "unknown recipe 'nosuchrecipe'; built-in recipes: "),
        (["plan", "mbrc", "--set", "block_checking=on"], "knob 'block_checking' is not available on engine postgres"),
        (["plan", "mbrc", "--set", "pg.no_such_parameter=1"], "unknown PostgreSQL parameter 'pg.no_such_parameter'"),
        (["plan", "mbrc", "--repeats", "0"], "--repeats 0: must be at least 1"),
        (["run", "mbrc", "--set", "multiblock_read"], "expected KNOB=V1,V2"),
    ],
)
def test_bad_input_messages(cli_env, tmp_path, args, message):
    result = blocklab(args, cli_env)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == "" and message in result.stderr
    assert not Path(cli_env["BLOCKLAB_RESULTS"]).exists(), "nothing may be written on bad input"


def test_malformed_toml_message(cli_env, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[knobs\nmultiblock_read = [1]\n")
    result = blocklab(["run", str(bad)], cli_env)
    assert result.returncode == 2
    assert f"{bad}: malformed TOML" in result.stderr


def test_plan_shows_cells_and_restarts(cli_env):
    result = blocklab(["plan", "mbrc", "--set", "direct_io=on,off", "--set", "multiblock_read=8,16", "--repeats", "2", "--seed", "3"], cli_env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 settings" not in result.stdout
    assert "4 settings x 2 repeats = 8 cells, seed 3" in result.stdout
    assert "<- restart: direct_io" in result.stdout
    assert "estimated time" in result.stdout


def test_dsn_server_by_connection_string(cache_dir, tmp_path, cli_env, pristine_postgres):
    """A second, separately started PostgreSQL, used by --dsn: session knobs work,
    restart knobs are refused, and the server is not stopped by blocklab."""
    from blocklab.engines.postgres import PostgresEngine

    other = PostgresEngine(cache_dir=pristine_postgres(cache_dir / "dsn-server"))
    other.start()
    try:
        dsn = other.conninfo()
        exp = tmp_path / "dsn.toml"
        exp.write_text(
            'name = "dsn"\n[engine]\nkind = "postgres"\n[dataset]\nrows = 50000\n'
            "[knobs]\nmultiblock_read = [1, 16]\n[measure]\nrepeats = 1\n"
        )
        result = blocklab(["run", str(exp), "--dsn", dsn, "--out", str(tmp_path / "run")], cli_env)
        assert result.returncode == 0, result.stdout + result.stderr
        rows = rows_of(tmp_path / "run")
        assert [r["status"] for r in rows] == ["ok", "ok"]
        assert other.query("SELECT 1") == [(1,)], "blocklab must not stop someone else's server"
        adapted = blocklab(["plan", "mbrc", "--dsn", dsn], cli_env)  # the recipe keeps the server's restart settings
        assert adapted.returncode == 0, adapted.stdout + adapted.stderr
        assert "adapted on a server given by --dsn blocklab never restarts it" in adapted.stdout
        refused = blocklab(["plan", "mbrc", "--dsn", dsn, "--set", "pg.io_max_combine_limit=64"], cli_env)
        assert refused.returncode == 2
        assert "needs a server restart; blocklab never restarts a server given by --dsn" in refused.stderr
        reload_knob = blocklab(["plan", str(exp), "--dsn", dsn, "--set", "writers=2"], cli_env)
        assert reload_knob.returncode == 2 and "--allow-server-changes" in reload_knob.stderr
    finally:
        other.stop()


def test_old_server_without_io_combine_limit_is_refused():
    """PostgreSQL 15 has no io_combine_limit: validation says so and names the version that has it."""
    from blocklab.engines.base import KnobError
    from blocklab.engines.postgres import PostgresEngine

    engine = PostgresEngine(dsn="host=/nonexistent")
    engine._catalog = {"shared_buffers": {"setting": "16384"}}  # what a 15 server's pg_settings lacks matters
    engine._version = "15.19"
    with pytest.raises(KnobError, match=r"needs PostgreSQL's io_combine_limit, which this server \(PostgreSQL 15.19\) does not have; it exists from PostgreSQL 17 on"):
        engine.knob("multiblock_read")


def _postgres_serving(data_dir: Path) -> list[int]:
    """PIDs of postmasters whose command line names this data directory."""
    pids = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                argv = (proc / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if argv and argv[0].endswith(b"/postgres") and str(data_dir).encode() in argv:
                pids.append(int(proc.name))
    return pids


@pytest.mark.parametrize("ending", ["return", "exception", "sigterm"])
def test_embedded_server_is_stopped_however_the_process_ends(cache_dir, pristine_postgres, ending):
    home = pristine_postgres(cache_dir / f"exit-{ending}")
    script = f"""
import os, signal, sys
from blocklab.engines.postgres import PostgresEngine
engine = PostgresEngine(cache_dir={str(home)!r})
engine.start()
print("started", flush=True)
if {ending!r} == "exception":
    raise RuntimeError("boom")
if {ending!r} == "sigterm":
    os.kill(os.getpid(), signal.SIGTERM)
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert "started" in proc.stdout, proc.stderr
    assert _postgres_serving(home / "postgres" / "data") == [], proc.stderr


def test_a_failed_start_leaves_no_server_and_no_lock(cache_dir, pristine_postgres):
    from blocklab.engines.base import EngineError
    from blocklab.engines.postgres import PostgresEngine

    home = pristine_postgres(cache_dir / "failed-start")
    broken = PostgresEngine(cache_dir=home)
    broken._server_settings = {"shared_buffers": "1kB"}  # below PostgreSQL's minimum: the postmaster refuses
    with pytest.raises(EngineError, match="shared_buffers"):
        broken.start()
    assert _postgres_serving(home / "postgres" / "data") == []
    fine = PostgresEngine(cache_dir=home)  # the lock was released
    fine.start()
    try:
        assert fine.query("SELECT 1")[0][0] == 1
    finally:
        fine.stop()
