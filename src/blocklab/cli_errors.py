"""How a `blocklab` command fails: its exit codes and the one red error line.

Shared by cli.py and the command modules it adds (cli_server.py, cli_system.py,
cli_fleet.py, cli_import.py, cli_analyse.py),
which cannot import them from cli.py: cli.py imports those modules.
"""

from __future__ import annotations

import sys
from typing import NoReturn

from rich.console import Console

EXIT_BAD_INPUT = 2
EXIT_FAILED = 1
EXIT_INTERRUPTED = 130


def error_console(console: Console | None = None) -> Console:
    """A console on stderr: an error never lands in what a command writes to stdout
    (`blocklab export RUN > rows.csv` keeps the error off the file and on the terminal).
    Coloured only when stderr is a terminal; as wide as the command's own console."""
    tty = sys.stderr.isatty()
    width = (console.width if console is not None else None) if tty else 132
    return Console(stderr=True, no_color=not tty, highlight=False, force_terminal=tty or None, width=width, soft_wrap=not tty)


def print_error(console: Console | None, message: str) -> None:
    """One red line on stderr (more lines when the message holds several problems)."""
    error_console(console).print(message, style="red", markup=False, highlight=False)


def print_warning(console: Console | None, message: str) -> None:
    """A yellow line on stderr: said, but not the command's output."""
    error_console(console).print(message, style="yellow", markup=False, highlight=False)


def fail(console: Console | None, message: str, code: int) -> NoReturn:
    print_error(console, f"error: {message}")
    sys.exit(code)
