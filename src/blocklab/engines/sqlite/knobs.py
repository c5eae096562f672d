"""SQLite's knobs: the generic vocabulary mapped onto its pragmas, how a change
is applied (a new file, or per connection), and the limits of this build."""

from __future__ import annotations

import contextlib
import dataclasses
import functools

import apsw

from ..vocabulary import ApplyClass, KnobError, KnobInfo, parse_int
from .files import DEFAULT_JOURNAL_MODE, DEFAULT_PAGE_SIZE, JOURNAL_MODES, PAGE_SIZES, SYNCHRONOUS

# native parameter -> what it is; generic names point at these
KNOBS: dict[str, KnobInfo] = {
    "page_size": KnobInfo(
        "page_size", "block_size", "size", ApplyClass.REINIT, minimum=512, maximum=65536, unit="bytes",
        default=DEFAULT_PAGE_SIZE,
        description="database page size, a power of two from 512 to 65536 bytes; a new database file",
    ),
    "cksumvfs": KnobInfo(
        "cksumvfs", "checksum", "bool", ApplyClass.REINIT, default=False,
        description="page checksums by the cksumvfs shim (8 reserve bytes a page); a new database file; "
        "read back with PRAGMA checksum_verification",
    ),
    "cell_size_check": KnobInfo(
        "cell_size_check", "block_checking", "bool", ApplyClass.SESSION, default=False,
        description="check cell sizes of every b-tree page as it is read (PRAGMA cell_size_check)",
    ),
    "cache_size": KnobInfo(
        "cache_size", "buffer_cache", "integer", ApplyClass.SESSION, minimum=0, maximum=2**31 - 1, unit="pages",
        default=-2000,
        description="page cache of each connection, in pages of the current page size (PRAGMA cache_size N); "
        "SQLite's negative KiB form is not accepted; unset, SQLite uses -2000 (2000 KiB)",
    ),
    "journal_mode": KnobInfo(
        "journal_mode", None, "enum", ApplyClass.RELOAD, choices=JOURNAL_MODES, default=DEFAULT_JOURNAL_MODE,
        description="rollback journal or WAL (PRAGMA journal_mode); WAL is a property of the file, the others "
        "of each connection; unset means delete",
    ),
    "synchronous": KnobInfo(
        "synchronous", None, "enum", ApplyClass.SESSION, choices=SYNCHRONOUS, default="full",
        description="how often SQLite waits for the disk (PRAGMA synchronous)",
    ),
    "mmap_size": KnobInfo(
        "mmap_size", None, "size", ApplyClass.SESSION, minimum=0, maximum=2**31 - 1, unit="bytes", default=0,
        description="bytes of the file read through a memory map (PRAGMA mmap_size); mapped reads bypass the "
        "VFS, so vfsstat does not count them",
    ),
}
GENERIC_TO_NATIVE = {info.generic: native for native, info in KNOBS.items() if info.generic}
NOT_ON_SQLITE = {
    "multiblock_read": "SQLite has no multiblock read: it reads one page per call and leaves read-ahead to the "
    "OS. Engines that have it: postgres (io_combine_limit), mariadb (innodb_read_ahead_threshold)",
    "writers": "SQLite has no writer processes: each connection writes its own pages. Engines that have it: "
    "postgres (io_workers), mariadb (innodb_write_io_threads)",
    "direct_io": "SQLite has no direct I/O: it always reads through the OS page cache (cold runs evict the file "
    "with posix_fadvise instead). Engines that have it: postgres (debug_io_direct), mariadb "
    "(innodb_flush_method=O_DIRECT)",
    "io_slaves": "SQLite has no I/O helper threads: the connection's own thread does every read. Engines that "
    "have them: mariadb (innodb_read_io_threads), postgres (io_workers, the 'writers' knob)",
}
# session pragmas, in the order connect() runs them (journal mode first: it may convert the file)
SESSION_ORDER = ("journal_mode", "synchronous", "cache_size", "cell_size_check", "mmap_size")
# always in apply()'s answer, asked for or not
ALWAYS_RECORDED = ("journal_mode", "synchronous")

def checked_page_size(value: object, info: KnobInfo) -> int:
    where = f"knob {info.generic or 'sqlite.' + info.native!r} (sqlite page_size)"
    accepted = "a power of two from 512 to 65536 bytes: " + ", ".join(map(str, PAGE_SIZES))
    try:
        number = parse_int(value, where, info)
    except KnobError:
        raise KnobError(f"{where}: {value!r} is not accepted; accepted: {accepted}") from None
    if number not in PAGE_SIZES:
        raise KnobError(f"{where}: {value!r} is not accepted (SQLite would silently ignore it); accepted: {accepted}")
    return number


def with_limits(info: KnobInfo) -> KnobInfo:
    """Limits this SQLite build was compiled with."""
    if info.native == "mmap_size":
        return dataclasses.replace(info, maximum=_max_mmap_size())
    return info


@functools.cache
def _max_mmap_size() -> int:
    """SQLITE_MAX_MMAP_SIZE: a larger PRAGMA mmap_size is silently capped to it."""
    conn = apsw.Connection(":memory:")
    try:
        for (option,) in conn.execute("PRAGMA compile_options"):
            if option.startswith("MAX_MMAP_SIZE="):
                with contextlib.suppress(ValueError):
                    return int(option.split("=", 1)[1].rstrip("LlUu"), 0)
    finally:
        conn.close()
    return 2**31 - 1


