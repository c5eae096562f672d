"""CPU stack profiles of the engine's own processes with perf (seed 001's first
step: "since the whole elapsed time is spent on CPU I started with stack
profiling").

    problem = perf_problem()              # None, or why perf cannot run here and the fix
    profiler = CellProfiler(engine, hz=DEFAULT_HZ)
    with observing(profiler):             # the runner, around one cell's workload.run
        ... every RunProbe window of the cell samples the engine's processes ...
    profiler.profile                       # FoldedProfile: folded stacks, samples, CPU seconds

The processes are the engine's to name (its `cpu_profile` dialect,
engines/base.py ProfileTargets): PostgreSQL's server processes, mariadbd,
db_bench, blocklab's own process for SQLite. perf samples them on the software
clock (`-e cpu-clock`: a VM has no hardware counters), and `perf script` is
folded here into one line per distinct stack, root first (`comm;main;...;leaf
samples`), the format flame graphs are drawn from (report/flame.py).

Frames perf could not name (a stripped binary, a library without symbols) are
never shown as addresses: they become `[unnamed in <object>]`, and the profile
counts the samples whose own (leaf) frame is unnamed, so the report can say
what share of the CPU it cannot attribute.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import shutil
import signal
import subprocess
import tempfile
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, cast

from ..engines.base import CpuProfileDialect, Engine, ProfileTargets

PERF_ENV = "BLOCKLAB_PERF"  # the perf binary to use (default: `perf` on PATH)
PARANOID_FILE = Path("/proc/sys/kernel/perf_event_paranoid")
# Samples per second per process. 99 (not 100: off the kernel's 100/250 Hz ticks, so
# sampling does not beat with timer work): benchmarks/cpu_profile_overhead.py measures
# what it costs the engine (BENCHMARKS.md), the default must stay under 3%
DEFAULT_HZ = 99
MAX_HZ = 999
# What sampling cost the engine, measured here (BENCHMARKS.md): the report states it
OBSERVER_EFFECT = (
    "at the default 99 Hz, benchmarks/cpu_profile_overhead.py measured (2026-11-26, a 2-vCPU VM at load 11-15, "
    "interleaved pairs) the sampled engine's CPU seconds at -1.1% [-3.8%, +1.7%] on a compiled CPU loop, where the "
    "load's noise is smallest (999 Hz: +3.4% [+0.1%, +6.7%], over the 3% budget); on the checksum recipe's insert "
    "cells +2.6% [-10%, +17%] (PostgreSQL) and +1.3% [-14%, +20%] (SQLite), whose intervals the machine's load "
    "widens (see BENCHMARKS.md)"
)
# Call graphs by DWARF unwinding, not frame pointers: the embedded PostgreSQL and
# Debian's mariadbd and db_bench are built without frame pointers (heap_insert does not
# push %rbp), and `-g` there gave stacks one or two frames deep ending in garbage
# addresses; `--call-graph dwarf` unwound every sample to _start through .eh_frame.
# Its cost: perf copies this many bytes of each sampled thread's stack (16 kB: a
# PostgreSQL backend's deepest insert path, PL/pgSQL included, is ~30 frames and fits),
# about 1.5 MB of perf.data per second at 99 Hz against 25 kB with frame pointers, and
# `perf script` unwinds it afterwards (0.1-0.3 s a cell here, outside the timing). The
# sampled process pays only the copy, a few microseconds per sample: measured with the
# rest of the observer effect in benchmarks/cpu_profile_overhead.py
CALL_GRAPH = ("--call-graph", "dwarf,16384")
CALL_GRAPH_NAME = "dwarf"
CONTAINER_FIX = ("in a container perf needs the capability: run it with --cap-add PERFMON (or SYS_ADMIN) and a "
                 "seccomp profile that allows perf_event_open")
INSTALL_PERF = "install it with `sudo apt-get install linux-perf` (Debian; Ubuntu: linux-tools-$(uname -r))"


class ProfileError(RuntimeError):
    """perf failed while profiling a cell (the cell fails with it)."""


# ---------------------------------------------------------------------- may perf run here?
def perf_binary() -> str | None:
    """The perf to run: $BLOCKLAB_PERF when set (None if it is not an executable file), else perf on PATH."""
    asked = os.environ.get(PERF_ENV)
    if asked:
        return asked if os.path.isfile(asked) and os.access(asked, os.X_OK) else None
    return shutil.which("perf")


def privileged() -> bool:
    """Root, or a process with CAP_PERFMON (38) or CAP_SYS_ADMIN (21): perf_event_paranoid does not apply."""
    if os.geteuid() == 0:
        return True
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapEff:"):
                caps = int(line.split()[1], 16)
                return bool(caps & (1 << 38) or caps & (1 << 21))
    except (OSError, ValueError):
        pass
    return False


def read_paranoid(path: Path = PARANOID_FILE) -> int | None:
    """The kernel's perf_event_paranoid (None: the file is missing or unreadable: no perf events)."""
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def perf_problem(*, perf: str | None | bool = True, paranoid_file: Path = PARANOID_FILE,
                 is_privileged: bool | None = None, trial: bool = True) -> str | None:
    """Why CPU profiles cannot be taken here (one line naming the setting and the fix),
    or None. `perf` True: find it (perf_binary()); a path or None to check that one.
    `trial`: open a software-clock event for real (`perf record -- true`), which is
    what a container without the capability refuses."""
    binary = perf_binary() if perf is True else (perf or None)
    if binary is None:
        where = f"{PERF_ENV}={os.environ[PERF_ENV]} is not an executable file" if os.environ.get(PERF_ENV) else "no perf on PATH"
        return f"CPU profiles need perf, and it is not installed here ({where}); {INSTALL_PERF}"
    paranoid = read_paranoid(paranoid_file)
    if paranoid is None:
        return (f"CPU profiles need the kernel's perf events, and {paranoid_file} cannot be read (a kernel built "
                f"without CONFIG_PERF_EVENTS, or /proc hidden); {CONTAINER_FIX}")
    root = privileged() if is_privileged is None else is_privileged
    if not root and paranoid > 2:
        return (f"perf is forbidden to non-root users here: {paranoid_file} (kernel.perf_event_paranoid) is {paranoid}, "
                "and above 2 no unprivileged process may profile; fix: `sudo sysctl kernel.perf_event_paranoid=2` "
                "(your own processes' user space), or run blocklab as root")
    if trial:
        return _trial(str(binary), paranoid, paranoid_file, root)
    return None


def _trial(binary: str, paranoid: int, paranoid_file: Path, root: bool) -> str | None:
    with tempfile.TemporaryDirectory(prefix="blocklab-perf-") as tmp:
        try:
            done = subprocess.run([binary, "record", "-q", "-e", event(root, paranoid), "-F", "99", "-o", f"{tmp}/trial.data",
                                   "--", "true"], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.SubprocessError) as err:
            return f"perf ({binary}) cannot be run: {err}; {INSTALL_PERF}"
    if done.returncode == 0:
        return None
    said = " ".join(line.strip() for line in (done.stderr or done.stdout).splitlines() if line.strip())[:300]
    return (f"perf cannot open a software-clock event here ({binary} record -e cpu-clock said: {said or 'nothing'}); "
            f"{paranoid_file} is {paranoid}; {CONTAINER_FIX}")


def event(root: bool, paranoid: int) -> str:
    """The sampling event: the software CPU clock; user space only where the kernel forbids more (paranoid 2, not root)."""
    return "cpu-clock" if root or paranoid < 2 else "cpu-clock:u"


def check_hz(hz: int) -> str | None:
    if not 1 <= hz <= MAX_HZ:
        return f"cpu_profile_hz = {hz} is not accepted; accepted: an integer from 1 to {MAX_HZ} (samples per second; default {DEFAULT_HZ})"
    return None


# ---------------------------------------------------------------------- folded stacks
@dataclass
class FoldedProfile:
    """Stacks folded root first, with their sample counts, and what they add up to."""

    stacks: Counter[str] = field(default_factory=Counter)
    samples: int = 0
    period_ns: int = 0  # the samples' periods added: CPU time sampled
    unnamed_leaf: int = 0  # samples whose own frame perf could not name
    unnamed_objects: Counter[str] = field(default_factory=Counter)  # object -> such samples

    @property
    def seconds_per_sample(self) -> float:
        return self.period_ns / self.samples / 1e9 if self.samples else 0.0

    @property
    def cpu_s(self) -> float:
        return self.period_ns / 1e9

    @property
    def unnamed_share(self) -> float:
        return self.unnamed_leaf / self.samples if self.samples else 0.0

    def merge(self, other: FoldedProfile) -> None:
        self.stacks.update(other.stacks)
        self.samples += other.samples
        self.period_ns += other.period_ns
        self.unnamed_leaf += other.unnamed_leaf
        self.unnamed_objects.update(other.unnamed_objects)

    def folded_text(self) -> str:
        """One `frame;frame;...;leaf count` line per stack, heaviest first."""
        return "".join(f"{stack} {n}\n" for stack, n in sorted(self.stacks.items(), key=lambda kv: (-kv[1], kv[0])))

    def summary(self) -> dict[str, object]:
        return {"samples": self.samples, "cpu_s": round(self.cpu_s, 6), "unnamed_samples": self.unnamed_leaf,
                "unnamed_share": round(self.unnamed_share, 4),
                "unnamed_objects": dict(self.unnamed_objects.most_common(5))}


def read_folded(text: str) -> Counter[str]:
    """A .folded file back into stack -> samples (lines `stack count`)."""
    out: Counter[str] = Counter()
    for line in text.splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            out[stack] += int(count)
    return out


UNNAMED = "[unnamed in "
_HEADER = re.compile(r"^(?P<comm>\S.*?)\s+(?P<tid>\d+)\s+(?P<period>\d+)\s*:?\s*$")
_FRAME = re.compile(r"^\s+(?P<ip>[0-9a-f]+)\s+(?P<rest>.*)$")


def fold_perf_script(text: str) -> FoldedProfile:
    """`perf script -F comm,tid,period,ip,sym,dso` output (one header line per sample,
    its frames leaf first, a blank line) folded root first."""
    profile = FoldedProfile()
    for record in text.split("\n\n"):
        lines = [line for line in record.splitlines() if line.strip()]
        if not lines:
            continue
        head = _HEADER.match(lines[0])
        if head is None:
            continue
        frames = [_frame_name(m.group("rest")) for line in lines[1:] if (m := _FRAME.match(line))]
        frames = _collapse(frames)
        leaf = frames[0] if frames else f"{UNNAMED}?]"
        stack = ";".join([head.group("comm").replace(";", ":").replace(" ", "_"), *reversed(frames)])
        profile.stacks[stack] += 1
        profile.samples += 1
        profile.period_ns += int(head.group("period"))
        if leaf.startswith(UNNAMED):
            profile.unnamed_leaf += 1
            profile.unnamed_objects[leaf[len(UNNAMED):-1]] += 1
    return profile


def _frame_name(rest: str) -> str:
    """'heap_insert (/path/postgres)' -> 'heap_insert'; '[unknown] (/usr/sbin/mariadbd)' ->
    '[unnamed in mariadbd]': an address is never a name."""
    sym, dso = rest, ""
    if rest.endswith(")") and " (" in rest:
        sym, _, dso = rest[:-1].rpartition(" (")
    sym = re.sub(r"\+0x[0-9a-f]+$", "", sym.strip())
    if not sym or sym == "[unknown]" or re.fullmatch(r"(0x)?[0-9a-f]{6,}", sym):
        obj = os.path.basename(dso) if dso and dso != "[unknown]" else "?"
        return f"{UNNAMED}{obj}]"
    return sym.replace(";", ":").replace(" ", "_")


def _collapse(frames: list[str]) -> list[str]:
    """Runs of unnamed frames of one object are one frame (their count says nothing)."""
    out: list[str] = []
    for f in frames:
        if out and f == out[-1] and f.startswith(UNNAMED):
            continue
        out.append(f)
    return out


# ---------------------------------------------------------------------- sampling
class PerfWindow:
    """perf record on the targets between enter and exit; `profile` after exit."""

    def __init__(self, targets: ProfileTargets, hz: int, perf: str, sample_event: str):
        self.targets, self.hz, self.perf, self.event = targets, hz, perf, sample_event
        self.profile = FoldedProfile()
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._ctl = self._ack = -1  # perf's control pipe (ours to write) and its acks (ours to read)
        self._paused = False

    def start(self) -> None:
        """Spawn perf, its events off, before the probes' own windows open: for an engine that
        runs in blocklab's process (SQLite), forking perf is blocklab's CPU, not the engine's."""
        pids = [p for p in self.targets.pids if p > 0]
        if not pids or self._proc is not None:
            return  # nothing of the engine runs now (a db_bench not yet started): an empty window
        self._tmp = tempfile.TemporaryDirectory(prefix="blocklab-perf-")
        self._data = Path(self._tmp.name) / "perf.data"
        # Started with its events off (-D -1) and switched on through its control pipe, which
        # answers "ack" once they are on: the window starts exactly then. (Waiting for perf's
        # file to appear was not enough: on a loaded machine it enabled the events tens of
        # milliseconds later, and a short cell lost its first samples.)
        ctl_r, self._ctl = os.pipe()
        self._ack, ack_w = os.pipe()
        try:
            self._proc = subprocess.Popen(
                [self.perf, "record", "-q", "-e", self.event, "-F", str(self.hz), *CALL_GRAPH, "-o", str(self._data),
                 "-D", "-1", "--control", f"fd:{ctl_r},{ack_w}", "-p", ",".join(map(str, pids))],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, pass_fds=(ctl_r, ack_w))
        except BaseException:
            self._cleanup()  # our ends of the pipes and the temporary directory: nothing else holds them
            raise
        finally:
            os.close(ctl_r)
            os.close(ack_w)

    def __enter__(self) -> PerfWindow:
        self.start()
        if self._proc is None:
            return self
        if not self._command("enable", 30.0):
            err = ""
            if self._proc.poll() is not None and self._proc.stderr:
                err = self._proc.stderr.read().decode(errors="replace").strip()
            self._stop()
            self._cleanup()
            raise ProfileError(f"perf record did not start sampling: {err.splitlines()[-1] if err else 'no answer within 30 s'}")
        return self

    def _command(self, command: str, timeout_s: float) -> bool:
        """Send perf a control command and wait for its ack (False: no ack, perf gone)."""
        try:
            os.write(self._ctl, f"{command}\n".encode())
        except OSError:  # perf exited (its targets all did): nothing to switch
            return False
        ready, _, _ = select.select([self._ack], [], [], timeout_s)
        return bool(ready) and os.read(self._ack, 64).startswith(b"ack")

    def pause(self) -> None:
        """Sampling off now (the window ends here, not when perf gets round to its signal)."""
        if self._proc is not None and self._proc.poll() is None and not self._paused:
            self._command("disable", 10.0)
            self._paused = True

    def __exit__(self, *exc: object) -> None:
        if self._proc is None:
            return
        try:
            self.pause()
            self._stop()
            if exc[0] is None:
                self.profile = self._fold()
        finally:
            self._cleanup()

    def _stop(self) -> None:
        assert self._proc is not None
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGINT)
        try:
            self._proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()

    def _fold(self) -> FoldedProfile:
        if not self._data.exists():
            return FoldedProfile()
        done = subprocess.run([self.perf, "script", "-i", str(self._data), "-F", "comm,tid,period,ip,sym,dso", "--no-inline"],
                              capture_output=True, text=True, errors="replace", timeout=600)
        if done.returncode != 0:
            raise ProfileError(f"perf script failed: {done.stderr.strip().splitlines()[-1] if done.stderr.strip() else done.returncode}")
        return fold_perf_script(done.stdout)

    def _cleanup(self) -> None:
        if self._proc is not None and self._proc.stderr:
            self._proc.stderr.close()
        for fd in (self._ctl, self._ack):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._ctl = self._ack = -1
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None


class CellProfiler:
    """One cell's profile: every probe window of the cell (workloads/*: RunProbe) adds
    its samples of the engine's processes, as the engine names them at that moment."""

    def __init__(self, engine: Engine, hz: int = DEFAULT_HZ):
        self.engine, self.hz = engine, hz
        perf = perf_binary()
        if perf is None:
            raise ProfileError(f"perf is gone since the run was checked; {INSTALL_PERF}")
        self.perf = perf
        self.event = event(privileged(), read_paranoid() or 0)
        self.profile = FoldedProfile()
        self.targets: ProfileTargets | None = None
        self.windows = 0

    def window(self) -> _CellWindow:
        return _CellWindow(self)


class _CellWindow:
    def __init__(self, owner: CellProfiler):
        self.owner = owner
        dialect = cast(CpuProfileDialect, owner.engine.dialect("cpu_profile"))
        owner.targets = dialect.profile_targets()
        self.perf = PerfWindow(owner.targets, owner.hz, owner.perf, owner.event)

    def start(self) -> None:
        self.perf.start()

    def __enter__(self) -> _CellWindow:
        self.perf.__enter__()
        return self

    def pause(self) -> None:
        self.perf.pause()

    def __exit__(self, *exc: object) -> None:
        self.perf.__exit__(*exc)
        self.owner.profile.merge(self.perf.profile)
        self.owner.windows += 1


class ObserverWindow(Protocol):
    """One probe window of an observer: started (its tool spawned) before the probes' own
    windows open, entered (sampling on) last, paused (sampling or tracing off) first when
    the window closes, exited (its data read) after the probes' own windows."""

    def start(self) -> None: ...

    def __enter__(self) -> ObserverWindow: ...

    def pause(self) -> None: ...

    def __exit__(self, *exc: object) -> None: ...


class CellObserver(Protocol):
    """What watches a cell's probe windows (CellProfiler here, trace_function.CellTracer)."""

    def window(self) -> ObserverWindow: ...


_active: tuple[CellObserver, ...] = ()
_active_lock = threading.Lock()


@contextmanager
def observing(*observers: CellObserver | None) -> Iterator[None]:
    """Make these the observers every probe window opened meanwhile reports to (one
    cell at a time per process; None entries are left out)."""
    global _active
    with _active_lock:
        _active = tuple(o for o in observers if o is not None)
    try:
        yield
    finally:
        with _active_lock:
            _active = ()


def active_windows() -> list[ObserverWindow]:
    """A window of each active observer for the probe opening now ([] outside a profiled cell)."""
    with _active_lock:
        observers = _active
    return [o.window() for o in observers]
