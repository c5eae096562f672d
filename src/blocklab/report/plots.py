"""The pictures of a run, as PNG and SVG bytes (matplotlib, Agg; no files, no pyplot).

* A sweep of the multiblock read size (one numeric knob, a scan workload that
  records the average read size): throughput against the knob with the
  measured read size beside it, in rows/s and in MB/s (scan_plot.py).
* Any other sweep gets the generic picture of its metric: a numeric knob a
  line with its band, categorical or several knobs bars with CI whiskers
  (sweep_plot.py).
* Recipe-specific pictures after them (EXTRA_FIGURES below): block drift, the
  per-second series, a fleet's hosts, the time profile, checksum overhead, the
  SLOB petals; each lives in its own module and returns None when the run has
  nothing for it.

What these share (colours, style, the knob's axis) is in plot_style.py.

`make_plots(data, limits)` returns them all; `limits` is e.g.
{"max_mb_per_s": 1450.0, "max_small_iops": 98000.0} (from `blocklab calibrate`).
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass

import matplotlib
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from ..analysis.overhead import reference_label
from .data import RunData
from .device_twin import PETAL_SENTENCE, petal_points
from .overhead_plot import overhead_figure
from .plot_style import STYLE, single_numeric_knob
from .scan_plot import scan_sweep
from .sweep_plot import generic_sweep

PNG_DPI = 150
# a recipe-specific picture: the run and the device limits -> (id, title, caption, figure), or None
FigureMaker = Callable[[RunData, dict[str, float]], "tuple[str, str, str, Figure] | None"]


@dataclass(frozen=True)
class Plot:
    """One picture: `id` names its files (plots/ID.png, plots/ID.svg) and its HTML element."""

    id: str
    title: str
    caption: str
    png: bytes
    svg: bytes


# ====================================================================== entry points
def make_plots(data: RunData, limits: dict[str, float] | None = None) -> list[Plot]:
    """Every picture this run has (none before its first measured cell)."""
    out: list[Plot] = []
    with matplotlib.rc_context(STYLE):  # type: ignore[arg-type]  # matplotlib types the keys as literals
        for plot_id, title, caption, fig in _figures(data, limits or {}):
            png, svg = render(fig)
            out.append(Plot(plot_id, title, caption, png, svg))
    return out


def render(fig: Figure) -> tuple[bytes, bytes]:
    """A figure -> (PNG bytes, SVG bytes)."""
    if not isinstance(fig.canvas, FigureCanvasAgg):
        FigureCanvasAgg(fig)
    png, svg = io.BytesIO(), io.BytesIO()
    fig.savefig(png, format="png", dpi=PNG_DPI, metadata={"Software": None})
    fig.savefig(svg, format="svg", metadata={"Date": None, "Creator": None})
    return png.getvalue(), svg.getvalue()


def _figures(data: RunData, limits: dict[str, float]) -> list[tuple[str, str, str, Figure]]:
    if not data.ok_rows:
        return []
    figures: list[tuple[str, str, str, Figure]] = []
    knob = single_numeric_knob(data)
    metrics = set(data.metrics_present())
    scan = knob is not None and "avg_read_kb" in metrics and bool(metrics & {"rows_per_s", "mb_per_s"})
    if (not scan or data.metric not in ("rows_per_s", "mb_per_s")) and not _petals(data):
        figures.append(generic_sweep(data, data.metric, limits))
    if scan:
        assert knob is not None
        for metric in ("rows_per_s", "mb_per_s"):
            if metric in metrics:
                figures.append(scan_sweep(data, knob, metric, limits))
    for extra in EXTRA_FIGURES:
        made = extra(data, limits)
        if made is not None:
            figures.append(made)
    return figures


def _time_profile(data: RunData, limits: dict[str, float]) -> tuple[str, str, str, Figure] | None:
    """Where the time went (the update workload's wait profile), when the rows carry one."""
    from ..probes.profile_view import setting_profiles
    from .profile_plot import method_caption, profile_figure

    fig = profile_figure(data.ok_rows, order=list(data.summary.get("settings", {})))
    if fig is None:
        return None
    profiles = setting_profiles(data.ok_rows)
    panels = ("DB time by class per report" if all(sp.slowest is None for sp in profiles)  # AWR: the instance's sessions only
              else "Time by class per setting, the slowest session on the left, all sessions summed on the right")
    caption = f"{panels}; {method_caption(profiles, data.capabilities)}."
    return "time-profile", "Where the time went", caption, fig


def _checksum_overhead(data: RunData, limits: dict[str, float]) -> tuple[str, str, str, Figure] | None:
    """Seed 001's picture: elapsed normalised to no checksum, per block size and level."""
    fig = overhead_figure(data.ok_rows, data.metric)
    if fig is None:
        return None
    ref = reference_label(data.ok_rows)
    against = "the run without them" if ref == "checksum off" else f"the run with {ref} (this engine has no checksum off)"
    caption = (
        f"Elapsed time of each checksum / block-checking level divided by {against} "
        "(same block size and index): 1.0 means no difference. Bars are 95% bootstrap intervals."
    )
    return "checksum-overhead", "Checksum overhead, normalised", caption, fig


def _slob_petal(which: int, plot_id: str, title: str, caption: str) -> FigureMaker:
    """One of the SLOB petal plots (0: latency vs IOPS, 1: latency vs MB/s)."""

    def make(data: RunData, limits: dict[str, float]) -> tuple[str, str, str, Figure] | None:
        from ..analysis.slob_view import points
        from .slob_plot import petal_figures

        if not points(data.ok_rows):
            return None
        device = petal_points(data)  # the device twin's own petal, when the run has one (issue 19)
        figures = petal_figures(data.ok_rows, limits or None, device=device,
                                latency_source=data.capabilities.read_latency_source)
        return plot_id, title, caption + (PETAL_SENTENCE if device else ""), figures[which]

    return make


_PETAL_CAPTION = (
    "Each line is one update share, its points joined in session order (the seed's petals); the ringed "
    "point is where the petal turns (the fewest sessions within 5% of the line's highest read IOPS). "
    "The device's limits from a calibration (`blocklab calibrate`, or ORION / CALIBRATE_IO brought in with "
    "`blocklab import`), when there is one, are dashed lines, or a note at the "
    "right edge when they lie far beyond the data."
)


def _block_drift(data: RunData, limits: dict[str, float]) -> tuple[str, str, str, Figure] | None:
    from .drift_plot import drift_plot

    return drift_plot(data, limits)


def _per_second(data: RunData, limits: dict[str, float]) -> tuple[str, str, str, Figure] | None:
    """A timed run's points second by second, with their warm-up and drift."""
    from .series_plot import series_figure

    made = series_figure(data)
    if made is None:
        return None
    fig, caption = made
    return "per-second", "Second by second: did each point settle?", caption, fig


def _fleet_hosts(data: RunData, limits: dict[str, float]) -> tuple[str, str, str, Figure] | None:
    """A fleet run's hosts side by side, one curve per host (report/fleet.py)."""
    from .fleet import fleet_figure

    return fleet_figure(data, limits)


# Recipe-specific pictures: each takes the run and returns (id, title, caption, figure) or None.
EXTRA_FIGURES: list[FigureMaker] = [
    _block_drift,
    _per_second,
    _fleet_hosts,
    _time_profile,
    _checksum_overhead,
    _slob_petal(0, "slob-latency-iops", "Read latency against IOPS", _PETAL_CAPTION),
    _slob_petal(1, "slob-latency-mbps", "Read latency against MB/s", _PETAL_CAPTION),
]


def _petals(data: RunData) -> bool:
    """A SLOB run: its petal plots show every point; a bar per (sessions, update %,
    block size) beside them (dozens of unreadable labels) would add nothing."""
    from ..analysis.slob_view import points

    return bool(points(data.ok_rows))
