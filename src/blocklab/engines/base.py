"""The narrow protocol every engine implements.

An engine is a plug-in (like fio's ioengine_ops): the runner only ever talks to
it through `Engine`. Capabilities are data (`KnobInfo`, in vocabulary.py with
the rest of the generic knob vocabulary), read from the engine itself where the
engine can tell (PostgreSQL's pg_settings), so validation can refuse a knob or
value before anything runs. An engine package imports what it implements
against from here: the protocol, its helpers, and the vocabulary's names.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol, Self, runtime_checkable

from .capabilities import (  # noqa: F401  (what an engine declares: imported from here too)
    Capabilities,
    Counter,
    DialectBase,
    ServerKind,
    TimeProfile,
    missing_methods,
    protocol_attributes,
    protocol_methods,
)
from .vocabulary import ApplyClass, KnobError, KnobInfo


class EngineError(RuntimeError):
    """The engine failed to start, stop or run something."""


@dataclass
class EngineInfo:
    """Who the engine is, recorded in environment.json."""

    engine: str
    version: str
    mode: str  # embedded | dsn | file
    data_dir: str | None
    settings: dict[str, str] = field(default_factory=dict)  # full parameter set
    extra: dict[str, object] = field(default_factory=dict)


# ---------------------------------------------------------------------- I/O counters
# The keys every engine's io_counters() and io_window() give, whatever its own
# statistics are called (engines add their own keys beside these):
IO_KEYS: tuple[str, ...] = (
    "reads",  # physical read calls of relation (table/index) data
    "read_bytes",
    "read_time_ms",  # 0 where the engine does not time its reads
    "writes",  # physical write calls of relation data
    "write_bytes",
    "write_time_ms",
    "hits",  # page requests answered from the engine's own cache
    "fsyncs",
)


@dataclass(frozen=True)
class Reading:
    """What an engine's dialect measured around one timed phase (a feature's
    cold reads, features/sysstats.py): its I/O counters (IO_KEYS) before and
    after, the client's clock, the data device's read bytes before and after
    (None: not on this host), and each session's own wall time."""

    before: dict[str, float]
    after: dict[str, float]
    wall_s: float
    disk0: float | None
    disk1: float | None
    session_wall_s: tuple[float, ...] = ()


def io_deltas(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    """after - before for every key of `after` (a key missing before counts from 0)."""
    return {k: after[k] - before.get(k, 0.0) for k in after}


class IoWindow(Protocol):
    """The engine's I/O over a window: `with engine.io_window(session) as w: ...`,
    then `w.deltas` (IO_KEYS and the engine's own counters) and `w.metrics()`
    (the engine's own figures worth keeping in a result row, e.g. per process type)."""

    deltas: dict[str, float]

    def __enter__(self) -> IoWindow: ...

    def __exit__(self, *exc: object) -> None: ...

    def metrics(self) -> dict[str, float]: ...


class CounterWindow:
    """An IoWindow from two reads of cumulative counters; engines whose counters
    need more (a settle, per-type views) write their own."""

    def __init__(self, read: Callable[[], dict[str, float]], extra: Callable[[dict[str, float]], dict[str, float]] | None = None):
        self._read = read
        self._extra = extra
        self.deltas: dict[str, float] = {}

    def __enter__(self) -> CounterWindow:
        self._before = self._read()
        return self

    def __exit__(self, *exc: object) -> None:
        if exc[0] is None:
            self.deltas = io_deltas(self._read(), self._before)

    def metrics(self) -> dict[str, float]:
        return self._extra(self.deltas) if self._extra else {}


# ---------------------------------------------------------------------- sessions
class Session(Protocol):
    """One connection to the engine, as every engine's connect() returns it.

    `execute` runs one statement with parameters (the engine's own placeholder
    style: %s on PostgreSQL and MariaDB, ? on SQLite) and returns its rows (none
    for a statement without a result). `cancel` stops the statement running in
    this session from another thread; `backend_id` is the server's id of the
    session (process id, thread id), for probes that watch it."""

    backend_id: int

    def execute(self, sql: str, params: Sequence[object] | None = None) -> list[tuple[Any, ...]]: ...

    def cancel(self) -> None: ...

    def close(self) -> None: ...

    def __enter__(self) -> Session: ...

    def __exit__(self, *exc: object) -> None: ...


class SessionBase(abc.ABC):
    """What every engine's session shares: closing as a context manager."""

    backend_id: int = 0

    @abc.abstractmethod
    def close(self) -> None:
        """Close the engine's connection (each engine's session closes its own)."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SessionProfiler(Protocol):
    """Where each session's time went (the seed's TIMESOURCE / SECONDS table),
    measured or sampled by the engine's own instruments:

        profiler.register(session) for each session, before it starts
        with profiler:
            t0 = profiler.begin(session); run; t1 = profiler.end(session)   (in each session's thread,
                or the parent's: end(session, at=t1) once the session's process has ended)
        profiler.metrics("profile")  -> profile.slowest.*, profile.total.*
    """

    def __enter__(self) -> SessionProfiler: ...

    def __exit__(self, *exc: object) -> None: ...

    def register(self, session: Session) -> None: ...

    def begin(self, session: Session) -> float: ...

    def end(self, session: Session, at: float | None = None) -> float:
        """`at`: the perf_counter time the session stopped, when it ran elsewhere (a process of its own)."""

    def metrics(self, prefix: str = "profile") -> dict[str, float]: ...


# ---------------------------------------------------------------------- the engine
@runtime_checkable
class Engine(Protocol):
    """What blocklab needs from an engine. One package per engine implements it
    (engines/<name>/), exporting its class as ENGINE; the registry in
    engines/__init__.py finds it.

    Class attributes say what the engine is before it starts (validation and the
    plan use them); instance methods need the engine started (start() is
    idempotent, and methods that need the server start it)."""

    name: ClassVar[str]  # "postgres", "sqlite", "mariadb", ...
    display: ClassVar[str]  # "PostgreSQL": the name as people write it
    native_prefix: ClassVar[str]  # native knob names: "pg." + the engine's own name
    summary: ClassVar[str]  # one line for `--help` and error messages
    accepts_dsn: ClassVar[bool]  # can it work on someone else's server (--dsn)?
    # workload (or command) name -> the dialect class that implements what it needs
    dialects: ClassVar[Mapping[str, type]]
    install_bytes: ClassVar[float]  # disk its data directory needs besides the data set
    # seconds a restart / reinit costs, for the plan's estimate
    change_seconds: ClassVar[Mapping[ApplyClass, float]]
    capabilities: ClassVar[Capabilities]  # what it can measure and how to caption it
    mode: str  # embedded | dsn | file

    def __init__(self, *, cache_dir: Path | None = None, **dsn_options: object) -> None:
        """What the registry passes (engines.make_engine): every engine takes
        cache_dir; one that accepts_dsn also dsn= and allow_server_changes=."""

    # lifecycle ------------------------------------------------------------
    def start(self) -> None:
        """Provision (if embedded) and start; idempotent."""

    def stop(self) -> None:
        """Stop and restore anything changed on a server that is not ours; idempotent."""

    # capabilities ---------------------------------------------------------
    def knob(self, name: str) -> KnobInfo:
        """Resolve a generic or native knob name, or raise KnobError saying what exists."""

    def check_settings(self, settings: dict[str, object], *, partial: bool = False) -> dict[str, object]:
        """Validate a whole setting (knob -> value) before anything runs; canonical values.
        `partial`: other swept knobs are not in `settings` yet (one value checked
        on its own), so rules that join several knobs wait for the whole setting."""

    def change_cost(self, apply_class: ApplyClass, knobs: list[str]) -> float:
        """Seconds a change of these knobs costs (for the plan's estimate)."""

    @classmethod
    def installed_version(cls) -> str | None:
        """The version installed on this host, without starting anything (None:
        not installed, or the engine cannot tell): a fleet worker's facts."""

    def dialect(self, workload: str) -> object:
        """The engine's implementation of what `workload` needs: an object of the
        workload's Dialect protocol, which the workload casts it to; KnobError
        if the engine has none."""

    @classmethod
    def native_name(cls, knob: str) -> str:
        """The engine's own name of a knob ('multiblock_read' -> 'io_combine_limit'),
        usable without an instance."""

    # settings -------------------------------------------------------------
    def apply(self, settings: dict[str, object]) -> dict[str, str]:
        """Make `settings` current (restarting or reinitialising as needed) and return
        what the engine reports for each knob afterwards (SHOW, PRAGMA, @@var)."""

    def info(self) -> EngineInfo:
        """Version, mode, data directory and the full parameter set."""

    def version_tuple(self) -> tuple[int, ...]:
        """The server's version as numbers, (15, 20) or (10, 11, 19): what recipes adapt to."""

    # sessions -------------------------------------------------------------
    def connect(self, *, session: bool = True) -> Session:
        """A new session; with `session`, the session-class knobs applied."""

    def query(self, sql: str, params: Sequence[object] | None = None) -> list[tuple[Any, ...]]:
        """One statement on a short-lived session without session knobs; its rows."""

    # data and cache -------------------------------------------------------
    def data_dir(self) -> str | None:
        """Where the data files live, when they are on this host (None for a remote server)."""

    def server_pids(self) -> list[int]:
        """Server processes on this host whose /proc blocklab may read ([] if none)."""

    def block_size(self) -> int:
        """The engine's current page size in bytes."""

    def relation_bytes(self, relation: str) -> int:
        """Bytes of one table or index as the engine counts its pages."""

    def table_fingerprint(self, table: str) -> str | None:
        """The fingerprint a workload stored with its table when it built it (None: no table)."""

    def needs_rebuild(self, table: str) -> bool:
        """True when the table exists but was made under settings that the current
        ones change (a page format, a checksum algorithm): rebuild before measuring."""

    def direct_io_active(self) -> bool:
        """Does the engine read its data files with direct I/O now? (Its setting: the
        runner proves it from the kernel's side, see claims.py.)"""

    def relation_files(self, relation: str) -> list[Path]:
        """The files holding a table or index, on this host ([] for a server elsewhere)."""

    def cached_bytes(self, relations: Iterable[str]) -> float | None:
        """Bytes of these relations in the engine's own cache now (None: it cannot tell)."""

    def check_applied(self, settings: dict[str, object]) -> list[str]:
        """Read each knob back in a new measuring session, in the engine's own units
        (effective caps included), and say where it differs from `settings` (the
        canonical values asked); [] when every knob took."""

    def cold_cache_problem(self) -> str | None:
        """Why a cold cache cannot be made and proven here (None: it can)."""

    def evict(self, relations: Iterable[str]) -> dict[str, object]:
        """Empty the engine cache and the OS page cache for these relations.
        Returns what was done, e.g. {"engine_evicted": n, "os_dropped": True}."""

    def io_counters(self, session: Session | None = None) -> dict[str, float]:
        """Cumulative physical I/O counters (IO_KEYS and the engine's own). With the
        measuring session, its own pending statistics are counted too."""

    # faults ---------------------------------------------------------------
    def health(self) -> str | None:
        """None when the engine answers; otherwise why not ("the postmaster (pid 123)
        is gone"): the runner asks after a failed cell, to tell an engine's death
        from a failing setting."""

    def recover(self) -> None:
        """Bring a dead engine back with the current settings (its own crash
        recovery; a server by DSN: wait, bounded, until it answers again);
        EngineError when it cannot."""

    def log_tail(self, lines: int = 15) -> str:
        """The engine's log file and its last lines, for a message ('' if it has none)."""

    def privileges(self) -> list[tuple[str, str]]:
        """What blocklab may do here, as (what, yes/no and why): for `blocklab doctor`."""

    def created_objects(self) -> list[str]:
        """What blocklab made on this server (tables, procedures, its database), to list
        after a run on someone else's server and to remove with `blocklab clean`."""

    def drop_created(self) -> list[str]:
        """Remove what created_objects() lists; what was removed."""

    def owed_restore(self) -> dict[str, object]:
        """What stop() still has to put back on a server given by DSN: {"engine",
        "dsn" (without its password), "server", "settings": {native: original}};
        {} when nothing is owed. The runner keeps it in the run directory until
        it is done, so `blocklab restore DIR` can finish it later."""

    def restore_owed(self, settings: dict[str, object]) -> list[str]:
        """Put these original values back (from owed_restore()["settings"]); what was done."""

    def io_window(
        self, session: Session | None = None, *, settle: bool = False, sessions: Sequence[Session] = ()
    ) -> IoWindow:
        """The engine's I/O over a window. `settle`: wait until background processes
        have published what they did during it (a multi-session point); `sessions`:
        the point's sessions, whose pending statistics are published at the end."""

    def config_lines(self, settings: dict[str, object]) -> list[str]:
        """Canonical settings as the lines a person pastes into this engine's own
        configuration (ALTER SYSTEM for PostgreSQL, my.cnf for MariaDB, db_bench
        flags for RocksDB): what `blocklab tune` prints for its winner."""

    def cell_notes(self) -> dict[str, object]:
        """What the engine keeps about the cell it just ran, for the result row's notes
        (an engine driven by a tool: the exact commands, to re-run them by hand); {} for
        most engines. Reset by apply()."""


def wait_until_answers(check: Callable[[], str | None], what: str, timeout_s: float) -> None:
    """Poll `check` (None: it answers) every half second, at most `timeout_s`;
    EngineError naming `what` and the last reason when it never does."""
    import time

    deadline = time.monotonic() + timeout_s
    while (why := check()) is not None:
        if time.monotonic() > deadline:
            raise EngineError(f"{what} did not answer again within {timeout_s:.0f} s: {why}")
        time.sleep(0.5)


def process_alive(pid: int) -> bool:
    """Is the process running? A zombie (killed, not yet reaped: in a container
    whose init does not reap) is not: it answers kill(pid, 0) but runs nothing."""
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process with that pid: alive
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state not in ("Z", "X")


def table_is_current(engine: Engine, table: str, fingerprint: str) -> bool:
    """Is the table there, built for this fingerprint, under the current settings?"""
    return engine.table_fingerprint(table) == fingerprint and not engine.needs_rebuild(table)


class EngineBase:
    """What most engines share: dialects looked up in the class's table, the
    plan's cost of a change from `change_seconds`. An engine need not inherit
    it; it must only satisfy `Engine`."""

    name: ClassVar[str] = ""
    dialects: ClassVar[Mapping[str, type]] = {}
    change_seconds: ClassVar[Mapping[ApplyClass, float]] = {}
    capabilities: ClassVar[Capabilities] = Capabilities()
    listed: ClassVar[bool] = True  # False: an engine only tests use, left out of `available()`

    @classmethod
    def installed_version(cls) -> str | None:
        return None  # an engine that cannot tell without starting

    def dialect(self, workload: str) -> object:
        made: dict[str, object] = self.__dict__.setdefault("_dialects_made", {})
        if workload not in made:
            cls = self.dialects.get(workload)
            if cls is None:
                why = self.capabilities.why_not(workload)
                raise KnobError(
                    f"engine {self.name} cannot run {workload!r}: "
                    + (why if why else f"it has no dialect for it; it has: {', '.join(sorted(self.dialects)) or 'none'}")
                )
            made[workload] = cls(self)
        return made[workload]

    def change_cost(self, apply_class: ApplyClass, knobs: list[str]) -> float:
        return float(self.change_seconds.get(apply_class, 0.0))

    def log_tail(self, lines: int = 15) -> str:
        return ""

    def privileges(self) -> list[tuple[str, str]]:
        return [("everything", "yes: blocklab's own engine")]

    def created_objects(self) -> list[str]:
        return []  # an engine of blocklab's own: everything in it is blocklab's

    def drop_created(self) -> list[str]:
        return []

    def owed_restore(self) -> dict[str, object]:
        return {}  # an engine of blocklab's own owes nobody a restore

    def restore_owed(self, settings: dict[str, object]) -> list[str]:
        if settings:
            raise EngineError(f"engine {self.name} changes no server of anyone's: nothing of {sorted(settings)} to restore")
        return []
    def cell_notes(self) -> dict[str, object]:
        return {}  # a server's statements are the workload's own: nothing to add

    def config_lines(self, settings: dict[str, object]) -> list[str]:
        """An engine without a configuration syntax of its own: one `name = value` each."""
        return [f"{self.native_name(k)} = {'on' if v is True else 'off' if v is False else v}" for k, v in settings.items()]

    @classmethod
    def native_name(cls, knob: str) -> str:
        prefix = str(getattr(cls, "native_prefix", ""))
        return knob[len(prefix):] if prefix and knob.startswith(prefix) else knob


# ---------------------------------------------------------------------- CPU profiles
@dataclass(frozen=True)
class ProfileTargets:
    """The processes whose stacks a CPU profile samples (probes/cpu_profile.py) and
    the binary whose functions `--trace-function` probes, as the engine declares them.

    `pids` are attached with `perf record -p` (every thread of each; children they
    fork during the window are followed). `what` says in words whose they are, for
    the report. `binary` is the file holding the engine's own code (an executable
    or a shared library), None where the engine has nothing to trace."""

    pids: tuple[int, ...]
    what: str
    binary: str | None = None


class CpuProfileDialect(Protocol):
    """What an engine declares to be profiled (its `cpu_profile` dialect): a
    capability, like a workload's dialect. An engine without one is refused
    `--cpu-profile` and `--trace-function` before anything runs."""

    def profile_targets(self) -> ProfileTargets:
        """The engine's own processes now (the engine started)."""

    def trace_binary(self) -> str | None:
        """The binary whose functions can be traced with uprobes (known before start)."""
