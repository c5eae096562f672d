"""The tune's search replayed on a surface measured on the engine: many seeds in seconds.

benchmarks/tune.py judges `blocklab tune` on the engine itself, ten runs in
half an hour; too few and too slow to tell two search rules apart. This
script takes what the engine's exhaustive sweep measured (a `blocklab run`
directory of the space of benchmarks/tune.py), fits the block model to it
(each configuration's level, the cells' residual noise on the log scale, the
blocks' drift), and runs the tune's own Search and confirmation (tune/driver.py,
tune/confirm.py, unchanged) against a simulated engine with that surface and
that noise: a cell's value is exp(level + block drift + noise), a change of
io_method restarts the engine and costs what a restart cost on the engine.
The surface's "truth" is the sweep's estimate, so figures here compare search
rules with each other; the engine benchmark remains the judge of the target.

    python benchmarks/tune_replay.py --sweep-dir /var/tmp/tb/sweep1m --sweep-blocks 5 --seeds 100 \
        --default '{"pg.io_method": "sync"}'
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
from pathlib import Path
from typing import Any

from blocklab.analysis.paired import BlockCell, fit_blocks
from blocklab.plan import Cell, Setting
from blocklab.results import ResultRow, RunDir
from blocklab.tune.confirm import confirm_winner
from blocklab.tune.driver import Accounts, Search
from blocklab.tune.space import Dimension, TuneSpec, parse_budget

KNOBS: dict[str, list[Any]] = {
    "pg.io_method": ["sync", "worker"],
    "pg.io_workers": [1, 3, 8],
    "multiblock_read": [1, 2, 4, 8, 16, 64],
    "pg.effective_io_concurrency": [1, 16, 128],
}
ENGINE_DEFAULT = {"pg.io_method": "worker", "pg.io_workers": 3, "multiblock_read": 16, "pg.effective_io_concurrency": 16}
METRIC = "rows_per_s"
WITHIN = 0.97


def label(config: dict[str, Any]) -> str:
    return Setting(tuple((k, config[k]) for k in KNOBS)).label


def surface(sweep_dir: Path, blocks: int | None) -> tuple[dict[str, float], dict[str, dict[str, Any]], float, float]:
    """(level of each configuration, its configuration, residual sd, block drift sd) from the sweep."""
    rows = [r for r in RunDir(sweep_dir).rows() if (blocks is None or r.block < blocks) and r.ok and r.metrics.get(METRIC, 0) > 0]
    if not rows:
        raise SystemExit(f"--sweep-dir {sweep_dir}: no valid rows")
    configs = {label(r.settings): {k: r.settings[k] for k in KNOBS} for r in rows}
    if len(configs) < math.prod(len(v) for v in KNOBS.values()):
        raise SystemExit(f"--sweep-dir {sweep_dir}: {len(configs)} of the space's configurations have a valid cell; "
                         "the replay needs every one (a whole block at least)")
    cells = [BlockCell(r.block, label(r.settings), float(r.metrics[METRIC])) for r in rows]
    model = fit_blocks(cells)
    levels = {str(k): float(v) for k, v in model.levels.items()}
    # the blocks' drift: the mean residual of a block's cells around the levels
    by_block: dict[int, list[float]] = {}
    for c in cells:
        by_block.setdefault(c.block, []).append(math.log(c.value) - levels[str(c.key)])
    drift_sd = statistics.pstdev([statistics.fmean(v) for v in by_block.values()]) if len(by_block) > 1 else 0.0
    return levels, configs, float(model.residual_sd), drift_sd


def smoothed(levels: dict[str, float], configs: dict[str, dict[str, Any]], pairs: bool = True) -> dict[str, float]:
    """The levels as a model of the knobs' main effects and their pairwise interactions
    (least squares over the configurations): the sweep's own estimates carry its cells'
    noise (sd / sqrt(blocks) each, ~6% at 10 blocks), which would make a surface
    jagged where the engine's is flat; three-way interactions go with it."""
    import itertools

    import numpy as np

    names = list(KNOBS)
    keys = list(levels)

    def columns(config: dict[str, Any]) -> list[float]:
        onehot = {n: [1.0 if config[n] == v else 0.0 for v in KNOBS[n][1:]] for n in names}
        cols = [1.0] + [x for n in names for x in onehot[n]]
        for a, b in itertools.combinations(names, 2) if pairs else ():
            cols += [x * y for x in onehot[a] for y in onehot[b]]
        return cols

    x = np.array([columns(configs[k]) for k in keys])
    y = np.array([levels[k] for k in keys])
    theta, *_ = np.linalg.lstsq(x, y, rcond=None)
    return {k: float(v) for k, v in zip(keys, x @ theta)}


def with_reference(levels: dict[str, float], reference: Path) -> dict[str, float]:
    """The surface with the sharpened reference's levels (benchmarks/tune.py's reference.json:
    the sweep's best measured again in many fresh blocks) in place of the sweep's, moved
    onto the sweep's scale by their mean difference over the configurations both hold."""
    again = {str(k): float(v) for k, v in json.loads(reference.read_text())["again_levels"].items()}
    shared = [k for k in again if k in levels]
    if not shared:
        raise SystemExit(f"--reference {reference}: no configuration in common with the sweep")
    shift = statistics.fmean(levels[k] - again[k] for k in shared)
    return {**levels, **{k: again[k] + shift for k in shared}}


def simulated_engine(seed: int, levels: dict[str, float], noise: float, drift_sd: float, cell_s: float, restart_s: float):
    rng = random.Random(seed)
    drift: dict[int, float] = {}
    method = [None]

    def measure(cell: Cell, tag: dict[str, Any]) -> list[ResultRow]:
        config = cell.setting.as_dict()
        d = drift.setdefault(cell.block, rng.gauss(0.0, drift_sd))
        value = math.exp(levels[label(config)] + d + rng.gauss(0.0, noise))
        restarted = method[0] is not None and config["pg.io_method"] != method[0]
        method[0] = config["pg.io_method"]
        apply_s = restart_s + 0.01 if restarted else 0.01
        return [ResultRow(cell=0, block=cell.block, settings=config, applied={}, metrics={METRIC: value}, cell_id=cell.cell_id,
                          notes={"tune_s": cell_s + apply_s, "apply_s": apply_s, "tune": tag})]

    return measure


def one_tune(seed: int, budget: int, default: dict[str, Any], levels: dict[str, float], noise: float, drift_sd: float,
             cell_s: float, restart_s: float, confirm_blocks: int | None = None, candidates: int = 6,
             max_blocks: int = 3) -> dict[str, Any]:
    dims = [Dimension(k, values=tuple(v)) for k, v in KNOBS.items()]
    spec = TuneSpec(dims, parse_budget(budget), candidates=candidates, max_blocks=max_blocks, confirm_blocks=confirm_blocks)
    search = Search(spec=spec, dimensions=dims, default=default, goal="max", metric=METRIC, seed=seed,
                    restart_knobs=["pg.io_method"], measure=simulated_engine(seed, levels, noise, drift_sd, cell_s, restart_s),
                    accounts=Accounts(declared_restart_s=restart_s, estimate_cell_s=cell_s))
    found = search.run()
    # a commit before the confirmation was sized has no found.confirm_blocks (--confirm-blocks names it)
    blocks = getattr(found, "confirm_blocks", spec.confirm_blocks)
    confirmation = confirm_winner(search, found, blocks=blocks, missing=lambda _: True,
                                  new_instance=lambda: "a simulated new instance")
    best = max(levels.values())
    adv = confirmation["winner_vs_default"]
    true_adv = math.exp(levels[found.winner] - levels[found.default])
    return {"seed": seed, "winner": found.winner, "recommended": confirmation["recommended"],
            "winner_to_optimum": math.exp(levels[found.winner] - best),
            "recommended_to_optimum": math.exp(levels[str(confirmation["recommended"])] - best),
            "winner_blocks": search.trials[found.winner].blocks, "confirm_blocks": blocks, "trials": len(search.trials), "rounds": found.rounds,
            "spent": search.accounts.spent_cells, "restart_cells": search.accounts.restart_cells,
            "claim_holds": adv is None or (adv["low"] is not None and adv["low"] <= true_adv <= adv["high"])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sweep-dir", type=Path, required=True, help="the engine's exhaustive sweep (a blocklab run directory)")
    parser.add_argument("--sweep-blocks", type=int, default=None, help="count only the sweep's first N blocks")
    parser.add_argument("--budget-blocks", type=int, default=5, help="the budget is 20%% of a sweep of this many blocks (default 5)")
    parser.add_argument("--seeds", type=int, default=100)
    parser.add_argument("--candidates", type=int, default=6, help="new configurations a round (default 6)")
    parser.add_argument("--max-blocks", type=int, default=3, help="blocks a round races at most (default 3)")
    parser.add_argument("--confirm-blocks", type=int, default=None,
                        help="the confirmation's blocks (default: sized by the noise, as blocklab tune does)")
    parser.add_argument("--default", default=None, help="the default configuration's changes, JSON (the engine's default otherwise)")
    parser.add_argument("--cell-s", type=float, default=0.33, help="a cell's seconds (the sweep's median cell)")
    parser.add_argument("--restart-s", type=float, default=1.5, help="what a restart adds to a cell, seconds")
    parser.add_argument("--surface", choices=["pairs", "main", "raw"], default="pairs",
                        help="the surface: the knobs' main effects and pairwise interactions (default), main effects "
                             "only, or the sweep's own levels")
    parser.add_argument("--reference", type=Path, default=None,
                        help="benchmarks/tune.py's reference.json: its configurations' levels replace the surface's")
    parser.add_argument("--noise", type=float, default=None, help="the cells' log-scale noise (the sweep's residual sd otherwise)")
    args = parser.parse_args()
    levels, configs, noise, drift_sd = surface(args.sweep_dir, args.sweep_blocks)
    levels = levels if args.surface == "raw" else smoothed(levels, configs, pairs=args.surface == "pairs")
    if args.reference is not None:
        levels = with_reference(levels, args.reference)
    noise = args.noise if args.noise is not None else noise
    default = {**ENGINE_DEFAULT, **(json.loads(args.default) if args.default else {})}
    budget = int(0.2 * len(levels) * args.budget_blocks)
    best = max(levels, key=lambda k: levels[k])
    near = sum(1 for v in levels.values() if math.exp(v - levels[best]) >= WITHIN)
    print(f"surface: {len(levels)} configurations, optimum {best}, {near} within 3% of it; the default at "
          f"{math.exp(levels[label(default)] - levels[best]):.3f}; noise sd {noise:.3f}, drift sd {drift_sd:.3f}; budget {budget} cells",
          file=sys.stderr)
    out = [one_tune(s, budget, default, levels, noise, drift_sd, args.cell_s, args.restart_s, args.confirm_blocks,
                   args.candidates, args.max_blocks) for s in range(1, args.seeds + 1)]
    n = len(out)

    def share(key: str) -> str:
        return f"{sum(1 for o in out if o[key] >= WITHIN)}/{n}"

    print(json.dumps({
        "recommended_within": share("recommended_to_optimum"), "winner_within": share("winner_to_optimum"),
        "recommended_median": round(statistics.median(o["recommended_to_optimum"] for o in out), 3),
        "recommended_min": round(min(o["recommended_to_optimum"] for o in out), 3),
        "confirm_blocks_median": statistics.median(o["confirm_blocks"] for o in out),
        "recommended_default": sum(1 for o in out if o["recommended"] != o["winner"]),
        "claims_held": f"{sum(o['claim_holds'] for o in out)}/{n}",
        "one_block_winners": sum(1 for o in out if o["winner_blocks"] <= 1),
        "trials_median": statistics.median(o["trials"] for o in out), "rounds_median": statistics.median(o["rounds"] for o in out),
        "spent_max": round(max(o["spent"] for o in out), 1), "restart_cells_median": round(statistics.median(o["restart_cells"] for o in out), 1),
    }))


if __name__ == "__main__":
    main()
