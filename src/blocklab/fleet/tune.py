"""A tune on a fleet: each host finds its own best, then every host's winner is
measured on every host.

    state = start_tune("space.toml", budget="60", seed=3, request=FleetRequest(...), say=print, out=Path("results/t"))

1. The experiment is read and its [tune] table checked here (no engine needed
   on this machine); a HostLab on each host then runs the tune's every check
   on its own engine (HostLab.open_tune), which stays started. The hosts must
   take the space alike (the same canonical values, the same default).
2. Each host's tune runs here, a thread per host: the search (tune/driver.py)
   and the confirmation (tune/confirm.py) exactly as on one machine (with a
   seed of the host's own, fleet/plan.host_seed, as a fleet run's plans), every
   cell sent to the host's lab (HostLab.measure: the runner's rules) and its
   rows appended to hosts/HOST/results.jsonl. hosts/HOST is a tune directory
   like any other (tune.json, report.html: `blocklab report` reads it). Hosts
   on one disk take turns, cell by cell (unless --share-disk).
3. When all are done and their winners differ, each host measures fresh
   blocks holding every host's winner (tune/agree.py): is another host's
   winner worse there than the host's own? These blocks are paid beyond each
   host's budget (the budget is one host's tune) and said so.
4. fleet-tune.json and report.html at the top: each host's verdict, the agreement.

An interrupted fleet tune keeps every row in hosts/HOST/results.jsonl;
resume_tune (`blocklab tune --resume DIR --fleet ADDRESS`) takes it up on the
hosts it started with (recorded in spec.json, with each host's seed): each
host's search replayed from its rows (the same seed, the same cells: none
measured twice), then measured on as an uninterrupted tune would be.

    state = resume_tune(Path("results/t"), FleetRequest(...), say=print)
"""

from __future__ import annotations

import dataclasses
import json
import random
import signal
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, Final, TypedDict

from ..analysis.paired import BlockCell
from ..jsonvalue import as_list, as_object
from ..lazy import import_now
from ..plan import Cell, Setting
from ..results import ENVIRONMENT_FILE, EXPERIMENT_FILE, RESULTS_FILE, SPEC_FILE, ResultRow, RunDir, text_digest
from ..spec import SpecError
from ..tune.agree import Agreement, cross_plan, judge
from ..tune.confirm import confirm_winner
from ..tune.driver import SEARCH_VERSION, Accounts, Search, SearchResult
from ..tune.session import TUNE_SPEC_FILE, check_search_version, to_stderr, write_report, write_state
from . import FleetError, FleetInputError
from .coordinator import POLL_S, FleetConnection, FleetInterrupted, FleetRequest, HostGone, check_fleet_spec
from .plan import host_seed

if TYPE_CHECKING:
    from .worker import CellRequest, MeasuredCell, OpenedTune

FLEET_TUNE_FILE = "fleet-tune.json"
HOSTS_DIR = "hosts"


class HostTuneState(TypedDict):
    """fleet-tune.json's entry for one host: where its tune directory is, what tune.json says."""

    dir: str
    winner: object
    winner_config: object
    recommended: object
    default: object
    verdict: object
    spent_cells: object
    config_lines: object


class FleetTuneState(TypedDict):
    """fleet-tune.json: each host's tune and the hosts' agreement."""

    experiment: str
    dir: str
    hosts: list[str]
    seed: int
    host_seeds: dict[str, int]
    budget_per_host: str | None
    tunes: dict[str, HostTuneState]
    cross_cells: dict[str, int]
    agreement: Agreement


class _Stopped(Exception):
    """Ctrl-C on the coordinator: a host's thread stops before its next cell."""


def start_tune(target: str, *, budget: str | None, seed: int | None, request: FleetRequest, say: Callable[[str], None],
               out: Path | None = None, warn: Callable[[str], None] = to_stderr) -> FleetTuneState:
    """Tune the experiment FILE on every host of the fleet; fleet-tune.json's content.
    Progress goes to `say`, a report that could not be written to `warn`."""
    from ..paths import results_root
    from ..results import new_run_dir
    from ..spec import spec_from_dict
    from ..tune.session import read_tune_file

    raw, _, text, source = read_tune_file(target, budget)
    spec = spec_from_dict(raw, source, {"measure.seed": seed} if seed is not None else {})
    check_fleet_spec(spec)
    if seed is None:
        seed = spec.measure.seed if spec.measure.seed is not None else random.SystemRandom().randrange(2**31)
    run_dir = RunDir(out) if out else new_run_dir(results_root(), spec.name)
    if run_dir.path.exists() and any(run_dir.path.iterdir()):
        raise FleetInputError("--out", f"{run_dir.path} already holds files; continue a fleet tune there with --resume "
                              f"{run_dir.path} --fleet ADDRESS, or choose another --out")

    def begin(hosts: list[str], seeds: dict[str, int]) -> None:  # once every host took the tune
        # what a resume needs to take the same tune up again: the hosts and their seeds
        fleet = {"scheduler": request.address, "hosts": hosts, "seed": seed, "host_seeds": seeds}
        run_dir.create()
        (run_dir.path / HOSTS_DIR).mkdir(exist_ok=True)  # before spec.json: a directory with it is one --resume takes
        run_dir.write_text(EXPERIMENT_FILE, text)
        run_dir.write_json(SPEC_FILE, {"source": source, "spec": spec.model_dump(), "options": {"budget": budget},
                                       "experiment_sha256": text_digest(text), "fleet": fleet})

    with _Connection(request) as fleet:
        hosts = fleet.choose(request.hosts)
        seeds = {h: host_seed(seed, h) for h in hosts}  # each host its own search and block orders, as a fleet run's plans
        return _tune_hosts(fleet, run_dir, seeds, begin, _Experiment(text, source, budget, spec.name, seed), _Say(say, warn), resume=False)


def resume_tune(run_path: Path, request: FleetRequest, say: Callable[[str], None], warn: Callable[[str], None] = to_stderr) -> FleetTuneState:
    """Continue an interrupted fleet tune: each host's tune replayed from its rows under
    hosts/HOST (the same seed: the same cells, none measured twice), then measured on."""
    run_dir = RunDir(run_path)
    saved = saved_fleet_tune(run_path)
    text = run_dir.file(EXPERIMENT_FILE).read_text()
    if saved.get("experiment_sha256") != text_digest(text):
        raise FleetInputError("--resume", f"{run_path}: experiment.toml was edited after the tune started; a resumed tune "
                              "measures the experiment it started with: put the file back as it was, or start a new tune")
    fleet_info = as_object(saved["fleet"])
    recorded = [str(h) for h in as_list(fleet_info.get("hosts"))]
    seeds = {h: _host_seed(run_dir, fleet_info, h) for h in recorded}
    if request.hosts is not None:
        _check_same_hosts("--hosts", recorded, request.hosts)
    if run_dir.file(FLEET_TUNE_FILE).exists():
        say(f"{run_path}: this fleet tune is finished (its {FLEET_TUNE_FILE} is written): nothing to measure")
        finished: FleetTuneState = run_dir.read_json(FLEET_TUNE_FILE)
        return finished
    options = as_object(saved.get("options"))
    budget = options.get("budget")
    # the tune's seed (each host's is recorded apart): spec.json's measure.seed for a tune started before it was recorded
    seed = int(str(fleet_info.get("seed", as_object(as_object(saved["spec"]).get("measure")).get("seed") or 0)))
    exp = _Experiment(text, str(saved["source"]), None if budget is None else str(budget), str(as_object(saved["spec"]).get("name")), seed)
    with _Connection(request) as fleet:
        absent = [h for h in recorded if h not in fleet.workers()]
        if absent:
            raise FleetInputError("--fleet", f"{', '.join(absent)}: no worker of that name is connected to {request.address}; "
                                  f"a fleet tune resumes on every host it started with ({', '.join(recorded)}): start "
                                  f"`blocklab worker --scheduler {request.address} --name {absent[0]}` there")
        say(f"resuming {run_path} on {', '.join(recorded)}: each host's tune replayed from its rows, then measured on")
        return _tune_hosts(fleet, run_dir, seeds, lambda *_: None, exp, _Say(say, warn), resume=True)


def saved_fleet_tune(where: Path) -> dict[str, Any]:
    """spec.json of a fleet tune (refused with what the directory is otherwise)."""
    from ..results import PLAN_FILE

    run_dir = RunDir(where)
    if run_dir.file(TUNE_SPEC_FILE).exists():
        raise FleetInputError("--fleet", f"{where} was tuned on one machine, not on a fleet: resume it without --fleet")
    if run_dir.file(PLAN_FILE).exists():
        raise FleetInputError("--resume", f"{where} is a run, not a tune: resume it with blocklab run --resume {where} --fleet ADDRESS")
    saved = run_dir.read_json(SPEC_FILE) if run_dir.file(SPEC_FILE).exists() else {}
    if not isinstance(saved, dict) or not saved.get("fleet") or not (where / HOSTS_DIR).is_dir():
        raise FleetInputError("--resume", f"{where}: not a fleet tune directory (no {SPEC_FILE} naming a fleet, or no {HOSTS_DIR}/)")
    return saved


def _host_seed(run_dir: RunDir, fleet_info: Mapping[str, object], host: str) -> int:
    """The host's seed as recorded at the start (a tune started before they were recorded: its tune-spec.json)."""
    seeds = as_object(fleet_info.get("host_seeds"))
    if host in seeds:
        return int(str(seeds[host]))
    spec_file = run_dir.path / HOSTS_DIR / host / TUNE_SPEC_FILE
    if not spec_file.exists():
        raise FleetInputError("--resume", f"{run_dir.path}: no seed is recorded for host {host} (no {spec_file}); start a new tune")
    return int(json.loads(spec_file.read_text())["seed"])


def _check_same_hosts(option: str, recorded: list[str], given: list[str]) -> None:
    """A resumed fleet tune goes on with the hosts it started with: none missing, none added."""
    missing = [h for h in recorded if h not in given]
    extra = [h for h in given if h not in recorded]
    if missing or extra:
        said = "; ".join(([f"{', '.join(missing)} missing"] if missing else []) + ([f"{', '.join(extra)} not of this tune"] if extra else []))
        raise FleetInputError(option, f"{said}: a fleet tune resumes on the hosts it started with ({', '.join(recorded)}); "
                              f"give --hosts {','.join(recorded)} or leave --hosts out")


@dataclasses.dataclass
class _Experiment:
    """What every host's tune is opened with."""

    text: str
    source: str
    budget: str | None
    name: str
    seed: int


@dataclasses.dataclass
class _Say:
    """Where a tune's lines go: progress to `say`, warnings to `warn` (the CLI: stdout, stderr)."""

    say: Callable[[str], None]
    warn: Callable[[str], None]

    def __call__(self, line: str) -> None:
        self.say(line)

    def host(self, host: str) -> _Say:
        return _Say(lambda line: self.say(f"{host}: {line}"), lambda line: self.warn(f"{host}: {line}"))


class _Connection:
    """FleetConnection for a tune: SIGTERM taken as Ctrl-C while it is open, closed at the end."""

    def __init__(self, request: FleetRequest):
        self.request = request

    def __enter__(self) -> FleetConnection:
        self.fleet = FleetConnection(request=self.request)
        main = threading.current_thread() is threading.main_thread()
        self.previous = signal.signal(signal.SIGTERM, _sigterm) if main else None
        return self.fleet

    def __exit__(self, *exc: object) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGTERM, self.previous)
        try:
            self.fleet.close()
        except KeyboardInterrupt:  # Ctrl-C while the labs close (their engines stop): what was written stays; do not wait
            self.fleet.close(wait=False)


def _tune_hosts(fleet: FleetConnection, run_dir: RunDir, seeds: dict[str, int], begin: Callable[[list[str], dict[str, int]], None],
                exp: _Experiment, say: _Say, *, resume: bool) -> FleetTuneState:
    """Open the tune on every host (each with its seed), `begin` (the directory is written
    once every host took the tune), run each host's tune (measured, or replayed from its
    rows on a resume), the cross blocks, fleet-tune.json and the report."""
    import_now()  # SciPy before any cell: an interrupt never lands in its first import (lazy.py)
    stop = threading.Event()
    hosts = list(seeds)
    try:
        fleet.make_labs(hosts, run_dir.path.name)
        say(f"opening the tune on {len(hosts)} host(s): {', '.join(hosts)} (each checks it against its own engine)")
        opened = _open(fleet, hosts, exp, seeds)
        if resume:
            _check_as_recorded(run_dir, opened)
        begin(hosts, seeds)
        say(f"results: {run_dir.path}")
        locks: dict[str, threading.Lock] = {}  # disk -> the turn of its hosts
        tunes = {}
        for h in hosts:
            disk = h if fleet.request.share_disk else opened[h]["disk"]
            tunes[h] = _HostTune(fleet, h, opened[h], RunDir(run_dir.path / HOSTS_DIR / h), locks.setdefault(disk, threading.Lock()),
                                 stop, say, exp, resume=resume)
        _in_threads({h: t.tune for h, t in tunes.items()}, stop)
        winners = {h: t.found.winner for h, t in tunes.items() if t.found is not None}
        cross: dict[str, list[BlockCell]] = {}
        distinct = list(dict.fromkeys(winners.values()))
        if len(distinct) > 1:
            entrants = [t.setting_of(t.search_config(t.winner)) for t in _one_per_winner(tunes, distinct)]
            blocks = max(t.found.confirm_blocks for t in tunes.values() if t.found is not None)  # the largest confirmation's
            say(f"the hosts' winners differ: {blocks} fresh blocks of {', '.join(distinct)} on every host")
            _in_threads({h: t.cross_job(entrants, blocks, cross) for h, t in tunes.items()}, stop)
        agreement = judge(winners, cross, opened[hosts[0]]["goal"])
        state: FleetTuneState = {
            "experiment": exp.name, "dir": str(run_dir.path), "hosts": hosts, "seed": exp.seed, "host_seeds": seeds,
            "budget_per_host": exp.budget,
            "tunes": {h: {"dir": f"{HOSTS_DIR}/{h}", "winner": t.state.get("winner"), "winner_config": t.state.get("winner_config"),
                          "recommended": t.state.get("recommended"), "default": t.state.get("default"),
                          "verdict": as_object(t.state.get("confirmation")).get("verdict"), "spent_cells": t.state.get("spent_cells"),
                          "config_lines": t.state.get("config_lines")} for h, t in tunes.items()},
            "cross_cells": {h: len(c) for h, c in cross.items()},
            "agreement": agreement,
        }
        run_dir.write_json(FLEET_TUNE_FILE, state)
        try:
            from ..report.tune import write_fleet_tune_report

            write_fleet_tune_report(run_dir)
        except Exception as err:  # the report never loses a tune
            say.warn(f"the report could not be written: {type(err).__name__}: {err}")
        return state
    except FleetError as err:  # a host lost or stopped: the others' rows and its own are kept
        if run_dir.file(SPEC_FILE).exists():
            err.run_dir = run_dir.path  # the CLI says how to continue
        raise
    except KeyboardInterrupt:
        stop.set()
        fleet.close(wait=False)
        raise FleetInterrupted("interrupted; every row that came back is kept under hosts/", run_dir.path) from None


def _open(fleet: FleetConnection, hosts: list[str], exp: _Experiment, seeds: dict[str, int]) -> dict[str, OpenedTune]:
    calls = {h: fleet.labs[h].open_tune(exp.text, exp.source, exp.budget, seeds[h]) for h in hosts}
    opened: dict[str, OpenedTune] = {}
    for h in hosts:
        try:
            opened[h] = fleet.wait(h, calls[h])
        except HostGone as err:
            raise FleetError(f"host {h} was lost while opening the tune: {err}") from None
    _check_alike(opened)
    return opened


def _check_as_recorded(run_dir: RunDir, opened: dict[str, OpenedTune]) -> None:
    """A resumed host must take the tune as it did (its space, its seed): else its rows are another tune's."""
    for host, facts in opened.items():
        spec_file = RunDir(run_dir.path / HOSTS_DIR / host).file(TUNE_SPEC_FILE)
        if not spec_file.exists():
            continue  # interrupted before this host's tune directory was written: it starts afresh
        saved = json.loads(spec_file.read_text())
        try:
            check_search_version(saved, f"{HOSTS_DIR}/{host}")
        except SpecError as err:
            raise FleetInputError("--resume", str(err)) from None
        if saved.get("tune") != json.loads(json.dumps(facts["spec"].to_dict())) or saved.get("seed") != facts["seed"]:
            raise FleetInputError("--resume", f"host {host} takes the tune otherwise than when it started (its space or seed "
                                  f"differ from {HOSTS_DIR}/{host}/{TUNE_SPEC_FILE}: another engine version?); start a new tune")


def _one_per_winner(tunes: dict[str, _HostTune], distinct: list[str]) -> list[_HostTune]:
    out = []
    for label in distinct:
        out.append(next(t for t in tunes.values() if t.found is not None and t.found.winner == label))
    return out


_ALIKE: Final = ("dimensions", "default", "goal", "metric", "restart_knobs")  # not the seed: each host has its own


def _check_alike(opened: dict[str, OpenedTune]) -> None:
    first_host, first = next(iter(opened.items()))
    for host, facts in opened.items():
        for key in _ALIKE:
            if facts[key] != first[key]:
                raise FleetInputError("--hosts", f"the hosts do not take the tune alike: {key} is {first[key]!r} on {first_host} "
                                      f"but {facts[key]!r} on {host} (another engine version?); tune them separately, or leave "
                                      "one out with --hosts")


def _in_threads(jobs: dict[str, Callable[[], object]], stop: threading.Event) -> None:
    """Run each host's job on a thread of its own; the first failure (after all ended) is raised."""
    errors: dict[str, BaseException] = {}

    def run(host: str, job: Callable[[], object]) -> None:
        try:
            job()
        except _Stopped:
            pass
        except BaseException as err:  # told below, with the host's name
            errors[host] = err
            stop.set()  # the others stop too: one host lost spoils the comparison

    threads = [threading.Thread(target=run, args=(h, j), name=f"blocklab-tune-{h}", daemon=True) for h, j in jobs.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        while thread.is_alive():
            thread.join(timeout=POLL_S)
    for host, err in errors.items():
        if isinstance(err, (SpecError, FleetError)):
            raise err
        if isinstance(err, HostGone):
            raise FleetError(f"host {host} was lost during the tune: {err}; its rows are kept under {HOSTS_DIR}/{host}")
        raise FleetError(f"host {host}: {type(err).__name__}: {err}")


class _HostTune:
    """One host's tune, driven from here: every cell measured by the host's lab."""

    def __init__(self, fleet: FleetConnection, host: str, opened: OpenedTune, run_dir: RunDir, lock: threading.Lock,
                 stop: threading.Event, say: _Say, exp: _Experiment, *, resume: bool):
        self.fleet = fleet
        self.host = host
        self.opened = opened
        self.run_dir = run_dir
        self.lock = lock
        self.stop = stop
        self.lines_to = say.host(host)
        self.say = self.lines_to.say
        self.saved: dict[str, list[ResultRow]] = {}
        self.count = 0
        self.found: SearchResult | None = None
        self.search: Search | None = None
        self.state: dict[str, object] = {}
        if resume and run_dir.file(TUNE_SPEC_FILE).exists():
            self._read_back()
            return
        run_dir.create()
        run_dir.write_text(EXPERIMENT_FILE, exp.text)
        run_dir.write_json(TUNE_SPEC_FILE, {"source": exp.source, "budget": exp.budget, "seed": opened["seed"], "host": host,
                                            "search_version": SEARCH_VERSION,
                                            "experiment_sha256": text_digest(exp.text), "tune": opened["spec"].to_dict()})
        run_dir.write_json(ENVIRONMENT_FILE, opened["environment"])

    def _read_back(self) -> None:
        """A resumed host's rows, each cell's read back when the replayed search asks for it."""
        if torn := self.run_dir.set_aside_torn_lines():
            self.say(f"{torn} line(s) of {self.run_dir.file(RESULTS_FILE)} cut off by a crash: set aside in {RESULTS_FILE}.torn")
        rows = self.run_dir.rows()
        for row in rows:
            self.saved.setdefault(row.cell_id, []).append(row)
        self.count = len(rows)
        self.say(f"{len(self.saved)} cell(s) measured before the resume: read back, not measured again")

    def call(self, method: str, *args: object) -> Any:  # what the lab's method returns
        if self.stop.is_set():
            raise _Stopped
        try:
            return self.fleet.call(self.host, method, *args, stop=self.stop)
        except Exception:
            if self.stop.is_set():  # stopping (Ctrl-C, or another host failed): what the wait raised is moot
                raise _Stopped from None
            raise

    def measure(self, cell: Cell, tag: dict[str, object]) -> list[ResultRow]:
        if cell.cell_id in self.saved:
            return self.saved[cell.cell_id]
        payload: CellRequest = {"index": self.count, "block": cell.block, "settings": cell.setting.as_dict()}
        with self.lock:  # hosts on one disk take turns
            result: MeasuredCell = self.call("measure", payload)
        rows = []
        for text, line in zip(result["rows"], result["lines"]):
            row = ResultRow.from_dict(json.loads(text))
            span = row.notes.get("measured") or [0.0, 0.0]
            row = dataclasses.replace(row, host=self.host, notes={**row.notes, "tune": tag, "tune_s": round(span[1] - span[0], 3)})
            self.run_dir.append(row)
            rows.append(row)
            self.say(f"  [block {cell.block}] {cell.setting.label} ... {line}")
        self.count += 1
        self.saved[cell.cell_id] = rows
        if result.get("stopped"):
            raise FleetError(f"host {self.host} stopped: {result['stopped']}; its rows are kept under {HOSTS_DIR}/{self.host}")
        return rows

    def lines(self, config: Mapping[str, object]) -> list[str]:
        return list(self.call("config_lines", config))

    def tune(self) -> None:
        o = self.opened
        search = Search(spec=o["spec"], dimensions=o["dimensions"], default=o["default"], goal=o["goal"], metric=o["metric"],
                        seed=o["seed"], restart_knobs=o["restart_knobs"], measure=self.measure,
                        accounts=Accounts(o["declared_restart_s"], o["estimate_s"]), say=self.say)
        self.search = search
        def save_round() -> None:  # tune.json after every round: the host's report of an interrupted tune shows it
            write_state(self.run_dir, o["head"], search, None, None, self.lines)

        search.on_round = save_round
        found = search.run()
        write_state(self.run_dir, o["head"], search, found, None, self.lines)

        def new_instance() -> str:
            with self.lock:
                return str(self.call("restart"))

        confirmation = confirm_winner(search, found, blocks=found.confirm_blocks, missing=self.missing,
                                      new_instance=new_instance, say=self.say)
        self.state = write_state(self.run_dir, o["head"], search, found, confirmation, self.lines)
        write_report(self.run_dir, self.lines_to.warn)
        self.say(str(confirmation["verdict"]))
        self.found = found

    def missing(self, cells: list[Cell]) -> bool:
        return any(c.cell_id not in self.saved for c in cells)

    @property
    def winner(self) -> str:
        assert self.found is not None
        return self.found.winner

    def search_config(self, label: str) -> dict[str, object]:
        assert self.search is not None
        return self.search.trials[label].config

    def setting_of(self, config: Mapping[str, object]) -> Setting:
        return Setting(tuple((d.name, config[d.name]) for d in self.opened["dimensions"]))

    def cross_job(self, entrants: list[Setting], blocks: int, into: dict[str, list[BlockCell]]) -> Callable[[], None]:
        def job() -> None:
            into[self.host] = self.cross(entrants, blocks)

        return job

    def cross(self, entrants: list[Setting], blocks: int) -> list[BlockCell]:
        """Fresh blocks of every host's winner on this host, numbered after its confirmation's."""
        assert self.search is not None
        assert self.found is not None
        first = self.search.next_block + self.found.confirm_blocks
        cells = []
        for cell in cross_plan(entrants, self.opened["restart_knobs"], self.opened["seed"], first, blocks):
            rows = self.measure(cell, {"phase": "cross"})
            ok = [r for r in rows if r.ok and r.metrics.get(self.opened["metric"], 0) > 0]
            if ok:
                cells.append(BlockCell(cell.block, cell.setting.label, float(ok[-1].metrics[self.opened["metric"]])))
        return cells


def _sigterm(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


__all__ = ["FLEET_TUNE_FILE", "HOSTS_DIR", "resume_tune", "saved_fleet_tune", "start_tune"]
