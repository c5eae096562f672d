"""Someone else's server (issue 17): Debian's PostgreSQL 15 as a cluster the
test set-up starts on its own port, and a MariaDB server started apart from
the run, both given to blocklab by --dsn. Every recipe that can run there does,
adapted and saying how; what cannot is refused naming what would make it run;
no command ends in a raw SQL error or a traceback; what blocklab made there is
listed and removed by `blocklab clean`."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT, blocklab_bin
from someones_servers import Pg15Server, pg15_cluster

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def pg15(cache_dir) -> Pg15Server:
    with pg15_cluster(cache_dir / "someones-pg15") as server:
        yield server


def _blocklab(cli_env, *args, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([blocklab_bin(), *args], env=cli_env, capture_output=True, text=True, timeout=timeout)


def _text(result: subprocess.CompletedProcess) -> str:
    text = result.stdout + result.stderr
    assert "Traceback" not in text and "psycopg" not in text, text
    return text


def _rows(cli_env) -> list[dict]:
    results = list(Path(cli_env["BLOCKLAB_RESULTS"]).glob("*/results.jsonl"))
    assert len(results) == 1, results
    return [json.loads(line) for line in results[0].read_text().splitlines()]


def _auto_conf(pg15: Pg15Server) -> str:
    return pg15.psql("SELECT string_agg(name, ',') FROM pg_file_settings WHERE sourcefile LIKE '%postgresql.auto.conf'")


# ---------------------------------------------------------------------- doctor
def test_doctor_on_postgresql_15_tells_every_recipe_and_changes_nothing(pg15, cli_env):
    tables_before = pg15.psql("SELECT count(*) FROM pg_class WHERE relname LIKE 'blocklab%'")
    result = _blocklab(cli_env, "doctor", "--dsn", pg15.dsn)
    text = _text(result)
    assert result.returncode == 0, text
    assert "postgres 15." in text
    flat = " ".join(text.split())
    for recipe in ("checksum", "mbrc", "reload", "slob", "writers"):
        assert re.search(rf"{recipe} +(runs|runs adapted|refused) ", flat), (recipe, text)
    assert re.search(r"slob +runs adapted", flat) and "PostgreSQL before 18 has no io_method" in flat
    assert re.search(r"checksum +refused .*pg_checksums", flat)
    assert "it exists from PostgreSQL 17 on" in flat  # multiblock_read: the version that would have it
    assert "--allow-server-changes" in flat
    assert pg15.psql("SELECT count(*) FROM pg_class WHERE relname LIKE 'blocklab%'") == tables_before


def test_readme_has_the_version_table_doctor_prints(cli_env):
    result = _blocklab(cli_env, "doctor", "--versions", timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    readme = (ROOT / "README.md").read_text()
    between = readme.split("<!-- doctor --versions: start -->\n", 1)[1].split("<!-- doctor --versions: end -->", 1)[0]
    assert between.strip() == result.stdout.strip(), "README's table is stale: paste `blocklab doctor --versions` in"
    assert "| `slob` |" in between and "PostgreSQL 15, --dsn" in between


# ---------------------------------------------------------------------- recipes run adapted
def test_slob_quick_runs_adapted_on_postgresql_15(pg15, cli_env):
    # 3,000 rows: each session's table is 24 MB against the server's 16 MB of shared buffers, so
    # its reads still leave the pool (read_iops > 0); one block of the 2 x 2 points is enough here
    result = _blocklab(cli_env, "run", "slob", "--quick", "--dsn", pg15.dsn, "--set", "workload.sessions=1,4",
                       "--rows", "3000", "--repeats", "1")
    text = _text(result)
    assert result.returncode == 0, text
    assert "adapted: PostgreSQL before 18 has no io_method" in text
    assert "adapted: PostgreSQL before 16 has no direct I/O and no pg_stat_io" in text
    rows = _rows(cli_env)
    assert rows and all(r["status"] == "ok" for r in rows), [r["status"] for r in rows]
    assert all(r["metrics"]["read_iops"] > 0 for r in rows)
    assert "blocklab clean --engine postgres --dsn" in text  # what it made is listed
    # each point second by second, in the row and the report
    assert all(len(r["series"]["t"]) >= 3 and r["notes"]["steady"]["series"] == "device_read_iops" for r in rows)
    run_dir = next(Path(cli_env["BLOCKLAB_RESULTS"]).glob("*/results.jsonl")).parent
    assert (run_dir / "plots" / "per-second.png").exists()
    assert "Second by second" in (run_dir / "report.html").read_text()


def test_writers_quick_runs_adapted_and_puts_the_server_back(pg15, cli_env):
    assert _auto_conf(pg15) == ""
    refused = _blocklab(cli_env, "run", "writers", "--quick", "--dsn", pg15.dsn)
    text = _text(refused)
    assert refused.returncode == 2 and "--allow-server-changes" in text, text
    result = _blocklab(cli_env, "run", "writers", "--quick", "--dsn", pg15.dsn, "--allow-server-changes")
    text = _text(result)
    assert result.returncode == 0, text
    assert "the writers swept are the background writer's" in text
    rows = _rows(cli_env)
    assert {r["settings"]["pg.bgwriter_lru_maxpages"] for r in rows} >= {0, 1000}
    assert all(r["status"] == "ok" for r in rows), [r["status"] for r in rows]
    assert _auto_conf(pg15) == ""  # ALTER SYSTEM reset at the end


def test_sysstats_runs_adapted_on_postgresql_15(pg15, cli_env):
    result = _blocklab(cli_env, "sysstats", "--dsn", pg15.dsn, "--rows", "400000")
    text = _text(result)
    assert result.returncode == 0, text
    assert "SREADTIM" in text and "MBRC" in text and "random_page_cost" in text
    assert "pg_stat_database blk_read_time" in text  # where the read times come from before 16
    assert "adapted: PostgreSQL 15" in text


@pytest.mark.serial  # sets the disk's read-ahead and reads the whole disk's counters: alone, after the parallel tests
def test_mbrc_sweeps_the_read_ahead_on_a_local_postgresql_15(pg15, cli_env):
    refused = _blocklab(cli_env, "run", "mbrc", "--quick", "--dsn", pg15.dsn)
    text = _text(refused)
    assert refused.returncode == 2, text
    assert "PostgreSQL before 17 has no io_combine_limit" in text and "read_ahead" in text
    if os.geteuid() != 0:  # a user's run: the disk's read-ahead is root's
        assert "needs root" in text, text
        return
    assert "--allow-server-changes" in text, text
    disk_value = _read_ahead_of(pg15.data_dir)
    result = _blocklab(cli_env, "run", "mbrc", "--quick", "--dsn", pg15.dsn, "--allow-server-changes", "--set", "read_ahead=8,1024")
    text = _text(result)
    assert result.returncode == 0, text
    assert "read_ahead = 1024 (1 MB)" in text  # sizes as people write them
    rows = _rows(cli_env)
    assert [r["status"] for r in rows] == ["ok"] * len(rows), [(r["status"], r.get("why")) for r in rows]
    for r in rows:
        assert r["applied"]["read_ahead"] == str(r["settings"]["read_ahead"])  # sysfs read back
        assert r["notes"]["evicted"]["engine_eviction"] == "rewrite"  # before 17: VACUUM FULL
    # the sweep does something, as the disk saw it (a speed comparison would be the neighbours' too):
    # the kernel's read-ahead sets the size of the reads a buffered scan sends to the device
    read_kb = {ra: [r["metrics"]["device_read_bytes"] / 1024 / r["metrics"]["device_reads"]
                    for r in rows if r["settings"]["read_ahead"] == ra] for ra in (8, 1024)}
    assert max(read_kb[8]) <= 16 and min(read_kb[1024]) >= 4 * max(read_kb[8]), read_kb
    assert _read_ahead_of(pg15.data_dir) == disk_value  # put back


def _read_ahead_of(path: Path) -> int:
    from blocklab.probes.os_stats import device_of, whole_disk

    disk = whole_disk(device_of(str(path)).name)
    return int(Path(f"/sys/block/{disk}/queue/read_ahead_kb").read_text())


def test_set_overrides_a_fixed_setting_shown_in_the_plan_and_kept_in_the_spec(cli_env):
    from blocklab import recipes
    from blocklab.spec import load_spec

    result = _blocklab(cli_env, "plan", "mbrc", "--quick", "--set", "direct_io=off", timeout=300)
    text = _text(result)
    assert result.returncode == 0, text
    assert "override direct_io = 'off' (the experiment holds it at True)" in text
    assert "fixed   direct_io = off" in text
    spec, _ = load_spec(recipes.path_of("mbrc"), {"knobs.direct_io": [False]})
    saved = spec.model_dump()  # what spec.json holds
    assert saved["engine"]["settings"]["direct_io"] is False
    assert saved["overridden"] == ["direct_io = False (the experiment holds it at True)"]


def test_checksum_and_reload_are_refused_with_the_reason(pg15, cli_env):
    for recipe in ("checksum", "reload"):
        result = _blocklab(cli_env, "run", recipe, "--quick", "--dsn", pg15.dsn, "--allow-server-changes")
        text = _text(result)
        assert result.returncode == 2, text
        assert "pg_checksums" in text and "embedded engine" in text, text


def test_clean_removes_what_blocklab_made(pg15, cli_env):
    pg15.psql("CREATE TABLE IF NOT EXISTS blocklab_scan (id int)")
    pg15.psql("CREATE TABLE IF NOT EXISTS not_ours (id int)")
    result = _blocklab(cli_env, "clean", "--engine", "postgres", "--dsn", pg15.dsn)
    text = _text(result)
    assert result.returncode == 0, text
    assert "blocklab_scan" in text
    assert pg15.psql("SELECT count(*) FROM pg_class WHERE relname LIKE 'blocklab%' AND relkind = 'r'") == "0"
    assert pg15.psql("SELECT count(*) FROM pg_class WHERE relname = 'not_ours'") == "1"


# ---------------------------------------------------------------------- MariaDB, a plain server
@pytest.fixture(scope="module")
def maria_server(cache_dir, pristine_mariadb):
    """A MariaDB 10.11 started apart from the runs (blocklab's own instance class,
    used here only to have a server up): the runs reach it by --dsn."""
    from blocklab.engines.mariadb import MariadbEngine

    server = MariadbEngine(cache_dir=pristine_mariadb(cache_dir / "someones-maria"))
    server.start()
    yield server
    server.stop()


def test_mariadb_checksum_by_dsn_needs_one_flag_named_at_once_then_runs(maria_server, cli_env):
    dsn = f"mysql://root@localhost?socket={maria_server.socket_path}"
    before = maria_server.query("SELECT @@GLOBAL.innodb_checksum_algorithm")[0][0]
    refused = _blocklab(cli_env, "run", "checksum", "--engine", "mariadb", "--dsn", dsn, "--quick")
    text = _text(refused)
    assert refused.returncode == 2, text
    assert text.lower().count("error:") == 1 and "--allow-server-changes" in text, text
    result = _blocklab(cli_env, "run", "checksum", "--engine", "mariadb", "--dsn", dsn, "--quick", "--allow-server-changes")
    text = _text(result)
    assert result.returncode == 0, text
    assert "InnoDB page size is the server's own" in text
    rows = _rows(cli_env)
    assert {r["settings"]["checksum"] for r in rows} == {"crc32", "full_crc32"}
    assert all(r["status"] == "ok" for r in rows), [r["status"] for r in rows]
    assert maria_server.query("SELECT @@GLOBAL.innodb_checksum_algorithm")[0][0] == before  # restored
    assert "blocklab clean --engine mariadb" in text
    cleaned = _blocklab(cli_env, "clean", "--engine", "mariadb", "--dsn", dsn)
    assert cleaned.returncode == 0, _text(cleaned)
    import pymysql

    with pymysql.connect(unix_socket=str(maria_server.socket_path), user="root") as conn, conn.cursor() as cur:
        cur.execute("SELECT count(*) FROM information_schema.schemata WHERE schema_name = 'blocklab'")
        assert cur.fetchone() == (0,)


def test_the_version_table_agrees_with_doctor_on_these_servers(pg15, maria_server, pg_engine, cache_dir):
    """The README's table is the recipes' word; doctor validates each recipe against
    a live server as run would. On the servers of these tests they must agree
    (with --allow-server-changes, which the table assumes, and as root, which
    mbrc's read-ahead sweep needs)."""
    from blocklab.doctor import diagnose

    servers = [("postgres", pg15.dsn), ("postgres", pg_engine.conninfo()),  # 15, and an 18 reached by DSN
               ("mariadb", f"mysql://root@localhost?socket={maria_server.socket_path}")]
    for kind, dsn in servers:
        found = diagnose(kind, dsn, allow_server_changes=True, cache_dir=cache_dir / f"doctor-{kind}")
        assert found.mode == "dsn"
        assert {name for name, _, _ in found.recipes} >= {"checksum", "reload"}
        for name, by_recipe, on_server in found.recipes:
            if kind == "postgres" and name == "mbrc" and os.geteuid() != 0:
                assert on_server.status == "refused" and "root" in " ".join(on_server.why)
                continue
            assert on_server.status == by_recipe.status, (kind, name, by_recipe, on_server)


def test_a_role_without_superuser_is_told_before_anything_runs(pg15, cli_env):
    """What needs a superuser (a superuser-context setting, a cold cache's CHECKPOINT and
    eviction) is refused at validation with what would make it run, not found in the first cell."""
    pg15.psql("DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'bench') THEN CREATE ROLE bench LOGIN; END IF; END $$")
    pg15.psql("GRANT CREATE ON SCHEMA public TO bench")
    dsn = pg15.dsn.replace("user=postgres", "user=bench")
    slob = _blocklab(cli_env, "plan", "slob", "--quick", "--dsn", dsn)
    text = _text(slob)
    assert slob.returncode == 2 and "track_io_timing" in text and "set only by a superuser" in text, text
    mbrc = _blocklab(cli_env, "plan", "mbrc", "--quick", "--dsn", dsn, "--allow-server-changes")
    text = _text(mbrc)
    assert mbrc.returncode == 2 and "a cold cache needs a superuser" in text, text
    doctor = _blocklab(cli_env, "doctor", "--dsn", dsn)
    text = _text(doctor)
    assert doctor.returncode == 0 and "superuser" in text, text
