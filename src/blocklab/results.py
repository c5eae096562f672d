"""Versioned result files: a run directory and the rows in it.

A run directory holds:
  experiment.toml    the experiment file as given (plus the overrides applied)
  spec.json          the validated spec the run used
  plan.json          the cells in order and the random seed
  environment.json   host, kernel, CPU, file system, device, engine version, full parameter set
  results.jsonl      one JSON line per finished cell, appended and flushed (format FORMAT)
  summary.json       the analysis, rewritten after cells (run_summary.summary_due) and at the end

Every line is complete or absent: a line is written with a single write() and
fsync'd, and a torn last line (a crash mid-write) is ignored on load.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .spec import Scalar

FORMAT = 1

EXPERIMENT_FILE = "experiment.toml"
SPEC_FILE = "spec.json"
PLAN_FILE = "plan.json"
ENVIRONMENT_FILE = "environment.json"
WORKLOAD_FILE = "workload.json"  # what a workload keeps for the report (workload sql: the scripts)
RESULTS_FILE = "results.jsonl"
SUMMARY_FILE = "summary.json"
RESTORE_FILE = "restore.json"  # a DSN server's original settings, while blocklab still owes their restore


class ResultsError(ValueError):
    """A run directory that cannot be read: says which file and why."""


class ResultsWriteError(RuntimeError):
    """A results file could not be written (a full disk, a read-only mount): names the
    path and why; nothing half-written is left behind."""

    def __init__(self, path: Path, err: OSError):
        free = _free_mb(path.parent)
        advice = f" ({free:,.0f} MB free there); free some space, then continue with --resume" if err.errno == errno.ENOSPC else ""
        super().__init__(f"cannot write {path}: {err.strerror or err}{advice}")
        self.path = path


@dataclass(frozen=True)
class ResultRow:
    """One measured cell. `settings` is what was asked, `applied` what the engine reported."""

    cell: int
    block: int
    settings: dict[str, Scalar]  # knob -> value (numbers, words, booleans)
    applied: dict[str, str]
    metrics: dict[str, float]
    status: str = "ok"  # "ok", or the error text
    cell_id: str = ""
    started: str = ""
    notes: dict[str, Any] = field(default_factory=dict)  # free-form per engine and workload; tune/ does arithmetic on its entries
    format: int = FORMAT
    source: str = ""  # "" for a cell blocklab measured; "import" for a row read from another tool's output
    # A point that runs for a duration may record its metrics second by second:
    # {"t": [seconds...], "<metric>": [value per second...]} (analysis/series.py).
    series: dict[str, list[float]] = field(default_factory=dict)
    host: str = ""  # "" for a local run; a fleet run's worker name (fleet/), the host that measured the cell

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def invalid(self) -> bool:
        """Measured, but a claim of the cell did not hold (claims.py): kept with its evidence, never counted."""
        return self.status.startswith("invalid:")

    @property
    def failed(self) -> bool:
        """The cell did not produce a measurement (an error, a refused setting, the engine's death)."""
        return not self.ok and not self.invalid

    @property
    def refused(self) -> bool:
        """The engine refused the cell's setting: the setting's own fault, not retried by --resume."""
        return self.status.startswith("refused:")

    def to_json(self) -> str:
        d: dict[str, object] = {
            "format": self.format,
            "cell": self.cell,
            "cell_id": self.cell_id,
            "block": self.block,
            "settings": self.settings,
            "applied": self.applied,
            "metrics": self.metrics,
            "status": self.status,
            "started": self.started,
            "notes": self.notes,
        }
        if self.source:  # only imported rows say where they came from; measured rows stay as they were
            d["source"] = self.source
        if self.series:  # only points that record one: other rows stay as they were
            d["series"] = self.series
        if self.host:  # only fleet rows name their host; a local run's rows stay as they were
            d["host"] = self.host
        return json.dumps(d, sort_keys=False, default=str)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ResultRow:
        fmt = d.get("format")
        if fmt != FORMAT:
            raise ResultsError(
                f"result row has format {fmt!r}; this blocklab reads format {FORMAT}: the run was written by "
                "another version of blocklab; read it with that version"
            )
        return cls(
            cell=int(d["cell"]),
            block=int(d["block"]),
            settings=dict(d["settings"]),
            applied=dict(d.get("applied", {})),
            metrics={k: float(v) for k, v in d.get("metrics", {}).items() if v is not None},
            status=str(d.get("status", "ok")),
            cell_id=str(d.get("cell_id", "")),
            started=str(d.get("started", "")),
            notes=dict(d.get("notes", {})),
            source=str(d.get("source", "")),
            series=_series(d.get("series"), d.get("cell_id") or d.get("cell")),
            host=str(d.get("host", "")),
        )


def _series(raw: Any, cell: Any) -> dict[str, list[float]]:
    if not raw:
        return {}
    try:
        return {str(k): [float(x) for x in v] for k, v in dict(raw).items()}
    except (TypeError, ValueError) as err:
        raise ResultsError(f"result row {cell}: 'series' must map names to lists of numbers ({err})") from None


class RunDir:
    """Reading and writing one run directory."""

    def __init__(self, path: Path | str):
        self.path = Path(path)
        self.torn_lines = 0

    def file(self, name: str) -> Path:
        return self.path / name

    # writing --------------------------------------------------------------
    def create(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)

    def write_json(self, name: str, data: object) -> None:
        write_atomic(self.file(name), (json.dumps(data, indent=2, default=str) + "\n").encode())

    def remove(self, name: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.file(name).unlink()

    def write_text(self, name: str, text: str) -> None:
        write_atomic(self.file(name), text.encode())

    def append(self, row: ResultRow) -> None:
        """One line, one write, flushed to disk: a crash loses at most the cell in flight."""
        path = self.file(RESULTS_FILE)
        try:
            append_line(path, (row.to_json() + "\n").encode())
        except OSError as err:
            raise ResultsWriteError(path, err) from None

    def set_aside_torn_lines(self) -> int:
        """Lines a crash cut off are moved, whole, to results.jsonl.torn (never deleted)
        and results.jsonl rewritten without them. Returns how many."""
        path = self.file(RESULTS_FILE)
        if not path.exists():
            return 0
        good, torn = [], []
        for line in path.read_bytes().split(b"\n"):
            if not line.strip():
                continue
            try:
                json.loads(line)
                good.append(line)
            except json.JSONDecodeError:
                torn.append(line)
        if torn:
            with open(self.file(RESULTS_FILE + ".torn"), "ab") as f:
                f.write(b"\n".join(torn) + b"\n")
                f.flush()
                os.fsync(f.fileno())
            write_atomic(path, b"\n".join(good) + b"\n" if good else b"")
        return len(torn)

    # reading --------------------------------------------------------------
    def exists(self) -> bool:
        return self.file(PLAN_FILE).exists()

    def read_json(self, name: str) -> Any:
        path = self.file(name)
        try:
            return json.loads(path.read_text())
        except FileNotFoundError:
            raise ResultsError(f"{path}: missing; is {self.path} a blocklab results directory?") from None
        except json.JSONDecodeError as err:
            raise ResultsError(f"{path}: not valid JSON ({err})") from None

    def rows(self) -> list[ResultRow]:
        return list(self.iter_rows())

    def iter_rows(self) -> Iterator[ResultRow]:
        path = self.file(RESULTS_FILE)
        if not path.exists():
            return
        with open(path, "rb") as f:
            lines = f.read().split(b"\n")
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
            except json.JSONDecodeError:
                # a line torn by a crash mid-write: the cell in flight, which
                # --resume sets aside and runs again. Counted, never fatal.
                self.torn_lines += 1
                continue
            try:
                yield ResultRow.from_dict(data)
            except ResultsError as err:
                raise ResultsError(f"{path}: line {number}: {err}") from None


def write_atomic(path: Path, data: bytes) -> None:
    """Write via a temporary file and rename, so readers never see half a file
    (a full disk leaves the old file as it was, and no temporary)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # two writers never share a temporary
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as err:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise ResultsWriteError(path, err) from None


def _free_mb(directory: Path) -> float:
    try:
        st = os.statvfs(directory)
    except OSError:
        return 0.0
    return st.f_bavail * st.f_frsize / 1e6


def append_line(path: Path, data: bytes) -> None:
    """Append one line (`data`, ending in a newline) in one write, fsync'd. A file that
    ends without a newline (a crash mid-line) gets one first, so the torn line and this
    one stay apart (a reader skips the torn one); a failed write leaves no part of the
    line behind. Raises OSError. results.jsonl and the device twin's twin.jsonl."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        _repair_torn_tail(fd, path)
        size = os.fstat(fd).st_size
        try:
            if os.write(fd, data) != len(data):  # a full disk can take part of a line
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            os.fsync(fd)
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, size)  # no torn line left behind: the line is whole or absent
            raise
    finally:
        os.close(fd)


def _repair_torn_tail(fd: int, path: Path) -> None:
    """If the file ends without a newline (a crash mid-line), start on a fresh line."""
    size = os.fstat(fd).st_size
    if size == 0:
        return
    with open(path, "rb") as f:
        f.seek(size - 1)
        if f.read(1) != b"\n":
            os.write(fd, b"\n")


def text_digest(text: str) -> str:
    """The experiment file's digest, kept with a run to tell a resumed run's file was not edited."""
    return hashlib.sha256(text.encode()).hexdigest()


def new_run_dir(root: Path, name: str) -> RunDir:
    """A new results directory under `root`: NAME-YYYYmmdd-HHMMSS (-2, -3, ... when taken)."""
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    path = root / f"{name}-{stamp}"
    n = 1
    while path.exists():
        n += 1
        path = root / f"{name}-{stamp}-{n}"
    return RunDir(path)
