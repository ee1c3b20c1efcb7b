"""A hit's company in the ranking (Q3): its neighbours and its group, and the calibrated
semantic score (Q2). Real stores, real SQLite; the model where the extra is installed."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest

from memdir import Memory
from memdir.storage import embeddings
from memdir.storage.rows import Op, Word
from memdir.storage.sqlite import groups

needs_model = pytest.mark.skipif(not embeddings.available(), reason="no embeddings extra")


def _session(memory: Memory, texts: list[str]) -> list[int]:
    """Facts written one after another by one session, as an agent writes them."""
    session = memory.start_session("cli")
    memory.bind_session(session.id)
    try:
        return [memory.add_fact(text, "learning").id for text in texts]
    finally:
        memory.end_session(session.id)
        memory.bind_session(None)


def _words(*words: str) -> Op | Word:
    node: Op | Word = Word(words[0])
    for word in words[1:]:
        node = Op("OR", node, Word(word))
    return node


def _owners(memory: Memory, node: Op | Word) -> set[str]:
    """The sessions and files whose group documents match `node`."""
    pages = list(memory.store.group_scores(node))
    db = memory.store._require()
    marks = ", ".join("?" * len(pages))
    return {
        o for (o,) in db.execute(f"SELECT owner FROM search_groups WHERE id IN ({marks})", pages)
    }


def test_a_hit_in_a_session_about_the_question_ranks_first(memory: Memory) -> None:  # Q3
    """Two facts match the same word equally; the one whose session is about the rest of
    the question ranks first, in lexical and in hybrid mode."""
    elsewhere = _session(memory, ["The hotel is next to the station", "Dentist on Monday"])
    [_, trip_hotel, _] = _session(
        memory,
        ["We planned the trip to Lisbon", "The hotel is next to the river", "Lisbon in May"],
    )
    for mode in ("lexical", "hybrid") if embeddings.available() else ("lexical",):
        hits = memory.search("Lisbon trip hotel", mode=mode, kinds=["fact"])
        ids = [h.id for h in hits]
        assert ids.index(trip_hotel) < ids.index(elsewhere[0]), mode
    lexical = memory.search("Lisbon trip hotel", mode="lexical", kinds=["fact"])
    assert lexical[0].score == 1.0  # Q1: lexical scores stay a share of the best


def test_lexical_search_shows_only_what_matched(memory: Memory) -> None:  # Q3 F4
    """A neighbour lends its score but a lexical search never shows an item that holds
    none of the question's words."""
    _session(memory, ["The deploy freeze starts on Friday", "ok, agreed", "Lunch at noon"])
    hits = memory.search("deploy freeze", mode="lexical")
    assert [h.content for h in hits] == ["The deploy freeze starts on Friday"]


def test_a_structured_query_is_ranked_by_its_words_alone(memory: Memory) -> None:  # F4 Q3
    a = memory.add_fact("alpha beta", "learning")
    _session(memory, ["alpha gamma", "gamma gamma gamma beta"])
    plain = memory.store.search_facts(_words("alpha"), None, None, 10)
    hits = memory.search('"alpha"', mode="lexical")
    assert [h.id for h in hits] == [f.id for f, _ in plain]
    assert a.id in [h.id for h in hits]


def test_group_documents_follow_every_write(memory: Memory) -> None:  # Q3
    """A session's document holds its active facts: a superseded or removed fact's words
    leave it in the same transaction; a file's document holds its chunks."""
    [kiwi, tractor] = _session(memory, ["kiwi harvest in March", "tractor fuel on Monday"])
    session = memory.get_fact(kiwi).session_id
    assert _owners(memory, Word("kiwi")) == {f"session:{session}"}
    memory.supersede_fact(kiwi, "apple harvest in March")  # by no session: in no group
    assert _owners(memory, Word("kiwi")) == set() == _owners(memory, Word("harvest"))
    memory.remove_fact(tractor)
    assert _owners(memory, Word("tractor")) == set()
    memory.write_entry("orchard", "# Orchard\n\nPear trees by the wall.\n", "the orchard")
    memory.search("pear", mode="lexical")  # a search brings the chunk index up to date
    assert _owners(memory, Word("pear")) == {"file:global/orchard.md"}
    memory.remove_entry("orchard")
    memory.search("pear", mode="lexical")
    assert _owners(memory, Word("pear")) == set()


def test_a_long_session_is_paged_and_a_write_rebuilds_one_page(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:  # Q3
    """A write costs the same in a long session as in a short one: the session's facts are
    cut into pages of PAGE_CHARS in the order written, and a new fact changes the last."""
    monkeypatch.setattr(groups, "PAGE_CHARS", 70)
    session = memory.start_session("cli")
    memory.bind_session(session.id)
    for word in ("oak", "elm", "ash", "yew"):
        memory.add_fact(f"a note about the {word} tree here", "learning")
    db = memory.store._require()
    before = db.execute("SELECT id, first, last FROM search_groups ORDER BY first").fetchall()
    assert len(before) == 2  # two facts a page
    memory.add_fact("a note about the fir", "learning")
    after = db.execute("SELECT id, first, last FROM search_groups ORDER BY first").fetchall()
    assert after[0] == before[0] and len(after) == 3  # the full page is left as it was
    assert _owners(memory, Word("fir")) == {f"session:{session.id}"}
    hits = memory.search("oak tree", mode="lexical", kinds=["fact"])
    assert hits[0].content == "a note about the oak tree here"


def test_an_older_store_gets_its_groups_built(memory: Memory, state_dir: Path) -> None:  # Q3 L3
    """The migration builds the documents of what a store held before groups existed."""
    [fact] = _session(memory, ["kiwi harvest in March"])
    session = memory.get_fact(fact).session_id
    memory.close()
    db = sqlite3.connect(Memory(create=False).layout.db)
    db.executescript(
        "DROP TABLE search_groups; DROP TABLE groups_fts; DROP TABLE groups_dirty; "
        "DROP TRIGGER facts_group_ai; DROP TRIGGER facts_group_au; DROP TRIGGER facts_group_ad; "
        "DROP TRIGGER chunks_group_ai; DROP TRIGGER chunks_group_ad; "
        "DROP TABLE entry_listing; "  # and what came after: a store of version 8
        "DELETE FROM schema_migrations WHERE version >= 9; PRAGMA user_version = 8;"
    )
    db.close()
    with Memory() as reopened:
        assert _owners(reopened, Word("kiwi")) == {f"session:{session}"}


@pytest.mark.embeddings
@needs_model
def test_a_paraphrase_passes_the_default_min_score(memory: Memory) -> None:  # Q2
    """Calibrated: 0.5 means as alike as the closest few unrelated memories, whatever the
    model's raw cosines; "feline pet" finds the kitten (a raw cosine under 0.5)."""
    kitten = memory.add_fact("I adopted a kitten last spring", "learning")
    memory.add_fact("The quarterly report is due on Friday", "learning")
    memory.embed_pending()
    hits = memory.search("feline pet", mode="semantic")
    assert [h.id for h in hits] == [kitten.id]
    assert hits[0].score >= 0.5


@pytest.mark.embeddings
@needs_model
def test_hybrid_brings_in_the_neighbour_that_answers(memory: Memory) -> None:  # Q3
    """The answer says none of the question's words; the fact its session wrote just
    before it does. Hybrid ranks the answer in, next to that fact."""
    [question, answer, _] = _session(
        memory,
        [
            "When is the deploy freeze this quarter?",
            "ok, Friday then",
            "Lunch at noon",
        ],
    )
    for i in range(30):
        memory.add_fact(f"Unrelated note {i} about invoices and paper stock", "learning")
    memory.embed_pending()
    ids = [h.id for h in memory.search("deploy freeze", mode="hybrid", limit=5)]
    assert ids[0] == question and answer in ids


@pytest.mark.parametrize("bad", [("a", "b"), 12, None, b"kiwi"])
def test_a_query_that_is_not_text_is_a_clear_error(memory: Memory, bad: object) -> None:  # Q1 Z
    from memdir.errors import ValidationError

    with pytest.raises(ValidationError, match="give the question as text"):
        memory.search(bad)  # type: ignore[arg-type]


def test_a_question_naming_a_month_finds_the_run_written_then(state_dir: Path) -> None:  # Q3
    """The days a run was written are searchable through its group, in words, while no
    fact's own text gains a date."""
    import calendar

    from memdir.testing import FixedClock

    clock = FixedClock(calendar.timegm((2023, 5, 8, 12, 0, 0)))
    with Memory(clock=clock) as memory:
        [may] = _session(memory, ["Booked the dentist appointment"])
        clock.now = calendar.timegm((2023, 9, 20, 12, 0, 0))
        [september] = _session(memory, ["Booked the dentist appointment again"])
        hits = memory.search("dentist appointment in May 2023", mode="lexical")
        assert [h.id for h in hits][:2] == [may, september]
        assert memory.get_fact(may).content == "Booked the dentist appointment"
        hits = memory.search("dentist appointment September", mode="lexical")
        assert hits[0].id == september


@pytest.mark.embeddings
@needs_model
def test_the_calibration_is_measured_on_the_shipped_set() -> None:  # Q2
    """The model's constants are what its cosines are on the memory-like calibration set
    that ships with memdir, so anyone can measure them again (and for another model)."""
    from memdir import search

    model = embeddings.default_embedder()
    mean, p99 = search.calibrate(model)
    assert search.CALIBRATION[model.name] == pytest.approx((mean, p99), abs=0.002)
    assert 0.0 < mean < p99 < 1.0


def test_scoring_some_pages_gives_their_scores_and_the_best(memory: Memory) -> None:  # Q3
    """A hit's group share needs its page's bm25 and the best page's, not the bm25 of every
    page a question's common words match: asked for some pages, the store scores those and
    whatever can be the best, each score the same as when every match is ranked."""
    rng = random.Random(7)
    common = ["river", "stone", "bridge", "lantern"]
    for n in range(60):
        texts = [
            " ".join(rng.sample(common, 2) + (["heron"] if n % 20 == 3 and i == 1 else []))
            + f" note {n} {i}"
            for i in range(4)
        ]
        _session(memory, texts)
    db = memory.store._require()
    every = [page for (page,) in db.execute("SELECT id FROM search_groups ORDER BY id")]
    node = _words("river", "lantern", "heron")
    full = memory.store.group_scores(node)
    best = max(full.values())
    assert len(full) == 60
    for asked in ([], every[:1], every[10:30], every[3:4], every):
        got = memory.store.group_scores(node, asked)
        assert max(got.values()) == best  # the same float: the same MATCH scored it
        assert all(full[page] == score for page, score in got.items())
        assert {p for p in asked if p in full} <= set(got)
    # a page holding the rare word bounds the rest: only the pages holding it can be best
    # (the common words are in every page: they add next to nothing to any)
    assert full[every[3]] > 1 and len(memory.store.group_scores(node, every[3:4])) == 3
    # one word, or a structured query, is ranked in full
    assert memory.store.group_scores(Word("river"), every[:2]) == memory.store.group_scores(
        Word("river")
    )
    both = Op("AND", Word("river"), Word("heron"))
    assert memory.store.group_scores(both, every[:2]) == memory.store.group_scores(both)
