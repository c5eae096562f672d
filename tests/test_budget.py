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
                            "or a cell count like 200cells or 200")
    assert not out.exists()


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
    assert "measure.budget: 'soon' is not accepted: not a budget; accepted: a duration like 90s" in result.stdout + result.stderr


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
        pair["blocks_to_settle"] >= 1000
    # one estimate in the run: the table's note and the verdict say the blocks the budget's note says
    summary = json.loads((out / "summary.json").read_text())
    entry = summary["settings"][pair["setting"]]
    assert entry["standing"] == "undecided" and entry["blocks_needed"] == pair["blocks_to_settle"], (entry, pair)
    if pair["blocks_to_settle"] < 1000:
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
    # and a run whose budget is spent measures nothing more when resumed
    third = _cli(["run", "--resume", str(out)], cli_env)
    assert third.returncode == 0 and len(_rows(out)) == 5, third.stdout + third.stderr


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
