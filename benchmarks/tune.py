"""`blocklab tune` against an exhaustive sweep, and against the single-run way, on the embedded PostgreSQL.

The space: pg.io_method {sync, worker} x pg.io_workers {1, 3, 8} x
multiblock_read (io_combine_limit) {1, 2, 4, 8, 16, 64} x
pg.effective_io_concurrency {1, 16, 128} = 108 configurations, cold full
scans (mbrc with small rows), direct I/O.

1. The exhaustive sweep (`blocklab run`, `repeats` randomised blocks of all
   108) gives the reference optimum (the block model's best) and the cells a
   sweep costs.
2. `runs` independent tunes (seeds 1..runs), each with a budget of 20% of the
   sweep's cells, the confirmation included (restarts priced in cells).
3. For each tune, a held-out re-measurement on a new engine instance (the
   server started again) in `heldout` new blocks of the winner, the default and
   the reference optimum: (a) the winner against the optimum (paired): within
   3% when the ratio is at least 0.97; (b) the winner's advantage over the
   default: does the held-out estimate lie in the interval the tune claimed
   for a re-measurement of that many blocks (`holds`: the claim's prediction
   interval, tune/confirm.predict, at the claim's confidence)? Beside it, for
   comparison: the held-out estimate inside the claim's confidence interval
   (`strict`: a noisy estimate against an interval meant for the true value,
   which holds less often than its confidence even when honest), and the two
   consistent (the difference of the two log ratios within its own 95%
   interval, Welch: the claim not contradicted).
4. The single-run way, side by side: the same optimiser (Optuna TPE), the same
   budget, every trial one cell, the default measured once as trial 0; its
   winner is the best single cell and its claim the ratio of two single cells.
   Held out the same way: does the held-out interval contain its claim?

Every step writes its rows in its own directory under --out; benchmark.jsonl
holds one line per run, so an interrupted benchmark continues with --out DIR.

    python benchmarks/tune.py --rows 300000 --runs 10 --out /tmp/tunebench/bench --sweep-dir /tmp/tunebench/sweep
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from scipy import stats as scipy_stats

from blocklab.analysis.paired import BlockCell, fit_blocks
from blocklab.engines.base import ApplyClass
from blocklab.experiment import prepare
from blocklab.plan import Cell, Setting
from blocklab.results import RunDir
from blocklab.runner import SilentReporter, engine_stopped_at_exit, run
from blocklab.spec import spec_from_dict
from blocklab.tune.confirm import predict
from blocklab.tune.driver import Accounts, restart_knobs_of
from blocklab.tune.optimiser import Optimiser
from blocklab.tune.session import TuneSetup, _Cells, load_tune, run_tune

KNOBS: dict[str, list[Any]] = {
    "pg.io_method": ["sync", "worker"],
    "pg.io_workers": [1, 3, 8],
    "multiblock_read": [1, 2, 4, 8, 16, 64],
    "pg.effective_io_concurrency": [1, 16, 128],
}
METRIC = "rows_per_s"
SHARE = 0.20
WITHIN = 0.97


def base(rows: int) -> dict[str, Any]:
    return {
        "name": "tune-bench",
        "engine": {"kind": "postgres", "settings": {"pg.io_max_combine_limit": 128, "direct_io": True}},
        "dataset": {"table": "blocklab_scan", "rows": rows},
        "workload": {"kind": "full_scan"},
        "knobs": dict(KNOBS),
        "measure": {"repeats": 3, "cache": "cold", "metric": METRIC},
    }


def toml_text(rows: int, budget: int, default: dict[str, Any] | None = None) -> str:
    def v(x: Any) -> str:
        return json.dumps(x)

    lines = ['name = "tune-bench"', "[engine]", 'kind = "postgres"', "[engine.settings]", '"pg.io_max_combine_limit" = 128',
             "direct_io = true", "[dataset]", 'table = "blocklab_scan"', f"rows = {rows}", "[workload]", 'kind = "full_scan"', "[knobs]"]
    lines += [f'"{k}" = [{", ".join(v(x) for x in vals)}]' for k, vals in KNOBS.items()]
    lines += ["[measure]", 'cache = "cold"', f'metric = "{METRIC}"', "[tune]", f"budget = {budget}"]
    if default:
        lines.append("default = {" + ", ".join(f'"{k}" = {v(x)}' for k, x in default.items()) + "}")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ the sweep
def sweep(rows: int, repeats: int, out: Path, cache: Path | None, blocks: int | None = None) -> tuple[dict[str, Any], int]:
    """(the reference optimum's configuration, the sweep's cells). With `blocks`, only the
    sweep's first `blocks` blocks count (a sweep stopped after its last whole block), and the
    optimum is their block model's best."""
    run_dir = RunDir(out)
    if not (out / "summary.json").exists():
        raw = base(rows)
        raw["measure"]["repeats"] = repeats
        raw["measure"]["seed"] = 7
        exp = prepare(spec_from_dict(raw, "benchmark", {}), "", "benchmark", cache_dir=cache)
        run(exp, run_dir, SilentReporter())
    if blocks is None:
        summary = json.loads((out / "summary.json").read_text())
        return summary["best"], len([r for r in run_dir.rows()])
    measured = sweep_rows(out, blocks)
    complete = {r.block for r in measured}
    if complete != set(range(blocks)) or any(sum(1 for r in measured if r.block == b) < len(configs_of_space()) for b in complete):
        raise SystemExit(f"--sweep-blocks {blocks}: {out} does not hold {blocks} whole blocks")
    configs = {str(k): {n: r.settings[n] for n in KNOBS} for r in measured for k in [space_label(r.settings)]}
    model = fit_blocks([BlockCell(r.block, space_label(r.settings), float(r.metrics[METRIC])) for r in measured
                        if r.ok and r.metrics.get(METRIC, 0) > 0])
    best = max(model.levels, key=lambda k: model.levels[k])
    return configs[str(best)], len(measured)


def sweep_rows(sweep_dir: Path, blocks: int | None) -> list[Any]:
    """The sweep's rows, of its first `blocks` blocks when given."""
    return [r for r in RunDir(sweep_dir).rows() if blocks is None or r.block < blocks]


def configs_of_space() -> list[tuple[Any, ...]]:
    import itertools

    return list(itertools.product(*KNOBS.values()))


def label_of_config(config: dict[str, Any]) -> str:
    return space_label(config)


def space_label(settings: dict[str, Any]) -> str:
    return Setting(tuple((k, settings[k]) for k in KNOBS)).label


def sharpen(rows: int, sweep_dir: Path, top: int, blocks: int, out: Path, cache: Path | None,
            sweep_blocks: int | None = None) -> dict[str, Any]:
    """The sweep's best is the luckiest of 108 noisy estimates. Its `top` best by the
    block model, and the default, are measured again in `blocks` fresh blocks on a new
    engine instance; the best of those by their own block model is the reference
    optimum (its choice no longer rides on the noise that ranked it). Kept in
    out/reference.json."""
    saved = out / "reference.json"
    if saved.exists():
        return dict(json.loads(saved.read_text())["optimum"])
    text = toml_text(rows, 64)
    setup = load_tune("benchmark", seed=7, cache_dir=cache, text=text, source="benchmark-reference")
    names = [d.name for d in setup.dimensions]
    configs: dict[str, dict[str, Any]] = {}
    cells = []
    for r in sweep_rows(sweep_dir, sweep_blocks):
        if r.ok and r.metrics.get(METRIC, 0) > 0:
            config = {k: r.settings[k] for k in names}
            label = label_of(setup, config)
            configs[label] = config
            cells.append(BlockCell(r.block, label, float(r.metrics[METRIC])))
    model = fit_blocks(cells)
    ranked = sorted(model.levels, key=lambda k: -model.levels[k])[:top]
    entrants = {str(k): configs[str(k)] for k in ranked}
    entrants[label_of(setup, setup.default)] = setup.default
    held = measure_blocks(setup, entrants, blocks, 77, out / "reference")
    again = fit_blocks(held)
    best = max(again.levels, key=lambda k: again.levels[k])
    info = {"optimum": configs.get(str(best), setup.default), "label": best, "top": [str(k) for k in ranked],
            "sweep_levels": {str(k): model.levels[k] for k in ranked},
            "again_levels": {str(k): v for k, v in again.levels.items()}, "blocks": blocks}
    saved.write_text(json.dumps(info, indent=1))
    return dict(info["optimum"])


# ------------------------------------------------------------------ held-out blocks
def measure_blocks(setup: TuneSetup, configs: dict[str, dict[str, Any]], blocks: int, seed: int, out: Path) -> list[BlockCell]:
    """`blocks` new blocks of these configurations (name -> config) on the setup's engine,
    started afresh: each block holds each once, in a random order."""
    exp = setup.exp
    run_dir = RunDir(out)
    run_dir.create()
    cells = _Cells(setup, run_dir, lambda _: None)
    names = [d.name for d in setup.dimensions]
    measured: list[BlockCell] = []
    unique = {}
    for name, config in configs.items():
        unique.setdefault(Setting(tuple((k, config[k]) for k in names)).label, (name, config))
    with engine_stopped_at_exit(exp.engine, run_dir):
        exp.engine.apply(exp.fixed)
        rng = random.Random(seed)
        for block in range(blocks):
            order = list(unique.items())
            rng.shuffle(order)
            for label, (_name, config) in order:
                setting = Setting(tuple((k, config[k]) for k in names))
                rows = cells.measure(Cell(0, block, setting), {"phase": "heldout"})
                ok = [r for r in rows if r.ok and r.metrics.get(METRIC, 0) > 0]
                if ok:
                    measured.append(BlockCell(block, label, float(ok[-1].metrics[METRIC])))
    return measured


def paired(cells: list[BlockCell], a: str, b: str) -> dict[str, Any]:
    """a / b from the blocks holding both: ratio, 95% interval, log se, df."""
    if a == b:
        return {"ratio": 1.0, "low": 1.0, "high": 1.0, "log_se": 0.0, "df": math.inf, "blocks": len({c.block for c in cells})}
    effect = fit_blocks([c for c in cells if c.key in (a, b)], [a, b]).effect(a, b)
    ratio, low, high = effect.interval(0.05)
    return {"ratio": ratio, "low": low, "high": high, "log_se": effect.se, "df": effect.df, "blocks": effect.blocks}


def label_of(setup: TuneSetup, config: dict[str, Any]) -> str:
    return Setting(tuple((d.name, config[d.name]) for d in setup.dimensions)).label


# ------------------------------------------------------------------ the single-run way
def single_run(setup: TuneSetup, budget: int, seed: int, out: Path) -> dict[str, Any]:
    """The same optimiser, the same budget, every trial one cell; the default once first."""
    exp = setup.exp
    run_dir = RunDir(out)
    run_dir.create()
    cells = _Cells(setup, run_dir, lambda _: None)
    names = [d.name for d in setup.dimensions]
    restart = restart_knobs_of(exp.knob_infos, names)
    accounts = Accounts(exp.engine.change_cost(ApplyClass.RESTART, restart) if restart else 0.0, 0.5)
    optimiser = Optimiser(setup.dimensions, seed, startup=10)
    values: dict[str, float] = {}
    configs: dict[str, dict[str, Any]] = {}
    last_key = None
    with engine_stopped_at_exit(exp.engine, run_dir):
        exp.engine.apply(exp.fixed)
        trial = 0
        default_label = label_of(setup, setup.default)
        pending: list[tuple[int | None, dict[str, Any]]] = [(None, setup.default)]
        while accounts.spent_cells < budget:
            number, config = pending.pop() if pending else optimiser.ask()
            label = label_of(setup, config)
            setting = Setting(tuple((k, config[k]) for k in names))
            key = tuple(str(config[k]) for k in restart)
            rows = cells.measure(Cell(0, trial, setting), {"phase": "single", "trial": trial})
            for i, row in enumerate(rows):
                accounts.add(row, restarted=i == 0 and last_key is not None and key != last_key)
            last_key = key
            trial += 1
            ok = [r for r in rows if r.ok and r.metrics.get(METRIC, 0) > 0]
            value = float(ok[-1].metrics[METRIC]) if ok else None
            if value is not None and label not in values:
                values[label], configs[label] = value, config
            if number is None:
                if value is not None:
                    optimiser.add_known(config, 0.0)
                continue
            told = math.log(value / values[default_label]) if value is not None and default_label in values else None
            optimiser.tell(number, told)
    winner = max(values, key=lambda k: values[k])
    return {"winner": winner, "winner_config": configs[winner], "claim": values[winner] / values[default_label],
            "trials": trial, "spent_cells": accounts.spent_cells}


# ------------------------------------------------------------------ judging
def consistent(claim: dict[str, Any], held: dict[str, Any]) -> bool:
    """Is the held-out advantage consistent with the claimed one (their log difference
    within its 95% interval, Welch-style degrees of freedom)?"""
    se_c, se_h = claim.get("log_se"), held.get("log_se")
    if se_c is None or se_h is None or not (math.isfinite(se_c) and math.isfinite(se_h)):
        return False
    diff = math.log(claim["ratio"]) - math.log(held["ratio"])
    se = math.sqrt(se_c**2 + se_h**2)
    if se == 0:
        return diff == 0
    df_c, df_h = max(float(claim.get("df") or 1), 1.0), max(float(held.get("df") or 1), 1.0)
    df = se**4 / (se_c**4 / df_c + se_h**4 / df_h) if se_c > 0 or se_h > 0 else 1.0
    return abs(diff) <= float(scipy_stats.t.ppf(0.975, df)) * se


def holds(claim: dict[str, Any], held: dict[str, Any]) -> bool:
    """Does the held-out estimate lie inside the interval the tune claimed for a
    re-measurement of the held-out's number of blocks (its prediction interval)?
    A claim of exactly 1 (the winner is the default) holds when the held-out ratio is 1."""
    if claim.get("log_se") == 0.0:
        return bool(claim["ratio"] == held["ratio"])
    low, high = predict(claim, int(held.get("blocks") or 0))
    return low is not None and high is not None and low <= held["ratio"] <= high


def one_run(i: int, args: argparse.Namespace, optimum: dict[str, Any], budget: int, out: Path) -> dict[str, Any]:
    seed = 1000 + i
    text = toml_text(args.rows, budget, args.default)
    cache = args.cache
    setup = load_tune("benchmark", seed=seed, cache_dir=cache, text=text, source=f"benchmark-run-{i}")
    stage(i, "tune")
    state = run_tune(setup, RunDir(out / f"tune-{i}"), say=lambda _: None)
    stage(i, "held out: the tune's winner, the default, the optimum")
    claim = state["confirmation"]["winner_vs_default"] or {"ratio": 1.0, "low": 1.0, "high": 1.0, "log_se": 0.0, "df": math.inf}
    winner_cfg = state["winner_config"]
    setup = load_tune("benchmark", seed=seed, cache_dir=cache, text=text, source=f"benchmark-heldout-{i}")
    names = {"winner": winner_cfg, "default": setup.default, "optimum": optimum}
    held = measure_blocks(setup, names, args.heldout, seed + 1, out / f"heldout-{i}")
    w, d, o = (label_of(setup, c) for c in (winner_cfg, setup.default, optimum))
    to_opt, to_default = paired(held, w, o), paired(held, w, d)
    # what the verdict recommends: the winner when the confirmation showed it better, else the default
    rec = w if state["recommended"] == state["winner"] else d
    setup = load_tune("benchmark", seed=seed, cache_dir=cache, text=text, source=f"benchmark-single-{i}")
    stage(i, "the single-run way")
    sr = single_run(setup, budget, seed, out / f"single-{i}")
    stage(i, "held out: the single-run winner, the default, the optimum")
    setup = load_tune("benchmark", seed=seed, cache_dir=cache, text=text, source=f"benchmark-single-heldout-{i}")
    sr_held = measure_blocks(setup, {"winner": sr["winner_config"], "default": setup.default, "optimum": optimum}, args.heldout,
                             seed + 2, out / f"single-heldout-{i}")
    sw = label_of(setup, sr["winner_config"])
    sr_to_opt, sr_to_default = paired(sr_held, sw, o), paired(sr_held, sw, d)
    return {
        "run": i, "seed": seed, "default": d,
        "tune": {"winner": w, "spent_cells": state["spent_cells"], "claim": claim, "heldout_to_optimum": to_opt,
                 "heldout_to_default": to_default, "rounds": state["rounds"],
                 "recommended": rec, "heldout_recommended_to_optimum": paired(held, rec, o)},
        "single": {"winner": sw, "spent_cells": sr["spent_cells"], "claim": sr["claim"], "heldout_to_optimum": sr_to_opt,
                   "heldout_to_default": sr_to_default},
    }


def pooled_to_optimum(out: Path, runs: int, optimum: str) -> dict[str, dict[str, Any]]:
    """Each configuration's ratio to the optimum from every held-out block of the benchmark
    that measured both (the tunes' and the single-run way's held-out blocks of every run,
    each run's blocks its own; not the reference's, which chose the optimum). A run's
    held-out blocks alone judge its winner to about +-5% at this noise; the configuration
    is the same whichever run chose it, so all its held-out blocks judge it together."""
    cells = []
    for i in range(runs):
        for j, name in enumerate((f"heldout-{i}", f"single-heldout-{i}")):
            if not (out / name / "results.jsonl").exists():
                continue
            for r in RunDir(out / name).rows():
                if r.ok and r.metrics.get(METRIC, 0) > 0:
                    cells.append(BlockCell((2 * i + j) * 100_000 + r.block, space_label(r.settings), float(r.metrics[METRIC])))
    return {label: paired(cells, label, optimum) for label in {c.key for c in cells}}


def stage(run_no: int, what: str) -> None:
    print(f"  {time.strftime('%H:%M:%S')} run {run_no}: {what}", flush=True)


def judge(line: dict[str, Any], sweep_cells: int, pooled: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    t, s = line["tune"], line["single"]
    claim, held = t["claim"], t["heldout_to_default"]
    pooled = pooled or {}
    # lines written before the recommendation was judged: it was the search's winner's figure then
    t.setdefault("recommended", t["winner"])
    t.setdefault("heldout_recommended_to_optimum", t["heldout_to_optimum"])

    def pooled_within(label: str) -> bool:
        return label in pooled and pooled[label]["ratio"] >= WITHIN

    return {
        "tune_within_pooled": pooled_within(t["winner"]),
        "recommended_within_pooled": pooled_within(t["recommended"]),
        "single_within_pooled": pooled_within(s["winner"]),
        "tune_within": t["heldout_to_optimum"]["ratio"] >= WITHIN,
        "tune_not_worse": (t["heldout_to_optimum"]["high"] or 0) >= WITHIN,
        "recommended_within": t["heldout_recommended_to_optimum"]["ratio"] >= WITHIN,
        "recommended_not_worse": (t["heldout_recommended_to_optimum"]["high"] or 0) >= WITHIN,
        "recommended_default": t["recommended"] == line["default"],
        "tune_share": t["spent_cells"] / sweep_cells,
        "tune_trivial": claim.get("log_se") == 0.0,  # the winner was the default: the claim is exactly 1
        "tune_holds": holds(claim, held),
        "tune_strict": claim.get("low") is not None and claim["low"] <= held["ratio"] <= claim["high"],
        "tune_consistent": consistent(claim, held),
        "single_within": s["heldout_to_optimum"]["ratio"] >= WITHIN,
        "single_hold": s["heldout_to_default"]["low"] <= s["claim"] <= s["heldout_to_default"]["high"],
        "single_loss30": s["heldout_to_default"]["ratio"] < 0.7 * s["claim"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=300_000)
    parser.add_argument("--repeats", type=int, default=3, help="blocks of the exhaustive sweep")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--heldout", type=int, default=6, help="held-out blocks per run")
    parser.add_argument("--out", type=Path, help="where every step's rows go (required but with --write-space)")
    parser.add_argument("--sweep-dir", type=Path, help="an exhaustive sweep already run (its run directory)")
    parser.add_argument("--sweep-blocks", type=int, help="count only the sweep's first N blocks (a sweep stopped after "
                        "its Nth whole block): they are the sweep whose cells the budget is a share of")
    parser.add_argument("--cache", type=Path, help="the engine's cache directory (BLOCKLAB_CACHE otherwise)")
    parser.add_argument("--sharpen-top", type=int, default=0,
                        help="measure the sweep's N best and the default again in --sharpen-blocks fresh blocks; the "
                             "reference optimum is the best of those (0: the sweep's own best)")
    parser.add_argument("--sharpen-blocks", type=int, default=6)
    parser.add_argument("--default", type=json.loads, help='the configuration to beat as JSON, e.g. \'{"pg.io_method": "sync", '
                        '"multiblock_read": 1}\' (the engine\'s defaults otherwise)')
    parser.add_argument("--write-space", type=Path, help="write the space as an experiment file of --rows rows and "
                        "--repeats blocks (for `blocklab run`, or benchmarks/against_commit.py) and stop")
    args = parser.parse_args()
    if args.write_space:
        text = toml_text(args.rows, 0).split("[tune]")[0].replace("[measure]", f"[measure]\nrepeats = {args.repeats}\nseed = 7")
        args.write_space.write_text(text)
        print(f"written: {args.write_space}")
        return
    if args.out is None:
        parser.error("--out DIR is required (where the benchmark's rows go)")
    args.out.mkdir(parents=True, exist_ok=True)
    optimum, sweep_cells = sweep(args.rows, args.repeats, args.sweep_dir or args.out / "sweep", args.cache, args.sweep_blocks)
    budget = int(SHARE * sweep_cells)
    print(f"sweep: {sweep_cells} cells, optimum {optimum}; tune budget {budget} cells ({SHARE:.0%})", flush=True)
    if args.sharpen_top:
        optimum = sharpen(args.rows, args.sweep_dir or args.out / "sweep", args.sharpen_top, args.sharpen_blocks, args.out, args.cache,
                          args.sweep_blocks)
        print(f"reference optimum after {args.sharpen_blocks} fresh blocks of the sweep's {args.sharpen_top} best and the "
              f"default: {optimum}", flush=True)
    log = args.out / "benchmark.jsonl"
    done = [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []
    for i in range(len(done), args.runs):
        line = one_run(i, args, optimum, budget, args.out)
        with log.open("a") as f:
            f.write(json.dumps(line) + "\n")
        done.append(line)
        j = judge(line, sweep_cells)
        print(f"run {i}: tune {line['tune']['winner']} -> {line['tune']['heldout_to_optimum']['ratio']:.3f} of optimum "
              f"(recommended {line['tune']['recommended']}: {line['tune']['heldout_recommended_to_optimum']['ratio']:.3f}), "
              f"{j['tune_share']:.0%} of the sweep, claim {line['tune']['claim']['ratio']:.3f} held-out "
              f"{line['tune']['heldout_to_default']['ratio']:.3f} holds={j['tune_holds']} strict={j['tune_strict']} "
              f"consistent={j['tune_consistent']}; "
              f"single {line['single']['heldout_to_optimum']['ratio']:.3f} of optimum, claim {line['single']['claim']:.3f} "
              f"held-out {line['single']['heldout_to_default']['ratio']:.3f} hold={j['single_hold']}", flush=True)
    pooled = pooled_to_optimum(args.out, len(done), label_of_config(optimum))
    judged = [judge(x, sweep_cells, pooled) for x in done]
    n = len(judged)

    def count(key: str) -> str:
        return f"{sum(1 for j in judged if j[key])} of {n}"

    print(f"tune's recommendation (the winner if shown better than the default, else the default; the default "
          f"{count('recommended_default')}): within 3% of the optimum {count('recommended_within')}; not shown worse than "
          f"{WITHIN}: {count('recommended_not_worse')}")
    print(f"judged by each configuration's held-out blocks of all runs together: the recommendation within 3% "
          f"{count('recommended_within_pooled')}, the search's winner {count('tune_within_pooled')}, the single-run way's "
          f"winner {count('single_within_pooled')}")
    for label, r in sorted(pooled.items(), key=lambda x: -x[1]["ratio"]):
        chosen = [f"tune {x['run']}" for x in done if x["tune"]["recommended"] == label] + \
                 [f"single {x['run']}" for x in done if x["single"]["winner"] == label]
        print(f"  {r['ratio']:.3f} [{r['low']:.3f}, {r['high']:.3f}] of the optimum in {r['blocks']} blocks: {label}"
              f"{' (recommended/chosen by ' + ', '.join(chosen) + ')' if chosen else ''}")
    print(f"tune's search winner: within 3% of the optimum (held-out paired ratio >= {WITHIN}): {count('tune_within')}; not shown worse than "
          f"{WITHIN}: {count('tune_not_worse')}; median share of the sweep's cells {statistics.median(j['tune_share'] for j in judged):.1%} "
          f"(max {max(j['tune_share'] for j in judged):.1%})")
    real = [j for j in judged if not j["tune_trivial"]]
    print(f"tune: claimed advantage over the default holds (held-out estimate inside the claim's prediction interval for "
          f"that many blocks) {count('tune_holds')}, of the {len(real)} claims other than 'the default stays': "
          f"{sum(1 for j in real if j['tune_holds'])}; held-out estimate inside the claim's confidence interval "
          f"{count('tune_strict')}; consistent (not contradicted at 5%) {count('tune_consistent')}")
    print(f"single-run: within 3% of the optimum {count('single_within')}; its claim inside the held-out 95% interval "
          f"{count('single_hold')}; lost 30% or more of its claim {count('single_loss30')}")


if __name__ == "__main__":
    sys.exit(main())
