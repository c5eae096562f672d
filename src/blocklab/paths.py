"""Where blocklab keeps its engines' data directories and its results, and
whether a results directory the user names can be written."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from .engines.service_user import running_as_root
from .errors import SpecError


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


def check_out_dir(out: Path) -> None:
    """--out must be a directory blocklab can create and write, said before anything runs
    (a temporary directory is made beside it and removed again)."""
    if out.exists() and not out.is_dir():
        raise SpecError(f"--out {out}: exists and is not a directory; give a new or an existing directory")
    parent = out if out.exists() else next((p for p in out.parents if p.exists()), Path("."))
    try:
        with tempfile.TemporaryDirectory(dir=parent, prefix=".blocklab-write-test-"):
            pass
    except OSError as err:
        raise SpecError(f"--out {out}: cannot create or write there ({parent}: {err.strerror or err}); give a directory you may write") from None
