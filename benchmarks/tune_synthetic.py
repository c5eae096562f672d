"""The tune's search on the synthetic surface of tests/test_tune.py, over many seeds.

The test asks 6 of its first 10 seeded tunes within 3% of the optimum and none below
0.96; this counts the same over N seeds (126 configurations, 5% noise, 150 cells),
so a change to the search rules can be judged on more than ten draws.

    python benchmarks/tune_synthetic.py --seeds 100
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from test_tune import OPTIMUM, synthetic_tune, truth  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=100)
    args = parser.parse_args()
    ratios = []
    for seed in range(args.seeds):
        search, found, _ = synthetic_tune(seed)
        ratios.append(truth(search.trials[found.winner].config) / OPTIMUM)
    print(f"within 3% of the optimum: {sum(r >= 0.97 for r in ratios)} of {len(ratios)} "
          f"(first 10: {sum(r >= 0.97 for r in ratios[:10])}, their minimum {min(ratios[:10]):.3f}); "
          f"minimum {min(ratios):.3f}, median {statistics.median(ratios):.3f}")


if __name__ == "__main__":
    main()
