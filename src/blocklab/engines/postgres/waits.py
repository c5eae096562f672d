"""Where the time goes: an ASH-like wait sampler for blocklab's own sessions.

A thread with a connection of its own reads pg_stat_activity every `interval`
seconds (10 ms by default) for the backend pids it was given. Each sample puts
the time since the previous sample (the real gap, not the nominal interval) on
what the session was doing at that moment: its `wait_event_type:wait_event`
(e.g. `IO:DataFileRead`, `LWLock:BufferContent`, `Lock:transactionid`), or CPU
when it was active with no wait event.

    with WaitSampler(engine, pids) as sampler:
        sampler.begin(pid); run the statement; sampler.end(pid)   # per session
    profile = sampler.profile()
    profile.sessions[pid].rows()   -> [("TOTAL_TIME", 12.3), ("IO:DataFileWrite", 8.1), ...]

The profile of one session, in the seed's terms (TIMESOURCE / SECONDS):

* TOTAL_TIME   the session's elapsed time: from begin(pid) to end(pid), or the
               sampler's whole life when they are not called;
* each wait    sampled seconds in that wait event;
* CPU          sampled seconds active with no wait event (ASH's "ON CPU": on a
               CPU, or runnable and waiting for one);
* UNACCOUNTED_TIME  elapsed - sampled: what the sampler did not see (the
               window's edges, samples missed while the machine was busy).

The parts add up to TOTAL_TIME by construction; UNACCOUNTED_TIME says how well
the sampler kept up. Measured, not sampled, beside it: the backend's on-CPU
seconds over the window (`cpu_measured_s`, from /proc/<pid>/schedstat in
nanoseconds, or utime+stime of /proc/<pid>/stat, also kept as `cpu_stat_s`)
and its run-queue seconds (`runqueue_s`, schedstat: runnable, not running).
With more busy sessions than cores, sampled CPU = measured CPU + run queue
(roughly: a wait event's system call burns CPU too, and a session woken from a
wait queues for a CPU before it clears its wait event).

The sampler's own cost is a round trip per tick (~0.35 ms of CPU on a small
VM, split between its thread and its backend): ~2% of a 2-core machine at the
default 10 ms. Both run at nice 19 by default so that on a saturated machine
they yield to the sessions they measure; `profile.sampler_cpu_s` records the
cost of every measurement, and benchmarks/overhead.py measures its effect on
throughput. /proc and nice are used only when the server runs on this
machine (embedded, or every pid is a local postgres process).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...probes.os_stats import process_cpu_seconds
from ...probes.profile import CPU, SessionProfile, flatten_profile, sum_profiles

if TYPE_CHECKING:
    from psycopg import Connection
    from psycopg.pq.abc import PGconn

    from ..base import Session
    from . import PostgresEngine

# pg_stat_get_activity() directly: the pg_stat_activity view joins pg_database
# and pg_authid for names we do not need, and we only want our own pids. One
# read gives a consistent (type, event) pair. Run as a prepared statement on
# the raw libpq connection: a tick costs ~0.15 ms of Python and ~0.2 ms of
# the sampler's backend on this kind of machine, mostly the round trip itself.
_SAMPLE_SQL = (
    b"SELECT pid, state, wait_event_type, wait_event "
    b"FROM pg_stat_get_activity(NULL) WHERE pid = ANY($1::int[])"
)
_STATEMENT = b"blocklab_wait_sample"


# ---------------------------------------------------------------------- /proc
def _is_local_postgres(pid: int) -> bool:
    """Is `pid` a PostgreSQL process on this machine? (A server given by DSN
    may be remote: its pids then mean nothing here, or someone else.)"""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() in ("postgres", "postmaster")
    except OSError:
        return False


def _proc_cpu(pid: int) -> tuple[float | None, float | None, str]:
    """(on-CPU seconds, run-queue seconds, source) of one process so far;
    (None, None, "") when /proc does not have it (a remote server)."""
    if pid <= 0:
        return None, None, ""
    try:
        fields = Path(f"/proc/{pid}/schedstat").read_text().split()
        return int(fields[0]) / 1e9, int(fields[1]) / 1e9, "schedstat"
    except (OSError, ValueError, IndexError):
        pass
    if Path(f"/proc/{pid}/stat").exists():
        return process_cpu_seconds([pid]), None, "stat"
    return None, None, ""


def _renice(pid_or_tid: int, nice: int) -> None:
    import os

    try:
        os.setpriority(os.PRIO_PROCESS, pid_or_tid, nice)
    except OSError:
        pass


@dataclass
class _Window:
    pid: int
    t0: float
    cpu0: float | None
    rq0: float | None
    stat0: float | None
    source: str
    t1: float | None = None
    cpu1: float | None = None
    rq1: float | None = None
    stat1: float | None = None


def _open_window(pid: int, t: float, local: bool = True) -> _Window:
    if not local:
        return _Window(pid, t, None, None, None, "")
    cpu, rq, source = _proc_cpu(pid)
    stat = process_cpu_seconds([pid]) if source else None
    return _Window(pid, t, cpu, rq, stat, source)


def _close_window(w: _Window, t: float) -> None:
    if w.t1 is not None:
        return
    if not w.source:
        w.t1 = t
        return
    cpu, rq, _ = _proc_cpu(w.pid)
    w.t1 = t
    w.cpu1, w.rq1 = cpu, rq
    w.stat1 = process_cpu_seconds([w.pid]) if w.source else None


# ---------------------------------------------------------------------- profiles
@dataclass
class Profile:
    """All sampled sessions of one measurement."""

    sessions: dict[int, SessionProfile]
    interval_s: float
    ticks: int  # samples taken (pg_stat_activity reads)
    sampler_s: float  # the sampler's whole life
    mean_gap_s: float  # mean time between samples (the real interval)
    max_gap_s: float
    sampler_client_cpu_s: float = 0.0  # the sampling thread's CPU (Python + libpq)
    sampler_server_cpu_s: float | None = None  # its backend's CPU (reading pg_stat_activity)

    @property
    def slowest(self) -> SessionProfile:
        return max(self.sessions.values(), key=lambda p: p.elapsed_s)

    @property
    def total(self) -> SessionProfile:
        return sum_profiles(self.sessions.values())

    def metrics(self, prefix: str = "profile") -> dict[str, float]:
        """Flat numbers for a result row: `profile.slowest.*` and `profile.total.*`
        (see flatten_profile), plus profile.sessions, profile.ticks,
        profile.interval_ms (the real mean interval), profile.max_gap_ms and
        profile.sampler_cpu_s (the sampler's own cost: its thread + its backend)."""
        out: dict[str, float] = {
            f"{prefix}.sessions": float(len(self.sessions)),
            f"{prefix}.ticks": float(self.ticks),
            f"{prefix}.interval_ms": self.mean_gap_s * 1000,
            f"{prefix}.max_gap_ms": self.max_gap_s * 1000,
            f"{prefix}.sampler_cpu_s": self.sampler_client_cpu_s + (self.sampler_server_cpu_s or 0.0),
        }
        if not self.sessions:
            return out
        for name, p in (("slowest", self.slowest), ("total", self.total)):
            out.update(flatten_profile(p, f"{prefix}.{name}"))
        return out


# ---------------------------------------------------------------------- the sampler
def _text(value: bytes | None) -> str | None:
    return None if value is None else value.decode()


def _classified(rows: list[tuple[bytes | None, ...]]) -> dict[int, str]:
    out = {}
    for pid, state, wait_type, wait_event in rows:
        source = classify(_text(state), _text(wait_type), _text(wait_event))
        if source is not None and pid is not None:
            out[int(pid)] = source
    return out


def classify(state: str | None, wait_type: str | None, wait_event: str | None) -> str | None:
    """One pg_stat_activity row -> a time source (None: nothing to count)."""
    if wait_type:
        return f"{wait_type}:{wait_event}"
    if state in ("active", "fastpath function call"):
        return CPU
    if state is None:
        return None
    return f"Idle:{state}"


class WaitSampler:
    """Sample pg_stat_activity for `pids` every `interval` seconds in a thread.

    `engine` is a PostgresEngine or a conninfo string. begin(pid)/end(pid) mark one session's own window (its
    statement); sessions never marked are profiled over the sampler's life."""

    def __init__(
        self, engine: PostgresEngine | str, pids: Iterable[int], interval: float = 0.01, nice: int | None = 19, local: bool | None = None
    ):
        if interval <= 0:
            raise ValueError("interval must be positive")
        self.nice = nice
        self.local = local
        self.engine = engine
        self.pids = [int(p) for p in pids]
        self.interval = float(interval)
        self._ticks: list[float] = []
        self._states: list[Any] = []  # per tick: raw rows, then {pid: source} once classified
        self._raw = True
        self._windows: dict[int, _Window] = {}  # begin()/end() windows
        self._whole_life: dict[int, _Window] = {}  # every pid, enter to exit
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._conn: Connection | None = None
        self._error: BaseException | None = None
        self._t_enter = 0.0
        self._t_exit: float | None = None
        self.own_pid: int | None = None
        self._client_cpu_s = 0.0  # the sampling thread's own CPU
        self._server_cpu0: float | None = None
        self._server_cpu_s: float | None = None  # the sampler's backend's CPU

    # -------------------------------------------------------------- lifecycle
    def _connect(self) -> Connection:
        if isinstance(self.engine, str):
            import psycopg

            return psycopg.connect(self.engine, autocommit=True)
        return self.engine.pg_connect(session=False)

    def __enter__(self) -> WaitSampler:
        self._conn = self._connect()
        self.own_pid = self._conn.info.backend_pid
        self._conn.execute("SET application_name = 'blocklab wait sampler'")
        self._conn.execute("SET statement_timeout = 0")
        pgconn = self._conn.pgconn
        self._param = ("{" + ",".join(str(p) for p in self.pids) + "}").encode()
        result = pgconn.prepare(_STATEMENT, _SAMPLE_SQL)
        if result.error_message:
            raise RuntimeError(f"wait sampler: {result.error_message.decode(errors='replace')}")
        self._sample(pgconn)  # once before timing starts
        self._ticks.clear()
        self._states.clear()
        if self.local is None:  # /proc and nice only for a server on this machine
            self.local = (not isinstance(self.engine, str) and self.engine.mode == "embedded") or all(
                _is_local_postgres(p) for p in [self.own_pid, *self.pids]
            )
        if self.local:
            self._server_cpu0 = _proc_cpu(self.own_pid)[0]
            if self.nice is not None:
                _renice(self.own_pid, self.nice)
        self._t_enter = time.perf_counter()
        self._whole_life = {pid: _open_window(pid, self._t_enter, bool(self.local)) for pid in self.pids}
        self._thread = threading.Thread(target=self._loop, name="blocklab-wait-sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._thread is None:
            return
        t = time.perf_counter()
        self._stop.set()
        self._thread.join()
        self._thread = None
        self._t_exit = t
        for w in [*self._windows.values(), *self._whole_life.values()]:
            _close_window(w, t)
        server_cpu1 = _proc_cpu(self.own_pid)[0] if self.local and self.own_pid else None
        if self._server_cpu0 is not None and server_cpu1 is not None:
            self._server_cpu_s = server_cpu1 - self._server_cpu0
        try:
            if self._conn is not None:
                self._conn.close()
        except Exception:
            pass
        if self._error is not None:
            raise RuntimeError(f"wait sampler failed: {self._error}") from self._error

    def begin(self, pid: int, at: float | None = None) -> None:
        """Session `pid` starts its measured work now (or at perf_counter() time `at`)."""
        self._windows[pid] = _open_window(pid, time.perf_counter() if at is None else at, bool(self.local))

    def end(self, pid: int, at: float | None = None) -> None:
        """Session `pid` finished its measured work now (or at perf_counter() time `at`)."""
        t = time.perf_counter() if at is None else at
        w = self._windows.get(pid)
        if w is None:
            raise ValueError(f"end({pid}) without begin({pid})")
        _close_window(w, t)

    def _sample(self, pgconn: PGconn) -> float:
        """One read of pg_stat_activity; raw values kept, classified later."""
        a = time.perf_counter()
        res = pgconn.exec_prepared(_STATEMENT, [self._param])  # libpq, without the GIL
        b = time.perf_counter()
        if res.error_message:
            raise RuntimeError(res.error_message.decode(errors="replace"))
        self._ticks.append((a + b) / 2)
        self._states.append([tuple(res.get_value(r, k) for k in range(4)) for r in range(res.ntuples)])
        res.clear()
        return b

    def _loop(self) -> None:
        assert self._conn is not None  # connected by __enter__ before the thread starts
        pgconn = self._conn.pgconn
        if self.nice is not None:
            _renice(threading.get_native_id(), self.nice)
        next_t = time.perf_counter()
        cpu0 = time.thread_time()
        try:
            while not self._stop.is_set():
                b = self._sample(pgconn)
                next_t += self.interval
                if next_t < b:  # fell behind (a busy machine): do not try to catch up
                    next_t = b + self.interval
                self._stop.wait(next_t - time.perf_counter())
        except BaseException as err:  # surfaced by close()
            self._error = err
        finally:
            self._client_cpu_s = time.thread_time() - cpu0

    # -------------------------------------------------------------- results
    def profile(self) -> Profile:
        if self._thread is not None:
            raise RuntimeError("profile() after the sampler has stopped (leave the with block first)")
        t_end = self._t_exit if self._t_exit is not None else time.perf_counter()
        if self._raw:
            self._states = [_classified(raw) for raw in self._states]
            self._raw = False
        sessions: dict[int, SessionProfile] = {}
        for pid in self.pids:
            w = self._windows.get(pid) or self._whole_life.get(pid)
            if w is None:
                w = _Window(pid, self._t_enter, None, None, None, "", t1=t_end)
            sessions[pid] = self._session(pid, w)
        gaps = [b - a for a, b in zip(self._ticks, self._ticks[1:])]
        return Profile(
            sessions=sessions,
            interval_s=self.interval,
            ticks=len(self._ticks),
            sampler_s=t_end - self._t_enter,
            mean_gap_s=sum(gaps) / len(gaps) if gaps else 0.0,
            max_gap_s=max(gaps) if gaps else 0.0,
            sampler_client_cpu_s=self._client_cpu_s,
            sampler_server_cpu_s=self._server_cpu_s,
        )

    def _session(self, pid: int, w: _Window) -> SessionProfile:
        assert w.t1 is not None
        p = SessionProfile(pid=pid, elapsed_s=max(0.0, w.t1 - w.t0))
        previous = w.t0
        for t, states in zip(self._ticks, self._states):
            if t <= w.t0:
                continue
            if t > w.t1:
                break
            weight = t - max(previous, w.t0)
            previous = t
            source = states.get(pid)
            if source is None:  # the session was not there: not sampled, stays unaccounted
                continue
            p.samples += 1
            if source == CPU:
                p.cpu_s += weight
            else:
                p.waits[source] = p.waits.get(source, 0.0) + weight
        if w.cpu0 is not None and w.cpu1 is not None:
            p.cpu_measured_s = max(0.0, w.cpu1 - w.cpu0)
            p.cpu_source = w.source
        if w.rq0 is not None and w.rq1 is not None:
            p.runqueue_s = max(0.0, w.rq1 - w.rq0)
        if w.stat0 is not None and w.stat1 is not None:
            p.cpu_stat_s = max(0.0, w.stat1 - w.stat0)
        return p


__all__ = ["Profile", "SessionSampler", "WaitSampler", "classify"]


class SessionSampler:
    """The PostgreSQL side of a workload's session profiler (engines/base.py
    SessionProfiler): a WaitSampler over the backends of the registered sessions."""

    def __init__(self, engine: PostgresEngine, interval: float = 0.01, nice: int | None = 19):
        self.engine = engine
        self.interval = interval
        self.nice = nice
        self.pids: list[int] = []
        self.sampler: WaitSampler | None = None

    def register(self, session: Session) -> None:
        self.pids.append(int(session.backend_id))

    def __enter__(self) -> SessionSampler:
        self.sampler = WaitSampler(self.engine, self.pids, interval=self.interval, nice=self.nice)
        self.sampler.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.sampler is not None:
            self.sampler.__exit__(*exc)

    def begin(self, session: Session) -> float:
        t0 = time.perf_counter()
        if self.sampler is not None:
            self.sampler.begin(int(session.backend_id), t0)
        return t0

    def end(self, session: Session, at: float | None = None) -> float:
        t1 = time.perf_counter() if at is None else at
        if self.sampler is not None:
            self.sampler.end(int(session.backend_id), t1)
        return t1

    def metrics(self, prefix: str = "profile") -> dict[str, float]:
        return self.sampler.profile().metrics(prefix) if self.sampler is not None else {}
