"""The device twin inside the blocks (issue 26): each cell's I/O replayed by fio
right after the cell, in the plan's randomised order, for as long as the cell's
workload ran.

A twin measured after all the cells met the disk in another state than the
cells did (the disk's and the hypervisor's caches, the neighbours' load drift
over a run), and its three half-second runs at one average depth were not the
cell's I/O either: an efficiency could read "106% [104, 107]". Beside the cell,
the replay meets the disk as the cell did, and each block holds one cell and
its replay per setting, so a setting's efficiency is paired per block like
every other comparison (analysis/efficiency.py).

    beside = BesideCells.open(run_dir, data_dir)   fio found, its files' directory chosen
    row = beside.after(row)                         the row's own pattern replayed; notes say how long
    beside.close()                                  the test files removed (also after Ctrl-C)
    load_replays(run_dir)                           twin.jsonl: one line a replay, in the order run

The cell and its replay run one after the other, never together: fio never
disturbs a cell (issue 19). The engine is idle while fio runs.
"""

from __future__ import annotations

import dataclasses
import json
import math
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NotRequired, TypedDict, TypeGuard

from ..probes.os_stats import device_of
from ..results import ResultRow, RunDir, append_line
from .calibrate import choose_ioengine
from .fio import FioError, find_fio, fio_version, run_fio
from .io_pattern import Pattern, pattern_of
from .replay import FioRun, fio_args, lay_out, utc_now

if TYPE_CHECKING:
    from ..spec import Scalar

REPLAY_FILE = "twin.jsonl"
MIN_REPLAY_S = 0.1  # fio's own start-up dominates below this
TWIN_SECONDS_NOTE = "twin_s"  # a row's notes: the wall time of the replay beside it


class ReplayRecord(TypedDict):
    """One line of twin.jsonl: the replay beside a cell, its fio figures (`run`) or why it failed (`error`)."""

    cell_id: str
    block: int
    cell: int
    attempt: int
    settings: dict[str, Scalar]
    pattern: dict[str, object]
    key: str
    seconds: float
    started: str
    fio_version: str
    device: str
    directory: str
    command: NotRequired[str]
    run: NotRequired[dict[str, float | None]]
    error: NotRequired[str]
    wall_s: NotRequired[float]


@dataclass
class BesideCells:
    """fio ready to replay cells on the engine's file system; the files it laid out."""

    run_dir: RunDir
    fio: str
    version: str
    ioengine: str
    directory: Path
    device: str
    files: dict[int, Path] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)  # cell id -> why its replay failed

    @classmethod
    def open(cls, run_dir: RunDir, data_dir: str) -> BesideCells:
        """Raises FioNotFound without fio (the caller says why the twin is off)."""
        from .replay import twin_directory

        fio = find_fio()
        ioengine, _ = choose_ioengine(fio, None)
        directory = twin_directory(data_dir)
        return cls(run_dir, fio, fio_version(fio), ioengine, directory, device_of(data_dir).name)

    def after(self, row: ResultRow, say: Callable[[str], None] | None = None) -> tuple[ResultRow, ReplayRecord | None]:
        """Replay `row`'s own I/O pattern for as long as its workload ran: the row with
        the replay's seconds in its notes, and the replay's record for `keep` (after
        the row is kept). A row that is not ok or has no pattern is returned as it is,
        with no record."""
        if not row.ok:
            return row, None
        p = pattern_of(row.metrics)
        if not isinstance(p, Pattern):
            return row, None
        seconds = max(MIN_REPLAY_S, float(row.metrics.get("pattern.seconds") or row.metrics.get("elapsed_s") or 0.0))
        t0 = time.perf_counter()
        record = self._replay(row, p, seconds)
        spent = round(time.perf_counter() - t0, 3)
        record["wall_s"] = spent
        if record.get("error") and say is not None:
            say(f"device twin: the replay beside {row.cell_id} failed: {record['error']}")
        notes = {**row.notes, TWIN_SECONDS_NOTE: spent}
        return dataclasses.replace(row, notes=notes), record

    def keep(self, record: ReplayRecord | None) -> None:
        """Append a replay to twin.jsonl (after its row is in results.jsonl), fsync'd; a line
        a crash cut off before it stays apart from it (results.append_line)."""
        if record is None:
            return
        append_line(self.run_dir.file(REPLAY_FILE), (json.dumps(record) + "\n").encode())

    def _replay(self, row: ResultRow, p: Pattern, seconds: float) -> ReplayRecord:
        record: ReplayRecord = {
            "cell_id": row.cell_id, "block": row.block, "cell": row.cell, "attempt": int(row.notes.get("attempt", 1)),
            "settings": row.settings, "pattern": p.to_dict(), "key": p.key, "seconds": round(seconds, 3),
            "started": utc_now(), "fio_version": self.version, "device": self.device, "directory": str(self.directory),
        }
        try:
            if p.file_size not in self.files:
                lay_out(self.fio, self.directory, p.file_size, self.files)
            args = fio_args(p, self.files[p.file_size], self.ioengine, runtime_s=seconds, ramp_s=0.0)
            record["command"] = shlex.join([self.fio, "--output-format=json", *args])
            timeout = seconds + 60 + (p.file_size / 50e6 if not p.direct else 0)
            record["run"] = dataclasses.asdict(FioRun.from_json(run_fio(self.fio, args, timeout=timeout)))
            record["run"] = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in record["run"].items()}
        except (FioError, OSError, ValueError) as err:
            record["error"] = str(err).splitlines()[0][:300] if str(err) else type(err).__name__
            self.failures[row.cell_id] = record["error"]
        return record

    def close(self) -> None:
        for f in self.files.values():
            f.unlink(missing_ok=True)
        self.files.clear()


def load_replays(run_dir: RunDir | Path | str) -> list[ReplayRecord]:
    """twin.jsonl of a run: the replays beside its cells, in the order run ([] when none)."""
    path = (run_dir.path if isinstance(run_dir, RunDir) else Path(run_dir)) / REPLAY_FILE
    try:
        text = path.read_text()
    except OSError:
        return []
    out: list[ReplayRecord] = []
    for line in text.splitlines():
        try:
            d = json.loads(line)
        except ValueError:
            continue  # a line cut off by a crash
        if _is_replay(d):
            out.append(d)
    return out


def _is_replay(d: object) -> TypeGuard[ReplayRecord]:
    """A twin.jsonl line blocklab wrote (a JSON object naming its cell)."""
    return isinstance(d, dict) and "cell_id" in d


def replay_run(record: ReplayRecord) -> FioRun | None:
    """The fio figures of one replay, None when it failed."""
    run = record.get("run")
    if not isinstance(run, dict):
        return None
    return FioRun(**{k: math.nan if v is None else float(v) for k, v in run.items()})


__all__ = ["REPLAY_FILE", "TWIN_SECONDS_NOTE", "BesideCells", "load_replays", "replay_run"]
