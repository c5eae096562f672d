"""The machine that started a fleet run: it keeps the one run directory.

    outcome = start_run("mbrc", Overrides(quick=True), FleetRequest("tls://sched:8786", security), reporter)
    outcome = resume_run(Path("results/mbrc-..."), FleetRequest(...), reporter)

1. Connect to the scheduler as a Dask client; pick the hosts (--hosts, else
   every worker); refuse a host busy with another run.
2. Create a HostLab actor on each host's worker and `open` it: the experiment
   is validated against each host's own engine, which then stays started for
   the whole run. Every host must take the experiment alike (the same
   canonical knob values, apply classes, metric): the same plan everywhere.
3. Plan: each host its own randomised order (fleet/plan.py).
4. Measure: one thread per disk group sends that group's cells one at a time
   (hosts on one disk take turns, cell by cell, unless --share-disk); groups
   run in parallel, so a slow host holds up only the hosts on its own disk.
   Every row that comes back is appended here, fsync'd, with its host, and the
   summary rewritten (the host's analysis at once, the pooled one throttled).
5. A host whose worker is lost (its connection drops, or it leaves the
   scheduler) keeps its remaining cells missing: they are never measured on
   another host. `resume_run` measures them when the worker is back.

The hosts' agreement on one plan (and a resumed host's checks) is in
agreement.py; environment.json, summary.json and report.html as the run goes
are in run_files.py.
"""

from __future__ import annotations

import dataclasses
import json
import os
import queue
import random
import signal
import socket
import threading
import uuid
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, Protocol

from ..analysis.fleet import Sweep
from ..lazy import import_now
from ..plan import Cell
from ..report.writer import refresh_report
from ..results import ENVIRONMENT_FILE, EXPERIMENT_FILE, PLAN_FILE, SPEC_FILE, ResultRow, RunDir
from ..runner import Interrupted
from ..spec import Spec
from . import LAB_PREFIX, FleetError, FleetInputError
from .agreement import agreed, check_same_host, check_same_plan, sweep_from_run
from .plan import FleetPlan, host_cell_id, is_fleet_plan
from .run_files import RunReports, RunSummaries, fleet_environment

if TYPE_CHECKING:
    from distributed import Actor, Future, Security

    from ..lab import Overrides
    from .worker import HostLab, OpenedRun

POLL_S = 0.5  # how often a waiting thread looks whether its host is still there
WATCH_S = 1.0  # how often the scheduler's list of workers is read


class HostGone(Exception):
    """The host's worker is gone (killed, its machine down, off the network)."""


class FleetInterrupted(Interrupted):
    """Ctrl-C or SIGTERM on the coordinator: every row that came back is kept in `run_dir`."""

    def __init__(self, message: str, run_dir: Path):
        super().__init__(message)
        self.run_dir = run_dir


class _Stopped(Exception):
    """The run was interrupted: a thread waiting on a host gives up waiting."""


@dataclass
class FleetRequest:
    address: str  # checked by security.check_address
    security: Security | None  # None for --insecure
    hosts: list[str] | None = None  # --hosts; None: every worker (a resume: every host with work left)
    share_disk: bool = False  # --share-disk: measure hosts on one disk at the same time all the same
    timeout: float = 10.0  # seconds to reach the scheduler


class FleetReporter(Protocol):
    def phase(self, text: str) -> None: ...
    def plan_started(self, total: int, todo: int, estimate_s: float) -> None: ...
    def host_cell_done(self, host: str, cell: Cell, row: ResultRow, line: str) -> None: ...
    def finished(self, summary: dict[str, object]) -> None: ...


@dataclass
class FleetOutcome:
    run_dir: RunDir
    summary: dict[str, Any]  # summary.json (analysis/fleet.fleet_summary), read by the CLI's table
    sweep: Sweep
    hosts: list[str]
    lost: dict[str, str] = field(default_factory=dict)  # host -> why it stopped before its last cell
    missing: dict[str, int] = field(default_factory=dict)  # host -> cells still without a row


# ====================================================================== entry points
def start_run(target: str, overrides: Overrides, request: FleetRequest, reporter: FleetReporter, out: Path | None = None) -> FleetOutcome:
    """A new fleet run of an experiment FILE or RECIPE with the CLI's overrides (lab.Overrides)."""
    from .. import recipes
    from ..paths import results_root
    from ..results import new_run_dir, text_digest
    from ..spec import load_spec

    overrides.check()
    if overrides.budget not in (None, "off"):
        raise FleetInputError("--budget", "stopping by the rule grows each host's plan from its own noise, which a fleet "
                              "run does not do yet: give --repeats instead")
    path = recipes.resolve(target)
    spec, text = load_spec(path, overrides.as_dotted())
    if spec.measure.budget is not None:  # a recipe's default budget: a fleet runs its `repeats` blocks on every host
        spec = spec.model_copy(update={"measure": spec.measure.model_copy(update={"budget": None})})
        reporter.phase(f"a fleet runs the fixed plan of {spec.measure.repeats} block(s) on every host: the recipe's "
                       "budget and stopping rule apply to a run on one host")
    check_fleet_spec(spec)
    seed = spec.measure.seed if spec.measure.seed is not None else random.SystemRandom().randrange(2**31)
    run_dir = RunDir(out) if out else new_run_dir(results_root(), spec.name)
    if run_dir.exists():
        raise FleetInputError("--out", f"{run_dir.path} already holds a run; use --resume {run_dir.path} or another --out")
    options = dict(overrides.as_dotted())
    fleet = FleetConnection(request)
    try:
        hosts = fleet.choose(request.hosts)
        opened = fleet.open_labs(hosts, spec, text, str(path), options, run_dir.path.name, reporter)
        sweep, knobs, apply = agreed(spec, opened, seed)
        fplan = FleetPlan.make(knobs, spec.measure.repeats, seed, apply, hosts, disks={h: opened[h]["disk"] for h in hosts},
                               share_disk=request.share_disk, scheduler=request.address)
        run_dir.create()
        reporter.phase(f"results: {run_dir.path}")
        run_dir.write_text(EXPERIMENT_FILE, text)
        run_dir.write_json(SPEC_FILE, {"source": str(path), "spec": spec.model_dump(), "options": options,
                                       "experiment_sha256": text_digest(text), "fleet": {"scheduler": request.address, "hosts": hosts}})
        run_dir.write_json(PLAN_FILE, fplan.to_dict())
        run_dir.write_json(ENVIRONMENT_FILE, fleet_environment({h: opened[h]["environment"] for h in hosts}, request.address))
        todo = {h: list(fplan.hosts[h].cells) for h in hosts}
        return fleet.measure(run_dir, fplan, sweep, spec.name, todo, opened, reporter)
    finally:
        fleet.close()


def resume_run(run_path: Path, request: FleetRequest, reporter: FleetReporter, *, retry: bool = True) -> FleetOutcome:
    """Measure the cells a fleet run is missing (and, with `retry`, those with no ok row
    that the engine did not refuse), each on its own host."""
    from ..results import text_digest
    from ..runner import retryable_cells

    run_dir = RunDir(run_path)
    if not run_dir.exists():
        raise FleetInputError("--resume", f"{run_path}: not a blocklab results directory (no {PLAN_FILE})")
    saved_plan = run_dir.read_json(PLAN_FILE)
    if not is_fleet_plan(saved_plan):
        raise FleetInputError("--fleet", f"{run_path} was measured on one machine, not on a fleet: resume it without --fleet")
    saved = run_dir.read_json(SPEC_FILE)
    spec = Spec.model_validate(saved["spec"])
    text = run_dir.file(EXPERIMENT_FILE).read_text()
    if saved.get("experiment_sha256") and saved["experiment_sha256"] != text_digest(text):
        raise FleetInputError("--resume", f"{run_path}: experiment.toml was edited after the run started; a resumed run "
                              "measures the experiment it started with: put the file back as it was, or start a new run")
    fplan = FleetPlan.from_dict(saved_plan)
    if torn := run_dir.set_aside_torn_lines():
        reporter.phase(f"{torn} line(s) of {run_dir.file('results.jsonl')} cut off by a crash: set aside in results.jsonl.torn")
    rows = run_dir.rows()
    have = {r.cell_id for r in rows}
    again = retryable_cells(rows) if retry else set()
    todo = {h: [c for c in plan.cells if host_cell_id(h, c.cell_id) not in have or host_cell_id(h, c.cell_id) in again]
            for h, plan in fplan.hosts.items()}
    if request.hosts is not None:
        unknown = [h for h in request.hosts if h not in fplan.hosts]
        if unknown:
            raise FleetInputError("--hosts", f"{', '.join(unknown)}: not a host of this run; its hosts: {', '.join(fplan.hosts)}")
        todo = {h: todo[h] for h in request.hosts}
    todo = {h: cells for h, cells in todo.items() if cells}
    fleet = FleetConnection(request)
    try:
        connected = fleet.workers()
        absent = [h for h in todo if h not in connected]
        if absent:
            others = ",".join(h for h in todo if h not in absent)
            raise FleetInputError("--fleet", f"{', '.join(f'{h} ({len(todo[h])} cells to measure)' for h in absent)}: no worker of "
                                  f"that name is connected to {request.address}; start `blocklab worker --scheduler {request.address} "
                                  f"--name {absent[0]}` there" + (f", or resume the other hosts only with --hosts {others}" if others else ""))
        hosts = list(todo)
        opened = fleet.open_labs(hosts, spec, text, str(saved["source"]), dict(saved.get("options") or {}),
                                 run_dir.path.name, reporter) if hosts else {}
        sweep = None
        if opened:
            sweep, knobs, apply = agreed(spec, opened, fplan.seed)
            check_same_plan(fplan, knobs, apply, spec, hosts)
            check_same_host(run_dir, opened)
        else:
            sweep = sweep_from_run(run_dir, spec, fplan)
        if not any(todo.values()):
            reporter.phase("every cell of every host has a row: nothing to measure")
        return fleet.measure(run_dir, fplan, sweep, spec.name, todo, opened, reporter)
    finally:
        fleet.close()


def check_fleet_spec(spec: Spec) -> None:
    """What a fleet run cannot do (yet), refused before any host is touched."""
    if spec.engine.dsn:
        raise FleetInputError("--dsn", "a fleet measures each host's own disk with that host's own engine; one server "
                              "given by DSN would be measured from every host at once")
    if spec.measure.search == "refine":
        raise FleetInputError("measure.search", "'refine' grows the plan from one host's results; a fleet runs one plan on "
                              "every host: sweep the values as a grid (search = \"grid\"), or refine on one host")
    if spec.measure.target_ci is not None:
        raise FleetInputError("measure.target_ci", "adaptive repeats grow each host's plan from its own noise, which a fleet "
                              "run does not do yet: give measure.repeats instead")


# ====================================================================== the connection
class FleetConnection:
    """A Dask client, the hosts' labs, and a watch on which workers are still there."""

    def __init__(self, request: FleetRequest):
        import dask
        from distributed import Client

        self.request = request
        try:
            with dask.config.set({"distributed.comm.timeouts.connect": f"{request.timeout}s"}):
                # the default client: Dask's actor proxies find their client with get_client()
                self.client = Client(request.address, security=request.security, timeout=request.timeout)
        except (OSError, TimeoutError) as err:
            why = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            trust = " and that it uses the same certificate authority (--certs)" if request.security is not None else ""
            raise FleetInputError("--fleet", f"cannot reach the scheduler at {request.address}: {why}; check that "
                                  f"`blocklab fleet up` runs there{trust}") from None
        self.addresses: dict[str, str] = {}  # host -> its worker's address when its lab was made
        self.futures: dict[str, Future[HostLab]] = {}  # host -> the actor's future (released at the end)
        self.labs: dict[str, Actor] = {}  # host -> the HostLab actor (its methods' calls return futures)
        self.gone: dict[str, str] = {}  # host -> why its worker is gone
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._watcher: threading.Thread | None = None

    def workers(self) -> dict[str, str]:
        """Connected workers: name -> address."""
        info = self.client.scheduler_info(n_workers=-1)
        return {str(w.get("name")): address for address, w in info.get("workers", {}).items()}

    def choose(self, wanted: list[str] | None) -> list[str]:
        connected = self.workers()
        if not connected:
            raise FleetInputError("--fleet", f"no worker is connected to {self.request.address}; start "
                                  f"`blocklab worker --scheduler {self.request.address} --name NAME` on each host")
        if wanted is None:
            return sorted(connected)
        unknown = [h for h in wanted if h not in connected]
        if unknown:
            raise FleetInputError("--hosts", f"{', '.join(unknown)}: no worker of that name is connected to "
                                  f"{self.request.address}; connected: {', '.join(sorted(connected))}")
        return list(wanted)

    def open_labs(self, hosts: list[str], spec: Spec, text: str, source: str, options: dict[str, object], run: str,
                  reporter: FleetReporter) -> dict[str, OpenedRun]:
        """A HostLab on each host, opened: each host validates the experiment against its
        own engine and starts it. Any host's refusal stops the run before a cell runs."""
        self.make_labs(hosts, run)
        reporter.phase(f"opening the experiment on {len(hosts)} host(s): {', '.join(hosts)} (each validates it against its own engine)")
        calls = {h: self.labs[h].open(spec.model_dump(), text, source, options) for h in hosts}
        opened: dict[str, OpenedRun] = {}
        for h in hosts:
            try:
                opened[h] = self.wait(h, calls[h])
            except HostGone as err:
                raise FleetError(f"host {h} was lost while opening the experiment: {err}") from None
        return opened

    def make_labs(self, hosts: list[str], run: str) -> None:
        """A HostLab actor on each host's worker, not opened yet; a host busy with another
        run is refused first."""
        from .worker import HostLab, current_facts

        run = f"{run} from {socket.gethostname()} pid {os.getpid()}"  # who holds a host, as another coordinator is told
        connected = self.workers()
        facts = self.client.run(current_facts, workers=[connected[h] for h in hosts])
        for h in hosts:
            busy = [b for b in facts.get(connected[h], {}).get("busy") or [] if b != run]
            if busy:
                raise FleetError(f"host {h} is measuring another run ({busy[0]}); one run at a time per host: wait for it, "
                                 f"or leave {h} out with --hosts")
        for h in hosts:
            key = f"{LAB_PREFIX}{h}-{uuid.uuid4().hex[:12]}"
            self.addresses[h] = connected[h]
            self.futures[h] = self.client.submit(HostLab, key, h, run, key=key, workers=[connected[h]],
                                                 allow_other_workers=False, actor=True, pure=False)
        self._watcher = threading.Thread(target=self._watch, name="blocklab-fleet-watch", daemon=True)
        self._watcher.start()
        for h in hosts:
            self.labs[h] = self.wait(h, self.futures[h])

    def call(self, host: str, method: str, *args: object, stop: threading.Event | None = None) -> Any:
        """A method of `host`'s lab, waited for; HostGone when its worker is (Dask raises
        "Worker holding Actor was lost" at the call itself once the scheduler knows)."""
        try:
            future = getattr(self.labs[host], method)(*args)
        except (OSError, RuntimeError) as err:
            raise HostGone(_first_line(err)) from None
        return self.wait(host, future, stop)

    def wait(self, host: str, future: Any, stop: threading.Event | None = None) -> Any:
        """The result of a future on `host`'s worker; HostGone as soon as the worker is."""
        while True:
            try:
                return future.result(timeout=POLL_S)
            except TimeoutError:
                pass
            except (OSError, RuntimeError) as err:  # the connection to the worker dropped; "Worker holding Actor was lost"
                if isinstance(err, RuntimeError) and "lost" not in str(err).lower() and "closed" not in str(err).lower():
                    raise
                raise HostGone(_first_line(err)) from None
            with self._lock:
                why = self.gone.get(host)
            if why is not None:
                raise HostGone(why)
            if stop is not None and stop.is_set():
                raise _Stopped

    def _watch(self) -> None:
        while not self._closing.wait(WATCH_S):
            try:
                now = self.workers()
            except Exception:  # the scheduler itself did not answer: a call to a host tells what matters
                continue
            with self._lock:
                for host, address in self.addresses.items():
                    if host not in self.gone and now.get(host) != address:
                        self.gone[host] = "its worker left the scheduler" if host not in now else "its worker was restarted mid-run"

    def forget(self, host: str) -> None:
        """A lost host's actor is released: the scheduler must not wait to rebuild it."""
        future = self.futures.pop(host, None)
        self.labs.pop(host, None)
        if future is not None:
            try:
                self.client.cancel(future)
            except Exception:
                pass

    def close(self, wait: bool = True) -> None:
        """Close every lab (its engine stopped), release the actors, disconnect. Without
        `wait` (Ctrl-C) the labs are only released: each worker's janitor stops its
        engine once the cell in flight ends."""
        self._closing.set()
        if wait:
            calls = {}
            for host, lab in list(self.labs.items()):
                try:
                    calls[host] = lab.close()
                except Exception:
                    continue
            for host, call in calls.items():
                try:
                    self.wait(host, call, stop=None)
                except Exception:  # a host that cannot be told: its janitor closes the lab when released
                    pass
        for future in self.futures.values():
            try:
                self.client.cancel(future)
            except Exception:
                pass
        try:
            self.client.close(timeout=5)
        except Exception:
            pass

    # ------------------------------------------------------------------ measuring
    def measure(self, run_dir: RunDir, fplan: FleetPlan, sweep: Sweep, name: str, todo: dict[str, list[Cell]],
                opened: dict[str, OpenedRun], reporter: FleetReporter) -> FleetOutcome:
        import_now()  # SciPy before any cell: a SIGTERM never lands in its first import (lazy.py)
        summaries = RunSummaries(sweep, fplan, name, run_dir.rows())
        total = sum(len(c) for c in todo.values())
        estimates = {h: o["estimate"] for h, o in opened.items()}
        estimate = {h: sum(estimates.get(h, {}).get(c.setting.label, 0.0) for c in cells) for h, cells in todo.items()}
        groups = [[h for h in group if todo.get(h)] for group in fplan.disk_groups()]
        groups = [g for g in groups if g]
        if total:  # groups run at once, the hosts of a group one after the other
            reporter.plan_started(fplan.total, total, max((sum(estimate[h] for h in g) for g in groups), default=0.0))
        events: queue.Queue[tuple[str, str, Any]] = queue.Queue()
        stop = threading.Event()
        lost: dict[str, str] = {}
        for group in groups:
            if len(group) > 1:
                reporter.phase(f"{', '.join(group)} keep their data on one disk: they take turns, one cell at a time (--share-disk to measure them at once)")
        threads = [threading.Thread(target=self._drive, args=(group, todo, events, stop), name=f"blocklab-fleet-{group[0]}", daemon=True)
                   for group in groups]
        reports = RunReports(run_dir)
        previous = signal.signal(signal.SIGTERM, _sigterm) if threading.current_thread() is threading.main_thread() else None
        try:
            for thread in threads:
                thread.start()
            running = len(threads)
            stale = False  # rows appended since summary.json and the report were last written
            while running:
                try:
                    kind, host, payload = events.get(timeout=POLL_S)
                except queue.Empty:
                    continue
                if kind == "done":
                    running -= 1
                elif kind == "lost":
                    lost[host] = payload
                    self.forget(host)
                    reporter.phase(f"{host} lost: {payload}; its remaining cells stay missing (never measured on another host)")
                    stale = True
                elif kind == "rows":
                    cell, result = payload
                    for phase in result["phases"]:
                        reporter.phase(f"{host}: {phase}")
                    for text, line in zip(result["rows"], result["lines"]):
                        row = ResultRow.from_dict(json.loads(text))
                        row = dataclasses.replace(row, host=host, cell_id=host_cell_id(host, row.cell_id))
                        run_dir.append(row)  # fsync'd: from here on the row survives a crash of this machine
                        summaries.add(row)
                        reporter.host_cell_done(host, cell, row, f"{_what(sweep, cell)} ... {line}")
                    stale = True
                # Rows first: rows waiting in the queue are appended before summary.json is rewritten
                # for them all at once; the report renders on a thread of its own (seconds of matplotlib)
                if stale and events.empty() and summaries.write(run_dir, lost) is not None:
                    reports.poke()
                    stale = False
                for message in reports.messages():
                    reporter.phase(message)
        except KeyboardInterrupt:
            stop.set()
            reports.close()
            summaries.write(run_dir, lost, force=True)
            refresh_report(run_dir, force=True)
            self.close(wait=False)
            raise FleetInterrupted(f"interrupted; {len(run_dir.rows())} of {fplan.total} cells are saved", run_dir.path) from None
        finally:
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)
        reports.close()
        summary = summaries.write(run_dir, lost, force=True)
        assert summary is not None  # forced: always written
        refresh_report(run_dir, force=True)
        reporter.finished(summary)
        have = {r.cell_id for r in run_dir.rows()}
        missing = {h: sum(1 for cid in fplan.cell_ids(h) if cid not in have) for h in fplan.hosts}
        return FleetOutcome(run_dir, summary, sweep, list(fplan.hosts), lost, {h: n for h, n in missing.items() if n})

    def _drive(self, group: list[str], todo: dict[str, list[Cell]], events: queue.Queue, stop: threading.Event) -> None:
        """Measure one disk group's cells: its hosts take turns, a cell each, each host in
        its own order; a host that is lost or stops leaves the others going."""
        cells = {h: deque(todo[h]) for h in group}
        dead: set[str] = set()
        try:
            while not stop.is_set():
                with self._lock:
                    gone = dict(self.gone)
                for h in group:
                    if h in gone and h not in dead:
                        dead.add(h)
                        events.put(("lost", h, gone[h]))
                live = [h for h in group if cells[h] and h not in dead]
                if not live:
                    break
                for h in live:
                    if stop.is_set():
                        break
                    cell = cells[h].popleft()
                    payload = {"index": cell.index, "block": cell.block, "settings": cell.setting.as_dict()}
                    try:
                        result = self.call(h, "measure", payload, stop=stop)
                    except _Stopped:
                        return
                    except HostGone as err:
                        dead.add(h)
                        events.put(("lost", h, f"its worker is gone ({err})"))
                        continue
                    except Exception as err:  # the lab itself failed: this host stops, the others go on
                        dead.add(h)
                        events.put(("lost", h, f"{type(err).__name__}: {_first_line(err)}"))
                        continue
                    events.put(("rows", h, (cell, result)))
                    if result.get("stopped"):
                        dead.add(h)
                        events.put(("lost", h, result["stopped"]))
        finally:
            events.put(("done", group[0], None))


_Fleet = FleetConnection  # its name before fleet tunes used it (benchmarks/fleet.py)

def _what(sweep: Sweep, cell: Cell) -> str:
    """'multiblock_read = 16 (128 kB)' for one knob, the setting's label for several."""
    label = cell.setting.label
    if len(cell.setting.values) == 1:
        return f"{cell.setting.values[0][0]} = {sweep.describe_setting(label)}"
    return label


def _sigterm(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


__all__ = ["FleetOutcome", "FleetRequest", "FleetReporter", "HostGone", "Interrupted", "check_fleet_spec", "resume_run", "start_run"]
