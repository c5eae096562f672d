"""What a cell claims, and the second source that checks each claim in the same run.

A cell's number counts only when its claims hold. The runner asks:

* settings: the engine reads every knob back in a new measuring session, in its
  own units (Engine.check_applied), and it must match what was asked;
* cold cache (measure.cache = "cold"): right after the eviction the relation's
  files are (nearly) absent from the OS page cache (mincore, probes/page_cache.py)
  and the engine's own cache holds (nearly) none of it (Engine.cached_bytes);
  a workload that proves it by the bytes it read (full_scan's cold_proven) must
  have read (nearly) the whole relation;
* direct I/O (the engine says it is active): after a cold cell the relation is
  still absent from the page cache (reads that bypass it never fill it), and
  the engine's processes that hold the files open hold them with O_DIRECT;
* work done: each workload checks its own rows and raises when they are wrong
  (a failed cell, not an invalid one).

A claim that fails makes the cell `invalid: <why>`; its row keeps the evidence
(`notes.checks`), is left out of every statistic and is measured once more.
Cross-checks that cannot make a number wrong by themselves (another process
reading the same disk, engine and device IOPS that disagree, a time profile
that does not add up) are recorded as `notes.flags` and shown, never hidden.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .engines.base import Engine
from .jsonvalue import as_number
from .probes.page_cache import opened_direct, resident_bytes, unreadable

COLD_RESIDENT_MAX = 0.01  # share of the relation's files still cached after an eviction
DIRECT_RESIDENT_MAX = 0.05  # ... after a direct-I/O run (a few pages of metadata read buffered)
OTHER_IO_MAX = 0.10  # device reads by others, as a share of the engine's own, before a cell is "noisy"
IOPS_AGREEMENT = 0.10  # engine and device read IOPS within 10%
PROFILE_AGREEMENT = 0.05  # a time profile's parts within 5% of the elapsed time


@dataclass
class CellChecks:
    """The evidence of one cell and what it says: problems make the cell invalid, flags only mark it."""

    evidence: dict[str, object] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)

    @property
    def status(self) -> str:
        return "ok" if not self.problems else "invalid: " + "; ".join(self.problems)

    def to_notes(self) -> dict[str, object]:
        out: dict[str, object] = {"checks": self.evidence}
        if self.flags:
            out["flags"] = list(self.flags)
        return out


def relation_files(engine: Engine, relations: Iterable[str]) -> list[Path]:
    return list(dict.fromkeys(f for r in relations for f in engine.relation_files(r)))


def check_settings(engine: Engine, settings: dict[str, object], checks: CellChecks) -> None:
    """Asked = applied, read back by the engine in its own units."""
    mismatches = engine.check_applied(settings)
    checks.evidence["settings_checked"] = len(settings)
    if mismatches:
        checks.problems.append("setting not applied: " + "; ".join(mismatches))


def check_cold_start(engine: Engine, relations: list[str], evicted: Mapping[str, object], checks: CellChecks) -> None:
    """After the eviction: the OS page cache and the engine's cache are empty of the relations.
    An engine restarted by its eviction re-reads each file's head as it opens it (evict()
    says how much: `reread_head_bytes`); that much of each file is its header, not its data."""
    files = relation_files(engine, relations)
    if blind := unreadable(files):
        checks.problems.append(f"cold cache not proven: blocklab cannot read {len(blind)} of the relation's {len(files)} "
                               f"files ({blind[0]}: permissions), so it can neither drop nor measure their page cache")
    elif evicted.get("os_drop_possible") is False:
        checks.problems.append("cold cache not proven: the relation's files could not be dropped from the OS page cache")
    head = int(as_number(evicted.get("reread_head_bytes"), 0))
    resident, total = resident_bytes(files, skip_head=head)
    cached = engine.cached_bytes(relations)
    checks.evidence.update(cold_files=len(files), cold_file_bytes=total, cold_os_resident_bytes=resident,
                           cold_engine_cached_bytes=cached)
    # No files here: an engine that keeps nothing in files, or a server elsewhere that reads
    # with direct I/O (Engine.cold_cache_problem refused the rest before the run): no OS cache to prove.
    if head:
        checks.evidence["cold_head_bytes_skipped"] = head
    if total and resident > COLD_RESIDENT_MAX * total:
        checks.problems.append(f"cold cache not proven: {resident / total:.0%} of the relation's files still in the OS page cache after the eviction")
    size = sum(engine.relation_bytes(r) for r in relations)
    if cached is not None and cached > COLD_RESIDENT_MAX * size:
        checks.problems.append(f"cold cache not proven: {cached / 1e6:,.1f} MB of the relation still in the engine's cache after the eviction")


def check_direct_io(engine: Engine, relations: list[str], cold: bool, checks: CellChecks) -> None:
    """Direct I/O in effect, not only configured: the kernel's page cache and open flags say so."""
    files = relation_files(engine, relations)
    if not files:
        checks.evidence["direct_io_proof"] = "none: the files are not on this host"
        return
    opened, direct = opened_direct(engine.server_pids(), files)
    resident, total = resident_bytes(files)
    checks.evidence.update(direct_io_open_fds=opened, direct_io_o_direct_fds=direct, direct_io_resident_bytes=resident)
    proofs = []
    if opened:
        proofs.append("fdinfo")
        if direct < opened:
            checks.problems.append(f"direct I/O claimed, but {opened - direct} of {opened} open descriptors of the relation lack O_DIRECT")
    if cold and total:  # evicted before the run: a direct-I/O run leaves the files uncached
        proofs.append("mincore")
        if resident > DIRECT_RESIDENT_MAX * total:
            checks.problems.append(f"direct I/O claimed, but {resident / total:.0%} of the relation is in the OS page cache after the run")
    elif total and not opened:  # warm, and the sessions that held the files are gone: the page cache still tells
        proofs.append("mincore (warm)")
        if resident > DIRECT_RESIDENT_MAX * total:  # not evicted first: the pages may predate the run, hence a flag
            checks.flags.append(f"direct I/O not shown: {resident / total:.0%} of the relation is in the OS page cache after the run")
    checks.evidence["direct_io_proof"] = "+".join(proofs) or "none: files not open, cache not evicted"


def check_metrics(metrics: dict[str, float], cold: bool, checks: CellChecks) -> None:
    """The workload's own proofs and the cross-checks between its sources."""
    if cold and metrics.get("cold_proven") == 0.0:
        checks.problems.append(f"cold cache not proven ({metrics.get('cold_ratio', 0.0):.2f} of the relation read from disk)")
    engine_bytes = metrics.get("proc_read_bytes")
    device = metrics.get("device_read_bytes")
    if engine_bytes is not None and device is not None:
        other = max(0.0, device - engine_bytes)
        metrics["other_device_read_bytes"] = other
        if other > OTHER_IO_MAX * max(engine_bytes, 1.0) and other > 1e6:
            checks.flags.append(f"noisy device: {other / 1e6:,.1f} MB read by other processes during the cell")
    iops, device_iops = metrics.get("read_iops"), metrics.get("device_read_iops")
    if iops and device_iops is not None:
        ratio = device_iops / iops
        metrics["device_iops_ratio"] = ratio
        if abs(ratio - 1.0) > IOPS_AGREEMENT:
            checks.flags.append(f"read IOPS disagree: the engine counted {iops:,.0f}/s, the device {device_iops:,.0f}/s")
    coverage = metrics.get("profile.slowest.total_s")
    if coverage:
        parts = sum(v for k, v in metrics.items() if k.startswith("profile.slowest.wait.")) + metrics.get("profile.slowest.cpu_s", 0.0)
        unaccounted = metrics.get("profile.slowest.unaccounted_s", coverage - parts)
        if abs(unaccounted) > PROFILE_AGREEMENT * coverage:
            checks.flags.append(f"time profile: {unaccounted / coverage:.0%} of the slowest session's time unaccounted")


def check_steady(series: dict[str, list[float]], key: str, checks: CellChecks) -> dict[str, object] | None:
    """A timed point's steadiness (analysis/series.py drift()): its warm-up and
    whether `key` is still drifting after it; a drifting point is flagged (it
    counts, and the report says so). None when the series is too short to judge."""
    from .analysis.series import MIN_DRIFT_SECONDS, drift, warmup_length

    if "t" not in series or key not in series or len(series[key]) < 2:
        return None
    found = drift(series["t"], series[key], key)
    if found is None:  # the warm-up is still worth drawing
        drop = warmup_length(series[key])
        rest = series[key][drop:]
        why = (f"no {key.replace('_', ' ')} to judge (zero throughout: the engine's cache answered)"
               if len(rest) >= MIN_DRIFT_SECONDS and not any(v > 0 for v in rest) else
               f"under {MIN_DRIFT_SECONDS} s of series after the warm-up: too short to judge its drift")
        return {"series": key, "warmup_s": series["t"][drop] - series["t"][0] if drop else 0.0, "judged": False, "why": why}
    if found.drifting:
        checks.flags.append(found.describe())
    return found.to_dict()
