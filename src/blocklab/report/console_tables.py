"""Tables for the console (rich), every one blocklab prints: the figures per
setting, a comparison of two runs or hosts (analysis/compare.py), the checksum
overhead (analysis/overhead.py), the engine against its device twin
(analysis/efficiency.py), a run's time profiles, the seed's TIMESOURCE /
SECONDS / PERCENTAGE (probes/profile_view.py), and the SLOB points with their
saturation (analysis/slob_view.py). The modules named compute; this one lays
out."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from ..analysis.compare import RunComparison
from ..analysis.efficiency import SettingEfficiency
from ..analysis.entry import figure_of, standing_note
from ..analysis.overhead import (
    BLOCK_KNOB,
    Normalised,
    context_label,
    is_checksum_sweep,
    normalised,
    overheads,
    reference_label,
    setting_text,
    settings_key,
)
from ..analysis.slob_view import SlobRow, points, saturation_points, series_label
from ..engines.base import Capabilities
from ..jsonvalue import as_list
from ..probes.profile import CPU, TOTAL, UNACCOUNTED
from ..probes.profile_view import AWR_CAPTION, OTHER, SettingProfile, is_awr, setting_profiles, short_labels
from ..results import ResultRow
from ..spec import Scalar
from ..units import MISSING, human

MINOR = 0.005  # waits under 0.5% of the time in both columns are folded into one line
NO_CAPABILITIES = Capabilities()  # an imported profile's: no engine of blocklab's measured it



def plain(text: object) -> Text:
    """User-given text (a setting's value, a host, a path) as a table cell, verbatim: a str
    cell is rich markup, in which '[bold]' or 'data[1]' would be read as tags and vanish."""
    return Text(str(text))

def _fold(parts: dict[str, float], total: float, keep: set[str]) -> dict[str, float]:
    out: dict[str, float] = {}
    other = 0.0
    for name, seconds in parts.items():
        if name in keep or name in (CPU, UNACCOUNTED):
            out[name] = seconds
        else:
            other += seconds
    if other:
        out[OTHER] = other
    return out


def _fmt_s(x: float) -> str:
    if abs(x) < 0.005:  # a rounding-sized remainder (e.g. UNACCOUNTED -0.001 s) reads as 0.00, not -0.00
        x = 0.0
    if abs(x) >= 100:
        return f"{x:,.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"


def _pct(x: float, total: float) -> str:
    return f"{100 * x / total:.0f}" if total > 0 else "-"


def profile_table(sp: SettingProfile, describe: Callable[[str], str] | None = None,
                  capabilities: Capabilities = NO_CAPABILITIES) -> Table:
    """One setting: TIMESOURCE, the slowest session's SECONDS and PERCENTAGE,
    and the same summed over all sessions (without a slowest session: the
    seed's TIMESOURCE / SECONDS / PERCENTAGE, every event as it is)."""
    if sp.slowest is None:
        return side_by_side_table([sp], lambda _: describe(sp.label) if describe else sp.label, capabilities)
    slow, tot = sp.slowest, sp.total
    keep = {
        name
        for name in set(slow.waits) | set(tot.waits)
        if slow.waits.get(name, 0.0) >= MINOR * slow.elapsed_s or tot.waits.get(name, 0.0) >= MINOR * tot.elapsed_s
    }
    slow_parts = _fold(slow.parts(), slow.elapsed_s, keep)
    tot_parts = _fold(tot.parts(), tot.elapsed_s, keep)
    names = sorted(set(slow_parts) | set(tot_parts), key=lambda n: (n == OTHER, -tot_parts.get(n, 0.0), n))
    title = describe(sp.label) if describe else sp.label
    runs = f"mean of {sp.runs} runs" if sp.runs > 1 else "1 run"
    table = Table(title=escape(f"{title}: where the time went ({runs})"), title_justify="left")
    table.add_column("TIMESOURCE", justify="left")
    table.add_column("slowest SECONDS", justify="right")
    table.add_column("%", justify="right")
    table.add_column("all sessions SECONDS", justify="right")
    table.add_column("%", justify="right")
    table.add_row(TOTAL, _fmt_s(slow.elapsed_s), "100", _fmt_s(tot.elapsed_s), "100", style="bold")
    for name in names:
        s, t = slow_parts.get(name, 0.0), tot_parts.get(name, 0.0)
        table.add_row(plain(name), _fmt_s(s), _pct(s, slow.elapsed_s), _fmt_s(t), _pct(t, tot.elapsed_s))
    table.caption = _caption(sp, capabilities)
    table.caption_justify = "left"
    return table


def side_by_side_table(profiles: list[SettingProfile], describe: Callable[[str], str] | None = None,
                       capabilities: Capabilities = NO_CAPABILITIES) -> Table:
    """TIMESOURCE, then SECONDS and PERCENTAGE of each profile's total (all
    sessions, or the instance for AWR), side by side: seed 002's two tables
    in one. Rows: TOTAL_TIME, then every time source, largest first."""
    describe = describe or (lambda label: label)
    order: dict[str, float] = {}
    for sp in profiles:
        for name, seconds in sp.total.parts().items():
            order[name] = max(order.get(name, 0.0), seconds / sp.total.elapsed_s if sp.total.elapsed_s > 0 else 0.0)
    names = sorted(order, key=lambda n: (-order[n], n))
    title = f"{describe(profiles[0].label)}: where the time went" if len(profiles) == 1 else "Where the time went, side by side"
    table = Table(title=escape(title), title_justify="left")
    table.add_column("TIMESOURCE", justify="left")
    for sp in profiles:
        head = "" if len(profiles) == 1 else f"{describe(sp.label)}\n"
        table.add_column(escape(f"{head}SECONDS"), justify="right")
        table.add_column("PERCENTAGE", justify="right")
    table.add_row(TOTAL, *[x for sp in profiles for x in (_fmt_s(sp.total.elapsed_s), "100")], style="bold")
    for name in names:
        cells = []
        for sp in profiles:
            value = sp.total.parts().get(name)
            cells += ["\u2013", ""] if value is None else [_fmt_s(value), _pct(value, sp.total.elapsed_s)]  # not in this profile
        table.add_row(plain(name), *cells)
    table.caption = _caption(profiles[0], capabilities)
    table.caption_justify = "left"
    return table


def _caption(sp: SettingProfile, capabilities: Capabilities) -> str:
    if is_awr(sp):
        return AWR_CAPTION
    bits = [capabilities.time_profile.cpu] if capabilities.time_profile else []
    t = sp.total
    measured = []
    if t.cpu_measured_s is not None:
        measured.append(f"on CPU {_fmt_s(t.cpu_measured_s)} s")
    if t.runqueue_s is not None:
        measured.append(f"run queue {_fmt_s(t.runqueue_s)} s")
    if measured:
        bits.append("measured, all sessions: " + ", ".join(measured))
    if capabilities.page_writers and capabilities.page_writers[0].key in sp.extra:
        bits.append(capabilities.page_writer_text(sp.extra))  # who wrote the pages, in the engine's words
    return "; ".join(bits)


def profile_tables(summary_or_rows: Any, describe: Callable[[str], str] | None = None, order: Iterable[str] | None = None,
                   capabilities: Capabilities = NO_CAPABILITIES) -> list[Table]:
    """One table per setting (in `order` when given, e.g. the summary's
    setting labels), for the rows that carry a profile; [] when none do.

    `summary_or_rows`: the rows (ResultRow or their dicts), a RunDir, a run
    directory path, or a dict with "rows". A summary dict without rows has
    no profiles (summary.json keeps only the verdict metric): pass rows."""
    if isinstance(summary_or_rows, dict) and "rows" not in summary_or_rows:
        return []
    profiles = setting_profiles(summary_or_rows, order)
    if describe is None:
        short = short_labels(profiles)
        describe = short.__getitem__
    return [profile_table(sp, describe, capabilities) for sp in profiles]


# ---------------------------------------------------------------------- SLOB
def slob_table(rows: Iterable[SlobRow]) -> Table:
    """A rich Table: every point (series, sessions, IOPS, MB/s, latency, ops/s, CPU) with the saturation point marked."""
    rows = list(rows)
    sat = {(s.update_pct, s.block_size): s for s in saturation_points(rows)}
    table = Table(box=box.SIMPLE_HEAD, title="SLOB points (saturation: the fewest sessions within 5 % of the series' highest read IOPS)",
                  title_justify="left", pad_edge=False)
    for name in ("series", "sessions", "read IOPS", "MB/s", "read ms", "ops/s", "CPU %", ""):
        table.add_column(name, justify="left" if name in ("series", "") else "right", no_wrap=True)
    for key, pts in points(rows).items():
        s = sat.get(key)
        for p in pts:
            mark = ""
            if s is not None and p.sessions == s.sessions:
                mark = "saturation" if s.stopped else "still rising (last point)"
            table.add_row(
                series_label(*key), str(p.sessions), f"{p.read_iops:,.0f}", f"{p.mb_per_s:,.0f}",
                f"{p.read_latency_ms:.3f}", _or_dash(p.ops_per_s, "{:,.0f}"), _or_dash(p.cpu_busy_pct, "{:.0f}"), mark,
            )
        table.add_section()
    return table


def _or_dash(value: float, fmt: str) -> str:
    return "\u2013" if math.isnan(value) else fmt.format(value)


__all__ = ["plain", "profile_table", "profile_tables", "side_by_side_table", "slob_table"]


# ---------------------------------------------------------------------- per setting, and two runs compared
def settings_table(summary: dict[str, Any], unit: str, describe: Callable[[str], str]) -> Table:
    """Per setting the figure the best is picked on (paired: the block-adjusted
    level) with its interval and the ratio to the best with its interval; the
    median of the runs as measured is a detail column."""
    paired = (summary.get("analysis") or {}).get("method") == "paired"
    figure = "block-adjusted" if paired else "median"
    table = Table(title=escape(f"{summary['metric']} per setting ({summary['goal']} is best)"))
    for col in ("setting", "n", figure, "interval", "vs best [interval]", "median", "note"):
        # a heading is rich markup: '[interval]' would be read as a tag and vanish
        table.add_column(escape(col), justify="left" if col in ("setting", "note") else "right")
    best = summary.get("best_label")
    for label, s in summary["settings"].items():
        if "median" not in s:
            table.add_row(plain(describe(label)), "0", MISSING, MISSING, MISSING, MISSING, "no measurement")
            continue
        value, lo, hi = figure_of(s)
        note = standing_note(s, label == best)
        if s.get("outliers"):
            note = (note + ", " if note else "") + f"{len(s['outliers'])} outlier(s)"
        interval = f"[{human(lo)}, {human(hi)}]" if _finite(lo) and _finite(hi) else MISSING
        table.add_row(plain(describe(label)), str(s["n"]), human(value), interval, ratio_text(s) if best else MISSING,
                      human(s["median"]), note)
    return table


def ratio_text(entry: dict[str, object]) -> str:
    """A setting's ratio to the best: '0.93x [0.85, 1.02]'; the point alone without an interval."""
    r, lo, hi = entry.get("ratio_to_best"), entry.get("ratio_to_best_ci_low"), entry.get("ratio_to_best_ci_high")
    if not _finite(r):
        return MISSING
    if _finite(lo) and _finite(hi) and (lo != r or hi != r):
        return f"{r:.2f}x [{lo:.2f}, {hi:.2f}]"
    return f"{r:.2f}x"


def explain_text(summary: Mapping[str, object]) -> str:
    """`--explain`: how the verdict's figures were judged (summary.json's explain), a paragraph a line."""
    lines = [str(line) for line in as_list(summary.get("explain"))]
    if not lines:
        return "How to read this: nothing to explain yet (no measurement)."
    return "How to read this:\n" + "\n".join(f"- {line}" for line in lines)


def _finite(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def print_comparison(console: Console, result: RunComparison) -> None:
    """`blocklab compare` and `blocklab fleet compare`: B against A, setting by setting."""
    console.print(f"A: {result.run_a.path}  ({result.run_a.describe()})", markup=False, highlight=False)
    console.print(f"B: {result.run_b.path}  ({result.run_b.describe()})", markup=False, highlight=False)
    if result.differences:
        console.print("compared with --force although the runs differ in:", style="yellow", markup=False)
        for difference in result.differences:
            console.print(f"  {difference.text()}", style="yellow", markup=False, highlight=False)
    for difference in result.other_differences:
        console.print(f"also different (not checked): {difference.text()}", markup=False, highlight=False)
    unit = f" ({result.unit})" if result.unit else ""
    better = "higher" if result.goal == "max" else "lower"
    knobs = {tuple(s.settings) for s in result.settings}
    one_knob = next(iter(knobs))[0] if len(knobs) == 1 and len(next(iter(knobs))) == 1 else None
    table = Table(title=escape(f"{result.metric}{unit}: B against A per setting ({better} is better)"), box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    table.add_column(escape(one_knob or "setting"))
    for column in ("n A/B", "median A", "median B", "B/A", "95% CI", "p"):
        table.add_column(column, justify="right", no_wrap=True)
    table.add_column("B vs A", no_wrap=True)
    words = {"better": "better", "worse": "worse", "same": "no diff.", "unclear": "unclear"}
    styles = {"better": "green", "worse": "red", "same": "", "unclear": "yellow"}
    for s in result.settings:
        c = s.comparison
        table.add_row(
            plain(s.display().split("=", 1)[1] if one_knob else s.display()), f"{c.n_a}/{c.n_b}",
            human(c.median_a), human(c.median_b),
            f"{c.ratio:.3f}" if c.ratio == c.ratio else "-",
            f"{c.ci_low:.3f}-{c.ci_high:.3f}" if c.ci_low == c.ci_low else "-",
            f"{c.p_value:.3g}", words[s.outcome], style=styles[s.outcome] or None,
        )
    console.print(table)
    for s in result.settings:
        note = "  (the engine reported different values for this setting in A and B)" if s.applied_differs else ""
        console.print(f"{s.display()}: {s.verdict}{note}", markup=False, highlight=False)
    if result.only_in_a:
        console.print(f"only in A (not compared): {'; '.join(result.only_in_a)}", markup=False, highlight=False)
    if result.only_in_b:
        console.print(f"only in B (not compared): {'; '.join(result.only_in_b)}", markup=False, highlight=False)
    console.print(result.summary_line(), markup=False, highlight=False)
    if note := result.resolution_note():
        console.print(note, markup=False, highlight=False)


# ---------------------------------------------------------------------- the checksum overhead
def _fmt_seconds(x: float) -> str:
    if not math.isfinite(x):
        return "-"
    return f"{x:.3f}" if x < 100 else f"{x:,.1f}"


def overhead_tables(rows: Iterable[ResultRow], metric: str = "elapsed_s", *, seed: int = 0) -> list[Table]:
    """The checksum overhead (analysis/overhead.py): the seed-004 overhead per level, then the
    seed-001 normalised elapsed (block sizes as columns). [] when the rows are not a checksum sweep."""
    rows = list(rows)
    if not is_checksum_sweep(rows):
        return []
    tables = []
    ref = reference_label(rows)
    items = overheads(rows, metric, seed=seed)
    if items:
        t = Table(title=escape(f"Checksum overhead: median {metric} against {ref} (95% bootstrap interval)"))
        has_context = any(o.context for o in items)
        if has_context:
            t.add_column("setting")
        t.add_column("level")
        t.add_column("n", justify="right")
        t.add_column(escape(f"median {metric}"), justify="right")
        t.add_column(escape(f"vs {ref}"))
        t.add_column("vs the level above")
        t.add_column("failed", justify="right")
        for o in items:
            change = o.text
            if o.measurable:
                change = f"[bold]{escape(change)}[/bold]"
            failed = f"{o.failed}: {o.error[:60]}" if o.failed else ""
            cells: list[str | Text] = [plain(o.level_label), str(o.n), _fmt_seconds(o.median), change, plain(o.step_text), plain(failed)]
            t.add_row(*([plain(o.context_label)] if has_context else []), *cells)
        tables.append(t)
    norm = normalised(rows, metric, seed=seed)
    if norm:
        blocks = sorted({n.block_size for n in norm}, key=lambda b: (b is None, b if b is not None else 0))
        t = Table(title=escape(f"{metric} normalised to the {ref} run of the same block size (95% interval)"))
        has_context = any(n.context for n in norm)
        if has_context:
            t.add_column("setting")
        t.add_column("level")
        for b in blocks:
            t.add_column("normalised" if b is None else escape(f"block {setting_text(BLOCK_KNOB, b)}"), justify="right")
        grouped: dict[tuple, dict[Scalar | None, Normalised]] = {}
        for n in norm:
            grouped.setdefault((settings_key(n.context), settings_key(n.level)), {})[n.block_size] = n
        for (_, _), by_block in grouped.items():
            first = next(iter(by_block.values()))
            values: list[str] = []
            for b in blocks:
                found = by_block.get(b)
                if found is None or not math.isfinite(found.value):
                    values.append("-")
                elif found.n < 2 or (found.ci_low == found.ci_high == found.value):
                    values.append(f"{found.value:.3f}")
                else:
                    values.append(f"{found.value:.3f} [{found.ci_low:.3f}, {found.ci_high:.3f}]")
            t.add_row(*([plain(context_label(first.context))] if has_context else []), plain(first.level_label), *values)
        tables.append(t)
    return tables


# ---------------------------------------------------------------------- the device twin
def efficiency_table(effs: list[SettingEfficiency], describe: Callable[[str], str] = str) -> Table:
    """The engine against its device twin (analysis/efficiency.py): per setting the I/O
    replayed, engine and device rates, efficiency, bottleneck."""
    table = Table(box=box.SIMPLE_HEAD, title="The engine against its device twin (fio replaying the same I/O)",
                  title_justify="left", pad_edge=False)
    # narrow headings: the caption says what they are
    for name in ("setting / I/O replayed by fio", "engine", "disk", "of disk", "busy", "CPU", "bottleneck"):
        table.add_column(name, justify="left" if name[0] in "sb" else "right", no_wrap=name[0] != "s", overflow="fold")
    how = ("fio replayed each cell's I/O beside it: geometric mean over the blocks [95% CI]" if any(e.paired for e in effs)
           else "median [95% CI]")
    table.caption = (f"of disk: the engine's rate over fio's for the same I/O, {how}; mismatch: the interval lies above "
                     "100%, the twin did not replay what the engine did (why: beside it); busy: the disk's utilisation; "
                     "CPU: cores the engine's processes used of those they could use")
    table.caption_justify = "left"
    for e in effs:
        cpu, busy = e.cpu_text("/"), _percent(e.util_pct)
        what = e.pattern.compact() if e.has and e.pattern is not None else e.why_none
        setting = plain(f"{_short_label(describe(e.label))}\n  {what}")
        if e.has:
            table.add_row(setting, _rate(e.engine_rate, e.unit), _rate(e.device_rate, e.unit), e.percent(), busy, cpu, plain(e.bottleneck or ""))
        else:
            engine = _rate(e.engine_rate, e.unit) if math.isfinite(e.engine_rate) else "–"
            disk = _rate(e.device_rate, e.unit) if e.mismatch else "–"
            table.add_row(setting, engine, disk, "mismatch" if e.mismatch else "–", busy, cpu, plain(e.bottleneck or ""))
    return table


def _short_label(text: str) -> str:
    """'workload.sessions=4, workload.update_pct=0' -> 'sessions=4, update_pct=0': a narrow column."""
    return text.replace("workload.", "")


def _rate(x: float, unit: str) -> str:
    return f"{x:,.0f} {unit}" if math.isfinite(x) else "–"


def _percent(x: float) -> str:
    return f"{x:.0f}%" if math.isfinite(x) else "–"
