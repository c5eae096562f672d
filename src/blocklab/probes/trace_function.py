"""One function of the engine traced with uprobes (seed 001's second step: "I wrote
the following DTrace script to capture some qsort execution statistics"): its
calls, the time each took, and optionally one integer argument, as histograms.

    problem = bpftrace_problem()                       # None, or why not here and the fix
    tracer = CellTracer(engine, "pg_checksum_page", arg=None)
    with observing(tracer):                             # the runner, around one cell's workload.run
        ... every RunProbe window of the cell traces the engine's processes ...
    tracer.result                                       # FunctionTrace: calls, total ns, histograms

bpftrace (Debian's) attaches a uprobe at the function's entry and a uretprobe
at its return in the engine's binary (its `cpu_profile` dialect names it),
for the engine's processes only; each window is one bpftrace run, and a cell's
windows add up. Histograms are bpftrace's power-of-two buckets, as the seed's
`quantize`. A uprobe costs the traced process a trap per call (a microsecond or
two here): the traced cells' elapsed times carry it, so a traced run answers
"how many calls, how long each", not "how fast".
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
from dataclasses import dataclass, field
from typing import Any, cast

from ..engines.base import CpuProfileDialect, Engine
from .cpu_profile import privileged

INSTALL_BPFTRACE = "install it with `sudo apt-get install bpftrace`"


class TraceError(RuntimeError):
    """bpftrace failed while tracing a cell (the cell fails with it)."""


def bpftrace_binary() -> str | None:
    return shutil.which("bpftrace")


def bpftrace_problem() -> str | None:
    """Why uprobes cannot be used here (one line, with the fix), or None."""
    if bpftrace_binary() is None:
        return f"tracing a function needs bpftrace, and it is not on PATH; {INSTALL_BPFTRACE}"
    if not privileged():
        return ("tracing a function needs root (bpftrace loads eBPF programs: CAP_BPF and CAP_PERFMON); "
                "run blocklab as root, or use --cpu-profile, which a normal user may run")
    return None


def function_problem(binary: str | None, function: str) -> str | None:
    """Is `function` a symbol uprobes can attach to in `binary`? None when it is."""
    if not binary:
        return "the engine names no binary to trace"
    bpftrace = bpftrace_binary()
    assert bpftrace is not None
    done = subprocess.run([bpftrace, "-l", f"uprobe:{binary}:{function}"], capture_output=True, text=True, timeout=120)
    if done.returncode == 0 and done.stdout.strip():
        return None
    return (f"{function!r} is not a function of {binary} that uprobes can attach to (list them with "
            f"`bpftrace -l 'uprobe:{binary}:*'`); a stripped binary has only its exported symbols")


@dataclass
class FunctionTrace:
    """A function's calls over a cell: counts, time and histograms (bucket low -> count)."""

    function: str
    arg: int | None = None
    calls: int = 0
    total_ns: int = 0
    hist_ns: dict[int, int] = field(default_factory=dict)
    arg_sum: int = 0
    hist_arg: dict[int, int] = field(default_factory=dict)

    def merge(self, other: FunctionTrace) -> None:
        self.calls += other.calls
        self.total_ns += other.total_ns
        self.arg_sum += other.arg_sum
        for mine, theirs in ((self.hist_ns, other.hist_ns), (self.hist_arg, other.hist_arg)):
            for k, v in theirs.items():
                mine[k] = mine.get(k, 0) + v

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"function": self.function, "calls": self.calls, "total_ns": self.total_ns,
                               "hist_ns": {str(k): v for k, v in sorted(self.hist_ns.items())}}
        if self.arg is not None:
            out.update(arg=self.arg, arg_sum=self.arg_sum, hist_arg={str(k): v for k, v in sorted(self.hist_arg.items())})
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FunctionTrace:
        return cls(function=str(d["function"]), arg=d.get("arg"), calls=int(d.get("calls", 0)),
                   total_ns=int(d.get("total_ns", 0)), hist_ns={int(k): int(v) for k, v in (d.get("hist_ns") or {}).items()},
                   arg_sum=int(d.get("arg_sum", 0)), hist_arg={int(k): int(v) for k, v in (d.get("hist_arg") or {}).items()})


# printed by the program's BEGIN probe, which bpftrace fires once every probe is attached and
# its event loop runs: the window opens then. (Its "attached_probes" line comes earlier: a
# window closed that soon got bpftrace's SIGINT before its loop, and it never exited.)
READY = "blocklab-trace-ready"


def script(binary: str, function: str, pids: tuple[int, ...], arg: int | None) -> str:
    """The bpftrace program: entry time per thread, the return's elapsed into a histogram."""
    only = " || ".join(f"pid == {p}" for p in pids)
    probe = f"{binary}:{function}"
    args = f" @arg = hist(arg{arg - 1}); @arg_sum = sum(arg{arg - 1});" if arg else ""
    return (f'BEGIN {{ printf("{READY}\\n"); }}\n'
            f"uprobe:{probe} /{only}/ {{ @start[tid] = nsecs;{args} }}\n"
            f"uretprobe:{probe} /@start[tid]/ {{ $d = nsecs - @start[tid]; delete(@start[tid]); "
            f"@ns = hist($d); @total = sum($d); @calls = count(); }}\n"
            "END { clear(@start); }\n")


def parse_output(text: str, function: str, arg: int | None) -> FunctionTrace:
    """bpftrace -f json's lines: maps and histograms printed at its exit."""
    trace = FunctionTrace(function, arg)
    for line in text.splitlines():
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        data = event.get("data") or {}
        if event.get("type") == "map":
            trace.calls += int(data.get("@calls", 0) or 0)
            trace.total_ns += int(data.get("@total", 0) or 0)
            trace.arg_sum += int(data.get("@arg_sum", 0) or 0)
        elif event.get("type") == "hist":
            for name, target in (("@ns", trace.hist_ns), ("@arg", trace.hist_arg)):
                for bucket in data.get(name) or []:
                    low = int(bucket.get("min", 0))
                    target[low] = target.get(low, 0) + int(bucket.get("count", 0))
    return trace


class TraceWindow:
    """bpftrace on the engine's processes between enter and exit; `trace` after exit."""

    def __init__(self, binary: str, function: str, pids: tuple[int, ...], arg: int | None):
        self.binary, self.function, self.pids, self.arg = binary, function, pids, arg
        self.trace = FunctionTrace(function, arg)
        self._proc: subprocess.Popen[str] | None = None
        self._lines: list[str] = []
        self._stopped: str | None = None  # bpftrace's last stderr line once stopped

    def start(self) -> None:
        """bpftrace spawned and attached (its probes fire from here: uprobes have no off switch)."""
        if self.pids and self._proc is None:
            self._launch()

    def __enter__(self) -> TraceWindow:
        self.start()
        return self

    def _launch(self) -> None:
        bpftrace = bpftrace_binary()
        if bpftrace is None:
            raise TraceError(f"bpftrace is gone since the run was checked; {INSTALL_BPFTRACE}")
        self._proc = subprocess.Popen([bpftrace, "-f", "json", "-e", script(self.binary, self.function, self.pids, self.arg)],
                                      stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                      env={**os.environ, "BPFTRACE_MAX_MAP_KEYS": "65536"})
        attached = threading.Event()

        def read() -> None:  # its stdout until it exits: "attached_probes" first, the maps at the end
            assert self._proc is not None and self._proc.stdout is not None
            for line in self._proc.stdout:
                self._lines.append(line)
                if READY in line:
                    attached.set()
            attached.set()

        self._reader = threading.Thread(target=read, daemon=True)
        self._reader.start()
        if not attached.wait(120) or self._proc.poll() is not None:
            err = self._stop()
            raise TraceError(f"bpftrace did not attach to {self.function}: {err or 'no answer within 120 s'}")

    def _stop(self) -> str:
        assert self._proc is not None
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGINT)  # it prints its maps and exits
        try:
            self._proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._reader.join(timeout=30)  # the reader has its stdout to the end
        err = self._proc.stderr.read() if self._proc.stderr else ""
        lines = [ln for ln in (err or "").splitlines() if ln.strip() and "RLIMIT_MEMLOCK" not in ln]
        return lines[-1] if lines else ""

    def pause(self) -> None:
        """Tracing off now: bpftrace stops (and prints its maps, read at exit)."""
        if self._proc is not None and self._stopped is None:
            self._stopped = self._stop()

    def __exit__(self, *exc: object) -> None:
        if self._proc is None:
            return
        self.pause()
        err = self._stopped or ""
        if exc[0] is None:
            if self._proc.returncode not in (0, None):
                raise TraceError(f"bpftrace failed on {self.function}: {err or self._proc.returncode}")
            self.trace = parse_output("".join(self._lines), self.function, self.arg)


class CellTracer:
    """One cell's trace of one function: every probe window of the cell adds to it."""

    def __init__(self, engine: Engine, function: str, arg: int | None = None):
        self.engine, self.function, self.arg = engine, function, arg
        self.result = FunctionTrace(function, arg)

    def window(self) -> _TracerWindow:
        return _TracerWindow(self)


class _TracerWindow:
    def __init__(self, owner: CellTracer):
        self.owner = owner
        dialect = cast(CpuProfileDialect, owner.engine.dialect("cpu_profile"))
        targets = dialect.profile_targets()
        binary = targets.binary or dialect.trace_binary() or ""
        self.window = TraceWindow(binary, owner.function, tuple(p for p in targets.pids if p > 0), owner.arg)

    def start(self) -> None:
        self.window.start()

    def __enter__(self) -> _TracerWindow:
        self.window.__enter__()
        return self

    def pause(self) -> None:
        self.window.pause()

    def __exit__(self, *exc: object) -> None:
        self.window.__exit__(*exc)
        self.owner.result.merge(self.window.trace)
