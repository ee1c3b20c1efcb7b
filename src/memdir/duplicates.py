"""The duplicate guard (issue 7, X5): what an active fact, entry or procedure already says.

No heuristic refuses a write. What is refused, or rather answered with what is there:
- a fact that says exactly what an active fact says (similarity.normalize equal: case,
  Unicode form and spacing aside, punctuation and symbols not) is not stored again; the
  caller gets the existing fact and a hint to supersede it instead;
- an entry or procedure written again under its own name with exactly what it holds
  (entries: the same description and body; procedures: the same text) is a no-op: nothing
  is rewritten, `updated` stays, the answer is the item, `duplicate` set.
For entries and procedures the name is the identity: a write under a new name is always
stored, and one under an existing name with anything different is an update (G2, P1).

Everything else that resembles something is stored and reported in `similar`, naming
what it resembles: another entry or procedure with the same body (how "exact"), a near
duplicate (content-word Jaccard >= [duplicates] lexical, default 0.7; or, when the
embedding model is already loaded in the process, cosine >= [duplicates] semantic, default
0.8). The model is never loaded for a write alone: that would add ~0.4 s to every `memdir
fact add`; the MCP server loads it at start. MiniLM's cosine of paraphrases runs 0.64-0.86
("lives in Berlin" / "is based in Berlin, Germany" 0.81, "decided to use React" / "chose
React for the frontend" 0.86), of two facts about different things ~0.0-0.55, and of
"Berlin" / "Paris" for one fact 0.65: 0.8 names the close paraphrases without naming every
fact on the same subject.

For doctor: `find_all` groups every exact and near duplicate of the store (a report: two
entries with one body under two names are a finding, not an error).
"""

from __future__ import annotations

from . import advice, similarity
from .models import Fact, Similar
from .records import Record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .memory import Memory
    from .storage.base import Store
    from .storage.embeddings import Embedder

MAX_REPORTED = 3  # near duplicates named in a write's answer
BLOCK = 1024  # rows of the cosine matrix computed at once
# doctor compares every embedded fact with every other (~1 s per 10k facts, growing with
# the square): beyond this many, the newest ones only, and it says so
SEMANTIC_MAX = 20_000


class DuplicateGroup(Record):
    kind: str  # fact | entry | procedure
    exact: bool
    members: list[int | str]  # fact ids or names, oldest (lowest id, first name) first
    score: float  # 1.0 when exact; else the highest similarity inside the group
    how: str  # exact | lexical | semantic

    def to_dict(self) -> dict[str, Any]:
        return self._asdict()


# -- hints -------------------------------------------------------------------------------
# Each names the call that does what it advises, on the caller's surface (advice.py), so
# an agent can make it as written: issue 11.


def fact_hint(fact: Fact) -> str:
    return (
        f"fact {fact.id} already says this; nothing was stored. If it changed, supersede it: "
        f"{advice.fact_supersede(fact.id)}"
    )


def similar_hint(
    similar: tuple[Similar, ...], written: int | str | None = None, prefix: str = "MEMDIR"
) -> str | None:
    """What to do about the near duplicates of an item just stored as `written` (a fact's
    id, an entry's or procedure's name); `prefix`: the store's marker prefix."""
    if not similar:
        return None
    first = similar[0]
    more = f" (and {len(similar) - 1} more)" if len(similar) > 1 else ""
    shown = f"fact {first.ref}" if first.kind == "fact" else f"{first.kind} {first.ref!r}"
    found = f"stored; it resembles {shown}{more} ({first.how} {first.score:.2f})"
    if first.kind == "fact":
        # Superseding the old fact by this text is refused now that the text is stored:
        # retiring the old one is what a replacement comes to.
        return f"{found}: if it replaces fact {first.ref}, retire that one: " + (
            advice.fact_remove(first.ref)
        )
    ref = str(first.ref)
    if first.kind == "procedure":
        write, remove = advice.procedure_write(ref), None
        if written is not None:
            remove = advice.procedure_remove(str(written))
    else:
        write = advice.entry_write(ref, prefix=prefix)
        remove = None if written is None else advice.entry_remove(str(written))
    keep = f"if they say the same, keep one: write it all under {ref!r} with {write}"
    return f"{found}: {keep}" + (f", then {remove}" if remove else "")


def named_hint(kind: str, name: str, prefix: str = "MEMDIR") -> str:
    """An entry or procedure whose text `name` holds already: nothing was written."""
    write = (
        advice.procedure_write(name)
        if kind == "procedure"
        else advice.entry_write(name, prefix=prefix)
    )
    return (
        f"{kind} {name!r} holds exactly this already; nothing was rewritten. "
        f"To change it, write {name!r} again with what is new: {write}"
    )


# -- facts -------------------------------------------------------------------------------


def similar_facts(
    store: Store,
    fact: Fact,
    threshold: float,
    semantic: tuple[Embedder, float, Any] | None,
) -> tuple[Similar, ...]:
    """Near duplicates of a fact just written, most alike first."""
    found = {
        other.id: Similar("fact", other.id, round(score, 3), "lexical", other.content)
        for other, score in store.similar_facts(fact.content, fact.id, threshold, MAX_REPORTED)
    }
    if semantic is not None:
        embedder, minimum, cache = semantic
        for other_id, score in _semantic_facts(store, fact, embedder, minimum, cache):
            if other_id not in found:
                other = store.get_fact(other_id)
                if other is not None and other.status == "active":
                    found[other_id] = Similar(
                        "fact", other_id, round(score, 3), "semantic", other.content
                    )
    ranked = sorted(found.values(), key=lambda s: (-s.score, str(s.ref)))
    return tuple(ranked[:MAX_REPORTED])


def _semantic_facts(
    store: Store, fact: Fact, embedder: Embedder, minimum: float, cache: Any
) -> list[tuple[int, float]]:
    """Cosine of the new fact against every embedded active fact (the warm vector cache)."""
    from .storage import embeddings
    from .storage.hashing import text_hash
    from .storage.rows_cold import NewVector

    vector = embedder.embed([fact.content])[0]
    # kept, so the next search need not embed this fact again
    store.put_vectors(
        embedder.name,
        [NewVector("fact", fact.id, text_hash(fact.content), embeddings.to_blob(vector))],
    )
    near = _nearest(store, embedder, cache, vector, minimum, MAX_REPORTED * 2)
    return [
        (int(owner_id), score)
        for (owner, owner_id), score in near
        if owner == "fact" and owner_id != fact.id
    ]


def similar_files(
    store: Store,
    kind: str,
    name: str,
    content: str,
    semantic: tuple[Embedder, float, Any],
) -> tuple[Similar, ...]:
    """Entries (kind "global") or procedures whose indexed sections mean nearly what
    `content` says: cosine >= the minimum against the vectors of their chunks."""
    embedder, minimum, cache = semantic
    vector = embedder.embed([content])[0]
    near = [
        (int(owner_id), score)
        for (owner, owner_id), score in _nearest(store, embedder, cache, vector, minimum, 64)
        if owner == "chunk"
    ]
    chunks = store.chunks_by_id([chunk_id for chunk_id, _ in near])
    folder = "global/" if kind == "global" else "procedures/"
    best: dict[str, float] = {}
    for chunk_id, score in near:
        row = chunks.get(chunk_id)
        if row is None or row[2] != kind or not row[1].startswith(folder):
            continue
        other = row[1][len(folder) : -len(".md")]
        if other != name:
            best[other] = max(best.get(other, 0.0), score)
    shown = "entry" if kind == "global" else "procedure"
    found = [Similar(shown, other, round(score, 3), "semantic") for other, score in best.items()]
    found.sort(key=lambda s: (-s.score, str(s.ref)))
    return tuple(found[:MAX_REPORTED])


def _nearest(
    store: Store, embedder: Embedder, cache: Any, vector: Any, minimum: float, top: int
) -> list[tuple[tuple[str, int | str], float]]:
    """The `top` stored vectors (facts and chunks) most like `vector`, cosine >= minimum."""
    import numpy as np

    keys, matrix = cache.load(store, embedder)
    if not keys:
        return []
    scores = matrix @ vector
    return [(keys[i], float(scores[i])) for i in np.argsort(-scores)[:top] if scores[i] >= minimum]


def merged(first: tuple[Similar, ...], more: tuple[Similar, ...]) -> tuple[Similar, ...]:
    """Both lists, each item once (the first list's reading of it wins), best first."""
    seen = {s.ref for s in first}
    both = [*first, *(s for s in more if s.ref not in seen)]
    both.sort(key=lambda s: (-s.score, str(s.ref)))
    return tuple(both[:MAX_REPORTED])


def among(
    kind: str, name: str, content: str, others: list[tuple[str, str]], threshold: float
) -> tuple[Similar, ...]:
    """The other items like `content`, about to be written as `name` (`others` are (name,
    body) of the rest): the same body (normalised; how "exact", score 1.0) or a near one.
    A report only: the name is the identity, so none of them stops the write (X5)."""
    wanted = similarity.normalize(content)
    bag = similarity.words_of_normal(wanted)
    near = []
    for other, body in others:
        if other == name:
            continue
        normal = similarity.normalize(body)
        if wanted and normal == wanted:
            near.append(Similar(kind, other, 1.0, "exact", body[:200]))
            continue
        score = similarity.jaccard(bag, similarity.words_of_normal(normal))
        if score >= threshold:
            near.append(Similar(kind, other, round(score, 3), "lexical", body[:200]))
    near.sort(key=lambda s: (-s.score, s.how != "exact", str(s.ref)))
    return tuple(near[:MAX_REPORTED])


NAMED_CANDIDATES = 16  # entries or procedures a write reads to compare, at most


def candidates(
    name: str, content: str, prints: dict[str, tuple[int | None, set[int]]]
) -> list[str]:
    """The other items that could say what `content` says: the same body key, or shared
    LSH band keys, those sharing the most first and NAMED_CANDIDATES at most (a template,
    or one body, that many items hold must not make one write read them all)."""
    key = similarity.text_key(content)
    mine = set(similarity.band_keys(similarity.words(content)))
    exact = [other for other, (body_key, _) in prints.items() if body_key == key]
    shared = sorted(
        ((len(mine & bands), other) for other, (_, bands) in prints.items() if mine & bands),
        key=lambda pair: (-pair[0], pair[1]),
    )
    ranked = dict.fromkeys([*exact, *(other for _, other in shared)])
    return [other for other in ranked if other != name][:NAMED_CANDIDATES]


def body_of(text: str) -> str:
    """A markdown file's body without its YAML frontmatter (no YAML parse: comparison only)."""
    from .errors import ValidationError
    from .storage import frontmatter

    try:
        return frontmatter.split(text)[1]
    except ValidationError:
        return text  # an unclosed fence: all of it is the body


# -- doctor ----------------------------------------------------------------------------------


def find_all(memory: Memory, threshold: float | None = None) -> list[DuplicateGroup]:
    """Every group of exact and near duplicates among active facts, entries and procedures
    (semantic ones among the SEMANTIC_MAX newest embedded facts)."""
    threshold = memory.settings.duplicate_lexical if threshold is None else threshold
    groups = _fact_groups(memory.store, threshold)
    groups += _semantic_fact_groups(memory, {m for g in groups for m in g.members})
    from . import entries as entry_files
    from .errors import MemdirError

    entries = []
    for entry in memory.entries():
        try:
            text = entry_files.text_of(memory.layout, entry.name) if entry.error is None else None
        except MemdirError:
            continue  # a symlink out of the root: never read (X1)
        if text is not None:
            entries.append((entry.name, body_of(text)))
    groups += _named_groups("entry", entries, threshold)
    procedures = [(p.name, body_of(p.content)) for p in memory.procedures() if p.error is None]
    groups += _named_groups("procedure", procedures, threshold)
    return groups


def _fact_groups(store: Store, threshold: float) -> list[DuplicateGroup]:
    groups = [
        DuplicateGroup("fact", True, [f.id for f in group], 1.0, "exact")
        for group in store.exact_duplicate_facts()
    ]
    bags: dict[int, frozenset[str]] = {}

    def bag(fact: Fact) -> frozenset[str]:
        if fact.id not in bags:
            bags[fact.id] = similarity.words(fact.content)
        return bags[fact.id]

    scored = []
    for a, b in store.sketch_pairs():
        score = similarity.jaccard(bag(a), bag(b))
        if score >= threshold and similarity.normalize(a.content) != similarity.normalize(
            b.content
        ):  # an exact pair is reported in its exact group
            scored.append((a.id, b.id, score))
    return groups + _join("fact", scored, "lexical")


def _semantic_fact_groups(memory: Memory, known: set[int | str]) -> list[DuplicateGroup]:
    """Pairs of embedded active facts with cosine >= [duplicates] semantic, from the
    vectors already stored (doctor never embeds: that is `memdir reindex`)."""
    from .storage import embeddings

    if not embeddings.available() or memory.store.vector_generation(_NameOnly.name)[0] < 2:
        return []  # nothing to compare: numpy is not even imported
    import numpy as np

    from .search import VectorCache

    keys, matrix = VectorCache().load(memory.store, _NameOnly())
    rows = [i for i, key in enumerate(keys) if key[0] == "fact"]
    rows = sorted(rows, key=lambda i: int(keys[i][1]))[-SEMANTIC_MAX:]
    if len(rows) < 2:
        return []
    ids = [int(keys[i][1]) for i in rows]
    vectors = matrix[rows]
    minimum = memory.settings.duplicate_semantic
    scored = []
    for start in range(0, len(ids), BLOCK):
        block = vectors[start : start + BLOCK] @ vectors.T
        for i, j in zip(*np.nonzero(block >= minimum), strict=True):
            a, b = ids[start + int(i)], ids[int(j)]
            if a < b and not (a in known and b in known):
                scored.append((a, b, float(block[i, j])))
    return _join("fact", scored, "semantic")


class _NameOnly:
    """What VectorCache needs of an embedder to read stored vectors: no model loaded."""

    from .storage.embeddings import MiniLM

    name = MiniLM.name
    dim = MiniLM.dim
    del MiniLM

    def embed(self, texts: list[str]) -> Any:
        raise AssertionError("doctor reads stored vectors only")


def _named_groups(
    kind: str, items: list[tuple[str, str]], threshold: float
) -> list[DuplicateGroup]:
    by_text: dict[str, list[str]] = {}
    for name, body in items:
        by_text.setdefault(similarity.normalize(body), []).append(name)
    groups = [
        DuplicateGroup(kind, True, list(sorted(names)), 1.0, "exact")
        for text, names in by_text.items()
        if text and len(names) > 1
    ]
    firsts = {names[0]: text for text, names in by_text.items() if text}
    bags = {name: similarity.words_of_normal(text) for name, text in firsts.items()}
    buckets: dict[int, list[str]] = {}
    for name, keys in zip(bags, similarity.sketches_of(list(bags.values())), strict=True):
        for key in keys:
            buckets.setdefault(key, []).append(name)
    pairs = {(a, b) for names in buckets.values() for a in names for b in names if a < b}
    scored = [
        (a, b, score)
        for a, b in sorted(pairs)
        if (score := similarity.jaccard(bags[a], bags[b])) >= threshold
    ]
    return groups + _join(kind, scored, "lexical")


def _join(kind: str, pairs: list[tuple[Any, Any, float]], how: str) -> list[DuplicateGroup]:
    """Connected components of the similar pairs (union-find), each with its best score."""
    parent: dict[Any, Any] = {}

    def root(x: Any) -> Any:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b, _ in pairs:
        parent[root(a)] = root(b)
    members: dict[Any, list[Any]] = {}
    best: dict[Any, float] = {}
    for a, _b, score in pairs:
        top = root(a)
        best[top] = max(best.get(top, 0.0), score)
    for x in list(parent):
        members.setdefault(root(x), []).append(x)
    return [
        DuplicateGroup(kind, False, sorted(group), round(best[top], 3), how)
        for top, group in sorted(members.items(), key=lambda item: sorted(item[1])[0])
        if len(group) > 1
    ]
