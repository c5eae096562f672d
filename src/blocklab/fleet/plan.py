"""The same plan on every host, each host in its own randomised order.

Every host measures every cell of the grid × repeats (plan.make_plan), in
randomised blocks of its own: the host's seed is derived from the run's seed
and the host's name, so drift on one host and the order on another never line
up, and a resumed run finds each host's order again from plan.json.

In results.jsonl and plan.json a fleet cell is `HOST/CELL` (host-a/b0:multiblock_read=8):
the same cell measured on two hosts is two cells.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..engines.base import ApplyClass
from ..plan import Cell, Plan, Setting, make_plan

if TYPE_CHECKING:
    from ..spec import Scalar

HOST_SEP = "/"


def host_seed(seed: int, host: str) -> int:
    """The host's plan seed: a hash of the run's seed and the host's name (stable
    across Python versions and machines, unlike hash())."""
    digest = hashlib.sha256(f"blocklab-fleet:{seed}:{host}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def host_cell_id(host: str, cell_id: str) -> str:
    return f"{host}{HOST_SEP}{cell_id}"


def check_host_name(name: str) -> str | None:
    """Why `name` cannot name a host of a fleet run (None: it can). It becomes part
    of cell ids, file names in the report and command lines."""
    if not name:
        return "a host name cannot be empty"
    if HOST_SEP in name or "," in name or any(c.isspace() for c in name):
        return f"{name!r}: a host name cannot contain '/', ',' or spaces"
    if len(name) > 100:
        return f"{name!r}: a host name is at most 100 characters"
    return None


@dataclass
class FleetPlan:
    seed: int
    hosts: dict[str, Plan]  # in the order the hosts were given
    disks: dict[str, str] = field(default_factory=dict)  # host -> disk key (facts.disk_key)
    share_disk: bool = False  # --share-disk: hosts on one disk measured at once all the same
    scheduler: str = ""

    @classmethod
    def make(cls, knobs: dict[str, list[Scalar]], repeats: int, seed: int, apply_class: dict[str, ApplyClass],
             hosts: list[str], *, disks: dict[str, str] | None = None, share_disk: bool = False, scheduler: str = "") -> FleetPlan:
        plans = {host: make_plan(knobs, repeats, host_seed(seed, host), apply_class) for host in hosts}
        return cls(seed=seed, hosts=plans, disks=disks if disks is not None else {}, share_disk=share_disk, scheduler=scheduler)

    @property
    def settings(self) -> list[Setting]:
        return next(iter(self.hosts.values())).settings if self.hosts else []

    @property
    def apply_class(self) -> dict[str, ApplyClass]:
        return next(iter(self.hosts.values())).apply_class if self.hosts else {}

    def cell_ids(self, host: str) -> list[str]:
        return [host_cell_id(host, c.cell_id) for c in self.hosts[host].cells]

    @property
    def total(self) -> int:
        return sum(len(p.cells) for p in self.hosts.values())

    def disk_groups(self) -> list[list[str]]:
        """Hosts that must take turns: those on one disk, unless share_disk (then each alone)."""
        if self.share_disk:
            return [[h] for h in self.hosts]
        groups: dict[str, list[str]] = {}
        for host in self.hosts:
            groups.setdefault(self.disks.get(host) or f"own:{host}", []).append(host)
        return list(groups.values())

    def to_dict(self) -> dict[str, object]:
        """plan.json: `cells` lists every host's cells (host-prefixed ids, each host's in
        its order) so that readers of a local plan (report, export) count them right;
        `fleet` keeps what a resume needs."""
        return {
            "seed": self.seed,
            "settings": [s.as_dict() for s in self.settings],
            "apply_class": {k: v.label for k, v in self.apply_class.items()},
            "cells": [
                {"index": c.index, "block": c.block, "cell_id": host_cell_id(host, c.cell_id), "settings": c.setting.as_dict(), "host": host}
                for host, plan in self.hosts.items() for c in plan.cells
            ],
            "fleet": {
                "hosts": {host: {"seed": plan.seed, "cells": len(plan.cells)} for host, plan in self.hosts.items()},
                "disks": dict(self.disks),
                "share_disk": self.share_disk,
                "scheduler": self.scheduler,
            },
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FleetPlan:
        fleet = data["fleet"]
        apply_class = {k: ApplyClass[str(v).upper()] for k, v in (data.get("apply_class") or {}).items()}
        settings = [Setting(tuple(s.items())) for s in data["settings"]]
        cells: dict[str, list[Cell]] = {host: [] for host in fleet["hosts"]}
        for c in data["cells"]:
            cells[c["host"]].append(Cell(c["index"], c["block"], Setting(tuple(c["settings"].items()))))
        plans = {host: Plan(cells=cells[host], seed=int(info["seed"]), settings=list(settings), apply_class=apply_class)
                 for host, info in fleet["hosts"].items()}
        return cls(seed=int(data["seed"]), hosts=plans, disks=dict(fleet.get("disks") or {}),
                   share_disk=bool(fleet.get("share_disk")), scheduler=str(fleet.get("scheduler") or ""))


def is_fleet_plan(data: object) -> bool:
    return isinstance(data, dict) and isinstance(data.get("fleet"), dict)
