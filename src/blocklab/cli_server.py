"""The commands about a database server rather than a run:

    blocklab doctor [--dsn ...]       what runs on this server and why not (recipes, knobs, privileges)
    blocklab clean --dsn ...          remove what blocklab made on a server given by --dsn
    blocklab restore RUN_DIR          put back the settings a run still owes a --dsn server

The library side is doctor.py and lab.py (clean_server, restore_server).
"""

from __future__ import annotations

from pathlib import Path

import click

from .cli_errors import EXIT_BAD_INPUT, EXIT_FAILED, fail
from .console import make_console
from .engines import DEFAULT_ENGINE
from .engines import available as available_engines
from .engines.base import EngineError
from .results import ResultsError
from .spec import SpecError


@click.command("doctor")
@click.option("--engine", "engine_kind", default=DEFAULT_ENGINE, show_default=True, help=f"the engine ({', '.join(available_engines())})")
@click.option("--dsn", default=None, help="someone else's server (default: blocklab's own engine)")
@click.option("--allow-server-changes", is_flag=True, help="as run would be given it: server-wide knobs may be changed")
@click.option("--versions", "versions_only", is_flag=True, help="print only the table of every recipe on every kind of server (markdown), from the recipes; no server needed")
def doctor_command(engine_kind: str, dsn: str | None, allow_server_changes: bool, versions_only: bool) -> None:
    """What runs here and why not: every recipe (runs / runs adapted, how / refused, why
    and what would make it run), every generic knob, and the privileges blocklab has.
    Nothing is changed on the server.

    \b
    Examples:
      blocklab doctor
      blocklab doctor --dsn "host=db1 dbname=lab user=me"
      blocklab doctor --engine mariadb --dsn mysql://me@db1/blocklab --allow-server-changes
      blocklab doctor --versions > what-runs-where.md
    """
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    from .doctor import diagnose, version_table_markdown

    console = make_console()
    if versions_only:
        click.echo(version_table_markdown(), nl=False)
        return
    try:
        found = diagnose(engine_kind, dsn, allow_server_changes=allow_server_changes)
    except SpecError as err:
        fail(console, str(err), EXIT_BAD_INPUT)
    except EngineError as err:
        fail(console, str(err), EXIT_FAILED)
    console.print(f"{found.engine} {found.version} ({found.mode}): {found.server}", markup=False, highlight=False)
    table = Table(title="recipes (--quick) on this server", box=box.SIMPLE_HEAD, title_justify="left", pad_edge=False)
    for column in ("recipe", "here", "why / how"):
        table.add_column(column, overflow="fold")
    for name, _by_recipe, outcome in found.recipes:
        style = {"runs": "green", "runs adapted": "yellow", "refused": "red"}[outcome.status]
        table.add_row(name, outcome.status, escape("\n".join(outcome.why) or "-"), style=style)
    console.print(table)
    knobs = Table(title="generic knobs", box=box.SIMPLE_HEAD, title_justify="left", pad_edge=False)
    for column in ("knob", "native [how applied]", "here"):
        knobs.add_column(escape(column), overflow="fold")  # '[how applied]' is words, not a style
    for row in found.knobs:
        knobs.add_row(*(escape(cell) for cell in row))
    console.print(knobs)
    rights = Table(title="privileges and features", box=box.SIMPLE_HEAD, title_justify="left", pad_edge=False)
    rights.add_column("what")
    rights.add_column("here", overflow="fold")
    for what, here in found.privileges:
        rights.add_row(escape(what), escape(here))
    console.print(rights)


@click.command("clean")
@click.option("--engine", "engine_kind", default=DEFAULT_ENGINE, show_default=True, help=f"the server's engine ({', '.join(available_engines())})")
@click.option("--dsn", required=True, help="the server (password from the environment or the engine's own password file)")
@click.option("--dry-run", is_flag=True, help="list what would be removed, remove nothing")
def clean_command(engine_kind: str, dsn: str, dry_run: bool) -> None:
    """Remove what blocklab made on a server given by --dsn: its tables and procedures
    (PostgreSQL: blocklab_* and the tables carrying a blocklab data-set comment, in the
    DSN's database), or its own `blocklab` database (MariaDB).

    \b
    Examples:
      blocklab clean --dsn "host=db1 dbname=lab user=me" --dry-run
      blocklab clean --engine mariadb --dsn mysql://me@db1/blocklab
    """
    from .lab import clean_server

    console = make_console()
    try:
        done = clean_server(engine_kind, dsn, dry_run=dry_run)
    except SpecError as err:
        fail(console, str(err), EXIT_BAD_INPUT)
    except EngineError as err:
        fail(console, str(err), EXIT_BAD_INPUT if "cannot use" in str(err) else EXIT_FAILED)
    verb = "would remove" if dry_run else "removed"
    for line in done:
        console.print(f"{verb} {line}", markup=False, highlight=False)
    if not done:
        console.print("nothing of blocklab's on this server", markup=False)


@click.command("restore")
@click.argument("run_dir", metavar="RUN_DIR", type=click.Path(path_type=Path, file_okay=False))
def restore_command(run_dir: Path) -> None:
    """Put back the settings a run changed on a server given by --dsn, when the run
    could not (the server was gone when it ended). The password comes from the
    environment (PGPASSWORD, MYSQL_PWD) or the engine's own password file.

    \b
    Examples:
      blocklab restore results/writers-20261123-101500
    """
    from .lab import restore_server

    console = make_console()
    try:
        done = restore_server(run_dir)
    except (SpecError, ResultsError) as err:
        fail(console, str(err), EXIT_BAD_INPUT)
    except EngineError as err:
        fail(console, f"{err}; the settings are still kept in {run_dir}", EXIT_FAILED)
    if done is None:
        console.print(f"nothing to restore: {run_dir} owes no server any setting (no restore.json)", markup=False, highlight=False)
        return
    for line in done:
        console.print(f"restored {line}", markup=False, highlight=False)
