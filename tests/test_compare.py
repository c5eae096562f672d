"""`blocklab compare`: the library on synthetic run directories, and the command
on real quick mbrc runs of an embedded PostgreSQL 18."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import blocklab_bin

from blocklab.analysis.compare import CompareError, EnvironmentMismatch, compare_runs, goal_of
from blocklab.results import ENVIRONMENT_FILE, PLAN_FILE, SPEC_FILE, SUMMARY_FILE, ResultRow, RunDir

ENV = {
    "host": "lab1",
    "kernel": "Linux 6.1",
    "engine": "postgres",
    "engine_version": "18.6",
    "device": "vda",
    "dataset_rows": 100000,
}


def make_run(
    path: Path,
    samples: dict[int, list[float]],
    *,
    env: dict | None = None,
    metric: str = "rows_per_s",
    goal: str = "max",
    knob: str = "multiblock_read",
    failed: int = 0,
) -> Path:
    """A results directory as the runner writes it, with these metric values per setting."""
    run = RunDir(path)
    run.create()
    settings = [{knob: v} for v in samples]
    run.write_json(PLAN_FILE, {"seed": 1, "settings": settings, "cells": []})
    run.write_json(ENVIRONMENT_FILE, env if env is not None else ENV)
    run.write_json(SPEC_FILE, {"source": "x", "spec": {"name": "mbrc", "engine": {"settings": {}}, "measure": {"metric": metric}}})
    run.write_json(SUMMARY_FILE, {"metric": metric, "goal": goal, "experiment": "mbrc"})
    cell = 0
    for value, values in samples.items():
        for block, x in enumerate(values):
            run.append(ResultRow(cell, block, {knob: value}, {knob: f"{value * 8}kB"}, {metric: x, "reads": 10.0},
                                 cell_id=f"b{block}:{knob}={value}", started="2026-11-22T10:00:00+00:00"))
            cell += 1
    for i in range(failed):
        run.append(ResultRow(cell + i, 0, {knob: 999}, {}, {}, status="EngineError: boom", cell_id=f"f{i}"))
    return path


def noisy(center: float, n: int = 8, seed: int = 0, spread: float = 0.01) -> list[float]:
    rng = np.random.default_rng(seed)
    return list(center * (1 + spread * rng.standard_normal(n)))


# ---------------------------------------------------------------------- library
def test_clear_difference_is_significant_with_ratio_and_interval(tmp_path):
    a = make_run(tmp_path / "a", {1: noisy(100, seed=1), 16: noisy(300, seed=2)})
    b = make_run(tmp_path / "b", {1: noisy(100, seed=3), 16: noisy(600, seed=4)})
    result = compare_runs(a, b)
    assert result.metric == "rows_per_s" and result.goal == "max" and result.unit == "rows/s"
    by_label = {s.label: s for s in result.settings}
    assert list(by_label) == ["multiblock_read=1", "multiblock_read=16"]
    doubled = by_label["multiblock_read=16"]
    assert doubled.ratio == pytest.approx(2.0, rel=0.03)
    assert doubled.ci_low < doubled.ratio < doubled.ci_high
    assert doubled.ci_low > 1.8 and doubled.ci_high < 2.2
    assert doubled.p_value < 0.001
    assert doubled.outcome == "better"
    assert re.match(r"B is 2\.0+x faster than A \[", doubled.verdict)
    assert doubled.display() == "multiblock_read=16 (128kB)"
    same = by_label["multiblock_read=1"]
    assert same.outcome == "same" and same.ci_low <= 1.0 <= same.ci_high
    assert "no significant difference" in same.verdict
    assert result.counts() == {"better": 1, "worse": 0, "same": 1, "unclear": 0}
    assert "B is better in 1, no significant difference in 1" in result.summary_line()
    assert not result.differences and not result.forced
    json.dumps(result.to_dict())  # JSON-able for an export


def test_two_quick_runs_say_no_p_value_can_fall_below_the_designs_minimum(tmp_path):
    from blocklab.analysis.stats import min_p_value, runs_for_p

    assert min_p_value(2, 2) == pytest.approx(1 / 3) and min_p_value(3, 3) == pytest.approx(0.1)
    assert min_p_value(4, 4) == pytest.approx(2 / 70) and runs_for_p(0.05) == 4
    a = make_run(tmp_path / "a", {1: [100.0, 101.0], 16: [300.0, 303.0]})
    b = make_run(tmp_path / "b", {1: [250.0, 260.0], 16: [301.0, 299.0]})  # 2.5x apart, yet p >= 0.33
    result = compare_runs(a, b)
    tripled = result.settings[0]
    assert tripled.p_value == pytest.approx(1 / 3) and "no p-value can fall below 0.33" in tripled.verdict
    assert result.resolution_note().startswith("With 2 and 2 runs per setting no p-value can fall below 0.33")
    assert "runs of 4 repeats or more can show one" in result.resolution_note()
    assert result.to_dict()["resolution"] == result.resolution_note()
    wide = compare_runs(make_run(tmp_path / "c", {1: noisy(100, seed=1)}), make_run(tmp_path / "d", {1: noisy(100, seed=2)}))
    assert wide.resolution_note() == ""  # 8 against 8 can reach any p


def test_lower_is_better_metric_reads_the_other_way(tmp_path):
    a = make_run(tmp_path / "a", {8: noisy(2.0, seed=1)}, metric="elapsed_s", goal="min")
    b = make_run(tmp_path / "b", {8: noisy(1.0, seed=2)}, metric="elapsed_s", goal="min")
    s = compare_runs(a, b).settings[0]
    assert s.ratio == pytest.approx(0.5, rel=0.03)
    assert s.outcome == "better"
    assert re.match(r"B is 2\.0+x faster than A \[", s.verdict)


def test_metric_option_picks_another_metric_and_its_direction(tmp_path):
    a = make_run(tmp_path / "a", {8: noisy(1.0, seed=1)})
    b = make_run(tmp_path / "b", {8: noisy(1.0, seed=2)})
    result = compare_runs(a, b, metric="reads")
    assert result.metric == "reads" and result.goal == "max"
    assert result.settings[0].ratio == pytest.approx(1.0)
    assert goal_of("elapsed_s") == "min" and goal_of("read_time_ms") == "min"
    assert goal_of("rows_per_s") == "max" and goal_of("mb_per_s") == "max" and goal_of("iops") == "max"


def test_unknown_metric_lists_the_metrics_present(tmp_path):
    a = make_run(tmp_path / "a", {8: [1.0, 2.0]})
    b = make_run(tmp_path / "b", {8: [1.0, 2.0]})
    with pytest.raises(CompareError) as err:
        compare_runs(a, b, metric="iops")
    assert err.value.argument == "--metric"
    assert "'iops' is not measured in both runs; metrics present in both: reads, rows_per_s" in str(err.value)


def test_settings_in_one_run_only_are_listed_not_compared(tmp_path):
    a = make_run(tmp_path / "a", {1: [1.0, 1.1], 8: [2.0, 2.1]})
    b = make_run(tmp_path / "b", {8: [2.0, 2.2], 32: [3.0, 3.1]})
    result = compare_runs(a, b)
    assert [s.label for s in result.settings] == ["multiblock_read=8"]
    assert result.only_in_a == ("multiblock_read=1",)
    assert result.only_in_b == ("multiblock_read=32",)


def test_no_common_setting_is_refused(tmp_path):
    a = make_run(tmp_path / "a", {1: [1.0]})
    b = make_run(tmp_path / "b", {2: [1.0]})
    with pytest.raises(CompareError) as err:
        compare_runs(a, b)
    assert err.value.argument == "RUN_A/RUN_B"
    assert "no setting measured in both runs (A: multiblock_read=1; B: multiblock_read=2)" in str(err.value)


def test_unlike_environments_are_refused_unless_forced(tmp_path):
    a = make_run(tmp_path / "a", {8: noisy(1.0, seed=1)})
    b = make_run(tmp_path / "b", {8: noisy(1.0, seed=2)},
                 env={**ENV, "host": "lab2", "dataset_rows": 3000000, "kernel": "Linux 6.9"})
    with pytest.raises(EnvironmentMismatch) as err:
        compare_runs(a, b)
    fields = [d.field for d in err.value.differences]
    assert fields == ["host", "dataset_rows"]  # kernel is not a checked field
    assert "dataset_rows: A 100,000 vs B 3,000,000" in str(err.value)
    assert "--force" in str(err.value)
    result = compare_runs(a, b, force=True)
    assert result.forced
    assert [d.text() for d in result.differences] == ["host: A lab1 vs B lab2", "dataset_rows: A 100,000 vs B 3,000,000"]
    assert [d.field for d in result.other_differences] == ["kernel"]
    assert len(result.settings) == 1


def test_a_checked_field_missing_on_one_side_is_a_difference(tmp_path):
    env_b = {k: v for k, v in ENV.items() if k != "device"}
    a = make_run(tmp_path / "a", {8: [1.0]})
    b = make_run(tmp_path / "b", {8: [1.0]}, env=env_b)
    with pytest.raises(EnvironmentMismatch) as err:
        compare_runs(a, b)
    assert err.value.differences[0].text() == "device: A vda vs B (missing)"


@pytest.mark.parametrize("which", ["a", "b"])
def test_not_a_results_directory_names_the_argument(tmp_path, which):
    good = make_run(tmp_path / "good", {8: [1.0]})
    (tmp_path / "empty").mkdir()
    args = (tmp_path / "empty", good) if which == "a" else (good, tmp_path / "empty")
    with pytest.raises(CompareError) as err:
        compare_runs(*args)
    name = "RUN_A" if which == "a" else "RUN_B"
    assert err.value.argument == name
    assert str(err.value).startswith(f"{name}: {tmp_path / 'empty'} is not a blocklab results directory (no plan.json)")
    with pytest.raises(CompareError, match="is not a directory"):
        compare_runs(tmp_path / "nowhere", good)
    (tmp_path / "stats").mkdir()
    (tmp_path / "stats" / "sysstats.json").write_text("{}")
    with pytest.raises(CompareError, match="holds system statistics"):
        compare_runs(good, tmp_path / "stats")


def test_failed_rows_are_ignored_and_a_run_without_ok_rows_refused(tmp_path):
    a = make_run(tmp_path / "a", {8: [1.0, 1.1]}, failed=2)
    b = make_run(tmp_path / "b", {8: [1.0, 1.2]})
    assert [s.label for s in compare_runs(a, b).settings] == ["multiblock_read=8"]
    only_failed = make_run(tmp_path / "c", {}, failed=1)
    with pytest.raises(CompareError, match="RUN_B: .* has no successful measurement"):
        compare_runs(a, only_failed)


# ---------------------------------------------------------------------- the command on real runs
RUN = ["run", "mbrc", "--quick", "--set", "multiblock_read=1,16", "--repeats", "2", "--seed", "5"]


def blocklab(args, env, timeout=300):
    return subprocess.run([blocklab_bin(), *args], env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def real_runs(cache_dir, tmp_path_factory):
    """Two quick mbrc runs of 100,000 rows and one of 50,000 (another data size)."""
    root = tmp_path_factory.mktemp("compare")
    env = dict(os.environ)
    env["BLOCKLAB_CACHE"] = str(cache_dir / "compare")
    env["BLOCKLAB_RESULTS"] = str(root / "results")
    env.pop("FORCE_COLOR", None)
    runs = {}
    for name, rows in (("a", 100000), ("b", 100000), ("small", 50000)):
        out = root / name
        result = blocklab([*RUN, "--rows", str(rows), "--out", str(out)], env)
        assert result.returncode == 0, result.stdout + result.stderr
        runs[name] = out
    return runs, env


@pytest.mark.engine
def test_compare_real_runs_prints_the_table_and_verdicts(real_runs):
    runs, env = real_runs
    result = blocklab(["compare", str(runs["a"]), str(runs["b"])], env)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert f"A: {runs['a']}" in out and f"B: {runs['b']}" in out
    assert "rows_per_s (rows/s): B against A per setting (higher is better)" in out
    for header in ("multiblock_read", "n A/B", "median A", "median B", "B/A", "95% CI", "B vs A"):
        assert header in out
    assert "1 (8kB)" in out and "16 (128kB)" in out
    assert "2/2" in out
    # one verdict line per setting, from compare_samples
    verdicts = [line for line in out.splitlines() if line.startswith("multiblock_read=")]
    assert len(verdicts) == 2
    assert all(("B/A = " in v) or (" than A " in v) for v in verdicts)
    assert "B against A over 2 common settings" in out
    assert "differ" not in out.split("rows_per_s (rows/s)")[0]  # like runs: nothing reported as different
    # two quick runs of 2 repeats: the U test cannot go below 2/C(4,2) = 0.33, and the output says so
    assert "With 2 and 2 runs per setting no p-value can fall below 0.33" in out, out


@pytest.mark.engine
def test_compare_refuses_another_data_size_without_force(real_runs):
    runs, env = real_runs
    result = blocklab(["compare", str(runs["a"]), str(runs["small"])], env)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "RUN_A and RUN_B were measured under different conditions" in result.stderr
    assert "dataset_rows: A 100,000 vs B 50,000" in result.stderr
    assert "add --force" in result.stderr
    forced = blocklab(["compare", str(runs["a"]), str(runs["small"]), "--force", "--metric", "elapsed_s"], env)
    assert forced.returncode == 0, forced.stdout + forced.stderr
    assert "compared with --force although the runs differ in:" in forced.stdout
    assert "dataset_rows: A 100,000 vs B 50,000" in forced.stdout
    assert "elapsed_s (s): B against A per setting (lower is better)" in forced.stdout


@pytest.mark.engine
def test_compare_bad_input_exits_2_naming_the_argument(real_runs, tmp_path):
    runs, env = real_runs
    bad_metric = blocklab(["compare", str(runs["a"]), str(runs["b"]), "--metric", "nope"], env)
    assert bad_metric.returncode == 2
    assert "--metric: 'nope' is not measured in both runs; metrics present in both:" in bad_metric.stderr
    assert "rows_per_s" in bad_metric.stderr and "avg_read_kb" in bad_metric.stderr
    not_dir = blocklab(["compare", str(runs["a"]), str(tmp_path)], env)
    assert not_dir.returncode == 2
    assert f"RUN_B: {tmp_path} is not a blocklab results directory" in not_dir.stderr
