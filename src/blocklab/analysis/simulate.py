"""Simulated runs with a machine's own drift and noise, for A/A tests of the verdicts.

    noise = NoiseModel.from_rows(RunDir("results/mbrc-...").rows(), "rows_per_s")
    cells = simulate_cells(rng, {"A": 1.0, "B": 1.0}, blocks=10, noise=noise)
    write_run(tmp / "run", cells, metric="rows_per_s", goal="max")   # a directory `blocklab analyse` reads

A simulated value is level(setting) x drift(block) x noise(cell). By default
drift and noise are resampled from a measured run (the block effects and the
residuals of its block model), so their size and shape are this machine's,
tails included; or given as log standard deviations (normal), or as a uniform
+-range for the drift. benchmarks/aa.py and the tests use this; nothing in a
real run does.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..results import RESULTS_FILE, ResultRow, RunDir
from ..units import label_of
from .paired import BlockCell, fit_blocks

if TYPE_CHECKING:
    from ..spec import Scalar


@dataclass(frozen=True)
class NoiseModel:
    """Block drift and cell noise on the log scale.

    `drift_pool` / `noise_pool`: measured values to resample (empty: use the
    normal sds); `drift_uniform`: draw each block's factor from 1 +- this."""

    drift_sd: float
    noise_sd: float
    drift_pool: tuple[float, ...] = ()
    noise_pool: tuple[float, ...] = ()
    drift_uniform: float | None = None

    @classmethod
    def from_rows(cls, rows: Iterable[ResultRow], metric: str) -> NoiseModel:
        """The drift and noise of a measured run (ok rows, positive values).
        Residuals are scaled by sqrt(n / df): a fitted model's residuals are
        smaller than the noise that made them."""
        cells = [BlockCell(r.block, label_of(r.settings), r.metrics[metric]) for r in rows if r.ok and metric in r.metrics]
        model = fit_blocks(cells)
        if model.df < 2 or len(model.blocks) < 3:
            raise ValueError(f"a noise model needs at least 3 blocks and 2 settings; this run has {len(model.blocks)} blocks")
        residuals = np.concatenate([np.asarray(v) for v in model.residuals.values()])
        residuals = residuals * math.sqrt(residuals.size / model.df)
        drift = np.asarray(list(model.block_effects.values()))
        # the block effects carry a little cell noise too (a mean of k cells): left in, it errs on the noisy side
        return cls(
            drift_sd=float(drift.std(ddof=1)),
            noise_sd=float(residuals.std(ddof=1)),
            drift_pool=tuple(float(v) for v in drift),
            noise_pool=tuple(float(v) for v in residuals),
        )

    def describe(self) -> str:
        drift = f"+-{self.drift_uniform:.0%} uniform" if self.drift_uniform is not None else f"sd {self.drift_sd:.3f}"
        source = " (resampled from a measured run)" if self.noise_pool else ""
        return f"block drift {drift}, cell noise sd {self.noise_sd:.3f} (log scale){source}"

    def drifts(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.drift_uniform is not None:
            return np.log1p(rng.uniform(-self.drift_uniform, self.drift_uniform, n))
        if self.drift_pool:
            return rng.choice(np.asarray(self.drift_pool), n)
        return rng.normal(0.0, self.drift_sd, n)

    def noises(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.noise_pool:
            return rng.choice(np.asarray(self.noise_pool), n)
        return rng.normal(0.0, self.noise_sd, n)


def simulate_cells(
    rng: np.random.Generator,
    effects: Mapping[str, float],
    blocks: int,
    noise: NoiseModel,
    *,
    base: float = 1e7,
    first_block: int = 0,
) -> list[BlockCell]:
    """`blocks` randomised blocks of the settings in `effects` (label -> true
    factor); within a block the cells come in a fresh random order, as a run's."""
    labels = list(effects)
    cells: list[BlockCell] = []
    drift = noise.drifts(rng, blocks)
    for i in range(blocks):
        order = rng.permutation(len(labels))
        eps = noise.noises(rng, len(labels))
        for j, index in enumerate(order):
            label = labels[index]
            value = base * effects[label] * math.exp(drift[i] + eps[j])
            cells.append(BlockCell(first_block + i, label, value))
    return cells


def write_run(
    path: Path | str,
    cells: Sequence[BlockCell],
    *,
    metric: str,
    goal: str,
    knob: str = "setting",
    name: str = "simulated",
    measure: Mapping[str, object] | None = None,
    seed: int = 0,
) -> RunDir:
    """A results directory in the runner's format (plan, spec, environment,
    rows) holding `cells`; the settings are `knob` = the cells' keys. The
    summary is left for `blocklab analyse` to compute."""
    rd = RunDir(path)
    rd.create()
    values = list(dict.fromkeys(str(c.key) for c in cells))
    settings = [{knob: v} for v in values]
    plan_cells = []
    rows = []
    counter = itertools.count()
    for c in cells:
        index = next(counter)
        setting: dict[str, Scalar] = {knob: str(c.key)}
        cell_id = f"b{c.block}:{label_of(setting)}"
        plan_cells.append({"index": index, "block": c.block, "cell_id": cell_id, "settings": setting})
        rows.append(ResultRow(cell=index, block=c.block, settings=setting, applied={}, metrics={metric: c.value},
                              cell_id=cell_id, notes={"simulated": True}))
    blocks = len({c.block for c in cells})
    spec = {
        "name": name, "description": "simulated run (blocklab.analysis.simulate)", "engine": {"kind": "null", "settings": {}},
        "dataset": {"rows": 1}, "workload": {"kind": "null"}, "knobs": {knob: values},
        "measure": {"repeats": blocks, "cache": "warm", "metric": metric, "goal": goal, **(measure or {})},
    }
    rd.write_json("plan.json", {"seed": seed, "settings": settings, "apply_class": {}, "cells": plan_cells})
    rd.write_json("spec.json", {"source": "simulated", "spec": spec, "options": {}})
    rd.write_text("experiment.toml", f'name = "{name}"\n# simulated by blocklab.analysis.simulate\n')
    rd.write_json("environment.json", {"host": "simulated", "engine": "null"})
    # one write, not an fsync'd append per row: generated directories come by the thousand
    rd.write_text(RESULTS_FILE, "".join(row.to_json() + "\n" for row in rows))
    return rd
