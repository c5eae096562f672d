"""A null engine, like fio's null ioengine: accepts `null.*` knobs, does no I/O.

Only for unit tests of the plan and the runner; no recipe or figure rests on it."""

from __future__ import annotations

from typing import Any, Iterable

from .base import ApplyClass, EngineInfo, KnobError, KnobInfo

KNOBS = {
    "null.level": KnobInfo("level", None, "integer", ApplyClass.SESSION, minimum=0, maximum=1000, default=0),
    "null.mode": KnobInfo("mode", None, "enum", ApplyClass.RESTART, choices=("a", "b", "c"), default="a"),
}


class NullEngine:
    name = "null"

    def __init__(self, **_: Any):
        self.started = False
        self.restarts = 0
        self.current: dict[str, Any] = {}
        self.applied_history: list[dict[str, Any]] = []

    def start(self) -> None:
        self.started = True

    def stop(self) -> None:
        self.started = False

    def knob(self, name: str) -> KnobInfo:
        if name not in KNOBS:
            raise KnobError(f"unknown knob {name!r} on engine null; accepted: {', '.join(KNOBS)}")
        return KNOBS[name]

    def check_settings(self, settings: dict[str, Any], *, partial: bool = False) -> dict[str, Any]:
        return {k: self.knob(k).normalise(v, "null") for k, v in settings.items()}

    def apply(self, settings: dict[str, Any]) -> dict[str, str]:
        if any(self.current.get(k) != v for k, v in settings.items() if KNOBS[k].apply >= ApplyClass.RESTART):
            self.restarts += 1
        self.current = dict(settings)
        self.applied_history.append(dict(settings))
        return {k: str(v) for k, v in settings.items()}

    def info(self) -> EngineInfo:
        return EngineInfo(engine="null", version="0", mode="null", data_dir=None, settings={})

    def data_dir(self) -> str | None:
        return None

    def evict(self, relations: Iterable[str]) -> dict[str, Any]:
        return {}

    def io_counters(self, conn: Any = None) -> dict[str, float]:
        return {}
