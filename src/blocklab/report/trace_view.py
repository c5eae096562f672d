"""A traced function's table per setting, as the seed printed DTrace's: calls,
total elapsed, and the power-of-two histogram of time per call (and of the
traced argument) with its @-bar distribution. Text, for the console and the
report's <pre>."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..analysis.function_trace import TraceEntry

BAR = 40


def quantize_text(hist: dict[str, int], title: str) -> str:
    """DTrace's quantize layout: value | distribution | count, one line per power of two."""
    if not hist:
        return f"{title}\n   (no calls)\n"
    buckets = sorted((int(k), v) for k, v in hist.items())
    total = sum(v for _, v in buckets) or 1
    lines = [f"{title}", f"{'value':>12}  {'-' * 13} Distribution {'-' * 13} count"]
    for low, count in buckets:
        bar = "@" * round(BAR * count / total)
        lines.append(f"{low:>12} |{bar:<{BAR}} {count}")
    return "\n".join(lines) + "\n"


def setting_text(label: str, entry: TraceEntry, function: str, unit: str) -> str:
    """The seed's block of one setting: '#calls', 'elapsed (ns)' with its histogram, the argument's."""
    out = [f"{label}  ({entry['cells']} cell(s); figures per cell)",
           f"  #calls {entry['calls']:>31,.0f}" + (f"   ({entry['calls_per_unit']:.4f} per {unit})" if entry.get("calls_per_unit") else ""),
           f"  elapsed (ns) {entry['total_ns']:>25,.0f}   ({entry['ns_per_call']:,.0f} ns per call)"]
    text = "\n".join(out) + "\n" + quantize_text(entry["hist_ns"], f"{function}: time per call (ns), all cells")
    if entry.get("arg") is not None:
        text += (f"  argument {entry['arg']} total {entry['arg_sum']:>20,.0f}   ({entry['arg_per_call']:,.1f} per call)\n"
                 + quantize_text(entry["hist_arg"], f"{function}: argument {entry['arg']}, all cells"))
    return text


def trace_context(summary: Mapping[str, Any], describe: Callable[[str], str]) -> dict[str, object] | None:
    trace = summary.get("trace")
    if not trace:
        return None
    rows = [{"label": describe(label), "calls": f"{e['calls']:,.0f}", "total_ms": f"{e['total_ns'] / 1e6:,.3f}",
             "ns_per_call": f"{e['ns_per_call']:,.0f}",
             "calls_per_unit": f"{e['calls_per_unit']:.4f}" if e.get("calls_per_unit") else "–",
             "arg_per_call": f"{e['arg_per_call']:,.1f}" if e.get("arg") is not None else None,
             "text": setting_text(describe(label), e, trace["function"], trace["unit"])}
            for label, e in trace["settings"].items()]
    return {"function": trace["function"], "arg": trace.get("arg"), "unit": trace["unit"], "rows": rows}
