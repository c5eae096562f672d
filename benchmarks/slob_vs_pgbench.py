"""A read-only `slob` point against pgbench running the same query, on one server.

Does the slob workload's server-side PL/pgSQL loop measure what an
independent, well-known driver measures? Both run the same range read

    SELECT count(filler) FROM blocklab_slob_<i> WHERE id BETWEEN lo AND lo + work_unit - 1

(lo uniform over the table, plain index scan: enable_seqscan and
enable_bitmapscan off) with the same number of sessions, on the same embedded
PostgreSQL 18 set up as the `slob` recipe sets it (8 MB shared_buffers, direct
I/O, io_method = sync: the reads are physical). slob gives each session its
own table; pgbench gets one -f script per table with equal weights, so each of
its transactions reads a random table: the same data, the same uniform access.

Runs alternate (slob, pgbench, pgbench, slob, ...) so drift hits both alike.
The figure is the median over pairs of slob ops/s / pgbench tps (one range
read = one op = one pgbench transaction) with a 95% bootstrap interval. The
read IOPS and read latency of both (pg_stat_io) are printed too.

    BLOCKLAB_CACHE=/var/tmp/mine python benchmarks/slob_vs_pgbench.py --sessions 4 --pairs 5
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import tempfile
import time
from pathlib import Path

from blocklab.analysis.stats import median_ci
from blocklab.engines.postgres import PostgresEngine
from blocklab.engines.postgres.counters import StatIoWindow
from blocklab.engines.postgres.instance import pg_bin
from blocklab.spec import DatasetSpec
from blocklab.workloads.slob import Slob, SlobOptions

SETTINGS = {"buffer_cache": "8MB", "direct_io": True, "pg.io_method": "sync", "pg.max_wal_size": "10GB"}
PGOPTIONS = "-c enable_seqscan=off -c enable_bitmapscan=off -c track_io_timing=on -c application_name=pgbench"


def pgbench_script(table: str, scale: int, work_unit: int) -> str:
    return (
        f"\\set lo random(1, {scale - work_unit + 1})\n"
        f"\\set hi :lo + {work_unit - 1}\n"
        f"SELECT count(filler) FROM {table} WHERE id BETWEEN :lo AND :hi;\n"
    )


def run_pgbench(engine: PostgresEngine, tables: list[str], scale: int, work_unit: int, sessions: int, seconds: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="blocklab-pgbench-") as tmp:
        args = [str(pg_bin() / "pgbench"), "-n", "-M", "prepared", "-c", str(sessions), "-j", str(sessions), "-T", str(seconds)]
        for i, table in enumerate(tables):
            path = Path(tmp) / f"slob_{i}.sql"
            path.write_text(pgbench_script(table, scale, work_unit))
            args += ["-f", f"{path}@1"]
        env = dict(os.environ, PGHOST=str(engine.socket_dir), PGUSER="postgres", PGDATABASE="postgres", PGOPTIONS=PGOPTIONS)
        # settle: wait until pg_stat_io stops moving (late flushes), as the slob point's own window does
        with StatIoWindow(engine, settle=True) as io:
            t0 = time.perf_counter()
            proc = subprocess.run(args + ["postgres"], env=env, capture_output=True, text=True, timeout=seconds + 120)
            wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"pgbench failed ({proc.returncode}): {proc.stderr.strip()[-800:]}")
    tps = re.search(r"tps = ([0-9.]+) \(without initial connection time\)", proc.stdout)
    if tps is None:
        raise RuntimeError(f"no tps in pgbench output:\n{proc.stdout[-800:]}")
    rel = io.by_type
    reads = sum(v["reads"] for v in rel.values())
    return {
        "ops_per_s": float(tps.group(1)),
        "read_iops": reads / seconds,
        "read_latency_ms": sum(v["read_time"] for v in rel.values()) / reads if reads else 0.0,
        "wall_s": wall,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=4)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--seconds", type=int, default=10, help="run time of each slob point and each pgbench run")
    parser.add_argument("--scale", type=int, default=10_000, help="rows (= pages) per session table, as the recipe")
    parser.add_argument("--work-unit", type=int, default=16)
    parser.add_argument("--cache", type=Path, default=Path(os.environ.get("BLOCKLAB_CACHE", "/var/tmp/blocklab-slob-bench")))
    args = parser.parse_args()

    engine = PostgresEngine(cache_dir=args.cache)
    engine.start()
    try:
        engine.apply(SETTINGS)
        slob = Slob(
            SlobOptions(sessions=args.sessions, update_pct=0, scale=args.scale, work_unit=args.work_unit, run_time_s=args.seconds),
            DatasetSpec(table="blocklab_slob", rows=args.scale),
        )
        slob.prepare(engine)
        tables = slob.tables()
        print(f"PostgreSQL {engine.version}, {args.sessions} sessions, {args.scale:,} rows/pages per table, "
              f"work_unit {args.work_unit}, {args.seconds} s per run, {args.pairs} pairs", flush=True)
        ratios, slob_ops, bench_ops = [], [], []
        for pair in range(args.pairs):
            order = ("slob", "pgbench") if pair % 2 == 0 else ("pgbench", "slob")
            got = {}
            for which in order:
                if which == "slob":
                    m = slob.run(engine)
                    got["slob"] = {k: m[k] for k in ("ops_per_s", "read_iops", "read_latency_ms")}
                else:
                    got["pgbench"] = run_pgbench(engine, tables, args.scale, args.work_unit, args.sessions, args.seconds)
            s, b = got["slob"], got["pgbench"]
            ratios.append(s["ops_per_s"] / b["ops_per_s"])
            slob_ops.append(s["ops_per_s"])
            bench_ops.append(b["ops_per_s"])
            print(
                f"pair {pair + 1} ({order[0]} first): slob {s['ops_per_s']:,.0f} ops/s, {s['read_iops']:,.0f} read IOPS, "
                f"{s['read_latency_ms']:.3f} ms | pgbench {b['ops_per_s']:,.0f} tps, {b['read_iops']:,.0f} read IOPS, "
                f"{b['read_latency_ms']:.3f} ms | ratio {ratios[-1]:.3f}",
                flush=True,
            )
        med, lo, hi = median_ci(ratios)
        print(f"slob / pgbench ops/s: median {med:.3f}, 95% CI [{lo:.3f}, {hi:.3f}] over {len(ratios)} pairs "
              f"(slob median {sorted(slob_ops)[len(slob_ops) // 2]:,.0f} ops/s, pgbench {sorted(bench_ops)[len(bench_ops) // 2]:,.0f} tps)")
    finally:
        engine.stop()


if __name__ == "__main__":
    main()
