"""The one place the report writes files. Everything else in report/ returns bytes.

    write_report(run_dir)            report.html, plots/ID.png, plots/ID.svg (each atomic)
    refresh_report(run_dir)          the same for the runner, after every cell: never
                                     raises, and skips a rewrite that would cost more
                                     than a quarter of the run's time (force=True at the end)
    export_bytes(run_dir, "csv")     csv | json | parquet, as bytes
    write_export(run_dir, fmt, out)  the same into a file (atomic)

Every file is written via a temporary file and a rename, so a crash at any
moment leaves the previous complete report or the new one, never half a file.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ..results import ResultsError, RunDir, write_atomic
from .data import RunData, load_run

if TYPE_CHECKING:
    from ..device.calibrate import Summary as CalibrationSummary

REPORT_FILE = "report.html"
PLOTS_DIR = "plots"
EXPORT_FORMATS = ("csv", "json", "parquet")
# refresh_report spends at most about this share of the wall time on reports: a
# tenth, so a run of short cells (slob --quick: 6 s each, 1.5 s a render with its
# per-second panels) is not a fifth longer for a page nobody reads until the end
_REFRESH_SHARE = 0.1


def write_report(run_dir: RunDir | Path | str, limits: dict[str, float] | None = None) -> list[Path]:
    """Render the report of a results directory (complete, partial or with failed
    cells) and write it. Returns the paths written: report.html first, then each
    plot's PNG and SVG. `limits` (e.g. {"max_mb_per_s": 1450.0}) draws the device's
    limits; by default they come from the newest calibration of the run's device.
    Raises ResultsError when `run_dir` is not a results directory."""
    from .cpu_profile_view import flame_graphs
    from .html import render_html
    from .plots import make_plots

    path = run_dir.path if isinstance(run_dir, RunDir) else Path(run_dir)
    data = load_run(path)
    if limits is None:
        limits = device_limits(data)
    plots = make_plots(data, limits)
    flames = flame_graphs(data)  # a profiled run's flame graphs (SVG only)
    written: list[Path] = []
    plot_dir = path / PLOTS_DIR
    if plots or flames:
        plot_dir.mkdir(exist_ok=True)
    for plot in plots:
        for suffix, content in (("png", plot.png), ("svg", plot.svg)):
            target = plot_dir / f"{plot.id}.{suffix}"
            write_atomic(target, content)
            written.append(target)
    for flame in flames:
        write_atomic(plot_dir / f"{flame.id}.svg", flame.svg)
        written.append(plot_dir / f"{flame.id}.svg")
    report = path / REPORT_FILE
    write_atomic(report, render_html(data, plots, flames=flames))
    return [report, *written]


def device_limits(data: RunData) -> dict[str, float] | None:
    """The device's limits from the newest complete `blocklab calibrate` of the
    run's device, looked for beside the run and under the results root; None when
    there is none (or the calibration module is not there)."""
    try:
        from ..device.calibrate import find_latest_calibration, load_calibration
        from ..paths import results_root
    except ImportError:
        return None
    named = data.environment.get("calibration_dir")  # an imported run names its calibration (ORION, CALIBRATE_IO)
    if named:
        try:
            limits = _limits(load_calibration(Path(str(named))).summary)
        except Exception:  # moved or unreadable: the newest calibration of the device, as for any run
            limits = {}
        if limits:
            return limits
    device = data.environment.get("device")
    if not device:
        return None
    roots: list[Path] = []
    for root in (data.path.parent, results_root()):
        try:
            resolved = root.resolve()
        except OSError:
            continue
        if resolved not in roots:
            roots.append(resolved)
    for root in roots:
        try:
            found = find_latest_calibration(root, str(device))
            if found is None:
                continue
            limits = _limits(load_calibration(found).summary)
        except Exception:  # an unreadable calibration only means no limit lines
            continue
        if limits:
            return limits
    return None


def _limits(summary: CalibrationSummary) -> dict[str, float]:
    limits: dict[str, float] = {}
    if summary.max_large_mb_per_s is not None:
        limits["max_mb_per_s"] = float(summary.max_large_mb_per_s.value)
    if summary.max_small_iops is not None:
        limits["max_small_iops"] = float(summary.max_small_iops.value)
    return limits


# ---------------------------------------------------------------------- during a run
_last: dict[Path, tuple[float, float]] = {}  # run dir -> (monotonic end of the last write, its duration)


def refresh_report(
    run_dir: RunDir | Path | str, *, force: bool = False, clock: Callable[[], float] = time.monotonic
) -> str | None:
    """Rewrite the report of a run in progress. Never raises: returns None when the
    report is current (or this rewrite was skipped to save time), else the
    error text, so a broken report never stops a measurement.

    Rendering takes about a second; after a cell that took less, the rewrite is
    skipped while the time since the last one is under 9x what that one cost.
    Call it with force=True after the last cell."""
    path = (run_dir.path if isinstance(run_dir, RunDir) else Path(run_dir)).resolve()
    now = clock()
    previous = _last.get(path)
    if not force and previous is not None:
        ended, cost = previous
        if now - ended < cost * (1 - _REFRESH_SHARE) / _REFRESH_SHARE:
            return None
    try:
        write_report(path)
    except Exception as err:  # the run goes on; the message says why there is no fresh report
        return f"report not updated: {type(err).__name__}: {err}"
    finally:
        end = clock()
        _last[path] = (end, end - now)
    return None


# ---------------------------------------------------------------------- exports
def exporter(fmt: str) -> Callable[[RunData], bytes]:
    """The exporter of a format; ValueError naming the accepted ones otherwise."""
    if fmt == "csv":
        from .csv_export import export_csv

        return export_csv
    if fmt == "json":
        from .json_export import export_json

        return export_json
    if fmt == "parquet":
        from .parquet_export import export_parquet

        return export_parquet
    raise ValueError(f"--format {fmt!r} is not accepted; accepted: {', '.join(EXPORT_FORMATS)}")


def export_bytes(run_dir: RunDir | Path | str, fmt: str) -> bytes:
    """A results directory in one format (ResultsError if it is not one; ExportUnavailable
    for parquet without pyarrow)."""
    convert = exporter(fmt)
    path = run_dir.path if isinstance(run_dir, RunDir) else Path(run_dir)
    return convert(load_run(path))


def write_export(run_dir: RunDir | Path | str, fmt: str, output: Path | str) -> Path:
    out = Path(output)
    content = export_bytes(run_dir, fmt)
    if out.parent and not out.parent.exists():
        raise ResultsError(f"--output {out}: the directory {out.parent} does not exist")
    write_atomic(out, content)
    return out


__all__ = [
    "EXPORT_FORMATS",
    "REPORT_FILE",
    "PLOTS_DIR",
    "write_report",
    "refresh_report",
    "device_limits",
    "export_bytes",
    "write_export",
    "exporter",
]
