"""Workload `sql`'s sessions as processes: one fork per session, released together.

At thousands of statements a second the sessions' Python is part of what is
measured; as threads they contend for one interpreter lock (strace: ~0.35 futex
calls per statement, most of the client's system time), as processes they do not.
Everything else about a cell stays in the parent: the connections (opened there,
each used only by its child until the child has exited), the RunProbe, the wait
sampler and its begin/end windows (time.perf_counter is CLOCK_MONOTONIC, the
same clock in every process), and the cancel on Ctrl-C.

    results = run_processes(count, prepare, begin, end, cancel)

prepare(i, stop) runs in child i: it sets the session up and returns go(t0) -> the
child's result (a picklable value), which runs the timed loop from t0 on. The
parent calls begin(i) -> t0 just before releasing child i, end(i, result) once it
has exited. A child only runs its session and leaves by os._exit: the parent's
other threads (sampler, probes) may hold locks (logging, rich, a connection's)
that the child must never take. The child ignores SIGINT and SIGTERM (a terminal
sends Ctrl-C to the whole process group): the parent, interrupted, first cancels
the child's statement on the server, then stops the child (a flag in shared
memory, then SIGKILL), and never returns with a child left running.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import mmap
import os
import pickle
import selectors
import signal
import struct
import time
from collections.abc import Callable
from typing import Any, TypeVar

from .together import CANCEL_EVERY_S, CANCEL_FOR_S

T = TypeVar("T")
GO = struct.Struct("d")  # the parent's t0 for the child; NaN: do not run
READY = b"R"
NO_RESULT_EXIT = 70  # a child that could not even send its error
PR_SET_PDEATHSIG = 1


class SessionProcessError(RuntimeError):
    """A session's process ended without its result (killed, or its error could not be sent)."""


def _pdeathsig() -> Callable[[], None]:
    """SIGKILL the child if the parent dies (Linux), looked up before fork: a dlopen in the
    child could wait for a loader lock held by one of the parent's other threads."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return lambda: None
    return lambda: prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def run_processes(
    count: int,
    prepare: Callable[[int, mmap.mmap], Callable[[float], Any]],
    begin: Callable[[int], float],
    end: Callable[[int, Any], None],
    cancel: Callable[[int], None] | None = None,
    start_timeout_s: float = 60.0,
) -> list[Any]:
    """Fork `count` children, release them together, return their results in session order.
    A child's exception is raised here (the first to arrive), after every child has ended."""
    stop = mmap.mmap(-1, 1)  # shared with the children: stop[0] = 1 ends their loops
    children = _Children(count, stop)
    try:
        children.fork_all(prepare, _pdeathsig())
        children.wait(begin, end, start_timeout_s)
    except BaseException:
        stop[0] = 1
        children.stop(cancel)
        raise
    finally:
        children.reap()
    errors = [r for r in children.results if isinstance(r, BaseException)]
    if errors:
        raise errors[0]
    return children.results


class _Children:
    def __init__(self, count: int, stop: mmap.mmap):
        self.count, self.stop_flag = count, stop
        self.pids: list[int] = []
        self.out: list[int] = []  # read ends: READY, then the pickled result, then EOF
        self.go: list[int] = []  # write ends: GO
        self.buffers = [bytearray() for _ in range(count)]
        self.released = [False] * count
        self.ended = [False] * count
        self.results: list[Any] = [None] * count
        self.reaped: set[int] = set()

    # ------------------------------------------------------------------ fork
    def fork_all(self, prepare: Callable[[int, mmap.mmap], Callable[[float], Any]], pdeathsig: Callable[[], None]) -> None:
        for i in range(self.count):
            out_r, out_w = os.pipe()
            go_r, go_w = os.pipe()
            # SIGINT/SIGTERM blocked across the fork: the child sets them ignored before it can take one
            old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
            try:
                pid = os.fork()
                if pid == 0:
                    _child(i, prepare, self.stop_flag, pdeathsig, go_r, out_w, [*self.out, *self.go, out_r, go_w])
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, old)
            os.close(out_w)
            os.close(go_r)
            self.pids.append(pid)
            self.out.append(out_r)
            self.go.append(go_w)

    # ------------------------------------------------------------------ the run
    def wait(self, begin: Callable[[int], float], end: Callable[[int, Any], None], start_timeout_s: float) -> None:
        deadline = time.monotonic() + start_timeout_s
        with selectors.DefaultSelector() as sel:
            for i, fd in enumerate(self.out):
                sel.register(fd, selectors.EVENT_READ, i)
            while not all(self.ended):
                # short waits: the parent's signal handlers (Ctrl-C) run between them
                for key, _ in sel.select(0.2):
                    i = key.data
                    if self._drain(i):
                        sel.unregister(self.out[i])
                        self._ended(i, end)
                if not all(self.released):
                    self._release_when_ready(begin, deadline)

    def _release_when_ready(self, begin: Callable[[int], float], deadline: float) -> None:
        failed = any(self.ended)  # a child that ended before the start: the others must not run
        if failed or time.monotonic() >= deadline:
            self.stop_flag[0] = 1
            for i in range(self.count):
                self._release(i, float("nan"))
            if not failed:
                raise SessionProcessError(f"the sessions' processes were not ready after {deadline:.0f} s")
            return
        if all(self.buffers[i][:1] == READY for i in range(self.count)):
            for i in range(self.count):
                self._release(i, begin(i))

    def _release(self, i: int, t0: float) -> None:
        if not self.released[i]:
            self.released[i] = True
            with contextlib.suppress(OSError):  # a child already gone
                os.write(self.go[i], GO.pack(t0))

    def _drain(self, i: int) -> bool:
        """Read what child i has written; True at its EOF."""
        try:
            chunk = os.read(self.out[i], 1 << 20)
        except OSError:
            chunk = b""
        self.buffers[i] += chunk
        return not chunk

    def _ended(self, i: int, end: Callable[[int, Any], None] | None) -> None:
        self.ended[i] = True
        status = self._reap(self.pids[i])
        data = bytes(self.buffers[i][1:]) if self.buffers[i][:1] == READY else bytes(self.buffers[i])
        if data:
            self.results[i] = pickle.loads(data)
        else:
            self.results[i] = SessionProcessError(f"session {i + 1}'s process ended without its result ({_status_text(status)})")
        if isinstance(self.results[i], BaseException):
            self.stop_flag[0] = 1  # one session failed: the others stop at their next transaction
        elif end is not None:
            end(i, self.results[i])

    # ------------------------------------------------------------------ interrupted
    def stop(self, cancel: Callable[[int], None] | None) -> None:
        """Cancel the running children's statements on the server until they have ended (as
        together.py's threads: again every second, a statement sent after a cancel is not
        stopped by it), reading their pipes meanwhile (a child blocked writing its result to
        a full pipe would never end); SIGKILL whatever still runs after CANCEL_FOR_S."""
        for i in range(self.count):
            self._release(i, float("nan"))
        deadline = time.monotonic() + CANCEL_FOR_S
        next_cancel = 0.0
        while not all(self.ended) and time.monotonic() < deadline:
            if cancel is not None and time.monotonic() >= next_cancel:
                for i in (i for i in range(self.count) if not self.ended[i]):
                    with contextlib.suppress(Exception):
                        cancel(i)
                next_cancel = time.monotonic() + CANCEL_EVERY_S
            with selectors.DefaultSelector() as sel:
                for i in (i for i in range(self.count) if not self.ended[i]):
                    sel.register(self.out[i], selectors.EVENT_READ, i)
                for key, _ in sel.select(0.1):
                    if self._drain(key.data):
                        self._ended(key.data, None)

    def reap(self) -> None:
        """Every child ended and waited for, every pipe closed, whatever happened."""
        for pid in self.pids:
            if pid not in self.reaped:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                self._reap(pid)
        for fd in [*self.out, *self.go]:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.out, self.go = [], []

    def _reap(self, pid: int) -> int:
        if pid in self.reaped:
            return 0
        try:
            _, status = os.waitpid(pid, 0)
        except ChildProcessError:
            status = 0
        self.reaped.add(pid)
        return status


def _status_text(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"killed by signal {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exit status {os.waitstatus_to_exitcode(status)}"


# ---------------------------------------------------------------------- the child
def _child(i: int, prepare: Callable[[int, mmap.mmap], Callable[[float], Any]], stop: mmap.mmap,
           pdeathsig: Callable[[], None], go: int, out: int, others: list[int]) -> None:
    """The child's whole life: never returns, never runs the parent's code after fork."""
    code = NO_RESULT_EXIT
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent cancels, then stops us
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_SETMASK, set())
        pdeathsig()
        gc.disable()  # no collection: it could finalize the parent's garbage (a connection's close would end the parent's)
        for fd in others:
            os.close(fd)
        try:
            run = prepare(i, stop)
            _write_all(out, READY)
            t0 = GO.unpack(_read_exact(go, GO.size))[0]
            result: Any = None if t0 != t0 else run(t0)  # NaN: released only to end
        except BaseException as err:  # noqa: BLE001 - the error is the result
            result = err
        _write_all(out, _pickled(i, result))
        code = 0
    finally:
        os._exit(code)


def _pickled(i: int, result: Any) -> bytes:
    try:
        return pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # an exception that does not pickle: its type and text
        return pickle.dumps(SessionProcessError(f"session {i + 1}: {type(result).__name__}: {result}"))


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _read_exact(fd: int, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = os.read(fd, n - len(data))
        if not chunk:
            raise EOFError("the parent closed the start pipe")
        data += chunk
    return data
