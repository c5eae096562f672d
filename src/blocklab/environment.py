"""What a result was measured on: host, kernel, CPU, memory, file system, device, engine.

Saved as environment.json in every run directory; `compare` refuses runs whose
checked fields differ (pyperf's idea of checked metadata)."""

from __future__ import annotations

import os
import platform
import socket
import sys
from pathlib import Path

from . import __version__
from .engines.base import EngineInfo
from .probes.os_stats import device_of

# fields that must match for two runs to be compared without --force
CHECKED_FIELDS = ("host", "engine", "engine_version", "device", "dataset_rows")


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def memory_bytes() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def collect(engine_info: EngineInfo | None, data_dir: str | None, extra: dict[str, object] | None = None) -> dict[str, object]:
    uname = platform.uname()
    env: dict[str, object] = {
        "host": socket.gethostname(),
        "kernel": f"{uname.system} {uname.release}",
        "machine": uname.machine,
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "memory_bytes": memory_bytes(),
        "python": sys.version.split()[0],
        "blocklab": __version__,
    }
    if data_dir:
        device = device_of(data_dir)
        env["data_dir"] = data_dir
        env["device"] = device.name
        env["device_info"] = device.to_dict()
        env["file_system"] = device.fs_type
    if engine_info is not None:
        env["engine"] = engine_info.engine
        env["engine_version"] = engine_info.version
        env["engine_mode"] = engine_info.mode
        env["engine_extra"] = engine_info.extra
        env["engine_settings"] = engine_info.settings
    env.update(extra or {})
    return env
