"""The analysis of a sweep, told in a few sentences a human can paste into a ticket.

    Best multiblock_read = 16 (128 kB): 25.9 M rows/s [25.1, 26.4] (median
    rows_per_s, 95% CI, n=5). 8, 32, 64 are indistinguishable from it.
    1 is 3.6x slower [3.4, 3.8]; 2 is 1.9x slower [1.8, 2.0].

"x slower" always means worse for the goal: a lower throughput when the goal
is "max", a larger elapsed time when it is "min".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sized

from ..units import fmt_factor, human, with_interval
from .stats import Analysis, SettingStats

_MAX_SLOWER_LISTED = 3


# --------------------------------------------------------------------------
# the verdict


def slowdown(stats: SettingStats, goal: str) -> tuple[float, float, float]:
    """How many times worse than the best (>= 1 for a worse setting), with its
    interval. For goal "max" it is best/setting, for "min" setting/best."""
    r, lo, hi = stats.ratio_to_best, stats.ratio_to_best_ci_low, stats.ratio_to_best_ci_high
    if goal == "min":
        return r, lo, hi
    with_zero = lambda x: math.inf if x == 0 else 1.0 / x  # noqa: E731
    return with_zero(r), with_zero(hi), with_zero(lo)


def _default_describe(key: Hashable) -> str:
    if isinstance(key, tuple):
        return ", ".join(str(part) for part in key)
    return str(key)


def _listing(names: list[str]) -> str:
    # labels of several knobs contain commas themselves: bracket each one
    if any(", " in n for n in names):
        return ", ".join(f"({n})" for n in names)
    return ", ".join(names)


def _are(names: Sized) -> str:
    return "is" if len(names) == 1 else "are"


def verdict_text(
    analysis: Analysis,
    *,
    knob_label: str = "setting",
    describe: Callable[[Hashable], str] | None = None,
    metric: str | None = None,
    unit: str = "",
) -> str:
    """A few sentences: the best setting with its median and interval, the
    settings indistinguishable from it, how much slower the others are (worst
    first, with intervals), and what needs care (single samples, outliers)."""
    d = describe or _default_describe
    metric = analysis.metric if metric is None else metric
    goal = analysis.goal
    settings = analysis.settings
    measured = [k for k, s in settings.items() if s.n > 0]
    empty = [k for k, s in settings.items() if s.n == 0]

    if analysis.best is None or not measured:
        return "No measurements yet." if not empty else f"No measurements yet for {_listing([d(k) for k in empty])}."

    best = settings[analysis.best]
    what = f"median {metric}" if metric else "median"
    if best.n >= 2:
        figure = f"{with_interval(best.median, best.ci_low, best.ci_high, unit)} ({what}, 95% CI, n={best.n})"
    elif best.has_interval:
        figure = (
            f"{with_interval(best.median, best.ci_low, best.ci_high, unit)} "
            f"({metric or 'value'} of a single run; 95% CI of its steady state from its per-second series)"
        )
    else:
        figure = f"{human(best.median, unit)} ({what}, a single sample: no interval)"

    sentences: list[str] = []
    others = [k for k in measured if k != analysis.best]
    # several knobs: the setting's own label already names each of them
    named = f"setting {d(analysis.best)}" if ", " in knob_label else f"{knob_label} = {d(analysis.best)}"
    if not others:
        sentences.append(f"Only {named} was measured: {figure}. Nothing to compare it with.")
    else:
        sentences.append(f"Best {named}: {figure}.")
        same = [k for k in others if k in analysis.indistinguishable]
        worse = [k for k in others if k not in analysis.indistinguishable]
        rule = ""
        if analysis.practical > 0:
            rule = f" (interval of the ratio contains 1, or within {analysis.practical * 100:g}%)"
        if same and not worse:
            sentences.append(
                f"No setting is demonstrably better: {_listing([d(k) for k in same])} "
                f"{_are(same)} indistinguishable from it{rule}."
            )
            # Still say how large the largest gap is, for the record.
            k = max(same, key=lambda k: _sort_factor(slowdown(settings[k], goal)[0]))
            f, lo, hi = slowdown(settings[k], goal)
            if math.isfinite(f) and f > 1.0:
                sentences.append(f"The largest gap: {d(k)} is {fmt_factor(f, lo, hi, 'slower')}.")
        elif same:
            sentences.append(f"{_listing([d(k) for k in same])} {_are(same)} indistinguishable from it{rule}.")
        if worse:
            ranked = sorted(worse, key=lambda k: -_sort_factor(slowdown(settings[k], goal)[0]))
            shown = len(ranked) if len(ranked) <= _MAX_SLOWER_LISTED + 1 else _MAX_SLOWER_LISTED
            listed = ranked[:shown]
            parts = []
            for k in listed:
                f, lo, hi = slowdown(settings[k], goal)
                if analysis.method == "unpaired" and (settings[k].n < 2 or best.n < 2):
                    lo = hi = math.nan  # one sample against one: the bootstrap interval is the point itself
                parts.append(f"{d(k)} is {fmt_factor(f, lo, hi, 'slower')}")
            if not same:
                lead = "Every other setting is slower: " if len(worse) > 1 else ""
                sentences.append(lead + "; ".join(parts) + ".")
            else:
                sentences.append("; ".join(parts) + ".")
            rest = ranked[shown:]
            if rest:
                fs = [slowdown(settings[k], goal)[0] for k in rest]
                lo_f, hi_f = min(fs), max(fs)
                span = f"{fmt_factor(lo_f)} to {fmt_factor(hi_f)}"
                sentences.append(f"{len(rest)} more are {span} slower: {_listing([d(k) for k in rest])}.")

    single = [k for k in measured if settings[k].n == 1]
    if others and len(single) == len(measured):
        sentences.append("Every setting has a single sample: each factor is one measurement against one, with no interval; repeat to be sure.")
    elif single and others:
        sentences.append(
            f"{_listing([d(k) for k in single])} {'has' if len(single) == 1 else 'have'} a single sample "
            "and no interval of its own: repeat to be sure."
        )
    flagged = [k for k in measured if settings[k].outliers]
    if flagged:
        notes = [f"{d(k)}: {len(settings[k].outliers)} of {settings[k].n}" for k in flagged]
        sentences.append(f"Outliers flagged and kept in the statistics: {'; '.join(notes)}.")
    if empty:
        sentences.append(f"No measurements for {_listing([d(k) for k in empty])}.")
    if others:
        sentences.extend(_method_sentences(analysis, d))
    return " ".join(sentences)


def _method_sentences(analysis: Analysis, d: Callable[[Hashable], str]) -> list[str]:
    """How the ratios were judged, when it is not the plain per-setting way: a
    reader of a pasted verdict should not have to guess what the intervals mean."""
    if analysis.method != "paired" or analysis.blocks < 2:
        return []
    out = []
    drift = [math.exp(v) for v in analysis.drift.values() if math.isfinite(v)]
    text = f"Ratios compare the settings within each of the {analysis.blocks} blocks"
    if drift:
        text += f", so the drift between blocks ({min(drift) - 1:+.0%} to {max(drift) - 1:+.0%} around the average block) cancels"
    if analysis.looks > 1:
        text += (
            f"; sequential stopping could look at the data {analysis.looks} times, so each interval is a "
            f"{analysis.confidence_per_look:.2%} interval and the 5% error is shared by all looks"
        )
    out.append(text + ".")
    compared = sum(1 for k, s in analysis.settings.items() if k != analysis.best and math.isfinite(s.ratio_to_best_ci_low))
    if analysis.family and compared >= 2:
        # A reader takes every "slower" at once; say that they were judged that way.
        out.append(
            f"The {compared} intervals to the best hold together: with 95% confidence all of them are right, "
            "the best's lucky pick from the same data included, so each is wider than a comparison of two settings alone."
        )
    if analysis.unpaired:
        names = _listing([d(k) for k in analysis.unpaired])
        out.append(f"{names} shared no block with the best and {'was' if len(analysis.unpaired) == 1 else 'were'} compared unpaired.")
    return out


def _sort_factor(f: float) -> float:
    return f if math.isfinite(f) else math.inf
