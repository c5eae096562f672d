"""Workloads: one file per workload, picked by [workload] kind.

A workload module exposes WORKLOAD = its class; the class has an `Options`
model (its fields are the [workload] table's other keys) and `engines`."""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

from pydantic import ValidationError

from ..spec import DatasetSpec, SpecError, WorkloadSpec
from .base import Workload


def available() -> list[str]:
    names = []
    for module in pkgutil.iter_modules(__path__):
        if module.name.startswith("_") or module.name == "base":
            continue
        if hasattr(importlib.import_module(f"{__name__}.{module.name}"), "WORKLOAD"):
            names.append(module.name)
    return sorted(names)


def workload_class(kind: str, source: str = "experiment") -> Any:
    if kind not in available():
        raise SpecError(f"{source}: workload.kind: {kind!r} is not accepted; accepted: {', '.join(available())}")
    return importlib.import_module(f"{__name__}.{kind}").WORKLOAD


def make_workload(
    spec: WorkloadSpec,
    dataset: DatasetSpec,
    engine_kind: str,
    source: str = "experiment",
    axis_values: dict[str, Any] | None = None,
) -> Workload:
    """The workload object for a spec; its options are validated here, before anything runs.
    `axis_values` are swept options of one cell (knobs named workload.X, without the prefix)."""
    cls = workload_class(spec.kind, source)
    try:
        options = cls.Options.model_validate({**spec.options(), **(axis_values or {})})
    except ValidationError as err:
        problems = []
        for p in err.errors():
            name = ".".join(str(x) for x in p["loc"])
            field = f"knobs.workload.{name}" if axis_values and name in axis_values else f"workload.{name}"
            if p["type"] == "extra_forbidden":
                accepted = ", ".join(cls.Options.model_fields) or "none"
                problems.append(f"{field}: unknown option for workload {spec.kind!r}; its options: {accepted}")
            else:
                problems.append(f"{field}: {p.get('input')!r} is not accepted: {p['msg']}")
        raise SpecError(f"{source}: " + "; ".join(problems)) from None
    if engine_kind not in cls.engines:
        raise SpecError(
            f"{source}: workload {spec.kind!r} does not run on engine {engine_kind!r}; it runs on: {', '.join(cls.engines)}"
        )
    check_engine = getattr(cls, "check_engine", None)  # options one engine has no use for (optional hook)
    if check_engine is not None:
        try:
            check_engine(options, engine_kind)
        except SpecError as err:
            raise SpecError(f"{source}: {err}") from None
    workload = cls(options, dataset)
    workload.engine_kind = engine_kind  # what its estimates are for
    return workload
