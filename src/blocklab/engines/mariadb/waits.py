"""Where the time goes on MariaDB/InnoDB (the server-wide counters are in counters.py),
and InnoDB's purge, waited for before each cell of a write workload.

A per-session time profile (`SessionWaitProfiler`), the MariaDB side of
   PostgreSQL's WaitSampler and in the same shape (SessionProfile,
   `profile.slowest.*` / `profile.total.*` metrics), so profile_view and the
   report show it unchanged. It is measured, not sampled: each session
   snapshots its own server thread's row of
   performance_schema.events_waits_summary_by_thread_by_event_name right
   before and right after its timed statements, in its own connection, and the
   profile is the difference:

   * TOTAL_TIME   the session's elapsed time, as the client measured it around
                  its statements (begin() .. end());
   * each wait    the summed TIMER_WAIT of one instrumented wait event of the
                  session's thread over that window: file I/O
                  (`File:innodb/innodb_data_file`), latches (`Mutex:...`,
                  `RWLock:...`, `SXLock:...`, `Cond:...`), metadata locks
                  (`MDL:...`) and `Idle:client`, the thread waiting for the
                  client's next statement (the round trips between the
                  statements of the window: idle time, not the server's work);
   * CPU          what is left of TOTAL_TIME after the waits, up to what the
                  kernel says the thread spent on a CPU or runnable waiting
                  for one (/proc/<mariadbd>/task/<tid>/schedstat, when the
                  server runs on this machine). Without /proc it is the whole
                  remainder (`profile.cpu_measured` = 0 says so);
   * UNACCOUNTED_TIME  TOTAL_TIME - waits - CPU: off-CPU time in no timed wait
                  (a wait performance_schema has no instrument for, such as
                  InnoDB's wait for a free page, which is a plain condition
                  variable in 10.11; also the socket). Negative only if timed
                  waits overlap (they are leaf events and should not).

   The handler-level events `wait/io/table/...` and `wait/lock/table/...` are
   left out: they time whole storage-engine calls, so they enclose the leaf
   waits above and CPU, and would count them twice.

   Latch waits are timed only when the `wait/synch/%` instruments are enabled;
   they are off by default (they cost a little on every latch). The profiler
   enables them (and the file, metadata-lock and idle instruments, and the
   thread-instrumentation consumers) for its lifetime and puts back exactly
   what it changed; on a server given by DSN it changes nothing without
   `allow_server_changes`, and `profile.synch_timed` = 0 says latch waits
   were not timed (their time is then in CPU or UNACCOUNTED_TIME).
   performance_schema off, or its tables not readable by a DSN user (errors
   1142/1146): no profile at all, `profile.available` = 0. A failure while
   enabling puts back what was already changed; instruments that could not be
   put back at the end are warned about (`profile.restore_failed` = 1).

       profiler = SessionWaitProfiler(engine)
       profiler.register(session)              # per session, before the profiler starts
       with profiler:
           t0 = profiler.begin(session); ...; t1 = profiler.end(session)   # in the session's thread
       profiler.metrics() -> {"profile.slowest.total_s": ..., "profile.total.wait.File:innodb/innodb_data_file_s": ...}
"""

from __future__ import annotations

import threading
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pymysql

from ...probes.profile import SessionProfile, flatten_profile, sum_profiles
from .counters import NOT_READABLE, PS_PER_S, read_global_status
from .session import MariadbSession

if TYPE_CHECKING:
    from pymysql.cursors import Cursor

    from ..base import Session
    from . import MariadbEngine


# Instruments the profile needs timed: leaf waits that never enclose one another
PROFILE_INSTRUMENTS = ("wait/io/file/%", "wait/synch/%", "wait/lock/metadata/%", "idle")
PROFILE_CONSUMERS = ("global_instrumentation", "thread_instrumentation")
# A session's waits under this share of its elapsed time are added up per class ("Mutex:other")
MINOR_SHARE = 0.001
# Events that time whole handler calls (they enclose leaf waits and CPU): never profile parts
ENCLOSING_PREFIXES = ("wait/io/table/", "wait/lock/table/")

_CLASS_LABELS = {
    "wait/io/file/": "File",
    "wait/io/socket/": "Socket",
    "wait/synch/mutex/": "Mutex",
    "wait/synch/rwlock/": "RWLock",
    "wait/synch/sxlock/": "SXLock",
    "wait/synch/cond/": "Cond",
    "wait/lock/metadata/": "MDL",
}


# ---------------------------------------------------------------------- InnoDB purge
PURGE_WAIT_S = 120  # the longest wait for InnoDB's purge before a cell (a busy server's purge may never finish)
# errors that mean "no wait here", not a broken connection: no privilege (SUPER/SYSTEM VARIABLES ADMIN),
# unknown variable (before 10.5.7), interrupted / max_statement_time exceeded
_PURGE_NOT_WAITED = (1227, 1193, 1317, 1969)


def wait_for_purge(cur: Cursor, timeout_s: float = PURGE_WAIT_S) -> bool:
    """Block until InnoDB has purged every committed transaction's undo
    (SET GLOBAL innodb_max_purge_lag_wait = 0: a wait, the variable keeps its
    value), at most `timeout_s` (max_statement_time for that statement).
    True when the history list was emptied; False when the wait was refused
    (a DSN user without the privilege) or timed out: MariaDB ends a wait cut
    short by max_statement_time without an error, so the history length and
    the elapsed time tell. A lost connection is raised."""
    t0 = time.perf_counter()
    try:
        cur.execute(f"SET STATEMENT max_statement_time = {float(timeout_s)} FOR SET GLOBAL innodb_max_purge_lag_wait = 0")
    except pymysql.err.OperationalError as err:
        if err.args and err.args[0] in _PURGE_NOT_WAITED:
            return False
        raise
    elapsed = time.perf_counter() - t0
    if elapsed < 0.9 * timeout_s:
        return True
    history = read_global_status(cur, ("Innodb_history_list_length",)).get("Innodb_history_list_length")
    return history == 0


# ---------------------------------------------------------------------- per-session profile
def wait_label(event_name: str) -> str | None:
    """A performance_schema wait event -> its profile name ('Class:component/name'),
    None for the enclosing handler events that are not profile parts."""
    if event_name.startswith(ENCLOSING_PREFIXES):
        return None
    if event_name == "idle":
        return "Idle:client"
    for prefix, label in _CLASS_LABELS.items():
        if event_name.startswith(prefix):
            return f"{label}:{event_name[len(prefix):]}"
    return "Other:" + event_name.removeprefix("wait/")


def split_remainder(elapsed_s: float, wait_s: float, on_cpu_s: float | None) -> tuple[float, float]:
    """(CPU, UNACCOUNTED_TIME) of one session: CPU is what the waits leave of the
    elapsed time, at most the measured on-CPU + run-queue time when there is one;
    UNACCOUNTED_TIME the rest, so waits + CPU + UNACCOUNTED_TIME = elapsed."""
    remainder = elapsed_s - wait_s
    cpu = max(0.0, remainder if on_cpu_s is None else min(remainder, on_cpu_s))
    return cpu, remainder - cpu


def _thread_schedstat(server_pid: int, tid: int) -> tuple[float, float] | None:
    """(on-CPU seconds, run-queue seconds) of one server thread so far, from /proc."""
    try:
        fields = Path(f"/proc/{server_pid}/task/{tid}/schedstat").read_text().split()
        return int(fields[0]) / 1e9, int(fields[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


@dataclass
class _Session:
    connection_id: int
    thread_id: int
    os_tid: int | None
    t0: float | None = None
    t1: float | None = None
    waits0: dict[str, float] = field(default_factory=dict)  # event -> picoseconds
    waits1: dict[str, float] = field(default_factory=dict)
    cpu0: tuple[float, float] | None = None
    cpu1: tuple[float, float] | None = None


class ProfilerUnavailable(RuntimeError):
    """performance_schema is off: no per-thread waits to read."""


def _own(session: Session) -> MariadbSession:
    """A session given to the profiler: always one of this engine's own."""
    assert isinstance(session, MariadbSession), session
    return session


class SessionWaitProfiler:
    """Per-session wait profiles from performance_schema (see the module docstring)."""

    def __init__(self, engine: MariadbEngine):
        self.engine = engine
        self.available = True
        self.synch_timed = False
        self._pending: list[MariadbSession] = []  # sessions registered before the profiler started
        self._sessions: dict[int, _Session] = {}  # by id(session)
        self._lock = threading.Lock()
        self._enabled_instruments: list[tuple[str, str, str]] = []  # (name, was enabled, was timed)
        self._enabled_consumers: list[str] = []
        pids = engine.server_pids()
        self._server_pid: int | None = pids[0] if pids else None
        self._snapshot_s: list[float] = []
        self.restore_failed = False  # the instruments it enabled could not be put back
        self.unavailable_reason = ""  # why performance_schema could not be used (DSN: no access)

    # -------------------------------------------------------------- set-up
    def _may_change_server(self) -> bool:
        return self.engine.mode == "embedded" or self.engine.allow_server_changes

    def __enter__(self) -> SessionWaitProfiler:
        """Check performance_schema and enable the profile's instruments. Any
        failure puts back what was changed before it is raised; a DSN user
        without access to performance_schema's tables (errors 1142/1146) gets
        no profile (`profile.available` = 0) instead of a failed cell."""
        try:
            with self.engine.sql_connect(session=False) as conn, conn.cursor() as cur:
                cur.execute("SELECT @@performance_schema")
                if not int(cur.fetchall()[0][0]):
                    self.available = False
                    return self
                if self._may_change_server():
                    self._enable(cur)
                self.synch_timed = self._all_timed(cur, "wait/synch/%")
            for session in self._pending:
                self._register_thread(session)
        except pymysql.err.MySQLError as err:
            self._restore()
            if self.engine.mode != "embedded" and err.args and err.args[0] in NOT_READABLE:
                self.available = False
                self.unavailable_reason = str(err)
                return self
            raise
        except BaseException:
            self._restore()
            raise
        return self

    def _enable(self, cur: Cursor) -> None:
        """Enable and time the profile's instruments and consumers that are off,
        remembering each one to put it back."""
        where = " OR ".join(["NAME LIKE %s"] * len(PROFILE_INSTRUMENTS))
        cur.execute(
            f"SELECT NAME, ENABLED, TIMED FROM performance_schema.setup_instruments "
            f"WHERE ({where}) AND (ENABLED <> 'YES' OR TIMED <> 'YES')",
            PROFILE_INSTRUMENTS,
        )
        found = [(str(n), str(e), str(t)) for n, e, t in cur.fetchall()]
        if found:
            self._enabled_instruments = found  # remembered before the change: a failure in it still restores
            cur.execute(
                f"UPDATE performance_schema.setup_instruments SET ENABLED = 'YES', TIMED = 'YES' WHERE {where}",
                PROFILE_INSTRUMENTS,
            )
        names = ", ".join(["%s"] * len(PROFILE_CONSUMERS))
        cur.execute(f"SELECT NAME FROM performance_schema.setup_consumers WHERE NAME IN ({names}) AND ENABLED <> 'YES'", PROFILE_CONSUMERS)
        consumers = [str(r[0]) for r in cur.fetchall()]
        if consumers:
            self._enabled_consumers = consumers
            cur.execute(f"UPDATE performance_schema.setup_consumers SET ENABLED = 'YES' WHERE NAME IN ({names})", PROFILE_CONSUMERS)

    @staticmethod
    def _all_timed(cur: Cursor, pattern: str) -> bool:
        cur.execute(
            "SELECT COUNT(*), SUM(ENABLED = 'YES' AND TIMED = 'YES') FROM performance_schema.setup_instruments WHERE NAME LIKE %s",
            (pattern,),
        )
        row = cur.fetchone()
        assert row is not None  # an aggregate answers one row
        total, timed = row
        return bool(total) and int(timed or 0) == int(total)

    def __exit__(self, *exc: object) -> None:
        self._restore()

    def _restore(self) -> None:
        """Put back the instruments and consumers this profiler changed, in a
        connection of its own. A failure does not hide the run (or an exception
        already on its way out): it is warned about (RuntimeWarning) and kept
        (`restore_failed`, metric `profile.restore_failed` = 1)."""
        if not (self._enabled_instruments or self._enabled_consumers):
            return
        try:
            with self.engine.sql_connect(session=False) as conn, conn.cursor() as cur:
                for name, enabled, timed in self._enabled_instruments:
                    cur.execute(
                        "UPDATE performance_schema.setup_instruments SET ENABLED = %s, TIMED = %s WHERE NAME = %s",
                        (enabled, timed, name),
                    )
                for name in self._enabled_consumers:
                    cur.execute("UPDATE performance_schema.setup_consumers SET ENABLED = 'NO' WHERE NAME = %s", (name,))
        except Exception as err:
            self.restore_failed = True
            warnings.warn(
                f"the time profile's performance_schema changes were not put back on {self.engine.name} "
                f"({len(self._enabled_instruments)} instruments enabled/timed, consumers {self._enabled_consumers}): {err}",
                RuntimeWarning,
                stacklevel=3,
            )
            return
        self._enabled_instruments, self._enabled_consumers = [], []

    def register(self, session: Session) -> None:
        """A session to profile (every session, before the profiler starts)."""
        self._pending.append(_own(session))

    def _register_thread(self, session: MariadbSession) -> None:
        """Find the session's server thread."""
        if not self.available:
            return
        with session.conn.cursor() as cur:
            cur.execute(
                "SELECT THREAD_ID, THREAD_OS_ID, PROCESSLIST_ID, INSTRUMENTED FROM performance_schema.threads "
                "WHERE PROCESSLIST_ID = CONNECTION_ID()"
            )
            row = cur.fetchone()
            if row is None:
                raise ProfilerUnavailable("performance_schema.threads has no row for this connection")
            thread_id, os_tid, connection_id, instrumented = row
            if instrumented != "YES" and self._may_change_server():
                cur.execute("UPDATE performance_schema.threads SET INSTRUMENTED = 'YES' WHERE THREAD_ID = %s", (thread_id,))
        with self._lock:
            self._sessions[id(session)] = _Session(int(connection_id), int(thread_id), int(os_tid) if os_tid else None)

    # -------------------------------------------------------------- the window (in the session's thread)
    def _thread_waits(self, conn: pymysql.connections.Connection[Cursor], thread_id: int) -> dict[str, float]:
        t = time.perf_counter()
        with conn.cursor() as cur:
            cur.execute(
                "SELECT EVENT_NAME, SUM_TIMER_WAIT FROM performance_schema.events_waits_summary_by_thread_by_event_name "
                "WHERE THREAD_ID = %s AND COUNT_STAR > 0",
                (thread_id,),
            )
            out = {str(name): float(ps or 0) for name, ps in cur.fetchall()}
        self._snapshot_s.append(time.perf_counter() - t)
        return out

    def _cpu(self, s: _Session) -> tuple[float, float] | None:
        if self._server_pid is None or s.os_tid is None:
            return None
        return _thread_schedstat(self._server_pid, s.os_tid)

    def begin(self, session: Session) -> float:
        """Snapshot the session's thread, then start its clock; returns t0 (perf_counter)."""
        s = self._sessions.get(id(session)) if self.available else None
        if s is None:
            return time.perf_counter()
        s.waits0 = self._thread_waits(_own(session).conn, s.thread_id)
        s.cpu0 = self._cpu(s)
        s.t0 = time.perf_counter()
        return s.t0

    def end(self, session: Session, at: float | None = None) -> float:
        """Stop the session's clock (or take `at` as its stop), then snapshot its thread; returns t1 (perf_counter)."""
        t1 = time.perf_counter() if at is None else at
        s = self._sessions.get(id(session)) if self.available else None
        if s is None:
            return t1
        s.t1 = t1
        s.cpu1 = self._cpu(s)
        s.waits1 = self._thread_waits(_own(session).conn, s.thread_id)
        return t1

    # -------------------------------------------------------------- results
    def session_profiles(self) -> list[SessionProfile]:
        """One SessionProfile per session that ran its window (keyed by connection id)."""
        return [self._profile(s) for s in self._sessions.values() if s.t0 is not None and s.t1 is not None]

    def _profile(self, s: _Session) -> SessionProfile:
        assert s.t0 is not None and s.t1 is not None
        p = SessionProfile(pid=s.connection_id, elapsed_s=s.t1 - s.t0)
        for event, ps in s.waits1.items():
            label = wait_label(event)
            seconds = (ps - s.waits0.get(event, 0.0)) / PS_PER_S
            if label is None or seconds <= 0:
                continue
            if seconds < MINOR_SHARE * p.elapsed_s:  # dozens of latches held for nanoseconds: one line per class
                label = label.split(":", 1)[0] + ":other"
            p.waits[label] = p.waits.get(label, 0.0) + seconds
        on_cpu = None
        if s.cpu0 is not None and s.cpu1 is not None:
            p.cpu_measured_s = s.cpu1[0] - s.cpu0[0]
            p.runqueue_s = s.cpu1[1] - s.cpu0[1]
            p.cpu_source = "schedstat"
            on_cpu = p.cpu_measured_s + p.runqueue_s
        p.cpu_s, _ = split_remainder(p.elapsed_s, p.wait_s, on_cpu)  # unaccounted_s is derived from it
        return p

    def metrics(self, prefix: str = "profile") -> dict[str, float]:
        """`<prefix>.slowest.*` and `<prefix>.total.*` as probes/waits.py's
        flatten_profile writes them, plus <prefix>.available, .measured (1: not
        sampled, for views that describe the method), .sessions,
        .synch_timed (latch waits timed), .cpu_measured (CPU bounded by
        schedstat) and .snapshot_ms (mean cost of one per-thread read, outside
        the sessions' windows)."""
        if not self.available:
            return {f"{prefix}.available": 0.0}
        profiles = self.session_profiles()
        out = {
            f"{prefix}.available": 1.0,
            f"{prefix}.measured": 1.0,  # from performance_schema timers, not sampled (views may say so)
            f"{prefix}.sessions": float(len(profiles)),
            f"{prefix}.synch_timed": 1.0 if self.synch_timed else 0.0,
            f"{prefix}.cpu_measured": 1.0 if profiles and all(p.cpu_measured_s is not None for p in profiles) else 0.0,
        }
        if self.restore_failed:
            out[f"{prefix}.restore_failed"] = 1.0
        if self._snapshot_s:
            out[f"{prefix}.snapshot_ms"] = 1000 * sum(self._snapshot_s) / len(self._snapshot_s)
        if profiles:
            slowest = max(profiles, key=lambda p: p.elapsed_s)
            out.update(flatten_profile(slowest, f"{prefix}.slowest"))
            out.update(flatten_profile(sum_profiles(profiles), f"{prefix}.total"))
        return out


__all__ = ["PURGE_WAIT_S", "ProfilerUnavailable", "SessionWaitProfiler", "split_remainder", "wait_for_purge", "wait_label"]
