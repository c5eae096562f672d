"""SQLite's files and shims: the VFS shims from apsw's compiled extras (vfsstat
counts every call and byte, cksumvfs verifies page checksums), the database
file's header, the pragmas as a connection reports them."""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

import apsw

from ..base import EngineError, KnobError

DB_FILE = "blocklab.db"
SIDE_FILES = ("-wal", "-shm", "-journal")

STAT_VFS = "vfslog"  # registered by apsw's `vfsstat` extra
CKSUM_VFS = "cksmvfs"  # registered by apsw's `cksumvfs` extra
CKSUM_RESERVE = 8  # cksumvfs verifies pages only when the file reserves exactly 8 bytes a page

PAGE_SIZES = tuple(2**n for n in range(9, 17))  # 512 .. 65536
DEFAULT_PAGE_SIZE = 4096
JOURNAL_MODES = ("delete", "truncate", "persist", "memory", "wal", "off")
SYNCHRONOUS = ("off", "normal", "full", "extra")  # PRAGMA synchronous reads back 0..3
DEFAULT_JOURNAL_MODE = "delete"
BUSY_TIMEOUT_MS = 60_000
_SQLITE_HEADER = b"SQLite format 3\x00"

# vfsstat rows -> io_counters keys
VFSSTAT_FILES = {
    "database": "db",
    "journal": "journal",
    "wal": "wal",
    "master-journal": "super_journal",
    "sub-journal": "subjournal",
    "temp-database": "temp_db",
    "temp-journal": "temp_journal",
    "transient-db": "transient_db",
}
VFSSTAT_STATS = {
    "read": "reads",
    "bytes-in": "read_bytes",
    "write": "writes",
    "bytes-out": "write_bytes",
    "sync": "syncs",
    "open": "opens",
}
CACHE_STATUS = {
    "hits": apsw.SQLITE_DBSTATUS_CACHE_HIT,
    "misses": apsw.SQLITE_DBSTATUS_CACHE_MISS,
    "cache_writes": apsw.SQLITE_DBSTATUS_CACHE_WRITE,
    "cache_spills": apsw.SQLITE_DBSTATUS_CACHE_SPILL,
}

CHECKSUM_HINT = (
    "checksum mismatch: cksumvfs read a database page whose stored checksum does not match its content "
    "(SQLITE_IOERR_DATA, extended code 8202); the database file is corrupt"
)

_shims_lock = threading.Lock()

def load_shims() -> None:
    """Register vfslog (vfsstat) and then cksmvfs on top of it, once per process,
    and put the default VFS back. Loading either twice would stack it on itself."""
    import apsw.sqlite_extra

    with _shims_lock:
        names = apsw.vfs_names()
        if STAT_VFS in names and CKSUM_VFS in names:
            _install_checksum_message()
            return
        default = names[0]
        scratch = apsw.Connection(":memory:")
        try:
            if STAT_VFS not in names:
                apsw.sqlite_extra.load(scratch, "vfsstat")
            if CKSUM_VFS not in apsw.vfs_names():
                apsw.sqlite_extra.load(scratch, "cksumvfs")  # wraps the default, vfslog: counted too
        except (apsw.sqlite_extra.NotAvailable, LookupError, apsw.Error) as err:
            raise EngineError(f"apsw's vfsstat/cksumvfs extras cannot be loaded ({err}); reinstall apsw from PyPI") from err
        finally:
            scratch.close()
        apsw.set_default_vfs(default)
        _install_checksum_message()


def _install_checksum_message() -> None:
    """apsw reports SQLITE_IOERR_DATA as "disk I/O error"; say it was a checksum."""
    cls = apsw.IOError
    if getattr(cls.__str__, "_blocklab_checksum", False):
        return
    base = cls.__str__

    def __str__(self: BaseException) -> str:
        text = base(self)
        if getattr(self, "extendedresult", None) == apsw.SQLITE_IOERR_DATA and "checksum" not in text:
            return f"{text}: {CHECKSUM_HINT}"
        return text

    __str__._blocklab_checksum = True  # type: ignore[attr-defined]
    cls.__str__ = __str__  # type: ignore[method-assign]


def is_checksum_error(err: BaseException) -> bool:
    return isinstance(err, apsw.IOError) and getattr(err, "extendedresult", None) == apsw.SQLITE_IOERR_DATA


def read_pragmas(conn: apsw.Connection, full: bool = False) -> dict[str, str]:
    """The knobs' values as this connection reports them (native names, text);
    with `full`, every storage-relevant pragma as well."""
    def one(pragma: str) -> Any:
        row = conn.execute(f"PRAGMA {pragma}").fetchone()
        return row[0] if row else None

    # cksumvfs answers with the text '1'; other VFSes do not know the pragma (no row)
    checksum_on = str(one("checksum_verification")) == "1" and conn.reserve_bytes() == CKSUM_RESERVE
    out = {
        "page_size": str(one("page_size")),
        "cksumvfs": "on" if checksum_on else "off",
        "cell_size_check": "on" if str(one("cell_size_check")) == "1" else "off",
        "cache_size": str(one("cache_size")),
        "journal_mode": str(one("journal_mode")).lower(),
        "synchronous": SYNCHRONOUS[int(one("synchronous"))],
        "mmap_size": str(one("mmap_size") or 0),
    }
    if full:
        for pragma in ("page_count", "freelist_count", "auto_vacuum", "cache_spill", "locking_mode", "temp_store",
                       "wal_autocheckpoint", "journal_size_limit", "secure_delete", "busy_timeout", "threads",
                       "encoding", "user_version", "foreign_keys", "automatic_index"):
            value = one(pragma)
            out[pragma] = "" if value is None else str(value)
        out["reserve_bytes"] = str(conn.reserve_bytes())
        out["checksum_verification"] = "1" if checksum_on else "0"
        out["vfs"] = conn.open_vfs
    return out


def pragma_literal(key: str, value: object) -> str:
    if isinstance(value, bool):
        return "ON" if value else "OFF"
    if isinstance(value, int):
        return str(value)
    text = str(value)
    if not re.fullmatch(r"[A-Za-z]+", text):  # canonical enum values only; never a quote to escape
        raise KnobError(f"sqlite.{key}: {value!r} is not a pragma value blocklab sends")
    return text.upper()


def pragma_text(key: str, value: object) -> str:
    """A canonical value as read_pragmas() reports it."""
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value).lower()


def read_header(path: Path) -> tuple[int, int] | None:
    """(page size, reserve bytes) from a database file's 100-byte header."""
    try:
        with open(path, "rb") as f:
            header = f.read(100)
    except FileNotFoundError:
        return None
    if len(header) < 100 or not header.startswith(_SQLITE_HEADER):
        return None
    page_size = int.from_bytes(header[16:18], "big")
    return (65536 if page_size == 1 else page_size), header[20]

