"""blocklab tune end to end on a real embedded PostgreSQL 18: a tiny space of three
knobs (one of them a restart knob), a budget of 40 seconds, small data; interrupted with
Ctrl-C, resumed, and its report written with the ALTER SYSTEM lines to paste."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
from conftest import blocklab_bin, ctrl_c_reaches_child

pytestmark = pytest.mark.engine

SPACE = """
name = "tiny-tune"
[engine]
kind = "postgres"
[dataset]
table = "blocklab_scan"
rows = 50_000
[workload]
kind = "full_scan"
[knobs]
"pg.io_method" = ["sync", "worker"]
multiblock_read = [1, 16]
"pg.effective_io_concurrency" = [1, 16]
[measure]
cache = "warm"
metric = "rows_per_s"
[tune]
budget = "40s"
candidates = 2
confirm_blocks = 3
"""


def rows_of(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines() if line.strip()]


def test_a_tiny_tune_is_interrupted_resumed_and_reported(cli_env, tmp_path):
    space = tmp_path / "space.toml"
    space.write_text(SPACE)
    out = tmp_path / "tune"
    env = {**cli_env, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([blocklab_bin(), "tune", str(space), "--seed", "3", "--out", str(out)], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, preexec_fn=ctrl_c_reaches_child)
    seen: list[str] = []
    assert proc.stdout is not None
    cells = 0
    for line in proc.stdout:
        seen.append(line)
        if line.startswith("  [block"):
            cells += 1
            if cells == 6:
                proc.send_signal(signal.SIGINT)
                break
    rest, _ = proc.communicate(timeout=300)
    output = "".join(seen) + rest
    assert proc.returncode == 130, output
    assert f"continue with: blocklab tune --resume {out}" in output
    kept = rows_of(out)
    assert 6 <= len(kept) <= 7, "the cells finished before Ctrl-C are kept (the one in flight may have finished too)"
    assert not [p for p in os.popen("ps -eo args").read().splitlines() if str(env["BLOCKLAB_CACHE"]) in p and "postgres" in p], \
        "Ctrl-C stopped the server"

    result = subprocess.run([blocklab_bin(), "tune", "--resume", str(out)], env=env, text=True, capture_output=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    rows = rows_of(out)
    ids = [r["cell_id"] for r in rows]
    assert len(ids) == len(set(ids)), "no cell measured twice"
    assert [r["cell_id"] for r in rows[: len(kept)]] == [r["cell_id"] for r in kept]
    state = json.loads((out / "tune.json").read_text())
    assert state["done"] and state["confirmation"]["instance"] == "a restarted engine instance"
    assert state["spent_cells"] == pytest.approx(state["measured_cells"] + state["restart_cells"], abs=0.02)
    assert state["measured_cells"] == len(rows)
    assert all(r["status"] == "ok" for r in rows), [r["status"] for r in rows if r["status"] != "ok"]
    # every cell read its settings back from the server: the restart knob took effect
    for r in rows:
        assert r["applied"]["pg.io_method"] == r["settings"]["pg.io_method"]
    winner = state["winner_config"]
    assert f"ALTER SYSTEM SET io_combine_limit = '{winner['multiblock_read']}';" in state["config_lines"]
    assert f"ALTER SYSTEM SET io_method = '{winner['pg.io_method']}';  -- takes effect after a restart" in state["config_lines"]
    # the lines are the search's winner's; the heading says whether the confirmation recommends it
    if state["recommended"] == state["winner"]:
        assert "the winner, to paste:" in result.stdout
    else:
        assert state["recommended"] == state["default"] and "keep the default" in state["confirmation"]["verdict"]
        assert "keep the default; the search's winner (not shown better than the default on fresh blocks) was:" in result.stdout
    assert "ALTER SYSTEM SET" in result.stdout
    html = (out / "report.html").read_text()
    assert "The configuration to paste" in html and "ALTER SYSTEM SET io_combine_limit" in html
    assert (out / "plots" / "tune-trace.png").exists()
