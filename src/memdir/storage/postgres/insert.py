"""Many rows at once, under row-level security too.

COPY FROM, the fast way in, is refused on a table under row-level security (schema.secure)
for every role its policy holds. So rows go in by one of two statements, whatever the
table's security: `INSERT ... SELECT FROM unnest(one array a column)`, or, for a batch of
STAGE_AT rows or more, COPY into a temporary table of the session (no policy there, and
no WAL) and one `INSERT ... SELECT` from it into the table, in the write's transaction:
~1.4x the time of a COPY straight in, where unnest takes ~2.2x (30k postings, best of 30:
~125 ms and ~195 ms against ~87 ms). A role that may not make temporary tables (TEMPORARY
revoked on the database) uses unnest for every batch.
"""

from __future__ import annotations

from collections.abc import Sequence

TYPE_CHECKING = False
if TYPE_CHECKING:
    import psycopg

BATCH = 20_000  # rows an unnest statement: a few MB of parameters at most
STAGE_AT = 5_000  # rows from which a batch goes through the temporary table
STAGE_PREFIX = "memdir_stage_"  # + the table's name: the session's temporary table for it


def insert_rows(
    cur: psycopg.Cursor[tuple[object, ...]],
    table: str,
    columns: Sequence[tuple[str, str]],
    rows: Sequence[Sequence[object]],
) -> None:
    """Insert `rows` into `table` (of the scope's schema); `columns` are (name, SQL type)
    in the rows' order. A column of an array type is given as the array's text (`{1,2,3}`):
    unnest would flatten an array of arrays."""
    if not rows:
        return
    names = ", ".join(name for name, _ in columns)
    if len(rows) >= STAGE_AT and _stage(cur, table):
        stage = f"pg_temp.{STAGE_PREFIX}{table}"
        with cur.copy(f"COPY {stage} ({names}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
        cur.execute(  # and the stage left empty for the next batch of this transaction
            f"WITH moved AS (DELETE FROM {stage} RETURNING {names}) "
            f"INSERT INTO {table} ({names}) SELECT {names} FROM moved"
        )
        return
    arrays = ", ".join(f"%s::{'text' if t.endswith('[]') else t}[]" for _, t in columns)
    alias = ", ".join(f"c{i}" for i in range(len(columns)))
    casts = ", ".join(
        f"c{i}::{t}" if t.endswith("[]") else f"c{i}" for i, (_, t) in enumerate(columns)
    )
    statement = f"INSERT INTO {table} ({names}) SELECT {casts} FROM unnest({arrays}) AS u({alias})"
    for start in range(0, len(rows), BATCH):
        part = rows[start : start + BATCH]
        cur.execute(statement, [[row[i] for row in part] for i in range(len(columns))])


def _stage(cur: psycopg.Cursor[tuple[object, ...]], table: str) -> bool:
    """Whether the session has its temporary table for `table`, made now if it may be:
    the table's columns, emptied at every commit (and by each use)."""
    cur.execute(
        "SELECT to_regclass(%s) IS NOT NULL, "
        "has_database_privilege(current_database(), 'TEMPORARY')",
        (f"pg_temp.{STAGE_PREFIX}{table}",),
    )
    row = cur.fetchone()
    assert row is not None
    if row[0]:
        return True
    if not row[1]:
        return False
    cur.execute(  # its columns, none of their constraints: a column left out stays NULL
        f"CREATE TEMPORARY TABLE {STAGE_PREFIX}{table} ON COMMIT DELETE ROWS AS "
        f"SELECT * FROM {table} WITH NO DATA"
    )
    return True
