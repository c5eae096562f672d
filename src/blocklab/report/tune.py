"""The report of a `blocklab tune` run: report.html and its plots, from tune.json.

Sections: the verdict and the configuration to paste (the engine renders its
own lines: engines/*/config_lines), the confirmation's intervals, the search
trace (the incumbent's ratio to the default against the cells spent), the
knobs' importance, and the race (every configuration, its round, its blocks,
and when and by how much it was dropped). Written atomically, like every
report (writer.write_atomic); a tune in progress shows what tune.json holds.
"""

from __future__ import annotations

import html
import io
from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from ..results import ResultsError, RunDir, write_atomic
from ..units import first_upper
from .plot_style import BAND, BLUE, GREY, ORANGE

TUNE_REPORT = "report.html"
PLOTS = "plots"


def write_tune_report(run_dir: RunDir | Path | str) -> list[Path]:
    """report.html and plots/tune-trace.png, plots/tune-importance.png of a tune directory."""
    run_dir = run_dir if isinstance(run_dir, RunDir) else RunDir(Path(run_dir))
    if not run_dir.file("tune.json").exists():
        raise ResultsError(f"{run_dir.path}: not a tune directory (no tune.json)")
    state = run_dir.read_json("tune.json")
    plot_dir = run_dir.path / PLOTS
    plot_dir.mkdir(exist_ok=True)
    written = []
    images = {}
    for name, draw in (("tune-trace", trace_png), ("tune-importance", importance_png)):
        png = draw(state)
        if png is not None:
            target = plot_dir / f"{name}.png"
            write_atomic(target, png)
            written.append(target)
            images[name] = f"{PLOTS}/{name}.png"
    report = run_dir.file(TUNE_REPORT)
    write_atomic(report, render(state, images).encode())
    return [report, *written]


def write_fleet_tune_report(run_dir: RunDir | Path | str) -> Path:
    """report.html of a fleet tune's directory (fleet-tune.json): each host's verdict, whether
    the hosts agree, every host's winner measured on every host; each host's own tune has
    its report under hosts/HOST."""
    run_dir = run_dir if isinstance(run_dir, RunDir) else RunDir(Path(run_dir))
    if not run_dir.file("fleet-tune.json").exists():
        raise ResultsError(f"{run_dir.path}: not a fleet tune directory (no fleet-tune.json)")
    state = run_dir.read_json("fleet-tune.json")
    agreement = state.get("agreement") or {}
    parts = [f"<h1>blocklab tune on a fleet: {_e(state.get('experiment', ''))}</h1>",
             f"<p class='verdict'>{_e(agreement.get('verdict', ''))}</p>",
             f"<p>{len(state.get('hosts') or [])} hosts, each its own tune (budget {_e(state.get('budget_per_host') or 'the file’s')} "
             f"per host), seed {state.get('seed')}. Each host's search, race and confirmation: its own report.</p>",
             "<h2>Each host's tune</h2><table><tr><th>host</th><th>winner</th><th>recommended</th><th>verdict</th><th>cells</th></tr>"]
    for host, t in (state.get("tunes") or {}).items():
        link = f"<a href='{_e(t['dir'])}/report.html'>{_e(host)}</a>"
        parts.append(f"<tr><td>{link}</td><td>{_e(t.get('winner'))}</td><td>{_e(t.get('recommended'))}</td>"
                     f"<td>{_e(t.get('verdict'))}</td><td>{t.get('spent_cells')}</td></tr>")
    parts.append("</table>")
    hosts = agreement.get("hosts") or {}
    if any(h.get("others") for h in hosts.values()):
        parts.append("<h2>Every host's winner on every host</h2><p>Fresh blocks on each host holding each host's winner once, "
                     "in a random order (beyond each host's budget: " +
                     ", ".join(f"{_e(h)} {n} cells" for h, n in (state.get("cross_cells") or {}).items()) +
                     "). Each other winner against the host's own, paired on that host's blocks; a host's comparisons share 95%. "
                     "Above 1: the other winner is better there.</p>")
        parts.append("<table><tr><th>on host</th><th>its own winner</th><th>another host's winner</th><th>ratio [interval]</th></tr>")
        for host, h in hosts.items():
            for other, adv in (h.get("others") or {}).items():
                parts.append(f"<tr><td>{_e(host)}</td><td>{_e(h['own'])}</td><td>{_e(other)}</td><td>{_e(_interval(adv))}</td></tr>")
        parts.append("</table>")
    report = run_dir.file(TUNE_REPORT)
    write_atomic(report, _page(parts).encode())
    return report


# ---------------------------------------------------------------- plots
def _png(fig: Figure) -> bytes:
    FigureCanvasAgg(fig)
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=120)
    return out.getvalue()


def trace_png(state: dict[str, Any]) -> bytes | None:
    """Best so far (the incumbent's ratio to the default) against the cells spent, one point a round."""
    trace = state.get("trace") or []
    if not trace:
        return None
    fig = Figure(figsize=(8.0, 4.2), layout="constrained")
    ax = fig.add_subplot()
    xs = [0.0] + [float(t["spent"]) for t in trace]
    ys = [1.0] + [float(t["ratio_to_default"]) for t in trace]
    ax.step(xs, ys, where="post", color=BLUE, linewidth=2, label="incumbent / default (search estimate)")
    ax.plot(xs, ys, "o", color=BLUE, markersize=4)
    ax.axhline(1.0, color=GREY, linewidth=1, linestyle="--", label="the default")
    adv = ((state.get("confirmation") or {}).get("winner_vs_default")) or None
    if adv and adv.get("low") is not None:
        x = float(state.get("spent_cells") or xs[-1])
        ax.errorbar([x], [adv["ratio"]], yerr=[[adv["ratio"] - adv["low"]], [adv["high"] - adv["ratio"]]], fmt="s", color=ORANGE,
                    capsize=5, label=f"confirmed on fresh blocks ({adv['confidence']:.1%} interval)")
    for event in state.get("events") or []:
        if not event.get("incumbent"):
            ax.axvline(float(event["spent"]), color=BAND, linewidth=0.6, alpha=0.6)
    better = "higher" if state.get("goal") == "max" else "lower"
    ax.set_xlabel("cells spent (restarts priced in cells)")
    ax.set_ylabel(f"{state.get('metric', '')}: ratio to the default ({better} is better)")
    ax.set_title(f"Search trace: {state.get('experiment', '')}, {len(trace)} rounds; thin lines: a configuration dropped by the race")
    ax.legend(loc="lower right", fontsize=9)
    ax.grid(True, color="#e3e3e3")
    return _png(fig)


def importance_png(state: dict[str, Any]) -> bytes | None:
    importance = state.get("importance") or {}
    if not importance:
        return None
    names = list(importance)[::-1]
    fig = Figure(figsize=(8.0, 0.6 + 0.45 * len(names)), layout="constrained")
    ax = fig.add_subplot()
    ax.barh(names, [importance[n] for n in names], color=BLUE)
    ax.set_xlabel("share of the variation of the trials' values (PED-ANOVA)")
    ax.set_xlim(0, 1)
    return _png(fig)


# ---------------------------------------------------------------- html
def _e(x: object) -> str:
    return html.escape(str(x))


def _interval(adv: dict[str, object] | None) -> str:
    if not adv:
        return "–"
    if adv.get("low") is None:
        return f"{adv['ratio']:.3f}x (no interval: too few blocks)"
    return f"{adv['ratio']:.3f}x [{adv['low']:.3f}, {adv['high']:.3f}] ({adv['confidence']:.1%}, {adv['blocks']} blocks)"


def render(state: dict[str, Any], images: dict[str, str]) -> str:
    conf = state.get("confirmation") or {}
    parts = [f"<h1>blocklab tune: {_e(state.get('experiment', ''))}</h1>"]
    parts.append(f"<p class='verdict'>{_e(conf.get('verdict') or 'The tune is still running (or was interrupted): the confirmation is not measured yet.')}</p>")
    parts.append(
        f"<p>Engine {_e(state.get('engine'))}; goal: {_e(state.get('goal'))} {_e(state.get('metric'))}; space of "
        f"{state.get('space_size'):,} configurations; {state.get('measured_cells')} cells measured, "
        f"{_cells(state.get('spent_cells'))} spent with each restart priced as the cells its time would measure "
        f"({_cells(state.get('spent_seconds'))} s in all); seed {state.get('seed')}. "
        f"{_e(first_upper(str(state.get('stop_reason', ''))))}</p>")
    parts.append("<h2>The configuration to paste</h2>")
    parts.append(f"<p>Winner: <b>{_e(state.get('winner'))}</b> (default: {_e(state.get('default'))})</p>")
    parts.append("<pre>" + _e("\n".join(state.get("config_lines") or [])) + "</pre>")
    adv = conf.get("winner_vs_default") if conf else None
    if conf and state.get("winner") != state.get("default") and (not adv or adv.get("low") is None or adv["low"] <= 1.0):
        parts.append("<p><b>Keep the default: the confirmation did not show the winner better than it.</b> These lines are what "
                     "the search chose; the evidence says to keep the default until a longer tune (a larger budget) tells them apart.</p>")
    if state.get("fixed_lines"):
        parts.append("<p>Held fixed while tuning (part of what was measured):</p><pre>" + _e("\n".join(state["fixed_lines"])) + "</pre>")
    parts.append("<h2>Confirmation on fresh blocks</h2>")
    if conf:
        parts.append(f"<p>{conf.get('blocks')} blocks on {_e(conf.get('instance'))}; each block holds "
                     f"{_e(', '.join(conf.get('entrants') or []))} once, in a random order. Paired intervals from the per-block "
                     "ratios; the claims share 95% (Bonferroni). A ratio above 1 is better. The confidence interval holds the "
                     "true ratio; the prediction interval is where the estimate of a re-measurement of as many fresh blocks "
                     "falls (wider: that estimate is noisy too).</p>")
        parts.append("<table><tr><th>claim</th><th>ratio [confidence interval]</th><th>a re-measurement's estimate</th></tr>")
        for name, key in (("winner / default", "winner_vs_default"), ("runner-up / winner", "runner_up_vs_winner"),
                          ("runner-up / default", "runner_up_vs_default")):
            claim = conf.get(key)
            predicted = (f"[{claim['predict_low']:.3f}, {claim['predict_high']:.3f}]" if claim and claim.get("predict_low") is not None
                         else "–")
            parts.append(f"<tr><td>{name}</td><td>{_e(_interval(claim))}</td><td>{_e(predicted)}</td></tr>")
        parts.append("</table>")
    else:
        parts.append("<p>Not measured yet.</p>")
    parts.append("<h2>Search trace</h2>")
    if "tune-trace" in images:
        parts.append(f"<img src='{images['tune-trace']}' alt='search trace' width='800'>")
    parts.append("<h2>Which knobs matter</h2>")
    importance = state.get("importance") or {}
    if importance:
        parts.append("<p>Each knob's share of the variation of the values the race told the optimiser (Optuna's PED-ANOVA "
                     "importance over the trials; a guide to where the gains are, not a measured interval).</p>")
        if "tune-importance" in images:
            parts.append(f"<img src='{images['tune-importance']}' alt='importance' width='800'>")
        parts.append("<table><tr><th>knob</th><th>importance</th></tr>" +
                     "".join(f"<tr><td>{_e(k)}</td><td>{v:.2f}</td></tr>" for k, v in importance.items()) + "</table>")
    else:
        parts.append("<p>Too few distinct trials to say.</p>")
    parts.append("<h2>The race</h2><p>Every configuration measured, in the order proposed. Dropped: the family-wise paired "
                 "interval of its ratio to the best of its round excluded 1 (it was not measured again).</p>")
    parts.append("<table><tr><th>configuration</th><th>round</th><th>blocks</th><th>estimate / default</th><th>dropped</th></tr>")
    levels = state.get("levels") or {}
    for t in state.get("trials") or []:
        dropped = "–"
        if t.get("dropped_at") is not None and t.get("dropped_ratio"):
            r = t["dropped_ratio"]
            dropped = f"after block {t['dropped_at']}: {r[0]:.3f}x the best [{r[1]:.3f}, {r[2]:.3f}]"
        est = levels.get(t["label"])
        est_text = f"{_exp(est):.3f}x" if est is not None else "–"
        mark = " (winner)" if t["label"] == state.get("winner") else " (default)" if t["label"] == state.get("default") else ""
        parts.append(f"<tr><td>{_e(t['label'])}{mark}</td><td>{t['round'] or '–'}</td><td>{t['blocks']}</td><td>{est_text}</td><td>{_e(dropped)}</td></tr>")
    parts.append("</table>")
    return _page(parts)


def _page(parts: list[str]) -> str:
    style = ("body{font-family:DejaVu Sans,sans-serif;max-width:1100px;margin:2em auto;color:#222} table{border-collapse:collapse}"
             "td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;font-size:13px} .verdict{font-size:18px;font-weight:bold}"
             "pre{background:#f4f4f4;padding:8px}")
    return f"<!doctype html><html><head><meta charset='utf-8'><title>blocklab tune</title><style>{style}</style></head><body>{''.join(parts)}</body></html>"


def _exp(x: float) -> float:
    import math

    return math.exp(x)


def _cells(value: object) -> str:
    """'51.3' for a spent share priced in cells (a restart costs a fraction of a cell's time)."""
    return f"{value:.1f}" if isinstance(value, float) else _e(str(value))
