"""The arithmetic of the family of comparisons with the best: the studentized range and the step-down."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sstats

from blocklab.analysis.family import Contrast, df_node, range_critical, step_down, studentized_range_cdf


@pytest.mark.parametrize(
    "k, df, alpha",
    [(3, 2, 0.05), (8, 14, 0.05), (8, 98, 0.05), (8, 98, 0.05 / 13), (16, 135, 0.05), (4, 1, 0.05 / 30), (64, 5, 0.05), (8, 1e6, 0.05)],
)
def test_the_range_quantile_agrees_with_scipy(k, df, alpha):
    # scipy's own takes 100-400 ms a quantile; ours is what the analysis after every cell can afford
    ours = range_critical(k, df, alpha)
    reference = sstats.studentized_range.ppf(1 - alpha, k, min(df, 1e4)) / math.sqrt(2)
    assert ours == pytest.approx(reference, rel=5e-4)
    assert studentized_range_cdf(ours * math.sqrt(2), k, df) == pytest.approx(1 - alpha, abs=1e-6)


def test_two_settings_are_students_t_and_more_settings_need_more():
    assert range_critical(2, 4, 0.05) == sstats.t.ppf(0.975, 4)  # exactly: the two-setting verdict is unchanged
    values = [range_critical(k, 20, 0.05) for k in (2, 3, 4, 8, 16)]
    assert values == sorted(values) and values[-1] > 1.5 * values[0]
    assert range_critical(8, 3, 0.05) > range_critical(8, 30, 0.05)  # fewer degrees of freedom, wider
    with pytest.raises(ValueError):
        range_critical(1, 10, 0.05)
    with pytest.raises(ValueError):
        range_critical(3, 0, 0.05)


@given(st.floats(min_value=0.5, max_value=2e5, allow_nan=False))
@settings(max_examples=300, deadline=None)
def test_a_df_node_is_never_above_its_df_and_grows_with_it(df):
    node = df_node(df)
    assert node <= df
    assert df_node(df * 1.01) >= node
    assert node == df if df < 30 else node >= df / 1.05 - 1  # small df (a Welch fraction) as they are


def test_critical_values_at_the_nodes_are_never_narrower_and_a_growing_sweep_reuses_them():
    worst = 0.0
    for k in (2, 3, 8, 108):
        for df in [30 + i / 4 for i in range(40)] + [45.5, 107.0, 400.0, 999.0]:
            exact, at_node = range_critical(k, df, 0.05), range_critical(k, df_node(df), 0.05)
            assert exact <= at_node
            worst = max(worst, at_node / exact - 1)
    assert worst < 0.007  # conservative, by under 0.7%
    assert range_critical(2, 4.7, 0.05) == sstats.t.ppf(0.975, 4.7)  # below 30 exactly as before
    # a 108-setting sweep's pooled df grows by one a cell: from block 2 to 10 its ~900 values fall on
    # under 60 nodes, each solved once (a solve for every cell cost 0.6 s a cell at 108 settings)
    assert len({df_node(df) for df in range(107, 1000)}) <= 60
    judged = step_down([Contrast("a", -0.2, 0.05, 107.0)], 108, 0.05)
    assert judged["a"].critical == range_critical(108, df_node(107.0), 0.05)


def test_step_down_calls_the_clearest_first_and_counts_fewer_settings_in_play():
    alpha = 0.05
    contrasts = [Contrast("near", -0.01, 0.05, 20), Contrast("far", -0.5, 0.05, 20), Contrast("mid", -0.3, 0.05, 20)]
    j = step_down(contrasts, 4, alpha)
    assert [j[k].in_play for k in ("far", "mid", "near")] == [4, 3, 2]
    assert j["far"].critical == range_critical(4, 20, alpha) and j["near"].critical == range_critical(2, 20, alpha)
    assert j["far"].separated and j["mid"].separated and not j["near"].separated
    assert j["mid"].low == pytest.approx(math.exp(-0.3 - range_critical(3, 20, alpha) * 0.05))
    assert j["near"].ratio == pytest.approx(math.exp(-0.01))


def test_a_gap_within_its_critical_value_stops_the_procedure_for_all_that_remain():
    # 2.7 standard errors: past Student's t (2.09) but not past the range of 4 settings (2.80)
    contrasts = [Contrast("a", -0.27, 0.1, 20), Contrast("b", -0.25, 0.1, 20), Contrast("c", -0.22, 0.1, 20)]
    j = step_down(contrasts, 4, 0.05)
    assert not any(x.separated for x in j.values())
    assert {x.in_play for x in j.values()} == {4}  # all judged at the first step


def test_a_floor_vetoes_a_call_and_the_family_does_not_shrink():
    wide_floor = Contrast("noisy", -0.5, 0.05, 20, floor=0.6)  # its own interval is wider than its gap
    j = step_down([wide_floor, Contrast("other", -0.16, 0.05, 20)], 3, 0.05)
    assert not j["noisy"].separated and j["noisy"].low == pytest.approx(math.exp(-1.1))
    # 'other' (3.2 standard errors) is judged with the range of 3 settings (2.53), as if 'noisy' were still in play
    assert j["other"].in_play == 3 and j["other"].critical == range_critical(3, 20, 0.05) and j["other"].separated


def test_contrasts_without_an_interval_are_left_out_but_counted():
    j = step_down([Contrast("x", -0.5, math.nan, 0), Contrast("y", -0.5, 0.05, 20)], 3, 0.05)
    assert set(j) == {"y"} and j["y"].in_play == 3
    assert step_down([], 1, 0.05) == {}


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(-1.0, 1.0), st.floats(0.001, 0.5), st.integers(1, 60), st.floats(0.0, 0.5)),
        min_size=1,
        max_size=9,
    ),
    st.sampled_from([0.05, 0.05 / 13]),
)
def test_intervals_agree_with_calls_and_are_never_narrower_than_floor_or_t(rows, alpha):
    contrasts = [Contrast(i, est, se, df, floor) for i, (est, se, df, floor) in enumerate(rows)]
    judged = step_down(contrasts, len(contrasts) + 1, alpha)
    assert set(judged) == {c.key for c in contrasts}
    calls = 0
    for c in contrasts:
        j = judged[c.key]
        half = max(j.critical * c.se, c.floor)
        assert j.low == pytest.approx(math.exp(c.estimate - half)) and j.high == pytest.approx(math.exp(c.estimate + half))
        assert j.separated == (not (j.low <= 1.0 <= j.high))
        assert j.critical >= sstats.t.ppf(1 - alpha / 2, c.df) * (1 - 1e-3)  # never below a single comparison's
        calls += j.separated
    # every call took one setting out of play; the last step counted the rest
    assert min(j.in_play for j in judged.values()) >= len(contrasts) + 1 - calls
