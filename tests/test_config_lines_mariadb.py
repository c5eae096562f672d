"""`blocklab tune`'s lines to paste for MariaDB (engines/mariadb/knobs.py config_lines),
read by MariaDB's own option parser: `mariadbd --defaults-file=F --verbose --help` parses
a my.cnf exactly as the server does at start and prints every variable's value, and
names a line it cannot take with [ERROR] (it still exits 0, so the test reads both)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from blocklab.engines.mariadb import MariadbEngine

MARIADBD = "/usr/sbin/mariadbd"


def _parsed_by_mariadbd(cnf: Path) -> tuple[dict[str, str], str]:
    if not Path(MARIADBD).exists() and shutil.which("mariadbd") is None:
        pytest.fail("mariadbd is not installed: run `make test` (it installs mariadb-server as root) or "
                    "`sudo apt-get install mariadb-server`")
    binary = MARIADBD if Path(MARIADBD).exists() else str(shutil.which("mariadbd"))
    done = subprocess.run([binary, f"--defaults-file={cnf}", "--verbose", "--help"], capture_output=True, text=True, timeout=60)
    values = {}
    for line in done.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2:
            values[parts[0].replace("-", "_")] = parts[1]
    return values, done.stderr


@pytest.mark.parametrize("settings, expected", [
    ({"block_size": "8k", "buffer_cache": "64M", "direct_io": True, "multiblock_read": 64, "checksum": "full_crc32"},
     {"innodb_page_size": "8192", "innodb_buffer_pool_size": "67108864", "innodb_flush_method": "O_DIRECT",
      "innodb_read_ahead_threshold": "64", "innodb_checksum_algorithm": "full_crc32"}),
    ({"direct_io": False, "mariadb.innodb_doublewrite": "off", "mariadb.innodb_flush_neighbors": 0},
     {"innodb_flush_method": "fsync", "innodb_doublewrite": "FALSE", "innodb_flush_neighbors": "0"}),
])
def test_the_winners_my_cnf_lines_are_what_mariadbd_reads(tmp_path, cache_dir, settings, expected):
    engine = MariadbEngine(cache_dir=cache_dir / f"config-lines-{tmp_path.name}")
    try:  # the settings as tune hands them over: canonical (a server variable's check reads the catalog)
        lines = engine.config_lines(engine.check_settings(settings, partial=True))
    finally:
        engine.stop()  # check_settings may have started the private server for its catalog
    assert lines[0] == "[mysqld]"
    cnf = tmp_path / "my.cnf"
    cnf.write_text("\n".join(lines) + "\n")
    values, errors = _parsed_by_mariadbd(cnf)
    assert "[ERROR]" not in errors, (lines, errors)
    for name, value in expected.items():
        assert values.get(name) == value, (name, values.get(name), lines)


def test_a_line_mariadbd_cannot_take_is_seen_by_this_check(tmp_path):
    """The check itself can fail: the value a wrong rendering would write (a boolean's ON
    for the flush method) is named by mariadbd."""
    cnf = tmp_path / "my.cnf"
    cnf.write_text("[mysqld]\ninnodb_flush_method = ON\n")
    _, errors = _parsed_by_mariadbd(cnf)
    assert "Error while setting value 'ON' to 'innodb-flush-method'" in errors
