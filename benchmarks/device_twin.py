"""What the device twin costs and what it finds (issue 19): each recipe's quick
variant run through the CLI with `--device-twin on`, its twins measured anew
(the device's twin cache is set aside first and put back after), and per run:

    the cells' wall time (the run minus the twin), the twin's own (fio and the
    test files' layout, from twin.json), the patterns replayed, and per setting
    the engine's efficiency against its twin with the bottleneck named.

    python benchmarks/device_twin.py                               # every recipe and engine below
    python benchmarks/device_twin.py --only mbrc:postgres slob:postgres
    python benchmarks/device_twin.py --only mbrc:postgres:full      # the recipe itself, not its --quick variant
    BLOCKLAB_CACHE=/var/tmp/mine python benchmarks/device_twin.py --out /var/tmp/twin-bench

The engines' data directories are reused from BLOCKLAB_CACHE (built on the
first run); the results go to --out. Nothing here asserts a figure: it prints
them, for BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

RUNS: list[tuple[str, ...]] = [
    ("mbrc", "postgres", "full"), ("mbrc", "postgres"), ("mbrc", "mariadb"),
    ("slob", "postgres"), ("slob", "mariadb"),
    ("checksum", "postgres"), ("checksum", "sqlite"), ("checksum", "mariadb"),
    ("reload", "postgres"), ("writers", "postgres"),
]


def blocklab() -> str:
    beside = Path(sys.executable).parent / "blocklab"
    return str(beside) if beside.exists() else "blocklab"


def twin_cache_files(cache: Path) -> list[Path]:
    return sorted((cache / "device-twins").glob("*.json"))


def one(recipe: str, engine: str, out: Path, cache: Path, extra: list[str], quick: bool = True) -> dict:
    """One run (the quick variant unless `quick` is False) with a cold twin cache; returns its figures."""
    aside = {}
    for f in twin_cache_files(cache):  # measure the twins anew, put the cache back afterwards
        aside[f] = f.with_suffix(".benchmark-aside")
        f.rename(aside[f])
    run_dir = out / f"{recipe}-{engine}{'' if quick else '-full'}"
    if run_dir.exists():
        shutil.rmtree(run_dir)
    env = {**os.environ, "BLOCKLAB_CACHE": str(cache)}
    cmd = [blocklab(), "run", recipe, *(["--quick"] if quick else []), "--engine", engine, "--device-twin", "on",
           "--out", str(run_dir), *extra]
    t0 = time.monotonic()
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3600)
    finally:
        for f in twin_cache_files(cache):
            f.unlink()  # the benchmark's own twins: not kept
        for original, moved in aside.items():
            moved.rename(original)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        return {"recipe": recipe, "engine": engine, "error": (proc.stdout + proc.stderr)[-2000:], "command": " ".join(cmd[1:])}
    (run_dir / "console.txt").write_text(proc.stdout)  # what the person at the terminal saw
    twin = json.loads((run_dir / "twin.json").read_text())
    summary = json.loads((run_dir / "summary.json").read_text())
    eff = summary.get("efficiency") or {}
    return {
        "recipe": recipe, "engine": engine, "command": "blocklab " + " ".join(cmd[1:]), "wall_s": wall,
        "twin_s": twin.get("seconds", 0.0), "patterns": len(twin.get("twins") or {}), "failures": twin.get("failures"),
        "settings": {label: {k: e.get(k) for k in ("pattern", "unit", "engine", "device", "efficiency", "ci_low", "ci_high",
                                                   "bottleneck", "device_util_pct", "server_cores")}
                     for label, e in (eff.get("settings") or {}).items()},
        "sentence": eff.get("sentence"), "verdict": eff.get("verdict"), "best": summary.get("best_label"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", metavar="RECIPE:ENGINE", help="a subset, e.g. mbrc:postgres")
    parser.add_argument("--out", type=Path, default=Path("/var/tmp/blocklab-twin-benchmark"))
    parser.add_argument("--cache", type=Path, default=Path(os.environ.get("BLOCKLAB_CACHE", "/var/tmp/blocklab-twin-benchmark-cache")))
    args, extra = parser.parse_known_args()
    runs = [tuple(x.split(":")) for x in args.only] if args.only else RUNS
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"load average at the start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs", flush=True)
    results = []
    for recipe, engine, *how in runs:
        r = one(recipe, engine, args.out, args.cache, extra, quick=how != ["full"])
        results.append(r)
        if "error" in r:
            print(f"\n{recipe} on {engine}: FAILED\n{r['error']}", flush=True)
            continue
        cells = r["wall_s"] - r["twin_s"]
        print(f"\n{recipe} on {engine}: run {r['wall_s']:.0f} s = cells and set-up {cells:.0f} s + twin {r['twin_s']:.0f} s "
              f"({r['patterns']} pattern(s), +{100 * r['twin_s'] / cells:.0f}%)\n  {r['command']}", flush=True)
        for label, e in r["settings"].items():
            eff = e["efficiency"]
            text = f"{100 * eff:.0f}% [{100 * (e['ci_low'] or eff):.0f}, {100 * (e['ci_high'] or eff):.0f}]" if eff else "-"
            print(f"  {label:50s} {e['pattern'] or '-':45s} {text:16s} {e['bottleneck'] or ''}", flush=True)
        if r["verdict"]:
            print(f"  {r['verdict']}", flush=True)
    (args.out / "benchmark.json").write_text(json.dumps(results, indent=1))
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f}; figures in {args.out / 'benchmark.json'}")


if __name__ == "__main__":
    main()
