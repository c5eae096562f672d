"""Workload `sql`: the user's own statements, in pgbench's script language (issue 27).

    [workload]
    kind = "sql"
    script = ["report.sql"]            # or ["tpcb.sql@9", "select.sql@1"]: pgbench's -f FILE@WEIGHT
    setup = "schema.sql"               # optional: the data set's DDL ...
    load = "load.sql"                  # ... and its load, :rows = dataset.rows
    sessions = 4                       # each its own connection (a process while there are cores for it)
    duration_s = 10                    # or transactions = N per session (pgbench -t)
    variables = { scale = 1 }          # pgbench's -D NAME=VALUE
    protocol = "simple"                # or "prepared": pgbench's -M (default: the engine's own)

Each session runs transactions until the time is up: a script chosen by weight,
its `\\set` evaluated in Python, its statements sent to the engine with the
`:name`s as bound parameters, or on PostgreSQL with `protocol = "simple"` written
into the statement as SQL literals (workloads/pgscript.py parses the files). A
transaction is one run of a script, as pgbench counts it; the timed loop is
workloads/sql_run.py.

What differs between engines is the `sql` dialect (engines/<name>/sqlscript.py):
the engine's placeholders, its sessions (read only, the schema looked in first),
how the data set is built and cached, and the check run. The check run runs one
transaction of every script before anything is timed, in a READ ONLY transaction
rolled back at the end: the engine's own errors (a syntax error, a missing
table) come out there, mapped to the file, line and column; the statements that
would write are found by the engine refusing them, and which tables they write
from the engine's own plan of them; the relations the scripts read from its
statistics views' per-transaction counters and its catalog (their indexes). A
cold cell evicts those relations.

On someone else's server (a DSN): no setup, the user's tables as they are; every
transaction is READ ONLY (the engine keeps it so: see its sqlscript.py; statements
that would undo it, or the search path, are refused here before anything runs,
SESSION_ESCAPE); a script that writes is refused before anything runs
unless `allow_writes` (--allow-writes), and then it writes copies of the tables
it names, made in a schema of blocklab's own that the sessions look in first
(`blocklab clean --dsn` removes it) and refilled from the originals before every
cell, so that every cell starts from the same rows; the check run is repeated on the copies and
every write must land there.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Literal, NoReturn, Protocol, cast

from pydantic import Field, ValidationInfo, field_validator, model_validator

from ..engines.base import Engine, Session, SessionProfiler
from ..probes.io import RunProbe
from ..spec import DatasetSpec, SpecError
from .base import Options
from .pgscript import PREDEFINED, Runner, Script, SetCommand, Statement, after_comments, load_script
from .pgscript_expr import ScriptError, Value
from .sql_procs import run_processes
from .sql_run import Flag, Step, Tally, TallyBytes, compile_steps, run_session, tally_bytes, tally_from_bytes, tally_metrics
from .sql_run import percentiles as percentiles
from .together import run_together


# ---------------------------------------------------------------------- what the engine provides
@dataclass(frozen=True)
class CheckStatement:
    """One statement of the check run: the driver's text, its parameters, its index in the scripts."""

    sql: str
    params: list[Value]
    index: int
    transaction: str | None


@dataclass
class ScriptFacts:
    """What the check run learnt from the engine."""

    failed: tuple[int, str, int | None] | None = None  # (statement index, the engine's message, offset in its text)
    writes: dict[int, list[str]] = field(default_factory=dict)  # statement index -> tables it writes (schema.table)
    unknown_writes: dict[int, str] = field(default_factory=dict)  # statement index -> why its tables are unknown (DDL)
    uncopyable: dict[int, str] = field(default_factory=dict)  # statement index -> why its writes cannot go to a copy
    relations: list[str] = field(default_factory=list)  # tables read or written and their indexes (schema.name)


@dataclass(frozen=True)
class SessionAccess:
    read_only: bool
    schemas: tuple[str, ...]  # looked in first, in this order (the data set's, blocklab's copies)


Bound = Callable[[dict[str, Value]], int]  # a statement bound to a session: run(env) -> rows
PROTOCOLS = {
    "prepared": "each session prepares each statement once and sends only its values (pgbench -M prepared)",
    "simple": "each statement sent whole, its values written into its text as SQL literals (pgbench -M simple, its default)",
}


def bind_by_execute(dialect: SqlDialect, session: Session, statements: Sequence[Statement]) -> list[Bound]:
    """bind() through execute(): for engines whose driver has one way of sending a statement."""
    execute = dialect.execute

    def make(text: str, names: tuple[str, ...]) -> Bound:
        return lambda env: execute(session, text, [env[n] for n in names])

    return [make(dialect.driver_sql(st.chunks), st.names) for st in statements]


class SqlDialect(Protocol):
    """What running the user's scripts needs from an engine."""

    # May a session opened here (sql_session) run its statements in a forked child while the parent keeps it,
    # cancels it (cancel() from the parent) and closes it once the child has ended? (False: threads)
    fork_sessions: bool

    def placeholder(self, n: int) -> str:
        """The n-th parameter (from 1) as the server sees it ($1, ?): error positions are in that text."""

    def driver_sql(self, chunks: Sequence[str]) -> str:
        """The statement's text as the driver takes it, a parameter between each two chunks."""

    def can_copy_tables(self) -> bool:
        """Is this a server of someone else's, whose tables a writing script must not touch?"""

    def dataset_schema(self, fingerprint: str) -> str | None:
        """Where the data set of this fingerprint lives (None: the engine's default place)."""

    def dataset_built(self, fingerprint: str) -> bool:
        """Is the data set of this fingerprint there, complete?"""

    def build_dataset(self, fingerprint: str, statements: list[CheckStatement]) -> None:
        """Run the setup and load statements (in their order), then store the fingerprint last."""

    def sql_session(self, access: SessionAccess) -> Session:
        """One session of the run (session knobs applied), read only or not, schemas looked in first."""

    def execute(self, session: Session, sql: str, params: Sequence[Value]) -> int:
        """One statement; the rows it returned or changed."""

    def protocols(self) -> tuple[str, ...]:
        """How this engine can send a statement's values (PROTOCOLS), its default first."""

    def bind(self, session: Session, statements: Sequence[Statement], protocol: str) -> list[Bound]:
        """Each statement as one call run(env) -> the rows it returned or changed, on this session,
        its variables' values taken from env: the timed loop's one call per statement."""

    def statement_error(self, err: BaseException) -> tuple[str, int | None] | None:
        """The engine's own error as (its message, 0-based offset in the server's text); None: not the engine's."""

    def check_run(self, statements: list[CheckStatement], access: SessionAccess) -> ScriptFacts:
        """Run the statements once in a READ ONLY transaction, rolled back: see the module's doc."""

    def copy_tables(self, tables: list[str]) -> str:
        """Copies of these tables (rows, indexes) in blocklab's own schema, with the originals' rows (made at
        the first cell, emptied and refilled at each later one: every cell starts from the same contents); that schema."""

    def cold_problem(self) -> str | None:
        """Why the user's relations cannot be evicted here (None: they can, as the built-in data sets)."""

    def profiler(self, sample_ms: float, sample_nice: int | None) -> SessionProfiler | None:
        """The engine's session profiler (None where it has none)."""


# ---------------------------------------------------------------------- options
class SqlOptions(Options):
    script: list[str] = Field(description="the pgbench scripts, FILE or FILE@WEIGHT (paths relative to the experiment file)")
    setup: str | None = Field(default=None, description="DDL of the data set, run once per machine (its content is the cache key)")
    load: str | None = Field(default=None, description="its load, run once after setup; :rows is dataset.rows")
    sessions: int = Field(default=1, ge=1, le=256, description="concurrent sessions (pgbench -c), each its own connection")
    duration_s: float | None = Field(default=None, gt=0, le=86_400, description="seconds each cell runs (pgbench -T); default 10")
    transactions: int | None = Field(default=None, ge=1, description="transactions per session instead of a duration (pgbench -t)")
    variables: dict[str, int | float] = Field(default_factory=dict, description="variables as pgbench -D NAME=VALUE (scale = 1 unless set)")
    allow_writes: bool = Field(default=False, description="on a DSN, let a writing script run, on copies of the tables it writes")
    protocol: Literal["prepared", "simple"] | None = Field(
        default=None, description="how values reach the server: prepared (PostgreSQL's and SQLite's default) or simple "
                                  "(PostgreSQL; MariaDB's only way): pgbench's -M")
    seed: int | None = Field(default=None, ge=0, description="seed of the scripts' random numbers (default: drawn, recorded)")
    sample_ms: float = Field(default=10.0, gt=0, le=1000, description="the session profiler's interval")
    sample: bool = Field(default=True, description="run the engine's session profiler (the time profile)")

    @field_validator("script", mode="before")
    @classmethod
    def _one_or_more(cls, value: object) -> object:
        return [value] if isinstance(value, str) else value

    @field_validator("script", "setup", "load")
    @classmethod
    def _relative_to_experiment(cls, value: list[str] | str | None, info: ValidationInfo) -> list[str] | str | None:
        # relative to the experiment file's directory only (never the current one, whatever it holds);
        # with no file (--script, a recipe) relative to the current directory; kept absolute, so that
        # a run resumed from elsewhere reads the same files
        base = Path((info.context or {}).get("base_dir") or ".")
        if value is None:
            return value
        def resolve(text: str) -> str:
            name, sep, weight = text.rpartition("@") if "@" in text and "/" not in text.rpartition("@")[2] else (text, "", "")
            return str((base / name).absolute()) + (sep + weight)
        return [resolve(v) for v in value] if isinstance(value, list) else resolve(value)

    @field_validator("script")
    @classmethod
    def _not_empty(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError("give at least one script file")
        return value

    @model_validator(mode="after")
    def _duration_or_count(self) -> SqlOptions:
        if self.duration_s is not None and self.transactions is not None:
            raise ValueError("give duration_s or transactions, not both")
        for name in self.variables:
            if name in ("client_id", "rows"):
                raise ValueError(f"variables.{name}: blocklab sets :{name} itself (client_id: the session's number, rows: dataset.rows)")
        return self


DEFAULT_DURATION_S = 10.0
# How the sessions run: "auto" (processes while there are no more sessions than cores, else threads),
# or "processes"/"threads" (benchmarks/sql_vs_pgbench.py compares the two; not a user's setting).
# Measured on 2 cores, synchronous_commit = off (BENCHMARKS.md): 2 sessions as processes ran 1.34x
# [1.23, 1.66] the transactions of 2 threads (threads wait for each other's interpreter lock); 4 as
# processes 0.94x [0.87, 1.18] of 4 threads (more processes than cores: no gain shown).
SESSIONS_AS = "auto"


def sessions_as_processes(sessions: int, dialect_can_fork: bool) -> bool:
    """Run the sessions as forked processes? (SESSIONS_AS, the dialect's fork_sessions, the cores)"""
    import os

    if not dialect_can_fork or SESSIONS_AS == "threads":
        return False
    return SESSIONS_AS == "processes" or sessions <= (os.cpu_count() or 1)
SESSION_ESCAPE = re.compile(  # what would undo a DSN session's READ ONLY or its search path (refused there)
    r"^(?:begin|start)\b.*\bread\s+write\b"  # BEGIN READ WRITE, START TRANSACTION READ WRITE
    r"|^set\b.*\btransaction\b.*\bread\s+write\b"  # SET [SESSION] TRANSACTION READ WRITE, SET SESSION CHARACTERISTICS ...
    r"|^(?:reset|discard)\s+all\b"  # back to the server's defaults
    r"|^(?:set|reset)\s+(?:session\s+|local\s+)?(?:role|session\s+authorization)\b"
    r"|\b(?:default_transaction_read_only|transaction_read_only|tx_read_only|search_path)\b",  # SET, RESET, set_config(...)
    re.IGNORECASE | re.DOTALL)


# ---------------------------------------------------------------------- the workload
class Sql:
    name: ClassVar[str] = "sql"
    default_metric: ClassVar[str] = "tps"
    default_goal: ClassVar[str] = "max"
    steady_series: ClassVar[str] = "device_mb_per_s"
    metrics: ClassVar[tuple[str, ...]] = (
        "tps", "statements_per_s", "transactions", "statements", "rows", "rows_per_s", "elapsed_s", "latency.mean_ms",
        "latency.p50_ms", "latency.p95_ms", "latency.p99_ms", "latency.max_ms")
    rows_option: ClassVar[str | None] = None  # --rows sizes dataset.rows: :rows of the setup and load
    work: ClassVar[tuple[str, str]] = ("transactions", "transaction")  # the metric counting its work, and its unit (CPU per unit)
    Dialect: ClassVar[type] = SqlDialect
    needs: ClassVar[str] = "the engine's placeholders and sessions, a check run of the scripts, the data set's build"
    Options = SqlOptions
    dialect_class: type = object

    def __init__(self, options: SqlOptions, dataset: DatasetSpec):
        self.options = options
        self.dataset = dataset
        self.series: dict[str, list[float]] = {}
        self.scripts = [load_script(s) for s in options.script]
        if sum(s.weight for s in self.scripts) == 0:
            raise ScriptError("workload sql: every script has weight 0; give one a weight above 0")
        self.setup = load_script(options.setup) if options.setup else None
        self.load = load_script(options.load) if options.load else None
        self.variables: dict[str, Value] = {"scale": 1, **options.variables, "rows": dataset.rows}
        known = set(PREDEFINED) | set(self.variables)
        for script in [*self.scripts, *(s for s in (self.setup, self.load) if s)]:
            script.check_names(known)
        self.seed = options.seed if options.seed is not None else random.SystemRandom().randrange(2**31)
        self.facts = ScriptFacts()
        self.access = SessionAccess(read_only=False, schemas=())
        self.protocol_used: str | None = None  # the option's, or the engine's default once protocol() chose it
        self.statements = [st for script in self.scripts for st in script.statements]
        self.owners = [s for s in self.scripts for _ in s.statements]  # each statement's script
        self.keys = [statement_key(i, s, st) for i, s in enumerate(self.scripts) for st in s.statements]

    # ------------------------------------------------------------------ data set
    def fingerprint(self) -> str:
        """The data set's cache key: the content of its setup and load, and the row count."""
        digest = hashlib.sha256()
        for part in (self.setup, self.load):
            digest.update((part.text if part else "").encode() + b"\0")
        digest.update(json.dumps(self.variables, sort_keys=True).encode())
        return json.dumps({"blocklab_dataset": "sql", "build": 1, "content": digest.hexdigest()[:16]})

    def check(self, engine: Engine) -> None:
        """Before anything runs: the check run (read only, rolled back) where the tables are
        there already (a server by DSN, a data set built before), so that a SQL error or a
        write refused on a DSN stops the run at once, exit 2. Changes nothing."""
        dialect = cast(SqlDialect, engine.dialect(self.name))
        self.protocol(dialect)
        if dialect.can_copy_tables() and (self.setup or self.load):
            raise SpecError("workload sql: setup and load are not run on a server given by --dsn: the scripts run on "
                            "its tables as they are; leave setup and load out")
        if (self.setup or self.load) and not dialect.dataset_built(self.fingerprint()):
            return  # checked once the first cell has built it
        self.prepare(engine, build=False)

    def prepare(self, engine: Engine, build: bool = True) -> None:
        dialect = cast(SqlDialect, engine.dialect(self.name))
        remote = dialect.can_copy_tables()
        if remote:
            self._refuse_session_changes()
        schemas: tuple[str, ...] = ()
        if self.setup or self.load:
            fp = self.fingerprint()
            if build and not dialect.dataset_built(fp):
                dialect.build_dataset(fp, self._build_statements(dialect))
            where = dialect.dataset_schema(fp)
            schemas = (where,) if where else ()
        access = SessionAccess(read_only=remote, schemas=schemas)
        facts = self._check(dialect, access)
        if (facts.writes or facts.unknown_writes) and remote:  # blocklab's own data set may be written
            self._refuse_writes(facts)  # unless allowed, and every write can be sent to a copy
            if not build:
                return  # the copies are made by the first cell, not while checking
            access = SessionAccess(read_only=False, schemas=(dialect.copy_tables(sorted({t for ts in facts.writes.values() for t in ts})), *schemas))
            facts = self._check(dialect, SessionAccess(read_only=True, schemas=access.schemas), writes_to=access.schemas[0])
        self.facts, self.access = facts, access

    def _build_statements(self, dialect: SqlDialect) -> list[CheckStatement]:
        runner = Runner([], self.variables, self.seed)
        out: list[CheckStatement] = []
        for script in (s for s in (self.setup, self.load) if s):
            for command in script.commands:
                if isinstance(command, SetCommand):
                    runner.env[command.name] = runner.evaluate(command.expr)
                elif isinstance(command, Statement):
                    out.append(CheckStatement(dialect.driver_sql(command.chunks), runner.params(command), -1, command.transaction))
        return out

    def _check(self, dialect: SqlDialect, access: SessionAccess, writes_to: str | None = None) -> ScriptFacts:
        """The check run: one transaction of every script, READ ONLY, rolled back."""
        runner = Runner(self.scripts, {**self.variables, "client_id": 0}, self.seed)
        statements: list[CheckStatement] = []
        index = 0
        for script in self.scripts:
            for command in script.commands:
                if isinstance(command, SetCommand):
                    runner.env[command.name] = runner.evaluate(command.expr)
                elif isinstance(command, Statement):
                    statements.append(CheckStatement(dialect.driver_sql(command.chunks), runner.params(command), index, command.transaction))
                    index += 1
        facts = dialect.check_run(statements, access)
        if facts.failed is not None:
            i, message, offset = facts.failed
            raise ScriptError(self.engine_error_text(dialect, i, message, offset))
        if writes_to is not None:
            for i, tables in facts.writes.items():
                stray = [t for t in tables if not t.startswith(writes_to + ".")]
                if stray:
                    raise ScriptError(f"{self.statements[i].where}: writes {', '.join(stray)}, not blocklab's copy in "
                                      f"{writes_to}: the copies are found through the search path, so name the table "
                                      "without its schema")
        return facts

    def _refuse_session_changes(self) -> None:
        """On someone's server the session's READ ONLY and where it looks for tables (the copies
        first) are blocklab's promise; a statement that could undo them is refused before anything runs."""
        for statement in self.statements:
            head = after_comments(statement.text)
            if SESSION_ESCAPE.search(head):
                raise ScriptError(f"{statement.where}: on a server given by --dsn a script may not change the session's "
                                  "READ ONLY, its transactions' read/write mode, its search_path or its role (SET/RESET/"
                                  "DISCARD, BEGIN/SET TRANSACTION READ WRITE, set_config of those): blocklab's promise "
                                  f"that your tables are not written rests on them (in: {statement.first_line})")

    def _refuse_writes(self, facts: ScriptFacts) -> None:
        """A script that writes on someone's server: refused unless allowed, and unless each of its
        writes can be sent to a copy of its table."""
        for i, why in facts.unknown_writes.items():
            raise ScriptError(f"{self.statements[i].where}: this statement changes the server ({why}) and blocklab cannot "
                              "make it work on a copy; on a server given by --dsn a script may only write rows of tables")
        if not self.options.allow_writes:
            first = min(facts.writes)
            tables = sorted({t for ts in facts.writes.values() for t in ts})
            raise ScriptError(f"{self.statements[first].where}: the script writes ({', '.join(tables)}) and this is a server "
                              "given by --dsn, where every transaction is READ ONLY; pass --allow-writes (workload.allow_writes "
                              "= true) to run it on copies of those tables, never on the originals")
        for i, why in facts.uncopyable.items():
            raise ScriptError(f"{self.statements[i].where}: --allow-writes cannot send this statement's writes to a copy: {why}")

    def engine_error_text(self, dialect: SqlDialect, index: int, message: str, offset: int | None) -> str:
        statement = self.statements[index]
        where = statement.source_where(offset, dialect.placeholder) if offset is not None else statement.where
        return f"{where}: {message} (in: {statement.first_line})"

    def relations(self) -> list[str]:
        return list(self.facts.relations)

    def own_relations_cold_problem(self, engine: Engine) -> str | None:
        """Why a cold cache cannot be made for the user's relations here (said before anything runs)."""
        return cast(SqlDialect, engine.dialect(self.name)).cold_problem()

    def report_record(self) -> dict[str, object]:
        """The scripts, their parameters and their statements' keys: kept with the run for its report."""
        return {
            "workload": self.name,
            "scripts": [{"file": s.path, "weight": s.weight, "text": s.text, "sha256": _digest(s)} for s in self.scripts],
            "setup": {"file": self.setup.path, "text": self.setup.text, "sha256": _digest(self.setup)} if self.setup else None,
            "load": {"file": self.load.path, "text": self.load.text, "sha256": _digest(self.load)} if self.load else None,
            "variables": self.variables,
            "sessions": self.options.sessions,
            "duration_s": self.duration_s if self.options.transactions is None else None,
            "transactions": self.options.transactions,
            "seed": self.seed,
            "protocol": self.protocol_used or self.options.protocol,  # what the sessions sent, not only what was asked
            "allow_writes": self.options.allow_writes,
            "statements": [{"key": k, "script": owner.path, "line": st.where.line, "text": st.first_line}
                           for k, owner, st in zip(self.keys, self.owners, self.statements)],
        }

    @property
    def duration_s(self) -> float:
        return self.options.duration_s or DEFAULT_DURATION_S

    # ------------------------------------------------------------------ timed run
    def run(self, engine: Engine) -> dict[str, float]:
        o = self.options
        dialect = cast(SqlDialect, engine.dialect(self.name))
        profiler = dialect.profiler(o.sample_ms, 19) if o.sample else None
        sessions: list[Session] = []
        self.series = {}
        try:
            for _ in range(o.sessions):
                sessions.append(dialect.sql_session(self.access))
            for session in sessions:
                if profiler is not None:
                    profiler.register(session)
            with (
                profiler if profiler is not None else nullcontext(),
                RunProbe(engine, settle=True, sessions=sessions, per_second=True) as probe,
            ):
                tallies = self._run_sessions(dialect, sessions, profiler)
            self.series = probe.host.series()
        finally:
            for session in sessions:
                session.close()
        metrics = self.tally_metrics(tallies)
        metrics.update(probe.host.deltas())
        metrics.update(probe.engine_metrics())
        data = float(sum(engine.relation_bytes(r) for r in self.relations()))
        metrics.update(probe.pattern(metrics["elapsed_s"], sequential=False, direct=engine.direct_io_active(),
                                     data_bytes=data, sessions=o.sessions))
        if profiler is not None:
            metrics.update(profiler.metrics("profile"))
        return metrics

    def _run_sessions(self, dialect: SqlDialect, sessions: list[Session], profiler: SessionProfiler | None) -> list[Tally]:
        offsets = [0]
        for script in self.scripts:
            offsets.append(offsets[-1] + len(script.statements))
        protocol = self.protocol(dialect)

        def fail(index: int, err: Exception) -> NoReturn:
            engine_error = dialect.statement_error(err)
            if engine_error is None:
                raise err
            raise ScriptError(self.engine_error_text(dialect, index, *engine_error)) from None

        def setup(i: int) -> tuple[list[list[Step]], Runner, Tally]:
            bound = dialect.bind(sessions[i], self.statements, protocol)
            plans = [compile_steps(script, offsets[k], bound) for k, script in enumerate(self.scripts)]
            runner = Runner(self.scripts, {**self.variables, "client_id": i}, self.seed * 1000 + i)
            return plans, runner, Tally(len(self.statements))

        if sessions_as_processes(len(sessions), dialect.fork_sessions):
            return self._run_processes(sessions, profiler, setup, fail)
        stop = [False]

        def one(i: int) -> Tally:
            session = sessions[i]
            plans, runner, tally = setup(i)
            t0 = profiler.begin(session) if profiler is not None else time.perf_counter()
            try:
                run_session(plans, runner, stop, t0 + self.duration_s, self.options.transactions, fail, tally)
            finally:
                tally.t0 = t0
                tally.t1 = profiler.end(session) if profiler is not None else time.perf_counter()
            return tally

        def cancel(i: int) -> None:
            stop[0] = True
            sessions[i].cancel()

        return run_together(len(sessions), one, "blocklab-sql", cancel)

    def _run_processes(self, sessions: list[Session], profiler: SessionProfiler | None,
                       setup: Callable[[int], tuple[list[list[Step]], Runner, Tally]],
                       fail: Callable[[int, Exception], NoReturn]) -> list[Tally]:
        """The sessions as processes (workloads/sql_procs.py): each child runs its session's loop
        and sends back its tally as bytes; the wait sampler's windows are opened and closed here."""
        def prepare(i: int, stop: Flag) -> Callable[[float], TallyBytes]:
            plans, runner, tally = setup(i)

            def go(t0: float) -> TallyBytes:
                tally.t0 = t0
                try:
                    run_session(plans, runner, stop, t0 + self.duration_s, self.options.transactions, fail, tally)
                finally:
                    tally.t1 = time.perf_counter()
                return tally_bytes(tally)

            return go

        def begin(i: int) -> float:
            return profiler.begin(sessions[i]) if profiler is not None else time.perf_counter()

        def end(i: int, result: TallyBytes) -> None:
            if profiler is not None:
                profiler.end(sessions[i], at=result[1])

        results = run_processes(len(sessions), prepare, begin, end, lambda i: sessions[i].cancel())
        return [tally_from_bytes(r, len(self.statements)) for r in results]

    def protocol(self, dialect: SqlDialect) -> str:
        """The protocol the sessions use: the option's, or the engine's default; one it cannot use is refused."""
        accepted = dialect.protocols()
        chosen = self.options.protocol or accepted[0]
        if chosen not in accepted:
            raise SpecError(f"workload.protocol = {chosen!r}: this engine sends statements only as "
                            f"{' or '.join(repr(p) for p in accepted)} ({'; '.join(f'{p}: {PROTOCOLS[p]}' for p in accepted)}); "
                            "leave protocol out or set one of those")
        self.protocol_used = chosen
        return chosen

    def tally_metrics(self, tallies: list[Tally]) -> dict[str, float]:
        return tally_metrics(tallies, self.keys, self.seed)

    def describe(self, m: dict[str, float]) -> str:
        text = (f"{m['tps']:,.1f} tps ({m['sessions']:.0f} sessions), {m['statements_per_s']:,.0f} statements/s, "
                f"latency p50 {m.get('latency.p50_ms', 0):.2f} ms, p95 {m.get('latency.p95_ms', 0):.2f} ms")
        total = m.get("profile.total.total_s")
        if total:
            prefix = "profile.total.wait."
            waits = sorted(((k[len(prefix):-2], v) for k, v in m.items() if k.startswith(prefix)), key=lambda kv: -kv[1])
            parts = [f"{name} {v / total:.0%}" for name, v in waits[:2]] + [f"CPU {m.get('profile.total.cpu_s', 0) / total:.0%}"]
            text += "; sessions' time: " + ", ".join(parts)
        return text

    def disk_bytes(self) -> float:
        return float(self.dataset.rows * 200) if (self.setup or self.load) else 0.0

    def estimate_seconds(self) -> float:
        if self.options.transactions is not None:
            return self.options.transactions / 500 + 1.0
        return self.duration_s + 1.5


WORKLOAD = Sql


# ---------------------------------------------------------------------- statements' names
def _digest(script: Script) -> str:
    return hashlib.sha256(script.text.encode()).hexdigest()


def statement_key(script_index: int, script: Script, statement: Statement) -> str:
    """A statement's name in the metrics: s<script>_l<line> (s1_l6: the first script's line 6)."""
    return f"s{script_index + 1}_l{statement.where.line}" + (f"_c{statement.where.column}" if _shares_line(script, statement) else "")


def _shares_line(script: Script, statement: Statement) -> bool:
    return sum(1 for s in script.statements if s.where.line == statement.where.line) > 1
