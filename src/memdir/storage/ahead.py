"""A bulk write's Python work done one part ahead, in a thread, while the database does
the last part: SQLite releases the GIL while it inserts, so on two cores the secret scan
and the duplicate guard's sketches of part k + 1 cost no time beside the insert of part k.
Measured on this project's 2-core machine (bench/insert.py): the work of a fact in Python
took as long as its insert; one after the other they ran at 0.35x a raw insert."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence
    from typing import TypeVar

    T = TypeVar("T")
    R = TypeVar("R")

FIRST = 256  # the first part: done alone, so it is kept small
LARGEST = 4096  # parts double up to this: fewer statements, a bounded part in memory
ALONE = 512  # rows this few or fewer: one part, no thread (a thread costs ~0.1 ms)


def parts(rows: Sequence[T]) -> Iterator[Sequence[T]]:
    """`rows` in parts of FIRST, 2 * FIRST, ... up to LARGEST rows, in order."""
    if len(rows) <= ALONE:
        yield rows
        return
    start, size = 0, FIRST
    while start < len(rows):
        yield rows[start : start + size]
        start, size = start + size, min(2 * size, LARGEST)


def ahead(items: Sequence[T], prepare: Callable[[T], R]) -> Iterator[R]:
    """prepare(item) of each item, in order; while the caller uses one result, the next
    is computed in a thread. An exception prepare raises is raised here, when the caller
    reaches that item (so the first refusal of an import is the one raised). If the caller
    stops early (its own error), the thread finishes the item it is on and nothing more."""
    if len(items) <= 1:
        yield from map(prepare, items)
        return
    from concurrent.futures import ThreadPoolExecutor  # bulk writes only (~4 ms to import)

    with ThreadPoolExecutor(1, thread_name_prefix="memdir-prepare") as pool:
        pending = pool.submit(prepare, items[0])
        for item in items[1:]:
            done = pending.result()
            pending = pool.submit(prepare, item)
            yield done
        yield pending.result()
