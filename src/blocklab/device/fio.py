"""Running fio and reading its JSON output.

Two halves kept apart on purpose: `run_fio` is the only thing here that starts
a process, and `parse_read` is a pure function on fio's JSON dict, so a saved
fio output can be parsed (and tested) without a disk or fio at hand.

Units: MB/s is 1e6 bytes per second, as everywhere else in blocklab; block
sizes are bytes; latencies are milliseconds.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ..units import parse_size, short_size

INSTALL_HINT = "install the 'fio' package: apt-get install fio"



class FioNotFound(RuntimeError):
    """fio is not installed (or not on PATH)."""


class FioError(RuntimeError):
    """fio ran but failed, or its output could not be read."""


@dataclass(frozen=True)
class Point:
    """One measured fio job: a read pattern at one block size and queue depth."""

    pattern: str  # "rand" or "seq"
    block_size: int  # bytes
    iodepth: int  # I/Os in flight (iodepth x numjobs)
    iops: float
    mb_per_s: float  # 1e6 bytes/s
    lat_mean_ms: float  # completion latency (fio clat), mean
    lat_p99_ms: float  # completion latency, 99th percentile
    runtime_s: float  # measured time, ramp excluded

    @property
    def description(self) -> str:
        return describe(self.pattern, self.block_size, self.iodepth)

    def metrics(self) -> dict[str, float]:
        return {k: v for k, v in asdict(self).items() if k not in ("pattern", "block_size", "iodepth")}

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Point:
        return cls(
            pattern=str(d["pattern"]),
            block_size=int(d["block_size"]),
            iodepth=int(d["iodepth"]),
            iops=float(d["iops"]),
            mb_per_s=float(d["mb_per_s"]),
            lat_mean_ms=float(d["lat_mean_ms"]),
            lat_p99_ms=float(d["lat_p99_ms"]),
            runtime_s=float(d["runtime_s"]),
        )


# ------------------------------------------------------------------ naming
def describe(pattern: str, block_size: int, iodepth: int) -> str:
    # iodepth 0: not known (an imported limit, e.g. CALIBRATE_IO, which does not report its concurrency)
    return f"{pattern} {short_size(block_size)} qd{iodepth if iodepth else '?'}"


# ------------------------------------------------------------------ running
def find_fio() -> str:
    path = shutil.which("fio")
    if path is None:
        raise FioNotFound(f"fio is not installed (no 'fio' on PATH); {INSTALL_HINT}")
    return path


def fio_version(fio: str) -> str:
    out = subprocess.run([fio, "--version"], capture_output=True, text=True, check=False)
    return out.stdout.strip()


def engine_available(fio: str, engine: str) -> bool:
    """fio answers `--enghelp=NAME` with exit 0 only for engines compiled in and loadable."""
    out = subprocess.run([fio, f"--enghelp={engine}"], capture_output=True, text=True, check=False)
    return out.returncode == 0


def run_fio(fio: str, args: Sequence[str], timeout: float | None = None) -> dict[str, Any]:
    """Run one fio invocation with JSON output and return the parsed JSON.

    On Ctrl-C or a timeout fio is stopped and waited for before the exception
    goes on, so the caller can remove the test file safely."""
    cmd = [fio, "--output-format=json", *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _stop(proc)
        raise FioError(f"fio did not finish within {timeout:.0f} s\n  command: {' '.join(cmd)}") from None
    except BaseException:
        _stop(proc)
        raise
    if proc.returncode != 0:
        message = _first_lines(stderr or stdout)
        raise FioError(f"fio failed (exit {proc.returncode}): {message}\n  command: {' '.join(cmd)}")
    return _json_of(stdout, stderr)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _json_of(stdout: str, stderr: str) -> dict[str, Any]:
    # fio may print notes ("fio: ...") before the JSON document on stdout
    start = stdout.find("\n{") + 1 if not stdout.startswith("{") else 0
    try:
        return json.loads(stdout[start:])
    except json.JSONDecodeError as err:
        raise FioError(f"fio output is not JSON ({err}); stderr: {_first_lines(stderr)}") from None


def _first_lines(text: str, n: int = 5) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return " | ".join(lines[:n]) or "(no message)"


# ------------------------------------------------------------------ parsing
def parse_read(data: dict[str, Any], pattern: str | None = None) -> Point:
    """fio JSON (one job, or several with group_reporting) -> the read Point.

    Block size and queue depth come from the job's own options, so a saved
    output parses alone; `pattern` overrides what fio's `rw` option says.

    fio's iops and bw_bytes are taken as fio reports them. After a ramp_time
    they can differ by up to iodepth I/Os (the I/Os in flight when the ramp
    ends count in bytes but not in I/Os): under 1% for points of a few
    seconds, more for 1 s points at a high queue depth with large blocks."""
    jobs = data.get("jobs") or []
    if not jobs:
        raise FioError("fio output has no jobs")
    job = jobs[0]
    if job.get("error"):
        raise FioError(f"fio job {job.get('jobname')!r} failed with error {job['error']}")
    options = {**data.get("global options", {}), **job.get("job options", {})}
    read = job["read"]
    if not read.get("total_ios"):
        raise FioError(f"fio job {job.get('jobname')!r} completed no reads")
    clat = read["clat_ns"]
    return Point(
        pattern=pattern or _pattern_of(options.get("rw", "read")),
        block_size=parse_size(options.get("bs", "4k"), "bs", positive=True),
        # with a sync engine the concurrency is numjobs, not iodepth
        iodepth=int(options.get("iodepth", 1)) * int(options.get("numjobs", 1)),
        iops=float(read["iops"]),
        mb_per_s=float(read["bw_bytes"]) / 1e6,
        lat_mean_ms=float(clat["mean"]) / 1e6,
        lat_p99_ms=float(clat.get("percentile", {}).get("99.000000", float("nan"))) / 1e6,
        runtime_s=float(read["runtime"]) / 1e3,
    )


def _pattern_of(rw: str) -> str:
    return "rand" if rw.startswith("rand") else "seq"
