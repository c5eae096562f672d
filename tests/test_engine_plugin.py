"""Engines are plug-ins: an engine written in one module, outside blocklab,
runs a workload end to end once it is registered; nothing else in blocklab
asks which engine it runs on."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest
from engine_leaks import leaks_in, leaks_outside_engines

from blocklab import engines
from blocklab.engines.base import (
    IO_KEYS,
    ApplyClass,
    CounterWindow,
    DialectBase,
    Engine,
    EngineBase,
    EngineInfo,
    KnobError,
    KnobInfo,
    SessionBase,
)
from blocklab.experiment import prepare
from blocklab.results import RunDir
from blocklab.runner import SilentReporter, run
from blocklab.spec import SpecError, spec_from_dict
from blocklab.workloads import available as available_workloads
from blocklab.workloads import make_workload, workload_class
from blocklab.workloads.base import missing_methods

ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------------- an engine in one module
class MemorySession(SessionBase):
    backend_id = 1

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
        return []

    def cancel(self) -> None:
        pass

    def close(self) -> None:
        pass


class MemoryNullDialect(DialectBase):
    """What the null workload needs, kept in a dict."""

    def __init__(self, engine: MemoryEngine):
        self.engine = engine

    def build_table(self, table: str, rows: int, fingerprint: str) -> None:
        self.engine.tables[table] = (rows, fingerprint)
        self.engine.reads += 1

    def count_rows(self, session: Any, table: str) -> int:
        self.engine.reads += self.engine.tables[table][0]
        return self.engine.tables[table][0]

    def level(self) -> int:
        return int(self.engine.current.get("memory.level", 0))


class MemoryEngine(EngineBase):
    name: ClassVar[str] = "memory"
    display: ClassVar[str] = "Memory"
    native_prefix: ClassVar[str] = "memory."
    summary: ClassVar[str] = "a test engine that keeps its tables in a dict"
    accepts_dsn: ClassVar[bool] = False
    listed: ClassVar[bool] = False
    dialects: ClassVar[dict[str, type]] = {"null": MemoryNullDialect}
    change_seconds: ClassVar[dict[ApplyClass, float]] = {}
    install_bytes: ClassVar[float] = 0.0
    KNOBS: ClassVar[dict[str, KnobInfo]] = {
        "memory.level": KnobInfo("level", None, "integer", ApplyClass.SESSION, minimum=0, maximum=9, default=0),
    }

    def __init__(self, cache_dir: Path | None = None):
        self.mode = "embedded"
        self.tables: dict[str, tuple[int, str]] = {}
        self.current: dict[str, Any] = {}
        self.reads = 0
        self.started = self.stopped = 0

    def start(self) -> None:
        self.started += 1

    def stop(self) -> None:
        self.stopped += 1

    def knob(self, name: str) -> KnobInfo:
        if name not in self.KNOBS:
            raise KnobError(f"unknown knob {name!r} on engine memory; accepted: {', '.join(self.KNOBS)}")
        return self.KNOBS[name]

    def check_settings(self, settings: dict[str, Any], *, partial: bool = False) -> dict[str, Any]:
        return {k: self.knob(k).normalise(v, "memory") for k, v in settings.items()}

    def apply(self, settings: dict[str, Any]) -> dict[str, str]:
        self.current = dict(settings)
        return {k: str(v) for k, v in settings.items()}

    def info(self) -> EngineInfo:
        return EngineInfo(engine="memory", version="1", mode=self.mode, data_dir=None)

    def version_tuple(self) -> tuple[int, ...]:
        return (1,)

    def connect(self, *, session: bool = True) -> MemorySession:
        return MemorySession()

    def query(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
        return []

    def data_dir(self) -> str | None:
        return None

    def server_pids(self) -> list[int]:
        return []

    def block_size(self) -> int:
        return 4096

    def relation_bytes(self, relation: str) -> int:
        return self.tables.get(relation, (0, ""))[0] * 8

    def table_fingerprint(self, table: str) -> str | None:
        return self.tables[table][1] if table in self.tables else None

    def needs_rebuild(self, table: str) -> bool:
        return False

    def relation_files(self, relation: str) -> list[Path]:
        return []

    def cached_bytes(self, relations: Iterable[str]) -> float | None:
        return 0.0

    def check_applied(self, settings: dict[str, Any]) -> list[str]:
        return [f"{k}: asked {v}, have {self.current.get(k)}" for k, v in settings.items() if self.current.get(k) != v]

    def cold_cache_problem(self) -> str | None:
        return None

    def health(self) -> str | None:
        return None

    def recover(self) -> None:
        pass

    def direct_io_active(self) -> bool:
        return False

    def evict(self, relations: Iterable[str]) -> dict[str, Any]:
        return {"evicted": list(relations)}

    def io_counters(self, session: Any = None) -> dict[str, float]:
        return {**dict.fromkeys(IO_KEYS, 0.0), "reads": float(self.reads)}

    def io_window(self, session: Any = None, *, settle: bool = False, sessions: Sequence[Any] = ()) -> CounterWindow:
        return CounterWindow(self.io_counters)


@pytest.fixture
def memory_engine(monkeypatch):
    """The engine joins the registry for this test only."""
    engines.available()  # the built-in engines found first, so the copy holds them
    monkeypatch.setattr(engines, "_registered", dict(engines._registered))
    engines.register(MemoryEngine)
    return MemoryEngine


def test_an_engine_in_one_module_runs_a_workload_end_to_end(memory_engine, tmp_path):
    raw = {
        "name": "plugin",
        "engine": {"kind": "memory"},
        "dataset": {"rows": 1234},
        "workload": {"kind": "null", "noise": 0.0},
        "knobs": {"memory.level": [1, 5]},
        "measure": {"repeats": 2, "seed": 1},
    }
    exp = prepare(spec_from_dict(raw, "test", {}), "# test", "test")
    assert isinstance(exp.engine, MemoryEngine) and isinstance(exp.engine, Engine)
    summary = run(exp, RunDir(tmp_path / "run"), SilentReporter())
    rows = RunDir(tmp_path / "run").rows()
    assert len(rows) == 4 and all(r.ok for r in rows)
    assert {r.metrics["rows"] for r in rows} == {1234.0}  # the table the dialect built
    assert {r.settings["memory.level"] for r in rows} == {1, 5}
    assert summary["best_label"] == "memory.level=5"  # the null workload scores level + 1
    assert exp.engine.tables["blocklab_scan"][0] == 1234
    assert exp.engine.stopped >= 1


def test_an_engine_without_the_workloads_dialect_is_refused_naming_what_is_missing(memory_engine):
    with pytest.raises(SpecError, match=r"workload 'slob' does not run on engine 'memory'.*no slob dialect.*engines that have one: .*postgres"):
        make_workload(spec_from_dict({"workload": {"kind": "slob"}}, "t", {}).workload, spec_from_dict({}, "t", {}).dataset, "memory")


def test_a_dialect_lacking_a_method_is_refused(memory_engine, monkeypatch):
    class Half(DialectBase):
        def __init__(self, engine):
            pass

        def level(self) -> int:
            return 0

    monkeypatch.setattr(MemoryEngine, "dialects", {"null": Half})
    with pytest.raises(SpecError, match=r"memory engine's null dialect \(.*Half\) lacks build_table, count_rows"):
        make_workload(spec_from_dict({"workload": {"kind": "null"}}, "t", {}).workload, spec_from_dict({}, "t", {}).dataset, "memory")


def test_a_dialect_not_deriving_from_dialect_base_is_refused(memory_engine, monkeypatch):
    class Bare:  # every method, but none of DialectBase's declarations (bytes_per_row, refused_options ...)
        def __init__(self, engine):
            pass

        def build_table(self, table, rows, fingerprint):
            pass

        def count_rows(self, session, table):
            return 0

        def level(self):
            return 0

    monkeypatch.setattr(MemoryEngine, "dialects", {"null": Bare})
    with pytest.raises(SpecError, match=r"memory engine's null dialect .*Bare.* is not a class deriving from blocklab.engines.base.DialectBase"):
        make_workload(spec_from_dict({"workload": {"kind": "null"}}, "t", {}).workload, spec_from_dict({}, "t", {}).dataset, "memory")


def test_a_workload_an_engine_lacks_is_refused_with_the_engines_reason(memory_engine, monkeypatch):
    from blocklab.engines.base import Capabilities

    monkeypatch.setattr(MemoryEngine, "capabilities", Capabilities(lacks={"slob": "a dict has no pages to read"}))
    with pytest.raises(SpecError, match=r"workload 'slob' does not run on engine 'memory': a dict has no pages to read"):
        make_workload(spec_from_dict({"workload": {"kind": "slob"}}, "t", {}).workload, spec_from_dict({}, "t", {}).dataset, "memory")


def test_a_dialect_lacking_a_declared_class_attribute_is_refused():
    """rows_per_s is declared by the insert protocol: a dialect without it is refused, not guessed at."""
    from blocklab.engines.base import protocol_methods
    from blocklab.workloads.row_insert import InsertDialect

    methods = {name: (lambda self, *args: None) for name in protocol_methods(InsertDialect)}
    no_rate = type("NoRate", (DialectBase,), methods)
    assert missing_methods(no_rate, InsertDialect) == ["rows_per_s"]
    assert missing_methods(type("Rate", (no_rate,), {"rows_per_s": 1000.0}), InsertDialect) == []


def test_a_broken_engine_class_is_refused_at_registration():
    class NoName:
        pass

    with pytest.raises(engines.EngineError, match="lacks name, display, native_prefix"):
        engines.register(NoName)


# ---------------------------------------------------------------------- the engines blocklab ships
def test_every_built_in_dialect_implements_its_workloads_protocol():
    checked = 0
    for kind in engines.available(listed_only=False):
        cls = engines.engine_class(kind)
        for name in ("name", "display", "native_prefix", "summary", "accepts_dsn", "dialects", "change_seconds", "install_bytes",
                     "capabilities"):
            assert hasattr(cls, name), (kind, name)
        for workload, dialect in cls.dialects.items():
            if workload in available_workloads():
                assert missing_methods(dialect, workload_class(workload).Dialect) == [], (kind, workload)
                checked += 1
    assert checked >= 12


def test_no_engine_names_outside_the_engine_packages():
    """The issue's own check: no code outside engines/ branches on the engine it runs on."""
    out = subprocess.run(
        ["grep", "-rnE", r"engine(_kind|\.name|\.kind) *==|engine_kind *in|hasattr\(engine|getattr\(engine", "src/blocklab"],
        cwd=ROOT, capture_output=True, text=True, check=False,
    ).stdout
    outside = [line for line in out.splitlines() if not line.startswith("src/blocklab/engines/")]
    assert outside == [], outside
    # and no list of the engines' names: the registry is the only one
    names = "|".join(re.escape(n) for n in engines.available())
    lists = subprocess.run(
        ["grep", "-rnE", rf"\(\s*\"({names})\",\s*\"({names})\"", "src/blocklab"], cwd=ROOT, capture_output=True, text=True, check=False,
    ).stdout
    assert [line for line in lists.splitlines() if not line.startswith("src/blocklab/engines/")] == []


def test_no_engine_knowledge_leaks_outside_the_engine_packages():
    """DESIGN.md: capabilities are data the engine declares. Outside engines/, no engine
    name, no engine metric key (guessing the engine from its metrics), no getattr /
    hasattr probe of an engine or a dialect (tests/engine_leaks.py)."""
    assert leaks_outside_engines(ROOT / "src" / "blocklab") == []


LEAKY = """\
\"\"\"A module that knows too much: each line below is one leak kind (its docstring names postgres freely).\"\"\"

def describe(m, engine, dialect_class, plugin, engine_kind):
    text = "fine prose naming PostgreSQL and innodb.pages_written is documentation"
    if "innodb.buffer_pool_wait_free" in m:  # sniffing MariaDB from a metric key
        text += "x"
    if m.get("data_file.read_s"):
        text += "y"
    keys = ("journal_writes", "bgwriter_writes")
    kind = "postgres"
    if engine.name == kind or engine_kind == "sqlite":
        text += "z"
    rate = getattr(dialect_class, "rows_per_s", 1.0)
    version = getattr(plugin, "installed_version", None)
    if hasattr(engine, "anything"):
        text += str(getattr(object(), "refused_options", None))
    return text, keys, rate, version
"""


def test_the_leak_guard_finds_each_leak_kind_in_an_injected_file(tmp_path):
    """The guard's own test: a file with one leak of every kind, each found; prose and docstrings are not leaks."""
    leaky = tmp_path / "leaky.py"
    leaky.write_text(LEAKY)
    found = leaks_in(leaky)
    text = "\n".join(found)
    for expected in (
        ":5: engine metric key: 'innodb.buffer_pool_wait_free'",
        ":7: engine metric key: 'data_file.read_s'",
        ":9: engine metric key: 'journal_writes'",
        ":9: engine metric key: 'bgwriter_writes'",
        ":10: engine name: 'postgres'",
        ":11: engine name: 'sqlite'",
        ":11: engine name compared: engine.name == kind",
        ":13: getattr probe: getattr(dialect_class, \"rows_per_s\", 1.0)",
        ":14: getattr probe: getattr(plugin, \"installed_version\", None)",
        ":15: hasattr probe: hasattr(engine, \"anything\")",
        ":16: getattr probe: getattr(object(), \"refused_options\", None)",  # an engine's attribute, whatever the object
    ):
        assert expected in text, (expected, found)
    assert not [line for line in found if ":1:" in line or ":4:" in line]  # the docstring and the prose
    # and the guard over src/ fails on it: the injected file inside a copy of the tree is reported
    tree = tmp_path / "src"
    (tree / "engines").mkdir(parents=True)
    (tree / "engines" / "mine.py").write_text(LEAKY)  # inside engines/: an engine may know itself
    (tree / "workloads").mkdir()
    (tree / "workloads" / "leaky.py").write_text(LEAKY)
    outside = leaks_outside_engines(tree)
    assert outside and all("workloads/leaky.py" in line for line in outside)
