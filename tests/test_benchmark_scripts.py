"""Every benchmarks/*.py still imports: `--help` runs its imports and argparse
and nothing else, so a refactor that moves what a benchmark imports fails here
rather than the next time someone runs the benchmark."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((ROOT / "benchmarks").glob("*.py"))


def test_there_are_benchmark_scripts() -> None:
    assert SCRIPTS, "no benchmarks/*.py found"


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_help_runs(script: Path) -> None:
    done = subprocess.run([sys.executable, str(script), "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{script.name} --help exited {done.returncode}:\n{done.stderr[-2000:]}"
    assert done.stdout.startswith("usage:"), f"{script.name} --help printed:\n{done.stdout[:500]}\n{done.stderr[-2000:]}"
