"""What the coordinator of a fleet run writes into the one run directory besides
the rows: environment.json with every host's environment, summary.json rewritten
as rows come back, and report.html re-rendered off the thread that appends them.

    fleet_environment(hosts, scheduler)     environment.json of a fleet run
    RunSummaries(sweep, fplan, name, rows)  summary.json during the run (throttled; forced at the end)
    RunReports(run_dir)                     report.html on a thread of its own (one render at a time)

These live on the coordinator's machine only; nothing here crosses the wire.
"""

from __future__ import annotations

import queue
import socket
import threading
import time
from collections.abc import Mapping

from ..analysis.fleet import Sweep, fleet_summary, host_summary, rows_by_host
from ..jsonvalue import as_object
from ..report.writer import refresh_report
from ..results import SUMMARY_FILE, ResultRow, RunDir
from .plan import FleetPlan


def fleet_environment(hosts: Mapping[str, Mapping[str, object]], scheduler: str,
                      previous: Mapping[str, object] | None = None) -> dict[str, object]:
    """environment.json of a fleet run: each host's own environment under `hosts`
    (collected on that host), and at the top what they share, so that readers of a
    local run's environment (the report, compare) find the usual fields."""
    envs: dict[str, Mapping[str, object]] = {h: as_object(e) for h, e in as_object((previous or {}).get("hosts")).items()}
    for host, env in hosts.items():
        envs.setdefault(host, env)  # a resumed host keeps the environment it started the run with
    first = next(iter(envs.values()))
    common = {k: v for k, v in first.items() if all(e.get(k) == v for e in envs.values())}
    common["host"] = ", ".join(envs)
    if "device" not in common:
        common["device"] = ", ".join(f"{h}: {e.get('device')}" for h, e in envs.items())
    common["hosts"] = envs
    common["fleet"] = {"scheduler": scheduler, "coordinator": socket.gethostname(), "hosts": list(envs)}
    return common


class RunReports:
    """report.html rewritten while the run goes, off the thread that appends rows: a
    render costs a second or more (matplotlib) and rows must reach the disk as they
    come. One render at a time; a poke during a render asks for one more after it
    (refresh_report itself skips renders that would cost over a quarter of the time)."""

    def __init__(self, run_dir: RunDir):
        self.run_dir = run_dir
        self._wanted = threading.Event()
        self._closing = False
        self._messages: queue.Queue[str] = queue.Queue()
        self._thread = threading.Thread(target=self._loop, name="blocklab-fleet-report", daemon=True)
        self._thread.start()

    def poke(self) -> None:
        self._wanted.set()

    def messages(self) -> list[str]:
        out = []
        while not self._messages.empty():
            out.append(self._messages.get_nowait())
        return out

    def _loop(self) -> None:
        while True:
            self._wanted.wait()
            self._wanted.clear()
            if self._closing:
                return
            if message := refresh_report(self.run_dir):  # never raises: the report never stops a run
                self._messages.put(message)

    def close(self) -> None:
        """Wait for a render in progress (the caller renders the last one itself)."""
        self._closing = True
        self._wanted.set()
        self._thread.join(timeout=120)


class RunSummaries:
    """summary.json during a fleet run. A write recomputes only the analyses of the
    hosts that sent rows since the last one (a few ms each; rows that arrive together
    cost one); the analysis of every host's rows pooled costs more as the fleet grows
    (a bootstrap over all rows), so it is redone only when the time since the last one
    is over 3x what that one cost, and always at the end."""

    def __init__(self, sweep: Sweep, fplan: FleetPlan, name: str, rows: list[ResultRow]):
        self.sweep = sweep
        self.fplan = fplan
        self.name = name
        self.rows = list(rows)
        self.by_host = rows_by_host(self.rows, fplan.hosts)
        self.hosts = {h: host_summary(sweep, self.by_host.get(h, []), len(p.cells)) for h, p in fplan.hosts.items()}
        self.pooled: dict[str, object] | None = None
        self._pooled_at = 0.0
        self._pooled_cost = 0.0
        self._dirty: set[str] = set()
        self._written_at = 0.0
        self._write_cost = 0.0

    def add(self, row: ResultRow) -> None:
        self.rows.append(row)
        self.by_host.setdefault(row.host, []).append(row)
        self._dirty.add(row.host)

    def write(self, run_dir: RunDir, lost: dict[str, str], *, force: bool = False) -> dict[str, object] | None:
        """Recompute and write summary.json; None when skipped: like the report, it takes
        at most about a quarter of the coordinator's time (with a hundred hosts the
        file alone is megabytes), and `force` (the end of a run) always writes."""
        start = time.monotonic()
        if not force and start - self._written_at < 3 * self._write_cost:
            return None
        for host in sorted(self._dirty):
            planned = len(self.fplan.hosts[host].cells) if host in self.fplan.hosts else None
            self.hosts[host] = host_summary(self.sweep, self.by_host[host], planned)
        self._dirty.clear()
        now = time.monotonic()
        if force or self.pooled is None or now - self._pooled_at >= 3 * self._pooled_cost:
            self.pooled = self.sweep.summarise(self.rows)
            self._pooled_at = time.monotonic()
            self._pooled_cost = self._pooled_at - now
        summary = fleet_summary(self.sweep, self.rows, {h: len(p.cells) for h, p in self.fplan.hosts.items()}, name=self.name,
                                seed=self.fplan.seed, lost=lost, pooled=self.pooled, host_summaries=self.hosts)
        run_dir.write_json(SUMMARY_FILE, summary)
        self._written_at = time.monotonic()
        self._write_cost = self._written_at - start
        return summary



__all__ = ["RunReports", "RunSummaries", "fleet_environment"]
