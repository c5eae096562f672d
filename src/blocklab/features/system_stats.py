"""System statistics as Oracle's SYS.AUX_STATS$ holds them: the measured phases
(Phase) and the statistics gathered from them (SystemStats), with the optimizer
costs they imply as the engine's dialect computed them (PostgreSQL's
random_page_cost = SREADTIM / (MREADTIM / MBRC): engines/postgres/sysstats.py).
features/sysstats.py measures them; this module only holds them."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields

from ..units import fmt_bytes


# ---------------------------------------------------------------------- results
@dataclass(frozen=True)
class Phase:
    """One cold measurement: the engine's I/O counters and the clock around it."""

    name: str  # single_block | multiblock | serial_scan | concurrent_scan
    sessions: int
    reads: float
    read_bytes: float
    read_time_ms: float
    wall_s: float
    hits: float = 0.0
    expected_bytes: float = 0.0  # what a cold measurement must read at least
    device_read_bytes: float | None = None
    cold_ratio: float = 0.0
    cold_proven: bool = False
    session_wall_s: tuple[float, ...] = ()
    session_bytes: tuple[float, ...] = ()
    one_in_flight: bool = False  # read-ahead off: one read in flight at a time

    @property
    def avg_read_ms(self) -> float:
        return self.read_time_ms / self.reads if self.reads else math.nan

    @property
    def wall_ms_per_read(self) -> float:
        return self.wall_s * 1000.0 / self.reads if self.reads else math.nan

    @property
    def bytes_per_s(self) -> float:
        return self.read_bytes / self.wall_s if self.wall_s > 0 else math.nan

    def session_bytes_per_s(self) -> list[float]:
        return [b / w for b, w in zip(self.session_bytes, self.session_wall_s) if w > 0]

    def to_dict(self) -> dict[str, object]:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["session_wall_s"] = list(self.session_wall_s)
        d["session_bytes"] = list(self.session_bytes)
        d.update(avg_read_ms=_finite(self.avg_read_ms), wall_ms_per_read=_finite(self.wall_ms_per_read),
                 bytes_per_s=_finite(self.bytes_per_s))
        return d


@dataclass(frozen=True)
class SystemStats:
    """The gathered statistics, the conditions they were measured under, the raw phases."""

    sreadtim_ms: float
    mreadtim_ms: float
    mbrc: float
    maxthr_bytes_per_s: float
    slavethr_bytes_per_s: float
    maxthr_sessions: int
    sreadtim_wall_ms: float
    mreadtim_wall_ms: float
    mreadtim_ahead_ms: float  # what a scan with read-ahead still waits per read
    throughput_by_sessions: dict[int, float]  # sessions -> median bytes/s
    block_size: int
    settings: dict[str, str]  # the engine's settings the reads ran under, by its own names
    direct_io: bool
    table: str
    rows: int
    relation_bytes: int
    single_reads: int
    repeats: int
    dstart: str
    dstop: str
    phases: tuple[Phase, ...]
    notes: tuple[str, ...] = ()
    read_time_source: str = "the engine's read time / reads"  # the engine's counters the read times come from
    costs: dict[str, float] = field(default_factory=dict)  # the optimizer costs they imply (the engine's dialect)
    cost_formula: str = ""  # how the dialect computed them, with the numbers

    def aux_stats(self) -> list[tuple[str, str, str, str, str]]:
        """Rows in the shape of Oracle's SYS.AUX_STATS$: (SNAME, PNAME, PVAL1, PVAL2, unit).
        SYSSTATS_WALL holds the same two read times by the client's clock."""
        return [
            ("SYSSTATS_INFO", "STATUS", "", "COMPLETED", ""),
            ("SYSSTATS_INFO", "DSTART", "", self.dstart, ""),
            ("SYSSTATS_INFO", "DSTOP", "", self.dstop, ""),
            ("SYSSTATS_MAIN", "SREADTIM", f"{self.sreadtim_ms:.3f}", "", "ms"),
            ("SYSSTATS_MAIN", "MREADTIM", f"{self.mreadtim_ms:.3f}", "", "ms"),
            ("SYSSTATS_MAIN", "MBRC", f"{self.mbrc:.2f}", "", "blocks"),
            ("SYSSTATS_MAIN", "MAXTHR", f"{self.maxthr_bytes_per_s:.0f}", "", "bytes/s"),
            ("SYSSTATS_MAIN", "SLAVETHR", f"{self.slavethr_bytes_per_s:.0f}", "", "bytes/s"),
            ("SYSSTATS_WALL", "SREADTIM", f"{self.sreadtim_wall_ms:.3f}", "", "ms"),
            ("SYSSTATS_WALL", "MREADTIM", f"{self.mreadtim_wall_ms:.3f}", "", "ms"),
            ("SYSSTATS_ENGINE", "BLOCK_SIZE", str(self.block_size), "", "bytes"),
            ("SYSSTATS_ENGINE", "MREADTIM_AHEAD", f"{self.mreadtim_ahead_ms:.3f}", "", "ms"),
            *(("SYSSTATS_ENGINE", name.upper(), value, "", "") for name, value in self.settings.items()),
        ]

    def explanations(self) -> list[str]:
        """What the rows beyond Oracle's mean, one line each."""
        plural = "s" if self.maxthr_sessions != 1 else ""
        return [
            f"MAXTHR {mb_per_s_text(self.maxthr_bytes_per_s)} with {self.maxthr_sessions} session{plural} scanning at once "
            f"({', '.join(f'{k}: {mb_per_s_text(v)}' for k, v in self.throughput_by_sessions.items())}); "
            f"SLAVETHR {mb_per_s_text(self.slavethr_bytes_per_s)} per session",
            f"SYSSTATS_MAIN SREADTIM and MREADTIM are {self.read_time_source} over exactly the measured reads; "
            "SYSSTATS_WALL is the client's clock per read (it also holds CPU and round trips)",
            "MREADTIM_AHEAD: what a scan with the engine's read-ahead still waits per read; MREADTIM is measured "
            "one read at a time, like Oracle's scattered reads",
        ]

    def conditions(self) -> str:
        return (
            f"on {self.table} ({self.rows:,} rows, {fmt_bytes(self.relation_bytes)}), "
            + "".join(f"{name} {value}, " for name, value in self.settings.items())
            + f"{'direct' if self.direct_io else 'buffered'} I/O, cold; "
            f"{self.single_reads} random single-block reads; {self.repeats} cold scans one read at a time "
            f"(read-ahead off) for MREADTIM and MBRC; {self.repeats} cold scans with read-ahead per "
            f"concurrency level ({', '.join(str(k) for k in self.throughput_by_sessions)} sessions) for MAXTHR"
        )

    def to_dict(self) -> dict[str, object]:
        d: dict[str, object] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "phases":
                value = [p.to_dict() for p in value]
            elif f.name == "throughput_by_sessions":
                value = {str(k): v for k, v in value.items()}
            elif isinstance(value, tuple):
                value = list(value)
            d[f.name] = value
        return d


def mb_per_s_text(bytes_per_s: float) -> str:
    return f"{bytes_per_s / 1e6:,.1f} MB/s" if math.isfinite(bytes_per_s) else "n/a"


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def typed_number(value: float) -> str:
    """1.0 -> '1', 16.05 -> '16.05' (as a person types it)."""
    value = float(value)
    return str(int(value)) if value.is_integer() else repr(value)
