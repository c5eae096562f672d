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
        # the caches of test_fleet.py's hosts: their clusters and data set are reused
        procs.start_workers({name: cache_dir / f"fleet-{name}" for name in HOSTS})
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


def test_plain_tcp_and_strangers_are_refused(tls_fleet, tmp_path, monkeypatch):
    from click.testing import CliRunner
    from distributed import Client

    from blocklab.cli import main
    from blocklab.fleet.security import load_security, make_certs

    monkeypatch.setenv("BLOCKLAB_CACHE", str(tmp_path / "cache"))  # `worker --cache` sets it in this process: put back after
    runner = CliRunner()
    plain = "tcp://" + tls_fleet.address.removeprefix("tls://")
    # the blocklab commands: plain TCP to a TLS scheduler does not get through
    status = runner.invoke(main, ["fleet", "status", "--fleet", plain, "--insecure", "--timeout", "1"])
    assert status.exit_code == 2 and f"--fleet: cannot reach the scheduler at {plain}" in status.output
    # a Dask client without TLS: refused
    with pytest.raises((OSError, TimeoutError)):
        Client(plain, timeout=1, set_as_default=False)
    # TLS with certificates of another CA: refused both ways (Dask checks the peer's chain)
    other = tmp_path / "other-ca"
    make_certs(other)
    with pytest.raises((OSError, TimeoutError)):
        Client(tls_fleet.address, security=load_security("client", other), timeout=1, set_as_default=False)
    stranger = runner.invoke(main, ["worker", "--scheduler", tls_fleet.address, "--certs", str(other), "--name", "stranger",
                                    "--timeout", "1", "--cache", str(tmp_path / "stranger")])
    assert stranger.exit_code == 2 and "--scheduler: cannot reach the scheduler" in stranger.output
    # and the fleet's own client still gets in, and sees only the three hosts
    allowed = runner.invoke(main, ["fleet", "status", "--fleet", tls_fleet.address, *tls_fleet.trust, "--json"])
    assert allowed.exit_code == 0, allowed.output
    assert [w["name"] for w in json.loads(allowed.output)] == list(HOSTS)
