"""`blocklab export` and `blocklab compare`: what is done with finished runs' results."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from .cli_errors import EXIT_BAD_INPUT, EXIT_FAILED, fail
from .console import make_console
from .report.console_tables import print_comparison
from .results import ResultsError


@click.command("export")
@click.argument("run_dir", metavar="RUN_DIR", type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["csv", "json", "parquet"], case_sensitive=False), default="csv", show_default=True, help="csv: one line per cell; json: the whole run; parquet: optional, needs pyarrow (pip install 'blocklab[parquet]')")
@click.option("--output", "-o", type=click.Path(path_type=Path, dir_okay=False), help="write to FILE instead of stdout")
def export_command(run_dir: Path, fmt: str, output: Path | None) -> None:
    """Export the results of a run as CSV, JSON or Parquet (stdout by default).

    \b
    Examples:
      blocklab export results/mbrc-20261122-101500 > mbrc.csv
      blocklab export results/mbrc-20261122-101500 --format json | jq .summary.verdict
      blocklab export results/mbrc-20261122-101500 --format parquet --output mbrc.parquet
    """
    from .report.parquet_export import ExportUnavailable
    from .report.writer import export_bytes, write_export

    console = make_console()
    fmt = fmt.lower()
    if output is not None and not output.parent.is_dir():
        fail(console, f"--output {output}: the directory {output.parent} does not exist", EXIT_BAD_INPUT)
    if output is None and fmt == "parquet" and sys.stdout.isatty():
        fail(console, "--format parquet is binary: give --output FILE or redirect stdout", EXIT_BAD_INPUT)
    try:
        if output is not None:
            click.echo(str(write_export(run_dir, fmt, output)))
            return
        content = export_bytes(run_dir, fmt)
    except ResultsError as err:
        fail(console, f"RUN_DIR {err}; give a directory written by `blocklab run`", EXIT_BAD_INPUT)
    except ExportUnavailable as err:
        fail(console, str(err), EXIT_FAILED)
    try:
        sys.stdout.buffer.write(content)
        sys.stdout.flush()
    except BrokenPipeError:  # `| head` closed the pipe: not an error
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing left to flush at exit


@click.command("compare")
@click.argument("run_a", metavar="RUN_A", type=click.Path(path_type=Path))
@click.argument("run_b", metavar="RUN_B", type=click.Path(path_type=Path))
@click.option("--force", is_flag=True, help="compare runs from different hosts, engine versions, devices or data sizes")
@click.option("--metric", metavar="M", help="the metric to compare (default: the one the runs were judged on, e.g. rows_per_s)")
def compare_command(run_a: Path, run_b: Path, force: bool, metric: str | None) -> None:
    """Compare two runs setting by setting: B/A of the medians with its 95% interval, a p-value, a verdict.

    \b
    Examples:
      blocklab compare results/mbrc-20261122-101500 results/mbrc-20261123-090000
      blocklab compare results/before results/after --metric mb_per_s
      blocklab compare results/laptop results/server --force
    """
    from .analysis.compare import CompareError, EnvironmentMismatch, compare_runs

    console = make_console()
    try:
        result = compare_runs(run_a, run_b, metric=metric, force=force)
    except EnvironmentMismatch as err:
        lines = [f"  {difference.text()}" for difference in err.differences]
        fail(console, "\n".join(["RUN_A and RUN_B were measured under different conditions:", *lines,
                                   "their numbers are not comparable as they stand; add --force to compare them anyway"]), EXIT_BAD_INPUT)
    except CompareError as err:
        fail(console, str(err), EXIT_BAD_INPUT)
    print_comparison(console, result)
