"""A session's time profile, the seed's TIMESOURCE / SECONDS / PERCENTAGE table,
in one shape whatever measured it (PostgreSQL's wait sampler, MariaDB's
performance_schema, an imported AWR report):

* TOTAL_TIME        the session's elapsed time;
* each wait         seconds in that wait event ("IO:DataFileRead", "free buffer waits");
* CPU               seconds on a CPU (or runnable, waiting for one);
* UNACCOUNTED_TIME  elapsed - waits - CPU: what the instrument did not see.

The parts add up to TOTAL_TIME by construction. Result rows carry profiles
flattened (`profile.slowest.*`, `profile.total.*`); views read them back with
unflatten_profile.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

CPU = "CPU"
UNACCOUNTED = "UNACCOUNTED_TIME"
TOTAL = "TOTAL_TIME"


@dataclass
class SessionProfile:
    """Where one session's elapsed time went."""

    pid: int
    elapsed_s: float
    waits: dict[str, float] = field(default_factory=dict)  # "IO:DataFileRead" -> sampled seconds
    cpu_s: float = 0.0  # sampled: active with no wait event
    cpu_measured_s: float | None = None  # on-CPU over the window, from /proc
    cpu_source: str = ""  # schedstat | stat | "" (not measured)
    cpu_stat_s: float | None = None  # utime+stime over the window (10 ms ticks)
    runqueue_s: float | None = None  # schedstat: runnable, waiting for a CPU
    samples: int = 0

    @property
    def wait_s(self) -> float:
        return sum(self.waits.values())

    @property
    def sampled_s(self) -> float:
        return self.wait_s + self.cpu_s

    @property
    def unaccounted_s(self) -> float:
        return self.elapsed_s - self.sampled_s

    @property
    def coverage(self) -> float:
        return self.sampled_s / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def parts(self) -> dict[str, float]:
        """Every time source except TOTAL_TIME; they add up to elapsed_s."""
        out = dict(self.waits)
        out[CPU] = self.cpu_s
        out[UNACCOUNTED] = self.unaccounted_s
        return out

    def rows(self) -> list[tuple[str, float]]:
        """TOTAL_TIME first, then the parts, largest first (the seed's table)."""
        parts = sorted(self.parts().items(), key=lambda kv: (-kv[1], kv[0]))
        return [(TOTAL, self.elapsed_s), *parts]

    def to_dict(self) -> dict[str, object]:
        return {
            "pid": self.pid,
            "elapsed_s": self.elapsed_s,
            "waits": dict(self.waits),
            "cpu_s": self.cpu_s,
            "unaccounted_s": self.unaccounted_s,
            "cpu_measured_s": self.cpu_measured_s,
            "cpu_source": self.cpu_source,
            "cpu_stat_s": self.cpu_stat_s,
            "runqueue_s": self.runqueue_s,
            "samples": self.samples,
        }


def _add_optional(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a + b


def sum_profiles(profiles: Iterable[SessionProfile], pid: int = 0) -> SessionProfile:
    """The sessions' profiles added up (TOTAL_TIME = the sum of their elapsed times)."""
    total = SessionProfile(pid=pid, elapsed_s=0.0, cpu_measured_s=0.0, cpu_stat_s=0.0, runqueue_s=0.0)
    sources = set()
    for p in profiles:
        total.elapsed_s += p.elapsed_s
        for k, v in p.waits.items():
            total.waits[k] = total.waits.get(k, 0.0) + v
        total.cpu_s += p.cpu_s
        total.samples += p.samples
        sources.add(p.cpu_source)
        total.cpu_measured_s = _add_optional(total.cpu_measured_s, p.cpu_measured_s)
        total.cpu_stat_s = _add_optional(total.cpu_stat_s, p.cpu_stat_s)
        total.runqueue_s = _add_optional(total.runqueue_s, p.runqueue_s)
    total.cpu_source = sources.pop() if len(sources) == 1 else "mixed"
    return total



def flatten_profile(p: SessionProfile, prefix: str) -> dict[str, float]:
    """<prefix>.total_s (TOTAL_TIME), .wait.<Type:Event>_s, .cpu_s, .unaccounted_s
    (these add up to total_s), .wait_s (all waits), .coverage, and the measured
    cross-checks .cpu_measured_s, .cpu_stat_s, .runqueue_s when known."""
    out = {
        f"{prefix}.total_s": p.elapsed_s,
        f"{prefix}.cpu_s": p.cpu_s,
        f"{prefix}.unaccounted_s": p.unaccounted_s,
        f"{prefix}.wait_s": p.wait_s,
        f"{prefix}.coverage": p.coverage,
    }
    for key in ("cpu_measured_s", "cpu_stat_s", "runqueue_s"):
        value = getattr(p, key)
        if value is not None:
            out[f"{prefix}.{key}"] = value
    for event, seconds in p.waits.items():
        out[f"{prefix}.wait.{event}_s"] = seconds
    return out


def unflatten_profile(metrics: dict[str, float], prefix: str) -> SessionProfile | None:
    """The inverse of flatten_profile (for views that read result rows)."""
    if f"{prefix}.total_s" not in metrics:
        return None
    start = f"{prefix}.wait."
    waits = {k[len(start):-2]: v for k, v in metrics.items() if k.startswith(start) and k.endswith("_s")}
    return SessionProfile(
        pid=0,
        elapsed_s=metrics[f"{prefix}.total_s"],
        waits=waits,
        cpu_s=metrics.get(f"{prefix}.cpu_s", 0.0),
        cpu_measured_s=metrics.get(f"{prefix}.cpu_measured_s"),
        cpu_stat_s=metrics.get(f"{prefix}.cpu_stat_s"),
        runqueue_s=metrics.get(f"{prefix}.runqueue_s"),
    )


