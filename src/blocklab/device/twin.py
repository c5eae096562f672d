"""The device twin: what the disk itself delivers for the I/O the engine issued.

During every cell the probe records the I/O pattern the engine issued
(`pattern.*` metrics, probes/io.py): its request sizes and its reads and writes
(the engine's own counters), how many of its I/Os were in flight while the disk
was busy (/proc/diskstats), direct or buffered, sequential or random (the
workload says), and the bytes of data it ranged over. After the run's cells,
never between them, fio replays each setting's pattern on a file of the same
size on the same file system: the twin. The engine's rate over the twin's is its
efficiency (analysis/efficiency.py): near 1 the disk is the limit, far below it
the engine is.

    patterns = setting_patterns(rows)          label -> Pattern, or why none
    twins = measure(patterns, directory, ...)  fio, once per distinct pattern, cached per device
    measure_run(run_dir, mode)                 the whole step for a run directory: twin.json

The kind of I/O the engine did most of (reads, or writes) is replayed as fast
as the disk takes it with the engine's number in flight; the other kind, when it
is more than a trace, beside it at the engine's own rate (see Pattern). A
pattern is quantised so that nearby cells share one twin and one cache entry:
sizes and depths to a grid of powers of two and the halves between them (8k,
12k, 16k, 24k ...; 1, 2, 3, 4, 6, 8 ...), the background rate likewise, the file
to the nearest power of two (at least 16 MiB).

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
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..engines.base import fmt_bytes
from ..probes.os_stats import device_of
from ..results import ENVIRONMENT_FILE, ResultRow, RunDir, write_atomic
from .calibrate import choose_ioengine
from .fio import FioError, FioNotFound, find_fio, fio_version, format_size, run_fio

TWIN_FILE = "twin.json"
TWIN_FORMAT = 1
CACHE_DIR = "device-twins"
CACHE_FORMAT = 1
MODES = ("off", "on", "only")
ENV_VAR = "BLOCKLAB_DEVICE_TWIN"  # the default of `blocklab run --device-twin`

KiB, MiB, GiB = 1024, 1024**2, 1024**3
MIN_IOS = 16  # a setting whose cells did fewer I/Os has no pattern worth replaying (sizes are exact, depth rough)
MIN_FILE = 16 * MiB  # smaller files would be read in a few milliseconds
FREE_SPACE_RESERVE = 64 * MiB  # never fill the disk to the last byte
SMALL_IO = 32 * KiB  # up to here a disk is counted in IOPS, above it in MB/s (as calibrate's small I/O)
RUNTIME_S = 0.5  # an engine's cell is often shorter; three runs and their median steady it
RAMP_S = 0.15
REPEATS = 3
FIO_OVERHEAD_S = 0.35  # fio's start and JSON per run, measured on a 2-core VM
MAX_DEPTH = 256

OnPhase = Callable[[str], None]


# ====================================================================== quantising
def _sizes() -> list[int]:
    """Powers of two from 512 B to 64 MiB and, from 12 kB on, the halves between
    them (12k, 24k, 48k ...): multiples of 4096, as direct I/O on a 4k-sector disk needs."""
    powers = [512 * 2**i for i in range(18)]
    return sorted(powers + [3 * p // 2 for p in powers if 3 * p // 2 >= 12 * KiB])


SIZE_GRID = _sizes()
# I/Os in flight: 1, 2, 3, 4, 6, 8, 12, 16, 24 ... 256
DEPTH_GRID = sorted({1, 2, 3} | {d for p in range(2, 9) for d in (2**p, 3 * 2**p // 2) if d <= MAX_DEPTH})
# a background kind's I/Os a second: 8, 12, 16, 24 ... about a million
RATE_GRID = sorted({d for p in range(3, 21) for d in (2**p, 3 * 2**p // 2)})


def nearest(value: float, grid: Sequence[int]) -> int:
    """The grid value nearest to `value` on a log scale (a ratio off, not a difference)."""
    if not value or value <= 0 or not math.isfinite(value):
        return grid[0]
    return min(grid, key=lambda g: (abs(math.log(g / value)), g))


def file_size_for(data_bytes: float) -> int:
    """The twin's file: the nearest power of two to the data's bytes, at least MIN_FILE."""
    if not data_bytes or data_bytes <= MIN_FILE:
        return MIN_FILE
    return max(MIN_FILE, 2 ** round(math.log2(data_bytes)))


# ====================================================================== the pattern
@dataclass(frozen=True)
class Pattern:
    """One I/O pattern, quantised: what a twin replays.

    The kind the engine did most of (reads, or writes) is its foreground: fio runs
    it as fast as it can with the engine's number of them in flight. The other
    kind, if any, ran beside it (a checkpointer's writes beside a SLOB session's
    reads, a scan's reads beside an insert's writes): fio replays it at the rate
    the engine did it, so it loads the disk as it did without a race to win."""

    sequential: bool
    direct: bool
    file_size: int  # bytes
    main: str  # "read" or "write": the foreground
    read_bs: int = 0  # bytes per read; 0: no reads
    read_depth: int = 0  # reads in flight (for the background kind: enough for its rate)
    write_bs: int = 0
    write_depth: int = 0
    background_iops: int = 0  # the background kind's rate (0: none)

    @property
    def main_bs(self) -> int:
        return self.read_bs if self.main == "read" else self.write_bs

    @property
    def main_depth(self) -> int:
        return self.read_depth if self.main == "read" else self.write_depth

    @property
    def background(self) -> str:
        """'write', 'read' or '' (none)."""
        if not self.background_iops:
            return ""
        return "write" if self.main == "read" else "read"

    @property
    def background_bs(self) -> int:
        return {"read": self.read_bs, "write": self.write_bs}.get(self.background, 0)

    @property
    def key(self) -> str:
        """'seq r128k qd3 direct 64M', 'rand r8k qd8 + w8k@2048/s direct 1G': the cache key."""
        order = "seq" if self.sequential else "rand"
        text = f"{order} {self.main[0]}{format_size(self.main_bs)} qd{self.main_depth}"
        if self.background:
            bg_depth = self.read_depth if self.background == "read" else self.write_depth
            text += f" + {self.background[0]}{format_size(self.background_bs)}@{self.background_iops}/s qd{bg_depth}"
        return f"{text} {'direct' if self.direct else 'buffered'} {format_size(self.file_size)}"

    @property
    def unit(self) -> str:
        """How the disk is counted for this pattern: IOPS for small I/O, MB/s for large."""
        return "IOPS" if self.main_bs <= SMALL_IO else "MB/s"

    @property
    def kind(self) -> str:
        """'sequential reads', 'random writes' ...: the foreground."""
        return f"{'sequential' if self.sequential else 'random'} {self.main}s"

    def describe(self) -> str:
        """'8 kB random reads, 8 in flight, with 8 kB writes at 2,048/s beside them, direct I/O, 1 GB file'."""
        text = f"{_kb(self.main_bs)} {self.kind}, {self.main_depth} in flight"
        if self.background:
            text += f", with {_kb(self.background_bs)} {self.background}s at {self.background_iops:,}/s beside them"
        return f"{text}, {'direct I/O' if self.direct else 'buffered'}, {fmt_bytes(self.file_size)} file"

    def compact(self) -> str:
        """'seq 128k reads qd3, direct' ('rand 8k reads qd8 + 8k writes 3,072/s, direct'): a table's cell."""
        text = f"{'seq' if self.sequential else 'rand'} {format_size(self.main_bs)} {self.main}s qd{self.main_depth}"
        if self.background:
            text += f" + {format_size(self.background_bs)} {self.background}s {self.background_iops:,}/s"
        return f"{text}, {'direct' if self.direct else 'buffered'}"

    def short(self) -> str:
        """'128 kB reads': how a sentence names it."""
        return f"{_kb(self.main_bs)} {self.main}s"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Pattern:
        return cls(
            sequential=bool(d["sequential"]), direct=bool(d["direct"]), file_size=int(d["file_size"]), main=str(d["main"]),
            read_bs=int(d.get("read_bs", 0)), read_depth=int(d.get("read_depth", 0)), write_bs=int(d.get("write_bs", 0)),
            write_depth=int(d.get("write_depth", 0)), background_iops=int(d.get("background_iops", 0)),
        )


def _kb(size: int) -> str:
    return f"{size // KiB} kB" if size >= KiB and size % KiB == 0 else f"{size} B"


def pattern_of(m: Mapping[str, float]) -> Pattern | str:
    """A cell's `pattern.*` metrics (or a setting's, pooled) -> its Pattern, or why it has none."""
    if "pattern.seconds" not in m:
        return "no I/O pattern recorded (a run from before the twin, or imported)"
    reads, writes = m.get("pattern.reads", 0.0), m.get("pattern.writes", 0.0)
    if reads + writes < MIN_IOS:
        return f"the engine did {reads + writes:,.0f} I/Os: too few to replay"
    busy = m.get("pattern.busy_ms", 0.0)
    if not busy or "pattern.read_flight_ms" not in m:
        return "queue depth not measured (no /proc/diskstats times for the disk)"
    main = "read" if reads >= writes else "write"
    minor = writes if main == "read" else reads
    seconds = m["pattern.seconds"]
    # the background kind when it is more than a trace: 1% of the I/Os and 10 a second
    rate = minor / seconds if seconds > 0 else 0.0
    background = minor >= 0.01 * (reads + writes) and rate >= 10
    sizes = {kind: nearest(m.get(f"pattern.{kind}_kb", 0.0) * KiB, SIZE_GRID) for kind in ("read", "write")}
    in_flight = {kind: m.get(f"pattern.{kind}_flight_ms", 0.0) / busy for kind in ("read", "write")}
    if not m.get("pattern.sequential", 0.0) and m.get("pattern.sessions"):
        # random reads are waited for one by one by the session that needs them: no more can be
        # in flight than there are sessions (a shared disk's or a busy CPU's estimate can say more)
        in_flight["read"] = min(in_flight["read"], m["pattern.sessions"])
    depths = {kind: nearest(max(1.0, d), DEPTH_GRID) for kind, d in in_flight.items()}
    kinds = {main} | ({"write" if main == "read" else "read"} if background else set())
    return Pattern(
        sequential=bool(m.get("pattern.sequential", 0.0)),
        direct=bool(m.get("pattern.direct", 0.0)),
        file_size=file_size_for(m.get("pattern.data_bytes", 0.0)),
        main=main,
        read_bs=sizes["read"] if "read" in kinds else 0,
        read_depth=depths["read"] if "read" in kinds else 0,
        write_bs=sizes["write"] if "write" in kinds else 0,
        write_depth=depths["write"] if "write" in kinds else 0,
        background_iops=nearest(rate, RATE_GRID) if background else 0,
    )


# the times a setting adds up over its cells: its depth is their ratio, steadier than a median of
# ratios whose denominators count in 4 ms jiffies; every other figure is the cells' median
_POOLED = ("pattern.read_flight_ms", "pattern.write_flight_ms", "pattern.busy_ms")


def setting_patterns(rows: Iterable[ResultRow]) -> dict[str, Pattern | str]:
    """Setting label -> the pattern of its ok cells (one twin per setting however its
    repeats scatter), or why it has none."""
    from ..analysis.summary import label_of

    groups: dict[str, list[dict[str, float]]] = {}
    for row in rows:
        if row.ok:
            groups.setdefault(label_of(row.settings), []).append(row.metrics)
    out: dict[str, Pattern | str] = {}
    for label, ms in groups.items():
        keys = {k for m in ms for k in m if k.startswith("pattern.")}
        merged = {k: statistics.median(m[k] for m in ms if k in m) for k in keys}
        if all("pattern.busy_ms" in m for m in ms):
            merged.update({k: sum(m.get(k, 0.0) for m in ms) for k in _POOLED if k in keys})
        out[label] = pattern_of(merged)
    return out


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

    def to_dict(self) -> dict[str, Any]:
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


def _nan_to_none(x: Any) -> Any:
    if isinstance(x, float) and math.isnan(x):
        return None
    if isinstance(x, dict):
        return {k: _nan_to_none(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_nan_to_none(v) for v in x]
    return x


def _median_twin(p: Pattern, runs: list[FioRun], **meta: Any) -> Twin:
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

    def save(self, twins: Iterable[Twin], device_info: dict[str, Any]) -> None:
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
                        _lay_out(fio, directory, p.file_size, files)
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
                    out.twins[p.key] = _median_twin(
                        p, runs[p.key], fio_version=version,
                        ioengine="libaio" if p.direct and p.sequential and ioengine == "libaio" else "psync",
                        command=commands[p.key], measured=_now(), device=device.name, directory=str(directory),
                    )
            if new := [t for k, t in out.twins.items() if k not in out.cached]:
                cache.save(new, device.to_dict())
    out.seconds = time.monotonic() - t0
    return out


def _lay_out(fio: str, directory: Path, size: int, files: dict[int, Path]) -> Path:
    """A test file of `size` bytes written once (reads of a sparse file would not touch
    the disk), buffered and flushed so that it works on any file system."""
    free = shutil.disk_usage(directory).free
    if free < size + FREE_SPACE_RESERVE:
        raise ValueError(f"no room for a {format_size(size)}B twin file in {directory} ({free / GiB:.2f} GiB free)")
    path = directory / f".blocklab-twin-{os.getpid()}-{secrets.token_hex(4)}.fio"
    files[size] = path  # registered before it exists, so a Ctrl-C during the layout removes it too
    run_fio(fio, [
        "--name=layout", f"--filename={path}", f"--size={size}", "--direct=0", "--ioengine=psync",
        "--rw=write", "--bs=1M", "--end_fsync=1",
    ], timeout=120 + size / 20e6)
    return path


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

    def to_dict(self) -> dict[str, Any]:
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
            finished=str(d.get("finished", "")),
        )

    def summary_line(self) -> str:
        if self.status != "measured":
            return f"device twin: {self.status}: {self.reason}" if self.reason else f"device twin: {self.status}"
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
            mode, status, reason, device=device, directory=str(directory), fio_version=_fio_version_or_empty(),
            cache=str(cache.path), twins=got.twins, cached=sorted(got.cached), failures=got.failures,
            patterns=labels, seconds=round(got.seconds, 2), finished=_now(),
        )
        if wanted and not got.twins:
            result.status = "failed"
            result.reason = "no pattern could be replayed: " + "; ".join(got.failures.values())
    run_dir.write_json(TWIN_FILE, result.to_dict())
    return result


def _fio_version_or_empty() -> str:
    try:
        return fio_version(find_fio())
    except FioNotFound:
        return ""


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


__all__ = [
    "MODES",
    "ENV_VAR",
    "Pattern",
    "Twin",
    "RunTwins",
    "TwinCache",
    "Measured",
    "check_mode",
    "estimate_seconds",
    "fio_args",
    "file_size_for",
    "load",
    "measure",
    "measure_run",
    "nearest",
    "pattern_of",
    "setting_patterns",
    "twin_directory",
    "why_not",
]
