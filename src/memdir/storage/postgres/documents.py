"""The markdown tiers as rows of a scope (team mode): `documents`, one row a file of the
memory root named by its path relative to it, and `document_conflicts`, the hand edits made
against a revision that moved meanwhile (storage/documents.py renders and pushes them).

Every write is one transaction under the scope's advisory lock (connection.py): the row is
read, the caller's change applied to what is stored, the result written with a new
revision, so two machines writing one document at once are serialized and neither loses
the other's change. A revision comes from one sequence per scope: max(revision) is the
scope's change counter, which a view compares with the one it last rendered.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from .connection import Connection

# document_past: the hashes of the bodies a document held before its current one, newest
# first, space-separated (the last PAST_KEPT): a view that lost its state tells by them a
# file it rendered long ago from one edited by hand (documents.py). A table of their own
# (schema 12; kv held them before, under schema.PAST_KEY + path), so they are not values: no
# export or listing of kv carries them.
PAST_KEPT = 32


class StoredDocument(NamedTuple):
    path: str
    body: str | None  # None: deleted (the row stays so the deletion reaches every view)
    revision: int
    updated_at: str = ""  # when it was written (the writer's clock): the view's files' mtime


class DocumentWrite(NamedTuple):
    """What a write left stored. `conflict`: the expected revision had moved, the text
    offered was kept in document_conflicts and the stored row is unchanged."""

    body: str | None
    revision: int
    changed: bool
    conflict: int = 0  # the id of the conflict kept, 0 when none
    updated_at: str = ""  # the stored row's


class KnownDocument(NamedTuple):
    """A stored document with the hashes of the bodies it held before (document_past)."""

    path: str
    body: str | None
    revision: int
    updated_at: str
    past: frozenset[str]


class DocumentConflict(NamedTuple):
    id: int
    path: str
    base: int  # the revision the hand edit was made from
    stored: int  # the revision stored when it came back
    body: str
    made_at: str
    made_by: str


class DocumentRows(Connection):
    """The documents part of PostgresStore."""

    def document_revision(self) -> int:
        """The scope's change counter: 0 when nothing is stored yet."""
        with self._read() as cur:
            if cur is None:
                return 0
            cur.execute("SELECT coalesce(max(revision), 0) FROM documents")
            row = cur.fetchone()
            return int(str(row[0])) if row else 0

    def documents_since(self, revision: int) -> list[StoredDocument]:
        """Every document written after `revision`, oldest first."""
        with self._read() as cur:
            if cur is None:
                return []
            cur.execute(
                "SELECT path, body, revision, updated_at FROM documents WHERE revision > %s "
                "ORDER BY revision",
                (revision,),
            )
            return [
                StoredDocument(str(p), None if b is None else str(b), int(str(r)), str(u))
                for p, b, r, u in cur.fetchall()
            ]

    def document(self, path: str) -> StoredDocument | None:
        with self._read() as cur:
            if cur is None:
                return None
            cur.execute(
                "SELECT path, body, revision, updated_at FROM documents WHERE path = %s", (path,)
            )
            row = cur.fetchone()
        if row is None:
            return None
        return StoredDocument(
            str(row[0]), None if row[1] is None else str(row[1]), int(str(row[2])), str(row[3])
        )

    def change_document(
        self,
        path: str,
        change: Callable[[str | None], str | None],
        *,
        now: str,
        by: str,
        expected: int | None = None,
    ) -> DocumentWrite:
        """Apply `change` to the stored text (None: no such document) inside one locked
        transaction and store what it returns (None: delete). `expected`: the revision the
        change was made from (0: none); when the row moved since, nothing is changed and
        the text `change` makes of the expected version is kept as a conflict. An exception
        from `change` rolls everything back."""
        with self._write() as cur:
            cur.execute(
                "SELECT body, revision, updated_at FROM documents WHERE path = %s FOR UPDATE",
                (path,),
            )
            row = cur.fetchone()
            body = None if row is None or row[0] is None else str(row[0])
            revision = 0 if row is None else int(str(row[1]))
            stamp = "" if row is None else str(row[2])
            if expected is not None and expected != revision:
                offered = change(None)
                if offered is not None and offered != body:
                    cur.execute(
                        "INSERT INTO document_conflicts (path, base, stored, body, made_at, "
                        "made_by) VALUES (%s, %s, %s, %s, %s, %s) RETURNING id",
                        (path, expected, revision, offered, now, by),
                    )
                    kept = cur.fetchone()
                    assert kept is not None
                    return DocumentWrite(
                        body, revision, False, conflict=int(str(kept[0])), updated_at=stamp
                    )
                return DocumentWrite(body, revision, False, updated_at=stamp)
            new = change(body)
            if new == body:
                return DocumentWrite(body, revision, False, updated_at=stamp)
            cur.execute(
                "INSERT INTO documents (path, body, revision, updated_at, updated_by) "
                "VALUES (%s, %s, nextval('document_revisions'), %s, %s) "
                "ON CONFLICT (path) DO UPDATE SET body = excluded.body, "
                "revision = excluded.revision, updated_at = excluded.updated_at, "
                "updated_by = excluded.updated_by RETURNING revision",
                (path, new, now, by),
            )
            got = cur.fetchone()
            assert got is not None
            if body is not None:  # a view still holding it is behind, not edited by hand
                from ..hashing import body_hash

                cur.execute(
                    "INSERT INTO document_past (path, hashes) VALUES (%s, %s) "
                    "ON CONFLICT (path) DO UPDATE "
                    "SET hashes = left(excluded.hashes || ' ' || document_past.hashes, %s)",
                    (path, body_hash(body), PAST_KEPT * 65 - 1),
                )
            return DocumentWrite(new, int(str(got[0])), True, updated_at=now)

    def documents_known(self, paths: list[str]) -> dict[str, KnownDocument]:
        """The stored rows of `paths` (those that have one), each with the hashes of the
        bodies it held before."""
        with self._read() as cur:
            if cur is None or not paths:
                return {}
            cur.execute(
                "SELECT d.path, d.body, d.revision, d.updated_at, coalesce(p.hashes, '') "
                "FROM documents d LEFT JOIN document_past p ON p.path = d.path "
                "WHERE d.path = ANY(%s)",
                (paths,),
            )
            return {
                str(p): KnownDocument(
                    str(p),
                    None if b is None else str(b),
                    int(str(r)),
                    str(u),
                    frozenset(str(v).split()),
                )
                for p, b, r, u, v in cur.fetchall()
            }

    def document_conflicts(self) -> list[DocumentConflict]:
        with self._read() as cur:
            if cur is None:
                return []
            cur.execute(
                "SELECT id, path, base, stored, body, made_at, made_by FROM document_conflicts "
                "ORDER BY id"
            )
            return [
                DocumentConflict(
                    int(str(i)), str(p), int(str(b)), int(str(s)), str(t), str(a), str(m)
                )
                for i, p, b, s, t, a, m in cur.fetchall()
            ]

    def settle_conflict(self, conflict_id: int) -> bool:
        """Drop a kept conflict once it is settled (its text merged or given up)."""
        with self._write() as cur:
            cur.execute("DELETE FROM document_conflicts WHERE id = %s", (conflict_id,))
            return cur.rowcount > 0
