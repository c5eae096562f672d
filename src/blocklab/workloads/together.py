"""Sessions released together: one thread per session, a barrier at the start.

Every multi-session workload (update, slob) starts its sessions this way, so
that no session gets a head start while the others are still connecting.

    results = run_together(len(conns), lambda i: one_session(i), "blocklab-update")

The first real error of any session is raised once every thread has finished
(the barrier is broken so that no session waits for one that failed).

Interrupted while waiting (Ctrl-C, or SIGTERM turned into an exception), the
sessions' statements are cancelled on the server with `cancel(i)` before the
threads are joined: a server-side loop would otherwise run on for its whole
run time, on someone's server too, and hold the process's exit (and the
engine's stop) until it ended.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
CANCEL_FOR_S = 30.0  # how long an interrupted point keeps cancelling sessions that have not ended
CANCEL_EVERY_S = 1.0  # ... again and again: a statement sent after the first cancel is not stopped by it


def run_together(
    count: int,
    session: Callable[[int], T],
    name: str,
    cancel: Callable[[int], None] | None = None,
    start_timeout_s: float = 60.0,
) -> list[T]:
    """session(0..count-1), each in its own thread, all released by one barrier;
    their results in session order. `cancel(i)` stops session i's statement on
    the server (called from this thread, only when interrupted)."""
    barrier = threading.Barrier(count)
    out: list[T | None] = [None] * count
    errors: list[BaseException] = []
    # Completion is watched through events, not Thread.join: a join cut short by
    # KeyboardInterrupt can leave CPython 3.11 reporting a running thread as
    # stopped (is_alive() False), and that session would not be cancelled.
    done = [threading.Event() for _ in range(count)]

    def run(i: int) -> None:
        try:
            barrier.wait(timeout=start_timeout_s)
            out[i] = session(i)
        except BaseException as err:
            errors.append(err)
            barrier.abort()
        finally:
            done[i].set()

    threads = [threading.Thread(target=run, args=(i,), name=f"{name}-{i}") for i in range(count)]
    for t in threads:
        t.start()
    try:
        for event in done:
            # short waits: a signal received by another thread (the kernel may pick
            # any) would not wake an endless wait; its handler runs between waits
            while not event.wait(0.2):
                pass
    except BaseException:
        barrier.abort()
        _cancel_until_done(done, cancel, CANCEL_FOR_S)
        raise
    for t in threads:
        t.join()
    real = [e for e in errors if not isinstance(e, threading.BrokenBarrierError)]
    if real or errors:
        raise (real or errors)[0]
    return [x for x in out if x is not None]


def _cancel_until_done(done: list[threading.Event], cancel: Callable[[int], None] | None, for_s: float) -> None:
    """Cancel every session not yet done, and again every CANCEL_EVERY_S while any runs on.
    Once was not enough: a session released by the barrier but not yet at its server call
    when the interrupt came (a loaded machine) sent its statement after the cancel, which
    found nothing to stop, and the point then waited out its whole run time (a test hung
    for an hour-long SLOB loop)."""
    deadline = time.monotonic() + for_s
    while True:
        running = [i for i, event in enumerate(done) if not event.is_set()]
        if not running or time.monotonic() >= deadline:
            return
        if cancel is not None:
            for i in running:
                with contextlib.suppress(Exception):
                    cancel(i)
        done[running[0]].wait(min(CANCEL_EVERY_S, max(0.0, deadline - time.monotonic())))
