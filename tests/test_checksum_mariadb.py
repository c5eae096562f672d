"""The checksum experiment on MariaDB/InnoDB: the recipe's mariadb variant through
the CLI (page size x innodb_checksum_algorithm x index, every knob read back),
and the tablespace format of tables the workloads create after a switch."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import blocklab_bin

from blocklab.spec import DatasetSpec, WorkloadSpec
from blocklab.workloads import make_workload

pytestmark = pytest.mark.engine


def test_quick_run_mariadb_applies_page_size_and_checksum(cli_env, pristine_mariadb):
    pristine_mariadb(Path(cli_env["BLOCKLAB_CACHE"]), 16384, 4096)
    out = subprocess.run(
        [blocklab_bin(), "run", "checksum", "--engine", "mariadb", "--quick", "--repeats", "1",
         "--set", "block_size=4096,16384", "--set", "checksum=crc32,full_crc32"],
        env=cli_env, capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "FAILED" not in out.stdout, out.stdout
    results = list(Path(cli_env["BLOCKLAB_RESULTS"]).glob("*/results.jsonl"))
    assert len(results) == 1, results
    rows = [json.loads(line) for line in results[0].read_text().splitlines()]
    assert len(rows) == 8  # 2 page sizes x 2 algorithms x index
    asked = {(r["settings"]["block_size"], r["settings"]["checksum"], r["settings"]["workload.index"]) for r in rows}
    assert asked == {(b, c, i) for b in (4096, 16384) for c in ("crc32", "full_crc32") for i in (False, True)}
    for r in rows:
        s, a = r["settings"], r["applied"]
        assert r["status"] == "ok", r["status"]
        assert a["block_size"] == str(s["block_size"])  # @@innodb_page_size
        assert a["checksum"] == s["checksum"]  # @@innodb_checksum_algorithm
        assert r["metrics"]["rows"] == 30_000 and r["metrics"]["elapsed_s"] > 0
        assert r["metrics"]["index"] == (1.0 if s["workload.index"] else 0.0)


def test_tables_created_after_a_switch_carry_the_new_format(cache_dir, pristine_mariadb):
    from blocklab.engines.mariadb import MariadbEngine

    engine = MariadbEngine(cache_dir=pristine_mariadb(cache_dir / "mariadb-checksum"))
    try:
        insert = make_workload(WorkloadSpec(kind="row_insert", rows=2000, index=True), DatasetSpec(), "mariadb")
        reload = make_workload(WorkloadSpec(kind="reload"), DatasetSpec(rows=3000), "mariadb")
        tables = ("blocklab_ins", "blocklab_reload_src", "blocklab_reload_dst")
        for step, algorithm in enumerate(("full_crc32", "crc32", "full_crc32")):
            assert engine.apply({"checksum": algorithm}) == {"checksum": algorithm}
            if step:  # every step changes the algorithm: the tables made before are stale
                assert all(engine.needs_rebuild(t) for t in tables)
            for w in (insert, reload):
                w.prepare(engine)
                m = w.run(engine)
                assert m["rows"] in (2000, 3000) and m["elapsed_s"] > 0
            for table in tables:
                assert engine.table_checksum(table) == algorithm, (table, algorithm)
                assert not engine.needs_rebuild(table)
        # an unchanged algorithm keeps the reload source (no rebuild: the same tablespace)
        space = engine.query("SELECT SPACE FROM information_schema.INNODB_SYS_TABLESPACES WHERE NAME = 'blocklab/blocklab_reload_src'")
        engine.apply({"checksum": "full_crc32"})
        assert not engine.needs_rebuild("blocklab_reload_src")
        reload.prepare(engine)
        assert engine.query("SELECT SPACE FROM information_schema.INNODB_SYS_TABLESPACES WHERE NAME = 'blocklab/blocklab_reload_src'") == space
        assert engine.query("SELECT count(*), count(DISTINCT pk) FROM blocklab_reload_dst") == [(3000, 3000)]
    finally:
        engine.stop()
