"""The per-second panels: one per measured point, titles that fit their panel."""

from __future__ import annotations

from pathlib import Path

from blocklab.report.data import load_run
from blocklab.report.series_plot import TITLE_CHARS, series_figure
from blocklab.results import ResultRow, RunDir


def _slob_like_run(path: Path) -> Path:
    """Three knobs varying, as slob --engine mariadb --quick has, each point with a 5 s series."""
    rd = RunDir(path)
    rd.create()
    settings = [{"workload.sessions": s, "workload.update_pct": u, "block_size": b}
                for s in (1, 8) for u in (0, 30) for b in (4096, 32768)]
    cells = [{"index": i, "block": 0, "cell_id": f"b0:{i}", "settings": s} for i, s in enumerate(settings)]
    rd.write_json("plan.json", {"seed": 3, "settings": settings, "apply_class": {}, "cells": cells})
    spec = {"name": "slobish", "description": "hand-made", "engine": {"kind": "mariadb", "settings": {}},
            "dataset": {"rows": 1000}, "workload": {"kind": "slob"},
            "knobs": {"workload.sessions": [1, 8], "workload.update_pct": [0, 30], "block_size": [4096, 32768]},
            "measure": {"repeats": 1, "cache": "warm", "metric": "read_iops", "goal": "max"}}
    rd.write_json("spec.json", {"source": "slobish.toml", "spec": spec, "options": {}})
    rd.write_text("experiment.toml", 'name = "slobish"\n')
    rd.write_json("environment.json", {"host": "h", "engine": "mariadb", "engine_version": "10.11", "device": "vda"})
    for c in cells:
        series = {"t": [1.0, 2.0, 3.0, 4.0, 5.0], "device_read_iops": [100.0 + c["index"]] * 5}
        rd.append(ResultRow(cell=c["index"], block=0, settings=c["settings"], applied={}, metrics={"read_iops": 100.0},
                            cell_id=c["cell_id"], series=series, notes={"steady": {"series": "device_read_iops"}}))
    return path


def test_a_panel_title_of_three_knobs_is_wrapped_to_the_panel_width(tmp_path):
    made = series_figure(load_run(_slob_like_run(tmp_path / "run")))
    assert made is not None
    fig, caption = made
    titles = [ax.get_title(loc="left") for ax in fig.axes]
    assert len(titles) == 8 and "0 of 8 drifting" in caption
    assert all(len(line) <= TITLE_CHARS for title in titles for line in title.splitlines())
    first = titles[0].splitlines()
    assert first[-1] == "block 1" and "sessions=1" in first[0] and any("block_size=4" in line for line in first)
