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
        return _usable_directory(Path(env).expanduser().resolve(), f"BLOCKLAB_CACHE={env}",
                                 "unset it for the default, or set it to a directory on the disk to measure")
    if running_as_root():
        return Path("/var/tmp/blocklab")
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "blocklab"


def results_root() -> Path:
    if env := os.environ.get("BLOCKLAB_RESULTS"):
        path = Path(env).expanduser()
        if path.exists() and not path.is_dir():  # created when a run starts (--out's checks then apply)
            raise SpecError(f"BLOCKLAB_RESULTS={env}: not a directory (it is a file); unset it for ./results, or use --out DIR")
        return path
    return Path("results")


def _usable_directory(path: Path, named: str, fix: str) -> Path:
    """A directory blocklab may create and write in, or one line naming the variable
    that points elsewhere (a regular file, /proc, a read-only place)."""
    if path.exists() and not path.is_dir():
        raise SpecError(f"{named}: not a directory (it is a file); {fix}")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise SpecError(f"{named}: cannot create that directory ({err.strerror or err}); {fix}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise SpecError(f"{named}: blocklab cannot write in that directory; {fix}")
    return path


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
