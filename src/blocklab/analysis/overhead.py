"""The cost of page checksums, as the seeds state it. Pure functions on result rows.

* seed 004 style, `overheads(rows)`: per level (a combination of the `checksum`
  and `block_checking` knobs) the median elapsed and its change over the
  baseline, checksum off and block_checking off with every other setting the
  same (block size, index): "+4.66% [+1.20%, +8.10%]" with the bootstrap 95%
  interval of the ratio of medians (stats.compare_samples), or "no measurable
  overhead" when that interval includes 0. Each level also against the level
  before it in the table (`step_text`), as the seed reports its ladder:
  52.6 s -> 55.1 s is "+4.66%", 55.1 s -> 58.5 s "+6.34%", ... "+150.50%".
* seed 001 style, `normalised(rows)`: elapsed divided by the elapsed of the
  no-checksum run, per block size x level x index. By default the reference is
  the no-checksum run of the same block size (each block size's own baseline);
  `reference_block_size=N` divides every block size by the no-checksum run at
  N instead, which shows what block size alone does (the seed's flat "off" line).

The reference level is "every level knob off". An engine without an off
(MariaDB 10.11 always checksums: crc32, the older format, or full_crc32) has
the first level in sorted order instead (crc32), and every title names it:
"against checksum=crc32".

Failed cells are not numbers: they are left out of the medians and counted
(`failed`, with the first error text) so a checksum error stays visible.

Computing only: the console's tables are console.overhead_tables, the
report's figure report/overhead_plot.py.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..results import ResultRow
from ..spec import Scalar
from ..units import fmt_bytes, value_text
from .stats import compare_samples

LEVEL_KNOBS = ("checksum", "block_checking")  # what a "level" is made of, in this order
BLOCK_KNOB = "block_size"
_OFF = {False, "0", "off", "false", "no", "none", "disabled"}


@dataclass(frozen=True)
class Overhead:
    """One level in one context, against that context's baseline."""

    context: dict[str, object]  # the settings that are not level knobs (block_size, workload.index, ...)
    level: dict[str, object]  # the level knobs' values
    n: int  # ok samples of this level
    median: float
    baseline_n: int
    baseline_median: float
    ratio: float  # median(level) / median(baseline)
    ci_low: float
    ci_high: float
    failed: int = 0  # cells of this level that did not finish (a checksum error, ...)
    error: str = ""  # the first failed cell's status
    is_baseline: bool = False
    extra: dict[str, object] = field(default_factory=dict)
    step_ratio: float = math.nan  # median(level) / median(the level listed before it)
    step_low: float = math.nan
    step_high: float = math.nan

    @property
    def pct(self) -> float:
        return (self.ratio - 1.0) * 100.0

    @property
    def measurable(self) -> bool:
        """The interval of the change excludes 0."""
        return not self.is_baseline and math.isfinite(self.ci_low) and (self.ci_low > 1.0 or self.ci_high < 1.0)

    @property
    def level_label(self) -> str:
        return level_label(self.level)

    @property
    def context_label(self) -> str:
        return context_label(self.context)

    @property
    def text(self) -> str:
        """'+4.66% [+1.20%, +8.10%]', 'no measurable overhead (+0.41% [-2.10%, +3.00%])', 'baseline'."""
        if self.is_baseline:
            return "baseline"
        if not math.isfinite(self.ratio):
            return "no samples" if self.n == 0 or self.baseline_n == 0 else "undefined"
        change = f"{fmt_pct(self.ratio)} [{fmt_pct(self.ci_low)}, {fmt_pct(self.ci_high)}]"
        if self.n < 2 or self.baseline_n < 2:
            return f"{fmt_pct(self.ratio)} (n<2: no interval)"
        return change if self.measurable else f"no measurable overhead ({change})"

    @property
    def step_text(self) -> str:
        """Against the previous level: '+6.34% [+2.00%, +9.10%]', or '' for the first."""
        if self.is_baseline or not math.isfinite(self.step_ratio):
            return ""
        if not math.isfinite(self.step_low):
            return f"{fmt_pct(self.step_ratio)} (n<2: no interval)"
        return f"{fmt_pct(self.step_ratio)} [{fmt_pct(self.step_low)}, {fmt_pct(self.step_high)}]"


def fmt_pct(ratio: float) -> str:
    """A ratio as the seed writes a change: 1.0466 -> '+4.66%'."""
    if not math.isfinite(ratio):
        return "n/a"
    return f"{(ratio - 1.0) * 100.0:+.2f}%"


def is_on(value: object) -> bool:
    if isinstance(value, str):
        return value.strip().lower() not in _OFF
    return value not in _OFF


def setting_text(knob: str, value: object) -> str:
    """block_size is in bytes on every engine: 16384 -> '16 kB', as people write it."""
    if knob == "block_size" and not isinstance(value, bool) and str(value).isdigit():
        return fmt_bytes(int(str(value)))
    return value_text(value)


def level_label(level: dict[str, object]) -> str:
    return ", ".join(f"{k}={setting_text(k, v)}" for k, v in level.items()) or "(no level)"


def context_label(context: dict[str, object]) -> str:
    return ", ".join(f"{k}={setting_text(k, v)}" for k, v in context.items()) or "all"


def is_checksum_sweep(rows: Iterable[ResultRow]) -> bool:
    return any("checksum" in r.settings for r in rows)


def settings_key(d: dict[str, object]) -> tuple:
    """A setting as a hashable group key, values as labels show them."""
    return tuple((k, value_text(v)) for k, v in d.items())


def _split(settings: Mapping[str, object]) -> tuple[dict[str, object], dict[str, object]]:
    level = {k: settings[k] for k in LEVEL_KNOBS if k in settings}
    context = {k: v for k, v in settings.items() if k not in LEVEL_KNOBS}
    return context, level


def _collect(rows: Iterable[ResultRow], metric: str) -> tuple[dict, dict, dict, dict]:
    """samples[(context, level)], failures, and the first-seen dicts of each key."""
    samples: dict[tuple, list[float]] = {}
    failures: dict[tuple, list[str]] = {}
    contexts: dict[tuple, dict[str, object]] = {}
    levels: dict[tuple, dict[str, object]] = {}
    for row in rows:
        context, level = _split(row.settings)
        ck, lk = settings_key(context), settings_key(level)
        contexts.setdefault(ck, context)
        levels.setdefault(lk, level)
        samples.setdefault((ck, lk), [])
        if row.ok and metric in row.metrics and math.isfinite(row.metrics[metric]):
            samples[(ck, lk)].append(float(row.metrics[metric]))
        elif not row.ok:
            failures.setdefault((ck, lk), []).append(row.status)
    return samples, failures, contexts, levels


def _is_baseline(level: dict[str, object]) -> bool:
    return all(not is_on(v) for v in level.values())


def _reference_key(levels: dict[tuple, dict[str, object]]) -> tuple | None:
    """The level the others are measured against: all level knobs off; when no
    level is off, the first in sorted order of its values."""
    off = [lk for lk, level in levels.items() if _is_baseline(level)]
    if off:
        return off[0]
    return min(levels, key=lambda lk: tuple(value_text(v) for v in levels[lk].values()), default=None)


def reference_label(rows: Iterable[ResultRow]) -> str:
    """'checksum off', or the reference level when the engine has no off ('checksum=crc32')."""
    levels: dict[tuple, dict[str, object]] = {}
    for row in rows:
        _, level = _split(row.settings)
        levels.setdefault(settings_key(level), level)
    ref = _reference_key(levels)
    if ref is None or _is_baseline(levels[ref]):
        return "checksum off"
    return level_label(levels[ref])


def _level_order(levels: dict[tuple, dict[str, object]]) -> list[tuple]:
    """Reference first, then by how many level knobs are on, then in LEVEL_KNOBS order, then by value."""
    ref = _reference_key(levels)
    return sorted(levels, key=lambda lk: (lk != ref, sum(is_on(v) for v in levels[lk].values()),
                                           [not is_on(levels[lk].get(k, False)) for k in LEVEL_KNOBS],
                                           tuple(value_text(v) for v in levels[lk].values())))


def _context_order(contexts: dict[tuple, dict[str, object]]) -> list[tuple]:
    def sort_key(ck: tuple) -> tuple:
        c = contexts[ck]
        return tuple((0, v, "") if isinstance(v, (int, float)) else (1, 0, str(v)) for v in c.values())

    return sorted(contexts, key=sort_key)


def _against(samples: list[float], base: list[float], seed: int) -> tuple[float, float, float]:
    if not samples or not base:
        return math.nan, math.nan, math.nan
    c = compare_samples(base, samples, goal="min", seed=seed, name_a="baseline", name_b="level")
    return c.ratio, c.ci_low, c.ci_high


def overheads(rows: Iterable[ResultRow], metric: str = "elapsed_s", *, seed: int = 0) -> list[Overhead]:
    """Seed 004: every level against the baseline of its own context (same block
    size, index, ...). Contexts without a baseline level are left out."""
    rows = list(rows)
    samples, failures, contexts, levels = _collect(rows, metric)
    out: list[Overhead] = []
    ref = _reference_key(levels)
    for ck in _context_order(contexts):
        if (ck, ref) not in samples:
            continue
        base_keys = [ref]
        base = samples[(ck, ref)]
        base_median = statistics.median(base) if base else math.nan
        previous: list[float] = []  # samples of the level listed before this one
        for lk in _level_order(levels):
            if (ck, lk) not in samples:
                continue
            xs = samples[(ck, lk)]
            errors = failures.get((ck, lk), [])
            is_base = lk == base_keys[0]
            ratio, lo, hi = (1.0, 1.0, 1.0) if is_base and xs else _against(xs, base, seed)
            step = _against(xs, previous, seed) if previous and not is_base else (math.nan,) * 3
            if len(xs) < 2 or len(previous) < 2:  # one sample against one: no interval
                step = (step[0], math.nan, math.nan)
            previous = xs  # a level with no samples leaves the next one without a step, not a step over two rows
            out.append(Overhead(
                context=contexts[ck], level=levels[lk], n=len(xs),
                median=statistics.median(xs) if xs else math.nan,
                baseline_n=len(base), baseline_median=base_median,
                ratio=ratio, ci_low=lo, ci_high=hi,
                failed=len(errors), error=errors[0] if errors else "", is_baseline=is_base,
                step_ratio=step[0], step_low=step[1], step_high=step[2],
            ))
    return out


@dataclass(frozen=True)
class Normalised:
    """Seed 001: one block size x level x other settings, divided by the no-checksum reference."""

    block_size: Any  # None when the sweep has no block_size knob; the plot puts it on a numeric axis
    level: dict[str, object]
    context: dict[str, object]  # the other settings (workload.index, ...), without block_size
    n: int
    median: float
    reference_median: float
    value: float  # median / reference median
    ci_low: float
    ci_high: float
    failed: int = 0

    @property
    def level_label(self) -> str:
        return level_label(self.level)


def normalised(
    rows: Iterable[ResultRow], metric: str = "elapsed_s", *, reference_block_size: Scalar | None = None, seed: int = 0
) -> list[Normalised]:
    """Seed 001: median elapsed of each block size x level x index divided by the
    median of the no-checksum run (every level knob off) of the same block size and
    index; with `reference_block_size`, of that block size instead."""
    rows = list(rows)
    samples, failures, contexts, levels = _collect(rows, metric)
    out: list[Normalised] = []
    for ck in _context_order(contexts):
        context = contexts[ck]
        ref_ck: tuple | None
        if reference_block_size is None or BLOCK_KNOB not in context:
            ref_ck = ck
        else:
            ref_context = {**context, BLOCK_KNOB: reference_block_size}
            ref_ck = next((k for k, c in contexts.items() if settings_key(c) == settings_key(ref_context)), None)
        base_lk = _reference_key(levels)
        if ref_ck is None or (ref_ck, base_lk) not in samples:
            continue
        ref = samples[(ref_ck, base_lk)]
        for lk in _level_order(levels):
            if (ck, lk) not in samples:
                continue
            xs = samples[(ck, lk)]
            if (ck, lk) == (ref_ck, base_lk):
                value, lo, hi = (1.0, 1.0, 1.0) if xs else (math.nan,) * 3
            else:
                value, lo, hi = _against(xs, ref, seed)
            out.append(Normalised(
                block_size=context.get(BLOCK_KNOB),
                level=levels[lk],
                context={k: v for k, v in context.items() if k != BLOCK_KNOB},
                n=len(xs), median=statistics.median(xs) if xs else math.nan,
                reference_median=statistics.median(ref) if ref else math.nan,
                value=value, ci_low=lo, ci_high=hi, failed=len(failures.get((ck, lk), [])),
            ))
    return out
