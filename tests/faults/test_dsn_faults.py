"""Someone else's server: down when the run starts (one line, exit 2, both
engines), restarted in the middle of a run (bounded wait, reconnect, the cell
measured again, the changed settings still put back at the end), or gone when
the run ends (what is owed kept in restore.json; `blocklab restore` does it
later)."""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path

import pytest
from conftest import blocklab_bin

from blocklab.engines.postgres import PostgresEngine
from blocklab.experiment import prepare
from blocklab.results import RESTORE_FILE, RunDir
from blocklab.runner import SilentReporter, run
from blocklab.spec import spec_from_dict
from blocklab.workloads.full_scan import FullScan

pytestmark = pytest.mark.engine


@pytest.mark.parametrize(
    "dsn, says",
    [
        ("host=127.0.0.1 port=1 dbname=lab user=me", "cannot use PostgreSQL at me@127.0.0.1:1/lab: connection failed"),
        ("mysql://me@127.0.0.1:1/blocklab", "cannot use MariaDB at me@127.0.0.1:1"),
    ],
)
def test_a_server_that_is_down_at_the_start_is_one_line(cli_env, dsn, says):
    engine = "mariadb" if dsn.startswith("mysql") else "postgres"
    result = subprocess.run([blocklab_bin(), "plan", "mbrc", "--engine", engine, "--dsn", dsn], env=cli_env,
                            capture_output=True, text=True, timeout=120)
    text = (result.stdout + result.stderr).strip()
    assert result.returncode == 2, text
    assert says in text and "Traceback" not in text
    assert len(text.splitlines()) == 1, text


@pytest.fixture
def someones_server(cache_dir):
    server = PostgresEngine(cache_dir=cache_dir / "someones")
    server.start()
    yield server
    server.stop()


def _experiment(server: PostgresEngine, cache_dir):
    raw = {"engine": {"kind": "postgres", "dsn": server.conninfo()}, "dataset": {"rows": 50_000},
           "workload": {"kind": "full_scan"}, "knobs": {"pg.bgwriter_delay": [150, 250]},
           "measure": {"repeats": 2, "seed": 6, "cache": "warm"}}
    return prepare(spec_from_dict(raw, "t", {}), "", "t", allow_server_changes=True, cache_dir=cache_dir)


def _auto_conf(server: PostgresEngine) -> list:
    return server.query("SELECT name, setting FROM pg_file_settings WHERE sourcefile LIKE %s", ("%postgresql.auto.conf",))


def test_a_server_restarted_mid_run_is_waited_for_and_its_settings_put_back(someones_server, cache_dir, tmp_path, monkeypatch):
    exp = _experiment(someones_server, cache_dir / "dsn-client")
    real_run = FullScan.run
    calls = {"n": 0}

    def restart_during_the_second(self, engine):
        calls["n"] += 1
        if calls["n"] == 2:  # the server's administrator restarts it: down for ~2 s
            someones_server.cluster.pg_ctl_stop()
            threading.Timer(2.0, someones_server.cluster.pg_ctl_start).start()
        return real_run(self, engine)

    monkeypatch.setattr(FullScan, "run", restart_during_the_second)
    run_dir = RunDir(tmp_path / "run")
    run(exp, run_dir, SilentReporter())
    rows = run_dir.rows()
    assert [r.status.split(":")[0] for r in rows].count("engine died") == 1
    assert sorted(r.cell_id for r in rows if r.ok) == sorted(c["cell_id"] for c in run_dir.read_json("plan.json")["cells"])
    assert _auto_conf(someones_server) == []  # every setting blocklab changed was put back at the end
    assert not run_dir.file(RESTORE_FILE).exists()


def test_a_server_gone_at_the_end_keeps_what_is_owed_for_blocklab_restore(someones_server, cache_dir, tmp_path, monkeypatch, cli_env):
    import blocklab.engines.postgres.server as pg_server

    monkeypatch.setattr(pg_server, "DSN_WAIT_S", 3.0)  # read where the wait for a gone server is
    exp = _experiment(someones_server, cache_dir / "dsn-client-2")
    real_run = FullScan.run
    calls = {"n": 0}

    def gone_after_the_last(self, engine):
        calls["n"] += 1
        metrics = real_run(self, engine)
        if calls["n"] == 4:  # the last cell measured, then the server goes away
            someones_server.cluster.pg_ctl_stop()
        return metrics

    monkeypatch.setattr(FullScan, "run", gone_after_the_last)
    run_dir = RunDir(tmp_path / "run")
    with pytest.raises(Exception) as caught:
        run(exp, run_dir, SilentReporter())
    assert f"blocklab restore {run_dir.path}" in str(caught.value)
    owed = run_dir.read_json(RESTORE_FILE)
    assert owed["engine"] == "postgres" and owed["settings"] == {"bgwriter_delay": None}
    assert "password" not in owed["dsn"]
    someones_server.cluster.pg_ctl_start()  # the server is back
    assert [n for n, _ in _auto_conf(someones_server)] == ["bgwriter_delay"]  # still changed
    result = subprocess.run([blocklab_bin(), "restore", str(run_dir.path)], env=cli_env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "restored bgwriter_delay reset to the server's default" in result.stdout
    assert _auto_conf(someones_server) == []
    assert not run_dir.file(RESTORE_FILE).exists()
    again = subprocess.run([blocklab_bin(), "restore", str(run_dir.path)], env=cli_env, capture_output=True, text=True, timeout=60)
    assert again.returncode == 0 and "nothing to restore" in again.stdout and "owes no server any setting" in again.stdout  # nothing to do is success


def test_a_killed_run_leaves_restore_json_and_resume_puts_it_back(someones_server, cli_env, tmp_path):
    """SIGKILL while a cell has a server setting (and, as root, the disk's read-ahead)
    changed: restore.json already holds the originals; --resume puts them back before it
    measures anything, and at its end nothing is left changed."""
    import json
    import os
    import signal

    from blocklab.probes.os_stats import device_of, whole_disk

    knobs = '"pg.bgwriter_delay" = [150, 250]' + ("\nread_ahead = [64, 512]" if os.geteuid() == 0 else "")
    experiment = tmp_path / "killed.toml"
    experiment.write_text(f'name = "killed"\n[engine]\nkind = "postgres"\ndsn = "{someones_server.conninfo()}"\n'
                          f'[dataset]\nrows = 100000\n[knobs]\n{knobs}\n[measure]\nrepeats = 8\ncache = "warm"\n')
    disk = Path(f"/sys/block/{whole_disk(device_of(someones_server.data_dir()).name)}/queue/read_ahead_kb")
    read_ahead_before = disk.read_text()
    out = tmp_path / "run"
    child = subprocess.Popen([blocklab_bin(), "run", str(experiment), "--allow-server-changes", "--out", str(out)],
                             env=cli_env, stdout=(tmp_path / "out.txt").open("w"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while not (out / RESTORE_FILE).exists() or not (out / "results.jsonl").exists():
        assert child.poll() is None and time.monotonic() < deadline, f"the run ended before it changed anything: {(tmp_path / 'out.txt').read_text()}"
        time.sleep(0.05)
    child.send_signal(signal.SIGKILL)
    child.wait()
    owed = json.loads((out / RESTORE_FILE).read_text())
    assert owed["settings"] == {"bgwriter_delay": None}
    assert [n for n, _ in _auto_conf(someones_server)] == ["bgwriter_delay"]  # left changed by the kill
    if os.geteuid() == 0:
        assert owed["host"] == {str(disk): int(read_ahead_before)}
    resumed = subprocess.run([blocklab_bin(), "run", "--resume", str(out), "--allow-server-changes"], env=cli_env,
                             capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "put back what the interrupted run had changed: " in resumed.stdout
    assert _auto_conf(someones_server) == [] and not (out / RESTORE_FILE).exists()
    assert disk.read_text() == read_ahead_before
