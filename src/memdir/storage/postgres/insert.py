"""Many rows in one statement: `INSERT ... SELECT FROM unnest(one array a column)`.

COPY FROM, the faster way in, is refused on a table under row-level security (schema.secure)
for every role that policy holds, so the store's bulk writes (the lexical index's postings,
facts added or imported by the thousand) go this way instead: one statement of a batch's
columns, each sent as one array, whatever the table's security.
"""

from __future__ import annotations

from collections.abc import Sequence

TYPE_CHECKING = False
if TYPE_CHECKING:
    import psycopg

BATCH = 20_000  # rows a statement: a few MB of parameters at most


def insert_rows(
    cur: psycopg.Cursor[tuple[object, ...]],
    table: str,
    columns: Sequence[tuple[str, str]],
    rows: Sequence[Sequence[object]],
) -> None:
    """Insert `rows` into `table`; `columns` are (name, SQL type) in the rows' order. A
    column of an array type is given as the array's text (`{1,2,3}`): unnest flattens an
    array of arrays."""
    if not rows:
        return
    names = ", ".join(name for name, _ in columns)
    arrays = ", ".join(f"%s::{'text' if t.endswith('[]') else t}[]" for _, t in columns)
    alias = ", ".join(f"c{i}" for i in range(len(columns)))
    casts = ", ".join(
        f"c{i}::{t}" if t.endswith("[]") else f"c{i}" for i, (_, t) in enumerate(columns)
    )
    statement = f"INSERT INTO {table} ({names}) SELECT {casts} FROM unnest({arrays}) AS u({alias})"
    for start in range(0, len(rows), BATCH):
        part = rows[start : start + BATCH]
        cur.execute(statement, [[row[i] for row in part] for i in range(len(columns))])
