"""The schema comes only from Alembic migrations, applies on open, and matches the models."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect, text

from flywheel import config
from flywheel.catalog import Base, Catalog, head_revision, open_catalog
from flywheel.catalog.db import alembic_config, current_revision, migrate

TABLES = {"problems", "solutions", "artifacts", "runs", "attempts", "grafts", "library", "alembic_version"}


def test_open_creates_schema_at_head(catalog: Catalog) -> None:
    names = set(inspect(catalog.db).get_table_names())
    assert TABLES <= names
    with catalog.db.connect() as conn:
        assert current_revision(conn) == head_revision()


def test_migrating_twice_is_a_noop(library: Path, catalog: Catalog) -> None:
    with catalog.db.connect() as conn:
        before = conn.execute(text("SELECT sql FROM sqlite_master ORDER BY name")).all()
    assert migrate(catalog.db) == head_revision()
    again = open_catalog(config.database_url(library))
    with again.db.connect() as conn:
        after = conn.execute(text("SELECT sql FROM sqlite_master ORDER BY name")).all()
        versions = conn.execute(text("SELECT version_num FROM alembic_version")).all()
    assert before == after
    assert versions == [(head_revision(),)]
    again.close()


def test_models_match_the_migrations(catalog: Catalog) -> None:
    with catalog.db.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert diff == []


def test_sqlite_runs_in_wal_with_foreign_keys(catalog: Catalog) -> None:
    with catalog.db.connect() as conn:
        assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert conn.execute(text("PRAGMA foreign_keys")).scalar() == 1
        assert conn.execute(text("PRAGMA busy_timeout")).scalar() >= 1000


def test_migrations_render_for_postgresql_without_sqlite_sql() -> None:
    buf = io.StringIO()
    cfg = alembic_config("postgresql+psycopg://user@localhost/flywheel")
    cfg.output_buffer = buf
    command.upgrade(cfg, "head", sql=True)
    sql = buf.getvalue()
    assert "CREATE TABLE attempts" in sql and "CREATE TABLE artifacts" in sql
    assert "UNIQUE (run_id, problem_id, attempt_index)" in sql
    assert "AUTOINCREMENT" not in sql and "PRAGMA" not in sql
    assert "id SERIAL NOT NULL" in sql  # portable autoincrement, rendered natively


def test_migrations_are_ordered_and_named() -> None:
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(alembic_config())
    chain = [rev for rev in script.walk_revisions("base", "heads")][::-1]   # oldest first
    assert [r.revision for r in chain] == ["0001", "0002", "0003", "0004", "0005", "0006", "0007", "0008", "0009"]
    for rev in chain:
        assert Path(rev.path).name.startswith(f"{rev.revision}_") and rev.doc   # ordered, named, described


def test_0004_records_run_settings_and_leaves_older_runs_null(tmp_path: Path) -> None:
    from sqlalchemy import create_engine

    url = config.database_url(tmp_path)
    db = create_engine(url)
    assert migrate(db, "0003") == "0003"
    with db.begin() as conn:   # a run recorded before run settings existed
        conn.execute(text("INSERT INTO runs (id, problem_set, problem_set_hash, budget, attempts, no_graft, "
                          "model_name, model_fingerprint, status, started_at) VALUES ('old', 'champ', :h, 160, 1, "
                          "0, 'm', :h, 'finished', '2025-01-01 00:00:00')"), {"h": "0" * 64})
    assert migrate(db) == head_revision()
    assert "settings" in {c["name"] for c in inspect(db).get_columns("runs")}
    db.dispose()

    cat = open_catalog(url)
    settings = '{"router":{"near_threshold":0.7}}'
    cat.create_run(run_id="new", problem_set="champ", problem_set_hash="1" * 64, budget=160, attempts=1,
                   model_name="m", model_fingerprint="1" * 64, settings=settings)
    old, new = cat.get_run("old"), cat.get_run("new")
    assert old is not None and old.settings is None and old.budget == 160
    assert new is not None and new.settings == settings
    cat.close()

    db = create_engine(url)
    with db.connect() as conn:
        cfg = alembic_config()
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0003")
        conn.commit()
        assert current_revision(conn) == "0003"
    assert "settings" not in {c["name"] for c in inspect(db).get_columns("runs")}
    with db.connect() as conn:   # the runs stay, and the report views still read them
        assert conn.execute(text("SELECT id FROM runs ORDER BY id")).scalars().all() == ["new", "old"]
        assert conn.execute(text("SELECT count(*) FROM attempt_costs")).scalar() == 0
    db.dispose()


@pytest.mark.parametrize(("step", "sql"), [("0003:0004", "ALTER TABLE runs ADD COLUMN settings TEXT"),
                                           ("0004:0005", "ALTER TABLE runs ADD COLUMN owner VARCHAR(255)")])
def test_run_columns_render_for_postgresql_as_plain_added_columns(step: str, sql: str) -> None:
    buf = io.StringIO()
    cfg = alembic_config("postgresql+psycopg://user@localhost/flywheel")
    cfg.output_buffer = buf
    command.upgrade(cfg, step, sql=True)
    assert sql in buf.getvalue()


def test_0005_adds_the_run_owner_and_leaves_older_runs_null(tmp_path: Path) -> None:
    from sqlalchemy import create_engine

    url = config.database_url(tmp_path)
    db = create_engine(url)
    assert migrate(db, "0004") == "0004"
    with db.begin() as conn:   # a run recorded before owners existed, left `running` by a killed process
        conn.execute(text("INSERT INTO runs (id, problem_set, problem_set_hash, budget, attempts, no_graft, "
                          "model_name, model_fingerprint, status, started_at) VALUES ('old', 'champ', :h, 160, 1, "
                          "0, 'm', :h, 'running', '2025-01-01 00:00:00')"), {"h": "0" * 64})
    assert migrate(db) == head_revision()
    db.dispose()
    cat = open_catalog(url)
    cat.create_run(run_id="new", problem_set="champ", problem_set_hash="1" * 64, budget=160, attempts=1,
                   model_name="m", model_fingerprint="1" * 64, owner="host:1:2")
    old, new = cat.get_run("old"), cat.get_run("new")
    assert old is not None and old.owner is None and new is not None and new.owner == "host:1:2"
    assert cat.interrupt_abandoned_runs(lambda owner: True) == ["new"]   # no owner: never declared gone
    assert cat.get_run("old").status == "running" and cat.get_run("new").status == "interrupted"  # type: ignore[union-attr]
    cat.close()
    db = create_engine(url)
    with db.connect() as conn:   # and back: the column goes, the runs and the report views stay
        cfg = alembic_config()
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0004")
        conn.commit()
        assert current_revision(conn) == "0004"
        assert conn.execute(text("SELECT id FROM runs ORDER BY id")).scalars().all() == ["new", "old"]
        assert conn.execute(text("SELECT count(*) FROM attempt_costs")).scalar() == 0
    assert "owner" not in {c["name"] for c in inspect(db).get_columns("runs")}
    db.dispose()


def test_downgrading_past_every_added_column_and_back_keeps_runs_and_views(tmp_path: Path) -> None:
    from sqlalchemy import create_engine

    cat = open_catalog(config.database_url(tmp_path))
    cat.create_run(run_id="r", problem_set="champ", problem_set_hash="1" * 64, budget=160, attempts=1,
                   model_name="m", model_fingerprint="1" * 64, settings="{}", owner="host:1:2")
    cat.close()
    db = create_engine(config.database_url(tmp_path))
    with db.connect() as conn:
        cfg = alembic_config()
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0002")     # 0005, 0004 and 0003 each drop columns under the report views
        conn.commit()
        assert current_revision(conn) == "0002"
        assert conn.execute(text("SELECT count(*) FROM attempt_costs")).scalar() == 0
    assert not {"decode_schedule", "settings", "owner"} & {c["name"] for c in inspect(db).get_columns("runs")}
    assert migrate(db) == head_revision()
    with db.connect() as conn:
        assert conn.execute(text("SELECT id, owner FROM runs")).all() == [("r", None)]
    db.dispose()


def test_0007_gives_each_fork_of_a_shared_prefill_its_share_and_back(tmp_path: Path) -> None:
    from sqlalchemy import create_engine

    url = config.database_url(tmp_path)
    db = create_engine(url)
    assert migrate(db, "0005") == "0005"
    run = ("INSERT INTO runs (id, problem_set, problem_set_hash, budget, attempts, no_graft, model_name, "
           "model_fingerprint, status, started_at, decode_schedule) VALUES (:id, 's', :h, 8, 4, 0, 'm', :h, "
           "'finished', '2025-01-01 00:00:00', :schedule)")
    attempt = ("INSERT INTO attempts (run_id, problem_id, attempt_index, route, grafted_artifact_sha, prompt_tokens, "
               "prefill_tokens, restored_tokens, decode_tokens, budget, budget_exhausted, verified, created_at) "
               "VALUES (:run, 'p', :k, 'near', :sha, 10, 10, 7, 5, 8, 0, 0, '2025-01-01 00:00:00')")
    with db.begin() as conn:   # before 0007, each of K = 4 forks carried the whole prefill (10) and restore (7)
        conn.execute(text("INSERT INTO problems (id, text, text_hash, created_at) VALUES "
                          "('p', 't', :h, '2025-01-01 00:00:00')"), {"h": "0" * 64})
        conn.execute(text(run), {"id": "batched", "h": "0" * 64, "schedule": '{"slots":4}'})
        conn.execute(text(run), {"id": "unbatched", "h": "0" * 64, "schedule": None})
        for run_id in ("batched", "unbatched"):
            for k in range(4):
                conn.execute(text(attempt), {"run": run_id, "k": k, "sha": "a" * 64})
                conn.execute(text("INSERT INTO grafts (attempt_id, artifact_sha256, outcome, restored_tokens, "
                                  "created_at) VALUES ((SELECT max(id) FROM attempts), :sha, 'ok', 7, "
                                  "'2025-01-01 00:00:00')"), {"sha": "a" * 64})
        conn.execute(text("INSERT INTO attempts (run_id, problem_id, attempt_index, route, grafted_artifact_sha, "
                          "prompt_tokens, prefill_tokens, restored_tokens, decode_tokens, budget, budget_exhausted, "
                          "verified, created_at) VALUES ('batched', 'p', 4, 'near', :sha, 0, 0, 7, 0, 0, 1, 0, "
                          "'2025-01-01 00:00:00')"), {"sha": "a" * 64})   # the run budget ran dry: nothing ran
    assert migrate(db) == head_revision()
    query = text("SELECT prompt_tokens, prefill_tokens, restored_tokens FROM attempts WHERE run_id = :r "
                 "AND budget > 0 ORDER BY attempt_index")
    with db.connect() as conn:
        batched = conn.execute(query, {"r": "batched"}).all()
        assert [tuple(r) for r in batched] == [(10, 3, 2), (10, 3, 2), (10, 2, 2), (10, 2, 1)]  # sums 10 and 7
        assert conn.execute(text("SELECT restored_tokens FROM attempts WHERE budget = 0")).scalar() == 0
        assert conn.execute(text("SELECT sum(computed_tokens) FROM attempt_costs WHERE run_id = 'batched'")
                            ).scalar() == 10 + 4 * 5
        unbatched = conn.execute(query, {"r": "unbatched"}).all()    # before batching: nothing was shared
        assert [tuple(r) for r in unbatched] == [(10, 10, 7)] * 4
    with db.connect() as conn:
        cfg = alembic_config()
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0005")
        conn.commit()
        assert [tuple(r) for r in conn.execute(query, {"r": "batched"}).all()] == [(10, 10, 7)] * 4
        assert conn.execute(text("SELECT count(*) FROM grafts")).scalar() == 8
    db.dispose()


def test_0008_counts_tool_tokens_apart_zero_for_older_attempts_and_back(tmp_path: Path) -> None:
    from sqlalchemy import create_engine

    db = create_engine(config.database_url(tmp_path))
    assert migrate(db, "0007") == "0007"
    with db.begin() as conn:
        conn.execute(text("INSERT INTO runs (id, problem_set, problem_set_hash, budget, attempts, model_name, "
                          "model_fingerprint, no_graft, status, started_at) VALUES ('r', 's', 'h', 8, 1, 'm', 'f', "
                          "0, 'finished', CURRENT_TIMESTAMP)"))
        conn.execute(text("INSERT INTO problems (id, text, text_hash, source, created_at) VALUES ('p', 'x', 'hx', 's', CURRENT_TIMESTAMP)"))
        conn.execute(text("INSERT INTO attempts (run_id, problem_id, attempt_index, route, budget, decode_tokens, "
                          "prompt_tokens, prefill_tokens, restored_tokens, budget_exhausted, verified, created_at) "
                          "VALUES ('r', 'p', 0, 'none', 8, 5, 3, 3, 0, 0, 0, CURRENT_TIMESTAMP)"))
    assert migrate(db) == head_revision()
    with db.connect() as conn:
        assert conn.execute(text("SELECT decode_tokens, tool_tokens FROM attempts")).all() == [(5, 0)]
        cfg = alembic_config()
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0007")
        conn.commit()
        assert conn.execute(text("SELECT count(*) FROM problem_savings")).scalar() == 0   # the view is back
    assert "tool_tokens" not in {c["name"] for c in inspect(db).get_columns("attempts")}
    db.dispose()


def test_0006_rekeys_problems_so_different_texts_are_different_problems(tmp_path: Path) -> None:
    import hashlib
    import unicodedata

    from sqlalchemy import create_engine

    from flywheel.catalog import ProblemSpec, text_hash

    def old_hash(t: str) -> str:   # the identity before 0006: NFKC + casefold + whitespace
        return hashlib.sha256(" ".join(unicodedata.normalize("NFKC", t).casefold().split()).encode()).hexdigest()

    url = config.database_url(tmp_path)
    db = create_engine(url)
    assert migrate(db, "0005") == "0005"
    texts = {"sup": "What is 2\u00b3 + 1?", "cap": "Let A = 5 and a = 2. What is A?", "ws": "  Solve  x+1=2\n"}
    with db.begin() as conn:
        for pid, t in texts.items():
            conn.execute(text("INSERT INTO problems (id, text, text_hash, created_at) "
                              "VALUES (:i, :t, :h, '2025-01-01 00:00:00')"), {"i": pid, "t": t, "h": old_hash(t)})
    assert migrate(db) == head_revision()
    with db.connect() as conn:
        keys = dict(conn.execute(text("SELECT id, text_hash FROM problems")).all())
    assert keys == {pid: text_hash(t) for pid, t in texts.items()}
    db.dispose()

    cat = open_catalog(url)   # the look-alike texts are no longer the catalogued problems
    assert cat.problems_by_text("What is 23 + 1?") == []
    assert cat.problems_by_text("Let A = 5 and a = 2. What is a?") == []
    assert [p.id for p in cat.problems_by_text("What is 2\u00b3  + 1?")] == ["sup"]   # whitespace still folds
    assert [p.id for p in cat.problems_by_text("Solve x+1=2")] == ["ws"]
    row = cat.upsert_problem(ProblemSpec(text="What is 23 + 1?"))
    assert row.id not in texts
    cat.close()

    db = create_engine(url)
    with db.connect() as conn:   # and back: the old keys again
        cfg = alembic_config()
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0005")
        conn.commit()
        keys = dict(conn.execute(text("SELECT id, text_hash FROM problems WHERE id IN ('sup', 'cap', 'ws')")).all())
    assert keys == {pid: old_hash(t) for pid, t in texts.items()}
    db.dispose()


def test_0009_leaves_an_older_catalog_unclaimed_until_its_library_opens_it_and_back(tmp_path: Path) -> None:
    from sqlalchemy import create_engine

    from flywheel.library import Library
    from flywheel.ownership import ID_FILE

    root = tmp_path / "lib"
    root.mkdir()
    db = create_engine(config.database_url(root))
    assert migrate(db, "0008") == "0008"
    with db.begin() as conn:
        conn.execute(text("INSERT INTO problems (id, text, text_hash, source, created_at) VALUES ('p', 'x', 'hx', 's', "
                          "CURRENT_TIMESTAMP)"))
    assert migrate(db) == head_revision()
    with db.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM library")).scalar() == 0   # nobody claimed it yet
    with Library.open(root) as lib:      # the library that opens an old catalog adopts it
        assert lib.catalog.get_problem("p") is not None
    library_id = (root / ID_FILE).read_text().strip()
    with db.connect() as conn:
        assert conn.execute(text("SELECT library_id, root FROM library")).all() == [(library_id, str(root.resolve()))]
        cfg = alembic_config()
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0008")
        conn.commit()
    assert "library" not in inspect(db).get_table_names()
    db.dispose()
