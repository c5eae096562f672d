"""PostgreSQL's knobs: the generic vocabulary mapped onto its parameters, and
pg_settings rows turned into what blocklab accepts (type, range, unit, how a
change is applied)."""

from __future__ import annotations

import contextlib
import re
from typing import Any

from ..vocabulary import ApplyClass, KnobError, KnobInfo, parse_bool

# generic knob -> (native parameter, first PostgreSQL major version that has it)
GENERIC_TO_NATIVE: dict[str, tuple[str, int]] = {
    "multiblock_read": ("io_combine_limit", 17),
    "checksum": ("data_checksums", 9),
    "writers": ("io_workers", 18),
    "direct_io": ("debug_io_direct", 16),
    "buffer_cache": ("shared_buffers", 8),
    "block_size": ("block_size", 8),
}
NOT_ON_POSTGRES = {
    "block_checking": "PostgreSQL has no logical block checking (try engine sqlite: cell_size_check)",
    "io_slaves": "PostgreSQL has no read I/O threads; its I/O workers are the 'writers' knob (io_workers)",
}

_CONTEXT_APPLY = {
    "user": ApplyClass.SESSION,
    "superuser": ApplyClass.SESSION,
    "sighup": ApplyClass.RELOAD,
    "superuser-backend": ApplyClass.RELOAD,
    "backend": ApplyClass.RELOAD,
    "postmaster": ApplyClass.RESTART,
}
UNIT_BYTES = {"8kB": 8192, "kB": 1024, "MB": 1024**2, "B": 1}

Catalog = dict[str, dict[str, Any]]  # pg_settings: name -> column -> value


def native_name(name: str) -> str:
    """pg.NAME or a generic knob -> the parameter's name."""
    if name.startswith("pg."):
        return name[3:]
    return GENERIC_TO_NATIVE.get(name, (name, 0))[0]


def resolve(name: str, catalog: Catalog, version: str) -> KnobInfo:
    """A knob name (generic or pg.NAME) -> what this server accepts for it; KnobError otherwise."""
    import difflib

    native = name[3:] if name.startswith("pg.") else None
    generic = None if native else name
    if generic:
        if generic in NOT_ON_POSTGRES:
            raise KnobError(f"knob {generic!r} is not available on engine postgres: {NOT_ON_POSTGRES[generic]}")
        if generic not in GENERIC_TO_NATIVE:
            raise KnobError(
                f"unknown knob {generic!r}; generic knobs on postgres: {', '.join(sorted(GENERIC_TO_NATIVE))}, "
                "or any PostgreSQL parameter as pg.NAME"
            )
        native, since = GENERIC_TO_NATIVE[generic]
        if native not in catalog:
            raise KnobError(
                f"knob {generic!r} needs PostgreSQL's {native}, which this server "
                f"(PostgreSQL {version}) does not have; it exists from PostgreSQL {since} on"
            )
    assert native is not None
    row = catalog.get(native)
    if row is None:
        close = difflib.get_close_matches(native, list(catalog), n=4, cutoff=0.75)
        hint = f"; similar: {', '.join('pg.' + c for c in close)}" if close else ""
        raise KnobError(f"unknown PostgreSQL parameter 'pg.{native}' on this server (PostgreSQL {version}){hint}")
    return knob_info(native, generic, row)


def knob_info(native: str, generic: str | None, row: dict[str, Any]) -> KnobInfo:
    if native == "data_checksums":
        return KnobInfo(native, generic, "bool", ApplyClass.RESTART, default=row["setting"], description=row["desc"])
    if native == "block_size":
        return KnobInfo(
            native, generic, "enum", ApplyClass.REINIT, choices=(row["setting"],), unit="bytes",
            default=int(row["setting"]),
            description="fixed when PostgreSQL is compiled: only the current size is accepted",
        )
    if native == "debug_io_direct":
        return KnobInfo(native, generic or None, "bool" if generic else "enum", ApplyClass.RESTART,
                        choices=() if generic else ("", "data", "wal", "wal_init", "data,wal", "data,wal,wal_init"),
                        default=row["boot"], description=row["desc"])
    apply = _CONTEXT_APPLY.get(row["context"])
    if apply is None:
        raise KnobError(f"PostgreSQL parameter {native!r} cannot be changed (context {row['context']})")
    kind = {"bool": "bool", "integer": "integer", "enum": "enum", "real": "real", "string": "string"}[row["vartype"]]
    unit = row["unit"] or ""
    return KnobInfo(
        native, generic, "size" if unit in UNIT_BYTES and kind == "integer" else kind, apply,
        minimum=float(row["min"]) if row["min"] is not None else None,
        maximum=float(row["max"]) if row["max"] is not None else None,
        choices=tuple(row["enumvals"] or ()), unit=_unit_label(unit), unit_bytes=UNIT_BYTES.get(unit),
        default=_typed_default(row["boot"], kind), description=row["desc"],
    )


def check_dsn_allowed(name: str, info: KnobInfo, allow_server_changes: bool) -> None:
    """What blocklab may change on someone else's server."""
    if info.apply >= ApplyClass.RESTART:
        raise KnobError(
            f"knob {name!r} (pg.{info.native}) needs a server {info.apply.label}; blocklab never restarts "
            "a server given by --dsn. Run it on the embedded engine (no --dsn)"
        )
    if info.apply == ApplyClass.RELOAD and not allow_server_changes:
        raise KnobError(
            f"knob {name!r} (pg.{info.native}) changes the whole server; pass --allow-server-changes "
            "to let blocklab change it (the original value is restored at the end)"
        )


def check_combine_ceiling(settings: dict[str, Any], catalog: Catalog) -> None:
    """io_combine_limit above io_max_combine_limit is silently capped by PostgreSQL: refuse it."""
    combine = next((v for k, v in settings.items() if native_name(k) == "io_combine_limit"), None)
    if combine is None:
        return
    ceiling = next((v for k, v in settings.items() if native_name(k) == "io_max_combine_limit"), None)
    if ceiling is None:
        ceiling = int(catalog.get("io_max_combine_limit", {}).get("setting", 128))
    if combine > ceiling:
        raise KnobError(
            f"knob 'multiblock_read' = {combine} exceeds io_max_combine_limit = {ceiling} blocks, "
            "so PostgreSQL would silently cap it; raise pg.io_max_combine_limit (restart) in [engine.settings]"
        )


def conf_value(info: KnobInfo, value: object) -> str:
    """A canonical value as postgresql.conf and SET take it."""
    if info.native == "debug_io_direct" and info.kind == "bool":
        return "data" if value else ""
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def same_value(info: KnobInfo, asked: Any, setting: str) -> bool:
    """Does pg_settings' raw `setting` say what was asked (a canonical value)?"""
    if info.native == "debug_io_direct" and info.kind == "bool":
        return ("data" in setting.split(",")) == bool(asked)
    if info.kind == "bool" or isinstance(asked, bool):
        return setting.lower() in ("on", "true", "1") if asked else setting.lower() in ("off", "false", "0")
    if info.kind in ("integer", "size") or info.native == "block_size":
        try:
            return int(float(setting)) == int(asked)
        except (TypeError, ValueError):
            return False
    if info.kind == "real":
        try:
            return abs(float(setting) - float(asked)) <= 1e-9 * max(1.0, abs(float(asked)))
        except (TypeError, ValueError):
            return False
    return setting.lower() == str(asked).lower()


def conf_quote(value: str) -> str:
    if re.fullmatch(r"[A-Za-z0-9_.\-]+", value):
        return value
    return "'" + value.replace("'", "''") + "'"


def _unit_label(unit: str) -> str:
    return {"8kB": "8 kB blocks", "kB": "kB", "MB": "MB", "B": "bytes"}.get(unit, unit)


def _typed_default(boot: str | None, kind: str) -> int | bool | str | None:
    if boot is None:
        return None
    if kind == "integer":
        with contextlib.suppress(ValueError):
            return int(boot)
    if kind == "bool":
        return parse_bool(boot, "default")
    return boot
