"""`blocklab analyse RUN_DIR`: summary.json recomputed from the rows, on generated
run directories with block drift, and refused on what is not a run."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from click.testing import CliRunner

from blocklab.analysis.paired import BlockCell
from blocklab.analysis.simulate import NoiseModel, simulate_cells, write_run
from blocklab.analysis.summary import STATISTICS_VERSION
from blocklab.cli import main
from blocklab.report.data import load_run
from blocklab.report.reanalyse import AnalyseError, reanalyse
from blocklab.report.writer import write_report
from blocklab.results import ResultRow, RunDir

# the case: whole blocks drift by up to +-20%, cells have 3% noise
DRIFT = NoiseModel(drift_sd=0.0, noise_sd=0.03, drift_uniform=0.20)
BLOCKS = 6


def generated(tmp_path, rng, factor_b, name="run", blocks=BLOCKS):
    cells = simulate_cells(rng, {"A": 1.0, "B": factor_b}, blocks, DRIFT)
    return write_run(tmp_path / name, cells, metric="rows_per_s", goal="max", knob="workload.label").path


def test_analyse_separates_a_true_8_percent_under_20_percent_drift(tmp_path):
    rng = np.random.default_rng(20)
    separated = 0
    for i in range(40):
        summary = reanalyse(generated(tmp_path, rng, 1.08, f"r{i}")).summary
        separated += summary["best_label"] == "workload.label=B" and summary["indistinguishable"] == []
    assert separated >= 36, separated  # power about 98% with 6 blocks


def test_analyse_calls_identical_settings_indistinguishable_in_95_percent_of_cases(tmp_path):
    rng = np.random.default_rng(21)
    cases, false = 300, 0
    for _ in range(cases):
        path = generated(tmp_path, rng, 1.0, "same")
        false += reanalyse(path).summary["indistinguishable"] == []
        shutil.rmtree(path)
    # the intervals are exact 95% ones here: 15 of 300 expected; 24 or more
    # would happen with probability 1.6% if they were
    assert false < 24, false


def test_the_old_unpaired_summary_is_replaced_and_the_report_shows_it(tmp_path):
    rng = np.random.default_rng(22)
    path = generated(tmp_path, rng, 1.08)
    old = reanalyse(path, write=False).summary
    old_style = {**old, "statistics_version": 1, "verdict": "OLD VERDICT", "experiment": "kept"}
    RunDir(path).write_json("summary.json", old_style)
    data = load_run(path)
    assert any("blocklab analyse" in note for note in data.notes)  # the report says the summary is old
    result = CliRunner().invoke(main, ["analyse", str(path)])
    assert result.exit_code == 0, result.output
    assert "before (statistics version 1): OLD VERDICT" in result.output and "now: Best" in result.output
    written = json.loads((path / "summary.json").read_text())
    assert written["statistics_version"] == STATISTICS_VERSION and written["experiment"] == "kept"
    assert written["analysis"]["method"] == "paired" and written["indistinguishable"] == []
    write_report(path)
    html = (path / "report.html").read_text()
    assert written["verdict"].split(":")[0] in html and "OLD VERDICT" not in html
    assert "within the same blocks" in html and (path / "plots" / "block-drift.png").exists()
    assert not any("blocklab analyse" in note for note in load_run(path).notes)


def test_dry_run_writes_nothing(tmp_path):
    path = generated(tmp_path, np.random.default_rng(23), 1.0)
    result = CliRunner().invoke(main, ["analyse", str(path), "--dry-run"])
    assert result.exit_code == 0 and "not written (--dry-run)" in result.output
    assert not (path / "summary.json").exists()


def test_a_repaired_row_changes_the_verdict(tmp_path):
    """A row fixed by hand (here: a cell later found invalid) is what the new summary rests on."""
    rng = np.random.default_rng(24)
    path = generated(tmp_path, rng, 1.5)
    before = reanalyse(path).summary
    rows = RunDir(path).rows()
    lines = []
    for r in rows:
        if r.settings["workload.label"] == "B":
            r = ResultRow(**{**r.__dict__, "status": "invalid: cold cache not proven"})
        lines.append(r.to_json())
    (path / "results.jsonl").write_text("\n".join(lines) + "\n")
    after = reanalyse(path).summary
    assert before["best_label"] == "workload.label=B"
    assert after["best_label"] == "workload.label=A"
    assert after["cells_invalid"] == BLOCKS and after["cells_failed"] == 0  # counted apart, as the runner counts them


def test_sequential_runs_are_analysed_with_their_looks(tmp_path):
    rng = np.random.default_rng(25)
    cells = simulate_cells(rng, {"A": 1.0, "B": 1.1}, 8, DRIFT)
    fixed = write_run(tmp_path / "fixed", cells, metric="rows_per_s", goal="max").path
    seq = write_run(tmp_path / "seq", cells, metric="rows_per_s", goal="max",
                    measure={"repeats": 3, "target_ci": 0.03, "max_repeats": 15}).path
    a = reanalyse(fixed).summary["analysis"]
    b = reanalyse(seq).summary["analysis"]
    assert a["looks"] == 1 and b["looks"] == 13
    lo_a = reanalyse(fixed).summary["settings"]["setting=A"]["ratio_to_best_ci_low"]
    lo_b = reanalyse(seq).summary["settings"]["setting=A"]["ratio_to_best_ci_low"]
    assert lo_b < lo_a  # the same rows, a wider interval: 13 looks share the 5%


def test_missing_cells_keep_their_blocks(tmp_path):
    rng = np.random.default_rng(26)
    cells = simulate_cells(rng, {"A": 1.0, "B": 1.2, "C": 1.4}, 6, DRIFT)
    holed = [c for c in cells if not (c.key == "C" and c.block in (1, 4))]
    summary = reanalyse(write_run(tmp_path / "holed", holed, metric="rows_per_s", goal="max").path).summary
    assert summary["settings"]["setting=C"]["n"] == 4
    assert summary["indistinguishable"] == [] and summary["best_label"] == "setting=C"


# ---------------------------------------------------------------------- bad input
def test_not_a_run_directory_exits_2_and_says_why(tmp_path):
    runner = CliRunner()
    cases = {
        tmp_path / "missing": "does not exist",
        tmp_path: "not a blocklab results directory (no plan.json)",
    }
    (tmp_path / "afile").write_text("x")
    cases[tmp_path / "afile"] = "is not a directory"
    sysstats = tmp_path / "sys"
    sysstats.mkdir()
    (sysstats / "sysstats.json").write_text("{}")
    cases[sysstats] = "holds system statistics"
    for path, message in cases.items():
        result = runner.invoke(main, ["analyse", str(path)])
        assert result.exit_code == 2, (path, result.output)
        assert result.stdout == "" and "RUN_DIR" in result.stderr and message in result.stderr, result.output


def test_runs_without_measurements_or_with_broken_rows_exit_2(tmp_path):
    runner = CliRunner()
    path = write_run(tmp_path / "run", [BlockCell(0, "A", 1.0), BlockCell(0, "B", 2.0)], metric="rows_per_s", goal="max").path
    rows = (path / "results.jsonl").read_text()
    (path / "results.jsonl").unlink()
    result = runner.invoke(main, ["analyse", str(path)])
    assert result.exit_code == 2 and result.stdout == "" and "no results.jsonl" in result.stderr
    (path / "results.jsonl").write_text(rows.replace('"status": "ok"', '"status": "OSError: disk full"'))
    result = runner.invoke(main, ["analyse", str(path)])
    assert result.exit_code == 2 and result.stdout == "" and "no successful row" in result.stderr
    (path / "results.jsonl").write_text(rows.replace('"format": 1', '"format": 99'))
    result = runner.invoke(main, ["analyse", str(path)])
    assert result.exit_code == 2 and result.stdout == "" and "format 99" in result.stderr
    (path / "results.jsonl").write_text(rows.replace('"block": 0, ', ""))
    result = runner.invoke(main, ["analyse", str(path)])
    assert result.exit_code == 2 and result.stdout == "" and "lacks the field 'block'" in result.stderr
    (path / "results.jsonl").write_text(rows.replace("rows_per_s", "iops"))
    with pytest.raises(AnalyseError, match="no row measures 'rows_per_s'"):
        reanalyse(path)


def test_help_has_an_example():
    result = CliRunner().invoke(main, ["analyse", "--help"])
    assert result.exit_code == 0 and "blocklab analyse results/" in result.output


# ---------------------------------------------------------------------- the drift plot
def test_the_drift_plot_shows_each_blocks_drift_and_needs_three_blocks(tmp_path):
    from blocklab.report.drift_plot import drift_figure

    factors = [1.0, 1.2, 0.9, 1.0]  # block 2 ran 20% fast, block 3 10% slow, all settings alike
    cells = [BlockCell(b, k, 1e7 * level * f * (1.0 + 0.001 * ((b + i) % 3)))
             for b, f in enumerate(factors) for i, (k, level) in enumerate({"A": 1.0, "B": 0.5, "C": 2.0}.items())]
    path = write_run(tmp_path / "drift", cells, metric="rows_per_s", goal="max").path
    fig, caption = drift_figure(load_run(path))
    line = fig.axes[0].lines[1]  # the blocks' line (the dots come first)
    drift = list(line.get_ydata())
    mean = np.exp(np.mean(np.log(factors)))
    assert drift == pytest.approx([(f / mean - 1) * 100 for f in factors], abs=0.5)
    assert "-12% to +18% here" in caption  # 0.9 and 1.2 against the average block (1.019)
    two = write_run(tmp_path / "two", [c for c in cells if c.block < 2], metric="rows_per_s", goal="max").path
    assert drift_figure(load_run(two)) is None
