"""memory_search (Q1-Q3, F4, P3): one question, every tier, one ranked list.

Lexical: the fact archive's FTS5 index, the chunks index of the markdown files (global
entries, task notes, daily logs, procedures), and the plain substring match of procedures
(P3), each ranked on its own (bm25 scores of two indexes do not compare) and merged by
reciprocal rank fusion. Semantic: cosine between the question's vector and every fact's and
chunk's (brute force with numpy: ~1 ms per 10k vectors). Hybrid: the union of both lists,
ranked by a weighted sum of scores, `lexical_weight * bm25 / (the best bm25 of its list) +
semantic_weight * cosine`, where every candidate, lexical ones included, gets its cosine
(0 when it has no lexical match or no vector). Scores rather than ranks: reciprocal rank
fusion forgets how far apart two hits are, and on LoCoMo it lost to lexical search alone
while this sum beat it (bench/locomo.py); a convex combination of normalised scores is
also what Bruch et al. (2023, "An Analysis of Fusion Functions for Hybrid Retrieval")
found to beat reciprocal rank fusion.
"""

from __future__ import annotations

from . import procedures, query
from .errors import MissingExtraError, ValidationError
from .index import CHUNK_KINDS
from .models import Fact, Hit
from .paths import Layout
from .storage import embeddings

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from .storage.base import ChunkRow, Store
    from .storage.embeddings import Embedder, Vectors

KINDS = ("fact", *CHUNK_KINDS)
MODES = ("lexical", "semantic", "hybrid")
MAX_LIMIT = 1000
SNIPPET_CHARS = 500
EMBED_PER_SEARCH = 256  # a search embeds at most this many new items; reindex does the rest

Key = tuple[str, int | str]  # (fact, id), (chunk, id) or (path, a procedure's path)


def check_limit(limit: object) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise ValidationError(f"bad limit {limit!r}: give a whole number from 1 to {MAX_LIMIT}")
    return limit


def check_kinds(kinds: object) -> tuple[str, ...]:
    if kinds is None:
        return KINDS
    if isinstance(kinds, str):
        kinds = [k.strip() for k in kinds.split(",") if k.strip()]
    if not isinstance(kinds, list | tuple) or not kinds or not set(kinds) <= set(KINDS):
        raise ValidationError(f"bad kind {kinds!r}: the kinds are {', '.join(KINDS)}")
    return tuple(k for k in KINDS if k in kinds)


def check_mode(mode: object) -> str:
    if mode not in MODES:
        raise ValidationError(f"bad search mode {mode!r}: use {', '.join(MODES)}")
    assert isinstance(mode, str)
    return mode


class VectorCache:
    """Every vector of one model as a matrix, kept while the store's vectors are unchanged:
    a warm process answers a semantic query without reading 100k blobs again."""

    def __init__(self) -> None:
        self.generation: tuple[int, int] | None = None
        self.keys: list[Key] = []
        self.rows: dict[Key, int] = {}  # key -> its row of the matrix
        self.matrix: Vectors | None = None

    def load(self, store: Store, embedder: Embedder) -> tuple[list[Key], Vectors]:
        generation = store.vector_generation(embedder.name)
        if generation != self.generation or self.matrix is None:
            keys: list[Key] = []
            blobs: list[bytes] = []
            for owner, owner_id, blob in store.iter_vectors(embedder.name):
                keys.append((owner, owner_id))
                blobs.append(blob)
            self.keys, self.matrix = keys, embeddings.from_blobs(blobs, embedder.dim)
            self.rows = {key: row for row, key in enumerate(keys)}
            self.generation = generation
        return self.keys, self.matrix


def embed_missing(store: Store, embedder: Embedder, cap: int | None) -> int:
    """Give vectors to facts and chunks that have none (unchanged text reuses its vector);
    at most `cap` (None: all). Returns how many are still missing."""
    while True:
        batch = store.unembedded(embedder.name, 512 if cap is None else min(cap, 512))
        if not batch:
            return 0
        known = store.vectors_by_hash(embedder.name, [h for _, _, _, h in batch])
        todo = [row for row in batch if row[3] not in known]
        fresh = embedder.embed([text for _, _, text, _ in todo]) if todo else None
        rows = [(o, i, h, known[h]) for o, i, _, h in batch if h in known]
        if fresh is not None:
            rows += [
                (o, i, h, embeddings.to_blob(v))
                for (o, i, _, h), v in zip(todo, fresh, strict=True)
            ]
        store.put_vectors(embedder.name, rows)
        if cap is not None:
            cap -= len(batch)
            if cap <= 0:
                return store.count_unembedded(embedder.name)


def search(
    store: Store,
    layout: Layout,
    text: str,
    *,
    category: str | None,
    since: str | None,
    limit: int,
    kinds: tuple[str, ...],
    mode: str,
    min_score: float,
    embedder: Embedder | None,
    cache: VectorCache,
    weights: tuple[float, float],
    rrf_k: int,
    as_of: str | None = None,
) -> list[Hit]:
    """`as_of`: the facts that held at that time (issue 7), lexically: files keep no
    history, and superseded facts keep no vector."""
    node = query.parse_search(text)
    if node is None:
        return []  # nothing to look for: an empty list, not an error (Q2)
    if mode == "hybrid" and query.is_structured(text):
        mode = "lexical"  # F4: AND, NOT, "phrases" mean exactly that; similarity would not
    depth = max(3 * limit, 30)
    if as_of is not None:
        match = query.to_fts5(node)
        found = store.search_facts(match, category, since, limit, as_of)
        return [_fact_hit(f, score) for f, score in found]
    lexical: list[list[tuple[Key, Hit]]] = []
    if mode != "semantic":
        lexical = _lexical_lists(store, layout, node, category, since, kinds, depth)
    if mode == "lexical":
        return _finish(_fuse(lexical, rrf_k), limit)
    if embedder is None:
        raise MissingExtraError(embeddings.INSTALL)
    semantic, similarity = _semantic(
        store, embedder, cache, text, category, since, kinds, depth, min_score
    )
    if mode == "semantic":
        return _finish(semantic, limit)
    return _finish(_combine(lexical, semantic, similarity, weights), limit)


def _lexical_lists(
    store: Store,
    layout: Layout,
    node: query.Node,
    category: str | None,
    since: str | None,
    kinds: tuple[str, ...],
    depth: int,
) -> list[list[tuple[Key, Hit]]]:
    match = query.to_fts5(node)
    lists: list[list[tuple[Key, Hit]]] = []
    if "fact" in kinds:
        lists.append(
            [
                (("fact", f.id), _fact_hit(f, score))
                for f, score in store.search_facts(match, category, since, depth)
            ]
        )
    chunk_kinds = tuple(k for k in kinds if k != "fact")
    if chunk_kinds and category is None:  # categories belong to facts only
        lists.append(
            [
                (("chunk", row[0]), _chunk_hit(row, score))
                for row, score in store.search_chunks(match, chunk_kinds, since, depth)
            ]
        )
    if "procedure" in kinds and category is None:  # P3: plain substrings always work
        lists.append(
            [
                (
                    ("path", p.path),
                    Hit(
                        "procedure",
                        snippet,
                        score,
                        path=p.path,
                        name=p.name,
                        date=p.updated,
                        lines=lines,
                    ),
                )
                for p, score, lines, snippet in procedures.search(layout, node, since, depth)
            ]
        )
    return [ranked for ranked in lists if ranked]


def _semantic(
    store: Store,
    embedder: Embedder,
    cache: VectorCache,
    text: str,
    category: str | None,
    since: str | None,
    kinds: tuple[str, ...],
    depth: int,
    min_score: float,
) -> tuple[list[tuple[Key, Hit]], Callable[[Key], float]]:
    """The hits at or above min_score, best first, and the cosine of any key (0 without a
    vector), for hybrid ranking."""
    import numpy as np

    keys, matrix = cache.load(store, embedder)
    if not keys:
        return [], lambda key: 0.0
    scores = matrix @ embedder.embed([text])[0]
    rows = cache.rows

    def similarity(key: Key) -> float:
        row = rows.get(key)
        return 0.0 if row is None else float(scores[row])

    wanted = min(len(keys), depth * 4)
    candidates = np.argpartition(-scores, wanted - 1)[:wanted]
    candidates = candidates[np.argsort(-scores[candidates])]
    top = [int(i) for i in candidates if scores[i] >= min_score]
    facts = store.facts_by_id([int(keys[i][1]) for i in top if keys[i][0] == "fact"])
    chunks = store.chunks_by_id([int(keys[i][1]) for i in top if keys[i][0] == "chunk"])
    out: list[tuple[Key, Hit]] = []
    for i in top:
        owner, owner_id = keys[i]
        score = round(float(scores[i]), 6)
        if owner == "fact" and owner_id in facts:
            f = facts[owner_id]
            if (
                "fact" in kinds
                and f.status == "active"
                and (category in (None, f.category))
                and (since is None or f.created >= since)
            ):
                out.append((("fact", f.id), _fact_hit(f, score)))
        elif owner == "chunk" and owner_id in chunks and category is None:
            row = chunks[owner_id]
            if row[2] in kinds and (since is None or (row[5] or "") >= since):
                out.append((("chunk", row[0]), _chunk_hit(row, score)))
        if len(out) >= depth:
            break
    return out, similarity


def _fact_hit(fact: Fact, score: float) -> Hit:
    return Hit(
        "fact",
        fact.content,
        score,
        id=fact.id,
        category=fact.category,
        date=fact.created,
        valid_to=fact.valid_to,
    )


def _chunk_hit(row: ChunkRow, score: float) -> Hit:
    chunk_id, path, kind, start, end, date, content = row
    snippet = content if len(content) <= SNIPPET_CHARS else content[:SNIPPET_CHARS] + " …"
    name = path.rsplit("/", 1)[-1][:-3]
    return Hit(kind, snippet, score, path=path, name=name, date=date, lines=(start, end))


def _fuse(lists: list[list[tuple[Key, Hit]]], k: int) -> list[tuple[Key, Hit]]:
    """Reciprocal rank fusion; the first list a key appears in supplies its hit."""
    scores: dict[Key, float] = {}
    hits: dict[Key, Hit] = {}
    for ranked in lists:
        for rank, (key, hit) in enumerate(ranked):
            scores[key] = scores.get(key, 0.0) + 1 / (k + rank + 1)
            hits.setdefault(key, hit)
    order = sorted(scores, key=lambda key: -scores[key])
    return [(key, hits[key]) for key in order]


def _combine(
    lexical: list[list[tuple[Key, Hit]]],
    semantic: list[tuple[Key, Hit]],
    similarity: Callable[[Key], float],
    weights: tuple[float, float],
) -> list[tuple[Key, Hit]]:
    """Hybrid (Q3): every candidate of the lexical lists and of the semantic list, scored
    `lexical_weight * its lexical score / the best of its list + semantic_weight * its
    cosine` (a negative cosine counts as 0). Dividing by the best puts bm25, whose scale
    depends on the query and the index, and the substring counts of procedures, on the
    cosine's 0-1 scale."""
    relative: dict[Key, float] = {}
    hits: dict[Key, Hit] = {}
    for ranked in lexical:
        best = ranked[0][1].score
        for key, hit in ranked:
            share = hit.score / best if best > 0 else 1.0
            relative[key] = max(relative.get(key, 0.0), share)
            hits.setdefault(key, hit)
    for key, hit in semantic:
        hits.setdefault(key, hit)
    scored = {
        key: weights[0] * relative.get(key, 0.0) + weights[1] * max(similarity(key), 0.0)
        for key in hits
    }
    order = sorted(hits, key=lambda key: -scored[key])
    return [(key, hits[key]._replace(score=round(scored[key], 6))) for key in order]


def _finish(ranked: list[tuple[Key, Hit]], limit: int) -> list[Hit]:
    """The first `limit` hits, a procedure found twice (as a chunk and by substring) once."""
    out, seen = [], set()
    for _, hit in ranked:
        if hit.kind == "procedure":
            if hit.path in seen:
                continue
            seen.add(hit.path)
        out.append(hit)
        if len(out) == limit:
            break
    return out
