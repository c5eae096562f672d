"""Fleet pieces that need no process of their own: per-host plans, addresses and
certificates, the fleet verdict, two hosts compared, the report's hosts section,
and the result row's host field."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from blocklab.analysis.fleet import Sweep, compare_hosts, fleet_summary, fleet_verdict, host_summary
from blocklab.engines.base import ApplyClass
from blocklab.fleet import FleetInputError
from blocklab.fleet.plan import HOST_SEP, FleetPlan, check_host_name, host_cell_id, host_seed
from blocklab.fleet.security import certs_dir, check_address, is_loopback, load_security, make_certs
from blocklab.results import ResultRow, RunDir

HOSTS = ["host-a", "host-b", "host-c"]
LEVELS = [1, 2, 4, 8]


# ---------------------------------------------------------------------- plans
def test_each_host_gets_its_own_order_from_a_seed_of_its_own():
    plan = FleetPlan.make({"multiblock_read": LEVELS}, 3, 42, {"multiblock_read": ApplyClass.SESSION}, HOSTS)
    assert host_seed(42, "host-a") == host_seed(42, "host-a") != host_seed(42, "host-b") != host_seed(43, "host-b")
    orders = {h: [c.setting.label for c in p.cells] for h, p in plan.hosts.items()}
    assert len(set(map(tuple, orders.values()))) == 3
    for host, p in plan.hosts.items():  # the same plan everywhere: every setting once per block
        assert p.seed == host_seed(42, host)
        for block in range(3):
            assert sorted(c.setting.as_dict()["multiblock_read"] for c in p.cells if c.block == block) == LEVELS
    data = json.loads(json.dumps(plan.to_dict()))
    assert len(data["cells"]) == plan.total == 36
    assert all(c["cell_id"] == host_cell_id(c["host"], c["cell_id"].split(HOST_SEP, 1)[1]) for c in data["cells"])
    again = FleetPlan.from_dict(data)
    assert {h: [c.cell_id for c in p.cells] for h, p in again.hosts.items()} == {h: [c.cell_id for c in p.cells] for h, p in plan.hosts.items()}
    assert again.seed == 42 and again.apply_class == {"multiblock_read": ApplyClass.SESSION}


def test_hosts_on_one_disk_take_turns_unless_asked():
    plan = FleetPlan.make({"x": [1]}, 1, 1, {}, HOSTS, disks={"host-a": "m1:vda", "host-b": "m1:vda", "host-c": "m2:vda"})
    assert plan.disk_groups() == [["host-a", "host-b"], ["host-c"]]
    plan.share_disk = True
    assert plan.disk_groups() == [["host-a"], ["host-b"], ["host-c"]]


def test_host_names_that_cannot_be_part_of_a_cell_id_are_refused():
    assert check_host_name("db7.example.com") is None
    for bad in ("", "a/b", "a,b", "a b", "x" * 101):
        assert check_host_name(bad)


# ---------------------------------------------------------------------- addresses and certificates
def test_addresses_plain_tcp_only_on_loopback_with_insecure():
    assert check_address("--fleet", "sched:9000", False) == "tls://sched:9000"
    assert check_address("--fleet", "tls://10.0.0.5", False) == "tls://10.0.0.5:8786"
    assert check_address("--fleet", "127.0.0.1:8786", True) == "tcp://127.0.0.1:8786"
    assert check_address("--listen", "tls://0.0.0.0:0", False, listening=True) == "tls://0.0.0.0:0"
    assert check_address("--fleet", "tcp://[::1]:8786", True) == "tcp://[::1]:8786"
    refused = {
        ("tcp://127.0.0.1:8786", False): "is plain TCP, which a fleet refuses",
        ("tcp://10.0.0.5:8786", True): "only for a try on one machine",
        ("tls://127.0.0.1:8786", True): "is TLS but --insecure was given",
        ("udp://host:1", False): "a fleet address is tls://HOST:PORT",
        ("tls://host:99999", False): "the port must be a number from 1 to 65535",
        ("tls://0.0.0.0:8786", False): "not the wildcard",
    }
    for (address, insecure), message in refused.items():
        with pytest.raises(FleetInputError, match="^--fleet: ") as err:
            check_address("--fleet", address, insecure)
        assert message in str(err.value)
    assert is_loopback("127.0.0.1") and is_loopback("localhost") and not is_loopback("10.1.2.3") and not is_loopback("")


def test_certs_make_a_ca_and_a_pair_per_role_and_refuse_to_overwrite(tmp_path, monkeypatch):
    written = make_certs(tmp_path / "certs")
    assert sorted(p.name for p in written) == sorted(
        ["ca.pem", "ca-key.pem", *(f"{r}{s}.pem" for r in ("scheduler", "worker", "client") for s in ("", "-key"))])
    for path in written:
        assert (path.stat().st_mode & 0o777) == (0o600 if path.name.endswith("-key.pem") else 0o644)
    for role in ("scheduler", "worker", "client"):
        security = load_security(role, tmp_path / "certs")
        assert security is not None and security.require_encryption
        assert getattr(security, f"tls_{role}_cert").endswith(f"{role}.pem")
    with pytest.raises(FleetInputError, match="^DIR: .* already holds ca.pem"):
        make_certs(tmp_path / "certs")
    # a certificate of another CA, a missing key: refused naming --certs and the file
    make_certs(tmp_path / "other")
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    for name in ("ca.pem", "client.pem", "client-key.pem"):
        (mixed / name).write_bytes((tmp_path / ("certs" if name == "ca.pem" else "other") / name).read_bytes())
    with pytest.raises(FleetInputError, match=r"^--certs: .*client.pem was not signed by .*ca.pem"):
        load_security("client", mixed)
    (mixed / "client-key.pem").unlink()
    with pytest.raises(FleetInputError, match=r"^--certs: .*client-key.pem is missing"):
        load_security("client", mixed)
    # --certs defaults to $BLOCKLAB_FLEET_CERTS; nothing at all is refused, naming --certs
    monkeypatch.delenv("BLOCKLAB_FLEET_CERTS", raising=False)
    with pytest.raises(FleetInputError, match="^--certs: a fleet talks TLS"):
        certs_dir(None, False)
    monkeypatch.setenv("BLOCKLAB_FLEET_CERTS", str(tmp_path / "certs"))
    assert certs_dir(None, False) == tmp_path / "certs" and certs_dir(None, True) is None
    with pytest.raises(FleetInputError, match="^--insecure: plain TCP takes no certificates"):
        certs_dir(tmp_path / "certs", True)


# ---------------------------------------------------------------------- the fleet verdict
def _sweep(goal: str = "max") -> Sweep:
    labels = [f"multiblock_read={v}" for v in LEVELS]
    return Sweep(metric="rows_per_s", goal=goal, labels=labels, settings_by_label={f"multiblock_read={v}": {"multiblock_read": v} for v in LEVELS},
                 seed=3, describe={f"multiblock_read={v}": f"{v} ({v * 8} kB)" for v in LEVELS}, knob_label="multiblock_read", unit="rows/s")


def _rows(host: str, peak: int, repeats: int = 5, flat: bool = False, seed: int = 0) -> list[ResultRow]:
    """A host whose throughput peaks at `peak` (or is the same everywhere: `flat`), a little noise."""
    rng = random.Random(f"{host}{seed}")
    rows = []
    for block in range(repeats):
        for v in LEVELS:
            value = 100.0 if flat else 100.0 - 20 * abs(LEVELS.index(v) - LEVELS.index(peak))
            rows.append(ResultRow(cell=len(rows), block=block, settings={"multiblock_read": v}, applied={}, status="ok",
                                  metrics={"rows_per_s": value * (1 + rng.gauss(0, 0.005))},
                                  cell_id=f"{host}/b{block}:multiblock_read={v}", host=host))
    return rows


def _summaries(sweep: Sweep, per_host: dict[str, list[ResultRow]]) -> dict[str, dict]:
    return {h: host_summary(sweep, rows, 4 * 5) for h, rows in per_host.items()}


def test_fleet_verdict_counts_the_hosts_that_agree_and_names_those_that_differ():
    sweep = _sweep()
    hosts = {f"h{i}": _rows(f"h{i}", 4) for i in range(9)}
    hosts["c"] = _rows("c", 1)
    verdict = fleet_verdict(sweep, _summaries(sweep, hosts))
    assert verdict["choice"] == "multiblock_read=4"
    assert verdict["headline"] == "Best multiblock_read is 4 (32 kB) on 9 of 10 hosts"
    assert verdict["verdict"].startswith("The best multiblock_read is 4 (32 kB) on 9 of 10 hosts.")
    assert "c differs: its best is 1 (8 kB); 4 (32 kB) is 1.67x slower [" in verdict["verdict"]
    assert sorted(verdict["differ"]) == ["c"] and len(verdict["agree"]) == 9 and verdict["close"] == []


def test_a_host_where_the_choice_is_within_noise_is_not_said_to_differ():
    sweep = _sweep()
    hosts = {"a": _rows("a", 2), "b": _rows("b", 2), "flat": _rows("flat", 2, flat=True), "empty": []}
    verdict = fleet_verdict(sweep, _summaries(sweep, hosts), lost={"empty": "its worker is gone"})
    assert verdict["agree"] == ["a", "b"] or "flat" in verdict["agree"]  # a flat host may pick either by noise
    assert "flat" in verdict["agree"] + verdict["close"] and verdict["differ"] == {}
    assert verdict["unmeasured"] == ["empty"]
    assert "No measurement yet on empty." in verdict["verdict"] and "empty stopped before the end (its worker is gone)." in verdict["verdict"]


def test_a_tie_goes_to_the_setting_that_costs_the_fleet_least():
    sweep = _sweep()
    # one host each: 1, 2 and 8 are each best once; 2 is the nearest to every host's best
    hosts = {"a": _rows("a", 1), "b": _rows("b", 2), "c": _rows("c", 4)}
    verdict = fleet_verdict(sweep, _summaries(sweep, hosts))
    assert verdict["choice"] == "multiblock_read=2"


def test_fleet_summary_keeps_the_local_shape_and_adds_the_hosts():
    sweep = _sweep()
    rows = _rows("a", 2) + _rows("b", 4)
    rows.append(ResultRow(cell=99, block=0, settings={"multiblock_read": 1}, applied={}, metrics={}, status="RuntimeError: x",
                          cell_id="b/b9:multiblock_read=1", host="b"))
    summary = fleet_summary(sweep, rows, {"a": 20, "b": 20}, name="mbrc", seed=3)
    assert summary["cells_planned"] == 40 and summary["cells_ok"] == 40 and summary["cells_failed"] == 1
    assert summary["failed_cells"] == ["b/b9:multiblock_read=1"]
    assert set(summary["settings"]) == set(sweep.labels)  # the pooled analysis, as a local run's
    assert summary["verdict"] == summary["fleet"]["verdict"] and summary["pooled_verdict"].startswith("Best multiblock_read")
    assert set(summary["fleet"]["hosts"]) == {"a", "b"} and Sweep.from_dict(summary["fleet"]["sweep"]) == sweep


def test_min_goal_slowdowns_are_how_much_longer():
    sweep = _sweep("min")
    hosts = {"a": _rows("a", 1), "b": _rows("b", 1)}  # for a time, the peak is the worst: 8 is best on both
    verdict = fleet_verdict(sweep, _summaries(sweep, hosts))
    assert verdict["choice"] == "multiblock_read=8" and len(verdict["agree"]) == 2


# ---------------------------------------------------------------------- a fleet run directory
def write_fleet_run(path: Path, per_host: dict[str, list[ResultRow]], engine_version: dict[str, str] | None = None) -> Path:
    """A fleet run directory as the coordinator leaves it, without any engine."""
    from blocklab.fleet.run_files import fleet_environment
    from blocklab.results import RunDir

    sweep = _sweep()
    plan = FleetPlan.make({"multiblock_read": LEVELS}, 5, 3, {"multiblock_read": ApplyClass.SESSION}, list(per_host))
    run = RunDir(path)
    run.create()
    run.write_text("experiment.toml", "name = 'mbrc'\n")
    run.write_json("spec.json", {"source": "mbrc", "spec": {"name": "mbrc", "knobs": {"multiblock_read": LEVELS},
                                                            "measure": {"metric": "rows_per_s", "goal": "max"}, "engine": {"kind": "postgres"}},
                                 "options": {}})
    run.write_json("plan.json", plan.to_dict())
    envs = {h: {"host": h, "engine": "postgres", "engine_version": (engine_version or {}).get(h, "18.6"), "device": f"vd{h[-1]}",
                "file_system": "ext4", "dataset_rows": 1000} for h in per_host}
    run.write_json("environment.json", fleet_environment(envs, "tls://sched:8786"))
    rows = [r for rs in per_host.values() for r in rs]
    for row in rows:
        run.append(row)
    run.write_json("summary.json", fleet_summary(sweep, rows, {h: 20 for h in per_host}, name="mbrc", seed=3))
    return path


def test_two_hosts_of_a_run_compared(tmp_path):
    from blocklab.analysis.compare import CompareError, EnvironmentMismatch

    run = write_fleet_run(tmp_path / "run", {"a": _rows("a", 2), "b": _rows("b", 8), "c": _rows("c", 2)}, {"c": "17.2"})
    result = compare_hosts(run, "a", "b")
    assert [s.label for s in result.settings] == [f"multiblock_read={v}" for v in LEVELS]
    by = {s.label: s for s in result.settings}
    assert by["multiblock_read=8"].outcome == "better" and by["multiblock_read=1"].outcome == "worse"
    assert result.run_a.name == "mbrc on a" and result.run_b.environment["device"] == "vdb"
    with pytest.raises(CompareError, match="^HOST_B: 'x' is not a host of this run; its hosts: a, b, c"):
        compare_hosts(run, "a", "x")
    with pytest.raises(EnvironmentMismatch):  # another engine version needs --force, as for two runs
        compare_hosts(run, "a", "c")
    assert compare_hosts(run, "a", "c", force=True).differences[0].field == "engine_version"


def test_the_report_has_the_hosts_side_by_side_and_a_local_run_has_none(tmp_path):
    from blocklab.report.data import load_run
    from blocklab.report.fleet import fleet_context
    from blocklab.report.writer import write_report

    run = write_fleet_run(tmp_path / "run", {"a": _rows("a", 2), "b": _rows("b", 2), "c": _rows("c", 8)})
    paths = write_report(run)
    assert run / "plots" / "fleet-hosts.png" in paths
    html = (run / "report.html").read_text()
    table = html.split('id="hosts-table"', 1)[1].split("</table>", 1)[0]
    assert table.count("<tr class=\"host-") == 3 and "2 (16 kB) there" in table and "host-differ" in table
    assert html.index('id="hosts-table"') < html.index('id="plot-fleet-hosts"') < html.index('id="settings-table"')
    assert "Per setting, all hosts pooled" in html and html.count('id="plot-fleet-hosts"') == 1
    # summary.json gone (a crash between two writes): the hosts are recomputed from the rows, alike
    before = fleet_context(load_run(run))
    (run / "summary.json").unlink()
    after = fleet_context(load_run(run))
    assert before is not None and after is not None
    # (without summary.json the settings read as the run's rows tell them: here no sizes, so "2", not "2 (16 kB)")
    assert [(h["best"].split()[0], h["mark"], h["cells"]) for h in after["hosts"]] == [(h["best"].split()[0], h["mark"], h["cells"]) for h in before["hosts"]]
    assert after["verdict"].replace(" (16 kB)", "").replace(" (64 kB)", "") == before["verdict"].replace(" (16 kB)", "").replace(" (64 kB)", "")
    # a local run: no hosts section
    from blocklab.experiment import prepare
    from blocklab.runner import SilentReporter
    from blocklab.runner import run as run_local
    from blocklab.spec import spec_from_dict

    spec = spec_from_dict({"name": "local", "engine": {"kind": "null"}, "workload": {"kind": "null"}, "knobs": {"null.level": [1, 2]},
                           "measure": {"repeats": 1, "cache": "warm"}}, "test", {})
    from blocklab.results import RunDir

    run_local(prepare(spec, "# test", "test"), RunDir(tmp_path / "local"), SilentReporter())
    assert fleet_context(load_run(tmp_path / "local")) is None
    assert 'id="hosts-table"' not in (tmp_path / "local" / "report.html").read_text()
    # the CSV export names each cell's host; a local run's columns are as they were
    import csv
    import io

    from blocklab.report.writer import export_bytes

    fleet_csv = list(csv.DictReader(io.StringIO(export_bytes(run, "csv").decode())))
    assert list(fleet_csv[0])[:4] == ["cell", "cell_id", "host", "block"] and {r["host"] for r in fleet_csv} == {"a", "b", "c"}
    assert all(r["cell_id"].startswith(r["host"] + "/") for r in fleet_csv) and fleet_csv[0]["multiblock_read"]
    local_csv = list(csv.DictReader(io.StringIO(export_bytes(tmp_path / "local", "csv").decode())))
    assert "host" not in local_csv[0] and list(local_csv[0])[:3] == ["cell", "cell_id", "block"]


def test_a_row_names_its_host_only_in_a_fleet_run():
    local = ResultRow(cell=0, block=0, settings={"x": 1}, applied={}, metrics={"m": 1.0}, cell_id="b0:x=1")
    assert "host" not in json.loads(local.to_json())  # local runs' rows are as they were
    fleet = ResultRow(cell=0, block=0, settings={"x": 1}, applied={}, metrics={"m": 1.0}, cell_id="h/b0:x=1", host="h")
    assert json.loads(fleet.to_json())["host"] == "h"
    assert ResultRow.from_dict(json.loads(fleet.to_json())) == fleet
    assert ResultRow.from_dict(json.loads(local.to_json())).host == ""


def test_a_host_that_comes_back_changed_is_refused_on_resume(tmp_path):
    from blocklab.fleet.agreement import check_same_host

    run = write_fleet_run(tmp_path / "run", {"a": _rows("a", 2), "b": _rows("b", 2)})
    same = {"engine_version": "18.6", "device": "vda", "file_system": "ext4"}
    check_same_host(RunDir(run), {"a": {"environment": same}})
    with pytest.raises(FleetInputError, match=r"^--resume: host b is not as it was .*device vdb -> sda"):
        check_same_host(RunDir(run), {"b": {"environment": {**same, "device": "sda"}}})


def test_fleet_errors_survive_pickling_as_dask_carries_them():
    import pickle

    err = pickle.loads(pickle.dumps(FleetInputError("--hosts", "x: unknown")))
    assert str(err) == "--hosts: x: unknown" and err.option == "--hosts"
