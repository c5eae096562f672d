"""The scan table's content and state, whichever path builds it (COPY FREEZE FROM
PROGRAM, or the INSERT ... SELECT fallback): ids 1..N once each, the seed's
names, every tuple frozen and every page all-visible, no empty tail pages."""

from __future__ import annotations

import psycopg
import pytest

from blocklab.engines.postgres import scan as full_scan
from blocklab.engines.postgres.scan import build_scan_table

pytestmark = pytest.mark.engine

ROWS = 50_000


def assert_scan_table(engine, table: str, rows: int) -> None:
    count, distinct, lo, hi, total, wrong_names = engine.query(
        f"SELECT count(*), count(DISTINCT id), min(id), max(id), sum(id), "
        f"count(*) FILTER (WHERE name IS DISTINCT FROM 'blabla ' || id) FROM \"{table}\""
    )[0]
    assert (count, distinct, lo, hi) == (rows, rows, 1, rows)
    assert total == rows * (rows + 1) // 2
    assert wrong_names == 0
    # ids in order in the heap, as COPY wrote them (one stream, one backend)
    unordered = engine.query(
        f'SELECT count(*) FROM (SELECT id, lag(id) OVER (ORDER BY ctid) AS prev FROM "{table}") s WHERE id <> prev + 1'
    )[0][0]
    assert unordered == 0
    engine.query("CREATE EXTENSION IF NOT EXISTS pg_visibility")
    pages, visible, frozen = engine.query(
        f"SELECT count(*), count(*) FILTER (WHERE all_visible), count(*) FILTER (WHERE all_frozen) "
        f"FROM pg_visibility_map('{table}')"
    )[0]
    assert pages == visible == frozen > 0
    assert engine.query(f"SELECT count(*) FROM pg_check_frozen('{table}')")[0][0] == 0
    # no empty pages left at the end of the file (VACUUM truncates what COPY's bulk extension left)
    used = engine.query(f'SELECT count(DISTINCT (ctid::text::point)[0]) FROM "{table}"')[0][0]
    assert used == pages == engine.relation_bytes(table) // engine.block_size()


def test_copy_path_builds_the_seed_table_frozen(pg_engine):
    steps: dict[str, float] = {}
    elapsed = build_scan_table(pg_engine, "load_copy", ROWS, "fp-copy", steps)
    assert set(steps) == {"load", "commit", "vacuum_analyze", "checkpoint"}
    assert 0 < sum(steps.values()) <= elapsed
    assert_scan_table(pg_engine, "load_copy", ROWS)
    assert pg_engine.table_fingerprint("load_copy") == "fp-copy"
    analysed = pg_engine.query("SELECT reltuples FROM pg_class WHERE relname = 'load_copy'")[0][0]
    assert analysed == ROWS


def test_fallback_builds_the_same_table(pg_engine, monkeypatch):
    def refuse(*args, **kwargs):
        raise psycopg.errors.InsufficientPrivilege("no programs for this role")

    monkeypatch.setattr(full_scan, "_copy_from_program", refuse)
    steps: dict[str, float] = {}
    build_scan_table(pg_engine, "load_insert", ROWS, "fp-insert", steps)
    assert set(steps) == {"load", "commit", "vacuum_analyze", "checkpoint"}
    assert_scan_table(pg_engine, "load_insert", ROWS)
    assert pg_engine.table_fingerprint("load_insert") == "fp-insert"
