"""What a run owes when it changed something that is not its own: a DSN server's
settings (ALTER SYSTEM, SET GLOBAL) and the machine's (the disk's read-ahead).
It is kept in the run directory (restore.json) from the cell that changed it
until stop() has put it back; `blocklab restore DIR`, and a resumed run before
it measures anything, put back what a run that ended badly left changed."""

from __future__ import annotations

from typing import Any

from .engines import make_engine
from .engines.base import Engine
from .engines.host import restore_host
from .results import RESTORE_FILE, ResultsError, RunDir


def keep_owed_restore(engine: Engine, run_dir: RunDir) -> None:
    """What a server given by DSN is still owed (its original settings) is kept in
    the run directory until stop() has put it back, so that a run that ends
    badly leaves `blocklab restore DIR` able to finish the job."""
    owed = engine.owed_restore()
    if owed:
        run_dir.write_json(RESTORE_FILE, owed)


def put_back_owed(owed: Any, where: str) -> list[str]:
    """Put back what restore.json says a run still owes: the machine's settings
    (the disk's read-ahead) and a DSN server's; what was done, one line each."""
    try:
        kind, dsn, settings, host = owed["engine"], owed.get("dsn"), dict(owed["settings"]), dict(owed.get("host") or {})
    except (KeyError, TypeError, ValueError):
        raise ResultsError(f"{where}: not what blocklab writes (engine, dsn, settings, host)") from None
    done = restore_host(host)
    if settings:
        if not dsn:
            raise ResultsError(f"{where}: server settings {sorted(settings)} but no dsn to reach the server")
        engine = make_engine(kind, dsn=dsn, allow_server_changes=True)
        engine.start()
        try:
            done += engine.restore_owed(settings)
        finally:
            engine.stop()
    return done


def restore_hint(run_dir: RunDir) -> str:
    if run_dir.file(RESTORE_FILE).exists():
        return f"the server's original settings are kept in {run_dir.file(RESTORE_FILE)}: run `blocklab restore {run_dir.path}` when it answers again"
    return "no server setting is owed"
