"""The optimiser that proposes configurations: Optuna's TPE through its ask-and-tell API.

blocklab measures and judges; Optuna only proposes. Each proposal is a trial
asked with the space's distributions and told the value the race measured for
it (its within-block log ratio to the default, larger is better). A set of
numbers is ordinal: the trial's parameter is the index into the sorted values,
so TPE models "larger" and "smaller"; strings and booleans are categorical;
a range is an integer distribution (log-scaled when asked).

Why Optuna (README, "blocklab tune"): maintained by a large team with frequent
releases, pure Python (SMAC needs pyrfr and its SWIG-built random forest, and
Dask), categorical and conditional spaces by define-by-run, ask-and-tell as a
first-class API, importance evaluators (PED-ANOVA without extra packages; its
fANOVA needs scikit-learn, which blocklab does not install).

Everything is seeded and every call is made in the same order from the same
rows, so a resumed tune asks the same questions and gets the same proposals.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Mapping

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, IntDistribution
from optuna.trial import TrialState

from .space import Dimension

optuna.logging.set_verbosity(logging.WARNING)


class Optimiser:
    """Ask for configurations, tell their measured values; importance at the end."""

    def __init__(self, dimensions: list[Dimension], seed: int, startup: int):
        self.dimensions = dimensions
        self.distributions = {d.name: _distribution(d) for d in dimensions}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=startup, multivariate=True, constant_liar=True)
        self.study = optuna.create_study(direction="maximize", sampler=sampler)
        self._open: dict[int, optuna.trial.Trial] = {}

    def ask(self) -> tuple[int, dict[str, object]]:
        """A new trial's number and its configuration (knob -> value)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            trial = self.study.ask(self.distributions)
        self._open[trial.number] = trial
        return trial.number, self.config_of(trial.params)

    def tell(self, number: int, value: float | None) -> None:
        """The trial's value (None: it could not be measured)."""
        trial = self._open.pop(number)
        if value is None:
            self.study.tell(trial, state=TrialState.FAIL)
        else:
            self.study.tell(trial, value)

    def add_known(self, config: Mapping[str, object], value: float) -> None:
        """A configuration measured without a proposal (the default), so the model knows it."""
        params = self.params_of(config)
        self.study.add_trial(optuna.trial.create_trial(params=params, distributions=self.distributions, value=value))

    def config_of(self, params: Mapping[str, object]) -> dict[str, object]:
        out: dict[str, object] = {}
        for d in self.dimensions:
            value = params[d.name]
            out[d.name] = sorted(d.values)[value] if d.ordinal and isinstance(value, int) else value  # an ordinal's index
        return out

    def params_of(self, config: Mapping[str, object]) -> dict[str, object]:
        out: dict[str, object] = {}
        for d in self.dimensions:
            value = config[d.name]
            out[d.name] = sorted(d.values).index(value) if d.ordinal and isinstance(value, (int, float)) else value  # a number
        return out

    def importance(self) -> dict[str, float]:
        """Each knob's share of the variation of the told values (PED-ANOVA,
        Optuna's default evaluator); {} with too few distinct trials to say."""
        complete = [t for t in self.study.trials if t.state == TrialState.COMPLETE]
        if len(complete) < 3 or len({round(t.value or 0.0, 12) for t in complete}) < 2:
            return {}
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                found = optuna.importance.get_param_importances(self.study)
        except (RuntimeError, ValueError, ZeroDivisionError):  # degenerate trials: no importance to give
            return {}
        return {k: float(v) for k, v in found.items()}


def _distribution(d: Dimension) -> BaseDistribution:
    if d.is_range:
        assert d.low is not None and d.high is not None
        return IntDistribution(d.low, d.high, log=d.log)
    if d.ordinal:
        return IntDistribution(0, len(d.values) - 1)
    return CategoricalDistribution(list(d.values))
