"""The ground floor: what blocklab's JSON files hold, as types.

spec.json, plan.json, results.jsonl, summary.json and the rest are read with
`json.loads`, whose result the type checker knows nothing about. `JsonValue` says
what such a value can be; code that reads one narrows it with `isinstance` (or
the helpers below, which say what they expected when a file holds something
else) before it uses it.
"""

from __future__ import annotations

from typing import TypeAlias

JsonScalar: TypeAlias = str | int | float | bool | None
JsonValue: TypeAlias = str | int | float | bool | None | list["JsonValue"] | dict[str, "JsonValue"]
JsonObject: TypeAlias = dict[str, JsonValue]


def as_object(value: object) -> dict[str, JsonValue]:
    """`value` if it is a JSON object, else an empty one (a field a file lacks or holds as something else)."""
    return value if isinstance(value, dict) else {}


def as_list(value: object) -> list[JsonValue]:
    """`value` if it is a JSON array, else an empty one."""
    return value if isinstance(value, list) else []


def as_number(value: object, default: float = 0.0) -> float:
    """`value` if it is a JSON number (not a bool; an int stays an int), else `default`."""
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else default


def number_or_none(value: object) -> float | None:
    """`value` if it is a JSON number (not a bool; an int stays an int), else None."""
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None
