"""The report's section on the user's own scripts (workload `sql`): each script as it
was run, its parameters, and every statement's latency per setting.

The run keeps the scripts in workload.json (workloads/sql.py report_record()); the
statements' latencies are the rows' `stmt.<key>.*` metrics, <key> naming the
script and line (s1_l6: the first script's line 6). Runs of other workloads have
no workload.json: the section is not shown.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping

from ..jsonvalue import as_object
from ..results import WORKLOAD_FILE
from .data import RunData


def scripts_context(data: RunData) -> dict[str, object] | None:
    path = data.path / WORKLOAD_FILE
    if not path.exists():
        return None
    record = json.loads(path.read_text())
    if record.get("workload") != "sql":
        return None
    labels = [label for label in data.labels if data.samples("tps").get(label)]
    return {
        "scripts": record.get("scripts", []),
        "setup": record.get("setup"),
        "load": record.get("load"),
        "parameters": _parameters(record),
        "settings": [data.describe_label(label) for label in labels],
        "statements": [_statement_row(data, s, labels) for s in record.get("statements", [])],
    }


def _parameters(record: Mapping[str, object]) -> list[tuple[str, str]]:
    out = [("sessions", str(record.get("sessions")))]
    if record.get("transactions"):
        out.append(("transactions per session", str(record["transactions"])))
    else:
        out.append(("duration per cell", f"{record.get('duration_s')} s"))
    out += [(f":{k}", str(v)) for k, v in sorted(as_object(record.get("variables")).items())]
    out.append(("random seed", str(record.get("seed"))))
    out.append(("writes on a DSN", "allowed, on copies" if record.get("allow_writes") else "refused (READ ONLY)"))
    return out


def _statement_row(data: RunData, statement: Mapping[str, object], labels: list[str]) -> dict[str, object]:
    key = statement["key"]
    cells = []
    for label in labels:
        p50 = data.samples(f"stmt.{key}.p50_ms").get(label) or []
        p95 = data.samples(f"stmt.{key}.p95_ms").get(label) or []
        cells.append(f"{statistics.median(p50):.2f} / {statistics.median(p95):.2f}" if p50 and p95 else "–")
    where = f"{str(statement['script']).rsplit('/', 1)[-1]}:{statement['line']}"
    return {"where": where, "text": statement["text"], "cells": cells}
