"""System statistics, in the spirit of Oracle's DBMS_STATS.GATHER_SYSTEM_STATS
(seed 000): measured on the engine's own data files, cold, and turned into the
optimizer costs they imply, on every engine whose package implements
`SysstatsDialect` (PostgreSQL: engines/postgres/sysstats.py); an engine without
one says why in its capabilities (`lacks["sysstats"]`), and the command refuses
with that reason before anything starts.

    SREADTIM  single-block read time (ms): random reads of single blocks of the
              scan table (at most one block in 8, in random order), cold; the
              engine's read time / reads.
    MREADTIM  multiblock read time (ms): cold serial full scans with the
              engine's read-ahead off, so one read is in flight at a time and its
              read time is its whole latency (with read-ahead the session waits
              only for what prefetching did not hide; that figure is kept as
              MREADTIM_AHEAD). read time / reads.
    MBRC      blocks per multiblock read actually achieved: read_bytes / reads / block_size.
    MAXTHR    the highest scan throughput (bytes/s) with 1, 2, 4... sessions each
              scanning its own slice of the table (TID range scans, read-ahead
              on), cold: physical bytes read / wall time (median of the repeats
              per level).
    SLAVETHR  the throughput of one session at the MAXTHR level (median).

SREADTIM and MREADTIM are the engine's own averages over exactly the reads the
measurement caused; the client's wall clock per read is kept beside them
(`*_wall_ms`), which also holds CPU and round trips and so reads higher.

What they imply for the engine's optimizer is its dialect's to say
(PostgreSQL: random_page_cost = SREADTIM / (MREADTIM / MBRC)).

`run_sysstats` is the whole command (engine up, measure, save, apply, engine
down); `gather` measures on an engine already started. Nothing here prints.
"""

from __future__ import annotations

import datetime as dt
import math
import random
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypedDict, Unpack, cast

from ..engines.base import Engine, KnobError, Reading
from ..probes.io import cold_proof
from ..probes.os_stats import DeviceReads
from ..results import ENVIRONMENT_FILE, RunDir, new_run_dir
from ..units import fmt_bytes
from .system_stats import Phase, SystemStats, mb_per_s_text, typed_number

if TYPE_CHECKING:
    from .sysstats_twin import ReadTwin

FORMAT = 2  # 2: the engine's settings as a dict, its costs and formula from its dialect
FEATURE = "sysstats"  # the key of an engine's dialect for it
SYSSTATS_FILE = "sysstats.json"
DEFAULT_TABLE = "blocklab_scan"
DEFAULT_ROWS = 3_000_000  # the seed's test table, ~150 MB
DEFAULT_SINGLE_READS = 2000
DEFAULT_REPEATS = 3
DEFAULT_SESSIONS = (2, 4)  # concurrency levels besides the serial scans (1 session)
MIN_BLOCKS = 32
MIN_ROWS = 5_000  # ~32 blocks of the seed's rows
READ_SPACING = 8
APPLY_WAIT_S = 5.0


class SysstatsInputError(ValueError):
    """An option sysstats cannot work with; the message names it and what is accepted."""


class SysstatsError(RuntimeError):
    """The measurement could not be made (no I/O timing, no reads, ...)."""


class Reporter(Protocol):
    def phase(self, text: str) -> None: ...  # a long step starts
    def done(self, text: str) -> None: ...  # a step finished, one line


class SilentReporter:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def phase(self, text: str) -> None:
        self.lines.append(text)

    def done(self, text: str) -> None:
        self.lines.append(text)


# ---------------------------------------------------------------------- measuring
class SysstatsDialect(Protocol):
    """What system statistics need from an engine: cold reads it can time, and
    the optimizer costs they imply, which it can set."""

    def read_settings(self) -> dict[str, str]:
        """The engine's settings the reads run under, by its own names (PostgreSQL:
        io_combine_limit, io_method, effective_io_concurrency); and under the key
        read_time_source: where its read times come from."""

    def single_block_reads(self, table: str, blocks: Sequence[int], warmup_block: int, disk: DeviceReads) -> Reading:
        """Evict, then read these blocks of the table one at a time, in this order, one read in flight."""

    def serial_scan(self, table: str, disk: DeviceReads, *, read_ahead: bool) -> Reading:
        """Evict, then one serial full scan; without read-ahead one read in flight at a time."""

    def concurrent_scan(self, table: str, slices: Sequence[tuple[int, int]], disk: DeviceReads) -> Reading:
        """Evict, then one session per slice of blocks, each scanning its slice, all at once."""


    def read_costs(self, names: Sequence[str]) -> dict[str, str]:
        """The planner costs a new session sees."""

    def evicts_blocks(self) -> bool:
        """Can the engine empty its cache of a table's blocks before each phase?"""

    def cached_blocks(self, table: str) -> set[int]:
        """Blocks of the table its cache holds now (those it cannot evict stay warm)."""

    def adaptations(self) -> list[str]:
        """How the measurement is adapted to this server (an older version), one line each."""

    def set_costs(self, costs: dict[str, str]) -> None:
        """Set the optimizer costs server-wide (asynchronously visible)."""

    def implied_costs(self, sreadtim_ms: float, mreadtim_ms: float, mbrc: float) -> tuple[dict[str, float], str]:
        """The optimizer costs the statistics imply, rounded as they would be typed,
        and the formula with its numbers."""

    def cost_statements(self, costs: dict[str, float]) -> list[str]:
        """The statements that set the costs server-wide, for a person to run."""

    def undo_statements(self, costs: dict[str, float]) -> list[str]:
        """The statements that put the server's own values back."""


def refusal(engine_kind: str) -> str | None:
    """Why `blocklab sysstats --engine KIND` cannot run, asked of the engine's class
    before anything starts (None: it has a sysstats dialect)."""
    from ..engines import engine_class

    try:
        cls = engine_class(engine_kind)
    except KnobError as err:
        return f"--engine: {err}"
    if FEATURE in cls.dialects:
        return None
    why = cls.capabilities.why_not(FEATURE) or "its engine package has no sysstats dialect"
    return f"--engine {engine_kind}: system statistics are not gathered on {cls.display}: {why}"


def _dialect(engine: Engine) -> SysstatsDialect:
    try:
        return cast(SysstatsDialect, engine.dialect(FEATURE))
    except KnobError as err:
        raise SysstatsInputError(f"sysstats: {err}") from None


class PhaseExtra(TypedDict, total=False):
    """What a phase records beyond its reading (Phase's fields of the same names)."""

    session_wall_s: tuple[float, ...]
    session_bytes: tuple[float, ...]
    one_in_flight: bool


def _phase(name: str, sessions: int, r: Reading, expected: float, direct: bool, **extra: Unpack[PhaseExtra]) -> Phase:
    """One measured phase from the dialect's reading, with its proof of a cold cache."""
    read_bytes = _delta(r.after, r.before, "read_bytes")
    device = r.disk1 - r.disk0 if r.disk0 is not None and r.disk1 is not None else None
    proof = cold_proof(expected, read_bytes, device, direct)
    return Phase(
        name=name,
        sessions=sessions,
        reads=_delta(r.after, r.before, "reads"),
        read_bytes=read_bytes,
        read_time_ms=_delta(r.after, r.before, "read_time_ms"),
        wall_s=r.wall_s,
        hits=_delta(r.after, r.before, "hits"),
        expected_bytes=expected,
        device_read_bytes=device,
        cold_ratio=proof["cold_ratio"],
        cold_proven=bool(proof["cold_proven"]),
        **extra,
    )


def _delta(after: dict[str, float], before: dict[str, float], key: str) -> float:
    return after.get(key, 0.0) - before.get(key, 0.0)


def single_block_reads(engine: Engine, table: str, blocks: Sequence[int], warmup_block: int, disk: DeviceReads | None = None) -> Phase:
    """Cold random single-block reads of `blocks` (distinct), timed by the engine and the client."""
    disk = disk or DeviceReads(engine.data_dir())
    direct = engine.direct_io_active()
    reading = _dialect(engine).single_block_reads(table, blocks, warmup_block, disk)
    return _phase("single_block", 1, reading, len(blocks) * engine.block_size(), direct, one_in_flight=True)


def serial_scan(engine: Engine, table: str, disk: DeviceReads | None = None, *, read_ahead: bool = True) -> Phase:
    """One cold serial full scan; read_ahead=False: one read in flight at a time, so
    the engine's read time is each multiblock read's whole latency."""
    disk = disk or DeviceReads(engine.data_dir())
    direct = engine.direct_io_active()
    expected = engine.relation_bytes(table)
    reading = _dialect(engine).serial_scan(table, disk, read_ahead=read_ahead)
    return _phase("serial_scan" if read_ahead else "multiblock", 1, reading, expected, direct,
                  session_wall_s=reading.session_wall_s, session_bytes=(float(expected),),
                  one_in_flight=not read_ahead)


def concurrent_scan(engine: Engine, table: str, sessions: int, disk: DeviceReads | None = None) -> Phase:
    """`sessions` cold scans at once, each of its own slice of the table."""
    disk = disk or DeviceReads(engine.data_dir())
    direct = engine.direct_io_active()
    block_size = engine.block_size()
    nblocks = engine.relation_bytes(table) // block_size
    slices = [(nblocks * i // sessions, nblocks * (i + 1) // sessions) for i in range(sessions)]
    reading = _dialect(engine).concurrent_scan(table, slices, disk)
    slice_bytes = tuple(float((hi - lo) * block_size) for lo, hi in slices)
    return _phase("concurrent_scan", sessions, reading, float(nblocks * block_size), direct,
                  session_wall_s=reading.session_wall_s, session_bytes=slice_bytes)


def ensure_table(engine: Engine, table: str, rows: int) -> None:
    """The seed's scan table, built by the full_scan workload if missing or of another size."""
    from ..spec import DatasetSpec
    from ..workloads.full_scan import FullScan, FullScanOptions

    FullScan(FullScanOptions(), DatasetSpec(table=table, rows=rows)).prepare(engine)


def gather(
    engine: Engine,
    *,
    table: str = DEFAULT_TABLE,
    rows: int = DEFAULT_ROWS,
    single_reads: int = DEFAULT_SINGLE_READS,
    repeats: int = DEFAULT_REPEATS,
    sessions: Sequence[int] = DEFAULT_SESSIONS,
    seed: int | None = None,
    reporter: Reporter | None = None,
) -> SystemStats:
    """Measure on a started engine (the table is built first if needed)."""
    rep = reporter or SilentReporter()
    dialect = _dialect(engine)
    rep.phase(f"checking the data set: {table}, {rows:,} rows (built once, then reused)")
    ensure_table(engine, table, rows)
    block_size = engine.block_size()
    relation_bytes = engine.relation_bytes(table)
    nblocks = relation_bytes // block_size
    if nblocks < MIN_BLOCKS:
        needed = math.ceil(MIN_BLOCKS * rows / max(nblocks, 1))
        raise SysstatsInputError(
            f"--rows {rows:,}: the table has {nblocks} blocks, too few to measure reads; give at least {needed:,} rows"
        )
    current = dialect.read_settings()
    read_time_source = current.pop("read_time_source", "the engine's read time / reads")
    direct = engine.direct_io_active()
    disk = DeviceReads(engine.data_dir())
    rng = random.Random(seed)
    dstart = _now()

    # at most one block in READ_SPACING, so that the OS read-ahead (buffered I/O)
    # rarely finds a block's neighbour asked for next
    n = max(1, min(single_reads, nblocks // READ_SPACING))
    if n < single_reads:  # said, not silently fewer: the table sets the ceiling
        rows_needed = math.ceil(single_reads * READ_SPACING * rows / max(nblocks, 1))
        rep.done(f"--reads {single_reads:,}: {n:,} single-block reads instead, the most a table of {nblocks:,} blocks allows "
                 f"at one read in {READ_SPACING} blocks (so that read-ahead rarely finds the next); --rows {rows_needed:,} "
                 f"would allow {single_reads:,}")
    # the throwaway round reads blocks of its own, and an engine that cannot evict
    # blocks from its cache (PostgreSQL before 17) is sampled among those it does not hold
    evicts = dialect.evicts_blocks()
    held = set() if evicts else dialect.cached_blocks(table)
    candidates = [b for b in range(nblocks) if b not in held]
    if len(candidates) < MIN_BLOCKS:
        raise SysstatsError(
            f"{len(held):,} of the table's {nblocks:,} blocks are in the engine's cache, which this server cannot "
            f"empty of a table, so no cold single-block read is left to measure; use a table several times larger "
            f"than the cache (e.g. --rows {rows * 4:,}), or restart the server to empty it"
        )
    n = max(1, min(n, len(candidates) // READ_SPACING))
    spare = min(16, max(1, len(candidates) - n - 1))
    sample = rng.sample(candidates, n + 1 + spare)
    warmup, throwaway, blocks = sample[0], sample[1 : 1 + spare], sample[1 + spare :]
    rep.phase(f"SREADTIM: {n:,} random single-block reads, cold")
    # a throwaway round first: right after a start the first such statement also
    # reads catalog pages (about 1% more reads), which are not the table's
    single_block_reads(engine, table, throwaway, warmup, disk)
    sread = single_block_reads(engine, table, blocks, warmup, disk)
    if sread.reads < 1:
        raise SysstatsError(f"the single-block reads caused no read in {read_time_source} (cold eviction failed?): {sread}")
    if sread.read_time_ms <= 0:
        raise SysstatsError(f"{read_time_source}: no read time recorded for the single-block reads (is the engine's I/O timing on?)")
    rep.done(f"single-block reads: {sread.reads:,.0f} reads, {sread.avg_read_ms:.3f} ms each (client clock {sread.wall_ms_per_read:.3f} ms)")

    mreads: list[Phase] = []
    for i in range(repeats):
        rep.phase(f"MREADTIM, MBRC: cold serial scan {i + 1} of {repeats}, one read at a time ({fmt_bytes(relation_bytes)})")
        mreads.append(serial_scan(engine, table, disk, read_ahead=False))
    reads = sum(p.reads for p in mreads)
    if reads < 1 or sum(p.read_time_ms for p in mreads) <= 0:
        raise SysstatsError(f"the cold scans caused no timed reads in {read_time_source} (is the engine's I/O timing on?)")
    mreadtim = sum(p.read_time_ms for p in mreads) / reads
    mbrc = sum(p.read_bytes for p in mreads) / reads / block_size
    mread_wall = sum(p.wall_s for p in mreads) * 1000.0 / reads
    rep.done(f"multiblock reads: {reads / repeats:,.0f} reads a scan, {mbrc:.2f} blocks each, {mreadtim:.3f} ms each "
             f"(client clock {mread_wall:.3f} ms)")

    scans: list[Phase] = []
    for i in range(repeats):
        rep.phase(f"MAXTHR: cold serial scan {i + 1} of {repeats} with read-ahead")
        scans.append(serial_scan(engine, table, disk, read_ahead=True))
    ahead_reads = sum(p.reads for p in scans)
    mreadtim_ahead = sum(p.read_time_ms for p in scans) / ahead_reads if ahead_reads else math.nan
    rep.done(f"1 session with read-ahead: {mb_per_s_text(statistics.median(p.bytes_per_s for p in scans))}, "
             f"waiting {mreadtim_ahead:.3f} ms a read")

    by_level: dict[int, list[Phase]] = {1: scans}
    # concurrent slices are TID range scans, which fill the engine's cache: only where it can be emptied
    for k in sorted(set(int(x) for x in sessions if int(x) > 1 and evicts)):
        by_level[k] = []
        for i in range(repeats):
            rep.phase(f"MAXTHR: {k} sessions scanning at once with read-ahead, cold, {i + 1} of {repeats}")
            by_level[k].append(concurrent_scan(engine, table, k, disk))
        rep.done(f"{k} concurrent sessions: {mb_per_s_text(statistics.median(p.bytes_per_s for p in by_level[k]))} in total")
    throughput = {k: statistics.median(p.bytes_per_s for p in phases) for k, phases in by_level.items()}
    best_level = max(throughput, key=lambda k: throughput[k])
    per_session = [v for p in by_level[best_level] for v in p.session_bytes_per_s()]
    slavethr = statistics.median(per_session) if per_session else throughput[best_level]

    phases = (sread, *mreads, *[p for ps in by_level.values() for p in ps])
    notes = [f"adapted: {line}" for line in dialect.adaptations()]
    not_cold = [p for p in phases if not p.cold_proven]
    if not_cold:
        notes.append(
            f"{len(not_cold)} of {len(phases)} measurements could not prove a cold cache "
            "(no device counters, or fewer bytes read than the data): treat the times as lower bounds"
        )
    if sread.reads > 1.05 * n:
        notes.append(f"the single-block phase read {sread.reads:,.0f} blocks for {n:,} fetches")
    if mbrc > 0 and sread.avg_read_ms < mreadtim / mbrc:
        notes.append("a random block read cost less than a block of a scan (a random page cheaper than a sequential "
                     "one): check that the scans were really cold before using the costs")
    stats = SystemStats(
        sreadtim_ms=sread.avg_read_ms,
        mreadtim_ms=mreadtim,
        mbrc=mbrc,
        maxthr_bytes_per_s=throughput[best_level],
        slavethr_bytes_per_s=slavethr,
        maxthr_sessions=best_level,
        sreadtim_wall_ms=sread.wall_ms_per_read,
        mreadtim_wall_ms=mread_wall,
        mreadtim_ahead_ms=mreadtim_ahead,
        throughput_by_sessions=throughput,
        block_size=block_size,
        settings=current,
        direct_io=direct,
        table=table,
        rows=rows,
        relation_bytes=relation_bytes,
        single_reads=n,
        repeats=repeats,
        dstart=dstart,
        dstop=_now(),
        phases=phases,
        notes=tuple(notes),
        read_time_source=read_time_source,
    )
    costs, formula = dialect.implied_costs(stats.sreadtim_ms, stats.mreadtim_ms, stats.mbrc)
    return replace(stats, costs=costs, cost_formula=formula)


# ---------------------------------------------------------------------- applying
@dataclass(frozen=True)
class AppliedCosts:
    """The optimizer costs set server-wide: the values before, asked and read back after."""

    asked: dict[str, float]
    before: dict[str, str]
    after: dict[str, str]

    @property
    def confirmed(self) -> bool:
        return all(_same_number(self.after.get(k), v) for k, v in self.asked.items())

    def to_dict(self) -> dict[str, object]:
        return {"asked": self.asked, "before": self.before, "after": self.after, "confirmed": self.confirmed}


def read_costs(engine: Engine, names: Sequence[str]) -> dict[str, str]:
    """The values a new session sees."""
    return _dialect(engine).read_costs(list(names))


def apply_costs(engine: Engine, costs: dict[str, float], wait_s: float = APPLY_WAIT_S) -> AppliedCosts:
    """Set each cost server-wide and read the values back from a new session (a
    reload is asynchronous: poll until they show or `wait_s` passes)."""
    before = read_costs(engine, list(costs))
    _dialect(engine).set_costs({name: typed_number(value) for name, value in costs.items()})
    deadline = time.monotonic() + wait_s
    while True:
        after = read_costs(engine, list(costs))
        if all(_same_number(after.get(k), v) for k, v in costs.items()) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    return AppliedCosts(dict(costs), before, after)


# ---------------------------------------------------------------------- the command
@dataclass
class SysstatsRun:
    """What `blocklab sysstats` did: the statistics, where they are saved, what was applied."""

    stats: SystemStats
    run_dir: Path
    mode: str  # embedded | dsn
    sql: list[str]
    applied: AppliedCosts | None = None
    how_to_apply: list[str] = field(default_factory=list)
    device_twin: list[ReadTwin] = field(default_factory=list)  # sysstats_twin.ReadTwin: the disk's own time for the same reads
    device_twin_note: str = ""  # why there is none


def check_options(*, engine_kind: str, dsn: str | None, rows: int, apply: bool, allow_server_changes: bool,
                  direct_io: bool | None, single_reads: int, repeats: int, sessions: Sequence[int],
                  table: str, out: Path | None) -> None:
    """Everything that can be refused before anything starts."""
    from ..spec import IDENTIFIER

    if rows < MIN_ROWS:
        raise SysstatsInputError(
            f"--rows {rows}: too few to measure reads; give at least {MIN_ROWS:,} (default {DEFAULT_ROWS:,})"
        )
    if single_reads < 1:
        raise SysstatsInputError(f"--reads {single_reads}: must be at least 1 (default {DEFAULT_SINGLE_READS})")
    if repeats < 1:
        raise SysstatsInputError(f"--repeats {repeats}: must be at least 1 (default {DEFAULT_REPEATS})")
    if any(int(k) < 1 or int(k) > 64 for k in sessions):
        raise SysstatsInputError(f"--sessions {','.join(map(str, sessions))}: each must be from 1 to 64")
    if not IDENTIFIER.match(table):
        raise SysstatsInputError(f"table {table!r}: must be a lower-case SQL identifier")
    if dsn and apply and not allow_server_changes:
        raise SysstatsInputError(
            "--apply on a --dsn server changes its optimizer settings for everyone (server-wide); "
            "add --allow-server-changes to do it, or leave out --apply and run the printed statements yourself"
        )
    if dsn and direct_io is not None:
        raise SysstatsInputError("--direct-io needs a server restart, which blocklab never does to a --dsn server; "
                                 "use it with the embedded engine (no --dsn)")
    why_not = refusal(engine_kind)
    if why_not:
        raise SysstatsInputError(why_not)
    if out is not None and (Path(out) / SYSSTATS_FILE).exists():
        raise SysstatsInputError(f"--out {out}: already holds system statistics; give a new directory")


def run_sysstats(
    *,
    engine_kind: str | None = None,
    dsn: str | None = None,
    rows: int = DEFAULT_ROWS,
    apply: bool = False,
    allow_server_changes: bool = False,
    direct_io: bool | None = None,
    single_reads: int = DEFAULT_SINGLE_READS,
    repeats: int = DEFAULT_REPEATS,
    sessions: Sequence[int] = DEFAULT_SESSIONS,
    table: str = DEFAULT_TABLE,
    seed: int | None = None,
    cache_dir: Path | None = None,
    out: Path | None = None,
    results_root: Path | None = None,
    reporter: Reporter | None = None,
    device_twin: bool = False,
) -> SysstatsRun:
    """Start the engine (embedded, or the --dsn server), gather, save a run
    directory, apply the planner costs if asked, stop the engine (also on error
    and Ctrl-C). Raises SysstatsInputError before anything starts on bad options."""
    from ..engines import DEFAULT_ENGINE, make_engine
    from ..environment import collect
    from ..paths import results_root as default_results_root

    engine_kind = engine_kind or DEFAULT_ENGINE
    check_options(engine_kind=engine_kind, dsn=dsn, rows=rows, apply=apply, allow_server_changes=allow_server_changes, direct_io=direct_io,
                  single_reads=single_reads, repeats=repeats, sessions=sessions, table=table, out=out)
    rep = reporter or SilentReporter()
    engine = make_engine(engine_kind, dsn=dsn, cache_dir=cache_dir, allow_server_changes=allow_server_changes)
    rep.phase(f"starting blocklab's own {engine_kind} engine" if not dsn else "connecting to the --dsn server")
    try:
        engine.start()
        if direct_io is not None:
            rep.phase(f"{'enabling' if direct_io else 'disabling'} direct I/O (restart)")
            engine.apply({"direct_io": direct_io})
        stats = gather(engine, table=table, rows=rows, single_reads=single_reads, repeats=repeats,
                       sessions=sessions, seed=seed, reporter=rep)
        env = collect(engine.info(), engine.data_dir(), {"dataset_rows": rows, "kind": "sysstats"})
        run_dir = RunDir(out) if out is not None else new_run_dir(results_root or default_results_root(), "sysstats")
        run_dir.create()
        run_dir.write_json(ENVIRONMENT_FILE, env)
        dialect = _dialect(engine)
        costs = stats.costs
        result = SysstatsRun(stats, run_dir.path, engine.mode, dialect.cost_statements(costs))
        if device_twin:  # issue 19: fio reads what SREADTIM and MREADTIM read, the engine idle meanwhile
            from .sysstats_twin import measure_stats

            rep.phase("device twin: fio reads what SREADTIM and MREADTIM read")
            result.device_twin, result.device_twin_note = measure_stats(stats, engine.data_dir(), on_phase=rep.phase)
        if apply:
            rep.phase("applying the optimizer costs server-wide")
            result.applied = apply_costs(engine, costs)
        elif engine.mode == "embedded":
            result.how_to_apply = [
                "blocklab sysstats --apply   (measures again and applies on blocklab's embedded server)",
                "on your own server: run the statements above as a superuser, or "
                "blocklab sysstats --dsn DSN --apply --allow-server-changes",
            ]
        else:
            result.how_to_apply = [
                "rerun with --apply --allow-server-changes, or run the statements above as a superuser",
                f"to undo later: {' '.join(dialect.undo_statements(costs))}",
            ]
        run_dir.write_json(SYSSTATS_FILE, _document(result))
        return result
    finally:
        engine.stop()


def _document(result: SysstatsRun) -> dict[str, object]:
    s = result.stats
    return {
        "format": FORMAT,
        "aux_stats": [dict(zip(("sname", "pname", "pval1", "pval2", "unit"), row)) for row in s.aux_stats()],
        "stats": s.to_dict(),
        "formula": s.cost_formula,
        "sql": result.sql,
        "mode": result.mode,
        "applied": result.applied.to_dict() if result.applied else None,
        "device_twin": [t.to_dict() for t in result.device_twin],
        "device_twin_note": result.device_twin_note or None,
    }


def load(path: Path | str) -> dict[str, object]:
    """A saved sysstats.json."""
    return RunDir(path).read_json(SYSSTATS_FILE)


# ---------------------------------------------------------------------- helpers
def _now() -> str:
    return dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M:%S")


def _same_number(text: str | None, value: float) -> bool:
    try:
        return text is not None and abs(float(text) - float(value)) < 1e-9 * max(1.0, abs(value))
    except ValueError:
        return False





__all__ = [
    "SystemStats", "Phase", "AppliedCosts", "SysstatsRun", "SysstatsError", "SysstatsInputError",
    "gather", "run_sysstats", "apply_costs", "refusal", "SysstatsDialect", "Reading",
    "single_block_reads", "serial_scan", "concurrent_scan", "read_costs", "load",
]
