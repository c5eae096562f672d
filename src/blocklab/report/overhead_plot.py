"""Seed 001's picture of the checksum overhead: elapsed time normalised to the
run without checksums, against block size (analysis/overhead.py computes it)."""

from __future__ import annotations

import math
from collections.abc import Iterable

from matplotlib.figure import Figure

from ..analysis.overhead import Normalised, context_label, is_checksum_sweep, normalised, reference_label, settings_key
from ..results import ResultRow
from ..units import fmt_bytes


def overhead_figure(rows: Iterable[ResultRow], metric: str = "elapsed_s", *, seed: int = 0) -> Figure | None:
    """matplotlib Figure: normalised elapsed against block size (log2 axis), one
    line per level with interval bars, one panel per other setting (index on/off).
    With a single block size: a bar chart per level. None when there is nothing to draw."""
    rows = list(rows)
    if not is_checksum_sweep(rows):
        return None
    norm = [n for n in normalised(rows, metric, seed=seed) if math.isfinite(n.value)]
    if not norm:
        return None
    panels: dict[tuple, list[Normalised]] = {}
    for n in norm:
        panels.setdefault(settings_key(n.context), []).append(n)
    blocks = {n.block_size for n in norm}
    several = len(blocks) > 1 and None not in blocks
    # at least 7.5 inches: one panel (no index axis, e.g. RocksDB's variants) must still hold the suptitle
    fig = Figure(figsize=(max(7.5, 5.2 * len(panels)), 4.0), layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False, sharey=True)[0]
    for ax, items in zip(axes, panels.values()):
        by_level: dict[tuple, list[Normalised]] = {}
        for n in items:
            by_level.setdefault(settings_key(n.level), []).append(n)
        if several:
            count = len(by_level)
            for i, series in enumerate(by_level.values()):
                series.sort(key=lambda n: n.block_size)
                dodge = 2 ** (0.05 * (i - (count - 1) / 2))  # side by side, so the interval bars do not hide each other
                xs = [n.block_size * dodge for n in series]
                ys = [n.value for n in series]
                lo = [max(0.0, n.value - n.ci_low) if math.isfinite(n.ci_low) else 0.0 for n in series]
                hi = [max(0.0, n.ci_high - n.value) if math.isfinite(n.ci_high) else 0.0 for n in series]
                ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", capsize=3, label=series[0].level_label)
            ax.set_xscale("log", base=2)
            ticks = sorted(blocks)
            ax.set_xticks(ticks)
            ax.set_xticklabels([fmt_bytes(b) for b in ticks])
            ax.set_xlabel("block size")
        else:
            series = [s[0] for s in by_level.values()]
            xs = list(range(len(series)))
            ys = [n.value for n in series]
            lo = [max(0.0, n.value - n.ci_low) if math.isfinite(n.ci_low) else 0.0 for n in series]
            hi = [max(0.0, n.ci_high - n.value) if math.isfinite(n.ci_high) else 0.0 for n in series]
            ax.bar(xs, ys, yerr=[lo, hi], capsize=4, color=[f"C{i}" for i in xs])
            ax.set_xticks(xs)
            ax.set_xticklabels([n.level_label.replace(", ", "\n") for n in series], fontsize=8)
        ax.axhline(1.0, color="grey", linewidth=0.8, linestyle=":")
        title = context_label(items[0].context)
        ax.set_title(title if title != "all" else f"{metric} per checksum level", fontsize=10)
        ax.grid(True, alpha=0.3)
    ref = reference_label(rows)
    axes[0].set_ylabel(f"{metric} / {metric} with {ref}")
    if several:
        axes[0].legend(fontsize=8)
    fig.suptitle(f"Checksum overhead (normalised to {ref}, 95% intervals)", fontsize=11)
    return fig
