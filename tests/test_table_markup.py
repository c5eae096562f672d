"""User-given text in the CLI's rich tables is printed verbatim: a setting's value, a
host's name or a path holding '[...]' is not read as rich markup (where '[bold]' or
'[x]' would vanish)."""

from __future__ import annotations

import io

from rich.console import Console

from blocklab.cli_fleet import _print_status
from blocklab.report.console_tables import settings_table

ODD = ("sql.script=/data/[bold]q.sql", "sql.script=/data/[x]/q.sql", "sql.script=[red]")


def console() -> Console:
    return Console(file=io.StringIO(), width=400, color_system=None, force_terminal=False)


def printed(c: Console) -> str:
    out = c.file
    assert isinstance(out, io.StringIO)
    return out.getvalue()


def test_a_setting_with_brackets_is_printed_verbatim_in_the_run_summary():
    entry = {"n": 3, "median": 10.0, "ci_low": 9.0, "ci_high": 11.0, "ratio_to_best": 1.0, "ratio_to_best_ci_low": 0.9,
             "ratio_to_best_ci_high": 1.1, "standing": "as_good"}
    summary = {"metric": "score[x]", "goal": "max", "analysis": {"method": "median"}, "best_label": ODD[0],
               "settings": {label: entry for label in ODD} | {"sql.script=/data/none.sql": {}}}
    c = console()
    c.print(settings_table(summary, "", lambda label: label))
    text = printed(c)
    for label in ODD:
        assert label in text, (label, text)
    assert "score[x] per setting" in text and "[0.90, 1.10]" in text


def test_a_host_and_its_file_system_with_brackets_are_printed_verbatim_by_fleet_status():
    worker = {"name": "db-[x]", "address": "tcp://127.0.0.1:1", "hostname": "rack[bold]1", "device": "/dev/[red]sda",
              "file_system": "ext4", "disk": "d1", "engines": {}, "busy": ["run-[x] from here"]}
    c = console()
    _print_status(c, "tcp://127.0.0.1:8786", [worker])
    text = printed(c)
    for shown in ("db-[x]", "rack[bold]1", "/dev/[red]sda", "run-[x] from here"):
        assert shown in text, (shown, text)
