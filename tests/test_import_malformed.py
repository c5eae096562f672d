"""Every importer refuses input it cannot read with exit 2 and a message naming
the file, the line and the field; and the fixtures on disk are the ones
make_fixtures.py writes (a hand edit would make the tests test something else)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from blocklab.cli import main

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "oracle"
sys.path.insert(0, str(FIXTURES))

import make_fixtures  # noqa: E402 (the fixtures' own script, found through the path above)


def test_fixtures_on_disk_are_what_the_generator_writes():
    expected = make_fixtures.files()
    on_disk = {
        str(p.relative_to(FIXTURES)): p.read_text()
        for p in FIXTURES.rglob("*")
        if p.is_file() and p.suffix != ".py" and "__pycache__" not in p.parts
    }
    assert sorted(on_disk) == sorted(expected), "run python tests/fixtures/oracle/make_fixtures.py"
    changed = [name for name in expected if on_disk[name] != expected[name]]
    assert changed == [], "run python tests/fixtures/oracle/make_fixtures.py"


def _broken_line(path: Path, token: str) -> tuple[int, bool]:
    """(the line the token is on, False), or (the last line, True) for a file cut short (token '')."""
    text = path.read_text()
    if not token:
        return text.count("\n") if text.endswith("\n") else text.count("\n") + 1, True
    for number, line in enumerate(text.split("\n"), 1):
        if token in line:
            return number, False
    raise AssertionError(f"{token!r} is not in {path}")


@pytest.mark.parametrize("case", make_fixtures.MALFORMED, ids=[c[0] for c in make_fixtures.MALFORMED])
def test_malformed_input_names_file_line_and_field(case, tmp_path):
    rel, args, token, field = case
    args = [str(FIXTURES / a) if a.startswith("malformed/") else a for a in args]
    if not any(a.startswith(str(FIXTURES)) for a in args):
        args.append(str(FIXTURES / rel))
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["import", *args, "--out", str(out)])
    assert result.exit_code == 2, result.output
    message = result.output
    assert message.startswith("error: "), message
    line, at_end = _broken_line(FIXTURES / rel, token)
    assert f"{FIXTURES / rel}: line {line}" in message, message
    if at_end:
        assert "(end of file)" in message
    assert field in message.split(f"line {line}", 1)[1], message
    assert not out.exists(), "nothing is written for input that cannot be read"
    assert "Traceback" not in message


def test_a_good_fixture_passes_where_its_broken_copy_fails(tmp_path):
    """The malformed cases fail because of their edit: the file they were made from imports."""
    result = CliRunner().invoke(main, ["import", "awr", str(FIXTURES / "awr/11g/before.txt"), "--out", str(tmp_path / "a")])
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(main, ["import", "slob", str(FIXTURES / "slob-harness/bs4k-upd0"), "--out", str(tmp_path / "b")])
    assert result.exit_code == 0, result.output


def test_missing_inputs_and_bad_options_exit_2(tmp_path):
    runner = CliRunner()
    cases = [
        (["slob", str(tmp_path / "nowhere")], "no such file or directory"),
        (["slob", str(FIXTURES / "slob-harness/bs4k-upd0"), "--block-size", "12k"], "Oracle block sizes are 2k, 4k, 8k, 16k and 32k"),
        (["slob", str(FIXTURES / "slob-harness/bs4k-upd0"), "--update-pct", "120"], "--update-pct 120"),
        (["slob", str(FIXTURES / "calibrate_io")], "no AWR report (text or HTML) and no awr_info.sh output"),
        (["awr", str(FIXTURES / "awr/11g/before.txt"), "--label", "a", "--label", "b"], "--label given 2 times for 1 reports"),
        (["orion", str(tmp_path / "nothing")], "no ORION output"),
        (["slob", str(FIXTURES / "slob-harness/bs4k-upd0"), "--calibration", str(tmp_path)], "not a calibration directory"),
    ]
    for args, text in cases:
        result = runner.invoke(main, ["import", *args, "--out", str(tmp_path / "out")])
        assert result.exit_code == 2, (args, result.output)
        assert text in result.output, (args, result.output)
    taken = tmp_path / "taken"
    assert runner.invoke(main, ["import", "awr", str(FIXTURES / "awr/11g/after.txt"), "--out", str(taken)]).exit_code == 0
    again = runner.invoke(main, ["import", "awr", str(FIXTURES / "awr/11g/after.txt"), "--out", str(taken)])
    assert again.exit_code == 2 and "already holds a run" in again.output


def test_a_report_that_is_not_awr_is_named(tmp_path):
    other = tmp_path / "awr.008.txt"
    other.write_text("Statspack report\nnothing here\n")
    result = CliRunner().invoke(main, ["import", "awr", str(other), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert f"{other}: line 2 (end of file): Load Profile / Top events: neither a Load Profile section" in result.output
    assert "awrrpt.sql" in result.output
