"""System statistics as Oracle's SYS.AUX_STATS$ holds them, and what they imply
for PostgreSQL's planner: the measured phases (Phase), the statistics gathered
from them (SystemStats), random_page_cost = SREADTIM / (MREADTIM / MBRC).
analysis/sysstats.py measures them; this module only holds and computes."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

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
    effective_io_concurrency: int | None = None  # None: the server's setting

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

    def to_dict(self) -> dict[str, Any]:
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
    effective_io_concurrency: int  # the server's, used by the read-ahead scans
    throughput_by_sessions: dict[int, float]  # sessions -> median bytes/s
    block_size: int
    io_combine_limit: int  # blocks
    io_method: str
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
    read_time_source: str = "pg_stat_io read_time / reads"  # the engine's counters the read times come from

    @property
    def random_page_cost(self) -> float:
        return random_page_cost(self.sreadtim_ms, self.mreadtim_ms, self.mbrc)

    def planner_costs(self) -> dict[str, float]:
        """The settings these statistics imply, rounded as they would be typed."""
        return {"seq_page_cost": 1.0, "random_page_cost": round(self.random_page_cost, 2)}

    def formula(self) -> str:
        return (
            f"random_page_cost = SREADTIM / (MREADTIM / MBRC) = {self.sreadtim_ms:.4g} / "
            f"({self.mreadtim_ms:.4g} / {self.mbrc:.4g}) = {self.random_page_cost:.2f}"
        )

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
            ("SYSSTATS_PG", "BLOCK_SIZE", str(self.block_size), "", "bytes"),
            ("SYSSTATS_PG", "IO_COMBINE_LIMIT", str(self.io_combine_limit), "", "blocks"),
            ("SYSSTATS_PG", "MREADTIM_AHEAD", f"{self.mreadtim_ahead_ms:.3f}", "", "ms"),
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
            f"MREADTIM_AHEAD: what a scan with read-ahead (effective_io_concurrency {self.effective_io_concurrency}) "
            "still waits per read; MREADTIM is measured one read at a time, like Oracle's scattered reads",
        ]

    def conditions(self) -> str:
        return (
            f"on {self.table} ({self.rows:,} rows, {fmt_bytes(self.relation_bytes)}), "
            f"io_combine_limit {self.io_combine_limit} ({fmt_bytes(self.io_combine_limit * self.block_size)}), "
            f"io_method {self.io_method}, {'direct' if self.direct_io else 'buffered'} I/O, cold; "
            f"{self.single_reads} random single-block reads; {self.repeats} cold scans one read at a time "
            f"(effective_io_concurrency 0) for MREADTIM and MBRC; {self.repeats} cold scans with read-ahead per "
            f"concurrency level ({', '.join(str(k) for k in self.throughput_by_sessions)} sessions) for MAXTHR"
        )

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "phases":
                value = [p.to_dict() for p in value]
            elif f.name == "throughput_by_sessions":
                value = {str(k): v for k, v in value.items()}
            elif isinstance(value, tuple):
                value = list(value)
            d[f.name] = value
        d["random_page_cost"] = self.random_page_cost
        d["planner_costs"] = self.planner_costs()
        return d


def random_page_cost(sreadtim_ms: float, mreadtim_ms: float, mbrc: float) -> float:
    """A random page relative to a sequential one: the single-block read time
    over the time per block of a multiblock read."""
    for name, value in (("SREADTIM", sreadtim_ms), ("MREADTIM", mreadtim_ms), ("MBRC", mbrc)):
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be a positive number, not {value!r}")
    return sreadtim_ms / (mreadtim_ms / mbrc)


def alter_system_sql(costs: dict[str, float]) -> list[str]:
    lines = [f"ALTER SYSTEM SET {name} = {typed_number(value)};" for name, value in costs.items()]
    lines.append("SELECT pg_reload_conf();")
    return lines


def mb_per_s_text(bytes_per_s: float) -> str:
    return f"{bytes_per_s / 1e6:,.1f} MB/s" if math.isfinite(bytes_per_s) else "n/a"


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def typed_number(value: float) -> str:
    """1.0 -> '1', 16.05 -> '16.05' (as a person types it)."""
    value = float(value)
    return str(int(value)) if value.is_integer() else repr(value)
