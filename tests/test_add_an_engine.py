"""Adding an engine (CONTRIBUTING.md): a toy engine package written outside
src/ (tests/toy_engine/toy_blocklab), installed the way a third party's would
be, through the entry point group `blocklab.engines`, runs the built-in mbrc
recipe with a `[variants.toy]` of its own, end to end on the real disk, in a
`blocklab` subprocess; nothing in src/ knows the toy."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

from conftest import blocklab_bin

from blocklab import recipes
from blocklab.engines import ENTRY_POINT_GROUP
from blocklab.results import RunDir

ROOT = Path(__file__).resolve().parents[1]
TOY = Path(__file__).resolve().parent / "toy_engine" / "toy_blocklab"

# what the engine's author adds to the recipe (CONTRIBUTING.md): its engine, and sizes for it
TOY_VARIANT = """
[variants.toy]
engine = { kind = "toy", settings = { direct_io = true } }
"dataset.rows" = 200_000
knobs = { multiblock_read = [1, 4, 16, 64] }

[variants.toy.quick]
"dataset.rows" = 100_000          # 788 pages of 8 kB: 6 MB
knobs = { multiblock_read = [1, 16] }
"""


def install_toy(site: Path) -> None:
    """The toy as pip would leave it: the package, and a dist-info naming its entry point."""
    shutil.copytree(TOY, site / "toy_blocklab", ignore=shutil.ignore_patterns("__pycache__"))
    dist = site / "toy_blocklab-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-blocklab\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\ntoy = toy_blocklab:ToyEngine\n")


def test_a_toy_engine_outside_src_runs_mbrc_quick_through_the_entry_point(cli_env, tmp_path):
    site = tmp_path / "site"
    install_toy(site)
    env = {**cli_env, "PYTHONPATH": str(site)}
    experiment = tmp_path / "mbrc.toml"
    experiment.write_text(recipes.path_of("mbrc").read_text() + TOY_VARIANT)
    out = tmp_path / "run"
    result = subprocess.run([blocklab_bin(), "run", str(experiment), "--quick", "--engine", "toy", "--out", str(out)],
                            env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    rows = RunDir(out).rows()
    assert len(rows) == 4 and all(r.ok for r in rows), [(r.settings, r.status) for r in rows]  # every claim held
    by_setting = {r.settings["multiblock_read"]: r for r in rows}
    assert set(by_setting) == {1, 16}
    for r in rows:
        assert r.metrics["rows"] == 100_000  # the toy counted every row of its file
        assert r.metrics["cold_proven"] == 1.0 and r.metrics["direct_io"] == 1.0
        assert r.notes["checks"]["cold_os_resident_bytes"] == 0  # evicted, and proven by mincore
    # the knob took: the toy's own read sizes are the multiblock read asked (789 blocks, the header included)
    assert by_setting[1].metrics["avg_read_kb"] == 8.0
    assert 120 <= by_setting[16].metrics["avg_read_kb"] <= 128
    assert json.loads((out / "environment.json").read_text())["engine"] == "toy"
    assert re.search(r"best\b", result.stdout, re.IGNORECASE), result.stdout

    # and blocklab itself was not told: no file of src/ names the toy
    named = subprocess.run(["grep", "-rliE", r"\btoy\b|toy_blocklab", "src/blocklab"], cwd=ROOT, capture_output=True, text=True)
    assert named.stdout == "", named.stdout


def test_the_toy_is_refused_where_it_says_it_cannot_go(cli_env, tmp_path):
    """A workload the toy has no dialect for is refused before anything runs, with the toy's own reason."""
    site = tmp_path / "site"
    install_toy(site)
    env = {**cli_env, "PYTHONPATH": str(site)}
    experiment = tmp_path / "toy-slob.toml"
    experiment.write_text('name = "toy-slob"\n[engine]\nkind = "toy"\n[workload]\nkind = "slob"\n'
                          '[knobs]\nmultiblock_read = [1, 16]\n')
    result = subprocess.run([blocklab_bin(), "plan", str(experiment)], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "the toy has no sessions of its own to update rows in" in " ".join((result.stdout + result.stderr).split())
