"""A bulk import's numbering, one rule for every backend: a row whose text an active fact
(or an earlier row of the import) already says exactly is that fact; every other row is a
new fact, numbered on from `next_id` in order, as one insert at a time would number it."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from .rows_cold import NewFact


def number_new(
    rows: Sequence[NewFact],
    normals: Sequence[str],
    keys: Sequence[int],
    sketches: Sequence[list[int]],
    known: dict[tuple[int, str], int],
    next_id: int,
) -> tuple[list[int], list[tuple[int, str, str, int, list[int]]], int]:
    """(each row's fact id, the new facts as (id, category, content, key, band keys), the
    next free id). `known` maps (key, normal form) to an active fact's id and learns each
    new fact, so a text said twice in one import is stored once. A text without words
    (empty normal form) is never a duplicate."""
    ids: list[int] = []
    new: list[tuple[int, str, str, int, list[int]]] = []
    for (category, text), normal, key, sketch in zip(rows, normals, keys, sketches, strict=True):
        fact_id = known.get((key, normal)) if normal else None
        if fact_id is None:
            fact_id = next_id
            next_id += 1
            if normal:
                known[(key, normal)] = fact_id
            new.append((fact_id, category, text, key, sketch))
        ids.append(fact_id)
    return ids, new, next_id
