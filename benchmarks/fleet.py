"""What a fleet costs (issue 16), on one machine: a scheduler and three workers as
processes on 127.0.0.1, each with its own cache (its own embedded PostgreSQL).

1. Overhead per cell: the same plan (mbrc --quick, --rows 100000, REPEATS blocks)
   run locally (runner.run, in this process) and on the fleet with one worker
   (coordinator.start_run, --hosts host-a), both on host-a's cache (the same
   cluster, the same table, the same disk), interleaved round by round in
   alternating order. A cell's time is the interval between two consecutive
   rows as the one writing results.jsonl sees them (the first cell of a run,
   which builds or checks the table, is left out). For the fleet, the worker's
   own span of each cell (notes.measured) is subtracted too: what is left is
   the dispatch (an actor call and its answer through Dask) per cell.
2. Wall time from 1 to 3 workers: the whole `run --fleet` (connect, open every
   host's lab, measure, close) with 1, 2 and 3 workers, hosts on the one disk
   taking turns (the default) and measured at once (--share-disk), configurations
   rotated within each round.
3. The coordinator's own work per row for a 100-host fleet: append (fsync),
   host analysis, summary.json, on synthetic rows (no engine), to say how many
   rows a second one coordinator can take.

    python benchmarks/fleet.py
    python benchmarks/fleet.py --rounds 8 --repeats 3 --cache-root /var/tmp/bench-fleet
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from blocklab.analysis.stats import median_ci
from blocklab.lab import Overrides, load_experiment
from blocklab.results import ResultRow, RunDir
from blocklab.runner import SilentReporter, run

HOSTS = ("host-a", "host-b", "host-c")
BIN = str(Path(sys.executable).parent / "blocklab")


class Stamps(SilentReporter):
    """When each row reached the run directory, as the one writing it sees it."""

    def __init__(self) -> None:
        super().__init__()
        self.times: list[float] = []
        self.planned_at = self.started = self.ended = 0.0

    def plan_started(self, total: int, todo: int, estimate_s: float) -> None:
        self.planned_at = time.perf_counter()  # every host's lab open: the measuring starts

    def cell_done(self, cell: Any, row: Any, line: str) -> None:
        self.times.append(time.perf_counter())

    def host_cell_done(self, host: str, cell: Any, row: Any, text: str) -> None:
        self.times.append(time.perf_counter())


def intervals(times: list[float]) -> list[float]:
    return [b - a for a, b in zip(times[1:], times[2:])]  # the first cell (table check) left out


def start_fleet(root: Path, log_dir: Path) -> tuple[str, list[subprocess.Popen]]:
    env = dict(os.environ)
    procs = []
    sched_log = log_dir / "scheduler.log"
    procs.append(_spawn([BIN, "fleet", "up", "--insecure", "--listen", "tcp://127.0.0.1:0"], sched_log, env))
    address = _wait_line(sched_log, "scheduler at ").split()[2]
    for host in HOSTS:
        cache = root / host
        cache.mkdir(parents=True, exist_ok=True)
        os.chmod(cache, 0o755)
        log = log_dir / f"{host}.log"
        procs.append(_spawn([BIN, "worker", "--scheduler", address, "--insecure", "--name", host, "--cache", str(cache)], log, env))
    for host in HOSTS:
        _wait_line(log_dir / f"{host}.log", f"worker {host} at ")
    return address, procs


def _spawn(argv: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen:
    with open(log, "w") as out:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)


def _wait_line(path: Path, text: str, timeout: float = 120) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in path.read_text().splitlines() if path.exists() else []:
            if line.startswith(text):
                return line
        time.sleep(0.2)
    raise SystemExit(f"no {text!r} in {path}")


def stop(procs: list[subprocess.Popen]) -> None:
    for proc in reversed(procs):
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


def fleet_run(address: str, hosts: list[str], out: Path, repeats: int, share_disk: bool = False) -> tuple[float, Stamps, list[ResultRow]]:
    from blocklab.fleet.coordinator import FleetRequest, start_run

    stamps = Stamps()
    t0 = time.perf_counter()
    start_run("mbrc", Overrides(rows=100_000, repeats=repeats, quick=True, seed=7), FleetRequest(address, None, hosts, share_disk), stamps, out)
    stamps.started, stamps.ended = t0, time.perf_counter()
    return stamps.ended - t0, stamps, RunDir(out).rows()


def local_run(cache: Path, out: Path, repeats: int) -> tuple[float, Stamps]:
    stamps = Stamps()
    t0 = time.perf_counter()
    exp = load_experiment("mbrc", Overrides(rows=100_000, repeats=repeats, quick=True, seed=7), cache_dir=cache)
    run(exp, RunDir(out), stamps)
    return time.perf_counter() - t0, stamps


def part1(address: str, root: Path, scratch: Path, rounds: int, repeats: int) -> None:
    print(f"\n1. overhead per cell: mbrc --quick --rows 100000 --repeats {repeats} ({8 * repeats} cells), local vs fleet of one, {rounds} rounds")
    local_med, fleet_med, dispatch_med, ratios = [], [], [], []
    for r in range(rounds):
        order = ("local", "fleet") if r % 2 == 0 else ("fleet", "local")
        got: dict[str, float] = {}
        for kind in order:
            out = scratch / f"p1-{r}-{kind}"
            if kind == "local":
                _, stamps = local_run(root / "host-a", out, repeats)
                got["local"] = statistics.median(intervals(stamps.times))
            else:
                _, stamps, rows = fleet_run(address, ["host-a"], out, repeats)
                got["fleet"] = statistics.median(intervals(stamps.times))
                spans = {r.cell_id: r.notes["measured"][1] - r.notes["measured"][0] for r in rows}
                ordered = [spans[r.cell_id] for r in rows]
                got["dispatch"] = statistics.median(i - s for i, s in zip(intervals(stamps.times), ordered[2:]))
        local_med.append(got["local"])
        fleet_med.append(got["fleet"])
        dispatch_med.append(got["dispatch"])
        ratios.append(got["fleet"] / got["local"])
        print(f"  round {r + 1} ({'/'.join(order)}): per cell local {got['local'] * 1000:.0f} ms, fleet {got['fleet'] * 1000:.0f} ms "
              f"(ratio {ratios[-1]:.3f}); dispatch beyond the worker's own span {got['dispatch'] * 1000:.1f} ms")
    mid, lo, hi = median_ci(ratios, seed=1)
    dmid, dlo, dhi = median_ci(dispatch_med, seed=1)
    print(f"  per cell, medians over rounds: local {statistics.median(local_med) * 1000:.0f} ms, fleet {statistics.median(fleet_med) * 1000:.0f} ms; "
          f"fleet/local {mid:.3f} [{lo:.3f}, {hi:.3f}]; dispatch {dmid * 1000:.1f} ms [{dlo * 1000:.1f}, {dhi * 1000:.1f}]")


def part1b(address: str, root: Path, rounds: int) -> None:
    """The same cells with nothing else going on in the coordinator: the actor call's round
    trip and the worker's own span of each cell, against run_cell in this process on the same
    cluster (its engine started once per round on each side), interleaved round by round."""
    from blocklab.fleet.coordinator import FleetRequest, _Fleet
    from blocklab.plan import Cell, Setting
    from blocklab.runner import run_cell
    from blocklab.spec import load_spec

    overrides = Overrides(rows=100_000, repeats=1, quick=True, seed=7)
    spec, text = load_spec(Path(__file__).parents[1] / "src/blocklab/recipes/mbrc.toml", overrides.as_dotted())
    values = [1, 2, 4, 8, 16, 32, 64, 128] * 3
    print(f"\n1b. bare dispatch: {len(values)} cells per side, the coordinator doing nothing else, {rounds} rounds")
    trips, spans, local = [], [], []
    for r in range(rounds):
        for kind in (("fleet", "local") if r % 2 == 0 else ("local", "fleet")):
            if kind == "fleet":
                fleet = _Fleet(FleetRequest(address, None, ["host-a"]))
                try:
                    fleet.open_labs(["host-a"], spec, text, "mbrc", {}, "bench", SilentReporter())
                    for i, v in enumerate(values):
                        t0 = time.perf_counter()
                        result = fleet.wait("host-a", fleet.labs["host-a"].measure({"index": i, "block": 0, "settings": {"multiblock_read": v}}))
                        if i:  # the first cell checks the table
                            trips.append(time.perf_counter() - t0)
                            start, end = ResultRow.from_dict(json.loads(result["rows"][-1])).notes["measured"]
                            spans.append(end - start)
                finally:
                    fleet.close()
            else:
                exp = load_experiment("mbrc", overrides, cache_dir=root / "host-a")
                try:
                    exp.engine.start()
                    exp.engine.apply(exp.fixed)
                    for i, v in enumerate(values):
                        t0 = time.perf_counter()
                        run_cell(exp, Cell(i, 0, Setting((("multiblock_read", v),))), SilentReporter())
                        if i:
                            local.append(time.perf_counter() - t0)
                finally:
                    exp.engine.stop()
    trip, lo, hi = median_ci(trips, seed=1)
    print(f"  per cell: run_cell here {statistics.median(local) * 1000:.0f} ms; on the worker {statistics.median(spans) * 1000:.0f} ms "
          f"(its own span), {trip * 1000:.0f} ms [{lo * 1000:.0f}, {hi * 1000:.0f}] as the coordinator waits for it; "
          f"round trip minus span, median of cells: {statistics.median(t - s for t, s in zip(trips, spans)) * 1000:.1f} ms")


def part2(address: str, scratch: Path, rounds: int, repeats: int) -> None:
    configs = [(1, False), (2, False), (3, False), (2, True), (3, True)]
    cells = 8 * repeats
    print(f"\n2. wall time of `run mbrc --quick --rows 100000 --repeats {repeats} --fleet` ({cells} cells per host) by workers, {rounds} rounds;"
          " open: connect and every host's lab opened (engine started, experiment validated); measure: to the last row; close: labs"
          " closed, final summary and report")
    phases: dict[tuple[int, bool], list[tuple[float, float, float]]] = {c: [] for c in configs}
    for r in range(rounds):
        rotated = configs[r % len(configs):] + configs[: r % len(configs)]
        for n, share in rotated:
            out = scratch / f"p2-{r}-{n}-{'share' if share else 'turns'}"
            wall, stamps, rows = fleet_run(address, list(HOSTS[:n]), out, repeats, share)
            assert sum(1 for x in rows if x.ok) >= cells * n, f"{out}: not every cell ok"
            got = (stamps.planned_at - stamps.started, stamps.times[-1] - stamps.planned_at, stamps.ended - stamps.times[-1])
            phases[(n, share)].append(got)
            print(f"  round {r + 1}: {n} worker(s), {'--share-disk' if share else 'taking turns'}: {wall:.1f} s "
                  f"(open {got[0]:.1f}, measure {got[1]:.1f}, close {got[2]:.1f})")
    base = statistics.median(m for _, m, _ in phases[(1, False)])
    for (n, share), values in phases.items():
        o, m, c = (statistics.median(v[i] for v in values) for i in range(3))
        print(f"  {n} worker(s), {'--share-disk ' if share else 'taking turns'}: open {o:.1f} s, measure {m:.1f} s ({m / base:.2f}x one worker's; "
              f"{m / (cells * n) * 1000:.0f} ms per cell of the fleet), close {c:.1f} s")


def part3(scratch: Path, hosts: int = 100, cells: int = 16) -> None:
    from blocklab.analysis.fleet import Sweep
    from blocklab.engines.base import ApplyClass
    from blocklab.fleet.plan import FleetPlan
    from blocklab.fleet.run_files import RunSummaries

    names = [f"h{i:03d}" for i in range(hosts)]
    levels = [1, 2, 4, 8, 16, 32, 64, 128]
    labels = [f"multiblock_read={v}" for v in levels]
    sweep = Sweep("rows_per_s", "max", labels, {f"multiblock_read={v}": {"multiblock_read": v} for v in levels}, seed=1,
                  describe={x: x.split("=")[1] for x in labels}, knob_label="multiblock_read", unit="rows/s")
    plan = FleetPlan.make({"multiblock_read": levels}, cells // len(levels), 1, {"multiblock_read": ApplyClass.SESSION}, names)
    rng = random.Random(1)
    rows = [ResultRow(cell=c.index, block=c.block, settings=c.setting.as_dict(), applied={}, status="ok",
                      metrics={"rows_per_s": 1e7 * (1 + rng.gauss(0, 0.05))}, cell_id=f"{h}/{c.cell_id}", host=h)
            for i in range(cells) for h in names for c in [plan.hosts[h].cells[i]]]
    print(f"\n3. the coordinator's work per row, {hosts} hosts x {cells} cells = {len(rows)} synthetic rows")
    for batch in (1, 10):
        out = RunDir(scratch / f"p3-{batch}")
        out.create()
        summaries = RunSummaries(sweep, plan, "mbrc", [])
        t0 = time.perf_counter()
        for i, row in enumerate(rows, 1):
            out.append(row)
            summaries.add(row)
            if i % batch == 0:
                summaries.write(out, {})
        per_row = (time.perf_counter() - t0) / len(rows)
        size = out.file("summary.json").stat().st_size
        print(f"  summary.json rewritten every {batch} row(s): {per_row * 1000:.1f} ms per row, i.e. {1 / per_row:.0f} rows/s "
              f"(summary.json at the end: {size / 1e6:.1f} MB)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=3, help="blocks per run in part 1")
    parser.add_argument("--cache-root", type=Path, default=Path("/var/tmp/blocklab-fleet-bench"))
    parser.add_argument("--parts", default="1b23", help="which parts: 1, b (1b), 2, 3")
    args = parser.parse_args()
    from blocklab.fleet.security import quiet_logs

    quiet_logs()
    args.cache_root.mkdir(parents=True, exist_ok=True)
    os.chmod(args.cache_root, 0o755)
    scratch = Path(tempfile.mkdtemp(prefix="blocklab-fleet-bench-", dir="/var/tmp"))
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S %Z')}; load average {os.getloadavg()[0]:.1f}; caches under {args.cache_root}")
    address, procs = start_fleet(args.cache_root, scratch)
    try:
        # one run first: every host's cluster made and its table built, outside the figures
        fleet_run(address, list(HOSTS), scratch / "warm-up", 1, True)
        if "1" in args.parts:
            part1(address, args.cache_root, scratch, args.rounds, args.repeats)
        if "b" in args.parts:
            part1b(address, args.cache_root, max(args.rounds // 2, 2))
        if "2" in args.parts:
            part2(address, scratch, max(args.rounds // 2, 2), args.repeats)
    finally:
        stop(procs)
    if "3" in args.parts:
        part3(scratch)
    print(f"\nload average at the end {os.getloadavg()[0]:.1f}")
    shutil.rmtree(scratch, ignore_errors=True)  # nothing kept: every figure is printed above


if __name__ == "__main__":
    main()
