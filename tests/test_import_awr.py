"""AWR text reports in each documented layout (11.2.0.3 Top 5, 11.2.0.4's
truncated Top 10, 12.1, 19c with unit suffixes and SQL*Plus page headings),
the number and column helpers under them, and `blocklab import awr`: seed
002's two profiles side by side."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from blocklab.cli import main
from blocklab.importers.awr import parse_awr
from blocklab.importers.common import (
    ImportInputError,
    Loc,
    cut,
    duration_ms,
    labels,
    number,
    spans,
)
from blocklab.importers.profile import awr_profile
from blocklab.report.writer import write_report
from blocklab.results import RunDir

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "oracle"
LAYOUTS = FIXTURES / "awr" / "layouts"


def line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().split("\n"), 1) if text in line)


# ---------------------------------------------------------------------- helpers
def test_numbers_as_awr_prints_them():
    loc = Loc("f", 3)
    assert number("21,628,695", loc, "Waits") == 21_628_695
    assert number(".918", loc, "x") == 0.918
    assert number("1.69E+05", loc, "x") == 169_000
    assert number("558.", loc, "x") == 558
    assert number("16.4K", loc, "x", suffix=True) == pytest.approx(16_400)
    with pytest.raises(ImportInputError, match=r"f: line 3: Time: shows '####'"):
        number("####", loc, "Time")
    with pytest.raises(ImportInputError, match="misplaced thousands separator"):
        number("2,16,00", loc, "x")
    with pytest.raises(ImportInputError, match="never prints"):
        number("10,868", loc, "LATENCY", commas=False)
    with pytest.raises(ImportInputError, match="cannot read '16.4K'"):
        number("16.4K", loc, "x")  # a K only where the layout prints one


def test_durations_carry_their_unit_or_the_columns():
    loc = Loc("f", 1)
    assert duration_ms("758.64us", loc, "Avg", None) == pytest.approx(0.75864)
    assert duration_ms("3.23ms", loc, "Avg", None) == pytest.approx(3.23)
    assert duration_ms("52.86 s", loc, "Avg", None) == pytest.approx(52_860)
    assert duration_ms("11", loc, "Avg", "ms") == 11
    with pytest.raises(ImportInputError, match="has no unit"):
        duration_ms("11", loc, "Avg Wait", None)


def test_columns_are_cut_at_the_dashes_and_an_overflow_is_refused():
    dash = "------------------------------ ------------ -----------"
    cols = spans(dash)
    assert labels(["Event                                 Waits     Time(s)"], cols) == ["Event", "Waits", "Time(s)"]
    row = "db file sequential read          21,628,695      16,407"
    assert cut(row, cols, Loc("f", 9), ["Event", "Waits", "Time"]) == ["db file sequential read", "21,628,695", "16,407"]
    shifted = "db file sequential read            21,628,695    16,407"
    with pytest.raises(ImportInputError, match=r"f: line 9: Time: .* runs across the gap"):
        cut(shifted, cols, Loc("f", 9), ["Event", "Waits", "Time"])


# ---------------------------------------------------------------------- layouts
def test_11g_top5_layout():
    path = LAYOUTS / "awr_11g.txt.24"
    r = parse_awr(path)
    assert r.release == "11.2.0.3.0" and r.top_title == "Top 5 Timed Foreground Events"
    assert [e.name for e in r.top_events][:2] == ["db file sequential read", "DB CPU"]
    seq = r.top_events[0]
    assert seq.loc.line == line_of(path, "db file sequential read   ")
    latency, how = seq.latency_ms()
    assert how == "Time / Waits" and latency == pytest.approx(1000 * seq.time_s / seq.waits)
    assert r.top_events[1].waits is None and r.top_events[1].wait_class == ""
    assert r.load["executes"].value > 0 and r.load["db_time"].what == "Load Profile 'DB Time(s)' per second"
    assert r.per_second("physical read IO requests").loc.line == line_of(path, "physical read IO requests")
    assert r.parameters["db_block_size"][0] == "8192"
    assert r.foreground_events  # 11g lists them too


def test_11204_truncated_time_column():
    r = parse_awr(LAYOUTS / "awr_11204.txt.24")
    assert r.top_title == "Top 10 Foreground Events by Total Wait Time"
    assert all(e.time_truncated for e in r.top_events)
    lines = (LAYOUTS / "awr_11204.txt.24").read_text().split("\n")
    cut_rows = [e for e in r.top_events if re.fullmatch(r"\d{3}\.", lines[e.loc.line - 1][44:48].strip())]
    assert cut_rows, "the fixture has a value the 4-character column cuts ('456.')"
    for e in cut_rows:
        assert e.time_s == float(lines[e.loc.line - 1][44:48])  # '456.' is read as 456: cut, not rounded
    assert r.load["redo_bytes"].what == "Load Profile 'Redo size (bytes)' per second"


def test_12c_layout():
    r = parse_awr(LAYOUTS / "awr_12c.txt.24")
    assert r.release == "12.1.0.2.0"
    seq = r.top_events[0]
    assert seq.avg_ms is not None and not seq.avg_has_unit
    assert seq.wait_class == "User I/O"


def test_19c_layout_units_and_sqlplus_headings():
    r = parse_awr(LAYOUTS / "awr_19c.txt.24")
    assert r.header["Instance"] == "slob4k" and r.header["Host Name"] == "dbhost01.lab.exa"
    seq = r.top_events[0]
    assert seq.avg_has_unit and seq.latency_ms()[1] == "Avg Wait"
    assert "background_cpu" in r.load
    assert r.per_second("physical read IO requests") is not None  # from 'Other Instance Activity Stats'
    paged = FIXTURES / "awr" / "19c" / "after.txt"
    assert "\nOUTPUT\n" in paged.read_text()
    after = parse_awr(paged)
    assert [e.name for e in after.top_events] == ["free buffer waits", "db file scattered read", "DB CPU", "log buffer space",
                                                 "latch: redo copy"]
    assert after.db_time_s().value == pytest.approx(171.0)
    # line numbers are those of the file, headings included
    assert after.top_events[0].loc.line == line_of(paged, "free buffer waits   ")


def test_slob_variables_from_the_wrapped_sql_text():
    path = FIXTURES / "slob-harness" / "bs4k-upd30" / "AWRs" / "awr.016.txt"
    r = parse_awr(path)
    assert r.slob_vars["update_pct"][0] == "30"
    assert r.slob_vars["redo_stress"][0] == "LITE"  # split over two lines: 'v_redo' / '_stress'
    assert r.slob_vars["update_pct"][1].line == line_of(path, "v_update_pct PLS_INTEGER")


def test_a_foreground_row_that_cannot_be_read_only_fails_when_used(tmp_path):
    text = (LAYOUTS / "awr_11g.txt.24").read_text()
    fg = text.index("Foreground Wait Events")
    at = text.index("control file sequential re", fg)
    broken = tmp_path / "awr.024.txt"
    broken.write_text(text[:at] + text[at:].replace(" 412 ", " 4x2 ", 1))
    r = parse_awr(broken)  # an unused row does not stop the import
    assert isinstance(r.foreground_events["control file sequential re"], ImportInputError)
    with pytest.raises(ImportInputError, match=r"Foreground Wait Events: Waits of 'control file sequential re'"):
        r.event("control file sequential re")


def test_an_unreadable_load_profile_row_only_fails_when_used(tmp_path):
    text = (FIXTURES / "slob-harness/bs4k-upd0/AWRs/awr.016.txt").read_text()
    unused = tmp_path / "unused" / "awr.016.txt"
    unused.parent.mkdir()
    unused.write_text(re.sub(r"(User calls:\s+)\S+", r"\g<1>#########", text, count=1))
    assert "#########" in unused.read_text()
    assert parse_awr(unused).load.get("executes") is not None  # the report still reads
    used = tmp_path / "used" / "awr.016.txt"
    used.parent.mkdir()
    used.write_text(re.sub(r"(Executes \(SQL\):\s+)\S+", r"\g<1>2,4x6.1", text, count=1))
    result = CliRunner().invoke(main, ["import", "slob", str(used), "--update-pct", "0", "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert f"{used}: line {line_of(used, 'Executes (SQL)')}: Load Profile 'Executes (SQL)' Per Second" in result.output


# ---------------------------------------------------------------------- profiles
@pytest.mark.parametrize("layout", ["11g", "19c"])
def test_seed_002_profiles(layout):
    before = awr_profile(parse_awr(FIXTURES / "awr" / layout / "before.txt"))[0]
    after, sources, marks = awr_profile(parse_awr(FIXTURES / "awr" / layout / "after.txt"))
    assert marks == []
    assert before.elapsed_s == pytest.approx(2503.0)
    assert before.waits["free buffer waits"] / before.elapsed_s == pytest.approx(0.84, abs=0.005)
    assert before.cpu_s == 61 and before.unaccounted_s == pytest.approx(61.0)
    assert after.elapsed_s == pytest.approx(171.0) and after.waits["free buffer waits"] == 51
    assert sources["TOTAL_TIME"].startswith(str(FIXTURES / "awr" / layout / "after.txt"))
    assert "DB CPU" in sources["CPU"]


def test_import_awr_prints_the_seed_tables_side_by_side(tmp_path):
    out = tmp_path / "awr"
    result = CliRunner().invoke(main, ["import", "awr", str(FIXTURES / "awr/11g/before.txt"), str(FIXTURES / "awr/11g/after.txt"),
                                       "--out", str(out)], terminal_width=200)
    assert result.exit_code == 0, result.output
    text = result.output
    assert text.count("TIMESOURCE") == 3  # one table per report, then both side by side
    assert re.search(r"TOTAL_TIME\s+│\s+2,503\s+│\s+100", text)
    assert re.search(r"free buffer waits\s+│\s+2,097\s+│\s+84", text)
    assert re.search(r"TOTAL_TIME\s+│\s+171\s+│\s+100", text)
    assert re.search(r"free buffer waits\s+│\s+2,097\s+│\s+84\s+│\s+51.0\s+│\s+30", text)
    assert "db_writer_processes=4" in text and "db_writer_processes=36" in text  # the change, found in init.ora
    assert "2,503 s -> 171 s" in text
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [r["settings"]["db_writer_processes"] for r in rows] == ["4", "36"]
    assert all(r["source"] == "import" for r in rows)
    env = json.loads((out / "environment.json").read_text())
    assert (env["engine"], env["engine_mode"], env["engine_version"]) == ("oracle", "import", "11.2.0.3.0")
    paths = write_report(RunDir(out))
    assert {p.name for p in paths} >= {"report.html", "time-profile.png"}
    html = (out / "report.html").read_text()
    assert "from the AWR report" in html  # the figure's caption says where its numbers come from
    assert "Not run by blocklab: 2 rows" in html


def test_labels_name_the_reports(tmp_path):
    out = tmp_path / "awr"
    result = CliRunner().invoke(main, ["import", "awr", str(FIXTURES / "awr/19c/before.txt"), str(FIXTURES / "awr/19c/after.txt"),
                                       "--label", "4 writers", "--label", "36 writers, direct I/O", "--out", str(out)])
    assert result.exit_code == 0, result.output
    rows = RunDir(out).rows()
    assert [r.settings for r in rows] == [{"report": "4 writers"}, {"report": "36 writers, direct I/O"}]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["best_label"] == "report=36 writers, direct I/O" and summary["metric"] == "db_time_s"
