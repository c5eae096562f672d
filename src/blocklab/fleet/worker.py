"""`blocklab worker`: a Dask worker with blocklab inside, one per host.

The host's engine lives in a HostLab, a Dask actor the coordinator creates on
this worker for the whole run: `open` validates the experiment against this
host's engine (experiment.prepare: knobs, values, disk space, cold-cache ability)
and starts it once; `measure` runs one cell with the runner's own rules
(runner.measure_cell: claims checked, an invalid cell measured again, an engine
that died restarted and the cell measured again) and returns the rows instead
of writing them; `close` stops the engine. Actor calls run one at a time on
the worker's actor thread, so the engine is only ever driven from one thread.

A coordinator that vanishes (Ctrl-C, a crash, a lost network) releases its
actors; the LabJanitor plugin then stops the engine once the cell in flight is
done, so a host is never left holding a server for a run nobody records.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import signal
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from ..units import label_of
from . import LAB_PREFIX, FleetError, FleetInputError

if TYPE_CHECKING:
    from distributed import Security, Worker

    from ..experiment import Experiment
    from ..results import ResultRow
    from ..spec import Scalar
    from ..tune.space import Dimension, TuneSpec

class OpenedRun(TypedDict):
    """What `HostLab.open` tells the coordinator: the experiment as this host's engine took it."""

    host: str
    knobs: dict[str, list[Scalar]]  # canonical values
    apply: dict[str, str]  # knob -> its apply class's label
    fixed: dict[str, str]
    metric: str
    goal: str
    describe: dict[str, str]  # label -> "16 (128 kB)"
    baseline: str | None
    knob_label: str
    estimate: dict[str, float]  # label -> seconds a cell takes
    environment: dict[str, object]
    disk: str  # facts.disk_key


class OpenedTune(TypedDict):
    """What `HostLab.open_tune` tells a fleet tune's coordinator."""

    host: str
    spec: TuneSpec
    dimensions: list[Dimension]
    default: dict[str, object]
    restart_knobs: list[str]
    declared_restart_s: float
    estimate_s: float
    goal: str
    metric: str
    seed: int
    head: dict[str, object]  # tune.session.state_head
    environment: dict[str, object]
    disk: str


class CellRequest(TypedDict):
    """One cell for `HostLab.measure`."""

    index: int
    block: int
    settings: dict[str, object]


class MeasuredCell(TypedDict):
    """What `HostLab.measure` returns: its rows as result-row JSON, their console lines."""

    rows: list[str]
    lines: list[str]
    phases: list[str]
    stopped: str | None  # why this host stopped (its engine died twice), else None


_LABS: dict[str, HostLab] = {}  # actor key -> the lab, in this worker process
_LABS_LOCK = threading.Lock()
_FACTS: dict[str, object] = {}  # this host's facts, collected when the worker starts


def current_facts() -> dict[str, object]:
    """This host's facts and the runs it is measuring now. Sent by `client.run` (it runs
    on the worker's event loop, so it only reads what is already collected)."""
    with _LABS_LOCK:
        busy = [lab.run for lab in _LABS.values() if lab.exp is not None]
    return {**_FACTS, "busy": busy}


class HostLab:
    """One host's part of one fleet run (a Dask actor: created by the coordinator with
    `actor=True` on this host's worker; its methods run on the worker's actor thread)."""

    def __init__(self, key: str, host: str, run: str):
        self.key = key
        self.host = host
        self.run = run  # which run: its directory's name and its coordinator, to tell a second coordinator who holds the host
        self.exp: Experiment | None = None
        with _LABS_LOCK:
            _LABS[key] = self

    def open(self, spec_data: dict[str, object], spec_text: str, source: str, options: Mapping[str, object]) -> OpenedRun:
        """Validate the experiment on this host's engine, start it, apply the fixed
        settings; what the coordinator needs to plan and to check that every host
        took the experiment alike. SpecError: this host refuses the experiment."""
        from ..environment import collect as collect_environment
        from ..experiment import prepare
        from ..paths import cache_root
        from ..plan import grid
        from ..spec import Spec, SpecError
        from .facts import disk_key

        self._refuse_if_busy()  # another run's lab with a started engine (not this run's lab of another host in this process)
        spec = Spec.model_validate(spec_data)
        try:
            exp = prepare(spec, spec_text, source)
        except SpecError as err:
            raise SpecError(f"host {self.host}: {err}") from None
        exp.options = dict(options)
        self.exp = exp
        try:
            exp.engine.apply(exp.fixed)  # so environment.json records the parameters the run measures under
            data_dir = exp.engine.data_dir()
            # the worker's name is the host's name in results; the machine's own name is kept beside it
            env = collect_environment(exp.engine.info(), data_dir, {"dataset_rows": spec.dataset.rows})
            env["hostname"], env["host"] = env.get("host"), self.host
            disk = disk_key(Path(data_dir) if data_dir else cache_root())
        except BaseException:
            self.close()
            raise
        settings = [s.as_dict() for s in grid(exp.knobs)] if exp.knobs else [{}]
        labels = [label_of(s) for s in settings]
        return {
            "host": self.host,
            "knobs": exp.knobs,
            "apply": {k: exp.knob_infos[k].apply.label for k in exp.knobs},
            "fixed": {k: str(v) for k, v in exp.fixed.items()},
            "metric": exp.metric,
            "goal": exp.goal,
            "describe": {label: exp.describe_setting(label) for label in labels},
            "baseline": exp.baseline_label(),
            "knob_label": exp.knob_label(),
            "estimate": {label: exp.workload_for(s).estimate_seconds() for label, s in zip(labels, settings)},
            "environment": env,
            "disk": disk,
        }

    def open_tune(self, text: str, source: str, budget: str | None, seed: int) -> OpenedTune:
        """A fleet tune's part on this host (fleet/tune.py): the tune's every check on this
        host's engine (tune.session.load_tune), which stays started for `measure`; the
        space as this engine takes it, the default, what a restart costs, the head of tune.json."""
        from ..engines.base import ApplyClass
        from ..environment import collect as collect_environment
        from ..paths import cache_root
        from ..spec import SpecError
        from ..tune.driver import restart_knobs_of
        from ..tune.session import load_tune, state_head
        from .facts import disk_key

        self._refuse_if_busy()
        try:
            setup = load_tune(source, budget=budget, seed=seed, text=text, source=source)
        except SpecError as err:
            raise SpecError(f"host {self.host}: {err}") from None
        exp = setup.exp
        self.exp = exp
        try:
            exp.engine.apply(exp.fixed)
            data_dir = exp.engine.data_dir()
            env = collect_environment(exp.engine.info(), data_dir, {"dataset_rows": exp.spec.dataset.rows})
            env["hostname"], env["host"] = env.get("host"), self.host
            disk = disk_key(Path(data_dir) if data_dir else cache_root())
            restart = restart_knobs_of(exp.knob_infos, [d.name for d in setup.dimensions])
            declared = exp.engine.change_cost(ApplyClass.RESTART, restart) if restart else 0.0
        except BaseException:
            self.close()
            raise
        return {"host": self.host, "spec": setup.spec, "dimensions": setup.dimensions, "default": setup.default,
                "restart_knobs": restart, "declared_restart_s": declared, "estimate_s": exp.workload.estimate_seconds() + 0.5,
                "goal": exp.goal, "metric": exp.metric, "seed": exp.seed, "head": state_head(setup), "environment": env, "disk": disk}

    def restart(self) -> str:
        """A new engine instance for a tune's confirmation: stopped and started, caches empty."""
        exp = self._exp()
        exp.engine.stop()
        exp.engine.start()
        exp.engine.apply(exp.fixed)
        return f"a restarted engine instance on {self.host}"

    def config_lines(self, settings: Mapping[str, object]) -> list[str]:
        """A configuration as this host's engine takes it (ALTER SYSTEM, my.cnf, flags)."""
        from ..tune.session import config_lines_of

        return config_lines_of(self._exp(), settings)

    def _refuse_if_busy(self) -> None:
        with _LABS_LOCK:
            others = [lab.run for key, lab in _LABS.items() if key != self.key and lab.exp is not None and lab.run != self.run]
        if others:
            raise FleetError(f"host {self.host} is measuring another run ({others[0]}); one run at a time per host: "
                             "wait for it, or leave this host out with --hosts")

    def measure(self, cell: CellRequest) -> MeasuredCell:
        """One cell, as runner.measure_cell measures it; every row it made (a re-measure
        after an invalid claim or an engine's death adds rows), as result-row JSON,
        each with when it ran on this host's clock (`notes.measured`: [from, to])."""
        from ..plan import Cell, Setting
        from ..runner import EngineDied, SilentReporter, cell_line, measure_cell

        exp = self._exp()
        this = Cell(int(cell["index"]), int(cell["block"]), Setting(tuple(dict(cell["settings"]).items())))
        rows: list[str] = []
        lines: list[str] = []
        reporter = SilentReporter()
        since = time.time()

        def record(row: ResultRow) -> None:
            nonlocal since
            now = time.time()
            row = dataclasses.replace(row, notes={**row.notes, "measured": [round(since, 3), round(now, 3)]})
            rows.append(row.to_json())
            lines.append(cell_line(exp, this, row))
            since = now

        stopped = None
        try:
            measure_cell(exp, this, reporter, record)
        except EngineDied as err:  # died twice, or could not be restarted: this host stops here
            stopped = str(err)
        return {"rows": rows, "lines": lines, "phases": list(reporter.lines), "stopped": stopped}

    def close(self) -> None:
        """Stop the engine (idempotent); the host is free for another run."""
        with _LABS_LOCK:
            _LABS.pop(self.key, None)
        exp, self.exp = self.exp, None
        if exp is not None:
            exp.engine.stop()

    def _exp(self) -> Experiment:
        if self.exp is None:
            raise FleetError(f"host {self.host}: the lab is not open (its run was closed)")
        return self.exp


def _janitor_class() -> type:
    from distributed.diagnostics.plugin import WorkerPlugin

    class LabJanitor(WorkerPlugin):
        """Closes a lab whose actor its coordinator released (it closed, or vanished)."""

        name = "blocklab-lab-janitor"

        def setup(self, worker: Worker) -> None:
            self.worker = worker

        def transition(self, key: object, start: str, finish: str, *args: object, **kwargs: object) -> None:
            if isinstance(key, str) and key.startswith(LAB_PREFIX) and finish in ("released", "forgotten"):
                with _LABS_LOCK:
                    lab = _LABS.get(key)
                if lab is not None:
                    # on the lab's own thread, after the cell in flight: never two threads on one engine
                    self.worker.executors["actor"].submit(lab.close)

        def teardown(self, worker: object) -> None:
            with _LABS_LOCK:
                labs = list(_LABS.values())
            for lab in labs:
                with contextlib.suppress(Exception):
                    lab.close()

    return LabJanitor


def run_worker(
    scheduler: str,
    name: str,
    security: Security | None,
    *,
    cache_dir: Path,
    listen_host: str | None,
    timeout: float,
    on_ready: Callable[[str, dict[str, object]], None],
) -> bool:
    """Serve as the worker `name` until SIGTERM, SIGINT or the scheduler's end; True
    when it was told to stop, False when the scheduler went away (Dask's worker closes
    then: a service manager should start it again). FleetInputError when the scheduler
    cannot be reached or the name is taken."""
    import dask
    from distributed import Worker

    _FACTS.clear()
    from .facts import collect_facts

    _FACTS.update(collect_facts(name, cache_dir))

    async def main() -> bool:
        from .security import HTTP_CONFIG

        # Dask's statistical profiler samples the stack of the thread running an actor every
        # 10 ms: it competes for the GIL with the cell being measured (tens of ms per cell
        # here). A measuring worker runs no profiler, and samples its own system load rarely.
        quiet = {"distributed.worker.profile.enabled": False, "distributed.admin.system-monitor.interval": "5s",
                 "distributed.admin.system-monitor.gil.enabled": False}
        with dask.config.set({"distributed.comm.timeouts.connect": f"{timeout}s", **HTTP_CONFIG, **quiet}):
            worker = Worker(
                scheduler, name=name, nthreads=1, security=security, host=listen_host, death_timeout=timeout,
                plugins=(_janitor_class()(),), memory_limit=0, validate=False,
            )
            # a refused start is told in one line below; Dask would log it with a traceback first
            start_log = logging.getLogger("distributed.worker")
            level = start_log.level
            start_log.setLevel(logging.CRITICAL)
            try:
                await worker
            except (OSError, TimeoutError, RuntimeError, ValueError) as err:
                cause = err.__cause__ if isinstance(err, RuntimeError) and err.__cause__ is not None else err
                if "name taken" in str(cause):  # the scheduler's refusal: "name taken, host-a"
                    raise FleetInputError("--name", f"a worker named {name!r} is already connected to {scheduler}; "
                                          "every host needs a name of its own") from None
                if isinstance(cause, (OSError, TimeoutError)):
                    raise FleetInputError("--scheduler", f"cannot reach the scheduler at {scheduler}: {_reason(cause)}") from None
                raise
            finally:
                start_log.setLevel(level)
        on_ready(worker.address, dict(_FACTS))
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        finished = asyncio.ensure_future(worker.finished())
        stopping = asyncio.ensure_future(stop.wait())
        await asyncio.wait([finished, stopping], return_when=asyncio.FIRST_COMPLETED)
        told = stop.is_set()
        stopping.cancel()
        if not finished.done():
            await worker.close(reason="blocklab worker stopped")
        finished.cancel()
        return told

    return asyncio.run(main())


def _reason(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__
