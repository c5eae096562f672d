"""Data-set creation rate: blocklab's scan table against `pgbench -i`, same server, same bytes.

Three builds into the same embedded PostgreSQL 18, each timed until its table
is loaded, frozen and analysed:

- blocklab: the scan table (id integer, name text) by `build_scan_table`:
  CREATE + COPY FREEZE FROM PROGRAM (perl on the server host) in one
  transaction, commit, VACUUM (FREEZE, ANALYZE), CHECKPOINT; with as many rows
  as make the bytes of pgbench_accounts at the given scale;
- `pgbench -i -I dtgv`: drop, create, client-side generate (COPY FREEZE),
  VACUUM ANALYZE; no keys. The like-for-like reference, since the scan table
  has no key either: the target is judged on it;
- `pgbench -i` (default steps dtgvp): the same plus the three primary keys,
  extra work the scan table does not do; reported beside it because the issue
  names plain `pgbench -i`.

The rate is the bytes of the tables' heaps (pgbench's indexes are not counted)
per second. Each round runs the three in a rotated order so that drift on this
shared machine hits all alike; the figures are medians over rounds, and the
ratios are ratios of medians. The per-step seconds come from build_scan_table
and from pgbench's own "done in" line.

    python benchmarks/load.py --scale 20 --repeats 5
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from blocklab.engines.postgres import PostgresEngine
from blocklab.engines.postgres.instance import pg_bin
from blocklab.engines.postgres.scan import build_scan_table

PGBENCH_TABLES = ("pgbench_accounts", "pgbench_branches", "pgbench_tellers", "pgbench_history")
PGBENCH_KEYS = ("pgbench_accounts_pkey", "pgbench_branches_pkey", "pgbench_tellers_pkey")
LIKE_FOR_LIKE = "pgbench -i -I dtgv"
DEFAULT = "pgbench -i"


class Run:
    def __init__(self, seconds: float, heap_bytes: int, rows: int, steps: dict[str, float], index_bytes: int = 0):
        self.seconds, self.heap_bytes, self.rows, self.steps, self.index_bytes = seconds, heap_bytes, rows, steps, index_bytes

    @property
    def bytes_per_s(self) -> float:
        return self.heap_bytes / self.seconds

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.seconds


def pgbench_steps(stderr: str) -> dict[str, float]:
    """pgbench's own split: `done in 1.23 s (drop tables 0.01 s, ..., vacuum 0.11 s).`"""
    match = re.search(r"done in [\d.]+ s \((.*)\)", stderr)
    if not match:
        return {}
    return {name.strip(): float(value) for name, value in re.findall(r"([a-z -]+) ([\d.]+) s", match.group(1))}


def pgbench_init(engine: PostgresEngine, scale: int, steps: str) -> Run:
    """`pgbench -i -I <steps>`: 100,000 accounts rows of ~125 bytes on disk per scale unit."""
    env = dict(os.environ, PGHOST=str(engine.socket_dir), PGUSER="postgres", PGDATABASE="postgres")
    t0 = time.perf_counter()
    done = subprocess.run(
        [str(pg_bin() / "pgbench"), "-i", "-I", steps, "-s", str(scale), "-q"],
        env=env, check=True, capture_output=True, text=True,
    )
    elapsed = time.perf_counter() - t0
    heap = sum(engine.relation_bytes(t) for t in PGBENCH_TABLES)
    index = sum(engine.relation_bytes(i) for i in PGBENCH_KEYS) if "p" in steps else 0
    rows = scale * (100_000 + 10 + 1)  # accounts + tellers + branches
    return Run(elapsed, heap, rows, pgbench_steps(done.stderr), index)


def blocklab_build(engine: PostgresEngine, rows: int) -> Run:
    steps: dict[str, float] = {}
    elapsed = build_scan_table(engine, "bench_load", rows, "bench", steps)
    return Run(elapsed, engine.relation_bytes("bench_load"), rows, steps)


def rows_for_bytes(engine: PostgresEngine, target: int) -> int:
    """Rows of the scan table that make `target` bytes (measured on a sample)."""
    sample = 200_000
    build_scan_table(engine, "bench_load", sample, "bench")
    per_row = engine.relation_bytes("bench_load") / sample
    return int(target / per_row)


def median_steps(runs: list[Run]) -> str:
    names = list(dict.fromkeys(name for run in runs for name in run.steps))
    return ", ".join(f"{name} {statistics.median(run.steps.get(name, 0.0) for run in runs):.2f} s" for name in names)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=int, default=20, help="pgbench scale (100,000 accounts each)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    cache = Path(tempfile.mkdtemp(prefix="blocklab-bench-", dir="/var/tmp"))
    os.chmod(cache, 0o755)
    engine = PostgresEngine(cache_dir=cache)
    engine.start()
    try:
        builders = {
            "blocklab": None,
            LIKE_FOR_LIKE: "dtgv",
            DEFAULT: "dtgvp",
        }
        # warm-up of each, and the size to match
        target = pgbench_init(engine, args.scale, "dtgv").heap_bytes
        pgbench_init(engine, args.scale, "dtgvp")
        rows = rows_for_bytes(engine, target)
        runs: dict[str, list[Run]] = {name: [] for name in builders}
        order = list(builders)
        for i in range(args.repeats):
            shift = i % len(order)
            for name in order[shift:] + order[:shift]:
                steps = builders[name]
                run = blocklab_build(engine, rows) if steps is None else pgbench_init(engine, args.scale, steps)
                runs[name].append(run)
                extra = f" (+ {run.index_bytes / 1e6:.0f} MB of keys)" if run.index_bytes else ""
                print(
                    f"{name:19s} {run.heap_bytes / 1e6:6.1f} MB{extra} in {run.seconds:5.2f} s = "
                    f"{run.bytes_per_s / 1e6:6.1f} MB/s, {run.rows_per_s / 1e6:5.2f} M rows/s",
                    flush=True,
                )
        mb = {name: statistics.median(r.bytes_per_s for r in rs) for name, rs in runs.items()}
        mrows = {name: statistics.median(r.rows_per_s for r in rs) for name, rs in runs.items()}
        print(f"\nmedians of {args.repeats} ({args.scale * 100_000:,} pgbench accounts = {target / 1e6:.0f} MB; blocklab {rows:,} rows):")
        for name in builders:
            print(f"  {name:19s} {mb[name] / 1e6:6.1f} MB/s  {mrows[name] / 1e6:5.2f} M rows/s   steps: {median_steps(runs[name])}")
        for ref, label in ((LIKE_FOR_LIKE, "like for like, no keys: the target"), (DEFAULT, "default, also builds primary keys")):
            print(
                f"ratio blocklab / {ref:19s} = {mb['blocklab'] / mb[ref]:.2f}x in bytes/s, "
                f"{mrows['blocklab'] / mrows[ref]:.2f}x in rows/s   ({label})"
            )
    finally:
        engine.stop()
        subprocess.run(["rm", "-rf", str(cache)], check=False)


if __name__ == "__main__":
    main()
