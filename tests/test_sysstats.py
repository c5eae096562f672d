"""`blocklab sysstats`: the arithmetic, the refusals (an engine without optimizer
costs refused with its dialect's reason), and the measurements on a real
embedded PostgreSQL 18 with a small table and direct I/O."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from conftest import blocklab_bin

from blocklab import engines
from blocklab.engines.postgres.sysstats import SysstatsReads, alter_system_sql, random_page_cost
from blocklab.features import sysstats as ss
from blocklab.features.sysstats import (
    SysstatsInputError,
    apply_costs,
    check_options,
    gather,
    read_costs,
)

COSTS = ("seq_page_cost", "random_page_cost")

TABLE = "blocklab_scan"
ROWS = 400_000  # ~2,550 blocks, 20 MB: a scan has ~160 reads of 16 blocks


def blocklab(args, env, timeout=300):
    return subprocess.run([blocklab_bin(), *args], env=env, capture_output=True, text=True, timeout=timeout)


# ---------------------------------------------------------------------- arithmetic, no engine
def test_random_page_cost_on_known_samples():
    # 0.2 ms a random block; a 16-block read in 0.4 ms is 0.025 ms a block: 8x
    assert random_page_cost(0.2, 0.4, 16) == pytest.approx(8.0)
    # the seed's aux_stats$: SREADTIM 70.082, MREADTIM 1.822, MBRC 4
    assert random_page_cost(70.082, 1.822, 4) == pytest.approx(153.857, abs=0.001)
    # single-block multiblock reads as slow as single reads: 1
    assert random_page_cost(0.13, 0.13, 1) == pytest.approx(1.0)
    for bad in ((0, 1, 1), (1, 0, 1), (1, 1, 0), (float("nan"), 1, 1), (1, -2, 4)):
        with pytest.raises(ValueError):
            random_page_cost(*bad)


def test_alter_system_lines():
    assert alter_system_sql({"seq_page_cost": 1.0, "random_page_cost": 7.93}) == [
        "ALTER SYSTEM SET seq_page_cost = 1;",
        "ALTER SYSTEM SET random_page_cost = 7.93;",
        "SELECT pg_reload_conf();",
    ]


def _stats(**overrides):
    base = dict(
        sreadtim_ms=0.126, mreadtim_ms=0.254, mbrc=15.96, maxthr_bytes_per_s=7.2e8, slavethr_bytes_per_s=1.9e8,
        maxthr_sessions=4, sreadtim_wall_ms=0.139, mreadtim_wall_ms=0.358, mreadtim_ahead_ms=0.008,
        throughput_by_sessions={1: 6.7e8, 2: 7.1e8, 4: 7.2e8}, block_size=8192,
        settings={"io_combine_limit": "16", "io_method": "worker", "effective_io_concurrency": "16"}, direct_io=True, table=TABLE, rows=3_000_000,
        relation_bytes=156_459_008, single_reads=2000, repeats=3, dstart="2026-11-22 22:34:45",
        dstop="2026-11-22 22:34:50", phases=(),
    )
    base.update(overrides)
    return ss.SystemStats(**base)


def test_planner_costs_and_aux_stats_shape():
    stats = _stats()
    costs, formula = SysstatsReads.implied_costs(None, stats.sreadtim_ms, stats.mreadtim_ms, stats.mbrc)  # type: ignore[arg-type]
    assert costs == {"seq_page_cost": 1.0, "random_page_cost": 7.92}
    assert "= 0.126 / (0.254 / 15.96) = 7.92" in formula
    rows = {(r[0], r[1]): r for r in stats.aux_stats()}
    assert rows[("SYSSTATS_MAIN", "SREADTIM")] == ("SYSSTATS_MAIN", "SREADTIM", "0.126", "", "ms")
    assert rows[("SYSSTATS_MAIN", "MREADTIM")][2:] == ("0.254", "", "ms")
    assert rows[("SYSSTATS_MAIN", "MBRC")][2] == "15.96"
    assert rows[("SYSSTATS_MAIN", "MAXTHR")][2:] == ("720000000", "", "bytes/s")
    assert rows[("SYSSTATS_INFO", "STATUS")][3] == "COMPLETED"
    assert rows[("SYSSTATS_WALL", "SREADTIM")][2] == "0.139"
    assert rows[("SYSSTATS_ENGINE", "IO_COMBINE_LIMIT")][2] == "16"  # the engine's own settings, by its names
    assert "io_combine_limit 16, io_method worker" in stats.conditions()
    json.dumps(stats.to_dict())


def test_options_refused_before_anything_starts(tmp_path):
    ok = dict(engine_kind="postgres", dsn=None, rows=ROWS, apply=False, allow_server_changes=False, direct_io=None, single_reads=100,
              repeats=1, sessions=(2,), table=TABLE, out=None)
    check_options(**ok)
    cases = [
        ({"dsn": "host=x", "apply": True}, "--apply on a --dsn server changes its optimizer settings for everyone"),
        ({"engine_kind": "nope"}, "--engine: unknown engine 'nope'; accepted: "),
        ({"dsn": "host=x", "direct_io": True}, "--direct-io needs a server restart"),
        ({"rows": 100}, "--rows 100: too few to measure reads; give at least 5,000"),
        ({"single_reads": 0}, "--reads 0: must be at least 1"),
        ({"repeats": 0}, "--repeats 0: must be at least 1"),
        ({"table": "Bad-Name"}, "must be a lower-case SQL identifier"),
    ]
    for change, message in cases:
        with pytest.raises(SysstatsInputError, match=re.escape(message)):
            check_options(**{**ok, **change})
    check_options(**{**ok, "dsn": "host=x", "apply": True, "allow_server_changes": True})
    (tmp_path / "sysstats.json").write_text("{}")
    with pytest.raises(SysstatsInputError, match="already holds system statistics"):
        check_options(**{**ok, "out": tmp_path})


@pytest.mark.parametrize("kind", ["mariadb", "sqlite", "rocksdb"])
def test_an_engine_without_optimizer_costs_is_refused_with_its_dialects_reason(kind, cli_env):
    """The reason is the engine's own (its capabilities), said before anything starts: no engine, no directory."""
    why = engines.engine_class(kind).capabilities.why_not("sysstats")
    assert why  # each engine that has no sysstats dialect says why
    result = blocklab(["sysstats", "--engine", kind, "--rows", "60000"], cli_env, timeout=60)
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"--engine {kind}: system statistics are not gathered on {engines.engine_class(kind).display}: {why}" in " ".join(
        (result.stdout + result.stderr).split())
    assert not Path(cli_env["BLOCKLAB_RESULTS"]).exists()
    assert not list(Path(cli_env["BLOCKLAB_CACHE"]).glob(f"{kind}*"))  # no engine was provisioned


@pytest.mark.engine
def test_mariadbs_reason_is_what_its_server_says(cache_dir, pristine_mariadb):
    """MariaDB 10.11 has no disk cost variable to set (they came in 11.0): the reason its dialect states holds
    on blocklab's own mariadbd (the one a fresh clone has)."""
    from blocklab.engines.mariadb import MariadbEngine

    engine = MariadbEngine(cache_dir=pristine_mariadb(cache_dir / "sysstats-mariadb"))
    try:
        engine.start()
        version = engine.version_tuple()
        names = [str(row[0]) for row in engine.query("SHOW GLOBAL VARIABLES LIKE 'optimizer%'")]
    finally:
        engine.stop()
    assert version[:2] == (10, 11) and "optimizer_search_depth" in names  # the server answered the question asked
    assert [n for n in names if n.endswith("_cost")] == [], names  # 11.0's optimizer_disk_read_cost and kin
    assert "11.0" in engines.engine_class("mariadb").capabilities.why_not("sysstats")


def test_cli_refuses_apply_on_dsn_without_permission(cli_env):
    result = blocklab(["sysstats", "--dsn", "host=/nonexistent dbname=x", "--apply"], cli_env)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "add --allow-server-changes" in result.stderr
    assert not Path(cli_env["BLOCKLAB_RESULTS"]).exists()


# ---------------------------------------------------------------------- real engine
@pytest.fixture(scope="module")
def engine(cache_dir, pristine_postgres):
    """An embedded PostgreSQL of this file's own, with direct I/O and the scan table."""
    from blocklab.engines.postgres import PostgresEngine

    eng = PostgresEngine(cache_dir=pristine_postgres(cache_dir / "sysstats"))
    eng.start()
    try:
        eng.apply({"direct_io": True})
        ss.ensure_table(eng, TABLE, ROWS)
        yield eng
    finally:
        eng.stop()


def _server_io(engine) -> tuple[float, float, float]:
    """(reads, read_bytes, read_time ms) over all backends, from a connection of the test's own."""
    with engine.pg_connect(session=False) as conn:
        conn.execute("SELECT pg_stat_force_next_flush()")
        conn.execute("SELECT 1")
        row = conn.execute(
            "SELECT sum(reads), sum(read_bytes), sum(read_time) FROM pg_stat_io WHERE object = 'relation'"
        ).fetchone()
    return tuple(float(x) for x in row)


@pytest.mark.engine
def test_gather_on_embedded_postgres_with_direct_io(engine):
    stats = gather(engine, table=TABLE, rows=ROWS, single_reads=300, repeats=2, sessions=(2,), seed=3)
    assert stats.direct_io and stats.block_size == 8192
    assert stats.settings["io_combine_limit"] == "16"
    for value in (stats.sreadtim_ms, stats.mreadtim_ms, stats.mbrc, stats.maxthr_bytes_per_s,
                  stats.slavethr_bytes_per_s, stats.sreadtim_wall_ms, stats.mreadtim_wall_ms):
        assert value > 0
    # a large scan reads io_combine_limit blocks at a time
    assert 8 <= stats.mbrc <= 16
    assert stats.maxthr_bytes_per_s >= stats.throughput_by_sessions[1]
    assert set(stats.throughput_by_sessions) == {1, 2}
    assert stats.single_reads == 300
    sread = stats.phases[0]
    assert sread.name == "single_block" and sread.reads == 300  # direct I/O: every fetch one physical read
    assert sread.read_bytes == 300 * 8192
    assert all(p.cold_proven for p in stats.phases), [(p.name, p.cold_ratio) for p in stats.phases]
    # the implied cost is the formula on the gathered figures
    cost = random_page_cost(stats.sreadtim_ms, stats.mreadtim_ms, stats.mbrc)
    assert cost == pytest.approx(stats.sreadtim_ms / (stats.mreadtim_ms / stats.mbrc))
    assert stats.costs == {"seq_page_cost": 1.0, "random_page_cost": round(cost, 2)}


@pytest.mark.engine
def test_fewer_single_reads_than_asked_are_said_with_the_rows_that_would_allow_them(engine):
    from blocklab.features.sysstats import READ_SPACING, SilentReporter

    said = SilentReporter()
    nblocks = engine.relation_bytes(TABLE) // 8192
    stats = gather(engine, table=TABLE, rows=ROWS, single_reads=5000, repeats=1, sessions=(1,), seed=4, reporter=said)
    allowed = nblocks // READ_SPACING
    assert stats.single_reads == allowed < 5000
    line = next(x for x in said.lines if x.startswith("--reads 5,000:"))
    assert f"{allowed:,} single-block reads instead, the most a table of {nblocks:,} blocks allows" in line
    assert "--rows " in line and "would allow 5,000" in line


@pytest.mark.engine
def test_read_times_agree_with_pg_stat_io_averages(engine):
    """SREADTIM and MREADTIM against pg_stat_io read by the test itself around each phase. The test's
    window holds the phase's (its eviction, its warm-up read and a new session's catalog reads as well),
    so it asserts what a wider window can know: the phase's reads and read time are within the test's,
    and all but a handful of the test's reads are the phase's. (Comparing the two averages failed at a
    load of 4: the few reads outside the phase's window are cold first reads, slower than the rest.)"""
    nblocks = engine.relation_bytes(TABLE) // 8192
    engine.evict([TABLE])  # catalogs the eviction needs are warm before the window opens
    blocks = list(range(1, nblocks, 8))[:300]
    before = _server_io(engine)
    sread = ss.single_block_reads(engine, TABLE, blocks, warmup_block=0)
    after = _server_io(engine)
    reads, _, time_ms = (a - b for a, b in zip(after, before))
    _within(sread, reads, time_ms, at_least=len(blocks))
    assert sread.wall_ms_per_read > 0

    before = _server_io(engine)
    mread = ss.serial_scan(engine, TABLE, read_ahead=False)
    after = _server_io(engine)
    reads, read_bytes, time_ms = (a - b for a, b in zip(after, before))
    _within(mread, reads, time_ms, at_least=1)
    assert read_bytes / reads / 8192 >= 8
    assert mread.read_bytes / mread.reads / 8192 == pytest.approx(read_bytes / reads / 8192, rel=0.10)


def _within(phase, reads: float, time_ms: float, at_least: int) -> None:
    """The phase's pg_stat_io deltas inside the test's wider window of the same counters."""
    assert at_least <= phase.reads <= reads
    assert reads - phase.reads <= 20  # the warm-up block and catalogs, not a share of the phase
    # most of the window's read time is the phase's (its reads are all but 20 of the window's): a wrong
    # unit or column would be far off; the few cold reads outside it are slower, not 15 times all the rest
    assert 0.5 * time_ms <= phase.read_time_ms <= time_ms + 1e-6


@pytest.mark.engine
def test_apply_sets_random_page_cost_and_reads_it_back(engine):
    try:
        applied = apply_costs(engine, {"seq_page_cost": 1.0, "random_page_cost": 3.21})
        assert applied.confirmed
        assert applied.before["random_page_cost"] == "4"
        assert read_costs(engine, COSTS)["random_page_cost"] == "3.21"
    finally:
        with engine.pg_connect(session=False) as conn:
            conn.execute("ALTER SYSTEM RESET random_page_cost")
            conn.execute("ALTER SYSTEM RESET seq_page_cost")
            conn.execute("SELECT pg_reload_conf()")


@pytest.mark.engine
def test_cli_sysstats_prints_saves_and_applies_on_the_embedded_server(cli_env):
    from blocklab.engines.postgres import PostgresEngine

    args = ["sysstats", "--rows", "60000", "--reads", "200", "--repeats", "1", "--direct-io"]
    plain = blocklab(args, cli_env)
    assert plain.returncode == 0, plain.stdout + plain.stderr
    out = plain.stdout
    for name in ("SREADTIM", "MREADTIM", "MBRC", "MAXTHR", "SLAVETHR"):
        assert re.search(rf"SYSSTATS_MAIN\s+{name}\s+[0-9.]+\s+", out), name
    assert re.search(r"SYSSTATS_WALL\s+SREADTIM\s+[0-9.]+\s+ms", out)
    assert "ALTER SYSTEM SET seq_page_cost = 1;" in out
    assert "not applied. To apply:" in out and "blocklab sysstats --apply" in out
    saved = Path(re.search(r"saved: (\S+)", out).group(1))
    assert saved.parent == Path(cli_env["BLOCKLAB_RESULTS"]) and saved.name.startswith("sysstats-")
    doc = json.loads((saved / "sysstats.json").read_text())
    env = json.loads((saved / "environment.json").read_text())
    assert env["engine_version"].startswith("18") and env["dataset_rows"] == 60000
    assert doc["stats"]["sreadtim_ms"] > 0 and doc["applied"] is None
    assert [r["pname"] for r in doc["aux_stats"] if r["sname"] == "SYSSTATS_MAIN"] == [
        "SREADTIM", "MREADTIM", "MBRC", "MAXTHR", "SLAVETHR"]

    applied = blocklab([*args, "--apply"], cli_env)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    value = re.search(r"ALTER SYSTEM SET random_page_cost = ([0-9.]+);", applied.stdout).group(1)
    assert "applied on the embedded server" in applied.stdout
    assert f"random_page_cost 4 -> {value}" in applied.stdout
    # the server is stopped after the command; start it again and read the setting back
    eng = PostgresEngine(cache_dir=Path(cli_env["BLOCKLAB_CACHE"]))
    eng.start()
    try:
        assert float(read_costs(eng, COSTS)["random_page_cost"]) == pytest.approx(float(value))
    finally:
        eng.stop()


@pytest.mark.engine
def test_cli_sysstats_on_a_dsn_server_applies_only_when_allowed(engine, cli_env):
    dsn = engine.conninfo()
    try:
        result = blocklab(["sysstats", "--dsn", dsn, "--rows", str(ROWS), "--reads", "200", "--repeats", "1",
                           "--apply", "--allow-server-changes"], cli_env)
        assert result.returncode == 0, result.stdout + result.stderr
        value = re.search(r"ALTER SYSTEM SET random_page_cost = ([0-9.]+);", result.stdout).group(1)
        assert "applied on the --dsn server" in result.stdout
        assert float(read_costs(engine, COSTS)["random_page_cost"]) == pytest.approx(float(value))
    finally:
        with engine.pg_connect(session=False) as conn:
            conn.execute("ALTER SYSTEM RESET random_page_cost")
            conn.execute("ALTER SYSTEM RESET seq_page_cost")
            conn.execute("SELECT pg_reload_conf()")
