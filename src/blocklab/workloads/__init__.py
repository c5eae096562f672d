"""Workloads: one file per workload, picked by [workload] kind.

A workload module exposes WORKLOAD = its class; the class has an `Options`
model (its fields are the [workload] table's other keys) and a `Dialect`
protocol: what it needs from an engine. An engine runs the workload when its
package has a dialect for it (engines/<name>/, the class's `dialects`)."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

from pydantic import ValidationError

from ..engines import available as available_engines
from ..engines import engine_class
from ..engines.base import DialectBase
from ..spec import DatasetSpec, SpecError, WorkloadSpec
from .base import Options, Workload, WorkloadClass, missing_methods


def available() -> list[str]:
    names = []
    for module in pkgutil.iter_modules(__path__):
        if module.name.startswith("_") or module.name == "base":
            continue
        if hasattr(importlib.import_module(f"{__name__}.{module.name}"), "WORKLOAD"):
            names.append(module.name)
    return sorted(names)


def workload_class(kind: str, source: str = "experiment") -> WorkloadClass:
    if kind not in available():
        raise SpecError(f"{source}: workload.kind: {kind!r} is not accepted; accepted: {', '.join(available())}")
    return importlib.import_module(f"{__name__}.{kind}").WORKLOAD


def engines_for(kind: str) -> list[str]:
    """The engines that have a dialect for this workload."""
    return [e for e in available_engines(listed_only=False) if kind in engine_class(e).dialects]


def dialect_class(cls: WorkloadClass, engine_kind: str, source: str) -> type[DialectBase]:
    """The engine's dialect for workload class `cls`, checked against the
    workload's Dialect protocol; SpecError saying what is missing."""
    engine_cls = engine_class(engine_kind)
    dialect = engine_cls.dialects.get(cls.name)
    if dialect is None:
        why = engine_cls.capabilities.why_not(cls.name)
        if why:
            raise SpecError(f"{source}: workload {cls.name!r} does not run on engine {engine_kind!r}: {why}")
        others = sorted(set(engines_for(cls.name)) - {engine_kind})
        raise SpecError(
            f"{source}: workload {cls.name!r} does not run on engine {engine_kind!r}: the {engine_kind} engine has "
            f"no {cls.name} dialect ({cls.needs}); engines that have one: {', '.join(others) or 'none'}"
        )
    if not (isinstance(dialect, type) and issubclass(dialect, DialectBase)):
        raise SpecError(
            f"{source}: the {engine_kind} engine's {cls.name} dialect ({dialect!r}) is not a class deriving from "
            "blocklab.engines.base.DialectBase (its optional declarations have their defaults there)"
        )
    missing = missing_methods(dialect, cls.Dialect)
    if missing:
        raise SpecError(
            f"{source}: the {engine_kind} engine's {cls.name} dialect ({dialect.__qualname__}) lacks "
            f"{', '.join(missing)} of {cls.Dialect.__qualname__}"
        )
    return dialect


def make_workload(
    spec: WorkloadSpec,
    dataset: DatasetSpec,
    engine_kind: str,
    source: str = "experiment",
    axis_values: dict[str, object] | None = None,
) -> Workload:
    """The workload object for a spec; its options are validated here, before anything runs.
    `axis_values` are swept options of one cell (knobs named workload.X, without the prefix)."""
    cls = workload_class(spec.kind, source)
    try:
        # files an option names are found beside the experiment file (its directory is the context)
        base_dir = str(Path(source).parent) if Path(source).is_file() else None
        options = cls.Options.model_validate({**spec.options(), **(axis_values or {})}, context={"base_dir": base_dir})
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
    dialect = dialect_class(cls, engine_kind, source)
    _refuse_unused_options(options, dialect, engine_kind, source)
    workload = cls(options, dataset)
    workload.dialect_class = dialect  # what its estimates are for
    workload.capabilities = engine_class(engine_kind).capabilities  # what its descriptions caption
    return workload


def _refuse_unused_options(options: Options, dialect: type[DialectBase], engine_kind: str, source: str) -> None:
    """Options an engine's dialect has no use for (its `refused_options`: name ->
    why), set to anything but their default, are refused before anything runs;
    so are options a dialect can honour at one value only (its `required_options`:
    name -> (that value, why)), set to any other (their default included)."""
    refused = dialect.refused_options
    required = dialect.required_options
    fields = type(options).model_fields
    problems = []
    for name, why in refused.items():
        value, default = getattr(options, name), fields[name].default
        if value != default:
            problems.append(f"workload.{name} = {value!r} is not accepted on engine {engine_kind!r} ({why}); accepted: leave it out")
    for name, (only, why) in required.items():
        value = getattr(options, name)
        if value != only:
            problems.append(f"workload.{name} = {value!r} is not accepted on engine {engine_kind!r} ({why}); accepted: {only!r}")
    if problems:
        raise SpecError(f"{source}: " + "; ".join(problems))
