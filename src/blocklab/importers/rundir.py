"""Imported rows -> a run directory like the one `blocklab run` leaves, so
`report`, `export` and `compare` read it unchanged.

    spec.json         the experiment an import stands for (engine oracle, the workload, its knobs)
    experiment.toml   the same, as TOML, headed by the import command
    plan.json         one cell per imported row (a repeat of a setting is its next block)
    environment.json  engine oracle, mode import, what the reports say about database and host
    results.jsonl     the rows, source "import", each with the files and lines its numbers came from
    summary.json      the analysis, as the runner writes it (plus any words the importer adds)
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .. import __version__
from ..results import (
    ENVIRONMENT_FILE,
    EXPERIMENT_FILE,
    PLAN_FILE,
    RESULTS_FILE,
    SPEC_FILE,
    SUMMARY_FILE,
    ResultRow,
    RunDir,
)
from ..spec import Scalar
from ..units import human, label_of
from .common import ImportOptionError


@dataclass(frozen=True)
class ImportedRun:
    """What an importer hands the writer."""

    name: str  # experiment name, e.g. "slob-import"
    description: str
    workload: str  # "slob", "awr_profile"
    knobs: dict[str, list[Any]]  # knob -> its values, in order
    rows: list[ResultRow]  # settings, metrics, notes filled in; cell and block are set here
    environment: dict[str, object]
    metric: str
    goal: str
    unit: str
    command: str  # the command line, for experiment.toml and spec.json
    verdict_extra: str = ""  # the importer's own verdict (e.g. per series); replaces the generic ranking
    headline: str = ""  # the report's headline, when the generic 'Best setting ...' would not say it


IMPORT_NOTES_FILE = "import-notes.json"


def import_notes(report: Any, marks: list[str]) -> dict[str, object]:
    """A row's notes on what the import left out (not_read) and what its consistency checks marked."""
    out: dict[str, object] = {}
    not_read = [n.text(report.path) for n in getattr(report, "not_read", [])]
    if not_read:
        out["not_read"] = not_read
    if marks:
        out["marks"] = marks
    return out


def write_import_notes(run_dir: RunDir, rows: list[ResultRow], extra: dict[str, Any] | None = None) -> None:
    """import-notes.json: every field left out and every mark, per file, for `blocklab report` to show."""
    files: dict[str, dict[str, list[str]]] = {}
    for row in rows:
        entry = files.setdefault(str(row.notes.get("file", "?")), {"not_read": [], "marks": []})
        entry["not_read"] += [n for n in row.notes.get("not_read", []) if n not in entry["not_read"]]
        entry["marks"] += [m for m in row.notes.get("marks", []) if m not in entry["marks"]]
    doc: dict[str, Any] = {"format": 1, "files": files,
                           "checked": "each file's own consistency (its sections and columns agree with each other); "
                                      "nothing was read back from the database, so the settings are as the files state them"}
    doc.update(extra or {})
    run_dir.write_json(IMPORT_NOTES_FILE, doc)


def unranked(summary: dict[str, Any]) -> dict[str, Any]:
    """A summary whose settings are not ranked: device limits and system statistics are
    each a value by itself, and 'best' or 'ratio to best' between them means nothing."""
    summary["best_label"] = None
    summary["indistinguishable"], summary["as_good"], summary["undecided"] = [], [], []
    summary["explain"] = []  # how settings were ranked against a best: nothing here was
    for entry in (summary.get("settings") or {}).values():
        for key in [k for k in entry if k.startswith("ratio_to_best") or k in ("standing", "blocks_needed")]:
            entry[key] = None
    summary["unranked"] = True
    return summary


def check_new(path: Path, option: str = "--out") -> None:
    """Refuse a directory that already holds a run (exit 2 before anything is written)."""
    for name in (PLAN_FILE, RESULTS_FILE, "calibration.json", "sysstats.json"):
        if (path / name).exists():
            raise ImportOptionError(f"{option} {path}: already holds a run ({name}); give a new directory")


def write_run(run_dir: RunDir, run: ImportedRun) -> dict[str, Any]:
    """Write every file of the run directory; returns the summary."""
    from ..analysis.summary import summarise

    check_new(run_dir.path)
    run_dir.create()
    rows, settings, cells = _cells(run.rows)
    spec = {
        "name": run.name,
        "description": run.description,
        "engine": {"kind": "oracle", "settings": {}},
        "workload": {"kind": run.workload},
        "knobs": run.knobs,
        "measure": {"repeats": max((r.block for r in rows), default=0) + 1, "metric": run.metric, "goal": run.goal},
    }
    run_dir.write_text(EXPERIMENT_FILE, _toml(spec, run.command))
    run_dir.write_json(SPEC_FILE, {"source": f"imported: {run.command}", "spec": spec, "options": {}})
    run_dir.write_json(PLAN_FILE, {"seed": 0, "kind": "import", "settings": settings, "cells": cells})
    env = {"engine": "oracle", "engine_display": "Oracle", "engine_mode": "import", **run.environment, "blocklab": __version__,
           "python": sys.version.split()[0],
           "imported": {"command": run.command, "at": _now(), "rows": len(rows)}}
    run_dir.write_json(ENVIRONMENT_FILE, env)
    for row in rows:
        run_dir.append(row)
    write_import_notes(run_dir, rows)
    labels = [label_of(s) for s in settings]
    summary = summarise(
        rows, metric=run.metric, goal=run.goal, setting_labels=labels, settings_by_label=dict(zip(labels, settings)),
        seed=0, knob_label=", ".join(run.knobs), unit=run.unit,
    )
    if run.verdict_extra and summary.get("best_label"):
        # the importer's own sentences say it per series; the generic ranking of every
        # point against every other (dozens of single reports) would bury them
        best = summary["settings"][summary["best_label"]]
        single = all(entry.get("n", 0) <= 1 for entry in summary["settings"].values())
        summary["verdict"] = (f"{run.verdict_extra} Highest {run.metric} of all: {summary['best_label']} "
                              f"({human(best['median'], run.unit)})."
                              + (" Each point is one report, a single sample: no confidence intervals." if single else ""))
    if run.headline:
        summary["headline"] = run.headline
    if run.verdict_extra or run.headline:
        summary["words_from"] = "import"  # `blocklab analyse` keeps the importer's words (report/data.py recompute_summary)
    summary["experiment"] = run.name
    summary["cells_planned"] = len(cells)
    summary["seed"] = 0
    run_dir.write_json(SUMMARY_FILE, summary)
    return summary


def _cells(rows: list[ResultRow]) -> tuple[list[ResultRow], list[dict[str, Scalar]], list[dict[str, object]]]:
    """Number the rows; the n-th row of a setting is its block n (a repeat)."""
    seen: dict[str, int] = {}
    settings: list[dict[str, Scalar]] = []
    out, cells = [], []
    for index, row in enumerate(rows):
        label = label_of(row.settings)
        block = seen.get(label, -1) + 1
        if block == 0:
            settings.append(dict(row.settings))
        seen[label] = block
        cell_id = f"b{block}:{label}"
        out.append(replace(row, cell=index, block=block, cell_id=cell_id, source="import"))
        cells.append({"index": index, "block": block, "cell_id": cell_id, "settings": dict(row.settings)})
    return out, settings, cells


def _toml(spec: dict[str, Any], command: str) -> str:
    """A TOML file that reads like a recipe: what blocklab would run for these results."""
    lines = [f"# imported, not run by blocklab: {command}", "# (Oracle cannot run here; the numbers come from the files below)",
             f"name = {json.dumps(spec['name'])}", f"description = {json.dumps(spec['description'])}", "",
             "[engine]", 'kind = "oracle"', "", "[workload]", f"kind = {json.dumps(spec['workload']['kind'])}", "", "[knobs]"]
    for knob, values in spec["knobs"].items():
        lines.append(f"{json.dumps(knob)} = [{', '.join(json.dumps(v) for v in values)}]")
    m = spec["measure"]
    lines += ["", "[measure]", f"repeats = {m['repeats']}", f"metric = {json.dumps(m['metric'])}", f"goal = {json.dumps(m['goal'])}"]
    return "\n".join(lines) + "\n"


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


__all__ = ["IMPORT_NOTES_FILE", "ImportedRun", "check_new", "import_notes", "unranked", "write_import_notes", "write_run"]
