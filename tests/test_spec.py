"""Experiment files: every wrong field gets a message naming it and what is accepted."""

from __future__ import annotations

import pytest

from blocklab.lab import Overrides
from blocklab.recipes import resolve
from blocklab.spec import SpecError, load_spec, parse_set_option


def write(tmp_path, text: str):
    path = tmp_path / "exp.toml"
    path.write_text(text)
    return path


def error_of(tmp_path, text: str, overrides=None) -> str:
    with pytest.raises(SpecError) as info:
        load_spec(write(tmp_path, text), overrides or {})
    return str(info.value)


def test_recipe_loads_with_defaults():
    spec, text = load_spec(resolve("mbrc"))
    assert spec.engine.kind == "postgres"
    assert spec.knobs["multiblock_read"] == [1, 2, 4, 8, 16, 32, 64, 128]
    assert spec.dataset.rows == 3_000_000
    assert "multiblock_read" in text


def test_quick_and_overrides_merge():
    spec, _ = load_spec(resolve("mbrc"), {"quick": True, "measure.repeats": 4, "knobs.multiblock_read": [8, 16]})
    assert spec.dataset.rows == 300_000
    assert spec.measure.repeats == 4
    assert spec.knobs == {"multiblock_read": [8, 16]}


def test_malformed_toml_names_file(tmp_path):
    msg = error_of(tmp_path, "name = [unclosed")
    assert "exp.toml" in msg and "malformed TOML" in msg


def test_unknown_section_field(tmp_path):
    msg = error_of(tmp_path, "[measure]\nrepeatz = 3\n")
    assert "measure.repeatz" in msg and "unknown field" in msg


def test_bad_cache_value_lists_accepted(tmp_path):
    msg = error_of(tmp_path, '[measure]\ncache = "lukewarm"\n')
    assert "measure.cache" in msg and "'lukewarm'" in msg and "'cold'" in msg and "'warm'" in msg


def test_bad_engine_kind(tmp_path):
    msg = error_of(tmp_path, '[engine]\nkind = "oracle"\n')
    assert "engine.kind" in msg and "'oracle'" in msg and "postgres" in msg


def test_negative_rows(tmp_path):
    msg = error_of(tmp_path, "[dataset]\nrows = -5\n")
    assert "dataset.rows" in msg and "-5" in msg and "greater than or equal to 1" in msg


def test_bad_table_name(tmp_path):
    msg = error_of(tmp_path, '[dataset]\ntable = "drop table x"\n')
    assert "dataset.table" in msg and "identifier" in msg


def test_unknown_knob(tmp_path):
    msg = error_of(tmp_path, "[knobs]\nfoo = [1, 2]\n")
    assert "knobs.foo" in msg and "multiblock_read" in msg and "pg.NAME" in msg


def test_native_knob_of_other_engine(tmp_path):
    msg = error_of(tmp_path, '[knobs]\n"mariadb.innodb_flush_neighbors" = [0, 1]\n')
    assert "mariadb parameter" in msg and "engine is postgres" in msg


def test_empty_and_duplicate_knob_lists(tmp_path):
    assert "empty list" in error_of(tmp_path, "[knobs]\nmultiblock_read = []\n")
    assert "twice" in error_of(tmp_path, "[knobs]\nmultiblock_read = [8, 8]\n")


def test_quick_without_section(tmp_path):
    msg = error_of(tmp_path, "name = 'x'\n", {"quick": True})
    assert "--quick" in msg and "no [quick] section" in msg


def test_missing_file(tmp_path):
    with pytest.raises(SpecError, match="no such experiment file"):
        load_spec(tmp_path / "absent.toml")


def test_unknown_recipe():
    with pytest.raises(SpecError, match="unknown recipe 'nope'; built-in recipes: .*mbrc"):
        resolve("nope")


@pytest.mark.parametrize(
    "text, expected",
    [
        ("multiblock_read=8,16,32", ("multiblock_read", [8, 16, 32])),
        ("direct_io=true,false", ("direct_io", [True, False])),
        ("pg.io_method=sync,worker", ("pg.io_method", ["sync", "worker"])),
    ],
)
def test_set_option_parses(text, expected):
    assert parse_set_option(text) == expected


@pytest.mark.parametrize("text, fragment", [("multiblock_read", "expected KNOB=V1"), ("=1,2", "knob name is empty"), ("a=", "no values")])
def test_set_option_errors(text, fragment):
    with pytest.raises(SpecError, match=fragment):
        parse_set_option(text)


def test_overrides_check_repeats():
    with pytest.raises(SpecError, match="--repeats 0: must be at least 1"):
        Overrides(repeats=0).check()


@pytest.mark.parametrize(
    "line, field, fragment",
    [
        ('search = "binary"', "measure.search", "'grid' or 'refine'"),
        ("target_ci = 1.5", "measure.target_ci", "less than 1"),
        ("practical = -0.1", "measure.practical", "greater than or equal to 0"),
        ("max_repeats = 0", "measure.max_repeats", "greater than or equal to 1"),
        ('goal = "best"', "measure.goal", "'max' or 'min'"),
    ],
)
def test_measure_fields_name_the_field_and_what_is_accepted(tmp_path, line, field, fragment):
    msg = error_of(tmp_path, f"[measure]\n{line}\n")
    assert field in msg and fragment in msg


def test_engine_option_names_the_engines():
    with pytest.raises(SpecError, match=r"^--engine oracle: unknown engine; accepted: .*postgres"):
        load_spec(resolve("mbrc"), {"engine.kind": "oracle"})


VARIANT_WITH_ANOTHER_WORKLOAD = """
name = "x"
[workload]
kind = "row_insert"
rows = 1000
flush = true
[knobs]
"workload.index" = [false, true]
[quick]
"workload.rows" = 10
"dataset.rows" = 7
[variants.null]
workload = { kind = "null", noise = 0.5 }
knobs = { "null.level" = [1, 2] }
[variants.null.quick]
"workload.sleep_s" = 0.1
"""


def test_a_variant_naming_another_workload_brings_its_own_options(tmp_path):
    spec, _ = load_spec(write(tmp_path, VARIANT_WITH_ANOTHER_WORKLOAD), {"engine.kind": "null", "quick": True})
    assert spec.workload.kind == "null"
    assert spec.workload.options() == {"noise": 0.5, "sleep_s": 0.1}  # row_insert's rows and flush left behind
    assert spec.dataset.rows == 7  # [quick]'s other fields still apply
    base, _ = load_spec(write(tmp_path, VARIANT_WITH_ANOTHER_WORKLOAD), {"quick": True})
    assert base.workload.kind == "row_insert" and base.workload.options() == {"rows": 10, "flush": True}
