"""The `blocklab` command: parse arguments, call one library function, print.

Here: the group and the commands about an experiment and its results (run, plan,
recipes, report). The other commands live in modules of their own, added to the
group at the end: cli_results.py (export, compare), cli_system.py (sysstats, calibrate),
cli_server.py (doctor, clean, restore), cli_import.py, cli_fleet.py, cli_analyse.py, cli_tune.py.
"""

from __future__ import annotations

import dataclasses
import errno
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console

from . import __version__, recipes
from .budget import ENV_VAR as BUDGET_ENV_VAR
from .cli_analyse import analyse_command
from .cli_errors import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_INTERRUPTED, fail
from .cli_fleet import fleet_group, fleet_run_options, run_on_fleet, wants_fleet, worker_command
from .cli_import import import_group
from .cli_results import compare_command, export_command
from .cli_server import clean_command, doctor_command, restore_command
from .cli_system import calibrate_command, sysstats_command
from .cli_tune import tune_command
from .console import ConsoleReporter, make_console
from .device.twin import ENV_VAR as TWIN_ENV_VAR
from .device.twin import MODES as TWIN_MODES
from .engines import available as available_engines
from .engines.base import EngineError, KnobError
from .experiment import Experiment
from .jsonvalue import as_number, as_object, str_or_none
from .lab import Overrides, give_budget, load_experiment, load_saved_experiment, plan_text
from .paths import check_out_dir, results_root
from .plan import Cell
from .probes import cpu_profile
from .report.console_tables import efficiency_table, explain_text, overhead_tables, settings_table
from .results import ResultsError, ResultsWriteError, RunDir, new_run_dir
from .runner import Interrupted, check_budget_left, run
from .spec import SpecError
from .sql_shortcut import ScriptRun, parse_duration

F = TypeVar("F", bound=Callable[..., object])  # a click command, before and after its options


def experiment_options(func: F) -> F:
    """The options `run` and `plan` share."""
    options = [
        click.option("--set", "sets", multiple=True, metavar="KNOB=V1,V2,...", help="sweep these values (replaces the file's list)"),
        click.option("--repeats", type=int, help="randomised blocks: every setting once per block (with a budget: the "
                                                 "blocks before the stopping rule's first look)"),
        click.option("--rows", type=int, help="rows in the data set"),
        click.option("--engine", type=str, help=f"the engine: {', '.join(available_engines())} (recipes have a variant per engine)"),
        click.option("--dsn", type=str, help="use this server instead of an embedded one (password from the environment)"),
        click.option("--seed", type=int, help="random seed of the plan order"),
        click.option("--quick", is_flag=True, help="the recipe's small, fast variant"),
        click.option("--budget", metavar="DURATION|CELLS|off", envvar=BUDGET_ENV_VAR, show_envvar=True,
                     help="stop by the rule (every setting separated from the best or within 3%% of it) or when this is "
                          "spent: a duration (90s, 5m, 1h) or a cell count (200cells or 200); off: exactly the --repeats "
                          "blocks. A budget is a hard limit: it may end a run inside its first --repeats blocks (a partial "
                          "run, no verdict yet; `blocklab plan` warns); with --resume DIR a new budget replaces the run's "
                          "own (it counts what was measured) to go on. Default: the recipe's budget. E.g. --budget 5m"),
        click.option("--allow-server-changes", is_flag=True, help="let blocklab change server-wide settings on a --dsn server (restored at the end)"),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def script_options(func: F) -> F:
    """`run`'s options for the user's own SQL (workload sql), and the workload sizes any file may override."""
    options = [
        click.option("--script", "scripts", multiple=True, metavar="FILE[@WEIGHT]",
                     help="run this pgbench-style script (repeat for several; @WEIGHT as pgbench -f FILE@WEIGHT)"),
        click.option("--setup", type=str, metavar="FILE", help="DDL of the script's data set, run once per machine (cached by content)"),
        click.option("--load", type=str, metavar="FILE", help="load of the data set after --setup; :rows is --rows"),
        click.option("--sessions", type=click.IntRange(1, 256), help="concurrent sessions (workload.sessions)"),
        click.option("--duration", type=str, metavar="TIME", help="each cell's time, e.g. 10s, 500ms, 2m (workload.duration_s)"),
        click.option("--transactions", type=click.IntRange(min=1), help="with --script: transactions per session instead of --duration"),
        click.option("-D", "--define", "defines", multiple=True, metavar="NAME=VALUE", help="with --script: a script variable (pgbench -D)"),
        click.option("--protocol", type=click.Choice(["simple", "prepared"]),
                     help="with --script: send statements whole or prepared once (pgbench -M; default: the engine's own)"),
        click.option("--allow-writes", is_flag=True, help="on a --dsn server, let a writing script run on copies of the tables it writes"),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _overrides(sets, repeats, rows, engine, dsn, seed, quick, budget=None) -> Overrides:
    overrides = Overrides(list(sets), repeats, rows, engine, dsn, seed, quick)
    overrides.budget = budget
    return overrides


BAD_PATH_ERRNOS = {errno.ENAMETOOLONG, errno.ELOOP, errno.ENOENT, errno.ENOTDIR, errno.EISDIR, errno.EACCES, errno.EPERM}


class Commands(click.Group):
    """The command group, with a last line of defence: an input error that a command
    did not catch itself (a knob, an experiment field, an environment variable)
    still ends as one line on stderr and exit 2, never a traceback."""

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except (SpecError, KnobError) as err:
            fail(None, str(err), EXIT_BAD_INPUT)
        except OSError as err:
            if err.filename is None:
                raise
            # a path the user gave that the system refuses (too long, a symlink loop, no access)
            code = EXIT_BAD_INPUT if err.errno in BAD_PATH_ERRNOS else EXIT_FAILED
            fail(None, f"{err.filename}: {err.strerror or err}", code)


@click.group(cls=Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="blocklab")
def main() -> None:
    """blocklab: what does this storage parameter do to my database, on my disk?

    \b
    Examples:
      blocklab recipes                       list the built-in experiments
      blocklab plan mbrc                     show what a run would do
      blocklab run mbrc --quick              run a small version of the MBRC experiment
    """


@main.command("run")
@click.argument("target", required=False)
@experiment_options
@click.option("--out", type=click.Path(path_type=Path), help="results directory (default results/NAME-TIMESTAMP)")
@click.option("--resume", type=click.Path(path_type=Path, file_okay=False), help="continue an interrupted run in this directory")
@click.option("--no-retry", is_flag=True, help="with --resume: measure only the missing cells, not the failed or invalid ones again")
@click.option("--wait", "wait_s", type=click.FloatRange(min=0), default=None, metavar="SECONDS",
              help="if another blocklab uses the same engine data directory, wait for it (default: refuse at once)")
@click.option("--device-twin", "device_twin", type=click.Choice(TWIN_MODES), default=None, envvar=TWIN_ENV_VAR,
              show_envvar=True,
              help="right after each cell, fio replays the cell's I/O on the same file system and the engine's share of "
                   "it is printed (on: required; off: not; only: just that, for the run given by --resume). "
                   "Default: on where fio is installed and the data directory is on this host")
@click.option("--explain", is_flag=True, help="after the verdict, print how it was judged (the report's 'How to read this')")
@click.option("--cpu-profile", "cpu_profile", is_flag=True,
              help="sample the engine's own processes' stacks with perf in every cell: flame graphs per setting and the "
                   "functions whose CPU per unit of work grows with the knob (measure.cpu_profile)")
@click.option("--cpu-profile-hz", "cpu_profile_hz", type=int, default=None, metavar="HZ",
              help=f"samples per second per process with --cpu-profile (1-{cpu_profile.MAX_HZ}, default {cpu_profile.DEFAULT_HZ})")
@click.option("--trace-function", "trace_function", metavar="NAME",
              help="count and time every call of one function of the engine's binary with uprobes (bpftrace), per setting")
@click.option("--trace-arg", "trace_arg", type=int, default=None, metavar="N",
              help="with --trace-function: a histogram of the function's integer argument N (1-6) too")
@script_options  # --script, --setup, --load, --sessions, --duration, --transactions, --define, --allow-writes
@fleet_run_options  # --fleet, --hosts, --certs, --insecure, --share-disk (cli_fleet.py)
def run_command(target, sets, repeats, rows, engine, dsn, seed, quick, budget, allow_server_changes, out, resume, no_retry, wait_s,
                device_twin, cpu_profile, cpu_profile_hz, trace_function, trace_arg, scripts, setup, load, sessions, duration,
                transactions, defines, protocol, allow_writes, explain, **fleet) -> None:
    """Run an experiment FILE or built-in RECIPE and print the verdict.

    \b
    Examples:
      blocklab run mbrc
      blocklab run mbrc --quick --set multiblock_read=1,16,128 --repeats 5
      blocklab run mbrc --budget 5m          # stop when settled, or after 5 minutes
      blocklab run mbrc --budget 200cells    # ... or after 200 cells
      blocklab run my-experiment.toml --out results/today
      blocklab run --resume results/mbrc-20261122-101500
      blocklab run --resume results/mbrc-20261122-101500 --no-retry
      blocklab run slob --wait 3600          # queue behind another run on the same cache
      blocklab run mbrc --quick --device-twin off       # no fio replay after the cells
      blocklab run mbrc --quick --explain               # the verdict, then how it was judged
      blocklab run --resume results/mbrc-20261122-101500 --device-twin only   # add the device twin to a run
      blocklab run mbrc --fleet tls://sched:8786 --certs ~/fleet-certs    # every host of a fleet

    \b
    Your own SQL (pgbench's script language; workload "sql"):
      blocklab run --script q.sql --set pg.io_combine_limit=1,8,16,32 --engine postgres
      blocklab run --script tpcb.sql --protocol prepared --sessions 2 --set pg.synchronous_commit=on,off
      blocklab run --script tpcb.sql@9 --script select.sql@1 --setup schema.sql --load load.sql --rows 100000 \\
                   --sessions 4 --duration 10s --set pg.synchronous_commit=on,off
      blocklab run --script report.sql --dsn "host=db1 dbname=shop user=me" --set pg.effective_io_concurrency=1,64
      blocklab run --script orders.sql --dsn "host=db1 dbname=shop user=me" --allow-writes   # on copies of its tables
      blocklab run mine.toml --sessions 8 --duration 30s
      blocklab run checksum --engine sqlite --quick --cpu-profile          # why it costs: stacks per setting
      blocklab run checksum --quick --trace-function pg_checksum_page     # calls and time per call, per setting
    """
    if resume is not None and _from_environment("budget"):
        budget = None  # BLOCKLAB_BUDGET is a default for new runs; a resumed run keeps the budget it started with
    budget = _budget_from(budget)
    profiling = Overrides(cpu_profile=cpu_profile, cpu_profile_hz=cpu_profile_hz, trace_function=trace_function,
                          trace_arg=trace_arg).as_dotted()
    if profiling and wants_fleet(resume, fleet):
        fail(make_console(), "--cpu-profile / --trace-function: not on a fleet run yet (the profiles are kept on the host "
             "that measured them); run it on one host", EXIT_BAD_INPUT)
    if profiling and resume is not None:
        fail(make_console(), "--cpu-profile / --trace-function: --resume continues a run as it started (its experiment "
             "file says whether it profiles)", EXIT_BAD_INPUT)
    script_text = None
    if scripts or setup or load:
        try:
            if target or resume:
                raise SpecError("--script runs your own SQL instead of an experiment FILE or RECIPE: give one or the other")
            if not scripts:
                raise SpecError("--setup/--load build the data set of --script: give the script(s) with --script FILE")
            script_text = ScriptRun(list(scripts), setup, load, transactions=transactions, variables=list(defines), protocol=protocol).toml()
        except SpecError as err:
            fail(make_console(), str(err), EXIT_BAD_INPUT)
        target = "--script " + " ".join(scripts)
    elif transactions is not None or defines or protocol:
        fail(make_console(), "--transactions, --define and --protocol go with --script (in an experiment file: workload.transactions, "
             "workload.variables, workload.protocol)", EXIT_BAD_INPUT)
    try:
        duration_s = parse_duration(duration) if duration is not None else None
    except SpecError as err:
        fail(make_console(), str(err), EXIT_BAD_INPUT)
    if wants_fleet(resume, fleet):  # the same run on many hosts: cli_fleet.py
        if _from_environment("budget"):
            budget = None  # BLOCKLAB_BUDGET is a default for a run on one host: a fleet runs the fixed plan, as with a recipe's budget
        if device_twin in ("on", "only"):
            fail(make_console(), f"--device-twin {device_twin}: not on a fleet run (each host's disk would need its own "
                  "twin); run it on one host, or leave --device-twin out", EXIT_BAD_INPUT)
        if script_text is not None or sessions or duration or allow_writes:
            fail(make_console(), "--script, --sessions, --duration and --allow-writes are not taken by a fleet run yet: "
                 "write them into an experiment file ([workload]) and run that on the fleet", EXIT_BAD_INPUT)
        return run_on_fleet(target, _overrides(sets, repeats, rows, engine, dsn, seed, quick, budget), out, resume, no_retry, wait_s,
                            allow_server_changes, **fleet)
    from .engines.host import wait_for_locks

    console = make_console()
    if device_twin == "only":
        _device_twin_only(console, resume, bool(target or sets or repeats or rows or engine or dsn or seed is not None
                                                or quick or budget or out or no_retry))
        return
    if wait_s is not None:
        wait_for_locks(wait_s, lambda text: console.print(text, markup=False, highlight=False))
    try:
        if no_retry and resume is None:
            raise SpecError("--no-retry goes with --resume DIR (which cells of a run to measure again)")
        if out is not None:
            check_out_dir(out)
        if resume is not None:
            if target or sets or repeats or rows or engine or dsn or seed is not None or quick or sessions or duration or allow_writes:
                raise SpecError("--resume continues a run exactly as it started: give no FILE/RECIPE or other experiment options "
                                "(--budget gives it a new budget)")
            exp = load_saved_experiment(resume, allow_server_changes=allow_server_changes)
            run_dir = RunDir(resume)
            if budget is not None:  # the run's budget replaced: a way to extend it
                give_budget(exp, resume, budget)
            try:
                check_budget_left(exp, run_dir, retry=not no_retry)  # spent with cells owed: say so, run nothing
            except SpecError:
                exp.engine.stop()
                raise
        else:
            if not target:
                raise SpecError("give an experiment FILE or RECIPE (see `blocklab recipes`), or --resume DIR")
            overrides = _overrides(sets, repeats, rows, engine, dsn, seed, quick, budget)
            overrides = _overrides(sets, repeats, rows, engine, dsn, seed, quick, budget)
            overrides.sessions, overrides.duration_s, overrides.allow_writes = sessions, duration_s, allow_writes
            overrides = dataclasses.replace(overrides, cpu_profile=cpu_profile, cpu_profile_hz=cpu_profile_hz,
                                            trace_function=trace_function, trace_arg=trace_arg)
            exp = load_experiment(target, overrides, allow_server_changes=allow_server_changes, text=script_text)
            run_dir = RunDir(out) if out else new_run_dir(results_root(), exp.spec.name)
    except (SpecError, ResultsError) as err:
        fail(console, str(err), EXIT_BAD_INPUT)
    except EngineError as err:
        fail(console, str(err), EXIT_FAILED)
    device_twin = _device_twin_mode(console, exp, device_twin)
    for warning in exp.warnings():  # said before any cell, so the run can be stopped and given more rows
        console.print(f"warning: {warning}", style="yellow", markup=False, highlight=False)
    console.print(f"results: {run_dir.path}", markup=False, highlight=False)  # a path may hold [brackets]
    reporter = ConsoleReporter(console, lambda cell: _cell_text(exp, cell))
    try:
        summary = run(exp, run_dir, reporter, resume=resume is not None, retry=not no_retry, device_twin=device_twin)
    except Interrupted as err:
        reporter.close()
        console.print(f"{err}; continue with: blocklab run --resume {run_dir.path}", markup=False, highlight=False)
        _owed_hint(console, run_dir)
        sys.exit(EXIT_INTERRUPTED)
    except (SpecError, ResultsError) as err:
        reporter.close()
        fail(console, str(err), EXIT_BAD_INPUT)
    except (EngineError, ResultsWriteError) as err:
        reporter.close()
        _owed_hint(console, run_dir)
        fail(console, f"{err}\nwhat was measured is kept: continue with blocklab run --resume {run_dir.path}", EXIT_FAILED)
    _print_summary(console, exp, summary, run_dir)
    if explain:
        console.print(explain_text(summary), markup=False, highlight=False)


def _budget_from(budget: str | None) -> str | None:
    """--budget as given ("off" in any case as "off"); one from BLOCKLAB_BUDGET that is no
    budget is refused naming the variable."""
    from .budget import OFF, BudgetError, is_off, parse_budget

    if is_off(budget):
        return OFF
    if budget is not None and _from_environment("budget"):
        try:
            parse_budget(budget, f"{BUDGET_ENV_VAR} (the default of --budget)")
        except BudgetError as err:
            fail(make_console(), f"{err}; or off", EXIT_BAD_INPUT)
    return budget


def _from_environment(param: str) -> bool:
    """The option's value came from its environment variable, not the command line."""
    from click.core import ParameterSource

    return click.get_current_context().get_parameter_source(param) == ParameterSource.ENVIRONMENT


def _device_twin_mode(console: Console, exp: Experiment, asked: str | None) -> str:
    """'on' or 'off' for this run, said before it starts; `--device-twin on` where no
    twin can run exits 2 with why (the engine is stopped first)."""
    from .device.twin import why_not

    reason = why_not(exp.engine.data_dir())
    if asked == "on" and reason is not None:
        exp.engine.stop()
        fail(console, f"--device-twin on: {reason}; use --device-twin off", EXIT_BAD_INPUT)
    mode = asked or ("on" if reason is None else "off")
    if mode == "off":
        console.print(f"device twin: off ({reason or '--device-twin off'})", markup=False, highlight=False)
    else:
        console.print("device twin: on: right after each cell, fio replays the cell's I/O on the same file system for "
                      "as long as the cell ran", markup=False, highlight=False)
    return mode


def _device_twin_only(console: Console, resume: Path | None, other_options: bool) -> None:
    """`--device-twin only --resume DIR`: the twin of a run already measured, its
    summary and report brought up to date; no engine is started."""
    from .device.fio import FioNotFound
    from .lab import device_twin_only

    if resume is None or other_options:
        fail(console, "--device-twin only replays the I/O of a run already measured: give --resume DIR and no other "
                       "experiment option (e.g. blocklab run --resume results/mbrc-20261122-101500 --device-twin only)",
              EXIT_BAD_INPUT)
    try:
        twins, summary, describe = device_twin_only(resume, lambda text: console.print(text, markup=False, highlight=False))
    except (SpecError, ResultsError, FioNotFound) as err:
        fail(console, str(err), EXIT_BAD_INPUT)
    except KeyboardInterrupt:
        console.print("interrupted; the twin's test files are removed; run it again to finish", markup=False)
        sys.exit(EXIT_INTERRUPTED)
    console.print(twins.summary_line(), markup=False, highlight=False)
    _print_efficiency(console, RunDir(resume), summary, describe)
    words = as_object(summary.get("efficiency"))
    if text := " ".join(p for p in (str_or_none(words.get("sentence")), str_or_none(words.get("verdict"))) if p):
        console.print(text, markup=False, highlight=False)
    console.print(f"report:  {RunDir(resume).file('report.html')}", markup=False, highlight=False)


def _print_efficiency(console: Console, run_dir: RunDir, summary: Mapping[str, object], describe: Callable[[str], str]) -> None:
    """The engine against its device twin, when the run has the patterns for it."""
    from .analysis.efficiency import for_run

    if not summary.get("efficiency"):
        return
    effs = for_run(run_dir, order=list(as_object(summary.get("settings"))), seed=int(as_number(summary.get("seed"), 0)))
    if any(e.pattern is not None for e in effs):
        console.print(efficiency_table(effs, describe))


def _owed_hint(console: Console, run_dir: RunDir) -> None:
    from .results import RESTORE_FILE

    if run_dir.file(RESTORE_FILE).exists():
        console.print(f"the server still has settings blocklab changed: run `blocklab restore {run_dir.path}` when it answers",
                      style="red", markup=False, highlight=False)


def _cell_text(exp: Experiment, cell: Cell) -> str:
    """The setting a cell measures, sizes as people write them ('block_size = 16 kB')."""
    return str(exp.setting_text(cell.setting.label))


def _print_summary(console: Console, exp: Experiment, summary: dict[str, Any], run_dir: RunDir) -> None:
    if summary.get("settings") and summary.get("analysis"):
        console.print(settings_table(summary, "", exp.describe_setting))
        console.print(summary["verdict"], markup=False, highlight=False)
    _print_why(console, summary, exp.describe_setting)
    _print_workload_tables(console, run_dir, summary)
    _print_efficiency(console, run_dir, summary, exp.describe_setting)
    if summary.get("cells_failed"):
        console.print(f"{summary['cells_failed']} cell(s) failed: see {run_dir.file('results.jsonl')}", style="red",
                      markup=False, highlight=False)
    invalid = summary.get("invalid_cells") or []
    style = "red" if invalid else None
    again = f"; {summary['invalid_remeasured']} of those cells measured again with every claim holding" if invalid and "invalid_remeasured" in summary else ""
    console.print(f"{len(invalid)} cell(s) invalid (a claim did not hold; left out of every figure above){again}", style=style, markup=False)
    for entry in invalid[:10]:
        console.print(f"  {entry['cell_id']}: {entry['why']}", style="red", markup=False, highlight=False)
    if summary.get("cells_flagged"):
        console.print(f"{summary['cells_flagged']} cell(s) flagged by a cross-check (counted): see the report", markup=False)
    console.print(f"results: {run_dir.path}", markup=False, highlight=False)
    if run_dir.file("report.html").exists():
        console.print(f"report:  {run_dir.file('report.html')}", markup=False, highlight=False)
    for png in sorted((run_dir.path / "plots").glob("*.png")):
        console.print(f"plot:    {png}", markup=False, highlight=False)
    if (summary.get("settle") or {}).get("status") == "budget spent":
        console.print(f"to measure more: blocklab run --resume {run_dir.path} --budget MORE (a larger budget: it replaces "
                      "this one and counts what is measured)", markup=False, highlight=False)


def _print_why(console: Console, summary: dict[str, Any], describe: Callable[[str], str]) -> None:
    """A profiled run's answer to why (--cpu-profile), a traced one's calls (--trace-function)."""
    from .report.trace_view import setting_text

    if summary.get("profile_verdict"):
        console.print(summary["profile_verdict"], markup=False, highlight=False)
    trace = summary.get("trace") or {}
    for label, entry in trace.get("settings", {}).items():
        console.print(setting_text(describe(label), entry, trace["function"], trace["unit"]), markup=False, highlight=False)


def _print_workload_tables(console: Console, run_dir: RunDir, summary: Mapping[str, object]) -> None:
    """Tables some workloads add under the verdict (e.g. the wait profile of `update`)."""
    from .analysis.slob_view import points
    from .engines import capabilities_of
    from .report.console_tables import profile_tables, slob_table

    rows = run_dir.rows()
    try:
        engine = str(run_dir.read_json("environment.json").get("engine", ""))
    except ResultsError:  # a run without its environment: captions without the engine's words
        engine = ""
    capabilities = capabilities_of(engine)
    for table in profile_tables(rows, order=list(as_object(summary.get("settings"))), capabilities=capabilities):
        console.print(table)
    for table in overhead_tables(rows, str(summary.get("metric", "elapsed_s"))):
        console.print(table)
    if points(rows):
        console.print(slob_table(rows))


@main.command("plan")
@click.argument("target")
@experiment_options
def plan_command(target, sets, repeats, rows, engine, dsn, seed, quick, budget, allow_server_changes) -> None:
    """Dry run: the cells in order, which changes need a restart, an estimated time.

    \b
    Examples:
      blocklab plan mbrc
      blocklab plan mbrc --set multiblock_read=8,16 --repeats 10 --seed 7
      blocklab plan mbrc --budget 5m
    """
    budget = _budget_from(budget)
    console = make_console()
    try:
        exp = load_experiment(target, _overrides(sets, repeats, rows, engine, dsn, seed, quick, budget), allow_server_changes=allow_server_changes)
    except SpecError as err:
        fail(console, str(err), EXIT_BAD_INPUT)
    except EngineError as err:
        fail(console, str(err), EXIT_FAILED)
    try:
        for line in plan_text(exp):
            console.print(line, markup=False)
    finally:
        exp.engine.stop()


@main.command("recipes")
@click.option("--show", metavar="NAME", help="print one recipe's TOML (to copy and edit)")
def recipes_command(show: str | None) -> None:
    """The built-in recipes, one line each.

    \b
    Examples:
      blocklab recipes
      blocklab recipes --show mbrc > my-mbrc.toml
    """
    console = make_console()
    if show:
        if show not in recipes.names():
            fail(console, f"unknown recipe {show!r}; built-in recipes: {', '.join(recipes.names())}", EXIT_BAD_INPUT)
        click.echo(recipes.path_of(show).read_text(), nl=False)
        return
    for name in recipes.names():
        console.print(f"{name:12s} {recipes.summary_line(name)}", markup=False)


@main.command("report")
@click.argument("run_dir", metavar="RUN_DIR", type=click.Path(path_type=Path))
@click.option("--explain", is_flag=True, help="also print the verdict and how it was judged (the report's 'How to read this')")
def report_command(run_dir: Path, explain: bool) -> None:
    """Write the HTML report and the plots of a results directory (again).

    Works on finished runs, interrupted ones and runs with failed cells; prints
    the paths of report.html and of the PNG plots (SVGs are written beside them).

    \b
    Examples:
      blocklab report results/mbrc-20261122-101500
      blocklab report results/mbrc-20261122-101500 | grep report.html
      blocklab report results/mbrc-20261122-101500 --explain
      blocklab report results/tune-space-20261126-130000     # a tune's (also while it runs)
    """
    from .report.data import load_run
    from .report.tune import write_tune_report
    from .report.writer import write_report

    console = make_console()
    tune = (run_dir / "tune.json").is_file()  # a tune's directory has its own report (report/tune.py)
    try:
        paths = write_tune_report(run_dir) if tune else write_report(run_dir)
    except ResultsError as err:
        fail(console, f"RUN_DIR {err}; give a directory written by `blocklab run`", EXIT_BAD_INPUT)
    for path in paths:
        if path.suffix in (".html", ".png"):
            click.echo(str(path))
    if explain and tune:
        state = RunDir(run_dir).read_json("tune.json")
        click.echo(str((state.get("confirmation") or {}).get("verdict") or "The tune's confirmation is not measured yet."))
    elif explain:
        summary = load_run(run_dir).summary
        click.echo(str(summary.get("verdict") or "No measurement yet."))
        click.echo(explain_text(summary))


main.add_command(sysstats_command)  # `blocklab sysstats`: the system statistics (cli_system.py)
main.add_command(calibrate_command)  # `blocklab calibrate`: the disk's own limits with fio (cli_system.py)
main.add_command(import_group)  # `blocklab import ...`: results measured on Oracle (cli_import.py)
main.add_command(fleet_group)  # `blocklab fleet ...`: many hosts through Dask (cli_fleet.py)
main.add_command(worker_command)  # `blocklab worker`: one per host of a fleet (cli_fleet.py)
main.add_command(doctor_command)  # `blocklab doctor`: what runs on a server and why not (cli_server.py)
main.add_command(clean_command)  # `blocklab clean`: remove what blocklab made on a --dsn server (cli_server.py)
main.add_command(restore_command)  # `blocklab restore`: settings a run still owes a --dsn server (cli_server.py)
main.add_command(analyse_command)
main.add_command(export_command)  # `blocklab export`: a run as CSV, JSON or Parquet (cli_results.py)
main.add_command(compare_command)  # `blocklab compare`: two runs setting by setting (cli_results.py)
main.add_command(tune_command)  # `blocklab tune`: several knobs at once, raced and confirmed (cli_tune.py)

if __name__ == "__main__":
    main()
