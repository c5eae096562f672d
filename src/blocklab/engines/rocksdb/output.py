"""db_bench's output as numbers.

What goes where (db_bench 7.8.3, checked here): the RESULT line of each
benchmark, the `--histogram` block, `STATISTICS:` (cumulative for the
process, printed once at its end) and the `stats` pseudo-benchmark's DB stats
go to stdout; the `RocksDB: version` header, progress and every error go to
stderr. Numbers are C-locale (blocklab runs db_bench with LC_ALL=C).

The RESULT line's fields: `micros/op` is the per-thread average latency
(threads x elapsed / ops), `ops/sec` the total over all threads, `seconds`
the benchmark's wall time, `MB/s` MiB/s of key+value payload (not disk
bytes), `(X of Y found)` one thread's count only.

Disk bytes are not `rocksdb.bytes.read` (the value bytes returned to the
caller) but `rocksdb.non.last.level.read.bytes + rocksdb.last.level.read.bytes`
(every read RocksDB made from an SST file), with their `.count`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

RESULT = re.compile(
    r"^(?P<bench>\w+)\s+:\s+(?P<us_op>[\d.]+) micros/op (?P<ops>\d+) ops/sec (?P<secs>[\d.]+) seconds "
    r"(?P<n>\d+) operations;(?:\s+(?P<mbs>[\d.]+) MB/s)?(?: \((?P<found>\d+) of (?P<tried>\d+) found\))?",
    re.M,
)
HIST_HEADER = re.compile(r"^Microseconds per (?P<what>\w+):$", re.M)
HIST_COUNT = re.compile(r"^Count: (?P<n>\d+) Average: (?P<avg>[\d.]+)\s+StdDev: (?P<sd>[\d.]+)$", re.M)
HIST_MINMAX = re.compile(r"^Min: (?P<min>\d+)\s+Median: (?P<med>[\d.]+)\s+Max: (?P<max>\d+)$", re.M)
PERCENTILES = re.compile(
    r"^Percentiles: P50: (?P<p50>[\d.]+) P75: (?P<p75>[\d.]+) P99: (?P<p99>[\d.]+) P99\.9: (?P<p999>[\d.]+) "
    r"P99\.99: (?P<p9999>[\d.]+)$",
    re.M,
)
COUNTER = re.compile(r"^(?P<name>rocksdb\.[\w.]+) COUNT : (?P<v>\d+)$", re.M)
STAT_HIST = re.compile(
    r"^(?P<name>rocksdb\.[\w.]+) P50 : (?P<p50>[\d.]+) P95 : (?P<p95>[\d.]+) P99 : (?P<p99>[\d.]+) "
    r"P100 : (?P<p100>[\d.]+) COUNT : (?P<n>\d+) SUM : (?P<sum>\d+)$",
    re.M,
)
CUMULATIVE_STALL = re.compile(r"^Cumulative stall: (\d+):(\d+):([\d.]+) H:M:S, ([\d.]+) percent", re.M)
STALLS = re.compile(r"^Stalls\(count\): (.*)$", re.M)
VERSION = re.compile(r"^RocksDB:\s+version (\S+)", re.M)
ASSERTIONS = "WARNING: Assertions are enabled"


@dataclass
class Result:
    """One benchmark of one db_bench process, parsed."""

    benchmark: str
    micros_per_op: float
    ops_per_s: float
    seconds: float
    operations: int
    mb_per_s: float | None = None
    found: int | None = None
    tried: int | None = None
    histogram: dict[str, float] = field(default_factory=dict)  # --histogram: count, avg, p50 ... p99.99 (µs)
    counters: dict[str, int] = field(default_factory=dict)  # rocksdb.* COUNT
    histograms: dict[str, dict[str, float]] = field(default_factory=dict)  # rocksdb.* P50/P95/P99/P100/COUNT/SUM
    series: list[tuple[int, float]] = field(default_factory=list)  # (second, ops in that second)
    stall_s: float | None = None  # `stats`: Cumulative stall
    stall_percent: float | None = None
    stalls: dict[str, int] = field(default_factory=dict)  # `stats`: Stalls(count) by cause
    assertions: bool = False  # the binary was built with assertions (slower CPU paths)
    version: str = ""


def parse(stdout: str, stderr: str, benchmark: str) -> Result | None:
    """The RESULT of `benchmark` and everything printed about it; None when db_bench printed no RESULT line."""
    found = [m for m in RESULT.finditer(stdout) if m["bench"] == benchmark]
    if not found:
        return None
    m = found[-1]
    result = Result(
        benchmark=benchmark,
        micros_per_op=float(m["us_op"]),
        ops_per_s=float(m["ops"]),
        seconds=float(m["secs"]),
        operations=int(m["n"]),
        mb_per_s=float(m["mbs"]) if m["mbs"] else None,
        found=int(m["found"]) if m["found"] else None,
        tried=int(m["tried"]) if m["tried"] else None,
    )
    result.histogram = histogram(stdout[m.end():])
    result.counters = {c["name"]: int(c["v"]) for c in COUNTER.finditer(stdout)}
    result.histograms = {
        h["name"]: {"p50": float(h["p50"]), "p95": float(h["p95"]), "p99": float(h["p99"]), "p100": float(h["p100"]),
                    "count": float(h["n"]), "sum": float(h["sum"])}
        for h in STAT_HIST.finditer(stdout)
    }
    if stall := CUMULATIVE_STALL.search(stdout):
        hours, minutes, seconds, percent = stall.groups()
        result.stall_s = int(hours) * 3600 + int(minutes) * 60 + float(seconds)
        result.stall_percent = float(percent)
    if stalls := STALLS.search(stdout):
        for part in stalls.group(1).split(","):
            words = part.split()
            if len(words) >= 2 and words[0].isdigit():
                result.stalls[words[1]] = int(words[0])
    result.assertions = ASSERTIONS in stdout
    if version := VERSION.search(stderr):
        result.version = version.group(1)
    return result


def histogram(text: str) -> dict[str, float]:
    """The first --histogram block in `text` (the one after a RESULT line)."""
    header = HIST_HEADER.search(text)
    if not header:
        return {}
    rest = text[header.end():]
    out: dict[str, float] = {}
    if count := HIST_COUNT.search(rest):
        out.update(count=float(count["n"]), avg=float(count["avg"]), stddev=float(count["sd"]))
    if minmax := HIST_MINMAX.search(rest):
        out.update(min=float(minmax["min"]), median=float(minmax["med"]), max=float(minmax["max"]))
    if pct := PERCENTILES.search(rest):
        out.update(p50=float(pct["p50"]), p75=float(pct["p75"]), p99=float(pct["p99"]), p99_9=float(pct["p999"]),
                   p99_99=float(pct["p9999"]))
    return out


def report_series(path: Path) -> list[tuple[int, float]]:
    """--report_file (secs_elapsed,interval_qps), one row per second; [] if absent or empty."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return []
    out = []
    for line in lines[1:]:
        parts = line.split(",")
        if len(parts) >= 2 and parts[0].strip().isdigit():
            try:
                out.append((int(parts[0]), float(parts[1])))
            except ValueError:
                continue
    return out


def sst_reads(counters: dict[str, int]) -> tuple[int, int]:
    """(reads, bytes) RocksDB made from SST files, whatever level the data sits in."""
    reads = counters.get("rocksdb.non.last.level.read.count", 0) + counters.get("rocksdb.last.level.read.count", 0)
    read_bytes = counters.get("rocksdb.non.last.level.read.bytes", 0) + counters.get("rocksdb.last.level.read.bytes", 0)
    return reads, read_bytes


def series_metrics(series: list[tuple[int, float]]) -> dict[str, float]:
    """The per-second series summarised: how steady the run was (its full form is in the cell's notes)."""
    values = [q for _, q in series]
    if len(values) < 2:
        return {}
    mean = sum(values) / len(values)
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
    return {
        "db_bench.per_second.n": float(len(values)),
        "db_bench.per_second.min": min(values),
        "db_bench.per_second.max": max(values),
        "db_bench.per_second.cv": sd / mean if mean else 0.0,
    }


def last_lines(text: str, count: int = 6) -> str:
    """The last non-empty lines of an output, joined with ' | ' (progress lines use \\r, not \\n)."""
    lines = [line.strip() for line in re.split(r"[\r\n]+", text) if line.strip()]
    return " | ".join(lines[-count:])
