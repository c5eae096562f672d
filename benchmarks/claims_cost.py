"""What checking a cell's claims costs (issue 12): the time of whole mbrc cells
(apply, read back, prepare, evict, prove the cold start, scan, prove direct
I/O, cross-check) with the checks and without them, on one embedded
PostgreSQL 18, interleaved.

The checks are the four calls of claims.py the runner makes per cell
(check_settings, check_cold_start, check_direct_io, check_metrics); "without"
replaces them with no-ops. Cells come in pairs, the order alternating
(with/without, without/with, ...), every pair on the same setting, so that drift
hits both alike. The figure is the median over pairs of (time with) / (time
without) with a 95% bootstrap interval: the cost of the checks is ratio - 1.
A cell of this size varies by several per cent from one run to the next, so
the script also times the checks themselves inside each checked cell (a clock
around each of the four calls): their own share of the cell, a second figure
that the neighbours' noise cannot blur.

    python benchmarks/claims_cost.py --pairs 24
    BLOCKLAB_CACHE=/var/tmp/mine python benchmarks/claims_cost.py --rows 3000000 --pairs 16
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path
from typing import Any

from blocklab import claims
from blocklab.analysis.stats import median_ci
from blocklab.experiment import prepare
from blocklab.plan import Cell, Setting
from blocklab.runner import SilentReporter, run_cell
from blocklab.spec import spec_from_dict

CHECKS = ("check_settings", "check_cold_start", "check_direct_io", "check_metrics")


def _cell_seconds(exp: Any, value: int, index: int) -> tuple[float, str]:
    cell = Cell(index=index, block=0, setting=Setting((("multiblock_read", value),)))
    t0 = time.perf_counter()
    row = run_cell(exp, cell, SilentReporter())
    return time.perf_counter() - t0, row.status


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=24)
    parser.add_argument("--rows", type=int, default=3_000_000, help="rows of the scan table (the mbrc recipe's)")
    parser.add_argument("--cache", type=Path, default=Path(os.environ.get("BLOCKLAB_CACHE", "/var/tmp/blocklab-claims-cost")))
    args = parser.parse_args()

    raw = {"engine": {"kind": "postgres", "settings": {"pg.io_max_combine_limit": 128, "direct_io": True}},
           "dataset": {"rows": args.rows}, "workload": {"kind": "full_scan"},
           "knobs": {"multiblock_read": [1, 4, 16, 64]}, "measure": {"repeats": 1, "seed": 1}}
    exp = prepare(spec_from_dict(raw, "claims_cost", {}), "", "claims_cost", cache_dir=args.cache)
    real = {name: getattr(claims, name) for name in CHECKS}
    spent = [0.0]  # seconds inside the checks during the current cell

    def timed(check: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return check(*args, **kwargs)
            finally:
                spent[0] += time.perf_counter() - t0
        return call

    def checks(on: bool) -> None:
        for name in CHECKS:
            setattr(claims, name, timed(real[name]) if on else (lambda *a, **k: None))

    try:
        exp.engine.start()
        exp.engine.apply(exp.fixed)
        checks(True)
        _cell_seconds(exp, 16, 0)  # builds the table once, outside the figures
        ratios, with_s, without_s, own_share = [], [], [], []
        values = [1, 4, 16, 64]
        for pair in range(args.pairs):
            value = values[pair % len(values)]
            order = (True, False) if pair % 2 == 0 else (False, True)
            seconds = {}
            for on in order:
                checks(on)
                spent[0] = 0.0
                seconds[on], status = _cell_seconds(exp, value, pair)
                if on:
                    own_share.append(spent[0] / seconds[on])
                    if status != "ok":
                        print(f"pair {pair}: the checked cell was {status}")
            with_s.append(seconds[True])
            without_s.append(seconds[False])
            ratios.append(seconds[True] / seconds[False])
            print(f"pair {pair + 1:2d} multiblock_read={value:3d}: with {seconds[True]:.3f} s, without {seconds[False]:.3f} s, ratio {ratios[-1]:.3f}")
    finally:
        checks(True)
        exp.engine.stop()
    mid, lo, hi = median_ci(ratios, seed=1)
    print(f"\ncells of {args.rows:,} rows, direct I/O, cold: median with {statistics.median(with_s):.3f} s, "
          f"without {statistics.median(without_s):.3f} s per cell")
    print(f"time with checks / without, median of {len(ratios)} pairs: {mid:.4f} [{lo:.4f}, {hi:.4f}] "
          f"(cost {100 * (mid - 1):+.2f}%)")
    share, share_lo, share_hi = median_ci(own_share, seed=1)
    print(f"the checks' own time inside the checked cells, median of {len(own_share)}: "
          f"{100 * share:.2f}% [{100 * share_lo:.2f}, {100 * share_hi:.2f}] of the cell")


if __name__ == "__main__":
    main()
