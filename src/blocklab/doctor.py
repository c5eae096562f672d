"""What runs where: every recipe and knob on a server, and why not when not.

Two sources, one vocabulary:

* the recipes themselves: each states, per engine, the oldest version it runs
  on and how it adapts on older versions and on a server given by DSN
  (`[variants.E.before.N]`, `[variants.E.dsn]`, with their `why`, `drop`
  and `refuse`). `recipe_outcome` reads them for any engine, version and mode,
  with no server at all: that is the README's version table
  (`version_table_markdown`), and the first column of `blocklab doctor`;
* the server itself (`diagnose`): each recipe validated against it as `run`
  would (knobs in its catalog, what may be changed there, the privileges it
  grants), each generic knob resolved, and the privileges blocklab has.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from . import recipes
from .engines import DEFAULT_ENGINE, available, engine_class
from .engines.base import Engine, EngineError
from .engines.vocabulary import GENERIC_KNOBS, ApplyClass, KnobError, KnobInfo
from .spec import SpecError, spec_from_dict

RUNS, ADAPTED, REFUSED = "runs", "runs adapted", "refused"


@dataclass(frozen=True)
class Outcome:
    status: str  # runs | runs adapted | refused
    why: list[str] = field(default_factory=list)  # the adaptations, or the refusal

    def short(self) -> str:
        return self.status if not self.why else f"{self.status}: {'; '.join(self.why)}"


def recipe_engines(name: str) -> list[str]:
    raw = tomllib.loads(recipes.path_of(name).read_text())
    return list(dict.fromkeys([raw.get("engine", {}).get("kind", DEFAULT_ENGINE), *raw.get("variants", {})]))


def recipe_outcome(name: str, kind: str, version: tuple[int, ...], dsn: bool, quick: bool = False) -> Outcome:
    """What the recipe does on an engine of this version and mode, by its own word
    (a server may still refuse a knob or a privilege: see diagnose)."""
    raw = tomllib.loads(recipes.path_of(name).read_text())
    if kind not in recipe_engines(name):
        return Outcome(REFUSED, [f"the recipe has no variant for engine {kind}"])
    overrides: dict[str, object] = {"engine.kind": kind, "quick": quick}
    try:
        spec = spec_from_dict(raw, name, overrides, engine_version=version, dsn=dsn)
    except SpecError as err:
        return Outcome(REFUSED, [str(err).split("does not run on this server: ", 1)[-1]])
    return Outcome(ADAPTED, list(spec.adapted)) if spec.adapted else Outcome(RUNS)


def table_columns() -> list[tuple[str, str, tuple[int, ...], bool]]:
    """The columns of the README's table: the kinds of server people have, as each
    engine declares them (Capabilities.servers), the default engine first."""
    kinds = sorted(available(), key=lambda kind: kind != DEFAULT_ENGINE)
    return [(s.label, kind, s.version, s.dsn) for kind in kinds for s in engine_class(kind).capabilities.servers]


def version_table_markdown() -> str:
    """The README's table: every recipe on every kind of server, by the recipes' own word."""
    columns = table_columns()
    header = "| recipe | " + " | ".join(c[0] for c in columns) + " |"
    lines = [header, "|" + "---|" * (len(columns) + 1)]
    notes: list[str] = []
    for name in recipes.names():
        cells = []
        for _, kind, version, dsn in columns:
            outcome = recipe_outcome(name, kind, version, dsn)
            if outcome.status == RUNS:
                cells.append("runs")
                continue
            for why in outcome.why:
                if why not in notes:
                    notes.append(why)
            marks = ",".join(str(notes.index(w) + 1) for w in outcome.why)
            cells.append(f"{'adapted' if outcome.status == ADAPTED else 'refused'} ({marks})")
        lines.append(f"| `{name}` | " + " | ".join(cells) + " |")
    lines.append("")
    lines += [f"{i + 1}. {why}" for i, why in enumerate(notes)]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------- a live server
@dataclass
class Diagnosis:
    engine: str
    server: str
    version: str
    mode: str
    recipes: list[tuple[str, Outcome, Outcome]] = field(default_factory=list)  # name, by the recipe, on the server
    knobs: list[tuple[str, str, str]] = field(default_factory=list)  # knob, native / apply, or why not
    privileges: list[tuple[str, str]] = field(default_factory=list)


def diagnose(kind: str, dsn: str | None, *, allow_server_changes: bool = False, cache_dir: Path | None = None) -> Diagnosis:
    """Every recipe validated against this server as `run` validates it, every generic knob
    resolved, and the privileges blocklab has there. Nothing is changed on the server."""
    from .engines import make_engine
    from .lab import Overrides, load_experiment

    engine: Engine = make_engine(kind, dsn=dsn, allow_server_changes=allow_server_changes, cache_dir=cache_dir)
    try:
        engine.start()
    except EngineError as err:
        raise SpecError(f"--dsn: {err}" if dsn else str(err)) from None
    try:
        version = engine.version_tuple()
        info = engine.info()
        found = Diagnosis(engine=kind, server=str(info.extra.get("server") or (dsn and "the --dsn server") or "embedded"),
                          version=info.version, mode=engine.mode)
        found.knobs = _knobs(engine)
        found.privileges = engine.privileges()
    finally:
        engine.stop()
    for name in recipes.names():
        if kind not in recipe_engines(name):
            continue
        by_recipe = recipe_outcome(name, kind, version, engine.mode == "dsn", quick=True)
        try:
            exp = load_experiment(name, Overrides(engine=kind, dsn=dsn, quick=True), allow_server_changes=allow_server_changes,
                                  cache_dir=cache_dir)
            exp.engine.stop()
            on_server = Outcome(ADAPTED, list(exp.spec.adapted)) if exp.spec.adapted else Outcome(RUNS)
        except SpecError as err:
            on_server = Outcome(REFUSED, [_reason(str(err), name)])
        found.recipes.append((name, by_recipe, on_server))
    return found


def _reason(message: str, name: str) -> str:
    text = message.split(": ", 1)[1] if message.startswith(str(recipes.path_of(name))) else message
    return text.replace("does not run on this server: ", "")


def _knobs(engine: Engine) -> list[tuple[str, str, str]]:
    out = []
    for knob in GENERIC_KNOBS:
        try:
            info = engine.knob(knob)
        except KnobError as err:
            out.append((knob, "-", str(err).split(": ", 1)[-1]))
            continue
        if len(info.choices) == 1 and str(info.choices[0]) == str(info.default):
            out.append((knob, f"{info.native} [{info.apply.label}]", f"only its own value here: {info.describe_value(info.default)}"))
            continue
        try:
            engine.check_settings({knob: _another_value(info)} if info.default is not None else {}, partial=True)
            where = "" if engine.mode != "dsn" else " (may be changed here)"
        except KnobError as err:
            where = f" - {str(err).split(': ', 1)[-1]}"
        apply = info.apply.label if info.apply != ApplyClass.SESSION else "session"
        out.append((knob, f"{info.native} [{apply}]", where.strip(" -") or "available"))
    return out


def _another_value(info: KnobInfo) -> object:
    """A value other than the knob's current one, when there is one: asking for the
    value a server already has proves nothing about changing it."""
    default = info.default
    if isinstance(default, bool):
        return not default
    if info.kind == "bool":  # a default the engine reports in its own words ('' for debug_io_direct)
        return True
    others = [c for c in info.choices if str(c) != str(default)]
    if others:
        return others[0]
    if isinstance(default, int) and info.minimum is not None and info.maximum is not None:
        return int(info.minimum) if default != info.minimum else int(info.maximum)
    return default


def engine_display(kind: str) -> str:
    return str(engine_class(kind).display)
