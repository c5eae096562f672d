"""The slob workload on a private MariaDB instance (seed 003's block-size axis)."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import pytest
from conftest import blocklab_bin, interrupt_mid_point

from blocklab.engines.base import KnobError
from blocklab.engines.mariadb import MariadbEngine
from blocklab.engines.mariadb.knobs import min_buffer_pool_bytes
from blocklab.engines.mariadb.slob import rows_per_page
from blocklab.spec import DatasetSpec, WorkloadSpec
from blocklab.workloads import make_workload

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def maria(cache_dir, pristine_mariadb):
    engine = MariadbEngine(cache_dir=pristine_mariadb(cache_dir / "mariadb-slob", 16384, 4096))
    engine.start()
    engine.apply({"block_size": 4096, "buffer_cache": "2MB"})
    yield engine
    engine.stop()


def _slob(**options):
    return make_workload(WorkloadSpec(kind="slob", **options), DatasetSpec(table="t_slob", rows=3000), "mariadb")


def test_table_keys_are_a_permutation_and_rows_a_few_per_page(maria):
    w = _slob(sessions=2)
    w.prepare(maria)
    for table in w.tables():
        got = rows_per_page(maria, table)
        assert got["rows"] == 3000
        assert 2.0 <= got["rows_per_page"] <= 3.5, got  # 1 kB rows in 4 kB pages
        ids = maria.query(f"SELECT COUNT(DISTINCT id), MIN(id), MAX(id) FROM `{table}`")[0]
        assert tuple(int(x) for x in ids) == (3000, 1, 3000)
        # the key is not the clustering order: neighbouring ids live far apart
        spread = maria.query(f"SELECT AVG(ABS(a.pk - b.pk)) FROM `{table}` a JOIN `{table}` b ON b.id = a.id + 1")[0][0]
        assert float(spread) > 300, spread
    comment = maria.query("SELECT TABLE_COMMENT FROM information_schema.TABLES WHERE TABLE_NAME = 't_slob_1'")[0][0]
    w.prepare(maria)  # cheap the second time: same fingerprint, nothing rebuilt
    assert maria.query("SELECT TABLE_COMMENT FROM information_schema.TABLES WHERE TABLE_NAME = 't_slob_1'")[0][0] == comment


def test_each_key_of_a_range_is_a_physical_page_read(maria):
    w = _slob(sessions=2, update_pct=25, work_unit=8, run_time_s=2)
    w.prepare(maria)
    m = w.run(maria)
    n = m["iterations"]
    assert n >= 200, m  # ~1,000 on a quiet machine; fewer when the CPUs are shared
    assert abs(m["update_share"] - 0.25) <= 4 * math.sqrt(0.25 * 0.75 / n), m  # 4 standard deviations
    # a 2 MB pool against two ~4 MB tables: most of the 8 pages of a range are read from disk
    assert 4 <= m["reads_per_iteration"] <= 12, m
    assert m["block_size"] == 4096
    assert m["read_latency_ms"] > 0 and m["write_iops"] > 0
    # performance_schema's data-file reads are the buffer pool's page reads (plus a rare system page)
    assert m["innodb.buffer_pool_reads"] == pytest.approx(m["reads"], rel=0.01)
    assert m["data_file.reads"] == m["reads"] and m["data_file.read_s"] * 1000 / m["reads"] == pytest.approx(m["read_latency_ms"])
    assert w.describe(m).startswith("2 sessions, 25% updates: ")


def test_buffer_pool_too_small_for_the_page_size_is_refused(maria):
    assert min_buffer_pool_bytes(32768) == 11 * 1024 * 1024
    with pytest.raises(KnobError, match=r"buffer_cache.*too small for 32 kB pages.*at least 11 MiB"):
        maria.check_settings({"block_size": 32768, "buffer_cache": "8MB"})
    maria.check_settings({"block_size": 32768, "buffer_cache": "11MB"})


def test_cli_refuses_a_pool_too_small_before_anything_runs(cli_env, tmp_path, pristine_mariadb):
    pristine_mariadb(Path(cli_env["BLOCKLAB_CACHE"]))
    proc = subprocess.run(
        [blocklab_bin(), "run", "slob", "--engine", "mariadb", "--quick", "--set", "buffer_cache=8MB", "--out", str(tmp_path / "r")],
        env=cli_env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stdout == "" and "too small for 32 kB pages" in proc.stderr
    assert not (tmp_path / "r" / "results.jsonl").exists()


def test_cli_quick_run_draws_one_series_per_update_share_and_block_size(cli_env, tmp_path, pristine_mariadb):
    pristine_mariadb(Path(cli_env["BLOCKLAB_CACHE"]), 16384, 4096, 32768)  # the catalog's and the two swept
    from blocklab.analysis.slob_view import points
    from blocklab.results import RunDir

    out = tmp_path / "run"
    proc = subprocess.run(
        [blocklab_bin(), "run", "slob", "--engine", "mariadb", "--quick", "--rows", "3000",
         "--set", "workload.run_time_s=1", "--repeats", "1", "--out", str(out)],
        env=cli_env, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = RunDir(out).rows()
    assert len(rows) == 8 and all(r.status == "ok" for r in rows)
    assert {r.applied["block_size"] for r in rows} == {"4096", "32768"}
    assert set(points(rows)) == {(0.0, 4096), (0.0, 32768), (30.0, 4096), (30.0, 32768)}
    assert "0% updates, 32k blocks" in proc.stdout
    # the load (sessions, update share) is never ranked; the page size is, within each load level (issue 30)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["load"] == {"axes": ["workload.sessions", "workload.update_pct"], "knobs": ["block_size"]}
    assert summary["verdict"].startswith("Best block_size at each load level: ") and "workload.sessions" not in summary["verdict"]
    assert summary["verdict"] in proc.stdout
    for name in ("slob-latency-iops.png", "slob-latency-mbps.png"):
        assert (out / "plots" / name).stat().st_size > 10_000


def test_interrupted_point_kills_the_sessions_loops(maria, ctrl_c_raises):
    import time

    w = _slob(sessions=2, run_time_s=3600)
    w.prepare(maria)
    # inside the procedure PROCESSLIST shows the statement it runs, not the CALL: every query but our own
    running = "SELECT ID FROM information_schema.PROCESSLIST WHERE COMMAND = 'Query' AND ID <> CONNECTION_ID()"

    def stop() -> None:
        for (pid,) in maria.query(running):
            maria.query(f"KILL QUERY {int(pid)}")

    assert interrupt_mid_point(lambda: w.run(maria), stop), "the run did not kill its sessions' loops"
    calls = 1
    for _ in range(50):  # the killed statements end on their own schedule
        calls = len(maria.query(running))
        if calls == 0:
            break
        time.sleep(0.1)
    assert calls == 0


def test_a_small_pool_swept_with_small_pages_is_accepted(cache_dir):
    # 2 MB suits 4k pages only: judged per whole setting, not against the instance's current 16k
    from blocklab.experiment import prepare
    from blocklab.spec import spec_from_dict

    raw = {"engine": {"kind": "mariadb"}, "dataset": {"rows": 1000}, "workload": {"kind": "full_scan"},
           "knobs": {"block_size": [4096], "buffer_cache": ["2MB", "8MB"]}, "measure": {"repeats": 1}}
    exp = prepare(spec_from_dict(raw, "t", {}), "", "t", cache_dir=cache_dir / "mariadb-slob")
    exp.engine.stop()
    assert exp.knobs["buffer_cache"] == [2 * 1024 * 1024, 8 * 1024 * 1024]
    raw["knobs"]["block_size"] = [4096, 16384]
    with pytest.raises(Exception, match="too small for 16 kB pages"):
        prepare(spec_from_dict(raw, "t", {}), "", "t", cache_dir=cache_dir / "mariadb-slob")
