"""pgvector, where the server has it (Q2): the stored vectors in the extension's `vector`
form beside their float32 blobs, and a semantic question ranked by the server.

Detection, once per connection (`detect`): the extension created in the database, or
available (pg_available_extensions) and creatable by this role (a superuser, or a trusted
extension and CREATE on the database), which then creates it in `public`. Anything else
leaves the store as it was: vectors ranked in Python (numpy), as on SQLite. Nothing fails
for want of the extension.

The form: a column `embedding vector` of `vectors`, with no fixed size: one table holds
the vectors of every model (the `model` column), of whatever size each has. It is added,
and the blobs stored before it copied into it, by the first writer that connects and finds
the extension (`ensure_column`, under the scope's lock), so a store made without pgvector
is brought up when the server gets it; rows an older memdir wrote without it meanwhile
are filled the same way by the next connection that may write (found through a partial
index of them, so looking costs nothing). Until then they are not ranked; doctor counts
them. The column is stored MAIN (kept in the row, compressed before it is
moved out) and the blob stays EXTENDED, so the blob is the one moved to TOAST: a scan of
the embeddings does not read the blobs. The blob stays the truth (export, migrate, the
matrix of the Python ranking read it).

The ranking is an exact scan (`ORDER BY embedding <#> question`): the inner product, the
same number the Python ranking computes (`matrix @ question`), so both give the same list.
No HNSW index: pgvector before 0.8 filters the rows an HNSW scan returns (`ef_search`, at
most 1000), and a search asks for 4 x 3 x limit candidates within its filters (kinds,
category, since), which could then come back short; an index also needs one fixed size,
i.e. one partial expression index per model. bench/postgres.py measures the scan.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import psycopg

    Cursor = psycopg.Cursor[tuple[object, ...]]
    Db = psycopg.Connection[tuple[object, ...]]

LOCK_KEY = "memdir:pgvector"  # the advisory lock (in connection's LOCK_CLASS) of creating it
MAX_DIM = 16_000  # pgvector's limit of a vector's size
BACKFILL_BATCH = 2_000


class Vector(bytes):
    """A vector's little-endian float32 blob, sent to the server as a `vector` (binary)."""


def blob_form(blob: bytes) -> Vector | None:
    """The blob as a Vector, or None when pgvector would refuse it (empty, a size that is
    not a whole number of floats, past MAX_DIM, a NaN or an infinity): that row is then not
    ranked by the server."""
    if not blob or len(blob) % 4 or len(blob) // 4 > MAX_DIM:
        return None
    if not _finite(blob):
        return None
    return Vector(blob)


def _finite(blob: bytes) -> bool:
    try:
        import numpy as np
    except ImportError:  # no embeddings extra: vectors from an endpoint or a caller's model
        import math
        import struct

        return all(math.isfinite(x) for x in struct.unpack(f"<{len(blob) // 4}f", blob))
    return bool(np.isfinite(np.frombuffer(blob, "<f4")).all())


def _wire(blob: bytes) -> bytes:
    """pgvector's binary input (vector_recv): uint16 size, uint16 unused, big-endian float4s."""
    import array
    import struct

    floats = array.array("f")
    floats.frombytes(blob)
    if sys.byteorder == "little":
        floats.byteswap()
    return struct.pack(">HH", len(floats), 0) + floats.tobytes()


def detect(db: Db, may_create: bool, lock_class: int) -> tuple[str | None, str]:
    """(the extension's schema, or None: the Python ranking) and why, in a line for doctor.
    `may_create`: a connection that may write creates the extension when it can, under
    the advisory lock (`lock_class`, LOCK_KEY)."""
    row = db.execute(
        "SELECT n.nspname, e.extversion, a.default_version, "
        "(SELECT rolsuper FROM pg_roles WHERE rolname = current_user) OR "
        "(coalesce((SELECT bool_or(trusted) FROM pg_available_extension_versions "
        "WHERE name = 'vector'), false) AND has_database_privilege(current_database(), "
        "'CREATE')), CASE WHEN EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = "
        "'public') THEN has_schema_privilege('public', 'CREATE') ELSE false END "
        "FROM (SELECT 1) one LEFT JOIN pg_extension e ON e.extname = 'vector' "
        "LEFT JOIN pg_namespace n ON n.oid = e.extnamespace "
        "LEFT JOIN pg_available_extensions a ON a.name = 'vector'"
    ).fetchone()
    assert row is not None
    schema, version, available, creatable, in_public = row
    if schema is not None:
        return str(schema), f"pgvector {version} (ranked by the server, exact)"
    if available is None:
        return None, "in Python (numpy): the server has no pgvector (the vector extension)"
    if not (creatable and in_public):
        return None, (
            f"in Python (numpy): pgvector {available} is available but this role may not "
            "create it (a superuser: CREATE EXTENSION vector)"
        )
    if not may_create:
        return None, f"in Python (numpy): pgvector {available} is available, not created yet"
    with db.transaction():
        # two processes creating it at once: one does, the other finds it made
        db.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (lock_class, LOCK_KEY))
        db.execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")
    return detect(db, False, lock_class)


def register(db: Db) -> None:
    """Send a Vector as the server's `vector` type, alone or in an array (binary)."""
    from psycopg.adapt import Dumper
    from psycopg.pq import Format
    from psycopg.types import TypeInfo

    info = TypeInfo.fetch(db, "vector")
    assert info is not None
    info.register(db)
    vector_oid = info.oid

    class VectorDumper(Dumper):
        format = Format.BINARY
        oid = vector_oid

        def dump(self, obj: object) -> bytes:
            assert isinstance(obj, Vector)
            return _wire(obj)

    db.adapters.register_dumper(Vector, VectorDumper)


def has_column(cur: Cursor) -> bool:
    cur.execute(
        "SELECT 1 FROM pg_attribute WHERE attrelid = 'vectors'::regclass AND "
        "attname = 'embedding' AND NOT attisdropped"
    )
    return cur.fetchone() is not None


def ensure_column(cur: Cursor) -> None:
    """Add the column (and the index of the rows it lacks) if missing, and fill it from the
    blobs where it is empty (in a write: under the scope's lock)."""
    if not has_column(cur):
        cur.execute("ALTER TABLE vectors ADD COLUMN embedding vector")
        cur.execute("ALTER TABLE vectors ALTER COLUMN embedding SET STORAGE MAIN")
        cur.execute("CREATE INDEX vectors_unfilled ON vectors(id) WHERE embedding IS NULL")
    backfill(cur)


def backfill(cur: Cursor) -> int:
    """Fill the embedding of every row that has none yet and can have one; how many."""
    filled, after = 0, 0
    while True:
        cur.execute(
            "SELECT id, vec FROM vectors WHERE embedding IS NULL AND id > %s ORDER BY id LIMIT %s",
            (after, BACKFILL_BATCH),
        )
        rows = cur.fetchall()
        if not rows:
            return filled
        after = int(str(rows[-1][0]))
        pairs = [(int(str(i)), blob_form(bytes(v))) for i, v in rows]  # type: ignore[call-overload]  # psycopg rows are tuples of object
        good = [(i, v) for i, v in pairs if v is not None]
        if good:
            cur.execute(
                "UPDATE vectors SET embedding = u.e FROM unnest(%s::bigint[], %b::vector[]) "
                "AS u(id, e) WHERE vectors.id = u.id",
                ([i for i, _ in good], [v for _, v in good]),
            )
            filled += len(good)


def unfilled(cur: Cursor) -> int:
    """Rows with no embedding: written before the column, or by a memdir before this one
    (or a blob pgvector refuses, which stays so). Read through vectors_unfilled: ~nothing."""
    cur.execute("SELECT count(*) FROM vectors WHERE embedding IS NULL")
    row = cur.fetchone()
    return 0 if row is None else int(str(row[0]))
