"""The whole run as one JSON document: what ran, where, every row and the summary."""

from __future__ import annotations

import json
import math

from .data import RunData

EXPORT_FORMAT = 1


def document(data: RunData) -> dict[str, object]:
    return {
        "blocklab_export": EXPORT_FORMAT,
        "experiment": data.name,
        "run_dir": str(data.path),
        "complete": data.complete,
        "cells_planned": data.cells_planned,
        "cells_measured": len(data.rows),
        "torn_lines_ignored": data.torn_lines,
        "experiment_file": data.experiment_text,
        "source": data.source,
        "options": data.options,
        "spec": data.spec,
        "plan": {"seed": data.seed, "settings": data.plan_settings},
        "environment": data.environment,
        "summary": data.summary,
        "summary_recomputed": data.summary_recomputed,
        "rows": [json.loads(row.to_json()) for row in data.rows],
    }


def export_json(data: RunData) -> bytes:
    text = json.dumps(_finite(document(data)), indent=2, default=str, allow_nan=False, ensure_ascii=False)
    return (text + "\n").encode("utf-8")


def _finite(value: object) -> object:
    """NaN and infinities -> null: strict JSON, readable by every tool."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value
