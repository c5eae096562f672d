"""The MariaDB engine against real private mariadbd instances (Debian's mariadb-server).

Every knob is applied and read back from the server itself; rejected values
must fail in validation without touching the instance; no mariadbd may outlive
stop(), Ctrl-C, SIGTERM or a killed blocklab.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest
from conftest import ctrl_c_reaches_child

from blocklab.engines.base import IO_KEYS, ApplyClass, EngineError, KnobError

pytestmark = pytest.mark.engine

if not (shutil.which("mariadbd") or Path("/usr/sbin/mariadbd").exists()):
    pytest.fail(
        "mariadbd is not installed: the MariaDB engine tests need Debian's MariaDB server (apt-get install mariadb-server)",
        pytrace=False,
    )

from blocklab.engines.mariadb import MariadbEngine  # noqa: E402  (after the check: a clear message first)


def mariadbd_pids(datadir: Path | str) -> list[int]:
    """Running mariadbd processes for this data directory, read from /proc (zombies have no cmdline)."""
    needle = f"--datadir={datadir}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if argv and argv[0].endswith(b"mariadbd") and needle in argv:
                found.append(int(entry.name))
    return found


def wait_gone(datadir: Path | str, timeout: float = 15.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while (pids := mariadbd_pids(datadir)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return pids


def make_cache(tag: str) -> Path:
    # under /var/tmp: the unprivileged server user cannot enter pytest's /tmp/pytest-of-root
    path = Path(tempfile.mkdtemp(prefix=f"blocklab-test-mariadb-{tag}-", dir="/var/tmp"))
    path.chmod(0o755)
    return path


@pytest.fixture(scope="module")
def cache_dir():
    path = make_cache("main")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def engine(cache_dir):
    eng = MariadbEngine(cache_dir=cache_dir, page_size="16k")
    eng.start()
    yield eng
    eng.stop()
    assert not wait_gone(eng.datadir)


def global_value(engine: MariadbEngine, native: str) -> str:
    value = engine.query(f"SELECT @@GLOBAL.{native}")[0][0]
    return str(value)


def server_pid(engine: MariadbEngine) -> int:
    pids = engine.server_pids()
    assert len(pids) == 1
    return pids[0]


# ---------------------------------------------------------------------- knobs read back
@pytest.mark.parametrize(
    "knob, value, expected, native",
    [
        ("checksum", "crc32", "crc32", "innodb_checksum_algorithm"),
        ("checksum", "full_crc32", "full_crc32", "innodb_checksum_algorithm"),
        ("checksum", "strict_full_crc32", "strict_full_crc32", "innodb_checksum_algorithm"),
        ("direct_io", "fsync", "fsync", "innodb_flush_method"),
        ("direct_io", "O_DIRECT", "O_DIRECT", "innodb_flush_method"),
        ("direct_io", "off", "fsync", "innodb_flush_method"),
        ("direct_io", "on", "O_DIRECT", "innodb_flush_method"),
        ("multiblock_read", 8, "8", "innodb_read_ahead_threshold"),
        ("multiblock_read", 64, "64", "innodb_read_ahead_threshold"),
        ("multiblock_read", 0, "0", "innodb_read_ahead_threshold"),
        ("buffer_cache", "64M", "67108864", "innodb_buffer_pool_size"),
        ("buffer_cache", 256 * 1024 * 1024, "268435456", "innodb_buffer_pool_size"),
        ("writers", 8, "8", "innodb_write_io_threads"),
        ("writers", 2, "2", "innodb_write_io_threads"),
        ("io_slaves", 1, "1", "innodb_read_io_threads"),
        ("io_slaves", 12, "12", "innodb_read_io_threads"),
        ("mariadb.innodb_random_read_ahead", "on", "ON", "innodb_random_read_ahead"),
        ("mariadb.innodb_random_read_ahead", "off", "OFF", "innodb_random_read_ahead"),
        ("mariadb.innodb_flush_neighbors", 0, "0", "innodb_flush_neighbors"),
    ],
)
def test_knob_reads_back_as_asked(engine, knob, value, expected, native):
    applied = engine.apply({knob: value})
    assert applied == {knob: expected}
    raw = global_value(engine, native)
    if native == "innodb_random_read_ahead":
        raw = "ON" if raw == "1" else "OFF"
    assert raw == expected  # the server itself, not only what apply() says


def test_session_knob_is_set_in_the_measuring_session(engine):
    assert engine.knob("mariadb.sort_buffer_size").apply == ApplyClass.SESSION
    applied = engine.apply({"mariadb.sort_buffer_size": "1M"})
    assert applied == {"mariadb.sort_buffer_size": "1048576"}
    with engine.connect() as session:
        assert session.execute("SELECT @@SESSION.sort_buffer_size, DATABASE()") == [(1048576, "blocklab")]
    engine.apply({})  # the next setting drops it
    with engine.connect() as session:
        assert session.execute("SELECT @@SESSION.sort_buffer_size = @@GLOBAL.sort_buffer_size") == [(1,)]


def test_apply_classes_match_the_server(engine):
    # verified on this server: the io thread counts really are dynamic in 10.11
    for knob in ("writers", "io_slaves", "multiblock_read", "buffer_cache"):
        assert engine.knob(knob).apply == ApplyClass.RELOAD, knob
    assert engine.knob("direct_io").apply == ApplyClass.RESTART
    assert engine.knob("block_size").apply == ApplyClass.REINIT
    assert engine.knob("checksum").apply == ApplyClass.REINIT  # new tablespaces only: tables are rebuilt
    assert engine.knob("mariadb.innodb_log_file_size").kind == "size"
    engine.apply({"direct_io": "on", "writers": 4})
    pid = server_pid(engine)
    engine.apply({"direct_io": "on", "writers": 6, "io_slaves": 3, "buffer_cache": "96M", "multiblock_read": 16})
    assert server_pid(engine) == pid, "reload-class knobs must not restart the server"
    engine.apply({"direct_io": "off", "writers": 6})
    assert server_pid(engine) != pid, "innodb_flush_method is read-only: a restart"
    assert global_value(engine, "innodb_write_io_threads") == "6"  # survives the restart


def test_checksum_change_asks_for_a_rebuild_and_new_tables_get_it(engine):
    engine.apply({"checksum": "full_crc32"})
    with engine.connect() as session:
        session.execute("DROP TABLE IF EXISTS ck_full")
        session.execute("CREATE TABLE ck_full (id INT PRIMARY KEY)")
    engine.apply({"checksum": "full_crc32"})
    assert engine.needs_rebuild("ck_full") is False  # the same algorithm: nothing to rebuild
    assert engine.needs_rebuild("no_such_table") is False
    engine.apply({"checksum": "crc32"})
    assert engine.needs_rebuild("ck_full") is True  # made under full_crc32, which new tables no longer get
    with engine.connect() as session:
        session.execute("DROP TABLE IF EXISTS ck_crc")
        session.execute("CREATE TABLE ck_crc (id INT PRIMARY KEY)")
    assert engine.table_checksum("ck_full") == "full_crc32"  # older tablespace keeps its format
    assert engine.table_checksum("ck_crc") == "crc32"
    assert engine.needs_rebuild("ck_crc") is False
    engine.apply({"checksum": "full_crc32"})


def test_block_size_reinit_per_page_size_and_reuse(engine):
    applied = engine.apply({"block_size": "4k"})
    assert applied == {"block_size": "4096"}
    assert global_value(engine, "innodb_page_size") == "4096"
    assert engine.data_dir().endswith("mariadb-4096/data")
    assert engine.reinitialised is True  # a new data directory: the workload loads its data
    engine.reinitialised = False
    assert engine.apply({"block_size": 16384}) == {"block_size": "16384"}
    assert engine.reinitialised is False  # reused from the cache
    assert engine.apply({"block_size": "4k", "writers": 5}) == {"block_size": "4096", "writers": "5"}
    assert engine.reinitialised is False
    assert engine.apply({"block_size": "16k"}) == {"block_size": "16384"}
    assert engine.page_size == 16384


# ---------------------------------------------------------------------- validation
@pytest.mark.parametrize(
    "settings, words",
    [
        ({"checksum": "none"}, ["'checksum'", "mariadb", "accepted", "crc32", "full_crc32"]),
        ({"checksum": "md5"}, ["'checksum'", "accepted", "strict_full_crc32"]),
        ({"block_size": "3k"}, ["'block_size'", "innodb_page_size", "accepted", "4k", "64k"]),
        ({"block_size": 128 * 1024}, ["'block_size'", "accepted", "16k"]),
        ({"no_such_knob": 1}, ["'no_such_knob'", "engine mariadb", "block_size", "mariadb.NAME"]),
        ({"block_checking": "on"}, ["'block_checking'", "engine mariadb"]),
        ({"mariadb.no_such_variable": 1}, ["mariadb.no_such_variable", "engine mariadb"]),
        ({"multiblock_read": 65}, ["'multiblock_read'", "innodb_read_ahead_threshold", "0 to 64"]),
        ({"writers": 1}, ["'writers'", "2 to 64"]),
        ({"buffer_cache": "40000000"}, ["'buffer_cache'", "multiple of", "1 MB", "round"]),
        ({"direct_io": "sometimes"}, ["'direct_io'", "accepted", "O_DIRECT", "fsync"]),
        ({"mariadb.sql_mode": "NOT_A_MODE"}, ["mariadb.sql_mode", "refuses"]),
        ({"mariadb.innodb_buffer_pool_dump_at_shutdown": "on"}, ["innodb_buffer_pool_dump_at_shutdown", "cold"]),
        ({"mariadb.tmpdir": "/tmp"}, ["tmpdir", "its own directory"]),
    ],
)
def test_rejected_values_fail_in_validation_before_anything_changes(engine, settings, words):
    pid = server_pid(engine)
    before = {n: global_value(engine, n) for n in ("innodb_checksum_algorithm", "innodb_page_size", "innodb_read_ahead_threshold")}
    with pytest.raises(KnobError) as err:
        engine.check_settings(settings)
    for word in words:
        assert word in str(err.value), (word, str(err.value))
    with pytest.raises(KnobError):
        engine.apply(settings)  # apply validates first, too
    assert server_pid(engine) == pid
    assert {n: global_value(engine, n) for n in before} == before


def test_temporary_tables_are_kept_in_the_instances_own_directory(engine):
    """Not in /tmp, which other servers and cleaners share: a temporary table's file there vanished
    while two private instances ran (Errcode 2 on its delete)."""
    assert global_value(engine, "tmpdir") == str(engine.home() / "tmp")
    # a query whose internal temporary table goes to disk (a BLOB column in a GROUP BY) works there
    rows = engine.query("SELECT CAST(seq AS CHAR) AS k, COUNT(*) FROM seq_1_to_2000 GROUP BY k ORDER BY CONCAT(k, REPEAT('x', 70000))")
    assert len(rows) == 2000


def test_check_settings_gives_canonical_values(engine):
    assert engine.check_settings(
        {"block_size": "8k", "checksum": "CRC32", "direct_io": True, "buffer_cache": "1G", "writers": "4"}
    ) == {"block_size": 8192, "checksum": "crc32", "direct_io": "O_DIRECT", "buffer_cache": 1024**3, "writers": 4}


def test_check_settings_before_start_starts_the_private_instance(cache_dir):
    cold = MariadbEngine(cache_dir=make_cache("check"))
    try:
        # the module's instance holds the 16k directory's lock: this one has its own cache
        assert cold.check_settings({"checksum": "crc32"}) == {"checksum": "crc32"}
        with pytest.raises(KnobError, match="accepted"):
            cold.check_settings({"checksum": "none"})
    finally:
        cold.stop()
        assert not wait_gone(cold.datadir)
        shutil.rmtree(cold.cache_dir, ignore_errors=True)


# ---------------------------------------------------------------------- information, counters, cache
def test_info_and_io_counters_after_reading_a_table(engine):
    info = engine.info()
    assert info.engine == "mariadb" and info.mode == "embedded"
    assert info.version.startswith("10.")
    assert info.settings["innodb_page_size"] == str(engine.page_size)
    assert len(info.settings) > 300  # the full SHOW GLOBAL VARIABLES
    assert info.data_dir == str(engine.datadir)

    with engine.connect() as session:
        session.execute("DROP TABLE IF EXISTS scan")
        session.execute("CREATE TABLE scan (id INT PRIMARY KEY, name VARCHAR(40)) ENGINE=InnoDB")
        session.execute("INSERT INTO scan SELECT seq, CONCAT('blabla ', seq) FROM seq_1_to_100000")
    engine.analyze("scan")
    size = engine.relation_bytes("scan")
    assert 2_000_000 < size <= engine.file_bytes("scan")
    done = engine.evict(["scan"])
    assert done["engine_restarted"] and done["os_dropped_files"] == 1
    with engine.connect() as session:
        before = engine.io_counters(session)
        assert session.execute("SELECT COUNT(*), SUM(LENGTH(name)) FROM scan")[0][0] == 100000
        after = engine.io_counters(session)
    delta = {k: after[k] - before[k] for k in before}
    assert set(IO_KEYS) <= set(delta)  # the keys every engine gives
    assert delta["Innodb_buffer_pool_reads"] > 0
    assert delta["Innodb_pages_read"] > 0
    assert delta["Innodb_data_reads"] > 0 and delta["Innodb_data_read"] > 0
    assert delta["file.reads"] > 0 and delta["file.read_bytes"] > 0.8 * size  # cold: the table came from disk
    assert delta["read_time_ms"] > 0
    assert delta["reads"] == delta["file.reads"] and delta["read_bytes"] == delta["file.read_bytes"]
    assert all(v >= 0 for v in delta.values()), delta


def test_dsn_mode_changes_globals_only_when_allowed_and_restores_them(engine, monkeypatch):
    monkeypatch.setenv("HOME", str(engine.cache_dir))  # no ~/.my.cnf of the machine
    monkeypatch.delenv("MYSQL_PWD", raising=False)
    engine.apply({"multiblock_read": 56, "buffer_cache": "128M"})
    guarded = MariadbEngine(dsn=f"mysql://root@localhost?socket={engine.socket_path}")
    try:
        with pytest.raises(KnobError, match="--allow-server-changes"):
            guarded.check_settings({"multiblock_read": 8})
        with pytest.raises(KnobError, match="never restarts"):
            guarded.check_settings({"direct_io": "off"})
        with pytest.raises(KnobError, match="accepted: one of 16k"):
            guarded.check_settings({"block_size": "4k"})
        with pytest.raises(EngineError, match="cold cache"):
            guarded.evict(["scan"])
    finally:
        guarded.stop()
    allowed = MariadbEngine(dsn=f"mysql://root@localhost/blocklab?socket={engine.socket_path}", allow_server_changes=True)
    try:
        assert allowed.apply({"multiblock_read": 8, "buffer_cache": "64M"}) == {
            "multiblock_read": "8",
            "buffer_cache": "67108864",
        }
        assert global_value(engine, "innodb_read_ahead_threshold") == "8"
    finally:
        allowed.stop()
    assert global_value(engine, "innodb_read_ahead_threshold") == "56"
    assert global_value(engine, "innodb_buffer_pool_size") == str(128 * 1024**2)
    assert mariadbd_pids(engine.datadir) == engine.server_pids()  # never restarted


def test_stop_leaves_no_server_and_start_again(engine):
    datadir = engine.datadir
    assert mariadbd_pids(datadir) == engine.server_pids()
    engine.stop()
    assert mariadbd_pids(datadir) == []
    engine.stop()  # idempotent
    engine.start()
    engine.start()  # idempotent
    assert len(mariadbd_pids(datadir)) == 1


def test_query_after_stop_starts_again_instead_of_waiting_on_itself(engine):
    """query() starts a stopped engine, whose start asks its own questions through query()."""
    import threading

    engine.stop()
    answers: list = []
    asker = threading.Thread(target=lambda: answers.append(engine.query("SELECT 1")), daemon=True)
    asker.start()
    asker.join(60)  # a hang, not a slow start: starting takes a few seconds
    assert not asker.is_alive(), "query() after stop() waited on its own lock"
    assert answers == [[(1,)]]


def test_the_control_connection_is_kept_after_an_error_reply_and_dropped_when_cut_off(engine, monkeypatch):
    import pymysql

    engine.query("SELECT 1")
    kept = engine._control
    assert kept is not None
    with pytest.raises(pymysql.err.ProgrammingError):
        engine.query("SELEC 1")  # the server's error reply: the connection is in step
    assert engine._control is kept
    real_execute = pymysql.cursors.Cursor.execute

    def cut_off(self, query, args=None):
        real_execute(self, "SELECT SLEEP(0)")  # sent; its reply is left unread
        raise KeyboardInterrupt

    monkeypatch.setattr(pymysql.cursors.Cursor, "execute", cut_off)
    with pytest.raises(KeyboardInterrupt):
        engine.query("SELECT 2")
    monkeypatch.setattr(pymysql.cursors.Cursor, "execute", real_execute)
    assert engine._control is None  # never reused with an answer on its way
    assert engine.query("SELECT 3") == [(3,)]


# ---------------------------------------------------------------------- interruption
CHILD = textwrap.dedent(
    """
    import os, signal, sys, time
    import blocklab.engines.mariadb.instance as instance
    from blocklab.engines.mariadb import MariadbEngine
    if sys.argv[2] != "sigkill":
        # prove blocklab's own clean-up (atexit, SIGTERM handler), not the kernel's parent-death signal
        instance.parent_death_preexec = lambda: None
    engine = MariadbEngine(cache_dir=sys.argv[1], page_size="4k")
    engine.start()
    print(engine.datadir, engine.server_pids()[0], flush=True)
    if sys.argv[2] == "self-sigint":
        os.kill(os.getpid(), signal.SIGINT)
    time.sleep(120)
    """
)


@pytest.fixture(scope="module")
def child_cache():
    path = make_cache("child")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.parametrize("how", ["self-sigint", "sigint", "sigterm", "sigkill"])
def test_no_server_survives_an_interrupted_blocklab(child_cache, how):
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(child_cache), how],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=ctrl_c_reaches_child,
    )
    try:
        line = child.stdout.readline().split()
        assert len(line) == 2, child.stderr.read() if child.poll() is not None else "no output"
        datadir, server = line[0], int(line[1])
        assert server in mariadbd_pids(datadir) or how == "self-sigint"
        if how != "self-sigint":
            child.send_signal({"sigint": signal.SIGINT, "sigterm": signal.SIGTERM, "sigkill": signal.SIGKILL}[how])
        child.wait(timeout=30)
        assert child.returncode == {"self-sigint": -2, "sigint": -2, "sigterm": 128 + 15, "sigkill": -9}[how]
        # with SIGKILL the child never ran its handlers: the kernel's parent-death signal stops the server
        assert wait_gone(datadir) == [], f"mariadbd still running after {how}"
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_start_failure_says_why_and_leaves_nothing(child_cache):
    eng = MariadbEngine(cache_dir=child_cache, page_size="4k")
    eng.start()
    pid = server_pid(eng)
    try:
        with pytest.raises(EngineError) as err:
            eng.apply({"mariadb.innodb_data_file_path": "bogus"})  # read-only: a restart the server refuses
        assert "exited with code" in str(err.value)
        assert "innodb_data_file_path=bogus" in str(err.value)  # the error log's tail
        assert server_pid(eng) != pid  # back up with the previous settings
        assert global_value(eng, "innodb_data_file_path").startswith("ibdata1")
    finally:
        eng.stop()
    assert wait_gone(eng.datadir) == []
    quick = MariadbEngine(cache_dir=child_cache, page_size="4k", start_timeout=0.0)
    with pytest.raises(EngineError, match="did not accept connections"):
        quick.start()
    assert wait_gone(quick.datadir) == []


def test_dsn_parsing_keeps_passwords_out_of_sight(monkeypatch):
    from blocklab.engines.mariadb.dsn import parse_dsn

    monkeypatch.setenv("HOME", "/nonexistent")
    monkeypatch.setenv("MYSQL_PWD", "s3cret")
    tcp = parse_dsn("mysql://bench@db.example:3307")
    assert tcp.params["host"] == "db.example" and tcp.params["port"] == 3307 and tcp.params["password"] == "s3cret"
    assert "s3cret" not in tcp.where
    sock = parse_dsn("/run/mysqld/mysqld.sock")
    assert sock.params["unix_socket"] == "/run/mysqld/mysqld.sock"
    with pytest.raises(KnobError, match="only in its own database"):
        parse_dsn("mysql://root@localhost/production")
