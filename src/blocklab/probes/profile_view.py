"""The time profiles of a run, per setting: what the seed's TIMESOURCE / SECONDS /
PERCENTAGE tables (report/console_tables.py) and the stacked bar of time by class
per setting (report/profile_plot.py) show.

Both read the flat `profile.slowest.*` and `profile.total.*` metrics the wait
profiler leaves in each result row (probes/profile.py). A setting measured several
times shows the mean of its runs: means add up, so the parts still sum to
TOTAL_TIME. Rows with only `profile.total.*` (an AWR report's instance-wide
profile, `blocklab import awr`, flagged `profile.awr`) have no slowest session:
their table has the seed's three columns and their figure one panel;
`side_by_side_table` puts several such profiles next to each other.

    profiles = setting_profiles(run_dir.rows())
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..units import label_of, value_text
from .profile import SessionProfile, unflatten_profile

OTHER = "other waits"  # the waits folded into one line of a table or one colour of a figure


@dataclass
class SettingProfile:
    label: str
    settings: dict[str, object]
    runs: int
    slowest: SessionProfile | None  # None: an instance-wide profile (AWR) has no sessions of its own
    total: SessionProfile
    extra: dict[str, float]  # the mean of every metric of its runs (elapsed_s, the engine's page writers...)


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


def _label(settings: dict[str, object]) -> str:
    return label_of(settings)


def setting_profiles(source: Any, order: Iterable[str] | None = None) -> list[SettingProfile]:
    """The mean profile per setting label, for the rows that have one."""
    groups: dict[str, list[dict[str, float]]] = {}
    settings: dict[str, dict[str, object]] = {}
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
        out.append(SettingProfile(label, settings[label], len(runs), slowest, total, mean))
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


def is_awr(sp: SettingProfile) -> bool:
    """True for a profile read from an AWR report (blocklab import awr)."""
    return sp.extra.get("profile.awr", 0.0) >= 0.5


AWR_CAPTION = ("from the AWR report: TOTAL_TIME is DB time (all foreground sessions), CPU is DB CPU, each wait the Top "
               "events table's total wait time; UNACCOUNTED_TIME is the rest (waits outside the Top table, time queued "
               "for a CPU)")


__all__ = ["AWR_CAPTION", "OTHER", "SettingProfile", "is_awr", "setting_profiles", "short_labels"]
