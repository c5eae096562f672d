"""Device limits measured by Oracle's tools, saved as `blocklab calibrate`
saves its own: a run directory with calibration.json and one result row per
point, so `load_calibration` reads it and any report can draw its limits.

What differs from a calibration blocklab ran: environment.json describes the
Oracle host the tool ran on as the files tell it (never this machine), the
rows say source "import" and where each number came from, and the device is
the one the user names (--device), or the tool's own (ORION's LUN).
"""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path
from typing import TYPE_CHECKING

from ..device.calibrate import CALIBRATION_FILE, Calibration, PlannedPoint
from ..device.fio import Point
from ..results import ENVIRONMENT_FILE, PLAN_FILE, SUMMARY_FILE, ResultRow, RunDir
from .common import MIB
from .rundir import check_new, unranked

if TYPE_CHECKING:
    from ..spec import Scalar


def save_imported_calibration(run_dir: RunDir, cal: Calibration, *, sources: list[dict[str, str]], environment: dict[str, object],
                              extra: dict[str, object] | None = None, runs_note: str = "") -> RunDir:
    """Write the calibration; `sources[i]` says where point i's numbers came from;
    `extra` maps a file name to a JSON document written beside (e.g. orion.json)."""
    from .. import __version__

    check_new(run_dir.path)
    run_dir.create()
    env = {"kind": "calibration", "engine": "oracle", "engine_display": "Oracle", "engine_mode": "import", "device": cal.device_name,
           "device_info": dict(cal.device), **environment, "blocklab": __version__,
           "imported": {"at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")}}
    run_dir.write_json(ENVIRONMENT_FILE, env)
    ids = [PlannedPoint(p.pattern, p.block_size, p.iodepth).description for p in cal.points]
    cells = [{"index": i, "block": 0, "cell_id": ids[i], "settings": _settings(p)} for i, p in enumerate(cal.points)]
    run_dir.write_json(PLAN_FILE, {"seed": 0, "kind": "calibration", **cal.plan, "cells": cells})
    for i, (p, src) in enumerate(zip(cal.points, sources)):
        settings = _settings(p)
        run_dir.append(ResultRow(cell=i, block=0, settings=settings, applied={k: str(v) for k, v in settings.items()},
                                 metrics=p.metrics(), cell_id=ids[i], started=cal.started,
                                 notes={"ioengine": cal.ioengine, "sources": src}, source="import"))
    for name, document in (extra or {}).items():
        run_dir.write_json(name, document)
    run_dir.write_json(CALIBRATION_FILE, cal.to_dict())
    _write_summary(run_dir, cal, ids)
    from .rundir import write_import_notes

    write_import_notes(run_dir, [], {"runs": [runs_note] if runs_note else []})
    return run_dir


def limits_verdict(cal: Calibration) -> tuple[str, str]:
    """(headline, verdict) for device limits: what the device reached, each limit
    by itself. The points are load levels and I/O sizes measured separately, never
    settings of one knob, so none is ranked against another."""
    tool = str(cal.device.get("source") or cal.fio_version)
    small = [p for p in cal.points if p.block_size < MIB]
    large = [p for p in cal.points if p.block_size >= MIB]
    parts = []
    if small:
        best = max(small, key=lambda p: p.iops)
        depth = f" at {best.iodepth} outstanding" if best.iodepth else ""
        parts.append(f"at most {best.iops:,.0f} random {best.block_size // 1024} kB reads/s{depth}")
        lat = [p for p in small if math.isfinite(p.lat_mean_ms)]
        if lat:
            low = min(lat, key=lambda p: p.lat_mean_ms)
            parts.append(f"{low.lat_mean_ms:.3g} ms the lowest mean small-read latency"
                         + (f" (at {low.iodepth} outstanding)" if low.iodepth else ""))
    if large:
        best = max(large, key=lambda p: p.mb_per_s)
        depth = f" at {best.iodepth} outstanding" if best.iodepth else ""
        parts.append(f"at most {best.mb_per_s:,.0f} MB/s of {best.pattern}dom {best.block_size // MIB} MiB reads{depth}"
                     .replace("randdom", "random").replace("seqdom", "sequential"))
    headline = f"{cal.device_name}: device limits from {tool}"
    verdict = (f"Device limits measured by {tool} on {cal.device_name}: " + "; ".join(parts) + ". These are limits of the "
               "device, each measured by itself (small reads, large reads, load levels), not settings of one knob: none is "
               "better than another, and a workload meets whichever it reaches first.")
    return headline, verdict


def _write_summary(run_dir: RunDir, cal: Calibration, ids: list[str]) -> None:
    """summary.json for `report`: the generic analysis of the rows, with the limits' own words
    instead of a ranking of the points as if they were settings."""
    from ..analysis.summary import summarise

    rows = run_dir.rows()
    settings = {ids[i]: _settings(p) for i, p in enumerate(cal.points)}
    summary = summarise(rows, metric="iops", goal="max", setting_labels=ids, settings_by_label=settings, seed=0,
                        knob_label="pattern, block_size, iodepth", unit="IOPS")
    unranked(summary)
    summary["headline"], summary["verdict"] = limits_verdict(cal)
    summary["limits"] = True
    summary["words_from"] = "import"  # `blocklab analyse` keeps these words (report/data.py recompute_summary)
    summary["experiment"] = "calibration"
    summary["cells_planned"] = len(ids)
    summary["seed"] = 0
    run_dir.write_json(SUMMARY_FILE, summary)


def _settings(p: Point) -> dict[str, Scalar]:
    return {"pattern": p.pattern, "block_size": p.block_size, "iodepth": p.iodepth}


def calibration(points: list[Point], *, device: str, directory: str, tool: str, note: str, started: str = "",
                finished: str = "", runtime_s: float = 0.0) -> Calibration:
    """A finished Calibration of imported points (plan preset = the tool)."""
    plan = {"preset": tool.lower().replace(" ", "_"), "runtime_s": runtime_s, "ramp_s": 0.0, "file_size": 0,
            "points": [_settings(p) for p in points]}
    return Calibration(directory=directory, device={"name": device, "source": tool}, ioengine=tool.lower(),
                       ioengine_note=note, fio_version=tool, plan=plan, points=tuple(points), started=started,
                       finished=finished, complete=True)


def default_device(name: str) -> str:
    """A device name from a LUN path (/dev/mapper/lun1 -> lun1) or a test name."""
    return Path(name).name or name


__all__ = ["calibration", "default_device", "limits_verdict", "save_imported_calibration"]
