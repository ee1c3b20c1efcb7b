"""Keeping vectors current (Q2, Q3): when items get their embeddings, and by whom.

A search never embeds anything but its question: what has no vector yet is ranked by its
words (search/__init__.py), and the answer says how many items wait. Before, each search
embedded up to 256 waiting items inline: after an import of 2,000 facts the next searches took 20,
8 and 4 s and each ranked differently. Vectors are made instead:

- on a small write, for the written items only (~4 ms an item once the model is loaded;
  a CLI call loads it for that, ~0.35 s, unless [search] embed_on_write = "loaded");
- in bulk by `memdir import` and `memdir reindex`, with progress from the first item (an
  import's writes are made inside `Memory.bulk()`, which defers their vectors to it);
- in the MCP server's background (embed_worker.EmbedWorker): after start, after each
  write, and after a search that met items without a vector (another process wrote them,
  or a hand edit).
- by the store's warm worker (vector_worker.py), for a CLI write when it is up, and in its
  background whatever waits.

Unchanged text reuses the vector it had (by text hash), whoever embeds it. Vectors are
stored under the id of the model that made them: after a change of [embeddings] model
every item waits for a vector of the new one (search ranks it by words meanwhile, never
by a vector of another space), and `memdir reindex` embeds them all, then drops the old
model's vectors (`replace_model`).
"""

from __future__ import annotations

from ..storage import embeddings
from ..storage.rows_cold import NewVector

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from ..storage.base import Store
    from ..storage.rows_cold import Unembedded
    from ..types import Embedder

    Progress = Callable[[int, int], None]

PAGE = 1024  # rows read per query of what waits: each scans past the embedded ones
STEP = 32  # texts embedded, stored and reported at a time (one batch of the model)


def embed_rows(store: Store, embedder: Embedder, rows: list[Unembedded]) -> int:
    """Store a vector for each (owner, id, text, hash) row: a text embedded before (same
    hash) reuses its vector, the rest are embedded. Returns how many rows were given."""
    if not rows:
        return 0
    known = store.vectors_by_hash(embedder.name, [h for _, _, _, h in rows])
    todo = [row for row in rows if row[3] not in known]
    fresh = embedder.embed([text for _, _, text, _ in todo]) if todo else None
    out = [NewVector(o, i, h, known[h]) for o, i, _, h in rows if h in known]
    if fresh is not None:
        out += [
            NewVector(o, i, h, embeddings.to_blob(v))
            for (o, i, _, h), v in zip(todo, fresh, strict=True)
        ]
    if fresh is not None:
        from . import ensure_calibrated

        ensure_calibrated(store, embedder)  # once a model a store: its score's scale (Q2)
    store.put_vectors(embedder.name, out)
    return len(rows)


def embed_pending(
    store: Store,
    embedder: Embedder,
    progress: Progress | None = None,
    stop: Callable[[], bool] | None = None,
) -> int:
    """Embed every fact and chunk that has no vector, STEP at a time: `progress(done,
    total)` is told before the first and after each step; `stop()` is asked before each.
    Returns how many were embedded. Items written meanwhile are taken too."""
    total = store.count_unembedded(embedder.name)
    done = 0
    if progress is not None:
        progress(0, total)
    seen: set[tuple[str, int]] = set()
    while total:
        page = store.unembedded(embedder.name, PAGE)
        page = [row for row in page if (row[0], row[1]) not in seen]
        if not page:
            break  # nothing waits, or only rows that could not be stored: never spin
        for start in range(0, len(page), STEP):
            if stop is not None and stop():
                return done
            rows = page[start : start + STEP]
            embed_rows(store, embedder, rows)
            seen.update((o, i) for o, i, _, _ in rows)
            done += len(rows)
            total = max(total, done)
            if progress is not None:
                progress(done, total)
    return done


def embed_items(store: Store, embedder: Embedder, fact_ids: list[int], paths: list[str]) -> int:
    """Embed these facts and the chunks of these files, if they have no vector yet."""
    return embed_rows(store, embedder, store.unembedded_items(embedder.name, fact_ids, paths))


def replace_model(store: Store, embedder: Embedder) -> int:
    """Q2: once every item has a vector of `embedder`, drop the vectors of other models (a
    model used before): how many went. While anything waits, nothing is dropped: until the new
    model covers the store, the old vectors stay (a change back costs nothing). A process
    that still runs with the old model (an MCP server started before the change) embeds
    again what it needs, so it should be restarted after a change."""
    if store.count_unembedded(embedder.name):
        return 0
    if not set(store.vector_models()) - {embedder.name}:
        return 0
    return store.drop_vectors(embedder.name)
