"""Libraries imported at their first use, not when blocklab starts.

`import scipy.stats` costs ~0.8 s of CPU here; every `blocklab` command imported it
at start through the analysis modules, so `blocklab --help`, a bad option's error
or `blocklab plan` waited for statistics they never compute. The modules that
compute with SciPy name it through these instead:

    from ..lazy import scipy_stats
    scipy_stats.t.ppf(0.975, 3)      # scipy.stats is imported here, once
"""

from __future__ import annotations

import importlib
import threading
from types import ModuleType
from typing import Any


class LazyModule:
    """A module imported at the first attribute read (thread-safe: importlib's import lock)."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: ModuleType | None = None
        self._lock = threading.Lock()

    def _load(self) -> ModuleType:
        with self._lock:
            if self._module is None:
                self._module = importlib.import_module(self._name)
            return self._module

    def __getattr__(self, attr: str) -> Any:  # what the module holds; SciPy has no type stubs here
        if attr.startswith("_"):  # never our own fields (copy and pickle look them up before __init__ ran)
            raise AttributeError(attr)
        return getattr(self._module if self._module is not None else self._load(), attr)

    def __reduce__(self) -> tuple[type[LazyModule], tuple[str]]:  # pickled as its name, never its lock
        return (LazyModule, (self._name,))

    def __repr__(self) -> str:
        return f"<lazily imported {self._name}{'' if self._module is None else ' (imported)'}>"


scipy_stats = LazyModule("scipy.stats")
scipy_optimize = LazyModule("scipy.optimize")
scipy_special = LazyModule("scipy.special")


def import_now() -> None:
    """Import them all now: called when a run, a tune or a fleet begins to measure. A Ctrl-C or
    SIGTERM that lands inside a first import leaves SciPy half-imported, and the summary written
    after an interruption (what was measured is kept) would then fail; before the cells nothing
    interrupts it (a fleet run stopped by SIGTERM mid-import failed so on a fresh clone)."""
    for module in (scipy_stats, scipy_optimize, scipy_special):
        module._load()
