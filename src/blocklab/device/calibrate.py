"""Device calibration with fio: the device's own limits (blocklab's ORION / CALIBRATE_IO).

A calibration lays out one test file in a directory (by default the engine's
data directory, so the limits are those of the disk the engine really uses),
reads it with direct I/O at a grid of block sizes and queue depths, and
removes the file again, also on error and on Ctrl-C/SIGTERM. The result is a
run directory like any other (results.jsonl, one row per point) plus
calibration.json, the ORION-like summary other runs' reports draw as limits.

Units: block sizes in bytes, MB/s = 1e6 bytes/s (as in the rest of blocklab),
latencies in milliseconds (fio's completion latency, clat).
"""

from __future__ import annotations

import datetime as dt
import errno
import json
import os
import secrets
import shutil
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from types import FrameType
from typing import Any

from ..environment import collect as collect_environment
from ..probes.os_stats import device_of
from ..results import ENVIRONMENT_FILE, PLAN_FILE, RESULTS_FILE, ResultRow, ResultsError, RunDir
from ..units import short_size
from .calibration_plan import SECTOR, CalibrationPlan, GiB, KiB, MiB, PlannedPoint, make_plan
from .fio import (
    FioError,
    Point,
    describe,
    engine_available,
    find_fio,
    fio_version,
    parse_read,
    run_fio,
)

CALIBRATION_FILE = "calibration.json"
CALIBRATION_FORMAT = 1

SMALL_MAX = 32 * KiB  # "small I/O": what an OLTP engine reads, one block at a time
LARGE_MIN = 128 * KiB  # "large I/O": multiblock reads, scans
FREE_SPACE_RESERVE = 64 * MiB  # never fill the disk to the last byte
ENGINES = ("libaio", "psync")
ASYNC_ENGINES = ("libaio",)

OnPoint = Callable[[int, int, str], None]


# ====================================================================== summary
@dataclass(frozen=True)
class Limit:
    """One of the device's limits and the point where it was reached."""

    value: float
    unit: str
    pattern: str
    block_size: int
    iodepth: int

    def describe(self) -> str:
        digits = 3 if self.unit == "ms" else 0
        return f"{self.value:,.{digits}f} {self.unit} at {describe(self.pattern, self.block_size, self.iodepth)}"

    def to_dict(self) -> dict[str, object]:
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> Limit | None:
        if d is None:
            return None
        return cls(float(d["value"]), str(d["unit"]), str(d["pattern"]), int(d["block_size"]), int(d["iodepth"]))


@dataclass(frozen=True)
class Summary:
    """ORION's three numbers: max small-I/O IOPS, max large-I/O MB/s, min small-I/O latency at qd1."""

    max_small_iops: Limit | None
    max_large_mb_per_s: Limit | None
    min_small_latency_ms: Limit | None

    def lines(self) -> list[str]:
        names = (
            ("Maximum small-I/O IOPS", self.max_small_iops),
            ("Maximum large-I/O MB/s", self.max_large_mb_per_s),
            ("Minimum small-I/O latency (mean, qd1)", self.min_small_latency_ms),
        )
        return [f"{name}: {limit.describe() if limit else 'not measured'}" for name, limit in names]

    def to_dict(self) -> dict[str, object]:
        return {k: (v.to_dict() if v else None) for k, v in self.__dict__.items()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Summary:
        keys = ("max_small_iops", "max_large_mb_per_s", "min_small_latency_ms")
        return cls(*(Limit.from_dict(d.get(k)) for k in keys))


def summarise(points: Sequence[Point]) -> Summary:
    """Small I/O is <= 32k, large >= 128k; ties go to the earlier point."""
    small = [p for p in points if p.block_size <= SMALL_MAX]
    large = [p for p in points if p.block_size >= LARGE_MIN]
    small_qd1 = [p for p in small if p.iodepth == 1]
    return Summary(
        max_small_iops=_limit(small, "iops", "IOPS", max),
        max_large_mb_per_s=_limit(large, "mb_per_s", "MB/s", max),
        min_small_latency_ms=_limit(small_qd1, "lat_mean_ms", "ms", min),
    )


def _limit(points: Sequence[Point], metric: str, unit: str, best: Callable) -> Limit | None:
    if not points:
        return None
    p = best(points, key=lambda p: getattr(p, metric))
    return Limit(getattr(p, metric), unit, p.pattern, p.block_size, p.iodepth)


# ====================================================================== calibration
@dataclass(frozen=True)
class Calibration:
    directory: str
    device: dict[str, object]  # name, major, minor, mount_point, fs_type, model, rotational
    ioengine: str
    ioengine_note: str
    fio_version: str
    plan: dict[str, Any]
    points: tuple[Point, ...]
    failures: tuple[dict[str, Any], ...] = ()  # planned point settings + "error"
    started: str = ""
    finished: str = ""
    complete: bool = True
    layout_mb_per_s: float | None = None
    format: int = CALIBRATION_FORMAT

    @property
    def device_name(self) -> str:
        return str(self.device.get("name", ""))

    @property
    def summary(self) -> Summary:
        return summarise(self.points)

    def to_dict(self) -> dict[str, object]:
        """calibration.json; the points themselves live in results.jsonl, one row each."""
        d = {k: v for k, v in self.__dict__.items() if k != "points"}
        d["failures"] = list(self.failures)
        d["summary"] = self.summary.to_dict()
        d["summary_text"] = self.summary.lines()
        return d


def run_calibration(
    directory: str | Path,
    plan: CalibrationPlan | None = None,
    *,
    run_dir: RunDir | Path | str | None = None,
    on_point: OnPoint | None = None,
    ioengine: str | None = None,
) -> Calibration:
    """Measure the device under `directory` with fio; save into `run_dir` as it goes, if given.

    `on_point(index, total, description)` is called before each point, index
    counting from 0 (the number of points already done). `ioengine` None means
    libaio, or psync where libaio is unavailable. A failed point is recorded
    (row status, Calibration.failures) and the rest go on. Raises ValueError for
    bad inputs and FioNotFound without fio, both before fio runs."""
    plan = plan or make_plan()
    path = check_directory(directory, plan.file_size)
    if ioengine is not None and ioengine not in ENGINES:
        raise ValueError(f"ioengine: {ioengine!r} is not accepted; accepted: {', '.join(ENGINES)} (or None: automatic)")
    fio = find_fio()
    engine, note = choose_ioengine(fio, ioengine)
    rd = RunDir(run_dir) if isinstance(run_dir, (str, Path)) else run_dir
    if rd is not None:
        _check_new(rd)
    test_file = path / f".blocklab-calibrate-{os.getpid()}-{secrets.token_hex(4)}.fio"
    with _sigterm_as_interrupt(), _removed_afterwards(test_file):
        _create_direct(test_file)
        engine, note, layout_mb_per_s = lay_out(fio, test_file, plan, engine, note, automatic=ioengine is None)
        cal = Calibration(
            directory=str(path),
            device=device_of(path).to_dict(),
            ioengine=engine,
            ioengine_note=note,
            fio_version=fio_version(fio),
            plan=plan.to_dict(),
            points=(),
            started=_now(),
            complete=False,
            layout_mb_per_s=layout_mb_per_s,
        )
        if rd is not None:
            _begin(rd, cal)
        return _measure(fio, test_file, plan, cal, rd, on_point)


def _measure(
    fio: str, test_file: Path, plan: CalibrationPlan, cal: Calibration, rd: RunDir | None, on_point: OnPoint | None
) -> Calibration:
    points: list[Point] = []
    failures: list[dict[str, object]] = []
    for index, planned in enumerate(plan.points):
        if on_point is not None:
            on_point(index, len(plan.points), planned.description)
        started = _now()
        try:
            # the timeout only catches a hung fio; a point normally takes runtime + ramp
            timeout = plan.runtime_s + plan.ramp_s + 60
            data = run_fio(fio, point_args(test_file, plan, planned, cal.ioengine), timeout=timeout)
            point = parse_read(data, planned.pattern)
            points.append(point)
            result: Point | str = point
        except FioError as err:
            result = str(err)
            failures.append({**planned.settings(), "error": result})
        cal = _replace(cal, points=tuple(points), failures=tuple(failures))
        if rd is not None:
            rd.append(_row(index, planned, result, cal.ioengine, started))
            rd.write_json(CALIBRATION_FILE, cal.to_dict())  # rewritten each point: a crash leaves a valid file
    cal = _replace(cal, finished=_now(), complete=True)
    if rd is not None:
        rd.write_json(CALIBRATION_FILE, cal.to_dict())
    return cal


# ---------------------------------------------------------------------- checks
def check_directory(directory: str | Path, file_size: int) -> Path:
    """The directory, resolved; ValueError if it is missing or has no room for the test file."""
    path = Path(directory).expanduser()
    if not path.is_dir():
        what = "is not a directory" if path.exists() else "does not exist"
        raise ValueError(f"directory: {str(directory)!r} {what}; give an existing directory on the disk to measure")
    free = shutil.disk_usage(path).free
    if free < file_size + FREE_SPACE_RESERVE:
        raise ValueError(
            f"file_size: the test file needs {short_size(file_size)} (+{short_size(FREE_SPACE_RESERVE)} reserve) "
            f"but {path} has only {free / GiB:.2f} GiB free; give a smaller file_size or another directory"
        )
    return path.resolve()


def _create_direct(test_file: Path) -> None:
    """Create the test file with O_DIRECT, so a file system without direct I/O fails here, clearly."""
    try:
        fd = os.open(test_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_DIRECT, 0o600)
    except OSError as err:
        if err.errno == errno.EINVAL:
            raise ValueError(
                f"directory: the file system of {test_file.parent} does not support direct I/O (O_DIRECT); "
                "give a directory on a disk file system such as ext4 or xfs"
            ) from None
        raise ValueError(f"directory: cannot create a test file in {test_file.parent}: {err.strerror}") from None
    os.close(fd)


def choose_ioengine(fio: str, requested: str | None) -> tuple[str, str]:
    """(engine, note): libaio when fio has it, else psync; the note says why, for the record."""
    if requested is not None:
        return requested, "requested"
    if engine_available(fio, "libaio"):
        return "libaio", "automatic: libaio available"
    return "psync", "automatic: libaio not available in this fio; queue depth emulated with numjobs"


# ---------------------------------------------------------------------- fio arguments
def point_args(test_file: Path, plan: CalibrationPlan, point: PlannedPoint, engine: str) -> list[str]:
    args = [
        f"--name={point.description.replace(' ', '-')}",
        f"--filename={test_file}",
        f"--size={plan.file_size}",
        "--direct=1",
        f"--ioengine={engine}",
        f"--rw={'randread' if point.pattern == 'rand' else 'read'}",
        f"--bs={point.block_size}",
        "--time_based",
        f"--runtime={max(1, round(plan.runtime_s * 1000))}ms",
        f"--ramp_time={round(plan.ramp_s * 1000)}ms",
        # fresh random offsets each run, no bookkeeping of which blocks were read
        "--randrepeat=0",
        "--norandommap",
        "--group_reporting",
    ]
    return args + _concurrency_args(plan, point, engine)


def _concurrency_args(plan: CalibrationPlan, point: PlannedPoint, engine: str) -> list[str]:
    if engine in ASYNC_ENGINES or point.iodepth == 1:
        return [f"--iodepth={point.iodepth}"]
    # a sync engine has one I/O in flight per job: the queue depth becomes jobs
    args = ["--iodepth=1", f"--numjobs={point.iodepth}"]
    if point.pattern == "seq":
        # each sequential job streams its own slice instead of all re-reading the start
        slice_ = plan.file_size // point.iodepth // SECTOR * SECTOR
        args += [f"--size={slice_}", f"--offset_increment={slice_}"] if slice_ >= point.block_size else []
    return args


def lay_out(
    fio: str, test_file: Path, plan: CalibrationPlan, engine: str, note: str, automatic: bool
) -> tuple[str, str, float]:
    """Write the test file once (reads of a sparse file would not touch the disk); returns
    (engine, note, write MB/s). An automatic libaio that fails here falls back to psync."""
    try:
        return engine, note, _write_file(fio, test_file, plan.file_size, engine)
    except FioError as err:
        if not (automatic and engine != "psync"):
            raise
        note = f"automatic: {engine} failed ({str(err).splitlines()[0][:200]}); using psync"
        return "psync", note, _write_file(fio, test_file, plan.file_size, "psync")


def _write_file(fio: str, test_file: Path, size: int, engine: str) -> float:
    data = run_fio(
        fio,
        [
            "--name=layout",
            f"--filename={test_file}",
            f"--size={size}",
            "--direct=1",
            f"--ioengine={engine}",
            "--rw=write",
            "--bs=1M",
            "--iodepth=8",
            "--end_fsync=1",
        ],
    )
    return float(data["jobs"][0]["write"]["bw_bytes"]) / 1e6


# ---------------------------------------------------------------------- clean-up
@contextmanager
def _removed_afterwards(path: Path) -> Iterator[None]:
    try:
        yield
    finally:
        path.unlink(missing_ok=True)


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM unwinds like Ctrl-C, so the test file is removed either way (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


# ====================================================================== saving and loading
def save_calibration(cal: Calibration, run_dir: RunDir | Path | str) -> RunDir:
    """Write a finished calibration as a run directory (rows, calibration.json, environment.json)."""
    rd = RunDir(run_dir) if isinstance(run_dir, (str, Path)) else run_dir
    _begin(rd, cal)
    outcomes: list[tuple[PlannedPoint, Point | str]] = [
        (PlannedPoint(p.pattern, p.block_size, p.iodepth), p) for p in cal.points
    ]
    outcomes += [
        (PlannedPoint(f["pattern"], int(f["block_size"]), int(f["iodepth"])), str(f["error"])) for f in cal.failures
    ]
    for index, (planned, result) in enumerate(outcomes):
        rd.append(_row(index, planned, result, cal.ioengine, cal.started))
    rd.write_json(CALIBRATION_FILE, cal.to_dict())
    return rd


def _check_new(rd: RunDir) -> None:
    if rd.file(RESULTS_FILE).exists() or rd.file(PLAN_FILE).exists():
        raise ValueError(f"run_dir: {rd.path} already holds a run; give a new directory")


def _begin(rd: RunDir, cal: Calibration) -> None:
    _check_new(rd)
    rd.create()
    env = collect_environment(
        None,
        cal.directory,
        {
            "kind": "calibration",
            "fio_version": cal.fio_version,
            "ioengine": cal.ioengine,
            "ioengine_note": cal.ioengine_note,
        },
    )
    rd.write_json(ENVIRONMENT_FILE, env)
    points = cal.plan["points"]
    cells = [{"index": i, "block": 0, "cell_id": describe(**p), "settings": p} for i, p in enumerate(points)]
    rd.write_json(PLAN_FILE, {"seed": 0, "kind": "calibration", **cal.plan, "cells": cells})
    rd.write_json(CALIBRATION_FILE, cal.to_dict())


def _row(index: int, planned: PlannedPoint, result: Point | str, engine: str, started: str) -> ResultRow:
    settings = planned.settings()
    return ResultRow(
        cell=index,
        block=0,
        settings=settings,
        applied={k: str(v) for k, v in settings.items()},
        metrics=result.metrics() if isinstance(result, Point) else {},
        status="ok" if isinstance(result, Point) else result,
        cell_id=planned.description,
        started=started,
        notes={"ioengine": engine},
    )


def load_calibration(run_dir: RunDir | Path | str) -> Calibration:
    """A calibration run directory -> Calibration; ResultsError if it is not one."""
    rd = RunDir(run_dir) if isinstance(run_dir, (str, Path)) else run_dir
    d = rd.read_json(CALIBRATION_FILE)
    if d.get("format") != CALIBRATION_FORMAT:
        raise ResultsError(
            f"{rd.file(CALIBRATION_FILE)}: format {d.get('format')!r}; this blocklab reads {CALIBRATION_FORMAT}"
        )
    rows = sorted(rd.rows(), key=lambda r: r.cell)
    points = tuple(Point.from_dict({**r.settings, **r.metrics}) for r in rows if r.ok)
    return Calibration(
        directory=str(d["directory"]),
        device=dict(d["device"]),
        ioengine=str(d["ioengine"]),
        ioengine_note=str(d.get("ioengine_note", "")),
        fio_version=str(d.get("fio_version", "")),
        plan=dict(d["plan"]),
        points=points,
        failures=tuple(dict(f) for f in d.get("failures", [])),
        started=str(d.get("started", "")),
        finished=str(d.get("finished", "")),
        complete=bool(d.get("complete", False)),
        layout_mb_per_s=d.get("layout_mb_per_s"),
    )


def find_latest_calibration(results_root: str | Path, device_name: str) -> Path | None:
    """The newest complete calibration run under `results_root` measured on `device_name` (e.g. 'vda')."""
    root = Path(results_root)
    if not root.is_dir():
        return None
    found: list[tuple[str, float, Path]] = []
    for path in root.glob(f"*/{CALIBRATION_FILE}"):
        try:
            d = json.loads(path.read_text())
            if d.get("complete") and d.get("device", {}).get("name") == device_name:
                found.append((str(d.get("finished", "")), path.stat().st_mtime, path.parent))
        except (OSError, ValueError, AttributeError):
            continue  # a foreign or half-written file is not a calibration
    return max(found)[2] if found else None


# ---------------------------------------------------------------------- helpers
def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def _replace(cal: Calibration, **changes: Any) -> Calibration:
    return replace(cal, **changes)


__all__ = [
    "Calibration",
    "CalibrationPlan",
    "Limit",
    "PlannedPoint",
    "Point",
    "Summary",
    "check_directory",
    "choose_ioengine",
    "find_latest_calibration",
    "load_calibration",
    "make_plan",
    "point_args",
    "run_calibration",
    "save_calibration",
    "summarise",
]
