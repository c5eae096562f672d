"""The SQLite engine on real apsw/SQLite files on the real disk (tmp_path)."""

from __future__ import annotations

import os
from pathlib import Path

import apsw
import pytest

from blocklab.engines.base import ApplyClass, Engine, EngineError, KnobError
from blocklab.engines.sqlite import SqliteEngine, is_checksum_error


@pytest.fixture
def engine(tmp_path: Path):
    eng = SqliteEngine(tmp_path / "sqlite")
    yield eng
    eng.stop()


def fill(engine: SqliteEngine, rows: int = 20_000) -> None:
    conn = engine.sqlite_connect()
    try:
        conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT)")
        with conn:  # one transaction
            conn.executemany("INSERT INTO t VALUES (?, ?)", ((i, f"blabla {i}") for i in range(rows)))
    finally:
        conn.close()


def scan(engine: SqliteEngine, conn: apsw.Connection | None = None) -> tuple[int, int]:
    own = conn is None
    conn = conn or engine.sqlite_connect()
    try:
        return conn.execute("SELECT count(*), sum(length(name)) FROM t").fetchone()
    finally:
        if own:
            conn.close()


def page_count(engine: SqliteEngine) -> int:
    return int(engine.query("PRAGMA page_count")[0][0])


# ---------------------------------------------------------------------- protocol and lifecycle
def test_implements_the_engine_protocol(engine):
    assert isinstance(engine, Engine)
    assert engine.name == "sqlite"


def test_start_and_stop_are_idempotent(engine):
    engine.start()
    engine.start()
    engine.stop()
    engine.stop()
    engine.start()
    assert engine.data_dir() == str(engine.directory)


def test_one_directory_one_engine(engine):
    engine.start()
    other = SqliteEngine(engine.directory)
    with pytest.raises(EngineError, match=rf"another blocklab process \(pid {os.getpid()}: .*\) is using the SQLite database"):
        other.start()
    engine.stop()
    other.start()
    other.stop()


def test_default_vfs_is_left_alone(engine):
    before = apsw.vfs_names()[0]
    engine.start()
    assert apsw.vfs_names()[0] == before
    assert {"vfslog", "cksmvfs"} <= set(apsw.vfs_names())


# ---------------------------------------------------------------------- knobs read back as asked
@pytest.mark.parametrize("size", [1024, 4096, 65536])
def test_block_size_reads_back(engine, size):
    applied = engine.apply({"block_size": size})
    assert applied["block_size"] == str(size)
    assert engine.reinitialised
    assert int(engine.query("PRAGMA page_size")[0][0]) == size
    fill(engine, 2000)
    engine.apply({"block_size": size})
    assert not engine.reinitialised  # same file, data kept
    assert scan(engine)[0] == 2000


def test_block_size_change_makes_a_new_empty_file(engine):
    engine.apply({"block_size": 4096})
    fill(engine, 1000)
    applied = engine.apply({"sqlite.page_size": "8k"})
    assert applied == {"sqlite.page_size": "8192", "sqlite.journal_mode": "delete", "sqlite.synchronous": "full"}
    assert engine.reinitialised
    assert engine.query("SELECT count(*) FROM sqlite_schema")[0][0] == 0


@pytest.mark.parametrize("on", [True, False])
def test_checksum_reads_back(engine, on):
    applied = engine.apply({"checksum": "on" if on else "off", "block_size": 4096})
    assert applied["checksum"] == ("on" if on else "off")
    settings = engine.info().settings
    assert settings["reserve_bytes"] == ("8" if on else "0")
    assert settings["checksum_verification"] == ("1" if on else "0")
    assert settings["vfs"] == ("cksmvfs" if on else "vfslog")


def test_checksum_toggle_reinitialises(engine):
    engine.apply({"checksum": False})
    fill(engine, 500)
    engine.apply({"checksum": True})
    assert engine.reinitialised
    fill(engine, 500)
    engine.apply({"checksum": True, "block_checking": True})
    assert not engine.reinitialised
    engine.apply({"checksum": False})
    assert engine.reinitialised  # reserve bytes only grow: a new file, never a conversion
    assert engine.info().settings["reserve_bytes"] == "0"


@pytest.mark.parametrize("on", [True, False])
def test_block_checking_reads_back(engine, on):
    applied = engine.apply({"block_checking": on})
    assert applied["block_checking"] == ("on" if on else "off")
    conn = engine.sqlite_connect()
    try:
        assert conn.execute("PRAGMA cell_size_check").fetchone()[0] == (1 if on else 0)
    finally:
        conn.close()


def test_buffer_cache_is_pages(engine):
    applied = engine.apply({"buffer_cache": 500})
    assert applied["buffer_cache"] == "500"
    assert engine.knob("buffer_cache").unit == "pages"
    conn = engine.sqlite_connect()
    try:
        assert conn.execute("PRAGMA cache_size").fetchone()[0] == 500
    finally:
        conn.close()


@pytest.mark.parametrize("mode", ["wal", "delete", "truncate", "persist", "memory", "off"])
def test_journal_mode_reads_back(engine, mode):
    applied = engine.apply({"sqlite.journal_mode": mode.upper()})
    assert applied["sqlite.journal_mode"] == mode
    fill(engine, 100)
    conn = engine.sqlite_connect()
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0].lower() == mode
    finally:
        conn.close()


def test_wal_to_delete_without_a_new_file(engine):
    engine.apply({"sqlite.journal_mode": "wal", "checksum": True})
    fill(engine, 1000)
    applied = engine.apply({"sqlite.journal_mode": "delete", "checksum": True})
    assert applied["sqlite.journal_mode"] == "delete"
    assert not engine.reinitialised
    assert scan(engine)[0] == 1000


@pytest.mark.parametrize("level", ["off", "normal", "full", "extra"])
def test_synchronous_reads_back(engine, level):
    applied = engine.apply({"sqlite.synchronous": level})
    assert applied["sqlite.synchronous"] == level


def test_mmap_size_reads_back(engine):
    applied = engine.apply({"sqlite.mmap_size": "64MB"})
    assert applied["sqlite.mmap_size"] == str(64 * 1024 * 1024)


def test_journal_mode_and_synchronous_always_recorded(engine):
    applied = engine.apply({"block_checking": True})
    assert applied == {"block_checking": "on", "sqlite.journal_mode": "delete", "sqlite.synchronous": "full"}


def test_fixed_settings_are_merged_under_the_cell(tmp_path):
    eng = SqliteEngine(tmp_path / "db", fixed={"sqlite.synchronous": "off", "buffer_cache": 100})
    try:
        applied = eng.apply({"buffer_cache": 200})
        assert applied["sqlite.synchronous"] == "off"
        assert applied["buffer_cache"] == "200"
    finally:
        eng.stop()


def test_make_engine_builds_it(tmp_path):
    from blocklab.engines import make_engine

    eng = make_engine("sqlite", cache_dir=tmp_path)
    assert eng.data_dir() == str(tmp_path / "sqlite")


def test_knob_infos(engine):
    assert engine.knob("block_size").apply == ApplyClass.REINIT
    assert engine.knob("checksum").apply == ApplyClass.REINIT
    assert engine.knob("block_checking").apply == ApplyClass.SESSION
    assert engine.knob("buffer_cache").apply == ApplyClass.SESSION
    assert engine.knob("sqlite.synchronous").apply == ApplyClass.SESSION
    assert engine.knob("sqlite.journal_mode").apply == ApplyClass.RELOAD
    assert engine.knob("sqlite.page_size").native == "page_size"
    assert engine.knob("sqlite.page_size").generic is None


def test_check_settings_canonical(engine):
    got = engine.check_settings(
        {"block_size": "64k", "checksum": "yes", "sqlite.journal_mode": "WAL", "sqlite.synchronous": "Normal"}
    )
    assert got == {"block_size": 65536, "checksum": True, "sqlite.journal_mode": "wal", "sqlite.synchronous": "normal"}


# ---------------------------------------------------------------------- refused before anything runs
@pytest.mark.parametrize(
    "settings, words",
    [
        ({"block_size": 3000}, ["block_size", "3000", "power of two", "512", "65536"]),
        ({"block_size": 131072}, ["block_size", "131072", "512", "65536"]),
        ({"sqlite.page_size": 256}, ["sqlite.page_size", "512", "65536"]),
        ({"checksum": "maybe"}, ["checksum", "maybe", "on or off"]),
        ({"block_checking": "sometimes"}, ["block_checking", "on or off"]),
        ({"buffer_cache": -2000}, ["buffer_cache", "pages"]),
        ({"sqlite.journal_mode": "fast"}, ["journal_mode", "'wal'", "'delete'"]),
        ({"sqlite.synchronous": "always"}, ["synchronous", "'normal'", "'full'"]),
        ({"no_such_knob": 1}, ["no_such_knob", "sqlite", "block_size", "sqlite.journal_mode"]),
        ({"sqlite.no_such": 1}, ["sqlite.no_such", "sqlite.page_size"]),
        ({"multiblock_read": 16}, ["multiblock_read", "SQLite has no", "postgres", "mariadb"]),
        ({"writers": 2}, ["writers", "SQLite has no", "postgres", "mariadb"]),
        ({"direct_io": True}, ["direct_io", "SQLite has no", "postgres", "mariadb"]),
        ({"io_slaves": 2}, ["io_slaves", "SQLite has no", "mariadb"]),
        ({"checksum": True, "sqlite.mmap_size": 1 << 20}, ["mmap_size", "checksum", "0"]),
        ({"block_size": 4096, "sqlite.page_size": 8192}, ["block_size", "sqlite.page_size"]),
    ],
)
def test_bad_settings_are_refused(engine, settings, words):
    with pytest.raises(KnobError) as err:
        engine.check_settings(settings)
    message = str(err.value)
    for word in words:
        assert word in message, (word, message)
    with pytest.raises(KnobError):
        engine.apply(settings)  # apply validates too: nothing is made
    assert not engine.db_path.exists()


# ---------------------------------------------------------------------- corruption
def test_flipped_byte_with_checksum_is_a_checksum_error(engine):
    engine.apply({"checksum": True, "block_size": 4096})
    fill(engine)
    page = page_count(engine) // 2
    engine.corrupt_page(page)
    with pytest.raises(apsw.IOError) as err:
        scan(engine)
    assert err.value.extendedresult == apsw.SQLITE_IOERR_DATA == 8202
    assert is_checksum_error(err.value)
    # what the runner records for a failed cell
    status = f"{type(err.value).__name__}: {err.value}"
    assert "checksum" in status


def test_flipped_byte_without_checksum_goes_unnoticed(engine):
    engine.apply({"checksum": False, "block_size": 4096})
    fill(engine)
    before = scan(engine)
    page = page_count(engine) // 2
    engine.corrupt_page(page)
    try:
        after = scan(engine)
    except apsw.Error as err:  # a corrupt b-tree may be noticed, but never as a checksum failure
        assert err.extendedresult != apsw.SQLITE_IOERR_DATA
    else:
        assert after[0] == before[0]


def test_corrupt_page_checks_its_arguments(engine):
    engine.apply({})
    with pytest.raises(ValueError, match="not in"):
        engine.corrupt_page(10_000)


# ---------------------------------------------------------------------- cache and counters
def _process_read_bytes() -> int | None:
    try:
        for line in Path("/proc/self/io").read_text().splitlines():
            if line.startswith("read_bytes:"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


@pytest.mark.parametrize("checksum", [False, True])
def test_evict_makes_the_next_read_physical(engine, checksum):
    engine.apply({"checksum": checksum, "buffer_cache": 100_000})
    fill(engine, 50_000)
    pages = page_count(engine)
    session = engine.connect()
    conn = session.conn
    scan(engine, conn)
    warm0 = engine.io_counters(session)
    scan(engine, conn)  # everything is in this connection's page cache
    warm1 = engine.io_counters(session)
    # each transaction re-reads the file change counter in the header (one small read), no page
    assert warm1["reads"] - warm0["reads"] <= 1
    assert warm1["read_bytes"] - warm0["read_bytes"] < 100
    assert warm1["hits"] > warm0["hits"]

    done = engine.evict(["t"])
    assert done["engine_closed_connections"] >= 1
    assert done["os_dropped_files"] >= 1 and done["os_drop_possible"]
    disk0 = _process_read_bytes()
    cold0 = engine.io_counters()
    session = engine.connect()
    conn = session.conn
    assert scan(engine, conn)[0] == 50_000
    cold1 = engine.io_counters(session)
    disk1 = _process_read_bytes()
    conn.close()
    assert cold1["reads"] - cold0["reads"] >= pages - 1  # page 1 may be read before the count starts
    assert cold1["read_bytes"] - cold0["read_bytes"] >= (pages - 1) * 4096  # default page size
    assert cold1["misses"] >= pages - 1
    if disk0 is not None and disk1 is not None:  # the kernel really went to the device
        assert disk1 - disk0 >= 0.9 * pages * 4096


def test_io_counters_are_monotonic(engine):
    keys_seen: dict[str, float] = {}

    def check() -> None:
        now = engine.io_counters()
        for key, value in keys_seen.items():
            assert now.get(key, 0.0) >= value, key
        keys_seen.update(now)

    check()
    engine.apply({"sqlite.journal_mode": "wal"})
    check()
    fill(engine, 5000)
    check()
    engine.evict(["t"])
    scan(engine)
    check()
    engine.apply({"sqlite.journal_mode": "delete", "block_size": 8192})
    check()
    fill(engine, 5000)
    check()
    for key in ("reads", "read_bytes", "writes", "write_bytes", "fsyncs", "db_reads", "journal_writes"):
        assert key in keys_seen
    assert keys_seen["wal_writes"] > 0  # the WAL phase wrote frames


def test_info_records_versions_and_pragmas(engine):
    engine.apply({"block_size": 16384, "sqlite.journal_mode": "wal"})
    info = engine.info()
    assert info.engine == "sqlite" and info.mode == "file"
    assert apsw.sqlite_lib_version() in info.version and apsw.apswversion() in info.version
    assert info.data_dir == str(engine.directory)
    assert info.settings["page_size"] == "16384"
    assert info.settings["journal_mode"] == "wal"
    for key in ("synchronous", "cache_size", "cell_size_check", "mmap_size", "reserve_bytes", "page_count"):
        assert key in info.settings
    assert info.extra["compile_options"]


def test_relation_bytes(engine):
    engine.apply({"block_size": 4096})
    fill(engine, 10_000)
    size = engine.relation_bytes("t")
    assert size > 0 and size % 4096 == 0
    assert engine.relation_bytes("missing") == 0
