"""The statistics layer: bootstrap intervals, ratios, best/indistinguishable,
outliers, two-sample comparison, noisy settings and the verdict text."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

from blocklab.analysis.stats import (
    Analysis,
    analyse,
    compare_samples,
    flag_outliers,
    median_ci,
    noisy_settings,
)
from blocklab.analysis.verdict import explain_lines, verdict_text

R = 2000  # the minimum allowed, keeps the file fast


def _mbrc_describe(key: str) -> str:
    blocks = int(key.split("=")[1])
    return f"{blocks} ({blocks * 8} kB)"


# --------------------------------------------------------------------------
# the interval of the median


def test_interval_of_normal_median_covers_truth_with_asymptotic_width():
    mu, sigma, n, trials = 50.0, 5.0, 100, 30
    expected_width = 2 * 1.959964 * 1.2533 * sigma / math.sqrt(n)
    rng = np.random.default_rng(12345)
    covered, widths = 0, []
    for i in range(trials):
        x = rng.normal(mu, sigma, n)
        med, lo, hi = median_ci(x, seed=i, resamples=R)
        assert lo <= med <= hi
        covered += lo <= mu <= hi
        widths.append(hi - lo)
    # 95% nominal: 30 trials, expect ~28.5; 24 or fewer would be a broken interval.
    assert covered >= 25
    ratio = float(np.mean(widths)) / expected_width
    assert 0.75 < ratio < 1.3, ratio


def test_analyse_interval_matches_median_ci_conventions():
    rng = np.random.default_rng(7)
    x = rng.normal(100.0, 10.0, 60)
    a = analyse({"only": x}, resamples=R)
    s = a.settings["only"]
    assert s.n == 60
    assert s.median == pytest.approx(float(np.median(x)))
    assert s.ci_low < s.median < s.ci_high
    assert s.minimum == pytest.approx(x.min()) and s.maximum == pytest.approx(x.max())
    assert s.cv == pytest.approx(x.std(ddof=1) / x.mean())
    assert a.best == "only" and a.baseline == "only" and a.indistinguishable == ()
    assert (s.ratio_to_baseline, s.ratio_ci_low, s.ratio_ci_high) == (1.0, 1.0, 1.0)


# --------------------------------------------------------------------------
# same vs different


def test_same_distribution_is_indistinguishable():
    rng = np.random.default_rng(2024)
    a = rng.normal(1000.0, 50.0, 30)
    b = rng.normal(1000.0, 50.0, 30)
    res = analyse({"A": a, "B": b}, goal="max", seed=3, resamples=R)
    other = "B" if res.best == "A" else "A"
    assert res.indistinguishable == (other,)
    s = res.settings[other]
    assert s.ratio_to_best_ci_low <= 1.0 <= s.ratio_to_best_ci_high
    cmp = compare_samples(a, b, goal="max", seed=3, resamples=R)
    assert cmp.ci_low <= 1.0 <= cmp.ci_high
    assert cmp.p_value > 0.05
    assert not cmp.significant
    assert cmp.verdict.startswith("no significant difference")


def test_false_difference_rate_is_low():
    rng = np.random.default_rng(99)
    called_different = 0
    for i in range(40):
        res = analyse(
            {"A": rng.normal(10.0, 1.0, 20), "B": rng.normal(10.0, 1.0, 20)}, seed=i, resamples=R
        )
        called_different += len(res.indistinguishable) == 0
    # nominal 5%: 2 of 40 expected; 8 or more would mean the intervals are far too narrow
    assert called_different <= 7


def test_two_times_slower_is_different_with_ratio_two():
    rng = np.random.default_rng(5)
    fast = rng.normal(10.0, 0.5, 12)  # elapsed seconds
    slow = rng.normal(20.0, 1.0, 12)
    res = analyse({"fast": fast, "slow": slow}, goal="min", seed=1, resamples=R)
    assert res.best == "fast"
    assert res.indistinguishable == ()
    s = res.settings["slow"]
    assert s.ratio_to_best == pytest.approx(2.0, rel=0.08)
    assert s.ratio_to_best_ci_low > 1.0
    assert s.ratio_to_best_ci_low < 2.0 < s.ratio_to_best_ci_high
    assert s.ratio_to_baseline == s.ratio_to_best  # baseline = first key = best here

    cmp = compare_samples(fast, slow, goal="min", seed=1, resamples=R)
    assert cmp.ratio == pytest.approx(2.0, rel=0.08)
    assert cmp.ci_low > 1.0 and cmp.p_value < 0.001 and cmp.significant
    assert re.match(r"B is 1\.9\dx slower than A \[|B is 2\.0x slower than A \[", cmp.verdict), cmp.verdict
    assert "p<0.001" in cmp.verdict
    # the other way round B is faster
    assert "B is" in (v := compare_samples(slow, fast, goal="min", seed=1, resamples=R).verdict)
    assert "faster than A" in v


def test_goal_max_vs_min_flip_best_and_words():
    rng = np.random.default_rng(11)
    lo = rng.normal(100.0, 2.0, 10)
    hi = rng.normal(300.0, 6.0, 10)
    samples = {"lo": lo, "hi": hi}
    as_throughput = analyse(samples, goal="max", resamples=R)
    as_elapsed = analyse(samples, goal="min", resamples=R)
    assert as_throughput.best == "hi" and as_elapsed.best == "lo"
    assert as_throughput.settings["lo"].ratio_to_best == pytest.approx(1 / 3, rel=0.05)
    assert as_elapsed.settings["hi"].ratio_to_best == pytest.approx(3.0, rel=0.05)
    # the verdict always calls the worse one "slower", ~3x, in both directions
    assert re.search(r"Slower: lo [23]\.\dx \[", verdict_text(as_throughput))
    assert re.search(r"Slower: hi [23]\.\dx \[", verdict_text(as_elapsed))
    # compare: B has 3x the value; faster for throughput, slower for elapsed
    assert "B is" in compare_samples(lo, hi, goal="max", resamples=R).verdict
    assert "faster than A" in compare_samples(lo, hi, goal="max", resamples=R).verdict
    assert "slower than A" in compare_samples(lo, hi, goal="min", resamples=R).verdict
    with pytest.raises(ValueError):
        analyse(samples, goal="fastest")


def test_practical_threshold_merges_small_real_differences():
    rng = np.random.default_rng(8)
    a = rng.normal(1000.0, 2.0, 30)
    b = rng.normal(980.0, 2.0, 30)  # 2% lower, clearly real with this little noise
    strict = analyse({"a": a, "b": b}, goal="max", resamples=R)
    assert strict.best == "a" and strict.indistinguishable == ()
    lenient = analyse({"a": a, "b": b}, goal="max", practical=0.03, resamples=R)
    assert lenient.indistinguishable == ("b",)
    assert lenient.practical == 0.03
    assert "as good (within 3%): b 1.02x" in verdict_text(lenient)


def test_baseline_ratios_and_order_kept():
    samples = {
        ("mbrc", 1): [10.0, 10.5, 9.5, 10.2, 9.8],
        ("mbrc", 8): [40.0, 41.0, 39.0, 40.5, 39.5],
        ("mbrc", 4): [30.0, 31.0, 29.0, 30.5, 29.5],
    }
    res = analyse(samples, resamples=R)
    assert list(res.settings) == list(samples)
    assert res.baseline == ("mbrc", 1)
    assert res.best == ("mbrc", 8)
    s8 = res.settings[("mbrc", 8)]
    assert s8.ratio_to_baseline == pytest.approx(4.0)
    assert s8.ratio_ci_low < 4.0 < s8.ratio_ci_high and s8.ratio_ci_low > 1
    other = analyse(samples, baseline=("mbrc", 4), resamples=R)
    assert other.settings[("mbrc", 8)].ratio_to_baseline == pytest.approx(40.0 / 30.0)
    with pytest.raises(ValueError):
        analyse(samples, baseline=("mbrc", 2), resamples=R)


# --------------------------------------------------------------------------
# outliers


def test_injected_outlier_flagged_and_kept():
    x = [10.0, 10.2, 9.9, 10.1, 10.05, 9.95, 10.15, 30.0]
    idx, vals = flag_outliers(x)
    assert idx == (7,) and vals == (30.0,)
    res = analyse({"s": x}, resamples=R)
    s = res.settings["s"]
    assert s.n == 8 and s.maximum == 30.0  # still counted
    assert s.outliers == (30.0,) and s.outlier_indices == (7,)
    assert any("Outliers flagged and kept" in line for line in explain_lines(analyse({"s": x, "t": x}, resamples=R)))


def test_mad_zero_does_not_crash():
    # all equal: nothing flagged, zero-width interval, cv 0
    res = analyse({"flat": [5.0] * 6}, resamples=R)
    s = res.settings["flat"]
    assert s.outliers == () and s.ci_low == s.ci_high == s.median == 5.0
    assert s.cv == 0.0
    # MAD is 0 but one value differs wildly: the mean-AD fallback flags it
    idx, vals = flag_outliers([5.0, 5.0, 5.0, 5.0, 5.0, 9.0])
    assert idx == (5,) and vals == (9.0,)
    # small departures are not flagged
    assert flag_outliers([5.0, 5.0, 5.0, 6.0]) == ((), ())
    res2 = analyse({"a": [5.0, 5.0, 5.0, 5.0, 9.0], "b": [5.0] * 5}, resamples=R)
    assert res2.settings["a"].outliers == (9.0,)
    assert "b" in res2.indistinguishable or "a" in res2.indistinguishable


# --------------------------------------------------------------------------
# small samples, reproducibility, JSON


def test_single_sample_settings():
    res = analyse({"one": [7.0], "many": [6.0, 6.5, 5.5, 6.2]}, resamples=R)
    one = res.settings["one"]
    assert one.n == 1 and not one.has_interval
    assert one.ci_low == one.ci_high == one.median == 7.0
    assert math.isnan(one.cv)
    assert res.best == "one"
    assert "one" in noisy_settings(res, 0.5)  # no interval yet: needs repeats
    assert "1 run cannot separate many" in verdict_text(res) and "repeat to measure its noise" in verdict_text(res)
    assert any("single sample" in line for line in explain_lines(res))
    alone = verdict_text(analyse({"x": [3.0]}, resamples=R), knob_label="block_size", unit="s")
    assert alone.startswith("Only block_size = x was measured: 3.00 s")
    cmp = compare_samples([1.0], [2.0, 2.1, 1.9], resamples=R)
    assert cmp.n_a == 1 and "n<2" in cmp.verdict
    with pytest.raises(ValueError):
        compare_samples([], [1.0], resamples=R)


def test_empty_setting_and_json():
    res = analyse({("bs", 8192): [1.0, 1.1, 0.9], ("bs", 4096): []}, resamples=R)
    assert res.settings[("bs", 4096)].n == 0
    assert res.best == ("bs", 8192)
    d = res.to_dict()
    text = json.dumps(d, allow_nan=False)  # NaN became null
    back = json.loads(text)
    assert back["settings"][0]["key"] == ["bs", 8192]
    assert back["settings"][1]["median"] is None
    assert any("No measurements for" in line for line in explain_lines(res))
    json.dumps(compare_samples([1.0, 2.0], [3.0, 4.0], resamples=R).to_dict(), allow_nan=False)


def test_seeded_runs_are_reproducible():
    rng = np.random.default_rng(0)
    samples = {f"s{i}": rng.lognormal(3.0, 0.3, 9) for i in range(4)}
    a = analyse(samples, seed=42, resamples=R)
    b = analyse(samples, seed=42, resamples=R)
    c = analyse(samples, seed=43, resamples=R)
    assert a == b
    assert a.to_dict() == b.to_dict()
    assert a.to_dict() != c.to_dict()
    assert a.seed == 42 and a.resamples == R
    assert compare_samples(samples["s0"], samples["s1"], seed=1, resamples=R) == compare_samples(
        samples["s0"], samples["s1"], seed=1, resamples=R
    )


def test_resamples_floor_and_default():
    with pytest.raises(ValueError):
        analyse({"a": [1.0, 2.0]}, resamples=500)
    assert analyse({"a": [1.0, 2.0, 3.0]}).resamples == 4000


def test_non_finite_values_rejected():
    with pytest.raises(ValueError, match="non-finite"):
        analyse({"a": [1.0, float("nan")]}, resamples=R)


# --------------------------------------------------------------------------
# adaptive repeats


def test_noisy_settings_names_wide_intervals():
    rng = np.random.default_rng(3)
    res = analyse(
        {"tight": rng.normal(100.0, 0.5, 10), "wide": rng.normal(100.0, 20.0, 10)}, resamples=R
    )
    assert noisy_settings(res, 0.03) == ["wide"]
    assert noisy_settings(res, 10.0) == []
    w = res.settings["wide"]
    assert w.half_width > 0.03 * w.median
    with pytest.raises(ValueError):
        noisy_settings(res, 0)


# --------------------------------------------------------------------------
# verdict text


def _mbrc_samples() -> dict[str, list[float]]:
    jitter = np.array([-0.012, -0.006, 0.0, 0.004, 0.011])
    medians = {1: 7.2e6, 2: 13.0e6, 4: 19.5e6, 8: 25.7e6, 16: 25.9e6, 32: 25.8e6, 64: 25.6e6}
    return {f"multiblock_read={k}": list(m * (1 + jitter)) for k, m in medians.items()}


def test_verdict_text_for_known_sample():
    res = analyse(_mbrc_samples(), goal="max", metric="rows_per_s", seed=0, resamples=R)
    assert res.best == "multiblock_read=16"
    assert set(res.indistinguishable) == {"multiblock_read=8", "multiblock_read=32", "multiblock_read=64"}
    text = verdict_text(res, knob_label="multiblock_read", describe=_mbrc_describe, unit="rows/s")
    assert len(text) < 400 and len(text.splitlines()) <= 3, text
    assert text.startswith("Best multiblock_read is 16 (128 kB): 25.9 M rows/s [")
    # as good: the whole interval within 3% of the best (the budgeted rule's margin), the closest first
    assert "; as good (within 3%): 32 (256 kB) 1.00x [" in text and "64 (512 kB)" in text.splitlines()[0]
    # 25.9 / 7.2 = 3.597: the worst is named first, with its interval
    m = re.search(r"Slower: 1 \(8 kB\) 3\.6x \[(\d\.\d), (\d\.\d)\]", text)
    assert m, text
    assert float(m.group(1)) <= 3.6 <= float(m.group(2))
    assert text.index("1 (8 kB)") < text.index("2 (16 kB)") < text.index("4 (32 kB)")
    assert "Outliers" not in text


def test_verdict_goal_min_elapsed():
    samples = {k: [1e6 / v for v in vals] for k, vals in _mbrc_samples().items()}
    res = analyse(samples, goal="min", metric="elapsed", resamples=R)
    assert res.best == "multiblock_read=16"
    text = verdict_text(res, knob_label="multiblock_read", describe=_mbrc_describe, unit="s")
    assert "Best multiblock_read is 16 (128 kB): 0.0386 s [" in text
    assert re.search(r"Slower: 1 \(8 kB\) 3\.6x \[", text), text  # larger elapsed = slower


def test_verdict_all_indistinguishable():
    rng = np.random.default_rng(17)
    samples = {f"writers={k}": rng.normal(60.0, 3.0, 8) for k in (1, 2, 4)}
    res = analyse(samples, goal="min", resamples=R)
    assert len(res.indistinguishable) == 2
    text = verdict_text(res, knob_label="writers", unit="s")
    assert "Slower" not in text
    # not shown as good within 5% either: 8 runs cannot tell, and the verdict says how many would
    assert re.search(r"8 runs cannot separate writers=\d 1\.\d+x, writers=\d 1\.\d+x from it \(about \d+", text), text


def test_verdict_many_slower_settings_are_summarised():
    samples = {f"k={i}": [100.0 / i * f for f in (0.99, 1.0, 1.01, 1.005)] for i in range(1, 8)}
    text = verdict_text(analyse(samples, resamples=R))
    assert text.startswith("Best setting is k=1:")
    assert "Slower: k=7 7.0x [" in text and "k=2 2.0" in text  # every one named: the text fits


def test_analysis_is_frozen():
    res = analyse({"a": [1.0, 2.0, 3.0]}, resamples=R)
    assert isinstance(res, Analysis)
    with pytest.raises(AttributeError):  # dataclasses.FrozenInstanceError
        res.best = "b"  # type: ignore[misc]


def test_verdict_of_several_knobs_and_single_samples_reads_cleanly():
    samples = {"a=1, b=x": [10.0], "a=2, b=x": [20.0], "a=1, b=y": [30.0], "a=2, b=y": [40.0],
               "a=3, b=x": [50.0], "a=3, b=y": [60.0]}
    res = analyse(samples, goal="min", seed=1)
    text = verdict_text(res, knob_label="a, b")
    assert text.startswith("Best setting a=1, b=x: 10")
    assert "[" not in text  # one sample against one: no interval is shown
    assert "1 run cannot separate a=3, b=y 6.0x; a=3, b=x 5.0x; a=2, b=y 4.0x; " in text
    assert "(repeat to measure its noise)" in text
    assert any("single sample" in line for line in explain_lines(res))
