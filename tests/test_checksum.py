"""The checksum experiment: row_insert / reload workloads, the recipe on both
engines through the CLI, a corrupt page as a failed cell, and the overhead
arithmetic (seed 004's +x.xx%, seed 001's normalised elapsed)."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path
from typing import Protocol

import pytest
from conftest import blocklab_bin

from blocklab.analysis.overhead import fmt_pct, normalised, overheads, reference_label
from blocklab.engines.base import DialectBase
from blocklab.experiment import prepare
from blocklab.report.console_tables import overhead_tables
from blocklab.report.overhead_plot import overhead_figure
from blocklab.results import ResultRow, RunDir
from blocklab.runner import SilentReporter, run
from blocklab.spec import DatasetSpec, SpecError, WorkloadSpec, spec_from_dict
from blocklab.workloads import make_workload


# ---------------------------------------------------------------------- the recipe through the CLI
def _run_cli(cli_env, *args) -> list[dict]:
    return _run_cli_output(cli_env, *args)[0]


def _run_cli_output(cli_env, *args) -> tuple[list[dict], str, Path]:
    out = subprocess.run(
        [blocklab_bin(), "run", "checksum", "--quick", *args],
        env=cli_env, capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "FAILED" not in out.stdout, out.stdout
    results = list(Path(cli_env["BLOCKLAB_RESULTS"]).glob("*/results.jsonl"))
    assert len(results) == 1, results
    return [json.loads(line) for line in results[0].read_text().splitlines()], out.stdout, results[0].parent


def test_quick_run_postgres_applies_checksums(cli_env):
    rows = _run_cli(cli_env, "--repeats", "1", "--set", "workload.rows=30000")  # a tenth of --quick's inserts: the same proofs
    asked = {(r["settings"]["checksum"], r["settings"]["workload.index"]) for r in rows}
    assert asked == {(False, False), (False, True), (True, False), (True, True)}
    for r in rows:
        assert r["status"] == "ok"
        assert r["applied"]["checksum"] == ("on" if r["settings"]["checksum"] else "off")  # SHOW data_checksums
        assert r["metrics"]["index"] == (1.0 if r["settings"]["workload.index"] else 0.0)
        assert r["metrics"]["rows"] == 30_000 and r["metrics"]["elapsed_s"] > 0


def test_quick_run_sqlite_applies_page_size_checksum_cell_size_check(cli_env):
    # a tenth of --quick's inserts a cell: what is asserted is which settings each of the 16 cells applied
    rows, stdout, run_dir = _run_cli_output(cli_env, "--engine", "sqlite", "--repeats", "1", "--set", "workload.rows=20000")
    assert len(rows) == 16  # 2 page sizes x checksum x block checking x index
    for r in rows:
        s, a = r["settings"], r["applied"]
        assert r["status"] == "ok"
        assert a["block_size"] == str(s["block_size"])  # PRAGMA page_size
        assert a["checksum"] == ("on" if s["checksum"] else "off")  # PRAGMA checksum_verification + 8 reserve bytes
        assert a["block_checking"] == ("on" if s["block_checking"] else "off")  # PRAGMA cell_size_check
    assert {r["settings"]["block_size"] for r in rows} == {1024, 65536}
    # sizes as people write them, in the console, the plan and the report; the ids stay exact
    assert "block_size=64 kB" in stdout and "block_size=1 kB" in stdout, stdout
    assert "65536" not in stdout, stdout
    plan = json.loads((run_dir / "plan.json").read_text())
    assert plan["value_bytes"]["block_size"] == {"1024": 1024, "65536": 65536}
    assert any(c["cell_id"].startswith("b0:block_size=65536") for c in plan["cells"])
    html = (run_dir / "report.html").read_text()
    assert "block_size=64 kB, checksum=on" in html


# ---------------------------------------------------------------------- workloads directly
def test_reload_on_sqlite_deletes_and_reinserts(tmp_path):
    from blocklab.engines.sqlite import SqliteEngine

    engine = SqliteEngine(tmp_path / "sqlite")
    engine.apply({"checksum": True})
    try:
        w = make_workload(WorkloadSpec(kind="reload"), DatasetSpec(rows=5000), "sqlite")
        for _ in range(2):
            w.prepare(engine)
            m = w.run(engine)
            assert m["rows"] == 5000 and m["elapsed_s"] > 0
        assert engine.query('SELECT count(*), count(DISTINCT pk) FROM "blocklab_reload_dst"') == [(5000, 5000)]
    finally:
        engine.stop()


@pytest.mark.parametrize(
    "options, field",
    [({"rows": 0}, "workload.rows"), ({"index": "maybe"}, "workload.index"), ({"rows": -5}, "workload.rows")],
)
def test_bad_row_insert_options_name_the_field(options, field):
    with pytest.raises(SpecError, match=field.replace(".", r"\.")):
        make_workload(WorkloadSpec(kind="row_insert", **options), DatasetSpec(), "sqlite")


def test_bad_swept_index_value_names_the_knob():
    raw = {"engine": {"kind": "sqlite"}, "workload": {"kind": "row_insert"}, "knobs": {"workload.index": [False, "maybe"]}}
    with pytest.raises(SpecError, match=r"knobs\.workload\.index"):
        prepare(spec_from_dict(raw, "test", {}), "", "test")


# ---------------------------------------------------------------------- corruption is an error, not a number
class NoNeeds(Protocol):
    """The test workload asks nothing of the engine's dialect."""


class ScanAllDialect(DialectBase):
    def __init__(self, engine):
        self.engine = engine


class ScanAll:
    """Test-only workload: a table over many pages, read in full by every run."""

    name = "scan_all"
    default_metric = "elapsed_s"
    default_goal = "min"
    Dialect = NoNeeds  # it talks to SQLite itself: a test workload, not a template
    needs = "nothing"

    from blocklab.workloads.base import Options as Options  # no options

    def __init__(self, options, dataset):
        self.options, self.dataset = options, dataset

    def relations(self):
        return ["t"]

    def prepare(self, engine):
        conn = engine.sqlite_connect()
        try:
            conn.execute("CREATE TABLE IF NOT EXISTS t (id INTEGER, pad TEXT)")
            if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'filled'").fetchall():
                with conn:
                    conn.execute(
                        "INSERT INTO t WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 2000) "
                        "SELECT i, printf('%.200c', 'x') FROM s"
                    )
                    conn.execute("CREATE TABLE filled (x)")
        finally:
            conn.close()

    def run(self, engine):
        conn = engine.sqlite_connect()
        try:
            n = conn.execute("SELECT count(*), sum(length(pad)) FROM t").fetchall()[0][0]
        finally:
            conn.close()
        return {"elapsed_s": 0.01, "rows": float(n)}

    def describe(self, m):
        return f"{m['rows']:.0f} rows"

    def estimate_seconds(self):
        return 0.01

    def disk_bytes(self):
        return 2000 * 250.0


class CorruptAfterFirst(SilentReporter):
    def __init__(self, engine):
        super().__init__()
        self.engine = engine
        self.corrupted_block_size = None

    def cell_done(self, cell, row, line):
        super().cell_done(cell, row, line)
        if self.corrupted_block_size is None:
            leaf = self.engine.query("SELECT max(pageno) FROM dbstat WHERE name = 't' AND pagetype = 'leaf'")[0][0]
            self.engine.corrupt_page(leaf)  # a leaf of the scanned table, its last row byte flipped
            self.corrupted_block_size = row.settings["block_size"]


def test_corrupt_page_fails_the_cell_and_the_run_goes_on(tmp_path, monkeypatch):
    import blocklab.workloads as workloads
    from blocklab.engines.sqlite import SqliteEngine

    real = workloads.workload_class
    monkeypatch.setattr(workloads, "workload_class", lambda kind, source="experiment": ScanAll if kind == "scan_all" else real(kind, source))
    monkeypatch.setattr(SqliteEngine, "dialects", {**SqliteEngine.dialects, "scan_all": ScanAllDialect})
    raw = {
        "name": "corrupt",
        "engine": {"kind": "sqlite", "settings": {"checksum": True}},
        "workload": {"kind": "scan_all"},
        "knobs": {"block_size": [1024, 4096], "block_checking": [False, True]},
        "measure": {"repeats": 1, "cache": "warm", "seed": 3},
    }
    exp = prepare(spec_from_dict(raw, "test", {}), "# test", "test", cache_dir=tmp_path / "cache")
    reporter = CorruptAfterFirst(exp.engine)
    run_dir = RunDir(tmp_path / "run")
    run(exp, run_dir, reporter)
    rows = run_dir.rows()
    assert len(rows) == 4, "every cell is recorded"
    ordered = sorted(rows, key=lambda r: r.cell)
    assert ordered[0].ok
    bad = [r for r in ordered[1:] if r.settings["block_size"] == reporter.corrupted_block_size]
    good = [r for r in ordered[1:] if r.settings["block_size"] != reporter.corrupted_block_size]
    assert bad and good
    for r in bad:  # the corrupt file: a failed cell whose status says checksum, not a number
        assert not r.ok and "checksum" in r.status, r.status
        assert r.metrics == {}
    for r in good:  # the other page size is a new file: the run went on
        assert r.ok and r.metrics["rows"] == 2000
    assert overhead_tables(rows) == []  # checksum was fixed, not swept
    counted = [o for o in overheads(rows) if o.failed]  # levels of block_checking: the failures are counted, not averaged
    assert sum(o.failed for o in counted) == len(bad) and all("checksum" in o.error for o in counted)


# ---------------------------------------------------------------------- the arithmetic
def _row(i, elapsed, ok=True, **settings):
    return ResultRow(cell=i, block=0, settings=settings, applied={}, metrics={"elapsed_s": elapsed} if ok else {},
                     status="ok" if ok else "IOError: checksum mismatch")


def test_plus_percent_over_the_baseline():
    rows = [_row(i, 10.0, checksum=False, block_checking=False) for i in range(3)]
    rows += [_row(10 + i, 10.466, checksum=True, block_checking=False) for i in range(3)]
    rows += [_row(20 + i, v, checksum=False, block_checking=True) for i, v in enumerate([9.0, 10.0, 11.5])]
    rows += [_row(30, 0.0, ok=False, checksum=True, block_checking=True)]
    items = {o.level_label: o for o in overheads(rows)}
    assert items["checksum=off, block_checking=off"].text == "baseline"
    low = items["checksum=on, block_checking=off"]
    assert math.isclose(low.ratio, 1.0466) and low.text == "+4.66% [+4.66%, +4.66%]" and low.measurable
    noisy = items["checksum=off, block_checking=on"]
    assert noisy.text.startswith("no measurable overhead (+0.00% [") and not noisy.measurable
    failed = items["checksum=on, block_checking=on"]
    assert failed.n == 0 and failed.failed == 1 and "checksum" in failed.error and failed.text == "no samples"
    assert fmt_pct(0.98) == "-2.00%" and fmt_pct(1.585) == "+58.50%"


def test_normalised_per_block_size_and_to_one_reference():
    rows = []
    for bs, off, on in ((1024, 2.0, 3.0), (8192, 4.0, 8.0)):
        for index in (False, True):
            k = 1.5 if index else 1.0
            rows += [_row(len(rows), off * k, block_size=bs, checksum=False, **{"workload.index": index}) for _ in range(2)]
            rows += [_row(len(rows), on * k, block_size=bs, checksum=True, **{"workload.index": index}) for _ in range(2)]
    got = {(n.block_size, n.level_label, n.context["workload.index"]): n.value for n in normalised(rows)}
    assert got[(1024, "checksum=off", False)] == 1.0 and got[(8192, "checksum=off", True)] == 1.0
    assert got[(1024, "checksum=on", False)] == pytest.approx(1.5)
    assert got[(8192, "checksum=on", True)] == pytest.approx(2.0)
    ref = {(n.block_size, n.level_label, n.context["workload.index"]): n.value
           for n in normalised(rows, reference_block_size=1024)}
    assert ref[(8192, "checksum=off", False)] == pytest.approx(2.0)
    assert ref[(8192, "checksum=on", True)] == pytest.approx(4.0)

    assert len(overhead_tables(rows)) == 2
    fig = overhead_figure(rows)
    assert fig is not None and len(fig.axes) == 2  # one panel per index value
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and len(ax.get_lines()) >= 2

    one_size = [r for r in rows if r.settings["block_size"] == 1024]
    assert overhead_figure(one_size) is not None  # bars per level
    plain = [_row(0, 1.0, multiblock_read=8)]
    assert overhead_tables(plain) == [] and overhead_figure(plain) is None


def test_an_engine_without_checksum_off_is_measured_against_its_first_level():
    # MariaDB 10.11: crc32 and full_crc32, no off; the older crc32 is the reference
    rows = []
    for bs, crc, full in ((4096, 1.0, 1.1), (16384, 2.0, 2.0)):
        rows += [_row(len(rows), full, block_size=bs, checksum="full_crc32") for _ in range(2)]
        rows += [_row(len(rows), crc, block_size=bs, checksum="crc32") for _ in range(2)]
    assert reference_label(rows) == "checksum=crc32"
    items = [(o.context["block_size"], o.level_label, o.text) for o in overheads(rows)]
    assert items[0] == (4096, "checksum=crc32", "baseline")
    assert items[1][:2] == (4096, "checksum=full_crc32") and items[1][2].startswith("+10.00%")
    assert items[3][2].startswith("no measurable overhead (+0.00%")
    tables = overhead_tables(rows)
    assert len(tables) == 2 and "against checksum=crc32" in str(tables[0].title)
    assert "crc32" in overhead_figure(rows).axes[0].get_ylabel()
    with_off = [_row(0, 1.0, checksum="off"), _row(1, 2.0, checksum="on")]
    assert reference_label(with_off) == "checksum off"


def test_each_level_is_also_measured_against_the_level_above_as_the_seed_does():
    # seed 004's ladder: 52.599 s -> 55.051 s (+4.66%) -> 58.546 s (+6.35% over the step before)
    rows = []
    for elapsed, level in ((52.599, ("off", "off")), (55.051, ("on", "off")), (58.546, ("on", "on"))):
        rows += [_row(len(rows), elapsed, checksum=level[0], block_checking=level[1]) for _ in range(3)]
    items = overheads(rows)
    assert [o.level_label for o in items] == ["checksum=off, block_checking=off", "checksum=on, block_checking=off",
                                             "checksum=on, block_checking=on"]
    assert items[0].step_text == ""
    assert items[1].step_text.startswith("+4.66%") and items[1].text.startswith("+4.66%")
    assert items[2].step_text.startswith("+6.35%") and items[2].text.startswith("+11.31%")
    assert [c.header for c in overhead_tables(rows)[0].columns][4] == "vs the level above"


def test_reload_recipe_quick_on_postgres_times_the_checkpoint(cli_env, tmp_path):
    out = tmp_path / "reload"
    proc = subprocess.run(
        [blocklab_bin(), "run", "reload", "--quick", "--rows", "20000", "--out", str(out)],
        env=cli_env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = RunDir(out).rows()
    assert {r.settings["checksum"] for r in rows} == {False, True} and all(r.ok for r in rows)
    for r in rows:
        assert r.metrics["rows"] == 20_000
        assert r.metrics["write_bytes"] > 0, r.metrics  # flush = true: the pages are written inside the timing
    assert "vs the level above" in proc.stdout and "Checksum overhead" in proc.stdout


def test_bad_reload_flush_value_names_the_field():
    with pytest.raises(SpecError, match=r"workload\.flush: 'maybe' is not accepted"):
        make_workload(WorkloadSpec(kind="reload", flush="maybe"), DatasetSpec(rows=100), "postgres")
