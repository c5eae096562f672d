"""--cpu-profile is refused before anything runs where perf is missing or not
allowed (issue 28): exit 2, the reason naming the setting and the fix."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import blocklab_bin

from blocklab.probes import cpu_profile


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([blocklab_bin(), *args], env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.empty_cache
def test_run_without_perf_exits_2_naming_the_package_and_starts_nothing(cli_env, tmp_path):
    out = tmp_path / "run"
    env = {**cli_env, "BLOCKLAB_PERF": str(tmp_path / "no-such-perf")}
    done = _run(["run", "checksum", "--engine", "sqlite", "--quick", "--cpu-profile", "--out", str(out)], env)
    assert done.returncode == 2, done.stderr + done.stdout
    text = done.stdout + done.stderr
    assert "CPU profiles need perf" in text and "linux-perf" in text and "BLOCKLAB_PERF=" in text
    assert not out.exists()  # no run directory: nothing was started
    assert not Path(env["BLOCKLAB_CACHE"]).exists()  # nor any engine's data


def test_run_with_no_perf_on_path_exits_2(cli_env, tmp_path):
    bare = tmp_path / "bin"  # a PATH holding no perf
    bare.mkdir()
    env = {k: v for k, v in cli_env.items() if k != "BLOCKLAB_PERF"}
    env["PATH"] = str(bare)
    done = _run(["run", "checksum", "--engine", "sqlite", "--quick", "--cpu-profile"], env)
    assert done.returncode == 2
    assert done.stdout == "" and "no perf on PATH" in done.stderr


def test_paranoid_above_2_refuses_a_non_root_user_naming_the_file_its_value_and_the_fix(tmp_path):
    fake = tmp_path / "perf_event_paranoid"
    fake.write_text("3\n")
    problem = cpu_profile.perf_problem(perf=shutil.which("perf") or "/usr/bin/perf", paranoid_file=fake,
                                       is_privileged=False, trial=False)
    assert problem is not None
    assert f"{fake} (kernel.perf_event_paranoid) is 3" in problem
    assert "sysctl kernel.perf_event_paranoid=2" in problem


def test_paranoid_2_lets_a_non_root_user_sample_user_space_only(tmp_path):
    fake = tmp_path / "perf_event_paranoid"
    fake.write_text("2\n")
    assert cpu_profile.perf_problem(perf="/usr/bin/perf", paranoid_file=fake, is_privileged=False, trial=False) is None
    assert cpu_profile.event(root=False, paranoid=2) == "cpu-clock:u"
    assert cpu_profile.event(root=True, paranoid=3) == "cpu-clock"


def test_no_paranoid_file_means_no_perf_events(tmp_path):
    problem = cpu_profile.perf_problem(perf="/usr/bin/perf", paranoid_file=tmp_path / "missing", trial=False)
    assert problem is not None and "cannot be read" in problem and "--cap-add PERFMON" in problem


def test_a_perf_that_cannot_open_the_event_is_refused_as_a_container_would_be(tmp_path):
    """What perf says in a container without CAP_PERFMON, from a perf that says just that."""
    fake_perf = tmp_path / "perf"
    fake_perf.write_text("#!/bin/sh\necho 'Error: perf_event_open(...) failed: Operation not permitted (No permission)' >&2\nexit 255\n")
    fake_perf.chmod(0o755)
    paranoid = tmp_path / "paranoid"
    paranoid.write_text("1\n")
    problem = cpu_profile.perf_problem(perf=str(fake_perf), paranoid_file=paranoid)
    assert problem is not None
    assert "Operation not permitted" in problem and f"{paranoid} is 1" in problem and "--cap-add PERFMON" in problem


def test_the_real_perf_here_is_allowed():
    """This machine (tests run as root, linux-perf installed): the check passes for real."""
    assert shutil.which("perf"), "perf is missing: sudo apt-get install linux-perf (scripts/install-system-packages.sh)"
    assert cpu_profile.perf_problem() is None, os.getuid()
