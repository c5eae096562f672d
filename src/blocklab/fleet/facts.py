"""What one host of a fleet is: the disk its engines keep their data on, the file
system, the engines it would run (their versions, found without starting them),
and which *disk* that is, so that two workers on one disk (two workers on one
machine, or two hosts mounting one NFS export) are never measured at once.

Collected by the worker itself when it starts (worker.py) and read by
`blocklab fleet status` and by the coordinator before a run."""

from __future__ import annotations

import os
import platform
import socket
from pathlib import Path

from .. import __version__

# File systems whose data lives on another machine: two hosts mounting the same
# source share its disk whatever their own devices are.
NETWORK_FS = frozenset({"nfs", "nfs4", "cifs", "smb3", "smbfs", "ceph", "glusterfs", "fuse.glusterfs", "fuse.sshfs",
                        "9p", "virtiofs", "lustre", "gpfs", "beegfs", "fuse.s3fs"})


def collect_facts(name: str, cache_dir: Path) -> dict[str, object]:
    """The host's facts as the worker named `name` sees them (engines keep their data under `cache_dir`)."""
    from ..engines import available, engine_class
    from ..environment import cpu_model, memory_bytes
    from ..probes.os_stats import device_of

    cache_dir.mkdir(parents=True, exist_ok=True)
    device = device_of(cache_dir)
    engines: dict[str, str | None] = {}
    for kind in available():
        try:  # every engine answers (EngineBase's default: None, it cannot tell without starting)
            engines[kind] = engine_class(kind).installed_version()
        except Exception:  # a broken install is a fact to show, not a reason to refuse the worker
            engines[kind] = None
    uname = platform.uname()
    return {
        "name": name,
        "hostname": socket.gethostname(),
        "cache_dir": str(cache_dir),
        "device": device.name,
        "file_system": device.fs_type,
        "mount_point": device.mount_point,
        "model": device.model,
        "rotational": device.rotational,
        "virtual": device.virtual,
        "disk": disk_key(cache_dir),
        "engines": engines,
        "kernel": f"{uname.system} {uname.release}",
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "memory_bytes": memory_bytes(),
        "blocklab": __version__,
        "pid": os.getpid(),
    }


def disk_key(path: Path) -> str:
    """A name of the disk holding `path` that is the same on every host that shares it:
    a network file system by its source (server:/export); a local disk by this
    machine's boot id and the whole disk (partitions of one disk share its heads
    and queue); a file system with no block device of its own (overlay, tmpfs) by
    the machine alone, which is the cautious guess."""
    from ..probes.os_stats import device_of, whole_disk

    device = device_of(path)
    source = _mount_source(device.mount_point)
    if device.fs_type in NETWORK_FS or (device.fs_type.startswith("fuse.") and ":" in source):
        return f"{device.fs_type}:{source}"
    machine = _machine_id()
    if device.major == 0:  # no block device: overlay, tmpfs, btrfs subvolumes...
        return f"{machine}:{device.fs_type or 'unknown'}"
    return f"{machine}:{whole_disk(device.name) or device.name}"


def _mount_source(mount_point: str) -> str:
    try:
        lines = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return ""
    source = ""
    for line in lines:
        parts = line.split()
        if len(parts) >= 2 and parts[1].replace("\\040", " ") == mount_point:
            source = parts[0]  # the last mount on a point is the one in effect
    return source


def _machine_id() -> str:
    """The running kernel's boot id: containers on one machine share it (and its disks),
    two machines never do."""
    for path in ("/proc/sys/kernel/random/boot_id", "/etc/machine-id"):
        try:
            text = Path(path).read_text().strip()
        except OSError:
            continue
        if text:
            return text
    return socket.gethostname()


def describe_engines(engines: dict[str, str | None]) -> str:
    """'postgres 18.6, sqlite 3.54.1' (engines not installed are left out)."""
    return ", ".join(f"{k} {v}" for k, v in engines.items() if v) or "none found"
