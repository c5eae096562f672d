"""Host as a factor: a fleet run's analysis per host, the fleet's verdict, and two
hosts of one run compared.

Each host measured the whole plan on its own disk, so each host gets its own
analysis (summary.summarise over its rows: medians, intervals, best,
indistinguishable) and its own verdict. The fleet verdict then says where the
hosts agree:

    The best multiblock_read is 16 (128 kB) on 9 of 10 hosts. host-c differs:
    its best is 4 (32 kB), where 16 (128 kB) is 1.31x slower [1.20, 1.45].

The setting named is the one that is best on the most hosts (ties: the one
best or indistinguishable from the best on the most hosts, then plan order);
a host where it is indistinguishable from that host's best is counted apart,
never as differing. Rows of all hosts pooled are analysed too (summary.json's
top level, so that every reader of a local run reads a fleet run), labelled as
pooled wherever they are shown.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from ..results import ResultRow
from ..spec import Scalar
from ..units import fmt_factor
from .compare import CompareError, RunComparison, compare_loaded, read_run
from .summary import summarise


@dataclass
class Sweep:
    """What the per-host analyses share: the plan's settings and how they read."""

    metric: str
    goal: str
    labels: list[str]
    settings_by_label: dict[str, dict[str, Scalar]]
    baseline: str | None = None
    practical: float = 0.0
    seed: int = 0
    describe: dict[str, str] = field(default_factory=dict)  # label -> "16 (128 kB)"
    knob_label: str = "setting"
    unit: str = ""

    def describe_setting(self, label: str) -> str:
        return self.describe.get(label, label)

    def to_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Sweep:
        return cls(**{f.name: data[f.name] for f in dataclasses.fields(cls) if f.name in data})

    def summarise(self, rows: list[ResultRow]) -> dict[str, object]:
        return summarise(
            rows, metric=self.metric, goal=self.goal, setting_labels=self.labels, settings_by_label=self.settings_by_label,
            baseline=self.baseline, practical=self.practical, seed=self.seed, describe_setting=self.describe_setting,
            knob_label=self.knob_label, unit=self.unit,
        )


def rows_by_host(rows: Iterable[ResultRow], hosts: Iterable[str] = ()) -> dict[str, list[ResultRow]]:
    """The rows of each host, hosts in the given order first (each present even when empty)."""
    out: dict[str, list[ResultRow]] = {h: [] for h in hosts}
    for row in rows:
        out.setdefault(row.host, []).append(row)
    return out


def host_summary(sweep: Sweep, rows: list[ResultRow], planned: int | None = None) -> dict[str, object]:
    """One host's analysis, as summary.json holds a local run's, plus its cell counts."""
    summary = sweep.summarise(rows)
    summary["cells_planned"] = planned
    summary["cells_invalid"] = sum(1 for r in rows if r.invalid)
    summary["cells_measured"] = len({r.cell_id for r in rows})
    return summary



class HostDiffer(TypedDict):
    """A host whose best is not the fleet's choice: its best, and what the choice costs there."""

    best: str
    factor: float
    ci_low: float
    ci_high: float
    n: int


def fleet_verdict(sweep: Sweep, hosts: dict[str, dict[str, Any]], lost: dict[str, str] | None = None) -> dict[str, Any]:
    """The fleet's answer from each host's summary: the setting, the hosts that agree,
    those where it is indistinguishable from their best, those that differ (their
    best and what the fleet's setting costs there), those not measured yet."""
    lost = lost or {}
    d = sweep.describe_setting
    measured = {h: s for h, s in hosts.items() if s.get("best_label")}
    unmeasured = [h for h in hosts if h not in measured]
    out: dict[str, object] = {"choice": None, "agree": [], "close": [], "differ": {}, "unmeasured": unmeasured,
                           "best": {h: s["best_label"] for h, s in measured.items()}, "lost": dict(lost)}
    if not measured:
        out["verdict"] = "No host has a measurement yet."
        out["headline"] = ""
        return out
    order = {label: i for i, label in enumerate(sweep.labels)}

    def score(label: str) -> tuple[int, int, float, int]:
        best = sum(1 for s in measured.values() if s["best_label"] == label)
        near = sum(1 for s in measured.values() if s["best_label"] == label or label in (s.get("indistinguishable") or []))
        # a tie (say every host has a best of its own): the setting that costs the fleet
        # least, the geometric mean over the hosts of how much slower it is than each best
        factors = [_slowdown((s.get("settings") or {}).get(label) or {}, sweep.goal)[0] for s in measured.values()]
        logs = [math.log(f) if math.isfinite(f) and f > 0 else math.inf for f in factors]
        return best, near, -(sum(logs) / len(logs)), -order.get(label, len(order))

    candidates = {s["best_label"] for s in measured.values()} | {k for s in measured.values() for k in s.get("indistinguishable") or []}
    choice = max(sorted(candidates, key=lambda k: order.get(k, len(order))), key=score)
    agree = [h for h, s in measured.items() if s["best_label"] == choice]
    close = [h for h, s in measured.items() if s["best_label"] != choice and choice in (s.get("indistinguishable") or [])]
    differ: dict[str, HostDiffer] = {}
    for h, s in measured.items():
        if h in agree or h in close:
            continue
        entry = (s.get("settings") or {}).get(choice) or {}
        factor, lo, hi = _slowdown(entry, sweep.goal)
        differ[h] = {"best": str(s["best_label"]), "factor": factor, "ci_low": lo, "ci_high": hi, "n": int(entry.get("n") or 0)}
    out.update(choice=choice, agree=agree, close=close, differ=differ)

    n = len(measured)
    what = f"setting {d(choice)}" if ", " in sweep.knob_label else f"{sweep.knob_label} is {d(choice)}"
    text = [f"The best {what} on {len(agree)} of {n} host{'s' if n != 1 else ''}" +
            (f" ({_names(agree)})" if 0 < len(agree) <= 3 and len(agree) < n else "") +
            (f"; on {_names(close)} it is indistinguishable from the best" if close else "") + "."]
    for h, entry in differ.items():
        if entry["n"] == 0:
            cost = f"{d(choice)} was not measured there"
        else:
            best_n = int((hosts[h]["settings"].get(entry["best"]) or {}).get("n") or 0)
            single = entry["n"] < 2 or best_n < 2  # one sample against one: no interval to show
            low, high = (math.nan, math.nan) if single else (entry["ci_low"], entry["ci_high"])
            cost = f"{d(choice)} is {fmt_factor(entry['factor'], low, high, 'slower')} there"
        text.append(f"{h} differs: its best is {d(entry['best'])}; {cost}.")
    if unmeasured:
        text.append(f"No measurement yet on {_names(unmeasured)}.")
    for h, why in lost.items():
        text.append(f"{h} stopped before the end ({why}).")
    if all(int(s["settings"].get(s["best_label"], {}).get("n") or 0) < 2 for s in measured.values()):
        text.append("Every host has a single sample per setting: repeat to be sure.")
    out["verdict"] = " ".join(text)
    head = f"setting {d(choice)}" if ", " in sweep.knob_label else f"{sweep.knob_label} is {d(choice)}"
    out["headline"] = f"Best {head} on {len(agree)} of {n} host{'s' if n != 1 else ''}"
    return out


def fleet_summary(
    sweep: Sweep,
    rows: list[ResultRow],
    planned: dict[str, int],
    *,
    name: str,
    seed: int,
    lost: dict[str, str] | None = None,
    pooled: dict[str, object] | None = None,
    host_summaries: dict[str, dict[str, object]] | None = None,
) -> dict[str, object]:
    """summary.json of a fleet run. The top level is the analysis of every host's rows
    pooled, shaped as a local run's (so the report's tables, `export` and `compare`
    read it), with the fleet's verdict and headline; `fleet` holds each host's own
    analysis, the verdict's parts and the sweep (to recompute it from the rows).
    `pooled` and `host_summaries` may be given when already computed."""
    hosts = host_summaries
    if hosts is None:
        by_host = rows_by_host(rows, planned)
        hosts = {h: host_summary(sweep, by_host.get(h, []), planned.get(h)) for h in by_host}
    pooled = pooled if pooled is not None else sweep.summarise(rows)
    fleet = fleet_verdict(sweep, hosts, lost)
    summary = dict(pooled)
    summary["pooled_verdict"] = pooled.get("verdict")
    summary["verdict"] = fleet["verdict"]
    summary["headline"] = fleet["headline"]
    summary["experiment"] = name
    summary["cells_planned"] = sum(planned.values())
    # the counts as runner.validity_counts gives them, from every row (the pooled
    # analysis may be a few rows behind while a run goes on)
    invalid = [r for r in rows if r.invalid]
    summary["cells_ok"] = sum(1 for r in rows if r.ok)
    summary["cells_failed"] = sum(1 for r in rows if r.failed)
    summary["failed_cells"] = [r.cell_id for r in rows if r.failed]
    summary["cells_invalid"] = len(invalid)
    summary["invalid_cells"] = [{"cell_id": r.cell_id, "why": r.status.removeprefix("invalid: ")} for r in invalid]
    summary["cells_flagged"] = sum(1 for r in rows if r.ok and r.notes.get("flags"))
    summary["seed"] = seed
    summary["fleet"] = {**fleet, "hosts": hosts, "planned": dict(planned), "sweep": sweep.to_dict()}
    return summary


def _slowdown(entry: dict[str, object], goal: str) -> tuple[float, float, float]:
    """How many times worse than that host's best (from summary entries: ratio_to_best)."""
    r = _num(entry.get("ratio_to_best"))
    lo, hi = _num(entry.get("ratio_to_best_ci_low")), _num(entry.get("ratio_to_best_ci_high"))
    if goal == "min":
        return r, lo, hi
    inv: Callable[[float], float] = lambda x: math.inf if x == 0 else 1.0 / x  # noqa: E731
    return inv(r), inv(hi), inv(lo)


def _num(x: object) -> float:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else math.nan


def _names(hosts: list[str]) -> str:
    return ", ".join(hosts)


# ---------------------------------------------------------------------- two hosts compared
# Within one run the hosts differ by design in host and device (that is the
# comparison); what must still agree for the numbers to be comparable:
HOST_CHECKED_FIELDS = ("engine", "engine_version", "dataset_rows")


def compare_hosts(run_path: Path | str, host_a: str, host_b: str, *, metric: str | None = None, force: bool = False, seed: int = 0) -> RunComparison:
    """Host B against host A of one fleet run, setting by setting (compare.RunComparison).
    CompareError naming HOST_A / HOST_B for a host the run does not have."""
    run = read_run(run_path, "RUN_DIR")
    env = run.info.environment
    hosts = list((env.get("hosts") or {}).keys())
    if not hosts:
        raise CompareError("RUN_DIR", f"{run_path} was not measured on a fleet (no hosts in environment.json); compare two runs with `blocklab compare RUN_A RUN_B`")
    sides = []
    for argument, host in (("HOST_A", host_a), ("HOST_B", host_b)):
        if host not in hosts:
            raise CompareError(argument, f"{host!r} is not a host of this run; its hosts: {', '.join(hosts)}")
        rows = [r for r in run.rows if r.host == host]
        if not rows:
            raise CompareError(argument, f"{host} has no successful measurement in this run")
        info = type(run.info)(run.info.path, f"{run.info.name} on {host}", min((r.started for r in rows if r.started), default=""), env["hosts"][host])
        sides.append(type(run)(info, rows, run.order, run.default_metric, run.default_goal, run.fixed))
    if host_a == host_b:
        raise CompareError("HOST_B", f"{host_b} is HOST_A too; give two different hosts")
    return compare_loaded(sides[0], sides[1], metric=metric, force=force, seed=seed, checked=HOST_CHECKED_FIELDS)
