"""The fleet commands (the library is fleet/; this is the thin command layer):

    blocklab fleet certs DIR                      a CA and a certificate per role
    blocklab fleet up                             a scheduler
    blocklab worker --scheduler ADDRESS           a worker, one per host
    blocklab fleet status --fleet ADDRESS         the workers and their host facts
    blocklab run RECIPE --fleet ADDRESS           (run's options: fleet_run_options, run_on_fleet)
    blocklab fleet compare RUN_DIR HOST_A HOST_B  two hosts of one run, setting by setting

Bad input exits 2 with a message naming the option; Dask is imported only when
one of these runs.
"""

from __future__ import annotations

import json
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click
from rich.console import Console

from .cli_errors import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_INTERRUPTED, fail
from .console import ConsoleReporter, make_console
from .engines.base import EngineError
from .fleet import FleetError, FleetInputError
from .paths import check_out_dir
from .probes.os_stats import describe_medium
from .report.console_tables import print_comparison
from .results import ResultsError, ResultsWriteError, RunDir
from .spec import SpecError
from .units import human

if TYPE_CHECKING:
    from distributed import Security

    from .fleet.coordinator import FleetOutcome
    from .lab import Overrides
    from .plan import Cell
    from .results import ResultRow

F = TypeVar("F", bound=Callable[..., object])  # a click command, before and after its options

CONTEXT = {"help_option_names": ["-h", "--help"]}


def _print(console: Console, text: str, style: str | None = None) -> None:
    console.print(text, markup=False, highlight=False, style=style)


def _quiet_dask(verbose: bool = False) -> None:
    from .fleet.security import quiet_logs

    quiet_logs(verbose)


def _trust_options(func: F) -> F:
    """--certs / --insecure, which every fleet command takes."""
    func = click.option("--insecure", is_flag=True,
                        help="plain TCP without certificates: only on loopback (127.0.0.1), to try a fleet on one machine")(func)
    func = click.option("--certs", type=click.Path(path_type=Path), metavar="DIR",
                        help="the directory `blocklab fleet certs` wrote (default $BLOCKLAB_FLEET_CERTS)")(func)
    return func


def _timeout_option(func: F) -> F:
    return click.option("--timeout", "timeout_s", type=click.FloatRange(min=0.5), default=10.0, show_default=True, metavar="SECONDS",
                        help="how long to try to reach the scheduler")(func)


def _security(role: str, certs: Path | None, insecure: bool) -> Security | None:
    from .fleet.security import certs_dir, load_security

    return load_security(role, certs_dir(certs, insecure))


def trust_words(certs: Path | None, insecure: bool) -> str:
    """The options that say how to reach the fleet, for the commands printed to copy."""
    from .fleet.security import CERTS_ENV

    if insecure:
        return "--insecure"
    if certs is not None:
        return f"--certs {certs}"
    import os

    return f"--certs {os.environ.get(CERTS_ENV, 'DIR')}"


# ====================================================================== blocklab fleet ...
@click.group("fleet", context_settings=CONTEXT)
def fleet_group() -> None:
    """One experiment on many hosts, each measuring its own disk (Dask distributed).

    \b
    On real hosts (TLS with a CA of the fleet's own):
      blocklab fleet certs ~/fleet-certs                       once; copy the directory to every host
      blocklab fleet up --certs ~/fleet-certs                  on the scheduler's host
      blocklab worker --scheduler tls://sched:8786 --certs ~/fleet-certs      on each host
      blocklab run mbrc --fleet tls://sched:8786 --certs ~/fleet-certs        where the results go
    \b
    On one machine, for a try:
      blocklab fleet up --insecure
      BLOCKLAB_CACHE=/var/tmp/bl-a blocklab worker --scheduler tcp://127.0.0.1:8786 --name host-a --insecure
      blocklab run mbrc --quick --fleet tcp://127.0.0.1:8786 --insecure
    """


@fleet_group.command("certs")
@click.argument("directory", metavar="DIR", type=click.Path(path_type=Path))
def certs_command(directory: Path) -> None:
    """Create the fleet's certificate authority and a certificate for the scheduler,
    the workers and the client (the machine that runs `blocklab run --fleet`), in DIR.

    Copy DIR to the scheduler's host, every worker host and the machine that starts
    runs; ca-key.pem only signs certificates: keep it off the fleet. Refuses a DIR
    that already holds certificates (a new CA would lock the fleet out).

    \b
    Examples:
      blocklab fleet certs ~/fleet-certs
      export BLOCKLAB_FLEET_CERTS=~/fleet-certs     then --certs can be left out
    """
    from .fleet.security import make_certs

    console = make_console()
    try:
        written = make_certs(directory)
    except FleetInputError as err:
        fail(console, str(err), EXIT_BAD_INPUT)
    for path in written:
        _print(console, str(path))
    _print(console, f"copy {directory} (without ca-key.pem) to every host; then `blocklab fleet up --certs {directory}`")


@fleet_group.command("up")
@click.option("--listen", metavar="ADDRESS", help="where the scheduler listens (default tls://0.0.0.0:8786; with --insecure tcp://127.0.0.1:8786; port 0: any free port)")
@_trust_options
@click.option("-v", "--verbose", is_flag=True, help="Dask's own log lines too")
def up_command(listen: str | None, certs: Path | None, insecure: bool, verbose: bool) -> None:
    """Start a scheduler for a fleet and print the commands that join it. Runs until Ctrl-C.

    \b
    Examples:
      blocklab fleet up --certs ~/fleet-certs
      blocklab fleet up --certs ~/fleet-certs --listen tls://10.0.0.5:9786
      blocklab fleet up --insecure                  loopback only, for a try on one machine
    """
    from .fleet.scheduler import run_scheduler
    from .fleet.security import check_address

    console = make_console()
    _quiet_dask(verbose)
    try:
        address = check_address("--listen", listen or ("tcp://127.0.0.1:8786" if insecure else "tls://0.0.0.0:8786"), insecure, listening=True)
        security = _security("scheduler", certs, insecure)
    except FleetInputError as err:
        fail(console, str(err), EXIT_BAD_INPUT)
    trust = trust_words(certs, insecure)

    def ready(contact: str) -> None:
        lines = [
            f"scheduler at {contact} ({'plain TCP, loopback only' if insecure else 'TLS: only holders of the fleet CA certificates may connect'})",
            f"on each host: blocklab worker --scheduler {contact} {trust} --name $(hostname)",
            f"then:         blocklab run mbrc --fleet {contact} {trust}",
            f"status:       blocklab fleet status --fleet {contact} {trust}",
            "Ctrl-C stops the scheduler.",
        ]
        for line in lines:
            print(line, flush=True)  # a test or a service manager reads the address as soon as it is there

    try:
        run_scheduler(address, security, ready)
    except FleetInputError as err:
        fail(console, str(err), EXIT_BAD_INPUT)
    print("scheduler stopped", flush=True)


@fleet_group.command("status")
@click.option("--fleet", "address", required=True, metavar="ADDRESS", help="the scheduler (tls://HOST:8786)")
@_trust_options
@_timeout_option
@click.option("--json", "as_json", is_flag=True, help="the facts as JSON, one object per worker")
def status_command(address: str, certs: Path | None, insecure: bool, timeout_s: float, as_json: bool) -> None:
    """The workers connected to a fleet's scheduler, with their host facts: the device
    and file system their engines keep data on, the engines and versions they would
    run, which hosts share a disk (measured in turns), and the run each is busy with.

    \b
    Examples:
      blocklab fleet status --fleet tls://sched:8786 --certs ~/fleet-certs
      blocklab fleet status --fleet tcp://127.0.0.1:8786 --insecure --json | jq '.[].engines'
    """
    from .fleet.scheduler import fleet_status
    from .fleet.security import check_address

    console = make_console()
    _quiet_dask()
    try:
        address = check_address("--fleet", address, insecure)
        workers = fleet_status(address, _security("client", certs, insecure), timeout_s)
    except FleetInputError as err:
        fail(console, str(err), EXIT_BAD_INPUT)
    if as_json:
        click.echo(json.dumps(workers, indent=2, default=str))
        return
    _print_status(console, address, workers)


def _print_status(console: Console, address: str, workers: list[dict[str, Any]]) -> None:
    from rich import box
    from rich.table import Table

    from .fleet.facts import describe_engines
    from .report.console_tables import plain

    if not workers:
        _print(console, f"no worker is connected to {address}; start `blocklab worker --scheduler {address}` on each host")
        return
    by_disk: dict[str, list[str]] = {}
    for w in workers:
        by_disk.setdefault(str(w.get("disk", w["name"])), []).append(w["name"])
    table = Table(title=f"{len(workers)} worker(s) at {address}", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for column in ("host", "address", "machine", "device", "file system", "shares its disk with", "engines", "busy with"):
        table.add_column(column)
    for w in workers:
        if "error" in w:
            table.add_row(plain(w["name"]), plain(w["address"]), "", "", "", "", plain(w["error"]), "")
            continue
        others = [n for n in by_disk.get(str(w.get("disk")), []) if n != w["name"]]
        device = str(w.get("device") or "")
        if medium := describe_medium(str(w.get("virtual") or ""), w.get("rotational")):
            device += f" ({medium})"
        cells = [w["name"], w["address"], w.get("hostname") or "", device, w.get("file_system") or "", ", ".join(others) or "-",
                 describe_engines(w.get("engines") or {}), ", ".join(w.get("busy") or []) or "-"]
        table.add_row(*(plain(c) for c in cells))  # names and paths verbatim: no rich markup
    console.print(table)


@fleet_group.command("compare")
@click.argument("run_dir", metavar="RUN_DIR", type=click.Path(path_type=Path))
@click.argument("host_a", metavar="HOST_A")
@click.argument("host_b", metavar="HOST_B")
@click.option("--metric", metavar="M", help="the metric to compare (default: the one the run was judged on)")
@click.option("--force", is_flag=True, help="compare hosts whose engine versions or data sizes differ")
def compare_command(run_dir: Path, host_a: str, host_b: str, metric: str | None, force: bool) -> None:
    """Two hosts of one fleet run, setting by setting: B/A of the medians with its 95%
    interval, a p-value, a verdict (as `blocklab compare` does for two runs).

    \b
    Examples:
      blocklab fleet compare results/mbrc-20261124-101500 host-a host-c
      blocklab fleet compare results/mbrc-20261124-101500 host-a host-c --metric mb_per_s
    """
    from .analysis.compare import CompareError, EnvironmentMismatch
    from .analysis.fleet import compare_hosts

    console = make_console()
    try:
        result = compare_hosts(run_dir, host_a, host_b, metric=metric, force=force)
    except EnvironmentMismatch as err:
        lines = [f"  {difference.text()}" for difference in err.differences]
        fail(console, "\n".join(["HOST_A and HOST_B ran the experiment under different conditions:", *lines,
                                   "their numbers are not comparable as they stand; add --force to compare them anyway"]), EXIT_BAD_INPUT)
    except CompareError as err:
        fail(console, str(err), EXIT_BAD_INPUT)
    print_comparison(console, result)


# ====================================================================== blocklab worker
@click.command("worker", context_settings=CONTEXT)
@click.option("--scheduler", "address", required=True, metavar="ADDRESS", help="the fleet's scheduler (tls://HOST:8786)")
@click.option("--name", metavar="NAME", help="this host's name in results (default: the host name); unique in the fleet")
@_trust_options
@click.option("--cache", type=click.Path(path_type=Path, file_okay=False), metavar="DIR",
              help="where this host's engines keep their data (default $BLOCKLAB_CACHE, else blocklab's cache)")
@click.option("--listen-host", metavar="IP", help="the address this worker listens on (default: the one that reaches the scheduler)")
@_timeout_option
@click.option("-v", "--verbose", is_flag=True, help="Dask's own log lines too")
def worker_command(address: str, name: str | None, certs: Path | None, insecure: bool, cache: Path | None,
                   listen_host: str | None, timeout_s: float, verbose: bool) -> None:
    """Serve this host to a fleet: a Dask worker with blocklab inside, holding this
    host's engine for each run (its data under --cache, on this host's disk). Runs
    until Ctrl-C, SIGTERM or the scheduler's end; one worker per host.

    \b
    Examples:
      blocklab worker --scheduler tls://sched:8786 --certs ~/fleet-certs
      blocklab worker --scheduler tls://sched:8786 --certs ~/fleet-certs --name db7 --cache /data/blocklab
      blocklab worker --scheduler tcp://127.0.0.1:8786 --insecure --name host-a --cache /var/tmp/bl-a
    """
    import os

    from .fleet.plan import check_host_name
    from .fleet.security import check_address, is_loopback, split_host_port
    from .fleet.worker import run_worker

    console = make_console()
    _quiet_dask(verbose)
    name = name or socket.gethostname()
    try:
        if problem := check_host_name(name):
            raise FleetInputError("--name", problem)
        address = check_address("--scheduler", address, insecure)
        security = _security("worker", certs, insecure)
        if cache is not None:
            os.environ["BLOCKLAB_CACHE"] = str(cache.resolve())  # the engines read it (paths.cache_root)
        from .paths import cache_root

        host, _ = split_host_port("--scheduler", address.partition("://")[2])
        # a scheduler on loopback is a try on one machine: the worker must not listen beyond it
        listen = listen_host or ("127.0.0.1" if is_loopback(host.strip("[]")) else None)
    except FleetInputError as err:
        fail(console, str(err), EXIT_BAD_INPUT)

    def ready(worker_address: str, facts: dict[str, Any]) -> None:
        from .fleet.facts import describe_engines

        print(f"worker {name} at {worker_address}, connected to {address}", flush=True)
        print(f"engines: {describe_engines(facts.get('engines') or {})}; data under {facts.get('cache_dir')} "
              f"({facts.get('device')}, {facts.get('file_system')})", flush=True)

    try:
        told = run_worker(address, name, security, cache_dir=cache_root(), listen_host=listen, timeout=timeout_s, on_ready=ready)
    except FleetInputError as err:
        fail(console, str(err), EXIT_BAD_INPUT)
    if not told:  # exit 1, so that a service manager (systemd Restart=on-failure) starts it again
        fail(console, f"worker {name} stopped: the scheduler at {address} went away; start the worker again once it is back", EXIT_FAILED)
    print(f"worker {name} stopped", flush=True)


# ====================================================================== blocklab run --fleet
FLEET_RUN_OPTIONS = ("fleet", "hosts", "certs", "insecure", "share_disk", "fleet_timeout")


def fleet_run_options(func: F) -> F:
    """The options `blocklab run` takes for a fleet; they arrive as keyword arguments
    that run_command hands to run_on_fleet."""
    options = [
        click.option("--fleet", metavar="ADDRESS", help="run on a fleet: the scheduler's address (tls://HOST:8786); see `blocklab fleet --help`"),
        click.option("--hosts", metavar="A,B,C", help="with --fleet: these workers only (default: every connected worker)"),
        click.option("--certs", type=click.Path(path_type=Path), metavar="DIR", help="with --fleet: the fleet's certificates (default $BLOCKLAB_FLEET_CERTS)"),
        click.option("--insecure", is_flag=True, help="with --fleet: plain TCP, loopback only (a try on one machine)"),
        click.option("--share-disk", is_flag=True, help="with --fleet: measure hosts that share a disk at the same time (default: they take turns)"),
        click.option("--fleet-timeout", type=click.FloatRange(min=0.5), default=10.0, show_default=True, metavar="SECONDS",
                     help="with --fleet: how long to try to reach the scheduler"),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def wants_fleet(resume: Path | None, fleet: dict[str, object]) -> bool:
    """Does this `blocklab run` go to run_on_fleet: a fleet option given, or --resume of a
    run that was measured on a fleet (which then needs --fleet)?"""
    if fleet.get("fleet") or fleet.get("hosts") or fleet.get("certs") or fleet.get("insecure") or fleet.get("share_disk"):
        return True
    if resume is not None:
        from .fleet.plan import is_fleet_plan
        from .results import PLAN_FILE

        try:
            return is_fleet_plan(json.loads((resume / PLAN_FILE).read_text()))
        except (OSError, ValueError):
            return False
    return False


def parse_hosts(text: str | None) -> list[str] | None:
    from .fleet.plan import check_host_name

    if text is None:
        return None
    hosts = [h.strip() for h in text.split(",") if h.strip()]
    if not hosts:
        raise FleetInputError("--hosts", f"{text!r}: give worker names separated by commas (A,B,C)")
    for host in hosts:
        if problem := check_host_name(host):
            raise FleetInputError("--hosts", problem)
    doubled = sorted({h for h in hosts if hosts.count(h) > 1})
    if doubled:
        raise FleetInputError("--hosts", f"{', '.join(doubled)} given twice")
    return hosts


class FleetConsoleReporter(ConsoleReporter):
    """The local run's console lines, each cell's prefixed with its host."""

    def host_cell_done(self, host: str, cell: Cell, row: ResultRow, text: str) -> None:
        self.console.print(f"[{host} block {cell.block + 1}] {text}", markup=False, highlight=False, style=None if row.ok else "red")
        if self.progress is not None and self.task is not None:
            self.progress.advance(self.task)


def run_on_fleet(target: str | None, overrides: Overrides, out: Path | None, resume: Path | None, no_retry: bool, wait_s: float | None,
                 allow_server_changes: bool, *, fleet: str | None, hosts: str | None, certs: Path | None, insecure: bool,
                 share_disk: bool, fleet_timeout: float) -> None:
    """`blocklab run ... --fleet ADDRESS` (and `--resume DIR --fleet ADDRESS`)."""
    from .fleet.coordinator import FleetRequest, resume_run, start_run
    from .fleet.security import check_address
    from .runner import Interrupted

    console = make_console()
    _quiet_dask()
    reporter = FleetConsoleReporter(console)
    try:
        if not fleet:
            if resume is not None and wants_fleet(resume, {}):
                raise FleetInputError("--fleet", f"{resume} was measured on a fleet: resume it with --resume {resume} --fleet ADDRESS (its scheduler)")
            given = {"--hosts": hosts, "--certs": certs, "--insecure": insecure, "--share-disk": share_disk}
            raise FleetInputError(next(k for k, v in given.items() if v), "goes with --fleet ADDRESS (a run on a fleet)")
        if wait_s is not None:
            raise FleetInputError("--wait", "queues behind another run on this machine's engine; on a fleet each host "
                                  "refuses a second run itself: leave --wait out")
        if allow_server_changes:
            raise FleetInputError("--allow-server-changes", "a fleet run uses each host's own embedded engine and changes no server of anyone's")
        if no_retry and resume is None:
            raise SpecError("--no-retry goes with --resume DIR (which cells of a run to measure again)")
        if resume is not None:
            o = overrides
            if target or o.sets or o.repeats or o.rows or o.engine or o.dsn or o.seed is not None or o.quick or out is not None or o.budget:
                raise SpecError("--resume continues a run exactly as it started: give no FILE/RECIPE or other experiment options")
        elif not target:
            raise SpecError("give an experiment FILE or RECIPE (see `blocklab recipes`), or --resume DIR")
        if out is not None:
            check_out_dir(out)
        address = check_address("--fleet", fleet, insecure)
        request = FleetRequest(address, _security("client", certs, insecure), parse_hosts(hosts), share_disk, fleet_timeout)
        if resume is not None:
            outcome = resume_run(resume, request, reporter, retry=not no_retry)
        else:
            outcome = start_run(target or "", overrides, request, reporter, out)
    except Interrupted as err:
        reporter.close()
        where = getattr(err, "run_dir", None) or resume or "DIR"
        _print(console, f"{err}; continue with: blocklab run --resume {where} --fleet {fleet} {trust_words(certs, insecure)}")
        sys.exit(EXIT_INTERRUPTED)
    except KeyboardInterrupt:  # before the first cell: the hosts' labs were closed on the way out
        reporter.close()
        _print(console, "interrupted before any cell was measured; nothing to resume" if resume is None
               else f"interrupted; continue with: blocklab run --resume {resume} --fleet {fleet} {trust_words(certs, insecure)}")
        sys.exit(EXIT_INTERRUPTED)
    except (SpecError, ResultsError) as err:
        reporter.close()
        fail(console, str(err), EXIT_BAD_INPUT)
    except (FleetError, EngineError, ResultsWriteError) as err:
        reporter.close()
        fail(console, str(err), EXIT_FAILED)
    reporter.close()
    _print_fleet_summary(console, outcome)
    if outcome.missing:
        lines = [f"{h}: {n} cell(s) not measured" + (f" ({outcome.lost[h]})" if h in outcome.lost else "") for h, n in outcome.missing.items()]
        for line in lines:
            _print(console, line, style="red")
        _print(console, f"when their workers are back: blocklab run --resume {outcome.run_dir.path} --fleet {fleet} {trust_words(certs, insecure)}", style="red")
        sys.exit(EXIT_FAILED)


def _print_fleet_summary(console: Console, outcome: FleetOutcome) -> None:
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    from .report.console_tables import plain

    summary, sweep = outcome.summary, outcome.sweep
    fleet = summary.get("fleet") or {}
    table = Table(title=escape(f"{summary.get('metric')} per host ({summary.get('goal')} is best)"), title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for column in ("host", "cells ok", "best", "median at best", "the fleet's choice there"):
        table.add_column(column, justify="right" if column in ("cells ok", "median at best") else "left")
    choice = fleet.get("choice")
    for host in outcome.hosts:
        s = (fleet.get("hosts") or {}).get(host) or {}
        best = s.get("best_label")
        entry = (s.get("settings") or {}).get(best) or {}
        if host in fleet.get("agree", []):
            there = "best"
        elif host in fleet.get("close", []):
            there = "indistinguishable from the best"
        elif host in (fleet.get("differ") or {}):
            d = fleet["differ"][host]
            there = f"{d['factor']:.2f}x slower" if d.get("n") else "not measured"
        else:
            there = "-"
        table.add_row(plain(host), f"{s.get('cells_ok', 0)}/{s.get('cells_planned') or 0}", plain(sweep.describe_setting(best) if best else "-"),
                      human(float(entry.get("median", "nan")), sweep.unit) if best else "-", there if choice else "-")
    console.print(table)
    if summary.get("headline"):
        _print(console, summary["headline"])
    _print(console, str(summary.get("verdict") or ""))
    if summary.get("cells_failed"):
        _print(console, f"{summary['cells_failed']} cell(s) failed: see {outcome.run_dir.file('results.jsonl')}", style="red")
    invalid = summary.get("invalid_cells") or []
    _print(console, f"{len(invalid)} cell(s) invalid (a claim did not hold; left out of every figure above)", style="red" if invalid else None)
    for entry in invalid[:10]:
        _print(console, f"  {entry['cell_id']}: {entry['why']}", style="red")
    run_dir: RunDir = outcome.run_dir
    _print(console, f"results: {run_dir.path}")
    if run_dir.file("report.html").exists():
        _print(console, f"report:  {run_dir.file('report.html')}")
