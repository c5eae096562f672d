"""Device limits and system statistics measured by Oracle's tools: ORION
(11.1 in ms, 11.2 in microseconds), CALIBRATE_IO (printed, the view wrapped by
SQL*Plus, CSV) and SYS.AUX_STATS$ (SQL*Plus, CSV)."""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from blocklab.cli import main
from blocklab.device.calibrate import find_latest_calibration, load_calibration
from blocklab.importers.common import ImportInputError, ImportOptionError
from blocklab.importers.orion import (
    import_orion,
    latency_unit,
    parse_summary,
    resolve_prefix,
)

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "oracle"
ORION_11_2 = FIXTURES / "orion/11.2/lun1_20261120_0915"
ORION_11_1 = FIXTURES / "orion/11.1/mytest_20090304_1532"


def invoke(*args: str) -> str:
    result = CliRunner().invoke(main, ["import", *args], terminal_width=160)
    assert result.exit_code == 0, result.output
    return result.output


def matrix_cell(path: Path, large: int, small: int) -> float:
    """A cell of an ORION CSV, read without the importer."""
    lines = [line.split(",") for line in path.read_text().splitlines()]
    column = [c.strip() for c in lines[0]].index(str(small))
    row = next(r for r in lines[1:] if r[0].strip() == str(large))
    return float(row[column])


# ---------------------------------------------------------------------- ORION
def test_orion_11_2_microseconds(tmp_path):
    out = tmp_path / "orion"
    text = invoke("orion", str(ORION_11_2), "--out", str(out))
    cal = load_calibration(out)  # the shape `blocklab calibrate` writes
    assert cal.device_name == "lun1" and cal.complete and cal.ioengine == "orion"
    s = cal.summary
    iops = Path(f"{ORION_11_2}_iops.csv")
    assert s.max_small_iops.value == matrix_cell(iops, 0, 128)
    assert (s.max_small_iops.block_size, s.max_small_iops.iodepth) == (8192, 128)
    assert s.min_small_latency_ms.value == pytest.approx(matrix_cell(Path(f"{ORION_11_2}_lat.csv"), 0, 1) / 1000)  # us -> ms
    mbps = matrix_cell(Path(f"{ORION_11_2}_mbps.csv"), 8, 0)
    assert s.max_large_mb_per_s.value == pytest.approx(mbps * 1.048576)  # MiB/s -> MB/s
    assert "latency in the files: us" in text and "Maximum small-I/O IOPS: 239,286 IOPS at rand 8k qd128" in text
    document = json.loads((out / "orion.json").read_text())
    mixed = [c for c in document["matrices"]["iops"] if c["large"] > 0]
    assert mixed and all(re.search(r"_iops\.csv:\d+$", c["source"]) for c in mixed)  # kept, not used as limits
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert {r["source"] for r in rows} == {"import"} and len(rows) == len(cal.points) == 12
    env = json.loads((out / "environment.json").read_text())
    assert env["engine_mode"] == "import" and env["device"] == "lun1" and env["orion_version"] == "11.2.0.1.0"
    assert find_latest_calibration(tmp_path, "lun1") == out


def test_orion_11_1_milliseconds_and_ways_to_name_it(tmp_path):
    cal, _sources, document, summary = import_orion(ORION_11_1.parent / "mytest")  # the test name: one run matches
    assert summary.version == "11.1.0.7.0" and document["latency_unit_in_files"] == "ms"
    qd1 = next(p for p in cal.points if p.block_size == 8192 and p.iodepth == 1)
    assert qd1.lat_mean_ms == pytest.approx(matrix_cell(Path(f"{ORION_11_1}_lat.csv"), 0, 1))  # already ms
    assert qd1.iops == 2302
    large = [p for p in cal.points if p.block_size == 1024 * 1024]
    assert [p.iodepth for p in large] == [1, 2, 3, 4, 5, 6, 7] and all(math.isnan(p.lat_mean_ms) for p in large)
    assert cal.device_name == "sdb"
    assert resolve_prefix(Path(f"{ORION_11_1}_iops.csv")) == ORION_11_1
    two = tmp_path / "two"
    two.mkdir()
    for stamp in ("20090304_1532", "20090305_0900"):
        for suffix in ("summary.txt", "iops.csv"):
            shutil.copy(Path(f"{ORION_11_1}_{suffix}"), two / f"mytest_{stamp}_{suffix}")
    with pytest.raises(ImportOptionError, match="2 ORION runs match"):
        resolve_prefix(two / "mytest")


def test_orion_latency_unit_signs(tmp_path):
    summary = parse_summary(Path(f"{ORION_11_2}_summary.txt"))
    assert latency_unit(summary, None) == "us"
    with pytest.raises(ImportOptionError, match="--latency-unit ms: the summary says us"):
        latency_unit(summary, "ms")
    odd = tmp_path / "odd_summary.txt"
    odd.write_text(Path(f"{ORION_11_1}_summary.txt").read_text().replace(
        "Minimum Small Latency=0.43 @", "Minimum Small Latency=0.43 usecs @"))
    with pytest.raises(ImportInputError, match=r"odd_summary.txt: line 1: latency unit: the summary contradicts itself"):
        latency_unit(parse_summary(odd), None)
    bare = tmp_path / "bare_summary.txt"
    bare.write_text("Test: x\nSmall IO size: 8 KB\n")
    with pytest.raises(ImportInputError, match="bare_summary.txt: line 2 .end of file.: ORION VERSION"):
        parse_summary(bare)


# ---------------------------------------------------------------------- CALIBRATE_IO
def test_calibrate_io_printed_output(tmp_path):
    out = tmp_path / "cal"
    text = invoke("calibrate-io", str(FIXTURES / "calibrate_io/calibrate_sql.txt"), "--out", str(out))
    cal = load_calibration(out)
    assert cal.summary.max_small_iops.value == 36439
    assert cal.summary.max_large_mb_per_s.value == pytest.approx(486 * 1.048576)
    assert "under 1 ms (printed as 0" in text
    small = next(p for p in cal.points if p.block_size == 8192)
    assert math.isnan(small.lat_mean_ms)  # 'latency = 0' is a bound, not a latency
    assert "qd?" in cal.summary.lines()[0]  # CALIBRATE_IO does not say its concurrency


def test_calibrate_io_view_wrapped_by_sqlplus_and_csv(tmp_path):
    out = tmp_path / "view"
    text = invoke("calibrate-io", str(FIXTURES / "calibrate_io/dba_rsrc_io_calibrate_19c.txt"), "--block-size", "16k",
                  "--device", "lun1", "--out", str(out))
    cal = load_calibration(out)
    small = next(p for p in cal.points if p.block_size == 16384)
    assert (small.iops, small.lat_mean_ms) == (231002, 0.318)
    assert cal.started == "23-NOV-26 10.01.02.123456 AM" and cal.device_name == "lun1"
    assert "MAX_PMBPS  186 MiB/s" in text and "LATENCY    0.318 ms" in text
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert rows[0]["notes"]["sources"]["iops"].endswith("dba_rsrc_io_calibrate_19c.txt:13 DBA_RSRC_IO_CALIBRATE MAX_IOPS")
    csv_out = tmp_path / "csv"
    invoke("calibrate-io", str(FIXTURES / "calibrate_io/dba_rsrc_io_calibrate.csv"), "--out", str(csv_out))
    cal = load_calibration(csv_out)
    assert cal.summary.max_small_iops.value == 24002 and cal.points[0].lat_mean_ms == 10.868


def test_calibrate_io_limits_reach_a_slob_report(tmp_path):
    cal_dir = tmp_path / "cal"
    invoke("calibrate-io", str(FIXTURES / "calibrate_io/dba_rsrc_io_calibrate_19c.txt"), "--out", str(cal_dir))
    slob = tmp_path / "slob"
    invoke("slob", str(FIXTURES / "slob-harness/bs4k-upd0"), "--calibration", str(cal_dir), "--out", str(slob))
    from blocklab.report.data import load_run
    from blocklab.report.writer import device_limits

    assert device_limits(load_run(slob)) == {"max_small_iops": 231002.0, "max_mb_per_s": pytest.approx(3712 * 1.048576)}


# ---------------------------------------------------------------------- AUX_STATS$
def test_aux_stats_beside_blocklabs_own(tmp_path):
    own = tmp_path / "sysstats-20261122-101500"
    own.mkdir()
    (own / "sysstats.json").write_text(json.dumps({"format": 1, "aux_stats": [
        {"sname": "SYSSTATS_MAIN", "pname": "SREADTIM", "pval1": "0.412", "pval2": "", "unit": "ms"},
        {"sname": "SYSSTATS_MAIN", "pname": "MBRC", "pval1": "16.00", "pval2": "", "unit": "blocks"}]}))
    out = tmp_path / "aux"
    text = invoke("aux-stats", str(FIXTURES / "aux_stats/aux_stats_workload.txt"), "--sysstats", str(own), "--out", str(out))
    assert re.search(r"SYSSTATS_MAIN\s+SREADTIM\s+\.918\s+ms\s+0\.412", text)  # as SQL*Plus printed it
    assert re.search(r"SYSSTATS_MAIN\s+MBRC\s+122\s+blocks\s+16\.00", text)
    assert re.search(r"SYSSTATS_MAIN\s+MREADTIM\s+3\.309\s+ms\s+–", text)  # blocklab's run has none
    assert "random_page_cost = SREADTIM / (MREADTIM / MBRC) = 0.918 / (3.309 / 122) = 33.85" in text
    doc = json.loads((out / "sysstats.json").read_text())
    assert doc["source"] == "import" and doc["stats"]["maxthr_bytes_per_s"] == 412876800
    sread = next(r for r in doc["aux_stats"] if r["pname"] == "SREADTIM")
    lines = (FIXTURES / "aux_stats/aux_stats_workload.txt").read_text().split("\n")
    assert "SREADTIM" in lines[int(sread["source"].rsplit(":", 1)[1]) - 1]
    compared = CliRunner().invoke(main, ["compare", str(out), str(out)])
    assert compared.exit_code == 0, compared.output  # an import directory reads like a run (issue 25)


def test_aux_stats_noworkload_csv_and_the_newest_own_run(tmp_path, monkeypatch):
    monkeypatch.setenv("BLOCKLAB_RESULTS", str(tmp_path / "results"))
    text = invoke("aux-stats", str(FIXTURES / "aux_stats/aux_stats_noworkload.csv"))
    assert "no workload statistics (SREADTIM, MREADTIM, MBRC are NULL" in text
    assert "blocklab (no sysstats run found)" in text and "run `blocklab sysstats`" in text
    own = tmp_path / "results" / "sysstats-20261122-101500"
    own.mkdir()
    (own / "sysstats.json").write_text(json.dumps({"format": 1, "aux_stats": [
        {"sname": "SYSSTATS_MAIN", "pname": "SREADTIM", "pval1": "0.412", "pval2": "", "unit": "ms"}]}))
    text = invoke("aux-stats", str(FIXTURES / "aux_stats/aux_stats_workload.txt"))
    assert "blocklab (sysstats-20261122-101500)" in text  # found under the results root; the imports there are not
    assert re.search(r"SREADTIM\s+\.918\s+ms\s+0\.412", text)
