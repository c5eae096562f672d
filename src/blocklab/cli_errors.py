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


def fail(console: Console, message: str, code: int) -> NoReturn:
    console.print(f"error: {message}", style="red", markup=False, highlight=False)
    sys.exit(code)
