"""The full_scan workload on MariaDB/InnoDB (workloads/full_scan.py ScanDialect):
the seed's table generated server-side by the Sequence engine (seq_1_to_N),
analysed so relation_bytes() is exact, and the timed COUNT(*)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..base import DialectBase

if TYPE_CHECKING:
    from . import MariadbEngine
    from .session import MariadbSession


class ScanTables(DialectBase):
    bytes_per_row = 125  # 100,000 rows: a 12 MB .ibd here (extents preallocated)

    def __init__(self, engine: MariadbEngine):
        self.engine = engine

    def build_scan_table(self, table: str, rows: int, fingerprint: str) -> None:
        with self.engine.sql_connect(session=False) as conn, conn.cursor() as cur:
            cur.execute(f"DROP TABLE IF EXISTS `{table}`")
            cur.execute(f"CREATE TABLE `{table}` (id INT, name VARCHAR(100)) ENGINE=InnoDB COMMENT='building'")
            cur.execute(f"INSERT INTO `{table}` SELECT seq, CONCAT('blabla ', seq) FROM seq_1_to_{int(rows)}")
            cur.execute("COMMIT")
            cur.execute(f"ALTER TABLE `{table}` COMMENT = %s", (fingerprint,))  # complete only now
        self.engine.analyze(table)

    def scan_session(self, parallel: bool) -> MariadbSession:
        return self.engine.connect()  # InnoDB scans a table in one thread: nothing to forbid

    def count_rows(self, session: MariadbSession, table: str) -> int:
        return int(session.execute(f"SELECT COUNT(*) FROM `{table}`")[0][0])
