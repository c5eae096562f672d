"""blocklab tune on a fleet: a scheduler and two workers as separate processes on
127.0.0.1 (host-a, host-b; plain TCP, --insecure), each host tuning the null
engine's synthetic surface on its own; then every host's winner measured on every
host, and whether the hosts agree."""

from __future__ import annotations

import json
import os
from collections import Counter

import pytest
from fleet_procs import Fleet
from test_tune import NULL_TOML, null_score

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
        assert phases["confirm"] == 4 * 3 and phases["race"] > 0
        assert (out / "hosts" / host / "report.html").exists()
    agreement = state["agreement"]
    assert agreement["verdict"] in proc.stdout
    winners = {h: state["tunes"][h]["winner"] for h in HOSTS}
    if len(set(winners.values())) == 1:
        assert agreement["agree"] and "found the same winner" in agreement["verdict"]
    else:
        # every host measured both winners in 4 fresh blocks, paired against its own
        for host in HOSTS:
            rows = [json.loads(x) for x in (out / "hosts" / host / "results.jsonl").read_text().splitlines()]
            cross = Counter(r["notes"]["tune"]["phase"] for r in rows)["cross"]
            assert cross == 4 * 2 == state["cross_cells"][host]
            other = next(w for h, w in winners.items() if h != host)
            adv = agreement["hosts"][host]["others"][other]
            assert adv["blocks"] == 4 and adv["low"] is not None
        assert agreement["verdict"].startswith(("The hosts agree as far as the evidence goes", "The hosts differ"))
    html = (out / "report.html").read_text()
    assert "Each host's tune" in html and "hosts/host-a/report.html" in html
