"""Operating-system counters: the block device under a path, /proc/diskstats, process CPU.

The device counters are the physical truth a cold-cache proof and the SLOB
measurements lean on: what the engine asked for is in its own statistics, what
the disk did is here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

SECTOR = 512  # /proc/diskstats counts 512-byte sectors whatever the device's sector size
_TICKS = os.sysconf("SC_CLK_TCK")
CPU_TICK_S = 1.0 / _TICKS  # the resolution of a process's CPU time in /proc/PID/stat


@dataclass(frozen=True)
class Device:
    name: str  # e.g. vda, nvme0n1p2
    major: int
    minor: int
    mount_point: str
    fs_type: str
    model: str = ""
    rotational: bool | None = None  # sysfs's flag: wrong on most virtual disks (virtio says 1 on an SSD)
    virtual: str = ""  # "virtio", "xen", "Hyper-V", "NVMe-oF (tcp)": a disk a hypervisor or a network serves

    def to_dict(self) -> dict:
        return self.__dict__.copy()

    def describe(self) -> str:
        """'virtual disk (virtio)', 'rotational (sysfs)', 'non-rotational (sysfs)' or ''."""
        return describe_medium(self.virtual, self.rotational)


def describe_medium(virtual: str, rotational: bool | None) -> str:
    """What the disk is, as far as the host can tell: a virtual disk's rotational flag
    says nothing about the storage behind it, so it is never shown for one."""
    if virtual:
        return f"virtual disk ({virtual})"
    if rotational is None:
        return ""
    return "rotational (sysfs)" if rotational else "non-rotational (sysfs)"


# driver names (the basename of /sys/block/DISK/device/driver) of paravirtual disks
_VIRTUAL_DRIVERS = {"virtio_blk": "virtio", "vbd": "xen", "xen_blkfront": "xen", "xen-blkfront": "xen",
                    "storvsc": "Hyper-V", "vmw_pvscsi": "VMware"}
# parts of the disk's sysfs path (its bus) that mean a virtual device whatever its driver (virtio-scsi, Hyper-V's vmbus)
_VIRTUAL_BUSES = {"/virtio": "virtio", "/xen": "xen", "/vmbus": "Hyper-V"}


def virtual_disk(disk: str, sys_root: str = "/sys") -> str:
    """'virtio', 'xen', 'Hyper-V', 'NVMe-oF (tcp)' when `disk` is served by a
    hypervisor or over a network (from sysfs: its driver, its bus, an NVMe
    controller's transport), '' for a local disk or when sysfs says nothing."""
    if not disk:
        return ""
    base = Path(sys_root) / "block" / disk
    try:
        driver = os.path.basename(os.readlink(base / "device" / "driver"))
    except OSError:
        driver = ""
    if driver in _VIRTUAL_DRIVERS:
        return _VIRTUAL_DRIVERS[driver]
    transport = _read(str(base / "device" / "transport"))
    if transport and transport not in ("pcie", ""):
        return f"NVMe-oF ({transport})"
    try:
        where = os.path.realpath(base)
    except OSError:
        where = ""
    for part, kind in _VIRTUAL_BUSES.items():
        if part in where:
            return kind
    return ""


def device_of(path: str | Path) -> Device:
    """The block device and file system holding `path`."""
    path = Path(path).resolve()
    while not path.exists():
        path = path.parent
    st = os.stat(path)
    major, minor = os.major(st.st_dev), os.minor(st.st_dev)
    name = _sysfs_name(major, minor)
    mount_point, fs_type = _mount_of(path)
    disk = whole_disk(name)
    return Device(
        name=name,
        major=major,
        minor=minor,
        mount_point=mount_point,
        fs_type=fs_type,
        model=_read(f"/sys/block/{disk}/device/model") if disk else "",
        rotational=(_read(f"/sys/block/{disk}/queue/rotational") == "1") if disk else None,
        virtual=virtual_disk(disk),
    )


def _sysfs_name(major: int, minor: int) -> str:
    link = Path(f"/sys/dev/block/{major}:{minor}")
    try:
        return link.resolve().name
    except OSError:
        return f"{major}:{minor}"


def whole_disk(name: str) -> str:
    """The disk a partition belongs to (queue/ and device/ live there)."""
    if Path(f"/sys/block/{name}").exists():
        return name
    for disk in os.listdir("/sys/block") if os.path.isdir("/sys/block") else []:
        if Path(f"/sys/block/{disk}/{name}").exists():
            return disk
    return ""


def _mount_of(path: Path) -> tuple[str, str]:
    best = ("/", "")
    try:
        lines = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return best
    for line in lines:
        parts = line.split()
        if len(parts) < 3:
            continue
        mount = parts[1].replace("\\040", " ")
        if (str(path) == mount or str(path).startswith(mount.rstrip("/") + "/")) and len(mount) >= len(best[0]):
            best = (mount, parts[2])
    return best


def _read(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""


@dataclass(frozen=True)
class DiskCounters:
    """Cumulative counters of one device (all of them counters, never gauges, so
    that `minus` gives what happened over a window)."""

    reads: int
    read_bytes: int
    read_ms: int
    writes: int
    write_bytes: int
    write_ms: int
    # Kernel fields 10 and 11 (after the name): milliseconds with at least one I/O in
    # flight (io_ticks), and the sum of every I/O's time in flight (weighted). Over a
    # window, weighted / elapsed is the average number of I/Os in flight (Little's
    # law), io_ticks / elapsed the utilisation, weighted / io_ticks the queue depth
    # while busy. Defaults keep a reader of an old kernel's 11-field lines working.
    io_ticks_ms: int = 0
    weighted_ms: int = 0

    def minus(self, earlier: DiskCounters) -> DiskCounters:
        return DiskCounters(*(a - b for a, b in zip(self.__dict__.values(), earlier.__dict__.values())))


def disk_counters(device_name: str) -> DiskCounters | None:
    """Cumulative counters of one device from /proc/diskstats, or None if absent."""
    try:
        lines = Path("/proc/diskstats").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        f = line.split()
        if len(f) >= 11 and f[2] == device_name:
            return DiskCounters(
                reads=int(f[3]),
                read_bytes=int(f[5]) * SECTOR,
                read_ms=int(f[6]),
                writes=int(f[7]),
                write_bytes=int(f[9]) * SECTOR,
                write_ms=int(f[10]),
                # f[11] is the I/Os in flight right now, a gauge: not kept (weighted_ms gives the average)
                io_ticks_ms=int(f[12]) if len(f) >= 14 else 0,
                weighted_ms=int(f[13]) if len(f) >= 14 else 0,
            )
    return None


class DeviceReads:
    """Bytes read so far from the device holding `data_dir` (None when there is
    no such directory on this host: a server elsewhere)."""

    def __init__(self, data_dir: str | None):
        self.device = device_of(data_dir).name if data_dir else None

    def read_bytes(self) -> float | None:
        counters = disk_counters(self.device) if self.device else None
        return float(counters.read_bytes) if counters else None


def process_cpu_seconds(pids: list[int]) -> float:
    """user + system CPU seconds of these processes so far (vanished ones count 0)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15 of stat)
    return total / _TICKS


def system_cpu_times() -> tuple[float, float]:
    """(busy, total) jiffies of all CPUs, for a CPU-busy percentage over an interval."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    total = sum(fields[:8])
    return float(total - idle), float(total)
