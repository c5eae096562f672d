"""The wait sampler, pg_stat_io by process type, the `update` workload and the
profile views, on a real embedded PostgreSQL 18 of this module's own."""

from __future__ import annotations

import threading

import pytest

from blocklab.engines.postgres.waits import WaitSampler, classify
from blocklab.probes.profile import CPU, TOTAL, UNACCOUNTED, SessionProfile, sum_profiles

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def engine(cache_dir, pristine_postgres):
    from blocklab.engines.postgres import PostgresEngine

    eng = PostgresEngine(cache_dir=pristine_postgres(cache_dir / "waits"))
    eng.start()
    yield eng
    eng.stop()


def _profile_one(engine, sql: str, before=None, after=None, interval: float = 0.01) -> SessionProfile:
    """Run `sql` in one session under the sampler; its profile."""
    with engine.pg_connect() as conn:
        pid = conn.info.backend_pid
        with WaitSampler(engine, [pid], interval=interval) as sampler:
            if before:
                before()
            sampler.begin(pid)
            conn.execute(sql)
            sampler.end(pid)
            if after:
                after()
    profile = sampler.profile()
    _GAPS[profile.sessions[pid].pid] = profile.max_gap_s
    return profile.sessions[pid]


_GAPS: dict[int, float] = {}  # session pid -> the longest gap between its sampler's samples


def _adds_up(p: SessionProfile, tolerance: float = 0.05) -> None:
    parts = p.parts()
    assert sum(parts.values()) == pytest.approx(p.elapsed_s, rel=1e-9)
    # unaccounted: the window's end after the last sample, at most the longest gap, which a loaded
    # machine lengthens for the nice-19 sampler (5.9% of 0.86 s was seen beside a second test worker)
    allowed = max(tolerance * p.elapsed_s, _GAPS.get(p.pid, 0.0) + 0.005)
    assert abs(p.unaccounted_s) <= allowed, (p.to_dict(), _GAPS.get(p.pid))


# ---------------------------------------------------------------------- sessions on a real server
def test_sleeping_session_is_pg_sleep(engine):
    p = _profile_one(engine, "SELECT pg_sleep(0.8)")
    assert 0.79 <= p.elapsed_s <= 0.8 + 1.0  # the sleep, and whatever a loaded machine adds around it
    assert p.waits.get("Timeout:PgSleep", 0.0) >= 0.85 * p.elapsed_s, p.to_dict()
    assert p.cpu_s <= 0.05 * p.elapsed_s
    _adds_up(p)
    assert p.rows()[0] == (TOTAL, p.elapsed_s)
    assert p.rows()[1][0] == "Timeout:PgSleep"


def test_cpu_loop_is_cpu(engine):
    loop = """DO $$
        DECLARE stop timestamptz := clock_timestamp() + interval '800 milliseconds'; x float8 := 0;
        BEGIN WHILE clock_timestamp() < stop LOOP x := x + sqrt(random()); END LOOP; END $$"""
    p = _profile_one(engine, loop)
    assert p.cpu_s >= 0.85 * p.elapsed_s, p.to_dict()
    _adds_up(p)
    # the cross-check: /proc says the backend was on a CPU or queued for one
    assert p.cpu_measured_s is not None and p.cpu_source in ("schedstat", "stat")
    on_or_queued = p.cpu_measured_s + (p.runqueue_s or 0.0)
    assert on_or_queued >= 0.8 * p.cpu_s, p.to_dict()
    assert p.cpu_stat_s is not None and p.cpu_stat_s == pytest.approx(p.cpu_measured_s, abs=0.05)


def test_row_lock_wait_is_a_lock_event(engine):
    engine.query("DROP TABLE IF EXISTS waits_lock")
    engine.query("CREATE TABLE waits_lock (id int PRIMARY KEY, v int)")
    engine.query("INSERT INTO waits_lock VALUES (1, 0)")
    holder = engine.pg_connect(autocommit=False)
    try:
        holder.execute("UPDATE waits_lock SET v = v + 1 WHERE id = 1")
        release = threading.Timer(0.8, holder.commit)
        release.start()
        p = _profile_one(engine, "UPDATE waits_lock SET v = v + 1 WHERE id = 1")
        release.join()
    finally:
        holder.close()
    lock = p.waits.get("Lock:transactionid", 0.0) + p.waits.get("Lock:tuple", 0.0)
    assert lock >= 0.85 * p.elapsed_s, p.to_dict()
    assert p.elapsed_s == pytest.approx(0.8, abs=0.2)
    _adds_up(p)


def test_sessions_without_windows_cover_the_sampler_life(engine):
    with engine.pg_connect() as a, engine.pg_connect() as b:
        pids = [a.info.backend_pid, b.info.backend_pid]
        with WaitSampler(engine, pids, interval=0.01) as sampler:
            t = threading.Thread(target=a.execute, args=("SELECT pg_sleep(0.4)",))
            t.start()
            b.execute("SELECT pg_sleep(0.4)")
            t.join()
    profile = sampler.profile()
    # how often a nice-19 thread gets to sample depends on the machine's load (25 ticks in 0.4 s were seen
    # beside a second test worker): assert what holds at any load, the gaps' sum within the sampler's life
    assert profile.ticks >= 2 and profile.mean_gap_s >= 0.005
    assert profile.mean_gap_s * (profile.ticks - 1) <= profile.sampler_s
    for pid in pids:
        p = profile.sessions[pid]
        assert p.elapsed_s == pytest.approx(profile.sampler_s, rel=1e-6)
        # each sample weighs the real gap before it: at most one gap at each edge of the sleep goes elsewhere
        assert p.waits.get("Timeout:PgSleep", 0.0) >= 0.4 - 2 * profile.max_gap_s - 0.02
    metrics = profile.metrics()
    assert metrics["profile.sessions"] == 2
    assert metrics["profile.total.total_s"] == pytest.approx(2 * profile.sampler_s, rel=1e-6)


# ---------------------------------------------------------------------- the update workload
def test_update_workload_profile_adds_up(engine):
    from blocklab.spec import DatasetSpec
    from blocklab.workloads.update import Update, UpdateOptions

    engine.apply({"buffer_cache": 256, "pg.max_wal_size": 4096, "pg.checkpoint_timeout": 3600})  # 2 MB of buffers
    workload = Update(UpdateOptions(sessions=2), DatasetSpec(table="waits_upd", rows=100_000))
    assert workload.ranges() == [(1, 50_000), (50_001, 100_000)]
    runs = []
    for _ in range(2):
        workload.prepare(engine)
        engine.evict(workload.relations())
        runs.append(workload.run(engine))
    for m in runs:
        assert m["rows"] == 100_000
        assert m["sessions"] == 2 and m["profile.sessions"] == 2
        assert m["elapsed_s"] == pytest.approx(m["profile.slowest.total_s"], rel=1e-9)
        for scope in ("slowest", "total"):
            waits = sum(v for k, v in m.items() if k.startswith(f"profile.{scope}.wait."))
            parts = waits + m[f"profile.{scope}.cpu_s"] + m[f"profile.{scope}.unaccounted_s"]
            total = m[f"profile.{scope}.total_s"]
            assert parts == pytest.approx(total, rel=1e-6)
            # within 5%, or within two of the sampler's ticks per session: on this 0.2 s run one 10 ms
            # tick is already 5%, a granularity no sampler can beat (the claims flag such a cell)
            ticks = 2 * m["profile.interval_ms"] / 1000 * (m["profile.sessions"] if scope == "total" else 1)
            allowed = max(0.05 * total, ticks)
            assert abs(m[f"profile.{scope}.unaccounted_s"]) <= allowed, {k: v for k, v in m.items() if k.startswith("profile")}
        # the cache is 2 MB, the pages updated ~36 MB: the sessions clean buffers themselves
        assert m["cache_ratio"] >= 10
        assert m["backend_writes"] > 0 and m["io.client_backend.writes"] == m["backend_writes"]
        assert 0 < m["backend_write_share"] <= 1
        # cells stay comparable: every update HOT, the table does not grow
        assert m["hot_share"] == pytest.approx(1.0)
        assert m["table_growth_bytes"] == 0
    assert runs[0]["table_bytes"] == runs[1]["table_bytes"]
    assert "slowest of 2" in workload.describe(runs[0])


def test_update_options_checked_against_the_table():
    from blocklab.spec import DatasetSpec, SpecError
    from blocklab.workloads.update import Update, UpdateOptions

    with pytest.raises(SpecError, match="more than the table"):
        Update(UpdateOptions(sessions=4, rows_per_session=100), DatasetSpec(table="t", rows=399))
    assert Update(UpdateOptions(sessions=15), DatasetSpec(table="t", rows=1_000)).rows_per_session == 66


# ---------------------------------------------------------------------- arithmetic and views (no server)
def test_classify():
    assert classify("active", None, None) == CPU
    assert classify("active", "IO", "DataFileRead") == "IO:DataFileRead"
    assert classify("idle", "Client", "ClientRead") == "Client:ClientRead"
    assert classify(None, None, None) is None


def test_sum_and_flatten_round_trip():
    from blocklab.probes.profile import flatten_profile, unflatten_profile

    a = SessionProfile(1, 10.0, {"IO:DataFileWrite": 6.0}, cpu_s=3.0, cpu_measured_s=1.0, runqueue_s=2.0)
    b = SessionProfile(2, 8.0, {"IO:DataFileWrite": 2.0, "LWLock:WALInsert": 5.0}, cpu_s=0.5, cpu_measured_s=0.4, runqueue_s=0.1)
    t = sum_profiles([a, b])
    assert t.elapsed_s == 18.0 and t.waits == {"IO:DataFileWrite": 8.0, "LWLock:WALInsert": 5.0}
    assert t.unaccounted_s == pytest.approx(1.5) and t.cpu_measured_s == pytest.approx(1.4)
    back = unflatten_profile(flatten_profile(t, "p"), "p")
    assert back.parts() == pytest.approx(t.parts())
    assert [name for name, _ in a.rows()] == [TOTAL, "IO:DataFileWrite", CPU, UNACCOUNTED]


def _fake_rows():
    from blocklab.probes.profile import flatten_profile
    from blocklab.results import ResultRow

    rows = []
    for i, (direct, write_s) in enumerate([(False, 1.0), (True, 6.0), (False, 1.2), (True, 5.0)]):
        slow = SessionProfile(1, 2.0 + write_s, {"IO:DataFileWrite": write_s, "LWLock:WALInsert": 1.5}, cpu_s=0.4)
        metrics = {"elapsed_s": slow.elapsed_s, "backend_writes": 100.0, "backend_write_share": 0.9}
        metrics.update(flatten_profile(slow, "profile.slowest"))
        metrics.update(flatten_profile(sum_profiles([slow, slow]), "profile.total"))
        rows.append(ResultRow(cell=i, block=i // 2, settings={"writers": 3, "direct_io": direct}, applied={}, metrics=metrics))
    return rows


def test_profile_tables_and_figure():
    from rich.console import Console

    from blocklab.engines import capabilities_of
    from blocklab.probes.profile_view import setting_profiles
    from blocklab.report.console_tables import profile_tables
    from blocklab.report.profile_plot import method_caption, profile_figure

    rows = _fake_rows()
    profiles = setting_profiles(rows)
    assert [p.runs for p in profiles] == [2, 2]
    on = next(p for p in profiles if p.settings["direct_io"])
    assert on.slowest.waits["IO:DataFileWrite"] == pytest.approx(5.5)
    assert sum(on.total.parts().values()) == pytest.approx(on.total.elapsed_s)

    tables = profile_tables(rows, capabilities=capabilities_of("postgres"))  # the rows' keys are PostgreSQL's
    assert len(tables) == 2
    console = Console(width=100, record=True)
    for table in tables:
        console.print(table)
    text = console.export_text()
    for word in ("TIMESOURCE", "TOTAL_TIME", "IO:DataFileWrite", "CPU", "UNACCOUNTED_TIME", "direct_io=on", "backend writes"):
        assert word in text
    assert "writers=3" not in text  # knobs every setting shares are left out of the titles
    assert profile_tables({"metric": "elapsed_s"}) == []
    # the captions are the engine's words, asked of its capabilities, never guessed from the rows' keys
    console = Console(width=100, record=True)
    console.print(profile_tables(rows, capabilities=capabilities_of("mariadb"))[0])
    text = console.export_text()
    assert "performance_schema" in text and "backend writes" not in text and "sampled" not in text
    assert "sampling" in method_caption(profiles, capabilities_of("postgres"))
    assert "performance_schema" in method_caption(profiles, capabilities_of("mariadb"))
    assert "does not say" in method_caption(profiles, capabilities_of("no-such-engine"))

    fig = profile_figure(rows)
    assert len(fig.axes) == 2
    assert profile_figure([]) is None
