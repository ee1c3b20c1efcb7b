"""The search groups (Q3): each session's facts, and each indexed file's chunks, as one
FTS5 document, so a search can score an item by the company it keeps (a question about a
conversation matches the session better than any one line of it).

Triggers note which groups a write touched (`groups_dirty`); the write's transaction
rebuilds those documents before it commits, once each however many rows it wrote. A
group's document is its latest members up to GROUP_CHARS: a rebuild costs the same in a
session of ten facts and in one of ten thousand."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3

GROUP_CHARS = 32_000

# the latest members first, so the cut keeps the newest; reversed back into order below
_MEMBERS = {
    "session": "SELECT content FROM facts WHERE session_id = ? AND status = 'active' "
    "ORDER BY id DESC",
    "file": "SELECT content FROM chunks WHERE path = ? ORDER BY start_line DESC",
}


def refresh(db: sqlite3.Connection) -> None:
    """Rebuild the documents of the groups this transaction touched (inside it)."""
    keys = [key for (key,) in db.execute("SELECT key FROM groups_dirty")]
    if not keys:
        return
    for key in keys:
        kind, _, name = key.partition(":")
        parts: list[str] = []
        size = 0
        for (content,) in db.execute(_MEMBERS[kind], (name,)):
            if size + len(content) > GROUP_CHARS and parts:
                break
            parts.append(content)
            size += len(content) + 1
        row = db.execute("SELECT id FROM search_groups WHERE key = ?", (key,)).fetchone()
        if row is not None:
            db.execute("DELETE FROM groups_fts WHERE rowid = ?", row)
        if not parts:
            if row is not None:
                db.execute("DELETE FROM search_groups WHERE id = ?", row)
            continue
        if row is None:
            row = db.execute(
                "INSERT INTO search_groups (key) VALUES (?) RETURNING id", (key,)
            ).fetchone()
        db.execute(
            "INSERT INTO groups_fts (rowid, content) VALUES (?, ?)",
            (row[0], "\n".join(reversed(parts))),
        )
    db.execute("DELETE FROM groups_dirty")
