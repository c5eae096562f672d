"""Sessions released together: one thread per session, a barrier at the start.

Every multi-session workload (update, slob) starts its sessions this way, so
that no session gets a head start while the others are still connecting.

    results = run_together(len(conns), lambda i: one_session(i), "blocklab-update")

The first real error of any session is raised once every thread has finished
(the barrier is broken so that no session waits for one that failed).
"""

from __future__ import annotations

import threading
from typing import Callable, TypeVar

T = TypeVar("T")


def run_together(count: int, session: Callable[[int], T], name: str, start_timeout_s: float = 60.0) -> list[T]:
    """session(0..count-1), each in its own thread, all released by one barrier;
    their results in session order."""
    barrier = threading.Barrier(count)
    out: list[T | None] = [None] * count
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            barrier.wait(timeout=start_timeout_s)
            out[i] = session(i)
        except BaseException as err:
            errors.append(err)
            barrier.abort()

    threads = [threading.Thread(target=run, args=(i,), name=f"{name}-{i}") for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    real = [e for e in errors if not isinstance(e, threading.BrokenBarrierError)]
    if real or errors:
        raise (real or errors)[0]
    return [x for x in out if x is not None]
