"""Oracle files as DBAs hold them (issue 25): genuine AWR excerpts pasted in a
blog, AWR HTML against the text of the same report, PDB / RAC / spooled /
shifted / CRLF reports, RAC global reports refused, CALIBRATE_IO and ORION and
AUX_STATS$ as pasted, and every import directory read by report, export,
analyse and compare. Figures asserted here were read off the fixture files by
hand (the line is named where it matters)."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from blocklab.cli import main
from blocklab.importers.awr import parse_awr
from blocklab.importers.calibrate_io import parse_calibrate_runs
from blocklab.importers.orion import parse_summaries
from blocklab.importers.profile import awr_profile
from blocklab.importers.slob import awr_metrics

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "oracle"
GENUINE = Path(__file__).resolve().parent / "fixtures" / "oracle-genuine"
EXCERPTS = GENUINE / "bdrouvot"
VARIANTS = FIXTURES / "awr" / "variants"


def cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


# ---------------------------------------------------------------------- genuine excerpts
def test_genuine_top10_with_the_truncated_time_column():
    """2014-04-10: 12.1's early 'Tota' column prints DB CPU as '184.' (cut, not rounded)."""
    r = parse_awr(EXCERPTS / "2014-04-10-excerpt-1.txt")
    assert r.top_title == "Top 10 Foreground Events by Total Wait Time"
    cpu, control = r.top_events[0], r.top_events[1]
    assert (cpu.name, cpu.time_s, cpu.waits, cpu.pct_db_time, cpu.time_truncated) == ("DB CPU", 184.0, None, 99.6, True)
    assert (control.name, control.waits, control.time_s, control.loc.line) == ("control file sequential read", 176, 0.1, 13)
    assert [e.name for e in r.top_events[2:]] == ["Disk file Mirror Read", "Disk file operations I/O"]
    assert {n.field for n in r.not_read} >= {"title", "Load Profile", "DB Name / Release", "Elapsed"}


@pytest.mark.parametrize(("name", "figures"), [
    ("2014-04-10-excerpt-2.txt", {"db_time": 1.0, "db_cpu": 1.0, "redo_bytes": 7_098.4, "logical_reads": 35_568.6}),
    ("2014-04-10-excerpt-3.txt", {"logical_reads": 1_075_426.1, "redo_bytes": 6_684.2}),  # starts with a pasted no-break space
    ("2015-01-15-excerpt-1.txt", {"db_time": 8.9, "db_cpu": 8.9, "logical_reads": 6_323_758.9}),
    ("2015-09-24-excerpt-4.txt", {"db_time": 2.0, "db_cpu": 1.0, "redo_bytes": 18_978.1, "logical_reads": 458_451.7}),
])
def test_genuine_load_profiles(name, figures):
    r = parse_awr(EXCERPTS / name)
    assert {k: r.load[k].value for k in figures} == figures


def test_genuine_top10_with_a_wait_and_the_authors_elision():
    """2015-01-15: resmgr:cpu quantum 16,005 waits, 1065.4 s, 66.57 ms, 39.4%; the '.' lines the author
    left for rows he cut are no rows."""
    r = parse_awr(EXCERPTS / "2015-01-15-excerpt-2.txt")
    resmgr = r.top_events[1]
    assert (resmgr.name, resmgr.waits, resmgr.time_s, resmgr.avg_ms, resmgr.pct_db_time, resmgr.wait_class) == (
        "resmgr:cpu quantum", 16_005, 1065.4, 66.57, 39.4, "Schedule")
    cut = parse_awr(EXCERPTS / "2015-01-15-excerpt-3.txt")
    assert [(e.name, e.waits, e.time_s) for e in cut.top_events] == [
        ("DB CPU", None, 1775.1), ("db file sequential read", 578, 1.5), ("latch free", 213, 1.0)]


def test_every_genuine_excerpt_parses():
    for path in sorted(EXCERPTS.glob("*.txt")):
        r = parse_awr(path)
        assert r.top_events or "logical_reads" in r.load, path


def test_an_excerpt_is_refused_by_what_needs_a_whole_report(tmp_path):
    top_only = EXCERPTS / "2014-04-10-excerpt-1.txt"
    code, out = cli("import", "awr", str(top_only), "--out", str(tmp_path / "a"))
    assert code == 2 and f"{top_only}: line 15 (end of file): DB Time:" in out and "awrrpt.sql" in out
    load_only = EXCERPTS / "2015-09-24-excerpt-1.txt"
    code, out = cli("import", "awr", str(load_only), "--out", str(tmp_path / "b"))
    assert code == 2 and f"{load_only}: line 6 (end of file): Top Foreground Events:" in out and "awrrpt.sql" in out


# ---------------------------------------------------------------------- HTML = text
@pytest.mark.parametrize("layout", ["11g", "12c", "19c"])
def test_html_and_text_of_one_report_give_the_same_figures(layout):
    text = parse_awr(FIXTURES / "awr" / "layouts" / f"awr_{layout}.txt.24")
    html = parse_awr(FIXTURES / "awr" / "html" / f"awr_{layout}.html.24")
    assert html.form == "html" and html.not_read == []
    assert awr_metrics(html)[0] == awr_metrics(text)[0]
    for key in ("release", "begin_snap", "end_snap"):
        assert getattr(html, key) == getattr(text, key)
    assert (html.elapsed().value, html.host_idle_pct.value, html.std_block_size.value) == (
        text.elapsed().value, text.host_idle_pct.value, text.std_block_size.value)
    assert {k: html.header[k] for k in ("DB Name", "DB Id", "Host Name", "CPUs", "Memory(GB)")} == {
        k: text.header[k] for k in ("DB Name", "DB Id", "Host Name", "CPUs", "Memory(GB)")}
    # the text report cuts long names to its column; the figures are the same
    width = 30
    assert [(e.name[:width], e.waits, e.time_s, e.avg_ms, e.pct_db_time) for e in html.top_events] == [
        (e.name[:width], e.waits, e.time_s, e.avg_ms, e.pct_db_time) for e in text.top_events]
    p_html, p_text = awr_profile(html)[0], awr_profile(text)[0]
    assert (p_html.elapsed_s, p_html.cpu_s, p_html.wait_s) == (p_text.elapsed_s, p_text.cpu_s, p_text.wait_s)
    assert html.slob_vars["update_pct"][0] == text.slob_vars["update_pct"][0]
    assert {k: v[0] for k, v in html.parameters.items()} == {k: v[0] for k, v in text.parameters.items()}


def test_19c_html_figures_by_hand():
    """awr_19c.html.24: the db file sequential read row of the Top 10 table (line 60) and Load Profile."""
    r = parse_awr(FIXTURES / "awr" / "html" / "awr_19c.html.24")
    event = r.event("db file sequential read")
    assert event is not None
    lines = (FIXTURES / "awr" / "html" / "awr_19c.html.24").read_text().split("\n")
    assert "db file sequential read" in lines[event.loc.line - 1] and "Avg Wait" in "\n".join(lines[:event.loc.line])
    assert r.top_title == "Top 10 Foreground Events by Total Wait Time"
    assert r.header["Release"] == "19.0.0.0.0" and r.release_loc.line > 1
    assert r.elapsed().value == pytest.approx(301.2)


_SHARED_SERVERS = (
    '<h3 class="awr">Shared Server Statistics</h3>\n'
    '<table border="0" class="tdiff" summary="This table displays shared servers utilization statistics.">'
    '<tr><th class="awrbg" scope="col">Total Server Time (s)</th><th class="awrbg" scope="col">%Busy</th>'
    '<th class="awrbg" scope="col">%Idle</th><th class="awrbg" scope="col">Incoming Net %</th></tr>\n'
    "<tr><td align=\"right\" class='awrc'>12</td><td align=\"right\" class='awrc'>0.4</td>"
    "<td align=\"right\" class='awrc'>99.6</td><td align=\"right\" class='awrc'>50.0</td></tr>\n</table><p />\n")


def test_html_host_idle_is_not_taken_from_another_idle_column(tmp_path):
    """awr_19c.html.24 without its Host CPU table (lines 74-78) and with a shared servers table
    (%Busy / %Idle 99.6) before it: the host's %Idle is not read, and DB CPU is not marked against it."""
    lines = (FIXTURES / "awr" / "html" / "awr_19c.html.24").read_text().split("\n")
    assert lines[73] == '<h3 class="awr">Host CPU</h3>' and lines[77] == "</table><p />"
    edited = tmp_path / "awr.016.html"
    edited.write_text("\n".join(lines[:73] + [_SHARED_SERVERS] + lines[78:]))
    r = parse_awr(edited)
    assert r.host_idle_pct is None and r.load["db_cpu"].value == 3.5
    out = tmp_path / "run"
    code, output = cli("import", "slob", str(edited), "--out", str(out))
    assert code == 0, output
    assert json.loads((out / "import-notes.json").read_text())["files"][str(edited)].get("marks", []) == []
    # the Host CPU table under its heading, after the shared servers table, is the one read
    edited.write_text("\n".join(lines[:73] + [_SHARED_SERVERS] + lines[73:]))
    assert (parse_awr(edited).host_idle_pct.value, parse_awr(edited).host_idle_pct.loc.line) == (44.6, 82)


def test_snap_times_with_chinese_month_numbers_are_read(tmp_path):
    """awr_zh_months_11g.html.24: an 11.2 report exported in a Chinese session prints its snap times
    '23-8月 -26 10:30:04' (line 28) and '23-8月 -26 10:35:09' (line 29): the month is the number."""
    r = parse_awr(VARIANTS / "awr_zh_months_11g.html.24")
    assert (r.begin_snap, r.end_snap, r.not_read) == ("2026-08-23T10:30:04", "2026-08-23T10:35:09", [])
    # the text report of the same session: its Begin / End Snap lines (14, 15) read the same
    text = (FIXTURES / "awr" / "layouts" / "awr_11g.txt.24").read_text().replace("23-Nov-26 10:3", "23-8月 -26 10:3")
    (tmp_path / "awr.txt").write_text(text)
    t = parse_awr(tmp_path / "awr.txt")
    assert (t.begin_snap, t.end_snap, t.not_read) == (r.begin_snap, r.end_snap, [])


@pytest.mark.parametrize("form, month", [("html", "AOÛT"), ("txt", "Okt")])
def test_snap_times_with_other_month_names_are_named_not_read(form, month, tmp_path):
    """A month name in another language (French AOÛT, German Okt) is not guessed: Begin / End Snap
    time are left out and named in import-notes.json with the text found; the rest imports."""
    source = VARIANTS / "awr_zh_months_11g.html.24" if form == "html" else FIXTURES / "awr" / "layouts" / "awr_11g.txt.24"
    path = tmp_path / f"awr.{form}"
    path.write_text(source.read_text().replace("23-8月 -26 10:3", f"23-{month}-26 10:3").replace(
        "23-Nov-26 10:3", f"23-{month}-26 10:3"))
    lines = {"html": (28, 29), "txt": (14, 15)}[form]
    r = parse_awr(path)
    assert (r.begin_snap, r.end_snap) == ("", "")
    assert [(n.field, n.line) for n in r.not_read] == [("Begin Snap time", lines[0]), ("End Snap time", lines[1])]
    assert r.not_read[0].reason.startswith(f"'23-{month}-26 10:30:04' is not DD-MON-YY HH:MI:SS")
    out = tmp_path / "run"
    code, output = cli("import", "awr", str(path), "--out", str(out))
    assert code == 0, output
    not_read = json.loads((out / "import-notes.json").read_text())["files"][str(path)]["not_read"]
    assert f"{path}:{lines[0]}: Begin Snap time: '23-{month}-26 10:30:04' is not DD-MON-YY" in " ".join(not_read)
    assert r.load["db_cpu"].value > 0 and r.top_events


def test_import_slob_reads_html_and_gzipped_html(tmp_path):
    html = FIXTURES / "awr" / "html" / "awr_19c.html.24"
    text_rows = _slob_rows(tmp_path / "t", FIXTURES / "awr" / "layouts" / "awr_19c.txt.24")
    plain = tmp_path / "html"
    plain.mkdir()
    shutil.copy(html, plain / "awr.html.24")
    packed = tmp_path / "gz"
    packed.mkdir()
    (packed / "awr.html.gz.24").write_bytes(gzip.compress(html.read_bytes()))
    for d in (plain, packed):
        rows = _slob_rows(tmp_path / f"out-{d.name}", d)
        assert [r["metrics"]["read_iops"] for r in rows] == [r["metrics"]["read_iops"] for r in text_rows]
        assert rows[0]["settings"] == {"workload.sessions": 24, "workload.update_pct": 0, "block_size": 4096}


def _slob_rows(out: Path, path: Path) -> list[dict]:
    code, text = cli("import", "slob", str(path), "--out", str(out))
    assert code == 0, text
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


# ---------------------------------------------------------------------- variants
def test_pdb_report_reads(tmp_path):
    r = parse_awr(VARIANTS / "awr_pdb_19c.txt.24")
    assert r.not_read == [] and r.header["Container Name"] == "PDB1" and r.header["CDB"] == "YES"
    assert awr_metrics(r)[0] == awr_metrics(parse_awr(FIXTURES / "awr" / "layouts" / "awr_19c.txt.24"))[0]
    code, out = cli("import", "awr", str(VARIANTS / "awr_pdb_19c.txt.24"), "--out", str(tmp_path / "pdb"))
    assert code == 0, out


def test_rac_instance_report_reads(tmp_path):
    r = parse_awr(VARIANTS / "awr_rac_instance_12c.txt.24")
    assert (r.header["RAC"], r.header["Instance"], r.header["Inst Num"]) == ("YES", "orcl2", "2")
    gc = r.event("gc cr block 2-way")
    assert gc is not None and (gc.waits, gc.time_s, gc.wait_class) == (182_113, 61.4, "Cluster")
    assert r.load["logical_reads"].loc.line > 28  # Load Profile, not the Global Cache Load Profile above it
    code, out = cli("import", "awr", str(VARIANTS / "awr_rac_instance_12c.txt.24"), "--out", str(tmp_path / "rac"))
    assert code == 0, out


def test_spooled_report_reads_as_the_report():
    spooled = parse_awr(VARIANTS / "awr_spooled_19c.txt.24")
    plain = parse_awr(FIXTURES / "awr" / "layouts" / "awr_19c.txt.24")
    assert awr_metrics(spooled)[0] == awr_metrics(plain)[0]
    assert spooled.not_read == []


@pytest.mark.parametrize(("name", "line"), [("awrgrpt_rac_global.txt", 2), ("awrgrpt_rac_global.html", 1)])
def test_rac_global_report_is_refused_with_what_to_export(name, line, tmp_path):
    for command in ("awr", "slob"):
        code, out = cli("import", command, str(VARIANTS / name), "--out", str(tmp_path / command))
        assert code == 2
        assert f"{VARIANTS / name}: line {line}: title: a RAC global report (awrgrpt.sql" in out
        assert "export one per instance with @?/rdbms/admin/awrrpti.sql" in out


def test_a_shifted_host_cpu_row_is_left_out_and_named(tmp_path):
    path = VARIANTS / "awr_hostcpu_shifted_19c.txt.24"
    r = parse_awr(path)
    assert r.host_idle_pct is None
    assert [(n.field, n.line) for n in r.not_read] == [("Host CPU %Idle", 63)]
    out = tmp_path / "run"
    code, text = cli("import", "slob", str(path), "--out", str(out))
    assert code == 0, text
    row = json.loads((out / "results.jsonl").read_text().splitlines()[0])
    assert "cpu_busy_pct" not in row["metrics"]
    plain = awr_metrics(parse_awr(FIXTURES / "awr" / "layouts" / "awr_19c.txt.24"))[0]
    assert row["metrics"]["read_iops"] == plain["read_iops"]
    notes = json.loads((out / "import-notes.json").read_text())
    assert any(":63: Host CPU %Idle:" in n for n in notes["files"][str(path)]["not_read"])
    code, text = cli("report", str(out))
    assert code == 0, text
    page = (out / "report.html").read_text()
    assert "not read (left out, the rest imported)" in page and "Host CPU %Idle" in page


def test_crlf_line_ends_read_as_lf(tmp_path):
    lf = FIXTURES / "awr" / "layouts" / "awr_19c.txt.24"
    crlf = tmp_path / "awr.024.txt"
    crlf.write_bytes(lf.read_bytes().replace(b"\n", b"\r\n"))
    a, b = parse_awr(lf), parse_awr(crlf)
    assert awr_metrics(a)[0] == awr_metrics(b)[0] and b.not_read == []
    assert a.event("db file sequential read").loc.line == b.event("db file sequential read").loc.line


def test_waits_over_db_time_are_a_mark_not_a_refusal(tmp_path):
    path = VARIANTS / "awr_waits_over_dbtime_12c.txt.24"
    r = parse_awr(path)
    profile, _, marks = awr_profile(r)
    assert profile.unaccounted_s < 0 and len(marks) == 1 and "more than DB time" in marks[0]
    out = tmp_path / "run"
    code, text = cli("import", "awr", str(path), "--out", str(out))
    assert code == 0, text
    notes = json.loads((out / "import-notes.json").read_text())
    assert "more than DB time" in notes["files"][str(path)]["marks"][0]
    assert cli("report", str(out))[0] == 0
    assert "marked: " in (out / "report.html").read_text()


@pytest.mark.parametrize("form, old, line", [
    ("txt", "72,000      195.8    2.72ms", 54), ("html", "195.8</td><td align=\"right\" class='awrc'>2.72ms", 69)])
def test_an_overflowed_avg_wait_is_left_out_and_named(form, old, line, tmp_path):
    """awr_19c's Top 10 row 'resmgr:cpu quantum' (72,000 waits, 195.8 s, Avg 2.72ms) with its Avg wait
    printed '######' (SQL*Plus's column overflow): the Avg is left out and named, the mean wait is
    Time / Waits = 2.719 ms, and the rest of the report (6 Top rows) imports."""
    source = FIXTURES / "awr" / ("layouts" if form == "txt" else "html") / f"awr_19c.{form}.24"
    text = source.read_text()
    assert old in text
    path = tmp_path / f"awr.{form}"
    path.write_text(text.replace(old, old.replace("2.72ms", "######"), 1))
    r = parse_awr(path)
    event = r.event("resmgr:cpu quantum")
    assert event is not None and event.avg_ms is None and event.loc.line == line
    assert event.latency_ms() == (pytest.approx(195.8 * 1000 / 72_000), "Time / Waits")
    assert [(n.field, n.line) for n in r.not_read] == [
        ("Top 10 Foreground Events by Total Wait Time: Avg Wait of 'resmgr:cpu quantum'", line)]
    assert "'######'" in r.not_read[0].reason and "overflowed" in r.not_read[0].reason
    assert len(r.top_events) == 6 and r.event("db file sequential read").avg_ms == pytest.approx(0.12899)
    out = tmp_path / "run"
    code, output = cli("import", "awr", str(path), "--out", str(out))
    assert code == 0, output
    not_read = json.loads((out / "import-notes.json").read_text())["files"][str(path)]["not_read"]
    assert any(n.startswith(f"{path}:{line}: Top 10 Foreground Events by Total Wait Time: Avg Wait of") for n in not_read)


# ---------------------------------------------------------------------- CALIBRATE_IO
def test_calibrate_io_with_cdb_prompts():
    runs = parse_calibrate_runs(FIXTURES / "calibrate_io" / "pasted_cdb_prompt.txt")
    r = runs.result
    assert len(runs.runs) == 1 and r.form == "DBA_RSRC_IO_CALIBRATE"
    assert (r.max_iops.value, r.max_mbps.value, r.max_pmbps.value, r.latency_ms.value, r.num_disks) == (24002, 175, 186, 10.868, 1)
    assert r.max_iops.loc.line == 23


def test_calibrate_io_view_in_another_column_order():
    r = parse_calibrate_runs(FIXTURES / "calibrate_io" / "pasted_reordered.txt").result
    assert (r.max_iops.value, r.max_mbps.value, r.latency_ms.value, r.num_disks, r.max_iops.loc.line) == (36439, 486, 0, 24, 5)
    assert r.start == "23-NOV-26 10.01.02.123456 AM"


def test_calibrate_io_three_runs_are_all_shown(tmp_path):
    path = FIXTURES / "calibrate_io" / "pasted_three_runs.txt"
    runs = parse_calibrate_runs(path)
    assert [(r.max_iops.value, r.max_mbps.value, r.latency_ms.value, r.max_iops.loc.line) for r in runs.runs] == [
        (36439, 486, 0, 2), (35120, 479, 0, 10), (37002, 492, 1, 18)]
    assert runs.chosen == 2 and "the last of 3 runs" in runs.why
    code, out = cli("import", "calibrate-io", str(path), "--out", str(tmp_path / "last"))
    assert code == 0, out
    assert "run 1 (line 2): MAX_IOPS 36,439, MAX_MBPS 486" in out and "run 3 (line 18): MAX_IOPS 37,002" in out
    assert "imported run 3" in out
    code, out = cli("import", "calibrate-io", str(path), "--run", "1", "--out", str(tmp_path / "first"))
    assert code == 0 and "MAX_IOPS   36,439" in out
    code, out = cli("import", "calibrate-io", str(path), "--run", "4", "--out", str(tmp_path / "none"))
    assert code == 2 and "--run 4:" in out and "holds 3 calibration run(s); give 1 to 3" in out


def test_calibrate_io_runs_with_the_same_max_iops_are_two_runs(tmp_path):
    """pasted_equal_iops.txt: two runs both at max_iops = 5000 (lines 2 and 9), told apart by
    'PL/SQL procedure successfully completed.' (line 6); without that line (SET FEEDBACK OFF) by the
    latency that differs, the repeated max_iops going with the second run."""
    path = FIXTURES / "calibrate_io" / "pasted_equal_iops.txt"
    runs = parse_calibrate_runs(path)
    assert [(r.max_iops.value, r.latency_ms.value, r.max_mbps.value, r.max_iops.loc.line) for r in runs.runs] == [
        (5000, 8, 200, 2), (5000, 9, 210, 9)]
    assert runs.chosen == 1 and "the last of 2 runs in the file (1 (line 2), 2 (line 9))" in runs.why
    code, out = cli("import", "calibrate-io", str(path), "--out", str(tmp_path / "cal"))
    assert code == 0, out
    assert "run 1 (line 2): MAX_IOPS 5,000, MAX_MBPS 200" in out and "run 2 (line 9): MAX_IOPS 5,000, MAX_MBPS 210" in out
    assert "imported run 2" in out
    quiet = tmp_path / "quiet.txt"
    quiet.write_text("max_iops = 5000\nlatency = 8\nmax_mbps = 200\nmax_iops = 5000\nlatency = 9\nmax_mbps = 210\n")
    assert [(r.max_iops.loc.line, r.latency_ms.loc.line, r.max_mbps.value) for r in parse_calibrate_runs(quiet).runs] == [
        (1, 2, 200), (4, 5, 210)]


def test_device_limits_are_never_ranked_as_settings(tmp_path):
    out = tmp_path / "cal"
    assert cli("import", "calibrate-io", str(FIXTURES / "calibrate_io" / "calibrate_sql.txt"), "--out", str(out))[0] == 0
    for _ in range(2):  # as imported, and after `blocklab analyse` rewrote the summary
        summary = json.loads((out / "summary.json").read_text())
        assert summary["best_label"] is None and summary["unranked"]
        assert "not settings of one knob" in summary["verdict"] and "slower" not in summary["verdict"]
        assert all(v.get("ratio_to_best") is None for v in summary["settings"].values())
        assert cli("analyse", str(out))[0] == 0
    assert cli("report", str(out))[0] == 0
    page = (out / "report.html").read_text()
    assert "device limits from CALIBRATE_IO" in page and "slower" not in page


# ---------------------------------------------------------------------- ORION
def test_orion_summary_alone(tmp_path):
    out = tmp_path / "orion"
    code, text = cli("import", "orion", str(FIXTURES / "orion" / "summary-only" / "lun2_20261121_1000"), "--out", str(out))
    assert code == 0, text
    cal = json.loads((out / "calibration.json").read_text())
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 1 and rows[0]["settings"] == {"pattern": "rand", "block_size": 8192, "iodepth": 20}
    assert rows[0]["metrics"]["iops"] == 61872 and rows[0]["metrics"]["lat_mean_ms"] == pytest.approx(0.323129)
    assert cal["device"]["name"] == "lun2"
    notes = json.loads((out / "import-notes.json").read_text())
    assert "Minimum Small Latency 98.517 us at Small=4" in notes["runs"][0]
    assert json.loads((out / "orion.json").read_text())["summary_only"] is True


def test_orion_summaries_pasted_together_are_separate_runs(tmp_path):
    path = FIXTURES / "orion" / "pasted" / "orion_two_runs.txt"
    runs = parse_summaries(path)
    assert [(r.first_line, r.extremes["Maximum Small IOPS"][0].value, r.extremes["Maximum Large MBPS"][0].value) for r in runs] == [
        (1, 18421, 412.77), (23, 17996, 398.02)]
    code, text = cli("import", "orion", str(path), "--out", str(tmp_path / "last"))
    assert code == 0 and "2 ORION runs in the summary file (separate runs, not merged)" in text
    rows = [json.loads(line) for line in (tmp_path / "last" / "results.jsonl").read_text().splitlines()]
    assert [r["metrics"]["iops"] for r in rows][0] == 17996
    assert rows[1]["metrics"]["mb_per_s"] == pytest.approx(398.02 * 1.048576)
    code, text = cli("import", "orion", str(path), "--run", "1", "--out", str(tmp_path / "first"))
    first = [json.loads(line) for line in (tmp_path / "first" / "results.jsonl").read_text().splitlines()]
    assert code == 0 and first[0]["metrics"]["iops"] == 18421


# ---------------------------------------------------------------------- AUX_STATS$
def test_aux_stats_kept_exactly_and_reported(tmp_path):
    out = tmp_path / "aux"
    code, text = cli("import", "aux-stats", str(FIXTURES / "aux_stats" / "aux_stats_cdb_prompt.txt"), "--out", str(out))
    assert code == 0, text
    assert "510301184" in text and "5.10301e+08" not in text
    doc = json.loads((out / "sysstats.json").read_text())
    by_name = {r["pname"]: r["pval1"] for r in doc["aux_stats"]}
    assert (by_name["MAXTHR"], by_name["SLAVETHR"], by_name["CPUSPEEDNW"], by_name["SREADTIM"]) == (
        "510301184", "32505856", "3308.63934", "1.182")
    code, text = cli("report", str(out))
    assert code == 0, text
    page = (out / "report.html").read_text()
    assert "MAXTHR 510301184 bytes/s" in page and "not a blocklab results directory" not in page


# ---------------------------------------------------------------------- every import directory
IMPORTS = [
    ("awr-genuine-free", ["awr", str(VARIANTS / "awr_pdb_19c.txt.24"), str(VARIANTS / "awr_rac_instance_12c.txt.24")]),
    ("awr-html", ["awr", str(FIXTURES / "awr/html/awr_11g.html.24"), str(FIXTURES / "awr/html/awr_19c.html.24")]),
    ("awr-over", ["awr", str(VARIANTS / "awr_waits_over_dbtime_12c.txt.24")]),
    ("slob-html", ["slob", str(FIXTURES / "awr/html/awr_12c.html.24")]),
    ("slob-spooled", ["slob", str(VARIANTS / "awr_spooled_19c.txt.24")]),
    ("cal-prompt", ["calibrate-io", str(FIXTURES / "calibrate_io/pasted_cdb_prompt.txt")]),
    ("cal-order", ["calibrate-io", str(FIXTURES / "calibrate_io/pasted_reordered.txt")]),
    ("cal-runs", ["calibrate-io", str(FIXTURES / "calibrate_io/pasted_three_runs.txt")]),
    ("orion-summary", ["orion", str(FIXTURES / "orion/summary-only/lun2_20261121_1000")]),
    ("orion-pasted", ["orion", str(FIXTURES / "orion/pasted/orion_two_runs.txt")]),
    ("orion-csv", ["orion", str(FIXTURES / "orion/11.2/lun1_20261120_0915")]),
    ("aux", ["aux-stats", str(FIXTURES / "aux_stats/aux_stats_cdb_prompt.txt")]),
]


@pytest.mark.parametrize(("name", "args"), IMPORTS, ids=[i[0] for i in IMPORTS])
def test_every_import_directory_reads_like_a_run(name, args, tmp_path, monkeypatch):
    monkeypatch.setenv("BLOCKLAB_RESULTS", str(tmp_path / "results"))
    out = tmp_path / name
    code, text = cli("import", *args, "--out", str(out))
    assert code == 0, text
    for command in (["report", str(out)], ["export", str(out), "--format", "csv"], ["export", str(out), "--format", "json"],
                    ["analyse", str(out)], ["compare", str(out), str(out)]):
        code, text = cli(*command)
        assert code == 0, (command, text)
    page = (out / "report.html").read_text()
    assert "checked by a second source" not in page
    assert "Nothing was read back from the database" in page


def test_a_directory_walk_passes_over_other_html_and_a_named_excerpt_says_why(tmp_path):
    d = tmp_path / "AWRs"
    d.mkdir()
    shutil.copy(FIXTURES / "awr" / "html" / "awr_12c.html.24", d / "awr.024.html")
    (d / "report.html").write_text("<html><head><title>blocklab report</title></head><body><table></table></body></html>")
    rows = _slob_rows(tmp_path / "out", d)
    assert len(rows) == 1 and rows[0]["notes"]["file"].endswith("awr.024.html")
    excerpt = EXCERPTS / "2015-01-15-excerpt-2.txt"
    code, out = cli("import", "slob", str(excerpt), "--update-pct", "0", "--out", str(tmp_path / "x"))
    assert code == 2 and str(excerpt) in out and "sessions" in out  # its name says no session count; the reader read it


def test_db_cpu_over_the_hosts_busy_cpus_is_a_mark(tmp_path):
    """awr_19c.txt.24 with its Host CPU row (line 63) edited to 99.3% idle: DB CPU 3.5 s/s (Load Profile)
    cannot fit in 16 CPUs x 0.7% busy = 0.1 CPU; the report imports, marked."""
    text = (FIXTURES / "awr" / "layouts" / "awr_19c.txt.24").read_text()
    edited = tmp_path / "awr.024.txt"
    edited.write_text(text.replace("      34.3      21.0       3.1      44.6", "       0.4       0.3       0.2      99.3", 1))
    out = tmp_path / "run"
    code, output = cli("import", "slob", str(edited), "--out", str(out))
    assert code == 0, output
    marks = json.loads((out / "import-notes.json").read_text())["files"][str(edited)]["marks"]
    assert len(marks) == 1 and "DB CPU 3.5 s per second" in marks[0] and "16 CPUs x 0.7% busy = 0.1" in marks[0]
    assert f"{edited}:63" in marks[0]
    assert parse_awr(FIXTURES / "awr" / "layouts" / "awr_19c.txt.24").host_idle_pct.value == 44.6  # the original: no mark


def test_a_header_without_its_release_is_named_and_the_rest_imported(tmp_path):
    """malformed/awr_no_release.txt: the 19c header row's Release is blank (line 9); DB Name and the rest stay."""
    path = FIXTURES / "malformed" / "awr_no_release.txt"
    r = parse_awr(path)
    assert r.release == "" and [(n.field, n.line) for n in r.not_read] == [("Release", 9)] and r.header["DB Name"] == "PRD"
    code, out = cli("import", "awr", str(path), "--out", str(tmp_path / "run"))
    assert code == 0, out
    assert ":9: Release: the header table has no Release value" in json.dumps(json.loads((tmp_path / "run" / "import-notes.json").read_text()))
