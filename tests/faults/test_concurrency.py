"""Two blocklab processes on one engine data directory: the second is refused at
once with the holder's pid and command, or waits with --wait; never two servers
on one data directory."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import blocklab_bin

pytestmark = pytest.mark.engine

HOLD = """
import sys, time
from pathlib import Path
from blocklab.engines.sqlite import SqliteEngine
engine = SqliteEngine(cache_dir=Path(sys.argv[1]))
engine.start()
print("holding", flush=True)
time.sleep(float(sys.argv[2]))
engine.stop()
"""


def _holder(cache: Path, seconds: float) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(cache), str(seconds)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "holding"
    return proc


def test_second_process_is_refused_at_once_naming_the_holder(cli_env, tmp_path):
    cache = Path(cli_env["BLOCKLAB_CACHE"])
    holder = _holder(cache, 60)
    try:
        t0 = time.monotonic()
        result = subprocess.run([blocklab_bin(), "plan", "checksum", "--engine", "sqlite", "--quick"], env=cli_env,
                                capture_output=True, text=True, timeout=60)
        assert time.monotonic() - t0 < 30  # at once, not after a wait (a generous bound: the machine is shared)
        text = result.stdout + result.stderr
        assert result.returncode in (1, 2), text
        assert f"another blocklab process (pid {holder.pid}: " in text and "-c" in text  # its pid and command
        assert "blocklab run --wait" in text and "Traceback" not in text
    finally:
        holder.kill()
        holder.wait()


def test_wait_queues_behind_the_holder(cli_env, tmp_path):
    cache = Path(cli_env["BLOCKLAB_CACHE"])
    holder = _holder(cache, 12)  # longer than the run takes to start on a loaded machine, or it never waits
    out = tmp_path / "run"
    result = subprocess.run([blocklab_bin(), "run", "checksum", "--engine", "sqlite", "--quick", "--repeats", "1",
                             "--set", "block_size=4096", "--wait", "120", "--out", str(out)],
                            env=cli_env, capture_output=True, text=True, timeout=600)
    holder.wait(timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"waiting for pid {holder.pid}" in result.stdout
    assert (out / "results.jsonl").exists()


def test_one_postgres_server_per_data_directory(cache_dir):
    from blocklab.engines.base import EngineError
    from blocklab.engines.postgres import PostgresEngine

    first = PostgresEngine(cache_dir=cache_dir / "one-server")
    first.start()
    try:
        second = PostgresEngine(cache_dir=cache_dir / "one-server")
        with pytest.raises(EngineError, match=rf"another blocklab process \(pid {os.getpid()}: .*\) is using the embedded PostgreSQL"):
            second.start()
        assert first.health() is None  # the first one's server untouched
    finally:
        first.stop()
