"""Every host of a fleet run on one plan: what their labs must report alike, and
what a resumed run checks before it measures again.

    sweep, knobs, apply = agreed(spec, opened, seed)   the hosts take the experiment alike, else FleetInputError
    check_same_plan(fplan, knobs, apply, spec, hosts)  a resumed host plans the cells plan.json holds for it
    check_same_host(run_dir, opened)                   a resumed host is the machine and disk it was
    sweep_from_run(run_dir, spec, fplan)               the sweep of a run with no lab left to ask

The coordinator (coordinator.py) calls these on its own machine with what each
host's HostLab returned from `open`; nothing here crosses the wire.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from ..analysis.fleet import Sweep
from ..engines.base import ApplyClass
from ..results import ENVIRONMENT_FILE, SUMMARY_FILE, RunDir
from ..spec import Scalar, Spec
from ..units import label_of, unit_of
from . import FleetInputError
from .plan import FleetPlan

if TYPE_CHECKING:
    from .worker import OpenedRun

# what every host's lab must report alike for one plan to hold on all of them
_AGREED: Final = ("knobs", "apply", "metric", "goal", "fixed")


def agreed(spec: Spec, opened: dict[str, OpenedRun], seed: int) -> tuple[Sweep, dict[str, list[Scalar]], dict[str, ApplyClass]]:
    """The hosts' labs agree on the experiment (else FleetInputError naming who differs);
    the sweep the analysis reads, the canonical knobs and their apply classes."""
    first_host, first = next(iter(opened.items()))
    for host, facts in opened.items():
        for key in _AGREED:
            if facts[key] != first[key]:
                raise FleetInputError("--hosts", f"the hosts do not take the experiment alike: {key} is {first[key]!r} on "
                                      f"{first_host} but {facts[key]!r} on {host} (another engine version?); run them "
                                      "separately, or leave one out with --hosts")
    knobs = {k: list(v) for k, v in first["knobs"].items()}
    apply = {k: ApplyClass[str(v).upper()] for k, v in first["apply"].items()}
    labels = list(first["describe"])
    from ..plan import grid

    settings = [s.as_dict() for s in grid(knobs)] if knobs else [{}]
    sweep = Sweep(metric=first["metric"], goal=first["goal"], labels=labels,
                  settings_by_label=dict(zip(labels, settings)), baseline=first["baseline"],
                  practical=spec.measure.practical, seed=seed, describe=dict(first["describe"]),
                  knob_label=first["knob_label"], unit=unit_of(first["metric"]))
    return sweep, knobs, apply


def check_same_plan(fplan: FleetPlan, knobs: dict[str, list[Scalar]], apply: dict[str, ApplyClass], spec: Spec, hosts: list[str]) -> None:
    """A resumed host must find its own order again: the experiment as its engine takes
    it now must plan the cells plan.json holds for it."""
    from ..plan import make_plan

    for host in hosts:
        saved = fplan.hosts[host]
        again = make_plan(knobs, spec.measure.repeats, saved.seed, apply)
        if [c.cell_id for c in again.cells] != [c.cell_id for c in saved.cells]:
            raise FleetInputError("--resume", f"host {host}: the experiment as its engine takes it now plans other cells "
                                  "than this run holds for it (another engine version?); resume needs the same experiment on the same hosts")


def check_same_host(run_dir: RunDir, opened: dict[str, OpenedRun]) -> None:
    """A host that comes back for a resume must be the machine and disk it was: its
    new cells would not be comparable with its old ones otherwise."""
    recorded = (run_dir.read_json(ENVIRONMENT_FILE).get("hosts") or {}) if run_dir.file(ENVIRONMENT_FILE).exists() else {}
    for host, facts in opened.items():
        before = recorded.get(host)
        if not before:
            continue
        now = facts["environment"]
        changed = [f"{key} {before.get(key)} -> {now.get(key)}" for key in ("engine_version", "device", "file_system")
                   if before.get(key) != now.get(key)]
        if changed:
            raise FleetInputError("--resume", f"host {host} is not as it was when the run started ({'; '.join(changed)}); "
                                  f"its new cells would not be comparable: resume the others with --hosts, or start a new run")


def sweep_from_run(run_dir: RunDir, spec: Spec, fplan: FleetPlan) -> Sweep:
    """The sweep of a run with nothing left to measure (no lab to ask): from its summary."""
    summary = run_dir.read_json(SUMMARY_FILE) if run_dir.file(SUMMARY_FILE).exists() else {}
    saved = (summary.get("fleet") or {}).get("sweep")
    if saved:
        return Sweep.from_dict(saved)
    labels = [label_of(s.as_dict()) for s in fplan.settings]
    metric = str(summary.get("metric") or spec.measure.metric or "")
    return Sweep(metric=metric, goal=str(summary.get("goal") or spec.measure.goal or "max"), labels=labels,
                 settings_by_label={label_of(s.as_dict()): s.as_dict() for s in fplan.settings},
                 practical=spec.measure.practical, seed=fplan.seed, knob_label=", ".join(spec.knobs) or "setting", unit=unit_of(metric))



__all__ = ["agreed", "check_same_host", "check_same_plan", "sweep_from_run"]
