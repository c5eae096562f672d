"""Tables for the console (rich): a run's time profiles, the seed's TIMESOURCE /
SECONDS / PERCENTAGE (probes/profile_view.py computes them), and the SLOB
points with their saturation (analysis/slob_view.py)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

from rich.table import Table

from ..analysis.slob_view import points, saturation_points, series_label
from ..engines.base import Capabilities
from ..probes.profile import CPU, TOTAL, UNACCOUNTED
from ..probes.profile_view import AWR_CAPTION, OTHER, SettingProfile, is_awr, setting_profiles, short_labels

MINOR = 0.005  # waits under 0.5% of the time in both columns are folded into one line
NO_CAPABILITIES = Capabilities()  # an imported profile's: no engine of blocklab's measured it


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
    table = Table(title=f"{title}: where the time went ({runs})", title_justify="left")
    table.add_column("TIMESOURCE", justify="left")
    table.add_column("slowest SECONDS", justify="right")
    table.add_column("%", justify="right")
    table.add_column("all sessions SECONDS", justify="right")
    table.add_column("%", justify="right")
    table.add_row(TOTAL, _fmt_s(slow.elapsed_s), "100", _fmt_s(tot.elapsed_s), "100", style="bold")
    for name in names:
        s, t = slow_parts.get(name, 0.0), tot_parts.get(name, 0.0)
        table.add_row(name, _fmt_s(s), _pct(s, slow.elapsed_s), _fmt_s(t), _pct(t, tot.elapsed_s))
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
    table = Table(title=title, title_justify="left")
    table.add_column("TIMESOURCE", justify="left")
    for sp in profiles:
        head = "" if len(profiles) == 1 else f"{describe(sp.label)}\n"
        table.add_column(f"{head}SECONDS", justify="right")
        table.add_column("PERCENTAGE", justify="right")
    table.add_row(TOTAL, *[x for sp in profiles for x in (_fmt_s(sp.total.elapsed_s), "100")], style="bold")
    for name in names:
        cells = []
        for sp in profiles:
            value = sp.total.parts().get(name)
            cells += ["\u2013", ""] if value is None else [_fmt_s(value), _pct(value, sp.total.elapsed_s)]  # not in this profile
        table.add_row(name, *cells)
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
def slob_table(rows: Iterable[Any]) -> Any:
    """A rich Table: every point (series, sessions, IOPS, MB/s, latency, ops/s, CPU) with the saturation point marked."""
    from rich import box
    from rich.table import Table

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


__all__ = ["profile_table", "profile_tables", "side_by_side_table", "slob_table"]
