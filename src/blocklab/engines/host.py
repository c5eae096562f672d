"""What every engine needs from the host: an exclusive lock on its data
directory, and dropping a data file from the OS page cache."""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path
from typing import IO

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
        handle = open(self.path, "w")
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
