"""Shared fixtures. Engine tests start the engines they need themselves, in a
cache directory of their own under /var/tmp (the unprivileged server user
cannot enter pytest's /tmp/pytest-of-root).

`make test` runs the suite in two pytest-xdist workers: each worker is its own
pytest session, so the session fixtures below (the cache directory, the
pristine engine homes, the shared PostgreSQL) are made once per worker, and
servers started by tests take free ports or sockets in their own directories."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# The recipes stop by a rule within a budget (issue 26): a run adds blocks until its verdict settles.
# The suite's runs are the fixed plans their --repeats ask for, whoever builds their environment;
# tests/test_budget.py gives --budget (or drops this) where a test is about budgets.
os.environ["BLOCKLAB_BUDGET"] = "off"


FIO_MISSING = "fio is not installed: run `make test` (it installs it as root) or `sudo apt-get install fio`"


@pytest.fixture
def fio_installed():
    """One rule for every test that runs fio: a machine without it fails with what to
    install, never skips (make test installs it)."""
    if shutil.which("fio") is None:
        pytest.fail(FIO_MISSING)


@pytest.fixture(scope="session")
def cache_dir() -> Path:
    path = Path(tempfile.mkdtemp(prefix="blocklab-test-", dir="/var/tmp"))
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_engine(cache_dir, pristine_postgres):
    """One embedded PostgreSQL 18 for the session's engine tests."""
    from blocklab.engines.postgres import PostgresEngine

    engine = PostgresEngine(cache_dir=pristine_postgres(cache_dir / "shared"))
    engine.start()
    yield engine
    engine.stop()


@pytest.fixture(scope="session")
def pristine_postgres_home(cache_dir) -> Path:
    """The embedded PostgreSQL's home as blocklab's first run in an empty cache leaves it
    before starting it (EmbeddedCluster.ensure: initdb, the include line, the service
    user's ownership), made once for the session by that same code."""
    from blocklab.engines.postgres.instance import EmbeddedCluster

    cluster = EmbeddedCluster(cache_dir / "pristine" / "postgres")
    cluster.home.mkdir(parents=True)  # start() makes it, taking the cluster's lock
    cluster.ensure()
    assert (cluster.pgdata / "PG_VERSION").exists() and not (cluster.pgdata / "postmaster.pid").exists()
    return cluster.home


@pytest.fixture(scope="session")
def pristine_postgres(pristine_postgres_home) -> Callable[[Path], Path]:
    """seed(cache) puts a copy of the pristine embedded PostgreSQL in the cache directory
    `cache` (where PostgresEngine(cache_dir=cache) looks for it) and returns `cache`."""

    def seed(cache: Path) -> Path:
        cache.mkdir(parents=True, exist_ok=True)
        target = cache / pristine_postgres_home.name
        assert not target.exists(), f"{target} is there already: seed an empty cache"
        subprocess.run(["cp", "-a", str(pristine_postgres_home), str(target)], check=True)
        return cache

    return seed


@pytest.fixture(scope="session")
def pristine_mariadb(cache_dir) -> Callable[..., Path]:
    """seed(cache, *page_sizes) puts copies of pristine MariaDB data directories (one per
    InnoDB page size, 16k by default) where MariadbEngine(cache_dir=cache) looks for them,
    and returns `cache`. Each size is installed once a session, by the product's own
    install step (mariadb-install-db into mariadb-SIZE/data), when a test first asks for it."""
    from blocklab.engines.mariadb import MariadbEngine
    from blocklab.engines.service_user import ensure_traversable

    templates = cache_dir / "pristine-mariadb"

    def template(size: int) -> Path:
        engine = MariadbEngine(cache_dir=templates, page_size=size)
        home = engine.home()
        if not (engine.datadir / "mysql").is_dir():
            home.mkdir(parents=True, exist_ok=True)  # start() makes it, taking the instance's lock
            ensure_traversable(home)
            engine._ensure_datadir()
        return home

    def seed(cache: Path, *page_sizes: int) -> Path:
        cache.mkdir(parents=True, exist_ok=True)
        for size in page_sizes or (16384,):
            home = template(size)
            target = cache / home.name
            assert not target.exists(), f"{target} is there already: seed an empty cache"
            subprocess.run(["cp", "-a", str(home), str(target)], check=True)
        return cache

    return seed


@pytest.fixture
def cli_env(cache_dir, tmp_path, request) -> dict[str, str]:
    """Environment for running the `blocklab` command in a subprocess. Each test has a
    cache of its own; its embedded PostgreSQL is a copy of a pristine one (initdb's output,
    made once a session: initdb costs seconds of CPU a test) unless the test is marked
    empty_cache (a test about what a run leaves in an empty cache)."""
    cache = cache_dir / f"cli-{tmp_path.name}"
    if request.node.get_closest_marker("empty_cache") is None:
        request.getfixturevalue("pristine_postgres")(cache)
    env = dict(os.environ)
    env["BLOCKLAB_CACHE"] = str(cache)
    env["BLOCKLAB_RESULTS"] = str(tmp_path / "results")
    env.pop("FORCE_COLOR", None)
    # the device twin (fio after the cells, seconds per pattern) only where a test asks for it:
    # tests/test_device_twin.py runs it with --device-twin on
    env["BLOCKLAB_DEVICE_TWIN"] = "off"
    # the recipes' budgets (blocks added until the verdict settles) only where a test asks for one:
    # tests/test_budget.py gives --budget; every other run is the fixed plan of its --repeats blocks
    env["BLOCKLAB_BUDGET"] = "off"
    return env


def blocklab_bin() -> str:
    """The `blocklab` of the Python running the tests (its virtualenv), not whatever is on PATH."""
    beside = Path(sys.executable).parent / "blocklab"
    return str(beside) if beside.exists() else shutil.which("blocklab") or str(ROOT / ".venv/bin/blocklab")


def ctrl_c_reaches_child() -> None:
    """preexec_fn for a child a test interrupts with SIGINT: a shell that runs the
    suite in the background (`make test &`, some CI runners) starts it with
    SIGINT ignored, which every child inherits and Python then keeps; the child
    must see Ctrl-C as a user's terminal delivers it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)



@pytest.fixture
def ctrl_c_raises():
    """For a test that interrupts itself: Python's Ctrl-C handler for the test's
    duration. A suite started in the background inherits SIGINT ignored, and
    then neither a SIGINT nor _thread.interrupt_main() raises KeyboardInterrupt."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def interrupt_mid_point(run: Callable[[], object], stop_sessions: Callable[[], None]) -> bool:
    """Ctrl-C two seconds into `run()` (a point whose session loops would run an
    hour) and expect KeyboardInterrupt. Returns True if the run had cancelled
    its own sessions; False if a watchdog had to stop them after a minute so
    that the test fails instead of hanging (no duration is asserted)."""
    import threading

    interrupt = threading.Timer(2.0, os.kill, (os.getpid(), signal.SIGINT))
    watchdog_fired = threading.Event()

    def watchdog() -> None:
        watchdog_fired.set()
        stop_sessions()

    guard = threading.Timer(60.0, watchdog)
    interrupt.start()
    guard.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            run()
    finally:
        guard.cancel()
        interrupt.cancel()
    return not watchdog_fired.is_set()
