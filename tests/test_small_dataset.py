"""A data set smaller than the largest read swept is said before any cell (issue 30:
`--rows 10` made a one-page table, every read 8 kB, and a verdict that every other
setting was slower), in `plan` and in `run`, on a real embedded PostgreSQL."""

from __future__ import annotations

import subprocess

import pytest
from conftest import blocklab_bin


def _cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([blocklab_bin(), *args], env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.engine
def test_plan_and_run_warn_before_any_cell_when_the_table_is_smaller_than_the_largest_read(cli_env, tmp_path):
    small = ["mbrc", "--rows", "10", "--set", "multiblock_read=1,128", "--repeats", "1"]
    plan = _cli(["plan", *small], cli_env)
    assert plan.returncode == 0, plan.stdout + plan.stderr
    warning = next(line for line in plan.stdout.splitlines() if line.startswith("warning: the data set (10 rows"))
    assert "smaller than the largest read swept (multiblock_read = 128 (1 MB))" in warning
    assert "give --rows 300,000 or more" in warning
    assert plan.stdout.index("warning: the data set") < plan.stdout.index("block 1")
    run = _cli(["run", *small, "--out", str(tmp_path / "run")], cli_env)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "warning: the data set (10 rows" in run.stdout
    assert run.stdout.index("warning: the data set") < run.stdout.index("[block 1]")  # before the first cell
