"""memory_search (Q1-Q3, F4, P3): one question, every tier, one ranked list.

Lexical: the fact archive's FTS5 index, the chunks index of the markdown files (global
entries, task notes, daily logs, procedures), and the plain substring match of procedures
(P3), each ranked on its own. bm25 scores of two indexes do not compare, and in a store of
a few items they are all near zero (FTS5 floors a word's idf at 1e-6), so each hit's score
is its share of the best score of its own list: 1.0 is the best match of its kind. The
lists merge by that share, ties broken by reciprocal rank fusion. Semantic: cosine between
the question's vector and every fact's and chunk's (brute force with numpy: ~1 ms per 10k
vectors). Hybrid: the union of both lists, ranked by a weighted sum of scores,
`lexical_weight * lexical share + semantic_weight * cosine`, where every candidate,
lexical ones included, gets its cosine (0 when it has no lexical match or no vector).
Scores rather than ranks: reciprocal rank fusion forgets how far apart two hits are, and
on LoCoMo it lost to lexical search alone while this sum beat it (bench/locomo.py); a
convex combination of normalised scores is also what Bruch et al. (2023, "An Analysis of
Fusion Functions for Hybrid Retrieval") found to beat reciprocal rank fusion.

A search embeds nothing but its question (vectors.py says who embeds the rest). An item
with no vector yet is ranked by its words alone and marked `lexical_only`: in hybrid it has
its lexical score and no semantic part; in semantic mode, which cannot see it, its lexical
hits follow the semantic ones, so a fresh import is found at once rather than "no matches".

The package: this module checks a search's arguments and runs it; index.py keeps the
chunk index of the files current, chunks.py cuts a file into sections, vectors.py gives
facts and chunks their vectors. The parsed query (query.py) stays at the top: the store
reads it too.
"""

from __future__ import annotations

from .. import facts, procedures, query
from ..errors import ValidationError
from ..models import Fact, Hit
from ..paths import Layout
from ..storage import embeddings
from . import context
from .index import CHUNK_KINDS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from ..storage.base import Store
    from ..storage.embeddings import Vectors
    from ..storage.rows import Chunk
    from ..storage.rows_cold import RankedVector, VectorGeneration
    from ..types import Embedder
    from .worker import Remote

KINDS = ("fact", *CHUNK_KINDS)
MODES = ("lexical", "semantic", "hybrid")
MAX_LIMIT = 1000
SNIPPET_CHARS = 500
MIN_SHARE = 0.0001  # the least lexical score a hit shows

Key = tuple[str, int | str]  # (fact, id), (chunk, id) or (path, a procedure's path)


def check_limit(limit: object) -> int:
    from ..numbers import check_int

    return check_int(limit, "limit", high=MAX_LIMIT)


def check_kinds(kinds: object) -> tuple[str, ...]:
    if kinds is None:
        return KINDS
    if isinstance(kinds, str):
        kinds = [k.strip() for k in kinds.split(",") if k.strip()]
    if not isinstance(kinds, list | tuple) or not kinds or not set(kinds) <= set(KINDS):
        raise ValidationError(f"bad kind {kinds!r}: the kinds are {', '.join(KINDS)}")
    return tuple(k for k in KINDS if k in kinds)


def check_query(text: object) -> None:
    if not isinstance(text, str):
        raise ValidationError(f"bad search query {text!r}: give the question as text")


def check_filters(
    category: str | None, kinds: object, min_score: object, as_of: str | None
) -> tuple[tuple[str, ...], str | None]:
    """Q1-Q3: a search's filters checked before anything runs, in this order: the
    category, the moment `as_of` (normalised: a date alone means its end), `min_score`, the
    kinds. Returns (kinds, as_of)."""
    if category is not None:
        facts.check_category(category)
    when = facts.normalize_as_of(as_of)
    if min_score is not None and (
        isinstance(min_score, bool) or not isinstance(min_score, int | float)
    ):
        raise ValidationError(f"bad min_score {min_score!r}: a number such as 0.5")
    return check_kinds(kinds), when


def check_mode(mode: object) -> str:
    if mode not in MODES:
        raise ValidationError(f"bad search mode {mode!r}: use {', '.join(MODES)}")
    assert isinstance(mode, str)
    return mode


class VectorCache:
    """Every vector of one model as a matrix, kept while the store's vectors are unchanged:
    a warm process answers a semantic query without reading 100k blobs again. When rows
    were only added (a write embedded its items), only those are read and appended: a
    full reload takes ~0.5 s at 110k vectors and came after every write.

    One cache may serve several threads (the MCP server's: its reads, its background
    embedder's comparisons), so that a server holds one matrix, not one a thread: loads
    take turns, and what one answered stays true for its caller while another appends
    (rows past it go to the same list and dict: a caller keeps to the first
    len(matrix) of them), or reloads (new objects)."""

    def __init__(self) -> None:
        import _thread

        self._turn = _thread.allocate_lock()
        self.model: str | None = None
        self.generation: VectorGeneration | None = None
        self.keys: list[Key] = []
        self.rows: dict[Key, int] = {}  # key -> its row of the matrix
        self.matrix: Vectors | None = None  # a view of the first len(keys) rows of _buffer
        self._buffer: Vectors | None = None  # room to append without copying each time
        self._last: bytes = b""  # the blob of the newest vector (the highest id)

    def load(self, store: Store, embedder: Embedder) -> tuple[list[Key], Vectors, dict[Key, int]]:
        """The keys, the matrix and each key's row: current for `embedder`'s model. Only
        the first len(matrix) keys and the rows below it are the caller's (see above)."""
        with self._turn:
            generation = store.vector_generation(embedder.name)
            if self.model != embedder.name:
                self.model, self.generation = embedder.name, None
            if generation != self.generation or self.matrix is None:
                appended = self.generation is not None and self._append(store, embedder, generation)
                if not appended:
                    self._reload(store, embedder)
                self.generation = generation
            assert self.matrix is not None
            return self.keys, self.matrix, self.rows

    def _reload(self, store: Store, embedder: Embedder) -> None:
        keys: list[Key] = []
        blobs: list[bytes] = []
        dim = embedder.dim  # 0: a reader with no model (doctor): the stored size
        for owner, owner_id, blob in store.iter_vectors(embedder.name):
            dim = dim or len(blob) // 4
            if len(blob) == 4 * dim:  # another size: the model behind an endpoint changed
                keys.append((owner, owner_id))
                blobs.append(blob)
        import numpy as np

        found = embeddings.from_blobs(blobs, dim)
        del blobs
        # room for the writes to come: an append then copies nothing
        self._buffer = np.empty((len(keys) + len(keys) // 8 + 64, dim), np.float32)
        self._buffer[: len(keys)] = found
        self.keys, self.matrix = keys, self._buffer[: len(keys)]
        self.rows = {key: row for row, key in enumerate(keys)}
        self._last = bytes(found[-1].astype("<f4").tobytes()) if len(keys) else b""

    def _append(self, store: Store, embedder: Embedder, generation: VectorGeneration) -> bool:
        """Append the vectors stored since the last load; False when anything else changed
        (a vector removed or replaced): then only a full reload is right."""
        import numpy as np

        assert self.generation is not None and self._buffer is not None
        count, top, removed = self.generation
        if count == 0 or generation.removed != removed:
            return False
        if generation.n <= count or generation.top <= top:
            return False
        new = list(store.iter_vectors(embedder.name, after=top - 1))
        # the newest row read again first: still there, the same, so none before it went
        if not new or (new[0].owner, new[0].owner_id) != self.keys[-1] or new[0].vec != self._last:
            return False
        new = new[1:]
        if count + len(new) != generation.n or any((v.owner, v.owner_id) in self.rows for v in new):
            return False
        n, dim = len(self.keys), self._buffer.shape[1]
        if any(len(v.vec) != 4 * dim for v in new):
            return False  # vectors of another size under the same name: read them all
        if n + len(new) > len(self._buffer):
            grown = np.empty((max(2 * n, n + len(new)), dim), dtype=np.float32)
            grown[:n] = self._buffer[:n]
            self._buffer = grown
        if new:
            self._buffer[n : n + len(new)] = embeddings.from_blobs([v.vec for v in new], dim)
        for row, v in enumerate(new, n):
            self.rows[(v.owner, v.owner_id)] = row
            self.keys.append((v.owner, v.owner_id))
        self.matrix = self._buffer[: len(self.keys)]
        self._last = new[-1].vec if new else self._last
        return True


# Per model: the mean and the 99th percentile of the cosines between unrelated texts like
# those agents store: every pair of data/calibration.txt (209 one-line memories of every
# kind: preferences, conventions, decisions, people, places), measured by `calibrate`. A
# semantic score is the cosine on that scale, s = (cos - mean) / (p99 - mean): 0 is as
# alike as two unrelated memories are on average, 1 as alike as the closest 1% of them;
# above 1, alike as unrelated memories almost never are. So min_score means the same for
# every model.
CALIBRATION = {
    embeddings.DEFAULT_MODEL: (0.084, 0.36),
    embeddings.SHIPPED_MODEL: (0.083, 0.361),  # what stores embedded before w8a8 hold
}


CALIBRATED = "calibration:"  # kv: + a model's id -> "mean p99", measured on this store


def calibration(model: str, store: Store | None = None) -> tuple[float, float]:
    """(mean, p99) of the model's cosines between unrelated memories: shipped for the
    bundled model, else measured once when a model memdir loads from [embeddings] made its
    first vectors here (ensure_calibrated); a model without either (a caller's own
    Embedder) keeps the plain cosine (0, 1)."""
    known = CALIBRATION.get(model)
    if known is not None:
        return known
    from ..storage.embedders import loadable  # not on a lexical search's path

    if store is not None and loadable(model):
        measured = (store.get_value(CALIBRATED + model) or "").split()
        if len(measured) == 2:
            mean, p99 = float(measured[0]), float(measured[1])
            if p99 > mean:
                return mean, p99
    return (0.0, 1.0)


def ensure_calibrated(store: Store, embedder: Embedder) -> None:
    """Q2: measure a configured model's (mean, p99) on the shipped calibration set the
    first time it embeds for this store, and keep it there, so min_score and the hybrid
    weights mean for it what they mean for MiniLM. Two processes measuring at once store
    the same numbers."""
    from ..storage.embedders import loadable

    if embedder.name in CALIBRATION or not loadable(embedder.name):
        return
    if store.get_value(CALIBRATED + embedder.name) is not None:
        return
    mean, p99 = calibrate(embedder)
    store.set_value(CALIBRATED + embedder.name, f"{mean} {p99}")


def calibrate(embedder: Embedder) -> tuple[float, float]:
    """Measure (mean, p99) for `embedder` on the shipped calibration set (~3 s for
    MiniLM): what a model added to CALIBRATION is given."""
    import os

    import numpy as np

    path = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "calibration.txt")
    with open(path, encoding="utf-8") as handle:
        texts = [line.strip() for line in handle if line.strip()]
    vectors = embedder.embed(texts)
    pairs = (vectors @ vectors.T)[np.triu_indices(len(texts), 1)]
    return round(float(pairs.mean()), 3), round(float(np.quantile(pairs, 0.99)), 3)


def effective_mode(mode: str, text: str) -> str:
    """F4: AND, NOT, "phrases" mean exactly that, and similarity would not: a structured
    query in hybrid mode runs lexically."""
    return "lexical" if mode == "hybrid" and query.is_structured(text) else mode


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
    pending: int = 0,
    as_of: str | None = None,
    context_weights: tuple[float, float] = (0.0, 0.0),
    remote: Remote | None = None,
) -> list[Hit]:
    """`embedder` None in semantic or hybrid mode: the store holds no vector of the model,
    so there is nothing to compare the question with; `remote`: the store's warm worker
    ranks by meaning instead (search/worker.py), with the same results. `pending`: how
    many items have no vector yet; semantic mode then adds their lexical hits. `as_of`:
    the facts that held at that time (F3), lexically: files keep no history, and
    superseded facts keep no vector. `context_weights`: (neighbour_weight, group_weight)
    of a plain-word question's ranking in lexical and hybrid mode (context.py)."""
    node = query.parse_search(text)
    if node is None:
        return []  # nothing to look for: an empty list, not an error (Q2)
    mode = effective_mode(mode, text)
    depth = max(3 * limit, 30)
    question = not query.is_structured(text)  # F4: a structured query is ranked in full
    if as_of is not None:
        found = _relative(
            [
                (("fact", f.id), _fact_hit(f, score))
                for f, score in store.search_facts(
                    node, category, since, limit, as_of, question=question
                )
            ]
        )
        return [hit for _, hit in found]
    in_context = any(context_weights) and question and store.has_groups()
    lexical: list[list[tuple[Key, Hit]]] = []
    if mode != "semantic" or pending:
        deeper = max(depth, context.CONTEXT_DEPTH) if in_context and mode == "lexical" else depth
        lexical = _lexical_lists(store, layout, node, question, category, since, kinds, deeper)
    admit = _Admit(kinds, category, since)
    if mode == "lexical":
        fused = _fuse(lexical, rrf_k)
        if in_context:
            fused = _in_context(
                store, fused, node, admit, lambda key: 0.0, context_weights, bring_in=False
            )
        return _finish(fused, limit)
    semantic: list[tuple[Key, Hit]] = []
    similarity: Callable[[Key], float | None] = lambda key: None  # noqa: E731
    if embedder is not None or remote is not None:
        known = [key for ranked in lexical for key, _ in ranked if key[0] != "path"]
        semantic, similarity = _semantic(
            store, embedder, cache, text, category, since, kinds, depth, min_score, remote, known
        )
    if mode == "semantic":
        # what has no vector yet, found by its words (the substring list of procedures
        # aside: their chunks are in the chunk list)
        indexed = [ranked for ranked in lexical if ranked[0][0][0] != "path"]
        unseen = [
            (key, hit._replace(lexical_only=True))
            for key, hit in _fuse(indexed, rrf_k)
            if similarity(key) is None
        ]
        return _finish(semantic + unseen, limit)
    combined = _combine(lexical, semantic, similarity, weights)
    if in_context:

        def own_of(key: Key) -> float:  # not a candidate: no lexical match in reach
            return weights[1] * max(similarity(key) or 0.0, 0.0)

        combined = [
            (key, _unseen(key, hit, similarity))
            for key, hit in _in_context(
                store, combined, node, admit, own_of, context_weights, relative=False
            )
        ]
    return _finish(combined, limit)


def _unseen(key: Key, hit: Hit, similarity: Callable[[Key], float | None]) -> Hit:
    """A neighbour brought in without a vector is marked, as _combine marks the rest."""
    if hit.lexical_only is None and key[0] != "path" and similarity(key) is None:
        return hit._replace(lexical_only=True)
    return hit


class _Admit:
    """Whether a neighbour brought in by its context passes the search's filters."""

    def __init__(self, kinds: tuple[str, ...], category: str | None, since: str | None) -> None:
        self.kinds, self.category, self.since = kinds, category, since

    def fact(self, fact: Fact) -> Hit | None:
        if (
            "fact" in self.kinds
            and fact.status == "active"
            and self.category in (None, fact.category)
            and (self.since is None or fact.created >= self.since)
        ):
            return _fact_hit(fact, 0.0)
        return None

    def chunk(self, row: Chunk) -> Hit | None:
        if (
            self.category is None
            and row[2] in self.kinds
            and (self.since is None or (row[5] or "") >= self.since)
        ):
            return _chunk_hit(row, 0.0)
        return None


def _in_context(
    store: Store,
    ranked: list[tuple[Key, Hit]],
    node: query.Node,
    admit: _Admit,
    own_of: Callable[[Key], float],
    weights: tuple[float, float],
    relative: bool = True,
    bring_in: bool = True,
) -> list[tuple[Key, Hit]]:
    """`ranked` re-ranked by each hit's context (context.py); `relative`: scores as a share
    of the best, as lexical scores are (Q1), else the sum itself (hybrid)."""
    if not ranked:
        return ranked
    found = context.rank(
        store,
        ranked,
        node,
        own_of=own_of,
        fact_hit=admit.fact,
        chunk_hit=admit.chunk,
        weights=weights,
        bring_in=bring_in,
    )
    best = found[0][2] if found else 0.0
    if relative:
        return [
            (key, hit._replace(score=max(round(score / best, 4), MIN_SHARE) if best > 0 else 1.0))
            for key, hit, score in found
        ]
    return [(key, hit._replace(score=round(score, 6))) for key, hit, score in found]


def _lexical_lists(
    store: Store,
    layout: Layout,
    node: query.Node,
    question: bool,
    category: str | None,
    since: str | None,
    kinds: tuple[str, ...],
    depth: int,
) -> list[list[tuple[Key, Hit]]]:
    lists: list[list[tuple[Key, Hit]]] = []
    if "fact" in kinds:
        lists.append(
            [
                (("fact", f.id), _fact_hit(f, score))
                for f, score in store.search_facts(node, category, since, depth, question=question)
            ]
        )
    chunk_kinds = tuple(k for k in kinds if k != "fact")
    if chunk_kinds and category is None:  # categories belong to facts only
        lists.append(
            [
                (("chunk", row[0]), _chunk_hit(row, score))
                for row, score in store.search_chunks(
                    node, chunk_kinds, since, depth, question=question
                )
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
    return [_relative(ranked) for ranked in lists if ranked]


def _relative(ranked: list[tuple[Key, Hit]]) -> list[tuple[Key, Hit]]:
    """Each score as its share of the list's best (bm25 or substring counts), so that 1.0
    is the best match of its kind, whatever the size of the store or the query; to four
    decimals, and at least 0.0001: a hit that matched only words found in nearly every
    item (bm25 near 0) reads as weak, not as 4e-06."""
    if not ranked:
        return ranked
    best = ranked[0][1].score
    return [
        (key, hit._replace(score=max(round(hit.score / best, 4), MIN_SHARE) if best > 0 else 1.0))
        for key, hit in ranked
    ]


def _semantic(
    store: Store,
    embedder: Embedder | None,
    cache: VectorCache,
    text: str,
    category: str | None,
    since: str | None,
    kinds: tuple[str, ...],
    depth: int,
    min_score: float,
    remote: Remote | None = None,
    known: list[Key] | None = None,
) -> tuple[list[tuple[Key, Hit]], Callable[[Key], float | None]]:
    """The hits whose semantic score (the cosine, calibrated) is at or above min_score,
    best first, and the score of any key (None: it has no vector yet), for hybrid. With
    `remote`, the worker ranks and gives the cosines of the `known` keys (the lexical
    candidates)."""
    cosine_of: Callable[[Key], float | None]
    if remote is not None:
        answer = remote.rank(text, depth * 4, known or [])
        if answer is None:
            return [], lambda key: None
        nearest, cosines = answer
        cosine_of = cosines.get
        for key, score in nearest:
            cosines.setdefault(key, score)
    else:
        assert embedder is not None
        # no filter at all: every stored vector qualifies (a fact's goes when it stops
        # being active), and a ranking in the server then reads no row but the vectors'
        everything = set(kinds) == set(KINDS) and category is None and since is None
        within = None if everything else (kinds, category, since)
        nearest, cosine_of = nearest_vectors(cache, store, embedder, text, depth * 4, known, within)
    model = embedder.name if embedder is not None else remote.model if remote else ""
    mean, p99 = calibration(model, store)

    def similarity(key: Key) -> float | None:
        found = cosine_of(key)
        return None if found is None else (found - mean) / (p99 - mean)

    nearest = [(key, (cosine - mean) / (p99 - mean)) for key, cosine in nearest]
    top = [(key, score) for key, score in nearest if score >= min_score]
    facts = store.facts_by_id([int(key[1]) for key, _ in top if key[0] == "fact"])
    chunks = store.chunks_by_id([int(key[1]) for key, _ in top if key[0] == "chunk"])
    out: list[tuple[Key, Hit]] = []
    for (owner, owner_id), calibrated in top:
        score = round(calibrated, 4)
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


def nearest_vectors(
    cache: VectorCache,
    store: Store,
    embedder: Embedder,
    text: str,
    want: int,
    known: list[Key] | None = None,
    within: tuple[tuple[str, ...], str | None, str | None] | None = None,
) -> tuple[list[tuple[Key, float]], Callable[[Key], float | None]]:
    """The `want` vectors nearest the question's, best first, with their cosines, and the
    cosine of any key (None: no vector): what the worker answers a query with, too. A
    store that ranks itself (PostgreSQL with pgvector: rank_vectors) is asked instead of
    the matrix, kept to `within` (kinds, category, since: the search's filters), and gives
    the cosines of the `known` keys (the lexical candidates) in one more question; any
    other key's is asked when wanted."""
    if store.ranks_vectors():
        from ..storage.rows_cold import VectorFilter  # not on a lexical search's path

        blob = embedder.embed([text])[0].astype("<f4").tobytes()
        scope = None if within is None else VectorFilter(*within)
        ranked = store.rank_vectors(embedder.name, blob, want, scope)
        if ranked is not None:
            return _ranked_by_store(store, embedder.name, blob, ranked, known or [])
    import numpy as np

    keys, matrix, rows = cache.load(store, embedder)
    if not len(matrix):
        return [], lambda key: None
    scores = matrix @ embedder.embed([text])[0]

    def similarity(key: Key) -> float | None:
        row = rows.get(key)
        return None if row is None or row >= len(scores) else float(scores[row])

    wanted = min(len(scores), want)
    candidates = np.argpartition(-scores, wanted - 1)[:wanted]
    candidates = candidates[np.argsort(-scores[candidates])]
    return [(keys[int(i)], float(scores[i])) for i in candidates], similarity


def _ranked_by_store(
    store: Store, model: str, blob: bytes, ranked: list[RankedVector], known: list[Key]
) -> tuple[list[tuple[Key, float]], Callable[[Key], float | None]]:
    scores: dict[Key, float] = {(r.owner, r.owner_id): r.score for r in ranked}
    asked = set(scores)

    def ask(keys: list[Key]) -> None:
        wanted: list[tuple[str, int]] = [
            (str(o), int(i)) for o, i in keys if o in ("fact", "chunk") and (o, i) not in asked
        ]
        asked.update(keys)
        if wanted:
            for key, score in store.score_vectors(model, blob, wanted).items():
                scores[key] = score

    ask(known)

    def similarity(key: Key) -> float | None:
        if key not in asked:
            ask([key])  # a neighbour brought in by its context (context.py)
        return scores.get(key)

    return [((r.owner, r.owner_id), r.score) for r in ranked], similarity


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


def _chunk_hit(row: Chunk, score: float) -> Hit:
    chunk_id, path, kind, start, end, date, content = row
    snippet = content if len(content) <= SNIPPET_CHARS else content[:SNIPPET_CHARS] + " …"
    name = path.rsplit("/", 1)[-1][:-3]
    return Hit(kind, snippet, score, path=path, name=name, date=date, lines=(start, end))


def _fuse(lists: list[list[tuple[Key, Hit]]], k: int) -> list[tuple[Key, Hit]]:
    """Lexical lists as one: by the best share a key has in any list, equal shares (the
    tops of several lists) by reciprocal rank fusion; the first list a key appears in
    supplies its hit."""
    shares: dict[Key, float] = {}
    fused: dict[Key, float] = {}
    hits: dict[Key, Hit] = {}
    for ranked in lists:
        for rank, (key, hit) in enumerate(ranked):
            shares[key] = max(shares.get(key, 0.0), hit.score)
            fused[key] = fused.get(key, 0.0) + 1 / (k + rank + 1)
            hits.setdefault(key, hit)
    order = sorted(hits, key=lambda key: (-shares[key], -fused[key]))
    return [(key, hits[key]._replace(score=shares[key])) for key in order]


def _combine(
    lexical: list[list[tuple[Key, Hit]]],
    semantic: list[tuple[Key, Hit]],
    similarity: Callable[[Key], float | None],
    weights: tuple[float, float],
) -> list[tuple[Key, Hit]]:
    """Hybrid (Q3): every candidate of the lexical lists and of the semantic list, scored
    `lexical_weight * its lexical share + semantic_weight * its cosine` (a negative cosine
    counts as 0). The share (score / the best of its list) puts bm25, whose scale depends
    on the query and the index, and the substring counts of procedures, on the cosine's
    0-1 scale. A fact or chunk with no vector yet has its lexical part only."""
    relative: dict[Key, float] = {}
    hits: dict[Key, Hit] = {}
    for ranked in lexical:
        for key, hit in ranked:
            relative[key] = max(relative.get(key, 0.0), hit.score)
            hits.setdefault(key, hit)
    for key, hit in semantic:
        hits.setdefault(key, hit)
    cosine = {key: similarity(key) for key in hits}
    scored = {
        key: weights[0] * relative.get(key, 0.0) + weights[1] * max(cosine[key] or 0.0, 0.0)
        for key in hits
    }
    order = sorted(hits, key=lambda key: -scored[key])
    return [
        (
            key,
            hits[key]._replace(
                score=round(scored[key], 6),
                lexical_only=True if cosine[key] is None and key[0] != "path" else None,
            ),
        )
        for key in order
    ]


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
