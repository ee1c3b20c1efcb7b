"""The search groups (Q3): runs of a session's facts, and each indexed file's chunks, as
FTS5 documents, so a search can score an item by the company it keeps (a question about
a conversation matches the run of it better than any one line).

Triggers note which sessions and files a write touched (`groups_dirty`); the write's
transaction brings their documents up to date before it commits, once each however many
rows it wrote. A session's facts, in the order written, are cut into pages of at most
PAGE_CHARS; a write rebuilds only the pages whose members changed, so adding a fact to a
long session costs one page, not the session. A file is one document, its first
FILE_CHARS: a changed file is chunked again whole anyway. Each document ends with the days
its members were written, in words."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Iterable

PAGE_CHARS = 4_000
FILE_CHARS = 32_000


def refresh(db: sqlite3.Connection) -> None:
    """Bring the documents of the groups this transaction touched up to date (inside it)."""
    owners = [owner for (owner,) in db.execute("SELECT key FROM groups_dirty")]
    if not owners:
        return
    for owner in owners:
        kind, _, name = owner.partition(":")
        if kind == "session":
            sizes = db.execute(
                "SELECT id, length(content) FROM facts WHERE session_id = ? "
                "AND status = 'active' ORDER BY id",
                (name,),
            ).fetchall()
            pages = _pages(sizes, PAGE_CHARS)
        else:
            sizes = db.execute(
                "SELECT id, length(content) FROM chunks WHERE path = ? ORDER BY start_line",
                (name,),
            ).fetchall()
            pages = _pages(sizes, FILE_CHARS)[:1]
        _store(db, owner, kind, name, pages)
    db.execute("DELETE FROM groups_dirty")


MONTHS = (
    "January February March April May June July August September October November December"
).split()


def _days(stamps: Iterable[str | None]) -> str:
    """The days the members were written, in words ("8 May 2023"), after the text: a
    question that names a month or a year finds the run written then, and no item's own
    text carries a date it did not say."""
    days = sorted({s[:10] for s in stamps if s and len(s) >= 10 and s[4] == "-" and s[7] == "-"})
    words = []
    for day in days:
        year, month, date = day[:4], day[5:7], day[8:10]
        if year.isdigit() and month.isdigit() and date.isdigit() and 1 <= int(month) <= 12:
            words.append(f"{int(date)} {MONTHS[int(month) - 1]} {year}")
    return "\n" + "; ".join(words) if words else ""


Page = tuple[int, int, int]  # first member id, last member id, how many members


def _pages(sizes: list[tuple[int, int]], limit: int) -> list[Page]:
    """Consecutive members, at most `limit` characters a page (a longer member alone)."""
    pages: list[Page] = []
    first = last = count = size = 0
    for member, length in sizes:
        if count and size + length > limit:
            pages.append((first, last, count))
            count = size = 0
        if not count:
            first = member
        last, count, size = member, count + 1, size + length + 1
    if count:
        pages.append((first, last, count))
    return pages


def _store(db: sqlite3.Connection, owner: str, kind: str, name: str, pages: list[Page]) -> None:
    """Replace the owner's documents that differ (by first, last and member count): only
    those are read and indexed again."""
    stored = {
        (first, last, members): page_id
        for page_id, first, last, members in db.execute(
            "SELECT id, first, last, members FROM search_groups WHERE owner = ?", (owner,)
        )
    }
    wanted = set(pages)
    for sig, page_id in stored.items():
        if sig not in wanted:
            db.execute("DELETE FROM groups_fts WHERE rowid = ?", (page_id,))
            db.execute("DELETE FROM search_groups WHERE id = ?", (page_id,))
    for first, last, members in pages:
        if (first, last, members) in stored:
            continue
        if kind == "session":
            rows = db.execute(
                "SELECT content, created FROM facts WHERE session_id = ? AND status = 'active' "
                "AND id BETWEEN ? AND ? ORDER BY id",
                (name, first, last),
            ).fetchall()
        else:
            rows = db.execute(
                "SELECT content, date FROM chunks WHERE path = ? ORDER BY start_line LIMIT ?",
                (name, members),
            ).fetchall()
        text = "\n".join(content for content, _ in rows) + _days(when for _, when in rows)
        (page_id,) = db.execute(
            "INSERT INTO search_groups (owner, first, last, members) VALUES (?, ?, ?, ?) "
            "RETURNING id",
            (owner, first, last, members),
        ).fetchone()
        db.execute("INSERT INTO groups_fts (rowid, content) VALUES (?, ?)", (page_id, text))
