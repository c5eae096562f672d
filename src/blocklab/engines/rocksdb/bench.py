"""Running db_bench: one process per measured benchmark, watched from before it starts.

RocksDB has no server. A measured "session" is one db_bench process, and the
probes blocklab puts around every run (probes/io.py RunProbe: the engine
processes' /proc/<pid>/io and CPU, read when the window opens and when it
closes) need that process's pid before the run starts and its counters after
it ends. So a session spawns the process at once, held at a gate: a shell
that waits for its command line on a pipe and then `exec`s db_bench, keeping
its pid. `run(args)` sends the command and waits for the exit *without
reaping* (waitid WNOWAIT): the zombie's /proc/<pid>/io and /proc/<pid>/stat
still hold the whole process's storage reads and CPU when the probe window
closes. close() reaps it.

Every measured benchmark runs in its own process (its statistics are
cumulative for the process, its report file is truncated per benchmark).
The exact command is kept (`command_line`) so a user can run it by hand.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..base import EngineError
from ..host import parent_death_preexec
from .flags import c_locale_env
from .output import Result, last_lines, parse, report_series

# Reads the command line from its stdin (the gate pipe), one argument a line, an
# empty line ends it; then becomes db_bench (exec keeps the pid) with stdin from
# /dev/null. EOF with no command (a session closed unused) exits quietly. The
# shell's `read` takes a pipe one byte at a time, so it never reads past the end.
_GATE = (
    'set --; while IFS= read -r a; do [ -z "$a" ] && break; set -- "$@" "$a"; done; '
    '[ $# -gt 0 ] || exit 0; exec "$@" </dev/null'
)
STOP_GRACE_S = 5.0


def command_line(binary: str, args: list[str]) -> str:
    """The command as a shell takes it (LC_ALL=C as blocklab runs it)."""
    return "LC_ALL=C " + shlex.join([binary, *args])


@dataclass
class Outcome:
    """A finished db_bench process: what it printed, how it ended, how long it took."""

    command: str
    returncode: int
    stdout: str
    stderr: str
    wall_s: float
    result: Result | None = None
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def how(self) -> str:
        if self.returncode < 0:
            try:
                name = signal.Signals(-self.returncode).name
            except ValueError:
                name = f"signal {-self.returncode}"
            return f"was killed by {name}"
        return f"exited with code {self.returncode}"

    def failure(self, what: str) -> EngineError:
        return EngineError(
            f"{what} {self.how}; its last stderr lines: {last_lines(self.stderr) or '(none)'}; "
            f"command: {self.command}"
        )


class BenchProcess:
    """One db_bench process: spawned held at the gate, run once, reaped by close()."""

    def __init__(self, binary: str, workdir: Path, label: str):
        self.binary = binary
        workdir.mkdir(parents=True, exist_ok=True)
        self.stdout_path = workdir / f"{label}.stdout"
        self.stderr_path = workdir / f"{label}.stderr"
        self.report_path = workdir / f"{label}.report.csv"
        for path in (self.stdout_path, self.stderr_path, self.report_path):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        read_end, self._gate = os.pipe()
        try:
            with open(self.stdout_path, "wb") as out, open(self.stderr_path, "wb") as err:
                self.proc = subprocess.Popen(
                    ["/bin/sh", "-c", _GATE, "blocklab-db_bench"], stdin=read_end, stdout=out, stderr=err,
                    env=c_locale_env(), preexec_fn=parent_death_preexec(),
                )
        except BaseException:
            os.close(self._gate)
            raise
        finally:
            os.close(read_end)
        self.command = ""
        self.benchmark = ""
        self.outcome: Outcome | None = None
        self._exited = False
        self._reaped = False
        self._lock = threading.Lock()

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def alive(self) -> bool:
        """Not reaped yet (held, running, or a zombie whose counters can still be read)."""
        return not self._reaped

    def run(self, args: list[str], benchmark: str) -> Outcome:
        """Run db_bench with `args` in this process and wait for it; the parsed result,
        or EngineError with db_bench's last stderr lines when it failed or printed no result."""
        if self.command:
            raise EngineError("a db_bench session runs one benchmark; open another session")
        self.command = command_line(self.binary, args)
        self.benchmark = benchmark
        t0 = time.perf_counter()
        with self._lock:
            os.write(self._gate, ("\n".join([self.binary, *args]) + "\n\n").encode())
            os.close(self._gate)
            self._gate = -1
        code = self._wait_exit()
        wall = time.perf_counter() - t0
        stdout = self.stdout_path.read_text(errors="replace")
        stderr = self.stderr_path.read_text(errors="replace")
        outcome = Outcome(self.command, code, stdout, stderr, wall)
        self.outcome = outcome
        if code != 0:
            raise outcome.failure(f"db_bench {benchmark}")
        outcome.result = parse(stdout, stderr, benchmark)
        if outcome.result is None:
            raise outcome.failure(f"db_bench {benchmark} printed no result line and")
        outcome.result.series = report_series(self.report_path)
        return outcome

    def _wait_exit(self) -> int:
        """Wait for the exit, leaving the process a zombie (its /proc files stay readable)."""
        try:
            info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOWAIT)
        except ChildProcessError:  # reaped by close() from another thread (an interrupt)
            self._exited = True
            return self.proc.returncode if self.proc.returncode is not None else -signal.SIGTERM
        self._exited = True
        assert info is not None  # None only with WNOHANG
        if info.si_code == os.CLD_EXITED:
            return int(info.si_status)
        return -int(info.si_status)  # killed or dumped: the signal, as subprocess reports it

    def cancel(self) -> None:
        """Stop a running benchmark (from another thread: Ctrl-C in the middle of a point)."""
        if not self._exited and not self._reaped:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGTERM)

    def close(self) -> None:
        """Release an unused gate, stop a benchmark still running, reap the process."""
        if self._reaped:
            return
        with self._lock:
            if self._gate >= 0:
                os.close(self._gate)  # the shell reads EOF and exits without running anything
                self._gate = -1
        if self.command and not self._exited:
            self.cancel()  # closed while running: an error elsewhere, or an interrupt
        try:
            self.proc.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._reaped = True
        for path in (self.stdout_path, self.stderr_path, self.report_path):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()


def run_tool(args: list[str], what: str, timeout_s: float | None = None) -> subprocess.CompletedProcess[str]:
    """An unmeasured run (a build, a read-back, sst_dump): its output, or EngineError with its last lines."""
    try:
        done = subprocess.run(args, capture_output=True, text=True, errors="replace", env=c_locale_env(),
                              timeout=timeout_s, check=False, preexec_fn=parent_death_preexec())
    except subprocess.TimeoutExpired:
        raise EngineError(f"{what} did not finish in {timeout_s:.0f} s; command: {command_line(args[0], args[1:])}") from None
    except OSError as err:
        raise EngineError(f"{what} could not start: {err}") from None
    if done.returncode != 0:
        raise Outcome(command_line(args[0], args[1:]), done.returncode, done.stdout, done.stderr, 0.0).failure(what)
    return done
