"""The `update` workload on a private MariaDB instance: every row of each range
updated once per run, the InnoDB counters and data-file waits recorded, the
performance_schema time profile adding up, PostgreSQL-only options refused in
validation, and the writers recipe's mariadb variant through the CLI."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import pytest
from conftest import blocklab_bin

from blocklab.experiment import prepare
from blocklab.spec import DatasetSpec, SpecError, WorkloadSpec, spec_from_dict
from blocklab.workloads import make_workload

pytestmark = pytest.mark.engine

ROWS = 40_000
SESSIONS = 4


@pytest.fixture(scope="module")
def engine(cache_dir, pristine_mariadb):
    from blocklab.engines.mariadb import MariadbEngine

    engine = MariadbEngine(cache_dir=pristine_mariadb(cache_dir / "mariadb-update"))
    engine.start()
    engine.apply({"buffer_cache": "8M"})
    yield engine
    engine.stop()


def update_workload(rows: int = ROWS, table: str = "upd_t", **options):
    return make_workload(WorkloadSpec(kind="update", sessions=SESSIONS, **options), DatasetSpec(table=table, rows=rows), "mariadb")


def assert_parts_add_up(m: dict[str, float], prefix: str) -> None:
    waits = sum(v for k, v in m.items() if k.startswith(f"{prefix}.wait.") and k.endswith("_s"))
    parts = waits + m[f"{prefix}.cpu_s"] + m[f"{prefix}.unaccounted_s"]
    assert math.isclose(parts, m[f"{prefix}.total_s"], rel_tol=1e-9, abs_tol=1e-9), (prefix, parts, m[f"{prefix}.total_s"])
    assert m[f"{prefix}.cpu_s"] >= 0


def test_update_runs_cold_and_profiles_each_session(engine):
    w = update_workload()
    w.prepare(engine)
    assert engine.query("SELECT COUNT(*), MIN(val), MAX(val) FROM upd_t") == [(ROWS, 1, 1)]  # built, updated once in full
    engine.evict(w.relations())
    m = w.run(engine)

    assert m["rows"] == ROWS and m["sessions"] == SESSIONS
    assert engine.query("SELECT MIN(val), MAX(val) FROM upd_t") == [(2, 2)]  # every row of every range, once
    assert m["elapsed_s"] >= m["mean_session_s"] >= m["fastest_s"] > 0
    assert m["rows_per_s"] == pytest.approx(ROWS / m["elapsed_s"])
    assert m["table_growth_bytes"] == 0  # in-place updates
    assert m["buffer_pool_bytes"] == 8 * 1024**2 and m["cache_ratio"] > 1
    # cold: the pages came from the disk; the small pool made InnoDB write pages during the run
    assert m["innodb.buffer_pool_reads"] > 0 and m["innodb.buffer_pool_read_requests"] >= m["innodb.buffer_pool_reads"]
    assert m["innodb.pages_read"] > 0 and m["innodb.pages_written"] > 0
    assert m["data_file.available"] == 1.0
    assert m["data_file.count"] >= m["data_file.reads"] > 0 and m["data_file.read_bytes"] > 0 and m["data_file.wait_s"] > 0
    for key in ("innodb.data_reads", "innodb.data_fsyncs", "innodb.buffer_pool_wait_free", "server_cpu_s"):
        assert key in m and m[key] >= 0

    assert m["profile.available"] == 1.0 and m["profile.measured"] == 1.0 and m["profile.sessions"] == SESSIONS
    assert m["profile.synch_timed"] == 1.0  # latch instruments enabled for the run
    assert m["profile.slowest.total_s"] == pytest.approx(m["elapsed_s"])
    assert m["profile.total.total_s"] == pytest.approx(m["mean_session_s"] * SESSIONS)
    assert m["profile.slowest.wait.File:innodb/innodb_data_file_s"] > 0  # cold: the session read pages itself
    for prefix in ("profile.slowest", "profile.total"):
        assert_parts_add_up(m, prefix)
    if m["profile.cpu_measured"]:
        assert m["profile.slowest.cpu_s"] <= m["profile.slowest.cpu_measured_s"] + m["profile.slowest.runqueue_s"] + 1e-9
    # the latch instruments are put back as they were (off by default) once the run is over
    assert engine.query("SELECT COUNT(*) FROM performance_schema.setup_instruments WHERE NAME LIKE 'wait/synch/%' AND ENABLED = 'YES'") == [(0,)]
    assert "slowest of 4" in w.describe(m) and "free-page waits" in w.describe(m)


def test_prepare_keeps_a_built_table_and_fillfactor_spreads_it(engine):
    w = update_workload()
    w.prepare(engine)
    space = engine.query("SELECT SPACE FROM information_schema.INNODB_SYS_TABLESPACES WHERE NAME = 'blocklab/upd_t'")
    w.prepare(engine)  # the same fingerprint: no rebuild
    assert engine.query("SELECT SPACE FROM information_schema.INNODB_SYS_TABLESPACES WHERE NAME = 'blocklab/upd_t'") == space
    full = update_workload(table="upd_full", fillfactor=100)
    full.prepare(engine)
    # innodb_fill_factor 45 leaves each leaf page about half empty, as PostgreSQL's fillfactor
    assert engine.relation_bytes("upd_t") > 1.8 * engine.relation_bytes("upd_full")
    assert engine.query("SELECT @@GLOBAL.innodb_fill_factor") == [(100,)]  # put back after the rebuild


def test_without_profile_no_profile_metrics(engine):
    w = update_workload(sample=False)
    w.prepare(engine)
    m = w.run(engine)
    assert m["rows"] == ROWS
    assert not [k for k in m if k.startswith("profile.")]


@pytest.mark.parametrize(
    "option, value",
    [("vacuum", True), ("sample_ms", 5.0), ("sample_nice", 0)],
)
def test_postgres_only_options_refused_before_anything_runs(cache_dir, option, value):
    with pytest.raises(SpecError) as err:
        update_workload(**{option: value})
    text = str(err.value)
    assert f"workload.{option}" in text and "'mariadb'" in text and "accepted: leave it out" in text
    # the same through the runner: refused before an engine is started or a data directory made
    raw = {"engine": {"kind": "mariadb"}, "dataset": {"rows": 1000}, "workload": {"kind": "update", option: value}}
    where = cache_dir / "mariadb-update-refused"
    with pytest.raises(SpecError, match=f"workload.{option}"):
        prepare(spec_from_dict(raw, "t", {}), "", "t", cache_dir=where)
    assert not where.exists()
    # PostgreSQL keeps them
    make_workload(WorkloadSpec(kind="update", **{option: value}), DatasetSpec(rows=1000), "postgres")


def test_quick_writers_run_on_mariadb(cli_env, pristine_mariadb):
    pristine_mariadb(Path(cli_env["BLOCKLAB_CACHE"]), 16384, 4096)
    out = subprocess.run(
        [blocklab_bin(), "run", "writers", "--engine", "mariadb", "--quick", "--repeats", "1", "--rows", "60000"],
        env=cli_env, capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "FAILED" not in out.stdout, out.stdout
    assert "where the time went" in out.stdout and "File:innodb/innodb_data_file" in out.stdout
    run_dirs = list(Path(cli_env["BLOCKLAB_RESULTS"]).glob("writers-*"))
    assert len(run_dirs) == 1, run_dirs
    rows = [json.loads(line) for line in (run_dirs[0] / "results.jsonl").read_text().splitlines()]
    assert {(r["settings"]["writers"], r["settings"]["block_size"]) for r in rows} == {
        (w, b) for w in (2, 32) for b in (4096, 16384)
    }
    for r in rows:
        s, a, m = r["settings"], r["applied"], r["metrics"]
        assert r["status"] == "ok", r["status"]
        assert a["writers"] == str(s["writers"]) and a["block_size"] == str(s["block_size"])  # read back from the server
        assert m["rows"] == 60_000 and m["sessions"] == 15
        assert_parts_add_up(m, "profile.slowest")
    assert (run_dirs[0] / "report.html").exists()
    assert (run_dirs[0] / "plots" / "time-profile.png").exists()


# ---------------------------------------------------------------------- interruption, purge, DSN guards, profiler set-up
def _blocklab_updates(engine, table: str) -> list[tuple]:
    return engine.query(
        "SELECT ID, STATE FROM information_schema.PROCESSLIST WHERE COMMAND = 'Query' AND INFO LIKE %s",
        (f"UPDATE `{table}` SET val = val + 1 WHERE id BETWEEN%",),
    )


def test_interrupted_run_kills_the_sessions_statements(engine, monkeypatch, ctrl_c_raises):
    """Ctrl-C while the sessions' UPDATEs wait on row locks another transaction
    holds: each is killed on the server (KILL QUERY) before the run returns,
    so none keeps running (or waiting) after blocklab has given up. Their lock
    waits would last an hour: without the kill they are still there when the
    run gives up waiting for them."""
    import _thread
    import threading
    import time

    w = update_workload(sample=False)
    w.prepare(engine)
    monkeypatch.setitem(engine._session_settings, "innodb_lock_wait_timeout", "3600")  # the sessions' connections
    blocker = engine.sql_connect(session=False, autocommit=False)
    interrupted = threading.Event()

    def interrupt_when_all_wait() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if len(_blocklab_updates(engine, "upd_t")) == SESSIONS:
                break
            time.sleep(0.05)
        interrupted.set()
        _thread.interrupt_main()

    try:
        with blocker.cursor() as cur:  # a row of each session's range locked: every UPDATE waits for it
            for lo, _hi in w.ranges():
                cur.execute("SELECT id FROM upd_t WHERE id = %s FOR UPDATE", (lo,))
        timer = threading.Thread(target=interrupt_when_all_wait, daemon=True)
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            w.run(engine)
            interrupted.wait()  # the interrupt must land here at the latest, never later in the suite
            time.sleep(5)
        timer.join()
        # killed, not waiting out innodb_lock_wait_timeout while the blocker still holds its locks
        assert _blocklab_updates(engine, "upd_t") == []
    finally:
        blocker.rollback()
        blocker.close()


def test_wait_for_purge_is_bounded_and_says_whether_it_completed(engine):
    from blocklab.engines.mariadb.update import _wait_for_purge
    from blocklab.engines.mariadb.waits import wait_for_purge as wait_in

    def wait_for_purge(engine, timeout_s):
        with engine.sql_connect(session=False) as conn, conn.cursor() as cur:
            return wait_in(cur, timeout_s)

    w = update_workload()
    w.prepare(engine)
    assert w.notes["purge_waited"] == 1.0
    reader = engine.sql_connect(session=False, autocommit=False)
    try:
        with reader.cursor() as cur:  # an old read view: purge cannot remove what it may still see
            cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
            cur.execute("SELECT COUNT(*) FROM upd_t")
        engine.query("UPDATE upd_t SET val = val + 1 WHERE id <= 1000")
        assert wait_for_purge(engine, timeout_s=1) is False  # cut short by max_statement_time, no error
    finally:
        reader.rollback()
        reader.close()
    assert wait_for_purge(engine, timeout_s=60) is True
    assert _wait_for_purge(engine) is True
    m = w.run(engine)
    assert m["purge_waited"] == 1.0


def test_dsn_fillfactor_refused_before_the_table_is_dropped(engine):
    from blocklab.engines.mariadb import MariadbEngine

    w = update_workload(table="upd_dsn")
    w.prepare(engine)  # built on the private instance (fill factor 45, put back to 100)
    engine.query("ALTER TABLE upd_dsn COMMENT = 'stale'")  # the next prepare must rebuild it
    guarded = MariadbEngine(dsn=f"mysql://root@localhost?socket={engine.socket_path}")
    guarded.start()
    try:
        with pytest.raises(SpecError, match="allow-server-changes"):
            w.prepare(guarded)
        assert engine.query("SELECT COUNT(*) FROM upd_dsn") == [(ROWS,)]  # not dropped
    finally:
        guarded.stop()
    allowed = MariadbEngine(dsn=f"mysql://root@localhost?socket={engine.socket_path}", allow_server_changes=True)
    allowed.start()
    try:
        w.prepare(allowed)  # rebuilt with the fill factor set, and put back at once
        assert engine.query("SELECT @@GLOBAL.innodb_fill_factor") == [(100,)]
        assert "innodb_fill_factor" not in allowed._dsn_originals  # nothing left for stop() to restore
    finally:
        allowed.stop()
    assert engine.query("SELECT @@GLOBAL.innodb_fill_factor") == [(100,)]


def _synch_enabled(engine) -> int:
    return engine.query("SELECT COUNT(*) FROM performance_schema.setup_instruments WHERE NAME LIKE 'wait/synch/%' AND ENABLED = 'YES'")[0][0]


def test_profiler_setup_failure_puts_back_what_it_enabled(engine, monkeypatch):
    from blocklab.engines.mariadb.waits import SessionWaitProfiler

    assert _synch_enabled(engine) == 0
    profiler = SessionWaitProfiler(engine)

    def fail(*args, **kwargs):
        raise RuntimeError("boom after the instruments were enabled")

    monkeypatch.setattr(SessionWaitProfiler, "_all_timed", staticmethod(fail))
    with pytest.raises(RuntimeError, match="boom"):
        profiler.__enter__()
    assert _synch_enabled(engine) == 0


def test_profiler_unavailable_for_a_dsn_user_without_performance_schema(engine):
    from blocklab.engines.mariadb import MariadbEngine
    from blocklab.engines.mariadb.waits import SessionWaitProfiler

    engine.query("CREATE USER IF NOT EXISTS 'bl_nops'@'localhost'")
    engine.query("GRANT ALL ON blocklab.* TO 'bl_nops'@'localhost'")
    dsn = MariadbEngine(dsn=f"mysql://bl_nops@localhost?socket={engine.socket_path}")
    dsn.start()
    try:
        with SessionWaitProfiler(dsn) as profiler:
            pass
        assert profiler.metrics("profile") == {"profile.available": 0.0}
    finally:
        dsn.stop()
        engine.query("DROP USER 'bl_nops'@'localhost'")
