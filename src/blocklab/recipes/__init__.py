"""The built-in experiments, as TOML files users can copy (`blocklab recipes --show NAME`)."""

from __future__ import annotations

import tomllib
from pathlib import Path

from ..spec import SpecError

HERE = Path(__file__).parent


def names() -> list[str]:
    return sorted(p.stem for p in HERE.glob("*.toml"))


def path_of(name: str) -> Path:
    return HERE / f"{name}.toml"


def summary_line(name: str) -> str:
    data = tomllib.loads(path_of(name).read_text())
    return str(data.get("description", ""))


def resolve(target: str) -> Path:
    """FILE or RECIPE -> the experiment file's path."""
    candidate = Path(target)
    if candidate.suffix == ".toml" or candidate.exists():
        if not candidate.exists():
            raise SpecError(f"{target}: no such experiment file")
        return candidate
    if target in names():
        return path_of(target)
    raise SpecError(
        f"unknown recipe {target!r}; built-in recipes: {', '.join(names())} (or give the path of a TOML experiment file)"
    )
