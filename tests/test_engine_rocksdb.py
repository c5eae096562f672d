"""The RocksDB engine on the real db_bench (Debian rocksdb-tools), with small data sets:
knobs and their refusals, data sets built and read back from their own files,
every workload, the cold and direct-I/O claims, crashes and interrupts."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from conftest import blocklab_bin, interrupt_mid_point

from blocklab.engines.base import EngineError, KnobError
from blocklab.engines.rocksdb import RocksDbEngine
from blocklab.engines.rocksdb import files as rfiles
from blocklab.engines.rocksdb.bench import BenchProcess
from blocklab.engines.rocksdb.output import parse
from blocklab.experiment import prepare
from blocklab.results import RunDir
from blocklab.runner import SilentReporter, run
from blocklab.spec import DatasetSpec, SpecError, WorkloadSpec, spec_from_dict
from blocklab.workloads import make_workload

pytestmark = pytest.mark.engine  # db_bench comes with rocksdb-tools (scripts/install-system-packages.sh)

SMALL = {"rocksdb.compression_type": "none", "rocksdb.value_size": 400}
ROWS = 20_000  # 20,000 keys of 16 + 400 bytes: ~8.5 MB, built in a fraction of a second


@pytest.fixture
def engine(cache_dir, tmp_path):
    e = RocksDbEngine(cache_dir=cache_dir / f"rocksdb-{tmp_path.name}")
    e.start()
    yield e
    e.stop()


def _experiment(raw: dict, cache: Path):
    raw = {"name": "rocks", "measure": {"repeats": 1, "seed": 1}, **raw}
    return prepare(spec_from_dict(raw, "test", {}), "# test", "test", cache_dir=cache)


# ---------------------------------------------------------------------- knobs
@pytest.mark.parametrize("settings, message", [
    ({"rocksdb.blok_size": 4096}, r"no flag --blok_size; near names: rocksdb\.block_size"),
    ({"block_size": 256}, r"knob 'block_size' \(rocksdb block_size\): 256 is out of range; accepted: an integer from 512 to 1,048,576"),
    ({"block_size": "2MB"}, r"out of range; accepted: an integer from 512 to 1,048,576"),
    ({"checksum": "kCRC64"}, r"'kCRC64' is not a checksum db_bench has; accepted: kNoChecksum \(none, checksum_type=0\), kCRC32c"),
    ({"rocksdb.checksum_type": 5}, r"5 is not a checksum db_bench has"),
    ({"rocksdb.compression_type": "xpress"}, r"'xpress' is not accepted \(db_bench would fail at run time\); accepted: one of 'none', 'snappy'"),
    ({"rocksdb.threads": 8}, r"--threads is set by blocklab \(set from the workload's sessions\); accepted: leave it out"),
    ({"rocksdb.cache_size": -5}, r"read by db_bench as 0 \(no block cache\); accepted: 0 or more bytes"),
    ({"rocksdb.stats_level": 1}, r"drops the timers blocklab's metrics read"),
    ({"rocksdb.use_direct_reads": "maybe"}, r"'maybe' is not accepted; accepted: on or off"),
    ({"io_slaves": 4}, r"not available on engine rocksdb: RocksDB has no read helper threads"),
    ({"block_size": 8192, "rocksdb.block_size": 4096}, r"knobs 'block_size' and 'rocksdb.block_size' both set db_bench --block_size"),
    ({"direct_io": True, "rocksdb.mmap_read": True}, r"refuses memory-mapped reads with direct reads"),
    ({"direct_io": True, "rocksdb.compaction_readahead_size": 0}, r"silently uses 2097152"),
    ({"multiblock_read": 4096, "block_size": 1048576}, r"more than db_bench's int32 --readahead_size holds"),
])
def test_bad_knobs_are_refused_naming_the_knob_and_what_is_accepted(engine, settings, message):
    with pytest.raises(KnobError, match=message):
        engine.check_settings(settings)


def test_checksum_names_and_numbers_are_one_knob(engine):
    for given, canonical in (("kCRC32c", "crc32c"), ("kxxHash64", "xxhash64"), (0, "none"), ("off", "none"), ("XXH3", "xxh3")):
        assert engine.check_settings({"checksum": given}) == {"checksum": canonical}
    applied = engine.apply({"checksum": "kxxHash", "multiblock_read": 16, "block_size": 8192, **SMALL})
    assert applied["checksum"] == "xxhash (checksum_type=2)"  # db_bench's own parse of --checksum_type
    assert applied["multiblock_read"] == "128kB" and engine.flags["readahead_size"] == "131072"  # 16 blocks of 8 kB


def test_cli_refuses_bad_input_with_exit_2_before_anything_runs(cli_env, tmp_path):
    for option, field in (("rocksdb.blok_size=4096", "rocksdb.block_size"), ("block_size=100", "block_size"),
                          ("checksum=kSHA1", "kNoChecksum")):
        proc = subprocess.run([blocklab_bin(), "run", "slob", "--engine", "rocksdb", "--quick", "--set", option],
                              capture_output=True, text=True, env=cli_env, timeout=120)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert proc.stdout == "" and field in proc.stderr
    assert not Path(cli_env["BLOCKLAB_RESULTS"]).exists()  # no run directory
    assert not (Path(cli_env["BLOCKLAB_CACHE"]) / "rocksdb" / "data").exists()  # no data set built


def test_workload_options_rocksdb_cannot_honour_are_refused():
    dataset = DatasetSpec(rows=1000)
    for options, message in (
        ({"update_pct": 10, "work_unit": 1, "shared_table": True}, r"workload.update_pct = 10.0 is not accepted on engine 'rocksdb' \(the RocksDB point is db_bench readrandom"),
        ({"work_unit": 16, "shared_table": True}, r"workload.work_unit = 16 is not accepted .*accepted: 1"),
        ({"work_unit": 1}, r"workload.shared_table = False is not accepted .*one db_bench process runs the sessions as threads.*accepted: True"),
    ):
        with pytest.raises(SpecError, match=message):
            make_workload(WorkloadSpec(kind="slob", **options), dataset, "rocksdb")
    with pytest.raises(SpecError, match=r"workload.parallel = True .*readseq is one iterator"):
        make_workload(WorkloadSpec(kind="full_scan", parallel=True), dataset, "rocksdb")


# ---------------------------------------------------------------------- data sets and read-back
def test_data_set_built_once_and_read_back_from_its_own_files(engine):
    settings = {"block_size": 4096, "checksum": "kCRC32c", "direct_io": True, "buffer_cache": "1MB", **SMALL}
    engine.apply(settings)
    built_key = engine.build_key
    record = engine.build("t", ROWS, "fp")
    assert engine.table_fingerprint("t") == "fp" and not engine.needs_rebuild("t")
    assert record["manifest"] and "fillseq,compact" in record["command"]
    sst = rfiles.sst_files(engine.table_dir("t"))
    props = rfiles.sst_properties(sst[0])
    assert props.checksum_type == 1 and props.entries == ROWS and props.block_size_fits(4096)
    assert not props.block_size_fits(16384) and not props.block_size_fits(1024)
    assert engine.check_applied(settings) == []

    # the same files under another block size and checksum: the files say what they are
    other = {**settings, "block_size": 16384, "checksum": "kXXH3"}
    engine.apply(other)
    shutil.copytree(engine.root / "data" / built_key, engine.root / "data" / engine.build_key)
    problems = engine.check_applied(other)
    assert any("block_size (--block_size) asked 16384" in p and "data blocks of" in p for p in problems), problems
    assert any("checksum (--checksum_type) asked xxh3" in p and "footer says crc32c (checksum_type=1)" in p for p in problems), problems


def test_options_rocksdb_changes_silently_are_caught_by_the_read_back(engine):
    settings = {"rocksdb.max_write_buffer_number": 1, **SMALL}
    engine.apply(settings)
    assert engine.check_applied(settings) == [
        "rocksdb.max_write_buffer_number asked 1, RocksDB runs with max_write_buffer_number=2 (OPTIONS)"
    ]


def test_a_changed_data_set_is_rebuilt(engine):
    engine.apply(SMALL)
    engine.build("t", ROWS, "fp")
    extra = engine.table_dir("t") / "999999.sst"
    shutil.copy(rfiles.sst_files(engine.table_dir("t"))[0], extra)  # as a WAL replay after a crash adds an L0 file
    assert engine.needs_rebuild("t")


# ---------------------------------------------------------------------- workloads through the runner
def test_mbrc_cold_direct_scan_proves_its_claims_and_records_its_command(cache_dir, tmp_path):
    exp = _experiment({
        "engine": {"kind": "rocksdb", "settings": {**SMALL, "direct_io": True}},
        "dataset": {"rows": ROWS}, "workload": {"kind": "full_scan"},
        "knobs": {"multiblock_read": [2, 64]}, "measure": {"repeats": 1, "seed": 1, "cache": "cold"},
    }, cache_dir / f"c-{tmp_path.name}")
    run(exp, RunDir(tmp_path / "run"), SilentReporter())
    rows = {r.settings["multiblock_read"]: r for r in RunDir(tmp_path / "run").rows()}
    for r in rows.values():
        assert r.ok, r.status
        assert r.metrics["rows"] == ROWS and r.metrics["cold_proven"] == 1.0
        assert r.notes["checks"]["cold_os_resident_bytes"] == 0 and r.notes["checks"]["direct_io_proof"] == "mincore"
        assert r.metrics["proc_read_bytes"] >= r.metrics["read_bytes"]  # direct reads are rounded out, never fewer
    assert rows[64].metrics["avg_read_kb"] > 4 * rows[2].metrics["avg_read_kb"]  # 256 kB readahead against 8 kB
    env = json.loads((tmp_path / "run" / "environment.json").read_text())
    assert env["engine"] == "rocksdb" and env["engine_extra"]["db_bench_version"] == "7.8.3"
    assert any("crc32c" in note for note in env["engine_extra"]["build_notes"])
    # the recorded command re-runs by hand
    command = rows[64].notes["db_bench"]["commands"][0]
    assert "--benchmarks=readseq" in command and "--readahead_size=262144" in command
    again = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and parse(again.stdout, again.stderr, "readseq").operations == ROWS


def test_slob_point_is_one_db_bench_process_with_a_thread_per_session(cache_dir, tmp_path):
    exp = _experiment({
        "engine": {"kind": "rocksdb", "settings": {**SMALL, "direct_io": True, "buffer_cache": "1MB"}},
        "dataset": {"rows": ROWS, "table": "s"},
        "workload": {"kind": "slob", "work_unit": 1, "shared_table": True, "run_time_s": 1},
        "knobs": {"workload.sessions": [1, 4], "block_size": [4096, 32768]},
        "measure": {"repeats": 1, "seed": 1, "cache": "cold"},
    }, cache_dir / f"c-{tmp_path.name}")
    seen: set[int] = set()
    stop = threading.Event()

    def watch() -> None:  # the probes' view: the db_bench process while the point runs
        while not stop.is_set():
            for pid in exp.engine.server_pids():
                try:
                    if Path(f"/proc/{pid}/comm").read_text().strip() == "db_bench":
                        seen.add(pid)
                except OSError:
                    pass
            time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        run(exp, RunDir(tmp_path / "run"), SilentReporter())
    finally:
        stop.set()
        watcher.join()
    rows = RunDir(tmp_path / "run").rows()
    assert len(rows) == 4 and all(r.ok for r in rows), [r.status for r in rows]
    assert len(seen) == 4  # one process per point
    for r in rows:
        m = r.metrics
        assert m["db_bench.threads"] == m["sessions"] and m["cold_proven"] == 1.0
        assert f"--threads={m['sessions']:.0f}" in r.notes["db_bench"]["commands"][0]
        assert abs(m["avg_sst_read_kb"] * 1024 - m["block_size"]) < 0.3 * m["block_size"]  # one block per read
        assert r.notes["latency_source"] == "rocksdb.sst.read.micros"
        # db_bench's statistics against the kernel's: one block-cache miss, one SST read, one device read
        misses = m["rocksdb.block.cache.data.miss"]
        assert abs(m["reads"] - misses) <= 0.01 * misses + 20
        assert m["device_read_iops"] >= 0.95 * m["read_iops"]  # others may add reads to the device, never remove ours
    by_block = {int(r.metrics["block_size"]): r.metrics for r in rows if r.metrics["sessions"] == 4}
    assert by_block[32768]["mb_per_s"] > by_block[4096]["mb_per_s"]  # bigger blocks: more bytes per read
    assert (tmp_path / "run" / "plots" / "slob-latency-iops.png").exists()


def test_buffered_random_reads_rewarm_the_page_cache_and_the_cold_claim_fails(cache_dir, tmp_path):
    exp = _experiment({
        "engine": {"kind": "rocksdb", "settings": {**SMALL, "buffer_cache": "1MB"}},
        "dataset": {"rows": ROWS, "table": "s"},
        "workload": {"kind": "slob", "work_unit": 1, "shared_table": True, "run_time_s": 2},
        "knobs": {"workload.sessions": [2]}, "measure": {"repeats": 1, "seed": 1, "cache": "cold"},
    }, cache_dir / f"c-{tmp_path.name}")
    run(exp, RunDir(tmp_path / "run"), SilentReporter())
    rows = RunDir(tmp_path / "run").rows()
    # 8.5 MB read at random for 2 s: after the first pass every block comes from the page cache
    assert rows and all(r.invalid and "cold cache not proven" in r.status for r in rows), [r.status for r in rows]
    assert all(r.metrics["cold_ratio"] < 0.9 for r in rows)


def test_point_read_checksum_verification_is_witnessed_by_the_statistics(engine):
    w = make_workload(WorkloadSpec(kind="point_read", reads=20_000), DatasetSpec(rows=ROWS, table="p"), "rocksdb")
    got = {}
    for checking in (True, False):
        engine.apply({"block_checking": checking, "buffer_cache": "1MB", **SMALL})
        w.prepare(engine)
        got[checking] = w.run(engine)
    assert got[True]["checksums_per_miss"] > 0.9 and got[False]["checksums_per_miss"] < 0.01
    assert got[True]["reads_done"] == 20_000 and got[True]["latency_us.p99"] > 0
    # the same statistics against a claim they contradict
    engine.apply({"block_checking": True, "buffer_cache": "1MB", **SMALL})
    with engine.session(1) as session:
        result = engine.run(session, "p", "readrandom", ROWS, reads=5000)
    engine.flags["verify_checksum"] = "false"
    with pytest.raises(EngineError, match=r"--verify_checksum=false, but RocksDB computed [\d,]+ checksums for [\d,]+ block reads"):
        engine._witness_read_options(result)


def test_overwrite_runs_on_a_copy_and_reports_stalls(cache_dir, tmp_path):
    settings = {**SMALL, "rocksdb.write_buffer_size": 1 << 20, "rocksdb.level0_slowdown_writes_trigger": 4,
                "rocksdb.level0_stop_writes_trigger": 6}
    exp = _experiment({
        "engine": {"kind": "rocksdb", "settings": settings}, "dataset": {"rows": ROWS, "table": "w"},
        "workload": {"kind": "overwrite", "threads": 2, "writes": 40_000},
        "knobs": {"writers": [1, 2]}, "measure": {"repeats": 2, "seed": 1, "cache": "cold"},
    }, cache_dir / f"c-{tmp_path.name}")
    run(exp, RunDir(tmp_path / "run"), SilentReporter())
    rows = RunDir(tmp_path / "run").rows()
    assert len(rows) == 4 and all(r.ok for r in rows), [r.status for r in rows]
    for r in rows:
        assert r.metrics["writes_done"] >= 40_000 and r.metrics["write_amplification"] > 1
        assert "stall_s" in r.metrics and r.metrics["copy_s"] >= 0
        assert "cold_proven" not in r.metrics  # compactions read what the cell just wrote
    exp.engine.apply(exp.fixed)
    assert not exp.engine.needs_rebuild("w")  # the built data set was never written


def test_reload_rewrites_every_row_of_a_working_copy(cache_dir, tmp_path):
    exp = _experiment({
        "engine": {"kind": "rocksdb", "settings": SMALL}, "dataset": {"rows": ROWS},
        "workload": {"kind": "reload", "flush": True},
        "knobs": {"checksum": ["none", "crc32c"]}, "measure": {"repeats": 2, "seed": 1, "cache": "warm"},
    }, cache_dir / f"c-{tmp_path.name}")
    run(exp, RunDir(tmp_path / "run"), SilentReporter())
    rows = RunDir(tmp_path / "run").rows()
    assert len(rows) == 4 and all(r.ok and r.metrics["rows"] == ROWS for r in rows), [r.status for r in rows]
    assert all(r.metrics["write_bytes"] > ROWS * 400 for r in rows)  # every row written again


# ---------------------------------------------------------------------- failures
def test_a_db_bench_killed_mid_run_is_a_failed_cell_with_its_last_stderr_lines(cache_dir, tmp_path):
    exp = _experiment({
        "engine": {"kind": "rocksdb", "settings": SMALL}, "dataset": {"rows": ROWS, "table": "s"},
        "workload": {"kind": "slob", "work_unit": 1, "shared_table": True, "run_time_s": 60},
        "knobs": {"workload.sessions": [2]}, "measure": {"repeats": 1, "seed": 1, "cache": "warm"},
    }, cache_dir / f"c-{tmp_path.name}")

    def kill_when_running() -> None:
        for _ in range(600):
            for pid in exp.engine.server_pids():
                try:
                    if Path(f"/proc/{pid}/comm").read_text().strip() == "db_bench":
                        time.sleep(0.5)
                        os.kill(pid, signal.SIGKILL)
                        return
                except OSError:
                    pass
            time.sleep(0.05)

    killer = threading.Thread(target=kill_when_running)
    killer.start()
    run(exp, RunDir(tmp_path / "run"), SilentReporter())
    killer.join()
    (row,) = RunDir(tmp_path / "run").rows()
    assert row.failed
    assert "db_bench readrandom was killed by SIGKILL; its last stderr lines: " in row.status
    assert "RocksDB:    version 7.8.3" in row.status and "command: LC_ALL=C " in row.status
    assert row.notes["db_bench"]["commands"]  # the command of the failed cell too


def test_a_corrupted_block_fails_the_cell_with_db_benchs_checksum_error(engine):
    engine.apply({"checksum": "crc32c", "buffer_cache": "1MB", **SMALL})
    w = make_workload(WorkloadSpec(kind="point_read", reads=ROWS), DatasetSpec(rows=ROWS, table="c"), "rocksdb")
    w.prepare(engine)
    sst = rfiles.sst_files(engine.table_dir("c"))[0]
    with open(sst, "r+b") as f:  # one byte in the middle of the data blocks
        f.seek(sst.stat().st_size // 3)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(EngineError, match=r"db_bench readrandom was killed by SIGABRT; its last stderr lines: .*[Cc]orruption: block checksum mismatch"):
        w.run(engine)


def test_ctrl_c_mid_point_stops_db_bench(engine, ctrl_c_raises):
    engine.apply(SMALL)
    w = make_workload(WorkloadSpec(kind="slob", work_unit=1, shared_table=True, run_time_s=3600, sessions=2),
                      DatasetSpec(rows=ROWS, table="s"), "rocksdb")
    w.prepare(engine)
    pids: list[int] = []

    def stop_sessions() -> None:
        for pid in engine.server_pids():
            pids.append(pid)
            os.kill(pid, signal.SIGKILL)

    assert interrupt_mid_point(lambda: w.run(engine), stop_sessions), "the point did not stop its db_bench itself"
    assert engine.server_pids() == []  # reaped


def test_a_session_closed_unused_leaves_no_process(engine):
    process = BenchProcess(engine.binary, engine.root / "runs", "unused")
    pid = process.pid
    process.close()
    assert not Path(f"/proc/{pid}").exists()


# ---------------------------------------------------------------------- output
def test_output_parser_on_db_benchs_own_output(engine):
    engine.apply(SMALL)
    engine.build("o", ROWS, "fp")
    with engine.session(2) as session:
        result = engine.run(session, "o", "readrandom", ROWS, duration=2)
    assert result.operations > 0 and result.ops_per_s > 0 and result.seconds >= 1.9
    assert result.found is not None and result.found <= result.operations  # one thread's count
    assert result.histogram["count"] == result.operations and result.histogram["p99"] >= result.histogram["p50"]
    assert result.counters["rocksdb.number.keys.read"] == result.operations
    assert result.histograms["rocksdb.db.get.micros"]["count"] == result.operations
    seconds = [s for s, _ in result.series]  # a loaded machine may report the 2 s run's second late or not at all
    assert seconds and seconds[0] == 1 and seconds == sorted(seconds) and all(q > 0 for _, q in result.series)
    assert result.assertions and result.version == "7.8.3"
    assert parse("no result here", "", "readrandom") is None
    # each open leaves a LOG.old and an empty WAL: pruned once the process has closed the database
    db = engine.table_dir("o")
    assert len(list(db.glob("*.log"))) <= 1 and len(list(db.glob("LOG.old.*"))) <= 2
