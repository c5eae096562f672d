"""A cell counts only when its claims were checked by a second source in the
same run: each failing path driven on a real engine, and its outcome asserted
(invalid, kept with its evidence, out of the summary, measured once more)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from psycopg import sql

from blocklab.engines.postgres import PostgresEngine
from blocklab.experiment import prepare
from blocklab.results import RunDir
from blocklab.runner import SilentReporter, run
from blocklab.spec import SpecError, spec_from_dict

pytestmark = pytest.mark.engine

ROWS = 200_000  # ~10 MB: a scan reads ~80 combined reads


def _experiment(tmp_path: Path, cache_dir: Path, *, knobs: dict, settings: dict | None = None, cache: str = "cold", repeats: int = 1):
    raw = {
        "name": "claims",
        "engine": {"kind": "postgres", "settings": settings or {}},
        "dataset": {"rows": ROWS},
        "workload": {"kind": "full_scan"},
        "knobs": knobs,
        "measure": {"repeats": repeats, "cache": cache, "seed": 5},
    }
    return prepare(spec_from_dict(raw, "test", {}), "# test", "test", cache_dir=cache_dir)


def _fill_os_cache(paths: list[Path]) -> None:
    for path in paths:
        with open(path, "rb") as f:
            while f.read(1 << 20):
                pass


def test_a_cold_cell_whose_relation_stayed_cached_is_invalid_and_measured_again(tmp_path, cache_dir, monkeypatch):
    exp = _experiment(tmp_path, cache_dir / "claims-cold", knobs={"multiblock_read": [16]})
    real_evict = PostgresEngine.evict
    calls = {"n": 0}

    def evict_then_warm(self, relations):  # the first eviction is undone: the table read back into the OS cache
        done = real_evict(self, relations)
        calls["n"] += 1
        if calls["n"] == 1:
            _fill_os_cache([f for r in relations for f in self.relation_files(r)])
        return done

    monkeypatch.setattr(PostgresEngine, "evict", evict_then_warm)
    run_dir = RunDir(tmp_path / "run")
    summary = run(exp, run_dir, SilentReporter())
    rows = run_dir.rows()
    assert [r.status.split(":")[0] for r in rows] == ["invalid", "ok"], [r.status for r in rows]  # re-measured once
    bad, good = rows
    assert bad.cell_id == good.cell_id and good.notes["attempt"] == 2
    assert "cold cache not proven" in bad.status and "OS page cache" in bad.status
    assert bad.notes["checks"]["cold_os_resident_bytes"] > 0.5 * bad.notes["checks"]["cold_file_bytes"]  # the evidence kept
    assert bad.metrics["rows"] == ROWS  # measured, kept, not counted
    assert summary["cells_invalid"] == 1 and "cold cache not proven" in summary["invalid_cells"][0]["why"]
    assert summary["settings"]["multiblock_read=16"]["n"] == 1  # only the valid row in the statistics
    assert good.notes["checks"]["cold_os_resident_bytes"] <= 0.01 * good.notes["checks"]["cold_file_bytes"]
    html = (run_dir.path / "report.html").read_text()
    assert "1 cell(s) invalid" in html and "cold cache not proven" in html


def test_a_cold_cell_whose_relation_stayed_in_shared_buffers_is_invalid(tmp_path, cache_dir, monkeypatch):
    exp = _experiment(tmp_path, cache_dir / "claims-cold", knobs={"multiblock_read": [16]})
    real_evict = PostgresEngine.evict
    seen: dict[str, float] = {}

    def evict_then_read_into_shared_buffers(self, relations):
        done = real_evict(self, relations)
        if not seen:  # a 10 MB table is read through shared buffers (no ring below a quarter of them)
            with self.pg_connect() as conn:
                conn.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(relations[0])))
            seen["view"] = float(self.query(
                "SELECT count(*) * current_setting('block_size')::bigint FROM pg_buffercache "
                "WHERE relfilenode = pg_relation_filenode(%s::regclass) "
                "AND reldatabase = (SELECT oid FROM pg_database WHERE datname = current_database())", (relations[0],))[0][0])
        return done

    monkeypatch.setattr(PostgresEngine, "evict", evict_then_read_into_shared_buffers)
    run_dir = RunDir(tmp_path / "run")
    run(exp, run_dir, SilentReporter())
    bad, good = run_dir.rows()
    assert bad.status.startswith("invalid") and "still in the engine's cache" in bad.status, bad.status
    # the count the check made (pg_buffercache_evict_relation on 18) is the pg_buffercache view's
    assert bad.notes["checks"]["cold_engine_cached_bytes"] == seen["view"] > 0.5 * bad.metrics["relation_bytes"]
    assert good.status == "ok" and good.notes["checks"]["cold_engine_cached_bytes"] == 0


def test_a_knob_that_did_not_take_is_invalid_with_both_values(tmp_path, cache_dir, monkeypatch):
    exp = _experiment(tmp_path, cache_dir / "claims-knob", knobs={"multiblock_read": [4]}, cache="warm")
    real_apply = PostgresEngine.apply

    def apply_without_the_knob(self, settings):  # a knob silently lost on its way to the server
        real_apply(self, {k: v for k, v in settings.items() if k != "multiblock_read"})
        return {k: "4" for k in settings}  # ... while apply() claims it took

    monkeypatch.setattr(PostgresEngine, "apply", apply_without_the_knob)
    run_dir = RunDir(tmp_path / "run")
    summary = run(exp, run_dir, SilentReporter())
    rows = run_dir.rows()
    assert len(rows) == 2 and all(r.invalid for r in rows)  # measured again, still wrong: both kept, none counted
    assert "multiblock_read asked 4, PostgreSQL reports '16'" in rows[0].status, rows[0].status
    assert summary["cells_invalid"] == 2 and summary.get("best_label") is None


def test_io_combine_limit_above_its_ceiling_is_refused_in_validation(tmp_path, cache_dir):
    with pytest.raises(SpecError, match=r"exceeds io_max_combine_limit = 16 blocks"):
        _experiment(tmp_path, cache_dir / "claims-cap", knobs={"multiblock_read": [32]}, settings={"pg.io_max_combine_limit": 16})


def test_a_direct_io_claim_that_did_not_take_effect_is_caught(tmp_path, cache_dir, monkeypatch):
    exp = _experiment(tmp_path, cache_dir / "claims-direct", knobs={"multiblock_read": [16]}, settings={"direct_io": False})
    monkeypatch.setattr(PostgresEngine, "direct_io_active", lambda self: True)  # configured, not in effect
    run_dir = RunDir(tmp_path / "run")
    run(exp, run_dir, SilentReporter())
    rows = run_dir.rows()
    assert rows and all(r.invalid for r in rows), [r.status for r in rows]
    assert "direct I/O claimed, but" in rows[0].status and "in the OS page cache after the run" in rows[0].status
    assert rows[0].notes["checks"]["direct_io_proof"].endswith("mincore")


def test_direct_io_proven_from_the_kernel_when_it_is_on(tmp_path, cache_dir):
    exp = _experiment(tmp_path, cache_dir / "claims-direct-on", knobs={"multiblock_read": [16]}, settings={"direct_io": True})
    run_dir = RunDir(tmp_path / "run")
    summary = run(exp, run_dir, SilentReporter())
    (row,) = run_dir.rows()
    assert row.ok, row.status
    checks = row.notes["checks"]
    assert "mincore" in checks["direct_io_proof"] and checks["direct_io_resident_bytes"] <= 0.05 * checks["cold_file_bytes"]
    assert checks["settings_checked"] >= 2 and summary["cells_invalid"] == 0
    assert row.metrics["proc_read_bytes"] >= 0.9 * row.metrics["relation_bytes"]  # the server's own reads, from /proc
    assert row.metrics["mb_per_s"] == pytest.approx(row.metrics["read_bytes"] / row.metrics["elapsed_s"] / 1e6)


def test_mariadb_dsn_with_a_cold_cache_is_refused_before_anything_runs(cache_dir, pristine_mariadb):
    from blocklab.engines.mariadb import MariadbEngine

    private = MariadbEngine(cache_dir=pristine_mariadb(cache_dir / "claims-maria"))
    private.start()
    try:
        raw = {
            "engine": {"kind": "mariadb", "dsn": f"mysql://root@localhost?socket={private.socket_path}"},
            "workload": {"kind": "full_scan"},
            "knobs": {"multiblock_read": [8, 56]},
            "measure": {"cache": "cold"},
        }
        before = private.query("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'blocklab'")
        with pytest.raises(SpecError, match=r"measure.cache = 'cold' is not possible here: InnoDB's buffer pool empties only with a restart.*cache = 'warm'"):
            prepare(spec_from_dict(raw, "test", {}), "", "test")
        assert private.query("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'blocklab'") == before
    finally:
        private.stop()


def test_another_reader_of_the_disk_is_flagged_not_counted_as_the_engines(tmp_path, cache_dir, monkeypatch):
    """Device reads that are not the server's (/proc/<pid>/io) are recorded and flag the cell."""
    import subprocess

    from blocklab.engines.postgres.scan import ScanTables

    exp = _experiment(tmp_path, cache_dir / "claims-noise", knobs={"multiblock_read": [16]}, settings={"direct_io": True})
    noise = Path(str(cache_dir)) / "noise.bin"  # on the data directory's disk (the test's /tmp may be another)
    noise.write_bytes(os.urandom(32 << 20))
    real_count = ScanTables.count_rows

    def count_beside_a_neighbour(self, session, table):  # another process reads 32 MB of the disk inside the cell
        subprocess.run(["dd", f"if={noise}", "of=/dev/null", "bs=1M", "iflag=direct"], check=True, capture_output=True)
        return real_count(self, session, table)

    monkeypatch.setattr(ScanTables, "count_rows", count_beside_a_neighbour)
    run_dir = RunDir(tmp_path / "run")
    try:
        run(exp, run_dir, SilentReporter())
    finally:
        noise.unlink()
    (row,) = run_dir.rows()
    assert row.ok, row.status  # direct I/O: the cold proof did not lean on the device's counters
    assert row.metrics["other_device_read_bytes"] >= 30e6
    assert row.metrics["proc_read_bytes"] < row.metrics["device_read_bytes"] - 30e6  # the server's own reads exclude dd's
    assert any(f.startswith("noisy device") for f in row.notes["flags"]), row.notes
