"""Genuine Oracle output published by other people (issue 25): 19c PDB AWR
reports (text, and one report as both text and HTML), a Statspack report, a
CALIBRATE_IO paste and an AUX_STATS$ paste, all from bigdatalyn.github.io (MIT). Source, commit and
what was trimmed: tests/fixtures/oracle-genuine/README.md. Every figure asserted
here was read off the fixture by hand; the line it stands on is named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from blocklab.cli import main
from blocklab.importers.awr import parse_awr
from blocklab.importers.calibrate_io import parse_calibrate_runs
from blocklab.importers.common import is_dash_line, text_lines
from blocklab.importers.profile import awr_profile
from blocklab.importers.slob import awr_metrics

LYN = Path(__file__).resolve().parent / "fixtures" / "oracle-genuine" / "bigdatalyn"
AWR_TEXTS = ["awrrpt_1_10_11.txt", "awrrpt_1_11_12.txt", "awrrpt_1_12_13.txt", "myawr_2_3.txt", "myawr_2_3.html"]


def cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def test_19c_pdb_report_root_snapshots_by_hand():
    """awrrpt_1_11_12.txt: 'WORKLOAD REPOSITORY PDB report (root snapshots)', the container table headed
    'Container DB Id  Container Name  Open Time' (line 12), Elapsed 59.54 (mins) on line 24."""
    r = parse_awr(LYN / "awrrpt_1_11_12.txt")
    assert r.not_read == [] and r.release == "19.0.0.0.0"
    assert (r.header["CDB"], r.header["Container Name"], r.header["CPUs"]) == ("YES", "PDB1", "2")
    assert (r.begin_snap, r.end_snap) == ("2019-07-04T05:00:39", "2019-07-04T06:00:11")
    assert (r.elapsed().value, r.elapsed().loc.line) == (pytest.approx(59.54 * 60), 24)
    assert {k: r.load[k].value for k in ("logical_reads", "executes", "redo_bytes", "read_requests")} == {
        "logical_reads": 139.2, "executes": 34.9, "redo_bytes": 2_042.2, "read_requests": 1.0}
    assert r.load["executes"].loc.line == 49
    sync = r.top_events[1]
    assert (sync.name, sync.waits, sync.time_s, sync.avg_ms, sync.pct_db_time, sync.wait_class, sync.loc.line) == (
        "log file sync", 3, 0.1, 40.94, 1.9, "Commit", 59)
    pga = r.event("PGA memory operation")  # '12.58us' on line 65
    assert pga is not None and pga.avg_ms == pytest.approx(0.01258) and pga.loc.line == 65
    assert r.time_model["DB time"][0] == "6.3"


def test_19c_avg_wait_in_seconds_and_over_a_second():
    """awrrpt_1_10_11.txt, Foreground Wait Events: 'SQL*Net message from clien 9 508 56.46 s' (line 181, the unit
    after a space) and 'virtual circuit next reque 4 5 1348.33ms' (line 182, no space before the unit)."""
    r = parse_awr(LYN / "awrrpt_1_10_11.txt")
    net, vc = r.event("SQL*Net message from clien"), r.event("virtual circuit next reque")
    assert net is not None and (net.waits, net.time_s, net.avg_ms, net.pct_db_time, net.loc.line) == (9, 508, 56_460, None, 181)
    assert vc is not None and (vc.waits, vc.time_s, vc.avg_ms, vc.loc.line) == (4, 5, pytest.approx(1348.33), 182)
    sga = r.top_events[1]  # line 59
    assert (sga.name, sga.waits, sga.time_s, sga.avg_ms, sga.pct_db_time, sga.loc.line) == (
        "SGA: allocation forcing compon", 394, 4.3, 10.81, 71.6, 59)
    assert r.not_read == [] and r.elapsed().value == pytest.approx(59.69 * 60)


def test_a_statspack_report_is_refused_by_its_title(tmp_path):
    """sp_20190716_1_1-2.lst: 'STATSPACK report for' (line 2), 19c; its Top 5 prints '######' for an overflowed
    Avg (line 60). Refused at the title, naming awrrpt.sql, for `import awr` and `import slob` alike."""
    path = LYN / "sp_20190716_1_1-2.lst"
    for args in (["awr", str(path)], ["slob", str(path), "--update-pct", "0"]):
        code, text = cli("import", *args, "--out", str(tmp_path / args[0]))
        assert code == 2, text
        assert f"{path}: line 2: title: a Statspack report (spreport.sql), not an AWR report" in text
        assert "@?/rdbms/admin/awrrpt.sql" in text and not (tmp_path / args[0]).exists()


def test_19c_waits_far_over_db_time_import_marked(tmp_path):
    """awrrpt_1_12_13.txt line 58: 'SGA: allocation forcing compon 1,979 27.9 14.10ms 2.E+03 Other' - 27.9 s of
    waits in a DB time of 1.7 s (Time Model, line 117); SQL*Plus prints the overflowing % DB time as 2.E+03."""
    path = LYN / "awrrpt_1_12_13.txt"
    r = parse_awr(path)
    sga = r.top_events[0]
    assert (sga.name, sga.waits, sga.time_s, sga.avg_ms, sga.pct_db_time, sga.wait_class, sga.loc.line) == (
        "SGA: allocation forcing compon", 1979, 27.9, 14.10, 2000.0, "Other", 58)
    out = tmp_path / "run"
    code, text = cli("import", "awr", str(path), "--out", str(out))
    assert code == 0, text
    assert "-29.7" in next(ln for ln in text.splitlines() if "UNACCOUNTED_TIME" in ln)
    marks = json.loads((out / "import-notes.json").read_text())["files"][str(path)]["marks"]
    assert len(marks) == 1 and "add up to 31.4 s, more than DB time 1.7 s" in marks[0] and f"{path}:117" in marks[0]


def test_text_and_html_of_one_genuine_report_agree_to_the_texts_printed_digits():
    """myawr_2_3.txt / .html: the same 19c PDB report (PDB snapshots 2-3) saved both ways by its author.
    Oracle prints the HTML with more digits (Time Model DB time 9.54 against the text's 9.5) and the text cuts
    names to its columns (Wait Class 'Concurre', Host Name 'localhost.locald'); the figures otherwise agree."""
    text, html = parse_awr(LYN / "myawr_2_3.txt"), parse_awr(LYN / "myawr_2_3.html")
    assert (text.form, html.form, text.not_read, html.not_read) == ("text", "html", [], [])
    assert awr_metrics(html)[0] == awr_metrics(text)[0]
    for key in ("release", "begin_snap", "end_snap"):
        assert getattr(html, key) == getattr(text, key)
    assert (html.elapsed().value, html.db_time_header_s.value) == (text.elapsed().value, text.db_time_header_s.value) == (
        pytest.approx(68.4), pytest.approx(9.6))
    same = ("DB Name", "DB Id", "Release", "CDB", "Container Name", "CPUs", "Cores", "Sockets", "Memory(GB)")
    assert {k: html.header[k] for k in same} == {k: text.header[k] for k in same}
    assert html.header["Host Name"].startswith(text.header["Host Name"]) and html.header["Role"] == text.header["DB Role"]
    assert [(e.name, e.waits, e.time_s, e.avg_ms, e.pct_db_time) for e in html.top_events] == [
        (e.name, e.waits, e.time_s, e.avg_ms, e.pct_db_time) for e in text.top_events]
    assert all(h.wait_class.startswith(t.wait_class) for h, t in zip(html.top_events, text.top_events))
    fg_text = {k[:26]: v for k, v in text.foreground_events.items()}
    fg_html = {k[:26]: v for k, v in html.foreground_events.items()}
    assert fg_html.keys() == fg_text.keys() and len(fg_text) == 24
    assert all((fg_html[k].waits, fg_html[k].avg_ms) == (fg_text[k].waits, fg_text[k].avg_ms) for k in fg_text)
    for stat, (printed, _) in text.time_model.items():
        decimals = len(printed.split(".")[1]) if "." in printed else 0
        assert round(float(html.time_model[stat][0]), decimals) == float(printed), stat
    p_text, p_html = awr_profile(text)[0], awr_profile(html)[0]
    assert (p_text.elapsed_s, p_html.elapsed_s) == (9.5, 9.54)
    assert (p_html.cpu_s, p_html.waits) == (p_text.cpu_s, p_text.waits)


def test_genuine_calibrate_io_paste():
    """2021-10-08-calibrate-io.txt: the block run at 'SYS@cdb1>' printed max_iops/latency/max_mbps twice
    (latency '.001' then '0', lines 34-39); DBA_RSRC_IO_CALIBRATE's row on line 48 is the one taken."""
    path = LYN / "2021-10-08-calibrate-io.txt"
    runs = parse_calibrate_runs(path)
    assert len(runs.runs) == 1
    r = runs.result
    assert (r.form, r.max_iops.value, r.max_mbps.value, r.latency_ms.value, r.num_disks, r.start) == (
        "DBA_RSRC_IO_CALIBRATE", 1829, 367, 0.001, 2, "08-OCT-21 04.24.06.317964 PM")
    assert r.max_pmbps is not None and r.max_pmbps.value == 346 and r.max_iops.loc.line == 48


def test_genuine_calibrate_io_import(tmp_path):
    path = LYN / "2021-10-08-calibrate-io.txt"
    code, text = cli("import", "calibrate-io", str(path), "--out", str(tmp_path / "cal"))
    assert code == 0, text
    assert "1,829" in text and "0.001 ms" in text and f"{path}:48" in text


def test_sqlplus_tabs_keep_the_columns():
    """The AUX_STATS$ paste's heading (line 3) is 'PNAME' + four tabs + '    PVAL1', as SQL*Plus (SET TAB ON)
    printed it: with 8-column tab stops PVAL1 ends where its dash line (line 4) ends."""
    raw = (LYN / "2021-07-23-aux-stats-mbrc.txt").read_text()
    assert "PNAME\t\t\t\t    PVAL1" in raw
    heading, dashes = text_lines(raw)[2:4]
    assert is_dash_line(dashes.text) and len(heading.text.rstrip()) == len(dashes.text) == 41


def test_aux_stats_select_without_sname_is_refused_at_its_heading(tmp_path):
    """'select pname, PVAL1 from aux_stats$ where pname='MBRC'' (never gathered: PVAL1 NULL) holds no
    statistic to import: refused at the heading, saying which SELECT to paste."""
    path = LYN / "2021-07-23-aux-stats-mbrc.txt"
    code, text = cli("import", "aux-stats", str(path), "--out", str(tmp_path / "aux"))
    assert code == 2
    assert f"{path}: line 3: SNAME: the heading 'PNAME PVAL1' has no SNAME column" in text
    assert "SELECT sname, pname, pval1, pval2 FROM sys.aux_stats$" in text
    assert not (tmp_path / "aux").exists()


@pytest.mark.parametrize("name", AWR_TEXTS)
def test_every_genuine_awr_imports_and_reports(name, tmp_path, monkeypatch):
    monkeypatch.setenv("BLOCKLAB_RESULTS", str(tmp_path / "results"))
    out = tmp_path / "run"
    code, text = cli("import", "awr", str(LYN / name), "--out", str(out))
    assert code == 0, text
    assert json.loads((out / "import-notes.json").read_text())["files"][str(LYN / name)]["not_read"] == []
    for command in (["report", str(out)], ["export", str(out), "--format", "csv"], ["analyse", str(out)]):
        code, text = cli(*command)
        assert code == 0, (command, text)
