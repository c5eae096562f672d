"""fio replaying a Pattern on the engine's disk: the twin, and its cache per device.

    fio_args(pattern, file, ioengine)          the command line of one replay
    measure(patterns, directory, cache, ...)   fio, once per distinct pattern, cached per device

Twins are cached per device in <cache>/device-twins/<device>.json with the fio
command, its version and when they were measured; a pattern measured once is
not measured again (delete the file to measure the device anew). Each pattern
is three fio runs of half a second, round robin over the patterns (direct I/O
time-based; buffered: one pass over the file at most, page cache dropped first,
so no read is a cache hit); the median counts.

Units: bytes, MB/s = 1e6 bytes/s, milliseconds, as in the rest of blocklab.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import math
import os
import secrets
import shlex
import shutil
import statistics
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..probes.os_stats import device_of
from ..results import write_atomic
from ..units import short_size
from .calibrate import choose_ioengine
from .fio import FioError, FioNotFound, find_fio, fio_version, run_fio
from .io_pattern import GiB, MiB, Pattern

CACHE_DIR = "device-twins"
CACHE_FORMAT = 1
FREE_SPACE_RESERVE = 64 * MiB  # never fill the disk to the last byte
RUNTIME_S = 0.5  # an engine's cell is often shorter; three runs and their median steady it
RAMP_S = 0.15
REPEATS = 3
FIO_OVERHEAD_S = 0.35  # fio's start and JSON per run, measured on a 2-core VM

OnPhase = Callable[[str], None]


# ====================================================================== fio
def fio_args(p: Pattern, test_file: Path, ioengine: str, *, runtime_s: float = RUNTIME_S, ramp_s: float = RAMP_S) -> list[str]:
    """The fio command line replaying `p` on `test_file` (without --output-format,
    which run_fio adds): one job for the foreground kind, one for the background.

    Sequential direct I/O: one stream, libaio keeping the depth in flight (an
    engine's read-ahead). Random I/O: as many synchronous psync threads as I/Os
    in flight (an engine's sessions, each waiting for its read): on a machine
    whose CPUs are busy, one fio thread reaping them all would get one thread's
    share of the CPUs where the engine's sessions get one each. Direct I/O is
    time-based (the file is read over and over; nothing is cached). Buffered: each
    thread passes over its own slice of the file once at most after the page
    cache was dropped (invalidate), so no read is answered from memory; buffered
    writes are flushed at the end."""
    timing = [f"--runtime={max(1, round(runtime_s * 1000))}ms"]
    if p.direct:
        timing += ["--time_based", f"--ramp_time={round(ramp_s * 1000)}ms"]
    args = [f"--filename={test_file}", f"--direct={1 if p.direct else 0}", "--randrepeat=0", *timing]
    if p.direct:
        args.append("--norandommap")
    else:
        args.append("--invalidate=1")
    for kind in (p.main, p.background):
        if not kind:
            continue
        bs, depth = (p.read_bs, p.read_depth) if kind == "read" else (p.write_bs, p.write_depth)
        rw = ("" if p.sequential else "rand") + kind
        args += [f"--name={kind}s", f"--rw={rw}", f"--bs={bs}", f"--size={p.file_size}"]
        jobs = 1
        if p.direct and p.sequential and ioengine == "libaio":
            args += ["--ioengine=libaio", f"--iodepth={depth}"]
        else:
            jobs = depth
            args += ["--ioengine=psync", "--iodepth=1", f"--numjobs={depth}"]
            slice_ = p.file_size // depth // 4096 * 4096
            # each thread its own slice where they would otherwise share: cached pages (buffered),
            # or the start of the file (sequential)
            if depth > 1 and slice_ >= bs and (p.sequential or not p.direct):
                args += [f"--size={slice_}", f"--offset_increment={slice_}"]
        if kind == p.background:
            args.append(f"--rate_iops={max(1, round(p.background_iops / jobs))}")  # per job
        if kind == "write" and not p.direct:
            args.append("--end_fsync=1")
    return args


@dataclass(frozen=True)
class FioRun:
    """One fio run, the jobs' reads and writes added up."""

    read_iops: float
    write_iops: float
    read_mb_per_s: float
    write_mb_per_s: float
    read_lat_ms: float  # mean completion latency; NaN without reads
    write_lat_ms: float
    runtime_s: float

    @property
    def iops(self) -> float:
        return self.read_iops + self.write_iops

    @property
    def mb_per_s(self) -> float:
        return self.read_mb_per_s + self.write_mb_per_s

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FioRun:
        """fio JSON of one or more jobs: each direction summed over the jobs."""
        jobs = data.get("jobs") or []
        if not jobs:
            raise FioError("fio output has no jobs")
        for job in jobs:
            if job.get("error"):
                raise FioError(f"fio job {job.get('jobname')!r} failed with error {job['error']}")
        side: dict[str, dict[str, float]] = {}
        for d in ("read", "write"):
            parts = [job.get(d) or {} for job in jobs]
            ios = sum(float(x.get("total_ios", 0)) for x in parts)
            lat = sum(float(x.get("clat_ns", {}).get("mean", 0.0)) * float(x.get("total_ios", 0)) for x in parts)
            side[d] = {
                "ios": ios,
                "iops": sum(float(x.get("iops", 0.0)) for x in parts),
                "mb": sum(float(x.get("bw_bytes", 0)) for x in parts) / 1e6,
                "lat": lat / ios / 1e6 if ios else math.nan,
                "runtime": max((float(x.get("runtime", 0)) for x in parts), default=0.0) / 1e3,
            }
        if not side["read"]["ios"] + side["write"]["ios"]:
            raise FioError("fio completed no I/O")
        r, w = side["read"], side["write"]
        return cls(r["iops"], w["iops"], r["mb"], w["mb"], r["lat"], w["lat"], max(r["runtime"], w["runtime"]))


@dataclass(frozen=True)
class Twin:
    """What the device delivered for one pattern: the median of the fio runs, per direction."""

    pattern: Pattern
    read_iops: float
    write_iops: float
    read_mb_per_s: float
    write_mb_per_s: float
    read_lat_ms: float
    write_lat_ms: float
    runs: tuple[FioRun, ...]
    fio_version: str
    ioengine: str
    command: str  # one run's command line, as it ran
    measured: str  # UTC, ISO 8601
    device: str
    directory: str

    @property
    def key(self) -> str:
        return self.pattern.key

    @property
    def iops(self) -> float:
        return self.read_iops + self.write_iops

    @property
    def mb_per_s(self) -> float:
        return self.read_mb_per_s + self.write_mb_per_s

    def rate(self, unit: str) -> float:
        """The foreground's rate in `unit` (IOPS or MB/s): what the engine's is set against."""
        if self.pattern.main == "read":
            return self.read_iops if unit == "IOPS" else self.read_mb_per_s
        return self.write_iops if unit == "IOPS" else self.write_mb_per_s

    @property
    def lat_ms(self) -> float:
        """The foreground's mean completion latency."""
        return self.read_lat_ms if self.pattern.main == "read" else self.write_lat_ms

    def to_dict(self) -> dict[str, object]:
        d = asdict(self)
        d["key"] = self.key
        # JSON has no NaN: a figure fio did not give (a read-only run's write latency) is null
        return _nan_to_none(d)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Twin:
        def num(x: Any) -> float:
            return math.nan if x is None else float(x)

        return cls(
            pattern=Pattern.from_dict(d["pattern"]),
            read_iops=num(d["read_iops"]), write_iops=num(d["write_iops"]),
            read_mb_per_s=num(d["read_mb_per_s"]), write_mb_per_s=num(d["write_mb_per_s"]),
            read_lat_ms=num(d.get("read_lat_ms")), write_lat_ms=num(d.get("write_lat_ms")),
            runs=tuple(FioRun(**{k: num(v) for k, v in r.items()}) for r in d.get("runs", [])),
            fio_version=str(d.get("fio_version", "")),
            ioengine=str(d.get("ioengine", "")),
            command=str(d.get("command", "")),
            measured=str(d.get("measured", "")),
            device=str(d.get("device", "")),
            directory=str(d.get("directory", "")),
        )


def _nan_to_none(x: object) -> Any:
    if isinstance(x, float) and math.isnan(x):
        return None
    if isinstance(x, dict):
        return {k: _nan_to_none(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_nan_to_none(v) for v in x]
    return x


def median_twin(p: Pattern, runs: list[FioRun], **meta: str) -> Twin:
    def med(name: str) -> float:
        values = [getattr(r, name) for r in runs if math.isfinite(getattr(r, name))]
        return statistics.median(values) if values else math.nan

    return Twin(p, med("read_iops"), med("write_iops"), med("read_mb_per_s"), med("write_mb_per_s"),
                med("read_lat_ms"), med("write_lat_ms"), tuple(runs), **meta)


# ====================================================================== the cache
class TwinCache:
    """<cache>/device-twins/<device>.json: pattern key -> Twin, for one device.

    Read and written whole under a lock file, so two blocklab runs on one machine
    neither lose each other's entries nor measure the device at the same time
    (`measuring()` holds the lock while fio runs)."""

    def __init__(self, root: Path, device: str):
        self.directory = root / CACHE_DIR
        self.path = self.directory / f"{device}.json"
        self.device = device

    def load(self) -> dict[str, Twin]:
        try:
            d = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError):
            return {}  # a damaged cache is measured anew, never trusted
        if not isinstance(d, dict) or d.get("format") != CACHE_FORMAT:
            return {}
        out = {}
        for key, entry in (d.get("twins") or {}).items():
            try:
                out[key] = Twin.from_dict(entry)
            except (KeyError, TypeError, ValueError):
                continue
        return out

    def save(self, twins: Iterable[Twin], device_info: dict[str, object]) -> None:
        """Merge these twins into the file (under the lock the caller holds)."""
        merged = self.load()
        merged.update({t.key: t for t in twins})
        doc = {"format": CACHE_FORMAT, "device": device_info, "twins": {k: t.to_dict() for k, t in sorted(merged.items())}}
        self.directory.mkdir(parents=True, exist_ok=True)
        write_atomic(self.path, (json.dumps(doc, indent=1) + "\n").encode())

    @contextmanager
    def measuring(self) -> Iterator[None]:
        """The device's lock: one blocklab measures its twins at a time (others wait)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        with open(self.directory / f"{self.device}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)


# ====================================================================== measuring
@dataclass
class Measured:
    """The outcome of measure(): twins by key, which came from the cache, what failed."""

    twins: dict[str, Twin] = field(default_factory=dict)
    cached: set[str] = field(default_factory=set)
    failures: dict[str, str] = field(default_factory=dict)  # key -> why
    seconds: float = 0.0  # wall time of the fio runs and layouts


def estimate_seconds(count: int) -> float:
    """Wall time of `count` patterns not yet cached (file layouts come on top)."""
    return count * REPEATS * (RUNTIME_S + RAMP_S + FIO_OVERHEAD_S)


def measure(
    patterns: Iterable[Pattern],
    directory: Path,
    cache: TwinCache,
    *,
    on_phase: OnPhase | None = None,
    repeats: int = REPEATS,
    runtime_s: float = RUNTIME_S,
) -> Measured:
    """Each distinct pattern not in the cache, replayed by fio in `directory` (then
    cached); raises FioNotFound without fio. A pattern that fails (no room for its
    file, fio's error) is in `failures` and the others go on. Test files are
    removed afterwards, also on Ctrl-C."""
    import time

    say = on_phase or (lambda text: None)
    wanted = {p.key: p for p in patterns}
    out = Measured()
    fio = find_fio()
    version = fio_version(fio)
    t0 = time.monotonic()
    with cache.measuring():  # re-read under the lock: another run may have measured them meanwhile
        known = {k: t for k, t in cache.load().items() if t.fio_version == version}
        for key in wanted:
            if key in known:
                out.twins[key] = known[key]
                out.cached.add(key)
        todo = [p for k, p in wanted.items() if k not in known]
        if not todo:
            return out
        ioengine, _ = choose_ioengine(fio, None)
        device = device_of(directory)
        files: dict[int, Path] = {}
        runs: dict[str, list[FioRun]] = {}
        commands: dict[str, str] = {}
        ordered = sorted(todo, key=lambda p: (p.file_size, p.key))
        try:
            for p in ordered:  # each file size laid out once; a pattern without room fails alone
                try:
                    if p.file_size not in files:
                        lay_out(fio, directory, p.file_size, files)
                    runs[p.key] = []
                except (FioError, OSError, ValueError) as err:
                    out.failures[p.key] = str(err).splitlines()[0][:300]
            live = [p for p in ordered if p.key in runs]
            # Round robin, every other round backwards: a burst of someone else's I/O hits
            # one run of several patterns rather than every run of one
            errors: dict[str, str] = {}
            for rep in range(repeats):
                for i, p in enumerate(live if rep % 2 == 0 else live[::-1]):
                    if rep == 0:
                        say(f"device twin {i + 1}/{len(live)}: fio replays {p.describe()}")
                    elif i == 0:
                        say(f"device twin: round {rep + 1} of {repeats} over the {len(live)} pattern(s)")
                    try:
                        args = fio_args(p, files[p.file_size], ioengine, runtime_s=runtime_s)
                        commands[p.key] = shlex.join([fio, "--output-format=json", *args])
                        timeout = runtime_s + RAMP_S + 60 + (p.file_size / 50e6 if not p.direct else 0)
                        runs[p.key].append(FioRun.from_json(run_fio(fio, args, timeout=timeout)))
                    except (FioError, OSError, ValueError) as err:
                        # one failed run (a stall of a busy machine) costs that run; a pattern fails when all did
                        errors[p.key] = str(err).splitlines()[0][:300]
            out.failures.update({k: v for k, v in errors.items() if not runs.get(k)})
        finally:
            for f in files.values():
                f.unlink(missing_ok=True)
            # what was measured is kept, also when a Ctrl-C cut the rounds short (fewer runs: see `runs`)
            for p in ordered:
                if runs.get(p.key) and p.key not in out.failures:
                    out.twins[p.key] = median_twin(
                        p, runs[p.key], fio_version=version,
                        ioengine="libaio" if p.direct and p.sequential and ioengine == "libaio" else "psync",
                        command=commands[p.key], measured=utc_now(), device=device.name, directory=str(directory),
                    )
            if new := [t for k, t in out.twins.items() if k not in out.cached]:
                cache.save(new, device.to_dict())
    out.seconds = time.monotonic() - t0
    return out


def lay_out(fio: str, directory: Path, size: int, files: dict[int, Path]) -> Path:
    """A test file of `size` bytes written once (reads of a sparse file would not touch
    the disk), buffered and flushed so that it works on any file system."""
    free = shutil.disk_usage(directory).free
    if free < size + FREE_SPACE_RESERVE:
        raise ValueError(f"no room for a {short_size(size)}B twin file in {directory} ({free / GiB:.2f} GiB free)")
    path = directory / f".blocklab-twin-{os.getpid()}-{secrets.token_hex(4)}.fio"
    files[size] = path  # registered before it exists, so a Ctrl-C during the layout removes it too
    run_fio(fio, [
        "--name=layout", f"--filename={path}", f"--size={size}", "--direct=0", "--ioengine=psync",
        "--rw=write", "--bs=1M", "--end_fsync=1",
    ], timeout=120 + size / 20e6)
    return path


def fio_version_or_empty() -> str:
    """The version of the fio on this machine, '' when there is none."""
    try:
        return fio_version(find_fio())
    except FioNotFound:
        return ""


def utc_now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


__all__ = [
    "FioRun",
    "Measured",
    "OnPhase",
    "Twin",
    "TwinCache",
    "estimate_seconds",
    "fio_args",
    "fio_version_or_empty",
    "measure",
    "utc_now",
]


def twin_directory(data_dir: str) -> Path:
    """Where the twin's files go: beside the engine's data directory (its parent,
    same file system, without putting foreign files among the engine's own),
    else in it."""
    data = Path(data_dir)
    parent = data.parent
    try:
        if os.access(parent, os.W_OK) and device_of(parent).name == device_of(data).name:
            return parent
    except OSError:
        pass
    return data
