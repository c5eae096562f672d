"""What every engine needs from the host: an exclusive lock on its data
directory, dropping a data file from the OS page cache, and its servers
stopped when blocklab exits however it exits (normally, on an error, Ctrl-C
or SIGTERM)."""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import fcntl
import mmap
import os
import re
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import IO, Protocol

from .base import ApplyClass, EngineError, KnobInfo


class _LockWait:
    """How long a blocked DirectoryLock waits for its holder (`blocklab run --wait`): 0 = refuse at once."""

    seconds: float = 0.0
    on_wait: Callable[[str], None] | None = None


def wait_for_locks(seconds: float, on_wait: Callable[[str], None] | None = None) -> None:
    """Make blocked data-directory locks wait up to `seconds` (calling on_wait(message) once)."""
    _LockWait.seconds = seconds
    _LockWait.on_wait = on_wait


class DirectoryLock:
    """An exclusive flock: one blocklab process per data directory, so never two
    servers on one directory. The holder writes its pid and command into the lock
    file, so that a second process is told who holds it."""

    def __init__(self, path: Path, what: str):
        self.path = path
        self.what = what  # e.g. "the embedded PostgreSQL in /var/tmp/blocklab/postgres"
        self._file: IO[str] | None = None

    def acquire(self) -> None:
        if self._file is not None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(self.path, "a+")  # noqa: SIM115 - held open for as long as the lock is; "a+" keeps the holder's line
        deadline = time.monotonic() + _LockWait.seconds
        told = False
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                holder = self.holder()
                if time.monotonic() >= deadline:
                    handle.close()
                    waited = " (waited for it)" if _LockWait.seconds else ""
                    raise EngineError(
                        f"another blocklab process ({holder}) is using {self.what}{waited}; wait for it to end "
                        "(blocklab run --wait), or give this run its own with BLOCKLAB_CACHE=DIR"
                    ) from None
                if not told and _LockWait.on_wait is not None:
                    _LockWait.on_wait(f"waiting for {holder} to finish with {self.what}")
                    told = True
                time.sleep(0.5)
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()} {_command_line(os.getpid())}\n")
        handle.flush()
        self._file = handle

    def holder(self) -> str:
        """'pid 1234: blocklab run mbrc' as the holder wrote it."""
        try:
            pid, _, command = self.path.read_text().strip().partition(" ")
        except OSError:
            return "a process"
        return f"pid {pid}: {command}" if pid.isdigit() else "a process"

    def release(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


class ReadAhead:
    """The `read_ahead` knob: the kernel's read-ahead window of the disk that holds
    an engine's data (/sys/block/<disk>/queue/read_ahead_kb). For an engine that
    reads one block per call (PostgreSQL before 17), it is the multiblock read of
    a sequential scan. It is the machine's, not the engine's: it needs the disk on
    this host and root, is put back at stop(), and on someone's server needs
    --allow-server-changes."""

    NATIVE = "read_ahead_kb"

    def __init__(self, data_dir: Callable[[], str | None]):
        self._data_dir = data_dir
        self.original: int | None = None
        self._changed: Path | None = None  # the sysfs file a cell wrote: put back without asking the server again

    def path(self) -> Path | None:
        from ..probes.os_stats import device_of, whole_disk

        data_dir = self._data_dir()
        if data_dir is None:
            return None
        disk = whole_disk(device_of(data_dir).name)
        path = Path(f"/sys/block/{disk}/queue/read_ahead_kb")
        return path if disk and path.exists() else None

    def info(self, generic: str | None) -> KnobInfo:
        path = self.path()
        current = int(path.read_text()) if path else None
        return KnobInfo(self.NATIVE, generic, "integer", ApplyClass.RELOAD, minimum=0, maximum=65536, unit="kB", unit_bytes=1024, default=current,
                        description=f"read-ahead of {path.parent.parent.name if path else 'the data disk'} (sysfs), kB")

    @staticmethod
    def value_problem(kb: int) -> str | None:
        """The kernel keeps the window in pages: 6 would read back as 4."""
        page_kb = mmap.PAGESIZE // 1024
        return None if kb % page_kb == 0 else f"{kb} is not accepted; accepted: a multiple of {page_kb} (kB, the page size)"

    def problem(self, dsn: bool, allow_server_changes: bool) -> str | None:
        path = self.path()
        if path is None:
            return "the data's disk is not on this host, so its read-ahead cannot be set"
        if os.geteuid() != 0:
            return f"writing {path} needs root (run blocklab as root, or set it yourself and leave read_ahead out)"
        if dsn and not allow_server_changes:
            return f"it changes {path} for the whole machine: pass --allow-server-changes (it is put back at the end)"
        return None

    def read(self) -> int:
        path = self.path()
        if path is None:
            raise EngineError("the data's disk is not on this host")
        return int(path.read_text())

    def set(self, kb: int) -> None:
        path = self._changed or self.path()
        if path is None:
            raise EngineError("the data's disk is not on this host")
        if self.original is None:
            self.original, self._changed = int(path.read_text()), path
        path.write_text(f"{int(kb)}\n")

    def restore(self) -> None:
        """Put the original back (the path kept from set(): a server given by DSN that
        has gone away is not asked where its data lives)."""
        if self.original is not None and self._changed is not None:
            self._changed.write_text(f"{self.original}\n")
        self.original, self._changed = None, None

    def owed(self) -> dict[str, int]:
        """{sysfs path: original kB} while a cell's value is in place: kept in restore.json."""
        return {str(self._changed): self.original} if self.original is not None and self._changed is not None else {}


_READ_AHEAD_FILE = re.compile(r"^/sys/block/[A-Za-z0-9._-]+/queue/read_ahead_kb$")


def restore_host(owed: dict[str, object]) -> list[str]:
    """Put back the machine settings a run still owed (restore.json's "host": sysfs
    path -> original value). Only read-ahead files are accepted: the file comes from
    a results directory, which anyone may have edited."""
    done = []
    for path, original in owed.items():
        if not _READ_AHEAD_FILE.match(str(path)) or isinstance(original, bool) or not isinstance(original, int) or original < 0:
            raise EngineError(f"restore.json: host setting {path!r} = {original!r} is not a read-ahead blocklab changes "
                              "(/sys/block/DISK/queue/read_ahead_kb = kB)")
        try:
            Path(path).write_text(f"{original}\n")
        except OSError as err:
            raise EngineError(f"could not put back {path} = {original}: {err.strerror or err}") from None
        done.append(f"{path} = {original}")
    return done


def _command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"


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
_LIBC: ctypes.CDLL | None = None


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
class Stoppable(Protocol):
    """What stop_at_exit() needs of an engine: stop() (idempotent), and hashable."""

    def stop(self) -> None: ...


_LIVE: set[Stoppable] = set()  # engines with a server (or a DSN server's changed settings) to put back
_HOOKS_INSTALLED = False


def stop_at_exit(engine: Stoppable) -> None:
    """engine.stop() runs at interpreter exit if nothing stopped it before: a
    library user who forgets, an exception that escapes, SIGTERM (turned into a
    normal exit so `finally` blocks run first)."""
    _install_exit_hooks()
    _LIVE.add(engine)


def stopped(engine: Stoppable) -> None:
    _LIVE.discard(engine)


def _stop_all_engines() -> None:
    for engine in list(_LIVE):
        with contextlib.suppress(Exception):
            engine.stop()


def _sigterm_to_exit(signum: int, frame: FrameType | None) -> None:
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

