"""A null engine, like fio's null ioengine: accepts `null.*` knobs, keeps its
"tables" in memory, does no I/O.

Only for unit tests of the plan and the runner; no recipe or figure rests on it
(it is left out of the engine lists users see)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, ClassVar

from ..base import ApplyClass, CounterWindow, DialectBase, EngineBase, EngineInfo, KnobError, KnobInfo, Session, SessionBase

KNOBS = {
    "null.level": KnobInfo("level", None, "integer", ApplyClass.SESSION, minimum=0, maximum=1000, default=0),
    "null.mode": KnobInfo("mode", None, "enum", ApplyClass.RESTART, choices=("a", "b", "c"), default="a"),
}


class NullSession(SessionBase):
    backend_id = 0

    def __init__(self, engine: NullEngine):
        self.engine = engine

    def execute(self, sql: str, params: Sequence[object] | None = None) -> list[tuple[Any, ...]]:
        return []

    def cancel(self) -> None:
        pass  # nothing runs long enough to cancel

    def close(self) -> None:
        pass


class NullDialect(DialectBase):
    """The null workload's needs: a table of `rows` rows held in memory."""

    def __init__(self, engine: NullEngine):
        self.engine = engine

    def build_table(self, table: str, rows: int, fingerprint: str) -> None:
        self.engine.tables[table] = (rows, fingerprint)
        self.engine.builds += 1

    def count_rows(self, session: NullSession, table: str) -> int:
        return self.engine.tables[table][0]

    def level(self) -> int:
        return int(self.engine.current.get("null.level", 0))

    def mode(self) -> str:
        return str(self.engine.current.get("null.mode", "a"))


class NullEngine(EngineBase):
    name: ClassVar[str] = "null"
    display: ClassVar[str] = "null"  # as people write it
    native_prefix: ClassVar[str] = "null."
    summary: ClassVar[str] = "an engine that does no I/O, for tests of blocklab itself"
    accepts_dsn: ClassVar[bool] = False
    listed: ClassVar[bool] = False
    dialects: ClassVar[dict[str, type]] = {"null": NullDialect}
    install_bytes: ClassVar[float] = 0.0  # nothing on disk
    change_seconds: ClassVar[dict[ApplyClass, float]] = {}

    def __init__(self, cache_dir: Path | None = None, **_: object):
        self.mode = "null"
        self.started = False
        self.restarts = 0
        self.builds = 0
        self.current: dict[str, Any] = {}
        self.applied_history: list[dict[str, object]] = []
        self.tables: dict[str, tuple[int, str]] = {}

    def start(self) -> None:
        self.started = True

    def stop(self) -> None:
        self.started = False

    def knob(self, name: str) -> KnobInfo:
        if name not in KNOBS:
            raise KnobError(f"unknown knob {name!r} on engine null; accepted: {', '.join(KNOBS)}")
        return KNOBS[name]

    def check_settings(self, settings: dict[str, object], *, partial: bool = False) -> dict[str, object]:
        return {k: self.knob(k).normalise(v, "null", k) for k, v in settings.items()}

    def apply(self, settings: dict[str, object]) -> dict[str, str]:
        if any(self.current.get(k) != v for k, v in settings.items() if KNOBS[k].apply >= ApplyClass.RESTART):
            self.restarts += 1
        self.current = dict(settings)
        self.applied_history.append(dict(settings))
        return {k: str(v) for k, v in settings.items()}

    def version_tuple(self) -> tuple[int, ...]:
        return (0,)

    def info(self) -> EngineInfo:
        return EngineInfo(engine="null", version="0", mode="null", data_dir=None, settings={})

    def connect(self, *, session: bool = True) -> NullSession:
        return NullSession(self)

    def query(self, sql: str, params: Sequence[object] | None = None) -> list[tuple[Any, ...]]:
        return []

    def data_dir(self) -> str | None:
        return None

    def server_pids(self) -> list[int]:
        return []

    def block_size(self) -> int:
        return 8192

    def relation_bytes(self, relation: str) -> int:
        return self.tables.get(relation, (0, ""))[0] * 50

    def table_fingerprint(self, table: str) -> str | None:
        return self.tables[table][1] if table in self.tables else None

    def needs_rebuild(self, table: str) -> bool:
        return False

    def relation_files(self, relation: str) -> list[Path]:
        return []

    def cached_bytes(self, relations: Iterable[str]) -> float | None:
        return 0.0

    def check_applied(self, settings: dict[str, object]) -> list[str]:
        return [f"{k} asked {v!r}, the null engine has {self.current.get(k)!r}" for k, v in settings.items() if self.current.get(k) != v]

    def cold_cache_problem(self) -> str | None:
        return None

    def health(self) -> str | None:
        return None if self.started else "the null engine is not started"

    def recover(self) -> None:
        self.started = True

    def direct_io_active(self) -> bool:
        return False

    def evict(self, relations: Iterable[str]) -> dict[str, object]:
        return {}

    def io_counters(self, session: Session | None = None) -> dict[str, float]:
        return {}

    def io_window(self, session: Session | None = None, *, settle: bool = False, sessions: Sequence[Session] = ()) -> CounterWindow:
        return CounterWindow(self.io_counters)


ENGINE = NullEngine
