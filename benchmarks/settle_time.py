"""Time to a settled verdict (issue 26): how long `blocklab run RECIPE` takes
until every setting is separated from the best or within 3% of it.

Each run is a fresh `blocklab run` of this checkout or of an older commit
(its source exported with git archive into the output directory, run with
this virtualenv's packages and its own BLOCKLAB_CACHE), timed from start to exit. Its summary.json
is then read back and the verdict judged with one rule for both versions:
every setting other than the best has a ratio-to-best interval that excludes 1
(separated) or lies inside [1 - margin, 1 + margin] (within 3%). A run that
ended settled took its wall time to settle; one that did not never settled
(its wall time is what it spent without settling).

    python benchmarks/settle_time.py mbrc --runs 10 --commit main --out /var/tmp/settle-before-mbrc
    python benchmarks/settle_time.py mbrc --runs 10 --out /var/tmp/settle-after-mbrc
    python benchmarks/settle_time.py --report /var/tmp/settle-before-mbrc /var/tmp/settle-after-mbrc

Runs go one after another; `--report` reads the directories again (the runs'
results are kept there) and prints the table BENCHMARKS.md quotes.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
MARGIN = 0.03


def _load() -> str:
    return Path("/proc/loadavg").read_text().split()[0]


def _export(commit: str, work: Path) -> Path:
    """The commit's source tree, exported (git archive: the repository is left as it is)."""
    tree = work / "tree"
    if not tree.exists():
        tree.mkdir(parents=True)
        archive = subprocess.run(["git", "-C", str(HERE), "archive", commit, "src"], check=True, capture_output=True)
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    return tree


def run_many(recipe: str, runs: int, out: Path, commit: str | None, args: list[str]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    out.chmod(0o755)  # as root the servers run as the `blocklab` user, who must reach the caches inside
    src = (_export(commit, out) / "src") if commit else HERE / "src"
    env = {**os.environ, "PYTHONPATH": str(src), "BLOCKLAB_CACHE": str(out / "cache")}
    log = out / "runs.jsonl"
    try:
        for i in range(runs):
            run_dir = out / f"run-{i + 1}"
            if run_dir.exists():
                continue  # a re-started benchmark goes on where it stopped
            command = [sys.executable, "-m", "blocklab.cli", "run", recipe, *args, "--out", str(run_dir)]
            load_before = _load()
            t0 = time.perf_counter()
            done = subprocess.run(command, env=env, capture_output=True, text=True)
            seconds = time.perf_counter() - t0
            (out / f"run-{i + 1}.log").write_text(done.stdout + done.stderr)
            entry = {"run": i + 1, "seconds": round(seconds, 1), "exit": done.returncode, "load_before": load_before,
                     "load_after": _load(), "commit": commit or "this checkout", "command": shlex.join(command),
                     "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
            with log.open("a") as f:
                f.write(json.dumps(entry) + "\n")
            print(json.dumps(entry), flush=True)
    finally:
        if commit:
            shutil.rmtree(out / "cache", ignore_errors=True)


def settled(summary: dict) -> tuple[bool, int]:
    """(every setting separated from the best or within MARGIN of it, how many are not)."""
    analysis = summary.get("analysis") or {}
    best = analysis.get("best")
    left = 0
    for s in analysis.get("settings") or []:
        if s.get("key") == best or not s.get("n"):
            continue
        lo, hi = s.get("ratio_to_best_ci_low"), s.get("ratio_to_best_ci_high")
        if lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi)):
            left += 1
            continue
        if not (lo > 1.0 or hi < 1.0 or (lo >= 1 - MARGIN and hi <= 1 + MARGIN)):
            left += 1
    return left == 0, left


def report(directories: list[Path]) -> None:
    for out in directories:
        entries = [json.loads(line) for line in (out / "runs.jsonl").read_text().splitlines() if line.strip()]
        times, never, rows = [], [], []
        for e in entries:
            summary_path = out / f"run-{e['run']}" / "summary.json"
            if e["exit"] != 0 or not summary_path.exists():
                rows.append(f"  run {e['run']}: exit {e['exit']} ({e['seconds']:.0f} s)")
                continue
            summary = json.loads(summary_path.read_text())
            ok, left = settled(summary)
            blocks = (summary.get("analysis") or {}).get("blocks")
            (times if ok else never).append(e["seconds"])
            rows.append(f"  run {e['run']}: {e['seconds']:.0f} s, {blocks} blocks, "
                        f"{'settled' if ok else f'{left} setting(s) not settled'} (load {e['load_before']} -> {e['load_after']})")
        print(f"{out} ({entries[0]['commit'] if entries else '?'}; {entries[0]['command'] if entries else ''}):")
        print("\n".join(rows))
        text = f"  settled in {len(times)} of {len(entries)} runs"
        if times:
            text += f": median {statistics.median(times):.0f} s [min {min(times):.0f}, max {max(times):.0f}]"
        if never:
            text += f"; {len(never)} never settled (median {statistics.median(never):.0f} s spent)"
        print(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("recipe", nargs="?", help="the recipe run, e.g. mbrc")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--commit", help="an older commit to run instead of this checkout (any git revision)")
    parser.add_argument("--args", default="", help='arguments of `blocklab run`, e.g. "--quick --device-twin off"')
    parser.add_argument("--out", type=Path, help="where the runs and their log go (kept)")
    parser.add_argument("--report", type=Path, nargs="+", help="only print the table of these output directories")
    args = parser.parse_args()
    if args.report:
        report(args.report)
        return
    if not args.recipe or not args.out:
        parser.error("give a recipe and --out (or --report DIR ...)")
    run_many(args.recipe, args.runs, args.out, args.commit, shlex.split(args.args))
    report([args.out])


if __name__ == "__main__":
    main()
