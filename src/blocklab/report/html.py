"""report.html: one self-contained page (inline CSS, plots inline, the raw CSV as a
data: link), readable offline, nothing fetched from anywhere."""

from __future__ import annotations

import base64
import datetime as dt
import math
import statistics
from typing import TypeGuard

import jinja2

from .. import __version__
from ..analysis.entry import figure_of, standing_note
from ..results import ResultRow
from ..units import SHORT_NAMES, fmt_bytes, human, label_of, metric_title
from .cpu_profile_view import FlameGraph, flame_graphs
from .cpu_profile_view import html_context as cpu_profile_context
from .csv_export import export_csv
from .data import RunData, SettingFigures
from .device_twin import html_context as device_twin_context
from .fleet import fleet_context
from .plots import Plot
from .scripts import scripts_context
from .settle import settle_context
from .trace_view import trace_context

# what an imported run's cells were checked for, instead of a second source in the same run
IMPORT_CLAIMS = ("Imported, not measured by blocklab: each file was checked for its own consistency (every number read "
                 "from the column its heading names, figures the file gives twice agreeing; where they do not, a mark "
                 "below). Nothing was read back from the database: the settings, the cache state and the I/O path are "
                 "as the files and whoever ran them state them.")

_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("blocklab.report", "templates"),
    autoescape=jinja2.select_autoescape(default=True, default_for_string=True),
    trim_blocks=True,
    lstrip_blocks=True,
    undefined=jinja2.StrictUndefined,
)


def render_html(data: RunData, plots: list[Plot], *, generated: str | None = None,
                flames: list[FlameGraph] | None = None) -> bytes:
    """The report page as UTF-8 bytes. `flames`: the run's flame graphs (drawn here when not given)."""
    template = _ENV.get_template("report.html.j2")
    return template.render(**context(data, plots, generated=generated, flames=flames)).encode("utf-8")


def context(data: RunData, plots: list[Plot], *, generated: str | None = None,
            flames: list[FlameGraph] | None = None) -> dict[str, object]:
    summary = data.summary
    metric, unit = data.metric, data.unit
    measured = len({r.cell_id for r in data.rows})
    return {
        "name": data.name,
        "description": data.description,
        "context_line": data.context_line(),
        "complete": data.complete,
        "cells_planned": data.cells_planned,
        "cells_measured": measured,
        "cells_failed": len(data.failed_rows),
        "cells_invalid": len(data.invalid_rows),
        "cells_flagged": len(data.flagged_rows),
        "cache": (data.spec.get("measure") or {}).get("cache"),
        "direct_io": any(r.notes.get("checks", {}).get("direct_io_proof", "").startswith(("fdinfo", "mincore")) for r in data.ok_rows),
        "run_dir": str(data.path),
        "headline": _headline(data),
        "verdict_lines": _verdict_lines(data),
        "explain": list(summary.get("explain") or []),
        "metric": metric,
        "metric_text": f"{metric_title(metric)} ({unit})" if unit else metric_title(metric),
        "goal_text": "higher is better" if data.goal == "max" else "lower is better",
        "settings_table": _settings_table(data),
        "settings_caption": _settings_caption(data),
        "ratio_heading": "ratio to best [CI]" if _paired(data) else "ratio to best [95% CI]",
        "figure_heading": "block-adjusted" if _paired(data) else "median",
        "other_metrics": _other_metrics(data),
        "device_twin": device_twin_context(data),
        "settle": settle_context(data),  # when the run stopped: its budget and the pairs left undecided (issue 26)
        "scripts": scripts_context(data),  # the user's own scripts (workload sql), None for the others
        # where the CPU went (measure.cpu_profile): rankings and flame graphs (issue 28)
        "cpu_profile": cpu_profile_context(data, flame_graphs(data) if flames is None else flames),
        "trace": trace_context(data.summary, data.describe_label),  # --trace-function: the seed's table per setting
        "plots": [_plot_context(p) for p in plots],
        "failed": [_failed(data, r) for r in data.failed_rows],
        "invalid": [_failed(data, r) for r in data.invalid_rows],
        "flagged": [{**_failed(data, r), "status": "; ".join(r.notes["flags"])} for r in data.flagged_rows],
        "environment": _environment(data),
        "fixed": _fixed(data),
        "engine_settings": sorted((str(k), str(v)) for k, v in (data.environment.get("engine_settings") or {}).items()),
        "experiment_text": data.experiment_text,
        "source": data.source,
        "overrides": [(k, _plain(v)) for k, v in data.options.items()],
        "seed": data.seed,
        "imported": data.plan.get("kind") == "import" or data.environment.get("engine_mode") == "import",
        "import_claims": IMPORT_CLAIMS,
        "raw_rows": _raw_rows(data),
        "raw_columns": _raw_columns(data),
        "csv_href": "data:text/csv;charset=utf-8;base64," + base64.b64encode(export_csv(data)).decode("ascii"),
        "csv_name": f"{data.name}-{data.path.name}-results.csv".replace(f"{data.name}-{data.name}", data.name),
        "notes": list(data.notes),
        "fleet": fleet_context(data),  # None for a run on one machine (report/fleet.py)
        "resume_hint": f"blocklab run --resume {data.path}",
        "generated": generated or dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "version": __version__,
    }


def _headline(data: RunData) -> str:
    """The seed's sentence: 'Best multiblock_read is 16 (128 kB)'."""
    if data.summary.get("headline"):  # a summary that says it better itself (an import's per-series answer)
        return str(data.summary["headline"])
    best = data.summary.get("best_label")
    if not best or not data.summary.get("settings"):
        return ""
    if len(data.knobs) != 1:  # the label names every knob already
        return f"Best setting: {data.describe_label(best)}"
    return f"Best {data.knobs[0]} is {data.describe_label(best)}"


def _verdict_lines(data: RunData) -> list[str]:
    """The verdict box: the console's lines (analysis/verdict.py), or the one
    paragraph of a summary that has a headline of its own (an import, a fleet)."""
    verdict = str(data.summary.get("verdict") or "No measurement yet.")
    if data.summary.get("headline") or not data.summary.get("verdict_options"):
        return [verdict]
    return verdict.splitlines()


def _settings_table(data: RunData) -> list[dict[str, object]]:
    summary = data.summary
    entries = summary.get("settings") or {}
    best = summary.get("best_label")
    close = set(summary["as_good"] if "as_good" in summary else summary.get("indistinguishable") or [])
    failed_by_label: dict[str, int] = {}
    for row in data.failed_rows:
        key = label_of(row.settings)
        failed_by_label[key] = failed_by_label.get(key, 0) + 1
    unit = data.unit
    out = []
    for label in data.labels or list(entries):
        s = entries.get(label) or {}
        has = s.get("median") is not None and (s.get("n") or 0) > 0
        note = []
        if label == best or s.get("standing"):
            note.append(standing_note(s, label == best))
        elif label in close:
            note.append("indistinguishable from best")
        failed = failed_by_label.get(label, 0)
        if not has:
            note.append(f"no successful run ({failed} failed)" if failed else "not measured yet")
        elif failed:
            note.append(f"{failed} failed")
        outliers = [v for v in (s.get("outliers") or []) if isinstance(v, (int, float))]
        ratio = s.get("ratio_to_best") if best else None
        value, lo, hi = figure_of(s)
        out.append(
            {
                "label": data.describe_label(label),
                "raw_label": label,
                "n": int(s.get("n") or 0),
                "figure": human(value, unit) if has else "–",
                "figure_ci": _interval(lo, hi, int(s.get("n") or 0), s.get("interval_source") == "series") if has else "–",
                "median": human(s.get("median"), unit) if has else "–",
                "min": human(s.get("minimum")) if has else "–",
                "max": human(s.get("maximum")) if has else "–",
                "ratio": _ratio(ratio, s.get("ratio_to_best_ci_low"), s.get("ratio_to_best_ci_high")) if has else "–",
                "outliers": (f"{len(outliers)}: " + ", ".join(human(v) for v in outliers)) if outliers else "",
                "note": ", ".join(note),
                "best": label == best,
                "close": label in close,
                "empty": not has,
            }
        )
    return out


def _paired(data: RunData) -> bool:
    return (data.summary.get("analysis") or {}).get("method") == "paired"


def _settings_caption(data: RunData) -> str:
    """What the table's columns mean, for the statistics the summary was made with."""
    outliers = "Outliers (more than 3.5 robust standard deviations out) are flagged and kept in the statistics."
    if data.summary.get("unranked"):  # device limits, system statistics: each a value by itself, never compared
        return ("Each row is a value by itself, not a setting of one knob: no best and no ratio between them. "
                "The figure is the median of its runs with its 95% bootstrap interval. " + outliers)
    if not _paired(data):
        return (
            "Median of the runs at each setting with its 95% bootstrap interval. Ratio to best is this setting's "
            "median over the best one's; a setting whose ratio interval contains 1 is indistinguishable from the best. "
            + outliers
        )
    analysis = data.summary.get("analysis") or {}
    looks = int(analysis.get("looks") or 1)
    level = "95%" if looks == 1 else (
        f"{float(analysis.get('confidence_per_look') or 0.95):.2%} (the 5% error split over the {looks} looks "
        "sequential stopping could take)"
    )
    family = (
        " The ratios' intervals hold together: with that confidence all of them are right at once, the best's "
        "lucky pick from the same data included (a step-down test on the studentized range), so each is wider "
        "than a comparison of two settings alone."
    ) if analysis.get("family") else ""
    return (
        "Block-adjusted: each setting's geometric mean with every block's drift taken out (a fit of each cell as the "
        f"setting's level times its block's drift), the figure the best is picked on, with its {level} interval. Ratio "
        "to best compares the setting with the best within the same blocks (the geometric mean of the per-block "
        f"ratios, block drift cancelled), with its {level} interval: slower when it excludes 1, as good when it lies "
        f"within the tolerance, else open (not separated yet; the note says about how many blocks would settle it).{family} Median: of the runs as measured, each setting on its "
        "own (the drift between blocks stays in it). A single run whose row carries a per-second series gets the "
        "interval of its steady state (batch means). " + outliers
    )


def _interval(lo: object, hi: object, n: int, series: bool = False) -> str:
    if n < 2 and not series:
        return "one run: no interval"
    if _finite(lo) and _finite(hi):
        return f"{human(lo)} – {human(hi)}"
    return "–"


def _ratio(r: object, lo: object, hi: object) -> str:
    if not _finite(r):
        return "–"
    text = f"{r:.2f}×"
    if _finite(lo) and _finite(hi) and (lo != r or hi != r):
        text += f" [{lo:.2f}, {hi:.2f}]"
    return text


def _finite(x: object) -> TypeGuard[float]:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _other_metrics(data: RunData) -> dict[str, object]:
    """Median of the other headline metrics per setting (MB/s, read size, elapsed ...)."""
    metrics = data.headline_metrics()
    if not metrics:
        return {"columns": [], "rows": []}
    medians: dict[str, dict[str, float]] = {m: {f.label: f.median for f in _medians(data, m)} for m in metrics}
    rows = []
    for label in data.labels:
        if not any(label in medians[m] for m in metrics):
            continue
        rows.append({"label": data.describe_label(label), "values": [_metric_text(m, medians[m].get(label)) for m in metrics]})
    columns = [SHORT_NAMES.get(m, m) for m in metrics]
    return {"columns": columns, "rows": rows}


def _medians(data: RunData, metric: str) -> list[SettingFigures]:
    out = []
    for label, values in data.samples(metric).items():
        if values:
            med = statistics.median(values)
            out.append(SettingFigures(label, {}, values, med, med, med))
    return out


def _metric_text(metric: str, value: float | None) -> str:
    if value is None or not _finite(value):
        return "–"
    if metric == "avg_read_kb":
        return f"{value:,.1f}"
    if metric == "cold_ratio":
        return f"{value:.3f}"
    if metric in ("reads", "rows", "hits") and abs(value) < 1e6:
        return f"{value:,.0f}"
    return human(value)


def _plot_context(p: Plot) -> dict[str, object]:
    return {
        "id": p.id,
        "title": p.title,
        "caption": p.caption,
        "svg_href": "data:image/svg+xml;base64," + base64.b64encode(p.svg).decode("ascii"),
        "png_href": "data:image/png;base64," + base64.b64encode(p.png).decode("ascii"),
    }


def _failed(data: RunData, row: ResultRow) -> dict[str, object]:
    return {
        "cell": row.cell,
        "block": row.block + 1,
        "setting": _on_host(row, data.describe_label(label_of(row.settings))),
        "started": row.started.replace("T", " ").replace("+00:00", " UTC"),
        "status": row.status,
    }


def _environment(data: RunData) -> list[tuple[str, str]]:
    env = data.environment
    items: list[tuple[str, str]] = []

    def add(name: str, value: object) -> None:
        if value not in (None, "", {}):
            items.append((name, str(value)))

    add("engine", data.engine_line)
    extra = env.get("engine_extra") or {}
    if data.block_size:
        add("block size", fmt_bytes(data.block_size))
    for key, value in extra.items():
        if key != "block_size":
            add(key.replace("_", " "), value)
    add("device", data.device_line)
    info = env.get("device_info") or {}
    add("mount point", info.get("mount_point"))
    add("file system", env.get("file_system") or info.get("fs_type"))
    add("data directory", env.get("data_dir"))
    add("kernel", env.get("kernel"))
    cpu = env.get("cpu")
    if cpu:
        count = env.get("cpu_count")
        add("CPU", f"{cpu} × {count}" if count else cpu)
    if env.get("memory_bytes"):
        add("memory", fmt_bytes(float(env["memory_bytes"])))
    add("host", env.get("host"))
    add("machine", env.get("machine"))
    add("data set", f"{data.dataset_rows:,} rows" + (f", {fmt_bytes(data.relation_bytes)}" if data.relation_bytes else "") if data.dataset_rows else None)
    add("cache", (data.spec.get("measure") or {}).get("cache"))
    add("python / blocklab", f"{env.get('python', '?')} / {env.get('blocklab', '?')}" if env else None)
    return items


def _fixed(data: RunData) -> list[tuple[str, str, str]]:
    """The fixed engine settings: as asked in the experiment, as the engine reported them."""
    asked = (data.spec.get("engine") or {}).get("settings") or {}
    applied: dict[str, str] = {}
    for row in data.ok_rows:
        applied = row.applied
        break
    return [(str(k), _plain(v), str(applied.get(k, ""))) for k, v in asked.items()]


def _plain(value: object) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, list):
        return ", ".join(_plain(v) for v in value)
    return str(value)


def _raw_columns(data: RunData) -> list[str]:
    return ["cell", "block", "setting", "status", *[_short(m) for m in _raw_metrics(data)]]


def _raw_metrics(data: RunData) -> list[str]:
    present = set(data.metrics_present())
    return [m for m in (data.metric, *data.headline_metrics()) if m in present][:6]


def _short(metric: str) -> str:
    return SHORT_NAMES.get(metric, metric)


def _raw_rows(data: RunData) -> list[dict[str, object]]:
    metrics = _raw_metrics(data)
    out = []
    for row in sorted(data.rows, key=lambda r: r.cell):
        out.append(
            {
                "cell": row.cell + 1,
                "block": row.block + 1,
                "setting": _on_host(row, data.describe_label(label_of(row.settings))),
                "ok": row.ok,
                "status": "ok" if row.ok else row.status,
                "values": [_metric_text(m, row.metrics.get(m)) for m in metrics],
            }
        )
    return out


def _on_host(row: ResultRow, text: str) -> str:
    """A fleet row's setting with the host that measured it: 'host-a: 16 (128 kB)'."""
    return f"{row.host}: {text}" if row.host else text
