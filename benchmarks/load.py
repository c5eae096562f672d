"""Data-set creation rate: blocklab's scan table against `pgbench -i`, same server, same bytes.

Both build a table server-side into the same embedded PostgreSQL 18 and
freeze it (pgbench -i -I dtgv: drop, create, generate, vacuum, no keys; blocklab:
CREATE + INSERT ... generate_series + VACUUM FREEZE). The row count of the scan
table is chosen so that its size matches pgbench_accounts at the given scale.
Runs alternate (A B A B ...) so drift hits both alike; the figure is the ratio
of median bytes per second.

    python benchmarks/load.py --scale 20 --repeats 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from blocklab.engines.postgres import PostgresEngine, _pg_bin
from blocklab.workloads.full_scan import build_scan_table


def pgbench_init(engine: PostgresEngine, scale: int) -> tuple[float, int]:
    """Seconds and bytes of `pgbench -i` (100,000 rows of ~120 bytes per scale unit)."""
    env = dict(os.environ, PGHOST=str(engine.socket_dir), PGUSER="postgres", PGDATABASE="postgres")
    t0 = time.perf_counter()
    subprocess.run(
        [str(_pg_bin() / "pgbench"), "-i", "-I", "dtgv", "-s", str(scale), "-q"],
        env=env, check=True, capture_output=True,
    )
    elapsed = time.perf_counter() - t0
    size = sum(engine.relation_bytes(t) for t in ("pgbench_accounts", "pgbench_branches", "pgbench_tellers"))
    return elapsed, size


def blocklab_build(engine: PostgresEngine, rows: int) -> tuple[float, int]:
    elapsed = build_scan_table(engine, "bench_load", rows, "bench")
    return elapsed, engine.relation_bytes("bench_load")


def rows_for_bytes(engine: PostgresEngine, target: int) -> int:
    """Rows of the scan table that make `target` bytes (measured on a sample)."""
    sample = 200_000
    build_scan_table(engine, "bench_load", sample, "bench")
    per_row = engine.relation_bytes("bench_load") / sample
    return int(target / per_row)


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
        _, pgbench_bytes = pgbench_init(engine, args.scale)  # warm-up, and the size to match
        rows = rows_for_bytes(engine, pgbench_bytes)
        rates: dict[str, list[float]] = {"pgbench -i": [], "blocklab": []}
        for i in range(args.repeats):
            for name in (("pgbench -i", "blocklab") if i % 2 == 0 else ("blocklab", "pgbench -i")):
                seconds, size = pgbench_init(engine, args.scale) if name == "pgbench -i" else blocklab_build(engine, rows)
                rates[name].append(size / seconds)
                print(f"{name:11s} {size / 1e6:7.1f} MB in {seconds:6.2f} s = {size / seconds / 1e6:6.1f} MB/s", flush=True)
        pg = statistics.median(rates["pgbench -i"])
        bl = statistics.median(rates["blocklab"])
        pg_rows, bl_rows = args.scale * 100_000 * pg / pgbench_bytes, rows * bl / (pgbench_bytes or 1)
        print(f"\nmedian: pgbench -i {pg / 1e6:.1f} MB/s, blocklab {bl / 1e6:.1f} MB/s, ratio blocklab/pgbench = {bl / pg:.2f}x (bytes)")
        print(f"rows:   pgbench -i {pg_rows / 1e6:.2f} M rows/s, blocklab {bl_rows / 1e6:.2f} M rows/s, ratio {bl_rows / pg_rows:.2f}x (rows)")
        print(f"(pgbench scale {args.scale} = {pgbench_bytes / 1e6:.0f} MB; blocklab {rows:,} rows; {args.repeats} runs each)")
    finally:
        engine.stop()
        subprocess.run(["rm", "-rf", str(cache)], check=False)


if __name__ == "__main__":
    main()
