"""Contract: a migration chain is a folder of ``NNNN_name.sql`` + ``NNNN_name.down.sql``
numbered 1..N without gaps; ``load_chain`` refuses anything else with a
``MigrationError`` naming the offending file or version, ``parse_ledger`` only
accepts ``[schema.]table`` made of plain identifiers, and the engine's own chain
ends at ``ENGINE_SCHEMA_VERSION``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from queue_engine.foundation.errors import ConfigError, MigrationError
from queue_engine.foundation.migrate import (
    ENGINE_SCHEMA_VERSION,
    Migration,
    engine_migrations_dir,
    load_chain,
    parse_ledger,
)


def make_chain(folder: Path, *names: str) -> Path:
    """Create empty-ish SQL files with the given names in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / name).write_text(f"-- {name}\nSELECT 1;\n", encoding="utf-8")
    return folder


def test_valid_chain_is_loaded_in_order(tmp_path: Path) -> None:
    folder = make_chain(
        tmp_path / "m",
        "0002_add_things.sql",
        "0002_add_things.down.sql",
        "0001_initial.sql",
        "0001_initial.down.sql",
        "0003_more.sql",
        "0003_more.down.sql",
    )
    (folder / "README.md").write_text("not a migration", encoding="utf-8")
    chain = load_chain(folder)
    assert [(m.version, m.name) for m in chain] == [
        (1, "initial"),
        (2, "add_things"),
        (3, "more"),
    ]
    assert all(isinstance(m, Migration) for m in chain)
    assert chain[1].up_path == folder / "0002_add_things.sql"
    assert chain[1].down_path == folder / "0002_add_things.down.sql"


def test_script_substitutes_quoted_schema_and_checksum_tracks_content(tmp_path: Path) -> None:
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "0001_a.sql").write_text("CREATE TABLE __SCHEMA__.t (x int);", encoding="utf-8")
    (folder / "0001_a.down.sql").write_text("DROP TABLE __SCHEMA__.t;", encoding="utf-8")
    (migration,) = load_chain(folder)
    assert migration.script("up", "my_schema") == 'CREATE TABLE "my_schema".t (x int);'
    assert migration.script("down", "my_schema") == 'DROP TABLE "my_schema".t;'
    before = migration.checksum
    assert len(before) == 64
    (folder / "0001_a.sql").write_text("CREATE TABLE __SCHEMA__.t (y int);", encoding="utf-8")
    assert migration.checksum != before


def test_gap_names_the_expected_version(tmp_path: Path) -> None:
    folder = make_chain(
        tmp_path / "m", "0001_a.sql", "0001_a.down.sql", "0003_c.sql", "0003_c.down.sql"
    )
    with pytest.raises(MigrationError, match=r"expected 0002, found 0003"):
        load_chain(folder)


def test_chain_not_starting_at_one_is_a_gap(tmp_path: Path) -> None:
    folder = make_chain(tmp_path / "m", "0002_b.sql", "0002_b.down.sql")
    with pytest.raises(MigrationError, match=r"expected 0001"):
        load_chain(folder)


def test_missing_down_file_is_named(tmp_path: Path) -> None:
    folder = make_chain(tmp_path / "m", "0001_a.sql", "0001_a.down.sql", "0002_b.sql")
    with pytest.raises(MigrationError, match=r"0002_b\.sql has no 0002_b\.down\.sql"):
        load_chain(folder)


def test_down_file_with_another_name_does_not_count(tmp_path: Path) -> None:
    folder = make_chain(tmp_path / "m", "0001_a.sql", "0001_other.down.sql")
    with pytest.raises(MigrationError, match=r"0001_a\.down\.sql"):
        load_chain(folder)


def test_orphan_down_file_is_refused(tmp_path: Path) -> None:
    folder = make_chain(tmp_path / "m", "0001_a.sql", "0001_a.down.sql", "0002_b.down.sql")
    with pytest.raises(MigrationError, match=r"0002_b\.down\.sql has no up migration"):
        load_chain(folder)


@pytest.mark.parametrize(
    "bad_name",
    ["1_short.sql", "0002-dash.sql", "0002_UPPER.sql", "00002_five.sql", "0002_.sql", "x.sql"],
)
def test_badly_named_sql_file_is_refused(tmp_path: Path, bad_name: str) -> None:
    folder = make_chain(tmp_path / "m", "0001_a.sql", "0001_a.down.sql", bad_name)
    with pytest.raises(MigrationError, match=r"NNNN_name\.sql") as info:
        load_chain(folder)
    assert bad_name in str(info.value)


def test_duplicate_version_is_refused(tmp_path: Path) -> None:
    folder = make_chain(
        tmp_path / "m",
        "0001_a.sql",
        "0001_a.down.sql",
        "0001_b.sql",
        "0001_b.down.sql",
    )
    with pytest.raises(MigrationError, match=r"two migrations numbered 0001"):
        load_chain(folder)


def test_empty_folder_is_refused(tmp_path: Path) -> None:
    folder = make_chain(tmp_path / "m")
    with pytest.raises(MigrationError, match=r"no migrations in"):
        load_chain(folder)


def test_folder_with_only_down_files_is_refused(tmp_path: Path) -> None:
    folder = make_chain(tmp_path / "m", "0001_a.down.sql")
    with pytest.raises(MigrationError):
        load_chain(folder)


def test_missing_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(MigrationError, match=r"does not exist"):
        load_chain(tmp_path / "nowhere")


def test_migration_error_exit_code_is_not_success() -> None:
    assert MigrationError("x").exit_code not in (0, None)


@pytest.mark.parametrize(
    ("ledger", "expected"),
    [
        ("app_migrations", ("public", "app_migrations")),
        ("app.app_migrations", ("app", "app_migrations")),
        ("_s.T1", ("_s", "T1")),
    ],
)
def test_parse_ledger_accepts_plain_identifiers(ledger: str, expected: tuple[str, str]) -> None:
    assert parse_ledger(ledger) == expected


@pytest.mark.parametrize(
    "ledger",
    [
        "",
        "a.b.c",
        "1table",
        "app.",
        ".table",
        'app."quoted"',
        "app.t; DROP TABLE x",
        "app.t-x",
        "a" * 64,
    ],
)
def test_parse_ledger_refuses_anything_else(ledger: str) -> None:
    with pytest.raises(ConfigError, match=r"invalid ledger table"):
        parse_ledger(ledger)


def test_engine_schema_version_is_the_last_shipped_migration() -> None:
    folder = engine_migrations_dir()
    chain = load_chain(folder)
    assert chain[-1].version == ENGINE_SCHEMA_VERSION
    assert [m.version for m in chain] == list(range(1, ENGINE_SCHEMA_VERSION + 1))


def test_engine_migrations_dir_holds_the_checkout_migrations() -> None:
    # From a source checkout it is migrations/ itself; from an installed package, the copy
    # shipped as queue_engine/migrations. Either way the files are the checkout's.
    source = Path(__file__).resolve().parents[2] / "migrations"
    found = engine_migrations_dir()
    names = sorted(p.name for p in source.glob("*.sql"))
    assert names == sorted(p.name for p in found.glob("*.sql"))
    for name in names:
        assert (found / name).read_bytes() == (source / name).read_bytes(), name
