"""Someone else's MariaDB by DSN: mysql://user[:password]@host[:port][/blocklab][?socket=PATH],
mariadb://..., or a bare socket path. Passwords come from the DSN, MYSQL_PWD or
~/.my.cnf and are never shown (`where` is the printable form)."""

from __future__ import annotations

import getpass
import os
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from ..base import KnobError

DATABASE = "blocklab"  # the only database blocklab works in, on any server



class ConnectParams(TypedDict, total=False):
    """The keyword arguments of pymysql.connect a DSN or the private server gives."""

    unix_socket: str
    host: str
    port: int
    user: str
    password: str
    read_default_file: str

@dataclass(frozen=True)
class Dsn:
    params: ConnectParams  # pymysql.connect keyword arguments (password included, never shown)
    where: str  # printable: user@host:port or user@socket


def parse_dsn(dsn: str) -> Dsn:
    """mysql://user[:password]@host[:port][/blocklab][?socket=PATH], mariadb://..., or a socket path."""
    params: ConnectParams = {}
    if not dsn.strip() or "\x00" in dsn:
        raise KnobError(f"--dsn {dsn!r}: empty or holds a NUL byte; expected mysql://USER@HOST:PORT/ or a socket path")
    if dsn.startswith("/"):
        params["unix_socket"] = dsn
        params["user"] = getpass.getuser()
        database = ""
    else:
        try:
            url = urllib.parse.urlsplit(dsn)
            url.port  # noqa: B018 (parsed lazily: a bad port raises here, not at the connect)
        except ValueError as err:
            raise KnobError(f"--dsn: not a MariaDB DSN ({err}); expected mysql://USER@HOST:PORT/ or a socket path") from None
        if url.scheme not in ("mysql", "mariadb"):
            raise KnobError(f"--dsn: a MariaDB DSN starts with mysql:// or mariadb:// (or is a socket path), not {dsn.split(':')[0]!r}")
        query = urllib.parse.parse_qs(url.query)
        if url.username:
            params["user"] = urllib.parse.unquote(url.username)
        if url.password:
            params["password"] = urllib.parse.unquote(url.password)
        sock = (query.get("socket") or query.get("unix_socket") or [""])[0]
        if sock:
            params["unix_socket"] = sock
        elif url.hostname:
            params["host"] = url.hostname
            params["port"] = url.port or 3306
        else:
            params["host"] = "localhost"
            params["port"] = url.port or 3306
        database = url.path.lstrip("/")
    if database and database != DATABASE:
        raise KnobError(
            f"--dsn: blocklab works only in its own database {DATABASE!r} on a server given by DSN, "
            f"not {database!r}: leave the database out of the DSN or name {DATABASE!r}"
        )
    if "password" not in params and os.environ.get("MYSQL_PWD"):
        params["password"] = os.environ["MYSQL_PWD"]
    mycnf = Path.home() / ".my.cnf"
    if mycnf.is_file():
        params["read_default_file"] = str(mycnf)  # fills only what the DSN left out
    params.setdefault("user", getpass.getuser())
    where = f"{params['user']}@" + (params["unix_socket"] if "unix_socket" in params else f"{params['host']}:{params['port']}")
    return Dsn(params, where)
