"""The commands that measure the system under the database on its own, not an
experiment's settings:

    blocklab sysstats     SREADTIM, MREADTIM, MBRC, MAXTHR on the engine's own data files
                          (features/sysstats.py) and the optimizer costs they imply
    blocklab calibrate    the disk's own limits with fio, ORION-style (device/calibrate.py)
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import click
from rich.console import Console

from .cli_errors import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_INTERRUPTED, fail
from .console import make_console
from .device.twin import ENV_VAR as TWIN_ENV_VAR
from .device.twin import MODES as TWIN_MODES
from .engines.base import EngineError
from .paths import results_root
from .results import RunDir, new_run_dir

if TYPE_CHECKING:
    from .features.sysstats import SysstatsRun

F = TypeVar("F", bound=Callable[..., object])  # a click command, before and after its options


def _engine_option(what: str) -> Callable[[F], F]:
    from .engines import DEFAULT_ENGINE
    from .engines import available as available_engines

    return click.option("--engine", "engine_kind", default=DEFAULT_ENGINE, show_default=True,
                        help=f"{what} ({', '.join(available_engines())})")


@click.command("sysstats")
@_engine_option("the engine whose data files are read; one without optimizer costs is refused with its reason")
@click.option("--dsn", type=str, help="measure this server instead of the embedded one (password from the environment)")
@click.option("--rows", type=int, default=3_000_000, show_default=True, help="rows in the scan table (built once, then reused)")
@click.option("--apply", "apply_costs", is_flag=True, help="set the implied optimizer costs server-wide (PostgreSQL: ALTER SYSTEM + reload)")
@click.option("--allow-server-changes", is_flag=True, help="let --apply change a --dsn server's settings")
@click.option("--direct-io/--buffered-io", "direct_io", default=None, help="embedded only: read with or without the OS page cache (restart); default as the server is")
@click.option("--reads", "single_reads", type=int, default=2000, show_default=True, help="random single-block reads for SREADTIM")
@click.option("--repeats", type=int, default=3, show_default=True, help="cold scans per measurement")
@click.option("--out", type=click.Path(path_type=Path), help="directory for the statistics (default results/sysstats-TIMESTAMP)")
@click.option("--device-twin", "device_twin", type=click.Choice(TWIN_MODES), default=None, envvar=TWIN_ENV_VAR, show_envvar=True,
              help="after measuring, fio reads what SREADTIM and MREADTIM read (same sizes, one at a time): the disk's "
                   "share of each (on, the default where fio is installed and the data is on this host; off: not)")
def sysstats_command(engine_kind, dsn, rows, apply_costs, allow_server_changes, direct_io, single_reads, repeats, out, device_twin) -> None:
    """Gather system statistics (SREADTIM, MREADTIM, MBRC, MAXTHR) on the engine's own
    data files, cold, and print the optimizer costs they imply (PostgreSQL: random_page_cost).

    \b
    Examples:
      blocklab sysstats
      blocklab sysstats --engine postgres --rows 300000
      blocklab sysstats --rows 300000 --direct-io
      blocklab sysstats --apply
      blocklab sysstats --dsn "host=db1 dbname=app user=dba" --apply --allow-server-changes
      blocklab sysstats --device-twin off      # no fio reads after the measurement
    """
    from .features.sysstats import SysstatsError, SysstatsInputError, run_sysstats

    console = make_console()
    if device_twin == "only":
        fail(console, "--device-twin only is for `blocklab run --resume DIR`; sysstats accepts off or on", EXIT_BAD_INPUT)
    status = console.status("starting", spinner="dots") if console.is_terminal else None

    class _Progress:
        def phase(self, text: str) -> None:
            if status is not None:
                status.update(text)

        def done(self, text: str) -> None:
            console.print(text, markup=False, highlight=False)

    try:
        if status is not None:
            status.start()
        try:
            result = run_sysstats(
                engine_kind=engine_kind, dsn=dsn, rows=rows, apply=apply_costs, allow_server_changes=allow_server_changes,
                direct_io=direct_io, single_reads=single_reads, repeats=repeats, out=out, reporter=_Progress(),
                device_twin=device_twin != "off",
            )
        finally:
            if status is not None:
                status.stop()
    except SysstatsInputError as err:
        fail(console, str(err), EXIT_BAD_INPUT)
    except (SysstatsError, EngineError) as err:
        fail(console, str(err), EXIT_FAILED)
    except KeyboardInterrupt:
        console.print("interrupted; nothing saved (the embedded server is stopped, no setting was changed)", markup=False)
        sys.exit(EXIT_INTERRUPTED)
    _print_sysstats(console, result)
    if result.applied is not None and not result.applied.confirmed:
        sys.exit(EXIT_FAILED)


def _print_sysstats(console: Console, result: SysstatsRun) -> None:
    from rich import box
    from rich.table import Table

    stats = result.stats
    table = Table(box=box.SIMPLE_HEAD, title="system statistics (aux_stats$)", title_justify="left", pad_edge=False)
    for column in ("SNAME", "PNAME", "PVAL1", "PVAL2", "unit"):
        table.add_column(column, justify="right" if column == "PVAL1" else "left", no_wrap=True)
    for row in stats.aux_stats():
        table.add_row(*row)
    console.print(table)
    console.print(f"measured {stats.conditions()}", markup=False, highlight=False)
    for line in stats.explanations():
        console.print(line, markup=False, highlight=False)
    for twin in result.device_twin:
        console.print(twin.line(), markup=False, highlight=False)
    if result.device_twin_note:
        console.print(f"device twin: off ({result.device_twin_note})", markup=False, highlight=False)
    for note in stats.notes:
        console.print(f"note: {note}", style="yellow", markup=False, highlight=False)
    console.print(f"The optimizer costs they imply: {stats.cost_formula}", markup=False, highlight=False)
    for line in result.sql:
        console.print(f"  {line}", markup=False, highlight=False)
    if result.applied is not None:
        a = result.applied
        changes = ", ".join(f"{k} {a.before.get(k)} -> {a.after.get(k)}" for k in a.asked)
        where = "the embedded server" if result.mode == "embedded" else "the --dsn server"
        if a.confirmed:
            console.print(f"applied on {where}: {changes} (read back from a new session)", style="green", markup=False, highlight=False)
        else:
            console.print(f"applied on {where}, but a new session still reads: {changes}", style="red", markup=False, highlight=False)
    else:
        console.print("not applied. To apply:", markup=False)
        for line in result.how_to_apply:
            console.print(f"  {line}", markup=False, highlight=False)
    console.print(f"saved: {result.run_dir}", markup=False, highlight=False)


@click.command("calibrate")
@_engine_option("the engine whose data directory's disk is measured when --dir is not given")
@click.option("--dir", "directory", type=click.Path(path_type=Path), help="directory on the disk to measure (default: the --engine's data directory)")
@click.option("--quick", is_flag=True, help="a small plan (8k and 1M reads, a few queue depths): about 15 s")
@click.option("--out", type=click.Path(path_type=Path), help="directory for the calibration (default results/calibrate-TIMESTAMP)")
def calibrate_command(engine_kind: str, directory: Path | None, quick: bool, out: Path | None) -> None:
    """Measure the disk's own limits with fio (max small-I/O IOPS, max large-I/O MB/s,
    min latency), ORION-style, for other runs' reports to draw as limits.

    \b
    Examples:
      blocklab calibrate
      blocklab calibrate --quick
      blocklab calibrate --engine mariadb --quick
      blocklab calibrate --dir /mnt/data --out results/disk-data
    """
    from .device.calibrate import make_plan, run_calibration
    from .device.fio import FioError, FioNotFound

    console = make_console()
    if directory is None:
        from .engines import make_engine
        from .engines.base import KnobError

        try:
            engine = make_engine(engine_kind)
        except KnobError as err:
            fail(console, f"--engine: {err}", EXIT_BAD_INPUT)
        try:
            engine.start()  # creates its data directory if needed, so its disk is the one measured
            data_dir = engine.data_dir()
            engine.stop()
        except EngineError as err:
            fail(console, f"{err}; give --dir PATH to measure another directory", EXIT_FAILED)
        if data_dir is None:
            fail(console, f"the {engine_kind} engine has no data directory on this host; give --dir PATH", EXIT_BAD_INPUT)
        directory = Path(data_dir)
    elif not directory.is_dir():
        what = "is not a directory" if directory.exists() else "does not exist"
        fail(console, f"--dir {directory} {what}; give an existing directory on the disk to measure", EXIT_BAD_INPUT)
    plan = make_plan("quick" if quick else "full")
    run_dir = RunDir(out) if out else new_run_dir(results_root(), "calibrate")
    console.print(
        f"calibrating {directory}: {len(plan.points)} points, about {plan.estimate_seconds():.0f} s "
        f"(+ laying out a {plan.file_size / 1024**2:.0f} MiB test file)",
        markup=False, highlight=False,
    )
    progress = None
    if console.is_terminal:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        progress = Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            TextColumn("ETA"), TimeRemainingColumn(), console=console,
        )
    task = None

    def on_point(index: int, total: int, description: str) -> None:
        nonlocal task
        if progress is None:
            console.print(f"[{index + 1}/{total}] {description}", markup=False, highlight=False)
            return
        if task is None:
            task = progress.add_task(description, total=total)
        progress.update(task, completed=index, description=description)

    try:
        if progress is not None:
            progress.start()
        try:
            cal = run_calibration(directory, plan, run_dir=run_dir, on_point=on_point)
            if progress is not None and task is not None:
                progress.update(task, completed=len(plan.points), description="done")
        finally:
            if progress is not None:
                progress.stop()
    except ValueError as err:
        text = str(err)
        if text.startswith("directory:"):
            text = "--dir" + text[len("directory:"):]
        elif text.startswith("run_dir:"):
            text = "--out" + text[len("run_dir:"):]
        fail(console, text, EXIT_BAD_INPUT)
    except (FioNotFound, FioError, OSError) as err:
        fail(console, str(err), EXIT_FAILED)
    except KeyboardInterrupt:
        console.print(f"interrupted; the test file is removed; points so far in {run_dir.path}", markup=False)
        sys.exit(EXIT_INTERRUPTED)
    for line in cal.summary.lines():
        console.print(line, markup=False, highlight=False)
    if cal.failures:
        console.print(f"{len(cal.failures)} point(s) failed: see {run_dir.file('results.jsonl')}", style="red", markup=False)
    console.print(f"saved: {run_dir.path}", markup=False, highlight=False)
