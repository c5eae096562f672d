"""What the disk is, as the report says it (issue 30): "vda (ext4, rotational)" was
printed for a virtio disk delivering 87k IOPS; sysfs's rotational flag is wrong on
virtual disks, so a virtual disk is named from its driver, bus or transport."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from blocklab.probes.os_stats import describe_medium, device_of, virtual_disk, whole_disk
from blocklab.report.data import RunData


def _sysfs(root: Path, disk: str, *, driver: str = "", transport: str = "", bus: str = "pci0000:00/0000:00:1f.2") -> Path:
    """A fake /sys with /sys/block/DISK -> devices/BUS/block/DISK, its device's driver link and transport."""
    real = root / "devices" / bus / "block" / disk
    (real / "device").mkdir(parents=True)
    (real / "queue").mkdir()
    (real / "queue" / "rotational").write_text("1\n")
    if driver:
        target = root / "bus" / "x" / "drivers" / driver
        target.mkdir(parents=True)
        os.symlink(target, real / "device" / "driver")
    if transport:
        (real / "device" / "transport").write_text(transport + "\n")
    (root / "block").mkdir(exist_ok=True)
    os.symlink(real, root / "block" / disk)
    return root


@pytest.mark.parametrize("disk, kw, expected", [
    ("vda", {"driver": "virtio_blk", "bus": "pci0000:00/0000:00:02.0/virtio1"}, "virtio"),
    ("xvda", {"driver": "vbd", "bus": "vbd-51712"}, "xen"),
    ("sda", {"driver": "sd", "bus": "pci0000:00/0000:00:03.0/virtio2/host0/target0:0:0/0:0:0:0"}, "virtio"),  # virtio-scsi
    ("nvme1n1", {"transport": "tcp", "bus": "virtual/nvme-fabrics/ctl/nvme1"}, "NVMe-oF (tcp)"),
    ("nvme0n1", {"transport": "pcie", "bus": "pci0000:00/0000:00:04.0/nvme/nvme0"}, ""),
    ("sdb", {"driver": "sd", "bus": "pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0"}, ""),
])
def test_a_virtual_disk_is_named_from_sysfs_not_from_its_rotational_flag(tmp_path, disk, kw, expected):
    root = _sysfs(tmp_path, disk, **kw)
    assert virtual_disk(disk, str(root)) == expected
    # every fake disk says rotational=1: only a local one is described by that flag, and as sysfs's word
    assert describe_medium(expected, True) == (f"virtual disk ({expected})" if expected else "rotational (sysfs)")


def test_the_report_says_virtual_disk_where_sysfs_says_rotational():
    env = {"device": "vda", "file_system": "ext4", "device_info": {"fs_type": "ext4", "rotational": True, "virtual": "virtio"}}
    data = RunData(path=Path("."), experiment_text="", spec={}, source="", options={}, plan={}, environment=env, rows=[], summary={})
    assert data.device_line == "vda (ext4, virtual disk (virtio))"
    old = {**env, "device_info": {"fs_type": "ext4", "rotational": True}}  # an environment.json from before: the flag, attributed
    data.environment = old
    assert data.device_line == "vda (ext4, rotational (sysfs))"


def test_this_hosts_disk_agrees_with_its_driver():
    device = device_of(Path.cwd())
    disk = whole_disk(device.name)
    link = Path(f"/sys/block/{disk}/device/driver")
    driver = os.path.basename(os.readlink(link)) if disk and link.is_symlink() else ""
    if driver == "virtio_blk":  # this project's VMs: the flag says rotational, the disk is virtio
        assert device.virtual == "virtio" and "rotational" not in device.describe()
    assert device.describe() == describe_medium(device.virtual, device.rotational)
