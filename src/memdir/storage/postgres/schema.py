"""The tables of one scope (a schema of its own, `memdir_<scope>`), and their migrations.

The schema version is the store's, shared with the SQLite backend (sqlite/migrations.py):
version 9 here holds what SQLite's first nine migrations hold, and from 10 on they go one
for one, so an export records the same version whichever backend wrote it, and a later
migration is added to both. What FTS5
keeps in virtual tables is kept in plain ones (lexical.py); the triggers of memory.db are
the store's own code here (store.py), in the same transaction as the write.
"""

from __future__ import annotations

from typing import NamedTuple

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    import psycopg

    Migration = tuple[int, str, Callable[["psycopg.Cursor[tuple[object, ...]]"], None]]

BASE = """
CREATE TABLE facts (
    id            BIGINT PRIMARY KEY,
    category      TEXT COLLATE "C" NOT NULL,
    content       TEXT COLLATE "C" NOT NULL,
    status        TEXT COLLATE "C" NOT NULL DEFAULT 'active'
                  CHECK (status IN ('active', 'superseded', 'removed')),
    created       TEXT COLLATE "C" NOT NULL,
    updated       TEXT COLLATE "C" NOT NULL,
    supersedes    BIGINT REFERENCES facts(id) DEFERRABLE INITIALLY DEFERRED,
    superseded_by BIGINT REFERENCES facts(id) DEFERRABLE INITIALLY DEFERRED,
    session_id    TEXT COLLATE "C",
    surface       TEXT COLLATE "C",
    agent         TEXT COLLATE "C",
    valid_from    TEXT COLLATE "C",
    valid_to      TEXT COLLATE "C",
    norm          BIGINT
);
CREATE INDEX facts_session ON facts(session_id, id) WHERE session_id IS NOT NULL;
CREATE INDEX facts_norm ON facts(norm) WHERE status = 'active';
CREATE INDEX facts_status ON facts(status, id);
CREATE TABLE fact_sketch (
    key     BIGINT NOT NULL,
    fact_id BIGINT NOT NULL,
    PRIMARY KEY (key, fact_id)
);
CREATE INDEX fact_sketch_fact ON fact_sketch(fact_id);
CREATE TABLE fact_usage (
    fact_id  BIGINT PRIMARY KEY,
    hits     BIGINT NOT NULL,
    last_hit TEXT COLLATE "C" NOT NULL
);
CREATE TABLE sessions (
    id        TEXT COLLATE "C" PRIMARY KEY,
    surface   TEXT COLLATE "C" NOT NULL,
    parent_id TEXT COLLATE "C",
    started   TEXT COLLATE "C" NOT NULL,
    ended     TEXT COLLATE "C"
);
CREATE TABLE session_writes (
    session_id TEXT COLLATE "C" NOT NULL,
    kind       TEXT COLLATE "C" NOT NULL,
    n          BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (session_id, kind)
);
CREATE TABLE tasks (
    id        TEXT COLLATE "C" PRIMARY KEY,
    parent_id TEXT COLLATE "C",
    state     TEXT COLLATE "C" NOT NULL DEFAULT 'running'
              CHECK (state IN ('running', 'done', 'failed', 'cancelled')),
    started   TEXT COLLATE "C" NOT NULL,
    ended     TEXT COLLATE "C"
);
CREATE TABLE kv (key TEXT COLLATE "C" PRIMARY KEY, value TEXT COLLATE "C" NOT NULL);
CREATE TABLE entry_cache (
    name        TEXT COLLATE "C" PRIMARY KEY,
    mtime_ns    BIGINT NOT NULL,
    size        BIGINT NOT NULL,
    description TEXT COLLATE "C" NOT NULL,
    updated     TEXT COLLATE "C",
    error       TEXT COLLATE "C",
    meta        TEXT COLLATE "C" NOT NULL,
    body_key    BIGINT,
    sketch      TEXT COLLATE "C" NOT NULL DEFAULT ''
);
CREATE TABLE procedure_prints (
    name     TEXT COLLATE "C" PRIMARY KEY,
    mtime_ns BIGINT NOT NULL,
    size     BIGINT NOT NULL,
    body_key BIGINT,
    sketch   TEXT COLLATE "C" NOT NULL
);
CREATE TABLE files (
    path     TEXT COLLATE "C" PRIMARY KEY,
    kind     TEXT COLLATE "C" NOT NULL,
    mtime_ns BIGINT NOT NULL,
    size     BIGINT NOT NULL,
    hash     TEXT COLLATE "C" NOT NULL
);
CREATE TABLE chunks (
    id         BIGINT PRIMARY KEY,
    path       TEXT COLLATE "C" NOT NULL,
    kind       TEXT COLLATE "C" NOT NULL,
    start_line INTEGER NOT NULL,
    end_line   INTEGER NOT NULL,
    date       TEXT COLLATE "C",
    content    TEXT COLLATE "C" NOT NULL,
    hash       TEXT COLLATE "C" NOT NULL
);
CREATE INDEX chunks_path ON chunks(path, start_line);
CREATE TABLE vectors (
    id       BIGSERIAL PRIMARY KEY,
    model    TEXT COLLATE "C" NOT NULL,
    owner    TEXT COLLATE "C" NOT NULL CHECK (owner IN ('fact', 'chunk')),
    owner_id BIGINT NOT NULL,
    hash     TEXT COLLATE "C" NOT NULL,
    vec      BYTEA NOT NULL,
    UNIQUE (model, owner, owner_id)
);
CREATE INDEX vectors_hash ON vectors(model, hash);
CREATE TABLE search_groups (
    id      BIGINT PRIMARY KEY,
    owner   TEXT COLLATE "C" NOT NULL,
    first   BIGINT NOT NULL,
    last    BIGINT NOT NULL,
    members INTEGER NOT NULL
);
CREATE INDEX search_groups_owner ON search_groups(owner, first);
-- The lexical index (lexical.py): FTS5's tokens, postings and statistics, by index
-- (0 active facts, 1 superseded facts, 2 chunks, 3 search groups).
CREATE TABLE lex_docs (
    idx SMALLINT NOT NULL,
    doc BIGINT NOT NULL,
    len INTEGER NOT NULL,
    PRIMARY KEY (idx, doc)
);
CREATE TABLE lex_terms (
    idx  SMALLINT NOT NULL,
    term TEXT COLLATE "C" NOT NULL,
    doc  BIGINT NOT NULL,
    pos  INTEGER[] NOT NULL,
    PRIMARY KEY (idx, term, doc)
);
CREATE INDEX lex_terms_doc ON lex_terms(idx, doc);
CREATE TABLE lex_stats (
    idx    SMALLINT PRIMARY KEY,
    nrow   BIGINT NOT NULL,
    ntoken BIGINT NOT NULL
);
"""


def _base(cur: psycopg.Cursor[tuple[object, ...]]) -> None:
    cur.execute(BASE)


def _entry_listing(cur: psycopg.Cursor[tuple[object, ...]]) -> None:
    """SQLite's 10: the listing of global/ kept whole (Store.entry_listing), derived."""
    cur.execute(
        "CREATE TABLE entry_listing (id INTEGER PRIMARY KEY CHECK (id = 1), "
        'listing TEXT COLLATE "C" NOT NULL)'
    )


def _documents(cur: psycopg.Cursor[tuple[object, ...]]) -> None:
    """SQLite's 11: the markdown tiers as rows (documents.py), each machine's memory root a
    rendered view of them. A revision is drawn from one sequence for the whole scope, so
    max(revision) is the scope's change counter: a view that saw it is current. A deleted
    document keeps its row with no body, so the deletion reaches every view. A hand edit
    made against a revision that moved meanwhile is kept whole in document_conflicts. And,
    as on SQLite, an index of the facts that supersede a fact: a fork gives one fact two
    successors, and a history is read by them (F3)."""
    cur.execute(
        """
        CREATE SEQUENCE document_revisions;
        CREATE TABLE documents (
            path       TEXT COLLATE "C" PRIMARY KEY,
            body       TEXT COLLATE "C",
            revision   BIGINT NOT NULL UNIQUE,
            updated_at TEXT COLLATE "C" NOT NULL,
            updated_by TEXT COLLATE "C" NOT NULL
        );
        CREATE TABLE document_conflicts (
            id         BIGSERIAL PRIMARY KEY,
            path       TEXT COLLATE "C" NOT NULL,
            base       BIGINT NOT NULL,
            stored     BIGINT NOT NULL,
            body       TEXT COLLATE "C" NOT NULL,
            made_at    TEXT COLLATE "C" NOT NULL,
            made_by    TEXT COLLATE "C" NOT NULL
        );
        CREATE INDEX IF NOT EXISTS facts_supersedes ON facts(supersedes)
            WHERE supersedes IS NOT NULL;
        """
    )


def _past_and_row_security(cur: psycopg.Cursor[tuple[object, ...]]) -> None:
    """SQLite's 12 (nothing there): the hashes of the bodies each document held before, a
    view's means of telling a file it rendered long ago from a hand edit (documents.py),
    move out of kv into a table of their own, so kv's listing and exports hold only values.
    Then row-level security (secure) on every table of the scope, where the role may."""
    cur.execute(
        f"""
        CREATE TABLE IF NOT EXISTS document_past (
            path   TEXT COLLATE "C" PRIMARY KEY,
            hashes TEXT COLLATE "C" NOT NULL
        );
        INSERT INTO document_past (path, hashes)
            SELECT substr(key, {len(PAST_KEY) + 1}), value FROM kv
            WHERE left(key, {len(PAST_KEY)}) = '{PAST_KEY}'
            ON CONFLICT (path) DO NOTHING;
        DELETE FROM kv WHERE left(key, {len(PAST_KEY)}) = '{PAST_KEY}';
        """
    )
    secure(cur)


PAST_KEY = "documents.past:"  # where schema 11 kept them, in kv: the key's prefix

# -- row-level security (L4): defence in depth beside the search path ----------------------
#
# The search path confines every statement memdir writes to the scope's schema. A statement
# that reaches another scope's table anyway (a schema-qualified name, a search path a
# pooler or a hand changed) meets a policy on it that admits a row only to a session whose
# `memdir.scope` names that table's schema: every memdir connection sets it at connect, to
# its own scope's (connection.py). It reads no row there and cannot write one. Only the
# owner of a table may turn it on: a role that does not own every table of the scope leaves
# it off (all or nothing), and doctor says so. A superuser or a BYPASSRLS role is never
# held by it. A later migration that adds a table ends with secure(cur) too.

POLICY = "memdir_scope"
SETTING = "memdir.scope"
_TABLES = """
SELECT c.relname, c.relrowsecurity AND c.relforcerowsecurity
         AND EXISTS (SELECT 1 FROM pg_policy p WHERE p.polrelid = c.oid AND p.polname = %s),
       pg_get_userbyid(c.relowner), pg_has_role(current_user, c.relowner, 'USAGE')
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %s AND c.relkind IN ('r', 'p') ORDER BY c.relname
"""


class TableSecurity(NamedTuple):
    name: str
    secured: bool  # enabled, forced, and the scope's policy there
    owner: str
    owned: bool  # the session's role owns it (or is a member of its owner): may secure it


def tables(cur: psycopg.Cursor[tuple[object, ...]], schema: str) -> list[TableSecurity]:
    cur.execute(_TABLES, (POLICY, schema))
    return [TableSecurity(str(n), bool(s), str(o), bool(w)) for n, s, o, w in cur.fetchall()]


def secure(cur: psycopg.Cursor[tuple[object, ...]]) -> bool:
    """Row-level security on every table of the current schema (the scope's), when the role
    owns them all; whether it is on. Idempotent: a table already secured is left as it is."""
    from psycopg import sql

    cur.execute("SELECT current_schema()")
    row = cur.fetchone()
    assert row is not None and row[0] is not None
    schema = str(row[0])
    found = tables(cur, schema)
    if not all(t.owned for t in found):
        return False
    # a subquery: one look at the setting a statement (an InitPlan), not one a row, and the
    # planner's guess of the rows it admits is a half, not the 0.5% of an equality it
    # cannot see into (which turned hash aggregates into sorts); the indexes are used as
    # without it (the columns' operators are leakproof)
    admits = sql.SQL("(SELECT current_setting({}, true) = {})").format(
        sql.Literal(SETTING), sql.Literal(schema)
    )
    for table in found:
        if table.secured:
            continue
        name = sql.Identifier(schema, table.name)
        cur.execute(
            sql.SQL(
                "ALTER TABLE {t} ENABLE ROW LEVEL SECURITY; ALTER TABLE {t} FORCE ROW LEVEL "
                "SECURITY; DROP POLICY IF EXISTS {p} ON {t}; "
                "CREATE POLICY {p} ON {t} USING ({a}) WITH CHECK ({a})"
            ).format(t=name, p=sql.Identifier(POLICY), a=admits)
        )
    return True


def _vector_range(cur: psycopg.Cursor[tuple[object, ...]]) -> None:
    """SQLite's 13 counts each model's vectors by triggers, since its rowids are reused.
    Here ids come from a sequence, never reused, so the count and the top id tell every
    change (vector_generation); an index on (model, id) makes the top id, and the rows a
    warm matrix lacks (iter_vectors after it), a range read. Only the table's owner may
    index it: a role granted the scope migrates without (the reads are as before)."""
    cur.execute("SELECT current_schema()")
    row = cur.fetchone()
    assert row is not None and row[0] is not None
    if all(t.owned for t in tables(cur, str(row[0])) if t.name == "vectors"):
        cur.execute("CREATE INDEX IF NOT EXISTS vectors_model_id ON vectors (model, id)")


MIGRATIONS: list[Migration] = [
    (9, "the store as of SQLite's schema 9: rows, the lexical index, groups, vectors", _base),
    (10, "the listing of global/ kept whole", _entry_listing),
    (11, "the markdown tiers as rows, hand edits' conflicts; a fact's successors", _documents),
    (
        12,
        "the view's past hashes in a table; row-level security where the role owns the tables",
        _past_and_row_security,
    ),
    (13, "vectors indexed by model and id", _vector_range),
]
LATEST = MIGRATIONS[-1][0]
