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

A fleet tune is not resumed yet: an interrupted one keeps every row in
hosts/HOST/results.jsonl, and is started again.
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
from ..jsonvalue import as_object
from ..plan import Cell, Setting
from ..results import ENVIRONMENT_FILE, EXPERIMENT_FILE, SPEC_FILE, ResultRow, RunDir, text_digest
from ..spec import SpecError
from ..tune.agree import Agreement, cross_plan, judge
from ..tune.confirm import confirm_winner
from ..tune.driver import Accounts, Search, SearchResult
from ..tune.session import TUNE_SPEC_FILE, write_report, write_state
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
               out: Path | None = None) -> FleetTuneState:
    """Tune the experiment FILE on every host of the fleet; fleet-tune.json's content."""
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
        raise FleetInputError("--out", f"{run_dir.path} already holds files; choose another --out (a fleet tune is not resumed yet)")
    fleet = FleetConnection(request)
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, _sigterm) if threading.current_thread() is threading.main_thread() else None
    try:
        hosts = fleet.choose(request.hosts)
        fleet.make_labs(hosts, run_dir.path.name)
        say(f"opening the tune on {len(hosts)} host(s): {', '.join(hosts)} (each checks it against its own engine)")
        seeds = {h: host_seed(seed, h) for h in hosts}  # each host its own search and block orders, as a fleet run's plans
        calls = {h: fleet.labs[h].open_tune(text, source, budget, seeds[h]) for h in hosts}
        opened: dict[str, OpenedTune] = {}
        for h in hosts:
            try:
                opened[h] = fleet.wait(h, calls[h])
            except HostGone as err:
                raise FleetError(f"host {h} was lost while opening the tune: {err}") from None
        _check_alike(opened)
        run_dir.create()
        run_dir.write_text(EXPERIMENT_FILE, text)
        run_dir.write_json(SPEC_FILE, {"source": source, "spec": spec.model_dump(), "options": {"budget": budget},
                                       "experiment_sha256": text_digest(text), "fleet": {"scheduler": request.address, "hosts": hosts}})
        say(f"results: {run_dir.path}")
        locks: dict[str, threading.Lock] = {}  # disk -> the turn of its hosts
        tunes = {}
        for h in hosts:
            disk = h if request.share_disk else opened[h]["disk"]
            tunes[h] = _HostTune(fleet, h, opened[h], RunDir(run_dir.path / HOSTS_DIR / h), locks.setdefault(disk, threading.Lock()),
                                 stop, say, text, source, budget)
        _in_threads({h: t.tune for h, t in tunes.items()}, stop)
        winners = {h: t.found.winner for h, t in tunes.items() if t.found is not None}
        cross: dict[str, list[BlockCell]] = {}
        distinct = list(dict.fromkeys(winners.values()))
        if len(distinct) > 1:
            entrants = [t.setting_of(t.search_config(t.winner)) for t in _one_per_winner(tunes, distinct)]
            blocks = opened[hosts[0]]["spec"].confirm_blocks
            say(f"the hosts' winners differ: {blocks} fresh blocks of {', '.join(distinct)} on every host")
            _in_threads({h: t.cross_job(entrants, blocks, cross) for h, t in tunes.items()}, stop)
        agreement = judge(winners, cross, opened[hosts[0]]["goal"])
        state: FleetTuneState = {
            "experiment": spec.name, "dir": str(run_dir.path), "hosts": hosts, "seed": seed, "host_seeds": seeds, "budget_per_host": budget,
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
            say(f"the report could not be written: {type(err).__name__}: {err}")
        return state
    except KeyboardInterrupt:
        stop.set()
        fleet.close(wait=False)
        raise FleetInterrupted("interrupted; every row that came back is kept under hosts/ (a fleet tune is not resumed yet: "
                               "start it again)", run_dir.path) from None
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        fleet.close()


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
                 stop: threading.Event, say: Callable[[str], None], text: str, source: str, budget: str | None):
        self.fleet = fleet
        self.host = host
        self.opened = opened
        self.run_dir = run_dir
        self.lock = lock
        self.stop = stop
        self.say = lambda line: say(f"{host}: {line}")
        self.saved: dict[str, list[ResultRow]] = {}
        self.count = 0
        self.found: SearchResult | None = None
        self.search: Search | None = None
        self.state: dict[str, object] = {}
        run_dir.create()
        run_dir.write_text(EXPERIMENT_FILE, text)
        run_dir.write_json(TUNE_SPEC_FILE, {"source": source, "budget": budget, "seed": opened["seed"], "host": host,
                                            "experiment_sha256": text_digest(text), "tune": opened["spec"].to_dict()})
        run_dir.write_json(ENVIRONMENT_FILE, opened["environment"])

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

        confirmation = confirm_winner(search, found, blocks=o["spec"].confirm_blocks, missing=lambda _: True,
                                      new_instance=new_instance, say=self.say)
        self.state = write_state(self.run_dir, o["head"], search, found, confirmation, self.lines)
        write_report(self.run_dir, self.say)
        self.say(str(confirmation["verdict"]))
        self.found = found

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
        first = self.search.next_block + self.opened["spec"].confirm_blocks
        cells = []
        for cell in cross_plan(entrants, self.opened["restart_knobs"], self.opened["seed"], first, blocks):
            rows = self.measure(cell, {"phase": "cross"})
            ok = [r for r in rows if r.ok and r.metrics.get(self.opened["metric"], 0) > 0]
            if ok:
                cells.append(BlockCell(cell.block, cell.setting.label, float(ok[-1].metrics[self.opened["metric"]])))
        return cells


def _sigterm(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


__all__ = ["FLEET_TUNE_FILE", "HOSTS_DIR", "start_tune"]
