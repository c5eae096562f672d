"""--resume finishes the plan: a run killed with SIGKILL mid-cell (and one whose
last line a crash cut off) resumes to every cell ok exactly once; failed and
invalid cells are measured again (not with --no-retry), a setting the engine
refused is not retried for ever; foreign or edited run directories get a
clear message."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from typing import Any

import pytest
from conftest import blocklab_bin

from blocklab.engines.null import NullEngine
from blocklab.experiment import prepare
from blocklab.results import FORMAT, RunDir
from blocklab.runner import SilentReporter, run
from blocklab.spec import SpecError, spec_from_dict


def _null(fail_level: int | None = None, levels: tuple[int, ...] = (1, 2, 3)) -> Any:
    raw = {"engine": {"kind": "null"}, "workload": {"kind": "null", "fail_level": fail_level},
           "knobs": {"null.level": list(levels)}, "measure": {"repeats": 2, "seed": 4, "cache": "warm"}}
    return prepare(spec_from_dict(raw, "t", {}), "# t", "t")


def _ok_once(run_dir: RunDir) -> bool:
    plan = [c["cell_id"] for c in run_dir.read_json("plan.json")["cells"]]
    ok = [r.cell_id for r in run_dir.rows() if r.ok]
    return sorted(ok) == sorted(plan)


def test_resume_measures_failed_cells_again_and_no_retry_does_not(tmp_path, monkeypatch):
    run_dir = RunDir(tmp_path / "run")
    run(_null(fail_level=2), run_dir, SilentReporter())
    failed = {r.cell_id for r in run_dir.rows() if r.failed}
    assert len(failed) == 2  # level 2 in both blocks
    run(_null(fail_level=2), run_dir, SilentReporter(), resume=True, retry=False)
    assert len(run_dir.rows()) == 6  # --no-retry: nothing was missing, nothing measured
    run(_null(), run_dir, SilentReporter(), resume=True)  # the fault is gone: the failed cells are measured again
    assert _ok_once(run_dir) and len(run_dir.rows()) == 8


def test_a_refused_setting_is_recorded_once_and_not_retried(tmp_path, monkeypatch):
    real = NullEngine.apply

    def refuse_level_3(self, settings):
        if settings.get("null.level") == 3:
            raise ValueError("the engine refuses level 3")
        return real(self, settings)

    monkeypatch.setattr(NullEngine, "apply", refuse_level_3)
    run_dir = RunDir(tmp_path / "run")
    run(_null(), run_dir, SilentReporter())
    refused = [r for r in run_dir.rows() if r.refused]
    assert len(refused) == 2 and refused[0].status == "refused: ValueError: the engine refuses level 3"
    run(_null(), run_dir, SilentReporter(), resume=True)
    assert len(run_dir.rows()) == 6  # the refusals stand: resume does not try them again


def test_sigkill_mid_cell_then_resume_with_a_torn_line(cli_env, tmp_path):
    out = tmp_path / "run"
    args = [blocklab_bin(), "run", "mbrc", "--rows", "100000", "--set", "multiblock_read=1,2,4,8", "--repeats", "2", "--out", str(out)]
    proc = subprocess.Popen(args, env=cli_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and not (out / "results.jsonl").exists():
        time.sleep(0.02)
    time.sleep(0.1)  # in the middle of the next cell
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    saved = RunDir(out).rows()
    assert 1 <= len(saved) < 8
    with open(out / "results.jsonl", "ab") as f:  # a crash in the middle of writing a line
        f.write(b'{"format": 1, "cell": 3, "cell_id": "b0:multiblock_read=8", "block": 0, "settings": {"multiblock_')
    result = subprocess.run([blocklab_bin(), "run", "--resume", str(out)], env=cli_env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "set aside in results.jsonl.torn" in result.stdout
    assert b"multiblock_" in (out / "results.jsonl.torn").read_bytes()  # kept, not deleted
    assert _ok_once(RunDir(out))
    for line in (out / "results.jsonl").read_text().splitlines():
        json.loads(line)  # every line whole


def test_a_run_directory_of_another_format_is_refused_clearly(tmp_path, cli_env):
    run_dir = RunDir(tmp_path / "run")
    run(_null(), run_dir, SilentReporter())
    lines = (run_dir.path / "results.jsonl").read_text().splitlines()
    row = json.loads(lines[1])
    row["format"] = FORMAT + 1
    lines[1] = json.dumps(row)
    (run_dir.path / "results.jsonl").write_text("\n".join(lines) + "\n")
    result = subprocess.run([blocklab_bin(), "report", str(run_dir.path)], env=cli_env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    text = result.stdout + result.stderr
    assert "results.jsonl: line 2: result row has format 2; this blocklab reads format 1" in text and "Traceback" not in text


def test_an_experiment_file_edited_after_the_start_is_refused_on_resume(tmp_path):
    from blocklab.lab import load_saved_experiment

    run_dir = RunDir(tmp_path / "run")
    run(_null(), run_dir, SilentReporter())
    edited = run_dir.path / "experiment.toml"
    edited.write_text(edited.read_text() + "\n# repeats = 9\n")
    with pytest.raises(SpecError, match="experiment.toml was edited after the run started"):
        load_saved_experiment(run_dir.path)


def test_results_directory_that_cannot_be_created_is_one_line(cli_env, tmp_path):
    result = subprocess.run([blocklab_bin(), "run", "mbrc", "--out", "/proc/x/run"], env=cli_env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stdout + result.stderr
    text = (result.stdout + result.stderr).strip()
    assert text.startswith("error: --out /proc/x/run: cannot create or write there") and "\n" not in text
    in_the_way = tmp_path / "a-file"
    in_the_way.write_text("not a directory")
    result = subprocess.run([blocklab_bin(), "run", "mbrc", "--out", str(in_the_way)], env=cli_env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert f"--out {in_the_way}: exists and is not a directory" in result.stdout + result.stderr
    assert in_the_way.read_text() == "not a directory"  # nothing changed
