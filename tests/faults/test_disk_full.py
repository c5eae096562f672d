"""A full disk, on small file systems made for the test (tmpfs in a mount
namespace of its own, never the real disk): the data set that cannot fit is
refused before anything runs, a results directory that fills up mid-run stops
the run with the path and the space, no row is torn, and --resume finishes the
plan once space is freed."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

from conftest import blocklab_bin

from blocklab.results import RunDir

EXPERIMENT = """
name = "fill"
[engine]
kind = "null"
[workload]
kind = "null"
[knobs]
"null.level" = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
[measure]
repeats = 20
cache = "warm"
seed = 3
"""


def in_small_filesystem(mount: Path, size: str, script: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """Run `script` (sh) with a tmpfs of `size` mounted at `mount`, in a mount namespace
    of its own (as root; a normal user gets one with --map-root-user): the tmpfs is
    gone when the script ends, and nothing else on the machine sees it."""
    mount.mkdir(parents=True, exist_ok=True)
    unshare = ["unshare", "--mount"] + ([] if os.geteuid() == 0 else ["--map-root-user"])
    body = f"mount -t tmpfs -o size={size} tmpfs {shlex.quote(str(mount))} && {script}"
    return subprocess.run([*unshare, "sh", "-c", body], env=env, capture_output=True, text=True, timeout=600)


def test_results_directory_fills_up_mid_run_then_resume_finishes(tmp_path, cli_env):
    exp = tmp_path / "fill.toml"
    exp.write_text(EXPERIMENT)
    mount, keep = tmp_path / "small", tmp_path / "kept"
    bl = blocklab_bin()
    script = " && ".join([
        # leave ~120 kB: the plan (~30 kB) and a few cells' rows and summaries, not 200 cells
        f"head -c $(( $(stat -f -c '%a*%S' {mount}) - 122880 )) /dev/zero > {mount}/filler",
        f"( {bl} run {exp} --out {mount}/run > {tmp_path}/first.txt 2>&1; echo $? > {tmp_path}/first.rc )",
        f"cp -r {mount}/run {tmp_path}/after-full",
        f"rm {mount}/filler",
        f"( {bl} run --resume {mount}/run > {tmp_path}/second.txt 2>&1; echo $? > {tmp_path}/second.rc )",
        f"cp -r {mount}/run {keep}",
    ])
    done = in_small_filesystem(mount, "4m", script, cli_env)
    assert done.returncode == 0, done.stdout + done.stderr
    first = (tmp_path / "first.txt").read_text()
    assert (tmp_path / "first.rc").read_text().strip() == "1", first
    assert "No space left on device" in first and f"{mount}/run/" in first and "MB free there" in first
    assert "continue with blocklab run --resume" in first and "Traceback" not in first
    half = RunDir(tmp_path / "after-full")
    for line in (half.path / "results.jsonl").read_text().splitlines():
        json.loads(line)  # no torn row: every line whole
    assert 0 < len(half.rows()) < 200
    second = (tmp_path / "second.txt").read_text()
    assert (tmp_path / "second.rc").read_text().strip() == "0", second
    final = RunDir(keep)
    plan = [c["cell_id"] for c in final.read_json("plan.json")["cells"]]
    assert sorted(r.cell_id for r in final.rows() if r.ok) == sorted(plan)  # every cell ok exactly once


def test_a_data_set_that_cannot_fit_is_refused_before_anything_runs(tmp_path, cli_env):
    mount = tmp_path / "cache"
    env = {**cli_env, "BLOCKLAB_CACHE": str(mount)}
    script = (f"{blocklab_bin()} plan reload --engine sqlite --rows 2000000 > {tmp_path}/out.txt 2>&1; echo $? > {tmp_path}/rc; "
              f"ls -A {mount}/sqlite > {tmp_path}/ls.txt 2>&1 || true")
    done = in_small_filesystem(mount, "64m", script, env)
    assert done.returncode == 0, done.stdout + done.stderr
    out = (tmp_path / "out.txt").read_text()
    assert (tmp_path / "rc").read_text().strip() == "2", out
    assert f"not enough disk space in {mount}/sqlite: the data set needs about" in out
    assert "MB are free; make dataset.rows smaller" in out and "Traceback" not in out
    assert "blocklab.db" not in (tmp_path / "ls.txt").read_text()  # nothing was built
