"""The runner on the null engine: rows, failures, interruption and resume."""

from __future__ import annotations

import json

import pytest

from blocklab import run_summary
from blocklab.experiment import prepare
from blocklab.results import RESULTS_FILE, RunDir
from blocklab.run_summary import summary_due
from blocklab.runner import Interrupted, SilentReporter, run
from blocklab.spec import spec_from_dict


def null_experiment(**workload):
    raw = {
        "name": "nulltest",
        "engine": {"kind": "null", "settings": {"null.mode": "a"}},
        "workload": {"kind": "null", **workload},
        "knobs": {"null.level": [1, 2, 3]},
        "measure": {"repeats": 3, "seed": 5, "cache": "warm"},
    }
    spec = spec_from_dict(raw, "test", {})
    return prepare(spec, "# test", "test")


def test_full_run_writes_one_row_per_cell(tmp_path):
    exp = null_experiment()
    run_dir = RunDir(tmp_path / "run")
    summary = run(exp, run_dir, SilentReporter())
    rows = run_dir.rows()
    assert len(rows) == 9
    assert sorted(r.cell_id for r in rows) == sorted(c.cell_id for c in exp.plan().cells)
    first = json.loads(run_dir.file(RESULTS_FILE).read_text().splitlines()[0])
    for key in ("format", "cell", "block", "settings", "applied", "metrics", "status"):
        assert key in first
    assert first["format"] == 1 and first["status"] == "ok"
    assert summary["best"] == {"null.level": 3}
    assert set(summary["medians"]) == {"null.level=1", "null.level=2", "null.level=3"}
    for name in ("experiment.toml", "spec.json", "plan.json", "environment.json", "summary.json"):
        assert run_dir.file(name).exists(), name


def test_failed_cell_is_recorded_and_run_goes_on(tmp_path):
    exp = null_experiment(fail_level=2)
    run_dir = RunDir(tmp_path / "run")
    summary = run(exp, run_dir, SilentReporter())
    rows = run_dir.rows()
    assert len(rows) == 9
    failed = [r for r in rows if not r.ok]
    assert len(failed) == 3 and all("told to fail at level 2" in r.status for r in failed)
    assert summary["cells_failed"] == 3


class InterruptAfter(SilentReporter):
    def __init__(self, n):
        super().__init__()
        self.n = n

    def cell_done(self, cell, row, line):
        super().cell_done(cell, row, line)
        self.n -= 1
        if self.n == 0:
            raise KeyboardInterrupt


def test_interrupt_then_resume_runs_every_cell_exactly_once(tmp_path):
    run_dir = RunDir(tmp_path / "run")
    exp = null_experiment()
    with pytest.raises(Interrupted, match="4 of 9 cells are saved"):
        run(exp, run_dir, InterruptAfter(4))
    assert exp.engine.started is False, "the engine must be stopped on Ctrl-C"
    assert len(run_dir.rows()) == 4
    # a torn line from a crash mid-write must not break the resume
    with open(run_dir.file(RESULTS_FILE), "a") as f:
        f.write('{"format": 1, "cell": 99, "blo')
    exp2 = null_experiment()
    run(exp2, run_dir, SilentReporter(), resume=True)
    ids = [r.cell_id for r in run_dir.rows()]
    assert sorted(ids) == sorted(c.cell_id for c in exp2.plan().cells)
    assert len(ids) == len(set(ids)) == 9


def test_the_summary_after_a_cell_takes_at_most_a_tenth_of_the_time(tmp_path):
    run_dir = RunDir(tmp_path / "throttled")
    now = [100.0]
    written = []

    def write(cost):
        def go():
            now[0] += cost
            written.append(now[0])
        return go

    def clock():
        return now[0]

    assert summary_due(run_dir, write(0.5), clock)  # the first: always
    now[0] += 4.0  # 4 s later: under 9x the 0.5 s it cost
    assert not summary_due(run_dir, write(0.5), clock)
    now[0] += 0.6  # 4.6 s after it ended: due
    assert summary_due(run_dir, write(0.01), clock)
    now[0] += 0.1  # a cheap summary is rewritten after the next cell
    assert summary_due(run_dir, write(0.01), clock)
    assert len(written) == 3
    now[0] += 1.0
    with pytest.raises(OSError):  # a failing rewrite is not swallowed, and its cost still counts
        summary_due(run_dir, lambda: (_ for _ in ()).throw(OSError("disk full")), clock)


def test_ctrl_c_leaves_the_summary_of_every_saved_row(tmp_path, monkeypatch):
    monkeypatch.setattr(run_summary, "_SUMMARY_SHARE", 1e-9)  # after the first cell no rewrite is ever due
    run_dir = RunDir(tmp_path / "run")
    with pytest.raises(Interrupted, match="5 of 9 cells are saved"):
        run(null_experiment(), run_dir, InterruptAfter(5))
    summary = json.loads(run_dir.file("summary.json").read_text())
    assert summary["cells_ok"] + summary["cells_failed"] == 5 == len(run_dir.rows())


class FailAfter(InterruptAfter):
    def cell_done(self, cell, row, line):
        try:
            super().cell_done(cell, row, line)
        except KeyboardInterrupt:
            raise OSError("the disk went away") from None


class InterruptAtStart(SilentReporter):
    def plan_started(self, *args):
        raise KeyboardInterrupt


def test_an_error_also_leaves_the_summary_of_every_saved_row_and_a_run_stopped_at_once_none(tmp_path, monkeypatch):
    monkeypatch.setattr(run_summary, "_SUMMARY_SHARE", 1e-9)
    run_dir = RunDir(tmp_path / "run")
    with pytest.raises(OSError, match="the disk went away"):
        run(null_experiment(), run_dir, FailAfter(6))
    summary = json.loads(run_dir.file("summary.json").read_text())
    assert summary["cells_ok"] + summary["cells_failed"] == 6 == len(run_dir.rows())
    stopped = RunDir(tmp_path / "stopped")
    with pytest.raises(Interrupted, match="0 of 9 cells are saved"):
        run(null_experiment(), stopped, InterruptAtStart())
    assert not stopped.file("summary.json").exists()  # no row, no summary (as before the rewrites were spaced)


def test_resume_refuses_a_different_experiment(tmp_path):
    run_dir = RunDir(tmp_path / "run")
    run(null_experiment(), run_dir, SilentReporter())
    raw = {
        "engine": {"kind": "null"},
        "workload": {"kind": "null"},
        "knobs": {"null.level": [7, 8]},
        "measure": {"repeats": 1, "seed": 5},
    }
    other = prepare(spec_from_dict(raw, "test", {}), "", "test")
    from blocklab.spec import SpecError

    with pytest.raises(SpecError, match="differs from the one this run started with"):
        run(other, run_dir, SilentReporter(), resume=True)


def test_new_run_refuses_existing_dir(tmp_path):
    run_dir = RunDir(tmp_path / "run")
    run(null_experiment(), run_dir, SilentReporter())
    from blocklab.spec import SpecError

    with pytest.raises(SpecError, match="already holds a run"):
        run(null_experiment(), run_dir, SilentReporter())


def test_bad_knob_value_fails_before_anything_runs(tmp_path):
    raw = {"engine": {"kind": "null"}, "workload": {"kind": "null"}, "knobs": {"null.level": [1, 5000]}}
    from blocklab.spec import SpecError

    with pytest.raises(SpecError, match=r"5000 is out of range; accepted: an integer from 0 to 1,000"):
        prepare(spec_from_dict(raw, "test", {}), "", "test")


def test_unknown_workload_and_option():
    from blocklab.spec import SpecError

    with pytest.raises(SpecError, match="workload.kind: 'scan' is not accepted; accepted: .*full_scan"):
        prepare(spec_from_dict({"engine": {"kind": "null"}, "workload": {"kind": "scan"}}, "t", {}), "", "t")
    with pytest.raises(SpecError, match="workload.speed: unknown option for workload 'null'"):
        prepare(spec_from_dict({"engine": {"kind": "null"}, "workload": {"kind": "null", "speed": 1}}, "t", {}), "", "t")


def test_workload_options_can_be_swept(tmp_path):
    raw = {
        "engine": {"kind": "null"},
        "workload": {"kind": "null"},
        "knobs": {"null.level": [1, 2], "workload.sleep_s": [0.0, 0.001]},
        "measure": {"repeats": 2, "seed": 1, "cache": "warm"},
    }
    exp = prepare(spec_from_dict(raw, "t", {}), "", "t")
    run_dir = RunDir(tmp_path / "run")
    summary = run(exp, run_dir, SilentReporter())
    rows = run_dir.rows()
    assert len(rows) == 8 and all(r.ok for r in rows)
    assert {r.metrics["elapsed_s"] for r in rows} == {0.0, 0.001}, "each cell ran with its own option value"
    assert "null.level=2, workload.sleep_s=0.001" in summary["settings"]


def test_bad_swept_workload_option_names_the_knob():
    from blocklab.spec import SpecError

    raw = {"engine": {"kind": "null"}, "workload": {"kind": "null"}, "knobs": {"workload.sleep_s": [0.1, "slow"]}}
    with pytest.raises(SpecError, match=r"knobs.workload.sleep_s: 'slow' is not accepted"):
        prepare(spec_from_dict(raw, "t", {}), "", "t")
    raw["knobs"] = {"workload.nope": [1]}
    with pytest.raises(SpecError, match=r"unknown option for workload 'null'"):
        prepare(spec_from_dict(raw, "t", {}), "", "t")


def test_refine_search_finds_the_peak_with_few_settings(tmp_path):
    raw = {
        "engine": {"kind": "null"},
        "workload": {"kind": "null", "peak": 37, "noise": 0.0},
        "knobs": {"null.level": [1, 128]},
        "measure": {"repeats": 1, "seed": 2, "search": "refine", "cache": "warm"},
    }
    exp = prepare(spec_from_dict(raw, "t", {}), "", "t")
    assert exp.knobs["null.level"] == [1, 2, 4, 8, 16, 32, 64, 128]
    reporter = SilentReporter()
    summary = run(exp, RunDir(tmp_path / "run"), reporter)
    assert summary["best"] == {"null.level": 37}
    tested = len(summary["settings"])
    assert tested <= 0.25 * 128, f"refine tested {tested} settings"
    assert any(line.startswith("refine: adding null.level") for line in reporter.lines)


def test_refine_needs_one_numeric_knob_and_leaves_no_engine_running(monkeypatch):
    from blocklab.engines.null import NullEngine
    from blocklab.spec import SpecError

    engines = []
    real_start = NullEngine.start
    monkeypatch.setattr(NullEngine, "start", lambda self: (engines.append(self), real_start(self))[1])
    raw = {"engine": {"kind": "null"}, "workload": {"kind": "null"}, "knobs": {"null.mode": ["a", "b"]}, "measure": {"search": "refine"}}
    with pytest.raises(SpecError, match="needs a numeric knob; 'null.mode' is enum"):
        prepare(spec_from_dict(raw, "t", {}), "", "t")
    assert engines and not any(e.started for e in engines)


def test_adaptive_repeats_add_blocks_until_max_and_name_noisy(tmp_path):
    raw = {
        "engine": {"kind": "null"},
        "workload": {"kind": "null", "noise": 0.3},
        "knobs": {"null.level": [1, 2]},
        "measure": {"repeats": 2, "seed": 4, "target_ci": 0.03, "max_repeats": 5, "cache": "warm"},
    }
    exp = prepare(spec_from_dict(raw, "t", {}), "", "t")
    reporter = SilentReporter()
    run_dir = RunDir(tmp_path / "run")
    run(exp, run_dir, reporter)
    assert len(run_dir.rows()) == 2 * 5
    assert any("stayed unsettled after 5 repeats" in line and "null.level=" in line for line in reporter.lines)
    plan = json.loads(run_dir.file("plan.json").read_text())
    assert len(plan["cells"]) == 10


def test_adaptive_repeats_stop_when_precise(tmp_path):
    raw = {
        "engine": {"kind": "null"},
        "workload": {"kind": "null", "noise": 0.0001},
        "knobs": {"null.level": [1, 2]},
        "measure": {"repeats": 3, "seed": 4, "target_ci": 0.03, "max_repeats": 8, "cache": "warm"},
    }
    exp = prepare(spec_from_dict(raw, "t", {}), "", "t")
    run_dir = RunDir(tmp_path / "run")
    reporter = SilentReporter()
    summary = run(exp, run_dir, reporter)
    assert len(run_dir.rows()) == 6
    assert "target_ci 3%: settled after 3 blocks (1 separated from the best)" in reporter.lines
    assert summary["analysis"]["looks"] == 8 - 3 + 1  # the intervals account for every look the run could take


NULL_TOML = """name = "nulltest"
[engine]
kind = "null"
[workload]
kind = "null"
[knobs]
"null.level" = [1, 2]
[measure]
repeats = 2
seed = 5
cache = "warm"
"""


def test_paths_with_brackets_are_printed_as_they_are(cli_env, tmp_path):
    """rich reads '[x]' as markup: the run's paths and the resume command must come out whole."""
    import subprocess

    from conftest import blocklab_bin

    (tmp_path / "null.toml").write_text(NULL_TOML)
    out = tmp_path / "runs" / "[x]"
    result = subprocess.run([blocklab_bin(), "run", str(tmp_path / "null.toml"), "--out", str(out)], env=cli_env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines.count(f"results: {out}") == 2, result.stdout
    assert f"report:  {out / 'report.html'}" in lines and f"plot:    {out / 'plots' / 'nulltest-score.png'}" in lines


def test_a_final_report_that_cannot_render_is_said_not_swallowed(tmp_path, monkeypatch):
    """The last report of a run was written with its error dropped: the CLI then pointed at a
    report of an earlier cell as if it were the run's."""
    from blocklab.report import writer

    real = writer.write_report

    def broken(path):  # renders during the run, fails only once every cell is in (the final report)
        if len(RunDir(path).rows()) == 9:
            raise ValueError("a figure that cannot be drawn")
        return real(path)

    monkeypatch.setattr(writer, "write_report", broken)
    reporter = SilentReporter()
    summary = run(null_experiment(), RunDir(tmp_path / "run"), reporter)
    assert summary["best"] == {"null.level": 3}  # the run itself is whole
    assert "report not updated: ValueError: a figure that cannot be drawn" in reporter.lines
