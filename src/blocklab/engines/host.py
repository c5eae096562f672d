"""What every engine needs from the host: an exclusive lock on its data
directory, dropping a data file from the OS page cache, and its servers
stopped when blocklab exits however it exits (normally, on an error, Ctrl-C
or SIGTERM)."""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import fcntl
import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from .base import EngineError


class DirectoryLock:
    """An exclusive, non-blocking flock: one blocklab run per data directory."""

    def __init__(self, path: Path, what: str):
        self.path = path
        self.what = what  # e.g. "the embedded PostgreSQL in /var/tmp/blocklab/postgres"
        self._file: IO[str] | None = None

    def acquire(self) -> None:
        if self._file is not None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(self.path, "w")  # noqa: SIM115 - held open for as long as the lock is
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            raise EngineError(
                f"another blocklab run is using {self.what}; wait for it, or give this run its own with BLOCKLAB_CACHE=DIR"
            ) from None
        self._file = handle

    def release(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def drop_os_cache(path: Path) -> bool:
    """Write the file's dirty pages out, then ask the kernel to forget its cached
    pages (DONTNEED skips dirty pages, hence the fdatasync first)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        with contextlib.suppress(OSError):
            os.fdatasync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def drop_os_cache_files(paths: list[Path]) -> tuple[int, bool]:
    """drop_os_cache() each file: (files dropped, whether every one could be)."""
    dropped = sum(1 for path in paths if drop_os_cache(path))
    return dropped, dropped == len(paths)


# ---------------------------------------------------------------------- parent death
_LIBC: Any = None


def _set_parent_death_signal() -> None:
    """In the forked child, after the switch to the server user: SIGTERM the server
    when the thread that started it dies (so a SIGKILLed blocklab leaves none)."""
    if _LIBC is not None:
        _LIBC.prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG


def parent_death_preexec() -> Callable[[], None] | None:
    """A preexec_fn for a server started directly (not through a daemonising
    tool): it gets SIGTERM when this process dies. Only from the main thread
    (the signal follows the thread that forked), and only where prctl exists."""
    global _LIBC
    if threading.current_thread() is not threading.main_thread():
        return None
    if _LIBC is None:
        with contextlib.suppress(OSError):
            _LIBC = ctypes.CDLL(None, use_errno=True)
    return _set_parent_death_signal if _LIBC is not None else None


# ---------------------------------------------------------------------- stopped at exit
_LIVE: set[Any] = set()  # engines with a server (or a DSN server's changed settings) to put back
_HOOKS_INSTALLED = False


def stop_at_exit(engine: Any) -> None:
    """engine.stop() runs at interpreter exit if nothing stopped it before: a
    library user who forgets, an exception that escapes, SIGTERM (turned into a
    normal exit so `finally` blocks run first)."""
    _install_exit_hooks()
    _LIVE.add(engine)


def stopped(engine: Any) -> None:
    _LIVE.discard(engine)


def _stop_all_engines() -> None:
    for engine in list(_LIVE):
        with contextlib.suppress(Exception):
            engine.stop()


def _sigterm_to_exit(signum: int, frame: Any) -> None:
    # unwind like Ctrl-C does: `finally` blocks run, then atexit stops the servers
    raise SystemExit(128 + signum)


def _install_exit_hooks() -> None:
    global _HOOKS_INSTALLED
    if _HOOKS_INSTALLED:
        return
    atexit.register(_stop_all_engines)
    if threading.current_thread() is threading.main_thread():
        with contextlib.suppress(ValueError, OSError):
            if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
                signal.signal(signal.SIGTERM, _sigterm_to_exit)
    _HOOKS_INSTALLED = True

