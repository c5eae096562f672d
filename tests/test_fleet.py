"""A fleet on one machine: a scheduler and three workers as separate processes on
127.0.0.1 (host-a, host-b, host-c), each with its own cache and embedded
PostgreSQL, plain TCP (--insecure; tests/test_fleet_tls.py does the same with TLS).

mbrc --quick on the fleet; a worker killed mid-run and the run resumed; a host
frozen mid-run that does not hold the others; bad input; the report's hosts
side by side in headless Chromium."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import time
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner
from fleet_procs import Fleet, rows_of

from blocklab.cli import main

pytestmark = [pytest.mark.engine]

HOSTS = ("host-a", "host-b", "host-c")
MBRC = ("run", "mbrc", "--quick", "--rows", "100000", "--repeats", "1")


@pytest.fixture(scope="module")
def fleet(cache_dir, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fleet")
    env = dict(os.environ, BLOCKLAB_RESULTS=str(tmp / "results"), BLOCKLAB_CACHE=str(cache_dir / "fleet-coordinator"))
    procs = Fleet(tmp, env)
    try:
        procs.start_scheduler()
        procs.start_workers({name: cache_dir / f"fleet-{name}" for name in HOSTS})
        yield procs
    finally:
        procs.stop()


@pytest.fixture(scope="module")
def mbrc_run(fleet, tmp_path_factory):
    out = tmp_path_factory.mktemp("mbrc-fleet") / "run"
    proc = fleet.run(*MBRC, "--fleet", fleet.address, *fleet.trust, "--out", str(out))
    return proc, out


def planned(out: Path) -> dict[str, list[str]]:
    plan = json.loads((out / "plan.json").read_text())
    cells: dict[str, list[str]] = {}
    for c in plan["cells"]:
        cells.setdefault(c["host"], []).append(c["cell_id"])
    return cells


def ok_counts(rows: list[dict]) -> Counter:
    return Counter(r["cell_id"] for r in rows if r["status"] == "ok")


def test_mbrc_quick_on_three_hosts(mbrc_run):
    proc, out = mbrc_run
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = rows_of(out)
    plan = json.loads((out / "plan.json").read_text())
    cells = planned(out)
    assert sorted(cells) == list(HOSTS) and all(len(ids) == 8 for ids in cells.values())
    # every cell of every host ok, exactly once, in the one results.jsonl, each row naming its host
    assert ok_counts(rows) == Counter(cid for ids in cells.values() for cid in ids)
    assert all(r["host"] in HOSTS and r["cell_id"].startswith(r["host"] + "/") for r in rows)
    # each host its own randomised order, from a seed of its own recorded in plan.json
    seeds = {h: info["seed"] for h, info in plan["fleet"]["hosts"].items()}
    assert len(set(seeds.values())) == 3
    orders = {h: tuple(c["settings"]["multiblock_read"] for c in plan["cells"] if c["host"] == h) for h in HOSTS}
    assert len(set(orders.values())) > 1
    # three workers on one machine share its disk: found out, and no two hosts measured at once
    assert len(set(plan["fleet"]["disks"].values())) == 1 and plan["fleet"]["share_disk"] is False
    spans = sorted(tuple(r["notes"]["measured"]) for r in rows)
    for (_, end), (start, _) in zip(spans, spans[1:]):
        assert start >= end - 0.002, "two hosts on one disk measured at the same time"
    # environment.json per host, collected on the host
    env = json.loads((out / "environment.json").read_text())
    assert sorted(env["hosts"]) == list(HOSTS)
    for host in HOSTS:
        assert env["hosts"][host]["host"] == host and env["hosts"][host]["engine"] == "postgres" and env["hosts"][host]["device"]
    # per-host verdicts and the fleet's
    summary = json.loads((out / "summary.json").read_text())
    fleet = summary["fleet"]
    for host in HOSTS:
        assert fleet["hosts"][host]["verdict"].startswith("Best multiblock_read is "), fleet["hosts"][host]["verdict"]
        assert fleet["hosts"][host]["cells_ok"] == 8
    assert re.match(r"The best multiblock_read is \d+ \(.+?\) on [1-3] of 3 hosts", summary["verdict"]), summary["verdict"]
    parts = fleet["agree"] + fleet["close"] + list(fleet["differ"])
    assert sorted(parts) == list(HOSTS) and fleet["agree"]
    for host in fleet["differ"]:
        assert f"{host} differs: its best is" in summary["verdict"]
    assert summary["headline"].startswith("Best multiblock_read is ")
    assert "rows_per_s per host" in proc.stdout and summary["verdict"] in proc.stdout.replace("\n", " ")
    for host in HOSTS:
        assert f"[{host} block 1] multiblock_read = " in proc.stdout


def test_fleet_status_lists_the_workers_and_their_disk(fleet):
    runner = CliRunner()
    result = runner.invoke(main, ["fleet", "status", "--fleet", fleet.address, *fleet.trust, "--json"])
    assert result.exit_code == 0, result.output
    workers = json.loads(result.output)
    assert [w["name"] for w in workers] == list(HOSTS)
    assert len({w["disk"] for w in workers}) == 1  # one machine: one disk
    for w in workers:
        assert w["engines"]["postgres"] and w["file_system"] and w["device"] and w["busy"] == []
        assert w["cache_dir"] == str(fleet.caches[w["name"]])
    table = runner.invoke(main, ["fleet", "status", "--fleet", fleet.address, *fleet.trust])
    assert table.exit_code == 0 and all(h in table.output for h in HOSTS) and "postgres 18" in table.output


def test_compare_two_hosts_of_the_run(mbrc_run):
    _, out = mbrc_run
    runner = CliRunner()
    result = runner.invoke(main, ["fleet", "compare", str(out), "host-a", "host-c"])
    assert result.exit_code == 0, result.output
    assert "B against A" in result.output and "on host-a" in result.output and "on host-c" in result.output
    result = runner.invoke(main, ["fleet", "compare", str(out), "host-a", "host-x"])
    assert result.exit_code == 2 and "HOST_B: 'host-x' is not a host of this run" in result.output


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_bad_input_exits_2_naming_the_option(fleet, mbrc_run, tmp_path, monkeypatch):
    _, fleet_run = mbrc_run
    monkeypatch.setenv("BLOCKLAB_CACHE", str(tmp_path / "cache"))  # `worker --cache` sets it in this process: put back after
    from blocklab.experiment import prepare
    from blocklab.results import RunDir
    from blocklab.runner import SilentReporter, run
    from blocklab.spec import spec_from_dict

    local = tmp_path / "local"
    spec = spec_from_dict({"name": "local", "engine": {"kind": "null"}, "workload": {"kind": "null"}, "knobs": {"null.level": [1, 2]},
                           "measure": {"repeats": 1, "cache": "warm"}}, "test", {})
    run(prepare(spec, "# test", "test"), RunDir(local), SilentReporter())
    nowhere = f"tcp://127.0.0.1:{_free_port()}"
    cases = [
        ([*MBRC, "--fleet", fleet.address, "--insecure", "--hosts", "host-a,host-x"], "--hosts: host-x: no worker of that name"),
        ([*MBRC, "--fleet", nowhere, "--insecure", "--fleet-timeout", "1"], f"--fleet: cannot reach the scheduler at {nowhere}"),
        ([*MBRC, "--fleet", fleet.address], "--fleet: " + repr(fleet.address) + " is plain TCP, which a fleet refuses"),
        ([*MBRC, "--fleet", "tcp://10.20.30.40:8786", "--insecure"], "--insecure (plain TCP) is only for a try on one machine"),
        ([*MBRC, "--hosts", "host-a"], "--hosts: goes with --fleet ADDRESS"),
        ([*MBRC, "--fleet", fleet.address, "--insecure", "--dsn", "host=db1"], "--dsn: a fleet measures each host's own disk"),
        ([*MBRC, "--fleet", fleet.address, "--insecure", "--hosts", "host-a,host-a"], "--hosts: host-a given twice"),
        (["run", "--resume", str(fleet_run)], f"--fleet: {fleet_run} was measured on a fleet"),
        (["run", "--resume", str(fleet_run), "--fleet", fleet.address, "--insecure", "--hosts", "host-z"], "--hosts: host-z: not a host of this run"),
        (["run", "--resume", str(local), "--fleet", fleet.address, "--insecure"], "--fleet: " + f"{local} was measured on one machine"),
        (["worker", "--scheduler", fleet.address, "--insecure", "--name", "host-a", "--cache", str(tmp_path / "dup")], "--name: a worker named 'host-a' is already connected"),
        (["worker", "--scheduler", nowhere, "--insecure", "--timeout", "1", "--cache", str(tmp_path / "w")], f"--scheduler: cannot reach the scheduler at {nowhere}"),
        (["worker", "--scheduler", fleet.address, "--insecure", "--name", "a/b"], "--name: 'a/b': a host name cannot contain"),
        (["fleet", "status", "--fleet", nowhere, "--insecure", "--timeout", "1"], f"--fleet: cannot reach the scheduler at {nowhere}"),
    ]
    runner = CliRunner()
    for args, message in cases:
        result = runner.invoke(main, args)
        assert result.exit_code == 2, (args, result.output, result.exception)
        assert message in " ".join(result.output.split()), (args, result.output)
        assert "Traceback" not in result.output


def test_a_killed_worker_leaves_its_cells_missing_and_resume_measures_them_once(fleet, tmp_path):
    out = tmp_path / "killed"
    log = tmp_path / "run.log"
    proc = fleet.popen([*MBRC, "--fleet", fleet.address, *fleet.trust, "--out", str(out)], log)
    try:
        deadline = time.monotonic() + 300
        while sum(1 for r in rows_of(out) if r.get("host") == "host-c") < 2:
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        fleet.kill_worker("host-c")
        code = proc.wait(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    text = log.read_text()
    assert code == 1, text
    assert "host-c lost" in text and f"blocklab run --resume {out} --fleet {fleet.address} --insecure" in " ".join(text.split())
    cells = planned(out)
    rows = rows_of(out)
    ok = ok_counts(rows)
    for host in ("host-a", "host-b"):  # the other hosts finished
        assert all(ok[cid] == 1 for cid in cells[host]), host
    measured_c = [cid for cid in cells["host-c"] if ok[cid]]
    assert 0 < len(measured_c) < len(cells["host-c"])  # the lost host's cells are missing ...
    assert all(r["cell_id"].startswith(r["host"] + "/") for r in rows)  # ... never measured on another host
    summary = json.loads((out / "summary.json").read_text())
    assert "host-c" in summary["fleet"]["lost"] and "host-c stopped before the end" in summary["verdict"]
    before = (out / "results.jsonl").read_text()

    fleet.start_worker("host-c", fleet.caches["host-c"])  # the worker is back (its killed server is reaped)
    resumed = fleet.run("run", "--resume", str(out), "--fleet", fleet.address, *fleet.trust)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "opening the experiment on 1 host(s): host-c" in resumed.stdout
    rows = rows_of(out)
    assert (out / "results.jsonl").read_text().startswith(before)  # nothing measured before is touched
    assert ok_counts(rows) == Counter(cid for ids in cells.values() for cid in ids)  # every cell ok exactly once
    assert json.loads((out / "summary.json").read_text())["fleet"]["lost"] == {}


def test_an_engine_killed_on_a_worker_is_recovered_there(fleet, tmp_path):
    """The runner's recovery works on a worker as in a local run: host-b's PostgreSQL
    is killed (SIGKILL) mid-run; the cell it took is recorded as `engine died`, the
    server restarted (its own crash recovery) and the cell measured again there;
    every cell of every host ends ok, once."""
    out = tmp_path / "died"
    log = tmp_path / "run.log"
    pid_file = fleet.caches["host-b"] / "postgres" / "data" / "postmaster.pid"
    proc = fleet.popen([*MBRC, "--fleet", fleet.address, *fleet.trust, "--out", str(out)], log)
    try:
        deadline = time.monotonic() + 300
        while not any(r.get("host") == "host-b" for r in rows_of(out)):
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        os.kill(int(pid_file.read_text().split()[0]), signal.SIGKILL)
        code = proc.wait(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    text = log.read_text()
    assert code == 0, text
    rows = rows_of(out)
    died = [r for r in rows if r["status"].startswith("engine died:")]
    assert len(died) == 1 and died[0]["host"] == "host-b", [r["status"] for r in rows if r["status"] != "ok"]
    assert "host-b: the engine died (" in " ".join(text.split())
    assert ok_counts(rows) == Counter(cid for ids in planned(out).values() for cid in ids)  # the cell measured again, once
    assert died[0]["cell_id"] in ok_counts(rows)


NULL_EXPERIMENT = """
name = "nullfleet"
[engine]
kind = "null"
[workload]
kind = "null"
sleep_s = 0.25
[knobs]
"null.level" = [1, 2, 3, 4]
[measure]
repeats = 2
cache = "warm"
"""


def test_a_slow_host_does_not_hold_the_others(fleet, tmp_path):
    """host-b's worker is frozen (SIGSTOP) mid-run: host-a and host-c measure all their
    cells meanwhile (--share-disk: these three are taken as hosts of their own);
    host-b finishes once it is let go."""
    experiment = tmp_path / "null.toml"
    experiment.write_text(NULL_EXPERIMENT)
    out = tmp_path / "slow"
    log = tmp_path / "run.log"
    proc = fleet.popen(["run", str(experiment), "--fleet", fleet.address, *fleet.trust, "--share-disk", "--out", str(out)], log)
    frozen = fleet.workers["host-b"]
    try:
        deadline = time.monotonic() + 120
        while not any(r.get("host") == "host-b" for r in rows_of(out)):
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        os.kill(frozen.pid, signal.SIGSTOP)
        stopped_at = sum(1 for r in rows_of(out) if r.get("host") == "host-b")
        try:
            deadline = time.monotonic() + 120
            while any(sum(1 for r in rows_of(out) if r.get("host") == h) < 8 for h in ("host-a", "host-c")):
                assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
                time.sleep(0.1)
            assert sum(1 for r in rows_of(out) if r.get("host") == "host-b") <= stopped_at + 1  # at most the cell in flight
        finally:
            os.kill(frozen.pid, signal.SIGCONT)
        code = proc.wait(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert code == 0, log.read_text()
    assert ok_counts(rows_of(out)) == Counter(cid for ids in planned(out).values() for cid in ids)


def test_a_host_busy_with_another_run_is_refused(fleet, tmp_path):
    """One run at a time per host: a second run that wants host-a while a first one
    measures there is refused before it touches anything; `fleet status` says who holds it."""
    experiment = tmp_path / "null.toml"
    experiment.write_text(NULL_EXPERIMENT.replace("sleep_s = 0.25", "sleep_s = 0.5"))
    first, second = tmp_path / "first", tmp_path / "second"
    proc = fleet.popen(["run", str(experiment), "--fleet", fleet.address, *fleet.trust, "--hosts", "host-a", "--out", str(first)],
                       tmp_path / "first.log")
    try:
        deadline = time.monotonic() + 120
        while not rows_of(first):
            assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "first.log").read_text()
            time.sleep(0.05)
        runner = CliRunner()
        status = runner.invoke(main, ["fleet", "status", "--fleet", fleet.address, *fleet.trust, "--json"])
        busy = {w["name"]: w["busy"] for w in json.loads(status.output)}
        assert busy["host-b"] == [] and len(busy["host-a"]) == 1 and busy["host-a"][0].startswith("first from ")
        refused = runner.invoke(main, ["run", str(experiment), "--fleet", fleet.address, *fleet.trust, "--hosts", "host-b,host-a",
                                       "--out", str(second)])
        assert refused.exit_code == 1, refused.output
        assert "host host-a is measuring another run (first from " in " ".join(refused.output.split())
        assert not second.exists()  # refused before anything was written
        assert proc.wait(timeout=300) == 0, (tmp_path / "first.log").read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert ok_counts(rows_of(first)) == Counter(planned(first)["host-a"])


def test_a_stopped_coordinator_frees_the_hosts_and_resume_finishes(fleet, tmp_path):
    """SIGTERM (or Ctrl-C) on the machine that started the run: it keeps every row that
    came back, prints the resume command and exits 130; each worker's janitor stops
    the engine of the run nobody records any more, so the hosts are free; --resume
    measures the rest, each cell once."""
    experiment = tmp_path / "null.toml"
    experiment.write_text(NULL_EXPERIMENT)
    out = tmp_path / "stopped"
    log = tmp_path / "run.log"
    proc = fleet.popen(["run", str(experiment), "--fleet", fleet.address, *fleet.trust, "--share-disk", "--out", str(out)], log)
    try:
        deadline = time.monotonic() + 120
        while len(rows_of(out)) < 3:
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    text = " ".join(log.read_text().split())
    assert code == 130, text
    assert f"continue with: blocklab run --resume {out} --fleet {fleet.address} --insecure" in text
    kept = len(rows_of(out))
    assert 3 <= kept < 24
    runner = CliRunner()
    deadline = time.monotonic() + 60
    while True:  # the labs are closed by the workers themselves, once the cell in flight is done
        status = runner.invoke(main, ["fleet", "status", "--fleet", fleet.address, *fleet.trust, "--json"])
        if all(w["busy"] == [] for w in json.loads(status.output)):
            break
        assert time.monotonic() < deadline, status.output
        time.sleep(0.5)
    resumed = fleet.run("run", "--resume", str(out), "--fleet", fleet.address, *fleet.trust)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert ok_counts(rows_of(out)) == Counter(cid for ids in planned(out).values() for cid in ids)


def test_the_report_shows_the_hosts_side_by_side(mbrc_run, tmp_path):
    """report.html in headless Chromium: the hosts table (one row per host) and the
    picture with one curve per host render; no console error."""
    import matplotlib.image
    import numpy as np
    from test_report_browser import CHROMIUM, chromium, page_console_lines

    _, out = mbrc_run
    report = out / "report.html"
    assert (out / "plots" / "fleet-hosts.png").exists()
    if not Path(CHROMIUM).exists():
        pytest.fail("chromium is not installed: run `make test` (it installs it as root) or `sudo apt-get install chromium`")
    result = chromium(report, "--dump-dom", "--virtual-time-budget=5000")
    assert result.returncode == 0, result.stderr[-2000:]
    dom = result.stdout
    table = dom.split('id="hosts-table"', 1)[1].split("</table>", 1)[0]
    assert [h for h in HOSTS if f"</span>{h}</td>" in table] == list(HOSTS)
    assert re.search(r'<img[^>]*id="plot-fleet-hosts"', dom)
    rendered = re.search(r'data-plots-rendered="(\d+)/(\d+)"', dom)
    assert rendered and rendered.group(1) == rendered.group(2) and int(rendered.group(2)) >= 3
    assert dom.index('id="hosts-table"') < dom.index('id="settings-table"')  # the hosts before the pooled figures
    assert "all hosts pooled" in dom
    assert "No device twin on a fleet run" in dom and "--device-twin only" not in dom  # `run --fleet` refuses it
    assert page_console_lines(result.stderr) == []
    shot = tmp_path / "fleet.png"
    chromium(report, f"--screenshot={shot}", "--window-size=1400,3000", "--hide-scrollbars")
    pixels = np.asarray(matplotlib.image.imread(shot))[..., :3]
    assert float(pixels.std()) > 0.05
    # the hosts' curves: the three host colours are drawn in the page's upper part
    band = (pixels[:1600].reshape(-1, 3) * 255).astype(int)
    for colour in ("#1f5fa8", "#e0701f", "#2e8b3a"):
        rgb = np.array([int(colour[i:i + 2], 16) for i in (1, 3, 5)])
        assert (np.abs(band - rgb).sum(axis=1) < 40).sum() > 200, colour
