"""Where blocklab keeps its engines' data directories and its results."""

from __future__ import annotations

import os
from pathlib import Path

from .engines.service_user import running_as_root


def cache_root() -> Path:
    """Data directories of embedded engines, reused across runs.

    As root the servers run as an unprivileged user who cannot enter /root, so
    the default moves to /var/tmp (on the real disk, unlike a tmpfs /tmp)."""
    if env := os.environ.get("BLOCKLAB_CACHE"):
        return Path(env).expanduser().resolve()
    if running_as_root():
        return Path("/var/tmp/blocklab")
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "blocklab"


def results_root() -> Path:
    return Path(os.environ.get("BLOCKLAB_RESULTS", "results"))
