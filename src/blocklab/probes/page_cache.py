"""Second sources for the claims a cell makes about the OS page cache and
direct I/O, read from the kernel itself:

* resident_bytes(paths): how much of each file is in the page cache now
  (mincore(2) over a read-only mapping, as fincore does). A cold cell's
  relation files must be (nearly) absent after the eviction; with direct I/O
  they must stay absent after the run, since reads that bypass the page cache
  never fill it.
* opened_direct(pids, paths): which of these files the engine's processes
  hold open, and whether with O_DIRECT (the `flags:` line of
  /proc/<pid>/fdinfo/<fd>, octal open flags).
* process_read_bytes(pids): bytes the processes caused to be read from the
  storage layer (/proc/<pid>/io read_bytes; direct I/O included, page cache
  hits not): the engine's physical reads, whatever else reads the same disk.
"""

from __future__ import annotations

import ctypes
import mmap
import os
from collections.abc import Iterable
from pathlib import Path

O_DIRECT = os.O_DIRECT  # the architecture's own bit, as fdinfo reports it (0o40000 on x86_64, 0o200000 on arm64)
_PAGE = mmap.PAGESIZE
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_ubyte))
_libc.mincore.restype = ctypes.c_int
_libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long)
_libc.mmap.restype = ctypes.c_void_p
_libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
_libc.munmap.restype = ctypes.c_int
_MAP_FAILED = ctypes.c_void_p(-1).value


def unreadable(files: Iterable[Path]) -> list[Path]:
    """The files this process cannot open: their page cache cannot be measured or dropped."""
    out = []
    for path in files:
        try:
            os.close(os.open(path, os.O_RDONLY))
        except FileNotFoundError:
            continue  # gone (a segment dropped): nothing to cache
        except OSError:
            out.append(path)
    return out


def file_resident_bytes(path: Path, skip_head: int = 0) -> tuple[int, int]:
    """(bytes of the file in the page cache, the file's size); (0, 0) if it cannot be read.
    `skip_head`: the file's first bytes are left out of the count (not of the size)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return 0, 0
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            return 0, 0
        address = _libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if address in (None, _MAP_FAILED):
            return 0, size
        try:
            pages = (size + _PAGE - 1) // _PAGE
            vec = (ctypes.c_ubyte * pages)()
            if _libc.mincore(ctypes.c_void_p(address), ctypes.c_size_t(size), vec) != 0:
                return 0, size
            first = skip_head // _PAGE
            # mincore sets bit 0 of a page's byte when it is resident (the other bits are reserved, 0)
            tail = bytes(vec)[first:]
            resident = len(tail) - tail.count(0)
        finally:
            _libc.munmap(ctypes.c_void_p(address), ctypes.c_size_t(size))
        return min(resident * _PAGE, size), size
    finally:
        os.close(fd)


def resident_bytes(paths: Iterable[Path], skip_head: int = 0) -> tuple[int, int]:
    """(resident bytes, total bytes) over several files."""
    resident = total = 0
    for path in paths:
        r, t = file_resident_bytes(path, skip_head)
        resident += r
        total += t
    return resident, total


def opened_direct(pids: Iterable[int], paths: Iterable[Path]) -> tuple[int, int]:
    """(descriptors of these files the processes hold open, of which with O_DIRECT)."""
    wanted = set()
    for path in paths:
        try:
            wanted.add(os.path.realpath(path))
        except OSError:
            continue
    opened = direct = 0
    for pid in pids:
        fd_dir = Path(f"/proc/{pid}/fd")
        try:
            fds = list(fd_dir.iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(fd) not in wanted:
                    continue
                flags = _fdinfo_flags(Path(f"/proc/{pid}/fdinfo/{fd.name}"))
            except OSError:
                continue
            if flags is None:
                continue
            opened += 1
            direct += 1 if flags & O_DIRECT else 0
    return opened, direct


def _fdinfo_flags(path: Path) -> int | None:
    for line in path.read_text().splitlines():
        if line.startswith("flags:"):
            return int(line.split()[1], 8)
    return None


def process_read_bytes(pids: Iterable[int]) -> int | None:
    """Storage-layer bytes read by these processes so far; None if no /proc/<pid>/io was readable."""
    total, seen = 0, False
    for pid in pids:
        try:
            text = Path(f"/proc/{pid}/io").read_text()
        except OSError:
            continue
        for line in text.splitlines():
            if line.startswith("read_bytes:"):
                total += int(line.split()[1])
                seen = True
    return total if seen else None
