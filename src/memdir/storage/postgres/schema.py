"""The tables of one scope (a schema of its own, `memdir_<scope>`), and their migrations.

The schema version is the store's, shared with the SQLite backend (sqlite/migrations.py):
version 9 here holds what SQLite's first nine migrations hold, and from 10 on they go one
for one, so an export records the same version whichever backend wrote it, and a later
migration is added to both. What FTS5
keeps in virtual tables is kept in plain ones (lexical.py); the triggers of memory.db are
the store's own code here (store.py), in the same transaction as the write.
"""

from __future__ import annotations

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


MIGRATIONS: list[Migration] = [
    (9, "the store as of SQLite's schema 9: rows, the lexical index, groups, vectors", _base),
    (10, "the listing of global/ kept whole", _entry_listing),
    (11, "the markdown tiers as rows, hand edits' conflicts; a fact's successors", _documents),
]
LATEST = MIGRATIONS[-1][0]
