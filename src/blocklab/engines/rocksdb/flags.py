"""db_bench's own flags: the accepted list, read from the binary itself.

`db_bench --helpxml` (gflags) prints every flag with its type, default and
source file. It is the list blocklab validates native knobs (`rocksdb.NAME`)
against, so a misspelled flag is refused before anything runs, with the
near names. Flags linked into db_bench from other tools (the block cache and
trace analyzers, gflags itself) are listed too, but mean nothing to a
benchmark run: they are refused, saying where they come from.

The same output with flags on the command line reports each flag's parsed
value (`<current>`): `gflags_readback()` is the first witness of what
db_bench will use, before it touches a database.

Facts of db_bench 7.8.3 (Debian bookworm) checked here: --help and --helpxml
print to stdout and exit 1; the XML is one `<flag>` element per line and may
hold bytes that are not UTF-8 (read with errors='replace'); types are bool,
int32, uint32, int64, uint64, double and string.
"""

from __future__ import annotations

import difflib
import functools
import os
import subprocess
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import Any

from ..base import EngineError
from ..vocabulary import ApplyClass, KnobError, KnobInfo, parse_bool, parse_int

TOOL_FILE = "db_bench_tool.cc"  # the flags db_bench itself defines (357 of 430 in 7.8.3)
HELP_TIMEOUT_S = 30.0
INT_RANGES = {
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint64": (0, 2**64 - 1),
}


_BYTES = KnobInfo("bytes", None, "size", ApplyClass.SESSION, unit="bytes")


@dataclass(frozen=True)
class Flag:
    name: str
    type: str  # bool, int32, uint32, int64, uint64, double, string
    default: str
    meaning: str
    file: str

    @property
    def own(self) -> bool:
        """Defined by db_bench itself (not linked in from another tool)."""
        return self.file.endswith(TOOL_FILE)

    def parse(self, value: Any, where: str) -> Any:
        """A value for this flag in canonical Python form (bool, int, float, str), or KnobError."""
        if self.type == "bool":
            return parse_bool(value, where)
        if self.type in INT_RANGES:
            low, high = INT_RANGES[self.type]
            accepted = f"an integer from {low:,} to {high:,} ({self.type}; sizes like 64k or 8MB are bytes)"
            try:
                number = _parse_integer(value, where)
            except KnobError:
                raise KnobError(f"{where}: {value!r} is not accepted; accepted: {accepted}") from None
            if not low <= number <= high:
                raise KnobError(f"{where}: {value!r} is out of range; accepted: {accepted}")
            return number
        if self.type == "double":
            if isinstance(value, bool):
                raise KnobError(f"{where}: {value!r} is not accepted; accepted: a number (double)")
            try:
                return float(value)
            except (TypeError, ValueError):
                raise KnobError(f"{where}: {value!r} is not accepted; accepted: a number (double)") from None
        text = str(value)
        if "\n" in text or "\0" in text:
            # blocklab hands db_bench its arguments one per line (see bench.py)
            raise KnobError(f"{where}: {value!r} is not accepted; accepted: a string without line breaks")
        return text


def _parse_integer(value: object, where: str) -> int:
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value.strip())
    # sizes (8MB, 64k) as bytes, as the generic knobs take them
    return parse_int(value, where, _BYTES)


def flag_text(value: object) -> str:
    """A canonical value as db_bench's command line takes it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


@dataclass(frozen=True)
class FlagTable:
    """The flags of one db_bench binary."""

    binary: str
    flags: dict[str, Flag]  # every flag the binary lists, own and linked in

    def own(self) -> dict[str, Flag]:
        return {n: f for n, f in self.flags.items() if f.own}

    def get(self, name: str, where: str) -> Flag:
        """The flag, or KnobError naming the near names (or where a foreign flag comes from)."""
        flag = self.flags.get(name)
        if flag is not None and flag.own:
            return flag
        if flag is not None:
            raise KnobError(
                f"{where}: db_bench lists --{name}, but it belongs to {flag.file.rsplit('/', 1)[-1]} (linked into "
                f"db_bench, unused by its benchmarks); accepted: a flag of {TOOL_FILE}"
            )
        near = difflib.get_close_matches(name, list(self.own()), n=5, cutoff=0.6)
        hint = f"; near names: {', '.join('rocksdb.' + n for n in near)}" if near else ""
        raise KnobError(
            f"{where}: db_bench ({self.binary}) has no flag --{name}{hint}; accepted: one of its "
            f"{len(self.own())} flags (`db_bench --help`)"
        )


def binary_path() -> str | None:
    """db_bench on PATH (BLOCKLAB_DB_BENCH overrides it), or None."""
    import shutil

    explicit = os.environ.get("BLOCKLAB_DB_BENCH")
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    return shutil.which("db_bench")


def load_flags(binary: str) -> FlagTable:
    """The flag table of `binary` (read once per binary version)."""
    st = os.stat(binary)
    return _load(binary, st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=8)
def _load(binary: str, mtime_ns: int, size: int) -> FlagTable:
    xml = _helpxml(binary, [])
    flags: dict[str, Flag] = {}
    for element in ET.fromstring(xml).iter("flag"):
        name = element.findtext("name") or ""
        flags[name] = Flag(
            name=name,
            type=element.findtext("type") or "string",
            default=element.findtext("default") or "",
            meaning=" ".join((element.findtext("meaning") or "").split()),
            file=element.findtext("file") or "",
        )
    if not any(f.own for f in flags.values()):
        raise EngineError(f"{binary} --helpxml lists no flags of {TOOL_FILE}: is it RocksDB's db_bench?")
    return FlagTable(binary, flags)


def gflags_readback(binary: str, args: list[str]) -> dict[str, str]:
    """How db_bench parses these arguments: flag name -> its `current` value (nothing runs)."""
    xml = _helpxml(binary, args)
    out = {}
    for element in ET.fromstring(xml).iter("flag"):
        out[element.findtext("name") or ""] = element.findtext("current") or ""
    return out


def _helpxml(binary: str, args: list[str]) -> str:
    try:
        done = subprocess.run(
            [binary, *args, "--helpxml"], capture_output=True, timeout=HELP_TIMEOUT_S, env=c_locale_env(), check=False
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        raise EngineError(f"{binary} --helpxml failed: {err}") from None
    text = done.stdout.decode("utf-8", errors="replace")  # gflags prints help to stdout and exits 1
    if "<AllFlags>" not in text:
        last = done.stderr.decode("utf-8", errors="replace").strip().splitlines()[-3:]
        raise EngineError(f"{binary} --helpxml printed no flag list (exit {done.returncode}): {' | '.join(last)}")
    return text[text.index("<AllFlags>"):]


def c_locale_env() -> dict[str, str]:
    """The environment db_bench runs in: the C locale, so numbers print as the parser expects them."""
    env = dict(os.environ)
    env["LC_ALL"] = "C"
    return env
