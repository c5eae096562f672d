"""`blocklab import ...`: results measured on Oracle, read into blocklab's run
directories (the parsers are in importers/; this is the thin command layer).

Bad input exits 2 with a message naming the file, the line and the field."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any, NoReturn

import click
from rich.console import Console

from .cli_errors import EXIT_BAD_INPUT, fail
from .console import make_console
from .importers.common import ImportInputError, ImportOptionError
from .results import ResultsError, RunDir
from .units import label_of, parse_size

ORACLE_BLOCK_SIZES = (2048, 4096, 8192, 16384, 32768)


def _fail(console: Console, message: str) -> NoReturn:
    fail(console, message, EXIT_BAD_INPUT)


def _out_dir(out: Path | None, name: str) -> RunDir:
    """--out, or results/NAME-YYYYmmdd-HHMMSS (a new one; -2, -3 ... when taken)."""
    if out is not None:
        return RunDir(out)
    from .paths import results_root

    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    path, n = results_root() / f"{name}-{stamp}", 1
    while path.exists():
        n += 1
        path = results_root() / f"{name}-{stamp}-{n}"
    return RunDir(path)


def _block_size(value: str | None, option: str = "--block-size") -> int | None:
    if value is None:
        return None
    try:
        size = parse_size(value, option, positive=True)
    except ValueError as err:
        raise ImportOptionError(str(err)) from None
    if size not in ORACLE_BLOCK_SIZES:
        raise ImportOptionError(f"{option} {value}: Oracle block sizes are 2k, 4k, 8k, 16k and 32k")
    return size


def _command(name: str, args: Any, **options: Any) -> str:
    """The command as typed (for experiment.toml): arguments, then the options given."""
    words = ["blocklab", "import", name, *map(str, args)]
    for key, value in options.items():
        if value is not None:
            words += [f"--{key.replace('_', '-')}", str(value)]
    return " ".join(words)


def _print(console: Console, text: str) -> None:
    console.print(text, markup=False, highlight=False)


@click.group("import", context_settings={"help_option_names": ["-h", "--help"]})
def import_group() -> None:
    """Read results measured on Oracle into blocklab: SLOB, AWR, ORION, CALIBRATE_IO, AUX_STATS$.

    Each import writes a directory that `blocklab report`, `export` and
    `compare` read like one of blocklab's own runs (engine oracle, mode import);
    every number keeps the file and line it came from.

    \b
    Examples:
      blocklab import slob AWRs/ --calibration results/orion-lun1
      blocklab import awr before.txt after.txt
      blocklab import orion lun1_20261120_0915 --out results/orion-lun1
      blocklab import calibrate-io calibrate.out
      blocklab import aux-stats aux_stats.txt
    """


@import_group.command("slob")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--update-pct", type=float, help="SLOB's UPDATE_PCT, when no slob.conf lies beside the reports")
@click.option("--block-size", "block_size", metavar="SIZE", help="block size of the SLOB tablespace (default: the report's db_block_size)")
@click.option("--calibration", type=click.Path(path_type=Path, file_okay=False), help="an imported ORION / CALIBRATE_IO (or blocklab calibrate) directory: its limits are drawn on the plots")
@click.option("--out", type=click.Path(path_type=Path), help="directory to write (default results/slob-import-TIMESTAMP)")
def slob_command(paths: tuple[Path, ...], update_pct: float | None, block_size: str | None, calibration: Path | None,
                 out: Path | None) -> None:
    """SLOB results (AWR reports, text or HTML or .html.gz, one per run, or awr_info.sh output) as a slob run:
    the petal plots by block size and update percentage, with the saturation point.

    Sessions come from the report names (the harness's AWRs/awr.NNN.txt, or
    awr.txt.N), the update percentage from the slob.conf beside them (or
    --update-pct), the block size from the report's db_block_size (or
    --block-size; awr_info output needs it).

    \b
    Examples:
      blocklab import slob harness/            # every AWRs/ directory below, each with its slob.conf
      blocklab import slob AWRs/awr.*.txt --update-pct 20
      blocklab import slob awr.html.gz.16 --update-pct 0 --block-size 8k
      blocklab import slob awr_info.out --block-size 8k --update-pct 0
      blocklab import slob harness/ --calibration results/orion-lun1 && blocklab report results/slob-import-...
    """
    from .importers.rundir import write_run
    from .importers.slob import import_slob
    from .report.console_tables import slob_table

    console = make_console()
    try:
        env: dict[str, Any] = {}
        if calibration is not None:
            env = _calibration_env(calibration)
        command = _command("slob", paths, update_pct=update_pct, block_size=block_size, calibration=calibration)
        run = import_slob(list(paths), update_pct=update_pct, block_size=_block_size(block_size), environment=env,
                          command=command)
        run_dir = _out_dir(out, "slob-import")
        summary = write_run(run_dir, run)
    except (ImportInputError, ImportOptionError) as err:
        _fail(console, str(err))
    console.print(slob_table(run.rows))
    _print(console, summary["verdict"])
    _print(console, f"{len(run.rows)} reports imported; report: blocklab report {run_dir.path}")
    _print(console, f"saved: {run_dir.path}")


def _orion_note(document: dict[str, Any]) -> str:
    """The report's note on which run was imported and what the summary gave beside the points."""
    words = []
    runs = document.get("runs") or []
    chosen = next((r for r in runs if r["imported"]), None)
    if len(runs) > 1 and chosen:
        words.append(f"ORION: run {chosen['run']} of {len(runs)} imported ({chosen['why']})")
    low = (document.get("summary") or {}).get("Minimum Small Latency")
    if document.get("summary_only") and low:
        words.append(f"ORION summary only: Minimum Small Latency {low['value']:g} {document['latency_unit_in_files']} at "
                     f"Small={low['small']} ({low['source']})")
    return "; ".join(words)


def _calibration_env(path: Path) -> dict[str, object]:
    from .device.calibrate import load_calibration

    try:
        cal = load_calibration(path)
    except (ResultsError, KeyError, ValueError) as err:
        raise ImportOptionError(f"--calibration {path}: not a calibration directory ({err})") from None
    return {"device": cal.device_name, "calibration_dir": str(path.resolve())}


@import_group.command("awr")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path, dir_okay=False))
@click.option("--label", "labels", multiple=True, metavar="NAME", help="a name per report, in order (default: the init.ora parameters that differ, else the file names)")
@click.option("--out", type=click.Path(path_type=Path), help="directory to write (default results/awr-profile-TIMESTAMP)")
def awr_command(files: tuple[Path, ...], labels: tuple[str, ...], out: Path | None) -> None:
    """Where the time went, per AWR report: seed 002's TIMESOURCE / SECONDS / PERCENTAGE
    table from the Top events and DB time, and the reports side by side.

    Reads AWR reports from 10g to 23ai as awrrpt.sql / awrrpti.sql write them:
    text or HTML (gzipped too), instance and PDB reports, RAC instance reports,
    reports spooled by SQL*Plus (OUTPUT page headings), CRLF line ends. A field
    that cannot be read is left out and named (import-notes.json, and the
    report); a file with neither Load Profile nor a Top events table is
    refused. A RAC global report (awrgrpt.sql) is refused: export one report
    per instance with awrrpti.sql.

    \b
    Examples:
      blocklab import awr before.txt after.txt            # e.g. db_writer_processes 4 -> 36
      blocklab import awr awrrpt_1_100_101.html awrrpt_1_200_201.html --label before --label after
    """
    from .importers.profile import import_awr_profiles
    from .importers.rundir import write_run
    from .probes.profile_view import setting_profiles
    from .report.console_tables import profile_table, side_by_side_table

    console = make_console()
    try:
        run = import_awr_profiles(list(files), list(labels) or None, command=_command("awr", files))
        run_dir = _out_dir(out, "awr-profile")
        write_run(run_dir, run)
    except (ImportInputError, ImportOptionError) as err:
        _fail(console, str(err))

    profiles = setting_profiles(run.rows, order=[label_of(r.settings) for r in run.rows])
    for sp, row in zip(profiles, run.rows):
        _print(console, f"{row.notes['file']} ({row.started or 'no snapshot time'})")
        console.print(profile_table(sp))
    if len(profiles) > 1:
        console.print(side_by_side_table(profiles))
        a, b = profiles[0].total.elapsed_s, profiles[-1].total.elapsed_s
        if a > 0 and b > 0:
            _print(console, f"TOTAL_TIME (DB time): {a:,.0f} s -> {b:,.0f} s, {b / a:.3g}x "
                            f"({'%.3gx less' % (a / b) if b < a else '%.3gx more' % (b / a)})")
    _print(console, f"saved: {run_dir.path}")


@import_group.command("orion")
@click.argument("prefix", type=click.Path(path_type=Path))
@click.option("--device", help="the device's name, for reports to find these limits (default: ORION's LUN)")
@click.option("--latency-unit", type=click.Choice(["us", "ms"]), help="only for output without a version: us from 11.2, ms before")
@click.option("--run", "run", type=int, metavar="N", help="which run of a summary file holding several (1 = the first; default: the last)")
@click.option("--out", type=click.Path(path_type=Path), help="directory to write (default results/orion-DEVICE-TIMESTAMP)")
def orion_command(prefix: Path, device: str | None, latency_unit: str | None, run: int | None, out: Path | None) -> None:
    """ORION's summary and IOPS / MB/s / latency matrices (PREFIX_summary.txt,
    _iops.csv, _mbps.csv, _lat.csv) as a device calibration, usable as the limit
    lines of any report.

    Without the CSVs, the summary alone: its Maximum Small IOPS, Maximum Large
    MBPS and Minimum Small Latency lines. A file with several summaries pasted
    one after another holds several runs: each is listed, the last imported
    (or the one --run names), never merged. The points are device limits at
    load levels, never settings ranked against each other.

    \b
    Examples:
      blocklab import orion lun1_20261120_0915
      blocklab import orion orion/lun1_20261120_0915_summary.txt --device lun1 --out results/orion-lun1
      blocklab import orion mytest          # the one mytest_<date>_<time> run in this directory
      blocklab import orion pasted_summaries.txt --run 1 --latency-unit us
    """
    from .importers.limits import save_imported_calibration
    from .importers.orion import import_orion

    console = make_console()
    try:
        cal, sources, document, summary = import_orion(prefix, device=device, latency_unit_option=latency_unit, run=run)
        run_dir = _out_dir(out, f"orion-{cal.device_name}")
        env: dict[str, object] = {"orion_version": summary.version, "luns": summary.luns}
        save_imported_calibration(run_dir, cal, sources=sources, environment=env, extra={"orion.json": document},
                                  runs_note=_orion_note(document))
    except (ImportInputError, ImportOptionError) as err:
        _fail(console, str(err))
    runs = document.get("runs") or []
    if len(runs) > 1:
        _print(console, f"{len(runs)} ORION runs in the summary file (separate runs, not merged):")
        for r in runs:
            ext = ", ".join(f"{k} {v['value']:g}" for k, v in r["extremes"].items())
            _print(console, f"  run {r['run']} (line {r['line']}, ORION {r['version'] or '?'}): {ext}"
                            + ("  <- imported" if r["imported"] else ""))
    if document.get("summary_only"):
        _print(console, "no _iops.csv / _mbps.csv: the points are the summary's Maximum lines")
    _print(console, f"ORION {summary.version or summary.wording}, test {summary.test or '?'}, "
                    f"{len(cal.points)} points without mixed load; latency in the files: {document['latency_unit_in_files']}")
    for line in cal.summary.lines():
        _print(console, line)
    _print(console, f"device {cal.device_name}: `blocklab import slob ... --calibration {run_dir.path}` draws these limits")
    _print(console, f"saved: {run_dir.path}")


@import_group.command("calibrate-io")
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--block-size", "block_size", default="8k", show_default=True, metavar="SIZE", help="the database block size MAX_IOPS was read in")
@click.option("--device", default="calibrate_io", show_default=True, help="the device's name, for reports to find these limits")
@click.option("--run", "run", type=int, metavar="N", help="which calibration of a file that holds several (1 = the first; default: the last)")
@click.option("--out", type=click.Path(path_type=Path), help="directory to write (default results/calibrate-io-TIMESTAMP)")
def calibrate_io_command(file: Path, block_size: str, device: str, run: int | None, out: Path | None) -> None:
    """CALIBRATE_IO's MAX_IOPS, MAX_MBPS and LATENCY as device limits: the procedure's
    printed output, DBA_RSRC_IO_CALIBRATE pasted from SQL*Plus (any column order,
    prompts such as SYS@cdb1> around it), or that view as CSV.

    A file with several runs (a paste of `SQL> /` repeats) lists every run; the
    last is imported (the one the database keeps), or the one --run names.
    MAX_IOPS (random database-block reads) and MAX_MBPS (random 1 MiB reads) are
    two limits of the device, never compared as settings of one knob.

    \b
    Examples:
      blocklab import calibrate-io calibrate.out              # max_iops = ... / latency = ... / max_mbps = ...
      blocklab import calibrate-io dba_rsrc_io_calibrate.txt --block-size 16k
      blocklab import calibrate-io three_runs.txt --run 2 --out results/calibrate-io-run2
    """
    from .importers.calibrate_io import parse_calibrate_runs, to_calibration
    from .importers.limits import save_imported_calibration

    console = make_console()
    try:
        size = _block_size(block_size)
        assert size is not None
        runs = parse_calibrate_runs(file, run)
        result = runs.result
        cal, sources = to_calibration(result, block_size=size, device=device)
        run_dir = _out_dir(out, "calibrate-io")
        note = f"CALIBRATE_IO: run {runs.chosen + 1} of {len(runs.runs)} imported: {runs.why}" if len(runs.runs) > 1 else ""
        save_imported_calibration(run_dir, cal, sources=sources, environment={"calibrate_io_form": result.form},
                                  runs_note=note)
    except (ImportInputError, ImportOptionError) as err:
        _fail(console, str(err))
    if len(runs.runs) > 1:
        _print(console, f"{len(runs.runs)} calibration runs in {file}:")
        for i, r in enumerate(runs.runs):
            each = "" if r.latency_ms is None else f", LATENCY {r.latency_ms.value:g} ms"
            mark = "  <- imported" if i == runs.chosen else ""
            _print(console, f"  run {i + 1} (line {r.max_iops.loc.line}): MAX_IOPS {r.max_iops.value:,.0f}, "
                            f"MAX_MBPS {r.max_mbps.value:,.0f}{each}{mark}")
        _print(console, f"imported run {runs.chosen + 1}: {runs.why}")
    _print(console, f"CALIBRATE_IO ({result.form}, {file})")
    _print(console, f"  MAX_IOPS   {result.max_iops.value:,.0f} random {size // 1024}k reads/s  ({result.max_iops.loc})")
    _print(console, f"  MAX_MBPS   {result.max_mbps.value:,.0f} MiB/s = {cal.points[1].mb_per_s:,.1f} MB/s of random 1 MiB reads  "
                    f"({result.max_mbps.loc})")
    if result.max_pmbps is not None:
        _print(console, f"  MAX_PMBPS  {result.max_pmbps.value:,.0f} MiB/s for one process")
    if result.latency_ms is not None:
        lat = result.latency_ms.value
        text = "under 1 ms (printed as 0: whole milliseconds)" if result.latency_whole_ms and lat == 0 else f"{lat:g} ms"
        _print(console, f"  LATENCY    {text} at MAX_IOPS  ({result.latency_ms.loc})")
    _print(console, "  two limits of the device, each measured by itself: not settings of one knob")
    _print(console, f"saved: {run_dir.path}")


@import_group.command("aux-stats")
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--sysstats", "sysstats_dir", type=click.Path(path_type=Path, file_okay=False), help="a `blocklab sysstats` directory to set beside (default: the newest under results/)")
@click.option("--out", type=click.Path(path_type=Path), help="directory to write (default results/aux-stats-TIMESTAMP)")
def aux_stats_command(file: Path, sysstats_dir: Path | None, out: Path | None) -> None:
    """Oracle's system statistics (SYS.AUX_STATS$ pasted from SQL*Plus, or as CSV):
    SREADTIM, MREADTIM, MBRC, MAXTHR beside those `blocklab sysstats` measured.

    \b
    The directory it writes reads like a run (`blocklab report DIR`), values kept
    exactly as saved (MAXTHR 510301184, never rounded).

    \b
    Examples:
      blocklab import aux-stats aux_stats.txt     # SELECT sname, pname, pval1, pval2 FROM sys.aux_stats$
      blocklab import aux-stats aux_stats.csv --sysstats results/sysstats-20261122-101500
    """
    from .importers import aux_stats
    from .importers.rundir import check_new, unranked, write_run

    console = make_console()
    try:
        stats = aux_stats.parse_aux_stats(file)
        own_path = _own_sysstats(sysstats_dir)
        own = aux_stats.own_stats(own_path) if own_path else {}
        run_dir = _out_dir(out, "aux-stats")
        check_new(run_dir.path)
        doc = aux_stats.document(stats, str(file))
        summary = write_run(run_dir, aux_stats.imported_run(stats, str(file), _command("aux-stats", [file])))
        unranked(summary)["verdict"] = aux_stats.verdict(stats, doc)
        run_dir.write_json("summary.json", summary)
        run_dir.write_json("sysstats.json", doc)
    except (ImportInputError, ImportOptionError) as err:
        _fail(console, str(err))
    _print_aux_stats(console, stats, own, own_path, doc)
    _print(console, f"saved: {run_dir.path}")


def _own_sysstats(given: Path | None) -> Path | None:
    if given is not None:
        path = given / "sysstats.json"
        if not path.is_file():
            raise ImportOptionError(f"--sysstats {given}: no sysstats.json there; give a directory `blocklab sysstats` wrote")
        return path
    from .paths import results_root

    found = sorted(results_root().glob("*/sysstats.json"), key=lambda p: p.stat().st_mtime) if results_root().is_dir() else []
    found = [p for p in found if '"source": "import"' not in p.read_text()[:400]]
    return found[-1] if found else None


def _print_aux_stats(console: Console, stats: list[Any], own: dict[str, str], own_path: Path | None, doc: dict[str, Any]) -> None:
    from rich import box
    from rich.markup import escape
    from rich.table import Table
    from rich.text import Text

    from .importers.aux_stats import COMPARED
    from .importers.aux_stats import exact as aux_stats_exact

    mine = f"blocklab ({own_path.parent.name})" if own_path else "blocklab (no sysstats run found)"
    table = Table(box=box.SIMPLE_HEAD, title="system statistics: Oracle's SYS.AUX_STATS$ beside blocklab's own",
                  title_justify="left", pad_edge=False)
    for column in ("SNAME", "PNAME", "Oracle PVAL1", "PVAL2", "unit", mine):
        table.add_column(escape(column), justify="right" if "PVAL1" in column or column.startswith("blocklab") else "left", no_wrap=True)
    for s in stats:
        value = aux_stats_exact(s)
        theirs = own.get(s.pname, "") if s.sname == "SYSSTATS_MAIN" and s.pname in COMPARED else ""
        # the imported report's text verbatim (a str cell is rich markup: '[x]' would vanish)
        table.add_row(*(Text(str(c)) for c in (s.sname, s.pname, value, s.pval2, s.unit)), theirs or ("–" if s.pname in COMPARED else ""))
    console.print(table)
    status = doc.get("status", "")
    if status and status != "COMPLETED":
        _print(console, f"note: STATUS {status}: " + ("Oracle marked these statistics as unusable" if status == "BADSTATS"
                                                         else "a gathering was still running when this was read"))
    missing = [p for p in ("SREADTIM", "MREADTIM", "MBRC") if doc["stats"].get(p.lower() + ("_ms" if "TIM" in p else "")) is None]
    if doc.get("formula"):
        _print(console, f"The planner cost they imply: {doc['formula']}")
    elif missing:
        _print(console, f"no workload statistics ({', '.join(missing)} are NULL: only noworkload statistics were gathered)")
    if own_path is None:
        _print(console, "run `blocklab sysstats` to measure blocklab's own beside these")


__all__ = ["import_group"]
