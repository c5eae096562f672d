"""`blocklab analyse RUN_DIR`: summary.json recomputed from results.jsonl (report/reanalyse.py).

A module of its own so that cli.py gains one line, not a command's worth."""

from __future__ import annotations

from pathlib import Path

import click

from .cli_errors import EXIT_BAD_INPUT, fail
from .console import make_console
from .report.console_tables import explain_text


@click.command("analyse")
@click.argument("run_dir", metavar="RUN_DIR", type=click.Path(path_type=Path))
@click.option("--dry-run", is_flag=True, help="print the new verdict without rewriting summary.json")
@click.option("--explain", is_flag=True, help="after the verdict, print how it was judged (the report's 'How to read this')")
def analyse_command(run_dir: Path, dry_run: bool, explain: bool) -> None:
    """Recompute a run's verdict and intervals from its rows with today's statistics.

    For runs analysed by an older blocklab, imported runs, and runs whose
    results.jsonl was repaired: rewrites RUN_DIR/summary.json (within-block
    ratios, intervals adjusted for sequential stopping) and prints the verdict
    before and after. `blocklab report RUN_DIR` then draws the report from it.

    \b
    Examples:
      blocklab analyse results/mbrc-20261122-101500
      blocklab analyse results/mbrc-20261122-101500 --dry-run
      blocklab analyse results/mbrc-20261122-101500 --explain
      blocklab analyse results/mbrc-20261122-101500 && blocklab report results/mbrc-20261122-101500
    """
    from .report.reanalyse import AnalyseError, reanalyse

    console = make_console()
    try:
        result = reanalyse(run_dir, write=not dry_run)
    except AnalyseError as err:
        fail(console, str(err), EXIT_BAD_INPUT)

    def say(text: str) -> None:
        console.print(text, markup=False, highlight=False)

    summary = result.summary
    if result.previous_verdict is not None and result.previous_verdict != summary["verdict"]:
        version = f"statistics version {result.previous_version}" if result.previous_version else "older statistics"
        say(f"before ({version}): {result.previous_verdict}")
        say("")
    say(f"{'now' if result.previous_verdict is not None else 'verdict'}: {summary['verdict']}")
    if result.previous_verdict == summary["verdict"]:
        say("(unchanged)")
    if result.written:
        say(f"written: {run_dir / 'summary.json'}")
        say(f"report:  blocklab report {run_dir}")
    else:
        say("not written (--dry-run)")
    if explain:
        say(explain_text(summary))
