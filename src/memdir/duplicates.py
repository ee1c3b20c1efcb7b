"""The duplicate guard (N1, X5): what an active fact, entry or procedure already says.

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

For doctor, curation/duplicates.py groups every exact and near duplicate of the store.
"""

from __future__ import annotations

from . import advice, similarity
from .models import Fact, Similar

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .storage.base import Store
    from .types import Embedder

MAX_REPORTED = 3  # near duplicates named in a write's answer


# -- hints -------------------------------------------------------------------------------
# Each names the call that does what it advises, on the caller's surface (advice.py), so
# an agent can make it as written (A3).


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
        for other in similar_by_meaning(store, fact, semantic, frozenset(found)):
            found[int(other.ref)] = other
    ranked = sorted(found.values(), key=lambda s: (-s.score, str(s.ref)))
    return tuple(ranked[:MAX_REPORTED])


def similar_by_meaning(
    store: Store, fact: Fact, semantic: tuple[Embedder, float, Any], named: frozenset[int]
) -> tuple[Similar, ...]:
    """The active facts whose cosine with `fact` is at least the minimum, most alike
    first, those in `named` left out; `fact` gets its vector on the way."""
    embedder, minimum, cache = semantic
    found = []
    for other_id, score in _semantic_facts(store, fact, embedder, minimum, cache):
        if other_id not in named:
            other = store.get_fact(other_id)
            if other is not None and other.status == "active":
                found.append(Similar("fact", other_id, round(score, 3), "semantic", other.content))
    found.sort(key=lambda s: (-s.score, str(s.ref)))
    return tuple(found[:MAX_REPORTED])


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
    """Entries or procedures (`kind` "entry" or "procedure", as in Similar) whose indexed
    sections mean nearly what `content` says: cosine >= the minimum against the vectors of
    their chunks."""
    embedder, minimum, cache = semantic
    vector = embedder.embed([content])[0]
    near = [
        (int(owner_id), score)
        for (owner, owner_id), score in _nearest(store, embedder, cache, vector, minimum, 64)
        if owner == "chunk"
    ]
    chunks = store.chunks_by_id([chunk_id for chunk_id, _ in near])
    chunk_kind, folder = ("global", "global/") if kind == "entry" else ("procedure", "procedures/")
    best: dict[str, float] = {}
    for chunk_id, score in near:
        row = chunks.get(chunk_id)
        if row is None or row[2] != chunk_kind or not row[1].startswith(folder):
            continue
        other = row[1][len(folder) : -len(".md")]
        if other != name:
            best[other] = max(best.get(other, 0.0), score)
    found = [Similar(kind, other, round(score, 3), "semantic") for other, score in best.items()]
    found.sort(key=lambda s: (-s.score, str(s.ref)))
    return tuple(found[:MAX_REPORTED])


def _nearest(
    store: Store, embedder: Embedder, cache: Any, vector: Any, minimum: float, top: int
) -> list[tuple[tuple[str, int | str], float]]:
    """The `top` stored vectors (facts and chunks) most like `vector`, cosine >= minimum:
    ranked by the store where it ranks (pgvector), else by the matrix."""
    import numpy as np

    if store.ranks_vectors():
        blob = np.asarray(vector, dtype="<f4").tobytes()
        ranked = store.rank_vectors(embedder.name, blob, top)
        if ranked is not None:
            return [((r.owner, r.owner_id), r.score) for r in ranked if r.score >= minimum]
    keys, matrix, _ = cache.load(store, embedder)
    if not len(matrix):
        return []
    scores = matrix @ vector
    # the top few by partition, then sorted: a full sort of 100k scores took ~8 ms a write
    want = min(top, len(scores))
    best = np.argpartition(-scores, want - 1)[:want]
    best = best[np.argsort(-scores[best])]
    return [(keys[i], float(scores[i])) for i in best if scores[i] >= minimum]


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
