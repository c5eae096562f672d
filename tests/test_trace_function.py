"""--trace-function on PostgreSQL's insert path (issue 28, seed 001's second step):
heap_insert is called once per row inserted, so every cell's trace must count
exactly the rows of the loop, with a histogram of time per call per setting."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import blocklab_bin

ROWS = 4000


def test_heap_insert_traced_per_setting_counts_every_row(cli_env, tmp_path):
    out = tmp_path / "run"
    done = subprocess.run(
        [blocklab_bin(), "run", "checksum", "--quick", "--repeats", "1", "--set", "workload.index=false,true",
         "--set", f"workload.rows={ROWS}", "--set", "checksum=on", "--trace-function", "heap_insert", "--trace-arg", "4",
         "--out", str(out)],
        env=cli_env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(r["status"] == "ok" for r in rows)
    for r in rows:
        trace = r["notes"]["trace"]
        assert trace["function"] == "heap_insert"
        assert trace["calls"] == ROWS  # one heap_insert per row of the loop, index or not
        assert sum(trace["hist_ns"].values()) == ROWS and trace["total_ns"] > 0
        assert sum(trace["hist_arg"].values()) == ROWS  # options, one per call
    summary = json.loads((out / "summary.json").read_text())
    per_setting = summary["trace"]["settings"]
    assert len(per_setting) == 2 and all(e["calls"] == ROWS and e["ns_per_call"] > 0 for e in per_setting.values())
    assert all(abs(e["calls_per_unit"] - 1.0) < 1e-9 for e in per_setting.values())  # per row inserted
    # the seed's table, on the console and in the report
    assert "#calls" in done.stdout and "heap_insert: time per call (ns)" in done.stdout
    html = (out / "report.html").read_text()
    assert 'id="trace"' in html and "heap_insert: time per call (ns)" in html


@pytest.mark.empty_cache
def test_a_function_the_binary_does_not_have_is_refused_before_anything_starts(cli_env, tmp_path):
    out = tmp_path / "run"
    done = subprocess.run([blocklab_bin(), "run", "checksum", "--quick", "--trace-function", "no_such_function_here",
                           "--out", str(out)], env=cli_env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    text = done.stdout + done.stderr
    assert "'no_such_function_here' is not a function of" in text and "bpftrace -l" in text
    assert not out.exists()
    cache = Path(cli_env["BLOCKLAB_CACHE"])  # the engine's home may be named, but no cluster was made or started
    assert not list(cache.rglob("PG_VERSION")) and not list(cache.rglob("postmaster.pid"))


def test_trace_arg_without_a_function_is_refused(cli_env):
    done = subprocess.run([blocklab_bin(), "run", "checksum", "--quick", "--trace-arg", "2"], env=cli_env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "needs measure.trace_function" in done.stdout + done.stderr
