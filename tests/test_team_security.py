"""L4 W1: row-level security in team mode, beside the search path. Each scope's tables admit a
row only to a connection whose `memdir.scope` names that scope (every memdir connection sets
it to its own), where the role owns the tables (postgres/schema.py: migration 12); a role
that does not leaves it off, and doctor says so. And the view's past hashes, moved out of
kv into a table of their own by the same migration. A real server (tests/pg_server.py),
connected as roles that are not superusers (a superuser is never held by a policy): pg_url's
is the test database's owner, as in the PostgreSQL lanes (tests/conftest.py).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from dbrows import TEAM, look
from memdir import Memory
from memdir.cli.curation import render
from memdir.curation import doctor
from memdir.errors import StorageError
from memdir.models import Provenance
from memdir.storage.hashing import body_hash
from memdir.storage.postgres.insert import STAGE_AT
from memdir.storage.postgres.schema import LATEST, MIGRATIONS, PAST_KEY, secure

pytestmark = pytest.mark.usefixtures("pg_server")

OWNER = "memdir_pw"  # the test databases' owner (tests/pg_server.py): not a superuser
BY = Provenance(None, "cli", "agent-a")
NOW = "2026-03-01T10:00:00Z"


def as_role(url: str, role: str) -> str:
    """The URL of the test server's socket (trusted) as another role."""
    scheme, rest = url.split("://", 1)
    return f"{scheme}://{role}@{rest.split('@', 1)[1]}"


def env_of(tmp_path: Path, name: str, url: str, scope: str) -> dict[str, str]:
    state = tmp_path / name
    state.mkdir(exist_ok=True)
    env = {**os.environ, "MEMDIR_STATE_DIR": str(state), "MEMDIR_DATABASE_URL": url}
    env["MEMDIR_DATABASE_SCOPE"] = scope
    env.pop("MEMDIR_MEMORY_DIR", None)
    return env


def at_schema_11(url: str, scope: str) -> None:
    """A scope as memdir made it before migration 12, holding a value, a document, and the
    document's past hashes in kv (where schema 11 kept them)."""
    with psycopg.connect(url, autocommit=True) as db, db.transaction():
        db.execute(f'CREATE SCHEMA "memdir_{scope}"')
        db.execute(f'SET search_path TO "memdir_{scope}"')
        db.execute(
            "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, "
            "applied TIMESTAMPTZ NOT NULL DEFAULT now())"
        )
        cur = db.cursor()
        for version, name, apply in MIGRATIONS:
            if version <= 11:
                apply(cur)
                cur.execute("INSERT INTO schema_migrations VALUES (%s, %s)", (version, name))
        cur.execute("INSERT INTO kv VALUES ('distill', '2026-03-01T00:00:00Z')")
        cur.execute(
            "INSERT INTO documents VALUES ('HOT.md', '- now\n', nextval('document_revisions'), "
            "'2026-03-01T00:00:00Z', 'a')"
        )
        past = body_hash("- then\n") + " " + body_hash("- before\n")
        cur.execute("INSERT INTO kv VALUES (%s, %s)", (PAST_KEY + "HOT.md", past))


def policies(url: str, scope: str) -> dict[str, tuple[bool, bool, int]]:
    """Each table of the scope: row-level security enabled, forced, its policies."""
    with psycopg.connect(url, autocommit=True) as db:
        rows = db.execute(
            "SELECT c.relname, c.relrowsecurity, c.relforcerowsecurity, "
            "(SELECT count(*) FROM pg_policy p WHERE p.polrelid = c.oid) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s "
            "AND c.relkind = 'r'",
            (f"memdir_{scope}",),
        ).fetchall()
    return {str(r[0]): (bool(r[1]), bool(r[2]), int(r[3])) for r in rows}


@pytest.fixture
def app_role(pg_admin_url: str) -> Iterator[str]:
    """A second login role with no rights of its own (roles are the server's: named per
    database, made and dropped by the superuser after the test)."""
    role = "app_" + uuid.uuid4().hex[:10]
    with psycopg.connect(pg_admin_url, autocommit=True) as db:
        db.execute(f"CREATE ROLE {role} LOGIN")
    try:
        yield role
    finally:
        with psycopg.connect(pg_admin_url, autocommit=True) as db:
            db.execute(f"DROP OWNED BY {role}")
            db.execute(f"DROP ROLE {role}")


def grant(pg_url: str, role: str, scope: str, create: bool) -> None:
    """What a role needs to use a scope it does not own, granted by the owner (pg_url's
    role): its tables' rows and sequences, and, to migrate it, CREATE on its schema."""
    schema = f"memdir_{scope}"
    with psycopg.connect(pg_url, autocommit=True) as db:
        db.execute(f"GRANT USAGE{', CREATE' if create else ''} ON SCHEMA {schema} TO {role}")
        db.execute(
            f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {role}"
        )
        db.execute(f"GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA {schema} TO {role}")


def everyday_use(mem: Memory) -> None:
    """The store's ordinary work, each tier and both bulk paths (facts added many at once,
    facts imported), under whatever security the scope has."""
    session = mem.start_session()
    mem.bind_session(session.id)
    first = mem.add_fact("Deploys go out on Tuesdays", "convention")
    newer = mem.supersede_fact(first.id, "Deploys go out on Wednesdays")
    gone = mem.add_fact("A fact removed later", "learning")
    mem.remove_fact(gone.id)
    mem.store.set_value("distill", "2026-03-02T00:00:00Z")
    mem.start_task("build")
    hot = mem.hot()
    mem.hot_append("- a hot line")
    mem.hot_append("- another hot line")  # the body it replaces: its hash to document_past
    mem.write_procedure("deploy", "# Deploy\n1. build\n")
    mem.write_entry("api-style", "how the API is written", "REST, versioned paths")
    mem.daily_append("worked on deploys")
    assert [h.id for h in mem.search("wednesdays", mode="lexical")] == [newer.id]
    assert mem.store.get_value("distill") == "2026-03-02T00:00:00Z"
    assert mem.hot() == hot + "- a hot line\n- another hot line\n"
    assert "api-style" in [e.name for e in mem.entries()]
    assert mem.procedure("deploy").content == "# Deploy\n1. build\n"
    past = mem.store.documents_known(["HOT.md"])["HOT.md"].past
    assert body_hash(hot + "- a hot line\n") in past
    report = doctor.run(mem)
    assert not [f for f in report.findings if f.check.startswith("db.")], report.findings


def test_l4_w1_a_connection_of_one_scope_reads_and_writes_no_row_of_another(
    tmp_path: Path, pg_url: str
) -> None:  # L4 W1
    with (
        Memory(env=env_of(tmp_path, "a", pg_url, "a")) as a,
        Memory(env=env_of(tmp_path, "b", pg_url, "b")) as b,
    ):
        a.add_fact("Scope a's own fact", "learning")
        theirs = b.add_fact("Scope b's own fact", "learning")
        b.store.set_value("b.value", "b's")
        with a.store._read() as cur:  # type: ignore[attr-defined]
            # by qualified name: the tables are there, their rows are not a's to see
            for table in ("facts", "kv", "lex_terms", "lex_docs", "documents"):
                cur.execute(f"SELECT count(*) FROM memdir_b.{table}")
                assert cur.fetchone()[0] == 0, table
            cur.execute("SELECT count(*) FROM memdir_a.facts")
            assert cur.fetchone()[0] == 1
        with pytest.raises(StorageError, match="row-level security") as refused:
            with a.store._write() as cur:  # type: ignore[attr-defined]
                cur.execute("INSERT INTO memdir_b.kv VALUES ('planted', 'by a')")
        assert "\n" not in str(refused.value)
        with a.store._write() as cur:  # type: ignore[attr-defined]
            cur.execute("UPDATE memdir_b.facts SET content = 'changed by a'")
            assert cur.rowcount == 0
            cur.execute("DELETE FROM memdir_b.kv")
            assert cur.rowcount == 0
        # a search path changed under the store (a pooler, a hand): b's tables, none of b's rows
        with a.store._read() as cur:  # type: ignore[attr-defined]
            cur.execute("SET search_path TO memdir_b")
        assert a.store.get_fact(theirs.id) is None and a.store.count_facts() == {}
        with pytest.raises(StorageError, match="row-level security"):
            a.store.add_fact("learning", "written through the wrong path", NOW, BY, NOW)
        assert b.store.get_fact(theirs.id) == theirs
        assert b.store.get_value("b.value") == "b's" and b.store.get_value("planted") is None
        assert b.store.count_facts() == {"active": 1}
        with a.store._read() as cur:  # type: ignore[attr-defined]
            cur.execute("SET search_path TO memdir_a")
        line = doctor.run(a).database["row_security"]
    assert line.startswith("on: ") and "memdir_a" in line


def test_l4_w1_row_level_security_is_on_for_a_scope_its_owner_makes_and_work_goes_on(
    tmp_path: Path, pg_url: str
) -> None:  # L4 W1 (migration 12)
    with Memory(env=env_of(tmp_path, "a", pg_url, "a")) as mem:
        everyday_use(mem)
        assert mem.store.schema_version() == LATEST == 13
        ids = mem.add_facts([(f"Bulk fact {i} of the owner", "learning") for i in range(STAGE_AT)])
        hits = mem.search("owner", mode="lexical", limit=3)
        assert len(hits) == 3 and {h.id for h in hits} <= set(ids)
        with mem.store._read() as cur:  # type: ignore[attr-defined]
            # the postings went in through the session's staging table, COPY's speed
            cur.execute("SELECT to_regclass('pg_temp.memdir_stage_lex_terms') IS NOT NULL")
            assert cur.fetchone()[0]
            cur.execute("SELECT count(*) FROM pg_temp.memdir_stage_lex_terms")
            assert cur.fetchone()[0] == 0  # emptied by its use
        report = doctor.run(mem)
    secured = policies(pg_url, "a")
    assert "document_past" in secured and "schema_migrations" in secured
    assert set(secured.values()) == {(True, True, 1)}  # every table: enabled, forced, one policy
    assert report.database["row_security"].startswith("on: ")
    assert "row-level security: on: " in render(report)


def test_l4_w1_a_superuser_is_told_it_is_not_held(tmp_path: Path, pg_admin_url: str) -> None:
    """L4: no policy holds a superuser, and doctor says so."""
    with Memory(env=env_of(tmp_path, "a", pg_admin_url, "a")) as mem:  # postgres: a superuser
        mem.add_fact("A fact", "learning")
        line = doctor.run(mem).database["row_security"]
    assert line.startswith("on, but not for this role: postgres is a superuser")


def test_l4_the_role_of_the_suites_stores_is_held_by_row_level_security(
    tmp_path: Path, pg_url: str
) -> None:  # L4 W1
    """The role the suite's stores connect as (pg_url, which is MEMDIR_DATABASE_URL in the
    PostgreSQL lanes: tests/conftest.py) is neither a superuser nor BYPASSRLS, so the scope
    policies hold every test of the lanes: doctor says row-level security is on (not "on,
    but not for this role"), and a session of that role that does not name the scope reads
    none of its rows, while one that does reads them."""
    if TEAM:  # run in a lane: its stores are at this URL
        assert os.environ["MEMDIR_DATABASE_URL"] == pg_url
    with Memory(env=env_of(tmp_path, "a", pg_url, "default")) as mem:
        mem.add_fact("Read only by the scope's own sessions", "learning")
        line = doctor.run(mem).database["row_security"]
    assert line == "on: every table of memdir_default admits only this scope's connections"
    with psycopg.connect(pg_url, autocommit=True) as db:
        role = db.execute(
            "SELECT rolname, rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user"
        ).fetchone()
        assert role == (OWNER, False, False)
        assert db.execute("SELECT count(*) FROM memdir_default.facts").fetchone() == (0,)
    with look(pg_url) as db:
        assert db.execute("SELECT count(*) FROM memdir_default.facts").fetchone() == (1,)


def test_l4_w1_a_scope_at_schema_11_migrates_once_and_its_past_hashes_leave_kv(
    tmp_path: Path, pg_url: str
) -> None:  # L4 W1 (migration 12)
    at_schema_11(pg_url, "old")
    assert policies(pg_url, "old")["kv"] == (False, False, 0)
    with Memory(env=env_of(tmp_path, "a", pg_url, "old")) as mem:
        assert mem.store.schema_version() == LATEST
        known = mem.store.documents_known(["HOT.md"])["HOT.md"]
        assert known.past == {body_hash("- then\n"), body_hash("- before\n")}
        # kv holds values only: its listing and an export carry no past hashes
        assert list(mem.store.archive_rows("kv")) == [
            {"key": "distill", "value": "2026-03-01T00:00:00Z"}
        ]
        assert mem.hot() == "- now\n"
        everyday_use(mem)
        before = policies(pg_url, "old")
        with mem.store._write() as cur:  # type: ignore[attr-defined]
            assert secure(cur) and secure(cur)  # again: nothing changes
    assert set(before.values()) == {(True, True, 1)} and policies(pg_url, "old") == before
    with Memory(env=env_of(tmp_path, "b", pg_url, "old")) as again:  # opened again: no migration
        assert again.store.schema_version() == LATEST
        assert again.store.documents_known(["HOT.md"])["HOT.md"].past >= known.past
    with look(pg_url, "old") as db:  # as the scope: the policy admits its rows only
        versions = db.execute("SELECT version FROM memdir_old.schema_migrations").fetchall()
    assert [v for (v,) in versions] == [9, 10, 11, 12, 13]


def test_l4_w1_an_old_export_s_past_hashes_go_to_their_table_on_import(
    tmp_path: Path, pg_url: str
) -> None:  # L4 W1 X
    with Memory(env=env_of(tmp_path, "a", pg_url, "a")) as mem:
        mem.hot_append("- a line")
        mem.store.restore_rows(
            {"kv": [{"key": PAST_KEY + "HOT.md", "value": "abc"}, {"key": "k", "value": "v"}]}
        )
        assert mem.store.documents_known(["HOT.md"])["HOT.md"].past == {"abc"}
        assert [r["key"] for r in mem.store.archive_rows("kv")] == ["k"]


def test_l4_w1_a_role_that_does_not_own_the_tables_migrates_without_it_and_doctor_says_why(
    tmp_path: Path, pg_url: str, app_role: str
) -> None:  # L4 W1 (migration 12)
    at_schema_11(pg_url, "shared")
    grant(pg_url, app_role, "shared", create=True)
    with Memory(env=env_of(tmp_path, "app", as_role(pg_url, app_role), "shared")) as mem:
        assert mem.store.schema_version() == LATEST  # migrated: the past hashes moved, no policy
        assert mem.store.documents_known(["HOT.md"])["HOT.md"].past
        everyday_use(mem)
        report = doctor.run(mem)
    line = report.database["row_security"]
    assert line.startswith("off: ") and f"role {app_role} does not own" in line
    assert f"owner {OWNER}" in line and "\n" not in line
    assert f"row-level security: {line}" in render(report)
    assert not any(enabled for enabled, _, _ in policies(pg_url, "shared").values())


def test_l4_w1_a_role_granted_a_secured_scope_works_within_its_policy(
    tmp_path: Path, pg_url: str, app_role: str
) -> None:  # L4 W1
    with Memory(env=env_of(tmp_path, "owner", pg_url, "team")) as mem:
        mem.add_fact("Made by the owner", "learning")
    grant(pg_url, app_role, "team", create=False)
    database = pg_url.split("?")[0].rsplit("/", 1)[1]
    with psycopg.connect(pg_url, autocommit=True) as db:  # no temporary tables for it
        db.execute(f"REVOKE TEMPORARY ON DATABASE {database} FROM PUBLIC")
    with Memory(env=env_of(tmp_path, "app", as_role(pg_url, app_role), "team")) as mem:
        assert [f.content for f in mem.store.recent_facts(5)] == ["Made by the owner"]
        everyday_use(mem)
        ids = mem.add_facts([(f"Bulk fact {i} of the app", "learning") for i in range(STAGE_AT)])
        assert len(ids) == STAGE_AT  # in by unnest: no staging table may be made
        hits = mem.search("app", mode="lexical", limit=3)
        assert len(hits) == 3 and {h.id for h in hits} <= set(ids)
        with mem.store._read() as cur:  # type: ignore[attr-defined]
            cur.execute("SELECT to_regclass('pg_temp.memdir_stage_lex_terms')")
            assert cur.fetchone()[0] is None
        assert doctor.run(mem).database["row_security"].startswith("on: ")


def test_l4_w1_migrate_moves_a_store_into_a_secured_scope_and_back(
    tmp_path: Path, pg_url: str, run: Any, monkeypatch: pytest.MonkeyPatch
) -> None:  # L4 W1 (migrate)
    """`memdir migrate` both ways as the owner, so the scope it makes is secured: every row
    goes in through the policies (the bulk paths' inserts) and comes back out verified."""
    monkeypatch.delenv("MEMDIR_DATABASE_URL", raising=False)  # the source: memory.db
    with Memory() as mem:
        first = mem.add_fact("The API lives at v1", "decision")
        mem.supersede_fact(first.id, "The API lives at v2")
        # past STAGE_AT rows: facts and postings go in through the session's staging tables
        mem.add_facts(
            [(f"Bulk fact number {i} about deploys", "learning") for i in range(STAGE_AT)]
        )
        mem.hot_append("- a hot line")
        mem.store.set_value("distill", "2026-03-01T00:00:00Z")
        facts = sorted(mem.store.archive_rows("fact"), key=lambda r: r["id"])
    res = run("migrate", "--to", pg_url)
    assert res.code == 0, res.err
    with Memory(env=env_of(tmp_path, "team", pg_url, "default")) as mem:
        assert doctor.run(mem).database["row_security"].startswith("on: ")
        assert mem.store.count_facts() == {"active": STAGE_AT + 1, "superseded": 1}
        assert sorted(mem.store.archive_rows("fact"), key=lambda r: r["id"]) == facts
        assert [h.content for h in mem.search("v2", mode="lexical")] == ["The API lives at v2"]
    back = tmp_path / "back"
    back.mkdir()
    res = run(
        "--state-dir", str(back), "migrate", "--to", "local", env={"MEMDIR_DATABASE_URL": pg_url}
    )
    assert res.code == 0 and "every record verified" in res.out, res.err
    with Memory(str(back)) as mem:
        assert sorted(mem.store.archive_rows("fact"), key=lambda r: r["id"]) == facts
        assert mem.hot() == "- a hot line\n"
