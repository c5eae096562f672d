"""The `blocklab` command: parse arguments, call one library function, print."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from . import __version__, recipes
from .console import ConsoleReporter, make_console, settings_table
from .engines.base import EngineError
from .lab import Overrides, load_experiment, load_saved_experiment, plan_text
from .paths import results_root
from .results import ResultsError, RunDir
from .runner import Interrupted, new_run_dir, run
from .spec import SpecError

EXIT_BAD_INPUT = 2
EXIT_FAILED = 1
EXIT_INTERRUPTED = 130


def _fail(console: Any, message: str, code: int) -> None:
    console.print(f"error: {message}", style="red", markup=False, highlight=False)
    sys.exit(code)


def experiment_options(func: Any) -> Any:
    """The options `run` and `plan` share."""
    options = [
        click.option("--set", "sets", multiple=True, metavar="KNOB=V1,V2,...", help="sweep these values (replaces the file's list)"),
        click.option("--repeats", type=int, help="randomised blocks: every setting once per block"),
        click.option("--rows", type=int, help="rows in the data set"),
        click.option("--engine", type=str, help="postgres, sqlite or mariadb (recipes with variants)"),
        click.option("--dsn", type=str, help="use this server instead of an embedded one (password from the environment)"),
        click.option("--seed", type=int, help="random seed of the plan order"),
        click.option("--quick", is_flag=True, help="the recipe's small, fast variant"),
        click.option("--allow-server-changes", is_flag=True, help="let blocklab change server-wide settings on a --dsn server (restored at the end)"),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _overrides(sets, repeats, rows, engine, dsn, seed, quick) -> Overrides:
    return Overrides(list(sets), repeats, rows, engine, dsn, seed, quick)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
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
def run_command(target, sets, repeats, rows, engine, dsn, seed, quick, allow_server_changes, out, resume) -> None:
    """Run an experiment FILE or built-in RECIPE and print the verdict.

    \b
    Examples:
      blocklab run mbrc
      blocklab run mbrc --quick --set multiblock_read=1,16,128 --repeats 5
      blocklab run my-experiment.toml --out results/today
      blocklab run --resume results/mbrc-20261122-101500
    """
    console = make_console()
    try:
        if resume is not None:
            if target or sets or repeats or rows or engine or dsn or seed is not None or quick:
                raise SpecError("--resume continues a run exactly as it started: give no FILE/RECIPE or other experiment options")
            exp = load_saved_experiment(resume, allow_server_changes=allow_server_changes)
            run_dir = RunDir(resume)
        else:
            if not target:
                raise SpecError("give an experiment FILE or RECIPE (see `blocklab recipes`), or --resume DIR")
            exp = load_experiment(target, _overrides(sets, repeats, rows, engine, dsn, seed, quick), allow_server_changes=allow_server_changes)
            run_dir = RunDir(out) if out else new_run_dir(results_root(), exp.spec.name)
    except (SpecError, ResultsError) as err:
        _fail(console, str(err), EXIT_BAD_INPUT)
    except EngineError as err:
        _fail(console, str(err), EXIT_FAILED)
    console.print(f"results: {run_dir.path}")
    reporter = ConsoleReporter(console, lambda cell: _cell_text(exp, cell))
    try:
        summary = run(exp, run_dir, reporter, resume=resume is not None)
    except Interrupted as err:
        reporter.close()
        console.print(f"{err}; continue with: blocklab run --resume {run_dir.path}")
        sys.exit(EXIT_INTERRUPTED)
    except (SpecError, ResultsError) as err:
        reporter.close()
        _fail(console, str(err), EXIT_BAD_INPUT)
    except EngineError as err:
        reporter.close()
        _fail(console, str(err), EXIT_FAILED)
    _print_summary(console, exp, summary, run_dir)


def _cell_text(exp: Any, cell: Any) -> str:
    if len(exp.knobs) == 1:
        knob, value = next(iter(cell.setting.as_dict().items()))
        return f"{knob} = {exp.knob_infos[knob].describe_value(value) if isinstance(value, int) and not isinstance(value, bool) else value}"
    return cell.setting.label


def _print_summary(console: Any, exp: Any, summary: dict[str, Any], run_dir: RunDir) -> None:
    if summary.get("settings") and summary.get("best_label"):
        console.print(settings_table(summary, "", exp.describe_setting))
        best = summary["best"]
        if len(best) == 1:
            knob, value = next(iter(best.items()))
            console.print(f"Best {knob} is {exp.describe_setting(summary['best_label'])}")
        console.print(summary["verdict"])
    if summary.get("cells_failed"):
        console.print(f"{summary['cells_failed']} cell(s) failed: see {run_dir.file('results.jsonl')}", style="red")
    console.print(f"results: {run_dir.path}")


@main.command("plan")
@click.argument("target")
@experiment_options
def plan_command(target, sets, repeats, rows, engine, dsn, seed, quick, allow_server_changes) -> None:
    """Dry run: the cells in order, which changes need a restart, an estimated time.

    \b
    Examples:
      blocklab plan mbrc
      blocklab plan mbrc --set multiblock_read=8,16 --repeats 10 --seed 7
    """
    console = make_console()
    try:
        exp = load_experiment(target, _overrides(sets, repeats, rows, engine, dsn, seed, quick), allow_server_changes=allow_server_changes)
    except SpecError as err:
        _fail(console, str(err), EXIT_BAD_INPUT)
    except EngineError as err:
        _fail(console, str(err), EXIT_FAILED)
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
            _fail(console, f"unknown recipe {show!r}; built-in recipes: {', '.join(recipes.names())}", EXIT_BAD_INPUT)
        click.echo(recipes.path_of(show).read_text(), nl=False)
        return
    for name in recipes.names():
        console.print(f"{name:12s} {recipes.summary_line(name)}", markup=False)


if __name__ == "__main__":
    main()
