"""The ground floor (units.py): one size grammar, one convention for large
numbers, labels; and the size grammar as every engine's knobs take it."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from blocklab.analysis.stats import analyse
from blocklab.analysis.verdict import verdict_text
from blocklab.engines.base import KnobError
from blocklab.report.console_tables import settings_table
from blocklab.units import (
    UnitError,
    fmt_bytes,
    human,
    label_of,
    parse_size,
    reported_size,
    short_size,
    size_bytes,
    tick_labels,
    with_interval,
)

EIGHT_K = ["8192", 8192, "8k", "8K", "8kB", "8KB", "8kb", "8KiB", "8kib", "8 kB", " 8K ", "8192B", "8.0k"]
NOT_SIZES = ["8q", "8.3k", "eight", "", "k", "-8k", "8 kilobytes", True]


@pytest.mark.parametrize("spelling", EIGHT_K)
def test_every_spelling_of_a_size_is_the_same_bytes(spelling):
    assert size_bytes(spelling) == 8192
    assert parse_size(spelling) == 8192


def test_larger_prefixes_are_powers_of_1024():
    assert [size_bytes(s) for s in ("1M", "1MB", "1MiB", "1m", "1G", "1T")] == [1024**2] * 4 + [1024**3, 1024**4]
    assert size_bytes("1.5M") == 1_572_864  # a decimal point is fine when the bytes are whole


@pytest.mark.parametrize("spelling", NOT_SIZES)
def test_what_is_not_a_size_is_refused_naming_it_and_the_grammar(spelling):
    assert size_bytes(spelling) is None
    with pytest.raises(UnitError, match=r"block_sizes: cannot read .* as a size; give bytes or a number with k, M, G or T"):
        parse_size(spelling, "block_sizes")


def test_positive_sizes_refuse_zero():
    assert parse_size("0", "file_size") == 0
    with pytest.raises(UnitError, match="file_size: '0' must be more than 0 bytes"):
        parse_size("0", "file_size", positive=True)


def test_a_reported_size_needs_its_unit():
    # an engine's '16' counts blocks or pages; '128kB' is bytes
    assert reported_size("128kB") == 131072 and reported_size("8 kB") == 8192 and reported_size("16384B") == 16384
    assert reported_size("16") is None and reported_size("on") is None


def test_sizes_written_back_read_the_same():
    for size in (512, 4096, 8192, 1536, 131072, 1024**2, 3 * 1024**3):
        assert parse_size(short_size(size)) == size
    assert short_size(4096) == "4k" and short_size(1024**2) == "1M" and short_size(1536) == "1536"
    assert fmt_bytes(131072) == "128 kB" and fmt_bytes(1536) == "1.5 kB" and fmt_bytes(100) == "100 B"


def test_one_convention_for_large_numbers():
    assert human(25_900_000, "rows/s") == "25.9 M rows/s"
    assert human(14_500) == "14.5 k" and human(14_500, "IOPS") == "14.5 k IOPS"
    assert human(1234.0) == "1,234" and human(1450, "MB/s") == "1,450 MB/s"  # four digits are written out
    assert human(0.01234, "s") == "0.0123 s"
    assert human(3.86e-8, "s") == "3.86e-08 s"
    assert human(float("nan")) == "–" and human(None) == "–"
    assert with_interval(25.9e6, 25.1e6, 26.4e6, "rows/s") == "25.9 M rows/s [25.1, 26.4]"
    assert with_interval(100.0, 99.8, 100.3) == "100.0 [99.8, 100.3]"  # bounds that would round onto the value
    assert tick_labels([0, 2.5e6, 5e6, 17.5e6]) == ["0", "2.5 M", "5 M", "17.5 M"]


def test_the_verdict_and_the_console_table_write_numbers_alike():
    """The three formatters that disagreed on 'k' and 'K' are one: the verdict's
    sentence and the console's table show the same median the same way."""
    groups = {"a": [14_400.0, 14_500.0, 14_600.0], "b": [7_000.0, 7_100.0, 7_200.0]}
    analysis = analyse(groups, goal="max", baseline="a", seed=1, metric="iops")
    text = verdict_text(analysis, knob_label="k", metric="iops", unit="IOPS")
    assert "14.5 k IOPS" in text and "K" not in text.replace("KiB", "")
    summary = {"metric": "iops", "goal": "max", "best_label": "a", "indistinguishable": [],
               "settings": {k: {"n": 3, **s.to_dict()} for k, s in analysis.settings.items()}}
    table = settings_table(summary, "IOPS", str)
    cells = [str(c) for column in table.columns for c in column._cells]
    assert "14.5 k" in cells and "7,100" in cells


def test_labels():
    assert label_of({"multiblock_read": 16, "checksum": True}) == "multiblock_read=16, checksum=on"
    assert label_of({}) == "(defaults)"


# ---------------------------------------------------------------------- the size grammar on every engine's knobs
@pytest.fixture(scope="module")
def engines(pg_engine, pristine_mariadb):
    """The four engines whose knobs take sizes, each able to answer check_settings."""
    from blocklab.engines.mariadb import MariadbEngine
    from blocklab.engines.rocksdb import RocksDbEngine
    from blocklab.engines.sqlite import SqliteEngine

    if not (shutil.which("mariadbd") or Path("/usr/sbin/mariadbd").exists()):
        pytest.fail("mariadbd is not installed: apt-get install mariadb-server", pytrace=False)
    if not shutil.which("db_bench"):
        pytest.fail("db_bench is not installed: apt-get install rocksdb-tools", pytrace=False)
    cache = Path(tempfile.mkdtemp(prefix="blocklab-test-units-", dir="/var/tmp"))
    cache.chmod(0o755)
    mariadb = MariadbEngine(cache_dir=pristine_mariadb(cache / "mariadb"))
    made = {"postgres": pg_engine, "sqlite": SqliteEngine(cache / "sqlite"),
            "mariadb": mariadb, "rocksdb": RocksDbEngine(cache_dir=cache / "rocksdb")}
    yield made
    mariadb.stop()
    shutil.rmtree(cache, ignore_errors=True)


# a knob counted in bytes on each engine (besides block_size), and what 1 MB is in its own unit
BYTE_KNOBS = {
    "postgres": ("pg.shared_buffers", 128),  # 8 kB blocks
    "sqlite": ("sqlite.mmap_size", 1024**2),
    "mariadb": ("mariadb.sort_buffer_size", 1024**2),
    "rocksdb": ("rocksdb.cache_size", 1024**2),
}
ONE_MB = ["1M", "1m", "1MB", "1MiB", "1 MB", "1024k", "1024KiB", "1048576B"]


@pytest.mark.parametrize("engine_name", ["postgres", "sqlite", "mariadb", "rocksdb"])
def test_every_engine_takes_the_same_size_spellings(engines, engine_name):
    engine = engines[engine_name]
    for spelling in EIGHT_K:
        assert engine.check_settings({"block_size": spelling}, partial=True) == {"block_size": 8192}, spelling
    knob, one_mb = BYTE_KNOBS[engine_name]
    for spelling in ONE_MB:
        assert engine.check_settings({knob: spelling}, partial=True) == {knob: one_mb}, spelling
    for spelling in ["8q", "8.3k", "eight"]:
        with pytest.raises(KnobError, match="block_size"):
            engine.check_settings({"block_size": spelling}, partial=True)


def test_a_size_given_to_a_knob_counted_in_blocks_is_converted_into_blocks(engines):
    postgres = engines["postgres"]  # io_combine_limit counts 8 kB blocks
    for spelling in (16, "16", "128k", "128kB", "128KiB", "131072B"):
        assert postgres.check_settings({"multiblock_read": spelling}, partial=True) == {"multiblock_read": 16}, spelling
    with pytest.raises(KnobError, match="multiblock_read"):
        postgres.check_settings({"multiblock_read": "12k"}, partial=True)  # not whole blocks
