"""blocklab's cost over bare db_bench: the same command on the same data, interleaved.

Each round runs one blocklab cell (runner.run_cell: apply the knobs, read them
back, evict for a cold cell, start db_bench behind its gate with the probes
around it, parse its output, check the cell's claims) and then, or first (the
order alternates each round), the exact db_bench command that cell recorded in
its notes, run bare from a shell with the same cache preparation (the data
set's files dropped from the page cache for a cold cell). Both sides report
db_bench's own ops/sec, measured inside db_bench; the ratio blocklab / bare
says what blocklab costs the engine while it measures (nothing but a shell's
exec and a sleeping waitid are meant to be in its way).

Two points, on one data set of 500,000 keys of 16 + 400 bytes, 4 kB blocks,
no compression:

- io: readrandom, 4 threads, 5 s, direct reads and a 1 MB block cache
  (the slob recipe's point: every lookup one device read);
- cpu: readrandom, 1 thread, 300,000 lookups from the OS page cache, 1 MB
  block cache (the checksum recipe's point: CPU-bound, most sensitive to
  anything else running).

    BLOCKLAB_CACHE=/var/tmp/blocklab-bench-rocksdb python benchmarks/rocksdb_overhead.py --rounds 12 [--points cpu]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path

from blocklab.engines.rocksdb import files as rfiles
from blocklab.engines.rocksdb.output import parse
from blocklab.experiment import prepare
from blocklab.plan import Cell, Setting
from blocklab.runner import SilentReporter, run_cell
from blocklab.spec import spec_from_dict

COMMON = {"rocksdb.compression_type": "none", "rocksdb.value_size": 400, "buffer_cache": "1MB", "block_size": 4096}
POINTS = {
    "io": ({"kind": "slob", "work_unit": 1, "shared_table": True, "run_time_s": 5, "sessions": 4},
           {**COMMON, "direct_io": True}, "cold", "readrandom"),
    "cpu": ({"kind": "point_read", "reads": 300_000, "threads": 1}, COMMON, "warm", "readrandom"),
}


def one_point(name: str, rows: int, rounds: int, cache: Path) -> dict[str, list[float]]:
    workload, settings, state, benchmark = POINTS[name]
    raw = {"name": f"overhead-{name}", "engine": {"kind": "rocksdb", "settings": settings},
           "dataset": {"rows": rows, "table": f"overhead_{name}"}, "workload": workload,
           "measure": {"repeats": 1, "seed": 1, "cache": state}}
    exp = prepare(spec_from_dict(raw, "benchmark", {}), "# benchmark", "benchmark", cache_dir=cache)
    engine = exp.engine
    out: dict[str, list[float]] = {"blocklab": [], "bare": []}
    try:
        engine.start()
        engine.apply(exp.fixed)
        exp.workload.prepare(engine)
        table = exp.workload.relations()[0]
        command = ""
        for i in range(rounds):
            order = ("blocklab", "bare") if i % 2 == 0 else ("bare", "blocklab")
            for side in order:
                if side == "blocklab" or not command:
                    row = run_cell(exp, Cell(i, i, Setting(())), SilentReporter())
                    if not row.ok:
                        raise SystemExit(f"blocklab's cell failed: {row.status}")
                    command = row.notes["db_bench"]["commands"][-1]
                    if side == "blocklab":
                        out["blocklab"].append(row.metrics["db_bench.ops_per_s"])
                        continue
                if state == "cold":
                    rfiles.drop_db_cache(engine.table_dir(table))
                done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, check=True)
                result = parse(done.stdout, done.stderr, benchmark)
                assert result is not None, done.stderr[-500:]
                out["bare"].append(result.ops_per_s)
    finally:
        engine.stop()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--rows", type=int, default=500_000)
    parser.add_argument("--points", default=",".join(POINTS), help=f"which of {', '.join(POINTS)} (comma-separated)")
    args = parser.parse_args()
    cache = Path(tempfile.mkdtemp(prefix="blocklab-bench-rocksdb-", dir="/var/tmp"))
    print(f"data sets under {cache} (removed at the end)")
    try:
        _report(args, cache)
    finally:
        shutil.rmtree(cache, ignore_errors=True)  # ~400 MB of data sets


def _report(args: argparse.Namespace, cache: Path) -> None:
    for name in args.points.split(","):
        got = one_point(name, args.rows, args.rounds, cache)
        b, r = statistics.median(got["blocklab"]), statistics.median(got["bare"])
        pairs = [x / y for x, y in zip(got["blocklab"], got["bare"])]
        print(f"{name}: blocklab median {b:,.0f} ops/s, bare db_bench median {r:,.0f} ops/s, ratio of medians {b / r:.3f}x; "
              f"per round {', '.join(f'{p:.3f}' for p in pairs)}")
        print(f"  blocklab {[round(x) for x in got['blocklab']]}")
        print(f"  bare     {[round(x) for x in got['bare']]}")


if __name__ == "__main__":
    main()
