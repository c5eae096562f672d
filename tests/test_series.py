"""A single run's interval from its own per-second series (batch means after an MSER-5 warm-up),
and the optional `series` of a result row."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from blocklab.analysis.series import (
    DRIFT_LIMIT,
    batch_means_interval,
    drift,
    mser_truncation,
    row_series_interval,
)
from blocklab.analysis.summary import summarise
from blocklab.results import ResultRow, ResultsError


def ar1(rng, n, mean, sd, phi):
    """An AR(1) series around `mean`: each second leans on the one before (a
    checkpoint or a neighbour's burst lasts several seconds)."""
    x = np.empty(n)
    x[0] = rng.normal(0, sd)
    innov = sd * math.sqrt(1 - phi**2)
    for i in range(1, n):
        x[i] = phi * x[i - 1] + rng.normal(0, innov)
    return mean + x


def test_batch_means_cover_the_true_mean_of_correlated_seconds_and_naive_seconds_do_not():
    rng = np.random.default_rng(1)
    covered = naive_covered = 0
    trials = 300
    for _ in range(trials):
        x = ar1(rng, 120, 10_000.0, 800.0, 0.6)
        iv = batch_means_interval(np.arange(120.0), x)
        assert iv is not None
        covered += iv.ci_low <= 10_000.0 <= iv.ci_high
        se = x.std(ddof=1) / math.sqrt(x.size)  # as if the seconds were independent
        naive_covered += abs(x.mean() - 10_000.0) <= 1.98 * se
    # nominal 95%: 285 of 300; the per-second interval, blind to the
    # correlation, covers about two thirds
    assert covered >= 270, covered
    assert naive_covered < 250, naive_covered


def test_the_warm_up_ramp_is_left_out():
    rng = np.random.default_rng(2)
    ramp = np.linspace(2_000.0, 10_000.0, 15)  # 15 s of connections opening and the cache filling
    x = np.concatenate([ramp, ar1(rng, 85, 10_000.0, 300.0, 0.3)])
    assert 10 <= mser_truncation(x) <= 25
    iv = batch_means_interval(np.arange(100.0), x)
    assert iv is not None and 10.0 <= iv.warmup_s <= 25.0
    assert iv.ci_low <= 10_000.0 <= iv.ci_high
    assert x.mean() < iv.ci_low  # the plain mean, ramp included, is biased low


def test_strongly_correlated_batches_are_merged():
    rng = np.random.default_rng(3)
    x = ar1(rng, 60, 100.0, 10.0, 0.97)
    iv = batch_means_interval(np.arange(60.0), x)
    assert iv is not None
    assert iv.batches in (5, 10)
    if iv.batches == 5:
        assert iv.batch_size >= 2 * 3


def test_short_series_have_no_interval_and_bad_ones_are_refused():
    assert batch_means_interval(range(10), [1.0] * 10) is None  # fewer than 5 batches of 3 s
    with pytest.raises(ValueError, match="'t' has 3"):
        batch_means_interval([0, 1, 2], [1.0, 2.0])
    with pytest.raises(ValueError, match="increase"):
        batch_means_interval([0, 2, 1] + list(range(3, 40)), [1.0] * 40)
    with pytest.raises(ValueError, match="non-finite"):
        batch_means_interval(range(40), [1.0] * 39 + [math.nan])
    assert row_series_interval({}, "iops") is None
    assert row_series_interval({"t": [0.0], "mb_per_s": [1.0]}, "iops") is None


def test_a_constant_series_has_a_zero_width_interval():
    iv = batch_means_interval(np.arange(40.0), np.full(40, 7.0))
    assert iv is not None and iv.ci_low == iv.ci_high == 7.0


# --------------------------------------------------------------------------
# the row format


def _row(cell, sessions, iops, series=None, status="ok"):
    return ResultRow(cell=cell, block=0, settings={"sessions": sessions}, applied={}, metrics={"iops": iops},
                     status=status, cell_id=f"b0:sessions={sessions}", series=series or {})


def test_series_is_written_only_when_present_and_read_back():
    plain = json.loads(_row(0, 1, 100.0).to_json())
    assert "series" not in plain
    with_series = _row(1, 2, 200.0, {"t": [0.0, 1.0], "iops": [190.0, 210.0]})
    data = json.loads(with_series.to_json())
    assert data["series"] == {"t": [0.0, 1.0], "iops": [190.0, 210.0]}
    assert ResultRow.from_dict(data) == with_series
    assert ResultRow.from_dict(plain).series == {}
    data["series"] = {"t": "soon"}
    with pytest.raises(ResultsError, match="'series' must map names to lists of numbers"):
        ResultRow.from_dict(data)


def test_summary_uses_the_series_for_a_setting_with_exactly_one_row():
    rng = np.random.default_rng(4)
    t = list(np.arange(60.0))
    one = _row(0, 1, 10_000.0, {"t": t, "iops": list(ar1(rng, 60, 10_000.0, 500.0, 0.5))})
    two = [_row(1, 8, 30_000.0, {"t": t, "iops": list(ar1(rng, 60, 30_000.0, 500.0, 0.5))}),
           _row(2, 8, 31_000.0, {"t": t, "iops": list(ar1(rng, 60, 31_000.0, 500.0, 0.5))})]
    two = [ResultRow(**{**r.__dict__, "block": i}) for i, r in enumerate(two)]
    labels = ["sessions=1", "sessions=8"]
    summary = summarise([one, *two], metric="iops", goal="max", setting_labels=labels,
                        settings_by_label={"sessions=1": {"sessions": 1}, "sessions=8": {"sessions": 8}}, unit="IOPS")
    s1, s8 = summary["settings"]["sessions=1"], summary["settings"]["sessions=8"]
    assert s1["interval_source"] == "series" and s1["series_interval"]["batches"] >= 5
    assert s1["ci_low"] < 10_000.0 < s1["ci_high"] and s1["ci_high"] - s1["ci_low"] < 2_000.0
    assert s8["interval_source"] == ""  # two rows: the usual interval over runs, not a series
    alone = summarise([one], metric="iops", goal="max", setting_labels=["sessions=1"],
                      settings_by_label={"sessions=1": {"sessions": 1}}, unit="IOPS")
    assert alone["verdict"].startswith("Only setting = sessions=1 was measured: ") and "[" in alone["verdict"]
    assert any("per-second series" in line for line in alone["explain"])
    no_series = summarise([_row(0, 1, 10_000.0)], metric="iops", goal="max", setting_labels=["sessions=1"],
                          settings_by_label={}, unit="IOPS")
    assert no_series["settings"]["sessions=1"]["ci_low"] == 10_000.0  # no series: no interval, as before


# ---------------------------------------------------------------------- drift of a timed point
def test_a_steady_noisy_point_is_not_drifting_and_a_trend_is():
    rng = np.random.default_rng(12)
    t = np.arange(1, 61, dtype=float)
    steady = drift(t, ar1(rng, 60, 10_000, 800, 0.5), "device_read_iops")
    assert steady is not None and not steady.drifting, steady
    assert abs(steady.change) < DRIFT_LIMIT
    rising = drift(t, 10_000 * (1 + 0.5 * t / 60) + rng.normal(0, 300, 60), "device_read_iops")
    assert rising is not None and rising.drifting and rising.change > 0.15, rising  # MSER takes half a ramp as warm-up: still +19% after it
    assert rising.describe().startswith("still drifting: device read iops +")
    falling = drift(t, 10_000 * (1 - 0.4 * t / 60) + rng.normal(0, 300, 60), "device_read_iops")
    assert falling is not None and falling.drifting and falling.change < -0.15, falling


def test_a_warm_up_is_left_out_before_the_drift_is_judged():
    rng = np.random.default_rng(3)
    t = np.arange(1, 41, dtype=float)
    x = np.concatenate([np.linspace(2_000, 9_000, 8), 10_000 + rng.normal(0, 200, 32)])  # a ramp, then flat
    found = drift(t, x, "device_read_iops")
    assert found is not None and not found.drifting, found
    assert 5 <= found.warmup_s <= 15


def test_a_short_or_empty_series_is_not_judged():
    assert drift([1, 2, 3, 4, 5], [5, 6, 7, 8, 9], "x") is None  # under 10 s
    assert drift(np.arange(1, 31.0), np.zeros(30), "x") is None  # nothing read: no relative change
    assert drift([1, 2, 3], [1, 2], "x") is None  # unequal lengths


def test_a_drifting_point_is_flagged_but_counts():
    from blocklab.claims import CellChecks, check_steady

    t = list(range(1, 31))
    checks = CellChecks()
    steady = check_steady({"t": t, "device_read_iops": [1000 + 40 * i for i in t]}, "device_read_iops", checks)
    assert steady is not None and steady["drifting"] and steady["judged"]
    assert checks.status == "ok" and checks.flags and checks.flags[0].startswith("still drifting")
    short = check_steady({"t": [1, 2, 3], "device_read_iops": [1, 2, 3]}, "device_read_iops", CellChecks())
    assert short is not None and short["judged"] is False and "too short" in short["why"]
