"""This checkout's figures against an older commit's: the same recipe run by
both, in turn, on the same machine and disk, and the medians per setting
compared (issue 13: "unchanged within noise" after the engines became
plug-ins).

The older commit is checked out into a temporary git worktree and run with its
own source on PYTHONPATH and its own BLOCKLAB_CACHE (its data directories need
not match this checkout's); both use this virtualenv's packages. Rounds
alternate the order (old/new, new/old, ...) so that drift hits both alike.
Every run's results.jsonl is read back: the `ok` cells' metric per setting,
pooled over the rounds, gives one median per setting and version, and the
ratio new / old with a 95% bootstrap interval. A ratio whose interval holds
1.0 is "unchanged within noise". The wall time of each run is printed too.

    python benchmarks/against_commit.py 893ca9e mbrc --rounds 3 --new-args="--device-twin off"
    python benchmarks/against_commit.py 893ca9e slob --rounds 3 --args="--engine mariadb --quick" --metric read_iops
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent


def _run(label: str, src: Path, recipe: str, args: list[str], cache: Path, out: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(src), "BLOCKLAB_CACHE": str(cache)}
    command = [sys.executable, "-m", "blocklab.cli", "run", recipe, *args, "--out", str(out)]
    t0 = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"{label}: {shlex.join(command)} exited {done.returncode}:\n{done.stderr[-2000:]}")
    return seconds


def _metric_by_setting(run_dir: Path, metric: str) -> dict[str, list[float]]:
    out: dict[str, list[float]] = defaultdict(list)
    for line in (run_dir / "results.jsonl").read_text().splitlines():
        row = json.loads(line)
        if row.get("status") == "ok" and metric in row.get("metrics", {}):
            key = ",".join(f"{k}={v}" for k, v in sorted(row["settings"].items()))
            out[key].append(float(row["metrics"][metric]))
    return out


def _ratio_ci(new: list[float], old: list[float], seed: int = 1) -> tuple[float, float, float]:
    rng = random.Random(seed)
    boots = []
    for _ in range(2000):
        a = statistics.median(rng.choices(new, k=len(new)))
        b = statistics.median(rng.choices(old, k=len(old)))
        boots.append(a / b)
    boots.sort()
    return statistics.median(new) / statistics.median(old), boots[49], boots[1949]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("commit", help="the older commit (any git revision)")
    parser.add_argument("recipe", help="the recipe both run, e.g. mbrc")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--args", default="", help="arguments of `blocklab run` for both, e.g. \"--engine mariadb --quick\"")
    parser.add_argument("--new-args", default="", help="arguments for this checkout only, e.g. \"--device-twin off\"")
    parser.add_argument("--metric", default="rows_per_s", help="the metric compared (a key of a row's metrics)")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="blocklab-against-", dir="/var/tmp"))
    work.chmod(0o755)  # as root the servers run as the `blocklab` user, who must reach the caches inside
    old_tree = work / "old"
    subprocess.run(["git", "-C", str(HERE), "worktree", "add", "--detach", str(old_tree), args.commit], check=True, capture_output=True)
    versions = {"old": old_tree / "src", "new": HERE / "src"}
    extra = {"old": shlex.split(args.args), "new": shlex.split(args.args) + shlex.split(args.new_args)}
    pooled: dict[str, dict[str, list[float]]] = {"old": defaultdict(list), "new": defaultdict(list)}
    walls: dict[str, list[float]] = {"old": [], "new": []}
    try:
        for rnd in range(args.rounds):
            for version in (("old", "new") if rnd % 2 == 0 else ("new", "old")):
                out = work / f"{version}-{rnd}"
                seconds = _run(version, versions[version], args.recipe, extra[version], work / f"cache-{version}", out)
                walls[version].append(seconds)
                for key, values in _metric_by_setting(out, args.metric).items():
                    pooled[version][key].extend(values)
                print(f"round {rnd + 1} {version}: {seconds:.0f} s", flush=True)
    finally:
        subprocess.run(["git", "-C", str(HERE), "worktree", "remove", "--force", str(old_tree)], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)

    print(f"\n{args.metric}, medians over {args.rounds} runs each (new = this checkout, old = {args.commit}):")
    held = 0
    keys = sorted(set(pooled["old"]) & set(pooled["new"]))
    for key in keys:
        new, old = pooled["new"][key], pooled["old"][key]
        ratio, lo, hi = _ratio_ci(new, old)
        held += lo <= 1.0 <= hi
        print(f"  {key:40s} old {statistics.median(old):14,.1f} (n={len(old)})  new {statistics.median(new):14,.1f} (n={len(new)})  "
              f"new/old {ratio:.3f} [{lo:.3f}, {hi:.3f}]")
    if missing := sorted(set(pooled["old"]) ^ set(pooled["new"])):
        print(f"  settings measured by only one version: {', '.join(missing)}")
    print(f"{held} of {len(keys)} settings unchanged within noise (1.0 inside the interval)")
    print(f"wall time per run: old {statistics.median(walls['old']):.0f} s, new {statistics.median(walls['new']):.0f} s (medians)")


if __name__ == "__main__":
    main()
