"""The fleet of tests/test_fleet.py with TLS on: a CA made by `blocklab fleet certs`,
a scheduler and three workers that talk TLS only, mbrc --quick on it; a plain-TCP
client, and a client or worker holding another CA's certificates, are refused."""

from __future__ import annotations

import json
import os
from collections import Counter

import pytest
from fleet_procs import Fleet, rows_of
from test_fleet import HOSTS, MBRC, ok_counts, planned

pytestmark = [pytest.mark.engine]


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    from blocklab.fleet.security import make_certs

    directory = tmp_path_factory.mktemp("certs") / "fleet"
    make_certs(directory)
    return directory


@pytest.fixture(scope="module")
def tls_fleet(cache_dir, tmp_path_factory, certs):
    tmp = tmp_path_factory.mktemp("tls-fleet")
    env = dict(os.environ, BLOCKLAB_RESULTS=str(tmp / "results"), BLOCKLAB_CACHE=str(cache_dir / "fleet-coordinator"))
    procs = Fleet(tmp, env, certs=certs)
    try:
        assert procs.start_scheduler().startswith("tls://127.0.0.1:")
        for name in HOSTS:
            procs.start_worker(name, cache_dir / f"fleet-{name}")  # the caches of test_fleet.py's hosts: their data set is reused
        yield procs
    finally:
        procs.stop()


def test_mbrc_quick_over_tls(tls_fleet, tmp_path):
    out = tmp_path / "tls"
    proc = tls_fleet.run(*MBRC, "--fleet", tls_fleet.address, *tls_fleet.trust, "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    cells = planned(out)
    assert sorted(cells) == list(HOSTS)
    assert ok_counts(rows_of(out)) == Counter(cid for ids in cells.values() for cid in ids)
    summary = json.loads((out / "summary.json").read_text())
    assert sorted(summary["fleet"]["hosts"]) == list(HOSTS) and summary["verdict"].startswith("The best multiblock_read is ")
    assert json.loads((out / "plan.json").read_text())["fleet"]["scheduler"] == tls_fleet.address


def test_plain_tcp_and_strangers_are_refused(tls_fleet, tmp_path):
    from distributed import Client

    from blocklab.fleet.security import load_security, make_certs

    plain = "tcp://" + tls_fleet.address.removeprefix("tls://")
    # the blocklab commands: plain TCP to a TLS scheduler does not get through
    status = tls_fleet.run("fleet", "status", "--fleet", plain, "--insecure", "--timeout", "2")
    assert status.returncode == 2 and f"--fleet: cannot reach the scheduler at {plain}" in status.stdout + status.stderr
    # a Dask client without TLS: refused
    with pytest.raises((OSError, TimeoutError)):
        Client(plain, timeout=2, set_as_default=False)
    # TLS with certificates of another CA: refused both ways (Dask checks the peer's chain)
    other = tmp_path / "other-ca"
    make_certs(other)
    with pytest.raises((OSError, TimeoutError)):
        Client(tls_fleet.address, security=load_security("client", other), timeout=2, set_as_default=False)
    stranger = tls_fleet.run("worker", "--scheduler", tls_fleet.address, "--certs", str(other), "--name", "stranger",
                             "--timeout", "2", "--cache", str(tmp_path / "stranger"))
    assert stranger.returncode == 2 and "--scheduler: cannot reach the scheduler" in stranger.stdout + stranger.stderr
    # and the fleet's own client still gets in, and sees only the three hosts
    allowed = tls_fleet.run("fleet", "status", "--fleet", tls_fleet.address, *tls_fleet.trust, "--json")
    assert allowed.returncode == 0, allowed.stderr
    assert [w["name"] for w in json.loads(allowed.stdout)] == list(HOSTS)
