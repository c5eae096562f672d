"""The device twin: what the disk itself delivers for the I/O the engine issued.

During every cell the probe records the I/O pattern the engine issued
(`pattern.*` metrics, probes/io.py). After the run's cells, never between them,
fio replays each setting's pattern on a file of the same size on the same file
system: the twin. The engine's rate over the twin's is its efficiency
(analysis/efficiency.py): near 1 the disk is the limit, far below it the engine
is.

    patterns = setting_patterns(rows)          label -> Pattern, or why none (device/io_pattern.py)
    twins = measure(patterns, directory, ...)  fio, once per distinct pattern, cached per device (device/replay.py)
    measure_run(run_dir, mode)                 the whole step for a run directory: twin.json (here)

This module holds that last step: whether a twin can run at all, where its
files go, and twin.json, the record of a run's twins that the report and the
efficiency analysis read back.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..jsonvalue import as_number
from ..probes.os_stats import device_of
from ..results import ENVIRONMENT_FILE, RunDir
from .fio import FioNotFound
from .interleave import BesideCells, ReplayRecord, load_replays, replay_run
from .io_pattern import Pattern, setting_patterns
from .replay import FioRun, Measured, OnPhase, Twin, TwinCache, fio_version_or_empty, measure, twin_directory, utc_now

TWIN_FILE = "twin.json"
TWIN_FORMAT = 1
MODES = ("off", "on", "only")
ENV_VAR = "BLOCKLAB_DEVICE_TWIN"  # the default of `blocklab run --device-twin`


# ====================================================================== where and whether
# ====================================================================== a run's twins
@dataclass
class RunTwins:
    """What twin.json of a run holds."""

    mode: str
    status: str  # "measured" | "off" | "failed"
    reason: str = ""
    device: str = ""
    directory: str = ""
    fio_version: str = ""
    cache: str = ""
    twins: dict[str, Twin] = field(default_factory=dict)
    cached: list[str] = field(default_factory=list)
    failures: dict[str, str] = field(default_factory=dict)
    patterns: dict[str, str] = field(default_factory=dict)  # setting label -> pattern key, or "-" + why none
    seconds: float = 0.0
    finished: str = ""
    # the replays ran beside their cells (twin.jsonl, device/interleave.py), not after the run;
    # `twins` then holds each pattern's median over its replays
    interleaved: bool = False
    replays: int = 0

    def to_dict(self) -> dict[str, object]:
        d = asdict(self)
        d["format"] = TWIN_FORMAT
        d["twins"] = {k: t.to_dict() for k, t in self.twins.items()}
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RunTwins:
        return cls(
            mode=str(d.get("mode", "")), status=str(d.get("status", "")), reason=str(d.get("reason", "")),
            device=str(d.get("device", "")), directory=str(d.get("directory", "")),
            fio_version=str(d.get("fio_version", "")), cache=str(d.get("cache", "")),
            twins={k: Twin.from_dict(t) for k, t in (d.get("twins") or {}).items()},
            cached=list(d.get("cached") or []), failures=dict(d.get("failures") or {}),
            patterns=dict(d.get("patterns") or {}), seconds=float(d.get("seconds") or 0.0),
            finished=str(d.get("finished", "")), interleaved=bool(d.get("interleaved", False)),
            replays=int(d.get("replays") or 0),
        )

    def summary_line(self) -> str:
        if self.status != "measured":
            return f"device twin: {self.status}: {self.reason}" if self.reason else f"device twin: {self.status}"
        if self.interleaved:
            text = (f"device twin: {self.replays} replay(s) beside their cells on {self.device} ({self.seconds:.0f} s), "
                    f"{len(self.twins)} pattern(s)")
            if self.failures:
                text += f"; {len(self.failures)} failed: " + "; ".join(f"{k}: {v}" for k, v in list(self.failures.items())[:3])
            return text
        new = len(self.twins) - len(self.cached)
        text = (f"device twin: {len(self.twins)} pattern(s) on {self.device}, {new} measured now "
                f"({self.seconds:.0f} s), {len(self.cached)} from the cache {self.cache}")
        if self.failures:
            text += f"; {len(self.failures)} failed: " + "; ".join(f"{k}: {v}" for k, v in self.failures.items())
        return text


def load(run_dir: RunDir | Path | str) -> RunTwins | None:
    """A run's twin.json, or None when it has none (or it cannot be read: the
    efficiency is then left out, the rest of the report stands)."""
    path = (run_dir.path if isinstance(run_dir, RunDir) else Path(run_dir)) / TWIN_FILE
    try:
        d = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(d, dict) or d.get("format") != TWIN_FORMAT:
        return None
    try:
        return RunTwins.from_dict(d)
    except (KeyError, TypeError, ValueError):
        return None


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise ValueError(f"--device-twin {mode!r} is not accepted; accepted: {', '.join(MODES)}")
    return mode


def why_not(data_dir: str | None) -> str | None:
    """Why no twin can run for an engine whose data lives in `data_dir` (None: it can)."""
    if not data_dir:
        return ("the engine's data is not on this host (a server reached by --dsn, or results imported from "
                "elsewhere): fio cannot reach its disk")
    if shutil.which("fio") is None:
        return "fio is not installed (apt-get install fio)"
    if not Path(data_dir).is_dir():
        return f"the data directory {data_dir} does not exist any more"
    return None


def measure_run(
    run_dir: RunDir,
    mode: str,
    *,
    cache_root: Path | None = None,
    on_phase: OnPhase | None = None,
) -> RunTwins:
    """The device twin of a run's cells: each setting's pattern replayed (or taken
    from the cache), twin.json written. Reads only the run directory (the rows and
    environment.json's data_dir), so it works after the engine has stopped and on
    a run measured earlier. `mode` "off" writes why there is none."""
    from ..paths import cache_root as default_cache_root

    check_mode(mode)
    env = run_dir.read_json(ENVIRONMENT_FILE) if run_dir.file(ENVIRONMENT_FILE).exists() else {}
    data_dir = env.get("data_dir")
    patterns = setting_patterns(run_dir.rows())
    labels = {label: p.key if isinstance(p, Pattern) else f"-{p}" for label, p in patterns.items()}
    if mode == "off":
        result = RunTwins(mode, "off", "--device-twin off", patterns=labels)
    elif (reason := why_not(data_dir)) is not None:
        result = RunTwins(mode, "off", reason, patterns=labels)
    else:
        assert data_dir is not None
        directory = twin_directory(data_dir)
        device = device_of(data_dir).name
        cache = TwinCache(cache_root or default_cache_root(), device)
        wanted = [p for p in patterns.values() if isinstance(p, Pattern)]
        try:
            got = measure(wanted, directory, cache, on_phase=on_phase)
            status, reason = "measured", ""
        except FioNotFound as err:
            got, status, reason = Measured(), "off", str(err)
        result = RunTwins(
            mode, status, reason, device=device, directory=str(directory), fio_version=fio_version_or_empty(),
            cache=str(cache.path), twins=got.twins, cached=sorted(got.cached), failures=got.failures,
            patterns=labels, seconds=round(got.seconds, 2), finished=utc_now(),
        )
        if wanted and not got.twins:
            result.status = "failed"
            result.reason = "no pattern could be replayed: " + "; ".join(got.failures.values())
    run_dir.write_json(TWIN_FILE, result.to_dict())
    return result


def write_interleaved(run_dir: RunDir, beside: BesideCells) -> RunTwins:
    """twin.json of a run whose twin ran beside its cells: every replay of twin.jsonl
    (a resumed run's earlier ones too), each pattern's median over its replays."""
    from .replay import median_twin

    replays = load_replays(run_dir)
    runs: dict[str, list[FioRun]] = {}
    first: dict[str, ReplayRecord] = {}
    failures: dict[str, str] = {}
    for r in replays:
        run = replay_run(r)
        if run is None:
            failures[str(r.get("cell_id"))] = str(r.get("error") or "no result")
            continue
        runs.setdefault(str(r["key"]), []).append(run)
        first.setdefault(str(r["key"]), r)
    twins = {
        key: median_twin(Pattern.from_dict(first[key]["pattern"]), got, fio_version=beside.version,
                          ioengine=beside.ioengine, command=str(first[key].get("command", "")),
                          measured=str(first[key].get("started", "")), device=beside.device, directory=str(beside.directory))
        for key, got in runs.items()
    }
    patterns = setting_patterns(run_dir.rows())
    result = RunTwins(
        "on", "measured" if twins or not replays else "failed", "" if twins or not replays else "no replay succeeded",
        device=beside.device, directory=str(beside.directory), fio_version=beside.version, twins=twins,
        failures=failures, patterns={label: p.key if isinstance(p, Pattern) else f"-{p}" for label, p in patterns.items()},
        seconds=round(sum(as_number(r.get("wall_s")) for r in replays), 2), finished=utc_now(),
        interleaved=True, replays=len(replays),
    )
    run_dir.write_json(TWIN_FILE, result.to_dict())
    return result


__all__ = [
    "ENV_VAR",
    "MODES",
    "TWIN_FILE",
    "RunTwins",
    "check_mode",
    "load",
    "measure_run",
    "why_not",
    "write_interleaved",
]
