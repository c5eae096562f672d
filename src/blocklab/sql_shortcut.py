"""`blocklab run --script q.sql ...`: the experiment file the shortcut stands for.

The options become a TOML experiment of workload `sql` (kept in the results
directory as experiment.toml, like any experiment file), with the paths made
absolute so the run can be resumed from anywhere. The cache is `auto`: cold
where the engine can evict the user's own tables and prove it, else warm, and
the run says why (experiment.py resolve_cache).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from .errors import SpecError
from .workloads.pgscript import split_weight

DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|min|h)?\s*$")
UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, None: 1.0}


def parse_duration(text: str) -> float:
    """'10s', '500ms', '2m', '10' -> seconds; SpecError saying what is accepted."""
    m = DURATION.match(text)
    if not m or float(m.group(1)) <= 0:
        raise SpecError(f"--duration {text!r}: expected a positive duration such as 10s, 500ms, 2m or 1h")
    return float(m.group(1)) * UNIT_SECONDS[m.group(2)]


@dataclass
class ScriptRun:
    scripts: list[str]
    setup: str | None = None
    load: str | None = None
    sessions: int | None = None
    duration: str | None = None
    transactions: int | None = None
    variables: list[str] = field(default_factory=list)  # NAME=VALUE, as pgbench -D
    protocol: str | None = None  # simple | prepared, as pgbench -M (checked by the workload's options)

    def check(self) -> None:
        for text in [*self.scripts, self.setup, self.load]:
            if text is None:
                continue
            name, _ = split_weight(text)
            if not Path(name).is_file():
                raise SpecError(f"--script/--setup/--load {text!r}: no such file ({Path(name).absolute()})")
        if self.sessions is not None and not 1 <= self.sessions <= 256:
            raise SpecError(f"--sessions {self.sessions}: accepted: 1 to 256")
        if self.duration is not None and self.transactions is not None:
            raise SpecError("--duration and --transactions: give one of them (a time, or a count per session)")
        if self.transactions is not None and self.transactions < 1:
            raise SpecError(f"--transactions {self.transactions}: must be at least 1")

    def toml(self) -> str:
        """The experiment file these options stand for."""
        self.check()
        scripts = []
        for text in self.scripts:
            name, weight = split_weight(text)
            scripts.append(f"{Path(name).resolve()}@{weight}" if "@" in text else str(Path(name).resolve()))
        lines = ["# made by blocklab run --script (the shortcut's options as an experiment file)",
                 f"name = {json.dumps('sql-' + Path(split_weight(self.scripts[0])[0]).stem)}", "", "[workload]",
                 'kind = "sql"', f"script = {json.dumps(scripts)}"]
        for key, value in (("setup", self.setup), ("load", self.load)):
            if value is not None:
                lines.append(f"{key} = {json.dumps(str(Path(value).resolve()))}")
        if self.sessions is not None:
            lines.append(f"sessions = {self.sessions}")
        if self.duration is not None:
            lines.append(f"duration_s = {parse_duration(self.duration)}")
        if self.transactions is not None:
            lines.append(f"transactions = {self.transactions}")
        if self.protocol is not None:
            lines.append(f"protocol = {json.dumps(self.protocol)}")
        if self.variables:
            pairs = [_variable(v) for v in self.variables]
            lines.append("variables = { " + ", ".join(f"{k} = {v}" for k, v in pairs) + " }")
        lines += ["", "[measure]", 'cache = "auto"  # cold where your tables can be evicted here, else warm (said why)', ""]
        return "\n".join(lines)


def _variable(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name.strip()) or not re.fullmatch(r"-?\d+(\.\d+)?", value.strip()):
        raise SpecError(f"--define {text!r}: expected NAME=NUMBER (as pgbench -D scale=10)")
    return name.strip(), value.strip()
