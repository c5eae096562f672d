"""The observer effect of --cpu-profile: the same cells with and without perf
sampling the engine's processes, interleaved.

Each pair runs one cell of the `checksum` recipe's workload (single-row inserts,
checksum on) twice, profiled and not, the order alternating (on/off, off/on,
...) so drift hits both alike, through the runner's own path (the workload's
probe window opens the profiler's perf window). The figure per rate is the
geometric mean over pairs of elapsed(profiled) / elapsed(not) with its 95%
paired t interval (log scale), i.e. the time the engine loses to being sampled,
and the same of the engine processes' own CPU seconds (/proc: what sampling adds
to the sampled process, the stack copies of DWARF call graphs included; on a
loaded machine the elapsed time's noise hides a few percent, the CPU's less);
perf's start, stop and `perf script` happen outside the timed loop and are
reported apart (seconds per cell).

    python benchmarks/cpu_profile_overhead.py --engine sqlite --hz 99,499 --pairs 10
    python benchmarks/cpu_profile_overhead.py --engine postgres --rows 300000 --hz 99,499,999
    python benchmarks/cpu_profile_overhead.py --native --hz 99,999 --pairs 12

`--native` measures the sampling alone, where a loaded machine's noise is
smallest: a compiled CPU loop (no I/O, no locks) profiled through the same
PerfWindow, its CPU seconds from wait4() against an unprofiled run.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time
from pathlib import Path
from typing import Any

from scipy import stats

from blocklab.lab import Overrides, load_experiment
from blocklab.probes.cpu_profile import CellProfiler, observing


def paired_ratio(pairs: list[tuple[float, float]]) -> tuple[float, float, float]:
    logs = [math.log(a / b) for a, b in pairs]
    mean = statistics.fmean(logs)
    if len(logs) < 2:
        return math.exp(mean), math.nan, math.nan
    half = float(stats.t.ppf(0.975, len(logs) - 1)) * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


NATIVE = r"""
#include <stdio.h>
#include <stdlib.h>
volatile unsigned long sink;
int main(int argc, char **argv) {
    long n = atol(argv[1]);
    char go[8];
    if (!fgets(go, sizeof go, stdin)) return 1;
    for (long i = 0; i < n; i++) sink += i ^ (sink >> 3);
    return 0;
}
"""


def native(hzs: list[int], pairs: int) -> None:
    """CPU seconds of a compiled loop profiled / not, through PerfWindow."""
    import shutil
    import subprocess
    import tempfile

    from blocklab.engines.base import ProfileTargets
    from blocklab.probes.cpu_profile import PerfWindow, event, perf_binary, privileged, read_paranoid

    gcc, perf = shutil.which("gcc"), perf_binary()
    assert gcc and perf, "needs gcc and perf"
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([gcc, "-O1", "-o", f"{tmp}/loop", "-x", "c", "-"], input=NATIVE, text=True, check=True)

        def one(hz: int | None) -> float:
            proc = subprocess.Popen([f"{tmp}/loop", "150000000"], stdin=subprocess.PIPE)
            window = PerfWindow(ProfileTargets((proc.pid,), "loop"), hz or 1, perf, event(privileged(), read_paranoid() or 0))
            if hz:
                window.__enter__()
            assert proc.stdin is not None
            proc.stdin.write(b"go\n")
            proc.stdin.close()
            _, _, usage = os.wait4(proc.pid, 0)
            proc.returncode = 0
            if hz:
                window.__exit__(None, None, None)
            return usage.ru_utime + usage.ru_stime

        for hz in hzs:
            ratios = []
            for i in range(pairs):
                on, off = (one(hz), one(None)) if i % 2 == 0 else tuple(reversed((one(None), one(hz))))
                ratios.append((on, off))
            r, lo, hi = paired_ratio(ratios)
            print(f"native loop {hz:4d} Hz: CPU seconds profiled / not = {r:.4f} [{lo:.4f}, {hi:.4f}] ({(r - 1) * 100:+.2f}%), "
                  f"median {statistics.median(p[1] for p in ratios):.2f} s a run; load {os.getloadavg()[0]:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", default="sqlite", help="sqlite | postgres | mariadb")
    parser.add_argument("--hz", default="99,499", help="sampling rates to measure, comma-separated")
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--rows", type=int, default=None, help="rows per cell (default: the recipe's --quick)")
    parser.add_argument("--native", action="store_true", help="the sampling alone, on a compiled CPU loop")
    parser.add_argument("--cache", type=Path, default=Path(os.environ.get("BLOCKLAB_CACHE", "/var/tmp/blocklab-cpuprof-bench")))
    args = parser.parse_args()
    if args.native:
        native([int(h) for h in args.hz.split(",")], args.pairs)
        return

    sets = ["checksum=on", "workload.index=false"]
    if args.engine in ("sqlite", "mariadb"):
        sets += ["block_size=16384"] + (["block_checking=off"] if args.engine == "sqlite" else [])
    exp = load_experiment("checksum", Overrides(sets=sets, engine=args.engine, quick=True, repeats=1),
                          cache_dir=args.cache)
    engine = exp.engine
    cell = exp.plan().cells[0]
    workload = exp.workload_for(cell.setting.as_dict())
    if args.rows:
        workload.options = workload.options.model_copy(update={"rows": args.rows})  # type: ignore[attr-defined]
    settings = {**exp.fixed, **{k: v for k, v in cell.setting.as_dict().items() if not k.startswith("workload.")}}
    engine.start()
    try:
        engine.apply(settings)
        workload.prepare(engine)
        workload.run(engine)  # warm-up, not counted

        def one(hz: int | None) -> tuple[float, dict[str, Any]]:
            profiler = CellProfiler(engine, hz=hz) if hz else None
            t0 = time.perf_counter()
            with observing(profiler):
                metrics = workload.run(engine)
            wall = time.perf_counter() - t0
            extra = {"wall": wall, "samples": profiler.profile.samples if profiler else 0,
                     "cpu": float(metrics.get("server_cpu_s", math.nan))}
            return float(metrics["elapsed_s"]), extra

        print(f"engine {args.engine}, {workload.options.rows:,} rows a cell, {args.pairs} pairs per rate; "  # type: ignore[attr-defined]
              f"load {os.getloadavg()[0]:.1f}")
        for hz in [int(h) for h in args.hz.split(",")]:
            pairs, cpu_pairs, outside, samples = [], [], [], []
            for i in range(args.pairs):
                if i % 2 == 0:
                    on, on_x = one(hz)
                    off, off_x = one(None)
                else:
                    off, off_x = one(None)
                    on, on_x = one(hz)
                pairs.append((on, off))
                cpu_pairs.append((on_x["cpu"], off_x["cpu"]))
                outside.append((on_x["wall"] - on) - (off_x["wall"] - off))
                samples.append(on_x["samples"])
            r, lo, hi = paired_ratio(pairs)
            cr, clo, chi = paired_ratio(cpu_pairs)
            print(f"{hz:4d} Hz: engine CPU seconds profiled / not = {cr:.4f} [{clo:.4f}, {chi:.4f}] ({(cr - 1) * 100:+.2f}%); "
                  f"elapsed profiled / not = {r:.4f} [{lo:.4f}, {hi:.4f}] ({(r - 1) * 100:+.2f}%), "
                  f"median elapsed not profiled {statistics.median(p[1] for p in pairs):.3f} s, "
                  f"{statistics.median(samples):.0f} samples a cell, perf's start/stop/fold outside the timing "
                  f"{statistics.median(outside):.2f} s a cell; load {os.getloadavg()[0]:.1f}")
    finally:
        engine.stop()


if __name__ == "__main__":
    main()
