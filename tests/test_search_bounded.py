"""Bounded ranking of plain questions (F4, Q1, Performance): a question whose words hold
many rows ranks the rows holding two of its words, one of them among its rarest, instead of
every row holding one (storage/sqlite/bounded.py). Real stores built in each test, with
small budgets so that a few thousand facts take the bounded path; each result is compared
with the full ranking of the same search (the budget lifted), which ranks every row."""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from memdir import Hit, Memory, query
from memdir.storage.sqlite.bounded import Budget
from memdir.storage.sqlite.index import to_fts5
from memdir.testing import FixedClock

VOCABULARY = [f"t{rank}" for rank in range(300)]  # porter leaves them as they are
SMALL = Budget(full=300, postings=600)
UNBOUNDED = Budget(full=2**62, postings=2**62)

# SQLite's bounded ranking (sqlite/bounded.py), traced in FTS5: PostgreSQL ranks in full
pytestmark = pytest.mark.sqlite_only


def corpus(n: int, seed: int = 7) -> list[str]:
    """n facts of 8-16 words drawn with Zipf weights (1/rank): a few words are in most
    facts, most words in few, as in real text."""
    rng = random.Random(seed)
    weights = list(itertools.accumulate(1 / (rank + 1) for rank in range(len(VOCABULARY))))
    return [
        " ".join(rng.choices(VOCABULARY, cum_weights=weights, k=rng.randint(8, 16)))
        for _ in range(n)
    ]


def questions(n: int, seed: int = 11) -> list[str]:
    """Plain questions of 2-6 words, each drawn with the corpus's weights or uniformly, so
    a question mixes common and rare words as an agent's does."""
    rng = random.Random(seed)
    weights = list(itertools.accumulate(1 / (rank + 1) for rank in range(len(VOCABULARY))))

    def word() -> str:
        if rng.random() < 0.5:
            return rng.choices(VOCABULARY, cum_weights=weights)[0]
        return rng.choice(VOCABULARY)

    return [
        f"what did we decide about {' '.join({word(): 0 for _ in range(rng.randint(2, 6))})}?"
        for _ in range(n)
    ]


def facts_holding(texts: list[str], word: str) -> int:
    return sum(word in text.split() for text in texts)


def full(memory: Memory, text: str, **options: object) -> list[Hit]:
    """The same search with bounded ranking off: every matching row ranked, 20 deeper than
    asked (see `same`)."""
    options["limit"] = int(options.get("limit", 10)) + 20  # type: ignore[call-overload]
    store = memory.store
    budget, store.search_budget = store.search_budget, UNBOUNDED  # type: ignore[attr-defined]
    try:
        return memory.search(text, mode="lexical", **options)  # type: ignore[arg-type]
    finally:
        store.search_budget = budget  # type: ignore[attr-defined]


def agreement(memory: Memory, asked: list[str], **options: object) -> tuple[float, float]:
    """(share of the questions whose bounded top 10 is the full ranking's, mean overlap
    of the two top 10s), every bounded hit checked against the filters by the caller."""
    identical, overlap = 0, 0
    # the lexical lists' ranking is compared: the context ranking (Q3), which re-ranks
    # either list by its hits' neighbours and groups, is left out of both sides
    settings = memory.settings
    memory.settings = settings._replace(search_neighbour_weight=0.0, search_group_weight=0.0)
    try:
        for text in asked:
            hits = memory.search(text, limit=10, mode="lexical", **options)  # type: ignore[arg-type]
            theirs = full(memory, text, limit=10, **options)
            identical += same(hits, theirs)
            overlap += len({key(h) for h in hits} & {key(h) for h in theirs[:10]})
    finally:
        memory.settings = settings
    return identical / len(asked), overlap / len(asked)


def key(hit: Hit) -> tuple[object, ...]:
    return (hit.kind, hit.id, hit.path, hit.lines)


def same(mine: list[Hit], theirs: list[Hit]) -> bool:
    """The same scores in the same order (Q1: shares of the best) as the first hits of the
    full ranking, each hit one the full ranking gives that score: rows of equal bm25 may
    come in either order, and one of them may be cut at the limit."""
    if len(mine) != min(len(theirs), 10) or [h.score for h in mine] != [
        h.score for h in theirs[: len(mine)]
    ]:
        return False
    return all(key(h) in {key(t) for t in theirs if t.score == h.score} for h in mine)


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock()


@pytest.fixture
def archive(state_dir: Path, clock: FixedClock) -> Iterator[tuple[Memory, list[str]]]:
    texts = corpus(3000)
    categories = ("decision", "learning")
    with Memory(clock=clock) as memory:
        memory.add_facts([(text, categories[i % 2]) for i, text in enumerate(texts)])
        memory.store.search_budget = SMALL  # type: ignore[attr-defined]
        yield memory, texts


@pytest.fixture
def statements(archive: tuple[Memory, list[str]]) -> Iterator[list[str]]:
    """Every SQL statement the store runs, its parameters filled in."""
    seen: list[str] = []
    memory, _ = archive
    memory.store._conn().set_trace_callback(seen.append)  # type: ignore[attr-defined]
    yield seen
    memory.store._conn().set_trace_callback(None)  # type: ignore[attr-defined]


def ranked_in_full(seen: list[str], text: str) -> bool:
    """Whether a statement ranked the whole OR of the question's words over the facts."""
    node = query.parse_search(text)
    assert node is not None
    return any("bm25(facts_fts)" in sql and to_fts5(node) in sql for sql in seen)


def test_bounded_ranking_returns_the_full_top_hits(
    archive: tuple[Memory, list[str]], statements: list[str]
) -> None:  # F4 Q1 Performance
    """On questions mixing common and rare words, the bounded top 10 is the full ranking's
    for nearly every question, and where it is not, most of it is."""
    memory, texts = archive
    asked, bounded = questions(40), 0
    for text in asked:
        statements.clear()
        hits = memory.search(text, limit=10, mode="lexical")
        assert len(hits) == 10
        words = re.findall(r"t\d+", text)
        if sum(facts_holding(texts, w) for w in words) > SMALL.postings:
            assert not ranked_in_full(statements, text), text
            bounded += 1
    assert bounded >= 20  # most questions took the bounded path
    identical, overlap = agreement(memory, asked)
    assert identical >= 0.9 and overlap >= 9.5


def test_scores_are_the_full_rankings_own(archive: tuple[Memory, list[str]]) -> None:  # Q1
    """Every hit of a bounded search has the bm25 the full ranking gives it, deeper in the
    list too (the hybrid ranking reads 30 deep), so shares of the best mean the same."""
    memory, _ = archive
    for text in questions(10, seed=3):
        node = query.parse_search(text)
        assert node is not None
        mine = memory.store.search_facts(node, None, None, 30, question=True)
        everything = {f.id: s for f, s in memory.store.search_facts(node, None, None, 3000)}
        assert mine and all(score == pytest.approx(everything[f.id]) for f, score in mine)
        assert [s for _, s in mine] == sorted((s for _, s in mine), reverse=True)


def test_a_question_of_rare_words_is_ranked_in_full(
    archive: tuple[Memory, list[str]], statements: list[str]
) -> None:  # F4 Performance
    memory, texts = archive
    text = "where is t290 or t295 or t299?"
    assert sum(facts_holding(texts, w) for w in ("t290", "t295", "t299")) <= SMALL.full
    hits = memory.search(text, limit=10, mode="lexical")
    assert hits and ranked_in_full(statements, text)
    assert same(hits, full(memory, text, limit=10))


def test_a_question_of_common_words_ranks_their_newest_rows(
    archive: tuple[Memory, list[str]],
) -> None:  # F4 Performance
    """Every word in more rows than the budget: only the newest `postings` rows holding
    the rarest word are ranked, with their exact scores."""
    memory, texts = archive
    words = ["t0", "t1", "t2"]
    held = {w: facts_holding(texts, w) for w in words}
    assert min(held.values()) > SMALL.postings
    rarest = min(words, key=held.__getitem__)
    ids = [i + 1 for i, text in enumerate(texts) if rarest in text.split()]
    newest = set(ids[-SMALL.postings :])  # ids follow the order of the import
    text = "what about t0 t1 t2?"
    hits = memory.search(text, limit=10, mode="lexical")
    assert len(hits) == 10 and {h.id for h in hits} <= newest
    # the best of those rows that hold another of the words, by their full-ranking bm25
    node = query.parse_search(text)
    assert node is not None
    everything = {f.id: s for f, s in memory.store.search_facts(node, None, None, 3000)}
    two = [i for i in newest if len(set(words) & set(texts[i - 1].split())) >= 2]
    best = sorted((everything[i] for i in two), reverse=True)[:10]
    assert [everything[h.id] for h in hits] == pytest.approx(best)
    single = memory.search("t0", limit=10, mode="lexical")  # one word, in most rows
    assert len(single) == 10 and {h.id for h in single} <= set(
        [i + 1 for i, t in enumerate(texts) if "t0" in t.split()][-SMALL.postings :]
    )


def test_filters_hold_under_bounded_ranking(
    archive: tuple[Memory, list[str]], clock: FixedClock
) -> None:  # F4
    memory, _ = archive
    asked = questions(20, seed=5)
    for text in asked:
        hits = memory.search(text, limit=10, mode="lexical", category="decision")
        assert hits and {h.category for h in hits} == {"decision"}
    identical, overlap = agreement(memory, asked, category="decision")
    assert identical >= 0.9 and overlap >= 9.5
    # a filter that keeps fewer candidates than the limit: the search is ranked in full
    clock.advance(3600)
    late = memory.add_fact("t0 t1 t150 t151 closing note", "decision")
    since = late.created
    text = questions(1, seed=5)[0].replace("?", " t0 t150?")
    hits = memory.search(text, limit=10, mode="lexical", since=since)
    assert [h.id for h in hits] == [late.id]
    assert same(hits, full(memory, text, limit=10, since=since))
    # as_of: the facts that held then, bounded the same way
    held = memory.search(text, limit=10, mode="lexical", as_of=since)
    assert held and same(held, full(memory, text, limit=10, as_of=since))


def test_structured_queries_keep_full_ranking(memory: Memory) -> None:  # F4
    """What bounded ranking can miss, and why a query in FTS5 syntax is never bounded: the
    best row under full ranking holds only common words (t1, t2 here), none of the rare
    one, so a question does not rank it; `t9 OR t1 OR t2` does."""
    long_tail = " ".join(f"x{i}" for i in range(120))  # long rows: a low bm25 each
    rows = [(f"t9 {long_tail} {i}", "learning") for i in range(40)]
    rows += [(f"t1 filler{i} words", "learning") for i in range(150)]
    rows += [(f"t2 other{i} words", "learning") for i in range(150)]
    rows += [(f"z{i} neither here", "learning") for i in range(700)]
    rows.append(("t1 t2", "decision"))  # short, two common words
    memory.add_facts(rows)
    memory.store.search_budget = Budget(full=10, postings=40)  # type: ignore[attr-defined]
    both = memory.search("t9 OR t1 OR t2", limit=10, mode="lexical")
    assert both[0].content == "t1 t2"
    assert same(both, full(memory, "t9 OR t1 OR t2", limit=10))
    question = memory.search("what about t9 t1 t2?", limit=10, mode="lexical")
    assert question and all(h.content.startswith("t9 ") for h in question)


def test_chunks_are_ranked_bounded_too(memory: Memory) -> None:  # Q1 Q3 Performance
    texts = corpus(600, seed=13)
    for i in range(60):
        sections = "\n\n".join(f"## Part {j}\n\n{texts[10 * i + j]}" for j in range(10))
        memory.write_entry(f"notes-{i:03d}", f"notes {i}", sections)
    memory.daily_append("t0 t1 t3 were on the list today")
    memory.store.search_budget = Budget(full=50, postings=120)  # type: ignore[attr-defined]
    asked = questions(20, seed=17)
    for text in asked:
        hits = memory.search(text, limit=10, mode="lexical", kinds=["global"])
        assert hits and {h.kind for h in hits} == {"global"}
    identical, overlap = agreement(memory, asked, kinds=["global"])
    assert identical >= 0.9 and overlap >= 9.5
    daily = memory.search("what about t0 t1 t3?", limit=10, mode="lexical", kinds=["daily"])
    assert [h.kind for h in daily] == ["daily"]
