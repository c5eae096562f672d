"""Seed 003 (SLOB): the slob workload, its saturation/petal views and `blocklab calibrate`."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import pytest
from conftest import blocklab_bin, interrupt_mid_point

from blocklab.analysis.slob_view import points, saturation_points
from blocklab.engines.postgres.slob import rows_per_page
from blocklab.report.console_tables import slob_table
from blocklab.report.slob_plot import petal_figures
from blocklab.spec import DatasetSpec, SpecError, WorkloadSpec
from blocklab.workloads import make_workload


# ---------------------------------------------------------------- options
def test_update_pct_out_of_range_names_the_field():
    with pytest.raises(SpecError, match=r"workload\.update_pct: 150"):
        make_workload(WorkloadSpec(kind="slob", update_pct=150), DatasetSpec(rows=100), "postgres")


def test_zero_sessions_names_the_knob():
    with pytest.raises(SpecError, match=r"knobs\.workload\.sessions: 0"):
        make_workload(WorkloadSpec(kind="slob"), DatasetSpec(rows=100), "postgres", axis_values={"sessions": 0})


def test_work_unit_larger_than_scale_is_refused():
    with pytest.raises(SpecError, match="work_unit"):
        make_workload(WorkloadSpec(kind="slob", work_unit=50, scale=10), DatasetSpec(), "postgres")


def test_cli_plan_rejects_bad_update_pct(cli_env):
    proc = subprocess.run(
        [blocklab_bin(), "plan", "slob", "--quick", "--set", "workload.update_pct=150"],
        env=cli_env, capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stdout == "" and "workload.update_pct" in proc.stderr


# ---------------------------------------------------------------- workload on PostgreSQL
def _slob(**options):
    return make_workload(WorkloadSpec(kind="slob", **options), DatasetSpec(table="t_slob", rows=400), "postgres")


def test_one_row_per_heap_page(pg_engine):
    w = _slob(sessions=2)
    w.prepare(pg_engine)
    for table in w.tables():
        got = rows_per_page(pg_engine, table)
        assert got == {"pages": 400, "pages_with_rows": 400, "max_rows_per_page": 1}
    w.prepare(pg_engine)  # cheap the second time: same fingerprint, nothing rebuilt


def test_observed_update_share_and_metrics(pg_engine):
    from blocklab.probes.page_cache import resident_bytes

    w = _slob(sessions=2, update_pct=20, work_unit=4, run_time_s=3)
    w.prepare(pg_engine)
    # the state the disk assertion below needs, made and proven: neither shared buffers nor the
    # OS page cache holds the tables (a fresh clone's small tables would otherwise be cached)
    done = pg_engine.evict(w.relations())
    files = [f for r in w.relations() for f in pg_engine.relation_files(r)]
    resident, total = resident_bytes(files)
    assert done["os_drop_possible"] and total > 0 and resident == 0, (done, resident, total)
    assert pg_engine.cached_bytes(w.relations()) == 0
    m = w.run(pg_engine)
    # the share of updates is a binomial draw: within 4 standard deviations of 20% (and 3 points) at
    # however many iterations the machine's load allowed (2,000 give an sd of 0.9 points)
    assert m["iterations"] >= 200, m
    sd = 100 * (0.2 * 0.8 / m["iterations"]) ** 0.5
    assert abs(m["update_share"] * 100 - 20) <= max(3.0, 4 * sd), m
    for key in ("read_iops", "write_iops", "mb_per_s", "read_latency_ms", "ops_per_s", "cpu_busy_pct", "device_read_iops", "device_mb_per_s"):
        assert key in m and m[key] >= 0, key
    assert m["ops_per_s"] > 0
    assert 0 <= m["cpu_busy_pct"] <= 100
    assert w.describe(m).startswith("2 sessions, 20% updates: ")
    # second by second (probes/seconds.py): about one entry a second of the 3 s loop, from the data's disk
    t = w.series["t"]
    assert 2 <= len(t) <= 5 and t == sorted(t), w.series
    assert set(w.series) >= {"t", "device_read_iops", "device_mb_per_s", "device_read_latency_ms", "cpu_busy_pct"}
    assert all(len(v) == len(t) for v in w.series.values())
    assert sum(w.series["device_read_iops"]) > 0  # the loop's first reads of each page reach the disk: it began cold
    after = rows_per_page(pg_engine, w.tables()[0])
    # HOT updates keep one row per page; a page whose three spare versions fill up before pruning
    # frees them moves that row to a new page (a non-HOT update), so the table may grow a few pages
    assert 400 <= after["pages"] <= 420 and after["max_rows_per_page"] == 1, after


def test_shared_table_uses_one_table(pg_engine):
    w = _slob(sessions=3, shared_table=True, run_time_s=0.5)
    assert w.tables() == ["t_slob_1"] * 3
    w.prepare(pg_engine)
    m = w.run(pg_engine)
    assert m["update_share"] == 0 and m["iterations"] > 0


# ---------------------------------------------------------------- analysis
def _series(pct, data, bs=8192):
    return [
        {"sessions": s, "update_pct": pct, "block_size": bs, "read_iops": iops, "mb_per_s": iops * bs / 1e6,
         "read_latency_ms": lat, "ops_per_s": iops / 16, "cpu_busy_pct": 50}
        for s, iops, lat in data
    ]


SATURATING = [(1, 10_000, 0.07), (2, 19_000, 0.08), (4, 30_000, 0.10), (8, 31_000, 0.20), (16, 29_000, 0.45)]
RISING = [(1, 8_000, 0.07), (2, 15_000, 0.08), (4, 26_000, 0.1)]


def test_saturation_points_on_known_series():
    rows = _series(0, SATURATING) + _series(30, RISING)
    got = {s.update_pct: s for s in saturation_points(rows)}
    # 4 sessions: 30,000 is within 5 % of the highest (31,000 at 8); 8 and 16 sessions add no more
    assert (got[0].sessions, got[0].read_iops, got[0].stopped) == (4, 30_000, True)
    assert got[30].sessions == 4 and not got[30].stopped  # still rising: the last point


def test_saturation_boundary_and_noisy_dip():
    rows = _series(10, [(1, 100, 0.1), (2, 190, 0.1), (4, 199.5, 0.1)])
    assert saturation_points(rows)[0].sessions == 2  # exactly 5 % below the highest counts as saturated
    rows = _series(20, [(1, 10_000, 0.1), (2, 19_000, 0.1), (4, 18_000, 0.1), (8, 35_000, 0.2), (16, 36_000, 0.4)])
    (s,) = saturation_points(rows)
    assert (s.sessions, s.stopped) == (8, True)  # the dip at 4 sessions is not the saturation point


def test_repeats_reduce_to_median_and_block_sizes_split_series():
    rows = _series(0, [(1, 100, 0.1)]) + _series(0, [(1, 300, 0.3)]) + _series(0, [(1, 200, 0.2)])
    (pts,) = points(rows).values()
    assert pts[0].read_iops == 200 and pts[0].n == 3
    rows = _series(0, RISING, bs=8192) + _series(0, RISING, bs=16384)
    assert set(points(rows)) == {(0.0, 8192), (0.0, 16384)}
    # failed result rows are skipped
    assert points([{"status": "error", "metrics": {"sessions": 1, "read_iops": 1}}]) == {}


def test_petal_figures_and_table(tmp_path):
    rows = _series(0, SATURATING) + _series(30, RISING)
    a, b = petal_figures(rows, {"max_small_iops": 40_000, "max_mb_per_s": 400.0})
    for fig, name in ((a, "iops.png"), (b, "mb.png")):
        assert fig.axes[0].get_ylabel().startswith("read latency")
        fig.savefig(tmp_path / name)
        assert (tmp_path / name).stat().st_size > 10_000
    assert "IOPS" in a.axes[0].get_xlabel() and "MB/s" in b.axes[0].get_xlabel()
    assert any(line.get_linestyle() == "--" for line in a.axes[0].lines)  # the device limit
    assert slob_table(rows).row_count == len(SATURATING) + len(RISING)


def test_far_device_limit_is_written_not_drawn():
    rows = _series(0, SATURATING)
    a, _ = petal_figures(rows, {"max_small_iops": 310_000})  # 10x the busiest point: drawing it would squash the petal
    ax = a.axes[0]
    assert not any(line.get_linestyle() == "--" for line in ax.lines)
    assert ax.get_xlim()[1] < 40_000
    assert any("off scale" in t.get_text() and "10 %" in t.get_text() for t in ax.texts)


# ---------------------------------------------------------------- blocklab calibrate
def test_calibrate_cli_quick_run(cli_env, cache_dir, tmp_path):
    from blocklab.device.calibrate import load_calibration

    target = Path(tempfile.mkdtemp(prefix="cal-", dir=cache_dir))  # /var/tmp: a disk file system with O_DIRECT
    out = tmp_path / "cal"
    proc = subprocess.run(
        [blocklab_bin(), "calibrate", "--quick", "--dir", str(target), "--out", str(out)],
        env=cli_env, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Maximum small-I/O IOPS:" in proc.stdout and f"saved: {out}" in proc.stdout
    assert "[1/9] rand 8k qd1" in proc.stdout  # plain progress lines without a terminal
    cal = load_calibration(out)
    assert cal.complete and len(cal.points) == 9 and not cal.failures
    assert cal.summary.max_small_iops.value > 0
    assert list(target.iterdir()) == []  # the test file is gone


def test_calibrate_cli_bad_dir(cli_env, tmp_path):
    proc = subprocess.run(
        [blocklab_bin(), "calibrate", "--quick", "--dir", str(tmp_path / "missing")],
        env=cli_env, capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stdout == "" and "--dir" in proc.stderr


def test_interrupted_point_cancels_the_sessions_loops(pg_engine, ctrl_c_raises):
    import time

    w = _slob(sessions=2, run_time_s=3600)
    w.prepare(pg_engine)
    sessions = "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'blocklab slob' AND pid <> pg_backend_pid()"

    def stop():
        return pg_engine.query("SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'blocklab slob'")

    assert interrupt_mid_point(lambda: w.run(pg_engine), stop), "the run did not cancel its sessions' loops"
    busy = 1
    for _ in range(50):  # the cancelled backends exit on their own schedule
        busy = pg_engine.query(sessions)[0][0]
        if busy == 0:
            break
        time.sleep(0.1)
    assert busy == 0


def test_a_session_that_reaches_its_statement_after_the_interrupt_is_cancelled_too(ctrl_c_raises):
    """Seen hanging a whole suite: Ctrl-C came while a session, released by the barrier,
    had not yet sent its hour-long loop (a loaded machine); the one cancel found nothing
    to stop, the loop then ran. run_together now cancels again until every session ends."""
    import threading
    import time

    from blocklab.workloads.together import run_together

    running = [threading.Event(), threading.Event()]
    stop = [threading.Event(), threading.Event()]

    def session(i: int) -> int:
        if i == 1:
            time.sleep(3.0)  # reaches its statement a second after the Ctrl-C (at 2 s)
        running[i].set()
        stop[i].wait(3600)  # the server's loop: ends only when cancelled while it runs
        return i

    def cancel(i: int) -> None:
        if running[i].is_set():  # a cancel finds only a statement that is running
            stop[i].set()

    def watchdog() -> None:
        for event in stop:
            event.set()

    in_time = interrupt_mid_point(lambda: run_together(2, session, "test-late", cancel=cancel), watchdog)
    late_one_cancelled = stop[1].is_set()
    watchdog()  # release a session left running, so that the test fails instead of hanging
    assert in_time and late_one_cancelled, "a session that started its statement after the interrupt ran on"
