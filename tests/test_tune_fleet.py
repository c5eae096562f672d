"""blocklab tune on a fleet: a scheduler and two workers as separate processes on
127.0.0.1 (host-a, host-b; plain TCP, --insecure), each host tuning the null
engine's synthetic surface on its own; then every host's winner measured on every
host, and whether the hosts agree."""

from __future__ import annotations

import json
import os
import signal
import time
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner
from fleet_procs import Fleet
from test_tune import NULL_TOML, null_score

from blocklab.cli import main

pytestmark = [pytest.mark.engine]

HOSTS = ("host-a", "host-b")


@pytest.fixture(scope="module")
def fleet(cache_dir, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tune-fleet")
    env = dict(os.environ, BLOCKLAB_RESULTS=str(tmp / "results"), BLOCKLAB_CACHE=str(cache_dir / "tune-fleet-coordinator"))
    procs = Fleet(tmp, env)
    try:
        procs.start_scheduler()
        procs.start_workers({name: cache_dir / f"tune-fleet-{name}" for name in HOSTS})
        yield procs
    finally:
        procs.stop()


def test_each_host_tunes_and_the_report_says_whether_they_agree(fleet, tmp_path):
    space = tmp_path / "space.toml"
    space.write_text(NULL_TOML)
    out = tmp_path / "run"
    proc = fleet.run("tune", str(space), "--seed", "5", "--fleet", fleet.address, *fleet.trust, "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    state = json.loads((out / "fleet-tune.json").read_text())
    assert state["hosts"] == list(HOSTS)
    optimum = null_score(37, "b")
    for host in HOSTS:
        tune = json.loads((out / "hosts" / host / "tune.json").read_text())
        assert tune["done"] and tune["spent_cells"] <= 90
        winner = tune["winner_config"]
        assert null_score(winner["null.level"], winner["null.mode"]) >= 0.97 * optimum, (host, winner)
        assert state["tunes"][host]["winner"] == tune["winner"] and state["tunes"][host]["verdict"] in proc.stdout
        rows = [json.loads(x) for x in (out / "hosts" / host / "results.jsonl").read_text().splitlines()]
        assert {r["host"] for r in rows} == {host}, "each host's rows in its own tune directory"
        assert len({r["cell_id"] for r in rows}) == len(rows), "a cell measured twice"
        phases = Counter(r["notes"]["tune"]["phase"] for r in rows)
        assert phases["confirm"] == tune["confirmation"]["blocks"] * 3 and phases["race"] > 0
        assert (out / "hosts" / host / "report.html").exists()
    agreement = state["agreement"]
    assert agreement["verdict"] in proc.stdout
    winners = {h: state["tunes"][h]["winner"] for h in HOSTS}
    if len(set(winners.values())) == 1:
        assert agreement["agree"] and "found the same winner" in agreement["verdict"]
    else:
        # every host measured both winners in the larger confirmation's number of fresh blocks, paired against its own
        blocks = max(json.loads((out / "hosts" / h / "tune.json").read_text())["confirmation"]["blocks"] for h in HOSTS)
        for host in HOSTS:
            rows = [json.loads(x) for x in (out / "hosts" / host / "results.jsonl").read_text().splitlines()]
            cross = Counter(r["notes"]["tune"]["phase"] for r in rows)["cross"]
            assert cross == blocks * 2 == state["cross_cells"][host]
            other = next(w for h, w in winners.items() if h != host)
            adv = agreement["hosts"][host]["others"][other]
            assert adv["blocks"] == blocks and adv["low"] is not None
        assert agreement["verdict"].startswith(("The hosts agree as far as the evidence goes", "The hosts differ"))
    html = (out / "report.html").read_text()
    assert "Each host's tune" in html and "hosts/host-a/report.html" in html


# slow enough cells (0.05 s) to stop the tune in its search; a small budget: the suite's time
SLOW_TOML = NULL_TOML.replace("noise = 0.03", "noise = 0.03\nsleep_s = 0.05").replace("budget = 90", "budget = 40\ncandidates = 4")


def host_rows(out: Path, host: str) -> list[str]:
    path = out / "hosts" / host / "results.jsonl"
    return [line for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def wait_until_free(fleet: Fleet) -> None:
    """The stopped coordinator's labs are closed by the workers themselves, once the cell in flight is done."""
    deadline = time.monotonic() + 60
    while True:
        status = CliRunner().invoke(main, ["fleet", "status", "--fleet", fleet.address, *fleet.trust, "--json"])
        if all(w["busy"] == [] for w in json.loads(status.output)):
            return
        assert time.monotonic() < deadline, status.output
        time.sleep(0.5)


def test_a_stopped_fleet_tune_resumes_on_its_hosts_and_measures_no_cell_twice(fleet, tmp_path):
    """SIGTERM on the coordinator mid-search: the rows are kept, the resume command printed;
    --resume refuses other hosts and an edited experiment, then replays each host's tune from
    its rows (the same seed) and measures on: every kept row is the resumed tune's, none twice,
    and fleet-tune.json and report.html are written as by an uninterrupted tune. A host whose
    report cannot be written says so on stderr, not stdout."""
    space = tmp_path / "space.toml"
    space.write_text(SLOW_TOML)
    out = tmp_path / "run"
    log = tmp_path / "tune.log"
    proc = fleet.popen(["tune", str(space), "--seed", "7", "--fleet", fleet.address, *fleet.trust, "--out", str(out)], log)
    try:
        deadline = time.monotonic() + 120
        while min(len(host_rows(out, h)) for h in HOSTS) < 8:
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    text = " ".join(log.read_text().split())
    assert code == 130, text
    assert f"continue with: blocklab tune --resume {out} --fleet {fleet.address} --insecure" in text
    assert not (out / "fleet-tune.json").exists()
    kept = {h: host_rows(out, h) for h in HOSTS}
    assert all(8 <= len(rows) < 40 for rows in kept.values()), {h: len(r) for h, r in kept.items()}
    spec = json.loads((out / "spec.json").read_text())["fleet"]
    assert spec["hosts"] == list(HOSTS) and spec["seed"] == 7 and set(spec["host_seeds"]) == set(HOSTS)

    def refused(*args: str) -> str:
        result = CliRunner().invoke(main, ["tune", "--resume", str(out), *args])
        assert result.exit_code == 2, result.output
        return " ".join(result.output.split())

    on_fleet = ["--fleet", fleet.address, *fleet.trust]
    assert ("--hosts: host-b missing; host-c not of this tune: a fleet tune resumes on the hosts it started with "
            "(host-a, host-b); give --hosts host-a,host-b or leave --hosts out") in refused(*on_fleet, "--hosts", "host-a,host-c")
    assert "this tune ran on a fleet; resume it with --resume" in refused()
    experiment = out / "experiment.toml"
    original = experiment.read_text()
    experiment.write_text(original.replace("budget = 40", "budget = 60"))
    assert "--resume: " + f"{out}: experiment.toml was edited after the tune started" in refused(*on_fleet)
    experiment.write_text(original)
    assert {h: host_rows(out, h) for h in HOSTS} == kept, "a refused resume measured nothing"

    wait_until_free(fleet)
    (out / "hosts" / "host-b" / "report.html").mkdir()  # host-b's report cannot be written: said on stderr
    resumed = fleet.run("tune", "--resume", str(out), *on_fleet)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "host-b: the report could not be written: ResultsWriteError" in resumed.stderr
    assert "could not be written" not in resumed.stdout
    state = json.loads((out / "fleet-tune.json").read_text())
    assert state["hosts"] == list(HOSTS) and state["seed"] == 7 and state["host_seeds"] == spec["host_seeds"]
    for host in HOSTS:
        assert f"{host}: {len(kept[host])} cell(s) measured before the resume: read back, not measured again" in resumed.stdout
        rows = host_rows(out, host)
        assert rows[:len(kept[host])] == kept[host], "the kept rows are left as they were"
        ids = [json.loads(r)["cell_id"] for r in rows]
        assert len(ids) == len(set(ids)), f"{host}: a cell measured twice"
        tune = json.loads((out / "hosts" / host / "tune.json").read_text())
        assert tune["done"] and state["tunes"][host]["winner"] == tune["winner"]
        assert state["tunes"][host]["verdict"] in resumed.stdout
        # the replay asked for every kept row (the search's cells: every row but the cross blocks'):
        # the resumed tune took the interrupted one's path, and measured only what it had not
        phases = Counter(json.loads(r)["notes"]["tune"]["phase"] for r in rows)
        assert tune["measured_cells"] == len(rows) - phases["cross"]
        assert phases["cross"] == state["cross_cells"].get(host, 0) and phases["confirm"] == tune["confirmation"]["blocks"] * 3
    assert (out / "hosts" / "host-a" / "report.html").is_file()
    assert state["agreement"]["verdict"] in resumed.stdout
    assert "Each host's tune" in (out / "report.html").read_text()
    again = CliRunner().invoke(main, ["tune", "--resume", str(out), *on_fleet])
    assert again.exit_code == 0 and "this fleet tune is finished" in again.output


def test_a_host_lost_mid_tune_names_the_resume_command(monkeypatch, tmp_path):
    """A host lost or stopped during the tune (FleetError once the directory is written): exit 1 with
    the error on stderr and the command that continues it, as after Ctrl-C."""
    from blocklab.fleet import FleetError
    from blocklab.fleet import tune as fleet_tune

    space = tmp_path / "space.toml"
    space.write_text(NULL_TOML)

    def lost(*args: object, **kw: object) -> None:
        err = FleetError("host host-b was lost during the tune: gone; its rows are kept under hosts/host-b")
        err.run_dir = tmp_path / "run"
        raise err

    monkeypatch.setattr(fleet_tune, "start_tune", lost)
    result = CliRunner().invoke(main, ["tune", str(space), "--fleet", "tcp://127.0.0.1:8786", "--insecure"])
    assert result.exit_code == 1, result.output
    err = " ".join(result.stderr.split())
    assert "host host-b was lost during the tune" in err
    assert f"continue with: blocklab tune --resume {tmp_path / 'run'} --fleet tcp://127.0.0.1:8786 --insecure" in err
    assert "continue with" not in result.stdout
