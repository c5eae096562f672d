"""The analysis of a sweep, told in at most three lines a DBA reads in ten seconds:

    Best multiblock_read is 16 (128 kB): 25.9 M rows/s [25.1, 26.4]; as good (within 3%): 32 (256 kB) 1.01x.
    Slower: 1 (8 kB) 3.6x [3.4, 3.8], 2 (16 kB) 1.9x [1.8, 2.0]; 3 blocks cannot separate 8 (64 kB) 1.04x (about 9 would).
    Disk: ...                        (the device twin's line, analysis/efficiency.py)

the best, what is as good as it, what every other setting costs, what the disk
allowed. How the figures were judged (drift cancelled, the intervals holding
together, the looks of sequential stopping, outliers) is the explanation
(explain_lines): the report's "How to read this" and `--explain`.

"x slower" always means worse for the goal: a lower throughput when the goal
is "max", a larger elapsed time when it is "min".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sized
from dataclasses import dataclass

from ..units import fmt_factor, human, with_interval
from . import settle
from .stats import Analysis, SettingStats

# --------------------------------------------------------------------------
# where each setting stands against the best

AS_GOOD = settle.MARGIN  # "as good as the best": the slowdown's whole interval within the budgeted rule's margin (or measure.practical)
VERDICT_CHARS = 400  # the verdict, all its lines: shorter than this
MAX_BLOCKS_SAID = settle.MAX_ESTIMATE  # an estimate of blocks beyond this cap is said as "more than" it (settle.py's cap)


@dataclass(frozen=True)
class Standing:
    """A setting other than the best against it: how much slower (>= 1 worse),
    and whether that is shown ("slower"), the setting is as good within the
    tolerance ("as_good"), or the run cannot tell yet ("undecided", with the
    blocks its noise says would settle it)."""

    key: Hashable
    factor: float
    low: float
    high: float
    kind: str
    blocks_needed: int | None = None


def slowdown(stats: SettingStats, goal: str) -> tuple[float, float, float]:
    """How many times worse than the best (>= 1 for a worse setting), with its
    interval. For goal "max" it is best/setting, for "min" setting/best."""
    r, lo, hi = stats.ratio_to_best, stats.ratio_to_best_ci_low, stats.ratio_to_best_ci_high
    if goal == "min":
        return r, lo, hi
    with_zero = lambda x: math.inf if x == 0 else 1.0 / x  # noqa: E731
    return with_zero(r), with_zero(hi), with_zero(lo)


def tolerance(analysis: Analysis) -> float:
    """How close to the best counts as "as good": measure.practical when set, else the budgeted rule's 3%."""
    return analysis.practical if analysis.practical > 0 else AS_GOOD


def blocks_of(analysis: Analysis, key: Hashable) -> int:
    """The blocks (paired) or runs (unpaired) a setting's comparison with the best rests on."""
    if analysis.method == "paired" and analysis.blocks:
        return analysis.blocks
    best = analysis.settings.get(analysis.best) if analysis.best is not None else None
    return min(analysis.settings[key].n, best.n if best else analysis.settings[key].n)


def standings(analysis: Analysis, spreads: Mapping[Hashable, tuple[float, int]] | None = None) -> list[Standing]:
    """Every measured setting other than the best, the worst first. `spreads`: each
    setting's per-block log-ratio spread against the best, measured from the rows
    (settle.pair_spread); the blocks an undecided one needs come from the same
    estimate the budgeted rule prints (analysis/settle.py), so the run says one number."""
    tol = tolerance(analysis)
    measured = len([k for k, v in analysis.settings.items() if v.n])
    out = []
    for key, s in analysis.settings.items():
        if s.n == 0 or key == analysis.best:
            continue
        f, lo, hi = slowdown(s, analysis.goal)
        best = analysis.settings[analysis.best]
        if analysis.method == "unpaired" and (s.n < 2 or best.n < 2):
            lo = hi = math.nan  # one sample against one: the bootstrap interval is the point itself
        if math.isfinite(lo) and math.isfinite(hi) and key not in analysis.indistinguishable:
            kind, needed = "slower", None
        elif key in analysis.indistinguishable and math.isfinite(hi) and hi <= 1.0 + tol and lo >= 1.0 / (1.0 + tol):
            kind, needed = "as_good", None  # the whole interval within the margin, never the point estimate alone
        else:
            own, shared = (spreads or {}).get(key, (math.nan, 0))
            kind, needed = "undecided", blocks_to_settle(  # from the blocks holding both, as the budget's note counts
                f, lo, hi, shared if shared >= 1 else blocks_of(analysis, key), tol, settings=measured,
                noise_sd=analysis.residual_sd if analysis.method == "paired" else math.nan,
                pair_spread=own, alpha=(1.0 - analysis.confidence_per_look), ratio=s.ratio_to_best,
            )
        out.append(Standing(key, f, lo, hi, kind, needed))
    return sorted(out, key=lambda st: -_sort_factor(st.factor))


def blocks_to_settle(factor: float, low: float, high: float, blocks: int, tol: float, *, noise_sd: float = math.nan,
                     pair_spread: float = math.nan, settings: int = 2, alpha: float = 0.05,
                     ratio: float | None = None) -> int | None:
    """About how many blocks in all would settle a comparison whose interval holds 1
    now: separate it from the best, or show it within `tol` of it.

    Paired: settle.blocks_to_settle, the one estimate of the run (the budgeted
    rule's undecided pairs say the same number), with the per-block ratio's spread
    the larger of the pair's own (`pair_spread`) and the block model's pooled one
    (sqrt(2) x `noise_sd`: a per-block ratio carries two cells' noise). Without
    either (an unpaired analysis): the observed half-width scaled by one over the
    square root of the blocks, its critical value kept (an estimate that errs
    high). None without an interval (one block: no noise measured yet).
    `ratio`: the setting's ratio to the best, when the caller has it."""
    if not (math.isfinite(low) and math.isfinite(high) and low > 0 and factor > 0 and blocks >= 1):
        return None
    pooled = math.sqrt(2.0) * noise_sd if math.isfinite(noise_sd) and noise_sd > 0 else math.nan
    spread = max((x for x in (pair_spread, pooled) if math.isfinite(x) and x > 0), default=math.nan)
    if math.isfinite(spread):
        # the ratio to the best as the budget's note reads it (not the slowdown), so both say one number
        return settle.blocks_to_settle(factor if ratio is None else ratio, spread, blocks, tol, alpha, max(settings - 1, 1))
    gap = abs(math.log(factor))
    room = math.log(1.0 + tol) - gap
    wanted = max((w for w in (gap, room) if w > 0), default=0.0)
    if wanted <= 0:
        return None
    half = (math.log(high) - math.log(low)) / 2.0
    if half <= 0:
        return None
    return min(settle.MAX_ESTIMATE + 1, max(blocks + 1, math.ceil(blocks * (half / wanted) ** 2)))


# --------------------------------------------------------------------------
# the verdict: at most three lines


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


def best_figure(analysis: Analysis, unit: str = "") -> str:
    """The best's figure as the table shows it: '15.2 M rows/s [13.5, 17.0]'."""
    best = analysis.settings[analysis.best]
    value, lo, hi = best.figure()
    if best.has_interval and math.isfinite(lo) and math.isfinite(hi):
        return with_interval(value, lo, hi, unit)
    return human(value, unit)


def verdict_options(
    analysis: Analysis,
    *,
    knob_label: str = "setting",
    describe: Callable[[Hashable], str] | None = None,
    unit: str = "",
    spreads: Mapping[Hashable, tuple[float, int]] | None = None,
) -> list[list[str]]:
    """The verdict's lines, from the most detailed to the most compact: the
    caller keeps the first that fits (compose), with the disk's line after them."""
    d = describe or _default_describe
    measured = [k for k, s in analysis.settings.items() if s.n > 0]
    if analysis.best is None or not measured:
        return [["No measurement yet."]]
    named = f"setting {d(analysis.best)}" if ", " in knob_label else f"{knob_label} is {d(analysis.best)}"
    figure = best_figure(analysis, unit)
    ranked = standings(analysis, spreads)
    if not ranked:
        return [[f"Only {named.replace(' is ', ' = ', 1)} was measured: {figure}; nothing to compare it with."]]
    options = []
    for detail in (2, 1, 0):
        for most in (None, 6, 4, 2):
            first = f"Best {named}: {figure}" + _as_good_part(analysis, ranked, d, detail, most)
            second = _cost_part(analysis, ranked, d, detail, most)
            options.append([first + ".", *([second] if second else [])])
    return options


def _factor(st: Standing, interval: bool) -> str:
    if st.kind == "undecided" or not interval:
        return fmt_factor(st.factor)
    return fmt_factor(st.factor, st.low, st.high)


def _some(items: list[Standing], d: Callable[[Hashable], str], detail: int, most: int | None) -> str:
    """'8 (64 kB) 1.04x [0.98, 1.10], 32 (256 kB) 1.9x' (at most `most` named, the rest counted)."""
    shown = items if most is None or len(items) <= most else items[:most]
    sep = "; " if any(", " in d(st.key) for st in shown) else ", "
    text = sep.join(f"{d(st.key)} {_factor(st, detail >= 2)}" if detail else d(st.key) for st in shown)
    rest = items[len(shown):]
    if rest:
        fs = [st.factor for st in rest]
        text += f" and {len(rest)} more ({fmt_factor(min(fs))}-{fmt_factor(max(fs))})"
    return text


def _as_good_part(analysis: Analysis, ranked: list[Standing], d: Callable[[Hashable], str], detail: int, most: int | None) -> str:
    good = [st for st in ranked if st.kind == "as_good"][::-1]  # the closest first
    if not good:
        return ""
    return f"; as good (within {tolerance(analysis) * 100:g}%): {_some(good, d, detail, most)}"


def _cost_part(analysis: Analysis, ranked: list[Standing], d: Callable[[Hashable], str], detail: int, most: int | None) -> str:
    """'Slower: ...; 2 blocks cannot separate ... from it (about 6 would: --repeats 6).'"""
    parts = []
    slower = [st for st in ranked if st.kind == "slower"]
    if slower:
        parts.append(f"Slower: {_some(slower, d, detail, most)}")
    open_ = [st for st in ranked if st.kind == "undecided"]
    if open_:
        blocks = max(blocks_of(analysis, st.key) for st in open_)
        unit = "block" if analysis.method == "paired" else "run"
        runs = f"{blocks} {unit}{'s' if blocks != 1 else ''}"
        factors = _some(open_, d, max(detail, 1), most)
        needed = sorted(st.blocks_needed for st in open_ if st.blocks_needed is not None)
        if needed:
            few, many = needed[0], needed[-1]
            most_ = f"more than {MAX_BLOCKS_SAID}" if many > MAX_BLOCKS_SAID else str(many)
            span = most_ if few == many else f"{few} to {most_}"
            more = f"about {span} would" + (f": --repeats {many}" if many <= MAX_BLOCKS_SAID else "")
        else:
            more = "repeat to measure its noise"
        parts.append(f"{runs} cannot separate {factors} from it ({more})")
    return ("; ".join(parts) + ".") if parts else ""


def compose(options: list[list[str]], extra: str = "", limit: int = VERDICT_CHARS) -> str:
    """The first option whose lines, with `extra` (the disk's line) after them, stay
    under `limit` characters (the last option when none does)."""
    for lines in options:
        text = "\n".join([*lines, *([extra] if extra else [])])
        if len(text) < limit:
            return text
    return "\n".join([*options[-1], *([extra] if extra else [])])


def verdict_text(
    analysis: Analysis,
    *,
    knob_label: str = "setting",
    describe: Callable[[Hashable], str] | None = None,
    metric: str | None = None,
    unit: str = "",
) -> str:
    """At most three lines under 400 characters: the best with the figure the
    table shows for it, what is as good as it, what every other setting costs
    (and what the run cannot tell yet, with the blocks that would)."""
    return compose(verdict_options(analysis, knob_label=knob_label, describe=describe, unit=unit))


# --------------------------------------------------------------------------
# the explanation: how the figures were judged


def explain_lines(
    analysis: Analysis,
    *,
    describe: Callable[[Hashable], str] | None = None,
    metric: str | None = None,
) -> list[str]:
    """The method behind the verdict, one paragraph a line: the report's "How to
    read this" and `blocklab run/report/analyse --explain`."""
    d = describe or _default_describe
    metric = analysis.metric if metric is None else metric
    settings = analysis.settings
    measured = [k for k, s in settings.items() if s.n > 0]
    if analysis.best is None or not measured:
        return []
    out = [_figure_sentence(analysis, metric)]
    out.extend(_method_sentences(analysis, d))
    tol = tolerance(analysis)
    out.append(
        f"A setting is slower when the interval of its ratio to the best excludes 1; as good when the whole interval "
        f"lies within {tol * 100:g}% of the best; otherwise the run cannot tell yet, and the blocks that would settle it "
        "are estimated from this run's noise (an interval narrows as one over the square root of the blocks)."
    )
    single = [k for k in measured if settings[k].n == 1 and not settings[k].has_interval]
    if single and len(measured) > 1:
        out.append(
            f"{_listing([d(k) for k in single])} {'has' if len(single) == 1 else 'have'} a single sample and no interval "
            "of its own: each factor is one measurement against one; repeat to be sure."
        )
    series = [k for k in measured if settings[k].interval_source == "series"]
    if series:
        out.append(
            f"{_listing([d(k) for k in series])}: a single run whose interval is that of its per-second series' steady "
            "state (batch means after the warm-up), not an interval over runs."
        )
    flagged = [k for k in measured if settings[k].outliers]
    if flagged:
        notes = [f"{d(k)}: {len(settings[k].outliers)} of {settings[k].n}" for k in flagged]
        out.append(f"Outliers flagged and kept in the statistics: {'; '.join(notes)}.")
    empty = [k for k, s in settings.items() if s.n == 0]
    if empty:
        out.append(f"No measurements for {_listing([d(k) for k in empty])}.")
    return out


def _figure_sentence(analysis: Analysis, metric: str) -> str:
    what = metric or "the metric"
    if analysis.method == "paired":
        return (
            f"Each setting's figure is its block-adjusted level of {what}: the geometric mean of its runs with each "
            "block's drift taken out (a fit of every cell as setting level times block drift), the figure the best is "
            f"picked on; its interval is a {_percent(analysis.confidence_per_look)} t interval from the fit's pooled noise. "
            "The median of the runs as measured is a detail column."
        )
    return (
        f"Each setting's figure is the median of its runs of {what} with its 95% bootstrap interval (the values are not "
        "all positive, or the runs have no blocks, so no drift is taken out); the best is the best median."
    )


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


def _percent(x: float) -> str:
    """0.95 -> '95%', 0.99722 -> '99.72%'."""
    return f"{x * 100:.2f}".rstrip("0").rstrip(".") + "%"


def _sort_factor(f: float) -> float:
    return f if math.isfinite(f) else math.inf
