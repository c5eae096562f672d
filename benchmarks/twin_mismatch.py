"""The device twin beside the cells (issue 26): across fresh `blocklab run RECIPE`
runs with the twin on, how many settings' efficiency intervals lie wholly above
100% without being flagged as a mismatch (the target: none), how many were
flagged (with their reasons), and how many are figures.

    python benchmarks/twin_mismatch.py mbrc --runs 10 --out /var/tmp/twin-check
    python benchmarks/twin_mismatch.py --report /var/tmp/twin-check

Each run is a new results directory (the data set is built once, in the
output directory's own BLOCKLAB_CACHE, and reused). summary.json's
"efficiency" is read back: a setting's efficiency and interval, or its
mismatch and reason.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent


def run_many(recipe: str, runs: int, out: Path, args: list[str], src: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    out.chmod(0o755)  # as root the servers run as the `blocklab` user, who must reach the cache inside
    env = {**os.environ, "PYTHONPATH": str(src), "BLOCKLAB_CACHE": str(out / "cache"), "BLOCKLAB_DEVICE_TWIN": "on"}
    for i in range(runs):
        run_dir = out / f"run-{i + 1}"
        if run_dir.exists():
            continue
        command = [sys.executable, "-m", "blocklab.cli", "run", recipe, *args, "--out", str(run_dir)]
        load = Path("/proc/loadavg").read_text().split()[0]
        t0 = time.perf_counter()
        done = subprocess.run(command, env=env, capture_output=True, text=True)
        (out / f"run-{i + 1}.log").write_text(done.stdout + done.stderr)
        print(f"run {i + 1}: exit {done.returncode}, {time.perf_counter() - t0:.0f} s, load {load}", flush=True)


def report(out: Path) -> None:
    above_unflagged = flagged = figures = no_twin = 0
    reasons: Counter[str] = Counter()
    runs = sorted(out.glob("run-*/summary.json"), key=lambda p: int(p.parent.name.split("-")[1]))
    for path in runs:
        eff = (json.loads(path.read_text()).get("efficiency") or {}).get("settings") or {}
        line = []
        for label, e in eff.items():
            if e.get("mismatch"):
                flagged += 1
                reasons[e["mismatch"].split(":")[0][:90]] += 1
                line.append(f"{label}: mismatch")
            elif e.get("efficiency") is None:
                no_twin += 1
            else:
                figures += 1
                if e.get("ci_low") is not None and e["ci_low"] > 1.0:
                    above_unflagged += 1
                line.append(f"{label}: {100 * e['efficiency']:.0f}% [{100 * (e['ci_low'] or 0):.0f}, {100 * (e['ci_high'] or 0):.0f}]")
        print(f"{path.parent.name}: " + "; ".join(line))
    print(f"{len(runs)} runs: {figures} efficiencies shown as figures, {above_unflagged} of them with an interval wholly "
          f"above 100% (target 0); {flagged} flagged as a mismatch; {no_twin} without a twin")
    for reason, n in reasons.most_common():
        print(f"  {n} x {reason}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("recipe", nargs="?")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--args", default="", help="more arguments of `blocklab run`")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--src", type=Path, default=HERE / "src", help="the blocklab source to run (default: this checkout's)")
    parser.add_argument("--report", type=Path, help="only read back the runs in this directory")
    args = parser.parse_args()
    if args.report:
        report(args.report)
        return
    if not args.recipe or not args.out:
        parser.error("give a recipe and --out (or --report DIR)")
    run_many(args.recipe, args.runs, args.out, shlex.split(args.args), args.src)
    report(args.out)


if __name__ == "__main__":
    main()
