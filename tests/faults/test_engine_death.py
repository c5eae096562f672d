"""An engine killed mid-run (kill -9) is told from a failing setting, restarted
by its own crash recovery, and the run completes every cell in the same
invocation; a second death stops the run with the engine's log."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from conftest import blocklab_bin

from blocklab.results import RunDir

pytestmark = pytest.mark.engine


def _rows(out: Path) -> list:
    return RunDir(out).rows() if (out / "results.jsonl").exists() else []


def _kill_after(out: Path, cells: int, find_pid, times: int = 1, timeout: float = 240) -> threading.Thread:
    """SIGKILL the engine's server once `cells` result rows exist (and again after each
    restart, `times` times in all)."""

    def watch() -> None:
        deadline = time.monotonic() + timeout
        killed = 0
        while killed < times and time.monotonic() < deadline:
            if len(_rows(out)) >= cells + killed * 2:  # after a death: its row and the re-run's
                pid = find_pid()
                if pid:
                    os.kill(pid, signal.SIGKILL)
                    killed += 1
                    time.sleep(1.0)
            time.sleep(0.05)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def _postmaster(cache: Path):
    def find() -> int | None:
        try:
            return int((cache / "postgres" / "data" / "postmaster.pid").read_text().split()[0])
        except (OSError, IndexError, ValueError):
            return None

    return find


def _mariadbd(cache: Path):
    def find() -> int | None:
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    argv = (entry / "cmdline").read_bytes().split(b"\0")
                except OSError:
                    continue
                if argv and argv[0].endswith(b"mariadbd") and any(str(cache).encode() in a for a in argv):
                    return int(entry.name)
        return None

    return find


@pytest.mark.parametrize("engine", ["postgres", "mariadb"])
def test_killed_server_is_recovered_and_the_run_completes(cli_env, tmp_path, engine):
    cache = Path(cli_env["BLOCKLAB_CACHE"])
    out = tmp_path / "run"
    find = _postmaster(cache) if engine == "postgres" else _mariadbd(cache)
    args = [blocklab_bin(), "run", "mbrc", "--quick", "--engine", engine, "--rows", "100000", "--repeats", "2", "--out", str(out)]
    watcher = _kill_after(out, 3, find)
    proc = subprocess.run(args, env=cli_env, capture_output=True, text=True, timeout=600)
    watcher.join(timeout=5)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    rows = _rows(out)
    died = [r for r in rows if r.status.startswith("engine died:")]
    # a kill that lands while a setting is applied (MariaDB: in a restart's shutdown, which
    # the restart's start then undoes) is a failure at apply, never a refusal: measured again
    at_apply = [r for r in rows if r.status.startswith("failed at apply, then applied again:")]
    assert len(died) + len(at_apply) == 1 and not any(r.refused for r in rows), [r.status for r in rows]
    if died:
        assert "ENGINE DIED" in proc.stdout and "restarting it (crash recovery)" in proc.stdout
    plan_ids = {c["cell_id"] for c in RunDir(out).read_json("plan.json")["cells"]}
    ok = [r.cell_id for r in rows if r.ok]
    assert sorted(ok) == sorted(plan_ids), "every planned cell ok exactly once"
    assert (died + at_apply)[0].cell_id in ok  # the crashed cell, measured again
    html = (out / "report.html").read_text()
    assert "engine died" in html or "failed at apply" in html  # the crash is in the report, with the cell it hit


def test_a_second_death_stops_the_run_with_the_engines_log(cache_dir, tmp_path, monkeypatch):
    """The engine dies in a cell and again in that cell's re-run: the run stops with
    one message naming the engine's log and its last lines; what was measured is kept."""
    from blocklab.experiment import prepare
    from blocklab.runner import EngineDied, SilentReporter, run
    from blocklab.spec import spec_from_dict
    from blocklab.workloads.full_scan import FullScan

    raw = {"engine": {"kind": "postgres"}, "dataset": {"rows": 100_000}, "workload": {"kind": "full_scan"},
           "knobs": {"multiblock_read": [2, 4, 8, 16]}, "measure": {"repeats": 1, "seed": 2}}
    exp = prepare(spec_from_dict(raw, "t", {}), "", "t", cache_dir=cache_dir / "second-death")
    real_run = FullScan.run
    calls = {"n": 0}

    def dies_on_the_third_and_its_rerun(self, engine):
        calls["n"] += 1
        if calls["n"] in (3, 4):
            os.kill(engine.cluster.postmaster_pid(), signal.SIGKILL)
            time.sleep(0.5)
        return real_run(self, engine)

    monkeypatch.setattr(FullScan, "run", dies_on_the_third_and_its_rerun)
    run_dir = RunDir(tmp_path / "run")
    with pytest.raises(EngineDied) as caught:
        run(exp, run_dir, SilentReporter())
    text = str(caught.value)
    assert "died again on cell" in text and "server log" in text and "server.log" in text
    assert "LOG:" in text  # the log's last lines themselves
    rows = run_dir.rows()
    assert [r.status.split(":")[0] for r in rows] == ["ok", "ok", "engine died", "engine died"]
    assert not exp.engine.cluster.postmaster_alive()  # stop() after a crash: clean, and no server left
