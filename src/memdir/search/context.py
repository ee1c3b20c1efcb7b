"""An item's company in the ranking (Q3): a hit borrows from its neighbours and its group.

Memory is written in runs — a session's facts one after another, a day's log entries, a
task's notes, an entry's sections — and a question often names the run better than any
one item of it ("what did we decide about the deploy?" matches the session that decided,
while the line that holds the answer says "ok, Friday then"). So each candidate's own
score gets, added to it:

- `neighbour_weight` x the better own score of the items just before and after it (the
  facts its session wrote next to it, the chunks above and below it in its file); in
  hybrid mode this also brings those neighbours in as candidates (a neighbour of a strong
  hit can answer with no word of the question), while a lexical search shows only what
  matched, reading deeper (CONTEXT_DEPTH) so that context can lift a weaker match;
- `group_weight` x its group's share: the group (a page of its session's facts, up to
  4,000 characters in the order written; its file's chunks) scored as one document by
  bm25 (storage: `group_scores`), as a share of the best matching group.

On the LoCoMo dev split (bench/locomo.py) this lifted R@10 from 0.63 to 0.72 in hybrid
and from 0.60 to 0.67 lexically, every question category better than plain BM25. Only
plain-word questions are ranked this way: a structured query (F4) asks for exactly what
it says."""

from __future__ import annotations

import bisect

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from ..models import Fact, Hit
    from ..storage.base import Store
    from ..storage.rows import Chunk, Node

    Key = tuple[str, int | str]

CONTEXT_DEPTH = 100  # lexical candidates read when context ranks them (30 without)


def rank(
    store: Store,
    ranked: list[tuple[Key, Hit]],
    node: Node,
    *,
    own_of: Callable[[Key], float],
    fact_hit: Callable[[Fact], Hit | None],
    chunk_hit: Callable[[Chunk], Hit | None],
    weights: tuple[float, float],
    bring_in: bool = True,
) -> list[tuple[Key, Hit, float]]:
    """The candidates (and their neighbours) best first, each with its score in context.
    `own_of`: the own score of an item that is not a candidate (its semantic part, or 0);
    `fact_hit` / `chunk_hit`: a neighbour as a hit, None when the search's filters leave
    it out; `weights`: (neighbour_weight, group_weight); `bring_in` False: neighbours lend
    their scores but are not added (a lexical search shows only what matched)."""
    near_weight, group_weight = weights
    hits = dict(ranked)
    own = {key: hit.score for key, hit in ranked}
    facts_of = [int(k[1]) for k in hits if k[0] == "fact"]
    chunks_of = [int(k[1]) for k in hits if k[0] == "chunk"]
    runs = store.fact_neighbours(facts_of)  # fact id -> (session, before, after)
    near: dict[Key, list[Key]] = {}
    if near_weight:
        for item, (_, before, after) in runs.items():
            near[("fact", item)] = [("fact", n) for n in (before, after) if n is not None]
        for item, pair in store.chunk_neighbours(chunks_of).items():
            near[("chunk", item)] = [("chunk", n) for n in pair if n is not None]
    new = {n for ns in near.values() for n in ns if n not in hits} if bring_in else set()
    if new:
        facts = store.facts_by_id([int(k[1]) for k in new if k[0] == "fact"])
        chunks = store.chunks_by_id([int(k[1]) for k in new if k[0] == "chunk"])
        for key in new:
            hit = None
            if key[0] == "fact" and int(key[1]) in facts:
                fact = facts[int(key[1])]
                hit = fact_hit(fact)
                if fact.session_id is not None:
                    runs.setdefault(fact.id, (fact.session_id, None, None))
            elif key[0] == "chunk" and int(key[1]) in chunks:
                hit = chunk_hit(chunks[int(key[1])])
            if hit is not None:
                hits[key] = hit
                own[key] = own_of(key)
    owners: dict[Key, str] = {}
    if group_weight:
        for key, hit in hits.items():
            if key[0] == "fact":
                if int(key[1]) in runs:
                    owners[key] = f"session:{runs[int(key[1])][0]}"
            elif hit.path:
                owners[key] = f"file:{hit.path}"
    pages = store.group_pages(sorted(set(owners.values())))
    # only the documents of these owners and the best one are scored: a question's common
    # words match most of a store's thousands of documents (storage: group_scores)
    wanted = {page for found in pages.values() for _, _, page in found}
    groups = store.group_scores(node, wanted) if group_weight else {}
    best = max(groups.values(), default=0.0)

    def group_of(key: Key) -> float:
        """The share of the document holding `key` (a fact's page, a chunk's file)."""
        found = pages.get(owners.get(key, ""), [])
        if key[0] != "fact":  # a file is one document
            return groups.get(found[0][2], 0.0) / best if found else 0.0
        at = bisect.bisect_right(found, (int(key[1]), 1 << 62, 0)) - 1
        if at < 0 or found[at][1] < int(key[1]):
            return 0.0
        return groups.get(found[at][2], 0.0) / best

    scored: dict[Key, float] = {}
    for key in hits:
        lent = [own[n] if n in own else own_of(n) for n in near.get(key, [])]
        beside = max(lent) if lent else 0.0
        group = group_of(key) if best > 0 else 0.0
        scored[key] = own[key] + near_weight * max(beside, 0.0) + group_weight * group
    order = sorted(hits, key=lambda key: -scored[key])
    return [(key, hits[key], scored[key]) for key in order]
