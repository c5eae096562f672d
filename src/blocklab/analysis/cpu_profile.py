"""Why a setting costs: the functions whose CPU per unit of work grows (or shrinks)
with a knob, from the stacks sampled in every cell (probes/cpu_profile.py).
Computes, never draws.

Seed 001 looked at two stack profiles by eye and saw qsort on top at 32 kB. Here
each profiled cell gives, per function, the CPU seconds it took per unit of the
workload's own work (per row inserted, per row scanned, per read: the metric
the workload names in its `work`), both

* self: samples whose own frame is the function (these add up to the cell's CPU);
* inclusive: samples with the function anywhere on the stack (counted once per
  stack: a recursive function is not counted twice).

Along one knob (the others averaged within each block, or held at `where`), a
function's growth is the ratio of its cost per unit at the knob's largest value
to its cost at the smallest, from the randomised blocks: the per-block ratios
and their paired t interval on the log scale (analysis/paired.py BlockModel). A
function's cells of one value in one block are pooled (their CPU over their
work); where none of them sampled it, it counts half a sample (its cost is below
the sampling's resolution, not zero), so ratios stay finite, and no interval is
narrower than its sample counts allow (a Poisson count's log variance). The share of the
extra CPU a function explains is its self cost's change over the total's change
(per unit of work, largest value minus smallest, averaged over blocks): the
self costs add up to the total, so the shares add up to 1.

Frames perf could not name (`[unnamed in mariadbd]`) are never ranked as
functions: their share of the samples is reported per setting instead.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..lazy import scipy_stats as _scipy_stats
from ..probes.cpu_profile import UNNAMED, read_folded
from ..results import ResultRow
from ..spec import Scalar
from .paired import BlockCell, fit_blocks
from .stats import CONFIDENCE

MIN_SAMPLES = 10  # a function with fewer samples (inclusive) in the cells ranked is not ranked: it says nothing
TOP = 12  # functions kept per ranking


@dataclass
class CellCosts:
    """One profiled cell: its CPU per function, in seconds (self and inclusive)."""

    row: ResultRow
    work: float  # units of work the cell did
    seconds_per_sample: float
    total_s: float
    self_s: dict[str, float]
    inclusive_s: dict[str, float]
    unnamed_share: float
    stacks: Counter[str] = field(repr=False, default_factory=Counter)

    def per_unit(self, function: str, kind: str = "self") -> float:
        """Seconds per unit of work; half a sample's worth where the function has none."""
        table = self.self_s if kind == "self" else self.inclusive_s
        seconds = table.get(function, 0.0) or 0.5 * self.seconds_per_sample
        return seconds / self.work

    @property
    def total_per_unit(self) -> float:
        return self.total_s / self.work


@dataclass(frozen=True)
class Interval:
    value: float
    low: float
    high: float

    def as_list(self) -> list[float]:
        return [self.value, self.low, self.high]


@dataclass
class FunctionGrowth:
    """One function along one knob."""

    function: str
    self_per_unit: dict[str, Interval]  # knob value (as text) -> seconds per unit
    inclusive_per_unit: dict[str, Interval]
    ratio: Interval  # self cost per unit, largest value / smallest (paired over blocks)
    inclusive_ratio: Interval
    extra_share: float  # of the total's change per unit (self)
    extra_per_unit: float  # its self cost's change per unit of work, seconds
    samples: int
    end_samples: int = 0  # its inclusive samples at the end where it costs more (smallest or largest value)

    @property
    def direction(self) -> str:
        if self.end_samples < MIN_SAMPLES:  # a few samples' ratio is the sampling's grain, not a change
            return "too few samples"
        if math.isfinite(self.ratio.low) and self.ratio.low > 1.0:
            return "grows"
        if math.isfinite(self.ratio.high) and self.ratio.high < 1.0:
            return "shrinks"
        return "no clear change"


@dataclass
class KnobRanking:
    """The functions ranked by how much of the CPU change along `knob` they explain."""

    knob: str
    values: list[str]  # smallest first, as text
    where: Mapping[str, object]
    unit: str
    work_metric: str
    total_per_unit: dict[str, Interval]
    total_ratio: Interval
    unnamed_share: dict[str, float]
    functions: list[FunctionGrowth]
    cells: int
    blocks: int

    def to_dict(self) -> dict[str, object]:
        return {
            "knob": self.knob, "values": self.values, "where": {k: str(v) for k, v in self.where.items()},
            "unit": self.unit, "work_metric": self.work_metric, "cells": self.cells, "blocks": self.blocks,
            "total_per_unit": {k: v.as_list() for k, v in self.total_per_unit.items()},
            "total_ratio": self.total_ratio.as_list(), "unnamed_share": self.unnamed_share,
            "functions": [{"function": f.function, "direction": f.direction, "ratio": f.ratio.as_list(),
                           "inclusive_ratio": f.inclusive_ratio.as_list(), "extra_share": f.extra_share,
                           "extra_per_unit": f.extra_per_unit, "samples": f.samples,
                           "self_per_unit": {k: v.as_list() for k, v in f.self_per_unit.items()},
                           "inclusive_per_unit": {k: v.as_list() for k, v in f.inclusive_per_unit.items()}}
                          for f in self.functions],
        }


# ---------------------------------------------------------------------- reading
def cell_costs(row: ResultRow, run_path: Path, work_metric: str) -> CellCosts | None:
    """A profiled ok row's costs (None: no profile, no samples, or no work counted)."""
    note = row.notes.get("cpu_profile")
    work = row.metrics.get(work_metric, 0.0)
    if not row.ok or not isinstance(note, dict) or not note.get("samples") or work <= 0:
        return None
    try:
        stacks = read_folded((run_path / str(note["file"])).read_text())
    except OSError:
        return None
    samples = sum(stacks.values())
    if not samples:
        return None
    per_sample = float(note.get("cpu_s", 0.0)) / float(note["samples"]) if note.get("samples") else 0.0
    self_n: Counter[str] = Counter()
    incl_n: Counter[str] = Counter()
    for stack, n in stacks.items():
        frames = stack.split(";")[1:]  # the first is the process name
        if not frames:
            continue
        self_n[frames[-1]] += n
        for f in set(frames):
            incl_n[f] += n
    return CellCosts(
        row=row, work=float(work), seconds_per_sample=per_sample, total_s=samples * per_sample,
        self_s={f: n * per_sample for f, n in self_n.items()}, inclusive_s={f: n * per_sample for f, n in incl_n.items()},
        unnamed_share=float(note.get("unnamed_share", 0.0)), stacks=stacks,
    )


def load_costs(rows: Iterable[ResultRow], run_path: Path, work_metric: str) -> list[CellCosts]:
    return [c for r in rows if (c := cell_costs(r, Path(run_path), work_metric)) is not None]


# ---------------------------------------------------------------------- knobs
def knob_values(costs: Sequence[CellCosts], knob: str) -> list[Scalar]:
    """The knob's values in these cells, smallest first (numbers and on/off by value, text as first seen)."""
    seen: list[Scalar] = []
    for c in costs:
        v = c.row.settings.get(knob)
        if v is not None and v not in seen:
            seen.append(v)
    if all(isinstance(v, (int, float)) for v in seen):  # bools too: off before on
        return sorted(seen)
    return seen


def value_text(v: object) -> str:
    if isinstance(v, bool):
        return "on" if v else "off"
    return str(v)


def _matches(c: CellCosts, where: Mapping[str, object]) -> bool:
    return all(value_text(c.row.settings.get(k)) == value_text(v) for k, v in where.items())


# ---------------------------------------------------------------------- the ranking
def rank_along(costs: Sequence[CellCosts], knob: str, *, unit: str, work_metric: str,
               where: Mapping[str, object] | None = None, top: int = TOP, follow: Sequence[str] = ()) -> KnobRanking | None:
    """Rank the functions by the CPU per unit of work they add (or save) from the knob's
    smallest value to its largest; None when the cells hold fewer than two values.
    `follow`: functions kept whatever their rank (another knob's answer, followed here)."""
    where = dict(where or {})
    chosen = [c for c in costs if _matches(c, where) and knob in c.row.settings]
    values = knob_values(chosen, knob)
    if len(values) < 2:
        return None
    texts = [value_text(v) for v in values]
    lo_key, hi_key = texts[0], texts[-1]
    # block -> value -> the cells there (other knobs averaged within the block)
    grid: dict[int, dict[str, list[CellCosts]]] = defaultdict(lambda: defaultdict(list))
    for c in chosen:
        grid[c.row.block][value_text(c.row.settings[knob])].append(c)
    samples: Counter[str] = Counter()
    for c in chosen:
        for f, s in c.self_s.items():
            samples[f] += round(s / c.seconds_per_sample) if c.seconds_per_sample else 0
        for f in c.inclusive_s:
            samples.setdefault(f, 0)
    named = [f for f in samples if not f.startswith(UNNAMED)]
    incl_samples = Counter({f: sum(round(c.inclusive_s.get(f, 0.0) / c.seconds_per_sample) for c in chosen if c.seconds_per_sample)
                            for f in named})
    candidates = [f for f in named if incl_samples[f] >= MIN_SAMPLES or (f in follow and incl_samples[f] > 0)]

    def mean_cost(block_cells: list[CellCosts], f: str | None, kind: str = "self") -> float:
        """The cells' CPU per unit pooled (their seconds over their work); a function none of
        them sampled counts half a sample over them all (its cost is below the grain, not 0)."""
        work = sum(c.work for c in block_cells)
        if f is None:
            return sum(c.total_s for c in block_cells) / work
        seconds = sum((c.self_s if kind == "self" else c.inclusive_s).get(f, 0.0) for c in block_cells)
        return (seconds or 0.5 * statistics.fmean(c.seconds_per_sample for c in block_cells)) / work

    def per_value(f: str | None, kind: str = "self") -> dict[str, Interval]:
        out = {}
        for t in texts:
            vals = [mean_cost(cells[t], f, kind) for cells in grid.values() if cells.get(t)]
            out[t] = _mean_interval(vals)
        return out

    def ratio(f: str | None, kind: str = "self") -> Interval:
        cells = [BlockCell(b, t, mean_cost(v[t], f, kind)) for b, v in grid.items() for t in (lo_key, hi_key) if v.get(t)]
        if not {c.key for c in cells} >= {lo_key, hi_key}:
            return Interval(math.nan, math.nan, math.nan)
        effect = fit_blocks(cells, order=[lo_key, hi_key]).effect(hi_key, lo_key)
        # A ratio of sample counts is no surer than the counts: a Poisson count n has a log
        # variance of about 1/n, so the interval is never narrower than the counts allow (two
        # blocks with the same 3 samples against 2 would otherwise give a ratio 'sure' to 0%)
        shared = [v for v in grid.values() if v.get(lo_key) and v.get(hi_key)]
        if f is not None and shared and effect.df > 0:
            table = "self_s" if kind == "self" else "inclusive_s"

            def count(cs: list[CellCosts]) -> float:
                return max(0.5, sum(getattr(c, table).get(f, 0.0) / c.seconds_per_sample for c in cs if c.seconds_per_sample))
            poisson = math.sqrt(statistics.fmean(1 / count(v[hi_key]) + 1 / count(v[lo_key]) for v in shared) / len(shared))
            if not poisson <= effect.se:  # a known variance: the normal quantile, not Student's
                z = float(_scipy_stats.norm.ppf(0.5 + CONFIDENCE / 2.0))
                return Interval(math.exp(effect.estimate), math.exp(effect.estimate - z * poisson),
                                math.exp(effect.estimate + z * poisson))
        r, low, high = effect.interval(1.0 - CONFIDENCE)
        return Interval(r, low, high)

    both = [cells for cells in grid.values() if cells.get(lo_key) and cells.get(hi_key)]

    def extra(f: str | None) -> tuple[float, float]:
        """Over the blocks holding both ends: the mean of (cost at the largest value - at the
        smallest), self, and its standard error (NaN with one block)."""
        if not both:
            return math.nan, math.nan

        def raw(cells: list[CellCosts]) -> float:
            return statistics.fmean(c.total_per_unit if f is None else c.self_s.get(f, 0.0) / c.work for c in cells)
        d = [raw(cells[hi_key]) - raw(cells[lo_key]) for cells in both]
        se = statistics.stdev(d) / math.sqrt(len(d)) if len(d) > 1 else math.nan
        return statistics.fmean(d), se

    def end_count(f: str, key: str) -> int:
        return sum(round(c.inclusive_s.get(f, 0.0) / c.seconds_per_sample) for cells in grid.values()
                   for c in cells.get(key, []) if c.seconds_per_sample)

    total_ratio = ratio(None)
    total_extra, _ = extra(None)
    # a share of a change that is not there is noise: shares only where the total moved clearly
    total_moved = (math.isfinite(total_ratio.low) and total_ratio.low > 1.0) or (
        math.isfinite(total_ratio.high) and total_ratio.high < 1.0)
    functions, keys = [], {}
    for f in candidates:
        e, se = extra(f)
        functions.append(FunctionGrowth(
            function=f, self_per_unit=per_value(f), inclusive_per_unit=per_value(f, "inclusive"), ratio=ratio(f),
            inclusive_ratio=ratio(f, "inclusive"), extra_per_unit=e,
            extra_share=e / total_extra if total_moved and total_extra else math.nan, samples=samples[f],
            end_samples=max(end_count(f, lo_key), end_count(f, hi_key))))
        # ranked by the change it surely made: its mean change less one standard error (a change
        # seen in one block only, or swinging from block to block, ranks below a steady one)
        keys[f] = max(0.0, abs(e) - (se if math.isfinite(se) else abs(e) / 2)) if math.isfinite(e) else 0.0
    functions.sort(key=lambda g: (-keys[g.function], -g.samples))
    unnamed = {t: statistics.fmean(c.unnamed_share for cells in grid.values() for c in cells.get(t, [])) for t in texts
               if any(cells.get(t) for cells in grid.values())}
    return KnobRanking(knob=knob, values=texts, where=where, unit=unit, work_metric=work_metric,
                       total_per_unit=per_value(None), total_ratio=total_ratio, unnamed_share=unnamed,
                       functions=functions[:top] + [g for g in functions[top:] if g.function in follow],
                       cells=len(chosen), blocks=len(grid))


def _mean_interval(values: Sequence[float]) -> Interval:
    """The mean over blocks with its Student t interval (NaN bounds with one block)."""
    if not values:
        return Interval(math.nan, math.nan, math.nan)
    mean = statistics.fmean(values)
    if len(values) < 2:
        return Interval(mean, math.nan, math.nan)
    half = float(_scipy_stats.t.ppf(0.5 + CONFIDENCE / 2.0, len(values) - 1)) * statistics.stdev(values) / math.sqrt(len(values))
    return Interval(mean, mean - half, mean + half)


# ---------------------------------------------------------------------- a run's profiles
@dataclass
class ProfileAnalysis:
    """Every swept knob's ranking (the others averaged), and the per-setting profiles
    merged (for the flame graphs)."""

    unit: str
    work_metric: str
    rankings: list[KnobRanking]
    merged: dict[str, Counter[str]]  # setting label -> its cells' stacks added up
    cells_per_setting: dict[str, int]
    unnamed_share: dict[str, float]  # setting label -> share of samples with an unnamed own frame
    processes: str
    hz: int
    call_graph: str

    def to_dict(self) -> dict[str, object]:
        return {"unit": self.unit, "work_metric": self.work_metric, "rankings": [r.to_dict() for r in self.rankings],
                "cells_per_setting": self.cells_per_setting, "unnamed_share": self.unnamed_share,
                "processes": self.processes, "hz": self.hz, "call_graph": self.call_graph}


def analyse_run(rows: Sequence[ResultRow], run_path: Path, knobs: Sequence[str], work: tuple[str, str],
                label: Callable[[Mapping[str, object]], str], where: Mapping[str, object] | None = None) -> ProfileAnalysis | None:
    """The run's profiles: a ranking along each knob with two values or more, and the
    stacks of each setting (`label(settings)` names it). None: no profiled cell."""
    costs = load_costs(rows, run_path, work[0])
    if not costs:
        return None
    rankings = [r for k in knobs if k not in (where or {})
                if (r := rank_along(costs, k, unit=work[1], work_metric=work[0], where=where)) is not None]
    merged: dict[str, Counter[str]] = defaultdict(Counter)
    count: Counter[str] = Counter()
    unnamed: dict[str, list[float]] = defaultdict(list)
    for c in costs:
        key = label(c.row.settings)
        merged[key].update(c.stacks)
        count[key] += 1
        unnamed[key].append(c.unnamed_share)
    note = costs[0].row.notes["cpu_profile"]
    return ProfileAnalysis(unit=work[1], work_metric=work[0], rankings=rankings, merged=dict(merged),
                           cells_per_setting=dict(count), unnamed_share={k: statistics.fmean(v) for k, v in unnamed.items()},
                           processes=str(note.get("processes", "")), hz=int(note.get("hz", 0)),
                           call_graph=str(note.get("call_graph", "")))


def growth_sentence(ranking: KnobRanking, top: int = 3) -> str:
    """'Along block_size (1024 -> 65536): cksmCompute ×3.9 [2.8, 5.4] per row inserted, 61% of the extra CPU; ...'"""
    clear = [f for f in ranking.functions if f.direction in ("grows", "shrinks")]
    parts = []
    for f in (clear or ranking.functions)[:top]:
        share = f"; {_share_text(f.extra_share)} of the change" if math.isfinite(f.extra_share) else ""
        parts.append(f"{f.function} {_ratio_text(f.ratio)} ({f.direction}{share})")
    if not clear and parts:
        parts[0] = "no function changes clearly; the first: " + parts[0]
    where = ", ".join(f"{k}={value_text(v)}" for k, v in ranking.where.items())
    head = f"CPU per {ranking.unit} along {ranking.knob} ({ranking.values[0]} to {ranking.values[-1]}{'; ' + where if where else ''}): " \
           f"total {_ratio_text(ranking.total_ratio)}"
    return head + ("; " + "; ".join(parts) if parts else "; no function has enough samples to rank") + "."


def _ratio_text(r: Interval) -> str:
    if not math.isfinite(r.value):
        return "–"
    if math.isfinite(r.low) and math.isfinite(r.high):
        return f"×{r.value:.2f} [{r.low:.2f}, {r.high:.2f}]"
    return f"×{r.value:.2f}"


def _share_text(share: float) -> str:
    return f"{share * 100:.0f}%" if math.isfinite(share) else "–"



# ---------------------------------------------------------------------- summary.json
def rankings_for(costs: Sequence[CellCosts], knobs: Sequence[str], work: tuple[str, str],
                 where: Mapping[str, object]) -> list[KnobRanking]:
    """Along each knob held in `where`: every cell (where its cost goes when it changes);
    along every other knob: the cells at `where` only (how those functions scale)."""
    out: list[KnobRanking] = []
    for knob in sorted(knobs, key=lambda k: k not in where):  # the held knobs first: where the change goes
        held = {} if knob in where else where
        follow = [f.function for r in out for f in spent_in(r)]  # ... then how those functions scale
        if (r := rank_along(costs, knob, unit=work[1], work_metric=work[0], where=held, follow=follow)) is not None:
            out.append(r)
    return out


def spent_in(ranking: KnobRanking, top: int = 3) -> list[FunctionGrowth]:
    """The functions the knob's extra CPU is spent in: those that add CPU per unit, the
    clearly growing first (at most `top`)."""
    adding = [f for f in ranking.functions if math.isfinite(f.extra_per_unit) and f.extra_per_unit > 0
              and f.direction != "too few samples"]
    return ([f for f in adding if f.direction == "grows"] + [f for f in adding if f.direction != "grows"])[:top]


def add_to_summary(summary: dict[str, object], rows: Sequence[ResultRow], run_path: Path, knobs: Sequence[str],
                   work: tuple[str, str], where: Mapping[str, object]) -> None:
    """summary["cpu_profile"] (the rankings) and summary["profile_verdict"] (their sentences)."""
    costs = load_costs(rows, run_path, work[0])
    if not costs:
        return
    rankings = rankings_for(costs, knobs, work, where)
    note = costs[0].row.notes["cpu_profile"]
    unnamed = statistics.fmean(c.unnamed_share for c in costs)
    summary["cpu_profile"] = {
        "unit": work[1], "work_metric": work[0], "where": {k: str(v) for k, v in where.items()},
        "cells": len(costs), "hz": note.get("hz"), "call_graph": note.get("call_graph"),
        "processes": note.get("processes", ""), "unnamed_share": unnamed,
        "rankings": [r.to_dict() for r in rankings],
    }
    summary["profile_verdict"] = profile_verdict(rankings, len(costs), unnamed, int(note.get("hz", 0)), where)


def profile_verdict(rankings: Sequence[KnobRanking], cells: int, unnamed: float, hz: int,
                    where: Mapping[str, object] | None = None) -> str:
    """Where the CPU went. With knobs held (`where`, the checksum recipe's checksum = on):
    which functions the held knob's extra CPU is spent in, then whether their CPU per unit
    grows along each other knob. Without: one sentence per knob, the functions that move it."""
    head = f"Where the CPU went ({cells} profiled cells, perf at {hz} Hz"
    head += f"; {unnamed * 100:.0f}% of the samples fell in code without symbols and are not named)" if unnamed >= 0.005 else ")"
    if not rankings:
        return head + ": no knob with two values among the profiled cells."
    held = [r for r in rankings if r.knob in (where or {})]
    if not held:
        return head + ": " + " ".join(growth_sentence(r) for r in rankings)
    parts = [spent_sentence(r) for r in held]
    followed = {f.function for r in held for f in spent_in(r)}
    parts += [follow_sentence(r, followed) for r in rankings if r.knob not in (where or {}) and followed]
    return head + ": " + " ".join(parts)


def spent_sentence(r: KnobRanking) -> str:
    """'checksum off to on: CPU per row inserted ×1.13 [1.05, 1.21], the extra spent in cksmCompute (71%, ×25 [..]), ...'"""
    funcs = spent_in(r)
    text = f"{r.knob} {r.values[0]} to {r.values[-1]}: CPU per {r.unit} {_ratio_text(r.total_ratio)}"
    if not funcs:
        return text + "; no function adds CPU per " + r.unit + " clearly enough to name."
    named = ", ".join(f"{f.function} ({_share_text(f.extra_share) + ' of the extra CPU, ' if math.isfinite(f.extra_share) else ''}"
                      f"{_ratio_text(f.ratio)}, {f.direction})" for f in funcs)
    return f"{text}; the extra is spent in {named}."


def follow_sentence(r: KnobRanking, functions: set[str]) -> str:
    """'Along block_size 1024 to 65536 (checksum=on), CPU per row of cksmCompute ×3.1 [2.0, 4.6]: grows; ...'"""
    where = ", ".join(f"{k}={value_text(v)}" for k, v in r.where.items())
    found = [f for f in r.functions if f.function in functions]
    head = f"Along {r.knob} {r.values[0]} to {r.values[-1]}{' (' + where + ')' if where else ''}, CPU per {r.unit}"
    if not found:
        return f"{head}: too few samples of {', '.join(sorted(functions))} to tell."
    return head + " " + "; ".join(f"of {f.function} {_ratio_text(f.ratio)}: {_growth_word(f)}" for f in found) + \
        f" (total {_ratio_text(r.total_ratio)})."


def _growth_word(f: FunctionGrowth) -> str:
    return {"grows": "grows with it", "shrinks": "shrinks with it",
            "too few samples": "too few samples to tell"}.get(f.direction, "does not clearly change")
