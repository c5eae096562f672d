"""The time profiles of a run, for people: the seed's TIMESOURCE / SECONDS /
PERCENTAGE tables (rich) and a stacked bar of time by class per setting
(matplotlib).

Both read the flat `profile.slowest.*` and `profile.total.*` metrics the wait
profiler leaves in each result row (probes/profile.py). A setting measured several
times shows the mean of its runs: means add up, so the parts still sum to
TOTAL_TIME. Rows with only `profile.total.*` (an AWR report's instance-wide
profile, `blocklab import awr`, flagged `profile.awr`) have no slowest session:
their table has the seed's three columns and their figure one panel;
`side_by_side_table` puts several such profiles next to each other.

    for table in profile_tables(run_dir.rows()): console.print(table)
    fig = profile_figure(run_dir.rows())
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.table import Table

from ..units import label_of, value_text
from .profile import CPU, TOTAL, UNACCOUNTED, SessionProfile, unflatten_profile

MINOR = 0.005  # waits under 0.5% of the time in both columns are folded into one line
OTHER = "other waits"


@dataclass
class SettingProfile:
    label: str
    settings: dict[str, Any]
    runs: int
    slowest: SessionProfile | None  # None: an instance-wide profile (AWR) has no sessions of its own
    total: SessionProfile
    extra: dict[str, float]  # mean of a few headline metrics (backend_writes, elapsed_s...)


def _rows_of(source: Any) -> list[Any]:
    """Result rows from a list of ResultRow/dicts, a RunDir, a run directory
    path, or a summary dict carrying "rows"."""
    from ..results import ResultRow, RunDir

    if isinstance(source, (str, Path)):
        source = RunDir(source)
    if isinstance(source, RunDir):
        return source.rows()
    if isinstance(source, dict):
        source = source.get("rows", [])
    out = []
    for row in source or []:
        out.append(ResultRow.from_dict(row) if isinstance(row, dict) else row)
    return out


def _label(settings: dict[str, Any]) -> str:
    return label_of(settings)


def setting_profiles(source: Any, order: Iterable[str] | None = None) -> list[SettingProfile]:
    """The mean profile per setting label, for the rows that have one."""
    groups: dict[str, list[dict[str, float]]] = {}
    settings: dict[str, dict[str, Any]] = {}
    for row in _rows_of(source):
        if not row.ok or ("profile.slowest.total_s" not in row.metrics and "profile.total.total_s" not in row.metrics):
            continue
        label = _label(row.settings)
        groups.setdefault(label, []).append(row.metrics)
        settings[label] = dict(row.settings)
    labels = [x for x in (order or []) if x in groups] + sorted(x for x in groups if x not in set(order or []))
    out = []
    for label in labels:
        runs = groups[label]
        mean = _mean_metrics(runs)
        slowest = unflatten_profile(mean, "profile.slowest")
        total = unflatten_profile(mean, "profile.total")
        assert total is not None
        extra: dict[str, float] = {k: mean[k] for k in ("elapsed_s", "backend_writes", "backend_write_share", "bgwriter_writes", "rows_per_s",
                                      "profile.measured", "profile.awr") if k in mean}
        out.append(SettingProfile(label, settings[label], len(runs), slowest, total, extra))
    return out


def short_labels(profiles: list[SettingProfile]) -> dict[str, str]:
    """label -> the label without the knobs every setting shares."""
    if len(profiles) < 2:
        return {sp.label: sp.label for sp in profiles}
    keys = list(profiles[0].settings)
    varying = [k for k in keys if len({value_text(sp.settings.get(k)) for sp in profiles}) > 1]
    return {
        sp.label: ", ".join(f"{k}={value_text(sp.settings[k])}" for k in varying if k in sp.settings) or sp.label
        for sp in profiles
    }


def _mean_metrics(runs: list[dict[str, float]]) -> dict[str, float]:
    """Mean of every key; a wait event missing from a run counts as 0 there."""
    keys = set().union(*runs)
    out = {}
    for key in keys:
        if ".wait." in key:
            out[key] = sum(r.get(key, 0.0) for r in runs) / len(runs)
        else:
            present = [r[key] for r in runs if key in r]
            out[key] = sum(present) / len(present)
    return out


# ---------------------------------------------------------------------- tables
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


def profile_table(sp: SettingProfile, describe: Callable[[str], str] | None = None) -> Table:
    """One setting: TIMESOURCE, the slowest session's SECONDS and PERCENTAGE,
    and the same summed over all sessions (without a slowest session: the
    seed's TIMESOURCE / SECONDS / PERCENTAGE, every event as it is)."""
    if sp.slowest is None:
        return side_by_side_table([sp], lambda _: describe(sp.label) if describe else sp.label)
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
    table.caption = _caption(sp)
    table.caption_justify = "left"
    return table


def side_by_side_table(profiles: list[SettingProfile], describe: Callable[[str], str] | None = None) -> Table:
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
    table.caption = _caption(profiles[0])
    table.caption_justify = "left"
    return table


def is_awr(sp: SettingProfile) -> bool:
    """True for a profile read from an AWR report (blocklab import awr)."""
    return sp.extra.get("profile.awr", 0.0) >= 0.5


AWR_CAPTION = ("from the AWR report: TOTAL_TIME is DB time (all foreground sessions), CPU is DB CPU, each wait the Top "
               "events table's total wait time; UNACCOUNTED_TIME is the rest (waits outside the Top table, time queued "
               "for a CPU)")


def is_measured(sp: SettingProfile) -> bool:
    """True for a profile timed by the server's own wait timers (MariaDB's
    performance_schema), False for one sampled from pg_stat_activity."""
    return sp.extra.get("profile.measured", 0.0) >= 0.5


def method_caption(profiles: list[SettingProfile]) -> str:
    """How the time was attributed, for a figure's caption."""
    if profiles and all(is_awr(sp) for sp in profiles):
        return AWR_CAPTION
    if profiles and all(is_measured(sp) for sp in profiles):
        return ("from performance_schema's wait timers of each session's server thread (measured, not sampled); "
                "CPU is the elapsed time the waits leave, at most the thread's on-CPU + run-queue time, "
                "and UNACCOUNTED the rest (uninstrumented waits)")
    return ("from wait-event sampling of blocklab's sessions every 10 ms; "
            "UNACCOUNTED is elapsed minus sampled time")


def _caption(sp: SettingProfile) -> str:
    if is_awr(sp):
        return AWR_CAPTION
    if is_measured(sp):
        bits = ["waits timed by performance_schema; CPU = elapsed less the waits, at most on-CPU + run queue"]
    else:
        bits = ["CPU = sampled active without a wait event (on a CPU or queued for one)"]
    t = sp.total
    measured = []
    if t.cpu_measured_s is not None:
        measured.append(f"on CPU {_fmt_s(t.cpu_measured_s)} s")
    if t.runqueue_s is not None:
        measured.append(f"run queue {_fmt_s(t.runqueue_s)} s")
    if measured:
        bits.append("measured, all sessions: " + ", ".join(measured))
    if "backend_writes" in sp.extra:
        share = sp.extra.get("backend_write_share")
        text = f"backend writes {sp.extra['backend_writes']:,.0f}"
        if share is not None:
            text += f" ({share:.0%} of page writes)"
        bits.append(text)
    return "; ".join(bits)


def profile_tables(summary_or_rows: Any, describe: Callable[[str], str] | None = None, order: Iterable[str] | None = None) -> list[Table]:
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
    return [profile_table(sp, describe) for sp in profiles]


# ---------------------------------------------------------------------- figure
_PALETTE = ["#1f5fa8", "#e0701f", "#7b4fa0", "#c0392b", "#2a9d8f", "#b8860b", "#8c564b", "#e377c2"]
_CPU_COLOUR = "#3c9a3c"
_UNACCOUNTED_COLOUR = "#bdbdbd"
_OTHER_COLOUR = "#7f7f7f"


def profile_figure(rows: Any, describe: Callable[[str], str] | None = None, order: Iterable[str] | None = None, top: int = 6) -> Any:
    """Stacked horizontal bars of time by class per setting: the slowest
    session (left) and all sessions summed (right). The `top` wait events
    over the whole run get their own colour; the rest is "other waits".
    Returns a matplotlib Figure (Agg, no pyplot), or None when no row has a profile."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    profiles = setting_profiles(rows, order)
    if not profiles:
        return None
    weight: dict[str, float] = {}
    for sp in profiles:
        for name, seconds in sp.total.waits.items():
            weight[name] = weight.get(name, 0.0) + seconds / max(sp.total.elapsed_s, 1e-9)
    events = [n for n, _ in sorted(weight.items(), key=lambda kv: -kv[1])[:top]]
    classes = [*events, OTHER, CPU, UNACCOUNTED]
    colours = {n: _PALETTE[i % len(_PALETTE)] for i, n in enumerate(events)}
    colours.update({OTHER: _OTHER_COLOUR, CPU: _CPU_COLOUR, UNACCOUNTED: _UNACCOUNTED_COLOUR})

    height = max(3.0, 1.2 + 0.45 * len(profiles))
    fig = Figure(figsize=(12.0, height), layout="constrained")
    FigureCanvasAgg(fig)
    instance_only = all(sp.slowest is None for sp in profiles)
    axes = [fig.subplots(1, 1)] if instance_only else list(fig.subplots(1, 2, sharey=True))
    panels = [(axes[0], "total", "DB time, all sessions (AWR)")] if instance_only else [
        (axes[0], "slowest", "the slowest session"), (axes[1], "total", "all sessions, summed")]
    if describe is None:
        describe = short_labels(profiles).__getitem__
    labels = [describe(sp.label) for sp in profiles]
    ypos = list(range(len(profiles)))
    for ax, which, title in panels:
        left = [0.0] * len(profiles)
        for cls in classes:
            widths = []
            for sp in profiles:
                p: SessionProfile = getattr(sp, which) or sp.total
                parts = p.parts()
                if cls == OTHER:
                    widths.append(sum(v for k, v in p.waits.items() if k not in events))
                else:
                    widths.append(max(0.0, parts.get(cls, 0.0)))
            if not any(widths):
                continue
            ax.barh(ypos, widths, left=left, color=colours[cls], label=cls, height=0.7, edgecolor="white", linewidth=0.5)
            left = [a + b for a, b in zip(left, widths)]
        ax.set_title(title, fontsize=10, loc="left")
        ax.set_xlabel("seconds")
        ax.grid(axis="x", color="#e3e3e3")
        ax.set_axisbelow(True)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
    axes[0].set_yticks(ypos, labels)
    axes[0].invert_yaxis()
    seen: dict[str, Any] = {}
    for ax in axes:
        for handle, name in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(name, handle)
    names = [c for c in classes if c in seen]
    handles = [seen[n] for n in names]
    fig.legend(handles, names, loc="outside lower center", ncol=min(5, len(names)), frameon=False, fontsize=9)
    fig.suptitle("Where the time went, per setting (seconds by time source)", fontsize=13, fontweight="bold")
    return fig


__all__ = ["SettingProfile", "profile_figure", "profile_table", "profile_tables", "setting_profiles", "side_by_side_table",
           "is_awr"]
