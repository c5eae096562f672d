"""Refine search against the exhaustive sweep of multiblock_read 1..128, same server, one run.

The exhaustive sweep measures every value 1..128 (`repeats` each); the refine
search starts from powers of two and bisects around the best. The figures:
how close the refine search's best is to the exhaustive best (judged by the
exhaustive medians, so both are measured on the same footing) and what share
of the exhaustive scans it spent. Targets: within 2%, at most 25%.

    python benchmarks/search.py --rows 1000000 --repeats 3
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from pathlib import Path

from blocklab.results import RunDir
from blocklab.runner import SilentReporter, prepare, run
from blocklab.spec import spec_from_dict


def experiment(rows: int, repeats: int, values: list[int], search: str, seed: int) -> dict:
    return {
        "name": f"search-{search}",
        "engine": {"kind": "postgres", "settings": {"pg.io_max_combine_limit": 128, "direct_io": True}},
        "dataset": {"rows": rows},
        "workload": {"kind": "full_scan"},
        "knobs": {"multiblock_read": values},
        "measure": {"repeats": repeats, "seed": seed, "search": search, "cache": "cold"},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="blocklab-search-", dir="/var/tmp"))
    os.chmod(work, 0o755)
    try:
        summaries = {}
        cells = {}
        for search, values in (("grid", list(range(1, 129))), ("refine", [1, 128])):
            raw = experiment(args.rows, args.repeats, values, search, args.seed)
            exp = prepare(spec_from_dict(raw, "benchmark", {}), "", "benchmark", cache_dir=work / "cache")
            run_dir = RunDir(work / search)
            summaries[search] = run(exp, run_dir, SilentReporter())
            cells[search] = len(run_dir.rows())
            print(f"{search:7s}: {cells[search]} scans, best multiblock_read = {summaries[search]['best']['multiblock_read']}", flush=True)
        exhaustive = summaries["grid"]["medians"]
        best_exhaustive = max(exhaustive.values())
        refine_best = summaries["refine"]["best_label"]
        refine_on_exhaustive = exhaustive[refine_best]
        print(
            f"\nexhaustive best {summaries['grid']['best_label']} = {best_exhaustive:,.0f} rows/s; "
            f"refine's best {refine_best} measures {refine_on_exhaustive:,.0f} rows/s in the exhaustive sweep "
            f"= {refine_on_exhaustive / best_exhaustive:.1%} of the best (target >= 98%)"
        )
        print(f"refine spent {cells['refine']} of {cells['grid']} scans = {cells['refine'] / cells['grid']:.1%} (target <= 25%)")
        # how far apart neighbouring values land in the exhaustive sweep itself: the
        # noise floor any "within x% of the best" judgement stands on
        by_value = {int(k.split("=")[1]): v for k, v in exhaustive.items()}
        values = sorted(by_value)
        steps = sorted(abs(by_value[a] - by_value[b]) / by_value[a] for a, b in zip(values, values[1:]))
        print(f"neighbouring values differ by a median {steps[len(steps) // 2]:.1%} in the exhaustive sweep")
        smooth = {v: sum(by_value[w] for w in values if abs(w - v) <= 2) / sum(1 for w in values if abs(w - v) <= 2) for v in values}
        refine_value = int(refine_best.split("=")[1])
        print(
            f"smoothed over +-2 values: exhaustive best {max(smooth, key=smooth.get)} = {max(smooth.values()):,.0f}, "
            f"refine's best {refine_value} = {smooth[refine_value]:,.0f} ({smooth[refine_value] / max(smooth.values()):.1%})"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
