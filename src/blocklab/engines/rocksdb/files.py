"""What a RocksDB database directory says about itself, read without RocksDB's help
where RocksDB's own files would not be a second source.

* SST files: the checksum type and format version are in every file's footer
  (the last 53 bytes of a block-based table, format_version >= 1: byte 0 the
  ChecksumType, bytes 41..44 the format version, the last 8 the magic
  number); the data blocks, entries, raw key and value sizes and compression
  are its table properties (`sst_dump --show_properties`, read once per file:
  SST files never change once written). The OPTIONS file is *not* a source
  for these: RocksDB writes the flags of the current open into it, whatever
  the existing files were made with.
* OPTIONS-NNNNNN (the newest): the options RocksDB sanitised for the open
  that wrote it (use_direct_reads, compaction_readahead_size raised under
  direct reads, max_background_jobs ...). LOG: the block cache's capacity.
* The SST manifest (names and sizes): a read workload must leave it as the
  build made it; a crash that replays the WAL flushes a new L0 file.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..base import EngineError
from ..host import drop_os_cache
from .bench import run_tool

FOOTER_BYTES = 53
BLOCK_BASED_MAGIC = 0x88E241B785F4CFF7
OPTIONS_FILE = re.compile(r"^OPTIONS-(\d+)$")
IMMUTABLE_SUFFIXES = (".sst", ".blob")  # never written again once made: a copy may hard-link them


@dataclass(frozen=True)
class SstProperties:
    """One SST file as its footer and table properties describe it."""

    path: str
    size: int
    checksum_type: int
    format_version: int
    data_blocks: int
    entries: int
    data_bytes: int  # on disk (compressed when compression is on)
    raw_key_bytes: int
    raw_value_bytes: int
    compression: str  # as sst_dump names it: NoCompression, Snappy, ZSTD ...

    @property
    def raw_bytes(self) -> int:
        """The data blocks' bytes before compression (keys, values and ~4 bytes of entry overhead each)."""
        return self.data_bytes if self.compression == "NoCompression" else self.raw_key_bytes + self.raw_value_bytes + 4 * self.entries

    @property
    def avg_block(self) -> float:
        return self.raw_bytes / self.data_blocks if self.data_blocks else 0.0

    @property
    def avg_key(self) -> float:
        return self.raw_key_bytes / self.entries if self.entries else 0.0

    @property
    def avg_value(self) -> float:
        return self.raw_value_bytes / self.entries if self.entries else 0.0

    def block_size_fits(self, block_size: int) -> bool:
        """Could RocksDB have cut these data blocks with this --block_size? A block closes
        once it reaches the size, or at 90% of it when the next entry would overflow it
        (block_size_deviation 10), so every block but the last lies in [0.9 B, B + one entry]."""
        if not self.data_blocks:
            return True
        entry = self.avg_key + self.avg_value + 16  # an entry's header and a restart point at most
        fewest = self.raw_bytes / (block_size + entry + 64)
        most = self.raw_bytes / (0.85 * block_size) + 1
        return fewest - 1 <= self.data_blocks <= most


def footer(path: Path) -> tuple[int, int]:
    """(checksum type, format version) from a block-based SST file's footer."""
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        if size < FOOTER_BYTES:
            raise EngineError(f"{path}: {size} bytes is too short for an SST file")
        f.seek(size - FOOTER_BYTES)
        data = f.read(FOOTER_BYTES)
    (magic,) = struct.unpack("<Q", data[-8:])
    if magic != BLOCK_BASED_MAGIC:
        raise EngineError(f"{path}: not a block-based table with a format_version >= 1 footer (magic {magic:#x})")
    (version,) = struct.unpack("<I", data[41:45])
    return data[0], version


_PROPERTY = re.compile(r"^\s*(# data blocks|# entries|raw key size|raw value size|data block size|SST file compression algo): (.*)$", re.M)
_cache: dict[tuple[str, int, int, int], SstProperties] = {}


def sst_properties(path: Path) -> SstProperties:
    """The footer and table properties of one SST file (sst_dump once per file version)."""
    st = path.stat()
    key = (str(path), st.st_ino, st.st_size, st.st_mtime_ns)
    if key in _cache:
        return _cache[key]
    checksum_type, version = footer(path)
    sst_dump = shutil.which("sst_dump")
    if sst_dump is None:
        raise EngineError("sst_dump is not on PATH (it comes with db_bench in rocksdb-tools)")
    done = run_tool([sst_dump, f"--file={path}", "--show_properties"], f"sst_dump --show_properties {path.name}", 120)
    props = {m.group(1): m.group(2).strip() for m in _PROPERTY.finditer(done.stdout)}
    try:
        made = SstProperties(
            path=str(path), size=st.st_size, checksum_type=checksum_type, format_version=version,
            data_blocks=int(props["# data blocks"]), entries=int(props["# entries"]),
            data_bytes=int(props["data block size"]), raw_key_bytes=int(props["raw key size"]),
            raw_value_bytes=int(props["raw value size"]), compression=props["SST file compression algo"],
        )
    except (KeyError, ValueError) as err:
        raise EngineError(f"sst_dump --show_properties {path}: no {err} in its output") from None
    _cache[key] = made
    return made


def sst_files(db: Path) -> list[Path]:
    return sorted(db.glob("*.sst")) if db.is_dir() else []


def manifest(db: Path) -> list[list[Any]]:
    """[name, size] of each SST file, sorted: what a read-only workload must leave unchanged."""
    return [[p.name, p.stat().st_size] for p in sst_files(db)]


def newest_options(db: Path) -> Path | None:
    found = [(int(m.group(1)), db / name) for name in os.listdir(db) if (m := OPTIONS_FILE.match(name))] if db.is_dir() else []
    return max(found)[1] if found else None


def read_options(path: Path) -> dict[str, str]:
    """An OPTIONS file as key -> value (DBOptions, the default column family, its table options)."""
    out: dict[str, str] = {}
    section = ""
    for line in path.read_text(errors="replace").splitlines():
        line = line.strip()
        if line.startswith("["):
            section = line
            continue
        if "=" in line and not line.startswith("#") and (section == "[DBOptions]" or '"default"' in section):
            key, _, value = line.partition("=")
            out.setdefault(key.strip(), value.strip())
    return out


_CAPACITY = re.compile(r"^\s+capacity : (\d+)$", re.M)
_NO_BLOCK_CACHE = re.compile(r"^\s+no_block_cache: (\d)$", re.M)
_LOG_FACTS = {
    "rocksdb_version": re.compile(r"RocksDB version: (\S+)"),
    "compile_date": re.compile(r"Compile date (.+)$", re.M),
    "fast_crc32": re.compile(r"Fast CRC32 supported: (.+)$", re.M),
}
_COMPRESSION = re.compile(r"^\S+ \S+\s+(k\w+) supported: (\d)$", re.M)


def read_log(db: Path) -> dict[str, object]:
    """The block cache, the build facts and the compressions from a database's LOG."""
    try:
        text = (db / "LOG").read_text(errors="replace")
    except OSError:
        return {}
    out: dict[str, object] = {}
    if m := _NO_BLOCK_CACHE.search(text):
        out["no_block_cache"] = m.group(1) == "1"
    if m := _CAPACITY.search(text):
        out["block_cache_capacity"] = int(m.group(1))
    for key, pattern in _LOG_FACTS.items():
        if m := pattern.search(text):
            out[key] = m.group(1).strip()
    out["compressions"] = {name: flag == "1" for name, flag in _COMPRESSION.findall(text)}
    return out


def remove_db(db: Path) -> None:
    shutil.rmtree(db, ignore_errors=True)
    if db.exists():
        raise EngineError(f"could not remove {db}")


def copy_db(source: Path, target: Path) -> None:
    """A working copy of a database: SST files hard-linked (RocksDB never writes an
    existing SST again, only deletes it, as its own Checkpoint does), the rest copied.
    Nothing is read through the page cache for the SSTs; the small files are dropped
    from it after the copy."""
    remove_db(target)
    target.mkdir(parents=True)
    for path in sorted(source.iterdir()):
        if not path.is_file() or path.name == "LOCK":
            continue
        dest = target / path.name
        if path.suffix in IMMUTABLE_SUFFIXES:
            try:
                os.link(path, dest)
                continue
            except OSError:
                pass  # another file system: copy it
        shutil.copy2(path, dest)
        drop_os_cache(dest)


def drop_db_cache(db: Path) -> tuple[int, bool]:
    """Every file of the database out of the OS page cache: (files dropped, all of them?)."""
    files = [p for p in db.iterdir() if p.is_file()] if db.is_dir() else []
    dropped = sum(1 for p in files if drop_os_cache(p))
    return dropped, dropped == len(files)


def prune_logs(db: Path, keep: int = 2) -> None:
    """After a db_bench process has closed the database: every open rotates the LOG to
    LOG.old.<micros> (RocksDB keeps 1000 of them) and leaves a new, empty WAL behind
    (7.8 keeps those too). Old LOGs beyond `keep` and empty WALs but the newest go:
    an empty WAL holds nothing to recover."""
    old = sorted(db.glob("LOG.old.*"))
    for path in old[:-keep] if keep else old:
        with contextlib.suppress(OSError):
            path.unlink()
    wals = sorted(db.glob("*.log"))
    for path in wals[:-1]:
        with contextlib.suppress(OSError):
            if path.stat().st_size == 0:
                path.unlink()
