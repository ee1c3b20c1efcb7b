"""The Store contract: what every backend behind `open_store` must do, whatever it keeps
rows in (storage/base.py). Each test takes the `store` (or `open_at`) fixture, which is
parametrised by backend (storage.BACKENDS): a new backend proves itself by passing this
file unchanged. Real databases in tmp dirs, real processes for the concurrency contract.

Searches cross the boundary as the parsed query tree (storage/rows.py: Word, Op), never as a
backend's own syntax, so the queries here are trees; rows cross as records
(storage/rows.py, rows_cold.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from memdir.errors import ConflictError, NotFoundError, StorageError, ValidationError
from memdir.models import Provenance
from memdir.paths import Layout
from memdir.settings import Settings
from memdir.storage import BACKENDS, latest_schema, open_store
from memdir.storage.base import Store
from memdir.storage.hashing import text_hash
from memdir.storage.rows import (
    ARCHIVE_FIELDS,
    ARCHIVE_KINDS,
    CachedEntry,
    Chunk,
    FileState,
    Node,
    Op,
    ScoredChunk,
    ScoredFact,
    Word,
)
from memdir.storage.rows_cold import (
    FactIdentity,
    FactPair,
    FileChunks,
    NewChunk,
    NewFact,
    NewVector,
    ProcedurePrint,
    StoredVector,
    Unembedded,
)

BY = Provenance("s-1", "cli", "agent-a")
T = [f"2026-03-{day:02d}T10:00:00Z" for day in range(1, 29)]  # T[i] < T[i + 1]
OpenAt = Callable[..., Store]


def layout_at(root: Path) -> Layout:
    (root / "memory").mkdir(parents=True, exist_ok=True)
    return Layout(str(root), str(root / "memory"))


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def settings_of(backend: str, request: pytest.FixtureRequest) -> Callable[[str], Settings]:
    """settings_of(name): the settings of memory `name`: on PostgreSQL, a scope of its own
    in one fresh database of the test server (W1: scopes keep stores apart, L4)."""
    if backend == "sqlite":
        return lambda name: Settings()
    url = str(request.getfixturevalue("pg_url"))
    return lambda name: Settings(storage_url=url, storage_scope="s_" + name)


@pytest.fixture
def open_at(
    backend: str, tmp_path: Path, settings_of: Callable[[str], Settings]
) -> Iterator[OpenAt]:
    """open_at(name, read_only=False): the store of memory `name` (its own tmp dir)."""
    opened: list[Store] = []

    def open_(name: str = "a", read_only: bool = False) -> Store:
        store = open_store(
            layout_at(tmp_path / name), settings_of(name), read_only, backend=backend
        )
        opened.append(store)
        return store

    yield open_
    for store in opened:
        store.close()


@pytest.fixture
def store(open_at: OpenAt) -> Store:
    return open_at()


def words(*texts: str) -> Node:
    """The OR of words, as query.parse_search builds a plain question."""
    node: Node = Word(texts[0])
    for text in texts[1:]:
        node = Op("OR", node, Word(text))
    return node


def found_ids(found: list[ScoredFact]) -> list[int]:
    return [hit.fact.id for hit in found]


# -- facts (F1-F5, X5) -------------------------------------------------------------------


def test_a_fact_is_stored_with_its_provenance_and_read_back(store: Store) -> None:  # F1 F5
    fact = store.add_fact("convention", "Deploys go out on Tuesdays", T[0], BY)
    assert (fact.category, fact.content, fact.status) == (
        "convention",
        "Deploys go out on Tuesdays",
        "active",
    )
    assert (fact.created, fact.updated, fact.valid_from, fact.valid_to) == (T[0], T[0], T[0], None)
    assert (fact.session_id, fact.surface, fact.agent) == BY
    assert not fact.duplicate
    assert store.get_fact(fact.id) == fact
    assert store.facts_by_id([fact.id, fact.id + 999]) == {fact.id: fact}
    assert store.get_fact(fact.id + 999) is None
    assert store.count_facts() == {"active": 1}


def test_the_same_text_again_is_the_fact_that_says_it(store: Store) -> None:  # X5
    first = store.add_fact("learning", "The CI cache lives in S3", T[0], BY)
    again = store.add_fact("decision", "the  CI cache lives in s3", T[1], BY)
    assert again.duplicate and again.id == first.id and again.category == "learning"
    assert store.fact_saying("THE CI CACHE  lives in S3") == first
    assert store.fact_saying("the CI cache lives elsewhere") is None
    ids = store.add_facts(
        [
            NewFact("learning", "Builds take 4 minutes"),
            NewFact("learning", "the ci cache lives in s3"),
        ],
        T[2],
        BY,
    )
    assert ids[1] == first.id and ids[0] != first.id
    assert store.count_facts() == {"active": 2}


def test_supersede_keeps_the_history_and_its_validity_windows(store: Store) -> None:  # F3
    old = store.add_fact("decision", "Use Postgres 14", T[0], BY)
    done = store.supersede_fact(old.id, None, "Use Postgres 16", T[2], BY, valid_from=T[1])
    assert done.old.id == old.id and done.old.status == "superseded"
    assert done.old.superseded_by == done.new.id and done.new.supersedes == old.id
    assert (done.old.valid_from, done.old.valid_to) == (T[0], T[1])
    assert (done.new.category, done.new.valid_from, done.new.valid_to) == ("decision", T[1], None)
    last = store.supersede_fact(done.new.id, "convention", "Use Postgres 17", T[3], BY)
    assert last.new.category == "convention" and last.new.valid_from == T[3]
    chain = store.fact_chain(done.new.id)
    assert [f.content for f in chain] == ["Use Postgres 14", "Use Postgres 16", "Use Postgres 17"]
    assert store.fact_chain(old.id) == chain
    with pytest.raises(ConflictError):  # nor may the new version begin before the old one
        store.supersede_fact(last.new.id, None, "Use SQLite", T[5], BY, valid_from=T[0])
    unchanged = store.supersede_fact(last.new.id, None, "Use Postgres 17", T[5], BY)
    assert unchanged.new.duplicate and unchanged.new.id == last.new.id
    assert store.count_facts() == {"active": 1, "superseded": 2}


def test_superseding_a_superseded_fact_forks_and_keeps_both_versions(store: Store) -> None:
    """F3 W1: two writers that supersede one fact from the same view of it both keep their
    version; the old fact keeps its first successor and the window the first supersede
    ended it at; a removed fact still cannot be superseded."""
    old = store.add_fact("decision", "Use Postgres 14", T[0], BY)
    first = store.supersede_fact(old.id, None, "Use Postgres 16", T[1], BY).new
    second = store.supersede_fact(old.id, "convention", "Use MySQL 8", T[2], BY)
    assert second.new.supersedes == old.id and second.new.status == "active"
    assert second.new.category == "convention" and second.new.valid_from == T[2]
    assert second.old == store.get_fact(old.id)  # untouched by the second supersede
    assert (second.old.superseded_by, second.old.valid_to) == (first.id, T[1])
    assert store.get_fact(first.id) == first  # the first successor stays active
    assert store.count_facts() == {"active": 2, "superseded": 1}
    chain = store.fact_chain(second.new.id)
    assert [f.id for f in chain] == [old.id, first.id, second.new.id]
    assert store.fact_chain(first.id) == chain == store.fact_chain(old.id)
    assert store.forked_facts() == [old.id]
    # a text an active version of the same history says already: nothing new
    again = store.supersede_fact(old.id, None, "use mysql 8", T[3], BY)
    assert again.new.duplicate and again.new.id == second.new.id
    assert store.count_facts() == {"active": 2, "superseded": 1}
    # a removed fact is not superseded: it no longer holds
    gone = store.add_fact("learning", "A fact then removed", T[0], BY)
    store.remove_fact(gone.id, T[1])
    with pytest.raises(ConflictError, match="removed"):
        store.supersede_fact(gone.id, None, "It came back", T[2], BY)


def test_a_fork_is_settled_by_giving_one_version_the_others_text(store: Store) -> None:
    """F3 W1: a version superseded by the exact text of a sibling that holds ends in that
    sibling (its `superseded_by`), and no new row is written; the fork point stays one."""
    old = store.add_fact("decision", "Deploy on Fridays", T[0], BY)
    a = store.supersede_fact(old.id, None, "Deploy on Mondays", T[1], BY).new
    b = store.supersede_fact(old.id, None, "Deploy on Tuesdays", T[2], BY).new
    done = store.supersede_fact(b.id, None, "deploy on mondays", T[3], BY)
    assert done.new == a and not done.new.duplicate
    assert (done.old.id, done.old.status, done.old.superseded_by) == (b.id, "superseded", a.id)
    assert done.old.valid_to == T[3]
    assert store.count_facts() == {"active": 1, "superseded": 2}
    assert [f.id for f in store.fact_chain(a.id)] == [old.id, a.id, b.id]
    assert [h.fact.id for h in store.search_facts(Word("deploy"), None, None, 10)] == [a.id]
    # an unrelated fact's text is still refused (X5): it is no version of this history
    other = store.add_fact("learning", "Tests run in parallel", T[0], BY)
    with pytest.raises(ConflictError, match=f"fact {other.id} already says this"):
        store.supersede_fact(a.id, None, "tests run in parallel", T[4], BY)


def test_supersede_refuses_a_text_another_active_fact_says(store: Store) -> None:  # F3 X5
    a = store.add_fact("learning", "Tests run in parallel", T[0], BY)
    b = store.add_fact("learning", "Tests use real SQLite files", T[0], BY)
    with pytest.raises(ConflictError):
        store.supersede_fact(a.id, None, "tests use real sqlite files", T[1], BY)
    assert store.get_fact(a.id) == a and store.get_fact(b.id) == b


def test_remove_ends_a_fact_once(store: Store) -> None:  # F3
    fact = store.add_fact("preference", "Answer in French", T[0], BY)
    gone = store.remove_fact(fact.id, T[1])
    assert (gone.status, gone.valid_to, gone.updated) == ("removed", T[1], T[1])
    with pytest.raises(ConflictError):
        store.remove_fact(fact.id, T[2])
    with pytest.raises(NotFoundError):
        store.remove_fact(fact.id + 999, T[2])
    assert store.count_facts() == {"removed": 1}
    size = store.size_of_facts()
    assert (size["removed"].n, size["removed"].chars) == (1, len("Answer in French"))


# -- search by the parsed query (F4, Q1) ---------------------------------------------------


def test_search_facts_answers_the_query_tree(store: Store) -> None:  # F4 Q1
    deploy = store.add_fact("convention", "Deploy the web app on Tuesdays", T[0], BY)
    staging = store.add_fact("decision", "Deploy staging every night", T[1], BY)
    node = store.add_fact("learning", "node.js 20 broke the foo-bar build", T[2], BY)
    quote = store.add_fact("learning", 'The banner says "ship it" when green', T[3], BY)
    assert set(found_ids(store.search_facts(Word("deploy"), None, None, 10))) == {
        deploy.id,
        staging.id,
    }
    both = Op("AND", Word("deploy"), Word("staging"))
    assert found_ids(store.search_facts(both, None, None, 10)) == [staging.id]
    assert found_ids(
        store.search_facts(Op("NOT", Word("deploy"), Word("staging")), None, None, 10)
    ) == [deploy.id]
    assert found_ids(store.search_facts(Word("web app", phrase=True), None, None, 10)) == [
        deploy.id
    ]
    assert found_ids(store.search_facts(Word("app web", phrase=True), None, None, 10)) == []
    assert found_ids(store.search_facts(Word("stag", prefix=True), None, None, 10)) == [staging.id]
    # the words of the tree are text, never syntax: punctuation, operators, quotes
    assert found_ids(store.search_facts(Word("foo-bar"), None, None, 10)) == [node.id]
    assert found_ids(store.search_facts(Word("node.js"), None, None, 10)) == [node.id]
    assert found_ids(store.search_facts(Word("NOT"), None, None, 10)) == []
    assert found_ids(store.search_facts(Word('"ship it"', phrase=True), None, None, 10)) == [
        quote.id
    ]
    # filters
    assert found_ids(store.search_facts(Word("deploy"), "decision", None, 10)) == [staging.id]
    assert found_ids(store.search_facts(Word("deploy"), None, T[1], 10)) == [staging.id]
    assert len(store.search_facts(Word("deploy"), None, None, 1)) == 1


def test_search_ranks_better_matches_first_and_sees_only_active_facts(
    store: Store,
) -> None:  # F3 F4
    one = store.add_fact("learning", "Redis holds the sessions", T[0], BY)
    two = store.add_fact("learning", "Redis holds the sessions and Redis holds the queue", T[0], BY)
    store.add_fact("learning", "Nothing to see here", T[0], BY)
    found = store.search_facts(words("redis", "queue"), None, None, 10)
    assert found_ids(found) == [two.id, one.id]
    assert found[0].score >= found[1].score
    store.supersede_fact(one.id, None, "Valkey holds the sessions", T[1], BY)
    store.remove_fact(two.id, T[1])
    assert store.search_facts(Word("redis"), None, None, 10) == []


def test_search_as_of_finds_what_held_then(store: Store) -> None:  # F3 (validity windows)
    old = store.add_fact("decision", "The API lives at v1", T[0], BY)
    new = store.supersede_fact(old.id, None, "The API lives at v2", T[4], BY).new
    later = store.add_fact("decision", "The API lives behind a gateway", T[6], BY)
    wrong = store.add_fact("decision", "The API lives on a mainframe", T[0], BY)
    store.remove_fact(wrong.id, T[2])  # removed: it was never true, at any date
    api = Word("api")
    assert found_ids(store.search_facts(api, None, None, 10, as_of=T[3])) == [old.id]
    assert found_ids(store.search_facts(api, None, None, 10, as_of=T[5])) == [new.id]
    assert set(found_ids(store.search_facts(api, None, None, 10, as_of=T[7]))) == {new.id, later.id}
    assert store.search_facts(api, None, None, 10, as_of="2026-02-01T00:00:00Z") == []
    assert set(found_ids(store.search_facts(api, None, None, 10))) == {new.id, later.id}


# -- curation: the duplicate guard, staleness, facts brought in whole (X5, doctor) -----------


def test_near_duplicates_are_found_not_refused(store: Store) -> None:  # X5
    a = store.add_fact("learning", "deploy the web app on friday after the tests pass", T[0], BY)
    b = store.add_fact("learning", "deploy the web app on friday after tests pass", T[1], BY)
    other = store.add_fact("learning", "the cat sleeps on the warm laptop keyboard", T[1], BY)
    assert not b.duplicate
    similar = store.similar_facts(b.content, b.id, 0.5, 10)
    assert [(s.fact.id, s.score >= 0.5) for s in similar] == [(a.id, True)]
    assert FactPair(a, b) in store.sketch_pairs()
    assert all(other.id not in (p.first.id, p.second.id) for p in store.sketch_pairs())
    assert store.exact_duplicate_facts() == []


def test_rows_brought_in_whole_keep_their_links(open_at: OpenAt) -> None:  # X5 (import)
    store = open_at()
    store.add_fact("learning", "already here", T[0], BY)
    rows: list[dict[str, object]] = [
        {"id": 7, "category": "decision", "content": "old plan", "status": "superseded",
         "created": T[0], "updated": T[1], "supersedes": None, "superseded_by": 8,
         "session_id": None, "surface": "cli", "agent": None, "valid_from": T[0], "valid_to": T[1]},
        {"id": 8, "category": "decision", "content": "new plan", "status": "active",
         "created": T[1], "updated": T[1], "supersedes": 7, "superseded_by": None,
         "session_id": None, "surface": "cli", "agent": None, "valid_from": T[1], "valid_to": None},
        {"id": 9, "category": "decision", "content": "New  plan", "status": "active",
         "created": T[2], "updated": T[2], "supersedes": None, "superseded_by": None,
         "session_id": None, "surface": "cli", "agent": None, "valid_from": T[2], "valid_to": None},
    ]  # fmt: skip
    mapping = store.insert_fact_rows(rows, keep_ids=False, seen=T[3])
    assert set(mapping) == {7, 8, 9} and len(set(mapping.values())) == 3
    new_plan = store.get_fact(mapping[8])
    assert new_plan is not None and new_plan.supersedes == mapping[7]
    assert [f.content for f in store.fact_chain(mapping[7])] == ["old plan", "new plan"]
    groups = store.exact_duplicate_facts()
    assert [[f.id for f in group] for group in groups] == [[mapping[8], mapping[9]]]
    assert found_ids(store.search_facts(Word("plan"), None, None, 10)) != []
    kept = open_at("b")
    assert kept.insert_fact_rows(rows, keep_ids=True) == {7: 7, 8: 8, 9: 9}
    assert [f.id for f in kept.fact_chain(8)] == [7, 8]


def test_hits_keep_a_fact_from_going_stale(store: Store) -> None:  # doctor's stale facts
    hit = store.add_fact("learning", "found by a search", T[0], BY)
    missed = store.add_fact("learning", "never found", T[0], BY)
    fresh = store.add_fact("learning", "written later", T[5], BY)
    store.record_hits({hit.id: T[4]})
    store.record_hits({hit.id: T[2]})  # an older hit does not move the last one back
    assert [f.id for f in store.stale_facts(T[3])] == [missed.id]
    assert [f.id for f in store.stale_facts(T[6])] == [hit.id, missed.id, fresh.id]
    assert store.archive_counts()["fact_usage"] == 1
    (usage,) = list(store.archive_rows("fact_usage"))
    assert usage == {"fact_id": hit.id, "hits": 2, "last_hit": T[4]}


# -- sessions and tasks (U1-U4, T3) ----------------------------------------------------------


def test_a_new_session_and_its_values_are_one_write(store: Store) -> None:  # U1 K3
    """A host's SessionStart records the session and the host process that runs it in
    one transaction: both or, when the session exists already, neither."""
    store.start_session("s-1", "cli", None, T[0], (("host:1", "s-1"), ("host:2", "s-1")))
    assert (store.get_value("host:1"), store.get_value("host:2")) == ("s-1", "s-1")
    with pytest.raises(ConflictError):
        store.start_session("s-1", "cli", None, T[1], (("host:1", "other"), ("host:3", "s-1")))
    assert (store.get_value("host:1"), store.get_value("host:3")) == ("s-1", None)


def test_sessions_count_what_they_wrote(store: Store) -> None:  # U1 U3 F5
    top = store.start_session("s-1", "cli", None, T[0])
    assert (top.id, top.surface, top.parent_id, top.started, top.ended, top.counts) == (
        "s-1",
        "cli",
        None,
        T[0],
        None,
        {},
    )
    child = store.start_session("s-2", "daemon", "s-1", T[1])
    assert child.is_subagent
    store.start_session("s-3", "repl", None, T[2])
    with pytest.raises(ConflictError):
        store.start_session("s-1", "cli", None, T[3])
    store.add_fact("learning", "one", T[1], BY)  # BY's session is s-1
    store.count_write("s-1", "hot")
    store.count_write("s-1", "hot")
    ended = store.end_session("s-1", T[4])
    assert ended.ended == T[4] and ended.counts == {"hot": 2, "facts": 1}
    assert store.get_session("s-1") == ended
    assert store.get_session("nope") is None
    assert [s.id for s in store.list_sessions(10)] == ["s-3", "s-1"]  # top level, newest first
    assert [s.id for s in store.list_sessions(1)] == ["s-3"]
    reopened = store.reopen_session("s-1")  # U1: a host resumed it; its counts carry on
    assert reopened.ended is None and reopened.counts == {"hot": 2, "facts": 1}


def test_tasks_run_once_and_end_once(store: Store) -> None:  # T3
    parent = store.start_task("build", None, T[0])
    assert (parent.id, parent.parent_id, parent.state, parent.started, parent.ended) == (
        "build",
        None,
        "running",
        T[0],
        None,
    )
    assert store.start_task("build", None, T[1]) == parent  # a retry
    with pytest.raises(ConflictError):
        store.start_task("build", "other", T[1])
    with pytest.raises(NotFoundError):
        store.start_task("lint", "missing", T[1])
    store.start_task("test", "build", T[1])
    done = store.end_task("test", "failed", T[2])
    assert (done.state, done.ended) == ("failed", T[2])
    assert store.get_task("test") == done
    with pytest.raises(ConflictError):
        store.end_task("test", "done", T[3])
    with pytest.raises(ConflictError):
        store.start_task("test", "build", T[3])
    with pytest.raises(NotFoundError):
        store.end_task("nope", "done", T[3])
    assert {t.id: t.state for t in store.all_tasks()} == {"build": "running", "test": "failed"}
    assert store.get_task("nope") is None


# -- caches and values (G4) --------------------------------------------------------------------


def test_caches_and_values_round_trip(store: Store) -> None:  # G4
    entry = CachedEntry(1_000, 42, "what it is", T[0], None, '{"name": "x"}', 12345, "1 2 3")
    store.update_entry_cache({"x": entry, "y": entry._replace(size=7)}, [])
    assert store.entry_cache() == {"x": entry, "y": entry._replace(size=7)}
    assert store.entry_cache(with_meta=False)["x"].meta == ""
    store.update_entry_cache({}, ["y"])
    assert list(store.entry_cache()) == ["x"]
    prints = ProcedurePrint(5, 6, None, "")
    store.update_procedure_prints({"deploy": prints}, [])
    assert store.procedure_prints() == {"deploy": prints}
    store.update_procedure_prints({}, ["deploy"])
    assert store.procedure_prints() == {}
    assert store.entry_listing() is None
    store.set_entry_listing('[["x", [1000, 42, "what it is", null, null]]]')
    assert store.entry_listing() == '[["x", [1000, 42, "what it is", null, null]]]'
    assert store.get_value("distill") is None
    store.set_value("distill", T[0])
    store.set_value("distill", T[1])
    assert store.get_value("distill") == T[1]


# -- the search index: chunks and vectors (Q1-Q3) ------------------------------------------------


def chunk(start: int, content: str, date: str | None = T[0]) -> NewChunk:
    return NewChunk(start, start + 2, date, content, text_hash(content))


def test_chunks_are_replaced_per_file_and_searched_by_the_query_tree(store: Store) -> None:  # Q1
    state = FileState("global", 111, 20, "h1")
    store.replace_chunks(
        [
            FileChunks(
                "global/deploy.md",
                state,
                [chunk(1, "deploy with the blue button"), chunk(4, "then watch the dashboards")],
            ),
            FileChunks(
                "daily/2026-03-02.md",
                FileState("daily", 5, 9, "h2"),
                [chunk(1, "deployed the hotfix", T[1])],
            ),
        ],
        [],
    )
    assert store.indexed_files() == {
        "global/deploy.md": state,
        "daily/2026-03-02.md": FileState("daily", 5, 9, "h2"),
    }
    found = store.search_chunks(Word("deploy", prefix=True), ("global", "daily"), None, 10)
    assert all(isinstance(hit, ScoredChunk) for hit in found)
    assert sorted(hit.chunk.path for hit in found) == ["daily/2026-03-02.md", "global/deploy.md"]
    only_global = store.search_chunks(Word("deploy", prefix=True), ("global",), None, 10)
    (hit,) = only_global
    assert (hit.chunk.path, hit.chunk.kind, hit.chunk.start_line, hit.chunk.end_line) == (
        "global/deploy.md",
        "global",
        1,
        3,
    )
    assert [
        h.chunk.path
        for h in store.search_chunks(Word("deploy", prefix=True), ("global", "daily"), T[1], 10)
    ] == ["daily/2026-03-02.md"]
    assert store.chunks_by_id([hit.chunk.id]) == {hit.chunk.id: hit.chunk}
    assert isinstance(hit.chunk, Chunk)
    # a state-only change keeps the chunks; a new text replaces them; a gone file leaves
    store.replace_chunks([FileChunks("global/deploy.md", state._replace(mtime_ns=222), None)], [])
    assert store.indexed_files()["global/deploy.md"].mtime_ns == 222
    assert len(store.search_chunks(Word("dashboards"), ("global",), None, 10)) == 1
    store.replace_chunks(
        [FileChunks("global/deploy.md", state, [chunk(1, "ship with the red button")])], []
    )
    assert store.search_chunks(Word("dashboards"), ("global",), None, 10) == []
    store.replace_chunks([], ["daily/2026-03-02.md"])
    assert list(store.indexed_files()) == ["global/deploy.md"]
    assert store.search_chunks(Word("hotfix"), ("daily",), None, 10) == []


def test_vectors_are_kept_by_owner_and_text(store: Store) -> None:  # Q2
    fact = store.add_fact("learning", "vectors live beside rows", T[0], BY)
    text = "a chunk to embed"
    store.replace_chunks(
        [FileChunks("global/x.md", FileState("global", 1, 1, "h"), [chunk(1, text)])], []
    )
    waiting = store.unembedded("m", 100)
    assert all(isinstance(item, Unembedded) for item in waiting)
    assert {(w.owner, w.text, w.hash) for w in waiting} == {
        ("fact", fact.content, text_hash(fact.content)),
        ("chunk", text, text_hash(text)),
    }
    assert store.count_unembedded("m") == 2
    assert store.unembedded_items("m", [fact.id], []) == [w for w in waiting if w.owner == "fact"]
    assert store.vector_generation("m").n == 0
    blobs = {w.owner: bytes([len(w.owner)]) * 8 for w in waiting}
    store.put_vectors(
        "m", [NewVector(w.owner, w.owner_id, w.hash, blobs[w.owner]) for w in waiting]
    )
    assert store.count_unembedded("m") == 0 and store.unembedded("m", 100) == []
    assert store.count_unembedded("other-model") == 2
    assert store.vector_generation("m").n == 2
    assert sorted(store.iter_vectors("m")) == sorted(
        StoredVector(w.owner, w.owner_id, blobs[w.owner]) for w in waiting
    )
    assert store.vectors_by_hash("m", [text_hash(text), "nope"]) == {
        text_hash(text): blobs["chunk"]
    }
    # a chunk whose text did not change keeps its vector when its file is re-chunked (Q2)
    store.replace_chunks(
        [
            FileChunks(
                "global/x.md", FileState("global", 2, 2, "h"), [chunk(1, text), chunk(4, "new")]
            )
        ],
        [],
    )
    assert [w.text for w in store.unembedded("m", 100)] == ["new"]
    # a vector for an owner that is gone is not stored
    store.remove_fact(fact.id, T[1])
    before = store.vector_generation("m")
    store.put_vectors(
        "m",
        [NewVector("fact", fact.id, "zz", b"\0" * 8), NewVector("chunk", 10_000, "zz", b"\0" * 8)],
    )
    assert store.vector_generation("m") == before


def test_the_vector_generation_changes_with_every_change_and_counts_them(
    store: Store,
) -> None:  # Q2
    """A cached matrix is current while the generation holds: each add, replacement and
    removal gives a new one, and its count is the rows'. Removing the newest vector and
    storing another (a supersede of the newest fact) reuses a SQLite rowid: the count and
    the top id come back, the removals do not."""
    facts = [store.add_fact("learning", f"generation fact {n}", T[0], BY) for n in range(3)]
    seen = [store.vector_generation("m")]

    def step() -> None:
        now = store.vector_generation("m")
        assert now not in seen
        assert now.n == len(list(store.iter_vectors("m")))
        seen.append(now)

    def put(fact_id: int, blob: bytes) -> None:
        store.put_vectors("m", [NewVector("fact", fact_id, "h", blob)])

    for fact in facts:
        put(fact.id, b"\1" * 8)
        step()
    put(facts[1].id, b"\2" * 8)  # replaced
    step()
    store.remove_fact(facts[2].id, T[1])  # the newest vector goes with its fact
    step()
    put(store.add_fact("learning", "generation fact 3", T[1], BY).id, b"\3" * 8)
    step()
    store.put_vectors("other", [NewVector("fact", facts[0].id, "h", b"\4" * 8)])
    assert store.vector_generation("m") == seen[-1]  # another model's row
    assert store.drop_vectors("m") == 1
    assert store.vector_generation("m") == seen[-1]
    assert store.drop_vectors("another") == 3  # a change of model: all of m's go
    assert store.vector_generation("m").n == 0 and store.vector_generation("m") != seen[-1]


# -- the archive (export / import) ---------------------------------------------------------------


def test_archive_rows_restore_into_another_store(open_at: OpenAt) -> None:  # archive: export/import
    source = open_at("source")
    a = source.add_fact("learning", "exported fact", T[0], BY)
    b = source.supersede_fact(a.id, None, "exported fact, new version", T[1], BY).new
    source.start_session("s-1", "cli", None, T[0])
    source.count_write("s-1", "daily")
    source.start_task("t-1", None, T[0])
    source.set_value("k", "v")
    source.record_hits({b.id: T[2]})
    with source.snapshot():
        counts = source.archive_counts()
        rows = {kind: list(source.archive_rows(kind)) for kind in ARCHIVE_KINDS}
    assert counts == {kind: len(found) for kind, found in rows.items()}
    assert counts == {
        "fact": 2,
        "fact_usage": 1,
        "task": 1,
        "session": 1,
        "session_write": 1,
        "kv": 1,
    }
    for kind, found in rows.items():
        assert all(tuple(row) == ARCHIVE_FIELDS[kind] for row in found), kind
    assert rows["session_write"] == [{"session_id": "s-1", "what": "daily", "n": 1}]
    assert source.schema_version() == source.latest_schema() == latest_schema()
    assert source.fact_identities() == {
        FactIdentity("learning", "exported fact", T[0]): a.id,
        FactIdentity("learning", "exported fact, new version", T[1]): b.id,
    }
    target = open_at("target")
    assert target.archive_counts() == dict.fromkeys(ARCHIVE_KINDS, 0)
    target.insert_fact_rows(rows["fact"], keep_ids=True)
    target.restore_rows({kind: found for kind, found in rows.items() if kind != "fact"})
    assert {kind: list(target.archive_rows(kind)) for kind in ARCHIVE_KINDS} == rows
    assert target.existing_keys("session", ["s-1", "s-9"]) == {"s-1"}
    assert target.existing_keys("task", ["t-1"]) == {"t-1"}
    assert target.existing_keys("kv", ["k", "x"]) == {"k"}
    assert found_ids(target.search_facts(Word("exported"), None, None, 10)) == [b.id]


# -- the read-only look (doctor) -------------------------------------------------------------------


def test_the_read_only_look_never_creates_nor_writes(open_at: OpenAt, tmp_path: Path) -> None:  # Z
    look = open_at("none", read_only=True)
    assert look.get_fact(1) is None and look.count_facts() == {} and look.all_tasks() == []
    assert look.search_facts(Word("x"), None, None, 10) == []
    assert not os.listdir(tmp_path / "none" / "memory")  # nothing was made
    writer = open_at("db")
    fact = writer.add_fact("learning", "seen by the look", T[0], BY)
    writer.close()
    look = open_at("db", read_only=True)
    assert look.get_fact(fact.id) == fact
    assert found_ids(look.search_facts(Word("look"), None, None, 10)) == [fact.id]
    assert look.read_only and not writer.read_only
    health = look.inspect()
    assert health.problems == ["ok"] and health.schema == health.latest == latest_schema()
    assert health.bytes > 0 and 0 <= health.free_bytes <= health.bytes
    with pytest.raises(StorageError):
        look.add_fact("learning", "refused", T[1], BY)
    with pytest.raises(StorageError):
        look.set_value("k", "v")
    look.close()
    again = open_at("db")
    assert again.count_facts() == {"active": 1} and again.get_value("k") is None


def test_an_unknown_backend_is_refused(tmp_path: Path) -> None:  # W1: the backend is chosen
    with pytest.raises(ValidationError, match="unknown store backend"):
        open_store(layout_at(tmp_path), Settings(), backend="nope")


# -- two processes, two stores, one memory (L3) ---------------------------------------------

WRITER = """
import json, os, sys, time
from memdir.models import Provenance
from memdir.paths import Layout
from memdir.settings import Settings, with_env
from memdir.storage import open_store

root, backend, me = sys.argv[1:4]
n, target = int(sys.argv[4]), int(sys.argv[5])
settings = with_env(Settings(), os.environ)  # PostgreSQL: the URL and scope come from there
store = open_store(Layout(root, os.path.join(root, "memory")), settings, backend=backend)
open(os.path.join(root, "ready-" + me), "w").close()
while not os.path.exists(os.path.join(root, "go")):
    time.sleep(0.001)
by = Provenance(None, "cli", me)
ids, shared = [], []
for i in range(n):
    ids.append(store.add_fact("learning", f"writer {me} fact {i}", "2026-03-01T10:00:00Z", by).id)
    shared.append(store.add_fact("learning", f"said by both {i}", "2026-03-01T10:00:00Z", by).id)
    store.count_write("s-shared", "hot")
# then both replace the same fact at once: both versions are kept (a fork, F3)
open(os.path.join(root, "done-" + me), "w").close()
while not all(os.path.exists(os.path.join(root, "done-" + w)) for w in "ab"):
    time.sleep(0.001)
won = store.supersede_fact(target, None, f"the plan of {me}", "2026-03-02T10:00:00Z", by).new.id
store.close()
print(json.dumps({"ids": ids, "shared": shared, "won": won}))
"""


def test_two_processes_writing_through_two_stores_lose_and_double_nothing(
    backend: str, tmp_path: Path, settings_of: Callable[[str], Settings]
) -> None:  # L3 F1 F3 X5 W1
    root = tmp_path / "shared"
    layout = layout_at(root)
    settings = settings_of("shared")
    env = dict(os.environ)
    if settings.storage_url:
        env.update(MEMDIR_DATABASE_URL=settings.storage_url, MEMDIR_DATABASE_SCOPE="s_shared")
    setup = open_store(layout, settings, backend=backend)
    setup.start_session("s-shared", "cli", None, T[0])  # both count writes on one session
    target = setup.add_fact("decision", "the plan", T[0], BY)  # both supersede it
    setup.close()
    script = tmp_path / "writer.py"
    script.write_text(textwrap.dedent(WRITER), encoding="utf-8")
    n = 40
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(root), backend, me, str(n), str(target.id)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for me in ("a", "b")
    ]
    try:
        deadline = time.monotonic() + 60  # a timeout for a hung start, not a measure
        while not all((root / f"ready-{me}").exists() for me in ("a", "b")):
            assert time.monotonic() < deadline, "the writers never started"
            assert all(p.poll() is None for p in procs), [p.communicate() for p in procs]
            time.sleep(0.01)
        (root / "go").touch()
        results = []
        for proc in procs:
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
            results.append(json.loads(out))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    store = open_store(layout, settings, backend=backend)
    try:
        own = [i for r in results for i in r["ids"]]
        assert len(set(own)) == 2 * n  # every fact of each writer, each its own id
        assert results[0]["shared"] == results[1]["shared"]  # the same text stored once
        won = sorted(r["won"] for r in results)
        assert None not in won and won[0] != won[1]  # both supersedes kept: a fork (F3)
        assert [f.id for f in store.fact_chain(target.id)] == [target.id, *won]
        assert store.count_facts() == {"active": 3 * n + 2, "superseded": 1}
        assert store.forked_facts() == [target.id]
        session = store.get_session("s-shared")
        assert session is not None and session.counts == {"hot": 2 * n}
        assert store.inspect().problems == ["ok"]
    finally:
        store.close()
