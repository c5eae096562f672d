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
import time
from pathlib import Path

from .base import EngineError

SERVICE_USER = "blocklab"


def running_as_root() -> bool:
    return os.geteuid() == 0


def service_user() -> str | None:
    """The user server processes run as: None means 'this process's own user'."""
    if not running_as_root():
        return None
    ensure_service_user()
    return SERVICE_USER


def _user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


def ensure_service_user(name: str = SERVICE_USER, attempts: int = 5) -> None:
    """Create the system user `name` unless it exists. Two blocklab processes starting at
    once on a new machine (two runs, or the suite's two workers) may both find it missing:
    the one that loses the race sees useradd fail (the user exists, or /etc/passwd is locked
    by the other's useradd), so a failure counts only when the user is still missing, and a
    locked file is tried again."""
    useradd = shutil.which("useradd") or "/usr/sbin/useradd"
    attempts = max(1, attempts)
    result: subprocess.CompletedProcess[str] | None = None
    for attempt in range(attempts):
        if _user_exists(name):
            return
        result = subprocess.run(
            [useradd, "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode == 0 or _user_exists(name):
            return
        if attempt + 1 < attempts:
            time.sleep(0.2 * (attempt + 1))
    assert result is not None  # at least one attempt ran
    raise EngineError(f"could not create the system user {name!r} that runs the database servers: "
                       f"{useradd} exited {result.returncode}: {(result.stderr or result.stdout).strip()}")


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
