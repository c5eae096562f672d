"""What the wait sampler costs: the `update` workload with and without it, on
one embedded PostgreSQL 18, interleaved.

Runs come in pairs, the order alternating (on/off, off/on, ...) so that drift
hits both alike; each run is a cold-cache cell exactly as the `writers` recipe
runs it. The figure is the median over pairs of rows/s with the sampler /
rows/s without it, with a 95% bootstrap interval: 1 - ratio is the throughput
lost to sampling. The sampler's own CPU (its thread and its backend) per
second of sampling is printed too: the cost that does not depend on noise.

    python benchmarks/overhead.py --pairs 12
    BLOCKLAB_CACHE=/var/tmp/mine python benchmarks/overhead.py --rows 300000 --interval-ms 10
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

from blocklab.analysis.stats import median_ci
from blocklab.engines.postgres import PostgresEngine
from blocklab.spec import DatasetSpec
from blocklab.workloads.update import Update, UpdateOptions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=12)
    parser.add_argument("--rows", type=int, default=300_000, help="table rows (all updated every run)")
    parser.add_argument("--sessions", type=int, default=15)
    parser.add_argument("--interval-ms", type=float, default=10.0)
    parser.add_argument("--shared-buffers", default="8MB")
    parser.add_argument("--nice", type=int, default=19, help="nice value for the sampler's thread and backend (the default 19, as blocklab runs it)")
    parser.add_argument("--cache", type=Path, default=Path(os.environ.get("BLOCKLAB_CACHE", "/var/tmp/blocklab-overhead")))
    args = parser.parse_args()

    engine = PostgresEngine(cache_dir=args.cache)
    engine.start()
    try:
        applied = engine.apply(
            {"buffer_cache": args.shared_buffers, "pg.max_wal_size": "10GB", "pg.checkpoint_timeout": 3600}
        )
        dataset = DatasetSpec(table="blocklab_upd", rows=args.rows)
        with_sampler = Update(UpdateOptions(sessions=args.sessions, sample_ms=args.interval_ms, sample_nice=args.nice), dataset)
        without = Update(UpdateOptions(sessions=args.sessions, sample=False), dataset)
        with_sampler.prepare(engine)  # builds the table once; both share it (same fingerprint)

        def one(workload: Update) -> dict[str, float]:
            workload.prepare(engine)
            engine.evict(workload.relations())
            return workload.run(engine)

        one(without)  # warm-up, not counted
        ratios, on_rates, off_rates, sampler_cpu, sampled_s = [], [], [], [], []
        t0 = time.perf_counter()
        for i in range(args.pairs):
            order = (with_sampler, without) if i % 2 == 0 else (without, with_sampler)
            results = {id(w): one(w) for w in order}
            on, off = results[id(with_sampler)], results[id(without)]
            ratios.append(on["rows_per_s"] / off["rows_per_s"])
            on_rates.append(on["rows_per_s"])
            off_rates.append(off["rows_per_s"])
            sampler_cpu.append(on["profile.sampler_cpu_s"])
            sampled_s.append(on["wall_s"])
            print(
                f"pair {i + 1:2d} ({'on, off' if i % 2 == 0 else 'off, on'}): with {on['rows_per_s']:,.0f} rows/s, "
                f"without {off['rows_per_s']:,.0f} rows/s, ratio {ratios[-1]:.3f}, "
                f"interval {on['profile.interval_ms']:.1f} ms",
                flush=True,
            )
        med, lo, hi = median_ci(ratios, seed=1)
        cpu_per_s = sum(sampler_cpu) / sum(sampled_s)
        print()
        print(f"server: {applied}, {args.sessions} sessions x {args.rows // args.sessions:,} rows, "
              f"sampler every {args.interval_ms:g} ms, {args.pairs} pairs in {time.perf_counter() - t0:.0f} s")
        print(f"rows/s with the sampler:    median {statistics.median(on_rates):,.0f}")
        print(f"rows/s without the sampler: median {statistics.median(off_rates):,.0f}")
        print(f"throughput ratio with/without (median of pairs): {med:.3f}  95% CI [{lo:.3f}, {hi:.3f}]")
        print(f"  -> cost {100 * (1 - med):+.1f}%  95% CI [{100 * (1 - hi):+.1f}%, {100 * (1 - lo):+.1f}%]")
        print(f"sampler's own CPU (thread + backend): {1000 * cpu_per_s:.1f} ms per second sampled "
              f"= {100 * cpu_per_s / os.cpu_count():.2f}% of this machine's {os.cpu_count()} CPUs")
    finally:
        engine.stop()


if __name__ == "__main__":
    main()
