"""A newcomer's plausible mistakes outside (and inside) the experiment file: each gets
one clear line on stderr and exit 2 before anything runs, never a traceback, and
nothing is silently ignored. Issue 30's first half; the fuzz test at the end drives
every command with hostile paths, environments, encodings and option values."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from blocklab.cli import main
from blocklab.errors import nearest

NULL_EXPERIMENT = """
name = "newcomer"
[engine]
kind = "null"
[workload]
kind = "null"
[knobs]
"null.level" = [1, 2]
[measure]
cache = "warm"
"""


def invoke(args: list[str], env: dict[str, str] | None = None):
    return CliRunner().invoke(main, args, env=env)


def one_error_line(result, *needles: str) -> str:
    """The command failed with exit 2 and one 'error:' message on stderr naming every needle."""
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert isinstance(result.exception, SystemExit), result.exception
    assert result.stdout == "", f"error text on stdout: {result.stdout!r}"
    text = result.stderr
    assert text.startswith("error: ") and text.count("error:") == 1, text
    for needle in needles:
        assert needle in text, (needle, text)
    return text


@pytest.fixture
def null_file(tmp_path: Path) -> Path:
    path = tmp_path / "null.toml"
    path.write_text(NULL_EXPERIMENT)
    return path


# ------------------------------------------------------------- tracebacks before
def test_a_misspelled_metric_is_refused_with_the_nearest_and_the_accepted(tmp_path):
    path = tmp_path / "typo.toml"
    path.write_text(NULL_EXPERIMENT + 'metric = "scor"\n')
    one_error_line(invoke(["plan", str(path)]), "measure.metric: 'scor' is not a figure of workload 'null'", "did you mean score?",
                   "accepted: score")


def test_doctor_with_a_dsn_for_an_engine_that_takes_none_is_one_line():
    one_error_line(invoke(["doctor", "--engine", "sqlite", "--dsn", "x"]), "engine sqlite takes no --dsn")


@pytest.mark.parametrize("command", ["plan", "run"])
def test_a_directory_given_as_the_experiment_is_one_line(command, tmp_path):
    one_error_line(invoke([command, str(tmp_path)]), f"{tmp_path}: is a directory; give an experiment file")


def test_an_experiment_file_that_is_not_utf8_names_the_line_and_the_byte(tmp_path):
    path = tmp_path / "latin1.toml"
    path.write_bytes('name = "x"\n# café au lait\n'.encode("latin-1"))
    one_error_line(invoke(["plan", str(path)]), "latin1.toml: line 2: byte 0xe9 is not UTF-8", "save it as UTF-8")


@pytest.mark.parametrize("command", [["plan", "mbrc"], ["run", "mbrc", "--quick"], ["doctor"]])
@pytest.mark.parametrize("where", ["/proc/nope", "file"])
def test_blocklab_cache_that_cannot_be_a_directory_is_one_line(command, where, tmp_path):
    if where == "file":
        where = str(tmp_path / "a-file")
        Path(where).write_text("not a directory")
    result = invoke(command, env={"BLOCKLAB_CACHE": where, "BLOCKLAB_RESULTS": str(tmp_path / "results")})
    one_error_line(result, f"BLOCKLAB_CACHE={where}: ")
    assert not (tmp_path / "results").exists()  # nothing ran


# ------------------------------------------------------------- errors on stdout
def test_export_errors_reach_the_terminal_not_the_redirected_file(tmp_path):
    out = tmp_path / "o.csv"
    with out.open("w") as stdout:
        proc = subprocess.run([sys.executable, "-m", "blocklab.cli", "export", str(tmp_path)], stdout=stdout,
                              stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert proc.returncode == 2
    assert out.read_text() == ""
    assert proc.stderr.startswith("error: RUN_DIR") and "not a blocklab results directory" in proc.stderr


def test_sysstats_with_a_malformed_dsn_is_bad_input():
    one_error_line(invoke(["sysstats", "--dsn", "garbage"]), "--dsn: not a PostgreSQL connection string", "host=HOST dbname=DB")


def test_restore_of_a_run_that_owes_nothing_is_success(tmp_path):
    (tmp_path / "plan.json").write_text("{}")
    result = invoke(["restore", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "nothing to restore" in result.stdout


def test_parquet_without_pyarrow_names_the_optional_extra(tmp_path, monkeypatch):
    from blocklab.report.data import RunData
    from blocklab.report.parquet_export import ExportUnavailable, export_parquet

    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow now raises ImportError
    with pytest.raises(ExportUnavailable, match=r"optional pyarrow package.*pip install 'blocklab\[parquet\]'"):
        export_parquet(RunData.__new__(RunData))


# ------------------------------------------------------- silently ignored before
def test_the_same_knob_set_twice_is_refused_not_half_dropped(null_file):
    one_error_line(invoke(["plan", str(null_file), "--set", "null.level=1", "--set", "null.level=2"]),
                   "--set null.level is given twice", "--set null.level=V1,V2,V3")


def test_rows_reaches_a_workload_that_builds_no_data_set(tmp_path):
    from blocklab.lab import Overrides, load_experiment

    exp = load_experiment("checksum", Overrides(rows=7, engine="sqlite", quick=True), cache_dir=tmp_path)
    try:
        assert exp.workload.options.rows == 7  # row_insert's own rows: the INSERTs per cell
    finally:
        exp.engine.stop()


def test_a_misspelled_variant_is_refused_with_the_nearest_engine(tmp_path):
    path = tmp_path / "v.toml"
    path.write_text(NULL_EXPERIMENT + "[variants.mariadbx]\n[variants.mariadbx.engine]\nkind = 'mariadb'\n")
    one_error_line(invoke(["plan", str(path)]), "[variants.mariadbx]: no engine is called 'mariadbx' (did you mean mariadb?)")


def test_an_empty_experiment_file_is_refused(tmp_path):
    path = tmp_path / "empty.toml"
    path.write_text("# nothing yet\n")
    one_error_line(invoke(["plan", str(path)]), "empty.toml: the experiment file is empty", "blocklab recipes --show mbrc")


@pytest.mark.parametrize("name", ["../escaped", "a/b", "/etc/x", ".hidden", ""])
def test_a_name_is_a_label_never_a_path(null_file, name, tmp_path):
    path = tmp_path / "named.toml"
    path.write_text(NULL_EXPERIMENT.replace('name = "newcomer"', f"name = {json.dumps(name)}"))
    result = invoke(["run", str(path)], env={"BLOCKLAB_RESULTS": str(tmp_path / "results")})
    one_error_line(result, "name: ", "not a path")
    assert not (tmp_path / "escaped").exists() and not (tmp_path / "results").exists()


def test_a_recipe_without_a_variant_for_the_engine_says_where_it_runs():
    one_error_line(invoke(["plan", "mbrc", "--engine", "sqlite"]), "mbrc has no sqlite variant; it runs on: postgres, mariadb, rocksdb")


@pytest.mark.parametrize(("option", "value", "said"), [("--seed", "-1", "--seed -1: must be at least 0"),
                                                        ("--repeats", "100000", "--repeats 100000: must be at most 1000")])
def test_errors_about_an_option_name_the_option_not_the_recipe_file(option, value, said):
    text = one_error_line(invoke(["plan", "mbrc", option, value]), said)
    assert "recipes/mbrc.toml" not in text and "Input should be" not in text
    assert text.count("\n") == 1  # one line, though --repeats sets two fields


def test_a_run_option_out_of_range_names_the_option(tmp_path):
    result = invoke(["run", "mbrc", "--cpu-profile-hz", "0"], env={"BLOCKLAB_RESULTS": str(tmp_path / "results")})
    text = one_error_line(result, "--cpu-profile-hz 0: must be at least 1")
    assert "recipes/mbrc.toml" not in text and not (tmp_path / "results").exists()


def test_a_misspelled_generic_knob_gets_the_nearest_name_and_blames_the_option():
    text = one_error_line(invoke(["plan", "mbrc", "--set", "multiblok_read=8"]),
                          "--set multiblok_read: unknown knob (did you mean multiblock_read?)")
    assert "mbrc.toml" not in text


def test_nearest_is_by_similarity_not_by_alphabet():
    variables = ["ignore_builtin_innodb", "innodb_adaptive_flushing", "innodb_read_ahead_threshold", "innodb_read_io_threads"]
    assert nearest("innodb_read_ahead_treshold", variables).startswith(" (did you mean innodb_read_ahead_threshold")
    assert nearest("zzz", variables) == ""


# ------------------------------------------------------------------- the fuzz
def _hostile_paths(root: Path) -> list[str]:
    """Paths a newcomer gives by mistake: directories, missing files, binary and
    non-UTF-8 files, empty and malformed TOML, unreadable places, odd names."""
    (root / "dir").mkdir(exist_ok=True)
    (root / "binary.toml").write_bytes(bytes(range(256)))
    (root / "latin1.toml").write_bytes("name = 'caf\xe9'".encode("latin-1"))
    (root / "empty.toml").write_text("")
    (root / "bad.toml").write_text("[knobs\nx = ")
    (root / "notes.txt").write_text("hello\r\n")
    (root / "utf16.toml").write_text('name = "x"', encoding="utf-16")
    fake_run = root / "fakerun"
    fake_run.mkdir(exist_ok=True)
    (fake_run / "plan.json").write_text("{not json")
    (fake_run / "results.jsonl").write_text('{"v": 999}\n\x00\n')
    loop = root / "loop"
    if not loop.is_symlink():
        loop.symlink_to(loop)
    return [str(root / n) for n in ("dir", "binary.toml", "latin1.toml", "empty.toml", "bad.toml", "notes.txt", "utf16.toml",
                                    "fakerun", "loop", "missing.toml", "missing")] + [
        "/proc/nope/x.toml", "/dev/null", "/", "", " ", "-", "x" * 300, "a\nb.toml", "../../../etc/passwd", "nosuchrecipe"]


MALFORMED_DSNS = ["garbage", "host=/nonexistent-socket-dir", "=x", "mysql://", "postgresql://[::1", "host=127.0.0.1 port=notaport", "'", "\x00"]
OPTION_VALUES = ["-1", "0", "1e9", "abc", "", "8k", "\xe9", "=", ",,,", "x=1,,", "null.level=1", "null.level=a", "1" * 40]
ENVS = st.fixed_dictionaries({}, optional={
    "BLOCKLAB_CACHE": st.sampled_from(["/proc/nope", "/dev/null", "", "relative-cache"]),
    "BLOCKLAB_RESULTS": st.sampled_from(["/proc/nope", "/dev/null", "", "relative-results"]),
    "BLOCKLAB_DEVICE_TWIN": st.sampled_from(["off", "on", "bogus", ""]),
    "BLOCKLAB_BUDGET": st.sampled_from(["off", "90s", "3cells", "bogus", "", "-1"]),
})


@functools.lru_cache(maxsize=1)
def _commands(paths: tuple[str, ...]) -> st.SearchStrategy[list[str]]:
    """Every command's shapes over these paths (built once: building it costs more than a draw)."""
    path = st.sampled_from(paths)
    value = st.sampled_from(OPTION_VALUES) | st.text(max_size=8)
    dsn = st.sampled_from(MALFORMED_DSNS)
    engine = st.sampled_from(["postgres", "sqlite", "mariadb", "rocksdb", "null", "oracle", ""])
    experiment_option = st.tuples(st.sampled_from(["--set", "--repeats", "--rows", "--seed", "--engine"]), value).map(list)
    # never a valid experiment with a valid engine: nothing may start a real run here
    planned = st.tuples(st.sampled_from(["plan", "run"]), path, st.lists(experiment_option, max_size=3)).map(
        lambda t: [t[0], t[1], *[x for pair in t[2] for x in pair]])
    on_runs = st.one_of(
        st.tuples(st.sampled_from(["report", "analyse", "restore"]), path).map(list),
        st.tuples(st.just("export"), path, st.sampled_from(["csv", "json", "parquet", "xml", ""])).map(lambda t: [t[0], t[1], "--format", t[2]]),
        st.tuples(st.just("compare"), path, path, value).map(lambda t: [t[0], t[1], t[2], "--metric", t[3]]),
        st.tuples(st.just("run"), st.just("--resume"), path).map(list),
    )
    servers = st.one_of(
        st.tuples(st.sampled_from(["doctor", "clean", "sysstats"]), dsn).map(lambda t: [t[0], "--dsn", t[1]]),
        st.tuples(st.sampled_from(["doctor", "clean"]), engine, dsn).map(lambda t: [t[0], "--engine", t[1], "--dsn", t[2]]),
        st.tuples(st.just("recipes"), st.sampled_from(["--show", "--bogus"]), value).map(list),
    )
    imports = st.tuples(st.sampled_from(["awr", "slob", "orion", "calibrate-io", "aux-stats"]), path).map(
        lambda t: ["import", t[0], t[1]])
    return st.one_of(planned, on_runs, servers, imports)


@pytest.fixture(scope="module")
def hostile_paths(tmp_path_factory) -> tuple[str, ...]:
    return tuple(_hostile_paths(tmp_path_factory.mktemp("hostile")))


def _no_traceback(args: list[str], env: dict[str, str], cwd: Path) -> None:
    old = Path.cwd()
    os.chdir(cwd)  # relative paths in the environment land in the test's own directory
    try:
        result = CliRunner().invoke(main, args, env=env)
    finally:
        os.chdir(old)
    assert result.exception is None or isinstance(result.exception, SystemExit), (args, env, result.output, result.exception)
    assert result.exit_code in (0, 1, 2), (args, env, result.exit_code, result.output)
    if result.exit_code == 2:
        assert "error:" in result.stderr.lower() or "usage:" in result.stderr.lower(), (args, env, result.output)
        assert "Traceback" not in result.output


# 10,000 generated invocations in all (two halves: hypothesis shrinks each on its own)
@settings(max_examples=int(os.environ.get("BLOCKLAB_FUZZ_EXAMPLES", 5000)), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_fuzz_commands_with_hostile_paths_and_options_never_trace_back(hostile_paths, data, tmp_path_factory):
    args = data.draw(_commands(hostile_paths))
    _no_traceback(args, {}, Path(hostile_paths[0]).parent)


@settings(max_examples=int(os.environ.get("BLOCKLAB_FUZZ_EXAMPLES", 5000)), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_fuzz_commands_in_hostile_environments_never_trace_back(hostile_paths, data):
    args = data.draw(_commands(hostile_paths))
    env = data.draw(ENVS)
    _no_traceback(args, env, Path(hostile_paths[0]).parent)
