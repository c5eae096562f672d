"""`blocklab import slob`: a directory laid out as flashdba's harness leaves it
(12 AWR reports x 2 update percentages x 2 block sizes, 19c), awr_info.sh
output, and the run directory they become: report (petals by block size,
saturation, ORION limit lines), export, compare, and a look in a real browser."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from blocklab.cli import main
from blocklab.importers.slob import sessions_from_name
from blocklab.report.data import load_run
from blocklab.report.writer import device_limits, write_report
from blocklab.results import RunDir

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "oracle"
HARNESS = FIXTURES / "slob-harness"
# the fewest sessions within 5% of each series' highest read IOPS, read off the fixtures' tables
EXPECTED_SATURATION = {("0% updates", "4k"): 40, ("0% updates", "32k"): 32, ("30% updates", "4k"): 28,
                       ("30% updates", "32k"): 24}


def invoke(*args: str) -> str:
    result = CliRunner().invoke(main, ["import", *args], terminal_width=160)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> Path:
    """ORION limits, then the harness directory against them, then the report."""
    root = tmp_path_factory.mktemp("slob-import")
    invoke("orion", str(FIXTURES / "orion/11.2/lun1_20261120_0915"), "--out", str(root / "orion"))
    invoke("slob", str(HARNESS), "--calibration", str(root / "orion"), "--out", str(root / "slob"))
    write_report(RunDir(root / "slob"))
    return root / "slob"


def per_second(report: Path, statistic: str) -> float:
    """The per-second column of an Instance Activity statistic, read with a regex (not the importer)."""
    m = re.search(rf"^{re.escape(statistic)}\s+[\d,]+\s+([\d,.]+(?:E[+-]\d+)?)\s", report.read_text(), re.MULTILINE)
    assert m, statistic
    return float(m.group(1).replace(",", ""))


def test_every_report_is_one_point(imported):
    rows = RunDir(imported).rows()
    assert len(rows) == 48
    grid = {(r.settings["block_size"], r.settings["workload.update_pct"], r.settings["workload.sessions"]) for r in rows}
    assert len(grid) == 48
    assert {r.settings["block_size"] for r in rows} == {4096, 32768}  # from each report's db_block_size
    assert {r.settings["workload.update_pct"] for r in rows} == {0, 30}  # from the slob.conf in each AWRs/
    assert all(r.source == "import" and r.ok for r in rows)


def test_numbers_and_where_they_came_from(imported):
    row = next(r for r in RunDir(imported).rows()
               if r.settings == {"workload.sessions": 16, "workload.update_pct": 30, "block_size": 32768})
    report = HARNESS / "bs32k-upd30" / "AWRs" / "awr.016.txt"
    assert row.notes["file"] == str(report)
    assert row.metrics["read_iops"] == per_second(report, "physical read IO requests")
    read_b, write_b = per_second(report, "physical read total bytes"), per_second(report, "physical write total bytes")
    assert row.metrics["mb_per_s"] == pytest.approx((read_b + write_b) / 1e6)
    avg = re.search(r"^db file sequential read\s+[\d,]+\s+\S+\s+([\d.]+)us", report.read_text(), re.MULTILINE).group(1)
    assert row.metrics["read_latency_ms"] == pytest.approx(float(avg) / 1000)
    idle = float(re.search(r"^\s+16\s+8\s+1\s+\S+\s+\S+\s+\S+\s+\S+\s+\S+\s+(\S+)$", report.read_text(), re.MULTILINE).group(1))
    assert row.metrics["cpu_busy_pct"] == pytest.approx(100 - idle)
    lines = report.read_text().split("\n")
    sources = row.notes["sources"]
    for metric, text in (("read_iops", "physical read IO requests"), ("read_latency_ms", "db file sequential read"),
                         ("block_size", "db_block_size"), ("cpu_busy_pct", "%Idle")):
        where = re.match(rf"{re.escape(str(report))}:(\d+) ", sources[metric])
        assert where, sources[metric]
        line = lines[int(where.group(1)) - 1]
        assert text in line or (text == "%Idle" and re.match(r"^\s+16\s", line)), (metric, line)
    conf = HARNESS / "bs32k-upd30" / "AWRs" / "slob.conf"
    assert sources["update_pct"] == f"{conf}:3 UPDATE_PCT" and conf.read_text().split("\n")[2] == "UPDATE_PCT=30"


def test_saturation_per_series_in_verdict_and_headline(imported):
    summary = json.loads((imported / "summary.json").read_text())
    for (pct, bs), sessions in EXPECTED_SATURATION.items():
        assert f"{pct}, {bs} blocks: {sessions} sessions (" in summary["verdict"]
        assert f"{sessions} ({pct}, {bs} blocks)" in summary["headline"]
    html = (imported / "report.html").read_text()
    assert "Best sessions: 40 (0% updates, 4k blocks)" in html
    assert "Best sessions count per series" in html
    # the petals turn back: more sessions than the saturation point give fewer IOPS at the end of each series
    rows = RunDir(imported).rows()
    for (pct, bs), sessions in EXPECTED_SATURATION.items():
        series = {r.settings["workload.sessions"]: r.metrics["read_iops"] for r in rows
                  if r.settings["workload.update_pct"] == int(pct.split("%")[0]) and r.settings["block_size"] == int(bs[:-1]) * 1024}
        assert series[64] < max(series.values()) * 0.95
        assert min(s for s, v in series.items() if v * 1.05 >= max(series.values())) == sessions


def test_report_draws_petals_with_the_orion_limits(imported):
    data = load_run(imported)
    assert data.engine_line == "Oracle 19.0.0.0.0 (import)"
    orion = json.loads((imported.parent / "orion" / "calibration.json").read_text())["summary"]
    assert device_limits(data) == {"max_small_iops": orion["max_small_iops"]["value"],
                                   "max_mb_per_s": orion["max_large_mb_per_s"]["value"]}
    plots = sorted(p.name for p in (imported / "plots").glob("*.png"))
    assert plots == ["slob-latency-iops.png", "slob-latency-mbps.png"]
    import matplotlib.image

    for name in plots:
        pixels = np.asarray(matplotlib.image.imread(imported / "plots" / name))[..., :3]
        assert pixels.shape[0] > 500 and pixels.std() > 0.05
        # the two block sizes' colours (matplotlib's C0 blue, C1 orange) are both drawn
        for colour in ((0x1F, 0x77, 0xB4), (0xFF, 0x7F, 0x0E)):
            close = np.abs(pixels * 255 - np.array(colour)).sum(axis=2) < 30
            assert close.sum() > 200, (name, colour)
    # matplotlib keeps each text of the figure as a comment in the SVG: the legend and axis say what is drawn
    iops_svg = (imported / "plots" / "slob-latency-iops.svg").read_text()
    mbps_svg = (imported / "plots" / "slob-latency-mbps.svg").read_text()
    assert "<!-- device max small-I/O IOPS (239,286) -->" in iops_svg
    assert f"<!-- device max MB/s ({orion['max_large_mb_per_s']['value']:,.0f}) -->" in mbps_svg
    assert "<!-- read latency (ms, AWR: db file sequential read) -->" in iops_svg
    for (pct, bs), sessions in EXPECTED_SATURATION.items():
        assert f"<!-- {pct}, {bs} blocks (saturated at {sessions} sessions) -->" in iops_svg
    assert "Not run by blocklab: 48 rows" in (imported / "report.html").read_text()


def test_export_and_compare_read_it_unchanged(imported, tmp_path):
    out = CliRunner().invoke(main, ["export", str(imported)])
    assert out.exit_code == 0
    table = list(csv.DictReader(io.StringIO(out.output)))
    assert len(table) == 48 and float(table[0]["read_iops"]) > 0
    document = json.loads(CliRunner().invoke(main, ["export", str(imported), "--format", "json"]).output)
    assert {r["source"] for r in document["rows"]} == {"import"}
    assert document["environment"]["engine"] == "oracle"
    copy = tmp_path / "copy"
    shutil.copytree(imported, copy)
    compared = CliRunner().invoke(main, ["compare", str(imported), str(copy)], terminal_width=200)
    assert compared.exit_code == 0, compared.output
    assert "no significant difference in 48" in compared.output


def test_sessions_from_the_names_slob_gives_reports():
    assert sessions_from_name("awr.004.txt") == 4
    assert sessions_from_name("awr.0012.txt") == 12  # older harness commits pad to four digits
    assert sessions_from_name("awr.txt.128") == 128
    assert sessions_from_name("AWRs/awr.txt") is None
    assert sessions_from_name("awr_16.txt") is None


def test_a_report_without_a_session_count_is_refused(tmp_path):
    shutil.copy(HARNESS / "bs4k-upd0/AWRs/awr.016.txt", tmp_path / "awr.txt")
    result = CliRunner().invoke(main, ["import", "slob", str(tmp_path / "awr.txt"), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert f"{tmp_path / 'awr.txt'}: line 1: sessions: the name does not say how many sessions ran" in result.output


def test_options_override_and_conflict(tmp_path):
    out = tmp_path / "bs"
    invoke("slob", str(HARNESS / "bs4k-upd0"), "--block-size", "16k", "--out", str(out))
    rows = RunDir(out).rows()
    assert {r.settings["block_size"] for r in rows} == {16384}  # a 16k tablespace in a 4k database
    assert rows[0].notes["sources"]["block_size"] == "--block-size"
    # the reports' own SQL text says SLOB ran with v_update_pct 0: --update-pct 30 contradicts it
    result = CliRunner().invoke(main, ["import", "slob", str(HARNESS / "bs4k-upd0"), "--update-pct", "30", "--out", str(tmp_path / "x")])
    assert result.exit_code == 2
    assert "v_update_pct '0'" in result.output and "--update-pct says 30" in result.output


def test_update_pct_from_the_report_when_there_is_no_slob_conf(tmp_path):
    for s in (4, 8, 12):
        shutil.copy(HARNESS / f"bs32k-upd30/AWRs/awr.{s:03d}.txt", tmp_path)
    out = tmp_path / "run"
    invoke("slob", *[str(tmp_path / f"awr.{s:03d}.txt") for s in (4, 8, 12)], "--out", str(out))
    rows = RunDir(out).rows()
    assert {r.settings["workload.update_pct"] for r in rows} == {30}
    assert "v_update_pct in the SQL text" in rows[0].notes["sources"]["update_pct"]


# ---------------------------------------------------------------------- awr_info
def test_awr_info_sample_line(tmp_path):
    out = tmp_path / "info"
    invoke("slob", str(FIXTURES / "awr_info/sample/awr_info.out"), "--block-size", "8k", "--update-pct", "20", "--out", str(out))
    (row,) = RunDir(out).rows()
    m = row.metrics
    assert row.settings == {"workload.sessions": 128, "workload.update_pct": 20, "block_size": 8192}
    assert m["read_iops"] == 71553 and m["write_iops"] == 25884
    assert m["mb_per_s"] == pytest.approx((559.1 + 329) * 1.048576)
    assert m["read_latency_ms"] == pytest.approx(0.759)
    assert m["lgwr_write_ms"] == pytest.approx(440.653) and m["elapsed_s"] == 304
    assert "cpu_busy_pct" not in m  # awr_info has no host CPU: not a 0
    assert row.notes["sources"]["read_iops"] == f"{FIXTURES / 'awr_info/sample/awr_info.out'}:2 PREADS"


def test_awr_info_beside_its_slob_conf(tmp_path):
    out = tmp_path / "info"
    text = invoke("slob", str(FIXTURES / "awr_info/upd20"), "--block-size", "8k", "--out", str(out))
    rows = RunDir(out).rows()
    assert [r.settings["workload.sessions"] for r in rows] == [4, 8, 12, 16, 20, 24, 28, 32]  # SESSIONS blank: from FILE
    assert {r.settings["workload.update_pct"] for r in rows} == {20}
    assert "–" in text  # the CPU column: not measured, not 0
    needs = CliRunner().invoke(main, ["import", "slob", str(FIXTURES / "awr_info/upd20"), "--out", str(tmp_path / "x")])
    assert needs.exit_code == 2 and "give --block-size" in needs.output


def test_awr_info_and_its_own_reports_are_not_counted_twice(tmp_path):
    shutil.copy(HARNESS / "bs4k-upd0/AWRs/awr.004.txt", tmp_path)
    info = tmp_path / "awr_info.out"
    sample = (FIXTURES / "awr_info/upd20/awr_info.out").read_text().split("\n")
    info.write_text("\n".join(sample[:2]) + "\n")  # the header and the line of awr.004.txt
    result = CliRunner().invoke(main, ["import", "slob", str(tmp_path), "--block-size", "4k", "--update-pct", "0",
                                       "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert f"{info}: line 2: FILE: 'awr.004.txt' is also imported as the report" in result.output


# ---------------------------------------------------------------------- a real browser
@pytest.mark.browser
def test_the_imported_report_in_a_browser(imported, tmp_path):
    from test_report_browser import CHROMIUM, chromium, page_console_lines

    if not Path(CHROMIUM).exists():
        pytest.fail("chromium is not installed: `sudo apt-get install chromium`")
    page = imported / "report.html"
    shot = tmp_path / "report.png"
    result = chromium(page, f"--screenshot={shot}", "--window-size=1400,3000", "--hide-scrollbars")
    assert shot.exists(), result.stderr[-2000:]
    import matplotlib.image

    pixels = np.asarray(matplotlib.image.imread(shot))[..., :3]
    assert pixels.shape[:2] == (3000, 1400) and float(pixels.std()) > 0.05
    dom = chromium(page, "--dump-dom", "--virtual-time-budget=5000")
    assert 'data-plots-rendered="2/2"' in dom.stdout
    assert "Best sessions: 40 (0% updates, 4k blocks)" in dom.stdout
    assert page_console_lines(dom.stderr) == []
