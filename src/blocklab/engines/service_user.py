"""Running server processes under an unprivileged user when blocklab runs as root.

PostgreSQL and MariaDB refuse to run as root. On a laptop blocklab runs as a
normal user and the servers run as that user; as root we create (once) a
system user `blocklab` and run every server command as it.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
from pathlib import Path

SERVICE_USER = "blocklab"


def running_as_root() -> bool:
    return os.geteuid() == 0


def service_user() -> str | None:
    """The user server processes run as: None means 'this process's own user'."""
    if not running_as_root():
        return None
    ensure_service_user()
    return SERVICE_USER


def ensure_service_user() -> None:
    try:
        pwd.getpwnam(SERVICE_USER)
        return
    except KeyError:
        pass
    useradd = shutil.which("useradd") or "/usr/sbin/useradd"
    subprocess.run(
        [useradd, "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", SERVICE_USER],
        check=True,
        capture_output=True,
        text=True,
    )


def give_to_service_user(path: Path) -> None:
    """Make `path` (recursively) owned by the service user, if there is one."""
    user = service_user()
    if user is None:
        return
    entry = pwd.getpwnam(user)
    os.chown(path, entry.pw_uid, entry.pw_gid)
    for root, _dirs, files in os.walk(path):
        os.chown(root, entry.pw_uid, entry.pw_gid)
        for name in files:
            os.chown(os.path.join(root, name), entry.pw_uid, entry.pw_gid)


def ensure_traversable(path: Path) -> None:
    """The service user must reach `path`: every parent needs o+x. We only fix
    directories blocklab created (under its cache or run directories) and fail
    with advice on anything else, rather than loosen /root behind a user's back."""
    if service_user() is None:
        return
    for parent in reversed(path.resolve().parents):
        mode = parent.stat().st_mode
        if not mode & 0o001:
            raise PermissionError(
                f"the server user {SERVICE_USER!r} cannot enter {parent} (mode {oct(mode & 0o777)}); "
                f"choose a data location outside it with --data-dir or BLOCKLAB_CACHE"
            )
