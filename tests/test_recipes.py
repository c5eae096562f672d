"""Every built-in recipe, on every engine it has a variant for, full and --quick,
passes validation against the real engine and plans (nothing runs)."""

from __future__ import annotations

import tomllib

import pytest

from blocklab import recipes
from blocklab.lab import Overrides, load_experiment, plan_text

pytestmark = pytest.mark.engine


def _cases() -> list[tuple[str, str, bool]]:
    out = []
    for name in recipes.names():
        raw = tomllib.loads(recipes.path_of(name).read_text())
        engines = [raw.get("engine", {}).get("kind", "postgres"), *raw.get("variants", {})]
        for engine in dict.fromkeys(engines):
            out += [(name, engine, False), (name, engine, True)]
    return out


@pytest.mark.parametrize("name, engine, quick", _cases(), ids=lambda v: str(v))
def test_recipe_validates_and_plans(cache_dir, name, engine, quick):
    exp = load_experiment(name, Overrides(engine=engine, quick=quick), cache_dir=cache_dir / "recipes")
    try:
        lines = plan_text(exp)
    finally:
        exp.engine.stop()  # validation leaves it running for the run that would follow
    assert exp.spec.engine.kind == engine
    assert "estimated time" in lines[-1]
    assert len(exp.plan().cells) >= 2, lines[:3]
    # every built-in recipe stops by the rule within a default budget, and the plan says so
    assert exp.spec.measure.parsed_budget() is not None, name
    assert any(line.startswith("budget ") for line in lines) and any("stopping rule:" in line for line in lines), lines[-4:]


def test_every_recipe_has_a_description_and_a_quick_section():
    for name in recipes.names():
        raw = tomllib.loads(recipes.path_of(name).read_text())
        assert raw.get("description"), name
        assert isinstance(raw.get("quick"), dict), name
