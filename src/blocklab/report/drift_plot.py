"""The drift picture: how much each randomised block ran above or below the
run's average block, every setting alike, and how far its cells scatter
around that.

It is the picture of why the verdict compares settings within blocks: the
line is what within-block ratios cancel, the dots' spread around it is what
is left in their intervals. On a shared VM the line often moves by more than
the difference a DBA is looking for.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from ..analysis.paired import BlockCell, fit_blocks
from ..units import label_of
from .data import RunData

SIZE = (10.0, 3.8)  # a small picture: one line across the run
BLUE = "#1f5fa8"
GREY = "#4d4d4d"
LIGHT = "#9a9a9a"
MIN_BLOCKS = 3


def drift_figure(data: RunData) -> tuple[Figure, str] | None:
    """(figure, caption) of the block drift of the run's metric; None with
    fewer than MIN_BLOCKS blocks, a single setting, or values the block model
    cannot take (zero or negative)."""
    metric = data.metric
    cells = [
        BlockCell(r.block, label_of(r.settings), float(r.metrics[metric]))
        for r in data.ok_rows
        if metric in r.metrics and math.isfinite(r.metrics[metric])
    ]
    blocks = sorted({c.block for c in cells})
    if len(blocks) < MIN_BLOCKS or len({c.key for c in cells}) < 2 or any(c.value <= 0 for c in cells):
        return None
    model = fit_blocks(cells, data.labels)
    if model.df < 1:
        return None
    drift = np.array([model.block_effects[b] for b in blocks])
    within = model.residual_sd

    fig = Figure(figsize=SIZE, dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    fig.suptitle("Drift between blocks", x=0.01, ha="left")
    ax = fig.add_subplot()

    def pct(logs: npt.ArrayLike) -> npt.NDArray[np.float64]:
        return (np.exp(logs) - 1.0) * 100.0

    # each cell divided by its setting's level: what is left is its block's drift and its own noise
    xs, ys = [], []
    position = {b: i + 1 for i, b in enumerate(blocks)}
    offsets: dict[int, int] = {}
    for c in cells:
        k = offsets.get(c.block, 0)
        offsets[c.block] = k + 1
        xs.append(position[c.block] + ((k % 7) - 3) * 0.04)  # a little apart, so equal cells stay visible
        ys.append(math.log(c.value) - model.levels[c.key])
    ax.plot(xs, pct(np.array(ys)), "o", ls="none", color=LIGHT, ms=4, alpha=0.75, mec="white", mew=0.3, zorder=2)
    ax.plot(range(1, len(blocks) + 1), pct(drift), "-o", color=BLUE, lw=2.0, ms=5, zorder=3)
    ax.axhline(0.0, color=GREY, lw=0.8, zorder=1)
    ax.set_xlabel("block, in the order they ran")
    ax.set_ylabel("% against the average block")
    ax.set_xlim(0.4, len(blocks) + 0.6)
    if len(blocks) <= 30:
        ax.set_xticks(range(1, len(blocks) + 1))
    goal = "higher is better" if data.goal == "max" else "lower is better"
    span = f"{pct(drift.min()):+.0f}% to {pct(drift.max()):+.0f}%"
    ax.set_title(
        f"{metric} ({goal}): blocks ran {span} around the average block; "
        f"within a block, cells scatter ±{(math.exp(within) - 1) * 100:.0f}% (1 sd)",
        loc="left", color=GREY, pad=8,
    )
    ax.legend(
        [Line2D([], [], color=BLUE, marker="o", lw=2), Line2D([], [], color=LIGHT, marker="o", ls="none")],
        ["the block (all its settings)", "one cell / its setting's level"],
        loc="best", frameon=False, fontsize=9,
    )
    caption = (
        f"Every block ran each setting once, in random order. The line is how far each whole block ran above or "
        f"below the average block ({span} here); the dots are its cells, each divided by its setting's own level. "
        f"The verdict compares settings within blocks, which cancels the line: only the dots' scatter around it "
        f"(±{(math.exp(within) - 1) * 100:.0f}%) is left in its intervals."
    )
    return fig, caption


def drift_plot(data: RunData, limits: dict[str, float]) -> tuple[str, str, str, Figure] | None:
    """plots.EXTRA_FIGURES entry: (id, title, caption, figure) or None."""
    made = drift_figure(data)
    if made is None:
        return None
    fig, caption = made
    return "block-drift", "Drift between blocks", caption, fig
