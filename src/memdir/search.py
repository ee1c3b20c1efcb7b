"""memory_search (Q1 for facts and procedures): one query, both tiers, one ranked list.

Facts are ranked by FTS5 bm25 and procedures by how often the words occur; the two scores
are not comparable, so the lists are merged by rank (reciprocal rank fusion), and each hit
keeps its own score.
"""

from __future__ import annotations

from . import procedures, query
from .errors import ValidationError
from .models import Hit
from .paths import Layout

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .storage.base import Store

RRF_K = 60
MAX_LIMIT = 1000


def check_limit(limit: object) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise ValidationError(f"bad limit {limit!r}: give a whole number from 1 to {MAX_LIMIT}")
    return limit


def search(
    store: Store,
    layout: Layout,
    text: str,
    *,
    category: str | None,
    since: str | None,
    limit: int,
    kinds: tuple[str, ...] = ("fact", "procedure"),
) -> list[Hit]:
    node = query.parse(text)
    lists: list[list[Hit]] = []
    if "fact" in kinds:
        match = query.to_fts5(node)
        lists.append(
            [
                Hit(
                    kind="fact",
                    content=f.content,
                    score=score,
                    id=f.id,
                    category=f.category,
                    created=f.created,
                )
                for f, score in store.search_facts(match, category, since, limit)
            ]
        )
    if "procedure" in kinds and category is None:  # categories belong to facts only
        lists.append(
            [
                Hit(
                    kind="procedure",
                    content=snippet,
                    score=score,
                    path=p.path,
                    name=p.name,
                    created=p.updated,
                    lines=lines,
                )
                for p, score, lines, snippet in procedures.search(layout, node, since, limit)
            ]
        )
    return _fuse(lists, limit)


def _fuse(lists: list[list[Hit]], limit: int) -> list[Hit]:
    lists = [hits for hits in lists if hits]
    if len(lists) <= 1:
        return lists[0][:limit] if lists else []
    ranked: list[tuple[float, int, Hit]] = []
    for hits in lists:
        for rank, hit in enumerate(hits):
            ranked.append((1.0 / (RRF_K + rank), len(ranked), hit))
    ranked.sort(key=lambda item: (-item[0], item[1]))
    return [hit for _, _, hit in ranked[:limit]]
