"""What a tune searches: the experiment's `[knobs]` as sets or ranges, its `[tune]`
table (budget, default configuration, race sizes), all checked before anything runs.

In an experiment file a knob of `[knobs]` is either a list (a set: strings and
booleans are categorical, numbers ordinal, i.e. their order means something to
the optimiser) or a range table `{min = 1, max = 64, log = true}` (integers,
every value between the ends). The rest of blocklab only knows lists, so
`split_raw` turns each range into the list of its two ends for the engine's
checks (`experiment.prepare` asks the engine about every listed value): an end
the engine refuses is refused like any knob value.

    [tune]
    budget = 60                    # cells (an integer) or a duration: "90s", "20m", "1h30m"
    default = {"pg.io_method" = "worker"}   # the configuration to beat (the engine's defaults otherwise)
    candidates = 6                 # new configurations raced per round
    max_blocks = 3                 # blocks a round races at most before it picks on the estimates
    confirm_blocks = 6             # fresh blocks of winner, runner-up and default at the end
                                   # (default: sized by the noise the race measured, 4 to 12)
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..errors import SpecError
from ..spec import Scalar

# the fields of [tune] and of a range table: anything else is refused with these lists
TUNE_FIELDS = ("budget", "default", "candidates", "max_blocks", "confirm_blocks")
RANGE_FIELDS = ("min", "max", "log")
# Fresh blocks of the confirmation before the race has measured its noise, and when no
# affordable size would show the leader's advantage. Its three claims share the 5%, so each
# interval takes t at 1 - 0.05/6 with n - 1 degrees of freedom: 4.85 at 4 blocks, 3.53 at 6.
# With 4 blocks, a cell noise of 14% (a cold scan on a shared virtual disk) left a winner
# measured 1.56x the default "not shown better" (BENCHMARKS.md, tune v6): the interval's
# half-width was ~0.49 on the log scale; 6 blocks bring it to ~0.29 for 6 more cells.
# Unless [tune] confirm_blocks names a number, the search sizes the confirmation by the
# noise it measured (driver.Search.confirm_blocks), from CONFIRM_MIN to CONFIRM_MAX blocks.
CONFIRM_BLOCKS = 6
CONFIRM_MIN, CONFIRM_MAX = 4, 12
_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


@dataclass(frozen=True)
class Dimension:
    """One knob of the search space: a set of values, or an integer range."""

    name: str
    values: tuple[Scalar, ...] = ()  # a set (empty for a range)
    low: int | None = None
    high: int | None = None
    log: bool = False

    @property
    def is_range(self) -> bool:
        return self.low is not None

    @property
    def ordinal(self) -> bool:
        """A set of numbers: their order matters (the optimiser sees their index)."""
        return bool(self.values) and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in self.values)

    def size(self) -> int:
        return int(self.high - self.low + 1) if self.is_range and self.high is not None and self.low is not None else len(self.values)

    def contains(self, value: object) -> bool:
        if self.low is not None and self.high is not None:  # a range
            return isinstance(value, int) and not isinstance(value, bool) and self.low <= value <= self.high
        return any(_same(value, v) for v in self.values)

    def describe(self) -> str:
        if self.is_range:
            return f"{self.low}..{self.high}" + (" (log)" if self.log else "")
        return "{" + ", ".join(map(_fmt, self.values)) + "}"

    def edge_values(self) -> list[Scalar]:
        """What the engine is asked about before the run: the set, or the range's ends."""
        return [self.low, self.high] if self.low is not None and self.high is not None else list(self.values)


@dataclass(frozen=True)
class Budget:
    """Cells (`cells`) or wall seconds (`seconds`): exactly one is set."""

    cells: int | None = None
    seconds: float | None = None

    def text(self) -> str:
        return f"{self.cells} cells" if self.cells is not None else f"{self.seconds:.0f} s"


@dataclass
class TuneSpec:
    """The search space and how to search it (the engine-free part; `check_default`
    completes it once the engine's defaults are known)."""

    dimensions: list[Dimension]
    budget: Budget
    default: dict[str, object] = field(default_factory=dict)  # as given in [tune] default (may be partial)
    candidates: int = 6
    max_blocks: int = 3
    confirm_blocks: int | None = None  # None: sized by the noise the race measures

    def size(self) -> int:
        return math.prod(d.size() for d in self.dimensions)

    def names(self) -> list[str]:
        return [d.name for d in self.dimensions]

    def to_dict(self) -> dict[str, object]:
        return {
            "knobs": {d.name: ({"min": d.low, "max": d.high, "log": d.log} if d.is_range else list(d.values)) for d in self.dimensions},
            "budget": {"cells": self.budget.cells, "seconds": self.budget.seconds},
            "default": self.default,
            "candidates": self.candidates,
            "max_blocks": self.max_blocks,
            "confirm_blocks": self.confirm_blocks,
        }


def parse_budget(value: object, where: str = "--budget") -> Budget:
    """60 or "60" -> 60 cells; "90s", "20m", "1h30m" -> seconds. Anything else is refused."""
    if isinstance(value, bool):
        raise SpecError(f"{where} {value!r}: not a budget; give cells (an integer such as 60) or a duration such as 90s, 20m or 1h30m")
    if isinstance(value, int) or (isinstance(value, str) and value.strip().isdigit()):
        cells = int(value)
        if cells < 1:
            raise SpecError(f"{where} {value!r}: the budget must be at least 1 cell")
        return Budget(cells=cells)
    text = str(value).strip().lower().replace(" ", "")
    match = _DURATION.match(text)
    if not text or not match or not any(match.groups()):
        raise SpecError(f"{where} {value!r}: not a budget; give cells (an integer such as 60) or a duration such as 90s, 20m or 1h30m")
    h, m, s = (int(g) if g else 0 for g in match.groups())
    seconds = 3600 * h + 60 * m + s
    if seconds < 1:
        raise SpecError(f"{where} {value!r}: the budget must be at least 1 s")
    return Budget(seconds=float(seconds))


def split_raw(raw: dict[str, object], source: str, budget_option: str | None) -> tuple[dict[str, object], TuneSpec]:
    """An experiment file's dict -> (the dict blocklab's spec reads, with each range
    as its two ends and no [tune] table; the tune spec). Raises SpecError."""
    raw = copy.deepcopy(raw)
    table = raw.pop("tune", {})
    if not isinstance(table, dict):
        raise SpecError(f"{source}: tune: {table!r} is not accepted: it must be a table ([tune])")
    unknown = [k for k in table if k not in TUNE_FIELDS]
    if unknown:
        raise SpecError(f"{source}: tune.{unknown[0]}: unknown field; accepted: {', '.join(TUNE_FIELDS)}")
    knobs = raw.get("knobs", {})
    if not isinstance(knobs, dict) or not knobs:
        raise SpecError(f"{source}: knobs: tune needs at least one knob in [knobs], as a list of values or a range {{min = 1, max = 64}}")
    dimensions = [_dimension(name, value, source) for name, value in knobs.items()]
    raw["knobs"] = {d.name: d.edge_values() for d in dimensions}
    if "measure" in raw and isinstance(raw["measure"], dict) and raw["measure"].get("search", "grid") != "grid":
        raise SpecError(f"{source}: measure.search: tune searches itself; leave measure.search out")
    given = budget_option if budget_option is not None else table.get("budget")
    if given is None:
        raise SpecError(f"{source}: no budget: give --budget CELLS|DURATION (e.g. --budget 60 or --budget 20m) or [tune] budget")
    budget = parse_budget(given, "--budget" if budget_option is not None else f"{source}: tune.budget")
    default = table.get("default", {})
    if not isinstance(default, dict):
        raise SpecError(f"{source}: tune.default: {default!r} is not accepted: it must be a table of knob = value")
    names = [d.name for d in dimensions]
    for name in default:
        if name not in names:
            raise SpecError(f"{source}: tune.default.{name}: not a knob of [knobs]; the knobs are {', '.join(names)}")
    spec = TuneSpec(dimensions, budget, dict(default),
                    candidates=_count(table, "candidates", 6, 1, 12, source),
                    max_blocks=_count(table, "max_blocks", 3, 2, 30, source),
                    confirm_blocks=_optional_count(table, "confirm_blocks", 3, 30, source))
    if spec.size() < 2:
        raise SpecError(f"{source}: knobs: the space holds one configuration; give at least two values to choose from")
    return raw, spec


def _optional_count(table: Mapping[str, object], name: str, low: int, high: int, source: str) -> int | None:
    """The count if given (checked as _count does), else None."""
    return _count(table, name, 0, low, high, source) if name in table else None


def _count(table: Mapping[str, object], name: str, default: int, low: int, high: int, source: str) -> int:
    value = table.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise SpecError(f"{source}: tune.{name}: {value!r} is not accepted: an integer from {low} to {high}")
    return value


def _dimension(name: str, value: object, source: str) -> Dimension:
    where = f"{source}: knobs.{name}"
    if isinstance(value, list):
        if not value:
            raise SpecError(f"{where}: an empty list; give at least one value, or a range {{min = 1, max = 64}}")
        if len({_fmt(v) for v in value}) != len(value):
            raise SpecError(f"{where}: lists a value twice: {value}")
        return Dimension(name, values=tuple(value))
    if not isinstance(value, dict):
        raise SpecError(f"{where}: {value!r} is not accepted: a list of values or a range {{min = 1, max = 64, log = true}}")
    unknown = [k for k in value if k not in RANGE_FIELDS]
    if unknown:
        raise SpecError(f"{where}.{unknown[0]}: unknown field of a range; accepted: {', '.join(RANGE_FIELDS)}")
    low, high, log = value.get("min"), value.get("max"), value.get("log", False)
    for what, v in (("min", low), ("max", high)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise SpecError(f"{where}.{what}: {v!r} is not accepted: a range needs integer min and max (give a list for other values)")
    assert isinstance(low, int) and isinstance(high, int)
    if low >= high:
        raise SpecError(f"{where}: min {low} is not below max {high}")
    if not isinstance(log, bool):
        raise SpecError(f"{where}.log: {log!r} is not accepted: true or false")
    if log and low < 1:
        raise SpecError(f"{where}: a log range needs min >= 1, not {low}")
    return Dimension(name, low=low, high=high, log=log)


def check_default(spec: TuneSpec, engine_defaults: Mapping[str, object], canonical: Mapping[str, list[Scalar]], source: str) -> dict[str, object]:
    """The default configuration: [tune] default where given, the engine's default
    for the other knobs. Every value must lie in the space (`canonical`: each
    set's values as the engine normalised them), else SpecError naming it."""
    out: dict[str, object] = {}
    for dim in spec.dimensions:
        given = dim.name in spec.default
        value = spec.default[dim.name] if given else engine_defaults.get(dim.name)
        where = f"tune.default.{dim.name}" if given else f"the engine's default of {dim.name}"
        if value is None:
            raise SpecError(f"{source}: {dim.name} has no engine default; name one in [tune] default = {{\"{dim.name}\" = ...}}")
        if dim.is_range:
            ok = dim.contains(value)
        else:
            ok = any(_same(value, v) for v in canonical.get(dim.name, dim.values)) or dim.contains(value)
        if not ok:
            hint = "" if given else f"; add it to the knob's values or name another in [tune] default = {{\"{dim.name}\" = ...}}"
            raise SpecError(f"{source}: {where} = {_fmt(value)} lies outside the space {dim.describe()}{hint}")
        out[dim.name] = value
    return out


def _same(a: object, b: object) -> bool:
    return _fmt(a).lower() == _fmt(b).lower()


def _fmt(value: object) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)
