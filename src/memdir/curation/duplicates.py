"""The store-wide duplicate scan for doctor (X5): every group of exact and near duplicates
among active facts, entries and procedures, a report (two entries with one body under two
names are a finding, not an error). It reads the whole store through the Memory facade,
so it sits above it; the guard a single write passes is duplicates.py below."""

from __future__ import annotations

from .. import similarity
from ..duplicates import body_of
from ..models import Fact
from ..records import Record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ..memory import Memory
    from ..storage.base import Store

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


def find_all(memory: Memory, threshold: float | None = None) -> list[DuplicateGroup]:
    """Every group of exact and near duplicates among active facts, entries and procedures
    (semantic ones among the SEMANTIC_MAX newest embedded facts)."""
    threshold = memory.settings.duplicate_lexical if threshold is None else threshold
    groups = _fact_groups(memory.store, threshold)
    groups += _semantic_fact_groups(memory, {m for g in groups for m in g.members})
    from .. import entries as entry_files
    from ..errors import MemdirError

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
    from importlib.util import find_spec

    model = _NameOnly(memory.model_id())  # the configured model's vectors (Q2)
    if find_spec("numpy") is None or memory.store.vector_generation(model.name)[0] < 2:
        return []  # nothing to compare: numpy is not even imported
    import numpy as np

    from ..search import VectorCache

    keys, matrix, _ = VectorCache().load(memory.store, model)
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
    """What VectorCache needs of an embedder to read stored vectors: no model loaded (the
    size of a vector is read off the stored ones)."""

    def __init__(self, name: str) -> None:
        self.name, self.dim = name, 0

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
