"""A fleet on one machine for the tests: a scheduler and workers as separate
processes (`blocklab fleet up`, `blocklab worker`), each worker with a cache of
its own (its own embedded PostgreSQL), on 127.0.0.1.

Every process started here is stopped at the end, however the test ended:
SIGTERM (a worker then stops its engines), SIGKILL after a grace time, and the
postmaster of every worker's cache stopped too (a worker the test SIGKILLed
leaves its server behind, as a crashed host would)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

from conftest import blocklab_bin

START_TIMEOUT_S = 90  # importing Dask and blocklab on a loaded 2-core machine


class Fleet:
    def __init__(self, tmp: Path, env: dict[str, str], certs: Path | None = None):
        self.tmp = tmp
        self.env = dict(env)
        self.env.pop("FORCE_COLOR", None)
        self.certs = certs
        self.address = ""
        self.scheduler: subprocess.Popen | None = None
        self.workers: dict[str, subprocess.Popen] = {}
        self.caches: dict[str, Path] = {}
        self._all: list[subprocess.Popen] = []

    @property
    def trust(self) -> list[str]:
        return ["--certs", str(self.certs)] if self.certs else ["--insecure"]

    def start_scheduler(self) -> str:
        listen = "tls://127.0.0.1:0" if self.certs else "tcp://127.0.0.1:0"
        log = self.tmp / "scheduler.log"
        self.scheduler = self._spawn([blocklab_bin(), "fleet", "up", "--listen", listen, *self.trust], log)
        line = self._wait_for(log, "scheduler at ", self.scheduler)
        self.address = line.split()[2]
        return self.address

    def start_worker(self, name: str, cache: Path) -> subprocess.Popen:
        return self.start_workers({name: cache})[name]

    def start_workers(self, caches: dict[str, Path]) -> dict[str, subprocess.Popen]:
        """Workers started together (each imports Dask and blocklab: seconds), then waited for."""
        started = {}
        for name, cache in caches.items():
            cache.mkdir(parents=True, exist_ok=True)
            os.chmod(cache, 0o755)  # the engines' service user must enter it
            self.caches[name] = cache
            starts = sum(1 for _ in self.tmp.glob(f"worker-{name}*.log"))  # a restarted worker's log is a new file:
            log = self.tmp / f"worker-{name}{f'-{starts + 1}' if starts else ''}.log"  # the old one holds the first start's line
            proc = self._spawn([blocklab_bin(), "worker", "--scheduler", self.address, "--name", name, "--cache", str(cache), *self.trust], log)
            started[name] = (proc, log)
        for name, (proc, log) in started.items():
            self._wait_for(log, f"worker {name} at ", proc)
            self.workers[name] = proc
        return {name: proc for name, (proc, _) in started.items()}

    def run(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
        return subprocess.run([blocklab_bin(), *args], env=self.env, capture_output=True, text=True, timeout=timeout)

    def popen(self, args: list[str], log: Path) -> subprocess.Popen:
        return self._spawn([blocklab_bin(), *args], log)

    def kill_worker(self, name: str) -> None:
        """SIGKILL, as a host that dies: no goodbye to the scheduler, its server left running."""
        proc = self.workers.pop(name)
        proc.kill()
        proc.wait(timeout=30)

    def _spawn(self, argv: list[str], log: Path) -> subprocess.Popen:
        with open(log, "ab") as out:
            proc = subprocess.Popen(argv, env=self.env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        self._all.append(proc)
        return proc

    def _wait_for(self, log: Path, text: str, proc: subprocess.Popen) -> str:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            for line in log.read_text(errors="replace").splitlines():
                if line.startswith(text):
                    return line
            if proc.poll() is not None:
                raise AssertionError(f"{' '.join(map(str, proc.args))} exited {proc.returncode}:\n{log.read_text(errors='replace')}")
            time.sleep(0.2)
        raise AssertionError(f"no {text!r} in {log} after {START_TIMEOUT_S} s:\n{log.read_text(errors='replace')}")

    def stop(self) -> None:
        """Every process this fleet started, then every server its workers' caches hold."""
        live = [p for p in self._all if p.poll() is None]
        workers_first = [p for p in live if p is not self.scheduler] + ([self.scheduler] if self.scheduler in live else [])
        for proc in workers_first:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGCONT)  # a test may have stopped it
                proc.terminate()
        deadline = time.monotonic() + 30
        for proc in workers_first:
            try:
                proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        for cache in self.caches.values():
            stop_postmaster(cache)


def stop_postmaster(cache: Path) -> None:
    """The embedded PostgreSQL of a cache, if one still runs (its worker was killed)."""
    pid_file = cache / "postgres" / "data" / "postmaster.pid"
    try:
        pid = int(pid_file.read_text().splitlines()[0])
    except (OSError, ValueError, IndexError):
        return
    from blocklab.engines.base import process_alive  # a zombie (nobody reaps here) counts as gone

    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGINT)  # fast shutdown
        deadline = time.monotonic() + 20
        while process_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if process_alive(pid):
            os.kill(pid, signal.SIGKILL)


def rows_of(run_dir: Path) -> list[dict]:
    import json

    path = run_dir / "results.jsonl"
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        with contextlib.suppress(ValueError):
            out.append(json.loads(line))
    return out
