"""Reports and exports: exporters return bytes, the writer writes them atomically,
and partial runs, torn lines and failed cells still give a valid report.

Most tests read one real quick mbrc run on an embedded PostgreSQL (made once per
module); the generic-plot tests use small hand-made results directories."""

from __future__ import annotations

import csv
import io
import itertools
import json
import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import blocklab_bin
from markupsafe import escape

from blocklab.cli import main
from blocklab.report import writer
from blocklab.report.csv_export import export_csv
from blocklab.report.data import load_run
from blocklab.report.html import context as html_context
from blocklab.report.html import render_html
from blocklab.report.json_export import export_json
from blocklab.report.parquet_export import ExportUnavailable, export_parquet
from blocklab.report.plots import make_plots
from blocklab.results import ResultRow, ResultsError, RunDir

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
VALUES = (1, 8, 64)


# ---------------------------------------------------------------------- inputs
@pytest.fixture(scope="module")
def real_run(cache_dir, tmp_path_factory) -> Path:
    """A real quick mbrc run: 3 settings x 2 repeats on PostgreSQL, cold cache."""
    out = tmp_path_factory.mktemp("report") / "mbrc"
    env = dict(os.environ)
    env["BLOCKLAB_CACHE"] = str(cache_dir / "report-tests")
    env.pop("FORCE_COLOR", None)
    args = ["run", "mbrc", "--quick", "--rows", "100000", "--set", "multiblock_read=" + ",".join(map(str, VALUES)),
            "--repeats", "2", "--seed", "5", "--out", str(out)]
    result = subprocess.run([blocklab_bin(), *args], env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    return out


@pytest.fixture
def run_copy(real_run, tmp_path) -> Path:
    """A private copy of the real run, to damage."""
    target = tmp_path / "copy"
    shutil.copytree(real_run, target)
    for leftover in ("report.html", "plots"):
        path = target / leftover
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
    return target


def hand_made_run(path: Path, knobs: dict, *, metric="elapsed_s", goal="min", failed=(), rows=True) -> Path:
    """A results directory written the way the runner writes one, without an engine."""
    rd = RunDir(path)
    rd.create()
    names = list(knobs)
    settings = [dict(zip(names, combo)) for combo in itertools.product(*knobs.values())]
    cells = []
    for block in range(3):
        for s in settings:
            label = ", ".join(f"{k}={'on' if v is True else 'off' if v is False else v}" for k, v in s.items())
            cells.append({"index": len(cells), "block": block, "cell_id": f"b{block}:{label}", "settings": s})
    rd.write_json("plan.json", {"seed": 3, "settings": settings, "apply_class": {}, "cells": cells})
    spec = {
        "name": "demo", "description": "hand-made", "engine": {"kind": "sqlite", "settings": {}},
        "dataset": {"rows": 1000}, "workload": {"kind": "row_insert"}, "knobs": knobs,
        "measure": {"repeats": 3, "cache": "warm", "metric": metric, "goal": goal},
    }
    rd.write_json("spec.json", {"source": "demo.toml", "spec": spec, "options": {}})
    rd.write_text("experiment.toml", 'name = "demo"\n# notes: https://example.org/why\n')
    rd.write_json("environment.json", {"host": "h", "engine": "sqlite", "engine_version": "3.50", "device": "vda"})
    if rows:
        for c in cells:
            ok = c["index"] not in failed
            value = 1.0 + 0.1 * (c["index"] % len(settings)) + 0.01 * c["block"]
            rd.append(ResultRow(cell=c["index"], block=c["block"], settings=c["settings"], applied={},
                                metrics={metric: value} if ok else {}, status="ok" if ok else "RuntimeError: disk full",
                                cell_id=c["cell_id"]))
    return path


def external_urls(html: str, experiment_text: str) -> list[str]:
    """http(s) URLs in the page, other than those inside the experiment file's text."""
    html = html.replace(str(escape(experiment_text)), "")
    return re.findall(r"(?:https?:)?//[A-Za-z0-9.-]+\.[A-Za-z]{2,}[^\s\"'<>]*", html)


# ---------------------------------------------------------------------- exporters
@pytest.mark.engine
def test_csv_has_a_header_and_one_line_per_cell(real_run):
    data = load_run(real_run)
    out = export_csv(data)
    assert isinstance(out, bytes)
    table = list(csv.DictReader(io.StringIO(out.decode())))
    assert len(table) == len(RunDir(real_run).rows()) == len(VALUES) * 2
    header = out.decode().splitlines()[0].split(",")
    for col in ("cell", "cell_id", "block", "status", "multiblock_read", "applied.multiblock_read", "rows_per_s", "mb_per_s", "avg_read_kb"):
        assert col in header
    assert {int(r["multiblock_read"]) for r in table} == set(VALUES)
    assert all(float(r["rows_per_s"]) > 0 for r in table)


@pytest.mark.engine
def test_json_round_trips(real_run):
    data = load_run(real_run)
    doc = json.loads(export_json(data))
    assert doc["experiment"] == "mbrc" and doc["complete"] is True
    assert doc["rows"] == [json.loads(r.to_json()) for r in RunDir(real_run).rows()]
    assert doc["summary"]["verdict"] == json.loads((real_run / "summary.json").read_text())["verdict"]
    assert doc["environment"]["engine"] == "postgres"
    assert doc["experiment_file"] == (real_run / "experiment.toml").read_text()


@pytest.mark.engine
def test_parquet_needs_pyarrow_or_writes_parquet(real_run):
    data = load_run(real_run)
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        with pytest.raises(ExportUnavailable, match=r"pip install 'blocklab\[parquet\]'"):
            export_parquet(data)
    else:
        assert export_parquet(data)[:4] == b"PAR1"


@pytest.mark.engine
def test_plots_are_valid_png_and_svg(real_run):
    data = load_run(real_run)
    plots = make_plots(data)
    assert [p.id for p in plots] == ["mbrc-rows-per-s", "mbrc-mb-per-s"]
    for p in plots:
        assert p.png.startswith(PNG_MAGIC) and len(p.png) > 20_000
        root = ET.fromstring(p.svg)
        assert root.tag.endswith("svg")
    assert b"device-limit" not in plots[1].svg
    limited = make_plots(data, {"max_mb_per_s": 1234.0})
    assert b"device-limit" in limited[1].svg  # the limit line on the MB/s plot
    assert b"device-limit" not in limited[0].svg  # not on rows/s


@pytest.mark.engine
def test_html_has_the_verdict_table_plots_and_nothing_external(real_run):
    data = load_run(real_run)
    plots = make_plots(data)
    html = render_html(data, plots).decode()
    assert all(str(escape(line)) in html for line in data.summary["verdict"].splitlines())
    assert "Best multiblock_read is" in html and 'id="how-to-read"' in html
    assert 'id="settings-table"' in html
    for value, size in ((1, "8 kB"), (8, "64 kB"), (64, "512 kB")):
        assert f"{value} ({size})" in html
    for p in plots:
        assert f'id="plot-{p.id}"' in html
    assert "data:text/csv;charset=utf-8;base64," in html  # the raw results, downloadable
    assert "PostgreSQL 18" in html and "io_max_combine_limit" in html
    # the engine's full parameter set is there, folded away
    assert re.search(r'<details id="engine-settings">\s*<summary>All \d+ engine parameters', html)
    assert external_urls(html, data.experiment_text) == []
    assert not re.search(r"""(src|href)=["'](?!data:|#)""", html)


@pytest.mark.engine
def test_write_report_writes_html_and_plots_atomically(run_copy):
    paths = writer.write_report(run_copy)
    assert paths[0] == run_copy / "report.html"
    assert {p.name for p in paths[1:]} == {"mbrc-rows-per-s.png", "mbrc-rows-per-s.svg", "mbrc-mb-per-s.png", "mbrc-mb-per-s.svg"}
    assert all(p.exists() and p.stat().st_size > 0 for p in paths)
    assert not list(run_copy.rglob(".*.tmp"))
    assert (run_copy / "plots" / "mbrc-rows-per-s.png").read_bytes().startswith(PNG_MAGIC)


# ---------------------------------------------------------------------- damaged runs
@pytest.mark.engine
def test_report_of_an_interrupted_run_with_a_torn_line(run_copy):
    results = run_copy / "results.jsonl"
    lines = results.read_text().splitlines()
    results.write_text("\n".join(lines[:3]) + "\n" + lines[3][: len(lines[3]) // 2])  # crash mid-line
    result = CliRunner().invoke(main, ["report", str(run_copy)])
    assert result.exit_code == 0, result.output
    printed = result.output.split()
    assert str(run_copy / "report.html") in printed
    assert any(p.endswith(".png") for p in printed) and not any(p.endswith(".svg") for p in printed)
    html = (run_copy / "report.html").read_text()
    assert "Partial run: 3 of 6 cells measured" in html
    assert "1 incomplete line(s)" in html
    assert "recomputed" in html  # summary.json counted 6 cells; the page counts the 3 that are there
    data = load_run(run_copy)
    assert data.summary["cells_ok"] == 3 and not data.complete


@pytest.mark.engine
def test_report_and_analyse_explain_print_how_the_verdict_was_judged(run_copy):
    for command in (["report", str(run_copy), "--explain"], ["analyse", str(run_copy), "--dry-run", "--explain"]):
        result = CliRunner().invoke(main, command)
        assert result.exit_code == 0, result.output
        summary = load_run(run_copy).summary
        assert summary["verdict"].splitlines()[0] in result.output
        explained = result.output.split("How to read this:\n", 1)[1]
        assert "block-adjusted level" in explained and "Ratios compare the settings within each of the 2 blocks" in explained
    html = (run_copy / "report.html").read_text()
    assert 'id="how-to-read"' in html and all(str(escape(line)) in html for line in summary["explain"])


@pytest.mark.engine
def test_a_partial_run_names_no_best_until_every_setting_has_its_blocks(run_copy):
    # issue 30: "Best multiblock_read is 32 (256 kB)" was the headline after 1 of 16 cells
    results = run_copy / "results.jsonl"
    lines = results.read_text().splitlines()
    for kept in (1, 4):  # one cell; then a whole block and one more (each setting has 1 of its 2 blocks)
        results.write_text("\n".join(lines[:kept]) + "\n")
        (run_copy / "summary.json").unlink(missing_ok=True)
        result = CliRunner().invoke(main, ["report", str(run_copy)])
        assert result.exit_code == 0, result.output
        html = (run_copy / "report.html").read_text()
        data = load_run(run_copy)
        assert data.summary["best_label"] is None and data.summary["partial"]["cells"] == kept
        assert data.summary["verdict"].startswith(f"Partial run: {kept} of 6 cells measured; no best yet: ")
        assert "Best multiblock_read" not in html and "a best is named once every setting has 2" in html
        assert "best" not in [row["note"] for row in html_context(data, [])["settings_table"]]
    # once every setting has its two blocks the run is complete and names its best
    results.write_text("\n".join(lines) + "\n")
    (run_copy / "summary.json").unlink(missing_ok=True)
    assert CliRunner().invoke(main, ["report", str(run_copy)]).exit_code == 0
    assert "Best multiblock_read is" in (run_copy / "report.html").read_text()


@pytest.mark.engine
def test_report_with_failed_cells(run_copy):
    results = run_copy / "results.jsonl"
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    for r in rows[:2]:
        r.update(status="OperationalError: could not read block 7 <of> file", metrics={}, applied={})
    results.write_text("".join(json.dumps(r) + "\n" for r in rows))
    summary = json.loads((run_copy / "summary.json").read_text())
    summary["cells_ok"], summary["cells_failed"] = 4, 2
    (run_copy / "summary.json").write_text(json.dumps(summary))
    paths = writer.write_report(run_copy)
    html = paths[0].read_text()
    assert 'id="failed-table"' in html and "2 cell(s) failed" in html
    assert "could not read block 7 &lt;of&gt; file" in html  # escaped, not markup
    assert len([p for p in paths if p.suffix == ".png"]) == 2


def test_report_before_the_first_cell(tmp_path):
    path = hand_made_run(tmp_path / "empty", {"checksum": ["off", "crc32"]}, rows=False)
    paths = writer.write_report(path)
    assert paths == [path / "report.html"]
    html = paths[0].read_text()
    assert "No plot yet" in html and "Partial run: 0 of 6 cells" in html


def test_not_a_results_directory(tmp_path):
    with pytest.raises(ResultsError, match="not a blocklab results directory"):
        writer.write_report(tmp_path)
    result = CliRunner().invoke(main, ["report", str(tmp_path)])
    assert result.exit_code == 2
    assert result.stdout == "" and "RUN_DIR" in result.stderr and "not a blocklab results directory" in result.stderr
    result = CliRunner().invoke(main, ["export", str(tmp_path / "nope")])
    assert result.exit_code == 2 and result.stdout == "" and "RUN_DIR" in result.stderr


# ---------------------------------------------------------------------- the generic plot
@pytest.mark.parametrize(
    "knobs",
    [
        {"checksum": ["off", "crc32", "full_crc32"]},  # categorical: bars
        {"block_size": [4096, 8192], "checksum": [False, True]},  # two knobs: bars
        {"writers": [1, 2, 4, 8]},  # numeric: a line with its band
    ],
)
def test_every_sweep_has_a_picture(tmp_path, knobs):
    path = hand_made_run(tmp_path / "run", knobs, failed=(1,))
    data = load_run(path)
    plots = make_plots(data)
    assert plots[0].id == "demo-elapsed-s"  # the generic picture first; recipe pictures may follow
    assert {p.id for p in plots[1:]} <= {"checksum-overhead", "block-drift"}
    assert plots[0].png.startswith(PNG_MAGIC)
    ET.fromstring(plots[0].svg)
    html = render_html(data, plots).decode()
    assert 'id="plot-demo-elapsed-s"' in html and "disk full" in html
    assert external_urls(html, data.experiment_text) == []  # the experiment's own URL is allowed


# ---------------------------------------------------------------------- export command
def test_export_bad_format_names_the_option_and_the_choices(tmp_path):
    path = hand_made_run(tmp_path / "run", {"checksum": ["off", "crc32"]})
    result = CliRunner().invoke(main, ["export", str(path), "--format", "xml"])
    assert result.exit_code == 2
    assert result.stdout == "" and "--format" in result.stderr and "'csv', 'json', 'parquet'" in result.stderr


def test_export_to_stdout_and_to_a_file(tmp_path):
    path = hand_made_run(tmp_path / "run", {"checksum": ["off", "crc32"]})
    result = CliRunner().invoke(main, ["export", str(path)])
    assert result.exit_code == 0
    assert result.output.splitlines()[0].startswith("cell,cell_id,block,started,status,setting,checksum")
    assert len(result.output.splitlines()) == 1 + 6
    out = tmp_path / "x.json"
    result = CliRunner().invoke(main, ["export", str(path), "--format", "json", "--output", str(out)])
    assert result.exit_code == 0 and str(out) in result.output
    assert len(json.loads(out.read_text())["rows"]) == 6
    result = CliRunner().invoke(main, ["export", str(path), "--output", str(tmp_path / "no" / "x.csv")])
    assert result.exit_code == 2 and result.stdout == "" and "--output" in result.stderr


def test_export_parquet_without_pyarrow_says_how_to_get_it(tmp_path):
    try:
        import pyarrow  # noqa: F401

        pytest.skip("pyarrow is installed")
    except ImportError:
        pass
    path = hand_made_run(tmp_path / "run", {"checksum": ["off", "crc32"]})
    result = CliRunner().invoke(main, ["export", str(path), "--format", "parquet", "--output", str(tmp_path / "x.parquet")])
    assert result.exit_code == 1 and result.stdout == "" and "pip install 'blocklab[parquet]'" in result.stderr


# ---------------------------------------------------------------------- during a run
def test_refresh_report_skips_while_cheap_cells_follow_and_never_raises(tmp_path, monkeypatch):
    path = hand_made_run(tmp_path / "run", {"checksum": ["off", "crc32"]})
    calls = []
    monkeypatch.setattr(writer, "write_report", lambda p: calls.append(p))
    now = [100.0]

    def clock():
        now[0] += 1.0  # every write "takes" one second
        return now[0]

    assert writer.refresh_report(path, clock=clock) is None
    assert writer.refresh_report(path, clock=clock) is None  # one second later: skipped
    assert len(calls) == 1
    now[0] += 4
    writer.refresh_report(path, clock=clock)
    assert len(calls) == 1  # 6 s after a 1 s render: a tenth of the time at most waits 9 s
    now[0] += 10
    writer.refresh_report(path, clock=clock)
    assert len(calls) == 2
    writer.refresh_report(path, force=True, clock=clock)
    assert len(calls) == 3
    monkeypatch.setattr(writer, "write_report", lambda p: (_ for _ in ()).throw(ResultsError("broken")))
    assert "broken" in writer.refresh_report(path, force=True, clock=clock)


def test_device_limits_come_from_the_newest_calibration_beside_the_run(tmp_path, monkeypatch):
    # a real `blocklab calibrate` under ./results must not leak into this test
    monkeypatch.setenv("BLOCKLAB_RESULTS", str(tmp_path / "no-results-here"))
    from blocklab.device import calibrate
    from blocklab.device.fio import Point
    from blocklab.report.writer import device_limits

    run = hand_made_run(tmp_path / "demo-run", {"checksum": ["off", "crc32"]})
    assert device_limits(load_run(run)) is None
    points = (
        Point("seq", 1 << 20, 32, 1400.0, 1468.0, 20.0, 30.0, 5.0),
        Point("rand", 8192, 32, 52000.0, 426.0, 0.6, 1.0, 5.0),
    )
    plan = calibrate.CalibrationPlan(tuple(calibrate.PlannedPoint(p.pattern, p.block_size, p.iodepth) for p in points), 5.0, 1.0, 1 << 30)
    cal = calibrate.Calibration(
        directory=str(tmp_path), device={"name": "vda"}, ioengine="libaio", ioengine_note="", fio_version="fio-3",
        plan=plan.to_dict(), points=points, complete=True, finished="2026-01-01T00:00:00+00:00",
    )
    calibrate.save_calibration(cal, tmp_path / "calibrate-vda")
    assert device_limits(load_run(run)) == {"max_mb_per_s": 1468.0, "max_small_iops": 52000.0}


def test_the_settings_caption_says_when_the_ratios_are_judged_as_one_family():
    from types import SimpleNamespace

    from blocklab.report.html import _settings_caption

    paired = {"method": "paired", "looks": 1, "confidence_per_look": 0.95}
    alone = _settings_caption(SimpleNamespace(summary={"analysis": paired}))
    family = _settings_caption(SimpleNamespace(summary={"analysis": {**paired, "family": "step-down range"}}))
    assert "hold together" not in alone
    assert "hold together" in family and "the best's lucky pick" in family and "95% interval" in family


def test_an_invalid_row_does_not_make_the_summary_stale_and_a_recompute_keeps_the_trace(tmp_path):
    """Invalid rows are counted apart from ok and failed ones: a run with one was 'stale' at every
    render (the summary recomputed, with a false note), and the recompute dropped the trace."""
    from blocklab.report.data import recompute_summary
    from blocklab.runner import validity_counts

    path = hand_made_run(tmp_path / "run", {"block_size": [4096, 8192]}, rows=False)
    rd = RunDir(path)
    spec = rd.read_json("spec.json")
    spec["spec"]["measure"]["trace_function"] = "pg_checksum_page"
    rd.write_json("spec.json", spec)
    plan = rd.read_json("plan.json")

    def row(c: dict, status: str = "ok") -> ResultRow:
        trace = {"function": "pg_checksum_page", "calls": 100 * (c["index"] + 1), "total_ns": 5000, "hist_ns": {"512": 100}}
        return ResultRow(cell=c["index"], block=c["block"], settings=c["settings"], applied={},
                         metrics={"elapsed_s": 1.0 + 0.1 * c["index"], "rows": 1000.0}, status=status,
                         cell_id=c["cell_id"], notes={"trace": trace})

    cells = plan["cells"]
    rd.append(row(cells[0], "invalid: the cold start was not proven"))
    for c in cells[:4]:
        rd.append(row(c))
    summary = recompute_summary(load_run(path))
    summary.update(validity_counts(rd.rows()))  # as the runner writes it
    assert "trace" in summary and summary["cells_invalid"] == 1
    rd.write_json("summary.json", summary)

    data = load_run(path)
    assert not data.summary_recomputed and not any("older than" in n for n in data.notes), data.notes
    assert data.summary["trace"] == summary["trace"]

    rd.append(row(cells[4]))  # a row the summary has not seen: recomputed, the trace and the counts with it
    data = load_run(path)
    assert data.summary_recomputed
    assert data.summary["cells_ok"] == 5 and data.summary["cells_invalid"] == 1 and data.summary["cells_failed"] == 0
    assert set(data.summary["trace"]["settings"]) == {"block_size=4096", "block_size=8192"}
    assert data.summary["trace"]["settings"]["block_size=4096"]["cells"] == 3  # cells 0, 2 and 4 (the invalid one left out)
