"""The report's "Where the CPU went" section of a profiled run (measure.cpu_profile):
the functions ranked along each knob (summary.json's cpu_profile, computed by
analysis/cpu_profile.py) as tables with their intervals, a flame graph per
setting and one differential flame graph (report/flame.py). Returns data for
the template and SVG bytes for the writer."""

from __future__ import annotations

import base64
import math
import re
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup

from ..analysis.cpu_profile import CellCosts, load_costs
from ..probes.cpu_profile import OBSERVER_EFFECT
from .data import RunData, label_of
from .flame import flame_svg, vanished


@dataclass(frozen=True)
class FlameGraph:
    id: str
    title: str
    svg: bytes

    @property
    def href(self) -> str:
        return "data:image/svg+xml;base64," + base64.b64encode(self.svg).decode("ascii")


def _slug(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", label).strip("-").lower()[:80]


def flame_graphs(data: RunData) -> list[FlameGraph]:
    """One flame graph per setting (its cells' samples added up), then the differential
    one between the two settings one knob apart whose CPU per unit differs most."""
    profile = data.summary.get("cpu_profile")
    if not profile:
        return []
    costs = load_costs(data.ok_rows, data.path, str(profile["work_metric"]))
    if not costs:
        return []
    by_label: dict[str, list[CellCosts]] = defaultdict(list)
    for c in costs:
        by_label[label_of(c.row.settings)].append(c)
    order = [lbl for lbl in data.labels if lbl in by_label] + [lbl for lbl in by_label if lbl not in data.labels]
    graphs = []
    for label in order:
        cells = by_label[label]
        stacks: Counter[str] = Counter()
        for c in cells:
            stacks.update(c.stacks)
        unnamed = statistics.fmean(c.unnamed_share for c in cells)
        sub = (f"{len(cells)} cell(s), {sum(stacks.values()):,} samples at {profile.get('hz')} Hz, "
               f"{statistics.fmean(c.total_per_unit for c in cells) * 1e6:,.3f} µs CPU per {profile['unit']}"
               + (f"; {unnamed * 100:.0f}% of samples in code without symbols" if unnamed >= 0.005 else ""))
        graphs.append(FlameGraph(f"flame-{_slug(label)}", f"CPU flame graph: {data.describe_label(label)}",
                                 flame_svg(stacks, data.describe_label(label), sub)))
    if (diff := _differential(data, profile, by_label)) is not None:
        graphs.append(diff)
    return graphs


def per_unit_stacks(cells: list[CellCosts]) -> dict[str, float]:
    """Each stack's CPU seconds per unit of work, averaged over the cells."""
    out: dict[str, float] = defaultdict(float)
    for c in cells:
        for stack, n in c.stacks.items():
            out[stack] += n * c.seconds_per_sample / c.work / len(cells)
    return dict(out)


def _differential(data: RunData, profile: dict[str, Any], by_label: dict[str, list[CellCosts]]) -> FlameGraph | None:
    rankings = profile.get("rankings") or []
    if not rankings:
        return None
    knob, values = rankings[0]["knob"], rankings[0]["values"]
    lo, hi = values[0], values[-1]
    best: tuple[float, str, str] | None = None
    for a, cells_a in by_label.items():
        sa = cells_a[0].row.settings
        if _text(sa.get(knob)) != lo:
            continue
        for b, cells_b in by_label.items():
            sb = cells_b[0].row.settings
            if _text(sb.get(knob)) != hi or any(_text(sb.get(k)) != _text(v) for k, v in sa.items() if k != knob):
                continue
            change = statistics.fmean(c.total_per_unit for c in cells_b) - statistics.fmean(c.total_per_unit for c in cells_a)
            if best is None or abs(change) > abs(best[0]):
                best = (change, a, b)
    if best is None:
        return None
    _, a, b = best
    before, after = per_unit_stacks(by_label[a]), per_unit_stacks(by_label[b])
    gone = vanished(before, after)
    unit = f"per {profile['unit']}"
    title = f"Differential: {data.describe_label(b)} against {data.describe_label(a)}"
    svg_title = f"Differential: {data.describe_label(b)}"  # the SVG's own lines are narrower than the page
    sub = (f"against {data.describe_label(a)}\nwidth: CPU {unit} in the first; red: more {unit} than in the second, blue: less"
           + (f"; paths only the second had: {gone * 1e6:,.3f} µs {unit}" if gone > 0 else ""))
    return FlameGraph(f"flame-diff-{_slug(a)}-vs-{_slug(b)}", title, flame_svg(after, svg_title, sub, unit=unit, before=before))


def _pair_member(flame_id: str, diff_id: str) -> bool:
    """Is this setting's flame graph one of the two the differential compares (shown open)?"""
    a, _, b = diff_id.removeprefix("flame-diff-").partition("-vs-")
    return flame_id.removeprefix("flame-") in (a, b)


def _graph(g: FlameGraph, open_: bool) -> dict[str, object]:
    # inline, not an <img>: the frames' tooltips (<title>) work only in an inline SVG; the
    # SVG is ours, every text in it escaped (flame.py)
    svg = g.svg.decode().replace("<svg ", '<svg style="width:100%;height:auto" ', 1)
    return {"id": g.id, "title": g.title, "svg": Markup(svg), "file": f"plots/{g.id}.svg", "open": open_}


def _text(v: object) -> str:
    if isinstance(v, bool):
        return "on" if v else "off"
    return str(v)


def _us(x: float | None) -> str:
    return f"{float(x) * 1e6:,.3f}" if x is not None and math.isfinite(float(x)) else "–"


def _ci_us(entry: list[float] | None) -> str:
    if not entry:
        return "–"
    v, lo, hi = entry
    if math.isfinite(lo) and math.isfinite(hi):
        return f"{_us(v)} [{_us(max(lo, 0.0))}, {_us(hi)}]"
    return _us(v)


def _ratio(entry: list[float]) -> str:
    v, lo, hi = entry
    if not math.isfinite(v):
        return "–"
    return f"×{v:.2f} [{lo:.2f}, {hi:.2f}]" if math.isfinite(lo) and math.isfinite(hi) else f"×{v:.2f}"


def html_context(data: RunData, graphs: list[FlameGraph]) -> dict[str, object] | None:
    """What the template shows of the run's profiles; None when it has none."""
    profile = data.summary.get("cpu_profile")
    if not profile:
        return None
    tables = []
    for r in profile.get("rankings") or []:
        values = r["values"]
        where = ", ".join(f"{k}={v}" for k, v in (r.get("where") or {}).items())
        tables.append({
            "title": f"Along {r['knob']} ({values[0]} to {values[-1]}){'; cells with ' + where if where else ''}: "
                     f"CPU per {r['unit']} in µs, total {_ratio(r['total_ratio'])}",
            "values": values,
            "total": [_ci_us(r["total_per_unit"].get(v)) for v in values],
            "unnamed": [f"{r['unnamed_share'].get(v, 0.0) * 100:.0f}%" for v in values],
            "rows": [{"function": f["function"], "self": [_ci_us(f["self_per_unit"].get(v)) for v in values],
                      "inclusive": _ci_us(f["inclusive_per_unit"].get(values[-1])), "ratio": _ratio(f["ratio"]),
                      "direction": f["direction"],
                      "share": f"{f['extra_share'] * 100:.0f}%" if math.isfinite(f["extra_share"]) else "–"}
                     for f in r["functions"]],
        })
    diff = [g for g in graphs if g.id.startswith("flame-diff-")]
    compared = {g.id for g in graphs for d in diff if d.id.startswith("flame-diff-") and _pair_member(g.id, d.id)}
    per_setting = [g for g in graphs if not g.id.startswith("flame-diff-")]
    overhead = OBSERVER_EFFECT
    return {
        "verdict": data.summary.get("profile_verdict", ""),
        "processes": profile.get("processes", ""),
        "hz": profile.get("hz"),
        "call_graph": profile.get("call_graph"),
        "unit": profile.get("unit"),
        "unnamed_pct": f"{float(profile.get('unnamed_share') or 0.0) * 100:.0f}%",
        "tables": tables,
        "differential": [_graph(g, True) for g in diff],
        "flames": [_graph(g, g.id in compared) for g in per_setting],
        "overhead": overhead,
    }
