"""Hostile input never reaches a traceback: experiment files, --set values and
CLI options fuzzed (hypothesis) end in a result or a SpecError naming the field
(exit 2); values that reach SQL are parameters or checked against the engine's
catalog, never pasted into SQL text."""

from __future__ import annotations

import string
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from blocklab.cli import main
from blocklab.spec import SpecError, parse_set_option, spec_from_dict

SECTIONS = ["name", "description", "engine", "dataset", "workload", "knobs", "measure", "quick", "variants", "bogus"]
scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**12, 10**12), st.floats(allow_nan=True), st.text(max_size=20))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)), max_leaves=12)
FIELDS = {
    "engine": st.fixed_dictionaries({}, optional={"kind": st.sampled_from(["null", "postgres", "oracle", "", "NULL"]) | st.text(max_size=8),
                                                  "settings": st.dictionaries(st.text(max_size=15), scalars, max_size=3),
                                                  "dsn": st.text(max_size=20)}),
    "dataset": st.fixed_dictionaries({}, optional={"rows": st.integers(-5, 10**10) | st.text(max_size=5), "table": st.text(max_size=70),
                                                   "shape": st.text(max_size=6)}),
    "workload": st.fixed_dictionaries({"kind": st.sampled_from(["null", "full_scan", "slob", "nope"])},
                                      optional={"sleep_s": scalars, "fail_level": scalars, "sessions": scalars, "x": scalars}),
    "knobs": st.dictionaries(st.sampled_from(["null.level", "null.mode", "multiblock_read", "workload.noise", "pg.x", "bogus"]) | st.text(max_size=10),
                             st.lists(scalars, max_size=4), max_size=3),
    "measure": st.fixed_dictionaries({}, optional={k: scalars for k in ("repeats", "cache", "seed", "metric", "goal", "practical",
                                                                          "target_ci", "search", "max_repeats")}),
}
experiments = st.fixed_dictionaries({}, optional={**FIELDS, **{k: values for k in SECTIONS if k not in FIELDS}})


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(experiments)
def test_experiment_files_end_in_a_spec_or_a_named_error(raw):
    try:
        spec_from_dict(raw, "fuzz.toml", {})
    except SpecError as err:
        assert str(err).startswith("fuzz.toml"), err


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=string.printable, max_size=40))
def test_set_values_end_in_a_pair_or_a_named_error(text):
    try:
        name, items = parse_set_option(text)
        assert name and items
    except SpecError as err:
        assert str(err).startswith("--set"), err


NULL_EXPERIMENT = """
name = "fuzz"
[engine]
kind = "null"
[workload]
kind = "null"
[knobs]
"null.level" = [1, 2]
[measure]
cache = "warm"
"""


@pytest.fixture(scope="module")
def experiment_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("fuzz") / "fuzz.toml"
    path.write_text(NULL_EXPERIMENT)
    return path


option_values = st.one_of(st.integers(-10**9, 10**9).map(str), st.text(alphabet=string.printable, max_size=12))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(option=st.sampled_from(["--repeats", "--rows", "--seed", "--set", "--engine", "--dsn"]), value=option_values)
def test_cli_options_exit_0_or_2_with_a_message(experiment_file, option, value):
    result = CliRunner().invoke(main, ["plan", str(experiment_file), option, value])
    assert result.exit_code in (0, 2), (option, value, result.output, result.exception)
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit), result.exception
    if result.exit_code == 2:
        assert "error:" in result.output or "Error:" in result.output, result.output


INJECTIONS = ["x'; DROP TABLE canary; --", 'x"; DROP TABLE canary; --', "1; DROP TABLE canary", "$$ DROP TABLE canary $$"]


@pytest.mark.parametrize("evil", INJECTIONS)
def test_injection_in_a_table_name_or_a_numeric_knob_is_refused_by_name(evil):
    with pytest.raises(SpecError, match=r"dataset\.table: .* must be a lower-case SQL identifier"):
        spec_from_dict({"dataset": {"table": evil}}, "t", {})
    from blocklab.engines.base import KnobError
    from blocklab.engines.null import NullEngine

    with pytest.raises(KnobError, match=r"knob 'null.level' .* not accepted; accepted: an integer from 0 to 1,000"):
        NullEngine().check_settings({"null.level": evil})


@pytest.mark.engine
@pytest.mark.parametrize("evil", INJECTIONS)
def test_injection_in_a_string_knob_reaches_postgres_as_a_value(pg_engine, evil):
    pg_engine.query("CREATE TABLE IF NOT EXISTS canary (x int)")
    applied = pg_engine.apply({"pg.application_name": evil})
    assert applied == {"pg.application_name": evil}  # a parameter of set_config: the server took it as text
    assert pg_engine.check_applied({"pg.application_name": evil}) == []
    assert pg_engine.query("SELECT count(*) FROM pg_class WHERE relname = 'canary'") == [(1,)]
    pg_engine.apply({})


@pytest.mark.engine
def test_injection_in_a_knob_name_is_checked_against_the_catalog(pg_engine):
    from blocklab.engines.base import KnobError

    with pytest.raises(KnobError, match=r"unknown PostgreSQL parameter 'pg.work_mem; DROP TABLE canary'"):
        pg_engine.knob("pg.work_mem; DROP TABLE canary")


def test_a_mariadb_dsn_naming_another_database_is_refused():
    from blocklab.engines.base import KnobError
    from blocklab.engines.mariadb.dsn import parse_dsn

    with pytest.raises(KnobError, match="blocklab works only in its own database 'blocklab'"):
        parse_dsn("mysql://root@localhost/mysql`; DROP DATABASE x")
