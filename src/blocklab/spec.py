"""Experiment files (TOML) -> a validated Spec.

Every error names the file, the field, the bad value and what is accepted, and
is raised before anything runs. Engine-specific checks (does this server have
the knob, is the value in its range) happen in `validate.py`, which asks the
engine; this module checks everything that needs no engine.
"""

from __future__ import annotations

import copy
import re
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import ErrorDetails

from .budget import ACCEPTED as BUDGET_ACCEPTED
from .budget import Budget, BudgetError, is_off, parse_budget
from .engines import DEFAULT_ENGINE, engine_class
from .engines import available as available_engines
from .engines.vocabulary import GENERIC_KNOBS
from .errors import SpecError, nearest
from .probes.cpu_profile import DEFAULT_HZ, MAX_HZ

Scalar = bool | int | float | str
WORKLOAD_AXIS = "workload."  # knobs named workload.X sweep the workload's option X
IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
# an experiment's name is a label (it names the results directory), never a path
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,79}$")
# what each command-line option sets in the experiment: an error about one of these
# fields names the option the user typed, not the recipe file it was merged into
OPTION_OF_FIELD = {"measure.repeats": "--repeats", "measure.max_repeats": "--repeats", "dataset.rows": "--rows",
                   "measure.seed": "--seed", "engine.kind": "--engine", "engine.dsn": "--dsn",
                   "measure.cpu_profile_hz": "--cpu-profile-hz", "measure.trace_arg": "--trace-arg",
                   "measure.budget": "--budget"}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EngineSpec(_Strict):
    kind: str = DEFAULT_ENGINE
    dsn: str | None = Field(default=None, description="connect to this server instead of an embedded one")
    settings: dict[str, Scalar] = Field(default_factory=dict, description="knobs held fixed for the whole run")

    @field_validator("kind")
    @classmethod
    def _known_engine(cls, value: str) -> str:
        if value not in available_engines(listed_only=False):
            raise ValueError(f"unknown engine; accepted: {', '.join(available_engines())}")
        return value


class DatasetSpec(_Strict):
    table: str = "blocklab_scan"
    rows: int = Field(default=3_000_000, ge=1, le=2_000_000_000)
    shape: Literal["seed"] = Field(default="seed", description="seed: (id integer, name 'blabla ' || id)")

    @field_validator("table")
    @classmethod
    def _table_is_identifier(cls, value: str) -> str:
        if not IDENTIFIER.match(value):
            raise ValueError("must be a lower-case SQL identifier: letters, digits and _, at most 63")
        return value


class WorkloadSpec(BaseModel):
    """`kind` picks the workload; its other fields are that workload's options,
    checked by the workload's own model (see workloads/)."""

    model_config = ConfigDict(extra="allow", frozen=True)
    kind: str = "full_scan"  # checked against the workloads/ modules in workloads.make_workload

    def options(self) -> dict[str, object]:
        return dict(self.model_extra or {})


class MeasureSpec(_Strict):
    repeats: int = Field(default=3, ge=1, le=1000)
    # auto: cold where the engine can evict the workload's relations, else warm, saying why (experiment.py)
    cache: Literal["cold", "warm", "auto"] = "cold"
    seed: int | None = Field(default=None, ge=0, description="random seed of the plan order; drawn and recorded if absent")
    metric: str | None = Field(default=None, description="metric the verdict is about; the workload's default if absent")
    goal: Literal["max", "min"] | None = None
    practical: float = Field(default=0.0, ge=0.0, lt=1.0, description="differences below this fraction count as none")
    target_ci: float | None = Field(default=None, gt=0.0, lt=1.0, description="add blocks until every interval is this narrow")
    search: Literal["grid", "refine"] = Field(default="grid", description="refine: coarse powers of two, then bisect around the best")
    max_repeats: int = Field(default=20, ge=1, le=1000)
    budget: str | None = Field(default=None, description="stop by the rule (every setting separated from the best or within "
                               "3% of it) or when this is spent: a duration (90s, 5m) or a cell count (200cells)")

    @field_validator("budget", mode="before")
    @classmethod
    def _budget(cls, value: object) -> str | None:
        if value is None or is_off(value):  # off: the fixed plan of `repeats` blocks
            return None
        try:
            parse_budget(value, "")
        except BudgetError:
            raise ValueError(f"not a budget; accepted: {BUDGET_ACCEPTED}; or off") from None
        return str(value)

    def parsed_budget(self) -> Budget | None:
        return parse_budget(self.budget) if self.budget is not None else None

    @property
    def stops_by_rule(self) -> bool:
        """Blocks are added after the first `repeats` until the verdict settles (a budget or target_ci)."""
        return self.budget is not None or self.target_ci is not None
    # seed 001's "why": the engine's stacks sampled per cell (probes/cpu_profile.py), and one
    # function's calls traced with uprobes (probes/trace_function.py)
    cpu_profile: bool = Field(default=False, description="sample the engine's stacks with perf in every cell")
    cpu_profile_hz: int = Field(default=DEFAULT_HZ, ge=1, le=MAX_HZ, description="samples per second per process")
    cpu_profile_where: dict[str, Scalar] = Field(
        default_factory=dict, description="hold these knobs at one value when ranking the functions along the others "
        "(the checksum recipe: {checksum = 'on'}: how the checksum-on cells' functions change with block_size)")
    trace_function: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_.:]{0,200}$",
                                       description="a function of the engine's binary to trace with uprobes in every cell")
    trace_arg: int | None = Field(default=None, ge=1, le=6, description="with trace_function: the integer argument (1-6) to histogram")


class Spec(_Strict):
    name: str = "experiment"
    description: str = ""
    engine: EngineSpec = Field(default_factory=EngineSpec)
    dataset: DatasetSpec = Field(default_factory=DatasetSpec)
    workload: WorkloadSpec = Field(default_factory=WorkloadSpec)
    knobs: dict[str, list[Scalar]] = Field(default_factory=dict)
    measure: MeasureSpec = Field(default_factory=MeasureSpec)
    # how the recipe was adapted to this server (its version, a server given by DSN), one line
    # each; and the recipe's fixed settings a --set replaced: shown in the plan, kept in spec.json
    adapted: list[str] = Field(default_factory=list)
    overridden: list[str] = Field(default_factory=list)

    @field_validator("name")
    @classmethod
    def _name_is_a_label(cls, value: str) -> str:
        if not NAME.match(value) or ".." in value:
            raise ValueError("must be a label of letters, digits and . _ + - (at most 80, starting with a letter or digit), "
                             "not a path: it names the results directory under results/")
        return value

    @field_validator("knobs")
    @classmethod
    def _knob_lists(cls, knobs: dict[str, list[Scalar]]) -> dict[str, list[Scalar]]:
        for name, values in knobs.items():
            if not values:
                raise ValueError(f"knob {name!r} has an empty list; give at least one value")
            if len(set(map(str, values))) != len(values):
                raise ValueError(f"knob {name!r} lists a value twice: {values}")
        return knobs

    @model_validator(mode="after")
    def _knob_names(self) -> Spec:
        prefixes = {e: engine_class(e).native_prefix for e in available_engines(listed_only=False)}
        prefix = prefixes[self.engine.kind]
        named = [("knobs", n) for n in self.knobs] + [("engine.settings", n) for n in self.engine.settings]
        for section, name in named:
            if name in GENERIC_KNOBS or name.startswith(prefix):
                continue
            if name.startswith(WORKLOAD_AXIS) and section == "knobs":
                continue  # a swept workload option, checked by the workload's own model
            other = next((e for e, p in prefixes.items() if name.startswith(p)), None)
            if other:
                raise ValueError(f"{section}.{name}: a {other} parameter, but the engine is {self.engine.kind}")
            raise ValueError(
                f"{section}.{name}: unknown knob{nearest(name, GENERIC_KNOBS)}; accepted: "
                f"{', '.join(GENERIC_KNOBS)}, a native parameter as {prefix}NAME"
                + (", or a workload option as workload.NAME" if section == "knobs" else "")
            )
        return self


# ---------------------------------------------------------------------- loading
def load_spec(path: Path | str, overrides: dict[str, object] | None = None, variant: str | None = None) -> tuple[Spec, str]:
    """Read, merge overrides into, and validate one experiment file.

    Returns the spec and the file's text (saved beside the results)."""
    path = Path(path)
    text = read_experiment_text(path)
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise SpecError(f"{path}: malformed TOML: {err}") from None
    if not raw:
        raise SpecError(f"{path}: the experiment file is empty; it needs at least [workload] and [knobs] "
                        "(start from a recipe: blocklab recipes --show mbrc > mine.toml)")
    return spec_from_dict(raw, str(path), overrides or {}, variant), text


def read_experiment_text(path: Path) -> str:
    """An experiment file's text, or one line saying why it cannot be read."""
    if path.is_dir():
        raise SpecError(f"{path}: is a directory; give an experiment file (.toml) or a recipe name (blocklab recipes lists them)")
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise SpecError(f"{path}: no such experiment file") from None
    except OSError as err:
        raise SpecError(f"{path}: cannot read the experiment file: {err.strerror or err}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise SpecError(f"{path}: line {line}: byte 0x{data[err.start]:02x} is not UTF-8; an experiment file is "
                        "UTF-8 text (TOML): save it as UTF-8") from None


def experiment_engines(raw: dict[str, Any]) -> list[str]:
    """The engines an experiment file runs on: its own engine and those it has a
    [variants.<engine>] for (a file without variants runs wherever its knobs exist)."""
    own = raw.get("engine", {}).get("kind", DEFAULT_ENGINE) if isinstance(raw.get("engine"), dict) else DEFAULT_ENGINE
    return list(dict.fromkeys([own, *raw.get("variants", {})]))


def _check_variants(raw: dict[str, Any], kind: Any, source: str) -> None:
    """[variants.X] names a real engine; an engine asked for has a variant (in a file that has any)."""
    engines = available_engines(listed_only=False)
    for name in raw.get("variants", {}):
        if name not in engines:
            raise SpecError(f"{source}: [variants.{name}]: no engine is called {name!r}{nearest(name, engines)}; "
                            f"engines: {', '.join(available_engines())}")
    if raw.get("variants") and isinstance(kind, str) and kind in engines and kind not in experiment_engines(raw):
        name = raw.get("name", source)
        raise SpecError(f"{name} has no {kind} variant; it runs on: {', '.join(experiment_engines(raw))}")


def spec_from_dict(
    raw: dict[str, Any],
    source: str,
    overrides: dict[str, Any],
    variant: str | None = None,
    *,
    engine_version: tuple[int, ...] | None = None,
    dsn: bool = False,
) -> Spec:
    """The spec of an experiment file's dict, its engine's variant, --quick and the
    command line merged in that order. With the engine's version (known once it
    answers), the variant's adaptations apply: `[variants.E.dsn]` on a server
    given by DSN, `[variants.E.before.N]` on versions older than N (newest first,
    so the oldest version's adaptations win), each with its `why` and the keys
    it `drop`s; `min_version` refuses older servers."""
    raw = copy.deepcopy(raw)
    overrides = dict(overrides)
    _check_tables(raw, source)
    quick = raw.pop("quick", None)
    variants = raw.pop("variants", {})
    kind = overrides.get("engine.kind") or raw.get("engine", {}).get("kind", DEFAULT_ENGINE)
    _check_variants({**raw, "variants": variants}, kind, source)
    # the recipe's [variants.<engine>]: per-engine knobs and sizes
    engine_variant: dict[str, Any] | None = variants.get(kind) if isinstance(kind, str) else None
    base_workload = _workload_kind(raw)
    if engine_variant is not None:
        _merge_dotted(raw, engine_variant, source, f"variants.{kind}")
    use_quick = bool(overrides.pop("quick", False))
    if use_quick:
        if quick is None:
            raise SpecError(f"{source}: --quick: this experiment has no [quick] section")
        if _workload_kind(raw) != base_workload:
            # the variant runs another workload: [quick]'s workload options were written for the base one
            quick = {k: v for k, v in quick.items() if k != "workload" and not k.startswith("workload.")}
        _merge_dotted(raw, quick, source, "quick")
        if engine_variant is not None and isinstance(engine_variant.get("quick"), dict):
            _merge_dotted(raw, engine_variant["quick"], source, f"variants.{kind}.quick")
    raw.get("engine", {}).pop("quick", None)
    adapted = _adapt(raw, engine_variant or {}, f"variants.{kind}", source, engine_version, dsn, use_quick)
    overridden = _override_fixed(raw, overrides)
    _merge_dotted(raw, overrides, source, "option")
    raw["adapted"], raw["overridden"] = adapted, overridden
    try:
        return Spec.model_validate(raw)
    except ValidationError as err:
        raise SpecError(format_validation_error(err, source, overrides)) from None


ADAPTATION_KEYS = ("quick", "before", "dsn", "min_version", "why", "drop", "refuse")


def version_text(version: tuple[int, ...]) -> str:
    return ".".join(str(v) for v in version)


def _parse_version(text: str, where: str, source: str) -> tuple[int, ...]:
    try:
        return tuple(int(p) for p in str(text).split("."))
    except ValueError:
        raise SpecError(f"{source}: {where}: {text!r} is not a version like 17 or 10.6") from None


def _adapt(raw: dict[str, Any], variant: dict[str, Any], where: str, source: str, version: tuple[int, ...] | None,
           dsn: bool, quick: bool) -> list[str]:
    """Apply the variant's adaptations to this server; their `why` lines."""
    if version is None:
        return []
    if "min_version" in variant:
        oldest = _parse_version(variant["min_version"], f"{where}.min_version", source)
        if version < oldest:
            raise SpecError(f"{source}: does not run on this server: it needs version {version_text(oldest)} or later "
                            f"of the engine; this server is {version_text(version)} ({where}.min_version)")
    sections: list[tuple[str, dict[str, Any]]] = []
    if dsn and isinstance(variant.get("dsn"), dict):
        sections.append((f"{where}.dsn", variant["dsn"]))
    before = variant.get("before", {})
    if not isinstance(before, dict):
        raise SpecError(f"{source}: {where}.before: must be a table of versions ([{where}.before.17])")
    ordered = sorted(((_parse_version(v, f"{where}.before.{v}", source), v, t) for v, t in before.items()), reverse=True)
    sections += [(f"{where}.before.{v}", t) for parsed, v, t in ordered if version < parsed]
    why = []
    for name, table in sections:
        if not isinstance(table, dict):
            raise SpecError(f"{source}: {name}: must be a table")
        if table.get("refuse"):  # the recipe cannot be adapted here: it says why and what would make it run
            raise SpecError(f"{source}: does not run on this server: {table['refuse']} ({name})")
        for dotted in table.get("drop", []):
            _drop_dotted(raw, str(dotted))
        _merge_dotted(raw, {k: v for k, v in table.items() if k not in ADAPTATION_KEYS}, source, name)
        if quick and isinstance(table.get("quick"), dict):
            _merge_dotted(raw, table["quick"], source, f"{name}.quick")
        if table.get("why"):
            why.append(str(table["why"]))
    return why


def _drop_dotted(raw: dict[str, Any], dotted: str) -> None:
    for section in ("knobs.", "engine.settings."):
        if dotted.startswith(section):
            node = raw.get("knobs", {}) if section == "knobs." else raw.get("engine", {}).get("settings", {})
            node.pop(dotted[len(section):], None)
            return
    node = raw
    keys = dotted.split(".")
    for key in keys[:-1]:
        node = node.get(key, {})
    if isinstance(node, dict):
        node.pop(keys[-1], None)


def _override_fixed(raw: dict[str, Any], overrides: dict[str, Any]) -> list[str]:
    """--set KNOB=V on a knob the file holds fixed ([engine.settings]) replaces the fixed
    value (one value) or sweeps it (several); what was replaced, for the plan."""
    fixed = raw.get("engine", {}).get("settings", {})
    out = []
    for dotted in [k for k in overrides if k.startswith("knobs.")]:
        name = dotted[len("knobs."):]
        if name not in fixed:
            continue
        values = overrides[dotted]
        was = fixed.pop(name)
        if isinstance(values, list) and len(values) == 1:
            fixed[name] = values[0]
            del overrides[dotted]
            out.append(f"{name} = {values[0]!r} (the experiment holds it at {was!r})")
        else:
            out.append(f"{name} swept over {values!r} (the experiment holds it at {was!r})")
    return out


def _check_tables(raw: dict[str, Any], source: str) -> None:
    """The sections that must be TOML tables are tables (checked before they are read)."""
    for section in ("engine", "dataset", "workload", "knobs", "measure", "quick", "variants"):
        if section in raw and not isinstance(raw[section], dict):
            raise SpecError(f"{source}: {section}: {raw[section]!r} is not accepted: it must be a table ([{section}])")
    for name, table in raw.get("variants", {}).items():
        if not isinstance(table, dict):
            raise SpecError(f"{source}: variants.{name}: {table!r} is not accepted: it must be a table ([variants.{name}])")
        if "quick" in table and not isinstance(table["quick"], dict):
            raise SpecError(f"{source}: variants.{name}.quick: it must be a table ([variants.{name}.quick])")
def _workload_kind(raw: dict[str, Any]) -> str:
    return str(raw.get("workload", {}).get("kind", WorkloadSpec.model_fields["kind"].default))


def _merge_dotted(raw: dict[str, object], updates: dict[str, object], source: str, what: str) -> None:
    nested = updates.get("workload")
    kind = updates.get("workload.kind") or (nested.get("kind") if isinstance(nested, dict) else None)
    if kind and kind != _workload_kind(raw):
        # a section that names another workload brings that workload's options: the
        # ones it replaces mean nothing to it (a variant of a recipe for an engine
        # that measures the question with another workload)
        raw["workload"] = {}
    for dotted, value in updates.items():
        if dotted in ADAPTATION_KEYS:
            continue
        if isinstance(value, dict) and "." not in dotted and dotted in ("engine", "dataset", "workload", "measure"):
            for key, sub in value.items():
                _set_dotted(raw, f"{dotted}.{key}", sub)
            continue
        if dotted == "knobs" and isinstance(value, dict):
            raw["knobs"] = dict(value)
            continue
        _set_dotted(raw, dotted, value)


def _set_dotted(raw: dict[str, Any], dotted: str, value: object) -> None:
    # knob names may contain dots themselves (pg.io_combine_limit): split only the section part
    for section in ("knobs.", "engine.settings."):
        if dotted.startswith(section):
            node = raw.setdefault("knobs", {}) if section == "knobs." else raw.setdefault("engine", {}).setdefault("settings", {})
            node[dotted[len(section):]] = value
            return
    node = raw
    keys = dotted.split(".")
    for key in keys[:-1]:
        node = node.setdefault(key, {})
    node[keys[-1]] = value


def format_validation_error(err: ValidationError, source: str, overrides: dict[str, object] | None = None) -> str:
    """Every problem on a line; one the user typed on the command line names the
    option (`--seed -1: ...`), not the recipe file it was merged into."""
    from_file, from_options = [], []
    for problem in err.errors():
        field = ".".join(str(p) for p in problem["loc"])
        message = problem["msg"].removeprefix("Value error, ")
        option = _option_of(field, overrides or {}) or _set_option_of(message, overrides or {})
        if option:
            said = message.split(": ", 1)[1] if option.startswith("--set") else in_words(problem)
            line = f"{option}: {said}"
            if line not in from_options:  # --repeats sets two fields; one line
                from_options.append(line)
        else:
            from_file.append(problem)
    lines = [f"{source}: {len(from_file)} problem(s) in the experiment:"] if from_file else []
    lines += _file_problem_lines(from_file)
    return "\n".join(from_options + lines)


def in_words(problem: ErrorDetails) -> str:
    """pydantic's bounds as a person says them ('must be at least 0'); other messages as they are."""
    ctx = problem.get("ctx") or {}
    words = {"greater_than_equal": ("must be at least", "ge"), "less_than_equal": ("must be at most", "le"),
             "greater_than": ("must be more than", "gt"), "less_than": ("must be less than", "lt")}
    if problem["type"] in words:
        text, key = words[problem["type"]]
        return f"{text} {ctx.get(key)}"
    if problem["type"].endswith("_parsing") or problem["type"].endswith("_type"):
        return f"{problem['msg'].lower().replace('input should be', 'must be')}"
    return str(problem["msg"]).removeprefix("Value error, ")


def _set_option_of(message: str, overrides: dict[str, object]) -> str | None:
    """`--set NAME` for a model-wide problem about a knob the command line named."""
    match = re.match(r"(knobs|engine\.settings)\.([^:]+):", message)
    if match and f"knobs.{match.group(2)}" in overrides:
        return f"--set {match.group(2)}"
    return None


def _option_of(field: str, overrides: dict[str, object]) -> str | None:
    """`--repeats 100000` for a problem in measure.max_repeats that --repeats set; None for the file's own fields."""
    if field in OPTION_OF_FIELD and (field in overrides or (field == "measure.max_repeats" and "measure.repeats" in overrides)):
        option = OPTION_OF_FIELD[field]
        value = overrides.get("measure.repeats" if option == "--repeats" else field)
        return f"{option} {value}"
    return None


def _file_problem_lines(problems: list[ErrorDetails]) -> list[str]:
    lines = []
    for problem in problems:
        field = ".".join(str(p) for p in problem["loc"])
        given = problem.get("input")
        message = problem["msg"].removeprefix("Value error, ")
        if problem["type"] == "extra_forbidden":
            lines.append(f"  {field}: unknown field (value {given!r}); see `blocklab recipes --show mbrc` for the fields")
        elif problem["type"] == "missing":
            lines.append(f"  {field}: required")
        elif not field:
            lines.append(f"  {message}")
        elif isinstance(given, (dict, list)) and problem["type"] == "value_error":
            lines.append(f"  {field}: {message}")
        else:
            lines.append(f"  {field}: {given!r} is not accepted: {message}")
    return lines


def parse_set_option(text: str) -> tuple[str, list[Scalar]]:
    """--set KNOB=V1,V2,... -> (knob, [values]) with TOML-like scalars."""
    if "=" not in text:
        raise SpecError(f"--set {text!r}: expected KNOB=V1,V2,... (for example --set multiblock_read=8,16,32)")
    name, _, values = text.partition("=")
    name = name.strip()
    if not name:
        raise SpecError(f"--set {text!r}: the knob name is empty; expected KNOB=V1,V2,...")
    items = [v.strip() for v in values.split(",") if v.strip()]
    if not items:
        raise SpecError(f"--set {text!r}: no values after '='; expected KNOB=V1,V2,...")
    return name, [_scalar(v) for v in items]


def _scalar(text: str) -> Scalar:
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    if re.fullmatch(r"-?\d+\.\d*", text):
        return float(text)
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    return text
