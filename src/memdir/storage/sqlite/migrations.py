"""Ordered, named, recorded schema migrations. Never edit one that has been released: add a
new one. Each runs in its own transaction together with its row in `schema_migrations`.
"""

from __future__ import annotations

from ...lazy import lazy

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Callable

    Migration = tuple[int, str, Callable[[sqlite3.Connection], None]]
else:
    sqlite3 = lazy("sqlite3")  # imported when the database is first opened (~2 ms)


def run_script(db: sqlite3.Connection, script: str) -> None:
    """executescript() would COMMIT the migration's transaction first; run statement by
    statement instead (sqlite3.complete_statement keeps trigger bodies whole)."""
    statement = ""
    for line in script.splitlines(keepends=True):
        statement += line
        if sqlite3.complete_statement(statement):
            db.execute(statement)
            statement = ""
    if statement.strip():
        db.execute(statement)


def _facts_and_sessions(db: sqlite3.Connection) -> None:
    run_script(
        db,
        """
        CREATE TABLE facts (
            id            INTEGER PRIMARY KEY,
            category      TEXT NOT NULL,
            content       TEXT NOT NULL,
            status        TEXT NOT NULL DEFAULT 'active'
                          CHECK (status IN ('active', 'superseded', 'removed')),
            created       TEXT NOT NULL,
            updated       TEXT NOT NULL,
            supersedes    INTEGER REFERENCES facts(id),
            superseded_by INTEGER REFERENCES facts(id),
            session_id    TEXT,
            surface       TEXT,
            agent         TEXT
        );
        -- Partial: most facts carry no session, and a full index on a NULL column costs
        -- ~7% of the bulk insert rate. `session_id = ?` still uses it.
        CREATE INDEX facts_session ON facts(session_id) WHERE session_id IS NOT NULL;

        -- External-content FTS5 over active facts only: superseded and removed facts leave
        -- the index, so search never sees them and never pays to rank them.
        CREATE VIRTUAL TABLE facts_fts USING fts5(
            content, content='facts', content_rowid='id',
            tokenize='porter unicode61 remove_diacritics 2'
        );
        CREATE TRIGGER facts_ai AFTER INSERT ON facts WHEN new.status = 'active' BEGIN
            INSERT INTO facts_fts(rowid, content) VALUES (new.id, new.content);
        END;
        CREATE TRIGGER facts_au_leave AFTER UPDATE ON facts
        WHEN old.status = 'active' AND (new.status != 'active' OR new.content != old.content) BEGIN
            INSERT INTO facts_fts(facts_fts, rowid, content) VALUES ('delete', old.id, old.content);
        END;
        CREATE TRIGGER facts_au_enter AFTER UPDATE ON facts
        WHEN new.status = 'active' AND (old.status != 'active' OR new.content != old.content) BEGIN
            INSERT INTO facts_fts(rowid, content) VALUES (new.id, new.content);
        END;
        CREATE TRIGGER facts_ad AFTER DELETE ON facts WHEN old.status = 'active' BEGIN
            INSERT INTO facts_fts(facts_fts, rowid, content) VALUES ('delete', old.id, old.content);
        END;

        CREATE TABLE sessions (
            id        TEXT PRIMARY KEY,
            surface   TEXT NOT NULL,
            parent_id TEXT,
            started   TEXT NOT NULL,
            ended     TEXT
        );
        CREATE TABLE session_writes (
            session_id TEXT NOT NULL,
            kind       TEXT NOT NULL,
            n          INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (session_id, kind)
        ) WITHOUT ROWID;
        """,
    )


def migrate(db: sqlite3.Connection) -> None:
    """Bring the schema up to date. Safe when several processes open a new store at once:
    each migration re-checks under BEGIN IMMEDIATE, so exactly one process applies it."""
    latest = MIGRATIONS[-1][0]
    if _user_version(db) >= latest:
        return
    for version, name, apply in MIGRATIONS:
        db.execute("BEGIN IMMEDIATE")
        try:
            if _user_version(db) < version:
                db.execute(
                    "CREATE TABLE IF NOT EXISTS schema_migrations "
                    "(version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied TEXT NOT NULL)"
                )
                apply(db)
                db.execute(
                    "INSERT INTO schema_migrations VALUES (?, ?, strftime('%Y-%m-%dT%H:%M:%SZ'))",
                    (version, name),
                )
                db.execute(f"PRAGMA user_version = {version:d}")
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise


def _user_version(db: sqlite3.Connection) -> int:
    return int(db.execute("PRAGMA user_version").fetchone()[0])


def _tasks_and_entry_cache(db: sqlite3.Connection) -> None:
    run_script(
        db,
        """
        CREATE TABLE tasks (
            id        TEXT PRIMARY KEY,
            parent_id TEXT,
            state     TEXT NOT NULL DEFAULT 'running'
                      CHECK (state IN ('running', 'done', 'failed', 'cancelled')),
            started   TEXT NOT NULL,
            ended     TEXT
        );
        CREATE INDEX tasks_parent ON tasks(parent_id) WHERE parent_id IS NOT NULL;

        -- What the files of global/ said when last read, keyed by their (mtime, size): the
        -- files stay the source of truth (G4), and recall need not parse 1,000 frontmatters.
        CREATE TABLE entry_cache (
            name     TEXT PRIMARY KEY,
            mtime_ns INTEGER NOT NULL,
            size     INTEGER NOT NULL,
            meta     TEXT NOT NULL
        ) WITHOUT ROWID;
        """,
    )


def _settings_table(db: sqlite3.Connection) -> None:
    db.execute("CREATE TABLE kv (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID")


def _entry_cache_columns(db: sqlite3.Connection) -> None:
    """Recall needs only names, descriptions and dates: keep them in columns, so listing
    1,000 unchanged entries decodes no JSON. It is a cache: dropping it loses nothing."""
    run_script(
        db,
        """
        DROP TABLE entry_cache;
        CREATE TABLE entry_cache (
            name        TEXT PRIMARY KEY,
            mtime_ns    INTEGER NOT NULL,
            size        INTEGER NOT NULL,
            description TEXT NOT NULL,
            updated     TEXT,
            error       TEXT,
            meta        TEXT NOT NULL  -- the whole Entry as JSON, for `memdir list`
        ) WITHOUT ROWID;
        """,
    )


def _search_index(db: sqlite3.Connection) -> None:
    run_script(
        db,
        """
        -- Q1/Q3: every markdown file of the memory root, as chunks. `files` holds what each
        -- file was when chunked (mtime, size, content hash): a changed file is chunked again.
        CREATE TABLE files (
            path     TEXT PRIMARY KEY,
            kind     TEXT NOT NULL,
            mtime_ns INTEGER NOT NULL,
            size     INTEGER NOT NULL,
            hash     TEXT NOT NULL
        ) WITHOUT ROWID;
        CREATE TABLE chunks (
            id         INTEGER PRIMARY KEY,
            path       TEXT NOT NULL,
            kind       TEXT NOT NULL,
            start_line INTEGER NOT NULL,
            end_line   INTEGER NOT NULL,
            date       TEXT,
            content    TEXT NOT NULL,
            hash       TEXT NOT NULL
        );
        CREATE INDEX chunks_path ON chunks(path);
        CREATE VIRTUAL TABLE chunks_fts USING fts5(
            content, content='chunks', content_rowid='id',
            tokenize='porter unicode61 remove_diacritics 2'
        );
        CREATE TRIGGER chunks_ai AFTER INSERT ON chunks BEGIN
            INSERT INTO chunks_fts(rowid, content) VALUES (new.id, new.content);
        END;
        CREATE TRIGGER chunks_ad AFTER DELETE ON chunks BEGIN
            INSERT INTO chunks_fts(chunks_fts, rowid, content)
                VALUES ('delete', old.id, old.content);
            DELETE FROM vectors WHERE owner = 'chunk' AND owner_id = old.id;
        END;

        -- Q2: one float32 vector per (model, fact or chunk), little-endian, L2-normalised;
        -- `hash` is the text's, so unchanged text is never embedded twice.
        CREATE TABLE vectors (
            id       INTEGER PRIMARY KEY,
            model    TEXT NOT NULL,
            owner    TEXT NOT NULL CHECK (owner IN ('fact', 'chunk')),
            owner_id INTEGER NOT NULL,
            hash     TEXT NOT NULL,
            vec      BLOB NOT NULL,
            UNIQUE (model, owner, owner_id)
        );
        CREATE INDEX vectors_hash ON vectors(model, hash);
        CREATE TRIGGER facts_leave_vectors AFTER UPDATE OF status ON facts
        WHEN old.status = 'active' AND new.status != 'active' BEGIN
            DELETE FROM vectors WHERE owner = 'fact' AND owner_id = old.id;
        END;
        """,
    )


def _curation(db: sqlite3.Connection) -> None:
    """F3, N1: validity windows, the duplicate guard's keys, a full-text index of what
    facts used to say (search --as-of), and when each fact was last found."""
    run_script(
        db,
        """
        -- When the fact held: from its creation (or the time given) until it was superseded
        -- or removed. NULL valid_to: it still holds.
        ALTER TABLE facts ADD COLUMN valid_from TEXT;
        ALTER TABLE facts ADD COLUMN valid_to TEXT;
        UPDATE facts SET valid_from = created;
        UPDATE facts SET valid_to = updated WHERE status != 'active';
        -- similarity.text_key of the content: an exact duplicate of an active fact.
        ALTER TABLE facts ADD COLUMN norm INTEGER;
        CREATE INDEX facts_norm ON facts(norm) WHERE status = 'active';
        -- similarity.band_keys of each fact: the candidates of a near duplicate.
        CREATE TABLE fact_sketch (
            key     INTEGER NOT NULL,
            fact_id INTEGER NOT NULL,
            PRIMARY KEY (key, fact_id)
        ) WITHOUT ROWID;

        -- What superseded facts said, for `search --as-of` (active facts are in facts_fts).
        CREATE VIRTUAL TABLE facts_past_fts USING fts5(
            content, content='facts', content_rowid='id',
            tokenize='porter unicode61 remove_diacritics 2'
        );
        INSERT INTO facts_past_fts(rowid, content)
            SELECT id, content FROM facts WHERE status = 'superseded';
        CREATE TRIGGER facts_past_ai AFTER INSERT ON facts WHEN new.status = 'superseded' BEGIN
            INSERT INTO facts_past_fts(rowid, content) VALUES (new.id, new.content);
        END;
        CREATE TRIGGER facts_past_au AFTER UPDATE OF status ON facts
        WHEN new.status = 'superseded' AND old.status != 'superseded' BEGIN
            INSERT INTO facts_past_fts(rowid, content) VALUES (new.id, new.content);
        END;
        CREATE TRIGGER facts_past_ad AFTER DELETE ON facts WHEN old.status = 'superseded' BEGIN
            INSERT INTO facts_past_fts(facts_past_fts, rowid, content)
                VALUES ('delete', old.id, old.content);
        END;

        -- The last time a search returned the fact (doctor: facts never recalled).
        CREATE TABLE fact_usage (
            fact_id  INTEGER PRIMARY KEY,
            hits     INTEGER NOT NULL,
            last_hit TEXT NOT NULL
        );
        """,
    )
    from ... import similarity

    rows = db.execute("SELECT id, content FROM facts WHERE status = 'active'").fetchall()
    db.executemany(
        "UPDATE facts SET norm = ? WHERE id = ?", [(similarity.text_key(c), i) for i, c in rows]
    )
    keys = similarity.sketches([c for _, c in rows])
    sketch = [(key, i) for (i, _), ks in zip(rows, keys, strict=True) for key in ks]
    sketch.sort(key=lambda row: row[0])  # in key order: the b-tree fills page by page
    db.executemany("INSERT OR IGNORE INTO fact_sketch (key, fact_id) VALUES (?, ?)", sketch)


def _entry_fingerprints(db: sqlite3.Connection) -> None:
    """The duplicate guard's view of each global entry and procedure: the key of its
    normalised body and its LSH band keys, so a write compares against 1,000 of them
    without reading them. Caches: emptied, they refill on the next read."""
    run_script(
        db,
        """
        DELETE FROM entry_cache;
        ALTER TABLE entry_cache ADD COLUMN body_key INTEGER;
        ALTER TABLE entry_cache ADD COLUMN sketch TEXT NOT NULL DEFAULT '';
        CREATE TABLE procedure_prints (
            name     TEXT PRIMARY KEY,
            mtime_ns INTEGER NOT NULL,
            size     INTEGER NOT NULL,
            body_key INTEGER,
            sketch   TEXT NOT NULL
        ) WITHOUT ROWID;
        """,
    )


def _exact_keys(db: sqlite3.Connection) -> None:
    """X5: an exact duplicate is now the same text up to case, Unicode form (NFC) and
    spacing; punctuation and markdown no longer are set aside (`credit - debit` and
    `credit + debit` were one text, refused; they are two). So every fact's key
    (`facts.norm`) is computed again; the near-duplicate band keys of a fact change only
    where its case-folded text was not NFC (the measure now folds that too), and only those
    are replaced; the entry and procedure fingerprints hold body keys of the old form, and
    are caches: emptied, they refill on the next read.

    No uniqueness rests on the key: `facts_norm` is a plain index, and the guard checks
    under the write lock. Facts that were one text and are two now simply get two keys;
    facts that are one text now and were two (an NFC and an NFD spelling, both active)
    share a key and stay, both of them: doctor reports them as exact duplicates, and
    nothing is refused or removed."""
    import unicodedata

    from ... import similarity

    rows = db.execute("SELECT id, content, status, norm FROM facts").fetchall()
    keys = [(similarity.text_key(content), fact_id) for fact_id, content, _, _ in rows]
    db.executemany(
        "UPDATE facts SET norm = ? WHERE id = ?",
        [(key, fact_id) for (key, fact_id), row in zip(keys, rows, strict=True) if key != row[3]],
    )
    gone, added = [], []
    for fact_id, content, status, _ in rows:
        folded = content.casefold()
        stable = unicodedata.is_normalized("NFC", content) and unicodedata.is_normalized(
            "NFC", folded
        )
        if status != "active" or stable:
            continue  # the words measured are what they were
        before = similarity.band_keys(similarity.words_of_normal(folded))
        gone += [(key, fact_id) for key in before]
        added += [(key, fact_id) for key in similarity.band_keys(similarity.words(content))]
    db.executemany("DELETE FROM fact_sketch WHERE key = ? AND fact_id = ?", gone)
    db.executemany("INSERT OR IGNORE INTO fact_sketch (key, fact_id) VALUES (?, ?)", added)
    db.execute("DELETE FROM entry_cache")
    db.execute("DELETE FROM procedure_prints")


def _search_groups(db: sqlite3.Connection) -> None:
    """Q3: pages of each session's facts and each indexed file's chunks as FTS5 documents
    (groups.py), kept current by the write that changes them: triggers note the session or
    file, the transaction rebuilds what changed before it commits. Built here for what is
    stored already."""
    run_script(
        db,
        """
        -- one row per document: a page of a session's facts, or a file's chunks
        CREATE TABLE search_groups (
            id      INTEGER PRIMARY KEY,
            owner   TEXT NOT NULL,     -- session:<id> or file:<path>
            first   INTEGER NOT NULL,  -- the first and last member (fact or chunk id)
            last    INTEGER NOT NULL,
            members INTEGER NOT NULL
        );
        CREATE INDEX search_groups_owner ON search_groups(owner, first);
        CREATE VIRTUAL TABLE groups_fts USING fts5(
            content, tokenize='porter unicode61 remove_diacritics 2'
        );
        CREATE TABLE groups_dirty (key TEXT PRIMARY KEY) WITHOUT ROWID;
        CREATE TRIGGER facts_group_ai AFTER INSERT ON facts
        WHEN new.session_id IS NOT NULL AND new.status = 'active' BEGIN
            INSERT OR IGNORE INTO groups_dirty VALUES ('session:' || new.session_id);
        END;
        CREATE TRIGGER facts_group_au AFTER UPDATE OF status, content ON facts
        WHEN new.session_id IS NOT NULL BEGIN
            INSERT OR IGNORE INTO groups_dirty VALUES ('session:' || new.session_id);
        END;
        CREATE TRIGGER facts_group_ad AFTER DELETE ON facts WHEN old.session_id IS NOT NULL BEGIN
            INSERT OR IGNORE INTO groups_dirty VALUES ('session:' || old.session_id);
        END;
        CREATE TRIGGER chunks_group_ai AFTER INSERT ON chunks BEGIN
            INSERT OR IGNORE INTO groups_dirty VALUES ('file:' || new.path);
        END;
        CREATE TRIGGER chunks_group_ad AFTER DELETE ON chunks BEGIN
            INSERT OR IGNORE INTO groups_dirty VALUES ('file:' || old.path);
        END;
        INSERT OR IGNORE INTO groups_dirty
            SELECT DISTINCT 'session:' || session_id FROM facts
            WHERE session_id IS NOT NULL AND status = 'active';
        INSERT OR IGNORE INTO groups_dirty SELECT DISTINCT 'file:' || path FROM chunks;
        """,
    )
    from . import groups

    groups.refresh(db)


def _entry_listing(db: sqlite3.Connection) -> None:
    """The whole listing of global/ in one row, so recall and boot read one value, not a
    row an entry (Store.entry_listing). Derived, like entry_cache: never exported."""
    db.execute(
        "CREATE TABLE entry_listing (id INTEGER PRIMARY KEY CHECK (id = 1), listing TEXT NOT NULL)"
    )


def _documents(db: sqlite3.Connection) -> None:
    """The markdown tiers as rows are PostgreSQL's (postgres/schema.py): here the files are
    the truth (storage.md), so no table. Both: the facts that supersede a fact, found by an
    index, since a fork gives a fact two successors and its history is read by them (F3)."""
    db.execute(
        "CREATE INDEX IF NOT EXISTS facts_supersedes ON facts(supersedes) "
        "WHERE supersedes IS NOT NULL"
    )


def _pending_sketches(db: sqlite3.Connection) -> None:
    """The id ranges of a bulk import's facts whose band keys are not in fact_sketch yet
    (curation.py: computed later, off the import's clock). Derived: never exported. On
    PostgreSQL 12 is the view's past hashes and row-level security (postgres/schema.py),
    which have no counterpart here; the numbers stay one for one."""
    db.execute(
        "CREATE TABLE IF NOT EXISTS fact_sketch_pending "
        "(first INTEGER PRIMARY KEY, last INTEGER NOT NULL)"
    )


def _vector_counts(db: sqlite3.Connection) -> None:
    """Q2: each model's vector count, top id and removals, kept by triggers, so that a warm
    matrix learns it is current from one row: counting 100k vectors took ~8 ms, after every
    write of a process with the model (the duplicate guard's check and the next search).
    A REPLACE deletes its row without delete triggers (recursive_triggers is off), so the
    row it replaces is counted before the insert. Derived: never exported. PostgreSQL's
    ids come from a sequence and are never reused: it counts its rows (no 13 there)."""
    run_script(
        db,
        """
        CREATE TABLE IF NOT EXISTS vector_counts (
            model   TEXT PRIMARY KEY,
            n       INTEGER NOT NULL,
            top     INTEGER NOT NULL,
            removed INTEGER NOT NULL
        ) WITHOUT ROWID;
        DELETE FROM vector_counts;
        INSERT INTO vector_counts (model, n, top, removed)
            SELECT model, count(*), max(id), 0 FROM vectors GROUP BY model;
        CREATE TRIGGER IF NOT EXISTS vectors_counted AFTER INSERT ON vectors BEGIN
            INSERT INTO vector_counts (model, n, top, removed) VALUES (new.model, 1, new.id, 0)
            ON CONFLICT (model) DO UPDATE SET n = n + 1, top = max(top, excluded.top);
        END;
        CREATE TRIGGER IF NOT EXISTS vectors_replaced BEFORE INSERT ON vectors
        WHEN EXISTS (SELECT 1 FROM vectors WHERE model = new.model AND owner = new.owner
                     AND owner_id = new.owner_id) BEGIN
            UPDATE vector_counts SET n = n - 1, removed = removed + 1 WHERE model = new.model;
        END;
        CREATE TRIGGER IF NOT EXISTS vectors_removed AFTER DELETE ON vectors BEGIN
            UPDATE vector_counts SET n = n - 1, removed = removed + 1 WHERE model = old.model;
        END;
        """,
    )


MIGRATIONS: list[Migration] = [
    (1, "facts, fts and sessions", _facts_and_sessions),
    (2, "tasks and the global entry cache", _tasks_and_entry_cache),
    (3, "key-value state (distillation watermark)", _settings_table),
    (4, "entry cache: description and dates as columns", _entry_cache_columns),
    (5, "search index: file chunks, their FTS5 index and vectors", _search_index),
    (6, "validity windows, duplicate keys, past facts' index, fact usage", _curation),
    (7, "body keys and band keys of each entry and procedure", _entry_fingerprints),
    (8, "exact-duplicate keys up to case, Unicode form and spacing only", _exact_keys),
    (
        9,
        "search groups: pages of each session's facts and each file's chunks as documents",
        _search_groups,
    ),
    (10, "the listing of global/ kept whole", _entry_listing),
    (11, "the markdown tiers as rows (team mode only); the successors of a fact", _documents),
    (12, "the facts of a bulk import whose band keys wait to be indexed", _pending_sketches),
    (13, "each model's vector count, top id and removals, kept by triggers", _vector_counts),
]
