"""Budgets and the stopping rule (issue 26): `--budget` and `[measure] budget`
parsed and refused, a run stopped by a cell budget naming its undecided pairs
with the blocks estimated to settle them, a run whose settings separate clearly
stopped by the rule before its budget, and a resumed run counting what was
measured before. Real embedded PostgreSQL, small data."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import pytest
from conftest import blocklab_bin

from blocklab.analysis.settle import blocks_to_settle, state
from blocklab.budget import Budget, BudgetError, parse_budget


def _cli(args: list[str], env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([blocklab_bin(), *args], env=env, capture_output=True, text=True, timeout=timeout)


def _rows(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines() if line.strip()]


# ---------------------------------------------------------------------- parsing
@pytest.mark.parametrize("text, budget", [
    ("90s", Budget(seconds=90)), ("5m", Budget(seconds=300)), ("1.5h", Budget(seconds=5400)), ("2min", Budget(seconds=120)),
    ("200cells", Budget(cells=200)), ("200", Budget(cells=200)), ("1 cell", Budget(cells=1)), (40, Budget(cells=40)),
])
def test_budget_forms(text, budget):
    assert parse_budget(text) == budget


@pytest.mark.parametrize("text", ["", "5x", "90 seconds", "-3", "0", "0s", "2.5cells", "m5", "0.1s"])
def test_bad_budget_names_the_option_and_the_forms(text):
    with pytest.raises(BudgetError) as err:
        parse_budget(text)
    assert str(err.value).startswith(f"--budget {text!r}") and "90s, 5m or 1h" in str(err.value) and "200cells" in str(err.value)


def test_bad_budget_on_the_command_line_is_refused_before_anything_runs(cli_env, tmp_path):
    out = tmp_path / "never"
    result = _cli(["run", "mbrc", "--quick", "--budget", "5 parsecs", "--out", str(out)], cli_env, timeout=60)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == ""
    assert result.stderr.strip() == ("error: --budget '5 parsecs' is not accepted; accepted: a duration like 90s, 5m or 1h, "
                            "or a cell count like 200cells or 200; or off")
    assert not out.exists()


@pytest.mark.parametrize("off", ["OFF", "Off"])
def test_budget_off_in_any_case_is_the_fixed_plan(cli_env, off):
    result = _cli(["plan", "mbrc", "--quick", "--budget", off], cli_env, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stderr == ""
    assert "stops after the 2 block(s) above (no budget" in result.stdout


def test_a_bad_budget_in_the_environment_names_the_variable(cli_env):
    result = _cli(["plan", "mbrc", "--quick"], {**cli_env, "BLOCKLAB_BUDGET": "bogus"}, timeout=60)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.strip() == ("error: BLOCKLAB_BUDGET (the default of --budget) 'bogus' is not accepted; accepted: "
                                     "a duration like 90s, 5m or 1h, or a cell count like 200cells or 200; or off")


def test_bad_budget_in_a_file_is_refused(cli_env, tmp_path):
    path = tmp_path / "x.toml"
    path.write_text('name = "x"\n[knobs]\nmultiblock_read = [1, 16]\n[measure]\nbudget = "soon"\n')
    env = {k: v for k, v in cli_env.items() if k != "BLOCKLAB_BUDGET"}  # the file's budget, not the suite's "off"
    result = _cli(["plan", str(path)], env, timeout=60)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == ""
    assert "measure.budget: 'soon' is not accepted: not a budget; accepted: a duration like 90s" in result.stderr


# ---------------------------------------------------------------------- the estimate
def test_settle_states_and_the_estimate_from_the_noise():
    assert state(1.02, 1.3, 0.03) == "separated" and state(0.98, 1.02, 0.03) == "within"
    assert state(0.9, 1.01, 0.03) == "undecided" and state(math.nan, 1.0, 0.03) == "undecided"
    # 10% slower with a per-block spread of 10%: separation needs t * 0.1 / sqrt(n) < log(1/0.9) = 0.105
    n = blocks_to_settle(0.9, 0.10, 3, 0.03, 0.05, 1)
    assert n is not None and 5 <= n <= 7
    # twice the noise, four times the blocks (roughly: t shrinks a little with them)
    n2 = blocks_to_settle(0.9, 0.20, 3, 0.03, 0.05, 1)
    assert n2 is not None and 2.5 * n < n2 < 4.5 * n
    # equal settings settle by the margin: h <= log(1.03) ~ 0.0296
    n3 = blocks_to_settle(1.0, 0.02, 3, 0.03, 0.05, 1)
    assert n3 is not None and n3 < n2
    assert blocks_to_settle(0.9, math.nan, 3, 0.03, 0.05, 1) is None


def test_the_cap_is_reached_by_noise_and_exactly_the_cap_is_a_number():
    from scipy import stats

    from blocklab.analysis.entry import standing_note
    from blocklab.analysis.settle import MAX_ESTIMATE, undecided_lines

    # equal settings: the distance to clear is the margin, log(1.03); a spread that needs exactly 1000 blocks
    target = math.log(1.03)
    spread = target * math.sqrt(MAX_ESTIMATE) / float(stats.t.ppf(1 - 0.05 / 2, MAX_ESTIMATE - 1)) * (1 - 1e-9)
    assert blocks_to_settle(1.0, spread, 3, 0.03, 0.05, 1) == MAX_ESTIMATE
    assert blocks_to_settle(1.0, 1.01 * spread, 3, 0.03, 0.05, 1) == MAX_ESTIMATE + 1  # beyond the cap: "more than"

    def pair(needed):
        return {"setting": "a", "best": "b", "ratio": 1.0, "low": 0.5, "high": 2.0, "blocks": 3, "spread": spread,
                "blocks_to_settle": needed, "more_blocks": needed - 3}

    (exact,) = undecided_lines([pair(MAX_ESTIMATE)])
    assert exact.endswith(f"about {MAX_ESTIMATE - 3} more block(s) ({MAX_ESTIMATE} in all)")
    (beyond,) = undecided_lines([pair(MAX_ESTIMATE + 1)])
    assert beyond.endswith(f"more than {MAX_ESTIMATE} blocks (the noise is too large to settle it this way)")
    assert standing_note({"standing": "undecided", "blocks_needed": MAX_ESTIMATE}, False) == f"open: ~{MAX_ESTIMATE} blocks"
    assert standing_note({"standing": "undecided", "blocks_needed": MAX_ESTIMATE + 1}, False) == f"open: >{MAX_ESTIMATE} blocks"


# ---------------------------------------------------------------------- real runs
def _scan_run(cli_env, out: Path, budget: str, *extra: str) -> subprocess.CompletedProcess:
    return _cli(["run", "mbrc", "--quick", "--rows", "20000", "--set", "multiblock_read=1,16", "--seed", "3",
                 "--budget", budget, "--out", str(out), *extra], cli_env)


def test_cell_budget_stops_at_its_count_and_names_the_undecided_pairs(cli_env, tmp_path):
    out = tmp_path / "run"
    result = _scan_run(cli_env, out, "5cells")
    assert result.returncode == 0, result.stdout + result.stderr
    rows = _rows(out)
    assert len({r["cell_id"] for r in rows}) == 5  # 2 blocks of 2, then the rule added a third: the budget cut it
    assert "budget spent (5 of 5 cells) before the verdict settled: 1 pair(s) neither separated" in result.stdout
    assert "  1 (8 kB) against 16 (128 kB): " in result.stdout or "  16 (128 kB) against 1 (8 kB): " in result.stdout, result.stdout
    settle = json.loads((out / "summary.json").read_text())["settle"]
    assert settle["status"] == "budget spent" and settle["spent"] == "5 of 5 cells"
    (pair,) = settle["undecided"]
    assert pair["blocks"] >= 2 and pair["spread"] is not None and pair["blocks_to_settle"] > pair["blocks"]
    assert f"about {pair['more_blocks']} more block(s) ({pair['blocks_to_settle']} in all)" in result.stdout or \
        pair["blocks_to_settle"] > 1000
    # one estimate in the run: the table's note and the verdict say the blocks the budget's note says
    summary = json.loads((out / "summary.json").read_text())
    entry = summary["settings"][pair["setting"]]
    assert entry["standing"] == "undecided" and entry["blocks_needed"] == pair["blocks_to_settle"], (entry, pair)
    if pair["blocks_to_settle"] <= 1000:
        assert f"about {pair['blocks_to_settle']} would: --repeats {pair['blocks_to_settle']}" in summary["verdict"]

    assert 'id="settle-undecided"' in (out / "report.html").read_text()  # the report's own section says the same
    # the budget ended the plan inside the block the rule added: not a partial run, nothing owed
    assert len(json.loads((out / "plan.json").read_text())["cells"]) == 5
    assert json.loads((out / "summary.json").read_text())["cells_planned"] == 5 and "Partial run" not in result.stdout

    # resumed after a crash that lost the last two cells: the budget counts the three kept, so two more run
    lines = (out / "results.jsonl").read_text().splitlines(keepends=True)
    (out / "results.jsonl").write_text("".join(lines[:3]))
    again = _cli(["run", "--resume", str(out)], cli_env)
    assert again.returncode == 0, again.stdout + again.stderr
    assert len({r["cell_id"] for r in _rows(out)}) == 5 and len(_rows(out)) == 5
    assert "budget spent (5 of 5 cells)" in again.stdout
    # and a run whose budget is spent, its verdict not settled, measures nothing more when resumed: it says how to
    # give it more and exits 2 (the rule would add a block of the 2 settings)
    third = _cli(["run", "--resume", str(out)], cli_env)
    assert third.returncode == 2 and len(_rows(out)) == 5, third.stdout + third.stderr
    assert third.stdout == "" and "its budget is spent (5 of 5 cells)" in third.stderr
    assert third.stderr.strip().endswith(f"blocklab run --resume {out} --budget 7cells")


def test_clearly_separated_settings_stop_by_the_rule_before_the_budget(cli_env, tmp_path):
    path = tmp_path / "inserts.toml"
    path.write_text("""name = "inserts"
[engine]
kind = "postgres"
[workload]
kind = "row_insert"
[knobs]
"workload.rows" = [1000, 30000]   # thirty times the inserts: many times the time
[measure]
repeats = 3
max_repeats = 8
cache = "warm"
metric = "elapsed_s"
budget = "40cells"
""")
    out = tmp_path / "run"
    env = {k: v for k, v in cli_env.items() if k != "BLOCKLAB_BUDGET"}  # the file's budget, not the suite's "off"
    result = _cli(["run", str(path), "--seed", "5", "--out", str(out)], env)
    assert result.returncode == 0, result.stdout + result.stderr
    cells = len({r["cell_id"] for r in _rows(out)})
    assert cells < 40 and cells % 2 == 0, cells  # whole blocks, far fewer than the budget
    assert f"stopping rule (budget 40 cells): settled after {cells // 2} blocks (1 separated from the best)" in result.stdout
    settle = json.loads((out / "summary.json").read_text())["settle"]
    assert settle["status"] == "settled" and settle["undecided"] == []


def test_plan_shows_the_budget_and_the_rule(cli_env):
    result = _cli(["plan", "mbrc", "--quick", "--budget", "2m"], cli_env, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "budget 2 min; about" in result.stdout
    assert "stopping rule: after block 2" in result.stdout and "within 3% of it" in result.stdout
    fixed = _cli(["plan", "mbrc", "--quick", "--budget", "off"], cli_env, timeout=120)
    assert "stops after the 2 block(s) above" in fixed.stdout, fixed.stdout


def test_a_budget_from_the_environment_is_not_a_fleet_runs_error(cli_env):
    """BLOCKLAB_BUDGET is the default of runs on one host; a fleet run failed blaming --budget, which
    nobody gave. It runs the fixed plan, as with a recipe's budget (here it goes on to the scheduler)."""
    env = {**cli_env, "BLOCKLAB_BUDGET": "5m"}
    result = _cli(["run", "mbrc", "--quick", "--fleet", "tcp://127.0.0.1:9", "--insecure", "--fleet-timeout", "0.5"], env,
                  timeout=120)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "--budget" not in result.stderr and "cannot reach the scheduler at tcp://127.0.0.1:9" in result.stderr
    given = _cli(["run", "mbrc", "--quick", "--budget", "5m", "--fleet", "tcp://127.0.0.1:9", "--insecure"], env, timeout=120)
    assert given.returncode == 2 and given.stderr.startswith("error: --budget"), given.stdout + given.stderr  # given: refused


def _null_budget_run(tmp_path: Path, budget: str):
    from blocklab.experiment import prepare
    from blocklab.results import RunDir
    from blocklab.runner import SilentReporter, run
    from blocklab.spec import spec_from_dict

    raw = {"name": "nulltest", "engine": {"kind": "null", "settings": {"null.mode": "a"}}, "workload": {"kind": "null"},
           "knobs": {"null.level": [1, 2, 3]}, "measure": {"repeats": 3, "seed": 5, "cache": "warm", "budget": budget}}
    reporter = SilentReporter()
    summary = run(prepare(spec_from_dict(raw, "test", {}), "# test", "test"), RunDir(tmp_path / budget), reporter)
    return summary, reporter


@pytest.mark.parametrize("budget, measured", [("1cells", 1), ("2cells", 2)])
def test_a_budget_spent_before_every_setting_is_measured_is_not_settled(tmp_path, budget, measured):
    """--budget 1cells said 'settled' (1 of 9 cells); the unmeasured settings were nobody's undecided pair."""
    summary, reporter = _null_budget_run(tmp_path, budget)
    settle = summary["settle"]
    assert settle["status"] == "budget spent", settle
    named = {p["setting"]: p for p in settle["undecided"]}
    unmeasured = [k for k, p in named.items() if p.get("measured") is False]
    assert sorted(unmeasured) == sorted(k for k, e in summary["settings"].items() if e["n"] == 0) and len(unmeasured) == 3 - measured
    said = "\n".join(reporter.lines)
    assert f"{3 - measured} setting(s) not measured yet" in said
    assert all(f"\n  {k.split('=')[1]}: not measured yet" in said for k in unmeasured), said
    if measured == 1:  # the one measured has nothing to compare with: named too, the three in all
        assert len(named) == 3 and "the only setting measured has nothing to compare it with yet" in said
    else:  # the one measured beside the best has no interval yet
        assert len(named) == 2 and "1 pair(s) neither separated from the best" in said


def test_the_undecided_list_is_the_stopping_rules_own():
    """One setting measured of three: the rule (paired.unsettled) cannot stop, and the list says why for each."""
    from blocklab.analysis.paired import BlockCell, analyse_blocks, unsettled
    from blocklab.analysis.settle import undecided, unsettled_settings

    an = analyse_blocks([BlockCell(0, "x=1", 100.0)], order=["x=1", "x=2", "x=3"], goal="max", looks=18)
    assert unsettled(an, None, 0.03) == ["x=1"]
    assert unsettled_settings(an, [], ["x=1", "x=2", "x=3"], None, 0.03) == ["x=1", "x=2", "x=3"]
    pairs = undecided(an.to_dict(), [], "m", 0.03, ["x=1", "x=2", "x=3"])
    assert [(p["setting"], p.get("alone"), p.get("measured")) for p in pairs] == [
        ("x=1", True, None), ("x=2", None, False), ("x=3", None, False)]


def test_a_budget_spent_inside_the_first_blocks_is_extended_by_resume(cli_env, tmp_path):
    """--budget 3cells of a 4-cell plan stops partial; --resume alone ran nothing and said it ran 1 of 4 cells;
    --resume --budget was refused. Now the resume says the budget is spent and how to give more; that works."""
    out = tmp_path / "run"
    first = _scan_run(cli_env, out, "3cells")
    assert first.returncode == 0, first.stdout + first.stderr
    assert len(_rows(out)) == 3 and "Partial run: 3 of 4 cells measured" in first.stdout
    assert f"to measure more: blocklab run --resume {out} --budget MORE" in first.stdout
    again = _cli(["run", "--resume", str(out)], cli_env)
    assert again.returncode == 2 and again.stdout == "", again.stdout + again.stderr
    assert again.stderr.startswith(f"error: {out}: its budget is spent (3 of 3 cells) and 1 of its 4 planned cells are "
                                   "not measured: resuming would measure nothing")
    assert again.stderr.strip().endswith(f"blocklab run --resume {out} --budget 4cells") and len(_rows(out)) == 3
    more = _cli(["run", "--resume", str(out), "--budget", "4cells"], cli_env)
    assert more.returncode == 0, more.stdout + more.stderr
    assert "running 1 of 4 cells (3 already done)" in more.stdout and len(_rows(out)) == 4
    assert json.loads((out / "spec.json").read_text())["spec"]["measure"]["budget"] == "4cells"  # kept for the next resume
    assert json.loads((out / "summary.json").read_text())["settle"]["budget"] == "4cells"
    off = _cli(["run", "--resume", str(out), "--budget", "off"], cli_env, timeout=60)
    assert off.returncode == 2 and off.stdout == "" and "--budget off with --resume" in off.stderr


def test_plan_warns_when_the_budget_ends_inside_the_first_blocks(cli_env):
    result = _cli(["plan", "mbrc", "--quick", "--budget", "10cells"], cli_env, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert ("warning: the budget (10 cells) ends inside the first 2 block(s) the rule needs before its first look "
            "(16 cells; give --budget 16cells or more, or fewer --repeats)") in result.stdout
    fits = _cli(["plan", "mbrc", "--quick", "--budget", "16cells"], cli_env, timeout=60)
    assert fits.returncode == 0 and "warning: the budget" not in fits.stdout, fits.stdout + fits.stderr
