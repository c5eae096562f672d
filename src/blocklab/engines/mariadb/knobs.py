"""MariaDB's knobs: the generic vocabulary mapped onto server variables, the
variable catalog (information_schema.SYSTEM_VARIABLES of the running server)
turned into what blocklab accepts, and the checks that refuse, before
anything runs, what the server would refuse or silently round."""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pymysql

from ...errors import nearest
from ...units import fmt_bytes
from ..vocabulary import ApplyClass, KnobError, KnobInfo, parse_bool, parse_int
from .dsn import DATABASE

if TYPE_CHECKING:
    from pymysql.cursors import Cursor

ENGINE_NAME = "mariadb"
PAGE_SIZES = (4096, 8192, 16384, 32768, 65536)
DEFAULT_PAGE_SIZE = 16384

GENERIC_TO_NATIVE: dict[str, str] = {
    "block_size": "innodb_page_size",
    "checksum": "innodb_checksum_algorithm",
    "direct_io": "innodb_flush_method",
    "writers": "innodb_write_io_threads",
    "io_slaves": "innodb_read_io_threads",
    "multiblock_read": "innodb_read_ahead_threshold",
    "buffer_cache": "innodb_buffer_pool_size",
}
NOT_ON_MARIADB = {
    "block_checking": "InnoDB has no logical block checking setting (its page checksums are the "
    "'checksum' knob, innodb_checksum_algorithm; try engine sqlite: cell_size_check)",
}
# innodb_read_ahead_threshold's ends: 0 reads the next extent ahead on the first page of one, 64 never
READ_AHEAD_READINGS = (("0", "read-ahead at once"), ("64", "read-ahead off"))
# Checksum algorithms blocklab accepts for the generic knob: the ones the server
# offers (10.11: crc32, strict_crc32, full_crc32, strict_full_crc32). 'none',
# 'innodb' and their strict forms were removed from MariaDB and are refused.
CHECKSUM_FAMILIES = {"crc32": "crc32", "strict_crc32": "crc32", "full_crc32": "full_crc32", "strict_full_crc32": "full_crc32"}
_FSP_FLAGS_FULL_CRC32 = 1 << 4  # the marker bit of a full_crc32 tablespace in FSP flags

# Options a private instance always gets; the variables behind them are
# blocklab's to manage and refused as knobs there.
MANAGED = {
    "datadir": "the data directory is blocklab's (per page size, in the cache directory)",
    "socket": "the private instance listens on its own socket",
    "pid_file": "managed by blocklab",
    "tmpdir": "the private instance keeps its temporary files in its own directory (tmp/ beside its data)",
    "log_error": "managed by blocklab",
    "skip_networking": "the private instance has no TCP port",
    "port": "the private instance has no TCP port",
    "bind_address": "the private instance has no TCP port",
    "performance_schema": "always ON: the file I/O counters come from it",
    "innodb_buffer_pool_dump_at_shutdown": "always OFF so a restart leaves a cold buffer pool",
    "innodb_buffer_pool_load_at_startup": "always OFF so a restart leaves a cold buffer pool",
}

_SIZE_NAME = re.compile(r"(_size|_size_max)$")
# integer variables named *_size that count things, not bytes
_COUNT_NAMES = {"thread_pool_size", "host_cache_size", "histogram_size", "innodb_purge_batch_size", "innodb_sync_array_size"}
_IDENT = re.compile(r"^[a-z_][a-z0-9_]*$")


# ---------------------------------------------------------------------- catalog rows
@dataclass(frozen=True)
class ServerVariable:
    """One row of information_schema.SYSTEM_VARIABLES."""

    name: str  # lower case
    scope: str  # GLOBAL | SESSION | SESSION ONLY
    type: str  # BOOLEAN, ENUM, SET, FLAGSET, INT, INT UNSIGNED, BIGINT, BIGINT UNSIGNED, DOUBLE, VARCHAR
    minimum: int | float | None
    maximum: int | float | None
    block: int | None
    enum: tuple[str, ...]
    read_only: bool
    global_value: str | None
    default: str | None
    comment: str

    @property
    def dynamic(self) -> bool:
        return not self.read_only

    @property
    def session(self) -> bool:
        return self.scope in ("SESSION", "SESSION ONLY")


def _number(text: str | int | float | None) -> int | float | None:
    if text is None or text == "":
        return None
    try:
        return int(text)
    except (TypeError, ValueError):
        return float(text)


# ---------------------------------------------------------------------- helpers
MIB = 1024 * 1024


def min_buffer_pool_bytes(page_size: int) -> int:
    """The smallest buffer pool InnoDB starts with: 320 pages, rounded down to
    whole MiB, plus 1 MiB (MariaDB 10.11's refusal message, checked for every
    page size: 4k 2 MiB, 8k 3, 16k 6, 32k 11, 64k 21)."""
    return (320 * page_size // MIB + 1) * MIB


def parse_page_size(value: object) -> int:
    info = KnobInfo("innodb_page_size", "block_size", "size", ApplyClass.REINIT, unit="bytes", choices=tuple(map(str, PAGE_SIZES)))
    where = "knob 'block_size' (mariadb innodb_page_size)"
    try:
        size = parse_int(value, where, info)
    except KnobError:
        size = None
    if size not in PAGE_SIZES:
        raise KnobError(f"{where}: {value!r} is not accepted; accepted: {_page_sizes_text(info.choices)}")
    return size


def _page_sizes_text(choices: Iterable[str]) -> str:
    sizes = [int(c) for c in choices]
    return "one of " + ", ".join(f"{s // 1024}k" for s in sizes) + " (" + ", ".join(str(s) for s in sizes) + " bytes)"


def _amount(n: int | float, info: KnobInfo) -> str:
    return f"{int(n)} ({fmt_bytes(n)})" if info.unit == "bytes" else f"{int(n)}"


def _range_text(info: KnobInfo, var: ServerVariable) -> str:
    lo, hi = var.minimum, var.maximum
    if lo is None or hi is None:
        return info.accepted()
    kind = "a number" if info.kind == "real" else "an integer"
    text = f"{kind} from {_amount(lo, info)} to {_amount(hi, info)}"
    if var.block and var.block > 1:
        text += f", a multiple of {_amount(var.block, info)}"
    if info.unit == "bytes":
        text += "; sizes like 64M or 1G are accepted"
    return text


def server_value(value: object) -> str:
    """A canonical value as the server's command line and SET take it."""
    if isinstance(value, bool):
        return "ON" if value else "OFF"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def sql_value(conf: str) -> int | float | str:
    """Numbers go to SET unquoted (a quoted number is refused for integer variables)."""
    if re.fullmatch(r"-?\d+", conf):
        return int(conf)
    if re.fullmatch(r"-?\d+\.\d*", conf):
        return float(conf)
    return conf


def same_setting(server_value: str | None, conf: str) -> bool:
    if server_value is None:
        return False
    a, b = str(server_value).strip().lower(), conf.strip().lower()
    if a == b:
        return True
    with contextlib.suppress(ValueError):
        return float(a) == float(b)
    return False


def wait_buffer_pool_resize(cur: Cursor, timeout: float = 120.0) -> None:
    """Older 10.11 releases resize the buffer pool in the background; wait for it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        cur.execute("SHOW GLOBAL STATUS LIKE 'Innodb_buffer_pool_resize_status'")
        row = cur.fetchone()
        status = (row[1] if row else "") or ""
        if not status or "complete" in status.lower() or "resized" in status.lower():
            return
        time.sleep(0.05)


class KnobsMixin:
    """The engine's knob methods (MariadbEngine mixes them in)."""

    if TYPE_CHECKING:
        mode: str
        allow_server_changes: bool

        @property
        def page_size(self) -> int: ...

        _catalog: dict[str, ServerVariable]
        _version: str

        def start(self) -> None: ...
        def query(self, sql: str, params: Sequence[object] | None = None) -> list[tuple[Any, ...]]: ...
        def block_size(self) -> int: ...
        def _admin(self, database: str | None = None) -> pymysql.connections.Connection: ...

    # ------------------------------------------------------------------ checksum formats
    def checksum_family(self) -> str:
        """The tablespace format new tables get now: 'full_crc32' or 'crc32'."""
        return CHECKSUM_FAMILIES.get(str(self.query("SELECT @@innodb_checksum_algorithm")[0][0]), "crc32")

    def table_checksum(self, table: str) -> str | None:
        """The checksum format of a table's tablespace: 'full_crc32', 'crc32', or None if it has none."""
        rows = self.query("SELECT FLAG FROM information_schema.INNODB_SYS_TABLESPACES WHERE NAME = %s", (f"{DATABASE}/{table}",))
        if not rows:
            return None
        return "full_crc32" if int(rows[0][0]) & _FSP_FLAGS_FULL_CRC32 else "crc32"

    # ------------------------------------------------------------------ capabilities
    def _load_catalog(self) -> None:
        rows = self.query(
            "SELECT VARIABLE_NAME, VARIABLE_SCOPE, VARIABLE_TYPE, NUMERIC_MIN_VALUE, NUMERIC_MAX_VALUE, "
            "NUMERIC_BLOCK_SIZE, ENUM_VALUE_LIST, READ_ONLY, GLOBAL_VALUE, DEFAULT_VALUE, VARIABLE_COMMENT "
            "FROM information_schema.SYSTEM_VARIABLES"
        )
        catalog = {}
        for name, scope, vtype, lo, hi, block, enum, ro, glob, default, comment in rows:
            catalog[name.lower()] = ServerVariable(
                name=name.lower(), scope=scope, type=vtype, minimum=_number(lo), maximum=_number(hi),
                block=int(_number(block) or 0) or None, enum=tuple(enum.split(",")) if enum else (),
                read_only=ro == "YES", global_value=glob, default=default, comment=comment or "",
            )
        self._catalog = catalog
        self._version = self.query("SELECT @@version")[0][0]

    def _ensure_catalog(self) -> None:
        if not self._catalog:
            self.start()

    def _resolve(self, name: str) -> tuple[str, str | None]:
        """(native name, generic name or None) for a knob name, or KnobError."""
        if name.startswith("mariadb."):
            native = name[len("mariadb."):].strip().lower().replace("-", "_")
            if not _IDENT.match(native):
                raise KnobError(f"knob {name!r}: not a MariaDB variable name (letters, digits and _ after 'mariadb.')")
            generic = next((g for g, n in GENERIC_TO_NATIVE.items() if n == native), None)
            return native, generic
        if name in NOT_ON_MARIADB:
            raise KnobError(f"knob {name!r} is not available on engine mariadb: {NOT_ON_MARIADB[name]}")
        if name not in GENERIC_TO_NATIVE:
            raise KnobError(
                f"unknown knob {name!r} on engine mariadb; generic knobs on mariadb: "
                f"{', '.join(sorted(GENERIC_TO_NATIVE))}, or any server variable as mariadb.NAME "
                "(e.g. mariadb.innodb_flush_neighbors)"
            )
        return GENERIC_TO_NATIVE[name], name

    def knob(self, name: str) -> KnobInfo:
        native, generic = self._resolve(name)
        self._ensure_catalog()
        if self.mode == "embedded" and native in MANAGED:
            raise KnobError(f"knob {name!r} cannot be set on engine mariadb's private instance: {MANAGED[native]}")
        var = self._catalog.get(native)
        if var is None:
            if generic:
                raise KnobError(
                    f"knob {generic!r} needs MariaDB's {native}, which this server (MariaDB {self._version}) does not have"
                )
            hint = nearest(native, self._catalog, prefix="mariadb.")
            raise KnobError(
                f"unknown knob 'mariadb.{native}' on engine mariadb: this server (MariaDB {self._version}) "
                f"has no such variable in information_schema.SYSTEM_VARIABLES{hint}"
            )
        return self._knob_info(var, generic)

    def _knob_info(self, var: ServerVariable, generic: str | None) -> KnobInfo:
        native, desc = var.name, var.comment
        if native == "innodb_page_size":
            sizes = PAGE_SIZES if self.mode == "embedded" else (int(var.global_value or 0),)
            return KnobInfo(
                native, generic, "size", ApplyClass.REINIT, minimum=min(sizes), maximum=max(sizes),
                choices=tuple(str(s) for s in sizes), unit="bytes", default=int(var.global_value or DEFAULT_PAGE_SIZE),
                description="InnoDB page size, fixed when a data directory is created: one cached data directory per size",
            )
        if native == "innodb_checksum_algorithm":
            return KnobInfo(
                native, generic, "enum", ApplyClass.REINIT, choices=var.enum, default=var.global_value,
                description="page checksum algorithm; it governs tablespaces created afterwards, "
                "so the workload rebuilds its tables after a change",
            )
        if native == "innodb_flush_method" and generic:
            return KnobInfo(
                native, generic, "enum", ApplyClass.RESTART, choices=("on", "off", *var.enum), default=var.global_value,
                description="on = O_DIRECT (data files bypass the OS page cache), off = fsync; native values accepted",
            )
        readings: tuple[tuple[str, str], ...] = ()
        reading = ""
        if native == "innodb_read_ahead_threshold" and generic:
            desc = (
                "pages of an extent accessed in order before InnoDB reads the next 64 pages ahead "
                "(linear read-ahead); InnoDB's nearest analog of a multiblock read count"
            )
            # how a value reads in a verdict ("Best multiblock_read is 56" said nothing): an extent is 64 pages
            readings, reading = READ_AHEAD_READINGS, "read-ahead after {value} of 64 pages"
        apply = ApplyClass.RESTART if var.read_only else ApplyClass.SESSION if var.session else ApplyClass.RELOAD
        if var.type == "BOOLEAN":
            kind = "bool"
        elif var.type == "ENUM":
            kind = "enum"
        elif "INT" in var.type:
            kind = "size" if _SIZE_NAME.search(native) and native not in _COUNT_NAMES else "integer"
        elif var.type == "DOUBLE":
            kind = "real"
        else:
            kind = "string"  # SET, FLAGSET, VARCHAR: the server checks them (session ones in validation)
        return KnobInfo(
            native, generic, kind, apply,
            minimum=float(var.minimum) if var.minimum is not None else None,
            maximum=float(var.maximum) if var.maximum is not None else None,
            choices=var.enum if kind == "enum" else (),
            unit="bytes" if kind == "size" else "",
            default=var.global_value, description=desc, readings=readings, reading=reading,
        )

    def config_lines(self, settings: dict[str, object]) -> list[str]:
        """my.cnf lines under [mysqld] (the page size only takes at a new data directory)."""
        lines = ["[mysqld]"]
        for name, value in settings.items():
            native = self.knob(name).native
            note = "  # only when the data directory is created (mariadb-install-db)" if native == "innodb_page_size" else ""
            lines.append(f"{native} = {server_value(value)}{note}")
        return lines

    def check_settings(self, settings: dict[str, object], *, partial: bool = False) -> dict[str, Any]:
        """Canonical values for one setting; KnobError (naming the knob and what is
        accepted) for anything the server would refuse or silently round."""
        out: dict[str, object] = {}
        for name, value in settings.items():
            info = self.knob(name)
            canonical = self._normalise(name, info, value)
            if self.mode == "dsn":
                self._check_dsn_allowed(name, info, canonical)
            out[name] = canonical
        if not partial:  # the page size may be swept beside the pool: judge whole settings only
            self._check_pool_holds_pages(out)
        self._check_session_values(out)
        return out

    def _check_pool_holds_pages(self, settings: dict[str, Any]) -> None:
        """InnoDB refuses to start when the buffer pool is too small for its page
        size (measured on 10.11: 2, 3, 6, 11 and 21 MiB for 4k..64k pages); say so
        now, not as a failed start in the middle of a sweep."""
        by_native = {self.knob(n).native: (n, v) for n, v in settings.items()}
        if "innodb_buffer_pool_size" not in by_native:
            return
        name, pool = by_native["innodb_buffer_pool_size"]
        current = self.block_size() if self.mode == "dsn" else self.page_size  # a DSN server's own size
        page = int(by_native.get("innodb_page_size", (None, current))[1])
        need = min_buffer_pool_bytes(page)
        if int(pool) < need:
            raise KnobError(
                f"knob {name!r} (mariadb innodb_buffer_pool_size): {_amount(int(pool), self.knob(name))} is too small for "
                f"{page // 1024} kB pages: InnoDB needs at least {need // MIB} MiB at that page size; accepted: "
                f"{', '.join(f'{size // 1024}k: >= {min_buffer_pool_bytes(size) // MIB} MiB' for size in PAGE_SIZES)}"
            )

    def _normalise(self, name: str, info: KnobInfo, value: Any) -> Any:
        native = info.native
        where = f"knob {name!r} (mariadb {native})"
        var = self._catalog[native]
        if native == "innodb_page_size":
            try:
                size = parse_int(value, where, info)
            except KnobError:
                size = None
            if size not in [int(c) for c in info.choices]:
                raise KnobError(f"{where}: {value!r} is not accepted; accepted: {_page_sizes_text(info.choices)}")
            return size
        if info.kind == "enum" and info.generic == "direct_io":
            text = str(value).strip()
            if text.lower() in ("on", "true", "yes", "1") or value is True:
                return "O_DIRECT"
            if text.lower() in ("off", "false", "no", "0") or value is False:
                return "fsync"
        if info.kind in ("integer", "size"):
            number = parse_int(value, where, info)
            if (var.minimum is not None and number < var.minimum) or (var.maximum is not None and number > var.maximum):
                raise KnobError(f"{where}: {value!r} is out of range; accepted: {_range_text(info, var)}")
            if var.block and var.block > 1 and number % var.block:
                raise KnobError(
                    f"{where}: {value!r} is not a multiple of {_amount(var.block, info)}, and MariaDB would "
                    f"silently round it down to {_amount(number - number % var.block, info)}; accepted: {_range_text(info, var)}"
                )
            return number
        if info.kind == "real":
            try:
                real = float(value)
            except (TypeError, ValueError):
                raise KnobError(f"{where}: {value!r} is not accepted; accepted: {_range_text(info, var)}") from None
            if (var.minimum is not None and real < var.minimum) or (var.maximum is not None and real > var.maximum):
                raise KnobError(f"{where}: {value!r} is out of range; accepted: {_range_text(info, var)}")
            return real
        if info.kind == "bool":
            return parse_bool(value, where)
        if info.kind == "enum":
            if native == "innodb_checksum_algorithm" and str(value).strip().lower() in ("none", "off", "innodb", "strict_none", "strict_innodb"):
                raise KnobError(
                    f"{where}: {value!r} is not accepted: MariaDB {self._version} always checksums pages; "
                    f"accepted: {info.accepted()}"
                )
            return info.normalise(value, ENGINE_NAME, name)
        return str(value)

    def _check_session_values(self, settings: dict[str, object]) -> None:
        """Session-scope values are tried on a throwaway session: the server's own
        verdict, including the warnings it gives when it would round a value."""
        session = {n: v for n, v in settings.items() if self.knob(n).apply == ApplyClass.SESSION}
        if not session:
            return
        with self._admin() as conn, conn.cursor() as cur:
            for name, value in session.items():
                native = self.knob(name).native
                try:
                    cur.execute(f"SET SESSION {native} = %s", (sql_value(server_value(value)),))
                except pymysql.err.MySQLError as err:
                    raise KnobError(f"knob {name!r} (mariadb {native}): the server refuses {value!r}: {err.args[-1]}") from None
                cur.execute("SHOW WARNINGS")
                warnings = [w[2] for w in cur.fetchall()]
                if warnings:
                    raise KnobError(f"knob {name!r} (mariadb {native}): the server would not take {value!r} as is: {'; '.join(warnings)}")

    def _check_dsn_allowed(self, name: str, info: KnobInfo, value: object) -> None:
        var = self._catalog[info.native]
        if info.native == "innodb_page_size":
            return  # only the server's own size is among the choices
        if var.read_only:
            raise KnobError(
                f"knob {name!r} (mariadb {info.native}) is read-only on a running server and needs a restart; "
                "blocklab never restarts a server given by --dsn. Run it on the private instance (no --dsn)"
            )
        if info.apply != ApplyClass.SESSION and not self.allow_server_changes:
            raise KnobError(
                f"knob {name!r} (mariadb {info.native}) changes the whole server (SET GLOBAL); pass "
                "--allow-server-changes to let blocklab change it (the original value is restored at the end)"
            )

    def _native(self, name: str) -> str:
        return self._resolve(name)[0]
