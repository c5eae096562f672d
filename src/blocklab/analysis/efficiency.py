"""Engine efficiency: the engine's I/O rate as a share of its device twin's, per
setting, and the bottleneck the evidence points at.

Input: a run's result rows (their `pattern.*` metrics, probes/io.py) and its
twin.json (device/twin.py). Rows without pattern metrics (runs from before the
twin, imports) or settings whose twin was not measured simply get no
efficiency; nothing here raises on an old run.

    efficiency = the engine's IOPS (I/O up to 32 kB) or MB/s (larger I/O) over a cell's
                 timed span / the same figure fio reached replaying the setting's I/O
                 pattern (same sizes, read/write mix, queue depth, direct or buffered,
                 order, a file of the data's size on the same file system)

per cell, then per setting. A twin replayed beside the cells (twin.jsonl,
device/interleave.py) gives each cell its own replay, in the same block, for as
long as the cell ran: each cell's efficiency is a within-block ratio, and the
setting's is their geometric mean with a paired t interval on the log scale,
like every other comparison (analysis/paired.py). A twin measured after the
run (twin.json only: `--device-twin only`, older runs) gives the median of the
cells with a 95% bootstrap interval.

An efficiency whose interval lies wholly above 100% is not a figure: the disk
cannot deliver more than the disk delivers, so the twin did not replay what
the engine did. It is shown as a mismatch with its reason (the replay's I/O
size or queue depth against the cell's measured ones, else what is left: a
cache below the engine, or a busier disk during fio's runs).

The bottleneck, per setting:

    device   efficiency >= 0.8 and the disk busy >= 80% of the cell: the disk gives
             no more for this I/O (more of it in flight, or faster storage, would help)
    cpu      the engine's processes used >= 80% of the cores they could use
             (min(sessions, cores)): the engine's own work is the limit
    neither  the disk had more to give and the CPU was not exhausted: the time is
             latency or waiting (locks, round trips): the time profile says where
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..device.interleave import ReplayRecord, load_replays
from ..device.io_pattern import Pattern, setting_patterns
from ..device.replay import FioRun, Twin
from ..device.twin import RunTwins
from ..device.twin import load as load_twins
from ..probes.os_stats import CPU_TICK_S
from ..results import ENVIRONMENT_FILE, ResultRow, RunDir
from ..units import label_of

DEVICE_BOUND = 0.8  # efficiency at or above this, with the disk busy: the disk is the limit
DEVICE_BUSY_PCT = 80.0  # the disk's utilisation at or above this: busy nearly all the cell
CPU_BOUND = 0.8  # the engine's CPU at or above this share of the cores it could use
MACHINE_BUSY_PCT = 90.0  # all CPUs this busy (everyone's processes): the engine may have waited for one
ABOVE_ONE = 1.05  # an efficiency above this is explained, not hidden: the twin met a busier machine
FSYNCS_NAMED = 10.0  # fsyncs a second from which the verdict names them as a wait
# CPU time is counted in clock ticks (10 ms): below this many ticks a share of the
# cores is mostly rounding (one tick of 0.03 s reads as a third of a core), so
# it is shown as below the resolution and no CPU bottleneck is called from it.
CPU_RESOLVED_TICKS = 5

Describe = Callable[[str], str]


@dataclass(frozen=True)
class SettingEfficiency:
    """One setting against its twin (efficiency fields NaN when there is no twin)."""

    label: str
    pattern: Pattern | None
    why_none: str  # why there is no efficiency ("" when there is)
    twin: Twin | None
    unit: str  # "IOPS" or "MB/s"
    values: tuple[float, ...]  # per ok cell
    median: float
    ci_low: float
    ci_high: float
    engine_rate: float  # the engine's median rate in `unit`
    util_pct: float  # the disk's utilisation (median of the cells)
    server_cores: float  # cores the engine's processes used (median)
    cores_available: float  # min(sessions, cores of the machine)
    cpu_busy_pct: float  # all CPUs of the machine, everyone's processes
    bottleneck: str  # "device" | "cpu" | "device+cpu" | "neither" | "" (not known)
    profiled: bool = False  # the cells carry a time profile (where the sessions' time went)
    cpu_seconds: float = math.nan  # the engine's CPU time in a cell (median): what the share is made of
    fsyncs_per_s: float = math.nan  # the engine's fsyncs (median of the cells): waits the twin does not replay
    mismatch: str = ""  # the interval lies wholly above 100%: why the twin did not match ("" when it did)
    paired: bool = False  # each cell against its own replay in its block (geometric mean, t interval)

    @property
    def has(self) -> bool:
        return self.twin is not None and math.isfinite(self.median) and not self.mismatch

    @property
    def cpu_resolved(self) -> bool:
        """The cells' CPU time is enough clock ticks for a share of the cores to mean something
        (unknown CPU time, an old run: taken as resolved)."""
        return not math.isfinite(self.cpu_seconds) or self.cpu_seconds >= CPU_RESOLVED_TICKS * CPU_TICK_S

    @property
    def cores_used(self) -> float:
        """The cores the engine used, never more than it could use (ticks' rounding can
        read 1.14 of 1 core on a short cell); NaN below the resolution."""
        if not self.cpu_resolved or not math.isfinite(self.server_cores):
            return math.nan
        return min(self.server_cores, self.cores_available) if math.isfinite(self.cores_available) else self.server_cores

    def cpu_text(self, sep: str = " of ") -> str:
        """'0.51 of 1', '< resolution (0.01 s of CPU)', '–'."""
        if math.isfinite(self.server_cores) and not self.cpu_resolved:
            return f"< resolution ({self.cpu_seconds:.2f} s)"
        used = self.cores_used
        if not math.isfinite(used):
            return "–"
        return f"{used:.2f}{sep}{self.cores_available:.0f}" if math.isfinite(self.cores_available) else f"{used:.2f}"

    @property
    def device_rate(self) -> float:
        return self.twin.rate(self.unit) if self.twin else math.nan

    def percent(self) -> str:
        """'52%' or '52% [48, 55]' (no interval from one cell)."""
        if not self.has:
            return "–"
        text = f"{100 * self.median:.0f}%"
        if len(self.values) > 1 and math.isfinite(self.ci_low) and math.isfinite(self.ci_high):
            text += f" [{100 * self.ci_low:.0f}, {100 * self.ci_high:.0f}]"
        return text

    def to_dict(self) -> dict[str, object]:
        return {
            "pattern": self.pattern.key if self.pattern else None,
            "pattern_text": self.pattern.describe() if self.pattern else None,
            "why_none": self.why_none or None,
            "unit": self.unit,
            "engine": _finite_or_none(self.engine_rate),
            "device": _finite_or_none(self.device_rate),
            # a mismatched twin's efficiency is no figure: its values stay for the record
            "efficiency": None if self.mismatch else _finite_or_none(self.median),
            "ci_low": None if self.mismatch else _finite_or_none(self.ci_low),
            "ci_high": None if self.mismatch else _finite_or_none(self.ci_high),
            "n": len(self.values),
            "values": [round(v, 4) for v in self.values],
            "device_util_pct": _finite_or_none(self.util_pct),
            "server_cores": _finite_or_none(self.cores_used),
            "server_cpu_s": _finite_or_none(self.cpu_seconds),
            "cpu_resolved": self.cpu_resolved,
            "cores_available": _finite_or_none(self.cores_available),
            "cpu_busy_pct": _finite_or_none(self.cpu_busy_pct),
            "bottleneck": self.bottleneck or None,
            "device_measured": self.twin.measured if self.twin else None,
            "mismatch": self.mismatch or None,
            "paired": self.paired,
        }


def _finite_or_none(x: float) -> float | None:
    return round(x, 6) if isinstance(x, (int, float)) and math.isfinite(x) else None


def _median(values: Iterable[float]) -> float:
    xs = [v for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    return statistics.median(xs) if xs else math.nan


# ====================================================================== the analysis
def analyse(rows: Iterable[ResultRow], twins: RunTwins | None, *, order: Iterable[str] = (), seed: int = 0,
            replays: Iterable[ReplayRecord] = ()) -> list[SettingEfficiency]:
    """Every setting with ok rows (in `order` first, then as met), against its twin:
    the replays beside its cells when there are any (paired per block), else the
    twin measured after the run."""
    rows = [r for r in rows if r.ok]
    by_label: dict[str, list[ResultRow]] = {}
    for label in order:
        by_label[label] = []
    for row in rows:
        by_label.setdefault(label_of(row.settings), []).append(row)
    patterns = setting_patterns(rows)
    known = twins.twins if twins is not None and twins.status == "measured" else {}
    beside = {(str(r.get("cell_id")), int(r.get("attempt") or 1)): r for r in replays}
    out = []
    for label, cells in by_label.items():
        if not cells:
            continue
        p = patterns.get(label)
        pattern = p if isinstance(p, Pattern) else None
        mine = [(row, beside[key]) for row in cells if (key := (row.cell_id, int(row.notes.get("attempt", 1)))) in beside]
        if mine:
            eff = _paired(label, mine, pattern)
        else:
            eff = _after_the_run(label, cells, pattern, known.get(pattern.key) if pattern else None, seed)
        twin, values, (med, lo, hi), unit = eff
        mismatch = mismatch_reason(cells, twin, lo) if twin is not None else ""
        util = _median(r.metrics.get("pattern.util_pct", math.nan) for r in cells)
        server = _median(r.metrics.get("pattern.server_cores", math.nan) for r in cells)
        available = _median(min(r.metrics.get("pattern.sessions", math.inf), r.metrics.get("pattern.cores", math.inf)) for r in cells)
        busy = _median(r.metrics.get("pattern.cpu_busy_pct", math.nan) for r in cells)
        cpu_s = _median(r.metrics.get("server_cpu_s", math.nan) for r in cells)
        resolved = not math.isfinite(cpu_s) or cpu_s >= CPU_RESOLVED_TICKS * CPU_TICK_S
        why = "" if twin is not None else _why_none(p, pattern, twins)
        if mismatch:
            why = f"the twin did not match: {mismatch}"
        rate_metric = rate_key(twin.pattern if twin is not None else pattern)
        out.append(SettingEfficiency(
            label=label, pattern=twin.pattern if twin is not None else pattern, why_none=why, twin=twin, unit=unit,
            values=values, median=med, ci_low=lo, ci_high=hi,
            engine_rate=_median(r.metrics[rate_metric] for r in cells if rate_metric in r.metrics), util_pct=util,
            server_cores=server, cores_available=available, cpu_busy_pct=busy,
            bottleneck=bottleneck(math.nan if mismatch else med, util, server if resolved else math.nan, available),
            profiled=any("profile.slowest.total_s" in r.metrics for r in cells),
            cpu_seconds=cpu_s,
            fsyncs_per_s=_median(r.metrics.get("pattern.fsyncs_per_s", math.nan) for r in cells),
            mismatch=mismatch, paired=bool(mine),
        ))
    return out


_Estimate = tuple[Twin | None, tuple[float, ...], tuple[float, float, float], str]


def _after_the_run(label: str, cells: list[ResultRow], pattern: Pattern | None, twin: Twin | None, seed: int) -> _Estimate:
    """A twin measured once per pattern after the run: each cell's rate over it, the median with a bootstrap interval."""
    from .stats import median_ci

    unit = pattern.unit if pattern else "IOPS"
    metric = rate_key(pattern)
    rates = [r.metrics[metric] for r in cells if metric in r.metrics]
    if twin is None or twin.rate(unit) <= 0 or not rates:
        return twin, (), (math.nan, math.nan, math.nan), unit
    values = tuple(rate / twin.rate(unit) for rate in rates)
    return twin, values, median_ci(list(values), seed=seed), unit


def _paired(label: str, pairs: list[tuple[ResultRow, ReplayRecord]], pattern: Pattern | None) -> _Estimate:
    """Each cell against the replay beside it: the efficiency of each block, their
    geometric mean with a paired t interval on the log scale (one block: no interval).
    The setting's twin is the median of its replays (of the pattern most of them replayed)."""
    from collections import Counter

    from scipy import stats as _scipy_stats

    from ..device.interleave import replay_run
    from ..device.replay import median_twin
    from .stats import CONFIDENCE

    good = [(row, rec, run) for row, rec in pairs if (run := replay_run(rec)) is not None]
    if not good:
        return None, (), (math.nan, math.nan, math.nan), pattern.unit if pattern else "IOPS"
    key = Counter(str(rec["key"]) for _, rec, _ in good).most_common(1)[0][0]
    chosen = [(row, rec, run) for row, rec, run in good if rec["key"] == key]
    first = chosen[0][1]
    replayed = Pattern.from_dict(first["pattern"])
    twin = median_twin(replayed, [run for _, _, run in chosen], fio_version=str(first.get("fio_version", "")),
                        ioengine="", command=str(first.get("command", "")), measured=str(first.get("started", "")),
                        device=str(first.get("device", "")), directory=str(first.get("directory", "")))
    values = []
    for row, rec, run in good:  # every cell against its own replay, whatever pattern it replayed
        p = Pattern.from_dict(rec["pattern"])
        metric, device = rate_key(p), _run_rate(run, p)
        if metric in row.metrics and device > 0 and row.metrics[metric] > 0:
            values.append(row.metrics[metric] / device)
    if not values:
        return twin, (), (math.nan, math.nan, math.nan), replayed.unit
    logs = [math.log(v) for v in values]
    mean = statistics.fmean(logs)
    if len(logs) < 2:
        return twin, tuple(values), (math.exp(mean), math.nan, math.nan), replayed.unit
    half = float(_scipy_stats.t.ppf(0.5 + CONFIDENCE / 2, len(logs) - 1)) * statistics.stdev(logs) / math.sqrt(len(logs))
    return twin, tuple(values), (math.exp(mean), math.exp(mean - half), math.exp(mean + half)), replayed.unit


def _run_rate(run: FioRun, p: Pattern) -> float:
    """A replay's foreground rate in the pattern's unit (as Twin.rate)."""
    if p.main == "read":
        return float(run.read_iops if p.unit == "IOPS" else run.read_mb_per_s)
    return float(run.write_iops if p.unit == "IOPS" else run.write_mb_per_s)


SIZE_OFF = 1.15  # the replay's I/O size this far from the cell's measured one is a difference worth naming
DEPTH_OFF = 1.25  # likewise for the I/Os in flight


def mismatch_reason(cells: list[ResultRow], twin: Twin, ci_low: float) -> str:
    """Why a twin whose efficiency interval lies wholly above 100% did not match
    ('' when it is not above): the replayed I/O size or queue depth against the
    cells' measured ones, or, when both match, what is left."""
    if not (math.isfinite(ci_low) and ci_low > 1.0):
        return ""
    p = twin.pattern
    kind = p.main
    sizes = [r.metrics[f"pattern.{kind}_kb"] * 1024 for r in cells if r.metrics.get(f"pattern.{kind}_kb")]
    depths = [r.metrics[f"pattern.{kind}_flight_ms"] / r.metrics["pattern.busy_ms"] for r in cells
              if r.metrics.get("pattern.busy_ms") and f"pattern.{kind}_flight_ms" in r.metrics]
    reasons = []
    if sizes and _off(p.main_bs, statistics.median(sizes), SIZE_OFF):
        reasons.append(f"the replay's {kind}s were {_kb(p.main_bs)}, the cells' measured {_kb(statistics.median(sizes))} on average")
    if depths and _off(p.main_depth, statistics.median(depths), DEPTH_OFF):
        reasons.append(f"the replay kept {p.main_depth} {kind}(s) in flight, the cells' disk counters show "
                       f"{statistics.median(depths):.1f}")
    if reasons:
        return "; ".join(reasons)
    return (f"the replay's I/O size ({_kb(p.main_bs)}) and queue depth ({p.main_depth}) match the cells' measured ones, yet "
            "the engine got more from the disk than fio: a cache below the engine (the disk's or the hypervisor's) "
            "served it, or fio met a busier disk")


def _off(a: float, b: float, factor: float) -> bool:
    return a > 0 and b > 0 and max(a / b, b / a) > factor


def _kb(size: float) -> str:
    return f"{size / 1024:.0f} kB" if size >= 1024 else f"{size:.0f} B"


def rate_key(pattern: Pattern | None) -> str:
    """The cell's metric its twin's rate is set against: the foreground kind's IOPS
    (I/O up to 32 kB) or MB/s, the engine's own count over the workload's time."""
    if pattern is None:
        return "pattern.iops"
    return f"pattern.{pattern.main}_{'iops' if pattern.unit == 'IOPS' else 'mb_per_s'}"


def _why_none(p: Pattern | str | None, pattern: Pattern | None, twins: RunTwins | None) -> str:
    if isinstance(p, str):
        return p
    if p is None:
        return "no measured cell"
    if twins is None:
        return "no device twin for this run (twin.json absent)"
    if twins.status != "measured":
        return f"device twin {twins.status}: {twins.reason}"
    assert pattern is not None
    return twins.failures.get(pattern.key, "the twin of this pattern was not measured")


def bottleneck(efficiency: float, util_pct: float, server_cores: float, cores_available: float) -> str:
    """'device', 'cpu', both, 'neither', or '' when the evidence says nothing."""
    device = math.isfinite(efficiency) and efficiency >= DEVICE_BOUND and math.isfinite(util_pct) and util_pct >= DEVICE_BUSY_PCT
    cpu = (math.isfinite(server_cores) and math.isfinite(cores_available) and cores_available > 0
           and server_cores >= CPU_BOUND * cores_available)
    if device and cpu:
        return "device+cpu"
    if device:
        return "device"
    if cpu:
        return "cpu"
    if math.isfinite(efficiency):  # the twin says the disk had more to give
        return "neither"
    return ""


def for_run(run_dir: RunDir | Path | str, order: Iterable[str] = (), seed: int = 0) -> list[SettingEfficiency]:
    rd = run_dir if isinstance(run_dir, RunDir) else RunDir(run_dir)
    return analyse(rd.rows(), load_twins(rd), order=order, seed=seed, replays=load_replays(rd))


def engine_name(run_dir: RunDir | Path | str) -> str:
    """'PostgreSQL': how the run's engine is written (environment.json), else 'the engine'."""
    rd = run_dir if isinstance(run_dir, RunDir) else RunDir(run_dir)
    try:
        env = rd.read_json(ENVIRONMENT_FILE)
    except Exception:  # no environment: the words need no name
        return "the engine"
    if env.get("engine_display"):
        return str(env["engine_display"])
    from ..engines import engine_class

    try:
        return str(engine_class(str(env.get("engine", ""))).display)
    except Exception:  # an engine this blocklab does not know
        return str(env.get("engine") or "the engine")


# ====================================================================== words
def sentence(effs: list[SettingEfficiency], engine: str, describe: Describe = str, best: str | None = None) -> str:
    """'PostgreSQL reaches 52% [48, 55] of what the disk delivers for the same I/O at
    16 (128 kB) (128 kB reads); 31% at 1 (8 kB) (8 kB reads).' The best setting
    first, then the least and the most efficient ones."""
    have = [e for e in effs if e.has]
    if not have:
        return ""
    chosen: list[SettingEfficiency] = []
    for pick in (next((e for e in have if e.label == best), None), min(have, key=lambda e: e.median), max(have, key=lambda e: e.median)):
        if pick is not None and pick not in chosen:
            chosen.append(pick)
    parts = [f"{e.percent()} at {where(e.label, describe)} with {e.pattern.short()}" for e in chosen if e.pattern is not None]
    if len(parts) > 2:
        parts[-1] = "and " + parts[-1]
    return f"{engine} reaches {(', ' if len(parts) > 2 else ' and ').join(parts)} of what the disk delivers for the same I/O."


def where(label: str, describe: Describe = str) -> str:
    """'multiblock_read = 16 (128 kB)' for a one-knob label (its value alone reads oddly in a
    sentence: 'at on'), the label itself for several."""
    if "," in label or "=" not in label:
        return describe(label)
    knob = label.split("=", 1)[0]
    text = describe(label)
    return text if text.startswith(knob) else f"{knob} = {text}"


def bottleneck_sentence(e: SettingEfficiency, engine: str, describe: Describe = str) -> str:
    """What limits the setting `e`, in words, with the evidence; '' when nothing is known."""
    where_ = where(e.label, describe)
    cpu = (f"its processes used {e.cores_used:.2f} of the {e.cores_available:.0f} core(s) they could use"
           if math.isfinite(e.cores_used) and math.isfinite(e.cores_available) else "")
    if math.isfinite(e.server_cores) and not e.cpu_resolved:
        cpu = (f"its processes' CPU time ({e.cpu_seconds:.2f} s a cell) is below what the clock ticks resolve "
               f"({CPU_TICK_S * 1000:.0f} ms each), so the CPU's share is not known")
    disk = ""
    if e.has:
        assert e.pattern is not None
        disk = (f"{engine} gets {e.percent()} of what fio gets from the disk for the same I/O ({e.pattern.describe()})"
                + (f", and the disk was busy {e.util_pct:.0f}% of the time" if math.isfinite(e.util_pct) else ""))
    machine = ""
    if e.has and e.median > ABOVE_ONE:
        machine += (" Above 100%: fio's runs met a busier disk (or busier CPUs) than the engine's cells did, or the engine "
                    "kept more I/O in flight than the disk's counters show; read it as 'the disk gives about this much'.")
    if math.isfinite(e.cpu_busy_pct) and e.cpu_busy_pct >= MACHINE_BUSY_PCT:
        machine += (f" All CPUs were {e.cpu_busy_pct:.0f}% busy (other processes' included): the engine may also have "
                   "waited for a CPU.")
    if e.bottleneck == "device+cpu":
        return f"At {where_} the disk and the CPU are both at their limit: {disk}; {cpu}.{machine}"
    if e.bottleneck == "device":
        return (f"At {where_} the disk is the bottleneck: {disk}. Faster storage, or more I/O in flight, "
                f"would help; database settings would not.{machine}")
    if e.bottleneck == "cpu":
        text = f"At {where_} the CPU is the bottleneck: {cpu}"
        return text + (f"; {disk}." if disk else ".") + machine
    if e.bottleneck == "neither":
        profile = ": the time profile below says which" if e.profiled else " (a time profile, as the update workload records, would say which)"
        fsyncs = ""
        if math.isfinite(e.fsyncs_per_s) and e.fsyncs_per_s >= FSYNCS_NAMED:
            fsyncs = (f" Its {e.fsyncs_per_s:,.0f} fsyncs a second are each a wait for the disk's cache flush, which the "
                      "twin does not replay: a likely part of it.")
        return (f"At {where_} neither the disk nor the CPU is the bottleneck: {disk}; {cpu or 'the CPU was not measured'}. "
                f"The time goes to latency or waiting (locks, round trips, flushes){profile}.{fsyncs}{machine}")
    return ""


def summary_part(effs: list[SettingEfficiency], twins: RunTwins | None, engine: str, describe: Describe = str,
                 best: str | None = None) -> dict[str, object]:
    """summary.json's "efficiency" entry."""
    chosen = next((e for e in effs if e.label == best), None)
    return {
        "device_twin": twins.status if twins else "absent",
        "device_twin_reason": (twins.reason if twins else "") or None,
        "fio_version": twins.fio_version if twins else None,
        "sentence": sentence(effs, engine, describe, best) or None,
        "bottleneck": chosen.bottleneck if chosen else None,
        "verdict": (bottleneck_sentence(chosen, engine, describe) if chosen else "") or None,
        "line": disk_line(chosen, engine, describe) or None,
        "settings": {e.label: e.to_dict() for e in effs},
    }


def add_to_summary(summary: dict[str, Any], run_dir: RunDir | Path | str, describe: Describe | None = None) -> None:
    """Put the efficiency into a summary (in place): summary["efficiency"], the
    disk's one line as the verdict's last, and the efficiency sentence and the
    bottleneck's reasoning in the explanation. Idempotent (a summary that has them
    already gets them replaced); does nothing to a run without pattern metrics or twin.json."""
    from .verdict import compose

    rd = run_dir if isinstance(run_dir, RunDir) else RunDir(run_dir)
    twins = load_twins(rd)
    rows = rd.rows()
    if twins is None and not any("pattern.seconds" in r.metrics for r in rows):
        return
    old = summary.get("efficiency") or {}
    explain = [line for line in summary.get("explain") or [] if line not in (old.get("sentence"), old.get("verdict"))]
    effs = analyse(rows, twins, order=list(summary.get("settings") or {}), seed=int(summary.get("seed") or 0),
                   replays=load_replays(rd))
    part = summary_part(effs, twins, engine_name(rd), describe or str, summary.get("best_label"))
    summary["efficiency"] = part
    summary["explain"] = explain + [p for p in (part["sentence"], part["verdict"]) if p]
    if summary.get("verdict_options"):
        summary["verdict"] = compose(summary["verdict_options"], str(part.get("line") or ""))


def disk_line(e: SettingEfficiency | None, engine: str, describe: Describe = str) -> str:
    """The verdict's last line: what the disk allowed at the best setting.
    'Disk: at 16 (128 kB) PostgreSQL gets 62% [55, 69] of what fio gets for the same I/O; the limit is neither the disk nor the CPU.'"""
    if e is not None and e.mismatch:  # never a figure: say that the twin did not match, the report says why
        return f"Disk: at {describe(e.label)} the device twin did not replay the engine's I/O (a mismatch: see the report)."
    if e is None or not e.has:
        return ""
    limit = {"device": "the disk is the limit", "cpu": "the CPU is the limit", "device+cpu": "the disk and the CPU are both at their limit",
             "neither": "neither the disk nor the CPU is the limit (latency or waiting)"}.get(e.bottleneck, "")
    return f"Disk: at {describe(e.label)} {engine} gets {e.percent()} of what fio gets for the same I/O" + (f"; {limit}." if limit else ".")


# ====================================================================== the pictures' numbers
def device_values(effs: list[SettingEfficiency], rows: Iterable[ResultRow], metric: str) -> dict[str, float]:
    """Label -> what `metric` (a throughput, higher is better) would be if the engine
    got all the disk gives for its I/O: each cell's value over its efficiency, the
    median per setting. For MB/s this is the twin's own MB/s; for rows/s, the rows
    a scan would return at the twin's speed."""
    by_label: dict[str, list[ResultRow]] = {}
    for r in rows:
        if r.ok:
            by_label.setdefault(label_of(r.settings), []).append(r)
    out: dict[str, float] = {}
    for e in effs:
        if not e.has:
            continue
        unit_key = rate_key(e.pattern)
        scaled = [r.metrics[metric] * e.device_rate / r.metrics[unit_key]
                  for r in by_label.get(e.label, []) if metric in r.metrics and r.metrics.get(unit_key)]
        if scaled:
            out[e.label] = statistics.median(scaled)
    return out


def device_points(effs: list[SettingEfficiency]) -> dict[str, dict[str, float]]:
    """Label -> the twin's read IOPS, MB/s and read latency (ms): a SLOB petal of the disk."""
    out = {}
    for e in effs:
        if e.twin is None:
            continue
        t = e.twin
        lat = t.read_lat_ms if math.isfinite(t.read_lat_ms) else t.lat_ms
        out[e.label] = {"read_iops": t.read_iops, "mb_per_s": t.mb_per_s, "read_latency_ms": lat,
                        "iodepth": float(t.pattern.read_depth or t.pattern.main_depth)}
    return out


def by_label(effs: list[SettingEfficiency]) -> Mapping[str, SettingEfficiency]:
    return {e.label: e for e in effs}


__all__ = [
    "SettingEfficiency",
    "add_to_summary",
    "analyse",
    "bottleneck",
    "bottleneck_sentence",
    "by_label",
    "device_points",
    "device_values",
    "disk_line",
    "engine_name",
    "for_run",
    "sentence",
    "summary_part",
]
